"""The CPU emulator of CUDA kernels (tests/support/cuda_emu.py) catches what it claims to catch.

Each test compiles a small kernel with one deliberate mistake (a missing barrier, a lane that
returns before a shuffle, a read past the end, ...) and checks that the emulator reports it,
next to the same kernel without the mistake, which must run and give the right numbers. The
kernels of tinyattn itself run on the emulator in tests/backends/test_cupy_backend.py.
"""

import cuda_emu  # tests/support is on sys.path (tests/conftest.py)
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not cuda_emu.available(), reason="the emulator needs g++")

SOURCE = r"""
#define FULL 0xffffffffu
// sum of each row of 32 by a butterfly; `early` lanes >= 16 return before the shuffles
extern "C" __global__ void row_sum(const float* x, float* out, int n_rows, int early) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (early && lane >= 16) return;
    float v = row < n_rows ? x[row * 32 + lane] : 0.f;
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(FULL, v, o);
    if (row < n_rows && lane == 0) out[row] = v;
}

// width-8 groups: each group of 8 lanes sums its own values only
extern "C" __global__ void group_sum(const float* x, float* out) {
    float v = x[threadIdx.x];
    for (int o = 4; o > 0; o /= 2) v += __shfl_xor_sync(FULL, v, o, 8);
    out[threadIdx.x] = v;
}

// reverse the block's values through shared memory; `barrier` = 0 forgets __syncthreads
extern "C" __global__ void reverse(const float* x, float* out, int barrier) {
    __shared__ float buf[64];
    buf[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
    if (barrier) __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

// dynamic shared memory: thread t writes slot t, then reads slot t + skip
extern "C" __global__ void smem_read(float* out, int skip) {
    extern __shared__ __align__(16) unsigned char smem[];
    float* s = reinterpret_cast<float*>(smem);
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[(int)threadIdx.x + skip];
}

extern "C" __global__ void copy_n(const float* x, float* out, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = x[i];
}

extern "C" __global__ void divergent_barrier(float* out) {
    if (threadIdx.x < 16) __syncthreads(); else out[threadIdx.x] = 1.f;
    if (threadIdx.x >= 16) __syncthreads();
}

extern "C" __global__ void divergent_shuffles(float* out) {
    float v = threadIdx.x;
    if (threadIdx.x % 2) v = __shfl_xor_sync(FULL, v, 1);
    else v = __shfl_xor_sync(FULL, v, 1);
    out[threadIdx.x] = v;
}

extern "C" __global__ void writes_its_input(const float* x, float* out) {
    const_cast<float*>(x)[threadIdx.x] = 0.f;
    out[threadIdx.x] = 1.f;
}

extern "C" __global__ void spins(float* out, int n) {
    while (n > 0) out[0] += 1.f;
}

extern "C" __global__ void adds_atomically(float* out) {
    atomicAdd(out + threadIdx.x % 4, 1.f);
}

// four floats of shared memory with one 16-byte load, from float `offset` on
struct __align__(16) four_floats { float v[4]; };
extern "C" __global__ void vector_load(float* out, int offset) {
    extern __shared__ __align__(16) unsigned char smem[];
    float* s = reinterpret_cast<float*>(smem);
    for (int i = threadIdx.x; i < 68; i += blockDim.x) s[i] = i;
    __syncthreads();
    const four_floats t = *reinterpret_cast<const four_floats*>(s + offset + 4 * threadIdx.x);
    out[threadIdx.x] = t.v[0] + t.v[3];
}

// thread t adds 1 to out[t % 4], with atomicAdd (atomic = 1) or a plain += (lost updates)
extern "C" __global__ void adds(float* out, int atomic) {
    if (atomic) atomicAdd(out + threadIdx.x % 4, 1.f);
    else out[threadIdx.x % 4] += 1.f;
}

// thread 0 of every block writes out[0]: the blocks race on one word
extern "C" __global__ void every_block_writes(float* out) {
    if (threadIdx.x == 0) out[0] = blockIdx.x;
}

// each thread reads its neighbour's slot; `barrier` = 0 reads it while the neighbour writes it
extern "C" __global__ void neighbours(float* out, int barrier) {
    __shared__ float buf[64];
    buf[threadIdx.x] = 0.f;
    __syncthreads();
    buf[threadIdx.x] = threadIdx.x;
    if (barrier) __syncthreads();
    out[threadIdx.x] = buf[(threadIdx.x + 1) % blockDim.x];
}

// the sum of a block's values: per-warp sums through part[32], then warp 0 adds part[lane]
// for lanes < the number of warps (guard = 1) or for all 32 lanes (guard = 0: unwritten slots)
extern "C" __global__ void block_sum(const float* x, float* out, int guard) {
    __shared__ float part[32];
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(FULL, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = !guard || lane < (int)blockDim.x / 32 ? part[lane] : 0.f;
        for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(FULL, v, o);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

// reads a 32-float __shared__ array `shift` slots away from its own
extern "C" __global__ void static_index(float* out, int shift) {
    __shared__ float buf[32];
    buf[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = buf[(int)threadIdx.x + shift];
}

extern "C" __global__ void __launch_bounds__(64) copy_shifted(const float* x, float* out,
                                                               int shift) {
    out[threadIdx.x] = x[(int)threadIdx.x + shift];
}

extern "C" __global__ void halves(const unsigned short* x, unsigned short* out, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x[i]));
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f * 3.f));
        out[i] = h;
    }
}
"""


