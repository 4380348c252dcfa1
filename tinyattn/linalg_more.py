"""torch.linalg's lu_factor_ex, householder_product, ldl_factor, ldl_factor_ex, ldl_solve and
matmul (tinyattn/linalg.py gives them out; their named tuples are in return_types.py).

lu_factor_ex is lu_factor (its gradient) with LAPACK's info: 1 + the first zero on U's
diagonal. householder_product is written with tensor ops (Q = H_1 ... H_k, H_i = I - τ_i v_i
v_iᵀ, applied to the first n columns of I from the right), so its gradients, of any order,
are theirs. ldl_factor is LAPACK's sytrf (the Bunch-Kaufman factorization, A's lower triangle:
A = P L D Lᵀ Pᵀ, D with 1×1 and 2×2 blocks, the 2×2 ones marked by negative pivots) run by
the unblocked code below (dsytf2's steps, so the same LD and pivots as torch's CPU for
matrices under LAPACK's block size, 64), and ldl_solve is sytrs; neither has a gradient, as
torch's (an autograd.Function whose backward refuses, with torch's message).
"""

import numpy as np

from .errors import LinAlgError, ShapeError, fmt_shape
from .function import Function
from .linalg_decompositions import _matrices, lu_factor
from .return_types import linalg_ldl_factor, linalg_ldl_factor_ex, linalg_lu_factor_ex
from .tensor import Tensor

__all__ = ["lu_factor_ex", "householder_product", "ldl_factor", "ldl_factor_ex", "ldl_solve",
           "matmul"]


def matmul(input, other):  # noqa: A002 - torch's names
    """torch.linalg.matmul: input @ other (torch.matmul, whose gradient it has)."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError(f"linalg.matmul: expected two tensors, got {type(input).__name__} and "
                        f"{type(other).__name__}")
    return input @ other


def _first_zero_diagonal(xp, a):
    """LAPACK's info for each matrix of a (..., m, n): 1 + the first zero on its diagonal."""
    d = xp.diagonal(a, axis1=-2, axis2=-1) == 0
    if d.shape[-1] == 0:
        return xp.zeros(d.shape[:-1], dtype=np.int32)
    return xp.where(d.any(-1), d.argmax(-1) + 1, 0).astype(np.int32)


def _raise_info(name, info, why):
    flat = np.asarray(info.get() if hasattr(info, "get") else info).reshape(-1)
    where = int(np.flatnonzero(flat)[0])
    batch = f"(Batch element {where}): " if np.ndim(info) else ""
    raise LinAlgError(f"linalg.{name}: {batch}{why.format(flat[where])}")


def lu_factor_ex(A, *, pivot=True, check_errors=False):  # noqa: N803 - torch's argument name
    """torch.linalg.lu_factor_ex: the named tuple (LU, pivots, info) of lu_factor, info (...,)
    int32 LAPACK's: 0, or i where U[i-1, i-1] is zero (the factorization is still complete,
    as torch's); check_errors=True raises LinAlgError there instead. The gradient is
    lu_factor's."""
    _matrices("lu_factor_ex", A)
    LU, pivots = lu_factor(A, pivot=pivot)  # noqa: N806
    info = _first_zero_diagonal(LU.backend.xp, LU._data)
    if check_errors and bool(info.any()):
        _raise_info("lu_factor_ex", info, "U[{0},{0}] is zero: the matrix is singular (LAPACK "
                    "info {0})")
    return linalg_lu_factor_ex(LU, pivots, Tensor._wrap(info, LU.backend))


# ---- Householder product ------------------------------------------------------------------------


