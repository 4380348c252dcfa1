"""torch.testing.assert_close for tinyattn: are two results the same, within a dtype's tolerance?

    ta.testing.assert_close(model(x), expected)            # tensors, arrays, numbers
    ta.testing.assert_close(grads, want, rtol=1e-4, atol=1e-6)   # lists, tuples, dicts of them

As torch's: |actual - expected| <= atol + rtol * |expected| everywhere, with the tolerances of
the dtype when none are given (float16 1e-3 / 1e-5, float32 1.3e-6 / 1e-5, float64 1e-7 /
1e-7, integers and bools exactly); shapes, dtypes and devices must match; NaN equals NaN only
with equal_nan=True. A failure is an AssertionError that says how many entries differ and
where the largest absolute and relative differences are.

Also torch.testing's make_tensor (a tensor of values drawn uniformly from [low, high), with
torch's default ranges per dtype, clamping and errors; drawn from tinyattn's global stream,
so the values are not torch's) and its deprecated assert_allclose (a FutureWarning, then
assert_close with the older tolerances: float16 1e-3 / 1e-3, float32 1e-4 / 1e-5, float64
1e-5 / 1e-8; equal_nan=True, no dtype check).
"""

import collections.abc
import math
import numbers
import warnings

import numpy as np

from .tensor import Tensor, rand, randint
from .tensor import tensor as _tensor

# (rtol, atol) by dtype when neither is given: torch.testing's defaults
TOLERANCES = {np.dtype(np.float16): (1e-3, 1e-5), np.dtype(np.float32): (1.3e-6, 1e-5),
              np.dtype(np.float64): (1e-7, 1e-7)}


def assert_close(actual, expected, *, rtol=None, atol=None, equal_nan=False, check_dtype=True,
                 check_device=True, msg=None):
    """Raise AssertionError unless actual and expected are close (see the module's text).
    Sequences and mappings are compared item by item, the failing item named in the message."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"assert_close: give both rtol and atol or neither, got rtol={rtol!r} "
                         f"and atol={atol!r}")
    _compare(actual, expected, (rtol, atol, equal_nan, check_dtype, check_device, msg), "")


def _compare(actual, expected, how, where):
    if isinstance(expected, dict) and isinstance(actual, dict):
        if set(actual) != set(expected):
            _fail(how, where, f"the keys do not match: {sorted(map(str, actual))} != "
                              f"{sorted(map(str, expected))}")
        for key in expected:
            _compare(actual[key], expected[key], how, f"{where}[{key!r}]")
        return
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        if len(actual) != len(expected):
            _fail(how, where, f"the lengths do not match: {len(actual)} != {len(expected)}")
        for i, e in enumerate(expected):
            _compare(actual[i], e, how, f"{where}[{i}]")
        return
    a, a_device = _array(actual, where, "actual")
    e, e_device = _array(expected, where, "expected")
    _values(a, e, a_device, e_device, how, where)


def _array(x, where, name):
    """(a NumPy array, device) of a tensor, array or Python number."""
    if isinstance(x, Tensor):
        return np.asarray(x.detach().numpy()), x.device
    if isinstance(x, np.ndarray | np.generic) or (isinstance(x, numbers.Number)
                                                  and not isinstance(x, complex)):
        return np.asarray(x), "cpu"
    if hasattr(x, "__cuda_array_interface__") and hasattr(x, "get"):  # a CuPy array
        return np.asarray(x.get()), "cuda"
    raise TypeError(f"assert_close: {name}{where} is a {type(x).__name__}; compare tensors, "
                    "arrays, numbers, or lists, tuples and dicts of them")


def _values(a, e, a_device, e_device, how, where):
    rtol, atol, equal_nan, check_dtype, check_device, _ = how
    if a.shape != e.shape:
        _fail(how, where, f"the shapes do not match: {a.shape} != {e.shape}")
    if check_dtype and a.dtype != e.dtype:
        _fail(how, where, f"the dtypes do not match: {a.dtype} != {e.dtype}")
    if check_device and a_device != e_device:
        _fail(how, where, f"the devices do not match: {a_device} != {e_device}")
    if rtol is None:
        (r1, a1), (r2, a2) = (TOLERANCES.get(x.dtype, (0.0, 0.0)) for x in (a, e))
        rtol, atol = max(r1, r2), max(a1, a2)  # (dtypes differ only without check_dtype)
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a64 - e64)
        ok = (diff <= atol + rtol * np.abs(e64)) & np.isfinite(e64)  # (inf: no tolerance)
        ok |= a64 == e64  # the same infinities
        if equal_nan:
            ok |= np.isnan(a64) & np.isnan(e64)
    if ok.all():
        return
    bad = int((~ok).sum())
    diff = np.where(np.isnan(diff), np.inf, diff)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / np.abs(e64))
    rel = np.where(np.isnan(rel), np.inf, rel)
    worst_abs, worst_rel = np.unravel_index(diff.argmax(), a.shape), \
        np.unravel_index(rel.argmax(), a.shape)
    _fail(how, where, f"the values are not close: {bad} of {a.size} entries differ "
                      f"({100 * bad / max(a.size, 1):.1f} %); the greatest absolute difference "
                      f"{float(diff[worst_abs]):.6g} at index {tuple(map(int, worst_abs))} (up to "
                      f"{atol:g} allowed), the greatest relative difference "
                      f"{float(rel[worst_rel]):.6g} at index {tuple(map(int, worst_rel))} (up to "
                      f"{rtol:g} allowed)")


def _fail(how, where, message):
    msg = how[-1]
    text = f"{'item ' + where + ': ' if where else ''}{message}"
    raise AssertionError(f"{msg}\n{text}" if msg else text)


# ---- torch.testing.assert_allclose (deprecated) -------------------------------------------------

# (rtol, atol) by dtype of torch's assert_allclose (others: exactly)
OLD_TOLERANCES = {np.dtype(np.float16): (1e-3, 1e-3), np.dtype(np.float32): (1e-4, 1e-5),
                  np.dtype(np.float64): (1e-5, 1e-8)}


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """torch.testing.assert_allclose: a FutureWarning (deprecated since torch 1.12), then
    assert_close with the older tolerances (see the module's doc), expected taken in actual's
    dtype where it is no tensor, and dtypes not compared."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be "
                  "removed in a future release. Please use `torch.testing.assert_close()` "
                  "instead.", FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = _tensor(actual)  # (Python floats in the default dtype, as torch.tensor)
    if not isinstance(expected, Tensor):
        expected = _tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        (r1, a1), (r2, a2) = (OLD_TOLERANCES.get(np.dtype(x.dtype), (0.0, 0.0))
                              for x in (actual, expected))
        rtol, atol = max(r1, r2), max(a1, a2)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_device=True, check_dtype=False, msg=msg or None)


