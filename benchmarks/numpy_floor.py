"""The floor of benchmarks/step.py: one training step of the one-block transformer LM written
out by hand in NumPy, forward and backward, with no graph at all (float32 throughout, fused
layer norm, no needless copies). A reference for timing and for checking gradients, not part
of the package: tinyattn should cost little more than this.
"""

import math

import numpy as np

GELU_C = math.sqrt(2 / math.pi)


def _row_sum(x):
    """Σ over the last dim (kept) as one (M, N) @ ones(N) product, as tinyattn's NumPy backend
    takes it: BLAS does all rows in one call, where x.sum(-1) walks the short rows one by one."""
    n = x.shape[-1]
    return (x.reshape(-1, n) @ np.ones(n, dtype=x.dtype)).reshape(x.shape[:-1] + (1,))


def _row_mean(x):
    s = _row_sum(x)
    s /= x.shape[-1]
    return s


def _ln_fwd(x, w, b, eps=1e-5):
    """Layer norm over the last dim, with two temporaries: (out, cache for _ln_bwd)."""
    xc = x - _row_mean(x)
    sq = xc * xc
    rstd = 1 / np.sqrt(_row_mean(sq) + eps)
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
    c2 = _row_mean(tmp)
    gx -= _row_mean(gx)
    np.multiply(xhat, c2, out=tmp)
    gx -= tmp
    gx *= rstd
    return gx, gw, gb


def _gelu_fwd(f):
    """tanh-GELU as f σ(2u), u = √(2/π) (f + 0.044715 f³) (one exp, as tinyattn's NumPy backend
    computes it), with one temporary besides the output: (out, s = σ(2u))."""
    s = f * f
    s *= 0.044715
    s += 1
    s *= f
    s *= -2 * GELU_C
    with np.errstate(over="ignore"):
        np.exp(s, out=s)
    s += 1
    np.divide(1, s, out=s)
    return f * s, s


def _gelu_bwd(g, f, s):
    """d/df of f s: s + f s (1 - s) d(2u)/df, d(2u)/df = 2√(2/π) (1 + 3·0.044715 f²), times g."""
    du = f * f
    du *= 6 * 0.044715 * GELU_C
    du += 2 * GELU_C
    gf = 1 - s
    gf *= s
    gf *= du
    gf *= f
    gf += s
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
    att /= _row_sum(att)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)  # (B, T, C)
    x1 = _linear(y, p[pre + "attn.proj.weight"], p[pre + "attn.proj.bias"], residual=x0)
    h2, ln2 = _ln_fwd(x1, p[pre + "ln2.weight"], p[pre + "ln2.bias"])
    f = _linear(h2, p[pre + "mlp.fc.weight"], p[pre + "mlp.fc.bias"])  # (B, T, 4C)
    gelu, s_gelu = _gelu_fwd(f)
    x2 = _linear(gelu, p[pre + "mlp.proj.weight"], p[pre + "mlp.proj.bias"], residual=x1)
    h3, lnf = _ln_fwd(x2, p["ln_f.weight"], p["ln_f.bias"])
    logits = h3.reshape(-1, C) @ p["wte.weight"].T  # (B*T, V)
    rows = np.arange(B * T)
    tflat = tgt.reshape(-1)
    picked = logits[rows, tflat]
    m = logits.max(-1, keepdims=True)
    glogits = logits - m  # becomes the softmax, then its gradient, in place
    np.exp(glogits, out=glogits)
    se = _row_sum(glogits)
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
    gf = _gelu_bwd(ggelu, f, s_gelu)
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
    gs -= _row_sum(gatt * att)
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