def _householder_checks(A, tau):  # noqa: N803
    A = _matrices("householder_product", A)  # noqa: N806
    if not isinstance(tau, Tensor):
        raise TypeError(f"linalg.householder_product: tau must be a tensor, got "
                        f"{type(tau).__name__}")
    m, n = A.shape[-2:]
    if m < n:
        raise ShapeError(f"linalg.householder_product: input.shape[-2] must be greater than or "
                         f"equal to input.shape[-1], got input {fmt_shape(A.shape)}")
    if tau.ndim != A.ndim - 1 or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]) \
            or tau.shape[-1] > n:
        raise ShapeError(f"linalg.householder_product: tau must have shape (*batch, k) with k <= "
                         f"input.shape[-1] and input's batch dims, got input "
                         f"{fmt_shape(A.shape)} and tau {fmt_shape(tau.shape)}")
    if tau.dtype != A.dtype:
        raise ShapeError(f"linalg.householder_product: tau ({tau.dtype}) must have the input's "
                         f"dtype ({A.dtype})")
    return A


def householder_product(A, tau):  # noqa: N803
    """torch.linalg.householder_product: the first n columns of H_1 H_2 ... H_k for A (..., m, n),
    m >= n, and tau (..., k), k <= n: H_i = I - τ_i v_i v_iᵀ, v_i the i-th column of A below
    its diagonal with a 1 on it (LAPACK's orgqr; geqrf's output gives Q). Tensor ops, so its
    gradients (of A and tau) are theirs."""
    A = _householder_checks(A, tau)  # noqa: N806
    xp, dtype = A.backend.xp, A._data.dtype
    m, n = A.shape[-2:]
    eye = xp.eye(m, n, dtype=dtype)
    below = Tensor._wrap(xp.tril(xp.ones((m, n), dtype=dtype), -1), A.backend)
    v = A * below + Tensor._wrap(eye, A.backend)
    out = Tensor._wrap(xp.broadcast_to(eye, tuple(A.shape)).copy(), A.backend)
    for i in reversed(range(tau.shape[-1])):
        vi = v[..., :, i:i + 1]
        out = out - (tau[..., i:i + 1].unsqueeze(-1) * vi) @ (vi.mT @ out)
    return out


# ---- LDL (Bunch-Kaufman), LAPACK's dsytf2 and dsytrs for the lower triangle ----------------------

_ALPHA = (1 + 17 ** 0.5) / 8


def _bk_choose(a, k):
    """The pivot of step k: (kp, kstep), or None where the column is zero (LAPACK's info)."""
    n = a.shape[0]
    absakk = abs(a[k, k])
    imax, colmax = k, 0.0
    if k < n - 1:
        imax = k + 1 + int(np.argmax(np.abs(a[k + 1:, k])))
        colmax = abs(a[imax, k])
    if max(absakk, colmax) == 0 or np.isnan(absakk):
        return None
    if absakk >= _ALPHA * colmax:
        return k, 1
    rowmax = np.abs(a[imax, k:imax]).max()
    if imax < n - 1:
        rowmax = max(rowmax, np.abs(a[imax + 1:, imax]).max())
    if absakk >= _ALPHA * colmax * (colmax / rowmax):
        return k, 1
    if abs(a[imax, imax]) >= _ALPHA * rowmax:
        return imax, 1
    return imax, 2


def _bk_swap(a, k, kp, kstep):
    """Rows and columns kk = k + kstep - 1 and kp of the trailing lower triangle swapped."""
    kk = k + kstep - 1
    if kp == kk:
        return
    a[kp + 1:, [kk, kp]] = a[kp + 1:, [kp, kk]]
    seg = a[kk + 1:kp, kk].copy()
    a[kk + 1:kp, kk] = a[kp, kk + 1:kp]
    a[kp, kk + 1:kp] = seg
    a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]
    if kstep == 2:
        a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]


def _bk_update(a, k, kstep):
    """The trailing matrix's rank-1 (or rank-2) update and the step's columns of L."""
    n = a.shape[0]
    if kstep == 1:
        d11 = 1 / a[k, k]
        x = a[k + 1:, k].copy()
        a[k + 1:, k + 1:] -= np.outer(x, d11 * x)
        a[k + 1:, k] *= d11
        return
    d21 = a[k + 1, k]
    d11, d22 = a[k + 1, k + 1] / d21, a[k, k] / d21
    d21 = (1 / (d11 * d22 - 1)) / d21
    for j in range(k + 2, n):
        wk = d21 * (d11 * a[j, k] - a[j, k + 1])
        wkp1 = d21 * (d22 * a[j, k + 1] - a[j, k])
        a[j:, j] -= a[j:, k] * wk + a[j:, k + 1] * wkp1
        a[j, k], a[j, k + 1] = wk, wkp1


