// softmax.cu - fused softmax kernels over the last (contiguous) axis, forward and backward.
//
// One forward and one backward serve plain softmax and the scaled masked softmax of attention:
// y = softmax(scale * x) with keys j > i masked when `causal` (row r is query i = r % n_q) and
// where an optional uint8 `keep` mask is 0. Masked scores are -inf; a row with nothing left
// gives zeros. Causal rows read no vector that starts past the diagonal and write zeros there.
//
// Rows move in vectors of V adjacent values: V = 1 (scalar loads), or 16 bytes (4 float,
// 8 half, 2 double) when the row length and every pointer are multiples of 16 bytes (the host
// checks; kernels named ...x4, ...x8, ...x2). A 16-byte access moves 4 to 8 times the bytes of
// a scalar one per instruction, which float16 rows need to get near the memory's bandwidth.
// Two shapes of kernel, chosen by the host from the row length n (cuda_launch.softmax_launch):
//   warp kernels  (n <= 1024): a group of `width` lanes per row, each lane keeping E values in
//                 registers, E * width = pow2(n) (width = min(32, pow2(n) / V): at least one
//                 vector per lane); lane l holds the vectors l, l + width, ..., i.e. columns
//                 (l + k * width) * V + t. Max and sum are butterfly shuffles. 1 read + 1 write.
//                 A lane loads all its raw vectors (and mask bytes) first, predicated on the
//                 causal limit, and only then masks and scales them, so its loads are in
//                 flight together (a masked load per element would wait for the branch before).
//                 128 threads per block, 128 / width rows per block.
//   block kernels (n > 1024): one block per row. Each thread walks the vectors tid, tid + B, ...
//                 (4 of them loaded before any is used; 2 of float16's 8-wide ones) with the online (m, l) recurrence, then
//                 the block merges the pairs (warp butterfly, then warp 0 over the per-warp
//                 pairs). The row is kept in dynamic shared memory when the host gives enough
//                 of it (else it is read twice).
// Backward: gx = scale * (y * (g - sum(g * y))), the same two shapes, the sum reduced the same
// way; the block kernel keeps y and g in shared memory the same way (cache_row).
// Every exponential e^(s - m) is exp2((s - m) log2 e) (tinyattn_exp_diff): one ex2.approx,
// not the accurate expf's longer sequence.
// A row with a NaN among its unmasked scores comes out all NaN (l is NaN, and 1 / l is used
// whenever l != 0); a fully masked row (l = 0) comes out zeros, as in the NumPy reference.
// Compute type: float32 for float16/float32 data, float64 for float64.
// tests/support/kernel_refs.py replays each kernel's order of operations in NumPy (not bit
// for bit: nvcc contracts multiply-adds to FMA and ex2.approx is not NumPy's exp2).
// Checked by compiling them (nvcc, NVRTC, ptxas), by running their source in
// tests/support/cuda_emu.py (races, barriers, shuffles, bounds, alignment, unwritten shared
// memory), and on an H100 (docs/benchmarks.md, GPU section: speed, compute-sanitizer).
#include "tinyattn_common.cuh"

#define TINYATTN_FULL_MASK 0xffffffffu
// Block kernels read this many columns per thread before using any of them, so that each
// thread has that many loads in flight (one at a time leaves a long row far from bandwidth).
// The host caps a row at 2^31 - 1 - 4 * 1024 * 8 columns so that a column index
// (c0 + u * blockDim.x) * V + t, and c0 + 4 * blockDim.x, stay within int
// (cuda_launch.SOFTMAX_MAX_COLS).
#define TINYATTN_BLOCK_UNROLL 4

