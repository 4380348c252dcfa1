"""torch's module-level functions as tinyattn's: ta.exp(x), ta.sum(x, dim=1), ta.tril(m), ...

Each is the Tensor method of the same name called on its first argument (made a tensor if it
is not one), so it records the same op and has the same gradient. The few with no method of
their own (einsum, meshgrid, std_mean, var_mean, the stacks, repeat_interleave of repeats
alone, isin, tensordot, block_diag, cartesian_prod, combinations, chain_matmul, trapezoid,
cumulative_trapezoid, real and imag) are written out below, with torch's finfo, iinfo and
can_cast, which describe dtypes.
"""

import itertools
import numbers

import numpy as np

from . import dtypes
from .autograd import apply
from .errors import DimError, DTypeError, ShapeError, fmt_shape, warn_user
from .functional import _norm_order, cat, stack
from .ops import index as ix
from .ops import pointwise as pw
from .ops import special as sp
from .ops.op import broadcast_shape, dim1, plain
from .tensor import (
    Tensor,
    _fresh,
    _int_argument,
    _take_torch_keywords,
    _takes_device,
    _values,
    zeros,
)


def _t(x, like=None):
    if isinstance(x, Tensor):
        return x
    return _fresh(x, backend=None if like is None else like.backend)


def _method(name):
    """The function name(input, *args, **kwargs) = input.name(*args, **kwargs)."""
    method = getattr(Tensor, name)

    def fn(input, *args, **kwargs):  # noqa: A002 - torch's argument name
        return method(_t(input), *args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}: the same as Tensor.{name} on the first argument."
    return fn


# pointwise (ops/elementwise.py, ops/pointwise.py)
exp, log, sqrt, tanh, sigmoid, relu, abs = (_method(n) for n in (  # noqa: A001
    "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs"))
sin, cos, tan, asin, acos, atan = (_method(n) for n in ("sin", "cos", "tan", "asin", "acos",
                                                        "atan"))
arcsin, arccos, arctan = asin, acos, atan
sinh, cosh, asinh, acosh, atanh = (_method(n) for n in ("sinh", "cosh", "asinh", "acosh",
                                                        "atanh"))
arcsinh, arccosh, arctanh = asinh, acosh, atanh
exp2, expm1, log2, log10, log1p, erf = (_method(n) for n in ("exp2", "expm1", "log2", "log10",
                                                             "log1p", "erf"))
square, rsqrt, reciprocal = _method("square"), _method("rsqrt"), _method("reciprocal")
floor, ceil, trunc, sign, frac = (_method(n) for n in ("floor", "ceil", "trunc", "sign", "frac"))
sgn = sign
round = _method("round")  # noqa: A001
fix = trunc
atan2, logaddexp, hypot, copysign = (_method(n) for n in ("atan2", "logaddexp", "hypot",
                                                          "copysign"))
arctan2 = atan2
lerp, remainder, fmod, floor_divide = (_method(n) for n in ("lerp", "remainder", "fmod",
                                                            "floor_divide"))
add, sub, mul, div = (_method(n) for n in ("add", "sub", "mul", "div"))
subtract, multiply, divide, true_divide = sub, mul, div, _method("true_divide")
pow, neg, positive = _method("pow"), _method("neg"), _method("positive")  # noqa: A001
negative = neg
mm, bmm, mv, outer = (_method(n) for n in ("mm", "bmm", "mv", "outer"))
nansum, nanmean, xlogy, logaddexp2, float_power = (_method(n) for n in (
    "nansum", "nanmean", "xlogy", "logaddexp2", "float_power"))
deg2rad, rad2deg, sinc, isposinf, isneginf, signbit = (_method(n) for n in (
    "deg2rad", "rad2deg", "sinc", "isposinf", "isneginf", "signbit"))
isreal = _method("isreal")
addmm, addmv, addr, baddbmm, addbmm = (_method(n) for n in (
    "addmm", "addmv", "addr", "baddbmm", "addbmm"))
inner, cross, dist, msort, fliplr, flipud, rot90, tensor_split, diagflat = (_method(n) for n in (
    "inner", "cross", "dist", "msort", "fliplr", "flipud", "rot90", "tensor_split", "diagflat"))
hsplit, vsplit, dsplit, matrix_power = (_method(n) for n in ("hsplit", "vsplit", "dsplit",
                                                              "matrix_power"))
inverse, det, logdet, slogdet = (_method(n) for n in ("inverse", "det", "logdet", "slogdet"))
select_scatter, slice_scatter, diagonal_scatter = (_method(n) for n in (
    "select_scatter", "slice_scatter", "diagonal_scatter"))
