"""torch.linalg: norms, products, and the dense solvers and factorizations.

The norms: vector_norm, matrix_norm and norm, built on the vector_norm op (ops/reduce.py) and
on sum/amax/amin, so their gradients are those ops' (torch builds its matrix 1- and inf-norms
from the same pieces, ties sharing the gradient as its amax does); its spectral (2, -2) and
nuclear ("nuc") norms go through svdvals. cond is σ_max/σ_min, or ‖A‖ ‖A⁻¹‖ through inv.
The factorizations svd, svdvals, eigh, eigvalsh, qr, lu, lu_factor, lu_solve, matrix_exp and
pinv live in linalg_decompositions.py; the composites lstsq, matrix_rank, cross, vecdot,
vander, diagonal, tensorinv and tensorsolve in linalg_extras.py; lu_factor_ex,
householder_product, ldl_factor, ldl_factor_ex, ldl_solve and matmul in linalg_more.py; inv_ex,
cholesky_ex and solve_ex (with an info tensor instead of an error) are here.
Also multi_dot, a chain of matrix products (attention rollout multiplies its layers' maps so),
and matrix_power (Tensor.matrix_power: repeated squaring by matmul; n < 0 through inv).
The solvers and factorizations, each an op of ops/linalg.py with its VJP, batched over leading
dims: inv, det, slogdet (a named tuple (sign, logabsdet)), solve (B a matrix or a vector, by
torch's rule; left=False), cholesky (upper=), solve_triangular (upper=, left=,
unitriangular=). Integer inputs are a DTypeError; float16 is computed in float32 and given back
in float16 (torch's CPU refuses it). A singular matrix (inv, solve, solve_triangular) or one
that is not positive-definite (cholesky) raises LinAlgError, a RuntimeError as torch's
torch.linalg.LinAlgError (on the CuPy backend: inf or NaN instead). Where tinyattn differs
from torch: cholesky factors (A + Aᵀ)/2 where torch reads one triangle of A (the same for the
symmetric matrices it is for), and solve_triangular with a zero on the diagonal raises
LinAlgError where torch gives inf and NaN.
"""

import operator

import numpy as np

from .autograd import apply
from .errors import DimError, LinAlgError, ShapeError
from .linalg_decompositions import (
    eigh,
    eigvalsh,
    lu,
    lu_factor,
    lu_solve,
    matrix_exp,
    pinv,
    qr,
    svd,
    svdvals,
)
from .linalg_extras import (
    cross,
    diagonal,
    lstsq,
    matrix_rank,
    tensorinv,
    tensorsolve,
    vander,
    vecdot,
)
from .linalg_more import (
    householder_product,
    ldl_factor,
    ldl_factor_ex,
    ldl_solve,
    lu_factor_ex,
    matmul,
)
from .ops import linalg as la
from .return_types import linalg_cholesky_ex, linalg_inv_ex, linalg_slogdet, linalg_solve_ex
from .tensor import Tensor, norm_cast

__all__ = ["vector_norm", "matrix_norm", "norm", "multi_dot", "matrix_power", "inv", "det",
           "slogdet", "solve", "cholesky", "solve_triangular", "LinAlgError", "svd", "svdvals",
           "eigh", "eigvalsh", "qr", "lu", "lu_factor", "lu_solve", "matrix_exp", "pinv",
           "lstsq", "matrix_rank", "cross", "vecdot", "vander", "diagonal", "tensorinv",
           "tensorsolve", "cond", "inv_ex", "cholesky_ex", "solve_ex", "lu_factor_ex",
           "householder_product", "ldl_factor", "ldl_factor_ex", "ldl_solve", "matmul"]


INF = float("inf")
_SUMMED = {1: ("amax", 0), -1: ("amin", 0), INF: ("amax", 1), -INF: ("amin", 1)}
_SPECTRAL = {"nuc": "sum", 2: "amax", -2: "amin"}


