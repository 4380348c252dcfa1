"""tinyattn.functional's spatial-transformer and fractional pooling ops, with torch's names,
arguments, values and gradients: affine_grid, grid_sample (bilinear, nearest and bicubic
sampling; zeros, border and reflection padding; 4-D and 5-D input), fractional_max_pool2d/3d
and their _with_indices forms. Each is composed of tensor ops (matmul, floor, fmod, where,
gather, max), so gradients of any order are theirs; where torch's own backward differs from
the derivative of its forward (a border counts as outside, a reflection's sign at 0), the
composition follows torch. tinyattn.functional imports these as its own attributes (F.*)."""

import itertools
import math

import numpy as np

from .autograd import no_grad
from .errors import DTypeError, ShapeError, fmt_shape, warn_user
from .tensor import Tensor, _fresh, rand

__all__ = ["affine_grid", "grid_sample", "fractional_max_pool2d", "fractional_max_pool3d",
           "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices"]

_ALIGN_NOTE = ("Default grid_sample and affine_grid behavior has changed to align_corners=False "
               "since 1.3.0. Please specify align_corners=True if the old behavior is desired. "
               "See the documentation of grid_sample for details.")


def _t(x, like=None):
    """`x` as a Tensor (on `like`'s backend when it has to be made)."""
    if isinstance(x, Tensor):
        return x
    return _fresh(x, backend=None if like is None else like.backend)


def _align(align_corners):
    """torch's default: align_corners=None is False, with its warning."""
    if align_corners is None:
        warn_user(_ALIGN_NOTE)
        return False
    return bool(align_corners)


# ---- affine_grid -------------------------------------------------------------------------------

def affine_grid(theta, size, align_corners=None):
    """The sampling grid of a batch of affine maps: theta (N, 2, 3) and size (N, C, H, W) give
    (N, H, W, 2), theta (N, 3, 4) and size (N, C, D, H, W) give (N, D, H, W, 3); each point is
    theta @ (x, y[, z], 1) over the output's normalized coordinates in [-1, 1] (pixel centres
    with align_corners=False, as torch's). The gradient goes to theta."""
    theta = _t(theta)
    align_corners = _align(align_corners)
    if theta.dtype.kind != "f":
        raise ValueError(f"affine_grid: expected theta to have floating point type, but got "
                         f"{theta.dtype}")
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid: only 4-D and 5-D sizes (2-D and 3-D affine "
                                  f"transforms) are supported, got size {size}")
    nd = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (nd, nd + 1):
        raise ValueError(f"affine_grid: expected a batch of {nd}-D affine matrices of shape "
                         f"(N, {nd}, {nd + 1}) for size {size}, got {fmt_shape(theta.shape)}")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warn_user("affine_grid: since version 1.3.0 (torch's), a unit-size grid with "
                  "align_corners=True puts every point at 0; this is not an intended use")
    elif min(size) <= 0:
        raise ValueError(f"affine_grid: expected a positive output size, got {size}")
    if theta.shape[0] != size[0]:
        raise ShapeError(f"affine_grid: theta {fmt_shape(theta.shape)} holds {theta.shape[0]} "
                         f"matrices but size {size} asks for a batch of {size[0]}")
    dt = np.dtype(theta.dtype).type
    axes = [_linspace(n, align_corners, dt) for n in reversed(spatial)]  # x (W) first
    mesh = np.meshgrid(*reversed(axes), indexing="ij")  # D, H, W order
    base = np.stack([m.reshape(-1) for m in reversed(mesh)] + [np.ones(math.prod(spatial), dt)],
                    axis=1)
    grid = _fresh(base, backend=theta.backend) @ theta.transpose(1, 2)
    return grid.reshape((size[0],) + spatial + (nd,))


def _linspace(n, align_corners, dt):
    """torch's linspace_from_neg_one: n points over [-1, 1] (pixel centres: scaled by
    (n - 1) / n without align_corners; one point: 0), in the dtype `dt`."""
    if n <= 1:
        return np.zeros(max(n, 1), dt)
    points = np.linspace(-1, 1, n).astype(dt)
    return points if align_corners else points * dt(n - 1) / dt(n)


