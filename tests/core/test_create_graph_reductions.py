"""Gradients of gradients through the reductions and scans (tinyattn/higher_order/reductions.py):
var, vector_norm (every ord), logsumexp, max/min, prod (with zeros), cumsum, cumprod (with
zeros), logcumsumexp, quantile, nanmedian and median, each against torch in float64 (its dim,
keepdim and ord variants); a third order through prod and cumprod with zeros; gradgradcheck
on compositions; and three user scenarios against torch: the WGAN-GP penalty on the norm of a
critic's input gradient, the Hessian of a log-sum-exp and variance objective, and an input
gradient penalty through BatchNorm1d in training mode."""

import math

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(11)
INF = math.inf


def pair(values):
    """A float64 tinyattn leaf and a torch leaf with the same values."""
    a = np.asarray(values, dtype=np.float64)
    return (ta.tensor(a, requires_grad=True),
            torch.tensor(a, dtype=torch.float64, requires_grad=True))


def close(a, b, tol=1e-9):
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(np.asarray(a.numpy() if hasattr(a, "numpy") else a), b,
                               rtol=tol, atol=tol)


def _norm(p, dim=None, keepdim=False):
    return lambda m, x: (m.linalg.vector_norm(x, ord=p, dim=dim, keepdim=keepdim) ** 2).sum()


def _q(m, qs):
    return m.tensor(qs, dtype=m.float64)


FUNCTIONS = {
    "var": lambda m, x: x.var() * x.sum(),
    "var_dim": lambda m, x: (x.var(dim=1) ** 2).sum(),
    "var_keepdim_biased": lambda m, x: (x.var(dim=0, keepdim=True, correction=0) * x).sum(),
    "var_dims": lambda m, x: x.var(dim=(0, 1), unbiased=False).exp(),
    "std": lambda m, x: (x.std(dim=1) ** 3).sum(),
    "norm2": _norm(2), "norm2_dim": _norm(2, 1), "norm2_keepdim": _norm(2, 0, True),
    "norm1": _norm(1, 1), "norm_inf": _norm(INF, 1), "norm_-inf": _norm(-INF, 0),
    "norm0": lambda m, x: m.linalg.vector_norm(x, ord=0, dim=1).sum() + (x ** 2).sum(),
    "norm3": _norm(3, 1), "norm_0.5": _norm(0.5, 1), "norm_-1.5": _norm(-1.5),
    "norm1.5_keepdim": _norm(1.5, 1, True),
    "logsumexp": lambda m, x: x.logsumexp(dim=(0, 1)) ** 2,
    "logsumexp_dim": lambda m, x: (x.logsumexp(dim=-1) ** 2).sum(),
    "logsumexp_keepdim": lambda m, x: (x.logsumexp(dim=0, keepdim=True) * x).sum(),
    "max": lambda m, x: x.max() ** 2,
    "amax_dim": lambda m, x: (x.amax(dim=1) ** 2).sum(),
    "amin_keepdim": lambda m, x: (x.amin(dim=0, keepdim=True) * x).sum(),
    "min": lambda m, x: x.min() * x.sum(),
    "prod": lambda m, x: x.prod(),
    "prod_dim": lambda m, x: x.prod(dim=1).sum(),
    "prod_keepdim": lambda m, x: (x.prod(dim=0, keepdim=True) * x).sum(),
    "cumsum": lambda m, x: (x.cumsum(1) ** 2).sum(),
    "cumsum_dim0": lambda m, x: (x.cumsum(0).sin()).sum(),
    "cumprod": lambda m, x: x.cumprod(1).sum(),
    "cumprod_dim0": lambda m, x: (x.cumprod(0) ** 2).sum(),
    "logcumsumexp": lambda m, x: (x.logcumsumexp(1) ** 2).sum(),
    "logcumsumexp_dim0": lambda m, x: (x.logcumsumexp(0) * x).sum(),
    "quantile": lambda m, x: (x.quantile(0.3, dim=1) ** 2).sum(),
    "quantile_all": lambda m, x: x.quantile(0.6) * x.sum(),
    "quantile_qs": lambda m, x: (x.quantile(_q(m, [0.2, 0.7]), dim=0, keepdim=True) ** 2).sum(),
    "quantile_nearest": lambda m, x: (x.quantile(0.45, dim=1, interpolation="nearest") ** 2)
    .sum(),
    "nanmedian": lambda m, x: x.nanmedian() * x.sum(),
    "median": lambda m, x: x.median() * (x ** 2).sum(),
    "median_ties": lambda m, x: m.cat([x.reshape(-1), x.reshape(-1)]).median() ** 2 * x.sum(),
}

