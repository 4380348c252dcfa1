"""Pointwise math beyond the basics: trigonometry, logs and exponentials in other bases,
rounding, logit, and the binary functions atan2, hypot, logaddexp, copysign, lerp, remainder,
fmod.

Integers become the default float dtype where the result is a real function (sin of an int
tensor is float), and stay integers for rounding, sign, square and the integer remainders, as
in torch. Rounding and sign are flat almost everywhere: their gradient is zero, as torch's is;
frac's is the identity. Every forward sits directly above its VJP.
"""

import math

from ..errors import DTypeError, fmt_shape
from .elementwise import masked
from .op import is_const, op, quiet, quietly, wide
from .samples import binary_grid, case, pos, unary_grid, vals, within

LN2, LN10 = math.log(2), math.log(10)
TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)

# ---- trigonometry ------------------------------------------------------------------------------


@op("sin", "gx = g * cos(x)", promote="float", saves={0: 0},
    samples=unary_grid())
@quietly  # sin ±inf = NaN (cos ±inf in the VJP), as torch
def sin(be, x):
    """out = sin x"""
    return be.xp.sin(x), (x,)


@sin.defvjp
@quietly
def sin_vjp(be, g, saved):
    (x,) = saved
    return (g * be.xp.cos(x),)


@op("cos", "gx = -g * sin(x)", promote="float", saves={0: 0},
    samples=unary_grid())
@quietly  # cos ±inf = NaN (sin ±inf in the VJP), as torch
def cos(be, x):
    """out = cos x"""
    return be.xp.cos(x), (x,)


@cos.defvjp
@quietly
def cos_vjp(be, g, saved):
    (x,) = saved
    return (-g * be.xp.sin(x),)


@op("tan", "gx = g * (1 + out²)", promote="float", saves_out=0,
    samples=unary_grid(low=-1.2, high=1.2))
@quietly  # tan ±inf = NaN; near π/2, out² past the dtype's range: inf, as torch
def tan(be, x):
    """out = tan x"""
    out = be.xp.tan(x)
    return out, (out,)


@tan.defvjp
@quietly
def tan_vjp(be, g, saved):
    (out,) = saved
    return (g * (1 + out * out),)


@op("asin", "gx = g / √(1 - x²)", promote="float", saves={0: 0},
    samples=unary_grid(low=-0.9, high=0.9))
def asin(be, x):
    """out = arcsin x (NaN outside [-1, 1])"""
    with quiet():
        return be.xp.arcsin(x), (x,)


@asin.defvjp
def asin_vjp(be, g, saved):
    (x,) = saved
    with quiet():
        return (g / be.xp.sqrt(1 - x * x),)


@op("acos", "gx = -g / √(1 - x²)", promote="float", saves={0: 0},
    samples=unary_grid(low=-0.9, high=0.9))
def acos(be, x):
    """out = arccos x (NaN outside [-1, 1])"""
    with quiet():
        return be.xp.arccos(x), (x,)


@acos.defvjp
def acos_vjp(be, g, saved):
    (x,) = saved
    with quiet():
        return (-g / be.xp.sqrt(1 - x * x),)


@op("atan", "gx = g / (1 + x²)", promote="float", saves={0: 0},
    samples=unary_grid())
def atan(be, x):
    """out = arctan x"""
    return be.xp.arctan(x), (x,)


@atan.defvjp
def atan_vjp(be, g, saved):
    (x,) = saved
    return (g / (1 + x * x),)


@op("atan2", "gx = g * y / (x² + y²), gy = -g * x / (x² + y²)  (x: input, y: other)",
    grads=("gx", "gy"), broadcasts=True, promote="float", saves={0: 0, 1: 1},
    samples=[case((2, 3), 0.5), *binary_grid()])
def atan2(be, x, y):
    """out = arctan(x / y) in the quadrant of the point (y, x) (torch's atan2(input, other))"""
    return be.xp.arctan2(x, y), (x, y)


@atan2.defvjp
def atan2_vjp(be, g, saved):
    x, y = saved
    xp = be.xp
    with quiet():
        den = x * x + y * y
        # at the origin (or where x² + y² underflows to 0) torch takes 1 / (x² + y²) as 0,
        # so both gradients are 0 there, not 0 * inf = NaN; a subnormal x² + y² still gives
        # inf, as torch's
        r = g * xp.where(den == 0, 0, 1 / den)
        return None if is_const(x) else r * y, None if is_const(y) else -r * x


