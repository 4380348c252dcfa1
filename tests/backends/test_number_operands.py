"""Python numbers as operands (Backend.number): NumpyBackend hands the arithmetic ops a 0-d array
of the other operand's dtype in place of a Python number, which must give the bits, the dtype
and the warnings the number gives."""

import operator
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyattn as ta
from tinyattn.backends.base import Backend
from tinyattn.backends.numpy_backend import NumpyBackend

OPS = [operator.add, operator.sub, operator.mul, operator.truediv]
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
                    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                    st.integers(min_value=-(2 ** 30), max_value=2 ** 30),
                    st.sampled_from([0, 0.0, -0.0, 1, True, False, 2 ** 24 + 1, 1e300, -1e39,
                                     3.4028235e38, 1e-45, 0.1]))


def _run(fn):
    """fn()'s value (or the class of the error it raised) and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn()
        except (OverflowError, TypeError, ValueError) as e:  # (int64 + 2**63: NumPy refuses)
            out = type(e)
    # (NumPy says "in scalar divide" for a NumPy scalar with a number, "in divide" with a 0-d
    # array: the same warning)
    return out, sorted(str(w.message).replace("scalar ", "") for w in caught)


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, type):  # both raised this
        return
    assert np.asarray(a).dtype == np.asarray(b).dtype
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.signbit(a), np.signbit(b))  # -0.0 stays -0.0


@settings(max_examples=300, deadline=None)
@given(c=numbers, dtype=st.sampled_from(["float32", "float64", "int64", "bool", "float16"]),
       op=st.sampled_from(OPS), first=st.booleans(), zero_d=st.booleans())
def test_the_operand_computes_what_the_number_does(c, dtype, op, first, zero_d):
    be = NumpyBackend()
    big = 6e4 if dtype == "float16" else 1e30
    x = np.array({"int64": [0, 1, -3, 7, 2 ** 40], "bool": [True, False]}.get(
        dtype, [-0.0, 0.0, 1.5, -3.0, big, np.inf, 7.0]))
    x = (x[2] if zero_d and dtype != "bool" else x).astype(dtype)
    for _ in range(2):  # made, then found again
        operand = be.number(c, x)
        pair = (operand, x) if first else (x, operand)
        want, want_warn = _run(lambda: op(*((c, x) if first else (x, c))))  # noqa: B023
        got, got_warn = _run(lambda: op(*pair))  # noqa: B023
        _same(got, want)
        assert got_warn == want_warn


def test_the_operands_that_are_kept():
    be = NumpyBackend()
    x32 = np.ones(3, np.float32)
    z = be.number(0.5, x32)
    assert isinstance(z, np.ndarray) and z.shape == () and z.dtype == np.float32
    assert not z.flags.writeable
    assert be.number(0.5, x32) is z and be.number(0.5, np.ones(2, np.float64)) is not z
    # numbers that stay numbers: zero (either sign), NaN, out of the dtype's range, and any
    # number with an integer or bool array
    for c in (0.0, -0.0, 0, False, float("nan"), 1e39, 10 ** 400):
        assert be.number(c, x32) is c
    assert be.number(0.5, np.ones(3, np.int64)) == 0.5
    assert be.number(2, np.ones(3, np.int64)) == 2
    # a different number each call (a learning rate that moves) keeps the store bounded
    for i in range(2000):
        be.number(1.0 + i / 4096, x32)
    assert 0 < len(be._numbers) <= 512


def test_other_backends_give_the_number_back():
    class Plain(Backend):  # (its one abstract method filled in)
        xp = np

        def to_numpy(self, array):
            return np.asarray(array)

    assert Plain().number(0.5, np.ones(3, np.float32)) == 0.5


@pytest.mark.parametrize("c", [0.5, -0.0, 0.0, 3, 1e-45, float("inf")])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tensor_arithmetic_with_numbers_matches_numpy(c, dtype):
    """Forward and gradient of x op c and c op x, against NumPy with the Python number."""
    a = np.array([-0.0, 0.0, 1.5, -3.0, 2.0], dtype=dtype)
    for op in OPS:
        for first in (False, True):
            x = ta.tensor(a, requires_grad=True)
            with warnings.catch_warnings():  # (NumPy's, as before: inf * 0)
                warnings.simplefilter("ignore")
                y = op(c, x) if first else op(x, c)
            with np.errstate(all="ignore"):
                want = op(c, a) if first else op(a, c)
            _same(y.numpy(), want)
            g = np.array([1.0, -2.0, 0.5, 3.0, -0.0], dtype=dtype)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y.backward(ta.tensor(g))
            with np.errstate(all="ignore"):
                if op is operator.mul:
                    want_g = g * c
                elif op is operator.truediv and not first:
                    want_g = g / c
                elif op is operator.truediv:
                    r = 1 / a
                    want_g = -(g * c) * (r * r)
                else:
                    want_g = -g if op is operator.sub and first else g
            np.testing.assert_array_equal(x.grad.numpy(), want_g.astype(dtype))
