"""autograd.functional's jacobian, jvp and hessian with create_graph=True, as torch's: the
results keep a graph to the inputs, so they can be differentiated again (values and the
derivatives of the results against torch in float64); strict=True still names an output that
does not depend on an input; an output laid out column-major gets its whole Jacobian."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.autograd_functional as AF  # noqa: N812

torch = pytest.importorskip("torch")
TF = torch.autograd.functional

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 4))
X = RNG.standard_normal(4)
V = RNG.standard_normal(4)


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def squashed(m, a):
    return lambda x: m.tanh(a @ x) ** 2


def cubed(m):
    return lambda x: (m.tanh(x) ** 3).sum()


def leaves():
    return ta.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)


def test_jvp_with_create_graph_keeps_a_graph_as_torch():
    x, xt = leaves()
    out, j = AF.jvp(squashed(ta, ta.tensor(A)), x, ta.tensor(V), create_graph=True)
    out_t, jt = TF.jvp(squashed(torch, torch.tensor(A)), xt, torch.tensor(V), create_graph=True)
    close(out, out_t)
    close(j, jt)
    assert j.requires_grad and out.requires_grad
    w = RNG.standard_normal(3)
    (h,) = ta.autograd.grad((j * ta.tensor(w)).sum(), x)
    (ht,) = torch.autograd.grad((jt * torch.tensor(w)).sum(), xt)
    close(h, ht)


def test_jvp_with_create_graph_of_several_inputs_and_outputs():
    x, xt = leaves()
    y, yt = ta.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    va, vat = RNG.standard_normal(A.shape), None
    vat = torch.tensor(va)

    def f(m):
        return lambda a, b: (m.sin(b @ a), (a * a).sum())

    outs, js = AF.jvp(f(ta), (x, y), (ta.tensor(V), ta.tensor(va)), create_graph=True)
    outs_t, js_t = TF.jvp(f(torch), (xt, yt), (torch.tensor(V), vat), create_graph=True)
    for a, b in zip(js, js_t, strict=True):
        close(a, b)
    g = ta.autograd.grad(js[0].sum() + js[1], (x, y))
    gt = torch.autograd.grad(js_t[0].sum() + js_t[1], (xt, yt))
    for a, b in zip(g, gt, strict=True):
        close(a, b)


def test_jacobian_with_create_graph_keeps_a_graph_as_torch():
    x, xt = leaves()
    jac = AF.jacobian(squashed(ta, ta.tensor(A)), x, create_graph=True)
    jac_t = TF.jacobian(squashed(torch, torch.tensor(A)), xt, create_graph=True)
    assert jac.shape == (3, 4) and jac.requires_grad
    close(jac, jac_t)
    (h,) = ta.autograd.grad((jac ** 2).sum(), x)
    (ht,) = torch.autograd.grad((jac_t ** 2).sum(), xt)
    close(h, ht)


def test_hessian_with_create_graph_gives_third_derivatives_as_torch():
    x, xt = leaves()
    hess = AF.hessian(cubed(ta), x, create_graph=True)
    hess_t = TF.hessian(cubed(torch), xt, create_graph=True)
    close(hess, hess_t)
    (third,) = ta.autograd.grad(hess.sum(), x)
    (third_t,) = torch.autograd.grad(hess_t.sum(), xt)
    close(third, third_t)
    plain = AF.hessian(cubed(ta), x)  # without: the same numbers, no graph
    assert not plain.requires_grad
    np.testing.assert_allclose(plain.numpy(), hess.detach().numpy(), rtol=1e-13, atol=1e-13)


def test_an_input_that_needs_no_grad_still_gets_a_graph_as_torch():
    out, j = AF.jvp(squashed(ta, ta.tensor(A)), ta.tensor(X), ta.tensor(V), create_graph=True)
    out_t, jt = TF.jvp(squashed(torch, torch.tensor(A)), torch.tensor(X), torch.tensor(V),
                       create_graph=True)
    close(j, jt)
    assert (j.requires_grad, out.requires_grad) == (jt.requires_grad, out_t.requires_grad)


def test_an_output_that_does_not_depend_on_the_input():
    x = ta.tensor(X, requires_grad=True)
    out, j = AF.jvp(lambda t: ta.ones(3), x, ta.tensor(V), create_graph=True)
    assert j.tolist() == [0.0] * 3
    jac = AF.jacobian(lambda t: ta.ones(3), x, create_graph=True)
    assert jac.shape == (3, 4) and not jac.numpy().any()
    with pytest.raises(ta.GraphError, match="jvp: the output does not depend on input 0"):
        AF.jvp(lambda t: ta.ones(3), x, ta.tensor(V), create_graph=True, strict=True)
    with pytest.raises(ta.GraphError, match="jacobian: output 0 does not depend on input 0"):
        AF.jacobian(lambda t: ta.ones(3), x, create_graph=True, strict=True)


@pytest.mark.parametrize("create_graph", [False, True])
def test_an_output_laid_out_in_another_order_gets_its_whole_jacobian(create_graph):
    """A transposed output (laid out column-major): each row's one-hot cotangent lands at its
    place (a flat view of such data is a copy, so the Jacobian once came out all zeros)."""
    x = RNG.standard_normal((2, 3))
    jac = AF.jacobian(lambda t: t.mT * 1.0, ta.tensor(x), create_graph=create_graph)
    close(jac, TF.jacobian(lambda t: t.mT * 1.0, torch.tensor(x)))
    hess = AF.hessian(lambda t: (t.mT.exp() * t.mT).sum(), ta.tensor(x),
                      create_graph=create_graph)
    close(hess, TF.hessian(lambda t: (t.mT.exp() * t.mT).sum(), torch.tensor(x)))
