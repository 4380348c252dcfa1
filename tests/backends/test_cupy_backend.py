"""The CuPy backend: clear errors without a GPU, the host side of every kernel launch checked
against the compiled PTX (CPU), and, on a GPU (`pytest -m gpu`), every fused kernel against the
NumPy backend plus one training step that must match NumPy.

The GPU tests skip unless CuPy imports and sees a device. They cover float32/float64/float16,
odd sizes, rows longer than one block, -inf entries and fully masked rows, for each kernel's
forward and VJP, and every op that reaches a kernel through autograd in float32 and float16.
Each also runs `[emulated]`: the kernels' CUDA source on the CPU (tests/support/cuda_emu.py).
Every one of them asserts which kernels it launched (assert_launched), so a case the backend
quietly hands to its reference fails instead of passing on the reference's numbers.
"""

import fnmatch
import math
import re
import sys
import types

import cuda_emu  # tests/support is on sys.path (tests/conftest.py)
import fake_cupy
import gpu  # tests/support: is a real GPU here
import kernel_refs as kr  # tests/support (tests/conftest.py)
import numpy as np
import nvcc_build
import pytest

import tinyattn
import tinyattn.functional as F
from tinyattn.backends import backend as get_backend_by_name
from tinyattn.backends import cuda_launch as cl
from tinyattn.backends import cupy_backend as cb
from tinyattn.backends.numpy_backend import NumpyBackend
from tinyattn.errors import BackendError
from tinyattn.ops import REGISTRY
from tinyattn.ops import samples as S

NEG_INF = float("-inf")
NP = NumpyBackend()

# ---- without a GPU: errors -----------------------------------------------------------------------


