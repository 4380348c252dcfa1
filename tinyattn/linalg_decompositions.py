"""torch.linalg's factorizations with gradients: svd, svdvals, eigh, eigvalsh, qr, lu, lu_factor,
lu_solve, matrix_exp and pinv (their named tuples, torch.return_types' linalg_svd, linalg_eigh,
linalg_qr, linalg_lu and linalg_lu_factor, are in return_types.py). tinyattn/linalg.py gives
them out.

Each factorization is an autograd.Function (function.py): its forward runs on arrays, batched over
the leading dims, with the backend's xp.linalg (LU and the matrix exponential by the batched code
below: NumPy has neither); its backward is torch's formula written with tensor ops, so that
create_graph differentiates it again. Real inputs only (torch's complex gauge checks do not
arise); float16 is computed in float32 and given back in float16; integers are a DTypeError.
The backward formulas (X the output, ᵀ a transpose, E_ij = s_j² - s_i² or λ_j - λ_i, 1 on the
diagonal):
  svd: gA = U [(skew(UᵀgU) S + S skew(VᵀgV)) / E + diag(gS)] Vᵀ, plus the (I - UUᵀ) gU S⁻¹ Vᵀ
    (m > n) or U S⁻¹ gVh (I - VVᵀ) (m < n) parts; with gS alone, U diag(gS) Vᵀ (svdvals:
    finite at repeated singular values). full_matrices=True: the gradient of U's columns past
    min(m, n), and of Vh's rows, is ignored (torch's documented rule).
  eigh: gA = V [skew(VᵀgV)/2 / E + diag(gλ)] Vᵀ (symmetric: the gradient torch gives, though
    forward reads one triangle, UPLO).
  qr (reduced, or m <= n): gA = Q (gR + tril(Qᵀ gQ - gQᵀ Q + R gRᵀ - gR Rᵀ) R⁻ᵀ)
    + (gQ - Q Qᵀ gQ) R⁻ᵀ, and for m < n the columns past m through Q. mode='r', and
    mode='complete' with m > n, refuse backward with torch's messages.
  lu: gA = P L⁻ᵀ [tril(Lᵀ gL, -1) + triu(gU Uᵀ)] U⁻ᵀ, with the extra rows (m > n) or columns
    (m < n) of the factors solved through; lu_factor and lu_solve are composites of it and of
    solve_triangular.
  matrix_exp: gA = the top-right block of exp([[Aᵀ, g], [0, Aᵀ]]).
  pinv: torch's closed form (pinv_backward), exact where the rank does not change.
A gradient that is all zeros counts as none (the create_graph pass gives zeros for an output
that got nothing): so svdvals' and eigvalsh' gradients stay finite at repeated values there too.
"""


import numpy as np

from .autograd import apply, is_grad_enabled
from .errors import ShapeError, fmt_shape
from .function import Function
from .ops import linalg as la
from .ops import shape as sh
from .ops.op import wide
from .return_types import linalg_eigh, linalg_lu, linalg_lu_factor, linalg_qr, linalg_svd
from .tensor import Tensor

__all__ = ["svd", "svdvals", "eigh", "eigvalsh", "qr", "lu", "lu_factor", "lu_solve",
           "matrix_exp", "pinv"]


# ---- checks and helpers -----------------------------------------------------------------------


