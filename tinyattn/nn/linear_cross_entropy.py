"""LinearCrossEntropyLoss (torch 2.13): a Linear layer and the cross entropy of its logits in
one module, with torch's constructor, parameter layout and state-dict keys."""

import math

from .. import functional as F
from ..errors import ShapeError, TinyattnError, fmt_shape
from .layers import Linear
from .loss import _WeightedLoss


class LinearCrossEntropyError(TinyattnError, ValueError, RuntimeError):
    """A LinearCrossEntropyLoss setting out of range: a ValueError that is also the
    RuntimeError torch raises there."""


class LinearCrossEntropyLoss(_WeightedLoss):
    """cross_entropy(linear(input), target), as torch.nn.LinearCrossEntropyLoss: in_features,
    num_classes C, out_features (d_1, ..., d_K) for the K-dimensional loss (logits (N, C, d_1,
    ..., d_K)), bias, and CrossEntropyLoss's weight (C,), reduction, ignore_index (None: -100)
    and label_smoothing.

    The Linear is stored as torch's: self.linear.weight (C * d_1 * ... * d_K, in_features) and
    a flat bias (C * d_1 * ... * d_K,), reshaped in forward, so the state-dict keys are torch's
    (weight when given, linear.weight, linear.bias) and a torch state dict loads as is.

    options (torch's LinearCrossEntropyOptions) is accepted, kept and ignored: it selects a
    chunked path that saves memory and computes the same loss (torch's own results with and
    without it agree to rounding); tinyattn always computes the reference path in one piece.
    """

    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None,
                 dtype=None, reduction="mean", weight=None, ignore_index=None,
                 label_smoothing=0.0, options=None):
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise ShapeError(f"LinearCrossEntropyLoss: expected weight of shape "
                             f"{fmt_shape((num_classes,))}, got {fmt_shape(weight.shape)}")
        if not 0.0 <= label_smoothing <= 1.0:
            raise LinearCrossEntropyError(f"LinearCrossEntropyLoss: expected label_smoothing "
                                          f"in [0, 1], got {label_smoothing}")
        super().__init__(weight=weight, reduction=reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.linear = Linear(in_features, math.prod(self.out_features, start=num_classes),
                             bias=bias, device=device, dtype=dtype)
        self.options = options

    def forward(self, input, target):  # noqa: A002 - torch's names
        shape = (self.num_classes, *self.out_features)
        linear_weight = self.linear.weight.reshape(*shape, self.linear.in_features)
        linear_bias = None if self.linear.bias is None else self.linear.bias.reshape(*shape)
        return F.linear_cross_entropy(input, linear_weight, target, linear_bias=linear_bias,
                                      weight=self.weight, reduction=self.reduction,
                                      ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing)

    def extra_repr(self):
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
                f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")
