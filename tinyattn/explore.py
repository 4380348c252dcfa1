"""The backward-pass explorer: one self-contained HTML page to click through a backward pass.

`viz.explore(loss)` lays the graph out with Graphviz and hands the SVG here; `build` runs the
backward pass one VJP at a time (`backward_steps`, the walk explain mode tells) and writes every
forward value, every g and every gradient each VJP sends into the page as JSON, beside the
page's own script and style (tinyattn/assets/explore.*). The walk runs the tensors' hooks as
backward would (or none, with hooks=False) and shows the gradient on both sides of them. No
server, no network: the file works from file:// and offline, is written whole or not at all
(files.atomic_write), and `Explorer` shows itself in Jupyter as an IFrame.
`screenshot` and `load_ms` drive the page in headless Chromium (Playwright) for docs and tests.
"""

import base64
import contextlib
import functools
import html
import json
import os
import re
import shutil
import statistics
import subprocess
from pathlib import Path

import numpy as np

from .autograd import Tracer, backward_steps, toposort, tracing
from .errors import GraphError
from .explain import describe, grad_names, grad_text, live_tensor, norm, param_names
from .files import atomic_write

ASSETS = Path(__file__).resolve().parent / "assets"
SMALL = 16  # tensors with at most this many elements show every number
HEAT_ROWS, HEAT_COLS = 32, 64  # the largest 2-D slice a heatmap shows (the rest is cropped)
CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


# ---- values as the page shows them ---------------------------------------------------------------


def _g3(x):
    """A number as explain mode prints it (3 significant digits)."""
    return f"{x:.3g}"


def _host(value):
    """(array, backend) -> a NumPy array (a Python number becomes a 0-d array)."""
    array, be = value
    return np.asarray(array if be is None else be.to_numpy(array))


def _stats(a):
    """Mean, std, min, max of the finite values, and how many are not finite."""
    if a.dtype == np.bool_:
        return {"true": int(a.sum())}
    a64 = a.astype(np.float64)
    kept = a64[np.isfinite(a64)]
    out = {"nonfinite": int(a.size - kept.size)}
    if kept.size:
        out.update(mean=_g3(kept.mean()), std=_g3(kept.std()), min=_g3(kept.min()),
                   max=_g3(kept.max()))
    return out


def _heatmap(a):
    """The first 2-D slice of `a` (leading indices 0), cropped to HEAT_ROWS x HEAT_COLS, as
    one byte per cell (255: not finite): signed values on a scale symmetric around 0, others
    between their min and max."""
    lead = (0,) * max(a.ndim - 2, 0)
    m = a[lead] if a.ndim >= 2 else a.reshape(1, -1)
    rows, cols = m.shape
    m = m[:HEAT_ROWS, :HEAT_COLS].astype(np.float64)
    finite = np.isfinite(m)
    kept = m[finite]
    lo, hi = (float(kept.min()), float(kept.max())) if kept.size else (0.0, 0.0)
    signed = lo < 0 < hi
    if signed:
        scale = max(-lo, hi)
        lo, hi = -scale, scale
    span = hi - lo if hi > lo else 1.0
    codes = np.where(finite, np.rint((np.where(finite, m, lo) - lo) / span * 254), 255)
    where = "".join(f"{i}, " for i in lead) + (":, :" if a.ndim >= 2 else ":")
    return {"rows": int(m.shape[0]), "cols": int(m.shape[1]), "of": [int(rows), int(cols)],
            "slice": f"[{where}]", "lo": lo, "hi": hi, "signed": bool(signed),
            "cells": base64.b64encode(codes.astype(np.uint8).tobytes()).decode("ascii")}


def payload(a):
    """What the panel shows of one array: shape, dtype and norm (and "shown", what an edge
    that carried it says: a one-element gradient's signed value, else the norm in ‖ ‖, as
    explain mode prints it); every number when small; summary statistics and a heatmap of a
    2-D slice when large."""
    a = np.asarray(a)
    out = {"shape": list(a.shape), "dtype": str(a.dtype)}
    if a.dtype.kind in "fiu":
        out["norm"] = _g3(norm(a))
        out["shown"] = grad_text(a).removeprefix("= ")
    if a.size <= SMALL:
        text = np.array2string(a, precision=4, separator=", ", suppress_small=True)
        out["text"] = text
        return out
    out["stats"] = _stats(a)
    if a.dtype.kind in "fiub":
        out["heat"] = _heatmap(a)
    return out


