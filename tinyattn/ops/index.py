"""Writing by index along a dim: scatter, scatter_add, scatter_reduce; and einsum.

scatter(x, index, src, dim) sends src[i][j] to out[index[i][j]][j] (dim 0; the other dims the
same way). The index has the input's number of dims and is no larger than src, nor than x
outside dim; only the part of src the index covers is read. As in torch the index runs over
0..n-1 (no negatives), a tensor src has x's dtype (no promotion) and a number src is cast to it;
the result keeps x's dtype (an integer mean is floor-divided). The gathers (gather, index_select,
take_along_dim) read instead of write: they are Tensor methods built on getitem and
take_along_dim (ops/shape.py), whose VJPs are the scatter-adds.
einsum contracts any number of operands by an equation; its VJP for each operand is the einsum
of g with the others.
"""

import functools
import math
import numbers
import string

import numpy as np

from ..dtypes import NO_COMPLEX, int_range, promote_types
from ..errors import DimError, DTypeError, ShapeError, fmt_shape
from .matmul import same_dtype
from .op import dim1, op, quiet
from .samples import case, const, vals


def scatter_places(be, x, index, src, dim, name):
    """(axis, the advanced index of the places index sends to, the part of src it covers)."""
    xp = be.xp
    if getattr(index, "dtype", None) is None or index.dtype.kind not in "iu":
        raise TypeError(f"{name}: index must be an integer tensor, got "
                        f"{getattr(index, 'dtype', type(index).__name__)}")
    axis = dim1(dim, x.ndim, name)
    src_shape = getattr(src, "shape", None)
    if not _index_fits(index.shape, x.shape, src_shape, axis):
        raise ValueError(f"{name}: index {fmt_shape(index.shape)} must have the dims of the "
                         f"input {fmt_shape(x.shape)} and be no larger than it outside dim "
                         f"{axis}, nor larger than src "
                         f"{fmt_shape(src_shape) if src_shape is not None else '(a number)'}")
    if src_shape is not None and src.dtype != x.dtype:
        raise DTypeError(f"{name}: src is {src.dtype} but this tensor is {x.dtype}; they must "
                         f"be the same dtype, as in torch (convert one: src.to({x.dtype}))")
    _check_in_range(index, x.shape[axis], axis, x.shape, name)
    places = list(xp.ix_(*(xp.arange(m) for m in index.shape)))
    places[axis] = index
    part = tuple(slice(0, m) for m in index.shape)
    return axis, tuple(places), None if src_shape is None else src[part]


def _index_fits(index_shape, x_shape, src_shape, axis):
    """torch's scatter rule: index has x's dims, no larger than x outside `axis` and no larger
    than src (a tensor src) anywhere."""
    if len(index_shape) != len(x_shape):
        return False
    if any(n > m for d, (n, m) in enumerate(zip(index_shape, x_shape, strict=True)) if d != axis):
        return False
    return src_shape is None or (len(src_shape) == len(index_shape) and all(
        n <= m for n, m in zip(index_shape, src_shape, strict=True)))


def _check_in_range(index, n, axis, x_shape, name):
    """A DimError unless every entry of index is in 0..n-1: torch's scatter ops (and gather,
    index_select, index_add, index_copy) refuse negative indices rather than count them from
    the end."""
    if index.size and (int(index.min()) < 0 or int(index.max()) >= n):
        worst = int(index.min()) if int(index.min()) < 0 else int(index.max())
        raise DimError(f"{name}: index {worst} is out of range for dim {axis} of size {n} "
                       f"(input {fmt_shape(x_shape)}); {name} takes indices 0..{n - 1} (negative "
                       "ones do not count from the end here, as in torch)")


@functools.cache
def largest(dtype):
    """The largest finite value of a float dtype (np.finfo is slow to make, so kept)."""
    return float(np.finfo(dtype).max)