// s[k * V + t] = the scaled, masked score of column (c0 + k * stride) * V + t, -inf where
// masked or past `limit` (c0 and stride count vectors of V columns). Every raw vector and mask
// byte is loaded first (a vector only when its first column is below `limit`; it may reach up
// to V - 1 columns past it, never past the row, whose length is a multiple of V), and only
// then masked and scaled: the loads of a thread are in flight together instead of each
// waiting for the previous column's branch.
template <typename T, int N, int V>
__device__ __forceinline__ void tinyattn_scores(
        typename Io<T>::acc (&s)[N], const T* x_row, int c0, int stride, int limit,
        const unsigned char* keep_row, const TinyattnMask& mk, typename Io<T>::acc scale) {
    typedef typename Io<T>::acc A;
    TinyattnVec<T, V> raw[N / V];
    unsigned char kp[N];
#pragma unroll
    for (int k = 0; k < N / V; ++k) {
        const int j = (c0 + k * stride) * V;
        raw[k] = j < limit ? *reinterpret_cast<const TinyattnVec<T, V>*>(x_row + j)
                           : TinyattnVec<T, V>{};
#pragma unroll
        for (int t = 0; t < V; ++t)
            kp[k * V + t] = j + t < limit && keep_row ? keep_row[(j + t) * mk.ks_j]
                                                      : (unsigned char)1;
    }
#pragma unroll
    for (int k = 0; k < N / V; ++k)
#pragma unroll
        for (int t = 0; t < V; ++t)
            s[k * V + t] = (c0 + k * stride) * V + t < limit && kp[k * V + t]
                               ? Io<T>::convert(raw[k].v[t]) * scale
                               : tinyattn_neg_inf(A(0));
}

// Store vals[t] (compute type) at columns j ... j + V - 1 of `row` with one vector access.
template <typename T, int V>
__device__ __forceinline__ void tinyattn_store_vec(T* row, int j,
                                                   const typename Io<T>::acc (&vals)[V]) {
    TinyattnVec<T, V> w;
#pragma unroll
    for (int t = 0; t < V; ++t) w.v[t] = Io<T>::pack(vals[t]);
    *reinterpret_cast<TinyattnVec<T, V>*>(row + j) = w;
}

// V values of a row from column j into the compute type, 0 where j + t >= limit (a vector is
// loaded only when j < limit).
template <typename T, int V>
__device__ __forceinline__ void tinyattn_load_vec(typename Io<T>::acc (&out)[V], const T* row,
                                                  int j, int limit) {
    typedef typename Io<T>::acc A;
    const TinyattnVec<T, V> w = j < limit ? *reinterpret_cast<const TinyattnVec<T, V>*>(row + j)
                                          : TinyattnVec<T, V>{};
#pragma unroll
    for (int t = 0; t < V; ++t) out[t] = j + t < limit ? Io<T>::convert(w.v[t]) : A(0);
}

// V compute-type values at cache[j ...] (shared memory, j a multiple of V): as 16-byte pieces
// when V fills them, so a warp's accesses are 16 bytes a lane and do not pile onto a few banks
// (a lane's scalars 4 or 8 floats apart would).
template <typename A, int V>
__device__ __forceinline__ void tinyattn_smem_put(A* cache, int j, const A* vals) {
    constexpr int W = V * sizeof(A) >= 16 ? 16 / sizeof(A) : 1;
#pragma unroll
    for (int p = 0; p < V / W; ++p) {
        TinyattnVec<A, W> w;
#pragma unroll
        for (int t = 0; t < W; ++t) w.v[t] = vals[p * W + t];
        *reinterpret_cast<TinyattnVec<A, W>*>(cache + j + p * W) = w;
    }
}

template <typename A, int V>
__device__ __forceinline__ void tinyattn_smem_get(A* vals, const A* cache, int j) {
    constexpr int W = V * sizeof(A) >= 16 ? 16 / sizeof(A) : 1;
#pragma unroll
    for (int p = 0; p < V / W; ++p) {
        const TinyattnVec<A, W> w = *reinterpret_cast<const TinyattnVec<A, W>*>(cache + j + p * W);
#pragma unroll
        for (int t = 0; t < W; ++t) vals[p * W + t] = w.v[t];
    }
}

// The row's query index i = row % n_q and its mask row, computed only when a mask needs them
// (64-bit division costs more than a short row's whole softmax).
__device__ __forceinline__ int tinyattn_query_of(const TinyattnMask& mk, long long row, int n_q) {
    return mk.causal || mk.keep ? (int)(row % n_q) : 0;
}

// ---- forward: warp per row, the row in registers ---------------------------------------------

