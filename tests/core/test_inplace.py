"""In-place ops and version counters: PyTorch's habits, written as a user writes them.

`p -= lr * p.grad` under no_grad changes the parameter itself; an in-place change to a tensor a
graph saved makes backward refuse (the version check); recorded in-place ops on non-leaf tensors
give torch's gradients; the cases torch refuses are refused with a message that says what to do.
Every augmented assignment torch has (//=, %=, <<=, >>= too) and the in-place method forms
(x.tan_(), x.eq_(y), x.addmm_(...), ...) change the tensor itself.
Each is compared with torch where torch is installed.
"""

import threading

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.autograd import apply
from tinyattn.ops import REGISTRY
from tinyattn.ops import samples as S


def leaf(values, requires_grad=True):
    return ta.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


# ---- the textbook SGD loop -----------------------------------------------------------------------


def test_sgd_by_hand_updates_the_parameters_in_place():
    ta.manual_seed(0)
    model = ta.nn.Linear(3, 1)
    weight = model.weight
    held = weight._data  # what an optimizer (or the user) holds: the same array, changed
    x = ta.randn(16, 3)
    y = x @ ta.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    losses = []
    for _ in range(60):
        loss = ((model(x) - y) ** 2).mean()
        model.zero_grad()
        loss.backward()
        with ta.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        losses.append(loss.item())
    assert model.weight is weight and weight._data is held and weight.is_leaf
    assert weight.requires_grad and weight._version == 60
    assert losses[-1] < 0.05 * losses[0]  # it trains (before: the loss never moved)


@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/=", "**="])
def test_augmented_assignment_changes_the_same_tensor(op):
    x = ta.tensor([1.0, 2.0, 4.0])
    alias = x
    held = x._data
    exec(f"x {op} 2.0", {}, {"x": x})
    want = {"+=": [3, 4, 6], "-=": [-1, 0, 2], "*=": [2, 4, 8], "/=": [0.5, 1, 2],
            "**=": [1, 4, 16]}[op]
    np.testing.assert_array_equal(alias.numpy(), want)
    assert x._data is held and x._version == 1


def test_methods_change_in_place_and_return_the_tensor():
    x = ta.tensor([1.0, -2.0, 3.0])
    assert x.add_(1.0) is x and x.sub_(ta.tensor([1.0, 1.0, 1.0]), alpha=2) is x
    np.testing.assert_array_equal(x.numpy(), [0.0, -3.0, 2.0])
    x.mul_(2.0).div_(4.0).clamp_(min=-1.0, max=0.5)
    np.testing.assert_array_equal(x.numpy(), [0.0, -1.0, 0.5])
    x.fill_(7.0)
    np.testing.assert_array_equal(x.numpy(), [7.0, 7.0, 7.0])
    x.zero_()
    np.testing.assert_array_equal(x.numpy(), [0.0, 0.0, 0.0])
    x.copy_(ta.tensor([1.0, 2.0, 3.0], dtype=ta.float64))  # cast into x's dtype
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])
    assert x.dtype == np.float32 and x._version == 8
    ta.manual_seed(1)
    y = ta.zeros(4000)
    y.normal_(2.0, 0.5)
    assert abs(float(y.numpy().mean()) - 2.0) < 0.05 and abs(float(y.numpy().std()) - 0.5) < 0.05
    y.uniform_(-1.0, 3.0)
    assert y.numpy().min() >= -1.0 and y.numpy().max() < 3.0 and abs(y.numpy().mean() - 1) < 0.1


def test_bool_and_int_in_place_bit_ops():
    m = ta.tensor([True, False, True])
    m &= ta.tensor([True, True, False])
    np.testing.assert_array_equal(m.numpy(), [True, False, False])
    m |= ta.tensor([False, True, False])
    np.testing.assert_array_equal(m.numpy(), [True, True, False])
    with pytest.raises(ta.DTypeError, match=r"\|=.*int64.*bool tensor"):
        m |= ta.tensor([1, 0, 0])


