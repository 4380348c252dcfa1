"""torch's older top-level linear-algebra functions, in their own signatures and return
conventions: svd (U, S, V, with V not Vh), pinverse, qr (some=), matrix_exp, cholesky, lu,
lu_solve, lu_unpack, triangular_solve (solution, cloned_coefficient), vdot, nuclear_norm,
frobenius_norm and pdist; and METHODS, the Tensor methods torch has for these and for
routines_more.py's functions (x.svd(), x.cov(), x.ldexp_(), ...), which tinyattn/__init__.py
sets on Tensor (tensor.py sits below the library and cannot import them).

Each is a composite of ta.linalg (linalg.py, linalg_decompositions.py) and of tensor ops, so its
gradients are theirs; the in-place methods go through Tensor._in_place_as (a version bump, a
leaf that requires grad refused, recorded like x = f(x) on a tensor with a graph).
"""

import numpy as np

from . import functional, linalg, routines_more
from .errors import ShapeError, fmt_shape
from .linalg_decompositions import _perm_of_pivots, _permutation
from .return_types import _lu_with_info
from .return_types import lu_unpack as lu_unpack_type
from .return_types import qr as qr_type
from .return_types import svd as svd_type
from .return_types import triangular_solve as triangular_solve_type
from .routines import chunk, split
from .tensor import Tensor, _take_torch_keywords

__all__ = ["svd", "pinverse", "qr", "matrix_exp", "cholesky", "lu", "lu_solve", "lu_unpack",
           "triangular_solve", "vdot", "nuclear_norm", "frobenius_norm", "pdist"]


