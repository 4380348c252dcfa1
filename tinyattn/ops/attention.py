"""Scaled dot-product attention: softmax(q kᵀ * scale, masked) @ v, two ways.

The composite path is the op-by-op graph a learner can read node by node: a matmul for the
scores, one fused scaled-masked softmax, a matmul with v. The flash path is one fused op that
never builds the T×S matrix: it saves q, k, v, the output and each row's log-sum-exp, and its VJP
recomputes probabilities tile by tile (backends/flash.py). Masks follow PyTorch: a bool mask is
True where a query may attend; a float mask is added to the scaled scores (an integer one is
refused); `is_causal` lets query i see keys 0..i. A query with no key to attend gives a zero
output row and zero gradients. What every path shares (check_qkv, check_mask_dtype,
default_scale) lives here too.
"""

import math

import numpy as np

from ..dtypes import HALF
from ..errors import DTypeError, ShapeError, fmt_shape
from . import traps
from .op import broadcast_shape, broadcasts_to, op
from .samples import CAUSAL_PAD, case, const
from .softmax import scaled_masked_softmax


def _masked_queries(be, arrays, params, out, label):
    """Trap: query rows that may attend no key (by the mask, the causal rule or both)."""
    q, k, v, keep = arrays[:4]
    n_q, n_k = q.shape[-2], k.shape[-2]
    allowed = np.ones((n_q, n_k), dtype=bool)
    if params.get("causal", False):
        allowed &= np.arange(n_k)[None, :] <= np.arange(n_q)[:, None]
    if keep is not None:
        allowed = allowed & be.to_numpy(keep)
    rows = ~allowed.any(axis=-1)  # (..., T)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], rows.shape[:-1])
    yield from traps.masked_rows(label, np.broadcast_to(rows, lead + (n_q,)))


@op("flash_attention", "dS = P * (dO Vᵀ - rowsum(dO * O)); gq = s dS K, gk = s dSᵀ Q, gv = Pᵀ dO",
    grads=("gq", "gk", "gv", None),
    broadcasts=True, nondiff=(3,), fused=True, saves={0: 0, 1: 1, 2: 2, 3: 5},
    saves_out=3, fresh=True,
    traps=_masked_queries,
    samples=[
        case((2, 5, 4), (2, 5, 4), (2, 5, 3), None, scale=0.5, causal=True, block=2),
        case((4, 4), (4, 4), (4, 2), const(CAUSAL_PAD), scale=0.7, block=3),  # a masked row
        case((1, 2, 3, 4), (3, 1, 6, 4), (3, 1, 6, 2), None, scale=0.4, block=4),  # broadcast
        case((2, 7, 3), (2, 5, 3), (2, 5, 3), None, scale=1.0, causal=True, block=2),  # T > S
    ])
def flash_attention(be, q, k, v, keep=None, scale=1.0, causal=False, block=None):
    """out = softmax(scale q kᵀ, masked) v, in tiles; saves only q, k, v, out and lse per row"""
    check_qkv(q, k, v)
    lead = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (be.xp.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))  # views
    if keep is not None:
        if keep.dtype != bool:
            raise DTypeError(f"flash_attention: the mask must be bool (True = attend), got "
                             f"{keep.dtype}")
        want = lead + (q.shape[-2], k.shape[-2])
        if not broadcasts_to(keep.shape, want):
            raise ShapeError(f"flash_attention: the scores {fmt_shape(want)} cannot take a "
                             f"mask of shape {fmt_shape(keep.shape)}: it must broadcast to them; "
                             "give a (T, S) or (..., T, S) mask, True = attend")
        # a view at the scores' shape: the tiles slice its last two dims, which an (S,), (1, S)
        # or (T, 1) mask would not have at full length
        keep = be.xp.broadcast_to(keep, want)  # (..., T, S)
    block = block or be.flash_block
    out, lse = be.attention_forward(q, k, v, keep, scale, causal, block, block)
    return out, (q, k, v, out, lse, keep)


