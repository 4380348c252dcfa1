"""Still more of torch's top-level functions (torch 2.13's names tinyattn lacked):

- control flow and mapping: vmap (func.vmap), cond and while_loop (torch's eager semantics:
  plain Python branches and loops, gradients through the ops they run);
- convolutions: conv_tbc (F.conv_tbc) and convolution, which dispatches to conv{1,2,3}d and
  conv_transpose{1,2,3}d by the weight's rank;
- the autocast state: is_autocast_enabled, get/set_autocast_dtype, set_autocast_enabled, the
  deprecated cpu/gpu forms, the cache flag and the nesting count. The state is amp.py's:
  `with autocast(...)` sets it; nothing reads it (tinyattn never casts), and enabling it for
  a dtype amp refuses (float16, bfloat16) is refused here too;
- DLPack: from_dlpack (NumPy's, zero-copy where it is) and to_dlpack (a capsule of the array),
  with Tensor.__dlpack__ / __dlpack_device__ (METHODS), so torch.from_dlpack takes a tensor;
- process settings: get/set_num_interop_threads, set_warn_always / is_warn_always_enabled
  (kept and reported), set_flush_denormal (the x86-64 MXCSR FTZ/DAZ bits of the calling
  thread, as torch sets them; False where that cannot be done), get/set_deterministic_debug_mode
  (runtime.use_deterministic_algorithms' state), is_storage, set_default_tensor_type;
- svd_lowrank and pca_lowrank: torch's randomized range finder (Halko et al.), composed of
  differentiable tensor ops (randn, matmul, linalg.qr, linalg.svd);
- ATen's native_layer_norm / native_batch_norm / native_group_norm (out, mean, rstd),
  native_dropout (out, mask), native_norm, grid_sampler{,_2d,_3d} (integer codes),
  affine_grid_generator, embedding_renorm_, empty_permuted, resize_as_, logit_, is_neg /
  resolve_neg (False / identity: there is no lazy negation here), segment_reduce;
- `random`: a module like torch.random (manual_seed, seed, initial_seed, get/set_rng_state,
  fork_rng) of runtime.py's functions.
"""

import contextlib
import ctypes
import mmap
import numbers
import os
import platform
import types

import numpy as np

from . import amp, dtypes, runtime
from . import functional as F
from .autograd import no_grad
from .errors import DTypeError, ShapeError, fmt_shape, warn_user
from .func import vmap
from .functional_more import conv_tbc
from .functional_spatial import affine_grid, grid_sample
from .linalg import vector_norm
from .linalg_decompositions import qr, svd
from .ops import nn as nn_ops
from .routines_misc import empty_strided
from .tensor import (
    Tensor,
    TypedStorage,
    UntypedStorage,
    _fresh,
    from_numpy,
    full,
    manual_seed,
    rand_like,
    randn,
)

__all__ = [
    "vmap", "cond", "while_loop", "conv_tbc", "convolution",
    "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype",
    "is_autocast_cpu_enabled", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype",
    "set_autocast_cpu_enabled", "set_autocast_cpu_dtype", "set_autocast_gpu_dtype",
    "clear_autocast_cache", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
    "autocast_increment_nesting", "autocast_decrement_nesting",
    "from_dlpack", "to_dlpack", "get_num_interop_threads", "set_num_interop_threads",
    "set_warn_always", "is_warn_always_enabled", "set_flush_denormal",
    "get_deterministic_debug_mode", "set_deterministic_debug_mode", "is_storage",
    "set_default_tensor_type", "svd_lowrank", "pca_lowrank",
    "native_layer_norm", "native_batch_norm", "native_group_norm", "native_dropout",
    "native_norm", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d",
    "affine_grid_generator", "embedding_renorm_", "empty_permuted", "resize_as_", "logit_",
    "is_neg", "resolve_neg", "segment_reduce",
]


# ---- cond, while_loop -------------------------------------------------------------------------


def _leaves(tree):
    """The leaves of nested dicts, lists and tuples."""
    if isinstance(tree, dict):
        return [leaf for v in tree.values() for leaf in _leaves(v)]
    if isinstance(tree, (list, tuple)):
        return [leaf for v in tree for leaf in _leaves(v)]
    return [tree]


