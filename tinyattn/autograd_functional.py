"""tinyattn.autograd.functional (torch.autograd.functional): whole Jacobians and their products
with a vector, from reverse mode: jacobian, vjp, jvp.

`jacobian(lambda x: F.softmax(x, -1), x)` is the matrix diag(y) - y yᵀ that the softmax VJP
never builds: one backward pass per output entry, each with a one-hot cotangent. vjp is one
backward pass; jvp (J v) is computed from the Jacobian's rows, so it costs one pass per output
entry too (forward mode would take one: tinyattn has none). hessian, hvp and vhp take a
gradient with create_graph=True (tinyattn/higher_order/: the ops it covers). Every function
takes create_graph=True, as torch's: the results keep a graph to the inputs (jacobian and
hessian stack their rows with tensor ops; jvp then takes torch's double-backward route: the
VJP u -> uᵀ J, linear in u, differentiated along v: J v in two passes).
"""

import numpy as np

from .autograd import enable_grad, grad
from .errors import DTypeError, GraphError, ShapeError, fmt_shape
from .functional import stack
from .tensor import Tensor, ones_like, zeros, zeros_like

__all__ = ["jacobian", "vjp", "jvp", "hessian", "hvp", "vhp"]


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """d func(*inputs) / d inputs: for one output tensor y and one input x, a tensor of shape
    y.shape + x.shape; with a tuple of inputs (or of outputs), a tuple over them (a tuple of
    tuples, [output][input], for both). An output that does not depend on an input gives zeros
    there (with strict=True, an error). `vectorize` is accepted (as torch's) and changes
    nothing; strategy="forward-mode" (with vectorize=True, as torch asks) gives the same
    Jacobian, computed in reverse mode here (tinyattn has no forward mode). create_graph=True:
    the Jacobian keeps a graph to the inputs (its rows taken with create_graph, then stacked)."""
    _check_strategy("jacobian", "strategy", strategy, vectorize, strict)
    return _jacobian(func, inputs, create_graph, strict, "jacobian")


def _jacobian(func, inputs, create_graph, strict, name):
    """jacobian's table, its errors naming `name` (jacobian, or hessian for its gradients)."""
    in_tuple, xs = _leaves(inputs, name, create_graph)
    out_tuple, ys = _outputs(func, xs, name)
    rows = _graph_table_of if create_graph else _table_of
    table = tuple(rows(y, xs, i, strict, name) for i, y in enumerate(ys))
    if not out_tuple:
        return table[0] if in_tuple else table[0][0]
    return table if in_tuple else tuple(row[0] for row in table)


def _check_strategy(name, key, strategy, vectorize, strict):
    """torch's rules for jacobian's strategy (hessian's outer_jacobian_strategy), kept so that
    code written here runs in torch too; `key` names the argument."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"{name}: {key}={strategy!r}: expected 'reverse-mode' or "
                         "'forward-mode' (as torch)")
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError(f"{name}: {key}='forward-mode' is only implemented "
                                  "with vectorize=True (as torch)")
    if strategy == "forward-mode" and strict:
        raise ValueError(f"{name}: strict=True and {key}='forward-mode' are not "
                         "supported together (as torch); set strict=False or use "
                         f"{key}='reverse-mode'")


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), vᵀ J): the outputs (detached) and, shaped as the inputs, the gradient of
    Σ v * outputs. v may be left out when func returns one single-entry tensor.
    create_graph=True: both keep their graph (gradients of gradients)."""
    in_tuple, xs = _leaves(inputs, "vjp", create_graph)
    out_tuple, ys = _outputs(func, xs, "vjp")
    vs = _vectors(v, ys, "vjp", "output", "func returns one tensor")
    live = [i for i, y in enumerate(ys) if y.requires_grad]
    found = [None] * len(xs)
    if live:
        found = list(grad([ys[i] for i in live], list(xs), [vs[i] for i in live],
                          allow_unused=True, create_graph=create_graph))
    result = _filled(found, xs, strict, "vjp", True)
    outs = tuple(ys) if create_graph else tuple(y.detach() for y in ys)
    return (outs if out_tuple else outs[0]), (tuple(result) if in_tuple else result[0])


