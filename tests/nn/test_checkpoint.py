"""tinyattn.utils.checkpoint (torch.utils.checkpoint): the same values and gradients as the
block run plainly (dropout included, its draws replayed), one node kept instead of the block's,
non-tensor and keyword arguments, checkpoint_sequential, and the errors."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn
from tinyattn.utils.checkpoint import checkpoint, checkpoint_sequential


def _block(dropout=0.3):
    ta.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(8, 4)).double()


def _grads(model, run, x, seed=5):
    """(output, x's gradient, the parameters' gradients) of Σ run(x)², from a fresh start."""
    model.zero_grad()
    x.grad = None
    ta.manual_seed(seed)
    y = run(x)
    (y ** 2).sum().backward()
    return (y.detach().numpy(), None if x.grad is None else x.grad.numpy(),
            [p.grad.numpy().copy() for p in model.parameters()])


def _nodes(t):
    """How many nodes the graph behind t holds."""
    seen, stack = set(), [t._node]
    while stack:
        node = stack.pop()
        if node is not None and id(node) not in seen:
            seen.add(id(node))
            stack.extend(node.parents)
    return len(seen)


@pytest.mark.parametrize("x_needs_grad", [True, False])
def test_a_checkpointed_block_gives_the_plain_values_and_gradients(x_needs_grad):
    """Dropout on: the recomputation in backward draws the forward's masks again, so values
    and gradients (input and parameters) are the plain run's."""
    block = _block()
    x = ta.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=x_needs_grad)
    got = _grads(block, lambda t: checkpoint(block, t, use_reentrant=False), x)
    want = _grads(block, block, x)
    np.testing.assert_array_equal(got[0], want[0])
    if x_needs_grad:
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    else:
        assert got[1] is None and want[1] is None
    for g, w in zip(got[2], want[2], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_only_one_node_is_kept_for_the_block():
    block = _block()
    x = ta.randn(3, 4, dtype=ta.float64, requires_grad=True)
    out = checkpoint(block, x, use_reentrant=False)
    # it, x's leaf and the leaves of the block's 4 parameters (its inputs too, see below)
    assert out._node.op.name == "Checkpoint" and _nodes(out) == 6
    assert _nodes(block(x)) > 8


def test_without_preserve_rng_state_the_recomputation_draws_anew():
    block = _block(dropout=0.5)
    x = ta.tensor(np.random.default_rng(1).standard_normal((6, 4)), requires_grad=True)
    got = _grads(block, lambda t: checkpoint(block, t, preserve_rng_state=False,
                                                       use_reentrant=False), x)
    want = _grads(block, block, x)
    np.testing.assert_array_equal(got[0], want[0])  # the forward itself is the same
    assert not np.allclose(got[1], want[1])  # backward went through other masks
    a = ta.rand(3).numpy()  # and the stream moved on as for any draw (not restored)
    assert not np.array_equal(a, ta.rand(3).numpy())


def test_non_tensor_and_keyword_arguments_and_integer_tensors_pass_through():
    w = ta.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    idx = ta.tensor([[0, 3], [2, 2]])

    def f(ids, table, scale, *, shift):
        return (table[ids] * scale + shift).sum(1)

    out = checkpoint(f, idx, w, 2.0, shift=1.0, use_reentrant=False)
    out.sum().backward()
    want = ta.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    f(idx, want, 2.0, shift=1.0).sum().backward()
    np.testing.assert_array_equal(out.numpy(), f(idx, want, 2.0, shift=1.0).detach().numpy())
    np.testing.assert_array_equal(w.grad.numpy(), want.grad.numpy())


@pytest.mark.parametrize("segments", [1, 2, 3, 5])
def test_checkpoint_sequential_gives_the_plain_gradients(segments):
    ta.manual_seed(1)
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(5)]).double()
    x = ta.tensor(np.random.default_rng(2).standard_normal((2, 4)), requires_grad=True)
    got = _grads(model, lambda t: checkpoint_sequential(model, segments, t,
                                                                    use_reentrant=False), x)
    want = _grads(model, model, x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    for g, w in zip(got[2], want[2], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    listed = checkpoint_sequential(list(model), segments, x,  # a list of modules too
                                   use_reentrant=False)
    np.testing.assert_allclose(listed.detach().numpy(), want[0], rtol=1e-12)


def test_a_checkpointed_transformer_trains_as_the_plain_one():
    """Each block of a TinyTransformer checkpointed: the same losses step after step."""
    losses = []
    for checkpointed in (False, True):
        ta.manual_seed(0)
        model = nn.TinyTransformer(vocab_size=7, d_model=16, n_heads=2, n_layers=2, max_len=8,
                                   dropout=0.1)
        if checkpointed:
            for block in model.blocks:
                block.forward = (lambda b: lambda x: checkpoint(type(b).forward, b, x,
                                                                     use_reentrant=False))(block)
        opt = ta.optim.AdamW(model.parameters(), lr=1e-2)
        rng = np.random.default_rng(0)
        run = []
        for _ in range(3):
            ids = ta.tensor(rng.integers(0, 7, (4, 8)))
            logits = model(ids)
            loss = ta.functional.cross_entropy(logits.reshape(-1, 7), ids.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


def test_errors():
    for segments in (0, 6, 1.5):
        with pytest.raises(ValueError, match="checkpoint_sequential: segments must be between "
                                             "1 and the 5 functions"):
            checkpoint_sequential([nn.Identity()] * 5, segments, ta.ones(2),
                                  use_reentrant=False)
    with pytest.raises(ValueError, match="determinism_check must be 'default' or 'none'"):
        checkpoint(lambda t: t, ta.ones(2), use_reentrant=False, determinism_check="x")


def test_under_no_grad_it_is_the_plain_call():
    block = _block(dropout=0.0)
    x = ta.randn(2, 4, dtype=ta.float64, requires_grad=True)
    with ta.no_grad():
        out = checkpoint(block, x, use_reentrant=False)
    assert not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), block(x).detach().numpy())


def test_a_second_backward_replays_the_same_draws_and_inputs_from_the_graph_are_fine():
    """backward twice (retain_graph) recomputes with the forward's dropout masks both times; an
    input made by ops that keep their values (tanh) backpropagates through the outer graph once,
    as plainly."""
    block = _block(dropout=0.5)
    w = ta.tensor(np.random.default_rng(3).standard_normal((3, 4)), requires_grad=True)
    ta.manual_seed(2)
    h = w.tanh()  # not a leaf: its node keeps tanh's output for backward
    y = (checkpoint(block, h, use_reentrant=False) ** 2).sum()
    y.backward(retain_graph=True)
    first = w.grad.numpy().copy()
    w.grad = None
    y.backward()
    np.testing.assert_allclose(w.grad.numpy(), first, rtol=1e-12)
    block.zero_grad()
    w.grad = None
    ta.manual_seed(2)
    (block(w.tanh()) ** 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), first, rtol=1e-12)


