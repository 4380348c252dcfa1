"""Empty batches and tensors with no elements, as torch takes them: every conv and transposed
conv, flatten, and in-place writes into a tensor with no elements (whose dims NumPy gives
stride 0, which once read as an expand's shared memory)."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as tnn

torch = pytest.importorskip("torch")
nn = torch.nn

MODULES = {
    "Conv1d": (lambda m: m.Conv1d(3, 4, 3), (0, 3, 8)),
    "Conv2d": (lambda m: m.Conv2d(3, 4, 3, padding=1), (0, 3, 8, 8)),
    "Conv2d groups": (lambda m: m.Conv2d(4, 4, 3, groups=2), (0, 4, 8, 8)),
    "Conv3d": (lambda m: m.Conv3d(3, 4, 3), (0, 3, 5, 5, 5)),
    "ConvTranspose1d": (lambda m: m.ConvTranspose1d(3, 4, 3), (0, 3, 8)),
    "ConvTranspose2d": (lambda m: m.ConvTranspose2d(3, 4, 3, stride=2), (0, 3, 8, 8)),
    "ConvTranspose2d groups": (lambda m: m.ConvTranspose2d(4, 6, 3, groups=2), (0, 4, 5, 5)),
    "ConvTranspose3d": (lambda m: m.ConvTranspose3d(3, 4, 3), (0, 3, 4, 4, 4)),
    "Flatten": (lambda m: m.Flatten(), (0, 3, 4, 4)),
    "Flatten 0-size inner": (lambda m: m.Flatten(), (2, 0, 4)),
    "MaxPool2d": (lambda m: m.MaxPool2d(2), (0, 3, 8, 8)),
    "AdaptiveAvgPool2d": (lambda m: m.AdaptiveAvgPool2d(3), (0, 3, 8, 8)),
    "Unfold": (lambda m: m.Unfold(2), (0, 3, 4, 4)),
}


def _run(lib, tensor, name):
    make, shape = MODULES[name]
    module = make(lib)
    x = tensor(np.zeros(shape, dtype=np.float32))
    x.requires_grad_(True)
    y = module(x)
    y.sum().backward()
    return tuple(y.shape), tuple(x.grad.shape), tuple(module.weight.grad.shape) \
        if getattr(module, "weight", None) is not None else None


@pytest.mark.parametrize("name", list(MODULES))
def test_a_module_on_an_empty_batch_gives_torch_shapes_and_gradients(name):
    assert _run(tnn, ta.tensor, name) == _run(nn, torch.tensor, name)


@pytest.mark.parametrize("shape, start, end", [((0, 3, 4), 1, -1), ((0, 3, 4), 0, 1),
                                               ((2, 0, 4), 1, 2), ((3, 0), 0, -1)])
def test_flatten_of_a_tensor_with_no_elements(shape, start, end):
    got = ta.zeros(*shape).flatten(start, end)
    assert tuple(got.shape) == tuple(torch.zeros(shape).flatten(start, end).shape)


def test_conv_on_an_empty_batch_weight_gradient_is_zeros():
    m = tnn.Conv2d(3, 4, 3)
    m(ta.zeros(0, 3, 6, 6)).sum().backward()
    assert np.array_equal(m.weight.grad.numpy(), np.zeros((4, 3, 3, 3), np.float32))
    assert np.array_equal(m.bias.grad.numpy(), np.zeros(4, np.float32))


def test_in_place_writes_into_a_tensor_with_no_elements():
    a = ta.zeros(3, 0)
    a.copy_(ta.ones(3, 0))
    a.add_(1)
    assert tuple(a.shape) == (3, 0)
    linear = tnn.Linear(0, 3)
    linear.load_state_dict(tnn.Linear(0, 3).state_dict())
    w = ta.empty(0, 3)
    tnn.init.eye_(w)
    assert tuple(w.shape) == (0, 3)


def test_an_expand_view_is_still_refused_for_in_place_writes():
    x = ta.zeros(4, 1).expand(4, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        x.add_(1)