def cond(pred, true_fn, false_fn, operands=()):
    """torch.cond in eager mode: true_fn(*operands) if pred else false_fn(*operands). pred: a
    Python bool/int/float or a one-element tensor; operands: a tuple or list (of nested
    containers) of tensors. What the branch returns is returned; gradients are its ops'."""
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"cond: Expected pred to be bool or single-element tensor, but "
                               f"got a tensor of shape {fmt_shape(pred.shape)}")
        pred = bool(pred.item())
    elif not isinstance(pred, (bool, int, float, np.bool_)):
        raise RuntimeError(f"cond: Expected pred to be bool or tensor, but got {pred!r}")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("cond: Expect both branches to be callable.")
    if not isinstance(operands, (tuple, list)) or \
            not all(isinstance(t, Tensor) for t in _leaves(operands)):
        raise RuntimeError("cond: Expect operands to be a tuple of possibly nested "
                           "dict/list/tuple that only consists of tensor leaves, but got "
                           f"{type(operands).__name__} {operands!r}")
    return true_fn(*operands) if pred else false_fn(*operands)


def _check_pred(pred):
    scalar = isinstance(pred, Tensor) and pred.shape == () and pred.dtype == np.bool_
    if not (scalar or isinstance(pred, (bool, np.bool_))):
        raise RuntimeError(f"while_loop: cond_fn must return a boolean scalar tensor or a "
                           f"boolean but got {pred!r}")
    return bool(pred)


def while_loop(cond_fn, body_fn, carried_inputs):
    """torch.while_loop in eager mode: val = carried_inputs; while cond_fn(*val): val =
    body_fn(*val); returns what body_fn last returned (a tensor body_fn returns alone is
    carried as a 1-tuple), or, if it never ran, the carried inputs (tensors cloned) as a
    tuple. carried_inputs: a tuple or list of tensors and ints; cond_fn must return a bool
    or a 0-d bool tensor. Gradients flow through the iterations' ops."""
    if not callable(cond_fn) or not callable(body_fn):
        raise RuntimeError("while_loop: Expect cond_fn and body_fn to be callable.")
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(f"while_loop: carried_inputs must be a tuple or list but got "
                           f"{type(carried_inputs).__name__}")
    leaves = _leaves(carried_inputs)
    if not all(isinstance(t, (Tensor, int)) and not isinstance(t, bool) for t in leaves):
        raise AssertionError(f"while_loop: carried_inputs can only be of (Tensor, int) but got "
                             f"{tuple(type(t).__name__ for t in leaves)}")  # (torch's type)
    val, out = tuple(carried_inputs), None
    while _check_pred(cond_fn(*val)):
        out = body_fn(*val)
        val = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(val) != len(carried_inputs):
            raise RuntimeError(f"while_loop: body_fn should return the same number of elements "
                               f"as carried_inputs, got {len(val)} vs {len(carried_inputs)}")
    if out is None:
        return tuple(t.clone() if isinstance(t, Tensor) else t for t in carried_inputs)
    return out


# ---- convolution -----------------------------------------------------------------------------


def _per_dim(v):
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return v[0] if len(v) == 1 else v


_CONVS = {1: (F.conv1d, F.conv_transpose1d), 2: (F.conv2d, F.conv_transpose2d),
          3: (F.conv3d, F.conv_transpose3d)}


