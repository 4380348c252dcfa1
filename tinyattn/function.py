"""autograd.Function: an op of your own, forward and backward written with tensors, as torch's.

    class Exp(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    y = Exp.apply(x)      # one node "Exp" in the graph, whose VJP is backward

As torch's: forward gets the arguments themselves (keyword arguments too) and runs without
recording a graph; it returns a tensor, or a tuple (or list) of tensors and other values. The
torch 2 form works too: forward(*args) without ctx, and a setup_context(ctx, inputs, output).
backward gets one gradient per output (zeros for an output that received none, or None after
ctx.set_materialize_grads(False); None for a non-tensor output) and returns one per input of
forward (None for an input that gets none, and for non-tensor inputs; trailing Nones beyond
them are accepted). A gradient of a shape the input broadcasts to is summed down to the input.
ctx.mark_non_differentiable(*outputs): outputs that require no grad (integer and bool outputs
never do). ctx.mark_dirty(*inputs): inputs forward changed in place and returns: the input
itself becomes the output (its version moves on; a leaf that requires grad is refused).
Each Function subclass becomes one Op (ops/op.py) that autograd.apply records like any other:
graph pictures, explain mode and backward_steps show it by its class name (a Function with
several differentiable outputs also gets one small node per output, which picks its part of
the Function node's output: their values, laid end to end in one array).
Version counters as for the built-in ops: an output that is an input, or a view of an input's
memory, shares the input's counter; an input changed in place inside forward counts the change
(so a graph that saved it refuses it in backward); a saved input or output changed in place
before backward makes backward raise. A second backward through a Function whose ctx saved
tensors raises (the graph was freed); one that saved none runs again, as torch's.
Gradients of gradients (create_graph=True) run backward again with grad mode on, the saved
tensors reconnected to their nodes (tinyattn/higher_order/function.py), so a backward written
with tensor ops is differentiable, as torch's; @once_differentiable marks one that is not.
"""

import inspect
import weakref

import numpy

from .autograd import (
    _is_view_of,
    apply,
    bump_version,
    is_grad_enabled,
    no_grad,
    share_version,
    sum_to,
    version_of,
)
from .errors import GraphError, ShapeError, fmt_shape
from .ops import views
from .ops.op import Op
from .tensor import Tensor


