"""Gradients of gradients: what `grad(..., create_graph=True)` and `backward(create_graph=True)`
run.

The first-order engine (autograd.py: apply, _walk) runs every VJP on arrays, off the graph, and
stays as it is. This module adds, beside it:

* GRAPH_VJPS, {op name: graph VJP}: each op's VJP written again with tensor ops, so that it
  records a graph of its own. A graph VJP takes a `_Ctx` (the incoming gradient `c.g`, a Tensor
  with its own graph; the node's saved values and params; `c.input(i)`, the op's input i rebuilt
  as a Tensor on the array the op saved, whose node is the input's node, so the new graph leads
  into the original one; `c.out()`, the output on its saved array, whose node is the node
  itself) and returns one Tensor (or None) per input. An op that saved nothing its formula
  needs raises a GraphError (c.input). Two fused ops save no input but are shift-invariant in
  it: layer_norm (x - mean = x̂ / rstd) and cross_entropy (log softmax = log p) rebuild a
  tensor with the input's node from what they saved, and recompute from it.
* `create_graph_pass(starts, retain_graph, sink=None, keep=None)`: the walk. As _walk: a heap on
  node.seq (newest first, each node once all its users sent their part), the saved arrays'
  version checks (autograd._check_saved), tensor hooks (on the Tensor gradient); unlike it,
  grad mode is on, parts are summed with tensor adds, and a leaf's .grad becomes (or is added
  to, out of place) a Tensor with a graph. An op with no graph VJP is a GraphError naming it.

Importing this module sets autograd's registration slot (`autograd._create_graph_pass`), which
grad() and backward() call when create_graph is True (tinyattn/__init__ imports it).
"""

import math
from heapq import heappop, heappush

import numpy

from . import autograd
from .autograd import enable_grad
from .errors import GraphError, ShapeError, fmt_shape
from .ops import REGISTRY
from .ops.elementwise import sgn
from .ops.op import is_const, quiet
from .tensor import Tensor

_OPS = REGISTRY


def _call(name, *inputs, **params):
    return _OPS[name](*inputs, **params)


def _t(array, be, node=None, version=None):
    """A Tensor on `array` whose node is `node` (None: a constant of the new graph)."""
    t = Tensor._wrap(array, be)
    t._node = node
    if version is not None:
        t._version_counter = version
    return t


def _is_array(v):
    return isinstance(v, (numpy.ndarray, numpy.generic)) or hasattr(v, "__cuda_array_interface__")


class _Ctx:
    """What a graph VJP reads: the gradient `g` (a Tensor), the node, its saved values, params
    and `parents` (those the walk sends gradient to: None for an input that needs none)."""

    __slots__ = ("node", "g", "be", "saved", "params", "parents")

    def __init__(self, node, g, parents):
        self.node, self.g, self.be, self.parents = node, g, g.backend, parents
        self.saved, self.params = node.saved, node.params

    def need(self, i):
        return i < len(self.parents) and self.parents[i] is not None

    def _version(self, i):
        for version, _, j in self.node.versions if self.node.versions is not autograd._FREED \
                else ():
            if j == i:
                return version
        return None

    def input(self, i):
        """Input i as the op saved it: a Tensor whose node is the input's (a Python number as
        it is); a GraphError if the op did not save it."""
        op = self.node.op
        place = op.saves.get(i)
        value = None if place is None else self.saved[place]
        if value is None:
            raise GraphError(f"create_graph: {op.name} did not save its input {i}, which the "
                             "gradient of its gradient needs")
        if not _is_array(value):
            return value
        return _t(value, self.be, self.node.parents[i], self._version(i))

    def out(self):
        """The op's output on the array it saved, whose node is the node itself."""
        op = self.node.op
        value = None if op.saves_out is None else self.saved[op.saves_out]
        if value is None:
            raise GraphError(f"create_graph: {op.name} did not save its output, which the "
                             "gradient of its gradient needs")
        return _t(value, self.be, self.node, self._version(None))


# ---- tensor-level helpers -------------------------------------------------------------------


