"""torch's encoder-decoder Transformer: TransformerEncoderLayer and TransformerEncoder,
TransformerDecoderLayer and TransformerDecoder, and Transformer (both stacks), with PyTorch's
signatures, parameter names and math, so a torch state dict loads as is. An encoder layer is
self-attention (MultiheadAttention) then a two-layer feed-forward block; a decoder layer puts
cross-attention to the encoder's output (`memory`) between the two. Each block has a residual
connection and a LayerNorm (after each block, or before with norm_first=True, the pre-LN form
of GPT-2 and TinyTransformer).

Shapes: S source length, T target length, N batch, E d_model; (S, N, E), or (N, S, E) with
batch_first=True.
"""

import copy

from .. import functional as F
from ..errors import ShapeError, fmt_shape
from ..tensor import zeros
from . import init
from .attention import MultiheadAttention
from .layers import Dropout, LayerNorm, Linear
from .module import Module, ModuleList

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(name, activation):
    """The feed-forward block's activation: "relu", "gelu" or a callable (torch's choices)."""
    if not isinstance(activation, str):
        return activation
    if activation not in _ACTIVATIONS:
        raise ValueError(f"{name}: activation must be 'relu', 'gelu' or a callable, got "
                         f"{activation!r}")
    return _ACTIVATIONS[activation]


def _feed_forward(layer, d_model, dim_feedforward, dropout, bias, dtype):
    """The feed-forward block's parts, linear1, dropout, linear2 (torch's names and order)."""
    layer.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
    layer.dropout = Dropout(dropout)
    layer.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)


class TransformerEncoderLayer(Module):
    """x + dropout(self_attn(x)) then x + dropout(linear2(dropout(act(linear1(x))))), each sum
    followed by its LayerNorm (norm_first=False, torch's default) or each block fed a normed x
    (norm_first=True)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        act = _activation("TransformerEncoderLayer", activation)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        _feed_forward(self, d_model, dim_feedforward, dropout, bias, dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = act
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
        if not isinstance(num_layers, int) or num_layers < 0:  # (0: the identity, then norm)
            raise ShapeError(f"TransformerEncoder: num_layers must be a whole number >= 0, got "
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


class TransformerDecoderLayer(Module):
    """x + dropout(self_attn(x)), then x + dropout(multihead_attn(x, memory)) (cross-attention
    to the encoder's output), then the feed-forward block; each sum followed by its LayerNorm
    (norm1, norm2, norm3), or each block fed a normed x with norm_first=True."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        act = _activation("TransformerDecoderLayer", activation)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, dtype=dtype)
        _feed_forward(self, d_model, dim_feedforward, dropout, bias, dtype)
        self.norm_first = norm_first
        self.norm1, self.norm2, self.norm3 = (
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype) for _ in range(3))
        self.dropout1, self.dropout2, self.dropout3 = (Dropout(dropout) for _ in range(3))
        self.activation = act
        if device is not None:
            self.to(device)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        self_args = (tgt_mask, tgt_key_padding_mask, tgt_is_causal)
        cross_args = (memory, memory_mask, memory_key_padding_mask, memory_is_causal)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), *self_args)
            x = x + self._mha_block(self.norm2(x), *cross_args)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, *self_args))
        x = self.norm2(x + self._mha_block(x, *cross_args))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _mha_block(self, x, memory, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, memory, memory, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer applied in turn to the target (each attending to the
    same memory), then `norm` if given."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        if not isinstance(decoder_layer, Module):
            raise TypeError(f"TransformerDecoder: decoder_layer must be a Module, got "
                            f"{type(decoder_layer).__name__}")
        if not isinstance(num_layers, int) or num_layers < 0:  # (0: the identity, then norm)
            raise ShapeError(f"TransformerDecoder: num_layers must be a whole number >= 0, got "
                             f"{num_layers!r}")
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return out if self.norm is None else self.norm(out)


class Transformer(Module):
    """torch.nn.Transformer: an encoder stack over the source and a decoder stack over the
    target that attends to the encoder's output, each ending in a LayerNorm; the weight
    matrices start Xavier-uniform, as torch's."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        options = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                       layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                       norm_first=norm_first, bias=bias, dtype=dtype)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **options), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **options), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        self._reset_parameters()
        if device is not None:
            self.to(device)

    def _reset_parameters(self):
        """torch's: every weight matrix Xavier-uniform (again), in place; vectors left as
        they are."""
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise ShapeError(f"Transformer: src {fmt_shape(src.shape)} and tgt "
                             f"{fmt_shape(tgt.shape)} must have the same batch size (dim "
                             f"{batch}{', batch_first' if self.batch_first else ''})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(f"Transformer: src {fmt_shape(src.shape)} and tgt "
                             f"{fmt_shape(tgt.shape)} must end in d_model = {self.d_model}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """(sz, sz) float: -inf above the diagonal (the future), 0 elsewhere; added to the
        attention scores, it makes attention causal."""
        future = ~F.causal_mask(sz, backend=device)
        return zeros(sz, sz, dtype=dtype, backend=device).masked_fill(future, float("-inf"))


__all__ = ["TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer"]
