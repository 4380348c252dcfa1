"""Special functions and order statistics: erfc, erfinv, lgamma, digamma, quantile (and
nanquantile), nanmedian; and the array functions of torch's value-only routines (isin,
bincount, histc, unique_consecutive, unique over a dim, heaviside, gcd, lcm), which Tensor
methods run with no gradient.

NumPy has no erfinv, lgamma or digamma (and scipy is not a dependency), so they are written
here in the backend's `xp`, vectorised, in float64 whatever the input (float16 and float32
are rounded back, as torch computes them in a wider type), each to ~1e-15 relative in
float64 (checked against mpmath and torch): lgamma by the Taylor series of log Γ about 1 and 2,
the recurrence and Stirling's series (reflection below -1/2); digamma by torch's own algorithm
(recurrence up to 10, then the asymptotic series; reflection below 0), so as inexact as torch's
next to its root 1.4616...; its gradient (trigamma) exact where torch's is ~5e-10 off; erfc
by 1 - erf below 1 and Laplace's continued fraction above, with e^(-x²) split so that x² is
exact; erfinv by Giles' approximation refined by Newton steps on erf (|x| < 1/2) or on
log erfc (the tails, where 1 - |x| is exact). Each runs on CuPy as it is (cupyx.scipy.special
is not used). Every forward sits directly above its VJP.
"""

import math

import numpy as np

from ..errors import DTypeError, ShapeError
from .op import dim1, dims, op, quiet
from .samples import case, vals, within

SQRT_PI = math.sqrt(math.pi)
TWO_OVER_SQRT_PI = 2 / SQRT_PI
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
EULER = 0.5772156649015329


def _zeta(s):
    """ζ(s) for an integer s >= 2 in float64 (Euler-Maclaurin from n = 10)."""
    n = 10
    total = math.fsum(k ** -s for k in range(1, n))
    total += n ** (1 - s) / (s - 1) + 0.5 * n ** -s
    rising, power = s, n ** (-s - 1)
    for j, b in enumerate((1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730), start=1):
        total += b / math.factorial(2 * j) * rising * power
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        power /= n * n
    return total


# log Γ(1 + t) = -γ t + Σ_{k>=2} (-1)^k ζ(k) t^k / k, for |t| <= 1/2 (60 terms: < 1e-19)
_LGAMMA1 = [-EULER] + [(-1) ** k * _zeta(k) / k for k in range(2, 62)]
# Stirling: log Γ(z) = (z - 1/2) log z - z + log √(2π) + Σ B_2k / (2k (2k - 1) z^(2k-1))
_STIRLING = [1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156,
             -3617 / 122400, 43867 / 244188]
# digamma's asymptotic series (torch's coefficients, in its order) and ψ(10)
_PSI_A = [8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
          -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
          8.33333333333333333333E-2]
PSI_10 = 2.25175258906672110764
# trigamma's: ψ'(z) = 1/z + 1/(2z²) + Σ B_2k / z^(2k+1)
_TRIGAMMA = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510]


def _poly(t, coefs):
    """coefs[0] + coefs[1] t + coefs[2] t² + ... (Horner)."""
    out = 0.0
    for c in reversed(coefs):
        out = out * t + c
    return out


def _wide(x):
    """x in float64 (the special functions' working precision)."""
    return x.astype(np.float64, copy=False)


def _back(out, like):
    with quiet():  # (past float32's range: inf, as torch's float32 lgamma(3e38), silently)
        return out.astype(like.dtype, copy=False)


def _abs_sinpi(xp, x):
    """|sin(π x)|, exactly 0 at the integers (x - round(x) is exact)."""
    return xp.abs(xp.sin(math.pi * (x - xp.round(x))))


# ---- the error function's complement and inverse --------------------------------------------


def _exp_minus_square(xp, x):
    """e^(-x²) with x² exact: x = hi + lo, hi with 24 bits, so hi² is exact in float64."""
    hi = x.astype(np.float32).astype(np.float64)
    lo = x - hi
    return xp.exp(-hi * hi) * xp.exp(-lo * (2 * hi + lo))


LEVELS = 200  # the continued fraction's depth: converged to 1e-16 from x = 1 on


