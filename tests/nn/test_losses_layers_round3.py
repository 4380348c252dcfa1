"""Round 3: losses and layers matched with torch (values and gradients) on the edge cases users
hit: empty batches, masks, train vs eval."""

from contextlib import nullcontext

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

torch = pytest.importorskip("torch")

DTYPES = [(np.float32, torch.float32, 1e-5), (np.float64, torch.float64, 1e-10)]


def _grad(t):
    return t.grad.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.grad.numpy())


@pytest.mark.parametrize("np_dtype,torch_dtype,tol", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_empty_batch_as_torch(np_dtype, torch_dtype, tol, affine):
    # torch gives an empty output (and zero parameter gradients) for a batch of 0 samples
    ref = torch.nn.GroupNorm(3, 6, affine=affine, dtype=torch_dtype)
    mod = nn.GroupNorm(3, 6, affine=affine, dtype=np_dtype)
    x = np.zeros((0, 6, 4), np_dtype)
    a, b = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = mod(a), ref(b)
    assert tuple(ya.shape) == tuple(yb.shape) == (0, 6, 4)
    ya.sum().backward()
    yb.sum().backward()
    assert tuple(a.grad.shape) == (0, 6, 4)
    if affine:
        np.testing.assert_allclose(_grad(mod.weight), _grad(ref.weight), atol=tol)
        np.testing.assert_allclose(_grad(mod.bias), _grad(ref.bias), atol=tol)
    # the functional form too
    y = F.group_norm(ta.tensor(x), 2)
    assert tuple(y.shape) == (0, 6, 4)


def test_functional_takes_torchs_input_keyword():
    # torch's first argument is `input` in each of these; a keyword call must work here too
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4))
    w = rng.standard_normal((2, 4))
    t = np.array([0, 1, 3])
    loss = F.cross_entropy(input=ta.tensor(x), target=ta.tensor(t))
    ref = torch.nn.functional.cross_entropy(input=torch.tensor(x), target=torch.tensor(t))
    np.testing.assert_allclose(loss.numpy(), ref.numpy(), rtol=1e-12)
    y = F.linear(input=ta.tensor(x), weight=ta.tensor(w))
    np.testing.assert_allclose(y.numpy(), x @ w.T, rtol=1e-12)
    y = F.layer_norm(input=ta.tensor(x), normalized_shape=(4,))
    ref = torch.nn.functional.layer_norm(input=torch.tensor(x), normalized_shape=(4,))
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)
    y = F.dropout(input=ta.tensor(x), p=0.5, training=False)
    np.testing.assert_array_equal(y.numpy(), x)


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("in_shape,target_shape", [((3,), (2, 3)), ((), (3,)), ((4, 3), (1, 3))])
def test_kl_div_batchmean_divides_by_the_inputs_batch_as_torch(in_shape, target_shape,
                                                                 log_target):
    # torch's 'batchmean' is the sum over input.size(0) (no division for a 0-d input), even
    # where a broadcast target makes the loss larger than the input
    rng = np.random.default_rng(1)
    x = np.asarray(rng.standard_normal(in_shape))
    t = np.asarray(rng.uniform(0.1, 1.0, target_shape))
    if log_target:
        t = np.log(t)
    a, b = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    with pytest.warns(UserWarning) if in_shape != target_shape else nullcontext():
        ya = F.kl_div(a, ta.tensor(t), reduction="batchmean", log_target=log_target)
    yb = torch.nn.functional.kl_div(b, torch.tensor(t), reduction="batchmean",
                                    log_target=log_target)
    np.testing.assert_allclose(ya.numpy(), yb.detach().numpy(), rtol=1e-12)
    ya.backward()
    yb.backward()
    np.testing.assert_allclose(_grad(a), _grad(b), rtol=1e-12)
