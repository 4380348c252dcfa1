"""Graph pictures: the autograd graph behind a tensor as DOT text, a graphviz.Digraph, or a file.

`to_dot(loss)` walks the nodes behind `loss` iteratively (a 100k-node graph is fine) and writes
plain DOT text, no graphviz package needed: tensor boxes (name, shape, dtype, values, the
gradient: signed for one element, `grad -1.5`, else its norm), op ellipses (the VJP formula on
hover, fused ops double-ringed) and one cluster per module path, which `collapse` can fold
into a single box. Leaves, the root and retain_grad tensors always show their values;
interior values and gradients appear when the pass ran inside `with record():`, which keeps
each value as it was computed (a copy: a later in-place op does not change it).
`draw_graph` wraps the text in a graphviz.Digraph; `render` writes SVG/PNG/PDF with `dot`;
`explore` makes the interactive backward-pass page (tinyattn/explore.py).
"""

import fnmatch
import functools
import shutil
import subprocess
import weakref
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from . import display
from .autograd import Tracer, toposort, tracing, version_of
from .errors import GraphError, TinyattnError, fmt_shape
from .explain import live_tensor, named_params, norm, param_names
from .files import atomic_write
from .tensor import Tensor

FORMATS = ("svg", "png", "pdf")  # what `render` asks `dot` for; .dot/.gv files are the text

_STYLE = {  # fill colours: leaves green (weights) or orange (inputs), the root red
    "param": "#d4ecd4", "input": "#fde6c4", "value": "#eef2fa", "root": "#f7cfcf",
    "op": "#ffffff", "fused": "#fff1b0", "module": "#e3e3f3", "const": "#f4f4f4",
}


TENSOR_KINDS = ("param", "input", "value", "root")


class GraphvizNotFoundError(TinyattnError, RuntimeError):
    """Rendering a picture needs Graphviz's `dot` program, and it is not installed."""


# ---- recording the values an ordinary graph does not keep --------------------------------------


KEEP_COPY = 1 << 16  # record() copies arrays up to this many elements; bigger ones it watches

CHANGED = "changed in place later: not kept"  # what a value kept by reference became
NOW = "changed in place since the forward pass: its values now"  # a live tensor's, then


def _version(t):
    """How many in-place changes tensor `t` has seen (0 until its counter is made)."""
    v = t._version_counter
    return 0 if v is None else v[0]


def _kept(x):
    """What record() keeps of input or output `x`: (array, backend, None, version) for a
    copy, or (array, backend, version counter, version) for an array too big to copy, which
    is shown only while no in-place op has changed it (the array is shared with the graph:
    a snapshot taken when the counter moves would be too late, the values gone by then).
    A Python number is (x, None, None, 0); a NumPy array (a mask passed as it is) is copied
    when small, and kept as it is when big (it has no counter)."""
    if isinstance(x, Tensor):
        a = x._data
        if a.size <= KEEP_COPY:
            return a.copy(), x.backend, None, _version(x)
        v = version_of(x)
        return a, x.backend, v, v[0]
    if isinstance(x, np.ndarray) and x.size <= KEEP_COPY:
        return x.copy(), None, None, 0
    return x, None, None, 0


def _unkept(kept):
    """(value, backend) from what _kept kept, or CHANGED."""
    value, be, counter, seen = kept
    if counter is not None and counter[0] != seen:
        return CHANGED
    return value, be


