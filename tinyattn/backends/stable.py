"""The two numerically stable pieces every softmax-like computation shares, written once.

The shift: exp(x - m) with m the row max never overflows; a row that is all -inf (fully
masked) would give -inf - -inf = NaN, so its shift is 0 instead and exp gives 0 everywhere.
A row holding +inf (inf - inf) or NaN comes out NaN, as in PyTorch: its shift is NaN (a NaN max,
or NaN for a max of +inf), which NumPy subtracts without an "invalid value" warning.
log Σ exp: m + log Σ exp(x - m), -inf for a row that is all -inf or empty, +inf for a row
holding +inf (as in PyTorch; NaN if it holds a NaN too).
"""

NEG_INF, POS_INF, NAN = float("-inf"), float("inf"), float("nan")


def shift(xp, m):
    """The shift to subtract for a row max m: m itself; 0 where the row is all -inf; NaN where
    its max is +inf (then every x - shift is NaN, where x - inf would be inf - inf: a warning).
    On NumPy, rows without an infinite max (nearly always) take one check, not two wheres; on a
    GPU that check would wait for the device, so the wheres run there."""
    if xp.__name__ == "numpy" and not xp.isinf(m).any():
        return m
    return xp.where(m == NEG_INF, 0, xp.where(m == POS_INF, NAN, m))


def top(xp, x, axis):
    """max of x along axis (an int or a tuple), the reduced dims kept; -inf for empty rows
    (NumPy's max of nothing is an error: it has no identity)."""
    if x.size == 0:  # (x.sum of nothing is 0, of the right shape)
        return xp.full_like(x.sum(axis=axis, keepdims=True), NEG_INF)
    return x.max(axis=axis, keepdims=True)


def row_max(xp, x, axis):
    """shift(max of x along axis), with the reduced dims kept (axis: an int or a tuple)."""
    return shift(xp, top(xp, x, axis))


def log_sum_exp(xp, x, axis):
    """log Σ e^x along axis (dims kept), stable for large x; -inf for rows of -inf (or empty
    rows), +inf for rows holding +inf."""
    m = top(xp, x, axis)
    s = xp.exp(x - shift(xp, m)).sum(axis=axis, keepdims=True)
    out = xp.where(s == 0, NEG_INF, xp.log(xp.where(s == 0, 1, s)) + m)
    return xp.where(m == POS_INF, POS_INF, out)  # (s and out are NaN there)
