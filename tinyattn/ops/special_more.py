"""More special functions, for tinyattn.special (torch.special's names): polygamma and the
Hurwitz zeta, the regularized incomplete gamma functions gammainc and gammaincc, erfcx,
xlog1py, entr, the modified Bessel functions i0, i0e, i1, i1e, the normal distribution's
ndtri and log_ndtr; and `polygamma_order`, the check of polygamma's n.

As ops/special.py's, each is evaluated in float64 in the backend's `xp` whatever the input
(float16 and float32 rounded back) and vectorised; each forward sits directly above its VJP.
ζ(s, q) sums its first terms until q + k >= 10 + s, then Euler-Maclaurin with 12 Bernoulli
terms (torch's zeta too, which sums from q itself for a negative q); ψ^(n)(x) = (-1)^(n+1) n!
ζ(n + 1, x) for n >= 2 (n = 0 and 1: digamma and trigamma of ops/special.py). gammainc is the
power series below x = a + 1 and Legendre's continued fraction (modified Lentz) above. The
Bessel functions: the power series below |x| = 30, the asymptotic series above. Where torch
has no gradient for an input (gammainc's and gammaincc's a, zeta's x), the op takes
refuse_grad=True from its caller when that input requires grad, and backward raises a
NotImplementedError naming the op, as torch does.
"""

import math

import numpy as np

from .op import op, quiet
from .samples import case, const, pos, vals, within
from .special import (
    LEVELS,
    SQRT_PI,
    TWO_OVER_SQRT_PI,
    _back,
    _exp_minus_square,
    _wide,
    digamma_f64,
    erfc_f64,
    erfinv_f64,
    lgamma_f64,
    trigamma_f64,
)

SQRT_2PI = math.sqrt(2 * math.pi)
SQRT1_2 = math.sqrt(0.5)
# B_2, B_4, ..., B_24 (Euler-Maclaurin's tail of ζ(s, q))
_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798, -174611 / 330, 854513 / 138, -236364091 / 2730]


def refused(name, which):
    return NotImplementedError(f"{name}: the derivative with respect to {which} is not "
                               f"implemented (as torch's {name}); detach it, or take the "
                               "gradient with respect to the other input only")


# ---- the Hurwitz zeta function and polygamma ------------------------------------------------


def _zeta_masks(xp, s, q):
    """(pole, fine) of ζ(s, q) as torch's zeta: inf at s = 1 and where q is a whole number
    <= 0 (s > 1); NaN for s < 1, q <= 0 with s not whole, q = inf and NaN; fine elsewhere."""
    with quiet():
        whole_q = (q <= 0) & (q == xp.floor(q))
        pole = (s == 1) | (~(s < 1) & whole_q)  # (a NaN s too, as torch's)
        bad = (s < 1) | ((q <= 0) & (s != xp.floor(s))) | xp.isnan(s) | xp.isnan(q) | \
            (q == xp.inf)
    return pole, ~(pole | bad)


def _euler_maclaurin(xp, s, w):
    """Σ_{k>=0} (w + k)^(-s) for w >= 10 + min(s, 40): w^(1-s)/(s-1) + w^(-s)/2 + Σ_j B_2j /
    (2j)! s (s+1)...(s+2j-2) w^(-s-2j+1)."""
    with quiet():
        tail = w ** (1 - s) / (s - 1) + 0.5 * w ** -s
        rising, power = s, w ** (-s - 1)
        for j, b in enumerate(_BERNOULLI, start=1):
            tail = tail + b / math.factorial(2 * j) * rising * power
            rising = rising * (s + 2 * j - 1) * (s + 2 * j)
            power = power / (w * w)
    return tail


def hurwitz_zeta_f64(be, s, q):
    """ζ(s, q) = Σ_{k>=0} (q + k)^(-s) of float64 s and q (broadcast together), as torch's
    zeta (_zeta_masks): the terms while q + k < 10 + min(s, 40), then Euler-Maclaurin."""
    xp = be.xp
    s, q = xp.broadcast_arrays(xp.asarray(s, dtype=np.float64), xp.asarray(q, dtype=np.float64))
    pole, fine = _zeta_masks(xp, s, q)
    ss, cur = xp.where(fine, s, 2.0), xp.where(fine, q, 10.0)
    target = 10 + xp.minimum(ss, 40.0)
    steps = int(xp.max(xp.ceil(target - cur))) if cur.size else 0
    total = xp.zeros_like(cur)
    with quiet():
        for _ in range(max(steps, 0)):
            low = cur < target
            total = total + xp.where(low, cur ** -ss, 0.0)
            cur = xp.where(low, cur + 1, cur)
        out = total + _euler_maclaurin(xp, ss, cur)
    return xp.where(fine, out, xp.where(pole, xp.inf, xp.nan))


