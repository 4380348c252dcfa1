"""Tests for the seed-4 mutation survivors of higher_order (2026-11-29), against torch: the
second derivative through a 1-D log_softmax (a sum over its one dim, not the gradient as it
is), copysign's gradient with a graph at x = 0 (0, not NaN), embedding's gradient with a
graph under scale_grad_by_freq, and the refusal of an op without a graph VJP naming
create_graph=True as the user wrote it."""

import types

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.errors import GraphError
from tinyattn.higher_order import GRAPH_VJPS
from tinyattn.ops import REGISTRY

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _both(fn):
    return fn(ta, F), fn(torch, TF)


def test_the_second_derivative_through_a_1d_log_softmax():
    def run(lib, fn):
        x = lib.tensor([0.3, -1.0, 2.0], dtype=lib.float64, requires_grad=True)
        w = lib.tensor([1.0, 2.0, -0.5], dtype=lib.float64)
        (g,) = lib.autograd.grad((fn.log_softmax(x, 0) * w).sum(), x, create_graph=True)
        (h,) = lib.autograd.grad((g * g).sum(), x)
        return np.array(g.tolist() + h.tolist())

    ours, theirs = _both(run)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)


def test_copysigns_gradient_with_a_graph_is_zero_at_zero():
    def run(lib, _):
        x = lib.tensor([0.0, 1.5, -2.0, 0.0], dtype=lib.float64, requires_grad=True)
        y = lib.tensor([-1.0, -1.0, 1.0, 1.0], dtype=lib.float64)
        (g,) = lib.autograd.grad(lib.copysign(x, y).sum(), x, create_graph=True)
        return g.tolist()

    ours, theirs = _both(run)
    assert ours == theirs == [0.0, -1.0, -1.0, 0.0]


def test_embeddings_gradient_with_a_graph_scaled_by_frequency():
    def run(lib, fn):
        w = lib.tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
        ids = lib.tensor([0, 2, 2, 3, 2])
        (g,) = lib.autograd.grad((fn.embedding(ids, w, scale_grad_by_freq=True) ** 2).sum(), w,
                                 create_graph=True)
        (h,) = lib.autograd.grad((g * g).sum(), w)
        return np.array(g.tolist() + h.tolist())

    ours, theirs = _both(run)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_an_op_without_a_graph_vjp_is_refused_naming_create_graph_true():
    # (every registered op has a graph VJP today: the refusal is for ops defined later, as
    # a user's own op)
    from tinyattn.higher_order.walk import _uncovered

    assert set(REGISTRY) <= set(GRAPH_VJPS)
    error = _uncovered(types.SimpleNamespace(name="my_op"))
    assert isinstance(error, GraphError)
    assert str(error).startswith("create_graph: my_op has no differentiable VJP (gradients of "
                                 "gradients); create_graph=True supports the ops listed in "
                                 "tinyattn/higher_order/: ")


def test_an_op_called_without_its_mask_input_says_to_pass_none():
    from tinyattn.ops.softmax import scaled_masked_softmax

    x = ta.tensor([[0.1, 0.5, -0.3]], dtype=ta.float64, requires_grad=True)
    with pytest.raises(TypeError, match=r"^scaled_masked_softmax: got 1 inputs, but its input 1 "
                                        r"\(one that gets no gradient: a mask, indices\) must "
                                        r"be given too, as None where there is none$"):
        scaled_masked_softmax(x, scale=2.0)
    # given as None: the op, whose graph VJP scales as softmax(2 x)'s (second derivative too)
    w = ta.tensor([[1.0, 2.0, 3.0]], dtype=ta.float64)
    results = []
    for fn in (lambda t: scaled_masked_softmax(t, None, scale=2.0),
               lambda t: ta.softmax(t * 2.0, -1)):
        t = ta.tensor([[0.1, 0.5, -0.3]], dtype=ta.float64, requires_grad=True)
        (g,) = ta.autograd.grad((fn(t) * w).sum(), t, create_graph=True)
        (h,) = ta.autograd.grad((g * g).sum(), t)
        results.append(np.concatenate([g.numpy(), h.numpy()]))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)
