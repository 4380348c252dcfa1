"""nn.init: fill a tensor in place with a starting distribution, with PyTorch's names and rules.

Each function works under no_grad (so it may fill a Parameter), draws from `generator` (a
tinyattn.Generator) when one is given, else from the backend's stream (tinyattn.manual_seed
makes it repeatable), and returns the tensor. fan_in is the
number of inputs a unit of a (out, in, *kernel) weight sees, fan_out the number of outputs.
A tensor with no entries is returned as it is by kaiming_* and xavier_*, with torch's warning.
"""

import math
import warnings

import numpy as np

from ..autograd import no_grad
from ..errors import ShapeError, fmt_shape
from ..tensor import randn

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_",
    "orthogonal_",
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
        warnings.warn("Initializing zero-element tensors is a no-op", UserWarning, stacklevel=3)
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


@no_grad()
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std²) restricted to [a, b]: entries outside are drawn again until none is."""
    if not a < b:
        raise ValueError(f"trunc_normal_: the interval [a, b] must have a < b, got a={a}, b={b}")
    lo, hi = (a - mean) / std, (b - mean) / std
    inside = 0.5 * (math.erf(hi / math.sqrt(2)) - math.erf(lo / math.sqrt(2)))
    if inside < 1e-3:
        raise ValueError(f"trunc_normal_: [a, b] = [{a}, {b}] holds only {inside:.1e} of "
                         f"N({mean}, {std}²); redrawing would take too long")
    xp = tensor.backend.xp
    out = xp.empty(tensor.shape, dtype=np.float64)
    todo = xp.ones(tensor.shape, dtype=bool)
    while bool(todo.any()):  # each round keeps a fraction `inside` of what is left
        draw = randn(*tensor.shape, generator=generator, dtype=np.float64,
                     backend=tensor.backend).data * std + mean
        take = todo & (draw >= a) & (draw <= b)
        out[take] = draw[take]
        todo &= ~take
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
