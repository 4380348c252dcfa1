"""Gradients of gradients through custom autograd.Function nodes (tinyattn/higher_order/
function.py), against torch's same Functions in float64: a backward written with tensor ops is
run again with a graph, on the tensors ctx saved reconnected to their nodes (an input, the
output, one output of several), with non-tensor arguments, setup_context, an output marked
non-differentiable and an intermediate saved as a constant; once_differentiable is refused by
name."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(5)
X = RNG.standard_normal((3, 4))
B = RNG.standard_normal(4)


def functions(m):
    """The same Functions written for tinyattn (m = ta) and for torch (m = torch)."""

    class Exp(m.autograd.Function):  # saves its output
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class Cube(m.autograd.Function):  # saves its input; a number argument
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x ** 3 * k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * ctx.k * x ** 2 * g, None

    class SinCos(m.autograd.Function):  # two outputs
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin(), x.cos()

        @staticmethod
        def backward(ctx, gs, gc):
            (x,) = ctx.saved_tensors
            return gs * x.cos() - gc * x.sin()

    class ScaledPair(m.autograd.Function):  # two outputs, one of them saved
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y, 2 * x

        @staticmethod
        def backward(ctx, gy, gz):
            (y,) = ctx.saved_tensors
            return gy * y + 2 * gz

    class Outer(m.autograd.Function):  # two inputs, one broadcast; torch 2's setup_context
        @staticmethod
        def forward(a, b):
            return a * b

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, (g * a).sum(0)

    class SquareAndSign(m.autograd.Function):  # an output marked non-differentiable
        @staticmethod
        def forward(ctx, x):
            s = x.sign()
            ctx.mark_non_differentiable(s)
            ctx.save_for_backward(x)
            return x * x, s

        @staticmethod
        def backward(ctx, g, _):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    class Tanh(m.autograd.Function):  # saves an intermediate: a constant of the graph
        @staticmethod
        def forward(ctx, x):
            t = x.tanh()
            ctx.save_for_backward(t * 1.0)
            return t

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return g * (1 - t * t)

    return {"exp": lambda x, b: (Exp.apply(x) ** 2).sum(),
            "cube": lambda x, b: Cube.apply(x, 2.0).sum() * x.sum(),
            "sincos": lambda x, b: (lambda s, c: (s * c * x).sum())(*SinCos.apply(x)),
            "sincos_one_used": lambda x, b: SinCos.apply(x)[0].sum() ** 2,
            "saved_output_of_two": lambda x, b: (lambda y, z: (y * z).sum())(*ScaledPair.apply(x)),
            "outer": lambda x, b: (Outer.apply(x, b) ** 2).sum(),
            "non_differentiable": lambda x, b: (SquareAndSign.apply(x)[0] ** 2).sum(),
            "intermediate": lambda x, b: (Tanh.apply(x) ** 3).sum()}


OURS, THEIRS = functions(ta), functions(torch)


def leaves():
    return ((ta.tensor(X, requires_grad=True), ta.tensor(B, requires_grad=True)),
            (torch.tensor(X, requires_grad=True), torch.tensor(B, requires_grad=True)))


def close(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(OURS))
def test_grad_of_grad_through_a_function_matches_torch(name):
    ours, theirs = leaves()
    gs = ta.autograd.grad(OURS[name](*ours), ours, create_graph=True, allow_unused=True)
    gts = torch.autograd.grad(THEIRS[name](*theirs), theirs, create_graph=True,
                              allow_unused=True)
    pairs = [(g, gt) for g, gt in zip(gs, gts, strict=True) if gt is not None]
    for g, gt in pairs:
        close(g, gt)
    s = sum((g * g).sum() for g, _ in pairs)
    st = sum((gt * gt).sum() for _, gt in pairs)
    hs = ta.autograd.grad(s, ours, allow_unused=True)
    hts = torch.autograd.grad(st, theirs, allow_unused=True)
    for h, ht in zip(hs, hts, strict=True):
        if ht is None:
            assert h is None or not h.numpy().any()
        else:
            close(h, ht)


def test_the_hessian_of_a_function_and_gradgradcheck():
    exp = OURS["exp"]
    x = ta.tensor(X[0], requires_grad=True)
    hess = ta.autograd.functional.hessian(lambda t: exp(t, None), x)
    np.testing.assert_allclose(hess.numpy(), np.diag(4 * np.exp(2 * X[0])), rtol=1e-12)
    assert ta.autograd.gradgradcheck(lambda t: OURS["sincos"](t, None), (x,))


def test_once_differentiable_is_refused_by_name_in_a_create_graph_pass():
    class Twice(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        @ta.autograd.function.once_differentiable
        def backward(ctx, g):
            return 2 * g

    x = ta.tensor(X, requires_grad=True)
    (g,) = ta.autograd.grad(Twice.apply(x).sum(), x)  # first order: as before
    assert (g.numpy() == 2).all()
    with pytest.raises(ta.GraphError, match="Twice.backward is marked once_differentiable"):
        ta.autograd.grad((Twice.apply(x) ** 2).sum(), x, create_graph=True)


def test_a_function_named_as_a_built_in_op_still_runs_its_own_backward():
    class relu(ta.autograd.Function):  # noqa: N801 - the point: the name of a built-in op
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

    x = ta.tensor(X, requires_grad=True)
    (g,) = ta.autograd.grad(relu.apply(x).sum(), x, create_graph=True)
    close(g, torch.tensor(np.cos(X)))
    (h,) = ta.autograd.grad(g.sum(), x)
    close(h, torch.tensor(-np.sin(X)))