conj, resolve_conj, is_conj = _method("conj"), _method("resolve_conj"), _method("is_conj")
ger = outer
addcmul, addcdiv, fmax, fmin = (_method(n) for n in ("addcmul", "addcdiv", "fmax", "fmin"))
nan_to_num = _method("nan_to_num")
maximum, minimum, clamp, clip = (_method(n) for n in ("maximum", "minimum", "clamp", "clip"))
dot = _method("dot")
clamp_min, clamp_max = _method("clamp_min"), _method("clamp_max")
eq, ne, lt, le, gt, ge = (_method(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
equal = _method("equal")
isnan, isinf, isfinite, isclose, allclose = (_method(n) for n in (
    "isnan", "isinf", "isfinite", "isclose", "allclose"))
logical_not, logical_and, logical_or, logical_xor = (_method(n) for n in (
    "logical_not", "logical_and", "logical_or", "logical_xor"))
bitwise_not, bitwise_and, bitwise_or, bitwise_xor = (_method(n) for n in (
    "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"))
bitwise_left_shift, bitwise_right_shift = (_method("bitwise_left_shift"),
                                           _method("bitwise_right_shift"))

# reductions and scans (ops/reduce.py, ops/scan.py)
sum, mean, max, min, amax, amin = (_method(n) for n in (  # noqa: A001
    "sum", "mean", "max", "min", "amax", "amin"))
prod, var, std, logsumexp, norm = (_method(n) for n in ("prod", "var", "std", "logsumexp",
                                                        "norm"))
any, all, median, kthvalue = (_method(n) for n in ("any", "all", "median", "kthvalue"))  # noqa: A001
count_nonzero, aminmax, trace = _method("count_nonzero"), _method("aminmax"), _method("trace")
argmax, argmin = _method("argmax"), _method("argmin")
cumsum, cumprod, cummax, cummin, logcumsumexp = (_method(n) for n in (
    "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"))

# shape, indexing, sorting
reshape, flatten, squeeze, unsqueeze = (_method(n) for n in ("reshape", "flatten", "squeeze",
                                                             "unsqueeze"))
transpose, permute, t, movedim, swapaxes = (_method(n) for n in (
    "transpose", "permute", "t", "movedim", "swapaxes"))
moveaxis, swapdims = movedim, _method("swapdims")
narrow, unbind, split, chunk, flip, roll = (_method(n) for n in (
    "narrow", "unbind", "split", "chunk", "flip", "roll"))
select, take, diff, diag = _method("select"), _method("take"), _method("diff"), _method("diag")
tril, triu, diagonal, tile, diag_embed, ravel = (_method(n) for n in (
    "tril", "triu", "diagonal", "tile", "diag_embed", "ravel"))
gather, index_select, take_along_dim, masked_select, nonzero = (_method(n) for n in (
    "gather", "index_select", "take_along_dim", "masked_select", "nonzero"))
argwhere = _method("argwhere")
scatter, scatter_add, scatter_reduce = (_method(n) for n in ("scatter", "scatter_add",
                                                             "scatter_reduce"))
sort, argsort, topk, unique = (_method(n) for n in ("sort", "argsort", "topk", "unique"))

# special functions, order statistics and counting (ops/special.py)
erfc, erfinv, lgamma, digamma = (_method(n) for n in ("erfc", "erfinv", "lgamma", "digamma"))
quantile, nanquantile, nanmedian, kron = (_method(n) for n in (
    "quantile", "nanquantile", "nanmedian", "kron"))
bincount, histc, unique_consecutive = (_method(n) for n in ("bincount", "histc",
                                                            "unique_consecutive"))
histogram = _method("histogram")
gcd, lcm, heaviside = _method("gcd"), _method("lcm"), _method("heaviside")
clone, detach, unflatten = _method("clone"), _method("detach"), _method("unflatten")


concat = concatenate = cat


def broadcast_to(input, shape):  # noqa: A002
    return _t(input).expand(*shape)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views; one that has that shape
    already comes back itself, as torch's)."""
    tensors = [_t(x, next((t for t in tensors if isinstance(t, Tensor)), None)) for x in tensors]
    shape = broadcast_shape(*(t.shape for t in tensors))
    return tuple(t if t.shape == shape else t.expand(*shape) for t in tensors)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):  # noqa: A002
    """input.repeat_interleave(repeats, dim); or, given a 1-D integer tensor of repeats alone
    (torch.repeat_interleave(repeats)), each index i repeated repeats[i] times: [2, 0, 1] gives
    [0, 0, 2], in the repeats' dtype. output_size, if given, must be the result's length."""
    if repeats is not None:
        return _t(input).repeat_interleave(repeats, dim, output_size=output_size)
    counts = _t(input)
    if counts.dtype.kind not in "iu":
        raise DTypeError(f"repeat_interleave: repeats alone must be an integer tensor, got "
                         f"{counts.dtype}")
    if counts.ndim != 1:
        raise ShapeError(f"repeat_interleave: repeats alone must be 1-D, got "
                         f"{fmt_shape(counts.shape)}")
    index = _fresh(np.arange(counts.shape[0], dtype=counts.dtype), backend=counts.backend)
    return index.repeat_interleave(counts, output_size=output_size)


def _at_least(tensors, ndim, name):
    """The tensors (made tensors) with dims added as torch's atleast_1d/2d/3d add them: a 0-d
    one becomes (1,)*ndim, 1-D (n,) becomes (1, n) and, for 3 dims, (1, n, 1); 2-D (m, n)
    becomes (m, n, 1)."""
    tensors = [_t(x) for x in tensors]
    if not tensors:
        raise ShapeError(f"{name}: needs at least one tensor, got an empty list")
    return [_with_dims(x, ndim) for x in tensors]


def _with_dims(x, ndim):
    """x with at least ndim dims, added as _at_least says."""
    if x.ndim >= ndim:
        return x
    if x.ndim == 0:
        return x.reshape((1,) * ndim)
    if x.ndim == 1:  # (ndim is 2 or 3 here)
        return x.reshape((1, -1, 1)[:ndim])
    return x.reshape(x.shape + (1,))  # 2-D, for 3 dims


def hstack(tensors):
    """Joined along dim 1 (dim 0 for 1-D tensors; 0-d ones count as 1-D)."""
    tensors = _at_least(tensors, 1, "hstack")
    return cat(tensors, dim=0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """Joined along dim 0, 1-D tensors as rows (0-d ones as (1, 1))."""
    return cat(_at_least(tensors, 2, "vstack"), dim=0)


row_stack = vstack


def dstack(tensors):
    """Joined along dim 2 (depth), after atleast_3d: (n,) is (1, n, 1), (m, n) is (m, n, 1)."""
    return cat(_at_least(tensors, 3, "dstack"), dim=2)


def column_stack(tensors):
    """Joined along dim 1, 0-d and 1-D tensors as columns ((n,) becomes (n, 1))."""
    tensors = [_t(x) for x in tensors]
    if not tensors:
        raise ShapeError("column_stack: needs at least one tensor, got an empty list")
    return cat([x.reshape(-1, 1) if x.ndim <= 1 else x for x in tensors], dim=1)


def numel(input):  # noqa: A002
    return _t(input).numel()


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(input):  # noqa: A002
    return input.is_floating_point()


def is_complex(input):  # noqa: A002
    return input.is_complex()


def real(input):  # noqa: A002
    """torch.real: a real tensor itself (Tensor.real)."""
    return _t(input).real


def imag(input):  # noqa: A002
    """torch.imag: refused for a real tensor, as torch's (Tensor.imag)."""
    return _t(input).imag


def _no_complex(name):
    """torch's function `name`, which makes or takes complex tensors: a DTypeError naming it
    and its inputs' shapes (tinyattn has no complex numbers), not an AttributeError."""
    def refuse(*args, **kwargs):
        shapes = ", ".join(fmt_shape(a.shape) for a in args if isinstance(a, Tensor))
        raise DTypeError(f"{name}: {dtypes.NO_COMPLEX} (got {shapes or 'no tensors'})")
    refuse.__name__ = refuse.__qualname__ = name
    return refuse


polar, view_as_complex, view_as_real, complex = (  # noqa: A001 - torch's names
    _no_complex(n) for n in ("polar", "view_as_complex", "view_as_real", "complex"))


def result_type(tensor, other):
    """The dtype an op on the two gives (torch's promotion: a number never raises a tensor's
    precision, only its category)."""
    return dtypes.result_type(*(x._data if isinstance(x, Tensor) else x for x in (tensor, other)))


def promote_types(type1, type2):
    return dtypes.promote_types(np.dtype(type1), np.dtype(type2))


@_takes_device
def tril_indices(row, col, offset=0, *, dtype=None, backend=None):
    """(2, n) int64 (or `dtype`): the row and column indices of the lower triangle (below the
    diagonal `offset`), row by row; device= as torch's."""
    row, col, offset = _triangle_args("tril_indices", row, col, offset)
    return _fresh(np.stack(np.tril_indices(row, offset, col)), dtype=dtype or np.int64,
                  backend=backend)


@_takes_device
def triu_indices(row, col, offset=0, *, dtype=None, backend=None):
    """(2, n) int64 (or `dtype`): the indices of the upper triangle (from the diagonal
    `offset` up), row by row; device= as torch's."""
    row, col, offset = _triangle_args("triu_indices", row, col, offset)
    return _fresh(np.stack(np.triu_indices(row, offset, col)), dtype=dtype or np.int64,
                  backend=backend)


def _triangle_args(name, row, col, offset):
    """tril_indices' and triu_indices' (row, col, offset) as ints, checked as torch: ints
    (a 0-d integer tensor counts; a float or a bool does not), row and col >= 0."""
    row, col, offset = (_int_argument(name, what, v) for what, v in
                        (("row", row), ("col", col), ("offset", offset)))
    for what, n in (("row", row), ("col", col)):
        if n < 0:
            raise ShapeError(f"{name}: {what} must be non-negative, got {n}")
    return row, col, offset


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Where each value would go in the sorted last dim to keep it sorted (int64, int32 with
    out_int32; no gradient); right=True (or side="right") puts it after equal entries; sorter:
    the indices that sort an unsorted sequence along its last dim (argsort's). A number value
    gives a 0-d result."""
    seq = _t(sorted_sequence)
    side = _search_side(side, right)
    vals = _fresh(np.asarray(values), backend=seq.backend) if isinstance(values, (int, float)) \
        else _t(values, seq)
    if seq.ndim == 0 or seq.ndim > 1 and vals.shape[:-1] != seq.shape[:-1]:
        raise ShapeError(f"searchsorted: the sorted sequence {fmt_shape(seq.shape)} must be "
                         f"1-D, or have the leading dims (all but the last) of the values "
                         f"{fmt_shape(vals.shape)}")
    a, v = seq.backend.to_numpy(seq._data), vals.backend.to_numpy(vals._data)
    if sorter is not None:
        a = _sorted_by(a, sorter)
    if a.ndim == 1:
        out = np.searchsorted(a, v, side=side)
    else:
        rows = int(np.prod(a.shape[:-1]))  # (the leading dims match: checked above)
        out = np.empty((rows, v.shape[-1]), dtype=np.int64)
        for i, (r, w) in enumerate(zip(a.reshape(rows, a.shape[-1]),
                                       v.reshape(rows, v.shape[-1]), strict=True)):
            out[i] = np.searchsorted(r, w, side=side)
        out = out.reshape(v.shape)
    return _fresh(np.asarray(out, dtype=np.int32 if out_int32 else np.int64),
                  backend=seq.backend)


def _search_side(side, right):
    """searchsorted's side from side= and right=, which may not disagree (torch's check)."""
    if side is None:
        return "right" if right else "left"
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side can only be 'left' or 'right', got {side!r}")
    if side == "left" and right:
        raise ValueError("searchsorted: side and right can't be set to opposites (side='left' "
                         "with right=True), as torch")
    return side


def _sorted_by(a, sorter):
    """The sequence (a NumPy array) in the order `sorter` gives along its last dim, the
    sorter checked as torch checks it: integers of the sequence's shape, each in range."""
    order = np.asarray(sorter.numpy() if isinstance(sorter, Tensor) else sorter)
    if order.shape != a.shape:
        raise ShapeError(f"searchsorted: sorter {fmt_shape(order.shape)} must have the sorted "
                         f"sequence's shape {fmt_shape(a.shape)}")
    if order.dtype.kind not in "iu":
        raise DTypeError(f"searchsorted: sorter must hold integers (int64), got {order.dtype}")
    if order.size and (order.min() < 0 or order.max() >= a.shape[-1]):
        raise DimError(f"searchsorted: sorter index out of range: its entries must be in "
                       f"0..{a.shape[-1] - 1}")
    return np.take_along_axis(a, order.astype(np.int64), axis=-1)


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """The bucket i of each value among the sorted 1-D boundaries: boundaries[i-1] < x <=
    boundaries[i] (right=True: boundaries[i-1] <= x < boundaries[i]), as torch.bucketize;
    int32 with out_int32; a number input gives a 0-d result."""
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """‖x1[i] - x2[j]‖_p for every pair of rows: (..., P, M), (..., R, M) -> (..., P, R), the
    batch dims broadcast. compute_mode is torch's speed setting: every mode computes the
    differences directly here (torch's exact "donot_use_mm" path), so all give those values."""
    x1 = _t(x1)
    x2 = _t(x2, x1)
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"cdist: compute_mode must be one of {', '.join(_CDIST_MODES)}, "
                         f"got {compute_mode!r}")
    p = _norm_order("cdist", p)
    if not p >= 0:
        raise ValueError(f"cdist: p must be >= 0, got {p}")
    if x1.dtype.kind != "f" or x2.dtype.kind != "f":
        raise DTypeError(f"cdist: takes floating-point tensors (torch's rule), got {x1.dtype} "
                         f"and {x2.dtype}; convert with .float()")
    if x1.ndim < 2 or x2.ndim < 2:
        raise ShapeError(f"cdist: x1 {fmt_shape(x1.shape)} and x2 {fmt_shape(x2.shape)} must "
                         "each be at least 2-D: (..., rows, features)")
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"cdist: x1 {fmt_shape(x1.shape)} and x2 {fmt_shape(x2.shape)} must "
                         "have the same number of features (last dim)")
    try:
        broadcast_shape(x1.shape[:-2], x2.shape[:-2])
    except ValueError:
        raise ShapeError(f"cdist: the batch dims of x1 {fmt_shape(x1.shape)} and x2 "
                         f"{fmt_shape(x2.shape)} (all but the last two) do not broadcast") from None
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, dim=-1)


