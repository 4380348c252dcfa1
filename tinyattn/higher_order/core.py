"""The graph VJPs of the core ops: arithmetic, pow, exp/log/sqrt, tanh/sigmoid/relu/gelu,
sin/cos/abs/erf, maximum/minimum/where/clamp, sum/mean, the shape ops, matmul/linear,
softmax/log_softmax/scaled_masked_softmax, layer_norm and cross_entropy: each the op's VJP
written again with tensor ops (see tinyattn/higher_order/__init__.py)."""

import math

import numpy

from ..ops.elementwise import sgn
from ..ops.op import is_const, quiet, quietly
from .base import call, const, masked, sum_dims, sum_to, swap_last, tensor_on, unreduce


def _add(c):
    return c.g, c.g


def _sub(c):
    return c.g, (-c.g if c.need(1) else None)


def _mul(c):
    return (c.g * c.input(1) if c.need(0) else None,
            c.g * c.input(0) if c.need(1) else None)


def _div(c):
    g = c.g
    x, y = c.saved
    if is_const(x):  # c / y keeps r = 1/y: y rebuilt as 1/r (its node the input's)
        r = 1 / tensor_on(1 / y, c.be, c.node.parents[1])
        return None, -(g * x) * (r * r)
    y_t = c.input(1)
    return (g / y_t if c.need(0) else None,
            -g * (c.input(0) / y_t / y_t) if c.need(1) else None)


def _neg(c):
    return (-c.g,)


@quietly  # (at x = 0: 0 ** -1 = inf, 0 * log 0 = NaN where masked out: silently, as torch)
def _pow(c):
    g, (x, y, _) = c.g, c.saved
    gx = gy = None
    if c.need(0):
        x_t = c.input(0)
        if is_const(y):
            gx = g * (y * x_t ** (y - 1)) if y != 0 else g * 0.0
        else:
            y_t = c.input(1)
            gx = masked(c, y != 0, g * (y_t * x_t ** (y_t - 1)))
    if c.need(1):
        flat = (x == 0) & (y >= 0)
        log_x = c.input(0).log() if not is_const(x) else math.log(x) if x > 0 else \
            float("-inf") if x == 0 else float("nan")
        gy = g * masked(c, ~flat, c.out() * log_x)
    return gx, gy


def _exp(c):
    return (c.g * c.out(),)


def _log(c):
    return (c.g / c.input(0),)


def _sqrt(c):
    return (c.g / (2 * c.out()),)


def _tanh(c):
    y = c.out()
    return (c.g * (1 - y * y),)


def _sigmoid(c):
    y = c.out()
    return (c.g * y * (1 - y),)


def _relu(c):
    return (masked(c, c.saved[0] != 0, c.g),)


def _sin(c):
    return (c.g * c.input(0).cos(),)


def _cos(c):
    return (-c.g * c.input(0).sin(),)


def _abs(c):
    return (c.g * const(c, sgn(c.be.xp, c.saved[0])),)


def _square(c):
    return (2 * c.g * c.input(0),)


def _erf(c):
    x = c.input(0)
    return (c.g * (2 / math.sqrt(math.pi)) * (-(x * x)).exp(),)


def _reduce_sum(c):
    axes, shape = c.saved
    return (unreduce(c.g, axes, c.params.get("keepdim", False), shape),)


def _reduce_mean(c):
    axes, shape = c.saved
    n = math.prod(shape[a] for a in axes)
    return (unreduce(c.g / n, axes, c.params.get("keepdim", False), shape),)


def _reshape(c):
    return (call("reshape", c.g, shape=tuple(c.saved[0])),)


def _permute(c):
    dims = c.params["dims"]
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d % len(dims)] = i
    return (call("permute", c.g, dims=tuple(inverse)),)


def _same(c):
    return (c.g,)


def _getitem(c):
    shape, dtype, advanced = c.saved
    if advanced:  # the entries x[index] read, by their flat places: g scatter-added there
        where = c.be.xp.arange(math.prod(shape)).reshape(shape)[c.params["index"]]
        flat = call("scatter_add", const(c, c.be.xp.zeros(math.prod(shape), dtype=c.g.dtype)),
                    where.reshape(-1), call("reshape", c.g, shape=(-1,)), dim=0)
        return (call("reshape", flat, shape=tuple(shape)),)
    zeros = const(c, c.be.xp.zeros(shape, dtype=dtype))
    return (call("setitem", zeros, c.g, steps=(c.params["index"],)),)