def test_floordiv_mod_and_shift_assignments_change_the_same_tensor_as_torch():
    a = ta.tensor([5.0, 7.0])
    alias, held = a.detach(), a._data  # shares a's memory
    a //= 2  # rebound `a` to a new tensor before: the alias kept [5.0, 7.0]
    a %= 2
    assert alias.tolist() == a.tolist() == [0.0, 1.0]  # torch: [0.0, 1.0] for both
    assert a._data is held and a._version == 2
    i = ta.tensor([5, -7])
    j = i
    i <<= 1
    assert j.tolist() == [10, -14]
    i >>= ta.tensor([2, 2])
    assert j is i and j.tolist() == [2, -4] and i._version == 2  # torch's arithmetic shift
    m = ta.tensor([5, -7]) % ta.tensor([3, 3])
    m //= -2
    assert m.tolist() == [-1, -1]
    f = ta.tensor([1.0, 2.0])
    with pytest.raises(ta.DTypeError, match=r"<<=: takes integer or bool tensors, got float32"):
        f <<= 1  # torch: "lshift_cpu" not implemented for 'Float'
    with pytest.raises(ta.DTypeError, match=r"floor_divide_: the result is float32.*int64"):
        i //= 2.5  # torch: result type Float can't be cast to the desired output type Long
    assert f.tolist() == [1.0, 2.0] and i.tolist() == [2, -4]


def test_floordiv_and_mod_assignments_on_a_leaf_that_requires_grad_are_refused():
    w = leaf([5.0, 7.0])
    for change in (lambda: w.__ifloordiv__(2), lambda: w.__imod__(2),
                   lambda: w.floor_divide_(2), lambda: w.remainder_(2), lambda: w.tan_(),
                   lambda: w.atan2_(ta.ones(2, dtype=ta.float64)), lambda: w.eq_(5.0)):
        with pytest.raises(ta.GraphError, match=r"leaf that requires grad.*no_grad\(\)"):
            change()  # torch: a leaf Variable that requires grad is being used in an in-place
    assert w.tolist() == [5.0, 7.0] and w.is_leaf and w._version == 0
    with ta.no_grad():
        w //= 2
    assert w.tolist() == [2.0, 3.0] and w.is_leaf


def _forms_base(lib, kind):
    values = {"unit": [[0.3, -0.6, 0.5], [0.9, -0.1, 0.0]],
              "pos": [[0.3, 1.6, 2.5], [0.9, 4.1, 1.0]],
              "big": [[1.3, 1.6, 2.5], [1.9, 4.1, 1.0]],
              "int": [[5, -7, 12], [0, 3, -1]]}[kind]
    return lib.tensor(values, dtype=lib.int64 if kind == "int" else lib.float64)


IN_PLACE_FORMS = {  # name: (kind of self, lambda lib: args), for x.name_(*args) as torch
    **{n: ("unit", lambda lib: ()) for n in [
        "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "atanh", "exp2", "erf", "frac",
        "arcsin", "arccos", "arctan", "arcsinh", "arctanh", "fix", "deg2rad", "rad2deg", "sinc",
        "round", "nan_to_num", "logical_not"]},
    **{n: ("pos", lambda lib: ()) for n in ["log2", "log10"]},
    **{n: ("big", lambda lib: ()) for n in ["acosh", "arccosh"]},
    **{n: ("unit", lambda lib: (0.3,)) for n in [
        "floor_divide", "remainder", "fmod", "divide", "multiply", "subtract", "true_divide",
        "copysign", "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less",
        "less_equal", "not_equal"]},
    **{n: ("unit", lambda lib: (lib.tensor([[0.5, -0.6, 0.0], [2.0, 0.0, 1.0]],
                                           dtype=lib.float64),)) for n in [
        "atan2", "arctan2", "hypot", "logical_and", "logical_or", "logical_xor", "eq", "lt"]},
    "xlogy": ("unit", lambda lib: (2.0,)),
    "float_power": ("unit", lambda lib: (2,)),
    "cumsum": ("unit", lambda lib: (1,)),
    "cumprod": ("unit", lambda lib: (0,)),
    "addmm": ("unit", lambda lib: (lib.ones(2, 4, dtype=lib.float64),
                                   lib.ones(4, 3, dtype=lib.float64) / 2)),
    "addr": ("unit", lambda lib: (lib.tensor([1.0, 2.0], dtype=lib.float64),
                                  lib.tensor([1.0, -1.0, 3.0], dtype=lib.float64))),
    "addbmm": ("unit", lambda lib: (lib.ones(5, 2, 4, dtype=lib.float64),
                                    lib.ones(5, 4, 3, dtype=lib.float64))),
    **{n: ("int", lambda lib: (lib.tensor([[3, 3, 6], [1, 1, 2]]),)) for n in [
        "bitwise_and", "bitwise_or", "bitwise_xor"]},
    **{n: ("int", lambda lib: (2,)) for n in ["bitwise_left_shift", "bitwise_right_shift"]},
    "bitwise_not": ("int", lambda lib: ()),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE_FORMS))
