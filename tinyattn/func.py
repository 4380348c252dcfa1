"""tinyattn.func (torch.func): function transforms and stateless modules.

    params = {k: v.detach() for k, v in model.named_parameters()}
    def loss_fn(params, x, y):
        return F.cross_entropy(ta.func.functional_call(model, params, (x,)), y)
    grads = ta.func.grad(loss_fn)(params, x, y)          # a dict shaped as params

What lives here: functional_call (a module run with other tensors in place of its parameters
and buffers), grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap and
stack_module_state, with torch.func's arguments, results and pytrees (inputs and outputs may
be tensors nested in dicts, tuples and lists).

How it differs from torch.func:
  * The transforms are eager and built on the reverse-mode engine (autograd.grad and
    autograd.functional's jacobian and jvp), not on functorch's levels. jvp and jacfwd are
    exact but computed in reverse mode (one backward pass per output entry): jacfwd gives
    jacrev's result.
  * Second derivatives: grad(grad(f)), a grad of vjp, and hessian (jacrev(grad(f))) work,
    through autograd.grad(..., create_graph=True) (the ops tinyattn/higher_order/ covers).
    A Jacobian (jacrev, jacfwd, jvp) is assembled from arrays and keeps no graph: a transform
    of one (jacfwd(jacrev(f))) raises a GraphError naming it when backward reaches it, rather
    than being silently wrong.
  * vmap is a Python loop over the batch dim: f runs once per entry and the results are
    stacked (the same values as torch's, without its speed). randomness="different" is what
    the loop does by itself, "same" replays the default generator's state for each entry and
    "error" raises if f drew from it; chunk_size is accepted and changes nothing.
"""

import functools

from .autograd import enable_grad, is_grad_enabled
from .autograd import grad as _autograd_grad
from .autograd_functional import jacobian as _jacobian
from .autograd_functional import jvp as _jvp
from .errors import DTypeError, GraphError, ShapeError, fmt_shape
from .function import Function
from .functional import stack
from .nn.module import _held
from .runtime import get_rng_state, set_rng_state
from .tensor import Tensor, zeros_like

__all__ = ["functional_call", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd",
           "hessian", "vmap", "stack_module_state"]  # (and linearize, set by __init__.py)

_MISSING = object()


# ---- pytrees: tensors nested in dicts, tuples and lists ----------------------------------------


def _flatten(tree):
    """(leaves, spec): the leaves of `tree` in order (dicts in their key order) and what
    _unflatten needs to rebuild it (None for a leaf)."""
    if isinstance(tree, dict):
        parts = [_flatten(v) for v in tree.values()]
        return [x for p in parts for x in p[0]], ("dict", tuple(tree), [p[1] for p in parts])
    if isinstance(tree, (tuple, list)):
        parts = [_flatten(v) for v in tree]
        return [x for p in parts for x in p[0]], (type(tree), len(tree), [p[1] for p in parts])
    return [tree], None


def _count(spec):
    return 1 if spec is None else sum(_count(s) for s in spec[2])


def _unflatten(spec, leaves):
    """The tree of `spec` with `leaves` (a sequence, in _flatten's order) at its leaves."""
    leaves = list(leaves)
    if spec is None:
        return leaves[0]
    kind, keys, subs = spec
    parts, at = [], 0
    for s in subs:
        n = _count(s)
        parts.append(_unflatten(s, leaves[at:at + n]))
        at += n
    if kind == "dict":
        return dict(zip(keys, parts, strict=True))
    if kind is tuple or kind is list:
        return kind(parts)
    return kind(*parts)  # a namedtuple


# ---- what the transforms share ------------------------------------------------------------------


class _SecondOrder(Function):
    """A transform's result that depends on inputs which themselves require grad (an outer
    grad, or a model's parameters): its value passes through; backward through it (a second
    derivative) raises, naming the transform."""

    @staticmethod
    def forward(ctx, value, name, *inputs):
        ctx.name = name
        return value.clone()

    @staticmethod
    def backward(ctx, *grads):
        raise GraphError(f"{ctx.name}: gradients of gradients (grad(grad(f)), hessian, a "
                         f"transform of {ctx.name}'s result) are not supported: tinyattn's VJPs "
                         "run on arrays, outside the graph. Detach the inputs first for a "
                         "first-order result, or use torch for second derivatives")


