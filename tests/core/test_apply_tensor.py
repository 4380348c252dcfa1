"""apply_tensor, apply's shorter path for one tensor and at most one Python number (x * 2.0,
x + 1, x.tanh()): everything it makes must be what apply makes for the same call. Each case runs
both paths on equal inputs and compares the values, the dtype, the node (op, parents, saved,
consts, shape, dtype, scope, version checks) and what a tracer sees."""

import sys

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import autograd as ag
from tinyattn.errors import GraphError, ShapeError
from tinyattn.ops import elementwise as ew
from tinyattn.ops.op import Op

UNARY = [ew.neg, ew.absolute, ew.exp, ew.log, ew.sqrt, ew.tanh, ew.sigmoid, ew.relu]
BINARY = [ew.add, ew.sub, ew.mul, ew.div]
DTYPES = [np.float32, np.float64, np.float16, np.int64, np.bool_]
VALUES = [-1.5, 0.0, 0.25, 2.0, np.inf, np.nan]


class Recorder(ag.Tracer):
    def __init__(self):
        self.events = []

    def forward(self, op, inputs, params, out):
        given = ["T" if isinstance(x, ag.TensorBase) else x for x in inputs]
        self.events.append((op.name, given, dict(params), out.dtype, out.shape))


def make(dtype, requires_grad):
    a = np.array(VALUES, dtype=np.float64)
    if dtype is np.bool_:
        a = a > 0
    elif np.dtype(dtype).kind == "i":
        a = np.nan_to_num(a, posinf=7, neginf=-7).astype(dtype)
    else:
        a = a.astype(dtype)
    return ta.tensor(a, requires_grad=requires_grad and np.dtype(dtype).kind == "f")


def both(op, dtype, requires_grad, *c):
    """(what apply makes, what apply_tensor makes, the two tracers' events) for op(x, *c)."""
    made = []
    for path in (ag.apply, ag.apply_tensor):
        x = make(dtype, requires_grad)
        with ag.tracing(Recorder()) as rec, np.errstate(all="ignore"):
            try:
                out = path(op, x, *c)
            except Exception as e:  # noqa: BLE001 (both paths must fail alike)
                out = e
        made.append((x, out, rec.events))
    return made


def assert_same_node(n1, n2, x1, x2):
    assert (n1 is None) == (n2 is None)
    if n1 is None:
        return
    assert n1.op is n2.op
    assert [p is x1._node for p in n1.parents] == [p is x2._node for p in n2.parents]
    assert len(n1.parents) == len(n2.parents)
    assert n1.consts == n2.consts and n1.params == n2.params
    assert n1.shape == n2.shape and n1.dtype == n2.dtype and n1.scope == n2.scope
    assert len(n1.saved) == len(n2.saved)
    for s1, s2 in zip(n1.saved, n2.saved, strict=True):
        if isinstance(s1, np.ndarray):
            np.testing.assert_array_equal(s1, s2)
        else:
            assert s1 == s2 or (s1 != s1 and s2 != s2)
    assert [(c[0] is x1._version_counter, c[1], c[2]) for c in n1.versions] == \
        [(c[0] is x2._version_counter, c[1], c[2]) for c in n2.versions]


def compare(made):
    (x1, out1, ev1), (x2, out2, ev2) = made
    if isinstance(out1, Exception):
        assert type(out1) is type(out2) and str(out1) == str(out2)
        return
    assert not isinstance(out2, Exception), out2
    assert type(out1) is type(out2)
    assert out1.dtype == out2.dtype and out1.shape == out2.shape
    np.testing.assert_array_equal(out1.numpy(), out2.numpy())
    assert out1.requires_grad == out2.requires_grad
    assert_same_node(out1._node, out2._node, x1, x2)
    assert ev1 == ev2 and ev1  # the tracer saw the op on both paths


@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", UNARY, ids=lambda o: o.name)
def test_unary_ops_make_what_apply_makes(op, dtype, requires_grad):
    compare(both(op, dtype, requires_grad))


@pytest.mark.parametrize("c", [2.0, -3, 0, 0.5, 1e300])
@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", BINARY, ids=lambda o: o.name)
def test_ops_with_a_number_make_what_apply_makes(op, dtype, requires_grad, c):
    compare(both(op, dtype, requires_grad, c))


@pytest.mark.parametrize("op", [ew.tanh, ew.mul], ids=lambda o: o.name)
def test_no_grad_and_scopes_as_apply(op):
    c = (2.0,) if op is ew.mul else ()
    with ta.no_grad():
        (_, out1, _), (_, out2, _) = both(op, np.float32, True, *c)
    assert out1._node is None and out2._node is None
    token = ag._scope.set("blocks.0.attn")
    try:
        made = both(op, np.float32, True, *c)
    finally:
        ag._scope.reset(token)
    compare(made)
    assert made[1][1]._node.scope == "blocks.0.attn"


