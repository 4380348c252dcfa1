"""The package's shape: layers that import one way and no import cycle.

Layers, lowest first (a module may import from its own layer or below, never above):
  base      errors, dtypes, return_types, display, files: no tinyattn imports of their own
  backends  the array libraries and kernels (they know nothing of tensors or graphs)
  graph     autograd: nodes, apply, backward, grad mode, tracing
  ops       every op's forward and VJP (they call autograd.apply)
  tensor    Tensor, whose methods call the ops
  library   functional, function (autograd.Function), nn, optim, distributed: what models are
            built from and trained with
  tools     anomaly, gradcheck, graphcheck, explain, viz, explore, plots, exercises: they look
            at graphs
  app       the command line and what only it needs: train, runs, sample, data, serialization...
The package's own __init__ gathers the public names from every layer.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "tinyattn"

LAYERS = {
    "base": ["errors", "dtypes", "return_types", "display", "files"],
    "backends": ["backends", "backends.*", "generator", "cuda"],
    "graph": ["autograd"],
    "ops": ["ops", "ops.*"],
    "tensor": ["tensor"],
    "library": ["functional", "functional_spatial", "functional_more",
                "routines", "routines_nn", "routines_more", "function", "replay",
                "routines_signal", "routines_misc", "routines_torch_more",
                "nn", "nn.*", "nn.parallel",
                "optim", "optim.*",
                "distributed", "utils", "utils.*", "autograd_functional", "autograd_graph",
                "distributions", "distributions.*", "linalg", "linalg_decompositions",
                "linalg_extras", "linalg_more", "routines_linalg", "func", "func_linearize",
                "tensor_methods_more",
                "runtime", "amp",
                "accelerator", "higher_order", "higher_order.*", "special"],
    "tools": ["anomaly", "gradcheck", "graphcheck", "explain", "viz", "explore", "plots",
              "exercises", "testing"],
    "app": ["cli", "__main__", "train", "runs", "sample", "data", "serialization", "graphs",
            "bench", "bench.*", "shakespeare", "tasks"],
}
ORDER = list(LAYERS)


def modules():
    """{dotted name below tinyattn: path} for every module of the package."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def layer_of(name):
    for layer, patterns in LAYERS.items():
        for pattern in patterns:
            if name == pattern or (pattern.endswith(".*") and name.startswith(pattern[:-1])):
                return layer
    return None


