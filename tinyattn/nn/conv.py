"""Convolution, pooling and fold modules: Conv1d/2d/3d, ConvTranspose1d/2d/3d, MaxPool1d/2d/3d,
AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d/3d, AdaptiveMaxPool1d/2d/3d, Unfold and Fold, with
torch's names, arguments, parameters and reprs.

Each forward is one call of tinyattn.functional (conv1d/2d/3d, conv_transpose*, max_pool*,
avg_pool*, adaptive_*_pool*, unfold, fold), which composes it from tensor ops. Conv1d/2d/3d
take torch's padding_mode "zeros", "reflect", "replicate" or "circular" (a mode other than
"zeros" pads the input with F.pad(mode=...) by the conv's padding, "same" included, in torch's
_reversed_padding_repeated_twice order, then convolves with padding 0); the ConvTranspose
modules take only "zeros", as torch's.
"""

import math

from .. import functional as F
from ..tensor import zeros
from . import init
from .layers import _place
from .module import Module, Parameter


class _ConvNd(Module):
    """Conv1d and Conv2d: weight (out_channels, in_channels / groups, *kernel_size) and bias
    (out_channels,), initialised as torch's reset_parameters."""

    _spatial = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        self._setup(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                    padding_mode)
        self.transposed, self.output_padding = False, (0,) * self._spatial
        self._make_parameters((out_channels, in_channels // groups), bias, device, dtype)

    def _setup(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
               padding_mode):
        """The sizes as torch keeps them (tuples; a padding string as it is), checked."""
        name, n = type(self).__name__, self._spatial
        self.kernel_size = F._ints(kernel_size, n, name, "kernel_size")
        self.stride = F._ints(stride, n, name, "stride")
        self.dilation = F._ints(dilation, n, name, "dilation")
        if isinstance(padding, str):
            F._check_padding_string(name, padding, self.stride)
        else:
            padding = F._ints(padding, n, name, "padding", least=0)
        _check_channels(name, in_channels, out_channels, groups, padding_mode)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.padding, self.padding_mode = padding, padding_mode
        self._reversed_padding_repeated_twice = _reversed_padding(padding, self.kernel_size,
                                                                  self.dilation)

    def _make_parameters(self, channels, bias, device, dtype):
        """weight (*channels, *kernel_size) and bias (out_channels,), initialised, placed."""
        self.weight = Parameter(zeros(*channels, *self.kernel_size, dtype=dtype))
        self.bias = Parameter(zeros(self.out_channels, dtype=dtype)) if bias else None
        self.reset_parameters()
        _place(self, device)

    def reset_parameters(self):
        """torch's initialisation, in place: weight kaiming_uniform_(a=√5), which is
        U(-1/√fan_in, 1/√fan_in) with fan_in = in_channels / groups * prod(kernel_size), and
        bias U of the same bound (0 with no inputs)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = math.prod(self.weight.shape[1:])
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def _conv_forward(self, input, weight, bias):  # noqa: A002 - torch's names
        conv = (F.conv1d, F.conv2d, F.conv3d)[self._spatial - 1]
        if self.padding_mode != "zeros":  # (torch's two ops: pad by the mode, then conv)
            input = F.pad(input, self._reversed_padding_repeated_twice,  # noqa: A001
                          mode=self.padding_mode)
            return conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):  # noqa: A002 - torch's argument name
        return self._conv_forward(input, self.weight, self.bias)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):  # (a string always shows, as torch's)
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        s += ", bias=False" if self.bias is None else ""
        return s + (f", padding_mode={self.padding_mode}" if self.padding_mode != "zeros" else "")


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _reversed_padding(padding, kernel_size, dilation):
    """torch's _reversed_padding_repeated_twice: F.pad's amounts (last dim first) for the
    conv's padding; "same" splits d*(k-1) with the odd one after, "valid" pads nothing."""
    if isinstance(padding, str):
        totals = [d * (k - 1) if padding == "same" else 0
                  for k, d in zip(kernel_size, dilation, strict=True)]
        pairs = [(t // 2, t - t // 2) for t in totals]
    else:
        pairs = [(p, p) for p in padding]
    return [n for pair in reversed(pairs) for n in pair]


def _check_channels(name, in_channels, out_channels, groups, padding_mode):
    """torch's constructor checks: padding_mode one of torch's four; groups positive and
    dividing both channel counts."""
    if padding_mode not in _PADDING_MODES:
        raise ValueError(f"{name}: padding_mode must be one of {set(_PADDING_MODES)}, but got "
                         f"padding_mode={padding_mode!r}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
    for what, n in (("in_channels", in_channels), ("out_channels", out_channels)):
        if n % groups:
            raise ValueError(f"{name}: {what} {n} must be divisible by groups {groups}")


class Conv1d(_ConvNd):
    """A 1-d convolution over (N, C_in, L): weight (out_channels, in_channels / groups, k)."""

    _spatial = 1


class Conv2d(_ConvNd):
    """A 2-d convolution over (N, C_in, H, W): weight (out_channels, in_channels / groups, kh,
    kw)."""

    _spatial = 2


class Conv3d(_ConvNd):
    """A 3-d convolution over (N, C_in, D, H, W): weight (out_channels, in_channels / groups,
    kd, kh, kw)."""

    _spatial = 3


class _ConvTransposeNd(_ConvNd):
    """ConvTranspose1d and ConvTranspose2d: weight (in_channels, out_channels / groups,
    *kernel_size) and bias (out_channels,), initialised as torch's (fan_in from the weight's
    dim 1: out_channels / groups * prod(kernel_size))."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        Module.__init__(self)
        name = type(self).__name__
        if padding_mode != "zeros":  # (torch's check, before any other)
            raise ValueError(f'Only "zeros" padding mode is supported for {name} (got '
                             f"padding_mode={padding_mode!r})")
        if isinstance(padding, str):
            raise ValueError(f"{name}: padding {padding!r}: a transposed convolution takes an "
                             "int or ints, as torch's")
        self._setup(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                    padding_mode)
        self.transposed = True
        self.output_padding = F._ints(output_padding, self._spatial, name, "output_padding",
                                      least=0)
        self._make_parameters((in_channels, out_channels // groups), bias, device, dtype)

    def forward(self, input, output_size=None):  # noqa: A002 - torch's argument name
        """The transposed convolution; output_size (the spatial sizes, or with the leading
        dims too) picks the output_padding that gives it, as torch's."""
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._spatial - 1]
        return conv(input, self.weight, self.bias, self.stride, self.padding,
                    self._output_padding(input, output_size), self.groups, self.dilation)

    def _output_padding(self, input, output_size):  # noqa: A002
        """self.output_padding, or the one that makes the output output_size (torch's rule:
        each size within stride - 1 above the smallest output)."""
        if output_size is None:
            return self.output_padding
        n, leading = self._spatial, input.ndim - self._spatial
        size = tuple(int(s) for s in output_size)
        size = size[leading:] if len(size) == n + leading else size
        if len(size) != n:
            raise ValueError(f"{type(self).__name__}: for {input.ndim}-d input, output_size "
                             f"must have {n} or {n + leading} elements (got {len(size)})")
        smallest = tuple((m - 1) * s - 2 * p + d * (k - 1) + 1 for m, s, p, d, k in zip(
            input.shape[leading:], self.stride, self.padding, self.dilation, self.kernel_size,
            strict=True))
        largest = tuple(m + s - 1 for m, s in zip(smallest, self.stride, strict=True))
        if any(not lo <= s <= hi for s, lo, hi in zip(size, smallest, largest, strict=True)):
            raise ValueError(f"{type(self).__name__}: requested an output size of {size}, but "
                             f"valid sizes range from {smallest} to {largest} (for an input of "
                             f"{tuple(input.shape[leading:])})")
        return tuple(s - lo for s, lo in zip(size, smallest, strict=True))


class ConvTranspose1d(_ConvTransposeNd):
    """A 1-d transposed convolution over (N, C_in, L): weight (in_channels, out_channels /
    groups, k)."""

    _spatial = 1


class ConvTranspose2d(_ConvTransposeNd):
    """A 2-d transposed convolution over (N, C_in, H, W): weight (in_channels, out_channels /
    groups, kh, kw)."""

    _spatial = 2


class ConvTranspose3d(_ConvTransposeNd):
    """A 3-d transposed convolution over (N, C_in, D, H, W): weight (in_channels, out_channels /
    groups, kd, kh, kw)."""

    _spatial = 3


class _MaxPoolNd(Module):
    _spatial = 2

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):  # noqa: A002 - torch's argument name
        pool = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[self._spatial - 1]
        return pool(input, self.kernel_size, self.stride, self.padding, self.dilation,
                    ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """The largest entry of each window along L of (N, C, L)."""

    _spatial = 1


class MaxPool2d(_MaxPoolNd):
    """The largest entry of each kernel_size window of (N, C, H, W)."""

    _spatial = 2


class MaxPool3d(_MaxPoolNd):
    """The largest entry of each kernel_size window of (N, C, D, H, W)."""

    _spatial = 3


def _single(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


class AvgPool1d(Module):
    """The mean of each window along L of (N, C, L); its sizes kept as 1-tuples, as torch's."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(kernel_size if stride is None else stride)
        self.padding, self.ceil_mode = _single(padding), ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding,
                            ceil_mode=self.ceil_mode, count_include_pad=self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """The mean of each kernel_size window of (N, C, H, W)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding,
                            ceil_mode=self.ceil_mode, count_include_pad=self.count_include_pad,
                            divisor_override=self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool3d(AvgPool2d):
    """The mean of each kernel_size window of (N, C, D, H, W)."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding,
                            ceil_mode=self.ceil_mode, count_include_pad=self.count_include_pad,
                            divisor_override=self.divisor_override)


class AdaptiveAvgPool2d(Module):
    """The mean over each of output_size windows of (N, C, H, W) (F.adaptive_avg_pool2d's)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    """The mean over each of output_size windows along L of (N, C, L)."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveMaxPool2d(Module):
    """The largest entry of each of output_size windows of (N, C, H, W); return_indices: also
    their places in H*W."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """The largest entry of each of output_size windows along L of (N, C, L)."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveAvgPool3d(AdaptiveAvgPool2d):
    """The mean over each of output_size windows of (N, C, D, H, W)."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool3d(AdaptiveMaxPool2d):
    """The largest entry of each of output_size windows of (N, C, D, H, W); return_indices:
    also their places in D*H*W."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class Unfold(Module):
    """F.unfold as a module: blocks of (N, C, H, W) as columns (N, C*kh*kw, L)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = (kernel_size, dilation,
                                                                      padding, stride)

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """F.fold as a module: columns (N, C*kh*kw, L) summed back into (N, C, *output_size)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