def erfc_f64(be, x):
    """erfc of float64 x to ~1e-15 relative: 1 - erf below 1, Laplace's continued fraction
    e^(-x²)/√π / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))) above; 2 - erfc(-x) below 0."""
    xp = be.xp
    a = xp.abs(x)
    near = a < 1
    small = 1 - be.erf(xp.where(near, x, 0))
    z = xp.where(near | xp.isnan(a), 1, xp.minimum(a, 30.0))
    frac = z
    for k in range(LEVELS, 0, -1):
        frac = z + (k / 2) / frac
    with quiet():
        tail = _exp_minus_square(xp, z) / (SQRT_PI * frac)
    tail = xp.where(a > 27.3, 0.0, tail)  # (erfc underflows past 27.3)
    tail = xp.where(x < 0, 2 - tail, tail)
    return xp.where(near, small, xp.where(xp.isnan(x), xp.nan, tail))


@op("erfc", "gx = -g * 2/√π * e^(-x²)", promote="float", saves={0: 0},
    samples=[case(vals([-3.0, -0.4, 0.0, 0.3, 2.0, 8.0])), case((2, 3)), case(())])
def erfc(be, x):
    """out = 1 - erf x, without cancelling for large x"""
    return _back(erfc_f64(be, _wide(x)), x), (x,)


@erfc.defvjp
def erfc_vjp(be, g, saved):
    (x,) = saved
    with quiet():  # (x² past float32's range: e^(-inf) = 0, without NumPy's warning)
        return (-g * TWO_OVER_SQRT_PI * be.xp.exp(-x * x),)


def _erfinv_guess(xp, x):
    """Giles' single-precision erfinv ("Approximating the erfinv function", 2010)."""
    with quiet():
        w = -xp.log((1 - x) * (1 + x))
    central = w < 5
    u = xp.where(central, w - 2.5, xp.sqrt(xp.where(central, 5, w)) - 3)
    p_c = _poly(u, [1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087,
                    -4.39150654e-06, -3.5233877e-06, 3.43273939e-07, 2.81022636e-08])
    p_t = _poly(u, [2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773,
                    -0.00367342844, 0.00134934322, 0.000100950558, -0.000200214257])
    return xp.where(central, p_c, p_t) * x


def erfinv_f64(be, x):
    """erfinv of float64 x: Giles' guess, then Newton steps on erf(y) = x for |x| < 1/2 and on
    log erfc(|y|) = log(1 - |x|) (1 - |x| exact there) in the tails; ±inf at ±1, NaN beyond."""
    xp = be.xp
    a = xp.abs(x)
    inside = a < 1
    u = xp.where(inside, a, 0.5)
    y = _erfinv_guess(xp, u)
    central = u < 0.5
    with quiet():
        log_c = xp.log(1 - u)
        for _ in range(5):  # (the tails: Newton on log erfc, nearly a parabola in y)
            slope = TWO_OVER_SQRT_PI * xp.exp(-y * y)
            c = erfc_f64(be, y)
            y = xp.where(central, y - (be.erf(y) - u) / slope, y + (xp.log(c) - log_c) * c / slope)
    out = xp.where(inside, xp.copysign(y, x), xp.where(a == 1, xp.copysign(xp.inf, x), xp.nan))
    return xp.where(x == 0, x, out)  # (keeps -0.0)


@op("erfinv", "gx = g * √π/2 * e^(out²)", promote="float", saves_out=0,
    samples=[case(within((2, 3), -0.95, 0.95)), case(vals([-0.999, -0.3, 0.0, 0.6, 0.99])),
             case(within((), -0.5, 0.5))])
def erfinv(be, x):
    """out = the y with erf y = x (x in [-1, 1])"""
    out = _back(erfinv_f64(be, _wide(x)), x)
    return out, (out,)


@erfinv.defvjp
def erfinv_vjp(be, g, saved):
    (out,) = saved
    with quiet():  # (inf at ±1, as torch)
        return (g * (SQRT_PI / 2) * be.xp.exp(out * out),)


# ---- the gamma function's logarithm and its derivatives ---------------------------------------


