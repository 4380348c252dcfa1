"""Composite scaled dot-product attention (matmul, scaled masked softmax, matmul) against torch.

F.scaled_dot_product_attention with impl="composite", compared with torch's
scaled_dot_product_attention in float64: no mask, causal (T = S, T < S, T > S), bool and float
masks, custom scale, broadcast batch dims, and fully masked rows, which give zeros in the
output and every gradient, never NaN. (Flash against composite lives in test_flash.py.)
"""

import math

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.ops import attention as attn_ops

torch = pytest.importorskip("torch")


def qkv(q_shape, k_shape, dv, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(q_shape), rng.standard_normal(k_shape),
            rng.standard_normal(k_shape[:-1] + (dv,)))


def ours(q, k, v, g, mask=None, impl="composite", **kw):
    ts = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
    m = None if mask is None else ta.tensor(mask)
    out = F.scaled_dot_product_attention(*ts, attn_mask=m, impl=impl, **kw)
    out.backward(g)
    return [out.numpy()] + [t.grad.numpy() for t in ts]


def theirs(q, k, v, g, mask=None, **kw):
    ts = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    m = None if mask is None else torch.from_numpy(mask)
    out = torch.nn.functional.scaled_dot_product_attention(*ts, attn_mask=m, **kw)
    out.backward(torch.from_numpy(g))
    return [out.detach().numpy()] + [t.grad.numpy() for t in ts]


def assert_same(got, want):
    for name, a, b in zip(("out", "gq", "gk", "gv"), got, want, strict=True):
        assert a.shape == b.shape, name
        assert np.isfinite(a).all(), name
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)


def out_grad(q, v, seed=9):
    return np.random.default_rng(seed).standard_normal(q.shape[:-1] + v.shape[-1:])


@pytest.mark.parametrize("q_shape,k_shape,dv", [
    ((5, 4), (5, 4), 3),  # no batch
    ((2, 3, 6, 8), (2, 3, 6, 8), 8),  # (B, H, T, D)
    ((2, 7, 4), (2, 5, 4), 2),  # T > S
    ((2, 3, 4), (2, 9, 4), 5),  # T < S
    ((1, 2, 5, 4), (3, 1, 6, 4), 2),  # broadcast batch dims
])
@pytest.mark.parametrize("is_causal", [False, True])
def test_matches_torch(q_shape, k_shape, dv, is_causal):
    q, k, v = qkv(q_shape, k_shape, dv)
    g = out_grad(np.broadcast_to(q, np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + q.shape[-2:]),
                 v)
    assert_same(ours(q, k, v, g, is_causal=is_causal), theirs(q, k, v, g, is_causal=is_causal))


@pytest.mark.parametrize("scale", [None, 0.1, 2.0])
def test_scale(scale):
    q, k, v = qkv((2, 5, 4), (2, 5, 4), 3, seed=1)
    g = out_grad(q, v)
    assert_same(ours(q, k, v, g, scale=scale), theirs(q, k, v, g, scale=scale))


def test_bool_mask_broadcast_over_heads():
    q, k, v = qkv((2, 3, 5, 4), (2, 3, 6, 4), 4, seed=2)
    mask = np.random.default_rng(3).random((2, 1, 5, 6)) > 0.3
    mask[..., 0] = True  # every query sees at least one key
    g = out_grad(q, v)
    assert_same(ours(q, k, v, g, mask), theirs(q, k, v, g, mask))


def test_float_mask_is_added_to_the_scores():
    q, k, v = qkv((2, 5, 4), (2, 6, 4), 3, seed=4)
    rng = np.random.default_rng(5)
    mask = rng.standard_normal((5, 6))
    mask[rng.random((5, 6)) > 0.6] = -np.inf
    mask[:, 2] = 0.5  # every query keeps key 2
    g = out_grad(q, v)
    assert_same(ours(q, k, v, g, mask), theirs(q, k, v, g, mask))


def test_bool_mask_and_causal_together():
    q, k, v = qkv((2, 6, 4), (2, 6, 4), 3, seed=6)
    mask = np.ones((6, 6), dtype=bool)
    mask[:, 1] = False
    g = out_grad(q, v)
    for impl in ("composite", "flash"):  # torch's contract: one or the other, never both
        with pytest.raises(ValueError, match="attn_mask or is_causal=True, not both"):
            ours(q, k, v, g, mask, is_causal=True, impl=impl)
    got = ours(q, k, v, g, mask & F.causal_mask(6).numpy())  # combined by hand
    want = theirs(q, k, v, g, np.tril(mask))
    assert_same(got, want)


