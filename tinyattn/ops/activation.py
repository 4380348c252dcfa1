"""Activations beyond relu, tanh, sigmoid and gelu: the smooth ones (silu, softplus, mish, elu,
selu, celu, logsigmoid, softsign, tanhshrink), the piecewise-linear ones (leaky_relu, hardtanh,
relu6, hardsigmoid, hardswish, threshold, softshrink, hardshrink), prelu (a learned slope) and
rrelu's training form (random slopes).

Each is one node with its derivative written out, as torch's are. Where a piecewise one has a
kink, the gradient there is torch's choice (noted in the VJP). The smooth ones take float16 in
float32 (`wide`) and round once, as torch. Every forward sits directly above its VJP.
"""

import math

from ..errors import DTypeError, ShapeError, fmt_shape
from .elementwise import masked, sigmoid_of
from .index import fill_value, largest
from .op import op, quiet, quietly, wide
from .samples import GRID, case, unary_grid, vals

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _floating(x, name):
    if x.dtype.kind != "f":
        raise DTypeError(f"{name}: needs a floating-point input, got {x.dtype} (torch's rule "
                         "too); convert it with .float()")


def _softplus(xp, x):
    """log(1 + e^x), without overflow"""
    return xp.logaddexp(0, x).astype(x.dtype, copy=False)


# ---- smooth ------------------------------------------------------------------------------------


@op("silu", "gx = g * s * (1 + x * (1 - s)), s = sigmoid(x)", saves={0: 0},
    samples=unary_grid())
@quietly  # silu(-inf) = -inf * 0 = NaN, as torch
def silu(be, x):
    """out = x * sigmoid(x) (swish)"""
    _floating(x, "silu")
    xw = wide(x)
    s = sigmoid_of(be.xp, xw)
    return (xw * s).astype(x.dtype, copy=False), (x, s)


@silu.defvjp
@quietly
def silu_vjp(be, g, saved):
    x, s = saved
    return ((g * s * (1 + x * (1 - s))).astype(g.dtype, copy=False),)


@op("softplus", "gx = g * sigmoid(beta x)  (g where beta x > threshold)", saves={0: 0},
    samples=[case(vals([-30.0, -1.0, 0.5, 19.0, 25.0])), case((2, 3), beta=2.0, threshold=3.0),
             *unary_grid()])
@quietly  # (softplus of ±inf and NaN: their IEEE values, as torch)
def softplus(be, x, beta=1.0, threshold=20.0):
    """out = log(1 + e^(beta x)) / beta, or x where beta x > threshold (torch's switch)"""
    _floating(x, "softplus")
    xw = wide(x)
    bx = xw * beta
    out = be.xp.where(bx > threshold, xw, _softplus(be.xp, bx) / beta)
    return out.astype(x.dtype, copy=False), (x,)


@softplus.defvjp
@quietly
def softplus_vjp(be, g, saved, beta=1.0, threshold=20.0):
    (x,) = saved
    bx = wide(x) * beta
    return ((g * be.xp.where(bx > threshold, 1, sigmoid_of(be.xp, bx))).astype(g.dtype,
                                                                              copy=False),)


@op("mish", "gx = g * (t + x * sigmoid(x) * (1 - t²)), t = tanh(softplus(x))", saves={0: 0},
    samples=unary_grid())
@quietly  # mish(-inf) = -inf * 0 = NaN, as torch
def mish(be, x):
    """out = x * tanh(softplus(x))"""
    _floating(x, "mish")
    xw = wide(x)
    t = be.xp.tanh(_softplus(be.xp, xw))
    return (xw * t).astype(x.dtype, copy=False), (x, t)


@mish.defvjp
@quietly
def mish_vjp(be, g, saved):
    x, t = saved
    xw = wide(x)
    return ((g * (t + xw * sigmoid_of(be.xp, xw) * (1 - t * t))).astype(g.dtype, copy=False),)


@op("elu", "gx = g where x > 0, else g * alpha e^x", saves={0: 0},
    samples=[case((2, 3), alpha=0.5), *unary_grid()])