template <typename T, int E, int V>
__device__ __forceinline__ void softmax_forward_warp(
        const T* __restrict__ x, T* __restrict__ y, long long n_rows, int n_cols, int width,
        int n_q, double scale_d, TinyattnMask mk) {
    typedef typename Io<T>::acc A;
    const A neg_inf = tinyattn_neg_inf(A(0));
    const A scale = A(scale_d);
    const int lane = threadIdx.x % width;
    const long long row = (long long)blockIdx.x * (blockDim.x / width) + threadIdx.x / width;
    const bool live = row < n_rows;  // dead lanes still join every shuffle
    const int i = tinyattn_query_of(mk, row, n_q);
    const int limit = live ? tinyattn_row_limit(mk, i, n_cols) : 0;  // dead lanes read nothing
    const unsigned char* keep_row = live && mk.keep ? tinyattn_keep_row(mk, row / n_q, i)
                                                    : nullptr;
    const T* x_row = x + row * n_cols;

    A v[E];
    tinyattn_scores<T, E, V>(v, x_row, lane, width, limit, keep_row, mk, scale);
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
    for (int k = 0; k < E / V; ++k) {
        const int j = (lane + k * width) * V;
        A out[V];
#pragma unroll
        for (int t = 0; t < V; ++t) out[t] = v[k * V + t] * inv;
        if (j < n_cols) tinyattn_store_vec<T, V>(y_row, j, out);
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

// Vectors a block-kernel thread loads per step before using any: 4 scalars or float vectors,
// 2 float16 or float64 vectors, so that a step's values stay in the registers a 1024-thread
// block allows (64 a thread) instead of spilling
template <int V>
struct BlockSteps {
    static constexpr int U = V == 1 || V == 4 ? TINYATTN_BLOCK_UNROLL : 2;
};

template <typename T, int V>
__device__ __forceinline__ void softmax_forward_block(
        const T* __restrict__ x, T* __restrict__ y, int n_cols, int n_q, double scale_d,
        TinyattnMask mk, int cache_row) {
    typedef typename Io<T>::acc A;
    constexpr int U = BlockSteps<V>::U, N = U * V;  // vectors, values a thread takes per step
    extern __shared__ __align__(16) unsigned char tinyattn_smem[];
    A* cache = reinterpret_cast<A*>(tinyattn_smem);  // n_cols values when cache_row
    const A scale = A(scale_d);
    const long long row = blockIdx.x;
    const int i = tinyattn_query_of(mk, row, n_q);
    const int limit = tinyattn_row_limit(mk, i, n_cols);
    const unsigned char* keep_row = mk.keep ? tinyattn_keep_row(mk, row / n_q, i) : nullptr;
    const T* x_row = x + row * n_cols;

    const A neg_inf = tinyattn_neg_inf(A(0));
    const int step = U * blockDim.x;  // in vectors of V columns
    A m = neg_inf, l = A(0);
    for (int c0 = threadIdx.x; c0 * V < n_cols; c0 += step) {
        A s[N];  // -inf past the row: pushing it changes nothing
        tinyattn_scores<T, N, V>(s, x_row, c0, blockDim.x, limit, keep_row, mk, scale);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int j = (c0 + u * blockDim.x) * V;
            if (cache_row && j < n_cols) tinyattn_smem_put<A, V>(cache, j, s + u * V);
#pragma unroll
            for (int t = 0; t < V; ++t) tinyattn_online_push(m, l, s[u * V + t]);
        }
    }
    block_merge_ml(m, l);  // its barriers also publish the cached row
    const A m_safe = m == neg_inf ? A(0) : m;
    const A inv = l == A(0) ? A(0) : A(1) / l;  // l = 0: fully masked; l NaN: a NaN score
    T* y_row = y + row * n_cols;
    for (int c0 = threadIdx.x; c0 * V < n_cols; c0 += step) {
        A s[N];
        if (cache_row) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int j = (c0 + u * blockDim.x) * V;
                if (j < n_cols) tinyattn_smem_get<A, V>(s + u * V, cache, j);
            }
        } else {
            tinyattn_scores<T, N, V>(s, x_row, c0, blockDim.x, limit, keep_row, mk, scale);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int j = (c0 + u * blockDim.x) * V;
            A out[V];
#pragma unroll
            for (int t = 0; t < V; ++t) out[t] = tinyattn_exp_diff(s[u * V + t], m_safe) * inv;
            if (j < n_cols) tinyattn_store_vec<T, V>(y_row, j, out);
        }
    }
}

// ---- backward: gx = scale * (y * (g - sum(g * y))) ------------------------------------------

