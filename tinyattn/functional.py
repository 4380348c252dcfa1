"""tinyattn.functional (import as F): the ops as functions, with PyTorch's names and arguments.

Each function checks and shapes its arguments, then runs one op (or, for attention, a few) from
`tinyattn.ops`. unfold and fold, conv1d and conv2d, conv_transpose1d / 2d, the avg / max pools
and the adaptive pools are composed from tensor ops (pad, Tensor.unfold, index_select, matmul,
max, sum), so their gradients are those ops' own. Tensors, NumPy arrays and lists are all
accepted where a tensor is expected.
affine_grid, grid_sample and fractional_max_pool2d/3d (and their _with_indices forms) live in
functional_spatial.py and are imported here, at the end, as this module's own.
"""

import math
import numbers

import numpy as np

from .autograd import apply, is_grad_enabled, no_grad
from .dtypes import get_default_dtype, result_type
from .errors import DimError, DTypeError, ShapeError, fmt_shape, warn_user
from .ops import activation as act
from .ops import attention as attn
from .ops import elementwise as ew
from .ops import matmul as mm
from .ops import nn as nn_ops
from .ops import shape as sh
from .ops import softmax as sm
from .ops.index import fill_value
from .ops.op import Op, acc_dtype, broadcast_shape, dim1, plain, plain_params, quiet
from .ops.op import dims as _axes
from .tensor import (
    Tensor,
    _check_values,
    _flag,
    _fresh,
    _int_of,
    _make,
    _one_dim,
    _rand,
    _real,
    _seen_read,
    _take_torch_keywords,
    _values,
    arange,
    full,
    zeros_like,
)

__all__ = [
    "relu", "tanh", "sigmoid", "gelu", "where", "masked_fill", "softmax", "log_softmax",
    "logsumexp", "cross_entropy", "rms_norm", "mse_loss", "l1_loss", "smooth_l1_loss",
    "huber_loss", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "kl_div", "margin_ranking_loss", "soft_margin_loss", "hinge_embedding_loss",
    "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss",
    "multilabel_soft_margin_loss", "gaussian_nll_loss", "linear_cross_entropy", "one_hot",
    "matmul", "linear", "layer_norm", "embedding", "batch_norm", "group_norm",
    "gumbel_softmax",
    "dropout", "cat", "stack", "causal_mask", "scaled_dot_product_attention", "attention_weights",
    "rotary_tables", "apply_rotary",
    "silu", "softplus", "mish", "elu", "selu", "celu", "logsigmoid", "softsign", "leaky_relu",
    "hardtanh", "relu6", "hardsigmoid", "hardswish", "softmin", "normalize", "pad",
    "cosine_similarity", "pairwise_distance", "glu", "atleast_1d", "atleast_2d", "atleast_3d",
    "tanhshrink", "threshold", "softshrink", "hardshrink", "prelu", "rrelu", "relu_", "elu_",
    "celu_", "selu_", "leaky_relu_", "hardtanh_", "rrelu_", "threshold_",
    "unfold", "fold", "conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
    "adaptive_avg_pool2d", "conv_transpose1d", "conv_transpose2d", "adaptive_avg_pool1d",
    "adaptive_max_pool1d", "adaptive_max_pool2d",
    "conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d",
    "adaptive_max_pool3d",
    "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle",
    "pixel_unshuffle", "channel_shuffle", "instance_norm", "dropout1d", "dropout2d",
    "multi_margin_loss", "multilabel_margin_loss", "triplet_margin_with_distance_loss",
    "bilinear", "embedding_bag",
    "ctc_loss", "local_response_norm", "alpha_dropout", "feature_alpha_dropout",
    "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "dropout3d", "pdist",
]


def _t(x, like=None):
    """`x` as a Tensor (on `like`'s backend when it has to be made)."""
    if isinstance(x, Tensor):
        return x
    return _fresh(x, backend=None if like is None else like.backend)


# ---- activations and elementwise -----------------------------------------------------------------


def _pointwise(op, x, inplace, name, **params):
    """op(x) as a new tensor, or with inplace=True written into x's own memory and x returned
    (torch's `inplace`; refused where Tensor._in_place refuses it: a leaf that requires grad
    or a view of one, and torch's other refusals for views; see ops/views.py). NumPy number
    settings count as the Python numbers they stand for (ops/op.py's plain), as in torch."""
    x = _t(x)
    if params:
        params = plain_params(params, name)
    if inplace:
        return x._in_place(f"{name}(inplace=True)", op, **params)
    return apply(op, x, **params)


def relu(x, inplace=False):
    return _pointwise(ew.relu, x, inplace, "relu")


def tanh(x):
    return apply(ew.tanh, _t(x))


def sigmoid(x):
    return apply(ew.sigmoid, _t(x))


def gelu(x, approximate="none"):
    """x Φ(x); approximate="tanh" uses GPT-2's tanh formula."""
    return apply(nn_ops.gelu, _t(x), approximate=approximate)


def where(condition, x=None, y=None):
    """x where condition (bool) else y; either of x, y may be a Python number. With the
    condition alone, the indices where it holds, one tensor per dim (torch.where(c) is
    c.nonzero(as_tuple=True))."""
    if x is None and y is None:
        return _t(condition).nonzero(as_tuple=True)
    if x is None or y is None:
        raise TypeError("where: give both x and y, or neither (for the indices)")
    if isinstance(x, (list, tuple)) or isinstance(y, (list, tuple)):
        raise TypeError("where: x and y are tensors or numbers, not lists (torch's rule); make "
                        "them tensors first: tinyattn.tensor(...)")
    like = next((t for t in (x, y, condition) if isinstance(t, Tensor)), None)
    x, y = (v.item() if isinstance(v, np.generic) else v for v in (x, y))  # NumPy numbers too
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        # two numbers: each its own 0-d tensor, which promote as torch's do (1 and 0.5 give the
        # default float dtype, not float64)
        x, y = _t(x, like), _t(y, like)
    x = x if isinstance(x, (int, float)) else _t(x, like)
    y = y if isinstance(y, (int, float)) else _t(y, like)
    return apply(ew.where, _t(condition, like), x, y)


def masked_fill(x, mask, value):
    return _t(x).masked_fill(mask, value)


# ---- softmax family ------------------------------------------------------------------------------


def _cast(x, dtype):
    """x as a tensor, converted to `dtype` first when one is given (softmax's dtype=)."""
    return _t(x) if dtype is None else _t(x).to(dtype)


def _softmax_input(x, dtype, name):
    """softmax's x (converted to dtype first, if given), floating point as torch requires: an
    integer or bool x needs dtype= (softmax(x, 0, dtype=ta.float32) is torch's form)."""
    x = _cast(x, dtype)
    if x.dtype.kind != "f":
        raise DTypeError(f"{name}: input must be floating point, got {x.dtype}; pass "
                         "dtype=ta.float32 (or another float dtype) to convert it first")
    return x


def _softmax_dim(dim, ndim, name):
    """dim, or for dim=None torch's legacy implicit dim (0 for 0-, 1- and 3-D inputs, else 1:
    (C,), (N, C) and (N, C, H, W) put the classes there, (T, N, C) was read as (C, H, W)) with
    torch's deprecation warning (at the user's line)."""
    if dim is not None:
        return _one_dim(name, dim)
    warn_user(f"Implicit dimension choice for {name} has been deprecated. Change the call "
              "to include dim=X as an argument.", UserWarning)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(x, dim=None, dtype=None):
    """exp(x) / Σ exp(x) over dim; with dtype, x is converted to it first (as torch). x must
    be floating point (or made so by dtype). Give dim: without one (dim=None), as torch, the
    legacy implicit dim (0 for 0-, 1- and 3-D x, else 1, not the last) with a UserWarning."""
    x = _softmax_input(x, dtype, "softmax")
    return apply(sm.softmax, x, dim=_softmax_dim(dim, x.ndim, "softmax"))


def log_softmax(x, dim=None, dtype=None):
    """x - logsumexp(x) over dim; dtype and dim=None as softmax's."""
    x = _softmax_input(x, dtype, "log_softmax")
    return apply(sm.log_softmax, x, dim=_softmax_dim(dim, x.ndim, "log_softmax"))


def logsumexp(x, dim=None, keepdim=False):
    return _t(x).logsumexp(dim, keepdim)


# ---- losses (each also a module in tinyattn.nn: MSELoss, L1Loss, ..., CrossEntropyLoss) --------
#
# Composed from the differentiable ops above, so their gradients come from those ops' VJPs;
# cross_entropy with class indices and no class weights stays one fused op.


