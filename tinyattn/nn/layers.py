"""Layers: Linear (and LazyLinear, with its UninitializedParameter), Bilinear, Embedding and
EmbeddingBag, LayerNorm,
RMSNorm, BatchNorm1d/2d, GroupNorm, Dropout, Identity, Flatten, Unflatten, CosineSimilarity and
PairwiseDistance (the activation modules live in activation.py).

Weights are Parameters initialised as PyTorch does by default; `TinyTransformer` re-initialises
its own the GPT-2 way. Each forward is one line of functional code.
"""

import math
import numbers

import numpy as np

from .. import functional as F
from ..autograd import no_grad
from ..errors import DimError, ShapeError, fmt_shape
from ..ops import nn as nn_ops
from ..tensor import Tensor, ones, rand, randn, tensor, zeros
from . import init
from .module import Module, Parameter


def _uniform(shape, bound, dtype):
    return (rand(*shape, dtype=dtype) * (2 * bound) - bound).detach()


def _sizes(normalized_shape, where):
    """normalized_shape as a tuple of ints: one int (a NumPy integer too, as torch's
    numbers.Integral) or a sequence of them."""
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    shape = tuple(normalized_shape)
    for size in shape:
        if isinstance(size, bool) or not isinstance(size, numbers.Integral):
            raise TypeError(f"{where}: normalized_shape must be an int or a sequence of ints, "
                            f"got {normalized_shape!r}")
    return tuple(int(size) for size in shape)


def _ones_zeros(weight, bias):
    """A norm's parameters back to torch's start, in place: weight ones, bias zeros (None:
    absent)."""
    if weight is not None:
        init.ones_(weight)
    if bias is not None:
        init.zeros_(bias)


def _place(module, device):
    """torch's device= of a constructor: the new module's tensors moved to that backend."""
    if device is not None:
        module.to(device)


class Linear(Module):
    """y = x @ weightᵀ + bias, with weight (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1 / math.sqrt(in_features) if in_features > 0 else 0.0  # (torch's: no inputs)
        self.weight = Parameter(_uniform((out_features, in_features), bound, dtype))
        self.bias = Parameter(_uniform((out_features,), bound, dtype)) if bias else None
        _place(self, device)

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.linear(input, self.weight, self.bias)  # (..., in) -> (..., out)

    def reset_parameters(self):
        """torch's initialisation again, in place: weight kaiming_uniform_(a=√5), which is
        U(-1/√in_features, 1/√in_features), and bias U of the same bound (0 with no inputs)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1]
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class UninitializedParameter(Parameter):
    """torch's: a lazy module's parameter before its shape is known. It holds no values (an
    empty array of its dtype, which .to() converts; its shape reads (0,), where torch's
    refuses) until materialize(shape) gives it that shape, in place: the same object becomes
    a Parameter (cls_to_become), so an optimizer given it before steps it after."""

    __slots__ = ()
    cls_to_become = Parameter

    def materialize(self, shape, device=None, dtype=None):
        """Give it `shape` (uninitialized values; the module's reset_parameters fills them) and
        `dtype` (its own if None), and make it a Parameter; `device` as torch's, a backend."""
        be = self.backend if device is None else self.to(device).backend
        self._data = be.xp.empty(tuple(shape), dtype=dtype or self._data.dtype)
        self.backend = be
        self.__class__ = self.cls_to_become

    def __repr__(self):
        return "<UninitializedParameter>"


def _shape_of(value):
    """A state dict entry's shape (a tensor's, torch's, an array's or a list's)."""
    shape = getattr(value, "shape", None)
    return tuple(np.shape(value) if shape is None else shape)


