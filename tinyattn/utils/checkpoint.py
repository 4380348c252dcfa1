"""tinyattn.utils.checkpoint: activation checkpointing (torch.utils.checkpoint) — run a block
without keeping its insides for backward, and run it again when backward reaches it.

`checkpoint(block, x)` records one node for the whole block (an autograd.Function) instead of
one per op, so the block's activations (attention's T×T weights, an MLP's 4C hidden layer) are
freed right after the forward; backward recomputes them from the saved inputs, with gradients,
and backpropagates through the copy: the parameters the block uses get their .grad there, the
inputs theirs through the node. The random streams are put back as they were before the
forward (preserve_rng_state), so dropout drops the same entries both times. Memory for time:
each checkpointed block runs its forward twice.
"""

from .. import backends
from ..autograd import backward as run_backward
from ..autograd import enable_grad
from ..errors import GraphError
from ..function import Function
from ..tensor import Tensor, zeros

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its insides not kept for backward but recomputed there.
    function must return one tensor; use_reentrant is accepted (as torch's) and changes
    nothing."""
    run = _Run(function, args, kwargs)
    tensors = [a for a in args if isinstance(a, Tensor)]
    if not tensors:
        raise TypeError("checkpoint: needs at least one Tensor argument")
    # an input that requires grad, so the node is recorded even when no argument needs a
    # gradient: the parameters inside the block still do (it gets none itself)
    anchor = zeros(backend=tensors[0].backend, requires_grad=True)  # 0-d
    return Checkpoint.apply(run, bool(preserve_rng_state), anchor, *tensors)


def checkpoint_sequential(functions, segments, input, use_reentrant=None,  # noqa: A002
                          preserve_rng_state=True):
    """Run `functions` (a Sequential or a list of modules or functions) in turn on input, in
    `segments` runs of about equal length; every run but the last is checkpointed (torch's
    rule)."""
    functions = list(functions)  # (a Sequential iterates over its modules)
    if not isinstance(segments, int) or not 1 <= segments <= max(len(functions), 1):
        raise ValueError(f"checkpoint_sequential: segments must be between 1 and the "
                         f"{len(functions)} functions, got {segments!r}")
    if not functions:
        return input
    size = -(-len(functions) // segments)
    runs = [functions[i:i + size] for i in range(0, len(functions), size)]
    x = input
    for part in runs[:-1]:
        x = checkpoint(_chain, *part, x, preserve_rng_state=preserve_rng_state)
    return _chain(*runs[-1], x)


def _chain(*parts):
    *functions, x = parts
    for f in functions:
        x = f(x)
    return x


class _Run:
    """function with its non-tensor arguments kept: called with the tensor arguments alone."""

    def __init__(self, function, args, kwargs):
        self.function, self.args, self.kwargs = function, args, kwargs

    def __call__(self, *tensors):
        it = iter(tensors)
        args = [next(it) if isinstance(a, Tensor) else a for a in self.args]
        return self.function(*args, **self.kwargs)


class Checkpoint(Function):
    """One node for a whole block: forward runs it with no graph, backward runs it again with
    one and backpropagates through it."""

    @staticmethod
    def forward(ctx, run, preserve, anchor, *tensors):
        ctx.run, ctx.streams = run, _streams() if preserve else None
        ctx.save_for_backward(*tensors)
        out = run(*tensors)
        if not isinstance(out, Tensor):
            raise GraphError(f"checkpoint: the function must return one Tensor, got "
                             f"{type(out).__name__}")
        return out

    @staticmethod
    def backward(ctx, grad):
        needs = ctx.needs_input_grad[3:]  # (False for an integer tensor)
        inputs = [t.detach().requires_grad_(needs[i]) for i, t in enumerate(ctx.saved_tensors)]
        now = _streams()
        try:
            if ctx.streams is not None:
                _set_streams(ctx.streams)  # the draws of the forward, again
            with enable_grad():
                out = ctx.run(*inputs)
        finally:
            _set_streams(now)
        if out.requires_grad:
            run_backward(out, grad)
        return (None, None, None, *(t.grad for t in inputs))


def _streams():
    """The state of every backend's random stream (what the forward will draw from)."""
    return {name: be.rng_state(be.rng) for name, be in backends.made().items()}


def _set_streams(streams):
    for name, state in streams.items():
        be = backends.backend(name)
        be.rng = be.rng_at(state)
