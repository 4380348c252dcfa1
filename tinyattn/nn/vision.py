"""Vision layers with torch's names, arguments and reprs: resampling (Upsample,
UpsamplingNearest2d, UpsamplingBilinear2d), padding (ZeroPad1d/2d/3d, ConstantPad1d/2d/3d,
ReflectionPad1d/2d/3d, ReplicationPad1d/2d/3d, CircularPad1d/2d/3d), pixel and channel shuffles
(PixelShuffle, PixelUnshuffle, ChannelShuffle), instance norm (InstanceNorm1d/2d/3d), channel
dropout (Dropout1d, Dropout2d, Dropout3d), SELU's dropouts (AlphaDropout, FeatureAlphaDropout) and
LocalResponseNorm.

Each forward is one call of tinyattn.functional (interpolate, pad, pixel_shuffle, ...), which
composes it from tensor ops; none of these modules holds a parameter but InstanceNorm (with
affine=True) and its running statistics (with track_running_stats=True).
"""

from .. import functional as F
from ..errors import warn_user
from ..ops import nn as nn_ops
from .layers import _NormBase
from .module import Module


class Upsample(Module):
    """F.interpolate as a module: size or scale_factor (kept as floats, as torch's), mode,
    align_corners, recompute_scale_factor."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode "nearest" (of (N, C, H, W))."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode "bilinear" and align_corners=True (of (N, C, H, W))."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


# ---- padding -----------------------------------------------------------------------------------


def _amounts(padding, n):
    """padding as torch's _pair / _quadruple keep it: one int repeated n times, or the given
    sequence as a tuple."""
    if isinstance(padding, (tuple, list)):
        return tuple(padding)
    return (padding,) * n


class _ConstantPadNd(Module):
    """F.pad(input, padding, "constant", value)."""

    _n = 2

    def __init__(self, padding, value):
        super().__init__()
        self.padding, self.value = _amounts(padding, self._n), value

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with `value`: padding an int or (left, right)."""


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with `value`: padding an int or (left, right, top, bottom)."""

    _n = 4


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros: padding an int or (left, right)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dims with zeros: padding an int or (left, right, top, bottom)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with `value`: padding an int or (left, right, top, bottom,
    front, back)."""

    _n = 6


class ZeroPad3d(ConstantPad3d):
    """Pad the last three dims with zeros: padding an int or (left, right, top, bottom, front,
    back)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class _ModePadNd(Module):
    """F.pad(input, padding, mode) for the modes that copy the input's own entries."""

    _n, _mode, _dims = 2, "reflect", None

    def __init__(self, padding):
        super().__init__()
        self.padding = _amounts(padding, self._n)

    def forward(self, input):  # noqa: A002 - torch's argument name
        if self._dims is not None and input.ndim not in self._dims:  # (CircularPad's check)
            raise ValueError(f"{type(self).__name__}: expected {self._dims[0]}D or "
                             f"{self._dims[1]}D input (got {input.ndim}D input)")
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_ModePadNd):
    """Pad the last dim with its reflection about the edge entries (each amount below the
    dim's size)."""


class ReflectionPad2d(_ModePadNd):
    """Pad the last two dims with their reflections: padding (left, right, top, bottom)."""

    _n = 4


class ReplicationPad1d(_ModePadNd):
    """Pad the last dim with copies of its edge entries."""

    _mode = "replicate"


class ReplicationPad2d(_ModePadNd):
    """Pad the last two dims with copies of their edge entries."""

    _n, _mode = 4, "replicate"


class CircularPad1d(_ModePadNd):
    """Pad the last dim of (C, L) or (N, C, L) by wrapping around it."""

    _mode, _dims = "circular", (2, 3)


class CircularPad2d(_ModePadNd):
    """Pad the last two dims of (C, H, W) or (N, C, H, W) by wrapping around them."""

    _n, _mode, _dims = 4, "circular", (3, 4)


class ReflectionPad3d(_ModePadNd):
    """Pad the last three dims of (C, D, H, W) or (N, C, D, H, W) with their reflections:
    padding (left, right, top, bottom, front, back)."""

    _n, _dims = 6, (4, 5)


class ReplicationPad3d(_ModePadNd):
    """Pad the last three dims of (C, D, H, W) or (N, C, D, H, W) with copies of their edge
    entries."""

    _n, _mode, _dims = 6, "replicate", (4, 5)


class CircularPad3d(_ModePadNd):
    """Pad the last three dims of (C, D, H, W) or (N, C, D, H, W) by wrapping around them."""

    _n, _mode, _dims = 6, "circular", (4, 5)


# ---- shuffles ----------------------------------------------------------------------------------


class PixelShuffle(Module):
    """F.pixel_shuffle: (*, C r², H, W) -> (*, C, H r, W r)."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """F.pixel_unshuffle: (*, C, H r, W r) -> (*, C r², H, W)."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """F.channel_shuffle: the channels of (N, C, *) regrouped by `groups`."""

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


# ---- instance norm -----------------------------------------------------------------------------


class _InstanceNorm(_NormBase):
    """F.instance_norm as a module, as torch's: affine=False and track_running_stats=False by
    default; with track_running_stats the running statistics move in training (momentum=None
    counts as 0, and num_batches_tracked stays as it is, as torch's) and are used in eval.
    Unbatched input (no N) is taken as one sample."""

    _dims = (2, 3)  # (unbatched, batched)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype,
                         bias=bias)

    def forward(self, input):  # noqa: A002 - torch's argument name
        x, name = input, type(self).__name__
        if x.ndim not in self._dims:
            raise ValueError(f"{name}: expected {self._dims[0]}D or {self._dims[1]}D input (got "
                             f"{x.ndim}D input, shape {tuple(x.shape)})")
        feature_dim = x.ndim - self._dims[0]
        if x.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"{name}: expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{x.shape[feature_dim]} (input {tuple(x.shape)})")
            warn_user(f"{name}: input's size at dim={feature_dim} does not match num_features. "
                      "You can silence this warning by not passing in num_features, which is "
                      "not used because affine=False")
        if x.ndim == self._dims[0]:
            return self._norm(x.unsqueeze(0)).squeeze(0)
        return self._norm(x)

    def _norm(self, x):
        return F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats,
                               0.0 if self.momentum is None else self.momentum, self.eps)


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of (N, C, L) (or (C, L)): each channel of each sample over L."""


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of (N, C, H, W) (or (C, H, W)): each channel of each sample over H, W."""

    _dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance norm of (N, C, D, H, W) (or (C, D, H, W)): each channel of each sample over D,
    H, W."""

    _dims = (4, 5)


# ---- channel dropout ---------------------------------------------------------------------------


class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        nn_ops.check_dropout_p(p)  # at construction, as torch's
        self.p, self.inplace = p, inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) (or (C, L)) with probability p while training (the rest
    scaled by 1/(1-p)); the identity in eval mode."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) with probability p while training (the rest scaled
    by 1/(1-p)); the identity in eval mode."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) (or (C, D, H, W)) with probability p while
    training (the rest scaled by 1/(1-p)); the identity in eval mode."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """SELU's dropout (F.alpha_dropout) while training: dropped entries set to SELU's
    saturation value and an affine map that keeps the mean and the variance; the identity in
    eval mode."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """F.feature_alpha_dropout while training: alpha dropout by whole channels of
    (N, C, ...); the identity in eval mode."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


class LocalResponseNorm(Module):
    """F.local_response_norm as a module: x / (k + alpha * mean of x² over `size` neighbouring
    channels) ** beta; no parameters (torch's arguments and repr)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
