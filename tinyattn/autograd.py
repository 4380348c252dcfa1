"""Reverse-mode autograd: `apply` runs an op and records a node; `backward` walks the nodes back.

A Node is what one op call leaves for the backward pass: the op, the nodes of its inputs (None
where an input needs no gradient), the arrays its VJP needs (`saved`), the op's parameters and
the shape and dtype of its output (what the gradient arriving at it must have).
A leaf tensor that requires grad owns a leaf node (op None) that knows where `.grad` goes.
Backward is iterative (no recursion limit), sums broadcast gradients back to input shapes in one
place (`sum_to`), accumulates with `+` (in place into the sums it made itself; a getitem's
gradient is added at its index, `Op.add_into`) and frees each interior gradient once used.
Grad mode and the module name scope are contextvars, so threads and tasks do not share them.
"""

import contextlib
import contextvars
import copy
import functools
import inspect
import itertools
import numbers
import sys
import threading
import types
import weakref
from heapq import heappop, heappush  # (names, not heapq.x: backward calls them per node)

import numpy

from .display import one_line
from .dtypes import FLOATS, HALF, WIDE, promote, promoted  # noqa: F401 (replay: FLOATS, promote)
from .errors import (
    BackendError,
    DimError,
    DTypeError,
    GraphError,
    ShapeError,
    TinyattnError,
    fmt_shape,
    warn_user,
)

_grad_enabled = contextvars.ContextVar("tinyattn_grad_enabled", default=True)
_scope = contextvars.ContextVar("tinyattn_scope", default=None)
_tracers = contextvars.ContextVar("tinyattn_tracers", default=None)  # None: _everywhere
_inference = contextvars.ContextVar("tinyattn_inference_mode", default=False)
_everywhere = ()  # the tracers of every thread and task that set none (trace_everywhere)


# ---- what the graph knows of a tensor ----------------------------------------------------------


class TensorBase:
    """The part of a tensor the graph reads and writes: its array, backend, .grad, name, node
    and version counter. tinyattn.Tensor (tensor.py) adds the methods, and makes itself the
    class apply's outputs and every .grad are made of (`use_tensor_class`): the graph never
    imports the module that defines the ops' user-facing methods. (.grad lives in `_grad`: the
    graph writes that directly, a user's assignment goes through the checks of `grad`.)"""

    # (`_leaf`, unset on most tensors: the leaf node of a tensor whose requires_grad was turned
    # off, kept with its hooks for when it is turned on again; see Tensor._require. `_view_of`,
    # unset but on views made by a view op: (base, rule), see share_version and ops/views.py)
    __slots__ = ("_data", "backend", "_grad", "_name", "_node", "_version_counter", "_leaf",
                 "_view_of", "__weakref__")

    def _set_data(self, value):
        """`t.data = v`: v's array becomes t's, as torch's .data assignment swaps the values a
        tensor holds (another shape or dtype too) without touching the graph. A Tensor gives
        its array (and its backend); a backend array is taken as it is."""
        if isinstance(value, TensorBase):
            self._data, self.backend = value._data, value.backend
        elif hasattr(value, "dtype") and hasattr(value, "shape"):
            self._data = value
        else:
            raise TypeError(f".data: a tensor's data is a tensor (or a backend array), got a "
                            f"{type(value).__name__}; wrap it first: ta.tensor(...)")

    def _detached(self):
        """`t.data`, as torch's: a new tensor on the same array and backend (no copy), with no
        node (requires_grad False, a leaf) and a version counter of its own, so autograd does
        not see in-place changes made through it (`w.data.normal_(0, 0.02)`, `p.data.add_(g,
        alpha=-lr)` after a forward: no "changed in place" error at backward). A plain Tensor,
        a Parameter's too. The library reads and writes the array itself, `_data`."""
        if isinstance(self._data, numpy.generic):  # (a 0-d op result's NumPy scalar: an array
            self._data = numpy.array(self._data)  # now, so a write through .data reaches it)
        out = _wrap(self._data, self.backend)
        if type(self._version_counter) is InferenceVersion:  # (an inference tensor's: one too,
            out._version_counter = InferenceVersion((0, None))  # as torch's)
        return out

    # (While a captured step records, watching_data_reads swaps in a getter that tells the
    # tracers of a read from outside the library.)
    data = property(_detached, _set_data)

    def _watched_data(self):
        """.data while a recording watches (watching_data_reads): a read from code outside
        tinyattn (fn's own: `if flag.data > 0`) is told to the tracers as a value read, which
        a replay could not make again; the library's own reads are not."""
        if (_tracers.get() is not None or _everywhere) and _by_user(sys._getframe(1)):
            for tracer in current_tracers():
                read = getattr(tracer, "read", None)  # (any object may be a tracer)
                if read is not None:
                    read(self, ".data")
        return self._detached()

    def _watched_set_data(self, value):
        """`t.data = v` while a recording watches: told to the tracers as a change ("data")
        when code outside tinyattn gives t another array (`t.data += 1` gives back its own:
        its read of .data is what they are told)."""
        if (_tracers.get() is not None or _everywhere) and _by_user(sys._getframe(1)) and (
                getattr(value, "_data", value) is not self._data):
            state_changed(self, "data")
        self._set_data(value)

    @classmethod
    def _wrap(cls, array, be):
        """A tensor around an existing backend array, with no graph (no copy)."""
        t = cls.__new__(cls)
        t._data = array
        t.backend = be
        t._grad = None
        t._name = None
        t._node = None
        t._version_counter = None  # [count, sharers], made on first use (version_of)
        return t


    @property
    def name(self):
        """A label for learners ("S", "A", "loss"), as micrograd's `label`: graph pictures,
        explain mode and backward steps show it. It is kept on the tensor's node too, so an
        intermediate tensor that is gone by the time the graph is drawn keeps its name."""
        return self._name

    @name.setter
    def name(self, value):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"Tensor.name must be a str or None, got {type(value).__name__}")
        self._name = value
        if self._node is not None:
            self._node.name = value

    def _set_grad(self, value):
        """`t.grad = g`, with torch's checks: g is None or a tensor of t's shape, dtype and
        backend (backward adds into it; another shape or dtype would be a later, obscure
        error, or a silently broadcast gradient)."""
        if value is not None:
            if not isinstance(value, TensorBase):
                raise TypeError(f".grad: expected a Tensor or None, got {type(value).__name__} "
                                "(as torch; wrap an array with tinyattn.tensor(...))")
            if value.backend is not self.backend:
                raise BackendError(f".grad: assigned a gradient on the {value.backend.name} "
                                   f"backend to a tensor on {self.backend.name}; move it with "
                                   f".to('{self.backend.name}') first")
            if value._data.shape != self._data.shape:
                raise ShapeError(f".grad: assigned a gradient of shape "
                                 f"{fmt_shape(value._data.shape)} to a tensor of shape "
                                 f"{fmt_shape(self._data.shape)}; a gradient has its tensor's "
                                 "shape (as torch)")
            if value._data.dtype != self._data.dtype:
                raise DTypeError(f".grad: assigned a {value._data.dtype} gradient to a "
                                 f"{self._data.dtype} tensor; a gradient has its tensor's dtype "
                                 f"(as torch): convert it with .to({self._data.dtype}) first")
        if _tracers.get() is not None or _everywhere:  # (a captured step's recording refuses)
            state_changed(self, "grad")
        self._grad = value

    def _get_grad(self):
        """The gradient backward filled in (leaves and retain_grad tensors), or None; reading
        it on a tensor made by an op that keeps none warns, as torch (a common slip: the
        gradient wanted is the leaf's, or retain_grad() was missing)."""
        g = self._grad
        if g is None:
            node = self._node
            if node is not None and node.op is not None and node.tensor is None:
                warn_user(
                    "The .grad of a tensor that is not a leaf is being read: backward does not "
                    "fill it in. Call .retain_grad() on it before backward to keep its "
                    "gradient, or read the .grad of the leaf tensor you meant", UserWarning)
        return g

    grad = property(_get_grad, _set_grad)


Tensor = TensorBase  # the class outputs are made of; tensor.py replaces it with tinyattn.Tensor
# Tensor._wrap, bound once: looking a classmethod up on the class makes a new bound method
# every time (apply writes _wrap out: it makes a tensor per op)
_wrap = TensorBase._wrap
_new = object.__new__


def use_tensor_class(cls):
    """Make apply's outputs and .grad instances of `cls` (a TensorBase subclass, made as
    `_wrap` makes them: cls.__new__, then TensorBase's slots)."""
    global Tensor, _wrap, _new
    Tensor = cls
    _wrap = cls._wrap
    _new = cls.__new__


# ---- grad mode --------------------------------------------------------------------------------


def is_grad_enabled():
    return _grad_enabled.get()


class _GradMode:
    """A context manager (and decorator) that sets grad mode for its block.

    As torch's: `@no_grad()` and bare `@no_grad` both decorate; a decorated generator function
    runs its body in the mode each time it resumes, the caller's mode holding in between."""

    enabled = True
    _bare = True  # `@no_grad` without parentheses decorates (set_grad_enabled needs its mode)

    def __new__(cls, *args, **kwargs):
        if cls._bare and len(args) == 1 and not kwargs and callable(args[0]):
            return cls()(args[0])  # used bare as a decorator: the decorated function
        return super().__new__(cls)

    def __init__(self):
        self._tokens = []

    def _mode(self):
        return self.enabled

    def __enter__(self):
        # (inside inference_mode, grad mode turned on records nothing, as torch's: only
        # inference_mode(False) turns recording back on)
        self._tokens.append(_grad_enabled.set(self._mode() and not _inference.get()))
        return self

    def __exit__(self, *exc):
        _grad_enabled.reset(self._tokens.pop())

    def __call__(self, fn):
        again = self._again
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator(*args, **kwargs):
                return _in_mode(again, fn(*args, **kwargs))

            return generator

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with again():
                return fn(*args, **kwargs)

        return wrapper

    def _again(self):
        """A manager of the same mode for one call of a decorated function."""
        return type(self)()


def _in_mode(manager, gen):
    """Run generator `gen` with each resumption (next, send, throw, close) inside a fresh
    `manager()`, so that the caller's grad mode holds between them (torch's wrapping of a
    decorated generator)."""
    try:
        with manager():
            response = gen.send(None)
        while True:
            try:
                request = yield response
            except GeneratorExit:
                with manager():
                    gen.close()
                raise
            except BaseException as e:  # (handed on to gen, which may catch it)
                with manager():
                    response = gen.throw(e)
            else:
                with manager():
                    response = gen.send(request)
    except StopIteration as e:
        return e.value


