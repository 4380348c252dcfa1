"""A small Vision Transformer and an MLP-Mixer block as torch tutorials write them from scratch,
run with tinyattn by renaming the module: patchify by Tensor.unfold (and by reshape/permute), a
Linear patch embedding, a learnable cls token expanded and concatenated, position embeddings,
nn.TransformerEncoder of pre-norm GELU layers (batch_first), x[:, 0] pooling, LayerNorm + Linear
head, cross_entropy with label smoothing, AdamW with weight-decay groups, OneCycleLR,
clip_grad_norm_, accuracy under no_grad. The same weights (copied through state_dict and NumPy)
give the same logits, loss, gradients and three optimizer steps.

Also the differences this port turned up, torch's behaviour the target: the norms given
parameters of another dtype than their input (torch refuses them by name), and sums of
inf and -inf (torch's NaN, silently)."""

import itertools
import warnings

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

C, P, HEADS, DEPTH, NCLS, B = 16, 8, 2, 2, 5, 4
N = (32 // P) ** 2


def _vit(lib, mixer):
    nn = lib.nn

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(3 * P * P, C)
            self.cls = nn.Parameter(lib.zeros(1, 1, C))
            self.pos = nn.Parameter(lib.randn(1, N + 1, C) * 0.02)
            layer = nn.TransformerEncoderLayer(C, HEADS, 2 * C, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.enc = nn.TransformerEncoder(layer, DEPTH, enable_nested_tensor=False)
            self.tok = nn.Sequential(nn.LayerNorm(C), nn.Linear(N + 1, 8), nn.GELU(),
                                     nn.Linear(8, N + 1))
            self.norm = nn.LayerNorm(C)
            self.head = nn.Linear(C, NCLS)

        def forward(self, x):
            b = x.shape[0]
            if mixer:  # patchify by reshape / permute
                x = x.reshape(b, 3, 32 // P, P, 32 // P, P).permute(0, 2, 4, 1, 3, 5)
            else:  # by unfold on the two image dims: (B, 3, 4, 4, P, P)
                x = x.unfold(2, P, P).unfold(3, P, P).permute(0, 2, 3, 1, 4, 5)
            x = self.embed(x.reshape(b, -1, 3 * P * P))
            x = lib.cat([self.cls.expand(b, -1, -1), x], dim=1) + self.pos
            x = self.enc(x)
            if mixer:  # token mixing: an MLP across the tokens, through transpose(1, 2)
                x = x + self.tok[1:](self.tok[0](x).transpose(1, 2)).transpose(1, 2)
            return self.head(self.norm(x[:, 0]))

    return ViT()


def _groups(model):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and n not in ("cls", "pos")]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2 or n in ("cls", "pos")]
    return [{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}]


def _train(lib, model, xs, ys, steps=3):
    F = lib.nn.functional  # noqa: N806 - torch's habit
    opt = lib.optim.AdamW(_groups(model), lr=1e-3)
    sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=10)
    x, y = lib.tensor(xs), lib.tensor(ys)
    record = []
    for _ in range(steps):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        loss.backward()
        norm = lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()
                 if p.grad is not None}
        opt.step()
        sched.step()
        with lib.no_grad():
            acc = (model(x).argmax(-1) == y).float().mean().item()
        params = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
        record.append((logits.detach().numpy(), loss.item(), float(norm), grads, acc, params,
                       opt.param_groups[0]["lr"]))
    return record