def sum_to(g, shape):
    """Tensor g summed over the dims broadcasting added or stretched, to `shape`."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, g.shape[lead:], strict=True)):
        raise ShapeError(f"cannot sum a gradient of shape {fmt_shape(g.shape)} to "
                         f"{fmt_shape(shape)}")
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and g.shape[lead + i] != 1)
    if axes:
        g = g.sum(dim=axes, keepdim=True)
    return _call("reshape", g, shape=shape)


def _sum(t, axes, keepdim=False):
    """t summed over `axes` (none: t itself; sum(dim=()) would sum every dim)."""
    return t.sum(dim=tuple(axes), keepdim=keepdim) if axes else t


def _const(c, array, dtype=None):
    return _t(array if dtype is None else array.astype(dtype), c.be)


def _masked(c, keep, g):
    """g where keep, else 0 (keep a constant mask, as the array VJPs select)."""
    return _call("where", c.be.xp.asarray(keep, dtype=bool), g, 0.0)


def _swap(t):
    dims = list(range(t.ndim))
    dims[-1], dims[-2] = dims[-2], dims[-1]
    return _call("permute", t, dims=tuple(dims))


# ---- the graph VJPs ----------------------------------------------------------------------------


def _add(c):
    return c.g, c.g


def _sub(c):
    return c.g, (-c.g if c.need(1) else None)


def _mul(c):
    return (c.g * c.input(1) if c.need(0) else None,
            c.g * c.input(0) if c.need(1) else None)


def _div(c):
    g = c.g
    x, y = c.saved
    if is_const(x):  # c / y keeps r = 1/y: y rebuilt as 1/r (its node the input's)
        r = 1 / _t(1 / y, c.be, c.node.parents[1])
        return None, -(g * x) * (r * r)
    y_t = c.input(1)
    return (g / y_t if c.need(0) else None,
            -g * (c.input(0) / y_t / y_t) if c.need(1) else None)


def _neg(c):
    return (-c.g,)


def _pow(c):
    g, (x, y, _) = c.g, c.saved
    gx = gy = None
    if c.need(0):
        x_t = c.input(0)
        if is_const(y):
            gx = g * (y * x_t ** (y - 1)) if y != 0 else g * 0.0
        else:
            y_t = c.input(1)
            gx = _masked(c, y != 0, g * (y_t * x_t ** (y_t - 1)))
    if c.need(1):
        with quiet():
            flat = (x == 0) & (y >= 0)
            log_x = c.input(0).log() if not is_const(x) else math.log(x) if x > 0 else \
                float("-inf") if x == 0 else float("nan")
        gy = g * _masked(c, ~flat, c.out() * log_x)
    return gx, gy


def _exp(c):
    return (c.g * c.out(),)


def _log(c):
    return (c.g / c.input(0),)


def _sqrt(c):
    return (c.g / (2 * c.out()),)


def _tanh(c):
    y = c.out()
    return (c.g * (1 - y * y),)


def _sigmoid(c):
    y = c.out()
    return (c.g * y * (1 - y),)


def _relu(c):
    return (_masked(c, c.saved[0] != 0, c.g),)


def _sin(c):
    return (c.g * c.input(0).cos(),)


def _cos(c):
    return (-c.g * c.input(0).sin(),)


def _abs(c):
    return (c.g * _const(c, sgn(c.be.xp, c.saved[0])),)


def _square(c):
    return (2 * c.g * c.input(0),)


def _erf(c):
    x = c.input(0)
    return (c.g * (2 / math.sqrt(math.pi)) * (-(x * x)).exp(),)


def _unreduce(g, axes, keepdim, shape):
    if not keepdim:
        g = _call("reshape", g, shape=tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return _call("expand", g, shape=tuple(shape))


def _reduce_sum(c):
    axes, shape = c.saved
    return (_unreduce(c.g, axes, c.params.get("keepdim", False), shape),)


def _reduce_mean(c):
    axes, shape = c.saved
    n = math.prod(shape[a] for a in axes)
    return (_unreduce(c.g / n, axes, c.params.get("keepdim", False), shape),)


def _reshape(c):
    return (_call("reshape", c.g, shape=tuple(c.saved[0])),)


def _permute(c):
    dims = c.params["dims"]
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d % len(dims)] = i
    return (_call("permute", c.g, dims=tuple(inverse)),)


def _same(c):
    return (c.g,)


def _getitem(c):
    shape, dtype, advanced = c.saved
    if advanced:
        raise GraphError("create_graph: getitem with an integer or bool array index (advanced "
                         "indexing) has no differentiable VJP; create_graph supports basic "
                         "indexing (ints, slices, None, ...)")
    zeros = _const(c, c.be.xp.zeros(shape, dtype=dtype))
    return (_call("setitem", zeros, c.g, steps=(c.params["index"],)),)


def _setitem(c):
    steps = c.params["steps"]
    gx = _call("setitem", c.g, 0.0, steps=steps) if c.need(0) else None
    gv = None
    if c.need(1):
        gv = c.g
        for index in steps:
            gv = _call("getitem", gv, index=index)
        if c.saved[0] > gv.ndim:
            gv = _call("reshape", gv, shape=(1,) * (c.saved[0] - gv.ndim) + tuple(gv.shape))
    return gx, gv


def _cast(c):
    return (_call("cast", c.g, dtype=c.saved[0]),)


def _split_ties(c, loses):
    x, y = c.saved
    xp = c.be.xp
    share = xp.where(xp.asarray(x == y), 0.5, 1.0).astype(c.g.dtype)
    return (c.g * _const(c, share * ~loses(x, y)) if c.need(0) else None,
            c.g * _const(c, share * ~loses(y, x)) if c.need(1) else None)


def _maximum(c):
    return _split_ties(c, numpy.less)


def _minimum(c):
    return _split_ties(c, numpy.greater)


def _where(c):
    cond = c.saved[0]
    return (None, _masked(c, cond, c.g) if c.need(1) else None,
            _masked(c, ~cond, c.g) if c.need(2) else None)


def _clip(c):
    x = c.saved[0]
    lo, hi = c.params.get("min"), c.params.get("max")
    inside = numpy.ones(numpy.shape(x), dtype=bool)
    if lo is not None:
        inside &= x >= lo
    if hi is not None:
        inside &= x <= hi
    return (_masked(c, inside, c.g),)


def _clamp(c):
    x, lo, hi = c.saved
    inside = True if lo is None else x >= lo
    if hi is not None:
        inside = inside & (x <= hi)
    glo = ghi = None
    if c.need(1):
        glo = _masked(c, x < lo if hi is None else (x < lo) & (lo < hi), c.g)
    if c.need(2):
        ghi = _masked(c, x > hi if lo is None else (x > hi) | (hi < lo), c.g)
    return (_masked(c, inside, c.g) if c.need(0) else None), glo, ghi


def _matmul(c):
    x, y = c.saved
    g = c.g
    x2 = c.input(0) if c.need(1) else None
    y2 = c.input(1) if c.need(0) else None
    if x.ndim == 1 and x2 is not None:
        x2 = _call("reshape", x2, shape=(1, x.shape[0]))
    if y.ndim == 1 and y2 is not None:
        y2 = _call("reshape", y2, shape=(y.shape[0], 1))
    if y.ndim == 1:
        g = _call("reshape", g, shape=(*g.shape, 1))
    if x.ndim == 1:
        g = _call("reshape", g, shape=(*g.shape[:-1], 1, g.shape[-1]))
    gx = gy = None
    if y2 is not None:
        gx = g @ _swap(y2)
        if x.ndim == 1:
            gx = _call("reshape", gx, shape=(*gx.shape[:-2], gx.shape[-1]))
    if x2 is not None:
        gy = _swap(x2) @ g
        if y.ndim == 1:
            gy = _call("reshape", gy, shape=tuple(gy.shape[:-1]))
    return gx, gy


def _linear(c):
    x, weight, n_inputs, bias_shape = c.saved
    g = c.g if weight.ndim == 2 else _call("reshape", c.g, shape=(*c.g.shape, 1))
    g2 = _call("reshape", g, shape=(math.prod(g.shape[:-1]), g.shape[-1]))
    gx = gw = gb = None
    if c.need(0):
        w2 = c.input(1)
        w2 = w2 if weight.ndim == 2 else _call("reshape", w2, shape=(1, weight.shape[0]))
        gx = _call("reshape", g2 @ w2, shape=tuple(x.shape))
    if c.need(1):
        x2 = _call("reshape", c.input(0), shape=(math.prod(x.shape[:-1]), x.shape[-1]))
        gw = _call("reshape", _swap(g2) @ x2, shape=tuple(weight.shape))
    if bias_shape is not None and c.need(2):
        gb = sum_to(c.g, bias_shape)
    return (gx, gw, gb)[:n_inputs]


def _softmax_like(c, y, dim, scale=None):
    g = c.g
    if y.ndim == 0:
        gx = y * (g - g * y)
    else:
        gx = y * (g - (g * y).sum(dim=dim, keepdim=True))
    return gx if scale is None else gx * scale


def _softmax(c):
    return (_softmax_like(c, c.out(), c.params.get("dim", -1)),)


def _log_softmax(c):
    out, g = c.out(), c.g
    s = g if out.ndim == 0 else g.sum(dim=c.params.get("dim", -1), keepdim=True)
    return (g - out.exp() * s,)


def _scaled_masked_softmax(c):
    return _softmax_like(c, c.out(), -1, c.params.get("scale", 1.0)), None


def _layer_norm(c):
    xhat, rstd, weight, has_bias = c.saved
    n_dims, eps = c.params.get("n_dims", 1), c.params.get("eps", 1e-5)
    g = c.g
    norm = tuple(range(xhat.ndim - n_dims, xhat.ndim))
    batch = tuple(range(xhat.ndim - n_dims))
    # x itself is not saved; x - mean(x) = x̂ / rstd is, and the formulas are shift-invariant
    # in x, so a tensor on it whose node is x's gives the same values and derivatives
    with quiet():
        xc = _t(xhat / rstd, c.be, c.node.parents[0])
    xc = xc - xc.mean(dim=norm, keepdim=True)
    r = ((xc * xc).mean(dim=norm, keepdim=True) + eps) ** -0.5
    xh = xc * r
    gh = g * c.input(1) if weight is not None else g
    gx = r * (gh - gh.mean(dim=norm, keepdim=True) - xh * (gh * xh).mean(dim=norm, keepdim=True))
    gw = _sum(g * xh, batch) if weight is not None and c.need(1) else None
    gb = _sum(g, batch) if has_bias and c.need(2) else None
    return (gx if c.need(0) else None, gw, gb)[:len(c.node.parents)]


def _gelu(c):
    x, g = c.input(0), c.g
    if c.params.get("approximate", "none") == "tanh":
        k, a = math.sqrt(2 / math.pi), 0.044715
        t = (k * (x + a * x * x * x)).tanh()
        return (g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * a * x * x)),)
    cdf = 0.5 * (1 + _call("erf", x * (1 / math.sqrt(2))))
    pdf = (-0.5 * (x * x)).exp() * (1 / math.sqrt(2 * math.pi))
    return (g * (cdf + x * pdf),)


def _ce_weights(c, t, valid):
    """cross_entropy's weight of each row, (M,), or one number (0-d) for all."""
    g, reduction = c.g, c.params.get("reduction", "mean")
    if reduction == "none":
        w = _call("reshape", g, shape=(-1,))
    elif reduction == "sum":
        w = g
    else:
        w = g / (len(t) if valid is None else max(int(valid.sum()), 1))
    if valid is not None:
        w = _masked(c, valid, w)
    return w


