"""nn.utils: gradient clipping and parameter vectors with PyTorch's names (and nn.utils.rnn's
padding and packing, in rnn.py; parametrize.py and parametrizations.py: torch's
parametrizations, weight_norm and spectral_norm among them; hook_norms.py: the older
forward-pre-hook weight_norm / spectral_norm and their remove_*, here as torch has them;
prune.py: torch's pruning; fusion.py: conv / linear + batch norm folded into one layer;
init.py: skip_init).

clip_grad_norm_ scales every gradient by one factor so that their joint norm is at most
max_norm, and returns that norm (before clipping) as a tensor; it is get_total_norm of the
gradients followed by clip_grads_with_norm_. clip_grad_value_ clamps each gradient entry to
[-clip_value, clip_value]. All of them change `.grad` in place. parameters_to_vector and
vector_to_parameters flatten parameters into one vector and back.
(`foreach` is accepted for torch's signatures; one loop serves both settings here.)
"""

import math

from ...autograd import bump_version, no_grad
from ...errors import GraphError, ShapeError, fmt_shape, warn_user
from ...ops.op import quiet
from ...tensor import Tensor, _real
from . import fusion, parametrizations, parametrize, prune, rnn  # noqa: F401 (torch's modules)
from .fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from .hook_norms import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm
from .init import skip_init

__all__ = ["rnn", "parametrize", "parametrizations", "clip_grad_norm", "clip_grad_norm_",
           "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters",
           "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm",
           "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "skip_init"]


def _tensors(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _with_grads(parameters):
    return [p for p in _tensors(parameters) if p.grad is not None]


def _norm(xp, a, p):
    """torch.linalg.vector_norm of an array taken as one vector: p = inf is the largest |entry|,
    -inf the smallest, 0 the count of entries that are not 0, else (Σ |entry|^p)^(1/p).
    (The caller casts the result to the gradients' dtype.) float16 is summed in float32, as
    torch accumulates it: 300² would overflow float16, and an inf norm zeroes the clipped grads."""
    if a.size == 0:
        return 0.0
    if a.dtype.kind == "f" and a.dtype.itemsize < 4:
        a = a.astype(xp.float32)
    if p == math.inf:
        return xp.abs(a).max()
    if p == -math.inf:
        return xp.abs(a).min()
    if p == 0:
        return xp.count_nonzero(a)
    return (xp.abs(a) ** p).sum() ** (1.0 / p)


@no_grad()
def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors` (as torch: for a p-norm, the norm of all their
    entries taken as one vector), as a 0-d tensor."""
    arrays = [t._data for t in _tensors(tensors)]
    norm_type = float(norm_type)
    if not arrays:
        return Tensor(0.0)
    be = _tensors(tensors)[0].backend
    xp = be.xp
    dtype = xp.result_type(*arrays)
    norms = xp.stack([xp.asarray(_norm(xp, a, norm_type), dtype=dtype) for a in arrays])
    total = xp.asarray(_norm(xp, norms, norm_type), dtype=dtype)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise GraphError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                         "gradients is non-finite, so it cannot be clipped; pass "
                         "error_if_nonfinite=False to clip anyway (the grads become NaN)")
    return Tensor._wrap(total, be)


@no_grad()
def _max_norm(name, max_norm):
    """max_norm as a float: a number or a 0-d tensor; None or a string is an error naming the
    function (torch's float() refuses them too)."""
    return float(_real(name, "max_norm", max_norm))


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale every gradient by min(1, max_norm / (total_norm + 1e-6)), in place."""
    max_norm = _max_norm("clip_grads_with_norm_", max_norm)
    params = _with_grads(parameters)
    if not params:
        return
    xp = params[0].grad.backend.xp
    total = total_norm._data if isinstance(total_norm, Tensor) else xp.asarray(total_norm)
    scale = xp.minimum(float(max_norm) / (total + 1e-6), 1.0)
    with quiet():  # (an infinite norm: inf * 0 is NaN in the grads, silently, as in torch)
        for p in params:
            p.grad._data *= scale.astype(p.grad.dtype)  # in place, as PyTorch
            bump_version(p.grad)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale all gradients together by min(1, max_norm / (norm + 1e-6)), where norm is the
    total norm of order norm_type of the gradients (get_total_norm); returns that norm."""
    _max_norm("clip_grad_norm_", max_norm)  # (checked with no gradients too)
    params = _with_grads(parameters)
    total = get_total_norm([p.grad for p in params], norm_type, error_if_nonfinite)
    clip_grads_with_norm_(params, max_norm, total)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """torch's deprecated name of clip_grad_norm_ (with its FutureWarning)."""
    warn_user("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
              "`torch.nn.utils.clip_grad_norm_`.", FutureWarning)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@no_grad()
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient entry to [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    for p in _with_grads(parameters):
        xp = p.grad.backend.xp
        xp.clip(p.grad._data, -clip_value, clip_value, out=p.grad._data)
        bump_version(p.grad)


def parameters_to_vector(parameters):
    """Every parameter flattened and joined into one vector (on the graph, as torch's)."""
    from ..functional import cat

    params = _tensors(parameters)
    if not params:
        raise ShapeError("parameters_to_vector: got no parameters")
    return cat([p.reshape(-1) for p in params])


@no_grad()
def vector_to_parameters(vec, parameters):
    """Copy consecutive pieces of the vector `vec` into the parameters, in order (in place)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected a Tensor, got {type(vec).__name__}")
    params = _tensors(parameters)
    need = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.shape[0] != need:
        raise ShapeError(f"vector_to_parameters: the vector must be 1-D with {need} entries "
                         f"(the parameters' total), got {fmt_shape(vec.shape)}")
    start = 0
    for p in params:
        n = p.numel()
        p._data[...] = vec._data[start:start + n].reshape(p.shape)
        bump_version(p)
        start += n
