"""autograd.Function: ops written by the user with a forward and a backward, as torch's."""

import numpy as np
import pytest

import tinyattn as ta

X = np.random.default_rng(0).standard_normal((3, 4))


def softmax_function(lib):
    """The same hand-written softmax in both libraries: forward, saved output, backward."""

    class MySoftmax(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, dim):
            y = (x - x.amax(dim, keepdim=True)).exp()
            y = y / y.sum(dim, keepdim=True)
            ctx.save_for_backward(y)
            ctx.dim = dim
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return y * (g - (g * y).sum(ctx.dim, keepdim=True)), None

    return MySoftmax


def test_a_function_backpropagates_as_torchs():
    torch = pytest.importorskip("torch")
    results = []
    for lib in (ta, torch):
        x = lib.tensor(X, requires_grad=True)
        y = softmax_function(lib).apply(x * 2, 1)
        (y * lib.tensor(X)).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10)


def test_a_function_passes_gradcheck_and_shows_in_the_graph(capsys):
    fn = softmax_function(ta)
    x = ta.tensor(X, requires_grad=True)
    assert ta.gradcheck(lambda z: fn.apply(z, 0), [x])
    y = fn.apply(x, 0)
    assert y.requires_grad and y.grad_fn.name() == "MySoftmaxBackward"
    assert y.grad_fn.op.name == "MySoftmax"
    assert ta.autograd.Function is ta.Function
    capsys.readouterr()
    with ta.explain():
        (fn.apply(x, 1) * 3).sum().backward()
    assert "MySoftmax: MySoftmax.backward (written by hand)" in capsys.readouterr().out
    with ta.no_grad():
        assert not fn.apply(x, 0).requires_grad


def test_needs_input_grad_and_inputs_without_gradients():
    seen = []

    class Scale(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, factor):
            seen.append(ctx.needs_input_grad)
            ctx.save_for_backward(x, w)
            ctx.factor = factor
            return x * w * factor

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * w * ctx.factor, g * x * ctx.factor, None

    x, w = ta.tensor(X, requires_grad=True), ta.tensor(X + 1)
    Scale.apply(x, w, 2.0).sum().backward()
    assert seen == [(True, False, False)]
    np.testing.assert_allclose(x.grad.numpy(), (X + 1) * 2.0)
    assert w.grad is None


def test_what_a_function_gets_wrong_is_named():
    x = ta.tensor([1.0, 2.0], requires_grad=True)

    class TooMany(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    class WrongShape(TooMany):
        @staticmethod
        def backward(ctx, g):
            return g[:1]

    with pytest.raises(ta.GraphError, match="TooMany.backward returned 2 gradients for 1"):
        TooMany.apply(x).sum().backward()
    with pytest.raises(ta.ShapeError, match=r"WrongShape.backward: .* input 0 has shape \(1,\)"):
        WrongShape.apply(x).sum().backward()


# ---- torch's Function API: what forward and backward may give and get ------------------------


def leaf(values):
    return ta.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


class Identity(ta.autograd.Function):
    """forward returns its input itself (kind "same"), a view of it, or a slice of it."""

    kind = "same"

    @staticmethod
    def forward(ctx, x):
        return x  # (subclasses: a view)

    @staticmethod
    def backward(ctx, g):
        return g


class ViewOf(Identity):
    @staticmethod
    def forward(ctx, x):
        return x.view(-1)


class SliceOf(Identity):
    @staticmethod
    def forward(ctx, x):
        return x[:]


@pytest.mark.parametrize("fn", [Identity, ViewOf, SliceOf], ids=["same", "view", "slice"])
def test_an_output_that_is_an_input_shares_its_version_counter(fn):
    """torch: an output that is an input (or a view of its memory) is a view of it; a change
    of the input is then seen by the graphs that saved the output (here: refused)."""
    x = leaf([1.0, 2.0, 3.0])
    h = x * 1.0
    y = fn.apply(h)
    assert y is not h and np.shares_memory(y.numpy(), h.numpy())
    z = y * y  # saves y
    with ta.no_grad():
        h.mul_(10.0)  # writes y's memory
    assert y._version == h._version == 1
    with pytest.raises(ta.GraphError, match="changed in place afterwards"):
        z.sum().backward()
    h2 = x * 1.0
    with pytest.raises(ta.GraphError, match="shares its memory"):  # torch refuses it too
        fn.apply(h2).add_(1.0)


def test_an_input_changed_in_place_inside_forward_counts_the_change():
    """Without mark_dirty the input's version moves on all the same: a graph that saved it
    before refuses it in backward, as torch's."""

    class AddOneInPlace(ta.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            a.add_(1.0)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = leaf([1.0, 2.0, 3.0])
    h = x * 1.0
    z = h * h  # saves h
    AddOneInPlace.apply(h)
    assert h._version == 1
    with pytest.raises(ta.GraphError, match=r"mul saved its input 0 .* changed in place"):
        z.sum().backward()


def test_mark_dirty_returns_the_input_itself_on_the_new_node():
    class AddOne(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1.0)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    x = leaf([2.0, 1.0])
    y = x * 1.0
    z = AddOne.apply(y)
    assert z is y and y._version == 2 and y.grad_fn.name() == "AddOneBackward"  # (torch's)
    (z * z).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 4.0])
    with pytest.raises(ta.GraphError, match="leaf that requires grad"):
        AddOne.apply(leaf([1.0]))


