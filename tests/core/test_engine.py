"""Engine semantics: how the graph is recorded, walked back and freed.

Reuse and accumulation, deep chains, grad mode (no_grad / enable_grad, per thread and task),
retain_grad, backward through a freed graph, the scalar-seed rule, backward_steps and tracers,
and dtypes: lists and randn give float32, NumPy arrays keep theirs, gradients keep their
input's dtype, a float32 graph never computes in float64, integer tensors never require grad.
"""

import asyncio
import threading
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import autograd
from tinyattn.autograd import backward_steps, tracing
from tinyattn.ops import REGISTRY
from tinyattn.ops import samples as S


def leaf(values, dtype=np.float64):
    return ta.tensor(np.asarray(values, dtype=dtype), requires_grad=True)


# ---- reuse and accumulation --------------------------------------------------------------------


def test_reused_input_accumulates():
    a = leaf(3.0)
    b = a + a  # a is used twice by one op
    c = b * b  # b is used twice by one op: c = 4 a², dc/da = 8 a
    c.backward()
    assert a.grad.item() == 8 * 3.0


def test_diamond_and_vector_reuse():
    av = np.array([0.5, -1.0, 2.0])
    a = leaf(av)
    b = a.exp()
    c = b * a + b.sum() * a - a / b  # b reaches c three ways, a four
    c.sum().backward()
    e = np.exp(av)
    want = e * av + e + e.sum() + e * av.sum() - (1 - av) / e  # d/da_i of sum(c)
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-12)


def test_zero_dim_intermediates_keep_their_gradient():
    # x * y and x.sum() on NumPy give NumPy scalars (np.float64 is a float): never constants
    x, y = leaf(0.3), leaf(1.2)
    (x * y - x / y).backward()
    np.testing.assert_allclose([x.grad.item(), y.grad.item()], [1.2 - 1 / 1.2, 0.3 + 0.3 / 1.44])
    a = leaf([1.0, 2.0, 3.0])
    (a.sum() * a.mean() + a.max() ** 2.0).backward()
    np.testing.assert_allclose(a.grad.numpy(), 2.0 + 6.0 / 3 + np.array([0, 0, 6.0]))


def test_grad_accumulates_across_backward_calls_and_only_on_leaves():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    y.sum().backward()
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 3.0 + 2 * np.array([1.0, 2.0]))
    with pytest.warns(UserWarning, match="not a leaf"):  # (as torch: a common slip)
        assert y.grad is None  # interior tensors keep no gradient unless they ask
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is not None and (x * 1).detach().grad is None  # leaves: no warning


def test_constants_and_detached_inputs_get_no_gradient():
    x = leaf([1.0, 2.0])
    c = ta.tensor(np.array([5.0, 6.0]))
    d = x.detach()
    (x * c + d * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 8.0])
    assert c.grad is None and d.grad is None and not d.requires_grad


# ---- deep chains ------------------------------------------------------------------------------


ADD_INTO = [(name, i) for name in sorted(REGISTRY) if REGISTRY[name].add_into is not None
            for i in range(len(REGISTRY[name].samples))]


@pytest.mark.parametrize("name,index", ADD_INTO, ids=[f"{n}-{i}" for n, i in ADD_INTO])
def test_add_into_gives_the_vjps_gradient(name, index, monkeypatch):
    # backward adds a getitem's gradient straight into its input's running sum; with three
    # slices and a second use of the input that must equal zero-filled VJPs summed
    op = REGISTRY[name]
    inputs, params = op.samples[index]

    def grads():
        (x, *rest) = S.materialize(inputs, np.random.default_rng(index), _float64)
        y = x.exp()  # an interior node: its sum is owned by the walk, not a leaf's .grad
        outs = [op(y, *rest, **params) for _ in range(3)]
        total = sum((o * (k + 1.0)).sum() for k, o in enumerate(outs)) + (y * y).sum()
        total.backward()
        return x.grad.numpy()

    fast = grads()
    monkeypatch.setattr(op, "add_into", None)
    np.testing.assert_allclose(fast, grads(), rtol=1e-13, atol=1e-13)


def _float64(values, requires_grad):
    return ta.tensor(values, requires_grad=requires_grad)


def _backward_peak(out, like):
    """tracemalloc's peak during out.backward(), in arrays of `like`'s size."""
    import tracemalloc

    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out.backward()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak / like._data.nbytes


