"""The graph VJPs of ops/special_poly.py (ta.special's orthogonal polynomials and Bessel-type
functions) and of the derivative ops behind them (ops/special_poly_derivatives.py), so that
their x-gradients are differentiable to any order.

The polynomials: g * polynomial_derivative(x, n, order=1), whose own graph VJP is g * the same
op of order + 1; the n-gradient is refused by name as the first-order VJPs refuse it. The
Bessel functions, in their own family: j0' = -j1, j1' = j0 - j1/x, y0' = -y1, y1' = y0 - y1/x,
i0' = i1, i1' = i0 - i1/x, k0' = -k1, k1' = -k0 - k1/x, (e^x K0)' = e^x K0 - e^x K1, (e^x K1)' =
e^x K1 - e^x K0 - e^x K1 / x, with the array VJPs' edges (j1', i1' their series 1/2 ∓ 3x²/16
where |x| < 1e-5; y1' inf, the K slopes -inf at x = 0; the other branch taken at a safe x there,
so its derivatives stay finite); spherical_bessel_j0' and airy_ai' by the derivative ops
spherical_bessel_j0_derivative (order + 1 again) and airy_ai_prime (Ai'' = x Ai)."""

import math

from ..ops import special_poly as spp
from ..ops import special_poly_derivatives as spd
from ..ops.special import _wide
from ..ops.special_more import refused
from .elementwise import _pick

# ---- the polynomials ------------------------------------------------------------------------


def _polynomial(name, kind, shifted):
    def vjp(c):
        if c.params.get("refuse_grad"):
            raise refused(name, "n (the degree)")
        if not c.need(0):
            return None, None
        slope = spd.polynomial_derivative(c.input(0), c.input(1), kind=kind, shifted=shifted,
                                          order=1)
        return c.g * slope, None
    return vjp


def _polynomial_derivative(c):
    if c.params.get("refuse_grad"):
        raise refused("polynomial_derivative", "n (the degree)")
    if not c.need(0):
        return None, None
    params = dict(c.params, order=c.params.get("order", 1) + 1)
    return c.g * spd.polynomial_derivative(c.input(0), c.input(1), **params), None


# ---- the Bessel functions -------------------------------------------------------------------


def _j0(c):
    return (-c.g * spp.bessel_j1(c.input(0)),)


def _y0(c):
    return (-c.g * spp.bessel_y1(c.input(0)),)


def _i0(c):
    return (c.g * spp.modified_bessel_i1(c.input(0)),)


def _over_x(value, fn, sign):
    """(value(x) - fn(x)/x)', the series 1/2 + sign 3x²/16 where |x| < 1e-5 (j1, i1)."""
    def vjp(c):
        tiny = abs(_wide(c.saved[0])) < 1e-5
        x = c.input(0)
        safe = _pick(c, tiny, 1.0, x)
        series = 0.5 + 3 * x * x / 16 if sign > 0 else 0.5 - 3 * x * x / 16
        return (c.g * _pick(c, tiny, series, value(x) - fn(safe) / safe),)
    return vjp


def _y1(c):
    zero = c.saved[0] == 0
    safe = _pick(c, zero, 1.0, c.input(0))
    return (c.g * _pick(c, zero, math.inf, spp.bessel_y0(safe) - spp.bessel_y1(safe) / safe),)


def _k(order, scaled):
    """K0' = -K1, K1' = -K0 - K1/x, plus e^x K itself where scaled; -inf at 0."""
    k0_op, k1_op = ((spp.scaled_modified_bessel_k0, spp.scaled_modified_bessel_k1) if scaled
                    else (spp.modified_bessel_k0, spp.modified_bessel_k1))

    def vjp(c):
        zero = c.saved[0] == 0
        x = _pick(c, zero, 1.0, c.input(0))
        k1 = k1_op(x)
        if order == 0:
            slope = -k1 + k0_op(x) if scaled else -k1
        else:
            slope = -k0_op(x) - k1 / x
            slope = slope + k1 if scaled else slope
        return (c.g * _pick(c, zero, -math.inf, slope),)
    return vjp


def _spherical_j0(c):
    return (c.g * spd.spherical_bessel_j0_derivative(c.input(0), order=1),)


def _spherical_j0_derivative(c):
    order = c.params.get("order", 1) + 1
    return (c.g * spd.spherical_bessel_j0_derivative(c.input(0), order=order),)


def _airy_ai(c):
    return (c.g * spd.airy_ai_prime(c.input(0)),)


def _airy_ai_prime(c):
    x = c.input(0)
    return (c.g * (x * spp.airy_ai(x)),)


VJPS = {o.name: _polynomial(o.name, o.name.rsplit("_", 1)[1], o.name.startswith("shifted"))
        for o in spp.POLYNOMIAL_OPS}
VJPS.update({
    "polynomial_derivative": _polynomial_derivative,
    "bessel_j0": _j0, "bessel_j1": _over_x(spp.bessel_j0, spp.bessel_j1, -1),
    "bessel_y0": _y0, "bessel_y1": _y1,
    "modified_bessel_i0": _i0,
    "modified_bessel_i1": _over_x(spp.modified_bessel_i0, spp.modified_bessel_i1, 1),
    "modified_bessel_k0": _k(0, False), "modified_bessel_k1": _k(1, False),
    "scaled_modified_bessel_k0": _k(0, True), "scaled_modified_bessel_k1": _k(1, True),
    "spherical_bessel_j0": _spherical_j0,
    "spherical_bessel_j0_derivative": _spherical_j0_derivative,
    "airy_ai": _airy_ai, "airy_ai_prime": _airy_ai_prime,
})