class FunctionCtx:
    """What forward leaves for backward: save_for_backward(*tensors) and saved_tensors, which
    inputs need a gradient (needs_input_grad), mark_dirty, mark_non_differentiable,
    set_materialize_grads, and any attribute forward sets (ctx.dim = 1)."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()
        self.materialize_grads = True
        self._dirty = self._non_differentiable = ()

    def save_for_backward(self, *tensors):
        """Keep these (tensors or None) for backward, as ctx.saved_tensors there. Changed in
        place before backward, an input or output kept so makes backward raise."""
        self.saved_tensors = tuple(Tensor._wrap(t._data, t.backend) if isinstance(t, Tensor)
                                   else t for t in tensors)

    def mark_dirty(self, *tensors):
        """These inputs were changed in place by forward (which returns them)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        """These outputs require no grad (backward gets zeros, or None, for them)."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        """False: backward gets None, not zeros, for an output that received no gradient."""
        self.materialize_grads = bool(value)


class Function:
    """Subclass with static forward(ctx, *inputs) and backward(ctx, *grads); call Cls.apply."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass defines forward(ctx, *inputs)")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is optional: define it with a forward that "
                                  "takes no ctx (torch 2's form)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass defines backward(ctx, grad_output)")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward on the arguments and, where a tensor among them requires grad (and grad
        mode is on), record one node whose VJP calls backward."""
        setup = _has_setup_context(cls)
        if setup:  # (torch binds the arguments first: setup_context sees the defaults too)
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        inputs = (*args, *kwargs.values())
        record = is_grad_enabled() and any(isinstance(a, Tensor) and a._node is not None
                                           for a in inputs)
        ctx = FunctionCtx(tuple(isinstance(a, Tensor) and a._node is not None
                                for a in inputs))  # (under no_grad too, as torch)
        with no_grad():
            if setup:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, inputs, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        call = _Call(cls, inputs, len(args), tuple(kwargs), ctx.needs_input_grad)
        return call.outputs(ctx, out, record, inputs)


def once_differentiable(backward):
    """torch's decorator for a backward that is not differentiable itself: the first-order
    pass runs it as it is; a create_graph pass refuses it by name (torch refuses to
    differentiate its result)."""
    backward.once_differentiable = True
    return backward


def _has_setup_context(cls):
    return inspect.getattr_static(cls, "setup_context") is not \
        inspect.getattr_static(Function, "setup_context")


class _Call:
    """One call of a Function: what its node's forward and VJP need (kept in its params):
    where the tensors were among the inputs, their shapes, which outputs are differentiable and
    where each lies in the node's output, and the result of the forward already run."""

    def __init__(self, fn, inputs, n_args, keywords, needs):
        self.fn, self.n_args, self.keywords, self.needs = fn, n_args, keywords, needs
        self.is_tensor = tuple(isinstance(a, Tensor) for a in inputs)
        self.shapes = tuple(a.shape if isinstance(a, Tensor) else None for a in inputs)
        self.layout = []  # per output: None (not a tensor) or [shape, dtype, part]
        self.size = 0  # the node's output: one array, or the differentiable ones end to end
        self.dtype = None
        self.got = set()  # the outputs whose part received a gradient in this pass
        self.result = None  # (output array, saved) of the forward that ran, for apply

    def __repr__(self):
        return f"<{self.fn.__name__} call>"

    # ---- the forward ----------------------------------------------------------------------

    def outputs(self, ctx, out, record, inputs):
        """The tensors Cls.apply returns for forward's `out`: the node recorded (if any output
        is differentiable) and each output given its node, version counter and identity.
        (The call keeps no input: it lives as long as the node, which holds no tensor.)"""
        many = isinstance(out, (tuple, list))
        outs = list(out) if many else [out]
        for t in ctx._dirty:
            _check_dirty(self.fn, t, inputs, record)
            bump_version(t)  # (torch counts the change at mark_dirty too)
        diff = self._plan(outs, ctx, record)
        finals = {}  # id(output) -> the tensor returned for it
        nodes = self._record(outs, diff, ctx, inputs) if diff else {}
        for j in diff:
            finals[id(outs[j])] = _give_node(outs[j], nodes[j], ctx, inputs)
        result = []
        for o in outs:
            if isinstance(o, Tensor) and id(o) not in finals:
                finals[id(o)] = _plain(o, ctx, inputs)
            result.append(finals[id(o)] if isinstance(o, Tensor) else o)
        if diff:
            _watch_saved(nodes["node"], list(finals.values()), inputs)
            nodes["node"].saved.origins = _origins(nodes, diff, outs, inputs)
        for t in ctx._dirty:  # a dirty view (or a base with views): the tensors sharing its
            # memory follow, as after a built-in in-place op (torch's CopySlices); else the
            # base kept its old node, and its gradient skipped this Function
            if t._node is not None and t._version_counter[1] is not None:
                views.rebase(t)
        ctx._dirty = ctx._non_differentiable = ()  # (the node keeps ctx: not these tensors)
        return type(out)(result) if many else result[0]

    def _plan(self, outs, ctx, record):
        """Fill in the layout; the positions of the differentiable outputs (a tensor returned
        twice counts once, at its last place, as torch gives it the gradient there)."""
        last = {id(o): j for j, o in enumerate(outs) if isinstance(o, Tensor)}
        diff = []
        for j, o in enumerate(outs):
            if not isinstance(o, Tensor):
                self.layout.append(None)
                continue
            self.layout.append([o.shape, o.dtype, None])
            if (record and o.dtype.kind == "f" and last[id(o)] == j
                    and not any(o is t for t in ctx._non_differentiable)):
                diff.append(j)
        return diff

    def _record(self, outs, diff, ctx, inputs):
        """Run the node (apply, with the forward's result handed over) and, for several
        differentiable outputs, one part node per output: {position: node, "node": node}."""
        parts = [outs[j]._data for j in diff]
        if len(diff) == 1:
            self.layout[diff[0]][2] = "all"
            self.size, self.dtype = None, parts[0].dtype
        else:
            start = 0
            self.dtype = _common_dtype([p.dtype for p in parts])
            for j, p in zip(diff, parts, strict=True):
                self.layout[j][2] = (start, start + p.size)
                start += p.size
            self.size = start
        self.result = (self._pack(outs[diff[0]].backend, parts), _saved(ctx))
        t = apply(_op_of(self.fn), *inputs, fn=self.fn, call=self)
        found = {"node": t._node}
        for j in diff:
            found[j] = t._node if len(diff) == 1 else apply(_PART, t, part=_Part(self, j))._node
        return found

    def _pack(self, be, parts):
        if self.size is None:
            return parts[0]
        return be.xp.concatenate([p.reshape(-1).astype(self.dtype, copy=False)
                                  for p in parts]) if parts else be.xp.zeros(0)

    def rerun(self, be, arrays):
        """The node's forward run again on arrays (a tool checking it: gradcheck_graph)."""
        inputs = [Tensor._wrap(a, be) if is_t else a
                  for a, is_t in zip(arrays, self.is_tensor, strict=True)]
        args, kw = inputs[:self.n_args], dict(zip(self.keywords, inputs[self.n_args:],
                                                   strict=True))
        ctx = FunctionCtx(self.needs)
        with no_grad():
            if _has_setup_context(self.fn):
                out = self.fn.forward(*args, **kw)
                self.fn.setup_context(ctx, tuple(inputs), out)
            else:
                out = self.fn.forward(ctx, *args, **kw)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        parts = [o._data for o, spec in zip(outs, self.layout, strict=True)
                 if spec is not None and spec[2] is not None]
        return self._pack(be, parts), _saved(ctx)

    # ---- the backward ---------------------------------------------------------------------

    def grad_outputs(self, be, g, ctx):
        """One gradient per output for backward: its part of g, zeros (or None, without
        materialize_grads) where none arrived, None for a non-tensor output."""
        got, self.got = self.got, set()
        grads = []
        for j, spec in enumerate(self.layout):
            if spec is None:
                grads.append(None)
                continue
            shape, dtype, part = spec
            if part == "all":
                grads.append(Tensor._wrap(g, be))
            elif part is not None and (j in got or ctx.materialize_grads):
                grads.append(Tensor._wrap(g[part[0]:part[1]].reshape(shape).astype(
                    dtype, copy=False), be))
            else:
                grads.append(Tensor._wrap(be.xp.zeros(shape, dtype=dtype), be)
                             if ctx.materialize_grads else None)
        return grads

    def input_grads(self, be, grads):
        """backward's result as the VJP's: one array or None per input, checked."""
        name = self.fn.__name__
        grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
        n = len(self.needs)
        if len(grads) > n and all(gx is None for gx in grads[n:]):
            grads = grads[:n]  # (torch accepts trailing Nones)
        if len(grads) != n:
            raise GraphError(f"{name}.backward returned {len(grads)} gradients for {n} inputs "
                             "of forward (None for an input that gets none)")
        out = []
        for i, gx in enumerate(grads):
            if gx is not None and not self.is_tensor[i]:
                raise GraphError(f"{name}.backward returned a gradient for input {i}, which "
                                 "is not a Tensor: return None for it (as torch)")
            if gx is None or not self.needs[i]:
                out.append(None)
                continue
            out.append(_fitted(name, i, gx._data if isinstance(gx, Tensor) else be.asarray(gx),
                               self.shapes[i]))
        return tuple(out)


