"""Dense solvers and factorizations with gradients: inv, det, slogdet, solve, cholesky and
solve_triangular (torch.linalg's; the public functions, with torch's names and argument rules,
are in tinyattn/linalg.py, the Tensor methods in tensor.py).

Each takes (..., n, n) matrices, batched over the leading dims (solve and solve_triangular
broadcast A's batch dims against B's), and runs the backend's `xp.linalg` (NumPy's LAPACK, or
CuPy's). Integer and bool inputs are refused, as torch refuses them; float16 is computed in
float32 and rounded back to float16 (torch's CPU refuses float16). A singular matrix (inv,
solve, solve_triangular) or one that is not positive-definite (cholesky) raises
errors.LinAlgError, as torch raises torch.linalg.LinAlgError (on NumPy: CuPy gives inf or NaN
instead, without a check that would wait for the device).
slogdet's output is one array (2, ...): the sign, then log|det A| (linalg.slogdet splits it).
cholesky factors (A + Aᵀ)/2 (torch reads one triangle of A; the same on the symmetric matrices
it is meant for), so that its gradient, the symmetric one torch gives, is a true derivative.
The VJPs are the textbook ones (X the output):
  inv: gA = -Xᵀ g Xᵀ;  det: gA = g det(A) A⁻ᵀ (the cofactors, by an SVD when A is singular);
  slogdet: gA = g A⁻ᵀ;  solve: gB = A⁻ᵀ g, gA = -gB Xᵀ;
  cholesky: gA = L⁻ᵀ Φ L⁻¹, Φ = tril(Lᵀ gL) made symmetric with its diagonal halved;
  solve_triangular: as solve, with gA kept to A's triangle (its strict part if unitriangular).
Every forward sits directly above its VJP.
"""

import numpy as np

from ..errors import DTypeError, LinAlgError, ShapeError, fmt_shape
from .op import op, wide
from .samples import case, vals

_RNG = np.random.default_rng(7)  # the samples' fixed matrices, drawn once at import


def _well(*shape, sign=1.0):
    """A sample: fixed (n, n) matrices, well-conditioned whatever the draw: entries in
    [-1/2, 1/2) plus n·I, so each row's diagonal (over n - 1/2) outweighs the sum of its other
    entries (under (n - 1)/2): strictly diagonally dominant, never near singular."""
    n = shape[-1]
    return vals(sign * (_RNG.uniform(-0.5, 0.5, shape) + n * np.eye(n)))


def _spd(*shape):
    """A sample: fixed symmetric positive-definite matrices M Mᵀ + I."""
    m = _RNG.standard_normal(shape)
    return vals(m @ np.swapaxes(m, -1, -2) + np.eye(shape[-1]))


# ---- checks and helpers -----------------------------------------------------------------------


def _floating(name, *arrays):
    """torch's rule: floating point matrices, all of one dtype."""
    for a in arrays:
        if a.dtype.kind != "f":
            raise DTypeError(f"linalg.{name}: expected a floating point tensor, got {a.dtype} "
                             f"{fmt_shape(a.shape)}; convert it first, e.g. with .double()")
    if any(a.dtype != arrays[0].dtype for a in arrays):
        shown = " and ".join(f"{a.dtype} {fmt_shape(a.shape)}" for a in arrays)
        raise DTypeError(f"linalg.{name}: A and B must have the same dtype, got {shown}")


def _square(name, a):
    """A (..., n, n) floating point array, else a ShapeError (or DTypeError) naming `name`."""
    if a.ndim < 2:
        raise ShapeError(f"linalg.{name}: A must have at least 2 dims (..., n, n), got shape "
                         f"{fmt_shape(a.shape)}")
    if a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"linalg.{name}: A must be batches of square matrices, got shape "
                         f"{fmt_shape(a.shape)} ({a.shape[-2]} by {a.shape[-1]} matrices)")
    _floating(name, a)


def _mt(xp, a):
    return xp.swapaxes(a, -1, -2)


def _lapack(name, why, fn, *arrays):
    """fn(*arrays), NumPy's LinAlgError (singular, not positive-definite) as ours."""
    try:
        return fn(*arrays)
    except np.linalg.LinAlgError:
        shapes = ", ".join(fmt_shape(a.shape) for a in arrays)
        raise LinAlgError(f"linalg.{name}: {why} (shape {shapes})") from None


def _solve(be, name, a, b):
    """A⁻¹ B for (..., n, n) A and (..., n, k) B, their batch dims broadcast together."""
    xp = be.xp
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ShapeError(f"linalg.{name}: the batch dims of A {fmt_shape(a.shape)} and B "
                         f"{fmt_shape(b.shape)} do not broadcast") from None
    a = xp.broadcast_to(a, batch + a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:])
    return _lapack(name, "the matrix is singular, so the system has no unique solution",
                   xp.linalg.solve, a, b)