def test_slices_and_repeated_uses_add_their_gradients_in_place():
    # three slices of y: one zero-filled buffer for y's gradient, which the second and third
    # slices add into (not a buffer per slice, nor a copy per slice); then y's VJP sums it to
    # x's third of the size
    x = leaf(np.ones((1, 128, 256)))
    y = x.expand(3, 128, 256)
    assert _backward_peak(y[0].sum() + y[1].sum() * 2.0 + y[2].sum() * 3.0, y) < 1.9
    np.testing.assert_array_equal(x.grad.numpy(), np.full((1, 128, 256), 6.0))
    # four uses of y: the second part makes a new sum, the third and fourth add into it
    x = leaf(np.ones((128, 256)))
    y = x * 1.0
    out = (y * 2.0).sum() + (y * 3.0).sum() + (y * 4.0).sum() + (y * 5.0).sum()
    assert _backward_peak(out, x) < 3.5
    np.testing.assert_array_equal(x.grad.numpy(), np.full((128, 256), 14.0))
    # parts that are not arrays of their own (add passes g on): the first is kept as it is,
    # the second makes a new sum, the third and fourth add into it, and the leaf's .grad
    # takes that sum without a copy: one buffer at most
    x = leaf(np.ones((128, 256)))
    out = (x + 2.0).sum() + (x + 3.0).sum() + (x + 4.0).sum() + (x + 5.0).sum()
    assert _backward_peak(out, x) < 1.5
    np.testing.assert_array_equal(x.grad.numpy(), np.full((128, 256), 4.0))


@pytest.mark.parametrize("order", ["slice first", "slice last"])
def test_zero_d_gradients_are_summed_and_written_as_arrays(order):
    """A 0-d VJP result is often a NumPy scalar, which nothing can add into: the walk sums such
    parts anew and gives the leaf an array of its own, whichever part comes first."""
    x = leaf(2.0)
    y = x * 3.0
    out = y * 2.0 + y[()] if order == "slice first" else y[()] + y * 2.0
    out = out + x * 4.0  # a fresh 0-d part straight into the leaf
    out.backward()
    assert isinstance(x.grad._data, np.ndarray) and x.grad._data.shape == ()
    assert float(x.grad.numpy()) == 3.0 * (2.0 + 1.0) + 4.0
    x.grad._data[...] = 0.0  # its own: writable


def test_a_node_records_every_input_off_the_graph():
    """Inputs without a graph (a mask, a no-grad tensor) keep their shapes and dtypes on the
    node, each at its place, for the pictures and reports."""
    x = leaf(np.ones((2, 3)))
    mask = ta.tensor(np.array([[True, False, True]]))  # (1, 3)
    other = ta.tensor(np.zeros(3, dtype=np.float32))  # (3,)
    node = F.where(mask, x, other)._node
    assert node.shapes == [(1, 3), (2, 3), (3,)]
    assert node.dtypes == [np.dtype(bool), np.dtype(np.float64), np.dtype(np.float32)]


def test_sliced_float32_gradients_stay_float32_on_the_way_back():
    # the buffer backward adds slices into takes the input's dtype (not NumPy's float64)
    seen = {}

    class Watch(ta.autograd.Tracer):
        def backward(self, node, g, grads):
            seen[node.op.name] = g.dtype

    x = leaf([[1.0, 2.0], [3.0, 4.0]], np.float32)
    h = x * 1.0
    out = h[0].sum() + h[1].sum() * 2.0
    mul = ta.ops.REGISTRY["mul"]
    real_vjp = mul.vjp
    got = []

    def vjp(be, g, saved, **kw):
        got.append(g.dtype)
        return real_vjp(be, g, saved, **kw)

    mul.vjp = vjp
    try:
        out.backward()
    finally:
        mul.vjp = real_vjp
    assert got and all(dt == np.float32 for dt in got)
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 1.0], [2.0, 2.0]])
    # a float32 node whose user computes in float64 gets its gradient back in float32
    y = leaf([1.0, 2.0], np.float32)
    h = y * 1.0
    with tracing(Watch()):
        (h * leaf([3.0, 4.0])).sum().backward()
    assert seen["mul"] == np.float32  # (the last mul to run is h = y * 1.0)


