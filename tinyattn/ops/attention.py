"""Scaled dot-product attention: softmax(q kᵀ * scale, masked) @ v.

The composite path is the op-by-op graph a learner can read node by node: a matmul for the
scores, one fused scaled-masked softmax, a matmul with v. Masks follow PyTorch: a bool mask is
True where a query may attend; a float mask is added to the scaled scores; `is_causal` lets query
i see keys 0..i. A query with no key to attend gives a zero output row and zero gradients.
"""

import math

from ..errors import ShapeError, fmt_shape
from .softmax import scaled_masked_softmax

OPS = ()  # the fused (flash) attention op joins here


def check_qkv(q, k, v):
    """q (..., T, d), k (..., S, d), v (..., S, dv): the shapes attention needs."""
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ShapeError(f"scaled_dot_product_attention: q, k, v need at least 2 dims (T, d), "
                         f"got {fmt_shape(q.shape)}, {fmt_shape(k.shape)}, {fmt_shape(v.shape)}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"scaled_dot_product_attention: q {fmt_shape(q.shape)}, k "
                         f"{fmt_shape(k.shape)}, v {fmt_shape(v.shape)}: q and k need the same "
                         "last dim (d), k and v the same number of keys (S)")


def attention_weights(q, k, attn_mask=None, is_causal=False, scale=None):
    """The attention probabilities softmax(q kᵀ * scale, masked): (..., T, S)."""
    check_qkv(q, k, k)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1)  # (..., T, S)
    if attn_mask is not None and attn_mask.dtype != bool:
        scores = scores * scale + attn_mask  # an additive float mask (-inf where masked)
        return scaled_masked_softmax(scores, None, scale=1.0, causal=is_causal)
    return scaled_masked_softmax(scores, attn_mask, scale=scale, causal=is_causal)


def sdpa_composite(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """softmax(q kᵀ * scale, masked) @ v, one node per step."""
    check_qkv(q, k, v)
    return attention_weights(q, k, attn_mask, is_causal, scale) @ v  # (..., T, dv)
