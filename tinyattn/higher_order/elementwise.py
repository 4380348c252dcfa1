"""The graph VJPs of the elementwise math beyond core.py's: the other unary functions
(log1p, expm1, trig and hyperbolic, rsqrt...), the binary ones (atan2, hypot, lerp,
addcmul...) and the activations (leaky_relu, elu, silu, softplus, hardtanh...).

Each is its op's array VJP written again with tensor ops. A piecewise one picks its branches
with a constant mask (as the array VJPs select), so NaN or inf in a branch not taken never
reaches a gradient; a flat one (floor, sign...) gives constant zeros, which depend on nothing.
The special functions of ops/special_more.py are here too (polygamma, zeta, gammainc, i1,
xlog1py...). Uncovered: the float16 fused addcmul/addcdiv nodes (not registered ops; other
dtypes record mul/div/add, covered in core.py)."""

import math

import numpy as np

from ..ops.activation import SELU_ALPHA, SELU_SCALE
from ..ops.op import quiet
from ..ops.pointwise import LN2, LN10, TWO_OVER_SQRT_PI
from ..ops.special import SQRT_PI
from ..ops.special_more import SQRT_2PI, refused
from .base import call, const, masked, sum_dims, tensor_on


def _pick(c, cond, a, b):
    """a where cond, else b (cond a constant mask; a, b Tensors or numbers)."""
    return call("where", c.be.xp.asarray(cond, dtype=bool), a, b)


def _zeros(c):
    """A flat function's gradient: zeros like g, a constant (no graph)."""
    return const(c, c.be.xp.zeros_like(c.g._data))


# ---- activations: smooth ------------------------------------------------------------------


def _silu(c):
    x = c.input(0)
    s = call("sigmoid", x)
    return (c.g * s * (1 + x * (1 - s)),)


def _softplus(c):
    beta, threshold = c.params.get("beta", 1.0), c.params.get("threshold", 20.0)
    with quiet():
        over = c.saved[0] * beta > threshold
    return (_pick(c, over, c.g, c.g * call("sigmoid", c.input(0) * beta)),)


def _mish(c):
    x = c.input(0)
    t = call("tanh", call("softplus", x))
    return (c.g * (t + x * call("sigmoid", x) * (1 - t * t)),)


def _exp_side(c, positive, factor, scale=1.0):
    """g * (positive where x > 0, else factor e^(x / scale)); the exp only sees x <= 0 (a NaN
    x takes the positive side, as the array VJPs)."""
    neg = c.saved[0] <= 0
    e = call("exp", masked(c, neg, c.input(0)) / scale)
    return (_pick(c, neg, c.g * (factor * e), c.g * positive),)


def _elu(c):
    return _exp_side(c, 1, c.params.get("alpha", 1.0))


def _selu(c):
    return _exp_side(c, SELU_SCALE, SELU_SCALE * SELU_ALPHA)


def _celu(c):
    return _exp_side(c, 1, 1, c.params.get("alpha", 1.0))


def _logsigmoid(c):
    return (c.g * call("sigmoid", -c.input(0)),)


def _softsign(c):
    d = 1 + call("abs", c.input(0))
    return (c.g / (d * d),)


def _tanhshrink(c):
    # saves tanh x, not x: x rebuilt as artanh(tanh x) on x's node (±inf where tanh x rounds
    # to ±1, whose tanh is ±1 again), so tanh of it is tanh x (to an ulp) with its derivatives
    if not c.need(0):
        return (None,)
    with quiet():
        x = tensor_on(c.be.xp.arctanh(c.saved[0]), c.be, c.node.parents[0])
    t = call("tanh", x)
    return (c.g * (t * t),)


# ---- activations: piecewise linear ----------------------------------------------------------


def _leaky_relu(c):
    return (_pick(c, c.saved[0] > 0, c.g, c.g * c.params.get("negative_slope", 0.01)),)


def _hardtanh(c):
    x = c.saved[0]
    lo, hi = c.params.get("min_val", -1.0), c.params.get("max_val", 1.0)
    return (masked(c, ~((x <= lo) | (x >= hi)), c.g),)


def _hardsigmoid(c):
    x = c.saved[0]
    return (masked(c, (x > -3) & (x < 3), c.g) / 6,)


def _hardswish(c):
    x = c.saved[0]
    inner = _pick(c, x < 3, c.g * (c.input(0) / 3 + 0.5), c.g)
    return (masked(c, ~(x <= -3), inner),)


def _threshold(c):
    return (masked(c, ~(c.saved[0] <= c.params["threshold"]), c.g),)


def _shrink(c):
    x, lambd = c.saved[0], c.params.get("lambd", 0.5)
    return (masked(c, ~((x >= -lambd) & (x <= lambd)), c.g),)


