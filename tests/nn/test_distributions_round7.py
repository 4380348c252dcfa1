"""tinyattn.distributions' Pareto, HalfCauchy, InverseGamma, Kumaraswamy, FisherSnedecor,
VonMises, ContinuousBernoulli, GeneralizedPareto, NegativeBinomial, Multinomial, the relaxed
Bernoulli and categorical ones, OneHotCategoricalStraightThrough and MixtureSameFamily against
torch.distributions in float64: log_prob, cdf, icdf, entropy and the moments, the gradients of
log_prob, cdf and entropy (and gradcheck), rsample's value and pathwise gradient on the same
base noise (or, for the gamma-based ones, seeded sample statistics), sample shapes and
supports, expand, the KL pairs, and the errors torch raises for bad parameters and values."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import distributions as D

torch = pytest.importorskip("torch")
td = torch.distributions

F64 = {"dtype": ta.float64}


@pytest.fixture(autouse=True)
def _torch_default_float64():
    """torch's GeneralizedPareto.log_prob compares a float64 concentration with a tensor of the
    default dtype (torch.tensor(0.0)), which fails unless that is float64 too."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


def _np(t):
    return np.asarray(t.detach().numpy())


def _close(ours, ref, rtol=1e-10, atol=1e-12):
    assert tuple(ours.shape) == tuple(ref.shape)
    np.testing.assert_allclose(_np(ours), ref.detach().numpy(), rtol=rtol, atol=atol)


# name: (class name, parameters (each a float64 tensor in both libraries; logits etc. by
# keyword), extra keywords (numbers), values scored, methods compared, methods whose gradient
# is compared, tolerance)
CASES = {
    "Pareto": ("Pareto", {"scale": [1.0, 2.0, 0.5], "alpha": [0.7, 2.5, 3.5]}, {},
               [1.5, 2.5, 4.0], ("log_prob", "cdf", "icdf", "entropy", "mean", "variance",
                                 "mode"), ("log_prob", "cdf", "icdf", "entropy"), 1e-10),
    "HalfCauchy": ("HalfCauchy", {"scale": [0.5, 1.0, 2.0]}, {}, [0.1, 1.3, 4.0],
                   ("log_prob", "cdf", "icdf", "entropy", "mean", "variance", "mode"),
                   ("log_prob", "cdf", "icdf", "entropy"), 1e-10),
    "InverseGamma": ("InverseGamma", {"concentration": [0.8, 2.5, 3.5], "rate": [1.0, 0.5, 2.0]},
                     {}, [0.3, 1.0, 2.5], ("log_prob", "cdf", "entropy", "mean", "variance",
                                           "mode"), ("log_prob", "entropy"), 1e-10),
    "Kumaraswamy": ("Kumaraswamy", {"concentration1": [0.7, 2.0, 3.0],
                                    "concentration0": [1.5, 0.8, 4.0]}, {}, [0.2, 0.5, 0.9],
                    ("log_prob", "cdf", "icdf", "entropy", "mean", "variance"),
                    ("log_prob", "cdf", "icdf", "entropy", "mean", "variance"), 1e-10),
    "FisherSnedecor": ("FisherSnedecor", {"df1": [1.5, 3.0, 6.0], "df2": [1.5, 4.5, 8.0]}, {},
                       [0.4, 1.0, 2.5], ("log_prob", "mean", "variance", "mode"),
                       ("log_prob",), 1e-10),
    "VonMises": ("VonMises", {"loc": [0.0, 1.0, -2.0], "concentration": [0.5, 2.0, 10.0]}, {},
                 [0.3, -1.0, 2.5], ("log_prob", "mean", "variance", "mode"), ("log_prob",),
                 1e-6),  # (torch's Bessel functions are polynomial fits)
    "ContinuousBernoulli": ("ContinuousBernoulli", {"probs": [0.2, 0.4995, 0.8, 0.03]}, {},
                            [0.1, 0.5, 0.9, 0.7],
                            ("log_prob", "cdf", "icdf", "entropy", "mean", "variance"),
                            ("log_prob", "cdf", "icdf", "entropy", "mean", "variance"), 1e-10),
    "ContinuousBernoulli-logits": ("ContinuousBernoulli", {"logits": [-1.5, 0.001, 2.0, 30.0]},
                                   {}, [0.1, 0.5, 0.9, 0.7],
                                   ("log_prob", "cdf", "icdf", "entropy", "mean", "variance"),
                                   ("log_prob", "cdf", "entropy", "mean"), 1e-9),
    "GeneralizedPareto": ("GeneralizedPareto", {"loc": [0.0, 1.0, -1.0],
                                                "scale": [1.0, 2.0, 0.5],
                                                "concentration": [0.3, 0.0, -0.2]}, {},
                          [0.5, 2.0, -0.5], ("log_prob", "cdf", "icdf", "entropy", "mean",
                                             "variance", "mode"),
                          ("log_prob", "cdf", "icdf", "entropy", "mean", "variance"), 1e-10),
    "NegativeBinomial": ("NegativeBinomial", {"total_count": [2.0, 5.5, 1.0],
                                              "probs": [0.3, 0.6, 0.1]}, {}, [0.0, 3.0, 7.0],
                         ("log_prob", "mean", "variance", "mode"), ("log_prob", "mean"), 1e-10),
    "NegativeBinomial-logits": ("NegativeBinomial", {"total_count": [2.0, 5.5, 1.0],
                                                     "logits": [-1.0, 0.5, 2.0]}, {},
                                [0.0, 3.0, 7.0], ("log_prob", "mean", "variance", "mode"),
                                ("log_prob", "variance"), 1e-10),
    "LogitRelaxedBernoulli": ("LogitRelaxedBernoulli", {"temperature": [0.7],
                                                        "probs": [0.2, 0.5, 0.9]}, {},
                              [-1.0, 0.6, 3.0], ("log_prob",), ("log_prob",), 1e-10),
    "RelaxedBernoulli": ("RelaxedBernoulli", {"temperature": [0.7], "logits": [-1.0, 0.5, 2.0]},
                         {}, [0.1, 0.6, 0.95], ("log_prob",), ("log_prob",), 1e-10),
}