def test_a_copy_made_by_a_view_op_does_not_share_its_inputs_memory():
    # reshape of a transposed tensor copies: changing the copy is not a change of the input,
    # nor the input's a change of the copy
    x = leaf(np.arange(6.0).reshape(2, 3))
    a = x * 1.0
    copied = a.T.reshape(6)
    a.add_(1.0)
    view = a.reshape(3, 2)  # a true view: it sees the next change, its history too
    a.add_(1.0)
    assert view.numpy().tolist() == [[2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
    assert view.grad_fn.name() == "AsStridedBackward0"  # (torch's: read off the new a)
    assert copied.numpy().tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]  # (a copy: unchanged)
    assert copied._version == 0 and a._version == view._version == 2


def test_an_op_saving_inputs_and_output_checks_both():
    # hypot keeps x, y and its output; its output's counter is made later (when mul keeps it)
    # and must not replace the inputs' entries
    a, b = leaf([3.0]) * 1.0, leaf([4.0]) * 1.0
    z = ta.hypot(a, b)
    w = (z * z).sum()
    with ta.no_grad():
        a.add_(1.0)
    with pytest.raises(ta.GraphError, match="changed in place"):
        w.backward()


def test_zero_grads_drops_gradients_by_default():
    from tinyattn.autograd import zero_grads

    t = leaf([1.0, 2.0])
    (t * t).sum().backward()
    zero_grads([t])
    assert t.grad is None
    (t * t).sum().backward()
    held = t.grad
    zero_grads([t], set_to_none=False)
    assert t.grad is held and held.numpy().tolist() == [0.0, 0.0]


def test_gradients_held_elsewhere_are_never_added_to_in_place():
    # x's first gradient part is a view of the gradient the caller passed (reshape's VJP),
    # the next a getitem's: the walk must copy before adding in place
    x = leaf([1.0, 2.0, 3.0])
    out = x[0:3] + x.reshape(3)
    seed = np.array([1.0, 10.0, 100.0])
    out.backward(seed)
    assert seed.tolist() == [1.0, 10.0, 100.0]
    assert x.grad.numpy().tolist() == [2.0, 20.0, 200.0]
    # a 0-d input used three times: the sums are NumPy scalars, never added to in place
    s = leaf(2.0)
    (s * 2.0 + s * 3.0 + s * 4.0).backward()
    assert s.grad.item() == 9.0


def test_tracers_see_partial_sums_that_are_never_changed_afterwards():
    seen = []

    class Keep(ta.autograd.Tracer):
        def accumulate(self, node, user, total):
            seen.append((node, total, total.copy()))

    x = leaf(np.arange(6.0))
    h = x * 1.0
    out = (h[0:2].sum() + h[2:4].sum() * 2.0 + h[4:6].sum() * 3.0 + (h * h).sum())
    with tracing(Keep()):
        out.backward()
    assert len(seen) >= 3 and {id(node) for node, _, _ in seen} >= {id(h._node)}
    for node, total, copy in seen:
        assert node.shape == total.shape  # the node the sum is for, at its shape
        np.testing.assert_array_equal(total, copy)
    np.testing.assert_array_equal(x.grad.numpy(), [1, 1, 2, 2, 3, 3] + 2 * np.arange(6.0))


def test_a_100000_op_chain_backward():
    x = leaf(1.0)
    y = x
    for i in range(100_000):
        y = y * 1.00001 if i % 2 else y + 0.5  # dy/dx = 1.00001 ** 50000
    y.backward()
    np.testing.assert_allclose(x.grad.item(), 1.00001**50_000, rtol=1e-9)
    del y  # tearing down a 100,000-node graph must not overflow the stack either


def test_backward_frees_interior_gradients_and_saved_arrays():
    x = leaf(np.ones(4))
    y = x
    for _ in range(50):
        y = (y * 1.5).tanh()
    nodes = []
    most_pending = 0
    for step in backward_steps(y.sum()):
        nodes.append(step.node)
        most_pending = max(most_pending, len(step.pending))
    assert most_pending == 1  # a chain holds one gradient at a time, never the whole path
    # every array saved is freed; what holds none (x * 1.5 keeps the number, sum the shape)
    # stays, so that a second pass can go through those nodes, as torch's
    assert all(n.saved is None for n in nodes if n.op.name == "tanh")
    assert all(not any(hasattr(s, "shape") for s in n.saved) for n in nodes
               if n.op.name != "tanh")
    assert x.grad is not None


SAMPLES = [(name, i) for name in sorted(REGISTRY) for i in range(len(REGISTRY[name].samples))]


@pytest.mark.parametrize("name,index", SAMPLES, ids=[f"{n}-{i}" for n, i in SAMPLES])
def test_backward_tells_a_saved_array_by_the_first_and_last_saved_items(name, index):
    """Backward frees what a node saved unless it is metadata only, which it tells by the
    first and the last item alone (autograd._metadata_only): so every op keeps its arrays
    first or last. (A tuple counts as a shape: scatter's tuple of index arrays stays.)"""
    op = REGISTRY[name]
    inputs, params = op.samples[index]
    xs = S.materialize(inputs, np.random.default_rng(index), _float64)
    arrays = [x._data if isinstance(x, ta.Tensor) else x for x in xs]
    be = next(x.backend for x in xs if isinstance(x, ta.Tensor))
    _, saved = op.fwd(be, *arrays, **params)
    holds_array = any(s.__class__ not in autograd._METADATA for s in saved)
    assert autograd._metadata_only(saved) is not holds_array, [type(s) for s in saved]


# ---- grad mode --------------------------------------------------------------------------------


def test_no_grad_records_nothing_and_enable_grad_inside_records():
    x = leaf([1.0, 2.0])
    with ta.no_grad():
        assert not ta.is_grad_enabled()
        y = x * 2
        with ta.enable_grad():
            assert ta.is_grad_enabled()
            z = x * 2
        w = x * 2
    assert ta.is_grad_enabled()
    assert not y.requires_grad and not w.requires_grad and z.requires_grad
    with pytest.raises(ta.GraphError, match="does not require grad"):
        y.sum().backward()


def test_grad_mode_as_decorator_and_restored_after_an_error():
    @ta.no_grad()
    def evaluate(t):
        return t * 2

    x = leaf(1.0)
    assert not evaluate(x).requires_grad
    with pytest.raises(RuntimeError, match="inside"), ta.no_grad():
        raise RuntimeError("an error inside no_grad")
    assert ta.is_grad_enabled() and (x * 2).requires_grad


def test_grad_mode_is_per_thread():
    inside = threading.Event()
    release = threading.Event()
    seen = {}

    def worker():
        with ta.no_grad():
            inside.set()
            release.wait(5)
            seen["worker"] = ta.is_grad_enabled()

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(5)
    seen["main while worker in no_grad"] = ta.is_grad_enabled()
    seen["main records"] = (leaf(1.0) * 2).requires_grad
    release.set()
    t.join(5)

    def fresh_thread():
        seen["fresh thread"] = ta.is_grad_enabled()

    with ta.no_grad():
        t2 = threading.Thread(target=fresh_thread)
        t2.start()
        t2.join(5)
    assert seen == {"worker": False, "main while worker in no_grad": True, "main records": True,
                    "fresh thread": True}


def test_grad_mode_is_per_asyncio_task():
    async def in_no_grad(started, release):
        with ta.no_grad():
            started.set()
            await release.wait()
            return ta.is_grad_enabled()

    async def main():
        started, release = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(in_no_grad(started, release))
        await started.wait()
        outside = ta.is_grad_enabled()
        release.set()
        return outside, await task

    assert asyncio.run(main()) == (True, False)


# ---- retain_grad ------------------------------------------------------------------------------


def test_retain_grad_keeps_an_interior_gradient():
    x = leaf([1.0, -2.0, 3.0])
    h = x * x
    h.retain_grad()
    other = h + 1.0
    (other * 2.0).sum().backward()
    np.testing.assert_array_equal(h.grad.numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), 4 * x.numpy())
    with pytest.warns(UserWarning, match="retain_grad"):
        assert other.grad is None