def _checked(name, x, dtype):
    if not isinstance(x, Tensor):
        raise TypeError(f"linalg.{name}: expected a tensor, got {type(x).__name__}")
    return norm_cast(f"linalg.{name}", x, dtype)  # (torch: the input cast to dtype first)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 - torch's names
    """torch.linalg.vector_norm: (Σ |x|^ord)^(1/ord) over dim (all entries by default, whatever
    the number of dims); inf/-inf the largest/smallest |x|, 0 the count of nonzeros."""
    if isinstance(ord, (str, bool)):
        raise ValueError(f"linalg.vector_norm: ord must be a number, got {ord!r} (matrix norms "
                         "such as 'fro' are linalg.matrix_norm's)")
    return _checked("vector_norm", x, dtype).norm(ord, dim=dim, keepdim=keepdim)


def matrix_norm(x, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002
    """torch.linalg.matrix_norm over the two dims in dim (the last two by default): 'fro', or
    1/-1 (the largest/smallest column sum of |x|), inf/-inf (the same of row sums), 'nuc' (the
    sum of the singular values), 2/-2 (the largest/smallest singular value)."""
    x = _checked("matrix_norm", x, dtype)
    try:
        d0, d1 = (operator.index(d) for d in dim)
    except (TypeError, ValueError):
        raise DimError(f"linalg.matrix_norm: dim must be a 2-tuple of ints, got {dim!r}") from None
    n = x.ndim
    if n < 2:
        raise DimError(f"linalg.matrix_norm: the input must have at least 2 dims, got shape "
                       f"{tuple(x.shape)}")
    if not (-n <= d0 < n and -n <= d1 < n):
        raise DimError(f"linalg.matrix_norm: dim {dim!r} is out of range for shape "
                       f"{tuple(x.shape)}")
    d0, d1 = d0 % n, d1 % n
    if d0 == d1:
        raise DimError(f"linalg.matrix_norm: dims must be different, got {dim!r}")
    if ord == "fro":
        return x.norm(2, dim=(d0, d1), keepdim=keepdim)
    if isinstance(ord, bool) or (ord not in _SUMMED and ord not in _SPECTRAL):
        raise ValueError(f"linalg.matrix_norm: ord={ord!r} (input shape {tuple(x.shape)}) is "
                         "not a matrix norm; use 'fro', 'nuc', 2, -2, 1, -1, inf or -inf")
    if ord in _SPECTRAL:  # the singular values' sum, largest or smallest (their gradients)
        out = getattr(svdvals(x.movedim((d0, d1), (-2, -1))), _SPECTRAL[ord])(-1)
        return out.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1)) if keepdim else out
    pick, summed = _SUMMED[ord]  # 1: sum over rows (d0), then the best column; inf: the other
    sums = x.abs().sum(dim=(d0, d1)[summed], keepdim=True)
    out = getattr(sums, pick)(dim=(d0, d1)[1 - summed], keepdim=True)
    return out if keepdim else out.squeeze((d0, d1))


