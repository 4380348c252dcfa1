"""One training step (forward + backward, no optimizer) of a one-block transformer LM, three ways.

(1) tinyattn's TinyTransformer, (2) hand-written NumPy forward and backward with no graph at all
(the floor: float32 throughout, fused layer norm, no needless copies), (3) PyTorch eager when it
is installed. All three start from the same weights; `check` asserts they agree on the loss and
every gradient, then `main` times them interleaved in one process and prints medians and ratios.

    python benchmarks/step.py [--sizes tiny small medium] [--repeats 30]
    tinyattn bench step [same options]
"""

import argparse
import math
import os
import statistics
import sys
import time
import tracemalloc

import numpy as np

SIZES = {  # (vocab V, batch B, time T, channels C, heads H)
    "tiny": (64, 16, 32, 64, 4),
    "small": (128, 32, 64, 128, 4),
    "medium": (256, 32, 128, 256, 8),
}
GELU_C = math.sqrt(2 / math.pi)

# ---- the shared weights --------------------------------------------------------------------------


def make_params(V, T, C, seed=0):  # noqa: N803
    """GPT-2-style weights in tinyattn's layout (Linear weights are (out, in)); head tied to wte."""
    rng = np.random.default_rng(seed)

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def small(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    return {
        "wte.weight": normal(V, C), "wpe.weight": normal(T, C),
        "blocks.0.ln1.weight": 1 + small(C), "blocks.0.ln1.bias": small(C),
        "blocks.0.attn.qkv.weight": normal(3 * C, C), "blocks.0.attn.qkv.bias": small(3 * C),
        "blocks.0.attn.proj.weight": normal(C, C), "blocks.0.attn.proj.bias": small(C),
        "blocks.0.ln2.weight": 1 + small(C), "blocks.0.ln2.bias": small(C),
        "blocks.0.mlp.fc.weight": normal(4 * C, C), "blocks.0.mlp.fc.bias": small(4 * C),
        "blocks.0.mlp.proj.weight": normal(C, 4 * C), "blocks.0.mlp.proj.bias": small(C),
        "ln_f.weight": 1 + small(C), "ln_f.bias": small(C),
    }


def make_batch(V, B, T, seed=1):  # noqa: N803
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


# ---- (2) the NumPy floor -------------------------------------------------------------------------


def _ln_fwd(x, w, b, eps=1e-5):
    """Layer norm over the last dim, with two temporaries: (out, cache for _ln_bwd)."""
    xc = x - x.mean(-1, keepdims=True)
    sq = xc * xc
    rstd = 1 / np.sqrt(sq.mean(-1, keepdims=True) + eps)
    xc *= rstd  # now x̂
    np.multiply(xc, w, out=sq)
    sq += b
    return sq, (xc, rstd, w)


def _ln_bwd(g, cache):
    xhat, rstd, w = cache
    tmp = g * xhat
    gw = tmp.reshape(-1, xhat.shape[-1]).sum(0)
    gb = g.reshape(-1, g.shape[-1]).sum(0)
    gx = g * w  # dL/dx̂, turned into dL/dx in place
    np.multiply(gx, xhat, out=tmp)
    c2 = tmp.mean(-1, keepdims=True)
    gx -= gx.mean(-1, keepdims=True)
    np.multiply(xhat, c2, out=tmp)
    gx -= tmp
    gx *= rstd
    return gx, gw, gb


def _gelu_fwd(f):
    """tanh-GELU with one temporary besides the output: (out, t)."""
    t = f * f
    t *= 0.044715
    t += 1
    t *= f
    t *= GELU_C
    np.tanh(t, out=t)
    out = t + 1
    out *= f
    out *= 0.5
    return out, t


def _gelu_bwd(g, f, t):
    """d/df of 0.5 f (1 + t): 0.5 (1 + t) + 0.5 f (1 - t²) √(2/π) (1 + 3·0.044715 f²), times g."""
    du = f * f
    du *= 3 * 0.044715 * GELU_C
    du += GELU_C
    gf = t * t
    np.subtract(1, gf, out=gf)
    gf *= du
    gf *= f
    gf += 1
    gf += t
    gf *= 0.5
    gf *= g
    return gf


def _linear(x, w, b, residual=None):
    """x @ w.T + b (+ residual) as one 2-D product over the folded batch dims (one BLAS call),
    the additions done in place on the product."""
    out = x.reshape(-1, x.shape[-1]) @ w.T
    out += b
    out = out.reshape(x.shape[:-1] + (w.shape[0],))
    if residual is not None:
        out += residual
    return out


def _linear_bwd(g, x, w):
    """y = x @ w.T + b: (gx, gw, gb) with the batch dims folded into one product."""
    g2 = g.reshape(-1, g.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    return (g2 @ w).reshape(x.shape), g2.T @ x2, g2.sum(0)


def _scatter_rows(out, ids, rows):
    """out[ids] += rows with repeated ids adding up: sort, one reduceat per run (not np.add.at)."""
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    out[ids[starts]] += np.add.reduceat(rows[order], starts, axis=0)


def numpy_step(p, idx, tgt, H):  # noqa: N803
    """Loss and gradients of every parameter, written out by hand."""
    B, T = idx.shape  # noqa: N806
    V, C = p["wte.weight"].shape  # noqa: N806
    D = C // H  # noqa: N806
    pre = "blocks.0."
    # forward
    x0 = p["wte.weight"][idx] + p["wpe.weight"][:T]  # (B, T, C)
    h1, ln1 = _ln_fwd(x0, p[pre + "ln1.weight"], p[pre + "ln1.bias"])
    qkv = _linear(h1, p[pre + "attn.qkv.weight"], p[pre + "attn.qkv.bias"])  # (B, T, 3C)
    q, k, v = qkv.reshape(B, T, 3, H, D).transpose(2, 0, 3, 1, 4)  # (B, H, T, D) each
    scale = np.float32(1 / math.sqrt(D))
    att = q @ k.transpose(0, 1, 3, 2)  # (B, H, T, T)
    att *= scale
    np.copyto(att, -np.inf, where=~np.tri(T, dtype=bool))  # the causal mask, in place
    att -= att.max(-1, keepdims=True)
    np.exp(att, out=att)
    att /= att.sum(-1, keepdims=True)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)  # (B, T, C)
    x1 = _linear(y, p[pre + "attn.proj.weight"], p[pre + "attn.proj.bias"], residual=x0)
    h2, ln2 = _ln_fwd(x1, p[pre + "ln2.weight"], p[pre + "ln2.bias"])
    f = _linear(h2, p[pre + "mlp.fc.weight"], p[pre + "mlp.fc.bias"])  # (B, T, 4C)
    gelu, t = _gelu_fwd(f)
    x2 = _linear(gelu, p[pre + "mlp.proj.weight"], p[pre + "mlp.proj.bias"], residual=x1)
    h3, lnf = _ln_fwd(x2, p["ln_f.weight"], p["ln_f.bias"])
    logits = h3.reshape(-1, C) @ p["wte.weight"].T  # (B*T, V)
    rows = np.arange(B * T)
    tflat = tgt.reshape(-1)
    picked = logits[rows, tflat]
    m = logits.max(-1, keepdims=True)
    glogits = logits - m  # becomes the softmax, then its gradient, in place
    np.exp(glogits, out=glogits)
    se = glogits.sum(-1, keepdims=True)
    loss = float((np.log(se[:, 0]) + m[:, 0] - picked).mean())
    # backward
    grads = {}
    glogits /= se
    glogits[rows, tflat] -= 1
    glogits /= B * T
    gh3 = (glogits @ p["wte.weight"]).reshape(B, T, C)
    gwte = glogits.T @ h3.reshape(-1, C)  # the tied head's share
    gx2, grads["ln_f.weight"], grads["ln_f.bias"] = _ln_bwd(gh3, lnf)
    ggelu, grads[pre + "mlp.proj.weight"], grads[pre + "mlp.proj.bias"] = _linear_bwd(
        gx2, gelu, p[pre + "mlp.proj.weight"])
    gf = _gelu_bwd(ggelu, f, t)
    gh2, grads[pre + "mlp.fc.weight"], grads[pre + "mlp.fc.bias"] = _linear_bwd(
        gf, h2, p[pre + "mlp.fc.weight"])
    gx1_ln, grads[pre + "ln2.weight"], grads[pre + "ln2.bias"] = _ln_bwd(gh2, ln2)
    gx1 = gx1_ln  # the residual stream: both paths add up (in place, gx1_ln is ours)
    gx1 += gx2
    gy, grads[pre + "attn.proj.weight"], grads[pre + "attn.proj.bias"] = _linear_bwd(
        gx1, y, p[pre + "attn.proj.weight"])
    gy = gy.reshape(B, T, H, D).transpose(0, 2, 1, 3)  # (B, H, T, D)
    gatt = gy @ v.transpose(0, 1, 3, 2)  # (B, H, T, T)
    gv = att.transpose(0, 1, 3, 2) @ gy
    gs = gatt  # the softmax VJP, in place: att * (gatt - sum(gatt * att)); masked: att = 0
    gs -= (gatt * att).sum(-1, keepdims=True)
    gs *= att
    gs *= scale
    gqkv = np.empty((B, T, 3, H, D), dtype=np.float32)  # written head by head, no stack
    gqkv[:, :, 0] = (gs @ k).transpose(0, 2, 1, 3)
    gqkv[:, :, 1] = (gs.transpose(0, 1, 3, 2) @ q).transpose(0, 2, 1, 3)
    gqkv[:, :, 2] = gv.transpose(0, 2, 1, 3)
    gqkv = gqkv.reshape(B, T, 3 * C)
    gh1, grads[pre + "attn.qkv.weight"], grads[pre + "attn.qkv.bias"] = _linear_bwd(
        gqkv, h1, p[pre + "attn.qkv.weight"])
    gx0_ln, grads[pre + "ln1.weight"], grads[pre + "ln1.bias"] = _ln_bwd(gh1, ln1)
    gx0 = gx0_ln
    gx0 += gx1
    grads["wpe.weight"] = np.zeros_like(p["wpe.weight"])
    grads["wpe.weight"][:T] = gx0.sum(0)
    _scatter_rows(gwte, idx.reshape(-1), gx0.reshape(-1, C))
    grads["wte.weight"] = gwte
    return loss, grads


# ---- (1) tinyattn --------------------------------------------------------------------------------


def tinyattn_setup(p, H):  # noqa: N803
    import tinyattn as ta

    V, C = p["wte.weight"].shape  # noqa: N806
    T = p["wpe.weight"].shape[0]  # noqa: N806
    model = ta.nn.TinyTransformer(V, C, H, 1, max_len=T)
    model.load_state_dict({**p, "lm_head.weight": p["wte.weight"]})
    return model


def tinyattn_step(model, idx, tgt):
    import tinyattn as ta
    import tinyattn.functional as F

    model.zero_grad()
    logits = model(ta.tensor(idx))  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ta.tensor(tgt.reshape(-1)))
    loss.backward()
    return loss.item(), {n: q.grad.numpy() for n, q in model.named_parameters()}