def _cross_entropy(c):
    p, t, valid, x_shape = c.saved
    xp, smooth = c.be.xp, c.params.get("label_smoothing", 0.0)
    n_class = p.shape[1]
    # x is not saved; softmax is shift-invariant in each row, so log p (x - logsumexp x), on a
    # tensor whose node is x's, gives the same values and derivatives
    with quiet():
        log_p = xp.log(p)
    moved = x_shape[:1] + x_shape[2:] + x_shape[1:2] if len(x_shape) > 2 else x_shape
    n = len(x_shape)
    if n > 2:  # (N, C, d1, ...): the tensor in x's layout, its rows with the classes last
        z = _t(xp.moveaxis(log_p.reshape(moved), -1, 1), c.be, c.node.parents[0])
        z = _call("permute", z, dims=(0, *range(2, n), 1))
    else:
        z = _t(log_p.reshape(x_shape), c.be, c.node.parents[0])
    rows = _call("reshape", z, shape=(-1, n_class))
    probs = _call("softmax", rows, dim=-1)
    target = xp.zeros(p.shape, dtype=p.dtype)
    target[xp.arange(len(t)), t] = 1 - smooth
    target += smooth / n_class
    w = _ce_weights(c, t, valid)
    if w.ndim:
        w = _call("reshape", w, shape=(-1, 1))
    gx = _call("reshape", (probs - _const(c, target)) * w, shape=tuple(moved))
    if n > 2:
        gx = _call("permute", gx, dims=(0, n - 1, *range(1, n - 1)))
    return gx, None


