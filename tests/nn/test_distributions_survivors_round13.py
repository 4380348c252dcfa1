"""Tests for the seed-3 mutation survivors of distributions and higher_order, against torch
where torch has the behaviour: constraints (simplex's sum, cat's default lengths, a dim of
-ndim, MixtureSameFamilyConstraint's refusal), refusals naming their distribution or transform,
von Mises draws of the right concentration, ExpRelaxedCategorical's log_prob over a 2-D
batch, and second derivatives through an advanced index in float32, through x ** y at x = 0
and through cumprod of zeros."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import TinyattnError

torch = pytest.importorskip("torch")
D = ta.distributions
C = D.constraints
TC = torch.distributions.constraints


@pytest.mark.parametrize("value", [[0.5, 0.5], [0.2, 0.3, 0.5], [1.0, 0.0], [0.5, 0.6],
                                   [1.5, -0.5], [[0.25, 0.75], [1.0, 1.0]]])
def test_simplex_checks_that_the_entries_sum_to_one(value):
    assert C.simplex.check(ta.tensor(value)).tolist() == \
        TC.simplex.check(torch.tensor(value)).tolist()


def test_cat_of_constraints_takes_one_entry_each_by_default():
    for values in ([1.0, -1.0], [-1.0, -1.0], [2.0, 3.0]):
        assert C.cat([C.positive, C.real]).check(ta.tensor(values)).tolist() == \
            TC.cat([TC.positive, TC.real]).check(torch.tensor(values)).tolist()
    assert C.cat([C.positive, C.real], lengths=[2, 1]).check(
        ta.tensor([1.0, -1.0, -5.0])).tolist() == [True, False, True]


@pytest.mark.parametrize("which", ["cat", "stack"])
def test_a_dim_of_minus_ndim_is_the_first(which):
    ours = getattr(C, which)([C.positive, C.real], dim=-2)
    theirs = getattr(TC, which)([TC.positive, TC.real], dim=-2)
    v = [[1.0, -2.0], [-1.0, 3.0]]
    assert ours.check(ta.tensor(v)).tolist() == theirs.check(torch.tensor(v)).tolist()
    with pytest.raises(AssertionError, match=f"constraints.{which}: dim -3 out of range"):
        getattr(C, which)([C.positive, C.real], dim=-3).check(ta.tensor(v))


def test_a_mixture_constraint_of_no_constraint_is_refused_by_name():
    with pytest.raises(TypeError, match="constraints.MixtureSameFamilyConstraint: expected a "
                                        "Constraint, got int"):
        C.MixtureSameFamilyConstraint(5)


@pytest.mark.parametrize("call, match", [
    (lambda: D.LKJCholesky(3, 1.0).log_prob(ta.ones(2, 2)), "LKJCholesky.log_prob: value of"),
    (lambda: D.Wishart(df=4.0, covariance_matrix=ta.eye(3)).log_prob(ta.ones(2, 2)),
     "Wishart.log_prob: value of"),
    (lambda: D.Binomial(5, ta.tensor([0.3])).sample(generator=5),
     "Binomial.sample: generator must be"),
    (lambda: D.transforms.StackTransform([D.transforms.ExpTransform(),
                                          D.transforms.AffineTransform(0, 2)]).inv(ta.ones(3)),
     "StackTransform: y of shape"),
])
def test_refusals_name_what_refused(call, match):
    with pytest.raises((TypeError, ValueError, TinyattnError), match=match):
        call()


def _mean_resultant_length(kappa):
    """E cos(θ - loc) of von Mises(loc, κ): I1(κ) / I0(κ), by the trapezoid rule."""
    t = np.linspace(0, np.pi, 20001)
    w = np.exp(kappa * (np.cos(t) - 1))
    return np.trapezoid(w * np.cos(t), t) / np.trapezoid(w, t)


@pytest.mark.parametrize("kappa", [0.5, 2.0, 8.0])
def test_von_mises_draws_have_their_concentration(kappa):
    ta.manual_seed(0)
    theta = D.VonMises(ta.tensor(0.3), ta.tensor(kappa)).sample((40000,)).numpy()
    assert np.all((theta >= -math.pi) & (theta < math.pi))
    got = np.cos(theta - 0.3).mean()
    assert got == pytest.approx(_mean_resultant_length(kappa), abs=0.012)


def test_exp_relaxed_categorical_log_prob_over_a_2d_batch():
    from torch.distributions.relaxed_categorical import ExpRelaxedCategorical

    logits = np.random.default_rng(0).standard_normal((2, 3, 4))
    v = np.log(np.random.default_rng(1).dirichlet(np.ones(4), size=(2, 3)))
    ours = D.ExpRelaxedCategorical(ta.tensor(0.7, dtype=ta.float64),
                                   logits=ta.tensor(logits)).log_prob(ta.tensor(v))
    theirs = ExpRelaxedCategorical(torch.tensor(0.7, dtype=torch.float64),
                                   logits=torch.tensor(logits)).log_prob(torch.tensor(v))
    assert ours.shape == (2, 3)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10)


def _second_derivative(lib, f, x0, dtype):
    x = lib.tensor(x0, dtype=getattr(lib, dtype), requires_grad=True)
    (g,) = lib.autograd.grad(f(x).sum(), x, create_graph=True)
    (h,) = lib.autograd.grad((g * g).sum(), x)
    return g, h


def test_a_second_derivative_through_an_advanced_index_keeps_float32():
    def f(x):
        return x[[0, 2, 2]] ** 3

    (g, h), (gt, ht) = (_second_derivative(lib, f, [1.0, 2.0, 3.0], "float32")
                        for lib in (ta, torch))
    assert g.dtype == h.dtype == ta.float32
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-6)


@pytest.mark.parametrize("y0", [0.0, 0.5, 1.0, 2.5])
@pytest.mark.parametrize("x_needs_grad", [False, True])
def test_the_exponents_gradient_with_a_graph_at_a_zero_base(y0, x_needs_grad):
    """d(x ** y)/dy = x ** y log x is 0 at x = 0 for y >= 0 (torch's), taken with
    create_graph (the graph VJPs of tinyattn/higher_order/), without a NumPy warning on the way
    (0 ** -0.5, 0 * log 0: the test suite turns warnings into errors). (The second derivative
    in y is NaN there in torch and here, and NumPy warns of it here: not checked.)"""
    out = []
    for lib in (ta, torch):
        x = lib.tensor([0.0, 2.0], dtype=lib.float64, requires_grad=x_needs_grad)
        y = lib.tensor([y0, y0], dtype=lib.float64, requires_grad=True)
        grads = lib.autograd.grad((x ** y).sum(), [x, y] if x_needs_grad else [y],
                                  create_graph=True)
        assert grads[-1].requires_grad
        out.append([g.detach().numpy() for g in grads])
    for ours, theirs in zip(*out, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    assert out[0][-1][0] == 0.0


@pytest.mark.parametrize("x0", [[0.0, 0.0, 0.0], [0.0, 2.0, 0.0], [1.5, 2.0, 3.0]])
def test_cumprods_second_derivative_with_and_without_zeros(x0):
    (g, h), (gt, ht) = (_second_derivative(lib, lambda x: x.cumprod(0), x0, "float64")
                        for lib in (ta, torch))
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-12, atol=1e-12)
