"""The lazy modules, torch's: LazyModuleMixin, UninitializedBuffer, LazyConv1d/2d/3d,
LazyConvTranspose1d/2d/3d, LazyBatchNorm1d/2d/3d and LazyInstanceNorm1d/2d/3d.

A lazy module's parameters (UninitializedParameter, layers.py's, as LazyLinear's) and running
statistics (UninitializedBuffer) have no shape until its first call: a forward pre-hook (torch's
_infer_parameters, registered first) reads in_channels or num_features from the input
(input.shape[1]; a convolution's unbatched input: shape[0]), gives each of them its shape in
place (the same objects: an optimizer built before steps them), initialises them as the
non-lazy class does, and the module becomes that class (cls_to_become: a LazyConv2d is then a
Conv2d). Before that call its state_dict holds the uninitialized tensors themselves, as torch's;
a state dict loaded into it gives them the shapes of its entries (the load fills them).

Beyond torch (as LazyLinear): a module whose shapes a load gave takes in_channels or
num_features from them at its first call (torch leaves them 0), and a module with nothing to
shape (LazyInstanceNorm without affine or running statistics) from the input; a materialized
buffer is an nn.Buffer (torch's becomes a plain Tensor that isinstance(t, nn.Buffer) still
accepts).
"""

import itertools

from ..autograd import no_grad
from ..errors import DimError, ShapeError, fmt_shape
from ..tensor import empty
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .layers import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    UninitializedParameter,
    _BatchNorm,
    _place,
    _shape_of,
)
from .module import Buffer
from .vision import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, _InstanceNorm


class UninitializedBuffer(Buffer):
    """torch's: a lazy module's buffer before its shape is known (an empty array of its dtype
    until then). materialize(shape) gives it that shape in place, and it becomes an nn.Buffer
    (cls_to_become). Assigned as a module's attribute, it is registered as a buffer (persistent
    unless persistent=False), as torch's."""

    __slots__ = ()
    cls_to_become = Buffer

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        super().__init__(empty(0, dtype=dtype, device=device), persistent=persistent)
        if requires_grad:
            self._require(True)

    materialize = UninitializedParameter.materialize  # (one way to materialize, shared)

    def __repr__(self):
        return "<UninitializedBuffer>"


_LAZY = (UninitializedParameter, UninitializedBuffer)


def _lazy(value):
    return isinstance(value, _LAZY)


