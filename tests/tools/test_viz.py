"""Graph pictures: the DOT text's boxes, arrows, labels and clusters for graphs whose shape we
know; collapsing, backward direction, saved arrays; rendering with and without Graphviz's `dot`;
the `tinyattn graph` command."""

import html
import re
import shutil
import sys
import traceback

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn import viz
from tinyattn.cli import main
from tinyattn.errors import GraphError

HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot program is not installed")


def parse(text):
    """The DOT text as {id: attrs}, [(from, to)] and {id: enclosing cluster paths}."""
    nodes, edges, where, stack = {}, [], {}, []
    for line in text.splitlines():
        line = line.strip()
        if m := re.fullmatch(r'subgraph "cluster_(.*)" \{', line):
            stack.append(m.group(1))
        elif line == "}" and stack:
            stack.pop()
        elif m := re.fullmatch(r'("[^"]*"|\w+) -> ("[^"]*"|\w+)( \[.*\])?', line):
            edges.append((m.group(1).strip('"'), m.group(2).strip('"')))
        elif m := re.fullmatch(r'("[^"]*"|\w+) \[(.*)\]', line):
            if m.group(1) in ("graph", "node", "edge"):
                continue
            attrs = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            attrs = {k: v.replace("\\n", "\n").replace('\\"', '"') for k, v in attrs.items()}
            key = m.group(1).strip('"')
            nodes[key] = attrs
            where[key] = tuple(stack)
    return nodes, edges, where


def by_label(nodes, first_line):
    found = [k for k, a in nodes.items() if a["label"].split("\n")[0] == first_line]
    assert len(found) == 1, (first_line, [a["label"] for a in nodes.values()])
    return found[0]


def softmax_graph():
    x = ta.tensor(np.arange(6.0).reshape(2, 3) / 6, requires_grad=True)  # float64
    w = ta.tensor(np.eye(3) * 0.5, requires_grad=True)
    with viz.record() as rec:
        y = F.softmax(x @ w, dim=-1)
        loss = y.sum()
        loss.name = "loss"
        loss.backward()
    return x, w, y, loss, rec


def test_known_graph_boxes_arrows_and_labels():
    x, w, y, loss, rec = softmax_graph()
    nodes, edges, _ = parse(viz.to_dot(loss, params={"x": x, "w": w}))
    ops = {k: a for k, a in nodes.items() if a.get("shape") == "ellipse"}
    assert sorted(a["label"].split("\n")[0] for a in ops.values()) == ["matmul", "softmax", "sum"]
    assert len(nodes) == 3 + 5  # three ops; x, w, x @ w, softmax(x @ w), the loss
    tx, tw = by_label(nodes, "x"), by_label(nodes, "w")
    mm, sm, sm_sum = by_label(nodes, "matmul"), by_label(nodes, "softmax"), by_label(nodes, "sum")
    out = {a: b for a, b in edges if a.startswith("o")}  # each op -> its output box
    assert set(edges) == {(tx, mm), (tw, mm), (mm, out[mm]), (out[mm], sm), (sm, out[sm]),
                          (out[sm], sm_sum), (sm_sum, out[sm_sum])}
    assert len(edges) == 7
    assert nodes[sm]["tooltip"].startswith("softmax: gx = y * (g - sum(g*y, dim))")
    assert "dim=-1" in nodes[sm]["label"]
    label = nodes[tx]["label"]
    assert "(2, 3) float64" in label
    assert f"‖grad‖ {np.linalg.norm(x.grad.numpy()):.3g}" in label
    assert f"mean {x.numpy().mean():.3g}" in label
    assert nodes[out[sm_sum]]["label"] == f"loss\n() float64\n{loss.item():.3g}"


