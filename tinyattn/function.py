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

forward runs without recording a graph and returns one tensor; backward gets the gradient of
that output and returns one gradient per input of forward (None for an input that gets none, and
for non-tensor inputs). Each Function subclass becomes one Op (ops/op.py) that autograd.apply
runs like any other: graph pictures, explain mode and backward_steps show it by its class name.
As for the built-in ops, an input or the output saved with save_for_backward and changed in
place before backward makes backward raise; an integer or bool output requires no grad.
"""

from .autograd import _is_view_of, apply, is_grad_enabled, no_grad, version_of
from .errors import GraphError, ShapeError, fmt_shape
from .ops.op import Op
from .tensor import Tensor


class FunctionCtx:
    """What forward leaves for backward: save_for_backward(*tensors) and saved_tensors, which
    inputs need a gradient (needs_input_grad), and any attribute forward sets (ctx.dim = 1)."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tuple(t.detach() if isinstance(t, Tensor) else t for t in tensors)


class Function:
    """Subclass with static forward(ctx, *inputs) and backward(ctx, grad); call Cls.apply."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass defines forward(ctx, *inputs)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass defines backward(ctx, grad_output)")

    @classmethod
    def apply(cls, *args):
        """Run forward on the inputs and, where one requires grad, record one node whose VJP
        calls backward."""
        if not any(isinstance(a, Tensor) for a in args):
            raise TypeError(f"{cls.__name__}.apply: needs at least one Tensor input")
        needs = tuple(isinstance(a, Tensor) and a.requires_grad and is_grad_enabled()
                      for a in args)
        out = apply(_op_of(cls), *args, fn=cls, needs=needs)
        if out._node is not None:
            if out.dtype.kind != "f":  # an index or a mask: no gradient flows through it
                out._node = None
            else:
                _watch_saved(out, args)
        return out


def _watch_saved(out, args):
    """Give out's node the version counters of the inputs (and of the output) whose memory
    ctx.save_for_backward kept, as the built-in ops' nodes have theirs: backward refuses them
    once changed in place (autograd._check_saved)."""
    node = out._node
    ctx = node.saved[0]
    found = ()
    for s in ctx.saved_tensors:
        if not isinstance(s, Tensor):
            continue
        if _holds(s, out):
            v = version_of(out)
            found += ((v, v[0], None),)
        for i, a in enumerate(args):
            if isinstance(a, Tensor) and _holds(s, a):
                v = version_of(a)
                found += ((v, v[0], i),)
    node.versions += found


def _holds(saved, t):
    """Whether the saved tensor's array is t's, or a view of its memory."""
    return saved.data is t.data or _is_view_of(saved.data, t.data)


def _op_of(cls):
    """The Op standing for a Function subclass (made once, kept on the class)."""
    op = cls.__dict__.get("_op")
    if op is None:
        op = Op(cls.__name__, _forward, f"{cls.__name__}.backward (written by hand)", grads=())
        op.vjp = _backward
        op.doc = (cls.forward.__doc__ or f"{cls.__name__}.forward").strip()
        cls._op = op
    return op


def _forward(be, *arrays, fn, needs):
    """The op's forward: the user's, on tensors around the arrays, with no graph recorded."""
    ctx = FunctionCtx(needs)
    inputs = [Tensor._wrap(a, be) if hasattr(a, "dtype") and hasattr(a, "shape") else a
              for a in arrays]
    with no_grad():
        out = fn.forward(ctx, *inputs)
    if not isinstance(out, Tensor):
        raise GraphError(f"{fn.__name__}.forward must return one Tensor, got "
                        f"{type(out).__name__} (a Function here has one output)")
    return out.data, (ctx, [getattr(a, "shape", None) for a in arrays])


def _backward(be, g, saved, fn, needs):
    """The op's VJP: the user's backward, its gradients checked against the inputs' shapes."""
    ctx, shapes = saved
    with no_grad():
        grads = fn.backward(ctx, Tensor._wrap(g, be))
    grads = grads if isinstance(grads, tuple) else (grads,)
    if len(grads) != len(shapes):
        raise GraphError(f"{fn.__name__}.backward returned {len(grads)} gradients for "
                         f"{len(shapes)} inputs of forward (None for an input that gets none)")
    out = []
    for i, (gx, shape) in enumerate(zip(grads, shapes, strict=True)):
        if gx is None or not needs[i]:
            out.append(None)
            continue
        gx = gx.data if isinstance(gx, Tensor) else be.asarray(gx)
        if gx.shape != shape:
            raise ShapeError(f"{fn.__name__}.backward: the gradient of input {i} has shape "
                             f"{fmt_shape(gx.shape)}, the input {fmt_shape(shape)}")
        out.append(gx)
    return tuple(out)
