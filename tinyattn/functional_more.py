"""tinyattn.functional's multi_head_attention_forward and conv_tbc, with torch's names and
arguments, built from the ops (linear, cat, masked softmax, dropout, matmul) so that their
gradients of any order come from those ops. tinyattn.functional imports these as its own
attributes (F.*); this module imports nothing of that one (no import cycle).

Shapes as torch's: L target (query) length, S source (key) length, N batch, E embed_dim,
H heads, D = E / H per head.
"""

import math

from .autograd import apply
from .errors import DTypeError, ShapeError, fmt_shape
from .ops import attention as attn
from .ops import matmul as mm
from .ops import nn as nn_ops
from .ops import shape as sh
from .tensor import Tensor, _fresh, zeros


class MHAShapeError(ShapeError, AssertionError):
    """A bad shape given to multi_head_attention_forward where torch's asserts fail: a
    ShapeError that is also the AssertionError torch raises there."""


class MHADTypeError(DTypeError, AssertionError):
    """A mask of a dtype multi_head_attention_forward cannot take (neither bool nor float): a
    DTypeError that is also the AssertionError torch raises there."""


def _t(x, like=None):
    """`x` as a Tensor (on `like`'s backend when it has to be made)."""
    if isinstance(x, Tensor):
        return x
    return _fresh(x, backend=None if like is None else like.backend)


def _cat(xs, dim):
    return apply(sh.cat, *xs, dim=dim)


def _zeros_like_on(x, shape):
    return zeros(*shape, dtype=x.dtype, backend=x.backend)


# ---- multi-head attention ------------------------------------------------------------------


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """torch.nn.functional.multi_head_attention_forward: query (L, N, E) (or unbatched (L, E)),
    key (S, N, kdim), value (S, N, vdim) -> (output (L, N, E), weights (N, L, S) averaged over
    the heads, (N, H, L, S) with average_attn_weights=False, or None when need_weights=False).

    Masks as torch's: in attn_mask ((L, S) or (N*H, L, S)) and key_padding_mask ((N, S)) a bool
    True means "may NOT attend", a float mask is added to the scores. is_causal is a hint, as
    in torch: attn_mask must be given with it, and it is the mask used. bias_k, bias_v (1, 1, E)
    append one key and value; add_zero_attn one zero key and value; static_k, static_v
    (N*H, S, D) replace the projected keys and values. dropout_p drops attention weights when
    training (the weights returned are the ones used). One difference: a query whose every key
    is masked gets zero weights (torch's: NaN)."""
    q_in, k_in, v_in = (_t(x) for x in (query, key, value))
    batched = _check_shapes(q_in, k_in, v_in, key_padding_mask, attn_mask, num_heads)
    if not batched:
        q_in, k_in, v_in = (x.unsqueeze(1) for x in (q_in, k_in, v_in))
    L, N, E = q_in.shape  # noqa: N806
    kpm = _canonical(key_padding_mask, "key_padding_mask", q_in)
    if kpm is not None and not batched:
        kpm = kpm.unsqueeze(0)
    if is_causal and attn_mask is None:
        raise ShapeError("multi_head_attention_forward: is_causal=True is a hint that needs "
                         "attn_mask too (torch's rule); pass the causal mask as attn_mask")
    mask = _canonical(attn_mask, "attn_mask", q_in)
    H, D = _heads(E, embed_dim_to_check, num_heads)  # noqa: N806
    q, k, v = _project(q_in, k_in, v_in, use_separate_proj_weight, in_proj_weight,
                       in_proj_bias, (q_proj_weight, k_proj_weight, v_proj_weight))
    mask = _attn_mask_3d(mask, N * H, L, k_in.shape[0])
    k, v, mask, kpm = _add_bias_kv(k, v, bias_k, bias_v, static_k, static_v, mask, kpm)
    q = q.reshape(L, N * H, D).transpose(0, 1)  # (N*H, L, D)
    k = _heads_of(k, static_k, "static_k", N * H, D)  # (N*H, S', D)
    v = _heads_of(v, static_v, "static_v", N * H, D)
    if add_zero_attn:
        k = _cat([k, _zeros_like_on(k, (N * H, 1, D))], 1)
        v = _cat([v, _zeros_like_on(v, (N * H, 1, D))], 1)
        mask, kpm = _pad_key(mask), _pad_key(kpm)
    mask = _with_padding(mask, kpm, N, H, k.shape[1])
    p = float(dropout_p) if training else 0.0
    nn_ops.check_dropout_p(p)
    weights = attn.checked_weights(q, k, mask, False, attn.default_scale(D))  # (N*H, L, S')
    if p > 0:
        weights = apply(nn_ops.dropout, weights, p=p, seed=None)
    y = (weights @ v).transpose(0, 1).reshape(L * N, E)
    y = mm.linear(y, _t(out_proj_weight, y), _opt(out_proj_bias, y)).reshape(L, N, -1)
    if not need_weights:
        return (y if batched else y.squeeze(1)), None
    weights = weights.reshape(N, H, L, weights.shape[-1])
    if average_attn_weights:
        weights = weights.mean(1)
    return (y, weights) if batched else (y.squeeze(1), weights.squeeze(0))


