"""How an op's sample inputs are written: what `tinyattn gradcheck` and the test suite check.

Each op lists its cases where it is defined (`@op(..., samples=[...])`); a case is
(inputs, params). An input is a shape (random float64 values that require grad), `pos(shape)`
(positive values, for log, sqrt, pow), `within(shape, low, high)` (values in a
domain), `vals(...)` (these exact float64 values, requiring grad:
ties, boundaries), `const(...)` (a fixed array that needs no grad: masks, ids, targets) or a
Python number. `unary_grid()` and `binary_grid()` add the cases of every shape, and every
broadcasting pair of shapes, of the grid `GRID`. An op registered without samples fails the
suite.
"""

import itertools

import numpy as np

GRID = [(), (3,), (2, 3), (1, 3), (2, 1)]
# a (4, 4) attention mask, True = attend: causal-like rows, row 2 fully masked, row 3 all kept
CAUSAL_PAD = np.array([[True, True, False, False], [True, True, True, False],
                       [False, False, False, False], [True, True, True, True]])

class pos:  # noqa: N801 - reads as a word in the tables below
    def __init__(self, shape):
        self.shape = shape


class vals:  # noqa: N801
    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float64)


class within:  # noqa: N801
    """Random float64 values in (low, high) that require grad (asin's domain, acosh's)."""

    def __init__(self, shape, low, high):
        self.shape, self.low, self.high = shape, low, high


class const:  # noqa: N801
    def __init__(self, values, dtype=None):
        self.values = np.asarray(values, dtype=dtype)


def case(*inputs, **params):
    return inputs, params


def unary_grid(positive=False, low=None, high=None):
    """One case per shape of GRID (positive values for ops such as log; values in (low, high)
    when those are given, for asin, atanh, acosh)."""
    if low is not None:
        return [case(within(s, low, high)) for s in GRID]
    return [case(pos(s) if positive else s) for s in GRID]


def binary_grid(first=tuple, second=tuple):
    """One case per broadcasting pair of GRID shapes; `first`/`second` = pos for positive
    operands (log's domain, divisors kept away from zero)."""
    out = []
    for a, b in itertools.product(GRID, GRID):
        try:
            np.broadcast_shapes(a, b)
        except ValueError:
            continue
        out.append(case(first(a), second(b)))
    return out


def materialize(inputs, rng, make_tensor):
    """The concrete inputs of a case: float64 tensors that require grad, constants, numbers."""
    made = []
    for spec in inputs:
        if isinstance(spec, tuple):
            made.append(make_tensor(rng.standard_normal(spec), True))
        elif isinstance(spec, pos):
            made.append(make_tensor(rng.uniform(0.5, 2.0, spec.shape), True))
        elif isinstance(spec, within):
            made.append(make_tensor(rng.uniform(spec.low, spec.high, spec.shape), True))
        elif isinstance(spec, vals):
            made.append(make_tensor(spec.values.copy(), True))
        elif isinstance(spec, const):
            made.append(make_tensor(spec.values, False))
        else:
            made.append(spec)  # a Python number or None
    return made