# ---- hyperbolic functions ----------------------------------------------------------------------


@op("sinh", "gx = g * cosh(x)", promote="float", saves={0: 0},
    samples=unary_grid())
def sinh(be, x):
    """out = sinh x"""
    with quiet():
        return be.xp.sinh(x), (x,)


@sinh.defvjp
def sinh_vjp(be, g, saved):
    (x,) = saved
    with quiet():
        return (g * be.xp.cosh(x),)


@op("cosh", "gx = g * sinh(x)", promote="float", saves={0: 0},
    samples=unary_grid())
def cosh(be, x):
    """out = cosh x"""
    with quiet():
        return be.xp.cosh(x), (x,)


@cosh.defvjp
def cosh_vjp(be, g, saved):
    (x,) = saved
    with quiet():
        return (g * be.xp.sinh(x),)


@op("asinh", "gx = g / √(x² + 1)", promote="float", saves={0: 0},
    samples=unary_grid())
def asinh(be, x):
    """out = arsinh x"""
    return be.xp.arcsinh(x), (x,)


@asinh.defvjp
def asinh_vjp(be, g, saved):
    (x,) = saved
    return (g / be.xp.sqrt(x * x + 1),)


@op("acosh", "gx = g / √(x² - 1)", promote="float", saves={0: 0},
    samples=unary_grid(low=1.1, high=3.0))
def acosh(be, x):
    """out = arcosh x (NaN below 1)"""
    with quiet():
        return be.xp.arccosh(x), (x,)


@acosh.defvjp
def acosh_vjp(be, g, saved):
    (x,) = saved
    with quiet():
        return (g / be.xp.sqrt(x * x - 1),)


@op("atanh", "gx = g / (1 - x²)", promote="float", saves={0: 0},
    samples=unary_grid(low=-0.9, high=0.9))
def atanh(be, x):
    """out = artanh x (±inf at ±1, NaN beyond)"""
    with quiet():
        return be.xp.arctanh(x), (x,)


@atanh.defvjp
def atanh_vjp(be, g, saved):
    (x,) = saved
    with quiet():
        return (g / (1 - x * x),)


# ---- exponentials and logarithms ---------------------------------------------------------------


@op("exp2", "gx = g * out * ln 2", promote="float", saves_out=0,
    samples=unary_grid())
def exp2(be, x):
    """out = 2^x"""
    with quiet():
        out = be.xp.exp2(x)
    return out, (out,)


@exp2.defvjp
def exp2_vjp(be, g, saved):
    (out,) = saved
    return (g * out * LN2,)


@op("expm1", "gx = g * (out + 1)", promote="float", saves_out=0,
    samples=[case(vals([-1e-8, 1e-9, 0.5])), *unary_grid()])
def expm1(be, x):
    """out = e^x - 1 (exact near 0)"""
    with quiet():
        out = be.xp.expm1(x)
    return out, (out,)


@expm1.defvjp
def expm1_vjp(be, g, saved):
    (out,) = saved
    return (g * (out + 1),)


@op("log2", "gx = g / (x ln 2)", promote="float", saves={0: 0},
    samples=unary_grid(positive=True))
def log2(be, x):
    """out = log₂ x"""
    with quiet():
        return be.xp.log2(x), (x,)


@log2.defvjp
def log2_vjp(be, g, saved):
    (x,) = saved
    with quiet():
        return (g / (x * LN2),)


@op("log10", "gx = g / (x ln 10)", promote="float", saves={0: 0},
    samples=unary_grid(positive=True))
def log10(be, x):
    """out = log₁₀ x"""
    with quiet():
        return be.xp.log10(x), (x,)


@log10.defvjp
def log10_vjp(be, g, saved):
    (x,) = saved
    with quiet():
        return (g / (x * LN10),)


@op("log1p", "gx = g / (1 + x)", promote="float", saves={0: 0},
    samples=[case(vals([1e-9, -1e-8, 0.5])), *unary_grid(positive=True)])
def log1p(be, x):
    """out = ln(1 + x) (exact near 0)"""
    with quiet():
        return be.xp.log1p(x), (x,)


@log1p.defvjp
def log1p_vjp(be, g, saved):
    (x,) = saved
    with quiet():
        return (g / (1 + x),)


@op("logaddexp", "gx = g / (1 + e^(y - x)), gy = g / (1 + e^(x - y))",
    grads=("gx", "gy"), broadcasts=True, promote="float", saves={0: 0, 1: 1},
    samples=[case(vals([1000.0, -1000.0, 0.0]), vals([999.0, -1001.0, 0.0])), case((3,), 2.0),
             *binary_grid()])
