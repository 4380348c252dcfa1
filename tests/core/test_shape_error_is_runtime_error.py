"""Shape errors are RuntimeErrors too, as torch raises them: the torch habit of catching
RuntimeError around a view, a matmul or a reshape works unchanged (and ValueError, the
package's own kind for them, still does)."""

import pytest

import tinyattn as ta
from tinyattn.errors import ShapeError

CASES = {
    "view of a transpose": lambda: ta.randn(4, 6).t().view(24),
    "matmul": lambda: ta.randn(2, 3) @ ta.randn(2, 3),
    "reshape": lambda: ta.randn(2, 3).reshape(4, 2),
    "broadcast": lambda: ta.randn(2, 3) + ta.randn(4, 3),
    "cat": lambda: ta.cat([ta.randn(2, 3), ta.randn(2, 4)], 0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_shape_error_is_caught_as_runtime_error_and_value_error(case):
    for kind in (RuntimeError, ValueError, ShapeError):
        with pytest.raises(kind):
            CASES[case]()


def test_the_view_fallback_habit_works():
    x = ta.arange(24.0).reshape(4, 6).t()
    try:
        y = x.view(24)
    except RuntimeError:
        y = x.reshape(24)
    assert y.tolist() == x.contiguous().numpy().reshape(24).tolist()