def logit(input, eps=None):  # noqa: A002
    """log(p / (1 - p)); with eps, p clamped to [eps, 1 - eps] first (ops/pointwise.py: its
    gradient is torch's, inf at p = 0 and 1)."""
    return apply(pw.logit, _t(input), eps=plain(eps, "logit"))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    """(var, mean) over dim (torch's arguments: var_mean(x, 1, False) is the biased one)."""
    x = _t(input)
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return x.var(dim, unbiased, keepdim, correction=correction), x.mean(dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    """(std, mean) over dim (the std as Tensor.std takes it: float16's in float32)."""
    x = _t(input)
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return x.std(dim, unbiased, keepdim, correction=correction), x.mean(dim, keepdim)


def einsum(equation, *operands):
    """Sum of products by an equation: einsum("bij,bjk->bik", a, b) is a batched matmul.
    '...' stands for leading dims; without '->' the output is the letters used once, sorted.
    torch's sublist form einsum(a, [0, 1], b, [1, 2], [0, 2]) is the same as "ab,bc->ac"."""
    if not isinstance(equation, str):  # the sublist form
        equation, operands = _einsum_equation(equation, operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    first = next((x for x in operands if isinstance(x, Tensor)), None)
    operands = [_t(x, first) for x in operands]
    return apply(ix.einsum, *operands, equation=equation)


def _einsum_equation(first, rest):
    """(equation, operands) of torch's sublist form (operand, sublist, ..., [output sublist]):
    subscripts 0..51 as the letters A..Z, a..z (their order, which sorts the implicit output,
    kept) and Ellipsis as '...'."""
    args = (first, *rest)

    def letters(sub):
        if not isinstance(sub, (list, tuple)):
            raise TypeError(f"einsum: in the sublist form each operand is followed by a list of "
                            f"subscripts, got {type(sub).__name__}")
        out = []
        for s in sub:
            if s is Ellipsis:
                out.append("...")
            elif isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 52:
                out.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
            else:
                raise ValueError(f"einsum: subscripts must be ints in 0..51 or Ellipsis, got {s!r}")
        return "".join(out)
    pairs = len(args) // 2
    equation = ",".join(letters(args[2 * k + 1]) for k in range(pairs))
    if len(args) % 2:
        equation += "->" + letters(args[-1])
    return equation, [args[2 * k] for k in range(pairs)]


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D tensors: out[i] varies along dim i ("ij"; "xy" swaps the first
    two, as NumPy's default)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    tensors = [_t(x).reshape(-1) for x in tensors]
    n = len(tensors)
    order = list(range(n))
    if indexing == "xy" and n >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(tensors[order[d]].shape[0] for d in range(n))
    grids = []
    for i, x in enumerate(tensors):
        place = order.index(i)
        grids.append(x.reshape((1,) * place + (-1,) + (1,) * (n - 1 - place)).expand(shape))
    return tuple(grids)


# ---- isin, tensordot, block_diag, cartesian_prod (no Tensor method in torch) -----------------


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each entry of elements is among test_elements (bools of elements' shape; with
    invert, whether it is not), as torch.isin: either may be a number, not both; NaN is in
    nothing; bool tensors are refused, as torch's. assume_unique changes nothing here."""
    first = next((x for x in (elements, test_elements) if isinstance(x, Tensor)), None)
    if first is None and isinstance(elements, (int, float)) and isinstance(test_elements,
                                                                            (int, float)):
        raise TypeError("isin: takes a tensor for elements or test_elements, got two numbers "
                        "(compare them with == instead)")
    made = [v if isinstance(v, (int, float)) and not isinstance(v, bool) else _t(v, first)
            for v in (elements, test_elements)]
    for v in made:
        if getattr(v, "dtype", None) == np.bool_ or isinstance(v, bool):
            raise DTypeError("isin: bool inputs are not supported (as torch); compare them with "
                             "== or convert them with .int()")
    first = next(v for v in made if isinstance(v, Tensor))
    return _values("isin", sp.isin_values, *made, invert=invert, backend=first.backend)


def tensordot(a, b, dims=2):
    """The sum of products over dims of a and b, as torch.tensordot: dims an int n (the last n
    of a with the first n of b) or two lists of dims ([1, 0], [0, 1]); a and b of one dtype.
    An einsum, whose gradients it has."""
    a = _t(a)
    b = _t(b, a)
    if a.dtype != b.dtype:
        raise DTypeError(f"tensordot: both inputs should have the same dtype, got {a.dtype} "
                         f"and {b.dtype} (as torch); convert one with .to()")
    da, db = _contracted(dims, a.ndim, b.ndim)
    for i, j in zip(da, db, strict=True):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(f"tensordot: contracted dims must match, but a has size "
                             f"{a.shape[i]} in dim {i} and b {b.shape[j]} in dim {j}")
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    sa = [next(letters) for _ in range(a.ndim)]
    sb = [sa[da[db.index(j)]] if j in db else next(letters) for j in range(b.ndim)]
    out = [c for i, c in enumerate(sa) if i not in da] + \
        [c for j, c in enumerate(sb) if j not in db]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b)


def _contracted(dims, na, nb):
    """tensordot's dims as two equal-length lists of non-negative dims of a and of b."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):  # (True is 1, as torch's isinstance(dims, int))
        dims = int(dims)
        if not 0 <= dims <= na or dims > nb:
            raise ValueError(f"tensordot: dims must be >= 0 and at most the dims of a and of b "
                             f"(an int counts the last dims of a and the first of b), got "
                             f"{dims}")
        return list(range(na - dims, na)), list(range(dims))
    da, db = _two_lists(dims)
    if len(da) != len(db):
        raise ValueError(f"tensordot: dims must name as many dims of a as of b, got {dims!r}")
    return [dim1(d, na, "tensordot") for d in da], [dim1(d, nb, "tensordot") for d in db]


def _two_lists(dims):
    """tensordot's dims given as two lists (or ints) of dims, as two lists."""
    # (each of two: an int or a list; `all` here is this module's torch.all)
    if not isinstance(dims, (tuple, list)) or len(dims) != 2 or [
            d for d in dims if not isinstance(d, (int, tuple, list)) or isinstance(d, bool)]:
        raise TypeError(f"tensordot: dims must be an int or two lists of dims ([dims of a], "
                        f"[dims of b]), got {dims!r}")
    return ([d] if isinstance(d, int) else list(d) for d in dims)


def block_diag(*tensors):
    """The tensors (0-d: 1 x 1, 1-D: one row, 2-D) down the diagonal of a matrix of zeros, in
    their promoted dtype, as torch.block_diag; built with cat, whose gradients it has."""
    blocks = [_t(x) for x in tensors]
    for i, x in enumerate(blocks):
        if x.ndim > 2:
            raise ShapeError(f"block_diag: takes tensors of at most 2 dims, got input {i} of "
                             f"shape {fmt_shape(x.shape)}")
    blocks = [x.reshape(1, -1) if x.ndim < 2 else x for x in blocks]
    if not blocks:
        return zeros(1, 0)
    dtype = blocks[0].dtype
    for x in blocks[1:]:
        dtype = dtypes.promote_types(dtype, x.dtype)
    width = int(np.sum([x.shape[1] for x in blocks]))  # (sum here is ta.sum)
    be = blocks[0].backend
    rows, left = [], 0
    for x in blocks:
        right = width - left - x.shape[1]
        rows.append(cat([zeros(x.shape[0], left, dtype=dtype, backend=be), x.to(dtype),
                         zeros(x.shape[0], right, dtype=dtype, backend=be)], dim=1))
        left += x.shape[1]
    return cat(rows, dim=0)


def cartesian_prod(*tensors):
    """Every combination of one entry of each 1-D tensor, as rows (n1 * n2 * ..., k): torch's
    cartesian_prod (one tensor: itself); of one dtype; built with meshgrid and stack."""
    ts = [_t(x) for x in tensors]
    if not ts:
        raise ValueError("cartesian_prod: needs at least one tensor (as torch)")
    for i, x in enumerate(ts):
        if x.ndim != 1:
            raise ShapeError(f"cartesian_prod: takes 1-D tensors, got input {i} of shape "
                             f"{fmt_shape(x.shape)}")
        if x.dtype != ts[0].dtype:
            raise DTypeError(f"cartesian_prod: the tensors must have one dtype, got "
                             f"{ts[0].dtype} and {x.dtype} (as torch)")
    if len(ts) == 1:
        return ts[0]
    return stack([g.reshape(-1) for g in meshgrid(*ts, indexing="ij")], dim=1)


def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """torch.combinations: every length-r combination of the entries of a 1-D tensor, as the
    rows of a (count, r) tensor, in itertools' order (with_replacement: an entry may repeat);
    r = 0: an empty (0,) tensor. An index into the tensor, so the gradient adds back into
    the entries (getitem's scatter-add)."""
    x = _t(input)
    if x.ndim != 1:
        raise ShapeError(f"combinations: takes a 1-D tensor, got shape {fmt_shape(x.shape)}")
    if isinstance(r, bool) or not isinstance(r, numbers.Integral):
        raise TypeError(f"combinations: r must be an int, got {r!r}")
    if r < 0:
        raise ValueError(f"combinations: r must be non-negative, got {r}")
    if r == 0:  # (torch's: a new empty tensor, off the graph)
        return zeros(0, dtype=x.dtype, backend=x.backend)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(pick(range(x.shape[0]), int(r))), dtype=np.int64).reshape(-1, int(r))
    return x[rows]


def chain_matmul(*matrices):
    """torch.chain_matmul, deprecated in torch (a warning says so, as torch's) for
    linalg.multi_dot: the product of the 2-D matrices, left to right; of one, a copy of it."""
    warn_user("chain_matmul is deprecated (as torch's) and will be removed in a future "
              "release; use linalg.multi_dot instead, which takes a list of two or more tensors")
    if not matrices:
        raise ValueError("chain_matmul: expected one or more matrices, got none")
    for i, m in enumerate(matrices):
        if not isinstance(m, Tensor):
            raise TypeError(f"chain_matmul: matrix {i} is a {type(m).__name__}, not a tensor "
                            "(the matrices are separate arguments; multi_dot takes a list)")
    shapes = ", ".join(fmt_shape(m.shape) for m in matrices)
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise ShapeError(f"chain_matmul: takes 2-D matrices, got matrix {i} of shape "
                             f"{fmt_shape(m.shape)} (shapes {shapes})")
        if i and matrices[i - 1].shape[1] != m.shape[0]:
            raise ShapeError(f"chain_matmul: matrices {i - 1} and {i} cannot be multiplied "
                             f"(inner dims {matrices[i - 1].shape[1]} and {m.shape[0]}), got "
                             f"shapes {shapes}")
    if len(matrices) == 1:
        return matrices[0].clone()
    out = matrices[0]
    for m in matrices[1:]:
        out = out @ m
    return out


# ---- trapezoid, cumulative_trapezoid: torch's formulas, so their gradients are the pieces' ----


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """torch.trapezoid: the integral of y along dim by the trapezoid rule, at the sample points
    x (a tensor: 1-D, one per entry of the dim; or of y's dims, or fewer, padded in front, and
    broadcast after the differences are taken) or at a constant spacing dx (1 by default).
    A dim of no entries gives zeros of y's dtype (as torch and NumPy)."""
    y, axis, x, dx = _trapezoid_args("trapezoid", y, x, dx, dim)
    if y.shape[axis] == 0:
        return zeros(*(y.shape[:axis] + y.shape[axis + 1:]), dtype=y.dtype, backend=y.backend)
    if x is None:
        return (y.sum(dim=axis) - (y.select(axis, 0) + y.select(axis, -1)) * 0.5) * dx
    return (_steps("trapezoid", x, y, axis) * _pair_sums(y, axis)).sum(dim=axis) / 2.0


trapz = trapezoid


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """torch.cumulative_trapezoid: trapezoid's running integral along dim (one entry fewer
    than y has along it), from x or dx as trapezoid takes them."""
    y, axis, x, dx = _trapezoid_args("cumulative_trapezoid", y, x, dx, dim)
    if x is None:
        return (dx / 2.0 * _pair_sums(y, axis)).cumsum(dim=axis)
    return (_steps("cumulative_trapezoid", x, y, axis) * _pair_sums(y, axis) / 2.0).cumsum(
        dim=axis)


def _trapezoid_args(name, y, x, dx, dim):
    """(y, the dim as an axis, x as a tensor or None, dx as a number) after torch's checks."""
    y = _t(y, x if isinstance(x, Tensor) else None)
    if x is not None and dx is not None:
        raise TypeError(f"{name}: takes x or dx, not both (x and dx are two ways to give the "
                        "spacing of the samples)")
    if isinstance(x, numbers.Number):
        raise TypeError(f"{name}: x must be a tensor of sample points, got the number {x!r}; "
                        f"a constant spacing is given as dx={x!r}")
    dx = _spacing(name, 1 if dx is None else dx)
    if y.ndim == 0:
        raise DimError(f"{name}: y is 0-d: it needs a dim to integrate along (dim={dim})")
    axis = dim1(dim, y.ndim, name)
    x = None if x is None else _t(x, y)
    if y.dtype == bool or x is not None and x.dtype == bool:
        raise DTypeError(f"{name}: got a bool tensor for {'y' if y.dtype == bool else 'x'}; "
                         "bool is not supported (as torch): convert it with .float() first")
    return y, axis, x, dx


def _spacing(name, dx):
    """dx as a real Python number (a 0-d tensor too, as torch takes one: off the graph)."""
    if isinstance(dx, Tensor) and dx.numel() == 1 and dx.dtype != bool:
        dx = dx.item()
    dx = plain(dx, name)
    if isinstance(dx, bool) or not isinstance(dx, (int, float)):
        raise TypeError(f"{name}: dx must be a real number, got {dx!r}")
    return dx


def _pair_sums(y, axis):
    """y[i] + y[i + 1] along axis."""
    lead = (slice(None),) * axis
    return y[lead + (slice(None, -1),)] + y[lead + (slice(1, None),)]


def _steps(name, x, y, axis):
    """x[i + 1] - x[i] along axis, shaped to broadcast against y's pair sums (torch's rules:
    a 1-D x has one point per entry of the dim; one with fewer dims than y gets 1s in front)."""
    if x.ndim == 1:
        if x.shape[0] != y.shape[axis]:
            raise ShapeError(f"{name}: there must be one `x` value for each sample point: x "
                             f"{fmt_shape(x.shape)} for dim {axis} of y {fmt_shape(y.shape)}")
        x = x.reshape(tuple(-1 if d == axis else 1 for d in range(y.ndim)))
    elif x.ndim < y.ndim:
        x = x.reshape((1,) * (y.ndim - x.ndim) + tuple(x.shape))
    lead = (slice(None),) * axis
    steps = x[lead + (slice(1, None),)] - x[lead + (slice(None, -1),)]
    pairs = y.shape[:axis] + ((y.shape[axis] or 1) - 1,) + y.shape[axis + 1:]  # (builtin max:
    # shadowed here by torch's)
    try:
        broadcast_shape(steps.shape, pairs)
    except ValueError:
        raise ShapeError(f"{name}: the spacings of x {fmt_shape(x.shape)} do not broadcast "
                         f"with y {fmt_shape(y.shape)} along dim {axis}") from None
    return steps


# ---- describing dtypes: torch.finfo, torch.iinfo, torch.can_cast --------------------------------


def _dtype_of(name, value):
    """np.dtype(value), or a DTypeError naming the function that was given something else."""
    try:
        return np.dtype(value)
    except TypeError:
        raise DTypeError(f"{name}: takes a dtype (tinyattn.float32, ...), got "
                         f"{type(value).__name__} {value!r}") from None


class finfo:  # noqa: N801 - torch's name
    """A floating-point dtype's limits, as torch.finfo: bits, eps (the gap above 1.0), max,
    min, tiny (= smallest_normal), resolution (10 ** -decimal digits) and dtype (its name,
    "float32"). finfo() describes the default dtype."""

    def __init__(self, type=None):  # noqa: A002 - torch's argument name
        dtype = dtypes.get_default_dtype() if type is None else _dtype_of("finfo", type)
        if dtype.kind != "f":
            raise DTypeError(f"finfo: takes a floating-point dtype, got {dtype}; use "
                             "tinyattn.iinfo for integer dtypes")
        info = np.finfo(dtype)
        self.bits, self.dtype = int(info.bits), dtype.name
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)  # (torch's 1e-06, not float32's)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801 - torch's name
    """An integer dtype's limits, as torch.iinfo: bits, max, min and dtype (its name). Not
    bool (torch refuses it too)."""

    def __init__(self, type):  # noqa: A002 - torch's argument name
        dtype = _dtype_of("iinfo", type)
        if dtype.kind not in "iu":
            raise DTypeError(f"iinfo: takes an integer dtype, got {dtype}; use tinyattn.finfo "
                             "for floating-point dtypes")
        self.bits, self.dtype = dtype.itemsize * 8, dtype.name
        self.min, self.max = dtypes.int_range(dtype)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def can_cast(from_, to):
    """torch.can_cast: whether values of dtype `from_` may be written into a `to` tensor in
    place, by category (bool < integer < float: float64 into float16 yes, a float into an
    integer no), and only bools into a bool tensor."""
    src, dst = _dtype_of("can_cast", from_), _dtype_of("can_cast", to)
    return src.kind == "b" if dst.kind == "b" else dtypes.category(src) <= dtypes.category(dst)