def _opt(x, like):
    return None if x is None else _t(x, like)


def _check_shapes(q, k, v, key_padding_mask, attn_mask, num_heads):
    """torch's _mha_shape_check: True for batched (3-d) inputs, False for unbatched (2-d)."""
    shapes = f"query {fmt_shape(q.shape)}, key {fmt_shape(k.shape)}, value " \
        f"{fmt_shape(v.shape)}"
    if q.ndim not in (2, 3) or k.ndim != q.ndim or v.ndim != q.ndim:
        raise MHAShapeError(f"multi_head_attention_forward: query, key and value must all be "
                            f"batched (3 dims) or all unbatched (2 dims), got {shapes}")
    kpm = None if key_padding_mask is None else _t(key_padding_mask, q)
    if kpm is not None and kpm.ndim != q.ndim - 1:
        raise MHAShapeError(f"multi_head_attention_forward: with {shapes}, key_padding_mask "
                            f"must have {q.ndim - 1} dims, got {fmt_shape(kpm.shape)}")
    m = None if attn_mask is None else _t(attn_mask, q)
    if m is not None and m.ndim not in (2, 3):
        raise MHAShapeError(f"multi_head_attention_forward: attn_mask must be (L, S) or "
                            f"(N*num_heads, L, S), got {fmt_shape(m.shape)}")
    if q.ndim == 2 and m is not None and m.ndim == 3 and m.shape[0] != num_heads:
        raise MHAShapeError(f"multi_head_attention_forward: an unbatched query takes a 3-d "
                            f"attn_mask of (num_heads, L, S), num_heads={num_heads}, got "
                            f"{fmt_shape(m.shape)}")
    return q.ndim == 3


def _canonical(mask, name, like):
    """A mask as a float one added to the scores: bool True (may not attend) becomes -inf."""
    if mask is None:
        return None
    m = _t(mask, like)
    if m.dtype == bool:
        return _zeros_like_on(like, m.shape).masked_fill(m, -math.inf)
    if m.dtype.kind != "f":
        raise MHADTypeError(f"multi_head_attention_forward: {name} must be bool (True = may not "
                         f"attend) or float (added to the scores), got {m.dtype}")
    return m


def _heads(E, embed_dim_to_check, num_heads):  # noqa: N803
    if E != embed_dim_to_check:
        raise MHAShapeError(f"multi_head_attention_forward: was expecting embedding dimension "
                            f"of {embed_dim_to_check}, but the query's is {E}")
    if num_heads <= 0 or E % num_heads:
        raise MHAShapeError(f"multi_head_attention_forward: embed_dim {E} not divisible by "
                            f"num_heads {num_heads}")
    return num_heads, E // num_heads


