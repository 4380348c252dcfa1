"""Elementwise ops: arithmetic, the usual unary functions, maximum/minimum, where and clip.

Binary ops broadcast like NumPy; their gradients come back at the broadcast shape and autograd
sums them to each input's shape (`sum_to`). A Python number operand is a constant of the graph
(`is_const`), so its gradient is never computed. Every forward sits directly above its VJP.
"""

import contextlib
import math
import operator

import numpy as np

from ..dtypes import HALF, refuse_bool_subtraction
from ..errors import DTypeError
from . import traps
from .op import CONST, is_const, op, quiet, quietly, wide
from .samples import binary_grid, case, const, pos, unary_grid, vals
from .views import laid_out_as


def masked(xp, g, keep):
    """g where keep, else exactly 0 whatever g holds, as torch selects (g * keep would turn an
    infinite or NaN g into inf * 0 = NaN where keep is False). The product is exact while g is
    finite, the common case, and on NumPy ~4x faster than where on a mixed mask; where else."""
    if xp.isfinite(g).all():
        return g * keep
    return xp.where(keep, g, 0)

# ---- arithmetic ---------------------------------------------------------------------------------


@op("add", "gx = g, gy = g", grads=("gx", "gy"), broadcasts=True, promote="wrap",
    traps=traps.float_mask_added,
    samples=[case((2, 3), 1.5), case(2.0, (3,)), *binary_grid()])
def add(be, x, y):
    """out = x + y"""
    # (a Python number goes in as the backend's operand for it: Backend.number)
    if CONST[y.__class__]:
        return x + be.number(y, x), ()
    if CONST[x.__class__]:
        return be.number(x, y) + y, ()
    return x + y, ()


@add.defvjp
def add_vjp(be, g, saved):
    return g, g


@op("sub", "gx = g, gy = -g", grads=("gx", "gy"), broadcasts=True, promote="wrap",
    traps=traps.float_mask_added,
    samples=[case((2, 3), 0.5), case(1.0, (2, 3)), *binary_grid()])
def sub(be, x, y):
    """out = x - y"""
    if CONST[y.__class__]:  # (is_const, read inline; the number as in add)
        if y.__class__ is bool:  # (x - True: a float tensor's reaches here unpromoted)
            refuse_bool_subtraction((y,))
        return x - be.number(y, x), (True,)
    if CONST[x.__class__]:
        if x.__class__ is bool:
            refuse_bool_subtraction((x,))
        return be.number(x, y) - y, (False,)
    return x - y, (False,)


@sub.defvjp
def sub_vjp(be, g, saved):
    (y_const,) = saved
    return g, None if y_const else -g


@op("mul", "gx = g * y, gy = g * x",
    grads=("gx", "gy"), broadcasts=True, promote="wrap", saves={0: 0, 1: 1}, fresh=True,
    samples=[case((2, 3), 3.0), case(-2.0, (3,)), *binary_grid()])
def mul(be, x, y):
    """out = x * y"""
    # each factor is kept only for the other's gradient (a constant factor needs none)
    # (is_const, read inline; the number as in add, and again in the VJP)
    if CONST[y.__class__]:
        return x * be.number(y, x), (None, y, False, True)
    if CONST[x.__class__]:
        return be.number(x, y) * y, (x, None, True, False)
    return x * y, (x, y, False, False)


@mul.defvjp
def mul_vjp(be, g, saved):
    x, y, x_const, y_const = saved
    if y_const:
        return g * be.number(y, g), None
    if x_const:
        return None, g * be.number(x, g)
    return g * y, g * x


@op("div", "gx = g / y, gy = -g * x / y²",
    grads=("gx", "gy"), broadcasts=True, promote="float", saves={0: 0, 1: 1},
    samples=[case((2, 3), 4.0), case(2.0, pos((2, 3))), *binary_grid(second=pos)])