def test_missing_cupy_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` now raises ImportError
    with pytest.raises(BackendError, match=r"not installed.*tinyattn\[cuda12\].*numpy backend"):
        cb.make_cupy_backend()


def test_cupy_without_a_gpu_says_so(monkeypatch):
    fake = types.ModuleType("cupy")
    fake.is_available = lambda: False
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(BackendError, match="cannot use a GPU.*nvidia-smi"):
        cb.make_cupy_backend()


def test_driver_error_is_reported(monkeypatch):
    def broken():
        raise RuntimeError("cudaErrorInsufficientDriver")

    fake = types.ModuleType("cupy")
    fake.is_available = broken
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(BackendError, match="cudaErrorInsufficientDriver"):
        cb.make_cupy_backend()


# ---- without a GPU: the host side of the launches ----------------------------------------------

def test_collapse_batch_stride():
    assert cb.collapse_batch_stride((), ()) == 0
    assert cb.collapse_batch_stride((2, 3), (0, 0)) == 0  # a (T, S) mask under (B, H)
    assert cb.collapse_batch_stride((2, 3), (3 * 40, 40)) == 40  # contiguous (B, H)
    assert cb.collapse_batch_stride((2, 1), (40, 40)) == 40  # size-1 dims do not count
    assert cb.collapse_batch_stride((2, 3), (40, 0)) is None  # (B, 1, T, S) under H: copy


def host_side_backend():
    """A CupyBackend whose `xp` is NumPy and whose kernels only record their launches."""
    be = object.__new__(cb.CupyBackend)
    be.xp = np
    be.use_kernels = True
    be.vector_loads = True
    be._smem_optin = {0: 227 * 1024}  # an H100's, on device 0
    be._device_id = lambda: 0
    be._vector_aligned = lambda *arrays: all(a.__array_interface__["data"][0] % 16 == 0
                                             for a in arrays)
    be.launches = []

    def kernel(filename, name, smem_bytes=0):
        def launch(grid, block, args, shared_mem=0):
            be.launches.append((filename, name, grid, block, args, shared_mem))
            for a in args:  # outputs come back as zeros instead of uninitialised memory
                if isinstance(a, np.ndarray) and a.flags.writeable:
                    a[...] = 0
        return launch

    be.kernel = kernel
    return be


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 2, 8)])
def test_mask_strides_address_the_broadcast_mask(shape):
    """keep[b * sb + i * si + j * sj], as the kernels read it, is the broadcast mask."""
    rng = np.random.default_rng(0)
    be = host_side_backend()
    lead = shape[:-2]
    for mask_shape in (shape[-2:], lead[:1] + (1,) * (len(shape) - 2) + shape[-1:], shape,
                       (1,) * (len(shape) - 2) + (shape[-2], 1)):
        keep = rng.random(mask_shape) < 0.5
        arr, sb, si, sj = be._mask_args(keep, shape)
        assert arr.dtype == np.uint8
        as_read = np.lib.stride_tricks.as_strided(arr, shape=(math.prod(lead),) + shape[-2:],
                                                  strides=(sb, si, sj))
        want = np.broadcast_to(keep, shape).reshape(as_read.shape)
        np.testing.assert_array_equal(as_read.astype(bool), want, err_msg=str(mask_shape))


PTX_TYPE = {(8, "f"): "f64", (4, "f"): "f32", (8, "i"): "u64", (4, "i"): "u32"}


def arg_type(a):
    if isinstance(a, np.ndarray):
        return "u64"  # a device pointer
    return PTX_TYPE[(a.dtype.itemsize, "f" if a.dtype.kind == "f" else "i")]


@pytest.fixture(scope="module")
def ptx_params():
    """kernel name -> its parameter types, from nvcc's PTX of every .cu file (compiled once a
    session: tests/support/nvcc_build.py)."""
    if nvcc_build.NVCC is None:
        pytest.skip("nvcc is not on PATH (the CUDA toolkit is absent)")
    params = {}
    for name in ("softmax.cu", "flash.cu"):
        done = nvcc_build.build(name, "sm_90")
        assert done.returncode == 0, f"{done.command}\n{done.log}"
        for entry, body in re.findall(r"\.entry\s+(\w+)\(([^)]*)\)", done.ptx):
            params[entry] = re.findall(r"\.param\s+\.(\w+)", body)
    return params


def check_launches(be, ptx_params):
    assert be.launches
    for _, name, grid, block, args, shared_mem in be.launches:
        want = [t.replace("s", "u").replace("b", "u") for t in ptx_params[name]]
        assert [arg_type(a) for a in args] == want, name
        cl.check_launch(name, grid, block)  # within CUDA's limits
        assert block[0] % 32 == 0
        if "flash" in name:
            direction = "forward" if "forward" in name else "backward"
            assert shared_mem == cl.flash_smem_bytes(int(re.search(r"_d(\d+)_", name)[1]),
                                                     direction)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 300, 3000])
def test_softmax_launch_arguments_match_the_kernels(ptx_params, n, dtype):
    be = host_side_backend()
    x = np.zeros((2, 3, n), dtype=dtype)
    be.softmax(x)
    be.softmax_backward(x, x)
    be.scaled_masked_softmax(x, np.ones((3, n), bool), scale=0.5, causal=True)
    be.scaled_masked_softmax_backward(x, x, scale=0.5, causal=True)
    check_launches(be, ptx_params)


@pytest.mark.parametrize("d", [16, 32, 64, 128])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_flash_launch_arguments_match_the_kernels(ptx_params, d, dtype):
    be = host_side_backend()
    q = np.zeros((2, 3, 10, d), dtype=dtype)
    out, lse = be.attention_forward(q, q, q, np.ones((10, 10), bool), 0.1, True)
    assert out.shape == q.shape and lse.shape == q.shape[:-1] and lse.dtype == np.float32
    grads = be.attention_backward(q, q, q, out, lse, q, None, 0.1, False)
    assert [a.shape for a in grads] == [q.shape] * 3
    check_launches(be, ptx_params)


def test_unsupported_inputs_take_the_reference():
    be = host_side_backend()
    q = np.random.default_rng(0).standard_normal((1, 5, 48))  # head dim 48: no flash kernel
    out, _ = be.attention_forward(q, q, q, None, 0.2, True)
    want, _ = NP.attention_forward(q, q, q, None, 0.2, True)
    np.testing.assert_allclose(out, want)
    x = np.arange(6).reshape(2, 3)
    np.testing.assert_allclose(be.softmax(x), NP.softmax(x))  # integers: the reference
    assert not be.launches
    be.use_kernels = False  # TINYATTN_CUPY_KERNELS=0
    be.softmax(x.astype(np.float32))
    assert not be.launches
    be.use_kernels = True
    be.softmax(x.astype(np.float32))
    assert [launch[1] for launch in be.launches] == ["tinyattn_softmax_forward_warp1_f32"]


# ---- with a GPU ----------------------------------------------------------------------------------

GPU_REASON = gpu.reason()


def gpu_test(fn):
    """Mark a test as needing the GPU (skipped, with the reason, when there is none)."""
    return pytest.mark.gpu(pytest.mark.skipif(GPU_REASON is not None,
                                              reason=str(GPU_REASON))(fn))


# The kernel tests below run twice: on the GPU ("gpu", `pytest -m gpu`) and on the CPU with the
# kernels' CUDA source run by tests/support/cuda_emu.py under tests/support/fake_cupy.py
# ("emulated", needs g++).
# The emulator checks indexing, masking, barriers, shuffles and bounds, not speed.
CUPY_KINDS = [
    pytest.param("gpu", marks=[pytest.mark.gpu,
                               pytest.mark.skipif(GPU_REASON is not None, reason=str(GPU_REASON))]),
    pytest.param("emulated", marks=[pytest.mark.emulated,
                                    pytest.mark.skipif(not cuda_emu.available(),
                                                       reason="the CUDA emulator needs g++")]),
]


@pytest.fixture(params=CUPY_KINDS)
def cp_be(request, monkeypatch):
    """The "cupy" backend with its kernels: on the GPU, or emulated on the CPU. Every kernel it
    launches (raw and elementwise) is named in `be.launched`, so a test can tell a kernel's
    result from the reference the backend falls back to (assert_launched)."""
    if request.param == "emulated":
        be = fake_cupy.install(monkeypatch, kernels=True, emulate=True)
    else:
        be = get_backend_by_name("cupy")
    launched = []
    launch, elementwise = be._launch, be.elementwise

    def counted_launch(fn, grid, block, args, shared_mem=0):
        launched.append(fn.name)
        launch(fn, grid, block, args, shared_mem)

    def counted_elementwise(name):
        kernel = elementwise(name)

        def run(*args, **kwargs):
            launched.append(name)
            return kernel(*args, **kwargs)
        return run

    monkeypatch.setattr(be, "_launch", counted_launch, raising=False)
    monkeypatch.setattr(be, "elementwise", counted_elementwise, raising=False)
    monkeypatch.setattr(be, "launched", launched, raising=False)
    return be


def assert_launched(be, *patterns):
    """Each fnmatch pattern names a kernel that ran since the test began (not the reference)."""
    for pattern in patterns:
        assert fnmatch.filter(be.launched, pattern), (
            f"no launch of {pattern}: the backend took the reference (launched: "
            f"{sorted(set(be.launched))})")


def suffix(dtype):
    return cl.DTYPE_SUFFIX[np.dtype(dtype)]


def to_gpu(be, *arrays):
    return [be.xp.asarray(a) for a in arrays]


def assert_close(got_gpu, want, dtype, be, scale=1.0):
    tol = {np.float16: 3e-3, np.float32: 2e-5, np.float64: 1e-12}[np.dtype(dtype).type] * scale
    got = be.to_numpy(got_gpu)
    assert got.dtype == np.dtype(dtype)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=tol,
                               atol=tol)


def rows(n_rows, n, rng, dtype):
    x = rng.standard_normal((n_rows, n)) * 3
    if n_rows > 3:
        x[1] = rng.choice([-1e4, 1e4], n)
        x[2, rng.random(n) < 0.3] = NEG_INF
        x[2, 0] = 0.5
        x[3] = NEG_INF  # fully masked
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("n_rows,n", [(1, 1), (5, 7), (33, 32), (4, 33), (130, 1000),
                                      (7, 1024), (6, 1025), (5, 4097), (3, 8192), (4096, 64),
                                      (2, 12289)])
def test_gpu_softmax_forward_and_backward(cp_be, n_rows, n, dtype):
    rng = np.random.default_rng(n)
    x = rows(n_rows, n, rng, dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    xg, gg = to_gpu(cp_be, x, g)
    yg = cp_be.softmax(xg)
    vec = vector_of(n, dtype)  # rows that are a multiple of 16 bytes move in 16-byte vectors
    assert_close(yg, NP.softmax(x.astype(np.float64)), dtype, cp_be)
    assert_close(yg, kr.softmax_forward(x, vec=vec), dtype, cp_be)  # the same algorithm's replay
    y = cp_be.to_numpy(yg).astype(np.float64)
    gxg = cp_be.softmax_backward(yg, gg)
    assert_close(gxg, NP.softmax_backward(y, g.astype(np.float64)), dtype, cp_be, 10)
    assert_close(gxg, kr.softmax_backward(cp_be.to_numpy(yg), g, vec=vec), dtype, cp_be, 10)
    launch = cl.softmax_launch(n, vec)  # block: the online (m, l) kernel
    assert_launched(cp_be, cl.softmax_kernel_name("forward", launch, dtype),
                    cl.softmax_kernel_name("backward", launch, dtype))


def vector_of(n, dtype):
    """The values per load the host picks for rows of n (fresh, aligned arrays)."""
    v = cl.vector_width(dtype)
    return v if n % v == 0 else 1


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("n", [64, 2048])
def test_gpu_softmax_of_a_view_off_the_vector_grid(cp_be, n, dtype):
    """Rows of 64 or 2048 (a multiple of 16 bytes) read through views that start one value
    into their arrays: the host must take the scalar kernels (a vector load there would be
    misaligned: a GPU stops with "misaligned address")."""
    rng = np.random.default_rng(n)
    flat = rng.standard_normal(5 * n + 1).astype(dtype)
    flat_g = rng.standard_normal(5 * n + 1).astype(dtype)
    xg, gg = (a[1:].reshape(5, n) for a in to_gpu(cp_be, flat, flat_g))
    x, g = flat[1:].reshape(5, n).astype(np.float64), flat_g[1:].reshape(5, n).astype(np.float64)
    yg = cp_be.softmax(xg)
    assert_close(yg, NP.softmax(x), dtype, cp_be)
    y = cp_be.to_numpy(yg).astype(np.float64)
    assert_close(cp_be.softmax_backward(yg, gg), NP.softmax_backward(y, g), dtype, cp_be, 10)
    launch = cl.softmax_launch(n, 1)
    assert_launched(cp_be, cl.softmax_kernel_name("forward", launch, dtype),
                    cl.softmax_kernel_name("backward", launch, dtype))


def test_gpu_softmax_other_axis(cp_be):
    x = np.random.default_rng(1).standard_normal((4, 50, 3)).astype(np.float32)
    assert_close(cp_be.softmax(cp_be.xp.asarray(x), axis=1),
                 NP.softmax(x.astype(np.float64), axis=1), np.float32, cp_be)
    assert_launched(cp_be, "tinyattn_softmax_forward_warp*_f32")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("n_q,n_k", [(1, 1), (9, 9), (64, 200), (300, 300), (5, 2000)])
def test_gpu_scaled_masked_softmax(cp_be, n_q, n_k, dtype):
    rng = np.random.default_rng(n_q + n_k)
    x = (rng.standard_normal((2, 3, n_q, n_k)) * 5).astype(dtype)
    keep = rng.random((n_q, n_k)) < 0.6
    keep[0] = False  # a fully masked row
    pad = rng.random((2, 1, 1, n_k)) < 0.8
    g = rng.standard_normal(x.shape).astype(dtype)
    for kwargs in (dict(causal=True), dict(keep=keep), dict(keep=pad, causal=True)):
        gpu_kwargs = {k: cp_be.xp.asarray(v) if k == "keep" else v for k, v in kwargs.items()}
        want = NP.scaled_masked_softmax(x.astype(np.float64), scale=0.3, **kwargs)
        yg = cp_be.scaled_masked_softmax(cp_be.xp.asarray(x), scale=0.3, **gpu_kwargs)
        assert_close(yg, want, dtype, cp_be)
        y = cp_be.to_numpy(yg).astype(np.float64)
        gx = cp_be.scaled_masked_softmax_backward(yg, cp_be.xp.asarray(g), scale=0.3,
                                                  causal=kwargs.get("causal", False))
        assert_close(gx, NP.scaled_masked_softmax_backward(y, g.astype(np.float64), scale=0.3),
                     dtype, cp_be, 10)
    assert_launched(cp_be, f"tinyattn_softmax_forward_*_{suffix(dtype)}",
                    f"tinyattn_softmax_backward_*_{suffix(dtype)}")


# Every op that reaches a kernel (test_cupy_backend_host.py pins which), through autograd, in
# float32 and float16, against the NumPy backend in float64 on the same rounded values: the op
# code around the kernels (moving a softmax dim last, the causal flag, broadcast batches, masks
# with a fully masked row, the VJPs) on the kernels themselves. The registry samples of softmax,
# scaled_masked_softmax and gelu launch as they are; flash attention's have head dims without
# kernels (2-4), so its cases take the same shapes at head dims 16 and 32; and a row past 1024
# takes the block kernels (the online (m, l) softmax).
FLASH_CASES = [
    S.case((2, 5, 16), (2, 5, 16), (2, 5, 16), None, scale=0.5, causal=True, block=2),
    S.case((4, 16), (4, 16), (4, 16), S.const(S.CAUSAL_PAD), scale=0.7, block=3),  # masked row
    S.case((1, 2, 3, 32), (3, 1, 6, 32), (3, 1, 6, 32), None, scale=0.4, block=4),  # broadcast
    S.case((2, 7, 16), (2, 5, 16), (2, 5, 16), None, scale=1.0, causal=True, block=2),  # T > S
]
LONG_ROWS = {
    "softmax": [S.case((2, 1500))],
    "scaled_masked_softmax": [S.case((1, 2, 3, 1100), S.const(np.arange(1100) % 3 > 0),
                                     scale=0.5, causal=True)],
}
OP_KERNELS = {  # op -> the kernels its forward and its VJP must launch ({dt}: f32, f16)
    "softmax": ("tinyattn_softmax_forward_*_{dt}", "tinyattn_softmax_backward_*_{dt}"),
    "scaled_masked_softmax": ("tinyattn_softmax_forward_*_{dt}",
                              "tinyattn_softmax_backward_*_{dt}"),
    "flash_attention": ("tinyattn_flash_forward_d*_{dt}", "tinyattn_flash_backward_d*_{dt}"),
    "gelu": ("tinyattn_gelu_*_forward", "tinyattn_gelu_*_backward"),
}


def _op_cases():
    cases = {name: (FLASH_CASES if name == "flash_attention" else REGISTRY[name].samples)
             + LONG_ROWS.get(name, []) for name in OP_KERNELS}
    return [pytest.param(name, inputs, params, dtype, id=f"{name}-{i}-{np.dtype(dtype)}")
            for name, op_cases in cases.items() for i, (inputs, params) in enumerate(op_cases)
            for dtype in (np.float32, np.float16)]


@pytest.mark.parametrize("name,inputs,params,dtype", _op_cases())
def test_gpu_ops_on_their_kernels(cp_be, name, inputs, params, dtype):
    results = {}
    for backend, wide in (("cupy", dtype), ("numpy", np.float64)):
        def make(v, rg, backend=backend, wide=wide):  # values rounded to dtype on both sides
            return tinyattn.tensor(v.astype(dtype).astype(wide) if rg else v, requires_grad=rg,
                                   backend=backend)

        xs = S.materialize(inputs, np.random.default_rng(0), make)
        out = REGISTRY[name](*xs, **params)
        g = np.random.default_rng(1).standard_normal(out.shape).astype(dtype).astype(wide)
        out.backward(tinyattn.tensor(g, backend=backend))
        results[backend] = [out] + [x.grad for x in xs
                                    if isinstance(x, tinyattn.Tensor) and x.requires_grad]
    for i, (got, want) in enumerate(zip(results["cupy"], results["numpy"], strict=True)):
        assert_close(got._data, want.numpy(), dtype, cp_be, 1 if i == 0 else 10)
    assert_launched(cp_be, *(p.format(dt=suffix(dtype)) for p in OP_KERNELS[name]))


def emulated_is_slow(name, params):
    """Emulated cases that take more than a few seconds on 2 cores (tests/conftest.py marks them
    slow; .ci/run runs them): the default training run (~3 min), flash tiles beyond one query
    and key (4-55 s each) but two, and the 300 x 300 softmax but in float32. Every kernel keeps
    fast emulated cases: flash at 1 x 1 for every head dim in float16 and float32 (every kernel
    instantiation compiled and run), and in float32 70 x 70 at d = 64 (several tiles, a partial
    one) and 130 x 97 at d = 16 (queries and keys of different lengths)."""
    if name == "test_gpu_default_training_run_learns":
        return True
    if name == "test_gpu_flash_attention":
        tile = params["n_q"], params["n_k"], params["d"]
        return tile[:2] != (1, 1) and (tile not in ((70, 70, 64), (130, 97, 16))
                                       or params["dtype"] != np.float32)
    if name == "test_gpu_scaled_masked_softmax":
        return (params["n_q"], params["n_k"]) == (300, 300) and params["dtype"] != np.float32
    return False


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("d", [16, 32, 64, 128])
@pytest.mark.parametrize("n_q,n_k", [(1, 1), (70, 70), (130, 97), (257, 257)])
def test_gpu_flash_attention(cp_be, d, n_q, n_k, dtype):
    rng = np.random.default_rng(d + n_q)
    # (B, H): the kernels see B * H blocks of rows one after another; two of them at 1 x 1
    # (every instantiation runs a block past the first; emulated, each block of a 1 x 1 launch
    # costs as much as a full tile), four at the larger tiles
    lead = (1, 2) if (n_q, n_k) == (1, 1) else (2, 2)
    q, k, v = (rng.standard_normal((*lead, n, d)).astype(dtype) for n in (n_q, n_k, n_k))
    g = rng.standard_normal((*lead, n_q, d)).astype(dtype)
    keep = rng.random((n_q, n_k)) < 0.7
    keep[n_q // 2] = False  # a query with nothing to attend
    scale = 1 / math.sqrt(d)
    tol = 3 if dtype == np.float32 else 5
    for causal, mask in ((False, None), (True, None), (True, keep)):
        q64, k64, v64, g64 = (a.astype(np.float64) for a in (q, k, v, g))
        out, lse = NP.attention_forward(q64, k64, v64, mask, scale, causal)
        grads = NP.attention_backward(q64, k64, v64, out, lse, g64, mask, scale, causal)
        qg, kg, vg, gg = to_gpu(cp_be, q, k, v, g)
        maskg = None if mask is None else cp_be.xp.asarray(mask)
        out_g, lse_g = cp_be.attention_forward(qg, kg, vg, maskg, scale, causal)
        assert_close(out_g, out, dtype, cp_be, tol)
        got = cp_be.attention_backward(qg, kg, vg, out_g, lse_g, gg, maskg, scale, causal)
        for a, b in zip(got, grads, strict=True):
            assert_close(a, b, dtype, cp_be, 10 * tol)
    assert_launched(cp_be, f"tinyattn_flash_forward_d{d}_{suffix(dtype)}",
                    f"tinyattn_flash_backward_d{d}_{suffix(dtype)}")


def nan_rows(n, rng):
    """(x, keep) for NaN semantics: row 0 plain, row 1 a NaN among its scores, row 2 fully
    masked, row 3 a NaN where the mask hides it (it must not count)."""
    x = rng.standard_normal((4, n)).astype(np.float32) * 3
    keep = np.ones((4, n), bool)
    x[1, n // 3] = np.nan
    keep[2] = False
    x[3, n // 2] = np.nan
    keep[3, n // 2] = False
    return x, keep


def assert_nan_semantics(y, want, masked_row=2, nan_row=1):
    """NaN in, NaN out for the whole row; the fully masked row zeros; the rest as `want`."""
    assert np.isnan(y[nan_row]).all() and np.isnan(want[nan_row]).all()
    assert (y[masked_row] == 0).all() and (want[masked_row] == 0).all()
    rest = [r for r in range(len(y)) if r not in (masked_row, nan_row)]
    np.testing.assert_allclose(y[rest], want[rest], rtol=2e-5, atol=2e-6)


def test_numpy_backend_nan_semantics():
    """The reference the kernels are held to: softmax, masked softmax and flash attention."""
    x, keep = nan_rows(40, np.random.default_rng(0))
    assert_nan_semantics(NP.scaled_masked_softmax(x, keep, scale=0.5),
                         NP.softmax(np.where(keep, x * 0.5, NEG_INF)))
    y = NP.softmax(np.where(keep, x, NEG_INF))
    assert np.isnan(NP.softmax_backward(y, np.ones_like(y))[1]).all()
    q = np.random.default_rng(1).standard_normal((1, 4, 16)).astype(np.float32)
    q[0, 1, 5] = np.nan
    kq = np.ones((1, 4, 4), bool)
    kq[0, 2] = False
    out, lse = NP.attention_forward(q, q[:, [0, 0, 3, 3]], q[:, [0, 0, 3, 3]], kq, 0.25)
    assert np.isnan(out[0, 1]).all() and np.isnan(lse[0, 1])
    assert (out[0, 2] == 0).all() and lse[0, 2] == NEG_INF
    assert np.isfinite(out[0, [0, 3]]).all()


@pytest.mark.parametrize("n", [8, 1000, 2000, 20000], ids=["warp", "warp-1000", "block-cached",
                                                           "block-reread"])
def test_gpu_softmax_nan_semantics(cp_be, n):
    """Every softmax kernel shape (warp per row; block per row with the row in shared memory,
    and reading it twice when it does not fit 64 KB) gives what the NumPy reference gives: a
    row with a NaN score all NaN, a fully masked row zeros, a NaN under the mask ignored."""
    x, keep = nan_rows(n, np.random.default_rng(n))
    xg, keepg = to_gpu(cp_be, x, keep)
    want = NP.scaled_masked_softmax(x.astype(np.float64), keep, scale=0.5)
    y = cp_be.to_numpy(cp_be.scaled_masked_softmax(xg, keepg, scale=0.5))
    assert_nan_semantics(y, want)
    plain = np.where(keep, x, NEG_INF)  # plain softmax: -inf for masked
    pg, ones = to_gpu(cp_be, plain, np.ones_like(plain))
    assert_nan_semantics(cp_be.to_numpy(cp_be.softmax(pg)), NP.softmax(plain.astype(np.float64)))
    gx = cp_be.to_numpy(cp_be.softmax_backward(cp_be.softmax(pg), ones))
    assert np.isnan(gx[1]).all() and (gx[2] == 0).all() and not np.isnan(gx[[0, 3]]).any()
    kind = "warp*" if n <= cl.WARP_ROWS_MAX else "block*"
    assert_launched(cp_be, f"tinyattn_softmax_forward_{kind}_f32",
                    f"tinyattn_softmax_backward_{kind}_f32")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gpu_flash_nan_semantics(cp_be, dtype):
    """The flash kernels: a query whose scores meet a NaN gives out = NaN and lse = NaN (and
    NaN gradients), a query with nothing to attend zeros and lse = -inf, a NaN key hidden by
    the mask changes nothing; as the NumPy reference."""
    rng = np.random.default_rng(7)
    n_q, n_k, d = 70, 80, 16
    q, k, v, g = (rng.standard_normal((1, n, d)).astype(dtype) for n in (n_q, n_k, n_k, n_q))
    q[0, 5, 3] = np.nan  # query 5: NaN scores
    k[0, 77, 0] = np.nan  # key 77: masked for every query
    keep = np.ones((n_q, n_k), bool)
    keep[:, 77] = False
    keep[9] = False  # query 9 attends to nothing
    want_out, want_lse = NP.attention_forward(q, k, v, keep, 0.25)
    qg, kg, vg, gg, keepg = to_gpu(cp_be, q, k, v, g, keep)
    out_g, lse_g = cp_be.attention_forward(qg, kg, vg, keepg, 0.25)
    out, lse = cp_be.to_numpy(out_g).astype(np.float32), cp_be.to_numpy(lse_g)
    assert np.isnan(out[0, 5]).all() and np.isnan(lse[0, 5]) and np.isnan(want_lse[0, 5])
    assert (out[0, 9] == 0).all() and lse[0, 9] == NEG_INF == want_lse[0, 9]
    rest = [i for i in range(n_q) if i not in (5, 9)]
    tol = 3e-3 if dtype == np.float16 else 2e-5
    np.testing.assert_allclose(out[0, rest], want_out[0, rest].astype(np.float32), rtol=tol,
                               atol=tol)
    got = cp_be.attention_backward(qg, kg, vg, out_g, lse_g, gg, keepg, 0.25)
    want = NP.attention_backward(q, k, v, want_out, want_lse, g, keep, 0.25)
    for a, b in zip(got, want, strict=True):  # NaN exactly where the reference has NaN
        a, b = cp_be.to_numpy(a).astype(np.float32), b.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_allclose(a, b, rtol=10 * tol, atol=10 * tol)
    assert np.isnan(cp_be.to_numpy(got[0])[0, 5]).all()  # the NaN query's own gradient
    assert_launched(cp_be, f"tinyattn_flash_forward_d16_{suffix(dtype)}",
                    f"tinyattn_flash_backward_d16_{suffix(dtype)}")


def test_gpu_sdpa_flash_through_autograd(cp_be):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((2, 4, 100, 64)).astype(np.float32) for _ in range(3)]
    grads = {}
    for name in ("numpy", "cupy"):
        q, k, v = (tinyattn.tensor(a, requires_grad=True, backend=name) for a in arrays)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, impl="flash")
        (out * out).sum().backward()
        grads[name] = [out.numpy()] + [t.grad.numpy() for t in (q, k, v)]
    for a, b in zip(grads["cupy"], grads["numpy"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    assert_launched(cp_be, "tinyattn_flash_forward_d64_f32", "tinyattn_flash_backward_d64_f32")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_gpu_gelu_kernels(cp_be, approximate, dtype):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(10_001) * 4).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    out, saved = cp_be.gelu_forward(cp_be.xp.asarray(x), approximate)
    want_out, want_saved = kr.gelu_forward(x.astype(np.float64), approximate)
    assert_close(out, want_out, dtype, cp_be, 10)
    assert_close(saved, want_saved, dtype, cp_be, 10)
    gx = cp_be.gelu_backward(cp_be.xp.asarray(g), cp_be.xp.asarray(x), saved, approximate)
    assert_close(gx, kr.gelu_backward(g.astype(np.float64), x.astype(np.float64),
                                      cp_be.to_numpy(saved).astype(np.float64), approximate),
                 dtype, cp_be, 10)
    kind = "tanh" if approximate == "tanh" else "erf"
    assert_launched(cp_be, f"tinyattn_gelu_{kind}_forward", f"tinyattn_gelu_{kind}_backward")


@pytest.mark.parametrize("weight_decay,decoupled", [(0.0, True), (0.1, False), (0.1, True)])
def test_gpu_adam_update(cp_be, weight_decay, decoupled):
    rng = np.random.default_rng(5)
    p, g, m = (rng.standard_normal(1000).astype(np.float32) for _ in range(3))
    v = rng.random(1000).astype(np.float32)
    pg, gg, mg, vg = to_gpu(cp_be, p, g, m, v)
    for step in (1, 2, 3):
        args = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=weight_decay,
                    step=step, decoupled=decoupled)
        NP.adam_update(p, g, m, v, **args)
        cp_be.adam_update(pg, gg, mg, vg, **args)
    for a, b in ((pg, p), (mg, m), (vg, v)):
        assert_close(a, b, np.float32, cp_be, 10)
    assert cp_be.launched == ["tinyattn_adam_update"] * 3


def test_gpu_training_step_matches_numpy(cp_be):
    """The gradients of one step match NumPy's; after two AdamW steps the loss does. (Not the
    weights: Adam's first steps move a weight whose gradient is near 0 by up to lr in either
    direction, so float32 rounding differences flip some of them.)"""
    from tinyattn import nn, optim

    tinyattn.manual_seed(0)
    model_np = nn.TinyTransformer(vocab_size=17, d_model=64, n_heads=2, n_layers=2, max_len=32)
    model_cp = nn.TinyTransformer(vocab_size=17, d_model=64, n_heads=2, n_layers=2, max_len=32)
    model_cp.load_state_dict(model_np.state_dict())
    model_cp.to("cupy")
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 17, (4, 32)), rng.integers(0, 17, (4 * 32,))
    losses, grads = {}, {}
    for name, model in (("numpy", model_np), ("cupy", model_cp)):
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        for step in range(3):
            logits = model(tinyattn.tensor(x, backend=name))
            loss = F.cross_entropy(logits.reshape(-1, 17), tinyattn.tensor(y, backend=name))
            opt.zero_grad()
            loss.backward()
            if step == 0:
                grads[name] = {n: p.grad.numpy() for n, p in model.named_parameters()}
            opt.step()
        losses[name] = loss.item()
    for name, g_np in grads["numpy"].items():
        np.testing.assert_allclose(grads["cupy"][name], g_np, rtol=1e-3,
                                   atol=1e-5 * np.abs(g_np).max(), err_msg=name)
    assert losses["cupy"] == pytest.approx(losses["numpy"], rel=1e-3)
    assert_launched(cp_be, "tinyattn_flash_forward_d32_f32", "tinyattn_flash_backward_d32_f32",
                    "tinyattn_gelu_*_forward", "tinyattn_gelu_*_backward", "tinyattn_adam_update")


def test_gpu_default_training_run_learns(cp_be, tmp_path):
    """`tinyattn train --backend cupy` with the default task and model reaches the README's
    accuracy, as the NumPy backend does. Emulated (every launch is a forked CPU run, far too
    slow for 600 steps), 30 steps of the run with batches of 8 must track the NumPy backend's
    losses."""
    import io

    from tinyattn.train import TrainConfig, train

    if not fake_cupy.EMULATION["on"]:
        metrics = train(TrainConfig(backend="cupy", out=str(tmp_path / "run")), progress=False,
                        stream=io.StringIO())
        assert metrics["accuracy"] >= 0.99, metrics
        return
    runs = {name: train(TrainConfig(backend=name, steps=30, batch_size=8, eval_every=30,
                                    heldout_size=64,
                                    out=str(tmp_path / name)), progress=False,
                        stream=io.StringIO()) for name in ("numpy", "cupy")}
    # the default model's head dim 16 has flash kernels
    assert_launched(cp_be, "tinyattn_flash_forward_d16_f32", "tinyattn_flash_backward_d16_f32",
                    "tinyattn_adam_update")
    for key in ("loss", "train_loss"):
        assert runs["cupy"][key] == pytest.approx(runs["numpy"][key], rel=2e-3), key


@pytest.mark.emulated
@pytest.mark.skipif(not cuda_emu.available(), reason="the CUDA emulator needs g++")
@pytest.mark.parametrize("n", [40, 3000])
def test_emulated_kernels_have_no_races(monkeypatch, n):
    """Blocks and threads run in reverse order give the same bits: no result depends on which
    thread or block runs first (a missing __syncthreads or a cross-block write would). dQ of
    flash attention is summed over key tiles with atomics, so it is compared with a tolerance."""
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((2, 3, 7, n)) * 4).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    keep = rng.random((7, n)) < 0.7
    d, n_q, n_k = 64, 70, n // 20 + 30
    q, k, v = (rng.standard_normal((2, m, d)).astype(np.float32) for m in (n_q, n_k, n_k))
    go = rng.standard_normal((2, n_q, d)).astype(np.float32)
    runs = []
    for reverse in (False, True):
        be = fake_cupy.install(monkeypatch, kernels=True, emulate=True, reverse=reverse)
        xg, gg, keepg, qg, kg, vg, gog = to_gpu(be, x, g, keep, q, k, v, go)
        y = be.scaled_masked_softmax(xg, keepg, scale=0.7, causal=True)
        out, lse = be.attention_forward(qg, kg, vg, None, 0.125, True)
        runs.append([be.softmax(xg), be.softmax_backward(y, gg), y,
                     be.scaled_masked_softmax_backward(y, gg, 0.7, True), out, lse,
                     *be.attention_backward(qg, kg, vg, out, lse, gog, None, 0.125, True)])
    for i, (a, b) in enumerate(zip(*runs, strict=True)):
        a, b = a.get(), b.get()
        assert not np.isnan(a).any(), i
        if i == 6:  # dQ
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"result {i}")


# ---- the benchmarks run (or say why not) without a GPU -----------------------------------------

def test_attention_benchmark_runs_on_the_cpu(capsys):
    from tinyattn.bench import attention

    assert attention.main(["--quick", "--t", "32", "80", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for t in ("32", "80"):
        assert re.search(rf"^\s+{t} composite .*\n\s+{t} flash ", out, re.M), out


@pytest.mark.skipif(GPU_REASON is None, reason="a GPU is present: the benchmark would run")
def test_gpu_benchmarks_say_why_they_cannot_run(capsys):
    from tinyattn.bench import attention, softmax

    assert softmax.main(["--quick"]) == 2
    assert attention.main(["--backend", "cupy", "--quick"]) == 2
    err = capsys.readouterr().err
    assert err.count("needs a GPU") == 2 and str(GPU_REASON) in err


@gpu_test
def test_gpu_random_stream_state_comes_back_and_checkpoint_replays_dropout():
    """On real CuPy (its bit generator holds a lock and keeps its cuRAND states on the device):
    Generator.get_state/set_state repeat the draws, and a checkpointed dropout block gives the
    plain gradients (the recomputation draws what the forward drew)."""
    from tinyattn import nn
    from tinyattn.utils.checkpoint import checkpoint

    g = tinyattn.Generator("cupy").manual_seed(1)
    state = g.get_state()
    first = tinyattn.randn(1000, generator=g, device="cuda").numpy()
    np.testing.assert_array_equal(tinyattn.randn(1000, generator=g.set_state(state),
                                                 device="cuda").numpy(), first)
    tinyattn.manual_seed(0)
    block = nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.5), nn.Linear(32, 8)).to("cupy")
    x = tinyattn.randn(16, 8, device="cuda", requires_grad=True)
    grads = []
    for run in (lambda t: checkpoint(block, t, use_reentrant=False), block):
        x.grad = None
        tinyattn.manual_seed(7)
        (run(x) ** 2).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5)
