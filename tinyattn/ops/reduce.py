"""Reductions over one or more dims: sum mean max min var logsumexp.

Each takes `dim` (None for all, an int, or a tuple) and `keepdim`. The VJP puts the reduced dims
back (`unreduce`) and spreads g over them: evenly for sum and mean, to the winners for max and
min (ties share the gradient evenly), by the softmax weights for logsumexp.
"""

import math

import numpy as np

from ..backends import stable
from ..errors import DimError, DTypeError, fmt_shape, warn_user
from . import traps
from .elementwise import masked, sgn
from .op import acc_dtype, dims, op, quiet, quietly, wide, wide_sum
from .samples import case, vals


def unreduce(be, g, axes, keepdim, shape):
    """g with the reduced `axes` put back as size-1 dims, broadcast (a view) to `shape`."""
    if not keepdim:
        g = be.xp.expand_dims(g, axes)
    return be.xp.broadcast_to(g, shape)


def _count(shape, axes):
    return math.prod(shape[a] for a in axes)


def _reduced(dim, ndim, name):
    """The axes to reduce: as dims(), and an empty dim, () or [], means every dim (torch's rule
    for sum, mean, amax, amin, var and norm; x.all(dim=()) and x.any(dim=()) reduce none)."""
    return dims(None if isinstance(dim, (tuple, list)) and not dim else dim, ndim, name)


def _sum(be, x, axes, keepdim, mean=False):
    """x.sum (or x.mean) over axes; over the last dims (some, not all), the backend's row sums
    (Backend.row_sum: the fused norms and softmaxes take the same, so both agree to the bit).
    float16 is summed in float32, as torch (x.mean already does)."""
    k = len(axes)
    if mean and not _count(x.shape, axes):
        return _mean_of_none(x, axes, keepdim)
    if 0 < k < x.ndim and axes[0] == x.ndim - k:  # (axes are sorted and distinct)
        s = be.row_sum(x, k, mean=mean)
        return s if keepdim else s.reshape(x.shape[:-k])
    return x.mean(axis=axes, keepdims=keepdim) if mean else wide_sum(x, axes, keepdim)


def _mean_of_none(x, axes, keepdim):
    """The mean over axes that hold no entries: 0 / 0 = NaN, as torch, without NumPy's
    'Mean of empty slice' warning (a warnings.warn of its own, which errstate does not stop)."""
    with quiet():
        return wide_sum(x, axes, keepdim) / 0


@op("sum", "gx = broadcast(g, x.shape)", promote="sum",
    samples=[case((2, 3, 4)), case((2, 3, 4), dim=1), case((2, 3, 4), dim=(0, 2), keepdim=True),
             case((), dim=0), case((3,), dim=-1), case((2, 3, 4), dim=(1, 2))])
@quietly  # inf + -inf: NaN, silently, as torch
def reduce_sum(be, x, dim=None, keepdim=False):
    """out = Σ x over dim"""
    axes = _reduced(dim, x.ndim, "sum")
    return _sum(be, x, axes, keepdim), (axes, x.shape)


@reduce_sum.defvjp
def reduce_sum_vjp(be, g, saved, dim=None, keepdim=False):
    axes, shape = saved
    return (unreduce(be, g, axes, keepdim, shape),)


@op("mean", "gx = broadcast(g, x.shape) / n",
    samples=[case((2, 3, 4)), case((2, 3, 4), dim=-1, keepdim=True), case((2, 3), dim=(0, 1)),
             case((2, 3, 4), dim=(-1, -2))])
@quietly  # (as sum)
def reduce_mean(be, x, dim=None, keepdim=False):
    """out = Σ x / n over dim"""
    _floating(x, "mean")
    axes = _reduced(dim, x.ndim, "mean")
    return _sum(be, x, axes, keepdim, mean=True), (axes, x.shape)


@reduce_mean.defvjp
def reduce_mean_vjp(be, g, saved, dim=None, keepdim=False):
    axes, shape = saved
    return (unreduce(be, per_count(g, _count(shape, axes)), axes, keepdim, shape),)


def per_count(a, n):
    """a / n for a count n; float16 divided in float32 and rounded once, as torch (n past 65504
    is inf in float16: a mean's gradient over 256 x 512 entries came out all zeros)."""
    if not n:  # (a mean over nothing: g / 0, for an empty gradient; quietly)
        with quiet():
            return a / n
    if a.dtype.char == "e":
        return (a.astype(np.float32) / n).astype(np.float16)
    return a / n


