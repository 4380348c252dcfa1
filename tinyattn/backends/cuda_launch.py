"""The CUDA launch facts in one place: kernel files and entry-point names, launch choices,
tile tables, shared-memory sizes and CUDA's launch limits.

CupyBackend (cupy_backend.py) launches from these, and the NumPy replays of the kernels the
tests hold them to (tests/support/kernel_refs.py) use the same choices, so a replay and a kernel
can never disagree about which algorithm runs. Nothing here needs CuPy or a GPU.
"""

import math
from pathlib import Path

import numpy as np

from ..errors import BackendError

KERNEL_DIR = Path(__file__).with_name("kernels")
COMMON_HEADER = "tinyattn_common.cuh"
# NVRTC options for every RawModule (CuPy adds -arch for the device and -ftz=true itself);
# tests/test_kernels.py compiles the same text with nvcc -std=c++17 -ftz=true.
NVRTC_OPTIONS = ("--std=c++17",)
DTYPE_SUFFIX = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
                np.dtype(np.float64): "f64"}
SOFTMAX_DTYPES = tuple(DTYPE_SUFFIX)
FLASH_DTYPES = (np.dtype(np.float16), np.dtype(np.float32))
STATIC_SMEM_LIMIT = 48 * 1024  # dynamic shared memory allowed without a kernel attribute
# The block softmax kernels keep the row in shared memory up to this size (the forward its
# scores, the backward y and g), so a long row is read from memory once; less on a device that
# gives a block less (CupyBackend.row_cache_limit).
ROW_CACHE_LIMIT = 64 * 1024
STATIC_SMEM_RESERVE = 1024  # the block kernels' own __shared__ arrays (at most 768 bytes)
# CUDA's launch limits (every compute capability this backend targets): a launch over them
# fails with cudaErrorInvalidConfiguration, so each one is checked here first (check_launch)
GRID_LIMITS = (2**31 - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)
MAX_BLOCK_THREADS = 1024
WARP = 32
WARP_ROWS_MAX = 1024  # rows up to this long use the warp kernels (row in registers)
WARP_BLOCK_THREADS = 128  # threads per block of the warp kernels
BLOCK_UNROLL = 4  # vectors a block-kernel thread loads before using any (TINYATTN_BLOCK_UNROLL)
VECTOR_BYTES = 16  # the widest load a softmax kernel issues (TinyattnVec: 4 float, 8 half)
# the longest row the softmax kernels take: a column index of a thread's last vector,
# up to n + BLOCK_UNROLL * 1024 * 8 (float16 vectors), must stay within int
SOFTMAX_MAX_COLS = 2**31 - 1 - BLOCK_UNROLL * 1024 * 8
LOG2E = 1.4426950408889634  # log2(e): the softmax kernels' e^(s - m) is an exp2
FLASH_THREADS = 256  # a 16 x 16 thread grid per flash block
# head dim -> ((forward BQ, BK), (backward BQ, BK)); the same table as the top of flash.cu
FLASH_TILES = {16: ((64, 64), (64, 64)), 32: ((64, 64), (64, 64)), 64: ((64, 64), (32, 64)),
               128: ((64, 32), (32, 32))}


def next_pow2(n):
    return 1 << max(0, (int(n) - 1).bit_length())


def vector_width(dtype):
    """Values of `dtype` in one 16-byte vector: 4 float32, 8 float16, 2 float64."""
    return VECTOR_BYTES // np.dtype(dtype).itemsize


LANE_VECTORS = 4  # vectors a lane of a warp kernel holds at least, where the row allows