@quietly  # x / 0 = ±inf, 0 / 0 = NaN (and in the VJP), as torch
def div(be, x, y):
    """out = x / y"""
    if CONST[x.__class__]:  # c / y keeps r = 1/y, not y (torch's reciprocal): gy = -g c r²
        r = be.number(1, y) / y  # (the numbers as in add)
        return be.number(x, r) * r, (x, r)
    if CONST[y.__class__]:  # (x only for gy, as mul)
        return x / be.number(y, x), (None, y)
    return x / y, (x, y)


@div.defvjp
@quietly
def div_vjp(be, g, saved):
    x, y = saved
    # (rounded as torch's: a micrograd tanh written (e - 1) / (e + 1) gets 0.5, not 0.4999...)
    if CONST[x.__class__]:  # (is_const, read inline, as in the forward)
        r = y  # torch's c / y is y.reciprocal() * c: gy = -(g c) (r r)
        return None, -(g * be.number(x, g)) * (r * r)
    if CONST[y.__class__]:
        return g / be.number(y, g), None
    return g / y, -g * (x / y / y)


@op("neg", "gx = -g",
    samples=unary_grid())
def neg(be, x):
    """out = -x"""
    return -x, ()


@neg.defvjp
def neg_vjp(be, g, saved):
    return (-g,)


@op("pow", "gx = g * y * x^(y-1), gy = g * x^y * log(x)",
    grads=("gx", "gy"), broadcasts=True, promote="common",
    saves={0: 0, 1: 1}, saves_out=2,
    samples=[case(pos((2, 3)), 3), case(pos((2, 3)), 0.5), case(2.0, (2, 3)),
             case(vals([0.0, 1.5, -2.0]), 2), *binary_grid(first=pos)])
def power(be, x, y):
    """out = x ** y"""
    if _whole_power(y):  # x², x³, ...: no inf or NaN to come from the power itself
        out = x**y
    elif _integer_exponents(x, y):
        out = _integer_power(be.xp, x, y)
    else:
        with quiet():  # 0 ** -1 is inf, (-1) ** 0.5 is NaN, as in torch
            out = _number_power(be.xp, x, y) if is_const(y) else x**y
    # x ** c (c a number) keeps no output, as torch's pow.Tensor_Scalar (its gradient needs x
    # alone, so the output may change in place before backward); c ** x and x ** y keep it for
    # y's gradient, as torch's pow.Scalar and pow.Tensor_Tensor
    return out, (x, y, None if is_const(y) else out)


def _integer_exponents(x, y):
    """Whether y is an integer array (not a number) and x an integer too: torch computes such a
    power even where y < 0, which NumPy refuses. (A negative number exponent stays refused by
    NumPy, and Tensor.pow turns that into torch's error.)"""
    return (hasattr(y, "dtype") and y.dtype.kind in "iu"
            and (x.dtype.kind in "iu" if hasattr(x, "dtype") else isinstance(x, int)))


def _integer_power(xp, x, y):
    """x ** y for integers, with torch's values where y < 0: 1 for x = 1, ±1 by y's parity for
    x = -1, and 0 for any other x (1 / x^-y truncated toward zero; 0 ** -1 too, as torch)."""
    negative = y < 0
    out = x ** xp.where(negative, 0, y)
    if not negative.any():
        return out
    sign = xp.where(y % 2 != 0, -1, 1)  # (-1) ** y
    small = xp.where(x == 1, 1, xp.where(x == -1, sign, 0))
    return xp.where(negative, small, out).astype(out.dtype, copy=False)


@power.defvjp
def power_vjp(be, g, saved):
    x, y, out = saved
    xp = be.xp
    gx = gy = None
    with contextlib.nullcontext() if _whole_power(y) else quiet():
        if not is_const(x):
            if is_const(y):
                gx = g * (y * _number_power(xp, x, y - 1)) if y != 0 else xp.zeros_like(g)
            else:  # x^0 is constant in x, even at x = 0 where y * x^(y-1) would be 0 * inf
                gx = xp.where(y == 0, 0, g * (y * x ** (y - 1)))  # (0, not g * 0)
        if not is_const(y):
            # torch's rule: 0 where x = 0 and y >= 0 (0^y is flat there), else x^y log x
            # (-inf at x = 0 with y < 0, NaN for x < 0)
            log_x = xp.log(x) if not is_const(x) else _log(x)
            gy = g * xp.where((x == 0) & (y >= 0), 0, out * log_x)
    return gx, gy


