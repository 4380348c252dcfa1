"""Convolution, pooling and fold modules: Conv1d, Conv2d, MaxPool1d/2d, AvgPool1d/2d,
AdaptiveAvgPool2d, Unfold and Fold, with torch's names, arguments, parameters and reprs.

Each forward is one call of tinyattn.functional (conv1d, conv2d, max_pool*, avg_pool*,
adaptive_avg_pool2d, unfold, fold), which composes it from tensor ops. Not supported, and
refused by name: padding_mode other than "zeros", ceil_mode=True.
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
        self.transposed, self.output_padding = False, (0,) * n
        self.weight = Parameter(zeros(out_channels, in_channels // groups, *self.kernel_size,
                                      dtype=dtype))
        self.bias = Parameter(zeros(out_channels, dtype=dtype)) if bias else None
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
        conv = F.conv1d if self._spatial == 1 else F.conv2d
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
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + (", bias=False" if self.bias is None else "")


def _check_channels(name, in_channels, out_channels, groups, padding_mode):
    """torch's constructor checks: groups positive and dividing both channel counts; only
    padding_mode "zeros" here."""
    if padding_mode != "zeros":
        raise ValueError(f"{name}: padding_mode={padding_mode!r} is not supported (only "
                         "'zeros'); pad with F.pad(x, ..., mode=...) before a padding=0 conv")
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


def _refuse_ceil_mode(module, ceil_mode):
    if ceil_mode:
        raise ValueError(f"{type(module).__name__}: ceil_mode=True is not supported (tinyattn's "
                         "pools keep the windows that fit: ceil_mode=False)")


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        _refuse_ceil_mode(self, ceil_mode)
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):  # noqa: A002 - torch's argument name
        pool = F.max_pool1d if isinstance(self, MaxPool1d) else F.max_pool2d
        return pool(input, self.kernel_size, self.stride, self.padding, self.dilation,
                    return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """The largest entry of each window along L of (N, C, L)."""


class MaxPool2d(_MaxPoolNd):
    """The largest entry of each kernel_size window of (N, C, H, W)."""


def _single(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


class AvgPool1d(Module):
    """The mean of each window along L of (N, C, L); its sizes kept as 1-tuples, as torch's."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        _refuse_ceil_mode(self, ceil_mode)
        self.kernel_size = _single(kernel_size)
        self.stride = _single(kernel_size if stride is None else stride)
        self.padding, self.ceil_mode = _single(padding), ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding,
                            count_include_pad=self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """The mean of each kernel_size window of (N, C, H, W)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        _refuse_ceil_mode(self, ceil_mode)
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding,
                            count_include_pad=self.count_include_pad,
                            divisor_override=self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """The mean over output_size equal windows of (N, C, H, W) (sizes that divide H and W)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


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
