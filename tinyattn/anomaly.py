"""Anomaly detection, as torch's anomaly mode: stop where backward makes a NaN, and warn about
known traps.

`with tinyattn.detect_anomaly():` (or set_detect_anomaly(True), or TINYATTN_DEBUG=1 in the
environment) puts a tracer on every op call, in every thread (torch's flag is global). Each op
that joins a graph keeps its forward traceback; backward checks what each node returns (its VJP's
gradients: a built-in op's, a custom Function's backward, or those computed from an output
gradient a hook changed) and the first that holds a NaN raises AnomalyError (a RuntimeError, as
torch's): "Function 'SqrtBackward0' returned nan values in its 0th output.", then what the node
was given and made, and the traceback of the forward call that created it. As torch's, an
infinity is no error (an additive -inf mask, an overflow, sqrt's gradient at 0), nor is a NaN in
the forward: a forward op that made one is shown in the message when its node's VJP later
returns NaN. It also warns (AnomalyWarning) about what each op names as its traps (ops/traps.py:
a fully masked attention row, float16 logits large enough to overflow exp, a 0/1 float mask
added to scores).
"""

import functools
import math
import os
import traceback
import warnings
import weakref

import numpy as np

from . import autograd
from .autograd import GradFn, _tracers, current_tracers, trace_everywhere
from .errors import TinyattnError, fmt_shape
from .graphcheck import Recorder, describe_frame, recorded_call, user_frame
from .ops.traps import FLOAT16_EXP_LIMIT
from .tensor import Tensor


class AnomalyError(TinyattnError, FloatingPointError, RuntimeError):
    """A NaN returned by a node in backward under detect_anomaly (torch raises RuntimeError)."""


class AnomalyWarning(UserWarning):
    """A known trap seen under detect_anomaly: it does not stop the run, but is rarely meant."""


