"""nn modules beyond the transformer: the small layers, containers, RMSNorm, Embedding's
padding_idx, MultiheadAttention (parity with torch given the same weights), buffers and the
Module helpers (apply, named_modules, requires_grad_, half/float/double)."""

from collections import OrderedDict

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


# ---- small layers ------------------------------------------------------------------------------


SIMPLE = [
    ("Identity", (), ()),
    ("Sigmoid", (), ()),
    ("SiLU", (), ()),
    ("Softmax", (1,), (1,)),
    ("LogSoftmax", (0,), (0,)),
    ("Flatten", (), ()),
    ("Flatten", (0, 1), (0, 1)),
    ("Unflatten", (2, (2, 2)), (2, (2, 2))),
    ("Unflatten", (-1, (-1, 2)), (-1, (-1, 2))),
    ("RMSNorm", (4,), (4,)),
    ("RMSNorm", ((3, 4), 1e-3, False), ((3, 4), 1e-3, False)),
    ("LayerNorm", ((3, 4), 1e-3, False), ((3, 4), 1e-3, False)),
    ("LayerNorm", (4, 1e-5, True, False), (4, 1e-5, True, False)),  # bias=False: a gain only
]


@pytest.mark.parametrize("name,args,targs", SIMPLE, ids=[f"{s[0]}{s[1]}" for s in SIMPLE])
def test_simple_modules_match_torch_and_gradcheck(name, args, targs):
    torch = pytest.importorskip("torch")
    x = leaf(2, 3, 4)
    ours = getattr(nn, name)(*args)
    ours.double()
    theirs = getattr(torch.nn, name)(*targs).double()
    # the same parameters (none without elementwise_affine), given the same random values
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    for mine, their in zip(ours.parameters(), theirs.parameters(), strict=True):
        values = rng.standard_normal(mine.shape)
        mine.data[...] = values
        with torch.no_grad():
            their.copy_(torch.tensor(values))
    tx = torch.tensor(x.numpy(), requires_grad=True)
    got, want = ours(x), theirs(tx)
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-14)
    cot = rng.standard_normal(got.shape)
    got.backward(ta.tensor(cot))
    want.backward(torch.tensor(cot))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-13)
    report = check_gradients(lambda a: ours(a), [x.detach().requires_grad_()])
    assert report.ok, report.message


def test_rms_norm_weight_gradient_and_default_eps():
    torch = pytest.importorskip("torch")
    x, w = leaf(3, 5), leaf(5)
    report = check_gradients(lambda a, b: F.rms_norm(a, 5, b), [x, w])
    assert report.ok, report.message
    small = np.full((1, 4), 1e-5, dtype=np.float32)  # eps=None: float32's epsilon, as torch
    got = F.rms_norm(ta.tensor(small), (4,))
    want = torch.nn.functional.rms_norm(torch.tensor(small), (4,))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)



def test_rms_norm_default_eps_in_half_precision_is_float32s_as_torchs():
    """eps=None is the epsilon of the type torch computes in: float32 for float16 input (its
    own epsilon, 1e-3, would swamp small activations' mean square)."""
    torch = pytest.importorskip("torch")
    x = np.array([[0.03, -0.02, 0.01, 0.04]], np.float16)
    want = torch.nn.RMSNorm(4, dtype=torch.float16)(torch.tensor(x)).detach().float().numpy()
    got = nn.RMSNorm(4, dtype=ta.float16)(ta.tensor(x))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.float().numpy(), want, rtol=2e-3)
    np.testing.assert_allclose(F.rms_norm(ta.tensor(x), (4,)).float().numpy(), want, rtol=2e-3)


@pytest.mark.parametrize("make", [
    lambda lib, i: lib.nn.LayerNorm(i(4)), lambda lib, i: lib.nn.RMSNorm(i(4)),
    lambda lib, i: lib.nn.LayerNorm([i(4)]), lambda lib, i: lib.nn.RMSNorm((i(4),)),
    lambda lib, i: lib.nn.GroupNorm(i(2), i(4)), lambda lib, i: lib.nn.BatchNorm1d(i(4)),
    lambda lib, i: lib.nn.Linear(i(4), i(3)),
], ids=["LayerNorm", "RMSNorm", "LayerNorm-list", "RMSNorm-tuple", "GroupNorm", "BatchNorm1d",
        "Linear"])