class LazyLinear(Linear):
    """torch's: a Linear whose in_features is inferred from its first input (input.shape[-1]).
    Until that first call its weight and bias are UninitializedParameters (in_features 0);
    the call gives them their shapes in place (the same objects: an optimizer built before
    steps them), initialises them as Linear's, and the module becomes a Linear (its class
    changes, as torch's cls_to_become). A state dict loaded before the call gives the
    parameters its shapes."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        Module.__init__(self)
        self.in_features, self.out_features = 0, out_features
        self.weight = UninitializedParameter(dtype=dtype)
        self.bias = UninitializedParameter(dtype=dtype) if bias else None
        _place(self, device)

    def has_uninitialized_params(self):
        return any(isinstance(p, UninitializedParameter) for p in self._parameters.values())

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):  # noqa: A002 - torch's argument name
        """Shape the parameters for `input` (a tensor whose last dim is in_features) and
        initialise them; a module whose parameters a load shaped takes in_features from
        them."""
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:
            if input.shape[-1] != self.weight.shape[-1]:
                raise ShapeError(f"LazyLinear: the input's last dim {input.shape[-1]} is not "
                                 f"the loaded weight's in_features {self.weight.shape[-1]}")
            self.in_features = input.shape[-1]

    def forward(self, input):  # noqa: A002 - torch's argument name
        self.initialize_parameters(input)
        # a Linear from now on, as torch's (past Module.__setattr__, which keeps attributes)
        object.__setattr__(self, "__class__", self.cls_to_become)
        return F.linear(input, self.weight, self.bias)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """As torch's lazy modules: an uninitialized parameter takes the shape of its entry
        first (the load then fills it)."""
        for name, p in self._parameters.items():
            value = state_dict.get(prefix + name)
            if isinstance(p, UninitializedParameter) and value is not None:
                if not isinstance(value, UninitializedParameter):
                    p.materialize(_shape_of(value))  # (a list's too, as Linear loads one)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class Bilinear(Module):
    """y = x1ᵀ A x2 + b per output: weight (out_features, in1_features, in2_features), bias
    (out_features,), both U(-1/√in1_features, 1/√in1_features) as torch's."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        for what, n in (("in1_features", in1_features), ("in2_features", in2_features),
                        ("out_features", out_features)):
            if isinstance(n, bool) or not isinstance(n, numbers.Integral):
                raise TypeError(f"Bilinear: {what} must be an int, got {n!r}")
            least = 1 if what == "in1_features" else 0  # (torch's: the others may be 0)
            if n < least:
                raise ValueError(f"Bilinear: {what} must be >= {least}, got {n}")
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        bound = 1 / math.sqrt(in1_features)
        self.weight = Parameter(_uniform((out_features, in1_features, in2_features), bound,
                                         dtype))
        self.bias = Parameter(_uniform((out_features,), bound, dtype)) if bias else None
        _place(self, device)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def reset_parameters(self):
        """torch's initialisation again, in place: weight and bias U(-1/√in1, 1/√in1)."""
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Embedding(Module):
    """A table of num_embeddings vectors of size embedding_dim, looked up by integer id.

    padding_idx: that row starts at zeros and gets no gradient (a padding token's vector).
    max_norm, norm_type, scale_grad_by_freq: as F.embedding's (torch's). sparse=True is
    refused (tinyattn has no sparse gradients)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        if sparse:
            raise ValueError("Embedding: sparse=True (a sparse weight gradient) is not "
                             "supported: tinyattn has no sparse tensors; leave it False")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            padding_idx = F._padding_index(padding_idx, num_embeddings, "Embedding")
        if _weight is None:
            weight = randn(num_embeddings, embedding_dim, dtype=dtype)
            if padding_idx is not None:
                weight[padding_idx] = 0.0
        else:  # (torch's: the given table itself, its padding row as it is)
            weight = _weight if isinstance(_weight, Tensor) else tensor(_weight)
            if tuple(weight.shape) != (num_embeddings, embedding_dim):
                raise ShapeError(f"Embedding: _weight must be ({num_embeddings}, "
                                 f"{embedding_dim}), got {fmt_shape(weight.shape)}")
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        self.weight = Parameter(weight, requires_grad=not _freeze)
        _place(self, device)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is the 2-D tensor `embeddings` itself, its memory shared
        (frozen: no gradient, unless freeze=False), as torch's; the padding row keeps the
        given values. An array or a list is first made a tensor (a copy)."""
        embeddings = embeddings if isinstance(embeddings, Tensor) else tensor(embeddings)
        if embeddings.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained: embeddings must be 2-D (rows, dim), "
                             f"got {fmt_shape(embeddings.shape)}")
        return cls(*embeddings.shape, padding_idx=padding_idx, max_norm=max_norm,
                   norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse,
                   _weight=embeddings, _freeze=freeze)

    def forward(self, input):  # noqa: A002 - torch's argument name: the ids
        # (...) -> (..., embedding_dim)
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        return s

    def reset_parameters(self):
        """torch's initialisation again, in place: weight N(0, 1), the padding row zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0


class EmbeddingBag(Module):
    """An Embedding whose lookups are summed, averaged or max'ed per bag (mode), as
    F.embedding_bag: forward(input, offsets=None, per_sample_weights=None). The weight
    (num_embeddings, embedding_dim) starts N(0, 1), the padding row zero, as torch's."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None,
                 _freeze=False):
        super().__init__()
        table = Embedding(num_embeddings, embedding_dim, padding_idx, _weight=_weight,
                          _freeze=_freeze, dtype=dtype)  # (its checks and initialisation)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, \
            scale_grad_by_freq
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        self.padding_idx = table.padding_idx
        self.weight = table.weight
        _place(self, device)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag whose weight is the 2-D tensor `embeddings` itself (frozen unless
        freeze=False), as Embedding.from_pretrained."""
        embeddings = embeddings if isinstance(embeddings, Tensor) else tensor(embeddings)
        if embeddings.ndim != 2:
            raise ShapeError(f"EmbeddingBag.from_pretrained: embeddings must be 2-D (rows, "
                             f"dim), got {fmt_shape(embeddings.shape)}")
        return cls(*embeddings.shape, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                   embeddings, include_last_offset, padding_idx, _freeze=freeze)

    def forward(self, input, offsets=None, per_sample_weights=None):  # noqa: A002 - torch's
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    reset_parameters = Embedding.reset_parameters

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s


class LayerNorm(Module):
    """Normalize over the last dims, then scale (weight, ones) and shift (bias, zeros)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        shape = _sizes(normalized_shape, "LayerNorm")
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(ones(*shape, dtype=dtype)) if elementwise_affine else None
        # bias=False: a gain without a shift (torch's LayerNorm(bias=False))
        self.bias = Parameter(zeros(*shape, dtype=dtype)) if elementwise_affine and bias else None
        _place(self, device)

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def reset_parameters(self):
        """torch's initialisation again, in place: weight ones, bias zeros."""
        _ones_zeros(self.weight, self.bias)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """x / √(mean(x²) + eps) over the last dims, scaled by weight (ones); eps=None is the dtype's
    machine epsilon, as in PyTorch."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        shape = _sizes(normalized_shape, "RMSNorm")
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(ones(*shape, dtype=dtype)) if elementwise_affine else None
        _place(self, device)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def reset_parameters(self):
        """torch's initialisation again, in place: weight ones."""
        _ones_zeros(self.weight, None)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class _NormBase(Module):
    """What the batch and instance norms share, as torch's _NormBase: weight and bias (with
    affine), the running statistics' buffers (with track_running_stats), their resets, the
    loading of older checkpoints and the repr."""

    _dims = ()  # the input dims allowed (BatchNorm1d: 2 or 3, BatchNorm2d: 4)
    _version = 2  # (torch's: version 2 saves num_batches_tracked)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = Parameter(ones(num_features, dtype=dtype)) if affine else None
        # bias=False: a gain without a shift (torch's)
        self.bias = Parameter(zeros(num_features, dtype=dtype)) if affine and bias else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None
        _place(self, device)

    def reset_running_stats(self):
        """running_mean zeros, running_var ones, num_batches_tracked 0, in place (as torch's;
        nothing without track_running_stats)."""
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        """reset_running_stats(), then weight ones and bias zeros, in place (as torch's)."""
        self.reset_running_stats()
        if self.affine:
            _ones_zeros(self.weight, self.bias)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """A checkpoint from before torch 0.4.1 (version below 2 in its _metadata, or none
        recorded) has no num_batches_tracked: not missing, the module keeps its own count (0 if
        new), as torch's loading fills it in. A version-2 checkpoint without it lacks it."""
        key = prefix + "num_batches_tracked"
        version = local_metadata.get("version")
        if (version is None or version < 2) and self.track_running_stats and \
                key not in state_dict:
            state_dict[key] = self.num_batches_tracked
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    """Normalize each channel (dim 1) over the batch and the other dims, then scale and shift
    it. Training: the batch's mean and (biased) variance, and the running statistics move
    toward them by `momentum` (the variance unbiased; momentum=None: the average over every
    batch so far); eval: the running statistics. torch's arguments, buffers and state keys (a
    state dict without num_batches_tracked, torch's older checkpoints, loads)."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        x, name = input, type(self).__name__
        if x.ndim not in self._dims or x.shape[1] != self.num_features:
            raise ShapeError(f"{name}: expected {' or '.join(map(str, self._dims))}-D input "
                             f"(N, {self.num_features}, ...), got {fmt_shape(x.shape)}")
        # torch's _BatchNorm.forward, step by step: the batch's statistics in training, and in
        # eval when there are no running ones; the running ones move only in training with
        # track_running_stats, and in eval are used whenever they are there (track_running_stats
        # turned off after construction too)
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        per_channel = x.shape[0] * math.prod(x.shape[2:])  # values per channel (torch's count)
        if batch_stats and per_channel == 1:  # (refused before the batch is counted)
            raise ShapeError(f"{name}: needs more than one value per channel to train, got "
                             f"{fmt_shape(x.shape)}")
        momentum = self._count_batch()
        if batch_stats and per_channel == 0:  # an empty batch: an empty output, as torch's,
            y = self._affine(x.clone())  # the running statistics as they were; a float input
            return y.to(x.dtype) if x.is_floating_point() else y  # keeps its dtype (float16)
        return F.batch_norm(x, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias,
                            training=batch_stats, momentum=momentum, eps=self.eps)

    def _count_batch(self):
        """The momentum of this call: in training with track_running_stats the batch is counted
        (num_batches_tracked) and momentum=None is the average over every batch so far."""
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked += 1
            if self.momentum is None:
                momentum = 1 / self.num_batches_tracked.item()
        return momentum

    def _affine(self, y):
        """y scaled by weight and shifted by bias (where the module has them), per channel."""
        shape = (1, self.num_features) + (1,) * (y.ndim - 2)
        if self.weight is not None:
            y = y * self.weight.reshape(shape)
        return y if self.bias is None else y + self.bias.reshape(shape)


class BatchNorm1d(_BatchNorm):
    """Batch norm of (N, C) or (N, C, L) input, per channel C."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm of (N, C, H, W) input, per channel C."""

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm of (N, C, D, H, W) input, per channel C."""

    _dims = (5,)


class GroupNorm(Module):
    """Normalize each sample over groups of num_channels / num_groups channels (and every dim
    after the channels), then scale and shift each channel; the same in train and eval."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        F._check_num_groups(num_groups, "GroupNorm")
        if num_channels % num_groups:
            raise ShapeError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                     eps, affine)
        self.weight = Parameter(ones(num_channels, dtype=dtype)) if affine else None
        self.bias = Parameter(zeros(num_channels, dtype=dtype)) if affine and bias else None
        _place(self, device)

    def forward(self, input):  # noqa: A002 - torch's argument name
        x = input
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ShapeError(f"GroupNorm: expected input (N, {self.num_channels}, ...), got "
                             f"{fmt_shape(x.shape)}")
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def reset_parameters(self):
        """torch's initialisation again, in place: weight ones, bias zeros."""
        _ones_zeros(self.weight, self.bias)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class Dropout(Module):
    """Zero entries with probability p while training; the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        nn_ops.check_dropout_p(p)  # at construction, as torch.nn.Dropout
        self.p, self.inplace = p, inplace

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Identity(Module):
    """Returns its input unchanged (a placeholder, e.g. for a removed layer); takes and ignores
    any constructor arguments, as in PyTorch."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):  # noqa: A002 - torch's argument name
        return input