class Recording(Tracer):
    """What ran inside `with record():` — each node's output value, its constant inputs, and
    (when backward ran inside too) the gradient that reached it, as the picture shows it (a
    one-element one's signed value, a bigger one's norm: grad_line). Values are kept
    as they were computed: copied, or for arrays above KEEP_COPY elements watched for
    in-place changes (`value` then says CHANGED)."""

    def __init__(self):
        self.values = weakref.WeakKeyDictionary()  # node -> _kept(output)
        self.constants = weakref.WeakKeyDictionary()  # node -> {input position: _kept(input)}
        self.grads = weakref.WeakKeyDictionary()  # node -> grad_line(d root / d output)

    def forward(self, op, inputs, params, out):
        node = out._node
        if node is None:
            return
        self.values[node] = _kept(out)
        for x in inputs:  # leaves too, so the picture has their values even once they are gone
            if isinstance(x, Tensor) and x._node is not None and x._node.op is None:
                kept = self.values.get(x._node)  # (a weight read by many ops: kept once, and
                if kept is None or kept[3] != _version(x):  # again after an optimizer step)
                    self.values[x._node] = _kept(x)
        pairs = enumerate(zip(inputs, node.parents, strict=True))
        consts = {i: _kept(x) for i, (x, parent) in pairs if parent is None}
        if consts:
            self.constants[node] = consts

    def backward(self, node, g, grads):
        self.grads[node] = grad_line(g)

    def value(self, node):
        """(array, backend) of node's output as it was computed, None if not recorded, or
        CHANGED (an array too big to copy, changed in place since)."""
        kept = self.values.get(node)
        return None if kept is None else _unkept(kept)

    def constant_inputs(self, node):
        """{input position: (value, backend) or CHANGED} of node's inputs off the graph."""
        return {i: _unkept(kept) for i, kept in self.constants.get(node, {}).items()}

    def value_of(self, node, tensor):
        """(value, note) for a node's box (to_dot's, the explorer's panel): its output as
        recorded, ((array, backend), None); else the live `tensor`'s values (None: none is
        alive) while that tensor is still this node's output (one changed by an in-place op
        has moved on to a newer node), noted NOW when the recording saw them change since;
        else (None, CHANGED) when they changed and no tensor shows them, (None, None) when
        nothing is known of them."""
        kept = self.value(node)
        if kept is not None and kept is not CHANGED:
            return kept, None
        if tensor is not None and tensor._node is node:
            return (tensor._data, tensor.backend), (NOW if kept is CHANGED else None)
        return None, kept


def grad_line(a):
    """A gradient's line in a tensor box: a one-element one's signed value, as micrograd's
    draw_dot shows it (`grad -1.5`), a bigger one's norm (`‖grad‖ 3.46`)."""
    if a.size == 1:
        return f"grad {_g(a.item())}"
    return f"‖grad‖ {_g(norm(a))}"


def record():
    """`with record() as rec:` run forward (and backward); then `to_dot(loss, recording=rec)`
    shows every interior value and gradient. Outside such a block nothing is recorded."""
    return tracing(Recording())


# ---- small helpers -------------------------------------------------------------------------------


def _host(value):
    """(array, backend) -> a NumPy array; a Python number stays a number."""
    array, be = value
    return array if be is None else np.asarray(be.to_numpy(array))


@functools.cache
def _dtype_name(dtype):
    return str(dtype)


def _g(x):
    return f"{x:.3g}"


def summarize(a):
    """A short description of an array's values: the values when tiny, else statistics."""
    a = np.asarray(a)
    if a.size == 0:
        return "empty"
    if a.dtype == np.bool_:
        return f"{int(a.sum())} of {a.size} True"
    if a.size == 1:
        return _g(a.item()) if a.dtype.kind == "f" else str(a.item())
    if a.size <= 4:
        text = np.array2string(a, precision=4, separator=", ", suppress_small=True)
        return " ".join(text.split())
    if a.dtype.kind in "iu":
        return f"min {a.min()} max {a.max()}"
    a64 = a.astype(np.float64)
    finite = np.isfinite(a64)
    kept = a64[finite]
    if kept.size == 0:
        return f"all {a.size} non-finite"
    text = (f"mean {_g(kept.mean())} std {_g(kept.std())}\n"
            f"min {_g(kept.min())} max {_g(kept.max())}")
    if kept.size < a.size:
        text += f"\n{a.size - kept.size} non-finite (e.g. -inf: masked)"
    return text


def _module_types(params):
    """module path -> class name, when a Module was passed (cluster labels use it)."""
    if not hasattr(params, "named_modules"):
        return {}
    return {path: type(m).__name__ for path, m in params.named_modules() if path}


def _short_params(params):
    """An op's keyword parameters as one short line ("dim=-1, causal=True"), long ones left out."""
    shown = []
    for key, value in params.items():
        if value is False or value is None:
            continue  # an option left off
        if isinstance(value, (bool, int, float, str, tuple)):
            text = f"{key}={_g(value)}" if isinstance(value, float) else f"{key}={value!r}"
            if len(text) <= 28:
                shown.append(text)
    return ", ".join(shown)


