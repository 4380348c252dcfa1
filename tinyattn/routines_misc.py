"""More of torch's top-level functions: sampling (binomial, poisson), empty_strided, the
deprecated end-inclusive range, typename, the default device (get_default_device,
set_default_device: tinyattn's backends, cpu and cuda), histogramdd, and the functional RNN
cells (rnn_tanh_cell, rnn_relu_cell, lstm_cell, gru_cell).

The cells are composed of differentiable tensor ops (their gradients of any order are those
ops'); the samples, histogramdd's counts and empty_strided's memory have no gradient.
"""

import collections
import math
import numbers

import numpy as np

from . import backends, dtypes
from .errors import BackendError, DimError, DTypeError, ShapeError, fmt_shape, warn_user
from .functional import linear
from .generator import check as check_generator
from .generator import rng_of
from .return_types import Device
from .tensor import Tensor, _fresh, _values, empty

# ---- sampling ---------------------------------------------------------------------------------


def _floats(fn, name, x, error=ValueError):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: {name} must be a tensor, got {type(x).__name__}")
    if x.dtype.kind != "f":
        raise error(f"{fn} only supports floating-point dtypes for {name}, got {x.dtype}")
    return x


def binomial(count, prob, generator=None):
    """torch.binomial: a draw of Binomial(count, prob) for each entry (count and prob
    broadcast together), in count's floating dtype; a sample, with no gradient."""
    count, prob = _floats("binomial", "count", count), _floats("binomial", "prob", prob)
    try:
        shape = np.broadcast_shapes(count.shape, prob.shape)
    except ValueError:
        raise ShapeError(f"binomial: count of shape {fmt_shape(count.shape)} and prob of "
                         f"shape {fmt_shape(prob.shape)} do not broadcast") from None
    check_generator(generator, count.backend, "binomial")
    return _values("binomial", _binomial, count, prob, shape=shape, backend=count.backend,
                   generator=generator)


def _binomial(count, prob, shape, backend, generator):
    xp = backend.xp
    if not bool(((prob >= 0) & (prob <= 1)).all()):
        raise ValueError(f"binomial: every prob must be in [0, 1] (prob of shape "
                         f"{fmt_shape(prob.shape)})")
    if not bool((count >= 0).all()):
        raise ValueError(f"binomial: every count must be non-negative (count of shape "
                         f"{fmt_shape(count.shape)})")
    n = xp.broadcast_to(xp.floor(count), shape).astype(np.int64)
    p = xp.broadcast_to(prob, shape).astype(np.float64)
    return rng_of(backend, generator).binomial(n, p).astype(count.dtype)


def poisson(input, generator=None):  # noqa: A002 - torch's name
    """torch.poisson: a draw of Poisson(rate) for each rate of `input`, in its floating
    dtype; a sample, with no gradient."""
    rates = _floats("poisson", "input", input, NotImplementedError)
    check_generator(generator, rates.backend, "poisson")
    return _values("poisson", _poisson, rates, backend=rates.backend, generator=generator)


def _poisson(rates, backend, generator):
    if not bool((rates >= 0).all()):
        raise RuntimeError(f"poisson: invalid Poisson rate, expected every rate to be "
                           f"non-negative (input of shape {fmt_shape(rates.shape)})")
    return rng_of(backend, generator).poisson(rates.astype(np.float64)).astype(rates.dtype)


# ---- creation -----------------------------------------------------------------------------------


def _ints(fn, name, values):
    try:
        return tuple(int(v) for v in values)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be a sequence of ints, got {values!r}") from None


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """torch.empty_strided: an uninitialised tensor of `size` whose strides (in entries) are
    `stride`, over the fewest entries those reach; a leaf."""
    size, stride = _ints("empty_strided", "size", size), _ints("empty_strided", "stride", stride)
    if len(size) != len(stride):
        raise ShapeError(f"empty_strided: dimensionality of sizes ({len(size)}) must match "
                         f"dimensionality of strides ({len(stride)}): size {fmt_shape(size)}, "
                         f"stride {stride}")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise ShapeError(f"empty_strided: sizes and strides must be non-negative, got size "
                         f"{fmt_shape(size)} and stride {stride}")
    entries = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    memory = empty(entries, dtype=dtype, backend=device)
    return memory.as_strided(size, stride).detach().requires_grad_(requires_grad)


