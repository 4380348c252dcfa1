"""nn.RNN, LSTM and GRU on a PackedSequence against torch's: the output (padded back), h_n and
c_n, and the gradients of the input, the initial state and every parameter, in float64 with
torch's weights copied over; torch's batch order kept (sorted_indices, unsorted_indices); a
sentiment-style model (Embedding, pack_padded_sequence, LSTM, h_n[-1], Linear) trained with
Adam step by step next to torch's."""

import itertools

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

torch = pytest.importorskip("torch")

I, H, T = 3, 4, 5
TOL = dict(rtol=1e-9, atol=1e-11)
MODELS = [("RNN", {"nonlinearity": "tanh"}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}),
          ("GRU", {})]


def _pair(name, kw):
    theirs = getattr(torch.nn, name)(I, H, **kw).double()
    ours = getattr(nn, name)(I, H, dtype=ta.float64, **kw)
    ours.load_state_dict({k: ta.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    return ours, theirs


def _leaves(lib, arrays):
    return [lib.tensor(a, requires_grad=True) for a in arrays]


def _run(lib, module, leaves, lengths, batch_first, enforce_sorted, is_lstm):
    """Pack leaves[0] (padded), run the module (leaves[1:] the initial state), and return the
    padded output, the packed output and [h_n(, c_n)]."""
    rnn = lib.nn.utils.rnn
    packed = rnn.pack_padded_sequence(leaves[0], lib.tensor(lengths), batch_first=batch_first,
                                      enforce_sorted=enforce_sorted)
    hx = None if len(leaves) == 1 else (tuple(leaves[1:]) if is_lstm else leaves[1])
    out, state = module(packed) if hx is None else module(packed, hx)
    padded, got_lengths = rnn.pad_packed_sequence(out, batch_first=batch_first)
    assert got_lengths.tolist() == list(lengths)
    return padded, out, list(state) if is_lstm else [state]


def _loss(lib, tensors, weights):
    return sum((lib.tanh(t) * lib.tensor(w)).sum() for t, w in zip(tensors, weights, strict=True))


def _compare(name, kw, lengths, batch_first, enforce_sorted, with_h0, train=False):
    ours, theirs = _pair(name, kw)
    ours.train(train)
    theirs.train(train)
    rng = np.random.default_rng(len(lengths) + 7 * with_h0)
    n, k = len(lengths), kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    x = rng.standard_normal((n, T, I) if batch_first else (T, n, I))
    arrays = [x] + ([rng.standard_normal((k, n, H)) for _ in range(1 + (name == "LSTM"))]
                    if with_h0 else [])
    mine, yours = _leaves(ta, arrays), _leaves(torch, arrays)
    run = dict(lengths=lengths, batch_first=batch_first, enforce_sorted=enforce_sorted,
               is_lstm=name == "LSTM")
    pad_a, out_a, state_a = _run(ta, ours, mine, **run)
    pad_b, out_b, state_b = _run(torch, theirs, yours, **run)
    np.testing.assert_array_equal(out_a.batch_sizes.numpy(), out_b.batch_sizes.numpy())
    for a, b in ((out_a.sorted_indices, out_b.sorted_indices),
                 (out_a.unsorted_indices, out_b.unsorted_indices)):
        assert (a is None) == (b is None)
    got, want = [pad_a] + state_a, [pad_b] + state_b
    weights = [rng.standard_normal(tuple(t.shape)) for t in want]
    for a, b in zip(got, want, strict=True):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL)
    _loss(ta, got, weights).backward()
    _loss(torch, want, weights).backward()
    for a, b in zip(mine, yours, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **TOL)
    theirs_params = dict(theirs.named_parameters())
    for p_name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), theirs_params[p_name].grad.numpy(), **TOL,
                                   err_msg=p_name)


CASES = list(itertools.product(range(len(MODELS)), (1, 2), (False, True), (False, True),
                               (True, False), (False, True)))


@pytest.mark.parametrize(("model", "layers", "bidirectional", "batch_first", "enforce_sorted",
                          "with_h0"), CASES)
