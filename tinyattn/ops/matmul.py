"""Matrix multiplication: batched, broadcasting over leading dims, 1-D operands as in NumPy.

(..., n, k) @ (..., k, m) -> (..., n, m). A 1-D left operand is a row (1, k) and a 1-D right
operand a column (k, 1), each dropped again from the result. The VJP is the textbook pair
gx = g @ yᵀ, gy = xᵀ @ g; broadcast batch dims are summed back by autograd. The operands
must share one dtype, as in torch (no promotion: float32 @ float64 is a DTypeError).
Also here: `linear`, x @ wᵀ + b as one fused node (the layer every model is made of; a 1-D w
and a bias that broadcasts are taken, as torch's), under the same rule: input, weight and bias
of one dtype (a float64 input to a float32 layer is a DTypeError, as torch's; convert the
input, or the module with .double()).
"""

import math

from ..autograd import sum_to
from ..errors import DTypeError, ShapeError, fmt_shape
from .op import broadcasts_to, op, wide_sum
from .samples import case


def same_dtype(name, *arrays, what="operands"):
    """torch's rule for matrix products: the operands have one dtype (float32 @ float64 and
    int64 @ float32 are errors, not promoted), and it is not bool. (Promoting would hide a
    float64 input that doubles a model's cost, or compute a float16 product in float32.)"""
    first = arrays[0].dtype
    for a in arrays:
        if a.dtype != first:
            shown = ", ".join(f"{b.dtype} {fmt_shape(b.shape)}" for b in arrays)
            raise DTypeError(f"{name}: the {what} must have the same dtype, got {shown} "
                             "(torch's rule for matrix products: no promotion); convert one "
                             f"first, e.g. with .to({a.dtype}) or .to({first})")
    if first == bool:
        raise DTypeError(f"{name}: bool {what} cannot be multiplied (torch has no bool matrix "
                         "product); convert them with .long() or .float() first")


def _check(x, y):
    if x.dtype != y.dtype or x.dtype == bool:  # (the common case: one compare)
        same_dtype("matmul", x, y)
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError(f"matmul: {fmt_shape(x.shape)} @ {fmt_shape(y.shape)}: both operands "
                         "need at least one dim (use * for scalars)")
    k_x, k_y = x.shape[-1], y.shape[-2] if y.ndim > 1 else y.shape[0]
    if k_x != k_y:
        raise ShapeError(f"matmul: {fmt_shape(x.shape)} @ {fmt_shape(y.shape)}: inner dims "
                         f"{k_x} and {k_y} differ")


@op("matmul", "gx = g @ yᵀ, gy = xᵀ @ g", grads=("gx", "gy"), broadcasts=True,
    saves={0: 0, 1: 1}, fresh=True,
    samples=[case((3, 4), (4, 2)), case((2, 3, 4), (4, 5)), case((2, 3, 4), (2, 4, 5)),
             case((4,), (4, 3)), case((3, 4), (4,)), case((4,), (4,)),
             case((2, 1, 3, 4), (5, 4, 2)), case((3,), (2, 3, 4))])
def matmul(be, x, y):
    """out = x @ y"""
    _check(x, y)
    if y.ndim == 2 and x.ndim > 2 and x.flags.c_contiguous:
        # (B, T, k) @ (k, m) as one (B*T, k) @ (k, m) product: one BLAS call, not B of them
        return (x.reshape(-1, x.shape[-1]) @ y).reshape(x.shape[:-1] + (y.shape[1],)), (x, y)
    return x @ y, (x, y)


@matmul.defvjp
def matmul_vjp(be, g, saved):
    x, y = saved
    xp = be.xp
    # promote 1-D operands to matrices so that one formula covers every case
    x2 = x[None, :] if x.ndim == 1 else x  # (1, k)
    y2 = y[:, None] if y.ndim == 1 else y  # (k, 1)
    g2 = g
    if y.ndim == 1:
        g2 = g2[..., None]  # (..., n) -> (..., n, 1)
    if x.ndim == 1:
        g2 = g2[..., None, :]  # (..., m) -> (..., 1, m)
    gx = g2 @ xp.swapaxes(y2, -1, -2)
    if x.ndim == 1:
        gx = gx[..., 0, :]
    if y2.ndim == 2 and x2.ndim > 2:
        # the weight of a batched product: one (k, B*T) @ (B*T, m) product, already summed
        k, m = y2.shape
        gy = x2.reshape(-1, k).T @ g2.reshape(-1, m)
    else:
        gy = xp.swapaxes(x2, -1, -2) @ g2
    if y.ndim == 1:
        gy = gy[..., 0]
    return gx, gy


