"""Tests for the seed-3 mutation survivors of replay (ta.capture): a watched global that
changes type but not value (2 to 2.0 or True) is a change, a helper function that fn calls by
name is watched too (its globals), and a module's list holding a fresh float of the same value
is no change (the step keeps replaying)."""

import numpy as np

import tinyattn as ta


def _functions(source, **names):
    """The functions `source` defines, in a namespace of their own holding `names` (their
    globals, which the test changes between calls)."""
    ns = dict(names)
    exec(source, ns)  # noqa: S102 - the tests' own source
    return ns


def _warm(cap, *args):
    for _ in range(3):
        cap(*args)
    assert cap.state == "replaying"


def test_a_global_that_changes_type_but_not_value_is_a_change():
    w = ta.tensor([1.0, 2.0], requires_grad=True)
    ns = _functions("def f(x):\n    return (x * C).sum() + (w * 0.0).sum()\n", C=2, w=w)
    x = ta.tensor([1, 2])
    cap = ta.capture(ns["f"])
    _warm(cap, x)
    assert cap(x).dtype == ta.float32
    for new in (2.0, True):
        ns["C"] = new
        out = cap(x)
        assert cap.state == "recording", new  # (recorded again: 2 == 2.0 == True, yet others)
        assert out.item() == ns["f"](x).item()


def test_a_helper_that_fn_calls_by_name_is_watched():
    w = ta.tensor([1.0, 2.0], requires_grad=True)
    ns = _functions("def helper(x):\n    return x + OFFSET\n"
                    "def f(x):\n    return (helper(x) * w).sum()\n", OFFSET=1.0, w=w)
    x = ta.tensor([1.0, 2.0])
    cap = ta.capture(ns["f"])
    _warm(cap, x)
    assert cap(x).item() == 8.0
    ns["OFFSET"] = 5.0  # a global of the helper, not of f
    assert cap(x).item() == 20.0 and cap.state == "recording"


def test_a_fresh_float_of_the_same_value_in_a_modules_list_is_no_change():
    class Scaled(ta.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ta.nn.Linear(2, 1)
            self.scales = [0.5]

        def forward(self, x):
            return (self.lin(x) * self.scales[0]).sum()

    ta.manual_seed(0)
    m = Scaled()
    cap = ta.capture(lambda x: m(x))
    x = ta.tensor([[1.0, 2.0]])
    states = []
    for _ in range(5):
        m.scales[0] = float("0." + "5")  # a new float object each call, equal to 0.5
        out = cap(x)
        states.append(cap.state)
    assert states[2:] == ["replaying"] * 3
    np.testing.assert_allclose(out.item(), m(x).item(), rtol=1e-6)
    m.scales[0] = 0.25  # (another value: a change)
    cap(x)
    assert cap.state == "recording"
