"""tinyattn.distributions' Bernoulli, Uniform, Exponential, Laplace and Independent against
torch.distributions in float64: log_prob, entropy, mean, variance, cdf and icdf, the gradients
of log_prob, entropy and rsample, sample statistics and shapes, expand, enumerate_support, KL
values, and the errors torch raises for bad parameters and values."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.distributions import (
    Bernoulli,
    Beta,
    Categorical,
    Exponential,
    Gamma,
    Independent,
    Laplace,
    Normal,
    Uniform,
    kl_divergence,
)

torch = pytest.importorskip("torch")
td = torch.distributions

F64 = {"dtype": ta.float64}


def pair(values, grad=True):
    """The same float64 values as a tinyattn and a torch tensor (leaves with a gradient)."""
    values = np.asarray(values, dtype=np.float64)
    return (ta.tensor(values, requires_grad=grad, **F64),
            torch.tensor(values, requires_grad=grad))


def close(got, want, rtol=1e-10, atol=1e-12):
    got = got.detach().numpy() if isinstance(got, ta.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# (name, tinyattn parameters -> (ours, theirs) builder, values to score)
def bernoulli_probs():
    p, tp = pair([0.0, 0.2, 0.5, 0.9, 1.0])
    return Bernoulli(probs=p), td.Bernoulli(probs=tp), [p], [tp]


def bernoulli_logits():
    x, tx = pair([-100.0, -3.0, 0.0, 0.7, 100.0])
    return Bernoulli(logits=x), td.Bernoulli(logits=tx), [x], [tx]


def uniform():
    (lo, tlo), (hi, thi) = pair([-1.0, 0.0, 2.0, 0.5, -3.0]), pair([1.0, 0.5, 5.0, 0.75, 3.0])
    return Uniform(lo, hi), td.Uniform(tlo, thi), [lo, hi], [tlo, thi]


def exponential():
    r, tr = pair([0.5, 1.0, 2.0, 3.0, 10.0])
    return Exponential(r), td.Exponential(tr), [r], [tr]


def laplace():
    (m, tm), (s, ts) = pair([0.0, 1.0, -2.0, 0.5, 0.3]), pair([1.0, 0.5, 3.0, 2.0, 0.1])
    return Laplace(m, s), td.Laplace(tm, ts), [m, s], [tm, ts]


def gamma():
    (a, ta_), (r, tr) = pair([0.5, 1.0, 2.0, 3.5, 10.0]), pair([1.0, 0.5, 3.0, 2.0, 4.0])
    return Gamma(a, r), td.Gamma(ta_, tr), [a, r], [ta_, tr]


def beta():
    (a, ta_), (b, tb) = pair([0.5, 1.0, 2.0, 3.5, 0.7]), pair([1.0, 0.5, 3.0, 2.0, 0.8])
    return Beta(a, b), td.Beta(ta_, tb), [a, b], [ta_, tb]


BUILDERS = {"bernoulli-probs": bernoulli_probs, "bernoulli-logits": bernoulli_logits,
            "uniform": uniform, "exponential": exponential, "laplace": laplace,
            "gamma": gamma, "beta": beta}
VALUES = {"bernoulli-probs": [[0, 1, 1, 0, 1], [1, 0, 0, 1, 1]],
          "bernoulli-logits": [[0, 1, 1, 0, 1], [1, 0, 0, 1, 0]],
          "uniform": [[0.0, 0.25, 4.0, 0.6, 2.9], [-1.0, 0.1, 2.0, 0.7, 0.0]],
          "exponential": [[0.0, 1.0, 0.3, 2.0, 0.05], [5.0, 0.1, 0.0, 0.4, 1.0]],
          "laplace": [[0.0, 1.0, -5.0, 2.0, 0.3], [-1.0, 3.0, 0.0, 0.5, 0.2]],
          "gamma": [[0.1, 1.0, 0.3, 2.0, 5.0], [5.0, 0.1, 0.7, 0.4, 1.0]],
          "beta": [[0.1, 0.5, 0.3, 0.9, 0.5], [0.99, 0.01, 0.7, 0.4, 0.2]]}


@pytest.mark.parametrize("name", BUILDERS)
def test_log_prob_entropy_and_moments_match_torch_with_gradients(name):
    ours, theirs, params, tparams = BUILDERS[name]()
    value = VALUES[name]
    assert ours.batch_shape == tuple(theirs.batch_shape) == (5,)
    assert ours.event_shape == tuple(theirs.event_shape) == ()
    got, want = ours.log_prob(ta.tensor(value, **F64)), theirs.log_prob(torch.tensor(value,
                                                                            dtype=torch.float64))
    close(got, want)
    close(ours.entropy(), theirs.entropy())
    for attr in ("mean", "variance", "stddev", "mode"):
        close(getattr(ours, attr), getattr(theirs, attr))
    loss = got.sum() + 0.5 * ours.entropy().sum()
    tloss = want.sum() + 0.5 * theirs.entropy().sum()
    loss.backward()
    tloss.backward()
    digamma_grad = name in ("gamma", "beta")  # (trigamma, through digamma: to ~1e-9 relative)
    for p, tp in zip(params, tparams, strict=True):
        close(p.grad, tp.grad, rtol=1e-7 if digamma_grad else 1e-9)


@pytest.mark.parametrize("name", ["uniform", "exponential", "laplace"])
def test_cdf_and_icdf_match_torch_with_gradients(name):
    ours, theirs, params, tparams = BUILDERS[name]()
    value = VALUES[name]
    got = ours.cdf(ta.tensor(value, **F64))
    want = theirs.cdf(torch.tensor(value, dtype=torch.float64))
    close(got, want)
    q = [[0.01, 0.3, 0.5, 0.7, 0.99]]
    got_q, want_q = ours.icdf(ta.tensor(q, **F64)), theirs.icdf(torch.tensor(q,
                                                                           dtype=torch.float64))
    close(got_q, want_q)
    (got.sum() + got_q.sum()).backward()
    (want.sum() + want_q.sum()).backward()
    for p, tp in zip(params, tparams, strict=True):
        close(p.grad, tp.grad, rtol=1e-9)


def test_bernoulli_is_finite_at_logits_of_plus_and_minus_100():
    ours, theirs, (x,), (tx,) = bernoulli_logits()
    for value in ([0.0] * 5, [1.0] * 5):
        got = ours.log_prob(ta.tensor(value, **F64))
        want = theirs.log_prob(torch.tensor(value, dtype=torch.float64))
        assert np.isfinite(got.detach().numpy()).all()
        close(got, want)
        got.sum().backward()
        want.sum().backward()
        assert np.isfinite(x.grad.numpy()).all()
        close(x.grad, tx.grad)
    assert ours.log_prob(ta.tensor([1.0, 1, 1, 1, 0], **F64)).numpy()[[0, 4]].tolist() == [
        -100.0, -100.0]
    close(ours.probs, theirs.probs)


def test_bernoulli_probs_and_logits_convert_as_torch():
    ours, theirs, _, _ = bernoulli_probs()
    close(ours.logits, theirs.logits)  # (probs clamped to [eps, 1 - eps] first, as torch's)
    assert ours.param_shape == (5,)
    mode = Bernoulli(probs=ta.tensor([0.2, 0.5, 0.8])).mode.numpy()
    assert mode[0] == 0 and np.isnan(mode[1]) and mode[2] == 1
    support = Bernoulli(probs=ta.tensor([0.3, 0.6])).enumerate_support()
    want = td.Bernoulli(probs=torch.tensor([0.3, 0.6])).enumerate_support()
    assert support.tolist() == want.tolist() and support.dtype == ta.float32
    assert Bernoulli(0.3).enumerate_support(expand=False).shape == (2,)
    assert Bernoulli(probs=ta.ones(2, 3) / 2).enumerate_support(expand=False).shape == (2, 1, 1)
    assert Bernoulli(0.3).batch_shape == () and Bernoulli.has_enumerate_support


@pytest.mark.parametrize("name", ["uniform", "exponential", "laplace"])
def test_rsample_carries_the_gradient_as_torchs_formula(name):
    ours, _, params, _ = BUILDERS[name]()
    r = ours.rsample((3,), generator=ta.Generator().manual_seed(0))
    assert r.shape == (3, 5) and r.requires_grad and ours.has_rsample
    r.sum().backward()
    draws = r.detach().numpy()
    if name == "uniform":  # low + u (high - low)
        lo, hi = (p.detach().numpy() for p in params)
        u = (draws - lo) / (hi - lo)
        close(params[0].grad, (1 - u).sum(0), rtol=1e-9)
        close(params[1].grad, u.sum(0), rtol=1e-9)
    elif name == "exponential":  # E / rate
        rate = params[0].detach().numpy()
        close(params[0].grad, (-draws / rate).sum(0), rtol=1e-9)
    else:  # loc - scale sign(u) log1p(-|u|)
        loc, scale = (p.detach().numpy() for p in params)
        close(params[0].grad, np.full(5, 3.0))
        close(params[1].grad, ((draws - loc) / scale).sum(0), rtol=1e-9)


@pytest.mark.parametrize("name", BUILDERS)
def test_sample_means_and_variances_are_near_the_distributions(name):
    ours = BUILDERS[name]()[0]
    n = 20000
    draws = ours.sample((n,), generator=ta.Generator().manual_seed(3))
    assert draws.shape == (n, 5) and not draws.requires_grad and draws.dtype == ta.float64
    mean, var = ours.mean.detach().numpy(), ours.variance.detach().numpy()
    se = np.sqrt(var / n)
    assert (np.abs(draws.numpy().mean(0) - mean) <= 5 * se + 1e-12).all()
    np.testing.assert_allclose(draws.numpy().var(0), var, rtol=0.1, atol=1e-12)
    support = ours.support.check(draws).numpy()
    assert support.all()
    a = ours.sample((4,), generator=ta.Generator().manual_seed(1))
    b = ours.sample((4,), generator=ta.Generator().manual_seed(1))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    ta.manual_seed(5)
    c = ours.sample((4,))
    ta.manual_seed(5)
    np.testing.assert_array_equal(c.numpy(), ours.sample((4,)).numpy())


@pytest.mark.parametrize("name", BUILDERS)
def test_shapes_of_samples_and_expand(name):
    ours = BUILDERS[name]()[0]
    assert ours.sample().shape == (5,) and ours.sample(2).shape == (2, 5)
    assert ours.sample((2, 3)).shape == (2, 3, 5)
    big = ours.expand((4, 5))
    assert big.batch_shape == (4, 5) and big.sample((2,)).shape == (2, 4, 5)
    value = ta.tensor(VALUES[name][0], **F64)
    close(big.log_prob(value), np.broadcast_to(ours.log_prob(value).detach().numpy(), (4, 5)))
    with pytest.raises(ValueError, match="sample_shape"):
        ours.sample((-1,))


def test_numbers_make_a_scalar_distribution_of_the_default_dtype():
    for ours, theirs in [(Uniform(0.0, 2.0), td.Uniform(0.0, 2.0)),
                         (Exponential(2.0), td.Exponential(2.0)),
                         (Laplace(1.0, 2.0), td.Laplace(1.0, 2.0)),
                         (Bernoulli(0.25), td.Bernoulli(0.25))]:
        assert ours.batch_shape == () and ours.sample().shape == () == tuple(theirs.sample().shape)
        assert ours.mean.dtype == ta.float32
        close(ours.entropy(), theirs.entropy(), rtol=1e-6)
    assert Laplace(ta.zeros(2, 1, **F64), 1.0).batch_shape == (2, 1)
    assert Uniform(ta.zeros(2, 1), ta.ones(3)).batch_shape == (2, 3)


def test_uniform_log_prob_is_minus_inf_outside_and_validation_refuses_as_torch():
    ours, theirs = Uniform(ta.tensor([0.0, 1.0]), ta.tensor([1.0, 3.0])), td.Uniform(
        torch.tensor([0.0, 1.0]), torch.tensor([1.0, 3.0]))
    close(ours.log_prob(ta.tensor([1.0, 1.0])), theirs.log_prob(torch.tensor([1.0, 1.0])))
    assert ours.log_prob(ta.tensor([1.0, 1.0])).numpy()[0] == -math.inf  # high: excluded
    for bad in ([1.5, 1.0], [0.5, 0.5], [float("nan"), 2.0]):
        with pytest.raises(ValueError):
            theirs.log_prob(torch.tensor(bad))
        with pytest.raises(ValueError, match="Uniform.log_prob: value must be within"):
            ours.log_prob(ta.tensor(bad))
        with pytest.raises(ValueError, match="Uniform.cdf"):
            ours.cdf(ta.tensor(bad))
    loose = Uniform(ta.tensor([0.0, 1.0]), ta.tensor([1.0, 3.0]), validate_args=False)
    close(loose.log_prob(ta.tensor([1.5, -2.0])),
          td.Uniform(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 3.0]),
                     validate_args=False).log_prob(torch.tensor([1.5, -2.0])))
    close(loose.cdf(ta.tensor([1.5, -2.0])), np.array([1.0, 0.0], dtype=np.float32))


NAN, INF = float("nan"), float("inf")
BAD = [  # (name, parameters, what our message names); torch raises a ValueError for each
    ("Bernoulli", {"probs": 1.5}, "probs"), ("Bernoulli", {"probs": -0.1}, "probs"),
    ("Bernoulli", {"probs": [0.5, NAN]}, "probs"), ("Bernoulli", {"logits": NAN}, "logits"),
    ("Bernoulli", {"probs": 0.5, "logits": 0.0}, "not both"), ("Bernoulli", {}, "not both"),
    ("Uniform", {"low": 0.0, "high": 0.0}, "low"), ("Uniform", {"low": 1.0, "high": 0.0}, "low"),
    ("Uniform", {"low": [0.0, NAN], "high": 1.0}, "low"),
    ("Exponential", {"rate": 0.0}, "rate"), ("Exponential", {"rate": [1.0, -1.0]}, "rate"),
    ("Exponential", {"rate": NAN}, "rate"),
    ("Laplace", {"loc": 0.0, "scale": -1.0}, "scale"),
    ("Laplace", {"loc": NAN, "scale": 1.0}, "loc"),
    ("Gamma", {"concentration": 0.0, "rate": 1.0}, "concentration"),
    ("Gamma", {"concentration": 1.0, "rate": [1.0, -2.0]}, "rate"),
    ("Beta", {"concentration1": -1.0, "concentration0": 1.0}, "concentration1"),
    ("Beta", {"concentration1": 1.0, "concentration0": 0.0}, "concentration0"),
]


@pytest.mark.parametrize("name,params,match", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_parameters_are_refused_as_torch_does(name, params, match):
    def made(lib, v):
        return v if isinstance(v, float) else lib.tensor(v)
    with pytest.raises(ValueError):
        getattr(td, name)(**{k: made(torch, v) for k, v in params.items()})
    with pytest.raises(ValueError, match=match):
        getattr(ta.distributions, name)(**{k: made(ta, v) for k, v in params.items()})
    if "not both" not in match:
        with np.errstate(all="ignore"):
            getattr(ta.distributions, name)(**{k: made(ta, v) for k, v in params.items()},
                                            validate_args=False)


def test_infinite_parameters_torch_takes_are_taken():
    assert Exponential(INF).rate.item() == INF and Laplace(INF, 1.0).loc.item() == INF
    assert Uniform(0.0, INF).high.item() == INF
    assert Bernoulli(logits=INF).probs.item() == 1.0


@pytest.mark.parametrize("dist,tdist,value", [
    (lambda: Bernoulli(0.3), lambda: td.Bernoulli(0.3), [0.5]),
    (lambda: Bernoulli(0.3), lambda: td.Bernoulli(0.3), [2.0]),
    (lambda: Exponential(1.0), lambda: td.Exponential(1.0), [-1.0]),
    (lambda: Laplace(0.0, 1.0), lambda: td.Laplace(0.0, 1.0), [NAN]),
    (lambda: Bernoulli(probs=ta.tensor([0.3, 0.5])), lambda: td.Bernoulli(
        probs=torch.tensor([0.3, 0.5])), [1.0, 1.0, 1.0]),
])
def test_values_outside_the_support_or_shape_are_refused_as_torch_does(dist, tdist, value):
    with pytest.raises(ValueError):
        tdist().log_prob(torch.tensor(value))
    with pytest.raises(ValueError, match="log_prob: value"):
        dist().log_prob(ta.tensor(value))


def test_independent_sums_over_the_reinterpreted_dims():
    (m, tm), (s, ts) = pair(np.linspace(-1, 1, 6).reshape(2, 3)), pair(np.full((2, 3), 0.5))
    ours, theirs = Independent(Normal(m, s), 1), td.Independent(td.Normal(tm, ts), 1)
    assert ours.batch_shape == tuple(theirs.batch_shape) == (2,)
    assert ours.event_shape == tuple(theirs.event_shape) == (3,)
    assert ours.has_rsample and not ours.has_enumerate_support
    value = np.linspace(0, 1, 6).reshape(2, 3)
    got = ours.log_prob(ta.tensor(value, **F64))
    want = theirs.log_prob(torch.tensor(value))
    close(got, want)
    close(ours.entropy(), theirs.entropy())
    close(ours.mean, theirs.mean)
    close(ours.variance, theirs.variance)
    close(ours.stddev, theirs.stddev)
    (got.sum() + ours.entropy().sum()).backward()
    (want.sum() + theirs.entropy().sum()).backward()
    close(m.grad, tm.grad)
    close(s.grad, ts.grad)
    assert ours.sample((4,)).shape == (4, 2, 3) and ours.rsample().requires_grad
    assert ours.expand((5, 2)).batch_shape == (5, 2)
    assert ours.expand((5, 2)).log_prob(ta.tensor(value, **F64)).shape == (5, 2)
    assert Independent(Normal(m, s), 2).log_prob(ta.tensor(value, **F64)).shape == ()
    assert repr(ours) == "Independent(Normal(loc: (2, 3), scale: (2, 3)), 1)"
    assert repr(ours.support) == "IndependentConstraint(Real(), 1)"
    b = Independent(Bernoulli(probs=ta.full((2, 3), 0.5)), 0)
    assert b.has_enumerate_support and b.enumerate_support().shape == (2, 2, 3)
    with pytest.raises(NotImplementedError, match="cartesian product"):
        Independent(Bernoulli(probs=ta.full((2, 3), 0.5)), 1).enumerate_support()
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        Independent(Normal(m, s), 3)
    with pytest.raises(ValueError):
        td.Independent(td.Normal(tm, ts), 3)


def t_(x):
    return torch.tensor(np.asarray(x, dtype=np.float64))


def a_(x):
    return ta.tensor(np.asarray(x, dtype=np.float64))


GAMMA_P = {"concentration": [0.5, 3.0], "rate": [1.5, 0.4]}
BETA_P = {"concentration1": [0.5, 3.0], "concentration0": [1.5, 0.4]}
KL_PAIRS = [  # (p, q) as (class name, parameters) pairs, in torch's and our names
    (("Bernoulli", {"probs": [0.0, 0.3, 0.5, 1.0, 0.7]}),
     ("Bernoulli", {"probs": [0.2, 0.0, 0.5, 0.4, 1.0]})),
    (("Bernoulli", {"logits": [-100.0, 2.0, 0.0]}), ("Bernoulli", {"logits": [100.0, -1.0, 3]})),
    (("Uniform", {"low": [0.0, 0.0, -1.0], "high": [1.0, 2.0, 1.0]}),
     ("Uniform", {"low": [-1.0, 0.5, -1.0], "high": [2.0, 2.0, 1.0]})),
    (("Exponential", {"rate": [0.5, 2.0]}), ("Exponential", {"rate": [1.0, 3.0]})),
    (("Laplace", {"loc": [0.0, 1.0], "scale": [1.0, 0.5]}),
     ("Laplace", {"loc": [0.5, -1.0], "scale": [2.0, 0.3]})),
    (("Exponential", {"rate": [0.5, 2.0]}), ("Normal", {"loc": [0.0, 1.0], "scale": [1.0, 2]})),
    (("Laplace", {"loc": [0.0, 1.0], "scale": [1.0, 0.5]}),
     ("Normal", {"loc": [0.5, -1.0], "scale": [2.0, 0.3]})),
    (("Uniform", {"low": [0.0, -2.0], "high": [1.0, 2.0]}),
     ("Normal", {"loc": [0.5, -1.0], "scale": [2.0, 0.3]})),
    (("Uniform", {"low": [0.0, -2.0], "high": [1.0, 2.0]}), ("Exponential", {"rate": [1.0, 2]})),
    (("Normal", {"loc": [0.5, -1.0], "scale": [2.0, 0.3]}),
     ("Laplace", {"loc": [0.0, 1.0], "scale": [1.0, 0.5]})),
    (("Normal", {"loc": [0.5, -1.0], "scale": [2.0, 0.3]}), ("Exponential", {"rate": [1.0, 2]})),
    (("Normal", {"loc": [0.5, -1.0], "scale": [2.0, 0.3]}),
     ("Uniform", {"low": [0.0, -2.0], "high": [1.0, 2.0]})),
    (("Laplace", {"loc": [0.0, 1.0], "scale": [1.0, 0.5]}), ("Exponential", {"rate": [1.0, 2]})),
    (("Laplace", {"loc": [0.0, 1.0], "scale": [1.0, 0.5]}),
     ("Uniform", {"low": [0.0, -2.0], "high": [1.0, 2.0]})),
    (("Exponential", {"rate": [0.5, 2.0]}), ("Uniform", {"low": [0.0, -2.0], "high": [1.0, 2]})),
    (("Gamma", GAMMA_P), ("Gamma", {"concentration": [1.0, 0.7], "rate": [2.0, 0.5]})),
    (("Beta", BETA_P), ("Beta", {"concentration1": [1.0, 0.7], "concentration0": [2.0, 0.5]})),
    (("Exponential", {"rate": [0.5, 2.0]}), ("Gamma", GAMMA_P)),
    (("Gamma", GAMMA_P), ("Exponential", {"rate": [0.5, 2.0]})),
    (("Gamma", GAMMA_P), ("Normal", {"loc": [0.5, -1.0], "scale": [2.0, 0.3]})),
    (("Beta", BETA_P), ("Exponential", {"rate": [0.5, 2.0]})),
    (("Beta", BETA_P), ("Gamma", GAMMA_P)),
    (("Beta", BETA_P), ("Normal", {"loc": [0.5, -1.0], "scale": [2.0, 0.3]})),
    (("Beta", BETA_P), ("Uniform", {"low": [0.0, -2.0], "high": [1.0, 0.5]})),
    (("Gamma", GAMMA_P), ("Beta", BETA_P)), (("Normal", {"loc": [0.5, 1], "scale": [2.0, 0.3]}),
                                             ("Gamma", GAMMA_P)),
]


@pytest.mark.parametrize("p,q", KL_PAIRS, ids=[f"{p[0]}-{q[0]}-{i}"
                                               for i, (p, q) in enumerate(KL_PAIRS)])
def test_kl_divergence_matches_torch_with_gradients(p, q):
    ours_p = {k: ta.tensor(np.asarray(v, np.float64), requires_grad=True) for k, v in p[1].items()}
    ours_q = {k: ta.tensor(np.asarray(v, np.float64), requires_grad=True) for k, v in q[1].items()}
    theirs_p = {k: torch.tensor(np.asarray(v, np.float64), requires_grad=True)
                for k, v in p[1].items()}
    theirs_q = {k: torch.tensor(np.asarray(v, np.float64), requires_grad=True)
                for k, v in q[1].items()}
    got = kl_divergence(getattr(ta.distributions, p[0])(**ours_p),
                        getattr(ta.distributions, q[0])(**ours_q))
    want = td.kl_divergence(getattr(td, p[0])(**theirs_p), getattr(td, q[0])(**theirs_q))
    close(got, want)
    finite = np.isfinite(want.detach().numpy())
    if finite.any() and want.requires_grad:
        got[ta.tensor(finite)].sum().backward()
        want[torch.tensor(finite)].sum().backward()
        for ours, theirs in [*zip(ours_p.values(), theirs_p.values(), strict=True),
                             *zip(ours_q.values(), theirs_q.values(), strict=True)]:
            if theirs.grad is not None:
                close(ours.grad, theirs.grad, rtol=1e-8)


def test_kl_of_independents_sums_and_needs_the_same_reinterpreted_dims():
    p = Independent(Normal(a_([[0.0, 1.0], [2.0, 3.0]]), 1.0), 1)
    q = Independent(Normal(a_([[1.0, 1.0], [0.0, 3.0]]), 2.0), 1)
    want = td.kl_divergence(td.Independent(td.Normal(t_([[0.0, 1.0], [2.0, 3.0]]), 1.0), 1),
                            td.Independent(td.Normal(t_([[1.0, 1.0], [0.0, 3.0]]), 2.0), 1))
    close(kl_divergence(p, q), want)
    with pytest.raises(NotImplementedError):
        kl_divergence(p, Independent(Normal(a_([[1.0, 1.0], [0.0, 3.0]]), 2.0), 2))
    with pytest.raises(NotImplementedError):
        kl_divergence(Bernoulli(0.3), Exponential(1.0))
    assert isinstance(Categorical(logits=ta.zeros(3)).support.check(ta.tensor(1)), ta.Tensor)


def test_gamma_and_beta_rsample_and_refuse_values_outside():
    """Gamma and Beta have an implicitly reparameterised rsample, as torch's (its gradients:
    tests/nn/test_distributions_implicit.py); Beta has no cdf (no incomplete beta op; Gamma's:
    tests/ops/test_special_namespace.py)."""
    for dist in (Gamma(2.0, 1.0), Beta(2.0, 3.0)):
        assert dist.has_rsample and dist.rsample((3,)).shape == (3,)
    with pytest.raises(NotImplementedError):
        Beta(2.0, 3.0).cdf(ta.tensor(0.5))
    for ours, theirs, bad in [(Gamma(2.0, 1.0), td.Gamma(2.0, 1.0), -1.0),
                              (Beta(2.0, 3.0), td.Beta(2.0, 3.0), 1.5)]:
        with pytest.raises(ValueError):
            theirs.log_prob(torch.tensor(bad))
        with pytest.raises(ValueError, match=r"\.log_prob: value must be within"):
            ours.log_prob(ta.tensor(bad))
    close(Beta(2.0, 3.0).log_prob(ta.tensor([0.0, 1.0])),
          td.Beta(2.0, 3.0).log_prob(torch.tensor([0.0, 1.0])))