def _matrices(name, x, square=False):
    """x, a tensor of (..., m, n) floating point matrices (square ones if `square`)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"linalg.{name}: expected a tensor, got {type(x).__name__}")
    a = x._data
    if square:
        la._square(name, a)
    elif a.ndim < 2:
        raise ShapeError(f"linalg.{name}: A must have at least 2 dims (..., m, n), got shape "
                         f"{fmt_shape(a.shape)}")
    la._floating(name, a)
    return x


def _out(array, like):
    """A Tensor on `array` in the dtype of tensor `like` (float16 computed in float32)."""
    return Tensor._wrap(array.astype(like._data.dtype, copy=False), like.backend)


def _const(like, array):
    return Tensor._wrap(array, like.backend)


def _eye(like, n):
    return _const(like, like.backend.xp.eye(n, dtype=like._data.dtype))


def _given(g):
    """g, or None where no gradient came (None, or all zeros: see the module's docstring)."""
    if g is None or not bool(g.backend.xp.any(g._data)):
        return None
    return g


def _factors(ctx, fn, *params):
    """The factors a backward reads: those forward saved (after the input); in a create_graph
    pass, the factorization run again on the input with a graph (`fn.apply`), since an output
    the caller dropped (svdvals' U and Vh) would come back as a constant, without its path to A.
    LAPACK is deterministic: the same values, the same signs."""
    saved = ctx.saved_tensors
    if not is_grad_enabled():
        return saved[1:]
    outs = fn.apply(saved[0], *params)
    return outs[:len(saved) - 1]


def _zero_if_none(g, like):
    return like * 0 if g is None else g


def _skew(x):
    return x - x.mT


def _call(name, fn, *arrays, why="the algorithm did not converge"):
    return la._lapack(name, why, fn, *arrays)


def _rinv_t(x, r):
    """x R⁻ᵀ for upper-triangular R: Z with Z Rᵀ = x (a recorded solve_triangular)."""
    return apply(la.solve_triangular, r.mT, x, upper=False, left=False)


def _linv_t(low, x, unit=True):
    """L⁻ᵀ x for lower-triangular L (unit diagonal if `unit`)."""
    return apply(la.solve_triangular, low.mT, x, upper=True, unitriangular=unit)


def _uinv_t_right(x, up):
    """x U⁻ᵀ for upper-triangular U."""
    return apply(la.solve_triangular, up.mT, x, upper=False, left=False)


# ---- SVD --------------------------------------------------------------------------------------


class LinalgSvd(Function):
    """A = U diag(S) Vh: (U, S, Vh) for A (..., m, n)."""

    @staticmethod
    def forward(ctx, A, full_matrices):  # noqa: N803 - torch's argument name
        a = A._data
        u, s, vh = _call("svd", lambda w: A.backend.xp.linalg.svd(
            w, full_matrices=full_matrices), wide(a))
        outs = _out(u, A), _out(s, A), _out(vh, A)
        ctx.full = full_matrices
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, *outs)
        return outs

    @staticmethod
    def backward(ctx, gU, gS, gVh):  # noqa: N803
        u, s, vh = _factors(ctx, LinalgSvd, ctx.full)
        return _svd_backward(u, s, vh, _given(gU), _given(gS), _given(gVh), ctx.full), None


def _svd_backward(u, s, vh, gu, gs, gvh, full):
    """torch's svd_backward (FunctionsManual.cpp), real case."""
    k = s.shape[-1]
    if full:
        u, vh = u[..., :k], vh[..., :k, :]
        gu = None if gu is None else gu[..., :k]
        gvh = None if gvh is None else gvh[..., :k, :]
    m, n = u.shape[-2], vh.shape[-1]
    if gu is None and gvh is None:
        gs = _zero_if_none(gs, s)
        return (u * gs.unsqueeze(-2)) @ vh
    ga = _svd_core(u, s, vh, gu, gvh)
    if gs is not None:
        ga = ga + gs.diag_embed()
    if m > n and gu is not None:
        gus = gu / s.unsqueeze(-2)
        return (u @ ga + gus - u @ (u.mT @ gus)) @ vh
    if m < n and gvh is not None:
        sgv = gvh / s.unsqueeze(-1)
        return u @ (ga @ vh + sgv - (sgv @ vh.mT) @ vh)
    return u @ ga @ vh


def _svd_core(u, s, vh, gu, gvh):
    """(skew(UᵀgU) S + S skew(Vh gVhᵀ)) / E, E_ij = s_j² - s_i² (1 on the diagonal)."""
    s2 = s * s
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1) + _eye(s, s.shape[-1])
    if gu is None:
        return s.unsqueeze(-1) * _skew(vh @ gvh.mT) / e
    left = _skew(u.mT @ gu) * s.unsqueeze(-2)
    if gvh is None:
        return left / e
    return (left + s.unsqueeze(-1) * _skew(vh @ gvh.mT)) / e


def _no_driver(name, driver):
    if driver is not None:
        raise ValueError(f"linalg.{name}: keyword argument `driver=` is only supported on CUDA "
                         f"inputs with cuSOLVER backend (torch's rule), got driver={driver!r}")


