"""Shape ops: reshape permute expand getitem cat stack.

They move values around without changing them, so each VJP moves g back the other way.
The rest of the shape vocabulary is built on these in tensor.py: view/flatten/squeeze/unsqueeze
are reshapes, transpose and .T are permutes, split and chunk are getitems.
"""

from ..errors import ShapeError, fmt_shape
from . import broadcasts_to, dim1, op


@op("reshape", "gx = reshape(g, x.shape)")
def reshape(be, x, shape):
    """out = x with the same values in the given shape (-1: inferred)"""
    try:
        return x.reshape(shape), (x.shape,)
    except ValueError:
        raise ValueError(f"cannot reshape {fmt_shape(x.shape)} ({x.size} elements) into "
                         f"{fmt_shape(shape)}") from None


@reshape.defvjp
def reshape_vjp(be, g, saved, shape):
    (x_shape,) = saved
    return (g.reshape(x_shape),)


@op("permute", "gx = permute(g, inverse(dims))")
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


@op("expand", "gx = sum_to(g, x.shape)", broadcasts=True)
def expand(be, x, shape):
    """out = x broadcast to `shape` (a view: nothing is copied)"""
    if not broadcasts_to(x.shape, shape):
        raise ShapeError(f"expand: cannot expand {fmt_shape(x.shape)} to {fmt_shape(shape)}: "
                         "from the right, each dim must be equal or 1 in the tensor")
    return be.xp.broadcast_to(x, shape), ()


@expand.defvjp
def expand_vjp(be, g, saved, shape):
    return (g,)  # autograd's sum_to adds up the copies, since expand broadcasts


@op("getitem", "gx = zeros(x.shape); gx[index] += g", fresh=True)
def getitem(be, x, index):
    """out = x[index] (ints, slices, ..., None, integer or bool arrays)"""
    return x[index], (x.shape, x.dtype, _is_advanced(index))


@getitem.defvjp
def getitem_vjp(be, g, saved, index):
    shape, dtype, advanced = saved
    gx = be.xp.zeros(shape, dtype=dtype)
    if advanced:
        be.scatter_add(gx, index, g)  # a repeated index collects every g sent to it
    else:
        gx[index] = g
    return (gx,)


def _is_advanced(index):
    """Whether `index` holds an array (NumPy's advanced indexing, which can repeat entries)."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(hasattr(p, "shape") and p.ndim > 0 or isinstance(p, list) for p in parts)


@op("cat", "g_i = g[..., offset_i : offset_i + n_i, ...] along dim")
def cat(be, *xs, dim=0):
    """out = x_1, x_2, ... joined along dim"""
    axis = dim1(dim, xs[0].ndim, "cat")
    for x in xs[1:]:
        if x.ndim != xs[0].ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, xs[0].shape, strict=True))
                if i != axis):
            raise ValueError(f"shapes must match except in dim {axis}: got "
                             f"{fmt_shape(xs[0].shape)} and {fmt_shape(x.shape)}")
    return be.xp.concatenate(xs, axis=axis), (axis, [x.shape[axis] for x in xs])


@cat.defvjp
def cat_vjp(be, g, saved, dim=0):
    axis, sizes = saved
    grads, start = [], 0
    for n in sizes:
        index = (slice(None),) * axis + (slice(start, start + n),)
        grads.append(g[index])
        start += n
    return tuple(grads)


@op("stack", "g_i = g[..., i, ...] along the new dim")
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


OPS = (reshape, permute, expand, getitem, cat, stack)
