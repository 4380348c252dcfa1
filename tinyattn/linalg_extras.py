"""torch.linalg's composites: lstsq, matrix_rank, cross, vecdot, vander, diagonal, tensorinv and
tensorsolve (tinyattn/linalg.py gives them out; lstsq's named tuple is in return_types.py).

Each is written with differentiable tinyattn ops (pinv, svdvals, solve, inv, matmul, cumprod,
indexing), so its gradients, of any order, are theirs: lstsq's solution is pinv(A) B (torch's
lstsq backward is the same, through pinv); matrix_rank is an integer count without gradient.
"""

import math
import operator

import numpy as np

from .autograd import apply, no_grad
from .errors import DimError, ShapeError, fmt_shape
from .linalg_decompositions import _matrices, eigvalsh, pinv, svdvals
from .ops import linalg as la
from .ops import shape as sh
from .return_types import linalg_lstsq
from .tensor import Tensor, _int_argument

__all__ = ["lstsq", "matrix_rank", "cross", "vecdot", "vander", "diagonal", "tensorinv",
           "tensorsolve"]

_DRIVERS = (None, "gels", "gelsy", "gelsd", "gelss")


def _tensor(name, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"linalg.{name}: expected a tensor, got {type(x).__name__}")
    return x


def _empty(like, dtype=None):
    xp = like.backend.xp
    return Tensor._wrap(xp.zeros(0, dtype=like._data.dtype if dtype is None else dtype),
                        like.backend)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None):  # noqa: N803
    """torch.linalg.matrix_rank: the number of singular values (|eigenvalues| if hermitian) of
    A (..., m, n) over max(atol, rtol·σ_max), as int64 (..., ); torch's default rtol
    eps·max(m, n); tol is torch's older name for atol (with rtol 0). No gradient."""
    A = _matrices("matrix_rank", A, square=bool(hermitian))  # noqa: N806
    if tol is not None:
        atol, rtol = tol, (0.0 if rtol is None else rtol)
    with no_grad():
        s = eigvalsh(A).abs() if hermitian else svdvals(A)
    xp = A.backend.xp
    eps = float(np.finfo(A._data.dtype).eps)
    if atol is None and rtol is None:
        rtol = eps * max(A.shape[-2:])

    def value(t, default):
        if t is None:
            return default
        return t._data[..., None] if isinstance(t, Tensor) else float(t)

    sv = s._data
    top = sv.max(axis=-1, keepdims=True) if sv.shape[-1] else xp.zeros(sv.shape[:-1] + (1,))
    limit = xp.maximum(value(atol, 0.0), value(rtol, 0.0) * top)
    return Tensor._wrap((sv > limit).sum(axis=-1).astype(np.int64), A.backend)


def _is_vector_rhs(a, b):
    """torch's rule (linalg.solve's): B is a batch of vectors."""
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))


def lstsq(A, B, rcond=None, *, driver=None):  # noqa: N803 - torch's argument names
    """torch.linalg.lstsq: the named tuple (solution, residuals, rank, singular_values) for the
    least-squares problem min ‖A X - B‖, A (..., m, n), B (..., m, k) or (..., m) (torch's
    vector rule), batch dims broadcast. solution is the minimum-norm one, pinv(A) B (rcond the
    relative cut-off of A's singular values, torch's default eps·max(m, n)); as torch's CPU
    drivers: rank for gelsy (the default), gelsd and gelss, singular_values for gelsd and gelss,
    residuals ‖A X - B‖² per column for gels, gelsd and gelss when m > n and A has full rank;
    the rest empty. Gradients of solution (and residuals) as torch's, through pinv."""
    A, B = _matrices("lstsq", A), _tensor("lstsq", B)  # noqa: N806
    if driver not in _DRIVERS:
        raise ValueError(f"linalg.lstsq: parameter `driver` should be one of (gels, gelsy, "
                         f"gelsd, gelss), got {driver!r}")
    vector = _is_vector_rhs(A, B)
    b = B.unsqueeze(-1) if vector else B
    if b.shape[-2] != A.shape[-2]:
        raise ShapeError(f"linalg.lstsq: input.size(-2) should match other.size(-2), got A "
                         f"{fmt_shape(A.shape)} and B {fmt_shape(B.shape)}")
    x = pinv(A, rtol=rcond) @ b
    driver = driver or "gelsy"
    m, n = A.shape[-2:]
    rank = matrix_rank(A, rtol=rcond) if driver != "gels" else _empty(A, np.int64)
    residuals = _empty(A)
    if driver != "gelsy" and m > n and bool((rank._data == n).all() if rank.numel() else True):
        residuals = ((A @ x - b) ** 2).sum(dim=-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    sv = svdvals(A).detach() if driver in ("gelsd", "gelss") else _empty(A)
    return linalg_lstsq(x.squeeze(-1) if vector else x, residuals, rank, sv)


def cross(input, other, *, dim=-1):  # noqa: A002 - torch's names
    """torch.linalg.cross: the cross product of 3-vectors along dim (the inputs broadcast);
    the gradient is mul's and sub's."""
    x, y = _tensor("cross", input), _tensor("cross", other)
    try:
        shape = np.broadcast_shapes(tuple(x.shape), tuple(y.shape))
    except ValueError:
        raise ShapeError(f"linalg.cross: the shapes {fmt_shape(x.shape)} and "
                         f"{fmt_shape(y.shape)} do not broadcast") from None
    nd = len(shape)
    if not -nd <= dim < nd:
        raise DimError(f"linalg.cross: dim {dim} is out of range for shape {fmt_shape(shape)}")
    d = dim % nd
    if x.shape[d - nd] != 3 or y.shape[d - nd] != 3:
        raise ShapeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                         f"{x.shape[d - nd]} and {y.shape[d - nd]}")
    x, y = x.expand(*shape), y.expand(*shape)
    a = [x.select(d, i) for i in range(3)]
    b = [y.select(d, i) for i in range(3)]
    parts = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    return apply(sh.stack, *parts, dim=d)


