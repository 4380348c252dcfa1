"""tinyattn.functional (import as F): the ops as functions, with PyTorch's names and arguments.

Each function checks and shapes its arguments, then runs one op (or, for attention, a few) from
`tinyattn.ops`. Tensors, NumPy arrays and lists are all accepted where a tensor is expected.
"""

import math

import numpy as np

from . import backends
from .autograd import apply
from .errors import DTypeError, ShapeError, fmt_shape
from .ops import activation as act
from .ops import attention as attn
from .ops import elementwise as ew
from .ops import matmul as mm
from .ops import nn as nn_ops
from .ops import shape as sh
from .ops import softmax as sm
from .tensor import Tensor

__all__ = [
    "relu", "tanh", "sigmoid", "gelu", "where", "masked_fill", "softmax", "log_softmax",
    "logsumexp", "cross_entropy", "mse_loss", "matmul", "linear", "layer_norm", "embedding",
    "dropout", "cat", "stack", "causal_mask", "scaled_dot_product_attention", "attention_weights",
    "silu", "softplus", "mish", "elu", "selu", "celu", "logsigmoid", "softsign", "leaky_relu",
    "hardtanh", "relu6", "hardsigmoid", "hardswish", "softmin", "normalize", "pad",
]


def _t(x, like=None):
    """`x` as a Tensor (on `like`'s backend when it has to be made)."""
    if isinstance(x, Tensor):
        return x
    return Tensor(x, backend=None if like is None else like.backend)


# ---- activations and elementwise -----------------------------------------------------------------


def relu(x):
    return apply(ew.relu, _t(x))


def tanh(x):
    return apply(ew.tanh, _t(x))


def sigmoid(x):
    return apply(ew.sigmoid, _t(x))


def gelu(x, approximate="none"):
    """x Φ(x); approximate="tanh" uses GPT-2's tanh formula."""
    return apply(nn_ops.gelu, _t(x), approximate=approximate)


def where(condition, x, y):
    """x where condition (bool) else y; either of x, y may be a Python number."""
    like = x if isinstance(x, Tensor) else y if isinstance(y, Tensor) else _t(x)
    x = x if isinstance(x, (int, float)) else _t(x, like)
    y = y if isinstance(y, (int, float)) else _t(y, like)
    return apply(ew.where, _t(condition, like), x, y)


def masked_fill(x, mask, value):
    return _t(x).masked_fill(mask, value)


# ---- softmax family ------------------------------------------------------------------------------


def softmax(x, dim=-1):
    return apply(sm.softmax, _t(x), dim=dim)


def log_softmax(x, dim=-1):
    return apply(sm.log_softmax, _t(x), dim=dim)


def logsumexp(x, dim=None, keepdim=False):
    return _t(x).logsumexp(dim, keepdim)


