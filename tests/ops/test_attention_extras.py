"""scaled_dot_product_attention's dropout_p and enable_gqa, and rotary position embeddings
(F.apply_rotary, nn.RotaryEmbedding): matched with torch, gradient-checked in float64."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn
from tinyattn.gradcheck import check_gradients

rng = np.random.default_rng(0)


def raises(cls, *fragments):
    return pytest.raises(cls, match=".*".join(fragments))


def leaf(*shape):
    return ta.tensor(rng.standard_normal(shape), requires_grad=True)


@pytest.mark.parametrize("hq,hkv,causal", [(4, 2, False), (6, 2, True), (3, 3, False),
                                           (4, 1, True)])
def test_grouped_query_attention_matches_torch(hq, hkv, causal):
    torch = pytest.importorskip("torch")
    q, k, v = leaf(2, hq, 5, 4), leaf(2, hkv, 5, 4), leaf(2, hkv, 5, 3)
    got = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    tq, tk, tv = (torch.tensor(x.numpy(), requires_grad=True) for x in (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal,
                                                            enable_gqa=True)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    cot = rng.standard_normal(got.shape)
    got.backward(ta.tensor(cot))
    want.backward(torch.tensor(cot))
    for x, tx in ((q, tq), (k, tk), (v, tv)):
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_grouped_query_attention_gradcheck_and_errors():
    q, k, v = leaf(1, 4, 3, 2), leaf(1, 2, 3, 2), leaf(1, 2, 3, 2)
    report = check_gradients(lambda a, b, c: F.scaled_dot_product_attention(
        a, b, c, enable_gqa=True, impl="composite"), [q, k, v])
    assert report.ok, report.message
    with raises(ta.ShapeError, "enable_gqa", "multiple of Hkv", r"\(1, 4, 3, 2\)",
                r"\(1, 3, 3, 2\)"):
        F.scaled_dot_product_attention(q, ta.randn(1, 3, 3, 2), ta.randn(1, 3, 3, 2),
                                       enable_gqa=True)


def test_attention_dropout_drops_weights_reproducibly():
    q, k, v = leaf(2, 2, 6, 4), leaf(2, 2, 6, 4), leaf(2, 2, 6, 3)
    ta.manual_seed(3)
    got = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=True)
    ta.manual_seed(3)
    want = F.dropout(F.attention_weights(q, k, is_causal=True), 0.4) @ v
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    plain = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not np.allclose(got.numpy(), plain.numpy())
    np.testing.assert_array_equal(
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True).numpy(),
        plain.numpy())
    # the mean over many draws is the output without dropout
    ta.manual_seed(0)
    mean = sum(F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=True).numpy()
               for _ in range(400)) / 400
    np.testing.assert_allclose(mean, plain.numpy(), atol=0.15)

    def seeded(a, b, c):  # the same dropout mask on every call of the finite differences
        ta.manual_seed(5)
        return F.scaled_dot_product_attention(a, b, c, dropout_p=0.5)
    report = check_gradients(seeded, [q, k, v])
    assert report.ok, report.message
    with raises(ValueError, "impl='flash'", "dropout"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, impl="flash")
    with raises(ValueError, "dropout_p", r"\[0, 1\]", "1.5"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)


# ---- rotary position embedding -----------------------------------------------------------------


def rope_reference(x, interleaved, offset=0, base=10000.0):
    """RoPE written the two usual ways: Hugging Face's rotate_half, Meta's complex product."""
    T, D = x.shape[-2:]  # noqa: N806
    angles = np.outer(np.arange(offset, offset + T), 1.0 / base ** (np.arange(0, D, 2) / D))
    if interleaved:
        z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * angles)
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = z.real, z.imag
        return out
    cos, sin = np.cos(np.concatenate([angles] * 2, -1)), np.sin(np.concatenate([angles] * 2, -1))
    rotated = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], -1)
    return x * cos + rotated * sin


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_matches_both_reference_forms_and_gradchecks(interleaved):
    x = leaf(2, 3, 5, 8)  # (B, H, T, D)
    rope = nn.RotaryEmbedding(8, max_seq_len=16, interleaved=interleaved).double()
    np.testing.assert_allclose(rope(x).numpy(), rope_reference(x.numpy(), interleaved),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rope(x, offset=7).numpy(),
                               rope_reference(x.numpy(), interleaved, offset=7), atol=1e-13)
    cos, sin = F.rotary_tables(8, 5, dtype=np.float64)
    report = check_gradients(lambda a: F.apply_rotary(a, cos, sin, interleaved), [x])
    assert report.ok, report.message


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_rotary_keeps_the_inputs_dtype(dtype):
    """The tables are made in float64 and cast to the input's dtype, cos and sin alike."""
    rope = nn.RotaryEmbedding(8, max_seq_len=16)
    x = np.random.default_rng(3).standard_normal((2, 5, 8)).astype(dtype)
    out = rope(ta.tensor(x))
    assert out.dtype == dtype
    np.testing.assert_allclose(out.numpy(), rope_reference(x.astype(np.float64), False),
                               rtol=1e-2 if dtype == np.float16 else 1e-5, atol=1e-2)


