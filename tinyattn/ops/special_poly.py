"""torch.special's orthogonal polynomials and Bessel-type functions, for tinyattn.special.

The polynomials, each an op of (x, n) (broadcast): chebyshev_polynomial_t/u/v/w, their
shifted forms (of 2x - 1), hermite_polynomial_h/he, laguerre_polynomial_l and
legendre_polynomial_p. Their values are torch's, computed as torch does in the result's own
dtype (so float32 overflows where torch's does, to its NaN of inf - inf): n truncated to an
integer, 0 for n < 0 (and for a NaN, infinite or past-int64 n, as torch's cast gives), the
exact values at |x| = 1 and the trigonometric forms for |x| < 1 and n above 6 (T) or 8 (U, V,
W), the three-term recurrence elsewhere (O(n) steps, as torch's). Their x-gradient, which torch
does not have, is the recurrence differentiated along with it (in float64: exact at ±1 and for
every n); the gradient with respect to n is refused by name (refuse_grad, as ops/special_more's
zeta).

The Bessel-type functions, each an op of x: bessel_j0/j1/y0/y1 (power series below 4, Miller's
backward recurrence with the Neumann series of Y below 25, Hankel's asymptotic series above),
modified_bessel_i0/i1 (ops/special_more's series), modified_bessel_k0/k1 and their scaled forms
e^x K (power series up to 2, Steed's continued fraction CF2 above), spherical_bessel_j0 (sin x
/ x) and airy_ai (Taylor steps of Ai'' = x Ai from 0 on [-10, 2.08], K_{1/3} by CF2 above,
the asymptotic series below -10). All in float64 whatever the input, with torch's values at the
edges (Y and K: NaN below 0, ∓inf at 0; J and Ai: NaN at ±inf). Each has its gradient in its
own family (j0' = -j1, j1' = j0 - j1/x, y0' = -y1, y1' = y0 - y1/x, i0' = i1, i1' = i0 -
i1/x, k0' = -k1, k1' = -k0 - k1/x, Ai' by the same method as Ai). Gradients of gradients
(create_graph=True): higher_order/special_poly.py, with the derivative ops of
ops/special_poly_derivatives.py (P_n^(m), (sin x / x)^(m), Ai').
"""

import math

import numpy as np

from .op import op, quiet
from .samples import case, const, vals, within
from .special import _back, _wide
from .special_more import bessel_i_f64, refused

EULER = 0.57721566490153286061
TWO_OVER_PI = 2 / math.pi
SQRT1_2 = math.sqrt(0.5)
AI0, AIP0 = 0.35502805388781723926, -0.25881940379280679840  # Ai(0), Ai'(0)

# ---- the orthogonal polynomials -----------------------------------------------------------------

# kind: (P_1 = alpha x + beta, the step P_{k+1} = ((c x + d) P_k - b P_{k-1}) / e as (c, d, b, e))
_KINDS = {
    "t": (1.0, 0.0, lambda k: (2.0, 0.0, 1.0, 1.0)),
    "u": (2.0, 0.0, lambda k: (2.0, 0.0, 1.0, 1.0)),
    "v": (2.0, -1.0, lambda k: (2.0, 0.0, 1.0, 1.0)),
    "w": (2.0, 1.0, lambda k: (2.0, 0.0, 1.0, 1.0)),
    "h": (2.0, 0.0, lambda k: (2.0, 0.0, 2.0 * k, 1.0)),
    "he": (1.0, 0.0, lambda k: (1.0, 0.0, float(k), 1.0)),
    "l": (-1.0, 1.0, lambda k: (-1.0, 2.0 * k + 1, float(k), k + 1.0)),
    "p": (1.0, 0.0, lambda k: (2.0 * k + 1, 0.0, float(k), k + 1.0)),
}
_TRIG_FROM = {"t": 6, "u": 8, "v": 8, "w": 8}  # torch's: trigonometric forms for n above these


def degree(xp, n):
    """n as torch reads it (a cast to int64): truncated; NaN, ±inf and |n| >= 2^63 give -1."""
    with quiet():
        ok = xp.isfinite(n) & (xp.abs(n) < 2.0 ** 63)
        return xp.trunc(xp.where(ok, n, -1)).astype(np.int64)


