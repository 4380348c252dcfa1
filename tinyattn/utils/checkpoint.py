"""tinyattn.utils.checkpoint: activation checkpointing (torch.utils.checkpoint) — run a block
without keeping its insides for backward, and run it again when backward reaches it.

`checkpoint(block, x, use_reentrant=False)` records one node for the whole block (an
autograd.Function) instead of one per op, so the block's activations (attention's T×T weights,
an MLP's 4C hidden layer) are freed when its forward returns; backward recomputes them from the
saved inputs, with gradients, and takes the gradients of the recomputation with autograd.grad.
The node's inputs are the tensor arguments and every tensor that requires grad which the block
read otherwise (its parameters, a tensor from a closure), found while the forward ran: their
gradients flow out of the node as any op's, so backward() fills the parameters' .grad and
autograd.grad() returns theirs and fills none. Any of them changed in place between the forward
and backward makes backward raise (the recomputation would use the new values). The random
streams are put back as they were before the forward (preserve_rng_state), so dropout drops the
same entries both times. Memory for time: each checkpointed block runs its forward twice.

The two flavours are torch's. use_reentrant=False (recommended): the forward runs in the
caller's grad mode on inputs that require grad as the caller's do, tensors may come anywhere in
the arguments (lists, tuples, dicts, keywords), and the block's output comes back as it
returned it, each tensor in it that requires grad on the node's graph, the others (detached,
computed under no_grad, integer) requiring none. use_reentrant=True (torch's CheckpointFunction):
the forward runs under no_grad; the tensor arguments are the positional ones; keyword arguments,
context_fn and debug are refused; without an argument that requires grad it warns and nothing
gets a gradient; every floating tensor of a returned tensor or tuple requires grad, anything
inside a list or dict none. Left out (or None), use_reentrant warns and is True, as torch 2.13.
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
    no_grad,
    tracing,
)
from ..errors import warn_user
from ..function import Function
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, context_fn=None,
               determinism_check="default", debug=False, early_stop=True,
               preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), its insides not kept for backward but recomputed there.

    use_reentrant=False (recommended): as torch's non-reentrant checkpoint, the forward runs in
    the caller's grad mode on inputs that require grad as the caller's do, so a block that
    branches on requires_grad or is_grad_enabled() takes the same branch in the forward and in
    the recomputation, and register_hook works inside it (the hooks run when backward
    recomputes the block); tensors may come inside lists, tuples and dicts, positional or
    keyword; the output comes back as returned (any structure), its tensors that require grad
    on the graph. use_reentrant=True, or left out (which warns, as torch 2.13): torch's
    reentrant rules (see the module's docstring). torch's keywords are taken and not passed to
    function: context_fn (a function returning two context managers: the forward runs in the
    first, the recomputation in the second), determinism_check ("default" or "none"), debug,
    early_stop."""
    reentrant = _reentrant(use_reentrant, "checkpoint")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check must be 'default' or 'none', got "
                         f"{determinism_check!r} (as torch)")
    if reentrant:
        _reentrant_arguments(kwargs, context_fn, debug)
    run = _Run(function, args, kwargs, nested=not reentrant)
    if not _records(run, reentrant):
        with no_grad() if reentrant else contextlib.nullcontext():
            return run(*run.tensors)
    out = _first_run(run, reentrant, context_fn, preserve_rng_state)
    template, found = _tensors_of(out, reentrant)
    run.diff = [k for k, t in enumerate(found) if _differentiable(t, reentrant)]
    if not run.diff or not any(t.requires_grad for t in [*run.tensors, *run.reads]):
        return out  # nothing to recompute: no output has a gradient to give
    run.out = tuple(found[k] for k in run.diff)
    made = Checkpoint.apply(*run.tensors, *run.reads, run)
    for k, t in zip(run.diff, made, strict=True):
        found[k] = t
    return _put(template, iter(found))


def _records(run, reentrant):
    """Whether the call records a node: in grad mode, and, reentrant, with a tensor argument
    that requires grad (else torch's warning: the call is then a plain one under no_grad)."""
    if reentrant and not any(t.requires_grad for t in run.tensors):
        warn_user("None of the inputs have requires_grad=True. Gradients will be None")
        return False
    return is_grad_enabled()


def _first_run(run, reentrant, context_fn, preserve_rng_state):
    """The block's forward (reentrant: under no_grad), on leaves standing for its tensor
    arguments, the tensors it reads found meanwhile; `run` keeps what backward needs."""
    forward_context, run.recompute_context = (context_fn or _no_contexts)()
    run.streams = _streams() if preserve_rng_state else None
    reads = _Reads(run.tensors)
    inputs = [_like(t, t.requires_grad) for t in run.tensors]
    with forward_context, tracing(reads), (no_grad() if reentrant else enable_grad()):
        out = run(*inputs)
    run.reads, run.n_args, run.reentrant = list(reads.found.values()), len(inputs), reentrant
    return out


_LEFT_OUT = ("{name}: the use_reentrant parameter should be passed explicitly (as torch 2.13 "
             "asks; a later torch raises without it). use_reentrant=False is recommended, but "
             "if you need to preserve the current default behavior, you can pass "
             "use_reentrant=True. Refer to torch's docs for the differences between the two "
             "variants.")


def _reentrant(use_reentrant, name):
    """Which flavour: use_reentrant left out (or None) warns and means True, as torch 2.13;
    any other value counts by its truth, as there."""
    if use_reentrant is None:
        warn_user(_LEFT_OUT.format(name=name))
        return True
    return bool(use_reentrant)