template <typename T, int E, int V>
__device__ __forceinline__ void softmax_backward_warp(
        const T* __restrict__ y, const T* __restrict__ g, T* __restrict__ gx, long long n_rows,
        int n_cols, int width, int n_q, int causal, double scale_d) {
    typedef typename Io<T>::acc A;
    const A scale = A(scale_d);
    const int lane = threadIdx.x % width;
    const long long row = (long long)blockIdx.x * (blockDim.x / width) + threadIdx.x / width;
    const bool live = row < n_rows;
    // y = 0 past the causal limit, so it is not read there; dead lanes read nothing
    const int limit = !live ? 0 : causal ? min(n_cols, (int)(row % n_q) + 1) : n_cols;
    const long long base = row * n_cols;
    A yv[E / V][V], gv[E / V][V];
#pragma unroll
    for (int k = 0; k < E / V; ++k) {
        const int j = (lane + k * width) * V;
        tinyattn_load_vec<T, V>(yv[k], y + base, j, limit);
        tinyattn_load_vec<T, V>(gv[k], g + base, j, limit);
    }
    A dot = A(0);
#pragma unroll
    for (int k = 0; k < E / V; ++k)
#pragma unroll
        for (int t = 0; t < V; ++t) dot += yv[k][t] * gv[k][t];
    for (int o = width / 2; o > 0; o /= 2) dot += __shfl_xor_sync(TINYATTN_FULL_MASK, dot, o, width);
    if (!live) return;
#pragma unroll
    for (int k = 0; k < E / V; ++k) {
        const int j = (lane + k * width) * V;
        A out[V];
#pragma unroll
        for (int t = 0; t < V; ++t) out[t] = yv[k][t] * (gv[k][t] - dot) * scale;
        if (j < n_cols) tinyattn_store_vec<T, V>(gx + base, j, out);
    }
}

template <typename T, int V>
__device__ __forceinline__ void softmax_backward_block(
        const T* __restrict__ y, const T* __restrict__ g, T* __restrict__ gx, int n_cols,
        int n_q, int causal, double scale_d, int cache_row) {
    typedef typename Io<T>::acc A;
    constexpr int U = BlockSteps<V>::U;  // vectors a thread takes per step
    extern __shared__ __align__(16) unsigned char tinyattn_smem[];
    A* cache_y = reinterpret_cast<A*>(tinyattn_smem);  // y and g of the row when cache_row
    A* cache_g = cache_y + n_cols;
    const A scale = A(scale_d);
    const long long row = blockIdx.x;
    const int limit = causal ? min(n_cols, (int)(row % n_q) + 1) : n_cols;
    const T* y_row = y + row * n_cols;
    const T* g_row = g + row * n_cols;
    const int step = U * blockDim.x;  // in vectors of V columns
    A dot = A(0);
    for (int c0 = threadIdx.x; c0 * V < limit; c0 += step) {
        A yv[U][V], gv[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) {  // every load before any use; 0 from the limit on
            tinyattn_load_vec<T, V>(yv[u], y_row, (c0 + u * blockDim.x) * V, limit);
            tinyattn_load_vec<T, V>(gv[u], g_row, (c0 + u * blockDim.x) * V, limit);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int j = (c0 + u * blockDim.x) * V;
            if (j >= limit) continue;
#pragma unroll
            for (int t = 0; t < V; ++t) dot += yv[u][t] * gv[u][t];
            if (cache_row) {  // the whole vector: zeros past the limit
                tinyattn_smem_put<A, V>(cache_y, j, yv[u]);
                tinyattn_smem_put<A, V>(cache_g, j, gv[u]);
            }
        }
    }
    dot = block_sum(dot);  // its barriers also publish the cached row
    T* gx_row = gx + row * n_cols;
    for (int c0 = threadIdx.x; c0 * V < n_cols; c0 += step) {
        A yv[U][V], gv[U][V];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int j = (c0 + u * blockDim.x) * V;
            if (!cache_row) {
                tinyattn_load_vec<T, V>(yv[u], y_row, j, limit);
                tinyattn_load_vec<T, V>(gv[u], g_row, j, limit);
            } else if (j < limit) {  // cached by the first pass
                tinyattn_smem_get<A, V>(yv[u], cache_y, j);
                tinyattn_smem_get<A, V>(gv[u], cache_g, j);
            } else {
#pragma unroll
                for (int t = 0; t < V; ++t) yv[u][t] = gv[u][t] = A(0);
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int j = (c0 + u * blockDim.x) * V;
            A out[V];
#pragma unroll
            for (int t = 0; t < V; ++t)  // y and g are 0 past the limit: so is gx
                out[t] = yv[u][t] * (gv[u][t] - dot) * scale;
            if (j < n_cols) tinyattn_store_vec<T, V>(gx_row, j, out);
        }
    }
}

// ---- the entry points CuPy looks up by name --------------------------------------------------

#define TINYATTN_MASK_ARGS \
    int causal, const unsigned char* keep, long long ks_b, long long ks_i, long long ks_j
