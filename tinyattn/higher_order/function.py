"""The graph VJPs of custom autograd.Function nodes, as torch differentiates them twice: the
user's backward run again with grad mode on, on Tensor gradients and on the tensors ctx saved,
reconnected to their nodes (a saved input to its own node, a saved output to the node that
made it), so a backward written with tensor ops records a graph of its own. A backward marked
once_differentiable is refused by name. Also function_output's (the part nodes of a Function
with several differentiable outputs): g placed at its part of the Function node's output.

These nodes are found by what they are, not by name (a Function class may be called anything):
walk.py asks `vjp_of_function(op)` first."""

from ..errors import GraphError
from ..function import _PART, _forward
from ..tensor import Tensor
from .base import call, const, sum_to, tensor_on


def vjp_of_function(op):
    """The graph VJP of a Function node's op or of function_output; None for any other op."""
    if op.fwd is _forward:
        return _function
    return _part if op is _PART else None


def _function(c):
    fn, run = c.params["fn"], c.params["call"]
    if getattr(fn.backward, "once_differentiable", False):
        raise GraphError(f"create_graph: {fn.__name__}.backward is marked once_differentiable, "
                         "so it cannot be differentiated again (as torch refuses it); remove "
                         "the mark if backward is written with tensor ops")
    ctx = c.saved.ctx
    ctx.saved_tensors = tuple(_reconnected(c, t, where) for t, where in
                              zip(c.saved.tensors, _padded(c.saved), strict=True))
    try:
        grads = fn.backward(ctx, *_grad_outputs(c, run, ctx))
    finally:
        ctx.saved_tensors = None
    return _input_grads(c, fn, run, grads)


def _padded(saved):
    """Each saved tensor's origin (None for all when the Function was made without them)."""
    return saved.origins or (None,) * len(saved.tensors)


def _reconnected(c, t, where):
    """A saved tensor on its node: an input's, or the node of the output it is (one that is
    gone: a constant); anything else as saved (a constant)."""
    if where is None or not isinstance(t, Tensor):
        return t
    kind, place = where
    node = c.node.parents[place] if kind == "input" else place()
    return t if node is None else tensor_on(t._data, c.be, node)


def _grad_outputs(c, run, ctx):
    """One gradient per output of forward, as Tensors with a graph: g itself for the only
    differentiable output, else its part of g (zeros where nothing arrived: a part of a sum);
    zeros (or None without materialize_grads) for a tensor output that is not differentiable,
    None for a non-tensor output."""
    grads = []
    for spec in run.layout:
        if spec is None:
            grads.append(None)
            continue
        shape, dtype, part = spec
        if part == "all":
            grads.append(c.g)
        elif part is not None:
            piece = call("getitem", c.g, index=slice(part[0], part[1]))
            grads.append(call("cast", call("reshape", piece, shape=tuple(shape)), dtype=dtype))
        else:
            grads.append(const(c, c.be.xp.zeros(shape, dtype=dtype)) if ctx.materialize_grads
                         else None)
    return grads


def _input_grads(c, fn, run, grads):
    """backward's result, one Tensor (or None) per input, checked as the first-order pass
    checks it, each summed to its input's shape where it broadcast."""
    grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
    n = len(run.needs)
    if len(grads) > n and all(gx is None for gx in grads[n:]):
        grads = grads[:n]
    if len(grads) != n:
        raise GraphError(f"{fn.__name__}.backward returned {len(grads)} gradients for {n} "
                         "inputs of forward (None for an input that gets none)")
    out = []
    for i, gx in enumerate(grads):
        if gx is None or not run.needs[i] or not c.need(i):
            out.append(None)
            continue
        gx = gx if isinstance(gx, Tensor) else const(c, c.be.asarray(gx))
        out.append(gx if tuple(gx.shape) == tuple(run.shapes[i]) else sum_to(gx, run.shapes[i]))
    return tuple(out)


def _part(c):
    """function_output: g at its place in the Function node's output (laid end to end)."""
    part = c.params["part"]
    run = part.call
    zeros = const(c, c.be.xp.zeros(run.size, dtype=run.dtype))
    flat = call("cast", call("reshape", c.g, shape=(-1,)), dtype=run.dtype)
    return (call("setitem", zeros, flat, steps=(slice(part.start, part.stop),)),)