def saved_arrays(root):
    """(op name, scope, [array shapes], bytes) for every node behind `root` whose VJP saved
    arrays: what the backward pass holds on to (freed nodes give nothing). An array saved by
    several nodes, or a view of one already counted, adds its bytes only once, so the bytes
    add up to the memory really held."""
    rows, counted = [], set()
    for node in toposort(_root_node(root, "saved_arrays")):
        if node.op is None or not node.saved:
            continue
        arrays = [s for s in node.saved if hasattr(s, "nbytes") and hasattr(s, "shape")]
        if not arrays:
            continue
        nbytes = 0
        for a in arrays:
            while getattr(a, "base", None) is not None:  # a view: count the array it shows
                a = a.base
            if id(a) not in counted:
                counted.add(id(a))
                nbytes += int(a.nbytes)
        rows.append((node.op.name, node.scope, [tuple(s.shape) for s in arrays], nbytes))
    return rows


def _root_node(root, who):
    if not isinstance(root, Tensor):
        raise TypeError(f"{who}: expected a tensor (or a tuple or list of tensors), got "
                        f"{type(root).__name__}")
    node = root._node
    if node is None:
        raise GraphError(f"{who}: this tensor has no graph behind it (nothing it depends on "
                         "requires grad); create the inputs with requires_grad=True, outside "
                         "no_grad()")
    return node


def _q(text):
    """A DOT double-quoted string ("\\n" in `text` becomes a line break). Characters DOT or
    UTF-8 cannot carry (NUL and other control characters, lone surrogates) are shown as
    their escape, e.g. \\x00, so that any name draws."""
    if not text.isprintable():  # (most names are: one quick check)
        text = "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in text)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(attrs):
    return ", ".join(f"{k}={_q(str(v))}" for k, v in attrs.items())


# ---- the picture: items (tensor, op, constant boxes), edges, clusters -------------------------


class _Item:
    """One box of the picture before collapsing: its kind ("param", "input", "value", "root",
    "op" or "const"), module path, DOT attributes, and for an op box the op."""

    __slots__ = ("kind", "scope", "attrs", "op")

    def __init__(self, kind, scope, attrs, op=None):
        self.kind, self.scope, self.attrs, self.op = kind, scope, attrs, op


