"""Shape ops: reshape permute expand diagonal flip getitem setitem take_along_dim cat stack.

They move values around without changing them, so each VJP moves g back the other way.
The rest of the shape vocabulary is built on these in tensor.py: view/flatten/squeeze/unsqueeze
are reshapes, transpose and .T are permutes, split and chunk are getitems, fliplr/flipud/rot90
are flips (with a permute).
"""

import numpy as np

from ..errors import DimError, ShapeError, fmt_shape
from .op import broadcasts_to, dim1, op, quiet
from .samples import case, const


@op("reshape", "gx = reshape(g, x.shape)", view=True,
    samples=[case((2, 3, 4), shape=(6, 4)), case((2, 3), shape=(-1,)),
             case((), shape=(1, 1))])
def reshape(be, x, shape):
    """out = x with the same values in the given shape (-1: inferred)"""
    if min(shape, default=0) < -1:  # NumPy reads any negative as -1; torch refuses them
        raise ValueError(f"cannot reshape into {fmt_shape(shape)}: a size below -1 is not a "
                         "size (-1 means: inferred)")
    try:
        return x.reshape(shape), (x.shape,)
    except ValueError:
        raise ValueError(f"cannot reshape {fmt_shape(x.shape)} ({x.size} elements) into "
                         f"{fmt_shape(shape)}") from None


@reshape.defvjp
def reshape_vjp(be, g, saved, shape):
    (x_shape,) = saved
    return (g.reshape(x_shape),)


@op("permute", "gx = permute(g, inverse(dims))", view=True,
    samples=[case((2, 3, 4), dims=(2, 0, 1)), case((2, 3), dims=(1, 0))])
def permute(be, x, dims):
    """out = x with its dims reordered: out.shape[i] = x.shape[dims[i]]"""
    if sorted(d + x.ndim if d < 0 else d for d in dims) != list(range(x.ndim)):
        raise ValueError(f"dims {tuple(dims)} is not a permutation of the {x.ndim} dims")
    return x.transpose(dims), ()


@permute.defvjp
def permute_vjp(be, g, saved, dims):
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d % len(dims)] = i
    return (g.transpose(inverse),)


@op("expand", "gx = sum_to(g, x.shape)", broadcasts=True, view=True,
    samples=[case((1, 3), shape=(4, 3)), case((3,), shape=(2, 4, 3)),
             case((2, 1, 3), shape=(2, 5, 3))])
def expand(be, x, shape):
    """out = x broadcast to `shape` (a view: nothing is copied)"""
    if x.shape == shape:  # nothing to broadcast: a plain view, writable as torch's (NumPy's
        return x.reshape(shape), ()  # broadcast_to hands out a read-only one)
    if not broadcasts_to(x.shape, shape):
        raise ShapeError(f"expand: cannot expand {fmt_shape(x.shape)} to {fmt_shape(shape)}: "
                         "from the right, each dim must be equal or 1 in the tensor")
    return be.xp.broadcast_to(x, shape), ()


@expand.defvjp
def expand_vjp(be, g, saved, shape):
    return (g,)  # autograd's sum_to adds up the copies, since expand broadcasts


@op("diagonal", "gx = zeros(x.shape); diagonal(gx) = g", view=True,
    samples=[case((3, 4)), case((4, 3), offset=1), case((3, 5), offset=-2),
             case((2, 3, 4), offset=-1, dim1=2, dim2=0)])
def diagonal(be, x, offset=0, dim1=0, dim2=1):
    """out = the entries x[..., i, i + offset, ...] of dims dim1, dim2, as the last dim (a view)"""
    return writable_diagonal(x, offset, dim1, dim2), (x.shape,)


@diagonal.defvjp
def diagonal_vjp(be, g, saved, offset=0, dim1=0, dim2=1):
    (shape,) = saved
    gx = be.xp.zeros(shape, dtype=g.dtype)
    writable_diagonal(gx, offset, dim1, dim2)[...] = g
    return (gx,)


