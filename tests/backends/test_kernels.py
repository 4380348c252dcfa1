"""The CUDA kernels, checked without a GPU.

1. Every .cu file, exactly as CupyBackend hands it to NVRTC, compiles with `nvcc -ptx` for sm_80
   and sm_90 and with NVRTC itself (tests/support/nvrtc.py, when libnvrtc is installed), defines
   every kernel name the backend looks up, and needs no host header; the ElementwiseKernel
   operations compile inside a kernel built the way CuPy builds one.
2. The NumPy replays of the kernels' algorithms (tests/support/kernel_refs.py: same lane/thread
   split, same butterflies, same online (m, l) recurrence, same flash tiles) equal the readable
   references of backends/base.py and flash.py on adversarial inputs: ±1e4, -inf entries, fully
   masked rows, rows of length 1 and 4097, causal and explicit masks, T not a multiple of a tile.
"""

import math
import re

import kernel_refs as kr  # tests/support (tests/conftest.py)
import numpy as np
import nvrtc  # tests/support is on sys.path (tests/conftest.py)
import pytest
from nvcc_build import NVCC, build

import tinyattn
import tinyattn.functional as F
from tinyattn.backends import cuda_launch as cl
from tinyattn.backends import cupy_backend as cb
from tinyattn.backends import flash as flash_ref
from tinyattn.backends.numpy_backend import NumpyBackend

NEG_INF = float("-inf")
BE = NumpyBackend()
TOL = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-13}

# ---- 1. compiling ------------------------------------------------------------------------------

CU_FILES = sorted(p.name for p in cl.KERNEL_DIR.glob("*.cu"))
EXPECTED_NAMES = {"softmax.cu": cl.softmax_kernel_names(), "flash.cu": cl.flash_kernel_names(),
                  "elementwise.cu": []}


def test_every_cu_file_is_known():
    assert set(CU_FILES) == set(EXPECTED_NAMES)


@pytest.mark.parametrize("filename", CU_FILES)
def test_sources_need_no_headers(filename):
    code = re.sub(r"//.*", "", cl.kernel_source(filename))  # without the comments
    assert not re.search(r"^\s*#\s*include", code, re.M)  # the header is pasted in; no host ones
    assert "INFINITY" not in code and "FLT_MAX" not in code  # undefined under NVRTC


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH (the CUDA toolkit is absent)")
# (one architecture in the README's test command; the others are `slow`, which .ci/run runs too)
@pytest.mark.parametrize("arch", [pytest.param("sm_80", marks=pytest.mark.slow), "sm_90"])
@pytest.mark.parametrize("filename", CU_FILES)
def test_compiles_with_nvcc(filename, arch):
    done = build(filename, arch)  # (once per session: tests/support/nvcc_build.py)
    assert done.returncode == 0, f"{done.command}\n{done.log}"
    assert "warning" not in done.log.lower(), done.log
    entries = set(re.findall(r"\.entry\s+(\w+)", done.ptx))
    assert entries == set(EXPECTED_NAMES[filename])


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH (the CUDA toolkit is absent)")
def test_flash_kernels_fit_two_blocks_per_sm_without_spills():
    """ptxas's own numbers for sm_90: every flash kernel keeps <= 128 registers per thread (two
    256-thread blocks per SM, the occupancy the tile sizes are chosen for) and spills nothing
    to local memory (spills in the inner loops would cost more than the vector loads gain)."""
    done = build("flash.cu", "sm_90")
    assert done.returncode == 0, done.log
    report = re.findall(r"Compiling entry function '(\w+)'.*?(\d+) bytes spill stores.*?"
                        r"Used (\d+) registers", done.log, re.S)
    assert {name for name, *_ in report} == set(cl.flash_kernel_names())
    for name, spills, registers in report:
        assert int(spills) == 0 and int(registers) <= 128, (name, spills, registers)


