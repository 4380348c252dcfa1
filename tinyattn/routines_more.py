"""More of torch's module-level functions: the window functions (hann_window, ...), cov and
corrcoef, vander, unravel_index, broadcast_shapes, renorm, frexp, ldexp, nextafter,
gradient, cholesky_solve and cholesky_inverse, mvlgamma, rsub, scalar_tensor,
split_with_sizes, fill, a few predicates (is_same_size, is_signed, is_inference) and the
top-level in-place forms (torch.sin_(x) is x.sin_()).

Each differentiable one is composed of existing differentiable ops (its gradient is theirs,
checked against torch's in tests/core/test_top_level_round7.py); the windows are made as
NumPy arrays, as the creation functions make theirs.
"""

import math
import numbers

import numpy as np

from . import dtypes, linalg, special
from .errors import DimError, DTypeError, ShapeError, fmt_shape, warn_user
from .functional import cat, where
from .ops.op import broadcast_shape, dim1
from .return_types import Size
from .return_types import frexp as frexp_pair
from .routines import _method, _t, chunk, split
from .tensor import (
    _fresh,
    _int_argument,
    _int_list,
    _take_torch_keywords,
    _takes_device,
    _values,
    ones,
    zeros,
)

# ---- window functions ---------------------------------------------------------------------------


def _window(name, window_length, periodic, dtype, requires_grad, backend, values):
    """values(k, m) for k = 0..m-1 (m = window_length, + 1 if periodic, whose last entry is
    dropped), as a tensor of `dtype` (a floating one; the default dtype if None)."""
    if isinstance(window_length, bool) or not isinstance(window_length, numbers.Integral):
        raise TypeError(f"{name}: window_length must be an int, got {window_length!r}")
    if window_length < 0:
        raise ValueError(f"{name}: window_length must be non-negative, got {window_length}")
    dtype = dtypes.get_default_dtype() if dtype is None else np.dtype(dtype)
    if dtype.kind != "f":
        raise DTypeError(f"{name}: expects a floating-point dtype, got {dtype}")
    n = int(window_length)
    if n <= 1:
        data = np.ones(n)
    else:
        m = n + 1 if periodic else n
        data = values(np.arange(m, dtype=np.float64), m)[:n]
    return _fresh(data.astype(dtype), requires_grad=requires_grad, backend=backend)


def _cosines(*coefficients):
    """values(k, m) = Σ_j (-1)^j a_j cos(2π j k / (m - 1)) (hann, hamming, blackman)."""
    def values(k, m):
        phase = 2 * math.pi * k / (m - 1)
        return sum((-1) ** j * a * np.cos(j * phase) for j, a in enumerate(coefficients))
    return values


@_takes_device
def hann_window(window_length, periodic=True, *, dtype=None, requires_grad=False,
                backend=None):
    """0.5 - 0.5 cos(2π k / (N - 1)); periodic (the default): N = window_length + 1, for
    spectral analysis, the last entry dropped."""
    return _window("hann_window", window_length, periodic, dtype, requires_grad, backend,
                   _cosines(0.5, 0.5))


@_takes_device
def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   requires_grad=False, backend=None):
    """alpha - beta cos(2π k / (N - 1)), N as hann_window's."""
    return _window("hamming_window", window_length, periodic, dtype, requires_grad, backend,
                   _cosines(alpha, beta))


@_takes_device
def blackman_window(window_length, periodic=True, *, dtype=None, requires_grad=False,
                    backend=None):
    """0.42 - 0.5 cos(2π k / (N - 1)) + 0.08 cos(4π k / (N - 1)), N as hann_window's."""
    return _window("blackman_window", window_length, periodic, dtype, requires_grad, backend,
                   _cosines(0.42, 0.5, 0.08))


@_takes_device
def bartlett_window(window_length, periodic=True, *, dtype=None, requires_grad=False,
                    backend=None):
    """The triangle 1 - |2k / (N - 1) - 1|, N as hann_window's."""
    return _window("bartlett_window", window_length, periodic, dtype, requires_grad, backend,
                   lambda k, m: 1 - np.abs(2 * k / (m - 1) - 1))


@_takes_device
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, requires_grad=False,
                  backend=None):
    """I0(beta sqrt(1 - (2k / (N - 1) - 1)²)) / I0(beta), N as hann_window's."""
    return _window("kaiser_window", window_length, periodic, dtype, requires_grad, backend,
                   lambda k, m: np.i0(beta * np.sqrt(np.clip(
                       1 - (2 * k / (m - 1) - 1) ** 2, 0, None))) / np.i0(beta))