class _Graph:
    """Everything `to_dot` draws, built from one iterative walk over the nodes."""

    def __init__(self, root, params, recording, show_values, show_grads, show_saved):
        # root: a tensor, or several (a tuple or a list, as torchviz's make_dot takes), each
        # drawn as a root: {node: its tensor}
        roots = root if isinstance(root, (tuple, list)) else (root,)
        if not roots:
            raise ValueError("to_dot: no tensor to draw (an empty tuple or list)")
        self.roots = {_root_node(t, "to_dot"): t for t in roots}
        self.names = param_names(params, "to_dot")
        self.types = _module_types(params)
        self.rec = recording if recording is not None else Recording()
        self.show_values, self.show_grads, self.show_saved = show_values, show_grads, show_saved
        self.nodes = toposort(*self.roots)  # users before the nodes they use
        self.index = {node: k for k, node in enumerate(self.nodes)}
        self.users = defaultdict(list)  # node -> op nodes that take its output as an input
        for node in self.nodes:
            for parent in node.parents:
                if parent is not None:
                    self.users[parent].append(node)
        self.items = {}  # DOT id -> _Item: "t<k>" tensor, "o<k>" op, "c<k>_<i>" constant
        self.edges = []  # (from id, to id), in the forward direction
        for node in self.nodes:
            self._add_node(node)

    # -- items --

    def _tensor(self, node):
        """The Tensor object behind a node, when one is still around (leaf, root, retained)
        and still this node's (explain.live_tensor: one changed in place since has moved on,
        and its name and .grad are the newer node's)."""
        if node in self.roots:
            return self.roots[node]
        return live_tensor(node)

    def _name(self, node, t):
        """A parameter's path, the tensor's name, or the name an intermediate was given while
        it was alive (kept on its node); None when it has none."""
        return (self.names.get(id(t)) or t.name if t is not None else None) or node.name

    def _add_node(self, node):
        k = self.index[node]
        t = self._tensor(node)
        name = self._name(node, t)
        kind, scope = self._kind(node, t, name)
        # a live tensor's own (a leaf's array may have been replaced since: Module.half()),
        # else the node's record of its output
        shape, dtype = (t.shape, t.dtype) if t is not None else (node.shape, node.dtype)
        lines = [name or ("leaf" if node.op is None else ""),
                 f"{fmt_shape(shape)} {_dtype_name(dtype)}", *self._value_lines(node, t)]
        label = "\n".join(line for line in lines if line)
        tid = f"t{k}"
        self.items[tid] = _Item(kind, scope, {"label": label, "fillcolor": _STYLE[kind]})
        if node.op is not None:
            self._add_op(node, k, tid)

    def _kind(self, node, t, name):
        """(kind, module path) of a tensor box: the root, a parameter (in its module), another
        leaf (an input), or a value an op made (in the op's module)."""
        if node.op is not None:
            kind, scope = "value", node.scope
        elif name and id(t) in self.names:
            kind, scope = "param", name.rpartition(".")[0]
        else:
            kind, scope = "input", None
        return ("root" if node in self.roots else kind), scope

    def _value_lines(self, node, t):
        """The value summary and the gradient (grad_line), as far as they are shown and known."""
        lines = []
        if self.show_values:
            value, note = self.rec.value_of(node, t)
            if value is not None:
                lines.append(summarize(_host(value)))
            if note is not None:
                lines.append(note)
        if self.show_grads:
            grad = t._grad if t is not None else None  # (_grad: no non-leaf warning)
            line = grad_line(grad._data) if grad is not None else self.rec.grads.get(node)
            if line is not None:
                lines.append(line)
        return lines

    def _add_op(self, node, k, tid):
        op = node.op
        lines = [op.name + (" (fused)" if op.fused else ""), _short_params(node.params)]
        if self.show_saved:
            lines.append(self._saved_line(node))
        tooltip = f"{op.name}: {op.formula}"
        if op.doc:
            tooltip += f"\nforward: {op.doc}"
        if node.scope:
            tooltip += f"\nmodule: {node.scope}"
        attrs = {"label": "\n".join(line for line in lines if line), "tooltip": tooltip,
                 "shape": "ellipse", "style": "filled",
                 "fillcolor": _STYLE["fused" if op.fused else "op"]}
        if op.fused:
            attrs["peripheries"] = 2
        oid = f"o{k}"
        self.items[oid] = _Item("op", node.scope, attrs, op)
        self.edges.append((oid, tid))
        consts = self.rec.constant_inputs(node)
        shapes, dtypes = node.shapes, node.dtypes  # (computed: once a node, not once an input)
        for i, parent in enumerate(node.parents):
            if parent is not None:
                self.edges.append((f"t{self.index[parent]}", oid))
            elif not _absent(shapes[i], consts.get(i)):  # (no mask given: nothing to draw)
                self._add_const(node, k, i, consts.get(i), oid, shapes[i], dtypes[i])

    def _add_const(self, node, k, i, value, oid, shape, dtype):
        """A dashed box for input i of an op that is no tensor on the graph: a number, or an
        array (a mask, class indices) with its shape and, when recorded, its values."""
        if value is not None and value is not CHANGED and value[1] is None:
            label = repr(value[0])
        else:
            label = "const"
            if dtype is not None:  # an array (else a number, or None)
                label += f" {fmt_shape(shape)} {dtype}"
            if value is not None and self.show_values:
                label += "\n" + (CHANGED if value is CHANGED else summarize(_host(value)))
        cid = f"c{k}_{i}"
        self.items[cid] = _Item("const", node.scope, {"label": label, "style": "filled,dashed",
                                                  "fontsize": 9, "fillcolor": _STYLE["const"]})
        self.edges.append((cid, oid))

    def _saved_line(self, node):
        if node.saved is None:
            return "saved: freed by backward"
        parts = [fmt_shape(s.shape) for s in node.saved if hasattr(s, "shape")
                 and hasattr(s, "nbytes")]
        return "saved: " + (", ".join(parts) if parts else "no arrays")


def _absent(shape, value):
    """Whether an input was None (an optional input left out, as a missing mask): its recorded
    shape is None, or the recorded value is."""
    return shape is None or (value is not None and value is not CHANGED and value[0] is None)


