"""tinyattn.utils.checkpoint: activation checkpointing (torch.utils.checkpoint) — run a block
without keeping its insides for backward, and run it again when backward reaches it.

`checkpoint(block, x)` records one node for the whole block (an autograd.Function) instead of
one per op, so the block's activations (attention's T×T weights, an MLP's 4C hidden layer) are
freed right after the forward; backward recomputes them from the saved inputs, with gradients,
and takes the gradients of the recomputation with autograd.grad. The node's inputs are the
tensor arguments and every tensor that requires grad which the block read otherwise (its
parameters, a keyword argument, a tensor from a closure), found while the forward ran: their
gradients flow out of the node as any op's, so backward() fills the parameters' .grad and
autograd.grad() returns theirs and fills none. Any of them changed in place between the forward
and backward makes backward raise (the recomputation would use the new values). The random
streams are put back as they were before the forward (preserve_rng_state), so dropout drops the
same entries both times. Memory for time: each checkpointed block runs its forward twice.
"""

import contextlib

from .. import backends
from ..autograd import (
    Node,
    TensorBase,
    Tracer,
    enable_grad,
    grad,
    is_grad_enabled,
    no_grad,
    tracing,
)
from ..errors import GraphError
from ..function import Function
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its insides not kept for backward but recomputed there.
    function must return one tensor; use_reentrant is accepted (as torch's) and changes
    nothing."""
    run = _Run(function, args, kwargs)
    tensors = [a for a in args if isinstance(a, Tensor)]
    if not tensors:
        raise TypeError("checkpoint: needs at least one Tensor argument")
    if not is_grad_enabled():
        return run(*tensors)
    streams = _streams() if preserve_rng_state else None
    reads = _Reads(tensors)
    with no_grad(), tracing(reads):
        out = run(*tensors)
    if not isinstance(out, Tensor):
        raise GraphError(f"checkpoint: the function must return one Tensor, got "
                         f"{type(out).__name__}")
    run.out, run.streams, run.n_args = out, streams, len(tensors)
    run.reads = list(reads.found.values())
    return Checkpoint.apply(*tensors, *run.reads, run)


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
    """function with its non-tensor arguments kept: called with the tensor arguments alone.
    It also carries to the node the forward's output, the streams it drew from, how many
    tensor arguments it has and the other tensors it read."""

    def __init__(self, function, args, kwargs):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.out = self.streams = None
        self.n_args, self.reads = 0, []

    def __call__(self, *tensors):
        it = iter(tensors)
        args = [next(it) if isinstance(a, Tensor) else a for a in self.args]
        return self.function(*args, **self.kwargs)


class _Reads(Tracer):
    """Sees the forward of a block: the tensors that require grad which its ops read, other
    than its tensor arguments (parameters, keyword arguments, closures), by identity."""

    def __init__(self, args):
        self.args = {id(t) for t in args}
        self.found = {}  # id -> tensor, in the order first read

    def forward(self, op, inputs, params, out):
        for x in inputs:
            if (isinstance(x, TensorBase) and x._node is not None and id(x) not in self.args
                    and id(x) not in self.found):
                self.found[id(x)] = x


class Checkpoint(Function):
    """One node for a whole block, whose inputs are its tensor arguments and the tensors it
    read: forward hands on the output already computed (with no graph), backward runs the
    block again with one and takes its gradients with autograd.grad."""

    @staticmethod
    def forward(ctx, *inputs):
        *tensors, run = inputs
        ctx.run = run
        ctx.save_for_backward(*tensors)  # (their versions are checked before backward)
        out, run.out = run.out, None
        if out is None:  # the node run again on these arrays (gradcheck_graph checks it so)
            with _replaying(run), _standing_in(run.reads, tensors[run.n_args:]):
                out = run(*tensors[:run.n_args])
        return out

    @staticmethod
    def backward(ctx, g):
        run = ctx.run
        saved = ctx.saved_tensors
        needs = ctx.needs_input_grad[:-1]  # (False for an integer tensor)
        args = [t.detach().requires_grad_(needs[i]) for i, t in enumerate(saved[:run.n_args])]
        with _replaying(run), _standing_in(run.reads, saved[run.n_args:]):
            with enable_grad():
                out = run(*args)
            wrt = [t for t, n in zip([*args, *run.reads], needs, strict=True) if n]
            got = iter(grad(out, wrt, g, allow_unused=True) if wrt and out.requires_grad
                       else [None] * len(wrt))
        return tuple(next(got) if n else None for n in needs) + (None,)


@contextlib.contextmanager
def _replaying(run):
    """Inside, the random streams are as they were before the forward (if it kept them)."""
    now = _streams()
    try:
        if run.streams is not None:
            _set_streams(run.streams)  # the draws of the forward, again
        yield
    finally:
        _set_streams(now)


@contextlib.contextmanager
def _standing_in(reads, inputs):
    """Inside, each tensor the block read holds its node input's array (its own, unless a tool
    runs the node on copies) and a fresh leaf node: grad() stops there, and its hooks and
    .grad are left to the walk the node is part of. (The tensors are the user's, changed for
    the block's run: the block reads them by name.)"""
    kept = [(t.data, t._node) for t in reads]
    try:
        for t, x in zip(reads, inputs, strict=True):
            t.data = x.data
            t._node = Node.leaf(t)
        yield
    finally:
        for t, (data, node) in zip(reads, kept, strict=True):
            t.data, t._node = data, node


def _streams():
    """The state of every backend's random stream (what the forward will draw from)."""
    return {name: be.rng_state(be.rng) for name, be in backends.made().items()}


def _set_streams(streams):
    for name, state in streams.items():
        be = backends.backend(name)
        be.rng = be.rng_at(state)
