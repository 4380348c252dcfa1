"""Scans: running sums, products and log-sum-exps along one dim (cumsum cumprod logcumsumexp).

Output j depends on inputs 0..j, so each VJP runs the scan the other way: a reverse cumulative
sum of g, weighted. cummax and cummin are Tensor methods built on take_along_dim (their
gradient goes to the index each running extreme came from, as in torch).
"""

import numpy

from ..backends.stable import NEG_INF
from .op import dim1, dims, op, quiet, quietly, wide
from .samples import case, vals


def _along(axis, part):
    """The index that applies `part` (a slice) to dim `axis`."""
    return (slice(None),) * axis + (part,)


# the dtype a running sum or product of each float dtype is carried in, as torch's CPU scans
# carry it (acc_type): float16 in float32 (a running sum of ones stops at 2048 in float16,
# where 2048 + 1 rounds to 2048) and float32 in float64 (a million float32 0.1s summed one
# after another in float32 drift to 100958, torch's give 100000). The result is handed back
# in the input's dtype. (Unlike a sum, which NumPy adds pairwise, a scan adds in order.)
_CARRY = {numpy.dtype(numpy.float16): numpy.float32, numpy.dtype(numpy.float32): numpy.float64}


def _cumsum(xp, a, axis):
    """xp.cumsum along axis, carried in the wider dtype of _CARRY and given back in a's."""
    carry = _CARRY.get(a.dtype)
    if carry is not None:
        return xp.cumsum(a, axis=axis, dtype=carry).astype(a.dtype)
    return xp.cumsum(a, axis=axis)


def reverse_cumsum(xp, a, axis):
    """out_i = Σ_{j >= i} a_j along axis."""
    return xp.flip(_cumsum(xp, xp.flip(a, axis), axis), axis)


def _one_entry(x):
    """The scan of a 0-d x: itself, in int64 where it is an integer or a bool (as NumPy's and
    torch's scans of more entries give)."""
    return x.astype(numpy.int64) if x.dtype.kind in "biu" else x.copy()


def _axis(x, dim, name):
    """dim as an axis; a 0-d tensor is scanned as one entry (axis None)."""
    if x.ndim == 0:
        dims(dim, 0, name)  # 0 and -1 name its one implicit dim
        return None
    return dim1(dim, x.ndim, name)


@op("cumsum", "gx = reverse_cumsum(g)", promote="sum",
    samples=[case((2, 3, 4), dim=1), case((5,), dim=0), case((2, 3), dim=-1), case((), dim=0)])
@quietly  # inf + -inf: NaN, silently, as torch
def cumsum(be, x, dim):
    """out_j = Σ_{i <= j} x_i along dim"""
    axis = _axis(x, dim, "cumsum")
    if axis is None:  # (one entry, its sum in the dtype of a scan's: int64 for ints, bools)
        return _one_entry(x), (None,)
    return _cumsum(be.xp, x, axis), (axis,)


@cumsum.defvjp
@quietly
def cumsum_vjp(be, g, saved, dim):
    (axis,) = saved
    return (g if axis is None else reverse_cumsum(be.xp, g, axis),)


@op("cumprod", "gx = out_{i-1} * s_i, s_i = g_i + x_{i+1} s_{i+1} (zeros allowed)",
    saves={0: 0}, saves_out=1, promote="sum",
    samples=[case((2, 3, 4), dim=1), case(vals([[2.0, 0.0, 3.0, 0.5], [1.5, -1.0, 0.0, 0.0]]),
                                           dim=1), case((4,), dim=0)])
def cumprod(be, x, dim):
    """out_j = Π_{i <= j} x_i along dim"""
    axis = _axis(x, dim, "cumprod")
    if axis is None:
        return _one_entry(x), (x, x, None)
    carry = _CARRY.get(x.dtype)  # (float16 multiplied in float32, float32 in float64)
    if carry is not None:
        out = be.xp.cumprod(x, axis=axis, dtype=carry).astype(x.dtype)
    else:
        out = be.xp.cumprod(x, axis=axis)
    return out, (x, out, axis)