def logaddexp(be, x, y):
    """out = log(e^x + e^y), without overflow"""
    with quiet():  # (NaN in: NaN out, as torch, without NumPy's warning)
        return be.xp.logaddexp(x, y), (x, y)


@logaddexp.defvjp
def logaddexp_vjp(be, g, saved):
    x, y = saved
    # torch's form: e^(x - out) would be e^(inf - inf) = NaN for x = inf; this gives 1 and 0
    # there (NaN only for x = y = ±inf, as torch), and e^(y - x) = inf far from 0 gives 0
    with quiet():
        return (None if is_const(x) else g / (1 + be.xp.exp(y - x)),
                None if is_const(y) else g / (1 + be.xp.exp(x - y)))


@op("erf", "gx = g * 2/√π * e^(-x²)", promote="float", saves={0: 0},
    samples=[case(vals([-4.0, -0.3, 0.0, 1.5, 6.0])), *unary_grid()])
def erf(be, x):
    """out = 2/√π ∫₀ˣ e^(-t²) dt"""
    out = be.xp.asarray(be.erf(x))
    if x.dtype.itemsize < 8:  # the backend's float32 erf is 1 - t e^(...): near 0 that
        # cancels (erf(1e-6) 10% off, 0 below 1e-7); its Taylor series keeps every digit there
        xp, xw = be.xp, wide(x)
        near = xp.where(xp.abs(xw) < 0.5, xw, 0)
        series = near * _poly_of(near * near, ERF_SERIES)
        out = xp.where(xp.abs(xw) < 0.5, series, out).astype(x.dtype, copy=False)
    return out, (x,)


# erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n + 1)): to |x| = 1/2 nine terms are exact in float32
ERF_SERIES = [TWO_OVER_SQRT_PI * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(9)]


def _poly_of(t, coefs):
    """coefs[0] + coefs[1] t + coefs[2] t² + ... (Horner)."""
    out = coefs[-1]
    for c in reversed(coefs[:-1]):
        out = out * t + c
    return out


@erf.defvjp
def erf_vjp(be, g, saved):
    (x,) = saved
    return (g * TWO_OVER_SQRT_PI * be.xp.exp(-x * x),)


@op("logit", "gx = g / (x (1 - x)) (0 outside [eps, 1 - eps] with eps; NaN outside [0, 1])",
    promote="float", saves={0: 0},
    samples=[case(within((2, 3), 0.05, 0.95)), case(within((3,), 0.05, 0.95), eps=0.2),
             case(vals([0.05, 0.5, 0.7]), eps=0.1)])
def logit(be, x, eps=None):
    """out = log(x / (1 - x)), x clamped to [eps, 1 - eps] first when eps is given"""
    xp = be.xp
    # torch's clamp: x < eps to eps, then x > 1 - eps to 1 - eps (so eps > 1/2 gives eps
    # everywhere; NumPy's clip with min > max gives max)
    z = x if eps is None else xp.where(x < eps, eps, xp.where(x > 1 - eps, 1 - eps, x))
    with quiet():  # (±inf at 0 and 1, NaN outside [0, 1], as torch)
        return xp.log(z / (1 - z)), (x,)


@logit.defvjp
def logit_vjp(be, g, saved, eps=None):
    (x,) = saved
    xp = be.xp
    with quiet():  # torch's: inf at x = 0 and 1 (g / 0), not NaN
        gx = g / (x * (1 - x))
    if eps is None:  # outside [0, 1] the function is NaN, and so is its gradient (torch's)
        return (xp.where((x < 0) | (x > 1), float("nan"), gx),)
    return (xp.where((x < eps) | (x > 1 - eps), 0, gx),)  # clamped: flat there


# ---- powers --------------------------------------------------------------------------------------


@op("square", "gx = 2 * g * x", saves={0: 0},
    samples=unary_grid())
def square(be, x):
    """out = x² (integers stay integers, as in torch; bools become int64, as torch's
    pow(x, 2), where NumPy's x * x would be their logical and)"""
    if x.dtype == bool:
        x = x.astype("int64")
    return x * x, (x,)


@square.defvjp
def square_vjp(be, g, saved):
    (x,) = saved
    return (2 * g * x,)


@op("rsqrt", "gx = -g * out³ / 2", promote="float", saves_out=0,
    samples=unary_grid(positive=True))
