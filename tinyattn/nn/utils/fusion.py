"""nn.utils.fusion, as torch's: a convolution or a Linear followed by a BatchNorm in eval mode,
folded into one convolution or Linear that gives the same output.

In eval mode BatchNorm is y = (x - running_mean) / sqrt(running_var + eps) * weight + bias,
per channel: an affine map, which the layer before it absorbs. fuse_conv_bn_weights and
fuse_linear_bn_weights compute the new weight and bias (Parameters, as torch's: leaves, with
the requires_grad of the conv's or linear's); fuse_conv_bn_eval and fuse_linear_bn_eval return
a new module (a deep copy) holding them.
"""

import copy

from ...tensor import ones_like, zeros_like
from ..module import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]


def _check_eval(where, layer, bn):
    if layer.training or bn.training:
        raise AssertionError(f"{where}: Fusion only for eval! (call .eval() on both "
                             f"{type(layer).__name__} and {type(bn).__name__})")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError(f"{where}: bn.running_mean and bn.running_var must not be None "
                             "(a BatchNorm with track_running_stats=False cannot be fused)")


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A new convolution computing bn(conv(x)) with conv and bn in eval mode; transpose: conv
    is a ConvTranspose (its weight's output channels are its dim 1)."""
    _check_eval("fuse_conv_bn_eval", conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """The (weight, bias) Parameters of the convolution that computes the batch norm (running
    mean bn_rm, variance bn_rv, eps, affine weight bn_w and bias bn_b, None for 1 and 0) of
    the convolution conv_w, conv_b (None for none), in their dtypes, as torch's."""
    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
    rsqrt = (bn_rv + bn_eps).rsqrt()
    rest = [1] * (conv_w.ndim - 2)
    shape = [1, -1, *rest] if transpose else [-1, 1, *rest]
    fused_w = (conv_w * (bn_w * rsqrt).reshape(shape)).to(weight_dtype)
    fused_b = ((conv_b - bn_rm) * rsqrt * bn_w + bn_b).to(bias_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A new Linear computing bn(linear(x)) with both in eval mode; bn has linear's
    out_features channels, or 1."""
    _check_eval("fuse_linear_bn_eval", linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError("fuse_linear_bn_eval: To fuse, linear.out_features == "
                             "bn.num_features or bn.num_features == 1, got linear.out_features="
                             f"{linear.out_features} and bn.num_features={bn.num_features}")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The (weight, bias) Parameters of the Linear that computes the batch norm (as in
    fuse_conv_bn_weights; bn_w and bn_b given) of the Linear linear_w, linear_b (None for
    none), as torch's."""
    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    fused_w = linear_w * scale.unsqueeze(-1).to(weight_dtype)
    fused_b = ((linear_b - bn_rm) * scale + bn_b).to(bias_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)
