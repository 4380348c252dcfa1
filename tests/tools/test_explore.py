"""The backward-pass explorer page without a browser: one self-contained file, its data (every
node, every step, the numbers explain mode prints), .grad left alone, value payloads, the
Jupyter display and `tinyattn graph --html`. tests/tools/test_explore_browser.py clicks through
it."""

import html
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from explore_cases import explained, three_ops

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn import explore, graphs, viz
from tinyattn.autograd import toposort
from tinyattn.cli import main
from tinyattn.errors import GraphError

pytestmark = pytest.mark.skipif(shutil.which("dot") is None,
                                reason="Graphviz's dot program is not installed")


def data_of(page_html):
    """The JSON the page carries."""
    m = re.search(r'<script type="application/json" id="tinyattn-data">(.*?)</script>',
                  page_html, re.S)
    return json.loads(m.group(1))


def test_the_page_is_one_self_contained_file(tmp_path):
    loss, _, rec = three_ops()
    page = viz.explore(loss, tmp_path / "p.html", recording=rec)
    text = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert text == page.html and page.path == tmp_path / "p.html"
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text and "{{" not in text
    assert "window.tinyattn" in text and "#panel" in text  # the script and the style, inline
    # nothing to fetch: no script/link/img sources, no CDN, no url() in the style
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", text)
    assert not re.search(r"url\(|@import|https?://(?!www\.w3\.org/)", text)


def test_page_data_has_every_node_and_every_step_in_order():
    loss, x, rec = three_ops()
    data = explore.walk(loss, recording=rec)
    nodes = toposort(loss._node)
    assert [n["op"] for n in data["nodes"]] == [n.op.name if n.op else "leaf" for n in nodes]
    assert [data["nodes"][s["node"]]["op"] for s in data["steps"]] == ["sum", "mul", "tanh"]
    leaf = next(n for n in data["nodes"] if n["op"] == "leaf")
    assert leaf["name"] == "x" and leaf["kind"] == "input"
    assert leaf["value"]["text"] == "[ 0.5, -1. ,  2. ]"
    mul = data["nodes"][data["steps"][1]["node"]]
    assert mul["grads"] == ["gx", "gy"] and [i["parent"] for i in mul["inputs"]] == \
        [next(n["k"] for n in data["nodes"] if n["op"] == "tanh"), leaf["k"]]
    # x's gradient: tanh's part + mul's part, summed in that order, as backward writes .grad
    loss.backward(retain_graph=True)
    assert leaf["total"]["text"] == np.array2string(x.grad.numpy(), precision=4,
                                                    separator=", ", suppress_small=True)


def test_page_numbers_are_explain_modes_numbers():
    """Formula, g norm and each gradient norm of every step, and the "+=" sums, as explain
    mode prints them for the same graph (an explain run of its own)."""
    small, _, small_rec = three_ops()
    for loss, params, rec in ((small, None, small_rec), graphs.example("attention")):
        data = explore.walk(loss, params, rec)
        vjps, sums = explained(loss)
        assert len(data["steps"]) == len(vjps)
        for step, (op, formula, g, grads) in zip(data["steps"], vjps, strict=True):
            node = data["nodes"][step["node"]]
            # (what an edge shows: a norm, or a one-element gradient's signed value)
            assert (node["op"], node["formula"], step["g"]["shown"].strip("‖")) == (op, formula, g)
            assert [gr["shown"].strip("‖") for gr in step["grads"] if gr is not None] == grads
            assert re.match(rf"\[{data['steps'].index(step)}\] {op}( -> [^:]+)?: ", step["explain"])
        assert [e["shown"].removeprefix("= ").strip("‖") for s in data["steps"]
                for e in s["sums"]] == sums


def test_three_ops_sums_x_from_two_users():
    loss, _, rec = three_ops()
    data = explore.walk(loss, recording=rec)
    (event,) = [e for s in data["steps"] for e in s["sums"]]
    assert data["nodes"][event["node"]]["name"] == "x"
    assert data["nodes"][event["from"]]["op"] == "tanh"  # the second part comes from tanh


def test_explore_leaves_every_grad_as_it_was_and_keeps_the_graph():
    loss, x, rec = three_ops()
    viz.explore(loss, recording=rec)
    assert x.grad is None
    x.grad = held = ta.tensor(np.array([1.0, 2.0, 3.0]))
    viz.explore(loss, recording=rec)
    assert x.grad is held and held.numpy().tolist() == [1.0, 2.0, 3.0]
    loss.backward()  # the graph is still there
    assert np.allclose(x.grad.numpy() - [1.0, 2.0, 3.0],
                       np.tanh(x.numpy()) + x.numpy() * (1 - np.tanh(x.numpy()) ** 2))