def test_interior_values_need_a_recording():
    x, w, y, loss, rec = softmax_graph()
    bare, _, _ = parse(viz.to_dot(loss))
    recorded, _, _ = parse(viz.to_dot(loss, recording=rec))
    interior = [k for k, a in bare.items() if a.get("fillcolor") == viz._STYLE["value"]]
    assert len(interior) == 2
    for k in interior:
        assert "mean" not in bare[k]["label"] and "grad" not in bare[k]["label"]
        assert "mean" in recorded[k]["label"] and "‖grad‖" in recorded[k]["label"]
    sm_out = [k for k in interior if "(2, 3)" in recorded[k]["label"]
              and f"mean {y.numpy().mean():.3g}" in recorded[k]["label"]]
    assert sm_out  # softmax rows sum to one: mean 1/3
    assert recorded[by_label(recorded, "loss")]["label"].endswith("\ngrad 1")  # the seed
    hidden, _, _ = parse(viz.to_dot(loss, recording=rec, show_values=False, show_grads=False))
    assert all("mean" not in a["label"] and "grad" not in a["label"] for a in hidden.values())


def test_tiny_values_constants_and_fused_ops():
    x = ta.tensor([[1.0, -2.0]], requires_grad=True)  # (1, 2): shown by value
    ln = F.layer_norm(x, (2,))
    with viz.record() as rec:
        loss = F.cross_entropy(ln * 3.0, ta.tensor([1]))
    nodes, edges, _ = parse(viz.to_dot(loss, recording=rec, params={"x": x}))
    assert "[[ 1., -2.]]" in nodes[by_label(nodes, "x")]["label"]
    for name in ("layer_norm (fused)", "cross_entropy (fused)"):
        assert nodes[by_label(nodes, name)]["peripheries"] == "2"
    assert "peripheries" not in nodes[by_label(nodes, "mul")]
    three = by_label(nodes, "3.0")  # the Python number of `ln * 3.0`
    target = by_label(nodes, "const (1,) int64")  # the integer target, no gradient
    assert (three, by_label(nodes, "mul")) in edges
    assert (target, by_label(nodes, "cross_entropy (fused)")) in edges


def small_model():
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(vocab_size=7, d_model=8, n_heads=2, n_layers=2, max_len=4)
    ids = ta.tensor([[1, 2, 3, 4]])
    with viz.record() as rec:
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, 7), ta.tensor([2, 3, 4, 5]))
        loss.backward()
    return model, loss, rec


def test_module_clusters_nest_and_name_parameters():
    model, loss, rec = small_model()
    nodes, edges, where = parse(viz.to_dot(loss, params=model, recording=rec))
    qkv_weight = by_label(nodes, "blocks.0.attn.qkv.weight")
    assert where[qkv_weight] == ("blocks", "blocks.0", "blocks.0.attn", "blocks.0.attn.qkv")
    softmaxes = [k for k, a in nodes.items() if a["label"].startswith("scaled_masked_softmax")]
    assert sorted(where[k] for k in softmaxes) == [("blocks", "blocks.0", "blocks.0.attn"),
                                                   ("blocks", "blocks.1", "blocks.1.attn")]
    assert where[by_label(nodes, "cross_entropy (fused)")] == ()  # made outside the model
    labels = re.findall(r'label="(blocks\.0\.attn[^"]*)" labeljust', viz.to_dot(loss, params=model))
    assert labels == ["blocks.0.attn (CausalSelfAttention)", "blocks.0.attn.proj (Linear)",
                      "blocks.0.attn.qkv (Linear)"]
    n_params = sum(1 for a in nodes.values() if a.get("fillcolor") == viz._STYLE["param"])
    assert n_params == len(list(model.named_parameters()))