@pytest.fixture(scope="module")
def emu():
    return cuda_emu.EmuModule(SOURCE)


def i32(v):
    return np.int32(v)


def test_the_kernels_are_found_with_their_signatures(emu):
    assert set(emu.signatures) >= {"row_sum", "reverse", "smem_read", "halves"}
    assert emu.signatures["row_sum"] == [("float", True, True), ("float", True, False),
                                         ("int", False, False), ("int", False, False)]


def test_a_correct_kernel_gives_the_right_numbers(emu):
    x = np.random.default_rng(0).standard_normal((5, 32)).astype(np.float32)
    out = np.full(5, np.nan, np.float32)
    emu.launch("row_sum", (2,), (128,), [x, out, i32(5), i32(0)])
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5)
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    emu.launch("group_sum", (1,), (32,), [x, out])
    np.testing.assert_array_equal(out, np.repeat(x.reshape(4, 8).sum(axis=1), 8))


def test_a_lane_that_returns_before_a_full_mask_shuffle_is_an_error(emu):
    x = np.zeros((4, 32), np.float32)
    with pytest.raises(cuda_emu.EmuError, match=r"row_sum: .*lane 16, which has already "
                                                r"returned"):
        emu.launch("row_sum", (1,), (128,), [x, np.zeros(4, np.float32), i32(4), i32(1)])


def test_a_missing_barrier_is_reported_in_either_order(emu):
    x = np.arange(128, dtype=np.float32)
    want = x.reshape(2, 64)[:, ::-1].ravel()
    for reverse in (False, True):
        out = np.full(128, np.nan, np.float32)
        emu.launch("reverse", (2,), (64,), [x, out, i32(1)], reverse=reverse)
        np.testing.assert_array_equal(out, want)
        out = np.zeros(64, np.float32)
        emu.launch("neighbours", (1,), (64,), [out, i32(1)], reverse=reverse)
        np.testing.assert_array_equal(out, (np.arange(64) + 1) % 64)
        # forward, thread 0 reads buf[63] before thread 63 writes it; reversed, the race
        with pytest.raises(cuda_emu.EmuError, match=r"reverse: .*(race on static|no thread of "
                                                    r"this block has written)"):
            emu.launch("reverse", (2,), (64,), [x, out, i32(0)], reverse=reverse)
        with pytest.raises(cuda_emu.EmuError, match=r"neighbours: .*race on static \(__shared__"
                                                    r"\) shared memory, byte \d+ \(neighbours::"
                                                    r"buf, its byte \d+\): this thread "
                                                    r"(reads|writes) it, thread \d+ of block "
                                                    r"\(0, 0, 0\) (wrote|read) it in the same "
                                                    r"barrier interval"):
            emu.launch("neighbours", (1,), (64,), [out, i32(0)], reverse=reverse)


def test_a_plain_add_where_an_atomic_is_needed_is_a_race(emu):
    out = np.zeros(4, np.float32)
    emu.launch("adds", (3,), (64,), [out, i32(1)])
    np.testing.assert_array_equal(out, [48, 48, 48, 48])
    with pytest.raises(cuda_emu.EmuError, match=r"adds: .*race on argument 0, byte 0: this "
                                                r"thread (reads|writes) it, thread 0 of block "
                                                r"\(0, 0, 0\) wrote it in the same barrier"):
        emu.launch("adds", (1,), (64,), [out, i32(0)])
    with pytest.raises(cuda_emu.EmuError, match=r"every_block_writes: block \(1, 0, 0\) .*race "
                                                r"on argument 0.*another block: no barrier "
                                                r"orders blocks"):
        emu.launch("every_block_writes", (2,), (32,), [out])