def _inv_t(be, name, a):
    """A⁻ᵀ, for a VJP."""
    return _mt(be.xp, _lapack(name, "the gradient needs A⁻¹, and A is singular",
                              be.xp.linalg.inv, a))


def _back(out, like):
    return out.astype(like.dtype, copy=False)


# ---- inverse, determinant ---------------------------------------------------------------------


@op("inv", "ga = -Xᵀ g Xᵀ (X = A⁻¹, the output)", grads=("ga",), saves_out=0,
    samples=[case(_well(3, 3)), case(_well(2, 4, 4)), case(_well(1, 1))])
def inv(be, a):
    """out = A⁻¹"""
    _square("inv", a)
    out = _back(_lapack("inv", "the matrix is singular, so it has no inverse",
                        be.xp.linalg.inv, wide(a)), a)
    return out, (out,)


@inv.defvjp
def inv_vjp(be, g, saved):
    (x,) = saved
    xt = _mt(be.xp, wide(x))
    return (_back(-(xt @ wide(g) @ xt), x),)


@op("det", "ga = g · det A · A⁻ᵀ", grads=("ga",), saves={0: 0}, saves_out=1,
    samples=[case(_well(3, 3)), case(_well(2, 4, 4)), case(_well(3, 3, sign=-1.0))])
def det(be, a):
    """out = det A"""
    _square("det", a)
    out = _back(be.xp.asarray(be.xp.linalg.det(wide(a))), a)
    return out, (a, out)


@det.defvjp
def det_vjp(be, g, saved):
    a, d = saved
    xp = be.xp
    w = wide(a)
    try:
        cof = wide(d)[..., None, None] * _mt(xp, xp.linalg.inv(w))
        if not bool(xp.isfinite(cof).all()):
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:  # singular: the cofactors are finite all the same
        cof = _cofactors(xp, w)
    return (_back(wide(g)[..., None, None] * cof, a),)


def _cofactors(xp, a):
    """The cofactor matrices det(A) A⁻ᵀ of A = U S Vᵀ, singular A too: det(U) det(V) U
    diag(Π_{j≠i} s_j) Vᵀ."""
    u, s, vt = xp.linalg.svd(a)
    n = a.shape[-1]
    others = xp.where(xp.eye(n, dtype=bool), 1, s[..., None, :]).prod(-1)  # Π_{j≠i} s_j
    signs = xp.linalg.det(u) * xp.linalg.det(vt)
    return signs[..., None, None] * (u * others[..., None, :]) @ vt


@op("slogdet", "ga = g[1] · A⁻ᵀ (out[1] = log|det A|; out[0], the sign, has no gradient)",
    grads=("ga",), saves={0: 0},
    samples=[case(_well(3, 3)), case(_well(3, 3, sign=-1.0)), case(_well(2, 2, 2))])
def slogdet(be, a):
    """out = (sign det A, log|det A|), stacked on a new first dim"""
    _square("slogdet", a)
    sign, logabs = be.xp.linalg.slogdet(wide(a))
    return _back(be.xp.stack([be.xp.asarray(sign), be.xp.asarray(logabs)]), a), (a,)


@slogdet.defvjp
def slogdet_vjp(be, g, saved):
    (a,) = saved
    return (_back(wide(g[1])[..., None, None] * _inv_t(be, "slogdet", wide(a)), a),)


# ---- solvers ----------------------------------------------------------------------------------


def _rhs(name, a, b, left=True):
    """B for A (..., n, n): (..., n, k) when left, (..., k, n) when not; torch's message."""
    _floating(name, a, b)
    n = a.shape[-1]
    if b.ndim < 2 or b.shape[-2 if left else -1] != n:
        eq = "AX = B" if left else "XA = B"
        raise ShapeError(f"linalg.{name}: incompatible shapes of A {fmt_shape(a.shape)} and B "
                         f"{fmt_shape(b.shape)} for the equation {eq} (B must be (..., "
                         f"{'n, k' if left else 'k, n'}) with n = {n})")


@op("solve", "gb = A⁻ᵀ g (a solve with Aᵀ), ga = -gb Xᵀ (X = the output)", grads=("ga", "gb"),
    broadcasts=True, saves={0: 0}, saves_out=1,
    samples=[case(_well(3, 3), (3, 2)), case(_well(2, 3, 3), (3, 1)),
             case(_well(3, 3), (2, 3, 4)), case(_well(2, 1, 2, 2), (3, 2, 2))])