# (all slow, ~12 s: .ci/run runs them; nvcc compiles the same text in the README's command)
NVRTC_ARCHS = [pytest.param("compute_75", marks=pytest.mark.slow),  # T4
               pytest.param("compute_80", marks=pytest.mark.slow),  # A100
               pytest.param("compute_90", marks=pytest.mark.slow)]  # H100


@pytest.mark.skipif(nvrtc.library() is None, reason="no libnvrtc (pip install nvidia-cuda-nvrtc)")
@pytest.mark.parametrize("arch", NVRTC_ARCHS)
@pytest.mark.parametrize("filename", ["softmax.cu", "flash.cu"])
def test_compiles_with_nvrtc_as_rawmodule_does(filename, arch):
    """The exact text and options CupyBackend gives cupy.RawModule, through NVRTC itself."""
    options = [*cl.NVRTC_OPTIONS, f"-arch={arch}"]
    ok, log, ptx = nvrtc.compile_ptx(cl.kernel_source(filename), filename, options)
    assert ok, f"NVRTC {nvrtc.version()} {options}:\n{log}"
    assert "warning" not in log.lower(), log
    assert set(re.findall(r"\.entry\s+(\w+)", ptx)) == set(EXPECTED_NAMES[filename])


def elementwise_as_cupy_builds_it(name, dtype):
    """A kernel for one of CupyBackend's ElementwiseKernels, built the way CuPy builds one:
    `typedef <dtype> T;`, the preamble, then per element the inputs by value, the outputs by
    reference, and the operation (CuPy's indexing helpers left out)."""
    in_params, out_params, operation = cb._gelu_ops()[name]
    ctype = {"T": "T", "float64": "double", "int32": "int"}
    params, binds = [], []
    for kind, text in (("in", in_params), ("out", out_params)):
        for param in text.split(","):
            typ, var = param.split()
            if typ == "T":
                params.append(f"{'const ' if kind == 'in' else ''}T* {var}_")
                binds.append(f"{'const T' if kind == 'in' else 'T&'} {var} = {var}_[i];")
            else:
                params.append(f"{ctype[typ]} {var}")
    return (f"typedef {dtype} T;\n{cl.kernel_source('elementwise.cu')}\n"
            f'extern "C" __global__ void {name}({", ".join(params)}, long long n) {{\n'
            f"    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i >= n) return;\n    {' '.join(binds)}\n    {operation}\n}}\n")


@pytest.mark.skipif(nvrtc.library() is None, reason="no libnvrtc (pip install nvidia-cuda-nvrtc)")
@pytest.mark.parametrize("dtype", ["float", "double"])
@pytest.mark.parametrize("name", list(cb._gelu_ops()))
def test_elementwise_operations_compile_with_nvrtc(name, dtype):
    options = [*cl.NVRTC_OPTIONS, "-arch=compute_90"]
    ok, log, ptx = nvrtc.compile_ptx(elementwise_as_cupy_builds_it(name, dtype), name, options)
    assert ok, log
    assert f".entry {name}" in ptx


def test_flash_tiles_match_the_source():
    text = cl.kernel_source("flash.cu")
    for d, ((fbq, fbk), (bbq, bbk)) in kr.FLASH_TILES.items():
        assert f"TINYATTN_FLASH({d}, {fbq}, {fbk}, {bbq}, {bbk}, float, f32)" in text
        assert f"TINYATTN_FLASH({d}, {fbq}, {fbk}, {bbq}, {bbk}, tinyattn_half, f16)" in text
        for direction in ("forward", "backward"):  # must fit the largest block of an sm_80 SM
            assert cl.flash_smem_bytes(d, direction) <= 163 * 1024


# ---- 2. softmax replays ------------------------------------------------------------------------