def _results(values, outer, name, graph=False):
    """`values` (tensors) as results: detached, or, where some input requires grad outside
    (`outer`: those inputs), as they are when they have a graph of their own (`graph`:
    gradients taken with create_graph=True), else tied to it through _SecondOrder."""
    if not outer:
        return [v.detach() for v in values]
    if graph:
        return list(values)
    return [_SecondOrder.apply(v, name, *outer) for v in values]


def _track(x, name):
    """x as a tensor to differentiate with respect to: a fresh leaf, or, where x requires grad
    outside (so that the results may stay on the outer graph), a view of x. (tensor, outer)"""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: the inputs to differentiate must be tensors (or dicts, tuples "
                        f"and lists of them), got {type(x).__name__}")
    if x.dtype.kind != "f":
        raise DTypeError(f"{name}: only floating-point tensors have a derivative, got {x.dtype}")
    if x.requires_grad and is_grad_enabled():
        return x.view_as(x), True
    return x.detach().requires_grad_(True), False


def _argnums(argnums, n_args, name):
    """argnums as a tuple of non-negative positions, checked as torch checks them."""
    nums = (argnums,) if isinstance(argnums, int) else argnums
    if not isinstance(nums, tuple) or not nums or not all(isinstance(a, int) for a in nums):
        raise RuntimeError(f"{name}: argnums must be an int or a non-empty tuple of ints, got "
                           f"{argnums!r}")
    out = []
    for a in nums:
        if not -n_args <= a < n_args:
            raise RuntimeError(f"{name}: got argnum={a}, but only {n_args} positional inputs")
        out.append(a % n_args)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{name}: argnums must be unique, got {argnums!r}")
    return tuple(out)


def _split_aux(out, has_aux, name):
    if not has_aux:
        return out, None
    if not isinstance(out, tuple) or len(out) != 2:
        raise RuntimeError(f"{name}: with has_aux=True, f must return a tuple (output, aux), got "
                           f"{type(out).__name__}")
    return out


def _detached(tree, outer):
    """aux (or an output) with its tensors off the inner graph (as torch's; kept as it is
    where the inputs require grad outside)."""
    if outer:
        return tree
    leaves, spec = _flatten(tree)
    return _unflatten(spec, [x.detach() if isinstance(x, Tensor) else x for x in leaves])


def _gradients(outputs, cotangents, xs, retain, graph=False):
    """The gradients of the outputs (with their cotangents) at each of xs: zeros where an
    input is not used. graph: taken with create_graph=True (an outer transform differentiates
    them)."""
    live = [i for i, y in enumerate(outputs) if y.requires_grad]
    found = [None] * len(xs)
    if live and xs:
        found = _autograd_grad([outputs[i] for i in live], list(xs),
                               [cotangents[i] for i in live], retain_graph=retain or graph,
                               allow_unused=True, create_graph=graph)
    return [zeros_like(x).detach() if g is None else g for x, g in zip(xs, found, strict=True)]


