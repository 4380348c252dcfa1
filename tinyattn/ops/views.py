"""In-place changes through views: the root's history rewritten, as torch's CopySlices.

A view made by a view op (basic indexing, view/reshape, permute/transpose/t, expand, diagonal,
and what is built on them: select, narrow, squeeze, unsqueeze, movedim, split...) remembers
the tensor at the root of its views (`_view_of`, set by autograd.share_version). Its place in
the root's memory is read off the arrays when needed (`positions`: which entries of the root,
in C order, it sees), so every view kind and every chain of them is handled by one rule.

A recorded in-place change of a view v of root r (v.add_(1), v[i] = x, v.zero_(), ...) writes
the memory as before; then (`rebase`) r's node becomes copy_slices(r_old, v_new): r with the
entries v sees replaced by v's new values (the gradient to r_old is g with those entries
zeroed, to v_new those entries of g), and v keeps the change's own node (v_new). A change of r
itself gives r the change's node. Either way, every other live view of r that sees a changed
entry gets the node as_strided(r_new) (its entries read off the new r), so no view is left with
a history that no longer gives its values.

Refused (check_in_place), as torch refuses: a view of a leaf that requires grad; a view made
under no_grad; a piece returned by split, chunk or unbind (functions that return several
views); a view in which two entries are one place in memory (expand); and, as before, a change
that a live tensor outside the root's views would not see (a detach() or an autograd.Function
output of the same memory that has a graph of its own).
"""

import numpy as np

from .. import autograd as ag
from ..autograd import apply
from ..errors import GraphError, fmt_shape
from .op import op
from .samples import case

# ---- the two ops of the rewritten history -----------------------------------------------------


@op("copy_slices", "gx = g with g[view] = 0, gv = g[view]", grads=("gx", "gv"))
def copy_slices(be, x, value, where):
    """out = x with the entries a view of it sees (`where`: their places in x) set to value"""
    out = be.xp.array(x, copy=True, order="C")
    out.reshape(-1)[where.reshape(-1)] = be.xp.asarray(value).reshape(-1)
    return out, ()


@copy_slices.defvjp
def copy_slices_vjp(be, g, saved, where):
    gx = be.xp.array(g, copy=True, order="C")
    flat = gx.reshape(-1)
    gv = flat[where]  # (where's shape: the view's)
    flat[where.reshape(-1)] = 0  # overwritten entries do not depend on x
    return gx, gv


@op("as_strided", "gx = zeros(x.shape); gx[view] += g")
def as_strided(be, x, where):
    """out = the entries of x that a view of it sees (`where`: their places in x, in C order)"""
    return be.xp.ravel(x)[where], (x.shape,)


@as_strided.defvjp
def as_strided_vjp(be, g, saved, where):
    (shape,) = saved
    gx = be.xp.zeros(int(np.prod(shape)), dtype=g.dtype)
    be.scatter_add(gx, where.reshape(-1), be.xp.asarray(g).reshape(-1))
    return (gx.reshape(shape),)


def storage_needed(size, stride, offset):
    """How many entries of memory a view of `size` and `stride` (in entries) from entry `offset`
    reaches into: 0 for an empty view, else one past its last entry (torch's setStorage bound)."""
    if 0 in size:
        return 0
    return 1 + offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))


@op("as_strided", "gx = zeros(x.shape); gx[view] += g (an entry seen twice gets both)",
    view=True)
def strided(be, x, size, stride, offset):
    """out = x's memory (from its start, the array that owns it) read with `size` and `stride`
    (in entries) from entry `offset`: torch's as_strided, a view (unfold is one too)"""
    owner = x
    while getattr(owner, "base", None) is not None and hasattr(owner.base, "strides"):
        owner = owner.base  # (the array that owns the memory: torch's storage)
    item, total = x.itemsize, owner.nbytes // x.itemsize
    need = storage_needed(size, stride, offset)
    if need > total:
        raise ValueError(f"as_strided: sizes {list(size)}, strides {list(stride)}, storage "
                         f"offset {offset}, and itemsize {item} requiring a storage size of "
                         f"{need * item} are out of bounds for storage of size {total * item} "
                         "(torch's setStorage error)")
    run = memory_run(owner)
    if run is None:
        raise ValueError(f"as_strided: the memory of this {fmt_shape(x.shape)} tensor is not "
                         "one run (its array's owner is itself strided); use a .clone() of it")
    flat = run.view(np.uint8)[offset * item:]
    steps = tuple(s * item for s in stride)
    if be.name == "numpy":  # (its base is the owner: a view that shares x's version)
        out = np.ndarray(size, x.dtype, buffer=flat, strides=steps)
    else:
        out = be.xp.lib.stride_tricks.as_strided(flat.view(x.dtype), size, steps)
    return out, (x.shape, positions(be, x, out))


