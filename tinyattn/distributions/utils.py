"""torch.distributions.utils: broadcast_all, logits_to_probs, probs_to_logits, clamp_probs,
tril_matrix_to_vec, vec_to_tril_matrix and lazy_property, as torch's (the helpers a distribution
of one's own is written with). All are tensor ops, so gradients pass through them.
"""

import functools
import numbers

import numpy as np

from .. import functional as F
from ..autograd import enable_grad
from ..dtypes import get_default_dtype
from ..errors import ShapeError, fmt_shape
from ..routines import broadcast_tensors
from ..tensor import Tensor, tensor

__all__ = ["broadcast_all", "logits_to_probs", "clamp_probs", "probs_to_logits",
           "lazy_property", "tril_matrix_to_vec", "vec_to_tril_matrix"]


def broadcast_all(*values):
    """The values broadcast together, as tensors: Python numbers become tensors of the first
    tensor's dtype and backend (the default dtype if all are numbers), as torch's."""
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("broadcast_all: Input arguments must all be instances of Number or "
                         "Tensor, got " + ", ".join(type(v).__name__ for v in values))
    first = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = first.dtype if first is not None else get_default_dtype()
    backend = None if first is None else first.backend
    made = [v if isinstance(v, Tensor) else tensor(v, dtype=dtype, backend=backend)
            for v in values]
    return broadcast_tensors(*made)


def logits_to_probs(logits, is_binary=False):
    """sigmoid(logits) for a binary event, else softmax over the last dim."""
    return logits.sigmoid() if is_binary else F.softmax(logits, dim=-1)


def clamp_probs(probs):
    """probs clamped into [eps, 1 - eps], eps the dtype's machine epsilon (torch's)."""
    eps = float(np.finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """log(p) - log1p(-p) for a binary event, else log(p), of the clamped probs."""
    p = clamp_probs(probs)
    return p.log() - (-p).log1p() if is_binary else p.log()


def _tril_mask(xp, n, diag):
    arange = xp.arange(n)
    return arange[None, :] < arange[:, None] + (diag + 1)


def tril_matrix_to_vec(mat, diag=0):
    """The lower triangle of a (batch of) D x D matrix (below diagonal `diag`), row by row."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"tril_matrix_to_vec: diag ({diag}) provided is outside "
                         f"[{-n}, {n - 1}].")
    rows, cols = np.nonzero(_tril_mask(np, n, diag))
    flat = mat.reshape(tuple(mat.shape[:-2]) + (n * mat.shape[-2],))
    return flat[..., tensor(rows * n + cols, backend=mat.backend)]


def vec_to_tril_matrix(vec, diag=0):
    """The (batch of) D x D lower-triangular matrix whose triangle (below diagonal `diag`),
    row by row, is vec's last dim; a size no D fits is a ValueError, as torch's."""
    if vec.ndim < 1:
        raise ShapeError(f"vec_to_tril_matrix: expected a vector, got {fmt_shape(vec.shape)}")
    k = vec.shape[-1]
    root = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * k + 4 * abs(diag) * (diag + 1))
            ** 0.5) / 2
    n = round(root)
    if abs(n - root) > float(np.finfo(np.float32).eps) or int(_tril_mask(np, n, diag).sum()) != k:
        raise ValueError(f"vec_to_tril_matrix: The size of last dimension is {k} which cannot "
                         "be expressed as the lower triangular part of a square D x D matrix "
                         f"(vec {fmt_shape(vec.shape)})")
    # each of the n * n places takes vec's entry (shifted by one) or the 0 put in front: a
    # gather, so a NaN or inf in vec stays in its own place
    source = np.zeros(n * n, np.int64)
    rows, cols = np.nonzero(_tril_mask(np, n, diag))
    source[rows * n + cols] = np.arange(1, rows.size + 1)
    padded = F.pad(vec, (1, 0))
    out = padded[..., tensor(source, backend=vec.backend)]
    return out.reshape(tuple(vec.shape[:-1]) + (n, n))


class lazy_property:  # noqa: N801 - torch's name
    """A method computed on first access (with gradients enabled, as torch's) and then kept as
    the instance's attribute of that name; on the class, a property-like object."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value
