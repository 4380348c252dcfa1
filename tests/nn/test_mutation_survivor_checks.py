"""Behaviour the mutation sample of 2026-11-27 (nn and optim, 60 mutants each) showed no test
pinned: the KV cache's multi-token step through scaled_dot_product_attention (its mask), an
RNN's dropout of exactly 1, the cell state named in an LSTM's error, a cell built on a device,
LBFGS's line search held to max_eval, the EMA averaging function's default decay, and the
parameter-group checks of load_state_dict and add_param_group."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.nn.transformer import KVCache


@pytest.mark.parametrize("pieces", [(4, 6), (3, 2, 5)])
def test_several_new_tokens_through_the_cache_give_the_full_runs_logits(pieces):
    """Without return_attention the cached step runs scaled_dot_product_attention with the
    causal mask aligned bottom-right: a chunk of new tokens must not see its own future."""
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(vocab_size=11, d_model=32, n_heads=4, n_layers=2,
                                  max_len=12).eval()
    ids = np.random.default_rng(1).integers(0, 11, (2, sum(pieces)))
    with ta.no_grad():
        full = model(ta.tensor(ids)).numpy()
        cache, start, got = KVCache(), 0, []
        for n in pieces:
            got.append(model(ta.tensor(ids[:, start:start + n]), cache=cache).numpy())
            start += n
    np.testing.assert_allclose(np.concatenate(got, 1), full, rtol=1e-5, atol=1e-5)


def test_rnn_dropout_of_one_is_accepted_as_torchs():
    torch = pytest.importorskip("torch")
    for lib in (torch, ta):
        lstm = lib.nn.LSTM(4, 3, num_layers=2, dropout=1.0)
        assert lstm.dropout == 1.0
        with pytest.raises(ValueError, match="range"):
            lib.nn.LSTM(4, 3, num_layers=2, dropout=1.5)


def test_an_lstm_cell_state_of_the_wrong_shape_is_named_hx1():
    lstm = ta.nn.LSTM(4, 3)
    x = ta.zeros(5, 2, 4)
    with pytest.raises(ValueError, match=r"^LSTM: hx\[1\] has shape \(1, 2, 7\)"):
        lstm(x, (ta.zeros(1, 2, 3), ta.zeros(1, 2, 7)))
    with pytest.raises(ValueError, match=r"^LSTM: hx\[0\] has shape \(1, 2, 7\)"):
        lstm(x, (ta.zeros(1, 2, 7), ta.zeros(1, 2, 3)))


@pytest.mark.parametrize("cls", [ta.nn.RNNCell, ta.nn.LSTMCell, ta.nn.GRUCell,
                                 ta.nn.RNN, ta.nn.LSTM, ta.nn.GRU])
def test_a_recurrent_module_built_with_a_device_is_moved_there(cls, monkeypatch):
    """device= moves the new module (Module.to): seen through a stand-in for .to."""
    moved = []
    monkeypatch.setattr(ta.nn.Module, "to", lambda self, *a, **k: moved.append(a) or self)
    cls(3, 4, device="cpu")
    assert moved == [("cpu",)]


def test_lbfgs_line_search_is_held_to_max_eval_as_torchs():
    """The strong-Wolfe search may call the closure about max_eval - (calls so far) times:
    the closure counts and the parameters after the step equal torch's."""
    torch = pytest.importorskip("torch")

    def run(lib):
        x = lib.tensor([-1.5, 2.0], dtype=lib.float64, requires_grad=True)
        # (a first step 1e8 too long: the search would zoom for many calls, unbounded)
        opt = lib.optim.LBFGS([x], lr=1e8, max_iter=10, max_eval=3,
                              line_search_fn="strong_wolfe")
        calls = [0]

        def closure():
            calls[0] += 1
            opt.zero_grad()
            loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2  # Rosenbrock
            loss.backward()
            return loss

        opt.step(closure)
        return calls[0], x.detach().numpy().copy()

    (n_ta, x_ta), (n_torch, x_torch) = run(ta), run(torch)
    assert n_ta == n_torch == 4  # (the search's last call may pass max_eval by one: torch's)
    np.testing.assert_allclose(x_ta, x_torch, rtol=1e-10)


def test_the_ema_average_function_defaults_to_torchs_decay():
    torch = pytest.importorskip("torch")
    from torch.optim import swa_utils as torch_swa

    from tinyattn.optim import swa_utils
    ema, p = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    want = torch_swa.get_ema_avg_fn()(torch.tensor(ema), torch.tensor(p), torch.tensor(1))
    got = swa_utils.get_ema_avg_fn()(ta.tensor(ema), ta.tensor(p), ta.tensor(1))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    np.testing.assert_allclose(got.numpy(), 0.999 * ema + 0.001 * p, rtol=1e-12)


def test_load_state_dict_refuses_groups_whose_params_are_not_positions():
    w = ta.zeros(2, requires_grad=True)
    opt = ta.optim.SGD([w], lr=0.1)
    state = opt.state_dict()
    for bad in (["w"], [0.5], "0"):
        state["param_groups"][0]["params"] = bad
        with pytest.raises(ta.CheckpointError, match="not a list of parameter positions"):
            opt.load_state_dict(state)


def test_add_param_group_says_which_side_has_names():
    a, b = (ta.zeros(2, requires_grad=True) for _ in range(2))
    opt = ta.optim.SGD([a], lr=0.1)
    with pytest.raises(ValueError, match="this group has names, the others have not"):
        opt.add_param_group({"params": [b], "param_names": ["b"]})
    named = ta.optim.SGD([{"params": [a], "param_names": ["a"]}], lr=0.1)
    with pytest.raises(ValueError, match="this group has none, the others have not"):
        named.add_param_group({"params": [b]})
