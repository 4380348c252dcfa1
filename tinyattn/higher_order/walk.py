"""The walk of a create_graph pass: as autograd._walk, with grad mode on, each node's graph VJP
(GRAPH_VJPS) run on Tensor gradients, parts summed with tensor adds, and a leaf's .grad a
Tensor with a graph."""

from heapq import heappop, heappush

from .. import autograd
from ..autograd import enable_grad
from ..errors import GraphError, ShapeError, fmt_shape
from .base import GRAPH_VJPS, Ctx, call, sum_to
from .function import vjp_of_function


def _fit(op, gx, parent):
    """An input's gradient (a Tensor) at its node's shape (broadcasting summed back) and dtype."""
    autograd._refresh_leaf(parent)
    if tuple(gx.shape) != tuple(parent.shape) and op.broadcasts:
        gx = sum_to(gx, parent.shape)
    if tuple(gx.shape) != tuple(parent.shape):
        raise ShapeError(f"{op.name}: the graph VJP returned a gradient of shape "
                         f"{fmt_shape(gx.shape)} for an input of shape {fmt_shape(parent.shape)}")
    if gx.dtype != parent.dtype:
        gx = call("cast", gx, dtype=parent.dtype)
    return gx


def _send(grads, heap, node, g):
    prev = grads.get(node)
    if prev is None:
        grads[node] = g
        heappush(heap, (node.seq, node))
    else:
        grads[node] = prev + g


def _run_hooks(node, g):
    """Tensor.register_hook hooks, in order, on the Tensor gradient (a result replaces it)."""
    for hook in list(node.hooks.values()):
        out = hook(g)
        if out is not None:
            if tuple(out.shape) != tuple(g.shape):
                raise ShapeError(f"register_hook: a hook returned a gradient "
                                 f"{fmt_shape(out.shape)} for a tensor {fmt_shape(g.shape)}")
            g = out
    return g


def _deliver(node, g):
    """Add g to the node's tensor's .grad, out of place (a Tensor with a graph, as torch's
    create_graph): a copy (clone) the first time."""
    t = node.tensor()
    if t is None or t._node is not node:
        return
    if g.dtype != t.dtype:
        g = call("cast", g, dtype=t.dtype)
    with autograd._grad_lock:
        held = t._grad
        t._grad = call("clone", g) if held is None else held + g
    if node.op is None and node.tensor.__class__ is autograd._HookedRef:
        autograd._post_accumulate(node.tensor.post, t)


def _uncovered(op):
    return GraphError(f"create_graph: {op.name} has no differentiable VJP (gradients of "
                      "gradients); create_graph=True supports the ops listed in "
                      f"tinyattn/higher_order/: {', '.join(sorted(GRAPH_VJPS))}")


def _step(node, g, parents, grads, heap, retain_graph):
    """Run one node's graph VJP and send each input its part."""
    op = node.op
    vjp = vjp_of_function(op) or GRAPH_VJPS.get(op.name)
    if vjp is None or "post" in (getattr(node, "_extras", None) or ()):
        raise _uncovered(op)
    if node.versions:  # saved arrays changed in place, or a graph already freed
        autograd._check_saved(node)
    gs = vjp(Ctx(node, g, parents))
    if not retain_graph and not autograd._metadata_only(node.saved):
        node.saved, node.versions = None, autograd._FREED
    for parent, gx in zip(parents, gs, strict=False):
        if parent is not None and gx is not None:
            _send(grads, heap, parent, _fit(op, gx, parent))


def create_graph_pass(starts, retain_graph, sink=None, keep=None):
    """The walk of a create_graph pass from `starts`, [(tensor, its gradient: a Tensor)]: each
    leaf's (and retain_grad tensor's) .grad gets its gradient, or, with `sink` ({node: None}),
    each sink node's gradient goes there and only the nodes in `keep` (autograd._between) run."""
    if autograd._retained:
        autograd._follow_retained()
    grads, heap = {}, []
    for t, g in starts:
        _send(grads, heap, t._node, g)
    with enable_grad():
        while heap:
            node = heappop(heap)[1]
            g = grads.pop(node)
            if node.hooks:
                g = _run_hooks(node, g)
            if node.tensor is not None and (sink is None or node.op is not None):
                _deliver(node, g)
            if sink is not None and node in sink:
                sink[node] = g
            if node.op is None or (keep is not None and node not in keep):
                continue
            _step(node, g, node.parents if keep is None else keep[node], grads, heap,
                  retain_graph)