def _project(q_in, k_in, v_in, separate, in_proj_weight, in_proj_bias, separate_weights):
    """q, k, v: the inputs times their projections (in_proj_weight's thirds, or q_, k_ and
    v_proj_weight with use_separate_proj_weight), plus in_proj_bias's thirds."""
    E = q_in.shape[-1]  # noqa: N806
    same = k_in.shape[:2] == v_in.shape[:2] if separate else k_in.shape == v_in.shape
    if not same:
        raise MHAShapeError(f"multi_head_attention_forward: key {fmt_shape(k_in.shape)} does "
                            f"not fit value {fmt_shape(v_in.shape)}")
    if separate:
        for name, w in zip(("q_proj_weight", "k_proj_weight", "v_proj_weight"),
                           separate_weights, strict=True):
            if w is None:
                raise MHAShapeError(f"multi_head_attention_forward: use_separate_proj_weight "
                                    f"is True but {name} is None")
        w_q, w_k, w_v = (_t(w, q_in) for w in separate_weights)
    else:
        if in_proj_weight is None:
            raise MHAShapeError("multi_head_attention_forward: use_separate_proj_weight is "
                                "False but in_proj_weight is None")
        w = _t(in_proj_weight, q_in)
        w_q, w_k, w_v = w[:E], w[E:2 * E], w[2 * E:]
    b = _opt(in_proj_bias, q_in)
    b_q, b_k, b_v = (None,) * 3 if b is None else (b[:E], b[E:2 * E], b[2 * E:])
    return mm.linear(q_in, w_q, b_q), mm.linear(k_in, w_k, b_k), mm.linear(v_in, w_v, b_v)


def _attn_mask_3d(mask, NH, L, S):  # noqa: N803
    """attn_mask as (1, L, S) or (N*H, L, S), checked as torch checks it."""
    if mask is None:
        return None
    want = (L, S) if mask.ndim == 2 else (NH, L, S)
    if mask.shape != want:
        raise ShapeError(f"multi_head_attention_forward: the {mask.ndim}-d attn_mask is "
                         f"{fmt_shape(mask.shape)}, but should be {fmt_shape(want)}")
    return mask.unsqueeze(0) if mask.ndim == 2 else mask


def _add_bias_kv(k, v, bias_k, bias_v, static_k, static_v, mask, kpm):
    """k, v (S, N, E) with bias_k, bias_v appended as one more key and value (the masks
    padded with a 0: it may be attended)."""
    if bias_k is None or bias_v is None:
        if bias_k is not None or bias_v is not None:
            which = "bias_k" if bias_k is not None else "bias_v"
            raise MHAShapeError(f"multi_head_attention_forward: {which} is set but the other "
                                "of bias_k and bias_v is None")
        return k, v, mask, kpm
    if static_k is not None or static_v is not None:
        raise MHAShapeError("multi_head_attention_forward: bias cannot be added to static key "
                            "or value (bias_k and bias_v with static_k or static_v)")
    N = k.shape[1]  # noqa: N806
    k = _cat([k, _t(bias_k, k).expand(1, N, k.shape[-1])], 0)
    v = _cat([v, _t(bias_v, v).expand(1, N, v.shape[-1])], 0)
    return k, v, _pad_key(mask), _pad_key(kpm)


def _heads_of(x, static, name, NH, D):  # noqa: N803
    """(S, N, E) as (N*H, S, D), or `static` (N*H, S, D) in its place, checked."""
    if static is None:
        return x.reshape(x.shape[0], NH, D).transpose(0, 1)
    s = _t(static, x)
    if s.ndim != 3 or s.shape[0] != NH or s.shape[2] != D:
        raise MHAShapeError(f"multi_head_attention_forward: {name} must be (N*num_heads, S, "
                            f"head_dim) = ({NH}, S, {D}), got {fmt_shape(s.shape)}")
    return s


def _pad_key(mask):
    """A float mask with one more key (last dim) that may be attended (0)."""
    if mask is None:
        return None
    return _cat([mask, _zeros_like_on(mask, mask.shape[:-1] + (1,))], -1)


def _with_padding(mask, kpm, N, H, S):  # noqa: N803
    """attn_mask plus key_padding_mask (N, S) spread over the heads: (N*H or 1, L or 1, S)."""
    if kpm is None:
        return mask
    if kpm.shape != (N, S):
        raise MHAShapeError(f"multi_head_attention_forward: expected key_padding_mask of shape "
                            f"(N, S) = {fmt_shape((N, S))}, got {fmt_shape(kpm.shape)}")
    kpm = kpm.reshape(N, 1, 1, S).expand(N, H, 1, S).reshape(N * H, 1, S)
    return kpm if mask is None else mask + kpm


