"""Teaching plots (matplotlib): attention maps with their mask, the gradients the softmax VJP
sends back, the softmax Jacobian next to its VJP, the online (m, l) recurrence, flash tiles and
the memory attention saves for backward.

Each `*_check`/`*_maps`/`*_trace` function computes with the library and returns plain NumPy
numbers; the plotting function beside it draws them and returns a matplotlib Figure (saved to
`path` when given). Figures are built without pyplot, so nothing global changes and any
matplotlib backend works; in a notebook a returned Figure shows itself inline (as a PNG).
"""

import functools
import io
import math

import numpy as np

from . import functional as F  # noqa: N812 - PyTorch's usual name
from .backends import flash
from .backends.base import Backend
from .tensor import Tensor, randn, tensor

MASKED = "#d9d9d9"  # masked (never attended) entries are drawn in light grey, hatched


@functools.cache
def _figure_class():
    """matplotlib's Figure, made to show itself in a notebook as a PNG (without pyplot, a
    plain Figure shows only its repr)."""
    from matplotlib.figure import Figure

    class ShownFigure(Figure):
        def _repr_png_(self):
            buffer = io.BytesIO()
            self.savefig(buffer, format="png", dpi=100)
            return buffer.getvalue()

    return ShownFigure


def _figure(width, height):
    return _figure_class()(figsize=(width, height), layout="constrained")


def _finish(fig, path):
    if path is not None:
        fig.savefig(path, dpi=100)
    return fig


def _numpy(a):
    return a.numpy() if isinstance(a, Tensor) else np.asarray(a)


def _leaf(a):
    """A float64 leaf that requires grad, from a Tensor or an array."""
    return tensor(_numpy(a).astype(np.float64), requires_grad=True)


def _keep(n_q, n_k, attn_mask=None, causal=False):
    """Bool (n_q, n_k) or broadcastable: True where query i may attend key j."""
    keep = np.ones((n_q, n_k), dtype=bool)
    if causal:
        keep &= np.tril(keep)
    if attn_mask is not None:
        keep = keep & _numpy(attn_mask).astype(bool)
    return keep


def _heatmap(ax, values, keep, tokens, title, cmap="viridis", center=False, annotate=None):
    """One (T, S) map; entries where keep is False are hatched grey, not coloured."""
    keep = np.broadcast_to(keep, values.shape)
    shown = np.ma.masked_where(~keep, values)
    ax.set_facecolor(MASKED)
    ax.patch.set_hatch("///")
    ax.patch.set_edgecolor("#b0b0b0")
    if center:
        lim = float(np.abs(values[keep]).max(initial=0)) or 1.0
        image = ax.imshow(shown, cmap=cmap, vmin=-lim, vmax=lim)
    else:
        image = ax.imshow(shown, cmap=cmap, vmin=0, vmax=max(1.0, float(shown.max() or 0)))
    n_q, n_k = values.shape
    if annotate is None:
        annotate = n_q * n_k <= 64
    if annotate:
        for i in range(n_q):
            for j in range(n_k):
                if keep[i, j]:
                    ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if not center and values[i, j] < 0.5 else "black")
    labels_q = tokens if tokens is not None else range(n_q)
    labels_k = tokens if tokens is not None and len(tokens) == n_k else range(n_k)
    ax.set_xticks(range(n_k), labels_k, fontsize=7)
    ax.set_yticks(range(n_q), labels_q, fontsize=7)
    ax.set_xlabel("key", fontsize=8)
    ax.set_ylabel("query", fontsize=8)
    ax.set_title(title, fontsize=9)
    return image


# ---- attention maps -----------------------------------------------------------------------------