def writable_diagonal(a, offset, dim1, dim2):
    """a.diagonal(...), a view that writes reach `a` through (as torch's). NumPy hands out its
    diagonal read-only (a choice, not a limit: the memory is a's); CuPy's is writable."""
    d = a.diagonal(offset, dim1, dim2)
    if not getattr(d.flags, "writeable", True) and getattr(a.flags, "writeable", True):
        d.flags.writeable = True
    return d


@op("flip", "gx = flip(g, dims)",
    samples=[case((2, 3, 4), dims=(0, 2)), case((5,), dims=(0,)), case((2, 3), dims=(-1,))])
def flip(be, x, dims):
    """out = x with its entries in reverse order along dims (new memory, as torch's flip)"""
    # a copy, not the negative-step view x[::-1]: torch's flip (and fliplr, flipud, rot90)
    # return new memory, so that writing into the result leaves x alone
    return be.xp.flip(x, dims).copy(), ()


@flip.defvjp
def flip_vjp(be, g, saved, dims):
    return (be.xp.flip(g, dims),)


@op("getitem", "gx = zeros(x.shape); gx[index] += g", view=True,
    samples=[case((4, 5), index=(slice(1, 3), 2)),
             case((4, 5), index=(slice(None, None, 2), slice(4, 0, -1))),
             case((2, 3, 4), index=(Ellipsis, None, 1)),
             case((4, 5), index=np.array([0, 2, 0, 3])),  # a repeated row accumulates
             case((4, 5), index=(np.array([1, 1, 3]), np.array([0, 0, 4]))),
             case((3, 4), index=np.array([[True, False, True, True], [False] * 4,
                                          [True] * 4]))])
def getitem(be, x, index):
    """out = x[index] (ints, slices, ..., None, integer or bool arrays)"""
    out = x[index]
    if isinstance(out, np.generic) and isinstance(x, np.ndarray):  # one entry by ints: NumPy
        out = x[(*index, ...) if type(index) is tuple else (index, ...)]  # copies it, torch's
    return out, (x.shape, x.dtype, _is_advanced(index))  # is a 0-d view (as CuPy's)


@getitem.defvjp
def getitem_vjp(be, g, saved, index):
    shape, dtype, _ = saved
    gx = be.xp.zeros(shape, dtype=dtype)
    getitem_add_into(be, gx, g, saved, index)
    return (gx,)


@getitem.defadd_into
def getitem_add_into(be, acc, g, saved, index):
    """acc[index] += g: backward adds each slice's gradient straight into the running sum."""
    if saved[2]:
        be.scatter_add(acc, index, g)  # an advanced index: a repeated entry collects every g
    else:
        acc[index] += g


@op("setitem", "gx = g with g[index] = 0, gv = g[index]", grads=("gx", "gv"), broadcasts=True,
    samples=[case((4, 5), (2, 5), steps=((slice(1, 3),),)),
             case((4, 5), 2.0, steps=((slice(None), 1),)),
             case((3, 4), (4,), steps=((np.array([0, 2]),),)),  # the value broadcasts
             case((3, 4, 5), (4, 2), steps=((0, slice(None), slice(None)),  # x[0, :, [1, 2]]
                                            (slice(None), np.array([1, 2]))))])
def setitem(be, x, value, steps):
    """out = x with out[index] = value (`steps`: the index, or an int part then the rest)"""
    out = _own_copy(be, x)
    if getattr(value, "dtype", out.dtype) == out.dtype:
        _place(out, steps)[steps[-1]] = value
    else:
        with quiet():  # (float32 past 65504 into float16: inf, silently as torch)
            _place(out, steps)[steps[-1]] = value
    return out, (getattr(value, "ndim", 0),)