@pytest.mark.parametrize("mixer", [False, True], ids=["vit-unfold", "mixer-reshape"])
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-10), ("float32", 2e-5)])
def test_vit_and_mixer_train_as_torch(mixer, dtype, tol):
    torch.manual_seed(0)
    tm = _vit(torch, mixer).to(getattr(torch, dtype))
    am = _vit(ta, mixer).to(getattr(ta, dtype))
    am.load_state_dict({k: ta.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((B, 3, 32, 32)).astype(dtype), rng.integers(0, NCLS, B)
    want, got = _train(torch, tm, xs, ys), _train(ta, am, xs, ys)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g[0], w[0], atol=tol, rtol=tol)
        assert g[1] == pytest.approx(w[1], abs=tol) and g[2] == pytest.approx(w[2], rel=tol)
        assert set(g[3]) == set(w[3])
        for name in w[3]:
            np.testing.assert_allclose(g[3][name], w[3][name], atol=tol, rtol=tol, err_msg=name)
        assert g[4] == w[4] and g[6] == pytest.approx(w[6])
    # parameters after three AdamW steps; where the gradient is 0 in exact arithmetic (the key
    # bias, a bias the LayerNorm removes) Adam turns rounding noise into ±lr steps: not those.
    # Dead: below √eps of the largest gradient of any parameter, at any step (a whole tensor
    # of noise, such as a 1-element bias, has no larger entry of its own to compare with)
    dead = {}
    for record in want:
        top = max(np.abs(w).max() for w in record[3].values())
        for n, w in record[3].items():
            dead[n] = dead.get(n, False) | (np.abs(w) < np.finfo(dtype).eps ** 0.5 * top)
    for name, w in want[-1][5].items():
        live = ~dead.get(name, np.zeros(w.shape, bool))
        np.testing.assert_allclose(got[-1][5][name][live], w[live], atol=10 * tol, err_msg=name)


def test_cls_token_pos_embedding_and_pooling_grads_match_torch():
    def run(lib):
        cls = lib.nn.Parameter(lib.zeros(1, 1, 3, dtype=lib.float64))
        x = lib.tensor(np.arange(24.0).reshape(2, 4, 3), requires_grad=True)
        y = lib.cat([cls.expand(2, -1, -1), x], dim=1)
        (y[:, 0] * 2 + y.mean(1)).sum().backward()
        return cls.grad.numpy(), x.grad.numpy()

    for got, want in zip(run(ta), run(torch), strict=True):
        np.testing.assert_allclose(got, want)


# --- norms given parameters of another dtype: torch refuses all but float32 ones for float16

DTYPES = ["float16", "float32", "float64"]


def _norm_call(name, lib, x, dtype):
    F = lib.nn.functional  # noqa: N806 - torch's habit
    ones, zeros = (lambda n: lib.ones(n, dtype=dtype)), (lambda n: lib.zeros(n, dtype=dtype))
    if name == "layer_norm":
        return F.layer_norm(x, (3,), ones(3), zeros(3))
    if name == "layer_norm weight only":
        return F.layer_norm(x, (3,), ones(3))
    if name == "group_norm":
        return F.group_norm(x, 2, ones(6), zeros(6))
    if name == "rms_norm":
        return F.rms_norm(x, (3,), ones(3))
    if name == "batch_norm stats only":
        return F.batch_norm(x, zeros(6), ones(6), training=False)
    train = name == "batch_norm train"
    return F.batch_norm(x, zeros(6), ones(6), ones(6), zeros(6), training=train)


NORMS = ["layer_norm", "layer_norm weight only", "group_norm", "rms_norm", "batch_norm",
         "batch_norm train", "batch_norm stats only"]


@pytest.mark.filterwarnings("ignore:Mismatch dtype")  # torch's rms_norm, not fused
@pytest.mark.parametrize("name", NORMS)
@pytest.mark.parametrize("x_dtype, p_dtype",
                         [(a, b) for a, b in itertools.product(DTYPES, DTYPES) if a != b])
def test_norm_with_parameters_of_another_dtype_as_torch(name, x_dtype, p_dtype):
    xs = np.random.default_rng(0).standard_normal((4, 6, 3))
    try:
        want = _norm_call(name, torch, torch.tensor(xs).to(getattr(torch, x_dtype)),
                          getattr(torch, p_dtype))
    except RuntimeError:
        want = None
    x = ta.tensor(xs).to(getattr(ta, x_dtype))
    if want is None:
        with pytest.raises(ta.DTypeError, match=f"{name.split()[0]}.*{x_dtype}.*{p_dtype}"):
            _norm_call(name, ta, x, getattr(ta, p_dtype))
        return
    got = _norm_call(name, ta, x, getattr(ta, p_dtype))
    assert str(got.dtype) == str(want.dtype).replace("torch.", "")
    tol = 2e-3 if "float16" in (x_dtype, p_dtype) else 1e-5
    np.testing.assert_allclose(got.numpy().astype(float), want.numpy().astype(float), atol=tol)


def test_norm_modules_refuse_an_input_of_another_dtype():
    x = ta.randn(4, 6, 3)
    for module in (ta.nn.LayerNorm(3).double(), ta.nn.GroupNorm(2, 6).double(),
                   ta.nn.BatchNorm1d(6).double()):
        with pytest.raises(ta.DTypeError, match="float32.*float64"):
            module(x)
    assert ta.nn.LayerNorm(3)(x.half()).dtype == ta.float16  # float32 parameters, half input


def test_rms_norm_grads_with_a_float64_weight_match_torch():
    xs = np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32)
    out = {}
    for lib in (torch, ta):
        x = lib.tensor(xs, requires_grad=True)
        w = lib.tensor(np.linspace(0.5, 1.5, 5), requires_grad=True)
        y = lib.nn.functional.rms_norm(x, (5,), w)
        (y * lib.tensor(np.arange(10.0).reshape(2, 5), dtype=lib.float32)).sum().backward()
        out[lib] = y, x.grad, w.grad
    for got, want in zip(out[ta], out[torch], strict=True):
        assert str(got.dtype) == str(want.dtype).replace("torch.", "")
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5)


# --- sums of inf and -inf: NaN, silently (torch warns of nothing)

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_sums_of_inf_and_minus_inf_are_silent_nan(dtype):
    x = ta.tensor([[float("inf"), float("-inf")]], dtype=getattr(ta, dtype), requires_grad=True)
    t = torch.tensor([[float("inf"), float("-inf")]], dtype=getattr(torch, dtype))
    calls = [lambda m: m.sum(), lambda m: m.sum(1), lambda m: m.sum(0), lambda m: m.mean(),
             lambda m: m.mean(-1, keepdim=True), lambda m: m.cumsum(1), lambda m: m.cumsum(0),
             lambda m: m.nansum(), lambda m: m.var(), lambda m: m.std(1)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for call in calls:
            got, want = call(x), call(t)
            np.testing.assert_array_equal(got.detach().numpy(), want.numpy())
            call(x).sum().backward()
        x.cumsum(1).backward(ta.tensor([[float("inf"), float("-inf")]], dtype=x.dtype))