@pytest.mark.parametrize("preserve", [True, False])
def test_checkpoint_sequential_keeps_dropouts_draws_unless_told_not_to(preserve):
    ta.manual_seed(4)
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 8), nn.Dropout(0.5),
                          nn.Linear(8, 4)).double()
    x = ta.tensor(np.random.default_rng(5).standard_normal((6, 4)), requires_grad=True)
    got = _grads(model, lambda t: checkpoint_sequential(model, 3, t, use_reentrant=False,
                                                        preserve_rng_state=preserve), x)
    want = _grads(model, model, x)
    np.testing.assert_array_equal(got[0], want[0])
    assert np.allclose(got[1], want[1], rtol=1e-12) == preserve
    default = _grads(model, lambda t: checkpoint_sequential(model, 3, t, use_reentrant=False),
                     x)
    np.testing.assert_allclose(default[1], want[1], rtol=1e-12)  # preserved by default


def test_checkpoint_sequential_edges():
    x = ta.ones(2)
    assert checkpoint_sequential([], 1, x, use_reentrant=False) is x
    with pytest.raises(ValueError, match="segments must be between 1 and the 1 functions"):
        checkpoint_sequential([nn.Identity()], 2, x, use_reentrant=False)
    assert checkpoint_sequential([nn.Identity()], 1, x, use_reentrant=False) is x


