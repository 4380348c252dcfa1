"""What the learning tools show on micrograd-sized graphs, read as a learner coming from
micrograd reads them: the signed gradient of every one-element tensor (micrograd's draw_dot
shows `grad -1.5000`, not a norm), in the picture, in explain mode and in the explorer page;
and a tensor changed in place after its node was made does not lend its newer name and
gradient to the older node."""

import io
import math
import re

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import explore, viz


def labels(text):
    """{DOT id: label} of the picture's boxes."""
    return {m.group(1): m.group(2).replace("\\n", "\n")
            for m in re.finditer(r'^\t(\w+) \[label="((?:[^"\\]|\\.)*)"', text, re.M)}


def box(text, name):
    (label,) = [lab for lab in labels(text).values() if lab.split("\n")[0] == name]
    return label


def neuron(tanh_by_exp=False):
    """micrograd's neuron: o = tanh(x1*w1 + x2*w2 + b), in float64, every tensor named."""
    vals = {"x1": 2.0, "x2": 0.0, "w1": -3.0, "w2": 1.0, "b": 6.8813735870195432}
    t = {k: ta.tensor(v, requires_grad=True, dtype=ta.float64) for k, v in vals.items()}
    for k, v in t.items():
        v.name = k
    n = t["x1"] * t["w1"] + t["x2"] * t["w2"] + t["b"]
    n.name = "n"
    if tanh_by_exp:
        e = (2 * n).exp()
        e.name = "e"
        o = (e - 1) / (e + 1)
    else:
        o = n.tanh()
    o.name = "o"
    return t, n, o


def test_the_picture_shows_a_one_element_gradient_with_its_sign():
    t, _, o = neuron()
    o.backward()
    text = viz.to_dot(o)
    assert t["x1"].grad.item() == pytest.approx(-1.5)  # micrograd's number
    assert "grad -1.5" in box(text, "x1")
    assert "grad 1" in box(text, "w1") and "grad 0.5" in box(text, "x2")
    assert "‖grad‖" not in text  # every tensor here has one element


def test_a_recorded_one_element_gradient_shows_its_sign_and_big_ones_keep_the_norm():
    with viz.record() as rec:
        t, n, o = neuron(tanh_by_exp=True)
        w = ta.tensor([1.0, -2.0], requires_grad=True, dtype=ta.float64)
        w.name = "w"
        loss = -(o * (w * w).sum())
        loss.name = "loss"
        loss.backward()
    text = viz.to_dot(loss, recording=rec)
    # d loss / d n = -5 * (1 - o²) = -2.5, kept by the recording (n is not a leaf)
    assert "grad -2.5" in box(text, "n")
    assert box(text, "o").endswith("grad -5")  # d(-o·s)/do = -s, s = 1 + 4
    assert f"‖grad‖ {np.linalg.norm(w.grad.numpy()):.3g}" in box(text, "w")


def test_explain_prints_a_one_element_gradient_with_its_sign():
    _, _, o = neuron(tanh_by_exp=True)
    out = io.StringIO()
    with ta.explain(file=out):
        o.backward()
    lines = out.getvalue().splitlines()
    div = next(line for line in lines if line.startswith("[0] div"))
    # o = (e-1)/(e+1): gy = -g (e-1)/(e+1)² is negative, gx = g/(e+1) positive
    e = math.exp(2 * 0.8813735870195432)
    assert div.endswith(f"| g () = 1 -> gx () = {1 / (e + 1):.3g}, "
                        f"gy () = {-(e - 1) / (e + 1) ** 2:.3g}")
    (acc,) = [line for line in lines if "used more than once" in line]
    assert acc.endswith(f"the sum so far is () = {1 / (e + 1) - (e - 1) / (e + 1) ** 2:.3g}")


def test_explain_agrees_with_torch_on_the_signs_of_cross_entropy_by_hand():
    torch = pytest.importorskip("torch")
    z = np.array([1.7, 0.4, 0.9, 2.2, 1.8])
    x = ta.tensor(z, requires_grad=True)
    loss = -ta.softmax(x, dim=0)[2].log()
    out = io.StringIO()
    with ta.explain(file=out):
        loss.backward()
    tz = torch.tensor(z, requires_grad=True)
    p2 = torch.softmax(tz, 0)[2]
    p2.retain_grad()
    (-p2.log()).backward()
    log_line = next(line for line in out.getvalue().splitlines() if "] log:" in line)
    assert log_line.endswith(f"g () = -1 -> gx () = {p2.grad.item():.3g}")
    assert p2.grad.item() < 0


def test_the_explorer_edges_show_a_one_element_gradient_with_its_sign():
    _, _, o = neuron()
    data = explore.walk(o)
    shown = [gr["shown"] for st in data["steps"] for gr in st["grads"] if gr is not None]
    assert "-1.5" in shown and "‖" not in "".join(shown)
    assert all("norm" in gr for st in data["steps"] for gr in st["grads"] if gr is not None)


def test_the_explorer_edges_keep_the_norm_of_a_bigger_gradient():
    x = ta.tensor([1.0, -2.0], requires_grad=True, dtype=ta.float64)
    data = explore.walk((x * x).sum())
    (mul,) = [st for st in data["steps"] if data["nodes"][st["node"]]["op"] == "mul"]
    assert mul["grads"][0]["shown"] == f"‖{np.linalg.norm([1.0, -2.0]):.3g}‖"  # g * x


def changed_in_place():
    """y = 2x, retained and named, then changed in place through a view and renamed."""
    x = ta.tensor([1.0, -2.0, 3.0], requires_grad=True, dtype=ta.float64)
    x.name = "x"
    y = x * 2
    y.name = "y"
    y.retain_grad()
    y[1:].mul_(3)
    y.name = "y2"
    loss = y.sum()
    loss.name = "loss"
    return x, y, loss


def test_a_node_older_than_an_in_place_change_keeps_its_own_name_and_gradient():
    with viz.record() as rec:
        x, y, loss = changed_in_place()
        loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 6.0, 6.0])
    text = viz.to_dot(loss, recording=rec)
    names = [lab.split("\n")[0] for lab in labels(text).values()]
    assert names.count("y2") == 1 and names.count("y") == 1
    # the older y's gradient is d loss / d (2x) = [1, 3, 3], not y.grad = [1, 1, 1] (y2's)
    assert f"‖grad‖ {np.linalg.norm([1.0, 3.0, 3.0]):.3g}" in box(text, "y")
    bare = viz.to_dot(loss)
    assert "grad" not in box(bare, "y")  # not recorded, and not y2's


def test_explain_names_the_older_node_by_its_own_name():
    x, y, loss = changed_in_place()
    out = io.StringIO()
    with ta.explain(file=out):
        loss.backward()
    text = out.getvalue()
    assert "-> y2:" in text and re.search(r"\] mul -> y:", text)


def test_the_explorer_names_the_older_node_by_its_own_name():
    x, y, loss = changed_in_place()
    names = [n["name"] for n in explore.walk(loss)["nodes"]]
    assert names.count("y2") == 1 and names.count("y") == 1
