"""How tinyattn's objects show themselves in a notebook, in plain NumPy and text: a tensor's
compact HTML card (shape, dtype, grad_fn, name, a small heatmap of a 2-D tensor) and a graph
picture (`Graph`: SVG through Graphviz's `dot`, the DOT text where `dot` is missing), and
`one_line`, a name escaped to one line of text. Tensor._repr_html_ and viz.show use these;
nothing here knows of tensors or graphs.
"""

import html
import subprocess

import numpy as np

HEATMAP_MAX = 32  # a 2-D tensor up to 32 × 32 gets a heatmap; beyond, statistics only
_LOW, _HIGH = np.array([247, 251, 255]), np.array([8, 48, 107])  # white to dark blue


def one_line(name):
    """A name as one line of text: a newline, tab or other control character in it escaped
    (`x\\nbad`), other characters as they are (explain's VJP lines, a Step's repr)."""
    name = str(name)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def _cell_colour(t):
    """The fill for a value scaled to [0, 1]: light to dark blue."""
    r, g, b = (_LOW + (_HIGH - _LOW) * t).astype(int)
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap_svg(a, cell=14):
    """A 2-D array as a small SVG heatmap; each cell's value shows on hover, and non-finite
    cells (-inf: masked) are grey."""
    a = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(a)
    lo, hi = (a[finite].min(), a[finite].max()) if finite.any() else (0.0, 1.0)
    span = (hi - lo) or 1.0
    rows, cols = a.shape
    rects = []
    for i in range(rows):
        for j in range(cols):
            fill = _cell_colour((a[i, j] - lo) / span) if finite[i, j] else "#d9d9d9"
            rects.append(f'<rect x="{j * cell}" y="{i * cell}" width="{cell}" height="{cell}" '
                         f'fill="{fill}"><title>[{i}, {j}] = {a[i, j]:.4g}</title></rect>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{cols * cell}" '
            f'height="{rows * cell}">{"".join(rects)}</svg>')


def tensor_html(values, dtype, shape, requires_grad=False, grad_fn=None, name=None):
    """A tensor's card: `tensor A (4, 4) float64 · grad_fn=<SoftmaxBackward0>`, then a
    heatmap for a small 2-D tensor, or the values (NumPy's summary) otherwise."""
    head = ["<b>tensor</b>"]
    if name:
        head.append(f"<b>{html.escape(name)}</b>")
    head.append(html.escape(str(tuple(shape))) + " " + html.escape(str(dtype)))
    if grad_fn:
        head.append(f"· grad_fn={html.escape(grad_fn)}")
    elif requires_grad:
        head.append("· requires_grad")
    values = np.asarray(values)
    body = ""
    if values.ndim == 2 and max(values.shape) <= HEATMAP_MAX and values.dtype.kind in "fiub":
        body = "<div>" + heatmap_svg(values.astype(np.float64)) + "</div>"
    text = np.array2string(values, precision=4, threshold=64, edgeitems=3)
    body += f"<pre style='margin:2px 0'>{html.escape(text)}</pre>"
    return f"<div style='font-family:monospace'>{' '.join(head)}{body}</div>"


class Graph:
    """A graph picture a notebook shows inline: `dot` turns the DOT text into SVG when it is
    installed; otherwise the notebook shows the DOT text. `.source` is the text."""

    def __init__(self, source, dot=None, summary="graph"):
        self.source = source
        self.dot = dot  # the path of Graphviz's dot program, or None
        self.summary = summary
        self._svg = None

    def _repr_svg_(self):
        if self.dot is None:
            return None
        if self._svg is None:
            done = subprocess.run([self.dot, "-Tsvg"], input=self.source.encode("utf-8"),
                                  capture_output=True, check=False)
            if done.returncode != 0:
                return None
            self._svg = done.stdout.decode("utf-8")
        return self._svg

    def _repr_mimebundle_(self, include=None, exclude=None):
        svg = self._repr_svg_()
        bundle = {"text/plain": self.summary if svg else self.source}
        if svg:
            bundle["image/svg+xml"] = svg
        return bundle

    def __repr__(self):
        return f"<{self.summary}: {len(self.source.splitlines())} lines of DOT>"
