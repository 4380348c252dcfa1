"""nn.RNN, LSTM, GRU and their cells against torch's: outputs, final states and every gradient
(parameters, input, initial state) with torch's weights copied over; shapes, state-dict keys,
repr and refusals; gradcheck; a char-RNN whose loss falls."""

import itertools
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

TOL = {np.float32: 1e-5, np.float64: 1e-10}
I, H, L, N = 3, 4, 5, 2


def _torch():
    return pytest.importorskip("torch")


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _pair(name, args, kw, dtype):
    torch = _torch()
    theirs = getattr(torch.nn, name)(*args, **kw).to({np.float32: torch.float32,
                                                      np.float64: torch.float64}[dtype])
    ours = getattr(nn, name)(*args, dtype=dtype, **kw)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _compare(name, args, kw, x, hx, dtype=np.float64):
    """Run both on x (and hx: an array, a pair of arrays or None), a loss of every output
    weighted at random, backward; every value and gradient must agree."""
    torch = _torch()
    ours, theirs = _pair(name, args, kw, dtype)
    tol = TOL[dtype]
    arrays = [x] + ([] if hx is None else _flat(hx))
    mine = [ta.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    yours = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]

    def call(module, ins):
        if hx is None:
            return _flat(module(ins[0]))
        return _flat(module(ins[0], tuple(ins[1:]) if isinstance(hx, tuple) else ins[1]))

    out_a, out_b = call(ours, mine), call(theirs, yours)
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(tuple(o.shape)).astype(dtype) for o in out_b]
    assert len(out_a) == len(out_b)
    sum(F.tanh(o).mul(ta.tensor(w)).sum() for o, w in zip(out_a, weights, strict=True)).backward()
    sum((torch.tanh(o) * torch.tensor(w)).sum()
        for o, w in zip(out_b, weights, strict=True)).backward()
    for a, b in zip(out_a, out_b, strict=True):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=tol, atol=tol)
    for a, b in zip(mine, yours, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=tol)
    theirs_params = dict(theirs.named_parameters())
    assert [n for n, _ in ours.named_parameters()] == list(theirs_params)
    for n, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), theirs_params[n].grad.numpy(), rtol=tol,
                                   atol=tol, err_msg=n)


def _hx(name, k, n, kw):
    """An initial state for a layer: (k, n, H_out) (n None: unbatched), a pair for LSTM."""
    rng = np.random.default_rng(1)
    shape = (k,) if n is None else (k, n)
    out = kw.get("proj_size") or H
    h = rng.standard_normal(shape + (out,))
    return (h, rng.standard_normal(shape + (H,))) if name == "LSTM" else h


LAYER_KINDS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {}),
               ("LSTM", {"proj_size": 2}), ("GRU", {"bias": False})]


@pytest.mark.parametrize("kind", LAYER_KINDS, ids=lambda k: k[0] + "".join(map(str, k[1])))
@pytest.mark.parametrize("layers,bidirectional,batch_first,with_hx",
                         list(itertools.product([1, 2], [False, True], [False, True],
                                                [False, True])))