PROBS = [0.1, 0.5, 0.85, 0.6]  # for icdf


def _torch_class(name):
    """torch's class of that name (the two relaxed bases are not exported at the top)."""
    for module in (td, td.relaxed_bernoulli, td.relaxed_categorical):
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(name)


def _build(case, lib, grad=True):
    cls_name, params, extra, *_ = CASES[case]
    tensors = {}
    for name, values in params.items():
        a = np.asarray(values, dtype=np.float64)
        tensors[name] = (ta.tensor(a, requires_grad=grad, **F64) if lib == "ta"
                         else torch.tensor(a, requires_grad=grad))
    cls = getattr(D, cls_name) if lib == "ta" else _torch_class(cls_name)
    return cls(**tensors, **extra), tensors


def _call(dist, method, case, lib):
    values = CASES[case][3] if method != "icdf" else PROBS[:len(CASES[case][3])]
    if method in ("log_prob", "cdf", "icdf"):
        v = np.asarray(values, dtype=np.float64)
        return getattr(dist, method)(ta.tensor(v, **F64) if lib == "ta" else torch.tensor(v))
    out = getattr(dist, method)
    return out() if callable(out) else out


@pytest.mark.parametrize("case", CASES)
def test_values_match_torch(case):
    ours, _ = _build(case, "ta", grad=False)
    ref, _ = _build(case, "torch", grad=False)
    assert tuple(ours.batch_shape) == tuple(ref.batch_shape)
    assert tuple(ours.event_shape) == tuple(ref.event_shape)
    for method in CASES[case][4]:
        got, want = _call(ours, method, case, "ta"), _call(ref, method, case, "torch")
        assert got.dtype == ta.float64, method
        _close(got, want.expand(want.shape), rtol=CASES[case][6], atol=CASES[case][6])


@pytest.mark.parametrize("case", CASES)
def test_gradients_match_torch(case):
    weights = np.linspace(0.5, 1.5, len(CASES[case][3]))
    for method in CASES[case][5]:
        ours, ta_params = _build(case, "ta")
        ref, torch_params = _build(case, "torch")
        got = (_call(ours, method, case, "ta") * ta.tensor(weights, **F64)).sum()
        want = (_call(ref, method, case, "torch") * torch.tensor(weights)).sum()
        names = list(torch_params)
        want_grads = torch.autograd.grad(want, [torch_params[n] for n in names],
                                         allow_unused=True)
        got_grads = ta.autograd.grad(got, [ta_params[n] for n in names], allow_unused=True)
        for name, g, w in zip(names, got_grads, want_grads, strict=True):
            w = torch.zeros_like(torch_params[name]) if w is None else w
            g = ta.zeros(*w.shape, **F64) if g is None else g
            tol = 1e-5 if case == "VonMises" else 1e-9
            _close(g, w, rtol=tol, atol=tol)


# gradcheck's finite differences need a smooth neighbourhood: away from GeneralizedPareto's
# branch at concentration 0 (within 1e-8: the exponential's formula) and from logits 30, where
# 1 - sigmoid is too ill-conditioned to difference
GRADCHECK_PARAMS = {"GeneralizedPareto": {"concentration": [0.3, 0.1, -0.2]},
                    "ContinuousBernoulli-logits": {"logits": [-1.5, 0.001, 2.0, 3.0]}}


def _gradcheck_inputs(case):
    cls_name, params, extra, values, *_ = CASES[case]
    params = {**params, **GRADCHECK_PARAMS.get(case, {})}
    names = list(params)
    inputs = tuple(ta.tensor(np.asarray(params[n]), requires_grad=True, **F64) for n in names)
    return cls_name, names, inputs, extra, ta.tensor(np.asarray(values), **F64)


@pytest.mark.parametrize("case", CASES)
def test_log_prob_passes_gradcheck(case):
    cls_name, names, inputs, extra, v = _gradcheck_inputs(case)

    def fn(*ps):
        return getattr(D, cls_name)(**dict(zip(names, ps, strict=True)), **extra).log_prob(v)

    assert ta.autograd.gradcheck(fn, inputs)


@pytest.mark.parametrize("case", ["Kumaraswamy", "VonMises", "GeneralizedPareto", "Pareto",
                                  "ContinuousBernoulli"])
def test_log_prob_passes_gradgradcheck(case):
    cls_name, names, inputs, extra, v = _gradcheck_inputs(case)

    def fn(*ps):
        return getattr(D, cls_name)(**dict(zip(names, ps, strict=True)), **extra).log_prob(v)

    assert ta.autograd.gradgradcheck(fn, inputs)


def test_von_mises_log_prob_and_variance_are_the_exact_bessel_ones():
    def bessel(name, values):  # (torch's float64 i0 and i1: exact to rounding)
        return getattr(torch.special, name)(torch.tensor(values)).numpy()

    loc, kappa, x = np.array([0.0, 1.0, -2.0]), np.array([0.5, 2.0, 40.0]), np.array([0.3, -1.0,
                                                                                      2.5])
    k = ta.tensor(kappa, requires_grad=True, **F64)
    d = D.VonMises(ta.tensor(loc, **F64), k)
    lp = d.log_prob(ta.tensor(x, **F64))
    want = kappa * np.cos(x - loc) - np.log(2 * np.pi * bessel("i0", kappa))
    np.testing.assert_allclose(_np(lp), want, rtol=1e-13)
    np.testing.assert_allclose(_np(d.variance), 1 - bessel("i1", kappa)
                               / bessel("i0", kappa), rtol=1e-13)
    grad, = ta.autograd.grad(lp.sum(), [k])
    np.testing.assert_allclose(_np(grad), np.cos(x - loc) - bessel("i1", kappa)
                               / bessel("i0", kappa), rtol=1e-12)


