"""F.multi_head_attention_forward against torch's: outputs, attention weights and the
gradients of every tensor argument (float64), for masks bool and float, key_padding_mask,
bias_k/bias_v, add_zero_attn, separate projection weights, static keys and values, unbatched
inputs, need_weights and average_attn_weights; gradcheck on each; torch's refusals."""

import re

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name

torch = pytest.importorskip("torch")
TF = torch.nn.functional

L, S, N, E, H = 3, 4, 2, 6, 2
D = E // H


def make(seed, kdim=E, vdim=E, separate=False, bias=True, bias_kv=False):
    """Every tensor argument, as NumPy float64 arrays (None where not used)."""
    rng = np.random.default_rng(seed)
    a = {"query": rng.standard_normal((L, N, E)), "key": rng.standard_normal((S, N, kdim)),
         "value": rng.standard_normal((S, N, vdim)),
         "out_proj_weight": rng.standard_normal((E, E)) / 2,
         "out_proj_bias": rng.standard_normal(E) if bias else None,
         "in_proj_bias": rng.standard_normal(3 * E) if bias else None}
    if separate:
        a.update(in_proj_weight=None, q_proj_weight=rng.standard_normal((E, E)) / 2,
                 k_proj_weight=rng.standard_normal((E, kdim)) / 2,
                 v_proj_weight=rng.standard_normal((E, vdim)) / 2)
    else:
        a["in_proj_weight"] = rng.standard_normal((3 * E, E)) / 2
    a["bias_k"] = rng.standard_normal((1, 1, E)) if bias_kv else None
    a["bias_v"] = rng.standard_normal((1, 1, E)) if bias_kv else None
    return a


def bool_mask(shape, seed):
    """True = may not attend, with key 0 always open (no query fully masked: torch's NaN)."""
    m = np.random.default_rng(seed).random(shape) < 0.4
    m[..., 0] = False
    return m


DIFF = ("query", "key", "value", "in_proj_weight", "in_proj_bias", "out_proj_weight",
        "out_proj_bias", "bias_k", "bias_v", "q_proj_weight", "k_proj_weight", "v_proj_weight",
        "static_k", "static_v")


def run(lib, arrays, masks, kw):
    """lib's forward on fresh leaves: (output, weights, {name: leaf})."""
    mod = ta if lib == "ta" else torch
    leaves = {k: mod.tensor(v, dtype=mod.float64, requires_grad=True)
              for k, v in arrays.items() if v is not None}
    for k, v in masks.items():
        if v is not None:
            float_mask = v.dtype == np.float64
            leaves[k] = mod.tensor(v, requires_grad=float_mask, dtype=mod.float64
                                   if float_mask else mod.bool)
    fn = F.multi_head_attention_forward if lib == "ta" else TF.multi_head_attention_forward
    args = {k: None for k in DIFF if k not in ("query", "key", "value")}
    args.update({k: v for k, v in leaves.items() if k not in ("query", "key", "value")})
    out, w = fn(leaves["query"], leaves["key"], leaves["value"], E, H,
                add_zero_attn=kw.pop("add_zero_attn", False), dropout_p=kw.pop("dropout_p", 0.0),
                **args, **kw)
    return out, w, leaves


def check(arrays, masks=None, **kw):
    """Values, shapes and dtypes as torch's, the gradients of a random projection of output
    and weights for every float tensor argument, and gradcheck on the output."""
    masks = masks or {}
    out, w, leaves = run("ta", arrays, masks, dict(kw))
    tout, tw, tleaves = run("torch", arrays, masks, dict(kw))
    assert out.shape == tuple(tout.shape) and out.dtype == ta.float64
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    if tw is None:
        assert w is None
    else:
        assert w.shape == tuple(tw.shape)
        np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    rng = np.random.default_rng(7)
    c_out = rng.standard_normal(tuple(tout.shape))
    loss = (out * ta.tensor(c_out)).sum()
    tloss = (tout * torch.tensor(c_out)).sum()
    if tw is not None:
        c_w = rng.standard_normal(tuple(tw.shape))
        loss = loss + (w * ta.tensor(c_w)).sum()
        tloss = tloss + (tw * torch.tensor(c_w)).sum()
    names = [k for k, v in tleaves.items() if v.requires_grad]
    # (materialized: static_k and static_v leave key and value unused, zero gradients)
    grads = ta.autograd.grad(loss, [leaves[k] for k in names], materialize_grads=True)
    tgrads = torch.autograd.grad(tloss, [tleaves[k] for k in names], materialize_grads=True)
    for name, g, tg in zip(names, grads, tgrads, strict=True):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-9, atol=1e-11, err_msg=name)
    _gradcheck(arrays, masks, kw, [k for k, g in zip(names, tgrads, strict=True) if g.any()])