def test_module_sizes_may_be_numpy_integers_as_in_torch(make):
    torch = pytest.importorskip("torch")
    for i in (np.int64, np.int32):
        ours, theirs = make(ta, i), make(torch, i)
        assert ours(ta.ones(2, 4)).shape == tuple(theirs(torch.ones(2, 4)).shape)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        if hasattr(ours, "normalized_shape"):
            assert ours.normalized_shape == (4,) and type(ours.normalized_shape[0]) is int

@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_every_norm_of_the_transformer_uses_eps_1e_5(kind):
    """nanoGPT's 1e-5 in each norm of the model (LayerNorm's default, not RMSNorm's float32
    epsilon), the q and k norms included: on inputs of RMS 1e-3 the eps decides the output."""
    model = nn.TinyTransformer(11, 8, 2, 2, max_len=4, norm=kind, qk_norm=True)
    norms = [(name, m) for name, m in model.named_modules()
             if isinstance(m, (nn.LayerNorm, nn.RMSNorm))]
    assert len(norms) == 2 * 2 + 2 * 2 + 1  # ln1, ln2, q_norm, k_norm per block; ln_f
    for name, norm in norms:
        n = norm.normalized_shape[-1]
        x = np.resize(np.array([1e-3, -1e-3], np.float32), (1, n))  # mean 0, mean square 1e-6
        np.testing.assert_allclose(norm(ta.tensor(x)).numpy(), x / np.sqrt(1e-6 + 1e-5),
                                   rtol=1e-4, err_msg=name)


def test_unflatten_and_rms_norm_errors_name_the_shapes():
    with raises(ta.ShapeError, "Unflatten", "size 4", r"\(2, 3, 4\)", r"\(3, 3\)"):
        nn.Unflatten(-1, (3, 3))(ta.randn(2, 3, 4))
    with raises(ta.DimError, "Unflatten", "dim 5", r"\(2, 3\)"):
        nn.Unflatten(5, (1, 3))(ta.randn(2, 3))
    with raises(ta.ShapeError, "rms_norm", r"\(5,\)", r"\(2, 3\)"):
        F.rms_norm(ta.randn(2, 3), 5)


def test_embedding_padding_idx_gets_no_gradient_like_torch():
    torch = pytest.importorskip("torch")
    ours = nn.Embedding(6, 3, padding_idx=-2)
    assert ours.padding_idx == 4 and np.all(ours.weight.numpy()[4] == 0)
    theirs = torch.nn.Embedding(6, 3, padding_idx=4)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(rng.standard_normal((6, 3))))
    ours.load_state_dict({"weight": theirs.weight.detach().numpy()})  # pad row nonzero now
    ids = np.array([[4, 1, 4], [0, 5, 2]])
    got, want = ours(ta.tensor(ids)), theirs(torch.tensor(ids))
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-6)
    cot = rng.standard_normal(got.shape).astype(np.float32)
    got.backward(ta.tensor(cot))
    want.backward(torch.tensor(cot))
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-6)
    assert np.all(ours.weight.grad.numpy()[4] == 0)
    with raises(ta.DimError, "Embedding", "padding_idx 6", "6 embeddings"):
        nn.Embedding(6, 3, padding_idx=6)


# ---- containers --------------------------------------------------------------------------------


def test_module_dict_registers_its_modules_by_name():
    heads = nn.ModuleDict({"cls": nn.Linear(4, 2), "box": nn.Linear(4, 4)})
    heads["extra"] = nn.Identity()
    assert list(heads) == ["cls", "box", "extra"] and "box" in heads and len(heads) == 3
    assert [k for k, _ in heads.named_parameters()] == ["cls.weight", "cls.bias", "box.weight",
                                                        "box.bias"]
    del heads["box"]
    assert list(heads.keys()) == ["cls", "extra"]
    with raises(TypeError, "ModuleDict", "'x'", "Module", "int"):
        heads["x"] = 3


def test_parameter_list_registers_its_parameters_by_index():
    ps = nn.ParameterList([ta.randn(2), nn.Parameter(ta.randn(3))])
    ps.append(ta.ones(4))
    assert [k for k, _ in ps.named_parameters()] == ["0", "1", "2"]
    assert all(p.requires_grad for p in ps) and ps[-1].shape == (4,)
    ps[0] = ta.zeros(5)
    assert ps[0].shape == (5,) and len(list(ps.parameters())) == 3


