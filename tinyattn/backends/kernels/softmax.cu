// softmax.cu - fused softmax kernels over the last (contiguous) axis, forward and backward.
//
// One forward and one backward serve plain softmax and the scaled masked softmax of attention:
// y = softmax(scale * x) with keys j > i masked when `causal` (row r is query i = r % n_q) and
// where an optional uint8 `keep` mask is 0. Masked scores are -inf; a row with nothing left
// gives zeros. Causal rows never read keys past the diagonal and write zeros there.
//
// Two shapes of kernel, chosen by the host from the row length n:
//   warp kernels  (n <= 1024): a group of `width` lanes per row (width = min(32, pow2 >= n)),
//                 each lane keeps E = pow2(n)/width elements in registers (lane l holds columns
//                 l, l + width, ...). Max and sum are butterfly shuffles. 1 read + 1 write.
//                 A lane loads all its raw values (and mask bytes) first, predicated on the
//                 causal limit, and only then masks and scales them, so its E loads are in
//                 flight together (a masked load per element would wait for the branch before).
//                 128 threads per block, 128 / width rows per block.
//   block kernels (n > 1024): one block per row. Each thread walks columns tid, tid + B, ...
//                 with the online (m, l) recurrence, then the block merges the pairs (warp
//                 butterfly, then warp 0 over the per-warp pairs). The row is kept in dynamic
//                 shared memory when the host gives enough of it (else it is read twice).
// Backward: gx = scale * (y * (g - sum(g * y))), the same two shapes, the sum reduced the same
// way; the block kernel keeps y and g in shared memory the same way (cache_row).
// Every exponential e^(s - m) is exp2((s - m) log2 e) (tinyattn_exp_diff): one ex2.approx,
// not the accurate expf's longer sequence.
// A row with a NaN among its unmasked scores comes out all NaN (l is NaN, and 1 / l is used
// whenever l != 0); a fully masked row (l = 0) comes out zeros, as in the NumPy reference.
// Compute type: float32 for float16/float32 data, float64 for float64.
// tests/support/kernel_refs.py replays each kernel's order of operations in NumPy (not bit
// for bit: nvcc contracts multiply-adds to FMA and ex2.approx is not NumPy's exp2).
// These kernels have not run on a GPU: they are checked by compiling them (nvcc, NVRTC, ptxas)
// and by running their source in tests/support/cuda_emu.py, whose races, barriers, shuffles, bounds
// and unwritten shared memory checks they pass; their speed is unmeasured.
#include "tinyattn_common.cuh"

#define TINYATTN_FULL_MASK 0xffffffffu
// Block kernels read this many columns per thread before using any of them, so that each
// thread has that many loads in flight (one at a time leaves a long row far from bandwidth).
// The host caps a row at 2^31 - 1 - 4 * 1024 columns so that j0 + u * blockDim.x and
// j0 + 4 * blockDim.x stay within int (CupyBackend.SOFTMAX_MAX_COLS).
#define TINYATTN_BLOCK_UNROLL 4

// s[k] = the scaled, masked score of column j0 + k * stride, -inf where masked
// or past `limit`. Every raw value and mask byte is loaded first (predicated on j < limit,
// so nothing past the causal limit is read), and only then masked and scaled: the N loads of
// a thread are in flight together instead of each waiting for the previous column's branch.
template <typename T, int N>
__device__ __forceinline__ void tinyattn_scores(
        typename Io<T>::acc (&s)[N], const T* x_row, int j0, int stride, int limit,
        const unsigned char* keep_row, const TinyattnMask& mk, typename Io<T>::acc scale) {
    typedef typename Io<T>::acc A;
    T raw[N];
    unsigned char kp[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
        const int j = j0 + k * stride;
        const bool in = j < limit;
        raw[k] = in ? x_row[j] : T(0);
        kp[k] = in && keep_row ? keep_row[j * mk.ks_j] : (unsigned char)1;
    }
#pragma unroll
    for (int k = 0; k < N; ++k)
        s[k] = j0 + k * stride < limit && kp[k] ? Io<T>::convert(raw[k]) * scale
                                                : tinyattn_neg_inf(A(0));
}

// ---- forward: warp per row, the row in registers ---------------------------------------------