def test_kumaraswamy_mode_is_where_log_prob_peaks():
    a, b = np.array([2.0, 3.0, 0.5, 1.0]), np.array([3.0, 1.5, 2.0, 1.0])
    d = D.Kumaraswamy(ta.tensor(a, **F64), ta.tensor(b, **F64))
    mode = _np(d.mode)
    assert np.isnan(mode[2:]).all()  # a < 1 (log_prob unbounded at 0) and a = b = 1 (flat)
    grid = np.linspace(1e-4, 1 - 1e-4, 20001)[:, None]
    lp = _np(d.log_prob(ta.tensor(np.broadcast_to(grid, (grid.shape[0], 4)).copy(), **F64)))
    np.testing.assert_allclose(mode[:2], grid[lp[:, :2].argmax(0), 0], atol=1e-4)


# rsample on the same base noise as torch's formula: (our draw, torch's function of the noise)
def _uniform(shape, seed):
    return ta.rand(*shape, generator=ta.Generator().manual_seed(seed), **F64)


def _noise_exponential(shape, seed):
    return ta.zeros(*shape, **F64).exponential_(generator=ta.Generator().manual_seed(seed))


def _noise_cauchy(shape, seed):
    return ta.zeros(*shape, **F64).cauchy_(generator=ta.Generator().manual_seed(seed))


def _clamp_probs(t):
    eps = torch.finfo(t.dtype).eps
    return t.clamp(eps, 1 - eps)


RSAMPLE = {  # case: (noise, torch's rsample as a function of (distribution, noise))
    "Pareto": (_noise_exponential, lambda d, e: d.scale * (e / d.alpha).exp()),
    "HalfCauchy": (_noise_cauchy, lambda d, e: (e * d.scale).abs()),
    "Kumaraswamy": (_uniform, lambda d, u: (1 - u ** d.concentration0.reciprocal())
                    ** d.concentration1.reciprocal()),
    "ContinuousBernoulli": (_uniform, lambda d, u: d.icdf(u)),
    "ContinuousBernoulli-logits": (_uniform, lambda d, u: d.icdf(u)),
    "GeneralizedPareto": (_uniform, lambda d, u: d.icdf(u)),
    "LogitRelaxedBernoulli": (_uniform, lambda d, u: (
        _clamp_probs(u).log() - (-_clamp_probs(u)).log1p() + _clamp_probs(d.probs).log()
        - (-_clamp_probs(d.probs)).log1p()) / d.temperature),
    "RelaxedBernoulli": (_uniform, lambda d, u: torch.sigmoid(
        (_clamp_probs(u).log() - (-_clamp_probs(u)).log1p() + _clamp_probs(d.probs).log()
         - (-_clamp_probs(d.probs)).log1p()) / d.temperature)),
}


@pytest.mark.parametrize("case", RSAMPLE)
def test_rsample_matches_torch_on_the_same_noise(case):
    noise_fn, torch_fn = RSAMPLE[case]
    ours, ta_params = _build(case, "ta")
    ref, torch_params = _build(case, "torch")
    shape = (5, *ours.batch_shape)
    x = ours.rsample((5,), generator=ta.Generator().manual_seed(3))
    want = torch_fn(ref, torch.tensor(_np(noise_fn(shape, 3))))
    _close(x, want, rtol=1e-10, atol=1e-12)
    weights = np.linspace(-1.0, 2.0, math.prod(shape)).reshape(shape)
    names = list(torch_params)
    got = ta.autograd.grad((x * ta.tensor(weights, **F64)).sum(), [ta_params[n] for n in names],
                           allow_unused=True)
    ref_grads = torch.autograd.grad((want * torch.tensor(weights)).sum(),
                                    [torch_params[n] for n in names], allow_unused=True)
    for g, w in zip(got, ref_grads, strict=True):
        _close(g, w, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("case", RSAMPLE)
def test_rsample_passes_gradcheck_with_a_fixed_seed(case):
    cls_name, names, inputs, extra, _ = _gradcheck_inputs(case)

    def fn(*ps):
        d = getattr(D, cls_name)(**dict(zip(names, ps, strict=True)), **extra)
        return d.rsample((3,), generator=ta.Generator().manual_seed(7))

    assert ta.autograd.gradcheck(fn, inputs)


def _batched_mean_and_se(values, n_batches=20):
    """The mean of `values` (n, ...) and its standard error, from n_batches batch means."""
    batches = values.reshape(n_batches, -1, *values.shape[1:]).mean(1)
    return batches.mean(0), batches.std(0, ddof=1) / math.sqrt(n_batches)


@pytest.mark.parametrize("case, params", [
    ("InverseGamma", {"concentration": [3.5, 5.0], "rate": [1.0, 2.0]}),
    ("FisherSnedecor", {"df1": [4.0, 7.0], "df2": [9.0, 12.0]}),
])
def test_gamma_based_rsample_mean_and_pathwise_gradient(case, params):
    """The draws (implicit reparameterisation: no common noise with torch's) average to
    torch's mean, and the pathwise gradient of a batch's average to the gradient of torch's
    mean, each within 4 standard errors (from 20 independent batches)."""
    n_batches, per_batch = 20, 1000
    tensors = {k: ta.tensor(np.asarray(v), requires_grad=True, **F64) for k, v in params.items()}
    ref_params = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
                  for k, v in params.items()}
    ref_mean = getattr(td, case)(**ref_params).mean
    want = torch.autograd.grad(ref_mean.sum(), list(ref_params.values()), allow_unused=True)
    want = [np.zeros(2) if w is None else w.numpy() for w in want]
    gen = ta.Generator().manual_seed(11)
    means, grads = [], []
    for _ in range(n_batches):
        x = getattr(D, case)(**tensors).rsample((per_batch,), generator=gen)
        assert x.shape == (per_batch, 2)
        means.append(_np(x).mean(0))
        grads.append([_np(g) for g in ta.autograd.grad(x.mean(0).sum(),
                                                       list(tensors.values()))])
    for got, expected in [(np.array(means), ref_mean.detach().numpy())] + [
            (np.array([g[i] for g in grads]), want[i]) for i in range(len(params))]:
        mean, se = got.mean(0), got.std(0, ddof=1) / math.sqrt(n_batches)
        assert (np.abs(mean - expected) < 4 * se + 1e-12).all(), (mean, expected, se)


