"""Fixes checked against torch 2.13: sigmoid and the activations made of it accurate in both
tails; float16 means divided in float32; attention masks that broadcast on every path, their
dtype rules, and a head dim of 0; bfloat16 refused by name; the edges of causal_mask, linear
and logsumexp; no NumPy overflow warnings from float16 softmaxes."""

import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn import dtypes, nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional
rng = np.random.default_rng(0)


def _both(x, requires_grad=True):
    """x as (ours, torch's) tensors of the same values and dtype."""
    return (ta.tensor(x, requires_grad=requires_grad),
            torch.tensor(x, requires_grad=requires_grad))


def _value_and_grads(out, inputs, cot):
    """out's values and the gradients of Σ out * cot for each input, as NumPy arrays."""
    lib = torch if isinstance(out, torch.Tensor) else ta
    out.backward(lib.tensor(cot))
    return [out.detach().numpy()] + [x.grad.numpy() for x in inputs]


# ---- A: sigmoid and its family in both tails ----------------------------------------------------

TAILS = {  # far enough out that 1 - (1 - σ) keeps no digit of σ, short of where σ underflows
    np.float16: [-17.0, -9.0, -8.0, -1.0, 0.0, 1.0, 8.0, 9.0, 17.0],
    np.float32: [-80.0, -40.0, -20.0, -17.0, -9.0, -1.0, 0.0, 1.0, 9.0, 17.0, 40.0],
    np.float64: [-700.0, -40.0, -20.0, -1.0, 0.0, 1.0, 40.0, 700.0],
}
RTOL = {np.float16: 2e-3, np.float32: 1e-5, np.float64: 1e-12}
ACTIVATIONS = {
    "sigmoid": (F.sigmoid, torch.sigmoid), "silu": (F.silu, TF.silu),
    "softplus": (F.softplus, TF.softplus), "mish": (F.mish, TF.mish),
    "logsigmoid": (F.logsigmoid, TF.logsigmoid), "elu": (F.elu, TF.elu),
    "selu": (F.selu, TF.selu),
}


@pytest.mark.parametrize("dtype", list(TAILS))
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_sigmoid_family_is_accurate_in_both_tails(name, dtype):
    x = np.array(TAILS[dtype], dtype=dtype)
    ours, theirs = ACTIVATIONS[name]
    (a, ta_x), (b, torch_x) = ((f(t), t) for f, t in zip((ours, theirs), _both(x), strict=True))
    got = _value_and_grads(a, [ta_x], np.ones_like(x))
    want = _value_and_grads(b, [torch_x], np.ones_like(x))
    tiny = 2 * float(np.finfo(dtype).smallest_subnormal)  # (a subnormal's last bit)
    for g, w, what in zip(got, want, ("value", "gradient"), strict=True):
        assert g.dtype == dtype, (what, g.dtype)
        np.testing.assert_allclose(g, w, rtol=RTOL[dtype], atol=tiny, err_msg=f"{name} {what}")


def test_sigmoid_never_overflows_and_keeps_nan():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = F.sigmoid(ta.tensor([-1e38, -np.inf, np.nan, np.inf, 1e38]))
    np.testing.assert_array_equal(out.numpy(), [0.0, 0.0, np.nan, 1.0, 1.0])


# ---- B: float16 means over more entries than float16 can count ----------------------------------


@pytest.mark.parametrize("reduce", [lambda x: x.mean(), lambda x: x.mean((0, 1)),
                                    lambda x: x.mean(1).mean(), lambda x: x.std()])
def test_float16_mean_gradient_past_65504_entries(reduce):
    x = rng.uniform(0.5, 1.5, (256, 512)).astype(np.float16)  # 131072 entries
    (a, ta_x), (b, torch_x) = ((reduce(t), t) for t in _both(x))
    got = _value_and_grads(a, [ta_x], np.ones(()))
    want = _value_and_grads(b, [torch_x], np.ones(()))
    assert np.count_nonzero(got[1]) > got[1].size // 2
    step = float(np.finfo(np.float16).smallest_subnormal)  # (gradients near 1/131072: subnormal)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-3, atol=step)