# ---- collapsing modules into one box -------------------------------------------------------------


def _prefixes(path):
    parts = path.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts) + 1)]


def _group_fn(patterns):
    """scope -> the outermost module path at or above it that a pattern matches, or None."""
    patterns = (patterns,) if isinstance(patterns, str) else tuple(patterns)
    cache = {}

    def group(scope):
        if not scope or not patterns:
            return None
        if scope not in cache:
            cache[scope] = next((p for p in _prefixes(scope)
                                 if any(fnmatch.fnmatchcase(p, pat) for pat in patterns)), None)
        return cache[scope]

    return group


def _layout(graph, collapse):
    """Which boxes show and where: (the box each item is drawn as, the cluster path of each
    visible item, collapsed module path -> the items folded into it, the edges between boxes)."""
    if not collapse:  # every item is its own box, in its own module's cluster
        return ({iid: iid for iid in graph.items},
                {iid: item.scope for iid, item in graph.items.items()}, {}, graph.edges)
    group = _group_fn(collapse)
    item_group = {iid: group(item.scope) for iid, item in graph.items.items()}
    edges = graph.edges
    consumers = defaultdict(set)  # tensor id -> groups of the ops that read it
    for a, b in edges:
        if graph.items[a].kind in TENSOR_KINDS:
            consumers[a].add(item_group[b])
    root_id = "t0"  # the root is the first node of the walk

    def visible(iid):
        g = item_group[iid]
        if g is None:
            return True  # not inside a collapsed module
        if graph.items[iid].kind in TENSOR_KINDS:  # leaving its module (or the root): shown
            return iid == root_id or any(c != g for c in consumers[iid])
        return False

    rep, placed, modules = {}, {}, {}
    for iid, item in graph.items.items():
        g = item_group[iid]
        if visible(iid):
            rep[iid] = iid
            placed[iid] = item.scope if g is None else g.rpartition(".")[0]
        else:
            rep[iid] = "m:" + g
            modules.setdefault(g, []).append(iid)
    return rep, placed, modules, _shown_edges(edges, rep, item_group, graph.items)


def _shown_edges(edges, rep, item_group, items):
    """The edges between the boxes drawn: none inside a collapsed module, one arrow per pair of
    boxes into or out of one, and every arrow between boxes drawn as they are (x * x: two)."""
    shown, seen = [], set()
    for a, b in edges:
        ra, rb = rep[a], rep[b]
        if ra == rb:
            continue  # both ends inside one collapsed module
        if (ra == a and item_group[a] is not None and rb == "m:" + item_group[a]
                and items[a].kind in ("value", "root")):
            # a module's own output flowing back into it: an arrow both ways reads worse (its
            # parameters are no output: one read outside too, tied, still points into it)
            continue
        if ra == a and rb == b:
            shown.append((a, b))
        elif (ra, rb) not in seen:
            seen.add((ra, rb))
            shown.append((ra, rb))
    return shown


def _module_box(graph, path, members):
    """The attributes of one collapsed module's box: its path, class, op and parameter counts."""
    ops = Counter()
    fused = n_params = 0
    for iid in members:
        item = graph.items[iid]
        if item.kind == "op":
            ops[item.op.name] += 1
            fused += item.op.fused
        n_params += item.kind == "param"
    lines = [path]
    if path in graph.types:
        lines.append(graph.types[path])
    n_ops = sum(ops.values())
    lines.append(f"{n_ops} op{'s' * (n_ops != 1)}" + (f", {fused} fused" if fused else ""))
    if n_params:
        lines.append(f"{n_params} parameter{'s' * (n_params != 1)}")
    tooltip = f"{path} (collapsed): " + ", ".join(f"{name} ×{n}" for name, n in ops.items())
    return {"label": "\n".join(lines), "tooltip": tooltip, "shape": "box3d",
            "style": "filled", "fillcolor": _STYLE["module"]}


# ---- DOT text ------------------------------------------------------------------------------------

GRAPH_ATTR = {"rankdir": "TB", "fontname": "Helvetica", "fontsize": "11", "nodesep": "0.25",
              "ranksep": "0.3"}