def _reduce(loss, reduction, name, batchmean=False, batch=None):
    """loss averaged, summed or kept per element, as `reduction` says ('batchmean': the sum
    over `batch`, by default the loss's dim 0)."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    if batchmean and reduction == "batchmean":
        total, n = loss.sum(), batch if batch is not None else loss.shape[0] if loss.ndim else 1
        if total.dtype == np.float16:  # divided in float32, as torch: a batch past 65504 is
            return (total.float() / n).half()  # inf in float16, and total / inf is 0
        return total / n
    allowed = "'mean', 'sum', 'none'" + (" or 'batchmean'" if batchmean else "")
    raise ValueError(f"{name}: reduction must be one of {allowed}, got {reduction!r}")


def _legacy_reduction(size_average, reduce, reduction):
    """torch's deprecated size_average and reduce mapped to a reduction (with torch's
    UserWarning), for the loss functions and the loss modules: both None, `reduction` as given;
    reduce False, 'none'; size_average False, 'sum'; else 'mean'. A string in their place (a
    reduction given by position, where torch's order puts size_average) is refused: torch would
    read it as True and silently average."""
    if size_average is None and reduce is None:
        return reduction
    for what, value in (("size_average", size_average), ("reduce", reduce)):
        if isinstance(value, str):
            raise DTypeError(f"{what} (deprecated) must be a bool or None, got {value!r}; give "
                             f"the reduction by keyword: reduction={value!r}")
    if reduce is False:
        reduction = "none"
    else:
        reduction = "sum" if size_average is False else "mean"
    warn_user(f"size_average and reduce args will be deprecated, please use "
              f"reduction='{reduction}' instead.", UserWarning)
    return reduction


def _check_reduction(reduction, name, batchmean=False):
    if reduction not in ("mean", "sum", "none") + (("batchmean",) if batchmean else ()):
        _reduce(None, reduction, name, batchmean)  # raises, naming the allowed values


def _floating(x, name, what="input"):
    if x.dtype.kind != "f":
        raise DTypeError(f"{name}: {what} must be floating point, got {x.dtype}; convert it "
                         "with .float()")


def _pair(input, target, name, same_shape=False):  # noqa: A002 - PyTorch's argument name
    """input and target as tensors whose shapes fit: equal, or (with a warning, as PyTorch)
    broadcastable unless `same_shape`."""
    x = _t(input, target if isinstance(target, Tensor) else None)
    y = _t(target, x)
    _floating(x, name)
    if x.shape != y.shape:
        try:
            shape = broadcast_shape(x.shape, y.shape)
        except ValueError:
            shape = None
        if same_shape or shape is None:
            raise ShapeError(f"{name}: input {fmt_shape(x.shape)} and target "
                             f"{fmt_shape(y.shape)} " + ("must have the same shape" if same_shape
                                                         else "do not broadcast together"))
        warn_user(f"{name}: target {fmt_shape(y.shape)} and input {fmt_shape(x.shape)} "
                  f"differ in shape and are broadcast to {fmt_shape(shape)}, which is "
                  "rarely what is meant; give them the same shape", UserWarning)
    return x, y


def _weight(weight, shape, name, what="weight"):
    """A weight tensor that broadcasts to `shape` (or None)."""
    if weight is None:
        return None
    weight = _t(weight)
    try:
        ok = broadcast_shape(weight.shape, shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(f"{name}: {what} {fmt_shape(weight.shape)} does not broadcast to the "
                         f"input {fmt_shape(shape)}")
    return weight


def _reduce_weighted(loss, weight, reduction, name, x, by_weight=True):
    """loss times weight (torch's weight= of mse_loss, l1_loss and huber_loss: the input x's
    shape), reduced; with a weight, 'mean' divides by Σ weight (by_weight, mse and l1's) or by
    the number of elements (huber's), as torch's."""
    if weight is None:
        return _reduce(loss, reduction, name)
    weight = _t(weight, x)
    if weight.shape != x.shape:
        raise ShapeError(f"{name}: weight {fmt_shape(weight.shape)} must have the shape of the "
                         f"input {fmt_shape(x.shape)} (torch: weights and input must have the "
                         "same size)")
    loss = loss * weight
    if reduction == "mean" and by_weight:
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction, name)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
             weight=None):
    """(input - target)², averaged (or summed, or per element). size_average and reduce:
    torch's deprecated forms of reduction (in torch's order), as _legacy_reduction maps them.
    weight (the input's shape) weighs each element; 'mean' then divides by Σ weight."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "mse_loss")
    x, y = _pair(input, target, "mse_loss")
    d = x - y
    return _reduce_weighted(d * d, weight, reduction, "mse_loss", x)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
            weight=None):
    """|input - target|, averaged (or summed, or per element); weight as mse_loss's."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "l1_loss")
    x, y = _pair(input, target, "l1_loss")
    return _reduce_weighted((x - y).abs(), weight, reduction, "l1_loss", x)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
                   beta=1.0):
    """0.5 d²/β where |d| < β, else |d| - 0.5 β (d = input - target); β = 0 is l1_loss."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "smooth_l1_loss")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    x, y = _pair(input, target, "smooth_l1_loss")
    d = x - y
    a = d.abs()
    if beta == 0:
        return _reduce(a, reduction, "smooth_l1_loss")
    return _reduce(where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta), reduction,
                   "smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    """0.5 d² where |d| < δ, else δ (|d| - 0.5 δ): δ x smooth_l1_loss with β = δ. weight (the
    input's shape) weighs each element; 'mean' is still the mean over the elements (torch's)."""
    _check_reduction(reduction, "huber_loss")
    if not delta > 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    x, y = _pair(input, target, "huber_loss")
    d = x - y
    a = d.abs()
    return _reduce_weighted(where(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta), weight,
                            reduction, "huber_loss", x, by_weight=False)


def _picked(x, target, weight, ignore_index, name):
    """x[n, target[n], ...] along the class dim (1, or 0 if 1-D), the weight of each pick
    (0 where target == ignore_index) as a constant, the class dim, and where the target is
    not ignored (bool)."""
    t = _t(target, x)
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{name}: target must hold integer class indices, got {t.dtype}; "
                         "convert with target.long()")
    cdim = 1 if x.ndim > 1 else 0
    want = x.shape[:1] + x.shape[2:] if x.ndim > 1 else ()
    if x.ndim == 0 or t.shape != want:
        raise ShapeError(f"{name}: input {fmt_shape(x.shape)} (classes in dim {cdim}) needs "
                         f"a target of shape {fmt_shape(want)}, got {fmt_shape(t.shape)}")
    n_class = x.shape[cdim]
    if weight is not None:
        weight = _t(weight, x)
        if weight.shape != (n_class,):
            raise ShapeError(f"{name}: weight must hold one value per class, "
                             f"{fmt_shape((n_class,))}, got {fmt_shape(weight.shape)}")
    # the index and the weights are ops without gradient (values of the target: a captured
    # step makes them again from each batch, the range check included)
    index = _values("class_index", _class_index, t, ignore_index=ignore_index, n_class=n_class,
                    cdim=cdim, op_name=name)
    picked = apply(sh.take_along_dim, x, index, dim=cdim).squeeze(cdim)  # (N, d1, ...)
    w = _values("class_weight", _class_weight, t, weight, ignore_index=ignore_index,
                dtype=x.dtype)
    return picked, w, cdim, t != ignore_index


def _class_index(t, ignore_index, n_class, cdim, op_name):
    """The class ids t along a new dim cdim, 0 where ignored; an id out of range is an error."""
    valid = t != ignore_index
    bad = valid & ((t < 0) | (t >= n_class))
    if bad.any():
        raise DimError(f"{op_name}: target {int(t[bad].reshape(-1)[0])} is out of range for "
                       f"{n_class} classes (valid: 0..{n_class - 1}, or "
                       f"ignore_index={ignore_index})")
    return (t * valid).reshape(t.shape[:cdim] + (1,) + t.shape[cdim:])


def _class_weight(t, weight, ignore_index, dtype):
    """Each target's weight: weight[t] (1 without weights), 0 where t is ignore_index."""
    valid = t != ignore_index
    if weight is None:
        return valid.astype(dtype)
    return (weight[t * valid] * valid).astype(dtype, copy=False)


def _weighted_mean(total, weights):
    """total / Σ weights: NaN (as PyTorch) when every target is ignored, with a gradient of 0
    then (as PyTorch's; the division is by 1 there, so backward sees no g / 0)."""
    none = _values("no_weight", _no_weight, weights)
    return apply(ew.where, none, math.nan, total / _values("total_weight", _total_weight, weights))


def _no_weight(w):
    return w.sum() == 0


def _total_weight(w):
    """Σ w, or 1 if that is 0 (a divisor that gives no inf; the mean is NaN then anyway)."""
    total = w.sum()
    return total + (total == 0)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
             reduce=None, reduction="mean"):
    """-weight[t] * input[n, t] for log-probabilities `input` (classes in dim 1, or 0 if 1-D);
    'mean' divides by the summed weights of the targets not ignored."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "nll_loss")
    x = _t(input)
    _floating(x, "nll_loss")
    picked, w, _, valid = _picked(x, target, weight, ignore_index, "nll_loss")
    # an ignored item counts for nothing, even at -inf, and gets a gradient of 0 (not 0 * inf
    # when 'mean' divides by a total weight of 0: every target ignored), as in torch
    loss = -apply(ew.where, valid, picked, 0.0) * w
    if reduction == "mean":
        return _weighted_mean(loss.sum(), w)
    return _reduce(loss, reduction, "nll_loss")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """-log softmax(logits)[target], averaged (or summed, or per item); classes in dim 1 (dim 0
    if 1-D).

    `target` holds class indices (integers; entries equal to `ignore_index` count for nothing)
    or class probabilities (floats, the logits' shape; no ignore_index then). `weight` (C,)
    weighs each class; with indices, 'mean' divides by the summed weights of the targets.
    `label_smoothing` ε in [0, 1] mixes the target with the uniform distribution: (1-ε) target
    + ε/C. size_average and reduce: torch's deprecated forms of reduction (torch's order).
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    logits = _t(input)  # (named `input`, torch's: F.cross_entropy(input=..., target=...))
    target = _t(target, logits)
    if logits.ndim == 0:  # (checked here for every path: the fused op checks it too)
        sm.check_class_dim(logits.shape, target.shape)
    probs = target.dtype.kind == "f" and target.shape == logits.shape
    _check_cross_entropy(reduction, label_smoothing, probs, ignore_index)
    if weight is None and not probs:  # the common case: one fused op
        return apply(sm.cross_entropy, logits, target, ignore_index=ignore_index,
                     reduction=reduction, label_smoothing=float(label_smoothing))
    _floating(logits, "cross_entropy", "logits")
    cdim = 1 if logits.ndim > 1 else 0
    n_class = logits.shape[cdim]
    logp = log_softmax(logits, dim=cdim)
    if weight is not None:
        weight = _t(weight, logits)
        if weight.shape != (n_class,):
            raise ShapeError(f"cross_entropy: weight must hold one value per class, "
                             f"{fmt_shape((n_class,))}, got {fmt_shape(weight.shape)}")
        class_w = weight.reshape((n_class,) + (1,) * (logits.ndim - 2)) if cdim else weight
    if probs:  # -Σ_c w_c p_c log softmax(x)_c; 'mean' divides by the number of items
        p = target * (1 - label_smoothing) + label_smoothing / n_class if label_smoothing \
            else target
        with quiet():  # (p = 0 at a -inf logit: NaN, as torch's, without NumPy's warning)
            terms = logp * p if weight is None else logp * p * class_w
            return _reduce(-terms.sum(cdim), reduction, "cross_entropy")
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    _, w, _, valid = _picked(logp.detach(), target, weight, ignore_index, "cross_entropy")
    # ε/C Σ_c w_c (-log p_c), PyTorch's form; ignored items give 0, and get a gradient of 0
    smooth = -apply(ew.where, valid, (logp * class_w).sum(cdim), 0.0)
    smooth = _weighted_mean(smooth.sum(), w) if reduction == "mean" else \
        _reduce(smooth, reduction, "cross_entropy")
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / n_class)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None,  # noqa: A002
                         weight=None, reduction="mean", ignore_index=None, label_smoothing=0.0,
                         options=None):
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...): torch 2.13's
    reference form, the LM head and its loss in one call (ignore_index None: -100). A
    linear_weight (C, d_1, ..., d_K, in) with linear_bias (C, d_1, ..., d_K) gives the
    K-dimensional loss, logits (N, C, d_1, ..., d_K), as torch's. torch's
    options (a chunked path that saves memory, the same loss) is not supported."""
    if options is not None:
        raise ValueError("linear_cross_entropy: options (torch's chunked path) is not "
                         "supported; leave it None for the same loss, computed in one piece")
    logits = _linear_logits(input, linear_weight, linear_bias)  # (functional_more.py)
    return cross_entropy(logits, target, weight,
                         ignore_index=-100 if ignore_index is None else ignore_index,
                         reduction=reduction, label_smoothing=label_smoothing)


def _check_cross_entropy(reduction, label_smoothing, probs, ignore_index):
    """cross_entropy's settings, checked on every path before the fused op (inside an op a
    ValueError would read as a ShapeError)."""
    _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got "
                         f"{label_smoothing}")
    if probs and ignore_index >= 0:  # (a negative one names no class: torch takes it too)
        raise ValueError(f"cross_entropy: ignore_index={ignore_index} is not supported for "
                         "floating point target (class probabilities: every class counts)")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                         reduction="mean"):
    """-w [t log x + (1 - t) log(1 - x)] for probabilities x, with torch's values and gradients
    everywhere in [0, 1]: each log is clamped at -100 (x = 0 or 1 gives a finite loss), the
    gradient for x is g w (x - t) / max(x (1 - x), 1e-12) (at x = 0 with t > 0: -t 1e12 g w, not
    the clamped log's 0), and for the target g w (log(1 - x) - log x), unclamped (±inf at x = 0
    or 1, as torch's). One fused node, _BCE below."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "binary_cross_entropy")
    x, t = _pair(input, target, "binary_cross_entropy", same_shape=True)
    weight = _weight(weight, x.shape, "binary_cross_entropy")
    loss = apply(_BCE, x, t)  # (its forward checks x and t: a captured step's replay does too)
    return _reduce(loss if weight is None else loss * weight, reduction, "binary_cross_entropy")


def _probabilities(xp, a, which, hint):
    """binary_cross_entropy's input or target array (`which`) checked as torch checks them on
    the CPU: every entry in [0, 1], NaN not (a loss computed from it would be silently wrong)."""
    if a.size and not bool(xp.all((a >= 0) & (a <= 1))):
        shown = ("a NaN" if bool(xp.isnan(a).any()) else
                 f"values in [{float(a.min()):g}, {float(a.max()):g}]")
        raise ValueError(f"binary_cross_entropy: {which} values must be probabilities in [0, 1], "
                         f"got {shown}{hint}")


# One op, not the clamped logs composed: their derivative is 0 where a log is clamped and
# ±inf next to it, and no product of finite values gives torch's finite x-gradient with the
# clamped value, nor its infinite target gradient at x = 0 or 1. (An op of this function only,
# as _values' are: the registered ops in ops/ are the ones torch's functions are matched with.)
_BCE_EPS = float(np.float32(1e-12))  # torch's 1e-12 is a float32 constant: 9.99999996e-13


def _bce_forward(be, x, t):
    """out = -(t max(log x, -100) + (1 - t) max(log(1 - x), -100))"""
    xp = be.xp
    _probabilities(xp, x, "input", "; for logits use binary_cross_entropy_with_logits")
    _probabilities(xp, t, "target", "")
    with quiet():  # (log 0 = -inf, clamped: no NumPy warning)
        log_x = xp.maximum(xp.log(x), -100)
        log_1mx = xp.maximum(xp.log1p(-x), -100)  # (log1p(-x), torch's: exact for tiny x)
    return -(t * log_x + (1 - t) * log_1mx), (x, t)


def _bce_vjp(be, g, saved):
    x, t = saved
    xp = be.xp
    # float16: in float32, where 1e-12 is not 0 (the gradient may still overflow float16)
    wide = acc_dtype(x.dtype)
    xw = x.astype(wide, copy=False)
    with quiet():
        gx = g * ((xw - t) / xp.maximum(xw * (1 - xw), _BCE_EPS)).astype(x.dtype)
        gt = g * (xp.log1p(-x) - xp.log(x))
    return gx, gt


_BCE = Op("binary_cross_entropy", _bce_forward,
          "gx = g (x - t) / max(x (1 - x), 1e-12); gt = g (log(1 - x) - log x)",
          grads=("gx", "gt"), fused=True, promote="common", saves={0: 0, 1: 1}, fresh=True)
_BCE.defvjp(_bce_vjp)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,  # noqa: A002
                                     reduce=None, reduction="mean", pos_weight=None):
    """binary_cross_entropy(sigmoid(x), t) computed stably from the logits x:
    (1 - t) x + (1 + (pos_weight - 1) t) log(1 + e^-x); pos_weight weighs the positives."""
    name = "binary_cross_entropy_with_logits"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, name)
    x, t = _pair(input, target, name, same_shape=True)
    weight = _weight(weight, x.shape, name)
    pos_weight = _weight(pos_weight, x.shape, name, "pos_weight")
    softplus_neg = -apply(act.logsigmoid, x)  # log(1 + e^-x), one stable node
    log_weight = 1.0 if pos_weight is None else (pos_weight - 1) * t + 1
    loss = (1 - t) * x + log_weight * softplus_neg
    return _reduce(loss if weight is None else loss * weight, reduction, name)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
           log_target=False):
    """KL(target ‖ exp(input)) pointwise for log-probabilities `input`: t (log t - input)
    (0 where t = 0), or with log_target: eᵗ (t - input). 'batchmean' divides the sum by the
    batch size (the true KL divergence per item); 'mean' by the number of elements."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "kl_div", batchmean=True)
    log_target = _flag("kl_div", "log_target", log_target)
    if reduction == "mean":  # (torch's warning, word for word, at the caller's line)
        warn_user("reduction: 'mean' divides the total loss by both the batch size and the "
                  "support size.'batchmean' divides only by the batch size, and aligns with the "
                  "KL div math definition.'mean' will be changed to behave the same as "
                  "'batchmean' in the next major release.", UserWarning)
    x, t = _pair(input, target, "kl_div")
    with quiet():  # (t = 0 at x = log 0 = -inf: NaN, as torch's, without NumPy's warning)
        if log_target:
            loss = t.exp() * (t - x)
        else:
            nonzero = t != 0
            t_log_t = where(nonzero, t * where(nonzero, t, 1.0).log(), 0.0)  # xlogy(t, t)
            loss = t_log_t - t * x
    # 'batchmean' divides by the input's batch, as torch's (not the loss's dim 0, which a
    # target broadcast to more dims makes another size; a 0-d input: no division)
    return _reduce(loss, reduction, "kl_div", batchmean=True,
                   batch=x.shape[0] if x.ndim else 1)


# ---- margin and count losses (composed: the gradients are those ops' VJPs) ---------------------


def _same_ndim(name, **tensors):
    """The tensors (by torch's argument names), refused unless they have one number of dims."""
    tensors = {k: _t(v) for k, v in tensors.items()}
    if len({t.ndim for t in tensors.values()}) > 1:
        shown = [f"{k} {fmt_shape(t.shape)}" for k, t in tensors.items()]
        raise ShapeError(f"{name}: {', '.join(shown[:-1])} and {shown[-1]} must have the same "
                         "number of dims")
    return tensors.values()


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target (input1 - input2) + margin), target ±1: input1 should rank above input2
    where target is 1, below where it is -1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "margin_ranking_loss")
    x1, x2, y = _same_ndim("margin_ranking_loss", input1=input1, input2=input2, target=target)
    return _reduce((-y * (x1 - x2) + margin).clamp_min(0), reduction, "margin_ranking_loss")


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """log(1 + exp(-target input)) for targets ±1 (softplus, stable for large margins)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "soft_margin_loss")
    x, y = _pair(input, target, "soft_margin_loss", same_shape=True)
    return _reduce(softplus(-y * x), reduction, "soft_margin_loss")


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,  # noqa: A002
                         reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1 (as torch: both where it
    is neither)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "hinge_embedding_loss")
    x, y = _pair(input, target, "hinge_embedding_loss", same_shape=True)
    loss = where(y != 1, (margin - x).clamp_min(0), 0.0) + where(y != -1, x, 0.0)
    return _reduce(loss, reduction, "hinge_embedding_loss")


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1; inputs
    (N, D) with target (N,), or (D,) with a 0-d target. cos as torch's: Σ x1 x2 /
    √((Σ x1² + 1e-12)(Σ x2² + 1e-12))."""
    name = "cosine_embedding_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, name)
    x1, x2, y = (_t(v) for v in (input1, input2, target))
    if y.ndim > 1 or x1.ndim != y.ndim + 1 or x2.ndim != y.ndim + 1:
        raise ShapeError(f"{name}: expects input1 and input2 (N, D) with target (N,), or (D,) "
                         f"with a 0-d target; got input1 {fmt_shape(x1.shape)}, input2 "
                         f"{fmt_shape(x2.shape)}, target {fmt_shape(y.shape)}")
    dim = y.ndim
    squares = ((x1 * x1).sum(dim) + 1e-12) * ((x2 * x2).sum(dim) + 1e-12)
    cos = (x1 * x2).sum(dim) / squares.sqrt()
    loss = where(y == 1, 1 - cos, 0.0) + where(y == -1, (cos - margin).clamp_min(0), 0.0)
    return _reduce(loss, reduction, name)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the pairwise p-distance
    (pairwise_distance's eps); swap: d(anchor, negative) is min'ed with d(positive, negative).
    The margin must be above 0, as torch's F checks (torch.triplet_margin_loss does not)."""
    if not margin > 0:
        raise ValueError(f"triplet_margin_loss: margin must be greater than 0, got {margin}")
    return _triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, size_average,
                                reduce, reduction)


def _triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, size_average,
                         reduce, reduction):
    """triplet_margin_loss with any margin (torch.triplet_margin_loss's)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "triplet_margin_loss")
    a, pos, neg = _same_ndim("triplet_margin_loss", anchor=anchor, positive=positive,
                             negative=negative)
    d_pos, d_neg = pairwise_distance(a, pos, p, eps), pairwise_distance(a, neg, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(pos, neg, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction, "triplet_margin_loss")


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None,  # noqa: A002
                     eps=1e-8, reduce=None, reduction="mean"):
    """The Poisson negative log-likelihood of counts `target` with rate exp(input) (log_input)
    or input: exp(input) - target input, or input - target log(input + eps); full adds
    Stirling's target log target - target + ½ log(2π target) where target > 1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "poisson_nll_loss")
    x, t = _pair(input, target, "poisson_nll_loss", same_shape=True)
    loss = x.exp() - t * x if log_input else x - t * (x + eps).log()
    if full:
        big = t > 1
        tb = where(big, t, 2.0)  # (log of the masked-out targets: no inf, no NaN gradient)
        stirling = tb * tb.log() - tb + 0.5 * (2 * math.pi * tb).log()
        loss = loss + where(big, stirling, 0.0)
    return _reduce(loss, reduction, "poisson_nll_loss")


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None,  # noqa: A002
                                reduce=None, reduction="mean"):
    """Binary cross-entropy from logits for each class (dim -1), averaged over the classes: one
    loss per item; weight (C,) weighs each class."""
    name = "multilabel_soft_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, name)
    x, t = _pair(input, target, name, same_shape=True)
    loss = -(t * logsigmoid(x) + (1 - t) * logsigmoid(-x))
    if weight is not None:
        loss = loss * _weight(weight, x.shape, name)
    return _reduce(loss.sum(-1) / x.shape[-1], reduction, name)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):  # noqa: A002
    """½ (log v + (input - target)² / v) (+ ½ log 2π if full), v = max(var, eps) with var's
    own gradient (torch's clamp under no_grad). var: the input's shape, a float, or (as torch)
    one dim short of it, or a 1 in place of one of its dims."""
    _check_reduction(reduction, "gaussian_nll_loss")
    x = _t(input)
    t = _t(target, x)
    _floating(x, "gaussian_nll_loss")
    if isinstance(var, (int, float, np.number)):  # (as torch: var * ones_like(input))
        var = _constant_like(x, float(var))
    var = _gaussian_var_shape(_t(var, x), x)
    _values("gaussian_var_check", _check_variance, var)  # (a captured step checks it again)
    v = var + (var.clamp(min=eps) - var).detach()
    loss = 0.5 * (v.log() + (x - t) ** 2 / v)
    return _reduce(loss + 0.5 * math.log(2 * math.pi) if full else loss, reduction,
                   "gaussian_nll_loss")


def _constant_like(x, value):
    """A tensor of x's shape, dtype and backend holding `value` (ta.full: a captured step
    replays it, where zeros_like(x) + value sends the step back to eager)."""
    return full(x.shape, value, dtype=x.dtype, backend=x.backend)


def _gaussian_var_shape(var, x):
    """var as it broadcasts against x: x's shape; one dim short of it (a dim of 1 added at the
    end); or x's number of dims with exactly one dim that differs, 1 in var (torch's rule)."""
    if var.shape == x.shape:
        return var
    if var.shape == x.shape[:-1]:
        return var.unsqueeze(-1)
    differ = [v for a, v in zip(x.shape, var.shape, strict=False) if a != v]
    if var.ndim == x.ndim and differ == [1]:
        return var
    raise ShapeError(f"gaussian_nll_loss: var {fmt_shape(var.shape)} is of incorrect size for "
                     f"the input {fmt_shape(x.shape)}: give the input's shape, that shape without "
                     "its last dim, or a 1 in place of one of its dims")


def _check_variance(var):
    """No negative variance (torch's check); the array itself, no gradient."""
    if var.size and bool((var < 0).any()):
        raise ValueError("gaussian_nll_loss: var has negative entries")
    return var


class _OutOfRangeError(DimError, RuntimeError):
    """A class id or an offset out of range where torch raises a RuntimeError: a DimError (an
    IndexError, as tinyattn's other range errors) and a RuntimeError (torch's)."""


def _in_range(t, low, high, op_name):
    """Every entry of the class-id array t in low..high - 1 (checked as an op: a captured step
    checks each call's values)."""
    bad = (t < low) | (t >= high)
    if bad.any():
        raise _OutOfRangeError(f"{op_name}: target {int(t[bad].reshape(-1)[0])} is out of "
                               f"range for {high} classes (valid: {low}..{high - 1})")


def _margin_input(x, name):
    """The scores of the multi-class margin losses: (C,) or (N, C), C > 0 (torch's)."""
    _floating(x, name)
    if x.ndim not in (1, 2) or x.shape[-1] == 0:
        raise ShapeError(f"{name}: expected a non-empty vector (C,) or matrix (N, C) of "
                         f"scores (N may be 0), got input {fmt_shape(x.shape)}")


def _integer_target(t, name):
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{name}: target must hold integer class indices, got {t.dtype}; "
                         "convert with target.long()")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None,  # noqa: A002 - torch's
                      size_average=None, reduce=None, reduction="mean"):
    """The multi-class hinge loss of scores `input` (N, C) (or (C,)) for class ids `target`
    (N,) (or 0-d): Σ_{i ≠ y} w[y] max(0, margin - x[y] + x[i])^p / C per item, p 1 or 2.
    weight (C,) weighs each item by its target's class (no gradient, as torch's); 'mean'
    still divides by N (torch's)."""
    name = "multi_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, name)
    if p not in (1, 2) or isinstance(p, bool):
        raise ValueError(f"{name}: only p == 1 and p == 2 supported, got p={p!r}")
    x = _t(input)
    _margin_input(x, name)
    t = _t(target, x)
    _integer_target(t, name)
    cols = x if x.ndim == 2 else x.unsqueeze(0)  # (N, C)
    n, n_class = cols.shape
    if t.ndim > 1 or t.numel() != n:
        raise ShapeError(f"{name}: target should be 1-D with one class id per input sample, "
                         f"({n},), got target {fmt_shape(t.shape)} for input "
                         f"{fmt_shape(x.shape)}")
    _check_values(_in_range, t, low=0, high=n_class, op_name=name)
    t = t.reshape(n, 1).long()
    z = (margin - cols.gather(1, t) + cols).clamp_min(0)  # (N, C)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * _class_weights(weight, n_class, name, x).detach().index_select(0, t.reshape(-1))\
            .unsqueeze(1)
    loss = where(t != arange(n_class, backend=x.backend), z, 0.0).sum(1) / n_class
    return _reduce(loss if x.ndim == 2 else loss.squeeze(0), reduction, name)


def _class_weights(weight, n_class, name, x):
    weight = _t(weight, x)
    if weight.ndim != 1:
        raise ValueError(f"{name}: weight must be one-dimensional, got {fmt_shape(weight.shape)}")
    if weight.shape[0] != n_class:
        raise ShapeError(f"{name}: weight {fmt_shape(weight.shape)} must hold one value per "
                         f"class: the input {fmt_shape(x.shape)} has {n_class} classes")
    return weight