@pytest.mark.parametrize("loss", [
    lambda f, x, t: f.kl_div(x, t, reduction="batchmean"),
    lambda f, x, t: f.kl_div(x, t, reduction="mean"),
    lambda f, x, t: f.mse_loss(x, t),
    lambda f, x, t: f.l1_loss(x, t),
])
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")  # (torch's kl_div)
def test_float16_loss_means_over_a_large_batch(loss):
    x = rng.uniform(-2.0, -0.1, (70000, 1)).astype(np.float16)
    t = rng.uniform(0.1, 0.9, (70000, 1)).astype(np.float16)
    ta_x, torch_x = _both(x)
    a = loss(F, ta_x, ta.tensor(t))
    b = loss(TF, torch_x, torch.tensor(t))
    got = _value_and_grads(a, [ta_x], np.ones(()))
    want = _value_and_grads(b, [torch_x], np.ones(()))
    assert got[0] != 0 and np.all(got[1] != 0)
    # (the gradients, near 1/70000, are subnormal in float16: 6e-8 apart, and torch's fused
    # losses round once where ours round g / n, then its product)
    step = float(np.finfo(np.float16).smallest_subnormal)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float16
        np.testing.assert_allclose(g, w, rtol=4e-3, atol=2 * step)


# ---- C: any mask that broadcasts to (..., T, S), on the flash path too --------------------------

T_LONG, S_KEYS = 1030, 40  # T >= 1024: impl="auto" takes the flash path


@pytest.mark.parametrize("mask_shape", [(S_KEYS,), (1, S_KEYS), (T_LONG, 1), (1, 1, S_KEYS),
                                        (2, 1, T_LONG, S_KEYS)])