def rsqrt(be, x):
    """out = 1 / √x"""
    with quiet():
        out = 1 / be.xp.sqrt(x)
    return out, (out,)


@rsqrt.defvjp
def rsqrt_vjp(be, g, saved):
    (out,) = saved
    return (-0.5 * g * out * out * out,)


@op("reciprocal", "gx = -g * out²", promote="float", saves_out=0,
    samples=[case(pos((2, 3))), case(vals([-2.0, 0.5, 4.0])), case(pos(()))])
def reciprocal(be, x):
    """out = 1 / x"""
    with quiet():
        out = 1 / x
    return out, (out,)


@reciprocal.defvjp
def reciprocal_vjp(be, g, saved):
    (out,) = saved
    return (-g * out * out,)


# ---- rounding and sign: flat almost everywhere, so zero gradients (torch's) ------------------


def _zero_vjp(be, g, saved, **params):
    """A flat function's VJP: gx = 0."""
    return (be.xp.zeros_like(g),)


def _whole(x, name):
    """Integer tensors come back from rounding unchanged, as in torch; bool ones are refused,
    as torch has no bool rounding."""
    if x.dtype.kind == "b":
        raise DTypeError(f"{name}: not implemented for bool tensors (torch's rule); convert "
                         "with .long() or .float() first")
    return x.dtype.kind in "iu"


@op("floor", "gx = 0", samples=unary_grid())
def floor(be, x):
    """out = ⌊x⌋"""
    return (x.copy() if _whole(x, "floor") else be.xp.floor(x)), ()


floor.defvjp(_zero_vjp)


@op("ceil", "gx = 0", samples=unary_grid())
def ceil(be, x):
    """out = ⌈x⌉"""
    return (x.copy() if _whole(x, "ceil") else be.xp.ceil(x)), ()


ceil.defvjp(_zero_vjp)


@op("trunc", "gx = 0", samples=unary_grid())
def trunc(be, x):
    """out = x rounded toward zero"""
    return (x.copy() if _whole(x, "trunc") else be.xp.trunc(x)), ()


trunc.defvjp(_zero_vjp)


@op("round", "gx = 0", samples=[case((2, 3), decimals=1), *unary_grid()])
def round_even(be, x, decimals=0):
    """out = x rounded to `decimals` places, halves to even (torch's and NumPy's rule)"""
    if _whole(x, "round") and decimals >= 0:
        return x.copy(), ()
    if decimals and x.dtype.itemsize == 2:  # float16 scaled in float32, as torch: 1000 * 100
        with quiet():  # overflowed float16 (inf); back past 65504: inf, as torch's, quietly
            return be.xp.round(wide(x), decimals).astype(x.dtype), ()
    return be.xp.round(x, decimals), ()


round_even.defvjp(_zero_vjp)


@op("sign", "gx = 0", samples=unary_grid())
def sign(be, x):
    """out = -1, 0 or 1 by the sign of x (0 for NaN and -0.0, +0.0 as torch's)"""
    if x.dtype == bool:
        return x.copy(), ()
    if x.dtype.kind != "f":
        return be.xp.sign(x), ()
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype), ()  # (NaN compares False)


sign.defvjp(_zero_vjp)


@op("frac", "gx = g", samples=unary_grid())
@quietly  # frac ±inf = inf - inf = NaN, as torch
def frac(be, x):
    """out = x - trunc(x), the fractional part with x's sign"""
    return x - be.xp.trunc(x), ()


@frac.defvjp
def frac_vjp(be, g, saved):
    return (g,)


# ---- binary functions --------------------------------------------------------------------------


@op("hypot", "gx = g * x / out, gy = g * y / out",
    grads=("gx", "gy"), broadcasts=True, promote="float", saves={0: 0, 1: 1}, saves_out=2,
    samples=[case((2, 3), 2.0), *binary_grid()])
def hypot(be, x, y):
    """out = √(x² + y²), without overflow"""
    out = be.xp.hypot(x, y)
    return out, (x, y, out)


@hypot.defvjp
def hypot_vjp(be, g, saved):
    x, y, out = saved
    with quiet():  # (at the origin 0 / 0 = NaN, torch's gradient there too)
        r = g / out
        return None if is_const(x) else r * x, None if is_const(y) else r * y


@op("copysign", "gx = g * out / x (0 where x = 0), gy = 0", grads=("gx", "gy"), broadcasts=True,
    promote="float", saves={0: 0}, saves_out=1,
    samples=[case((2, 3), -1.0), case((3,), vals([-1.0, 2.0, -0.5])), *binary_grid()])