@strided.defvjp
def strided_vjp(be, g, saved, size, stride, offset):
    shape, where = saved
    if where is None:
        raise GraphError(f"as_strided: the view {fmt_shape(size)} (strides {stride}, storage "
                         f"offset {offset}) reads memory outside its input {fmt_shape(shape)}, "
                         "so its gradient has nowhere to go; call as_strided on the tensor "
                         "whose memory it reads (the base)")
    return as_strided_vjp(be, g, (shape,), where)


def memory_run(owner):
    """The entries of an array that owns its memory, flat in memory order (a view of that
    memory), or None where they are no one dense run. C and F order are runs, and so is any
    order of dims: NumPy's fancy indexing along an inner dim allocates its result permuted."""
    if owner.flags.c_contiguous:
        return owner.reshape(-1)
    dense = owner.transpose(sorted(range(owner.ndim), key=lambda d: -owner.strides[d]))
    return dense.reshape(-1) if dense.flags.c_contiguous else None


# ---- where a view sits in its root ------------------------------------------------------------


def positions(be, root, view):
    """The place of each entry of the array `view` among the entries of the array `root` (an
    index into root's entries in C order, in view's shape), for a view into root's memory;
    None where it is not one (root was given other memory: t.data = ...)."""
    item = getattr(root, "itemsize", 0)
    if getattr(view, "itemsize", -1) != item or not hasattr(view, "strides"):
        return None
    if view.size == 0:
        return be.xp.zeros(view.shape, dtype=np.int64)
    start = _address(view) - _address(root)
    offsets = _offsets(start, view.shape, view.strides)
    if root.flags.c_contiguous:
        if start % item or any(s % item for s in view.strides):
            return None
        where = offsets // item
        if where.min() < 0 or where.max() >= root.size:
            return None
    else:  # root's own entries in memory order, then each of view's found among them
        mine = _offsets(0, root.shape, root.strides).reshape(-1)
        order = np.argsort(mine, kind="stable")
        ranked = mine[order]
        at = np.searchsorted(ranked, offsets).clip(0, ranked.size - 1)
        if not (ranked[at] == offsets).all():
            return None
        where = order[at]
    return be.xp.asarray(where.astype(np.int64))


def _offsets(start, shape, strides):
    """The byte offset of each entry of an array of this shape and strides (a NumPy array)."""
    out = np.full((), start, dtype=np.int64)
    for k, (n, s) in enumerate(zip(shape, strides, strict=True)):
        out = out + (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(shape) - k - 1))
    return np.broadcast_to(out, shape)


def _address(array):
    """Where a NumPy or CuPy array's first entry is in memory."""
    pointer = getattr(array.data, "ptr", None)  # (CuPy's MemoryPointer)
    return array.__array_interface__["data"][0] if pointer is None else pointer


def _host(where):
    return where.get() if hasattr(where, "get") else where  # (CuPy: to NumPy)


# ---- who shares the memory ---------------------------------------------------------------------


def root_of(t):
    """The tensor at the root of t's views (t itself when it is not a view)."""
    of = getattr(t, "_view_of", None)
    return t if of is None else of[0]


def _others(t):
    """The live tensors other than t that share its memory (its version counter)."""
    v = t._version_counter
    for ref in (v[1] or ()) if v is not None else ():
        other = ref()
        if other is not None and other is not t:
            yield other


# ---- the rules, and the rewrite ----------------------------------------------------------------

_MULTI = ("{name}: this tensor {shape} is one of the views {rule}() returns, which torch does "
          "not let you change in place while the graph is being recorded (\"Output 0 of "
          "{rule} is a view and is being modified inplace. This view is the output of a "
          "function that returns multiple views\"); change a .clone() of it, or take the "
          "piece with narrow() or x[a:b], whose views may be changed")
_RULES = {
    "no_grad": "{name}: this tensor {shape} is a view made under no_grad, and changing it in "
               "place while grad is recorded is ambiguous (torch forbids it: \"A view was "
               "created in no_grad mode and is being modified inplace with grad mode "
               "enabled\"); make the view with grad enabled, or the change under no_grad too",
    "split": _MULTI, "unbind": _MULTI,
}


OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a "
           "single memory location")


def overlaps(a):
    """Whether two entries of the array `a` are one place in memory the way torch detects it
    (a dim of stride 0 and size > 1: an expand's), which an in-place write refuses; an array
    with no elements has none to share (NumPy gives its dims stride 0)."""
    return a.size > 0 and any(s == 0 and n > 1
                              for n, s in zip(a.shape, getattr(a, "strides", ()), strict=True))


def laid_out_as(xp, a, values):
    """A copy of `values` (an array of a's shape) in new memory laid out as a's is, dims in
    a's order of strides (torch's memory_format=preserve_format: x.t().clone() keeps the
    strides (1, n)); C order where a's is, or where a has overlapping entries (an expand)."""
    order = stride_order(a)
    if order is None:
        return xp.array(values, copy=True, order="C")
    return _in_order(xp, values, order)


def stride_order(a):
    """a's dims from the largest stride to the smallest, or None where C order lays it out so
    (fewer than 2 dims, row-major already, or overlapping entries: an expand)."""
    if a.ndim < 2 or a.flags.c_contiguous or overlaps(a):
        return None
    return tuple(sorted(range(a.ndim), key=lambda d: (-abs(a.strides[d]), d)))