# ---- grid_sample -------------------------------------------------------------------------------

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")
_CUBIC_A = -0.75  # torch's cubic convolution coefficient


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):  # noqa: A002
    """input (N, C, H, W) sampled at grid (N, Ho, Wo, 2) (normalized (x, y) in [-1, 1]; outside
    is padding) as (N, C, Ho, Wo); or (N, C, D, H, W) at (N, Do, Ho, Wo, 3) (x, y, z). mode:
    'bilinear', 'nearest' (round half to even) or 'bicubic' (4-D only); padding_mode: 'zeros',
    'border' (coordinates clipped) or 'reflection' (reflected about the borders). Gradients go
    to the input and to the grid (none through 'nearest'), as torch's."""
    if mode not in _MODES:
        raise ValueError(f"grid_sample: expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: {mode!r}")
    if padding_mode not in _PADDINGS:
        raise ValueError(f"grid_sample: expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: {padding_mode!r}")
    align = _align(align_corners)
    x = _t(input)
    g = _t(grid, x)
    _check_grid_sample(x, g, mode)
    nd = x.ndim - 2
    n, c, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    # one (N, 1, Q) coordinate per input dim, in (D,) H, W order: the grid holds (x, y[, z])
    coords = [_unnormalize(g[..., nd - 1 - i].reshape(n, 1, -1), s, align)
              for i, s in enumerate(sizes)]
    flat = x.reshape(n, c, -1)
    if mode == "bicubic":
        y = _bicubic(flat, coords, sizes, padding_mode, align)
    else:
        coords = [_source_index(cd, s, padding_mode, align) for cd, s in zip(coords, sizes,
                                                                             strict=True)]
        y = (_nearest if mode == "nearest" else _bilinear)(flat, coords, sizes)
    return y.reshape((n, c) + tuple(g.shape[1:-1]))


def _check_grid_sample(x, g, mode):
    shapes = f"input {fmt_shape(x.shape)} and grid {fmt_shape(g.shape)}"
    if x.ndim not in (4, 5) or g.ndim != x.ndim:
        raise ShapeError(f"grid_sample: expected a 4-D or 5-D input and a grid with as many "
                         f"dims, got {shapes}")
    if g.shape[-1] != x.ndim - 2:
        raise ShapeError(f"grid_sample: expected the grid's last dim to be {x.ndim - 2} (one "
                         f"coordinate per spatial dim), got {shapes}")
    if g.shape[0] != x.shape[0]:
        raise ShapeError(f"grid_sample: expected grid and input to have the same batch size, "
                         f"got {shapes}")
    if 0 in x.shape[2:]:
        raise ShapeError(f"grid_sample: expected an input with non-empty spatial dims, got "
                         f"{shapes}")
    if mode == "bicubic" and x.ndim == 5:
        raise ShapeError(f"grid_sample: bicubic interpolation only supports 4-D input, got "
                         f"{shapes}")
    if x.dtype.kind != "f" or g.dtype != x.dtype:
        raise _DTypeRuntimeError(f"grid_sample: needs a floating-point input and a grid of its "
                                 f"dtype, got input {x.dtype} and grid {g.dtype}")


class _DTypeRuntimeError(DTypeError, RuntimeError):
    """A dtype grid_sample cannot take: a DTypeError and, as torch raises it, a RuntimeError."""


def _unnormalize(c, size, align):
    """[-1, 1] to pixel coordinates: -1 and 1 the corner pixels' centres (align) or their
    outer edges."""
    if align:
        return (c + 1) / 2 * (size - 1)
    return ((c + 1) * size - 1) / 2


def _source_index(c, size, padding_mode, align):
    """The coordinate after padding: as it is (zeros), clipped (border), reflected and clipped
    (reflection)."""
    if padding_mode == "zeros":
        return c
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align else _reflect(c, -1, 2 * size - 1)
    return _clip(c, size)


def _clip(c, size):
    """c clipped to [0, size - 1]; the gradient 0 on the borders too (torch's: a border
    counts as outside)."""
    hi = size - 1
    inside = (c > 0) & (c < hi)
    return c.where(inside, c.detach().clamp(0, hi))


def _reflect(c, twice_low, twice_high):
    """c reflected about low and high until it lies between them (torch's reflect_coordinates:
    the gradient -1 or 1 by the number of reflections)."""
    if twice_low == twice_high:
        return c.where(c.detach() > math.inf, 0.0)  # (0, with a zero gradient)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    d = c - low
    d = d.where(d.detach() >= 0, -d)
    extra = d.fmod(span)
    with no_grad():
        even = (d / span).floor().fmod(2) == 0
    return (extra + low).where(even, (span - extra) + low)