@cumprod.defvjp
def cumprod_vjp(be, g, saved, dim):
    x, out, axis = saved
    xp = be.xp
    if axis is None:
        return (g,)
    if x.dtype == numpy.float16:  # in float32 (the recurrence below is a running sum too)
        wide_saved = (x.astype(numpy.float32), out.astype(numpy.float32), axis)
        (gx,) = cumprod_vjp(be, wide(g), wide_saved, dim)
        return (gx.astype(numpy.float16),)
    if bool((x != 0).all()):  # no zeros: gx_i = Σ_{j>=i} g_j out_j / x_i
        return (reverse_cumsum(xp, g * out, axis) / x,)
    # with zeros, the recurrence s_i = g_i + x_{i+1} s_{i+1}, then gx_i = s_i Π_{k<i} x_k
    n = x.shape[axis]
    s = xp.empty_like(g)
    s[_along(axis, slice(n - 1, n))] = g[_along(axis, slice(n - 1, n))]
    for i in range(n - 2, -1, -1):
        s[_along(axis, slice(i, i + 1))] = (g[_along(axis, slice(i, i + 1))]
                                            + x[_along(axis, slice(i + 1, i + 2))]
                                            * s[_along(axis, slice(i + 1, i + 2))])
    left = xp.ones_like(x)  # Π_{k<i} x_k = out_{i-1}, exact with zeros too
    left[_along(axis, slice(1, None))] = out[_along(axis, slice(0, n - 1))]
    return (s * left,)


def _logcumsumexp(xp, x, axis):
    """log Σ_{i <= j} e^(x_i) along axis, shifted by the row max so that it cannot overflow
    (rows of -inf give -inf; an empty tensor, itself)."""
    dtype, x = x.dtype, wide(x)  # (float16: summed in float32, as torch)
    if x.size == 0:  # (NumPy's max of nothing is an error)
        return x.astype(dtype)
    m = x.max(axis=axis, keepdims=True)
    if not xp.isfinite(m).all():  # a row of -inf, or holding +inf or NaN: its largest finite
        # entry, so that the entries before an inf or NaN neither overflow nor turn inf (torch)
        m = xp.where(xp.isfinite(x), x, NEG_INF).max(axis=axis, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)
    with quiet():  # (the running sum of e^(x - m) carried as _cumsum carries float32's)
        return (xp.log(_cumsum(xp, xp.exp(x - m), axis)) + m).astype(dtype, copy=False)


@op("logcumsumexp", "gx = Σ_{j>=i} g_j e^(x_i - out_j)", promote="float",
    saves={0: 0}, saves_out=1,
    samples=[case((2, 3, 4), dim=2), case((5,), dim=0),
             case(vals([[300.0, -300.0, 1.0], [-5.0, 2.0, 700.0]]), dim=1)])
def logcumsumexp(be, x, dim):
    """out_j = log Σ_{i <= j} e^(x_i) along dim"""
    axis = _axis(x, dim, "logcumsumexp")
    if axis is None:
        return x.copy(), (x, x, None)
    out = _logcumsumexp(be.xp, x, axis)
    return out, (x, out, axis)


@logcumsumexp.defvjp
def logcumsumexp_vjp(be, g, saved, dim):
    x, out, axis = saved
    xp = be.xp
    if axis is None:
        return (g,)
    # in log space, positive and negative parts of g apart (torch's way): no overflow
    with quiet():
        log_pos = xp.log(xp.where(g > 0, g, 0)) - out
        log_neg = xp.log(xp.where(g < 0, -g, 0)) - out
        rev = lambda a: xp.flip(_logcumsumexp(xp, xp.flip(a, axis), axis), axis)  # noqa: E731
        return (xp.exp(rev(log_pos) + x) - xp.exp(rev(log_neg) + x),)


OPS = (cumsum, cumprod, logcumsumexp)