# torch._foreach_*: one op over a list of tensors (torch's fused kernels, which EMA code and
# hand-written optimizers call: _foreach_mul_(ema, decay); _foreach_add_(ema, params, alpha=..)).
# Here each is the Tensor method on every tensor in turn: the same values, gradients and in-place
# rules (a leaf that requires grad is refused outside no_grad). Each other argument is one list
# with an entry per tensor, or one value (a number or a tensor) for all of them.
_FOREACH_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp",
                  "expm1", "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg",
                  "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan",
                  "tanh", "trunc")
_FOREACH_BINARY = ("add", "sub", "mul", "div", "pow", "clamp_min", "clamp_max", "maximum",
                   "minimum", "lerp", "addcmul", "addcdiv")


def _foreach_column(op, value, n):
    """An argument of op (_foreach_add_, ...) as its n entries, one per tensor."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{op}: the tensor lists must have the same number of entries: "
                             f"{n} tensors, {len(value)} in another argument")
        return list(value)
    return [value] * n


def _foreach_args(op, tensors, others=(), kwargs=None):
    """(the tensors as a list, one column per other argument and per keyword value=): the
    fourth argument of addcmul and addcdiv, scalars, is value= per tensor (a list or a 1-d
    tensor); every other keyword (alpha=) is the same for all."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expects a list or tuple of tensors, got "
                        f"{type(tensors).__name__}")
    tensors, n, kwargs = list(tensors), len(tensors), dict(kwargs or {})
    if "addc" in op and len(others) == 3:
        scalars = others[2]
        kwargs["value"] = scalars.tolist() if isinstance(scalars, Tensor) else scalars
        others = others[:2]
    columns = {i: _foreach_column(op, o, n) for i, o in enumerate(others)}
    if "value" in kwargs:
        columns["value"] = _foreach_column(op, kwargs.pop("value"), n)
    return tensors, columns, kwargs