def elu(be, x, alpha=1.0):
    """out = x where x > 0, else alpha (e^x - 1)"""
    _floating(x, "elu")
    xw = wide(x)
    with quiet():
        out = be.xp.where(xw > 0, xw, alpha * be.xp.expm1(xw))
    return out.astype(x.dtype, copy=False), (x,)


@elu.defvjp
def elu_vjp(be, g, saved, alpha=1.0):
    (x,) = saved  # alpha e^x, not out + alpha: that cancels to 0 far left of 0 (float16 at -9)
    return (_negative_slope(be.xp, g, x, 1, alpha),)


def _negative_slope(xp, g, x, positive, factor):
    """g * (positive where x > 0, else factor e^x), x > 0 never reaching the exp (no overflow);
    float16 in float32."""
    xw = wide(x)
    with quiet():  # (alpha = 0 or inf: 0 * e^x, inf * e^x, as torch)
        # x <= 0 picks the exp side, as torch's test: a NaN x gets the positive slope, not NaN
        slope = xp.where(xw <= 0, factor * xp.exp(xp.minimum(xw, 0)), positive)
    return (g * slope).astype(g.dtype, copy=False)


@op("selu", "gx = g * scale where x > 0, else g * scale alpha e^x", saves={0: 0},
    samples=unary_grid())
def selu(be, x):
    """out = scale * (x where x > 0, else alpha (e^x - 1)), torch's alpha and scale"""
    _floating(x, "selu")
    xw = wide(x)
    with quiet():
        out = SELU_SCALE * be.xp.where(xw > 0, xw, SELU_ALPHA * be.xp.expm1(xw))
    return out.astype(x.dtype, copy=False), (x,)


@selu.defvjp
def selu_vjp(be, g, saved):
    (x,) = saved
    return (_negative_slope(be.xp, g, x, SELU_SCALE, SELU_SCALE * SELU_ALPHA),)


@op("celu", "gx = g where x > 0, else g * e^(x / alpha)", saves={0: 0},
    samples=[case((2, 3), alpha=2.0), *unary_grid()])
def celu(be, x, alpha=1.0):
    """out = x where x > 0, else alpha (e^(x / alpha) - 1)"""
    _floating(x, "celu")
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    with quiet():
        return be.xp.where(x > 0, x, alpha * be.xp.expm1(x / alpha)), (x,)


@celu.defvjp
def celu_vjp(be, g, saved, alpha=1.0):
    (x,) = saved
    with quiet():
        # (x <= 0 as torch tests it: at a NaN x the gradient is g, not g e^NaN)
        return (g * be.xp.where(x <= 0, be.xp.exp(x / alpha), 1),)


@op("logsigmoid", "gx = g * sigmoid(-x)", saves={0: 0},
    samples=[case(vals([-800.0, -2.0, 0.0, 3.0, 800.0])), *unary_grid()])
@quietly  # (logsigmoid of ±inf and NaN: their IEEE values, as torch)
def logsigmoid(be, x):
    """out = log sigmoid(x) = -softplus(-x), without overflow"""
    _floating(x, "logsigmoid")
    return -_softplus(be.xp, -wide(x)).astype(x.dtype, copy=False), (x,)


@logsigmoid.defvjp
def logsigmoid_vjp(be, g, saved):
    (x,) = saved
    return ((g * sigmoid_of(be.xp, -wide(x))).astype(g.dtype, copy=False),)


@op("softsign", "gx = g / (1 + |x|)²", saves={0: 0},
    samples=unary_grid())
@quietly  # softsign(±inf) = inf / inf = NaN, as torch
def softsign(be, x):
    """out = x / (1 + |x|)"""
    _floating(x, "softsign")
    return x / (1 + be.xp.abs(x)), (x,)


@softsign.defvjp
@quietly
def softsign_vjp(be, g, saved):
    (x,) = saved
    d = 1 + be.xp.abs(x)
    return (g / (d * d),)


# ---- piecewise linear --------------------------------------------------------------------------