def svd(A, full_matrices=True, *, driver=None):  # noqa: N803 - torch's argument name
    """torch.linalg.svd: the named tuple (U, S, Vh) with A = U diag(S) Vh, S descending, for
    A (..., m, n): U (..., m, m) and Vh (..., n, n) with full_matrices (the default), else
    (..., m, k) and (..., k, n), k = min(m, n). The signs of the singular vectors are LAPACK's
    (torch's CPU gives the same up to sign). Gradients as torch (see the module's docstring):
    finite where the singular values are distinct (and nonzero, for U's or V's gradient when
    m != n); with full_matrices, those of U's columns and Vh's rows past k are ignored."""
    _no_driver("svd", driver)
    return linalg_svd(*LinalgSvd.apply(_matrices("svd", A), bool(full_matrices)))


def svdvals(A, *, driver=None):  # noqa: N803
    """torch.linalg.svdvals: the singular values of A (..., m, n), shape (..., min(m, n)),
    descending; the gradient U diag(g) Vᵀ (finite at repeated values too)."""
    _no_driver("svdvals", driver)
    A = _matrices("svdvals", A)  # noqa: N806
    if A.requires_grad:
        return LinalgSvd.apply(A, False)[1]
    s = _call("svdvals", lambda w: A.backend.xp.linalg.svd(w, compute_uv=False), wide(A._data))
    return _out(s, A)


# ---- eigh -------------------------------------------------------------------------------------


def _uplo(name, UPLO):  # noqa: N803 - torch's argument name
    if UPLO not in ("L", "U"):
        raise ValueError(f"linalg.{name}: Expected UPLO argument to be 'L' or 'U', but got "
                         f"{UPLO!r}")
    return UPLO


class LinalgEigh(Function):
    """A = V diag(λ) Vᵀ for symmetric A (one triangle read): (λ ascending, V)."""

    @staticmethod
    def forward(ctx, A, UPLO):  # noqa: N803
        lam, v = _call("eigh", lambda w: A.backend.xp.linalg.eigh(w, UPLO=UPLO), wide(A._data))
        outs = _out(lam, A), _out(v, A)
        ctx.uplo = UPLO
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, *outs)
        return outs

    @staticmethod
    def backward(ctx, gL, gV):  # noqa: N803
        lam, v = _factors(ctx, LinalgEigh, ctx.uplo)
        gl, gv = _given(gL), _given(gV)
        if gv is None:
            gl = _zero_if_none(gl, lam)
            return (v * gl.unsqueeze(-2)) @ v.mT, None
        e = lam.unsqueeze(-2) - lam.unsqueeze(-1) + _eye(lam, lam.shape[-1])
        inner = 0.5 * _skew(v.mT @ gv) / e
        if gl is not None:
            inner = inner + gl.diag_embed()
        return v @ inner @ v.mT, None


def eigh(A, UPLO="L"):  # noqa: N803 - torch's argument names
    """torch.linalg.eigh: the named tuple (eigenvalues, eigenvectors) of symmetric A (..., n, n),
    eigenvalues ascending, of which only the lower (UPLO='L') or upper ('U') triangle is read.
    The eigenvectors' signs are LAPACK's. The gradient is torch's, symmetric (finite where the
    eigenvalues are distinct, for the eigenvectors' gradient)."""
    A = _matrices("eigh", A, square=True)  # noqa: N806
    return linalg_eigh(*LinalgEigh.apply(A, _uplo("eigh", UPLO)))


def eigvalsh(A, UPLO="L"):  # noqa: N803
    """torch.linalg.eigvalsh: the eigenvalues of symmetric A (..., n, n), ascending; the
    gradient V diag(g) Vᵀ."""
    A = _matrices("eigvalsh", A, square=True)  # noqa: N806
    UPLO = _uplo("eigvalsh", UPLO)  # noqa: N806
    if A.requires_grad:
        return LinalgEigh.apply(A, UPLO)[0]
    lam = _call("eigvalsh", lambda w: A.backend.xp.linalg.eigvalsh(w, UPLO=UPLO), wide(A._data))
    return _out(lam, A)


