"""torch's top-level aliases of torch.nn.functional ops: ta.conv1d, ta.layer_norm,
ta.dropout, ta.embedding, ta.kl_div, ... in torch's own top-level signatures.

These are ATen's, not nn.functional's, and differ from F's in places, which is why they are
written out here and not bound to F's functions: torch.layer_norm and torch.group_norm take a
trailing cudnn flag; torch.batch_norm and torch.instance_norm take weight and bias before the
running stats and all nine arguments; torch.dropout(input, p, train) needs all three;
torch.embedding takes the weight first and a padding_idx below 0 for none; the max pools
return no indices; adaptive_max_pool1d returns (values, indices); the losses take reduction
as an int (0 'none', 1 'mean', 2 'sum'; kl_div's 'mean' with no warning) and, left out, it
is 0: no reduction (what torch 2.x's top-level losses do, whatever ATen's schema says). Each
calls F's op, so its values and gradients are F's.
"""

import warnings

import numpy as np

from . import functional as F
from .errors import ShapeError, fmt_shape
from .ops import nn as nn_ops
from .tensor import Tensor, _fresh, tensor

conv1d, conv2d, conv3d = F.conv1d, F.conv2d, F.conv3d
conv_transpose1d, conv_transpose2d, conv_transpose3d = (
    F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)
avg_pool1d, adaptive_avg_pool1d = F.avg_pool1d, F.adaptive_avg_pool1d
pixel_shuffle, pixel_unshuffle, channel_shuffle = (F.pixel_shuffle, F.pixel_unshuffle,
                                                   F.channel_shuffle)
native_channel_shuffle = F.channel_shuffle
bilinear, rms_norm = F.bilinear, F.rms_norm

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(name, reduction):
    """torch's int reduction (0, 1, 2) as F's name for it; a TypeError naming `name` for
    anything else (a string too, as torch's top-level function refuses one)."""
    if isinstance(reduction, bool) or not isinstance(reduction, int) or \
            not 0 <= reduction <= 2:
        raise TypeError(f"{name}: reduction must be an int here, as torch.{name}'s (0 'none', "
                        f"1 'mean', 2 'sum'), got {reduction!r}; "
                        f"tinyattn.functional.{name} takes the names")
    return _REDUCTIONS[reduction]


def _t(x):
    return x if isinstance(x, Tensor) else _fresh(x)


# ---- normalization ------------------------------------------------------------------------------


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05,  # noqa: A002
               cudnn_enable=True):
    """F.layer_norm; cudnn_enable is taken and has no effect (as on torch's CPU)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05,  # noqa: A002
               cudnn_enabled=True):
    """F.group_norm; cudnn_enabled is taken and has no effect."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training,  # noqa: A002
               momentum, eps, cudnn_enabled):
    """F.batch_norm with ATen's argument order (weight and bias first; all required)."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                        eps)


def instance_norm(input, weight, bias, running_mean, running_var,  # noqa: A002
                  use_input_stats, momentum, eps, cudnn_enabled):
    """F.instance_norm with ATen's argument order (weight and bias first; all required)."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


# ---- dropout: (input, p, train), all required; the *_ forms write into input -------------------


def dropout(input, p, train):  # noqa: A002
    return F.dropout(input, p, train)


def dropout_(input, p, train):  # noqa: A002
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input, p, train):  # noqa: A002
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):  # noqa: A002
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input, p, train):  # noqa: A002
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):  # noqa: A002
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def feature_dropout(input, p, train, *, _inplace=False):  # noqa: A002
    """Whole channels (dim 1 of (N, C, ...)) zeroed, each with probability p, the rest
    scaled by 1/(1-p); the identity if not train."""
    x = _t(input)
    nn_ops.check_dropout_p(p)
    if train and p > 0 and x.numel() and x.ndim < 2:
        raise ShapeError(f"feature_dropout: feature dropout requires at least 2 dimensions in "
                         f"the input (N, C, ...), got {fmt_shape(x.shape)}")
    return F._feature_dropout(x, p, train, _inplace, batched=True)


def feature_dropout_(input, p, train):  # noqa: A002
    return feature_dropout(input, p, train, _inplace=True)


# ---- embedding and pooling ----------------------------------------------------------------------


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """F.embedding(indices, weight, ...): the weight first, and padding_idx below 0 for none
    (ATen's -1 default), as torch.embedding."""
    pad = None if padding_idx is None or padding_idx < 0 else padding_idx
    return F.embedding(indices, weight, pad, scale_grad_by_freq=scale_grad_by_freq,
                       sparse=sparse)