def test_collapse_folds_each_module_into_one_box():
    model, loss, rec = small_model()
    full, _, _ = parse(viz.to_dot(loss, params=model, recording=rec))
    nodes, edges, where = parse(viz.to_dot(loss, params=model, recording=rec,
                                           collapse=["blocks.*"]))
    assert len(nodes) < len(full) / 3
    b0, b1 = "m:blocks.0", "m:blocks.1"
    assert nodes[b0]["shape"] == "box3d" and where[b0] == ("blocks",)
    assert nodes[b0]["label"].startswith("blocks.0\nTransformerBlock\n")
    assert "parameters" in nodes[b0]["label"]
    inside = [k for k, w in where.items() if len(w) > 1]
    assert inside == []  # nothing is drawn inside a collapsed block
    ops = [a["label"].split("\n")[0] for a in nodes.values() if a.get("shape") == "ellipse"]
    assert "scaled_masked_softmax (fused)" not in ops and "cross_entropy (fused)" in ops
    between = [b for a, b in edges if a == b0]  # block 0's output goes on to block 1
    assert len(between) == 1 and (between[0], b1) in edges
    assert len(edges) == len(set(edges))
    sub, _, where_sub = parse(viz.to_dot(loss, params=model, collapse="blocks.*.attn"))
    assert {k for k in sub if k.startswith("m:")} == {"m:blocks.0.attn", "m:blocks.1.attn"}
    assert where_sub["m:blocks.1.attn"] == ("blocks", "blocks.1")
    assert "scaled_masked_softmax" in sub["m:blocks.0.attn"]["tooltip"]


def test_backward_direction_reverses_every_arrow():
    x, w, y, loss, rec = softmax_graph()
    _, forward, _ = parse(viz.to_dot(loss))
    _, backward, _ = parse(viz.to_dot(loss, direction="backward"))
    assert sorted(backward) == sorted((b, a) for a, b in forward)
    three = ta.tensor([1.0, 2.0], requires_grad=True) * 3.0  # a constant gets no gradient
    text = viz.to_dot(three, direction="backward")
    assert re.search(r'c0_1 -> o0 \[dir="none"', text) and "o0 -> t1" in text
    with pytest.raises(ValueError, match="direction"):
        viz.to_dot(loss, direction="sideways")


def test_show_saved_lists_what_each_vjp_keeps_and_when_it_is_freed():
    x = ta.randn(2, 3, requires_grad=True)
    loss = F.softmax(x, dim=-1).sum()
    nodes, _, _ = parse(viz.to_dot(loss, show_saved=True))
    assert "saved: (2, 3)" in nodes[by_label(nodes, "softmax")]["label"]
    assert viz.saved_arrays(loss) == [("softmax", None, [(2, 3)], 24)]
    loss.backward()
    nodes, _, _ = parse(viz.to_dot(loss, show_saved=True))
    assert "saved: freed by backward" in nodes[by_label(nodes, "softmax")]["label"]


def test_the_walk_is_iterative_however_long_the_graph():
    y = x = ta.randn(1, requires_grad=True)
    for _ in range(20_000):
        y = y * 1.0
    depth = len(traceback.extract_stack())
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 100)  # a recursive walk would need 20 000 frames
    try:
        text = viz.to_dot(y, show_values=False)
    finally:
        sys.setrecursionlimit(limit)
    assert text.count('label="mul"') == 20_000
    assert text.count(" -> ") == 3 * 20_000  # input, constant, output of each mul
    assert x.requires_grad


def test_a_tensor_without_graph_is_a_clear_error():
    with pytest.raises(GraphError, match="requires_grad=True"):
        viz.to_dot(ta.tensor([1.0, 2.0]))


def test_draw_graph_is_a_digraph_of_the_same_text():
    graphviz = pytest.importorskip("graphviz")
    x, w, y, loss, rec = softmax_graph()
    g = viz.draw_graph(loss, recording=rec)
    assert isinstance(g, graphviz.Digraph) and viz.draw_dot is viz.draw_graph
    nodes, edges, _ = parse(g.source)
    assert (nodes, edges) == parse(viz.to_dot(loss, recording=rec))[:2]


@needs_dot
@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".png", b"\x89PNG"),
                                           (".pdf", b"%PDF")])
def test_render_writes_real_files(tmp_path, suffix, magic):
    x, w, y, loss, rec = softmax_graph()
    path = viz.render(loss, tmp_path / f"g{suffix}", recording=rec)
    data = path.read_bytes()
    assert data.startswith(magic) and len(data) > 1000
    if suffix == ".svg":
        text = html.unescape(data.decode())
        assert "softmax: gx = y * (g - sum(g*y, dim))" in text  # the hover tooltip
        assert text.count('class="node"') == 8 and text.count('class="edge"') == 7


