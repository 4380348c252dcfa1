"""torch.testing.assert_close for tinyattn: are two results the same, within a dtype's tolerance?

    ta.testing.assert_close(model(x), expected)            # tensors, arrays, numbers
    ta.testing.assert_close(grads, want, rtol=1e-4, atol=1e-6)   # lists, tuples, dicts of them

As torch's: |actual - expected| <= atol + rtol * |expected| everywhere, with the tolerances of
the dtype when none are given (float16 1e-3 / 1e-5, float32 1.3e-6 / 1e-5, float64 1e-7 /
1e-7, integers and bools exactly); shapes, dtypes and devices must match; NaN equals NaN only
with equal_nan=True. A failure is an AssertionError that says how many entries differ and
where the largest absolute and relative differences are.
"""

import numbers

import numpy as np

from .tensor import Tensor

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