def multilabel_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                           reduction="mean"):
    """The multi-label hinge loss of scores `input` (N, C) (or (C,)) for `target` of the same
    shape holding class ids, the list ending at the first -1 (torch's format):
    Σ_{j listed} Σ_{i not listed} max(0, 1 - (x[y_j] - x[i])) / C per item (an id listed twice
    counts twice, as torch's)."""
    name = "multilabel_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, name)
    x = _t(input)
    _margin_input(x, name)
    t = _t(target, x)
    _integer_target(t, name)
    if t.shape != x.shape:
        raise ShapeError(f"{name}: target {fmt_shape(t.shape)} must have the input's shape "
                         f"{fmt_shape(x.shape)} (class ids, ended by -1)")
    n_class = x.shape[-1]
    _check_values(_in_range, t, low=-1, high=n_class, op_name=name)
    cols, ids = x.reshape(-1, n_class), t.reshape(-1, n_class).long()
    listed = (ids != -1).long().cumprod(1) > 0  # (N, K): before the first -1
    ids = where(listed, ids, 0)
    is_target = (one_hot(ids, n_class).bool() & listed.unsqueeze(2)).any(1)  # (N, C)
    z = (1 - cols.gather(1, ids).unsqueeze(2) + cols.unsqueeze(1)).clamp_min(0)  # (N, K, C)
    loss = where(listed.unsqueeze(2) & ~is_target.unsqueeze(1), z, 0.0).sum((1, 2)) / n_class
    return _reduce(loss if x.ndim == 2 else loss.squeeze(0), reduction, name)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) for any distance function d
    of two tensors (pairwise_distance by default); swap: d(anchor, negative) is min'ed with
    d(positive, negative). margin must be > 0 (torch's)."""
    name = "triplet_margin_with_distance_loss"
    _check_reduction(reduction, name)
    if not margin > 0:
        raise ValueError(f"{name}: margin must be greater than 0, got {margin}")
    a, pos, neg = _same_ndim(name, anchor=anchor, positive=positive, negative=negative)
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = dist(a, pos), dist(a, neg)
    if swap:
        d_neg = d_neg.minimum(dist(pos, neg))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction, name)


class _NeedsFloatError(DTypeError, NotImplementedError):
    """An integer input where torch has no kernel for the dtype: a DTypeError (a TypeError,
    tinyattn's) and a NotImplementedError (a RuntimeError, torch's)."""


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """The connectionist temporal classification loss, -log Σ_alignments Π_t p_t(label), of
    log-probabilities `log_probs` (T, N, C) (or (T, C) unbatched) for `targets` padded (N, S)
    or concatenated (Σ target_lengths,), with input_lengths and target_lengths (N,) (tensors,
    lists, or ints unbatched) and the `blank` class. 'mean' divides each loss by its target
    length (at least 1), then averages over the batch (torch's); zero_infinity: an impossible
    alignment (an infinite loss) gives 0, and a gradient of 0.

    The forward (alpha) recursion in log space over each target with blanks interleaved, each
    step a logsumexp over stacked tensors: O(T) Python steps of (N, 2S+1) ops, for small sizes.
    The gradient is torch's: the plain derivative plus exp(log_probs) over each item's first
    input_lengths steps (a term of value 0), which is the gradient of the logits behind a
    log_softmax (where the two agree), as torch's own kernel gives it.
    """
    name = "ctc_loss"
    _check_reduction(reduction, name)
    given = _t(log_probs)
    lp = _ctc_log_probs(given)  # (T, N, C)
    n_time, n, n_class = lp.shape
    if isinstance(blank, bool) or not isinstance(blank, numbers.Integral):
        raise DTypeError(f"{name}: blank must be an int class id, got {blank!r}")
    if not 0 <= blank < n_class:
        raise _OutOfRangeError(f"{name}: blank {blank} must be in label range: 0..{n_class - 1} "
                               f"for {n_class} classes")
    in_len = _ctc_lengths(input_lengths, n, "input_lengths", n_time)
    tg_len = _ctc_lengths(target_lengths, n, "target_lengths", None)
    labels = _ctc_labels(_t(targets, lp), tg_len, n_class)
    loss = _ctc_alpha(lp, labels, in_len, tg_len, blank) + _ctc_torch_gradient(lp, in_len)
    if zero_infinity:
        loss = where(loss.detach() == math.inf, 0.0, loss)
    if reduction == "mean":
        return (loss / _t(np.maximum(tg_len, 1).astype(lp.dtype), lp)).mean()
    return _reduce(loss if given.ndim == 3 else loss.squeeze(0), reduction, name)


def _ctc_log_probs(lp):
    """log_probs as (T, N, C): floating, 3-D or (T, C) unbatched."""
    if lp.dtype.kind != "f":
        raise _NeedsFloatError(f"ctc_loss: log_probs must be floating point, got {lp.dtype}; "
                               "convert it with .float()")
    if lp.ndim not in (2, 3):
        raise ShapeError(f"ctc_loss: log_probs must be (T, N, C), or (T, C) unbatched, got "
                         f"{fmt_shape(lp.shape)}")
    return lp if lp.ndim == 3 else lp.unsqueeze(1)


def _ctc_lengths(lengths, n, what, most):
    """input_lengths or target_lengths as an int64 array (n,), each in 0..most (torch's
    checks)."""
    arr = np.asarray(lengths.tolist() if isinstance(lengths, Tensor) else lengths)
    if arr.dtype.kind not in "iu":
        raise DTypeError(f"ctc_loss: {what} must hold integer lengths, got {arr.dtype}")
    if arr.ndim > 1 or arr.size != n:
        raise ShapeError(f"ctc_loss: {what} must hold one length per item, batch size {n}; "
                         f"got {fmt_shape(arr.shape)}")
    arr = arr.reshape(n).astype(np.int64)
    if n and arr.min() < 0:
        raise ShapeError(f"ctc_loss: {what} must be at least 0, got {int(arr.min())}")
    if n and most is not None and arr.max() > most:
        raise ShapeError(f"ctc_loss: {what} must be at most {most} (the log_probs' T), got "
                         f"{int(arr.max())}")
    return arr


def _ctc_labels(t, tg_len, n_class):
    """The targets as an int64 array (N, max target length), padded with -1 past each
    length; the labels checked to be class ids."""
    if t.ndim not in (1, 2):
        raise ShapeError(f"ctc_loss: targets must be padded (N, S) or concatenated "
                         f"(sum of target_lengths,), got {fmt_shape(t.shape)}")
    ids = np.array(t.tolist()).astype(np.int64).reshape(t.shape)
    width = int(tg_len.max()) if tg_len.size else 0
    keep = np.arange(width) < tg_len[:, None]  # (N, S)
    labels = np.full(keep.shape, -1, dtype=np.int64)
    if t.ndim == 2:  # padded
        if ids.shape[0] != len(tg_len) or ids.shape[1] < width:
            raise ShapeError(f"ctc_loss: targets {fmt_shape(t.shape)} must hold a row of at "
                             f"least {width} labels (the longest target_length) for each of "
                             f"the {len(tg_len)} items")
        labels[keep] = ids[:, :width][keep]
    else:  # concatenated (torch's rule: exactly Σ target_lengths labels, unbatched too)
        if ids.size != tg_len.sum():
            raise ShapeError(f"ctc_loss: concatenated targets {fmt_shape(t.shape)} must hold "
                             f"the sum of target_lengths, {int(tg_len.sum())} labels")
        labels[keep] = ids  # (row-major: each item's labels in turn)
    bad = keep & ((labels < 0) | (labels >= n_class))
    if bad.any():
        raise _OutOfRangeError(f"ctc_loss: target {int(labels[bad][0])} is out of range for "
                               f"{n_class} classes (valid: 0..{n_class - 1})")
    return labels


def _ctc_alpha(lp, labels, in_len, tg_len, blank):
    """-log p(target | log_probs) per item (N,): alpha over the extended labels (blank, l1,
    blank, l2, ..., blank), from 'before step 0' (all mass on the first blank); an item stops
    at its input length; the end is the last blank or the last label."""
    n_time, n, _ = lp.shape
    width = 2 * labels.shape[1] + 1
    ext = np.full((n, width), blank, dtype=np.int64)
    ext[:, 1::2] = np.where(labels < 0, blank, labels)
    skip = np.zeros((n, width), dtype=bool)  # s - 2 -> s: a label unlike the one before it
    skip[:, 3::2] = labels[:, 1:] != labels[:, :-1]
    lp_ext = lp.gather(2, _t(np.broadcast_to(ext, (n_time, n, width)).copy(), lp))
    neg = -math.inf
    alpha = _t(np.where(np.arange(width) == 0, 0.0, neg)[None].repeat(n, 0).astype(lp.dtype),
               lp)
    skip, running = _t(skip, lp), np.arange(n_time) < in_len[:, None]  # (N, T)
    for t in range(n_time):
        one = pad(alpha, (1, 0), value=neg)[:, :width]
        two = where(skip, pad(alpha, (2, 0), value=neg)[:, :width], neg)
        step = stack([alpha, one, two]).logsumexp(0) + lp_ext[t]
        alpha = where(_t(running[:, t:t + 1], lp), step, alpha)
    last = 2 * tg_len
    ends = alpha.gather(1, _t(np.stack([last, np.maximum(last - 1, 0)], 1), lp))
    ends = where(_t(np.stack([np.ones(n, dtype=bool), tg_len > 0], 1), lp), ends, neg)
    return -ends.logsumexp(1)


def _ctc_torch_gradient(lp, in_len):
    """0 per item (N,), whose gradient is exp(log_probs) over the item's first input_lengths
    steps: the term torch's ctc_loss kernel adds to the derivative."""
    e = lp.exp()
    steps = (np.arange(lp.shape[0])[:, None] < in_len)[:, :, None]  # (T, N, 1)
    return where(_t(steps, lp), e - e.detach(), 0.0).sum((0, 2))


def one_hot(tensor, num_classes=-1):
    """Integer class ids (...) -> (..., num_classes) int64, 1 at each id (no gradient);
    num_classes=-1 takes the largest id + 1."""
    ids = _t(tensor)
    if ids.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: the input must hold integer class indices, got {ids.dtype}; "
                         "convert with .long()")
    num_classes = _int_of(num_classes)  # (as torch: num_classes=ids.max() + 1)
    if not isinstance(num_classes, (int, np.integer)) or isinstance(num_classes, bool):
        raise DTypeError(f"one_hot: num_classes must be an int, got {num_classes!r}")
    if num_classes < -1:  # (below -1 it would read as 0 classes: every id out of range)
        raise ValueError(f"one_hot: num_classes must be -1 (the largest id + 1) or at least 0, "
                         f"got {num_classes}")
    if num_classes == -1:
        if ids._data.size == 0:
            raise ValueError("one_hot: cannot infer num_classes from an empty tensor; pass "
                             "num_classes")
        _seen_read(ids, "one_hot without num_classes: the largest id")
        num_classes = int(ids._data.max()) + 1
    classes = arange(num_classes, backend=ids.backend)
    return _values("one_hot", _one_hot, ids, classes)


def _one_hot(ids, classes):
    """(..., num_classes) int64, 1 at each id; an id out of range is an error."""
    n = classes.shape[0]
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        raise DimError(f"one_hot: class ids must be in 0..{n - 1} for num_classes={n}, got "
                       f"values in [{int(ids.min())}, {int(ids.max())}]")
    return (ids[..., None] == classes).astype(np.int64)


# ---- rotary position embedding (RoPE; nn.RotaryEmbedding holds the tables) ----------------------


def rotary_tables(dim, seq_len, base=10000.0, dtype=None, backend=None):
    """cos and sin of θ(t, i) = t / base^(2i/dim) for positions t < seq_len and pairs
    i < dim/2: (seq_len, dim/2) each, computed in float64, returned in `dtype` (default: the
    default dtype)."""
    if dim <= 0 or dim % 2:
        raise ShapeError(f"rotary_tables: dim must be even and positive, got {dim}")
    inv_freq = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)  # (dim/2,)
    angles = np.outer(np.arange(seq_len, dtype=np.float64), inv_freq)  # (seq_len, dim/2)
    dtype = get_default_dtype() if dtype is None else dtype
    return (_fresh(np.cos(angles).astype(dtype), backend=backend),
            _fresh(np.sin(angles).astype(dtype), backend=backend))


def apply_rotary(x, cos, sin, interleaved=False):
    """Rotate each channel pair (a, b) of x (..., T, dim) by the angle of its position:
    (a cos - b sin, b cos + a sin), with cos, sin (T, dim/2) from rotary_tables. Pairs are
    (i, i + dim/2) (rotate-half, GPT-NeoX / Hugging Face Llama) or, if interleaved,
    (2i, 2i+1) (RoFormer / Meta Llama). One fused op (ops/nn.py's rotary); tables that require
    grad go through the op-by-op form, which differentiates them too."""
    x = _t(x)
    cos, sin = _t(cos, x), _t(sin, x)
    dtype = result_type(x._data, cos._data, sin._data)  # as a * cos would promote
    if dtype.kind != "f":
        dtype = get_default_dtype()
    x, cos, sin = (t if t.dtype == dtype else t.to(dtype) for t in (x, cos, sin))
    if (cos.requires_grad or sin.requires_grad) and is_grad_enabled():
        nn_ops.check_rotary(x.shape, cos.shape, sin.shape)
        return _rotary_composite(x, cos, sin, interleaved)
    return nn_ops.rotary(x, cos, sin, interleaved=interleaved)


def _rotary_composite(x, cos, sin, interleaved):
    """apply_rotary op by op (slices, products, cat): the gradient reaches cos and sin."""
    half = x.shape[-1] // 2
    if interleaved:
        pairs = x.reshape(x.shape[:-1] + (half, 2))  # (..., T, dim/2, 2)
        a, b = pairs[..., 0], pairs[..., 1]  # (..., T, dim/2) each
        return stack([a * cos - b * sin, b * cos + a * sin], dim=-1).reshape(x.shape)
    a, b = x[..., :half], x[..., half:]  # (..., T, dim/2) each
    return cat([a * cos - b * sin, b * cos + a * sin], dim=-1)  # (..., T, dim)


# ---- layers as functions -------------------------------------------------------------------------


def matmul(a, b):
    """a @ b (torch.matmul): batched, broadcasting over the leading dims."""
    a = _t(a, b if isinstance(b, Tensor) else None)
    return a @ _t(b, a)


def linear(input, weight, bias=None):  # noqa: A002 - torch's name (input= works as there)
    """x @ weightᵀ + bias, with weight (out_features, in_features) as in PyTorch."""
    return mm.linear(_t(input), weight, bias)


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = Σ_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o], with weight
    (out, in1, in2) and inputs (*, in1), (*, in2) of the same leading dims (torch's). Composed:
    input1 @ weight as (in1, out in2), then times input2 summed over in2."""
    x1, x2, w = _t(input1), _t(input2), _t(weight)
    b = None if bias is None else _t(bias, w)
    _check_bilinear(x1, x2, w, b)
    out, in1, in2 = w.shape
    t = x1.matmul(w.permute(1, 0, 2).reshape(in1, out * in2))  # (*, out in2)
    y = (t.reshape(*x1.shape[:-1], out, in2) * x2.unsqueeze(-2)).sum(-1)
    return y if b is None else y + b


def _check_bilinear(x1, x2, w, b):
    shapes = (f"input1 {fmt_shape(x1.shape)}, input2 {fmt_shape(x2.shape)}, weight "
              f"{fmt_shape(w.shape)}")
    if w.ndim != 3:
        raise ShapeError(f"bilinear: weight {fmt_shape(w.shape)} must be 3-D (out_features, "
                         f"in1_features, in2_features); got {shapes}")
    if x1.ndim == 0 or x1.shape[:-1] != x2.shape[:-1]:
        raise ShapeError(f"bilinear: the leading (batch) dims of input1 {fmt_shape(x1.shape)} "
                         f"and input2 {fmt_shape(x2.shape)} must be equal")
    for what, x, dim in (("input1", x1, 1), ("input2", x2, 2)):
        if x.shape[-1] != w.shape[dim]:
            raise ShapeError(f"bilinear: {what} {fmt_shape(x.shape)} does not fit weight "
                             f"{fmt_shape(w.shape)}: its last dim must be weight.shape[{dim}] = "
                             f"{w.shape[dim]}")
    if b is not None and b.shape != w.shape[:1]:
        raise ShapeError(f"bilinear: bias {fmt_shape(b.shape)} must be (out_features,) = "
                         f"{fmt_shape(w.shape[:1])} for weight {fmt_shape(w.shape)}")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalize over the last dims (`normalized_shape`, at least one), then scale by weight,
    shift by bias. input must be floating point (as torch's, whose name it has: input=)."""
    x = _t(input)
    _floating(x, "layer_norm")
    if weight is not None and weight.dtype != x.dtype or bias is not None and \
            bias.dtype != x.dtype:  # (the check spelled out for the common case: one dtype)
        _norm_params_dtype("layer_norm", x, weight=weight, bias=bias)
    shape = _normalized_shape(normalized_shape, x, "layer_norm")
    return apply(nn_ops.layer_norm, x, weight, bias, n_dims=len(shape), eps=eps)


def _norm_params_dtype(name, x, **params):
    """torch's rule for the norms' parameters (layer_norm, group_norm, batch_norm; weight,
    bias, running statistics): one dtype, the input's, or float32 for a float16 input (whose
    norm runs in float32). Anything else torch refuses ("mixed dtype"), and so does this,
    rather than give a result whose dtype depends on the op."""
    given = {k: p for k, p in params.items() if p is not None}
    dtypes = {np.dtype(p.dtype) for p in given.values()}
    allowed = (x.dtype, np.float32) if x.dtype == np.float16 else (x.dtype,)
    if len(dtypes) > 1 or (dtypes and dtypes.pop() not in allowed):
        shown = ", ".join(f"{k} {p.dtype}" for k, p in given.items())
        raise DTypeError(f"{name}: input {x.dtype} with {shown}: the parameters must have the "
                         f"input's dtype (float32 ones are allowed for float16 input), as in "
                         f"torch; convert the module or the input, e.g. with .to({x.dtype})")


def _normalized_shape(normalized_shape, x, name):
    """normalized_shape as a tuple: the last dims of x, at least one (over none, each entry
    would be normalized alone, to 0: torch refuses it too)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape:
        raise ShapeError(f"{name}: normalized_shape must name at least one dim (the last ones "
                         f"of the input {fmt_shape(x.shape)}), got ()")
    if len(shape) > x.ndim or x.shape[x.ndim - len(shape):] != shape:
        raise ShapeError(f"{name}: normalized_shape {fmt_shape(shape)} is not the end of "
                         f"the input shape {fmt_shape(x.shape)}")
    return shape


def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    """x / √(mean(x², last dims) + eps), then scaled by weight; eps defaults to the dtype's
    machine epsilon, float32's for float16 input (as torch.nn.functional.rms_norm computes it)."""
    x = _t(input)
    _floating(x, "rms_norm")
    shape = _normalized_shape(normalized_shape, x, "rms_norm")
    if eps is None:  # (torch's: float32's epsilon for float16 input, its compute type)
        eps = float(np.finfo(np.promote_types(x.dtype, np.float32)).eps)
    eps = float(eps)
    if weight is not None and weight.dtype != x.dtype:  # torch's: x's dtype out, whatever the
        wide = result_type(x, weight)  # weight's (the product in the wider dtype, rounded once)
        return apply(nn_ops.rms_norm, x.to(wide), weight.to(wide), n_dims=len(shape),
                     eps=eps).to(x.dtype)
    return apply(nn_ops.rms_norm, x, weight, n_dims=len(shape), eps=eps)  # (..., *shape)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,  # noqa: A002
               momentum=0.1, eps=1e-5):
    """Normalize each channel (dim 1) over the batch and the other dims: with training, by the
    batch's mean and biased variance, and running_mean / running_var (if given) move toward
    them by momentum in place (the variance unbiased); else by the running statistics.
    Every size is checked first, as torch's: a call that fails moves nothing."""
    x = _t(input)
    training = _flag("batch_norm", "training", training)
    weight, bias = (None if a is None else _t(a, x) for a in (weight, bias))
    _check_batch_norm(x, running_mean, running_var, weight, bias)
    dims = (0, *range(2, x.ndim))  # every dim but the channels'
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if training:
        n = x.shape[0] * math.prod(x.shape[2:])  # values per channel
        if n == 1:
            raise ShapeError(f"batch_norm: needs more than one value per channel to train, "
                             f"got {fmt_shape(x.shape)}")
        if n == 0:  # an empty batch: an empty output, the running statistics as they were
            return _channel_affine(x.clone(), weight, bias, shape, x.dtype)  # (torch's)
        mean, var = x.mean(dims, keepdim=True), x.var(dims, keepdim=True, correction=0)
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean.reshape(-1) * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(var.reshape(-1) * (momentum * n / (n - 1)))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: without training, give running_mean and running_var")
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    return _channel_affine((x - mean) / (var + eps).sqrt(), weight, bias, shape, x.dtype)