def convolution(input, weight, bias, stride, padding, dilation, transposed,  # noqa: A002
                output_padding, groups):
    """ATen's convolution: F.conv{n}d, or F.conv_transpose{n}d where transposed, n the
    weight's rank - 2 (1, 2 or 3); its values and gradients are theirs."""
    if not isinstance(weight, Tensor) or weight.ndim - 2 not in _CONVS:
        shape = fmt_shape(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__
        raise ShapeError(f"convolution: weight must be a 3-D, 4-D or 5-D tensor (a 1-d, 2-d or "
                         f"3-d convolution), got {shape} (input "
                         f"{fmt_shape(getattr(input, 'shape', ()))})")
    conv, transpose = _CONVS[weight.ndim - 2]
    stride, padding, dilation = _per_dim(stride), _per_dim(padding), _per_dim(dilation)
    if transposed:
        return transpose(input, weight, bias, stride, padding, _per_dim(output_padding), groups,
                         dilation)
    return conv(input, weight, bias, stride, padding, dilation, groups)


# ---- the autocast state (amp.STATE) ---------------------------------------------------------


def _autocast_device(device_type, where):
    name = str(getattr(device_type, "type", device_type)).split(":")[0]
    if name not in ("cpu", "cuda"):
        raise RuntimeError(f"{where}: Invalid device type {device_type!r} (tinyattn's autocast "
                           f"state is kept for 'cpu' and 'cuda')")
    return name


def _as_dtype(dtype):
    name = amp._dtype_name(dtype)
    return dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def is_autocast_enabled(device_type=None):
    """Whether an autocast region (or set_autocast_enabled) has enabled autocast on that
    device ('cuda' where none is named, as torch's)."""
    dev = "cuda" if device_type is None else _autocast_device(device_type, "is_autocast_enabled")
    return bool(amp.STATE[dev]["enabled"])


def get_autocast_dtype(device_type):
    """The dtype autocast on that device would cast to: bfloat16 on 'cpu' and float16 on
    'cuda' unless set (ta.bfloat16 is a name tinyattn has no arrays of)."""
    return _as_dtype(amp.STATE[_autocast_device(device_type, "get_autocast_dtype")]["dtype"])


def set_autocast_dtype(device_type, dtype):
    dev = _autocast_device(device_type, "set_autocast_dtype")
    if amp._dtype_name(dtype) not in ("float16", "bfloat16", "float32", "float64"):
        raise TypeError(f"set_autocast_dtype: expected a floating-point dtype, got {dtype!r}")
    amp.STATE[dev]["dtype"] = dtype


def set_autocast_enabled(*args):
    """set_autocast_enabled(device_type, enabled), or torch's older (enabled) for 'cuda'. As
    amp.autocast, enabling it for float16 or bfloat16 is refused: tinyattn does not cast."""
    if len(args) not in (1, 2):
        raise TypeError(f"set_autocast_enabled: takes (device_type, enabled) or (enabled), got "
                        f"{len(args)} arguments")
    dev = _autocast_device(args[0], "set_autocast_enabled") if len(args) == 2 else "cuda"
    enabled = args[-1]
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"set_autocast_enabled: enabled must be a bool, got {enabled!r}")
    name = amp._dtype_name(amp.STATE[dev]["dtype"])
    if enabled and name not in ("float32", "float64"):
        raise TypeError(f"set_autocast_enabled: autocast on {dev!r} to {name} is not supported: "
                        "tinyattn does no automatic mixed precision (see tinyattn.amp); set "
                        "the dtype to float32 or float64 first, or cast the model yourself")
    amp.STATE[dev]["enabled"] = bool(enabled)


def _deprecated(old, new):
    warn_user(f"torch.{old} is deprecated. Please use torch.{new} instead.", DeprecationWarning)


def is_autocast_cpu_enabled():
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return get_autocast_dtype("cpu")


def get_autocast_gpu_dtype():
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return get_autocast_dtype("cuda")


def set_autocast_cpu_enabled(enabled):
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def set_autocast_cpu_dtype(dtype):
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype):
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


def clear_autocast_cache():
    """Nothing to clear: tinyattn keeps no cast copies."""


def is_autocast_cache_enabled():
    return bool(amp.STATE["cache"])


def set_autocast_cache_enabled(enabled):
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"set_autocast_cache_enabled: expected a bool, got {enabled!r}")
    amp.STATE["cache"] = bool(enabled)


def autocast_increment_nesting():
    amp.STATE["nesting"] += 1
    return amp.STATE["nesting"]


def autocast_decrement_nesting():
    amp.STATE["nesting"] -= 1
    return amp.STATE["nesting"]


