"""Behaviour, not shapes: dropout keeps x/(1-p) and is the identity in eval mode; sampling
draws only from the top-k / top-p tokens and temperature reshapes the distribution as it
should. Each test here fails on a plausible one-line bug (a missing rescale, top-k keeping the
worst tokens, temperature multiplied instead of divided)."""

import re
from functools import partial

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn
from tinyattn.nn.transformer import next_token_probs


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_keeps_x_over_one_minus_p_and_the_mean(p):
    x = ta.tensor(np.random.default_rng(0).uniform(1.0, 2.0, (200, 100)))
    y = F.dropout(x, p, seed=1).numpy()
    kept = y != 0
    np.testing.assert_allclose(y[kept], x.numpy()[kept] / (1 - p), rtol=1e-12)
    assert abs(1 - kept.mean() - p) < 0.02  # the fraction dropped is p
    assert abs(y.mean() / x.numpy().mean() - 1) < 0.03  # the rescale keeps the mean


def test_dropout_gradient_is_the_same_mask_and_scale():
    x = ta.tensor(np.ones((50, 40)), requires_grad=True)
    y = F.dropout(x, 0.3, seed=2)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (y.numpy() != 0) / 0.7, rtol=1e-12)


def test_dropout_in_eval_mode_is_the_identity_and_train_mode_is_not():
    layer = nn.Dropout(0.5)
    x = ta.tensor(np.arange(1.0, 101.0))
    assert not np.array_equal(layer(x).numpy(), x.numpy())  # training by default
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), x.numpy())
    np.testing.assert_array_equal(F.dropout(x, 0.5, training=False).numpy(), x.numpy())


def test_dropout_of_one_drops_everything_and_bad_p_is_refused_as_in_torch():
    torch = pytest.importorskip("torch")
    x = ta.tensor(np.ones((3, 4), np.float32), requires_grad=True)
    y = F.dropout(x, 1.0)
    y.sum().backward()
    tx = torch.ones(3, 4, requires_grad=True)
    ty = torch.nn.functional.dropout(tx, 1.0)
    ty.sum().backward()
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())  # zeros, no NaN
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    for p in (-0.1, 1.5):  # refused in eval mode too, and by nn.Dropout when made (as torch)
        for call in (partial(F.dropout, x), partial(F.dropout, x, training=False), nn.Dropout):
            with pytest.raises(ValueError, match=r"dropout: p must be a probability in \[0, 1\]"):
                call(p=p)
        with pytest.raises(ValueError):
            torch.nn.Dropout(p)
    assert np.array_equal(F.dropout(x, np.float32(0.0)).numpy(), x.numpy())  # NumPy numbers too
    q = ta.tensor(np.ones((1, 2, 4, 8), np.float32))
    assert not F.scaled_dot_product_attention(q, q, q, dropout_p=1.0).numpy().any()
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\], got 1.5"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=1.5)


LOGITS = np.array([[0.0, 1.0, 2.0, 3.0, 4.0], [4.0, -1.0, 3.0, 0.0, 0.5]])


def test_top_k_keeps_the_k_most_likely_tokens():
    p = next_token_probs(LOGITS, top_k=2)
    assert set(np.flatnonzero(p[0])) == {3, 4} and set(np.flatnonzero(p[1])) == {0, 2}
    assert set(np.flatnonzero(next_token_probs(LOGITS[:1], top_k=3)[0])) == {2, 3, 4}  # k > B
    assert np.all(next_token_probs(LOGITS, top_k=9) > 0)  # k beyond the vocabulary: every token
    e = np.exp(np.array([3.0, 4.0]))
    np.testing.assert_allclose(p[0, 3:], e / e.sum(), rtol=1e-12)


def test_top_p_keeps_the_fewest_tokens_that_reach_p():
    logits = np.log(np.array([[0.05, 0.5, 0.3, 0.15]]))
    assert set(np.flatnonzero(next_token_probs(logits, top_p=0.5)[0])) == {1}
    assert set(np.flatnonzero(next_token_probs(logits, top_p=0.7)[0])) == {1, 2}
    assert set(np.flatnonzero(next_token_probs(logits, top_p=0.81)[0])) == {1, 2, 3}
    np.testing.assert_allclose(next_token_probs(logits, top_p=0.7)[0, 1:3], [0.625, 0.375])