template <typename T, int E>
__device__ __forceinline__ void softmax_forward_warp(
        const T* __restrict__ x, T* __restrict__ y, long long n_rows, int n_cols, int width,
        int n_q, double scale_d, TinyattnMask mk) {
    typedef typename Io<T>::acc A;
    const A neg_inf = tinyattn_neg_inf(A(0));
    const A scale = A(scale_d);
    const int lane = threadIdx.x % width;
    const long long row = (long long)blockIdx.x * (blockDim.x / width) + threadIdx.x / width;
    const bool live = row < n_rows;  // dead lanes still join every shuffle
    const int i = (int)(row % n_q);
    const int limit = live ? tinyattn_row_limit(mk, i, n_cols) : 0;  // dead lanes read nothing
    const unsigned char* keep_row = live ? tinyattn_keep_row(mk, row / n_q, i) : nullptr;
    const T* x_row = x + row * n_cols;

    A v[E];
    tinyattn_scores<T, E>(v, x_row, lane, width, limit, keep_row, mk, scale);
    A m = neg_inf;
#pragma unroll
    for (int k = 0; k < E; ++k) m = tinyattn_max_nan(m, v[k]);
    for (int o = width / 2; o > 0; o /= 2)
        m = tinyattn_max_nan(m, __shfl_xor_sync(TINYATTN_FULL_MASK, m, o, width));
    const A m_safe = m == neg_inf ? A(0) : m;  // a fully masked row: every exp is 0
    A l = A(0);
#pragma unroll
    for (int k = 0; k < E; ++k) {
        v[k] = tinyattn_exp_diff(v[k], m_safe);
        l += v[k];
    }
    for (int o = width / 2; o > 0; o /= 2) l += __shfl_xor_sync(TINYATTN_FULL_MASK, l, o, width);
    const A inv = l == A(0) ? A(0) : A(1) / l;  // l = 0: fully masked; l NaN: a NaN score
    if (!live) return;
    T* y_row = y + row * n_cols;
#pragma unroll
    for (int k = 0; k < E; ++k) {
        const int j = lane + k * width;
        if (j < n_cols) Io<T>::store(y_row, j, v[k] * inv);
    }
}

// ---- block-wide reductions (blockDim.x a multiple of 32, at most 1024) -----------------------