class no_grad(_GradMode):  # noqa: N801 - PyTorch's name
    """`with no_grad():` records no graph: for evaluation and parameter updates."""

    enabled = False


class enable_grad(_GradMode):  # noqa: N801 - PyTorch's name
    """`with enable_grad():` records the graph again inside a no_grad block."""

    enabled = True


class inference_mode(_GradMode):  # noqa: N801 - PyTorch's name
    """`with inference_mode():` no graph is recorded, as under no_grad, and, as torch's:

    - grad mode cannot be turned back on inside it: enable_grad() and set_grad_enabled(True)
      record nothing there (is_grad_enabled() says False there; torch's says True, and
      records nothing either); inference_mode(False) turns it on (inside no_grad too);
    - the tensors made inside are inference tensors (is_inference(): an op's result, ones(),
      tensor(...), a clone; not a view or detach() of a normal tensor; a view or detach() of
      an inference tensor is one, wherever made). Outside inference mode one cannot be made to
      require grad, nor be saved for backward by a recorded op (w * t; w + t saves neither,
      and is fine): make a .clone() of it first. Unlike torch's, it keeps a version counter:
      an in-place change of it outside inference mode is allowed, and ._version counts.
    Inside, each op costs a little more than under no_grad (it marks its result), where
    torch's is faster: for speed alone, use no_grad. is_inference_mode_enabled() tells
    whether it is in force."""

    def __new__(cls, mode=True):
        return super().__new__(cls, *(() if isinstance(mode, bool) else (mode,)))

    def __init__(self, mode=True):
        super().__init__()
        self.mode = bool(mode)
        self._inference_tokens = []

    def _mode(self):
        return not self.mode

    def __enter__(self):
        tracers = current_tracers()  # (the marker of its results, once: see _InferenceMarker)
        marks = self.mode and _MARKER not in tracers
        self._inference_tokens.append((_inference.set(self.mode),
                                       _tracers.set(tracers + (_MARKER,)) if marks else None))
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        mode, marker = self._inference_tokens.pop()
        if marker is not None:
            _tracers.reset(marker)
        _inference.reset(mode)

    def _again(self):
        return inference_mode(self.mode)


def is_inference_mode_enabled():
    """Whether an inference_mode() block (not turned off by inference_mode(False)) is in force."""
    return _inference.get()


class set_grad_enabled(_GradMode):  # noqa: N801 - PyTorch's name
    """set_grad_enabled(mode): grad mode on or off from this call on, or, as
    `with set_grad_enabled(mode):`, for the block only (the mode before comes back after it).
    As a decorator (torch's rule) it puts the mode before back at once and sets `mode` in the
    decorated function's calls only; entered again, it sets its mode again."""

    _bare = False

    def __init__(self, mode):
        super().__init__()
        if not isinstance(mode, (bool, numpy.bool_)):  # (torch's: None or 1 is no mode)
            raise TypeError(f"set_grad_enabled: mode must be a bool, got {type(mode).__name__} "
                            f"{mode!r}")
        self.enabled = bool(mode)
        self._prev = _grad_enabled.get()
        # the call itself sets it (torch), but on records nothing inside inference_mode
        self._made = _grad_enabled.set(self.enabled and not _inference.get())

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self._undo_call()

    def __call__(self, fn):
        self._undo_call()
        return super().__call__(fn)

    def _undo_call(self):
        """Put back the mode from before this object was made (once: a later `with` restores
        the mode at its own start)."""
        made, self._made = self._made, None
        if made is not None:
            try:
                _grad_enabled.reset(made)
            except ValueError:  # made in another thread or task: its mode, not this one's
                _grad_enabled.set(self._prev)

    def _again(self):
        return enable_grad() if self.enabled else no_grad()


def current_scope():
    """The module path nodes are being created under ("" at a model's top level), or None."""
    return _scope.get()


class Tracer:
    """What `tracing(tracer)` calls, as no-ops: a tracer overrides the events it wants.
    (Explain mode, graph recording, graph checks and anomaly detection are tracers.)"""

    def forward(self, op, inputs, params, out):
        """After each forward inside the block: `out` is the new tensor (out._node its node)."""

    def backward_begins(self):
        """When a backward pass (backward(), backward_steps(), grad()) starts inside the block."""

    def backward(self, node, g, grads):
        """After each VJP: `g` reached node's output, `grads` went to its inputs."""

    def accumulate(self, node, user, total):
        """When a second gradient (from `user`) is added to node's `total`."""

    def module_hooks(self, module):
        """When a module with forward hooks is called inside the block (before they run)."""

    def made(self, op, params, out):
        """When a tensor is made from settings alone inside the block (zeros, arange, randn, a
        causal mask): `op` (no inputs) makes it again from `params`."""

    def effect(self, what):
        """When the block calls what changes state outside the ops, which a replay of it would
        not call again: zero_grad(), an optimizer's or a scheduler's step, manual_seed() (the
        global one or a Generator's, seed(), set_state()), a backward pass ("backward()",
        "backward_steps()", "autograd.grad()": see _begin), a captured step."""

    def changed(self, tensor, what):
        """When the block changes a tensor other than by an op the tracers see: `what` is
        "grad" (`.grad = g`), "requires_grad" (switched on or off), "values" (written in
        place without a recorded op: x[i] = v, fill_, zero_, copy_ on a tensor needing no grad)
        or, inside watching_data_reads() only, "data" (`t.data = v` outside tinyattn).
        Tensors made inside the block are not told of (their .grad None, requires_grad as
        made)."""

    def read(self, tensor, how):
        """When Python reads a tensor's values inside the block: `how` is "item()", "numpy()"
        or "bool()" (float(), int(), tolist(), printing go through these), "nonzero()" and
        the like (a shape the values decide), or, inside watching_data_reads() only, ".data"
        (its array, read by code outside tinyattn)."""


def side_effect(what):
    """Tell the tracers that `what` (zero_grad(), an optimizer step...) is being called."""
    if _tracers.get() is not None or _everywhere:
        for tracer in current_tracers():
            tracer.effect(what)


def state_changed(tensor, what):
    """Tell the tracers that `tensor` changed outside the ops (see Tracer.changed). The callers
    check `_tracers.get() is not None or _everywhere` first: they are on common paths (.grad =,
    requires_grad, an in-place write), which pay nothing more when no tracer watches."""
    for tracer in current_tracers():
        changed = getattr(tracer, "changed", None)  # (any object may be a tracer: see _begin)
        if changed is not None:
            changed(tensor, what)


def current_tracers():
    """The tracers that see the ops run here: those of the enclosing tracing() blocks, or
    those trace_everywhere() set for every thread."""
    tracers = _tracers.get()
    return _everywhere if tracers is None else tracers


@contextlib.contextmanager
def tracing(tracer):
    """Inside the block, `tracer` (a Tracer) sees every op run in this thread or task."""
    token = _tracers.set(current_tracers() + (tracer,))
    try:
        yield tracer
    finally:
        _tracers.reset(token)


_data_watchers = [0]  # watching_data_reads() blocks running, in every thread
_data_lock = threading.Lock()


@contextlib.contextmanager
def watching_data_reads():
    """Inside the block (a captured step's recording), a read of `t.data` by code outside
    tinyattn is told to the tracers (Tracer.read, how ".data"). The getter is swapped on the
    class for the block (in every thread, while any such block runs): everywhere else .data
    stays the C getter the ops read through."""
    with _data_lock:
        _data_watchers[0] += 1
        TensorBase.data = property(TensorBase._watched_data, TensorBase._watched_set_data)
    try:
        yield
    finally:
        with _data_lock:
            _data_watchers[0] -= 1
            if not _data_watchers[0]:
                TensorBase.data = _PLAIN_DATA


_PLAIN_DATA = TensorBase.data


def _by_user(frame):
    """Whether `frame` runs code outside tinyattn (the user's, not the library's). Under
    mutation testing, mutmut's trampoline stands between each function and its caller: its
    frames are passed over to the caller's."""
    module = frame.f_globals.get("__name__", "")
    while module.startswith("mutmut.") and frame.f_back is not None:
        frame = frame.f_back
        module = frame.f_globals.get("__name__", "")
    return module != "tinyattn" and not module.startswith("tinyattn.")


def trace_everywhere(tracers):
    """Make `tracers` (a tuple of Tracers) see every op in every thread that has no tracing()
    block of its own; () turns that off. TINYATTN_DEBUG=1 uses it (see tinyattn.anomaly)."""
    global _everywhere
    _everywhere = tuple(tracers)


# ---- version counters: what backward checks before using a saved array -----------------------
#
# A tensor's version counter counts the in-place changes of its memory (PyTorch's `_version`).
# It is a two-item list [count, sharers], made on first use: a list because one is made for
# every output a VJP keeps, and that must cost next to nothing. A tensor and its views (reshape,
# permute, expand, basic indexing, detach) share one, so a change through any of them counts;
# `sharers` (None until a view exists) holds weak references to the tensors sharing it, so an
# in-place op can tell whether another live tensor sees the same memory.


def version_of(tensor):
    """The tensor's version counter [count, sharers], made on first use.

    Until then the tensor is at version 0. An op that saves its output (tanh, softmax) makes
    no counter for it, which would cost every such op an allocation: the counter made later
    is handed to the node that created the tensor, which saved it at version 0."""
    v = tensor._version_counter
    if v is None:
        v = tensor._version_counter = [0, None]
        node = tensor._node
        if node is not None and node.op is not None and node.op.saves_out is not None and (
                node.saved is None or node.saved[node.op.saves_out] is not None):  # (x ** 2
            node.versions += ((v, 0, None),)  # saves no output: pow's place holds None)
    return v


def bump_version(tensor):
    """Count one in-place change of the tensor's memory (and so of every view of it)."""
    version_of(tensor)[0] += 1


def share_version(base, view, differentiable=True):
    """`view` sees `base`'s memory: from now on they count in-place changes together.

    A differentiable view (made by a view op: indexing, reshape, permute...; not detach() or
    view(dtype)) also remembers the tensor at the root of its views, as torch's `_base`, and
    the rule torch gives its in-place changes: `view._view_of = (root, rule)`, rule None, or
    "no_grad" for a view made under no_grad (inherited by views of it). A recorded in-place
    change of a view then rewrites the root's history (ops/views.py)."""
    v = version_of(base)
    view._version_counter = v
    sharers = v[1]
    if sharers is None:
        sharers = v[1] = [weakref.ref(base)]
    elif len(sharers) >= 16:  # a long-lived base sliced every step: forget the dead views (the
        # first stays: the tensor that began the list, never a view, see below)
        sharers = v[1] = sharers[:1] + [r for r in sharers[1:] if r() is not None]
    sharers.append(weakref.ref(view))
    if differentiable:  # (the first sharer is no view: a view of it needs no look for a base)
        of = None if sharers[0]() is base else getattr(base, "_view_of", None)
        view._view_of = (base, None if _grad_enabled.get() else "no_grad") if of is None else \
            of if of[1] is not None or _grad_enabled.get() else (of[0], "no_grad")