def fill_value(value, dtype, name):
    """A Python number written into a `dtype` tensor (full, fill_, setitem, masked_fill,
    index_fill, scatter), as `dtype` holds it and checked as torch checks it: NaN, inf or a
    number out of range is an error for an integer dtype (a float is cut toward 0, a negative
    int into an unsigned dtype wraps, as torch), a finite number past a float dtype's largest
    too. Anything else (a bool, a bool dtype, an array) is returned as it is."""
    kind = dtype.kind
    if kind == "f" and type(value) is float and not 65504.0 < abs(value) < math.inf:
        return value  # (fits every float dtype, or is ±inf or NaN: the common cases, quickly)
    if not isinstance(value, numbers.Number) or isinstance(
            value, (bool, np.bool_, complex, np.complexfloating)) or kind not in "iuf":
        return _as_it_is(value, name)
    if kind == "f":
        top = largest(dtype)
        if math.isfinite(value) and abs(value) > top:
            raise DTypeError(f"{name}: {value!r} does not fit {dtype} (its largest value is "
                             f"{top:g}); value cannot be converted without overflow")
        return value
    lo, hi = int_range(dtype)
    lowest = -hi if kind == "u" and isinstance(value, numbers.Integral) else lo
    if not math.isfinite(value) or not lowest <= value <= hi:
        raise DTypeError(f"{name}: {value!r} does not fit {dtype} (its values are {lo}..{hi}); "
                         "value cannot be converted without overflow")
    return int(value) % (hi + 1) if kind == "u" else int(value)


def _as_it_is(value, name):
    """fill_value's value kept as it is (a bool, an array, a number into a bool dtype), but a
    string, None or a complex number, refused by name (NumPy's own message names neither op
    nor value)."""
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name}: the value must be a number (or a tensor), got "
                        f"{type(value).__name__} {value!r}")
    if isinstance(value, (complex, np.complexfloating)):
        raise DTypeError(f"{name}: a complex value ({value!r}): {NO_COMPLEX}")
    return value


def _scatter_number(value, dtype):
    """scatter's number src as `dtype` holds it (fill_value's rule: -1 into uint8 is 255, 300
    into int8 refused), refused for an integer dtype in scatter's own words."""
    try:
        return fill_value(value, dtype, "scatter")
    except DTypeError:
        if dtype.kind not in "iu":
            raise
        lo, hi = int_range(dtype)
        raise DTypeError(f"scatter: the value {value!r} cannot be held by this {dtype} tensor "
                         f"({lo}..{hi}): value cannot be converted without overflow") from None


def _src_grad(be, g, places, src_shape):
    """The gradient of the src entries the index read: g at their places."""
    picked = g[places]
    gsrc = be.xp.zeros(src_shape, dtype=g.dtype)
    gsrc[tuple(slice(0, m) for m in picked.shape)] = picked
    return gsrc


@op("scatter", "gx = g with g[places] = 0, gsrc = g[places]", grads=("gx", None, "gsrc"),
    nondiff=(1,),
    samples=[case((3, 4), const([[0, 2], [1, 0]]), (2, 3), dim=1),
             case((3, 4), const([[2, 0, 1, 0]]), (2, 4), dim=0),
             case((2, 3), const([[1], [0]]), 5.0, dim=-1)])
def scatter(be, x, index, src, dim):
    """out = x with out[index[i, j], j] = src[i, j] (dim 0; likewise along any dim); src may be
    a number (cast to x's dtype: 2.5 into int64 is 2, as torch). Where the index repeats a
    place, which src lands there is unspecified (torch)."""
    axis, places, part = scatter_places(be, x, index, src, dim, "scatter")
    if part is None:
        src = _scatter_number(src, x.dtype)
    out = x.copy()
    out[places] = src if part is None else part  # (NumPy casts a number to out's dtype)
    return out, (places, None if part is None else src.shape)