def cross_entropy(logits, target, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Mean (or sum, or per-item) -log softmax(logits)[target]; classes in dim 1 (dim 0 if 1-D).

    `target` holds class indices (integers); entries equal to `ignore_index` count for nothing.
    `label_smoothing` ε mixes the one-hot target with the uniform distribution: (1-ε) + ε/C.
    """
    logits = _t(logits)
    return apply(sm.cross_entropy, logits, _t(target, logits), ignore_index=ignore_index,
                 reduction=reduction, label_smoothing=float(label_smoothing))


def mse_loss(x, y, reduction="mean"):
    """Mean (or sum, or elementwise) squared difference."""
    d = _t(x) - y
    sq = d * d
    if reduction == "mean":
        return sq.mean()
    if reduction == "sum":
        return sq.sum()
    if reduction == "none":
        return sq
    raise ValueError(f"mse_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


# ---- layers as functions -------------------------------------------------------------------------


def matmul(a, b):
    """a @ b (torch.matmul): batched, broadcasting over the leading dims."""
    a = _t(a, b if isinstance(b, Tensor) else None)
    return a @ _t(b, a)


def linear(x, weight, bias=None):
    """x @ weightᵀ + bias, with weight (out_features, in_features) as in PyTorch."""
    return mm.linear(_t(x), weight, bias)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the last dims (`normalized_shape`), then scale by weight, shift by bias."""
    x = _t(x)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if x.shape[x.ndim - len(shape):] != shape or len(shape) > x.ndim:
        raise ShapeError(f"layer_norm: normalized_shape {fmt_shape(shape)} is not the end of "
                         f"the input shape {fmt_shape(x.shape)}")
    return apply(nn_ops.layer_norm, x, weight, bias, n_dims=len(shape), eps=eps)


def embedding(input, weight):  # noqa: A002 - PyTorch's argument name
    """weight[input]: the rows of the table for integer ids of any shape."""
    return apply(nn_ops.embedding, _t(input, weight), weight)


def dropout(x, p=0.5, training=True, seed=None):
    """Zero each entry with probability p and scale the rest by 1/(1-p); identity if not training.

    `seed` draws the mask from a fresh generator (reproducible); without it, from the backend's
    generator, which `tinyattn.manual_seed` seeds.
    """
    x = _t(x)
    if not training or p == 0:
        return x
    return apply(nn_ops.dropout, x, p=float(p), seed=seed)


# ---- joining -------------------------------------------------------------------------------------


def cat(tensors, dim=0):
    tensors = [_t(x, tensors[0]) for x in tensors]
    return apply(sh.cat, *tensors, dim=dim)


def stack(tensors, dim=0):
    tensors = [_t(x, tensors[0]) for x in tensors]
    return apply(sh.stack, *tensors, dim=dim)


# ---- attention -----------------------------------------------------------------------------------


def causal_mask(T, S=None, backend=None):  # noqa: N803 - the sizes' usual names
    """Bool (T, S): True where query i may attend key j, i.e. j <= i (the lower triangle)."""
    be = backends.get_backend() if backend is None else backends.backend(backend)
    return Tensor._wrap(be.causal_keep(T, T if S is None else S), be)


def scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=False, scale=None,
                                 impl="auto"):
    """softmax(q kᵀ * scale + mask) @ v over the last two dims: q (..., T, d), k (..., S, d),
    v (..., S, dv) -> (..., T, dv).

    attn_mask: bool (True = may attend) or float (added to the scores), broadcast to (..., T, S).
    is_causal: query i attends keys 0..i. scale: 1/√d by default. A query that may attend no
    key gives zeros (output and gradients), never NaN. impl: "composite" (matmul, scaled masked
    softmax, matmul: one node each), "flash" (one fused node, O(T) memory, bool masks only) or
    "auto" (flash on backends that prefer it and for long sequences, else composite).
    """
    if impl not in ("auto", "composite", "flash"):
        raise ValueError(f"scaled_dot_product_attention: impl must be 'auto', 'composite' or "
                         f"'flash', got {impl!r}")
    q = _t(q)
    k, v = _t(k, q), _t(v, q)
    attn.check_qkv(q, k, v)  # before anything reads q.shape[-2]
    if attn_mask is not None and is_causal:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal=True, not "
                         "both (torch's contract); for both, pass attn_mask & causal_mask(T, S)")
    mask = None if attn_mask is None else _t(attn_mask, q)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    float_mask = mask is not None and mask.dtype != bool
    if impl == "flash" and float_mask:
        raise DTypeError("scaled_dot_product_attention: impl='flash' takes a bool mask (True = "
                         f"attend), got {mask.dtype}; use impl='composite' for an additive mask")
    if impl == "flash" or impl == "auto" and not float_mask and q.shape[-2] >= \
            q.backend.flash_from:
        return apply(attn.flash_attention, q, k, v, mask, scale=scale, causal=is_causal)
    return attn.sdpa_composite(q, k, v, mask, is_causal, scale)


def attention_weights(q, k, attn_mask=None, is_causal=False, scale=None):
    """The probabilities softmax(q kᵀ * scale + mask) that attention mixes v with: (..., T, S)."""
    q = _t(q)
    mask = None if attn_mask is None else _t(attn_mask, q)
    return attn.attention_weights(q, _t(k, q), mask, is_causal, scale)