def test_without_dot_to_dot_works_and_rendering_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    x, w, y, loss, rec = softmax_graph()
    assert viz.to_dot(loss).startswith("digraph")
    with pytest.raises(viz.GraphvizNotFoundError, match="apt-get install graphviz"):
        viz.render(loss, tmp_path / "g.svg")
    assert viz.render(loss, tmp_path / "g.dot").read_text().startswith("digraph")
    with pytest.raises(ValueError, match=r"\.svg"):
        viz.render(loss, tmp_path / "g.jpeg")
    assert main(["graph", "--model", "mlp", "--out", str(tmp_path / "m.svg")]) == 1


@needs_dot
def test_graph_command_draws_the_tiny_transformer(tmp_path, capsys):
    out = tmp_path / "graph.svg"
    assert main(["graph", "--expand", "--out", str(out)]) == 0  # every op
    svg = out.read_text()
    assert "cluster_blocks.1.attn" in svg and "cross_entropy: gx" in svg
    assert str(out) in capsys.readouterr().out
    folded = tmp_path / "folded.svg"
    assert main(["graph", "--out", str(folded)]) == 0  # by default, each sublayer is one box
    assert "m:blocks.0.attn" in folded.read_text()
    assert folded.stat().st_size < out.stat().st_size / 2
    width = float(re.search(r'<svg width="(\d+)pt"', folded.read_text()).group(1))
    assert width < 1000  # fits a screen's width (the expanded one is about 2300 pt)
    again = tmp_path / "again.svg"
    assert main(["graph", "--collapse", "--out", str(again)]) == 0
    assert again.read_text() == folded.read_text()
    assert "nothing to collapse" not in capsys.readouterr().out


def test_graph_command_says_when_there_is_nothing_to_collapse(tmp_path, capsys):
    out = str(tmp_path / "g.dot")
    assert main(["graph", "--model", "attention", "--collapse", "--out", out]) == 0
    assert "nothing to collapse: the attention graph has no modules" in capsys.readouterr().out
    assert main(["graph", "--model", "mlp", "--collapse", "9", "--out", out]) == 0
    said = capsys.readouterr().out
    assert "no module of the mlp graph matches 9 (its modules: 0, 1, 2)" in said
    assert main(["graph", "--model", "mlp", "--collapse", "1", "--out", out]) == 0
    assert "nothing to collapse" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["graph", "--collapse", "--expand", "--out", out])


def test_graph_command_writes_dot_text_for_each_model(tmp_path):
    for model in ("tiny", "mlp", "attention"):
        path = tmp_path / f"{model}.dot"
        assert main(["graph", "--model", model, "--direction", "backward", "--saved",
                     "--out", str(path)]) == 0
        nodes, edges, _ = parse(path.read_text())
        assert by_label(nodes, "loss") and edges
        assert any("saved: (" in a["label"] for a in nodes.values())


def test_a_named_intermediate_keeps_its_name_in_the_picture_after_it_is_gone():
    x = ta.randn(3, requires_grad=True)
    x.name = "x"
    scores = x * 2.0
    scores.name = "S"
    loss = F.softmax(scores, dim=0).sum()
    del scores  # only the graph remembers it now
    nodes, _, _ = parse(viz.to_dot(loss))
    labels = [n["label"].split("\n")[0] for n in nodes.values()]
    assert "S" in labels and "x" in labels
    unnamed = F.softmax(ta.randn(3, requires_grad=True) * 2.0, dim=0).sum()
    assert "S\n" not in viz.to_dot(unnamed)


def test_names_must_be_strings_and_survive_requires_grad_and_in_place_changes():
    with pytest.raises(TypeError, match="Tensor.name"):
        ta.randn(2).name = 3
    w = ta.randn(2)
    w.name = "w"
    w.requires_grad_()
    assert w._node.name == "w"
    y = w * 1.0
    y.name = "y"
    y += 1.0  # a new node for y: the name goes with it
    assert y._node.op.name == "add" and y._node.name == "y"


