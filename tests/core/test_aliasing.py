"""Aliasing: the speed tricks that reuse arrays (in-place gradient sums in backward, in-place fused
forward and backward bodies, identity VJPs that hand g on as it is) never write into an array that
someone else still reads: a user's .grad, a gradient given to backward, a saved forward array, an
input, or a gradient delivered to two places.

Each case runs twice with retain_graph=True (the second pass must give exactly twice the first)
and, where PyTorch is installed, against PyTorch in float64, including what PyTorch does with a
.grad the caller holds: a leaf's .grad is added to in place, a retain_grad tensor's is replaced.
"""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _values(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def _leaves(values):
    return [ta.tensor(v, requires_grad=True) for v in values]


def _assert_twice_exactly(fn, values):
    """Backward twice through one graph: every input's .grad doubles, bit for bit, and no input's
    values change."""
    xs = _leaves(values)
    before = [x.numpy().copy() for x in xs]
    loss = fn(*xs)
    loss.backward(retain_graph=True)
    first = [x.grad.numpy().copy() for x in xs]
    loss.backward()
    for x, g, v in zip(xs, first, before, strict=True):
        np.testing.assert_array_equal(x.grad.numpy(), 2 * g)
        np.testing.assert_array_equal(x.numpy(), v)


def _assert_matches_torch(torch, fn_ta, fn_torch, values, rtol=1e-10, atol=1e-12):
    """fn's value, and its gradients after one and after two backward passes (retain_graph),
    equal PyTorch's."""
    xs = _leaves(values)
    ts = [torch.tensor(v, requires_grad=True) for v in values]
    out, ref = fn_ta(*xs), fn_torch(*ts)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    for _ in range(2):
        out.backward(retain_graph=True)
        ref.backward(retain_graph=True)
        for x, t in zip(xs, ts, strict=True):
            np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


# ---- a leaf's .grad held by the caller, and retain_grad tensors -------------------------------


def test_a_held_leaf_grad_is_added_to_in_place_as_in_pytorch(torch):
    (v,) = _values((3, 4))
    x, t = ta.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    loss, ref = (x * x).sum(), (t * t).sum()
    loss.backward(retain_graph=True)
    ref.backward(retain_graph=True)
    held, held_t = x.grad, t.grad
    loss.backward()
    ref.backward()
    assert x.grad is held and t.grad is held_t  # PyTorch: the same tensor, added to in place
    np.testing.assert_array_equal(held.numpy(), held_t.numpy())
    np.testing.assert_array_equal(held.numpy(), 4 * v)


def test_a_retain_grad_tensor_gets_a_new_grad_each_time_as_in_pytorch(torch):
    (v,) = _values((2, 3))
    x, t = ta.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    h, ht = x * 2.0, t * 2.0
    h.retain_grad()
    ht.retain_grad()
    loss = (h * h).sum() + (h * 3.0).sum()  # h feeds two consumers
    ref = (ht * ht).sum() + (ht * 3.0).sum()
    loss.backward(retain_graph=True)
    ref.backward(retain_graph=True)
    held, held_t = h.grad, ht.grad
    first = held.numpy().copy()
    loss.backward()
    ref.backward()
    assert (h.grad is held) == (ht.grad is held_t)  # PyTorch: a new tensor for non-leaves
    np.testing.assert_array_equal(held.numpy(), first)
    np.testing.assert_allclose(held.numpy(), held_t.numpy(), rtol=1e-15)
    np.testing.assert_allclose(h.grad.numpy(), ht.grad.numpy(), rtol=1e-15)
    np.testing.assert_array_equal(h.grad.numpy(), 2 * first)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-15)


def test_a_0d_leaf_grad_is_an_array_that_accumulates_in_place():
    x = ta.tensor(np.float64(2.0), requires_grad=True)
    loss = x * 3.0
    loss.backward(retain_graph=True)
    held = x.grad
    assert isinstance(held._data, np.ndarray)  # not a NumPy scalar: it can be written into
    loss.backward()
    assert x.grad is held and held.item() == 6.0


