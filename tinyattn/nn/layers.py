"""Layers: Linear, Embedding, LayerNorm, Dropout and the activation modules.

Weights are Parameters initialised as PyTorch does by default; `TinyTransformer` re-initialises
its own the GPT-2 way. Each forward is one line of functional code.
"""

import math

from .. import functional as F
from ..tensor import ones, rand, randn, zeros
from .module import Module, Parameter


def _uniform(shape, bound, dtype):
    return (rand(*shape, dtype=dtype) * (2 * bound) - bound).detach()


class Linear(Module):
    """y = x @ weightᵀ + bias, with weight (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1 / math.sqrt(in_features)
        self.weight = Parameter(_uniform((out_features, in_features), bound, dtype))
        self.bias = Parameter(_uniform((out_features,), bound, dtype)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)  # (..., in) -> (..., out)

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A table of num_embeddings vectors of size embedding_dim, looked up by integer id."""

    def __init__(self, num_embeddings, embedding_dim, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(randn(num_embeddings, embedding_dim, dtype=dtype))

    def forward(self, ids):
        return F.embedding(ids, self.weight)  # (...) -> (..., embedding_dim)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """Normalize over the last dims, then scale (weight, ones) and shift (bias, zeros)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, dtype=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape, self.eps = tuple(shape), eps
        self.weight = Parameter(ones(*shape, dtype=dtype)) if elementwise_affine else None
        self.bias = Parameter(zeros(*shape, dtype=dtype)) if elementwise_affine else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Dropout(Module):
    """Zero entries with probability p while training; the identity in eval mode."""

    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)
