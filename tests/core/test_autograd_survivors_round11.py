"""Autograd behaviours a fourth mutation draw (seed 3) of tinyattn/autograd.py found unobserved:
backward(inputs=...) adding to a .grad it cannot write into, the graph kept by default after
backward(create_graph=True) and freed when retain_graph=False says so (against torch), and
grad()'s is_grads_batched refusing a missing or 0-d grad_output and filling unused inputs with
zeros."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import GraphError, ShapeError

pytestmark = pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")


@pytest.mark.parametrize("with_inputs", [False, True])
def test_backward_adds_to_a_grad_it_cannot_write_into_out_of_place(with_inputs):
    """A .grad that is a broadcast view (read-only) gets the sum as a new array; the view's
    source stays as it was."""
    x = ta.ones(3, requires_grad=True)
    source = ta.tensor([1.0])
    x.grad = source.expand(3)
    assert not x.grad._data.flags.writeable
    (x * 2.0).sum().backward(**({"inputs": [x]} if with_inputs else {}))
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])
    assert x.grad.backend is x.backend
    np.testing.assert_array_equal(source.numpy(), [1.0])
    # (torch refuses here: it adds into the expanded .grad in place, "more than one element
    # of the written-to tensor refers to a single memory location")


def test_backward_with_create_graph_keeps_the_graph_unless_told():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(create_graph=True)
    y.backward(create_graph=True)  # retain_graph defaults to create_graph (torch)
    np.testing.assert_array_equal(x.grad.detach().numpy(), [4.0, 8.0])
    z = (x * x).sum()
    x.grad = None
    z.backward(create_graph=True, retain_graph=False)
    with pytest.raises(GraphError):
        z.backward()
    torch = pytest.importorskip("torch")
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    ty = (tx * tx).sum()
    ty.backward(create_graph=True)
    ty.backward(create_graph=True)
    np.testing.assert_array_equal(tx.grad.detach().numpy(), [4.0, 8.0])
    tz = (tx * tx).sum()
    tz.backward(create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError):
        tz.backward()


@pytest.mark.parametrize("grad_output", [None, "0-d"])
def test_batched_grad_needs_a_leading_dim_on_every_grad_output(grad_output):
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    g = ta.tensor(1.0) if grad_output == "0-d" else None
    with pytest.raises(ShapeError, match="is_grads_batched"):
        ta.autograd.grad(y, x, grad_outputs=g if g is None else [g], is_grads_batched=True)


def test_batched_grad_fills_an_unused_input_with_zeros_when_asked():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    unused = ta.tensor([[5.0, 6.0, 7.0]], requires_grad=True)
    y = x * 3.0
    eye = ta.tensor(np.eye(2))
    gx, gu = ta.autograd.grad(y, [x, unused], grad_outputs=eye, is_grads_batched=True,
                              allow_unused=True, materialize_grads=True)
    np.testing.assert_array_equal(gx.numpy(), 3.0 * np.eye(2))
    assert gu.shape == (2, 1, 3) and gu.dtype == unused.dtype
    np.testing.assert_array_equal(gu.numpy(), np.zeros((2, 1, 3)))
    gx, gu = ta.autograd.grad(y, [x, unused], grad_outputs=eye, is_grads_batched=True,
                              allow_unused=True)
    assert gu is None
    # (torch's materialize_grads gives the zeros without the batch dim, (1, 3): every result
    # here has it, as the docstring of grad says)
