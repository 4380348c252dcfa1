"""Gradients of gradients (create_graph=True) through ta.special's orthogonal polynomials and
Bessel-type functions (ops/special_poly.py) and the derivative ops behind them
(ops/special_poly_derivatives.py): gradgradcheck in float64 at ordinary points and at the
edges (near 0, |x| = 1, large n, negative x), third derivatives, the create_graph first-order
gradient equal to the plain one, higher derivatives against numpy.polynomial's exact ones,
mpmath's, the functions' differential equations on torch's values (torch has no x-gradient for
them) and finite differences of the first-order gradient; the n-gradient still refused."""

import functools

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.ops import special_poly as spp
from tinyattn.ops import special_poly_derivatives as spd
from tinyattn.ops.samples import materialize

torch = pytest.importorskip("torch")
TS = torch.special
NP = np.polynomial

CHEBYSHEV = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
             "chebyshev_polynomial_w"]
SHIFTED = ["shifted_" + name for name in CHEBYSHEV]
WIDE = ["hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l"]
POLYNOMIALS = CHEBYSHEV + SHIFTED + WIDE + ["legendre_polynomial_p"]
BESSEL = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
          "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
          "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
          "airy_ai"]
POSITIVE_ONLY = ["bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
                 "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"]


def derivatives(f, x, order):
    """[f(x), f'(x), ..., f^(order)(x)] of an elementwise f, by repeated create_graph grads."""
    xt = ta.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)
    out = [f(xt)]
    for _ in range(order):
        (g,) = ta.autograd.grad(out[-1].sum(), xt, create_graph=True)
        out.append(g)
    return [o.detach().numpy() for o in out]


def plain_grad(f, x):
    xt = ta.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)
    f(xt).sum().backward()
    return xt.grad.numpy()