def test_explore_refuses_a_freed_graph_and_a_tensor_without_one():
    loss, _, rec = three_ops()
    loss.backward()
    with pytest.raises(GraphError, match=r"explore: backward\(\) already freed the graph"):
        viz.explore(loss, recording=rec)
    with pytest.raises(GraphError, match="explore: this tensor has no graph"):
        explore.walk(ta.tensor([1.0]))


def test_named_intermediates_keep_their_names():
    x = ta.tensor(np.array([0.5, -1.0]), requires_grad=True)
    h = x.tanh()
    h.name = "h"
    loss = (h * 2).sum()
    del h  # the tensor is gone; its node keeps the name
    assert [n["name"] for n in explore.walk(loss)["nodes"]] == [None, None, "h", None]


def test_a_leaf_alone_is_a_walk_of_no_steps():
    x = ta.tensor(np.array([0.5]), requires_grad=True)
    data = explore.walk(x, params={"x": x})
    assert data["steps"] == [] and data["nodes"][0]["kind"] == "root"
    assert data["nodes"][0]["total"]["text"] == "[1.]" and x.grad is None


def test_without_a_recording_interior_values_are_absent_not_wrong():
    loss, x, _ = three_ops()
    data = explore.walk(loss)
    by_op = {n["op"]: n for n in data["nodes"]}
    assert by_op["leaf"]["value"] is not None and by_op["sum"]["value"] is not None  # x, loss
    assert by_op["tanh"]["value"] is None and by_op["mul"]["value"] is None


def test_payload_small_large_signed_cropped_and_not_finite():
    small = explore.payload(np.array([[1.0, -2.0]], dtype=np.float32))
    assert small == {"shape": [1, 2], "dtype": "float32", "norm": "2.24", "shown": "‖2.24‖",
                     "text": "[[ 1., -2.]]"}
    one = explore.payload(np.array([-0.5]))  # one element: an edge shows it with its sign
    assert (one["norm"], one["shown"]) == ("0.5", "-0.5")
    a = np.arange(2 * 40 * 70, dtype=np.float64).reshape(2, 40, 70) - 1000.0
    a[0, 0, 1] = -np.inf
    big = explore.payload(a)
    heat = big["heat"]
    assert (heat["rows"], heat["cols"], heat["of"], heat["slice"]) == (32, 64, [40, 70],
                                                                        "[0, :, :]")
    # the cropped slice runs from -1000 to 31 * 70 + 63 - 1000 = 1233: a scale of ±1233
    assert heat["signed"] and heat["lo"] == -heat["hi"] == -1233.0
    cells = np.frombuffer(__import__("base64").b64decode(heat["cells"]), np.uint8)
    assert cells.size == 32 * 64 and cells[1] == 255  # -inf
    assert cells[0] == round(233 / 2466 * 254) and cells[64 * 14 + 20] == 127  # -1000 and 0
    assert big["stats"]["nonfinite"] == 1 and "text" not in big
    ones = explore.payload(np.ones(30))
    assert not ones["heat"]["signed"] and ones["heat"]["rows"] == 1
    assert explore.payload(np.zeros(20, dtype=bool))["stats"] == {"true": 0}


def test_names_cannot_end_the_script_early():
    loss, x, rec = three_ops()
    x.name = "</script><b>x</b>"
    page = viz.explore(loss, recording=rec)
    assert data_of(page.html)["nodes"][-1]["name"] == "</script><b>x</b>"


def test_jupyter_shows_the_page_in_an_iframe():
    loss, _, rec = three_ops()
    page = viz.explore(loss, recording=rec, collapse="blocks.*")
    shown = page._repr_html_()
    m = re.fullmatch(r'<iframe srcdoc="([^"]*)".*</iframe>', shown, re.S)
    assert m and html.unescape(m.group(1)) == page.html
    assert data_of(page.html)["collapse"] == ["blocks.*"]
    assert "3 backward steps" in repr(page) and page.steps == 3


def test_the_tiny_model_page_is_under_2_mb_with_every_node():
    loss, params, rec = graphs.example("tiny")
    page = viz.explore(loss, params=params, recording=rec)
    data = data_of(page.html)
    assert len(page.html.encode("utf-8")) < 2_000_000
    assert len(data["nodes"]) == len(toposort(loss._node)) and page.steps == len(data["steps"])
    assert data["types"]["blocks.0.attn"] == "CausalSelfAttention"
    for k in range(len(data["nodes"])):  # every node has its box in the SVG
        assert f"<title>t{k}</title>" in page.html


def test_graph_html_writes_the_page(tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["graph", "--model", "mlp", "--html", str(out)]) == 0
    assert "step through the mlp backward pass" in capsys.readouterr().out
    data = data_of(out.read_text(encoding="utf-8"))
    assert data["nodes"][0]["op"] == "cross_entropy" and data["steps"]


