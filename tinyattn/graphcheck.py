"""Recording op calls, and the graph-wide gradcheck that finds which op's VJP in a model is wrong.

`with tinyattn.record() as graph:` keeps, for every op call in the block that joins a graph, the
op, its input arrays, its parameters and the user's source line that made it (`detect_anomaly()`
records the same). `gradcheck_graph(loss)` then re-runs every recorded op of loss's graph on those
inputs in float64 and compares its VJP with central finite differences, one op at a time, so a
wrong VJP is named even inside a whole transformer.
"""

import linecache
import os
import sys
import weakref
from dataclasses import dataclass, field

import numpy as np

from .autograd import Tracer, sum_to, toposort, tracing
from .errors import GradcheckError, GraphError, fmt_shape
from .tensor import Tensor

_PACKAGE = os.path.dirname(os.path.abspath(__file__))

# node -> Call, for every node made under record() or detect_anomaly(); an entry lives as long as
# its node (that is, as long as the graph it belongs to)
_calls = weakref.WeakKeyDictionary()


# ---- where in the user's code -------------------------------------------------------------------


def user_frame():
    """The innermost stack frame outside the tinyattn package (the user's line), and its depth
    counted from the caller of this function (1 = the caller itself)."""
    frame, depth = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, depth = frame.f_back, depth + 1
    return frame, depth


def describe_frame(frame):
    """'train.py:42 in step: loss = F.cross_entropy(logits, y)' for a frame (or 'unknown')."""
    if frame is None:
        return "unknown"
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    shown = os.path.relpath(filename)
    shown = filename if shown.startswith("..") else shown
    code = linecache.getline(filename, lineno).strip()
    return f"{shown}:{lineno} in {frame.f_code.co_name}" + (f": {code}" if code else "")


# ---- recording ----------------------------------------------------------------------------------


class Call:
    """One recorded op call: what `gradcheck_graph` needs to run it again on its own."""

    __slots__ = ("op", "index", "inputs", "params", "wrt", "backend", "source", "__weakref__")

    def __init__(self, op, index, inputs, params, wrt, backend, source):
        self.op = op
        self.index = index  # the op's number in its recording block: softmax#17
        self.inputs = inputs  # the input arrays (kept, not copied) and Python numbers
        self.params = params
        self.wrt = wrt  # positions of the inputs that the graph differentiates
        self.backend = backend
        self.source = source  # the user's line that made it

    @property
    def label(self):
        return f"{self.op.name}#{self.index}"

    def describe(self):
        """'(2, 4, 8, 8); dim=-1': the input shapes and parameters."""
        shown = [fmt_shape(a.shape) if hasattr(a, "shape") else repr(a) for a in self.inputs]
        extra = [f"{k}=..." if k == "index" or hasattr(v, "shape")
                 else f"{k}={getattr(v, '__name__', None) or v!r}" for k, v in self.params.items()]
        return ", ".join(shown) + ("; " + ", ".join(extra) if extra else "")

    def __repr__(self):
        return f"<Call {self.label} {self.describe()} at {self.source}>"


class Recorder(Tracer):
    """A tracer that numbers every op call and records those that join a graph (see Call)."""

    def __init__(self, keep=True):
        self.count = 0
        self.calls = [] if keep else None  # record() keeps its calls; detect_anomaly does not

    def forward(self, op, inputs, params, out):
        self.count += 1
        node = out._node
        if node is None:  # not on a graph: nothing to check later
            return None
        frame, _ = user_frame()
        call = Call(op, self.count, [x._data if isinstance(x, Tensor) else x for x in inputs],
                    params, [i for i, p in enumerate(node.parents) if p is not None],
                    out.backend, describe_frame(frame))
        _calls[node] = call
        if self.calls is not None:
            self.calls.append(call)
        return call


def recorded_call(node):
    """The Call recorded for `node`, or None when it was made outside record()/detect_anomaly()."""
    return _calls.get(node)


class Graph:
    """What `record()` gives: the recorded calls, in the order they ran."""

    def __init__(self, recorder):
        self._recorder = recorder

    @property
    def calls(self):
        return self._recorder.calls

    def __len__(self):
        return len(self.calls)

    def __iter__(self):
        return iter(self.calls)

    def __repr__(self):
        return f"<Graph: {len(self.calls)} recorded op calls>"


class record:  # noqa: N801 - used like no_grad
    """`with tinyattn.record() as graph:` records every op call that joins a graph (for
    gradcheck_graph, and to look at: `graph.calls`). Input arrays are kept, not copied."""

    def __init__(self):
        self._contexts = []

    def __enter__(self):
        recorder = Recorder(keep=True)
        ctx = tracing(recorder)
        ctx.__enter__()
        self._contexts.append(ctx)
        return Graph(recorder)

    def __exit__(self, *exc):
        return self._contexts.pop().__exit__(*exc)