# ---- grad, grad_and_value, vjp -------------------------------------------------------------------


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: a function returning (gradient, value) of `func`, which must
    return a 0-d tensor (with has_aux, (that tensor, aux): then (gradient, (value, aux)), as
    torch). The gradient is shaped as argument `argnums` (a pytree of tensors), or is a tuple
    of them for a tuple of argnums."""
    name = "func.grad_and_value"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _grad_and_value(func, argnums, has_aux, name, args, kwargs)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: a function returning the gradient of `func` (a 0-d tensor output)
    with respect to argument `argnums` (a pytree of tensors: the gradient has its structure;
    a tuple of argnums gives a tuple), and with has_aux, (gradient, aux)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = _grad_and_value(func, argnums, has_aux, "func.grad", args, kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


def _grad_and_value(func, argnums, has_aux, name, args, kwargs):
    nums = _argnums(argnums, len(args), name)
    args, specs, xs, outer = list(args), [], [], []
    for n in nums:
        leaves, spec = _flatten(args[n])
        tracked = [_track(x, name) for x in leaves]
        outer += [x for x, (_, o) in zip(leaves, tracked, strict=True) if o]
        xs += [t for t, _ in tracked]
        specs.append((n, spec, len(leaves)))
        args[n] = _unflatten(spec, [t for t, _ in tracked])
    with enable_grad():
        out, aux = _split_aux(func(*args, **kwargs), has_aux, name)
    if not isinstance(out, Tensor) or out.ndim != 0:
        got = f"shape {fmt_shape(out.shape)}" if isinstance(out, Tensor) else type(out).__name__
        raise RuntimeError(f"{name}: f must return a 0-d tensor, got {got} (for a non-scalar "
                           "output, use func.vjp or func.jacrev)")
    graph = bool(outer)  # (grad of grad: the gradients keep a graph)
    gs = _results(_gradients([out], [None], xs, graph, graph), outer, name, graph)
    parts, at = [], 0
    for _, spec, n in specs:
        parts.append(_unflatten(spec, gs[at:at + n]))
        at += n
    g = parts[0] if isinstance(argnums, int) else tuple(parts)
    value = out if outer else out.detach()
    return (g, (value, _detached(aux, outer))) if has_aux else (g, value)


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: (func(*primals), vjp_fn) (with has_aux, (output, vjp_fn, aux)).
    vjp_fn(cotangents), the cotangents shaped as the output (a pytree of tensors), returns a
    tuple with one gradient per primal, each shaped as it; it may be called many times."""
    name = "func.vjp"
    leaves, spec = _flatten(primals)
    tracked = [_track(x, name) for x in leaves]
    outer = [x for x, (_, o) in zip(leaves, tracked, strict=True) if o]
    xs = [t for t, _ in tracked]
    with enable_grad():
        out, aux = _split_aux(func(*_unflatten(spec, xs)), has_aux, name)
    ys, out_spec = _flatten(out)
    for y in ys:
        if not isinstance(y, Tensor):
            raise RuntimeError(f"{name}: f must return tensors (or dicts, tuples and lists of "
                               f"them), got a {type(y).__name__}")

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        cts, ct_spec = _flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError(f"{name}: vjp_fn: the cotangents must have the output's "
                               "structure (the same nesting of dicts, tuples and lists)")
        for i, (c, y) in enumerate(zip(cts, ys, strict=True)):
            if not isinstance(c, Tensor) or c.shape != y.shape:
                got = fmt_shape(c.shape) if isinstance(c, Tensor) else type(c).__name__
                raise ShapeError(f"{name}: vjp_fn: cotangent {i} is {got}, but output {i} has "
                                 f"shape {fmt_shape(y.shape)}")
        graph = bool(outer)
        gs = _results(_gradients(ys, cts, xs, True, graph), outer, name, graph)
        return _unflatten(spec, gs)

    shown = _unflatten(out_spec, ys if outer else [y.detach() for y in ys])
    return (shown, vjp_fn, _detached(aux, outer)) if has_aux else (shown, vjp_fn)


# ---- jvp, jacrev, jacfwd, hessian ----------------------------------------------------------------