@pytest.mark.parametrize("impl", ["composite", "flash"])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_give_zeros_never_nan(impl, kind):
    if impl == "flash" and kind == "float":
        pytest.skip("the flash path takes bool masks only")
    q, k, v = qkv((2, 5, 4), (2, 6, 4), 3, seed=7)
    keep = np.random.default_rng(8).random((2, 5, 6)) > 0.4
    keep[0, 1] = False  # query 1 of batch 0 may attend nothing
    keep[1, 4] = False
    mask = keep if kind == "bool" else np.where(keep, 0.0, -np.inf)
    g = out_grad(q, v)
    got = ours(q, k, v, g, mask, impl=impl)
    for a in got:
        assert np.isfinite(a).all()
    out, gq, gk, gv = got
    np.testing.assert_array_equal(out[0, 1], 0)
    np.testing.assert_array_equal(out[1, 4], 0)
    np.testing.assert_array_equal(gq[0, 1], 0)
    np.testing.assert_array_equal(gq[1, 4], 0)
    # a fully masked query sends nothing to k or v: perturbing its g changes no gradient
    g2 = g.copy()
    g2[0, 1] += 100.0
    g2[1, 4] -= 100.0
    again = ours(q, k, v, g2, mask, impl=impl)
    for a, b in zip(got, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert_same(got, theirs(q, k, v, g, mask))  # torch 2.5+ also gives zeros there


def test_every_row_masked_gives_all_zeros():
    q, k, v = qkv((1, 3, 4), (1, 3, 4), 2, seed=10)
    mask = np.zeros((3, 3), dtype=bool)
    g = out_grad(q, v)
    for part in ours(q, k, v, g, mask):
        np.testing.assert_array_equal(part, 0)


def test_attention_weights_are_causal_distributions():
    q, k, _ = qkv((2, 6, 4), (2, 6, 4), 1, seed=11)
    w = F.attention_weights(ta.tensor(q), ta.tensor(k), is_causal=True).numpy()
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-14)
    np.testing.assert_array_equal(np.triu(w, k=1), 0)
    s = q @ k.swapaxes(-1, -2) / math.sqrt(4)
    s = np.where(np.tril(np.ones((6, 6), dtype=bool)), s, -np.inf)
    want = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(w, want / want.sum(-1, keepdims=True), rtol=1e-12)
    # by default (as in torch) no mask at all: every query sees every key
    full = F.attention_weights(ta.tensor(q), ta.tensor(k)).numpy()
    s = q @ k.swapaxes(-1, -2) / math.sqrt(4)
    want = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(full, want / want.sum(-1, keepdims=True), rtol=1e-12)


def test_composite_attention_gradchecks_with_masks():
    q, k, v = qkv((2, 4, 3), (2, 5, 3), 2, seed=12)
    keep = np.ones((4, 5), dtype=bool)
    keep[2] = False  # a fully masked row inside the gradient check
    keep[0, 3:] = False
    ts = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
    for mask, causal in ((None, True), (ta.tensor(keep), False),
                         (ta.tensor(np.where(keep, 0.3, -np.inf)), False)):
        assert ta.gradcheck(lambda a, b, c, m=mask, cz=causal: F.scaled_dot_product_attention(
            a, b, c, attn_mask=m, is_causal=cz, scale=0.7, impl="composite"), ts)


def test_composite_graph_is_matmul_softmax_matmul():
    q = ta.randn(1, 4, 8, requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True, impl="composite")
    names = []
    node = out._node
    while node is not None and node.op is not None:
        names.append(node.op.name)
        node = node.parents[0]
    assert names == ["matmul", "scaled_masked_softmax", "matmul"]


