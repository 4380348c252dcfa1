"""The CuPy backend: the same ops on an NVIDIA GPU, imported lazily, with fused CUDA kernels.

`make_cupy_backend()` is called the first time the "cupy" (or "cuda") backend is asked for. It
says plainly whether CuPy is missing or the GPU is unusable. Ordinary array work goes through
`xp = cupy`; the fused primitives run hand-written kernels from backends/kernels/:

    softmax, softmax_backward                  softmax.cu (warp per row <= 1024, else block
    scaled_masked_softmax(+_backward)          per row with the online (m, l) reduction)
    attention_forward, attention_backward      flash.cu (FlashAttention-2 layout, float32 math)
    gelu_forward, gelu_backward, adam_update   elementwise.cu (cupy.ElementwiseKernel bodies)

Each kernel is compiled once per process with NVRTC (cupy.RawModule, memoized by file) and
looked up by its extern "C" name; backends/cuda_launch.py replays each one in NumPy. Inputs a
kernel does not cover (other dtypes, head dims other than 16/32/64/128, additive masks, ...) take
the readable reference of `Backend` instead, on the GPU through `xp`. TINYATTN_CUPY_KERNELS=0
turns every kernel off (useful to tell a kernel bug from an op bug); TINYATTN_CUPY_VECTORS=0
keeps the softmax kernels to scalar loads (`vector_loads`, which the GPU benchmark compares
with the 16-byte vector loads they use by default). Nothing in this module
imports CuPy at import time, so the kernel sources and their names can be checked without it.
"""

import collections
import copy
import math
import os
import threading
import warnings

import numpy as np

from ..errors import BackendError, DTypeError
from . import cuda_launch
from .base import Backend
from .cuda_launch import (
    DTYPE_SUFFIX,
    FLASH_DTYPES,
    NVRTC_OPTIONS,
    ROW_CACHE_LIMIT,
    SOFTMAX_DTYPES,
    STATIC_SMEM_LIMIT,
    STATIC_SMEM_RESERVE,
    check_launch,
    flash_smem_bytes,
    kernel_source,
)

INSTALL_HINT = ("install CuPy for your CUDA version: pip install 'tinyattn[cuda12]' "
                "(CUDA 12.x) or 'tinyattn[cuda13]' (CUDA 13.x)")



def make_cupy_backend(seed=None):
    try:
        import cupy
    except ImportError as e:
        raise BackendError(f"the cupy backend needs CuPy, which is not installed ({e}); "
                           f"{INSTALL_HINT}; or stay on the numpy backend") from None
    try:
        ok = cupy.is_available()
    except Exception as e:  # CuPy raises CUDA driver errors of its own kinds here
        ok, why = False, f"{type(e).__name__}: {e}"
    else:
        why = "cupy.is_available() is False"
    if not ok:
        raise BackendError(f"CuPy is installed but cannot use a GPU here ({why}): check "
                           "`nvidia-smi` and that the CuPy wheel matches your CUDA driver; "
                           "or stay on the numpy backend")
    return CupyBackend(seed)


def collapse_batch_stride(shape, strides):
    """One stride that walks the flattened leading dims of a (..., T, S) view, or None if the
    view's leading dims cannot be walked with a single stride (then it must be copied)."""
    dims = [(n, s) for n, s in zip(shape, strides, strict=True) if n != 1]
    if not dims:
        return 0
    for (_, s_outer), (n_inner, s_inner) in zip(dims, dims[1:], strict=False):
        if s_outer != s_inner * n_inner:
            return None
    return dims[-1][1]