def test_parameter_dict_registers_its_parameters_by_key_as_torch():
    torch = pytest.importorskip("torch")
    values = {"w": np.ones((2, 3)), "b": np.zeros(3)}
    ours = nn.ParameterDict({k: ta.tensor(v) for k, v in values.items()})
    theirs = torch.nn.ParameterDict({k: torch.tensor(v) for k, v in values.items()})
    assert list(ours.keys()) == list(theirs.keys()) == ["b", "w"]  # a dict: sorted by key
    pairs = [("w", np.ones(1)), ("b", np.ones(1))]  # in their order, as an OrderedDict
    theirs_ordered = torch.nn.ParameterDict(OrderedDict((k, torch.tensor(v)) for k, v in pairs))
    assert list(nn.ParameterDict(OrderedDict((k, ta.tensor(v)) for k, v in pairs))) == list(
        theirs_ordered) == ["w", "b"]
    assert list(nn.ParameterDict(nn.ParameterDict(OrderedDict(pairs)))) == ["w", "b"]
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in ours.values())

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.params = nn.ParameterDict({"scale": ta.ones(3)})
            self.params.update([("shift", ta.zeros(3))])

        def forward(self, x):
            return x * self.params["scale"] + self.params.get("shift")

    model = Model()
    assert [k for k, _ in model.named_parameters()] == ["params.scale", "params.shift"]
    model(ta.ones(3)).sum().backward()
    assert model.params["scale"].grad.tolist() == [1.0, 1.0, 1.0]
    popped = model.params.pop("shift")
    assert popped.shape == (3,) and "shift" not in model.params and len(model.params) == 1
    assert list(model.params) == ["scale"] and model.params.get("shift") is None
    assert model.params.get("shift", 5) == 5
    with pytest.raises(KeyError, match="ParameterDict: a key must be a non-empty string without "
                                       "'.', got 'a.b'"):
        model.params["a.b"] = ta.ones(1)
    with pytest.raises(KeyError, match="got 3"):
        model.params[3] = ta.ones(1)


# ---- Module helpers ----------------------------------------------------------------------------


class WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("count", ta.tensor([0]))
        self.register_buffer("scale", ta.ones(2))
        self.register_buffer("cache", ta.zeros(2), persistent=False)
        self.register_buffer("nothing", None)


def test_buffers_sit_in_the_state_dict_in_torchs_order_and_load_back():
    m = WithBuffers()
    assert list(m.state_dict()) == ["count", "scale", "lin.weight", "lin.bias"]
    assert [k for k, _ in m.named_buffers()] == ["count", "scale", "cache"]
    assert len(list(m.parameters())) == 2
    m.scale = ta.full((2,), 3.0)  # assigning to a buffer's name replaces the buffer
    saved = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    other = WithBuffers()
    other.load_state_dict(saved)
    np.testing.assert_array_equal(other.scale.numpy(), [3.0, 3.0])
    with raises(ta.CheckpointError, "nothing was loaded", "missing keys: count"):
        other.load_state_dict({k: v for k, v in saved.items() if k != "count"})
    with raises(TypeError, "cannot assign 'list' as buffer 'count'", "Tensor or None expected"):
        m.count = [1]
    with raises(KeyError, "register_buffer", "'lin'"):
        m.register_buffer("lin", ta.zeros(1))
    for bad in ("", "a.b"):  # a name state_dict could not key
        with raises(KeyError, "register_buffer", "non-empty string without '.'"):
            m.register_buffer(bad, ta.zeros(1))


def test_to_a_backend_by_name_or_object_moves_and_keeps_the_values():
    m = WithBuffers()
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    for target in ("numpy", "NumPy", ta.backends.backend("numpy")):
        assert m.to(target) is m
        for k, v in m.state_dict().items():
            assert v.backend.name == "numpy"
            np.testing.assert_array_equal(v.numpy(), before[k], k)
            assert v.dtype == before[k].dtype, k