@scatter.defvjp
def scatter_vjp(be, g, saved, dim):
    places, src_shape = saved
    gx = g.copy()
    gx[places] = 0  # overwritten entries do not depend on x
    return gx, None, None if src_shape is None else _src_grad(be, g, places, src_shape)


@op("scatter_add", "gx = g, gsrc = g[places]", grads=("gx", None, "gsrc"), nondiff=(1,),
    samples=[case((3, 4), const([[0, 2, 2], [1, 0, 0]]), (2, 3), dim=1),  # repeats add up
             case((3, 4), const([[2, 0, 2, 0], [2, 1, 1, 1]]), (3, 4), dim=0)])
def scatter_add(be, x, index, src, dim):
    """out = x, then out[index[i, j], j] += src[i, j] (dim 0); repeated places add up"""
    axis, places, part = scatter_places(be, x, index, src, dim, "scatter_add")
    out = x.copy()
    be.scatter_add(out, places, part)
    return out, (places, src.shape)


@scatter_add.defvjp
def scatter_add_vjp(be, g, saved, dim):
    places, src_shape = saved
    return g, None, _src_grad(be, g, places, src_shape)


REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def check_reduction(reduce):
    """A ValueError unless `reduce` is one scatter_reduce has (Tensor.scatter_reduce calls this
    before the op, so that the error stays a ValueError: inside the op it reads as a shape
    error)."""
    if reduce not in REDUCTIONS:
        raise ValueError(f"scatter_reduce: reduce must be one of {', '.join(REDUCTIONS)}, got "
                         f"{reduce!r} (not a reduction scatter_reduce knows)")


@op("scatter_reduce", "gx = g * [x counts] / count (amax/amin: x's share of the ties; prod: "
    "g * the product of the others), gsrc = (g / count)[places] * [src counts] (prod: g times "
    "the product of the others)", grads=("gx", None, "gsrc"), nondiff=(1,),
    saves={0: 3, 2: 4},  # (prod's x and src, which its second derivative needs; the other
    # reductions hold arrays of their own there, never x or src, which apply's check skips)
    samples=[case((3, 4), const([[0, 2, 2], [1, 0, 0]]), (2, 3), dim=1, reduce="sum"),
             case((3, 4), const([[0, 2, 2], [1, 0, 0]]), (2, 3), dim=1, reduce="mean",
                  include_self=False),
             case((2, 4), const([[0, 2, 2, 1]]), (1, 4), dim=1, reduce="mean"),
             case(vals([[0.5, -1.0, 2.0], [1.0, 0.0, 3.0]]), const([[0, 0, 1], [2, 2, 2]]),
                  vals([[0.2, 0.7, 2.5], [1.5, -0.5, 1.5]]), dim=1, reduce="amax"),
             case(vals([[0.5, -1.0, 2.0]]), const([[0, 0, 1]]), vals([[0.2, -3.0, 4.0]]), dim=1,
                  reduce="amin", include_self=False),
             case((3, 4), const([[0, 2, 2], [1, 0, 0]]), (2, 3), dim=1, reduce="prod"),
             case(vals([[0.0, 2.0, 3.0], [1.5, 0.0, -1.0]]), const([[0, 0, 1], [2, 2, 2]]),
                  vals([[0.0, 0.7, 2.5], [1.5, 0.0, 0.0]]), dim=1, reduce="prod"),
             case((2, 4), const([[0, 2, 2, 1]]), (1, 4), dim=1, reduce="prod",
                  include_self=False)])
