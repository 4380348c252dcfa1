"""nn.init: fill a tensor in place with a starting distribution, with PyTorch's names and rules.

Each function works under no_grad (so it may fill a Parameter), draws from `generator` (a
tinyattn.Generator) when one is given, else from the backend's stream (tinyattn.manual_seed
makes it repeatable), and returns the tensor. fan_in is the
number of inputs a unit of a (out, in, *kernel) weight sees, fan_out the number of outputs.
A tensor with no entries is returned as it is by kaiming_* and xavier_*, with torch's warning.
"""

import functools
import math

import numpy as np

from ..autograd import no_grad
from ..errors import ShapeError, fmt_shape, warn_user
from ..tensor import rand, randn

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_", "dirac_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_",
    "orthogonal_", "sparse_",
]

_LINEAR = ("linear", "identity", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
           "conv_transpose2d", "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The factor that keeps activations' variance steady through `nonlinearity`."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"calculate_gain: negative_slope {slope!r} is not a number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r} (linear, "
                     "sigmoid, tanh, relu, leaky_relu, selu, conv*)")


def _fans(tensor, name):
    if tensor.ndim < 2:
        raise ShapeError(f"{name}: fan in and fan out need a tensor of at least 2 dims "
                         f"(out, in, ...), got {fmt_shape(tensor.shape)}")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _nothing_to_draw(tensor):
    """True, with torch's warning, for a tensor without entries (its fans may be 0)."""
    if tensor.numel() == 0:
        warn_user("Initializing zero-element tensors is a no-op", UserWarning)
        return True
    return False


def _fan(tensor, mode, name):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{name}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(tensor, name)
    return fan_in if mode == "fan_in" else fan_out


@no_grad()
def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """U[a, b)."""
    return tensor.uniform_(a, b, generator=generator)


@no_grad()
def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """N(mean, std²)."""
    return tensor.normal_(mean, std, generator=generator)


@no_grad()
def constant_(tensor, val):
    return tensor.fill_(val)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


@no_grad()
def eye_(tensor):
    """The identity matrix (a 2-D tensor)."""
    if tensor.ndim != 2:
        raise ShapeError(f"eye_: needs a 2-D tensor, got {fmt_shape(tensor.shape)}")
    return tensor.copy_(tensor.backend.xp.eye(*tensor.shape, dtype=tensor.dtype))


@no_grad()
def dirac_(tensor, groups=1):
    """The identity kernel of a convolution weight (3-, 4- or 5-D: out, in, *kernel), torch's
    Dirac delta: in each of `groups` blocks of out / groups output channels, the first
    min(out / groups, in) pass their input channel through at the kernel's centre (a conv
    with padding k // 2 then keeps its input); every other entry 0."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"dirac_: only tensors with 3, 4, or 5 dimensions are supported, got "
                         f"{fmt_shape(tensor.shape)}")
    out, inputs = tensor.shape[:2]
    if out % groups:
        raise ValueError(f"dirac_: dim 0 ({out}) must be divisible by groups ({groups})")
    xp, per_group = tensor.backend.xp, out // groups
    kernel = xp.zeros(tensor.shape, dtype=tensor.dtype)
    channel = xp.arange(min(per_group, inputs))
    centre = tuple(k // 2 for k in tensor.shape[2:])
    for g in range(groups):
        kernel[(g * per_group + channel, channel, *centre)] = 1
    return tensor.copy_(kernel)


@no_grad()
def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A sparse matrix (Martens, 2010), torch's rule: N(0, std²) draws, then in each column
    ceil(sparsity * rows) entries, at rows drawn anew for each column, set to 0. (torch draws
    the rows from the global stream even with a generator; here both draws use it.)"""
    if tensor.ndim != 2:
        raise ValueError(f"sparse_: only tensors with 2 dimensions are supported, got "
                         f"{fmt_shape(tensor.shape)}")
    rows, cols = tensor.shape
    zeros = math.ceil(sparsity * rows)
    tensor.normal_(0, std, generator=generator)
    # each column's rows in a random order (a uniform permutation): the first `zeros` go
    ranks = rand(rows, cols, generator=generator, dtype=np.float64,
                 backend=tensor.backend).numpy().argsort(axis=0).argsort(axis=0)
    values = np.where(ranks < zeros, 0, tensor.backend.to_numpy(tensor._data))
    return tensor.copy_(tensor.backend.asarray(values.astype(tensor.dtype)))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain √(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _fans(tensor, "xavier_uniform_")
    if _nothing_to_draw(tensor):
        return tensor
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std²) with std = gain √(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(tensor, "xavier_normal_")
    if _nothing_to_draw(tensor):
        return tensor
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b) with b = gain √(3 / fan) (He et al., 2015); a is leaky_relu's slope."""
    if _nothing_to_draw(tensor):  # (before the checks of mode and dims, as torch)
        return tensor
    fan = _fan(tensor, mode, "kaiming_uniform_")
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std²) with std = gain / √fan."""
    if _nothing_to_draw(tensor):
        return tensor
    fan = _fan(tensor, mode, "kaiming_normal_")
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


# Acklam's rational approximation of Φ⁻¹, the normal quantile (relative error below 1.2e-9,
# far finer than a weight needs): a for the centre, c/d for the tails
_CENTRE_NUM = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
               1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_CENTRE_DEN = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
               6.680131188771972e+01, -1.328068155288572e+01, 1.0)
_TAIL_NUM = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_TAIL_DEN = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
             3.754408661907416e+00, 1.0)


def _poly(coefs, x):
    out = coefs[0]
    for c in coefs[1:]:
        out = out * x + c
    return out


def _normal_quantile(xp, log_u):
    """Φ⁻¹(u) elementwise (NumPy has no erfinv), from log u: exact in the lower tail, where u
    itself underflows (Φ(-40) = 4e-350). Acklam's approximation."""
    u = xp.exp(log_u)
    q = u - 0.5
    r = q * q
    centre = q * _poly(_CENTRE_NUM, r) / _poly(_CENTRE_DEN, r)
    upper = xp.log(xp.maximum(1 - u, np.finfo(np.float64).epsneg))  # (log(1 - u) > -inf)
    t = xp.sqrt(-2 * xp.where(q < 0, log_u, upper))  # (the tails: u below 0.02425, 1 - u too)
    tail = _poly(_TAIL_NUM, t) / _poly(_TAIL_DEN, t)
    return xp.where(xp.abs(q) <= 0.5 - 0.02425, centre, xp.where(q < 0, tail, -tail))