def test_half_float_double_cast_floating_parameters_and_buffers_only():
    m = WithBuffers()
    for cast, dtype in (("double", np.float64), ("half", np.float16), ("float", np.float32)):
        assert getattr(m, cast)() is m
        assert m.lin.weight.dtype == dtype and m.scale.dtype == dtype and m.cache.dtype == dtype
        assert m.count.dtype == np.int64
    with raises(ta.DTypeError, "Module.to", "float dtype", "int64"):
        m.to("int64")


def test_apply_visits_children_first_and_named_modules_names_them():
    m = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Linear", "ReLU", "Linear", "Sequential", "Sequential"]
    assert [p for p, _ in m.named_modules()] == ["", "0", "1", "1.0", "1.1"]
    m.apply(lambda mod: nn.init.zeros_(mod.weight) if isinstance(mod, nn.Linear) else None)
    assert all(float(p.abs().sum()) == 0 for n, p in m.named_parameters() if "weight" in n)


def test_requires_grad_freezes_and_unfreezes():
    m = nn.Linear(2, 2)
    assert m.requires_grad_(False) is m
    assert not any(p.requires_grad for p in m.parameters())
    y = m(ta.randn(1, 2))
    assert not y.requires_grad
    m.requires_grad_()
    assert all(p.requires_grad for p in m.parameters())


# ---- MultiheadAttention ------------------------------------------------------------------------


def _mha_pair(torch, **kw):
    theirs = torch.nn.MultiheadAttention(8, 2, **kw).double()
    ours = nn.MultiheadAttention(8, 2, **kw).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


MHA_CASES = [
    ({}, {}),
    ({"batch_first": True}, {"need_weights": False}),
    ({"batch_first": True}, {"average_attn_weights": False, "key_padding_mask": "bool",
                             "attn_mask": "bool"}),
    ({}, {"key_padding_mask": "bool", "attn_mask": "float"}),
    ({"batch_first": True}, {"attn_mask": "float3d", "average_attn_weights": False}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {"key_padding_mask": "bool"}),
    ({"add_bias_kv": True, "add_zero_attn": True, "batch_first": True}, {}),  # no mask to pad
    ({"kdim": 6, "vdim": 5, "bias": False, "batch_first": True}, {"attn_mask": "bool"}),
    ({"batch_first": True}, {"unbatched": True, "key_padding_mask": "bool"}),
    ({"batch_first": True}, {"is_causal": True, "attn_mask": "causal", "need_weights": False}),
]


def test_a_fully_masked_query_attends_to_nothing_zeros_not_nan():
    """A query whose every key is masked (attn_mask, key_padding_mask or both) gets zero
    weights and a zero attention output, and finite gradients; torch's MultiheadAttention gives
    NaN there (a documented difference: tinyattn's softmax of a row of -inf is zeros)."""
    torch = pytest.importorskip("torch")
    ours, theirs = _mha_pair(torch, batch_first=True)
    x = np.random.default_rng(3).standard_normal((2, 3, 8))
    mask = np.zeros((3, 3), bool)
    mask[1] = True  # query 1 may see no key
    pad = np.zeros((2, 3), bool)
    pad[1, :2] = True  # in batch 1, keys 0 and 1 are padding: with the mask, query 2 sees key 2
    xs = ta.tensor(x, requires_grad=True)
    out, w = ours(xs, xs, xs, attn_mask=ta.tensor(mask), key_padding_mask=ta.tensor(pad))
    tout, tw = theirs(*[torch.tensor(x)] * 3, attn_mask=torch.tensor(mask),
                      key_padding_mask=torch.tensor(pad))
    tout, tw = tout.detach().numpy(), tw.detach().numpy()
    assert np.isnan(tout[:, 1]).all() and np.isnan(tw[:, 1]).all()
    bias = ours.out_proj.bias.numpy()
    np.testing.assert_array_equal(out.numpy()[:, 1], np.broadcast_to(bias, (2, 8)))
    np.testing.assert_array_equal(w.numpy()[:, 1], 0)
    rows = [0, 2]  # the other queries agree with torch
    np.testing.assert_allclose(out.numpy()[:, rows], tout[:, rows], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.numpy()[:, rows], tw[:, rows], rtol=1e-10, atol=1e-12)
    (out ** 2).sum().backward()
    assert np.isfinite(xs.grad.numpy()).all()