def _foreach(name, inplace):
    """torch._foreach_<name> (inplace: _foreach_<name>_, which changes the tensors and returns
    their list; otherwise a tuple of new tensors)."""
    method = name + "_" if inplace and hasattr(Tensor, name + "_") else name
    op = f"_foreach_{name}" + "_" * inplace

    def fn(self, *others, **kwargs):
        tensors, columns, kwargs = _foreach_args(op, self, others, kwargs)
        out = []
        for i, t in enumerate(tensors):
            args = [c[i] for k, c in columns.items() if k != "value"]
            kw = {**kwargs, "value": columns["value"][i]} if "value" in columns else kwargs
            result = getattr(t, method)(*args, **kw)
            if inplace and method == name:  # (no in-place method: maximum_, minimum_)
                result = t.copy_(result)
            out.append(result)
        return tensors if inplace else tuple(out)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"torch.{op}: Tensor.{method} on each tensor of a list."
    return fn


def _foreach_zero_(self):
    """torch._foreach_zero_: every tensor of the list filled with zeros, in place."""
    return [t.zero_() for t in _foreach_args("_foreach_zero_", self)[0]]


def _foreach_copy_(self, src, non_blocking=False):
    """torch._foreach_copy_: src[i] copied into self[i], in place."""
    tensors, columns, _ = _foreach_args("_foreach_copy_", self, (src,))
    return [t.copy_(s) for t, s in zip(tensors, columns[0], strict=True)]