def others_alive(tensor):
    """Whether a live tensor other than `tensor` shares its memory (a view, a detached copy)."""
    v = tensor._version_counter
    return v is not None and any(r() is not None and r() is not tensor for r in v[1] or ())


def _saved_versions(op, inputs, arrays, saved):
    """(counter, its count now, input position) for each input whose memory the op's saved
    arrays hold: backward checks that none changed since (the output: see version_of).
    Only the places the op declares are looked at, and an input counts only if its place
    really holds its array this time (x * 2.0 keeps no x: its gradient in x needs only the 2)."""
    found = ()
    for i, j in op.save_places:
        s = saved[j]
        if s is not None:
            x = inputs[i]
            if isinstance(x, TensorBase) and (s is arrays[i] or _is_view_of(s, arrays[i])):
                v = version_of(x)
                if v.__class__ is InferenceVersion and not _inference.get():
                    _refuse_saved_inference(op)
                found += ((v, v[0], i),)
    return found


def _is_view_of(out, x):
    """Whether the array `out` is a view into the memory of array `x` (NumPy and CuPy views keep
    the array that owns the memory as their .base)."""
    b = getattr(out, "base", None)
    return b is not None and (b is x or b is getattr(x, "base", None))


# ---- inference tensors (see inference_mode) ----------------------------------------------------
#
# A tensor made in inference mode is marked by its version counter, an InferenceVersion (a
# list as any other): its views and detach() share it, so they are inference tensors too, and a
# view of a normal tensor made in inference mode shares the normal one's. The normal path pays
# nothing: apply's results are marked by a tracer that only inference_mode installs, and the
# refusal of one saved for backward is in the count's read (v[0]) that _saved_versions makes,
# which only an InferenceVersion checks.


class InferenceVersion(list):
    """The version counter [count, sharers] of an inference tensor (see is_inference)."""

    __slots__ = ()


def _refuse_saved_inference(op):
    """An inference tensor saved for backward by a recorded op (_saved_versions): torch's
    error."""
    raise GraphError(f"{getattr(op, 'name', 'an op')}: Inference tensors cannot be saved for "
                     "backward (as torch): this tensor was made in inference_mode, and the op "
                     "records it for its gradient. To work around you can make a clone to get a "
                     "normal tensor and use it in autograd (t.clone(), made outside "
                     "inference_mode)")


def mark_inference(tensor):
    """Make `tensor`, just made in inference mode with memory of its own, an inference one."""
    if tensor._version_counter is None:
        tensor._version_counter = InferenceVersion((0, None))


class _InferenceMarker(Tracer):
    """The tracer inference_mode installs: each op's result is an inference tensor (but a
    view of its input, which shares that input's counter, and under inference_mode(False))."""

    def forward(self, op, inputs, params, out):
        if out._version_counter is None and _inference.get():
            out._version_counter = InferenceVersion((0, None))


_MARKER = _InferenceMarker()


# ---- the graph ----------------------------------------------------------------------------------

# minus the creation order: the newest node has the smallest seq, the top of heapq's min-heap
# (counting down spares backward a negation per node)
_sequence = itertools.count(0, -1)


class Node:
    """One recorded op call (or, with op None, a leaf that requires grad)."""

    # (`_extras`, unset on most nodes: what a grad_fn keeps with it, see _extras)
    __slots__ = ("seq", "op", "parents", "saved", "params", "shape", "dtype", "consts", "scope",
                 "tensor", "versions", "name", "hooks", "_extras", "__weakref__")

    def __init__(self, op, parents, saved, params, shape, dtype, consts=(), scope=None,
                 versions=()):
        self.seq = next(_sequence)  # a node is always newer (smaller seq) than its parents
        self.op = op  # the Op, or None for a leaf
        self.parents = parents  # one Node or None per input
        self.saved = saved  # what the VJP needs; None once freed by backward
        # (a node keeps no new object where a shared one will do: Python's garbage collector
        # runs after every 700 new container objects, and on the overhead benchmark's chain of
        # 2000 live nodes it took 12-17 % of the time. No params share one empty mapping, and
        # an output of its first input's shape shares that node's tuple: of the 4-5 objects
        # an op's node held, 2-3 are left.)
        self.params = params or _NO_PARAMS
        # the output's shape and dtype: each user's gradient for it is summed back to the shape
        # (sum_to) and cast to the dtype. (An input's shape is its parent node's: a node stores
        # no per-input lists, two objects fewer per op for the allocator and the collector.)
        first = parents[0] if parents else None
        self.shape = first.shape if first is not None and first.shape == shape else shape
        self.dtype = dtype
        self.consts = consts  # (position, shape, dtype) of the inputs off the graph, see shapes
        self.scope = scope  # the module path that created it ("blocks.0.attn"), or None
        self.tensor = None  # weakref to the tensor whose .grad it writes (leaves, retain_grad)
        self.versions = versions  # the version counters of what `saved` holds (_saved_versions)
        self.name = None  # the output's Tensor.name, once given one
        self.hooks = None  # {key: hook(grad)} of Tensor.register_hook, once one is registered

    @classmethod
    def leaf(cls, tensor):
        node = cls(None, (), (), {}, tensor.shape, tensor.dtype)
        node.tensor = weakref.ref(tensor)
        node.name = tensor.name
        return node

    @property
    def shapes(self):
        """The shape of each input (for pictures and reports): its node's, or as recorded for an
        input off the graph; a Python number is (), an input left out (None) None."""
        return [shape for shape, _ in self._inputs()]

    @property
    def dtypes(self):
        """The dtype of each input, as `shapes`; None for a Python number or an absent input."""
        return [dtype for _, dtype in self._inputs()]

    def _inputs(self):
        off = {i: (shape, dtype) for i, shape, dtype in self.consts}
        for p in self.parents:
            if p is not None:
                _refresh_leaf(p)  # (a leaf's array may have been replaced since it was made)
        return [(p.shape, p.dtype) if p is not None else off.get(i, ((), None))
                for i, p in enumerate(self.parents)]

    def __repr__(self):
        return f"<Node {self.op.name if self.op else 'leaf'}>"


_init_node = Node.__init__


class GradFn:
    """`tensor.grad_fn`, as torch's (torch.autograd.graph.Node): name() ("MulBackward0": the
    op's name in CamelCase; a custom Function's "<Class>Backward"; a leaf's "AccumulateGrad"),
    also the name of its class, next_functions (one (grad_fn of the input, 0) per input, None
    for an input that gets no gradient), metadata (a dict kept with the node), register_hook
    (fn(grad_inputs, grad_outputs) after the node's VJP, may return new grad_inputs),
    register_prehook (fn(grad_outputs) before it, may return new grad_outputs), and calling it
    on the output's gradient runs its VJP (the input gradients: one tensor, or a tuple with
    None for an input that gets none); for a leaf's, variable (its tensor); _saved_self,
    _saved_other, _saved_result and _saved_<param> (what the op saved, see _saved_value); a
    custom Function's saved_tensors and its ctx's attributes (needs_input_grad). Any other
    attribute is the node's (op, parents, shape, name: the tensor's label). While one is held,
    `y.grad_fn` gives that same object (the node keeps a weak reference to it, made on first
    access: nothing is added per op)."""

    __slots__ = ("_node", "__weakref__")
    _classes = {}  # name() -> the subclass of that name (made once)

    def __new__(cls, node):
        # (a multi-output Function's outputs each have a node that picks its part: torch shows
        # the Function's node for every output)
        while node.op is not None and getattr(node.op.fwd, "part_of_parent", False):
            node = node.parents[0]
        extras = _extras(node)
        view = extras["view"]() if "view" in extras else None
        if view is None:
            name = _torch_name(node.op)
            sub = cls._classes.get(name)
            if sub is None:
                sub = cls._classes[name] = type(name, (GradFn,), {"__slots__": ()})
            view = object.__new__(sub)
            view._node = node
            extras["view"] = weakref.ref(view)
        return view

    def name(self):
        return type(self).__name__

    @property
    def next_functions(self):
        return tuple((None if p is None else GradFn(p), 0) for p in self._node.parents)

    @property
    def variable(self):
        """A leaf's tensor (torch's AccumulateGrad.variable); None for another node."""
        ref = self._node.tensor if self._node.op is None else None
        return None if ref is None else ref()

    @property
    def metadata(self):
        """A dict kept with the node (torch's Node.metadata), for the user's own notes."""
        return _extras(self._node).setdefault("metadata", {})

    def register_prehook(self, fn):
        """fn(grad_outputs) before the node's VJP (a tuple of one tensor); a tuple it returns
        replaces them. It runs among the output tensor's hooks, in the order registered."""
        node = self._node
        if node.hooks is None:
            node.hooks = {}
        return RemovableHandle(node.hooks, functools.partial(_prehook, fn))

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) after the node's VJP: a tuple it returns (one entry
        per input, None for one that gets none) replaces grad_inputs. A leaf's (AccumulateGrad)
        gets ((), (grad,)) before its .grad is written, and its result is not used."""
        node = self._node
        if node.op is None:
            return self.register_prehook(functools.partial(_leaf_post_hook, fn))
        extras = _extras(node)
        if "post" not in extras:  # the node's op becomes a copy whose VJP runs the hooks
            extras["post"], extras["op"] = {}, node.op
            node.op = _post_hooked(node.op, weakref.ref(node), extras["post"])
        return RemovableHandle(extras["post"], fn)

    def __call__(self, *grad_outputs):
        """The node's VJP on grad_outputs (one tensor, the output's gradient; its hooks do not
        run): the gradient of each input, summed back to its shape, None for an input that
        gets none; one tensor for a node of one input. A leaf's adds it to its .grad."""
        node = self._node
        if len(grad_outputs) != 1 or not isinstance(grad_outputs[0], TensorBase):
            raise TypeError(f"{self.name()}: takes the output's gradient, one tensor")
        g = grad_outputs[0]
        if node.op is None:
            _write_grad(node, g._data, g.backend, False)
            return ()
        _check_saved(node)
        op = _extras(node).get("op", node.op)
        with no_grad():
            gs = op.vjp(g.backend, g._data, node.saved, **node.params)
        found = tuple(None if p is None or gx is None else
                      _wrap(_fit(op, node.parents, gx, p), g.backend)
                      for p, gx in zip(node.parents, gs, strict=True))
        return found[0] if len(found) == 1 else found

    def __getattr__(self, attr):
        node = object.__getattribute__(self, "_node")
        if attr.startswith("_saved_") and node.op is not None:
            return _saved_value(self, node, attr)
        try:
            return getattr(node, attr)
        except AttributeError:
            ctx = getattr(node.saved, "ctx", None)  # (a custom Function's: torch's grad_fn is
            if ctx is not None and attr != "saved_tensors" and hasattr(ctx, attr):  # its ctx)
                return getattr(ctx, attr)
            raise AttributeError(f"'{type(self).__name__}' object has no attribute "
                                 f"'{attr}'") from None

    @property
    def saved_tensors(self):
        """A custom Function's ctx.saved_tensors (torch's grad_fn.saved_tensors), until
        backward frees them."""
        node = self._node
        if node.op is None or "call" not in node.params:  # (function.py's node: fn=, call=)
            raise AttributeError(f"'{self.name()}' object has no attribute 'saved_tensors' "
                                 "(only a custom Function's node has)")
        if node.saved is None:
            raise GraphError(_freed_message(self.name(), "saved_tensors"))
        return node.saved.tensors

    def __eq__(self, other):
        return isinstance(other, GradFn) and other._node is self._node

    def __hash__(self):
        return hash(self._node)

    def __repr__(self):
        return f"<{self.name()}>"