# ---- cov, corrcoef ------------------------------------------------------------------------------


def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """torch.cov: the covariance of the variables in the rows of a 2-D input (a 1-D one is
    one variable), its columns the observations; fweights (integer repeat counts) and
    aweights (float importance weights), one per observation, weigh them; correction=1 is
    Bessel's. A single variable gives a 0-d result. Integer input gives the default float."""
    x = _t(input)
    if x.ndim > 2:
        raise ShapeError(f"cov: expected input to have two or fewer dimensions, got "
                         f"{fmt_shape(x.shape)}")
    x = x.reshape(1, -1) if x.ndim < 2 else x
    if x.dtype.kind != "f":
        x = x.to(dtypes.get_default_dtype())
    n = x.shape[1]
    fw = _cov_weights(fweights, "fweights", "iu", n, x)
    aw = _cov_weights(aweights, "aweights", "f", n, x)
    w = aw if fw is None else fw if aw is None else fw * aw
    if w is None:
        avg, norm = x.mean(1), n - correction
        if norm <= 0:
            warn_user("cov: degrees of freedom <= 0 for the correction; the result is inf "
                      "or nan (as torch's)")
            norm = 0.0
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        norm = w_sum - correction if aw is None or correction == 0 else \
            w_sum - correction * (w * aw).sum() / w_sum
        norm = norm.clamp_min(0)
    xm = x - avg.unsqueeze(1)
    product = xm @ (xm if w is None else xm * w).mT
    return (product / norm).squeeze()


def _cov_weights(weights, name, kinds, n, x):
    """The weights as a tensor after torch's checks (1-D, one per observation, of the right
    kind, non-negative), or None."""
    if weights is None:
        return None
    w = _t(weights, x)
    if w.ndim > 1 or w.numel() != n:
        raise ShapeError(f"cov: expected {name} to be a scalar or 1-D tensor with {n} entries "
                         f"(one per observation of input {fmt_shape(x.shape)}), got "
                         f"{fmt_shape(w.shape)}")
    if w.dtype.kind not in kinds:
        what = "an integral" if kinds == "iu" else "a floating-point"
        raise DTypeError(f"cov: expected {name} to have {what} dtype, got {w.dtype}")
    if bool((w.detach() < 0).any()):
        raise ValueError(f"cov: {name} cannot be negative")
    return w.reshape(-1)