def test_retain_grad_on_a_leaf_is_harmless_and_without_grad_is_an_error():
    x = leaf([1.0])
    x.retain_grad()
    (x * 3.0).sum().backward()
    assert x.grad.item() == 3.0
    with pytest.raises(ta.GraphError, match="retain_grad"):
        ta.tensor([1.0]).retain_grad()


# ---- freed graphs -----------------------------------------------------------------------------


def test_second_backward_through_a_freed_graph_says_what_happened():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(ta.GraphError) as info:
        y.backward()
    msg = str(info.value)
    assert "already freed" in msg and "retain_graph=True" in msg
    assert "mul" in msg  # the op where the walk stopped (sum saved no array: it ran again)


def test_autograd_backward_also_frees_the_graph_by_default():
    """tinyattn.autograd.backward(t), called directly (as torch.autograd.backward), frees the
    graph as Tensor.backward does."""
    from tinyattn.autograd import backward

    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    backward(y)
    with pytest.raises(ta.GraphError, match="already freed"):
        backward(y)


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-15)
    with pytest.raises(ta.GraphError, match="already freed"):
        y.backward()


# ---- the seed of backward ---------------------------------------------------------------------


def test_backward_on_a_non_scalar_needs_a_gradient():
    x = leaf(np.ones((2, 3)))
    y = x * 2.0
    with pytest.raises(ta.GraphError, match=r"shape \(2, 3\).*scalar.*gradient="):
        y.backward()
    with pytest.raises(ta.ShapeError, match=r"gradient has shape \(3,\).*\(2, 3\)"):
        y.backward(np.ones(3))
    g = np.arange(6.0).reshape(2, 3)
    y.backward(ta.tensor(g))
    np.testing.assert_array_equal(x.grad.numpy(), 2 * g)


def test_one_element_outputs_seed_with_one():
    x = leaf([[3.0]])
    (x * x).backward()  # shape (1, 1): one element, like a scalar
    assert x.grad.item() == 6.0


def test_backward_without_graph_is_an_error():
    with pytest.raises(ta.GraphError, match="requires_grad=True"):
        ta.tensor([1.0, 2.0]).sum().backward()


# ---- backward_steps and tracers ---------------------------------------------------------------


