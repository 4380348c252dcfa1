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


def text_colour(rgba):
    """Black or white, whichever reads better on a cell of colour `rgba` (its luminance)."""
    r, g, b = rgba[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def _annotate(ax, image, values, cells):
    """Write each cell's value, in black or white by the brightness of the cell's colour."""
    for i, j in cells:
        colour = text_colour(image.cmap(image.norm(values[i, j])))
        ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7, color=colour)


def _hatch_masked(ax, keep):
    """Hatch the masked cells over whatever is drawn there."""
    from matplotlib.patches import Rectangle

    for i, j in zip(*np.nonzero(~keep), strict=True):
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///",
                               edgecolor="#808080", linewidth=0))


def _heatmap(ax, values, keep, tokens, title, cmap="viridis", center=False, annotate=None,
             show_masked=False, label_keys=True, label_queries=True):
    """One (T, S) map. Entries where keep is False are hatched grey, not coloured; with
    show_masked, they keep their colour and number under the hatching (values that exist
    there but that the mask stops, like dL/dA). label_keys / label_queries False: no ticks on
    that axis (a panel inside a grid, whose neighbours carry the labels)."""
    keep = np.broadcast_to(keep, values.shape)
    shown = values if show_masked else np.ma.masked_where(~keep, values)
    ax.set_facecolor(MASKED)
    ax.patch.set_hatch("///")
    ax.patch.set_edgecolor("#b0b0b0")
    drawn = keep | show_masked
    if center:
        lim = float(np.abs(values[drawn]).max(initial=0)) or 1.0
        image = ax.imshow(shown, cmap=cmap, vmin=-lim, vmax=lim)
    else:
        image = ax.imshow(shown, cmap=cmap, vmin=0, vmax=max(1.0, float(shown.max() or 0)))
    if show_masked:
        _hatch_masked(ax, keep)
    n_q, n_k = values.shape
    if annotate is None:
        annotate = n_q * n_k <= 64
    if annotate:
        _annotate(ax, image, values, zip(*np.nonzero(drawn), strict=True))
    _label_tokens(ax, n_q, n_k, tokens, label_keys, label_queries)
    ax.set_title(title, fontsize=9)
    return image


def _label_tokens(ax, n_q, n_k, tokens, label_keys=True, label_queries=True):
    """Ticks and labels for each query and key (the tokens, or their positions); none on an
    axis not to label: each tick costs the layout a text measure (a grid of 8 panels of 64
    tokens took seconds), so a panel inside a grid gets none."""
    labels_q = tokens if tokens is not None else range(n_q)
    labels_k = tokens if tokens is not None and len(tokens) == n_k else range(n_k)
    size = 7 if max(n_q, n_k) <= 24 else 5  # 64 characters stay readable on a larger panel
    ax.set_xticks(range(n_k) if label_keys else [], labels_k if label_keys else [],
                  fontsize=size)
    ax.set_yticks(range(n_q) if label_queries else [], labels_q if label_queries else [],
                  fontsize=size)
    ax.set_xlabel("key" if label_keys else "", fontsize=8)
    ax.set_ylabel("query" if label_queries else "", fontsize=8)


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
    side = max(2.6, 0.1 * max(n_q, n_k))  # inches per map: 64 tokens get 6.4 in, each label room
    width = max(4.8, side * n_heads + 0.6)  # one map alone still has room for its title
    fig = _figure(width, max(3.6, (side - 0.1) * n_layers + 0.6))
    axes = fig.subplots(n_layers, n_heads, squeeze=False)
    for layer in range(n_layers):
        for head in range(n_heads):
            name = f"head {head}" if n_layers == 1 else f"layer {layer} head {head}"
            image = _heatmap(axes[layer][head], w[layer, head], keep, tokens, name,
                             annotate=annotate, label_keys=layer == n_layers - 1,
                             label_queries=head == 0)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    fig.suptitle(_wrap(title or "attention weights (grey: masked)", width), fontsize=10)
    return _finish(fig, path)


def _wrap(title, width_inches, fontsize=10):
    """A title broken into lines that fit a figure `width_inches` wide."""
    import textwrap

    return textwrap.fill(title, max(20, int(width_inches * 120 / fontsize)))


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
    for ax, key, name in ((axes[1], "dA", "dL/dA = g vᵀ (hatched: masked, yet not 0)"),
                          (axes[2], "dscores", "dL/dS = A ⊙ (dL/dA − rowsum)")):
        image = _heatmap(ax, maps[key][index], keep, tokens, name, cmap="RdBu_r", center=True,
                         show_masked=key == "dA")  # the VJP, not dA, zeroes the masked cells
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
        _annotate(ax_j, image, c["J"], np.ndindex(n, n))
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


