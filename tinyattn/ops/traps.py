"""What detect_anomaly(warn=True) warns about: legal calls that are rarely meant.

An op names its traps where it is defined (`@op(..., traps=...)`); each trap is
`trap(be, arrays, params, out, label)` and yields one message per thing it saw. `label` names
the call ("softmax#3"). The arrays are the backend's (NumPy or CuPy); what a trap reads it
brings to the host with `be.to_numpy`.
"""

import math

import numpy as np

from ..errors import fmt_shape

FLOAT16_EXP_LIMIT = math.log(float(np.finfo(np.float16).max))  # 11.09: exp overflows above it


def both(*traps):
    """One trap that runs each of `traps` in turn."""
    def run(be, arrays, params, out, label):
        for trap in traps:
            yield from trap(be, arrays, params, out, label)
    return run


def masked_rows(label, rows):
    """The warning for rows (a bool array) that may attend no key, if there are any."""
    n = int(rows.sum())
    if n:
        yield (f"{label}: {n} of {rows.size} rows are fully masked (no key may be attended). "
               "They give zeros, output and gradient, never NaN; if that is not meant, check "
               "the mask (True = may attend) and the padding.")


def float16_logits(be, arrays, params, out, label):
    """float16 logits beyond exp's range: this op is safe, the same logits elsewhere are not."""
    x = arrays[0]
    if getattr(x, "dtype", None) != np.float16:
        return
    x = be.to_numpy(x).astype(np.float32) * params.get("scale", 1.0)
    finite = x[np.isfinite(x)]
    top = float(np.abs(finite).max()) if finite.size else 0.0
    if top > FLOAT16_EXP_LIMIT:
        yield (f"{label}: float16 logits reach {top:.4g}; exp overflows float16 "
               f"above {FLOAT16_EXP_LIMIT:.2f}. This op subtracts the row max and stays "
               "finite, but exp() of these logits anywhere else gives inf and their "
               "differences lose precision: compute the logits in float32 (.float()).")


def float_mask_added(be, arrays, params, out, label):
    """A float tensor of 0s and 1s added to scores, as if it were a bool mask."""
    for j, a in enumerate(arrays):
        if _looks_like_bool_mask(be, a, out):
            yield (f"{label}: input {j} is a float tensor of 0s and 1s of "
                   f"shape {fmt_shape(a.shape)}, added as if it were a mask. An additive mask "
                   "holds 0 (attend) and -inf (masked); adding 1s barely moves the scores. "
                   "Pass a bool mask (True = attend) to scaled_dot_product_attention, or "
                   "use scores.masked_fill(~mask, float('-inf')).")


def _looks_like_bool_mask(be, a, out):
    """A float constant of 0s and 1s (both), at least (T, S), ending like the output's shape."""
    if not hasattr(a, "dtype") or a.dtype.kind != "f" or a.ndim < 2 or a.size < 4:
        return False
    if a.shape[-2:] != out.shape[-2:]:
        return False
    values = be.to_numpy(a)
    ones = values == 1
    return bool(((values == 0) | ones).all() and ones.any() and not ones.all())