# ---- torch.testing.make_tensor ------------------------------------------------------------------

def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """torch.testing.make_tensor: values drawn uniformly from [low, high) (defaults: bool
    [0, 2), unsigned [0, 10), signed [-9, 10), floats [-9, 9); given bounds clamped to the
    dtype's finite range, integers' bounds ceiled), torch's errors (ValueError for
    requires_grad on integers, low >= high, NaN bounds, a range outside the dtype, or both
    noncontiguous and memory_format; TypeError for a dtype it cannot make), noncontiguous a
    strided view of a twice-as-wide tensor, exclude_zero zeros as 1 (bool, integers) or the
    dtype's tiny."""
    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(int(s) for s in shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(f"make_tensor: the parameters `noncontiguous` and `memory_format` are "
                         f"mutually exclusive, but got noncontiguous={noncontiguous} and "
                         f"memory_format={memory_format}")
    dt = _make_dtype(dtype)
    if requires_grad and dt.kind in "biu":
        raise ValueError("make_tensor: `requires_grad=True` is not supported for boolean and "
                         f"integral dtypes, but got dtype={dt}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    drawn = (*shape[:-1], 2 * shape[-1]) if noncontiguous else shape
    result = _finish(_draw(drawn, dt, low, high), dt, noncontiguous, exclude_zero,
                     memory_format)
    result = result.to(device) if str(device) != str(result.device) else result
    if dt.kind == "f":
        result.requires_grad_(requires_grad)
    return result


def _finish(result, dt, noncontiguous, exclude_zero, memory_format):
    """make_tensor's view (every other column, from the second) or layout, and its zeros
    replaced (1, or the dtype's tiny)."""
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result[result == 0] = 1 if dt.kind in "biu" else float(np.finfo(dt).tiny)
    return result


def _make_dtype(dtype):
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt.kind not in "biuf" or dt.itemsize > 8:
        raise TypeError(f"make_tensor: the requested dtype '{dtype}' is not supported by "
                        "tinyattn.testing.make_tensor() (bool, integers, float16/32/64)")
    return dt


def _draw(shape, dt, low, high):
    """The values of make_tensor, before its views (torch's modify_low_high and draw)."""
    if dt.kind == "b":
        low, high = _bounds(low, high, dt, 0, 2, 0, 2)
        return randint(low, high, shape, dtype=np.int64).to(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        low, high = _bounds(low, high, dt, int(info.min),
                            int(info.max) + (1 if dt != np.int64 else 0), -9, 10)
        return randint(low, high, shape, dtype=dt)
    info = np.finfo(dt)
    low, high = _bounds(low, high, dt, float(info.min), float(info.max), -9, 9)
    u = rand(*shape, dtype=np.float64)._data
    with np.errstate(over="ignore"):
        values = low + u * (high - low) if high - low < info.max else \
            2 * (low / 2 + u * (high / 2 - low / 2))
    return _tensor(np.clip(values, low, info.max).astype(dt))


def _bounds(low, high, dt, lowest, highest, default_low, default_high):
    """torch's modify_low_high: the defaults, the checks, clamped (and ceiled for ints)."""
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"make_tensor: `low` and `high` cannot be NaN, but got low={low} and "
                         f"high={high}")
    if low == high and dt.kind == "f":
        warnings.warn("Passing `low==high` to `torch.testing.make_tensor` for floating or "
                      "complex types is deprecated since 2.1 and will be removed in 2.3. Use "
                      "`torch.full(...)` instead.", FutureWarning, stacklevel=4)
    elif low >= high:
        raise ValueError(f"make_tensor: `low` must be less than `high`, but got {low} >= "
                         f"{high}")
    elif high < lowest or low >= highest:
        raise ValueError(f"make_tensor: the value interval specified by `low` and `high` is "
                         f"[{low}, {high}), but {dt} only supports [{lowest}, {highest})")
    low, high = (min(max(v, lowest), highest) for v in (low, high))
    if dt.kind in "biu":
        return math.ceil(low), math.ceil(high)
    return float(low), float(high)