def test_on_cupy_the_recomputation_replays_the_device_streams_draws(monkeypatch):
    """CuPy's random stream cannot be deep-copied (its state is device memory and the object
    holds a lock: tests/support/fake_cupy.py); checkpoint copies the state itself."""
    import fake_cupy  # tests/support

    fake_cupy.install(monkeypatch, kernels=False)
    model = _block().to("cupy")
    x = ta.tensor(np.random.default_rng(1).standard_normal((5, 4)), requires_grad=True,
                  device="cupy")
    got = _grads(model, lambda t: checkpoint(model, t, use_reentrant=False), x)
    want = _grads(model, model, x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    for mine, ref in zip(got[2], want[2], strict=True):
        np.testing.assert_allclose(mine, ref, rtol=1e-12)


# ---- the parameters inside the block are inputs of its node; inputs changed in place ----------


def test_autograd_grad_through_a_checkpoint_reaches_the_parameters_and_writes_no_grad():
    """As torch: grad() returns the gradients of the parameters the block uses and of its
    inputs, and fills no .grad (the recomputation's backward goes to grad(), not to .grad)."""
    block = _block()
    params = list(block.parameters())
    x = ta.tensor(np.random.default_rng(6).standard_normal((3, 4)), requires_grad=True)
    ta.manual_seed(5)
    y = checkpoint(block, x, use_reentrant=False)
    got = ta.autograd.grad((y ** 2).sum(), [x, *params])
    assert x.grad is None and all(p.grad is None for p in params)
    want = _grads(block, block, x)
    np.testing.assert_allclose(got[0].numpy(), want[1], rtol=1e-12)
    for g, w in zip(got[1:], want[2], strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12)


def test_autograd_grad_for_the_parameters_alone_through_a_checkpoint():
    w = ta.tensor(np.random.default_rng(7).standard_normal((4, 4)), requires_grad=True)
    x = ta.tensor(np.random.default_rng(8).standard_normal((2, 4)))  # needs no gradient
    y = checkpoint(lambda t: (t @ w).tanh(), x, use_reentrant=False)
    (gw,) = ta.autograd.grad(y.sum(), [w])
    assert w.grad is None
    (want,) = ta.autograd.grad((x @ w).tanh().sum(), [w])
    np.testing.assert_allclose(gw.numpy(), want.numpy(), rtol=1e-12)


def test_keyword_and_closure_tensors_get_their_gradients():
    """Tensors the block reads other than its positional arguments (a keyword argument, a
    non-leaf from a closure) get their gradients as in the plain call."""
    rng = np.random.default_rng(9)
    w = ta.tensor(rng.standard_normal((4, 4)), requires_grad=True)
    s = ta.tensor(2.0, dtype=ta.float64, requires_grad=True)
    x = ta.tensor(rng.standard_normal((2, 4)), requires_grad=True)

    def run(ck):
        for t in (w, s, x):
            t.grad = None
        scale = s * 3.0  # a non-leaf the block reads from its closure
        block = lambda a, *, shift: (a @ w).tanh() * scale + shift  # noqa: E731
        y = checkpoint(block, x, shift=s, use_reentrant=False) if ck else block(x, shift=s)
        (y ** 2).sum().backward()
        return [t.grad.numpy().copy() for t in (w, s, x)]

    for got, want in zip(run(True), run(False), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_parameters_hook_runs_once_per_backward_through_a_checkpoint():
    w = ta.tensor(np.ones((2, 2)), requires_grad=True)
    calls = []
    w.register_hook(lambda g: calls.append(g.numpy().copy()))
    checkpoint(lambda t: t @ w, ta.ones(1, 2, dtype=ta.float64),
               use_reentrant=False).sum().backward()
    assert len(calls) == 1
    np.testing.assert_array_equal(w.grad.numpy(), np.ones((2, 2)))


def test_an_input_changed_in_place_after_the_forward_is_refused():
    """Recomputing from the new values would give a silently wrong gradient (torch raises)."""
    block = _block(dropout=0.0)
    x = ta.randn(3, 4, dtype=ta.float64, requires_grad=True)
    h = x * 1.0
    y = checkpoint(block, h, use_reentrant=False)
    with ta.no_grad():
        h.add_(1.0)
    with pytest.raises(ta.GraphError, match=r"backward: Checkpoint saved its input 0 \(shape "
                                            r"\(3, 4\)\) to compute its gradient, and that "
                                            "tensor was changed in place afterwards"):
        y.sum().backward()


def test_a_parameter_changed_in_place_after_the_forward_is_refused():
    block = _block(dropout=0.0)
    y = checkpoint(block, ta.randn(3, 4, dtype=ta.float64), use_reentrant=False)
    with ta.no_grad():
        block[0].weight.mul_(2.0)  # as the plain block's matmul would, backward refuses
    with pytest.raises(ta.GraphError, match="was changed in place afterwards"):
        y.sum().backward()


def test_gradcheck_graph_checks_a_checkpoint_node_and_its_parameters():
    """A tool that runs the node again on copies of its inputs (float64, perturbed) sees the
    block computed from those copies, the parameters' too."""
    ta.manual_seed(0)
    lin = nn.Linear(4, 3).double()
    x = ta.tensor(np.random.default_rng(10).standard_normal((2, 4)), requires_grad=True)
    with ta.record():
        loss = (checkpoint(lambda t: lin(t).tanh(), x, use_reentrant=False) ** 2).sum()
    report = ta.gradcheck_graph(loss)
    (check,) = [c for c in report.checks if c.label.startswith("Checkpoint#")]
    assert report.ok and check.case.startswith("(2, 4), (3, 4), (3,), ")  # x, weight, bias
    assert lin.weight.grad is None and lin.weight._node.op is None  # left as they were


def test_autograd_grad_through_nested_checkpoints():
    w = ta.tensor(np.random.default_rng(11).standard_normal((3, 3)), requires_grad=True)
    x = ta.tensor(np.random.default_rng(12).standard_normal((2, 3)), requires_grad=True)

    def inner(t):
        return (t @ w).tanh()

    y = checkpoint(lambda t: checkpoint(inner, t, use_reentrant=False).sin() @ w, x,
                   use_reentrant=False)
    got = ta.autograd.grad(y.sum(), [x, w])
    assert w.grad is None and x.grad is None
    want = ta.autograd.grad((inner(x).sin() @ w).sum(), [x, w])
    for g, v in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), v.numpy(), rtol=1e-12)


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_a_block_returning_a_tuple_gives_the_gradients_of_every_output_as_torchs(lib_name):
    # torch's checkpoint takes any output structure; the gradient of each tensor output counts,
    # other items pass through
    lib = ta if lib_name == "tinyattn" else pytest.importorskip("torch")
    from_lib = ta.utils.checkpoint.checkpoint if lib is ta else lib.utils.checkpoint.checkpoint
    x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = lib.tensor([1.5, 2.0, -0.5], requires_grad=True)

    def block(a):
        h = (a * w).tanh()
        return h, h * a, "label"

    kw = {"use_reentrant": False}
    h, y, label = from_lib(block, x, **kw)
    (h.sum() + (y * y).sum()).backward()
    got = (x.grad.numpy().copy(), w.grad.numpy().copy())
    x.grad = w.grad = None
    h, y, _ = block(x)
    (h.sum() + (y * y).sum()).backward()
    assert label == "label"
    np.testing.assert_allclose(got[0], x.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got[1], w.grad.numpy(), rtol=1e-6)
    # one output unused: its gradient is None, the other's still flows
    x.grad = w.grad = None
    h, y, _ = from_lib(block, x, **kw)
    y.sum().backward()
    want_x = x.grad.numpy().copy()
    x.grad = w.grad = None
    block(x)[1].sum().backward()
    np.testing.assert_allclose(want_x, x.grad.numpy(), rtol=1e-6)