def test_backward_steps_equals_backward():
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((3, 4))
    x1, x2 = leaf(xv), leaf(xv)
    f = lambda x: (F.softmax(x @ x.T, dim=-1) * x.sum(dim=1)).mean()  # noqa: E731
    f(x1).backward()
    steps = list(f(x2).backward_steps())
    np.testing.assert_allclose(x2.grad.numpy(), x1.grad.numpy(), rtol=1e-15)
    assert [s.index for s in steps] == list(range(len(steps)))
    assert steps[0].node.op.name == "mean"


def test_tracer_sees_forward_backward_and_accumulation():
    class Recorder:
        def __init__(self):
            self.events = []

        def forward(self, op, inputs, params, out):
            self.events.append(("forward", op.name))

        def backward(self, node, g, grads):
            self.events.append(("backward", node.op.name))

        def accumulate(self, node, user, total):
            self.events.append(("accumulate", user.op.name))

    x = leaf(2.0)
    with tracing(Recorder()) as rec:
        y = x * x
        y.backward()
    assert rec.events == [("forward", "mul"), ("accumulate", "mul"), ("backward", "mul")]


# ---- dtypes -----------------------------------------------------------------------------------


def test_creation_dtypes():
    assert ta.tensor([1.0, 2.0]).dtype == np.float32
    assert ta.tensor(1.5).dtype == np.float32
    assert ta.tensor([[1, 2]]).dtype == np.int64
    assert ta.tensor([True]).dtype == np.bool_
    assert ta.randn(2, 3).dtype == np.float32
    assert ta.zeros(2).dtype == ta.ones(2).dtype == ta.rand(2).dtype == np.float32
    assert ta.arange(3).dtype == np.int64 and ta.arange(0.0, 1.0, 0.5).dtype == np.float32
    for dt in (np.float16, np.float32, np.float64, np.int32):
        assert ta.tensor(np.zeros(2, dtype=dt)).dtype == dt
    assert ta.tensor([1, 2], dtype=ta.float64).dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_gradients_keep_the_input_dtype(dtype):
    x = leaf([0.5, 1.5, -1.0], dtype)
    y = leaf([2.0, 1.0, 3.0], dtype)
    z = (F.softmax(x * y, dim=0) + (x - y).abs().sqrt()).sum()
    assert z.dtype == dtype
    z.backward()
    assert x.grad.dtype == dtype and y.grad.dtype == dtype


def test_mixed_dtypes_send_each_input_its_own_dtype():
    x = leaf([1.0, 2.0], np.float32)
    y = leaf([3.0, 4.0], np.float64)
    out = x * y  # promotes to float64, as NumPy does
    assert out.dtype == np.float64
    out.sum().backward()
    assert x.grad.dtype == np.float32 and y.grad.dtype == np.float64
    h = x.to(ta.float64)  # an explicit cast is an op: its gradient flows back as float32
    (h * h).sum().backward()
    assert x.grad.dtype == np.float32


def test_a_leaf_whose_array_was_replaced_gets_a_gradient_like_its_new_array():
    # a node keeps its output's shape and dtype, and each input's gradient is fitted to its
    # parent node's: a leaf's array replaced after the leaf was made (Module.to, t.data = ...)
    # must not leave the gradient at the old shape or dtype
    w = leaf([1.0, 2.0], np.float32)
    w.data = w.data.half()  # as Module.half() does
    (w * w).sum().backward()
    assert w.grad.dtype == np.float16 and w.grad.data.tolist() == [2.0, 4.0]
    v = leaf([1.0, 2.0])
    v.data = np.array([1.0, 2.0, 3.0])
    (v * 3.0).sum().backward()
    assert v.grad.shape == (3,) and v.grad.data.tolist() == [3.0, 3.0, 3.0]
    m = ta.nn.Linear(2, 2)
    m(ta.tensor(np.ones((1, 2), np.float32)))  # its leaves' nodes exist before the cast
    m.half()
    out = m(ta.tensor(np.ones((1, 2), np.float16)))
    # what pictures and reports show: first a leaf drawn alone (no op node reads it), then all
    assert "float32" not in ta.viz.to_dot(m.weight)
    assert "float32" not in ta.viz.to_dot(out)
    assert out._node.dtypes == [np.float16] * 3
    out.sum().backward()
    assert all(p.grad.dtype == np.float16 and p.grad.shape == p.shape for p in m.parameters())


