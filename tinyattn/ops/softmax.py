"""The softmax family: softmax, log_softmax, the scaled masked softmax of attention, and
cross_entropy (log-softmax and negative log-likelihood in one op).

The heart of the project is the softmax VJP. With y = softmax(x), the Jacobian is
diag(y) - y yᵀ, so Jᵀg = y * g - y * (yᵀg): one elementwise pass and one row sum, and the T×T
Jacobian is never built. Rows whose entries are all -inf (fully masked) give zeros, never NaN.
"""

import numpy as np

from ..backends import stable
from ..errors import DimError, DTypeError, ShapeError, fmt_shape
from . import traps
from .op import acc_dtype, broadcasts_to, dim1, dims, op, quiet, wide, wide_sum
from .samples import CAUSAL_PAD, case, const, vals


def _zero_rows(be, arrays, params, out, label):
    """Trap: softmax rows that are all zeros, i.e. fully masked (every entry -inf)."""
    if out.ndim:
        yield from traps.masked_rows(label, be.to_numpy(out).sum(axis=params.get("dim", -1)) == 0)


def _neginf_rows(be, arrays, params, out, label):
    """Trap: log_softmax rows that are all -inf (fully masked)."""
    if out.ndim:
        yield from traps.masked_rows(label,
                                     np.isneginf(be.to_numpy(out)).all(axis=params.get("dim", -1)))


_SOFTMAX_TRAPS = traps.both(_zero_rows, traps.float16_logits)


@op("softmax", "gx = y * (g - sum(g*y, dim))", promote="float", saves_out=0, fresh=True,
    traps=_SOFTMAX_TRAPS,
    samples=[case((2, 5)), case((2, 3, 4), dim=1), case(vals([[1e4, -1e4, 0.0, 1e4 - 2.0]])),
             case(vals([[0.5, float("-inf"), 1.0], [float("-inf")] * 3]))])
def softmax(be, x, dim=-1):
    """y = exp(x - max x) / Σ exp(x - max x) along dim"""
    if x.ndim == 0:  # one entry, dim 0 or -1 (as torch): y = 1
        return _as_scalar(softmax.fwd(be, x.reshape(1), dims(dim, 0, "softmax") or 0))
    y = be.softmax(x, axis=dim1(dim, x.ndim, "softmax"))
    return y, (y,)


@softmax.defvjp
def softmax_vjp(be, g, saved, dim=-1):
    (y,) = saved
    if y.ndim == 0:
        return (be.softmax_backward(y.reshape(1), g.reshape(1), axis=0).reshape(()),)
    return (be.softmax_backward(y, g, axis=dim),)


def _as_scalar(result):
    """A forward's (out, saved) computed on a (1,) row, back as 0-d."""
    out, (kept,) = result
    out = out.reshape(())
    return out, (out if kept is result[0] else kept.reshape(()),)


@op("log_softmax", "gx = g - exp(out) * sum(g, dim)", promote="float", saves_out=0,
    traps=traps.both(_neginf_rows, traps.float16_logits),
    samples=[case((2, 5)), case((2, 3, 4), dim=0),
             case(vals([[1e4, -1e4, 0.0, 1e4 - 2.0]]))])
def log_softmax(be, x, dim=-1):
    """out = x - logsumexp(x) along dim"""
    xp = be.xp
    if x.ndim == 0:  # one entry: out = 0
        return _as_scalar(log_softmax.fwd(be, x.reshape(1), dims(dim, 0, "log_softmax") or 0))
    axis = dim1(dim, x.ndim, "log_softmax")
    # float16 in float32, rounded once, as torch: x - m overflows float16 for entries 65504
    # apart, and in float16 a sum of 4096 ones stopped at 2048
    dtype, x = x.dtype, wide(x)
    shifted = x - stable.row_max(xp, x, axis)  # (not x - logsumexp: x - m keeps more digits)
    s = xp.exp(shifted).sum(axis=axis, keepdims=True)
    out = shifted - xp.log(xp.where(s == 0, 1, s))  # fully masked rows stay -inf
    if dtype.char == "e":
        out = _half(out)
    return out, (out,)


def _half(a):
    """a (float32) rounded to float16, past 65504 to ±inf without NumPy's warning, as torch."""
    with quiet():
        return a.astype(np.float16)