def _sytf2(a):
    """(LD, pivots, info) of one symmetric matrix (its lower triangle read), as dsytf2's."""
    a = a.astype(np.float64, copy=True)
    n = a.shape[0]
    ipiv, info, k = np.zeros(n, dtype=np.int32), 0, 0
    while k < n:
        chosen = _bk_choose(a, k)
        if chosen is None:
            info = info or k + 1
            ipiv[k], k = k + 1, k + 1
            continue
        kp, kstep = chosen
        _bk_swap(a, k, kp, kstep)
        _bk_update(a, k, kstep)
        ipiv[k:k + kstep] = kp + 1 if kstep == 1 else -(kp + 1)
        k += kstep
    return np.tril(a), ipiv, info


def _sytrs(ld, ipiv, b):
    """X with A X = B for A = P L D Lᵀ Pᵀ given by (ld, ipiv), as dsytrs' lower case."""
    b = b.astype(np.float64, copy=True)
    n, k = ld.shape[0], 0
    while k < n:  # L D Y = B
        kp = abs(int(ipiv[k])) - 1
        if ipiv[k] > 0:
            b[[k, kp]] = b[[kp, k]]
            b[k + 1:] -= np.outer(ld[k + 1:, k], b[k])
            b[k] /= ld[k, k]
            k += 1
            continue
        b[[k + 1, kp]] = b[[kp, k + 1]]
        b[k + 2:] -= np.outer(ld[k + 2:, k], b[k]) + np.outer(ld[k + 2:, k + 1], b[k + 1])
        off = ld[k + 1, k]
        akm1, ak = ld[k, k] / off, ld[k + 1, k + 1] / off
        denom = akm1 * ak - 1
        bkm1, bk = b[k] / off, b[k + 1] / off
        b[k], b[k + 1] = (ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom
        k += 2
    k = n - 1
    while k >= 0:  # Lᵀ Pᵀ X = Y
        step = 1 if ipiv[k] > 0 else 2
        for j in range(k, k - step, -1):
            b[j] -= ld[k + 1:, j] @ b[k + 1:]
        kp = abs(int(ipiv[k])) - 1
        b[[k, kp]] = b[[kp, k]]
        k -= step
    return b


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


class LinalgLdlFactor(Function):
    """A = P L D Lᵀ Pᵀ: (LD, pivots, info); no gradient, as torch's."""

    @staticmethod
    def forward(ctx, A):  # noqa: N803
        xp, a = A.backend.xp, _host(A._data)
        flat = a.reshape((-1,) + a.shape[-2:])
        got = [_sytf2(m) for m in flat]
        ld = np.stack([g[0] for g in got]).reshape(a.shape) if got else a.copy()
        piv = np.stack([g[1] for g in got]).reshape(a.shape[:-1]) if got else \
            np.zeros(a.shape[:-1], dtype=np.int32)
        info = np.array([g[2] for g in got], dtype=np.int32).reshape(a.shape[:-2])
        outs = (Tensor._wrap(xp.asarray(ld.astype(a.dtype)), A.backend),
                Tensor._wrap(xp.asarray(piv), A.backend), Tensor._wrap(xp.asarray(info),
                                                                       A.backend))
        ctx.mark_non_differentiable(*outs[1:])
        return outs

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("derivative for linalg.ldl_factor_ex is not implemented (nor in "
                           "torch)")


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):  # noqa: N803
    """torch.linalg.ldl_factor_ex: the named tuple (LD, pivots, info) of the Bunch-Kaufman
    factorization of symmetric A (..., n, n), its lower triangle read: LD holds L's strict lower
    part and D's diagonal and 2×2 blocks' subdiagonal (zeros above); pivots (..., n) int32,
    LAPACK's (1-based; a 2×2 block's two entries negative); info (...,) int32, 0 or LAPACK's i
    (D's i-th block is singular); check_errors raises LinAlgError there. Real inputs: hermitian
    changes nothing. No gradient (as torch's)."""
    A = _matrices("ldl_factor_ex", A, square=True)  # noqa: N806
    ld, piv, info = LinalgLdlFactor.apply(A)
    if check_errors and bool(info._data.any()):
        _raise_info("ldl_factor_ex", info._data, "The factorization could not be completed: "
                    "D[{0},{0}] is zero (LAPACK info {0})")
    return linalg_ldl_factor_ex(ld, piv, info)