@op("leaky_relu", "gx = g where x > 0, else g * negative_slope", saves={0: 0},
    samples=[case((2, 3), negative_slope=0.2), *unary_grid()])
def leaky_relu(be, x, negative_slope=0.01):
    """out = x where x > 0, else negative_slope * x"""
    _floating(x, "leaky_relu")  # (torch has no integer leaky_relu)
    return be.xp.where(x > 0, x, x * negative_slope), (x,)


@leaky_relu.defvjp
def leaky_relu_vjp(be, g, saved, negative_slope=0.01):
    (x,) = saved  # at 0: negative_slope, as torch
    return (be.xp.where(x > 0, g, g * negative_slope),)


@op("hardtanh", "gx = g * [not (x <= min_val or x >= max_val)]", saves={0: 0},
    samples=[case((2, 3), min_val=-0.5, max_val=0.3), case(vals([-3.0, 0.2, 7.0]), min_val=0.0,
             max_val=6.0), *unary_grid()])
def hardtanh(be, x, min_val=-1.0, max_val=1.0):
    """out = x clipped to [min_val, max_val] (relu6: [0, 6])"""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} is above max_val {max_val}")
    if x.dtype.kind != "f":  # an integer x keeps its dtype, the limits cut toward 0 (torch's)
        min_val, max_val = _integer_limits(x.dtype, min_val, max_val)
    return be.xp.clip(x, min_val, max_val), (x,)


def _integer_limits(dtype, min_val, max_val):
    """hardtanh's limits for an integer x, as torch takes them: cut toward 0, then refused past
    the dtype's range, negative for an unsigned x, and any for a bool x."""
    if dtype.kind == "b":
        raise DTypeError("hardtanh: bool inputs are not supported (torch's rule); convert them "
                         "with .long() or .float()")
    lo, hi = (math.trunc(v) if math.isfinite(v) else v for v in (min_val, max_val))
    if dtype.kind == "u" and lo < 0:
        raise DTypeError(f"hardtanh: cannot clip an unsigned {dtype} tensor to negative limits "
                         f"({min_val}, {max_val}), as torch; convert it with .long() first")
    return fill_value(lo, dtype, "hardtanh"), fill_value(hi, dtype, "hardtanh")


@hardtanh.defvjp
def hardtanh_vjp(be, g, saved, min_val=-1.0, max_val=1.0):
    (x,) = saved  # at the edges: 0, as torch (unlike clamp, which passes g there); NaN: g
    return (masked(be.xp, g, ~((x <= min_val) | (x >= max_val))),)


@op("hardsigmoid", "gx = g / 6 where -3 < x < 3, else 0", saves={0: 0},
    samples=[case(vals([-5.0, -2.0, 0.5, 2.9, 4.0])), *unary_grid()])
def hardsigmoid(be, x):
    """out = clip(x / 6 + 1/2, 0, 1)"""
    _floating(x, "hardsigmoid")
    return be.xp.clip(x / 6 + 0.5, 0, 1), (x,)


@hardsigmoid.defvjp
def hardsigmoid_vjp(be, g, saved):
    (x,) = saved
    return (masked(be.xp, g, (x > -3) & (x < 3)) / 6,)


@op("hardswish", "gx = 0 where x <= -3, g (2x + 3) / 6 where x < 3, else g", saves={0: 0},
    samples=[case(vals([-5.0, -2.0, 0.5, 2.9, 4.0])), *unary_grid()])
@quietly  # hardswish(-inf) = -inf * 0 = NaN, as torch
def hardswish(be, x):
    """out = x * clip(x / 6 + 1/2, 0, 1)"""
    _floating(x, "hardswish")
    return x * be.xp.clip(x / 6 + 0.5, 0, 1), (x,)


@hardswish.defvjp
def hardswish_vjp(be, g, saved):
    (x,) = saved  # at -3: 0 and at 3: g, the outer sides' slopes (torch's choice)
    xp = be.xp
    return (xp.where(x <= -3, 0, xp.where(x < 3, g * (x / 3 + 0.5), g)),)


