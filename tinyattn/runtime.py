"""torch's process-wide calls that training scripts make at setup, and what they do here.

- Random state: seed() (a fresh seed from the OS for every backend; returns it),
  initial_seed(), get_rng_state() (the default generator's state as a uint8 tensor, as torch's
  ByteTensor; its bytes are tinyattn's, not torch's) and set_rng_state(state), which restores
  it exactly: the draws that followed get_rng_state() follow again.
- Determinism: use_deterministic_algorithms(mode, warn_only=False) is taken and reported by
  are_deterministic_algorithms_enabled(); tinyattn's NumPy ops are deterministic whatever it
  says (and ta.backends.cudnn.deterministic / benchmark change nothing: there is no cuDNN).
- set_float32_matmul_precision("highest" | "high" | "medium") is kept and reported by
  get_float32_matmul_precision(); float32 matmuls here are full float32 whatever it says.
- Threads: set_num_threads(n) sets the thread count of NumPy's BLAS (and of any other BLAS or
  OpenMP pool the process has loaded) at once, through threadpoolctl; get_num_threads() is the
  count set, else the BLAS pool's own (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS or one per CPU).
- compile(model, ...) returns the model (or function) unchanged: tinyattn does not compile
  (ta.capture records a step once and replays it, its nearest thing).
- The legacy tensor types FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor,
  ShortTensor, CharTensor, ByteTensor and BoolTensor: FloatTensor([1, 2]) is a float32 tensor
  of that data, FloatTensor(2, 3) one of that shape (zeros: tinyattn has no uninitialised
  memory), FloatTensor(t) t itself where t has the type's dtype, and isinstance(x, FloatTensor)
  is whether x is a float32 tensor on the host, as torch's.
"""

import json
import numbers
import os

import numpy as np

from .errors import warn_user
from .generator import _entropy, default_generator
from .tensor import Tensor, manual_seed, tensor, zeros

__all__ = ["seed", "initial_seed", "get_rng_state", "set_rng_state",
           "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_float32_matmul_precision",
           "get_float32_matmul_precision", "set_num_threads", "get_num_threads", "compile",
           "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
           "CharTensor", "ByteTensor", "BoolTensor"]


# ---- random state --------------------------------------------------------------------------


def seed():
    """Seed every backend from the operating system's entropy; returns the seed (as torch's)."""
    s = _entropy()
    manual_seed(s)
    return s


def initial_seed():
    """The seed the default generator last started from (torch.initial_seed)."""
    return default_generator.initial_seed()


_RNG_FORMAT = "tinyattn-rng-1"


def get_rng_state():
    """The default generator's (the NumPy backend's stream's) state as a uint8 tensor, for
    set_rng_state. Its bytes are JSON text of tinyattn's state, not torch's mt19937 state:
    save and restore it within tinyattn."""
    state = {"format": _RNG_FORMAT, **default_generator.get_state()}
    raw = json.dumps(state, sort_keys=True).encode()
    return tensor(np.frombuffer(raw, dtype=np.uint8).copy())


def set_rng_state(new_state):
    """Restore a state get_rng_state() returned: the same draws follow."""
    if not isinstance(new_state, Tensor) or new_state.dtype != np.uint8 or new_state.ndim != 1:
        got = (f"a {new_state.dtype} tensor of shape {tuple(new_state.shape)}"
               if isinstance(new_state, Tensor) else type(new_state).__name__)
        raise TypeError(f"set_rng_state: expected the uint8 tensor get_rng_state() returned, got "
                        f"{got}")
    try:
        state = json.loads(new_state.numpy().tobytes().decode())
        if not isinstance(state, dict) or state.pop("format", None) != _RNG_FORMAT:
            raise ValueError("no tinyattn rng state")
    except (UnicodeDecodeError, ValueError):
        raise ValueError("set_rng_state: this uint8 tensor is not a state tinyattn's "
                         "get_rng_state() returned (torch's ByteTensor states do not load "
                         "here)") from None
    default_generator.set_state(state)


# ---- determinism -------------------------------------------------------------------------------

_deterministic = {"mode": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Taken, and reported by are_deterministic_algorithms_enabled(): tinyattn's NumPy ops
    give the same results on every run whatever it says (there is no nondeterministic kernel
    to refuse)."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms: mode must be a bool, got "
                        f"{type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms: warn_only must be a bool, got "
                        f"{type(warn_only).__name__}")
    _deterministic.update(mode=mode, warn_only=warn_only)


def are_deterministic_algorithms_enabled():
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


# ---- float32 matmul precision ------------------------------------------------------------------

_matmul_precision = {"value": "highest"}