def _tensor(name, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")
    return x


def _zeros(like, shape):
    return Tensor._wrap(like.backend.xp.zeros(shape, dtype=like._data.dtype), like.backend)


def svd(input, some=True, compute_uv=True):  # noqa: A002 - torch's names
    """torch.svd: the named tuple (U, S, V), input = U diag(S) Vᵀ (V, not linalg.svd's Vh);
    some=True the reduced factors, else the full ones; compute_uv=False: U and V zero matrices
    (..., m, m) and (..., n, n), as torch's, and S's gradient still U diag(g) Vᵀ."""
    x = _tensor("svd", input)
    if not compute_uv:
        s = linalg.svdvals(x)
        m, n = x.shape[-2:]
        batch = tuple(x.shape[:-2])
        return svd_type(_zeros(x, batch + (m, m)), s, _zeros(x, batch + (n, n)))
    u, s, vh = linalg.svd(x, full_matrices=not some)
    return svd_type(u, s, vh.mT)


def pinverse(input, rcond=1e-15):  # noqa: A002
    """torch.pinverse: linalg.pinv with rcond, the cut-off relative to the largest singular
    value (torch's default 1e-15)."""
    return linalg.pinv(_tensor("pinverse", input), rtol=rcond)


def qr(input, some=True):  # noqa: A002
    """torch.qr: the named tuple (Q, R) of linalg.qr, mode 'reduced' (some) or 'complete'."""
    return qr_type(*linalg.qr(_tensor("qr", input), "reduced" if some else "complete"))


def matrix_exp(input):  # noqa: A002
    """torch.matrix_exp: linalg.matrix_exp."""
    return linalg.matrix_exp(_tensor("matrix_exp", input))


def cholesky(input, upper=False):  # noqa: A002
    """torch.cholesky (torch's older name): linalg.cholesky(input, upper=upper)."""
    return linalg.cholesky(_tensor("cholesky", input), upper=upper)


def lu(A, pivot=True, get_infos=False):  # noqa: N803 - torch's argument name
    """torch.lu: the tuple (LU, pivots) of linalg.lu_factor; with get_infos, the named tuple
    (LU, pivots, info) of linalg.lu_factor_ex."""
    got = linalg.lu_factor_ex(_tensor("lu", A), pivot=pivot)
    if get_infos:
        return _lu_with_info(*got)
    return got.LU, got.pivots


def lu_solve(b, LU_data, LU_pivots):  # noqa: N803
    """torch.lu_solve: X with A X = b, A given by lu's (LU_data, LU_pivots)."""
    return linalg.lu_solve(LU_data, LU_pivots, _tensor("lu_solve", b))


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):  # noqa: N803
    """torch.lu_unpack: the named tuple (P, L, U), A = P L U, from lu's (LU_data (..., m, n),
    LU_pivots (..., k)): P (..., m, m), L (..., m, k) unit lower-triangular, U (..., k, n);
    P empty unless unpack_pivots, L and U empty unless unpack_data (as torch). L and U are
    tril and triu of LU_data, so its gradient."""
    lu_data, piv = _tensor("lu_unpack", LU_data), _tensor("lu_unpack", LU_pivots)
    if lu_data.ndim < 2 or tuple(piv.shape) != tuple(lu_data.shape[:-2]) + (
            min(lu_data.shape[-2:]),):
        raise ShapeError(f"lu_unpack: LU_data must be (..., m, n) and LU_pivots (..., min(m, n)), "
                         f"got {fmt_shape(lu_data.shape)} and {fmt_shape(piv.shape)}")
    xp = lu_data.backend.xp
    m, n = lu_data.shape[-2:]
    k = min(m, n)
    empty = _zeros(lu_data, (0,))
    p = empty
    if unpack_pivots:
        perm = _perm_of_pivots(xp, piv._data, m)
        p = Tensor._wrap(_permutation(xp, perm, lu_data._data.dtype), lu_data.backend)
    if not unpack_data:
        return lu_unpack_type(p, empty, empty)
    eye = Tensor._wrap(xp.eye(m, k, dtype=lu_data._data.dtype), lu_data.backend)
    return lu_unpack_type(p, lu_data[..., :, :k].tril(-1) + eye, lu_data[..., :k, :].triu())


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):  # noqa: N803
    """torch.triangular_solve: the named tuple (solution, cloned_coefficient): X with T X = b
    (Tᵀ X = b if transpose), T the upper (upper=True) or lower triangle of A (..., n, n), with
    ones on its diagonal if unitriangular; b (..., n, k); batch dims broadcast.
    cloned_coefficient is A.clone() (its gradient goes to A whole, as torch's); X's gradient
    to A stays in the triangle."""
    b, a = _tensor("triangular_solve", b), _tensor("triangular_solve", A)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"triangular_solve: A must be a (batch of) square matrices, got A "
                         f"{fmt_shape(a.shape)}")
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ShapeError(f"triangular_solve: b must be (..., {a.shape[-1]}, k) for A "
                         f"{fmt_shape(a.shape)}, got b {fmt_shape(b.shape)}")
    try:
        np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except ValueError:
        raise ShapeError(f"triangular_solve: the batch dims of b {fmt_shape(b.shape)} and A "
                         f"{fmt_shape(a.shape)} do not broadcast") from None
    t, up = (a.mT, not upper) if transpose else (a, upper)
    x = linalg.solve_triangular(t, b, upper=up, unitriangular=unitriangular)
    return triangular_solve_type(x, a.clone())


def vdot(input, other):  # noqa: A002
    """torch.vdot: Σ input·other of two 1-D tensors of one size (real: no conjugate)."""
    x, y = _tensor("vdot", input), _tensor("vdot", other)
    if x.ndim != 1 or y.ndim != 1:
        raise ShapeError(f"vdot: 1D tensors expected, but got {x.ndim}D and {y.ndim}D tensors "
                         f"{fmt_shape(x.shape)} and {fmt_shape(y.shape)}")
    if x.shape != y.shape:
        raise ShapeError(f"vdot: inconsistent tensor size, expected tensors {fmt_shape(x.shape)} "
                         f"and {fmt_shape(y.shape)} to have the same number of elements")
    return (x * y).sum()