def test_a_node_knows_the_shape_and_dtype_of_every_input():
    # pictures and reports read them: a graph input from its node, a tensor off the graph, an
    # array constant and a nondiff input as recorded, a Python number as 0-d with no dtype,
    # an input left out as None
    x = leaf(np.ones((2, 3)))
    out = x * 2.0 + ta.ones(3, dtype=ta.float32)
    assert out._node.shapes == [(2, 3), (3,)] and out._node.dtypes == [np.float64, np.float32]
    assert out._node.parents[0].shapes == [(2, 3), ()]
    assert out._node.parents[0].dtypes == [np.float64, None]
    assert (out._node.shape, out._node.dtype) == ((2, 3), np.float64)
    mask = np.array([True, False, True])
    y = x.masked_fill(mask, 0.0)
    assert y._node.shapes[:2] == [(2, 3), (3,)] and y._node.dtypes[1] == np.bool_
    idx = ta.tensor(np.array([1, 0]))
    e = F.cross_entropy(x, idx)
    assert e._node.shapes[:2] == [(2, 3), (2,)] and e._node.dtypes[1] == idx.dtype
    assert e._node.parents[1] is None
    lin = F.linear(x, leaf(np.ones((4, 3))))  # no bias: input 2 left out
    assert lin._node.shapes == [(2, 3), (4, 3), None] and lin._node.dtypes[2] is None
    raw = REGISTRY["mul"](x, np.ones(3, dtype=np.float32))  # an array straight into an op
    assert raw._node.shapes == [(2, 3), (3,)] and raw._node.dtypes[1] == np.float32
    # an input that never gets a gradient loses its parent even when it has a graph
    t = leaf(np.ones((3, 2)))
    cos, sin = t.cos(), t.sin()
    rot = REGISTRY["rotary"](leaf(np.ones((3, 4))), cos, sin)
    assert rot._node.parents[1:] == [None, None] and rot._node.shapes[1:] == [(3, 2), (3, 2)]


def _float32(values, requires_grad):
    if values.dtype.kind == "f":
        values = values.astype(np.float32)
    return ta.tensor(values, requires_grad=requires_grad)


CASES32 = [(name, i) for name in sorted(REGISTRY) for i in range(len(REGISTRY[name].samples))]


@pytest.mark.parametrize("name,index", CASES32, ids=[f"{n}-{i}" for n, i in CASES32])
def test_a_float32_op_never_computes_in_float64(name, index, monkeypatch):
    """Forward output, every raw VJP output (before autograd's cast) and every .grad: float32."""
    op = REGISTRY[name]
    inputs, params = REGISTRY[name].samples[index]
    xs = S.materialize(inputs, np.random.default_rng(index), _float32)
    raw = []

    def watched_vjp(be, g, saved, _vjp=op.vjp, **kw):
        assert g.dtype == np.float32, f"{name}: cotangent {g.dtype}"
        gs = _vjp(be, g, saved, **kw)
        raw.extend(gx.dtype for gx in gs if gx is not None)
        return gs

    monkeypatch.setattr(op, "vjp", watched_vjp)
    monkeypatch.setattr(op, "add_into", None)  # (getitem: its VJP, not the in-place path)
    out = op(*xs, **params)
    target = np.dtype(params.get("dtype", np.float32))  # cast: the dtype it was asked for
    assert out.dtype == target, f"{name} forward gave {out.dtype}"
    if target != np.float32:
        return
    out.backward(np.ones(out.shape, dtype=np.float32))
    assert raw and all(dt == np.float32 for dt in raw), f"{name} VJP gave {raw}"
    for x in xs:
        if isinstance(x, ta.Tensor) and x.requires_grad:
            assert x.grad.dtype == np.float32


def test_a_float32_model_step_stays_float32():
    seen = set()

    class DTypes:
        def forward(self, op, inputs, params, out):
            seen.add(("forward", op.name, out.dtype))

        def backward(self, node, g, grads):
            seen.add(("backward", node.op.name, g.dtype))

        def accumulate(self, node, user, total):
            seen.add(("accumulate", user.op.name, total.dtype))

    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(vocab_size=11, d_model=8, n_heads=2, n_layers=1, max_len=8)
    ids = ta.tensor(np.random.default_rng(0).integers(0, 11, (2, 8)))
    with tracing(DTypes()):
        logits = model(ids)
        F.cross_entropy(logits.reshape(-1, 11), ids.reshape(-1)).backward()
    floats = {(kind, name, dt) for kind, name, dt in seen if np.dtype(dt).kind == "f"}
    assert floats and {dt for *_, dt in floats} == {np.dtype(np.float32)}, sorted(
        (k, n, str(d)) for k, n, d in floats if d != np.float32)
    assert all(p.grad.dtype == np.float32 for p in model.parameters())


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(ta.DTypeError, match="only floating-point tensors can require grad"):
        ta.tensor([1, 2], requires_grad=True)
    with pytest.raises(ta.DTypeError, match="int64"):
        ta.arange(3, requires_grad=True)
    t = ta.tensor([True, False])
    with pytest.raises(ta.DTypeError):
        t.requires_grad = True
    assert not t.requires_grad
    x = leaf([1.5, 2.5])
    assert not x.long().requires_grad  # casting to integers leaves the graph