# ---- DLPack ---------------------------------------------------------------------------------


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A tensor of any object with __dlpack__ (a NumPy array, a torch CPU tensor, ...): the
    same memory where NumPy's from_dlpack shares it (copy=True: a copy). A bare DLPack
    capsule (torch.to_dlpack's) is refused: NumPy imports only objects with __dlpack__ (pass
    the tensor itself)."""
    if type(ext_tensor).__name__ == "PyCapsule":
        raise TypeError("from_dlpack: a bare DLPack capsule is not supported here (NumPy, which "
                        "imports DLPack for tinyattn, takes objects with __dlpack__): pass the "
                        "tensor itself, e.g. ta.from_dlpack(torch_tensor)")
    if not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__, got "
                        f"{type(ext_tensor).__name__}")
    if device is not None and str(getattr(device, "type", device)).split(":")[0] != "cpu":
        raise RuntimeError(f"from_dlpack: only device='cpu' is supported, got {device!r}")
    array = np.from_dlpack(ext_tensor) if copy is None else \
        np.from_dlpack(ext_tensor, copy=copy)
    return from_numpy(array)


def to_dlpack(tensor):
    """A DLPack capsule of the tensor's memory (torch.from_dlpack(capsule) shares it)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack: expected a tensor, got {type(tensor).__name__}")
    return tensor._data.__dlpack__()


def _dlpack(self, *, stream=None, **kwargs):
    """DLPack export of the tensor's array (NumPy's __dlpack__)."""
    return self._data.__dlpack__(stream=stream, **kwargs)


def _dlpack_device(self):
    return self._data.__dlpack_device__()


METHODS = {"__dlpack__": _dlpack, "__dlpack_device__": _dlpack_device}


# ---- process settings ---------------------------------------------------------------------------

_settings = {"interop": None, "warn_always": False}


def get_num_interop_threads():
    """The count set_num_interop_threads kept; else the CPUs this process may use (tinyattn
    runs ops one at a time: it has no inter-op pool)."""
    if _settings["interop"] is not None:
        return _settings["interop"]
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        return os.cpu_count() or 1


def set_num_interop_threads(n):
    """Kept and reported by get_num_interop_threads (tinyattn has no inter-op pool)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise RuntimeError(f"set_num_interop_threads: Number of threads must be positive, got "
                           f"{n!r}")
    _settings["interop"] = int(n)


def set_warn_always(b):
    """Kept and reported by is_warn_always_enabled()."""
    if not isinstance(b, (bool, np.bool_)):
        raise RuntimeError(f"set_warn_always: expects a bool, but got {type(b).__name__}")
    _settings["warn_always"] = bool(b)


def is_warn_always_enabled():
    return _settings["warn_always"]


_MXCSR = {}
_FTZ_DAZ = 0x8040  # MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6)


def _mxcsr_calls():
    """(get, set) of the calling thread's x86-64 MXCSR register (System V calls made of a few
    bytes of machine code), or None where that cannot be done."""
    if "calls" not in _MXCSR:
        _MXCSR["calls"] = None
        if platform.machine().lower() in ("x86_64", "amd64") and os.name == "posix":
            with contextlib.suppress(OSError, ValueError, AttributeError):
                _MXCSR["calls"] = _make_mxcsr_calls()
    return _MXCSR["calls"]


def _make_mxcsr_calls():
    code = bytes.fromhex("0fae5c24fc8b4424fcc3"  # stmxcsr [rsp-4]; mov eax, [rsp-4]; ret
                         "897c24fc0fae5424fcc3")  # mov [rsp-4], edi; ldmxcsr [rsp-4]; ret
    page = mmap.mmap(-1, mmap.PAGESIZE,
                     prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    _MXCSR["page"] = page  # (kept alive)
    base = ctypes.addressof(ctypes.c_char.from_buffer(page))
    get = ctypes.CFUNCTYPE(ctypes.c_uint32)(base)
    put = ctypes.CFUNCTYPE(None, ctypes.c_uint32)(base + 10)
    return get, put


def set_flush_denormal(mode):
    """Flush denormal floats to zero (mode=True) or keep them, in the calling thread's SSE
    state (MXCSR FTZ and DAZ), as torch's; True where done, False where this CPU (or
    platform) has no such switch. NumPy's BLAS worker threads keep their own state."""
    calls = _mxcsr_calls()
    if calls is None:
        return False
    get, put = calls
    put(get() | _FTZ_DAZ if mode else get() & ~_FTZ_DAZ & 0xFFFF)
    return True


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def get_deterministic_debug_mode():
    """0 (off), 1 (warn) or 2 (error): use_deterministic_algorithms' state, as torch's."""
    if not runtime.are_deterministic_algorithms_enabled():
        return 0
    return 1 if runtime.is_deterministic_algorithms_warn_only_enabled() else 2


