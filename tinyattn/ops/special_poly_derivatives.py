"""The derivative ops behind ops/special_poly.py's gradients of gradients (internal: not
ta.special names; higher_order/special_poly.py calls them).

* polynomial_derivative(x, n, kind, shifted, order): d^order P_n(x) / dx^order of the kind's
  polynomial (special_poly's kinds t, u, v, w, h, he, l, p; of 2x - 1 times 2^order where
  shifted), by the three-term recurrence differentiated order times in float64; order 1 is
  exactly the first-order VJP's slope (0 for n <= 0 and NaN n, exact at ±1). Its x-gradient is
  the same op of order + 1; the n-gradient is refused by name, as the public ops'.
* spherical_bessel_j0_derivative(x, order): d^order (sin x / x) / dx^order: the Maclaurin
  series below |x| = max(1, order / 2), Leibniz's rule on sin x and 1/x above (order 1 is the
  first-order VJP's slope); 0 at ±inf. Its gradient is the same op of order + 1.
* airy_ai_prime(x): Ai'(x) (special_poly's airy_f64), whose gradient is x Ai(x) (Airy's
  equation Ai'' = x Ai).
"""

import math

from .op import op, quiet
from .samples import case, const, vals, within
from .special import _back, _wide
from .special_more import refused
from .special_poly import _spherical_j0_slope, airy_f64
from .special_poly import polynomial_derivative as _derivative

# ---- the polynomials' derivatives --------------------------------------------------------------


def _check_order(order):
    if not isinstance(order, int) or isinstance(order, bool) or order < 1:
        raise ValueError(f"polynomial_derivative: order must be an int >= 1, got {order!r}")


@op("polynomial_derivative", "gx = g * polynomial_derivative(x, n, order + 1), gn = (none: "
    "backward raises)", grads=("gx", "gn"), promote="float", broadcasts=True,
    saves={0: 0, 1: 1},
    samples=[case(within((2, 3), -0.95, 0.95), const([[0.0, 3.0, 9.0]]), kind="t", order=1),
             case(vals([-1.0, -0.3, 0.4, 1.0, 2.0]), const([1, 4, 7, 12, -1]), kind="p",
                  order=2),
             case(within((), 0.1, 0.9), 5, kind="u", shifted=True, order=3),
             case(vals([-1.5, 0.0, 0.7, 2.0]), const([3.0, 6.0, 2.7, 10.0]), kind="h", order=2),
             case(vals([0.0, 0.5, 1.0, 1.0]), const([2.0, 5.0, 8.0, 3.0]), kind="w",
                  shifted=True, order=2),
             case(vals([-0.8, 0.2, 1.0]), const([4.0, 9.0, 6.0]), kind="v", order=4),
             case(within((3,), 0.0, 4.0), 6, kind="l", order=2),
             case(vals([-2.0, 0.3, 1.1]), 7, kind="he", order=3)])
def polynomial_derivative(be, x, n, kind="t", shifted=False, order=1, refuse_grad=False):
    """out = d^order P_n(x) / dx^order, P_n the orthogonal polynomial of `kind`"""
    _check_order(order)
    out = _derivative(be, kind, shifted, _wide(x), _wide(be.xp.asarray(n)), order)
    return _back(out, x), (x, n)


@polynomial_derivative.defvjp
def polynomial_derivative_vjp(be, g, saved, kind="t", shifted=False, order=1,
                              refuse_grad=False):
    if refuse_grad:
        raise refused("polynomial_derivative", "n (the degree)")
    x, n = saved
    slope = _derivative(be, kind, shifted, _wide(x), _wide(be.xp.asarray(n)), order + 1)
    return g * _back(slope, g), None


# ---- the spherical Bessel function's derivatives ---------------------------------------------


def _spherical_series(xp, a, order):
    """Σ_{2k >= order} (-1)^k (2k)! / ((2k - order)! (2k + 1)!) a^(2k - order): the series of
    sin a / a differentiated order times (|a| <= order / 2 or 1)."""
    first = (order + 1) // 2
    total = xp.zeros_like(a)
    for k in range(first, first + 14 + 2 * order):
        coef = math.factorial(2 * k) / (math.factorial(2 * k - order) *
                                         math.factorial(2 * k + 1))
        total = total + (-1) ** k * coef * a ** (2 * k - order)
    return total


def _spherical_leibniz(xp, x, order):
    """Σ_j C(order, j) sin^(j)(x) (1/x)^(order - j), 1/x's derivatives (-1)^i i! / x^(i+1)."""
    s, c = xp.sin(x), xp.cos(x)
    cycle = (s, c, -s, -c)
    total = xp.zeros_like(x)
    for j in range(order + 1):
        i = order - j
        total = total + (math.comb(order, j) * (-1) ** i * math.factorial(i)) * cycle[j % 4] \
            / x ** (i + 1)
    return total


def spherical_j0_derivative_f64(be, x, order):
    """d^order (sin x / x) / dx^order of float64 x: order 1 the first-order VJP's slope; else
    the series below |x| = max(1, order / 2), Leibniz's rule above; 0 at ±inf."""
    if order == 1:
        return _spherical_j0_slope(be, x)
    xp = be.xp
    near = xp.abs(x) < max(1.0, order / 2)
    with quiet():
        out = xp.where(near, _spherical_series(xp, xp.where(near, x, 0.0), order),
                       _spherical_leibniz(xp, xp.where(near, 1.0, x), order))
    return xp.where(xp.isinf(x), 0.0, out)


def _check_spherical_order(order):
    if not isinstance(order, int) or isinstance(order, bool) or order < 1:
        raise ValueError(f"spherical_bessel_j0_derivative: order must be an int >= 1, got "
                         f"{order!r}")


@op("spherical_bessel_j0_derivative", "gx = g * spherical_bessel_j0_derivative(x, order + 1)",
    promote="float", saves={0: 0},
    samples=[case((2, 3), order=1), case(vals([-4.0, -1e-3, 0.0, 0.9, 1.1, 2.6, 40.0]), order=2),
             case(vals([-3.0, -0.2, 0.0, 2.4, 2.6, 9.0]), order=5), case((), order=3)])
def spherical_bessel_j0_derivative(be, x, order=1):
    """out = d^order (sin x / x) / dx^order"""
    _check_spherical_order(order)
    return _back(spherical_j0_derivative_f64(be, _wide(x), order), x), (x,)


@spherical_bessel_j0_derivative.defvjp
def spherical_bessel_j0_derivative_vjp(be, g, saved, order=1):
    (x,) = saved
    return (g * _back(spherical_j0_derivative_f64(be, _wide(x), order + 1), g),)


# ---- Airy's Ai' --------------------------------------------------------------------------------


@op("airy_ai_prime", "gx = g * x * airy_ai(x)", promote="float", saves={0: 0},
    samples=[case((2, 3)), case(vals([-14.0, -9.9, -3.0, 0.0, 2.0, 2.2, 6.0])), case(())])
def airy_ai_prime(be, x):
    """out = Ai'(x), the derivative of Airy's Ai"""
    return _back(airy_f64(be, _wide(x))[1], x), (x,)


@airy_ai_prime.defvjp
def airy_ai_prime_vjp(be, g, saved):
    (x,) = saved
    w = _wide(x)
    return (g * _back(w * airy_f64(be, w)[0], g),)


OPS = (polynomial_derivative, spherical_bessel_j0_derivative, airy_ai_prime)