def attention_maps(weights, tokens=None, attn_mask=None, causal=False, annotate=None,
                   title=None, path=None):
    """Every head's attention weights as a heatmap, masked entries hatched grey.

    weights: (T, S), (H, T, S) or (L, H, T, S) — one row of panels per layer. attn_mask: bool,
    True where a query may attend; causal: hide keys after the query. annotate: write the
    numbers in the cells (default: when a map has at most 64 cells).
    """
    w = _numpy(weights).astype(np.float64)
    w = w.reshape((1,) * (4 - w.ndim) + w.shape)  # (L, H, T, S)
    n_layers, n_heads, n_q, n_k = w.shape
    keep = _keep(n_q, n_k, attn_mask, causal)
    fig = _figure(2.6 * n_heads + 0.6, 2.5 * n_layers + 0.4)
    axes = fig.subplots(n_layers, n_heads, squeeze=False)
    for layer in range(n_layers):
        for head in range(n_heads):
            name = f"head {head}" if n_layers == 1 else f"layer {layer} head {head}"
            image = _heatmap(axes[layer][head], w[layer, head], keep, tokens, name,
                             annotate=annotate)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    fig.suptitle(title or "attention weights (grey: masked)", fontsize=10)
    return _finish(fig, path)


def attention_grad_maps(q, k, v, g=None, attn_mask=None, is_causal=False, scale=None):
    """Run attention op by op and backward, keeping the gradients on the way: a dict of
    A (the weights), dA = dL/dA, dscores = dL/dS (what the softmax VJP sends back, S the
    scaled, masked scores), out, g and keep. q (..., T, d), k (..., S, d), v (..., S, dv);
    g = dL/d out, by default out itself (the loss ½‖out‖²)."""
    q, k, v = _leaf(q), _leaf(k), _leaf(v)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    keep = _keep(q.shape[-2], k.shape[-2], attn_mask, is_causal)
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., T, S)
    scores = scores.masked_fill(~keep, float("-inf"))
    scores.retain_grad()
    weights = F.softmax(scores, dim=-1)  # (..., T, S)
    weights.retain_grad()
    out = weights @ v  # (..., T, dv)
    g = out.numpy().copy() if g is None else _numpy(g).astype(np.float64)
    out.backward(gradient=g)
    return {"A": weights.numpy(), "dA": weights.grad.numpy(), "dscores": scores.grad.numpy(),
            "out": out.numpy(), "g": g, "v": v.numpy(), "keep": keep}


def attention_gradients(q, k, v, g=None, attn_mask=None, is_causal=False, scale=None,
                        index=(), tokens=None, path=None):
    """Three maps for one head: the weights A, dL/dA = g vᵀ, and dL/dscores =
    A * (dL/dA - rowsum(dL/dA * A)), the softmax VJP. `index` picks the head from the leading
    dims (e.g. (0, 1): batch 0, head 1)."""
    maps = attention_grad_maps(q, k, v, g, attn_mask, is_causal, scale)
    keep = np.broadcast_to(maps["keep"], maps["A"].shape)[index]
    fig = _figure(9.6, 3.2)
    axes = fig.subplots(1, 3)
    image = _heatmap(axes[0], maps["A"][index], keep, tokens, "A = softmax(S)")
    fig.colorbar(image, ax=axes[0], shrink=0.8)
    for ax, key, name in ((axes[1], "dA", "dL/dA = g vᵀ"),
                          (axes[2], "dscores", "dL/dS = A ⊙ (dL/dA − rowsum)")):
        image = _heatmap(ax, maps[key][index], keep, tokens, name, cmap="RdBu_r", center=True)
        fig.colorbar(image, ax=ax, shrink=0.8)
    rows = np.abs(maps["dscores"][index].sum(axis=-1)).max()
    fig.suptitle(f"what the softmax VJP sends back (each row of dL/dS sums to 0: "
                 f"max |row sum| = {rows:.1e})", fontsize=10)
    return _finish(fig, path)


# ---- the softmax Jacobian ---------------------------------------------------------------------


def softmax_jacobian_check(x, g=None):
    """For a vector x: y = softmax(x), the Jacobian J = diag(y) - y yᵀ built in full, Jᵀg, and
    the library's VJP (x.grad after backward from g); max_err is |Jᵀg - VJP| at its largest."""
    x = np.asarray(x, dtype=np.float64)
    g = np.linspace(-1.0, 1.0, x.size) if g is None else np.asarray(g, dtype=np.float64)
    xt = tensor(x, requires_grad=True)
    y = F.softmax(xt, dim=0)
    y.backward(gradient=tensor(g))
    yv = y.numpy()
    jac = np.diag(yv) - np.outer(yv, yv)  # (n, n): never built by the library itself
    jtg = jac.T @ g
    vjp = xt.grad.numpy()
    return {"x": x, "y": yv, "g": g, "J": jac, "JTg": jtg, "vjp": vjp,
            "max_err": float(np.abs(jtg - vjp).max())}