def test_packed_input_matches_torch(model, layers, bidirectional, batch_first, enforce_sorted,
                                    with_h0):
    name, kw = MODELS[model]
    kw = dict(kw, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    lengths = [5, 4, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3, 4]
    _compare(name, kw, lengths, batch_first, enforce_sorted, with_h0)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_packed_lstm_with_proj_size_matches_torch(bidirectional):
    ours, theirs = _pair("LSTM", dict(proj_size=2, num_layers=2, bidirectional=bidirectional))
    x = np.random.default_rng(3).standard_normal((T, 3, I))
    outs = []
    for lib, module in ((ta, ours), (torch, theirs)):
        leaf = lib.tensor(x, requires_grad=True)
        padded, _, state = _run(lib, module, [leaf], [2, 5, 4], False, False, True)
        (padded.sum() + state[0].square().sum() + state[1].sum()).backward()
        outs.append([padded.detach().numpy()] + [s.detach().numpy() for s in state] +
                    [leaf.grad.numpy()] + [p.grad.numpy() for p in module.parameters()])
    assert outs[0][1].shape == (4 if bidirectional else 2, 3, 2)
    for a, b in zip(*outs, strict=True):
        np.testing.assert_allclose(a, b, **TOL)


def test_a_single_sequence_and_equal_lengths_match_torch():
    _compare("GRU", dict(num_layers=2, bidirectional=True), [5], False, True, True)
    _compare("LSTM", dict(bidirectional=True), [5, 5, 5], False, False, True)


def test_dropout_between_layers_on_packed_data():
    """dropout=1 in training zeroes the second layer's input (as torch's, so the two still
    agree); dropout=0.5 in training changes the output, in eval it does not."""
    kw = dict(num_layers=2, bidirectional=True, dropout=1.0)
    _compare("LSTM", kw, [3, 5, 1], False, False, True, train=True)
    _compare("GRU", kw, [5, 2], False, True, False, train=True)
    ta.manual_seed(0)
    model = nn.GRU(I, H, num_layers=2, dropout=0.5, dtype=ta.float64)
    packed = nn.utils.rnn.pack_sequence([ta.randn(5, I, dtype=ta.float64),
                                         ta.randn(3, I, dtype=ta.float64)])
    model.eval()
    first, second = model(packed)[0].data.numpy(), model(packed)[0].data.numpy()
    np.testing.assert_array_equal(first, second)
    model.train()
    assert not np.allclose(model(packed)[0].data.numpy(), first)


def test_the_output_keeps_the_inputs_packing():
    rnn = nn.utils.rnn
    packed = rnn.pack_sequence([ta.randn(2, I), ta.randn(4, I), ta.randn(3, I)],
                               enforce_sorted=False)
    out, h_n = nn.RNN(I, H)(packed)
    assert isinstance(out, rnn.PackedSequence)
    assert out.batch_sizes is packed.batch_sizes
    assert out.sorted_indices is packed.sorted_indices
    assert out.unsorted_indices is packed.unsorted_indices
    assert tuple(out.data.shape) == (9, H) and tuple(h_n.shape) == (1, 3, H)


def test_a_wrong_initial_state_is_refused():
    packed = nn.utils.rnn.pack_sequence([ta.randn(4, I), ta.randn(3, I)])
    with pytest.raises(ta.errors.ShapeError, match="hx"):
        nn.GRU(I, H)(packed, ta.zeros(1, 3, H))
    with pytest.raises(ta.errors.ShapeError, match=r"hx\[1\]"):
        nn.LSTM(I, H)(packed, (ta.zeros(1, 2, H), ta.zeros(1, 1, H)))


class _Sentiment:
    """Embedding -> pack_padded_sequence -> LSTM -> h_n[-1] -> Linear, for either library."""

    def __init__(self, lib):
        self.lib = lib
        self.embed = lib.nn.Embedding(12, 5, padding_idx=0)
        self.lstm = lib.nn.LSTM(5, 6, num_layers=2, batch_first=True)
        self.head = lib.nn.Linear(6, 2)
        self.modules = [self.embed, self.lstm, self.head]

    def __call__(self, tokens, lengths):
        packed = self.lib.nn.utils.rnn.pack_padded_sequence(
            self.embed(tokens), lengths, batch_first=True, enforce_sorted=False)
        _, (h_n, _) = self.lstm(packed)
        return self.head(h_n[-1])

    def parameters(self):
        return [p for m in self.modules for p in m.parameters()]


def test_a_sentiment_model_trains_as_torchs():
    rng = np.random.default_rng(11)
    lengths = np.array([4, 7, 2, 7, 5, 1])
    tokens = rng.integers(1, 12, (len(lengths), 7))
    tokens[np.arange(7)[None, :] >= lengths[:, None]] = 0
    labels = rng.integers(0, 2, len(lengths))
    torch.manual_seed(0)
    theirs, ours = _Sentiment(torch), _Sentiment(ta)
    for a, b in zip(ours.modules, theirs.modules, strict=True):
        a.double(), b.double()
        a.load_state_dict({k: ta.tensor(v.detach().numpy()) for k, v in b.state_dict().items()})
    runs = []
    for lib, model in ((ta, ours), (torch, theirs)):
        opt = lib.optim.Adam(model.parameters(), lr=0.05)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            logits = model(lib.tensor(tokens), lib.tensor(lengths))
            fn = F.cross_entropy if lib is ta else torch.nn.functional.cross_entropy
            loss = fn(logits, lib.tensor(labels))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        runs.append((losses, [p.detach().numpy() for p in model.parameters()]))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-9)
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