def test_in_place_method_forms_write_into_the_tensor_as_torch(name):
    torch = _torch()
    kind, args = IN_PLACE_FORMS[name]
    x, tx = _forms_base(ta, kind), _forms_base(torch, kind)
    alias = x.detach()
    assert getattr(x, name + "_")(*args(ta)) is x  # AttributeError before
    getattr(tx, name + "_")(*args(torch))
    assert str(x.dtype) == str(tx.dtype).replace("torch.", "") and x._version == 1
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(alias.numpy(), x.numpy())


def test_in_place_forms_refuse_what_torch_refuses():
    with pytest.raises(ta.DTypeError, match="float_power_: .*float32.*float64"):
        ta.ones(2).float_power_(2)  # torch: the base ... has dtype Float but ... requires Double
    with pytest.raises(ta.DTypeError, match=r"bitwise_left_shift_: .*float32"):
        ta.ones(2).bitwise_left_shift_(1)
    with pytest.raises(ta.DTypeError, match=r"floor_divide_: the result is float32.*int64"):
        ta.tensor([5, 7]).floor_divide_(2.5)


RECORDED_FORMS = {
    "h.tan_()": lambda h, b: h.tan_(),
    "h.atan2_(b)": lambda h, b: h.atan2_(b),
    "h.hypot_(b)": lambda h, b: h.hypot_(b),
    "h.xlogy_(b)": lambda h, b: h.xlogy_(b),
    "h.cumsum_(1)": lambda h, b: h.cumsum_(1),
    "h.addmm_(b.T, b)": lambda h, b: h.addmm_(b[:, :3].T, b, beta=0.5, alpha=2.0),
    "h.copysign_(b - 1)": lambda h, b: h.copysign_(b - 1.0),
    "h %= 0.7": lambda h, b: h.__imod__(0.7),
}


@pytest.mark.parametrize("what", sorted(RECORDED_FORMS))
def test_recorded_in_place_forms_backpropagate_as_torch(what):
    torch = _torch()
    rng = np.random.default_rng(4)
    av, bv = rng.standard_normal((4, 4)), rng.uniform(0.5, 2.0, (3, 4))
    av = av[:3]
    a, b = leaf(av), leaf(bv)
    ta_, tb = (torch.tensor(v, requires_grad=True) for v in (av, bv))
    h, th = a.exp() * 1.0, ta_.exp() * 1.0
    RECORDED_FORMS[what](h, b)
    RECORDED_FORMS[what](th, tb)
    (h * h).sum().backward()
    (th * th).sum().backward()
    np.testing.assert_allclose(h.numpy(), th.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), ta_.grad.numpy(), rtol=1e-10, atol=1e-12)
    if tb.grad is not None:
        np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_views_share_memory_and_version():
    x = ta.zeros(2, 3)
    row = x[0]
    row += 1.0  # through the view, as in torch
    x.T[:, 1] = 5.0
    np.testing.assert_array_equal(x.numpy(), [[1, 1, 1], [5, 5, 5]])
    assert x._version == row._version == 2
    y = x.reshape(6)
    y[0] = -1.0
    assert x.numpy()[0, 0] == -1.0 and x._version == 3
    d = x.detach()
    d.zero_()
    assert x.numpy().sum() == 0 and x._version == 4


# ---- refused, as torch refuses -------------------------------------------------------------------


def test_in_place_on_a_leaf_that_requires_grad_needs_no_grad():
    w = leaf([1.0, 2.0])
    for change in (lambda: w.__iadd__(1.0), lambda: w.mul_(2.0), lambda: w.__setitem__(0, 3.0),
                   lambda: w.zero_()):
        with pytest.raises(ta.GraphError, match=r"leaf that requires grad.*no_grad\(\)"):
            change()
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])  # nothing changed
    assert w._version == 0


def test_in_place_dtype_and_shape_rules():
    i = ta.tensor([1, 2, 3])
    i += 2  # int stays int
    np.testing.assert_array_equal(i.numpy(), [3, 4, 5])
    with pytest.raises(ta.DTypeError, match=r"add_: the result is float32.*int64 tensor"):
        i += 0.5
    with pytest.raises(ta.DTypeError, match=r"div_: the result is float32"):
        i /= 2  # true division gives floats, as in torch
    f = ta.zeros(3)
    f += ta.ones(3, dtype=ta.float64)  # float64 into float32: same category, allowed
    assert f.dtype == np.float32
    with pytest.raises(ta.ShapeError, match=r"add_: the result has shape \(2, 3\).*\(3,\)"):
        f += ta.ones(2, 3)
    e = ta.ones(3).expand(2, 3)
    with pytest.raises(ta.GraphError, match="read-only"):
        e += 1.0
    np.testing.assert_array_equal(i.numpy(), [3, 4, 5])