def _gelu_ops():
    """The ElementwiseKernel definitions: (in_params, out_params, operation) by name."""
    acc = "typedef tinyattn_acc<T>::type A;"
    return {
        "tinyattn_gelu_erf_forward": (
            "T x", "T out, T cdf",
            f"{acc} A o, c; tinyattn_gelu_erf_forward<A>((A)x, o, c); out = (T)o; cdf = (T)c;"),
        "tinyattn_gelu_erf_backward": (
            "T g, T x, T cdf", "T gx",
            f"{acc} gx = (T)tinyattn_gelu_erf_backward<A>((A)g, (A)x, (A)cdf);"),
        "tinyattn_gelu_tanh_forward": (
            "T x", "T out, T s",
            f"{acc} A o, sa; tinyattn_gelu_tanh_forward<A>((A)x, o, sa); out = (T)o; s = (T)sa;"),
        "tinyattn_gelu_tanh_backward": (
            "T g, T x, T s", "T gx",
            f"{acc} gx = (T)tinyattn_gelu_tanh_backward<A>((A)g, (A)x, (A)s);"),
        "tinyattn_adam_update": (
            "T g, float64 lr, float64 beta1, float64 beta2, float64 eps, float64 wd, "
            "int32 mode, float64 bc1, float64 sqrt_bc2",
            "T p, T m, T v",
            f"{acc} A pa = (A)p, ma = (A)m, va = (A)v; "
            "tinyattn_adam_step<A>((A)g, pa, ma, va, (A)lr, (A)beta1, (A)beta2, (A)eps, (A)wd, "
            "mode, (A)bc1, (A)sqrt_bc2); p = (T)pa; m = (T)ma; v = (T)va;"),
    }


def _scatter(ufunc, legacy, out, index, values):
    """ufunc.at(out, index, values): repeated indices all count. CuPy 14 deprecates cupyx's
    scatter_add/max/min for ufunc.at; a CuPy without ufunc.at for this ufunc takes cupyx's."""
    try:
        ufunc.at(out, index, values)
    except (AttributeError, NotImplementedError):
        legacy(out, index, values)


class StreamState(collections.namedtuple("StreamState", "bits states")):
    """A CuPy random stream's saved state: the bit generator it came from (a template for its
    kind and device) and a copy of its cuRAND states (a device array)."""

    __slots__ = ()


