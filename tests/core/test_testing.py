"""ta.testing.assert_close: the same verdict as torch.testing.assert_close on tensors of each
dtype at and past its default tolerance, with given tolerances, NaN and infinities, mixed
dtypes, shapes, devices, and containers; its messages say where the values differ."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

# (actual, expected, keywords): each compared by both libraries
CASES = {
    "equal float32": ([1.0, 2.0], [1.0, 2.0], {}),
    "float32 within its rtol": ([1.0, 1000.0 * (1 + 1e-6)], [1.0, 1000.0], {}),
    "float32 past its rtol": ([1.0, 1000.0 * (1 + 3e-6)], [1.0, 1000.0], {}),
    "float32 within its atol": ([0.0, 9e-6], [0.0, 0.0], {}),
    "float32 past its atol": ([0.0, 2e-5], [0.0, 0.0], {}),
    "float64 past its rtol": (np.array([1.0 + 2e-7]), np.array([1.0]), {}),
    "float64 within its rtol": (np.array([1.0 + 5e-8]), np.array([1.0]), {}),
    "float16 within": (np.array([1.0005], np.float16), np.array([1.0], np.float16), {}),
    "float16 past": (np.array([1.01], np.float16), np.array([1.0], np.float16), {}),
    "given tolerances pass": ([1.1], [1.0], {"rtol": 0.2, "atol": 0.0}),
    "given tolerances fail": ([1.3], [1.0], {"rtol": 0.2, "atol": 0.0}),
    "nan against nan": ([float("nan")], [float("nan")], {}),
    "nan with equal_nan": ([float("nan")], [float("nan")], {"equal_nan": True}),
    "the same infinity": ([float("inf")], [float("inf")], {}),
    "opposite infinities": ([float("inf")], [float("-inf")], {}),
    "an infinity against a number": ([float("inf")], [1e30], {}),
    "a number against an infinity": ([1e30], [float("inf")], {"rtol": 1.0, "atol": 1.0}),
    "integers exactly": (np.array([1, 2]), np.array([1, 2]), {}),
    "integers one off": (np.array([1, 3]), np.array([1, 2]), {}),
    "bools": (np.array([True, False]), np.array([True, True]), {}),
    "dtypes differ": (np.array([1.0], np.float32), np.array([1.0], np.float64), {}),
    "dtypes differ, not checked": (np.array([1.0], np.float32), np.array([1.0 + 1e-6]),
                                   {"check_dtype": False}),
    "shapes differ": ([1.0, 2.0], [[1.0, 2.0]], {}),
}


def _close(lib, actual, expected, kw):
    """Whether `lib`'s assert_close passes (a list is float32, an array keeps its dtype)."""
    values = [np.asarray(v, np.float32) if isinstance(v, list) else v for v in (actual, expected)]
    if lib == "ta":
        check, tensors = ta.testing.assert_close, [ta.tensor(v, dtype=v.dtype) for v in values]
    else:
        check, tensors = torch.testing.assert_close, [torch.from_numpy(v) for v in values]
    try:
        check(*tensors, **kw)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_verdict_is_torchs(case):
    actual, expected, kw = case
    assert _close("ta", actual, expected, kw) == _close("torch", actual, expected, kw)


def test_numbers_and_containers_item_by_item():
    ta.testing.assert_close([ta.ones(2), {"b": 3.0}], [ta.ones(2), {"b": 3.0}])
    with pytest.raises(AssertionError, match=r"item \[1\]\['b'\]: the values are not close"):
        ta.testing.assert_close([ta.ones(2), {"b": 3.0}], [ta.ones(2), {"b": 3.5}])
    with pytest.raises(AssertionError, match="item : the keys do not match|the keys do not "
                                             "match: \\['a'\\] != \\['b'\\]"):
        ta.testing.assert_close({"a": 1.0}, {"b": 1.0})
    with pytest.raises(AssertionError, match="the lengths do not match: 1 != 2"):
        ta.testing.assert_close([1.0], [1.0, 2.0])


def test_the_message_says_how_many_differ_and_where():
    got = ta.tensor([[1.0, 2.0], [3.0, 4.0]])
    want = ta.tensor([[1.0, 2.5], [3.0, 4.1]])
    with pytest.raises(AssertionError) as caught:
        ta.testing.assert_close(got, want, msg="logits")
    text = str(caught.value)
    assert text.startswith("logits\n")
    assert "2 of 4 entries differ (50.0 %)" in text
    assert "greatest absolute difference 0.5 at index (0, 1)" in text
    assert "greatest relative difference 0.2 at index (0, 1)" in text
    assert "(up to 1e-05 allowed)" in text and "(up to 1.3e-06 allowed)" in text


def test_devices_must_match_unless_told(monkeypatch):
    import fake_cupy  # tests/support

    fake_cupy.install(monkeypatch, kernels=False)
    with pytest.raises(AssertionError, match="the devices do not match: cuda != cpu"):
        ta.testing.assert_close(ta.ones(2, device="cuda"), ta.ones(2))
    ta.testing.assert_close(ta.ones(2, device="cuda"), ta.ones(2), check_device=False)


def test_refusals():
    with pytest.raises(ValueError, match="assert_close: give both rtol and atol or neither"):
        ta.testing.assert_close(1.0, 1.0, rtol=1e-3)
    with pytest.raises(TypeError, match="assert_close: expected is a str"):
        ta.testing.assert_close(1.0, "1.0")
    with pytest.raises(AssertionError, match="the values are not close"):  # a tensor's grad
        ta.testing.assert_close(ta.ones(2, requires_grad=True) * 2, ta.ones(2))