def test_recorded_in_place_on_a_tensor_with_a_live_view_is_recorded_as_torch():
    """The view follows the change (its history is rewritten: tests/core/test_inplace_views.py);
    a detach() with a graph of its own, which would not see it, is still refused."""
    a = leaf([[1.0, 2.0], [3.0, 4.0]])
    h = a * 1.0
    view = h[0]
    h += 1.0
    h[0] = h[0] * 3.0
    (h.sum() + view.sum()).backward()  # view is h[0]: 3 * (a[0] + 1)
    np.testing.assert_array_equal(a.grad.numpy(), [[6.0, 6.0], [1.0, 1.0]])
    h = a * 1.0
    alias = h.detach().requires_grad_()
    with pytest.raises(ta.GraphError, match="shares its memory with another live tensor"):
        h += 1.0
    del alias  # no live alias left: recorded as torch records it
    h += 1.0


# ---- the version check ---------------------------------------------------------------------------


def test_changing_a_saved_tensor_makes_backward_refuse():
    """The issue's case: y = (w*c).sum(); c[0] = 100; y.backward() gave w.grad = [100, 2, 3]."""
    w = leaf([1.0, 1.0, 1.0])
    c = ta.tensor([1.0, 2.0, 3.0], dtype=ta.float64)
    y = (w * c).sum()
    c[0] = 100
    with pytest.raises(ta.GraphError, match=r"mul saved its input 1 \(shape \(3,\)\).*changed "
                       r"in place.*version 1.*version 0.*clone"):
        y.backward()
    assert w.grad is None


def test_changing_the_targets_after_cross_entropy_makes_backward_refuse():
    """cross_entropy keeps the target tensor itself when every target is a class: a target
    changed in place afterwards would move the gradient's -1 (torch refuses too)."""
    x = leaf(np.zeros((3, 4)))
    target = ta.tensor(np.array([0, 1, 2]))
    loss = ta.functional.cross_entropy(x, target)
    target[0] = 3
    with pytest.raises(ta.GraphError, match=r"cross_entropy saved its input 1 \(shape \(3,\)\)"):
        loss.backward()


# (forward from x, change made under no_grad afterwards): the same code runs in both libraries
SCENARIOS = {
    "exp saves its output": (lambda x: x.exp(), lambda x, out: out.__iadd__(1.0)),
    "sigmoid output scaled": (lambda x: x.sigmoid(), lambda x, out: out.mul_(2.0)),
    "softmax output": (lambda x: x.softmax(-1), lambda x, out: out.__setitem__(0, 1.0)),
    "x * x, x changed via detach": (lambda x: x * x, lambda x, out: x.detach().zero_()),
    "x * 2, x changed (2 is all mul keeps)": (lambda x: x * 2.0,
                                              lambda x, out: x.detach().zero_()),
    "x / 3, x changed": (lambda x: x / 3.0, lambda x, out: x.detach().zero_()),
    "3 / x, x changed": (lambda x: 3.0 / x, lambda x, out: x.detach().zero_()),
    "matmul of two views of x": (lambda x: x.reshape(3, 1) @ x.reshape(1, 3),
                                 lambda x, out: x.detach()[0:2].zero_()),
    "x + 1, x changed": (lambda x: x + 1.0, lambda x, out: x.detach().zero_()),
    "tanh keeps only its output": (lambda x: x.tanh(), lambda x, out: x.detach().zero_()),
    "log keeps x, changed through a view": (lambda x: x.log(),
                                            lambda x, out: x.detach()[1:].mul_(2.0)),
    "a slice of x, x changed": (lambda x: x[0:2], lambda x, out: x.detach().zero_()),
}


@pytest.mark.parametrize("what", sorted(SCENARIOS))
def test_backward_refuses_exactly_when_torch_does(what):
    torch = _torch()
    make, change = SCENARIOS[what]
    results = []
    for lib, x in ((ta, leaf([0.5, 1.0, 2.0])),
                   (torch, torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64,
                                        requires_grad=True))):
        out = make(x)
        with lib.no_grad():
            change(x, out)
        try:
            (out * out).sum().backward()
            results.append(("ok", x.grad.numpy().tolist()))
        except (ta.GraphError, RuntimeError) as e:
            assert lib is ta or "modified by an inplace operation" in str(e)
            results.append(("refused", None))
    assert results[0][0] == results[1][0], results
    if results[0][0] == "ok":
        np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12)