def _extreme_vjp(be, g, saved, keepdim):
    """torch's two rules. amax/amin (any dim given, None too): g / k * [x == out] for k tied
    winners, so a slice whose max is NaN (no winner: g / 0 * 0) gets NaN throughout, and a
    g of inf or NaN gives NaN to the others (inf * 0). max()/min() without a dim: g / k to
    the winners, the NaN entries where the max is NaN, and exactly 0 to the others."""
    x, out, axes, whole = saved
    xp = be.xp
    if not keepdim:
        out, g = xp.expand_dims(out, axes), xp.expand_dims(g, axes)
    winners = x == out
    if whole and xp.isnan(out).any():  # (reduced: a cheap look)
        winners = xp.isnan(x)
    ties = winners.sum(axis=axes, keepdims=True, dtype=acc_dtype(g.dtype))  # (float16: counted
    # in float32; in float16 a count stops at 2048)
    if whole:
        return (masked(xp, g / ties, winners).astype(g.dtype, copy=False),)
    with quiet():
        return ((g / ties * winners).astype(g.dtype, copy=False),)


@op("max", "gx = g * [x == max] / (number of ties)", saves={0: 0}, saves_out=1,
    samples=[case((2, 3, 4), dim=1), case(vals([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]), dim=1),
             case(vals([[1.0, 3.0], [3.0, 0.0]])), case((2, 3), dim=0, keepdim=True)])
def reduce_max(be, x, dim=..., keepdim=False):
    """out = max x over dim (dim=..., the default: Tensor.max() without a dim, whose gradient
    differs from amax's where a max is NaN: see _extreme_vjp)"""
    axes = _reduced(None if dim is ... else dim, x.ndim, "max")
    _nonempty(x, axes, "max")
    out = x.max(axis=axes, keepdims=keepdim)
    return out, (x, out, axes, dim is ...)


@reduce_max.defvjp
def reduce_max_vjp(be, g, saved, dim=None, keepdim=False):
    return _extreme_vjp(be, g, saved, keepdim)


@op("min", "gx = g * [x == min] / (number of ties)", saves={0: 0}, saves_out=1,
    samples=[case((2, 3, 4), dim=-1), case(vals([[1.0, 0.0, 0.0], [2.0, 2.0, 5.0]]), dim=1),
             case((4,))])
def reduce_min(be, x, dim=..., keepdim=False):
    """out = min x over dim (dim=...: Tensor.min() without a dim, as reduce_max)"""
    axes = _reduced(None if dim is ... else dim, x.ndim, "min")
    _nonempty(x, axes, "min")
    out = x.min(axis=axes, keepdims=keepdim)
    return out, (x, out, axes, dim is ...)


@reduce_min.defvjp
def reduce_min_vjp(be, g, saved, dim=None, keepdim=False):
    return _extreme_vjp(be, g, saved, keepdim)


def _floating(x, name):
    if x.dtype.kind != "f":
        raise DTypeError(f"{name}: needs a floating-point input, got {x.dtype} (torch's rule too); "
                         "convert it with .float()")


def _nonempty(x, axes, name):
    """max/min over a dim of size 0 has no value (as in torch); an empty tensor reduced over
    dims that are not empty gives an empty result, (0, 3) over dim 1 -> (0,)."""
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"{name} of an empty tensor (shape {x.shape}) has no value")


@op("var", "gx = g * 2 (x - mean) / (n - correction)",
    samples=[case((2, 3, 4)), case((2, 5), dim=1), case((3, 4), dim=0, keepdim=True,
             correction=0)])
@quietly  # (as sum: the mean of inf and -inf)
def reduce_var(be, x, dim=None, keepdim=False, correction=1):
    """out = Σ (x - mean)² / (n - correction) over dim (correction=1: the unbiased estimate);
    with n - correction <= 0, Σ (x - mean)² / 0: inf (or NaN where every x is the mean), as in
    torch"""
    _floating(x, "var")
    axes = _reduced(dim, x.ndim, "var")
    centered = wide(x)  # (float16: the squares summed in float32; 300² overflows float16)
    n = _count(x.shape, axes)
    centered = centered - (centered.mean(axis=axes, keepdims=True) if n
                           else _mean_of_none(centered, axes, True))
    denom = n - correction
    if denom <= 0:  # torch's UserWarning (its var, std, var_mean and std_mean give it)
        warn_user("var(): degrees of freedom is <= 0. Correction should be strictly less than "
                  "the reduction factor (input numel divided by output numel).")
    with quiet():
        out = (centered * centered).sum(axis=axes, keepdims=keepdim) / max(denom, 0)
    return out.astype(x.dtype, copy=False), (centered, axes, denom, dim is None or not x.ndim)