def multi_dot(tensors):
    """torch.linalg.multi_dot: tensors[0] @ tensors[1] @ ... @ tensors[-1], two or more 2-D
    tensors, the first of which may be 1-D (a row vector) and the last 1-D (a column vector),
    their dims then dropped from the result (as torch). The products run left to right (torch
    picks the cheapest order: the same value up to rounding); the gradient is matmul's."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"linalg.multi_dot: expected a list or tuple of tensors, got "
                        f"{type(tensors).__name__}")
    if len(tensors) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(tensors)}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"linalg.multi_dot: tensor {i} is a {type(t).__name__}, not a tensor")
    shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
    last = len(tensors) - 1
    for i, t in enumerate(tensors):
        if t.ndim != 2 and not (t.ndim == 1 and i in (0, last)):
            raise DimError(f"linalg.multi_dot: tensor {i} must be 2-D (only the first and the "
                           f"last may be 1-D), got shapes {shapes}")
    for i in range(last):
        if tensors[i].shape[-1] != tensors[i + 1].shape[0]:
            raise ShapeError(f"linalg.multi_dot: tensors {i} and {i + 1} cannot be multiplied "
                             f"(inner dims {tensors[i].shape[-1]} and "
                             f"{tensors[i + 1].shape[0]}), got shapes {shapes}")
    out = tensors[0]
    for t in tensors[1:]:
        out = out @ t
    return out


def matrix_power(A, n):  # noqa: N803 - torch's argument name
    """torch.linalg.matrix_power: A (..., m, m) multiplied by itself n times (n >= 0; see
    Tensor.matrix_power)."""
    return _checked("matrix_power", A, None).matrix_power(n)


def norm(x, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 - torch's names
    """torch.linalg.norm: a vector norm for one dim (or a 1-D input), a matrix norm for two
    (or a 2-D input); with neither ord nor dim, the 2-norm of all entries."""
    x = _checked("norm", x, dtype)
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) not in (1, 2):
            raise DimError(f"linalg.norm: dim must be one or two dims, got {dim!r}")
    elif ord is None:
        return x.norm(2, keepdim=keepdim)
    elif x.ndim in (1, 2):
        dims = tuple(range(x.ndim))
    else:
        raise ValueError(f"linalg.norm: with an ord and no dim, the input must be 1-D or 2-D "
                         f"(torch's rule), got shape {tuple(x.shape)}; give dim")
    if len(dims) == 2:
        return matrix_norm(x, "fro" if ord is None else ord, dims, keepdim)
    if isinstance(ord, str):
        raise ValueError(f"linalg.norm: ord={ord!r} needs two dims, got dim={dim!r}")
    return x.norm(2 if ord is None else ord, dim=dims, keepdim=keepdim)


def inv(A):  # noqa: N803 - torch's argument name
    """torch.linalg.inv: A⁻¹ for A (..., n, n); the gradient is -A⁻ᵀ g A⁻ᵀ. A singular A is a
    LinAlgError. (torch.inverse and Tensor.inverse are the same.)"""
    return apply(la.inv, _checked("inv", A, None))


def det(A):  # noqa: N803
    """torch.linalg.det: det A for A (..., n, n), shape (...); the gradient g det(A) A⁻ᵀ (the
    cofactors, which stay finite where A is singular)."""
    return apply(la.det, _checked("det", A, None))


def slogdet(A):  # noqa: N803
    """torch.linalg.slogdet: the named tuple (sign, logabsdet) of det A, each of shape (...);
    logabsdet's gradient is g A⁻ᵀ, sign has none (sign 0 and logabsdet -inf for a singular A)."""
    both = apply(la.slogdet, _checked("slogdet", A, None))
    return linalg_slogdet(both[0].detach(), both[1])


def solve(A, B, *, left=True):  # noqa: N803
    """torch.linalg.solve: X with A X = B (or X A = B for left=False), A (..., n, n). B is a
    batch of vectors (..., n) when it is 1-D or has A's shape without its last dim (torch's
    rule), else of matrices (..., n, k); the batch dims broadcast. The gradients: gB = A⁻ᵀ g,
    gA = -gB Xᵀ. A singular A is a LinAlgError."""
    a, b = _checked("solve", A, None), _checked("solve", B, None)
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    if a.ndim >= 2 and not left:
        a = a.mT  # X A = B is Aᵀ Xᵀ = Bᵀ
    if vector:
        return apply(la.solve, a, b.unsqueeze(-1)).squeeze(-1)
    if left:
        return apply(la.solve, a, b)
    return apply(la.solve, a, b.mT).mT


def cholesky(A, *, upper=False):  # noqa: N803
    """torch.linalg.cholesky: L, lower-triangular with L Lᵀ = A, for a symmetric positive-
    definite A (..., n, n); Lᵀ when upper. tinyattn factors (A + Aᵀ)/2 (torch reads A's lower,
    or upper, triangle alone: the same for a symmetric A), so the gradient is the symmetric one
    torch gives. A matrix that is not positive-definite is a LinAlgError."""
    return apply(la.cholesky, _checked("cholesky", A, None), upper=bool(upper))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):  # noqa: N803
    """torch.linalg.solve_triangular: X with T X = B (X T = B for left=False), T the upper
    (upper=True) or lower triangle of A (..., n, n), with ones on its diagonal if unitriangular;
    B (..., n, k), or (..., k, n) for left=False; the batch dims broadcast. The gradient of A
    stays in its triangle. Computed by the backend's general solver on T (NumPy has no
    triangular one): a zero on T's diagonal is a LinAlgError (torch gives inf and NaN)."""
    return apply(la.solve_triangular, _checked("solve_triangular", A, None),
                 _checked("solve_triangular", B, None), upper=bool(upper), left=bool(left),
                 unitriangular=bool(unitriangular))