def _filled(found, xs, strict, name, keep):
    """The gradients `found` (one per input, None for one not used: zeros, or with strict an
    error), kept as they are (`keep`) or detached."""
    result = []
    for j, x in enumerate(xs):
        if found[j] is None:
            _independent(strict, name, None, j)
        result.append(zeros_like(x) if found[j] is None else
                      found[j] if keep else found[j].detach())
    return result


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), J v): the outputs (detached) and, shaped as the outputs, the change of
    each output along the input direction v (shaped as the inputs; may be left out when there
    is one single-entry input). Computed from the Jacobian's rows (one backward pass each);
    create_graph=True: by the double-backward route (_jvp_graph), the results keeping a graph."""
    in_tuple, xs = _leaves(inputs, "jvp", create_graph)
    vs = _vectors(v, xs, "jvp", "input", "there is one input")
    out_tuple, ys = _outputs(func, xs, "jvp")
    if create_graph:
        result = _jvp_graph(ys, xs, vs, strict)
        return (tuple(ys) if out_tuple else ys[0]), (tuple(result) if out_tuple else result[0])
    result = []
    for i, y in enumerate(ys):
        total = zeros_like(y)._data
        for j, block in enumerate(_table_of(y, xs, i, strict, "jvp")):  # y.shape + x_j.shape
            w = vs[j]._data
            total += y.backend.xp.tensordot(block._data, w, axes=w.ndim).astype(y.dtype)
        result.append(Tensor._wrap(total, y.backend))
    outs = tuple(y.detach() for y in ys)
    return (outs if out_tuple else outs[0]), (tuple(result) if out_tuple else result[0])


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """torch's Hessian of a scalar function: the Jacobian of its gradient (taken with
    create_graph=True), shaped x.shape + x.shape (a tuple of tuples for a tuple of inputs).
    create_graph=True: the Hessian keeps a graph to the inputs (third derivatives, for the ops
    tinyattn/higher_order/ covers). vectorize and outer_jacobian_strategy as jacobian's
    vectorize and strategy (torch's rules; the same Hessian either way)."""
    _check_strategy("hessian", "outer_jacobian_strategy", outer_jacobian_strategy, vectorize,
                    strict)
    in_tuple, _ = _tensors(inputs, "input", "hessian")

    def gradients(*xs):
        _, ys = _outputs(func, xs, "hessian")
        if len(ys) != 1 or ys[0].numel() != 1:
            raise ShapeError("hessian: func must return a single-entry tensor")
        gs = grad(ys[0], list(xs), create_graph=True, allow_unused=True)
        gs = tuple(zeros_like(x) if g is None else g for x, g in zip(xs, gs, strict=True))
        return gs if in_tuple else gs[0]

    return _jacobian(gradients, inputs, create_graph, strict, "hessian")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """torch's Hessian-vector product: (func(*inputs), H v), from a gradient taken with
    create_graph=True."""
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """torch's vector-Hessian product: (func(*inputs), vᵀ H), H v transposed (H symmetric)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def _hessian_product(func, inputs, v, create_graph, strict, name):
    in_tuple, xs = _leaves(inputs, name, create_graph)
    _, ys = _outputs(func, xs, name)
    if len(ys) != 1 or ys[0].numel() != 1:
        raise ShapeError(f"{name}: func must return a single-entry tensor")
    vs = _vectors(v, xs, name, "input", "there is one input")
    found = [None] * len(xs)
    if ys[0].requires_grad:
        gs = grad(ys[0], list(xs), create_graph=True, allow_unused=True)
        live = [(g, w) for g, w in zip(gs, vs, strict=True) if g is not None and g.requires_grad]
        if live:
            found = list(grad([g for g, _ in live], list(xs), [w for _, w in live],
                              create_graph=create_graph, allow_unused=True))
    result = _filled(found, xs, strict, name, create_graph)
    out = ys[0] if create_graph else ys[0].detach()
    return out, (tuple(result) if in_tuple else result[0])


# ---- pieces ------------------------------------------------------------------------------------


def _tensors(value, what, name):
    """(was it a tuple, the tensors): one tensor, or a tuple or list of them."""
    is_tuple = isinstance(value, (tuple, list))
    items = tuple(value) if is_tuple else (value,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: {what} {i} must be a tinyattn Tensor, got "
                            f"{type(t).__name__}")
    return is_tuple, items


def _leaves(inputs, name, create_graph=False):
    """The inputs as fresh leaves that require grad (the caller's tensors are not touched);
    with create_graph, an input that requires grad as a view of itself, so the results stay
    on its graph (torch's)."""
    in_tuple, xs = _tensors(inputs, "input", name)
    for j, x in enumerate(xs):
        if x.dtype.kind != "f":
            raise DTypeError(f"{name}: input {j} is {x.dtype}: only floating-point inputs have "
                             "a derivative")
    return in_tuple, tuple(x.view_as(x) if create_graph and x.requires_grad else
                           x.detach().requires_grad_(True) for x in xs)


def _outputs(func, xs, name):
    with enable_grad():  # (as torch: under no_grad too)
        out = func(*xs)
    return _tensors(out, "output", name)


def _table_of(y, xs, i, strict, name):
    """d y / d x for each input x: tensors of shape y.shape + x.shape, one backward pass per
    entry of y (output i) with a one-hot cotangent."""
    blocks = [y.backend.xp.zeros((y.numel(),) + x.shape, dtype=x.dtype) for x in xs]
    used = [False] * len(xs)
    if y.requires_grad:
        for k in range(y.numel()):
            for j, g in enumerate(grad(y, list(xs), _one_hot(y, k), retain_graph=True,
                                       allow_unused=True)):
                if g is not None:
                    blocks[j][k] = g._data
                    used[j] = True
    for j, u in enumerate(used):  # (grad gives None only for an input off y's graph)
        if not u and y.numel():
            _independent(strict, name, i, j)
    return tuple(Tensor._wrap(blocks[j].reshape(y.shape + x.shape), y.backend)
                 for j, x in enumerate(xs))


def _one_hot(y, k):
    """A cotangent shaped as y: 1 at entry k in C order (the Jacobian's row k), 0 elsewhere.
    (Written by position: y may be laid out in another order, where a flat view of its data
    would be a copy.)"""
    onehot = zeros_like(y)
    onehot._data[np.unravel_index(k, y.shape)] = 1
    return onehot


def _graph_table_of(y, xs, i, strict, name):
    """_table_of with create_graph: each row a gradient with a graph (zeros for an input that
    y does not depend on), the rows stacked and shaped y.shape + x.shape."""
    rows = [[] for _ in xs]
    used = [False] * len(xs)
    for k in range(y.numel() if y.requires_grad else 0):
        gs = grad(y, list(xs), _one_hot(y, k), retain_graph=True, create_graph=True,
                  allow_unused=True)
        for j, g in enumerate(gs):
            used[j] = used[j] or g is not None
            rows[j].append(zeros_like(xs[j]) if g is None else g)
    for j, u in enumerate(used):
        if not u and y.numel():
            _independent(strict, name, i, j)
    return tuple(stack(rows[j]).reshape(y.shape + x.shape) if rows[j] else
                 zeros(y.shape + x.shape, dtype=x.dtype) for j, x in enumerate(xs))


def _jvp_graph(ys, xs, vs, strict):
    """J v for each output, keeping a graph (torch's double-backward route): u -> Σ uᵀ J (a
    VJP, linear in the dummy cotangent u) taken with create_graph, then differentiated along
    v with respect to u."""
    us = [zeros_like(y).requires_grad_(True) for y in ys]
    found = _dummy_vjp(ys, xs, us)
    for j, g in enumerate(found):
        if g is None:
            _independent(strict, "jvp", None, j)
    pairs = [(g, v) for g, v in zip(found, vs, strict=True) if g is not None]
    if not pairs:
        return [zeros_like(y) for y in ys]
    jv = grad([g for g, _ in pairs], us, [v for _, v in pairs], create_graph=True,
              allow_unused=True)
    return [zeros_like(y) if t is None else t for y, t in zip(ys, jv, strict=True)]


def _dummy_vjp(ys, xs, us):
    """Σ uᵀ J for each input, with a graph to the cotangents us (None: no output depends on it)."""
    live = [i for i, y in enumerate(ys) if y.requires_grad]
    if not live:
        return [None] * len(xs)
    return grad([ys[i] for i in live], list(xs), [us[i] for i in live], create_graph=True,
                allow_unused=True)


def _independent(strict, name, i, j):
    if strict:
        which = "the output" if i is None else f"output {i}"
        if name == "hessian":  # (its outputs are the gradients: torch's message says so too)
            which = f"the gradient in input {i}"
        raise GraphError(f"{name}: {which} does not depend on input {j}; strict=True refuses "
                         "that (strict=False gives zeros)")


def _vectors(v, like, name, which, alone):
    """v as one tensor per tensor of `like` (vjp: the outputs; jvp: the inputs, `which` names
    them), each of its shape; left out (ones) only for one single-entry tensor (`alone` says
    when that is)."""
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise ShapeError(f"{name}: v may be left out only when {alone} with a single entry; "
                             f"give v shaped as the {which}s")
        return [ones_like(like[0])]
    _, vs = _tensors(v, "v", name)
    if len(vs) != len(like):
        raise ShapeError(f"{name}: {len(vs)} tensors in v for {len(like)} {which}s")
    for i, (w, t) in enumerate(zip(vs, like)):  # noqa: B905 - the lengths are equal (above)
        if w.shape != t.shape:
            raise ShapeError(f"{name}: v {i} has shape {fmt_shape(w.shape)} but {which} {i} has "
                             f"shape {fmt_shape(t.shape)}")
    return list(vs)
