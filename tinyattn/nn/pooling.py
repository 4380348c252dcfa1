"""The pooling modules conv.py does not hold, with torch's names, arguments and reprs:
power-average pooling (LPPool1d/2d/3d, of F.lp_pool1d/2d/3d) and max unpooling (MaxUnpool1d/
2d/3d, of F.max_unpool1d/2d/3d, which take MaxPoolNd(return_indices=True)'s indices). Each
forward is one call of tinyattn.functional; none holds a parameter."""

from .. import functional as F
from .module import Module


def _ntuple(value, n):
    """torch's _single / _pair / _triple: a sequence as a tuple, a number repeated n times."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _LPPoolNd(Module):
    """F.lp_poolNd(input, norm_type, kernel_size, stride, ceil_mode); the sizes kept as given."""

    _spatial = 2

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride = norm_type, kernel_size, stride
        self.ceil_mode = ceil_mode

    def forward(self, input):  # noqa: A002 - torch's argument name
        pool = (F.lp_pool1d, F.lp_pool2d, F.lp_pool3d)[self._spatial - 1]
        return pool(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """(sum of x^p over each window along L) ^ (1/p) of (N, C, L) (or (C, L))."""

    _spatial = 1


class LPPool2d(_LPPoolNd):
    """(sum of x^p over each kernel_size window) ^ (1/p) of (N, C, H, W) (or (C, H, W))."""


class LPPool3d(_LPPoolNd):
    """(sum of x^p over each kernel_size window) ^ (1/p) of (N, C, D, H, W) (or (C, D, H, W))."""

    _spatial = 3


class _MaxUnpoolNd(Module):
    """F.max_unpoolNd(input, indices, kernel_size, stride, padding, output_size); the sizes
    kept as tuples (stride defaults to kernel_size), as torch's."""

    _spatial = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self._spatial
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(kernel_size if stride is None else stride, n)
        self.padding = _ntuple(padding, n)

    def forward(self, input, indices, output_size=None):  # noqa: A002 - torch's argument name
        unpool = (F.max_unpool1d, F.max_unpool2d, F.max_unpool3d)[self._spatial - 1]
        return unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """MaxPool1d's partial inverse: each entry put back at its index, zeros elsewhere."""

    _spatial = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """MaxPool2d's partial inverse: each entry put back at its index, zeros elsewhere."""


class MaxUnpool3d(_MaxUnpoolNd):
    """MaxPool3d's partial inverse: each entry put back at its index, zeros elsewhere."""

    _spatial = 3
