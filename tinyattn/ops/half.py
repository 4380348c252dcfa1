"""float16 as torch computes it: each op's float16 form, which apply runs for float16 inputs.

apply sends every call with float16 inputs (and no float32 or float64 one) to
dtypes.promoted, which runs the op's float16 form made here (`half_form`, one per op) in its
place: the same Op (name, VJP, flags; the node records it), whose forward and VJP run

- without NumPy's RuntimeWarnings: float16 overflows to inf (65504 is its largest value), and
  torch gives that inf silently, as its 0 * inf = NaN;
- with torch's arithmetic for a Python number operand. NumPy (NEP 50) casts the number to
  float16 first, as torch does for +, -, %, fmod, pow, where and comparisons; but torch's
  x * c, x / c, x // c and its VJPs (g * c, g / c) compute in float32 with c as a float32 and
  round once (`x / 70000.0` is not x / inf = 0), c / x is x.reciprocal() * c (as torch's
  __rtruediv__), and c // x, x // y go step by step in float16 (c10's div_floor_floating);
- with torch's refusals: a pow exponent or a clamp bound past float16's range (finite) is an
  error ("value cannot be converted without overflow"), as a fill value already is.

A VJP's float32 gradients (from a float32 number) are rounded to float16 here, quietly.
Given no float16 array (graphcheck's float64 re-run of a recorded node), each form is the op.
"""

import functools
import math

import numpy as np

from .. import dtypes
from . import elementwise as ew
from . import pointwise as pw
from .op import Op, is_const, quiet

HALF, F32 = np.dtype(np.float16), np.float32
_LARGEST = 65504.0  # float16's largest finite value
_forms = {}  # op -> its float16 form


def half_form(op):
    """op's float16 form (made once); a user's autograd.Function is run as it is."""
    form = _forms.get(op)
    if form is None:
        form = _forms[op] = op if getattr(op.fwd, "user_function", False) else _made(op)
    return form


def _made(op):
    form = Op.__new__(Op)
    for slot in Op.__slots__:
        setattr(form, slot, getattr(op, slot))
    # (the op's own forward and VJP are looked up on each call: a later defvjp holds)
    form.fwd = functools.wraps(op.fwd)(functools.partial(_quiet_fwd, op, _FORWARDS.get(op)))
    form.vjp = functools.partial(_quiet_vjp, op, _VJPS.get(op))
    return form


def _quiet_fwd(op, fwd, be, *xs, **params):
    with quiet():
        return (fwd or op.fwd)(be, *xs, **params)


def _quiet_vjp(op, vjp, be, g, saved, **params):
    """The VJP without warnings, its float32 gradients (a float32 number's) rounded to
    float16 as torch's float16 arithmetic rounds them."""
    with quiet():
        grads = (vjp or op.vjp)(be, g, saved, **params)
        if getattr(g, "dtype", None) != HALF:
            return grads
        return tuple(gx.astype(HALF) if getattr(gx, "dtype", None) == F32 else gx
                     for gx in grads)


def _half(a):
    return getattr(a, "dtype", None) == HALF


def _fits(what, v):
    """A TypeError (apply makes it the op's DTypeError) for a finite number past float16's
    range, which torch refuses to convert (±inf and NaN pass)."""
    if v is not None and is_const(v) and math.isfinite(v) and abs(v) > _LARGEST:
        raise TypeError(f"{what} {v!r} does not fit float16 (its largest value is 65504): "
                        "value cannot be converted without overflow (as torch; give ±inf "
                        "for no limit, or convert the tensor to float32 first)")


# ---- x * c, x / c, c / x, x // c: a float32 number, one rounding -----------------------------


def _mul(be, x, y):
    if is_const(y) and _half(x):
        return (x * F32(y)).astype(HALF), (None, y, False, True)
    if is_const(x) and _half(y):
        return (y * F32(x)).astype(HALF), (x, None, True, False)
    return ew.mul.fwd(be, x, y)


def _mul_vjp(be, g, saved):
    x, y, x_const, y_const = saved
    if _half(g) and (x_const or y_const):  # g * c in float32 (the gradient is rounded after)
        return (None, g * F32(x)) if x_const else (g * F32(y), None)
    return ew.mul.vjp(be, g, saved)


def _div(be, x, y):
    if is_const(y) and _half(x):
        return (x / F32(y)).astype(HALF), (None, y)
    if is_const(x) and _half(y):  # torch's c / y: y.reciprocal() (in float16) * c
        r = 1 / y
        return (r * F32(x)).astype(HALF), (x, r)
    return ew.div.fwd(be, x, y)


def _div_vjp(be, g, saved):
    x, y = saved
    if _half(g):
        if is_const(y):  # g / c, in float32
            return g / F32(y), None
        if is_const(x):  # through reciprocal * c: -(g * c) * r², g * c rounded first
            return None, -(g * F32(x)).astype(HALF) * (y * y)
    return ew.div.vjp(be, g, saved)


def _floor_divide(be, x, y):
    if is_const(y) and _half(x):
        out = be.xp.floor_divide(x, F32(y)).astype(HALF)
    elif _half(x) or _half(y):
        out = _floor_div_steps(be.xp, x, y)
    else:
        return pw.floor_divide.fwd(be, x, y)
    return out, (is_const(x), is_const(y))


