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


@pytest.mark.parametrize("top_p", [1e-300, 1e-15, 1e-12, 0.3])
def test_top_p_below_the_most_likely_tokens_mass_keeps_that_token_alone(top_p):
    """A nucleus smaller than the most likely token's probability (down to the least float
    above 0, which the rounding slack of the cumulative sum exceeds) is that token alone."""
    logits = np.log(np.array([[0.05, 0.5, 0.3, 0.15], [0.4, 0.1, 0.15, 0.35]]))
    probs = next_token_probs(logits, top_p=top_p)
    np.testing.assert_array_equal(probs, [[0, 1, 0, 0], [1, 0, 0, 0]])


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


def test_generate_decodes_without_dropout_and_gives_each_module_its_mode_back():
    """A model left in train mode with dropout decodes as its dropout-free twin (greedy is
    deterministic), also when the decoding fails; a part the user put in eval mode stays
    so, the rest goes back to train mode."""
    ta.manual_seed(0)
    model = nn.TinyTransformer(vocab_size=12, d_model=16, n_heads=2, n_layers=2, max_len=8,
                               dropout=0.5)
    twin = nn.TinyTransformer(vocab_size=12, d_model=16, n_heads=2, n_layers=2, max_len=8)
    twin.load_state_dict(model.state_dict())
    model.train()
    model.blocks[1].eval()  # mixed modes, as a user may leave them
    before = {name: m.training for name, m in model.named_modules()}
    prompt = np.array([[1, 5, 7], [2, 2, 3]])
    want = twin.eval().generate(prompt, 6, greedy=True).numpy()
    for _ in range(3):
        np.testing.assert_array_equal(model.generate(prompt, 6, greedy=True).numpy(), want)
    sampled = [model.generate(prompt, 6, top_k=4, rng=7).numpy() for _ in range(2)]
    np.testing.assert_array_equal(sampled[0], sampled[1])
    np.testing.assert_array_equal(sampled[0], twin.generate(prompt, 6, top_k=4, rng=7).numpy())
    assert {name: m.training for name, m in model.named_modules()} == before
    calls = []

    def fail_on_the_third_token(module, args, out):
        calls.append(module.training)
        if len(calls) == 3:
            raise RuntimeError("stop")

    model.lm_head.register_forward_hook(fail_on_the_third_token)
    with pytest.raises(RuntimeError, match="stop"):
        model.generate(prompt, 6, greedy=True)
    assert calls == [False] * 3  # it decoded in eval mode, and failed inside
    assert {name: m.training for name, m in model.named_modules()} == before


def test_eval_mode_restores_each_modules_own_mode_also_after_an_error():
    from tinyattn.nn.module import eval_mode

    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5), nn.Sequential(nn.Dropout(0.2)))
    model[2].eval()
    before = [m.training for m in model.modules()]
    assert before == [True, True, True, False, False]
    with pytest.raises(RuntimeError, match="inside"), eval_mode(model) as m:
        assert m is model and not any(x.training for x in model.modules())
        raise RuntimeError("inside")
    assert [m.training for m in model.modules()] == before


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


# ---- generate's randomness: tinyattn's seeding, seeds, numpy and tinyattn Generators ----------

def _tiny_model():
    ta.manual_seed(0)
    return nn.TinyTransformer(vocab_size=12, d_model=16, n_heads=2, n_layers=1, max_len=8).eval()


def test_generate_without_rng_follows_tinyattn_manual_seed():
    """As torch's sampling follows torch.manual_seed: rng=None draws from tinyattn's stream."""
    model, prompt = _tiny_model(), ta.tensor([[1, 5], [2, 3]])
    ta.manual_seed(0)
    a = model.generate(prompt, 12, temperature=3.0).numpy()
    ta.manual_seed(0)
    b = model.generate(prompt, 12, temperature=3.0).numpy()
    np.testing.assert_array_equal(a, b)
    ta.manual_seed(1)
    assert not np.array_equal(model.generate(prompt, 12, temperature=3.0).numpy(), a)