@setitem.defvjp
def setitem_vjp(be, g, saved, steps):
    (value_ndim,) = saved
    gx = _own_copy(be, g)
    _place(gx, steps)[steps[-1]] = 0  # overwritten entries do not depend on x
    gv = _place(g, steps)[steps[-1]]
    if value_ndim > gv.ndim:  # a value (1, 2, 3) written into a (2, 3) place: NumPy (and torch)
        gv = gv.reshape((1,) * (value_ndim - gv.ndim) + gv.shape)  # drop its leading 1s
    return gx, gv  # (a value that broadcast is summed back to its shape by autograd)


def _own_copy(be, a):
    """A writable copy of `a`: a 0-d tensor's values can be a NumPy scalar, whose copy() is
    another scalar that cannot be written into (y[...] = 7 on a 0-d y in the graph)."""
    return a.copy() if getattr(a, "ndim", 0) else be.xp.array(a)


def _place(a, steps):
    """The view of `a` that the last index step applies to."""
    for index in steps[:-1]:
        a = a[index]
    return a


def _is_advanced(index):
    """Whether `index` holds an array (NumPy's advanced indexing, which can repeat entries)."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(hasattr(p, "shape") and p.ndim > 0 or isinstance(p, list) for p in parts)


@op("take_along_dim", "gx = zeros(x.shape); gx[indices along dim] += g (summed over the dims "
    "x was broadcast along)",
    grads=("gx", None), nondiff=(1,),
    saves={1: 0},
    samples=[case((3, 4), const([[3, 0, 1, 2], [0, 1, 2, 3], [2, 2, 0, 0]]), dim=1),
             case((2, 3), const([[1, 0, 1]]), dim=0),  # repeats collect both
             case((2, 3, 4), const(np.zeros((2, 3, 1), dtype=np.int64)), dim=-1),
             case((3, 1), const([[0, 1, 2, 0], [2, 2, 1, 0]]), dim=0)])  # x broadcasts
def take_along_dim(be, x, indices, dim):
    """out[..., i, ...] = x[..., indices[..., i, ...], ...] along dim (sort, topk, gather);
    outside dim, x and the indices broadcast against each other (as torch)"""
    if getattr(indices, "dtype", None) is None or indices.dtype.kind not in "iu":
        raise TypeError(f"take_along_dim: indices must be integers, got "
                        f"{getattr(indices, 'dtype', type(indices).__name__)}")
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_dim: indices {fmt_shape(indices.shape)} and input "
                         f"{fmt_shape(x.shape)} need the same number of dims")
    axis = dim1(dim, x.ndim, "take_along_dim")
    _check_broadcast("take_along_dim", x.shape, indices.shape, axis)
    try:
        out = be.xp.take_along_axis(x, indices, axis=axis)
    except IndexError:
        raise out_of_range("take_along_dim", indices, x.shape, axis) from None
    return out, (indices, x.shape, axis)


def _check_broadcast(name, x_shape, index_shape, axis):
    """torch's rule: outside `axis` the input and the indices broadcast against each other
    (x (3, 1) with indices (2, 4) along dim 0 reads x as (3, 4)); a ShapeError if not."""
    try:
        np.broadcast_shapes(x_shape[:axis] + x_shape[axis + 1:],
                            index_shape[:axis] + index_shape[axis + 1:])
    except ValueError:
        raise ShapeError(f"{name}: indices {fmt_shape(index_shape)} and input "
                         f"{fmt_shape(x_shape)} do not broadcast outside dim {axis}: there each "
                         "dim must be equal, or 1 in one of them") from None


def out_of_range(name, index, shape, axis, negatives=True):
    """The DimError for an index array with an entry outside dim `axis` of a tensor of
    `shape`: names the op, the first such entry, the dim's size and the shapes. negatives:
    whether -n..-1 count from the end (False: they are out of range too, as in torch's gather,
    scatter, index_select...)."""
    n = shape[axis]
    bad = index[(index < (-n if negatives else 0)) | (index >= n)]
    worst = f"index {int(bad.reshape(-1)[0])}" if bad.size else "an index"
    why = "" if negatives or not bad.size or bad.reshape(-1)[0] >= n else (
        f"; {name} takes indices 0..{n - 1} (negative ones do not count from the end here, "
        "as in torch)")
    return DimError(f"{name}: {worst} is out of range for dim {axis} of size {n} (input "
                    f"{fmt_shape(shape)}, index {fmt_shape(index.shape)}){why}")


@take_along_dim.defvjp
def take_along_dim_vjp(be, g, saved, dim):
    indices, shape, axis = saved
    xp = be.xp
    where = list(xp.ix_(*(xp.arange(n) for n in g.shape)))  # every position of g ...
    where[axis] = xp.broadcast_to(indices, g.shape)  # ... sent to its index along dim
    # the input as the forward read it: broadcast to g's shape outside dim
    wide = g.shape[:axis] + (shape[axis],) + g.shape[axis + 1:]
    gx = xp.zeros(wide, dtype=g.dtype)
    be.scatter_add(gx, tuple(where), g)  # an index picked twice collects both
    if wide != shape:  # x (3, 1) read as (3, 4): its column collects the whole row
        spread = tuple(d for d, (n, m) in enumerate(zip(shape, wide, strict=True)) if n != m)
        gx = gx.sum(axis=spread, keepdims=True)
    return gx, None


@op("cat", "g_i = g[..., offset_i : offset_i + n_i, ...] along dim", grads=(), promote="common",
    samples=[case((2, 3), (2, 4), dim=1), case((1, 3), (2, 3), (3, 3), dim=0),
             case((2, 2, 2), (2, 2, 2), dim=-1)])
def cat(be, *xs, dim=0):
    """out = x_1, x_2, ... joined along dim (empty 1-D ones left out, as torch)"""
    parts = [x for x in xs if x.shape != (0,)]  # torch's legacy rule: shape (0,) joins anything
    if not parts:
        parts = list(xs)
    axis = dim1(dim, parts[0].ndim, "cat")
    for x in parts[1:]:
        if x.ndim != parts[0].ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, parts[0].shape, strict=True))
                if i != axis):
            raise ValueError(f"shapes must match except in dim {axis}: got "
                             f"{fmt_shape(parts[0].shape)} and {fmt_shape(x.shape)}")
    sizes = [x.shape[axis] if len(parts) == len(xs) or x.shape != (0,) else None for x in xs]
    return be.xp.concatenate(parts, axis=axis), (axis, sizes)


@cat.defvjp
def cat_vjp(be, g, saved, dim=0):
    axis, sizes = saved
    grads, start = [], 0
    for n in sizes:
        if n is None:  # an empty 1-D input left out
            grads.append(be.xp.zeros((0,), dtype=g.dtype))
            continue
        index = (slice(None),) * axis + (slice(start, start + n),)
        grads.append(g[index])
        start += n
    return tuple(grads)


@op("stack", "g_i = g[..., i, ...] along the new dim", grads=(), promote="common",
    samples=[case((2, 3), (2, 3), dim=0), case((2, 3), (2, 3), (2, 3), dim=2)])
def stack(be, *xs, dim=0):
    """out = x_1, x_2, ... stacked along a new dim"""
    axis = dim1(dim, xs[0].ndim + 1, "stack")
    for x in xs[1:]:
        if x.shape != xs[0].shape:
            raise ValueError(f"all tensors must have the same shape: got "
                             f"{fmt_shape(xs[0].shape)} and {fmt_shape(x.shape)}")
    return be.xp.stack(xs, axis=axis), (axis,)


@stack.defvjp
def stack_vjp(be, g, saved, dim=0):
    (axis,) = saved
    return tuple(be.xp.moveaxis(g, axis, 0))


OPS = (reshape, permute, expand, diagonal, flip, getitem, setitem, take_along_dim, cat, stack)