def _outer_of(leaves):
    return [x for x in leaves if isinstance(x, Tensor) and x.requires_grad] \
        if is_grad_enabled() else []


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp: (func(*primals), J·tangents) (with has_aux, and aux). primals and
    tangents are tuples (of pytrees) of the same structure. Exact, but computed from the
    Jacobian's rows by reverse mode (autograd.functional.jvp: one backward pass per output
    entry), not forward mode."""
    name = "func.jvp"
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError(f"{name}: expected primals and tangents to be tuples, got "
                           f"{type(primals).__name__} and {type(tangents).__name__}")
    leaves, spec = _flatten(primals)
    t_leaves, t_spec = _flatten(tangents)
    if t_spec != spec:
        raise RuntimeError(f"{name}: tangents must have the structure of primals")
    held = {}

    def flat(*xs):
        out, held["aux"] = _split_aux(func(*_unflatten(spec, xs)), has_aux, name)
        ys, held["spec"] = _flatten(out)
        return tuple(ys)

    outs, jv = _jvp(flat, tuple(leaves), tuple(t_leaves), strict=strict)
    outer = _outer_of(leaves)
    outs, jv = (_unflatten(held["spec"], _results(v, outer, name)) for v in (outs, jv))
    return (outs, jv, held["aux"]) if has_aux else (outs, jv)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev: a function returning the Jacobian of `func` with respect to
    argument(s) `argnums`: for each output leaf (the output's structure), a tensor of shape
    output.shape + input.shape per input leaf (argument `argnums`'s structure; a tuple over a
    tuple of argnums). One backward pass per output entry (autograd.functional.jacobian);
    chunk_size is accepted and changes nothing."""
    return _jacobian_of(func, argnums, has_aux, "func.jacrev")


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the same Jacobian as jacrev, and computed as jacrev computes it (in
    reverse mode: tinyattn has no forward mode); randomness is accepted and changes nothing."""
    return _jacobian_of(func, argnums, has_aux, "func.jacfwd")


def hessian(func, argnums=0):
    """torch.func.hessian: the Jacobian of func's gradient, jacrev(grad(func)) (the gradient
    taken with create_graph=True: the ops tinyattn/higher_order/ covers)."""
    return jacrev(grad(func, argnums), argnums)


def _jacobian_of(func, argnums, has_aux, name):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), name)
        groups = [_flatten(args[n]) for n in nums]
        flat_in = [x for leaves, _ in groups for x in leaves]
        held = {}

        def flat(*xs):
            new, at = list(args), 0
            for n, (leaves, spec) in zip(nums, groups, strict=True):
                new[n] = _unflatten(spec, xs[at:at + len(leaves)])
                at += len(leaves)
            out, held["aux"] = _split_aux(func(*new, **kwargs), has_aux, name)
            ys, held["spec"] = _flatten(out)
            return tuple(ys)

        table = _jacobian(flat, tuple(flat_in))
        outer = _outer_of(flat_in)
        rows = [_by_argnum(_results(row, outer, name), groups, argnums) for row in table]
        jac = _unflatten(held["spec"], rows)
        return (jac, held["aux"]) if has_aux else jac

    return wrapper


def _by_argnum(row, groups, argnums):
    """One output's Jacobian blocks (one per input leaf) in the structure of the arguments."""
    parts, at = [], 0
    for leaves, spec in groups:
        parts.append(_unflatten(spec, row[at:at + len(leaves)]))
        at += len(leaves)
    return parts[0] if isinstance(argnums, int) else tuple(parts)