def copysign(be, x, y):
    """out = |x| with the sign of y"""
    out = be.xp.copysign(x, y)
    return out, (x, out, is_const(y))


@copysign.defvjp
def copysign_vjp(be, g, saved):
    x, out, y_const = saved
    xp = be.xp
    with quiet():  # (torch's formula: ±1, but NaN at x = ±inf or NaN, inf / inf)
        gx = g * xp.where(x == 0, 0, out / x)
    return None if is_const(x) else gx, None if y_const else xp.zeros_like(g)


def _lerp_dtypes(start, end, weight):
    """torch's rule for lerp: floating-point tensors of one dtype. end, if a tensor, must have
    start's dtype (0-d too), and so must a weight tensor with dims; a 0-d weight and Python
    numbers may be of any float dtype. (Promoting instead would compute float16 lerps in
    float32 and hand back a dtype the caller did not ask for.)"""
    if start.dtype.kind != "f":
        raise DTypeError(f"lerp: needs floating-point tensors, got start {start.dtype} (torch "
                         "has no integer lerp); convert it with .float()")
    for name, v in (("end", end), ("weight", weight)):
        dtype = getattr(v, "dtype", None)
        if dtype is None or dtype == start.dtype or name == "weight" and v.ndim == 0 \
                and dtype.kind == "f":
            continue
        raise DTypeError(f"lerp: {name} is {dtype} {fmt_shape(v.shape)} but start is "
                         f"{start.dtype} {fmt_shape(start.shape)}: expected dtype "
                         f"{start.dtype} for {name} (torch's rule: start, end and a weight "
                         f"tensor share one dtype); convert one with .to()")


@op("lerp", "gs = g * (1 - w), ge = g * w, gw = g * (end - start)",
    grads=("gs", "ge", "gw"), broadcasts=True, saves={0: 0, 1: 1, 2: 2},
    samples=[case((2, 3), (2, 3), 0.3), case((3,), (2, 3), (2, 1)), case((), (3,), ()),
             case((2, 1), (3,), 0.75),
             case((2, 3), (2, 3), vals([[0.2, 0.7, -0.6], [1.0, 0.49, 1.5]]))])
def lerp(be, start, end, weight):
    """out = start + weight * (end - start) where |weight| < 0.5, else
    end - (end - start) * (1 - weight): torch's two forms, each exact at its own end (so
    lerp(1e16, 1, 1) is 1, not 1e16 + (1 - 1e16) = 0); float16 computed in float32"""
    _lerp_dtypes(start, end, weight)
    dtype = start.dtype
    with quiet():  # (a float16 weight past 65504: inf, as torch's, without NumPy's warning)
        if getattr(weight, "ndim", None) == 0 and weight.dtype != dtype:
            weight = weight.astype(dtype)  # (a 0-d float64 weight must not widen the result)
    s, e, w = wide(start), wide(end) if hasattr(end, "dtype") else end, weight
    if hasattr(w, "dtype"):
        w = wide(w)
    with quiet():  # (inf - inf in end - start: NaN, as torch, without NumPy's warning)
        diff = e - s
        if is_const(w):  # one form for the whole tensor
            out = s + w * diff if abs(w) < 0.5 else e - diff * (1 - w)
        else:
            out = be.xp.where(be.xp.abs(w) < 0.5, s + w * diff, e - diff * (1 - w))
        out = out.astype(dtype, copy=False)  # (float16: inf past 65504, quietly)
    return out, (start, end, weight)


@lerp.defvjp
def lerp_vjp(be, g, saved):
    start, end, weight = saved
    with quiet():  # (end - start of infinities: NaN, as torch)
        return (None if is_const(start) else g * (1 - weight),
                None if is_const(end) else g * weight,
                None if is_const(weight) else g * (end - start))


def _nonzero_int_divisor(be, x, y, name):
    """Integer division by zero is an error (as torch on the CPU); NumPy quietly gives 0. Two
    bools (the promoted operands both bool) are refused: torch has no bool division."""
    if getattr(x, "dtype", getattr(y, "dtype", None)) == bool:
        raise DTypeError(f"{name}: not implemented for bool tensors (torch's rule); convert "
                         "with .long() first")
    if _integral(x) and _integral(y) and not be.xp.all(y):
        raise ZeroDivisionError(f"{name}: integer division by zero")


