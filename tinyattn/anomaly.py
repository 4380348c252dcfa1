"""Anomaly detection: stop at the first op that makes a NaN or an Inf, and warn about known traps.

`with tinyattn.detect_anomaly():` (or TINYATTN_DEBUG=1 in the environment, for every thread) puts
a tracer on every op call: each forward output and each VJP result is checked for NaN/Inf, and
the first op that produced one raises AnomalyError naming the op, the pass, its input statistics
and the user's line that created it. It also warns (AnomalyWarning) about what each op names as
its traps (ops/traps.py: a fully masked attention row, float16 logits large enough to overflow
exp, a 0/1 float mask added to scores).
"""

import functools
import math
import os
import warnings

import numpy as np

from . import autograd
from .autograd import _tracers, current_tracers, trace_everywhere, tracing
from .errors import TinyattnError, fmt_shape
from .graphcheck import Recorder, describe_frame, recorded_call, user_frame
from .ops.traps import FLOAT16_EXP_LIMIT
from .tensor import Tensor


class AnomalyError(TinyattnError, FloatingPointError):
    """A NaN or an Inf made by an op (forward) or by its VJP (backward) under detect_anomaly."""


class AnomalyWarning(UserWarning):
    """A known trap seen under detect_anomaly: it does not stop the run, but is rarely meant."""