template <typename A>
__device__ __forceinline__ void block_merge_ml(A& m, A& l) {
    __shared__ A sm[32], sl[32];
    for (int o = 16; o > 0; o /= 2) {
        const A m2 = __shfl_xor_sync(TINYATTN_FULL_MASK, m, o);
        const A l2 = __shfl_xor_sync(TINYATTN_FULL_MASK, l, o);
        tinyattn_online_merge(m, l, m2, l2);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    if (lane == 0) { sm[warp] = m; sl[warp] = l; }
    __syncthreads();
    if (warp == 0) {
        m = lane < n_warps ? sm[lane] : tinyattn_neg_inf(A(0));
        l = lane < n_warps ? sl[lane] : A(0);
        for (int o = 16; o > 0; o /= 2) {
            const A m2 = __shfl_xor_sync(TINYATTN_FULL_MASK, m, o);
            const A l2 = __shfl_xor_sync(TINYATTN_FULL_MASK, l, o);
            tinyattn_online_merge(m, l, m2, l2);
        }
        if (lane == 0) { sm[0] = m; sl[0] = l; }
    }
    __syncthreads();
    m = sm[0];
    l = sl[0];
}

template <typename A>
__device__ __forceinline__ A block_sum(A s) {
    __shared__ A part[32];
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(TINYATTN_FULL_MASK, s, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < n_warps ? part[lane] : A(0);
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(TINYATTN_FULL_MASK, s, o);
        if (lane == 0) part[0] = s;
    }
    __syncthreads();
    return part[0];
}

// ---- forward: block per row, online (m, l) ---------------------------------------------------

template <typename T>
__device__ __forceinline__ void softmax_forward_block(
        const T* __restrict__ x, T* __restrict__ y, int n_cols, int n_q, double scale_d,
        TinyattnMask mk, int cache_row) {
    typedef typename Io<T>::acc A;
    extern __shared__ __align__(16) unsigned char tinyattn_smem[];
    A* cache = reinterpret_cast<A*>(tinyattn_smem);  // n_cols values when cache_row
    const A scale = A(scale_d);
    const long long row = blockIdx.x;
    const int i = (int)(row % n_q);
    const int limit = tinyattn_row_limit(mk, i, n_cols);
    const unsigned char* keep_row = tinyattn_keep_row(mk, row / n_q, i);
    const T* x_row = x + row * n_cols;

    const A neg_inf = tinyattn_neg_inf(A(0));
    const int step = TINYATTN_BLOCK_UNROLL * blockDim.x;
    A m = neg_inf, l = A(0);
    for (int j0 = threadIdx.x; j0 < n_cols; j0 += step) {
        A s[TINYATTN_BLOCK_UNROLL];  // -inf past the row: pushing it changes nothing
        tinyattn_scores<T, TINYATTN_BLOCK_UNROLL>(s, x_row, j0, blockDim.x, limit, keep_row, mk,
                                                  scale);
#pragma unroll
        for (int u = 0; u < TINYATTN_BLOCK_UNROLL; ++u) {
            if (cache_row && j0 + u * blockDim.x < n_cols) cache[j0 + u * blockDim.x] = s[u];
            tinyattn_online_push(m, l, s[u]);
        }
    }
    block_merge_ml(m, l);  // its barriers also publish the cached row
    const A m_safe = m == neg_inf ? A(0) : m;
    const A inv = l == A(0) ? A(0) : A(1) / l;  // l = 0: fully masked; l NaN: a NaN score
    T* y_row = y + row * n_cols;
    for (int j0 = threadIdx.x; j0 < n_cols; j0 += step) {
        A s[TINYATTN_BLOCK_UNROLL];
        if (cache_row) {
#pragma unroll
            for (int u = 0; u < TINYATTN_BLOCK_UNROLL; ++u) {
                const int j = j0 + u * blockDim.x;
                s[u] = j < n_cols ? cache[j] : neg_inf;
            }
        } else {
            tinyattn_scores<T, TINYATTN_BLOCK_UNROLL>(s, x_row, j0, blockDim.x, limit, keep_row,
                                                      mk, scale);
        }
#pragma unroll
        for (int u = 0; u < TINYATTN_BLOCK_UNROLL; ++u)
            if (j0 + u * blockDim.x < n_cols)
                Io<T>::store(y_row, j0 + u * blockDim.x, tinyattn_exp_diff(s[u], m_safe) * inv);
    }
}

// ---- backward: gx = scale * (y * (g - sum(g * y))) ------------------------------------------

template <typename T, int E>
__device__ __forceinline__ void softmax_backward_warp(
        const T* __restrict__ y, const T* __restrict__ g, T* __restrict__ gx, long long n_rows,
        int n_cols, int width, int n_q, int causal, double scale_d) {
    typedef typename Io<T>::acc A;
    const A scale = A(scale_d);
    const int lane = threadIdx.x % width;
    const long long row = (long long)blockIdx.x * (blockDim.x / width) + threadIdx.x / width;
    const bool live = row < n_rows;
    const int limit = causal ? min(n_cols, (int)(row % n_q) + 1) : n_cols;  // y = 0 past it
    const long long base = row * n_cols;
    A yv[E], gv[E];
    A dot = A(0);
#pragma unroll
    for (int k = 0; k < E; ++k) {
        const int j = lane + k * width;
        const bool in = live && j < limit;
        yv[k] = in ? Io<T>::load(y, base + j) : A(0);
        gv[k] = in ? Io<T>::load(g, base + j) : A(0);
        dot += yv[k] * gv[k];
    }
    for (int o = width / 2; o > 0; o /= 2) dot += __shfl_xor_sync(TINYATTN_FULL_MASK, dot, o, width);
    if (!live) return;
#pragma unroll
    for (int k = 0; k < E; ++k) {
        const int j = lane + k * width;
        if (j < n_cols) Io<T>::store(gx, base + j, yv[k] * (gv[k] - dot) * scale);
    }
}

// y[j] and g[j] for this thread's next TINYATTN_BLOCK_UNROLL columns j = j0 + u * blockDim.x,
// 0 from j = limit on; all loads issued before any is used.
template <typename T, typename A>
__device__ __forceinline__ void block_load_pair(A (&yv)[TINYATTN_BLOCK_UNROLL],
                                                A (&gv)[TINYATTN_BLOCK_UNROLL], const T* y,
                                                const T* g, long long base, int j0, int limit) {
#pragma unroll
    for (int u = 0; u < TINYATTN_BLOCK_UNROLL; ++u) {
        const int j = j0 + u * blockDim.x;
        yv[u] = j < limit ? Io<T>::load(y, base + j) : A(0);
        gv[u] = j < limit ? Io<T>::load(g, base + j) : A(0);
    }
}

template <typename T>
__device__ __forceinline__ void softmax_backward_block(
        const T* __restrict__ y, const T* __restrict__ g, T* __restrict__ gx, int n_cols,
        int n_q, int causal, double scale_d, int cache_row) {
    typedef typename Io<T>::acc A;
    extern __shared__ __align__(16) unsigned char tinyattn_smem[];
    A* cache_y = reinterpret_cast<A*>(tinyattn_smem);  // y and g of the row when cache_row
    A* cache_g = cache_y + n_cols;
    const A scale = A(scale_d);
    const long long row = blockIdx.x;
    const int limit = causal ? min(n_cols, (int)(row % n_q) + 1) : n_cols;
    const long long base = row * n_cols;
    const int step = TINYATTN_BLOCK_UNROLL * blockDim.x;
    A dot = A(0);
    for (int j0 = threadIdx.x; j0 < limit; j0 += step) {
        A yv[TINYATTN_BLOCK_UNROLL], gv[TINYATTN_BLOCK_UNROLL];
        block_load_pair(yv, gv, y, g, base, j0, limit);
#pragma unroll
        for (int u = 0; u < TINYATTN_BLOCK_UNROLL; ++u) {
            const int j = j0 + u * blockDim.x;
            if (j < limit) {
                dot += yv[u] * gv[u];
                if (cache_row) {
                    cache_y[j] = yv[u];
                    cache_g[j] = gv[u];
                }
            }
        }
    }
    dot = block_sum(dot);  // its barriers also publish the cached row
    for (int j0 = threadIdx.x; j0 < n_cols; j0 += step) {
        A yv[TINYATTN_BLOCK_UNROLL], gv[TINYATTN_BLOCK_UNROLL];
        if (cache_row) {
#pragma unroll
            for (int u = 0; u < TINYATTN_BLOCK_UNROLL; ++u) {
                const int j = j0 + u * blockDim.x;
                yv[u] = j < limit ? cache_y[j] : A(0);
                gv[u] = j < limit ? cache_g[j] : A(0);
            }
        } else {
            block_load_pair(yv, gv, y, g, base, j0, limit);
        }
#pragma unroll
        for (int u = 0; u < TINYATTN_BLOCK_UNROLL; ++u) {
            const int j = j0 + u * blockDim.x;
            if (j < n_cols)
                Io<T>::store(gx, base + j, j < limit ? yv[u] * (gv[u] - dot) * scale : A(0));
        }
    }
}

// ---- the entry points CuPy looks up by name --------------------------------------------------

#define TINYATTN_MASK_ARGS \
    int causal, const unsigned char* keep, long long ks_b, long long ks_i, long long ks_j
#define TINYATTN_MASK {causal, keep, ks_b, ks_i, ks_j}

#define TINYATTN_SOFTMAX_WARP(E, T, SUF)                                                      \
    extern "C" __global__ void __launch_bounds__(128) tinyattn_softmax_forward_warp##E##_##SUF( \
            const T* x, T* y, long long n_rows, int n_cols, int width, int n_q, double scale, \
            TINYATTN_MASK_ARGS) {                                                           \
        softmax_forward_warp<T, E>(x, y, n_rows, n_cols, width, n_q, scale, TINYATTN_MASK);   \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(128) tinyattn_softmax_backward_warp##E##_##SUF( \
            const T* y, const T* g, T* gx, long long n_rows, int n_cols, int width, int n_q,  \
            int causal, double scale) {                                                       \
        softmax_backward_warp<T, E>(y, g, gx, n_rows, n_cols, width, n_q, causal, scale);     \
    }

