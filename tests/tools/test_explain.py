"""Explain mode: one line per VJP in execution order, with formula, shapes and norms that match
the gradients computed by hand; accumulation lines; stepping through backward_steps()."""

import io
import re

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn.explain import describe, grad_names
from tinyattn.ops import REGISTRY

# (g's norm; a one-element g is shown signed instead, "g () = -1")
VJP = re.compile(r"\[(\d+)\] (\w+): (.*) \| g (\(.*?\)) (?:‖(\S+)‖|= (?:\S+)) -> (.*)")


def norm(a):
    return f"{np.linalg.norm(np.asarray(a, dtype=np.float64).ravel()):.3g}"


def run(loss, **kwargs):
    out = io.StringIO()
    with ta.explain(file=out, **kwargs):
        loss.backward()
    return out.getvalue().splitlines()


def test_softmax_line_has_formula_shapes_and_norms():
    x = ta.tensor(np.array([[0.5, -1.0, 2.0], [0.0, 0.1, 0.2]]), requires_grad=True)
    w = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 4.0]])
    y = F.softmax(x, dim=-1)
    lines = run((y * ta.tensor(w)).sum())
    assert [VJP.match(line).group(2) for line in lines] == ["sum", "mul", "softmax"]
    step, op, formula, g_shape, g_norm, sent = VJP.match(lines[2]).groups()
    assert step == "2" and formula == "gx = y * (g - sum(g*y, dim))"
    assert "softmax: gx = y * (g - sum(g*y, dim))" in lines[2]
    yy = y.numpy()
    gx = yy * (w - (w * yy).sum(axis=-1, keepdims=True))  # the VJP, by hand
    assert g_shape == "(2, 3)" and g_norm == norm(w)  # g of softmax is w
    assert sent == f"gx (2, 3) ‖{norm(gx)}‖"
    np.testing.assert_allclose(x.grad.numpy(), gx)


def test_matmul_line_names_both_gradients_and_accumulation_is_told():
    a = ta.tensor(np.arange(6.0).reshape(2, 3) / 10, requires_grad=True)
    a.name = "a"
    b = ta.tensor(np.ones((3, 4)), requires_grad=True)
    lines = run((a @ b).sum() + (a * a).sum())
    vjps = [VJP.match(line) for line in lines if line.startswith("[")]
    ops = [m.group(2) for m in vjps]
    assert ops[0] == "add" and sorted(ops) == ["add", "matmul", "mul", "sum", "sum"]
    mm = next(m for m in vjps if m.group(2) == "matmul")
    assert mm.group(3) == "gx = g @ yᵀ, gy = xᵀ @ g" and mm.group(4) == "(2, 4)"
    ones = np.ones((2, 4))
    assert mm.group(6) == f"gx (2, 3) ‖{norm(ones @ np.ones((3, 4)).T)}‖, " \
                          f"gy (3, 4) ‖{norm(a.numpy().T @ ones)}‖"
    adds = [line for line in lines if line.startswith("      + ")]
    assert len(adds) == 2  # a reaches the sum three times: from matmul, and twice from a * a
    assert all(line.startswith("      + a is used more than once") for line in adds)
    assert "contribution 3" in adds[-1]
    total = ones @ np.ones((3, 4)).T + 2 * a.numpy()
    assert adds[-1].endswith(f"(2, 3) ‖{norm(total)}‖")
    np.testing.assert_allclose(a.grad.numpy(), total)


def test_steps_are_numbered_in_execution_order_and_show_modules():
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(vocab_size=5, d_model=8, n_heads=2, n_layers=1, max_len=4)
    loss = F.cross_entropy(model(ta.tensor([[1, 2, 3]])).reshape(-1, 5),
                           ta.tensor([2, 3, 4]))
    lines = [line for line in run(loss, params=model) if line.startswith("[")]
    assert [int(VJP.match(line).group(1)) for line in lines] == list(range(len(lines)))
    assert lines[0].startswith("[0] cross_entropy: ") and "(fused)" in lines[0]
    assert any("scaled_masked_softmax" in line and line.endswith("[blocks.0.attn]")
               for line in lines)


