"""How tinyattn's objects show themselves in a notebook, in plain NumPy and text: a tensor's
compact HTML card (shape, dtype, grad_fn, name, a small heatmap of a 2-D tensor) and a graph
picture (`Graph`: SVG through Graphviz's `dot`, the DOT text where `dot` is missing), and
`one_line`, a name escaped to one line of text. Tensor._repr_html_ and viz.show use these;
nothing here knows of tensors or graphs.

Also the text of a tensor's repr, as torch's torch/_tensor_str.py writes it, from the NumPy
array of its values: the print options (`set_printoptions`, `get_printoptions`: precision,
threshold, edgeitems, linewidth, sci_mode, one state for the process as torch's PRINT_OPTS),
`values_text` (the "[1.5000, 2.0000]" part) and `add_suffixes` (", dtype=...", wrapped as torch).
"""

import html
import math
import numbers
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


# ---- a tensor's text, as torch prints it ------------------------------------------------------

_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80}
_PROFILES = {"default": _DEFAULTS,
             "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
             "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80}}
PRINT_OPTS = dict(_DEFAULTS, sci_mode=None)  # the one state of the process, as torch's


def _check_count(name, value, least):
    """An integer option (precision, edgeitems, linewidth) of at least `least`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"set_printoptions: {name} must be an int, got {type(value).__name__} "
                        f"{value!r}")
    if value < least:
        raise ValueError(f"set_printoptions: {name} must be at least {least}, got {value}")


def _checked_options(precision, threshold, edgeitems, linewidth, profile, sci_mode):
    """The options given (None: not given), checked; a bad one is refused by name."""
    if profile is not None and profile not in _PROFILES:
        raise ValueError(f"set_printoptions: profile must be one of 'default', 'short' or "
                         f"'full', got {profile!r}")
    for name, value, least in (("precision", precision, 0), ("edgeitems", edgeitems, 0),
                               ("linewidth", linewidth, 1)):
        if value is not None:
            _check_count(name, value, least)
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise TypeError(f"set_printoptions: threshold must be a number (math.inf for "
                            f"never), got {type(threshold).__name__} {threshold!r}")
        if threshold < 0:
            raise ValueError(f"set_printoptions: threshold must be at least 0, got {threshold}")
    if sci_mode is not None and not isinstance(sci_mode, bool):
        raise TypeError(f"set_printoptions: sci_mode must be True, False or None (automatic), "
                        f"got {sci_mode!r}")
    given = {"precision": precision, "threshold": threshold, "edgeitems": edgeitems,
             "linewidth": linewidth}
    return {k: v for k, v in given.items() if v is not None}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """torch.set_printoptions: how tensors print from now on. `profile` ('default', 'short' or
    'full') sets the four counts first, the others given override it; `sci_mode` is set every
    call (None: chosen from the values), as torch's, so set_printoptions(precision=2) turns an
    earlier sci_mode=True back to automatic."""
    given = _checked_options(precision, threshold, edgeitems, linewidth, profile, sci_mode)
    if profile is not None:
        PRINT_OPTS.update(_PROFILES[profile])
    PRINT_OPTS.update(given)
    PRINT_OPTS["sci_mode"] = sci_mode


def get_printoptions():
    """torch's get_printoptions: the options now, a dict set_printoptions(**d) takes back."""
    return dict(PRINT_OPTS)


class _Formatter:
    """torch's _Formatter: the width and the notation (integer-valued "1.", fixed "1.5000" or
    scientific "1.5000e+00") the shown values of a tensor share."""

    def __init__(self, shown):
        self.floating = shown.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.max_width = True, False, 1
        self.precision = PRINT_OPTS["precision"]
        flat = shown.reshape(-1)
        if not self.floating:
            self.max_width = max([1] + [len(f"{v}") for v in flat.tolist()])
            return
        finite = flat[np.isfinite(flat) & (flat != 0)]
        if finite.size == 0:
            return
        sizes = np.abs(finite.astype(np.float64))
        smallest, largest = sizes.min(), sizes.max()
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        chosen = PRINT_OPTS["sci_mode"]
        self.sci_mode = (largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4) \
            if chosen is None else chosen
        values = finite.tolist()
        if self.sci_mode:
            widths = [len(f"{v:.{self.precision}e}") for v in values]
        elif self.int_mode:
            widths = [len(f"{v:.0f}") + 1 for v in values]
        else:
            widths = [len(f"{v:.{self.precision}f}") for v in values]
        self.max_width = max(widths)

    def format(self, value):
        if not self.floating:
            text = f"{value}"
        elif self.sci_mode:
            text = f"{value:{self.max_width}.{self.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{self.precision}f}"
        return text.rjust(self.max_width)


def _summarized(a):
    """torch's get_summarized_data: only the entries a summary shows (edgeitems at each end of
    each dimension), for the formatter's width."""
    edge = PRINT_OPTS["edgeitems"]
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate([a[:edge], a[-edge:]]) if a.shape[0] > 2 * edge else a
    if not edge:
        return np.empty((0,) * a.ndim, a.dtype)
    rows = list(range(edge)) + list(range(len(a) - edge, len(a))) if len(a) > 2 * edge \
        else range(len(a))
    return np.stack([_summarized(a[i]) for i in rows])


def _vector_text(a, indent, summarize, formatter):
    """A 1-D array's "[a, b, ...]", as many per line as linewidth lets."""
    edge = PRINT_OPTS["edgeitems"]
    per_line = max(1, math.floor((PRINT_OPTS["linewidth"] - indent) / (formatter.max_width + 2)))
    if summarize and not edge:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * edge:
        data = ([formatter.format(v) for v in a[:edge].tolist()] + [" ..."]
                + [formatter.format(v) for v in a[-edge:].tolist()])
    else:
        data = [formatter.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested_text(a, indent, summarize, formatter):
    """torch's _tensor_str_with_formatter: nested brackets, a blank line between blocks."""
    if a.ndim == 0:
        return formatter.format(a.item())
    if a.ndim == 1:
        return _vector_text(a, indent, summarize, formatter)
    edge = PRINT_OPTS["edgeitems"]
    if summarize and a.shape[0] > 2 * edge:
        slices = ([_nested_text(a[i], indent + 1, summarize, formatter) for i in range(edge)]
                  + ["..."] + [_nested_text(a[i], indent + 1, summarize, formatter)
                               for i in range(len(a) - edge, len(a))])
    else:
        slices = [_nested_text(a[i], indent + 1, summarize, formatter) for i in range(len(a))]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def values_text(values, indent):
    """A tensor's values as torch prints them after "tensor(" (`indent` wide): "[]" when
    empty, a summary with "..." past `threshold` entries."""
    a = np.asarray(values)
    if a.size == 0:
        return "[]"
    summarize = a.size > PRINT_OPTS["threshold"]
    formatter = _Formatter(_summarized(a) if summarize else a)
    return _nested_text(a, indent, summarize, formatter)


def shows_size(values):
    """Whether torch's repr names the size: an empty tensor not 1-D, or edgeitems=0 (where
    the values show as "[...]")."""
    a = np.asarray(values)
    return a.ndim != 1 if a.size == 0 else not PRINT_OPTS["edgeitems"]


def add_suffixes(text, suffixes, indent):
    """torch's _add_suffixes: ", dtype=float64)" after the values, each suffix on a line of
    its own (indented) where it would pass linewidth."""
    parts = [text]
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > PRINT_OPTS["linewidth"]:
            parts.append(",\n" + " " * indent + suffix)
            last_line = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line += len(suffix) + 2
    return "".join(parts) + ")"