def _setitem(c):
    steps = c.params["steps"]
    gx = call("setitem", c.g, 0.0, steps=steps) if c.need(0) else None
    gv = None
    if c.need(1):
        gv = c.g
        for index in steps:
            gv = call("getitem", gv, index=index)
        if c.saved[0] > gv.ndim:
            gv = call("reshape", gv, shape=(1,) * (c.saved[0] - gv.ndim) + tuple(gv.shape))
    return gx, gv


def _cast(c):
    return (call("cast", c.g, dtype=c.saved[0]),)


def _split_ties(c, loses):
    x, y = c.saved
    xp = c.be.xp
    share = xp.where(xp.asarray(x == y), 0.5, 1.0).astype(c.g.dtype)
    return (c.g * const(c, share * ~loses(x, y)) if c.need(0) else None,
            c.g * const(c, share * ~loses(y, x)) if c.need(1) else None)


def _maximum(c):
    return _split_ties(c, numpy.less)


def _minimum(c):
    return _split_ties(c, numpy.greater)


def _where(c):
    cond = c.saved[0]
    return (None, masked(c, cond, c.g) if c.need(1) else None,
            masked(c, ~cond, c.g) if c.need(2) else None)


def _clip(c):
    x = c.saved[0]
    lo, hi = c.params.get("min"), c.params.get("max")
    inside = numpy.ones(numpy.shape(x), dtype=bool)
    if lo is not None:
        inside &= x >= lo
    if hi is not None:
        inside &= x <= hi
    return (masked(c, inside, c.g),)


def _clamp(c):
    x, lo, hi = c.saved
    inside = True if lo is None else x >= lo
    if hi is not None:
        inside = inside & (x <= hi)
    glo = ghi = None
    if c.need(1):
        glo = masked(c, x < lo if hi is None else (x < lo) & (lo < hi), c.g)
    if c.need(2):
        ghi = masked(c, x > hi if lo is None else (x > hi) | (hi < lo), c.g)
    return (masked(c, inside, c.g) if c.need(0) else None), glo, ghi


def _matmul(c):
    x, y = c.saved
    g = c.g
    x2 = c.input(0) if c.need(1) else None
    y2 = c.input(1) if c.need(0) else None
    if x.ndim == 1 and x2 is not None:
        x2 = call("reshape", x2, shape=(1, x.shape[0]))
    if y.ndim == 1 and y2 is not None:
        y2 = call("reshape", y2, shape=(y.shape[0], 1))
    if y.ndim == 1:
        g = call("reshape", g, shape=(*g.shape, 1))
    if x.ndim == 1:
        g = call("reshape", g, shape=(*g.shape[:-1], 1, g.shape[-1]))
    gx = gy = None
    if y2 is not None:
        gx = g @ swap_last(y2)
        if x.ndim == 1:
            gx = call("reshape", gx, shape=(*gx.shape[:-2], gx.shape[-1]))
    if x2 is not None:
        gy = swap_last(x2) @ g
        if y.ndim == 1:
            gy = call("reshape", gy, shape=tuple(gy.shape[:-1]))
    return gx, gy


def _linear(c):
    x, weight, n_inputs, bias_shape = c.saved
    g = c.g if weight.ndim == 2 else call("reshape", c.g, shape=(*c.g.shape, 1))
    g2 = call("reshape", g, shape=(math.prod(g.shape[:-1]), g.shape[-1]))
    gx = gw = gb = None
    if c.need(0):
        w2 = c.input(1)
        w2 = w2 if weight.ndim == 2 else call("reshape", w2, shape=(1, weight.shape[0]))
        gx = call("reshape", g2 @ w2, shape=tuple(x.shape))
    if c.need(1):
        x2 = call("reshape", c.input(0), shape=(math.prod(x.shape[:-1]), x.shape[-1]))
        gw = call("reshape", swap_last(g2) @ x2, shape=tuple(weight.shape))
    if bias_shape is not None and c.need(2):
        gb = sum_to(c.g, bias_shape)
    return (gx, gw, gb)[:n_inputs]


def _softmax_like(c, y, dim, scale=None):
    g = c.g
    if y.ndim == 0:
        gx = y * (g - g * y)
    else:
        gx = y * (g - (g * y).sum(dim=dim, keepdim=True))
    return gx if scale is None else gx * scale


def _softmax(c):
    return (_softmax_like(c, c.out(), c.params.get("dim", -1)),)


def _log_softmax(c):
    out, g = c.out(), c.g
    s = g if out.ndim == 0 else g.sum(dim=c.params.get("dim", -1), keepdim=True)
    return (g - out.exp() * s,)


def _scaled_masked_softmax(c):
    return _softmax_like(c, c.out(), -1, c.params.get("scale", 1.0)), None