def _foreach_clone(self):
    """torch._foreach_clone: a copy of each tensor."""
    return tuple(t.clone() for t in _foreach_args("_foreach_clone", self)[0])


def _foreach_norm(self, ord=2, dtype=None):  # noqa: A002 - torch's argument name
    """torch._foreach_norm: each tensor's vector norm (a 0-d tensor each)."""
    tensors = _foreach_args("_foreach_norm", self)[0]
    return tuple(t.norm(ord) if dtype is None else t.to(dtype).norm(ord) for t in tensors)


def _foreach_max(self):
    """torch._foreach_max: each tensor's largest entry."""
    return tuple(t.max() for t in _foreach_args("_foreach_max", self)[0])


FOREACH = {f"_foreach_{n}" + "_" * inplace: _foreach(n, inplace)
           for n in _FOREACH_UNARY + _FOREACH_BINARY for inplace in (False, True)}
FOREACH.update({f.__name__: f for f in (_foreach_zero_, _foreach_copy_, _foreach_clone,
                                        _foreach_norm, _foreach_max)})


# torch's keyword names (split(tensor=), searchsorted(input=), ...), and NumPy's axis= and
# keepdims= (the functions made of a method pass them on: the methods take them)
_take_torch_keywords(globals(), {
    "split": {"tensor": "input"}, "broadcast_to": {"size": "shape"},
    "searchsorted": {"input": "values"},
    "isin": {"element": "elements", "test_element": "test_elements"},
    "result_type": {"scalar": "other", "scalar1": "tensor", "scalar2": "other"}})

__all__ = [name for name in dir() if not name.startswith("_") and name not in (
    "apply", "ix", "pw", "Tensor", "cat", "np", "dtypes", "broadcast_shape", "FOREACH")]