def test_multihead_attention_says_a_fully_masked_query_gives_zeros_not_nan():
    """The difference from torch above is written where the mask conventions are."""
    doc = " ".join(nn.MultiheadAttention.__doc__.split())
    assert "every key is masked" in doc and "zero weights" in doc and "NaN" in doc
    assert "out_proj" in doc  # what the output is then: out_proj's bias


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")  # torch's
@pytest.mark.parametrize("ctor,call", MHA_CASES, ids=[str(i) for i in range(len(MHA_CASES))])
def test_multihead_attention_matches_torch(ctor, call):
    torch = pytest.importorskip("torch")
    ours, theirs = _mha_pair(torch, **ctor)
    call = dict(call)
    rng = np.random.default_rng(MHA_CASES.index((ctor, call)))  # (not the order tests run in)
    N, L, S, H = 3, 4, 5, 2  # noqa: N806
    bf, unbatched = ctor.get("batch_first", False), call.pop("unbatched", False)

    def seq(n, d):
        if unbatched:
            return rng.standard_normal((n, d))
        return rng.standard_normal((N, n, d) if bf else (n, N, d))

    arrays = [seq(L, 8), seq(S, ctor.get("kdim", 8)), seq(S, ctor.get("vdim", 8))]
    keep_first = np.arange(S) > 0  # key 0 is never masked: no row is fully masked (see below)
    masks = {"bool": (rng.random((L, S)) < 0.3) & keep_first, "float": rng.standard_normal((L, S)),
             "float3d": rng.standard_normal((N * H, L, S)), "causal": np.triu(np.ones((L, S),
                                                                                   bool), 1)}
    if "attn_mask" in call:
        call["attn_mask"] = masks[call["attn_mask"]]
    if "key_padding_mask" in call:
        kpm = np.zeros((N, S), bool)
        kpm[0, -2:] = True
        call["key_padding_mask"] = kpm[0] if unbatched else kpm
    ins = [ta.tensor(a, requires_grad=True) for a in arrays]
    tins = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, w = ours(*ins, **{k: ta.tensor(v) if isinstance(v, np.ndarray) else v
                           for k, v in call.items()})
    tout, tw = theirs(*tins, **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                                for k, v in call.items()})
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert (w is None) == (tw is None)
    if w is not None:
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)
    cot = rng.standard_normal(out.shape)
    out.backward(ta.tensor(cot))
    tout.backward(torch.tensor(cot))
    for a, ta_ in zip(ins, tins, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), ta_.grad.numpy(), rtol=1e-9, atol=1e-12)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), theirs_params[name].grad.numpy(), rtol=1e-9,
                                   atol=1e-12, err_msg=name)


def test_multihead_attention_in_eval_mode_has_no_dropout():
    torch = pytest.importorskip("torch")
    ours, theirs = _mha_pair(torch, dropout=0.5, batch_first=True)
    ours.eval(), theirs.eval()
    x = rng.standard_normal((2, 3, 8))
    for need_weights in (True, False):
        got = ours(*[ta.tensor(x)] * 3, need_weights=need_weights)[0]
        want = theirs(*[torch.tensor(x)] * 3, need_weights=need_weights)[0]
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_multihead_attention_in_training_returns_the_weights_after_dropout():
    """As torch: the weights returned are the ones that multiplied v (dropped and rescaled),
    so output = out_proj(weights @ v) holds for what the caller sees."""
    m = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True).double()  # (x's dtype)
    x = ta.tensor(np.random.default_rng(11).standard_normal((2, 5, 8)))
    m.eval()
    _, plain = m(x, x, x, need_weights=True, average_attn_weights=False)  # (N, H, L, S)
    m.train()
    ta.manual_seed(3)
    y, w = m(x, x, x, need_weights=True, average_attn_weights=False)
    a, a0 = w.numpy(), plain.numpy()
    dropped = a == 0
    assert dropped.any() and not dropped.all()
    np.testing.assert_allclose(a[~dropped], 2 * a0[~dropped], rtol=1e-12)  # 1 / (1 - p)
    _, _, wv = m._weights()
    bv = m.in_proj_bias.numpy()[16:]
    v = (x.numpy() @ wv.numpy().T + bv).reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)
    heads = (a @ v).transpose(0, 2, 1, 3).reshape(2, 5, 8)
    want = heads @ m.out_proj.weight.numpy().T + m.out_proj.bias.numpy()
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kw", [{}, {"add_zero_attn": True}, {"add_bias_kv": True,
                                                          "add_zero_attn": True}])