NODE_ATTR = {"fontname": "Helvetica", "fontsize": "10", "margin": "0.08,0.04", "height": "0.3",
             "shape": "box", "style": "rounded,filled"}  # a tensor box unless it says otherwise


def _build(root, show_values=True, show_grads=True, show_saved=False, collapse=(),
           direction="forward", params=None, recording=None):
    """(graph attributes, node attributes, edge attributes, body lines) of the picture."""
    if direction not in ("forward", "backward"):
        raise ValueError(f"to_dot: direction must be 'forward' or 'backward', got {direction!r}")
    graph = _Graph(root, params, recording, show_values, show_grads, show_saved)
    rep, placed, modules, edges = _layout(graph, collapse)
    members = defaultdict(list)  # cluster path -> body lines of the boxes directly inside
    for iid, path in placed.items():
        members[path or ""].append(f"{iid} [{_attrs(graph.items[iid].attrs)}]")
    for path, ids in modules.items():
        members[path.rpartition(".")[0]].append(f"{_q('m:' + path)} "
                                                 f"[{_attrs(_module_box(graph, path, ids))}]")
    body = _clusters(members, graph.types)
    edge_attr = {"arrowsize": "0.6", "color": "#555555"}
    backward = direction == "backward"
    if backward:  # gradients flow from the root back to the leaves
        edge_attr = {"arrowsize": "0.6", "color": "#b03a2e", "penwidth": "1.2"}
    for a, b in edges:
        a = a if not a.startswith("m:") else _q(a)
        b = b if not b.startswith("m:") else _q(b)
        if not backward:
            body.append(f"\t{a} -> {b}\n")
        elif a in graph.items and graph.items[a].kind == "const":  # no gradient goes there
            body.append(f'\t{a} -> {b} [dir="none", style="dashed", color="#999999"]\n')
        else:
            body.append(f"\t{b} -> {a}\n")
    graph_attr = dict(GRAPH_ATTR, tooltip=f"{direction} graph: {len(graph.nodes)} nodes")
    return graph_attr, dict(NODE_ATTR), edge_attr, body


def _clusters(members, types):
    """Body lines: boxes at the top level, and one nested `subgraph cluster_<path>` per module
    path (modules nest only a few levels deep, so this small recursion is safe)."""
    children = defaultdict(set)
    for path in list(members):
        for prefix in _prefixes(path) if path else []:
            parent = prefix.rpartition(".")[0]
            children[parent].add(prefix)
    lines = []

    def emit(path, depth):
        pad = "\t" * depth
        if path:
            label = path + (f" ({types[path]})" if path in types else "")
            lines.append(f"{pad}subgraph {_q('cluster_' + path)} {{\n")
            lines.append(f"{pad}\tlabel={_q(label)} labeljust=l style=\"rounded,dashed\" "
                         f"color=\"#8888aa\" fontsize=10\n")
        for line in members.get(path, ()):
            lines.append(f"{pad}\t{line}\n" if path else f"\t{line}\n")
        for child in sorted(children[path]):
            emit(child, depth + 1)
        if path:
            lines.append(f"{pad}}}\n")

    emit("", 0)
    return lines


def to_dot(root, show_values=True, show_grads=True, show_saved=False, collapse=(),
           direction="forward", params=None, recording=None):
    """The graph behind tensor `root` as Graphviz DOT text (no graphviz package needed);
    several roots (a tuple or a list of tensors, as torchviz's make_dot takes: a loss and an
    intermediate) are drawn in one picture, the part they share once.

    show_values / show_grads: value summaries and gradients on tensor boxes (a one-element
    gradient signed, `grad -1.5`, a bigger one's norm, `‖grad‖ 3.46`). show_saved:
    what each op saved for its VJP. collapse: module paths or fnmatch patterns ("blocks.*.attn")
    whose ops fold into one box. direction: "forward" (data flow) or "backward" (gradient
    flow, edges reversed). params: a Module, a {name: tensor} dict or (name, tensor) pairs
    (module.named_parameters()) that name the parameters; anything else is a TypeError.
    recording: from `with record() as rec:`, for interior values (as they were computed)
    and gradients.
    """
    graph_attr, node_attr, edge_attr, body = _build(root, show_values, show_grads, show_saved,
                                                    collapse, direction, params, recording)
    head = [f"\tgraph [{_attrs(graph_attr)}]\n", f"\tnode [{_attrs(node_attr)}]\n",
            f"\tedge [{_attrs(edge_attr)}]\n"]
    return "digraph tinyattn {\n" + "".join(head + body) + "}\n"