def set_deterministic_debug_mode(debug_mode):
    """'default'/0, 'warn'/1, 'error'/2: use_deterministic_algorithms(False), (True,
    warn_only=True), (True), as torch's."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"set_deterministic_debug_mode: invalid value of debug_mode, "
                               f"expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    elif isinstance(debug_mode, bool) or not isinstance(debug_mode, numbers.Integral):
        raise TypeError(f"set_deterministic_debug_mode: debug_mode must be str or int, but got "
                        f"{type(debug_mode)}")
    elif debug_mode not in (0, 1, 2):
        raise RuntimeError(f"set_deterministic_debug_mode: invalid value of debug_mode, "
                           f"expected 0, 1, or 2, but got {debug_mode}")
    runtime.use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def is_storage(obj):
    """Whether obj is a storage (x.untyped_storage(), x.storage())."""
    return isinstance(obj, (TypedStorage, UntypedStorage))


def _tensor_type_dtype(t):
    if isinstance(t, str):
        name = t.rpartition(".")[2]
        t = getattr(runtime, name, None) if name.endswith("Tensor") else None
        if t is None:
            raise TypeError(f"set_default_tensor_type: invalid type string {name!r}")
    dtype = getattr(t, "dtype", None) if isinstance(t, type) else None
    if dtype is None or np.dtype(dtype) not in dtypes.FLOATS:
        raise TypeError(f"set_default_tensor_type: invalid type {t!r}: only floating-point "
                        f"types are supported as the default type")
    return dtype


def set_default_tensor_type(t):
    """Deprecated (torch 2.1): t (DoubleTensor, 'torch.FloatTensor', ...) a floating legacy
    type, whose dtype becomes the default; warns as torch's."""
    warn_user("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
              "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
              UserWarning)
    dtypes.set_default_dtype(_tensor_type_dtype(t))


# ---- svd_lowrank, pca_lowrank -----------------------------------------------------------------


def _approximate_basis(A, q, niter, M):  # noqa: N803 - torch's names
    """An orthonormal (m, q) basis of A's (A - M's) range: a Gaussian sketch, then niter
    power iterations, each re-orthonormalized by QR (torch._lowrank.get_approximate_basis)."""
    def times(B, X):  # noqa: N803
        return B @ X

    R = randn(A.shape[-1], q, dtype=A.dtype)  # noqa: N806
    X = times(A, R) if M is None else times(A, R) - times(M, R)  # noqa: N806
    Q = qr(X)[0]  # noqa: N806
    for _ in range(niter):
        X = A.mT @ Q if M is None else A.mT @ Q - M.mT @ Q  # noqa: N806
        Q = qr(X)[0]  # noqa: N806
        X = A @ Q if M is None else A @ Q - M @ Q  # noqa: N806
        Q = qr(X)[0]  # noqa: N806
    return Q


def _lowrank(A, q, niter, M):  # noqa: N803
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    if A.dtype.kind != "f":
        A = A.to(dtypes.get_default_dtype())  # noqa: N806
    m, n = A.shape[-2:]
    if M is not None:
        M = M.to(A.dtype).expand(*A.shape)  # noqa: N806
    if m < n:
        A = A.mT  # noqa: N806
        M = None if M is None else M.mT  # noqa: N806
    Q = _approximate_basis(A, q, niter, M)  # noqa: N806
    B = Q.mT @ A if M is None else Q.mT @ A - Q.mT @ M  # noqa: N806
    U, S, Vh = svd(B, full_matrices=False)  # noqa: N806
    U, V = Q @ U, Vh.mT  # noqa: N806
    return (V, S, U) if m < n else (U, S, V)


def _matrix(A, name):  # noqa: N803
    if not isinstance(A, Tensor) or A.ndim < 2:
        got = fmt_shape(A.shape) if isinstance(A, Tensor) else type(A).__name__
        raise ShapeError(f"{name}: A must be a tensor of matrices (..., m, n), got {got}")


def svd_lowrank(A, q=6, niter=2, M=None):  # noqa: N803 - torch's names
    """(U, S, V) of a rank-q approximation of A (or of A - M), A ≈ U diag(S) V^T, by torch's
    randomized range finder: U (..., m, q), S (..., q), V (..., n, q). Exact where A has rank
    <= q (up to the signs of the singular vectors); its draws are the default generator's.
    Gradients are those of its ops (randn, matmul, QR, SVD)."""
    _matrix(A, "svd_lowrank")
    return _lowrank(A, q, niter, M)