def ldl_factor(A, *, hermitian=False):  # noqa: N803
    """torch.linalg.ldl_factor: ldl_factor_ex's (LD, pivots); a singular D is a LinAlgError."""
    _matrices("ldl_factor", A, square=True)
    ld, piv, info = ldl_factor_ex(A, hermitian=hermitian)
    if bool(info._data.any()):
        _raise_info("ldl_factor", info._data, "The factorization could not be completed: "
                    "D[{0},{0}] is zero (LAPACK info {0})")
    return linalg_ldl_factor(ld, piv)


class LinalgLdlSolve(Function):
    """X with A X = B, A given by ldl_factor's (LD, pivots); no gradient, as torch's."""

    @staticmethod
    def forward(ctx, LD, pivots, B):  # noqa: N803
        xp, ld, piv, b = LD.backend.xp, _host(LD._data), _host(pivots._data), _host(B._data)
        batch = np.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
        ld = np.broadcast_to(ld, batch + ld.shape[-2:]).reshape((-1,) + ld.shape[-2:])
        piv = np.broadcast_to(piv, batch + piv.shape[-1:]).reshape((-1, piv.shape[-1]))
        b = np.broadcast_to(b, batch + b.shape[-2:])
        flat = b.reshape((-1,) + b.shape[-2:])
        out = np.stack([_sytrs(ld[i], piv[i], flat[i]) for i in range(flat.shape[0])]) \
            if flat.shape[0] else flat.copy()
        return Tensor._wrap(xp.asarray(out.reshape(b.shape).astype(b.dtype)), B.backend)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for linalg.ldl_solve is not implemented (nor in torch)")


def ldl_solve(LD, pivots, B, *, hermitian=False):  # noqa: N803
    """torch.linalg.ldl_solve: X with A X = B for A = P L D Lᵀ Pᵀ given by ldl_factor's
    (LD, pivots), LD (..., n, n), B (..., n, k), batch dims broadcast (LAPACK's sytrs). No
    gradient (as torch's)."""
    LD = _matrices("ldl_solve", LD, square=True)  # noqa: N806
    if not isinstance(pivots, Tensor) or not isinstance(B, Tensor):
        raise TypeError("linalg.ldl_solve: LD, pivots and B must be tensors")
    n = LD.shape[-1]
    if pivots._data.dtype.kind not in "iu" or tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise ShapeError(f"linalg.ldl_solve: pivots must be an int32 tensor of shape "
                         f"{fmt_shape(LD.shape[:-1])} for LD {fmt_shape(LD.shape)}, got "
                         f"{pivots._data.dtype} {fmt_shape(pivots.shape)}")
    if B.ndim < 2 or B.shape[-2] != n:
        raise ShapeError(f"linalg.ldl_solve: B must be (..., {n}, k) for LD "
                         f"{fmt_shape(LD.shape)}, got B {fmt_shape(B.shape)}")
    try:
        np.broadcast_shapes(tuple(LD.shape[:-2]), tuple(B.shape[:-2]))
    except ValueError:
        raise ShapeError(f"linalg.ldl_solve: the batch dims of LD {fmt_shape(LD.shape)} and B "
                         f"{fmt_shape(B.shape)} do not broadcast") from None
    return LinalgLdlSolve.apply(LD, pivots, B)