def _channel_affine(y, weight, bias, shape, dtype):
    """y scaled by weight and shifted by bias (each (C,), or None), per channel (dim 1), in
    `dtype`, the input's (float16 with float32 parameters: computed in float32, as torch)."""
    if weight is not None:
        y = y * weight.reshape(shape)
    y = y if bias is None else y + bias.reshape(shape)
    return y if y.dtype == dtype else y.to(dtype)


def _check_batch_norm(x, running_mean, running_var, weight, bias):
    """batch_norm's input and sizes, all before the running statistics move in place: C
    entries in each of weight, bias (any shape, as torch) and the running statistics (1-D)."""
    _floating(x, "batch_norm")
    if x.ndim < 2:
        raise ShapeError(f"batch_norm: expected input (N, C, ...), got {fmt_shape(x.shape)}")
    c = x.shape[1]
    given = (("weight", weight), ("bias", bias), ("running_mean", running_mean),
             ("running_var", running_var))
    for what, t in given:
        if t is not None and t.numel() != c:
            raise ShapeError(f"batch_norm: {what} should contain {c} elements (one per channel "
                             f"of input {fmt_shape(x.shape)}), not {t.numel()}")
    for what, t in given[2:]:  # (updated in place with C values: (1, C) would not take them)
        if t is not None and t.ndim != 1:
            raise ShapeError(f"batch_norm: {what} must be 1-D ({c},), got {fmt_shape(t.shape)}")
    _norm_params_dtype("batch_norm", x, weight=weight, bias=bias, running_mean=running_mean,
                       running_var=running_var)


def _check_num_groups(num_groups, name):
    """num_groups an int >= 1 (group_norm and nn.GroupNorm: 0 would divide by zero)."""
    if not isinstance(num_groups, (int, np.integer)) or isinstance(num_groups, bool):
        raise DTypeError(f"{name}: num_groups must be an int, got {num_groups!r}")
    if num_groups < 1:
        raise ValueError(f"{name}: num_groups must be at least 1, got {num_groups}")


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalize each sample over groups of channels (dim 1) and every dim after them, then
    scale and shift each channel (weight and bias: (C,)). x must be floating point."""
    x = _t(input)
    _floating(x, "group_norm")
    _check_num_groups(num_groups, "group_norm")
    if x.ndim < 2 or x.shape[1] % num_groups:
        raise ShapeError(f"group_norm: expected input (N, C, ...) with C divisible by "
                         f"num_groups {num_groups}, got {fmt_shape(x.shape)}")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != x.shape[1:2]:
            raise ShapeError(f"group_norm: {what} must be {fmt_shape(x.shape[1:2])}, one per "
                             f"channel of input {fmt_shape(x.shape)}, got {fmt_shape(t.shape)}")
    # the group size spelled out, not -1: an empty batch (N = 0) cannot infer it, torch's gives
    # an empty output
    _norm_params_dtype("group_norm", x, weight=weight, bias=bias)
    groups = x.reshape(x.shape[0], num_groups, math.prod(x.shape[1:]) // num_groups)
    y = layer_norm(groups, groups.shape[-1:], eps=eps).reshape(x.shape)
    return _channel_affine(y, weight, bias, (1, x.shape[1]) + (1,) * (x.ndim - 2), x.dtype)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):  # noqa: A002 - torch's
    """x / (k + alpha * avg) ** beta over (N, C, ...) (3-D or more), avg the mean of x² over
    `size` neighbouring channels (size // 2 before, (size - 1) // 2 after, zeros past the
    ends counted, as torch's padded average pool)."""
    name = "local_response_norm"
    x = _t(input)
    if x.ndim < 3:
        raise ValueError(f"{name}: expected 3-D or higher input (N, C, ...), got "
                         f"{fmt_shape(x.shape)}")
    _floating(x, name)
    if isinstance(size, bool) or not isinstance(size, numbers.Integral):
        raise DTypeError(f"{name}: size must be an int number of channels, got {size!r}")
    if size < 1:
        raise ShapeError(f"{name}: size must be greater than zero, got {size}")
    if x.numel() == 0:
        return x
    pads = (0, 0) * (x.ndim - 2) + (size // 2, (size - 1) // 2)
    avg = pad(x * x, pads).unfold(1, size, 1).sum(-1) / size  # (N, C, ...)
    return x / (avg * alpha + k) ** beta


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau) with Gumbel noise g = -log(-log U) from the global stream: a
    differentiable stand-in for a draw from softmax(logits). hard: the one-hot of the draw, with
    the soft sample's gradient (straight-through)."""
    x = _t(logits)
    u = _make("rand", _rand, x.dtype, False, x.backend, shape=x.shape)  # U[0, 1)
    gumbels = -(-u.clamp(min=np.finfo(x.dtype).tiny).log()).log()
    soft = softmax((x + gumbels) / tau, dim)
    if not hard:
        return soft
    index = soft.detach().argmax(dim, keepdim=True)
    one_hot_draw = zeros_like(soft).scatter(dim, index, 1.0)
    return one_hot_draw - soft.detach() + soft


def embedding(input, weight, padding_idx=None, max_norm=None,  # noqa: A002 - torch's name
              norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """weight[input]: the rows of the table for integer ids of any shape. The row at
    `padding_idx` is looked up as any other but gets no gradient (PyTorch's padding_idx).
    max_norm: first, each looked-up row whose norm_type-norm is above it is scaled down to it
    (by max_norm / (norm + 1e-7)) in the weight itself, without grad, as torch's
    embedding_renorm_. scale_grad_by_freq: each row's gradient divided by how often its id
    occurs in `input`. sparse=True (a sparse gradient) is refused: tinyattn has none."""
    scale_grad_by_freq = _flag("embedding", "scale_grad_by_freq", scale_grad_by_freq)
    if _flag("embedding", "sparse", sparse):
        raise ValueError("embedding: sparse=True (a sparse weight gradient) is not supported: "
                         "tinyattn has no sparse tensors; leave it False for the dense gradient")
    ids = _t(input, weight)
    if max_norm is not None:
        _embedding_renorm(weight, ids, max_norm, norm_type)
    if scale_grad_by_freq:
        out = apply(nn_ops.embedding, ids, weight, scale_grad_by_freq=True)
    else:
        out = apply(nn_ops.embedding, ids, weight)
    if padding_idx is None:
        return out
    pad = _padding_index(padding_idx, weight.shape[0], "embedding")
    keep = (ids != pad).unsqueeze(-1)  # (..., 1)
    return where(keep, out, out.detach())  # the padding rows' values, without a gradient path


def _embedding_renorm(weight, ids, max_norm, norm_type):
    """torch.embedding_renorm_ under no_grad: the looked-up rows of weight above max_norm
    scaled down in its own memory, its version bumped (a graph that saved it refuses it)."""
    def write():
        nn_ops.embedding_renorm_(weight.backend, weight._writable("embedding_renorm_"),
                                 ids._data, max_norm, norm_type)

    with no_grad():
        weight._in_place("embedding_renorm_", None, write=write)


def _padding_index(padding_idx, n, name):
    """padding_idx as a row of the n-row table (negatives count from the end)."""
    # (1.5 would compare and then match no id: every row would get gradients; torch: TypeError)
    if not isinstance(padding_idx, (int, np.integer)) or isinstance(padding_idx, bool):
        raise DTypeError(f"{name}: padding_idx must be an int, got {padding_idx!r}")
    if not -n <= padding_idx < n:
        raise DimError(f"{name}: padding_idx {padding_idx} is out of range for {n} embeddings "
                       f"(valid: {-n}..{n - 1})")
    return padding_idx % n


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,  # noqa: A002
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """The rows of `weight` for each bag of ids, summed, averaged or max'ed (mode), without
    the (B, L, dim) lookups in between as torch's. Bags: a 2-D input (B, L), each row one bag;
    or a 1-D input with `offsets` (B,), bag b from offsets[b] to the next offset (the last to
    the end; include_last_offset: offsets (B + 1,), the last the end of the last bag). An
    empty bag gives zeros. per_sample_weights (the input's shape, mode 'sum' only) weighs each
    id (and gets its gradient); ids equal to padding_idx are left out of their bag (not
    counted by 'mean'). max_norm, norm_type and scale_grad_by_freq as embedding's. Composed:
    the bags laid out as (B, K) places (K the longest bag), looked up, masked and reduced."""
    ids, w = _t(input, weight), _t(weight)
    starts, lengths, psw = _bag_args(ids, w, offsets, mode, sparse, scale_grad_by_freq,
                                     per_sample_weights, include_last_offset)
    pad = None if padding_idx is None else _bag_padding(padding_idx, w.shape[0])
    flat = ids.reshape(-1)
    if max_norm is not None:
        _embedding_renorm(w, flat, max_norm, norm_type)
    k = max(1, int(lengths.max().item()) if lengths.numel() else 1)  # the longest bag
    places = starts.unsqueeze(1) + arange(k, backend=w.backend)  # (B, K)
    valid = arange(k, backend=w.backend) < lengths.unsqueeze(1)
    places = where(valid, places, flat.numel())  # (outside a bag: the extra entry below)
    bag_ids = cat([flat.long(), zeros_like(flat[:1]).long()]).take(places)
    if pad is not None:
        valid = valid & (bag_ids != pad)
    rows = apply(nn_ops.embedding, where(valid, bag_ids, 0), w)  # (B, K, dim)
    if scale_grad_by_freq:  # each row's gradient / its id's count in the input (the same value)
        freq = flat.long().bincount(minlength=w.shape[0]).take(bag_ids).clamp_min(1)
        scaled = rows / freq.unsqueeze(-1).to(rows.dtype)
        rows = scaled + (rows - scaled).detach()
    if psw is not None:
        psw = cat([psw.reshape(-1), zeros_like(psw.reshape(-1)[:1])]).take(places)
    return _bag_reduce(rows, valid, psw, mode)


def _bag_args(ids, w, offsets, mode, sparse, scale_grad_by_freq, psw, include_last_offset):
    """embedding_bag's arguments checked as torch's: each bag's start and length (B,), and
    per_sample_weights as a tensor (or None)."""
    name = "embedding_bag"
    if ids.dtype.kind not in "iu":
        raise DTypeError(f"{name}: input must hold integer ids, got {ids.dtype} (the order is "
                         "embedding_bag(input, weight, ...))")
    if psw is not None and tuple(_t(psw).shape) != ids.shape:
        raise ValueError(f"{name}: If per_sample_weights {fmt_shape(_t(psw).shape)} is not "
                         f"None, then it must have the same shape as the input "
                         f"{fmt_shape(ids.shape)}")
    if w.ndim != 2:
        raise ValueError(f"{name}: weight has to be a 2D Tensor, but got weight "
                         f"{fmt_shape(w.shape)}")
    _bag_mode(mode, sparse, scale_grad_by_freq, psw)
    if ids.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{name}: if input is 2D, then offsets has to be None, as input is "
                             "treated is a mini-batch of fixed length sequences")
        b, n = ids.shape
        return arange(b, backend=w.backend) * n, full((b,), n, dtype=np.int64,
                                                      backend=w.backend), psw
    if ids.ndim != 1:
        raise ValueError(f"{name}: input has to be 1D or 2D Tensor, but got input "
                         f"{fmt_shape(ids.shape)}")
    if offsets is None or _t(offsets).ndim != 1:
        raise ValueError(f"{name}: offsets has to be a 1D Tensor (with a 1-D input), got "
                         f"{None if offsets is None else fmt_shape(_t(offsets).shape)}")
    offsets = _t(offsets, w).long()
    _check_values(_bag_offsets_fit, offsets, n=ids.shape[0])
    # (as ATen's: with include_last_offset the last bag still ends at the end of the indices,
    # whatever the last offset says)
    starts = offsets[:-1] if include_last_offset else offsets
    ends = cat([starts[1:], full((1,), ids.shape[0], dtype=np.int64,
                                 backend=w.backend)])[:starts.shape[0]]
    return starts, ends - starts, None if psw is None else _t(psw, w)


def _bag_mode(mode, sparse, scale_grad_by_freq, psw):
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if sparse:
        raise ValueError("embedding_bag: sparse=True (a sparse weight gradient) is not "
                         "supported: tinyattn has no sparse tensors; leave it False")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("embedding_bag: max mode does not support scaling the gradient by "
                         "the frequency")
    if psw is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}')")


def _bag_offsets_fit(o, n):
    """torch's checks of embedding_bag's offsets into an input of n ids (and non-decreasing)."""
    if o.size and int(o[0]) != 0:
        raise _OutOfRangeError(f"embedding_bag: offsets[0] has to be 0, i.e., the first "
                               f"sequence in the mini-batch has to start from position 0. "
                               f"However, got {int(o[0])}")
    if o.size and int(o[-1]) > n:
        raise _OutOfRangeError(f"embedding_bag: offsets[-1] can not be greater than input's "
                               f"length {n} but got offsets[-1] of {int(o[-1])}")
    if o.size > 1 and bool((o[1:] < o[:-1]).any()):
        raise _OutOfRangeError("embedding_bag: offsets must be non-decreasing")


def _bag_padding(padding_idx, n):
    try:
        return _padding_index(padding_idx, n, "embedding_bag")
    except DimError as e:  # (torch's: a RuntimeError)
        raise _OutOfRangeError(str(e)) from None


def _bag_reduce(rows, valid, psw, mode):
    """rows (B, K, dim) reduced over each bag's valid places (B, K): summed (weighed by psw),
    averaged, or max'ed; an empty bag gives zeros."""
    if mode == "max":
        top = where(valid.unsqueeze(-1), rows, -math.inf).amax(1)
        return where(valid.any(1).unsqueeze(-1), top, 0.0)
    weights = valid.to(rows.dtype) if psw is None else where(valid, psw, 0.0)
    total = (rows * weights.unsqueeze(-1)).sum(1)
    if mode == "sum":
        return total
    return total / valid.sum(1).clamp_min(1).unsqueeze(-1).to(rows.dtype)


def dropout(input, p=0.5, training=True, inplace=False, seed=None):  # noqa: A002 - torch's
    """Zero each entry with probability p and scale the rest by 1/(1-p); identity if not training.
    inplace=True writes the result into x (as torch).

    `seed` draws the mask from a fresh generator (reproducible); without it, from the backend's
    generator, which `tinyattn.manual_seed` seeds.
    """
    x = _t(input)
    nn_ops.check_dropout_p(p)
    if not _flag("dropout", "training", training) or p == 0:
        return x
    return _pointwise(nn_ops.dropout, x, inplace, "dropout", p=float(p), seed=seed)


# ---- joining -------------------------------------------------------------------------------------


def cat(tensors, dim=0):
    tensors = [_t(x, tensors[0]) for x in tensors]
    return apply(sh.cat, *tensors, dim=dim)


def stack(tensors, dim=0):
    tensors = [_t(x, tensors[0]) for x in tensors]
    return apply(sh.stack, *tensors, dim=dim)


def atleast_1d(*tensors):
    """Each tensor with at least 1 dim (a 0-d one as (1,)): one tensor in, one out; several, or
    a list or tuple of them, in, a tuple out (torch's)."""
    return _at_least(tensors, lambda x: x.reshape(1))


def atleast_2d(*tensors):
    """Each tensor with at least 2 dims: () as (1, 1), (n,) as (1, n)."""
    return _at_least(tensors, lambda x: x.reshape(1, -1), 2)


def atleast_3d(*tensors):
    """Each tensor with at least 3 dims: () as (1, 1, 1), (n,) as (1, n, 1), (m, n) as
    (m, n, 1)."""
    return _at_least(tensors, lambda x: x.reshape(1, -1, 1) if x.ndim < 2 else x.unsqueeze(-1), 3)


def _at_least(tensors, grow, ndim=1):
    """grow(x) for each x with fewer than ndim dims, x itself for the others."""
    listed = len(tensors) == 1 and isinstance(tensors[0], (list, tuple))
    items = tensors[0] if listed else tensors
    out = tuple(x if x.ndim >= ndim else grow(x) for x in (_t(x) for x in items))
    return out[0] if len(tensors) == 1 and not listed else out


# ---- attention -----------------------------------------------------------------------------------


def causal_mask(T, S=None, backend=None):  # noqa: N803 - the sizes' usual names
    """Bool (T, S): True where query i may attend key j, i.e. j <= i (the lower triangle)."""
    return _make("causal_mask", _causal_keep, np.bool_, False, backend,
                 n_q=_size(T, "T"), n_k=_size(T if S is None else S, "S"))


