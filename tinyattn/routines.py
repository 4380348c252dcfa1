"""torch's module-level functions as tinyattn's: ta.exp(x), ta.sum(x, dim=1), ta.tril(m), ...

Each is the Tensor method of the same name called on its first argument (made a tensor if it
is not one), so it records the same op and has the same gradient. The few with no method of
their own (einsum, meshgrid, std_mean, var_mean, the stacks, repeat_interleave of repeats
alone) are written out below, with torch's finfo, iinfo and can_cast, which describe dtypes.
"""

import numpy as np

from . import dtypes
from .autograd import apply
from .errors import DTypeError, ShapeError, fmt_shape
from .functional import cat
from .ops import index as ix
from .ops import pointwise as pw
from .ops.op import broadcast_shape
from .tensor import Tensor, _takes_device


def _t(x, like=None):
    if isinstance(x, Tensor):
        return x
    return Tensor(x, backend=None if like is None else like.backend)


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
addmm, addmv, addr, baddbmm, addbmm = (_method(n) for n in (
    "addmm", "addmv", "addr", "baddbmm", "addbmm"))
inner, cross, dist, msort, fliplr, flipud, rot90, tensor_split, diagflat = (_method(n) for n in (
    "inner", "cross", "dist", "msort", "fliplr", "flipud", "rot90", "tensor_split", "diagflat"))
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
moveaxis, swapdims = movedim, swapaxes
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
clone, detach, unflatten = _method("clone"), _method("detach"), _method("unflatten")


concat = concatenate = cat


def broadcast_to(input, shape):  # noqa: A002
    return _t(input).expand(*shape)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views)."""
    tensors = [_t(x, next((t for t in tensors if isinstance(t, Tensor)), None)) for x in tensors]
    shape = broadcast_shape(*(t.shape for t in tensors))
    return tuple(t.expand(*shape) for t in tensors)


def repeat_interleave(input, repeats=None, dim=None):  # noqa: A002 - torch's argument name
    """input.repeat_interleave(repeats, dim); or, given a 1-D integer tensor of repeats alone
    (torch.repeat_interleave(repeats)), each index i repeated repeats[i] times: [2, 0, 1] gives
    [0, 0, 2], in the repeats' dtype."""
    if repeats is not None:
        return _t(input).repeat_interleave(repeats, dim)
    counts = _t(input)
    if counts.dtype.kind not in "iu":
        raise DTypeError(f"repeat_interleave: repeats alone must be an integer tensor, got "
                         f"{counts.dtype}")
    if counts.ndim != 1:
        raise ShapeError(f"repeat_interleave: repeats alone must be 1-D, got "
                         f"{fmt_shape(counts.shape)}")
    index = Tensor(np.arange(counts.shape[0], dtype=counts.dtype), backend=counts.backend)
    return index.repeat_interleave(counts)


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


def result_type(tensor, other):
    """The dtype an op on the two gives (torch's promotion: a number never raises a tensor's
    precision, only its category)."""
    return dtypes.result_type(*(x.data if isinstance(x, Tensor) else x for x in (tensor, other)))


def promote_types(type1, type2):
    return dtypes.promote_types(np.dtype(type1), np.dtype(type2))


@_takes_device
def tril_indices(row, col, offset=0, *, dtype=None, backend=None):
    """(2, n) int64 (or `dtype`): the row and column indices of the lower triangle (below the
    diagonal `offset`), row by row; device= as torch's."""
    return Tensor(np.stack(np.tril_indices(row, offset, col)), dtype=dtype or np.int64,
                  backend=backend)


@_takes_device
def triu_indices(row, col, offset=0, *, dtype=None, backend=None):
    """(2, n) int64 (or `dtype`): the indices of the upper triangle (from the diagonal
    `offset` up), row by row; device= as torch's."""
    return Tensor(np.stack(np.triu_indices(row, offset, col)), dtype=dtype or np.int64,
                  backend=backend)


def searchsorted(sorted_sequence, values, *, right=False, side=None):
    """Where each value would go in the sorted last dim to keep it sorted (int64, no
    gradient); right=True (or side="right") puts it after equal entries."""
    seq = _t(sorted_sequence)
    side = side or ("right" if right else "left")
    vals = _t(values, seq)
    if seq.ndim == 0 or seq.ndim > 1 and vals.shape[:-1] != seq.shape[:-1]:
        raise ShapeError(f"searchsorted: the sorted sequence {fmt_shape(seq.shape)} must be "
                         f"1-D, or have the leading dims (all but the last) of the values "
                         f"{fmt_shape(vals.shape)}")
    a, v = seq.backend.to_numpy(seq.data), vals.backend.to_numpy(vals.data)
    if a.ndim == 1:
        out = np.searchsorted(a, v, side=side)
    else:
        rows = int(np.prod(a.shape[:-1]))  # (the leading dims match: checked above)
        out = np.empty((rows, v.shape[-1]), dtype=np.int64)
        for i, (r, w) in enumerate(zip(a.reshape(rows, a.shape[-1]),
                                       v.reshape(rows, v.shape[-1]), strict=True)):
            out[i] = np.searchsorted(r, w, side=side)
        out = out.reshape(v.shape)
    return Tensor(np.asarray(out, dtype=np.int64), backend=seq.backend)


def bucketize(input, boundaries, *, right=False):  # noqa: A002
    """The bucket i of each value among the sorted 1-D boundaries: boundaries[i-1] < x <=
    boundaries[i] (right=True: boundaries[i-1] <= x < boundaries[i]), as torch.bucketize."""
    return searchsorted(boundaries, input, right=right)


def cdist(x1, x2, p=2.0):
    """‖x1[i] - x2[j]‖_p for every pair of rows: (..., P, M), (..., R, M) -> (..., P, R)."""
    x1 = _t(x1)
    return (x1.unsqueeze(-2) - _t(x2, x1).unsqueeze(-3)).norm(p, dim=-1)


def logit(input, eps=None):  # noqa: A002
    """log(p / (1 - p)); with eps, p clamped to [eps, 1 - eps] first (ops/pointwise.py: its
    gradient is torch's, inf at p = 0 and 1)."""
    return apply(pw.logit, _t(input), eps=eps)


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
    '...' stands for leading dims; without '->' the output is the letters used once, sorted."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    first = next((x for x in operands if isinstance(x, Tensor)), None)
    operands = [_t(x, first) for x in operands]
    return apply(ix.einsum, *operands, equation=equation)


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


__all__ = [name for name in dir() if not name.startswith("_") and name not in (
    "apply", "ix", "pw", "Tensor", "cat", "np", "dtypes", "broadcast_shape")]