def _floor_div_steps(xp, a, b):
    """a // b as torch's float16 kernel (c10::div_floor_floating on c10::Half): each step
    rounded to float16, a number operand cast to float16 first."""
    def r(v):
        return xp.asarray(v, dtype=F32).astype(HALF).astype(F32)

    a, b = r(a), r(b)
    mod = r(xp.fmod(a, b))
    div = r(r(a - mod) / b)
    div = xp.where((mod != 0) & ((b < 0) != (mod < 0)), r(div - 1), div)
    floor = xp.floor(div)
    floor = xp.where(div - floor > 0.5, r(floor + 1), floor)
    out = xp.where(div != 0, floor, xp.copysign(0, r(a / b)))
    return xp.where(b == 0, a / b, out).astype(HALF)


def _remainder(be, x, y):
    """x % y as torch's kernel: fmod, then + y where the signs differ (a zero keeps its sign,
    where NumPy's takes y's: 0 % -3 is 0.0, not -0.0), numbers cast to float16."""
    if not (_half(x) or _half(y)):
        return pw.remainder.fwd(be, x, y)
    xp = be.xp
    a, b = (xp.asarray(v, dtype=HALF) for v in (x, y))
    mod = xp.fmod(a, b)
    return xp.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod), (x, y)


def _remainder_vjp(be, g, saved):
    x, y = saved
    if not _half(g) or is_const(y):
        return pw.remainder.vjp(be, g, saved)
    # torch: -g * x.div(y, rounding_mode="floor"), a float16 floor division
    return None if is_const(x) else g, -g * _floor_div_steps(be.xp, x, y)


# ---- pow: the exponent refused past float16's range; torch's opmath in the VJPs ---------------


def _power(be, x, y):
    if _half(x):
        _fits("pow: the exponent", y)
    return ew.power.fwd(be, x, y)


def _power_vjp(be, g, saved):
    """torch's pow VJPs for a number operand: g * f16(c * x^(c-1)) (c * ... a float32 product),
    and for a number base, g * f16(out * log c) (0 where c = 0 and y >= 0)."""
    x, y, out = saved
    if not _half(g) or is_const(x) == is_const(y):
        return ew.power.vjp(be, g, saved)
    xp = be.xp
    if is_const(y):
        if y == 0:
            return xp.zeros_like(g), None
        return g * (F32(y) * x ** (y - 1)).astype(HALF), None
    log_c = math.log(x) if x > 0 else -math.inf if x == 0 else math.nan
    factor = (out * F32(log_c)).astype(HALF)
    if x == 0:
        factor = xp.where(y >= 0, 0, factor).astype(HALF)
    return None, g * factor


# ---- lerp: a number weight's factors in float32; clamp's bounds within float16 -----------------


def _lerp_vjp(be, g, saved):
    start, end, w = saved
    if not (_half(g) and is_const(w)):
        return pw.lerp.vjp(be, g, saved)
    # torch: g * (1 - w) and g * w with the number in float32 (rounded after)
    return (None if is_const(start) else g * F32(1 - w),
            None if is_const(end) else g * F32(w), None)


def _clip(be, x, min=None, max=None):  # noqa: A002 - torch's argument names
    if _half(x):
        _fits("clip: the bound (min, of clamp or clip)", min)
        _fits("clip: the bound (max, of clamp or clip)", max)
    return ew.clip.fwd(be, x, min=min, max=max)


# ---- addcmul, addcdiv: one fused node, as torch's (Tensor.addcmul takes it for float16) ---------


def _addcmul(be, s, t1, t2, value):
    """out = s + (value * t1) * t2 in float32 (the last step fused), rounded once"""
    if not _half(s):  # (graphcheck's float64 re-run)
        return s + t1 * value * t2, (t1, t2)
    p = (t1.astype(F32) * F32(value)).astype(np.float64)
    return (p * t2 + s).astype(F32).astype(HALF), (t1, t2)


def _addcmul_vjp(be, g, saved, value):
    t1, t2 = saved
    if not _half(g):
        return g, g * t2 * value, g * t1 * value
    return g, g * (t2 * F32(value)).astype(HALF), g * (t1 * F32(value)).astype(HALF)


def _addcdiv(be, s, t1, t2, value):
    """out = s + (value * t1) / t2 in float32, rounded once"""
    if not _half(s):
        return s + t1 * value / t2, (t1, t2)
    return (s + (t1.astype(F32) * F32(value)) / t2).astype(HALF), (t1, t2)


def _addcdiv_vjp(be, g, saved, value):
    t1, t2 = saved
    if not _half(g):
        return g, g * value / t2, -g * value * t1 / (t2 * t2)
    return (g, g * (HALF.type(value) / t2),
            -g * ((t1 * F32(value)).astype(HALF) / (t2 * t2)))


addcmul = Op("addcmul", _addcmul, "gs = g, g1 = g * (t2 * value), g2 = g * (t1 * value)",
             grads=("gs", "g1", "g2"), broadcasts=True, saves={1: 0, 2: 1})
addcmul.defvjp(_addcmul_vjp)
addcdiv = Op("addcdiv", _addcdiv, "gs = g, g1 = g * (value / t2), g2 = -g * value t1 / t2²",
             grads=("gs", "g1", "g2"), broadcasts=True, saves={1: 0, 2: 1})
addcdiv.defvjp(_addcdiv_vjp)


_FORWARDS = {ew.mul: _mul, ew.div: _div, pw.floor_divide: _floor_divide, ew.power: _power,
             pw.remainder: _remainder, ew.clip: _clip}
_VJPS = {ew.mul: _mul_vjp, ew.div: _div_vjp, ew.power: _power_vjp, pw.remainder: _remainder_vjp,
         pw.lerp: _lerp_vjp}

dtypes.use_half_ops(half_form)