def _size(n, name):
    """causal_mask's size `name` as an int >= 0 (2.5 would give 3 rows, -1 none, silently)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"causal_mask: {name} must be an int (a number of queries or keys), got "
                        f"{n!r}")
    if n < 0:
        raise ValueError(f"causal_mask: {name} must be >= 0, got {n}")
    return int(n)


def _causal_keep(be, dtype, n_q, n_k):
    return be.causal_keep(n_q, n_k)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False, impl="auto"):
    """softmax(q kᵀ * scale + mask) @ v over the last two dims: q (..., T, d), k (..., S, d),
    v (..., S, dv) -> (..., T, dv).

    attn_mask: bool (True = may attend) or float (added to the scores), broadcast to (..., T, S);
    an integer one is refused (as torch: pass mask.bool()). q, k, v: floating point, their
    leading dims broadcasting together.
    is_causal: query i attends keys 0..i. scale: 1/√d by default. A query that may attend no
    key gives zeros (output and gradients), never NaN. dropout_p: drop attention weights with
    that probability (always, as torch: pass 0.0 in eval mode). enable_gqa: k and v may have
    fewer heads (dim -3) than q, each shared by a group of query heads (grouped-query
    attention). impl: "composite" (matmul, scaled masked softmax, matmul: one node each),
    "flash" (one fused node, O(T) memory, bool masks only, no dropout) or "auto" (flash on
    backends that prefer it and for long sequences, else composite).
    """
    _check_sdpa_args(impl, dropout_p, attn_mask, is_causal)
    q = _t(q)
    k, v = _t(k, q), _t(v, q)
    if enable_gqa:
        k, v = _share_kv_heads(q, k, v)
    attn.check_qkv(q, k, v)  # before anything reads q.shape[-2]
    mask = None if attn_mask is None else _t(attn_mask, q)
    attn.check_mask_dtype(mask, q.dtype)  # (before float_mask below reads an int mask as float)
    scale = attn.default_scale(q.shape[-1]) if scale is None else float(scale)
    float_mask = mask is not None and mask.dtype != bool
    if impl == "flash" and float_mask:
        raise DTypeError("scaled_dot_product_attention: impl='flash' takes a bool mask (True = "
                         f"attend), got {mask.dtype}; use impl='composite' for an additive mask")
    if dropout_p > 0:
        weights = attn.checked_weights(q, k, mask, is_causal, scale)  # (..., T, S)
        return dropout(weights, dropout_p) @ v  # (..., T, dv)
    if impl == "flash" or impl == "auto" and not float_mask and q.shape[-2] >= \
            q.backend.flash_from:
        attn.check_flash_mask(mask, q, k, v)  # (in this function's name, not the op's)
        return apply(attn.flash_attention, q, k, v, mask, scale=scale, causal=is_causal)
    return attn.checked_weights(q, k, mask, is_causal, scale) @ v  # (..., T, dv): composite


def _check_sdpa_args(impl, dropout_p, attn_mask, is_causal):
    if impl not in ("auto", "composite", "flash"):
        raise ValueError(f"scaled_dot_product_attention: impl must be 'auto', 'composite' or "
                         f"'flash', got {impl!r}")
    _flag("scaled_dot_product_attention", "is_causal", is_causal)
    if isinstance(dropout_p, (bool, str)) or not isinstance(dropout_p, numbers.Real):
        raise TypeError(f"scaled_dot_product_attention: dropout_p must be a number, got "
                        f"{type(dropout_p).__name__} {dropout_p!r}")
    if not 0.0 <= dropout_p <= 1.0:  # (1: every weight dropped, zeros out, as in torch)
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got "
                         f"{dropout_p}")
    if impl == "flash" and dropout_p > 0:
        raise ValueError("scaled_dot_product_attention: impl='flash' has no dropout; use "
                         "impl='composite' (or 'auto') with dropout_p > 0")
    if attn_mask is not None and is_causal:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal=True, not "
                         "both (torch's contract); for both, pass attn_mask & causal_mask(T, S)")


def _share_kv_heads(q, k, v):
    """k, v (..., Hkv, S, d) repeated to q's Hq heads: head h reads kv head h // (Hq / Hkv)."""
    if q.ndim < 3 or k.ndim < 3 or v.ndim < 3 or k.shape[-3] != v.shape[-3] or \
            q.shape[-3] % k.shape[-3]:
        raise ShapeError(f"scaled_dot_product_attention: enable_gqa needs q (..., Hq, T, d), "
                         f"k and v (..., Hkv, S, d) with Hq a multiple of Hkv, got q "
                         f"{fmt_shape(q.shape)}, k {fmt_shape(k.shape)}, v {fmt_shape(v.shape)}")
    groups = q.shape[-3] // k.shape[-3]
    if groups == 1:
        return k, v

    def repeat(x):  # (..., Hkv, S, d) -> (..., Hkv, groups, S, d) -> (..., Hq, S, d)
        wide = x.unsqueeze(-3).expand(x.shape[:-2] + (groups,) + x.shape[-2:])
        return wide.reshape(x.shape[:-3] + (q.shape[-3],) + x.shape[-2:])
    return repeat(k), repeat(v)


def attention_weights(q, k, attn_mask=None, is_causal=False, scale=None):
    """The probabilities softmax(q kᵀ * scale + mask) that attention mixes v with: (..., T, S)."""
    q = _t(q)
    mask = None if attn_mask is None else _t(attn_mask, q)
    return attn.attention_weights(q, _t(k, q), mask, is_causal, scale)


# ---- more activations, softmin, normalize and pad (ops/activation.py, ops/reduce.py) ---------


def silu(x, inplace=False):
    """x * sigmoid(x) (swish)."""
    return _pointwise(act.silu, x, inplace, "silu")


def softplus(x, beta=1.0, threshold=20.0):
    """log(1 + e^(beta x)) / beta (x itself where beta x > threshold)."""
    return apply(act.softplus, _t(x), beta=plain(beta, "softplus"),
                 threshold=plain(threshold, "softplus"))


def mish(x, inplace=False):
    """x * tanh(softplus(x))."""
    return _pointwise(act.mish, x, inplace, "mish")


def elu(x, alpha=1.0, inplace=False):
    return _pointwise(act.elu, x, inplace, "elu", alpha=alpha)


def selu(x, inplace=False):
    return _pointwise(act.selu, x, inplace, "selu")


def celu(x, alpha=1.0, inplace=False):
    return _pointwise(act.celu, x, inplace, "celu", alpha=alpha)


def logsigmoid(x):
    return apply(act.logsigmoid, _t(x))


def softsign(x):
    """x / (1 + |x|); integers in the default float dtype (torch's x / (x.abs() + 1))."""
    x = _t(x)
    if x.dtype.kind in "iu":
        x = x.to(get_default_dtype())
    return apply(act.softsign, x)


def leaky_relu(x, negative_slope=0.01, inplace=False):
    return _pointwise(act.leaky_relu, x, inplace, "leaky_relu", negative_slope=negative_slope)


def hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    return _pointwise(act.hardtanh, x, inplace, "hardtanh", min_val=min_val, max_val=max_val)


def relu6(x, inplace=False):
    """min(max(x, 0), 6) (hardtanh on [0, 6], torch's gradient at the edges)."""
    x = _t(x)
    if x.dtype.kind == "b":  # (else hardtanh's refusal, in hardtanh's name)
        raise DTypeError("relu6: bool inputs are not supported (torch's rule); convert them "
                         "with .long() or .float()")
    return _pointwise(act.hardtanh, x, inplace, "relu6", min_val=0.0, max_val=6.0)


def hardsigmoid(x, inplace=False):
    return _pointwise(act.hardsigmoid, x, inplace, "hardsigmoid")


def hardswish(x, inplace=False):
    return _pointwise(act.hardswish, x, inplace, "hardswish")


def tanhshrink(x):
    """x - tanh(x); integers in the default float dtype (torch's x - x.tanh())."""
    x = _t(x)
    if x.dtype.kind == "b":
        raise DTypeError("tanhshrink: bool inputs are not supported (torch's rule: no - on "
                         "bool tensors); convert them with .float()")
    if x.dtype.kind in "iu":
        x = x.to(get_default_dtype())
    return apply(act.tanhshrink, x)


def threshold(x, threshold, value, inplace=False):
    """value where x <= threshold, else x; an integer x keeps its dtype (torch's)."""
    return _pointwise(act.threshold, x, inplace, "threshold", threshold=threshold, value=value)


def softshrink(x, lambd=0.5):
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0 (lambd >= 0)."""
    return apply(act.softshrink, _t(x), lambd=plain(lambd, "softshrink"))


def hardshrink(x, lambd=0.5):
    """x where |x| > lambd, else 0."""
    return apply(act.hardshrink, _t(x), lambd=plain(lambd, "hardshrink"))


def prelu(x, weight):
    """x where x > 0, else weight * x: one slope, or one per channel (dim 1), learned."""
    x = _t(x)
    return apply(act.prelu, x, _t(weight, x))


def rrelu(x, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky relu with a random slope r ~ U(lower, upper) per entry in training (from the
    backend's generator, which tinyattn.manual_seed seeds), the mean slope (lower + upper) / 2
    otherwise."""
    x = _t(x)
    if x.dtype.kind != "f":
        raise DTypeError(f"rrelu: needs a floating-point input, got {x.dtype} (torch's rule "
                         "too); convert it with .float()")
    if lower > upper:
        raise ValueError(f"rrelu: lower {lower} is above upper {upper} (torch: the lower bound "
                         "should be less than or equal to the upper bound)")
    if not training:
        return _pointwise(act.leaky_relu, x, inplace, "rrelu", negative_slope=(lower + upper) / 2)
    return _pointwise(act.rrelu, x, inplace, "rrelu", lower=lower, upper=upper)


# the in-place forms torch.nn.functional has: f_(x, ...) is f(x, ..., inplace=True)


def relu_(x):
    return relu(x, inplace=True)


def elu_(x, alpha=1.0):
    return elu(x, alpha, inplace=True)


def celu_(x, alpha=1.0):
    return celu(x, alpha, inplace=True)


def selu_(x):
    return selu(x, inplace=True)


def leaky_relu_(x, negative_slope=0.01):
    return leaky_relu(x, negative_slope, inplace=True)


def hardtanh_(x, min_val=-1.0, max_val=1.0):
    return hardtanh(x, min_val, max_val, inplace=True)


def rrelu_(x, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(x, lower, upper, training, inplace=True)


def threshold_(x, threshold, value):
    return _pointwise(act.threshold, x, True, "threshold_", threshold=threshold, value=value)


def softmin(x, dim=None, dtype=None):
    """softmax(-x, dim) (computed in `dtype` if given); dtype and dim=None as softmax's."""
    x = _softmax_input(x, dtype, "softmin")
    return softmax(-x, _softmax_dim(dim, x.ndim, "softmin"))


def normalize(x, p=2.0, dim=1, eps=1e-12):
    """x / max(‖x‖_p over dim, eps): unit vectors along dim."""
    x = _t(x)
    _floating(x, "normalize")  # (checked here: vector_norm's errors would name vector_norm)
    _axes(dim, x.ndim, "normalize")
    norm = x.norm(p, dim=dim, keepdim=True)
    return x / norm.clamp_min(eps)


def glu(x, dim=-1):
    """The gated linear unit: x's first half times sigmoid of its second half, along dim."""
    x = _t(x)
    if x.ndim == 0:
        raise ShapeError("glu: takes a tensor with at least one dim (halved into the value and "
                         "its gate), got a 0-d tensor")
    _floating(x, "glu")  # (torch has no integer glu)
    axis = dim1(dim, x.ndim, "glu")
    if x.shape[axis] % 2:
        raise ShapeError(f"glu: dim {dim} of {fmt_shape(x.shape)} must have an even size "
                         "(halved into the value and its gate)")
    a, b = x.chunk(2, axis)  # (an empty dim: two empty halves)
    return a * b.sigmoid()


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Σ x1 x2 / (max(‖x1‖, eps) max(‖x2‖, eps)) along dim (the inputs broadcast first)."""
    x1, x2, shape = _broadcast_pair(x1, x2, "cosine_similarity")
    _floating(x1, "cosine_similarity", "x1")  # (in this name, not normalize's)
    _floating(x2, "cosine_similarity", "x2")
    if dim is None or isinstance(dim, (tuple, list)):  # (one dim, as torch's: not all of them)
        raise TypeError(f"cosine_similarity: dim must be an int, got {dim!r}")
    if not eps >= 0:
        raise ValueError(f"cosine_similarity: eps must be non-negative, got {eps}")
    _axes(dim, len(shape), "cosine_similarity")
    x1, x2 = x1.expand(shape), x2.expand(shape)
    return (normalize(x1, 2.0, dim, eps) * normalize(x2, 2.0, dim, eps)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """‖x1 - x2 + eps‖_p over the last dim (eps keeps the gradient finite at x1 = x2)."""
    x1, x2, _ = _broadcast_pair(x1, x2, "pairwise_distance")
    return (x1 - x2 + eps).norm(_norm_order("pairwise_distance", p), dim=-1, keepdim=keepdim)


def _norm_order(name, p):
    """cdist's and pdist's p as a number: a bool counts as 0 or 1 (torch takes it); None or
    a string is a TypeError naming the function (tensor._real)."""
    return float(p) if isinstance(p, (bool, np.bool_)) else _real(name, "p", p)


def pdist(input, p=2):  # noqa: A002 - torch's name
    """The p-norm distance between every pair of rows of (N, M): the N (N - 1) / 2 entries
    above the diagonal of the distance matrix, row by row (torch's condensed form). No eps:
    the gradient at a zero distance is 0, as torch's."""
    x = _t(input)
    if x.ndim != 2:
        raise ShapeError(f"pdist only supports 2D tensors, got: {x.ndim}D")
    if x.dtype.kind != "f":
        raise DTypeError(f"pdist only supports floating-point dtypes, got {x.dtype}")
    p = _norm_order("pdist", p)
    if p < 0:
        raise ShapeError(f"pdist only supports non-negative p values, got {p}")
    first, second = np.triu_indices(x.shape[0], 1)
    rows = _fresh(first.astype(np.int64), backend=x.backend)
    others = _fresh(second.astype(np.int64), backend=x.backend)
    return (x.index_select(0, rows) - x.index_select(0, others)).norm(p, dim=1)


def _broadcast_pair(x1, x2, name):
    """x1 and x2 as tensors and the shape they broadcast to; shapes that do not are an error
    naming the function called (not NumPy's, nor the op inside it)."""
    x1 = _t(x1, x2 if isinstance(x2, Tensor) else None)
    x2 = _t(x2, x1)
    try:
        return x1, x2, broadcast_shape(x1.shape, x2.shape)
    except ValueError:
        raise ShapeError(f"{name}: x1 {fmt_shape(x1.shape)} and x2 {fmt_shape(x2.shape)} do "
                         "not broadcast together (from the right, each pair of dims must be "
                         "equal or one of them 1)") from None


def pad(x, pad, mode="constant", value=None):  # noqa: A002 - torch's names
    """Pad the last dims: pad = (left, right) for the last dim, then (left, right) for the one
    before, ... mode "constant" (with value; None, the default, pads with 0 as torch's),
    "reflect", "replicate" or "circular" (these take no value); negative amounts crop.

    As torch: reflect and replicate map each place of the result to the uncropped dim (pad
    (-1, 3) reflects about the dim's last entry), and refuse amounts they cannot fill (reflect:
    each below the dim's size; replicate: an empty dim); circular crops first and wraps at most
    once around what is left. The result is always new memory, as torch's: nothing to pad, or
    only crops, give a copy (never the input or a view of it, which an in-place op on the
    result would write through).
    """
    x, pad = _t(x), [_int_of(n) for n in pad]
    _check_pad(x, pad, mode, value)
    fresh = False  # (whether a dim was padded: its cat or index_select made new memory)
    for k in range(len(pad) // 2):
        x, padded = _pad_dim(x, x.ndim - 1 - k, int(pad[2 * k]), int(pad[2 * k + 1]), mode,
                             0.0 if value is None else value)
        fresh = fresh or padded
    return x if fresh else x.clone()


def _check_pad(x, pad, mode, value):  # noqa: A002
    """pad()'s arguments, checked before any dim is padded."""
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ShapeError(f"pad: needs (left, right) pairs for at most {x.ndim} dims of "
                         f"{fmt_shape(x.shape)}, got {tuple(pad)}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', "
                         f"got {mode!r}")
    # int() would truncate 1.5 to 1, a padding nobody asked for (torch: a TypeError)
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in pad):
        raise DTypeError(f"pad: the amounts must be ints, got {tuple(pad)}")
    if mode != "constant" and value is not None and value != 0:  # (0 is torch's no-op too)
        raise ValueError(f"pad: mode {mode!r} takes no value (got value={value!r}); it pads "
                         "with the input's own entries, only mode 'constant' with value")
    if value is not None and x.dtype.kind in "iuf":  # (300 into int8: refused, as torch)
        if x.dtype.kind == "u" and value < 0:  # (torch's pad wraps no -1 into 255, unlike full)
            raise DTypeError(f"pad: {value!r} does not fit {x.dtype} (its values are "
                             f"0..{np.iinfo(x.dtype).max}); value cannot be converted without "
                             "overflow")
        fill_value(value, x.dtype, "pad")


def _pad_dim(x, axis, left, right, mode, value):
    """pad() along one dim: constant and circular crop for negative amounts, then pad;
    reflect and replicate take each place from the uncropped dim (crop and pad in one).
    Returns (result, whether it is new memory): a crop alone is a view, nothing x itself."""
    n = x.shape[axis]
    crop_first = mode in ("constant", "circular")  # (torch's order for these two)
    if n + left + right < 0 or crop_first and max(-left, 0) + max(-right, 0) > n:
        raise ShapeError(f"pad: ({left}, {right}) crops dim {axis} of {fmt_shape(x.shape)} to "
                         "a negative size")
    if crop_first and (left < 0 or right < 0):
        x = x.narrow(axis, max(-left, 0), n - max(-left, 0) - max(-right, 0))
        left, right, n = max(left, 0), max(right, 0), x.shape[axis]
    if not left and not right:
        return x, False
    if mode == "constant":
        return cat([_full(x, axis, left, value), x, _full(x, axis, right, value)],
                   dim=axis), True
    _check_pad_source(x, axis, left, right, mode)
    source = _make("pad_source", _pad_source, np.int64, False, x.backend, n=n, left=left,
                   right=right, mode=mode)
    return x.index_select(axis, source), True


def _check_pad_source(x, axis, left, right, mode):
    """Refuse, as torch does, the amounts that reflect, replicate or circular cannot fill from
    dim `axis` of x (else they would wrap twice or read an empty dim)."""
    n, shape = x.shape[axis], fmt_shape(x.shape)
    if mode == "reflect" and (left >= n or right >= n):
        raise ShapeError(f"pad: reflect padding ({left}, {right}) must be below the size "
                         f"{n} of dim {axis} (shape {shape})")
    if mode == "replicate" and n == 0:
        raise ShapeError(f"pad: replicate padding ({left}, {right}) needs entries to copy, dim "
                         f"{axis} of {shape} is empty")
    if mode == "circular" and (left > n or right > n):
        raise ShapeError(f"pad: circular padding ({left}, {right}) wraps around dim {axis} of "
                         f"{shape} more than once (each amount must be at most {n})")


def _pad_source(be, dtype, n, left, right, mode):
    """For each place of the padded dim, the place of the input it copies."""
    return be.asarray(_pad_places(n, left, right, mode)).astype(dtype, copy=False)


def _pad_places(n, left, right, mode):
    """The places -left .. n + right - 1 of the dim (a negative amount starts or ends inside
    it: a crop), each moved into 0..n-1 as the mode says."""
    where = np.arange(-left, n + right)
    if mode == "reflect":
        period = 2 * (n - 1) if n > 1 else 1
        where = np.abs((where + period) % period if n > 1 else where * 0)
        return np.where(where >= n, period - where, where)
    if mode == "replicate":
        return np.clip(where, 0, n - 1)
    return where % n  # circular


def _full(like, axis, size, value):
    """A constant block of `like`'s shape with `size` entries along axis."""
    shape = like.shape[:axis] + (size,) + like.shape[axis + 1:]
    return full(shape, value, dtype=like.dtype, backend=like.backend)


# ---- unfold and fold, convolution, pooling -----------------------------------------------------
# All composed from tensor ops (pad, Tensor.unfold's windows, slicing, index_select, matmul,
# max, sum), so each gradient is theirs. The 1-d functions run the 2-d ones on (N, C, 1, L).


def _ints(value, n, name, what, least=1):
    """`value` (an int, or a sequence of n ints) as a tuple of n ints, each at least `least`."""
    one = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    values = (value,) * n if one else tuple(value) if isinstance(value, (tuple, list)) else ()
    if len(values) != n or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                   for v in values):
        raise ValueError(f"{name}: {what} must be an int or {n} ints, got {value!r}")
    if min(values) < least:
        raise ValueError(f"{name}: {what} must be {'positive' if least else 'non-negative'}, "
                         f"got {value!r}")
    return tuple(int(v) for v in values)


def _batched(x, spatial, name):
    """x as (N, C, *spatial dims), and whether it came unbatched, (C, *spatial dims): torch
    takes both (and gives the unbatched one back without its N)."""
    if x.ndim == spatial + 1:
        return x.unsqueeze(0), True
    if x.ndim != spatial + 2:
        dims = ("L", "H, W", "D, H, W")[spatial - 1]
        raise ShapeError(f"{name}: expected input (N, C, {dims}) or (C, {dims}), got "
                         f"{fmt_shape(x.shape)}")
    return x, False


def _lifted(spatial, *sizes):
    """1-d sizes as the 2-d ones that run them (a height of 1); 2-d ones as they are."""
    return [(1,) + s if spatial == 1 else s for s in sizes]


def _unlifted(y, spatial, unbatched):
    """The 2-d result back to what the caller gave: without the height of a 1-d one, without
    the N of an unbatched one."""
    y = y.squeeze(2) if spatial == 1 else y
    return y.squeeze(0) if unbatched else y


def _windows(x, kernel, dilation, stride, pads, name, value=0.0):
    """Every kernel window of x (N, C, H, W) (or (N, C, D, H, W)) padded by pads ((top,
    bottom), (left, right)) with `value`: (N, C, oh, ow, kh, kw) (or (N, C, od, oh, ow, kd, kh,
    kw)), a view of the padded input (Tensor.unfold)."""
    if any(left or right for left, right in pads):
        x = pad(x, tuple(a for p in pads[::-1] for a in p), value=value)
    spans = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True))
    if any(s > n for s, n in zip(spans, x.shape[2:], strict=True)):
        # (a 1-d caller's message: its own dim)
        shown = 1 if name.endswith("1d") else len(kernel)
        raise ShapeError(f"{name}: the kernel {fmt_shape(kernel[-shown:])} (dilation "
                         f"{fmt_shape(dilation[-shown:])}) is larger than the padded input "
                         f"{fmt_shape(x.shape[-shown:])} (padding {pads[-shown:]})")
    w = x
    for axis, (span, step) in enumerate(zip(spans, stride, strict=True)):
        w = w.unfold(2 + axis, span, step)
    if all(d == 1 for d in dilation):
        return w
    return w[(Ellipsis,) + tuple(slice(None, None, d) for d in dilation)]


