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
            assert (node["op"], node["formula"], step["g"]["norm"]) == (op, formula, g)
            assert [gr["norm"] for gr in step["grads"] if gr is not None] == grads
            assert re.match(rf"\[{data['steps'].index(step)}\] {op}( -> [^:]+)?: ", step["explain"])
        assert [e["norm"] for s in data["steps"] for e in s["sums"]] == sums


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
    assert small == {"shape": [1, 2], "dtype": "float32", "norm": "2.24",
                     "text": "[[ 1., -2.]]"}
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