def test_mutating_a_grad_after_backward_changes_nothing_in_the_graph():
    """.grad arrays are the caller's own: writing into them (a leaf's or a retain_grad
    tensor's) between two backward passes does not reach any gradient of the second pass."""
    a_v, b_v = _values((2, 3), (2, 3))
    a, b = _leaves([a_v, b_v])
    s = a + b  # add hands the same g to a and b
    s.retain_grad()
    r = s.reshape(3, 2)  # and reshape a view of it
    r.retain_grad()
    loss = (s * s).sum() + r.sum()
    loss.backward(retain_graph=True)
    ga, gb, gs, gr = (t.grad.numpy().copy() for t in (a, b, s, r))
    for t in (a, s, r):
        t.grad.data[...] = 100.0
    loss.backward()
    np.testing.assert_array_equal(a.grad.numpy(), 100.0 + ga)
    np.testing.assert_array_equal(b.grad.numpy(), 2 * gb)
    np.testing.assert_array_equal(s.grad.numpy(), 100.0 + gs)
    np.testing.assert_array_equal(r.grad.numpy(), 100.0 + gr)
    np.testing.assert_array_equal(gs, gr.reshape(2, 3) + 2 * (a_v + b_v))


def test_the_gradient_given_to_backward_is_never_written_into():
    (v,) = _values((4, 3))
    x = ta.tensor(v, requires_grad=True)
    g = np.arange(12.0).reshape(4, 3)
    parts = x[0:2], x[1:3], x[2:4]  # getitem's fresh gradients, summed in place
    y = F.cat([p + p for p in parts], dim=0) + 0.0  # add and cat hand on g and views of it
    seed = np.concatenate([g[0:2], g[1:3], g[2:4]])
    keep = seed.copy()
    y.backward(seed, retain_graph=True)
    y.backward(seed)
    np.testing.assert_array_equal(seed, keep)
    expected = 2 * np.array([g[0], 2 * g[1], 2 * g[2], g[3]])
    np.testing.assert_array_equal(x.grad.numpy(), 2 * expected)


# ---- one gradient delivered to two places -----------------------------------------------------


@pytest.mark.parametrize("name, fn", [
    ("x + x", lambda x: (x + x).sum()),
    ("x * x", lambda x: (x * x).sum()),
    ("(x + x) * x", lambda x: ((x + x) * x).sum()),
    ("x - x + x", lambda x: ((x - x + x) * x).sum()),
    ("-x twice", lambda x: ((-x) * (-x) + (-x)).sum()),
    ("reshape views", lambda x: (x.reshape(6) * x.reshape(6)).sum() + x.reshape(6).sum()),
    ("transposes", lambda x: (x.T * x.T).sum() + (x.T @ x).sum() + x.T.sum()),
    ("expand", lambda x: (x[:1].expand(2, 3) * x[1:].expand(2, 3)).sum() + x.sum()),
    ("getitem splits", lambda x: (x[0] * x[1]).sum() + ((x[0] + x[0]) * x[0]).sum() + x.sum()),
    ("matmul x @ x", lambda x: (x[:, :2] @ x[:, :2]).pow(2).sum()),
    ("reused subgraph", lambda x: (lambda h: (h * h).sum() + h.sum() + (h.exp() * x).sum())(
        (x * 2.0).tanh())),
    ("casts", lambda x: (x.to("float32").to("float64") * x.to("float32").to("float64")).sum()),
])
def test_one_gradient_sent_to_two_places(torch, name, fn):
    (v,) = _values((2, 3))
    _assert_twice_exactly(fn, [v])
    torch_fn = fn
    if name == "casts":
        def torch_fn(x):
            y = x.to(torch.float32).to(torch.float64)
            return (y * y).sum()
    _assert_matches_torch(torch, fn, torch_fn, [v])


def test_same_tensor_in_both_operands_of_fused_linear_and_layer_norm(torch):
    tf = torch.nn.functional
    (w,) = _values((4, 4))
    _assert_matches_torch(torch, lambda w: (F.linear(w, w, w[0]) ** 2).sum(),
                   lambda w: (tf.linear(w, w, w[0]) ** 2).sum(), [w])
    _assert_matches_torch(torch, lambda w: (F.layer_norm(w, (4,), w[1], w[2]) ** 2).sum(),
                   lambda w: (tf.layer_norm(w, (4,), w[1], w[2]) ** 2).sum(), [w])
    _assert_twice_exactly(lambda w: (F.linear(w, w, w[0]) ** 2).sum(), [w])
    _assert_twice_exactly(lambda w: (F.layer_norm(w, (4,), w[1], w[2]) ** 2).sum(), [w])