@log_softmax.defvjp
def log_softmax_vjp(be, g, saved, dim=-1):
    (out,) = saved
    if out.ndim == 0:
        return (g - be.xp.exp(out) * g,)
    s = g.sum(axis=dim, keepdims=True, dtype=acc_dtype(g.dtype))  # (float16: in float32)
    return ((g - be.xp.exp(wide(out)) * s).astype(g.dtype, copy=False),)


@op("scaled_masked_softmax", "gx = scale * y * (g - sum(g*y, -1))",
    grads=("gx", None), nondiff=(1,), fused=True,
    promote="float", saves_out=0, fresh=True,
    traps=_SOFTMAX_TRAPS,
    samples=[
        case((2, 4, 4), None, scale=0.5, causal=True),
        case((2, 4, 4), const(CAUSAL_PAD), scale=1.5),  # row 2 is fully masked: zeros
        case((1, 2, 3, 5), const(np.ones((3, 5), dtype=bool)), scale=0.3, causal=True),
    ])
def scaled_masked_softmax(be, x, keep=None, scale=1.0, causal=False):
    """y = softmax(scale * x) over the last dim, where keep is False (or j > i if causal) -> -inf"""
    if keep is not None:
        if keep.dtype != bool:
            raise DTypeError(f"scaled_masked_softmax: the mask must be bool (True = attend), got "
                             f"{keep.dtype}; a float mask is added to the scores instead")
        if not broadcasts_to(keep.shape, x.shape):
            raise ShapeError(f"scaled_masked_softmax: the scores {fmt_shape(x.shape)} cannot "
                             f"take a mask of shape {fmt_shape(keep.shape)}: it must broadcast "
                             "to them; give a (T, S) or (..., T, S) mask, True = attend")
    y = be.scaled_masked_softmax(x, keep, scale=scale, causal=causal)
    return y, (y,)


@scaled_masked_softmax.defvjp
def scaled_masked_softmax_vjp(be, g, saved, keep=None, scale=1.0, causal=False):
    (y,) = saved
    return be.scaled_masked_softmax_backward(y, g, scale=scale, causal=causal), None


@op("cross_entropy", "gx = (softmax(x) - (1-ε) onehot(t) - ε/C) * g / n",
    grads=("gx", None), nondiff=(1,), saves={1: 1},
    fused=True, fresh=True,
    traps=traps.float16_logits,
    samples=[
        case((4, 5), const([0, 3, 4, 1])),
        case((4, 5), const([0, -100, 4, 1]), reduction="sum"),
        case((4, 5), const([0, 3, 2, 2]), label_smoothing=0.1),
        case((2, 5, 3), const([[0, 1, 4], [2, 2, 3]]), reduction="none"),
        case((5,), const(2)),
        case((3, 4), const([1, 7, 2]), ignore_index=7, label_smoothing=0.2),
    ])