def _integral(v):
    return v.dtype.kind in "iub" if hasattr(v, "dtype") else isinstance(v, int)


@op("remainder", "gx = g, gy = -g * (x // y)", grads=("gx", "gy"), broadcasts=True,
    promote="wrap", saves={0: 0, 1: 1},
    samples=[case((2, 3), 0.7), case(3.5, pos((3,))), *binary_grid(second=pos)])
def remainder(be, x, y):
    """out = x - y * floor(x / y), with the sign of y (Python's %)"""
    _nonzero_int_divisor(be, x, y, "remainder")
    with quiet():
        return be.xp.remainder(x, y), (x, y)


@remainder.defvjp
def remainder_vjp(be, g, saved):
    x, y = saved
    with quiet():
        # (x // y, the quotient the forward used: floor(x / y) rounds 1.0 / 0.1 up to 10)
        return None if is_const(x) else g, None if is_const(y) else -g * be.xp.floor_divide(x, y)


@op("fmod", "gx = g, gy = -g * trunc(x / y)", grads=("gx", "gy"), broadcasts=True,
    promote="wrap", saves={0: 0, 1: 1},
    samples=[case((2, 3), 0.7), case(-3.5, pos((3,))), *binary_grid(second=pos)])
def fmod(be, x, y):
    """out = x - y * trunc(x / y), with the sign of x (C's fmod)"""
    _nonzero_int_divisor(be, x, y, "fmod")
    with quiet():
        return be.xp.fmod(x, y), (x, y)


@fmod.defvjp
def fmod_vjp(be, g, saved):
    x, y = saved
    with quiet():
        return None if is_const(x) else g, None if is_const(y) else -g * be.xp.trunc(x / y)


@op("floor_divide", "gx = 0, gy = 0", grads=("gx", "gy"), broadcasts=True, promote="wrap",
    samples=[case((2, 3), 0.7), case(3.5, pos((3,))), *binary_grid(second=pos)])
def floor_divide(be, x, y):
    """out = floor(x / y) (Python's //); flat almost everywhere, so zero gradients"""
    _nonzero_int_divisor(be, x, y, "floor_divide")
    with quiet():
        return be.xp.floor_divide(x, y), (is_const(x), is_const(y))


@floor_divide.defvjp
def floor_divide_vjp(be, g, saved):
    x_const, y_const = saved
    zero = be.xp.zeros_like(g)
    return None if x_const else zero, None if y_const else zero


@op("clamp", "gx = g * [min <= x <= max], gmin = g * [x < min < max], "
    "gmax = g * [x > max or max < min]", grads=("gx", "gmin", "gmax"), broadcasts=True,
    promote="common", saves={0: 0, 1: 1, 2: 2},
    samples=[case((2, 3), (2, 3), (2, 3)), case((3,), (2, 1), None), case((2, 3), None, (3,)),
             case(vals([-2.0, 0.0, 2.0]), vals([-1.0, 1.0, 3.0]), vals([1.0, 0.5, 2.5]))])
def clamp(be, x, min=None, max=None):  # noqa: A002 - torch's argument names
    """out = min(max(x, min), max) with tensor bounds (max wins where min > max, as in torch)"""
    if min is None and max is None:
        raise ValueError("clamp: needs min, max or both")
    out = x if min is None else be.xp.maximum(x, min)
    out = out if max is None else be.xp.minimum(out, max)
    return out, (x, min, max)


@clamp.defvjp
def clamp_vjp(be, g, saved):
    x, lo, hi = saved
    inside = True if lo is None else x >= lo
    if hi is not None:
        inside = inside & (x <= hi)
    xp = be.xp  # (each gradient exactly 0 where masked, whatever g is: torch selects)
    gx = None if is_const(x) else masked(xp, g, inside)
    glo = ghi = None
    if lo is not None and not is_const(lo):
        below = x < lo if hi is None else (x < lo) & (lo < hi)
        glo = masked(xp, g, below)
    if hi is not None and not is_const(hi):
        above = x > hi if lo is None else (x > hi) | (hi < lo)
        ghi = masked(xp, g, above)
    return gx, glo, ghi


OPS = (sin, cos, tan, asin, acos, atan, atan2, sinh, cosh, asinh, acosh, atanh, exp2, expm1,
       log2, log10, log1p, logaddexp, erf, logit, square, rsqrt, reciprocal, floor, ceil, trunc,
       round_even, sign, frac, hypot, copysign, lerp, remainder, fmod, floor_divide, clamp)