def test_flash_takes_every_mask_that_broadcasts(mask_shape):
    q, k, v = (rng.standard_normal(s) for s in ((2, 2, T_LONG, 8), (2, 2, S_KEYS, 8),
                                                (2, 2, S_KEYS, 4)))
    keep = rng.random(mask_shape) > 0.3
    cot = rng.standard_normal((2, 2, T_LONG, 4))
    results = []
    for impl in ("composite", "flash", "auto"):
        ts = [ta.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = F.scaled_dot_product_attention(*ts, attn_mask=ta.tensor(keep), impl=impl)
        results.append(_value_and_grads(out, ts, cot))
    for other in results[1:]:
        for g, w in zip(other, results[0], strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


# ---- D: head dim 0 ------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", ["composite", "flash", "auto"])
@pytest.mark.parametrize("causal", [False, True])
def test_head_dim_zero_gives_the_mean_of_v(impl, causal):
    q, k, v = np.zeros((1, 3, 0)), np.zeros((1, 4, 0)), rng.standard_normal((1, 4, 2))
    mine, theirs = zip(*(_both(a) for a in (q, k, v)), strict=True)
    cot = rng.standard_normal((1, 3, 2))
    got = _value_and_grads(F.scaled_dot_product_attention(*mine, is_causal=causal, impl=impl),
                           mine, cot)
    want = _value_and_grads(TF.scaled_dot_product_attention(*theirs, is_causal=causal),
                            theirs, cot)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    weights = F.attention_weights(ta.tensor(q), ta.tensor(k))
    np.testing.assert_array_equal(weights.numpy(), np.full((1, 3, 4), 0.25))


# ---- E: a float mask's dtype --------------------------------------------------------------------

FLOAT_DTYPES = [np.float16, np.float32, np.float64]


@pytest.mark.parametrize("mask_dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("q_dtype", FLOAT_DTYPES)
def test_float_mask_dtype_rules_match_torch(q_dtype, mask_dtype):
    q = np.random.default_rng(7).standard_normal((1, 3, 4)).astype(q_dtype)  # (its own draw:
    mask = np.triu(np.full((3, 3), -np.inf), 1).astype(mask_dtype)  # the same in any order)
    try:
        want = TF.scaled_dot_product_attention(*(torch.tensor(q),) * 3,
                                               attn_mask=torch.tensor(mask)).numpy()
    except RuntimeError as e:
        assert "attn_mask dtype" in str(e)
        for impl in ("composite", "auto"):
            with pytest.raises(ta.DTypeError, match=f"attn_mask.*{np.dtype(mask_dtype)}.*"
                                                    f"{np.dtype(q_dtype)}"):
                F.scaled_dot_product_attention(*(ta.tensor(q),) * 3, attn_mask=ta.tensor(mask),
                                               impl=impl)
        with pytest.raises(ta.DTypeError, match="attn_mask"):
            F.attention_weights(ta.tensor(q), ta.tensor(q), ta.tensor(mask))
        return
    got = F.scaled_dot_product_attention(*(ta.tensor(q),) * 3, attn_mask=ta.tensor(mask))
    assert got.dtype == q_dtype
    half = q_dtype == np.float16  # (float16: an output near 0 needs an absolute tolerance)
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-3 if half else 1e-5,
                               atol=2e-3 if half else 0)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("which", ["attn_mask", "key_padding_mask"])
@pytest.mark.parametrize("mask_dtype", [np.float16, np.float64])
def test_multihead_attention_refuses_float_masks_of_another_dtype(mask_dtype, which,
                                                                   need_weights):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    shape = (3, 3) if which == "attn_mask" else (2, 3)
    mask = np.zeros(shape, dtype=mask_dtype)
    with pytest.raises(RuntimeError):  # torch's rule, on both of its paths
        torch.nn.MultiheadAttention(4, 2, batch_first=True)(
            *(torch.tensor(x),) * 3, need_weights=need_weights, **{which: torch.tensor(mask)})
    with pytest.raises(ta.DTypeError, match="attn_mask"):
        nn.MultiheadAttention(4, 2, batch_first=True)(
            *(ta.tensor(x),) * 3, need_weights=need_weights, **{which: ta.tensor(mask)})


# ---- F: bfloat16 --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", torch.bfloat16])
def test_bfloat16_is_refused_by_name(dtype):
    with pytest.raises(ta.DTypeError, match="bfloat16.*float16, float32.*float64"):
        dtypes.as_dtype(dtype)


def test_torch_dtypes_read_as_numpy_dtypes():
    assert dtypes.as_dtype(torch.float16) == np.float16 and dtypes.as_dtype(torch.int64) == np.int64
    assert dtypes.as_dtype(torch.bool) == np.bool_ and dtypes.as_dtype("float32") == np.float32
    assert dtypes.as_dtype(np.float64) == np.float64


def test_bfloat16_tensors_are_refused_by_name():
    with pytest.raises(ta.DTypeError, match="bfloat16"):
        ta.tensor(torch.ones(2, dtype=torch.bfloat16))
    with pytest.raises(ta.DTypeError, match="bfloat16"):
        ta.ones(2).to("bfloat16")
    with pytest.raises(ta.DTypeError, match="bfloat16"):
        ta.zeros(2, dtype=torch.bfloat16)


def test_torch_tensors_and_dtypes_are_taken_where_a_tensor_or_dtype_is():
    for t in (torch.ones(2), torch.arange(3), torch.ones(2, dtype=torch.float64)):
        got = ta.tensor(t)
        assert str(got.dtype) == str(t.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(got.numpy(), t.numpy())
    assert ta.ones(2).to(torch.float64).dtype == ta.float64
    assert ta.zeros(2, dtype=torch.int32).dtype == np.int32
    assert ta.full((2,), 1, dtype=torch.float16).dtype == ta.float16


# ---- G: causal_mask, linear, logsumexp, float16 overflow warnings -------------------------------


def test_causal_mask_takes_sizes_only():
    np.testing.assert_array_equal(F.causal_mask(np.int64(2), 3).numpy(),
                                  [[True, False, False], [True, True, False]])
    assert F.causal_mask(0).shape == (0, 0)
    for bad in (2.5, True, "3"):
        with pytest.raises(TypeError, match=f"causal_mask.*{bad!r}"):
            F.causal_mask(bad)
        with pytest.raises(TypeError, match=f"causal_mask.*S.*{bad!r}"):
            F.causal_mask(3, bad)
    with pytest.raises(ValueError, match="causal_mask.*-1"):
        F.causal_mask(-1)
    with pytest.raises(ValueError, match="causal_mask.*S.*-2"):
        F.causal_mask(2, -2)


@pytest.mark.parametrize("x_shape,w_shape,b_shape", [
    ((2, 3), (3,), None), ((5, 2, 3), (3,), None), ((3,), (3,), None),
    ((5, 2, 3), (3,), ()), ((3,), (3,), ()),
    ((2, 3), (4, 3), ()), ((5, 2, 3), (4, 3), (1,)), ((2, 3), (4, 3), (4,)),
])
def test_linear_takes_torchs_weight_and_bias_shapes(x_shape, w_shape, b_shape):
    shapes = [x_shape, w_shape] + ([] if b_shape is None else [b_shape])
    arrays = [rng.standard_normal(s) for s in shapes]
    mine, theirs = zip(*(_both(a) for a in arrays), strict=True)
    a, b = F.linear(*mine), TF.linear(*theirs)
    assert a.shape == tuple(b.shape)
    cot = rng.standard_normal(b.shape)
    for g, w in zip(_value_and_grads(a, mine, cot), _value_and_grads(b, theirs, cot),
                    strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_linear_still_refuses_weights_and_biases_that_do_not_fit():
    with pytest.raises(ta.ShapeError, match="linear"):
        F.linear(ta.randn(2, 3), ta.randn(4))
    with pytest.raises(ta.ShapeError, match="linear.*bias"):
        F.linear(ta.randn(2, 3), ta.randn(4, 3), ta.randn(3))
    with pytest.raises(ta.ShapeError, match="linear"):
        F.linear(ta.randn(2, 3), ta.randn(2, 4, 3))


@pytest.mark.parametrize("dim", [(), []])
def test_logsumexp_over_no_dims_reduces_all_as_torch(dim):
    x = rng.standard_normal((2, 3))
    (a, ta_x), (b, torch_x) = ((t.logsumexp(dim, keepdim=True), t) for t in _both(x))
    assert a.shape == tuple(b.shape) == (1, 1)
    for g, w in zip(_value_and_grads(a, [ta_x], np.ones((1, 1))),
                    _value_and_grads(b, [torch_x], np.ones((1, 1))), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    with pytest.raises(RuntimeError):
        torch.logsumexp(torch.tensor(x), dim=dim)
    with pytest.raises(ta.DimError, match="logsumexp.*keepdim=True"):
        F.logsumexp(ta.tensor(x), dim=dim)
    assert F.logsumexp(ta.tensor(1.5), dim=dim).item() == 1.5  # a 0-d x: itself, as torch


@pytest.mark.parametrize("run", [
    lambda f, x: f.softmax(x, -1), lambda f, x: f.softmin(x, -1),
    lambda f, x: f.log_softmax(x, -1),
    lambda f, x: f.cross_entropy(x, (ta if f is F else torch).tensor([0, 1])),
    lambda f, x: f.cross_entropy(x, (ta if f is F else torch).tensor([1, 1]), reduction="none"),
])
def test_float16_softmaxes_overflow_silently_as_torch(run):
    x = np.array([[60000.0, -60000.0, 1.0], [-65000.0, 0.5, 65000.0]], dtype=np.float16)
    mine, theirs = _both(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = run(F, mine)
        got = _value_and_grads(a, [mine], np.ones(a.shape, dtype=np.float16))
    want = _value_and_grads(run(TF, theirs), [theirs], np.ones(a.shape, dtype=np.float16))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-3, atol=1e-7)