class Flatten(Module):
    """Joins dims start_dim..end_dim into one: (N, C, H, W) -> (N, C*H*W) by default."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):  # noqa: A002 - torch's argument name
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim into unflattened_size (one entry may be -1): (N, 12) -> (N, 3, 4)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        # (kept as given, a list or a tuple, as torch's: its repr shows which)
        self.dim, self.unflattened_size = dim, unflattened_size \
            if isinstance(unflattened_size, (list, tuple)) else tuple(unflattened_size)

    def forward(self, input):  # noqa: A002 - torch's argument name
        x = input
        dim = self.dim + x.ndim if self.dim < 0 else self.dim
        if not 0 <= dim < x.ndim:
            raise DimError(f"Unflatten: dim {self.dim} is out of range for an input of shape "
                           f"{fmt_shape(x.shape)}")
        sizes, n = tuple(self.unflattened_size), x.shape[dim]
        known = math.prod(s for s in sizes if s != -1)
        if sizes.count(-1) > 1 or (n != known if -1 not in sizes else known == 0 or n % known):
            raise ShapeError(f"Unflatten: dim {self.dim} of size {n} (input "
                             f"{fmt_shape(x.shape)}) cannot be split into "
                             f"{fmt_shape(sizes)}")
        return x.reshape(x.shape[:dim] + sizes + x.shape[dim + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
