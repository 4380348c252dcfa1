"""The graph VJPs of the reductions and scans beyond core.py's sum and mean: var,
vector_norm, max/min, prod, logsumexp, cumsum, cumprod, logcumsumexp, quantile, nanmedian.

What each op saved decides how its VJP is rebuilt. var keeps x - mean(x) and logsumexp its
softmax p, not x; both are shift-invariant in x, so (as layer_norm in core.py) a tensor on
x - mean(x), or on log p = x - out, whose node is x's, stands in for x. prod and cumprod
without zeros divide by x; prod with a zero takes Π_{k≠i} x_k as the running products from
the left times those from the right (cumprod ops); cumprod with a zero, and logcumsumexp
always, take their "leave one out" products and weights over an added (n, n) pair of dims
(memory O(n²) along the scanned dim), which is exact with zeros and cannot overflow. max,
min, the ∞-norms, quantile and nanmedian send g on by weights that are constant in x (the
winners, the interpolation weights), so their graph VJPs are linear in g.
The median over every entry (Tensor.median() without a dim) is an op outside the registry
(tensor.py's _MEDIAN_ALL, named "median"), so it has no graph VJP here.
"""

import math

from ..ops.elementwise import sgn
from ..ops.op import quiet
from ..ops.reduce import var_scale
from .base import call, const, masked, tensor_on, unreduce


def _keepdim(c):
    return c.params.get("keepdim", False)


def _kept(t, axes, keepdim, shape):
    """A reduced tensor t with the reduced `axes` as size-1 dims (to broadcast against x)."""
    if keepdim:
        return t
    return call("reshape", t, shape=tuple(1 if i in axes else n for i, n in enumerate(shape)))


def _rev(t, axis):
    """t in reverse order along axis (a getitem with step -1: its graph VJP is core's)."""
    return call("getitem", t, index=(slice(None),) * axis + (slice(None, None, -1),))


def _rev_cumsum(t, axis):
    """out_i = Σ_{j >= i} t_j along axis, with tensor ops."""
    return _rev(call("cumsum", _rev(t, axis), dim=axis), axis)


def _pairs(t, axis, at):
    """t with a size-1 dim inserted at axis + (0 or 1): `at` 0 makes t's dim the second of an
    (i, j) pair of dims (indexed by j), `at` 1 the first (indexed by i)."""
    shape = tuple(t.shape)
    return call("reshape", t, shape=shape[:axis + at] + (1,) + shape[axis + at:])


def _pair_mask(c, n, axis, ndim, test):
    """A constant bool (n, n) mask over the (i, j) pair of dims at axis, axis + 1."""
    xp = c.be.xp
    i, j = xp.arange(n)[:, None], xp.arange(n)[None, :]
    return test(i, j).reshape((1,) * axis + (n, n) + (1,) * (ndim - axis - 1))


# ---- var, logsumexp ---------------------------------------------------------------------------


def _var(c):
    centered, axes, denom, whole = c.saved
    g = unreduce(c.g, axes, _keepdim(c), centered.shape)
    if denom <= 0 and whole:  # no degrees of freedom over every entry (dim=None): torch's
        # g * inf, NaN where x is the mean (constant in x); over a dim, 2 / denom as below
        xp = c.be.xp
        return (g * const(c, xp.where(centered == 0, math.nan, math.inf), g.dtype),)
    # x is not saved; x - mean(x) is, and var is shift-invariant in x, so a tensor on it whose
    # node is x's gives the same values and derivatives (as core's layer_norm)
    xc = tensor_on(centered, c.be, c.node.parents[0])
    xc = xc - xc.mean(dim=axes, keepdim=True)
    gx = g * var_scale(denom) * xc
    return (gx if gx.dtype == g.dtype else call("cast", gx, dtype=g.dtype),)


def _logsumexp(c):
    p, axes = c.saved
    with quiet():  # (an entry whose e^(x - out) underflowed: -inf, which gives p = 0 back)
        log_p = c.be.xp.log(p)
    # x is not saved; log p = x - out is, and softmax is shift-invariant in x (as core's
    # cross_entropy): p recomputed from a tensor on it whose node is x's
    z = tensor_on(log_p, c.be, c.node.parents[0])
    p_t = (z - call("logsumexp", z, dim=axes, keepdim=True)).exp()
    return (unreduce(c.g, axes, _keepdim(c), p.shape) * p_t,)


