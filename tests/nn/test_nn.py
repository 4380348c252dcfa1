"""nn: registration, state dicts, layers against NumPy, the transformer against PyTorch."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        self.norm = nn.LayerNorm(2)

    def forward(self, x):
        return self.norm(self.seq(self.a(x)))


def test_parameters_are_registered_by_dotted_path():
    m = Tiny()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["a.weight", "a.bias", "seq.0.weight", "seq.0.bias", "seq.2.weight",
                     "seq.2.bias", "norm.weight", "norm.bias"]
    assert all(p.requires_grad for p in m.parameters())
    assert m.num_parameters() == 3 * 4 + 4 + 16 + 4 + 8 + 2 + 2 + 2


def test_reassigning_an_attribute_replaces_the_registration():
    m = Tiny()
    m.a = nn.Linear(3, 4, bias=False)
    assert "a.bias" not in dict(m.named_parameters())
    m.extra = ta.tensor([1.0])  # a plain tensor is not a parameter
    assert "extra" not in dict(m.named_parameters())


def test_named_parameters_follow_every_change_of_the_tree():
    """named_parameters() is kept between calls (zero_grad walks it every step): any change of
    the tree, deep inside or at the top, through any container, must show at once."""
    m = Tiny()
    m.zero_grad()  # the list is made and kept

    def names():
        return [n for n, _ in m.named_parameters()]

    m.seq[0].weight = nn.Parameter(np.zeros((4, 4)))  # replaced deep inside: same place
    assert dict(m.named_parameters())["seq.0.weight"] is m.seq[0].weight
    m.seq[0].bias = None  # a parameter removed by assignment
    assert "seq.0.bias" not in names()
    del m.norm.bias  # ... and by del
    assert "norm.bias" not in names()
    m.norm.scale = nn.Parameter(np.ones(2))  # a new one
    assert names()[-1] == "norm.scale"
    m.seq.append(nn.Linear(2, 3))  # a container grows
    assert "seq.3.weight" in names()
    m.ps = nn.ParameterList([np.zeros(1)])
    m.ps.append(np.ones(2))
    assert names()[-2:] == ["ps.0", "ps.1"]
    m.a.bias = m.norm.scale  # tied: listed once, at its first place
    assert names().count("a.bias") == 1 and "norm.scale" not in names()
    del m.seq
    assert not any(n.startswith("seq.") for n in names())
    m.extra = nn.Parameter(np.ones(1))  # two changes between two looks: both show
    del m.a
    assert "extra" in names() and not any(n.startswith("a.") for n in names())
    m.zero_grad()
    assert [p for _, p in m.named_parameters()] == list(m.parameters())


def test_tiny_transformer_defaults_are_the_configs_and_dropout_reaches_every_layer():
    from dataclasses import fields

    from tinyattn.nn.transformer import TransformerConfig

    model = nn.TinyTransformer(11)
    config = TransformerConfig(11)
    assert model.wpe.weight.shape == (config.max_len, config.d_model)
    assert len(model.blocks) == config.n_layers and model.blocks[0].attn.n_heads == config.n_heads
    assert {f.name for f in fields(TransformerConfig)} >= {"max_len", "d_model", "n_heads"}
    block = nn.TransformerBlock(8, 2, dropout=0.25)
    drops = [m.p for m in block.modules() if isinstance(m, nn.Dropout)]
    assert len(drops) >= 2 and all(p == 0.25 for p in drops)  # attention's and the MLP's


def test_module_without_super_init_says_so():
    class Broken(nn.Module):
        def __init__(self):
            self.x = 1  # (a plain attribute may come first, as in torch)

    broken = Broken()
    with pytest.raises(AttributeError, match=r"Broken.__init__ must call super\(\).__init__\(\)"):
        list(broken.parameters())
    with pytest.raises(AttributeError, match="super"):
        broken(ta.ones(1))

    class Early(nn.Module):
        def __init__(self):
            self.lin = nn.Linear(1, 1)  # a module: refused at once, as in torch

    with pytest.raises(AttributeError, match="super"):
        Early()


def test_tied_weights_count_once_but_save_under_both_names():
    m = nn.TinyTransformer(11, d_model=16, n_heads=2, n_layers=1, max_len=8)
    names = [n for n, _ in m.named_parameters()]
    assert "wte.weight" in names and "lm_head.weight" not in names
    state = m.state_dict()
    assert "lm_head.weight" in state and "wte.weight" in state
    np.testing.assert_array_equal(state["lm_head.weight"].numpy(), state["wte.weight"].numpy())


def test_load_state_dict_round_trip_and_errors_change_nothing():
    a, b = Tiny(), Tiny()
    b.load_state_dict(a.state_dict())
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert na == nb
        np.testing.assert_array_equal(pa.numpy(), pb.numpy(), na)
    before = {n: p.numpy().copy() for n, p in b.named_parameters()}
    fresh = Tiny().state_dict()
    broken = dict(fresh)
    del broken["a.bias"]
    broken["surprise"] = np.zeros(2)
    broken["norm.weight"] = np.zeros(5)
    with pytest.raises(ta.CheckpointError) as err:
        b.load_state_dict(broken)
    msg = str(err.value)
    assert "missing keys: a.bias" in msg and "unexpected keys: surprise" in msg
    assert "norm.weight" in msg and "(5,)" in msg and "(2,)" in msg
    for n, p in b.named_parameters():
        np.testing.assert_array_equal(p.numpy(), before[n], n)  # nothing was loaded
    del broken["norm.weight"]
    result = b.load_state_dict({k: v for k, v in fresh.items() if k != "a.bias"}, strict=False)
    assert result["missing_keys"] == ["a.bias"]


def test_load_state_dict_checks_every_value_before_it_copies_any():
    """A value of the right shape that does not convert (strings, objects) late in the dict:
    refused with the others' problems, and the keys before it are not loaded either."""
    b = Tiny()
    before = {n: p.numpy().copy() for n, p in b.named_parameters()}
    fresh = Tiny().state_dict()
    for bad, dtype in [(np.array(["x", "y"]), "<U1"), (np.array([{}, None]), "object")]:
        assert list(fresh)[-1] == "norm.bias"  # (the last key: every other one comes first)
        with pytest.raises(ta.CheckpointError) as err:
            b.load_state_dict({**fresh, "norm.bias": bad})
        assert str(err.value).startswith("load_state_dict(Tiny): nothing was loaded; norm.bias: "
                                         f"the checkpoint has dtype {dtype}, which does not "
                                         "convert to the model's float32")
        for n, p in b.named_parameters():
            np.testing.assert_array_equal(p.numpy(), before[n], n)
    b.load_state_dict({**fresh, "norm.bias": np.array(["1.5", "2"])})  # text that converts
    np.testing.assert_array_equal(b.norm.bias.numpy(), [1.5, 2.0])