def _take(flat, where, sizes):
    """flat (N, C, P) at the integer places where (per dim, (N, 1, Q) floats) as (N, C, Q); 0
    at a place outside the input."""
    with no_grad():
        valid, place, stride = None, 0, 1
        for w, s in reversed(list(zip(where, sizes, strict=True))):
            ok = (w >= 0) & (w <= s - 1)
            valid = ok if valid is None else valid & ok
        for w, s in reversed(list(zip(where, sizes, strict=True))):
            place = place + w.where(valid, 0.0).long() * stride
            stride *= s
    n, c, q = flat.shape[0], flat.shape[1], place.shape[-1]
    return flat.gather(2, place.expand(n, c, q)).where(valid, 0.0)


def _bilinear(flat, coords, sizes):
    """The 2^nd corners around each point, each weighed by the volume of the opposite box."""
    floors = [cd.floor() for cd in coords]  # (no gradient: the weights carry the grid's)
    out = 0
    for corner in itertools.product((0, 1), repeat=len(coords)):
        weight, where = 1, []
        for cd, f, b in zip(coords, floors, corner, strict=True):
            weight = weight * (cd - f if b else f + 1 - cd)
            where.append(f.detach() + b)
        out = out + _take(flat, where, sizes) * weight
    return out


def _nearest(flat, coords, sizes):
    """The nearest pixel (ties to even, as torch's nearbyint); no gradient to the grid, which
    stays in the graph (its gradient 0, as torch's)."""
    with no_grad():
        where = [cd.round() for cd in coords]
    zero = 0
    for cd in coords:
        r = cd.round()  # (its gradient is 0)
        zero = zero + (r - r.detach()).where(r.detach().isfinite(), 0.0)
    return _take(flat, where, sizes) + zero


def _bicubic(flat, coords, sizes, padding_mode, align):
    """torch's bicubic: 4x4 pixels around each point (each padded on its own, as torch's
    get_value_bounded) weighed by cubic convolution (A = -0.75) of the fractional parts."""
    (cy, cx), (h, w) = coords, sizes
    fy, fx = cy.floor(), cx.floor()
    wy, wx = _cubic_weights(cy - fy), _cubic_weights(cx - fx)
    with no_grad():
        ys = [_tap(fy + i - 1, h, padding_mode, align) for i in range(4)]
        xs = [_tap(fx + j - 1, w, padding_mode, align) for j in range(4)]
    out = 0
    for i in range(4):
        row = 0
        for j in range(4):
            row = row + _take(flat, [ys[i], xs[j]], sizes) * wx[j]
        out = out + row * wy[i]
    return out


def _tap(c, size, padding_mode, align):
    """A bicubic tap's integer coordinate after padding (truncated, as torch's cast)."""
    return _source_index(c, size, padding_mode, align).trunc()