WITH_ZEROS = {"prod", "prod_dim", "prod_keepdim", "cumprod", "cumprod_dim0", "norm2_dim",
              "norm1", "norm3", "norm_0.5", "norm1.5_keepdim"}


def _values(zeros):
    values = RNG.standard_normal((3, 4))
    if zeros:  # one zero in row 0, two in row 2 (and a zero row, for the norms' dim=1)
        values[0, 1] = values[2, 0] = values[2, 3] = 0.0
        values[1] = 0.0
    return values


def _grad_of_grad(f, values, where_torch_is_finite=False):
    x, xt = pair(values)
    (g,) = ta.autograd.grad(f(ta, x), x, create_graph=True)
    (gt,) = torch.autograd.grad(f(torch, xt), xt, create_graph=True)
    close(g, gt)
    w = RNG.standard_normal(values.shape)
    (h,) = ta.autograd.grad((g * ta.tensor(w)).sum(), x, allow_unused=True)
    (ht,) = torch.autograd.grad((gt * torch.tensor(w)).sum(), xt, allow_unused=True)
    h = np.zeros(values.shape) if h is None else h.numpy()
    ht = np.zeros(values.shape) if ht is None else ht.numpy()
    if where_torch_is_finite:  # torch's NaN at x = 0 (|x|^(p-2), p < 2): tinyattn's 0
        assert np.isfinite(h).all()
        h, ht = h[np.isfinite(ht)], ht[np.isfinite(ht)]
    close(h, ht, 1e-8)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_grad_of_grad_against_torch(name):
    _grad_of_grad(FUNCTIONS[name], _values(False))


@pytest.mark.parametrize("name", sorted(WITH_ZEROS))
def test_grad_of_grad_with_zeros_against_torch(name):
    _grad_of_grad(FUNCTIONS[name], _values(True), name.startswith("norm"))


def _third(m, f, leaf):
    (g,) = m.autograd.grad(f(m, leaf), leaf, create_graph=True)
    (h,) = m.autograd.grad((g ** 2).sum(), leaf, create_graph=True)
    return m.autograd.grad((h * leaf).sum(), leaf)[0]


@pytest.mark.parametrize("name", ["prod", "prod_dim", "cumprod", "var_dim", "logsumexp_dim",
                                  "norm3"])
def test_third_order_against_torch(name):
    x, xt = pair(_values(name.startswith(("prod", "cumprod"))))
    close(_third(ta, FUNCTIONS[name], x), _third(torch, FUNCTIONS[name], xt), 1e-8)


def _second_then_dot(f, values):
    x = ta.tensor(values, requires_grad=True)
    (g,) = ta.autograd.grad(f(ta, x), x, create_graph=True)
    (h,) = ta.autograd.grad((g ** 2).sum(), x)
    return float((h.numpy() * values).sum())


def test_third_order_of_logcumsumexp_against_differences():
    """(torch's third order here is NaN in most entries: its VJP takes logs of g's parts.)"""
    f, values = FUNCTIONS["logcumsumexp"], _values(False)
    got = _third(ta, f, ta.tensor(values, requires_grad=True)).numpy()
    numeric = np.zeros(values.shape)
    for i in np.ndindex(values.shape):
        step = np.zeros(values.shape)
        step[i] = 1e-6
        numeric[i] = (_second_then_dot(f, values + step)
                      - _second_then_dot(f, values - step)) / 2e-6
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-6)