# ---- in-place fused forward and backward bodies ------------------------------------------------


def _fused(m, name, x, w, b, lw):
    """Op `name` of library m (tinyattn.functional or torch.nn.functional) on x, its output used
    by two consumers, one of which reads x again; every input gets a gradient."""
    y = {
        "softmax": lambda: m.softmax(x, -1),
        "log_softmax": lambda: m.log_softmax(x, -1),
        "layer_norm": lambda: m.layer_norm(x, (5,), w, b),
        "layer_norm_plain": lambda: m.layer_norm(x, (5,)),
        "gelu": lambda: m.gelu(x),
        "gelu_tanh": lambda: m.gelu(x, approximate="tanh"),
        "linear": lambda: m.linear(x, lw, b),
        "linear_nobias": lambda: m.linear(x, lw),
    }[name]()
    return (y * y).sum() + (y * x).sum() + (w * b).sum() + (lw * lw).sum()


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "layer_norm_plain",
                                  "gelu", "gelu_tanh", "linear", "linear_nobias"])
def test_fused_op_outputs_with_two_consumers(torch, name):
    values = _values((3, 5), (5,), (5,), (5, 5), seed=1)
    _assert_twice_exactly(lambda *a: _fused(F, name, *a), values)
    _assert_matches_torch(torch, lambda *a: _fused(F, name, *a),
                   lambda *a: _fused(torch.nn.functional, name, *a), values)


@pytest.mark.parametrize("kwargs", [{}, {"label_smoothing": 0.1}, {"reduction": "sum"},
                                    {"reduction": "none"}, {"ignore_index": 2}])
def test_cross_entropy_backward_twice_keeps_its_saved_probabilities(torch, kwargs):
    tf = torch.nn.functional
    (x_v,) = _values((4, 5), seed=3)
    target = np.array([0, 2, 4, 2])

    def ours(x):
        loss = F.cross_entropy(x, ta.tensor(target), **kwargs)
        return (loss * loss).sum() + loss.sum() if kwargs.get("reduction") == "none" else loss

    def theirs(x):
        loss = tf.cross_entropy(x, torch.tensor(target), **kwargs)
        return (loss * loss).sum() + loss.sum() if kwargs.get("reduction") == "none" else loss

    _assert_twice_exactly(ours, [x_v])
    _assert_matches_torch(torch, ours, theirs, [x_v])


def test_fused_forwards_leave_their_inputs_alone():
    x_v, w_v, b_v = _values((2, 3, 4), (4,), (4,), seed=4)
    wl_v, bl_v = _values((6, 4), (6,), seed=5)
    x, w, b, wl, bl = _leaves([x_v, w_v, b_v, wl_v, bl_v])
    xt = x.transpose(0, 1)  # a view of x as the input
    outs = [F.softmax(xt, -1), F.log_softmax(xt, 0), F.layer_norm(xt, (4,), w, b),
            F.layer_norm(x, (3, 4)), F.gelu(xt), F.gelu(xt, approximate="tanh"),
            F.linear(xt, wl, bl), F.linear(x, wl), xt.logsumexp(-1),
            F.cross_entropy(x.reshape(6, 4), ta.tensor([0, 1, 2, 3, 0, 1]), label_smoothing=0.2)]
    loss = sum(((o * o).sum() for o in outs), ta.tensor(0.0, dtype="float64"))
    snapshot = [o.numpy().copy() for o in outs]
    loss.backward(retain_graph=True)
    for t, v in zip((x, w, b, wl, bl), (x_v, w_v, b_v, wl_v, bl_v), strict=True):
        np.testing.assert_array_equal(t.numpy(), v)
    for o, s in zip(outs, snapshot, strict=True):  # no VJP wrote into an output it saved
        np.testing.assert_array_equal(o.numpy(), s)
    first = [t.grad.numpy().copy() for t in (x, w, b, wl, bl)]
    loss.backward()
    for t, g in zip((x, w, b, wl, bl), first, strict=True):
        np.testing.assert_array_equal(t.grad.numpy(), 2 * g)