@pytest.mark.parametrize("make", ["tanh", "exp", "sigmoid", "sqrt", "softmax"])
def test_a_recorded_in_place_op_on_a_saved_output_refuses_as_in_torch(make):
    """The op that made h saved h itself; h.add_(1) recorded in the graph overwrites it, so the
    gradient through that op would use the new values: both libraries refuse in backward."""
    torch = _torch()
    outcomes = []
    for lib in (ta, torch):
        x = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        h = getattr(x, make)(-1) if make == "softmax" else getattr(x, make)()
        h.add_(1.0)
        try:
            (h * 3.0).sum().backward()
            outcomes.append("ok")
        except (ta.GraphError, RuntimeError) as e:
            assert lib is torch or f"{make} saved its output" in str(e)
            outcomes.append("refused")
    assert outcomes == ["refused", "refused"]


def test_an_output_changed_before_its_first_use_in_no_grad_counts_once():
    """An op's saved output gets its version counter only when first changed or viewed (the
    counter is made on first use): a view made before the change still sees it."""
    x = leaf([0.5, 1.0])
    h = x.exp()
    v = h.reshape(2, 1)  # the counter is made here, and handed to exp's node
    with ta.no_grad():
        v.mul_(2.0)
    with pytest.raises(ta.GraphError, match="exp saved its output"):
        h.sum().backward()


def test_an_unsaved_input_may_change_as_in_torch():
    x = leaf([1.0, 2.0])
    y = (x + 1.0).sum()  # add saves nothing
    with ta.no_grad():
        x += 5.0
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_an_input_saved_only_as_a_promoted_copy_may_change():
    # float32 * float64: mul keeps float64 copies of x, so a later change to x leaves its
    # gradient in y right (the version check follows the memory the op kept, not the input)
    x = leaf([1.0, 2.0]).to(ta.float32).detach().requires_grad_()
    y = leaf([3.0, 4.0])
    z = (x * y).sum()
    with ta.no_grad():
        x += 5.0
    z.backward()
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    w = leaf([1.0, 2.0])
    z = (w * y).sum()  # the same dtype: w itself is kept, so the change is refused
    with ta.no_grad():
        w += 5.0
    with pytest.raises(ta.GraphError, match="changed in place"):
        z.backward()


def test_optimizer_step_counts_as_an_in_place_change():
    w = ta.nn.Parameter(ta.tensor([1.0, 2.0]))
    opt = ta.optim.SGD([w], lr=0.1)
    loss = (w * w).sum()
    loss.backward(retain_graph=True)
    opt.step()
    with pytest.raises(ta.GraphError, match="mul saved"):
        loss.backward()  # torch: "modified by an inplace operation" as well


def test_every_op_declares_what_its_saved_arrays_alias():
    """`saves` ({input: place in saved}), `saves_out` and `view` on each op name every array of
    `saved` that shares memory with an input or the output (else the version check would miss
    a change)."""
    for name, opdef in REGISTRY.items():
        for inputs, params in REGISTRY[name].samples:
            rng = np.random.default_rng(0)
            xs = S.materialize(inputs, rng, lambda v, rg: ta.tensor(v, requires_grad=rg))
            out = apply(opdef, *xs, **params)
            saved = out._node.saved
            for j, item in enumerate(saved):
                if not isinstance(item, np.ndarray) or item.size == 0:
                    continue
                for i, x in enumerate(xs):
                    if isinstance(x, ta.Tensor) and np.shares_memory(item, x._data):
                        assert opdef.saves.get(i) == j, f"{name}: saved[{j}] is input {i}'s"
                if np.shares_memory(item, out._data):
                    assert opdef.saves_out == j, f"{name}: saved[{j}] is the output"
            if isinstance(out._data, np.ndarray) and isinstance(xs[0], ta.Tensor) and \
                    np.shares_memory(out._data, xs[0]._data):
                assert opdef.view, f"{name}: the output is a view of input 0, not declared"
                assert out._version_counter is xs[0]._version_counter


FRESH = sorted(name for name, opdef in REGISTRY.items() if opdef.fresh)


def test_the_hot_ops_say_their_gradients_are_fresh():
    """Backward adds into, and hands to .grad without a copy, only what these ops return."""
    assert {"linear", "matmul", "layer_norm", "gelu", "embedding", "scaled_masked_softmax",
            "cross_entropy"} <= set(FRESH)
    assert "add" not in FRESH and "reshape" not in FRESH  # g itself, a view of g


