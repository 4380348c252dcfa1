"""The graph VJPs of the ops that gather, scatter and join: cat, stack, as_strided (the
windows of convs and pools), take_along_dim, flip, diagonal, embedding, masked_fill,
scatter, einsum...

Two ops carry every gather and scatter here, and each is the other's VJP: take_along_dim (a
gather along a dim) and scatter_add (the adjoint: a scatter-add along a dim). A view read off
an input's memory (as_strided, diagonal, an advanced getitem in core.py, copy_slices) is a
gather of the input's entries in C order at a constant array of places (`where`), so its
gradient is a scatter-add of g at those places into zeros (repeats add up), and that one's
gradient is the gather again: any order of derivative stays in these two ops.
scatter_reduce's "prod" saves x and src for its second derivative (torch's formulas, and its
refusal where more than one zero of src is sent to one place)."""

import math

from ..errors import GraphError
from ..function import Function
from ..ops.op import dim1
from .base import call, const, masked, sum_to


def _zeros(c, shape, dtype):
    return const(c, c.be.xp.zeros(tuple(shape), dtype=dtype))


def _flat(t):
    return call("reshape", t, shape=(-1,))


def _flat_index(c, where):
    """`where` as a 1-D int64 array of the backend (a copy: broadcast arrays are read-only)."""
    xp = c.be.xp
    return xp.ascontiguousarray(xp.asarray(where, dtype=xp.int64).reshape(-1))


def scatter_flat(c, g, where, shape):
    """zeros(shape) with each entry of g added at its flat place in `where` (g's shape, places
    in C order): the gradient of a gather of those places."""
    flat = call("scatter_add", _zeros(c, (math.prod(shape),), g.dtype), _flat_index(c, where),
                _flat(g), dim=0)
    return call("reshape", flat, shape=tuple(shape))


def gather_flat(c, t, where):
    """t's entries at the flat places `where` (C order), in where's shape."""
    picked = call("take_along_dim", _flat(t), _flat_index(c, where), dim=0)
    return call("reshape", picked, shape=tuple(where.shape))


# ---- the gather and the scatter-add along a dim --------------------------------------------


def _take_along_dim(c):
    indices, shape, axis = c.saved
    g, xp = c.g, c.be.xp
    wide = tuple(g.shape[:axis]) + (shape[axis],) + tuple(g.shape[axis + 1:])
    index = xp.ascontiguousarray(xp.broadcast_to(indices, tuple(g.shape)))
    gx = call("scatter_add", _zeros(c, wide, g.dtype), index, g, dim=axis)
    return sum_to(gx, shape), None  # (x broadcast outside dim: summed back)


def _index_of(c, places):
    """(the index array, its axis) of a scatter op, from the places its forward saved."""
    axis = dim1(c.params["dim"], len(places), c.node.op.name)
    return places[axis], axis


def _gather_src(c, g, index, axis, src_shape, weight=None):
    """The gradient of a scatter's src: g at the places the index sent each entry (times
    `weight`, an array of the index's shape), zeros where the index did not reach src."""
    picked = _pick(g, index, axis)
    if weight is not None:
        picked = picked * const(c, weight, picked.dtype)
    return _padded(c, picked, src_shape)


def _pick(g, index, axis):
    """g (x's shape) at the places the index sends src's entries to, in the index's shape."""
    if any(m != n for d, (m, n) in enumerate(zip(index.shape, g.shape, strict=True))
           if d != axis):
        g = call("getitem", g, index=tuple(slice(None) if d == axis else slice(0, m)
                                           for d, m in enumerate(index.shape)))
    return call("take_along_dim", g, index, dim=axis)


def _padded(c, t, src_shape):
    """t (the index's shape) as src's gradient: zeros where the index did not reach src."""
    if tuple(t.shape) == tuple(src_shape):
        return t
    part = tuple(slice(0, m) for m in t.shape)
    return call("setitem", _zeros(c, src_shape, t.dtype), t, steps=(part,))


def _scatter_add(c):
    places, src_shape = c.saved
    index, axis = _index_of(c, places)
    return c.g, None, _gather_src(c, c.g, index, axis, src_shape) if c.need(2) else None


def _scatter(c):
    places, src_shape = c.saved
    index, axis = _index_of(c, places)
    gx = call("scatter", c.g, index, 0.0, dim=axis) if c.need(0) else None
    gsrc = None
    if src_shape is not None and c.need(2):
        gsrc = _gather_src(c, c.g, index, axis, src_shape)
    return gx, None, gsrc


def _scatter_reduce(c):
    if c.params["reduce"] == "prod":
        return _scatter_prod(c)
    places, src_shape, src_wins, count, x_out = c.saved
    index, axis = _index_of(c, places)
    share = c.g if c.params["reduce"] == "sum" else c.g / const(c, count, c.g.dtype)
    gx = masked(c, ~x_out, share) if c.need(0) else None
    gsrc = _gather_src(c, share, index, axis, src_shape, src_wins) if c.need(2) else None
    return gx, None, gsrc