def draw_graph(root, **kwargs):
    """The same picture as `to_dot` as a graphviz.Digraph (shows itself in a notebook)."""
    import graphviz

    graph_attr, node_attr, edge_attr, body = _build(root, **kwargs)
    return graphviz.Digraph("tinyattn", graph_attr=graph_attr, node_attr=node_attr,
                            edge_attr=edge_attr, body=body)


draw_dot = draw_graph  # micrograd's name


def show(root, **kwargs):
    """The same picture as an object a notebook shows inline (SVG through `dot`, or the DOT
    text without Graphviz); no graphviz package needed. Keyword arguments are `to_dot`'s."""
    text = to_dot(root, **kwargs)
    shapes = ", ".join(fmt_shape(t.shape) for t in root) if isinstance(root, (tuple, list)) \
        else fmt_shape(root.shape)
    return display.Graph(text, shutil.which("dot"), summary=f"tinyattn graph of {shapes}")


def dot_program():
    """The path of Graphviz's `dot`, or an error that says how to install it."""
    found = shutil.which("dot")
    if found is None:
        raise GraphvizNotFoundError(
            "rendering a graph needs Graphviz's `dot` program, which is not on PATH. Install "
            "it: `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS), "
            "`conda install graphviz`, or from https://graphviz.org/download/. Without it, "
            "viz.to_dot() still gives the DOT text (write it to a .dot file).")
    return found


def render(root, path, **kwargs):
    """Write the picture to `path`: .svg, .png or .pdf through `dot`, or .dot/.gv as text.
    Keyword arguments are those of `to_dot`. Returns the path."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("dot", "gv", *FORMATS):
        raise ValueError(f"render: cannot tell the format from {path.name!r}; use a name "
                         f"ending in .svg, .png, .pdf, .dot or .gv")
    data = to_dot(root, **kwargs).encode("utf-8")
    if fmt not in ("dot", "gv"):  # dot draws it into memory: the file is written whole or not
        done = subprocess.run([dot_program(), f"-T{fmt}"], input=data, capture_output=True,
                              check=False)
        if done.returncode != 0 or not done.stdout:
            raise RuntimeError(f"render: dot failed on {path.name}: "
                               f"{done.stderr.decode(errors='replace').strip()}")
        data = done.stdout
    atomic_write(path, lambda f: f.write(data))  # (a failure leaves the old file as it was)
    return path


def explore(loss, path=None, params=None, recording=None, collapse=(), hooks=True):
    """An interactive backward-pass explorer: one self-contained HTML page (no network, works
    from file://) with the graph laid out by `dot`, a panel per node (formula, values,
    gradients) and controls to step the backward pass, play it, undo and jump. Written to
    `path` when given, whole or not at all (a failed write leaves the old file and names
    `path`); the returned object shows itself inline in Jupyter. params, recording: as for
    `to_dot`; collapse: module patterns folded when the page opens (fnmatch, as to_dot; click
    to open). The walk runs the backward pass once more, with retain_graph=True, and leaves
    every .grad as it was.

    hooks: the tensors' hooks (Tensor.register_hook, a module's backward hooks) change the
    gradients backward computes, and only running them tells by how much. With hooks=True
    (the default) the walk runs each of them once, as backward would, side effects included
    (a hook that counts or logs its calls sees one more), so that the page shows each g and
    each leaf's .grad as backward makes them, and beside them the sum of the parts before the
    hooks. hooks=False runs none of the user's code: the page then shows a backward pass
    without hooks, and every node with hooks says that its hooks did not run and that its
    numbers are those before them."""
    from . import explore as explorer

    params = named_params(params, "explore")  # (pairs, a generator, read once for both)
    text = to_dot(loss, show_values=False, show_grads=False, direction="backward",
                  params=params, recording=recording)
    return explorer.build(loss, text, dot_program(), path=path, params=params,
                          recording=recording, collapse=collapse, hooks=hooks)