# ---- the walk: every node, every step ------------------------------------------------------------


class _Sums(Tracer):
    """Collects the accumulations ("+=") the backward walk makes while one VJP sends its parts:
    those of the graph's own nodes (`index`) only. A VJP that runs a backward pass of its own
    (checkpoint recomputing its block) makes sums of nodes the page does not draw."""

    def __init__(self, index):
        self.index = index
        self.events = []  # (node, user node, the sum so far)

    def accumulate(self, node, user, total):
        if node in self.index:
            self.events.append((node, user, total))


def _module_types(params):
    if not hasattr(params, "named_modules"):
        return {}
    return {path: type(m).__name__ for path, m in params.named_modules() if path}


def _kind(node, tensor, root, names):
    """"root", "param" (named by `params`), "input" (another leaf) or "value"."""
    if node is root:
        return "root"
    if tensor is not None and id(tensor) in names:
        return "param"
    return "input" if node.op is None else "value"


def _op_info(node, index):
    """An op node's formula, forward, gradient names, parameters and inputs (by number)."""
    op = node.op
    inputs = [{"parent": None if p is None else index[p],
               "shape": None if shape is None else list(shape),  # None: an absent optional input
               "dtype": None if dtype is None else str(dtype)}
              for p, shape, dtype in zip(node.parents, node.shapes, node.dtypes, strict=True)]
    return {"formula": op.formula, "doc": op.doc, "fused": bool(op.fused),
            "grads": grad_names(op, len(node.parents)), "inputs": inputs,
            "params": {key: repr(v) for key, v in node.params.items()}}


def _name_of(node, tensor, names):
    """A parameter's name, the tensor's name, or the name its node kept (an intermediate
    named before it was freed: S, A, out); None if it has none."""
    name = (names.get(id(tensor)) or tensor.name) if tensor is not None else None
    return name or node.name


def _node_info(node, tensor, root, index, names, recording):
    """The page's record of one node: what it is, where it is drawn, its inputs and value."""
    name = _name_of(node, tensor, names)
    kind = _kind(node, tensor, root, names)
    info = {"k": index[node], "op": node.op.name if node.op else "leaf", "name": name,
            "scope": node.scope, "kind": kind,
            "place": name.rpartition(".")[0] if kind == "param" else node.scope}
    if node.op is not None:
        info.update(_op_info(node, index))
    if recording is not None:  # as recorded (viz.Recording.value_of), with a note if changed
        value, note = recording.value_of(node, tensor)
    elif tensor is not None and tensor._node is node:  # (a tensor changed in place: moved on)
        value, note = (tensor._data, tensor.backend), None
    else:
        value, note = None, None
    info["value"] = None if value is None else payload(_host(value))
    if note is not None:  # values changed in place since the forward pass
        info["value_note"] = note
    return info


def _steps(loss, index, sums):
    """Run the backward pass one VJP at a time: per step the node, g, each input's gradient,
    the explain line and the sums made; and each node's sum of the parts it got, before its
    hooks ran (host arrays)."""
    steps = []
    totals = {0: np.ones_like(_host((loss._data, loss.backend)))}  # the seed (a leaf root's all)
    with tracing(sums):
        for step in backward_steps(loss, retain_graph=True):
            k = index[step.node]
            g = _host((step.g, loss.backend))  # (after the node's hooks, as its VJP got it)
            grads = [None if gx is None else _host((gx, loss.backend)) for gx in step.grads]
            steps.append({"node": k, "g": payload(g), "explain": describe(step),
                          "grads": [None if gx is None else payload(gx) for gx in grads],
                          "sums": [{"node": index[n], "from": index[u], "shape": list(t.shape),
                                    "norm": _g3(norm(t)), "shown": grad_text(t)}
                                   for n, u, t in sums.events]})
            sums.events.clear()
            for parent, gx in zip(step.node.parents, grads, strict=True):
                if gx is not None:  # summed in the order backward sums them
                    p = index[parent]
                    totals[p] = gx if p not in totals else totals[p] + gx
    return steps, totals