def test_generate_takes_a_seed_a_numpy_or_a_tinyattn_generator_as_rng():
    model, prompt = _tiny_model(), ta.tensor([[1, 5], [2, 3]])
    gen = partial(model.generate, prompt, 12, temperature=3.0)
    want = gen(rng=np.random.default_rng(0)).numpy()  # numpy Generators draw as they always did
    np.testing.assert_array_equal(gen(rng=0).numpy(), want)  # 0 is a seed, not "no rng"
    np.testing.assert_array_equal(gen(rng=np.int64(0)).numpy(), want)
    np.testing.assert_array_equal(gen(rng=ta.Generator().manual_seed(0)).numpy(), want)
    np.testing.assert_array_equal(gen(rng=5).numpy(), gen(rng=np.random.default_rng(5)).numpy())
    assert not np.array_equal(gen(rng=5).numpy(), want)
    g = ta.Generator().manual_seed(7)
    first = gen(rng=g).numpy()
    assert not np.array_equal(gen(rng=g).numpy(), first)  # the generator's stream moves on
    np.testing.assert_array_equal(gen(rng=g.manual_seed(7)).numpy(), first)


@pytest.mark.parametrize("rng, kind", [("0", "str"), (1.5, "float"), (True, "bool"),
                                       (np.random.RandomState(0), "RandomState")])
def test_generate_refuses_an_rng_of_another_kind(rng, kind):
    model = _tiny_model()
    with pytest.raises(TypeError, match=re.escape(
            "generate: rng must be None (tinyattn's random stream, seeded by "
            "tinyattn.manual_seed), an int seed, a numpy.random.Generator or a "
            f"tinyattn.Generator, got {kind}")):
        model.generate(ta.tensor([[1, 5]]), 2, rng=rng)
    with pytest.raises(ValueError, match="generate: rng as a seed must be an int >= 0, got -1"):
        model.generate(ta.tensor([[1, 5]]), 2, rng=-1)


@pytest.mark.parametrize("idx", [[1, 5], np.array([3]), [[]], np.zeros((2, 0), np.int64),
                                 [[[1, 5]]]])
def test_generate_refuses_a_prompt_that_is_not_b_by_t(idx):
    model = _tiny_model()
    shape = np.asarray(idx, dtype=np.int64).shape
    with pytest.raises(ta.errors.ShapeError, match=re.escape(
            f"generate: idx must be (B, T) token ids with T >= 1, got shape {shape}")):
        model.generate(idx, 2)
    assert model.generate([[1, 5]], 2, greedy=True).shape == (1, 4)  # lists still work
    assert model.generate(np.zeros((0, 2), np.int64), 2).shape == (0, 4)  # and B = 0


@pytest.mark.parametrize("idx", [ta.tensor([[1.9, 2.0]]), [[1.9, 2.0]], [[1, 2.0]],
                                 np.array([[1.0, 2.0]], np.float16), [[True, False]],
                                 ta.tensor([[True, False]]), np.zeros((0, 2))],
                         ids=["tensor", "list", "mixed", "float16", "bools", "bool-tensor",
                              "empty"])
def test_generate_refuses_ids_that_are_not_integers_as_forward_does(idx):
    """1.9 is no token: forward refuses float (and bool) ids, as torch's embedding does, and
    so must generate (it truncated them to 1)."""
    model = _tiny_model()
    with pytest.raises(ta.errors.DTypeError) as forward:
        model(idx)
    assert str(forward.value).startswith("embedding: ids must be integers, got ")
    for kw in ({"greedy": True}, {"temperature": 0.5, "rng": 0}, {"use_cache": False}):
        with pytest.raises(ta.errors.DTypeError) as caught:
            model.generate(idx, 2, **kw)
        assert str(caught.value) == str(forward.value)


def test_generate_takes_integer_ids_of_any_kind():
    model = _tiny_model()
    want = model.generate(ta.tensor([[1, 5]]), 3, greedy=True).numpy()
    for idx in ([[1, 5]], np.array([[1, 5]], np.int32), np.array([[1, 5]], np.uint8),
                ta.tensor(np.array([[1, 5]], np.int32)), [[np.int64(1), np.int16(5)]]):
        out = model.generate(idx, 3, greedy=True)
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out.numpy(), want)


def test_generate_refuses_an_id_out_of_range_outside_the_window_too():
    """A prompt longer than max_len runs its last max_len tokens; an id the model has no row
    for is still an error (as forward's), not a token handed back in the output."""
    model = _tiny_model()  # max_len 8, vocab 12
    for bad in (12, -1):
        idx = [[bad] + [1] * 9]
        with pytest.raises(ta.errors.DimError) as forward:
            model([[bad, 1]])  # (forward takes at most max_len tokens)
        with pytest.raises(ta.errors.DimError) as caught:
            model.generate(idx, 1, greedy=True)
        assert str(caught.value) == str(forward.value)


# ---- next_token_probs: stable tempering, bad logits, top_p rounding, 1-D logits -------------