def imports_of(name, path, known):
    """The package modules `name` imports anywhere in its file (late imports included)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [p for p in package if p]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
            elif node.module and node.module.split(".")[0] == "tinyattn":
                base = []
                node = ast.ImportFrom(module=node.module.partition(".")[2] or None,
                                      names=node.names, level=1)
            else:
                continue
            target = ".".join(base + ([node.module] if node.module else []))
            subs = [f"{target}.{a.name}".lstrip(".") for a in node.names]
            subs = [s for s in subs if s in known]
            out.update(subs or [target])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "tinyattn":
                    out.add(a.name.partition(".")[2])
    out.discard(name)
    return {m for m in out if m in known}


_GRAPHS = {}  # PACKAGE -> its import graph: parsing every module takes seconds, do it once


def import_graph():
    if PACKAGE not in _GRAPHS:
        known = modules()
        _GRAPHS[PACKAGE] = {name: imports_of(name, path, known) for name, path in known.items()}
    return {name: set(targets) for name, targets in _GRAPHS[PACKAGE].items()}  # a fresh copy


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in modules() if m and layer_of(m) is None)
    assert not unplaced, f"put these modules in a layer of tests/core/test_layout.py: {unplaced}"


def test_layers_import_one_way():
    graph = import_graph()
    wrong = []
    for name, targets in graph.items():
        if not name:  # the package's __init__ gathers every layer
            continue
        for target in targets:
            if target and ORDER.index(layer_of(target)) > ORDER.index(layer_of(name)):
                wrong.append(f"{name} ({layer_of(name)}) imports {target} ({layer_of(target)})")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle():
    graph = import_graph()
    state = {}  # name -> "open" while on the path, "done" after

    def visit(name, path):
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                cycle = path[path.index(target):] + [target]
                pytest.fail("import cycle: " + " -> ".join(m or "tinyattn" for m in cycle))
            if target not in state:
                visit(target, path + [target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_the_checks_see_a_cycle_and_a_wrong_way_import(tmp_path, monkeypatch):
    """The checks above are not vacuous: a tool imported by the graph layer is caught."""
    fake = tmp_path / "tinyattn"
    (fake / "ops").mkdir(parents=True)
    (fake / "__init__.py").write_text("from . import autograd\n")
    (fake / "autograd.py").write_text("def f():\n    from .anomaly import x\n")  # late import
    (fake / "anomaly.py").write_text("from .autograd import f\n")
    (fake / "ops" / "__init__.py").write_text("from .op import Op\n")
    (fake / "ops" / "op.py").write_text("from . import REGISTRY\n")  # back into its package
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    graph = import_graph()
    assert graph["autograd"] == {"anomaly"} and graph["ops.op"] == {"ops"}
    with pytest.raises(AssertionError, match="autograd \\(graph\\) imports anomaly \\(tools\\)"):
        test_layers_import_one_way()
    with pytest.raises(pytest.fail.Exception, match="import cycle"):
        test_no_import_cycle()



MAX_COMPLEXITY = 15  # cyclomatic complexity (radon): above it a function gets named pieces
# The paths every op runs through, written out on purpose: on the overhead benchmark a
# helper call in them cost 1-2 % per op (measured; their docstrings say so). Each keeps to
# the ceiling given here, so neither grows unnoticed; their rare paths are helpers. (_walk: 22
# since autograd.grad, whose gradients go to a sink instead of .grad: one more condition; 23
# since Tensor.register_hook: one more for a node with hooks. apply: 25 since float16's forms,
# dtypes.promoted: float16 takes the rare branch for ops that promote nothing too, a condition
# that float32 and float64 never evaluate. apply_tensor: apply's path for one tensor and a
# number, 18 for its one- and two-input calls, each written out.)
HOT_PATHS = {("autograd.py", "apply"): 25, ("autograd.py", "apply_tensor"): 18,
             ("autograd.py", "_walk"): 23}


def too_tangled(package=None):
    """[(file, function, complexity)] for every function and method above MAX_COMPLEXITY
    (above its own ceiling for the HOT_PATHS)."""
    from radon.complexity import cc_visit

    found = set()
    for path in sorted((package or PACKAGE).rglob("*.py")):
        for block in cc_visit(path.read_text()):
            for item in [block, *getattr(block, "methods", [])]:  # a class: its methods too
                if item.complexity > HOT_PATHS.get((path.name, item.name), MAX_COMPLEXITY):
                    found.add((path.name, item.name, item.complexity))
    return sorted(found)


def test_no_function_is_too_tangled_to_follow():
    pytest.importorskip("radon")  # in the dev extra; CI fails on this skip (conftest.py)
    assert too_tangled() == [], "split these into named pieces"


def test_the_complexity_check_sees_a_tangled_function(tmp_path):
    pytest.importorskip("radon")
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(16))
    (tmp_path / "knot.py").write_text(f"def knot(x):\n{branches}    return -1\n")
    assert too_tangled(tmp_path) == [("knot.py", "knot", 17)]
    # a hot path is held to its own ceiling: an apply past it is reported
    (tmp_path / "autograd.py").write_text("def apply(x):\n" + branches * 2 + "    return -1\n")
    assert ("autograd.py", "apply", 33) in too_tangled(tmp_path)


def test_test_files_have_unique_names():
    """The test folders are not packages, so pytest imports each file by its bare name: two
    files called the same in different folders stop collection for the whole suite."""
    seen = {}
    for path in sorted((PACKAGE.parent / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(PACKAGE.parent)))
    assert not {name: where for name, where in seen.items() if len(where) > 1}