def _extras(node):
    """What a node keeps for its grad_fn only (made on first use, never per op): the weak
    reference to the GradFn object ("view"), "metadata", the post hooks ("post") and the op
    they replaced ("op")."""
    extras = getattr(node, "_extras", None)
    if extras is None:
        extras = node._extras = {}
    return extras


def _hook_name(fn):
    return getattr(fn, "__name__", None) or type(fn).__name__


def _hook_values(fn, out, n):
    """A node hook's result as a tuple of n entries (torch's check of their number)."""
    out = (out,) if isinstance(out, TensorBase) else tuple(out)
    if len(out) != n:
        raise GraphError(f"hook '{_hook_name(fn)}' has returned an incorrect number of values "
                         f"(got {len(out)}, but expected {n})")
    return out


def _prehook(fn, grad):
    """A node's pre hook, run as a tensor hook of its output."""
    out = fn((grad,))
    return None if out is None else _hook_values(fn, out, 1)[0]


def _leaf_post_hook(fn, grad_outputs):
    fn((), grad_outputs)


_SAVED_INPUTS = {"self": 0, "other": 1}  # torch's names of an op's first two inputs
_SAVED_NAMES = {"pow": {"exponent": 1}}  # (an op whose second input torch names otherwise)


def _freed_message(name, what):
    return (f"{name}.{what}: the saved tensors have already been freed by an earlier backward() "
            "(torch: Trying to backward through the graph a second time (or directly access "
            "saved tensors after they have already been freed)); pass retain_graph=True to that "
            "backward() to keep them")


def _saved_value(grad_fn, node, attr):
    """torch's grad_fn._saved_<name> (Autograd mechanics, "Saved tensors"): `result` the output
    the op saved, `self`/`other` its first/second input (`exponent` pow's), else a parameter of
    the call (`dim`); an input that is a leaf comes back as that very tensor, another array as a
    tensor of its own. A number the op saved comes back as the number, None where it kept none."""
    op, name = node.op, attr[len("_saved_"):]
    position = None if name == "result" else \
        _SAVED_NAMES.get(op.name, {}).get(name, _SAVED_INPUTS.get(name))
    place = op.saves_out if name == "result" else op.saves.get(position)
    if place is None and name not in node.params:
        raise AttributeError(f"'{grad_fn.name()}' object has no attribute '{attr}' ({op.name} "
                             "saves no such value for backward)")
    if place is None:
        return node.params[name]
    if node.saved is None:
        raise GraphError(_freed_message(grad_fn.name(), attr))
    value = node.saved[place]
    if not isinstance(value, numpy.ndarray) and not hasattr(value, "__cuda_array_interface__"):
        return value  # (a number, or None)
    return _saved_tensor(value, None if position is None else node.parents[position])


def _saved_tensor(value, parent):
    """A saved array as a tensor: the input's own leaf tensor where it is that (parent: the
    input's node, None for the output), else a tensor of the array."""
    leaf = parent.tensor() if parent is not None and parent.tensor is not None else None
    if leaf is not None and leaf._data is value:
        return leaf
    return _wrap(value, _backend_of(value))


def _backend_of(array):
    """The backend whose array `array` is: NumPy's (an ndarray or NumPy scalar), else CuPy's.
    (Imported late: the graph layer makes no backend on import.)"""
    from . import backends

    return backends.backend("numpy" if isinstance(array, (numpy.ndarray, numpy.generic))
                            else "cupy")


def _post_hooked(op, ref, hooks):
    """A copy of `op` for one node (`ref`, weakly) whose VJP runs its post hooks: they see the
    whole gradient of every input (no add_into) and may keep it (not fresh)."""
    hooked = copy.copy(op)
    hooked.vjp = functools.partial(_run_post_hooks, op.vjp, ref, hooks)
    hooked.add_into, hooked.fresh = None, False
    return hooked


def _run_post_hooks(vjp, ref, hooks, be, g, saved, **params):
    """The VJP, then the node's post hooks on its gradients (as tensors, summed back to the
    inputs' shapes, None for an input that gets none), each able to replace them."""
    gs = vjp(be, g, saved, **params)
    node = ref()
    if not hooks or node is None:
        return gs
    grads = tuple(None if p is None or gx is None else _wrap(_fit(node.op, node.parents, gx, p), be)
                  for p, gx in zip(node.parents, gs, strict=True))
    outs = (_wrap(g, be),)
    for fn in list(hooks.values()):
        out = fn(grads, outs)
        if out is not None:
            out = _hook_values(fn, out, len(grads))
            grads = tuple(None if x is None else x if isinstance(x, TensorBase) else
                          _wrap(be.asarray(x), be) for x in out)
    return tuple(None if x is None else x._data for x in grads)


def _torch_name(op):
    if op is None:
        return "AccumulateGrad"
    if getattr(op.fwd, "user_function", False):
        return f"{op.name}Backward"
    return "".join(w[:1].upper() + w[1:] for w in op.name.split("_")) + "Backward0"


def apply(op, *inputs, **params):
    """Run `op` on tensors (and Python numbers), and record a node if any input needs grad.

    One function on purpose (and so above the complexity other functions keep to: see
    tests/core/test_layout.py): it runs once per op, and on the overhead benchmark's tiny
    arrays each helper it called cost 1-2 % of the time per op. Its rare paths are helpers."""
    # the inputs: one backend, the arrays, the nodes they come from, whether dtypes differ
    be = None
    arrays, parents = [], []  # one entry per input
    consts = ()  # (position, shape, dtype) of the inputs off the graph, except Python numbers
    needs_grad = False
    first_dtype, mixed = None, False  # one floating dtype throughout needs no promotion
    for x in inputs:
        if isinstance(x, TensorBase):
            if be is None:
                be = x.backend
            elif x.backend is not be:
                raise BackendError(f"{op.name}: inputs live on two backends, {be.name} and "
                                   f"{x.backend.name}: move one with .to('{be.name}') first")
            a, node = x._data, x._node
            dt = a.dtype
            if node is not None:
                needs_grad = True
            else:
                consts += ((len(arrays), a.shape, dt),)
            parents.append(node)
            if dt is not first_dtype:  # (once two differ, mixed stays True)
                mixed = first_dtype is not None
                first_dtype = dt
        else:  # a Python number, None, or a constant array (a mask, class indices)
            a = x
            parents.append(None)
            if type(x) not in _NUMBERS:
                a, consts = _off_graph(op, x, len(arrays), consts)
        arrays.append(a)
    if be is None:
        raise TypeError(f"{op.name}: needs at least one Tensor input")
    # the forward, on arrays promoted to one dtype first where the op asks (dtypes.py);
    # NumPy's errors come back naming the op and the input shapes
    xs = arrays  # (promoted: new arrays, which no input's version counter covers)
    try:
        if (mixed or first_dtype not in WIDE) and (op.promote is not None or
                                                   first_dtype is HALF):
            op, xs = promoted(op, arrays)  # (float16: its float16 form, dtypes.promoted)
        # (a plain call without params: `**params` copies the dict on every call)
        out, saved = op.fwd(be, *xs, **params) if params else op.fwd(be, *xs)
    except TinyattnError:
        raise
    except (ValueError, IndexError, TypeError) as e:
        raise _op_error(op, inputs, e) from e
    # the output (TensorBase._wrap, written out), sharing input 0's version counter if it is
    # a view of it; its node, if a gradient will flow through it
    t = _new(Tensor)
    t._data, t.backend = out, be
    t._grad = t._name = t._version_counter = None
    if op.view and _is_view_of(out, xs[0]):
        share_version(inputs[0], t)
    if needs_grad and _grad_enabled.get():
        if op.nondiff:  # (the `if`s spare the commonest ops a call)
            consts = _cut_nondiff(op, parents, consts)
        versions = _saved_versions(op, inputs, arrays, saved) if op.saves else ()
        # (Node(...) in its two steps: Python 3.11's call of a class costs 0.04 us more)
        t._node = node = _new(Node)
        _init_node(node, op, parents, saved, params, out.shape, out.dtype, consts, _scope.get(),
                   versions)
    else:
        t._node = None
    if _tracers.get() is not None or _everywhere:
        for tracer in current_tracers():  # explain mode, recording, anomaly checks
            tracer.forward(op, inputs, params, t)
    return t