def solve(be, a, b):
    """out = A⁻¹ B, B (..., n, k) (linalg.solve takes vectors and left=False too)"""
    _square("solve", a)
    _rhs("solve", a, b)
    out = _back(_solve(be, "solve", wide(a), wide(b)), a)
    return out, (a, out)


@solve.defvjp
def solve_vjp(be, g, saved):
    a, x = saved
    xp = be.xp
    gb = _solve(be, "solve", _mt(xp, wide(a)), wide(g))
    return _back(-(gb @ _mt(xp, wide(x))), a), _back(gb, a)


def _triangle(xp, a, upper, unitriangular):
    """A's upper or lower triangle, with ones on its diagonal if unitriangular."""
    if not unitriangular:
        return xp.triu(a) if upper else xp.tril(a)
    strict = xp.triu(a, 1) if upper else xp.tril(a, -1)
    return strict + xp.eye(a.shape[-1], dtype=a.dtype)


@op("solve_triangular", "gb = T⁻ᵀ g (left) or g T⁻ᵀ (right), ga = -gb Xᵀ (left) or -Xᵀ gb "
    "(right), kept to T's triangle (T = A's triangle, X = the output)", grads=("ga", "gb"),
    broadcasts=True, saves_out=1,
    samples=[case(_well(3, 3), (3, 2), upper=True), case(_well(3, 3), (3, 2), upper=False),
             case(_well(2, 3, 3), (2, 3), upper=False, left=False),
             case(_well(3, 3), (2, 3, 2), upper=True, unitriangular=True)])
def solve_triangular(be, a, b, upper, left=True, unitriangular=False):
    """out = T⁻¹ B (left) or B T⁻¹, T the upper or lower triangle of A"""
    _square("solve_triangular", a)
    _rhs("solve_triangular", a, b, left)
    xp = be.xp
    t = _triangle(xp, wide(a), upper, unitriangular)
    if left:
        x = _solve(be, "solve_triangular", t, wide(b))
    else:  # X T = B: Tᵀ Xᵀ = Bᵀ
        x = _mt(xp, _solve(be, "solve_triangular", _mt(xp, t), _mt(xp, wide(b))))
    out = _back(xp.ascontiguousarray(x), a)
    return out, (t, out)


@solve_triangular.defvjp
def solve_triangular_vjp(be, g, saved, upper, left=True, unitriangular=False):
    t, x = saved
    xp = be.xp
    x, g = wide(x), wide(g)
    if left:
        gb = _solve(be, "solve_triangular", _mt(xp, t), g)
        ga = -(gb @ _mt(xp, x))
    else:
        gb = _mt(xp, _solve(be, "solve_triangular", t, _mt(xp, g)))
        ga = -(_mt(xp, x) @ gb)
    k = (1 if upper else -1) if unitriangular else 0
    ga = xp.triu(ga, k) if upper else xp.tril(ga, k)
    return _back(ga, x), _back(gb, x)


# ---- Cholesky ---------------------------------------------------------------------------------


@op("cholesky", "ga = L⁻ᵀ Φ L⁻¹, Φ = tril(Lᵀ gL) made symmetric, diagonal halved (L = the "
    "factor)", grads=("ga",), saves_out=0,
    samples=[case(_spd(3, 3)), case(_spd(2, 3, 3), upper=True), case(_spd(1, 1))])
def cholesky(be, a, upper=False):
    """out = L, lower-triangular with L Lᵀ = (A + Aᵀ)/2 (Lᵀ, upper-triangular, if upper)"""
    _square("cholesky", a)
    xp = be.xp
    w = wide(a)
    low = _lapack("cholesky", "the input is not positive-definite, so it has no Cholesky "
                  "factor", xp.linalg.cholesky, (w + _mt(xp, w)) / 2)
    out = _back(xp.ascontiguousarray(_mt(xp, low)) if upper else low, a)
    return out, (out,)


@cholesky.defvjp
def cholesky_vjp(be, g, saved, upper=False):
    (out,) = saved
    xp = be.xp
    low, gl = wide(out), wide(g)
    if upper:
        low, gl = _mt(xp, low), _mt(xp, gl)
    phi = xp.tril(_mt(xp, low) @ gl)
    phi = 0.5 * (phi + _mt(xp, xp.tril(phi, -1)))  # symmetric, the diagonal halved
    lt = _mt(xp, low)
    left = _solve(be, "cholesky", lt, phi)  # L⁻ᵀ Φ
    return (_back(_mt(xp, _solve(be, "cholesky", lt, _mt(xp, left))), out),)  # L⁻ᵀ Φ L⁻¹


OPS = (inv, det, slogdet, solve, solve_triangular, cholesky)