def pca_lowrank(A, q=None, center=True, niter=2):  # noqa: N803 - torch's names
    """(U, S, V) of svd_lowrank of A minus its column means (center=True), q = min(6, m, n)
    by default; the principal directions are V's columns, as torch's."""
    _matrix(A, "pca_lowrank")
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ValueError(f"pca_lowrank: q(={q}) must be non-negative integer and not greater "
                         f"than min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"pca_lowrank: niter(={niter}) must be non-negative integer")
    if A.dtype.kind != "f":
        A = A.to(dtypes.get_default_dtype())  # noqa: N806
    if center:
        A = A - A.mean(dim=-2, keepdim=True)  # noqa: N806
    return _lowrank(A, q, niter, None)


# ---- native_* -------------------------------------------------------------------------------


def _stats(x, dims, eps):
    """(mean, 1 / sqrt(biased var + eps)) of x over dims (kept), with no gradient."""
    with no_grad():
        x = x.detach()
        mean = x.mean(dim=dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
        return mean, (var + eps).rsqrt()


def native_layer_norm(input, normalized_shape, weight, bias, eps):  # noqa: A002
    """(F.layer_norm(...), mean, rstd): mean and rstd over the normalized dims, kept as
    size-1 dims (no gradient), as ATen's."""
    out = F.layer_norm(input, normalized_shape, weight, bias, eps)
    k = len(tuple(normalized_shape))
    mean, rstd = _stats(input, tuple(range(input.ndim - k, input.ndim)), eps)
    return out, mean, rstd


def native_batch_norm(input, weight, bias, running_mean, running_var, training,  # noqa: A002
                      momentum, eps):
    """(F.batch_norm(...), save_mean, save_invstd): the batch's per-channel mean and 1 /
    sqrt(biased var + eps) where training (the running stats updated in place, as F's), empty
    (0,) tensors where not, as ATen's."""
    if training:
        dims = tuple(d for d in range(input.ndim) if d != 1)
        mean, rstd = _stats(input, dims, eps)
        mean, rstd = mean.reshape(-1), rstd.reshape(-1)
    else:
        mean = rstd = _fresh(np.zeros(0, dtype=input.dtype), backend=input.backend)
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    return out, mean, rstd


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):  # noqa: A002, N803
    """(F.group_norm(...), mean, rstd), mean and rstd of shape (N, group), as ATen's; N, C and
    HxW must describe input."""
    shape = tuple(input.shape)
    if len(shape) < 2 or shape[:2] != (N, C) or input.numel() != N * C * HxW:
        raise ShapeError(f"native_group_norm: input of shape {fmt_shape(shape)} is not N={N}, "
                         f"C={C}, HxW={HxW}")
    out = F.group_norm(input, group, weight, bias, eps)
    mean, rstd = _stats(input.reshape(N, group, -1), (2,), eps)
    return out, mean.reshape(N, group), rstd.reshape(N, group)


def native_dropout(input, p, train):  # noqa: A002
    """(out, mask): mask (bool) keeps each entry with probability 1 - p, out = input * mask /
    (1 - p) (zeros for p = 1); train=False (not None) returns input's copy and an all-True
    mask, as ATen's."""
    nn_ops.check_dropout_p(p)
    if train is not None and not train:
        return input.clone(), _fresh(np.ones(input.shape, dtype=bool), backend=input.backend)
    mask = rand_like(input) >= p
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
    return input * mask.to(input.dtype) * scale, mask


def native_norm(input, p=2, dim=None, keepdim=False, dtype=None):  # noqa: A002
    """The p-norm of input over dim (all dims by default), linalg.vector_norm's. (torch has
    only a sparse kernel for it: dense CPU tensors raise there.)"""
    return vector_norm(input, 2 if p is None else p, dim=dim, keepdim=keepdim, dtype=dtype)


# ---- grid_sampler, affine_grid_generator --------------------------------------------------------

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")


def _code(names, code, what, where):
    if isinstance(code, bool) or not isinstance(code, numbers.Integral) or \
            not 0 <= code < len(names):
        raise ValueError(f"{where}: {what} must be an int in 0..{len(names) - 1} "
                         f"({', '.join(f'{i} {n}' for i, n in enumerate(names))}), got {code!r}")
    return names[code]


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners,  # noqa: A002
                 _name="grid_sampler"):
    """F.grid_sample with ATen's integer codes: interpolation_mode 0 bilinear, 1 nearest, 2
    bicubic; padding_mode 0 zeros, 1 border, 2 reflection."""
    mode = _code(_MODES, interpolation_mode, "interpolation_mode", _name)
    padding = _code(_PADDINGS, padding_mode, "padding_mode", _name)
    return grid_sample(input, grid, mode, padding, bool(align_corners))