def test_layers_match_torch_in_values_and_gradients(kind, layers, bidirectional, batch_first,
                                                    with_hx):
    name, extra = kind
    kw = dict(extra, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    x = np.random.default_rng(2).standard_normal((N, L, I) if batch_first else (L, N, I))
    hx = _hx(name, layers * (2 if bidirectional else 1), N, kw) if with_hx else None
    _compare(name, (I, H), kw, x, hx)


@pytest.mark.parametrize("kind", LAYER_KINDS, ids=lambda k: k[0] + "".join(map(str, k[1])))
@pytest.mark.parametrize("with_hx", [False, True])
def test_layers_take_unbatched_input_as_torch(kind, with_hx):
    name, extra = kind
    kw = dict(extra, num_layers=2, bidirectional=True)
    x = np.random.default_rng(3).standard_normal((L, I))
    _compare(name, (I, H), kw, x, _hx(name, 4, None, kw) if with_hx else None)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_layers_match_torch_in_float32(name):
    kw = {"num_layers": 2, "bidirectional": True, "batch_first": True}
    x = np.random.default_rng(4).standard_normal((N, L, I))
    _compare(name, (I, H), kw, x, _hx(name, 4, N, kw), dtype=np.float32)


@pytest.mark.parametrize("name,extra", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                        ("LSTMCell", {}), ("GRUCell", {}),
                                        ("GRUCell", {"bias": False})])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_hx", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cells_match_torch(name, extra, batched, with_hx, dtype):
    rng = np.random.default_rng(5)
    lead = (N,) if batched else ()
    x = rng.standard_normal(lead + (I,))
    hx = None
    if with_hx:
        hx = rng.standard_normal(lead + (H,))
        hx = (hx, rng.standard_normal(lead + (H,))) if name == "LSTMCell" else hx
    _compare(name, (I, H), extra, x, hx, dtype)


def test_gradcheck_an_lstm_in_float64():
    model = nn.LSTM(2, 3, num_layers=2, bidirectional=True, dtype=ta.float64)
    rng = np.random.default_rng(6)
    x = ta.tensor(rng.standard_normal((3, 2, 2)), requires_grad=True)
    h = ta.tensor(rng.standard_normal((4, 2, 3)), requires_grad=True)
    c = ta.tensor(rng.standard_normal((4, 2, 3)), requires_grad=True)
    assert ta.autograd.gradcheck(lambda x, h, c: _flat(model(x, (h, c))), [x, h, c])
    cell = nn.GRUCell(2, 3, dtype=ta.float64)
    assert ta.gradcheck(lambda x, h: cell(x, h), [x[0], h[0]])


# ---- torch-free: shapes, names, repr, refusals ---------------------------------------------------


