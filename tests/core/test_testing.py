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
    "exactly at the tolerance": ([1.5], [1.0], {"rtol": 0.0, "atol": 0.5}),
    "given tolerances fail": ([1.3], [1.0], {"rtol": 0.2, "atol": 0.0}),
    "nan against nan": ([float("nan")], [float("nan")], {}),
    "nan with equal_nan": ([float("nan")], [float("nan")], {"equal_nan": True}),
    "nan and numbers with equal_nan": ([1.0, float("nan")], [1.0, float("nan")],
                                       {"equal_nan": True}),
    "nan against a number with equal_nan": ([float("nan")], [1.0], {"equal_nan": True}),
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


def _message(actual, expected, **kw):
    with pytest.raises(AssertionError) as caught:
        ta.testing.assert_close(actual, expected, **kw)
    return str(caught.value)


def test_each_mismatch_is_named_and_where_it_is():
    assert _message(ta.ones(2), ta.ones(3)) == "the shapes do not match: (2,) != (3,)"
    assert _message(ta.ones(2), ta.ones(2, dtype=ta.double)) == \
        "the dtypes do not match: float32 != float64"
    nested = [(ta.ones(2), ta.ones(2)), {"w": ta.ones(2)}]
    for bad, says in [([(ta.ones(2), ta.ones(3)), {"w": ta.ones(2)}],
                       "item [0][1]: the shapes do not match"),
                      ([(ta.ones(2), ta.ones(2)), {"w": ta.ones(2, dtype=ta.double)}],
                       "item [1]['w']: the dtypes do not match"),
                      ([(ta.ones(2),), {"w": ta.ones(2)}],
                       "item [0]: the lengths do not match: 1 != 2"),
                      ([(ta.ones(2), ta.ones(2)), {"v": ta.ones(2)}],
                       "item [1]: the keys do not match: ['v'] != ['w']")]:
        assert _message(bad, nested).startswith(says)


def test_the_counts_and_the_worst_entries():
    assert _message(ta.tensor([3.0]), ta.tensor([2.0])).startswith(
        "the values are not close: 1 of 1 entries differ (100.0 %); the greatest absolute "
        "difference 1 at index (0,) (up to 1e-05 allowed), the greatest relative difference "
        "0.5 at index (0,)")
    text = _message(ta.tensor([0.0, 3.0, 1.0, 1.0]), ta.tensor([0.0, 2.0, 1.0, 1.0]))
    assert "1 of 4 entries differ (25.0 %)" in text
    assert "relative difference 0.5 at index (1,)" in text  # 0 against 0 is no difference
    text = _message(ta.tensor([1.0, float("nan")]), ta.tensor([1.0, 2.0]))
    assert "absolute difference inf at index (1,)" in text  # NaN counts as the worst
    assert "relative difference inf at index (0,)" in _message(ta.tensor([float("nan")]),
                                                               ta.tensor([float("inf")]))


def test_huge_values_fail_without_a_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "not close" in _message(np.array([1e308]), np.array([-1e308]))


def test_arrays_on_either_device(monkeypatch):
    import fake_cupy  # tests/support

    fake_cupy.install(monkeypatch, kernels=False)
    on_gpu = ta.ones(2, device="cuda")
    ta.testing.assert_close(on_gpu._data, on_gpu)  # a CuPy array is on "cuda"
    assert _message(on_gpu._data, np.ones(2, np.float32)) == \
        "the devices do not match: cuda != cpu"
    assert _message(1.0, on_gpu._data[0].astype(np.float64)) == \
        "the devices do not match: cpu != cuda"
    assert _message([on_gpu], [ta.ones(2)]) == "item [0]: the devices do not match: cuda != cpu"


def test_what_cannot_be_compared_is_named():
    with pytest.raises(TypeError, match=r"assert_close: actual\[0\] is a str"):
        ta.testing.assert_close(["1"], [1.0])
    with pytest.raises(TypeError, match="assert_close: actual is a dict"):
        ta.testing.assert_close({"a": 1.0}, 1.0)
    with pytest.raises(TypeError, match="assert_close: expected is a list"):
        ta.testing.assert_close(1.0, [1.0])