# ---- QR ---------------------------------------------------------------------------------------


class LinalgQr(Function):
    """A = Q R: (Q, R); Q empty for mode='r'."""

    @staticmethod
    def forward(ctx, A, mode):  # noqa: N803
        xp = A.backend.xp
        got = _call("qr", lambda w: xp.linalg.qr(w, mode=mode), wide(A._data))
        q, r = (xp.zeros(0), got) if mode == "r" else got
        outs = _out(q, A), _out(r, A)
        ctx.mode = mode
        ctx.save_for_backward(A, *outs)
        return outs

    @staticmethod
    def backward(ctx, gQ, gR):  # noqa: N803
        q, r = _factors(ctx, LinalgQr, ctx.mode)
        m, n = q.shape[-2] if q.ndim >= 2 else 0, r.shape[-1]
        if ctx.mode == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                               "when mode='r'. Please use linalg.qr(A, mode='reduced') if you "
                               "are going to differentiate through linalg.qr.")
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                               "and nrows > ncols.")
        if m >= n:
            return _qr_deep(q, r, gQ, gR), None
        u, gr = r[..., :m], gR[..., :m]
        dv = gR[..., m:]
        gx = _qr_deep(q, u, gQ + (q @ r[..., m:]) @ dv.mT, gr)
        return _cat(gx, q @ dv, -1), None


def _cat(a, b, dim):
    return apply(sh.cat, a, b, dim=dim)


def _qr_deep(q, r, gq, gr):
    """The gradient for Q (m, n), R (n, n), m >= n."""
    qdq = q.mT @ gq
    low = (_skew(qdq) + _skew(r @ gr.mT)).tril()
    return q @ (gr + _rinv_t(low, r)) + _rinv_t(gq - q @ qdq, r)