def test_several_outputs_non_differentiable_ones_and_materialized_gradients():
    seen = []

    class SortWithIndex(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argsort()
            doubled = x * 2
            ctx.mark_non_differentiable(doubled)
            return x * 3, idx, doubled, "tag"

        @staticmethod
        def backward(ctx, g, g_idx, g_doubled, g_tag):
            seen.append((g_idx.tolist(), g_doubled.tolist(), g_tag))
            return g * 3

    x = leaf([2.0, 1.0])
    a, idx, doubled, tag = SortWithIndex.apply(x)
    assert a.requires_grad and not idx.requires_grad and not doubled.requires_grad
    assert tag == "tag" and idx.tolist() == [1, 0]
    a.sum().backward()
    assert seen == [([0, 0], [0.0, 0.0], None)]  # zeros for the others (torch)
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


@pytest.mark.parametrize("materialize", [True, False])
def test_two_differentiable_outputs_and_set_materialize_grads(materialize):
    seen = []

    class Two(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append(None if g1 is None else g1.tolist())
            return (0 if g1 is None else g1 * 2) + g2 * 3

    x = leaf([1.0, 2.0])
    a, b = Two.apply(x)
    assert a.requires_grad and b.requires_grad and a.grad_fn == b.grad_fn
    np.testing.assert_array_equal(b.numpy(), [3.0, 6.0])
    b.sum().backward()
    assert seen == [[0.0, 0.0] if materialize else None]  # None for the unused one (torch)
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    x.grad = None
    a, b = Two.apply(x)
    (a * 5 + b).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [13.0, 13.0])


def test_keyword_arguments_trailing_nones_and_a_broadcast_gradient():
    class Scale(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, flag=False):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None, None, None  # one None more than inputs: accepted

    class SumRows(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum(0)

        @staticmethod
        def backward(ctx, g):  # a gradient the input broadcasts to: summed down (torch)
            return g.expand(3, 2).unsqueeze(0).expand(2, 3, 2)

    x = leaf([1.0, 2.0])
    Scale.apply(x, k=3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    m = leaf(np.ones((3, 2)))
    SumRows.apply(m).sum().backward()
    np.testing.assert_array_equal(m.grad.numpy(), np.full((3, 2), 2.0))


def test_a_gradient_for_a_non_tensor_input_or_too_many_gradients_is_refused():
    class GivesOne(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * 2, g

    class TooMany(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    x = leaf([1.0, 2.0])
    with pytest.raises(ta.GraphError, match="gradient for input 1, which is not a Tensor"):
        GivesOne.apply(x, 3).sum().backward()
    with pytest.raises(ta.GraphError, match="TooMany.backward returned 2 gradients for 1"):
        TooMany.apply(x).sum().backward()


def test_forward_gets_its_arguments_themselves_and_its_errors_come_back_as_they_are():
    seen = []

    class MyError(ValueError):
        pass

    class F(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x, arr, n, s):
            seen.append((type(arr).__name__, type(n).__name__, s))
            if s == "fail":
                raise MyError("custom failure")
            return x * float(arr.sum()) * n

        @staticmethod
        def backward(ctx, g):
            return g, None, None, None

    x = leaf([1.0, 2.0])
    F.apply(x, np.array([1.0, 2.0]), np.int64(2), "ok")
    assert seen == [("ndarray", "int64", "ok")]
    with pytest.raises(MyError, match="^custom failure$"):
        F.apply(x, np.array([1.0]), 1, "fail")
    with pytest.raises(AttributeError):
        F.apply(x, {}, 1, "ok")  # (no .sum on a dict: as it is too)


def test_torch_2_style_forward_with_setup_context():
    class Scale(ta.autograd.Function):
        @staticmethod
        def forward(x, k=3.0):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k = inputs
            ctx.k = k
            ctx.save_for_backward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            assert x.shape == (2,)
            return g * ctx.k, None

    x = leaf([2.0, 1.0])
    y = Scale.apply(x)
    np.testing.assert_array_equal(y.numpy(), [6.0, 3.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_a_second_backward_through_a_function_runs_unless_it_saved_tensors():
    class Double(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.k = 2.0
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k

    x = leaf([1.0, 2.0])
    y = Double.apply(x)
    y.sum().backward()
    y.sum().backward()  # nothing was saved: it runs again (torch)
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0])
    y = softmax_function(ta).apply(x, 0)
    y.sum().backward()
    with pytest.raises(ta.GraphError, match="MySoftmax was already freed"):
        y.sum().backward()


# ---- utils.checkpoint (a Function) as torch's non-reentrant checkpoint ------------------------


def test_a_checkpointed_block_sees_requires_grad_and_grad_mode_as_the_caller_has_them():
    from tinyattn.utils.checkpoint import checkpoint

    seen = []

    def block(a):
        h = a * 1.0
        seen.append((h.requires_grad, ta.is_grad_enabled()))
        return h.tanh() if h.requires_grad else h  # the same branch both times

    x = leaf([0.5, 1.0])
    y = checkpoint(block, x, use_reentrant=False)
    np.testing.assert_allclose(y.detach().numpy(), np.tanh([0.5, 1.0]))
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 - np.tanh([0.5, 1.0]) ** 2)
    assert seen == [(True, True), (True, True)]  # the forward, then the recomputation


def test_a_hook_registered_inside_a_checkpointed_block_runs():
    from tinyattn.utils.checkpoint import checkpoint

    calls = []

    def block(a):
        h = a * 2
        h.register_hook(lambda g: calls.append(g.tolist()) or g * 10)
        return h.tanh()

    x = leaf([0.0, 0.0])
    checkpoint(block, x, use_reentrant=False).sum().backward()
    assert calls == [[1.0, 1.0]]  # once, as torch's (in the recomputation here)
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 20.0])


def test_checkpoint_takes_torchs_keywords_and_tensors_inside_lists():
    import contextlib

    from tinyattn.utils.checkpoint import checkpoint

    got, entered = {}, []

    def block(pair, scale=1.0, **kw):
        got.update(kw)
        return (pair[0] * pair[1]).tanh() * scale

    @contextlib.contextmanager
    def note(what):
        entered.append(what)
        yield

    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    y = checkpoint(block, [x, w], scale=2.0, use_reentrant=False, determinism_check="none",
                   debug=False, early_stop=True, preserve_rng_state=True,
                   context_fn=lambda: (note("forward"), note("recompute")))
    y.sum().backward()
    assert got == {} and entered == ["forward", "recompute"]
    want = 2 * (1 - np.tanh([3.0, 8.0]) ** 2)
    np.testing.assert_allclose(x.grad.numpy(), want * [3.0, 4.0])
    np.testing.assert_allclose(w.grad.numpy(), want * [1.0, 2.0])
    with pytest.raises(ValueError, match="determinism_check"):
        checkpoint(block, [x, w], determinism_check="strict", use_reentrant=False)


def test_a_checkpoint_returning_a_view_of_its_input_shares_its_version_counter():
    from tinyattn.utils.checkpoint import checkpoint

    x = leaf([1.0, 2.0, 3.0])
    h = x * 1.0
    y = checkpoint(lambda a: a.view(3), h, use_reentrant=False)
    z = h * h  # saves h
    with ta.no_grad():
        y.mul_(10.0)  # writes h's memory: a change of h
    assert h._version == 1
    with pytest.raises(ta.GraphError, match="mul saved its input 0 .* changed in place"):
        z.sum().backward()