# ---- shrinks, threshold, prelu and rrelu ---------------------------------------------------------


@op("tanhshrink", "gx = g * tanh(x)²", samples=unary_grid())
def tanhshrink(be, x):
    """out = x - tanh(x)"""
    _floating(x, "tanhshrink")  # (functional.tanhshrink takes integers in the default float)
    t = be.xp.tanh(x)
    return x - t, (t,)


@tanhshrink.defvjp
def tanhshrink_vjp(be, g, saved):
    (t,) = saved
    return (g * (t * t),)


def _not_bool(x, name):
    if x.dtype.kind == "b":
        raise DTypeError(f"{name}: bool inputs are not supported (torch's rule); convert them "
                         "with .long() or .float()")


@op("threshold", "gx = g where x > threshold (or NaN), else 0", saves={0: 0},
    samples=[case(vals([-1.0, 0.3, 0.7, 2.0]), threshold=0.5, value=-7.0),
             *(case(s, threshold=0.1, value=20.0) for s in GRID)])
def threshold(be, x, threshold, value):
    """out = value where x <= threshold, else x (a NaN x stays NaN)"""
    _not_bool(x, "threshold")  # an integer x keeps its dtype; both numbers are converted to it
    threshold = fill_value(threshold, x.dtype, "threshold")  # (cut toward 0, range-checked,
    value = fill_value(value, x.dtype, "threshold")  # as torch converts them)
    return be.xp.where(x <= threshold, value, x).astype(x.dtype, copy=False), (x,)


@threshold.defvjp
def threshold_vjp(be, g, saved, threshold, value):
    (x,) = saved
    return (masked(be.xp, g, ~(x <= threshold)),)


def _check_lambd(dtype, lambd, name):
    top = largest(dtype)
    if not 0 <= lambd <= top:  # (NaN too)
        raise ValueError(f"{name}: lambd must be in [0, {top:g}] for a {dtype} input, got "
                         f"{lambd!r} (torch's rule)")


@op("softshrink", "gx = g where |x| > lambd (or NaN), else 0", saves={0: 0},
    samples=[case((2, 3), lambd=0.3), case(vals([-2.0, -0.2, 0.3, 1.5])), *unary_grid()])
def softshrink(be, x, lambd=0.5):
    """out = x - lambd where x > lambd, x + lambd where x < -lambd, else 0 (NaN stays)"""
    _floating(x, "softshrink")
    _check_lambd(x.dtype, lambd, "softshrink")
    xp = be.xp
    inside = (x >= -lambd) & (x <= lambd)
    return xp.where(inside, 0, x - xp.sign(x) * lambd).astype(x.dtype, copy=False), (x,)


@softshrink.defvjp
def softshrink_vjp(be, g, saved, lambd=0.5):
    (x,) = saved  # at ±lambd: 0, as torch
    return (masked(be.xp, g, ~((x >= -lambd) & (x <= lambd))),)


@op("hardshrink", "gx = g where |x| > lambd (or NaN), else 0", saves={0: 0},
    samples=[case((2, 3), lambd=0.3), case(vals([-2.0, -0.2, 0.3, 1.5])), *unary_grid()])
def hardshrink(be, x, lambd=0.5):
    """out = x where |x| > lambd, else 0 (torch: any lambd; a negative one keeps every x)"""
    _floating(x, "hardshrink")
    keep = ~((x >= -lambd) & (x <= lambd))
    return be.xp.where(keep, x, 0).astype(x.dtype, copy=False), (x,)


@hardshrink.defvjp
def hardshrink_vjp(be, g, saved, lambd=0.5):
    (x,) = saved
    return (masked(be.xp, g, ~((x >= -lambd) & (x <= lambd))),)