def test_requires_grad_can_only_change_on_leaves():
    x = leaf([1.0])
    y = x * 2.0
    with pytest.raises(ta.GraphError, match="leaf"):
        y.requires_grad = False
    with pytest.raises(ta.GraphError, match="in-place"):
        x[0] = 3.0


def test_in_place_gradient_sums_never_touch_shared_arrays():
    """backward adds gradients in place only into arrays it owns: three slices of one tensor
    (getitem's fresh gradients), an add whose VJP hands the same g to both inputs, and reuse,
    all in one graph, against the same sums done by hand."""
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((3, 4))
    x = ta.tensor(xv, requires_grad=True)
    a, b, c = x[0], x[1], x[2]
    s = a + b  # add_vjp returns g for both inputs: the same array twice
    t = s * c + s + a * a
    t.sum().backward()
    a0, b0, c0 = xv
    ga = c0 + 1 + 2 * a0
    gb = c0 + 1
    gc = a0 + b0
    np.testing.assert_allclose(x.grad.numpy(), np.stack([ga, gb, gc]), rtol=1e-12)


# ---- top-level functions, as torch.cat and friends ---------------------------------------------


def test_top_level_functions_match_numpy_and_carry_gradients():
    rng = np.random.default_rng(0)
    a, b = leaf(rng.standard_normal((2, 3))), leaf(rng.standard_normal((2, 3)))
    w = leaf(rng.standard_normal((3, 4)))
    np.testing.assert_array_equal(ta.cat([a, b], dim=1).numpy(),
                                  np.concatenate([a.numpy(), b.numpy()], axis=1))
    np.testing.assert_array_equal(ta.stack([a, b]).numpy(), np.stack([a.numpy(), b.numpy()]))
    np.testing.assert_array_equal(ta.where(a > 0, a, 0.0).numpy(), np.where(a.numpy() > 0,
                                                                             a.numpy(), 0.0))
    np.testing.assert_allclose(ta.matmul(a, w).numpy(), a.numpy() @ w.numpy())
    np.testing.assert_allclose(ta.matmul(a.numpy(), w).numpy(), a.numpy() @ w.numpy())
    e = np.exp(a.numpy() - a.numpy().max(-1, keepdims=True))
    np.testing.assert_allclose(ta.softmax(a, dim=-1).numpy(), e / e.sum(-1, keepdims=True))
    np.testing.assert_allclose(ta.log_softmax(a, -1).numpy(), np.log(e / e.sum(-1, keepdims=True)))
    assert ta.gradcheck(lambda a, b, w: ta.matmul(ta.cat([a, ta.where(b > 0, b, a)]), w)
                        .softmax(-1) * ta.stack([a, b]).sum(), [a, b, w])


def test_functional_all_lists_exactly_its_public_functions():
    import inspect

    own = (F.__name__, "tinyattn.functional_spatial",  # (their own, imported)
           "tinyattn.functional_more")
    defined = {name for name, f in vars(F).items()
               if inspect.isfunction(f) and f.__module__ in own and not name.startswith("_")}
    assert set(F.__all__) == defined
    namespace = {}
    exec("from tinyattn.functional import *", namespace)
    assert "math" not in namespace and "ew" not in namespace and "softmax" in namespace


def test_backward_steps_takes_the_gradient_and_retain_graph_as_backward_does():
    x = leaf([1.0, 2.0, 3.0])
    y = x * x
    steps = list(backward_steps(y, ta.tensor([1.0, 0.5, -1.0], dtype=ta.float64),
                                retain_graph=True))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, -6.0])  # 2x * gradient
    np.testing.assert_array_equal(steps[0].g, [1.0, 0.5, -1.0])
    list(y.backward_steps(ta.ones(3, dtype=ta.float64)))  # the graph was kept: a second walk
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 6.0, 0.0])
    with pytest.raises(ta.GraphError):  # ... which freed it
        list(y.backward_steps(ta.ones(3, dtype=ta.float64)))


def test_nodes_and_steps_say_what_they_are():
    x = leaf([1.0, 2.0])
    h = x.exp()
    h.name = "h"
    steps = list((h * x).sum().backward_steps())
    assert [repr(s) for s in steps] == ["<Step 0: sum>", "<Step 1: mul>", "<Step 2: exp -> h>"]
    assert repr(h._node) == "<Node exp>" and repr(x._node) == "<Node leaf>"