def test_an_input_without_gradient_is_left_out():
    x = ta.randn(3, requires_grad=True)
    mask = ta.tensor([True, False, True])
    lines = run(F.softmax(x.masked_fill(mask, float("-inf")), dim=0).sum())
    masked = VJP.match(next(line for line in lines if "masked_fill" in line))
    assert re.fullmatch(r"gx \(3,\) ‖[^‖]+‖", masked.group(6))  # the mask gets no gradient


def test_grad_names_come_from_the_formula():
    assert grad_names(REGISTRY["matmul"], 2) == ["gx", "gy"]
    assert grad_names(REGISTRY["flash_attention"], 4) == ["gq", "gk", "gv", "g[3]"]
    assert grad_names(REGISTRY["embedding"], 2) == ["g[0]", "gw"]
    assert grad_names(REGISTRY["cat"], 3) == ["g[0]", "g[1]", "g[2]"]


def test_backward_steps_stop_anywhere_and_show_the_gradients_so_far():
    x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = F.softmax(x, dim=0)
    loss = (y * y).sum()
    steps = loss.backward_steps()
    first = next(steps)
    assert describe(first).startswith("[0] sum: gx = broadcast(g, x.shape)")
    assert x.grad is None  # nothing has reached x yet
    second = next(steps)
    assert describe(second).startswith("[1] mul:")
    (pending,) = second.pending.values()  # y's gradient so far: both uses of y, added up
    np.testing.assert_allclose(pending, 2 * y.numpy())
    third = next(steps)
    assert third.node.op.name == "softmax" and x.grad is None
    with pytest.raises(StopIteration):
        next(steps)
    assert x.grad is not None


def test_backward_steps_show_each_inputs_gradient_at_its_shape_and_dtype():
    # a broadcast input's part is summed back to its shape, a number gets None, a float32
    # input of a float64 sum gets float32: what the walk passed on, not the VJP's raw arrays
    x = ta.tensor(np.ones((3, 1), dtype=np.float32), requires_grad=True)
    y = ta.tensor(np.ones((1, 4)), requires_grad=True)
    loss = ((x + y) * 2.0).sum()
    steps = list(loss.backward_steps())
    mul, add = steps[1], steps[2]
    assert mul.node.op.name == "mul" and mul.grads[1] is None
    assert add.node.op.name == "add"
    gx, gy = add.grads
    assert (gx.shape, gx.dtype, gy.shape, gy.dtype) == ((3, 1), np.float32, (1, 4), np.float64)
    np.testing.assert_allclose(gx, np.full((3, 1), 8.0))
    np.testing.assert_allclose(gy, np.full((1, 4), 6.0))
    np.testing.assert_allclose(x.grad.numpy(), gx)


def test_named_tensors_are_told_by_explain_mode_and_backward_steps():
    x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x.name = "x"
    scores = x * 2.0
    scores.name = "S"
    weights = F.softmax(scores, dim=0)
    weights.name = "A"
    loss = (weights * weights).sum()
    del scores, weights  # gone: the nodes keep the names
    out = io.StringIO()
    with ta.explain(file=out):
        loss.backward(retain_graph=True)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("[")]
    assert lines[2].startswith("[2] softmax -> A: gx = y * (g - sum(g*y, dim))")
    assert lines[3].startswith("[3] mul -> S: ")
    assert "+ A is used more than once" in out.getvalue()
    steps = list(loss.backward_steps())
    assert describe(steps[2]).startswith("[2] softmax -> A:")
    assert repr(steps[3]) == "<Step 3: mul -> S>"
    assert repr(steps[0]) == "<Step 0: sum>"  # an unnamed output: no arrow