class _Saved(tuple):
    """A Function node's saved values: (ctx,) if its ctx saved tensors, which backward frees
    after a pass (autograd._walk frees a node whose saved holds more than numbers and shapes:
    the ctx, its tensors with it), else (), which a second pass may use again, as torch's.
    The ctx and the tensors are also its attributes, and `origins`: where each saved tensor
    came from, for gradients of gradients (_origins)."""

    ctx = tensors = None
    origins = ()


def _saved(ctx):
    tensors = ctx.saved_tensors
    saved = _Saved((ctx,) if any(isinstance(t, Tensor) for t in tensors) else ())
    saved.ctx, saved.tensors = ctx, tensors
    ctx.saved_tensors = None  # (the node holds them: freeing its saved frees them)
    return saved


def _forward(be, *arrays, fn, call):
    """The Function node's forward: the result of the forward Cls.apply ran (handed over
    once), or, for a tool running the node again on these arrays, the forward run anew."""
    result, call.result = call.result, None
    return result if result is not None else call.rerun(be, arrays)


_forward.user_function = True  # (GradFn names its node "<Class>Backward", as torch)


def _backward(be, g, saved, fn, call):
    """The Function node's VJP: the user's backward on the output gradients, its gradients
    checked and fitted to the inputs."""
    ctx = saved.ctx
    ctx.saved_tensors = saved.tensors
    try:
        grad_outputs = call.grad_outputs(be, g, ctx)
        with no_grad():
            grads = fn.backward(ctx, *grad_outputs)
    finally:
        ctx.saved_tensors = None
    return call.input_grads(be, grads)


def _op_of(cls):
    """The Op standing for a Function subclass (made once, kept on the class)."""
    op = cls.__dict__.get("_op")
    if op is None:
        op = Op(cls.__name__, _forward, f"{cls.__name__}.backward (written by hand)", grads=())
        op.vjp = _backward
        op.doc = (cls.forward.__doc__ or f"{cls.__name__}.forward").strip()
        cls._op = op
    return op


class _Part:
    """Where output `index` of a Function call lies in its node's output."""

    def __init__(self, call, index):
        self.call, self.index = call, index
        shape, dtype, (self.start, self.stop) = call.layout[index]
        self.shape, self.dtype = shape, dtype

    def __repr__(self):
        return f"output {self.index} of {self.call.fn.__name__}"


def _part_forward(be, packed, part):
    """Output `part.index` of a Function with several differentiable outputs."""
    return packed[part.start:part.stop].reshape(part.shape).astype(part.dtype, copy=False), ()


_part_forward.part_of_parent = True  # (GradFn shows the Function's node for it, as torch)