def _sampler(n):
    name = f"grid_sampler_{n}d"

    def sampler(input, grid, interpolation_mode, padding_mode, align_corners):  # noqa: A002
        if input.ndim != n + 2:
            raise ShapeError(f"{name}: expected a {n + 2}-D input, got {fmt_shape(input.shape)} "
                             f"(grid {fmt_shape(grid.shape)})")
        return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners,
                            _name=name)

    sampler.__name__ = sampler.__qualname__ = name
    sampler.__doc__ = f"grid_sampler on a {n + 2}-D input."
    return sampler


grid_sampler_2d, grid_sampler_3d = _sampler(2), _sampler(3)


def affine_grid_generator(theta, size, align_corners):
    """F.affine_grid(theta, size, align_corners)."""
    return affine_grid(theta, list(size), bool(align_corners))


# ---- embedding_renorm_, empty_permuted, resize_as_, logit_, is_neg, resolve_neg ---------------


def embedding_renorm_(input, indices, max_norm, norm_type):  # noqa: A002
    """The rows of input (an embedding table) that indices looks up, scaled down in place to
    norm max_norm where their norm_type-norm is above it; returns input, as ATen's."""
    F._embedding_renorm(input, indices, max_norm, norm_type)
    return input


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """A tensor of `size` whose memory is laid out in physical_layout's order of dims
    (physical_layout[0] outermost), as torch's: its strides are those of
    empty(size permuted) permuted back."""
    size, order = tuple(int(s) for s in size), tuple(int(d) for d in physical_layout)
    if sorted(order) != list(range(len(size))):
        raise ShapeError(f"empty_permuted: physical_layout {order} is not a permutation of the "
                         f"dims of size {size}")
    stride, step = [0] * len(size), 1
    for d in reversed(order):
        stride[d] = step
        step *= max(size[d], 1)
    return empty_strided(size, tuple(stride), dtype=dtype, layout=layout, device=device,
                         requires_grad=requires_grad, pin_memory=pin_memory)


def resize_as_(input, the_template, *, memory_format=None):  # noqa: A002
    return input.resize_as_(the_template, memory_format=memory_format)


def logit_(input, eps=None):  # noqa: A002
    return input.logit_(eps)


def is_neg(input):  # noqa: A002
    """False: tinyattn has no lazily negated tensors."""
    return input.is_neg()


def resolve_neg(input):  # noqa: A002
    """input itself (there is no lazy negation to resolve)."""
    return input.resolve_neg()


# ---- segment_reduce -----------------------------------------------------------------------------

_EMPTY = {"sum": 0.0, "prod": 1.0, "mean": np.nan, "amax": -np.inf, "amin": np.inf}


def _segment_lengths(data, lengths, offsets, axis, unsafe):
    """(sizes, starts): the segments' lengths (data.shape[:axis] + (segments,)) and where
    each row's first segment starts (data.shape[:axis]), from lengths or offsets, whose
    leading dims are data's before axis (torch's layout)."""
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    src = lengths if lengths is not None else offsets
    raw = np.asarray(src._data if isinstance(src, Tensor) else src)
    what = "lengths" if lengths is not None else "offsets"
    if raw.dtype.kind not in "iu" or raw.ndim != axis + 1 or \
            raw.shape[:axis] != tuple(data.shape[:axis]):
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of {what} "
                           f"(an integer tensor of shape data.shape[:axis] + (segments,)), got "
                           f"{raw.dtype} {what} of shape {fmt_shape(raw.shape)} for data of "
                           f"shape {fmt_shape(data.shape)} and axis {axis}")
    raw = raw.astype(np.int64)
    if lengths is not None:
        sizes, starts = raw, np.zeros(raw.shape[:-1], dtype=np.int64)
    else:
        sizes, starts = np.diff(raw, axis=-1), raw[..., 0]
    if (sizes < 0).any():
        raise RuntimeError("segment_reduce: lengths contains negative value!")
    if not unsafe and (sizes.sum(axis=-1) != data.shape[axis]).any():
        raise RuntimeError(f"segment_reduce(): Expected all rows of lengths along axis to sum "
                           f"to data.size({axis}) = {data.shape[axis]} when !unsafe (data "
                           f"{fmt_shape(data.shape)})")
    return sizes, starts