SHAPES = {  # name: (ours, torch's, support check of a draw)
    "Pareto": (lambda: D.Pareto(ta.tensor([1.0, 2.0], **F64), ta.tensor([3.0, 1.5], **F64)),
               lambda: td.Pareto(torch.tensor([1.0, 2.0]).double(), torch.tensor([3.0, 1.5])
                                 .double())),
    "HalfCauchy": (lambda: D.HalfCauchy(ta.tensor([1.0, 2.0], **F64)),
                   lambda: td.HalfCauchy(torch.tensor([1.0, 2.0]).double())),
    "InverseGamma": (lambda: D.InverseGamma(ta.tensor([2.0, 3.0], **F64), 1.5),
                     lambda: td.InverseGamma(torch.tensor([2.0, 3.0]).double(), 1.5)),
    "Kumaraswamy": (lambda: D.Kumaraswamy(ta.tensor([2.0, 0.5], **F64), 1.5),
                    lambda: td.Kumaraswamy(torch.tensor([2.0, 0.5]).double(), 1.5)),
    "FisherSnedecor": (lambda: D.FisherSnedecor(ta.tensor([2.0, 5.0], **F64), 3.0),
                       lambda: td.FisherSnedecor(torch.tensor([2.0, 5.0]).double(), 3.0)),
    "VonMises": (lambda: D.VonMises(ta.tensor([0.0, 3.0], **F64), ta.tensor([1.0, 8.0], **F64)),
                 lambda: td.VonMises(torch.tensor([0.0, 3.0]).double(),
                                     torch.tensor([1.0, 8.0]).double())),
    "ContinuousBernoulli": (lambda: D.ContinuousBernoulli(ta.tensor([0.2, 0.7], **F64)),
                            lambda: td.ContinuousBernoulli(torch.tensor([0.2, 0.7]).double())),
    "GeneralizedPareto": (lambda: D.GeneralizedPareto(0.0, 1.0, ta.tensor([0.2, -0.4], **F64)),
                          lambda: td.GeneralizedPareto(0.0, 1.0, torch.tensor([0.2, -0.4])
                                                       .double())),
    "NegativeBinomial": (lambda: D.NegativeBinomial(3.0, ta.tensor([0.2, 0.7], **F64)),
                         lambda: td.NegativeBinomial(3.0, torch.tensor([0.2, 0.7]).double())),
    "Multinomial": (lambda: D.Multinomial(6, ta.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], **F64)),
                    lambda: td.Multinomial(6, torch.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
                                           .double())),
    "RelaxedBernoulli": (lambda: D.RelaxedBernoulli(ta.tensor(0.5, **F64),
                                                    ta.tensor([0.2, 0.7], **F64)),
                         lambda: td.RelaxedBernoulli(torch.tensor(0.5).double(),
                                                     torch.tensor([0.2, 0.7]).double())),
    "RelaxedOneHotCategorical": (
        lambda: D.RelaxedOneHotCategorical(ta.tensor(0.5, **F64),
                                           ta.tensor([[0.2, 0.8], [0.5, 0.5]], **F64)),
        lambda: td.RelaxedOneHotCategorical(torch.tensor(0.5).double(),
                                            torch.tensor([[0.2, 0.8], [0.5, 0.5]]).double())),
    "LogisticNormal": (lambda: D.LogisticNormal(ta.tensor(LN_LOC, **F64),
                                                ta.tensor(LN_SCALE, **F64)),
                       lambda: td.LogisticNormal(torch.tensor(LN_LOC), torch.tensor(LN_SCALE))),
    "OneHotCategoricalStraightThrough": (
        lambda: D.OneHotCategoricalStraightThrough(ta.tensor([[0.2, 0.8], [0.5, 0.5]], **F64)),
        lambda: td.OneHotCategoricalStraightThrough(torch.tensor([[0.2, 0.8], [0.5, 0.5]])
                                                    .double())),
}


@pytest.mark.parametrize("name", SHAPES)
def test_sample_shapes_dtypes_and_supports(name):
    ours, ref = SHAPES[name][0](), SHAPES[name][1]()
    x = ours.sample((4, 3), generator=ta.Generator().manual_seed(0))
    torch.manual_seed(0)
    y = ref.sample((4, 3))
    assert tuple(x.shape) == tuple(y.shape)
    assert x.dtype == ta.float64
    assert not x.requires_grad
    assert bool(ref.support.check(torch.tensor(_np(x))).all())
    assert bool(_np(ours.support.check(x)).all())
    assert _np(ours.log_prob(x)).shape == tuple(ref.log_prob(y).shape)


@pytest.mark.parametrize("name, n", [("VonMises", 40000), ("NegativeBinomial", 20000),
                                     ("Multinomial", 20000), ("ContinuousBernoulli", 20000),
                                     ("Kumaraswamy", 20000), ("Pareto", 40000)])
def test_sample_means_agree_with_torchs_mean(name, n):
    ours, ref = SHAPES[name][0](), SHAPES[name][1]()
    x = _np(ours.sample((n,), generator=ta.Generator().manual_seed(5)))
    if name == "VonMises":  # E[cos(x - loc)] = 1 - variance, E[sin(x - loc)] = 0
        loc = ref.loc.numpy()
        stats = [(np.cos(x - loc), 1 - ref.variance.numpy()), (np.sin(x - loc), 0 * loc)]
        assert (x >= -math.pi).all() and (x < math.pi).all()
    else:
        stats = [(x, ref.mean.numpy())]
    for values, want in stats:
        mean, se = _batched_mean_and_se(values)
        assert (np.abs(mean - want) < 4 * se + 1e-12).all(), (mean, want, se)