def _in_order(xp, values, order):
    copied = xp.array(values.transpose(order), copy=True, order="C")
    return copied.transpose(tuple(int(i) for i in np.argsort(order)))


@op("laid_out", "gx = g", samples=[case((2, 3), order=(1, 0)), case((2, 3, 4), order=(2, 0, 1))])
def laid_out(be, x, order):
    """out = x in new memory, its dims laid out from the largest stride to the smallest in
    `order` (the *_like functions' preserve_format: zeros_like(x.t()) has x.t()'s strides)"""
    return _in_order(be.xp, x, order), ()


@laid_out.defvjp
def laid_out_vjp(be, g, saved, order):
    return (g,)


def check_in_place(x, name):
    """Raise a GraphError where a recorded in-place change of x, whose memory other tensors
    may share, cannot be recorded (torch's refusals, see the module's docstring)."""
    shape = fmt_shape(x.shape)
    of = getattr(x, "_view_of", None)
    root = x
    if of is not None:
        root, rule = of
        if rule is not None:
            raise GraphError(_RULES[rule].format(name=name, shape=shape, rule=rule))
        node = root._node
        if node is not None and node.op is None:
            raise GraphError(f"{name}: this tensor {shape} is a view of a leaf that requires "
                             "grad, and an in-place change of it while the graph is being "
                             "recorded would change the leaf (torch: \"a view of a leaf "
                             "Variable that requires grad is being used in an in-place "
                             "operation\"); do the update inside `with tinyattn.no_grad():`")
        if overlaps(x._data):
            raise GraphError(f"{name}: more than one entry of this tensor {shape} is one place "
                             "in memory (an expand() view), so an in-place change is ambiguous "
                             f"(torch: \"{OVERLAP}\"); change a .clone() of it instead")
        if positions(x.backend, root._data, x._data) is None:
            raise GraphError(f"{name}: this view {shape} no longer sees its base's memory (the "
                             "base was given other values with .data = ...), so the change "
                             "cannot reach it; change a .clone() of it instead")
    for other in _others(x):
        if other._node is not None and root_of(other) is not root:
            raise GraphError(f"{name}: this tensor {shape} shares its memory with another "
                             "live tensor (a detach() or an autograd.Function's output of it, "
                             "with a graph of its own), whose gradient would not see this "
                             "change; compute a new tensor instead (x = x + y, or x[i] = "
                             "x[i] + y) or make the change under no_grad()")


def rebase(x):
    """After a recorded in-place change of x (its memory written, its node the change's): the
    root's history and the live views that see a changed entry follow (the module's
    docstring). The caller checked the change with check_in_place first."""
    root, written = root_of(x), None
    if root is not x:
        written = positions(x.backend, root._data, x._data)
        _take(root, apply(copy_slices, root, x, where=written))
    if ag._tracers.get() is not None or ag._everywhere:  # (a captured step's recording
        ag.state_changed(root, "values")  # refuses it: a replay would not rewrite it)
    changed = None  # (a mask of root's entries, made when first needed)
    for other in _views(root, x):
        where = positions(other.backend, root._data, other._data)
        if where is None:
            continue
        if written is not None and (other._node is not None or root._node is None):
            if changed is None:
                changed = np.zeros(root._data.size, dtype=bool)
                changed[_host(written).reshape(-1)] = True
            if not changed[_host(where).reshape(-1)].any():
                continue  # its values did not change: its history still gives them (a
                # view with none takes the base's, which requires grad now, as torch's)
        _take(other, apply(as_strided, root, where=where) if root._node is not None else None)


def _views(root, x):
    """The live views of root other than x, but those made under no_grad (no history)."""
    for other in _others(x):
        of = getattr(other, "_view_of", None)
        if of is not None and of[0] is root and of[1] != "no_grad":
            yield other


def _take(t, made):
    """t takes made's node (None: no node), keeping its name on it."""
    t._node = None if made is None else made._node
    if t._node is not None and t._name is not None:
        t._node.name = t._name


def several(pieces, rule):
    """The views split, chunk or unbind return (a tuple), marked as torch marks them: a
    recorded in-place change of one (or of a view of one) is refused (check_in_place)."""
    for piece in pieces:
        of = getattr(piece, "_view_of", None)
        if of is not None and of[1] is None:
            piece._view_of = (of[0], rule)
    return pieces


def check_unrecorded(x, name):
    """A change of the view x that is not recorded (x needs no grad, nor do the arguments),
    while its base requires grad: refused where torch refuses it (grad enabled, and x made
    under no_grad, or a view of a leaf that requires grad made before it did)."""
    root, rule = x._view_of
    node = root._node
    if node is None or not ag.is_grad_enabled():
        return
    if rule == "no_grad":
        raise GraphError(_RULES[rule].format(name=name, shape=fmt_shape(x.shape), rule=rule))
    if node.op is None:
        check_in_place(x, name)  # (its leaf rule)