# ---- conv_tbc ------------------------------------------------------------------------------


def conv_tbc(input, weight, bias, pad=0):  # noqa: A002 - torch's names
    """A 1-d convolution in (time, batch, channel) layout, torch's conv_tbc: input (T, N, C_in),
    weight (K, C_in, C_out), bias (C_out,), `pad` zero steps on both ends of time ->
    (T + 2 pad - K + 1, N, C_out), out[t] = Σ_k input_padded[t + k] @ weight[k] + bias."""
    x = _t(input)
    w, b = _t(weight, x), _t(bias, x)
    _check_tbc(x, w, b, pad)
    T, N, C = x.shape  # noqa: N806
    K = w.shape[0]  # noqa: N806
    if pad:
        side = _zeros_like_on(x, (pad, N, C))
        x = _cat([side, x, side], 0)
    steps = T + 2 * pad - K + 1
    y = b.expand(steps, N, w.shape[2])
    for k in range(K):
        y = y + x[k:k + steps] @ w[k]
    return y


def _check_tbc(x, w, b, pad):
    shapes = f"input {fmt_shape(x.shape)}, weight {fmt_shape(w.shape)}, bias " \
        f"{fmt_shape(b.shape)}"
    if x.ndim != 3 or w.ndim != 3 or b.ndim != 1:
        raise ShapeError(f"conv_tbc: input (time, batch, in_channels), weight (kernel, "
                         f"in_channels, out_channels) and bias (out_channels,) must have 3, 3 "
                         f"and 1 dims, got {shapes}")
    if x.shape[2] != w.shape[1] or b.shape[0] != w.shape[2]:
        raise ShapeError(f"conv_tbc: the input's channels must be weight's dim 1 and bias's "
                         f"size its dim 2, got {shapes}")
    if isinstance(pad, bool) or not isinstance(pad, int) or pad < 0:
        raise ValueError(f"conv_tbc: pad must be an int >= 0, got {pad!r}")
    if x.shape[0] + 2 * pad - w.shape[0] + 1 < 0:
        raise ShapeError(f"conv_tbc: {shapes} with pad={pad}: the kernel is longer than the "
                         "padded time dim plus one")


# ---- linear_cross_entropy's logits ---------------------------------------------------------


def _linear_logits(input, linear_weight, linear_bias):  # noqa: A002 - torch's names
    """linear_cross_entropy's logits, checked as torch checks them: input (in,) or (N, in),
    linear_weight (C, *out_features, in), linear_bias (C, *out_features) -> (C,), (N, C) or
    (N, C, *out_features)."""
    x = _t(input)
    w = _t(linear_weight, x)
    b = _opt(linear_bias, x)
    shapes = f"input {fmt_shape(x.shape)}, linear_weight {fmt_shape(w.shape)}"
    if x.ndim not in (1, 2) or w.ndim < 2:
        raise ShapeError(f"linear_cross_entropy: expected an input with 1 or 2 dims and a "
                         f"linear_weight with at least 2 dims, got {shapes}")
    if x.shape[-1] != w.shape[-1]:
        raise ShapeError(f"linear_cross_entropy: the in_features (last dims) of {shapes} "
                         "differ")
    if b is not None and b.shape != w.shape[:-1]:
        raise ShapeError(f"linear_cross_entropy: expected linear_bias of shape "
                         f"{fmt_shape(w.shape[:-1])}, got {fmt_shape(b.shape)}")
    if w.ndim > 2 and x.ndim == 1:
        raise ShapeError(f"linear_cross_entropy: a K-dimensional loss ({shapes}) needs a "
                         f"batched input (N, {w.shape[-1]})")
    if w.ndim == 2:
        return mm.linear(x, w, b)
    logits = mm.linear(x, w.reshape(-1, w.shape[-1]), None if b is None else b.reshape(-1))
    return logits.reshape(x.shape[0], *w.shape[:-1])