@pytest.mark.parametrize("logits, temperature, want", [
    ([[0.0, 1.0, 2.0]], 1e-320, [[0, 0, 1]]),  # logits / T would overflow to inf (NaN)
    ([[1e308, -1e308, 3.0]], 0.5, [[1, 0, 0]]),
    ([[1e308, -1e308, 1e308]], 0.5, [[0.5, 0, 0.5]]),  # ties at the top share the mass
    ([[-1e308, 1e308, 0.0], [2.0, 1.0, 2.0]], 1e-300, [[0, 1, 0], [0.5, 0, 0.5]]),
    ([[np.inf, 0.0, np.inf, -np.inf]], 1.0, [[0.5, 0, 0.5, 0]]),
    ([[-np.inf, 0.0, -np.inf]], 1e-320, [[0, 1, 0]]),
])
def test_a_tiny_temperature_or_huge_logits_give_the_argmax_not_nan(logits, temperature, want):
    p = next_token_probs(np.array(logits), temperature=temperature)
    np.testing.assert_allclose(p, want, rtol=0, atol=1e-12)
    p = next_token_probs(np.array(logits), temperature=temperature, top_k=2, top_p=0.9)
    assert np.isfinite(p).all() and np.allclose(p.sum(axis=-1), 1)


def test_a_tiny_temperature_samples_the_argmax_in_generate():
    model, prompt = _tiny_model(), ta.tensor([[1, 5], [2, 3]])
    np.testing.assert_array_equal(model.generate(prompt, 6, temperature=1e-320, rng=0).numpy(),
                                  model.generate(prompt, 6, greedy=True).numpy())


@pytest.mark.parametrize("logits, message", [
    ([[0.0, np.nan, 1.0]], "next_token_probs: logits contain NaN"),
    ([np.nan, np.nan], "next_token_probs: logits contain NaN"),
    ([[0.0, 1.0], [-np.inf, -np.inf]], "next_token_probs: a row of logits is all -inf"),
    ([-np.inf], "next_token_probs: a row of logits is all -inf"),
    (np.zeros((2, 0)), "next_token_probs: logits must be (V,) or (B, V) with V >= 1"),
    (3.0, "next_token_probs: logits must be (V,) or (B, V) with V >= 1"),
])
def test_next_token_probs_refuses_logits_without_a_distribution(logits, message):
    for kw in ({}, {"top_k": 1}, {"top_p": 0.5}, {"temperature": 1e-320}):
        with pytest.raises(ValueError, match=re.escape(message)):
            next_token_probs(np.array(logits), **kw)


def test_top_p_keeps_the_smallest_set_of_equally_likely_tokens_that_reaches_it():
    """n equally likely tokens: top_p = k/n keeps k of them, not k + 1 because the cumulative
    sum rounds just under k/n (10 tokens: top_p 0.8 kept 9, 0.9 kept 10); a little more than
    k/n keeps k + 1."""
    for n in range(2, 61):
        logits = np.zeros((2, n))
        logits[1] = 3.5  # the same probabilities from other logits
        for k in range(1, n + 1):
            p = next_token_probs(logits, top_p=k / n)
            assert (np.count_nonzero(p, axis=-1) == k).all(), (n, k)
            np.testing.assert_allclose(p[p > 0], 1 / k, rtol=1e-12)
            if k < n:
                assert (np.count_nonzero(next_token_probs(logits, top_p=k / n + 1e-6),
                                         axis=-1) == k + 1).all(), (n, k)
    assert np.count_nonzero(next_token_probs(np.zeros(10), top_p=0.8)) == 8
    assert np.count_nonzero(next_token_probs(np.zeros(10), top_p=0.9)) == 9
    assert np.count_nonzero(next_token_probs(np.zeros(10), top_p=1e-9)) == 1  # at least one


def test_one_row_of_logits_works_with_top_k_and_top_p_as_a_row_of_a_batch():
    row = np.array([0.0, 1.0, 2.0, 2.0, -1.0])
    for kw in ({}, {"top_k": 1}, {"top_k": 3}, {"top_p": 0.5}, {"top_k": 4, "top_p": 0.9},
               {"temperature": 0.3, "top_k": 2}):
        p = next_token_probs(row, **kw)
        assert p.shape == (5,)
        np.testing.assert_array_equal(p, next_token_probs(row[None], **kw)[0])
    np.testing.assert_allclose(next_token_probs(np.array([0.0, 1.0, 2.0]), top_k=1), [0, 0, 1])