def softmax_jacobian(x, g=None, path=None):
    """The Jacobian of softmax at x as a heatmap, next to Jᵀg and the VJP y ⊙ (g − Σ g·y)."""
    c = softmax_jacobian_check(x, g)
    n = c["x"].size
    fig = _figure(9.0, 3.4)
    ax_j, ax_v = fig.subplots(1, 2, width_ratios=[1, 1.3])
    lim = float(np.abs(c["J"]).max())
    image = ax_j.imshow(c["J"], cmap="RdBu_r", vmin=-lim, vmax=lim)
    if n <= 8:
        for i in range(n):
            for j in range(n):
                ax_j.text(j, i, f"{c['J'][i, j]:.2f}", ha="center", va="center", fontsize=7)
    ax_j.set_title("J = diag(y) − y yᵀ", fontsize=9)
    ax_j.set_xticks(range(n))
    ax_j.set_yticks(range(n))
    fig.colorbar(image, ax=ax_j, shrink=0.8)
    pos = np.arange(n)
    ax_v.bar(pos - 0.2, c["JTg"], width=0.4, label="Jᵀg (the full Jacobian)")
    ax_v.bar(pos + 0.2, c["vjp"], width=0.4, label="VJP y ⊙ (g − Σ g·y)")
    ax_v.axhline(0, color="black", lw=0.6)
    ax_v.set_xticks(pos)
    ax_v.set_xlabel("entry of x", fontsize=8)
    ax_v.legend(fontsize=7)
    ax_v.set_title(f"the same numbers: max |Jᵀg − VJP| = {c['max_err']:.1e}", fontsize=9)
    return _finish(fig, path)


# ---- the online softmax ---------------------------------------------------------------------


def online_softmax_trace(x, block=1):
    """The online (m, l) recurrence over a row x, `block` entries at a time, with the library's
    merge rule: a list of dicts (start, block values, m, l, rescale of the old l)."""
    x = np.asarray(x, dtype=np.float64)
    m, l = np.float64(-np.inf), np.float64(0.0)
    rows = []
    for start in range(0, x.size, block):
        xb = x[start:start + block]
        m_b = xb.max()
        l_b = np.exp(xb - m_b).sum()
        m_new, l_new = Backend.online_merge(np, m, l, m_b, l_b)
        rescale = float(np.exp(m - m_new)) if np.isfinite(m) else 0.0
        rows.append({"start": start, "x": xb, "m": float(m_new), "l": float(l_new),
                     "rescale": rescale})
        m, l = m_new, l_new
    return rows


def online_softmax(x, block=1, path=None):
    """The running max m and running sum l of the online softmax, step by step, and the final
    softmax exp(x − m) / l beside the three-pass one."""
    x = np.asarray(x, dtype=np.float64)
    rows = online_softmax_trace(x, block)
    steps = np.arange(len(rows))
    fig = _figure(9.0, 3.2)
    ax_m, ax_l, ax_y = fig.subplots(1, 3)
    ax_m.bar(np.arange(x.size) / block, x, color="#9ecae1", width=0.8 / block, label="x")
    ax_m.step(steps, [r["m"] for r in rows], where="mid", color="#d62728", label="running m")
    ax_m.set_title("running max m", fontsize=9)
    ax_m.legend(fontsize=7)
    ax_l.plot(steps, [r["l"] for r in rows], "o-", label="running l")
    grew = [i for i, r in enumerate(rows) if 0 < r["rescale"] < 1]
    ax_l.plot(grew, [rows[i]["l"] for i in grew], "s", mfc="none", color="#d62728", ms=10,
              label="m grew: old l rescaled")
    ax_l.set_title("running sum l = Σ exp(x − m)", fontsize=9)
    ax_l.legend(fontsize=7)
    m, l = rows[-1]["m"], rows[-1]["l"]
    y_online = np.exp(x - m) / l
    y_three = tensor(x).softmax(dim=0).numpy()
    pos = np.arange(x.size)
    ax_y.bar(pos - 0.2, y_three, width=0.4, label="three-pass softmax")
    ax_y.bar(pos + 0.2, y_online, width=0.4, label="exp(x − m) / l")
    ax_y.set_title(f"same result: max diff {np.abs(y_online - y_three).max():.1e}", fontsize=9)
    ax_y.legend(fontsize=7)
    for ax in (ax_m, ax_l, ax_y):
        ax.tick_params(labelsize=7)
        ax.set_xlabel("step" if ax is not ax_y else "entry", fontsize=8)
    return _finish(fig, path)