def _prelu_weight(x, weight):
    """prelu's weight shaped to broadcast over x's channel dim (dim 1; none below 2 dims),
    checked as torch checks it."""
    if x.dtype.kind != "f" or weight.dtype.kind != "f":
        bad = x.dtype if x.dtype.kind != "f" else weight.dtype
        raise DTypeError(f"prelu: needs floating-point input and weight, got {bad} (torch's "
                         "rule too); convert it with .float()")
    if x.dtype != weight.dtype:
        raise DTypeError(f"prelu: input is {x.dtype} and weight {weight.dtype}; torch does not "
                         "promote them here: give both one dtype")
    if weight.ndim > 1:
        raise ShapeError(f"prelu: weight must be 0-d or 1-D (one slope, or one per channel), "
                         f"got {fmt_shape(weight.shape)}")
    channels = x.shape[1] if x.ndim >= 2 else 1
    if weight.size not in (1, channels):
        raise ShapeError(f"prelu: weight has {weight.size} slopes but input "
                         f"{fmt_shape(x.shape)} has {channels} channel{'s' * (channels != 1)} "
                         "(dim 1; one below 2 dims): give 1 slope or one per channel")
    if weight.size == 1:
        return weight.reshape(())
    return weight.reshape((1, channels) + (1,) * (x.ndim - 2))


@op("prelu", "gx = g where x > 0, else g * w; gw = sum(g * x where x <= 0) but over dim 1",
    grads=("gx", "gw"), saves={0: 0, 1: 1},
    samples=[case((2, 3, 4), (3,)), case((2, 3), (1,)), case((3,), ()), case((), (1,)),
             case(vals([-1.0, -0.5, 2.0]), vals([0.25])), case((2, 3, 2, 2), (3,))])
@quietly  # (w * x at x = +inf, unused there: 0 * inf = NaN, quietly)
def prelu(be, x, weight):
    """out = x where x > 0, else w x: one learned slope w, or one per channel (dim 1)"""
    w = _prelu_weight(x, weight)
    return be.xp.where(x > 0, x, w * x), (x, weight)


@prelu.defvjp
@quietly
def prelu_vjp(be, g, saved):
    x, weight = saved  # at 0: g * w and x g = 0 (torch's choice)
    xp = be.xp
    w = _prelu_weight(x, weight)
    gx = xp.where(x > 0, g, g * w)
    gw_all = xp.where(x > 0, 0, g * x)
    axes = tuple(d for d in range(x.ndim) if weight.size == 1 or d != 1)
    gw = gw_all.sum(axis=axes).reshape(weight.shape).astype(weight.dtype, copy=False)
    return gx, gw


def _seeded(params):
    """graphcheck re-runs rrelu with a fixed seed, so its VJP is checked for that draw."""
    return {**params, "seed": 0} if params.get("seed") is None else params


@op("rrelu", "gx = g where x > 0, else g * r (r ~ U(lower, upper), drawn in the forward)",
    float64_params=_seeded,
    samples=[case((4, 5), seed=0), case((2, 3), lower=0.1, upper=0.9, seed=3),
             case(vals([-1.0, 0.5, -2.0]), lower=0.2, upper=0.2, seed=1)])
def rrelu(be, x, lower=1.0 / 8, upper=1.0 / 3, seed=None):
    """out = x where x > 0, else r x with r ~ U(lower, upper) per entry (rrelu in training;
    torch's draw too for x = 0); r from the backend's generator, or a fresh one seeded `seed`"""
    _floating(x, "rrelu")
    xw = wide(x)
    # (drawn in float32 whatever x's dtype: graphcheck's float64 re-run sees the same slopes)
    u = be.rand(x.shape, "float32", seed=seed).astype(xw.dtype, copy=False)
    noise = be.xp.where(xw > 0, 1, lower + (upper - lower) * u).astype(xw.dtype, copy=False)
    return (xw * noise).astype(x.dtype, copy=False), (noise,)


@rrelu.defvjp
def rrelu_vjp(be, g, saved, lower=1.0 / 8, upper=1.0 / 3, seed=None):
    (noise,) = saved
    return ((g * noise).astype(g.dtype, copy=False),)


OPS = (silu, softplus, mish, elu, selu, celu, logsigmoid, softsign, leaky_relu, hardtanh,
       hardsigmoid, hardswish, tanhshrink, threshold, softshrink, hardshrink, prelu, rrelu)
