"""A complex Python number given where tinyattn takes a real one (a fill value, an arange
bound) is refused by the function's name, with the same words as a complex dtype: tinyattn has
no complex numbers. (NumPy's own "must be real number, not complex" named nothing.)"""

import pytest

import tinyattn as ta
from tinyattn.errors import DTypeError

CASES = {
    "full": lambda: ta.full((2,), 1j),
    "fill_": lambda: ta.zeros(2).fill_(1j),
    "masked_fill": lambda: ta.ones(2).masked_fill(ta.ones(2) > 0, 1 + 2j),
    "index_fill": lambda: ta.ones(3).index_fill(0, ta.tensor([0]), 2j),
    "setitem": lambda: ta.ones(2).__setitem__(0, 1j),
    "arange": lambda: ta.arange(0, 5, 1j),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_complex_value_is_refused_by_name(name):
    with pytest.raises(DTypeError, match=rf"^{name}: a complex .*complex numbers are not "
                                         "supported"):
        CASES[name]()


def test_a_real_value_of_a_numpy_or_python_kind_still_fills():
    import numpy as np

    assert ta.full((2,), np.float32(1.5)).tolist() == [1.5, 1.5]
    t = ta.zeros(3, dtype=ta.int64)
    t.fill_(np.int8(4))
    assert t.tolist() == [4, 4, 4]
    assert ta.arange(0, 3, 1.5).tolist() == [0.0, 1.5]