def _layer_norm(c):
    xhat, rstd, weight, has_bias = c.saved
    n_dims, eps = c.params.get("n_dims", 1), c.params.get("eps", 1e-5)
    g = c.g
    norm = tuple(range(xhat.ndim - n_dims, xhat.ndim))
    batch = tuple(range(xhat.ndim - n_dims))
    # x itself is not saved; x - mean(x) = x̂ / rstd is, and the formulas are shift-invariant
    # in x, so a tensor on it whose node is x's gives the same values and derivatives
    with quiet():
        xc = tensor_on(xhat / rstd, c.be, c.node.parents[0])
    xc = xc - xc.mean(dim=norm, keepdim=True)
    r = ((xc * xc).mean(dim=norm, keepdim=True) + eps) ** -0.5
    xh = xc * r
    gh = g * c.input(1) if weight is not None else g
    gx = r * (gh - gh.mean(dim=norm, keepdim=True) - xh * (gh * xh).mean(dim=norm, keepdim=True))
    gw = sum_dims(g * xh, batch) if weight is not None and c.need(1) else None
    gb = sum_dims(g, batch) if has_bias and c.need(2) else None
    return (gx if c.need(0) else None, gw, gb)[:len(c.node.parents)]


def _gelu(c):
    x, g = c.input(0), c.g
    if c.params.get("approximate", "none") == "tanh":
        k, a = math.sqrt(2 / math.pi), 0.044715
        t = (k * (x + a * x * x * x)).tanh()
        return (g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * a * x * x)),)
    cdf = 0.5 * (1 + call("erf", x * (1 / math.sqrt(2))))
    pdf = (-0.5 * (x * x)).exp() * (1 / math.sqrt(2 * math.pi))
    return (g * (cdf + x * pdf),)


def _ce_weights(c, t, valid):
    """cross_entropy's weight of each row, (M,), or one number (0-d) for all."""
    g, reduction = c.g, c.params.get("reduction", "mean")
    if reduction == "none":
        w = call("reshape", g, shape=(-1,))
    elif reduction == "sum":
        w = g
    else:
        w = g / (len(t) if valid is None else max(int(valid.sum()), 1))
    if valid is not None:
        w = masked(c, valid, w)
    return w


def _cross_entropy(c):
    p, t, valid, x_shape = c.saved
    xp, smooth = c.be.xp, c.params.get("label_smoothing", 0.0)
    n_class = p.shape[1]
    # x is not saved; softmax is shift-invariant in each row, so log p (x - logsumexp x), on a
    # tensor whose node is x's, gives the same values and derivatives
    with quiet():
        log_p = xp.log(p)
    moved = x_shape[:1] + x_shape[2:] + x_shape[1:2] if len(x_shape) > 2 else x_shape
    n = len(x_shape)
    if n > 2:  # (N, C, d1, ...): the tensor in x's layout, its rows with the classes last
        z = tensor_on(xp.moveaxis(log_p.reshape(moved), -1, 1), c.be, c.node.parents[0])
        z = call("permute", z, dims=(0, *range(2, n), 1))
    else:
        z = tensor_on(log_p.reshape(x_shape), c.be, c.node.parents[0])
    rows = call("reshape", z, shape=(-1, n_class))
    probs = call("softmax", rows, dim=-1)
    target = xp.zeros(p.shape, dtype=p.dtype)
    target[xp.arange(len(t)), t] = 1 - smooth
    target += smooth / n_class
    w = _ce_weights(c, t, valid)
    if w.ndim:
        w = call("reshape", w, shape=(-1, 1))
    gx = call("reshape", (probs - const(c, target)) * w, shape=tuple(moved))
    if n > 2:
        gx = call("permute", gx, dims=(0, n - 1, *range(1, n - 1)))
    return gx, None


VJPS = {
    "add": _add, "sub": _sub, "mul": _mul, "div": _div, "neg": _neg, "pow": _pow, "exp": _exp,
    "log": _log, "sqrt": _sqrt, "tanh": _tanh, "sigmoid": _sigmoid, "relu": _relu,
    "sin": _sin, "cos": _cos, "abs": _abs, "square": _square, "erf": _erf,
    "maximum": _maximum, "minimum": _minimum, "where": _where, "clip": _clip, "clamp": _clamp,
    "clone": _same, "cast": _cast, "sum": _reduce_sum, "mean": _reduce_mean,
    "reshape": _reshape, "permute": _permute, "expand": _same, "getitem": _getitem,
    "setitem": _setitem, "matmul": _matmul, "linear": _linear, "softmax": _softmax,
    "log_softmax": _log_softmax, "scaled_masked_softmax": _scaled_masked_softmax,
    "layer_norm": _layer_norm, "gelu": _gelu, "cross_entropy": _cross_entropy,
}