# ---- (3) PyTorch eager ---------------------------------------------------------------------------


def torch_setup(p, H):  # noqa: N803
    import torch

    return {n: torch.tensor(a, requires_grad=True) for n, a in p.items()}


def torch_step(tp, idx, tgt, H):  # noqa: N803
    import torch
    import torch.nn.functional as TF  # noqa: N812

    for t in tp.values():
        t.grad = None
    idx_t, tgt_t = torch.from_numpy(idx), torch.from_numpy(tgt)
    B, T = idx.shape  # noqa: N806
    C = tp["wte.weight"].shape[1]  # noqa: N806
    pre = "blocks.0."
    x = tp["wte.weight"][idx_t] + tp["wpe.weight"][:T]
    h = TF.layer_norm(x, (C,), tp[pre + "ln1.weight"], tp[pre + "ln1.bias"])
    qkv = TF.linear(h, tp[pre + "attn.qkv.weight"], tp[pre + "attn.qkv.bias"])
    q, k, v = qkv.reshape(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
    y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = y.transpose(1, 2).reshape(B, T, C)
    x = x + TF.linear(y, tp[pre + "attn.proj.weight"], tp[pre + "attn.proj.bias"])
    h = TF.layer_norm(x, (C,), tp[pre + "ln2.weight"], tp[pre + "ln2.bias"])
    h = TF.gelu(TF.linear(h, tp[pre + "mlp.fc.weight"], tp[pre + "mlp.fc.bias"]),
                approximate="tanh")
    x = x + TF.linear(h, tp[pre + "mlp.proj.weight"], tp[pre + "mlp.proj.bias"])
    h = TF.layer_norm(x, (C,), tp["ln_f.weight"], tp["ln_f.bias"])
    logits = h @ tp["wte.weight"].T
    loss = TF.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_t.reshape(-1))
    loss.backward()
    return loss.item(), {n: t.grad.numpy() for n, t in tp.items()}