def scatter_reduce(be, x, index, src, dim, reduce, include_self=True):
    """out[index[i, j], j] = reduce(x there (if include_self), every src[i, j] sent there),
    reduce "sum", "prod", "mean", "amax" or "amin"; places nothing is sent to keep x"""
    check_reduction(reduce)
    xp = be.xp
    axis, places, part = scatter_places(be, x, index, src, dim, "scatter_reduce")
    touched = xp.zeros(x.shape, dtype=bool)
    touched[places] = True
    dropped = touched if not include_self else xp.zeros(x.shape, dtype=bool)  # x not counted
    if reduce == "prod":
        out, factors = _scatter_prod(be, x, places, part, axis, dropped)
        return out, (factors, places, src.shape, x, src)
    if reduce in ("sum", "mean"):
        out = xp.where(dropped, 0, x).astype(x.dtype, copy=False)
        be.scatter_add(out, places, part)
        count = (~dropped).astype(x.dtype)
        be.scatter_add(count, places, xp.ones(part.shape, dtype=x.dtype))
        if reduce == "mean":
            out = xp.where(touched, _mean_of(out, xp.maximum(count, 1)), x)
        return out, (places, src.shape, None, count, dropped)
    start = _reduction_start(x.dtype, reduce == "amax")
    out = xp.where(dropped, start, x).astype(x.dtype, copy=False)
    (be.scatter_max if reduce == "amax" else be.scatter_min)(out, places, part)
    # ties share the gradient evenly, x's entry among them (torch's rule)
    self_wins = (x == out) & ~dropped
    src_wins = part == out[places]
    count = self_wins.astype(x.dtype)
    be.scatter_add(count, places, src_wins.astype(x.dtype))
    return out, (places, src.shape, src_wins, xp.maximum(count, 1), ~self_wins)


def _multiply_at(xp, out, places, values, axis):
    """out[places] *= values, repeated places multiplied in turn: one slice of the index along
    axis at a time, whose places all differ (the other coordinates do), so no backend needs a
    multiply.at."""
    full = xp.broadcast_arrays(*places)
    for i in range(values.shape[axis]):
        out[tuple(p.take(i, axis=axis) for p in full)] *= values.take(i, axis=axis)


def _scatter_prod(be, x, places, part, axis, dropped):
    """(out, (self factor, src factor)) of the product reduction: g times a factor is each
    input's gradient, the product of the others, as torch computes it (a zero divided out
    only where it is the only zero: its factor is the product of the others, made again)."""
    xp = be.xp
    out = xp.where(dropped, 1, x).astype(x.dtype, copy=False)
    _multiply_at(xp, out, places, part, axis)
    if x.dtype.kind != "f":
        return out, None
    with quiet():
        masked = xp.where(x == 0, 1, x)
        others = xp.where(dropped, 1, masked)
        _multiply_at(xp, others, places, part, axis)
        zero = part == 0
        zeros_at = xp.zeros(x.shape, dtype=x.dtype)
        be.scatter_add(zeros_at, places, zero.astype(x.dtype))
        single = zero & (zeros_at[places] == 1)
        rest = xp.where(dropped, 1, x).astype(x.dtype, copy=False)
        _multiply_at(xp, rest, places, xp.where(single, 1, part), axis)
        src_factor = xp.where(single, rest[places], out[places] / xp.where(zero, 1, part))
        return out, (others / masked, src_factor)


def _mean_of(total, count):
    """total / count in total's dtype: floor-divided for integers, as torch's integer mean."""
    return total // count if total.dtype.kind in "iu" else total / count


def _reduction_start(dtype, largest):
    """Where amax (largest) or amin starts a place whose own value is left out: -inf or inf, or
    the integer dtype's own ends (a cast of inf to an integer is undefined)."""
    if dtype.kind in "iu":
        return int_range(dtype)[0 if largest else 1]
    return float("-inf") if largest else float("inf")


@scatter_reduce.defvjp
def scatter_reduce_vjp(be, g, saved, dim, reduce, include_self=True):
    xp = be.xp
    if reduce == "prod":
        return _scatter_prod_vjp(be, g, saved, include_self)
    places, src_shape, src_wins, count, x_out = saved
    if reduce == "sum":
        return xp.where(x_out, 0, g), None, _src_grad(be, g, places, src_shape)
    share = g / count
    gsrc = _src_grad(be, share, places, src_shape)
    if src_wins is not None:  # amax, amin
        gsrc[tuple(slice(0, m) for m in src_wins.shape)] *= src_wins
    return xp.where(x_out, 0, share), None, gsrc


