"""Masking: masked_fill, the op that sets chosen entries to a value (-inf before a softmax).

The mask is bool, True where the value goes in, and broadcasts to x. Filled entries do not
depend on x, so their gradient is zero. (`F.causal_mask(T)` builds the usual lower-triangular
mask; note that it marks the entries that may be *attended*, as attention masks do.)
"""

import numpy as np

from ..errors import DTypeError, ShapeError, fmt_shape
from .index import fill_value
from .op import broadcast_shape, op
from .samples import case, const


@op("masked_fill", "gx = where(mask, 0, g)", grads=("gx", None), nondiff=(1,), saves={1: 0},
    samples=[case((2, 3), const([[True, False, False], [False, True, False]]), value=-1.0),
             case((2, 3, 3), const(np.tril(np.ones((3, 3), dtype=bool))), value=0.0)])
def masked_fill(be, x, mask, value):
    """out = value where mask else x"""
    if getattr(mask, "dtype", None) != bool:
        raise DTypeError(f"masked_fill: the mask must be bool, got "
                         f"{getattr(mask, 'dtype', type(mask).__name__)} (to add a float mask, "
                         "write x + mask)")
    try:
        fits = broadcast_shape(mask.shape, x.shape) == x.shape
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"masked_fill: mask {fmt_shape(mask.shape)} does not broadcast to x "
                         f"{fmt_shape(x.shape)}")
    value = fill_value(value, x.dtype, "masked_fill")  # (300 into int8: refused, as torch)
    out = be.xp.where(mask, value, x)
    if out.dtype != x.dtype:  # 0.5 into an int tensor: x keeps its dtype, as in torch
        out = out.astype(x.dtype)
    return out, (mask,)


@masked_fill.defvjp
def masked_fill_vjp(be, g, saved, value):
    (mask,) = saved
    return be.xp.where(mask, 0, g), None


OPS = (masked_fill,)