@contextlib.contextmanager
def _hooks_for_walk(nodes, run):
    """Inside, the nodes' hooks (Tensor.register_hook) run as backward runs them, followed by
    one of ours that keeps the gradient they leave, or with run=False none runs (each node's
    are put aside, and back after). Yields {node: (number of the user's hooks, the gradient
    after them: a host array, filled in as the walk reaches the node)}."""
    hooked = {n: [len(n.hooks), None] for n in nodes if n.hooks}
    ours = object()  # (a key no RemovableHandle uses)
    held = {}
    try:
        for n in hooked:
            if run:
                n.hooks[ours] = functools.partial(_keep_after, hooked[n])
            else:
                held[n], n.hooks = n.hooks, None
        yield hooked
    finally:
        for n in hooked:
            if run:
                n.hooks.pop(ours, None)
            else:
                n.hooks = held.get(n, n.hooks)


def _keep_after(record, g):
    """Our last hook on a node: keep a copy of the gradient the user's hooks left (returning
    None, it changes nothing)."""
    record[1] = np.array(_host((g._data, g.backend)), copy=True)


def _graph_of(loss):
    """The nodes behind `loss` (root first), refusing a tensor without a graph or one that
    backward() already freed."""
    root = getattr(loss, "_node", None)
    if root is None:
        raise GraphError("explore: this tensor has no graph behind it (nothing it depends on "
                         "requires grad); create the inputs with requires_grad=True")
    nodes = toposort(root)
    freed = [n.op.name for n in nodes if n.op is not None and n.saved is None]
    if freed:
        raise GraphError(f"explore: backward() already freed the graph (at {freed[0]}); call "
                         "explore(loss) before loss.backward(), or pass retain_graph=True to it")
    return nodes


def _tensor_of(node):
    """The tensor whose .grad a node writes (a leaf, a retain_grad tensor), or None; None
    too for a node older than an in-place change of that tensor (its name and .grad are the
    newer node's: explain.live_tensor)."""
    return live_tensor(node)


@contextlib.contextmanager
def _grads_kept(tensors):
    """Inside, every tensor's .grad starts as None; after, each has its own .grad back."""
    held = [(t, t._grad) for t in tensors]  # (_grad: no warning for a tensor an op changed)
    for t, _ in held:
        t.grad = None
    try:
        yield
    finally:
        for t, grad in held:
            t.grad = grad


def walk(loss, params=None, recording=None, hooks=True):
    """Everything the page shows, as plain data: {"nodes": [...], "steps": [...]}. Nodes are
    numbered in `toposort` order (viz.to_dot's t<k>/o<k> boxes); steps follow the backward
    pass. Runs the backward pass with retain_graph=True and leaves every .grad as it was.
    hooks: run the tensors' hooks as backward does (their side effects too), so that each g
    and each leaf's total is what backward makes it; False runs none, and the numbers are
    those of a backward pass without them. Either way a node with hooks says how many, whether
    they ran, and the sum of its parts before them ("hooks")."""
    nodes = _graph_of(loss)
    root = nodes[0]
    index = {node: k for k, node in enumerate(nodes)}
    names = param_names(params, "explore")
    tensors = [loss if n is root else _tensor_of(n) for n in nodes]
    infos = [_node_info(n, t, root, index, names, recording)
             for n, t in zip(nodes, tensors, strict=True)]
    with _grads_kept([t for t in tensors if t is not None]), \
            _hooks_for_walk(nodes, hooks) as hooked:
        steps, totals = _steps(loss, index, _Sums(index))
    for k, info in enumerate(infos):
        before = payload(totals[k]) if k in totals else None  # the sum of the parts it got
        count, after = hooked.get(nodes[k], (0, None))
        info["hooks"] = {"count": count, "ran": bool(hooks), "before": before} if count else None
        if nodes[k].op is None:  # a leaf's whole gradient: its .grad, after its hooks
            info["total"] = payload(after) if after is not None else before
        else:
            info["total"] = None
    return {"nodes": infos, "steps": steps, "types": _module_types(params)}


# ---- the page ------------------------------------------------------------------------------------


def svg_of(dot_text, dot):
    """Graphviz's SVG for DOT text, without the XML prologue (it goes inline in HTML)."""
    done = subprocess.run([dot, "-Tsvg"], input=dot_text.encode("utf-8"), capture_output=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"explore: dot failed: {done.stderr.decode(errors='replace').strip()}")
    svg = done.stdout.decode("utf-8")
    return svg[svg.index("<svg"):]


def _json_for_script(data):
    """JSON that is safe inside <script>: no "</" can end the element early."""
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\!--")