def test_shapes_and_state_dict_keys_are_torchs():
    lstm = nn.LSTM(10, 20, num_layers=2, batch_first=True, bidirectional=True, proj_size=5)
    keys = []
    for layer in range(2):
        for sfx in ("", "_reverse"):
            keys += [f"{n}_l{layer}{sfx}" for n in ("weight_ih", "weight_hh", "bias_ih",
                                                    "bias_hh", "weight_hr")]
    assert list(lstm.state_dict()) == keys
    assert tuple(lstm.weight_ih_l0.shape) == (80, 10)
    assert tuple(lstm.weight_ih_l1.shape) == (80, 10)  # 2 directions x proj_size
    assert tuple(lstm.weight_hh_l1_reverse.shape) == (80, 5)
    assert tuple(lstm.weight_hr_l0.shape) == (5, 20)
    out, (h, c) = lstm(ta.randn(3, 7, 10))
    assert (tuple(out.shape), tuple(h.shape), tuple(c.shape)) == ((3, 7, 10), (4, 3, 5),
                                                                   (4, 3, 20))
    gru = nn.GRU(4, 6, bias=False)
    assert list(gru.state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    out, h = gru(ta.randn(5, 4))
    assert (tuple(out.shape), tuple(h.shape)) == ((5, 6), (1, 6))
    cell = nn.LSTMCell(4, 6)
    assert list(cell.state_dict()) == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    h, c = cell(ta.randn(4))
    assert tuple(h.shape) == tuple(c.shape) == (6,)
    assert len(lstm.all_weights) == 4 and len(lstm.all_weights[0]) == 5
    assert lstm.flatten_parameters() is None


def test_init_is_uniform_in_bound_and_follows_manual_seed():
    ta.manual_seed(0)
    a = nn.GRU(3, 16, num_layers=2)
    ta.manual_seed(0)
    b = nn.GRU(3, 16, num_layers=2)
    for (n, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        assert np.abs(p.numpy()).max() <= 0.25 and p.numpy().std() > 0.1, n


def test_repr_is_torchs():
    assert repr(nn.LSTM(10, 20, num_layers=2, batch_first=True)) == \
        "LSTM(10, 20, num_layers=2, batch_first=True)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert repr(nn.RNN(3, 4, nonlinearity="relu", bias=False, dropout=0.5)) == \
            "RNN(3, 4, bias=False, dropout=0.5)"
    assert repr(nn.GRU(3, 4, bidirectional=True)) == "GRU(3, 4, bidirectional=True)"
    assert repr(nn.LSTM(3, 4, proj_size=2)) == "LSTM(3, 4, proj_size=2)"
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu")) == "RNNCell(3, 4, nonlinearity=relu)"
    assert repr(nn.GRUCell(3, 4, bias=False)) == "GRUCell(3, 4, bias=False)"
    assert repr(nn.LSTMCell(3, 4)) == "LSTMCell(3, 4)"


def test_wrong_shapes_are_refused_naming_module_and_shapes():
    lstm = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(ValueError, match=r"LSTM: input has shape \(5, 2, 7\).*input_size=3"):
        lstm(ta.randn(5, 2, 7))
    with pytest.raises(ValueError, match=r"LSTM: Expected input to be 2D or 3D, got 4D"):
        lstm(ta.randn(1, 5, 2, 3))
    with pytest.raises(ValueError, match=r"LSTM: hx\[0\] has shape \(1, 2, 4\), expected "
                                         r"\(2, 2, 4\) for input of shape \(5, 2, 3\)"):
        lstm(ta.randn(5, 2, 3), (ta.zeros(1, 2, 4), ta.zeros(2, 2, 4)))
    with pytest.raises(ValueError, match=r"GRU: hx has shape \(1, 2, 4\), expected \(1, 4\)"):
        nn.GRU(3, 4)(ta.randn(5, 3), ta.zeros(1, 2, 4))
    with pytest.raises(ValueError, match=r"GRUCell: hx has shape \(3, 4\), expected \(2, 4\)"):
        nn.GRUCell(3, 4)(ta.randn(2, 3), ta.zeros(3, 4))
    with pytest.raises(ValueError, match=r"RNNCell: input has shape \(2, 5\)"):
        nn.RNNCell(3, 4)(ta.randn(2, 5))
    with pytest.raises(TypeError, match=r"input must be a Tensor, got list \(or a "
                                        r"PackedSequence\)"):
        lstm([1, 2, 3])


def test_bad_settings_are_refused_as_torch():
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNNCell(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.GRU(3, 0)
    with pytest.raises(ValueError, match="num_layers must be greater than zero"):
        nn.GRU(3, 4, num_layers=0)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.2)


def test_dropout_between_layers_only_in_training():
    ta.manual_seed(0)
    model = nn.GRU(3, 8, num_layers=2, dropout=0.5, dtype=ta.float64)
    x = ta.randn(6, 2, 3, dtype=ta.float64)
    model.eval()
    a, b = model(x)[0].numpy(), model(x)[0].numpy()
    np.testing.assert_array_equal(a, b)
    model.train()
    assert not np.allclose(model(x)[0].numpy(), a)
    single = nn.GRU(3, 8, num_layers=2, dtype=ta.float64)
    single.load_state_dict(model.state_dict())
    np.testing.assert_allclose(single(x)[0].numpy(), a)


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_a_char_rnn_learns_a_tiny_string(name):
    text = "hello world, hello rnn. " * 2
    chars = sorted(set(text))
    ids = ta.tensor([chars.index(ch) for ch in text])
    ta.manual_seed(0)
    embed, rnn = nn.Embedding(len(chars), 8), getattr(nn, name)(8, 32, batch_first=True)
    head = nn.Linear(32, len(chars))
    params = list(embed.parameters()) + list(rnn.parameters()) + list(head.parameters())
    opt = ta.optim.Adam(params, lr=0.02)
    losses = []
    for _ in range(50):
        out, _ = rnn(embed(ids[:-1].unsqueeze(0)))
        loss = F.cross_entropy(head(out)[0], ids[1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0], losses[::10]
