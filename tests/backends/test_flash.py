"""Flash attention: equal to the composite graph, O(T) memory, zeros for fully masked rows."""

import tracemalloc

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.autograd import apply
from tinyattn.ops.attention import flash_attention


def _run(impl, q, k, v, mask=None, causal=False, scale=None, block=None):
    for x in (q, k, v):
        x.grad = None
    if impl == "flash" and block is not None:
        mask_t = None if mask is None else ta.tensor(mask)
        out = apply(flash_attention, q, k, v, mask_t, scale=scale, causal=causal, block=block)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                             scale=scale, impl=impl)
    g = np.random.default_rng(9).standard_normal(out.shape)
    out.backward(g)
    return [out.numpy()] + [x.grad.numpy() for x in (q, k, v)]


def _qkv(shape_q, shape_k, dv, seed=0):
    rng = np.random.default_rng(seed)
    q = ta.tensor(rng.standard_normal(shape_q), requires_grad=True)
    k = ta.tensor(rng.standard_normal(shape_k), requires_grad=True)
    v = ta.tensor(rng.standard_normal(shape_k[:-1] + (dv,)), requires_grad=True)
    return q, k, v


@pytest.mark.parametrize("T,S,block,causal", [
    (16, 16, 4, True), (16, 16, 4, False), (13, 13, 5, True),  # T not a multiple of the block
    (1, 1, 64, True), (1, 9, 4, False), (9, 5, 2, True), (5, 11, 3, True),
])
def test_flash_equals_composite(T, S, block, causal):  # noqa: N803
    q, k, v = _qkv((2, 3, T, 8), (2, 3, S, 8), 6)
    want = _run("composite", q, k, v, causal=causal, scale=0.3)
    got = _run("flash", q, k, v, causal=causal, scale=0.3, block=block)
    for name, a, b in zip(("out", "gq", "gk", "gv"), got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)


def test_explicit_mask_with_fully_masked_rows():
    q, k, v = _qkv((2, 7, 4), (2, 9, 4), 3)
    mask = np.random.default_rng(1).random((2, 7, 9)) > 0.4
    mask[0, 2] = False  # query 2 of batch 0 may attend nothing
    mask[1, 6] = False
    got = _run("flash", q, k, v, mask=mask, scale=0.5, block=3)
    want = _run("composite", q, k, v, mask=mask, scale=0.5)
    for a, b in zip(got, want, strict=True):
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    out, gq = got[0], got[1]
    assert np.all(out[0, 2] == 0) and np.all(out[1, 6] == 0)
    assert np.all(gq[0, 2] == 0) and np.all(gq[1, 6] == 0)


def test_broadcast_batch_dims():
    q, k, v = _qkv((1, 2, 5, 4), (3, 1, 6, 4), 2)
    want = _run("composite", q, k, v, causal=True, scale=0.5)
    got = _run("flash", q, k, v, causal=True, scale=0.5, block=2)
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_flash_gradcheck():
    q, k, v = _qkv((2, 6, 3), (2, 6, 3), 2, seed=4)
    assert ta.gradcheck(lambda a, b, c: apply(flash_attention, a, b, c, None, scale=0.8,
                                              causal=True, block=4), [q, k, v])


def test_float32_stays_float32():
    q, k, v = (ta.randn(2, 40, 8, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, impl="flash")
    out.sum().backward()
    assert out.dtype == np.float32 and all(x.grad.dtype == np.float32 for x in (q, k, v))


def test_auto_picks_flash_for_long_sequences_only():
    short = F.scaled_dot_product_attention(ta.randn(1, 8, 4, requires_grad=True),
                                           ta.randn(1, 8, 4), ta.randn(1, 8, 4), is_causal=True)
    assert short._node.op.name == "matmul"  # composite: the last node is P @ v
    T = ta.get_backend().flash_from  # noqa: N806
    q = ta.randn(1, T, 4, requires_grad=True)
    long = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert long._node.op.name == "flash_attention"
    float_mask = F.scaled_dot_product_attention(q, q, q, attn_mask=ta.zeros(T, T))
    assert float_mask._node.op.name == "matmul"  # additive masks take the composite path


def test_flash_refuses_a_float_mask():
    q = ta.randn(1, 4, 4)
    with pytest.raises(ta.DTypeError, match="bool mask"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=ta.zeros(4, 4), impl="flash")


def _peak_bytes(impl, T):  # noqa: N803
    rng = np.random.default_rng(0)
    q, k, v = (ta.tensor(rng.standard_normal((1, T, 32)).astype(np.float32), requires_grad=True)
               for _ in range(3))
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, impl=impl)
    out.sum().backward()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_flash_memory_is_a_fraction_of_composite_at_t_2048():
    composite = _peak_bytes("composite", 2048)
    flash = _peak_bytes("flash", 2048)
    assert composite > 2048 * 2048 * 4  # the T×T probabilities exist at least once
    assert flash <= composite / 4, (flash, composite)