#define TINYATTN_MASK {causal, keep, ks_b, ks_i, ks_j}

// NAME is E for scalar rows (V = 1) and ExV for vector rows: warp8_f32, warp8x4_f32
#define TINYATTN_SOFTMAX_WARP(NAME, E, V, T, SUF)                                             \
    extern "C" __global__ void __launch_bounds__(128)                                         \
    tinyattn_softmax_forward_warp##NAME##_##SUF(                                              \
            const T* x, T* y, long long n_rows, int n_cols, int width, int n_q, double scale, \
            TINYATTN_MASK_ARGS) {                                                           \
        softmax_forward_warp<T, E, V>(x, y, n_rows, n_cols, width, n_q, scale, TINYATTN_MASK); \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(128)                                         \
    tinyattn_softmax_backward_warp##NAME##_##SUF(                                             \
            const T* y, const T* g, T* gx, long long n_rows, int n_cols, int width, int n_q,  \
            int causal, double scale) {                                                       \
        softmax_backward_warp<T, E, V>(y, g, gx, n_rows, n_cols, width, n_q, causal, scale);  \
    }

// NAME is empty for scalar rows and xV for vector rows: block_f32, blockx4_f32
#define TINYATTN_SOFTMAX_BLOCK(NAME, V, T, SUF)                                               \
    extern "C" __global__ void __launch_bounds__(1024) tinyattn_softmax_forward_block##NAME##_##SUF( \
            const T* x, T* y, int n_cols, int n_q, double scale, TINYATTN_MASK_ARGS,          \
            int cache_row) {                                                                  \
        softmax_forward_block<T, V>(x, y, n_cols, n_q, scale, TINYATTN_MASK, cache_row);      \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(1024)                                        \
    tinyattn_softmax_backward_block##NAME##_##SUF(                                            \
            const T* y, const T* g, T* gx, int n_cols, int n_q, int causal, double scale,     \
            int cache_row) {                                                                  \
        softmax_backward_block<T, V>(y, g, gx, n_cols, n_q, causal, scale, cache_row);        \
    }

// every kernel of one storage type; VN is its vector width (16 bytes: 4 float, 2 double,
// 8 half), kernels with E >= VN values per lane come in a vector version too
#define TINYATTN_SOFTMAX_ALL(T, SUF, VN)                                                      \
    TINYATTN_SOFTMAX_WARP(1, 1, 1, T, SUF)                                                    \
    TINYATTN_SOFTMAX_WARP(2, 2, 1, T, SUF)                                                    \
    TINYATTN_SOFTMAX_WARP(4, 4, 1, T, SUF)                                                    \
    TINYATTN_SOFTMAX_WARP(8, 8, 1, T, SUF)                                                    \
    TINYATTN_SOFTMAX_WARP(16, 16, 1, T, SUF)                                                  \
    TINYATTN_SOFTMAX_WARP(32, 32, 1, T, SUF)                                                  \
    TINYATTN_SOFTMAX_BLOCK(, 1, T, SUF)                                                       \
    TINYATTN_SOFTMAX_BLOCK(x##VN, VN, T, SUF)


TINYATTN_SOFTMAX_ALL(float, f32, 4)
TINYATTN_SOFTMAX_WARP(4x4, 4, 4, float, f32)
TINYATTN_SOFTMAX_WARP(8x4, 8, 4, float, f32)
TINYATTN_SOFTMAX_WARP(16x4, 16, 4, float, f32)
TINYATTN_SOFTMAX_WARP(32x4, 32, 4, float, f32)
TINYATTN_SOFTMAX_ALL(double, f64, 2)
TINYATTN_SOFTMAX_WARP(2x2, 2, 2, double, f64)
TINYATTN_SOFTMAX_WARP(4x2, 4, 2, double, f64)
TINYATTN_SOFTMAX_WARP(8x2, 8, 2, double, f64)
TINYATTN_SOFTMAX_WARP(16x2, 16, 2, double, f64)
TINYATTN_SOFTMAX_WARP(32x2, 32, 2, double, f64)
TINYATTN_SOFTMAX_ALL(tinyattn_half, f16, 8)
TINYATTN_SOFTMAX_WARP(8x8, 8, 8, tinyattn_half, f16)
TINYATTN_SOFTMAX_WARP(16x8, 16, 8, tinyattn_half, f16)
TINYATTN_SOFTMAX_WARP(32x8, 32, 8, tinyattn_half, f16)