def test_von_mises_sample_histogram_follows_its_density():
    d = D.VonMises(ta.tensor(2.5, **F64), ta.tensor(3.0, **F64))
    x = _np(d.sample((50000,), generator=ta.Generator().manual_seed(1)))
    edges = np.linspace(-math.pi, math.pi, 25)
    counts, _ = np.histogram(x, edges)
    mids = (edges[:-1] + edges[1:]) / 2
    density = np.exp(_np(d.log_prob(ta.tensor(mids, **F64))))
    expected = density * (edges[1] - edges[0]) * x.size  # (the midpoint rule: ~0.3% off)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 60  # 24 bins: P(chi2 > 60) ~ 1e-4 when the draws follow the density


def test_multinomial_values_and_gradients_match_torch():
    logits = np.array([[0.3, -1.0, 2.0], [0.0, 0.5, -0.5]])
    value = np.array([[[1.0, 2.0, 3.0], [0.0, 0.0, 6.0]], [[2.0, 2.0, 2.0], [6.0, 0.0, 0.0]]])
    ours_l = ta.tensor(logits, requires_grad=True, **F64)
    ref_l = torch.tensor(logits, requires_grad=True)
    for method in ("mean", "variance", "entropy"):
        ours, ref = D.Multinomial(6, logits=ours_l), td.Multinomial(6, logits=ref_l)
        got = getattr(ours, method)
        want = getattr(ref, method)
        got, want = (got(), want()) if callable(got) else (got, want)
        _close(got, want)
        g, = ta.autograd.grad(got.sum(), [ours_l])
        w, = torch.autograd.grad(want.sum(), [ref_l])
        _close(g, w)
    ours, ref = D.Multinomial(6, logits=ours_l), td.Multinomial(6, logits=ref_l)
    got, want = ours.log_prob(ta.tensor(value, **F64)), ref.log_prob(torch.tensor(value))
    _close(got, want)
    _close(ta.autograd.grad(got.sum(), [ours_l])[0], torch.autograd.grad(want.sum(), [ref_l])[0])
    assert ta.autograd.gradcheck(lambda lg: D.Multinomial(6, logits=lg).log_prob(
        ta.tensor(value, **F64)), (ours_l,))
    assert ta.autograd.gradcheck(lambda lg: D.Multinomial(6, logits=lg).entropy(), (ours_l,))


def test_relaxed_one_hot_categorical_matches_torch():
    logits = np.array([[0.3, -1.0, 2.0], [0.0, 0.5, -0.5]])
    temp = 0.6
    value = np.array([[0.2, 0.3, 0.5], [0.05, 0.9, 0.05]])
    ours_l, ours_t = (ta.tensor(logits, requires_grad=True, **F64),
                      ta.tensor(temp, requires_grad=True, **F64))
    ref_l, ref_t = torch.tensor(logits, requires_grad=True), torch.tensor(temp,
                                                                          requires_grad=True)
    for ours_cls, ref_cls, v in (
            (D.RelaxedOneHotCategorical, td.RelaxedOneHotCategorical, value),
            (D.ExpRelaxedCategorical, _torch_class("ExpRelaxedCategorical"), np.log(value))):
        ours, ref = ours_cls(ours_t, logits=ours_l), ref_cls(ref_t, logits=ref_l)
        got, want = ours.log_prob(ta.tensor(v, **F64)), ref.log_prob(torch.tensor(v))
        _close(got, want)
        for g, w in zip(ta.autograd.grad(got.sum(), [ours_l, ours_t]),
                        torch.autograd.grad(want.sum(), [ref_l, ref_t]), strict=True):
            _close(g, w)
    # rsample on the same Gumbel noise: softmax((logits + g) / T)
    x = D.RelaxedOneHotCategorical(ours_t, logits=ours_l).rsample(
        (4,), generator=ta.Generator().manual_seed(2))
    u = _clamp_probs(torch.tensor(_np(_uniform((4, 2, 3), 2))))
    want = torch.softmax((torch.log_softmax(ref_l, -1) - (-u.log()).log()) / ref_t, -1)
    _close(x, want)
    w = torch.tensor(np.linspace(-1, 1, 24).reshape(4, 2, 3))
    for g, r in zip(ta.autograd.grad((x * ta.tensor(w.numpy(), **F64)).sum(), [ours_l, ours_t]),
                    torch.autograd.grad((want * w).sum(), [ref_l, ref_t]), strict=True):
        _close(g, r)
    assert ta.autograd.gradcheck(lambda lg, t: D.RelaxedOneHotCategorical(t, logits=lg).rsample(
        (2,), generator=ta.Generator().manual_seed(4)), (ours_l, ours_t))


def test_straight_through_rsample_is_the_draw_with_the_gradient_of_probs():
    logits = np.array([[0.3, -1.0, 2.0], [0.0, 0.5, -0.5]])
    ours_l = ta.tensor(logits, requires_grad=True, **F64)
    ref_l = torch.tensor(logits, requires_grad=True)
    d = D.OneHotCategoricalStraightThrough(logits=ours_l)
    assert d.has_rsample and isinstance(d, D.OneHotCategorical)
    x = d.rsample((5,), generator=ta.Generator().manual_seed(0))
    assert x.shape == (5, 2, 3)
    np.testing.assert_array_equal(_np(x).sum(-1), 1.0)
    assert set(np.unique(_np(x))) <= {0.0, 1.0}
    w = np.linspace(-1, 1, 30).reshape(5, 2, 3)
    g, = ta.autograd.grad((x * ta.tensor(w, **F64)).sum(), [ours_l])
    y = td.OneHotCategoricalStraightThrough(logits=ref_l).rsample((5,))
    r, = torch.autograd.grad((y * torch.tensor(w)).sum(), [ref_l])
    _close(g, r)