def _prelu(c):
    x, weight = c.saved
    pos = x > 0
    gx = gw = None
    if c.need(0):
        shape = () if weight.size == 1 else (1, weight.size) + (1,) * (x.ndim - 2)
        gx = _pick(c, pos, c.g, c.g * call("reshape", c.input(1), shape=shape))
    if c.need(1):
        axes = tuple(d for d in range(x.ndim) if weight.size == 1 or d != 1)
        gw_all = masked(c, ~pos, c.g * c.input(0))
        gw = call("reshape", sum_dims(gw_all, axes), shape=tuple(weight.shape))
    return gx, gw


def _times_saved(c):
    """rrelu and dropout: g times the slopes (the mask) drawn in the forward, a constant."""
    return (c.g * const(c, c.saved[0]),)


# ---- unary math -----------------------------------------------------------------------------


def _log1p(c):
    return (c.g / (1 + c.input(0)),)


def _expm1(c):
    return (c.g * (c.out() + 1),)


def _rsqrt(c):
    y = c.out()
    return (-0.5 * c.g * y * y * y,)


def _reciprocal(c):
    y = c.out()
    return (-c.g * y * y,)


def _sinh(c):
    return (c.g * call("cosh", c.input(0)),)


def _cosh(c):
    return (c.g * call("sinh", c.input(0)),)


def _tan(c):
    y = c.out()
    return (c.g * (1 + y * y),)


def _exp2(c):
    return (c.g * c.out() * LN2,)


def _log2(c):
    return (c.g / (c.input(0) * LN2),)


def _log10(c):
    return (c.g / (c.input(0) * LN10),)


def _erfc(c):
    x = c.input(0)
    return (-c.g * TWO_OVER_SQRT_PI * call("exp", -(x * x)),)


def _erfinv(c):
    y = c.out()
    return (c.g * (SQRT_PI / 2) * call("exp", y * y),)


def _lgamma(c):
    return (c.g * call("digamma", c.input(0)),)


def _digamma(c):
    return (c.g * call("polygamma", c.input(0), n=1),)


def _polygamma(c):
    return (c.g * call("polygamma", c.input(0), n=c.params.get("n", 0) + 1),)


def _zeta(c):
    if c.params.get("refuse_grad"):
        raise refused("zeta", "x (the first input)")
    x, q = c.input(0), c.input(1)
    return None, -c.g * x * call("zeta", x + 1, q)


def _incomplete_gamma(sign):
    def vjp(c):
        if c.params.get("refuse_grad"):
            raise refused(c.node.op.name, "a (the first input)")
        a, x = c.input(0), c.input(1)
        return None, sign * c.g * call("exp", (a - 1) * call("log", x) - x - call("lgamma", a))
    return vjp


def _erfcx(c):
    return (c.g * (2 * c.input(0) * c.out() - TWO_OVER_SQRT_PI),)


def _entr(c):
    return (-c.g * (1 + call("log", c.input(0))),)


def _i0(c):
    return (c.g * call("i1", c.input(0)),)


def _i0e(c):
    x = c.input(0)
    return (c.g * (call("i1e", x) - call("sign", x) * c.out()),)


def _tiny(x):
    """Where |x| is at most its dtype's eps: the array VJP's 1/2 of I1' there (its x = 0)."""
    return abs(x) <= np.finfo(x.dtype).eps


def _i1(c):  # I1' = I0 - I1 / x, 1/2 at 0 (|x| <= eps)
    zero = _tiny(c.saved[0])
    x = c.input(0)
    return (c.g * _pick(c, zero, 0.5, call("i0", x) - c.out() / _pick(c, zero, 1.0, x)),)


def _i1e(c):  # (e^-|x| I1)' = I0e - I1e (sign x + 1 / x), 1/2 at 0 (|x| <= eps)
    zero = _tiny(c.saved[0])
    x = c.input(0)
    slope = call("i0e", x) - c.out() * (call("sign", x) + 1 / _pick(c, zero, 1.0, x))
    return (c.g * _pick(c, zero, 0.5, slope),)


def _xlog1py(c):
    x, y = c.saved
    with quiet():  # (the array VJP's zeros: x = 0 where y <= -1, and where g is 0)
        flat = ((x == 0) & (y <= -1)) | (c.g._data == 0)
    xt, yt = c.input(0), c.input(1)
    gx = masked(c, ~flat, c.g * call("log1p", yt)) if c.need(0) else None
    return gx, c.g * xt / (yt + 1) if c.need(1) else None


def _ndtri(c):
    y = c.out()
    return (c.g * SQRT_2PI * call("exp", y * y / 2),)


def _log_ndtr(c):
    x = c.input(0)
    return (c.g * call("exp", -(c.out() + x * x / 2)) / SQRT_2PI,)


def _logit(c):
    x, eps = c.saved[0], c.params.get("eps")
    xt = c.input(0)
    if eps is None:  # NaN outside [0, 1], as the function
        outside = (x < 0) | (x > 1)
        return (_pick(c, outside, math.nan, c.g / (xt * (1 - xt))),)
    keep = ~((x < eps) | (x > 1 - eps))  # clamped outside: flat there (x set to 1/2, unused)
    xs = _pick(c, keep, xt, 0.5)
    return (masked(c, keep, c.g / (xs * (1 - xs))),)