def apply_tensor(op, x, c=None):
    """apply(op, x), or apply(op, x, c) for a Python int or float c (not a bool: the caller
    checks its class), where x is a Tensor: the commonest calls (x * 2.0, x + 1, x.tanh()) on
    a shorter path. Its result, node and tracer events are apply's; with one tensor there is
    no loop over the inputs, no second backend and, for float32/float64 (other dtypes go to
    apply), no promotion. That is 10 % of the overhead benchmark's time per op
    (tests/core/test_engine.py compares the two paths)."""
    try:
        be, a, parent = x.backend, x._data, x._node
    except AttributeError:  # (Tensor.tanh(3.0): apply's error)
        a = None
    if a is None or a.dtype not in WIDE:
        return apply(op, x) if c is None else apply(op, x, c)
    try:
        out, saved = op.fwd(be, a) if c is None else op.fwd(be, a, c)
    except TinyattnError:
        raise
    except (ValueError, IndexError, TypeError) as e:
        raise _op_error(op, _given(x, c), e) from e
    t = _new(Tensor)  # (as in apply)
    t._data, t.backend = out, be
    t._grad = t._name = t._version_counter = None
    if op.view and _is_view_of(out, a):
        share_version(x, t)
    if parent is not None and _grad_enabled.get():
        parents, consts = [parent] if c is None else [parent, None], ()
        if op.nondiff:
            consts = _cut_nondiff(op, parents, consts)
        versions = _saved_versions(op, (x, c), (a, c), saved) if op.saves else ()
        t._node = node = _new(Node)
        _init_node(node, op, parents, saved, None, out.shape, out.dtype, consts, _scope.get(),
                   versions)
    else:
        t._node = None
    if _tracers.get() is not None or _everywhere:
        for tracer in current_tracers():
            tracer.forward(op, _given(x, c), {}, t)
    return t


def _given(x, c):
    """The inputs of an apply_tensor call, as apply gets them."""
    return (x,) if c is None else (x, c)


def _cut_nondiff(op, parents, consts):
    """Inputs that never get a gradient (masks, indices) lose their parent; their shape and
    dtype join `consts`, which is returned."""
    if op.nondiff[-1] >= len(parents):
        raise TypeError(f"{op.name}: got {len(parents)} inputs, but its input "
                        f"{op.nondiff[-1]} (one that gets no gradient: a mask, indices) "
                        "must be given too, as None where there is none")
    for i in op.nondiff:
        p = parents[i]
        if p is not None:
            consts += ((i, p.shape, p.dtype),)
            parents[i] = None
    return consts


_NUMBERS = frozenset((int, float, bool))  # a set: a miss costs one hash, not three compares
_NO_PARAMS = types.MappingProxyType({})  # the params of every node whose op was given none


def python_number(x, name=None):
    """x, but an instance of a subclass of int or float that is no NumPy scalar (an IntEnum
    member, a float of a user's class) as the int or float it stands for: NumPy 2 takes only
    exact Python numbers as weak in type promotion (a float32 tensor times one stays float32,
    as torch has it for any int or float) and computes with a subclass's value in int64 or
    float64. Another kind of number (a Fraction, a Decimal) is refused, naming `name` (the op)
    where given, as torch refuses it: NumPy would compute with it as a Python object."""
    if isinstance(x, (int, float)) and not isinstance(x, numpy.generic):
        return float(x) if isinstance(x, float) else int(x)
    if isinstance(x, numbers.Number) and not isinstance(x, numpy.generic):
        raise DTypeError(f"{name + ': ' if name else ''}a {type(x).__name__} ({x!r}) is no "
                         "int, float or bool, which ops take (as torch); convert it with "
                         "float() first")
    return x


def _off_graph(op, x, i, consts):
    """apply's input i that is neither a tensor nor an int, float or bool: (what the op gets,
    `consts` with its (position, shape, dtype) added). A number of another class goes on as
    its Python number and adds nothing, or is refused (python_number); None (an input left out)
    has no shape; a constant array (a mask, class indices) its own."""
    a = python_number(x, op.name)
    if a is not x:
        return a, consts
    if x is None:
        return x, consts + ((i, None, None),)
    return x, consts + ((i, getattr(x, "shape", ()), getattr(x, "dtype", None)),)


def _op_error(op, inputs, e):
    """Turn an array library's error inside an op into one that names the op and the shapes."""
    shapes = ", ".join(fmt_shape(x.shape) if isinstance(x, TensorBase) else repr(x) for x in inputs)
    kind = {ValueError: ShapeError, IndexError: DimError, TypeError: DTypeError}
    cls = next(k for base, k in kind.items() if isinstance(e, base))
    hint = ("; shapes broadcast when, from the right, each pair of dims is equal or one is 1 "
            "(reshape or unsqueeze an input)") if "broadcast" in str(e) else ""
    message = str(e).strip()
    if message.startswith(f"{op.name}: "):  # the op's own message: it names the op already
        return cls(message)
    return cls(f"{op.name}: inputs {shapes}: {message}{hint}")


def sum_to(g, shape):
    """Sum `g` over the dims broadcasting added or stretched, so that it has `shape`."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    # (each dim of `shape` must be g's or 1: a (3, 2) gradient has the size of a (2, 3) input,
    # and the reshape below would take it, transposed in effect, without a word)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, g.shape[lead:])):  # noqa: B905
        raise ShapeError(f"cannot sum a gradient of shape {fmt_shape(g.shape)} to "
                         f"{fmt_shape(shape)}")
    stretched = tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    axes = tuple(range(lead)) + stretched
    if g.dtype.char == "e":  # float16: summed in float32 as torch (NumPy adds it row by row in
        # float16, where 2048 + 1 = 2048: the bias gradient over 4096 rows came out halved);
        # past 65504 it is inf, inf - inf NaN, silently as in torch
        with numpy.errstate(over="ignore", invalid="ignore"):
            return g.sum(axis=axes, keepdims=True, dtype="float32").astype(g.dtype).reshape(
                shape)
    k = len(stretched)
    if not lead and 0 < k < g.ndim and stretched[0] == g.ndim - k:
        # over the last dims: the backend's row sums, as x.sum(-1, keepdim=True) takes them
        # (ops/reduce.py), so a hand-written gradient `(-g).sum(1, keepdim=True)` equals this
        # one to the bit, as in torch (NumPy's reduction rounds otherwise: 3e-9 off)
        return _backend_of(g).row_sum(g, k).reshape(shape)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def toposort(root, *more):
    """Nodes reachable from `root` (and from the nodes `more`: several roots, drawn in one
    picture), each after every node that uses it (iterative DFS)."""
    order = []
    seen = set()
    for start in (root, *more):
        if start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(start.parents))]
        while stack:
            node, parents = stack[-1]
            for p in parents:
                if p is not None and p not in seen:
                    seen.add(p)
                    stack.append((p, iter(p.parents)))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return order


class Step:
    """One VJP of a backward pass: the node, the gradient g of its output, and what the VJP
    sent to each input (after sum_to; None where an input gets no gradient)."""

    __slots__ = ("index", "node", "g", "grads", "pending")

    def __init__(self, index, node, g, grads, pending):
        self.index, self.node, self.g, self.grads = index, node, g, grads
        # node -> gradient summed so far, for the nodes not yet reached: as it was at this
        # step (a dict of its own per step, so a list of steps shows each step's)
        self.pending = pending

    def __repr__(self):
        made = f" -> {one_line(self.node.name)}" if self.node.name else ""
        return f"<Step {self.index}: {self.node.op.name}{made}>"


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, returned as a tuple and not added
    into any .grad (torch.autograd.grad, same arguments). grad_outputs: the cotangent of each
    output (None for a scalar output: 1). An input the outputs do not depend on is an error,
    or with allow_unused, None (with materialize_grads, zeros). is_grads_batched: each
    grad_output has a leading batch dim, and each result too (one pass per batch entry; an
    unused input's zeros too, where torch's materialize_grads gives them without it).
    create_graph=True: the results have a graph of their own (gradients of gradients), for the
    ops higher_order/ covers; retain_graph then defaults to True, as torch's.
    (only_inputs is accepted and changes nothing, as in torch.)"""
    if create_graph:
        _graph_pass("grad", is_grads_batched)
    if materialize_grads and allow_unused is False:
        raise ValueError("grad: materialize_grads=True needs allow_unused True or left out "
                         "(as torch)")
    allow_unused = bool(allow_unused or materialize_grads)
    outputs = [outputs] if isinstance(outputs, TensorBase) else list(outputs)
    inputs = [inputs] if isinstance(inputs, TensorBase) else list(inputs)
    for what, given in (("outputs", outputs), ("inputs", inputs)):
        if not given:
            raise GraphError(f"grad: `{what}` cannot be empty (as torch): pass the tensor(s) "
                             + ("to differentiate" if what == "outputs" else
                                "to differentiate with respect to"))
    if is_grads_batched:
        return _batched(outputs, inputs, grad_outputs, bool(retain_graph), allow_unused,
                        materialize_grads)
    found = _grad_with_graph(outputs, inputs, grad_outputs, retain_graph is not False,
                             allow_unused) if create_graph else \
        _grad(outputs, inputs, grad_outputs, bool(retain_graph), allow_unused)
    if materialize_grads:
        found = tuple(_wrap(x.backend.xp.zeros_like(x._data), x.backend) if g is None else g
                      for x, g in zip(inputs, found, strict=True))
    return found


def _grad(outputs, inputs, grad_outputs, retain_graph, allow_unused, by_grad=True):
    """grad() for one set of grad_outputs: the gradients, None where an input is not used.
    (by_grad False: for backward(inputs=...), whose messages name backward and gradient=.)"""
    outputs, inputs, grad_outputs = _grad_args(outputs, inputs, grad_outputs)
    sink = {x._node: None for x in inputs}
    keep = _between([_root(y, k if by_grad else None) for k, y in enumerate(outputs)], sink)
    # the outputs that lead to an input (as torch, nothing else runs: no VJP, no hook); each
    # grad_output checked (and its array taken) here, where the message can name it
    starts = []
    for k, (y, g) in enumerate(zip(outputs, grad_outputs, strict=True)):
        g = _seed_gradient(y, g, y.backend, k if by_grad else None)
        if y._node in keep or y._node in sink:
            starts.append((y, g))
    if starts:
        token = _grad_enabled.set(False)  # (as in backward)
        try:
            for _ in _walk(*starts[0], retain_graph, False, sink, starts[1:], keep):
                pass
        finally:
            _grad_enabled.reset(token)
    found = []
    for i, x in enumerate(inputs):
        g = sink[x._node]
        if g is None and not allow_unused:
            raise GraphError(f"grad: input {i} (shape {fmt_shape(x.shape)}) was not used to "
                             "compute the outputs; pass allow_unused=True to get None for it")
        found.append(None if g is None else
                     _wrap(x.backend.xp.array(g, dtype=x.dtype, copy=True), x.backend))
    return tuple(found)


# The walk of create_graph passes, set by tinyattn/higher_order/ when it is imported (a
# higher layer: this module imports nothing of it). None: create_graph=True is refused.
_create_graph_pass = None