_COND_ORDS = (None, 2, -2, "fro", "nuc", INF, -INF, 1, -1)


def cond(A, p=None):  # noqa: N803 - torch's argument name
    """torch.linalg.cond: the condition number of A (..., m, n) in norm p: σ_max/σ_min for p None
    or 2 (σ_min/σ_max for -2), through svdvals (any m, n); for 'fro', 'nuc', inf, -inf, 1, -1,
    ‖A‖ ‖A⁻¹‖ (square A; inf where A is singular, as torch). Differentiable through svdvals,
    matrix_norm and inv."""
    A = _checked("cond", A, None)  # noqa: N806
    if isinstance(p, bool) or p not in _COND_ORDS:
        raise ValueError(f"linalg.cond got an invalid norm type: {p!r}")
    if p in (None, 2, -2):
        s = svdvals(A)
        return s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    la._square("cond", A._data)
    bad = _singular(A)
    if not bad.any():
        return matrix_norm(A, p) * matrix_norm(inv(A), p)
    fixed = _masked_eye(A, bad)
    value = matrix_norm(A, p) * matrix_norm(inv(fixed), p)
    return value.masked_fill(Tensor._wrap(A.backend.xp.asarray(bad), A.backend), INF)



def _singular(A):  # noqa: N803
    """A bool array over A's batch: the matrices whose inverse LAPACK refuses."""
    xp = A.backend.xp
    a = A._data.astype(np.float32) if A._data.dtype == np.float16 else A._data
    try:
        xp.linalg.inv(a)
        return xp.zeros(a.shape[:-2], dtype=bool)
    except np.linalg.LinAlgError:
        flat = a.reshape((-1,) + a.shape[-2:])
        out = xp.zeros(flat.shape[0], dtype=bool)
        for i in range(flat.shape[0]):
            try:
                xp.linalg.inv(flat[i])
            except np.linalg.LinAlgError:
                out[i] = True
        return out.reshape(a.shape[:-2])


def _masked_eye(A, bad):  # noqa: N803
    """A with the matrices where `bad` replaced by the identity (so that inv and solve run)."""
    xp = A.backend.xp
    eye = xp.eye(A.shape[-1], dtype=A._data.dtype)
    mask = Tensor._wrap(xp.asarray(bad)[..., None, None], A.backend)
    return A.masked_fill(mask, 0) + Tensor._wrap(xp.where(mask._data, eye, 0).astype(
        A._data.dtype), A.backend)


def _lu_info(A, bad):  # noqa: N803
    """LAPACK's getrf info for each matrix: 1 + the first zero on U's diagonal, 0 if none."""
    from .linalg_decompositions import _lu_arrays  # noqa: PLC0415 - a helper of its own
    xp = A.backend.xp
    info = xp.zeros(bad.shape, dtype=np.int32)
    if bad.any():
        _, _, up, _ = _lu_arrays(xp, A._data.astype(np.float64), True)
        diag = xp.diagonal(up, axis1=-2, axis2=-1) == 0
        first = xp.where(diag.any(-1), diag.argmax(-1) + 1, A.shape[-1])
        info = xp.where(bad, first, 0).astype(np.int32)
    return info


def _raise_info(name, info, why):
    xp_info = np.asarray(info.get() if hasattr(info, "get") else info).reshape(-1)
    where = int(np.flatnonzero(xp_info)[0])
    batch = f"(Batch element {where}): " if np.ndim(info) else ""
    raise LinAlgError(f"linalg.{name}: {batch}{why.format(xp_info[where])}")