class CupyBackend(Backend):
    name = "cupy"
    flash_block = 64  # the tile size the fallback reference uses; the kernels use FLASH_TILES
    flash_from = 1  # impl="auto" takes the fused flash op on the GPU at every length

    def __init__(self, seed=None):
        import cupy
        import cupyx
        import cupyx.scipy.special

        self.xp = cupy
        self._cupyx = cupyx
        self._modules = {}  # .cu file name -> cupy.RawModule
        self._functions = {}  # (device id, kernel name) -> compiled kernel, attributes set
        self._smem_optin = {}  # device id -> the shared memory a block may opt in to
        self._elementwise = {}
        self.use_kernels = os.environ.get("TINYATTN_CUPY_KERNELS", "1") != "0"
        self.vector_loads = os.environ.get("TINYATTN_CUPY_VECTORS", "1") != "0"
        super().__init__(seed)

    def to_numpy(self, array):
        return self.xp.asnumpy(array)

    # ---- randomness: CuPy keeps a stream's state in device memory ---------------------------

    def rng_state(self, rng):
        """A copy of the stream's cuRAND states. CuPy's bit generator has no state dict and
        cannot be deep-copied or pickled (it holds a lock), but what it draws from is one device
        array, `_state` (CuPy's own attribute), and that is copied here."""
        bits = rng.bit_generator
        return StreamState(bits, bits._state.copy())

    def rng_at(self, state):
        """A new stream at `state`: a shallow copy of the bit generator (its kind, seed and
        device) with a lock of its own and a copy of the saved cuRAND states."""
        if not isinstance(state, StreamState):
            raise TypeError(f"the state of a cupy random stream is what rng_state gave, got "
                            f"{type(state).__name__}")
        bits = copy.copy(state.bits)
        bits.lock = threading.Lock()
        bits._state = state.states.copy()
        return self.xp.random.Generator(bits)

    def scatter_add(self, out, index, values):
        _scatter(self.xp.add, self._cupyx.scatter_add, out, index, values)

    def scatter_max(self, out, index, values):
        self._scatter_extreme(self.xp.maximum, self._cupyx.scatter_max, out, index, values)

    def scatter_min(self, out, index, values):
        self._scatter_extreme(self.xp.minimum, self._cupyx.scatter_min, out, index, values)

    def _scatter_extreme(self, ufunc, legacy, out, index, values):
        """out[index] = max (min) of out[index] and every value sent there, exact in every dtype.
        CuPy's maximum.at/minimum.at take only 32- and 64-bit numbers, and on an H200 (CuPy
        14.2) gave float64 maxima rounded to float32 (0.7 came back 0.699999988). So floats go
        through integer keys that order as the floats do (their bits, the lower bits flipped for
        negative numbers) and small integers through int64: integer atomics are exact, and a
        maximum does not depend on the order they land in. A NaN, in out or sent, wins (NumPy)."""
        xp = self.xp
        if out.dtype.kind in "iu":
            if out.dtype.itemsize >= 4:
                return _scatter(ufunc, legacy, out, index, values)
            wide = out.astype(xp.int64)
            _scatter(ufunc, legacy, wide, index, values.astype(xp.int64))
            out[...] = wide
            return None
        real = xp.float32 if out.dtype.itemsize <= 4 else xp.float64
        bits = xp.int32 if real == xp.float32 else xp.int64
        flip = int(np.iinfo(bits).max)

        def key(a):
            k = a.astype(real).view(bits)
            return k ^ xp.where(k < 0, flip, 0).astype(bits)

        keys = key(out)
        _scatter(ufunc, legacy, keys, index, key(values))
        keys ^= xp.where(keys < 0, flip, 0).astype(bits)  # back to the floats' bits
        result = keys.view(real)
        result[xp.isnan(out)] = xp.nan
        sent_nan = xp.isnan(values)
        result[tuple(xp.broadcast_to(i, values.shape)[sent_nan] for i in index)] = xp.nan
        out[...] = result.astype(out.dtype)
        return None

    def erf(self, x):
        # cupyx's erf has loops e->d, f->f, d->d: float16 in would give float64 out
        out = self._cupyx.scipy.special.erf(x)
        return out.astype(x.dtype, copy=False) if x.dtype.kind == "f" else out

    # ---- compiling and finding kernels ---------------------------------------------------------

    def _device_id(self):
        return self.xp.cuda.Device().id

    @property
    def smem_per_block(self):
        """The most shared memory one block may use on the current device, opted in (sm_75:
        64 KB, sm_86/89: 99 KB, sm_80: 163 KB, sm_90: 227 KB), asked once per device."""
        device = self._device_id()
        if device not in self._smem_optin:
            props = self.xp.cuda.runtime.getDeviceProperties(device)
            self._smem_optin[device] = int(props["sharedMemPerBlockOptin"])
        return self._smem_optin[device]

    @property
    def row_cache_limit(self):
        """Shared memory the block softmax kernels may use for the cached row."""
        return min(ROW_CACHE_LIMIT, self.smem_per_block - STATIC_SMEM_RESERVE)

    def kernel(self, filename, name, smem_bytes=0):
        """The compiled kernel `name` from kernels/<filename> (compiled on first use). The
        opt-in to more than 48 KB of shared memory is an attribute CUDA keeps per device, so
        it is set, and remembered, once per (device, kernel)."""
        key = (self._device_id(), name)
        fn = self._functions.get(key)
        if fn is None:
            module = self._modules.get(filename)
            if module is None:
                try:
                    module = self.xp.RawModule(code=kernel_source(filename),
                                               options=NVRTC_OPTIONS)
                    module.compile()
                except Exception as e:
                    raise BackendError(f"compiling tinyattn/backends/kernels/{filename} with "
                                       f"NVRTC failed: {type(e).__name__}: {e}; set "
                                       "TINYATTN_CUPY_KERNELS=0 to run the reference "
                                       "primitives instead") from e
                self._modules[filename] = module
            fn = module.get_function(name)
            if smem_bytes > STATIC_SMEM_LIMIT:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    fn.max_dynamic_shared_size_bytes = smem_bytes
            self._functions[key] = fn
        return fn

    @staticmethod
    def _launch(fn, grid, block, args, shared_mem=0):
        """fn(grid, block, args) after check_launch: a launch over CUDA's limits is an error
        naming the kernel, not a CUDA error from deep inside CuPy."""
        check_launch(getattr(fn, "name", "kernel"), grid, block)
        fn(grid, block, args, shared_mem=shared_mem)

    def elementwise(self, name):
        """The cupy.ElementwiseKernel `name` (bodies in kernels/elementwise.cu)."""
        kern = self._elementwise.get(name)
        if kern is None:
            in_params, out_params, operation = _gelu_ops()[name]
            kern = self.xp.ElementwiseKernel(in_params, out_params, operation, name,
                                             preamble=kernel_source("elementwise.cu"))
            self._elementwise[name] = kern
        return kern

    def _mask_args(self, keep, shape):
        """(pointer array, batch stride, row stride, col stride) for the kernels' uint8 mask.

        keep broadcasts to `shape` (..., T, S); broadcast dims get stride 0, so a (T, S) or
        (B, 1, S) mask is read in place. Leading dims that one stride cannot walk are copied.
        """
        cp = self.xp
        if keep is None:
            return (None, 0, 0, 0)
        view = cp.broadcast_to(keep, shape)
        if len(shape) < 2:
            view = view.reshape((1,) + tuple(shape))
        lead_stride = collapse_batch_stride(view.shape[:-2], view.strides[:-2])
        if lead_stride is None:
            view = cp.ascontiguousarray(view)
            lead_stride = collapse_batch_stride(view.shape[:-2], view.strides[:-2])
        item = view.itemsize
        return (view.view(cp.uint8), lead_stride // item, view.strides[-2] // item,
                view.strides[-1] // item)

    def _mask_params(self, keep, shape):
        """The kernel's trailing mask arguments: keep pointer (null if none) and 3 strides."""
        arr, sb, si, sj = self._mask_args(keep, shape)
        ptr = np.uint64(0) if arr is None else arr
        return (ptr, np.int64(sb), np.int64(si), np.int64(sj)), arr

    # ---- softmax ------------------------------------------------------------------------------

    def _softmax_ok(self, x):
        """Whether the softmax kernels take x: their dtypes, rows of 1 to SOFTMAX_MAX_COLS
        (the kernels index a row with int) and fewer than 2^31 rows (the grid's x limit)."""
        return (self.use_kernels and x.dtype in SOFTMAX_DTYPES and x.ndim >= 1
                and 0 < x.shape[-1] <= cuda_launch.SOFTMAX_MAX_COLS
                and x.size // x.shape[-1] < 2**31)

    def softmax(self, x, axis=-1):
        if not self._softmax_ok(x):
            return super().softmax(x, axis=axis)
        y = self._softmax_rows(self.xp.moveaxis(x, axis, -1), 1.0, False, None)
        return self.xp.moveaxis(y, -1, axis)

    def softmax_backward(self, y, g, axis=-1):
        if not self._softmax_ok(y):
            return super().softmax_backward(y, g, axis=axis)
        cp = self.xp
        gx = self._softmax_backward_rows(cp.moveaxis(y, axis, -1), cp.moveaxis(g, axis, -1),
                                         1.0, False)
        return cp.moveaxis(gx, -1, axis)

    def scaled_masked_softmax(self, x, keep=None, scale=1.0, causal=False):
        if keep is not None and keep.dtype != bool:  # the kernels read it as bytes
            raise DTypeError(f"scaled_masked_softmax: the mask must be bool (True = attend), "
                             f"got {keep.dtype}")
        if not self._softmax_ok(x) or (causal and x.ndim < 2):
            return super().scaled_masked_softmax(x, keep, scale=scale, causal=causal)
        return self._softmax_rows(x, scale, causal, keep)

    def scaled_masked_softmax_backward(self, y, g, scale=1.0, causal=False):
        """causal (optional): y is known to be zero above the diagonal, so those entries are
        not read; without it the whole row is read (still correct, y is zero there)."""
        if not self._softmax_ok(y) or (causal and y.ndim < 2):
            return super().scaled_masked_softmax_backward(y, g, scale=scale)
        return self._softmax_backward_rows(y, g, scale, causal)

    def _softmax_launch(self, direction, a, *others):
        """(kernel, grid, block, launch, n, n_rows, n_q) of softmax.cu for the last-axis rows
        of the contiguous `a`: warp kernels for rows <= 1024, else one block per row; 16-byte
        vector loads when the rows and the pointers of `a` and `others` allow them."""
        n = a.shape[-1]
        n_rows = a.size // n
        n_q = a.shape[-2] if a.ndim >= 2 else 1
        vec = cuda_launch.vector_width(a.dtype)
        if not self.vector_loads or n % vec or not self._vector_aligned(a, *others):
            vec = 1
        launch = cuda_launch.softmax_launch(n, vec)
        name = cuda_launch.softmax_kernel_name(direction, launch, a.dtype)
        if launch[0] == "warp":
            rows_per_block = cuda_launch.WARP_BLOCK_THREADS // launch[2]
            fn = self.kernel("softmax.cu", name)
            grid, block = (math.ceil(n_rows / rows_per_block),), (cuda_launch.WARP_BLOCK_THREADS,)
        else:
            fn = self.kernel("softmax.cu", name, self.row_cache_limit)
            grid, block = (n_rows,), (launch[1],)
        return fn, grid, block, launch, n, n_rows, n_q

    @staticmethod
    def _vector_aligned(*arrays):
        """Whether every array starts at a multiple of 16 bytes: a fresh allocation does, a
        view into one may not (x[..., 1:] made contiguous by reshaping, say)."""
        return all(a.data.ptr % cuda_launch.VECTOR_BYTES == 0 for a in arrays)

    def _softmax_rows(self, x, scale, causal, keep):
        """softmax(scale x) over the last axis, masked, with one launch of softmax.cu."""
        cp = self.xp
        x = cp.ascontiguousarray(x)
        y = cp.empty_like(x)
        if x.size == 0:
            return y
        fn, grid, block, launch, n, n_rows, n_q = self._softmax_launch("forward", x, y)
        mask, _alive = self._mask_params(keep, x.shape)
        if launch[0] == "warp":
            self._launch(fn, grid, block, (x, y, np.int64(n_rows), np.int32(n),
                                           np.int32(launch[2]), np.int32(n_q),
                                           np.float64(scale), np.int32(causal)) + mask)
        else:
            smem = self._row_cache_bytes(n, x.dtype, arrays=1)
            self._launch(fn, grid, block,
                         (x, y, np.int32(n), np.int32(n_q), np.float64(scale), np.int32(causal))
                         + mask + (np.int32(smem > 0),), shared_mem=smem)
        return y

    def _softmax_backward_rows(self, y, g, scale, causal):
        """scale * y * (g - sum(g * y)) over the last axis, with one launch of softmax.cu."""
        cp = self.xp
        y = cp.ascontiguousarray(y)
        g = cp.ascontiguousarray(g, dtype=y.dtype)
        gx = cp.empty_like(y)
        if y.size == 0:
            return gx
        fn, grid, block, launch, n, n_rows, n_q = self._softmax_launch("backward", y, g, gx)
        if launch[0] == "warp":
            self._launch(fn, grid, block, (y, g, gx, np.int64(n_rows), np.int32(n),
                                           np.int32(launch[2]), np.int32(n_q), np.int32(causal),
                                           np.float64(scale)))
        else:
            smem = self._row_cache_bytes(n, y.dtype, arrays=2)
            self._launch(fn, grid, block, (y, g, gx, np.int32(n), np.int32(n_q),
                                           np.int32(causal), np.float64(scale),
                                           np.int32(smem > 0)), shared_mem=smem)
        return gx

    def _row_cache_bytes(self, n, dtype, arrays):
        """Shared memory for `arrays` rows of n compute-type values, or 0 if over the limit."""
        nbytes = arrays * n * cuda_launch.acc_dtype(dtype).itemsize
        return nbytes if nbytes <= self.row_cache_limit else 0

    # ---- flash attention ----------------------------------------------------------------------

    def _flash_ok(self, q, k, v, keep):
        """Whether the flash kernels take these inputs (else the tiled reference runs): float16
        or float32, a head dim with kernels, bool masks, and tiles whose shared memory this
        device gives a block (d = 64 needs 68 KB: not on sm_75's 64 KB)."""
        d = q.shape[-1]
        return (self.use_kernels and q.dtype in FLASH_DTYPES and k.dtype == q.dtype
                and v.dtype == q.dtype and d in cuda_launch.FLASH_TILES and k.shape[-1] == d
                and v.shape[-1] == d and q.shape[-2] > 0 and k.shape[-2] > 0
                and (keep is None or keep.dtype == bool)
                and max(flash_smem_bytes(d, "forward"),
                        flash_smem_bytes(d, "backward")) <= self.smem_per_block)

    def _flash_inputs(self, *arrays):
        """Broadcast q, k, v (and friends) to one batch shape, as contiguous (N, rows, d)."""
        cp = self.xp
        lead = np.broadcast_shapes(*(a.shape[:-2] for a in arrays))
        n = math.prod(lead)
        return lead, n, [cp.ascontiguousarray(cp.broadcast_to(a, lead + a.shape[-2:]))
                         .reshape(n, a.shape[-2], a.shape[-1]) for a in arrays]

    def attention_forward(self, q, k, v, keep=None, scale=1.0, causal=False, block_q=64,
                          block_k=64):
        if not self._flash_ok(q, k, v, keep):
            return super().attention_forward(q, k, v, keep, scale, causal, block_q, block_k)
        cp = self.xp
        lead, n, (q3, k3, v3) = self._flash_inputs(q, k, v)
        n_q, n_k, d = q3.shape[1], k3.shape[1], q3.shape[2]
        out = cp.empty_like(q3)
        lse = cp.empty((n, n_q), dtype=cp.float32)
        if n == 0:  # an empty batch: nothing to launch (CUDA rejects a grid of 0 blocks)
            return out.reshape(lead + (n_q, d)), lse.reshape(lead + (n_q,))
        mask, _alive = self._mask_params(keep, lead + (n_q, n_k))
        (bq, _), _ = cuda_launch.FLASH_TILES[d]
        smem = flash_smem_bytes(d, "forward")
        fn = self.kernel("flash.cu", f"tinyattn_flash_forward_d{d}_{DTYPE_SUFFIX[q.dtype]}",
                         smem)
        # one grid dimension: batch fastest, query tiles on top (x may reach 2^31 - 1; y
        # would stop at 65535 tiles)
        self._launch(fn, (n * math.ceil(n_q / bq),), (cuda_launch.FLASH_THREADS,),
                     (q3, k3, v3, out, lse, np.int32(n_q), np.int32(n_k), np.float32(scale),
                      np.int32(causal)) + mask, shared_mem=smem)
        return out.reshape(lead + (n_q, d)), lse.reshape(lead + (n_q,))

    def attention_backward(self, q, k, v, out, lse, g, keep=None, scale=1.0, causal=False,
                           block_q=64, block_k=64):
        if not self._flash_ok(q, k, v, keep) or lse.dtype != np.float32:
            return super().attention_backward(q, k, v, out, lse, g, keep, scale, causal,
                                              block_q, block_k)
        cp = self.xp
        lead, n, (q3, k3, v3, o3, g3) = self._flash_inputs(q, k, v, out,
                                                           cp.asarray(g, dtype=q.dtype))
        n_q, n_k, d = q3.shape[1], k3.shape[1], q3.shape[2]
        lse2 = cp.ascontiguousarray(cp.broadcast_to(lse, lead + (n_q,))).reshape(n, n_q)
        drow = (g3.astype(cp.float32) * o3.astype(cp.float32)).sum(axis=-1)  # D = rowsum(dO O)
        gq = cp.zeros((n, n_q, d), dtype=cp.float32)  # atomics add every key tile's part
        gk, gv = cp.empty_like(k3), cp.empty_like(v3)
        if n == 0:  # an empty batch: nothing to launch
            return (gq.astype(q.dtype, copy=False).reshape(lead + (n_q, d)),
                    gk.reshape(lead + (n_k, d)), gv.reshape(lead + (n_k, d)))
        mask, _alive = self._mask_params(keep, lead + (n_q, n_k))
        _, (_, bk) = cuda_launch.FLASH_TILES[d]
        smem = flash_smem_bytes(d, "backward")
        fn = self.kernel("flash.cu", f"tinyattn_flash_backward_d{d}_{DTYPE_SUFFIX[q.dtype]}",
                         smem)
        self._launch(fn, (n * math.ceil(n_k / bk),), (cuda_launch.FLASH_THREADS,),
                     (q3, k3, v3, g3, lse2, drow, gq, gk, gv, np.int32(n_q), np.int32(n_k),
                      np.float32(scale), np.int32(causal)) + mask, shared_mem=smem)
        return (gq.astype(q.dtype, copy=False).reshape(lead + (n_q, d)),
                gk.reshape(lead + (n_k, d)), gv.reshape(lead + (n_k, d)))

    # ---- elementwise: GELU and the Adam update ----------------------------------------------

    def gelu_forward(self, x, approximate="none"):
        """(out, saved) of GELU in one pass, as ops/nn.py's gelu computes them: saved is
        Φ(x) (approximate="none") or σ(2u) (approximate="tanh", see Backend.gelu_forward)."""
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        if self.use_kernels and x.dtype in SOFTMAX_DTYPES:
            kind = "tanh" if approximate == "tanh" else "erf"
            return self.elementwise(f"tinyattn_gelu_{kind}_forward")(x)
        return super().gelu_forward(x, approximate)

    def gelu_backward(self, g, x, saved, approximate="none"):
        """gx of GELU from x and the saved Φ(x) or σ(2u), in one pass."""
        if self.use_kernels and x.dtype in SOFTMAX_DTYPES:
            kind = "tanh" if approximate == "tanh" else "erf"
            return self.elementwise(f"tinyattn_gelu_{kind}_backward")(
                g.astype(x.dtype, copy=False), x, saved)
        return super().gelu_backward(g, x, saved, approximate)

    def adam_update(self, p, g, m, v, lr, beta1, beta2, eps, weight_decay, step, decoupled,
                    v_max=None):
        if (not self.use_kernels or p.dtype not in SOFTMAX_DTYPES or m.dtype != p.dtype
                or v_max is not None):  # (amsgrad: the base formula, in CuPy array ops)
            return super().adam_update(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step,
                                       decoupled, v_max)
        mode = (2 if decoupled else 1) if weight_decay else 0  # AdamW, Adam + L2, neither
        self.elementwise("tinyattn_adam_update")(
            g.astype(p.dtype, copy=False), float(lr), float(beta1), float(beta2), float(eps),
            float(weight_decay or 0.0), np.int32(mode), 1 - beta1**step,
            math.sqrt(1 - beta2**step), p, m, v)