def _cubic_weights(t):
    """torch's get_cubic_upsample_coefficients: the 4 weights of the taps at -1, 0, 1, 2."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    x2 = 1.0 - t
    return [far(t + 1.0), near(t), near(x2), far(x2 + 1.0)]


# ---- fractional max pooling --------------------------------------------------------------------

def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    """The largest entry of each kernel_size window of (N, C, H, W) (or (C, H, W)), the windows
    placed pseudo-randomly (Graham's fractional max pooling) to give output_size (or the input
    size times output_ratio). _random_samples (N, C, 2), in [0, 1): one (W, H) pair per plane
    (drawn when not given); the same ones give torch's windows. return_indices: also each
    entry's place in H*W."""
    return _fractional("fractional_max_pool2d", 2, input, kernel_size, output_size,
                       output_ratio, return_indices, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    """fractional_max_pool2d over (N, C, D, H, W) (or (C, D, H, W)); _random_samples (N, C, 3),
    one (D, H, W) triple per plane; indices are places in D*H*W."""
    return _fractional("fractional_max_pool3d", 3, input, kernel_size, output_size,
                       output_ratio, return_indices, _random_samples)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None,  # noqa: A002
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """fractional_max_pool2d and its indices, always (torch's name)."""
    return _fractional("fractional_max_pool2d", 2, input, kernel_size, output_size,
                       output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None,  # noqa: A002
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """fractional_max_pool3d and its indices, always (torch's name)."""
    return _fractional("fractional_max_pool3d", 3, input, kernel_size, output_size,
                       output_ratio, True, _random_samples)


def _tuple(value, n, name, what):
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * n
    if len(values) != n:
        raise ValueError(f"{name}: {what} must be one value or {n}, got {value!r}")
    return values


def _fractional(name, nd, input, kernel_size, output_size, output_ratio, return_indices,  # noqa: A002
                samples):
    x = _t(input)
    if x.ndim not in (nd + 1, nd + 2):
        dims = ("H, W", "D, H, W")[nd - 2]
        raise ShapeError(f"{name}: expected input (N, C, {dims}) or (C, {dims}), got "
                         f"{fmt_shape(x.shape)}")
    unbatched = x.ndim == nd + 1
    x = x.unsqueeze(0) if unbatched else x
    kernel, out = _fractional_sizes(name, nd, x, kernel_size, output_size, output_ratio)
    n, c, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    starts = _fractional_starts(name, nd, x, samples, kernel, out)
    xp = x.backend.xp
    place, stride = 0, 1
    for i in reversed(range(nd)):
        at = [1] * (2 + 2 * nd)
        at[2 + i] = out[i]
        start = starts[i].reshape((n, c) + tuple(at[2:]))
        at[2 + i], at[2 + nd + i] = 1, kernel[i]
        place = place + (start + xp.arange(kernel[i]).reshape(at)) * stride
        stride *= sizes[i]
    place = place.reshape((n, c) + out + (-1,))
    windows = x.reshape(n, c, -1).gather(2, _fresh(place.reshape(n, c, -1), backend=x.backend))
    y, picked = windows.reshape(place.shape).max(-1)
    if unbatched:
        y = y.squeeze(0)
    if not return_indices:
        return y
    where = xp.take_along_axis(place, picked._data[..., None], -1)[..., 0]
    where = _fresh(where.astype(np.int64), backend=x.backend)
    return y, (where.squeeze(0) if unbatched else where)


def _fractional_sizes(name, nd, x, kernel_size, output_size, output_ratio):
    """The kernel and output sizes (the output from output_ratio when not given), checked."""
    kernel = tuple(int(k) for k in _tuple(kernel_size, nd, name, "kernel_size"))
    if min(kernel) <= 0:
        raise ValueError(f"{name}: kernel_size must be positive, got {kernel_size!r}")
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    sizes = tuple(x.shape[2:])
    if output_size is None:
        ratio = _tuple(output_ratio, nd, name, "output_ratio")
        out = tuple(int(s * r) for s, r in zip(sizes, ratio, strict=True))
    else:
        out = tuple(int(o) for o in _tuple(output_size, nd, name, "output_size"))
    names = ("height", "width") if nd == 2 else ("time", "height", "width")
    for what, s, k, o in zip(names, sizes, kernel, out, strict=True):
        if o + k - 1 > s or o < 0:
            raise ShapeError(f"{name}: pool {what} {k} too large relative to input {what} {s} "
                             f"for an output {what} of {o} (input {fmt_shape(x.shape)})")
    return kernel, out


def _fractional_starts(name, nd, x, samples, kernel, out):
    """Each window's first place along each dim: (N, C, out_i) integer arrays, from the
    samples as torch's generate_intervals computes them (in the input's dtype)."""
    n, c = x.shape[:2]
    if samples is None:
        samples = rand(n, c, nd, dtype=x.dtype, backend=x.backend)
    samples = _t(samples, x)
    if samples.ndim != 3 or samples.shape[0] < n or tuple(samples.shape[1:]) != (c, nd):
        raise ShapeError(f"{name}: expected _random_samples (N, C, {nd}) = "
                         f"{fmt_shape((n, c, nd))} for input {fmt_shape(x.shape)}, got "
                         f"{fmt_shape(samples.shape)}")
    xp = x.backend.xp
    s = samples._data[:n].astype(x.dtype)
    dt = np.dtype(x.dtype).type
    columns = (1, 0) if nd == 2 else (0, 1, 2)  # torch's: (W, H) and (T, H, W)
    starts = []
    for size, k, o, col in zip(x.shape[2:], kernel, out, columns, strict=True):
        seq = xp.full((n, c, o), size - k, dtype=np.int64)
        if o > 1:
            alpha = dt(size - k) / dt(o - 1)
            u = s[:, :, col, None]
            i = xp.arange(o - 1).astype(x.dtype)
            seq[..., :-1] = (xp.trunc((i + u) * alpha) - xp.trunc(u * alpha)).astype(np.int64)
        starts.append(seq)
    return starts