def qr(A, mode="reduced"):  # noqa: N803
    """torch.linalg.qr: the named tuple (Q, R), A = Q R, for A (..., m, n): mode 'reduced'
    (Q (..., m, k), R (..., k, n), k = min(m, n)), 'complete' (Q (..., m, m), R (..., m, n)) or
    'r' (R alone; Q an empty tensor). Signs are LAPACK's (Householder, as torch's). The
    gradient as torch: not for mode='r', nor for mode='complete' with m > n."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: qr received unrecognized mode '{mode}' but expected one of "
                         "'reduced' (default), 'r', or 'complete'")
    return linalg_qr(*LinalgQr.apply(_matrices("qr", A), mode))


# ---- LU ---------------------------------------------------------------------------------------


def _lu_arrays(xp, a, pivot):
    """Batched LU with partial pivoting (row swaps as LAPACK's getrf: the largest |entry| of
    the column, the first such): (perm, L, U, pivots), A[perm] = L U, pivots 1-based."""
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    w = a.reshape((-1, m, n)).copy()
    rows = xp.arange(w.shape[0])
    perm = xp.broadcast_to(xp.arange(m), (w.shape[0], m)).copy()
    pivots = xp.zeros((w.shape[0], k), dtype=np.int32)
    for j in range(k):
        p = j + xp.argmax(xp.abs(w[:, j:, j]), axis=1) if pivot else xp.full(w.shape[0], j)
        pivots[:, j] = p + 1
        w[rows, j], w[rows, p] = w[rows, p], w[rows, j].copy()
        perm[rows, j], perm[rows, p] = perm[rows, p], perm[rows, j].copy()
        head = w[:, j, j]
        scale = xp.where(head == 0, 0, 1 / xp.where(head == 0, 1, head))
        w[:, j + 1:, j] *= scale[:, None]
        w[:, j + 1:, j + 1:] -= w[:, j + 1:, j, None] * w[:, j, None, j + 1:]
    low = xp.tril(w[:, :, :k], -1) + xp.eye(m, k, dtype=w.dtype)
    up = xp.triu(w[:, :k, :])
    return (perm.reshape(batch + (m,)), low.reshape(batch + (m, k)),
            up.reshape(batch + (k, n)), pivots.reshape(batch + (k,)))


def _permutation(xp, perm, dtype):
    """P with P[perm[r], r] = 1 (so A = P L U when A[perm] = L U)."""
    m = perm.shape[-1]
    return (xp.arange(m)[:, None] == perm[..., None, :]).astype(dtype)


class LinalgLu(Function):
    """A = P L U (partial pivoting): (P, L, U, pivots); P and pivots get no gradient."""

    @staticmethod
    def forward(ctx, A, pivot):  # noqa: N803
        xp = A.backend.xp
        perm, low, up, pivots = _lu_arrays(xp, wide(A._data), pivot)
        p = _out(_permutation(xp, perm, low.dtype), A)
        outs = p, _out(low, A), _out(up, A), _const(A, pivots)
        ctx.mark_non_differentiable(p)
        ctx.pivot = pivot
        ctx.save_for_backward(A, *outs[:3])
        return outs

    @staticmethod
    def backward(ctx, gP, gL, gU, gpiv):  # noqa: N803
        p, low, up = _factors(ctx, LinalgLu, ctx.pivot)
        m, n = low.shape[-2], up.shape[-1]
        if m == n:
            return p @ _lu_square(low, up, gL, gU), None
        if m < n:  # A = P L [U1 | U2]: U2 = L⁻¹ Pᵀ A2
            u1, u2, gu2 = up[..., :m], up[..., m:], gU[..., m:]
            g1 = _lu_square(low, u1, gL - _linv_t(low, gu2) @ u2.mT, gU[..., :m])
            return p @ _cat(g1, _linv_t(low, gu2), -1), None
        # m > n: Pᵀ A = [L1; L2] U: L2 = A2' U⁻¹
        l1, l2, gl2 = low[..., :n, :], low[..., n:, :], gL[..., n:, :]
        g2 = _uinv_t_right(gl2, up)
        g1 = _lu_square(l1, up, gL[..., :n, :], gU - l2.mT @ g2)
        return p @ _cat(g1, g2, -2), None


def _lu_square(low, up, gl, gu):
    """L⁻ᵀ [tril(Lᵀ gL, -1) + triu(gU Uᵀ)] U⁻ᵀ (square L and U)."""
    mid = (low.mT @ gl).tril(-1) + (gu @ up.mT).triu()
    return _uinv_t_right(_linv_t(low, mid), up)


def _lu_run(name, A, pivot):  # noqa: N803
    return LinalgLu.apply(_matrices(name, A), bool(pivot))


def lu(A, *, pivot=True):  # noqa: N803
    """torch.linalg.lu: the named tuple (P, L, U), A = P L U, for A (..., m, n): P (..., m, m) a
    permutation matrix (A's dtype), L (..., m, k) unit lower-triangular, U (..., k, n) upper,
    k = min(m, n); partial pivoting as LAPACK's (pivot=False: none, which torch's CPU refuses).
    The gradient is torch's (P has none); finite where U's diagonal has no zero."""
    p, low, up, _ = _lu_run("lu", A, pivot)
    return linalg_lu(p, low, up)


def _pack_lu(low, up):
    """L's strict lower part and U in one (..., m, n) matrix, as LAPACK's getrf leaves them."""
    m, n = low.shape[-2], up.shape[-1]
    strict = low.tril(-1)
    if m >= n:
        pad = _const(up, up.backend.xp.zeros(up.shape[:-2] + (m - n, n), dtype=up._data.dtype))
        return strict + _cat(up, pad, -2)
    pad = _const(low, low.backend.xp.zeros(low.shape[:-2] + (m, n - m), dtype=low._data.dtype))
    return _cat(strict, pad, -1) + up


def lu_factor(A, *, pivot=True):  # noqa: N803
    """torch.linalg.lu_factor: the named tuple (LU, pivots): L's strict lower part and U packed
    in LU (..., m, n), pivots (..., k) int32, 1-based: row i was swapped with row pivots[i]
    (LAPACK's getrf). The gradient is lu's through the packing."""
    _, low, up, pivots = _lu_run("lu_factor", A, pivot)
    return linalg_lu_factor(_pack_lu(low, up), pivots)


def _perm_of_pivots(xp, pivots, n):
    """The permutation the row swaps of `pivots` (1-based, LAPACK's) make: A[perm] = L U."""
    flat = pivots.reshape((-1, pivots.shape[-1])).astype(np.int64) - 1
    perm = xp.broadcast_to(xp.arange(n), (flat.shape[0], n)).copy()
    rows = xp.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j]
        perm[rows, j], perm[rows, p] = perm[rows, p], perm[rows, j].copy()
    return perm.reshape(pivots.shape[:-1] + (n,))


def _lu_solve_checks(LU, pivots, B):  # noqa: N803
    _matrices("lu_solve", LU, square=True)
    if not isinstance(B, Tensor) or not isinstance(pivots, Tensor):
        raise TypeError("linalg.lu_solve: LU, pivots and B must be tensors")
    n = LU.shape[-1]
    if pivots._data.dtype.kind not in "iu" or tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise ShapeError(f"linalg.lu_solve: pivots must be an int32 tensor of shape "
                         f"{fmt_shape(LU.shape[:-1])} for LU {fmt_shape(LU.shape)}, got "
                         f"{pivots._data.dtype} {fmt_shape(pivots.shape)}")
    if B.ndim < 2:
        raise ShapeError(f"linalg.lu_solve: B must have at least 2 dims, got shape "
                         f"{fmt_shape(B.shape)}")
    piv = pivots._data
    if piv.size and (int(piv.min()) < 1 or int(piv.max()) > n):
        raise ValueError(f"linalg.lu_solve: pivots must be in 1..{n}, got values from "
                         f"{int(piv.min())} to {int(piv.max())}")


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):  # noqa: N803
    """torch.linalg.lu_solve: X with A X = B (Aᵀ X = B if adjoint; X A = B, or X Aᵀ = B, for
    left=False), A = P L U given by lu_factor's (LU, pivots), LU (..., n, n), B (..., n, k) (or
    (..., k, n) for left=False), batch dims broadcast. A composite of solve_triangular and a
    permutation, so LU and B get torch's gradients (of its gradients too)."""
    _lu_solve_checks(LU, pivots, B)
    xp = LU.backend.xp
    n = LU.shape[-1]
    p = _const(LU, _permutation(xp, _perm_of_pivots(xp, pivots._data, n), LU._data.dtype))
    if not left:  # X A = B is Aᵀ Xᵀ = Bᵀ; X Aᵀ = B is A Xᵀ = Bᵀ
        return lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    la._rhs("lu_solve", LU._data, B._data)
    if adjoint:  # Uᵀ Lᵀ Pᵀ X = B
        y = apply(la.solve_triangular, LU.mT, B, upper=False)
        return p @ apply(la.solve_triangular, LU.mT, y, upper=True, unitriangular=True)
    y = apply(la.solve_triangular, LU, p.mT @ B, upper=False, unitriangular=True)
    return apply(la.solve_triangular, LU, y, upper=True)