# ---- vmap ---------------------------------------------------------------------------------------


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.func.vmap: `func` mapped over a dim of its inputs. A Python loop: func runs once
    per entry of the batch dim (each mapped input `select`ed there) and the results are stacked
    along out_dims, so values, gradients through it and errors inside func are as without
    vmap, at the loop's speed. in_dims: an int or None for every argument, or a tuple with one
    entry per positional argument (an int, None: not mapped, or a nested structure matching
    the argument); out_dims likewise for the output (a tensor or a pytree of them). Keyword
    arguments are not mapped. randomness: "error" (raise if func draws from the default
    generator), "different" (what a loop does) or "same" (each entry from the same state)."""
    if randomness not in ("error", "different", "same"):
        raise ValueError("vmap: only allowed values for randomness are 'error', 'different', or "
                         f"'same'; got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0, got {chunk_size}")
    name = f"vmap({getattr(func, '__name__', type(func).__name__)}, in_dims={in_dims!r}, ...)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
            raise ValueError(f"{name}(<inputs>): expected in_dims to be an int or a (nested) "
                             f"tuple matching the inputs, got {type(in_dims).__name__}")
        leaves, spec = _flatten(args)
        dims = _dims_for(in_dims if isinstance(in_dims, int) else tuple(in_dims), args,
                         name, "in_dims")
        size = _batch_size(leaves, dims, name)
        rows = _mapped(func, randomness, name, size, leaves, dims, spec, kwargs)
        return _stacked_outputs(rows, out_dims, name)

    return wrapper


def _dims_for(dims, tree, name, what):
    """The dim (int or None) for each leaf of `tree`, from `dims`: one int or None for the
    whole tree, or a structure matching it."""
    if dims is None or (isinstance(dims, int) and not isinstance(dims, bool)):
        return [dims] * len(_flatten(tree)[0])
    if isinstance(dims, (tuple, list)) and isinstance(tree, (tuple, list)) \
            and len(dims) == len(tree):
        return [d for sub, t in zip(dims, tree, strict=True)
                for d in _dims_for(sub, t, name, what)]
    if isinstance(dims, dict) and isinstance(tree, dict) and set(dims) == set(tree):
        return [d for k in tree for d in _dims_for(dims[k], tree[k], name, what)]
    raise ValueError(f"{name}: {what} {dims!r} is not compatible with the structure of "
                     f"{'the inputs' if what == 'in_dims' else 'the output'}")


def _batch_size(leaves, dims, name):
    sizes = []
    for x, d in zip(leaves, dims, strict=True):
        if d is None:
            continue
        if not isinstance(x, Tensor):
            raise ValueError(f"{name}(<inputs>): got in_dim={d} for an input of type "
                             f"{type(x).__name__}: only tensors can be mapped over; use None "
                             "as its in_dim")
        if not -x.ndim <= d < max(x.ndim, 1) or x.ndim == 0:
            raise ValueError(f"{name}(<inputs>): got in_dim={d} for an input of shape "
                             f"{fmt_shape(x.shape)}: expected -{x.ndim} <= in_dim < {x.ndim}")
        sizes.append(x.shape[d])
    if not sizes:
        raise ValueError(f"{name}(<inputs>): at least one input must be mapped over (an in_dim "
                         "that is not None, for a tensor)")
    if len(set(sizes)) != 1:
        raise ValueError(f"{name}: expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0]


def _mapped(func, randomness, name, size, leaves, dims, spec, kwargs):
    """func's output for each entry of the batch (the loop)."""
    state = get_rng_state() if randomness != "different" else None
    rows = []
    for b in range(size):
        if randomness == "same":
            set_rng_state(state)
        entry = [x if d is None else x.select(d, b) for x, d in zip(leaves, dims, strict=True)]
        rows.append(func(*_unflatten(spec, entry), **kwargs))
        if randomness == "error" and get_rng_state().numpy().tobytes() != \
                state.numpy().tobytes():
            raise RuntimeError(f"{name}: called a random operation while in randomness error "
                               "mode; use randomness='same' or 'different', or draw the "
                               "random values outside vmap")
    return rows


def _stacked_outputs(rows, out_dims, name):
    leaves, spec = _flatten(rows[0])
    for row in rows[1:]:
        if _flatten(row)[1] != spec:
            raise ValueError(f"{name}: f returned outputs of different structures for "
                             "different entries of the batch")
    dims = _dims_for(out_dims, rows[0], name, "out_dims")
    columns = list(zip(*(_flatten(row)[0] for row in rows), strict=True))
    out = []
    for i, (column, d) in enumerate(zip(columns, dims, strict=True)):
        if d is None:
            out.append(column[0])
            continue
        if not isinstance(column[0], Tensor):
            raise ValueError(f"{name}: f must only return tensors, got {type(column[0]).__name__}"
                             f" for output {i} (set its out_dims to None to return it as it is)")
        nd = column[0].ndim
        if not -(nd + 1) <= d <= nd:
            raise ValueError(f"{name}: out_dims={d} for output {i} of {nd} dims: expected "
                             f"-{nd + 1} <= out_dim <= {nd}")
        out.append(stack(list(column), dim=d % (nd + 1)))
    return _unflatten(spec, out)


# ---- modules: functional_call, stack_module_state -----------------------------------------------


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """torch.func.functional_call: module(*args, **kwargs) with the tensors of
    `parameter_and_buffer_dicts` (a dict {dotted name: tensor}, or a tuple or list of them)
    in place of the parameters and buffers of those names, for this call only: gradients
    flow to the given tensors, and the module's own are put back afterwards (even when forward
    raises). tie_weights: a tensor given for one name of tied parameters (one Parameter under
    several names) is used for all of them. strict: every parameter and buffer must be given,
    and no other name. A name that is neither is set as a plain attribute for the call."""
    values = _merged(parameter_and_buffer_dicts)
    if tie_weights:
        values = _tied(module, values)
    if strict:
        _check_strict(module, values)
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    undo = []
    try:
        for name, t in values.items():
            undo.append(_swap(module, name, t))
        return module(*args, **(kwargs or {}))
    finally:
        for restore in reversed(undo):
            restore()


