"""What a notebook shows: a tensor's HTML card (shape, dtype, grad_fn, name, a heatmap when
2-D), a graph picture as inline SVG (or its DOT text without Graphviz), plots as PNG."""

import shutil

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn import display, plots, viz


def test_a_tensor_card_shows_shape_dtype_grad_fn_name_and_a_heatmap():
    x = ta.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    a = F.softmax(x, dim=-1)
    a.name = "A"
    card = a._repr_html_()
    assert "<b>A</b>" in card and "(2, 3) float64" in card
    assert "grad_fn=&lt;SoftmaxBackward0&gt;" in card
    assert card.count("<rect") == 6  # one cell per entry
    assert "requires_grad" in x._repr_html_() and "grad_fn" not in x._repr_html_()
    cube = ta.zeros(2, 2, 2)._repr_html_()
    assert "<svg" not in cube and "(2, 2, 2) float32" in cube  # values, no heatmap
    assert "<svg" not in ta.zeros(40, 40)._repr_html_()  # too big for a heatmap


def test_masked_cells_are_grey_and_values_show_on_hover():
    svg = display.heatmap_svg(np.array([[0.0, -np.inf], [0.5, 1.0]]))
    assert svg.count('fill="#d9d9d9"') == 1 and "[0, 1] = -inf" in svg
    assert 'fill="#f7fbff"' in svg and 'fill="#08306b"' in svg  # lowest and highest


def test_a_graph_shows_itself_as_svg_or_as_dot_text():
    x = ta.randn(3, requires_grad=True)
    shown = viz.show(F.softmax(x, dim=0).sum())
    assert shown.source.startswith("digraph tinyattn")
    if shutil.which("dot"):
        bundle = shown._repr_mimebundle_()
        assert bundle["image/svg+xml"].lstrip().startswith("<?xml")
    without = display.Graph(shown.source, dot=None)
    assert without._repr_svg_() is None
    assert without._repr_mimebundle_() == {"text/plain": shown.source}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_plots_show_themselves_as_png():
    fig = plots.softmax_jacobian(np.array([1.0, 2.0, 0.5]))
    assert fig._repr_png_().startswith(b"\x89PNG")