_BAG_MODES = ("sum", "mean", "max")


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """torch.embedding_bag: (output, offset2bag, bag_size, max_indices) for 1-D indices and
    their offsets, mode an int (0 sum, 1 mean, 2 max). output is F.embedding_bag's; the other
    three are ATen's CPU values: offset2bag the bag of each index (empty in sum mode where ATen
    takes its fast path: float16/float32 weight, no padding_idx); bag_size each bag's count of
    indices other than padding_idx (zeros in sum mode: one per offset where the weight needs no
    gradient, one per bag where it does); max_indices the weight row of each max (max mode),
    bag_size again (mean), zeros (sum). As ATen's, include_last_offset takes the last bag to
    the end of the indices, whatever the last offset says."""
    name = _mode_name(mode)
    if not isinstance(offsets, Tensor) or not isinstance(indices, Tensor):
        raise TypeError("embedding_bag(): indices and offsets must be Tensors, got "
                        f"{type(indices).__name__} and {type(offsets).__name__}")
    if indices.ndim != 1 or offsets.ndim != 1:
        raise ShapeError(f"embedding_bag: indices and offsets must be 1-D, got indices "
                         f"{fmt_shape(indices.shape)} and offsets {fmt_shape(offsets.shape)} "
                         "(F.embedding_bag takes a 2-D input)")
    starts = offsets[:-1] if include_last_offset else offsets
    output = F.embedding_bag(indices, weight, starts, scale_grad_by_freq=scale_grad_by_freq,
                             mode=name, sparse=sparse, per_sample_weights=per_sample_weights,
                             padding_idx=padding_idx)
    ids, o = np.asarray(indices.numpy(), np.int64), np.asarray(starts.numpy(), np.int64)
    pad = None if padding_idx is None else padding_idx % weight.shape[0]
    bags = np.searchsorted(o, np.arange(ids.size), side="right") - 1
    fast = name == "sum" and np.dtype(weight.dtype) in (np.float16, np.float32) and pad is None
    keep = ids != pad if pad is not None else np.ones(ids.size, bool)
    size = np.bincount(bags[keep], minlength=o.size).astype(np.int64)[:o.size]
    if name == "sum":
        size = np.zeros(o.size if weight.requires_grad else offsets.shape[0], np.int64)
        top = size
    elif name == "mean":
        top = size
    else:
        top = _bag_argmax(np.asarray(weight.detach().numpy()), ids, bags, keep, o.size)
    be = weight.backend
    return (output, tensor(np.zeros(0, np.int64) if fast else bags.astype(np.int64), backend=be),
            tensor(size, backend=be), tensor(top.copy(), backend=be))


def _mode_name(mode):
    if isinstance(mode, bool) or not isinstance(mode, (int, np.integer)):
        raise TypeError(f"embedding_bag(): argument 'mode' must be int (0 sum, 1 mean, 2 max), "
                        f"not {type(mode).__name__}")
    if not 0 <= mode < 3:
        raise ShapeError(f"embedding_bag: `mode` must be sum, mean, or max (0, 1 or 2), got "
                         f"{mode}")
    return _BAG_MODES[mode]


def _bag_argmax(w, ids, bags, keep, n_bags):
    """Each bag's weight row of the max in each column (the first on ties; 0 for a bag with
    no index left)."""
    out = np.zeros((n_bags, w.shape[1]), np.int64)
    for b in range(n_bags):
        mine = ids[(bags == b) & keep]
        if mine.size:
            out[b] = mine[np.argmax(w[mine], axis=0)]
    return out


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1,  # noqa: A002
               ceil_mode=False):
    """F.max_pool1d without indices (max_pool1d_with_indices has them); stride=() (ATen's
    default) is the kernel size."""
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1,  # noqa: A002
               ceil_mode=False):
    return F.max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1,  # noqa: A002
               ceil_mode=False):
    return F.max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,  # noqa: A002
                            ceil_mode=False):
    """(values, indices) of F.max_pool1d."""
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode,
                        return_indices=True)


def adaptive_max_pool1d(input, output_size):  # noqa: A002
    """(values, indices), always, as torch's top-level one."""
    return tuple(F.adaptive_max_pool1d(input, output_size, return_indices=True))


def constant_pad_nd(input, pad, value=0):  # noqa: A002
    """F.pad(input, pad, 'constant', value)."""
    return F.pad(input, pad, "constant", value)


# ---- losses: reduction as an int ---------------------------------------------------------------


def kl_div(input, target, reduction=0, *, log_target=False):  # noqa: A002
    """F.kl_div, 1 ('mean') the mean over every element, without F's warning about it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="reduction: 'mean' divides")
        return F.kl_div(input, target, reduction=_reduction("kl_div", reduction),
                        log_target=log_target)


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):  # noqa: A002
    return F.hinge_embedding_loss(input, target, margin,
                                  reduction=_reduction("hinge_embedding_loss", reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.margin_ranking_loss(input1, input2, target, margin,
                                 reduction=_reduction("margin_ranking_loss", reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction("cosine_embedding_loss", reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False,
                        reduction=0):
    # (torch's top-level op takes any margin: its F's check is the module's and F's own)
    return F._triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, None, None,
                                  _reduction("triplet_margin_loss", reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):  # noqa: A002
    """F.poisson_nll_loss; all six required, as torch's."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction("poisson_nll_loss", reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,  # noqa: A002
                                     reduction=0):
    """F.binary_cross_entropy_with_logits, pos_weight before reduction (ATen's order)."""
    name = "binary_cross_entropy_with_logits"
    return F.binary_cross_entropy_with_logits(input, target, weight,
                                              reduction=_reduction(name, reduction),
                                              pos_weight=pos_weight)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                      _reduction("ctc_loss", reduction), zero_infinity)
