"""gradcheck_graph: every recorded op of a loss's graph re-run in float64 and its VJP checked
against finite differences, so that a wrong VJP is named (op, number, shapes, element) even
inside a whole model. record() keeps what the check needs."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn.ops import REGISTRY, op


@op("bad_softmax", "gx = y * g  (wrong: forgets the row-sum term)")
def bad_softmax(be, x, dim=-1):
    """y = softmax(x) along dim"""
    y = be.softmax(x, axis=dim)
    return y, (y,)


@bad_softmax.defvjp
def bad_softmax_vjp(be, g, saved, dim=-1):
    (y,) = saved
    return (y * g,)  # the true VJP is y * (g - sum(g * y, dim))


@op("bad_shape", "gx = g[0]  (wrong: drops the first dim)")
def bad_shape(be, x):
    """out = 2 x"""
    return 2 * x, ()


@bad_shape.defvjp
def bad_shape_vjp(be, g, saved):
    return (2 * g[0],)


@pytest.fixture
def registered(monkeypatch):
    """The deliberately wrong ops, registered like any other op for the length of a test."""
    monkeypatch.setitem(REGISTRY, "bad_softmax", bad_softmax)
    monkeypatch.setitem(REGISTRY, "bad_shape", bad_shape)


def attention_like_loss(softmax):
    ta.manual_seed(0)
    x = ta.randn(2, 4, 8, 8, requires_grad=True)  # (B, H, T, D)
    w = ta.randn(8, 8, requires_grad=True)
    v = ta.randn(2, 4, 8, 8, requires_grad=True)
    scores = (x @ w) @ x.transpose(-2, -1) * 0.3  # (B, H, T, T)
    probs = softmax(scores)  # (B, H, T, T)
    out = F.layer_norm(probs @ v, 8)  # (B, H, T, D)
    return (out.tanh() * out).mean()


def test_a_wrong_vjp_is_named_with_its_number_shape_and_element(registered):
    with ta.record() as graph:
        loss = attention_like_loss(lambda s: REGISTRY["bad_softmax"](s, dim=-1))
    label = next(c.label for c in graph.calls if c.op.name == "bad_softmax")
    with pytest.raises(ta.GradcheckError) as info:
        ta.gradcheck_graph(loss)
    message = str(info.value)
    n_ops = len(graph.calls)
    assert f"{label} (2, 4, 8, 8); dim=-1: rel err" in message
    assert "at input 0 [" in message  # the element where the VJP is worst
    assert f"; {n_ops - 1} other ops ok" in message
    assert "test_gradcheck_graph.py" in message  # the line that made it
    report = ta.check_graph(loss)
    assert [c.label for c in report.failures] == [label]
    assert report.failures[0].rel_err > 1e-2


def test_the_same_graph_with_the_real_softmax_passes():
    with ta.record() as graph:
        loss = attention_like_loss(lambda s: F.softmax(s, dim=-1))
    report = ta.gradcheck_graph(loss)
    assert report.ok and len(report.checks) == len(graph.calls)
    assert all(c.rel_err < 1e-4 for c in report.checks)
    assert str(report) == f"{len(graph.calls)} ops ok"


def test_a_vjp_of_the_wrong_shape_is_named(registered):
    x = ta.randn(3, 4, dtype=ta.float64, requires_grad=True)
    with ta.record():
        loss = (REGISTRY["bad_shape"](x) * x).sum()
    report = ta.check_graph(loss)
    (bad,) = report.failures
    assert bad.label.startswith("bad_shape#")
    assert "the VJP returned a gradient of shape (4,) for input 0 of shape (3, 4)" in bad.where


def test_a_whole_transformer_with_dropout_checks_after_backward():
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(vocab_size=7, d_model=8, n_heads=2, n_layers=1, max_len=5,
                                  dropout=0.2)
    ids = ta.tensor(np.array([[1, 2, 3, 4, 5], [6, 5, 4, 3, 2]]))
    with ta.record() as graph:
        logits = model(ids)  # (2, 5, 7)
        loss = F.cross_entropy(logits.reshape(-1, 7), ids.reshape(-1))
    loss.backward()  # frees the VJPs' saved arrays; record() kept the inputs
    report = ta.gradcheck_graph(loss)
    names = {c.label.split("#")[0] for c in report.checks}
    assert {"embedding", "layer_norm", "dropout", "scaled_masked_softmax", "cross_entropy"} <= \
        names
    assert len(report.checks) == len(graph.calls) and not report.unrecorded


def test_recording_calls_tells_which_line_made_each_op():
    x = ta.randn(2, 3, requires_grad=True)
    with ta.record() as graph:
        y = (x * 2).softmax(dim=0)
    assert [c.label for c in graph] == ["mul#1", "softmax#2"]
    assert all("y = (x * 2).softmax(dim=0)" in c.source for c in graph)
    assert graph.calls[1].describe() == "(2, 3); dim=0"
    del y


def test_ops_off_the_graph_are_numbered_but_not_recorded():
    x = ta.randn(2, 3, requires_grad=True)
    c = ta.randn(2, 3)
    with ta.record() as graph:
        d = c * 3  # no input needs grad: no node
        y = (x + d).sum()
    assert [call.label for call in graph] == ["add#2", "sum#3"]
    assert ta.gradcheck_graph(y)


def test_a_loss_built_outside_record_says_what_to_do():
    x = ta.randn(3, requires_grad=True)
    loss = (x * x).sum()
    with pytest.raises(ta.GraphError, match=r"with tinyattn.record\(\):"):
        ta.gradcheck_graph(loss)


def test_ops_built_outside_record_are_listed_as_not_recorded():
    x = ta.randn(3, requires_grad=True)
    h = x.exp()  # before the block
    with ta.record():
        loss = (h * x).sum()
    report = ta.gradcheck_graph(loss)
    assert report.unrecorded == ["exp"]
    assert "1 not recorded (exp)" in str(report)


def test_gradcheck_graph_needs_a_tensor_with_a_graph():
    with pytest.raises(TypeError, match="expected the loss tensor"):
        ta.gradcheck_graph(1.0)
    with pytest.raises(ta.GraphError, match="no graph"):
        ta.gradcheck_graph(ta.randn(3, requires_grad=True))
    with ta.no_grad(), ta.record():
        y = ta.randn(3, requires_grad=True) * 2
    with pytest.raises(ta.GraphError, match="no graph"):
        ta.gradcheck_graph(y)


def test_the_check_does_not_touch_the_recorded_tensors():
    x = ta.randn(4, 5, requires_grad=True)
    before = x.numpy().copy()
    with ta.record():
        loss = F.softmax(x, dim=-1).log().sum()
    ta.gradcheck_graph(loss)
    np.testing.assert_array_equal(x.numpy(), before)
    assert x.dtype == np.float32