def test_an_absent_optional_input_is_not_drawn():
    q, k, v = (ta.randn(1, 4, 2, requires_grad=True) for _ in range(3))
    loss = F.scaled_dot_product_attention(q, k, v, is_causal=True, impl="flash").sum()
    text = viz.to_dot(loss)  # no recording: the picture cannot ask what the mask slot held
    assert "const" not in text
    mask = ta.tensor(np.tril(np.ones((4, 4), dtype=bool)))
    masked = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, impl="flash").sum()
    assert "const (4, 4) bool" in viz.to_dot(masked)  # a mask that is there still shows


def test_a_failed_render_leaves_the_old_file_and_no_partial_one(tmp_path, monkeypatch):
    """dot draws into memory and the file is replaced whole: a dot that writes half a picture
    and fails leaves the old file as it was, and no temporary file."""
    import sys

    from tinyattn import viz

    loss = (ta.randn(3, requires_grad=True) * 2).sum()
    path = tmp_path / "graph.svg"
    viz.render(loss, path)
    old = path.read_bytes()
    fake = tmp_path / "fake_dot.py"
    fake.write_text("import sys\nsys.stdin.read()\nsys.stdout.write('<svg partial')\n"
                    "sys.stderr.write('out of memory')\nsys.exit(1)\n")
    monkeypatch.setattr(viz, "dot_program", lambda: sys.executable)
    real_run = viz.subprocess.run
    monkeypatch.setattr(viz.subprocess, "run",
                        lambda args, **kw: real_run([args[0], str(fake), *args[1:]], **kw))
    with pytest.raises(RuntimeError, match="render: dot failed on graph.svg: out of memory"):
        viz.render(loss, path)
    assert path.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake_dot.py", "graph.svg"]


def test_names_dot_cannot_carry_are_drawn_escaped():
    """A NUL or a lone surrogate in a tensor's name is shown as its escape, not a DOT syntax
    error or a UnicodeEncodeError from the encoding."""
    from tinyattn import viz

    x = ta.randn(2, requires_grad=True)
    x.name = "a\x00b\ud800c"
    text = viz.to_dot((x * 2).sum())
    assert "a\\\\x00b\\\\ud800c" in text
    text.encode("utf-8")  # (a lone surrogate would not encode)
    assert viz.render((x * 2).sum(), io_path := __import__("pathlib").Path(
        __import__("tempfile").mkdtemp()) / "n.svg").read_bytes().startswith(b"<?xml")
    io_path.unlink()



def test_recorded_values_are_kept_as_computed_through_later_in_place_changes(monkeypatch):
    """record() copies what it keeps: an op's output changed in place afterwards (y += 100)
    still shows the values the op made, and a constant changed afterwards the values it had.
    An array too big to copy (above viz.KEEP_COPY elements) is kept by reference: once changed
    in place it says so instead of showing values it no longer holds."""
    x = ta.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    for keep in (viz.KEEP_COPY, 2):
        monkeypatch.setattr(viz, "KEEP_COPY", keep)
        mask = ta.tensor(np.array([1.0, 0.0, 1.0]))
        with viz.record() as rec:
            y = x * 2  # [2, 4, 6]
            y += 100  # [102, 104, 106]: y is now the output of an add node
            loss = (y * mask).sum()
        mask.data[...] = 7.0  # (no op: its version counter does not move)
        mask += 1.0  # an in-place op on the constant
        nodes, edges, _ = parse(viz.to_dot(loss, recording=rec))
        add = by_label(nodes, "add")
        (made,) = [a for a, b in edges if b == add and a.startswith("t")]  # x * 2's box
        (after,) = [b for a, b in edges if a == add]
        assert nodes[after]["label"].split("\n")[1] == "[102., 104., 106.]"
        const = next(a["label"] for a in nodes.values() if a["label"].startswith("const"))
        if keep > 2:
            assert nodes[made]["label"].split("\n")[1] == "[2., 4., 6.]"
            assert const == "const (3,) float64\n[1., 0., 1.]"
        else:
            assert nodes[made]["label"].split("\n")[1] == "changed in place later: not kept"
            assert const == "const (3,) float64\nchanged in place later: not kept"
            with ta.no_grad():
                x += 1.0  # a leaf updated in place (an optimizer step): it shows its values now
            nodes, _, _ = parse(viz.to_dot(loss, recording=rec))
            assert nodes[by_label(nodes, "leaf")]["label"].split("\n")[2:] == \
                ["[2., 3., 4.]", viz.NOW]