def _number_power(xp, x, c):
    """x ** c for a number c, with torch's values at -0.0 and -inf: its float32 and float64
    kernels take c = -0.5 as rsqrt ((-0.0) ** -0.5 = -inf, (-inf) ** -0.5 = NaN, where C's pow
    gives inf and 0) and c = 0.5 as sqrt (NumPy's too); its float16 one is C's pow, where NumPy
    takes sqrt for 0.5 ((-inf) ** 0.5 = inf, (-0.0) ** 0.5 = +0.0). Call it quietly."""
    if c == -0.5 and x.dtype.itemsize > 2:
        return 1 / xp.sqrt(x)
    if c == 0.5 and x.dtype.itemsize == 2:
        return xp.where(x == -xp.inf, xp.inf, xp.sqrt(x)) + 0  # (+ 0: -0.0 becomes +0.0)
    return x**c


def _whole_power(y):
    """Whether y is a constant whole number >= 0 (x ** y and its gradient stay finite)."""
    return is_const(y) and y >= 0 and float(y).is_integer()


def _log(c):
    """log of a Python number, with the IEEE values at 0 and below."""
    return math.log(c) if c > 0 else float("-inf") if c == 0 else float("nan")


# ---- unary functions ----------------------------------------------------------------------------


@op("exp", "gx = g * out", promote="float", saves_out=0,
    samples=unary_grid())
@quietly  # e^1000 = inf (g * inf in the VJP), as torch
def exp(be, x):
    """out = e^x"""
    out = be.xp.exp(x)
    return out, (out,)


@exp.defvjp
@quietly
def exp_vjp(be, g, saved):
    (out,) = saved
    return (g * out,)


@op("log", "gx = g / x", promote="float", saves={0: 0},
    samples=unary_grid(positive=True))
@quietly  # log 0 = -inf, log -1 = NaN, and g / 0 in the VJP, as torch
def log(be, x):
    """out = ln x"""
    return be.xp.log(x), (x,)


@log.defvjp
@quietly
def log_vjp(be, g, saved):
    (x,) = saved
    return (g / x,)


@op("sqrt", "gx = g / (2 * out)", promote="float", saves_out=0,
    samples=unary_grid(positive=True))
@quietly  # √-1 = NaN, as torch (its VJP's g / 0 is quiet below)
def sqrt(be, x):
    """out = √x"""
    out = be.xp.sqrt(x)
    return out, (out,)


@sqrt.defvjp
def sqrt_vjp(be, g, saved):
    (out,) = saved
    with quiet():  # at x = 0: inf (as torch), where a clamp(min=0) or relu before it sends 0
        return (g / (2 * out),)


@op("tanh", "gx = g * (1 - out²)", promote="float", saves_out=0,
    samples=unary_grid())
def tanh(be, x):
    """out = tanh x"""
    out = be.xp.tanh(x)
    return out, (out,)


@tanh.defvjp
def tanh_vjp(be, g, saved):
    (out,) = saved
    # torch's g (1 - out²), with the 1 a 0-d array of out's dtype where out is a NumPy array:
    # the same bits as the Python number 1, which NumPy 2 takes ~0.4 us longer to mix in (a
    # tenth of the time per op on tiny arrays). (g - (g out) out, as quick, loses digits in
    # float32 where out² nears 1.)
    one = _ONES.get(out.dtype, 1) if out.__class__ is np.ndarray else 1
    return (g * (one - out * out),)


# 0-d ones by dtype (read-only, shared), for the VJPs above that subtract from 1 (see tanh_vjp)
_ONES = {np.dtype(t): np.ones((), t) for t in (np.float16, np.float32, np.float64)}
for _one in _ONES.values():
    _one.flags.writeable = False


@op("sigmoid", "gx = g * out * (1 - out)", promote="float", saves_out=0,
    samples=[case(vals([-40.0, -1.0, 0.0, 2.0, 40.0])), *unary_grid()])