def test_softmax_launch():
    assert kr.softmax_launch(1) == ("warp", 1, 1, 1)
    assert kr.softmax_launch(20) == ("warp", 1, 32, 1)
    assert kr.softmax_launch(33) == ("warp", 2, 32, 1)
    assert kr.softmax_launch(1024) == ("warp", 32, 32, 1)
    # vectors: each lane holds up to 4 (fewer lanes per row for short rows)
    assert kr.softmax_launch(4, 4) == ("warp", 4, 1, 4)
    assert kr.softmax_launch(64, 4) == ("warp", 16, 4, 4)
    assert kr.softmax_launch(64, 8) == ("warp", 32, 2, 8)
    assert kr.softmax_launch(256, 4) == ("warp", 16, 16, 4)
    assert kr.softmax_launch(256, 8) == ("warp", 32, 8, 8)
    assert kr.softmax_launch(1024, 4) == ("warp", 32, 32, 4)
    assert kr.softmax_launch(1024, 8) == ("warp", 32, 32, 8)
    for n in (1025, 4097, 8192, 100_000):
        for vec in (1, 4):
            kind, threads, v = kr.softmax_launch(n, vec)
            assert kind == "block" and 128 <= threads <= 1024 and threads & (threads - 1) == 0
            assert v == vec


@pytest.mark.parametrize("n", [4, 8, 40, 64, 96, 256, 1024, 2048])
@pytest.mark.parametrize("vec", [2, 4, 8])
def test_every_vector_launch_covers_the_row_once(n, vec):
    """Each column of a row lies in exactly one lane's (or thread's) registers, whatever the
    vector width: the replays' layouts are permutations of the row."""
    if n % vec:
        pytest.skip("the host uses vectors only for rows that are a multiple of them")
    launch = kr.softmax_launch(n, vec)
    cols = np.arange(n, dtype=np.float64)[None, :]
    if launch[0] == "warp":
        _, per_lane, width, _ = launch
        assert per_lane % vec == 0 and width * per_lane >= n
        lanes = kr._lanes(cols, width, per_lane, -1.0, vec)
        np.testing.assert_array_equal(kr._unlanes(lanes, n, vec), cols)
        for t in range(vec):  # register k * vec + t of a lane: a vector's t-th column
            assert (lanes[0, :, t::vec] % vec == t)[lanes[0, :, t::vec] >= 0].all()
    else:
        laid = kr._thread_columns(cols, launch[1], vec, -1.0)
        assert sorted(laid[laid >= 0].tolist()) == list(range(n))


def adversarial_rows(n, dtype, rng):
    """Rows of length n: plain, huge ±1e4 (float16: ±6e4 would overflow, so ±1e4 still), some
    -inf entries, a fully masked row, a single finite entry, and a constant row."""
    x = rng.standard_normal((7, n)) * 3
    x[1] = rng.choice([-1e4, 1e4], size=n) + rng.standard_normal(n)
    x[2, rng.random(n) < 0.5] = NEG_INF
    x[2, 0] = 1.0
    x[3] = NEG_INF
    x[4] = NEG_INF
    x[4, n // 2] = -1e4
    x[5] = 7.0
    x[6] = rng.standard_normal(n) * 1e-3
    return x.astype(dtype)


LENGTHS = [1, 2, 3, 17, 32, 33, 100, 1000, 1024, 1025, 4097]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("n", LENGTHS)
def test_softmax_forward_replay_equals_three_pass(n, dtype):
    rng = np.random.default_rng(n)
    x = adversarial_rows(n, dtype, rng)
    y = kr.softmax_forward(x)
    want = BE.softmax(x.astype(np.float64)).astype(dtype)
    assert y.dtype == dtype and not np.isnan(y).any()
    np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64),
                               rtol=TOL[dtype] * 10, atol=TOL[dtype])
    assert (y[3] == 0).all()  # the fully masked row gives zeros
    np.testing.assert_allclose(y[:, :].astype(np.float64).sum(-1)[[0, 1, 2, 4, 5, 6]], 1,
                               rtol=5 * TOL[dtype] * max(1, math.log2(n)))