def _ggc_cases():
    x = ta.tensor(np.random.default_rng(3).standard_normal((3, 4)), requires_grad=True)
    return [
        lambda a: a.norm(dim=1) * a.var(dim=1),
        lambda a: a.logsumexp(-1) + a.cumprod(1).sum(1),
        lambda a: (a.logcumsumexp(0).prod(dim=1), a.amax(dim=0) * a.cumsum(0)[0]),
    ], x


@pytest.mark.parametrize("k", range(3))
def test_gradgradcheck_on_compositions(k):
    fns, x = _ggc_cases()
    assert ta.autograd.gradgradcheck(fns[k], (x,))


# ---- user scenarios ------------------------------------------------------------------------------


def _copy_params(model, model_t):
    for p, pt in zip(model.parameters(), model_t.parameters(), strict=True):
        with ta.no_grad():
            p.copy_(ta.tensor(pt.detach().numpy()))


def _models(make):
    torch.manual_seed(0)
    model, model_t = make(ta), make(torch).double()
    model.to(ta.float64)
    _copy_params(model, model_t)
    return model, model_t


def _critic(m):
    return m.nn.Sequential(m.nn.Linear(6, 8), m.nn.Tanh(), m.nn.Linear(8, 1))


def _wgan_gp(m, critic, real, fake, eps):
    n = real.shape[0]
    mixed = (eps * real + (1 - eps) * fake).detach().requires_grad_(True)
    (g,) = m.autograd.grad(critic(mixed.reshape(n, -1)).sum(), mixed, create_graph=True)
    return ((g.reshape(n, -1).norm(2, dim=1) - 1) ** 2).mean()


def test_wgan_gp_penalty_weight_gradients_against_torch():
    critic, critic_t = _models(_critic)
    real, fake = RNG.standard_normal((5, 2, 3)), RNG.standard_normal((5, 2, 3))
    eps = RNG.uniform(size=(5, 1, 1))
    gp = _wgan_gp(ta, critic, ta.tensor(real), ta.tensor(fake), ta.tensor(eps))
    gpt = _wgan_gp(torch, critic_t, torch.tensor(real), torch.tensor(fake), torch.tensor(eps))
    close(gp, gpt)
    gp.backward()
    gpt.backward()
    for p, pt in zip(critic.parameters(), critic_t.parameters(), strict=True):
        if pt.grad is None:  # (the last bias: not in the penalty)
            assert p.grad is None or not np.any(p.grad.numpy())
        else:
            close(p.grad, pt.grad, 1e-8)


def _objective(m, x):
    return x.logsumexp(0) + 0.5 * x.var() + (x.cumsum(0) * x).logsumexp(0) * x.norm()


def test_hessian_of_logsumexp_and_variance_against_torch():
    values = RNG.standard_normal(5)
    h = ta.autograd.functional.hessian(lambda x: _objective(ta, x), ta.tensor(values))
    ht = torch.autograd.functional.hessian(lambda x: _objective(torch, x),
                                           torch.tensor(values))
    close(h, ht, 1e-8)


def _bn_model(m):
    return m.nn.Sequential(m.nn.Linear(3, 5), m.nn.BatchNorm1d(5), m.nn.Tanh(),
                           m.nn.Linear(5, 1))


def _input_penalty(m, model, x):
    x = x.detach().requires_grad_(True)
    out = model(x)
    (g,) = m.autograd.grad(out.sum(), x, create_graph=True)
    return (g ** 2).sum() + out.mean()


def test_batchnorm_input_gradient_penalty_against_torch():
    model, model_t = _models(_bn_model)
    x = RNG.standard_normal((8, 3))
    loss = _input_penalty(ta, model, ta.tensor(x))
    loss_t = _input_penalty(torch, model_t, torch.tensor(x))
    close(loss, loss_t)
    loss.backward()
    loss_t.backward()
    for p, pt in zip(model.parameters(), model_t.parameters(), strict=True):
        close(p.grad, pt.grad, 1e-8)