def test_temperature_divides_the_logits():
    for t in (0.25, 1.0, 3.0):
        want = np.exp(LOGITS / t)
        want /= want.sum(axis=-1, keepdims=True)
        np.testing.assert_allclose(next_token_probs(LOGITS, temperature=t), want, rtol=1e-12)
    cold, hot = next_token_probs(LOGITS, 0.25), next_token_probs(LOGITS, 3.0)
    assert cold[0].max() > hot[0].max()  # colder: sharper


def test_generate_samples_only_the_top_k_tokens_of_the_model():
    ta.manual_seed(0)
    model = nn.TinyTransformer(vocab_size=12, d_model=16, n_heads=2, n_layers=1, max_len=8).eval()
    prompt = np.tile(np.array([[1, 5, 7]]), (300, 1))  # (300, 3): the same prompt 300 times
    logits = model(ta.tensor(prompt[:1])).numpy()[0, -1]
    best = set(np.argsort(logits)[-3:])
    out = model.generate(prompt, 1, temperature=5.0, top_k=3,
                         rng=np.random.default_rng(0)).numpy()[:, -1]
    assert set(out) == best  # only the three best, and (hot) all three of them


@pytest.mark.parametrize("setting, message", [
    ({"temperature": -1.0}, "temperature must be a finite number >= 0 (0: greedy), got -1.0"),
    ({"temperature": float("nan")}, "temperature must be a finite number >= 0"),
    ({"top_k": 0}, "top_k must be a whole number >= 1 (or None: every token), got 0"),
    ({"top_k": 2.5}, "top_k must be a whole number >= 1"),
    ({"top_p": 0.0}, "top_p must be in (0, 1] (or None), got 0.0"),
    ({"top_p": 1.5}, "top_p must be in (0, 1]"),
])
def test_generate_refuses_settings_that_would_sample_another_distribution(setting, message):
    """A negative temperature samples the least likely tokens, top_p=0 keeps none (NaN), top_k
    <= 0 keeps them all: each is an error naming the setting, never a silent other sampler."""
    model = nn.TinyTransformer(vocab_size=12, d_model=16, n_heads=2, n_layers=1, max_len=8)
    with pytest.raises(ValueError, match="generate: " + re.escape(message)):
        model.generate(ta.tensor([[1, 5]]), 2, **setting)
    name = message.split(" must")[0]
    with pytest.raises(ValueError, match=f"next_token_probs: {name} must"):
        next_token_probs(LOGITS, **{"temperature": 1.0, **setting})
    with pytest.raises(ValueError, match="max_new_tokens must be a whole number >= 0, got -1"):
        model.generate(ta.tensor([[1, 5]]), -1)
    out = model.generate(ta.tensor([[1, 5]]), 2, temperature=0, top_k=np.int64(3))  # 0: greedy
    assert out.shape == (1, 4)


def test_next_token_probs_bounds_of_each_setting():
    """top_k = 1 keeps one token, top_p = 1 keeps them all; a temperature of 0, inf or a bool
    is refused by next_token_probs (generate takes 0 as greedy)."""
    assert np.count_nonzero(next_token_probs(LOGITS, top_k=1)[0]) == 1
    assert np.all(next_token_probs(LOGITS, top_p=1.0) > 0)
    for bad in (0, 0.0, float("inf"), True, "1"):
        with pytest.raises(ValueError, match=re.escape(
                f"next_token_probs: temperature must be a finite number > 0, got {bad!r}")):
            next_token_probs(LOGITS, temperature=bad)
    model = nn.TinyTransformer(vocab_size=12, d_model=16, n_heads=2, n_layers=1, max_len=8)
    with pytest.raises(ValueError, match="generate: temperature must be a finite number >= 0"):
        model.generate(ta.tensor([[1, 5]]), 1, temperature=float("inf"))