def _range_count(start, end, step):
    if step == 0:
        raise RuntimeError("range: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"range: upper bound and lower bound inconsistent with step sign "
                           f"(start={start}, end={end}, step={step})")
    return int(math.floor((end - start) / step)) + 1


def range(start, end, step=1, *, dtype=None, device=None,  # noqa: A001 - torch's name
          requires_grad=False):
    """torch.range (deprecated there, with a warning, as here): start, start + step, ... up
    to end inclusive; the default dtype unless dtype= says (not the ints' int64 of arange)."""
    warn_user("torch.range is deprecated and will be removed in a future release because its "
              "behavior is inconsistent with Python's range builtin. Instead, use "
              "tinyattn.arange, which produces values in [start, end).")
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"range: {name} must be a number, got {v!r}")
    n = _range_count(start, end, step)
    dtype = dtypes.get_default_dtype() if dtype is None else dtype
    values = start + np.arange(n, dtype=np.float64) * step
    return _fresh(values, dtype=dtype, requires_grad=requires_grad, backend=device)


def typename(obj):
    """torch.typename: a tensor's type() ('tinyattn.FloatTensor'), else the object's module
    and qualified name ('int' for builtins')."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    return qualname if module in {"", "builtins"} else f"{module}.{qualname}"


# ---- the default device --------------------------------------------------------------------------


def get_default_device():
    """torch.get_default_device: where new tensors are made, device(type='cpu') (NumPy) or
    device(type='cuda') (CuPy): the backend get_backend() gives."""
    return Device.of_backend(backends.get_backend().name)


def set_default_device(device):
    """torch.set_default_device: make new tensors on `device` from now on ('cpu', 'cuda',
    'cuda:0' or a device; None is cpu), as set_backend does: every function that makes a
    tensor takes it, a `use_backend` block still wins inside it. tinyattn has one GPU (CuPy's
    current one) and no meta, mps or other devices: those are refused by name."""
    if device is None:
        device = "cpu"
    if not isinstance(device, str):
        raise TypeError(f"set_default_device: device must be 'cpu', 'cuda' or a device, got "
                        f"{type(device).__name__} {device!r}")
    kind, _, index = str(device).partition(":")
    if kind not in ("cpu", "cuda") or (index and index != "0"):
        raise ValueError(f"set_default_device: tinyattn's devices are 'cpu' (NumPy) and 'cuda' "
                         f"(CuPy, one GPU: 'cuda:0'), got {device!r}")
    try:
        backends.set_backend("numpy" if kind == "cpu" else "cupy")
    except BackendError as e:
        raise BackendError(f"set_default_device: {device!r} is not available: {e}") from None


# ---- histogramdd ---------------------------------------------------------------------------------

histogramdd_result = collections.namedtuple("histogramdd", ["hist", "bin_edges"])


def _histogram_bins(bins, d):
    """bins as NumPy takes it: one count, d counts, or d tensors of edges."""
    if isinstance(bins, numbers.Integral):
        return int(bins)
    bins = list(bins)
    if len(bins) != d:
        raise ShapeError(f"histogramdd: bins must give one entry per dimension, got "
                         f"{len(bins)} for points of {d} dimensions")
    return [np.asarray(b.numpy(), np.float64) if isinstance(b, Tensor) else int(b)
            for b in bins]


def histogramdd(input, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """torch.histogramdd: the histogram of the points input (..., D) in D dimensions, with
    `bins` (a count, D counts, or D tensors of edges), range (min0, max0, min1, max1, ...),
    per-point weights, density; (hist, bin_edges) in input's dtype, no gradient."""
    x = _floats("histogramdd", "input", input, DTypeError)
    if x.ndim < 1:
        raise ShapeError("histogramdd: input must have at least one dimension (..., D)")
    d = x.shape[-1]
    points = np.asarray(x.detach().numpy(), np.float64).reshape(-1, d)
    weights = None
    if weight is not None:
        if tuple(weight.shape) != tuple(x.shape[:-1]):
            raise ShapeError(f"histogramdd: weight of shape {fmt_shape(weight.shape)} must "
                             f"have input's shape but the last dim, {fmt_shape(x.shape[:-1])}")
        weights = np.asarray(weight.detach().numpy(), np.float64).reshape(-1)
    ranges = None
    if range is not None:
        flat = [float(v) for v in range]
        if len(flat) != 2 * d:
            raise ShapeError(f"histogramdd: range must give 2 * {d} values (min and max per "
                             f"dimension), got {len(flat)}")
        ranges = list(zip(flat[0::2], flat[1::2], strict=True))
    hist, edges = np.histogramdd(points, bins=_histogram_bins(bins, d), range=ranges,
                                 weights=weights, density=density)
    be = x.backend.name
    return histogramdd_result(_fresh(hist, dtype=x.dtype, backend=be),
                              [_fresh(e, dtype=x.dtype, backend=be) for e in edges])


