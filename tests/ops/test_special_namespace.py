"""tinyattn.special (torch.special's names) against torch: polygamma and digamma's second
derivative, zeta, gammainc/gammaincc (and Gamma.cdf, Chi2.cdf), erfcx, xlog1py, entr, the
Bessel functions i0/i0e/i1/i1e, ndtr/ndtri/log_ndtr, multigammaln and the reused names: values
in float64 over ranges with their edge points, float32 results, gradients (gradcheck and
torch's), and the errors (polygamma's n, the gradients torch refuses)."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")
TS = torch.special
INF, NAN = np.inf, np.nan


def same(got, want, rtol=1e-12, atol=0.0):
    """Equal to rtol, with the same infinities (and signs) and NaNs."""
    got = got.detach().numpy() if isinstance(got, ta.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def t64(v, grad=False):
    return ta.tensor(np.asarray(v, dtype=np.float64), requires_grad=grad)


def th(v, grad=False):
    return torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=grad)


POLY = [0.0, -0.0, -2.5, -0.5, -1.5, -2.7, -30.3, 0.5, 1.0, 1e-300, 1e-8, 3.3, 7.9, 1e5, 1e15,
        INF, -INF, NAN, *np.linspace(-20.05, 40, 301)]
POLES = [-1.0, -2.0, -7.0]


# ---- polygamma --------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 2, 3, 4, 5])
def test_polygamma_matches_torch_in_float64(n):
    x = POLY + POLES
    same(ta.special.polygamma(n, t64(x)), torch.polygamma(n, th(x)), rtol=1e-12)


def test_polygamma_1_is_exact_where_torchs_trigamma_is_5e_10_off():
    """n = 1 is digamma's own gradient (trigamma): ζ(2, x) exactly; torch's stops its series
    early (~5e-10), and is finite (~1e32) at the negative whole numbers, where ψ' has poles."""
    x = [v for v in POLY if not (v == -INF)]
    same(ta.special.polygamma(1, t64(x)), torch.polygamma(1, th(x)), rtol=1e-9)
    positive = np.linspace(0.1, 30, 50)
    same(ta.special.polygamma(1, t64(positive)), TS.zeta(th(np.full(50, 2.0)), th(positive)),
         rtol=1e-14)
    assert np.all(np.isinf(ta.polygamma(1, t64(POLES)).numpy()))
    assert np.isnan(ta.polygamma(1, t64([-INF])).item())


def test_polygamma_at_its_edges_as_torch():
    x = [0.0, -0.0, -1.0, INF, -INF, NAN, 1e-300]
    for n in (2, 3, 4):
        same(ta.polygamma(n, t64(x)), torch.polygamma(n, th(x)))
    same(ta.polygamma(0, t64(x)), torch.polygamma(0, th(x)))


def test_polygamma_float32_and_the_tensor_methods():
    x = np.array([-2.5, 0.3, 1.0, 4.5, 12.0], dtype=np.float32)
    for n in (0, 1, 2, 3):
        got = ta.tensor(x).polygamma(n)
        assert got.dtype == np.float32
        same(got, torch.tensor(x).polygamma(n), rtol=2e-6)
    y = ta.tensor(x.astype(np.float64))
    y.polygamma_(2)
    same(y, torch.polygamma(2, torch.tensor(x.astype(np.float64))))
    same(ta.tensor([1.0, 2.0]).i0(), torch.tensor([1.0, 2.0]).i0(), rtol=1e-6)
    assert ta.polygamma is ta.special.polygamma


@pytest.mark.parametrize("n", [-1, -3])
def test_polygamma_refuses_a_negative_n(n):
    with pytest.raises(ValueError, match="polygamma: n must be >= 0"):
        ta.special.polygamma(n, t64([1.0]))
    with pytest.raises(ValueError, match="polygamma"):
        t64([1.0]).polygamma(n)