def _lgamma_from_half(xp, z):
    """log Γ(z) for z >= 1/2: Taylor about 1 on [1/2, 3/2), about 2 on [3/2, 5/2), the
    recurrence down into [3/2, 5/2) below 10, Stirling from 10."""
    near1 = z < 1.5
    t = z - xp.where(near1, 1.0, 2.0)
    t = xp.where(z < 2.5, t, 0.0)
    series = t * _poly(t, _LGAMMA1)  # log Γ(1 + t)
    series = xp.where(near1, series, series + xp.log1p(t))  # log Γ(2 + t): + log(1 + t)
    mid = (z >= 2.5) & (z < 10)
    m = xp.where(mid, z, 2.0)
    prod = xp.ones_like(m)
    for _ in range(8):  # z - 1, z - 2, ... down to [3/2, 5/2)
        step = m >= 2.5
        m = xp.where(step, m - 1, m)
        prod = xp.where(step, prod * m, prod)
    s = m - 2.0
    down = s * _poly(s, _LGAMMA1) + xp.log1p(s) + xp.log(prod)
    big = xp.where(z >= 10, z, 10.0)
    inv = 1 / big
    with quiet():
        stirling = (big - 0.5) * (xp.log(big) - 1) - 0.5 + HALF_LOG_2PI + \
            inv * _poly(inv * inv, _STIRLING)
    stirling = xp.where(big == xp.inf, xp.inf, stirling)
    return xp.where(z < 2.5, series, xp.where(mid, down, stirling))


def lgamma_f64(be, x):
    """log |Γ(x)| of float64 x: inf at 0 and the negative integers (and ±inf); reflection
    log |Γ(x)| = log π - log |sin πx| - log Γ(1 - x) below -1/2, log Γ(1 + x) - log |x| for
    0 < |x| < 1/2."""
    xp = be.xp
    tiny = (xp.abs(x) < 0.5) & (x != 0)
    neg = (x <= -0.5) | (x == 0)
    z = xp.where(neg, 1 - x, xp.where(tiny, x + 1, x))
    z = xp.where(xp.isnan(z), 1.0, z)
    lg = _lgamma_from_half(xp, z)
    with quiet():
        refl = math.log(math.pi) - xp.log(_abs_sinpi(xp, xp.where(xp.isinf(x), 0, x))) - lg
        out = xp.where(neg, refl, xp.where(tiny, lg - xp.log(xp.abs(xp.where(tiny, x, 1))), lg))
    out = xp.where(xp.isinf(x), xp.inf, out)
    return xp.where(xp.isnan(x), xp.nan, out)


def digamma_f64(be, x):
    """ψ(x) of float64 x by torch's algorithm: ψ(0) = -inf (inf for -0.0), NaN at the negative
    integers, ψ(x) = ψ(1 - x) - π / tan(π frac(x)) below 0; then ψ(x) = ψ(x + 1) - 1/x up to 10
    and the asymptotic series log x - 1/(2x) - Σ."""
    xp = be.xp
    neg = x < 0
    whole = x == xp.trunc(x)
    with quiet():  # (-inf - trunc(-inf) is NaN, not used)
        frac = xp.where(neg & ~whole, x - xp.trunc(x), 0.5)
        reflection = xp.where(neg, -math.pi / xp.tan(math.pi * frac), 0.0)
    z = xp.where(neg, 1 - x, x)
    z = xp.where((z == 0) | xp.isnan(z), 1.0, z)
    result = xp.zeros_like(z)
    for _ in range(10):
        low = z < 10
        result = result - xp.where(low, 1 / z, 0.0)
        z = xp.where(low, z + 1, z)
    with quiet():
        zz = 1 / (z * z)
        y = xp.where(z < 1e17, zz * _poly(zz, _PSI_A[::-1]), 0.0)
        out = xp.where(z == 10, result + PSI_10, result + xp.log(z) - 0.5 / z - y)
    out = out + reflection
    out = xp.where(neg & whole, xp.nan, out)
    out = xp.where(x == 0, xp.copysign(xp.inf, -x), out)
    return xp.where(xp.isnan(x), xp.nan, out)


