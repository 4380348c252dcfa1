"""Implicit reparameterisation (tinyattn/distributions/implicit.py): dx/da of Gamma(a, 1) draws
against the derivative of the quantile at a fixed CDF value (torch's regularised incomplete
gamma, inverted by bisection) and against torch's own approximation; then rsample's gradients
of Gamma, Chi2, Beta, Dirichlet and StudentT (to df) in expectation against their closed
forms, the draws the same stream as sample's, float32 kept, and finite gradients at tiny
concentrations whose draws underflow."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.backends.numpy_backend import NumpyBackend
from tinyattn.distributions import Beta, Chi2, Dirichlet, Gamma, StudentT
from tinyattn.distributions.implicit import gamma_draw_grad

torch = pytest.importorskip("torch")

BE = NumpyBackend()
F64 = {"dtype": ta.float64}


def _quantile(a, u):
    """x with P(a, x) = u, by bisection on torch's gammainc (float64)."""
    lo, hi = np.zeros_like(a), np.maximum(20 * a + 50, 100.0)
    for _ in range(200):
        mid = (lo + hi) / 2
        below = torch.special.gammainc(torch.tensor(a), torch.tensor(mid)).numpy() < u
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize("a", [0.05, 0.4, 1.0, 3.5, 40.0, 2000.0])
def test_the_draw_moves_as_its_quantile_does(a):
    rng = np.random.default_rng(int(a * 100))
    shape = np.full(60, a)
    x = rng.standard_gamma(shape)
    u = torch.special.gammainc(torch.tensor(shape), torch.tensor(x)).numpy()
    keep = (u > 1e-8) & (u < 1 - 1e-8)  # (the bisection's own resolution)
    h = 1e-5 * a
    numeric = (_quantile(shape + h, u) - _quantile(shape - h, u)) / (2 * h)
    got = gamma_draw_grad(BE, shape, x)
    np.testing.assert_allclose(got[keep], numeric[keep], rtol=1e-6, atol=1e-12)
    theirs = torch._standard_gamma_grad(torch.tensor(shape), torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, theirs, rtol=2e-3, atol=1e-12)  # (torch's: an approximation)


def test_very_large_concentrations_take_the_normal_limit():
    a = np.array([2e5, 1e6])
    x = a + np.sqrt(a) * np.array([1.5, -0.7])
    np.testing.assert_allclose(gamma_draw_grad(BE, a, x), 1 + (x - a) / (2 * a))
    theirs = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    np.testing.assert_allclose(gamma_draw_grad(BE, a, x), theirs, rtol=1e-4)


def _leaf(v):
    return ta.tensor(v, requires_grad=True, **F64)


def _mean_grads(dist_of, params, stat, n, seed):
    leaves = [_leaf(p) for p in params]
    draws = dist_of(*leaves).rsample((n,), generator=ta.Generator().manual_seed(seed))
    stat(draws).mean(0).sum().backward()
    return [leaf.grad.numpy() for leaf in leaves]


def test_gamma_rsample_gradients_in_expectation():
    """E[x] = a / rate, E[x²] = a (a + 1) / rate²: their gradients, from 60000 draws."""
    a, rate = np.array([0.3, 2.0, 9.0]), np.array([1.0, 2.0, 0.5])
    ga, gr = _mean_grads(Gamma, (a, rate), lambda x: x, 60000, 0)
    np.testing.assert_allclose(ga, 1 / rate, rtol=0.03)
    np.testing.assert_allclose(gr, -a / rate ** 2, rtol=0.03)
    ga, gr = _mean_grads(Gamma, (a, rate), lambda x: x * x, 60000, 1)
    np.testing.assert_allclose(ga, (2 * a + 1) / rate ** 2, rtol=0.06)
    np.testing.assert_allclose(gr, -2 * a * (a + 1) / rate ** 3, rtol=0.06)


def test_chi2_beta_dirichlet_and_student_t_gradients_in_expectation():
    (g,) = _mean_grads(Chi2, (np.array([1.5, 4.0]),), lambda x: x, 60000, 2)
    np.testing.assert_allclose(g, [1.0, 1.0], rtol=0.03)  # E[x] = df
    ga, gb = _mean_grads(Beta, (np.array(2.0), np.array(3.0)), lambda x: x, 100000, 3)
    np.testing.assert_allclose([ga, gb], [3 / 25, -2 / 25], rtol=0.04)  # E = a / (a + b)
    (g,) = _mean_grads(Dirichlet, (np.array([1.0, 2.0, 3.0]),), lambda x: x[:, 0], 100000, 4)
    np.testing.assert_allclose(g, [5 / 36, -1 / 36, -1 / 36], rtol=0.05)
    df = _leaf(np.array(7.0))
    t = StudentT(df).rsample((200000,), generator=ta.Generator().manual_seed(5))
    (t * t).mean().backward()  # E[t²] = df / (df - 2): d/ddf = -2 / (df - 2)²
    assert math.isclose(df.grad.item(), -2 / 25, rel_tol=0.1)


def test_rsample_draws_sample_s_stream_and_keeps_float32():
    for dist in (Gamma(ta.tensor([0.5, 3.0]), 2.0), Beta(ta.tensor([0.5, 3.0]), 1.5),
                 Dirichlet(ta.tensor([0.5, 3.0])), Chi2(ta.tensor([0.5, 3.0]))):
        r = dist.rsample((4,), generator=ta.Generator().manual_seed(9))
        s = dist.sample((4,), generator=ta.Generator().manual_seed(9))
        np.testing.assert_array_equal(r.detach().numpy(), s.numpy())
        assert r.dtype == ta.float32 and dist.has_rsample


def test_tiny_concentrations_whose_draws_underflow_give_finite_gradients():
    a = _leaf(np.array([1e-3, 0.01]))
    x = Gamma(a, 1.0).rsample((2000,), generator=ta.Generator().manual_seed(6))
    assert (x.detach().numpy() > 0).all()  # (floored at the smallest normal number)
    x.sum().backward()
    assert np.isfinite(a.grad.numpy()).all()