def corrcoef(input):  # noqa: A002
    """torch.corrcoef: cov(input) scaled to the correlations (the entries clipped to
    [-1, 1], as torch's); a single variable gives c / c."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    c = c / std.unsqueeze(1)
    c = c / std.unsqueeze(0)
    return c.clip(-1, 1)


# ---- vander, unravel_index, broadcast_shapes ----------------------------------------------------


def vander(x, N=None, increasing=False):  # noqa: N803 - torch's argument name
    """The Vandermonde matrix of 1-D x: column i holds x ** (N - 1 - i) (x ** i when
    increasing); N = len(x) by default. Integer and bool x give int64 (torch's promotion);
    made by cumprod, as torch's, so its gradient is cumprod's."""
    x = _t(x)
    if x.ndim != 1:
        raise ShapeError(f"vander: x must be a one-dimensional tensor, got {fmt_shape(x.shape)}")
    n = x.shape[0] if N is None else _int_argument("vander", "N", N)
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    if x.dtype.kind != "f":
        x = x.to(np.int64)
    first = ones(x.shape[0], min(n, 1), dtype=x.dtype, backend=x.backend)
    rest = x.unsqueeze(1).expand(x.shape[0], max(n - 1, 0)).cumprod(1)
    out = cat([first, rest], 1)
    return out if increasing else out.flip(1)


def unravel_index(indices, shape):
    """torch.unravel_index: the coordinates (a tuple of int64 tensors, one per dim of shape)
    of flat indices into a tensor of `shape`; negative indices count from the end."""
    idx = _t(indices)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"unravel_index: expected 'indices' to be an integer tensor, got "
                         f"{idx.dtype}")
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    if any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0 for s in shape):
        raise TypeError(f"unravel_index: 'shape' must be non-negative ints, got {shape}")
    total = math.prod(shape)
    if idx.numel() and not bool(((idx >= -total) & (idx < total)).all()):
        raise ValueError(f"unravel_index: an index is out of bounds for shape {shape} "
                         f"(flat indices must be in [-{total}, {total}))")
    flat = idx.long() % max(total, 1)
    coords = []
    for size in reversed(shape):
        coords.append(flat % size if size else flat)
        flat = flat // size if size else flat
    return tuple(reversed(coords))


def broadcast_shapes(*shapes):
    """The shape the given shapes (sizes or ints) broadcast to, as a Size; an error naming
    them where they do not."""
    shapes = [(s,) if isinstance(s, numbers.Integral) else tuple(s) for s in shapes]
    try:
        return Size(broadcast_shape(*shapes) if shapes else ())
    except ValueError:
        raise ShapeError("broadcast_shapes: shapes " + ", ".join(fmt_shape(s) for s in shapes)
                         + " cannot be broadcast to a single shape") from None


# ---- renorm, frexp, ldexp, nextafter ------------------------------------------------------------


def renorm(input, p, dim, maxnorm):  # noqa: A002
    """Each slice along dim (input.select(dim, i)) whose p-norm exceeds maxnorm scaled to norm
    maxnorm (by maxnorm / (norm + 1e-7), as torch's); the others as they are."""
    x = _t(input)
    if x.ndim < 2:
        raise ShapeError(f"renorm: input needs at least 2 dimensions, got "
                         f"{fmt_shape(x.shape)}")
    if p <= 0:
        raise ValueError(f"renorm: non-positive norm not supported, got p={p}")
    if maxnorm < 0:
        raise ValueError(f"renorm: expected maxnorm to be >= 0, got {maxnorm}")
    axis = dim1(dim, x.ndim, "renorm")
    others = tuple(d for d in range(x.ndim) if d != axis)
    norm = linalg.vector_norm(x, p, others, keepdim=True)
    return x * where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0).to(x.dtype)


def frexp(input):  # noqa: A002
    """The named pair (mantissa, exponent): input = mantissa * 2 ** exponent, |mantissa| in
    [0.5, 1), the exponent int32; the mantissa's gradient is g / 2 ** exponent (torch's)."""
    x = _t(input)
    if x.dtype.kind != "f":
        raise DTypeError(f"frexp: only supports floating-point dtypes, got {x.dtype}")
    exponent = _values("frexp_exponent", lambda a: np.frexp(a)[1].astype(np.int32), x)
    # 2 ** -exponent in two exact halves (a subnormal's whole one overflows)
    low = _values("frexp_scale", _half_scale, x, second=False)
    high = _values("frexp_scale", _half_scale, x, second=True)
    return frexp_pair(x * low * high, exponent)


def _half_scale(a, second):
    """2 ** (-e // 2), or the rest of 2 ** -e (second), for a's frexp exponents e."""
    shift = -np.frexp(a)[1]
    half = shift // 2
    return np.ldexp(np.ones_like(a), shift - half if second else half)


def _powers_of_two(x, other):
    """2 ** other, in x's floating dtype (other's when it is a float too, for promotion)."""
    other = _t(other, x)
    if other.dtype.kind != "f":
        other = other.to(x.dtype if x.dtype.kind == "f" else dtypes.get_default_dtype())
    return other.exp2()


def ldexp(input, other):  # noqa: A002
    """input * 2 ** other (a floating result: integer input gives the default dtype)."""
    x = _t(input)
    return x * _powers_of_two(x, other)


def ldexp_(input, other):  # noqa: A002
    x = _t(input)
    return x.mul_(_powers_of_two(x, other))


def nextafter(input, other):  # noqa: A002
    """The next floating-point value after input towards other (no gradient, as torch's)."""
    x = _t(input)
    y = _t(other, x)
    if x.dtype.kind != "f" or y.dtype.kind != "f":
        raise DTypeError(f"nextafter: takes floating-point tensors, got {x.dtype} and {y.dtype}")
    return _values("nextafter", np.nextafter, x, y)


# ---- torch.gradient -----------------------------------------------------------------------------


def gradient(input, *, spacing=1, dim=None, edge_order=1):  # noqa: A002
    """torch.gradient: the derivative estimated by central differences along each dim (all
    by default), a tuple of tensors: second-order accurate inside, first or second order
    (edge_order) at the ends. spacing: one number for every dim, a number per dim, or per
    dim a 1-D tensor of the sample coordinates."""
    x = _t(input)
    axes = _gradient_axes(x, dim)
    steps = _gradient_spacing(spacing, axes, x)
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    for axis in axes:
        if x.shape[axis] < edge_order + 1:
            raise ValueError(f"gradient: each dim it is taken along needs at least "
                             f"edge_order + 1 = {edge_order + 1} entries, got dim {axis} of "
                             f"input {fmt_shape(x.shape)}")
    if x.dtype.kind != "f":
        x = x.to(dtypes.get_default_dtype())
    return tuple(_uniform(x, a, h, edge_order) if isinstance(h, numbers.Number)
                 else _along_coordinates(x, a, h, edge_order)
                 for a, h in zip(axes, steps, strict=True))


def _gradient_axes(x, dim):
    if dim is None:
        return list(range(x.ndim))
    dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
    axes = [dim1(d, x.ndim, "gradient") for d in dims]
    if len(set(axes)) != len(axes):
        raise DimError(f"gradient: dim {dim} names a dim twice")
    return axes


def _gradient_spacing(spacing, axes, x):
    """A number or a 1-D coordinate tensor per axis."""
    if isinstance(spacing, numbers.Number) or getattr(spacing, "ndim", None) == 0:
        spacing = [spacing] * len(axes)
    spacing = list(spacing)
    if len(spacing) != len(axes):
        raise ValueError(f"gradient: expected spacing to be a number or a list of "
                         f"{len(axes)} (one per dim), got {len(spacing)}")
    out = []
    for s, axis in zip(spacing, axes, strict=True):
        if isinstance(s, numbers.Number) or getattr(s, "ndim", None) == 0:
            out.append(float(s))
            continue
        s = _t(s, x)
        if s.ndim != 1 or s.shape[0] != x.shape[axis]:
            raise ShapeError(f"gradient: the coordinates for dim {axis} must be 1-D with "
                             f"{x.shape[axis]} entries, got {fmt_shape(s.shape)}")
        out.append(s)
    return out


def _sl(x, axis, start, stop=None):
    return x[(slice(None),) * axis + (slice(start, stop),)]


def _uniform(x, axis, h, edge_order):
    """Central differences at a constant spacing h (torch's arithmetic)."""
    center = (_sl(x, axis, 2) - _sl(x, axis, 0, -2)) / h
    if edge_order == 1:
        first = (_sl(x, axis, 1, 2) - _sl(x, axis, 0, 1)) / h
        last = (_sl(x, axis, -1) - _sl(x, axis, -2, -1)) / h
    else:
        first = (-1.5 * _sl(x, axis, 0, 1) + 2 * _sl(x, axis, 1, 2)
                 - 0.5 * _sl(x, axis, 2, 3)) / h
        last = (0.5 * _sl(x, axis, -3, -2) - 2 * _sl(x, axis, -2, -1)
                + 1.5 * _sl(x, axis, -1)) / h
    return cat([first, center / 2, last], axis)


def _along_coordinates(x, axis, coords, edge_order):
    """Differences at the sample coordinates `coords` (torch's weights)."""
    dx = coords.diff()
    shape = tuple(-1 if d == axis else 1 for d in range(x.ndim))
    d1, d2 = dx[:-1], dx[1:]
    a = (-d2 / (d1 * (d1 + d2))).reshape(shape)
    b = ((d2 - d1) / (d1 * d2)).reshape(shape)
    c = (d1 / (d2 * (d1 + d2))).reshape(shape)
    center = a * _sl(x, axis, 0, -2) + b * _sl(x, axis, 1, -1) + c * _sl(x, axis, 2)
    if edge_order == 1:
        first = (_sl(x, axis, 1, 2) - _sl(x, axis, 0, 1)) / dx[0]
        last = (_sl(x, axis, -1) - _sl(x, axis, -2, -1)) / dx[-1]
    else:
        first = _edge(x, axis, dx[0], dx[1], (0, 1, 2))
        last = _edge(x, axis, -dx[-1], -dx[-2], (-1, -2, -3))
    return cat([first, center, last], axis)


def _edge(x, axis, h1, h2, at):
    """The second-order one-sided difference at entry at[0], from the entries at[0..2] with
    steps h1 and h2 between them (negative steps at the far end)."""
    a = -(2.0 * h1 + h2) / (h1 * (h1 + h2))
    b = (h1 + h2) / (h1 * h2)
    c = -h1 / (h2 * (h1 + h2))
    f0, f1, f2 = (_sl(x, axis, i, i + 1 or None) for i in at)
    return a * f0 + b * f1 + c * f2


# ---- Cholesky ------------------------------------------------------------------------------------


def _cholesky_product(name, factor, upper):
    u = _t(factor)
    if u.ndim < 2 or u.shape[-1] != u.shape[-2]:
        raise ShapeError(f"{name}: the Cholesky factor must be a (batch of) square matrices, "
                         f"got {fmt_shape(u.shape)}")
    return u.mT @ u if upper else u @ u.mT


def cholesky_solve(input, input2, upper=False):  # noqa: A002
    """X with A X = input for A = L Lᵀ (input2 = L, lower) or Uᵀ U (upper); the batch dims
    broadcast. The gradient of the factor is torch's full (not triangular) one."""
    b = _t(input)
    a = _cholesky_product("cholesky_solve", input2, upper)
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ShapeError(f"cholesky_solve: input must be a (batch of) matrices with "
                         f"{a.shape[-1]} rows, got {fmt_shape(b.shape)} for a factor "
                         f"{fmt_shape(a.shape)}")
    return linalg.solve(a, b)


def cholesky_inverse(input, upper=False, *, out=None):  # noqa: A002
    """The inverse of A = L Lᵀ (or Uᵀ U with upper) from its Cholesky factor."""
    if out is not None:
        raise TypeError("cholesky_inverse: out= is not supported")
    return _cholesky_product("cholesky_inverse", input, upper).inverse()


# ---- small ones ---------------------------------------------------------------------------------


def mvlgamma(input, p):  # noqa: A002
    """The multivariate log-gamma function of dimension p (special.multigammaln)."""
    return special.multigammaln(input, p)


igamma, igammac = special.gammainc, special.gammaincc  # torch's older names


def rsub(input, other, *, alpha=1):  # noqa: A002
    """other - alpha * input."""
    x = _t(input)
    return (x if alpha == 1 else x * alpha).__rsub__(other)


@_takes_device
def scalar_tensor(s, *, dtype=None, requires_grad=False, backend=None):
    """A 0-d tensor of s, in the default float dtype unless dtype= (an int too, as torch's)."""
    if isinstance(s, np.ndarray) or getattr(s, "ndim", 0):
        raise TypeError(f"scalar_tensor: takes a number, got {type(s).__name__}")
    return _fresh(np.asarray(s.item() if hasattr(s, "item") else s),
                  dtype=dtypes.get_default_dtype() if dtype is None else dtype,
                  requires_grad=requires_grad, backend=backend)


def split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    """input.split(split_sizes, dim), the sizes required to add up to the dim's size."""
    x = _t(input)
    axis = dim1(dim, x.ndim, "split_with_sizes")
    sizes = _int_list("split_with_sizes", "split_sizes", split_sizes)
    if sizes and min(sizes) < 0:
        raise ValueError(f"split_with_sizes: split_sizes must be >= 0, got {sizes}")
    if sum(sizes) != x.shape[axis]:
        raise ValueError(f"split_with_sizes: expects split_sizes to sum exactly to "
                         f"{x.shape[axis]} (dim {axis} of input {fmt_shape(x.shape)}), got "
                         f"split_sizes={sizes}")
    return split(x, sizes, axis)


def fill(input, value):  # noqa: A002
    """A tensor of input's shape and dtype filled with value (a number or a 0-d tensor, which
    gets the gradient); input's gradient is zeros, as torch's."""
    x = _t(input)
    if getattr(value, "ndim", 0):
        raise ValueError(f"fill: only supports 0-dimension value tensor but got tensor with "
                         f"{value.ndim} dimensions ({fmt_shape(value.shape)})")
    return where(zeros(*x.shape, dtype=bool, backend=x.backend), x, value).to(x.dtype)


def is_same_size(input, other):  # noqa: A002
    return tuple(input.shape) == tuple(other.shape)


def is_signed(input):  # noqa: A002
    """Whether input's dtype holds negative values (floats and signed ints; not uint8 or
    bool)."""
    return np.dtype(input.dtype).kind in "if"


def is_inference(input):  # noqa: A002
    return input.is_inference()


absolute = _method("abs")
is_nonzero, adjoint = _method("is_nonzero"), _method("adjoint")
unsafe_chunk, unsafe_split = chunk, split
unsafe_split_with_sizes = split_with_sizes

# torch's keyword names: NumPy's axis= for dim= (gradient(x, axis=0)), as routines.py's
_take_torch_keywords(globals(), {})

# torch's top-level in-place forms: torch.sin_(x) is x.sin_()
INPLACE = {name: _method(name) for name in (
    "abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
    "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "cos_", "cosh_", "deg2rad_",
    "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_", "frac_", "i0_", "log10_",
    "log1p_", "log2_", "log_", "neg_", "negative_", "rad2deg_", "reciprocal_", "round_",
    "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_",
    "trunc_", "zero_", "nan_to_num_", "clamp_", "clip_", "clamp_min_", "clamp_max_", "fill_",
    "xlogy_", "gcd_", "lcm_", "addmv_", "detach_", "index_put_")}