#define TINYATTN_SOFTMAX_ALL(T, SUF)                                                          \
    TINYATTN_SOFTMAX_WARP(1, T, SUF)                                                          \
    TINYATTN_SOFTMAX_WARP(2, T, SUF)                                                          \
    TINYATTN_SOFTMAX_WARP(4, T, SUF)                                                          \
    TINYATTN_SOFTMAX_WARP(8, T, SUF)                                                          \
    TINYATTN_SOFTMAX_WARP(16, T, SUF)                                                         \
    TINYATTN_SOFTMAX_WARP(32, T, SUF)                                                         \
    extern "C" __global__ void __launch_bounds__(1024) tinyattn_softmax_forward_block_##SUF(  \
            const T* x, T* y, int n_cols, int n_q, double scale, TINYATTN_MASK_ARGS,          \
            int cache_row) {                                                                  \
        softmax_forward_block<T>(x, y, n_cols, n_q, scale, TINYATTN_MASK, cache_row);         \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(1024) tinyattn_softmax_backward_block_##SUF( \
            const T* y, const T* g, T* gx, int n_cols, int n_q, int causal, double scale,     \
            int cache_row) {                                                                  \
        softmax_backward_block<T>(y, g, gx, n_cols, n_q, causal, scale, cache_row);           \
    }

TINYATTN_SOFTMAX_ALL(float, f32)
TINYATTN_SOFTMAX_ALL(double, f64)
TINYATTN_SOFTMAX_ALL(tinyattn_half, f16)