def _mixture(lib, logits, loc, scale, event=False):
    if lib == "ta":
        comp = D.Normal(loc, scale)
        comp = D.Independent(comp, 1) if event else comp
        return D.MixtureSameFamily(D.Categorical(logits=logits), comp)
    comp = td.Normal(loc, scale)
    comp = td.Independent(comp, 1) if event else comp
    return td.MixtureSameFamily(td.Categorical(logits=logits), comp)


@pytest.mark.parametrize("event", [False, True])
def test_mixture_same_family_matches_torch(event):
    rng = np.random.default_rng(0)
    shape = (2, 3, 4) if event else (2, 3)  # batch 2, 3 components (, event 4)
    logits, loc, scale = rng.normal(size=(2, 3)), rng.normal(size=shape), rng.uniform(0.5, 2,
                                                                                       shape)
    value = rng.normal(size=(5, 2, 4) if event else (5, 2))
    ours_p = [ta.tensor(a, requires_grad=True, **F64) for a in (logits, loc, scale)]
    ref_p = [torch.tensor(a, requires_grad=True) for a in (logits, loc, scale)]
    ours, ref = _mixture("ta", *ours_p, event=event), _mixture("torch", *ref_p, event=event)
    assert tuple(ours.batch_shape) == tuple(ref.batch_shape)
    assert tuple(ours.event_shape) == tuple(ref.event_shape)
    outs = [(ours.log_prob(ta.tensor(value, **F64)), ref.log_prob(torch.tensor(value))),
            (ours.mean, ref.mean), (ours.variance, ref.variance)]
    if not event:
        outs.append((ours.cdf(ta.tensor(value, **F64)), ref.cdf(torch.tensor(value))))
    for got, want in outs:
        _close(got, want)
        for g, w in zip(ta.autograd.grad(got.sum(), ours_p, retain_graph=True,
                                         allow_unused=True),
                        torch.autograd.grad(want.sum(), ref_p, retain_graph=True,
                                            allow_unused=True), strict=True):
            assert (g is None) == (w is None)  # (the mean does not depend on the scales)
            if w is not None:
                _close(g, w)
    v = ta.tensor(value, **F64)
    assert ta.autograd.gradcheck(lambda *p: _mixture("ta", *p, event=event).log_prob(v),
                                 tuple(ours_p))
    x = ours.sample((4000,), generator=ta.Generator().manual_seed(0))
    assert tuple(x.shape) == (4000, *ref.batch_shape, *ref.event_shape)
    mean, se = _batched_mean_and_se(_np(x))
    assert (np.abs(mean - ref.mean.detach().numpy()) < 4 * se).all()


def test_mixture_same_family_refuses_bad_parts():
    comp = D.Normal(ta.zeros(2, 3, **F64), ta.ones(2, 3, **F64))
    with pytest.raises(ValueError, match="Categorical"):
        D.MixtureSameFamily("not a categorical", comp)
    with pytest.raises(ValueError, match="4 components"):
        D.MixtureSameFamily(D.Categorical(logits=ta.zeros(2, 4, **F64)), comp)
    with pytest.raises(ValueError, match="not compatible"):
        D.MixtureSameFamily(D.Categorical(logits=ta.zeros(5, 3, **F64)), comp)
    for bad in [lambda: td.MixtureSameFamily(td.Categorical(logits=torch.zeros(2, 4)),
                                             td.Normal(torch.zeros(2, 3), 1.0)),
                lambda: td.MixtureSameFamily(td.Categorical(logits=torch.zeros(5, 3)),
                                             td.Normal(torch.zeros(2, 3), 1.0))]:
        with pytest.raises(ValueError):
            bad()


@pytest.mark.parametrize("case", ["Pareto", "Kumaraswamy", "GeneralizedPareto", "VonMises",
                                  "NegativeBinomial", "ContinuousBernoulli-logits",
                                  "RelaxedBernoulli", "InverseGamma"])
def test_expand_matches_torch(case):
    ours, _ = _build(case, "ta", grad=False)
    ref, _ = _build(case, "torch", grad=False)
    n = len(CASES[case][3])
    ours, ref = ours.expand((2, n)), ref.expand((2, n))
    assert tuple(ours.batch_shape) == tuple(ref.batch_shape) == (2, n)
    v = np.asarray(CASES[case][3])
    _close(ours.log_prob(ta.tensor(v, **F64)), ref.log_prob(torch.tensor(v)),
           rtol=CASES[case][6], atol=CASES[case][6])


BAD_PARAMS = [
    ("Pareto", {"scale": [1.0], "alpha": [-1.0]}),
    ("Pareto", {"scale": [0.0], "alpha": [1.0]}),
    ("HalfCauchy", {"scale": [-1.0]}),
    ("InverseGamma", {"concentration": [0.0], "rate": [1.0]}),
    ("Kumaraswamy", {"concentration1": [1.0], "concentration0": [-0.5]}),
    ("FisherSnedecor", {"df1": [-1.0], "df2": [1.0]}),
    ("VonMises", {"loc": [0.0], "concentration": [-1.0]}),
    ("ContinuousBernoulli", {"probs": [1.5]}),
    ("GeneralizedPareto", {"loc": [0.0], "scale": [-1.0], "concentration": [0.1]}),
    ("NegativeBinomial", {"total_count": [-1.0], "probs": [0.5]}),
    ("NegativeBinomial", {"total_count": [2.0], "probs": [1.0]}),
    ("RelaxedBernoulli", {"temperature": [0.5], "probs": [1.2]}),
]