def page(svg, data, title="tinyattn backward explorer"):
    """The whole page: the template with its style, script, SVG and data filled in."""
    parts = {"title": html.escape(title), "css": (ASSETS / "explore.css").read_text("utf-8"),
             "js": (ASSETS / "explore.js").read_text("utf-8"), "svg": svg,
             "data": _json_for_script(data)}
    template = (ASSETS / "explore.html").read_text("utf-8")
    return re.sub(r"\{\{(\w+)\}\}", lambda m: parts[m.group(1)], template)


class Explorer:
    """A built explorer page: `.html` (the text), `.path` (where it was written, or None),
    `.steps` (VJPs in the walk). Shows itself inline in Jupyter; `.save(path)` writes it."""

    def __init__(self, html_text, steps, path=None):
        self.html, self.steps, self.path = html_text, steps, path

    def save(self, path):
        """Write the page to `path` whole, or leave the file there as it was (an OSError
        naming `path`)."""
        path = Path(path)
        data = self.html.encode("utf-8")
        atomic_write(path, lambda f: f.write(data))
        self.path = path
        return path

    def _repr_html_(self):
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" title="tinyattn '
                'backward explorer" style="width: 100%; height: 680px; border: 1px solid #ccc" '
                'sandbox="allow-scripts"></iframe>')

    def __repr__(self):
        where = f", written to {self.path}" if self.path else ""
        return f"<Explorer: {self.steps} backward steps, {len(self.html) / 1e3:.0f} kB{where}>"


def build(loss, dot_text, dot, path=None, params=None, recording=None, collapse=(),
          hooks=True):
    """The explorer page for `loss` (see viz.explore), written to `path` when given."""
    data = walk(loss, params, recording, hooks)
    data["collapse"] = [collapse] if isinstance(collapse, str) else list(collapse)
    explorer = Explorer(page(svg_of(dot_text, dot), data), len(data["steps"]))
    if path is not None:
        explorer.save(path)
    return explorer


# ---- in a real browser (docs pictures, tests, the page's load time) ----------------------------


def chromium_path():
    """The Chromium (or Chrome) program to drive: $TINYATTN_CHROMIUM, else the first on PATH,
    else None."""
    found = os.environ.get("TINYATTN_CHROMIUM")
    if found:
        return found
    return next((p for p in map(shutil.which, CHROMIUMS) if p), None)


def _sync_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        raise RuntimeError("explore: driving a browser needs Playwright for Python "
                           "(pip install playwright; it is in the dev extra)") from e
    return sync_playwright()


@contextlib.contextmanager
def _chromium(browser=None):
    """A Playwright browser: `browser` itself when given, else headless Chromium launched for
    the block and closed after it."""
    if browser is not None:
        yield browser
        return
    exe = chromium_path()
    if exe is None:
        raise RuntimeError("explore: no Chromium found (install Debian's `chromium` package or "
                           "set TINYATTN_CHROMIUM to a Chrome/Chromium program)")
    with _sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=exe, headless=True)
        try:
            yield launched
        finally:
            launched.close()


def screenshot(html_path, png_path, steps=0, select=None, size=(1280, 800), browser=None):
    """A PNG of the page at `html_path` after `steps` steps of the walk, with node number
    `select` shown in the panel (default: the node of the last step taken). browser: a
    Playwright browser to use (default: launch headless Chromium)."""
    with _chromium(browser) as chromium:
        view = chromium.new_page(viewport={"width": size[0], "height": size[1]})
        view.goto(Path(html_path).resolve().as_uri())
        view.evaluate("([n, k]) => { window.tinyattn.goto(n);"
                      " if (k !== null) window.tinyattn.select(k); }", [steps, select])
        view.wait_for_timeout(400)  # the colours' 0.2 s transitions end
        png = view.screenshot()  # (into memory: the file is written whole or not at all)
        view.close()
    atomic_write(png_path, lambda f: f.write(png))
    return Path(png_path)


def load_ms(html_path, repeats=7, browser=None):
    """Chromium's load-event time for the page, in milliseconds: (median, every load)."""
    times = []
    with _chromium(browser) as chromium:
        view = chromium.new_page()
        for _ in range(repeats):
            view.goto(Path(html_path).resolve().as_uri(), wait_until="load")
            times.append(view.evaluate(
                "() => { const t = performance.getEntriesByType('navigation')[0];"
                " return t.loadEventEnd - t.startTime; }"))
        view.close()
    return statistics.median(times), times