def _asin(c):
    x = c.input(0)
    return (c.g / call("sqrt", 1 - x * x),)


def _acos(c):
    x = c.input(0)
    return (-c.g / call("sqrt", 1 - x * x),)


def _atan(c):
    x = c.input(0)
    return (c.g / (1 + x * x),)


def _asinh(c):
    x = c.input(0)
    return (c.g / call("sqrt", x * x + 1),)


def _acosh(c):
    x = c.input(0)
    return (c.g / call("sqrt", x * x - 1),)


def _atanh(c):
    x = c.input(0)
    return (c.g / (1 - x * x),)


def _flat(c):
    return (_zeros(c),)


def _same(c):
    return (c.g,)


# ---- binary math ----------------------------------------------------------------------------


def _atan2(c):
    x, y = c.saved
    with quiet():  # at the origin both gradients are 0 (the array VJP's), not NaN
        zero = c.be.xp.asarray(x * x + y * y == 0)
    xt, yt = c.input(0), c.input(1)
    r = masked(c, ~zero, c.g / _pick(c, zero, 1.0, xt * xt + yt * yt))
    return r * yt if c.need(0) else None, -r * xt if c.need(1) else None


def _hypot(c):
    r = c.g / c.out()
    return (r * c.input(0) if c.need(0) else None, r * c.input(1) if c.need(1) else None)


def _lerp(c):
    start, end, weight = (c.input(i) for i in range(3))
    return (c.g * (1 - weight) if c.need(0) else None, c.g * weight if c.need(1) else None,
            c.g * (end - start) if c.need(2) else None)


def _logaddexp(c):
    # σ(x - y) = 1 / (1 + e^(y - x)): finite slopes where e^(y - x) overflows
    x, y = c.input(0), c.input(1)
    return (c.g * call("sigmoid", x - y) if c.need(0) else None,
            c.g * call("sigmoid", y - x) if c.need(1) else None)


def _copysign(c):
    x, out, y_const = c.saved
    with quiet():  # ±1 (0 at x = 0): flat in x and y
        ratio = c.be.xp.where(x == 0, 0, out / x)
    return (c.g * const(c, ratio) if c.need(0) else None,
            None if y_const or not c.need(1) else _zeros(c))


def _quotient(c, rounded):
    """fmod and remainder: gx = g, gy = -g * the rounded quotient (a constant)."""
    x, y = c.saved
    with quiet():
        q = c.be.xp.asarray(rounded(c.be.xp, x, y))
    return c.g if c.need(0) else None, -c.g * const(c, q) if c.need(1) else None


def _fmod(c):
    return _quotient(c, lambda xp, x, y: xp.trunc(x / y))


def _remainder(c):
    return _quotient(c, lambda xp, x, y: xp.floor_divide(x, y))


def _floor_divide(c):
    x_const, y_const = c.saved
    return None if x_const else _zeros(c), None if y_const else _zeros(c)


VJPS = {
    "silu": _silu, "softplus": _softplus, "mish": _mish, "elu": _elu, "selu": _selu,
    "celu": _celu, "logsigmoid": _logsigmoid, "softsign": _softsign, "tanhshrink": _tanhshrink,
    "leaky_relu": _leaky_relu, "hardtanh": _hardtanh, "hardsigmoid": _hardsigmoid,
    "hardswish": _hardswish, "threshold": _threshold, "softshrink": _shrink,
    "hardshrink": _shrink, "prelu": _prelu, "rrelu": _times_saved, "dropout": _times_saved,
    "log1p": _log1p, "expm1": _expm1, "rsqrt": _rsqrt, "reciprocal": _reciprocal,
    "sinh": _sinh, "cosh": _cosh, "tan": _tan, "exp2": _exp2, "log2": _log2, "log10": _log10,
    "erfc": _erfc, "erfinv": _erfinv, "lgamma": _lgamma, "logit": _logit,
    "digamma": _digamma, "polygamma": _polygamma, "zeta": _zeta,
    "gammainc": _incomplete_gamma(1), "gammaincc": _incomplete_gamma(-1), "erfcx": _erfcx,
    "entr": _entr, "i0": _i0, "i0e": _i0e, "i1": _i1, "i1e": _i1e, "xlog1py": _xlog1py,
    "ndtri": _ndtri, "log_ndtr": _log_ndtr,
    "asin": _asin, "acos": _acos, "atan": _atan, "asinh": _asinh, "acosh": _acosh,
    "atanh": _atanh, "ceil": _flat, "floor": _flat, "round": _flat, "trunc": _flat,
    "sign": _flat, "frac": _same, "atan2": _atan2, "hypot": _hypot, "lerp": _lerp,
    "logaddexp": _logaddexp, "copysign": _copysign, "fmod": _fmod, "remainder": _remainder,
    "floor_divide": _floor_divide,
}
