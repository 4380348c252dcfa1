"""The two numerically stable pieces every softmax-like computation shares, written once.

The shift: exp(x - m) with m the row max never overflows; a row that is all -inf (fully
masked) would give -inf - -inf = NaN, so its shift is 0 instead and exp gives 0 everywhere.
A NaN in the row still makes m NaN, so NaN in gives NaN out, as in PyTorch.
log Σ exp: m + log Σ exp(x - m), -inf for a row that is all -inf.
"""

NEG_INF = float("-inf")


def shift(xp, m):
    """The shift to subtract for a row max m: m itself, or 0 where the row is all -inf."""
    return xp.where(m == NEG_INF, 0, m)


def row_max(xp, x, axis):
    """shift(max of x along axis), with the reduced dims kept (axis: an int or a tuple)."""
    return shift(xp, x.max(axis=axis, keepdims=True))


def log_sum_exp(xp, x, axis):
    """log Σ e^x along axis (dims kept), stable for large x and -inf for rows of -inf."""
    m = row_max(xp, x, axis)
    s = xp.exp(x - m).sum(axis=axis, keepdims=True)
    return xp.where(s == 0, NEG_INF, xp.log(xp.where(s == 0, 1, s)) + m)