_PART = Op("function_output", _part_forward, "g[part] = g_output (the rest zeros)", fresh=True)


@_PART.defvjp
def _part_vjp(be, g, saved, part):
    call = part.call
    call.got.add(part.index)
    full = be.xp.zeros(call.size, dtype=call.dtype)
    full[part.start:part.stop] = g.reshape(-1)
    return (full,)


@_PART.defadd_into
def _part_add_into(be, acc, g, saved, part):
    part.call.got.add(part.index)
    acc[part.start:part.stop] += g.reshape(-1)


def _common_dtype(dtypes):
    return numpy.result_type(*dtypes)


def _check_dirty(fn, t, inputs, record):
    """mark_dirty's tensors must be inputs; a leaf that requires grad cannot be (torch)."""
    if not any(t is a for a in inputs):
        raise GraphError(f"{fn.__name__}: mark_dirty was given a tensor that is not an input "
                         "of forward (mark only the inputs forward changed in place)")
    if record and t._node is not None and t._node.op is None:
        raise GraphError(f"{fn.__name__}: forward changed in place (mark_dirty) a leaf that "
                         "requires grad, whose gradient would be lost (as torch); change a "
                         ".clone() of it, or call it under no_grad()")
    if record:  # (a view of a leaf, a view made under no_grad...: refused as torch refuses
        # them for a built-in in-place op, see ops/views.py)
        views.check_in_place(t, f"{fn.__name__}.forward (mark_dirty)")


def _give_node(o, node, ctx, inputs):
    """The tensor returned for differentiable output `o`, on `node`: a dirty input itself,
    a new tensor sharing the version counter of the input whose memory it is, else `o`."""
    target = _plain(o, ctx, inputs)
    target._node = node
    if target._name is not None:
        node.name = target._name
    return target


def _input_seen_in(o, inputs):
    """The input whose memory tensor `o` is (the input itself, or a view of it), or None."""
    for a in inputs:
        if isinstance(a, Tensor) and (o is a or o._data is a._data or
                                      _is_view_of(o._data, a._data)):
            return a
    return None


def _plain(o, ctx, inputs):
    """The tensor returned for an output (before it gets a node, if it does): a dirty input
    itself; an input (or a view of one) as a new tensor sharing its version counter, as
    torch; a tensor with a graph of its own (made outside forward) as a new tensor; else `o`,
    the tensor forward made."""
    if any(o is t for t in ctx._dirty):
        return o
    base = _input_seen_in(o, inputs)
    if base is None and o._node is None:
        return o
    out = Tensor._wrap(o._data, o.backend)
    if base is not None:
        share_version(base, out, differentiable=False)  # (torch refuses its in-place changes)
    return out


def _fitted(name, i, gx, shape):
    """Input i's gradient at its shape: summed down from a shape the input broadcasts to (as
    torch), else an error."""
    if gx.shape != shape:
        try:
            gx = sum_to(gx, shape)
        except ShapeError:
            raise ShapeError(f"{name}.backward: the gradient of input {i} has shape "
                             f"{fmt_shape(gx.shape)}, the input {fmt_shape(shape)}") from None
    return gx


def _watch_saved(node, outputs, inputs):
    """Give the node the version counters of the inputs and outputs whose memory
    ctx.save_for_backward kept, as the built-in ops' nodes have theirs: backward refuses them
    once changed in place (autograd._check_saved)."""
    found = ()
    for s in node.saved.tensors:
        if not isinstance(s, Tensor):
            continue
        for o in outputs:
            if _holds(s, o):
                v = version_of(o)
                found += ((v, v[0], None),)
        for i, a in enumerate(inputs):
            if isinstance(a, Tensor) and _holds(s, a):
                v = version_of(a)
                found += ((v, v[0], i),)
    node.versions += found


def _origins(nodes, diff, outs, inputs):
    """For each tensor ctx saved, the node it stands on in the graph, for a create_graph pass
    running backward on tensors with a graph (tinyattn/higher_order/function.py): an input's
    ("input", i); an output's ("output", a weak reference to its node: the Function's own, or
    its part node when there are several outputs); None for anything else (forward ran without
    a graph: a constant, as in torch). By memory, as _watch_saved matches them."""
    found = []
    for s in nodes["node"].saved.tensors:
        where = None
        if isinstance(s, Tensor):
            where = next((("input", i) for i, a in enumerate(inputs)
                          if isinstance(a, Tensor) and s._data is a._data), None)
            where = where or next((("output", weakref.ref(nodes[j])) for j in diff
                                   if s._data is outs[j]._data), None)
        found.append(where)
    return tuple(found)


def _holds(saved, t):
    """Whether the saved tensor's array is t's, or a view of its memory."""
    return saved._data is t._data or _is_view_of(saved._data, t._data)