# ---- matrix exponential -----------------------------------------------------------------------

_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _expm(xp, a):
    """exp(A) for (..., n, n) A: scaling and squaring with the [13/13] Padé approximant
    (Higham 2005), each matrix scaled by its own power of two."""
    n = a.shape[-1]
    if a.size == 0:
        return a.copy()
    norm = xp.abs(a).sum(axis=-2).max(axis=-1)  # the 1-norm of each matrix
    with np.errstate(divide="ignore"):
        s = xp.maximum(0, xp.ceil(xp.log2(norm / _THETA13))).astype(np.int64)
    s = xp.where(xp.isfinite(norm), s, 0)
    a = a / (2.0 ** s)[..., None, None]
    b = _PADE13
    eye = xp.eye(n, dtype=a.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
             + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
        + b[0] * eye
    r = xp.linalg.solve(v - u, v + u)
    for i in range(int(s.max()) if s.size else 0):
        r = xp.where((s > i)[..., None, None], r @ r, r)
    return r


class LinalgMatrixExp(Function):
    """exp(A) = Σ Aᵏ/k!."""

    @staticmethod
    def forward(ctx, A):  # noqa: N803
        ctx.save_for_backward(A)
        return _out(_expm(A.backend.xp, wide(A._data)), A)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        n = a.shape[-1]
        at = a.mT
        zeros = at * 0
        block = _cat(_cat(at, g, -1), _cat(zeros, at, -1), -2)
        return LinalgMatrixExp.apply(block)[..., :n, n:]


def matrix_exp(A):  # noqa: N803
    """torch.linalg.matrix_exp: exp(A) = Σ Aᵏ/k! for A (..., n, n) (Padé, scaling and
    squaring); the gradient is the top-right block of exp([[Aᵀ, g], [0, Aᵀ]]) (so of any order).
    (torch.matrix_exp is the same.)"""
    return LinalgMatrixExp.apply(_matrices("matrix_exp", A, square=True))


# ---- pseudo-inverse ---------------------------------------------------------------------------


def _tolerances(name, A, atol, rtol):  # noqa: N803
    """(atol, rtol) as arrays over A's batch (or Python floats), torch's defaults: rtol =
    eps·max(m, n) when neither is given, 0 when only atol is (a positive one)."""
    def value(t):
        return t._data[..., None] if isinstance(t, Tensor) else float(t)

    eps = float(np.finfo(A._data.dtype).eps)
    if atol is None and rtol is None:
        return 0.0, eps * max(A.shape[-2:])
    if rtol is None:
        return value(atol), 0.0
    return (0.0 if atol is None else value(atol)), value(rtol)


def _pinv_array(xp, a, atol, rtol, hermitian):
    """A⁺ by SVD (or by eigh if hermitian), values at or under max(atol, rtol·σ_max) dropped."""
    if hermitian:
        lam, v = xp.linalg.eigh(a)
        big = xp.abs(lam)
        keep = big > xp.maximum(atol, rtol * big.max(axis=-1, keepdims=True, initial=0))
        inv = xp.where(keep, 1 / xp.where(keep, lam, 1), 0)
        return (v * inv[..., None, :]) @ la._mt(xp, v)
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    keep = s > xp.maximum(atol, rtol * s.max(axis=-1, keepdims=True, initial=0))
    inv = xp.where(keep, 1 / xp.where(keep, s, 1), 0)
    return (la._mt(xp, vh) * inv[..., None, :]) @ la._mt(xp, u)


class LinalgPinv(Function):
    """A⁺, the Moore-Penrose pseudo-inverse."""

    @staticmethod
    def forward(ctx, A, atol, rtol, hermitian):  # noqa: N803
        xp = A.backend.xp
        out = _out(_call("pinv", lambda w: _pinv_array(xp, w, atol, rtol, hermitian),
                         wide(A._data)), A)
        ctx.save_for_backward(A, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, p = ctx.saved_tensors
        return _pinv_backward(g, p, a), None, None, None


def _pinv_backward(g, p, a):
    """torch's pinv_backward: the derivative of A⁺ where A's rank does not change."""
    m, n = a.shape[-2], a.shape[-1]
    pt, gt = p.mT, g.mT
    if m <= n:
        k = gt @ p
        kpt = k @ pt
        return -(p @ k).mT + kpt - (a @ p) @ kpt + (pt @ p) @ (gt - k @ a)
    k = p @ gt
    ptk = pt @ k
    return -(k @ p).mT + (gt - a @ k) @ p @ pt + ptk - ptk @ p @ a


def pinv(A, *, atol=None, rtol=None, hermitian=False, rcond=None):  # noqa: N803
    """torch.linalg.pinv: the pseudo-inverse A⁺ (..., n, m) of A (..., m, n), by SVD (by eigh
    with hermitian=True, reading A's lower triangle), singular values at or under
    max(atol, rtol·σ_max) taken as zero; torch's defaults (rtol = eps·max(m, n)); rcond is
    torch's older name for rtol. atol and rtol may be floats or tensors over the batch dims.
    The gradient is torch's closed form (exact where the rank does not change)."""
    A = _matrices("pinv", A, square=bool(hermitian))  # noqa: N806
    if rcond is not None:
        if rtol is not None:
            raise ValueError("linalg.pinv: give rtol or rcond (its older name), not both")
        rtol = rcond
    atol, rtol = _tolerances("pinv", A, atol, rtol)
    return LinalgPinv.apply(A, atol, rtol, bool(hermitian))