def test_train_eval_and_dropout():
    m = nn.Sequential(nn.Dropout(0.5))
    x = ta.ones(1000)
    assert (m(x).numpy() == 0).mean() == pytest.approx(0.5, abs=0.07)
    m.eval()
    assert not m[0].training
    np.testing.assert_array_equal(m(x).numpy(), x.numpy())


def test_layers_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    lin = nn.Linear(3, 4)
    want = x @ lin.weight.numpy().T + lin.bias.numpy()
    np.testing.assert_allclose(lin(ta.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)
    ln = nn.LayerNorm(3)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(ln(ta.tensor(x)).numpy(), (x - mu) / np.sqrt(var + 1e-5),
                               rtol=1e-4, atol=1e-5)
    emb = nn.Embedding(7, 3)
    ids = np.array([[1, 6], [0, 1]])
    np.testing.assert_array_equal(emb(ta.tensor(ids)).numpy(), emb.weight.numpy()[ids])


def test_attention_weights_path_equals_sdpa_path():
    ta.manual_seed(1)
    attn = nn.CausalSelfAttention(16, 4)
    x = ta.randn(2, 6, 16)
    y1 = attn(x)
    y2, w = attn(x, return_weights=True)
    np.testing.assert_allclose(y1.numpy(), y2.numpy(), rtol=1e-5, atol=1e-6)
    w = w.numpy()  # (B, H, T, T)
    assert w.shape == (2, 4, 6, 6)
    np.testing.assert_allclose(w.sum(-1), 1, rtol=1e-5)
    assert np.all(w[..., np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0)


def test_transformer_is_causal_and_scoped():
    ta.manual_seed(0)
    m = nn.TinyTransformer(10, d_model=16, n_heads=2, n_layers=2, max_len=8)
    ids = np.array([[1, 2, 3, 4, 5, 6]])
    a = m(ta.tensor(ids)).numpy()
    ids2 = ids.copy()
    ids2[0, 4:] = 9
    b = m(ta.tensor(ids2)).numpy()
    np.testing.assert_allclose(a[:, :4], b[:, :4], rtol=1e-5, atol=1e-6)  # the past is unmoved
    assert not np.allclose(a[:, 4:], b[:, 4:])
    logits = m(ta.tensor(ids))
    scopes, stack, seen = set(), [logits._node], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        scopes.add(node.scope)
        stack.extend(node.parents)
    assert {"blocks.0.attn", "blocks.1.mlp", "blocks.0.ln1", "lm_head", "wte"} <= scopes
    with pytest.raises(ta.ShapeError, match="max_len"):
        m(ta.tensor(np.zeros((1, 9), dtype=np.int64)))


def test_gpt2_init():
    ta.manual_seed(0)
    m = nn.TinyTransformer(50, d_model=64, n_heads=4, n_layers=4, max_len=32)
    p = dict(m.named_parameters())
    assert p["blocks.0.attn.qkv.weight"].numpy().std() == pytest.approx(0.02, rel=0.1)
    assert p["blocks.0.mlp.proj.weight"].numpy().std() == pytest.approx(0.02 / np.sqrt(8),
                                                                        rel=0.1)
    assert np.all(p["blocks.0.attn.qkv.bias"].numpy() == 0)
    assert np.all(p["ln_f.weight"].numpy() == 1)


def test_generate_greedy_is_deterministic():
    m = nn.TinyTransformer(10, d_model=16, n_heads=2, n_layers=1, max_len=8)
    a = m.generate(ta.tensor([[1, 2]]), 5, greedy=True).numpy()
    b = m.generate(ta.tensor([[1, 2]]), 5, greedy=True).numpy()
    assert a.shape == (1, 7) and np.array_equal(a, b)
    s = m.generate(ta.tensor([[1, 2]]), 20, temperature=1.0, top_k=3,
                   rng=np.random.default_rng(0)).numpy()
    assert s.shape == (1, 22)  # longer than max_len: the window slides


def test_module_to_dtype():
    m = Tiny().to(ta.float64)
    assert all(p.dtype == np.float64 for p in m.parameters())
    out = m(ta.tensor(np.ones((2, 3))))
    assert out.dtype == np.float64


def test_transformer_matches_pytorch():
    torch = pytest.importorskip("torch")
    ta.manual_seed(0)
    V, C, H, L, T = 13, 32, 4, 2, 7  # noqa: N806
    ours = nn.TinyTransformer(V, C, H, L, max_len=T)
    ours.to(ta.float64)

    class TorchBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
            self.qkv, self.proj = torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
            self.fc, self.fc_proj = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)

        def forward(self, x):
            B, T, _ = x.shape  # noqa: N806
            q, k, v = self.qkv(self.ln1(x)).reshape(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
            h = torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh")
            return x + self.fc_proj(h)

    wte = torch.nn.Embedding(V, C).double()
    wpe = torch.nn.Embedding(T, C).double()
    blocks = torch.nn.ModuleList(TorchBlock() for _ in range(L)).double()
    ln_f = torch.nn.LayerNorm(C).double()
    mine = dict(ours.named_parameters())
    theirs = {"wte.weight": wte.weight, "wpe.weight": wpe.weight, "ln_f.weight": ln_f.weight,
              "ln_f.bias": ln_f.bias}
    for i, b in enumerate(blocks):
        for ours_name, t in [("ln1", b.ln1), ("ln2", b.ln2), ("attn.qkv", b.qkv),
                             ("attn.proj", b.proj), ("mlp.fc", b.fc), ("mlp.proj", b.fc_proj)]:
            theirs[f"blocks.{i}.{ours_name}.weight"] = t.weight
            theirs[f"blocks.{i}.{ours_name}.bias"] = t.bias
    assert set(theirs) == set(mine)
    with torch.no_grad():
        for name, t in theirs.items():
            t.copy_(torch.from_numpy(mine[name].numpy()))
    ids = np.random.default_rng(0).integers(0, V, (3, T))
    targets = np.random.default_rng(1).integers(0, V, (3, T))

    logits = ours(ta.tensor(ids))
    loss = F.cross_entropy(logits.reshape(-1, V), ta.tensor(targets.reshape(-1)))
    loss.backward()

    tid = torch.from_numpy(ids)
    x = wte(tid) + wpe(torch.arange(T))
    for b in blocks:
        x = b(x)
    t_logits = ln_f(x) @ wte.weight.T
    t_loss = torch.nn.functional.cross_entropy(t_logits.reshape(-1, V),
                                               torch.from_numpy(targets.reshape(-1)))
    t_loss.backward()
    np.testing.assert_allclose(loss.item(), t_loss.item(), rtol=1e-10)
    for name, t in theirs.items():
        np.testing.assert_allclose(mine[name].grad.numpy(), t.grad.numpy(), rtol=1e-7,
                                   atol=1e-10, err_msg=name)


class _Scopes:
    """A tracer that records the module path of every op's node."""

    def __init__(self):
        self.seen = []

    def forward(self, op, inputs, params, out):
        self.seen.append(out._node.scope)

    def backward(self, *args):
        pass

    def accumulate(self, *args):
        pass


def test_module_paths_follow_the_root_that_is_called():
    """Paths are cached per root, and renamed when another root names a shared part or the
    tree changes."""
    from tinyattn.autograd import tracing

    class Outer(ta.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x)

    inner = ta.nn.Sequential(ta.nn.Linear(2, 2))
    outer = Outer(inner)
    x = ta.randn(1, 2, requires_grad=True)
    for model, want in ((outer, "inner.0"), (inner, "0"), (outer, "inner.0"), (outer, "inner.0")):
        with tracing(_Scopes()) as rec:
            model(x)
        assert rec.seen == [want]
    outer.inner = ta.nn.Sequential(ta.nn.Linear(2, 2), ta.nn.Linear(2, 2))
    with tracing(_Scopes()) as rec:
        outer(x)
    assert rec.seen == ["inner.0", "inner.1"]


def test_module_paths_follow_a_deleted_attribute():
    """A part registered under two names is named by the first; deleting that name renames it
    by the one left."""
    from tinyattn.autograd import tracing

    class Twice(ta.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = self.second = ta.nn.Linear(2, 2)

        def forward(self, x):
            return self.second(x)

    model, x = Twice(), ta.randn(1, 2, requires_grad=True)
    with tracing(_Scopes()) as rec:
        model(x)
        del model.first
        model(x)
    assert rec.seen == ["first", "second"]


def test_nn_functional_is_tinyattn_functional_under_torchs_import_line():
    """`import tinyattn.nn.functional as F` (as torch code writes it) gives tinyattn.functional
    itself, in a fresh interpreter too, so code written for torch.nn.functional runs."""
    import subprocess
    import sys

    import tinyattn.nn.functional as nnf
    from tinyattn.nn.functional import cross_entropy

    assert nnf is F and nn.functional is F and cross_entropy is F.cross_entropy
    code = ("import tinyattn.nn.functional as F, tinyattn, numpy as np\n"
            "x = tinyattn.tensor([[1.0, -2.0]], requires_grad=True)\n"
            "F.relu(x).sum().backward()\n"
            "assert F is tinyattn.functional, F\n"
            "print(x.grad.numpy().tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[[1.0, 0.0]]"


def test_float16_dropout_near_one_gives_zeros_where_it_drops_not_nan():
    """In float16, 1/(1-p) overflows to inf for p above about 0.99998: the dropped entries are
    still 0 (a 0/1 mask times inf would make them NaN), the kept ones inf, as in torch."""
    ta.manual_seed(0)
    x = ta.tensor(np.ones(4000, np.float16), requires_grad=True)
    with np.errstate(all="raise"):  # no overflow or invalid-value warning either
        y = F.dropout(x, 0.99999)
        y.sum().backward()
    for a in (y.numpy(), x.grad.numpy()):
        assert not np.isnan(a).any()
        assert set(np.unique(a)) <= {0.0, np.inf}
    ta.manual_seed(1)
    x = ta.tensor(np.full(200_000, 2.0, np.float16), requires_grad=True)
    y = F.dropout(x, 0.999)  # 1/(1-p) = 1000 fits float16: kept entries 2 / (1 - p)
    kept = y.numpy()[y.numpy() != 0]
    assert kept.size and np.all(kept == np.float16(2) * np.float16(1000.0))


@pytest.mark.parametrize("mode", ["no", 0, 1, None, 0.0])
def test_train_refuses_a_mode_that_is_not_a_bool(mode):
    m = nn.Sequential(nn.Dropout(0.5))
    with pytest.raises(ValueError, match=r"Sequential.train: mode must be True or False"):
        m.train(mode)
    assert m.training is True and m[0].training is True  # nothing changed
    assert m.train(np.bool_(False)).training is False and m[0].training is False


@pytest.mark.parametrize("values", [[10, 10, 10, 10, 10], [True, False, True, True, False]])
def test_dropout_refuses_integer_and_bool_input_in_training_as_torch(values):
    """0 < p < 1 on a non-floating input: torch refuses (the scale 1/(1-p) does not fit the
    dtype; here it was cast to 1 and kept entries unscaled). p = 0, p = 1 and eval mode give
    what torch gives: the input, zeros of its dtype, the input."""
    torch = pytest.importorskip("torch")
    x = ta.tensor(values)
    for call in (lambda: F.dropout(x, 0.3), lambda: nn.Dropout(0.3)(x),
                 lambda: F.dropout(x, 0.5, inplace=True)):
        with pytest.raises(TypeError, match=rf"dropout: needs a floating-point input, got "
                                            rf"{x.dtype}"):
            call()
    assert np.array_equal(x.numpy(), values)  # (inplace: nothing written)
    tx = torch.tensor(values)
    for p, training in ((0.0, True), (1.0, True), (0.3, False), (1.0, False)):
        want = torch.nn.functional.dropout(tx, p, training)
        got = F.dropout(x, p, training)
        assert got.numpy().dtype == want.numpy().dtype
        assert np.array_equal(got.numpy(), want.numpy())
    m = nn.Dropout(0.3).eval()
    assert np.array_equal(m(x).numpy(), values)