class LazyModuleMixin:
    """torch's: put it first among a module's bases, give the module uninitialized parameters
    (and buffers) and an initialize_parameters(*args, **kwargs) that shapes them from the first
    call's arguments; set cls_to_become to the class the module becomes after that call (None:
    it keeps its own)."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def has_uninitialized_params(self):
        """Whether a parameter or buffer still has no shape."""
        return any(map(_lazy, itertools.chain(self._parameters.values(),
                                              self._buffers.values())))

    def initialize_parameters(self, *args, **kwargs):
        """Shape (and initialise) the parameters for these arguments of the first call."""
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")

    def _infer_parameters(self, module, args, kwargs=None):
        """The pre-hook of the first call: initialize_parameters, then the hook is taken off
        and the module becomes cls_to_become (torch's)."""
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {type(module).__name__} has not been fully initialized")
        module._initialize_hook.remove()
        del module._initialize_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """As the module's own, the uninitialized tensors kept as they are (torch's)."""
        super()._save_to_state_dict(destination, prefix, keep_vars)
        for name, value in itertools.chain(self._parameters.items(), self._buffers.items()):
            if _lazy(value) and prefix + name in destination:
                destination[prefix + name] = value

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """An uninitialized tensor whose entry has a shape takes that shape first (the load then
        fills it), as torch's lazy load hook (LazyLinear's rule, for buffers too)."""
        for name, value in itertools.chain(self._parameters.items(), self._buffers.items()):
            entry = state_dict.get(prefix + name)
            if _lazy(value) and entry is not None and not _lazy(entry):
                with no_grad():
                    value.materialize(_shape_of(entry))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def _replicate_for_data_parallel(self):
        raise RuntimeError("Modules with uninitialized parameters can't be used with "
                           "`DataParallel`. Run a dummy forward pass to correctly initialize "
                           "the modules")


# ---- convolutions ------------------------------------------------------------------------------


class _LazyConvXdMixin(LazyModuleMixin):
    """in_channels from the first input; weight and bias shaped as the convolution's."""

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _lazy_parameters(self, out_channels, bias, device, dtype):
        """weight and bias uninitialized (the base class made none: in_channels 0, no bias)."""
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        _place(self, device)

    def initialize_parameters(self, input, *args, **kwargs):  # noqa: A002 - torch's name
        if not self.has_uninitialized_params():
            if self.in_channels == 0:  # (shaped by a load: in_channels from the weight)
                self.in_channels = self._loaded_in_channels(input)
            return
        in_channels = self._get_in_channels(input)
        if in_channels % self.groups != 0:
            raise ValueError(f"{type(self).__name__}: in_channels must be divisible by groups "
                             f"(in_channels {in_channels} of input {fmt_shape(input.shape)}, "
                             f"groups {self.groups})")
        self.in_channels = in_channels
        pair = ((in_channels, self.out_channels // self.groups) if self.transposed else
                (self.out_channels, in_channels // self.groups))
        with no_grad():
            self.weight.materialize((*pair, *self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()

    def _get_in_channels(self, input):  # noqa: A002
        """input.shape[1] (batched) or shape[0] (unbatched); torch's error for other dims."""
        n = self._spatial + 1  # (the channels and the spatial dims)
        if input.ndim not in (n, n + 1):
            raise ShapeError(f"Expected {n}D (unbatched) or {n + 1}D (batched) input to "
                             f"{type(self).__name__}, but got input of size: "
                             f"{fmt_shape(input.shape)}")
        return input.shape[1] if input.ndim == n + 1 else input.shape[0]

    def _loaded_in_channels(self, input):  # noqa: A002
        """The in_channels of the loaded weight, which the input's must be."""
        w = self.weight.shape
        loaded = w[0] if self.transposed else w[1] * self.groups
        got = self._get_in_channels(input)
        if got != loaded:
            raise ShapeError(f"{type(self).__name__}: the input {fmt_shape(input.shape)} has "
                             f"{got} channels, the loaded weight {fmt_shape(w)} takes {loaded}")
        return loaded


class _LazyConv(_LazyConvXdMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode, device, dtype)
        self._lazy_parameters(out_channels, bias, device, dtype)


class _LazyConvTranspose(_LazyConvXdMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False,
                         dilation, padding_mode, device, dtype)
        self._lazy_parameters(out_channels, bias, device, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    """A Conv1d whose in_channels is the first input's shape[1]."""

    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """A Conv2d whose in_channels is the first input's shape[1]."""

    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """A Conv3d whose in_channels is the first input's shape[1]."""

    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """A ConvTranspose1d whose in_channels is the first input's shape[1]."""

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """A ConvTranspose2d whose in_channels is the first input's shape[1]."""

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """A ConvTranspose3d whose in_channels is the first input's shape[1]."""

    cls_to_become = ConvTranspose3d


# ---- norms -------------------------------------------------------------------------------------


class _LazyNormBase(LazyModuleMixin):
    """num_features from the first input's shape[1]; weight, bias (affine) and the running
    statistics (track_running_stats) shaped (num_features,). torch's defaults: affine and
    track_running_stats True, for the instance norms too."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__(0, eps, momentum, False, track_running_stats, device, dtype,
                         bias=False)
        self.affine = affine
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
        _place(self, device)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):  # noqa: A002 - torch's name
        if input.ndim < 2:
            raise DimError(f"{type(self).__name__}: num_features is the input's dim 1, but the "
                           f"input has shape {fmt_shape(input.shape)}")
        if not self.has_uninitialized_params():
            if self.num_features == 0:  # (shaped by a load, or nothing to shape)
                shaped = [t for t in (self.weight, self.bias, self.running_mean) if t is not None]
                self.num_features = shaped[0].shape[0] if shaped else input.shape[1]
            return
        self.num_features = input.shape[1]
        with no_grad():
            for t in (self.weight, self.bias, self.running_mean, self.running_var):
                if _lazy(t):
                    t.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    """A BatchNorm1d whose num_features is the first input's shape[1]."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    """A BatchNorm2d whose num_features is the first input's shape[1]."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    """A BatchNorm3d whose num_features is the first input's shape[1]."""

    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyNormBase, _InstanceNorm):
    """An InstanceNorm1d whose num_features is the first input's shape[1]."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyNormBase, _InstanceNorm):
    """An InstanceNorm2d whose num_features is the first input's shape[1]."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyNormBase, _InstanceNorm):
    """An InstanceNorm3d whose num_features is the first input's shape[1]."""

    cls_to_become = InstanceNorm3d
