"""An op's float16 form, given no float16 array, is the op itself (ops/half.py).

apply sends only float16 inputs to the float16 forms, but a recorded float16 node keeps its
float16 form, and gradcheck_graph re-runs every recorded node in float64: there each form must
compute what its op computes, forward, saved values and VJP. Checked here for every op that has
a float16 forward or VJP of its own, over the op's sample cases, and through gradcheck_graph on
float16 graphs of those ops.
"""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.backends import get_backend
from tinyattn.ops import half
from tinyattn.ops import samples as S

OPS = sorted({*half._FORWARDS, *half._VJPS}, key=lambda op: op.name)


def _same(a, b, what):
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{what}[{i}]")
    elif hasattr(a, "dtype") or hasattr(b, "dtype"):
        assert np.asarray(a).dtype == np.asarray(b).dtype, what
        np.testing.assert_array_equal(a, b, err_msg=what)
    else:
        assert a == b or (a != a and b != b), what


@pytest.mark.parametrize("op", OPS, ids=[op.name for op in OPS])
def test_the_float16_form_of_a_float64_call_is_the_op(op):
    be = get_backend()
    form = half.half_form(op)
    assert form is not op and form.fwd is not op.fwd
    for k, (inputs, params) in enumerate(op.samples):
        rng = np.random.default_rng(k)
        xs = S.materialize(inputs, rng, lambda v, _: np.asarray(v, dtype=np.float64)
                           if np.asarray(v).dtype.kind == "f" else np.asarray(v))
        with np.errstate(all="ignore"):
            want_out, want_saved = op.fwd(be, *xs, **params)
        got_out, got_saved = form.fwd(be, *xs, **params)
        _same(got_out, want_out, f"{op.name} case {k}: forward")
        _same(got_saved, want_saved, f"{op.name} case {k}: saved")
        g = rng.standard_normal(np.shape(want_out))
        with np.errstate(all="ignore"):
            want_grads = op.vjp(be, g, want_saved, **params)
        _same(form.vjp(be, g, got_saved, **params), want_grads, f"{op.name} case {k}: VJP")


def _f16(*shape, low=-2.0, high=2.0, seed=0):
    values = np.random.default_rng(seed).uniform(low, high, shape).astype(np.float16)
    return ta.tensor(values, requires_grad=True)


GRAPHS = {
    "threshold": lambda x, y: F.threshold(x, 0.1, 20.0),
    "softshrink": lambda x, y: F.softshrink(x, 0.5),
    "hardshrink": lambda x, y: F.hardshrink(x, 0.5),
    "leaky_relu": lambda x, y: F.leaky_relu(x, 0.2),
    "celu": lambda x, y: F.celu(x, 0.7),
    "hardtanh": lambda x, y: F.hardtanh(x, -0.5, 0.5),
    "softplus": lambda x, y: F.softplus(x, 2.0, 3.0),
    "clip": lambda x, y: x.clamp(-0.5, 0.5),
    "mul": lambda x, y: x * 3.0 * y,
    "div": lambda x, y: x / 3.0 / y,
    "pow": lambda x, y: y ** 2.5,
    "remainder": lambda x, y: x % y,
    "floor_divide": lambda x, y: (x // y) * x,
    "logit": lambda x, y: (y / 3).logit(eps=1e-3),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_gradcheck_graph_reruns_a_float16_graph_in_float64(name):
    x = _f16(2, 3)
    y = _f16(2, 3, low=0.5, high=2.0, seed=1)
    with ta.record():
        loss = GRAPHS[name](x, y).float().sum()
    assert loss.dtype == ta.float32
    report = ta.gradcheck_graph(loss)  # (raises on a VJP that disagrees)
    checked = {c.label.split("#")[0] for c in report.checks}
    assert name in checked, (name, checked)
