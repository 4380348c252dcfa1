"""nn behaviour a second mutation sample (2026-11-28, 60 mutants of tinyattn.nn) showed no test
pinned: a module's registry replaced by a new dict (torch code sets `m._modules = ...`), a
backward pre-hook's None for one of several outputs, the module named when an RNN is handed
no tensor, and the shapes TransformerBlock's parts report with their defaults."""

from collections import OrderedDict

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn
from tinyattn.nn.transformer import MLP, CausalSelfAttention, TransformerBlock


def test_a_new_modules_dict_replaces_the_children_and_their_attributes():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

    net = Net()
    net._modules = OrderedDict(head=nn.Tanh())
    assert list(dict(net.named_children())) == ["head"]
    assert isinstance(net.head, nn.Tanh)
    with pytest.raises(AttributeError):
        net.fc  # noqa: B018 - gone with the old dict, as in torch
    assert [n for n, _ in net.named_parameters()] == []


def test_a_backward_pre_hook_none_for_one_output_sends_it_no_gradient_as_torchs():
    torch = pytest.importorskip("torch")

    def run(lib):
        class Two(lib.nn.Module):
            def forward(self, x):
                return x * 2, x * 3

        m = Two()
        m.register_full_backward_pre_hook(lambda mod, go: (go[0], None))
        x = lib.tensor([1.0, -2.0, 4.0], requires_grad=True)
        a, b = m(x)
        (a.sum() + (b * b).sum()).backward()
        return x.grad.numpy()

    np.testing.assert_allclose(run(ta), run(torch))
    np.testing.assert_allclose(run(ta), [2.0, 2.0, 2.0])  # the second output's part dropped


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN, nn.LSTMCell, nn.GRUCell, nn.RNNCell])
def test_a_recurrent_module_handed_no_tensor_names_itself(cls):
    with pytest.raises(TypeError, match=f"^{cls.__name__}: input must be a Tensor, got list"):
        cls(3, 4)([[1.0, 2.0, 3.0]])


@pytest.mark.parametrize("cls, args", [(CausalSelfAttention, (32, 4)), (MLP, (32,)),
                                       (TransformerBlock, (32, 4))])
def test_the_parts_report_the_shapes_their_defaults_make(cls, args):
    """tensor_shapes with the constructor's defaults: exactly the module's parameters."""
    params, buffers = cls.tensor_shapes(*args)
    made = cls(*args)
    assert params == {n: tuple(p.shape) for n, p in made.named_parameters()}
    assert buffers == {n: tuple(b.shape) for n, b in made.named_buffers()}


def test_named_parameters_with_a_prefix_lists_a_shared_weight_once_as_torch():
    torch = pytest.importorskip("torch")

    def names(lib):
        m = lib.nn.Module()
        m.a, m.b = lib.nn.Linear(2, 2), lib.nn.Linear(2, 2)
        m.b.weight = m.a.weight
        return ([n for n, _ in m.named_parameters(prefix="net")],
                [n for n, _ in m.named_parameters(prefix="net", remove_duplicate=False)])

    assert names(ta) == names(torch)
    assert names(ta)[0] == ["net.a.weight", "net.a.bias", "net.b.bias"]