def test_reading_shared_memory_no_thread_wrote_is_an_error(emu):
    out = np.zeros(32, np.float32)
    emu.launch("smem_read", (1,), (32,), [out, i32(0)], shared_mem=64 * 4)
    np.testing.assert_array_equal(out, np.arange(32))
    with pytest.raises(cuda_emu.EmuError, match=r"smem_read: .*reads dynamic shared memory at "
                                                r"byte 128, which no thread of this block has "
                                                r"written \(shared memory starts undefined\) "
                                                r"\[kernel source line \d+\]"):
        emu.launch("smem_read", (1,), (32,), [out, i32(32)], shared_mem=64 * 4)
    x = np.ones(192, np.float32)
    out = np.zeros(3, np.float32)
    emu.launch("block_sum", (3,), (64,), [x, out, i32(1)])
    np.testing.assert_array_equal(out, [64, 64, 64])
    with pytest.raises(cuda_emu.EmuError, match=r"block_sum: block \(0, 0, 0\) thread \(2, 0, 0\)"
                                                r": reads static .*\(block_sum::part, its byte "
                                                r"8\), which no thread"):
        emu.launch("block_sum", (3,), (64,), [x, out, i32(0)])


def test_negative_indices_are_errors(emu):
    with pytest.raises(cuda_emu.EmuError, match=r"smem_read: .*reads 4 bytes before the start "
                                                r"of dynamic shared memory"):
        emu.launch("smem_read", (1,), (32,), [np.zeros(32, np.float32), i32(-1)],
                   shared_mem=64 * 4)
    x, out = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    emu.launch("copy_shifted", (1,), (32,), [x, out, i32(32)])
    np.testing.assert_array_equal(out[:32], x[32:])
    with pytest.raises(cuda_emu.EmuError, match=r"copy_shifted: .*reads 4 bytes before the "
                                                r"start of argument 0"):
        emu.launch("copy_shifted", (1,), (32,), [x, out, i32(-1)])


@pytest.mark.skipif(not cuda_emu.sanitizes_alignment(), reason="g++ here has no libubsan")
@pytest.mark.parametrize("shift,index", [(1, 32), (-1, -1)])
def test_an_index_outside_a_shared_array_is_an_error(emu, shift, index):
    out = np.zeros(32, np.float32)
    emu.launch("static_index", (1,), (32,), [out, i32(0)])
    with pytest.raises(cuda_emu.EmuError, match=rf"(?s)static_index: .*index {index} out of "
                                                r"bounds for type 'float \[32\]'"):
        emu.launch("static_index", (1,), (32,), [out, i32(shift)])


@pytest.mark.parametrize("grid,block", [((0,), (32,)), ((1, 65536), (32,)),
                                        ((2**31,), (32,)), ((1, 1, 65536), (32,)),
                                        ((1,), (1025,)), ((1,), (32, 1, 65)), ((1,), (64, 32)),
                                        ((1,), (128,))])
def test_launches_over_cudas_limits_are_refused(emu, grid, block):
    x, out = np.zeros(4096, np.float32), np.zeros(4096, np.float32)
    with pytest.raises(cuda_emu.EmuError, match=r"copy_shifted: cannot launch: (invalid "
                                                r"(grid|block)|a block of \d+ threads)"):
        emu.launch("copy_shifted", grid, block, [x, out, i32(0)])


def test_reading_past_dynamic_shared_memory_faults(emu):
    with pytest.raises(cuda_emu.EmuError, match="SIGSEGV"):
        emu.launch("smem_read", (1,), (32,), [np.zeros(32, np.float32), i32(1024)],
                   shared_mem=32 * 4)


def test_reading_past_an_argument_names_it(emu):
    x = np.ones(100, np.float32)
    out = np.zeros(200, np.float32)
    emu.launch("copy_n", (1,), (64,), [x, out, i32(100)])
    assert out[:100].sum() == 100
    with pytest.raises(cuda_emu.EmuError, match=r"copy_n: .*SIGSEGV.*past the end of "
                                                r"argument 0 \(400 bytes\)"):
        emu.launch("copy_n", (1,), (64,), [x, out, i32(200)])


def test_strided_and_broadcast_views_are_passed_as_they_lie(emu):
    base = np.arange(10, dtype=np.float32)
    view = np.broadcast_to(base[::2], (3, 5))  # strides (0, 8): 9 floats of memory
    out = np.zeros(9, np.float32)
    emu.launch("copy_n", (1,), (32,), [view, out, i32(9)])
    np.testing.assert_array_equal(out, base[:9])


def test_divergent_barriers_and_shuffles_are_errors(emu):
    with pytest.raises(cuda_emu.EmuError, match="different __syncthreads"):
        emu.launch("divergent_barrier", (1,), (32,), [np.zeros(32, np.float32)])
    with pytest.raises(cuda_emu.EmuError, match="different shuffles"):
        emu.launch("divergent_shuffles", (1,), (32,), [np.zeros(32, np.float32)])