def _fold(a):
    """(..., n) as a 2-D (rows, n) array: the batch dims folded into one BLAS call (n = 0, a
    Linear with no inputs: rows counted, as -1 cannot be solved for)."""
    n = a.shape[-1]
    return a.reshape(-1, n) if n else a.reshape(math.prod(a.shape[:-1]), 0)


@op("linear", "gx = g @ w, gw = gᵀ @ x (batch dims folded), gb = Σ g",
    grads=("gx", "gw", "gb"), fused=True, saves={0: 0, 1: 1}, fresh=True,
    samples=[case((2, 3, 4), (5, 4), (5,)), case((4,), (2, 4), None), case((3, 4), (2, 4)),
             case((2, 3, 4), (4,), ()), case((4,), (4,), ()), case((3, 4), (2, 4), ())])
def linear(be, x, weight, *bias):
    """out = x @ weightᵀ + bias, weight (out_features, in_features), or (in_features,) for one
    output whose dim is dropped (torch's); the bias broadcasts to the output, (out_features,)
    as a rule"""
    n_inputs = 2 + len(bias)  # linear(x, w) or linear(x, w, b): one gradient per input
    bias = bias[0] if bias else None
    if x.dtype != weight.dtype or x.dtype == bool or bias is not None and bias.dtype != x.dtype:
        if bias is None:
            same_dtype("linear", x, weight, what="input and weight")
        else:
            same_dtype("linear", x, weight, bias, what="input, weight and bias")
    if weight.ndim not in (1, 2) or x.ndim == 0 or x.shape[-1] != weight.shape[-1]:
        raise ShapeError(f"linear: input {fmt_shape(x.shape)} and weight "
                         f"{fmt_shape(weight.shape)}: the weight must be (out_features, "
                         f"in_features), or (in_features,), with in_features = the input's last "
                         "dim")
    out_shape = x.shape[:-1] + weight.shape[:-1]  # (..., out_features), or (...) for a 1-D weight
    if bias is not None and bias.shape != weight.shape[:1] and not broadcasts_to(bias.shape,
                                                                                 out_shape):
        raise ShapeError(f"linear: bias {fmt_shape(bias.shape)} for input {fmt_shape(x.shape)} "
                         f"and weight {fmt_shape(weight.shape)}: the bias must broadcast to the "
                         f"output {fmt_shape(out_shape)}: (out_features,) as a rule")
    out = (_fold(x) @ _rows(weight).T).reshape(out_shape)
    if bias is not None:
        out += bias
    return out, (x, weight, n_inputs, None if bias is None else bias.shape)


@linear.defvjp
def linear_vjp(be, g, saved):
    x, weight, n_inputs, bias_shape = saved
    w2 = _rows(weight)  # (out_features, in_features)
    g2 = _fold(g if weight.ndim == 2 else g[..., None])  # (rows, out_features)
    gx = (g2 @ w2).reshape(x.shape)
    gw = g2.T @ _fold(x)
    if weight.ndim == 1:
        gw = gw.reshape(weight.shape)
    if bias_shape is None:  # linear(x, w) or linear(x, w, None)
        return (gx, gw, None)[:n_inputs]
    if bias_shape == w2.shape[:1]:  # (the rule: one bias per output)
        return gx, gw, wide_sum(g2, 0)  # (float16: the bias gradient summed in float32)
    return gx, gw, sum_to(g, bias_shape)  # a bias broadcast further: summed back


def _rows(weight):
    """The weight as (out_features, in_features): a 1-D weight is one row."""
    return weight if weight.ndim == 2 else weight[None, :]


OPS = (matmul, linear)