def _gradcheck(arrays, masks, kw, names):
    _, _, leaves = run("ta", arrays, masks, dict(kw))
    order = list(names)

    def f(*xs):
        given = dict(zip(order, xs, strict=True))
        args = {k: given.get(k, v) for k, v in leaves.items()}
        q, k_, v_ = args.pop("query"), args.pop("key"), args.pop("value")
        opts = dict(kw)
        out, w = F.multi_head_attention_forward(
            q, k_, v_, E, H, add_zero_attn=opts.pop("add_zero_attn", False),
            dropout_p=opts.pop("dropout_p", 0.0),
            **{n: args.get(n) for n in DIFF[3:]}, **{m: args.get(m) for m in masks}, **opts)
        return out if w is None else out.sum() + (w * w).sum()

    assert ta.autograd.gradcheck(f, [leaves[k] for k in order])


def test_packed_projection_averaged_weights():
    check(make(0))


def test_weights_per_head():
    check(make(1), average_attn_weights=False)


def test_without_weights_and_without_biases():
    check(make(2, bias=False), need_weights=False)


def test_bool_attn_mask_and_key_padding_mask():
    check(make(3), {"attn_mask": bool_mask((L, S), 1), "key_padding_mask": bool_mask((N, S), 2)})


def test_float_masks_3d_and_key_padding_get_gradients():
    rng = np.random.default_rng(4)
    check(make(4), {"attn_mask": rng.standard_normal((N * H, L, S)),
                    "key_padding_mask": rng.standard_normal((N, S))}, average_attn_weights=False)


def test_bias_kv_and_zero_attention_with_masks():
    check(make(5, bias_kv=True), {"attn_mask": bool_mask((L, S), 3),
                                  "key_padding_mask": bool_mask((N, S), 4)}, add_zero_attn=True)


def test_zero_attention_alone_float_mask():
    check(make(6), {"attn_mask": np.random.default_rng(5).standard_normal((L, S))},
          add_zero_attn=True)


def test_separate_projection_weights_other_key_and_value_dims():
    check(make(7, kdim=5, vdim=3, separate=True), {"key_padding_mask": bool_mask((N, S), 5)},
          use_separate_proj_weight=True)


def test_static_key_and_value_replace_the_projections():
    a = make(8)
    rng = np.random.default_rng(8)
    a["static_k"] = rng.standard_normal((N * H, S + 1, D))
    a["static_v"] = rng.standard_normal((N * H, S + 1, D))
    check(a, {"key_padding_mask": bool_mask((N, S + 1), 6)})


def test_causal_hint_with_its_mask():
    causal = np.triu(np.ones((L, S), dtype=bool), 1)
    check(make(9), {"attn_mask": causal}, is_causal=True)


def test_unbatched_inputs_with_per_head_mask():
    a = make(10)
    for k in ("query", "key", "value"):
        a[k] = a[k][:, 0]
    check(a, {"attn_mask": bool_mask((H, L, S), 7), "key_padding_mask": bool_mask((S,), 8)},
          average_attn_weights=False)


def test_unbatched_without_weights():
    a = make(11, bias_kv=True)
    for k in ("query", "key", "value"):
        a[k] = a[k][:, 1]
    check(a, need_weights=False, add_zero_attn=True)


def test_dropout_only_when_training():
    """dropout_p with training=False changes nothing; p=1 while training drops every weight,
    leaving out_proj's bias (as torch's)."""
    check(make(12), dropout_p=0.7, training=False)
    check(make(13), dropout_p=1.0, training=True)