def _graph_pass(where, batched=False):
    """The create_graph walk (higher_order.create_graph_pass), or the refusal without it
    (and with grad()'s is_grads_batched)."""
    if batched:
        raise GraphError("grad: is_grads_batched=True with create_graph=True is not "
                         "supported; loop over the batch of grad_outputs instead")
    if _create_graph_pass is None:
        raise GraphError(f"{where}: create_graph=True (gradients of gradients) is not "
                         "supported: tinyattn's VJPs run on arrays, outside the graph (import "
                         "tinyattn.higher_order for the graph VJPs); leave it False (for a second "
                         "derivative, take a central difference of two gradients)")
    return _create_graph_pass


def _graph_seed(y, g, k):
    """A create_graph pass's starting gradient of output y: the Tensor given (its graph
    kept), or ones for a scalar; checked as _seed_gradient checks it."""
    array = _seed_gradient(y, g, y.backend, k)
    if isinstance(g, TensorBase) and g._data.dtype == array.dtype:
        return g
    if isinstance(g, TensorBase) and tuple(g.shape) == array.shape:
        return g.to(array.dtype)  # (cast on the graph: a gradient with respect to g, as torch's)
    return _wrap(array, y.backend)


def _grad_with_graph(outputs, inputs, grad_outputs, retain_graph, allow_unused, by_grad=True):
    """grad(..., create_graph=True): the gradients as Tensors with a graph (higher_order's
    walk), None where an input is not used."""
    walk = _graph_pass("grad" if by_grad else "backward")
    outputs, inputs, grad_outputs = _grad_args(outputs, inputs, grad_outputs)
    sink = {x._node: None for x in inputs}
    keep = _between([_root(y, k if by_grad else None) for k, y in enumerate(outputs)], sink)
    starts = [(y, _graph_seed(y, g, k if by_grad else None))
              for k, (y, g) in enumerate(zip(outputs, grad_outputs, strict=True))
              if y._node in keep or y._node in sink]
    if starts:
        walk(starts, retain_graph, sink, keep)
    found = []
    for i, x in enumerate(inputs):
        g = sink[x._node]
        if g is None and not allow_unused:
            raise GraphError(f"grad: input {i} (shape {fmt_shape(x.shape)}) was not used to "
                             "compute the outputs; pass allow_unused=True to get None for it")
        found.append(g)
    return tuple(found)


def _backward_with_graph(tensors, grad_tensors, retain_graph, inputs):
    """backward(..., create_graph=True): each leaf's (or each of `inputs`') .grad becomes, or
    is added to out of place, a Tensor with a graph (higher_order's walk)."""
    retain_graph = retain_graph is not False
    if inputs is None:
        walk = _graph_pass("backward")
        walk([(t, _graph_seed(t, g, None)) for t, g in zip(tensors, grad_tensors, strict=True)],
             retain_graph)
        return
    inputs = [inputs] if isinstance(inputs, TensorBase) else list({id(x): x for x in inputs}
                                                                  .values())
    found = _grad_with_graph(tensors, inputs, grad_tensors, retain_graph, True, by_grad=False)
    for x, g in zip(inputs, found, strict=True):
        if g is not None:
            x._grad = g if x._grad is None else x._grad + g


def _batched(outputs, inputs, grad_outputs, retain_graph, allow_unused, materialize):
    """grad(..., is_grads_batched=True): one pass per entry of the grad_outputs' leading dim
    (the graph kept until the last), each input's results stacked along a new first dim."""
    outputs = [outputs] if isinstance(outputs, TensorBase) else list(outputs)
    inputs = [inputs] if isinstance(inputs, TensorBase) else list(inputs)
    grad_outputs = [grad_outputs] if isinstance(grad_outputs, TensorBase) else \
        list(grad_outputs or [None] * len(outputs))
    n = _batch_size(grad_outputs)
    rows = [_grad(outputs, inputs, [g[b] for g in grad_outputs], retain_graph or b < n - 1,
                  allow_unused) for b in range(n)]
    return tuple(_stacked(x, [row[j] for row in rows], materialize)
                 for j, x in enumerate(inputs))


def _batch_size(grad_outputs):
    sizes = {g.shape[0] if g is not None and len(g.shape) else None for g in grad_outputs}
    if len(sizes) != 1 or None in sizes:
        raise ShapeError("grad: is_grads_batched=True needs one grad_output per output, each "
                         "with the same leading (batch) dim")
    return sizes.pop()


def _stacked(x, parts, materialize):
    """One input's batched gradient: its gradients stacked (None if unused, unless
    materialize: zeros)."""
    if all(p is None for p in parts) and not materialize:
        return None
    xp = x.backend.xp
    return _wrap(xp.stack([xp.zeros_like(x._data) if p is None else p._data for p in parts]),
                 x.backend)


def _between(roots, sink):
    """{node: its parents, None for each that leads to no node of `sink`} for the nodes that
    `roots` reach and that lead to a sink node through a parent: the part of the graph grad()
    runs (a sink node not in it is where the walk stops). A node older than every sink node
    leads to none (a node's parents are older than it), so the search stops there."""
    oldest = max(node.seq for node in sink)  # (seq counts down: older is larger)
    leads = {}  # node -> whether it is, or leads to, a sink node
    keep = {}
    stack = list(roots)
    while stack:
        node = stack[-1]
        if node in leads:
            stack.pop()
            continue
        todo = [p for p in node.parents if p is not None and p.seq <= oldest and p not in leads]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        parents = tuple(p if p is not None and leads.get(p) else None for p in node.parents)
        if any(p is not None for p in parents):
            keep[node] = parents
        leads[node] = node in keep or node in sink
    return keep