def test_float32_in_float32_out():
    q, k, v = (ta.randn(2, 5, 4, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, impl="composite")
    out.sum().backward()
    assert out.dtype == np.float32 and all(t.grad.dtype == np.float32 for t in (q, k, v))


@pytest.mark.parametrize("mask", ["causal", "bool", "float", None])
@pytest.mark.parametrize("impl", ["composite", "flash"])
def test_float16_attention_with_large_inputs_matches_float32_without_overflow(impl, mask):
    """Entries of a few hundred make q·k pass float16's 65504 (scaled by √scale each first,
    as torch's math path, too): the composite path takes the scores and softmax in float32 as
    torch's fused CPU kernels do, so output and gradients stay finite and match float32."""
    if impl == "flash" and mask == "float":
        pytest.skip("flash takes bool masks only")
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((1, 2, 6, 16)) * 300).astype(np.float16)
    g = rng.standard_normal((1, 2, 6, 16)).astype(np.float16)
    keep = np.tril(np.ones((6, 6), bool)) | (rng.random((6, 6)) < 0.3)
    masks = {"bool": keep, "float": np.where(keep, 0.0, -np.inf), None: None}
    kwargs = {"is_causal": True} if mask == "causal" else {"attn_mask": masks[mask]}

    def run(dtype):
        qkv = [ta.tensor(x.astype(dtype), requires_grad=True) for _ in range(3)]
        if kwargs.get("attn_mask") is not None:
            kwargs["attn_mask"] = ta.tensor(masks[mask].astype(
                bool if mask == "bool" else dtype))
        out = F.scaled_dot_product_attention(*qkv, impl=impl, **kwargs)
        out.backward(ta.tensor(g.astype(dtype)))
        return out, [t.grad for t in qkv]

    (out, grads), (want, want_grads) = run(np.float16), run(np.float32)
    assert out.dtype == np.float16 and all(d.dtype == np.float16 for d in grads)
    scale = float(np.abs(want.numpy()).max())
    np.testing.assert_allclose(out.numpy().astype(np.float32), want.numpy(), rtol=0,
                               atol=scale * 3e-3)
    for d, w in zip(grads, want_grads, strict=True):
        assert np.isfinite(d.numpy()).all()
        np.testing.assert_allclose(d.numpy().astype(np.float32), w.numpy(), rtol=0,
                                   atol=float(np.abs(w.numpy()).max()) * 2e-2 + 1e-3)


# ---- what torch refuses: integer masks and inputs, heads and batches that do not fit ---------

IMPLS = ["composite", "flash", "auto"]


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
@pytest.mark.parametrize("impl", IMPLS + ["dropout", "attention_weights", "op"])
def test_integer_masks_are_refused_on_every_path(impl, dtype):
    """A 0/1 integer mask is neither a bool mask nor an additive one: torch refuses it, and so
    does every entry point (not add it to the scores as a float mask)."""
    q, k, v = qkv((2, 4, 3), (2, 4, 3), 3)
    keep = np.tril(np.ones((4, 4))).astype(dtype)
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype to be bool or float"):
        torch.nn.functional.scaled_dot_product_attention(
            *map(torch.tensor, (q, k, v)), attn_mask=torch.tensor(keep))
    name = np.dtype(dtype).name
    match = (rf"^scaled_dot_product_attention: attn_mask must be bool \(True = may attend\) or "
             rf"float \(added to the scores\), got {name}")
    tq, tk, tv = map(ta.tensor, (q, k, v))
    calls = {
        "dropout": lambda: F.scaled_dot_product_attention(tq, tk, tv, ta.tensor(keep),
                                                          dropout_p=0.5),
        "attention_weights": lambda: F.attention_weights(tq, tk, ta.tensor(keep)),
        "op": lambda: attn_ops.attention_weights(tq, tk, ta.tensor(keep)),
    }
    call = calls.get(impl, lambda: F.scaled_dot_product_attention(tq, tk, tv, ta.tensor(keep),
                                                                  impl=impl))
    with pytest.raises(ta.DTypeError, match=match):
        call()