def _columns(w):
    """Windows (N, C, oh, ow, kh, kw) (or with a depth) in torch's unfold layout:
    (N, C*kh*kw, oh*ow)."""
    n, c, nd = w.shape[0], w.shape[1], (w.ndim - 2) // 2
    order = (0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd))
    return w.permute(*order).reshape(n, c * math.prod(w.shape[2 + nd:]),
                                     math.prod(w.shape[2:2 + nd]))


def _window_args(name, spatial, kernel_size, dilation, padding, stride):
    return (_ints(kernel_size, spatial, name, "kernel_size"),
            _ints(dilation, spatial, name, "dilation"),
            _ints(padding, spatial, name, "padding", least=0),
            _ints(kernel_size if stride is None else stride, spatial, name, "stride"))


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002 - torch's name
    """Every kernel_size block of input (N, C, H, W) (or (C, H, W)) as a column, as torch's
    (im2col): (N, C*kh*kw, L), each column a block in C, kh, kw order, the L blocks in row-major
    order. The input is zero-padded by `padding` on each side first."""
    x, unbatched = _batched(_t(input), 2, "unfold")
    kernel, dilation, padding, stride = _window_args("unfold", 2, kernel_size, dilation, padding,
                                                     stride)
    cols = _columns(_windows(x, kernel, dilation, stride, [(p, p) for p in padding], "unfold"))
    if cols._is_view():  # (1 x 1 blocks: a view of the input; torch's is new memory)
        cols = cols.clone()
    return cols.squeeze(0) if unbatched else cols


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """unfold's adjoint (col2im), as torch's: each column of input (N, C*kh*kw, L) (or
    (C*kh*kw, L)) added back into its block of an (N, C, H, W) output of output_size (H, W);
    overlapping blocks add up, what lands in the padding is dropped."""
    x = _t(input)
    if x.ndim not in (2, 3):
        raise ShapeError(f"fold: expected input (N, C*kh*kw, L) or (C*kh*kw, L), got "
                         f"{fmt_shape(x.shape)}")
    kernel, dilation, padding, stride = _window_args("fold", 2, kernel_size, dilation, padding,
                                                     stride)
    size = _ints(output_size, 2, "fold", "output_size")
    blocks = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, p, d, k, s in
              zip(size, padding, dilation, kernel, stride, strict=True)]
    kk, n_cols = math.prod(kernel), x.shape[-1]
    if x.shape[-2] % kk or n_cols != math.prod(blocks) or min(blocks) < 1:
        raise ShapeError(f"fold: input {fmt_shape(x.shape)} must be (N, C*kh*kw, L) with its "
                         f"dim -2 divisible by kh*kw = {kk} and L = {blocks[0]} * {blocks[1]} = "
                         f"{math.prod(blocks)} blocks (output_size {size}, kernel_size {kernel}, "
                         f"dilation {dilation}, padding {padding}, stride {stride})")
    out = _fold_columns(x, size, kernel, dilation, padding, stride, blocks)
    return out.squeeze(0) if x.ndim == 2 else out


def _fold_columns(x, size, kernel, dilation, padding, stride, blocks):
    """fold's sum of columns x (N, C*kk, L) into (N, C, *size), for 2 or 3 spatial dims
    (conv_transpose3d's too), the sizes already checked."""
    kk, n_cols = math.prod(kernel), x.shape[-1]
    cols = x.reshape(-1, x.shape[-2] // kk, kk * n_cols)  # (N, C, kk*L): one column per (o, l)
    cols = cat([cols, _full(cols, 2, 1, 0.0)], dim=2)  # and a zero, for places with fewer
    places = _fold_places(tuple(size), kernel, dilation, padding, stride, blocks)
    return cols.index_select(2, places.reshape(-1)).reshape(
        cols.shape[:2] + tuple(size) + (kk,)).sum(-1)


def _fold_places(size, kernel, dilation, padding, stride, blocks):
    """(H, W, kh*kw) (or (D, H, W, kd*kh*kw)): for each place of fold's output and each kernel
    offset o, the column (o * L + block) that lands there, or o * L + ... = kk*L (the zero)
    where none does (a block covers a place at most once per offset)."""
    kk, n_blocks = math.prod(kernel), math.prod(blocks)
    places = np.full(tuple(size) + (kk,), kk * n_blocks, dtype=np.int64)
    for o in range(kk):
        starts = [np.arange(m) * s + i * d - p for m, s, i, d, p in
                  zip(blocks, stride, np.unravel_index(o, kernel), dilation, padding, strict=True)]
        inside = [(at >= 0) & (at < n) for at, n in zip(starts, size, strict=True)]
        block = o * n_blocks + np.arange(n_blocks).reshape(blocks)
        places[np.ix_(*(at[m] for at, m in zip(starts, inside, strict=True))) + (o,)] = block[
            np.ix_(*inside)]
    return places


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """A 1-d convolution (cross-correlation, as torch's) of input (N, C_in, L) (or (C_in, L))
    with weight (C_out, C_in / groups, k), plus bias (C_out,): (N, C_out, L_out). padding: an
    int, "valid" (none) or "same" (the output as long as the input; stride 1 only)."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """A 2-d convolution (cross-correlation, as torch's) of input (N, C_in, H, W) (or
    (C_in, H, W)) with weight (C_out, C_in / groups, kh, kw), plus bias (C_out,). Each group of
    C_in / groups input channels makes C_out / groups output channels. padding: ints, "valid"
    or "same" (stride 1 only; an odd total pads one more on the bottom and right, as torch)."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """A 3-d convolution (cross-correlation, as torch's) of input (N, C_in, D, H, W) (or
    (C_in, D, H, W)) with weight (C_out, C_in / groups, kd, kh, kw), plus bias (C_out,); groups
    and padding ("valid", "same" or ints) as conv2d's."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _conv(name, spatial, input, weight, bias, stride, padding, dilation, groups):  # noqa: A002
    """conv1d, conv2d and conv3d: the unfolded input's columns times the weight's rows, per
    group."""
    x, unbatched = _batched(_t(input), spatial, name)
    w = _t(weight, x)
    b = None if bias is None else _t(bias, x)
    _check_conv(name, spatial, x, w, b, groups)
    stride, dilation = (_ints(stride, spatial, name, "stride"),
                        _ints(dilation, spatial, name, "dilation"))
    pads = _conv_pads(name, padding, w.shape[2:], stride, dilation)
    kernel, stride, dilation = _lifted(spatial, w.shape[2:], stride, dilation)
    cols = _windows(x.reshape(x.shape[:2] + (1,) * (2 - spatial) + x.shape[2:]), kernel, dilation,
                    stride, [(0, 0)] * (2 - spatial) + pads, name)
    sizes = cols.shape[2:2 + len(kernel)]  # (oh, ow) or (od, oh, ow)
    n, out = x.shape[0], w.shape[0]
    per_group = math.prod(w.shape[1:])  # C_in/g * kk (sizes written out, not -1: an empty
    # batch has no elements to solve for it)
    cols = _columns(cols).reshape(n, groups, per_group, math.prod(sizes))  # (N, g, C_in/g*kk, L)
    y = (w.reshape(groups, out // groups, per_group) @ cols).reshape((n, out) + sizes)
    if b is not None:
        y = y + b.reshape((1, out) + (1,) * len(sizes))
    return _unlifted(y, spatial, unbatched)


def _check_conv_dtypes(name, x, w, b, groups):
    """A convolution's input is floating point, its weight and bias of the input's dtype, and
    groups a positive int (as torch checks them)."""
    _floating(x, name)
    for what, t in (("weight", w), ("bias", b)):
        if t is not None and t.dtype != x.dtype:
            raise DTypeError(f"{name}: input {x.dtype} and {what} {t.dtype} must have the same "
                             f"dtype, as in torch; convert one with .to({x.dtype})")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")


_KERNEL_DIMS = {1: "k", 2: "kh, kw", 3: "kd, kh, kw"}


def _check_conv(name, spatial, x, w, b, groups):
    """The input, weight, bias and groups of a convolution fit together (as torch checks)."""
    _check_conv_dtypes(name, x, w, b, groups)
    if w.ndim != spatial + 2:
        raise ShapeError(f"{name}: weight must be (out_channels, in_channels / groups, "
                         f"{_KERNEL_DIMS[spatial]}), got {fmt_shape(w.shape)}")
    if w.shape[0] % groups:
        raise ShapeError(f"{name}: groups {groups} must divide out_channels {w.shape[0]} "
                         f"(weight {fmt_shape(w.shape)})")
    if x.shape[1] % groups:
        raise ShapeError(f"{name}: groups {groups} must divide the {x.shape[1]} channels of "
                         f"input {fmt_shape(x.shape)}")
    if x.shape[1] != w.shape[1] * groups:
        raise ShapeError(f"{name}: input {fmt_shape(x.shape)} has {x.shape[1]} channels, but "
                         f"weight {fmt_shape(w.shape)} with groups {groups} expects "
                         f"{w.shape[1] * groups} (weight.shape[1] * groups)")
    if b is not None and tuple(b.shape) != w.shape[:1]:
        raise ShapeError(f"{name}: bias {fmt_shape(b.shape)} must be {fmt_shape(w.shape[:1])}, "
                         f"one per output channel of weight {fmt_shape(w.shape)}")


def _check_padding_string(name, padding, stride):
    """A padding string is "valid" or "same", and "same" has stride 1 (torch's rules)."""
    if padding not in ("valid", "same"):
        raise ValueError(f"{name}: padding {padding!r} must be 'valid', 'same', an int or ints")
    if padding == "same" and any(s != 1 for s in stride):
        raise ValueError(f"{name}: padding='same' is not supported for strided convolutions "
                         f"(stride {stride}), as in torch")


def _conv_pads(name, padding, kernel, stride, dilation):
    """[(before, after)] per spatial dim: "same" splits d*(k-1) with the odd one after."""
    if isinstance(padding, str):
        _check_padding_string(name, padding, stride)
        totals = [d * (k - 1) if padding == "same" else 0
                  for k, d in zip(kernel, dilation, strict=True)]
        return [(t // 2, t - t // 2) for t in totals]
    return [(p, p) for p in _ints(padding, len(kernel), name, "padding", least=0)]


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups=1, dilation=1):
    """A 1-d transposed convolution (conv1d's gradient by its input, as torch's) of input
    (N, C_in, L) (or (C_in, L)) with weight (C_in, C_out / groups, k), plus bias (C_out,):
    (N, C_out, (L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1)."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups=1, dilation=1):
    """A 2-d transposed convolution (conv2d's gradient by its input, as torch's) of input
    (N, C_in, H, W) (or (C_in, H, W)) with weight (C_in, C_out / groups, kh, kw), plus bias
    (C_out,). Each output dim is (n - 1) * stride - 2 * padding + dilation * (k - 1) +
    output_padding + 1; output_padding (extra places at the end) must be smaller than stride
    or dilation."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,  # noqa: A002
                     groups=1, dilation=1):
    """A 3-d transposed convolution (conv3d's gradient by its input, as torch's) of input
    (N, C_in, D, H, W) (or (C_in, D, H, W)) with weight (C_in, C_out / groups, kd, kh, kw), plus
    bias (C_out,); each output dim as conv_transpose2d's."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def _conv_transpose(name, spatial, input, weight, bias, stride, padding, output_padding,  # noqa: A002
                    groups, dilation):
    """Each input place's channels times the weight's columns (Wᵀ x, per group) as the columns
    of fold (col2im) into the full, unpadded output, which is then cropped by padding and
    extended by output_padding."""
    x, unbatched = _batched(_t(input), spatial, name)
    w = _t(weight, x)
    b = None if bias is None else _t(bias, x)
    _check_conv_transpose(name, spatial, x, w, b, groups)
    stride, padding, output_padding, dilation = _transpose_args(name, spatial, stride, padding,
                                                                output_padding, dilation)
    kernel = tuple(w.shape[2:])
    full = [(n - 1) * s + d * (k - 1) + 1 for n, s, d, k in
            zip(x.shape[2:], stride, dilation, kernel, strict=True)]
    size = [f - 2 * p + o for f, p, o in zip(full, padding, output_padding, strict=True)]
    if min(size) < 1:
        raise ShapeError(f"{name}: input {fmt_shape(x.shape)} with weight {fmt_shape(w.shape)} "
                         f"gives an output of {fmt_shape(size)}, too small (stride {stride}, "
                         f"padding {padding}, output_padding {output_padding}, dilation "
                         f"{dilation})")
    n, c_in, out = x.shape[0], x.shape[1], w.shape[1] * groups
    cols = w.reshape(groups, c_in // groups, math.prod(w.shape[1:])).transpose(1, 2) @ x.reshape(
        n, groups, c_in // groups, math.prod(x.shape[2:]))  # (N, g, C_out/g * kk, L)
    full, kernel, stride, dilation = _lifted(spatial, tuple(full), kernel, stride, dilation)
    cols = cols.reshape(n, out * math.prod(kernel), math.prod(x.shape[2:]))
    if spatial == 3:  # (fold itself is 2-d only, as torch's)
        y = _fold_columns(cols, full, kernel, dilation, (0,) * 3, stride, tuple(x.shape[2:]))
    else:
        y = fold(cols, full, kernel, dilation, 0, stride)
    crops = [a for p, o in zip(padding[::-1], output_padding[::-1], strict=True)
             for a in (-p, o - p)]  # (the last dim's (left, right) first, as pad takes them)
    if any(crops):
        y = pad(y, crops)
    if b is not None:
        y = y + b.reshape((1, out) + (1,) * len(full))
    return _unlifted(y, spatial, unbatched)


def _transpose_args(name, spatial, stride, padding, output_padding, dilation):
    """A transposed convolution's stride, padding, output_padding and dilation as tuples, each
    output_padding smaller than its stride or its dilation (torch's rule)."""
    stride, dilation = (_ints(stride, spatial, name, "stride"),
                        _ints(dilation, spatial, name, "dilation"))
    padding = _ints(padding, spatial, name, "padding", least=0)
    output_padding = _ints(output_padding, spatial, name, "output_padding", least=0)
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation, strict=True)):
        raise ValueError(f"{name}: output_padding {output_padding} must be smaller than either "
                         f"stride {stride} or dilation {dilation} in each dim, as in torch")
    return stride, padding, output_padding, dilation


def _check_conv_transpose(name, spatial, x, w, b, groups):
    """The input, weight (C_in, C_out / groups, *kernel), bias and groups of a transposed
    convolution fit together (as torch checks)."""
    _check_conv_dtypes(name, x, w, b, groups)
    if w.ndim != spatial + 2:
        raise ShapeError(f"{name}: weight must be (in_channels, out_channels / groups, "
                         f"{_KERNEL_DIMS[spatial]}), got {fmt_shape(w.shape)}")
    if x.shape[1] % groups:
        raise ShapeError(f"{name}: groups {groups} must divide the {x.shape[1]} channels of "
                         f"input {fmt_shape(x.shape)}")
    if x.shape[1] != w.shape[0]:
        raise ShapeError(f"{name}: input {fmt_shape(x.shape)} has {x.shape[1]} channels, but "
                         f"weight {fmt_shape(w.shape)} expects {w.shape[0]} (weight.shape[0])")
    out = w.shape[1] * groups
    if b is not None and tuple(b.shape) != (out,):
        raise ShapeError(f"{name}: bias {fmt_shape(b.shape)} must be {fmt_shape((out,))}, one "
                         f"per output channel (weight {fmt_shape(w.shape)} times groups {groups})")


def _pool_args(name, spatial, input, kernel_size, stride, padding, dilation, ceil_mode):  # noqa: A002
    """A pool's input as (N, C, H, W) (and whether it came unbatched) and its kernel, dilation,
    padding and stride as 2-d tuples, checked as torch checks them; the padding as (before,
    after) per dim, after grown with ceil_mode to hold torch's last, ragged window."""
    x, unbatched = _batched(_t(input), spatial, name)
    kernel, dilation, pads, stride = _window_args(name, spatial, kernel_size, dilation, padding,
                                                  stride)
    spans = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True))
    if any(2 * p > s for p, s in zip(pads, spans, strict=True)):
        raise ValueError(f"{name}: padding {pads} must be at most half of kernel_size {kernel}"
                         f" (dilation {dilation}), as in torch")
    x = x.reshape(x.shape[:2] + (1,) * (2 - spatial) + x.shape[2:])
    kernel, dilation, stride = _lifted(spatial, kernel, dilation, stride)
    pads = (0,) * (2 - spatial) + pads
    extras = [_ceil_extra(*a) if ceil_mode else 0
              for a in zip(x.shape[2:], kernel, dilation, pads, stride, strict=True)]
    return x, unbatched, (kernel, dilation, [(p, p + e) for p, e in zip(pads, extras,
                                                                         strict=True)], stride)