def trigamma_f64(be, x):
    """ψ'(x) of float64 x (digamma's derivative): ψ'(x) = π²/sin²(πx) - ψ'(1 - x) below 1/2,
    the recurrence up to 10, then the asymptotic series; inf at 0 and the negative integers."""
    xp = be.xp
    refl = x < 0.5
    with quiet():
        s = _abs_sinpi(xp, xp.where(xp.isinf(x), 0.5, x))
        poles = xp.where(refl, math.pi * math.pi / (s * s), 0.0)
    z = xp.where(refl, 1 - x, x)
    z = xp.where(xp.isnan(z), 1.0, z)
    total = xp.zeros_like(z)
    with quiet():  # (z * z past 1.3e154 overflows where it is not used: no warning, as torch)
        for _ in range(11):
            low = z < 10
            total = total + xp.where(low, 1 / (z * z), 0.0)
            z = xp.where(low, z + 1, z)
        inv = 1 / z
        tail = inv + 0.5 * inv * inv + inv * inv * inv * _poly(inv * inv, _TRIGAMMA)
        out = xp.where(refl, poles - (total + tail), total + tail)
    out = xp.where(refl & (s == 0), xp.inf, out)
    out = xp.where(x == -xp.inf, xp.nan, out)
    return xp.where(xp.isnan(x), xp.nan, out)


_GAMMA_POINTS = [0.3, 1.0, 1.7, 2.0, 4.5, 12.0]  # (samples at lgamma's roots 1 and 2 too)


@op("lgamma", "gx = g * digamma(x)", promote="float", saves={0: 0},
    samples=[case(vals(_GAMMA_POINTS)),
             case(vals([-2.5, -0.7, -1.3])), case((2, 3)), case(())])
def lgamma(be, x):
    """out = log |Γ(x)|"""
    return _back(lgamma_f64(be, _wide(x)), x), (x,)


@lgamma.defvjp
def lgamma_vjp(be, g, saved):
    (x,) = saved
    return (g * _back(digamma_f64(be, _wide(x)), x),)


@op("digamma", "gx = g * trigamma(x)", promote="float", saves={0: 0},
    samples=[case(vals(_GAMMA_POINTS)), case(vals([-2.5, -0.7, -1.3])), case((2, 3)), case(())])
def digamma(be, x):
    """out = ψ(x) = d/dx log Γ(x)"""
    return _back(digamma_f64(be, _wide(x)), x), (x,)


@digamma.defvjp
def digamma_vjp(be, g, saved):
    (x,) = saved
    return (g * _back(trigamma_f64(be, _wide(x)), x),)


# ---- order statistics: quantile, nanquantile, nanmedian ------------------------------------------

INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _ranks(xp, s, q, ignore_nan):
    """The fractional rank of each q in each sorted row of s (..., n), (..., Q) in s's dtype,
    as torch computes it: q (n - 1), or n - 1 in a row with a NaN (its quantile is NaN);
    ignoring NaNs, q (count - 1), 0 in a row of NaNs only."""
    n = s.shape[-1]
    qs = xp.asarray(q, dtype=s.dtype).reshape(-1)
    nan = xp.isnan(s)
    if ignore_nan:
        count = (~nan).sum(axis=-1, keepdims=True) - 1
        ranks = qs * count.astype(s.dtype)
        return xp.where(ranks < 0, 0, ranks)
    ranks = xp.broadcast_to(qs * s.dtype.type(n - 1), s.shape[:-1] + qs.shape)
    return xp.where(nan.any(axis=-1, keepdims=True), n - 1, ranks).astype(s.dtype, copy=False)


def _neighbours(xp, ranks, interpolation):
    """(below, above, weight of above) of each rank; weight None where only below counts."""
    if interpolation == "lower":
        ranks = xp.floor(ranks)
    elif interpolation == "higher":
        ranks = xp.ceil(ranks)
    elif interpolation == "nearest":
        ranks = xp.round(ranks)  # (halves to even, as torch's round)
    below = ranks.astype(np.int64)
    if interpolation not in ("linear", "midpoint"):
        return below, below, None
    w = xp.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - xp.floor(ranks)
    return below, xp.ceil(ranks).astype(np.int64), w


def _rows_last(xp, x, dim, name):
    """(x with the reduced dim last, or flattened for dim None (and a 0-d x), its axis)."""
    if dim is None or x.ndim == 0:
        if dim is not None:
            dims(dim, 0, name)  # (a 0-d tensor has dim 0 and -1, as torch's)
        return x.reshape(-1), None
    axis = dim1(dim, x.ndim, name)
    return xp.moveaxis(x, axis, -1), axis


