"""Tests for the seed-6 mutation survivors of autograd (2026-11-29): grad() hands an input's
gradient back in the input's dtype, even where that gradient is the grad_output given for the
input itself (against torch); backward(create_graph=True)'s errors name backward, not grad;
grad(create_graph=True, is_grads_batched=True) is refused, naming what to do instead."""

import pytest

import tinyattn as ta
from tinyattn.errors import GraphError, ShapeError

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("create_graph", [False, True])
def test_an_inputs_own_gradient_comes_back_in_its_dtype(create_graph):
    for lib in (ta, torch):
        x = lib.ones(3, requires_grad=True)
        (g,) = lib.autograd.grad(x, x, grad_outputs=lib.full((3,), 2.0, dtype=lib.float64),
                                 create_graph=create_graph)
        assert g.dtype == lib.float32 and g.tolist() == [2.0, 2.0, 2.0], lib.__name__


def test_backward_with_create_graph_and_inputs_names_backward_in_its_errors():
    x = ta.ones(3, requires_grad=True)
    with pytest.raises(GraphError, match=r"^backward: the output has shape \(3,\); backward\(\)"):
        (x * 2).backward(create_graph=True, inputs=[x])
    z = ta.tensor(2.0, requires_grad=True)
    with pytest.raises(ShapeError, match=r"^backward: gradient has shape \(2,\) but the output "
                                         r"has shape \(\)"):
        (z * 3).backward(ta.ones(2), create_graph=True, inputs=[z])
    # grad() names its outputs by number
    with pytest.raises(ShapeError, match=r"^grad: grad_outputs\[0\] has shape \(2,\) but "
                                         r"output 0 has shape \(\)"):
        ta.autograd.grad(z * 3, z, grad_outputs=ta.ones(2), create_graph=True)


def test_batched_grad_outputs_with_create_graph_are_refused():
    x = ta.ones(3, requires_grad=True)
    with pytest.raises(GraphError, match="is_grads_batched=True with create_graph=True is not "
                                         "supported; loop over the batch"):
        ta.autograd.grad((x * x).sum(), x, grad_outputs=ta.ones(2), create_graph=True,
                         is_grads_batched=True)


def test_without_the_graph_vjps_create_graph_is_refused_naming_the_call(monkeypatch):
    # (tinyattn.higher_order installs the create_graph walk when tinyattn is imported; were it
    # missing, each call names itself in the refusal)
    monkeypatch.setattr(ta.autograd, "_create_graph_pass", None)
    x = ta.ones(3, requires_grad=True)
    with pytest.raises(GraphError, match=r"^grad: create_graph=True \(gradients of gradients\) "
                                         "is not supported"):
        ta.autograd.grad((x * x).sum(), x, create_graph=True)
    for inputs in (None, [x]):
        with pytest.raises(GraphError, match=r"^backward: create_graph=True"):
            (x * x).sum().backward(create_graph=True, inputs=inputs)