def test_each_backward_pass_in_one_explain_block_is_told_from_its_first_vjp():
    """Two passes in one block: the second starts again at [0] and counts its own
    contributions (as backward_steps numbers each pass), not the first pass's as well."""
    a = ta.randn(3, requires_grad=True)
    a.name = "a"
    loss = (a * 2 + a * 3).sum()
    out = io.StringIO()
    with ta.explain(file=out):
        loss.backward(retain_graph=True)
        loss.backward()
    lines = out.getvalue().splitlines()
    vjps = [line.split("]")[0] + "]" for line in lines if line.startswith("[")]
    assert vjps == ["[0]", "[1]", "[2]", "[3]"] * 2
    uses = [line for line in lines if "used more than once" in line]
    assert len(uses) == 2 and all("contribution 2 comes from mul" in u for u in uses)
    np.testing.assert_allclose(a.grad.numpy(), 10.0)


def test_a_checkpoint_inside_the_pass_keeps_the_numbers_and_marks_its_own_pass():
    """checkpoint's backward recomputes its block and runs a backward pass of its own: that
    pass is told as nested steps [k.0], [k.1]... inside the step k of the checkpoint (indented),
    and the outer pass keeps counting its steps and each tensor's contributions."""
    from tinyattn.utils.checkpoint import checkpoint

    x = ta.tensor(np.array([[0.5, -1.0, 2.0], [0.1, 0.2, -0.3]]), requires_grad=True)
    x.name = "x"
    y = x.exp()
    y.name = "y"
    c = checkpoint(lambda t: t.tanh() * 2, y, use_reentrant=False)  # the oldest user of y
    loss = (c + y.sin() + y.cos()).sum()  # y used twice more
    order = [s.node.op.name for s in loss.backward_steps(retain_graph=True)]
    lines = run(loss)
    outer = [re.match(r"\[(\d+)\] (\w+)", line) for line in lines if line.startswith("[")]
    assert [int(m.group(1)) for m in outer] == list(range(len(outer)))
    assert [m.group(2) for m in outer] == order == \
        ["sum", "add", "cos", "add", "sin", "Checkpoint", "exp"]
    nested = [line for line in lines if line.startswith("    [")]
    assert [line.split(":")[0] for line in nested] == ["    [5.0] mul", "    [5.1] tanh"]
    assert lines.index(nested[-1]) + 1 == lines.index(outer[5].string)  # just before step 5
    uses = [line for line in lines if "used more than once" in line]
    assert [u.split(":")[1].split(",")[0] for u in uses] == \
        [" contribution 2 comes from sin", " contribution 3 comes from Checkpoint"]


def test_nested_passes_in_one_step_count_on_and_a_new_pass_starts_again():
    from tinyattn.utils.checkpoint import checkpoint

    x = ta.randn(3, requires_grad=True)
    a = checkpoint(lambda t: checkpoint(lambda u: u.sin(), t, use_reentrant=False) * 2, x,
                   use_reentrant=False)  # two levels deep
    loss = (a + checkpoint(lambda t: t.exp(), x, use_reentrant=False)).sum()
    out = io.StringIO()
    with ta.explain(file=out):
        loss.backward(retain_graph=True)
        loss.backward()
    steps = [m.group(1) for line in out.getvalue().splitlines()
             if (m := re.match(r" *(\[[\d.]+\]) ", line))]
    one = ["[0]", "[1]", "[2.0]", "[2]", "[3.0]", "[3.1.0]", "[3.1]", "[3]"]
    assert steps == one * 2


def test_params_may_be_named_pairs_and_a_list_of_tensors_is_refused():
    lin = ta.nn.Linear(3, 3, bias=False)
    x = ta.randn(2, 3)
    loss = (lin(x) + x @ lin.weight).sum()  # the weight is used twice
    lines = run(loss, params=lin.named_parameters())
    assert any(line.startswith("      + weight is used more than once") for line in lines)
    with pytest.raises(TypeError, match=r"^explain: params must be a Module, a \{name: tensor\} "
                                        r"dict or \(name, tensor\) pairs"):
        ta.explain(params=list(lin.parameters()))


def test_a_step_repr_stays_one_line_when_a_name_holds_a_newline():
    x = ta.randn(2, requires_grad=True)
    y = x * 2
    y.name = "a\nb\tc"
    steps = list(y.sum().backward_steps())
    assert repr(steps[1]) == "<Step 1: mul -> a\\nb\\tc>"
    assert "\n" not in repr(steps[1])