GRAPH_VJPS = {
    "add": _add, "sub": _sub, "mul": _mul, "div": _div, "neg": _neg, "pow": _pow, "exp": _exp,
    "log": _log, "sqrt": _sqrt, "tanh": _tanh, "sigmoid": _sigmoid, "relu": _relu,
    "sin": _sin, "cos": _cos, "abs": _abs, "square": _square, "erf": _erf,
    "maximum": _maximum, "minimum": _minimum, "where": _where, "clip": _clip, "clamp": _clamp,
    "clone": _same, "cast": _cast, "sum": _reduce_sum, "mean": _reduce_mean,
    "reshape": _reshape, "permute": _permute, "expand": _same, "getitem": _getitem,
    "setitem": _setitem, "matmul": _matmul, "linear": _linear, "softmax": _softmax,
    "log_softmax": _log_softmax, "scaled_masked_softmax": _scaled_masked_softmax,
    "layer_norm": _layer_norm, "gelu": _gelu, "cross_entropy": _cross_entropy,
}


# ---- the walk --------------------------------------------------------------------------------


def _fit(op, gx, parent):
    """An input's gradient (a Tensor) at its node's shape (broadcasting summed back) and dtype."""
    autograd._refresh_leaf(parent)
    if tuple(gx.shape) != tuple(parent.shape) and op.broadcasts:
        gx = sum_to(gx, parent.shape)
    if tuple(gx.shape) != tuple(parent.shape):
        raise ShapeError(f"{op.name}: the graph VJP returned a gradient of shape "
                         f"{fmt_shape(gx.shape)} for an input of shape {fmt_shape(parent.shape)}")
    if gx.dtype != parent.dtype:
        gx = _call("cast", gx, dtype=parent.dtype)
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
        g = _call("cast", g, dtype=t.dtype)
    with autograd._grad_lock:
        held = t._grad
        t._grad = _call("clone", g) if held is None else held + g
    if node.op is None and node.tensor.__class__ is autograd._HookedRef:
        autograd._post_accumulate(node.tensor.post, t)


def _uncovered(op):
    return GraphError(f"create_graph: {op.name} has no differentiable VJP (gradients of "
                      "gradients); create_graph=True supports the ops listed in "
                      f"tinyattn/higher_order.py: {', '.join(sorted(GRAPH_VJPS))}")


def _step(node, g, parents, grads, heap, retain_graph):
    """Run one node's graph VJP and send each input its part."""
    op = node.op
    vjp = GRAPH_VJPS.get(op.name)
    if vjp is None or "post" in (getattr(node, "_extras", None) or ()):
        raise _uncovered(op)
    if node.versions:  # saved arrays changed in place, or a graph already freed
        autograd._check_saved(node)
    gs = vjp(_Ctx(node, g, parents))
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


autograd._create_graph_pass = create_graph_pass