def sigmoid(be, x):
    """out = 1 / (1 + e^-x), accurate in both tails (sigmoid_of)"""
    out = sigmoid_of(be.xp, wide(x)).astype(x.dtype, copy=False)
    return out, (out,)


@sigmoid.defvjp
def sigmoid_vjp(be, g, saved):
    (out,) = saved
    return (g * out * (1 - out),)


def sigmoid_of(xp, x):
    """σ(x) as 1 / (1 + e^-x), accurate in both tails: far left of 0 it keeps every digit of a
    tiny σ(x), where (1 + tanh(x/2)) / 2 rounded to 0 (float32 at -17, float64 at -37). Past
    that, e^-x is inf and σ = 1 / inf = 0, where the true σ is below the dtype's smallest
    number anyway: the values of torch's formula, which this is (and of the gelu kernels' σ).
    For float16 give it wide(x): e^-17 is below float16's smallest number, and torch computes
    it in float32 too."""
    with quiet():  # (e^-x = inf: no warning, as torch)
        return 1 / (1 + xp.exp(-x))


@op("relu", "gx = g * [x > 0 or x is NaN]", saves_out=0,
    samples=unary_grid())
def relu(be, x):
    """out = max(x, 0)"""
    if x.dtype.kind == "b":  # (NumPy's maximum(True, 0) is int64; torch refuses bool)
        raise DTypeError("relu: bool inputs are not supported (torch's rule); convert them "
                         "with .long() or .float()")
    out = be.xp.maximum(x, 0)
    return out, (out,)


@relu.defvjp
def relu_vjp(be, g, saved):
    (out,) = saved  # out != 0: x > 0, or NaN (torch's g there too)
    return (masked(be.xp, g, out != 0),)


@op("abs", "gx = g * sgn(x) (0 at NaN, as torch)", saves={0: 0},
    samples=unary_grid())
def absolute(be, x):
    """out = |x|"""
    if x.dtype.kind == "b":  # (NumPy's abs of bools is themselves; torch refuses them)
        raise DTypeError("abs: not implemented for bool tensors (torch's rule); convert them "
                         "with .long() or .float()")
    return be.xp.abs(x), (x,)


@absolute.defvjp
def absolute_vjp(be, g, saved):
    (x,) = saved
    return (g * sgn(be.xp, x),)


def sgn(xp, x):
    """sign(x) with torch's sgn(NaN) = 0: the gradient of |x| (and of the norms made of it) at
    a NaN entry is 0, as torch's, not NaN. The signs' sum is NaN exactly when one is (they
    are -1, 0, 1 otherwise), a pass with no array made: the NaN-free case pays only that.
    (float16 signs are summed in float32: 65505 of them overflow float16.)"""
    s = xp.sign(x)
    if xp.isnan(s.sum(dtype=xp.float32) if s.dtype.char == "e" else s.sum()):
        return xp.where(xp.isnan(s), 0, s).astype(s.dtype, copy=False)
    return s


# ---- choosing between values --------------------------------------------------------------------


def _split_ties(be, g, x, y, loses):
    """The gradients of max(x, y) (loses: <) or min(x, y) (loses: >): g to the winner, exactly
    0 to the loser, half to each on a tie; a NaN loses to nothing, so both get g (torch's)."""
    xp = be.xp
    shared = xp.where(x == y, g * 0.5, g)
    return (None if is_const(x) else masked(xp, shared, ~loses(x, y)),
            None if is_const(y) else masked(xp, shared, ~loses(y, x)))


@op("maximum", "gx = g * [x >= y] (g/2 on ties), gy = g * [y >= x] (g/2 on ties)",
    grads=("gx", "gy"), broadcasts=True,
    promote="common", saves={0: 0, 1: 1},
    samples=[case(vals([1.0, 2.0, 3.0]), vals([1.0, 0.0, 5.0])), case((2, 3), 0.0), *binary_grid()])
def maximum(be, x, y):
    """out = max(x, y) elementwise"""
    return be.xp.maximum(x, y), (x, y)