@pytest.mark.parametrize("name", FRESH)
def test_an_op_that_says_fresh_returns_gradients_of_their_own(name):
    """`fresh`: every gradient the VJP returns (at least 1-D) is a writeable array that shares no
    memory with g, the inputs, the output, the saved arrays or another gradient, on every
    sample, so backward may add into it in place and give it to a leaf's .grad uncopied."""
    opdef = REGISTRY[name]
    checked = 0
    for k, (inputs, params) in enumerate(opdef.samples):
        rng = np.random.default_rng(k)
        xs = S.materialize(inputs, rng, lambda v, rg: ta.tensor(v, requires_grad=rg))
        out = apply(opdef, *xs, **params)
        g = rng.standard_normal(out.shape).astype(out.dtype)
        others = [g, out._data, *(x._data for x in xs if isinstance(x, ta.Tensor)),
                  *(a for a in out._node.saved if isinstance(a, np.ndarray))]
        grads = opdef.vjp(out.backend, g, out._node.saved, **params)
        arrays = [gx for gx in grads if getattr(gx, "ndim", 0) > 0]  # (0-d: backward copies)
        checked += len(arrays)
        for i, gx in enumerate(arrays):
            where = f"{name} sample {k}, gradient {i}"
            assert isinstance(gx, np.ndarray) and gx.flags.writeable, where
            for other in others + arrays[:i]:
                assert not np.shares_memory(gx, other), f"{where} shares memory"
    assert checked, f"{name}: no sample gives a gradient to check"


def test_a_leaf_takes_a_fresh_gradient_without_a_copy_and_it_stays_its_own(monkeypatch):
    """linear's gw becomes weight.grad as it is (no copy); bias and weight .grads then change
    alone, a second backward adds into them, and the graph's retained arrays are untouched."""
    made = []
    vjp = REGISTRY["linear"].vjp
    monkeypatch.setattr(REGISTRY["linear"], "vjp",
                        lambda *a, **k: made.append(vjp(*a, **k)) or made[-1])
    ta.manual_seed(0)
    layer = ta.nn.Linear(3, 2)
    x = ta.randn(4, 3, requires_grad=True)
    loss = (layer(x) * layer(x)).sum()  # two parts for each parameter: summed in place
    loss.backward(retain_graph=True)
    assert len(made) == 2
    assert np.shares_memory(layer.weight.grad.numpy(), made[0][1]) or \
        np.shares_memory(layer.weight.grad.numpy(), made[1][1])
    want = {n: p.grad.numpy().copy() for n, p in layer.named_parameters()}
    want["x"] = x.grad.numpy().copy()
    layer.weight.grad.data[...] = 7.0  # the user's .grad: nothing else sees the change
    np.testing.assert_array_equal(layer.bias.grad.numpy(), want["bias"])
    np.testing.assert_array_equal(x.grad.numpy(), want["x"])
    layer.zero_grad()
    x.grad = None
    loss.backward()  # the retained graph gives the same gradients again
    for n, p in [*layer.named_parameters(), ("x", x)]:
        np.testing.assert_allclose(p.grad.numpy(), want[n], rtol=1e-12, err_msg=n)


# ---- recorded in-place ops on non-leaf tensors: torch's gradients ----------------------------


def _torch():
    return pytest.importorskip("torch")


RECORDED = {
    "h += b": lambda h, b: h.__iadd__(b),
    "h -= b": lambda h, b: h.__isub__(b),
    "h *= b": lambda h, b: h.__imul__(b),
    "h /= b": lambda h, b: h.__itruediv__(b),
    "h **= 2": lambda h, b: h.__ipow__(2.0),
    "h.clamp_": lambda h, b: h.clamp_(-0.5, 0.5),
    "h[1] = b[0] * 3": lambda h, b: h.__setitem__(1, b[0] * 3.0),
    "h[:, 0] = b[:, 1]": lambda h, b: h.__setitem__((slice(None), 0), b[:, 1]),
    "h[0] += b[1]": lambda h, b: h.__setitem__(0, h[0] + b[1]),
    "h.copy_(b)": lambda h, b: h.copy_(b),
    "h.mul_(b * 1)": lambda h, b: h.mul_(b * 1.0),
}