# ---- the graph-wide check -----------------------------------------------------------------------


@dataclass
class OpCheck:
    """The verdict on one recorded op call."""

    label: str  # "softmax#17"
    case: str  # "(2, 4, 8, 8); dim=-1"
    source: str
    ok: bool
    rel_err: float = 0.0
    where: str = ""  # "input 0 at [0, 1, 3, 5]: analytic ... vs numeric ..."
    skipped: str = ""  # why the op was not checked ("" when it was)

    def line(self):
        if self.skipped:
            return f"{self.label} {self.case}: skipped ({self.skipped})"
        return f"{self.label} {self.case}: rel err {self.rel_err:.1e} {self.where}"


@dataclass
class GraphReport:
    """check_graph's answer: every op call of the graph, checked, skipped or not recorded."""

    checks: list = field(default_factory=list)
    unrecorded: list = field(default_factory=list)  # op names of nodes built outside recording

    @property
    def failures(self):
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self):
        return not self.failures

    def __bool__(self):
        return self.ok

    def __str__(self):
        bad = self.failures
        good = sum(1 for c in self.checks if c.ok and not c.skipped)
        skipped = [c for c in self.checks if c.skipped]
        parts = [f"{c.line()} (made at {c.source})" for c in bad]
        parts.append(f"{good} {'other ' if bad else ''}op{'s' if good != 1 else ''} ok")
        if skipped:
            parts.append(f"{len(skipped)} skipped ({', '.join(c.line() for c in skipped)})")
        if self.unrecorded:
            parts.append(f"{len(self.unrecorded)} not recorded ({', '.join(self.unrecorded[:5])}"
                         f"{', ...' if len(self.unrecorded) > 5 else ''})")
        return "; ".join(parts)


def gradcheck_graph(loss, eps=1e-6, atol=1e-6, rtol=1e-4, n_directions=2, seed=0,
                    locate_limit=4096):
    """Check the VJP of every op in loss's graph against finite differences, op by op.

    Build the loss inside `with tinyattn.record():` (or `tinyattn.detect_anomaly()`), so that
    each op's inputs are kept; then `gradcheck_graph(loss)`, before or after `loss.backward()`.
    Every recorded op is run again on its own inputs in float64, and r·J·d from its VJP is
    compared with a central difference along `n_directions` random directions d (random
    cotangent r); a failing op is then searched element by element (inputs up to `locate_limit`
    elements) to say where. Random ops (dropout) are checked with a fixed draw.

    Returns the GraphReport when every op agrees; else raises GradcheckError naming the ops,
    e.g. "softmax#17 (2, 4, 8, 8); dim=-1: rel err 3.0e-02 at input 0 [0, 1, 3, 5] ...; 41 other
    ops ok". `check_graph` returns the report without raising.
    """
    report = check_graph(loss, eps, atol, rtol, n_directions, seed, locate_limit)
    if not report.ok:
        raise GradcheckError(f"gradcheck_graph: {report}")
    return report


def check_graph(loss, eps=1e-6, atol=1e-6, rtol=1e-4, n_directions=2, seed=0,
                locate_limit=4096):
    """gradcheck_graph's report (a GraphReport), without raising on a wrong VJP."""
    if not isinstance(loss, Tensor):
        raise TypeError(f"gradcheck_graph: expected the loss tensor, got {type(loss).__name__}")
    if loss._node is None or loss._node.op is None:
        raise GraphError("gradcheck_graph: this tensor has no graph to check (it is a leaf, or "
                         "was computed under no_grad() or from inputs that need no grad)")
    report = GraphReport()
    rng = np.random.default_rng(seed)
    for node in reversed(toposort(loss._node)):  # in the order the ops ran
        if node.op is None:
            continue
        call = _calls.get(node)
        if call is None:
            report.unrecorded.append(node.op.name)
            continue
        report.checks.append(_check_call(call, eps, atol, rtol, n_directions, rng, locate_limit))
    if not report.checks:
        raise GraphError("gradcheck_graph: none of the ops of this loss were recorded; build the "
                         "loss inside `with tinyattn.record():` (or tinyattn.detect_anomaly()), "
                         "then call gradcheck_graph(loss)")
    report.checks.sort(key=lambda c: int(c.label.rsplit("#", 1)[1]))
    return report


def _as_float64(be, a):
    if hasattr(a, "dtype") and a.dtype.kind == "f":
        return a.astype(np.float64)  # a copy, so perturbing it touches nothing of the user's
    return a


