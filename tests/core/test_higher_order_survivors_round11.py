"""Gradients of gradients (create_graph=True) a second mutation draw (seed 2) of
tinyattn/higher_order found unobserved, against torch where it is installed: logit's gradient
NaN outside [0, 1], cat's gradient for an empty input in the inputs' dtype, and a tensor hook
returning a gradient of another shape refused."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import ShapeError

pytestmark = pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")


def test_logit_gradient_with_a_graph_is_nan_outside_zero_one():
    values = [-0.5, 0.25, 0.5, 1.5]
    x = ta.tensor(values, dtype=ta.float64, requires_grad=True)
    (g,) = ta.autograd.grad(x.logit().sum(), x, create_graph=True)
    got = g.detach().numpy()
    assert np.isnan(got[[0, 3]]).all() and np.isfinite(got[[1, 2]]).all()
    (gg,) = ta.autograd.grad(g.sum(), x)
    torch = pytest.importorskip("torch")
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    (tg,) = torch.autograd.grad(tx.logit().sum(), tx, create_graph=True)
    np.testing.assert_allclose(got, tg.detach().numpy())
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(gg.numpy()[[1, 2]], tgg.numpy()[[1, 2]])


def test_cat_gives_an_empty_input_a_gradient_of_its_dtype():
    a = ta.tensor([1.0, 2.0], requires_grad=True)  # float32
    empty = ta.zeros(0, requires_grad=True)
    y = (ta.cat([a, empty]) ** 2).sum()
    ga, ge = ta.autograd.grad(y, [a, empty], create_graph=True)
    assert ge.shape == (0,) and ge.dtype == ta.float32 and ga.dtype == ta.float32
    np.testing.assert_array_equal(ga.detach().numpy(), [2.0, 4.0])


def test_a_hook_returning_another_shape_is_refused_with_a_graph():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    y.register_hook(lambda g: ta.ones(3))
    with pytest.raises(ShapeError, match="register_hook: a hook returned a gradient"):
        ta.autograd.grad((y * y).sum(), x, create_graph=True)
    z = x * 3.0
    z.register_hook(lambda g: g * 2.0)  # (the same shape: taken)
    (g,) = ta.autograd.grad((z * z).sum(), x, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), [36.0, 72.0])