@pytest.mark.parametrize("what", sorted(RECORDED))
def test_recorded_in_place_ops_match_torch(what):
    torch = _torch()
    rng = np.random.default_rng(3)
    av, bv = rng.standard_normal((3, 4)), rng.uniform(0.5, 2.0, (3, 4))
    a, b = leaf(av), leaf(bv)
    h = a.exp() * 1.0  # (not a.tanh(): tanh keeps its output, so both refuse to change it)
    RECORDED[what](h, b)
    (h * h).sum().backward()
    ta_, tb = (torch.tensor(v, requires_grad=True) for v in (av, bv))
    th = ta_.exp() * 1.0
    RECORDED[what](th, tb)
    (th * th).sum().backward()
    np.testing.assert_allclose(h.numpy(), th.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), ta_.grad.numpy(), rtol=1e-10, atol=1e-12)
    if tb.grad is None:
        assert b.grad is None or not b.grad.numpy().any()
    else:
        np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert h._version == th._version


def test_x_mul_x_in_place_is_refused_in_backward_as_in_torch():
    torch = _torch()
    for a in (leaf([1.0, 2.0]), torch.tensor([1.0, 2.0], requires_grad=True)):
        h = a * 1.0
        h.mul_(h)  # mul keeps its second input, h, which this very change overwrites
        with pytest.raises((ta.GraphError, RuntimeError)):
            h.sum().backward()


def test_recorded_in_place_gradchecks():
    def fn(a, b):
        h = a * 1.0
        h *= b
        h[0] = h[0] + b[1]
        h -= a.exp()
        return h

    assert ta.gradcheck(fn, [leaf(np.random.default_rng(1).standard_normal((2, 3))),
                             leaf(np.random.default_rng(2).standard_normal((2, 3)))])


def test_setitem_into_a_plain_tensor_builds_a_graph():
    """out = zeros(...); out[i] = f(x): out becomes part of the graph, as in torch."""
    x = leaf([1.0, 2.0, 3.0])
    out = ta.zeros(2, 3, dtype=ta.float64)
    out[1] = x * 2.0
    assert out.requires_grad and not out.is_leaf
    (out * out).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 16.0, 24.0])


# ---- in place, shape only: squeeze_, unsqueeze_, t_, transpose_ ----------------------------------

SHAPE_FORMS = {  # what: (the starting shape, x -> x.name_(...))
    "squeeze_()": ((1, 3, 1), lambda x: x.squeeze_()),
    "squeeze_(0)": ((1, 3, 1), lambda x: x.squeeze_(0)),
    "squeeze_(dim=1)": ((1, 3, 1), lambda x: x.squeeze_(dim=1)),
    "squeeze_((0, 2))": ((1, 3, 1), lambda x: x.squeeze_((0, 2))),
    "unsqueeze_(1)": ((2, 3), lambda x: x.unsqueeze_(1)),
    "unsqueeze_(-1)": ((2, 3), lambda x: x.unsqueeze_(-1)),
    "t_() 2-D": ((2, 3), lambda x: x.t_()),
    "t_() 1-D": ((3,), lambda x: x.t_()),
    "transpose_(0, 2)": ((2, 3, 4), lambda x: x.transpose_(0, 2)),
    "transpose_(-1, 0)": ((2, 3), lambda x: x.transpose_(-1, 0)),
}


@pytest.mark.parametrize("what", sorted(SHAPE_FORMS))
def test_in_place_shape_methods_change_the_tensor_itself_as_torch(what):
    """x.t_() is x with another shape over the same memory (torch's in-place view ops): the
    same object back, its version moved on, a view made before keeps its own shape and still
    sees the values written through x. (These methods were missing: AttributeError.)"""
    torch = _torch()
    shape, change = SHAPE_FORMS[what]
    values = np.arange(float(np.prod(shape))).reshape(shape)
    x, tx = ta.tensor(values.copy()), torch.tensor(values.copy())
    alias = x.detach()
    assert change(x) is x
    change(tx)
    assert x.shape == tuple(tx.shape) and x._version == tx._version == 1
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    assert alias.shape == shape and alias._version == 1
    x[(0,) * x.ndim] = -1.0
    assert alias.numpy().flat[0] == -1.0


def test_recorded_in_place_shape_methods_backpropagate_as_torch():
    torch = _torch()
    av = np.random.default_rng(5).standard_normal((2, 3))
    w = np.arange(6.0).reshape(1, 3, 2, 1)
    grads = []
    for lib, a in ((ta, leaf(av)), (torch, torch.tensor(av, requires_grad=True))):
        h = a.exp() * 1.0  # (2, 3), recorded
        h.t_()  # (3, 2)
        h.unsqueeze_(0).unsqueeze_(-1)  # (1, 3, 2, 1)
        h.transpose_(0, 3).squeeze_(0)  # (3, 2, 1)
        (h * lib.tensor(w[0], dtype=lib.float64)).sum().backward()
        assert tuple(h.shape) == (3, 2, 1) and not h.is_leaf and h.requires_grad
        grads.append(a.grad.numpy())
    np.testing.assert_allclose(*grads, rtol=1e-12)