def test_dropout_keeps_or_scales_each_weight():
    a = make(14)
    out, w, _ = run("ta", a, {}, {"dropout_p": 0.5, "average_attn_weights": False})
    _, tw, _ = run("torch", a, {}, {"dropout_p": 0.0, "average_attn_weights": False})
    w, tw = w.detach().numpy(), tw.detach().numpy()
    kept = w != 0
    assert kept.any() and (~kept).any()
    np.testing.assert_allclose(w[kept], 2 * tw[kept], rtol=1e-10)


def test_same_result_as_the_multihead_attention_module():
    mha = ta.nn.MultiheadAttention(E, H, add_bias_kv=True, dtype=ta.float64)
    q = ta.tensor(np.random.default_rng(15).standard_normal((L, N, E)))
    kpm = ta.tensor(bool_mask((N, L), 9))
    want, want_w = mha(q, q, q, key_padding_mask=kpm)
    got, got_w = F.multi_head_attention_forward(
        q, q, q, E, H, mha.in_proj_weight, mha.in_proj_bias, mha.bias_k, mha.bias_v, False, 0.0,
        mha.out_proj.weight, mha.out_proj.bias, key_padding_mask=kpm)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(got_w.detach().numpy(), want_w.detach().numpy(), rtol=1e-12)


# ---- refusals, torch's exception types -----------------------------------------------------


def refusal(fn_kwargs, arrays=None):
    """(tinyattn's exception, torch's exception type) for one bad call."""
    arrays = arrays or make(20)
    results = []
    for lib in ("ta", "torch"):
        mod = ta if lib == "ta" else torch
        t = {k: None if v is None else mod.tensor(v) for k, v in arrays.items()}
        kw = {k: (mod.tensor(v) if isinstance(v, np.ndarray) else v)
              for k, v in fn_kwargs.items()}
        fn = F.multi_head_attention_forward if lib == "ta" else TF.multi_head_attention_forward
        args = dict(embed_dim_to_check=E, num_heads=H, in_proj_weight=t["in_proj_weight"],
                    in_proj_bias=t["in_proj_bias"], bias_k=t["bias_k"], bias_v=t["bias_v"],
                    add_zero_attn=False, dropout_p=0.0, out_proj_weight=t["out_proj_weight"],
                    out_proj_bias=t["out_proj_bias"])
        args.update(kw)
        with pytest.raises(Exception) as info:
            fn(t["query"], t["key"], t["value"], **args)
        results.append(info)
    return results[0].value, results[1].type


@pytest.mark.parametrize("kwargs,words", [
    ({"embed_dim_to_check": E + 1}, "expecting embedding dimension of 7"),
    ({"num_heads": 4}, "not divisible by num_heads 4"),
    ({"key_padding_mask": np.zeros((N, S + 1), dtype=bool)}, r"key_padding_mask.*\(2, 5\)"),
    ({"key_padding_mask": np.zeros((N, S), dtype=np.int64)}, "key_padding_mask must be bool"),
    ({"attn_mask": np.zeros((L, S + 1), dtype=bool)}, r"attn_mask is \(3, 5\).*\(3, 4\)"),
    ({"attn_mask": np.zeros((N, L, S), dtype=bool)}, r"attn_mask is \(2, 3, 4\).*\(4, 3, 4\)"),
    ({"is_causal": True}, "is_causal=True is a hint that needs attn_mask"),
    ({"bias_k": np.zeros((1, 1, E))}, "bias_k is set"),
    ({"use_separate_proj_weight": True}, "q_proj_weight is None"),
])
def test_bad_arguments_raise_torchs_exception_types(kwargs, words):
    err, torch_type = refusal(kwargs)
    assert isinstance(err, torch_type), (type(err), torch_type)
    assert isinstance(err, ta.errors.TinyattnError)
    assert "multi_head_attention_forward" in str(err)
    assert re.search(words, str(err)), str(err)


def test_mismatched_ranks_are_refused_as_torch_refuses_them():
    a = make(21)
    a["key"] = a["key"][:, 0]
    err, torch_type = refusal({}, a)
    assert isinstance(err, torch_type) and isinstance(err, ta.errors.ShapeError)
    assert "query (3, 2, 6), key (4, 6)" in str(err)