def jacobian_blocks(jacobian, block, title=None, path=None):
    """A big Jacobian (say of softmax over a (B, T, d) tensor, flattened) as a heatmap with
    its diagonal blocks of `block` × `block` outlined: entries outside them link different
    rows, and for a row-wise function they are exactly zero."""
    from matplotlib.patches import Rectangle

    jac = np.asarray(jacobian, dtype=np.float64)
    fig = _figure(5.2, 4.6)
    ax = fig.subplots()
    lim = float(np.abs(jac).max()) or 1.0
    image = ax.imshow(jac, cmap="RdBu_r", vmin=-lim, vmax=lim)
    for start in range(0, jac.shape[0], block):
        ax.add_patch(Rectangle((start - 0.5, start - 0.5), block, block, fill=False,
                               edgecolor="black", linewidth=1.0))
    ax.set_xlabel("entry j of x (flattened)", fontsize=8)
    ax.set_ylabel("entry i of y (flattened)", fontsize=8)
    ax.tick_params(labelsize=7)
    fig.colorbar(image, ax=ax, shrink=0.8, label="∂y_i / ∂x_j")
    ax.set_title(_wrap(title or "the Jacobian, block by block", 5.2, 9), fontsize=9)
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
    ax_m.bar(np.arange(x.size), x, color="#9ecae1", width=0.8, label="x")
    for r in rows:  # the running max after each step, over the entries that step read
        start, end = r["start"] - 0.4, r["start"] + r["x"].size - 0.6
        ax_m.hlines(r["m"], start, end, color="#d62728", lw=2,
                    label="running m" if r["start"] == 0 else None)
    ax_m.set_xticks(range(x.size))
    ax_m.set_title("running max m" + (f" (steps of {block} entries)" if block > 1 else ""),
                   fontsize=9)
    ax_m.legend(fontsize=7)
    ax_l.plot(steps, [r["l"] for r in rows], "o-", label="running l")
    ax_l.set_xticks(steps)  # whole steps: no 0.5 ticks
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
    ax_y.set_xticks(pos)
    for ax, name in ((ax_m, "entry"), (ax_l, "step"), (ax_y, "entry")):
        ax.tick_params(labelsize=7)
        ax.set_xlabel(name, fontsize=8)
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