def test_attention_example_names_q_k_v():
    q = ta.randn(1, 3, 4, requires_grad=True)
    loss = F.softmax(q, dim=-1).sum()
    data = explore.walk(loss, params={"q": q})
    assert [n["kind"] for n in data["nodes"]] == ["root", "value", "param"]
    assert data["nodes"][2]["name"] == "q"


@pytest.mark.slow
def test_in_jupyter_explore_shows_inline(tmp_path):
    """A notebook cell ending in viz.explore(loss) displays the page (an IFrame) as its
    result, run by a real Jupyter kernel."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    root = str(Path(__file__).resolve().parents[2])
    source = (f"import sys; sys.path.insert(0, {root!r})\n"
              "import numpy as np\nimport tinyattn as ta\nfrom tinyattn import viz\n"
              "x = ta.tensor(np.array([0.5, -1.0]), requires_grad=True)\n"
              "viz.explore((x.tanh() * x).sum())")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    (shown,) = notebook.cells[0].outputs
    assert shown.output_type == "execute_result"
    page = html.unescape(re.match(r'<iframe srcdoc="([^"]*)"', shown.data["text/html"]).group(1))
    assert [n["op"] for n in data_of(page)["nodes"]] == ["sum", "mul", "tanh", "leaf"]


# ---- a checkpoint, hooks, in-place changes, the page's file, params, the graph command -----------


def test_a_checkpoint_that_reuses_a_value_is_explored_as_backward_runs_it():
    """checkpoint's backward runs a backward pass of its own (the block again, then grad()):
    its sums are of nodes the page does not draw and stay off it; the page's steps, sums and
    leaf gradient are those of the outer pass, as explain mode and backward give them."""
    from tinyattn.utils.checkpoint import checkpoint

    x = ta.tensor(np.array([[0.5, -1.0, 2.0], [0.1, 0.2, -0.3]]), requires_grad=True)
    x.name = "x"

    def block(t):
        h = t.tanh()
        return h * h  # h used twice inside the checkpointed block: a "+=" in the inner pass

    loss = (checkpoint(block, x, use_reentrant=False) + x.sin()).sum()
    data = explore.walk(loss)
    assert [data["nodes"][s["node"]]["op"] for s in data["steps"]] == \
        ["sum", "add", "sin", "Checkpoint"]
    (event,) = [e for s in data["steps"] for e in s["sums"]]  # x: from sin, then Checkpoint
    assert data["nodes"][event["node"]]["name"] == "x"
    assert data["nodes"][event["from"]]["op"] == "Checkpoint"
    loss.backward(retain_graph=True)
    leaf = next(n for n in data["nodes"] if n["name"] == "x")
    assert leaf["total"]["norm"] == f"{np.linalg.norm(x.grad.numpy()):.3g}"
    page = viz.explore(loss)
    assert page.steps == 4


def hooked():
    """x with a hook that makes its .grad ten times the sum of its parts, and one on an
    intermediate that triples the g its op gets; `calls` lists the hooks that ran."""
    calls = []
    x = ta.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    x.name = "x"
    x.register_hook(lambda g: (calls.append("x"), g * 10)[1])
    h = x * x
    h.name = "h"
    h.register_hook(lambda g: (calls.append("h"), g * 3)[1])
    return h.sum(), x, calls


def test_the_page_shows_grads_after_hooks_as_backward_makes_them():
    """By default the walk runs the hooks once, as backward would (documented): a leaf's
    total is its .grad after its hooks, and the sum of its parts before them is shown too."""
    loss, x, calls = hooked()
    data = explore.walk(loss)
    assert calls == ["h", "x"]  # each once, as one backward runs them
    mul = next(n for n in data["nodes"] if n["op"] == "mul")
    assert mul["hooks"] == {"count": 1, "ran": True, "before": explore.payload(np.ones(3))}
    assert data["steps"][1]["g"]["text"] == "[3., 3., 3.]"  # mul's g: after h's hook
    leaf = next(n for n in data["nodes"] if n["name"] == "x")
    assert leaf["hooks"]["count"] == 1 and leaf["hooks"]["before"]["text"] == "[ 6., 12., 18.]"
    assert x.grad is None
    loss.backward(retain_graph=True)
    assert leaf["total"]["text"] == "[ 60., 120., 180.]" == \
        np.array2string(x.grad.numpy(), precision=4, separator=", ", suppress_small=True)


def test_hooks_false_runs_no_hook_and_says_so():
    loss, x, calls = hooked()
    data = explore.walk(loss, hooks=False)
    page = viz.explore(loss, hooks=False)
    assert calls == []  # drawing the page ran none of the user's code
    leaf = next(n for n in data["nodes"] if n["name"] == "x")
    assert leaf["hooks"] == {"count": 1, "ran": False, "before": leaf["total"]}
    assert leaf["total"]["text"] == "[2., 4., 6.]"  # before the hooks: not what .grad will be
    assert data["steps"][1]["g"]["text"] == "[1., 1., 1.]"
    assert data_of(page.html)["nodes"] == data["nodes"]
    loss.backward()  # the hooks are all still there
    assert calls == ["h", "x"] and x.grad.numpy().tolist() == [60.0, 120.0, 180.0]


def test_a_value_changed_in_place_later_is_shown_as_it_was_computed(monkeypatch):
    x = ta.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    for keep in (viz.KEEP_COPY, 2):  # copied; watched (an array above KEEP_COPY elements)
        monkeypatch.setattr(viz, "KEEP_COPY", keep)
        with viz.record() as rec:
            y = x * 2  # [2, 4, 6]
            y.retain_grad()  # (y's own .grad: y stays the tensor of the mul node)
            y += 100  # in place: y is [102, 104, 106], the output of a new add node
            loss = y.sum()
        nodes = {n["op"]: n for n in explore.walk(loss, recording=rec)["nodes"]}
        assert nodes["add"]["value"]["text"] == "[102., 104., 106.]"
        if keep > 2:
            assert nodes["mul"]["value"]["text"] == "[2., 4., 6.]"
        else:
            assert nodes["mul"]["value"] is None
            assert nodes["mul"]["value_note"] == viz.CHANGED
    bare = {n["op"]: n["value"] for n in explore.walk(loss)["nodes"]}
    assert bare["mul"] is None  # no recording: y's values now are not the mul's


def test_a_failed_write_keeps_the_old_page_and_names_it(tmp_path):
    """The page is written through a temporary file and renamed: a write that fails part-way
    (a full disk, a quota: here a file-size limit) leaves the old page whole and no
    temporary file, and the error names the page."""
    import subprocess
    import sys

    path = tmp_path / "page.html"
    path.write_text("OLD PAGE\n")
    script = ("import resource, signal, sys, numpy as np, tinyattn as ta\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "x = ta.tensor(np.ones((8, 8)), requires_grad=True)\n"
              "loss = (x.softmax(-1) * x).sum()\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (5000, resource.RLIM_INFINITY))\n"
              "try:\n"
              "    ta.viz.explore(loss, sys.argv[1])\n"
              "except OSError as e:\n"
              "    print(type(e).__name__, e)\n")
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, check=True, cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.startswith("OSError") and str(path) in done.stdout, done.stdout
    assert path.read_text() == "OLD PAGE\n"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_explorer_save_is_atomic_too(tmp_path, monkeypatch):
    loss, _, rec = three_ops()
    page = viz.explore(loss, recording=rec)
    path = tmp_path / "p.html"
    path.write_text("OLD")
    monkeypatch.setattr(explore.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "EIO")))
    with pytest.raises(OSError) as caught:
        page.save(path)
    assert caught.value.filename == str(path)
    assert path.read_text() == "OLD" and [p.name for p in tmp_path.iterdir()] == ["p.html"]


def test_params_may_be_named_pairs_once_and_anything_else_is_refused():
    lin = ta.nn.Linear(3, 2)
    loss = lin(ta.randn(1, 3)).sum()
    page = viz.explore(loss, params=lin.named_parameters())  # a generator: read once
    kinds = {n["name"]: n["kind"] for n in data_of(page.html)["nodes"]}
    assert kinds["weight"] == kinds["bias"] == "param"
    for bad in (lin.parameters(), list(lin.parameters()), {lin.weight: "weight"}):
        with pytest.raises(TypeError, match=r"explore: params must be a Module, a \{name: "
                                            r"tensor\} dict or \(name, tensor\) pairs"):
            viz.explore(loss, params=bad)


@pytest.mark.parametrize("flags", [["--no-values"], ["--saved"], ["--direction", "forward"],
                                   ["--out", "g.svg"], ["--saved", "--no-values"]])
def test_graph_html_refuses_the_options_of_a_picture(tmp_path, monkeypatch, flags):
    from tinyattn.train import FlagError

    monkeypatch.setattr(graphs, "example", lambda *a, **k: pytest.fail("built the graph"))
    with pytest.raises(FlagError) as caught:
        main(["graph", "--html", str(tmp_path / "p.html"), *flags])
    message = str(caught.value)
    assert message.startswith("graph: --html writes the backward-pass explorer")
    for flag in flags:
        if flag.startswith("--"):
            assert flag in message
    assert not (tmp_path / "p.html").exists()


def test_graph_html_takes_direction_backward(tmp_path):
    out = tmp_path / "page.html"
    assert main(["graph", "--model", "mlp", "--html", str(out), "--direction", "backward"]) == 0
    assert data_of(out.read_text(encoding="utf-8"))["steps"]