def _steps(kind, x, state, k):
    """One step of the recurrence: from state = (P_{k-1}, P_k, P'_{k-1}, P'_k, ...) (each
    derivative j = 0..order a pair) to that of k, k+1: the recurrence differentiated j times,
    P^(j)_{k+1} = ((c x + d) P^(j)_k + j c P^(j-1)_k - b P^(j)_{k-1}) / e."""
    c, d, b, e = _KINDS[kind][2](k)
    p, q = state[0], state[1]
    r = ((c * x + d) * q - b * p) / e if e != 1.0 else (c * x + d) * q - b * p
    out = (q, r)
    for j in range(1, len(state) // 2):
        dp, dq = state[2 * j], state[2 * j + 1]
        out += (dq, (j * c * state[2 * j - 1] + (c * x + d) * dq - b * dp) / e)
    return out


def _recurrence(be, kind, x, n, order):
    """P_n^(order)(x) (order 0: P_n(x)) of flat x and n >= 1, by the recurrence: the entries
    sorted by n, each taken off when its degree is reached; stops early where all left are NaN
    (the recurrence keeps NaN)."""
    xp = be.xp
    by_degree = xp.argsort(n, kind="stable")
    degrees, counts = np.unique(be.to_numpy(n[by_degree]), return_counts=True)
    counts = dict(zip(degrees.tolist(), counts.tolist(), strict=True))
    xs = x[by_degree]
    alpha, beta, _ = _KINDS[kind]
    state = (xp.ones_like(xs), alpha * xs + beta)
    if order:
        state += (xp.zeros_like(xs), xp.full_like(xs, alpha))
    state += tuple(xp.zeros_like(xs) for _ in range(2 * order - 2))
    out, done = xp.empty_like(xs), 0
    with quiet():
        for k in range(1, int(degrees[-1]) + 1):  # state[1] is P_k (state[2 j + 1] its P^(j))
            count = counts.get(k, 0)
            if count:
                out[done:done + count] = state[2 * order + 1][:count]
                done += count
                state = tuple(s[count:] for s in state)
                xs = xs[count:]
            if done == out.size or (k % 64 == 0 and bool(xp.isnan(state[0]).all()) and
                                    bool(xp.isnan(state[1]).all())):
                out[done:] = xp.nan
                break
            state = _steps(kind, xs, state, k)
    result = xp.empty_like(out)
    result[by_degree] = out
    return result


def _chebyshev_edges(xp, kind, y, k):
    """(the values at y = ±1, as torch's exact ones) for n >= 0."""
    sign = xp.where(k % 2 == 0, 1.0, -1.0)
    top, bottom = {"t": (1.0, sign), "u": (k + 1.0, sign * (k + 1.0)),
                   "v": (1.0, sign * (2.0 * k + 1)), "w": (2.0 * k + 1, sign)}[kind]
    return xp.where(y > 0, top, bottom)


def _chebyshev_trig(xp, kind, y, k):
    """cos(nθ), sin((n+1)θ)/sin θ, cos((n+½)θ)/cos(θ/2), sin((n+½)θ)/sin(θ/2), y = cos θ."""
    theta = xp.arccos(y)
    kk = k.astype(y.dtype)
    if kind == "t":
        return xp.cos(kk * theta)
    if kind == "u":
        return xp.sin((kk + 1) * theta) / xp.sin(theta)
    if kind == "v":
        return xp.cos((kk + 0.5) * theta) / xp.cos(theta / 2)
    return xp.sin((kk + 0.5) * theta) / xp.sin(theta / 2)


def _work(x):
    """The dtype the polynomials are computed in: the result's (float32 for float16)."""
    return x.dtype if x.dtype in (np.float32, np.float64) else np.dtype(np.float32)


def polynomial_values(be, kind, shifted, x, n):
    """P_n(x) as torch's (the module's docstring), in x's dtype, x and n broadcast."""
    xp = be.xp
    x, n = xp.broadcast_arrays(x, n)
    dtype = _work(x)
    y = x.astype(dtype)
    if shifted:
        y = y + y - 1
    k = degree(xp, n)
    out = xp.where(k == 0, 1.0, 0.0).astype(dtype)
    recur = k >= 1
    with quiet():
        if kind in _TRIG_FROM:
            edge = (xp.abs(y) == 1) & (k >= 0)
            trig = (xp.abs(y) < 1) & (k > _TRIG_FROM[kind])
            out = xp.where(edge, _chebyshev_edges(xp, kind, y, k), out)
            out = xp.where(trig, _chebyshev_trig(xp, kind, xp.where(trig, y, 0.0), k), out)
            recur = recur & ~edge & ~trig
        if bool(recur.any()):
            out[recur] = _recurrence(be, kind, y[recur], k[recur], 0)
    return _back(out, x)


def polynomial_slope(be, kind, shifted, x, n):
    """d P_n(x) / dx of float64 x, n (broadcast), by the differentiated recurrence."""
    return polynomial_derivative(be, kind, shifted, x, n, 1)


def polynomial_derivative(be, kind, shifted, x, n, order):
    """d^order P_n(x) / dx^order (order >= 1) of float64 x, n (broadcast), by the recurrence
    differentiated order times (0 for n < order, n <= 0 and NaN n; 2^order (2x - 1) shifted)."""
    xp = be.xp
    x, n = xp.broadcast_arrays(x, n)
    y = x + x - 1 if shifted else x
    k = degree(xp, n)
    out = xp.zeros(x.shape)
    recur = k >= 1
    if bool(recur.any()):
        out[recur] = _recurrence(be, kind, y[recur], k[recur], order)
    return out * 2.0 ** order if shifted else out


_POLY_SAMPLES = [case(within((2, 3), -0.95, 0.95), const([[0.0, 3.0, 9.0]])),
                 case(vals([-1.5, -0.3, 0.4, 1.0, 2.0]), const([1, 4, 7, 12, -1])),
                 case(within((), 0.1, 0.9), 5)]


def _polynomial_op(name, kind, shifted, doc):
    """The op `name`: out = P_n(x) of the kind (of 2x - 1 where shifted)."""
    at = "2x - 1" if shifted else "x"

    @op(name, f"gx = g * P_n'({at}){' * 2' if shifted else ''} (by the differentiated "
        "recurrence), gn = (none: backward raises)", grads=("gx", "gn"), promote="float",
        broadcasts=True, saves={0: 0, 1: 1}, samples=_POLY_SAMPLES)
    def forward(be, x, n, refuse_grad=False):
        return polynomial_values(be, kind, shifted, x, n), (x, n)

    @forward.defvjp
    def forward_vjp(be, g, saved, refuse_grad=False):
        if refuse_grad:
            raise refused(name, "n (the degree)")
        x, n = saved  # (n may be a Python number: the op called with one)
        slope = polynomial_slope(be, kind, shifted, _wide(x), _wide(be.xp.asarray(n)))
        return g * _back(slope, g), None

    forward.doc = f"out = {doc}"
    return forward


chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v, \
    chebyshev_polynomial_w = (
        _polynomial_op(f"chebyshev_polynomial_{k}", k, False, f"{k.upper()}_n(x), the Chebyshev "
                       f"polynomial of the {which} kind")
        for k, which in zip("tuvw", ("first", "second", "third", "fourth"), strict=True))
shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u, \
    shifted_chebyshev_polynomial_v, shifted_chebyshev_polynomial_w = (
        _polynomial_op(f"shifted_chebyshev_polynomial_{k}", k, True, f"{k.upper()}*_n(x) = "
                       f"{k.upper()}_n(2x - 1), the shifted Chebyshev polynomial")
        for k in "tuvw")
hermite_polynomial_h = _polynomial_op("hermite_polynomial_h", "h", False,
                                      "H_n(x), the physicists' Hermite polynomial")
hermite_polynomial_he = _polynomial_op("hermite_polynomial_he", "he", False,
                                       "He_n(x), the probabilists' Hermite polynomial")
laguerre_polynomial_l = _polynomial_op("laguerre_polynomial_l", "l", False,
                                       "L_n(x), the Laguerre polynomial")
legendre_polynomial_p = _polynomial_op("legendre_polynomial_p", "p", False,
                                       "P_n(x), the Legendre polynomial")


# ---- Bessel J and Y of orders 0 and 1 ---------------------------------------------------------


def _log_series(xp, a, sign):
    """(Σ s^k/k!², Σ s^k/(k!(k+1)!), Σ_{k>=1} H_k s^k/k!², Σ (H_k + H_{k+1} - 2γ) s^k/(k!(k+1)!))
    with s = sign a²/4: the series of J, Y (sign -1) and I, K (sign +1) for a <= 4."""
    s = sign * a * a / 4
    t0, t1 = xp.ones_like(a), xp.ones_like(a)
    s0, s1, h0, h1 = t0, t1, xp.zeros_like(a), (1 - 2 * EULER) * t1
    harmonic = 0.0
    for k in range(1, 28):
        harmonic += 1 / k
        t0 = t0 * s / (k * k)
        t1 = t1 * s / (k * (k + 1))
        s0, s1 = s0 + t0, s1 + t1
        h0 = h0 + harmonic * t0
        h1 = h1 + (2 * harmonic + 1 / (k + 1) - 2 * EULER) * t1
    return s0, s1, h0, h1


def _jy_series(xp, a):
    """(J0, J1, Y0, Y1) of 0 < a <= 4."""
    s0, s1, h0, h1 = _log_series(xp, a, -1.0)
    log_half = xp.log(a / 2)
    j1 = a / 2 * s1
    y0 = TWO_OVER_PI * ((log_half + EULER) * s0 - h0)
    y1 = -TWO_OVER_PI / a + TWO_OVER_PI * log_half * j1 - a / (2 * math.pi) * h1
    return s0, j1, y0, y1


def _jy_miller(xp, a, top=90):
    """(J0, J1, Y0, Y1) of 4 <= a < 25: J_k by the backward recurrence J_{k-1} = 2k/a J_k -
    J_{k+1} from k = 90, normalised by J_0 + 2 Σ J_2k = 1; Y by Neumann's series, Y0 = 2/π
    ((log(a/2) + γ) J0 - 2 Σ (-1)^m J_2m / m) and Y1 = -Y0'."""
    js = [None] * (top + 2)
    js[top + 1], js[top] = xp.zeros_like(a), xp.ones_like(a)
    for k in range(top, 0, -1):
        js[k - 1] = (2 * k / a) * js[k] - js[k + 1]
    norm, y0_sum, y1_sum = js[0], xp.zeros_like(a), xp.zeros_like(a)
    for m in range(1, top // 2 + 1):
        norm = norm + 2 * js[2 * m]
        y0_sum = y0_sum + (-1) ** m * js[2 * m] / m
        y1_sum = y1_sum + (-1) ** m * (js[2 * m - 1] - js[2 * m + 1]) / m
    j0, j1 = js[0] / norm, js[1] / norm
    log_term = xp.log(a / 2) + EULER
    y0 = TWO_OVER_PI * (log_term * j0 - 2 * y0_sum / norm)
    y1 = TWO_OVER_PI * (-j0 / a + log_term * j1 + y1_sum / norm)
    return j0, j1, y0, y1


def _hankel(xp, a, nu):
    """(P, Q) of Hankel's asymptotic J_ν = √(2/(πa)) (P cos χ - Q sin χ), Y_ν = √(2/(πa)) (P
    sin χ + Q cos χ), χ = a - (ν/2 + 1/4)π, for a >= 25 (40 terms)."""
    mu = 4.0 * nu * nu
    t, p, q = xp.ones_like(a), xp.ones_like(a), xp.zeros_like(a)
    with quiet():
        for k in range(1, 41):
            t = t * (mu - (2 * k - 1) ** 2) / (8 * k * a)
            if k % 2:
                q = q + (-1) ** (k // 2) * t
            else:
                p = p + (-1) ** (k // 2) * t
    return p, q


def _jy_asymptotic(xp, a):
    """(J0, J1, Y0, Y1) of a >= 25 (cos(a - π/4) = (cos a + sin a)/√2: no rounding of a -
    π/4)."""
    with quiet():
        amp = xp.sqrt(TWO_OVER_PI / a)
        c, s = xp.cos(a) * SQRT1_2, xp.sin(a) * SQRT1_2
        p0, q0 = _hankel(xp, a, 0)
        p1, q1 = _hankel(xp, a, 1)
        cos0, sin0, cos1, sin1 = c + s, s - c, s - c, -(s + c)
        return (amp * (p0 * cos0 - q0 * sin0), amp * (p1 * cos1 - q1 * sin1),
                amp * (p0 * sin0 + q0 * cos0), amp * (p1 * sin1 + q1 * cos1))


def bessel_jy_f64(be, x):
    """(J0, J1, Y0, Y1) of float64 x: J0 even, J1 odd; Y NaN below 0 and -inf at 0; NaN at
    ±inf (as torch's)."""
    xp = be.xp
    a = xp.abs(x)
    small, mid = a <= 4, (a > 4) & (a < 25)
    with quiet():
        parts = [_jy_series(xp, xp.where(small & (a > 0), a, 1.0)),
                 _jy_miller(xp, xp.where(mid, a, 10.0)),
                 _jy_asymptotic(xp, xp.where(small | mid, 30.0, a))]
    out = [xp.where(small, s, xp.where(mid, m, f)) for s, m, f in zip(*parts, strict=True)]
    out[0] = xp.where(a == 0, 1.0, out[0])
    out[1] = xp.where(a == 0, 0.0, xp.where(x < 0, -out[1], out[1]))
    for i in (2, 3):
        out[i] = xp.where(x == 0, -xp.inf, xp.where(x < 0, xp.nan, out[i]))
    return [xp.where(xp.isnan(x), xp.nan, v) for v in out]


# ---- the modified Bessel functions K0, K1 (and K_1/3, for Ai) -----------------------------------


def _k_fraction(xp, x, mu):
    """(e^x K_μ(x), e^x K_{μ+1}(x)) of x >= 2, |μ| <= 1/2, by Steed's CF2 (Temme; Numerical
    Recipes' bessik)."""
    b = 2 * (1 + x)
    d = 1 / b
    h = delh = d
    q1, q2 = xp.zeros_like(x), xp.ones_like(x)
    a1 = 0.25 - mu * mu
    q = c = a1
    a = -a1
    s = 1 + q * delh
    for i in range(2, 400):
        a = a - 2 * (i - 1)
        c = -a * c / i
        qnew = (q1 - b * q2) / a
        q1, q2 = q2, qnew
        q = q + c * qnew
        b = b + 2
        d = 1 / (b + a * d)
        delh = (b * d - 1) * delh
        h = h + delh
        dels = q * delh
        s = s + dels
        if not bool((xp.abs(dels) > 1e-17 * xp.abs(s)).any()):
            break
    k_mu = xp.sqrt(math.pi / (2 * x)) / s
    return k_mu, k_mu * (mu + x + 0.5 - a1 * h) / x


def bessel_k_f64(be, x, scaled):
    """(K0, K1) of float64 x, times e^x where scaled: the series to 2, CF2 above; inf at 0,
    NaN below 0, 0 at inf (as torch's)."""
    xp = be.xp
    small = x <= 2
    with quiet():
        a = xp.where(small & (x > 0), x, 1.0)
        s0, s1, h0, h1 = _log_series(xp, a, 1.0)
        log_half = xp.log(a / 2)
        k0 = h0 - (log_half + EULER) * s0
        k1 = 1 / a + log_half * a / 2 * s1 - a / 4 * h1
        if scaled:
            k0, k1 = k0 * xp.exp(a), k1 * xp.exp(a)
        big = xp.where(small | ~xp.isfinite(x), 3.0, x)
        f0, f1 = _k_fraction(xp, big, 0.0)
        if not scaled:
            f0, f1 = f0 * xp.exp(-big), f1 * xp.exp(-big)
    out = []
    for s, f in ((k0, f0), (k1, f1)):
        v = xp.where(small, s, f)
        v = xp.where(x == 0, xp.inf, xp.where(x == xp.inf, 0.0, v))
        out.append(xp.where((x < 0) | xp.isnan(x), xp.nan, v))
    return out


# ---- Airy's Ai ----------------------------------------------------------------------------------

_U = [1.0]
for _k in range(1, 32):
    _U.append(_U[-1] * (6 * _k - 5) * (6 * _k - 3) * (6 * _k - 1) / ((2 * _k - 1) * 216 * _k))
_V = [1.0] + [-(6 * k + 1) / (6 * k - 1) * u for k, u in enumerate(_U[1:], start=1)]


def _airy_steps(xp, x, steps=24, order=28):
    """(Ai, Ai') at x in [-10, 2.09) by `steps` Taylor steps of Ai'' = t Ai from (Ai(0),
    Ai'(0)): at t, e_k = a_k h^(k-1) of the Taylor coefficients a_k, a_{k+2} = (t a_k +
    a_{k-1}) / ((k+1)(k+2))."""
    h = x / steps
    y, dy = xp.full_like(x, AI0), xp.full_like(x, AIP0)
    for i in range(steps):
        t = i * h
        e = [None, dy, t * y * h / 2, (t * dy + y) * h * h / 6]
        for k in range(2, order - 1):
            e.append((t * h * h * e[k] + h ** 3 * e[k - 1]) / ((k + 2) * (k + 1)))
        y = y + h * sum(e[1:])
        dy = sum(k * e[k] for k in range(1, len(e)))
    return y, dy


def _airy_negative(xp, x):
    """(Ai, Ai') at x <= -10: the asymptotic series in 1/ζ, ζ = (2/3) (-x)^(3/2)."""
    z = -x
    zeta = 2 / 3 * z * xp.sqrt(z)
    w = 1 / zeta
    sums = [xp.zeros_like(x) for _ in range(4)]  # u even, u odd, v even, v odd
    power = xp.ones_like(x)
    for k in range(len(_U)):
        sign = (-1) ** (k // 2)
        sums[k % 2] = sums[k % 2] + sign * _U[k] * power
        sums[2 + k % 2] = sums[2 + k % 2] + sign * _V[k] * power
        power = power * w
    c, s = xp.cos(zeta) * SQRT1_2, xp.sin(zeta) * SQRT1_2
    cos_, sin_ = c + s, s - c  # cos(ζ - π/4), sin(ζ - π/4)
    quarter = z ** 0.25 / math.sqrt(math.pi)  # z^(1/4) / √π
    return ((cos_ * sums[0] + sin_ * sums[1]) / (math.pi * quarter),
            quarter * (sin_ * sums[2] - cos_ * sums[3]))


def airy_f64(be, x):
    """(Ai(x), Ai'(x)) of float64 x: steps on [-10, 2.09), Ai = √(x/3) K_{1/3}(ζ) / π and Ai' =
    -x K_{2/3}(ζ) / (π√3) by CF2 above (0 past 103.892, as torch's), the asymptotic series
    below -10; NaN at ±inf."""
    xp = be.xp
    steps = (x >= -10) & (x < 2.09)
    right = (x >= 2.09) & (x <= 103.892)
    with quiet():
        mid = _airy_steps(xp, xp.where(steps, x, 0.0))
        r = xp.where(right, x, 4.0)
        zeta = 2 / 3 * r * xp.sqrt(r)
        k13, k43 = _k_fraction(xp, zeta, 1 / 3)
        decay = xp.exp(-zeta) / math.pi
        high = (xp.sqrt(r / 3) * k13 * decay, -r / math.sqrt(3) * (k43 - 2 / (3 * zeta) * k13)
                * decay)
        low = _airy_negative(xp, xp.where(x < -10, x, -20.0))
    out = []
    for m, hi, lo in zip(mid, high, low, strict=True):
        v = xp.where(steps, m, xp.where(right, hi, xp.where(x < -10, lo, 0.0)))
        out.append(xp.where(xp.isinf(x) | xp.isnan(x), xp.nan, v))
    return out


# ---- the Bessel-type ops -----------------------------------------------------------------------

_BESSEL_SAMPLES = [case((2, 3)), case(vals([-7.3, -0.6, 0.4, 3.9, 4.1, 11.0, 24.5, 31.0])),
                   case(())]
_POSITIVE_SAMPLES = [case(within((2, 3), 0.1, 6.0)), case(vals([0.05, 1.99, 2.01, 4.1, 30.0])),
                     case(within((), 0.5, 3.0))]


def _jy(be, x, i):
    return _back(bessel_jy_f64(be, _wide(x))[i], x)


def _k(be, x, i, scaled):
    return _back(bessel_k_f64(be, _wide(x), scaled)[i], x)


def _over_x(be, x, value, fn, limit):
    """value - fn(x)/x, its limit (fn(x) ≈ x/2 + ..., limit + O(x²)) where |x| < 1e-5."""
    xp = be.xp
    tiny = xp.abs(x) < 1e-5
    safe = xp.where(tiny, 1.0, x)
    with quiet():
        return xp.where(tiny, limit(x), value - fn(safe) / safe)


@op("bessel_j0", "gx = -g * bessel_j1(x)", promote="float", saves={0: 0},
    samples=_BESSEL_SAMPLES)
def bessel_j0(be, x):
    """out = J_0(x), the Bessel function of the first kind of order 0"""
    return _jy(be, x, 0), (x,)


@bessel_j0.defvjp
def bessel_j0_vjp(be, g, saved):
    (x,) = saved
    return (-g * _jy(be, x, 1),)


@op("bessel_j1", "gx = g * (bessel_j0(x) - out / x) (g / 2 at 0)", promote="float",
    saves={0: 0}, samples=_BESSEL_SAMPLES)
def bessel_j1(be, x):
    """out = J_1(x), the Bessel function of the first kind of order 1"""
    return _jy(be, x, 1), (x,)


@bessel_j1.defvjp
def bessel_j1_vjp(be, g, saved):
    (x,) = saved
    w = _wide(x)
    j0, _, _, _ = bessel_jy_f64(be, w)
    slope = _over_x(be, w, j0, lambda v: bessel_jy_f64(be, v)[1], lambda v: 0.5 - 3 * v * v / 16)
    return (g * _back(slope, g),)


@op("bessel_y0", "gx = -g * bessel_y1(x)", promote="float", saves={0: 0},
    samples=_POSITIVE_SAMPLES)
def bessel_y0(be, x):
    """out = Y_0(x), the Bessel function of the second kind of order 0"""
    return _jy(be, x, 2), (x,)


@bessel_y0.defvjp
def bessel_y0_vjp(be, g, saved):
    (x,) = saved
    return (-g * _jy(be, x, 3),)


@op("bessel_y1", "gx = g * (bessel_y0(x) - out / x)", promote="float", saves={0: 0},
    saves_out=1, samples=_POSITIVE_SAMPLES)
def bessel_y1(be, x):
    """out = Y_1(x), the Bessel function of the second kind of order 1"""
    out = _jy(be, x, 3)
    return out, (x, out)


@bessel_y1.defvjp
def bessel_y1_vjp(be, g, saved):
    x, out = saved
    xp = be.xp
    with quiet():
        slope = xp.where(x == 0, xp.inf, _jy(be, x, 2) - out / x)
    return (g * slope,)


def _i(be, x, nu):
    return _back(bessel_i_f64(be, _wide(x), nu, False), x)


@op("modified_bessel_i0", "gx = g * modified_bessel_i1(x)", promote="float", saves={0: 0},
    samples=_BESSEL_SAMPLES)
def modified_bessel_i0(be, x):
    """out = I_0(x), the modified Bessel function of the first kind of order 0"""
    return _i(be, x, 0), (x,)


@modified_bessel_i0.defvjp
def modified_bessel_i0_vjp(be, g, saved):
    (x,) = saved
    return (g * _i(be, x, 1),)


@op("modified_bessel_i1", "gx = g * (modified_bessel_i0(x) - out / x) (g / 2 at 0)",
    promote="float", saves={0: 0}, samples=_BESSEL_SAMPLES)
def modified_bessel_i1(be, x):
    """out = I_1(x), the modified Bessel function of the first kind of order 1"""
    return _i(be, x, 1), (x,)


@modified_bessel_i1.defvjp
def modified_bessel_i1_vjp(be, g, saved):
    (x,) = saved
    w = _wide(x)
    slope = _over_x(be, w, bessel_i_f64(be, w, 0, False),
                    lambda v: bessel_i_f64(be, v, 1, False), lambda v: 0.5 + 3 * v * v / 16)
    return (g * _back(slope, g),)


def _k_slope(be, x, order, scaled):
    """d/dx of K0 (-K1), K1 (-K0 - K1/x), e^x K0 (its K0 - K1) or e^x K1 (K1 - K0 - K1/x):
    -inf at 0."""
    xp = be.xp
    w = _wide(x)
    k0, k1 = bessel_k_f64(be, w, scaled)
    with quiet():
        slope = -k1 if order == 0 else -k0 - k1 / w
        if scaled:
            slope = slope + (k0 if order == 0 else k1)
        slope = xp.where(w == 0, -xp.inf, slope)
    return _back(slope, x)


def _k_op(name, order, scaled, formula, doc):
    @op(name, formula, promote="float", saves={0: 0}, samples=_POSITIVE_SAMPLES)
    def forward(be, x):
        return _k(be, x, order, scaled), (x,)

    @forward.defvjp
    def forward_vjp(be, g, saved):
        (x,) = saved
        return (g * _k_slope(be, x, order, scaled),)

    forward.doc = f"out = {doc}"
    return forward


modified_bessel_k0 = _k_op("modified_bessel_k0", 0, False, "gx = -g * modified_bessel_k1(x)",
                           "K_0(x), the modified Bessel function of the second kind of order 0")
modified_bessel_k1 = _k_op("modified_bessel_k1", 1, False,
                           "gx = -g * (modified_bessel_k0(x) + out / x)",
                           "K_1(x), the modified Bessel function of the second kind of order 1")
scaled_modified_bessel_k0 = _k_op(
    "scaled_modified_bessel_k0", 0, True, "gx = g * (out - scaled_modified_bessel_k1(x))",
    "e^x K_0(x)")
scaled_modified_bessel_k1 = _k_op(
    "scaled_modified_bessel_k1", 1, True,
    "gx = g * (out (1 - 1/x) - scaled_modified_bessel_k0(x))", "e^x K_1(x)")


def spherical_j0_f64(be, x):
    """sin(x)/x of float64 x: 1 at 0, 0 at ±inf."""
    xp = be.xp
    with quiet():
        out = xp.where(x == 0, 1.0, xp.sin(x) / xp.where(x == 0, 1.0, x))
    return xp.where(xp.isinf(x), 0.0, out)


def _spherical_j0_slope(be, x):
    """(x cos x - sin x) / x², by its series Σ_{k>=1} (-1)^k 2k x^(2k-1) / (2k+1)! below |x| =
    1 (no cancellation); 0 at ±inf."""
    xp = be.xp
    near = xp.where(xp.abs(x) < 1, x, 0.0)
    term, total = -near / 3, -near / 3
    for k in range(2, 13):
        term = -term * near * near * k / ((k - 1) * (2 * k) * (2 * k + 1))
        total = total + term
    far = xp.where(xp.abs(x) < 1, 1.0, x)
    with quiet():
        out = xp.where(xp.abs(x) < 1, total, (xp.cos(far) - xp.sin(far) / far) / far)
    return xp.where(xp.isinf(x), 0.0, out)


@op("spherical_bessel_j0", "gx = g * (x cos x - sin x) / x²", promote="float", saves={0: 0},
    samples=_BESSEL_SAMPLES)
def spherical_bessel_j0(be, x):
    """out = j_0(x) = sin(x) / x, the spherical Bessel function of the first kind of order 0"""
    return _back(spherical_j0_f64(be, _wide(x)), x), (x,)


@spherical_bessel_j0.defvjp
def spherical_bessel_j0_vjp(be, g, saved):
    (x,) = saved
    return (g * _back(_spherical_j0_slope(be, _wide(x)), g),)


@op("airy_ai", "gx = g * Ai'(x)", promote="float", saves={0: 0},
    samples=[case((2, 3)), case(vals([-14.0, -9.9, -3.0, 0.0, 2.0, 2.2, 6.0])), case(())])
def airy_ai(be, x):
    """out = Ai(x), the Airy function of the first kind"""
    return _back(airy_f64(be, _wide(x))[0], x), (x,)


@airy_ai.defvjp
def airy_ai_vjp(be, g, saved):
    (x,) = saved
    return (g * _back(airy_f64(be, _wide(x))[1], g),)


POLYNOMIAL_OPS = (chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v,
                  chebyshev_polynomial_w, shifted_chebyshev_polynomial_t,
                  shifted_chebyshev_polynomial_u, shifted_chebyshev_polynomial_v,
                  shifted_chebyshev_polynomial_w, hermite_polynomial_h, hermite_polynomial_he,
                  laguerre_polynomial_l, legendre_polynomial_p)
BESSEL_OPS = (bessel_j0, bessel_j1, bessel_y0, bessel_y1, modified_bessel_i0, modified_bessel_i1,
              modified_bessel_k0, modified_bessel_k1, scaled_modified_bessel_k0,
              scaled_modified_bessel_k1, spherical_bessel_j0, airy_ai)
OPS = POLYNOMIAL_OPS + BESSEL_OPS
