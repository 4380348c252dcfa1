"""tinyattn.utils.checkpoint: activation checkpointing (torch.utils.checkpoint) — run a block
without keeping its insides for backward, and run it again when backward reaches it.

`checkpoint(block, x)` records one node for the whole block (an autograd.Function) instead of
one per op, so the block's activations (attention's T×T weights, an MLP's 4C hidden layer) are
freed when its forward returns; backward recomputes them from the saved inputs, with gradients,
and takes the gradients of the recomputation with autograd.grad. The forward runs as torch's
non-reentrant one: in the caller's grad mode, on inputs that require grad as the caller's do
(its graph lives until it returns), so the block sees the same requires_grad both times. The
node's inputs are the tensor arguments and every tensor that requires grad which the block read
otherwise (its parameters, a tensor from a closure), found while the forward ran: their
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
    _sequence,
    enable_grad,
    grad,
    is_grad_enabled,
    tracing,
)
from ..errors import GraphError
from ..function import Function
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, context_fn=None,
               determinism_check="default", debug=False, early_stop=True,
               preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its insides not kept for backward but recomputed there.

    As torch's non-reentrant checkpoint (use_reentrant=False): the forward runs in the caller's
    grad mode on inputs that require grad as the caller's do, so a block that branches on
    requires_grad or is_grad_enabled() takes the same branch in the forward and in the
    recomputation, and register_hook works inside it (the hooks run when backward recomputes
    the block); tensors may come inside lists, tuples and dicts, positional or keyword.
    function returns a tensor or a tuple (or list) of them (other items pass through, with no
    gradient), as torch's. torch's keywords are taken and not passed to function:
    use_reentrant (either value gives the behaviour above), context_fn (a function returning
    two context managers: the forward runs in the first, the recomputation in the second),
    determinism_check ("default" or "none"), debug, early_stop."""
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check must be 'default' or 'none', got "
                         f"{determinism_check!r} (as torch)")
    run = _Run(function, args, kwargs)
    if not run.tensors:
        raise TypeError("checkpoint: needs at least one Tensor argument")
    if not is_grad_enabled():
        return run(*run.tensors)
    forward_context, run.recompute_context = (context_fn or _no_contexts)()
    streams = _streams() if preserve_rng_state else None
    reads = _Reads(run.tensors)
    inputs = [_like(t, t.requires_grad) for t in run.tensors]
    with forward_context, tracing(reads):  # (grad mode on: the caller's)
        out = run(*inputs)
    if not isinstance(out, Tensor) and not (type(out) in (tuple, list)
                                            and any(isinstance(o, Tensor) for o in out)):
        raise GraphError(f"checkpoint: the function must return a Tensor or a tuple of them, "
                         f"got {type(out).__name__}")
    if type(out) is list:
        out = tuple(out)
    run.out, run.streams, run.n_args = out, streams, len(run.tensors)
    run.reads = list(reads.found.values())
    return Checkpoint.apply(*run.tensors, *run.reads, run)


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
    """function with its arguments kept, the tensors among them (inside lists, tuples and
    dicts too) taken out: called with tensors in their places. It also carries to the node the
    forward's output, the streams it drew from, how many tensor arguments it has, the other
    tensors it read and the context to recompute in."""

    def __init__(self, function, args, kwargs):
        self.function = function
        self.tensors = []
        self.args, self.kwargs = _take(args, self.tensors), _take(kwargs, self.tensors)
        self.out = self.streams = None
        self.n_args, self.reads = 0, []
        self.recompute_context = contextlib.nullcontext()

    def __call__(self, *tensors):
        it = iter(tensors)
        return self.function(*_put(self.args, it), **_put(self.kwargs, it))


_SLOT = object()  # where a tensor was taken out of the arguments


def _take(value, found):
    """`value` with each tensor in it replaced by _SLOT, the tensors appended to `found`."""
    if isinstance(value, Tensor):
        found.append(value)
        return _SLOT
    if type(value) in (list, tuple):
        return type(value)(_take(v, found) for v in value)
    if type(value) is dict:
        return {k: _take(v, found) for k, v in value.items()}
    return value


def _put(value, tensors):
    """_take undone: the next of `tensors` in each _SLOT."""
    if value is _SLOT:
        return next(tensors)
    if type(value) in (list, tuple):
        return type(value)(_put(v, tensors) for v in value)
    if type(value) is dict:
        return {k: _put(v, tensors) for k, v in value.items()}
    return value


def _no_contexts():
    return contextlib.nullcontext(), contextlib.nullcontext()


def _like(t, requires_grad):
    """A leaf with t's values (its memory and version counter: a change of either is seen by
    the other) that requires grad as told: what the block runs on, in the forward as in the
    recomputation."""
    leaf = t.detach()
    if requires_grad:
        leaf.requires_grad_(True)
    return leaf


class _Reads(Tracer):
    """Sees the forward of a block: the tensors that require grad which its ops read, other
    than its tensor arguments and those the block made (parameters, closures), by identity."""

    def __init__(self, args):
        self.args = {id(t) for t in args}
        self.found = {}  # id -> tensor, in the order first read
        self.since = next(_sequence)  # the block's nodes are newer (their seq is smaller)

    def forward(self, op, inputs, params, out):
        for x in inputs:
            if (isinstance(x, TensorBase) and x._node is not None and id(x) not in self.args
                    and id(x) not in self.found and x._node.seq > self.since):
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
    def backward(ctx, *gs):
        run = ctx.run
        saved = ctx.saved_tensors
        needs = ctx.needs_input_grad[:-1]  # (False for an integer tensor)
        args = [_like(t, needs[i]) for i, t in enumerate(saved[:run.n_args])]
        with _replaying(run), _standing_in(run.reads, saved[run.n_args:]):
            with enable_grad(), run.recompute_context:
                out = run(*args)
            # (one gradient per output, None for one that is not a tensor or got none)
            outs = [out] if isinstance(out, Tensor) else list(out)
            pairs = [(o, g) for o, g in zip(outs, gs, strict=True)
                     if isinstance(o, Tensor) and o.requires_grad and g is not None]
            wrt = [t for t, n in zip([*args, *run.reads], needs, strict=True) if n]
            got = iter(grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True)
                       if wrt and pairs else [None] * len(wrt))
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