@pytest.mark.parametrize("n", [1.5, 2.0, True, "2", None])
def test_polygamma_refuses_an_n_that_is_not_an_int(n):
    with pytest.raises(TypeError, match="polygamma: n must be an int"):
        ta.polygamma(n, t64([1.0]))
    with pytest.raises(TypeError, match="polygamma: n must be an int"):
        t64([1.0]).polygamma(n)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma_gradients_gradcheck_and_torch(n):
    values = [-2.5, -0.7, -1.3, 0.3, 1.7, 4.5, 12.0]
    x = t64(values, True)
    assert ta.autograd.gradcheck(lambda a: ta.polygamma(n, a), (x,))
    ta.polygamma(n, x).sum().backward()
    xt = th(values, True)
    torch.polygamma(n, xt).sum().backward()
    same(x.grad, xt.grad, rtol=1e-9)  # (n = 0: torch's trigamma, 5e-10 off)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_second_derivatives_of_digamma_and_polygamma_match_torch(n):
    values = [-2.5, -0.7, 0.3, 1.7, 4.5, 12.0]
    x, xt = t64(values, True), th(values, True)
    f = (lambda a: a.digamma()) if n == 0 else (lambda a: a.polygamma(n))
    ft = (lambda a: a.digamma()) if n == 0 else (lambda a: a.polygamma(n))
    (g,) = ta.autograd.grad(f(x).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad(ft(xt).sum(), xt, create_graph=True)
    same(g, gt, rtol=1e-9)
    (h,) = ta.autograd.grad((g * g).sum(), x)
    (ht,) = torch.autograd.grad((gt * gt).sum(), xt)
    same(h, ht, rtol=1e-8)
    assert ta.autograd.gradgradcheck(f, (t64(values, True),))


# ---- zeta, gammainc, gammaincc -------------------------------------------------------------


def test_zeta_matches_torch_with_its_edges():
    s, q = np.meshgrid([0.5, 1.0, 1.5, 2.0, 3.0, 4.5, 10.0, 30.0, NAN],
                       [-3.0, -2.5, -1.5, -0.3, 0.0, 1e-200, 0.2, 1.0, 2.0, 10.0, 1e3, INF, NAN])
    same(ta.special.zeta(t64(s), t64(q)), TS.zeta(th(s), th(q)), rtol=1e-13)
    same(ta.special.zeta(2.0, t64([1.0, 3.0])), TS.zeta(2.0, th([1.0, 3.0])))


def test_zeta_gradient_for_q_and_refused_for_x():
    s, q = [2.0, 3.5, 5.0], [0.4, 1.5, 7.0]
    qa, qt = t64(q, True), th(q, True)
    ta.special.zeta(t64(s), qa).sum().backward()
    TS.zeta(th(s), qt).sum().backward()
    same(qa.grad, qt.grad)
    assert ta.autograd.gradcheck(lambda b: ta.special.zeta(t64(s), b), (t64(q, True),))
    x = t64(s, True)
    y = ta.special.zeta(x, t64(q)).sum()
    with pytest.raises(NotImplementedError, match="zeta: the derivative with respect to x"):
        y.backward()


GRID_A = [0.0, 0.1, 0.5, 1.0, 2.5, 7.0, 20.0, INF, NAN, -1.0]
GRID_X = [0.0, 1e-3, 0.3, 1.0, 2.4, 5.0, 10.0, 30.0, INF, NAN, -1.0]


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma_matches_torch_with_its_edges(name):
    a, x = np.meshgrid(GRID_A, GRID_X)
    same(getattr(ta.special, name)(t64(a), t64(x)), getattr(TS, name)(th(a), th(x)),
         rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma_for_large_a_is_exact_where_torch_is_1e_9_off(name):
    mpmath = pytest.importorskip("mpmath")
    a, x = np.meshgrid([50.0, 100.0], [30.0, 80.0, 100.0, 120.0, 200.0])
    upper = name == "gammaincc"
    want = [float(mpmath.gammainc(ai, xi, mpmath.inf) / mpmath.gamma(ai)) if upper else
            float(mpmath.gammainc(ai, 0, xi, regularized=True)) for ai, xi in zip(a.ravel(),
                                                                               x.ravel(),
                                                                               strict=True)]
    same(getattr(ta.special, name)(t64(a.ravel()), t64(x.ravel())), want, rtol=1e-11)
    same(getattr(ta.special, name)(t64(a), t64(x)), getattr(TS, name)(th(a), th(x)), rtol=1e-8)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma_gradient_for_x_and_refused_for_a(name):
    fn, tfn = getattr(ta.special, name), getattr(TS, name)
    a, x = [[0.5], [1.0], [3.0]], [0.2, 1.5, 6.0, 0.0]
    xa, xt = t64(x, True), th(x, True)
    fn(t64(a), xa).sum().backward()
    tfn(th(a), xt).sum().backward()
    same(xa.grad, xt.grad)  # (inf and NaN at x = 0 for a < 1 and a = 1, as torch's)
    assert ta.autograd.gradcheck(lambda b: fn(t64(a), b), (t64([0.2, 1.5, 6.0], True),))
    y = fn(t64([2.0], True), t64([1.0])).sum()
    with pytest.raises(NotImplementedError, match=f"{name}: the derivative with respect to a"):
        y.backward()
    assert fn(2, t64([1.0])).dtype == np.float64
    assert fn(t64([2.0]), 1.0).dtype == np.float64


def test_incomplete_gamma_float32():
    a, x = np.float32([0.5, 2.0, 9.0]), np.float32([0.7, 2.0, 4.0])
    got = ta.special.gammainc(ta.tensor(a), ta.tensor(x))
    assert got.dtype == np.float32
    same(got, TS.gammainc(torch.tensor(a), torch.tensor(x)), rtol=1e-6)


def test_gamma_and_chi2_cdf_match_torch():
    td = torch.distributions
    conc, rate, v = [0.5, 2.0, 7.5], [1.0, 0.3, 2.0], [0.4, 3.0, 5.0]
    rt = th(rate, True)
    vt = th(v, True)
    want = td.Gamma(th(conc), rt).cdf(vt)
    ra, va = t64(rate, True), t64(v, True)
    got = ta.distributions.Gamma(t64(conc), ra).cdf(va)
    same(got, want)
    got.sum().backward()
    want.sum().backward()
    same(ra.grad, rt.grad)
    same(va.grad, vt.grad)
    df = [1.0, 3.0, 10.0]
    same(ta.distributions.Chi2(t64(df)).cdf(t64(v)), td.Chi2(th(df)).cdf(th(v)))
    with pytest.raises(NotImplementedError, match="gammainc"):
        ta.distributions.Gamma(t64(conc, True), 1.0).cdf(t64(v)).sum().backward()


# ---- erfcx, xlog1py, entr, Bessel, normal ------------------------------------------------------

UNARY = {
    "erfcx": [*np.linspace(-26, 30, 300), -30.0, 1e10, 1e200, INF, -INF, NAN, 0.0],
    "entr": [0.0, -1.0, 2.0, INF, NAN, 1e-300, 0.3, *np.linspace(0.01, 50, 100)],
    "ndtri": [0.0, 1.0, -0.1, 1.1, 0.5, 1e-300, 1e-20, 1e-5, 0.25, 0.75, 1 - 1e-12, NAN,
              *np.linspace(0.001, 0.999, 300)],
    "log_ndtr": [-1e3, -40.0, -1.0, 0.0, 40.0, INF, -INF, NAN, *np.linspace(-38, 10, 300)],
    "i0": [0.0, -3.0, 1e-300, -800.0, 710.0, INF, -INF, NAN, *np.linspace(-50, 50, 401)],
    "i0e": [0.0, -3.0, 1e-300, -800.0, 1e300, INF, -INF, NAN, *np.linspace(-50, 50, 401)],
    "i1": [0.0, -3.0, 1e-300, -800.0, 710.0, INF, -INF, NAN, *np.linspace(-50, 50, 401)],
    "i1e": [0.0, -3.0, 1e-300, -800.0, 1e300, INF, -INF, NAN, *np.linspace(-50, 50, 401)],
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_functions_match_torch_in_float64(name):
    x = UNARY[name]
    same(getattr(ta.special, name)(t64(x)), getattr(TS, name)(th(x)), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_functions_float32(name):
    x = np.float32([0.05, 0.3, 0.5, 0.9] if name == "ndtri" else [-4.0, -0.5, 0.3, 2.0, 9.0])
    if name == "entr":
        x = np.abs(x)
    got = getattr(ta.special, name)(ta.tensor(x))
    assert got.dtype == np.float32
    same(got, getattr(TS, name)(torch.tensor(x)), rtol=1e-5)  # (torch: in float32 itself)


GRAD_POINTS = {
    "erfcx": [-3.0, -0.5, 0.0, 0.7, 2.5, 12.0], "entr": [0.1, 0.5, 1.0, 3.0],
    "ndtri": [1e-6, 0.1, 0.3, 0.5, 0.8, 0.999], "log_ndtr": [-40.0, -5.0, -1.0, 0.0, 0.5, 6.0],
    "i0": [-3.0, -0.2, 0.0, 0.4, 5.0, 29.5, 31.0], "i0e": [-3.0, -0.2, 0.4, 5.0, 29.5, 31.0],
    "i1": [-3.0, -0.2, 0.0, 1e-17, 0.4, 5.0, 29.5, 31.0],
    "i1e": [-3.0, -0.2, 0.0, 1e-17, 0.4, 5.0, 29.5, 31.0],
}


@pytest.mark.parametrize("name", sorted(GRAD_POINTS))
def test_unary_special_gradients_match_torch(name):
    values = GRAD_POINTS[name]
    x, xt = t64(values, True), th(values, True)
    getattr(ta.special, name)(x).sum().backward()
    getattr(TS, name)(xt).sum().backward()
    same(x.grad, xt.grad, rtol=1e-11)
    smooth = [v for v in values if v not in (0.0, 1e-17, 1e-6)]
    assert ta.autograd.gradcheck(getattr(ta.special, name), (t64(smooth, True),))


def test_xlog1py_matches_torch_with_gradients():
    x = [0.0, 0.0, 1.0, 0.0, 2.0, -1.5, 0.7, 3.0]
    y = [-1.0, NAN, -2.0, -3.0, 0.5, 1e-10, 4.0, -0.5]
    same(ta.special.xlog1py(t64(x), t64(y)), TS.xlog1py(th(x), th(y)))
    xs, ys = [0.0, 2.0, -1.5, 0.7], [-0.5, 0.5, 1e-10, 4.0]
    xa, ya, xt, yt = t64(xs, True), t64(ys, True), th(xs, True), th(ys, True)
    ta.special.xlog1py(xa, ya).sum().backward()
    TS.xlog1py(xt, yt).sum().backward()
    same(xa.grad, xt.grad)
    same(ya.grad, yt.grad)
    same(ta.special.xlog1py(2.0, t64([0.5])), TS.xlog1py(2.0, th([0.5])))
    same(ta.special.xlog1py(t64([0.5]), 3.0), TS.xlog1py(th([0.5]), 3.0))


def test_ndtr_and_multigammaln_match_torch_with_gradients():
    x = [-40.0, -5.0, -1.0, 0.0, 0.3, 2.0, 9.0, INF, -INF, NAN]
    same(ta.special.ndtr(t64(x)), TS.ndtr(th(x)), rtol=1e-10, atol=1e-300)  # (torch: 4e-11
    # off at -5, where Φ(-5) = 2.8665157187919391e-07 (Abramowitz & Stegun); ours is exact)
    same(ta.special.ndtr(t64([-5.0])), [2.8665157187919391e-07], rtol=1e-15)
    v = [-3.0, 0.0, 1.5]
    xa, xt = t64(v, True), th(v, True)
    ta.special.ndtr(xa).sum().backward()
    TS.ndtr(xt).sum().backward()
    same(xa.grad, xt.grad)
    a = [2.0, 3.5, 10.0]
    for p in (1, 2, 3):
        aa, at = t64(a, True), th(a, True)
        same(ta.special.multigammaln(aa, p), TS.multigammaln(at, p), rtol=1e-13)
        ta.special.multigammaln(aa, p).sum().backward()
        TS.multigammaln(at, p).sum().backward()
        same(aa.grad, at.grad, rtol=1e-9)
    with pytest.raises(ValueError, match="multigammaln: all elements must be greater"):
        ta.special.multigammaln(t64([0.5]), 3)
    with pytest.raises(ValueError, match="multigammaln: p must be an int"):
        ta.special.multigammaln(t64([3.0]), 0)


def test_the_reused_names_are_tinyattns_functions_and_match_torch():
    rng = np.random.default_rng(0)
    v = rng.uniform(0.05, 0.95, (3, 4))
    x, xt = t64(v), th(v)
    for name in ("erf", "erfc", "erfinv", "expit", "logit", "gammaln", "digamma", "psi", "sinc",
                 "log1p", "expm1", "exp2", "round"):
        same(getattr(ta.special, name)(x), getattr(TS, name)(xt), rtol=1e-12)
    same(ta.special.xlogy(x, x), TS.xlogy(xt, xt))
    same(ta.special.softmax(x, 1), TS.softmax(xt, 1))
    same(ta.special.log_softmax(x, 0), TS.log_softmax(xt, 0))
    same(ta.special.logsumexp(x, 1), TS.logsumexp(xt, 1))
    same(ta.special.round(x * 100, decimals=1), TS.round(xt * 100, decimals=1))
    assert ta.special.gammaln is ta.lgamma and ta.special.psi is ta.digamma
    assert set(ta.special.__all__) <= set(dir(ta.special))
    assert "special" in ta.__all__


@pytest.mark.parametrize("name", ["i1", "i1e", "i0", "i0e", "erfcx", "entr", "ndtri", "log_ndtr"])
def test_unary_special_second_derivatives_match_torch(name):
    values = [v for v in GRAD_POINTS[name] if v != 1e-17]
    x, xt = t64(values, True), th(values, True)
    (g,) = ta.autograd.grad(getattr(ta.special, name)(x).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad(getattr(TS, name)(xt).sum(), xt, create_graph=True)
    (gg,) = ta.autograd.grad(g.sum(), x)
    (ggt,) = torch.autograd.grad(gt.sum(), xt)
    same(gg, ggt, rtol=1e-10)
    smooth = [v for v in values if v not in (0.0, 1e-6)]
    assert ta.autograd.gradgradcheck(getattr(ta.special, name), (t64(smooth, True),))


def test_xlog1py_second_derivatives_match_torch():
    xs, ys = [0.0, 2.0, -1.5, 0.7], [-0.5, 0.5, 1e-10, 4.0]
    xa, ya, xt, yt = t64(xs, True), t64(ys, True), th(xs, True), th(ys, True)
    ga = ta.autograd.grad(ta.special.xlog1py(xa, ya).sum(), (xa, ya), create_graph=True)
    gt = torch.autograd.grad(TS.xlog1py(xt, yt).sum(), (xt, yt), create_graph=True)
    for a, t in zip(ta.autograd.grad(sum(g.sum() for g in ga), (xa, ya)),
                    torch.autograd.grad(sum(g.sum() for g in gt), (xt, yt)), strict=True):
        same(a, t)
    assert ta.autograd.gradgradcheck(ta.special.xlog1py, (t64([0.5, 2.0], True),
                                                          t64([0.3, -0.5], True)))