def _scatter_prod_vjp(be, g, saved, include_self):
    (self_factor, src_factor), places, src_shape = saved[:3]
    gx = g * self_factor
    if not include_self:
        gx[places] = 0  # (x is not in the product there)
    gsrc = _src_grad(be, g, places, src_shape)
    gsrc[tuple(slice(0, m) for m in src_factor.shape)] *= src_factor
    return gx, None, gsrc


# ---- einsum -------------------------------------------------------------------------------------


def parse_einsum(equation, shapes):
    """The equation with '...' spelled out in letters and the output written: (inputs, output)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: the equation {equation!r} names {len(ins)} operands, got "
                         f"{len(shapes)}")
    spare = [c for c in string.ascii_letters if c not in eq]
    n_ell = max([len(s) - len(i.replace("...", "")) for i, s in zip(ins, shapes, strict=True)
                 if "..." in i] or [0])
    ell = "".join(spare[:n_ell])
    spelled = [_spell_operand(i, s, ell, equation) for i, s in zip(ins, shapes, strict=True)]
    _check_sizes(spelled, shapes, ell, equation)
    if arrow:
        out = rhs.replace("...", ell)
    else:  # implicit: the ellipsis, then the letters used once, sorted
        letters = "".join(spelled)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1
                                   and c not in ell))
    return spelled, out


def _check_sizes(spelled, shapes, ell, equation):
    """Each letter one size in every operand (or 1, which broadcasts), else torch's error: the
    subscript (or a dim of '...', spelled in the letters `ell`) and its two sizes named."""
    seen = {}  # letter -> (size, operand) of its first size other than 1
    for k, (subs, shape) in enumerate(zip(spelled, shapes, strict=True)):
        for c, n in zip(subs, shape, strict=True):
            if n != 1 and seen.setdefault(c, (n, k))[0] != n:
                what = "a dim of '...'" if c in ell else f"subscript '{c}'"
                raise ShapeError(f"einsum: {what} has size {n} in operand {k} "
                                 f"{fmt_shape(shape)} but {seen[c][0]} in operand {seen[c][1]} "
                                 f"{fmt_shape(shapes[seen[c][1]])} of {equation!r} (sizes of a "
                                 "subscript must match, or be 1)")


def _spell_operand(subs, shape, ell, equation):
    """One operand's subscripts with its part of the ellipsis letters `ell` spelled out."""
    if "..." in subs:
        k = len(shape) - len(subs.replace("...", ""))
        subs = subs.replace("...", ell[len(ell) - k:] if k > 0 else "")
    if len(subs) != len(shape) or not all(c in string.ascii_letters for c in subs):
        raise ValueError(f"einsum: subscripts {subs!r} do not fit an operand of shape "
                         f"{fmt_shape(shape)} in {equation!r}")
    return subs


MAX_OPERANDS = 8  # saved holds each operand in a place of its own (the in-place check reads it)


def _einsum_dtypes(xs):
    """The operands in one dtype: those with dims must have it already (torch's rule, as for
    matmul: float32 with float64, or int64 with float32, is an error); a 0-d operand of
    another dtype is promoted with them, as torch's einsum takes one (',i->i' of a float64
    number and a float32 vector is float64)."""
    shaped = [x for x in xs if x.ndim]
    if shaped:
        same_dtype("einsum", *shaped)
    if all(x.dtype == xs[0].dtype for x in xs):
        return xs
    common = xs[0].dtype
    for x in xs[1:]:
        common = promote_types(common, x.dtype)
    return tuple(x.astype(common) for x in xs)