# ---- as torch 2.13: use_reentrant, outputs that need no grad, any output structure -------------


def _lib(lib_name):
    if lib_name == "tinyattn":
        return ta, checkpoint
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    return torch, torch_checkpoint


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
@pytest.mark.parametrize("given", [{}, {"use_reentrant": None}])
def test_use_reentrant_left_out_warns_and_means_true_as_torch(lib_name, given):
    lib, ck = _lib(lib_name)
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        out = ck(lambda t: (t * 2, t.detach() * 3), a, **given)
    assert [o.requires_grad for o in out] == [True, True]  # reentrant: every float output


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_outputs_that_need_no_grad_come_back_needing_none_without_reentrant(lib_name):
    lib, ck = _lib(lib_name)
    a = lib.tensor([1.0, 2.0, 4.0], requires_grad=True)

    def stats(t):
        with lib.no_grad():
            m = t.mean()
        return t * 2, m, t.detach().sum(), t.argmax()

    y, m, s, i = ck(stats, a, use_reentrant=False)
    assert (y.requires_grad, m.requires_grad, s.requires_grad, i.requires_grad) == \
        (True, False, False, False)
    assert ck(lambda t: t.detach().sum(), a, use_reentrant=False).requires_grad is False
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0, 2.0])
    y, m, s, i = ck(stats, a, use_reentrant=True)  # reentrant: every float output needs grad
    assert (y.requires_grad, m.requires_grad, s.requires_grad, i.requires_grad) == \
        (True, True, True, False)