@maximum.defvjp
def maximum_vjp(be, g, saved):
    x, y = saved
    return _split_ties(be, g, x, y, operator.lt)


@op("minimum", "gx = g * [x <= y] (g/2 on ties), gy = g * [y <= x] (g/2 on ties)",
    grads=("gx", "gy"), broadcasts=True,
    promote="common", saves={0: 0, 1: 1},
    samples=[case(vals([1.0, 2.0, 3.0]), vals([1.0, 0.0, 5.0])), case((2, 3), 0.0), *binary_grid()])
def minimum(be, x, y):
    """out = min(x, y) elementwise"""
    return be.xp.minimum(x, y), (x, y)


@minimum.defvjp
def minimum_vjp(be, g, saved):
    x, y = saved
    return _split_ties(be, g, x, y, operator.gt)


@op("where", "gx = where(cond, g, 0), gy = where(cond, 0, g)",
    grads=(None, "gx", "gy"), broadcasts=True, nondiff=(0,),
    promote="common", saves={0: 0},
    samples=[case(const([[True, False, True], [False, False, True]]), (2, 3), (2, 3)),
             case(const([True, False, True]), (2, 3), 0.0),
             case(const([[True], [False]]), (3,), (2, 1))])
def where(be, cond, x, y):
    """out = x where cond else y"""
    if getattr(cond, "dtype", None) != bool:
        raise TypeError(f"the condition must be a bool tensor, got {getattr(cond, 'dtype', cond)}")
    return be.xp.where(cond, x, y), (cond, is_const(x), is_const(y))


@where.defvjp
def where_vjp(be, g, saved):
    cond, x_const, y_const = saved
    xp = be.xp
    return (None, None if x_const else xp.where(cond, g, 0),
            None if y_const else xp.where(cond, 0, g))


@op("clip", "gx = g * [min <= x <= max]", saves={0: 0},
    samples=[case((3, 4), min=-0.5, max=0.5), case((3, 4), min=0.0), case((5,), max=0.2)])
def clip(be, x, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    """out = min(max(x, min), max)"""
    if min is None and max is None:
        raise ValueError("clip needs min, max or both")
    return be.xp.clip(x, min, max), (x,)


@clip.defvjp
def clip_vjp(be, g, saved, min=None, max=None):  # noqa: A002
    (x,) = saved
    inside = True
    if min is not None:
        inside = x >= min
    if max is not None:
        inside = inside & (x <= max)
    return (masked(be.xp, g, inside),)


@op("clone", "gx = g",
    samples=[case((2, 3)), case(())])
def clone(be, x, keep_layout=False):
    """out = a copy of x in memory of its own (keep_layout: laid out as x's, dims in x's
    order of strides, torch's preserve_format; else row-major)"""
    return laid_out_as(be.xp, x, x) if keep_layout else x.copy(), ()


@clone.defvjp
def clone_vjp(be, g, saved, keep_layout=False):
    return (g,)


def _cast_float64(params):
    """graphcheck re-runs a float-to-float cast in float64 (an int target stays)."""
    float_target = np.dtype(params["dtype"]).kind == "f"
    return {**params, "dtype": np.float64} if float_target else params


@op("cast", "gx = g converted back to x.dtype", float64_params=_cast_float64,
    samples=[case((2, 3), dtype=np.float64)])
def cast(be, x, dtype):
    """out = x converted to dtype (float to float: the gradient flows back)"""
    if dtype is not HALF:
        return x.astype(dtype), (x.dtype,)
    with quiet():  # (past 65504: inf, as torch, without NumPy's overflow warning)
        return x.astype(dtype), (x.dtype,)


@cast.defvjp
def cast_vjp(be, g, saved, dtype):
    (x_dtype,) = saved
    if g.dtype.itemsize <= x_dtype.itemsize:
        return (g.astype(x_dtype),)
    with quiet():  # (a float64 gradient past float32's range: inf, as torch, silently)
        return (g.astype(x_dtype),)


OPS = (add, sub, mul, div, neg, power, exp, log, sqrt, tanh, sigmoid, relu, absolute, maximum,
       minimum, where, clip, clone, cast)