def cross_entropy(be, x, target, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """loss = -(1-ε) log softmax(x)[t] - ε mean_c log softmax(x)[c], class dim 1 (or 0 if 1-D)"""
    xp = be.xp
    if x.dtype.kind != "f":
        raise DTypeError(f"cross_entropy: logits must be floating point, got {x.dtype}; "
                         "convert them with .float()")
    rows, t, shape = _rows(be, x, target)  # (M, C), (M,)
    if x.dtype.char == "e":  # float16 in float32, rounded once, as torch: rows - m overflows
        rows = rows.astype(np.float32)  # float16, and the sums, the count and the mean too
    n_class = rows.shape[1]
    valid = _valid_rows(be, t, n_class, ignore_index)  # None: every row counts
    if valid is not None:
        t = xp.where(valid, t, 0)
    m = stable.row_max(xp, rows, 1)
    p = rows - m  # becomes exp(rows - m), then the softmax, in place
    if label_smoothing:  # the mean of x - m, divided first: a row of 2e38s overflows no sum
        mean_shifted = wide_sum(p / n_class, 1)
    xp.exp(p, out=p)
    s = be.row_sum(p)
    log_s = xp.log(s)[:, 0]  # (M,): logsumexp(x) - m
    picked = rows[xp.arange(len(t)), t]
    loss = log_s - (picked - m[:, 0])  # -log softmax(x)[t], from x - m (no 2e38 - 2e38 loss)
    if label_smoothing:  # mean_c -log softmax(x)[c] = log Σ e^(x - m) - mean(x - m)
        loss = (1 - label_smoothing) * loss + label_smoothing * (log_s - mean_shifted)
    if valid is not None:
        loss = xp.where(valid, loss, 0)
    p /= s
    if reduction == "none":
        out = loss.reshape(shape)
    elif reduction == "sum":
        out = loss.sum()
    elif reduction == "mean":
        if valid is None:
            out = loss.sum() / len(t)
        else:  # every target ignored: NaN as in PyTorch, no 0/0 warning
            n = valid.sum(dtype=loss.dtype)
            out = xp.where(n > 0, loss.sum(), float("nan")) / xp.maximum(n, 1)
    else:
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")
    return _half(out) if x.dtype.char == "e" else out, (p, t, valid, x.shape)


@cross_entropy.defvjp
def cross_entropy_vjp(be, g, saved, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    p, t, valid, x_shape = saved
    xp = be.xp
    if reduction == "none":
        w = g.reshape(-1)
    elif reduction == "sum":
        w = g
    elif valid is None:
        w = g / acc_dtype(g.dtype)(len(t))  # (float16: divided in float32, w cast below)
    else:  # no valid row: w is unused below
        w = g / xp.maximum(valid.sum(dtype=acc_dtype(g.dtype)), 1)
    if valid is not None:
        w = xp.where(valid, w, 0)
    # each row's weight: (M, 1), or one number for all rows
    w = w.astype(p.dtype)[:, None] if w.ndim else w.astype(p.dtype)
    gx = p * w
    gx[xp.arange(len(t)), t] -= (1 - label_smoothing) * (w[:, 0] if w.ndim else w)
    if label_smoothing:
        gx -= (label_smoothing / p.shape[1]) * w
    return _unrows(be, gx, x_shape), None


def _rows(be, x, target):
    """Logits as (M, C) rows with the class dim last, targets as (M,): PyTorch's layouts
    (C,) with (), (N, C) with (N,), and (N, C, d1, ...) with (N, d1, ...)."""
    xp = be.xp
    if not hasattr(target, "dtype") or target.dtype.kind not in "iu":
        kind = getattr(target, "dtype", type(target).__name__)
        raise DTypeError(f"cross_entropy: target must hold integer class indices, got {kind}; "
                         "convert with target.long()")
    check_class_dim(x.shape, target.shape)
    want = x.shape[:1] + x.shape[2:] if x.ndim > 1 else ()
    if target.shape != want:
        raise ShapeError(f"cross_entropy: logits {fmt_shape(x.shape)} (classes in dim "
                         f"{1 if x.ndim > 1 else 0}) need targets of shape {fmt_shape(want)}, "
                         f"got {fmt_shape(target.shape)}")
    rows = xp.moveaxis(x, 1, -1) if x.ndim > 2 else x
    return rows.reshape(-1, x.shape[1 if x.ndim > 1 else 0]), target.reshape(-1), target.shape


def check_class_dim(x_shape, target_shape):
    """cross_entropy's logits need a class dim: 0-d ones are an error naming both shapes."""
    if not x_shape:
        raise ShapeError(f"cross_entropy: input must have at least 1 dim (classes in dim 1, or "
                         f"0 if 1-D), got input {fmt_shape(x_shape)} and target "
                         f"{fmt_shape(target_shape)}")


def _unrows(be, gx, x_shape):
    if len(x_shape) <= 2:
        return gx.reshape(x_shape)
    moved = x_shape[:1] + x_shape[2:] + x_shape[1:2]
    return be.xp.moveaxis(gx.reshape(moved), -1, 1)


def _valid_rows(be, t, n_class, ignore_index):
    """Which rows count (target != ignore_index), or None when all do; an error for a target
    out of range. The common case, every target a class and ignore_index none (-100), takes
    two reductions instead of five array passes."""
    if t.size and not 0 <= ignore_index < n_class and bool((t.min() >= 0) & (t.max() < n_class)):
        return None
    valid = t != ignore_index
    bad = valid & ((t < 0) | (t >= n_class))
    if bad.any():
        value = int(t[bad].reshape(-1)[0])
        raise DimError(f"cross_entropy: target {value} is out of range for {n_class} classes "
                       f"(valid: 0..{n_class - 1}, or ignore_index={ignore_index})")
    return None if t.size and valid.all() else valid  # (none: the mean is NaN, as in torch)


OPS = (softmax, log_softmax, scaled_masked_softmax, cross_entropy)