@pytest.mark.parametrize("name, params", BAD_PARAMS)
def test_bad_parameters_are_refused_as_torchs(name, params):
    with pytest.raises(ValueError):
        getattr(td, name)(**{k: torch.tensor(v, dtype=torch.float64) for k, v in params.items()},
                          validate_args=True)
    with pytest.raises(ValueError, match=rf"^{name}: \w+ must be within"):
        getattr(D, name)(**{k: ta.tensor(v, **F64) for k, v in params.items()})
    # validate_args=False takes them
    getattr(D, name)(**{k: ta.tensor(v, **F64) for k, v in params.items()},
                     validate_args=False)


BAD_VALUES = [
    ("Pareto", 0.5), ("HalfCauchy", -0.1), ("InverseGamma", 0.0), ("Kumaraswamy", 1.5),
    ("FisherSnedecor", -1.0), ("ContinuousBernoulli", 1.2), ("GeneralizedPareto", -2.0),
    ("NegativeBinomial", 1.5), ("RelaxedBernoulli", 2.0), ("VonMises", math.nan),
]


@pytest.mark.parametrize("case, value", BAD_VALUES)
def test_values_outside_the_support_are_refused_as_torchs(case, value):
    ours, _ = _build(case, "ta", grad=False)
    ref, _ = _build(case, "torch", grad=False)
    with pytest.raises(ValueError):
        ref.log_prob(torch.tensor([value] * len(CASES[case][3]), dtype=torch.float64))
    with pytest.raises(ValueError, match=r"log_prob: value must be within"):
        ours.log_prob(ta.tensor([value] * len(CASES[case][3]), **F64))


def test_other_refusals_match_torch():
    with pytest.raises(NotImplementedError):
        td.Multinomial(2.5, torch.tensor([0.5, 0.5]))
    with pytest.raises(NotImplementedError, match="total_count"):
        D.Multinomial(2.5, ta.tensor([0.5, 0.5], **F64))
    for lib, mod in (("ta", D), ("torch", td)):
        p = ta.tensor([0.5], **F64) if lib == "ta" else torch.tensor([0.5])
        for make in (lambda m, p=p: m.ContinuousBernoulli(p, p),
                     lambda m: m.ContinuousBernoulli(), lambda m: m.NegativeBinomial(2.0),
                     lambda m, p=p: m.RelaxedBernoulli(p)):
            with pytest.raises(ValueError):
                make(mod)
    with pytest.raises(ValueError, match="must be within Multinomial"):  # more than total_count
        D.Multinomial(3, ta.tensor([0.5, 0.5], **F64)).log_prob(ta.tensor([2.0, 2.0], **F64))
    with pytest.raises(ValueError):
        td.Multinomial(3, torch.tensor([0.5, 0.5])).log_prob(torch.tensor([2.0, 2.0]))
    with pytest.raises(NotImplementedError):  # neither has an icdf (Gamma's is missing)
        D.InverseGamma(2.0, 1.0).icdf(ta.tensor(0.5))
    with pytest.raises(NotImplementedError):
        td.InverseGamma(2.0, 1.0).icdf(torch.tensor(0.5))


def _kl_pair(lib, name, params):
    mod = D if lib == "ta" else td
    tensors = {k: (ta.tensor(np.asarray(v), requires_grad=True, **F64) if lib == "ta"
                   else torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True))
               for k, v in params.items()}
    return getattr(mod, name)(**tensors), list(tensors.values())


KL_PAIRS = [
    (("ContinuousBernoulli", {"probs": [0.2, 0.4995, 0.9]}),
     ("ContinuousBernoulli", {"logits": [0.5, -1.0, 0.0004]})),
    (("Beta", {"concentration1": [0.5, 2.0, 3.0], "concentration0": [1.5, 2.0, 0.7]}),
     ("ContinuousBernoulli", {"probs": [0.2, 0.5, 0.9]})),
    (("Uniform", {"low": [0.1, 0.2, 0.0], "high": [0.5, 0.9, 0.5]}),
     ("ContinuousBernoulli", {"probs": [0.2, 0.7, 0.9]})),
    (("ContinuousBernoulli", {"probs": [0.2, 0.7, 0.9]}), ("Exponential", {"rate": [0.5, 1, 2]})),
    (("ContinuousBernoulli", {"probs": [0.2, 0.7, 0.9]}),
     ("Normal", {"loc": [0.5, 0.0, 1.0], "scale": [1.0, 2.0, 0.5]})),
    (("ContinuousBernoulli", {"probs": [0.2, 0.7, 0.9]}),
     ("Uniform", {"low": [-1.0, 0.1, -0.5], "high": [2.0, 3.0, 0.9]})),
    (("Pareto", {"scale": [1.0, 2.0, 1.0], "alpha": [2.0, 3.0, 0.5]}),
     ("Pareto", {"scale": [0.5, 2.5, 1.0], "alpha": [1.0, 2.0, 4.0]})),
    (("Pareto", {"scale": [1.0, 2.0, 1.0], "alpha": [2.0, 3.0, 0.5]}),
     ("Exponential", {"rate": [0.5, 1.0, 2.0]})),
    (("Pareto", {"scale": [1.0, 2.0, 1.0], "alpha": [2.0, 3.0, 0.5]}),
     ("Gamma", {"concentration": [0.5, 1.0, 2.0], "rate": [1.0, 2.0, 3.0]})),
    (("Pareto", {"scale": [1.0, 2.0, 1.0], "alpha": [2.5, 3.0, 1.5]}),
     ("Normal", {"loc": [0.5, 0.0, 1.0], "scale": [1.0, 2.0, 0.5]})),
    (("Uniform", {"low": [1.0, 2.0, 0.5], "high": [2.0, 3.0, 1.0]}),
     ("Pareto", {"scale": [0.5, 1.0, 1.0], "alpha": [2.0, 3.0, 1.0]})),
    (("Normal", {"loc": [0.5, 0.0], "scale": [1.0, 2.0]}), ("Pareto", {"scale": [1.0, 2.0],
                                                                       "alpha": [1.0, 3.0]})),
    (("Pareto", {"scale": [1.0, 2.0], "alpha": [1.0, 3.0]}),
     ("ContinuousBernoulli", {"probs": [0.3, 0.6]})),
    (("Gamma", {"concentration": [1.0, 2.0], "rate": [1.0, 3.0]}),
     ("ContinuousBernoulli", {"probs": [0.3, 0.6]})),
]