def _reentrant_arguments(kwargs, context_fn, debug):
    """torch's refusals for use_reentrant=True."""
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs)
                         + " (checkpoint: use_reentrant=True takes positional arguments only, "
                         "as torch; pass use_reentrant=False)")
    if context_fn is not None or debug is not False:
        raise ValueError("Passing `context_fn` or `debug` is only supported when "
                         "use_reentrant=False.")


def _tensors_of(out, reentrant):
    """(out with _SLOT for each of its tensors, those tensors): every tensor in it
    (non-reentrant: inside tuples, lists and dicts too), or, reentrant (an autograd.Function),
    out itself or the tensors of a returned tuple."""
    found = []
    if not reentrant:
        return _take(out, found), found
    if isinstance(out, Tensor):
        return _SLOT, [out]
    if type(out) is tuple:
        found = [o for o in out if isinstance(o, Tensor)]
        return tuple(_SLOT if isinstance(o, Tensor) else o for o in out), found
    return out, found


def _differentiable(t, reentrant):
    """Whether an output of the block gets a gradient: non-reentrant, if it requires grad (not
    detached, not made under no_grad); reentrant, if it is floating (torch's Function)."""
    return t.dtype.kind in "fc" if reentrant else t.requires_grad


def checkpoint_sequential(functions, segments, input, use_reentrant=None,  # noqa: A002
                          preserve_rng_state=True):
    """Run `functions` (a Sequential or a list of modules or functions) in turn on input, in
    `segments` runs of about equal length; every run but the last is checkpointed (torch's
    rule). use_reentrant left out warns and is True, as torch 2.13's."""
    use_reentrant = _reentrant(use_reentrant, "checkpoint_sequential")
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
        x = checkpoint(_chain(part), x, use_reentrant=use_reentrant,
                       preserve_rng_state=preserve_rng_state)
    return _chain(runs[-1])(x)


def _chain(functions):
    """The functions run in turn, as one function of the input."""
    def chained(x):
        for f in functions:
            x = f(x)
        return x

    return chained


class _Run:
    """function with its arguments kept, the tensors among them (inside lists, tuples and
    dicts too; with nested False, the positional ones only, as torch's reentrant checkpoint)
    taken out: called with tensors in their places. It also carries to the node the forward's
    differentiable outputs and where they lie among the output's tensors (diff), the streams
    it drew from, how many tensor arguments it has, the other tensors it read, the flavour and
    the context to recompute in."""

    def __init__(self, function, args, kwargs, nested=True):
        self.function = function
        self.tensors = []
        if nested:
            self.args, self.kwargs = _take(args, self.tensors), _take(kwargs, self.tensors)
        else:
            self.tensors = [a for a in args if isinstance(a, Tensor)]
            self.args, self.kwargs = tuple(_SLOT if isinstance(a, Tensor) else a
                                           for a in args), {}
        self.out = self.streams = None
        self.n_args, self.reads, self.diff, self.reentrant = 0, [], [], False
        self.recompute_context = contextlib.nullcontext()

    def __call__(self, *tensors):
        it = iter(tensors)
        return self.function(*_put(self.args, it), **_put(self.kwargs, it))

    def pick(self, out):
        """The differentiable outputs (the node's) among a run's output."""
        found = _tensors_of(out, self.reentrant)[1]
        return [found[k] for k in self.diff]


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
    read, and whose outputs are the block's differentiable outputs: forward hands on those
    already computed (with no graph), backward runs the block again with one and takes its
    gradients with autograd.grad."""

    @staticmethod
    def forward(ctx, *inputs):
        *tensors, run = inputs
        ctx.run = run
        ctx.save_for_backward(*tensors)  # (their versions are checked before backward)
        out, run.out = run.out, None
        if out is None:  # the node run again on these arrays (gradcheck_graph checks it so)
            with _replaying(run), _standing_in(run.reads, tensors[run.n_args:]):
                out = tuple(run.pick(run(*tensors[:run.n_args])))
        return out

    @staticmethod
    def backward(ctx, *gs):
        run = ctx.run
        saved = ctx.saved_tensors
        needs = ctx.needs_input_grad[:-1]  # (False for an integer tensor)
        args = [_like(t, needs[i]) for i, t in enumerate(saved[:run.n_args])]
        with _replaying(run), _standing_in(run.reads, saved[run.n_args:]):
            with enable_grad(), run.recompute_context:
                outs = run.pick(run(*args))
            got = _gradients(run, outs, gs, [*args, *run.reads], needs)
        return tuple(next(got) if n else None for n in needs) + (None,)


def _gradients(run, outs, gs, inputs, needs):
    """The recomputed outputs' gradients (one per output, None for one that got none) taken
    back to the inputs that need one, in turn (an iterator)."""
    if run.reentrant and not any(o.requires_grad for o in outs):
        raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not "
                           "necessary")
    pairs = [(o, g) for o, g in zip(outs, gs, strict=True) if o.requires_grad and g is not None]
    wrt = [t for t, n in zip(inputs, needs, strict=True) if n]
    return iter(grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True)
                if wrt and pairs else [None] * len(wrt))


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
    kept = [(t._data, t._node) for t in reads]
    try:
        for t, x in zip(reads, inputs, strict=True):
            t._data = x._data
            t._node = Node.leaf(t)
        yield
    finally:
        for t, (data, node) in zip(reads, kept, strict=True):
            t._data, t._node = data, node


def _streams():
    """The state of every backend's random stream (what the forward will draw from)."""
    return {name: be.rng_state(be.rng) for name, be in backends.made().items()}


def _set_streams(streams):
    for name, state in streams.items():
        be = backends.backend(name)
        be.rng = be.rng_at(state)
