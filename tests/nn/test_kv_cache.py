"""KV caching in TinyTransformer: fed in pieces through a KVCache, the model gives the logits
and attention maps of one full run (learned positions, rotary, qk_norm, RMSNorm), generate with
and without the cache writes the same tokens (past max_len too), and the errors."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.nn.transformer import KVCache

CONFIGS = [{}, {"rotary": True}, {"qk_norm": True, "norm": "rms"}, {"bias": False, "tie": False}]


def _model(**kwargs):
    ta.manual_seed(0)
    return ta.nn.TinyTransformer(vocab_size=11, d_model=32, n_heads=4, n_layers=2, max_len=12,
                                 **kwargs).eval()


@pytest.mark.parametrize("kwargs", CONFIGS)
@pytest.mark.parametrize("pieces", [(5, 1, 1, 3), (1, 1, 1, 1, 1), (10,), (4, 6), (3, 2, 2)])
def test_pieces_through_the_cache_give_one_full_runs_logits_and_maps(kwargs, pieces):
    model = _model(**kwargs)
    ids = np.random.default_rng(1).integers(0, 11, (2, sum(pieces)))
    with ta.no_grad():
        full, full_maps = model(ta.tensor(ids), return_attention=True)
        np.testing.assert_array_equal(model(ids).numpy(), full.numpy())  # (an array as idx)
        cache, start, got, maps = KVCache(), 0, [], []
        for n in pieces:
            logits, layer_maps = model(ta.tensor(ids[:, start:start + n]), return_attention=True,
                                       cache=cache)
            got.append(logits.numpy())
            maps.append(layer_maps)
            start += n
    assert cache.length == sum(pieces) and set(cache.layers) == {0, 1}
    assert cache.layers[0]["k"].shape == (2, 4, sum(pieces), 8)
    np.testing.assert_allclose(np.concatenate(got, 1), full.numpy(), rtol=1e-5, atol=1e-5)
    start = 0
    for n, layer_maps in zip(pieces, maps, strict=True):
        for layer, w in enumerate(layer_maps):  # (B, H, n, start + n): rows of the full map
            assert w.shape == (2, 4, n, start + n)
            want = full_maps[layer].numpy()[:, :, start:start + n, :start + n]
            np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-6)
        start += n


@pytest.mark.parametrize("kwargs", CONFIGS[:2])
def test_generate_writes_the_same_tokens_with_and_without_the_cache(kwargs):
    """Greedy and sampled, for 20 new tokens: the cache fills at max_len 12 and generate goes
    on with the last 12 tokens, as without it."""
    model = _model(**kwargs)
    prompt = ta.tensor([[1, 2, 3], [4, 5, 6]])
    cached = model.generate(prompt, 20, greedy=True)
    plain = model.generate(prompt, 20, greedy=True, use_cache=False)
    np.testing.assert_array_equal(cached.numpy(), plain.numpy())
    cached = model.generate(prompt, 15, temperature=0.8, top_k=5,
                            rng=np.random.default_rng(3))
    plain = model.generate(prompt, 15, temperature=0.8, top_k=5, use_cache=False,
                           rng=np.random.default_rng(3))
    np.testing.assert_array_equal(cached.numpy(), plain.numpy())
    assert cached.shape == (2, 18)


def test_a_cache_refuses_more_tokens_than_max_len():
    model = _model()
    cache = KVCache()
    with ta.no_grad():
        model(ta.tensor([[1] * 10]), cache=cache)
        with pytest.raises(ta.ShapeError, match="a sequence of 13 tokens is longer than max_len "
                                                "12"):
            model(ta.tensor([[1, 2, 3]]), cache=cache)
    assert "10 tokens, 2 layers" in repr(cache)