def inv_ex(A, *, check_errors=False):  # noqa: N803
    """torch.linalg.inv_ex: the named tuple (inverse, info): info (...,) int32 is 0 where A is
    invertible, else LAPACK's i (U's i-th diagonal entry is zero), and the inverse there NaN
    (torch: whatever LAPACK left); check_errors=True raises LinAlgError instead. The inverse's
    gradient is inv's (zero for the singular matrices)."""
    A = _checked("inv_ex", A, None)  # noqa: N806
    la._square("inv_ex", A._data)
    bad = _singular(A)
    info = _lu_info(A, bad)
    if check_errors and bad.any():
        _raise_info("inv_ex", info, "The diagonal element {} is zero, the inversion could not "
                    "be completed because the input matrix is singular.")
    if not bad.any():
        return linalg_inv_ex(inv(A), Tensor._wrap(info, A.backend))
    out = inv(_masked_eye(A, bad))
    mask = Tensor._wrap(A.backend.xp.asarray(bad)[..., None, None], A.backend)
    return linalg_inv_ex(out.masked_fill(mask, float("nan")), Tensor._wrap(info, A.backend))


def solve_ex(A, B, *, left=True, check_errors=False):  # noqa: N803
    """torch.linalg.solve_ex: the named tuple (result, info), info as inv_ex's (result NaN
    where A is singular; check_errors=True raises LinAlgError); the gradient is solve's."""
    A = _checked("solve_ex", A, None)  # noqa: N806
    la._square("solve_ex", A._data)
    bad = _singular(A)
    info = _lu_info(A, bad)
    if check_errors and bad.any():
        _raise_info("solve_ex", info, "The solver failed because the input matrix is singular.")
    if not bad.any():
        return linalg_solve_ex(solve(A, B, left=left), Tensor._wrap(info, A.backend))
    out = solve(_masked_eye(A, bad), B, left=left)
    keep = A.backend.xp.asarray(bad).reshape(bad.shape + (1,) * (out.ndim - bad.ndim))
    keep = A.backend.xp.broadcast_to(keep, (1,) * (out.ndim - keep.ndim) + keep.shape) \
        if keep.ndim < out.ndim else keep
    return linalg_solve_ex(out.masked_fill(Tensor._wrap(keep, A.backend), float("nan")),
                           Tensor._wrap(info, A.backend))


def _cholesky_info(A, bad):  # noqa: N803
    """The order of the first leading minor of (A + Aᵀ)/2 that is not positive-definite."""
    xp = A.backend.xp
    a = A._data.astype(np.float64)
    flat = ((a + la._mt(xp, a)) / 2).reshape((-1,) + a.shape[-2:])
    info = np.zeros(flat.shape[0], dtype=np.int32)
    for i in np.flatnonzero(np.asarray(bad).reshape(-1)):
        for k in range(1, a.shape[-1] + 1):
            try:
                xp.linalg.cholesky(flat[i, :k, :k])
            except np.linalg.LinAlgError:
                info[i] = k
                break
    return xp.asarray(info.reshape(a.shape[:-2]))


def cholesky_ex(A, *, upper=False, check_errors=False):  # noqa: N803
    """torch.linalg.cholesky_ex: the named tuple (L, info): info (...,) int32 is 0 where A is
    positive-definite, else the order of the leading minor that is not (L NaN there; torch:
    what LAPACK left); check_errors=True raises LinAlgError instead. L's gradient is
    cholesky's."""
    A = _checked("cholesky_ex", A, None)  # noqa: N806
    la._square("cholesky_ex", A._data)
    try:
        return linalg_cholesky_ex(cholesky(A, upper=upper), Tensor._wrap(
            A.backend.xp.zeros(A.shape[:-2], dtype=np.int32), A.backend))
    except LinAlgError:
        pass
    xp = A.backend.xp
    flat = A._data.reshape((-1,) + A._data.shape[-2:])
    bad = np.zeros(flat.shape[0], dtype=bool)
    for i in range(flat.shape[0]):
        try:
            la.cholesky.fwd(A.backend, flat[i])
        except LinAlgError:
            bad[i] = True
    bad = xp.asarray(bad.reshape(A.shape[:-2]))
    info = _cholesky_info(A, bad)
    if check_errors:
        _raise_info("cholesky_ex", info, "The factorization could not be completed because the "
                    "input is not positive-definite (the leading minor of order {} is not "
                    "positive-definite).")
    out = cholesky(_masked_eye(A, bad), upper=upper)
    mask = Tensor._wrap(xp.asarray(bad)[..., None, None], A.backend)
    return linalg_cholesky_ex(out.masked_fill(mask, float("nan")), Tensor._wrap(info, A.backend))