@pytest.mark.parametrize("which", ["q", "k", "v", "all"])
@pytest.mark.parametrize("impl", IMPLS)
def test_integer_q_k_v_are_refused(which, impl):
    arrays = dict(zip("qkv", qkv((2, 4, 3), (2, 4, 3), 3), strict=True))
    for name in "qkv" if which == "all" else which:
        arrays[name] = np.arange(24).reshape(2, 4, 3)
    with pytest.raises(RuntimeError):
        torch.nn.functional.scaled_dot_product_attention(
            *(torch.tensor(arrays[n]) for n in "qkv"))
    first = "q" if which == "all" else which
    with pytest.raises(ta.DTypeError, match=rf"^scaled_dot_product_attention: {first} must be "
                                            r"floating point, got int64"):
        F.scaled_dot_product_attention(*(ta.tensor(arrays[n]) for n in "qkv"), impl=impl)
    if which in ("q", "k"):
        with pytest.raises(ta.DTypeError, match=rf"^scaled_dot_product_attention: {first} must "
                                                "be floating point"):
            F.attention_weights(ta.tensor(arrays["q"]), ta.tensor(arrays["k"]))


@pytest.mark.parametrize("dtypes", [("float32", "float64", "float32"),
                                    ("float64", "float64", "float32"),
                                    ("float16", "float32", "float32")])
@pytest.mark.parametrize("impl", IMPLS + ["dropout", "attention_weights"])
def test_q_k_v_of_different_dtypes_are_refused_by_name(dtypes, impl):
    """torch: "Expected query, key, and value to have the same dtype"; tinyattn refused them
    only inside a matmul, under matmul's name."""
    arrays = [a.astype(d) for a, d in zip(qkv((2, 4, 3), (2, 4, 3), 3), dtypes, strict=True)]
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, arrays))
    q, k, v = map(ta.tensor, arrays)
    if impl == "attention_weights":  # q and k only
        v, dtypes = k, (dtypes[0], dtypes[1], dtypes[1])
        if dtypes[0] == dtypes[1]:
            return
    match = (rf"^scaled_dot_product_attention: q, k and v must have the same dtype, got q "
             rf"{dtypes[0]}, k {dtypes[1]}, v {dtypes[2]}")
    with pytest.raises(ta.DTypeError, match=match):
        if impl == "attention_weights":
            F.attention_weights(q, k)
        elif impl == "dropout":
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        else:
            F.scaled_dot_product_attention(q, k, v, impl=impl)


@pytest.mark.parametrize("shapes, fragment", [
    (((2, 6, 4, 5), (2, 2, 6, 5), (2, 2, 6, 5)), "pass enable_gqa=True"),
    (((2, 6, 4, 5), (2, 4, 6, 5), (2, 4, 6, 5)), "pass enable_gqa=True"),
    (((2, 6, 4, 5), (3, 6, 6, 5), (3, 6, 6, 5)), "do not broadcast"),
    (((2, 6, 4, 5), (2, 6, 6, 5), (3, 6, 6, 5)), "do not broadcast"),
], ids=["fewer kv heads", "heads not dividing", "batch", "v's batch"])
@pytest.mark.parametrize("impl", IMPLS)
def test_heads_and_batches_that_do_not_fit_are_named(shapes, fragment, impl):
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(s) for s in shapes]
    with pytest.raises(RuntimeError):
        torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, arrays))
    q, k, v = (fmt.replace("(", r"\(").replace(")", r"\)") for fmt in map(str, shapes))
    with pytest.raises(ta.ShapeError, match=rf"^scaled_dot_product_attention: q {q}, k {k}, v "
                                            rf"{v}: .*{fragment}"):
        F.scaled_dot_product_attention(*map(ta.tensor, arrays), impl=impl)


@pytest.mark.parametrize("shapes", [((2, 6, 4, 5), (1, 6, 6, 5), (1, 6, 6, 5)),
                                    ((2, 6, 4, 5), (6, 6, 5), (6, 6, 5)),
                                    ((6, 4, 5), (2, 6, 6, 5), (2, 6, 6, 5)),
                                    ((2, 6, 4, 5), (2, 1, 6, 5), (2, 1, 6, 5))],
                         ids=["batch 1", "no batch", "q without batch", "one kv head"])
@pytest.mark.parametrize("impl", ["composite", "flash"])
def test_batches_and_heads_that_broadcast_still_match_torch(shapes, impl):
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal(s) for s in shapes)
    out_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (4, 5)
    g = rng.standard_normal(out_shape)
    got, want = ours(q, k, v, g, impl=impl), theirs(q, k, v, g)
    for name, a, b in zip(("out", "gq", "gk", "gv"), got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=name)