@flash_attention.defvjp
def flash_attention_vjp(be, g, saved, keep=None, scale=1.0, causal=False, block=None):
    q, k, v, out, lse, keep = saved
    block = block or be.flash_block
    gq, gk, gv = be.attention_backward(q, k, v, out, lse, g, keep, scale, causal, block, block)
    return gq, gk, gv, None


OPS = (flash_attention,)


def check_qkv(q, k, v):
    """q (..., T, d), k (..., S, d), v (..., S, dv), floating point of one dtype, whose leading
    (batch, head) dims broadcast together: what attention needs, checked before a matmul can
    fail on it (NumPy's message names neither attention nor enable_gqa; matmul's names no
    attention). Shapes and dtypes only."""
    qs, ks, vs = tuple(q.shape), tuple(k.shape), tuple(v.shape)  # (plain tuples: quick slices)
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2:
        raise ShapeError(f"scaled_dot_product_attention: q, k, v need at least 2 dims (T, d), "
                         f"got {fmt_shape(qs)}, {fmt_shape(ks)}, {fmt_shape(vs)}")
    dtype = q.dtype
    if dtype.kind != "f" or k.dtype.kind != "f" or v.dtype.kind != "f":
        _refuse_dtypes(q, k, v)
    if k.dtype != dtype or v.dtype != dtype:  # (torch's rule: no promotion)
        raise DTypeError(f"scaled_dot_product_attention: q, k and v must have the same dtype, "
                         f"got q {dtype}, k {k.dtype}, v {v.dtype}; convert them first, e.g. "
                         f"with .to({dtype})")
    if qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        raise ShapeError(f"scaled_dot_product_attention: q {fmt_shape(qs)}, k {fmt_shape(ks)}, "
                         f"v {fmt_shape(vs)}: q and k need the same last dim (d), k and v the "
                         "same number of keys (S)")
    if ks[:-2] != qs[:-2] or vs[:-2] != qs[:-2]:  # (equal: the common case, no more work)
        _check_lead_dims(q, k, v)


def _refuse_dtypes(q, k, v):
    """The first of q, k, v that is not floating point, named (as torch: attention of integers
    would be promoted, or wrap around)."""
    name, x = next((n, x) for n, x in (("q", q), ("k", k), ("v", v)) if x.dtype.kind != "f")
    raise DTypeError(f"scaled_dot_product_attention: {name} must be floating point, got "
                     f"{x.dtype}; convert it with .float()")


def _check_lead_dims(q, k, v):
    """q's, k's and v's dims before (T, d) broadcast together, or an error saying why: k and v
    with a head count (dim -3) of their own, not q's, point to enable_gqa (grouped-query
    attention), anything else to the batch dims."""
    try:
        broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        return
    except ValueError:
        pass
    shapes = f"q {fmt_shape(q.shape)}, k {fmt_shape(k.shape)}, v {fmt_shape(v.shape)}"
    heads = (q.shape[-3], k.shape[-3], v.shape[-3]) if min(q.ndim, k.ndim, v.ndim) > 2 else ()
    if heads and heads[1] == heads[2] != heads[0] and 1 not in heads:
        raise ShapeError(f"scaled_dot_product_attention: {shapes}: q has {heads[0]} heads (dim "
                         f"-3), k and v {heads[1]}; for grouped-query attention pass "
                         "enable_gqa=True (with q's heads a multiple of k's), else give them "
                         "the same heads")
    raise ShapeError(f"scaled_dot_product_attention: {shapes}: their leading (batch, head) "
                     "dims do not broadcast together (from the right, each pair equal or one "
                     "of them 1)")


