"""Settings torch's modules and functions refuse, refused here too with a message naming them:
RNN, LSTM and GRU with no input features, Bilinear with no in1 features (or a negative or
non-int size), Hardtanh with max_val not above min_val, TripletMarginLoss and
F.triplet_margin_loss with a margin not above 0 (torch.triplet_margin_loss, the top-level
op, takes any margin: as torch's). What torch takes stays taken."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

# (what, the call on a library, the message's start in tinyattn)
REFUSED = [
    ("RNN(0, 3)", lambda lib: lib.nn.RNN(0, 3), "input_size must be greater than zero"),
    ("LSTM(0, 3)", lambda lib: lib.nn.LSTM(0, 3), "input_size must be greater than zero"),
    ("GRU(0, 3)", lambda lib: lib.nn.GRU(0, 3), "input_size must be greater than zero"),
    ("Bilinear(0, 2, 3)", lambda lib: lib.nn.Bilinear(0, 2, 3),
     "Bilinear: in1_features must be >= 1, got 0"),
    ("Bilinear(-1, 2, 3)", lambda lib: lib.nn.Bilinear(-1, 2, 3),
     "Bilinear: in1_features must be >= 1, got -1"),
    ("Bilinear(2, -1, 3)", lambda lib: lib.nn.Bilinear(2, -1, 3),
     "Bilinear: in2_features must be >= 0, got -1"),
    ("Hardtanh(1, -1)", lambda lib: lib.nn.Hardtanh(1.0, -1.0),
     "Hardtanh: max_val (-1.0) must be greater than min_val (1.0)"),
    ("Hardtanh(1, 1)", lambda lib: lib.nn.Hardtanh(1.0, 1.0),
     "Hardtanh: max_val (1.0) must be greater than min_val (1.0)"),
    ("TripletMarginLoss(margin=0)", lambda lib: lib.nn.TripletMarginLoss(margin=0.0),
     "TripletMarginLoss: margin must be greater than 0, got 0.0"),
    ("TripletMarginLoss(margin=-1)", lambda lib: lib.nn.TripletMarginLoss(margin=-1.0),
     "TripletMarginLoss: margin must be greater than 0, got -1.0"),
    ("F.triplet_margin_loss(margin=-1)",
     lambda lib: lib.nn.functional.triplet_margin_loss(*[lib.ones(2, 3)] * 3, margin=-1.0),
     "triplet_margin_loss: margin must be greater than 0, got -1.0"),
]


@pytest.mark.parametrize(("what", "call", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_as_torch_refuses(what, call, message):
    with pytest.raises(ValueError) as info:
        call(ta)
    assert str(info.value).startswith(message), str(info.value)
    torch = pytest.importorskip("torch")
    with pytest.raises((ValueError, AssertionError, RuntimeError)):
        call(torch)


@pytest.mark.parametrize("size", [2.0, True, None])
def test_bilinear_sizes_must_be_ints(size):
    with pytest.raises(TypeError, match="Bilinear: out_features must be an int"):
        nn.Bilinear(2, 2, size)


def test_what_torch_takes_stays_taken():
    torch = pytest.importorskip("torch")
    # cells with no input features, Bilinear with no in2 or out features, F.hardtanh with
    # equal bounds, the top-level triplet_margin_loss with a negative margin
    ta.manual_seed(0)
    assert nn.RNNCell(0, 3).weight_ih.shape == torch.nn.RNNCell(0, 3).weight_ih.shape
    layer = nn.Bilinear(1, 0, 0)
    assert tuple(layer.weight.shape) == tuple(torch.nn.Bilinear(1, 0, 0).weight.shape)
    x = np.linspace(-2, 2, 6, dtype=np.float32)
    np.testing.assert_array_equal(F.hardtanh(ta.tensor(x), 1.0, 1.0).numpy(),
                                  torch.nn.functional.hardtanh(torch.tensor(x), 1.0, 1.0).numpy())
    a, p, n = (np.random.default_rng(i).standard_normal((4, 3)).astype(np.float32)
               for i in range(3))
    got = ta.triplet_margin_loss(ta.tensor(a), ta.tensor(p), ta.tensor(n), margin=-0.5)
    want = torch.triplet_margin_loss(torch.tensor(a), torch.tensor(p), torch.tensor(n),
                                     margin=-0.5)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    got = nn.TripletMarginLoss(margin=0.5)(ta.tensor(a), ta.tensor(p), ta.tensor(n))
    want = torch.nn.TripletMarginLoss(margin=0.5)(torch.tensor(a), torch.tensor(p),
                                                  torch.tensor(n))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
