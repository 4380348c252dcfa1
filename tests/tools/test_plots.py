"""Teaching plots: the numbers behind each picture are right (checked against NumPy written out
by hand), and every plot writes a real image file."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn import plots

pytest.importorskip("matplotlib")


def is_png(path):
    data = path.read_bytes()
    return data.startswith(b"\x89PNG") and len(data) > 2000


def qkv(seed=0, shape=(2, 4, 8)):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(3)]


def test_attention_maps_show_every_head_with_the_mask(tmp_path):
    q, k, _ = qkv()
    weights = F.attention_weights(ta.tensor(q), ta.tensor(k), is_causal=True)  # (2, 4, 4)
    fig = plots.attention_maps(weights, tokens=list("abcd"), causal=True,
                               path=tmp_path / "maps.png")
    assert is_png(tmp_path / "maps.png")
    heads = [ax for ax in fig.axes if ax.get_title().startswith("head")]
    assert [ax.get_title() for ax in heads] == ["head 0", "head 1"]
    image = heads[0].get_images()[0].get_array()
    assert image.mask.tolist() == np.triu(np.ones((4, 4), bool), k=1).tolist()  # the future
    assert len(heads[0].texts) == 10  # the numbers of the 10 visible cells
    layered = plots.attention_maps(np.stack([weights.numpy()] * 3), annotate=False)
    assert sum(ax.get_title().startswith("layer 2") for ax in layered.axes) == 2


def test_a_grid_of_maps_labels_the_tokens_on_its_outer_panels_only():
    weights = F.softmax(ta.randn(2, 3, 4, 4), dim=-1)  # (L, H, T, T)
    fig = plots.attention_maps(weights, tokens=list("abcd"), causal=True)
    fig.canvas.draw()  # tick labels are laid out on drawing
    grid = [ax for ax in fig.axes if ax.get_title().startswith("layer")]
    assert len(grid) == 6

    def shown(labels):
        return [t.get_text() for t in labels if t.get_visible() and t.get_text()]

    for n, ax in enumerate(grid):
        row, col = divmod(n, 3)
        assert shown(ax.get_yticklabels()) == (list("abcd") if col == 0 else [])
        assert shown(ax.get_xticklabels()) == (list("abcd") if row == 1 else [])
        assert ax.get_ylabel() == ("query" if col == 0 else "")
        assert ax.get_xlabel() == ("key" if row == 1 else "")
        # an inner panel has no ticks at all (each one costs the layout: 64 tokens x 8 panels
        # took seconds)
        assert len(ax.get_yticks()) == (4 if col == 0 else 0)
        assert len(ax.get_xticks()) == (4 if row == 1 else 0)


def test_attention_grad_maps_are_the_softmax_vjp():
    q, k, v = qkv(1)
    m = plots.attention_grad_maps(q, k, v, is_causal=True)
    keep = np.tril(np.ones((4, 4), bool))
    scores = np.where(keep, q @ k.swapaxes(-1, -2) / np.sqrt(8), -np.inf)
    a = np.exp(scores - scores.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    np.testing.assert_allclose(m["A"], a, atol=1e-12)
    g = a @ v  # the default upstream gradient: out itself
    np.testing.assert_allclose(m["dA"], g @ v.swapaxes(-1, -2), atol=1e-12)
    ds = a * (m["dA"] - (m["dA"] * a).sum(-1, keepdims=True))
    np.testing.assert_allclose(m["dscores"], ds, atol=1e-12)
    np.testing.assert_allclose(m["dscores"].sum(-1), 0, atol=1e-12)  # rows sum to zero
    assert (m["dscores"][..., ~keep] == 0).all()  # masked scores get no gradient


def test_attention_gradients_figure(tmp_path):
    q, k, v = qkv(2)
    fig = plots.attention_gradients(q, k, v, is_causal=True, index=(1,),
                                    path=tmp_path / "grads.png")
    assert is_png(tmp_path / "grads.png")
    titles = [ax.get_title() for ax in fig.axes]
    assert "A = softmax(S)" in titles and any(t.startswith("dL/dA = g vᵀ") for t in titles)


def test_softmax_jacobian_matches_the_vjp(tmp_path):
    x = np.array([1.0, 2.0, 0.5, -1.0])
    g = np.array([0.3, -1.0, 2.0, 0.0])
    c = plots.softmax_jacobian_check(x, g)
    y = np.exp(x) / np.exp(x).sum()
    np.testing.assert_allclose(c["J"], np.diag(y) - np.outer(y, y), atol=1e-15)
    np.testing.assert_allclose(c["J"].sum(axis=0), 0, atol=1e-15)  # shifting x changes nothing
    np.testing.assert_allclose(c["vjp"], y * (g - (g * y).sum()), atol=1e-15)
    assert c["max_err"] < 1e-15
    fig = plots.softmax_jacobian(x, g, path=tmp_path / "jac.png")
    assert is_png(tmp_path / "jac.png")
    assert any(ax.get_title().startswith("the same numbers: max |Jᵀg − VJP|") for ax in fig.axes)


def test_online_softmax_trace_is_the_recurrence(tmp_path):
    x = np.array([1.0, 3.0, 0.5, 4.0])
    rows = plots.online_softmax_trace(x)
    assert [r["m"] for r in rows] == [1.0, 3.0, 3.0, 4.0]
    m, l = -np.inf, 0.0
    for r, xi in zip(rows, x, strict=True):  # m' = max(m, x_i), l' = l e^(m - m') + e^(x_i - m')
        m_new = max(m, xi)
        l = l * np.exp(m - m_new) + np.exp(xi - m_new)
        m = m_new
        assert r["l"] == pytest.approx(l, rel=1e-15)
    assert [r["rescale"] for r in rows][1] == pytest.approx(np.exp(-2.0))
    blocks = plots.online_softmax_trace(x, block=2)
    assert len(blocks) == 2 and blocks[-1]["l"] == pytest.approx(rows[-1]["l"], rel=1e-15)
    plots.online_softmax(x, path=tmp_path / "online.png")
    assert is_png(tmp_path / "online.png")


def test_flash_tiles_and_memory(tmp_path):
    grid = plots.flash_tile_schedule(8, block_q=2, block_k=2, causal=True)
    assert grid.tolist() == [[2, 0, 0, 0], [1, 2, 0, 0], [1, 1, 2, 0], [1, 1, 1, 2]]
    assert (plots.flash_tile_schedule(6, 4, 2, 2, causal=False) == 1).all()
    plots.flash_tiles(8, path=tmp_path / "tiles.png")
    assert is_png(tmp_path / "tiles.png")
    t, d = 64, 16
    composite = plots.saved_bytes(t, "composite", d)
    flash = plots.saved_bytes(t, "flash", d)
    assert composite >= 4 * t * t  # the (T, T) float32 weights
    assert flash == 4 * (4 * t * d + t)  # q, k, v, out and one log-sum-exp per row
    assert plots.saved_bytes(2 * t, "flash", d) == 2 * flash  # linear in T
    plots.attention_memory(lengths=(16, 32), path=tmp_path / "memory.png")
    assert is_png(tmp_path / "memory.png")


def test_numbers_are_white_on_dark_cells_and_black_on_light_ones():
    assert plots.text_colour((0.05, 0.05, 0.3, 1.0)) == "white"
    assert plots.text_colour((0.95, 0.95, 0.9, 1.0)) == "black"
    fig = plots.softmax_jacobian(np.array([4.0, 0.0, -1.0]))  # a strong diagonal: dark cells
    ax = next(a for a in fig.axes if a.get_title().startswith("J ="))
    image = ax.get_images()[0]
    for text in ax.texts:
        x, y = (round(c) for c in text.get_position())
        cell = image.cmap(image.norm(image.get_array()[y, x]))
        assert text.get_color() == plots.text_colour(cell)
    assert {t.get_color() for t in ax.texts} == {"black", "white"}


def test_attention_gradients_show_da_where_masked_and_mark_it():
    q, k, v = qkv(3, (4, 8))
    fig = plots.attention_gradients(q, k, v, is_causal=True)
    d_a = next(ax for ax in fig.axes if ax.get_title().startswith("dL/dA"))
    d_s = next(ax for ax in fig.axes if ax.get_title().startswith("dL/dS"))
    assert len(d_a.texts) == 16 and len(d_s.texts) == 10  # dA's masked cells have values
    assert sum(p.get_hatch() == "///" for p in d_a.patches) == 6  # ... marked as masked
    maps = plots.attention_grad_maps(q, k, v, is_causal=True)
    masked = ~np.tril(np.ones((4, 4), bool))
    shown = {t.get_text() for t in d_a.texts}
    assert {f"{x:.2f}" for x in maps["dA"][masked]} <= shown
    assert np.abs(maps["dA"][masked]).min() > 0  # not zero before the softmax VJP


def test_online_softmax_ticks_are_whole_entries_and_steps():
    fig = plots.online_softmax(np.array([1.0, 3.0, 0.5, 4.0, 2.0, -1.0]), block=2)
    for ax in fig.axes:
        ticks = ax.get_xticks()
        assert np.array_equal(ticks, np.round(ticks)), (ax.get_title(), ticks)
    assert list(fig.axes[1].get_xticks()) == [0, 1, 2]  # three steps of two entries


def test_flash_trace_follows_the_flash_forward_tile_by_tile(tmp_path):
    from tinyattn.backends.flash import flash_forward

    q, k, v = qkv(4, (8, 4))
    trace = plots.flash_trace(q, k, v, block_q=2, block_k=3, causal=True, scale=0.5)
    out, lse = flash_forward(np, q[None], k[None], v[None], scale=0.5, causal=True, block_q=2,
                             block_k=3)
    np.testing.assert_allclose(trace["out"], out[0], atol=1e-12)
    np.testing.assert_allclose(trace["lse"], lse[0], atol=1e-12)
    schedule = plots.flash_tile_schedule(8, block_q=2, block_k=3, causal=True)
    visited = np.repeat(schedule > 0, 2, axis=0)  # one row per query
    assert np.array_equal(np.isfinite(trace["m"]), visited)
    m = np.where(visited, trace["m"], -1e300)
    assert (np.diff(m, axis=1)[visited[:, 1:]] >= 0).all()  # the running max only grows
    last = visited.sum(axis=1) - 1
    np.testing.assert_allclose(trace["acc"][np.arange(8), last] / trace["l"][np.arange(8), last,
                                                                              None], out[0])
    fig = plots.flash_tiles(8, block_q=2, block_k=3, qkv=(q, k, v), scale=0.5,
                            path=tmp_path / "tiles.png")
    assert len([ax for ax in fig.axes if ax.get_title()]) == 4 and is_png(tmp_path / "tiles.png")


def test_jacobian_blocks_outlines_one_block_per_row(tmp_path):
    fig = plots.jacobian_blocks(np.eye(12), block=4, path=tmp_path / "blocks.png")
    assert is_png(tmp_path / "blocks.png")
    assert len(fig.axes[0].patches) == 3


def test_a_single_small_map_has_room_for_its_title():
    weights = F.attention_weights(ta.randn(4, 2), ta.randn(4, 2), is_causal=True)
    fig = plots.attention_maps(weights, title="a title long enough to be cut off on both sides "
                                              "of a narrow figure")
    width, _ = fig.get_size_inches()
    assert width >= 4.8 and "\n" in fig._suptitle.get_text()


def test_the_training_report_draws_its_attention_maps_with_a_colour_bar(tmp_path, monkeypatch):
    from tinyattn import train

    drawn = []
    original = plots.attention_maps

    def attention_maps(*args, **kwargs):
        drawn.append(original(*args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(plots, "attention_maps", attention_maps)
    weights = F.softmax(ta.randn(2, 2, 5, 5), dim=-1).numpy()  # (L, H, T, T)
    train._plot_attention(weights, list("abcde"), tmp_path / "attention.png", "reverse")
    assert is_png(tmp_path / "attention.png")
    (fig,) = drawn
    assert any(ax.get_ylabel() == "attention weight" for ax in fig.axes)  # the colour bar


def test_training_curves_draw_the_rows_of_a_run():
    history = [{"step": s, "loss": 2.0 / s, "acc": s / 10} for s in range(1, 11)]
    for row in history[4::5]:
        row.update(heldout_loss=row["loss"] * 1.1, heldout_acc=row["acc"] * 0.9)
    fig = plots.training_curves(history)
    ax_loss, ax_acc = fig.axes
    train, heldout = ax_loss.get_lines()
    assert list(train.get_xdata()) == list(range(1, 11))
    assert list(heldout.get_xdata()) == [5, 10]
    assert heldout.get_ydata()[0] == pytest.approx(2.0 / 5 * 1.1)
    assert ax_loss.get_yscale() == "log" and ax_acc.get_ylim()[1] == pytest.approx(1.02)
    assert list(ax_acc.get_lines()[1].get_ydata()) == pytest.approx([0.45, 0.9])
