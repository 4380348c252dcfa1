"""nn.TransformerEncoderLayer and nn.TransformerEncoder against torch's: the same weights (a
torch state dict loads as is), outputs and input gradients, post- and pre-LN, masks."""

import itertools

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn

torch = pytest.importorskip("torch")

E, H, S, N = 8, 2, 5, 3


def _same_layer(**kwargs):
    theirs = torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=16, **kwargs).double().eval()
    ours = nn.TransformerEncoderLayer(E, H, dim_feedforward=16, dtype=ta.float64,
                                      **kwargs).eval()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _run(lib, module, x, **kwargs):
    xx = lib.tensor(x, requires_grad=True)
    kw = {k: None if v is None else lib.tensor(v) for k, v in kwargs.items() if k != "is_causal"}
    if "is_causal" in kwargs:
        kw["is_causal"] = kwargs["is_causal"]
    y = module(xx, **kw)
    (y * lib.tensor(x)).sum().backward()
    return y.detach().numpy(), xx.grad.numpy()


@pytest.mark.parametrize("batch_first,norm_first,activation,bias", list(itertools.product(
    [False, True], [False, True], ["relu", "gelu"], [True, False])))
def test_encoder_layer_matches_torch(batch_first, norm_first, activation, bias):
    ours, theirs = _same_layer(batch_first=batch_first, norm_first=norm_first,
                               activation=activation, bias=bias)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, S, E) if batch_first else (S, N, E))
    padding = rng.random((N, S)) > 0.7
    padding[:, 0] = False
    causal = np.triu(np.ones((S, S), bool), 1)  # torch's bool masks: True = may not attend
    for kwargs in [{}, {"src_key_padding_mask": padding}, {"src_mask": causal, "is_causal": True},
                   {"src_mask": rng.standard_normal((S, S))}]:
        for got, want in zip(_run(ta, ours, x, **kwargs), _run(torch, theirs, x, **kwargs),
                             strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


def test_encoder_stacks_copies_of_the_layer_as_torch():
    layer, tlayer = _same_layer(batch_first=True)
    ours = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(E, dtype=ta.float64)).eval()
    theirs = torch.nn.TransformerEncoder(tlayer, 3, norm=torch.nn.LayerNorm(E).double(),
                                         enable_nested_tensor=False).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    state = {k: v.detach().numpy() * (1 + 0.1 * i)  # every layer its own weights
             for i, (k, v) in enumerate(theirs.state_dict().items())}
    ours.load_state_dict(state)
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight
    x = np.random.default_rng(1).standard_normal((N, S, E))
    for got, want in zip(_run(ta, ours, x), _run(torch, theirs, x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    with pytest.raises(ValueError, match="activation must be 'relu', 'gelu' or a callable"):
        nn.TransformerEncoderLayer(E, H, activation="swish")
    with pytest.raises(ta.ShapeError, match="num_layers must be a whole number >= 1"):
        nn.TransformerEncoder(layer, 0)


def test_encoder_layer_trains_with_dropout_in_train_mode():
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=16, dropout=0.5, batch_first=True)
    x = ta.randn(N, S, E)
    ta.manual_seed(0)
    a = layer(x)
    ta.manual_seed(1)
    assert not np.allclose(a.detach().numpy(), layer(x).detach().numpy())  # dropout is on
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())
    layer.train()
    layer(x).sum().backward()
    assert all(p.grad is not None for p in layer.parameters())
