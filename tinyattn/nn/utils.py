"""nn.utils: gradient clipping with PyTorch's names, applied to `.grad` in place.

clip_grad_norm_ scales every gradient by one factor so that their joint norm is at most
max_norm, and returns that norm (before clipping) as a tensor; clip_grad_value_ clamps each
gradient entry to [-clip_value, clip_value].
"""

import math

from ..autograd import bump_version, no_grad
from ..errors import GraphError
from ..tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _with_grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p for p in parameters if p.grad is not None]


@no_grad()
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale all gradients together by min(1, max_norm / (norm + 1e-6)), where norm is the
    norm_type-norm of all gradient entries taken as one vector (inf: the largest |entry|)."""
    params = _with_grads(parameters)
    norm_type = float(norm_type)
    if not params:
        return Tensor(0.0)
    be = params[0].grad.backend
    xp = be.xp
    grads = [p.grad.data for p in params]
    if norm_type == math.inf:
        total = max(xp.abs(g).max() if g.size else xp.zeros((), g.dtype) for g in grads)
    else:
        per_grad = [(xp.abs(g) ** norm_type).sum() for g in grads]
        total = sum(per_grad[1:], per_grad[0]) ** (1.0 / norm_type)
    total = xp.asarray(total, dtype=grads[0].dtype)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise GraphError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                         "gradients is non-finite, so it cannot be clipped; pass "
                         "error_if_nonfinite=False to clip anyway (the grads become NaN)")
    scale = xp.minimum(max_norm / (total + 1e-6), 1.0)
    for p in params:
        p.grad.data *= scale.astype(p.grad.dtype)  # in place, as PyTorch
        bump_version(p.grad)
    return Tensor._wrap(total, be)


@no_grad()
def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient entry to [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    for p in _with_grads(parameters):
        xp = p.grad.backend.xp
        xp.clip(p.grad.data, -clip_value, clip_value, out=p.grad.data)
        bump_version(p.grad)