def vecdot(x, y, *, dim=-1):
    """torch.linalg.vecdot: Σ x·y along dim (the inputs broadcast; real: no conjugate)."""
    x, y = _tensor("vecdot", x), _tensor("vecdot", y)
    try:
        shape = np.broadcast_shapes(tuple(x.shape), tuple(y.shape))
    except ValueError:
        raise ShapeError(f"linalg.vecdot: the shapes {fmt_shape(x.shape)} and "
                         f"{fmt_shape(y.shape)} do not broadcast") from None
    if not -len(shape) <= dim < max(len(shape), 1) or not shape:
        raise DimError(f"linalg.vecdot: dim {dim} is out of range for shape {fmt_shape(shape)}")
    return (x * y).sum(dim=dim)


def vander(x, *, N=None):  # noqa: N803 - torch's argument name
    """torch.linalg.vander: (..., n, N) with columns x⁰, x¹, ..., x^(N-1) (increasing powers,
    unlike NumPy's) for x (..., n); N defaults to n and must be over 1. The gradient is
    cumprod's."""
    x = _tensor("vander", x)
    if x.ndim == 0:
        raise ShapeError("linalg.vander: x must have at least one dim, got a 0-d tensor")
    n = x.shape[-1] if N is None else _int_argument("linalg.vander", "N", N)
    if n <= 1:
        raise ValueError(f"linalg.vander: N must be greater than 1, got {n}")
    ones = Tensor._wrap(x.backend.xp.ones(tuple(x.shape) + (1,), dtype=x._data.dtype),
                        x.backend)
    powers = x.unsqueeze(-1).expand(*x.shape, n - 1).cumprod(-1)
    return apply(sh.cat, ones, powers, dim=-1)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):  # noqa: N803
    """torch.linalg.diagonal: A.diagonal(offset, dim1, dim2), by default of the last two dims."""
    return _tensor("diagonal", A).diagonal(offset=offset, dim1=dim1, dim2=dim2)


def tensorinv(A, ind=2):  # noqa: N803
    """torch.linalg.tensorinv: the inverse of A for tensordot over the first `ind` dims: shape
    A.shape[ind:] + A.shape[:ind]; a composite of reshape and inv."""
    A = _tensor("tensorinv", A)  # noqa: N806
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"linalg.tensorinv: Expected a strictly positive integer for 'ind', "
                         f"but got {ind}")
    lead, rest = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(lead) != math.prod(rest):
        raise ShapeError(f"linalg.tensorinv: Expected self to satisfy the requirement "
                         f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got "
                         f"{math.prod(rest)} != {math.prod(lead)} (shape {fmt_shape(A.shape)}, "
                         f"ind={ind})")
    square = A.reshape(math.prod(lead), math.prod(rest))
    return apply(la.inv, square).reshape(*rest, *lead)


def tensorsolve(A, B, dims=None):  # noqa: N803
    """torch.linalg.tensorsolve: X with tensordot(A, X, X.ndim) = B, X of shape
    A.shape[B.ndim:]; dims: dims of A moved to its end first. A composite of reshape and
    solve."""
    A, B = _tensor("tensorsolve", A), _tensor("tensorsolve", B)  # noqa: N806
    if dims is not None:
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        A = A.movedim(dims, tuple(range(A.ndim - len(dims), A.ndim)))  # noqa: N806
    out_shape = tuple(A.shape[B.ndim:])
    rows, cols = math.prod(A.shape[:B.ndim]), math.prod(out_shape)
    if tuple(A.shape[:B.ndim]) != tuple(B.shape) and rows != B.numel() or rows != cols:
        raise ShapeError(f"linalg.tensorsolve: Expected self to satisfy the requirement "
                         f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but "
                         f"got {cols} != {rows} (A {fmt_shape(A.shape)}, B "
                         f"{fmt_shape(B.shape)})")
    x = apply(la.solve, A.reshape(rows, cols), B.reshape(rows, 1))
    return x.reshape(*out_shape)