def test_a_collapsed_module_keeps_the_arrow_from_its_own_tied_parameter():
    """A parameter read inside its module and outside it (tied weights) is drawn outside the
    folded module: it has an arrow into the module's box and one to the op outside."""

    class Net(ta.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = ta.nn.Linear(3, 3, bias=False)

        def forward(self, x):
            return self.emb(x).tanh() @ self.emb.weight  # emb.weight: inside emb, and here

    net = Net()
    loss = net(ta.randn(2, 3)).sum()
    nodes, edges, _ = parse(viz.to_dot(loss, params=net, collapse=["emb"]))
    weight, matmul = by_label(nodes, "emb.weight"), by_label(nodes, "matmul")
    assert sorted(b for a, b in edges if a == weight) == sorted(["m:emb", matmul])
    out = [b for a, b in edges if a == "m:emb"]  # emb's output, on to tanh
    assert len(out) == 1 and ("m:emb", weight) not in edges
    # a value made inside a module that flows back into it still draws no arrow back
    model, loss2, rec = small_model()
    _, edges2, _ = parse(viz.to_dot(loss2, params=model, collapse=["blocks.*"]))
    assert len(edges2) == len(set(edges2))


def test_params_are_a_module_a_dict_or_named_pairs():
    lin = ta.nn.Linear(3, 2)
    loss = lin(ta.randn(1, 3)).sum()
    for params in (lin, dict(lin.named_parameters()), lin.named_parameters(),
                   list(lin.named_parameters())):
        nodes, _, _ = parse(viz.to_dot(loss, params=params))
        assert nodes[by_label(nodes, "weight")]["fillcolor"] == viz._STYLE["param"]
    message = (r"to_dot: params must be a Module, a \{name: tensor\} dict or \(name, tensor\) "
               r"pairs \(as module.named_parameters\(\) gives\), got ")
    for bad, what in ((lin.parameters(), r"a generator whose item 0 is a Parameter of shape "
                                         r"\(2, 3\); pass the module, or its named_parameters"),
                      (list(lin.parameters()), "a list whose item 0 is a Parameter"),
                      ([lin.weight[:2]], "a list whose item 0 is a Tensor"),  # 2 rows: unpacks
                      ({lin.weight: "w"}, "a dict whose key 0 is a Parameter"),
                      ({"w": np.ones(2)}, "a dict whose value for 'w' is an? ndarray"),
                      ([("w", np.ones(2))], r"a list whose item 0 is \('w', ndarray\)"),
                      (lin.weight, "a Parameter"), ("weight", "a str")):
        with pytest.raises(TypeError, match=message + what):
            viz.to_dot(loss, params=bad)


def test_a_leaf_updated_between_two_forward_passes_shows_the_values_the_last_one_used():
    w = ta.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with viz.record() as rec:
        (w * 3.0).sum().backward()
        with ta.no_grad():
            w -= 0.5  # an optimizer step: w is [0.5, 1.5]
        loss = (w * w).sum()  # read twice: kept once
    nodes, _, _ = parse(viz.to_dot(loss, recording=rec))
    assert nodes[by_label(nodes, "leaf")]["label"].split("\n")[2] == "[0.5, 1.5]"
    del w  # gone: the recording still has what the last pass read
    nodes, _, _ = parse(viz.to_dot(loss, recording=rec))
    assert nodes[by_label(nodes, "leaf")]["label"].split("\n")[2] == "[0.5, 1.5]"