class detect_anomaly:  # noqa: N801 - used like no_grad
    """`with tinyattn.detect_anomaly():` raise AnomalyError at the first op that makes NaN/Inf.

    Put both the forward and `backward()` inside the block (or decorate the step function):
    forward outputs are checked as they are made, VJP results as backward computes them. An
    infinity is allowed where it came in on purpose (an input already holding -inf, or
    masked_fill(..., float("-inf"))); a NaN never is. warn=False turns the trap warnings off.
    The op calls are recorded as by `tinyattn.record()`, so `gradcheck_graph(loss)` works too.
    check_nan=False (torch's keyword) leaves NaN and Inf alone: only the recording and the
    warnings stay. TINYATTN_DEBUG=1 in the environment turns detection on everywhere, in
    every thread. (torch's names: ta.autograd.detect_anomaly, set_detect_anomaly.)
    """

    def __init__(self, check_nan=True, warn=True):
        self.check_nan = check_nan  # False: no NaN/Inf check (torch's), the rest stays
        self.warn = warn
        self._contexts = []

    def __enter__(self):
        ctx = tracing(AnomalyTracer(self.warn, self.check_nan))
        ctx.__enter__()
        self._contexts.append(ctx)
        return self

    def __exit__(self, *exc):
        return self._contexts.pop().__exit__(*exc)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan, self.warn):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:  # noqa: N801 - torch's name
    """set_detect_anomaly(mode, check_nan=True): anomaly detection on or off from this call on
    (in this thread or task, as set_grad_enabled), or, as `with set_detect_anomaly(mode):`,
    for the block only."""

    def __init__(self, mode, check_nan=True):
        self._before = _tracers.get()
        others = tuple(t for t in current_tracers() if not isinstance(t, AnomalyTracer))
        tracers = others + ((AnomalyTracer(True, check_nan),) if mode else ())
        # (None: as if never set, where that is the same, so that ops pay nothing for it)
        self._token = _tracers.set(tracers if tracers or autograd._everywhere else None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            _tracers.reset(self._token)
        except ValueError:  # made in another thread or task: put back what it found
            _tracers.set(self._before)


def is_anomaly_enabled():
    """Whether anomaly detection (detect_anomaly, set_detect_anomaly, TINYATTN_DEBUG=1) is on
    here."""
    return any(isinstance(t, AnomalyTracer) for t in current_tracers())


def is_anomaly_check_nan_enabled():
    """Whether anomaly detection checks for NaN here (check_nan): True unless the detection on
    here was asked not to (as torch's flag, True by default)."""
    found = [t.check_nan for t in current_tracers() if isinstance(t, AnomalyTracer)]
    return any(found) or not found


def debug_from_environment(environ=os.environ):
    """TINYATTN_DEBUG=1 (not 0 or empty): anomaly detection in every thread, for the whole run.
    `import tinyattn` calls it; the engine itself reads no environment variable."""
    on = environ.get("TINYATTN_DEBUG", "").strip() not in ("", "0")
    trace_everywhere((AnomalyTracer(warn=True),) if on else ())


class AnomalyTracer(Recorder):
    """The tracer behind detect_anomaly: checks every forward output and VJP result."""

    def __init__(self, warn=True, check_nan=True):
        super().__init__(keep=False)
        self.warn = warn
        self.check_nan = check_nan  # False: NaN and Inf go by (the calls are still recorded)
        self._summed = {}  # user node -> node whose summed gradient became non-finite

    # ---- forward ----------------------------------------------------------------------------

    def forward(self, op, inputs, params, out):
        call = super().forward(op, inputs, params, out)
        index = call.index if call is not None else self.count
        label = f"{op.name}#{index}"
        arrays = [x.data if isinstance(x, Tensor) else x for x in inputs]
        if self.check_nan and out.dtype.kind == "f" and not _all_finite(out.data):
            message = _forward_message(op, label, arrays, params, out.data)
            if message:  # None: an infinity that came in on purpose (a -inf mask)
                raise AnomalyError(message)
        if self.warn and op.traps is not None:
            for message in op.traps(out.backend, arrays, params, out.data, label):
                _warn_at_user_line(message)

    # ---- backward ---------------------------------------------------------------------------

    def accumulate(self, node, user, total):
        if self.check_nan and total.dtype.kind == "f" and not _all_finite(total):
            self._summed.setdefault(user, node)  # blamed in backward() unless user's VJP is

    def backward(self, node, g, grads):
        summed = self._summed.pop(node, None)
        bad = [i for i, gx in enumerate(grads) if self.check_nan and gx is not None
               and gx.dtype.kind == "f" and not _all_finite(gx)]
        if bad:
            raise AnomalyError(_backward_message(node, g, grads, bad))
        if summed is not None:
            raise AnomalyError(
                f"backward: adding up the gradients that reach {_label(summed)} (its output is "
                f"used more than once; the last came from {_label(node)}) gave NaN/Inf: each "
                "was finite, their sum overflowed. Scale the loss down, or compute in float32. "
                f"{_label(summed)} was created at {_source(summed)}")


# ---- messages -----------------------------------------------------------------------------------


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


def _forward_message(op, label, arrays, params, out):
    """Why the output of `op` is not finite and what it was given; None if that is fine."""
    what = _why_not_finite(arrays, params, out)
    if what is None:
        return None
    hint = ""
    if out.dtype == np.float16:
        hint = (f" float16 overflows above {float(np.finfo(np.float16).max):g} (exp above "
                f"{FLOAT16_EXP_LIMIT:.2f}): compute this part in float32 (.float()).")
    lines = [f"forward pass: {label} made a non-finite output: {what}.{hint}",
             f"  created at {describe_frame(user_frame()[0])}",
             f"  output {_stats(out)}; first at {_first_bad(out)}"]
    lines += [f"  input {i}: {_stats(a)}" for i, a in enumerate(arrays)]
    if params:
        lines.append(f"  params: {_params(params)}")
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


def _backward_message(node, g, grads, bad):
    i = bad[0]
    origin = ("the gradient arriving at its output was already non-finite (the gradient= given "
              "to backward()?)" if not _all_finite(g) else
              f"its VJP made a non-finite gradient for input {i} from a finite output gradient")
    call = recorded_call(node)
    lines = [f"backward pass: {_label(node)}: {origin}.",
             f"  created at {_source(node)}",
             f"  gradient of its output: {_stats(g)}"]
    lines += [f"  gradient for input {j}: {_stats(gx)}" for j, gx in enumerate(grads)
              if gx is not None]
    if call is not None:
        lines += [f"  forward input {j}: {_stats(a)}" for j, a in enumerate(call.inputs)]
    else:
        shapes = ", ".join(fmt_shape(s) if s is not None else "None" for s in node.shapes)
        lines.append(f"  forward input shapes: {shapes}")
    lines.append(f"  formula: {node.op.formula}")
    return "\n".join(lines)


def _label(node):
    call = recorded_call(node)
    return call.label if call is not None else node.op.name


def _source(node):
    call = recorded_call(node)
    if call is not None:
        return call.source
    return "unknown (the forward ran outside detect_anomaly(): put it inside the block too)"


def _params(params):
    return ", ".join(f"{k}=..." if hasattr(v, "shape") or k == "index" else f"{k}={v!r}"
                     for k, v in params.items())


def _warn_at_user_line(message):
    """warnings.warn, pointing at the user's line rather than into tinyattn."""
    _, depth = user_frame()  # depth 1 is this function, which is warn's stacklevel 1
    warnings.warn(message, AnomalyWarning, stacklevel=depth)
