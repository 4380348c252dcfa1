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
- with a 0-d float32 or float64 tensor t as torch takes it: x * t, x / t, x // t compute with t
  as a float32 number (dtypes.promoted leaves it uncast for them, `_AS_NUMBERS`), t * x casts
  t to float16 (its VJP's g * t is in float32 again), and t gets its gradient in its dtype;
- with torch's float32 parameters where its float16 kernels take them so: threshold, softshrink,
  leaky_relu (rrelu's eval slope), celu, softplus, hardtanh's VJP, add/sub's alpha in the VJP;
- with torch's refusals: a pow exponent, a clamp or hardtanh bound, a hardshrink lambd past
  float16's range (finite) is an error ("value cannot be converted without overflow"), as a
  fill value already is.

Fused nodes, as torch's single kernels: addcmul, addcdiv and add/sub with alpha (float16), and
div(rounding_mode="trunc") for every float dtype (zero gradients; ±inf or NaN for / 0, silently).

A VJP's float32 gradients (from a float32 number) are rounded to float16 here, quietly.
Given no float16 array (graphcheck's float64 re-run of a recorded node), each form is the op.
"""

import functools
import math

import numpy as np

from .. import dtypes
from . import activation as act
from . import elementwise as ew
from . import pointwise as pw
from .index import fill_value
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
    if op.add_into is not None:  # (getitem's: a float16 sum past 65504 is inf, quietly)
        form.add_into = functools.partial(_quiet_add_into, op.add_into)
    return form


def _quiet_add_into(add_into, be, acc, g, saved, **params):
    with quiet():
        return add_into(be, acc, g, saved, **params)


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


def _to_half(a):
    """A float32 or float64 array in float16, as torch casts (a float64 through float32)."""
    return a.astype(F32).astype(HALF)


def _scalar(a):
    """Whether `a` is a 0-d float32 or float64 array: a 0-d tensor operand of x * t, t * x,
    x / t or x // t, which dtypes.promoted leaves uncast for these forms (`_AS_NUMBERS`). torch
    takes it as a number in float32 (as operand 1; t * x casts t to float16, but its VJP's
    g * t is in float32), and gives the tensor its gradient, in its dtype."""
    return getattr(a, "ndim", None) == 0 and a.dtype in dtypes.WIDE


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
    if _scalar(y) and _half(x):  # x * t: t in float32, as a number (gt: g * x, in float16)
        return (x * F32(y)).astype(HALF), (x, y, False, False)
    if _scalar(x) and _half(y):  # t * x: t cast to float16 (the VJP's g * t: in float32)
        return _to_half(x) * y, (x, y, False, False)
    if is_const(x) and _half(y):
        return (y * F32(x)).astype(HALF), (x, None, True, False)
    return ew.mul.fwd(be, x, y)


def _mul_vjp(be, g, saved):
    x, y, x_const, y_const = saved
    if _half(g) and (x_const or y_const):  # g * c in float32 (the gradient is rounded after)
        return (None, g * F32(x)) if x_const else (g * F32(y), None)
    if _half(g) and _scalar(y):  # g * t in float32; t's: g * x in float16 (summed after)
        return g * F32(y), g * x
    if _half(g) and _scalar(x):
        return g * y, g * F32(x)
    return ew.mul.vjp(be, g, saved)


def _div(be, x, y):
    if is_const(y) and _half(x):
        return (x / F32(y)).astype(HALF), (None, y)
    if _scalar(y) and _half(x):  # x / t: t in float32, as a number
        return (x / F32(y)).astype(HALF), (x, y)
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
        if _scalar(y):  # g / t; t's: -g * ((x / t) / t), each / in float32, rounded to float16
            t = F32(y)
            return g / t, -g * ((x / t).astype(HALF) / t).astype(HALF)
        if x is not None:  # torch's: g / y, -g * ((x / y) / y), not -(g / y) * x / y
            return g / y, -g * ((x / y) / y)
    return ew.div.vjp(be, g, saved)


def _floor_divide(be, x, y):
    if (is_const(y) or _scalar(y)) and _half(x):
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


# ---- activations with number parameters: torch's float16 kernels take most in float32 ---------
#
# threshold, softshrink, leaky_relu (so rrelu's eval slope), celu, softplus compute in float32
# with the parameter as a float32 and round once; hardtanh's VJP compares in float32 (its
# forward is clamp: bounds in float16); hardshrink and logit take theirs in float16 (logit's
# upper end is float16's 1 - eps); a parameter cast to float16 is refused past its range.


def _f32(v):
    with quiet():  # (past float32's range: inf)
        return F32(v)


def _threshold(be, x, threshold, value):
    """value where x <= threshold (compared in float32: 70000 is no error), else x"""
    if not _half(x):
        return act.threshold.fwd(be, x, threshold=threshold, value=value)
    value = fill_value(value, HALF, "threshold")  # (cast to float16: refused past 65504)
    out = be.xp.where(x <= _f32(threshold), value, x).astype(HALF, copy=False)
    return out, (x,)


def _threshold_vjp(be, g, saved, threshold, value):
    (x,) = saved
    if not _half(x):
        return act.threshold.vjp(be, g, saved, threshold=threshold, value=value)
    return (ew.masked(be.xp, g, ~(x <= _f32(threshold))),)


def _softshrink(be, x, lambd=0.5):
    """x - lambd, x + lambd in float32 (compared there too), rounded once; the VJP compares in
    float16, as torch's"""
    if not _half(x):
        return act.softshrink.fwd(be, x, lambd=lambd)
    act._check_lambd(HALF, lambd, "softshrink")
    xp, xw, c = be.xp, x.astype(F32), F32(lambd)
    out = xp.where(xw > c, xw - c, xp.where(xw < -c, xw + c, xp.where(xw == xw, 0, xw)))
    return out.astype(HALF), (x,)


def _hardshrink(be, x, lambd=0.5):
    if _half(x):
        _fits("hardshrink: lambd", lambd)
    return act.hardshrink.fwd(be, x, lambd=lambd)


def _leaky_relu(be, x, negative_slope=0.01):
    """x * slope in float32, rounded once (the VJP's g * slope too)"""
    if not _half(x):
        return act.leaky_relu.fwd(be, x, negative_slope=negative_slope)
    act._floating(x, "leaky_relu")
    return be.xp.where(x > 0, x, x * _f32(negative_slope)).astype(HALF), (x,)


def _leaky_relu_vjp(be, g, saved, negative_slope=0.01):
    (x,) = saved
    if not _half(g):
        return act.leaky_relu.vjp(be, g, saved, negative_slope=negative_slope)
    return (be.xp.where(x > 0, g, g * _f32(negative_slope)),)


def _celu(be, x, alpha=1.0):
    """torch's elu kernel with input scale 1/alpha: expm1(x * f32(1/alpha)) * alpha in float32"""
    if not _half(x) or alpha == 0:  # (0: the op's refusal)
        return act.celu.fwd(be, x, alpha=alpha)
    xw = x.astype(F32)
    with quiet():
        neg = be.xp.expm1(xw * _f32(1.0 / alpha)) * _f32(alpha)
        return be.xp.where(xw > 0, xw, neg).astype(HALF), (x,)


def _celu_vjp(be, g, saved, alpha=1.0):
    """g * (1/f32(alpha)) * alpha * exp(x / alpha), in float32 left to right (torch's)"""
    (x,) = saved
    if not _half(g):
        return act.celu.vjp(be, g, saved, alpha=alpha)
    xw = x.astype(F32)
    with quiet():
        inv = _f32(1.0 / float(_f32(alpha)))
        neg = g * inv * _f32(alpha) * be.xp.exp(xw * inv)
        return (be.xp.where(xw > 0, g, neg),)


def _hardtanh_vjp(be, g, saved, min_val=-1.0, max_val=1.0):
    """0 where x <= min_val or x >= max_val, compared in float32 (the forward's clamp has its
    bounds in float16)"""
    (x,) = saved
    if not _half(x):
        return act.hardtanh.vjp(be, g, saved, min_val=min_val, max_val=max_val)
    return (ew.masked(be.xp, g, ~((x <= _f32(min_val)) | (x >= _f32(max_val)))),)


def _hardtanh(be, x, min_val=-1.0, max_val=1.0):
    if _half(x):
        _fits("hardtanh: min_val", min_val)
        _fits("hardtanh: max_val", max_val)
    return act.hardtanh.fwd(be, x, min_val=min_val, max_val=max_val)


def _softplus(be, x, beta=1.0, threshold=20.0):
    """log1p(exp(beta x)) / beta in float32, or x where beta x > threshold: torch's kernel
    (which overflows to inf where beta x passes ~88 below the threshold)"""
    if not _half(x):
        return act.softplus.fwd(be, x, beta=beta, threshold=threshold)
    act._floating(x, "softplus")
    xp, xw, b = be.xp, x.astype(F32), _f32(beta)
    with quiet():
        bx = xw * b
        return xp.where(bx > _f32(threshold), xw, xp.log1p(xp.exp(bx)) / b).astype(HALF), (x,)


def _softplus_vjp(be, g, saved, beta=1.0, threshold=20.0):
    """g * z / (z + 1), z = exp(beta x), in float32; g where beta x > threshold"""
    (x,) = saved
    if not _half(g):
        return act.softplus.vjp(be, g, saved, beta=beta, threshold=threshold)
    xp, b = be.xp, _f32(beta)
    with quiet():
        bx = x.astype(F32) * b
        z = xp.exp(bx)
        return (xp.where(bx > _f32(threshold), g, g * z / (z + 1)),)


def _logit_ends(eps):
    """torch's float16 clamp of logit: [f16(eps), 1 - f16(eps) rounded to float16]"""
    with quiet():
        lo = HALF.type(eps)
    return lo, HALF.type(1) - lo


def _logit(be, x, eps=None):
    if eps is None or not _half(x):
        return pw.logit.fwd(be, x, eps=eps)
    lo, hi = _logit_ends(eps)
    z = be.xp.clip(x, lo, hi)
    with quiet():
        return be.xp.log(z / (1 - z)), (x,)


def _logit_vjp(be, g, saved, eps=None):
    (x,) = saved
    if eps is None or not _half(x):
        return pw.logit.vjp(be, g, saved, eps=eps)
    lo, hi = _logit_ends(eps)
    with quiet():
        gx = g / (x * (1 - x))
    return (be.xp.where((x < lo) | (x > hi), HALF.type(0), gx),)


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


# ---- add, sub with alpha: one node, as torch's --------------------------------------------------


def _add_alpha(be, x, y, alpha):
    """out = x + alpha * y: y (a number too) and alpha in float16, the sum in float32 (the
    product is exact there: torch's fused multiply-add), rounded once"""
    if not _half(x):  # (graphcheck's float64 re-run)
        return x + y * alpha, (is_const(y),)
    with quiet():  # (alpha = ±inf: inf * 0 is NaN, as torch)
        a, y16 = HALF.type(alpha), HALF.type(y) if is_const(y) else y
        return (x.astype(F32) + y16.astype(F32) * F32(a)).astype(HALF), (is_const(y),)


def _add_alpha_vjp(be, g, saved, alpha):
    """gx = g, gy = g * alpha with alpha in float32 (torch's VJP: grad.mul(alpha)), rounded"""
    (y_const,) = saved
    with quiet():
        return g, None if y_const else g * (_f32(alpha) if _half(g) else alpha)


def _sub_alpha(be, x, y, alpha):
    """out = x - alpha * y (add's kernel with -alpha)"""
    return _add_alpha(be, x, y, -alpha)


def _sub_alpha_vjp(be, g, saved, alpha):
    return _add_alpha_vjp(be, g, saved, -alpha)


add_alpha = Op("add", _add_alpha, "gx = g, gy = g * alpha", grads=("gx", "gy"),
               broadcasts=True)
add_alpha.defvjp(_add_alpha_vjp)
sub_alpha = Op("sub", _sub_alpha, "gx = g, gy = -g * alpha", grads=("gx", "gy"),
               broadcasts=True)
sub_alpha.defvjp(_sub_alpha_vjp)


# ---- div(rounding_mode="trunc"): one node, as torch's (every float dtype) ----------------------


def _div_trunc(be, x, y):
    """out = trunc(x / y): float16 in float32 (a number or 0-d tensor y a float32), rounded
    once, as torch's kernel; ±inf or NaN where y = 0, without NumPy's warning (torch's)"""
    xp = be.xp
    with quiet():
        if _half(x) or _half(y):
            q = xp.trunc(xp.asarray(x, dtype=F32) / xp.asarray(y, dtype=F32)).astype(HALF)
        else:
            q = xp.trunc(x / y)
    return q, (is_const(x), is_const(y))


def _div_trunc_vjp(be, g, saved):
    """zeros, as torch's (not 0 / 0 = NaN through x / y where y = 0)"""
    x_const, y_const = saved
    return (None if x_const else be.xp.zeros_like(g),
            None if y_const else be.xp.zeros_like(g))


div_trunc = Op("div", _div_trunc, "gx = 0, gy = 0", grads=("gx", "gy"), broadcasts=True,
               promote="float")
div_trunc.defvjp(_div_trunc_vjp)


_FORWARDS = {ew.mul: _mul, ew.div: _div, pw.floor_divide: _floor_divide, ew.power: _power,
             pw.remainder: _remainder, ew.clip: _clip, act.threshold: _threshold,
             act.softshrink: _softshrink, act.hardshrink: _hardshrink,
             act.leaky_relu: _leaky_relu, act.celu: _celu, act.hardtanh: _hardtanh,
             act.softplus: _softplus, pw.logit: _logit}
_VJPS = {ew.mul: _mul_vjp, ew.div: _div_vjp, ew.power: _power_vjp, pw.remainder: _remainder_vjp,
         pw.lerp: _lerp_vjp, act.threshold: _threshold_vjp, act.leaky_relu: _leaky_relu_vjp,
         act.celu: _celu_vjp, act.hardtanh: _hardtanh_vjp, act.softplus: _softplus_vjp,
         pw.logit: _logit_vjp}

# op -> where its float16 form takes a 0-d float32 (float64) tensor as torch's CPU scalar
_AS_NUMBERS = {ew.mul: (0, 1), ew.div: (1,), pw.floor_divide: (1,), div_trunc: (1,)}
dtypes.use_half_ops(half_form, _AS_NUMBERS)