# ---- max, min: g to the winners, shared by ties ------------------------------------------------


def _extreme(c):
    """As the array VJP (ops/reduce.py, _extreme_vjp): amax/amin's g * [x == out] / k (NaN
    over a slice whose max is NaN: 0 / 0), max()/min()'s g / k selected at the winners."""
    x, out, axes, whole = c.saved
    xp = c.be.xp
    out = out if _keepdim(c) else xp.expand_dims(out, axes)
    winners = x == out
    if whole and xp.isnan(out).any():  # max() of a tensor holding NaN: the NaN entries win
        winners = xp.isnan(x)
    with quiet():
        share = winners / winners.sum(axis=axes, keepdims=True)
    g = unreduce(c.g, axes, _keepdim(c), x.shape) * const(c, share, c.g.dtype)
    return (masked(c, winners, g) if whole else g,)


# ---- prod, cumsum, cumprod, logcumsumexp -----------------------------------------------------


def _exclusive(t, axis, n, reverse):
    """Π_{k<i} t_k along axis (Π_{k>i} with reverse), 1 at the end it starts from."""
    cp = _rev(call("cumprod", _rev(t, axis), dim=axis), axis) if reverse else \
        call("cumprod", t, dim=axis)
    lead = (slice(None),) * axis
    src, dst = (slice(1, n), slice(0, n - 1)) if reverse else (slice(0, n - 1), slice(1, n))
    ones = tensor_on(t.backend.xp.ones(tuple(t.shape), dtype=t.dtype), t.backend)
    return call("setitem", ones, call("getitem", cp, index=lead + (src,)),
                steps=(lead + (dst,),))


def _prod(c):
    x, axes = c.saved
    if not axes:
        return (call("reshape", c.g, shape=tuple(x.shape)),)
    xt = c.input(0)
    g = unreduce(c.g, axes, _keepdim(c), x.shape)
    if bool((x != 0).all()):  # Π_{k≠i} x_k = out / x_i
        return (g * (call("prod", xt, dim=c.params.get("dim"), keepdim=True) / xt),)
    flat, axis = (call("reshape", xt, shape=(-1,)), 0) if len(axes) > 1 else (xt, axes[0])
    n = flat.shape[axis]
    others = _exclusive(flat, axis, n, False) * _exclusive(flat, axis, n, True)
    return (g * call("reshape", others, shape=tuple(x.shape)),)


def _cumsum(c):
    (axis,) = c.saved
    return (c.g if axis is None else _rev_cumsum(c.g, axis),)


def _cumprod(c):
    x, _, axis = c.saved
    if axis is None:
        return (c.g,)
    xt = c.input(0)
    if bool((x != 0).all()):  # gx_i = Σ_{j>=i} g_j out_j / x_i
        return (_rev_cumsum(c.g * c.out(), axis) / xt,)
    # with zeros: gx_i = Σ_{j>=i} g_j Π_{k<=j, k≠i} x_k, the cumprod of x with x_i set to 1
    n, ndim = x.shape[axis], x.ndim
    rows = call("expand", _pairs(xt, axis, 0), shape=x.shape[:axis] + (n,) + x.shape[axis:])
    left_out = call("where", _pair_mask(c, n, axis, ndim, lambda i, j: i == j), 1.0, rows)
    m = call("cumprod", left_out, dim=axis + 1)
    later = masked(c, _pair_mask(c, n, axis, ndim, lambda i, j: j >= i), _pairs(c.g, axis, 0) * m)
    return (later.sum(dim=axis + 1),)


def _logcumsumexp(c):
    x, _, axis = c.saved
    if axis is None:
        return (c.g,)
    # gx_i = Σ_{j>=i} g_j e^(x_i - out_j), each weight at most 1 (out_j >= x_i for j >= i)
    n, ndim = x.shape[axis], x.ndim
    diff = _pairs(c.input(0), axis, 1) - _pairs(c.out(), axis, 0)
    keep = _pair_mask(c, n, axis, ndim, lambda i, j: j >= i)
    w = call("where", keep, diff, -math.inf).exp()  # (-inf, not inf * 0, where j < i)
    return ((_pairs(c.g, axis, 0) * w).sum(dim=axis + 1),)