def test_block_and_warp_replays_agree():
    """The same rows through both algorithms (the launch choice is the only difference)."""
    rng = np.random.default_rng(0)
    x = adversarial_rows(700, np.float32, rng)
    warp = kr._softmax_forward_warp(x, 32, 32)
    block = kr._softmax_forward_block(x, 128)
    np.testing.assert_allclose(warp, block, rtol=1e-6, atol=1e-7)
    for vec in (2, 4):  # the vector layouts add in another order: the same numbers
        np.testing.assert_allclose(kr._softmax_forward_warp(x, 32, 32, vec), warp, rtol=1e-6,
                                   atol=1e-7)
        np.testing.assert_allclose(kr._softmax_forward_block(x, 128, vec), block, rtol=1e-6,
                                   atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_q,n_k", [(5, 5), (7, 3), (3, 9), (40, 1100), (1, 1)])
def test_scaled_masked_forward_replay(n_q, n_k, dtype):
    rng = np.random.default_rng(n_q * 100 + n_k)
    x = (rng.standard_normal((2, 3, n_q, n_k)) * 4).astype(dtype)
    x[0, 0, 0] = NEG_INF  # a row already all -inf
    keep = rng.random((n_q, n_k)) < 0.6
    keep[-1] = False  # a row the mask hides entirely
    pad = rng.random((2, 1, 1, n_k)) < 0.8  # a padding-style mask, broadcast over heads and rows
    for kwargs in (dict(causal=True), dict(keep=keep), dict(keep=keep, causal=True),
                   dict(keep=pad, causal=True), dict()):
        y = kr.softmax_forward(x, scale=0.37, **kwargs)
        want = BE.scaled_masked_softmax(x, scale=0.37, **kwargs)
        assert not np.isnan(y).any()
        np.testing.assert_allclose(y, want, rtol=TOL[dtype] * 10, atol=TOL[dtype], err_msg=str(
            kwargs))
        if kwargs.get("causal"):
            assert (y[..., np.triu_indices(n_q, 1, n_k)[0], np.triu_indices(n_q, 1, n_k)[1]]
                    == 0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("n", LENGTHS)
def test_softmax_backward_replay(n, dtype):
    rng = np.random.default_rng(n + 1)
    y = BE.softmax(adversarial_rows(n, np.float64, rng)).astype(dtype)
    g = rng.standard_normal(y.shape).astype(dtype)
    gx = kr.softmax_backward(y, g, scale=1.0)
    want = BE.softmax_backward(y.astype(np.float64), g.astype(np.float64))
    assert gx.dtype == dtype
    np.testing.assert_allclose(gx.astype(np.float64), want, rtol=TOL[dtype] * 50,
                               atol=TOL[dtype] * 10)


@pytest.mark.parametrize("n_q,n_k", [(9, 9), (6, 1500), (33, 20)])
def test_causal_backward_replay_reads_only_the_triangle(n_q, n_k):
    rng = np.random.default_rng(3)
    y = BE.scaled_masked_softmax(rng.standard_normal((2, n_q, n_k)), causal=True)
    g = rng.standard_normal(y.shape)
    g_noisy = g.copy()
    rows, cols = np.nonzero(np.arange(n_k)[None, :] > np.arange(n_q)[:, None])
    g_noisy[:, rows, cols] = np.nan  # entries above the diagonal are never read
    gx = kr.softmax_backward(y, g_noisy, scale=0.5, causal=True)
    np.testing.assert_allclose(gx, BE.scaled_masked_softmax_backward(y, g, scale=0.5),
                               rtol=1e-12, atol=1e-14)
    assert (gx[:, rows, cols] == 0).all()


# ---- 3. flash attention replays ----------------------------------------------------------------

def composite_attention(q, k, v, scale, causal=False, keep=None):
    s = BE.scaled_masked_softmax(q @ np.swapaxes(k, -1, -2), keep=keep, scale=scale,
                                 causal=causal)
    return s @ v


@pytest.mark.parametrize("d", [16, 32, 64, 128])
@pytest.mark.parametrize("n_q,n_k", [(1, 1), (70, 70), (65, 130), (100, 37)])
def test_flash_forward_replay(d, n_q, n_k):
    rng = np.random.default_rng(d + n_q)
    q, k, v = (rng.standard_normal((2, n, d)).astype(np.float32) for n in (n_q, n_k, n_k))
    keep = rng.random((2, n_q, n_k)) < 0.7
    keep[0, 0] = False  # a query that sees nothing
    scale = 1 / math.sqrt(d)
    for causal, mask in ((False, None), (True, None), (False, keep), (True, keep)):
        out, lse = kr.flash_forward(q, k, v, scale, causal, mask)
        want, want_lse = flash_ref.flash_forward(np, q.astype(np.float64), k.astype(np.float64),
                                                 v.astype(np.float64), mask, scale, causal)
        assert out.dtype == np.float32 and lse.dtype == np.float32 and not np.isnan(out).any()
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out, composite_attention(q, k, v, scale, causal, mask),
                                   rtol=1e-4, atol=2e-5)
    out, lse = kr.flash_forward(q, k, v, scale, False, keep)
    assert (out[0, 0] == 0).all() and lse[0, 0] == NEG_INF


@pytest.mark.parametrize("d", [16, 32, 64, 128])
@pytest.mark.parametrize("n_q,n_k", [(1, 1), (70, 70), (40, 97), (97, 40)])
def test_flash_backward_replay(d, n_q, n_k):
    rng = np.random.default_rng(2 * d + n_k)
    q, k, v = (rng.standard_normal((2, n, d)) for n in (n_q, n_k, n_k))
    g = rng.standard_normal((2, n_q, d))
    keep = rng.random((n_q, n_k)) < 0.7
    keep[n_q // 2] = False
    scale = 1 / math.sqrt(d)
    for causal, mask in ((False, None), (True, None), (True, keep)):
        out, lse = flash_ref.flash_forward(np, q, k, v, mask, scale, causal)
        want = flash_ref.flash_backward(np, q, k, v, out, lse, g, mask, scale, causal)
        f32 = [a.astype(np.float32) for a in (q, k, v, out, lse, g)]
        got = kr.flash_backward(*f32[:5], f32[5], scale, causal, mask)
        for name, a, b in zip(("gq", "gk", "gv"), got, want, strict=True):
            assert a.dtype == np.float32 and not np.isnan(a).any()
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=5e-5, err_msg=f"{name} {causal}")


def test_flash_replay_float16_keeps_dtype():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 50, 64)).astype(np.float16) for _ in range(3))
    out, lse = kr.flash_forward(q, k, v, 0.125, causal=True)
    assert out.dtype == np.float16 and lse.dtype == np.float32
    want = composite_attention(*(a.astype(np.float64) for a in (q, k, v)), 0.125, causal=True)
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=2e-3)