def var_scale(denom):
    """2 / (n - correction), torch's factor of g (x - mean) in var's gradient over a dim: inf
    at n = correction, negative past it (torch's, whose forward divides by 0 there)."""
    return math.inf if denom == 0 else 2 / denom


@reduce_var.defvjp
def reduce_var_vjp(be, g, saved, dim=None, keepdim=False, correction=1):
    centered, axes, denom, whole = saved
    g = unreduce(be, g, axes, keepdim, centered.shape)
    if denom <= 0 and whole:  # no degrees of freedom over every entry (dim=None): torch's
        # g * inf, and NaN where x is the mean
        with quiet():
            return (g * be.xp.where(centered == 0, float("nan"), float("inf")),)
    with quiet():
        return (g * var_scale(denom) * centered,)


@op("logsumexp", "gx = g * softmax(x, dim)", promote="float",
    traps=traps.float16_logits,
    samples=[case((2, 3, 4), dim=-1), case((3, 4)), case((2, 3), dim=0, keepdim=True),
             case(vals([[1e4, 1e4 - 1.0, -1e4]]), dim=1)])
@quietly  # a row holding inf and -inf: inf - inf = NaN inside, as torch's
def logsumexp(be, x, dim=None, keepdim=False):
    """out = log Σ e^x over dim, computed as m + log Σ e^(x - m) with m = max x"""
    xp = be.xp
    if isinstance(dim, (tuple, list)) and not dim and x.ndim and not keepdim:
        raise DimError(f"logsumexp: dim={dim!r} reduces every dim of the {fmt_shape(x.shape)} "
                       "input, which torch takes only with keepdim=True; pass dim=None for a "
                       "0-d result, or keepdim=True")
    axes = _reduced(dim, x.ndim, "logsumexp")  # (dim=(): every dim, as torch)
    dtype, x = x.dtype, wide(x)  # (float16: summed in float32, as torch)
    out = stable.log_sum_exp(xp, x, axes)  # all -inf: the result is -inf, the gradient 0
    with quiet():  # softmax(x) over dim, for the VJP; a row holding +inf: out = inf, and as in
        # torch p = e^(inf - inf) = NaN at each inf, e^(x - inf) = 0 elsewhere
        p = xp.exp(x - xp.where(out == stable.NEG_INF, 0, out))
    if not keepdim:
        out = out.squeeze(axis=axes)
    return out.astype(dtype, copy=False), (p.astype(dtype, copy=False), axes)


@logsumexp.defvjp
def logsumexp_vjp(be, g, saved, dim=None, keepdim=False):
    p, axes = saved
    return (unreduce(be, g, axes, keepdim, p.shape) * p,)


def _others_product(xp, x, axis):
    """Π_{k≠i} x_k along axis for each i: the products to its left times those to its right
    (exact when x holds zeros, where out / x_i would be 0/0)."""
    n = x.shape[axis]
    head, tail = (slice(None),) * axis + (slice(1, None),), (slice(None),) * axis + (
        slice(0, n - 1),)
    left = xp.ones_like(x)
    left[head] = xp.cumprod(x, axis=axis)[tail]
    right = xp.ones_like(x)
    right[tail] = xp.flip(xp.cumprod(xp.flip(x, axis), axis=axis), axis)[head]
    return left * right


@op("prod", "gx = g * Π_{k≠i} x_k over dim (zeros allowed)", saves={0: 0}, promote="sum",
    samples=[case((2, 3, 4), dim=1), case(vals([[2.0, 0.0, 3.0], [1.5, -1.0, 2.0]]), dim=1),
             case(vals([[0.5, 0.0], [0.0, 2.0]])), case((2, 3), dim=0, keepdim=True)])
def reduce_prod(be, x, dim=None, keepdim=False):
    """out = Π x over dim (one dim, or all of them)"""
    if dim is not None and not isinstance(dim, int):
        raise TypeError(f"prod: dim must be one int or None (torch's rule), got {dim!r}")
    axes = dims(dim, x.ndim, "prod")
    return x.prod(axis=axes, keepdims=keepdim), (x, axes)


@reduce_prod.defvjp
def reduce_prod_vjp(be, g, saved, dim=None, keepdim=False):
    x, axes = saved
    if not axes:
        return (g.reshape(x.shape),)
    flat = x.reshape(-1) if len(axes) > 1 else x  # all dims: one long row
    others = _others_product(be.xp, flat, 0 if len(axes) > 1 else axes[0]).reshape(x.shape)
    return (unreduce(be, g, axes, keepdim, x.shape) * others,)


