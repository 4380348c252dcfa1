"""TransformerEncoderLayer and TransformerEncoder with PyTorch's signatures, parameter names and
math, so a torch state dict loads as is: self-attention (MultiheadAttention), then a two-layer
feed-forward block, each with a residual connection and a LayerNorm (after each block, or before
with norm_first=True, the pre-LN form of GPT-2 and TinyTransformer).

Shapes: S source length, N batch, E d_model; (S, N, E), or (N, S, E) with batch_first=True.
"""

import copy

from .. import functional as F
from ..errors import ShapeError
from .attention import MultiheadAttention
from .layers import Dropout, LayerNorm, Linear
from .module import Module, ModuleList

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class TransformerEncoderLayer(Module):
    """x + dropout(self_attn(x)) then x + dropout(linear2(dropout(act(linear1(x))))), each sum
    followed by its LayerNorm (norm_first=False, torch's default) or each block fed a normed x
    (norm_first=True)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(activation, str) and activation not in _ACTIVATIONS:
            raise ValueError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or a "
                             f"callable, got {activation!r}")
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = _ACTIVATIONS[activation] if isinstance(activation, str) else activation
        if device is not None:
            self.to(device)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer applied in turn (each with its own weights), then
    `norm` if given."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a Module, got "
                            f"{type(encoder_layer).__name__}")
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ShapeError(f"TransformerEncoder: num_layers must be a whole number >= 1, got "
                             f"{num_layers!r}")
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=bool(is_causal))
        return out if self.norm is None else self.norm(out)


__all__ = ["TransformerEncoderLayer", "TransformerEncoder"]