def test_rotary_scores_depend_only_on_relative_position():
    rope = nn.RotaryEmbedding(4).double()
    q, k = leaf(1, 6, 4), leaf(1, 6, 4)
    scores = rope(q) @ rope(k).mT
    shifted = rope(q, offset=11) @ rope(k, offset=11).mT
    np.testing.assert_allclose(scores.numpy(), shifted.numpy(), atol=1e-12)
    assert not np.allclose(scores.numpy(), (q @ k.mT).numpy())


def test_rotary_tables_are_buffers_out_of_the_state_dict_and_errors_name_shapes():
    rope = nn.RotaryEmbedding(4, max_seq_len=8)
    assert list(rope.state_dict()) == [] and len(list(rope.buffers())) == 2
    with raises(ta.ShapeError, "RotaryEmbedding", "positions 6..9", "max_seq_len=8"):
        rope(ta.randn(4, 4), offset=6)
    with raises(ta.ShapeError, "RotaryEmbedding", "even", "5"):
        nn.RotaryEmbedding(5)
    cos, sin = F.rotary_tables(4, 3)
    with raises(ta.ShapeError, "apply_rotary", r"\(T, dim/2\)", r"\(2, 4\)", r"\(3, 2\)"):
        F.apply_rotary(ta.randn(2, 4), cos, sin)


def test_apply_rotary_is_one_fused_node_with_the_op_by_op_numbers():
    """F.apply_rotary records one `rotary` node; in float32 its forward and gradient are those
    of the op-by-op form (slices, products, cat) within rounding, for both pair layouts."""
    rng = np.random.default_rng(0)
    for interleaved in (False, True):
        data = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
        cos, sin = F.rotary_tables(8, 6, dtype=np.float32)
        x, y = ta.tensor(data, requires_grad=True), ta.tensor(data, requires_grad=True)
        fused = F.apply_rotary(x, cos, sin, interleaved)
        composite = F._rotary_composite(y, cos, sin, interleaved)
        assert fused.grad_fn.op.name == "rotary" and fused.dtype == np.float32
        np.testing.assert_allclose(fused.numpy(), composite.numpy(), rtol=1e-6, atol=1e-6)
        g = rng.standard_normal(fused.shape).astype(np.float32)
        fused.backward(ta.tensor(g))
        composite.backward(ta.tensor(g))
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_apply_rotary_promotes_like_its_products_and_differentiates_tables_that_ask():
    cos, sin = F.rotary_tables(4, 3, dtype=np.float64)
    x = ta.randn(2, 3, 4)  # float32 with float64 tables: float64, as x * cos would be
    assert F.apply_rotary(x, cos, sin).dtype == np.float64
    assert F.apply_rotary(ta.tensor(np.ones((3, 4), dtype=np.int64)), cos, sin).dtype == \
        np.float64
    xd = leaf(2, 3, 4)
    cos_leaf, sin_leaf = (ta.tensor(t.numpy(), requires_grad=True) for t in (cos, sin))
    report = check_gradients(lambda a, c, s: F.apply_rotary(a, c, s), [xd, cos_leaf, sin_leaf])
    assert report.ok, report.message
    with raises(ta.ShapeError, "apply_rotary", r"\(T, dim/2\)", r"\(2, 3, 4\)", r"\(3, 3\)"):
        F.apply_rotary(xd, ta.tensor(np.ones((3, 3)), requires_grad=True), sin_leaf)