# ---- flash attention ----------------------------------------------------------------------------


def flash_tile_schedule(n_q, n_k=None, block_q=2, block_k=2, causal=True):
    """(n_q/bq, n_k/bk) ints: 0 where the flash forward skips a tile, 1 where it visits it,
    2 where it visits it and masks part of it (the diagonal under causal)."""
    n_k = n_q if n_k is None else n_k
    grid = np.zeros((-(-n_q // block_q), -(-n_k // block_k)), dtype=int)
    for a, i0 in enumerate(range(0, n_q, block_q)):
        i1 = min(i0 + block_q, n_q)
        for b, j0 in enumerate(range(0, flash.key_end(causal, i1, n_k), block_k)):
            grid[a, b] = 2 if causal and j0 + block_k - 1 > i0 else 1
    return grid


def flash_tiles(n_q, n_k=None, block_q=2, block_k=2, causal=True, path=None):
    """Which (query tile, key tile) pairs the flash forward computes."""
    from matplotlib.colors import ListedColormap

    grid = flash_tile_schedule(n_q, n_k, block_q, block_k, causal)
    fig = _figure(3.6, 3.4)
    ax = fig.subplots()
    ax.imshow(grid, cmap=ListedColormap(["#eeeeee", "#4c9be8", "#a8cff5"]), vmin=0, vmax=2)
    for (a, b), kind in np.ndenumerate(grid):
        ax.text(b, a, ("skip", "full", "diag")[kind], ha="center", va="center", fontsize=7)
    ax.set_xticks(range(grid.shape[1]), [f"k{b * block_k}" for b in range(grid.shape[1])],
                  fontsize=7)
    ax.set_yticks(range(grid.shape[0]), [f"q{a * block_q}" for a in range(grid.shape[0])],
                  fontsize=7)
    ax.set_title(f"{'causal, ' if causal else ''}{int((grid > 0).sum())} of {grid.size} tiles "
                 "computed", fontsize=9)
    return _finish(fig, path)


def saved_bytes(n_tokens, impl, d=16, heads=1, causal=True):
    """Bytes the graph of one attention call keeps for backward (float32, batch 1)."""
    from .viz import saved_arrays

    q, k, v = (randn(1, heads, n_tokens, d, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, impl=impl)
    return sum(row[3] for row in saved_arrays(out.sum()))


def attention_memory(lengths=(64, 128, 256, 512), d=16, heads=1, path=None):
    """What one attention call saves for backward, composite (the T×T weights) against flash
    (q, k, v, out and one log-sum-exp per row), as the sequence grows."""
    lengths = list(lengths)
    composite = [saved_bytes(n, "composite", d, heads) / 1024 for n in lengths]
    fused = [saved_bytes(n, "flash", d, heads) / 1024 for n in lengths]
    fig = _figure(4.6, 3.2)
    ax = fig.subplots()
    ax.plot(lengths, composite, "o-", label="composite: saves the T×T weights")
    ax.plot(lengths, fused, "s-", label="flash: saves O(T·d)")
    ax.set(xscale="log", yscale="log", xlabel="tokens T", ylabel="KiB saved for backward")
    ax.minorticks_off()
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.legend(fontsize=7)
    ax.set_title(f"memory kept for backward (d = {d}, {heads} head{'s' * (heads > 1)})",
                 fontsize=9)
    return _finish(fig, path)