def nuclear_norm(input, dim=None, keepdim=False):  # noqa: A002
    """torch.nuclear_norm: the sum of the singular values of a 2-D input, or over the two dims
    in dim (torch's two forms: nuclear_norm(x, keepdim) and nuclear_norm(x, dim, keepdim))."""
    x = _tensor("nuclear_norm", input)
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    if dim is None:
        if x.ndim != 2:
            raise ShapeError(f"nuclear_norm: Expected a 2D tensor (or give dim), got shape "
                             f"{fmt_shape(x.shape)}")
        dim = (0, 1)
    return linalg.matrix_norm(x, "nuc", dim=dim, keepdim=keepdim)


def frobenius_norm(input, dim, keepdim=False):  # noqa: A002
    """torch.frobenius_norm: sqrt(Σ x²) over dim (one dim or two)."""
    x = _tensor("frobenius_norm", input)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) not in (1, 2):
        raise ShapeError(f"frobenius_norm: expects one or two dims, got dim={dim!r} for shape "
                         f"{fmt_shape(x.shape)}")
    return x.norm(2, dim=dims, keepdim=keepdim)


pdist = functional.pdist
_take_torch_keywords(globals(), {})  # NumPy's axis=/keepdims= for dim/keepdim (torch takes them)

# ---- Tensor methods (set on Tensor by tinyattn/__init__.py) -------------------------------------


def _in_place(name, fn):
    """x.name(*args): fn(x, *args) written into x by Tensor._in_place_as (its rules)."""
    def method(self, *args, **kwargs):
        return self._in_place_as(name, lambda x: fn(x, *args, **kwargs), *args,
                                 *kwargs.values())
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"{name[:-1]}, in place (see Tensor._in_place_as)."
    return method



def _lu(self, pivot=True, get_infos=False):
    return lu(self, pivot, get_infos)


def _cholesky_solve(self, input2, upper=False):
    return routines_more.cholesky_solve(self, input2, upper)


def _cholesky_inverse(self, upper=False):
    return routines_more.cholesky_inverse(self, upper)


def _split_with_sizes(self, split_sizes, dim=0):
    return routines_more.split_with_sizes(self, split_sizes, dim)


def _unsafe_chunk(self, chunks, dim=0):
    return chunk(self, chunks, dim)


def _unsafe_split(self, split_size, dim=0):
    return split(self, split_size, dim)


_LIBRARY = {  # torch's methods whose function is a library one (their first argument self)
    "svd": svd, "pinverse": pinverse, "qr": qr, "matrix_exp": matrix_exp,
    "cholesky": cholesky, "lu_solve": lu_solve, "triangular_solve": triangular_solve,
    "vdot": vdot, "cov": routines_more.cov, "corrcoef": routines_more.corrcoef,
    "ldexp": routines_more.ldexp, "nextafter": routines_more.nextafter,
    "mvlgamma": routines_more.mvlgamma, "igamma": routines_more.igamma,
    "igammac": routines_more.igammac, "renorm": routines_more.renorm,
    "absolute": routines_more.absolute, "is_same_size": routines_more.is_same_size,
    "is_signed": routines_more.is_signed, "lu": _lu, "frexp": routines_more.frexp,
    "cholesky_solve": _cholesky_solve, "cholesky_inverse": _cholesky_inverse,
    "split_with_sizes": _split_with_sizes, "unsafe_chunk": _unsafe_chunk,
    "unsafe_split": _unsafe_split, "unsafe_split_with_sizes": _split_with_sizes,
}
_take_torch_keywords(_LIBRARY, {})


def _method_of(name, fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = fn.__doc__
    return method


def _nuclear_norm(self, dim, keepdim):
    """x.norm(p="nuc", dim, keepdim) (Tensor.norm calls this, a library function): linalg's
    matrix_norm over the two dims in dim, a matrix's two by default."""
    if dim is None:
        dim = tuple(range(self.ndim)) if self.ndim > 1 else (-2, -1)
    return linalg.matrix_norm(self, "nuc", dim, keepdim)


METHODS = {name: _method_of(name, fn) for name, fn in _LIBRARY.items()}
METHODS["_nuclear_norm"] = _nuclear_norm
METHODS.update({name: _in_place(name, getattr(routines_more, name[:-1])) for name in (
    "ldexp_", "nextafter_", "mvlgamma_", "igamma_", "igammac_", "renorm_")})