def polygamma_order(n):
    """polygamma's n, checked: a Python int (or NumPy integer) >= 0."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma: n must be an int >= 0 (the order of the derivative), got "
                        f"{n!r}")
    if n < 0:
        raise ValueError(f"polygamma: n must be >= 0 (torch: does not support negative n), "
                         f"got {n}")
    return int(n)


def polygamma_f64(be, n, x):
    """ψ^(n)(x) of float64 x: digamma for n = 0, trigamma for n = 1, (-1)^(n+1) n! ζ(n+1, x)
    above (±inf at 0, the negative whole numbers and -inf; NaN at +inf, as torch's)."""
    if n == 0:
        return digamma_f64(be, x)
    if n == 1:
        return trigamma_f64(be, x)
    factorial = float(math.factorial(n)) if n <= 170 else math.inf
    with quiet():
        return (1.0 if n % 2 else -1.0) * factorial * hurwitz_zeta_f64(be, n + 1.0, x)


_POLY_POINTS = [-2.5, -0.7, -1.3, 0.3, 1.0, 1.7, 2.0, 4.5, 12.0]


@op("polygamma", "gx = g * polygamma(n + 1, x)", promote="float", saves={0: 0},
    samples=[case(vals(_POLY_POINTS), n=0), case(vals(_POLY_POINTS), n=1),
             case(vals(_POLY_POINTS), n=2), case(within((2, 3), 0.2, 5.0), n=3),
             case(vals([-1.5, 0.5, 3.0]), n=4), case(within((), 0.5, 3.0), n=2)])
def polygamma(be, x, n=0):
    """out = ψ^(n)(x), the n-th derivative of digamma"""
    return _back(polygamma_f64(be, n, _wide(x)), x), (x,)


@polygamma.defvjp
def polygamma_vjp(be, g, saved, n=0):
    (x,) = saved
    return (g * _back(polygamma_f64(be, n + 1, _wide(x)), x),)


@op("zeta", "gx = (none: backward raises, as torch's), gq = -g * x * zeta(x + 1, q)",
    grads=("gx", "gq"),
    promote="float", broadcasts=True, saves={0: 0, 1: 1},
    samples=[case(const([2.0, 3.5, 5.0]), pos((2, 3))),
             case(const([[2.0], [4.0]]), vals([-1.5, 0.3, 7.0]))])
def zeta(be, x, q, refuse_grad=False):
    """out = ζ(x, q) = Σ_{k>=0} (q + k)^(-x), the Hurwitz zeta function"""
    return _back(hurwitz_zeta_f64(be, _wide(x), _wide(q)), q), (x, q)


@zeta.defvjp
def zeta_vjp(be, g, saved, refuse_grad=False):
    if refuse_grad:
        raise refused("zeta", "x (the first input)")
    x, q = saved
    with quiet():
        gq = -g * _back(_wide(x) * hurwitz_zeta_f64(be, _wide(x) + 1, _wide(q)), g)
    return None, gq


# ---- the regularized incomplete gamma functions -----------------------------------------------


def _gamma_series(xp, a, x):
    """Σ_{n>=0} x^n / ((a+1)...(a+n)) (P(a, x) = x^a e^(-x) / Γ(a+1) times it), x < a + 1."""
    term = xp.ones_like(x)
    total = term
    for n in range(1, 5000):
        term = term * x / (a + n)
        total = total + term
        if not (xp.abs(term) > 1e-17 * xp.abs(total)).any():
            break
    return total


def _gamma_fraction(xp, a, x):
    """Legendre's continued fraction 1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(x+5-a- ...))) by
    modified Lentz (Q(a, x) = x^a e^(-x) / Γ(a) times it), x >= a + 1."""
    tiny = 1e-300
    b = x + 1 - a
    c = xp.full_like(x, 1 / tiny)
    d = 1 / b
    h = d
    for i in range(1, 5000):
        an = -i * (i - a)
        b = b + 2
        d = an * d + b
        d = xp.where(xp.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = xp.where(xp.abs(c) < tiny, tiny, c)
        d = 1 / d
        step = d * c
        h = h * step
        if not (xp.abs(step - 1) > 1e-16).any():
            break
    return h


def _incomplete_gamma_edges(xp, a, x, upper):
    """(where torch gives P(a, x) (or Q) without computing it, that value), in its order:
    NaN for x < 0 or a < 0; at a = 0, 1 for x > 0 (NaN else); 0 at x = 0; at a = inf, NaN for
    x = inf, 0 else; 1 at x = inf (Q: 1 - each, NaN kept)."""
    one, zero = (0.0, 1.0) if upper else (1.0, 0.0)
    cases = [((x < 0) | (a < 0), xp.nan), (a == 0, xp.where(x > 0, one, xp.nan)),
             (x == 0, zero), (xp.isinf(a), xp.where(xp.isinf(x), xp.nan, zero)),
             (xp.isinf(x), one)]
    edge, value = xp.zeros(a.shape, dtype=bool), xp.zeros(a.shape)
    for where, v in reversed(cases):
        value = xp.where(where, v, value)
        edge = edge | where
    return edge, value


def incomplete_gamma_f64(be, a, x, upper):
    """P(a, x) (upper False) or Q(a, x) = 1 - P (upper True) of float64 a, x, with torch's
    values at the edges (_incomplete_gamma_edges); NaN for a NaN a or x elsewhere."""
    xp = be.xp
    a, x = xp.broadcast_arrays(a, x)
    with quiet():
        edge, edge_value = _incomplete_gamma_edges(xp, a, x, upper)
        fine = ~(edge | xp.isnan(a) | xp.isnan(x))
        aa, xx = xp.where(fine, a, 1.0), xp.where(fine, x, 1.0)
        series = xx < aa + 1
        log_front = aa * xp.log(xx) - xx
        sa, sx = xp.where(series, aa, 1.0), xp.where(series, xx, 0.5)
        p = _gamma_series(xp, sa, sx) * xp.exp(log_front - lgamma_f64(be, sa + 1))
        fa, fx = xp.where(series, 1.0, aa), xp.where(series, 2.0, xx)
        q = _gamma_fraction(xp, fa, fx) * xp.exp(log_front - lgamma_f64(be, fa))
        out = xp.where(series, 1 - p, q) if upper else xp.where(series, p, 1 - q)
    return xp.where(edge, edge_value, xp.where(fine, out, xp.nan))


def _incomplete_gamma_slope(be, a, x):
    """d P(a, x) / dx = x^(a-1) e^(-x) / Γ(a), as torch computes it: exp((a-1) log x - x -
    lgamma(a))."""
    xp = be.xp
    with quiet():
        return xp.exp((a - 1) * xp.log(x) - x - lgamma_f64(be, a))


_GAMMAINC_SAMPLES = [case(const([0.5, 1.5, 3.0]), pos((2, 3))),
                     case(const([[1.0], [7.5]]), within((2, 3), 0.2, 12.0)),
                     case(const(2.5), vals([0.3, 3.4, 9.0]))]


@op("gammainc", "ga = (none: backward raises, as torch's), gx = g * x^(a-1) e^(-x) / Γ(a)",
    grads=("ga", "gx"),
    promote="float", broadcasts=True, saves={0: 0, 1: 1}, samples=_GAMMAINC_SAMPLES)
def gammainc(be, a, x, refuse_grad=False):
    """out = P(a, x) = γ(a, x) / Γ(a), the regularized lower incomplete gamma function"""
    out = incomplete_gamma_f64(be, _wide(a), _wide(x), False)
    return _back(out, x), (a, x)


@gammainc.defvjp
def gammainc_vjp(be, g, saved, refuse_grad=False):
    if refuse_grad:
        raise refused("gammainc", "a (the first input)")
    a, x = saved
    return None, g * _back(_incomplete_gamma_slope(be, _wide(a), _wide(x)), g)


@op("gammaincc", "ga = (none: backward raises, as torch's), gx = -g * x^(a-1) e^(-x) / Γ(a)",
    grads=("ga", "gx"),
    promote="float", broadcasts=True, saves={0: 0, 1: 1}, samples=_GAMMAINC_SAMPLES)
def gammaincc(be, a, x, refuse_grad=False):
    """out = Q(a, x) = 1 - P(a, x), the regularized upper incomplete gamma function"""
    out = incomplete_gamma_f64(be, _wide(a), _wide(x), True)
    return _back(out, x), (a, x)


@gammaincc.defvjp
def gammaincc_vjp(be, g, saved, refuse_grad=False):
    if refuse_grad:
        raise refused("gammaincc", "a (the first input)")
    a, x = saved
    return None, -g * _back(_incomplete_gamma_slope(be, _wide(a), _wide(x)), g)


# ---- erfcx, xlog1py, entr ----------------------------------------------------------------------


def erfcx_f64(be, x):
    """e^(x²) erfc(x) of float64 x: 1 / (√π times Laplace's continued fraction) from 1 on
    (no underflow), e^(x²) erfc(x) with x² exact below (inf below -26.6, as torch)."""
    xp = be.xp
    far = x >= 1
    z = xp.where(far, xp.minimum(x, 1e150), 1.0)
    frac = z
    for k in range(LEVELS, 0, -1):
        frac = z + (k / 2) / frac
    near = xp.where(far, 0.0, x)
    with quiet():
        low = erfc_f64(be, near) / _exp_minus_square(xp, near)
        high = xp.where(x > 1e150, 1 / (SQRT_PI * x), 1 / (SQRT_PI * frac))
    out = xp.where(x == -xp.inf, xp.inf, xp.where(far, high, low))
    return xp.where(xp.isnan(x), xp.nan, out)


@op("erfcx", "gx = g * (2 x out - 2/√π)", promote="float", saves={0: 0}, saves_out=1,
    samples=[case(vals([-3.0, -0.5, 0.0, 0.7, 1.0, 2.5, 30.0])), case((2, 3)), case(())])
def erfcx(be, x):
    """out = e^(x²) erfc(x), the scaled complementary error function"""
    out = _back(erfcx_f64(be, _wide(x)), x)
    return out, (x, out)


@erfcx.defvjp
def erfcx_vjp(be, g, saved):
    x, out = saved
    with quiet():
        return (g * (2 * x * out - TWO_OVER_SQRT_PI),)


@op("xlog1py", "gx = g * log1p(y) (0 where x = 0 and y <= -1), gy = g * x / (1 + y)",
    grads=("gx", "gy"), promote="float", broadcasts=True, saves={0: 0, 1: 1},
    samples=[case((2, 3), pos((2, 3))), case((3,), within((2, 1), -0.9, 2.0)),
             case(vals([0.0, 1.5, -2.0]), vals([-0.5, 0.2, 3.0])), case((), pos(()))])
def xlog1py(be, x, y):
    """out = x log(1 + y), 0 where x = 0 (unless y is NaN)"""
    xp = be.xp
    with quiet():
        out = x * xp.log1p(y)
        out = xp.where((x == 0) & ~xp.isnan(y), 0, out)
    return xp.asarray(out, dtype=xp.result_type(x, y)), (x, y)


@xlog1py.defvjp
def xlog1py_vjp(be, g, saved):
    x, y = saved
    xp = be.xp
    with quiet():
        gx = xp.where(((x == 0) & (y <= -1)) | (g == 0), 0, g * xp.log1p(y))
        gy = g * x / (y + 1)
    return gx, gy


@op("entr", "gx = -g * (1 + log x)", promote="float", saves={0: 0},
    samples=[case(pos((2, 3))), case(vals([0.1, 0.5, 1.0, 3.0])), case(pos(()))])
def entr(be, x):
    """out = -x log x for x > 0, 0 at 0, -inf below 0"""
    xp = be.xp
    with quiet():
        out = xp.where(x > 0, -x * xp.log(xp.where(x > 0, x, 1)), xp.where(x == 0, 0, -xp.inf))
    return xp.where(xp.isnan(x), x, out).astype(x.dtype, copy=False), (x,)


@entr.defvjp
def entr_vjp(be, g, saved):
    (x,) = saved
    with quiet():
        return (-g * (1 + be.xp.log(x)),)


# ---- the modified Bessel functions of the first kind, orders 0 and 1 ---------------------------


def bessel_i_f64(be, x, nu, scaled):
    """I_ν(x) of float64 x for ν = 0 or 1, times e^(-|x|) where scaled: the power series
    Σ (x/2)^(2k+ν) / (k! (k+ν)!) below |x| = 30, the asymptotic e^|x| / √(2π|x|) Σ (-1)^k
    a_k(ν) / |x|^k above (I_1 odd, I_0 even; unscaled, inf past e^|x|'s range and NaN at
    ±inf, as torch's)."""
    xp = be.xp
    a = xp.abs(x)
    small = a < 30
    z = xp.where(small, a, 0.0)
    quarter = z * z / 4
    term = xp.ones_like(z) if nu == 0 else z / 2
    total = term
    for k in range(1, 60):
        term = term * quarter / (k * (k + nu))
        total = total + term
    big = xp.where(small | xp.isnan(a), 30.0, a)
    mu = 4.0 * nu * nu
    t = xp.ones_like(big)
    series = xp.ones_like(big)
    for k in range(1, 30):
        t = t * -(mu - (2 * k - 1) ** 2) / (8 * k * big)
        series = series + t
    with quiet():
        asym = series / xp.sqrt(2 * math.pi * big)
        if scaled:
            total = total * xp.exp(-z)
        else:
            asym = asym * xp.exp(big)
        asym = xp.where(big == xp.inf, 0.0 if scaled else xp.nan, asym)  # (torch's NaN)
    out = xp.where(small, total, asym)
    if nu == 1:
        out = xp.where(x < 0, -out, out)
    return xp.where(xp.isnan(x), xp.nan, out)


# (the asymptotic branch's huge values apart: a difference of a sum with them loses the rest)
# (and 0 apart: i0e's and i1e's gradients jump there, with sign(x))
_BESSEL_SAMPLES = [case((2, 3)), case(vals([-3.0, -0.2, 0.4, 5.0, 12.0])),
                   case(vals([29.5, -31.0])), case(vals([35.0])), case(())]
_BESSEL_AT_0 = _BESSEL_SAMPLES + [case(vals([0.0, 1e-17]))]


def _i(be, x, nu, scaled):
    return _back(bessel_i_f64(be, _wide(x), nu, scaled), x)


def _i1_slope(be, x, out, scaled):
    """d/dx of I_1 (scaled: of e^(-|x|) I_1): I_0 - out / x (- sign(x) out), 1/2 where |x| is
    at most the dtype's eps (as torch's)."""
    xp = be.xp
    eps = np.finfo(x.dtype).eps
    tiny = xp.abs(x) <= eps
    safe = xp.where(tiny, eps, x)
    with quiet():
        slope = _i(be, safe, 0, scaled) - out * (1 / safe + (xp.sign(safe) if scaled else 0))
    return xp.where(tiny, 0.5, slope).astype(x.dtype, copy=False)


@op("i0", "gx = g * i1(x)", promote="float", saves={0: 0}, samples=_BESSEL_AT_0)
def i0(be, x):
    """out = I_0(x), the modified Bessel function of the first kind of order 0"""
    return _i(be, x, 0, False), (x,)


@i0.defvjp
def i0_vjp(be, g, saved):
    (x,) = saved
    return (g * _i(be, x, 1, False),)


@op("i0e", "gx = g * (i1e(x) - sign(x) * out)", promote="float", saves={0: 0}, saves_out=1,
    samples=_BESSEL_SAMPLES)
def i0e(be, x):
    """out = e^(-|x|) I_0(x)"""
    out = _i(be, x, 0, True)
    return out, (x, out)


@i0e.defvjp
def i0e_vjp(be, g, saved):
    x, out = saved
    return (g * (_i(be, x, 1, True) - be.xp.sign(x) * out),)


@op("i1", "gx = g * (i0(x) - out / x) (g / 2 at 0)", promote="float", saves={0: 0},
    saves_out=1, samples=_BESSEL_AT_0)
def i1(be, x):
    """out = I_1(x), the modified Bessel function of the first kind of order 1"""
    out = _i(be, x, 1, False)
    return out, (x, out)


@i1.defvjp
def i1_vjp(be, g, saved):
    x, out = saved
    return (g * _i1_slope(be, x, out, False),)


@op("i1e", "gx = g * (i0e(x) - out * (sign(x) + 1 / x)) (g / 2 at 0)", promote="float",
    saves={0: 0}, saves_out=1, samples=_BESSEL_SAMPLES)
def i1e(be, x):
    """out = e^(-|x|) I_1(x)"""
    out = _i(be, x, 1, True)
    return out, (x, out)


@i1e.defvjp
def i1e_vjp(be, g, saved):
    x, out = saved
    return (g * _i1_slope(be, x, out, True),)


# ---- the standard normal distribution: ndtri, log_ndtr ------------------------------------------


def _erfcinv_f64(be, c):
    """The y >= 0 with erfc y = c, for float64 c in (0, 1]: Newton on log erfc from
    erfinv(1 - c) (sqrt(-log c) where 1 - c rounds to 1)."""
    xp = be.xp
    with quiet():
        guess = erfinv_f64(be, 1 - c)
        y = xp.where(xp.isinf(guess), xp.sqrt(-xp.log(c)), guess)
        log_c = xp.log(c)
        for _ in range(6):
            e = erfc_f64(be, y)
            y = y + (xp.log(e) - log_c) * e / (TWO_OVER_SQRT_PI * xp.exp(-y * y))
    return y


def ndtri_f64(be, p):
    """Φ⁻¹(p) of float64 p: √2 erfinv(2p - 1) on [1/4, 3/4] (2p - 1 exact), ∓√2 erfcinv(2p)
    and erfcinv(2(1 - p)) in the tails; -inf at 0, inf at 1, NaN outside."""
    xp = be.xp
    mid = (p >= 0.25) & (p <= 0.75)
    inside = (p > 0) & (p < 1)
    centre = math.sqrt(2) * erfinv_f64(be, xp.where(mid, 2 * p - 1, 0.0))
    lower = p < 0.5
    c = xp.where(mid | ~inside, 1.0, 2 * xp.where(lower, p, 1 - p))
    tail = math.sqrt(2) * _erfcinv_f64(be, c)
    out = xp.where(mid, centre, xp.where(lower, -tail, tail))
    out = xp.where(p == 0, -xp.inf, xp.where(p == 1, xp.inf, out))
    return xp.where(inside | (p == 0) | (p == 1), out, xp.nan)


@op("ndtri", "gx = g * √(2π) e^(out²/2)", promote="float", saves_out=0,
    samples=[case(within((2, 3), 0.02, 0.98)), case(vals([0.001, 0.1, 0.3, 0.5, 0.8, 0.999])),
             case(within((), 0.2, 0.8))])
def ndtri(be, p):
    """out = the x with Φ(x) = p, the standard normal distribution's quantile function"""
    out = _back(ndtri_f64(be, _wide(p)), p)
    return out, (out,)


@ndtri.defvjp
def ndtri_vjp(be, g, saved):
    (out,) = saved
    with quiet():
        return (g * SQRT_2PI * be.xp.exp(out * out / 2),)


def log_ndtr_f64(be, x):
    """log Φ(x) of float64 x: log(erfcx(t) / 2) - t² with t = -x/√2 below -1 (no underflow),
    log(erfc(-x/√2) / 2) on [-1, 0], log1p(-erfc(x/√2) / 2) above."""
    xp = be.xp
    t = -x * SQRT1_2
    low = x < -1
    tl = xp.where(low, t, 1.0)
    with quiet():
        left = xp.log(erfcx_f64(be, tl) / 2) - tl * tl
        mid = xp.log(erfc_f64(be, xp.where(low, 0.0, t)) / 2)
        right = xp.log1p(-erfc_f64(be, xp.where(x > 0, -t, 0.0)) / 2)
    return xp.where(low, left, xp.where(x > 0, right, mid))


@op("log_ndtr", "gx = g * e^(-x²/2 - out) / √(2π)", promote="float", saves={0: 0},
    saves_out=1,
    samples=[case((2, 3)), case(vals([-40.0, -5.0, -1.0, 0.0, 0.5, 6.0])), case(())])
def log_ndtr(be, x):
    """out = log Φ(x), the log of the standard normal distribution function"""
    out = _back(log_ndtr_f64(be, _wide(x)), x)
    return out, (x, out)


@log_ndtr.defvjp
def log_ndtr_vjp(be, g, saved):
    x, out = saved
    with quiet():
        return (g * be.xp.exp(-(out + x * x / 2)) / SQRT_2PI,)


OPS = (polygamma, zeta, gammainc, gammaincc, erfcx, xlog1py, entr, i0, i0e, i1, i1e, ndtri,
       log_ndtr)