def _check_call(call, eps, atol, rtol, n_directions, rng, locate_limit):
    op, be = call.op, call.backend
    xs = [_as_float64(be, a) for a in call.inputs]
    params = dict(call.params)
    if op.float64_params is not None:  # cast's float dtype, a random op's seed
        params = op.float64_params(params)
    verdict = dict(label=call.label, case=call.describe(), source=call.source)

    def run(arrays):
        return op.fwd(be, *arrays, **params)

    out, _ = run(xs)
    if out.dtype.kind != "f":
        return OpCheck(ok=True, skipped=f"its output is {out.dtype}", **verdict)
    out_np = be.to_numpy(out)
    if not np.array_equal(out_np, be.to_numpy(run(xs)[0]), equal_nan=True):
        return OpCheck(ok=True, skipped="random: a second run gives other values", **verdict)
    worst = (-np.inf, 0.0, "")
    for i in call.wrt:
        if not hasattr(xs[i], "dtype") or xs[i].dtype.kind != "f":
            continue
        found = _check_input(op, be, run, xs, i, out_np, params, eps, atol, rtol, n_directions,
                             rng, locate_limit)
        if found[0] > worst[0]:
            worst = found
    excess, rel_err, where = worst
    return OpCheck(ok=bool(excess <= 0), rel_err=rel_err, where=where, **verdict)


def _vjp_for(op, be, run, xs, i, cotangent, params):
    """The VJP's gradient for input i, summed back to its shape as autograd does."""
    out, saved = run(xs)
    grads = op.vjp(be, be.asarray(cotangent.astype(out.dtype)), saved, **params)
    gx = grads[i]
    shape = xs[i].shape
    if gx is None:
        return np.zeros(shape), ""
    if gx.shape != shape:
        if not op.broadcasts:
            return None, (f"the VJP returned a gradient of shape {fmt_shape(gx.shape)} for input "
                          f"{i} of shape {fmt_shape(shape)}")
        gx = sum_to(gx, shape)
    return be.to_numpy(gx).astype(np.float64), ""


def _check_input(op, be, run, xs, i, out_np, params, eps, atol, rtol, n_directions, rng,
                 locate_limit):
    """(excess over the tolerance, rel err, where) for input i of one op call."""
    x = xs[i]
    finite = np.isfinite(out_np)
    worst = (-np.inf, 0.0, "")

    def directional(d, r):
        """The central difference of sum(r * f(x + t d)) at t = 0."""
        plus = _with_input(run, xs, i, x + be.asarray(eps * d))
        minus = _with_input(run, xs, i, x - be.asarray(eps * d))
        diff = np.where(finite, be.to_numpy(plus) - be.to_numpy(minus), 0.0)
        return float(np.sum(diff * r) / (2 * eps))

    for _ in range(n_directions):
        r = np.where(finite, rng.standard_normal(out_np.shape), 0.0)
        d = rng.standard_normal(x.shape)
        gx, problem = _vjp_for(op, be, run, xs, i, r, params)
        if problem:
            return np.inf, np.inf, problem
        analytic, numeric = float(np.sum(gx * d)), directional(d, r)
        excess, rel = _excess(analytic, numeric, atol, rtol)
        if excess > worst[0]:
            worst = (excess, rel, f"at input {i} {fmt_shape(x.shape)} along a random direction: "
                                  f"analytic {analytic:.6g} vs numeric {numeric:.6g}")
        if excess > 0:
            if x.size <= locate_limit:
                worst = _locate(gx, directional, x.shape, r, i, atol, rtol) or worst
            break
    return worst


def _locate(gx, directional, shape, r, i, atol, rtol):
    """The input element where the VJP and the finite difference disagree the most."""
    worst = None
    for k in range(int(np.prod(shape))):
        e = np.zeros(shape)
        e.reshape(-1)[k] = 1.0
        analytic, numeric = float(gx.reshape(-1)[k]), directional(e, r)
        excess, rel = _excess(analytic, numeric, atol, rtol)
        if worst is None or excess > worst[0]:
            index = [int(j) for j in np.unravel_index(k, shape)] if shape else []
            worst = (excess, rel, f"at input {i} {index}: analytic {analytic:.6g} vs numeric "
                                  f"{numeric:.6g}")
    return worst if worst is not None and worst[0] > 0 else None


def _excess(analytic, numeric, atol, rtol):
    """(how far past atol + rtol·|numeric| the error is, the relative error)."""
    err = abs(analytic - numeric)
    rel = err / max(abs(analytic), abs(numeric), atol)
    if not np.isfinite(err):
        return np.inf, np.inf
    return err - (atol + rtol * abs(numeric)), rel


def _with_input(run, xs, i, value):
    arrays = list(xs)
    arrays[i] = value
    return run(arrays)[0]