def _nested(t):
    return t * 2, [t * 3, {"k": t * 4, "n": 5}], 1.5


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
@pytest.mark.parametrize("reentrant", [False, True])
def test_any_output_structure_comes_back_as_torchs(lib_name, reentrant):
    lib, ck = _lib(lib_name)
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    y, (z, d), f = ck(_nested, a, use_reentrant=reentrant)
    assert f == 1.5 and d["n"] == 5 and type(d) is dict
    # without reentrant every tensor is on the graph; reentrant (an autograd.Function) only
    # the tensors of the top-level tuple
    assert (y.requires_grad, z.requires_grad, d["k"].requires_grad) == \
        (True, not reentrant, not reentrant)
    loss = sum(t.sum() for t in (y, z, d["k"]) if t.requires_grad)
    loss.backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0] if reentrant else [9.0, 9.0])
    out = ck(lambda t: {"y": t * 2}, a, use_reentrant=reentrant)
    assert type(out) is dict and out["y"].requires_grad is (not reentrant)
    out = ck(lambda t: [t * 2], a, use_reentrant=reentrant)
    assert type(out) is list and out[0].requires_grad is (not reentrant)
    assert ck(lambda t: 3.0, a, use_reentrant=reentrant) == 3.0


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_reentrant_needs_an_input_that_requires_grad_as_torchs(lib_name):
    lib, ck = _lib(lib_name)
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0])
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True. "
                                         "Gradients will be None"):
        out = ck(lambda t: t * w, b, use_reentrant=True)
    assert not out.requires_grad  # w's gradient is lost, as torch's (use_reentrant=False)
    assert ck(lambda t: t * w, b, use_reentrant=False).requires_grad
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
        assert ck(lambda t: t * 2, 3.0, use_reentrant=True) == 6.0
    assert ck(lambda t: t * 2, 3.0, use_reentrant=False) == 6.0  # no tensor: it just runs


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_reentrant_refuses_keywords_context_fn_and_debug_as_torchs(lib_name):
    lib, ck = _lib(lib_name)
    a = lib.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
        ck(lambda t, k=1: t * k, a, use_reentrant=True, k=2)
    with pytest.raises(ValueError, match="Passing `context_fn` or `debug` is only supported "
                                         "when use_reentrant=False"):
        ck(lambda t: t * 2, a, use_reentrant=True, debug=True)
    assert ck(lambda t, k=1: t * k, a, use_reentrant=False, k=2).requires_grad


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_reentrant_backward_with_no_output_needing_grad_raises_as_torchs(lib_name):
    lib, ck = _lib(lib_name)
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    out = ck(lambda t: t.detach() * 2, a, use_reentrant=True)
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="none of output has requires_grad=True, this "
                                           "checkpoint\\(\\) is not necessary"):
        out.sum().backward()


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_reentrant_takes_the_top_level_tensors_only_as_torchs(lib_name):
    lib, ck = _lib(lib_name)
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
        assert not ck(lambda xs: xs[0] * 2, [a], use_reentrant=True).requires_grad
    assert ck(lambda xs: xs[0] * 2, [a], use_reentrant=False).requires_grad
