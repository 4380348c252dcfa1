"""Subtraction with a bool on either side (a bool tensor or a Python bool) is refused, as
torch refuses it: x - mask computed x minus 0s and 1s without a word, where the mask was
meant to be inverted (~mask) or converted first (mask.int()). Every spelling of a
subtraction goes through the one check: -, -=, sub, sub_, rsub, torch.sub, alpha=."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import DTypeError


def _operands(lib):
    return {"I": lib.tensor([1, 2, 3]), "B": lib.tensor([True, False, True]),
            "F": lib.tensor([1.5, 2.5, 3.5]), "H": lib.tensor([1.5, 2.5, 3.5],
                                                               dtype=lib.float16)}


def _isub(x, y):
    x = x.clone()
    x -= y
    return x


REFUSED = {
    "I - B": lambda v, lib: v["I"] - v["B"], "B - I": lambda v, lib: v["B"] - v["I"],
    "F - B": lambda v, lib: v["F"] - v["B"], "B - F": lambda v, lib: v["B"] - v["F"],
    "H - B": lambda v, lib: v["H"] - v["B"], "B - B": lambda v, lib: v["B"] - v["B"],
    "B - 1": lambda v, lib: v["B"] - 1, "1 - B": lambda v, lib: 1 - v["B"],
    "B - 0.5": lambda v, lib: v["B"] - 0.5, "F - True": lambda v, lib: v["F"] - True,
    "True - F": lambda v, lib: True - v["F"], "I - False": lambda v, lib: v["I"] - False,
    "H - True": lambda v, lib: v["H"] - True,
    "F.sub(B)": lambda v, lib: v["F"].sub(v["B"]),
    "sub(I, B)": lambda v, lib: lib.sub(v["I"], v["B"]),
    "I.sub(B, alpha=2)": lambda v, lib: v["I"].sub(v["B"], alpha=2),
    "F.sub(B, alpha=0.5)": lambda v, lib: v["F"].sub(v["B"], alpha=0.5),
    "F.sub_(B)": lambda v, lib: v["F"].clone().sub_(v["B"]),
    "F -= B": lambda v, lib: _isub(v["F"], v["B"]),
    "rsub(B, 1)": lambda v, lib: lib.rsub(v["B"], 1),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_bool_in_a_subtraction_is_refused(name):
    with pytest.raises(DTypeError, match=r"^sub: Subtraction, the `-` operator, with a bool "
                                         r"tensor is not supported .*~mask"):
        REFUSED[name](_operands(ta), ta)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with"):
        REFUSED[name](_operands(torch), torch)


TAKEN = {
    "I - I": lambda v, lib: v["I"] - v["I"], "F - 1": lambda v, lib: v["F"] - 1,
    "F - I": lambda v, lib: v["F"] - v["I"],
    "I.sub(I, alpha=2)": lambda v, lib: v["I"].sub(v["I"], alpha=2),
    "~B": lambda v, lib: ~v["B"], "B.int() - 1": lambda v, lib: v["B"].int() - 1,
    "B + B": lambda v, lib: v["B"] + v["B"], "F + True": lambda v, lib: v["F"] + True,
    "H - 1": lambda v, lib: v["H"] - 1,
}


@pytest.mark.parametrize("name", list(TAKEN))
def test_what_torch_subtracts_stays(name):
    torch = pytest.importorskip("torch")
    got, want = TAKEN[name](_operands(ta), ta), TAKEN[name](_operands(torch), torch)
    assert str(got.dtype) == str(want.dtype).replace("torch.", "")
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_a_bool_subtraction_refused_in_a_graph_leaves_no_node():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(DTypeError):
        x - ta.tensor([True, False])
    (x * 2).sum().backward()  # (the refused op recorded nothing)
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