def _merged(dicts):
    if isinstance(dicts, dict):
        return dict(dicts)
    if not isinstance(dicts, (tuple, list)) or not all(isinstance(d, dict) for d in dicts):
        raise ValueError("functional_call: parameter_and_buffer_dicts must be a dict, or a tuple "
                         f"or list of dicts, got {type(dicts).__name__}")
    out = {}
    for d in dicts:
        twice = sorted(set(out) & set(d))
        if twice:
            raise ValueError(f"functional_call: {twice} appeared in multiple dictionaries; "
                             "this will lead to ambiguous results")
        out.update(d)
    return out


def _tied(module, values):
    """values, each tensor given for one name of a tied parameter (or buffer) set for every
    name of it."""
    names = {}
    for kind in ("named_parameters", "named_buffers"):
        for name, t in getattr(module, kind)(remove_duplicate=False):
            names.setdefault(id(t), []).append(name)
    out = dict(values)
    for group in names.values():
        given = [n for n in group if n in values]
        if len(group) < 2 or not given:
            continue
        if any(values[n] is not values[given[0]] for n in given):
            raise ValueError(f"functional_call got multiple values for keys {sorted(given)}, "
                             "which are tied. Consider using tie_weights=False")
        out.update((n, values[given[0]]) for n in group)
    return out


def _check_strict(module, values):
    known = {n for kind in ("named_parameters", "named_buffers")
             for n, _ in getattr(module, kind)(remove_duplicate=False)}
    missing, unexpected = sorted(known - set(values)), sorted(set(values) - known)
    if missing or unexpected:
        lines = [f"Error(s) in reparametrizing for {type(module).__name__}:"]
        if unexpected:
            lines.append("Unexpected key(s): " + ", ".join(repr(n) for n in unexpected) + ".")
        if missing:
            lines.append("Missing key(s): " + ", ".join(repr(n) for n in missing) + ".")
        raise RuntimeError("\n\t".join(lines))


def _swap(module, dotted, t):
    """Put `t` at `dotted` (a parameter's, a buffer's or a plain attribute's place) and return
    the function that puts back what was there."""
    path, _, name = dotted.rpartition(".")
    owner = module.get_submodule(path)
    was_held = _held.get(id(t)) is t
    for kind in (owner._parameters, owner._buffers):
        if name in kind:
            old = kind[name]
            kind[name] = t  # (the registry sets the attribute that forward reads too)

            def restore(kind=kind, old=old):
                kind[name] = old
                if not was_held and _held.get(id(t)) is t:
                    del _held[id(t)]  # (t is no module's any more)
            return restore
    old = owner.__dict__.get(name, _MISSING)
    owner.__dict__[name] = t

    def restore_plain():
        if old is _MISSING:
            owner.__dict__.pop(name, None)
        else:
            owner.__dict__[name] = old
    return restore_plain


def stack_module_state(models):
    """torch.func.stack_module_state: (params, buffers), two dicts {name: the models' tensors
    of that name stacked along a new first dim}, for vmap over an ensemble through
    functional_call. The stacked parameters are new leaves (requiring grad where the models'
    do), not tied to the models."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: expected at least one model, got 0")
    if len({m.training for m in models}) != 1:
        raise RuntimeError("stack_module_state: expected all models to have the same "
                           "training/eval mode")
    if len({type(m) for m in models}) != 1:
        raise RuntimeError("stack_module_state: expected all models to be of the same class")
    params = _stacked_state(models, "named_parameters")
    buffers = _stacked_state(models, "named_buffers")
    return params, buffers


def _stacked_state(models, kind):
    named = [dict(getattr(m, kind)()) for m in models]
    out = {}
    for name in named[0]:
        ts = [d[name] for d in named]
        needs = {t.requires_grad for t in ts}
        if len(needs) != 1:
            raise RuntimeError(f"stack_module_state: expected {name} from each model to have "
                               "the same .requires_grad")
        out[name] = stack([t.detach() for t in ts]).requires_grad_(needs.pop())
    return out