@op("vector_norm", "gx = g * x / out (ord 2; 0 where out = 0); g sgn(x) |x|^(p-1) / out^(p-1) "
    "(0 at x = 0 for p < 1)",
    saves={0: 0}, saves_out=1,
    samples=[case((2, 3, 4)), case((2, 3), dim=1), case((3, 4), ord=1, dim=0, keepdim=True),
             case((2, 5), ord=3.0, dim=-1), case(vals([[1.0, -3.0, 2.0], [0.5, 0.25, -4.0]]),
                                                 ord=float("inf"), dim=1),
             case(vals([[1.0, -3.0, 2.0], [0.5, 0.25, -4.0]]), ord=float("-inf"), dim=1),
             case((2, 3), ord=0), case((2, 3), ord=0.5, dim=1), case((2, 3), ord=-1.5),
             case(vals([[3.0, 0.0, 1.0], [0.5, -2.0, 0.25]]), ord=0.5, dim=1)])
def vector_norm(be, x, ord=2, dim=None, keepdim=False):  # noqa: A002 - torch's name
    """out = (Σ |x|^ord)^(1/ord) over dim (inf: max |x|, -inf: min |x|, 0: the count of
    nonzeros)"""
    xp = be.xp
    if x.dtype.kind != "f":
        raise DTypeError(f"vector_norm: needs a floating-point input, got {x.dtype} (torch's "
                         "rule too); convert it with .float()")
    if isinstance(ord, str) or isinstance(ord, bool):
        raise ValueError(f"vector_norm: ord must be a number, got {ord!r}")
    axes = _reduced(dim, x.ndim, "vector_norm")
    dtype, x = x.dtype, wide(x)  # (float16: summed in float32, as torch; 300² overflows it)
    a = xp.abs(x)
    if ord == 2:
        out = xp.sqrt((x * x).sum(axis=axes, keepdims=keepdim))
    elif ord == float("inf"):
        out = a.max(axis=axes, keepdims=keepdim)
    elif ord == float("-inf"):
        out = a.min(axis=axes, keepdims=keepdim)
    elif ord == 0:
        out = (x != 0).sum(axis=axes, keepdims=keepdim).astype(x.dtype)
    elif ord == 1:
        out = a.sum(axis=axes, keepdims=keepdim)
    else:
        with quiet():
            out = (a**ord).sum(axis=axes, keepdims=keepdim) ** (1 / ord)
    out = xp.asarray(out)  # (a full reduction gives a NumPy scalar)
    return out.astype(dtype, copy=False), (x, out, axes)


@vector_norm.defvjp
def vector_norm_vjp(be, g, saved, ord=2, dim=None, keepdim=False):  # noqa: A002
    x, out, axes = saved
    xp = be.xp
    if not keepdim:
        out, g = xp.expand_dims(out, axes), xp.expand_dims(g, axes)
    if ord == 0:
        return (xp.zeros(x.shape, dtype=g.dtype),)
    if ord == 1:  # (a NaN entry gets 0, torch's sgn(NaN))
        return (g * sgn(xp, x),)
    if ord in (float("inf"), float("-inf")):  # ties share g evenly, as in torch
        winners = xp.abs(x) == out
        if xp.isnan(out).any():  # (reduced: a cheap look) torch counts a NaN entry among the
            winners |= xp.isnan(x)  # winners, and its sgn(NaN) = 0 gives it nothing: 0, not NaN
        ties = winners.sum(axis=axes, keepdims=True, dtype=acc_dtype(g.dtype))
        return ((sgn(xp, x) * masked(xp, g / ties, winners)).astype(g.dtype, copy=False),)
    safe = xp.where(out == 0, 1, out)
    if ord == 2:
        return (xp.where(out == 0, 0, g * x / safe),)
    with quiet():
        if ord < 1:  # torch's form: |x|^(p-1) is inf at x = 0 (0 there, as torch), and the
            # factor out^(1-p) makes the whole gradient 0 where out = 0 (p < 0: any x = 0)
            scaled = xp.where(x == 0, 0, xp.sign(x) * xp.abs(x) ** (ord - 1))
            return (scaled * (g * out ** (1 - ord)),)
        scale = xp.where(out == 0, 0, g / safe ** (ord - 1))
        return (scale * xp.sign(x) * xp.abs(x) ** (ord - 1),)


OPS = (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_var, logsumexp, reduce_prod,
       vector_norm)