def test_writing_a_const_argument_is_an_error(emu):
    with pytest.raises(cuda_emu.EmuError, match="writes into argument 0, which is const"):
        emu.launch("writes_its_input", (1,), (32,), [np.ones(32, np.float32),
                                                     np.zeros(32, np.float32)])


def test_arguments_must_have_the_parameters_c_types(emu):
    x, out = np.zeros(100, np.float32), np.zeros(100, np.float32)
    with pytest.raises(TypeError, match=r"argument 2 must be a numpy.int32 .*'int'"):
        emu.launch("copy_n", (1,), (32,), [x, out, np.int64(100)])
    with pytest.raises(TypeError, match=r"argument 2 must be a numpy.int32"):
        emu.launch("copy_n", (1,), (32,), [x, out, 100])
    with pytest.raises(TypeError, match=r"argument 0 is a float\* but the array is float64"):
        emu.launch("copy_n", (1,), (32,), [x.astype(np.float64), out, i32(100)])
    with pytest.raises(TypeError, match="3 arguments for 2 parameters"):
        emu.launch("writes_its_input", (1,), (32,), [x, out, i32(1)])


def test_an_endless_kernel_times_out(emu, monkeypatch):
    monkeypatch.setattr(cuda_emu, "TIMEOUT_S", 1)
    with pytest.raises(cuda_emu.EmuError, match="timed out"):
        emu.launch("spins", (1,), (1,), [np.zeros(1, np.float32), i32(1)])


def test_atomics_and_the_float16_conversions(emu):
    out = np.zeros(4, np.float32)
    emu.launch("adds_atomically", (3,), (64,), [out])
    np.testing.assert_array_equal(out, [48, 48, 48, 48])
    x = np.array([0, 1, -2.5, 65504 / 3, 1e-7, np.inf, np.nan, 21000, 6e-8], np.float16)
    out = np.zeros_like(x)
    emu.launch("halves", (1,), (32,), [x.view(np.uint16), out.view(np.uint16), i32(x.size)])
    with np.errstate(over="ignore"):  # 21000 * 3 rounds to inf, as on the GPU
        want = (x.astype(np.float32) * 3).astype(np.float16)
    np.testing.assert_array_equal(out, want)


@pytest.mark.skipif(not cuda_emu.sanitizes_alignment(), reason="g++ here has no libubsan")
def test_a_misaligned_vector_load_is_an_error(emu):
    out = np.zeros(16, np.float32)
    emu.launch("vector_load", (1,), (16,), [out, i32(4)], shared_mem=68 * 4)
    np.testing.assert_array_equal(out, 2 * (4 + 4 * np.arange(16)) + 3)
    with pytest.raises(cuda_emu.EmuError, match=r"(?s)vector_load: .*misaligned address .*16 "
                                                r"byte alignment.*in block \(0, 0, 0\) thread"):
        emu.launch("vector_load", (1,), (16,), [out, i32(2)], shared_mem=68 * 4)


def test_unknown_inline_asm_is_refused():
    with pytest.raises(cuda_emu.EmuError, match="PTX inline asm"):
        cuda_emu.EmuModule('extern "C" __global__ void k(float* x) { asm("trap;"); }')


def test_elementwise_kernels_are_built_as_cupy_builds_them():
    """`typedef <dtype> T;` ahead of the preamble, arrays bound per element (outputs by
    reference, so an in/out parameter updates in place), scalars of their declared type."""
    kern = cuda_emu.EmuElementwise(
        "T x, float64 a, int32 k", "T y, T acc",
        "typedef wide<T>::type W; y = (T)(twice<W>((W)x) * (W)a + (W)k); acc = (T)((W)acc + (W)x)",
        "axpk", preamble="template <typename T> struct wide { typedef float type; };\n"
                         "template <> struct wide<double> { typedef double type; };\n"
                         "template <typename W> W twice(W v) { return v + v; }")
    for dtype in (np.float16, np.float32, np.float64):
        x = np.linspace(-3, 3, 7).astype(dtype)
        acc = np.ones(7, dtype)
        y, acc_out = kern(x, 0.5, np.int32(2), np.empty_like(x), acc)
        assert acc_out is acc and y.dtype == dtype
        np.testing.assert_array_equal(y, (x.astype(np.float64) + 2).astype(dtype))
        np.testing.assert_array_equal(acc, (1 + x.astype(np.float64)).astype(dtype))
        y_new = kern(x, 0.5, np.int32(2))[0]  # outputs not given: made
        np.testing.assert_array_equal(y_new, y)
    with pytest.raises(TypeError, match="one shape and dtype"):
        kern(x, 0.5, np.int32(2), np.empty(3, x.dtype), acc)
