"""MultiheadAttention with PyTorch's signature and parameters, and RotaryEmbedding (RoPE).

Shapes: N batch, L target (query) length, S source (key) length, E embed_dim, H heads,
D = E / H per head. PyTorch's mask conventions hold here: in attn_mask and key_padding_mask a
bool True means "may NOT attend" (the opposite of F.scaled_dot_product_attention's bool mask),
a float mask is added to the scores; a query whose every key is masked gets zeros, not NaN.
"""

import math

import numpy as np

from .. import functional as F
from ..errors import DTypeError, ShapeError, fmt_shape
from ..tensor import Tensor, zeros
from . import init
from .layers import Linear
from .module import Module, Parameter


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear under torch's name for MultiheadAttention's out_proj (torch marks it so its
    quantization leaves it alone): the module prints as torch's does."""


class MultiheadAttention(Module):
    """Attention from `query` to `key`/`value` with H heads, as torch.nn.MultiheadAttention:
    the same constructor, forward arguments, parameter names (in_proj_weight, in_proj_bias,
    out_proj.weight, ...) and outputs, so a torch state dict loads as is.

    Masks as torch's: in attn_mask and key_padding_mask a bool True means "may NOT attend", a
    float mask is added to the scores. One difference: a query whose every key is masked gets
    zero weights and a zero attention result, so its output is out_proj's bias, with finite
    gradients; torch's gives NaN there (tinyattn's attention is never NaN)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ShapeError(f"MultiheadAttention: embed_dim {embed_dim} must be a positive "
                             f"multiple of num_heads {num_heads}")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        # torch's flag: one packed in_proj_weight (True) or q/k/v_proj_weight (False)
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = dropout, batch_first
        self.add_zero_attn = add_zero_attn
        E = embed_dim  # noqa: N806 - the docstring's name
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(zeros(3 * E, E, dtype=dtype))
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.in_proj_weight = None
            self.q_proj_weight = Parameter(zeros(E, E, dtype=dtype))
            self.k_proj_weight = Parameter(zeros(E, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(zeros(E, self.vdim, dtype=dtype))
        self.in_proj_bias = Parameter(zeros(3 * E, dtype=dtype)) if bias else None
        if add_bias_kv:
            self.bias_k = Parameter(zeros(1, 1, E, dtype=dtype))
            self.bias_v = Parameter(zeros(1, 1, E, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.out_proj = NonDynamicallyQuantizableLinear(E, E, bias=bias, dtype=dtype)
        self._reset_parameters()
        if device is not None:
            self.to(device)

    def _reset_parameters(self):
        """PyTorch's initialisation, in place: Xavier-uniform input projections, zero biases,
        Xavier-normal bias_k and bias_v (out_proj's weight is left to out_proj, as torch's)."""
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight,
                  self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def reset_parameters(self):
        """_reset_parameters() (torch's MultiheadAttention has only that one)."""
        self._reset_parameters()

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """query (L, N, E) (or (N, L, E) with batch_first, or unbatched (L, E)), key (S, N, kdim),
        value (S, N, vdim) -> (output like query, weights (N, L, S) averaged over heads or
        (N, H, L, S), or None when need_weights=False)."""
        batched = query.ndim == 3
        q_in, k_in, v_in = self._batch_first(query, key, value, batched)  # (N, L, E), ...
        N, L, _ = q_in.shape  # noqa: N806
        S = k_in.shape[1]  # noqa: N806
        E, H, D = self.embed_dim, self.num_heads, self.head_dim  # noqa: N806
        w_q, w_k, w_v = self._weights()
        b_q, b_k, b_v = (None,) * 3 if self.in_proj_bias is None else \
            (self.in_proj_bias[:E], self.in_proj_bias[E:2 * E], self.in_proj_bias[2 * E:])
        q = F.linear(q_in, w_q, b_q)  # (N, L, E)
        k = F.linear(k_in, w_k, b_k)  # (N, S, E)
        v = F.linear(v_in, w_v, b_v)  # (N, S, E)
        mask = self._mask(attn_mask, key_padding_mask, is_causal, batched, N, L, S, q)
        extra = 0  # keys appended below: bias_k/bias_v, then a zero key
        if self.bias_k is not None:
            k = F.cat([k, self.bias_k.expand(N, 1, E)], dim=1)  # (N, S+1, E)
            v = F.cat([v, self.bias_v.expand(N, 1, E)], dim=1)
            extra += 1
        q = q.reshape(N, L, H, D).transpose(1, 2)  # (N, H, L, D)
        k = k.reshape(N, S + extra, H, D).transpose(1, 2)  # (N, H, S', D)
        v = v.reshape(N, S + extra, H, D).transpose(1, 2)  # (N, H, S', D)
        if self.add_zero_attn:
            k = F.cat([k, zeros(N, H, 1, D, dtype=k.dtype, backend=k.backend)], dim=2)
            v = F.cat([v, zeros(N, H, 1, D, dtype=v.dtype, backend=v.backend)], dim=2)
            extra += 1
        if mask is not None and extra:  # the appended keys may be attended by every query
            pad = np.ones if mask.dtype == bool else np.zeros
            mask = F.cat([mask, Tensor(pad(mask.shape[:-1] + (extra,), dtype=mask.dtype),
                                       backend=mask.backend)], dim=-1)
        p = self.dropout if self.training else 0.0
        if need_weights:
            weights = F.attention_weights(q, k, mask)  # (N, H, L, S')
            if p:  # the weights returned are the ones used: after dropout, as torch's
                weights = F.dropout(weights, p)
            y = weights @ v  # (N, H, L, D)
            if average_attn_weights:
                weights = weights.mean(1)  # (N, L, S')
        else:
            y = F.scaled_dot_product_attention(q, k, v, mask, dropout_p=p)  # (N, H, L, D)
            weights = None
        y = self.out_proj(y.transpose(1, 2).reshape(N, L, E))  # (N, L, E): heads side by side
        if not batched:
            return y[0], None if weights is None else weights[0]
        return (y if self.batch_first else y.transpose(0, 1)), weights

    def _weights(self):
        E = self.embed_dim  # noqa: N806
        if self.in_proj_weight is not None:
            w = self.in_proj_weight
            return w[:E], w[E:2 * E], w[2 * E:]
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def _batch_first(self, query, key, value, batched):
        """query, key, value as (N, L, E), (N, S, kdim), (N, S, vdim), checking their shapes."""
        query, key, value = (F._t(x) for x in (query, key, value))
        want = 3 if batched else 2
        shapes = f"query {fmt_shape(query.shape)}, key {fmt_shape(key.shape)}, value " \
            f"{fmt_shape(value.shape)}"
        if query.ndim not in (2, 3) or key.ndim != want or value.ndim != want:
            raise ShapeError(f"MultiheadAttention: query, key and value must all be batched "
                             f"(3 dims) or all unbatched (2 dims), got {shapes}")
        if batched and not self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        elif not batched:
            query, key, value = (x.unsqueeze(0) for x in (query, key, value))
        fits = (query.shape[-1], key.shape[-1], value.shape[-1]) == (self.embed_dim, self.kdim,
                                                                     self.vdim)
        if not fits or key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise ShapeError(f"MultiheadAttention: with embed_dim={self.embed_dim}, "
                             f"kdim={self.kdim}, vdim={self.vdim} and batch_first="
                             f"{self.batch_first}, got {shapes}: the last dims must be those, "
                             "key and value need the same batch and length, query the same "
                             "batch")
        return query, key, value

    def _mask(self, attn_mask, key_padding_mask, is_causal, batched, N, L, S, like):  # noqa: N803
        """One mask for the scores (N or 1, H or 1, L, S): bool True = may attend when every
        mask given is bool, else float (added); None if there is none."""
        H = self.num_heads  # noqa: N806
        parts = []
        if attn_mask is None and is_causal:
            parts.append(F.causal_mask(L, S, backend=like.backend))  # True = may attend
        elif attn_mask is not None:
            parts.append(_keep_or_add(_attn_mask_4d(F._t(attn_mask, like), batched, N, H, L, S),
                                      "attn_mask"))
        if key_padding_mask is not None:
            m = F._t(key_padding_mask, like)
            if m.shape != ((N, S) if batched else (S,)):
                raise ShapeError(f"MultiheadAttention: key_padding_mask must be (N, S) = "
                                 f"{fmt_shape((N, S) if batched else (S,))}, got "
                                 f"{fmt_shape(m.shape)}")
            parts.append(_keep_or_add(m.reshape(N, 1, 1, S), "key_padding_mask"))
        return _combine_masks(parts, like.dtype)


def _attn_mask_4d(m, batched, N, H, L, S):  # noqa: N803
    """attn_mask (L, S) or (N*H, L, S) (unbatched: (H, L, S)) as (1 or N, 1 or H, L, S)."""
    if m.shape == (L, S):
        return m.reshape(1, 1, L, S)
    if m.shape == ((N * H, L, S) if batched else (H, L, S)):
        return m.reshape(N, H, L, S)
    raise ShapeError(f"MultiheadAttention: attn_mask must be (L, S) = {fmt_shape((L, S))} or "
                     f"(N*num_heads, L, S) = {fmt_shape((N * H, L, S))}, got "
                     f"{fmt_shape(m.shape)}")


def _combine_masks(parts, dtype):
    """One mask from several: their AND when all are bool (True = may attend), else the sum
    of float masks, a bool one becoming 0 (attend) or -inf (not); None for no parts."""
    if not parts:
        return None
    if all(m.dtype == bool for m in parts):
        return parts[0] & parts[1] if len(parts) == 2 else parts[0]
    total = None
    for m in parts:
        m = F.where(m, 0.0, -math.inf).to(dtype) if m.dtype == bool else m
        total = m if total is None else total + m
    return total


def _keep_or_add(m, name):
    """PyTorch's MHA bool masks say True = may NOT attend: flip them to True = may attend."""
    if m.dtype == bool:
        return ~m
    if m.dtype.kind != "f":
        raise DTypeError(f"MultiheadAttention: {name} must be bool (True = may not attend) or "
                         f"float (added to the scores), got {m.dtype}")
    return m


class RotaryEmbedding(Module):
    """Rotary position embedding (RoPE, Su et al. 2021): rotates each pair of channels of q and
    k by an angle proportional to the position, so q·k depends on positions only through their
    difference. `forward(x, offset=0)` takes x (..., T, dim) at positions offset..offset+T-1.

    Pairs are (i, i + dim/2) (rotate-half, as GPT-NeoX and Hugging Face Llama) or, with
    interleaved=True, (2i, 2i+1) (as the original RoFormer and Meta's Llama). The cos/sin
    tables are non-persistent buffers of max_seq_len rows, made in float64 and cast to the
    input's dtype on use: they move with `to()` but stay out of the state dict.
    """

    def __init__(self, dim, max_seq_len=2048, base=10000.0, interleaved=False):
        super().__init__()
        if dim <= 0 or dim % 2:
            raise ShapeError(f"RotaryEmbedding: dim must be even and positive, got {dim}")
        self.dim, self.max_seq_len, self.base = dim, max_seq_len, base
        self.interleaved = interleaved
        cos, sin = F.rotary_tables(dim, max_seq_len, base, dtype=np.float64)  # cast per use
        self.register_buffer("cos", cos, persistent=False)  # (max_seq_len, dim/2)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x, offset=0):
        T = x.shape[-2]  # noqa: N806
        if offset < 0 or offset + T > self.max_seq_len:
            raise ShapeError(f"RotaryEmbedding: positions {offset}..{offset + T - 1} of an "
                             f"input {fmt_shape(x.shape)} pass max_seq_len={self.max_seq_len}; "
                             "make it with a larger max_seq_len")
        cos, sin = self.cos[offset:offset + T], self.sin[offset:offset + T]  # (T, dim/2)
        return F.apply_rotary(x, cos.to(x.dtype), sin.to(x.dtype), self.interleaved)

    def extra_repr(self):
        return f"dim={self.dim}, max_seq_len={self.max_seq_len}, base={self.base}, " \
            f"interleaved={self.interleaved}"