@pytest.mark.parametrize("p_spec, q_spec", KL_PAIRS)
def test_kl_divergence_matches_torch(p_spec, q_spec):
    (p, p_params), (q, q_params) = _kl_pair("ta", *p_spec), _kl_pair("ta", *q_spec)
    (rp, rp_params), (rq, rq_params) = _kl_pair("torch", *p_spec), _kl_pair("torch", *q_spec)
    got, want = D.kl_divergence(p, q), td.kl_divergence(rp, rq)
    _close(got, want, rtol=1e-9)
    finite = np.isfinite(want.detach().numpy())
    if not finite.any():
        return
    params, ref_params = p_params + q_params, rp_params + rq_params
    got_grads = ta.autograd.grad(got[ta.tensor(finite)].sum(), params, allow_unused=True)
    want_grads = torch.autograd.grad(want[torch.tensor(finite)].sum(), ref_params,
                                     allow_unused=True)
    for g, w, t in zip(got_grads, want_grads, ref_params, strict=True):
        w = torch.zeros_like(t) if w is None else w
        g = ta.zeros(*w.shape, **F64) if g is None else g
        _close(g, w, rtol=1e-8, atol=1e-10)


LN_LOC = np.array([[0.2, -0.5, 1.0], [0.0, 0.3, -0.2]])
LN_SCALE = np.array([[0.5, 1.0, 2.0], [1.0, 0.7, 0.3]])


def test_logistic_normal_log_prob_and_gradients_match_torch():
    loc, scale = (ta.tensor(a, requires_grad=True, **F64) for a in (LN_LOC, LN_SCALE))
    ref_loc, ref_scale = (torch.tensor(a, requires_grad=True) for a in (LN_LOC, LN_SCALE))
    ours, ref = D.LogisticNormal(loc, scale), td.LogisticNormal(ref_loc, ref_scale)
    assert (tuple(ours.batch_shape), tuple(ours.event_shape)) == ((2,), (4,))
    assert (tuple(ours.batch_shape), tuple(ours.event_shape)) == (tuple(ref.batch_shape),
                                                                  tuple(ref.event_shape))
    value = np.random.default_rng(3).dirichlet([1.0, 2.0, 0.5, 3.0], size=(5, 2))
    got, want = ours.log_prob(ta.tensor(value, **F64)), ref.log_prob(torch.tensor(value))
    _close(got, want)
    for g, w in zip(ta.autograd.grad(got.sum(), [loc, scale]),
                    torch.autograd.grad(want.sum(), [ref_loc, ref_scale]), strict=True):
        _close(g, w)
    v = ta.tensor(value, **F64)
    assert ta.autograd.gradcheck(lambda m, s: D.LogisticNormal(m, s).log_prob(v), (loc, scale))
    assert ta.autograd.gradgradcheck(lambda m, s: D.LogisticNormal(m, s).log_prob(v),
                                     (loc, scale))
    # a scalar base is made of shape (1,), as torch's
    assert tuple(D.LogisticNormal(0.0, 1.0).event_shape) == tuple(
        td.LogisticNormal(0.0, 1.0).event_shape) == (2,)
    expanded, ref_expanded = ours.expand((3, 2)), ref.expand((3, 2))
    assert tuple(expanded.batch_shape) == tuple(ref_expanded.batch_shape)
    _close(expanded.log_prob(v[0]), ref_expanded.log_prob(torch.tensor(value[0])))


def test_logistic_normal_rsample_matches_torch_on_the_same_noise():
    loc, scale = (ta.tensor(a, requires_grad=True, **F64) for a in (LN_LOC, LN_SCALE))
    ref_loc, ref_scale = (torch.tensor(a, requires_grad=True) for a in (LN_LOC, LN_SCALE))
    x = D.LogisticNormal(loc, scale).rsample((4,), generator=ta.Generator().manual_seed(6))
    eps = torch.tensor(_np(ta.randn(4, 2, 3, generator=ta.Generator().manual_seed(6), **F64)))
    stick = td.transforms.StickBreakingTransform()
    want = stick(ref_loc + ref_scale * eps)
    _close(x, want)
    assert bool(td.constraints.simplex.check(torch.tensor(_np(x))).all())
    w = np.linspace(-1, 1, 32).reshape(4, 2, 4)
    for g, r in zip(ta.autograd.grad((x * ta.tensor(w, **F64)).sum(), [loc, scale]),
                    torch.autograd.grad((want * torch.tensor(w)).sum(), [ref_loc, ref_scale]),
                    strict=True):
        _close(g, r)
    assert ta.autograd.gradcheck(lambda m, s: D.LogisticNormal(m, s).rsample(
        (2,), generator=ta.Generator().manual_seed(1)), (loc, scale))


def test_logistic_normal_refuses_what_torch_refuses():
    with pytest.raises(ValueError):
        td.LogisticNormal(torch.zeros(3), -torch.ones(3))
    with pytest.raises(ValueError, match=r"^LogisticNormal: scale must be within"):
        D.LogisticNormal(ta.zeros(3, **F64), -ta.ones(3, **F64))
    off_simplex = [0.5, 0.5, 0.5, 0.5]
    with pytest.raises(ValueError):
        td.LogisticNormal(torch.zeros(3), torch.ones(3)).log_prob(torch.tensor(off_simplex))
    with pytest.raises(ValueError, match=r"^LogisticNormal.log_prob: value must be within"):
        D.LogisticNormal(ta.zeros(3, **F64), ta.ones(3, **F64)).log_prob(
            ta.tensor(off_simplex, **F64))