# ---- vector_norm -------------------------------------------------------------------------------


def _norm_inf(c, x, out, axes):
    """ord ±inf: g sgn(x) to the entries whose |x| is the norm, shared by ties (a NaN entry is
    a winner that gets sgn(NaN) = 0, as the array VJP)."""
    xp = c.be.xp
    winners = xp.abs(x) == out
    if xp.isnan(out).any():
        winners |= xp.isnan(x)
    share = sgn(xp, x) * winners / winners.sum(axis=axes, keepdims=True)
    return const(c, share, c.g.dtype)


def _norm_p(c, x, kept, out_t, p):
    """ord p (not 0, 1, 2, ±inf): g sgn(x) |x|^(p-1) out^(1-p), 0 where out = 0 and at x = 0;
    the powers taken of 1 there, so that their derivatives are not inf * 0."""
    xp = c.be.xp
    live = kept != 0
    a = call("where", x != 0, c.input(0).abs(), 1.0) ** (p - 1)
    scale = masked(c, live, call("where", live, out_t, 1.0) ** (1 - p))
    return const(c, sgn(xp, x), c.g.dtype) * a * scale


def _vector_norm(c):
    x, out, axes = c.saved
    p, keepdim, xp = c.params.get("ord", 2), _keepdim(c), c.be.xp
    g = unreduce(c.g, axes, keepdim, x.shape)
    if p == 0:
        return (g * 0.0,)
    if p == 1:
        return (g * const(c, sgn(xp, x), g.dtype),)
    kept = out if keepdim else xp.expand_dims(out, axes)
    if p in (math.inf, -math.inf):
        return (g * _norm_inf(c, x, kept, axes),)
    out_t = _kept(c.out(), axes, keepdim, x.shape)
    if p == 2:  # g x / out, 0 where out = 0
        live = kept != 0
        return (masked(c, live, g * c.input(0) / call("where", live, out_t, 1.0)),)
    return (g * _norm_p(c, x, kept, out_t, p),)


# ---- quantile, nanmedian: fixed weights ------------------------------------------------------


def _quantile_weights(c, order, below, above, w):
    """W (rows, Q, n): the weight of each sorted place's entry (at its place before the sort)
    in each of the row's Q quantiles."""
    xp = c.be.xp
    n = order.shape[-1]
    rows = order.size // max(n, 1)
    order2, q = order.reshape(rows, n), below.size // max(rows, 1)
    at, qi = xp.arange(rows)[:, None], xp.arange(q)[None, :]
    weights = xp.zeros((rows, q, n), dtype=c.g.dtype)
    parts = [(below, 1.0)] if w is None else [(below, 1 - w), (above, w)]
    for rank, part in parts:
        place = xp.take_along_axis(order2, rank.reshape(rows, q), axis=1)
        weights[at, qi, place] += xp.broadcast_to(part, rank.shape).reshape(rows, q)
    return weights


def _quantile(c):
    order, below, above, w, shape, axis = c.saved
    g = c.g
    if isinstance(c.params["q"], float):
        g = call("reshape", g, shape=(1, *g.shape))
    g = call("permute", g, dims=(*range(1, g.ndim), 0))  # (.., Q): q's dim last
    weights = _quantile_weights(c, order, below, above, w)
    rows, q, n = weights.shape
    g = call("reshape", g, shape=(rows, q, 1))
    gx = call("reshape", (g * const(c, weights)).sum(dim=1), shape=tuple(order.shape))
    if axis is None:
        return (call("reshape", gx, shape=tuple(shape)),)
    dims = list(range(gx.ndim - 1))
    dims.insert(axis, gx.ndim - 1)  # the reduced dim back from last to axis
    return (call("permute", gx, dims=tuple(dims)),)


def _nanmedian(c):
    ties, count = c.saved
    return (c.g * const(c, ties / count, c.g.dtype),)


VJPS = {
    "var": _var, "logsumexp": _logsumexp, "max": _extreme, "min": _extreme, "prod": _prod,
    "cumsum": _cumsum, "cumprod": _cumprod, "logcumsumexp": _logcumsumexp,
    "vector_norm": _vector_norm, "quantile": _quantile, "nanmedian": _nanmedian,
    "median": _nanmedian,  # (median over every entry, tensor._MEDIAN_ALL: the same saves)
}
