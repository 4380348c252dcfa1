"""ta.set_printoptions and ta.get_printoptions against torch's: each option's effect on a
tensor's repr (and str) compared with torch's repr of the same values under the same options,
the options' state (torch._tensor_str.get_printoptions), and bad options refused by name."""

import math
import re

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")
from torch._tensor_str import get_printoptions as torch_get_printoptions  # noqa: E402


@pytest.fixture(autouse=True)
def _default_options():
    """Each test starts and ends with both libraries' default options."""
    ta.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")
    yield
    ta.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


def _arrays():
    rs = np.random.RandomState(0)
    return {
        "small": np.array([1.12345678, -2.5, 3.0], np.float32),
        "whole": np.array([1.0, -2.0, 300.0], np.float32),
        "tiny": np.array([1e-5, 0.5, 2.0], np.float32),
        "huge": np.array([1.5e9, 2.0, -3.25], np.float64),
        "nonfinite": np.array([np.nan, np.inf, -np.inf, 0.0, -1.25], np.float32),
        "neg_zero": np.array([-0.0, 1.0, 2.0], np.float32),
        "scalar": np.array(3.14159265, np.float32),
        "ints": rs.randint(-50, 1000, 23),
        "bools": rs.rand(9) > 0.5,
        "matrix": rs.randn(4, 6).astype(np.float32),
        "cube": rs.randn(2, 3, 4).astype(np.float64),
        "long": rs.randn(30).astype(np.float32),
        "big": rs.randn(40, 30).astype(np.float32),
        "big_ints": np.arange(1500).reshape(3, 500),
        "half": np.array([1e-5, 1.0, 1060.0], np.float16),
        "uint8": np.array([[1, 200], [3, 4]], np.uint8),
        "empty": np.zeros((2, 0), np.float32),
    }


_ARRAYS = _arrays()

_OPTIONS = [
    {},
    {"precision": 2},
    {"precision": 0},
    {"precision": 8},
    {"sci_mode": True},
    {"sci_mode": False},
    {"precision": 3, "sci_mode": True},
    {"threshold": 5},
    {"threshold": 5, "edgeitems": 1},
    {"threshold": 10, "edgeitems": 2},
    {"threshold": 5, "edgeitems": 0},
    {"edgeitems": 0},
    {"linewidth": 40},
    {"linewidth": 20, "precision": 6},
    {"profile": "short"},
    {"profile": "full"},
    {"profile": "default"},
    {"profile": "short", "precision": 5, "edgeitems": 1, "threshold": 20},
]


def _assert_same_text(got, want):
    """tinyattn's text is torch's, dtypes named float16 where torch says torch.float16. Those
    six letters fewer can keep a suffix on the line torch wraps it off, so where the text names
    a dtype the suffixes' line breaks are compared apart from the rest (exactly elsewhere)."""
    want = want.replace("dtype=torch.", "dtype=")
    if "dtype=" in want:
        suffix_break = re.compile(r",\n *(?=(dtype|requires_grad|grad_fn|size)=)")
        got, want = suffix_break.sub(", ", got), suffix_break.sub(", ", want)
    assert got == want


def _torch_repr(t):
    return repr(t).replace("dtype=torch.", "dtype=")


@pytest.mark.parametrize("options", _OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in
                                                                   o.items()) or "defaults")
@pytest.mark.parametrize("name", sorted(_ARRAYS))
def test_repr_under_print_options_as_torch(name, options):
    a = _ARRAYS[name]
    ta.set_printoptions(**options)
    torch.set_printoptions(**options)
    got, want = ta.tensor(a), torch.tensor(a)
    _assert_same_text(repr(got), repr(want))
    _assert_same_text(str(got), str(want))


@pytest.mark.parametrize("options", [{}, {"linewidth": 30}, {"precision": 2, "linewidth": 24},
                                     {"threshold": 4, "edgeitems": 1}])
def test_suffixes_wrap_onto_new_lines_as_torch(options):
    """requires_grad=True, grad_fn=<...> and dtype= go onto a line of their own past the width."""
    ta.set_printoptions(**options)
    torch.set_printoptions(**options)
    a = np.linspace(-3, 3, 10).astype(np.float32)  # (the default dtype: no dtype= suffix)
    leaf, want_leaf = ta.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    assert repr(leaf) == repr(want_leaf)
    assert repr(leaf * 2) == repr(want_leaf * 2)
    p, want_p = ta.nn.Parameter(ta.tensor(a)), torch.nn.Parameter(torch.tensor(a))
    assert repr(p) == repr(want_p)
    b = np.linspace(0, 1, 7).astype(np.float16)
    _assert_same_text(repr(ta.tensor(b, requires_grad=True)),
                      repr(torch.tensor(b, requires_grad=True)))


def test_get_printoptions_as_torch_after_each_setting():
    assert ta.get_printoptions() == torch_get_printoptions()
    for options in _OPTIONS + [{"threshold": math.inf}, {"sci_mode": True}, {}]:
        ta.set_printoptions(**options)
        torch.set_printoptions(**options)
        assert ta.get_printoptions() == torch_get_printoptions()


def test_setting_any_option_resets_sci_mode_as_torch():
    """torch's quirk: set_printoptions(precision=2) after sci_mode=True sets sci_mode back to
    None (automatic); tinyattn does the same, so a script prints the same in both."""
    ta.set_printoptions(sci_mode=True)
    torch.set_printoptions(sci_mode=True)
    ta.set_printoptions(precision=2)
    torch.set_printoptions(precision=2)
    assert ta.get_printoptions()["sci_mode"] is None
    a = np.array([1.5, 2.25])
    assert repr(ta.tensor(a)) == _torch_repr(torch.tensor(a)) == "tensor([1.50, 2.25], " \
        "dtype=float64)"


def test_get_printoptions_round_trips_through_set_printoptions():
    ta.set_printoptions(precision=6, threshold=7, edgeitems=2, linewidth=50, sci_mode=False)
    saved = ta.get_printoptions()
    ta.set_printoptions(profile="full")
    assert ta.get_printoptions()["threshold"] == math.inf
    ta.set_printoptions(**saved)
    assert ta.get_printoptions() == saved
    saved["precision"] = 1  # (a copy: changing it leaves the options alone)
    assert ta.get_printoptions()["precision"] == 6


def test_options_change_only_text_not_values():
    a = np.array([1.23456789, 2.0])
    ta.set_printoptions(precision=1)
    torch.set_printoptions(precision=1)
    t = ta.tensor(a)
    assert repr(t) == _torch_repr(torch.tensor(a)) == "tensor([1.2, 2.0], dtype=float64)"
    assert t.tolist() == a.tolist()


@pytest.mark.parametrize("kwargs, error, words", [
    ({"profile": "long"}, ValueError, "profile"),
    ({"precision": -1}, ValueError, "precision"),
    ({"precision": 2.5}, TypeError, "precision"),
    ({"precision": "4"}, TypeError, "precision"),
    ({"threshold": -3}, ValueError, "threshold"),
    ({"threshold": "big"}, TypeError, "threshold"),
    ({"edgeitems": -1}, ValueError, "edgeitems"),
    ({"linewidth": 0}, ValueError, "linewidth"),
    ({"sci_mode": "yes"}, TypeError, "sci_mode"),
])
def test_bad_options_are_refused_by_name_and_change_nothing(kwargs, error, words):
    ta.set_printoptions(precision=3)
    before = ta.get_printoptions()
    with pytest.raises(error, match=f"set_printoptions.*{words}"):
        ta.set_printoptions(**kwargs)
    assert ta.get_printoptions() == before