# ---- more activations, softmin, normalize and pad (ops/activation.py, ops/reduce.py) ---------


def silu(x):
    """x * sigmoid(x) (swish)."""
    return apply(act.silu, _t(x))


def softplus(x, beta=1.0, threshold=20.0):
    """log(1 + e^(beta x)) / beta (x itself where beta x > threshold)."""
    return apply(act.softplus, _t(x), beta=beta, threshold=threshold)


def mish(x):
    """x * tanh(softplus(x))."""
    return apply(act.mish, _t(x))


def elu(x, alpha=1.0):
    return apply(act.elu, _t(x), alpha=alpha)


def selu(x):
    return apply(act.selu, _t(x))


def celu(x, alpha=1.0):
    return apply(act.celu, _t(x), alpha=alpha)


def logsigmoid(x):
    return apply(act.logsigmoid, _t(x))


def softsign(x):
    return apply(act.softsign, _t(x))


def leaky_relu(x, negative_slope=0.01):
    return apply(act.leaky_relu, _t(x), negative_slope=negative_slope)


def hardtanh(x, min_val=-1.0, max_val=1.0):
    return apply(act.hardtanh, _t(x), min_val=min_val, max_val=max_val)


def relu6(x):
    """min(max(x, 0), 6) (hardtanh on [0, 6], torch's gradient at the edges)."""
    return apply(act.hardtanh, _t(x), min_val=0.0, max_val=6.0)


def hardsigmoid(x):
    return apply(act.hardsigmoid, _t(x))


def hardswish(x):
    return apply(act.hardswish, _t(x))


def softmin(x, dim=-1):
    """softmax(-x, dim)."""
    return softmax(-_t(x), dim)


def normalize(x, p=2.0, dim=1, eps=1e-12):
    """x / max(‖x‖_p over dim, eps): unit vectors along dim."""
    x = _t(x)
    norm = x.norm(p, dim=dim, keepdim=True)
    return x / norm.clamp_min(eps)


def pad(x, pad, mode="constant", value=0.0):  # noqa: A002 - torch's names
    """Pad the last dims: pad = (left, right) for the last dim, then (left, right) for the one
    before, ... mode "constant" (with value), "reflect", "replicate" or "circular"; negative
    amounts crop."""
    x = _t(x)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ShapeError(f"pad: needs (left, right) pairs for at most {x.ndim} dims of "
                         f"{fmt_shape(x.shape)}, got {tuple(pad)}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', "
                         f"got {mode!r}")
    for k in range(len(pad) // 2):
        axis = x.ndim - 1 - k
        left, right = int(pad[2 * k]), int(pad[2 * k + 1])
        n = x.shape[axis]
        if left < 0 or right < 0:  # crop first
            x = x.narrow(axis, max(-left, 0), n - max(-left, 0) - max(-right, 0))
            left, right, n = max(left, 0), max(right, 0), x.shape[axis]
        if not left and not right:
            continue
        if mode == "constant":
            x = cat([_full(x, axis, left, value), x, _full(x, axis, right, value)], dim=axis)
            continue
        if mode == "reflect" and (left >= n or right >= n):
            raise ShapeError(f"pad: reflect padding ({left}, {right}) must be below the size "
                             f"{n} of dim {axis} (shape {fmt_shape(x.shape)})")
        where = np.arange(-left, n + right)
        if mode == "reflect":
            period = 2 * (n - 1) if n > 1 else 1
            where = np.abs((where + period) % period if n > 1 else where * 0)
            where = np.where(where >= n, period - where, where)
        elif mode == "replicate":
            where = np.clip(where, 0, n - 1)
        else:
            where = where % n
        x = x.index_select(axis, Tensor(where, backend=x.backend))
    return x


def _full(like, axis, size, value):
    """A constant block of `like`'s shape with `size` entries along axis."""
    shape = like.shape[:axis] + (size,) + like.shape[axis + 1:]
    return Tensor._wrap(like.backend.xp.full(shape, value, dtype=like.dtype), like.backend)