def test_multihead_attention_keeps_a_half_precision_modules_dtype(kw):
    """The keys and values it appends (bias_k/bias_v, the zero key) come in the module's dtype,
    so a float16 module gives float16 outputs and weights."""
    m = nn.MultiheadAttention(8, 2, batch_first=True, **kw).half()
    x = ta.tensor(rng.standard_normal((2, 3, 8)).astype(np.float16))
    out, weights = m(x, x, x)
    assert (out.dtype, weights.dtype) == (np.float16, np.float16)


def test_multihead_attention_gradcheck():
    m = nn.MultiheadAttention(4, 2, batch_first=True).double()
    q, kv = leaf(2, 3, 4), leaf(2, 5, 4)
    pad = ta.tensor(np.array([[False] * 4 + [True], [False] * 5]))
    report = check_gradients(lambda a, b: m(a, b, b, key_padding_mask=pad)[0], [q, kv])
    assert report.ok, report.message
    w = m.in_proj_weight
    report = check_gradients(lambda a: (m(q.detach(), kv.detach(), kv.detach())[0] * a.sum()),
                             [w.detach().requires_grad_()])
    assert report.ok, report.message


def test_multihead_attention_errors_name_the_shapes():
    m = nn.MultiheadAttention(8, 2)
    with raises(ta.ShapeError, "MultiheadAttention", "embed_dim 8", "num_heads 3"):
        nn.MultiheadAttention(8, 3)
    with raises(ta.ShapeError, "MultiheadAttention", "embed_dim=8", r"query \(4, 3, 6\)"):
        m(ta.randn(4, 3, 6), ta.randn(5, 3, 8), ta.randn(5, 3, 8))
    with raises(ta.ShapeError, "MultiheadAttention", "batched", r"key \(5, 8\)"):
        m(ta.randn(4, 3, 8), ta.randn(5, 8), ta.randn(5, 3, 8))
    with raises(ta.ShapeError, "key_padding_mask", r"\(3, 5\)", r"\(5, 3\)"):
        m(ta.randn(4, 3, 8), ta.randn(5, 3, 8), ta.randn(5, 3, 8),
          key_padding_mask=ta.zeros(5, 3, dtype=bool))
    with raises(ta.ShapeError, "attn_mask", r"\(4, 5\)", r"\(6, 4, 5\)", r"\(5, 4\)"):
        m(ta.randn(4, 3, 8), ta.randn(5, 3, 8), ta.randn(5, 3, 8),
          attn_mask=ta.zeros(5, 4, dtype=bool))


def test_rms_norm_is_one_fused_node_with_the_op_by_op_numbers():
    """F.rms_norm records one `rms_norm` node whose float32 forward is bitwise that of the op-by-op
    x / √(mean(x²) + eps) * weight, and whose gradients match it within rounding."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 6, 8)).astype(np.float32)
    w_data = rng.standard_normal(8).astype(np.float32)
    x, y = ta.tensor(data, requires_grad=True), ta.tensor(data, requires_grad=True)
    w, v = ta.tensor(w_data, requires_grad=True), ta.tensor(w_data, requires_grad=True)
    fused = F.rms_norm(x, (8,), w, eps=1e-5)
    composite = y / ((y * y).mean(-1, keepdim=True) + 1e-5).sqrt() * v
    assert fused.grad_fn.op.name == "rms_norm" and fused.dtype == np.float32
    np.testing.assert_array_equal(fused.numpy(), composite.numpy())
    g = ta.tensor(rng.standard_normal(fused.shape).astype(np.float32))
    fused.backward(g)
    composite.backward(g)
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), v.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_buffer_registered_again_as_persistent_joins_the_state_dict():
    m = ta.nn.Module()
    m.register_buffer("stat", ta.zeros(2), persistent=False)
    assert "stat" not in m.state_dict()
    m.register_buffer("stat", ta.ones(2))
    assert m.state_dict()["stat"].tolist() == [1.0, 1.0]