# ---- the functional RNN cells ------------------------------------------------------------------


def _cell_shapes(fn, gates, input, h, w_ih, w_hh):  # noqa: A002 - torch's name
    """input (B, I), h (B, H), w_ih (gates * H, I), w_hh (gates * H, H) (2-D input and hx
    only, as torch's functional cells: its IndexError for a 1-D one is a DimError here)."""
    for name, t in (("input", input), ("hx", h), ("w_ih", w_ih), ("w_hh", w_hh)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: {name} must be a tensor, got {type(t).__name__}")
    if input.ndim != 2 or h.ndim != 2 or input.shape[0] != h.shape[0]:
        raise DimError(f"{fn}: input and hx must be 2-D (batch, size) with one batch, got "
                       f"input of shape {fmt_shape(input.shape)} and hx of shape "
                       f"{fmt_shape(h.shape)}")
    hidden = h.shape[-1]
    want = f"{gates} * hidden_size" if gates > 1 else "hidden_size"
    for name, w, width in (("w_ih", w_ih, input.shape[-1]), ("w_hh", w_hh, hidden)):
        if w.ndim != 2 or w.shape[0] != gates * hidden:
            raise ShapeError(f"{fn}: {name} of shape {fmt_shape(w.shape)} must have "
                             f"{want} = {gates * hidden} rows (hx of shape "
                             f"{fmt_shape(h.shape)})")
        if w.shape[1] != width:
            raise ShapeError(f"{fn}: input of shape {fmt_shape(input.shape)} and hx of shape "
                             f"{fmt_shape(h.shape)} do not fit {name} of shape "
                             f"{fmt_shape(w.shape)} (w_ih (G*H, input_size), w_hh (G*H, H))")


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """torch.rnn_tanh_cell: tanh(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)."""
    _cell_shapes("rnn_tanh_cell", 1, input, hx, w_ih, w_hh)
    return (linear(input, w_ih, b_ih) + linear(hx, w_hh, b_hh)).tanh()


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """torch.rnn_relu_cell: relu(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)."""
    _cell_shapes("rnn_relu_cell", 1, input, hx, w_ih, w_hh)
    return (linear(input, w_ih, b_ih) + linear(hx, w_hh, b_hh)).relu()


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """torch.lstm_cell: hx is the pair (h, c); the gates input, forget, cell, output in
    that order along w_ih's rows; returns (h', c')."""
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        raise TypeError(f"lstm_cell: hx must be the pair (h, c), got {type(hx).__name__}")
    h, c = hx
    _cell_shapes("lstm_cell", 4, input, h, w_ih, w_hh)
    if tuple(c.shape) != tuple(h.shape):
        raise ShapeError(f"lstm_cell: c of shape {fmt_shape(c.shape)} must have h's shape "
                         f"{fmt_shape(h.shape)}")
    i, f, g, o = (linear(input, w_ih, b_ih) + linear(h, w_hh, b_hh)).chunk(4, -1)
    c_next = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c_next.tanh(), c_next


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """torch.gru_cell: the gates reset, update, new in that order along w_ih's rows;
    h' = (1 - z) * n + z * h with n = tanh(x_n + r * h_n)."""
    _cell_shapes("gru_cell", 3, input, hx, w_ih, w_hh)
    x_r, x_z, x_n = linear(input, w_ih, b_ih).chunk(3, -1)
    h_r, h_z, h_n = linear(hx, w_hh, b_hh).chunk(3, -1)
    r, z = (x_r + h_r).sigmoid(), (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return n + z * (hx - n)