def flash_trace(q, k, v, block_q=2, block_k=2, causal=True, scale=None):
    """The flash forward's running state, key tile by key tile, for one head: q (T, d),
    k (S, d), v (S, dv). Returns m and l (T, key tiles) and acc (T, key tiles, dv) after each
    key tile (NaN where the row's query tile skips that key tile), and out, lse at the end —
    the same tiles and the same arithmetic as backends/flash.py."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    n_q, n_k = q.shape[0], k.shape[0]
    n_tiles = -(-n_k // block_k)
    m_at, l_at = np.full((n_q, n_tiles), np.nan), np.full((n_q, n_tiles), np.nan)
    acc_at = np.full((n_q, n_tiles, v.shape[1]), np.nan)
    out, lse = np.zeros((n_q, v.shape[1])), np.full(n_q, -np.inf)
    for i0 in range(0, n_q, block_q):
        rows = slice(i0, min(i0 + block_q, n_q))
        m, l = np.full(rows.stop - i0, -np.inf), np.zeros(rows.stop - i0)
        acc = np.zeros((rows.stop - i0, v.shape[1]))
        for b, j0 in enumerate(range(0, flash.key_end(causal, rows.stop, n_k), block_k)):
            s = flash._tile_scores(np, q[rows][None], k[j0:j0 + block_k][None], None, scale,
                                   causal, i0, j0)[0]  # (bq, bk)
            m_new = np.maximum(m, s.max(axis=-1))
            m_safe = np.where(m_new == -np.inf, 0, m_new)
            p = np.exp(s - m_safe[:, None])
            alpha = np.exp(m - m_safe)
            l, acc, m = l * alpha + p.sum(axis=-1), acc * alpha[:, None] + p @ v[j0:j0 + block_k], \
                m_new
            m_at[rows, b], l_at[rows, b], acc_at[rows, b] = m, l, acc
        out[rows] = acc / np.where(l > 0, l, 1)[:, None]
        lse[rows] = np.where(l > 0, m + np.log(np.where(l > 0, l, 1)), -np.inf)
    return {"m": m_at, "l": l_at, "acc": acc_at, "out": out, "lse": lse}


def _state_map(ax, values, title, block_q):
    """One running quantity per (query row, key tile); grey where the tile was skipped."""
    ax.set_facecolor(MASKED)
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", aspect="auto")
    _annotate(ax, image, values, zip(*np.nonzero(np.isfinite(values)), strict=True))
    ax.set_xticks(range(values.shape[1]), [f"tile {b}" for b in range(values.shape[1])],
                  fontsize=7)
    ax.set_yticks(range(values.shape[0]), [f"q{i}" for i in range(values.shape[0])], fontsize=7)
    for edge in range(block_q, values.shape[0], block_q):  # query tile boundaries
        ax.axhline(edge - 0.5, color="white", lw=1.5)
    ax.set_title(title, fontsize=9)


def flash_tiles(n_q, n_k=None, block_q=2, block_k=2, causal=True, qkv=None, scale=None,
                path=None):
    """Which (query tile, key tile) pairs the flash forward computes; with qkv = (q, k, v) of
    one head, also the running m, l and acc (its first column) of every query row after each
    key tile, as flash_trace computes them."""
    from matplotlib.colors import ListedColormap

    grid = flash_tile_schedule(n_q, n_k, block_q, block_k, causal)
    fig = _figure(3.6 if qkv is None else 13.0, 3.4 if qkv is None else 3.8)
    axes = fig.subplots(1, 1 if qkv is None else 4, squeeze=False)[0]
    ax = axes[0]
    ax.imshow(grid, cmap=ListedColormap(["#eeeeee", "#4c9be8", "#a8cff5"]), vmin=0, vmax=2)
    for (a, b), kind in np.ndenumerate(grid):
        ax.text(b, a, ("skip", "full", "diag")[kind], ha="center", va="center", fontsize=7)
    ax.set_xticks(range(grid.shape[1]), [f"k{b * block_k}" for b in range(grid.shape[1])],
                  fontsize=7)
    ax.set_yticks(range(grid.shape[0]), [f"q{a * block_q}" for a in range(grid.shape[0])],
                  fontsize=7)
    ax.set_title(f"{'causal, ' if causal else ''}{int((grid > 0).sum())} of {grid.size} tiles "
                 "computed", fontsize=9)
    if qkv is not None:
        trace = flash_trace(*qkv, block_q=block_q, block_k=block_k, causal=causal, scale=scale)
        _state_map(axes[1], trace["m"], "running max m after each key tile", block_q)
        _state_map(axes[2], trace["l"], "running sum l = Σ exp(s − m)", block_q)
        _state_map(axes[3], trace["acc"][..., 0], "acc = Σ exp(s − m) v  (column 0)", block_q)
        fig.suptitle(f"flash forward, query tiles of {block_q}, key tiles of {block_k}: "
                     "out = acc / l after the last tile (grey: tile skipped)", fontsize=10)
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


# ---- training -----------------------------------------------------------------------------------


def training_curves(history, path=None):
    """Loss (log scale) and token accuracy per step, of the training batches and, where the run
    evaluated, the held-out set. history: the rows of a run's metrics.jsonl (dicts with step,
    loss, acc and, at evaluations, heldout_loss and heldout_acc)."""
    steps = [r["step"] for r in history]
    evals = [r for r in history if "heldout_loss" in r]
    fig = _figure(10, 3.8)
    ax_loss, ax_acc = fig.subplots(1, 2)
    ax_loss.plot(steps, [r["loss"] for r in history], lw=0.8, alpha=0.7, label="train")
    ax_loss.plot([r["step"] for r in evals], [r["heldout_loss"] for r in evals], "o-",
                 label="held-out")
    ax_loss.set(xlabel="step", ylabel="cross-entropy", yscale="log", title="loss")
    ax_loss.legend()
    ax_acc.plot(steps, [r["acc"] for r in history], lw=0.8, alpha=0.7, label="train batch")
    ax_acc.plot([r["step"] for r in evals], [r["heldout_acc"] for r in evals], "o-",
                label="held-out")
    ax_acc.set(xlabel="step", ylabel="token accuracy", ylim=(0, 1.02), title="accuracy")
    ax_acc.legend(loc="lower right")
    return _finish(fig, path)