def test_toposort_puts_every_node_once_after_all_its_users():
    from tinyattn.autograd import toposort

    x, w = leaf([1.0, 2.0]), leaf([0.5, -1.0])
    c = ta.tensor([3.0, 4.0], dtype=ta.float64)  # needs no grad: no node
    a = x * w
    b = a.exp() + a * c  # a is used twice (a diamond)
    loss = (b * x).sum()  # x is used at the start and the end
    order = toposort(loss._node)
    assert order[0] is loss._node
    assert len(order) == len(set(order)) == 8  # sum, mul, add, exp, mul, mul (a), x, w
    position = {node: i for i, node in enumerate(order)}
    for node in order:
        assert node.op is not None or node in (x._node, w._node)
        for parent in node.parents:
            if parent is not None:
                assert position[parent] > position[node]
    assert {n for n in order if n.op is None} == {x._node, w._node}
    assert toposort(x._node) == [x._node]


def test_trace_everywhere_shows_every_thread_the_ops_until_turned_off():
    from tinyattn.autograd import Tracer, trace_everywhere

    class Names(Tracer):
        def __init__(self):
            self.seen = []

        def forward(self, op, inputs, params, out):
            self.seen.append(op.name)

    names = Names()
    x = leaf([1.0, 2.0])
    trace_everywhere([names])  # any iterable of tracers
    try:
        worker = threading.Thread(target=lambda: x.exp())
        worker.start()
        worker.join()
        x.sin()
    finally:
        trace_everywhere(())
    x.cos()  # off again
    assert names.seen == ["exp", "sin"]


def test_use_tensor_class_makes_outputs_and_gradients_of_that_class():
    from tinyattn.autograd import use_tensor_class

    class Mine(ta.Tensor):
        pass

    x = leaf([1.0, 2.0])
    use_tensor_class(Mine)
    try:
        y = x * 3.0
        y.sum().backward()
    finally:
        use_tensor_class(ta.Tensor)
    assert type(y) is Mine and type(x.grad) is Mine
    assert type(x * 3.0) is ta.Tensor


def test_a_leafs_grad_is_added_to_in_place_only_when_it_fits():
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    held = x.grad
    (x * x).sum().backward()  # a .grad the user holds sees the sum, as in PyTorch
    assert held is x.grad
    np.testing.assert_array_equal(held.numpy(), [4.0, 8.0])
    for mine in (ta.tensor([1.0, 1.0], dtype=ta.float32),
                 ta.tensor([[1.0, 1.0]], dtype=ta.float64)):
        # another dtype or shape is refused when assigned, as torch does (a .data replaced
        # since: the sum is a new array, see test_core_errors.py)
        with pytest.raises((ta.DTypeError, ta.ShapeError), match=r"\.grad: assigned a"):
            x.grad = mine
        assert x.grad is held
        np.testing.assert_array_equal(mine.numpy(), np.ones(mine.shape))


def test_each_backward_step_keeps_the_pending_gradients_of_its_moment():
    """Step.pending is the gradients summed so far as they were at that step, not the walk's
    live dict (every step collected in a list showed the final, empty one); the arrays in it
    are never added into later (a sum a later step shows is a new array)."""
    x = leaf([1.0, 2.0])
    a = x * 3
    loss = (a * a).sum() + a.sum()
    live = [(s.index, {n: np.array(v, copy=True) for n, v in s.pending.items()})
            for s in loss.backward_steps(retain_graph=True)]
    steps = list(loss.backward_steps(retain_graph=True))
    assert [len(s.pending) for s in steps] == [len(p) for _, p in live] == [2, 2, 2, 1, 1]
    assert len({id(s.pending) for s in steps}) == len(steps)
    for step, (_, pending) in zip(steps, live, strict=True):
        assert list(step.pending) == list(pending)
        for node, value in pending.items():
            np.testing.assert_array_equal(step.pending[node], value)
    np.testing.assert_array_equal(steps[3].pending[a._node], [7.0, 13.0])  # 2a + 1, summed
    np.testing.assert_array_equal(steps[4].pending[x._node], [21.0, 39.0])


def test_data_assigned_a_tensor_takes_its_values_as_torch():
    # torch's `p.data = other` swaps the values a tensor holds (p stays the same leaf); a tensor
    # stored inside the tensor made every later op fail with unrelated errors
    w = ta.ones(2, requires_grad=True)
    w.data = ta.tensor([3.0, 4.0])
    assert type(w.data) is ta.Tensor and isinstance(w._data, np.ndarray)  # (its array, as before)
    assert w.is_leaf and w.requires_grad
    (w * w).sum().backward()
    assert w.grad.tolist() == [6.0, 8.0]
    p = ta.nn.Linear(2, 1).weight
    p.data = ta.zeros(1, 2, dtype=ta.float64)  # another dtype, as torch allows
    assert type(p).__name__ == "Parameter" and p.dtype == np.float64 and p.sum().item() == 0
    with pytest.raises(TypeError, match=r"\.data: .*list"):
        w.data = [1.0, 2.0]  # torch: "Variable data has to be a tensor"
    assert w.tolist() == [3.0, 4.0]