class detect_anomaly:  # noqa: N801 - used like no_grad
    """`with tinyattn.detect_anomaly():` raise AnomalyError where backward makes a NaN.

    Put both the forward and `backward()` inside the block (or decorate the step function): the
    forward keeps each op's traceback, which the error shows. As torch's, the flag is global:
    other threads see it while the block runs. warn=False turns the trap warnings off.
    The op calls are recorded as by `tinyattn.record()`, so `gradcheck_graph(loss)` works too.
    check_nan=False (torch's keyword) leaves NaN alone: only the recording and the warnings
    stay. TINYATTN_DEBUG=1 in the environment turns detection on for the whole run. (torch's
    names: ta.autograd.detect_anomaly, set_detect_anomaly.)
    """

    def __init__(self, check_nan=True, warn=True):
        self.check_nan = check_nan  # False: no NaN check (torch's), the rest stays
        self.warn = warn
        self._before = []

    def __enter__(self):
        self._before.append(_current())
        _set_global(AnomalyTracer(self.warn, self.check_nan))
        return self

    def __exit__(self, *exc):
        _set_global(self._before.pop())

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan, self.warn):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:  # noqa: N801 - torch's name
    """set_detect_anomaly(mode, check_nan=True): anomaly detection on or off from this call on,
    in every thread (torch's global flag), or, as `with set_detect_anomaly(mode):`, for the
    block only."""

    def __init__(self, mode, check_nan=True):
        self._before = _current()
        _set_global(AnomalyTracer(True, check_nan) if mode else None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set_global(self._before)


def _current():
    """The AnomalyTracer in force here, or None."""
    return next((t for t in current_tracers() if isinstance(t, AnomalyTracer)), None)


def _set_global(tracer):
    """Anomaly detection by `tracer` (None: off) for every thread, as torch's one flag: in the
    tracers of every thread (trace_everywhere) and in this thread's own, if a tracing() block
    (record, explain) set some. (A tracing() block that another thread is inside keeps the
    tracers it began with until it ends.)"""
    def swap(tracers):
        return tuple(t for t in tracers if not isinstance(t, AnomalyTracer)) + (
            (tracer,) if tracer is not None else ())

    trace_everywhere(swap(autograd._everywhere))
    local = _tracers.get()
    if local is not None:
        _tracers.set(swap(local) or None)  # (the block's end puts back what it began with)


def is_anomaly_enabled():
    """Whether anomaly detection (detect_anomaly, set_detect_anomaly, TINYATTN_DEBUG=1) is on."""
    return _current() is not None


def is_anomaly_check_nan_enabled():
    """Whether anomaly detection checks for NaN (check_nan): True unless the detection on was
    asked not to (as torch's flag, True by default)."""
    found = _current()
    return found is None or found.check_nan


def debug_from_environment(environ=os.environ):
    """TINYATTN_DEBUG=1 (not 0 or empty): anomaly detection in every thread, for the whole run.
    `import tinyattn` calls it; the engine itself reads no environment variable."""
    on = environ.get("TINYATTN_DEBUG", "").strip() not in ("", "0")
    _set_global(AnomalyTracer(warn=True) if on else None)


_traces = weakref.WeakKeyDictionary()  # node -> the traceback of the forward call that made it
_notes = weakref.WeakKeyDictionary()  # node -> why its forward output was not finite
_TRACE_FRAMES = 40  # the innermost frames kept of each forward traceback


class AnomalyTracer(Recorder):
    """The tracer behind detect_anomaly: keeps each node's forward traceback, checks what each
    node returns in backward."""

    def __init__(self, warn=True, check_nan=True):
        super().__init__(keep=False)
        self.warn = warn
        self.check_nan = check_nan  # False: NaN goes by (the calls are still recorded)
        self._summed = weakref.WeakKeyDictionary()  # node -> user whose part made its sum NaN

    # ---- forward ----------------------------------------------------------------------------

    def forward(self, op, inputs, params, out):
        call = super().forward(op, inputs, params, out)
        index = call.index if call is not None else self.count
        label = f"{op.name}#{index}"
        arrays = [x._data if isinstance(x, Tensor) else x for x in inputs]
        if call is not None:
            frame, _ = user_frame()
            summary = traceback.StackSummary.extract(traceback.walk_stack(frame),
                                                     limit=_TRACE_FRAMES, lookup_lines=False)
            summary.reverse()
            _traces[out._node] = summary
            if out.dtype.kind == "f" and not _all_finite(out._data):  # no error: kept to show
                note = _forward_message(op, arrays, params, out._data)
                if note:  # None: an infinity that came in on purpose (a -inf mask)
                    _notes[out._node] = note
        if self.warn and op.traps is not None:
            for message in op.traps(out.backend, arrays, params, out._data, label):
                _warn_at_user_line(message)

    # ---- backward ---------------------------------------------------------------------------

    def accumulate(self, node, user, total):
        if self.check_nan and total.dtype.kind == "f" and _has_nan(total):
            self._summed.setdefault(node, user)  # told if node's own VJP then returns NaN

    def backward(self, node, g, grads):
        summed = self._summed.pop(node, None)
        if not self.check_nan:
            return
        bad = [i for i, gx in enumerate(grads) if gx is not None and _has_nan(gx)]
        if bad:
            raise AnomalyError(_backward_message(node, g, grads, bad, summed))


# ---- messages -----------------------------------------------------------------------------------


def _has_nan(a):
    return bool(a.dtype.kind in "fc" and np.isnan(a).any())


def _all_finite(a):
    return bool(a.dtype.kind != "f" or np.isfinite(a).all())


def _stats(a):
    """'(2, 3) float32: min -1.2, max 88, mean 3.1; 1 NaN, 0 Inf' for an array."""
    if not hasattr(a, "dtype"):
        return repr(a)
    head = f"{fmt_shape(a.shape)} {a.dtype}"
    if a.dtype.kind not in "fiub" or a.size == 0:
        return head
    a = _numpy(a)
    if a.dtype.kind != "f":
        return f"{head}: min {a.min()}, max {a.max()}"
    finite = a[np.isfinite(a)]
    nums = (f"min {finite.min():.4g}, max {finite.max():.4g}, mean {finite.mean():.4g}"
            if finite.size else "no finite values")
    return f"{head}: {nums}; {int(np.isnan(a).sum())} NaN, {int(np.isinf(a).sum())} Inf"


def _numpy(a):
    """A NumPy view or copy of a backend array (CuPy arrays come to the host)."""
    return np.asarray(a.get() if hasattr(a, "get") else a)


def _first_bad(a):
    a = _numpy(a)
    where = np.argwhere(~np.isfinite(a))
    return [int(j) for j in where[0]] if len(where) else []


def _has(a, test):
    """Whether an input (an array, or a Python number) holds a value `test` finds."""
    if isinstance(a, float):
        return bool(test(a))
    return hasattr(a, "dtype") and a.dtype.kind == "f" and bool(test(a).any())


def _forward_message(op, arrays, params, out):
    """Why the output of `op` is not finite and what it was given (in the lines below); None
    if that is fine (an infinity that came in: a -inf mask doing its job)."""
    what = _why_not_finite(arrays, params, out)
    if what is None:
        return None
    hint = ""
    if out.dtype == np.float16:
        hint = (f" float16 overflows above {float(np.finfo(np.float16).max):g} (exp above "
                f"{FLOAT16_EXP_LIMIT:.2f}): compute this part in float32 (.float()).")
    lines = [f"{what}.{hint}", f"    created at {describe_frame(user_frame()[0])}",
             f"    output {_stats(out)}; first at {_first_bad(out)}"]
    lines += [f"    input {i}: {_stats(a)}" for i, a in enumerate(arrays)]
    if params:
        lines.append(f"    params: {_params(params)}")
    return "\n".join(lines)


def _why_not_finite(arrays, params, out):
    """What the inputs say about a non-finite output, in words; None for infinities that came
    in (a -inf mask doing its job)."""
    nan_in = [i for i, a in enumerate(arrays) if _has(a, np.isnan)]
    inf_in = [i for i, a in enumerate(arrays) if _has(a, np.isinf)] + \
        [k for k, v in params.items() if isinstance(v, float) and math.isinf(v)]
    if not np.isnan(out).any():
        return None if inf_in else ("it produced Inf from finite inputs (an overflow, or log or "
                                    "division of zero)")
    if not nan_in:
        return "it produced NaN from inputs without NaN"
    if isinstance(arrays[nan_in[0]], float):
        return f"input {nan_in[0]} is the number nan, given to the op as a Python float"
    return (f"input {nan_in[0]} already holds NaN: it came from outside the anomaly-checked code "
            "(the data, or a tensor made before detect_anomaly); check it with .isnan()")


def _backward_message(node, g, grads, bad, summed=None):
    """torch's line naming the node and the output, then what the node was given and made, and
    the traceback of the forward call that created it."""
    i = bad[0]
    origin = ("the gradient arriving at its output already held NaN (the gradient= given to "
              "backward(), or a hook's?)" if _has_nan(g) else
              f"its VJP made NaN for input {i} from an output gradient without NaN")
    call = recorded_call(node)
    lines = [f"Function '{GradFn(node).name()}' returned nan values in its {i}th output.",
             f"  backward pass: {_label(node)}: {origin}."]
    if summed is not None:
        lines.append(f"  adding up the gradients that reach {_label(node)} (its output is used "
                     f"more than once; the last came from {_label(summed)}) made NaN: each part "
                     "was without NaN, their sum was not (inf - inf)")
    lines.append(f"  gradient of its output: {_stats(g)}")
    lines += [f"  gradient for input {j}: {_stats(gx)}" for j, gx in enumerate(grads)
              if gx is not None]
    if call is not None:
        lines += [f"  forward input {j}: {_stats(a)}" for j, a in enumerate(call.inputs)]
    else:
        shapes = ", ".join(fmt_shape(s) if s is not None else "None" for s in node.shapes)
        lines.append(f"  forward input shapes: {shapes}")
    lines.append(f"  formula: {node.op.formula}")
    for k, n in enumerate([node, *node.parents]):
        note = _notes.get(n) if n is not None else None
        if note is not None:  # (the forward, where the values first went wrong)
            whose = "its" if k == 0 else f"its input {k - 1}'s ({_label(n)})"
            lines.append(f"  {whose} forward output was not finite: {note}")
    return "\n".join(lines) + "\n" + _forward_trace(node)


def _forward_trace(node):
    """The traceback of the forward call that created `node`, as torch shows it."""
    trace = _traces.get(node)
    if trace is None:
        return ("No forward pass information available. Enable detect anomaly during forward "
                "pass for more information (the forward ran outside detect_anomaly(): put it "
                "inside the block too).")
    return "Traceback of forward call that caused the error:\n" + "".join(trace.format())


def _label(node):
    call = recorded_call(node)
    return call.label if call is not None else node.op.name


def _params(params):
    return ", ".join(f"{k}=..." if hasattr(v, "shape") or k == "index" else f"{k}={v!r}"
                     for k, v in params.items())


def _warn_at_user_line(message):
    """warnings.warn, pointing at the user's line rather than into tinyattn."""
    _, depth = user_frame()  # depth 1 is this function, which is warn's stacklevel 1
    warnings.warn(message, AnomalyWarning, stacklevel=depth)