def _q_first(xp, out, shape, axis, keepdim, q):
    """quantile's out (lead..., Q) in torch's layout: q's dim first (none for a number q),
    then the input's dims without the reduced one (kept as 1, with keepdim)."""
    if keepdim:
        out = out.reshape((1,) * len(shape) + out.shape[-1:]) if axis is None else \
            xp.expand_dims(out, axis)
    out = xp.moveaxis(out, -1, 0)
    return out[0] if isinstance(q, float) else out


@op("quantile", "gx = g * (1 - w) at the entry below the rank and g * w at the one above (w: "
    "the weight of the one above; at their places before the sort)",
    samples=[case((2, 5), q=0.3, dim=1), case((4, 3), q=(0.1, 0.5, 0.9), dim=0, keepdim=True),
             case((3, 4), q=0.6, interpolation="lower"), case((3, 4), q=0.6, dim=-1,
                                                              interpolation="higher"),
             case((3, 4), q=0.45, dim=0, interpolation="nearest"),
             case((2, 4), q=(0.2, 0.7), dim=1, interpolation="midpoint"), case((), q=0.5),
             case((2, 3), q=(0.25, 0.75), keepdim=True),
             case(vals([[1.0, np.nan, 3.0, 2.0], [0.5, -1.0, 4.0, 2.5]]), q=(0.4, 0.9), dim=1,
                  ignore_nan=True)])
def quantile(be, x, q, dim=None, keepdim=False, interpolation="linear", ignore_nan=False):
    """out = the q-th quantile along dim (all entries for None): the sorted entries at rank
    q (n - 1), interpolated; q a number or a tuple of them (then out's first dim); a row with
    a NaN gives NaN, or with ignore_nan (nanquantile) counts only the others"""
    xp = be.xp
    a, axis = _rows_last(xp, x, dim, "quantile")
    order = xp.argsort(a, axis=-1, kind="stable")  # (NaNs last, as torch sorts them)
    s = xp.take_along_axis(a, order, axis=-1)
    below, above, w = _neighbours(xp, _ranks(xp, s, q, ignore_nan), interpolation)
    out = xp.take_along_axis(s, below, axis=-1)
    if w is not None:
        end = xp.take_along_axis(s, above, axis=-1)
        with quiet():  # torch's lerp, exact at both ends
            out = xp.where(w < 0.5, out + w * (end - out), end - (end - out) * (1 - w))
    return _q_first(xp, out, x.shape, axis, keepdim, q), (order, below, above, w, x.shape, axis)


@quantile.defvjp
def quantile_vjp(be, g, saved, q, dim=None, keepdim=False, interpolation="linear",
                 ignore_nan=False):
    order, below, above, w, shape, axis = saved
    xp = be.xp
    g = g[None] if isinstance(q, float) else g
    g = xp.moveaxis(g, 0, -1).reshape(below.shape)  # (lead..., Q), the kept 1s dropped
    n = order.shape[-1]
    rows = order.size // max(n, 1)
    at = xp.arange(rows)[:, None]
    gs = xp.zeros((rows, n), dtype=g.dtype)
    g2 = g.reshape(rows, -1)
    if w is None:
        be.scatter_add(gs, (at, below.reshape(rows, -1)), g2)
    else:
        w2 = w.reshape(rows, -1).astype(g.dtype, copy=False)
        be.scatter_add(gs, (at, below.reshape(rows, -1)), g2 * (1 - w2))
        be.scatter_add(gs, (at, above.reshape(rows, -1)), g2 * w2)
    gx = xp.zeros_like(gs)
    gx[at, order.reshape(rows, n)] = gs  # back to the places before the sort
    gx = gx.reshape(order.shape)
    return (gx.reshape(shape) if axis is None else xp.moveaxis(gx, -1, axis),)