def _scatter_prod(c):
    """torch's formulas (its scatter_reduce backward), with tensor ops on the x and src the
    node saved: gx = g · prod(x with its zeros as 1, src) / (x with its zeros as 1), 0 where
    include_self=False sent src; gsrc = (g · out)[places] / src, or, for a zero of src that is
    the only one sent to its place, (g · prod(x, src with that zero as 1))[places]."""
    places, src_shape = c.saved[1], c.saved[2]
    index, axis = _index_of(c, places)
    x, src = c.input(0), c.input(2)
    if tuple(src.shape) != tuple(index.shape):  # (the part of src the index reads)
        src = call("getitem", src, index=tuple(slice(0, m) for m in index.shape))
    params = {"dim": axis, "reduce": "prod", "include_self": c.params.get("include_self", True)}
    gx = gsrc = None
    if c.need(0):
        kept = call("where", c.be.xp.asarray(x._data == 0), 1.0, x)
        gx = c.g * call("scatter_reduce", kept, index, src, **params) / kept
        if not params["include_self"]:  # (x is not in the product where src was sent)
            gx = call("scatter", gx, index, 0.0, dim=axis)
    if c.need(2):
        gsrc = _padded(c, _prod_src_part(c, x, src, index, places, params), src_shape)
    return gx, None, gsrc


def _prod_src_part(c, x, src, index, places, params):
    """gsrc of scatter_reduce's prod over the part of src the index reads (see _scatter_prod).
    More than one zero of src sent to one place: torch's second backward through gsrc raises
    (its DelayedError), and so does this one's (_ZerosRefused)."""
    xp, axis = c.be.xp, params["dim"]
    zero = xp.asarray(src._data == 0)
    zeros_at = xp.zeros(tuple(x.shape), dtype=src._data.dtype)
    c.be.scatter_add(zeros_at, places, zero.astype(zeros_at.dtype))
    count = zeros_at[places]
    single = zero & (count == 1)
    lone = call("scatter_reduce", x, index, call("where", single, 1.0, src), **params)
    out = call("scatter_reduce", x, index, src, **params)
    part = call("where", single, _pick(c.g * lone, index, axis),
                _pick(c.g * out, index, axis) / call("where", zero, 1.0, src))
    return _ZerosRefused.apply(part) if (count > 1).any() else part


class _ZerosRefused(Function):
    """The identity, whose gradient is a GraphError: torch's DelayedError for the gradient of
    scatter_reduce prod's gsrc where more than one zero of src is sent to one place."""

    @staticmethod
    def forward(ctx, t):
        return t.clone()

    @staticmethod
    def backward(ctx, g):
        raise GraphError("scatter_reduce(reduce='prod'): the gradient of src's gradient is not "
                         "defined here where more than one zero of src is sent to one place "
                         "(torch's double backward refuses it too)")


def _embedding(c):
    ids, w_shape = c.saved
    xp = c.be.xp
    rows = call("reshape", c.g, shape=(-1, w_shape[1]))
    index = xp.ascontiguousarray(xp.broadcast_to(ids.reshape(-1, 1), tuple(rows.shape)))
    gw = call("scatter_add", _zeros(c, w_shape, c.g.dtype), index, rows, dim=0)
    if c.params.get("scale_grad_by_freq", False):
        counts = xp.bincount(ids.reshape(-1), minlength=w_shape[0])
        gw = _ByFrequency.apply(gw, const(c, xp.maximum(counts, 1)[:, None], gw.dtype))
    return None, gw


class _ByFrequency(Function):
    """gw / counts (each row's gradient over its id's count), whose own gradient goes back
    unscaled: torch's double backward of embedding under scale_grad_by_freq (it gathers the
    rows without the counts). A second pass goes through embedding's first VJP, which divides
    by the counts once more; with both, the second derivative is the true one of the scaled
    gradient (d/dw Σ (2 w)² = 8 w for a squared loss, whatever the counts)."""

    @staticmethod
    def forward(ctx, gw, counts):
        return gw / counts

    @staticmethod
    def backward(ctx, g):
        return g, None


# ---- views read off the input's memory ------------------------------------------------------


def _as_strided(c):
    if "where" in c.params:  # (the as_strided of views.rebase: its places given)
        where, shape = c.params["where"], c.saved[0]
    else:  # (Tensor.as_strided, unfold: its places found by the forward)
        shape, where = c.saved
        if where is None:
            raise GraphError("create_graph: this as_strided view reads memory outside its "
                             "input, so its gradient has nowhere to go")
    return (scatter_flat(c, c.g, where, shape),)


