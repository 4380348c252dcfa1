"""Integer arithmetic as torch does it on the CPU: division by an integer zero is an error
(NumPy gives 0 silently), in every form that divides integers."""

import numpy as np
import pytest

import tinyattn as ta

DIVISIONS = {
    "floor_divide": lambda x, y: x // y,
    "remainder": lambda x, y: x % y,
    "fmod": lambda x, y: x.fmod(y) if isinstance(x, ta.Tensor) else ta.fmod(x, y),
    "div trunc": lambda x, y: x.div(y, rounding_mode="trunc"),
    "div floor": lambda x, y: x.div(y, rounding_mode="floor"),
}
EXPECTED = {"floor_divide": [3, 1], "remainder": [1, 0], "fmod": [1, 0], "div trunc": [3, 1],
            "div floor": [3, 1]}  # 7 and 3 by 2 and 3


@pytest.mark.parametrize("dtype", [ta.int64, ta.int8, ta.uint8])
@pytest.mark.parametrize("name", list(DIVISIONS))
def test_integer_division_by_zero_raises(name, dtype):
    divide = DIVISIONS[name]
    x = ta.tensor([7, 3], dtype=dtype)
    for y in (ta.tensor([2, 0], dtype=dtype), ta.tensor(0, dtype=dtype), 0):
        with pytest.raises(ZeroDivisionError, match="integer division by zero"):
            divide(x, y)
    got = divide(x, ta.tensor([2, 3], dtype=dtype))
    assert got.dtype == dtype and got.numpy().tolist() == EXPECTED[name]


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod"])
def test_a_python_int_divided_by_an_integer_zero_tensor_raises(name):
    with pytest.raises(ZeroDivisionError):
        DIVISIONS[name](7, ta.tensor([0]))


def test_float_division_by_zero_stays_ieee():
    """Floats divide by zero as IEEE says (inf, nan), integers by a nonzero as Python."""
    with np.errstate(all="ignore"):
        assert (ta.tensor([7.0]) // 0).item() == np.inf
        assert np.isnan((ta.tensor([7.0]) % 0).item())
    assert (ta.tensor([-7, 7]) // ta.tensor([2, -2])).numpy().tolist() == [-4, -4]
    assert (ta.tensor([-7, 7]) % ta.tensor([2, -2])).numpy().tolist() == [1, -1]
    assert ta.tensor([-7, 7]).fmod(ta.tensor([2, -2])).numpy().tolist() == [-1, 1]
