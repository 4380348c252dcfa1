"""Choosing a backend: by name, per context, or from the TINYATTN_BACKEND environment variable.

`get_backend()` is the backend new tensors land on: the innermost `use_backend(...)` block, else
the one `set_backend(...)` chose, else TINYATTN_BACKEND, else NumPy. Backends are made once and
kept; CuPy is imported only when its backend is first asked for, never by `import tinyattn`.
"""

import contextlib
import contextvars
import copyreg
import os

from ..errors import BackendError
from . import cuda, cudnn, mps  # noqa: F401 - torch's switches: ta.backends.cudnn.benchmark...
from .allocator import keep_freed_memory  # noqa: F401 - ta.backends.keep_freed_memory
from .base import Backend
from .numpy_backend import NumpyBackend

ALIASES = {"numpy": "numpy", "cpu": "numpy", "np": "numpy", "cupy": "cupy", "cuda": "cupy",
           "gpu": "cupy"}

_made = {}
_seed = None  # the last manual_seed, given to backends made after it
_default = None  # the name set_backend chose, or None for "TINYATTN_BACKEND, else numpy"
_override = contextvars.ContextVar("tinyattn_backend", default=None)


def alias_key(name):
    """The ALIASES key a backend name or device string names, or None: "cpu:0" and "cuda:0"
    are torch's device strings with an index (a CPU index is read as torch reads it, and
    ignored; tinyattn runs on one GPU, so a CUDA index past 0 is refused)."""
    name = str(name).lower()
    kind, colon, index = name.partition(":")
    if not colon:
        return ALIASES.get(name)
    if kind not in ("cpu", "cuda") or not index.isdigit():
        return None
    if kind == "cuda" and int(index) != 0:
        raise BackendError(f"device {name!r}: tinyattn runs on one GPU, the CuPy backend's "
                           "(cuda or cuda:0); choose the GPU with CUDA_VISIBLE_DEVICES")
    return ALIASES[kind]


def backend(name_or_backend):
    """The backend object for a name ("numpy", "cpu", "cupy", "cuda", "cuda:0") or a Backend
    (returned)."""
    if isinstance(name_or_backend, Backend):
        return name_or_backend
    key = alias_key(name_or_backend)
    if key is None:
        raise BackendError(f"unknown backend {name_or_backend!r}: use one of "
                           f"{sorted(ALIASES)}")
    be = _made.get(key)
    if be is None:
        seed = _pending.pop(key, _seed)
        if key == "numpy":
            be = NumpyBackend(seed)
        else:
            from .cupy_backend import make_cupy_backend  # the only place CuPy gets imported

            be = make_cupy_backend(seed)
        _made[key] = be
        copyreg.pickle(type(be), _by_name)  # a pickled backend comes back as this very one
    return be


def made():
    """The backends made so far, by name ("numpy", "cupy")."""
    return dict(_made)


def _by_name(be):
    return backend, (be.name,)


def get_backend():
    """The backend new tensors are created on."""
    be = _override.get()
    if be is not None:
        return be
    return backend(_default or os.environ.get("TINYATTN_BACKEND", "numpy"))


def set_backend(name):
    """Make `name` the default backend for new tensors (for this process)."""
    global _default
    backend(name)  # fail now, not at the first tensor
    _default = name


@contextlib.contextmanager
def use_backend(name):
    """`with use_backend("cupy"):` creates new tensors on that backend inside the block."""
    token = _override.set(backend(name))
    try:
        yield _override.get()
    finally:
        _override.reset(token)


def manual_seed(seed):
    """Seed every backend's generator, now and for backends made later."""
    global _seed
    _seed = seed
    _pending.clear()
    for be in _made.values():
        be.seed(seed)


_pending = {}  # backend name -> the seed seed_one gave it before it was made


def seed_one(name, seed):
    """Seed one backend's generator ("cupy": torch.cuda.manual_seed): now if it is made, else
    when it is (a later manual_seed seeds it anew, as torch's)."""
    key = ALIASES[name]
    if key in _made:
        _made[key].seed(seed)
    else:
        _pending[key] = seed