def set_float32_matmul_precision(precision):
    """Kept and reported by get_float32_matmul_precision() (torch's "highest", "high" or
    "medium"); tinyattn's float32 matmuls are full float32 whatever it says (no TF32 or
    bfloat16 passes). Another value warns and changes nothing, as torch's."""
    if precision not in ("highest", "high", "medium"):
        warn_user(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                  f"set_float32_matmul_precision call has no effect.", UserWarning)
        return
    _matmul_precision["value"] = precision


def get_float32_matmul_precision():
    return _matmul_precision["value"]


# ---- threads -----------------------------------------------------------------------------------

_threads = {"count": None, "limiter": None}


def set_num_threads(n):
    """Set the BLAS thread count now (threadpoolctl changes the loaded pools' settings);
    get_num_threads reports it."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"set_num_threads: expects a positive integer, got {n!r}")
    import threadpoolctl

    _threads["limiter"] = threadpoolctl.threadpool_limits(limits=int(n))
    _threads["count"] = int(n)


def get_num_threads():
    """The count set_num_threads set; else the most threads a loaded BLAS pool uses; else the
    CPUs this process may use."""
    if _threads["count"] is not None:
        return _threads["count"]
    import threadpoolctl

    blas = [pool["num_threads"] for pool in threadpoolctl.threadpool_info()
            if pool.get("user_api") == "blas"]
    if blas:
        return max(blas)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        return os.cpu_count() or 1


# ---- compile -----------------------------------------------------------------------------------


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,  # noqa: A001
            options=None, disable=False):
    """torch.compile's signature; returns `model` (a module or a function) unchanged, and used
    as @compile(mode=...) a decorator that does the same: tinyattn does not compile (see
    ta.capture, which records a training step once and replays it)."""
    if model is None:
        return lambda fn: fn
    if not callable(model):
        raise RuntimeError(f"compile: expects a module or a function, got "
                           f"{type(model).__name__}")
    return model


# ---- legacy tensor types -----------------------------------------------------------------------


class _LegacyTensorType(type):
    """The class of torch's legacy tensor types (torch.tensortype): each makes tensors of its
    dtype and answers isinstance for them."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device == "cpu"

    def __call__(cls, *args, device=None):
        name = cls.__name__
        if device is not None and str(getattr(device, "type", device)).split(":")[0] != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but device type: "
                               f"{device} was passed")
        if not args:
            return zeros(0, dtype=cls.dtype)
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            return zeros(*args, dtype=cls.dtype)  # a shape (zeros, not uninitialised memory)
        if len(args) > 1:
            raise TypeError(f"{name}(): takes a shape (ints), or one sequence of data, or a "
                            f"tensor; got {', '.join(type(a).__name__ for a in args)}")
        return cls._from(args[0])

    def _from(cls, data):
        """The tensor of one argument: a tensor (itself), a shape (ta.Size), or data."""
        name = cls.__name__
        if isinstance(data, Tensor):
            if data.dtype != cls.dtype:
                raise TypeError(f"{name}(): expected a {cls.dtype} tensor (got {data.dtype}); "
                                f"convert it with .to(tinyattn.{cls.dtype})")
            return data
        if isinstance(data, numbers.Number) or isinstance(data, (str, bytes)):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        if not isinstance(data, np.ndarray) and hasattr(data, "__len__") and len(data) == 0:
            return zeros(0, dtype=cls.dtype)
        if type(data).__name__ == "Size":  # (ta.Size, torch.Size: a shape, as torch's)
            return zeros(*data, dtype=cls.dtype)
        return tensor(np.asarray(data).astype(cls.dtype))  # (floats to ints: truncated, as torch)

    def __repr__(cls):
        return f"<class 'tinyattn.{cls.__name__}'>"


def _legacy(name, dtype):
    return _LegacyTensorType(name, (), {
        "dtype": np.dtype(dtype), "__module__": "tinyattn",
        "__doc__": f"torch.{name}: a {np.dtype(dtype)} tensor from data or a shape; "
                   f"isinstance(x, {name}) for {np.dtype(dtype)} tensors (see tinyattn.runtime)"})


FloatTensor, DoubleTensor, HalfTensor = (_legacy(n, d) for n, d in (
    ("FloatTensor", np.float32), ("DoubleTensor", np.float64), ("HalfTensor", np.float16)))
LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor = (_legacy(n, d) for n, d in (
    ("LongTensor", np.int64), ("IntTensor", np.int32), ("ShortTensor", np.int16),
    ("CharTensor", np.int8), ("ByteTensor", np.uint8)))
BoolTensor = _legacy("BoolTensor", np.bool_)