def _diagonal(c):
    (shape,) = c.saved
    p = c.params
    where = c.be.xp.arange(math.prod(shape)).reshape(shape).diagonal(
        p.get("offset", 0), p.get("dim1", 0), p.get("dim2", 1))
    return (scatter_flat(c, c.g, where, shape),)


def _copy_slices(c):
    where = c.params["where"]
    gx = gv = None
    if c.need(0):  # g with the overwritten entries zeroed
        gx = call("scatter", _flat(c.g), _flat_index(c, where), 0.0, dim=0)
        gx = call("reshape", gx, shape=tuple(c.g.shape))
    if c.need(1):
        gv = gather_flat(c, c.g, where)
    return gx, gv


def _same(c):
    return (c.g,)


# ---- joins, flips and masks -----------------------------------------------------------------


def _cat(c):
    axis, sizes = c.saved
    grads, start = [], 0
    for i, n in enumerate(sizes):
        if n is None:  # an empty 1-D input left out
            grads.append(_zeros(c, (0,), c.g.dtype))
            continue
        index = (slice(None),) * axis + (slice(start, start + n),)
        grads.append(call("getitem", c.g, index=index) if c.need(i) else None)
        start += n
    return tuple(grads)


def _stack(c):
    (axis,) = c.saved
    lead = (slice(None),) * axis
    return tuple(call("getitem", c.g, index=lead + (i,)) if c.need(i) else None
                 for i in range(len(c.node.parents)))


def _flip(c):
    return (call("flip", c.g, dims=c.params["dims"]),)


def _masked_fill(c):
    return masked(c, ~c.saved[0], c.g), None


# ---- einsum ---------------------------------------------------------------------------------


def _einsum(c):
    ins, out_subs = c.saved[-2], c.saved[-1]
    return tuple(_einsum_part(c, ins, out_subs, i) if c.need(i) else None
                 for i in range(len(ins)))


def _einsum_part(c, ins, out_subs, i):
    """Operand i's gradient: the einsum of g with the others (as index._einsum_grad)."""
    target = ins[i]
    unique = "".join(dict.fromkeys(target))
    gi, keep = _contract_others(c, ins, out_subs, i, unique)
    size = dict(zip(target, c.saved[i].shape, strict=True))
    gi = _spread_back(gi, keep, unique, size)
    if len(unique) == len(target):
        dims = tuple(unique.index(ch) for ch in target)
        return gi if dims == tuple(range(len(dims))) else call("permute", gi, dims=dims)
    return _onto_diagonals(c, gi, unique, target, size, "".join(ins) + out_subs)


def _contract_others(c, ins, out_subs, i, unique):
    """(g contracted with every operand but i, the letters it keeps: operand i's letters that
    appear in the output or another operand)."""
    others = [j for j in range(len(ins)) if j != i]
    seen = set(out_subs).union(*(ins[j] for j in others))
    keep = "".join(ch for ch in unique if ch in seen)
    if not others and out_subs == keep:
        return c.g, keep
    equation = ",".join([out_subs] + [ins[j] for j in others]) + "->" + keep
    return call("einsum", c.g, *(c.input(j) for j in others), equation=equation), keep


def _spread_back(gi, keep, unique, size):
    """gi (letters `keep`) at the operand's sizes, letters `unique`: summed over a dim of
    size 1 that broadcast elsewhere, and copied along the letters only the operand has."""
    spread = tuple(a for a, ch in enumerate(keep) if size[ch] == 1 and gi.shape[a] != 1)
    if spread:
        gi = gi.sum(dim=spread, keepdim=True)
    got = dict(zip(keep, gi.shape, strict=True))
    gi = call("reshape", gi, shape=tuple(got.get(ch, 1) for ch in unique))
    return call("expand", gi, shape=tuple(size[ch] for ch in unique))


def _onto_diagonals(c, gi, unique, target, size, taken):
    """gi placed on the diagonals of an operand whose subscripts repeat a letter (einsum
    with one identity matrix per repeat, as index._onto_diagonals)."""
    spare = iter(ch for ch in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                 if ch not in taken)
    spelled, eyes, eye_subs = [], [], []
    for ch in target:
        if ch in spelled:
            f = next(spare)
            eyes.append(const(c, c.be.xp.eye(size[ch], dtype=gi.dtype)))
            eye_subs.append(ch + f)
            ch = f
        spelled.append(ch)
    return call("einsum", gi, *eyes,
                equation=",".join([unique] + eye_subs) + "->" + "".join(spelled))


VJPS = {
    "take_along_dim": _take_along_dim, "scatter_add": _scatter_add, "scatter": _scatter,
    "scatter_reduce": _scatter_reduce, "embedding": _embedding, "as_strided": _as_strided,
    "laid_out": _same, "diagonal": _diagonal, "copy_slices": _copy_slices, "cat": _cat,
    "stack": _stack, "flip": _flip, "masked_fill": _masked_fill, "einsum": _einsum,
}