def close(got, want, rtol, atol):
    """|got - want| <= rtol |want| + atol max |want| (per row), NaNs alike."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fine = np.isfinite(want)
    np.testing.assert_array_equal(got[~fine], want[~fine])
    scale = np.max(np.where(fine, np.abs(want), 0.0), axis=-1, keepdims=True) + 1e-300
    err = np.abs(np.where(fine, got - want, 0.0))
    bound = rtol * np.abs(np.where(fine, want, 0.0)) + atol * scale
    assert np.all(err <= bound), (np.max(err / bound), got, want)


# ---- the polynomials -----------------------------------------------------------------------


def kind_of(name):
    return name.split("_")[-1]


def reference_polynomial(name, n):
    """P_n as a numpy.polynomial series (U from T' = n U_{n-1}, V = U_n - U_{n-1}, W = U_n +
    U_{n-1}); the zero series for n < 0."""
    kind = kind_of(name)
    if n < 0:
        return NP.Polynomial([0.0])
    if kind in "tuvw":
        def u(k):
            return NP.Chebyshev.basis(k + 1).deriv() / (k + 1) if k >= 0 else NP.Chebyshev([0])
        return {"t": NP.Chebyshev.basis(n), "u": u(n), "v": u(n) - u(n - 1),
                "w": u(n) + u(n - 1)}[kind]
    return {"h": NP.Hermite, "he": NP.HermiteE, "l": NP.Laguerre,
            "p": NP.Legendre}[kind].basis(n)


def reference(name, x, n, m):
    """d^m P_n(x) / dx^m, exact (numpy.polynomial's own evaluation); 2^m (2x - 1) shifted."""
    p = reference_polynomial(name, int(n))
    if name.startswith("shifted"):
        return p.deriv(m)(2 * np.asarray(x) - 1) * 2.0 ** m if m else p(2 * np.asarray(x) - 1)
    return p.deriv(m)(np.asarray(x)) if m else p(np.asarray(x))


def points(name):
    """x where the second derivatives are checked: 0, near 0, ±1, |x| < 1, beyond."""
    if name.startswith("shifted"):
        return np.array([0.0, 1e-3, 0.15, 0.4995, 0.5, 0.8, 0.9995, 1.0, 1.2, -0.3])
    if name in WIDE:
        return np.array([-2.0, -0.5, -1e-3, 0.0, 0.3, 1.0, 1.7, 3.0])
    return np.array([-1.3, -1.0, -0.7, -1e-3, 0.0, 0.3, 0.999, 1.0, 1.3])


def op_of(name):
    return getattr(ta.special, name)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_the_reference_is_torchs_polynomial(name):
    """(the test's own reference is right: its values are torch's)"""
    x = points(name)
    for n in (0, 1, 2, 5, 9):
        want = getattr(TS, name)(torch.tensor(x), n).numpy()
        close(reference(name, x, n, 0)[None], want[None], 1e-11, 1e-12)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_derivatives_to_the_fourth_match_numpy_polynomial(name):
    x = points(name)
    big = 30 if name not in WIDE else 16
    for n in (-2, 0, 1, 2, 3, 5, 8, 13, big):
        got = derivatives(lambda v, n=n: op_of(name)(v, n), x, 4)
        for m in range(1, 5):
            close(got[m][None], reference(name, x, n, m)[None], 1e-10, 1e-12)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_large_n_inside_the_interval(name):
    """|x| < 1 with n past torch's trigonometric switch (the derivatives are the recurrence's)."""
    x = np.array([0.01, 0.35, 0.62, 0.97]) if name.startswith("shifted") else \
        np.array([-0.93, -0.41, 0.05, 0.58, 0.97])
    n = 12 if name in WIDE else 64
    got = derivatives(lambda v: op_of(name)(v, n), x, 3)
    for m in (1, 2, 3):
        close(got[m][None], reference(name, x, n, m)[None], 1e-9, 1e-10)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_gradgradcheck(name):
    x = points(name)[:8].reshape(2, 4)
    n = ta.tensor(np.array([[1.0, 2.0, 12.0, 7.0], [25.0, 3.0, 2.7, -1.0]]))
    if name in WIDE:
        n = ta.tensor(np.array([[1.0, 2.0, 9.0, 7.0], [11.0, 3.0, 2.7, -1.0]]))
    xt = ta.tensor(x, requires_grad=True)
    assert ta.autograd.gradgradcheck(lambda v: op_of(name)(v, n), (xt,))
    assert ta.autograd.gradgradcheck(lambda v: op_of(name)(v, 6), (xt,))


@pytest.mark.parametrize("name", ["chebyshev_polynomial_u", "shifted_chebyshev_polynomial_w",
                                  "hermite_polynomial_he", "laguerre_polynomial_l",
                                  "legendre_polynomial_p"])
def test_polynomial_third_derivative_gradcheck(name):
    """gradgradcheck of the create_graph gradient: the third derivative against differences."""
    xt = ta.tensor(points(name)[:6].reshape(2, 3), requires_grad=True)

    def grad_of(v):
        with ta.enable_grad():  # (gradcheck's differences run under no_grad)
            return ta.autograd.grad(op_of(name)(v, 7).sum(), v, create_graph=True)[0]

    assert ta.autograd.gradgradcheck(grad_of, (xt,))


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_second_derivative_matches_differences_of_the_gradient(name):
    x = points(name)
    x = x[np.abs(x) > 1e-2] if not name.startswith("shifted") else x[x > 1e-2]
    h = 1e-6
    for n in (3, 9):
        def f(v, n=n):
            return op_of(name)(v, n)
        numeric = (plain_grad(f, x + h) - plain_grad(f, x - h)) / (2 * h)
        close(derivatives(f, x, 2)[2][None], numeric[None], 1e-6, 1e-8)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_second_derivative_matches_differences_of_torchs_values(name):
    x = points(name)
    h = 1e-4
    f = getattr(TS, name)
    for n in (4, 9):
        fx = [f(torch.tensor(x + s), n).numpy() for s in (h, 0.0, -h)]
        numeric = (fx[0] - 2 * fx[1] + fx[2]) / (h * h)
        close(derivatives(lambda v, n=n: op_of(name)(v, n), x, 2)[2][None], numeric[None],
              1e-5, 1e-6)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_create_graph_gradient_is_the_plain_one(name):
    x = np.concatenate([points(name), [np.nan, np.inf]])
    n = ta.tensor(np.resize([0.0, 1.0, 2.0, 3.0, 7.0, 12.0, 30.0, -3.0, np.nan, 4.0, 5.0],
                            x.size))
    f = lambda v: op_of(name)(v, n)  # noqa: E731
    np.testing.assert_array_equal(derivatives(f, x, 1)[1], plain_grad(f, x))


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_n_gradient_still_refused_under_create_graph(name):
    x = ta.tensor([0.3, 0.4], requires_grad=True)
    n = ta.tensor([2.0, 3.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match=f"{name}.*n"):
        ta.autograd.grad(op_of(name)(x, n).sum(), x, create_graph=True)
    with pytest.raises(NotImplementedError, match=f"{name}.*n"):
        op_of(name)(x, n).sum().backward(create_graph=True)


def test_polynomial_second_derivative_float32_and_backward_create_graph():
    x = ta.tensor(np.array([0.2, 0.7], dtype=np.float32), requires_grad=True)
    ta.special.legendre_polynomial_p(x, 4).sum().backward(create_graph=True)
    (second,) = ta.autograd.grad(x.grad.sum(), x)
    assert second.dtype == ta.float32
    np.testing.assert_allclose(second.numpy(), reference("legendre_polynomial_p",
                                                         [0.2, 0.7], 4, 2), rtol=1e-5)


def test_polynomial_derivative_op_order_one_is_the_first_order_slope():
    """The derivative op of order 1 is exactly the first-order VJP's slope (n <= 0, ±1, NaN)."""
    x = np.array([-1.0, -0.4, 0.0, 0.5, 1.0, 2.0, -3.0, 0.25])
    n = np.array([3.0, 0.0, -2.0, np.nan, 12.0, 5.0, 7.0, 2.5])
    for name in POLYNOMIALS:
        o = getattr(spp, name)
        kind, shifted = kind_of(name), name.startswith("shifted")
        got = spd.polynomial_derivative(ta.tensor(x), ta.tensor(n), kind=kind, shifted=shifted,
                                        order=1)
        np.testing.assert_array_equal(got.numpy(), plain_grad(lambda v, o=o: o(v, ta.tensor(n)),
                                                               x))


def test_polynomial_derivative_op_refuses_order_zero():
    with pytest.raises(ValueError, match="order"):
        spd.polynomial_derivative(ta.tensor([0.5]), ta.tensor([2.0]), kind="t", order=0)


# ---- the Bessel-type functions --------------------------------------------------------------

GRAD_X = np.array([-7.3, -2.2, -0.6, -1e-3, 0.05, 0.4, 1.3, 1.99, 2.01, 2.5, 3.9, 4.1, 6.0,
                   11.0, 24.5, 25.5, 40.0])


def bessel_points(name):
    x = GRAD_X[GRAD_X > 0] if name in POSITIVE_ONLY else GRAD_X
    return x[x < 20] if name.startswith("modified_bessel_i") else x


def mp_function(name, mpmath):
    return {
        "bessel_j0": lambda t: mpmath.besselj(0, t), "bessel_j1": lambda t: mpmath.besselj(1, t),
        "bessel_y0": lambda t: mpmath.bessely(0, t), "bessel_y1": lambda t: mpmath.bessely(1, t),
        "modified_bessel_i0": lambda t: mpmath.besseli(0, t),
        "modified_bessel_i1": lambda t: mpmath.besseli(1, t),
        "modified_bessel_k0": lambda t: mpmath.besselk(0, t),
        "modified_bessel_k1": lambda t: mpmath.besselk(1, t),
        "scaled_modified_bessel_k0": lambda t: mpmath.exp(t) * mpmath.besselk(0, t),
        "scaled_modified_bessel_k1": lambda t: mpmath.exp(t) * mpmath.besselk(1, t),
        "spherical_bessel_j0": mpmath.sinc, "airy_ai": mpmath.airyai}[name]


def _mp_k_derivative(mpmath, nu, t, m):
    """K_nu^(m)(t) = (-1/2)^m sum_k C(m, k) K_(nu - m + 2k)(t), exactly (K_-v = K_v): mpmath's
    numerical diff of besselk at 40 digits takes seconds a point."""
    return (-0.5) ** m * sum(mpmath.binomial(m, k) * _mp_besselk(abs(nu - m + 2 * k), t,
                                                                  mpmath.mp.dps)
                             for k in range(m + 1))


@functools.cache
def _mp_besselk(nu, t, dps):
    """mpmath's K_nu(t) at dps digits, computed once: the sums above need each K a dozen times
    (orders 1 to 3, scaled and not) and a besselk at 40 digits takes ~25 ms."""
    import mpmath

    with mpmath.workdps(dps):
        return mpmath.besselk(nu, t)


def mp_derivative(name, x, m):
    mpmath = pytest.importorskip("mpmath")
    f = mp_function(name, mpmath)
    with mpmath.workdps(40):
        if "bessel_k" in name:  # (e^t K)^(m) = e^t sum_j C(m, j) K^(j), for the scaled ones
            nu = int(name[-1])
            scaled = name.startswith("scaled")
            return np.array([float(
                mpmath.exp(t) * sum(mpmath.binomial(m, j) * _mp_k_derivative(mpmath, nu, t, j)
                                    for j in range(m + 1)) if scaled
                else _mp_k_derivative(mpmath, nu, t, m))
                for t in (mpmath.mpf(float(v)) for v in x)])
        if name[:-1] in ("bessel_j", "bessel_y", "modified_bessel_i"):  # mpmath's own
            fn = {"bessel_j": mpmath.besselj, "bessel_y": mpmath.bessely,
                  "modified_bessel_i": mpmath.besseli}[name[:-1]]
            # (besseli's is an mpc at x < 0, its imaginary part zero)
            return np.array([float(mpmath.re(fn(int(name[-1]), mpmath.mpf(float(v)),
                                                derivative=m))) for v in x])
        return np.array([float(mpmath.diff(f, mpmath.mpf(float(v)), m)) for v in x])


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_derivatives_to_the_third_match_mpmath(name):
    x = bessel_points(name)
    got = derivatives(op_of(name), x, 3)
    for m in (1, 2, 3):
        want = mp_derivative(name, x, m)
        np.testing.assert_allclose(got[m], want, rtol=1e-9, atol=1e-11,
                                   err_msg=f"{name} order {m}")


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_gradgradcheck(name):
    x = ta.tensor(bessel_points(name)[:8].reshape(2, 4), requires_grad=True)
    assert ta.autograd.gradgradcheck(op_of(name), (x,))
    near = np.array([1e-7, 2e-3, 0.03, 0.3]) * (1 if name in POSITIVE_ONLY else
                                                np.array([1, -1, 1, -1]))
    assert ta.autograd.gradgradcheck(op_of(name), (ta.tensor(near, requires_grad=True),))


@pytest.mark.parametrize("name", ["bessel_j1", "bessel_y1", "modified_bessel_i1",
                                  "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai"])
def test_bessel_third_derivative_gradcheck(name):
    x = ta.tensor(bessel_points(name)[2:8], requires_grad=True)

    def grad_of(v):
        with ta.enable_grad():
            return ta.autograd.grad(op_of(name)(v).sum(), v, create_graph=True)[0]

    assert ta.autograd.gradgradcheck(grad_of, (x,))


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_second_derivative_matches_differences_of_the_gradient(name):
    x = bessel_points(name)
    x = x[np.abs(x) > 1e-2]
    h = 1e-6
    numeric = (plain_grad(op_of(name), x + h) - plain_grad(op_of(name), x - h)) / (2 * h)
    np.testing.assert_allclose(derivatives(op_of(name), x, 2)[2], numeric, rtol=1e-6,
                               atol=1e-8)


def test_bessel_second_derivatives_satisfy_their_equations_on_torchs_values():
    """x² y'' + x y' + (x² - ν²) y = 0 (J, Y), x² y'' + x y' - (x² + ν²) y = 0 (I, K), x y'' +
    2 y' + x y = 0 (spherical j0), y'' = x y (Ai): y from torch, y', y'' by create_graph."""
    x = np.array([0.07, 0.4, 1.3, 1.8, 26.0, 33.0])  # (where torch's J, Y are ~1e-15)
    equations = {"bessel_j0": (1, 0), "bessel_j1": (1, 1), "bessel_y0": (1, 0),
                 "bessel_y1": (1, 1), "modified_bessel_i0": (-1, 0), "modified_bessel_i1": (-1, 1),
                 "modified_bessel_k0": (-1, 0), "modified_bessel_k1": (-1, 1)}
    for name, (sign, nu) in equations.items():
        _, d1, d2 = derivatives(op_of(name), x, 2)
        y = getattr(TS, name)(torch.tensor(x)).numpy()
        want = (-x * d1 - (sign * x * x - nu * nu) * y) / (x * x)
        err = np.abs(d2 - want)
        assert np.all(err <= 1e-10 * np.abs(want) + 1e-13 * np.abs(y / (x * x))), (name, err)
    x = np.array([-9.0, -0.6, 1e-3, 0.4, 1.5, 7.0, 30.0])
    _, d1, d2 = derivatives(ta.special.spherical_bessel_j0, x, 2)
    y = TS.spherical_bessel_j0(torch.tensor(x)).numpy()
    np.testing.assert_allclose(d2, -(2 * d1 + x * y) / x, rtol=1e-10, atol=1e-14)
    x = np.array([-12.0, -1.0, -0.2, 0.0, 0.6, 1.5, 2.5, 6.0])
    _, _, d2 = derivatives(ta.special.airy_ai, x, 2)
    np.testing.assert_allclose(d2, x * TS.airy_ai(torch.tensor(x)).numpy(), rtol=1e-12,
                               atol=1e-15)


def test_bessel_derivatives_at_zero():
    """J0''(0) = -1/2, J1''(0) = 0, J1'''(0) = -3/8, I0''(0) = 1/2, I1'''(0) = 3/8, j0''(0) =
    -1/3, j0''''(0) = 1/5, Ai''(0) = 0, Ai'''(0) = Ai(0)."""
    cases = [("bessel_j0", 2, -0.5), ("bessel_j1", 2, 0.0), ("bessel_j1", 3, -3 / 8),
             ("modified_bessel_i0", 2, 0.5), ("modified_bessel_i1", 3, 3 / 8),
             ("spherical_bessel_j0", 2, -1 / 3), ("spherical_bessel_j0", 3, 0.0),
             ("spherical_bessel_j0", 4, 0.2), ("airy_ai", 2, 0.0),
             ("airy_ai", 3, 0.35502805388781723926)]
    for name, m, want in cases:
        got = derivatives(op_of(name), np.array([0.0]), m)[m]
        np.testing.assert_allclose(got, [want], rtol=1e-13, atol=1e-300, err_msg=name)


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_create_graph_gradient_is_the_plain_one(name):
    x = np.concatenate([bessel_points(name), [0.0, 1e-6, -1e-6, 1e-300, 150.0, -30.0, np.inf,
                                              -np.inf, np.nan]])
    np.testing.assert_array_equal(derivatives(op_of(name), x, 1)[1], plain_grad(op_of(name), x))


def test_bessel_second_derivative_float32():
    x = ta.tensor(np.array([0.5, 3.0], dtype=np.float32), requires_grad=True)
    (g,) = ta.autograd.grad(ta.special.bessel_j0(x).sum(), x, create_graph=True)
    (second,) = ta.autograd.grad(g.sum(), x)
    assert second.dtype == ta.float32
    np.testing.assert_allclose(second.numpy(), mp_derivative("bessel_j0", [0.5, 3.0], 2),
                               rtol=1e-5)


@pytest.mark.parametrize("order", range(1, 9))
def test_spherical_j0_derivative_op_matches_mpmath(order):
    """Series near 0, the closed form beyond (order/2): both sides of the switch."""
    x = np.concatenate([np.linspace(-12, 12, 61), [0.0, 1e-4, 0.999, 1.0, 1.001, order / 2 -
                                                     1e-9, order / 2, order / 2 + 1e-9, 60.0]])
    got = spd.spherical_bessel_j0_derivative(ta.tensor(x), order=order).numpy()
    np.testing.assert_allclose(got, mp_derivative("spherical_bessel_j0", x, order),
                               rtol=1e-11, atol=1e-14)


def test_airy_prime_op_matches_mpmath():
    x = np.array([-40.0, -10.1, -9.9, -3.0, 0.0, 0.5, 2.08, 2.1, 6.0, 30.0])
    np.testing.assert_allclose(spd.airy_ai_prime(ta.tensor(x)).numpy(),
                               mp_derivative("airy_ai", x, 1), rtol=1e-11, atol=1e-300)


# ---- every sample of the family's ops and of the derivative ops -----------------------------


def _sample_cases():
    for o in spp.OPS + spd.OPS:
        for k in range(len(o.samples)):
            yield pytest.param(o, k, id=f"{o.name}-{k}")


@pytest.mark.parametrize(("o", "k"), list(_sample_cases()))
def test_every_sample_passes_gradcheck_and_gradgradcheck(o, k):
    spec, params = o.samples[k]
    inputs = materialize(spec, np.random.default_rng(k), lambda a, grad: ta.tensor(
        np.asarray(a, dtype=np.float64) if grad else a, requires_grad=grad))
    where = [i for i, v in enumerate(inputs) if isinstance(v, ta.Tensor) and v.requires_grad]

    def fn(*leaves):
        xs = list(inputs)
        for i, v in zip(where, leaves, strict=True):
            xs[i] = v
        return o(*xs, **params)

    leaves = tuple(inputs[i] for i in where)
    assert ta.autograd.gradcheck(fn, leaves)
    assert ta.autograd.gradgradcheck(fn, leaves)
    # (gradgradcheck differences the graph VJP's own gradient: it must be the array VJP's)
    out = fn(*leaves)
    g = ta.tensor(np.random.default_rng(9).standard_normal(out.shape))
    plain = ta.autograd.grad(out, leaves, g, retain_graph=True)
    graph = ta.autograd.grad(out, leaves, g, create_graph=True)
    for a, b in zip(graph, plain, strict=True):
        np.testing.assert_array_equal(a.detach().numpy(), b.numpy())