def _segments_of_row(row, sizes, start, reduce, initial):
    """The segments of row (reduced along its dim 0) stacked along dim 0."""
    fill = _EMPTY[reduce] if initial is None else initial
    pieces = []
    for size in (int(s) for s in sizes):
        if size == 0:
            pieces.append(full(row.shape[1:], fill, dtype=row.dtype))
        else:
            pieces.append(_reduce_piece(row.narrow(0, start, size), reduce, 0, initial))
        start += size
    return F.stack(pieces, dim=0)


def _reduce_piece(piece, reduce, axis, initial):
    if reduce == "sum":
        r = piece.sum(dim=axis)
        return r if initial is None else r + initial
    if reduce == "prod":
        r = piece.prod(dim=axis)
        return r if initial is None else r * initial
    if reduce == "mean":
        if initial is None:
            return piece.mean(dim=axis)
        return (piece.sum(dim=axis) + initial) / piece.shape[axis]
    r = piece.amax(dim=axis) if reduce == "amax" else piece.amin(dim=axis)
    if initial is None:
        return r
    keep = r >= initial if reduce == "amax" else r <= initial
    return r.where(keep, full(r.shape, initial, dtype=r.dtype))


def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """data reduced ('sum', 'prod', 'mean', 'amax'/'max', 'amin'/'min') over consecutive
    segments along axis, of the lengths (or between the offsets), whose leading dims are
    data's before axis (a row of segments for each; 1-D for axis 0): out has the number of
    segments there. An empty segment is `initial` (default 0, 1, nan, -inf, inf as torch's);
    a non-empty one counts initial in (mean: (sum + initial) / length). Composed of narrow
    and the reductions: gradients are theirs (amax/amin split among ties, as torch's).
    `indices` is taken and unused, as by torch's CPU kernel."""
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)
    if reduce not in _EMPTY:
        raise RuntimeError(f"segment_reduce: reduce argument must be either sum, prod, mean, "
                           f"amax or amin, got {reduce}")
    if not isinstance(data, Tensor) or data.dtype.kind != "f":
        raise NotImplementedError(f"segment_reduce: data must be a floating-point tensor, got "
                                  f"{getattr(data, 'dtype', type(data).__name__)}")
    axis = axis % data.ndim if -data.ndim <= axis < data.ndim else axis
    if not 0 <= axis < data.ndim:
        raise DTypeError(f"segment_reduce: axis {axis} is out of range for data of shape "
                         f"{fmt_shape(data.shape)}")
    sizes, starts = _segment_lengths(data, lengths, offsets, axis, unsafe)
    lead = tuple(data.shape[:axis])
    rows = [_segments_of_row(data[idx] if idx else data, sizes[idx], int(starts[idx]), reduce,
                             initial) for idx in np.ndindex(*lead)]
    if not lead:
        return rows[0]
    out = F.stack(rows, dim=0)
    return out.reshape(*lead, *out.shape[1:])


# ---- ta.random --------------------------------------------------------------------------------


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """torch.random.fork_rng: the default generator's state is saved on entry and restored on
    exit (draws inside do not change the draws after); enabled=False does nothing."""
    if not enabled:
        yield
        return
    state = runtime.get_rng_state()
    try:
        yield
    finally:
        runtime.set_rng_state(state)


random = types.ModuleType("tinyattn.random", "torch.random's names: manual_seed, seed, "
                          "initial_seed, get_rng_state, set_rng_state, fork_rng.")
random.manual_seed = manual_seed
random.seed, random.initial_seed = runtime.seed, runtime.initial_seed
random.get_rng_state, random.set_rng_state = runtime.get_rng_state, runtime.set_rng_state
random.fork_rng = fork_rng
random.__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
                  "fork_rng"]
