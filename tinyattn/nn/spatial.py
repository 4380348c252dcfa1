"""Spatial modules with torch's names, arguments and reprs: FractionalMaxPool2d/3d (of
F.fractional_max_pool2d/3d; a _random_samples buffer, None unless given, as torch's) and
CrossMapLRN2d, torch's legacy cross-channel local response normalisation of (N, C, H, W),
with torch's values and their exact gradient (see _cross_map_lrn2d)."""

from .. import functional as F
from ..errors import ShapeError, fmt_shape
from ..tensor import Tensor, _fresh
from .module import Module


def _ntuple(value, n):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _FractionalMaxPoolNd(Module):
    """F.fractional_max_poolNd(input, kernel_size, output_size, output_ratio, return_indices,
    _random_samples); the sizes kept as tuples, as torch's."""

    _spatial = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        n, name = self._spatial, type(self).__name__
        if isinstance(kernel_size, int) and kernel_size <= 0 or (
                isinstance(kernel_size, (tuple, list)) and not all(k > 0 for k in kernel_size)):
            raise ValueError(f"kernel_size must be greater than 0, but got {kernel_size} "
                             f"({name})")
        self.kernel_size = _ntuple(kernel_size, n)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = None if output_size is None else _ntuple(output_size, n)
        self.output_ratio = None if output_ratio is None else _ntuple(output_ratio, n)
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling "
                             "ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError(f"{name}: only one of output_size and output_ratio may be "
                             "specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"{name}: output_ratio must be between 0 and 1 (got "
                             f"{output_ratio})")

    def forward(self, input):  # noqa: A002 - torch's argument name
        pool = F.fractional_max_pool2d if self._spatial == 2 else F.fractional_max_pool3d
        return pool(input, self.kernel_size, self.output_size, self.output_ratio,
                    self.return_indices, _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, H, W) (or (C, H, W)) to output_size, or to the input
    size times output_ratio (in (0, 1)); windows of kernel_size placed pseudo-randomly."""


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, D, H, W) (or (C, D, H, W)), as FractionalMaxPool2d."""

    _spatial = 3


def _cross_map_lrn2d(x, size, alpha, beta, k):
    """torch's _cross_map_lrn2d forward, in tensor ops (so its gradient is its derivative):
    x * (k + alpha / size * s) ** -beta, s the sum of x^2 over channels c - pre + 1 ..
    c + pre - 1 (pre = int((size - 1) / 2 + 1)), plus channel 0's from channel pre on (torch's
    running sum never takes it out)."""
    pre = int((size - 1) / 2 + 1)
    sq = x * x
    c = x.shape[1]
    total = F.pad(sq, (0, 0, 0, 0, pre - 1, pre - 1)).unfold(1, 2 * pre - 1, 1).sum(-1)
    if c > pre:
        total = total + F.pad(sq[:, :1].expand(-1, c - pre, -1, -1), (0, 0, 0, 0, pre, 0))
    return (total * (alpha / size) + k) ** -beta * x


class CrossMapLRN2d(Module):
    """torch's legacy cross-channel LRN of (N, C, H, W): torch's values; the gradient is their
    exact derivative (torch's hand-written backward is not, and fails gradcheck)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):  # noqa: A002 - torch's argument name
        x = input if isinstance(input, Tensor) else _fresh(input)
        if x.ndim != 4:
            raise ShapeError(f"CrossMapLRN2d: expected a 4-D input (N, C, H, W), got "
                             f"{fmt_shape(x.shape)}")
        return _cross_map_lrn2d(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