def softmax_launch(n_cols, vec=1):
    """("warp", E, width, V) for rows up to 1024 long, else ("block", threads, V).

    V: values per load, `vec` (a 16-byte vector, for rows and pointers that are multiples of
    16 bytes; the host decides) or 1. Warp: width lanes per row, E values per lane,
    E * width = next pow2 >= n. Scalar rows spread over up to 32 lanes; vector rows give each
    lane up to LANE_VECTORS vectors (64 bytes in flight a lane: a short row's warp has its
    whole row loading at once, and a few rows share a warp). Block: about 16 columns per
    thread, 128 to 1024 threads (a power of two).
    """
    if n_cols <= WARP_ROWS_MAX:
        p = next_pow2(n_cols)
        width = max(1, min(WARP, p // (vec * LANE_VECTORS if vec > 1 else 1)))
        return ("warp", p // width, width, vec)
    return ("block", min(1024, max(128, next_pow2(math.ceil(n_cols / 16)))), vec)


def softmax_kernel_name(direction, launch, dtype):
    """The softmax.cu entry point for a softmax_launch() choice: warp8_f32, warp8x4_f32,
    block_f32, blockx4_f32."""
    vec = f"x{launch[-1]}" if launch[-1] > 1 else ""
    shape = f"warp{launch[1]}" if launch[0] == "warp" else "block"
    return f"tinyattn_softmax_{direction}_{shape}{vec}_{DTYPE_SUFFIX[np.dtype(dtype)]}"


def acc_dtype(dtype):
    """The kernels' compute dtype: float64 for float64 data, float32 otherwise."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def kernel_source(filename):
    """The text handed to NVRTC for kernels/<filename>: the shared header pasted in place of
    its #include line, so no include path is needed and CuPy's compile cache (keyed by the
    source text) sees header changes."""
    text = (KERNEL_DIR / filename).read_text()
    include = f'#include "{COMMON_HEADER}"'
    if include in text:
        header = (KERNEL_DIR / COMMON_HEADER).read_text().replace("#pragma once\n", "")
        text = text.replace(include, header)
    return text


def softmax_kernel_names():
    """Every entry point of softmax.cu, as CupyBackend asks for them: warp kernels of E = 1 to
    32 values per lane (and their vector versions where E holds a vector), the block kernels."""
    names = []
    for dtype in DTYPE_SUFFIX:
        vec = vector_width(dtype)
        for direction in ("forward", "backward"):
            for e in (1, 2, 4, 8, 16, 32):
                names.append(softmax_kernel_name(direction, ("warp", e, 0, 1), dtype))
                if e >= vec:
                    names.append(softmax_kernel_name(direction, ("warp", e, 0, vec), dtype))
            names += [softmax_kernel_name(direction, ("block", 0, v), dtype) for v in (1, vec)]
    return names


def flash_kernel_names():
    """Every entry point of flash.cu, as CupyBackend asks for them."""
    return [f"tinyattn_flash_{direction}_d{d}_{DTYPE_SUFFIX[dt]}"
            for direction in ("forward", "backward") for d in FLASH_TILES
            for dt in FLASH_DTYPES]


def flash_smem_bytes(d, direction):
    """Dynamic shared memory of a flash block (floats, rows padded to d + 4 and BK + 4)."""
    fwd, bwd = FLASH_TILES[d]
    if direction == "forward":
        bq, bk = fwd
        return 4 * (bq * (d + 4) + 2 * bk * (d + 4) + bq * (bk + 4))
    bq, bk = bwd
    return 4 * (2 * bk * (d + 4) + 2 * bq * (d + 4) + 2 * bq * (bk + 4) + 2 * bq)


def check_launch(name, grid, block):
    """Raise BackendError naming the kernel if (grid, block) is over CUDA's launch limits
    (grid x < 2^31, y and z <= 65535, block x and y <= 1024, z <= 64, threads <= 1024) or
    has an empty dimension (CUDA rejects a (0, ...) grid)."""
    for label, dims, limits in (("grid", grid, GRID_LIMITS), ("block", block, BLOCK_LIMITS)):
        if not 1 <= len(dims) <= 3 or any(not 1 <= d <= lim
                                           for d, lim in zip(dims, limits, strict=False)):
            raise BackendError(f"{name}: cannot launch a {label} of {tuple(dims)}; CUDA allows "
                               f"1 to {limits} per dimension")
    if math.prod(block) > MAX_BLOCK_THREADS:
        raise BackendError(f"{name}: a block of {tuple(block)} has {math.prod(block)} threads; "
                           f"CUDA allows at most {MAX_BLOCK_THREADS}")
