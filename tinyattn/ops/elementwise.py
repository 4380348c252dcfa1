"""Elementwise ops: arithmetic, the usual unary functions, maximum/minimum, where and clip.

Binary ops broadcast like NumPy; their gradients come back at the broadcast shape and autograd
sums them to each input's shape (`sum_to`). A Python number operand is a constant of the graph
(`is_const`), so its gradient is never computed. Every forward sits directly above its VJP.
"""

import math

from . import is_const, op

# ---- arithmetic ---------------------------------------------------------------------------------


@op("add", "gx = g, gy = g", broadcasts=True)
def add(be, x, y):
    """out = x + y"""
    return x + y, ()


@add.defvjp
def add_vjp(be, g, saved):
    return g, g


@op("sub", "gx = g, gy = -g", broadcasts=True)
def sub(be, x, y):
    """out = x - y"""
    return x - y, (is_const(y),)


@sub.defvjp
def sub_vjp(be, g, saved):
    (y_const,) = saved
    return g, None if y_const else -g


@op("mul", "gx = g * y, gy = g * x", broadcasts=True)
def mul(be, x, y):
    """out = x * y"""
    return x * y, (x, y)


@mul.defvjp
def mul_vjp(be, g, saved):
    x, y = saved
    return None if is_const(x) else g * y, None if is_const(y) else g * x


@op("div", "gx = g / y, gy = -g * x / y²", broadcasts=True)
def div(be, x, y):
    """out = x / y"""
    return x / y, (x, y)


@div.defvjp
def div_vjp(be, g, saved):
    x, y = saved
    gx = g / y
    return None if is_const(x) else gx, None if is_const(y) else -gx * x / y


@op("neg", "gx = -g")
def neg(be, x):
    """out = -x"""
    return -x, ()


@neg.defvjp
def neg_vjp(be, g, saved):
    return (-g,)


@op("pow", "gx = g * y * x^(y-1), gy = g * x^y * log(x)", broadcasts=True)
def power(be, x, y):
    """out = x ** y"""
    out = x**y
    return out, (x, y, out)


@power.defvjp
def power_vjp(be, g, saved):
    x, y, out = saved
    xp = be.xp
    gx = gy = None
    if not is_const(x):
        if is_const(y):
            gx = g * (y * x ** (y - 1)) if y != 0 else xp.zeros_like(g)
        else:  # x^0 is constant in x, even at x = 0 where y * x^(y-1) would be 0 * inf
            gx = g * xp.where(y == 0, 0, y * x ** (y - 1))
    if not is_const(y):
        # log x only where x > 0: for x <= 0 the gradient in y is taken as 0
        log_x = xp.log(xp.where(x > 0, x, 1)) if not is_const(x) else math.log(x) if x > 0 else 0
        gy = g * out * log_x
    return gx, gy


# ---- unary functions ----------------------------------------------------------------------------


@op("exp", "gx = g * out")
def exp(be, x):
    """out = e^x"""
    out = be.xp.exp(x)
    return out, (out,)


@exp.defvjp
def exp_vjp(be, g, saved):
    (out,) = saved
    return (g * out,)


@op("log", "gx = g / x")
def log(be, x):
    """out = ln x"""
    return be.xp.log(x), (x,)


@log.defvjp
def log_vjp(be, g, saved):
    (x,) = saved
    return (g / x,)


@op("sqrt", "gx = g / (2 * out)")
def sqrt(be, x):
    """out = √x"""
    out = be.xp.sqrt(x)
    return out, (out,)


@sqrt.defvjp
def sqrt_vjp(be, g, saved):
    (out,) = saved
    return (g / (2 * out),)


@op("tanh", "gx = g * (1 - out²)")
def tanh(be, x):
    """out = tanh x"""
    out = be.xp.tanh(x)
    return out, (out,)


@tanh.defvjp
def tanh_vjp(be, g, saved):
    (out,) = saved
    return (g * (1 - out * out),)