def _ceil_extra(n, k, d, p, s):
    """How far ceil_mode's last window reaches past the padded dim (n + 2p): torch rounds the
    number of windows up, but keeps a last window only if it starts inside the input or the
    left padding (a kernel larger than the padded input: 0, and _windows refuses it)."""
    span, room = d * (k - 1) + 1, n + 2 * p
    if room < span:
        return 0
    count = -(-(room - span) // s) + 1
    if (count - 1) * s >= n + p:
        count -= 1
    return max(0, (count - 1) * s + span - room)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """The largest entry of each window along the last dim of (N, C, L) (or (C, L)); padding
    never wins. return_indices: also each one's place in L (as torch's)."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """The largest entry of each kernel_size window of (N, C, H, W) (or (C, H, W)); stride
    defaults to kernel_size. The gradient goes to the first largest entry, as torch's.
    return_indices: also each one's place in H*W. ceil_mode: the number of windows rounded up,
    a last window that runs past the end kept if it starts inside the input or the left
    padding (torch's rule; also for the other pools)."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """The largest entry of each kernel_size window of (N, C, D, H, W) (or (C, D, H, W)), as
    max_pool2d's; return_indices: also each one's place in D*H*W."""
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def _max_pool(name, spatial, input, kernel_size, stride, padding, dilation, ceil_mode,  # noqa: A002
              return_indices):
    x, unbatched, (kernel, dilation, pads, stride) = _pool_args(
        name, spatial, input, kernel_size, stride, padding, dilation, ceil_mode)
    lowest = np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -math.inf
    w = _windows(x, kernel, dilation, stride, pads, name, value=lowest)
    sizes = w.shape[:2 + len(kernel)]  # (N, C, oh, ow) or (N, C, od, oh, ow)
    y, picked = w.reshape(sizes + (math.prod(kernel),)).max(-1)
    if not return_indices:
        return _unlifted(y, spatial, unbatched)
    nd = len(kernel)
    starts = [_fresh((np.arange(m) * s - p).reshape((1,) * i + (m,) + (1,) * (nd - 1 - i)),
                     backend=x.backend)
              for i, (m, s, (p, _)) in enumerate(zip(sizes[2:], stride, pads, strict=True))]
    where = _values("max_pool_indices", _pool_places, picked, *starts, kernel=kernel,
                    dilation=dilation, size=tuple(x.shape[2:]))
    return _unlifted(y, spatial, unbatched), _unlifted(where, spatial, unbatched)


def _pool_places(picked, *starts, kernel, dilation, size):
    """The place in the input's H*W (or D*H*W) of each window's picked offset (row-major in
    the window), each window starting at `starts` (one array per dim)."""
    place, scale, rest = 0, 1, picked
    for start, k, d, n in reversed(list(zip(starts, kernel, dilation, size, strict=True))):
        place = place + (start + rest % k * d) * scale
        rest, scale = rest // k, scale * n
    return place


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    """The mean of each window along the last dim of (N, C, L) (or (C, L)); count_include_pad:
    the zero padding counts in the mean (else only the input's own entries)."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """The mean of each kernel_size window of (N, C, H, W) (or (C, H, W)); stride defaults to
    kernel_size. count_include_pad: the zero padding counts in the mean (what ceil_mode's last
    window has past the padding never does); divisor_override: each window's sum is divided by
    it instead."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """The mean of each kernel_size window of (N, C, D, H, W) (or (C, D, H, W)); the rest as
    avg_pool2d's."""
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def _avg_pool(name, spatial, input, kernel_size, stride, padding, ceil_mode,  # noqa: A002
              count_include_pad, divisor_override):
    x, unbatched, (kernel, dilation, pads, stride) = _pool_args(
        name, spatial, input, kernel_size, stride, padding, 1, ceil_mode)
    _floating(x, name)
    if divisor_override is not None and divisor_override == 0:
        raise ValueError(f"{name}: divisor_override must not be 0")
    w = _windows(x, kernel, dilation, stride, pads, name)
    total = w.sum(tuple(range(-len(kernel), 0)))
    if divisor_override is not None:
        return _unlifted(total / divisor_override, spatial, unbatched)
    return _unlifted(total / _avg_divisor(total, x, kernel, stride, pads, count_include_pad),
                     spatial, unbatched)


def _avg_divisor(total, x, kernel, stride, pads, count_include_pad):
    """torch's divisor of each window's sum: the window's size within the padded input (only
    ceil_mode's last window is cut short), or without count_include_pad its size within the
    input itself; a plain number where every window has the kernel's size."""
    counts = []
    for m, s, (p, _), k, n in zip(total.shape[2:], stride, pads, kernel, x.shape[2:],
                                  strict=True):
        start = np.arange(m) * s - p
        end = np.minimum(start + k, n + p)
        counts.append(end - start if count_include_pad else
                      np.minimum(end, n) - np.maximum(start, 0))
    divisor = counts[0]
    for count in counts[1:]:
        divisor = np.multiply.outer(divisor, count)
    if (divisor == math.prod(kernel)).all():
        return math.prod(kernel)
    return _fresh(divisor.astype(x.dtype), backend=x.backend)


def adaptive_avg_pool1d(input, output_size):  # noqa: A002 - torch's name
    """The mean over each of output_size windows of (N, C, L) (or (C, L)), torch's windows:
    the i-th from floor(i L / out) to ceil((i + 1) L / out) (they overlap where out does not
    divide L)."""
    return _adaptive_avg_pool("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):  # noqa: A002 - torch's name
    """The mean over each of output_size (oh, ow) windows of (N, C, H, W) (or (C, H, W)); None
    keeps that dim's size. The windows per dim are adaptive_avg_pool1d's."""
    return _adaptive_avg_pool("adaptive_avg_pool2d", 2, input, output_size)


def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    """The largest entry of each of adaptive_avg_pool1d's windows of (N, C, L) (or (C, L));
    return_indices: also each one's place in L. The gradient goes to the first largest."""
    return _adaptive_max_pool("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    """The largest entry of each of adaptive_avg_pool2d's windows of (N, C, H, W) (or
    (C, H, W)), the first in row-major order on a tie, as torch's; return_indices: also each
    one's place in H*W."""
    return _adaptive_max_pool("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_avg_pool3d(input, output_size):  # noqa: A002 - torch's name
    """The mean over each of output_size (od, oh, ow) windows of (N, C, D, H, W) (or
    (C, D, H, W)); None keeps that dim's size. The windows per dim are adaptive_avg_pool1d's."""
    return _adaptive_avg_pool("adaptive_avg_pool3d", 3, input, output_size)


def adaptive_max_pool3d(input, output_size, return_indices=False):  # noqa: A002
    """The largest entry of each of adaptive_avg_pool3d's windows of (N, C, D, H, W) (or
    (C, D, H, W)), the first in row-major order on a tie; return_indices: also each one's place
    in D*H*W."""
    return _adaptive_max_pool("adaptive_max_pool3d", 3, input, output_size, return_indices)


def _adaptive_args(name, spatial, input, output_size):  # noqa: A002
    """The input as (N, C, H, W) (a 1-d one with H = 1), whether it came unbatched, and the
    output size as 2 ints (None: the input's own size)."""
    x, unbatched = _batched(_t(input), spatial, name)
    given = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * spatial
    if len(given) != spatial:
        raise ValueError(f"{name}: output_size must be an int or {spatial} ints (or None), got "
                         f"{output_size!r}")
    size = _ints(tuple(n if s is None else s for s, n in zip(given, x.shape[2:], strict=True)),
                 spatial, name, "output_size")
    x = x.reshape(x.shape[:2] + (1,) * (2 - spatial) + x.shape[2:])
    return x, unbatched, _lifted(spatial, size)[0]


def _adaptive_windows(n, m):
    """torch's m windows along a dim of n, [floor(i n / m), ceil((i + 1) n / m)): (m, K) places
    of each window's entries (n, a padding slot, past its end) and (m,) their sizes."""
    start = np.arange(m) * n // m
    size = -(-(np.arange(m) + 1) * n // m) - start
    offsets = np.arange(size.max())[None, :]
    return np.where(offsets < size[:, None], start[:, None] + offsets, n), size


def _adaptive_gather(x, size, fill):
    """Every adaptive window of x (N, C, H, W) (or (N, C, D, H, W)): (N, C, oh, ow, K), entries
    in row-major order with `fill` past each window's end; the (oh, ow, K) places in H*W (H*W
    for a fill) and the (oh, ow) window sizes (with a depth: od first, places in D*H*W)."""
    dims, nd, total = x.shape[2:], len(size), math.prod(x.shape[2:])
    places, outside, counts, scale = 0, False, 1, total
    for i, (n, m) in enumerate(zip(dims, size, strict=True)):
        windows, count = _adaptive_windows(n, m)  # (m, K) places along dim i, (m,) sizes
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = windows.shape
        windows, scale = windows.reshape(shape), scale // n
        places, outside = places + windows * scale, outside | (windows == n)
        counts = np.multiply.outer(counts, count) if i else count
    places = np.where(outside, total, places).reshape(tuple(size) + (-1,))
    flat = x.reshape(x.shape[:2] + (total,))
    flat = cat([flat, _full(flat, 2, 1, fill)], dim=2)
    picked = flat.index_select(2, places.reshape(-1)).reshape(x.shape[:2] + places.shape)
    return picked, places, counts


def _adaptive_avg_pool(name, spatial, input, output_size):  # noqa: A002
    x, unbatched, size = _adaptive_args(name, spatial, input, output_size)
    _floating(x, name)
    if not any(n % m for n, m in zip(x.shape[2:], size, strict=True)):
        # (equal windows, side by side: a reshape)
        split = tuple(a for n, m in zip(x.shape[2:], size, strict=True) for a in (m, n // m))
        y = x.reshape(x.shape[:2] + split).mean(tuple(range(3, 2 + len(split), 2)))
        return _unlifted(y, spatial, unbatched)
    windows, _, counts = _adaptive_gather(x, size, 0.0)
    y = windows.sum(-1) / _fresh(counts.astype(x.dtype), backend=x.backend)
    return _unlifted(y, spatial, unbatched)


def _adaptive_max_pool(name, spatial, input, output_size, return_indices):  # noqa: A002
    x, unbatched, size = _adaptive_args(name, spatial, input, output_size)
    lowest = np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -math.inf
    windows, places, _ = _adaptive_gather(x, size, lowest)
    y, picked = windows.max(-1)
    if not return_indices:
        return _unlifted(y, spatial, unbatched)
    k = places.shape[-1]
    where = _values("adaptive_max_pool_indices", _adaptive_places, picked,
                    _fresh(places.reshape(-1), backend=x.backend),
                    _fresh(np.arange(math.prod(size)).reshape(size) * k, backend=x.backend))
    return _unlifted(y, spatial, unbatched), _unlifted(where, spatial, unbatched)


def _adaptive_places(picked, places, first):
    """The place in H*W of each window's picked entry: places (flat) at the window's first
    entry `first` plus the picked offset."""
    return places[first + picked]


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
                            ceil_mode=False, return_indices=False):
    """(values, indices) of max_pool1d, always (torch's alias ignores return_indices)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
                            ceil_mode=False, return_indices=False):
    """(values, indices) of max_pool2d, always (torch's alias ignores return_indices)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
                            ceil_mode=False, return_indices=False):
    """(values, indices) of max_pool3d, always (torch's alias ignores return_indices)."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """(values, indices) of adaptive_max_pool1d, always."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """(values, indices) of adaptive_max_pool2d, always."""
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """(values, indices) of adaptive_max_pool3d, always."""
    return adaptive_max_pool3d(input, output_size, True)


# ---- power-average pooling and max unpooling ---------------------------------------------------
# Both composites: lp_pool of avg_pool (or max_pool for p = +-inf), max_unpool a scatter into
# zeros (its gradient, a gather at the indices, is scatter's).


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """(sum of x^p over each window along L) ^ (1/p) of (N, C, L) (or (C, L)), torch's
    formula: avg_pool1d of x^p, times the kernel's size, a negative sum's root nan and a zero
    sum's gradient 0; p = inf (-inf): the largest (smallest) |x| of each window."""
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """lp_pool1d's power average over each kernel_size window of (N, C, H, W) (or (C, H, W))."""
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """lp_pool1d's power average over each kernel_size window of (N, C, D, H, W) (or
    (C, D, H, W))."""
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


def _lp_pool(spatial, input, norm_type, kernel_size, stride, ceil_mode):  # noqa: A002
    x = _t(input)
    max_pool_nd, avg_pool_nd = (_LP_POOLS[spatial - 1])
    if norm_type == math.inf:
        return max_pool_nd(x.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -max_pool_nd(-x.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool_nd(x.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    size = math.prod(_ints(kernel_size, spatial, f"lp_pool{spatial}d", "kernel_size"))
    # torch's (sign(out) relu(|out|) size) ^ (1/p): a zero sum gives 0 and a zero gradient
    # (there 1 stands in for it, so no infinite slope is ever multiplied by 0), a negative one
    # nan (a fractional power of it)
    zero = out == 0
    root = where(zero, 1.0, out * size).pow(1.0 / norm_type)
    return where(zero, 0.0, root)


_LP_POOLS = ((max_pool1d, avg_pool1d), (max_pool2d, avg_pool2d), (max_pool3d, avg_pool3d))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """max_pool1d's partial inverse: zeros of (N, C, L_out) (or (C, L_out)) with each entry of
    input put at its index (max_pool1d's return_indices); L_out (L_in - 1) stride + kernel - 2
    padding, or output_size (L_out), (N, C, L_out), within a stride of it."""
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """max_pool2d's partial inverse: each entry of (N, C, H, W) (or (C, H, W)) put at its place
    in the H_out*W_out plane of its channel, zeros elsewhere (as max_unpool1d's)."""
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """max_pool3d's partial inverse: each entry of (N, C, D, H, W) (or (C, D, H, W)) put at its
    place in the D_out*H_out*W_out volume of its channel, zeros elsewhere."""
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


def _max_unpool(spatial, input, indices, kernel_size, stride, padding, output_size):  # noqa: A002
    name = f"max_unpool{spatial}d"
    x, where = _t(input), _t(indices)
    kernel = _ints(kernel_size, spatial, name, "kernel_size")
    stride = kernel if stride is None else _ints(stride, spatial, name, "stride")
    pads = _ints(padding, spatial, name, "padding", least=0)
    size = _unpool_size(x, kernel, stride, pads, output_size)
    _check_unpool(name, spatial, x, where)
    unbatched = x.ndim == spatial + 1
    if unbatched:
        x, where = x.unsqueeze(0), where.unsqueeze(0)
    n, c = x.shape[:2]
    flat = where.reshape(n, c, -1)
    if flat.numel():
        low, high = int(flat._data.min()), int(flat._data.max())
        bad = low if low < 0 else high if high >= math.prod(size) else None
        if bad is not None:
            raise ShapeError(f"{name}: Found an invalid max index: {bad} (output volumes are of "
                             f"size {'x'.join(map(str, size))})")
    out = full((n, c, math.prod(size)), 0, dtype=x.dtype, backend=x.backend)
    out = out.scatter(2, flat, x.reshape(n, c, -1)).reshape((n, c) + tuple(size))
    return out.squeeze(0) if unbatched else out


def _unpool_size(x, kernel, stride, pads, output_size):
    """torch's _unpool_output_size: the pooled input's size inverted, or output_size (its last
    len(kernel) entries) checked to lie strictly within a stride of it."""
    nd = len(kernel)
    default = [(n - 1) * s + k - 2 * p
               for n, k, s, p in zip(x.shape[-nd:], kernel, stride, pads, strict=True)]
    if output_size is None:
        size = default
    else:
        size = list(output_size)
        if len(size) == nd + 2:
            size = size[2:]
        if len(size) != nd:
            raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} "
                             f"elements, but it has a length of '{len(size)}'")
        for d, (want, s) in enumerate(zip(default, stride, strict=True)):
            if not want - s < size[d] < want + s:
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                                 f"{want - s} and {want + s})")
    if min(size) < 0:
        raise ValueError(f"max_unpooling: output_size must contain non-negative spatial "
                         f"dimensions, but got output_size {tuple(size)}")
    return tuple(int(n) for n in size)


def _check_unpool(name, spatial, x, where):
    """torch's refusals: (C, *) or (N, C, *) input, int64 indices of the input's shape."""
    if x.ndim not in (spatial + 1, spatial + 2):
        lifted = max(spatial, 2)  # (max_unpool1d runs max_unpool2d, as torch's)
        got = x.ndim + (spatial == 1)
        raise ShapeError(f"Input to max_unpooling{lifted}d should be a {lifted + 1}d or "
                         f"{lifted + 2}d Tensor, but got a tensor with {got} dimensions.")
    if where.dtype != np.int64:
        raise ShapeError(f"{name}: elements in indices should be type int64 but got: "
                         f"{where.dtype}")
    if tuple(where.shape) != tuple(x.shape):
        raise ShapeError(f"{name}: Expected shape of indices to be same as that of the input "
                         f"tensor ({list(x.shape)}) but got indices tensor with shape: "
                         f"{list(where.shape)}")
    _floating(x, name)


# ---- resampling: interpolate and upsample ------------------------------------------------------
# Each spatial dim in turn (separable, as torch's kernels: the last dim innermost): nearest
# modes pick one source place per output place (index_select), the linear modes two with
# weights; torch's source places (its area_pixel_compute_scale / _source_index rules, in its
# opmath type: float32 below float64) are computed here in NumPy, so the values agree exactly.

_LINEAR_DIMS = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}
_INTERP_MODES = ("nearest", "nearest-exact", "area", "linear", "bilinear", "trilinear", "bicubic")
_CUBIC_A = -0.75  # torch's cubic convolution coefficient


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of (N, C, L), (N, C, H, W) or (N, C, D, H, W) to `size`, or by
    `scale_factor` (the size floor(n * factor)), as torch's: mode "nearest" (source place
    floor(i * scale), torch's legacy rule), "nearest-exact" (floor((i + 0.5) * scale)),
    "linear" (3-D) / "bilinear" (4-D) / "trilinear" (5-D) with align_corners (False: pixel
    centres, torch's default; True: corner pixels line up), "bicubic" (4-D: Keys' cubic
    convolution with a = -0.75 over 4 taps per dim, the edge pixels repeated; it overshoots,
    as torch's: no clamp), or "area" (adaptive_avg_pool, 3-D and 4-D). scale is
    1 / scale_factor when one is given (unless recompute_scale_factor=True), else in / out.
    Gradients flow through the gathers. Not supported, and refused by name: antialias=True."""
    x = _t(input)
    align_corners = _interp_align(mode, align_corners)
    sizes, scales = _interp_sizes(x, size, scale_factor, recompute_scale_factor, mode)
    _interp_mode_fits(x, mode, antialias)
    if any(n < 1 for n in x.shape[2:]) or any(m < 1 for m in sizes):
        raise ShapeError(f"interpolate: input and output sizes should be greater than 0, got "
                         f"input {fmt_shape(x.shape)} and output size {fmt_shape(sizes)}")
    if mode == "area":
        pool = adaptive_avg_pool1d if x.ndim == 3 else adaptive_avg_pool2d
        return pool(x, sizes)
    if mode in _LINEAR_DIMS:
        _floating(x, f"interpolate (mode {mode!r})")
    for k in reversed(range(x.ndim - 2)):  # (the last dim first: torch's innermost)
        x = _resample(x, 2 + k, sizes[k], scales[k], mode, align_corners)
    return x


def _interp_align(mode, align_corners):
    """align_corners as torch: only for the interpolating modes (default False there)."""
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError(f"interpolate: align_corners can only be set with the "
                             f"interpolating modes (linear, bilinear, trilinear), not mode "
                             f"{mode!r}")
        return False
    return bool(align_corners)


def _interp_sizes(x, size, scale_factor, recompute_scale_factor, mode):
    """The output size of each spatial dim, and the scale factor (or None) torch's kernel is
    given for it: none where the size was given or recompute_scale_factor (area's default)."""
    dim, given = x.ndim - 2, fmt_shape(x.shape)
    if (size is None) == (scale_factor is None):
        raise ValueError(f"interpolate: give exactly one of size or scale_factor (input "
                         f"{given}), got size={size!r}, scale_factor={scale_factor!r}")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("interpolate: recompute_scale_factor is not meaningful with an "
                             "explicit size")
        sizes = _per_spatial_dim(size, dim, given, "size")
        if not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in sizes):
            raise DTypeError(f"interpolate: size must be ints, got {size!r}")
        return tuple(int(n) for n in sizes), (None,) * dim
    factors = tuple(float(f) for f in _per_spatial_dim(scale_factor, dim, given,
                                                       "scale_factor"))
    sizes = tuple(int(n * f) for n, f in zip(x.shape[2:], factors, strict=True))
    recompute = recompute_scale_factor or mode == "area"
    return sizes, (None,) * dim if recompute else factors


def _per_spatial_dim(value, dim, given, what):
    """size or scale_factor as one entry per spatial dim (one number: repeated)."""
    if not isinstance(value, (tuple, list)):
        return (value,) * dim
    if len(value) != dim:
        raise ValueError(f"interpolate: input {given} has {dim} spatial dims, but {what} "
                         f"{tuple(value)} has {len(value)} (give (N, C, d1, ..., dK) and K "
                         "entries)")
    return tuple(value)


def _interp_mode_fits(x, mode, antialias):
    """The mode fits the input's dims (torch's NotImplementedError otherwise); antialias is
    refused by name."""
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by tinyattn")
    if mode not in _INTERP_MODES:
        raise NotImplementedError(f"interpolate: mode must be one of {', '.join(_INTERP_MODES)}"
                                  f", got {mode!r}")
    if x.ndim not in (3, 4, 5) or (mode == "area" and x.ndim == 5):
        raise NotImplementedError(f"interpolate: only 3-D, 4-D and 5-D inputs (N, C, ...) are "
                                  f"supported (area: 3-D and 4-D), got {fmt_shape(x.shape)}")
    if _LINEAR_DIMS.get(mode, x.ndim) != x.ndim:
        raise NotImplementedError(f"interpolate: got {x.ndim}-D input {fmt_shape(x.shape)}, "
                                  f"but {mode} mode needs {_LINEAR_DIMS[mode]}-D input")


def _resample(x, axis, m, scale, mode, align_corners):
    """x resized to m entries along axis (mode "nearest", "nearest-exact", linear or
    bicubic): each output place a weighted sum of gathered source places."""
    n = x.shape[axis]
    opmath = np.float64 if x.dtype == np.float64 else np.float32  # (torch's opmath_type)
    if mode.startswith("nearest"):
        return x.index_select(axis, _nearest_places(n, m, scale, mode == "nearest-exact",
                                                    opmath))
    places = _cubic_places if mode == "bicubic" else _linear_places
    taps = places(n, m, scale, align_corners, opmath)
    shape = [1] * x.ndim
    shape[axis] = m
    out = None
    for where, w in taps:
        term = x.index_select(axis, where) * _fresh(w.astype(x.dtype).reshape(shape),
                                                    backend=x.backend)
        out = term if out is None else out + term
    return out


def _interp_scale(n, m, scale, align_corners, opmath):
    """torch's area_pixel_compute_scale, in opmath: (n - 1) / (m - 1) with align_corners,
    else 1 / scale_factor if one was given, else n / m."""
    if align_corners:
        return opmath(n - 1) / opmath(m - 1) if m > 1 else opmath(0)
    if scale is not None and scale > 0:
        return opmath(1.0 / scale)
    return opmath(n) / opmath(m)


def _source_index(n, m, scale, align_corners, opmath):
    """torch's area_pixel_compute_source_index for each output place: scale * i with
    align_corners, else scale * (i + 0.5) - 0.5, at least 0."""
    i = np.arange(m).astype(opmath)
    if align_corners:
        return scale * i
    return np.maximum(scale * (i + opmath(0.5)) - opmath(0.5), opmath(0))


def _nearest_places(n, m, scale, exact, opmath):
    """The source place of each of m output places: floor(i * scale) ("nearest") or
    floor((i + 0.5) * scale) ("nearest-exact"), floored in float32 as torch's floorf, at most
    n - 1."""
    scale = _interp_scale(n, m, scale, False, opmath)
    if exact:
        where = _source_index(n, m, scale, False, opmath).astype(np.float64) + 0.5
    else:
        where = scale * np.arange(m).astype(opmath)
    return np.minimum(np.floor(where.astype(np.float32)).astype(np.int64), n - 1)


def _linear_places(n, m, scale, align_corners, opmath):
    """The two source places of each of m output places and their weights (torch's
    compute_source_index_and_lambda; m == n copies)."""
    if m == n:
        same = np.arange(n)
        return ((same, np.ones(n, opmath)),)
    real = _source_index(n, m, _interp_scale(n, m, scale, align_corners, opmath), align_corners,
                         opmath)
    first = np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), n - 1)
    lam = np.clip(real - first.astype(opmath), 0, 1).astype(opmath)
    second = first + (first < n - 1)
    return (first, (opmath(1) - lam).astype(opmath)), (second, lam)


def _cubic_places(n, m, scale, align_corners, opmath):
    """The four source places of each of m output places (floor(real) - 1 ... + 2, clamped to
    the edges) and their weights: Keys' cubic convolution (a = -0.75) at the distances, as
    torch's upsample_bicubic2d (the source place not clamped at 0 before the floor; m == n
    copies)."""
    if m == n:
        same = np.arange(n)
        return ((same, np.ones(n, opmath)),)
    step = _interp_scale(n, m, scale, align_corners, opmath)
    i = np.arange(m).astype(opmath)
    real = step * i if align_corners else step * (i + opmath(0.5)) - opmath(0.5)
    base = np.floor(real)
    t = (real - base).astype(opmath)
    a = opmath(_CUBIC_A)

    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    weights = (far(t + 1), near(t), near(1 - t), far(2 - t))
    base = base.astype(np.int64)
    return tuple((np.clip(base - 1 + k, 0, n - 1), w.astype(opmath))
                 for k, w in enumerate(weights))


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    """interpolate, under torch's deprecated name (with its warning)."""
    warn_user("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    """interpolate(mode="nearest"), under torch's deprecated name (with its warning)."""
    warn_user("`nn.functional.upsample_nearest` is deprecated. Use "
              "`nn.functional.interpolate` instead.")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    """interpolate(mode="bilinear", align_corners=True), under torch's deprecated name (with
    its warning)."""
    warn_user("`nn.functional.upsample_bilinear` is deprecated. Use "
              "`nn.functional.interpolate` instead.")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- pixel and channel shuffles ----------------------------------------------------------------


def pixel_shuffle(input, upscale_factor):  # noqa: A002 - torch's name
    """(*, C r², H, W) -> (*, C, H r, W r): each group of r² channels spread over an r x r
    block of pixels, as torch's (sub-pixel convolution's upsampling)."""
    x, r = _t(input), _shuffle_factor(upscale_factor, "pixel_shuffle", "upscale_factor")
    _at_least_3d(x, "pixel_shuffle")
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise ShapeError(f"pixel_shuffle: the channel dim (-3) of input {fmt_shape(x.shape)} "
                         f"must be divisible by upscale_factor² = {r * r}, got {c}")
    n = len(lead)
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    y = y.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return _fresh_result(y.reshape(*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):  # noqa: A002 - torch's name
    """(*, C, H r, W r) -> (*, C r², H, W): pixel_shuffle's inverse."""
    x, r = _t(input), _shuffle_factor(downscale_factor, "pixel_unshuffle", "downscale_factor")
    _at_least_3d(x, "pixel_unshuffle")
    *lead, c, h, w = x.shape
    if h % r or w % r:
        raise ShapeError(f"pixel_unshuffle: the height and width (dims -2, -1) of input "
                         f"{fmt_shape(x.shape)} must be divisible by downscale_factor {r}")
    n = len(lead)
    y = x.reshape(*lead, c, h // r, r, w // r, r)
    y = y.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return _fresh_result(y.reshape(*lead, c * r * r, h // r, w // r))


def channel_shuffle(input, groups):  # noqa: A002 - torch's name
    """(N, C, *) with its channels regrouped (ShuffleNet's): the channels as (groups,
    C / groups), transposed, flattened again."""
    x = _t(input)
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1:
        raise ShapeError(f"channel_shuffle: the number of groups must be a positive int, got "
                         f"{groups!r}")
    _at_least_3d(x, "channel_shuffle")
    n, c, *rest = x.shape
    if c % groups:
        raise ShapeError(f"channel_shuffle: the {c} channels of input {fmt_shape(x.shape)} must "
                         f"be divisible by groups {groups}")
    y = x.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return _fresh_result(y.reshape(x.shape))


def _shuffle_factor(r, name, what):
    if isinstance(r, bool) or not isinstance(r, numbers.Integral) or r < 1:
        raise ShapeError(f"{name}: {what} must be a positive int, got {r!r}")
    return int(r)


def _at_least_3d(x, name):
    if x.ndim < 3:
        raise ShapeError(f"{name}: expects input with at least 3 dims, got {fmt_shape(x.shape)}")


def _fresh_result(y):
    """y as new memory (a reshape that could stay a view, as for one group, is copied), as
    torch's results."""
    return y.clone() if y._is_view() else y


# ---- instance norm, channel dropout ------------------------------------------------------------


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,  # noqa: A002
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalize each channel of each sample (N, C, *) over its spatial dims, then scale and
    shift each channel (weight and bias: (C,)). use_input_stats: by the sample's own mean and
    biased variance, and running_mean / running_var (if given) move toward their averages over
    the batch by momentum in place (the variance unbiased), as torch's; else by the running
    statistics."""
    x = _t(input)
    weight, bias = (None if a is None else _t(a, x) for a in (weight, bias))
    _check_instance_norm(x, running_mean, running_var, weight, bias, use_input_stats)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if use_input_stats:
        dims = tuple(range(2, x.ndim))
        mean, var = x.mean(dims, keepdim=True), x.var(dims, keepdim=True, correction=0)
        n = math.prod(x.shape[2:])
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean.mean(0).reshape(-1) * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(var.mean(0).reshape(-1)
                                                    * (momentum * n / (n - 1)))
    else:
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    return _channel_affine((x - mean) / (var + eps).sqrt(), weight, bias, shape, x.dtype)


def _check_instance_norm(x, running_mean, running_var, weight, bias, use_input_stats):
    """instance_norm's input and sizes, all before the running statistics move in place."""
    _floating(x, "instance_norm")
    if x.ndim < 2:
        raise ShapeError(f"instance_norm: expected input (N, C, ...), got {fmt_shape(x.shape)}")
    if use_input_stats and math.prod(x.shape[2:]) == 1:
        raise ShapeError(f"instance_norm: expected more than 1 spatial element when training, "
                         f"got input {fmt_shape(x.shape)}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise ValueError("instance_norm: without use_input_stats, give running_mean and "
                         "running_var")
    c = x.shape[1]
    for what, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and t.numel() != c:
            raise ShapeError(f"instance_norm: {what} should contain {c} elements (one per "
                             f"channel of input {fmt_shape(x.shape)}), not {t.numel()}")
    _norm_params_dtype("instance_norm", x, weight=weight, bias=bias, running_mean=running_mean,
                       running_var=running_var)


def dropout1d(input, p=0.5, training=True, inplace=False):  # noqa: A002 - torch's names
    """Zero whole channels of (N, C, L) (or (C, L)), each with probability p, and scale the
    rest by 1/(1-p); the identity if not training (torch's feature dropout)."""
    x = _t(input)
    nn_ops.check_dropout_p(p)
    if x.ndim not in (2, 3):
        raise ShapeError(f"dropout1d: expected 2-D or 3-D input ((C, L) or (N, C, L)), got "
                         f"{fmt_shape(x.shape)}")
    return _feature_dropout(x, p, training, inplace, batched=x.ndim == 3)


def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002 - torch's names
    """Zero whole channels of (N, C, H, W), each with probability p, and scale the rest by
    1/(1-p); the identity if not training. As torch's: 3-D input is taken as (N, C, L) (with
    its warning), other dims warned about and dropped by channel (dim 1) all the same."""
    x = _t(input)
    nn_ops.check_dropout_p(p)
    if x.ndim not in (3, 4):
        warn_user(f"dropout2d: Received a {x.ndim}-D input to dropout2d, which is deprecated "
                  "and will result in an error in a future release. To retain the behavior "
                  "and silence this warning, please use dropout instead.")
    if x.ndim == 3:
        warn_user("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                  "1D dropout behavior is desired - input is interpreted as shape (N, C, L). "
                  "To maintain the 1D channel-wise dropout behavior, please switch to using "
                  "dropout1d instead.")
    return _feature_dropout(x, p, training, inplace, batched=True)


def dropout3d(input, p=0.5, training=True, inplace=False):  # noqa: A002 - torch's names
    """Zero whole channels of (N, C, D, H, W) (or (C, D, H, W)), each with probability p, and
    scale the rest by 1/(1-p); the identity if not training. As torch's: other dims warned
    about and taken as unbatched (channels along dim 0)."""
    x = _t(input)
    nn_ops.check_dropout_p(p)
    if x.ndim not in (4, 5):
        warn_user(f"dropout3d: Received a {x.ndim}-D input to dropout3d, which is deprecated "
                  "and will result in an error in a future release. To retain the behavior "
                  "and silence this warning, please use dropout instead.")
    return _feature_dropout(x, p, training, inplace, batched=x.ndim == 5)


def _feature_dropout(x, p, training, inplace, batched):
    """x times a mask of 0 or 1/(1-p) per channel (dim 1, or dim 0 unbatched), the same over
    the other dims."""
    if not _flag("dropout", "training", training) or p == 0 or x.numel() == 0:
        return x
    lead = 2 if batched else 1
    shape = x.shape[:lead] + (1,) * (x.ndim - lead)
    with no_grad():
        mask = dropout(full(shape, 1, dtype=x.dtype, backend=x.backend), p)
    return x.mul_(mask) if inplace else x * mask


_SELU_SATURATION = 1.7580993408473766  # -SELU's scale * alpha: what SELU tends to at -inf, negated


def alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002 - torch's names
    """SELU's dropout: each entry dropped with probability p to SELU's saturation value, then
    an affine map that keeps a zero mean and unit variance (torch's: kept x -> a x + a α p,
    dropped -> -a α (1 - p), a = ((α² p + 1)(1 - p))^-1/2, α = 1.7581). The identity if not
    training (torch's default here: training=False)."""
    x = _t(input)
    nn_ops.check_dropout_p(p)
    return _alpha_dropout(x, p, training, inplace, x.shape, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """alpha_dropout by whole channels: one draw per (N, C) entry of (N, C, ...), the same over
    the other dims (2-D input: one per entry, as torch's)."""
    x = _t(input)
    nn_ops.check_dropout_p(p)
    name = "feature_alpha_dropout"
    if training and p > 0 and x.numel() and x.ndim < 2:
        raise ShapeError(f"{name}: feature dropout requires at least 2 dimensions in the input "
                         f"(N, C, ...), got {fmt_shape(x.shape)}")
    return _alpha_dropout(x, p, training, inplace, x.shape[:2] + (1,) * (x.ndim - 2), name)


def _alpha_dropout(x, p, training, inplace, noise_shape, name):
    """x * noise * a + b, noise 1 (kept) or 0 (dropped) drawn over noise_shape (torch's
    arithmetic, in this order); the gradient is a where kept, 0 where dropped."""
    if not _flag(name, "training", training) or p == 0 or x.numel() == 0:
        return x
    if p == 1:
        return x.mul_(0) if inplace else x * 0
    if x.dtype.kind != "f":
        raise _NeedsFloatError(f"{name}: needs a floating-point input, got {x.dtype}; convert "
                               "it with .float()")
    with no_grad():
        noise = (dropout(full(noise_shape, 1, dtype=x.dtype, backend=x.backend), p) != 0)\
            .to(x.dtype)
        a = 1 / math.sqrt((_SELU_SATURATION ** 2 * p + 1) * (1 - p))
        b = (noise - 1) * (_SELU_SATURATION * a) + _SELU_SATURATION * a * p
        noise = noise * a
    return x.mul_(noise).add_(b) if inplace else x * noise + b


# torch's keyword names: input= for the tensor (softmax(input=x)), where(condition, input=,
# other=), matmul(input=, other=), scaled_dot_product_attention(query=, key=, value=), and
# NumPy's axis= and keepdims= (cat(xs, axis=0))
_take_torch_keywords(globals(), {"where": {"input": "x", "other": "y"},
                                 "matmul": {"input": "a", "other": "b"},
                                 "scaled_dot_product_attention": {"query": "q", "key": "k",
                                                                  "value": "v"}}, first="x")

# the spatial ops, from their own module (which imports nothing of this one: no cycle)
from .functional_spatial import (  # noqa: E402 - after this module's own names
    affine_grid,
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
    grid_sample,
)

__all__ += ["affine_grid", "grid_sample", "fractional_max_pool2d", "fractional_max_pool3d",
            "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices"]

# multi-head attention as one function, and conv_tbc, from their own module (which imports
# nothing of this one: no cycle); native_channel_shuffle is channel_shuffle, as in torch
from .functional_more import (  # noqa: E402
    _linear_logits,
    conv_tbc,
    multi_head_attention_forward,
)

native_channel_shuffle = channel_shuffle

__all__ += ["multi_head_attention_forward", "conv_tbc", "native_channel_shuffle"]