def test_gradients_through_the_operators_match_apply():
    """The operators and methods that take the short path, in a chain, against the same chain
    spelled with apply (the long path): values and gradients equal bit for bit."""
    a = np.linspace(-1, 1, 7)
    x1 = ta.tensor(a, requires_grad=True)
    x2 = ta.tensor(a, requires_grad=True)
    y1 = ((((x1 * 3.0 + 1) - 0.5) / 2).tanh().exp().sigmoid().relu().abs().sqrt().log() * -1)
    y1 = -y1
    y2 = ag.apply(ew.mul, x2, 3.0)
    for op, c in [(ew.add, 1), (ew.sub, 0.5), (ew.div, 2)]:
        y2 = ag.apply(op, y2, c)
    for op in (ew.tanh, ew.exp, ew.sigmoid, ew.relu, ew.absolute, ew.sqrt, ew.log):
        y2 = ag.apply(op, y2)
    y2 = ag.apply(ew.neg, ag.apply(ew.mul, y2, -1))
    np.testing.assert_array_equal(y1.numpy(), y2.numpy())
    y1.sum().backward()
    y2.sum().backward()
    np.testing.assert_array_equal(x1.grad.numpy(), x2.grad.numpy())


def test_the_operators_take_the_short_path_only_for_an_int_or_float(monkeypatch):
    calls = []
    real = ag.apply_tensor

    def spy(op, x, c=None):
        calls.append((op.name, c))
        return real(op, x, c)

    monkeypatch.setattr(sys.modules["tinyattn.tensor"], "apply_tensor", spy)
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    x * 2.0, x + 1, x - 0.5, x / 4, x.tanh(), -x
    assert calls == [("mul", 2.0), ("add", 1), ("sub", 0.5), ("div", 4), ("tanh", None),
                     ("neg", None)]
    calls.clear()
    x * True, x + np.float32(1), x * x, x - ta.tensor(1.0)
    assert calls == []  # (a bool, a NumPy number, a tensor: apply's checks)


def test_a_view_shares_its_input_version_counter():
    flat = Op("flat_view", lambda be, x: (x.reshape(-1), ()), "gx = reshape(g, x.shape)",
              view=True)
    flat.defvjp(lambda be, g, saved: (g.reshape(2, 2),))
    for path in (ag.apply, ag.apply_tensor):
        x = ta.tensor(np.ones((2, 2)), requires_grad=True)
        base = x * 1.0
        v = path(flat, base)
        assert v._version_counter is not None and v._version_counter is base._version_counter
        base.add_(1)  # a change of the base is a change of its view (torch)
        assert v._version == base._version == 1


def test_errors_name_the_op_and_shapes_as_apply():
    def fwd(be, x, c=None):
        raise ValueError("operands could not be broadcast together")

    boom = Op("boom", fwd, "gx = g")
    x = ta.ones(2, 3)
    msgs = []
    for path in (ag.apply, ag.apply_tensor):
        with pytest.raises(ShapeError) as err:
            path(boom, x, 2.0)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1] and msgs[0].startswith("boom: inputs (2, 3), 2.0:")


def test_a_method_called_on_no_tensor_is_refused_as_apply_refuses_it():
    with pytest.raises(TypeError, match="tanh: needs at least one Tensor input"):
        ta.Tensor.tanh(3.0)


def test_saved_outputs_and_inputs_are_checked_for_changes():
    x = ta.tensor([0.5, 1.0], requires_grad=True)
    y = x.tanh()  # keeps its output
    y.mul_(2)
    with pytest.raises(GraphError, match="tanh"):
        y.sum().backward()
    x = ta.tensor([0.5, 1.0], requires_grad=True)
    h = x * 1.0
    y = h * 3.0  # keeps no input: its gradient in h needs only the 3
    h.add_(1)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_inference_mode_marks_the_results():
    x = ta.tensor([0.5, 1.0])
    with ta.inference_mode():
        y, z = x * 2.0, x.exp()
    assert y.is_inference() and z.is_inference()


def test_an_input_that_gets_no_gradient_leaves_the_graph_as_in_apply():
    """An op whose input 0 never gets a gradient (as a mask): its node keeps no parent, and
    the input's shape and dtype join the node's consts."""
    flag = Op("is_big", lambda be, x, c=None: (x > (c or 0), ()), "no gradient", nondiff=(0,))
    flag.defvjp(lambda be, g, saved: (None,))
    nodes = []
    for path in (ag.apply, ag.apply_tensor):
        x = ta.tensor([1.0, -1.0], requires_grad=True)
        nodes.append(path(flag, x, 0.5)._node)
    assert [n.parents for n in nodes] == [[None, None], [None, None]]
    assert nodes[0].consts == nodes[1].consts == ((0, (2,), np.dtype(np.float32)),)
