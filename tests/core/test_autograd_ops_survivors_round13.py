"""Tests for the seed-5 mutation survivors of autograd and ops: a node hook that is a callable
object named by its class when it returns the wrong number of gradients, a node post hook
seeing a broadcast input's gradient at that input's shape (as torch's), an inference tensor's
version count starting at 0 and counting its in-place changes, and quantile's dim error naming
quantile."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import DimError, GraphError

torch = pytest.importorskip("torch")


class Keep1:
    """A node hook that is an object, not a function: it has no __name__."""

    def __call__(self, grad_inputs, grad_outputs):
        return (grad_inputs[0],)


def test_a_callable_objects_wrong_number_of_gradients_names_its_class():
    x, b = ta.ones(2, 3, requires_grad=True), ta.ones(3, requires_grad=True)
    y = x + b
    y.grad_fn.register_hook(Keep1())
    with pytest.raises(GraphError, match=r"hook 'Keep1' has returned an incorrect number of "
                                         r"values \(got 1, but expected 2\)"):
        y.sum().backward()


def test_a_post_hook_sees_a_broadcast_inputs_gradient_at_its_shape():
    seen = []
    for lib in (ta, torch):
        x, b = lib.ones(2, 3, requires_grad=True), lib.ones(3, requires_grad=True)
        y = x * 2.0 + b
        y.grad_fn.register_hook(lambda gi, go, lib=lib: seen.append(
            [tuple(g.shape) for g in gi] + [g.sum().item() for g in gi]))
        (y * ta.tensor([1.0, 2.0, 3.0]) if lib is ta else y * torch.tensor([1.0, 2.0, 3.0])) \
            .sum().backward()
    assert seen[0] == seen[1] == [(2, 3), (3,), 12.0, 12.0]


def test_an_inference_tensor_counts_its_changes_from_0():
    x = ta.ones(2)
    with ta.inference_mode():
        y = x * 2.0
        z = ta.zeros(3)
    assert y.is_inference() and y._version == 0 and z._version == 0
    y.add_(1)  # (tinyattn keeps an inference tensor's count: see inference_mode)
    assert y._version == 1 and y.tolist() == [3.0, 3.0]


@pytest.mark.parametrize("dim", [2, -3, 5])
def test_quantiles_dim_error_names_it(dim):
    x = ta.tensor(np.arange(6.0).reshape(2, 3))
    with pytest.raises(DimError, match="quantile"):
        x.quantile(0.5, dim=dim)
    with pytest.raises(IndexError):
        torch.arange(6.0).reshape(2, 3).quantile(0.5, dim=dim)