def check_mask_dtype(attn_mask, q_dtype):
    """attn_mask bool (True = may attend) or float (added to the scores), as torch: a 0/1
    integer mask is neither, and would be added to the scores as if it were a float one. A
    float mask is float32 or the query's dtype (torch's rule: no other dtype is taken and
    silently rounded or promoted to the scores')."""
    if attn_mask is None or attn_mask.dtype == bool:
        return
    dtype = attn_mask.dtype
    if dtype.kind != "f":
        raise DTypeError(f"scaled_dot_product_attention: attn_mask must be bool (True = may "
                         f"attend) or float (added to the scores), got {dtype}; for "
                         "a 0/1 mask of the keys each query may attend, pass mask.bool()")
    if dtype != q_dtype and dtype != np.float32:
        raise DTypeError(f"scaled_dot_product_attention: a float attn_mask must be float32 or "
                         f"of the query's dtype (torch's rule), got attn_mask {dtype} with "
                         f"query {q_dtype}; convert it with .to({q_dtype})")


def check_mask_shape(attn_mask, scores_shape):
    """attn_mask broadcasts to the scores (..., T, S), or an error in
    scaled_dot_product_attention's name (not that of the op inside it that would find out)."""
    shape, target = attn_mask._data.shape, tuple(scores_shape)
    # (the usual masks, (T, S) or the scores' own shape, without NumPy's slower broadcast_shapes)
    if shape != target[len(target) - len(shape):] and not broadcasts_to(shape, target):
        kind = "mask" if attn_mask.dtype == bool else "float mask"
        raise ShapeError(f"scaled_dot_product_attention: the scores {fmt_shape(scores_shape)} "
                         f"cannot take a {kind} of shape {fmt_shape(attn_mask.shape)}: it must "
                         "broadcast to them; give a (T, S) or (..., T, S) mask"
                         + (", True = attend" if attn_mask.dtype == bool else ""))


def check_flash_mask(attn_mask, q, k, v):
    """check_mask_shape before the flash op (a mask is optional: None passes)."""
    if attn_mask is not None:
        lead = broadcast_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        check_mask_shape(attn_mask, lead + (q.shape[-2], k.shape[-2]))


def default_scale(d):
    """1/√d for a head dim d; 1 for d = 0, where every score is an empty sum, 0, whatever the
    scale (1/√0 = inf would make them 0 * inf = NaN; torch gives the mean of v)."""
    return 1 / math.sqrt(d) if d else 1.0


def attention_weights(q, k, attn_mask=None, is_causal=False, scale=None):
    """The attention probabilities softmax(q kᵀ * scale, masked): (..., T, S)."""
    check_qkv(q, k, k)
    check_mask_dtype(attn_mask, q.dtype)
    scale = default_scale(q.shape[-1]) if scale is None else float(scale)  # (np.float64 too)
    return checked_weights(q, k, attn_mask, is_causal, scale)


def checked_weights(q, k, attn_mask, is_causal, scale):
    """attention_weights once q, k and the mask are checked and the scale is known."""
    if q.dtype == HALF:
        # q·k passes float16's 65504 already for entries near 64 at d = 16 (even scaled by √scale
        # each first, as torch's math path does, near 128): the scores and their softmax in
        # float32, as torch's fused CPU kernels take them; the weights come back in float16
        return _weights(q.float(), k.float(), attn_mask, is_causal, scale).half()
    return _weights(q, k, attn_mask, is_causal, scale)


def _weights(q, k, attn_mask, is_causal, scale):
    """attention_weights once checked, the scale known."""
    scores = q @ k.transpose(-2, -1)  # (..., T, S)
    if attn_mask is not None:
        check_mask_shape(attn_mask, scores.shape)
    if attn_mask is not None and attn_mask.dtype != bool:
        scores = scores * scale + attn_mask  # an additive float mask (-inf where masked)
        return scaled_masked_softmax(scores, None, scale=1.0, causal=is_causal)
    return scaled_masked_softmax(scores, attn_mask, scale=scale, causal=is_causal)


def sdpa_composite(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """softmax(q kᵀ * scale, masked) @ v, one node per step."""
    check_qkv(q, k, v)
    check_mask_dtype(attn_mask, q.dtype)
    scale = default_scale(q.shape[-1]) if scale is None else float(scale)
    return checked_weights(q, k, attn_mask, is_causal, scale) @ v  # (..., T, dv)