def test_attention_with_q_k_v_one_tensor_twice(torch):
    tf = torch.nn.functional
    (q_v,) = _values((2, 5, 4), seed=6)
    for impl in ("composite", "flash"):
        def ours(q, impl=impl):
            return (F.scaled_dot_product_attention(q, q, q, is_causal=True, impl=impl) ** 2).sum()

        def theirs(q):
            return (tf.scaled_dot_product_attention(q, q, q, is_causal=True) ** 2).sum()

        _assert_twice_exactly(ours, [q_v])
        _assert_matches_torch(torch, ours, theirs, [q_v])


def test_embedding_with_repeated_ids_and_a_tied_head(torch):
    tf = torch.nn.functional
    (w_v,) = _values((6, 4), seed=7)
    ids = np.array([[1, 2, 1, 1], [5, 1, 0, 5]])

    def ours(w):
        h = F.embedding(ta.tensor(ids), w)
        return (F.linear(h, w) ** 2).sum() + h.sum() + w[ids.reshape(-1)].sum()

    def theirs(w):
        h = tf.embedding(torch.tensor(ids), w)
        return (tf.linear(h, w) ** 2).sum() + h.sum() + w[ids.reshape(-1)].sum()

    _assert_twice_exactly(ours, [w_v])
    _assert_matches_torch(torch, ours, theirs, [w_v])


def test_tiny_transformer_backward_twice_doubles_every_gradient():
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(11, d_model=8, n_heads=2, n_layers=1, max_len=6)
    idx = ta.tensor(np.arange(12).reshape(2, 6) % 11)
    logits = model(idx)
    loss = F.cross_entropy(logits.reshape(-1, 11), ta.tensor((np.arange(12) + 1) % 11))
    loss.backward(retain_graph=True)
    first = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    loss.backward()
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(p.grad.numpy(), 2 * first[n], err_msg=n)


# ---- gradient buffers outside backward ----------------------------------------------------------


@pytest.mark.parametrize("owner", ["optimizer", "module"])
def test_zero_grad_without_set_to_none_zeroes_in_place(owner):
    model = ta.nn.Linear(3, 2)
    opt = ta.optim.SGD(model.parameters(), lr=0.1)
    model(ta.randn(4, 3)).sum().backward()
    held = model.weight.grad
    held.data[0, 0] = np.inf  # a step that overflowed: zero_grad must still give zeros
    held.data[1, 1] = np.nan
    (opt if owner == "optimizer" else model).zero_grad(set_to_none=False)
    assert model.weight.grad is held  # PyTorch zeroes .grad in place
    np.testing.assert_array_equal(held.numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(model.bias.grad.numpy(), np.zeros(2))


def test_clip_grad_norm_scales_the_grads_in_place(torch):
    ours = ta.nn.Parameter(np.zeros(2))
    ours.grad = ta.tensor(np.array([3.0, 4.0]))
    theirs = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    theirs.grad = torch.tensor([3.0, 4.0], dtype=torch.float64)
    held, held_t = ours.grad.numpy(), theirs.grad.numpy()  # arrays sharing the grads' memory
    assert ta.optim.clip_grad_norm([ours], 1.0) == pytest.approx(5.0)
    torch.nn.utils.clip_grad_norm_([theirs], 1.0)
    np.testing.assert_allclose(held_t, [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(held, held_t, rtol=1e-6)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6)


def test_gradcheck_perturbs_a_transposed_input_itself():
    """gradcheck moves one entry at a time through a flat view of its float64 copy; a copy that
    kept a transposed input's layout made that view a copy, so every numeric derivative was 0."""
    a = ta.tensor(np.arange(12.0).reshape(3, 4).T, requires_grad=True)  # Fortran-ordered data
    assert not a._data.flags.c_contiguous
    assert ta.gradcheck(lambda x: (x * x).sum(), [a])
    assert ta.gradcheck(lambda x, y: x @ y, [a, ta.tensor(np.ones((3, 2)), requires_grad=True)])