# ---- agreement, timing, memory -------------------------------------------------------------------


def implementations(size, with_torch=True):
    """{name: step()} for one size, all starting from the same weights and batch."""
    V, B, T, C, H = SIZES[size]  # noqa: N806
    p = make_params(V, T, C)
    idx, tgt = make_batch(V, B, T)
    impls = {"numpy": lambda: numpy_step(p, idx, tgt, H)}
    model = tinyattn_setup(p, H)
    impls["tinyattn"] = lambda: tinyattn_step(model, idx, tgt)
    if with_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
        else:
            tp = torch_setup(p, H)
            impls["torch"] = lambda: torch_step(tp, idx, tgt, H)
    return impls


def check(size="tiny", with_torch=True, rtol=2e-3, atol=2e-5):
    """Assert that every implementation gives the NumPy floor's loss and gradients."""
    impls = implementations(size, with_torch)
    ref_loss, ref_grads = impls["numpy"]()
    for name, step in impls.items():
        loss, grads = step()
        assert abs(loss - ref_loss) <= 1e-4 * abs(ref_loss), (name, loss, ref_loss)
        assert set(grads) == set(ref_grads), (name, sorted(set(grads) ^ set(ref_grads)))
        for key, want in ref_grads.items():
            np.testing.assert_allclose(grads[key], want, rtol=rtol, atol=atol,
                                       err_msg=f"{name} {size} {key}")
            assert grads[key].dtype == np.float32, (name, key, grads[key].dtype)
    return sorted(impls)