def nanmedian_index(a, axis, backend):
    """The index of the lower median of the non-NaN entries along axis (dim kept, int64): the
    ((k + 1) // 2)-th of the k non-NaN entries in stable order (NaNs sort last), as torch's
    nanmedian; where all are NaN, the first (torch's index there is any of them: its
    nth_element's pick, 2 of 4 NaNs, 0 of 3)."""
    xp = backend.xp
    order = xp.argsort(a, axis=axis, kind="stable")
    count = (~xp.isnan(a)).sum(axis=axis, keepdims=True) if a.dtype.kind == "f" else \
        xp.full((1,) * a.ndim, a.shape[axis])
    k = xp.maximum((count - 1) // 2, 0)
    return xp.take_along_axis(order, k.astype(order.dtype), axis=axis).astype(np.int64)


@op("nanmedian", "gx = g / k at the k entries equal to the median of the entries that are not "
    "NaN (the NaNs, when every entry is NaN)",
    samples=[case((2, 3)), case(vals([1.0, np.nan, 3.0, 2.0, np.nan])), case((4,)), case(())])
def nanmedian(be, x):
    """out = the lower median of the entries that are not NaN (NaN if there is none)"""
    xp = be.xp
    flat = x.reshape(-1)
    if flat.size == 0:
        return xp.full((), np.nan, dtype=x.dtype), (xp.zeros(x.shape, dtype=bool), 1)
    out = flat[nanmedian_index(flat, 0, be)].reshape(())
    ties = xp.isnan(x) if x.dtype.kind == "f" and bool(xp.isnan(out)) else x == out
    return out, (ties, int(ties.sum()))


@nanmedian.defvjp
def nanmedian_vjp(be, g, saved):
    ties, count = saved
    return ((g * ties / count).astype(g.dtype, copy=False),)


OPS = (erfc, erfinv, lgamma, digamma, quantile, nanmedian)


# ---- the arguments, checked as torch checks them (before the op: errors keep their class) ------


def quantile_q(name, q, q_dtype, dtype, numel, interpolation):
    """quantile's q as the op takes it (a float; a tuple of floats for a 1-D q), once the
    arguments pass torch's checks: a float32 or float64 input with entries, q in [0, 1], a q
    tensor of the input's dtype with at most 1 dim, a known interpolation."""
    if dtype not in (np.float32, np.float64):
        raise DTypeError(f"{name}: the input must be float32 or float64 (as torch), got {dtype}")
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"{name}: interpolation must be one of {', '.join(INTERPOLATIONS)}, "
                         f"got {interpolation!r}")
    if q_dtype is not None and q_dtype != dtype:
        raise DTypeError(f"{name}: q is {q_dtype} but the input is {dtype}; a q tensor must have "
                         "the input's dtype (as torch)")
    qs = np.asarray(q, dtype=np.float64)
    if qs.ndim > 1:
        raise ShapeError(f"{name}: q must be a number or 1-D, got shape {qs.shape}")
    if not np.all((qs >= 0) & (qs <= 1)):
        raise ValueError(f"{name}: q must be in [0, 1], got {q!r}")
    if numel == 0:
        raise ValueError(f"{name}: the input must have entries (as torch)")
    return float(qs) if qs.ndim == 0 else tuple(float(v) for v in qs)


def check_bincount(dtype, shape, weights, minlength):
    """bincount's arguments: a 1-D integer tensor (not bool), weights of its length, minlength
    >= 0."""
    if dtype.kind not in "iu":
        raise DTypeError(f"bincount: takes integers, got {dtype} (as torch)")
    if len(shape) != 1:
        raise ShapeError(f"bincount: takes a 1-D tensor of integers >= 0, got shape "
                         f"{tuple(shape)}")
    if weights is not None and tuple(weights.shape) != tuple(shape):
        raise ShapeError(f"bincount: weights should be 1-d and have the input's length "
                         f"{shape[0]}, got shape {tuple(weights.shape)}")
    if minlength < 0:
        raise ValueError(f"bincount: minlength should be >= 0, got {minlength}")


def check_histc(dtype, bins):
    """histc's: a float tensor (torch has no integer histc) and bins an int > 0."""
    if dtype.kind != "f":
        raise DTypeError(f"histc: takes a floating-point tensor, got {dtype} (as torch); "
                         "convert it with .float()")
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins <= 0:
        raise ValueError(f"histc: bins must be an int > 0, got {bins!r}")


