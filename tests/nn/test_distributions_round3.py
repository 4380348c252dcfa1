"""tinyattn.distributions' LogNormal, HalfNormal, Cauchy, StudentT, Dirichlet, Chi2, Weibull
and Gumbel against torch.distributions in float64: log_prob, entropy, the moments, cdf and icdf,
the gradients of log_prob, entropy, cdf and rsample, seeded sample statistics, shapes, expand,
KL values, and the errors torch raises for bad parameters and values."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.distributions import (
    Cauchy,
    Chi2,
    Dirichlet,
    Exponential,
    Gamma,
    Gumbel,
    HalfNormal,
    LogNormal,
    Normal,
    StudentT,
    Uniform,
    Weibull,
    kl_divergence,
)

torch = pytest.importorskip("torch")
td = torch.distributions

F64 = {"dtype": ta.float64}
RNG = np.random.default_rng(0)
POS = RNG.uniform(0.5, 2.0, size=(2, 3))
REAL = RNG.normal(size=(3,))
CONC = RNG.uniform(0.3, 3.0, size=(2, 3))
SIMPLEX = RNG.dirichlet([1.0, 2.0, 3.0], size=(4, 2))
DF = np.array([0.7, 2.5, 6.0])

# name: (our class, torch's class, parameter arrays, values scored (4, 2, 3) or (4, 2, K))
CASES = {
    "LogNormal": (LogNormal, td.LogNormal, [REAL, POS], RNG.uniform(0.1, 4, size=(4, 2, 3))),
    "HalfNormal": (HalfNormal, td.HalfNormal, [POS], RNG.uniform(0, 3, size=(4, 2, 3))),
    "Cauchy": (Cauchy, td.Cauchy, [REAL, POS], RNG.normal(0, 3, size=(4, 2, 3))),
    "StudentT": (StudentT, td.StudentT, [DF, REAL, POS], RNG.normal(0, 3, size=(4, 2, 3))),
    "Chi2": (Chi2, td.Chi2, [POS * 2], RNG.uniform(0.1, 6, size=(4, 2, 3))),
    "Weibull": (Weibull, td.Weibull, [POS, CONC], RNG.uniform(0.1, 4, size=(4, 2, 3))),
    "Gumbel": (Gumbel, td.Gumbel, [REAL, POS], RNG.normal(0, 3, size=(4, 2, 3))),
    "Dirichlet": (Dirichlet, td.Dirichlet, [CONC], SIMPLEX),
}


def pair(values, grad=True):
    values = np.asarray(values, dtype=np.float64)
    return (ta.tensor(values, requires_grad=grad, **F64),
            torch.tensor(values, requires_grad=grad))


def close(got, want, rtol=1e-10, atol=1e-12):
    got = got.detach().numpy() if isinstance(got, ta.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def made(name):
    """(ours, theirs, [our leaves], [torch's leaves], value array)."""
    ours, theirs, params, value = CASES[name]
    pairs = [pair(p) for p in params]
    return (ours(*(p for p, _ in pairs)), theirs(*(t for _, t in pairs)),
            [p for p, _ in pairs], [t for _, t in pairs], value)


@pytest.mark.parametrize("name", list(CASES))
def test_log_prob_entropy_and_moments_match_torch_with_gradients(name):
    ours, theirs, params, tparams, value = made(name)
    assert ours.batch_shape == tuple(theirs.batch_shape)
    assert ours.event_shape == tuple(theirs.event_shape)
    assert ours.has_rsample == theirs.has_rsample
    got, want = ours.log_prob(ta.tensor(value, **F64)), theirs.log_prob(torch.tensor(value))
    close(got, want, rtol=1e-9)
    close(ours.entropy(), theirs.entropy(), rtol=1e-9)
    for attr in ("mean", "mode", "variance", "stddev"):
        close(getattr(ours, attr), getattr(theirs, attr), rtol=1e-9, atol=1e-11)
    (got.sum() + 0.5 * ours.entropy().sum()).backward()
    (want.sum() + 0.5 * theirs.entropy().sum()).backward()
    for p, tp in zip(params, tparams, strict=True):
        close(p.grad, tp.grad, rtol=1e-8, atol=1e-10)
    assert repr(ours).startswith(name + "(")
    assert set(ours.arg_constraints) == set(theirs.arg_constraints)


@pytest.mark.parametrize("name", ["LogNormal", "HalfNormal", "Cauchy", "Weibull", "Gumbel"])
def test_cdf_and_icdf_match_torch_with_gradients(name):
    ours, theirs, params, tparams, value = made(name)
    if name == "Gumbel":  # (torch's refuses a cdf that rounds to 0 or 1: its Uniform's check)
        theirs = td.Gumbel(*tparams, validate_args=False)
    got, want = ours.cdf(ta.tensor(value, **F64)), theirs.cdf(torch.tensor(value))
    close(got, want, rtol=1e-9, atol=1e-12)
    got.sum().backward()
    want.sum().backward()
    for p, tp in zip(params, tparams, strict=True):
        close(p.grad, tp.grad, rtol=1e-8, atol=1e-10)
    q = np.array([0.1, 0.5, 0.9])[:, None, None]
    close(ours.icdf(ta.tensor(q, **F64)), theirs.icdf(torch.tensor(q)), rtol=1e-9, atol=1e-12)
    close(ours.cdf(ours.icdf(ta.tensor(q, **F64))), np.broadcast_to(q, (3, 2, 3)), rtol=1e-9)


def _reparam(name, r, tparams):
    """torch's formula of the draw r (noise recovered from r), made on torch's leaves."""
    if name == "LogNormal":
        loc, scale = (t.detach().numpy() for t in tparams)
        eps = torch.tensor((np.log(r) - loc) / scale)
        return (tparams[0] + tparams[1] * eps).exp()
    if name == "HalfNormal":
        return tparams[0] * torch.tensor(r / tparams[0].detach().numpy())
    if name in ("Cauchy", "Gumbel"):
        loc, scale = (t.detach().numpy() for t in tparams)
        return tparams[0] + tparams[1] * torch.tensor((r - loc) / scale)
    if name == "StudentT":
        loc, scale = (t.detach().numpy() for t in tparams[1:])
        return tparams[1] + tparams[2] * torch.tensor((r - loc) / scale)
    scale, k = (t.detach().numpy() for t in tparams)  # Weibull: scale E^(1/k), E ~ Exp(1)
    e = torch.tensor((r / scale) ** k)
    return tparams[0] * e.pow(tparams[1].reciprocal())


@pytest.mark.parametrize("name", ["LogNormal", "HalfNormal", "Cauchy", "StudentT", "Weibull",
                                  "Gumbel"])
def test_rsample_carries_torchs_gradient(name):
    ours, _, params, tparams, _ = made(name)
    if name == "StudentT":  # (df's gradient, an implicit one, is checked in expectation in
        params[0] = params[0].detach()  # tests/nn/test_distributions_implicit.py)
        ours = StudentT(*params)
    r = ours.rsample((5,), generator=ta.Generator().manual_seed(1))
    assert r.shape == (5, 2, 3) and r.requires_grad
    w = np.linspace(-1, 1, 3)
    (r * ta.tensor(w, **F64)).sum().backward()
    (_reparam(name, r.detach().numpy(), tparams) * torch.tensor(w)).sum().backward()
    for p, tp in zip(params, tparams, strict=True):
        if p.requires_grad:
            close(p.grad, tp.grad, rtol=1e-7, atol=1e-9)


def test_sample_statistics_are_near_the_distribution():
    n, gen = 20000, ta.Generator().manual_seed(3)
    for dist in (LogNormal(0.3, 0.5), HalfNormal(2.0), StudentT(6.0, 1.0, 2.0), Chi2(3.0),
                 Weibull(2.0, 1.5), Gumbel(1.0, 2.0), Dirichlet(ta.tensor([1.0, 2.0, 3.0]))):
        x = dist.sample((n,), generator=gen)
        assert x.shape == (n, *dist.event_shape) and not x.requires_grad
        se = np.sqrt(dist.variance.numpy() / n)
        assert (np.abs(x.numpy().mean(0) - dist.mean.numpy()) <= 5 * se).all(), dist
    x = Cauchy(1.0, 2.0).sample((n,), generator=gen).numpy()  # no mean: quartiles instead
    for q, at in ((0.25, -1.0), (0.5, 1.0), (0.75, 3.0)):
        assert abs((x < at).mean() - q) <= 5 * math.sqrt(q * (1 - q) / n)
    d = Dirichlet(ta.tensor([0.5, 0.5]))
    x = d.sample((1000,), generator=gen).numpy()
    np.testing.assert_allclose(x.sum(-1), 1.0, atol=1e-6)
    ta.manual_seed(5)
    a = Gumbel(0.0, 1.0).sample((4,))
    ta.manual_seed(5)
    np.testing.assert_array_equal(a.numpy(), Gumbel(0.0, 1.0).sample((4,)).numpy())


@pytest.mark.parametrize("name", list(CASES))
def test_shapes_and_expand(name):
    ours, theirs, _, _, value = made(name)
    event = tuple(ours.event_shape)
    assert ours.sample().shape == tuple(ours.batch_shape) + event == (2, 3)
    assert ours.sample((4, 1)).shape == (4, 1) + tuple(ours.batch_shape) + event
    big = ours.expand((5,) + tuple(ours.batch_shape))
    assert big.batch_shape == (5,) + tuple(ours.batch_shape) and big.event_shape == event
    assert big.sample((2,)).shape == (2, 5) + tuple(ours.batch_shape) + event
    v = ta.tensor(value[0], **F64)
    close(big.log_prob(v), np.broadcast_to(ours.log_prob(v).detach().numpy(), big.batch_shape))
    close(big.entropy(), theirs.expand((5,) + tuple(theirs.batch_shape)).entropy(), rtol=1e-9)
    assert ours.support.check(ours.sample()).numpy().all()


def test_scalar_parameters_take_the_default_dtype():
    for dist in (LogNormal(0.0, 1.0), HalfNormal(1.0), Cauchy(0.0, 1.0), StudentT(3.0),
                 Chi2(2.0), Weibull(1.0, 2.0), Gumbel(0.0, 1.0)):
        assert dist.batch_shape == () and dist.sample().dtype == ta.float32
    close(StudentT(3.0).log_prob(0.5), td.StudentT(3.0).log_prob(torch.tensor(0.5)), rtol=1e-6)
    assert float(Chi2(4.0).df) == 4.0 and isinstance(Chi2(4.0), Gamma)
    d = Dirichlet([1, 2])  # (a list taken, as floats; torch wants a tensor)
    assert d.concentration.dtype == ta.float32 and d.batch_shape == () and d.event_shape == (2,)
    assert Gamma(2.0, 1.0).sample().shape == ()


def _both(make, *params):
    return make(ta, *params), make(torch, *params)


KL_PAIRS = {
    "LogNormal": lambda m, a, b: _dist(m, "LogNormal", a, b),
    "HalfNormal": lambda m, a, b: _dist(m, "HalfNormal", b),
    "Cauchy": lambda m, a, b: _dist(m, "Cauchy", a, b),
    "Gumbel": lambda m, a, b: _dist(m, "Gumbel", a, b),
    "Normal": lambda m, a, b: _dist(m, "Normal", a, b),
    "Exponential": lambda m, a, b: _dist(m, "Exponential", b),
    "Gamma": lambda m, a, b: _dist(m, "Gamma", b, b * 0.7),
    "Chi2": lambda m, a, b: _dist(m, "Chi2", b * 3),
    "Uniform": lambda m, a, b: _dist(m, "Uniform", a, a + b),
    "Dirichlet": lambda m, a, b: _dist(m, "Dirichlet", b),
    "Beta": lambda m, a, b: _dist(m, "Beta", b, b + 0.5),
}


def _dist(module, name, *params):
    space = ta.distributions if module is ta else td
    made_params = [module.tensor(np.asarray(p, dtype=np.float64)) for p in params]
    return getattr(space, name)(*made_params)


@pytest.mark.parametrize("p_name,q_name", [
    ("LogNormal", "LogNormal"), ("HalfNormal", "HalfNormal"), ("Cauchy", "Cauchy"),
    ("Gumbel", "Gumbel"), ("Dirichlet", "Dirichlet"), ("Exponential", "Gumbel"),
    ("Gamma", "Gumbel"), ("Chi2", "Gumbel"), ("Gumbel", "Normal"), ("Normal", "Gumbel"),
    ("Uniform", "Gumbel"), ("Gumbel", "Uniform"), ("Gumbel", "Exponential"),
    ("Gumbel", "Gamma"), ("Gumbel", "Beta"), ("Chi2", "Chi2"), ("Chi2", "Exponential"),
    ("Exponential", "Chi2")])
def test_kl_matches_torch(p_name, q_name):
    a1, b1 = RNG.normal(size=3), RNG.uniform(0.5, 2, size=3)
    a2, b2 = RNG.normal(size=(2, 1)), RNG.uniform(0.5, 2, size=(2, 1))
    if "Dirichlet" in p_name:
        b1, b2 = b1.reshape(1, 3), RNG.uniform(0.5, 2, size=(2, 3))
    p, tp = _both(KL_PAIRS[p_name], a1, b1)
    q, tq = _both(KL_PAIRS[q_name], a2, b2)
    close(kl_divergence(p, q), td.kl_divergence(tp, tq), rtol=1e-9, atol=1e-12)


def test_kl_gradients_and_the_transformed_pairs():
    (c1, t1), (c2, t2) = pair(CONC), pair(CONC[::-1] + 0.5)
    got = kl_divergence(Dirichlet(c1), Dirichlet(c2))
    want = td.kl_divergence(td.Dirichlet(t1), td.Dirichlet(t2))
    got.sum().backward()
    want.sum().backward()
    close(c1.grad, t1.grad, rtol=1e-8)
    close(c2.grad, t2.grad, rtol=1e-8)
    w = Weibull(ta.tensor([1.0, 2.0], **F64), ta.tensor([2.0, 3.0], **F64))
    close(kl_divergence(w, w.expand((2,))), np.zeros(2))
    with pytest.raises(NotImplementedError):
        kl_divergence(w, Weibull(ta.tensor([1.0, 2.0], **F64), ta.tensor([2.5, 3.0], **F64)))
    with pytest.raises(NotImplementedError):
        kl_divergence(LogNormal(0.0, 1.0), HalfNormal(1.0))
    with pytest.raises(NotImplementedError):
        kl_divergence(StudentT(3.0), StudentT(4.0))


@pytest.mark.parametrize("make", [
    lambda: LogNormal(0.0, -1.0), lambda: HalfNormal(ta.tensor([-1.0])),
    lambda: Cauchy(0.0, 0.0), lambda: StudentT(0.0), lambda: StudentT(1.0, math.nan),
    lambda: Dirichlet(ta.tensor(1.0)), lambda: Dirichlet(ta.tensor([1.0, -1.0])),
    lambda: Chi2(ta.tensor([-1.0])), lambda: Weibull(1.0, 0.0), lambda: Weibull(-1.0, 1.0),
    lambda: Gumbel(0.0, -1.0),
    lambda: HalfNormal(ta.tensor([1.0])).log_prob(ta.tensor(-1.0)),
    lambda: LogNormal(0.0, 1.0).log_prob(ta.tensor(0.0)),
    lambda: Weibull(1.0, 2.0).cdf(ta.tensor(-1.0)),
    lambda: Dirichlet(ta.tensor([0.5, 0.5])).log_prob(ta.tensor([0.3, 0.3])),
    lambda: Dirichlet(ta.tensor([0.5, 0.5])).log_prob(ta.tensor([0.3, 0.3, 0.4])),
    lambda: Cauchy(0.0, 1.0).log_prob(ta.tensor(math.nan)),
])
def test_bad_parameters_and_values_are_value_errors_as_torchs(make):
    with pytest.raises(ValueError):
        make()


def test_without_validation_outside_values_score_as_torchs():
    got = HalfNormal(ta.tensor([1.0], **F64), validate_args=False).log_prob(
        ta.tensor([-1.0, 1.0], **F64))
    want = td.HalfNormal(torch.tensor([1.0], dtype=torch.float64), validate_args=False).log_prob(
        torch.tensor([-1.0, 1.0], dtype=torch.float64))
    close(got, want)
    close(StudentT(ta.tensor(DF, **F64)).mean, td.StudentT(torch.tensor(DF)).mean)
    assert Normal(0.0, 1.0).support is not None and Exponential(1.0).has_rsample
    assert Uniform(0.0, 1.0).batch_shape == ()