@op("sigmoid", "gx = g * out * (1 - out)")
def sigmoid(be, x):
    """out = 1 / (1 + e^-x), computed as (1 + tanh(x/2)) / 2 so that it never overflows"""
    out = 0.5 + 0.5 * be.xp.tanh(0.5 * x)
    return out, (out,)


@sigmoid.defvjp
def sigmoid_vjp(be, g, saved):
    (out,) = saved
    return (g * out * (1 - out),)


@op("relu", "gx = g * (x > 0)")
def relu(be, x):
    """out = max(x, 0)"""
    out = be.xp.maximum(x, 0)
    return out, (out,)


@relu.defvjp
def relu_vjp(be, g, saved):
    (out,) = saved
    return (g * (out > 0),)


@op("abs", "gx = g * sign(x)")
def absolute(be, x):
    """out = |x|"""
    return be.xp.abs(x), (x,)


@absolute.defvjp
def absolute_vjp(be, g, saved):
    (x,) = saved
    return (g * be.xp.sign(x),)


# ---- choosing between values --------------------------------------------------------------------


def _split_ties(be, g, x_wins, tie):
    """The gradient of max(x, y) or min(x, y) for x: all of g where x wins, half on a tie."""
    return be.xp.where(tie, g * 0.5, g * x_wins)


@op("maximum", "gx = g * [x > y] (+ g/2 on ties), gy = g - gx", broadcasts=True)
def maximum(be, x, y):
    """out = max(x, y) elementwise"""
    return be.xp.maximum(x, y), (x, y)


@maximum.defvjp
def maximum_vjp(be, g, saved):
    x, y = saved
    gx = _split_ties(be, g, x > y, x == y)
    return None if is_const(x) else gx, None if is_const(y) else g - gx


@op("minimum", "gx = g * [x < y] (+ g/2 on ties), gy = g - gx", broadcasts=True)
def minimum(be, x, y):
    """out = min(x, y) elementwise"""
    return be.xp.minimum(x, y), (x, y)


@minimum.defvjp
def minimum_vjp(be, g, saved):
    x, y = saved
    gx = _split_ties(be, g, x < y, x == y)
    return None if is_const(x) else gx, None if is_const(y) else g - gx


@op("where", "gx = where(cond, g, 0), gy = where(cond, 0, g)", broadcasts=True, nondiff=(0,))
def where(be, cond, x, y):
    """out = x where cond else y"""
    if getattr(cond, "dtype", None) != bool:
        raise TypeError(f"the condition must be a bool tensor, got {getattr(cond, 'dtype', cond)}")
    return be.xp.where(cond, x, y), (cond, x, y)


@where.defvjp
def where_vjp(be, g, saved):
    cond, x, y = saved
    xp = be.xp
    return (None, None if is_const(x) else xp.where(cond, g, 0),
            None if is_const(y) else xp.where(cond, 0, g))


@op("clip", "gx = g * [min <= x <= max]")
def clip(be, x, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    """out = min(max(x, min), max)"""
    if min is None and max is None:
        raise ValueError("clip needs min, max or both")
    return be.xp.clip(x, min, max), (x,)


@clip.defvjp
def clip_vjp(be, g, saved, min=None, max=None):  # noqa: A002
    (x,) = saved
    inside = True
    if min is not None:
        inside = x >= min
    if max is not None:
        inside = inside & (x <= max)
    return (g * inside,)


@op("cast", "gx = g converted back to x.dtype")
def cast(be, x, dtype):
    """out = x converted to dtype (float to float: the gradient flows back)"""
    return x.astype(dtype), (x.dtype,)


@cast.defvjp
def cast_vjp(be, g, saved, dtype):
    (x_dtype,) = saved
    return (g.astype(x_dtype),)


OPS = (add, sub, mul, div, neg, power, exp, log, sqrt, tanh, sigmoid, relu, absolute, maximum,
       minimum, where, clip, cast)
