"""Activations beyond relu, tanh, sigmoid and gelu: the smooth ones (silu, softplus, mish, elu,
selu, celu, logsigmoid, softsign) and the piecewise-linear ones (leaky_relu, hardtanh, relu6,
hardsigmoid, hardswish).

Each is one node with its derivative written out, as torch's are. Where a piecewise one has a
kink, the gradient there is torch's choice (noted in the VJP). The smooth ones take float16 in
float32 (`wide`) and round once, as torch. Every forward sits directly above its VJP.
"""

import math

from ..errors import DTypeError
from .elementwise import masked, sigmoid_of
from .index import fill_value
from .op import op, quiet, wide
from .samples import case, unary_grid, vals

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
def silu(be, x):
    """out = x * sigmoid(x) (swish)"""
    _floating(x, "silu")
    xw = wide(x)
    s = sigmoid_of(be.xp, xw)
    return (xw * s).astype(x.dtype, copy=False), (x, s)


@silu.defvjp
def silu_vjp(be, g, saved):
    x, s = saved
    return ((g * s * (1 + x * (1 - s))).astype(g.dtype, copy=False),)


@op("softplus", "gx = g * sigmoid(beta x)  (g where beta x > threshold)", saves={0: 0},
    samples=[case(vals([-30.0, -1.0, 0.5, 19.0, 25.0])), case((2, 3), beta=2.0, threshold=3.0),
             *unary_grid()])
def softplus(be, x, beta=1.0, threshold=20.0):
    """out = log(1 + e^(beta x)) / beta, or x where beta x > threshold (torch's switch)"""
    _floating(x, "softplus")
    xw = wide(x)
    bx = xw * beta
    out = be.xp.where(bx > threshold, xw, _softplus(be.xp, bx) / beta)
    return out.astype(x.dtype, copy=False), (x,)


@softplus.defvjp
def softplus_vjp(be, g, saved, beta=1.0, threshold=20.0):
    (x,) = saved
    bx = wide(x) * beta
    return ((g * be.xp.where(bx > threshold, 1, sigmoid_of(be.xp, bx))).astype(g.dtype,
                                                                              copy=False),)


@op("mish", "gx = g * (t + x * sigmoid(x) * (1 - t²)), t = tanh(softplus(x))", saves={0: 0},
    samples=unary_grid())
def mish(be, x):
    """out = x * tanh(softplus(x))"""
    _floating(x, "mish")
    xw = wide(x)
    t = be.xp.tanh(_softplus(be.xp, xw))
    return (xw * t).astype(x.dtype, copy=False), (x, t)


@mish.defvjp
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
        slope = xp.where(xw > 0, positive, factor * xp.exp(xp.minimum(xw, 0)))
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
        return (g * be.xp.where(x > 0, 1, be.xp.exp(x / alpha)),)


@op("logsigmoid", "gx = g * sigmoid(-x)", saves={0: 0},
    samples=[case(vals([-800.0, -2.0, 0.0, 3.0, 800.0])), *unary_grid()])
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
def softsign(be, x):
    """out = x / (1 + |x|)"""
    _floating(x, "softsign")
    return x / (1 + be.xp.abs(x)), (x,)


@softsign.defvjp
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
def hardswish(be, x):
    """out = x * clip(x / 6 + 1/2, 0, 1)"""
    _floating(x, "hardswish")
    return x * be.xp.clip(x / 6 + 0.5, 0, 1), (x,)


@hardswish.defvjp
def hardswish_vjp(be, g, saved):
    (x,) = saved  # at -3: 0 and at 3: g, the outer sides' slopes (torch's choice)
    xp = be.xp
    return (xp.where(x <= -3, 0, xp.where(x < 3, g * (x / 3 + 0.5), g)),)


OPS = (silu, softplus, mish, elu, selu, celu, logsigmoid, softsign, leaky_relu, hardtanh,
       hardsigmoid, hardswish)