def check_histogram(x, bins, weight, range_):
    """torch.histogram's arguments: a float tensor; bins an int > 0 or a 1-D tensor of at least
    2 edges in its dtype; a weight of its shape and dtype; a range (min, max), min <= max."""
    if x.dtype.kind != "f":
        raise DTypeError(f"histogram: takes a floating-point tensor, got {x.dtype} (as torch); "
                         "convert it with .float()")
    _check_histogram_bins(x, bins)
    if weight is not None and tuple(weight.shape) != tuple(x.shape):
        raise ShapeError(f"histogram: weight must have the input's shape {tuple(x.shape)}, got "
                         f"{tuple(weight.shape)}")
    if weight is not None and weight.dtype != x.dtype:
        raise DTypeError(f"histogram: weight is {weight.dtype} but the input is {x.dtype}; "
                         "torch takes one dtype (convert one with .to())")
    if range_ is not None and not float(range_[0]) <= float(range_[1]):
        raise ValueError(f"histogram: min should not exceed max, got range {tuple(range_)}")


def _check_histogram_bins(x, bins):
    """histogram's bins: an int > 0, or a 1-D tensor of at least 2 edges in x's dtype."""
    if hasattr(bins, "shape"):
        if bins.dtype != x.dtype:
            raise DTypeError(f"histogram: the bins tensor is {bins.dtype} but the input is "
                             f"{x.dtype}; torch takes one dtype (convert one with .to())")
        if bins.ndim != 1 or bins.shape[0] < 2:
            raise ValueError(f"histogram: bins must be 1-D with at least 2 edges, got shape "
                             f"{tuple(bins.shape)}")
    elif isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins <= 0:
        raise ValueError(f"histogram: bins must be an int > 0 or a tensor of edges, got {bins!r}")


def integer_pair(name, x, other):
    """(x, other) for gcd and lcm: integer tensors, or a Python int other (torch has them for
    integers only, bool not among them)."""
    for v in (x, other):
        dtype = getattr(v, "dtype", None)
        if dtype is None and type(v) is not int or dtype is not None and dtype.kind not in "iu":
            raise DTypeError(f"{name}: takes integer tensors (as torch), got "
                             f"{dtype or type(v).__name__}")
    return x, other


# ---- values with no gradient (Tensor methods run them through tensor._values) -----------------


def isin_values(elements, test, invert=False, backend=None):
    """out = whether each entry of elements is among test's (NaN is never), as bools"""
    return backend.xp.isin(elements, test, invert=invert)


def bincount_values(x, weights=None, minlength=0, backend=None):
    """out[i] = how often i occurs in x (the sum of its weights with weights): int64, or
    float32 for float32 weights and float64 for any other"""
    xp = backend.xp
    if x.size and int(x.min()) < 0:
        raise ValueError("bincount: only supports 1-d non-negative integral inputs (as torch); "
                         f"got {int(x.min())}")
    out = xp.bincount(x, weights=weights, minlength=minlength)
    if weights is None:
        return out.astype(np.int64, copy=False)
    return out.astype(np.float32 if weights.dtype == np.float32 else np.float64, copy=False)


def histc_values(x, bins=100, low=0.0, high=0.0, backend=None):
    """out[i] = how many entries fall in the i-th of `bins` equal bins of [low, high] (x's own
    range if low == high, widened by 1 each way if that is one value; entries outside, and NaN,
    not counted; high itself in the last bin), in x's dtype"""
    xp = backend.xp
    if low == high and x.size:
        low, high = float(x.min()), float(x.max())
    if low == high:
        low, high = low - 1, high + 1
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"histc: range of [{low}, {high}] is not finite (as torch)")
    if not low < high:
        raise ValueError("histc: max must be larger than min (as torch)")
    lo, hi = x.dtype.type(low), x.dtype.type(high)
    flat = x.reshape(-1)
    inside = flat[(flat >= lo) & (flat <= hi)]
    with quiet():  # torch's arithmetic, in x's dtype
        place = ((inside - lo) * bins / (hi - lo)).astype(np.int64)
    place = xp.minimum(place, bins - 1)
    return xp.bincount(place, minlength=bins).astype(x.dtype)