@op("einsum", "g_i = einsum(g, the other operands -> operand i's subscripts)", grads=(),
    saves={i: i for i in range(MAX_OPERANDS)},
    samples=[case((2, 3), (3, 4), equation="ij,jk->ik"),
             case((2, 3, 4), (2, 4, 5), equation="...ij,...jk->...ik"),
             case((3, 3), equation="ii->i"), case((3,), (4,), (2, 3), equation="i,j,ki->jk"),
             case((2, 3), equation="ij"), case((), (3,), equation=",i->i")])
def einsum(be, *xs, equation):
    """out = Σ over the letters not in the output of the product of the operands' entries"""
    if not 1 <= len(xs) <= MAX_OPERANDS:
        raise ValueError(f"einsum: takes 1 to {MAX_OPERANDS} operands, got {len(xs)}")
    xs = _einsum_dtypes(xs)
    ins, out_subs = parse_einsum(equation, [x.shape for x in xs])
    spelled = ",".join(ins) + "->" + out_subs
    padding = (None,) * (MAX_OPERANDS - len(xs))
    out = be.xp.einsum(spelled, *xs)
    if getattr(out, "base", None) is not None:  # "ii->i", "ij->ji": a view of the operand
        out = out.copy()
    return out, (*xs, *padding, ins, out_subs)


@einsum.defvjp
def einsum_vjp(be, g, saved, equation):
    *xs, ins, out_subs = saved
    xs = xs[:len(ins)]
    return tuple(_einsum_grad(be.xp, g, out_subs, ins, xs, i) for i in range(len(xs)))


def _einsum_grad(xp, g, out_subs, ins, xs, i):
    target = ins[i]
    others = [j for j in range(len(xs)) if j != i]
    seen = set(out_subs).union(*(ins[j] for j in others))
    unique = "".join(dict.fromkeys(target))
    keep = "".join(c for c in unique if c in seen)
    gi = xp.einsum(",".join([out_subs] + [ins[j] for j in others]) + "->" + keep, g,
                   *(xs[j] for j in others))
    size = dict(zip(target, xs[i].shape, strict=True))
    # a dim of size 1 here that broadcast against a longer one elsewhere: the gradient is
    # summed back over it (and one of size 1 elsewhere is broadcast back below)
    spread = tuple(a for a, c in enumerate(keep) if size[c] == 1 and gi.shape[a] != 1)
    if spread:
        gi = gi.sum(axis=spread, keepdims=True)
    # letters only this operand has were summed away: its gradient is the same along them
    got = dict(zip(keep, gi.shape, strict=True))
    gi = xp.broadcast_to(gi.reshape([got.get(c, 1) for c in unique]), [size[c] for c in unique])
    if len(unique) == len(target):
        return _in_order(xp, xp.einsum(unique + "->" + target, gi))
    # a repeated letter (a diagonal, "ii"): g goes on the diagonal, zeros elsewhere
    return _onto_diagonals(xp, gi, unique, target, size, "".join(ins) + out_subs)


def _in_order(xp, a):
    """a as a contiguous array of its own shape: ascontiguousarray alone makes a 0-d operand's
    gradient (1,) (its result has a dim at least), which backward refuses."""
    return xp.ascontiguousarray(a) if a.ndim else xp.asarray(a)


def _onto_diagonals(xp, gi, unique, target, size, taken):
    """gi (subscripts `unique`) placed on the diagonals of an operand whose subscripts
    `target` repeat a letter: one identity matrix per repeat, on letters not in `taken`."""
    spare = iter(c for c in string.ascii_letters if c not in taken)
    spelled, eyes, eye_subs = [], [], []
    for c in target:
        if c in spelled:
            f = next(spare)
            eyes.append(xp.eye(size[c], dtype=gi.dtype))
            eye_subs.append(c + f)
            c = f
        spelled.append(c)
    return xp.einsum(",".join([unique] + eye_subs) + "->" + "".join(spelled), gi, *eyes)

OPS = (scatter, scatter_add, scatter_reduce, einsum)