def _log_cdf(z):
    """log Φ(z), exact in the lower tail: erfc does not cancel there, and past its underflow
    (z < -37) the asymptotic series -z²/2 - log(-z√(2π)) + log(1 - 1/z² + 3/z⁴ - ...) holds."""
    if z > -30:
        return math.log(0.5 * math.erfc(-z / math.sqrt(2)))
    if z == -math.inf:
        return -math.inf
    w = 1 / (z * z)
    series = 1 - w * (1 - 3 * w * (1 - 5 * w * (1 - 7 * w)))
    return -z * z / 2 - math.log(-z * math.sqrt(2 * math.pi)) + math.log(series)


@no_grad()
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std²) restricted to [a, b], by inverse-CDF sampling as torch: u uniform in
    [Φ(α), Φ(β)] (α, β: a, b standardized), then mean + std Φ⁻¹(u). u is kept as log u and
    an interval above the mean drawn as its mirror image below, so any [a, b] works, however
    far out (torch's warning when the mean is more than 2 std from it all the same)."""
    if not a < b:
        raise ValueError(f"trunc_normal_: the interval [a, b] must have a < b, got a={a}, b={b}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warn_user("mean is more than 2 std from [a, b] in nn.init.trunc_normal_ (torch warns "
                  f"too): mean={mean}, std={std}, [a, b] = [{a}, {b}]; the values are drawn "
                  "from the far tail", UserWarning)
    lo, hi = (a - mean) / std, (b - mean) / std
    flip = lo > 0  # (mirrored: Φ near 1 would have lost every digit of 1 - Φ)
    if flip:
        lo, hi = -hi, -lo
    log_low, log_high = _log_cdf(lo), _log_cdf(hi)
    ratio = math.exp(log_low - log_high)  # Φ(lo) / Φ(hi), in [0, 1)
    xp = tensor.backend.xp
    u = rand(*tensor.shape, generator=generator, dtype=np.float64, backend=tensor.backend)._data
    # log u for u uniform in [Φ(lo), Φ(hi)]: log Φ(hi) + log(ratio + (1 - ratio) U)
    log_u = log_high + xp.log(xp.maximum(ratio + (1 - ratio) * u, np.finfo(np.float64).tiny))
    z = _normal_quantile(xp, xp.minimum(log_u, 0.0))
    out = xp.clip(mean + std * (-z if flip else z), a, b)
    if tensor.dtype.kind == "f" and tensor.dtype != np.float64:
        # a bound the dtype cannot hold (0.1 in float32): a value rounded past it steps inside
        narrow = out.astype(tensor.dtype)
        back = narrow.astype(np.float64)
        out = xp.where(back > b, xp.nextafter(narrow, narrow.dtype.type(-np.inf)),
                       xp.where(back < a, xp.nextafter(narrow, narrow.dtype.type(np.inf)), narrow))
    return tensor.copy_(out)


@no_grad()
def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix (Saxe et al., 2013), from the QR decomposition of a normal
    draw; dims after the first are flattened together."""
    if tensor.ndim < 2:
        raise ShapeError(f"orthogonal_: needs a tensor of at least 2 dims, got "
                         f"{fmt_shape(tensor.shape)}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = randn(rows, cols, generator=generator, dtype=np.float64,
                 backend=tensor.backend).numpy()
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))  # makes the decomposition unique: the draw is uniform (Haar)
    if rows < cols:
        q = q.T
    return tensor.copy_(tensor.backend.asarray(gain * q.reshape(tensor.shape)))


def _deprecated(fn):
    """torch's old spelling of init function `fn`, without the trailing underscore: `fn`, with
    torch's FutureWarning first (ported code such as nn.init.xavier_uniform(w) runs)."""
    old = fn.__name__[:-1]

    @functools.wraps(fn)
    def deprecated(*args, **kwargs):
        warn_user(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{fn.__name__}`.",
                  FutureWarning)
        return fn(*args, **kwargs)

    deprecated.__name__ = deprecated.__qualname__ = old
    return deprecated


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