def _grad_args(outputs, inputs, grad_outputs):
    """grad()'s arguments as lists (one tensor or a sequence of them), checked."""
    outputs = [outputs] if isinstance(outputs, TensorBase) else list(outputs)
    inputs = [inputs] if isinstance(inputs, TensorBase) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    grad_outputs = [grad_outputs] if isinstance(grad_outputs, TensorBase) else list(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise ShapeError(f"grad: {len(outputs)} outputs but {len(grad_outputs)} grad_outputs")
    for i, x in enumerate(inputs):
        if not isinstance(x, TensorBase) or x._node is None:
            raise GraphError(f"grad: input {i} does not require grad (make it with "
                             "requires_grad=True, outside no_grad())")
    return outputs, inputs, grad_outputs


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Fill `.grad` of the leaves (and retain_grad tensors) that `tensors` (one tensor or a
    sequence) depend on, as torch.autograd.backward; grad_tensors: the gradient of each (None
    for a scalar: 1). With `inputs` (a tensor or a sequence), only their .grad is added to
    (a non-leaf's too). create_graph=True: each .grad is a Tensor with a graph (gradients of
    gradients, for the ops higher_order/ covers); retain_graph then defaults to True.

    Nodes are visited newest first (a heap on seq, which counts down): every user of a node is
    newer than it, so by the time a node comes up, all the gradient it will get has arrived.
    A node enters the heap when it first receives gradient, so there is no separate graph walk.
    A sum of parts the walk made itself takes later parts in place (see _add_part).
    Grad mode is off during the pass (torch's, without create_graph): hooks record no graph.
    """
    if create_graph:
        _graph_pass("backward")
    tensors = [tensors] if isinstance(tensors, TensorBase) else list(tensors)
    grad_tensors = [None] * len(tensors) if grad_tensors is None else \
        list(grad_tensors) if isinstance(grad_tensors, (list, tuple)) else [grad_tensors]
    if len(grad_tensors) != len(tensors) or not tensors:
        raise ShapeError(f"backward: {len(tensors)} tensors but {len(grad_tensors)} "
                         "grad_tensors (one per tensor, None for a scalar)")
    if create_graph:
        return _backward_with_graph(tensors, grad_tensors, retain_graph, inputs)
    if inputs is not None:
        return _backward_into(tensors, grad_tensors, bool(retain_graph), inputs)
    more = list(zip(tensors[1:], grad_tensors[1:], strict=True))
    token = _grad_enabled.set(False)
    try:
        for _ in _walk(tensors[0], grad_tensors[0], bool(retain_graph), False, more=more):
            pass
    finally:
        _grad_enabled.reset(token)
    return None


def _backward_into(tensors, grad_tensors, retain_graph, inputs):
    """backward(..., inputs=...): the gradients of `inputs` alone (grad()'s walk), each added
    into its .grad as backward adds into a leaf's."""
    inputs = [inputs] if isinstance(inputs, TensorBase) else list(inputs)
    if not inputs:
        raise ValueError("backward: inputs= was given but is empty (leave it out for every "
                         "leaf)")
    inputs = list({id(x): x for x in inputs}.values())  # (one named twice: added to once)
    found = _grad(tensors, inputs, grad_tensors, retain_graph, True, by_grad=False)
    for x, g in zip(inputs, found, strict=True):
        node = x._node
        if g is None or (node.op is not None and node.tensor is not None and
                         node.tensor() is x):
            continue  # (a retain_grad input: the walk added into its .grad already, _deliver)
        with _grad_lock:
            held = x._grad
            if held is None:  # (as backward's: in x's layout, a non-leaf's in C order)
                x._grad = g if _laid_out(g._data, x._data) else \
                    _wrap(_grad_array(g._data, x, x.backend, x._node.op is None), x.backend)
            elif _addable(held._data, x):
                held._data += g._data
            else:
                x._grad = _wrap(held._data + g._data, x.backend)
        if node.op is None and node.tensor.__class__ is _HookedRef:
            _post_accumulate(node.tensor.post, x)


def backward_steps(tensor, gradient=None, retain_graph=False):
    """backward() one VJP at a time: a generator of Steps (for notebooks and explain mode);
    each step runs with grad mode off, as backward(), the caller's mode holding in between."""
    return _in_mode(no_grad, _walk(tensor, gradient, retain_graph, True))


def _walk(tensor, gradient, retain_graph, steps, sink=None, more=(), keep=None):
    """The walk behind backward(), backward_steps() and grad(): pop the newest node, write its
    .grad if it is a tensor's, run its VJP and send each input its part (summed with the parts
    the input's other users sent); with `steps`, yield a Step after each VJP. With `sink` (a
    dict whose keys are nodes), no leaf's .grad is written: each of those nodes' gradient goes
    into it, and only the nodes in `keep` (node -> its parents that lead to a sink node, None
    for the others: see _between) run their VJP and pass on to those parents. `more`: further
    (tensor, gradient) pairs to start from. (The VJP call is written out here, as the forward
    is in apply: a helper per node cost 1-2 % a node.)"""
    be = tensor.backend
    grads, heap = _start(tensor, gradient, more, be)  # node -> its gradient summed so far
    tracers = current_tracers()
    undelivered = _begin(tracers, steps, sink)  # the .tensor of a node that delivers nothing
    owned = _owner(tracers, steps)  # the nodes whose gradient so far the walk may add into
    watched = bool(tracers) or steps
    index = 0
    while heap:
        node = heappop(heap)[1]
        g = grads.pop(node)  # every user has sent its part
        if node.hooks:  # Tensor.register_hook: each may replace the gradient (none left: {})
            g = _run_hooks(node, g, be, owned, grads, keep)
        if node.tensor is not undelivered:  # a leaf, retain_grad, or any node for grad()
            if _deliver(node, g, be, owned, sink, keep):  # a leaf, or where grad() stops
                continue
        op, saved = node.op, node.saved
        parents = node.parents if keep is None else keep[node]
        if node.versions:  # saved arrays to check, or freed (_FREED)
            _check_saved(node)
        if op.add_into is not None and owned.adds:  # getitem: no zero-filled part
            _add_into(node, parents[0], g, be, grads, heap, owned, retain_graph)
            continue
        params = node.params  # (as in apply: no `**` for the commonest, empty params)
        gs = op.vjp(be, g, saved, **params) if params else op.vjp(be, g, saved)
        if not retain_graph and saved:  # freed, unless it holds no array (numbers, shapes:
            # a second pass may go through it, as through torch's nodes that saved no tensor;
            # its first and last items tell, see _metadata_only. `&`: both, without a branch)
            if not (saved[0].__class__ in _METADATA) & (saved[-1].__class__ in _METADATA):
                node.saved, node.versions = None, _FREED
        if len(gs) != len(parents):
            raise GraphError(f"{op.name}: the VJP returned {len(gs)} gradients for "
                             f"{len(parents)} inputs")
        # (no strict=: a keyword to zip costs 3 % per op, and the lengths were checked above)
        for parent, gx in zip(parents, gs):  # noqa: B905
            if parent is None or gx is None:
                continue
            if gx.dtype is not parent.dtype or gx.shape != parent.shape:  # (`is`: _fit compares)
                gx = _fit(op, parents, gx, parent)
            prev = grads.get(parent)
            if prev is None:  # the first part of parent's gradient: parent joins the walk
                grads[parent] = gx
                heappush(heap, (parent.seq, parent))
                if op.fresh:  # an array of its own (Op.fresh)
                    owned.add(parent)
            else:
                _add_part(grads, owned, parent, prev, gx, node, tracers)
        if watched:  # the tracers see the VJP; backward_steps gets a Step (None without)
            yield _report(tracers, steps, index, node, g, parents, gs, grads)
            index += 1


def _report(tracers, steps, index, node, g, parents, gs, grads):
    """After a VJP, while tracers or backward_steps watch: tell the tracers; the Step (pending
    as it is now: `grads` changes on; the arrays in it do not, as while steps are watched no
    sum is added into in place: see _Watched), or None when no steps were asked for. What they
    see of the VJP's gradients `gs` is each input's part as the walk passed it on to `parents`:
    None for an input off the graph (or off the walk's way), else at the input's shape and
    dtype (_fit again: the walk keeps no list of them, which cost 1-2 % of the time per op of
    a walk that nobody watches)."""
    fitted = [None if parent is None or gx is None else
              _fit(node.op, parents, gx, parent)
              if gx.shape != parent.shape or gx.dtype != parent.dtype else gx
              for parent, gx in zip(parents, gs, strict=True)]
    for tracer in tracers:
        tracer.backward(node, g, fitted)
    return Step(index, node, g, fitted, dict(grads)) if steps else None


def _metadata_only(saved):
    """Whether a node's saved values are metadata (Python numbers, strings, None, dtypes,
    tuples and lists: shapes, axes, sizes), which backward leaves in place after using them: a
    second pass can run such a node's VJP again, as torch runs again a node that saved no
    tensor (add, reshape, permute, sum). x * 2.0 and x / 2.0 run again too, where torch 2.13
    refuses them (it keeps the 2.0 as a tensor). Anything else (an array, a Tensor) is freed.
    Only the first and the last item are looked at (_walk writes this test out per node, where
    a scan of every item cost about 6 % of the overhead benchmark's backward): every op saves its
    arrays first or last (x / y keeps (x, y), 2.0 / y (2.0, y)), and the ops' sample cases
    check that (tests/core/test_engine.py). A tuple is taken as a shape: the index arrays
    scatter keeps in one stay until its graph goes."""
    return not saved or (saved[0].__class__ in _METADATA) & (saved[-1].__class__ in _METADATA)


# the classes of what a node may keep after backward (they hold no array)
_METADATA = frozenset((int, float, bool, str, type(None), tuple, list, *{
    type(numpy.dtype(code)) for code in numpy.typecodes["All"] if code not in "OVSUMm"}))
_NOTHING = object()
_FREED = (None,)  # the versions of a freed node: truthy, so that _walk checks it (_check_saved)


def _begin(tracers, steps, sink):
    """Tell each tracer that has the events (any object may be a tracer) a pass begins: as an
    effect, named as the user called it (a captured step's recording refuses a pass run inside
    fn, whose .grad writes or values a replay would not make again), then backward_begins.
    Returns the .tensor of a node whose gradient goes nowhere but on: None for backward (a
    node with a tensor writes its .grad), for grad() nothing (any node may be in the sink)."""
    for tracer in tracers:
        what = "autograd.grad()" if sink is not None else "backward_steps()" if steps else \
            "backward()"
        effect = getattr(tracer, "effect", None)
        if effect is not None:
            effect(what)
        begins = getattr(tracer, "backward_begins", None)
        if begins is not None:
            begins()
    return None if sink is None else _NOTHING


def _run_hooks(node, g, be, owned, grads, keep):
    """The gradient after the node's hooks, in the order they were registered: each gets it
    as a tensor and may return a replacement of the same shape (or None to keep it). The walk
    owns neither: a hook may keep what it saw or returned, which a later backward adding into
    a leaf's .grad in place must not change (so .grad takes a copy). While they run, hook_pass()
    tells them the walk's state (`grads`: the gradients still pending; `keep`: grad()'s)."""
    owned.discard(node)
    outer = getattr(_hook_pass, "state", _NO_PASS)
    _hook_pass.state = (grads, node, keep)
    try:
        for hook in list(node.hooks.values()):
            out = hook(_wrap(g, be))
            if out is None:
                continue
            new = out._data if isinstance(out, TensorBase) else be.asarray(out)
            if new.shape != g.shape or new.dtype != g.dtype:  # (torch refuses both too)
                raise ShapeError(f"register_hook: a hook returned a gradient "
                                 f"{fmt_shape(new.shape)} {new.dtype} for a tensor "
                                 f"{fmt_shape(g.shape)} {g.dtype}")
            g = new
    finally:
        _hook_pass.state = outer
    return g


_hook_pass = threading.local()  # .state: (grads, node, keep) of the pass whose hooks run now
_NO_PASS = (None, None, None)


def hook_pass():
    """(the gradients still pending, the node whose hooks run, grad()'s `keep`) of the
    backward pass that runs the calling tensor hook; (None, None, None) outside one. The walk
    keeps no pass object, and torch's hooks ask their engine the same (autograd.graph's
    register_multi_grad_hook reads it)."""
    return getattr(_hook_pass, "state", _NO_PASS)


class RemovableHandle:
    """What register_hook (and Module's hook registrations) return: remove() takes the hook
    off; usable as a context manager (the hook is removed at the end of the block)."""

    _keys = itertools.count()

    def __init__(self, hooks, hook):
        """Register `hook` in the dict `hooks` (ordered: hooks run as registered)."""
        self._hooks = hooks
        self.id = next(self._keys)
        hooks[self.id] = hook

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _Owned(set):
    """The nodes whose gradient so far is an array that this walk made, or that a fresh VJP
    returned (Op.fresh), and that nobody else holds: later parts are added into it in place,
    and a leaf's .grad takes it without a copy (0-d ones excepted: NumPy often gives a scalar,
    which cannot be written to)."""

    __slots__ = ()
    adds = True  # getitem's gradient goes straight into its input's sum (Op.add_into)


class _Watched(_Owned):
    """While tracers or backward_steps look at the partial sums, no sum is owned: each part is
    a new array, and every VJP runs (no add_into)."""

    __slots__ = ()
    adds = False

    def add(self, node):
        pass


def _owner(tracers, steps):
    return _Watched() if tracers or steps else _Owned()


def _add_part(grads, owned, parent, prev, gx, user, tracers):
    """Add one more part (from node `user`) to parent's gradient so far, `prev`: in place when
    the walk owns prev, else into a new array (prev may be a user's .grad, a saved array or
    another node's part), which the walk then owns."""
    with _quiet_if_half(gx):  # (float16 sums past 65504: inf, without NumPy's warning)
        if parent in owned and getattr(prev, "ndim", 0):  # (0-d: often a NumPy scalar)
            prev += gx
            return
        grads[parent] = total = prev + gx
    owned.add(parent)
    for tracer in tracers:
        tracer.accumulate(parent, user, total)


def _add_into(node, parent, g, be, grads, heap, owned, retain_graph):
    """Send input 0 of a node whose op has add_into (getitem), `parent` (None: it gets none),
    its gradient by adding g at its place in the input's running sum, made (zeros) or copied
    first if the walk owns none."""
    if parent is not None:
        _refresh_leaf(parent)
        acc = grads.get(parent)
        if acc is None:
            acc = grads[parent] = be.xp.zeros(parent.shape, dtype=parent.dtype)
            heappush(heap, (parent.seq, parent))
        elif parent not in owned or not getattr(acc, "ndim", 0):
            acc = grads[parent] = be.xp.array(acc, copy=True)
        owned.add(parent)
        node.op.add_into(be, acc, g, node.saved, **node.params)
    if not retain_graph and not _metadata_only(node.saved):
        node.saved, node.versions = None, _FREED


def _start(tensor, gradient, more, be):
    """The walk's gradients so far and its heap, seeded from tensor (and the pairs in `more`);
    retain_grad tensors changed in place since are followed to their nodes first."""
    if _retained:
        _follow_retained()
    grads, heap = {}, []
    for t, g in [(tensor, gradient), *more]:
        _seed(grads, heap, t, g, be)
    return grads, heap


def _seed(grads, heap, tensor, gradient, be):
    """Start the walk at tensor's node with `gradient` (added to what an earlier start gave it)."""
    node, seed = _root(tensor), _seed_gradient(tensor, gradient, be)
    if node in grads:
        grads[node] = grads[node] + seed
    else:
        grads[node] = seed
        heappush(heap, (node.seq, node))


def _deliver(node, g, be, owned, sink, keep):
    """A node's whole gradient, popped: into its tensor's .grad, or for grad(), into `sink`
    (and into a retain_grad tensor's .grad, as torch's grad() fills those too, never a
    leaf's). Whether the walk stops there: at a leaf, or for grad() at a node not in `keep`."""
    if sink is None:
        _write_grad(node, g, be, node in owned)
        return node.op is None
    if node in sink:
        sink[node] = g
    if node.tensor is not None and node.op is not None:
        _write_grad(node, g, be, False)
    return node not in keep


def _root(tensor, k=None):
    """The node backward starts from; an error for a tensor that is not on a graph (k: its
    position among grad()'s outputs, whose message names it; None for backward)."""
    if tensor._node is None:
        what = "backward: this tensor" if k is None else f"grad: output {k}"
        raise GraphError(f"{what} does not require grad and has no graph; create its inputs "
                         "with requires_grad=True, outside no_grad()")
    return tensor._node


def _check_saved(node):
    """Before a node's VJP: refuse a graph an earlier backward freed (its versions are then
    _FREED), and arrays the VJP needs that were changed in place since the forward pass saved
    them."""
    if node.saved is None:
        raise GraphError(f"backward: the graph through {node.op.name} was already freed by an "
                         "earlier backward(); pass retain_graph=True to the first backward() "
                         "to go through it again, or recompute the forward pass")
    for version, seen, i in node.versions:
        if version[0] != seen:  # an array the VJP needs was changed in place since
            raise _changed_error(node, version, seen, i)


def _changed_error(node, version, seen, i):
    """The refusal to run a VJP on arrays changed in place after the forward pass saved them:
    the gradient would be computed from the wrong values (PyTorch's version check)."""
    what = "its output" if i is None else f"its input {i}"
    shape = node.shape if i is None else node.shapes[i]
    return GraphError(f"backward: {node.op.name} saved {what} (shape {fmt_shape(shape)}) to "
                      f"compute its gradient, and that tensor was changed in place afterwards "
                      f"(it is at version {version[0]}, {node.op.name} needs version {seen}); "
                      "change a .clone() of it instead, or change it after backward()")


def _seed_gradient(tensor, gradient, be, k=None):
    """The gradient backward starts from: 1 for a scalar, else the `gradient` given. k: the
    output's position for grad(), whose messages name grad() and grad_outputs (None: backward)."""
    shape = fmt_shape(tensor.shape)
    if gradient is None:
        if tensor._data.size != 1:
            if k is not None:
                raise GraphError(f"grad: output {k} has shape {shape}; grad() makes the "
                                 "grad_output of a scalar output only (as torch): pass "
                                 f"grad_outputs= with one of shape {shape} for it, or reduce "
                                 "it with .sum() or .mean() first")
            raise GraphError(f"backward: the output has shape {shape}; backward() needs a "
                             "scalar (reduce with .sum() or .mean() first) or an explicit "
                             f"gradient= of shape {shape}")
        return be.xp.ones_like(tensor._data)
    g = gradient._data if isinstance(gradient, TensorBase) else be.asarray(gradient)
    if g.shape != tensor.shape:
        if k is not None:
            raise ShapeError(f"grad: grad_outputs[{k}] has shape {fmt_shape(g.shape)} but "
                             f"output {k} has shape {shape}")
        raise ShapeError(f"backward: gradient has shape {fmt_shape(g.shape)} but the output "
                         f"has shape {shape}")
    return g.astype(tensor.dtype, copy=False)


def _fit(op, parents, gx, parent):
    """An input's gradient at its shape and dtype (those of its node, `parent`, one of
    `parents`): a broadcast input's gradient is summed back to its shape; any other shape
    mismatch is a bug in op's VJP.
    A leaf reads them from its tensor, whose array may have been replaced since the leaf was
    made (Module.to(float16), `t.data = ...`)."""
    _refresh_leaf(parent)
    shape, dtype = parent.shape, parent.dtype
    if gx.shape != shape and op.broadcasts:
        with contextlib.suppress(ValueError, ShapeError):
            gx = sum_to(gx, shape)
    if gx.shape != shape:
        raise ShapeError(f"{op.name}: the VJP returned a gradient of shape {fmt_shape(gx.shape)} "
                         f"for input {parents.index(parent)} of shape {fmt_shape(shape)}")
    if gx.dtype == dtype:
        return gx
    with numpy.errstate(over="ignore"):  # (float32 past 65504 into float16: inf, as torch)
        return gx.astype(dtype)


_LOUD = contextlib.nullcontext()


def _quiet_if_half(a):
    """For a float16 `a`: the NumPy error state in which a sum past 65504 is inf (and inf - inf
    NaN) silently, as in torch; else nothing (a gradient sum of other dtypes as it is)."""
    if getattr(a, "dtype", None) == HALF:
        return numpy.errstate(over="ignore", invalid="ignore")
    return _LOUD


def _refresh_leaf(node):
    """A leaf node takes its tensor's shape and dtype again (its array may have been replaced
    since the leaf was made: Module.to(float16), `t.data = ...`)."""
    if node.op is None and node.tensor is not None:
        t = node.tensor()
        if t is not None:
            node.shape, node.dtype = t.shape, t.dtype


def zero_grads(tensors, set_to_none=True):
    """Clear each tensor's .grad (Module.zero_grad, Optimizer.zero_grad): drop it, or with
    set_to_none=False write zeros into it in place, as PyTorch does (inf * 0 would be NaN)."""
    side_effect("zero_grad()")
    for t in tensors:
        if set_to_none:
            t.grad = None
        elif t.grad is not None:
            t.grad._data[...] = 0


_grad_lock = threading.Lock()  # backward in two threads into one shared leaf loses no update

# retain_grad: id(tensor) -> weakref to it, for the tensors that asked (and are alive). Each
# walk first points their nodes now at them: an in-place op gives a tensor a new node, and its
# .grad is the gradient of the tensor as it is now (torch moves retain_grad to the new node).
_retained = {}


def retain(tensor):
    """Tensor.retain_grad() of a non-leaf: its node writes its .grad, after in-place ops too."""
    key = id(tensor)
    _retained[key] = ref = weakref.ref(tensor, lambda _: _retained.pop(key, None))
    tensor._node.tensor = ref


def _follow_retained():
    for ref in list(_retained.values()):
        t = ref()
        node = None if t is None else t._node
        if node is not None and node.op is not None and node.tensor is not ref:
            node.tensor = ref


def _write_grad(node, g, be, owned):
    """Add `g` to the tensor's `.grad`, as PyTorch does: the first time as an array of its own,
    never one shared with the graph or the caller (a copy, unless g is a leaf's gradient the walk
    `owned`: made by it or by a fresh VJP, held by nobody else), then a leaf's .grad is added to
    in place (a .grad the user holds sees the sum) and a retain_grad tensor's is replaced by a
    new sum. A retain_grad tensor changed in place since this node made it takes the gradient
    of its new node instead. A tensor that no longer requires grad (frozen with
    requires_grad_(False) after the forward) gets nothing, as torch's AccumulateGrad."""
    t = node.tensor()
    if t is None or t._node is not node:
        return
    with _grad_lock:
        held = t._grad
        if held is None:
            leaf = node.op is None
            if owned and leaf and g.dtype == t.dtype and getattr(g, "ndim", 0) and \
                    _laid_out(g, t._data):
                t._grad = _wrap(g, be)
            else:
                t._grad = _wrap(_grad_array(g, t, be, leaf), be)
        elif node.op is None and _addable(held._data, t):
            with _quiet_if_half(g):
                held._data += g
        elif not _fits(held.shape, getattr(g, "shape", ())):
            raise ShapeError(f"backward: the tensor's .grad has shape {fmt_shape(held.shape)} "
                             f"but its new gradient has shape {fmt_shape(g.shape)} (was its "
                             ".data replaced by another shape?); set .grad = None first")
        else:
            with _quiet_if_half(g):
                t._grad = _wrap(held._data + g, be)
    if node.tensor.__class__ is _HookedRef:  # (a leaf with post accumulate grad hooks)
        _post_accumulate(node.tensor.post, t)


def _laid_out(g, a):
    """Whether gradient array g is laid out in memory as the tensor's array a (C order, or
    else a's own strides), as a .grad must be (_grad_array)."""
    return g.flags.c_contiguous if a.flags.c_contiguous else g.strides == a.strides


def _grad_array(g, t, be, leaf=True):
    """A new array for t's .grad holding g, laid out as torch's AccumulateGrad lays it out:
    a leaf's in its tensor's memory order (order="K": C order for a contiguous parameter),
    a retain_grad tensor's in C order, whatever layout g came in (the VJP of `x @ w.T` gives
    w a transposed one, and `p.grad.view(-1)` must work as in torch)."""
    out = be.xp.empty_like(t._data, order="K" if leaf else "C")
    be.xp.copyto(out, g, casting="unsafe")  # (g may be a NumPy scalar, or another dtype)
    return out


class _HookedRef(weakref.ref):
    """A leaf node's reference to its tensor once it has post accumulate grad hooks: it
    carries them (`post`, {key: hook(tensor)}), so that _write_grad tells a leaf with hooks
    by the class of its reference, one attribute read."""

    __slots__ = ("post",)


def post_accumulate_hooks(node):
    """The {key: hook} of a leaf node's post accumulate grad hooks (made on first use):
    Tensor.register_post_accumulate_grad_hook registers into it."""
    ref = node.tensor
    if ref.__class__ is not _HookedRef:
        ref = node.tensor = _HookedRef(ref())
        ref.post = {}
    return ref.post


def _post_accumulate(hooks, tensor):
    """Run a leaf's post accumulate grad hooks, in order, after its .grad took the gradient
    (outside the lock: a hook may set .grad, or step an optimizer)."""
    for hook in list(hooks.values()):
        out = hook(tensor)
        if out is not None:
            raise GraphError("register_post_accumulate_grad_hook: a hook returned a "
                             f"{type(out).__name__}; it must return None (as torch: it reads "
                             "or changes the tensor and its .grad in place)")


def _fits(held, new):
    """Whether a gradient of shape `new` adds into a .grad of shape `held` keeping its shape
    (new broadcasts to held)."""
    return len(new) <= len(held) and all(
        n in (h, 1) for h, n in zip(held[len(held) - len(new):], new, strict=True))


def _addable(a, t):
    """Whether a .grad array can take the next gradient of `t` in place."""
    return (getattr(a, "shape", None) == t.shape and getattr(a, "dtype", None) == t.dtype
            and getattr(a.flags, "writeable", True))