def time_interleaved(impls, repeats, warmup=3):
    """Median seconds per call of each implementation, timed in turn round by round."""
    times = {name: [] for name in impls}
    for _ in range(warmup):
        for step in impls.values():
            step()
    for _ in range(repeats):
        for name, step in impls.items():
            t = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def peak_memory(step):
    tracemalloc.start()
    tracemalloc.reset_peak()
    step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args(argv)
    # Between calls, PyTorch's OpenMP threads spin by default, holding the cores that NumPy's
    # BLAS threads need next (and the reverse): on a 2-core machine that distorts an interleaved
    # comparison by up to 2x. Passive waiting gives each library the machine on its turn.
    # (It must be set before torch is imported; a caller's own setting wins.)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch

        torch_note = f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    except ImportError:
        torch_note = "torch not installed"
    print(f"one training step (fwd + bwd), float32; numpy {np.__version__}; {torch_note}")
    print(f"{'size':<7} {'(V, B, T, C, H)':<22} {'impl':<9} {'median ms':>9} {'vs numpy':>9} "
          f"{'vs torch':>9} {'peak MB':>8}")
    for size in args.sizes:
        check(size, not args.no_torch)
        impls = implementations(size, not args.no_torch)
        medians = time_interleaved(impls, args.repeats)
        for name, seconds in medians.items():
            vs_torch = f"{seconds / medians['torch']:.2f}x" if "torch" in medians else "-"
            peak = peak_memory(impls[name]) / 1e6 if name != "torch" else float("nan")
            print(f"{size:<7} {str(SIZES[size]):<22} {name:<9} {seconds * 1e3:>9.2f} "
                  f"{seconds / medians['numpy']:>8.2f}x {vs_torch:>9} {peak:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