# ---- 4. elementwise replays --------------------------------------------------------------------

@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_replay_equals_the_op(approximate, dtype):
    rng = np.random.default_rng(7)
    x_np = (rng.standard_normal(500) * 4).astype(dtype)
    g_np = rng.standard_normal(500).astype(dtype)
    x = tinyattn.tensor(x_np, requires_grad=True)
    y = F.gelu(x, approximate=approximate)
    y.backward(tinyattn.tensor(g_np))
    out, saved = kr.gelu_forward(x_np, approximate)
    gx = kr.gelu_backward(g_np, x_np, saved, approximate)
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(out, y.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("weight_decay,decoupled", [(0.0, False), (0.1, False), (0.1, True)])
def test_adam_replay_equals_the_backend(weight_decay, decoupled):
    rng = np.random.default_rng(8)
    p, g, m = (rng.standard_normal(300).astype(np.float32) for _ in range(3))
    v = rng.random(300).astype(np.float32)
    p2, m2, v2 = p.copy(), m.copy(), v.copy()
    for step in (1, 2, 10):
        args = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=weight_decay,
                    step=step, decoupled=decoupled)
        kr.adam_update(p, g, m, v, **args)
        BE.adam_update(p2, g, m2, v2, **args)
    for got, want in ((p, p2), (m, m2), (v, v2)):  # values of order 1, float32 rounding
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
