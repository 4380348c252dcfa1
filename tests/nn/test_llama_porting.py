"""A small llama-style decoder (Meta's model.py, llama2.c, Mistral/Qwen habits) written once for
torch and run with tinyattn by renaming the module: RMSNorm by hand and nn.RMSNorm, rotary
embeddings in the cos/sin form, SwiGLU, grouped-query attention (repeat_kv, and
scaled_dot_product_attention(enable_gqa=True)), additive -inf masks, tied embeddings, init by
name, weight-decay groups, clip_grad_norm_, AdamW, a preallocated KV cache and top-p sampling.
The complex form of rotary embeddings (torch.polar, view_as_complex, view_as_real) is refused by
name: tinyattn has no complex numbers."""

import math

import numpy as np
import pytest

import tinyattn as ta

DIM, LAYERS, HEADS, KV_HEADS, VOCAB, MAX_T = 16, 2, 4, 2, 23, 12
HD = DIM // HEADS


def _rms(lib, x, w, acc, eps=1e-5):
    """llama's RMSNorm: in float32 (x.float()), back to x's dtype; `acc` float64 keeps it."""
    xf = x.float() if acc == lib.float32 else x.to(acc)
    return (xf * lib.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * w


def _rope_tables(lib, end, acc):
    inv = 1.0 / (10000.0 ** (lib.arange(0, HD, 2, dtype=acc) / HD))
    freqs = lib.outer(lib.arange(end, dtype=acc), inv)
    emb = lib.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def _rotate(lib, x, cos, sin):
    half = x.shape[-1] // 2
    rotated = lib.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[None, :, None, :] + rotated * sin[None, :, None, :]


def _repeat_kv(x, n_rep):
    b, t, h, d = x.shape
    return x[:, :, :, None, :].expand(b, t, h, n_rep, d).reshape(b, t, h * n_rep, d)


def _model(lib, builtin_norm=False, acc=None):
    """{name: Linear/Embedding/weight} of the decoder, in torch's init order, weights tied."""
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.ModuleDict({"tok": nn.Embedding(VOCAB, DIM), "out": nn.Linear(DIM, VOCAB, bias=False)})
    m["tok"].weight = m["out"].weight
    hidden = 24
    for i in range(LAYERS):
        m[f"l{i}"] = nn.ModuleDict({
            "wq": nn.Linear(DIM, HEADS * HD, bias=False),
            "wk": nn.Linear(DIM, KV_HEADS * HD, bias=False),
            "wv": nn.Linear(DIM, KV_HEADS * HD, bias=False),
            "wo": nn.Linear(HEADS * HD, DIM, bias=False),
            "w1": nn.Linear(DIM, hidden, bias=False), "w2": nn.Linear(hidden, DIM, bias=False),
            "w3": nn.Linear(DIM, hidden, bias=False),
            "n1": nn.RMSNorm(DIM, eps=1e-5), "n2": nn.RMSNorm(DIM, eps=1e-5)})
    m["norm"] = nn.RMSNorm(DIM, eps=1e-5)
    for pn, p in m.named_parameters():
        if p.dim() >= 2:
            std = 0.02 / math.sqrt(2 * LAYERS) if pn.endswith(("w3.weight", "wo.weight")) else 0.02
            lib.nn.init.normal_(p, mean=0.0, std=std)
    for block in [m] + [m[f"l{i}"] for i in range(LAYERS)]:
        block.builtin_norm, block.acc = builtin_norm, acc or lib.float32
    return m


def _norm(lib, m, name, x):
    return m[name](x) if m.builtin_norm else _rms(lib, x, m[name].weight, m.acc)


def _attend(lib, layer, x, rope, mask, sdpa, cache=None, start=0):
    b, t, _ = x.shape
    q = layer["wq"](x).view(b, t, HEADS, HD)
    k = layer["wk"](x).view(b, t, KV_HEADS, HD)
    v = layer["wv"](x).view(b, t, KV_HEADS, HD)
    q, k = _rotate(lib, q, *rope), _rotate(lib, k, *rope)
    if cache is not None:
        cache[0][:b, start:start + t] = k
        cache[1][:b, start:start + t] = v
        k, v = cache[0][:b, :start + t], cache[1][:b, :start + t]
    q = q.transpose(1, 2)
    if sdpa:
        out = lib.nn.functional.scaled_dot_product_attention(
            q, k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, enable_gqa=True)
    else:
        k = _repeat_kv(k, HEADS // KV_HEADS).transpose(1, 2)
        v = _repeat_kv(v, HEADS // KV_HEADS).transpose(1, 2)
        scores = lib.matmul(q, k.transpose(2, 3)) / math.sqrt(HD)
        if mask is not None:
            scores = scores + mask
        scores = lib.nn.functional.softmax(scores, dim=-1, dtype=layer.acc).type_as(q)
        out = lib.matmul(scores, v)
    return layer["wo"](out.transpose(1, 2).contiguous().view(b, t, -1))


def _forward(lib, m, tokens, sdpa=False, caches=None, start=0):
    t = tokens.shape[1]
    h = m["tok"](tokens)
    cos, sin = _rope_tables(lib, MAX_T, m.acc)
    rope = cos[start:start + t], sin[start:start + t]
    mask = None
    if t > 1:
        mask = lib.triu(lib.full((t, t), float("-inf")), diagonal=1)
        mask = lib.hstack([lib.zeros((t, start)), mask]).type_as(h)
    for i in range(LAYERS):
        layer = m[f"l{i}"]
        cache = None if caches is None else caches[i]
        h = h + _attend(lib, layer, _norm(lib, layer, "n1", h), rope, mask, sdpa, cache, start)
        x = _norm(lib, layer, "n2", h)
        h = h + layer["w2"](lib.nn.functional.silu(layer["w1"](x)) * layer["w3"](x))
    return m["out"](_norm(lib, m, "norm", h))


def _pair(torch, builtin_norm=False, double=True):
    """The model in torch and tinyattn with torch's weights; in float64 (its float32 steps too,
    so that the two agree to rounding), or as written, in float32."""
    mt = _model(torch, builtin_norm, torch.float64 if double else None)
    ma = _model(ta, builtin_norm, ta.float64 if double else None)
    ma.load_state_dict({k: ta.tensor(v.detach().numpy().copy())
                        for k, v in mt.state_dict().items()})
    return (mt.double(), ma.double()) if double else (mt, ma)


TOKENS = np.random.RandomState(0).randint(0, VOCAB, (2, 9))


def _loss(lib, m, sdpa):
    x, y = lib.tensor(TOKENS[:, :-1]), lib.tensor(TOKENS[:, 1:])
    logits = _forward(lib, m, x, sdpa)
    loss = lib.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
    return logits, loss


@pytest.mark.parametrize("sdpa", [False, True])
@pytest.mark.parametrize("builtin_norm", [False, True])
def test_llama_logits_loss_and_grads_match_torch_in_float64(sdpa, builtin_norm):
    torch = pytest.importorskip("torch")
    mt, ma = _pair(torch, builtin_norm)
    assert ma["out"].weight is ma["tok"].weight
    assert sum(p.numel() for p in ma.parameters()) == sum(p.numel() for p in mt.parameters())
    (lt, losst), (la, lossa) = _loss(torch, mt, sdpa), _loss(ta, ma, sdpa)
    np.testing.assert_allclose(la.detach().numpy(), lt.detach().numpy(), rtol=1e-10, atol=1e-12)
    losst.backward()
    lossa.backward()
    grads = dict(ma.named_parameters())
    for name, p in mt.named_parameters():
        np.testing.assert_allclose(grads[name].grad.numpy(), p.grad.numpy(), rtol=1e-8,
                                   atol=1e-12, err_msg=name)


def test_llama_as_written_in_float32_matches_torch():
    """RMSNorm in x.float() then .type_as(x), softmax(dtype=float32), float32 rotary tables."""
    torch = pytest.importorskip("torch")
    mt, ma = _pair(torch, double=False)
    (lt, losst), (la, lossa) = _loss(torch, mt, False), _loss(ta, ma, False)
    assert la.dtype == ta.float32 and lossa.dtype == ta.float32
    np.testing.assert_allclose(la.detach().numpy(), lt.detach().numpy(), rtol=1e-4, atol=1e-6)
    assert lossa.item() == pytest.approx(losst.item(), rel=1e-6)


def _adamw(lib, m):
    params = [p for p in m.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return lib.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.95))


def test_llama_adamw_steps_with_clipping_match_torch():
    torch = pytest.importorskip("torch")
    mt, ma = _pair(torch)
    ot, oa = _adamw(torch, mt), _adamw(ta, ma)
    for _ in range(3):
        norms = []
        for lib, m, opt in ((torch, mt, ot), (ta, ma, oa)):
            opt.zero_grad(set_to_none=True)
            _loss(lib, m, False)[1].backward()
            norms.append(float(lib.nn.utils.clip_grad_norm_(m.parameters(), 0.1)))
            opt.step()
        assert norms[1] == pytest.approx(norms[0], rel=1e-10)
    new = dict(ma.named_parameters())
    for name, p in mt.named_parameters():
        np.testing.assert_allclose(new[name].detach().numpy(), p.detach().numpy(), rtol=1e-8,
                                   atol=1e-10, err_msg=name)


def _top_p(lib, probs, p, generator):
    probs_sort, probs_idx = lib.sort(probs, dim=-1, descending=True)
    mask = lib.cumsum(probs_sort, dim=-1) - probs_sort > p
    probs_sort[mask] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    return lib.gather(probs_idx, -1, lib.multinomial(probs_sort, 1, generator=generator))


def test_kv_cache_generation_matches_the_full_forward():
    """A cache of zeros((B, max_T, n_kv, hd)) written by slices and read back gives, token by
    token under eval() + inference_mode(), the logits of one forward over the whole prefix."""
    torch = pytest.importorskip("torch")
    mt, ma = _pair(torch)
    ma.eval()
    caches = [(ta.zeros((2, MAX_T, KV_HEADS, HD), dtype=ta.float64),
               ta.zeros((2, MAX_T, KV_HEADS, HD), dtype=ta.float64)) for _ in range(LAYERS)]
    tokens = ta.tensor(TOKENS[:, :7])
    gen = ta.Generator().manual_seed(0)
    with ta.inference_mode():
        last = _forward(ta, ma, tokens[:, :4], caches=caches)[:, -1]
        for cur in range(4, 7):
            last = _forward(ta, ma, tokens[:, cur:cur + 1], caches=caches, start=cur)[:, -1]
            picked = _top_p(ta, ta.softmax(last / 0.8, dim=-1), 0.9, gen)
            assert picked.shape == (2, 1) and not picked.requires_grad
    with torch.inference_mode():
        want = _forward(torch, mt, torch.tensor(TOKENS[:, :7]))[:, -1]
    np.testing.assert_allclose(last.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


# ---- the complex form of rotary embeddings: refused by name ------------------------------------

def test_polar_and_view_as_complex_are_refused_by_name():
    freqs = ta.outer(ta.arange(4, dtype=ta.float32), ta.ones(2))
    x = ta.ones(1, 4, 2, 4)
    calls = {"polar": lambda: ta.polar(ta.ones_like(freqs), freqs),
             "view_as_complex": lambda: ta.view_as_complex(x.float().reshape(1, 4, 2, -1, 2)),
             "view_as_real": lambda: ta.view_as_real(x),
             "complex": lambda: ta.complex(freqs, freqs)}
    for name, call in calls.items():
        with pytest.raises(ta.DTypeError, match=rf"^{name}: .*complex numbers.*not supported"
                                                r".*cos/sin"):
            call()


@pytest.mark.parametrize("name", ["complex64", "complex128", "cfloat", "cdouble"])
def test_complex_dtypes_are_refused_not_made(name):
    """ta.zeros(3, dtype="complex64") made a complex tensor, which no op was written for."""
    assert str(getattr(ta, name)).startswith("complex")
    for dtype in (name, getattr(ta, name), np.complex64):
        with pytest.raises(ta.DTypeError, match="complex.*not supported"):
            ta.zeros(3, dtype=dtype)
    with pytest.raises(ta.DTypeError, match="complex.*not supported"):
        ta.ones(2).to(np.complex128)


@pytest.mark.parametrize("op", [lambda x: x * 1j, lambda x: 1j + x, lambda x: x ** 1j,
                                lambda x: x - np.complex64(1j), lambda x: x.mul(2 + 0j)])
def test_a_complex_number_operand_is_refused(op):
    """x * 1j made a complex tensor that no op was written for; torch's is complex."""
    with pytest.raises(ta.DTypeError, match=r"complex number .*\(2,\).*not supported"):
        op(ta.ones(2))


def test_complex_torch_dtype_is_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(ta.DTypeError, match="complex64.*not supported"):
        ta.ones(2).to(torch.complex64)


def test_is_complex_is_false():
    x = ta.ones(2)
    assert x.is_complex() is False and ta.is_complex(x) is False
    assert not ta.complex64.is_floating_point and ta.complex64.is_complex