def test_in_place_shape_methods_follow_the_in_place_rules():
    """A leaf that requires grad is refused while grad is recorded and changed under no_grad
    (torch's rule); a graph that saved the tensor refuses it in backward (its version moved);
    a bad dim is an error that names the method."""
    torch = _torch()
    tw, w = torch.ones(1, 2, requires_grad=True), leaf(np.ones((1, 2)))
    for name, args in (("squeeze_", ()), ("unsqueeze_", (0,)), ("t_", ()),
                       ("transpose_", (0, 1))):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            getattr(tw, name)(*args)
        with pytest.raises(ta.GraphError, match=rf"^{name}: .*leaf that requires grad.*no_grad"):
            getattr(w, name)(*args)
    assert w.shape == (1, 2) and w._version == 0
    with ta.no_grad():
        w.t_()
    assert w.shape == (2, 1) and w.is_leaf and w._version == 1
    (w * 3.0).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[3.0], [3.0]])

    h = leaf([[1.0, 2.0]]) * 1.0
    z = h * h  # mul keeps h
    h.t_()
    with pytest.raises(ta.GraphError, match="changed"):
        z.sum().backward()
    # under no_grad, a tensor made by a recorded op would keep a node of the old shape: torch's
    # backward then fails on the gradient's shape (sends a square one back untransposed), and
    # tinyattn's would reshape it silently, so the change is refused up front
    with ta.no_grad(), pytest.raises(ta.GraphError, match=r"^t_: .*made by a recorded op"):
        h.t_()
    assert h.shape == (2, 1)

    x = ta.zeros(2, 3, 4)
    with pytest.raises(ta.ShapeError, match=r"^t_: .*at most 2 dims.*\(2, 3, 4\)"):
        x.t_()
    with pytest.raises(ta.DimError, match=r"^transpose_: dim 3 is out of range"):
        x.transpose_(0, 3)
    with pytest.raises(ta.DimError, match=r"^unsqueeze_: dim 4 is out of range"):
        x.unsqueeze_(4)
    with pytest.raises(ta.DimError, match=r"^squeeze_: dim -4 is out of range"):
        x.squeeze_(-4)
    assert x.shape == (2, 3, 4) and x._version == 0


# ---- threads -------------------------------------------------------------------------------------


def test_two_threads_accumulate_into_one_leaf_without_losing_updates():
    w = leaf(np.ones(64))
    n = 200

    def work():
        for _ in range(n):
            (w * 2.0).sum().backward()

    _in_two_threads(work)
    np.testing.assert_array_equal(w.grad.numpy(), np.full(64, 2.0 * 2 * n))


def test_the_first_gradient_of_a_shared_leaf_is_not_lost_to_a_thread_switch(monkeypatch):
    """Both threads find .grad empty at once; the lock makes the second add to the first's
    instead of overwriting it. A thread switch is forced inside the update (a slow wrap), so
    without the lock this loses a gradient every time."""
    import time

    import tinyattn.autograd as autograd

    real = autograd.Tensor

    class SlowWrap(real):
        @classmethod
        def _wrap(cls, data, be):
            time.sleep(0.02)  # lets the other thread run here
            return real._wrap(data, be)

    monkeypatch.setattr(autograd, "Tensor", SlowWrap)
    for _ in range(3):
        w = leaf(np.ones(4))
        start = threading.Barrier(2)

        def work(w=w, start=start):
            start.wait()
            (w * 2.0).sum().backward()

        _in_two_threads(work)
        np.testing.assert_array_equal(w.grad.numpy(), np.full(4, 4.0))


def _in_two_threads(work):
    """Run work() in two threads at once and wait for both."""
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_the_version_refusal_ends_with_what_to_do_instead():
    x = leaf([1.0, 2.0])
    y = x.exp()
    z = y.sum()
    with ta.no_grad():
        y.mul_(2.0)  # exp saved its output
    with pytest.raises(ta.GraphError) as caught:
        z.backward()
    message = str(caught.value)
    assert message.startswith("backward: exp saved its output (shape (2,)) to compute")
    assert message.endswith("; change a .clone() of it instead, or change it after backward()")