def histogram_edges(x, bins=100, low=None, high=None, backend=None):
    """edges = bins + 1 evenly spaced values from low to high, in x's dtype: x's own min and
    max where no range is given ([0, 1] for no entries), widened by 0.5 each way where they are
    one value (torch's rule)"""
    if low is None:
        low, high = (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"histogram: range of [{low}, {high}] is not finite (as torch)")
    if low == high:
        low, high = low - 0.5, high + 0.5
    return backend.xp.linspace(low, high, bins + 1).astype(x.dtype)


def histogram_values(x, edges, weight=None, density=False, backend=None):
    """out[i] = how many entries (their weights' sum, with weight) fall in [edges[i],
    edges[i+1]) (the last bin holds its right edge; entries outside, and NaN, not counted), in
    x's dtype; with density, out / (Σ out * the bin's width)"""
    xp = backend.xp
    widths = xp.diff(edges)
    if (widths < 0).any():
        raise ValueError("histogram: the bin edges must increase (as NumPy; torch counts "
                         "nonsense silently)")
    flat = x.reshape(-1)
    inside = (flat >= edges[0]) & (flat <= edges[-1])
    place = xp.minimum(xp.searchsorted(edges, flat[inside], side="right") - 1, widths.size - 1)
    w = None if weight is None else weight.reshape(-1)[inside].astype(np.float64)
    out = xp.bincount(place, weights=w, minlength=widths.size).astype(x.dtype)
    if density:
        with quiet():  # (no entries: 0 / 0, NaN as torch)
            out = out / (out.sum() * widths)
    return out


def lcm_values(a, b, backend=None):
    """out = |a / gcd(a, b) * b| in the pair's integer dtype, wrapping on overflow as torch's (0
    where both are 0): NumPy's lcm takes |a| and |b| first, which can wrap to a negative
    (lcm(int32 2**31 - 1, 6) is -6 there, 6 in torch)"""
    xp = backend.xp
    dtype = xp.result_type(a, b)  # (b may be a Python int: weak, the tensor's dtype as torch)
    with quiet():  # (the wrap is torch's too; NumPy warns about it on 0-d values)
        g = xp.gcd(a, b)
        zero = g == 0
        out = xp.abs(xp.asarray(a // xp.where(zero, 1, g) * b, dtype=dtype))
        return xp.where(zero, 0, out).astype(dtype, copy=False)


def heaviside_values(x, values, backend=None):
    """out = 0 where x < 0 (and where x is NaN), values where x == 0, 1 where x > 0"""
    return backend.xp.where(x == 0, values, x > 0).astype(x.dtype, copy=False)


def _slices(a, axis):
    """The slices of a along axis, each flattened: (n, the entries of one)."""
    return np.moveaxis(a, axis, 0).reshape(a.shape[axis],
                                           math.prod(a.shape[:axis] + a.shape[axis + 1:]))


def consecutive_runs(a, axis):
    """torch's unique_consecutive on a NumPy array: (values, inverse, counts) of the runs of
    equal entries (axis None: of the flattened array; else of equal slices along axis). NaN is
    never equal to NaN, as in torch."""
    if axis is None:
        flat = a.reshape(-1)
        new = np.concatenate([np.ones(min(flat.size, 1), dtype=bool), flat[1:] != flat[:-1]])
        starts = np.flatnonzero(new)
        return (flat[new], (np.cumsum(new) - 1).reshape(a.shape),
                np.diff(np.append(starts, flat.size)))
    rows = _slices(a, axis)
    differs = (rows[1:] != rows[:-1]).any(axis=1)
    new = np.concatenate([np.ones(min(len(rows), 1), dtype=bool), differs])
    starts = np.flatnonzero(new)
    return (np.take(a, starts, axis=axis), np.cumsum(new) - 1,
            np.diff(np.append(starts, len(rows))))


def unique_slices(a, axis):
    """torch's unique(dim=axis) on a NumPy array: (values, inverse, counts) of the distinct
    slices along axis, sorted lexicographically (a slice with a NaN equals no other)."""
    rows = _slices(a, axis)
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(len(rows))
    ordered = rows[order]
    new = np.concatenate([np.ones(min(len(rows), 1), dtype=bool),
                          (ordered[1:] != ordered[:-1]).any(axis=1)])
    inverse = np.empty(len(rows), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    return (np.take(a, order[starts], axis=axis), inverse,
            np.diff(np.append(starts, len(rows))))
