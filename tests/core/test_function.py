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
    assert y.requires_grad and repr(y.grad_fn) == "<Node MySoftmax>"
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

    class TwoOutputs(TooMany):
        @staticmethod
        def forward(ctx, x):
            return x, x

    with pytest.raises(ta.GraphError, match="TooMany.backward returned 2 gradients for 1"):
        TooMany.apply(x).sum().backward()
    with pytest.raises(ta.ShapeError, match=r"WrongShape.backward: .* input 0 has shape \(1,\)"):
        WrongShape.apply(x).sum().backward()
    with pytest.raises(ta.GraphError, match="TwoOutputs.forward must return one Tensor"):
        TwoOutputs.apply(x)
    with pytest.raises(TypeError, match="TooMany.apply: needs at least one Tensor input"):
        TooMany.apply(1.0)
