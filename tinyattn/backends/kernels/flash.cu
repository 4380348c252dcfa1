// flash.cu - flash attention forward and backward (FlashAttention-2 layout, SIMT float32).
//
// Shapes: q (N, T, D), k (N, S, D), v (N, S, D), contiguous; D in {16, 32, 64, 128} is a
// template argument. Storage float32 or float16 (float16 converted when a tile is stored to
// shared memory); all arithmetic float32. Scores are scale * q.k; keys j > i are masked when
// `causal` (aligned top-left, as in Backend.causal_keep), and where the optional uint8 mask
// `keep` (element strides ks_*) is 0. A query row with nothing to attend gives out = 0,
// lse = -inf and zero gradients; a row with a NaN score gives out = NaN and lse = NaN (the
// running max propagates NaN), as the NumPy reference does.
//
// Every block has 256 threads seen as a 16 x 16 grid (tx = tid % 16, ty = tid / 16). In a
// score tile a thread owns the rows ty, ty + 16, ... and the columns tx, tx + 16, ..., so the
// 16 threads of one row are 16 consecutive lanes of one warp: row reductions are 4-step
// butterfly shuffles of width 16. In a tile with D columns (output, dQ, dK, dV) a thread owns
// the C = D / 16 adjacent columns tx * C ... tx * C + C - 1.
//
// Shared memory: every tile is float32, rows padded to D + 4 (and BK + 4) floats. The padding
// keeps each row 16-byte aligned, so the inner loops read 4 (or C) adjacent floats with one
// vector load, and puts the 16 rows that one warp reads at the same column in different banks.
// At D = 64 the inner loops issue one shared-load instruction per 5.3 to 8 fused multiply-adds
// (benchmarks/kernel_sass.py reads it off the machine code), where scalar loads gave 1.3 to 2;
// per shared-memory cycle that is less (a 128-bit load whose warp reads 16 distinct rows costs
// at least 2 cycles), see docs/kernels.md. Tiles are fetched one step ahead into registers
// (FlashTiles), as raw stored values: the loads of the next K/V (backward: Q/dO) tile are in
// flight while the block computes on the current one, and float16 is converted only when the
// tile is stored to shared memory.
// Checked by compiling them (nvcc, NVRTC, ptxas), by running their source in
// tests/support/cuda_emu.py, and on an H100 and an H200 (GPU tests, compute-sanitizer). FP32 FMA
// without tensor cores: 19-26 TFLOP/s forward and 15-24 backward on the H200 (causal, d = 64,
// T = 512-4096; docs/benchmarks.md); an mma.sync/ldmatrix path is future work.
//
// Forward, a 1-D grid of N * ceil(T / BQ) blocks (x alone may exceed 65535: y and z may
// not), block x = batch b + N * (tiles from the last), so the last query tiles (the longest,
// when causal) are scheduled first: the block keeps its BQ queries in shared memory and streams the key/value tiles past
// them (causal: only tiles left of the diagonal). Per tile: S = scale Q Kᵀ (register
// micro-tiles of BQ/16 x BK/16 per thread), the row max by shuffle, p = exp(s - m_new), the
// running output and each thread's partial row sum rescaled by alpha = exp(m_old - m_new),
// P through shared memory, acc += P V. At the end the 16 partial sums of a row are added by
// shuffle (l), then out = acc / l and lse = m + log l.
//
// Backward, a 1-D grid of N * ceil(S / BK) blocks, block x = batch b + N * key tile, so the
// first key tiles (the longest, when causal) are scheduled first: the block owns BK keys (K, V tiles in shared memory, dK and dV accumulators in
// registers, keys ty * BK/16 ... of them per thread) and walks the query tiles (causal: from
// the diagonal on). Per query tile it recomputes P = exp(S - lse), dP = dO Vᵀ and
// dS = P * (dP - Drow) with Drow = rowsum(dO * O) precomputed by the host, adds Pᵀ dO to dV
// and dSᵀ Q to dK, and adds scale dS K to dQ with float32 atomics (so dQ's summation order
// over key tiles varies). Every dot product adds its terms in index order.
// kernel_refs.py replays the same tiles, the same thread partition of the row sums and the
// same recurrences in NumPy.
#include "tinyattn_common.cuh"

#define TINYATTN_FLASH_THREADS 256
#define TINYATTN_FULL_MASK 0xffffffffu

// N adjacent floats of shared memory, read with one (N = 2, 4) or two (N = 8) vector loads.
// Aligned to at most 16 bytes: that is all a vector load needs, and all a row of D + 4 floats
// guarantees (8 floats at the start of row jj of a D = 128 tile are 16-byte aligned only).
template <int N>
struct alignas(N < 4 ? 4 * N : 16) TinyattnFloats {
    float v[N];
};

template <int N>
__device__ __forceinline__ void flash_lds(float (&dst)[N], const float* src) {
    const TinyattnFloats<N> t = *reinterpret_cast<const TinyattnFloats<N>*>(src);
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = t.v[i];
}

__device__ __forceinline__ bool flash_allowed(const TinyattnMask& mk, long long b, int i, int j,
                                              int n_q, int n_k) {
    if (i >= n_q || j >= n_k) return false;  // padding rows and columns of a partial tile
    if (mk.causal && j > i) return false;
    if (mk.keep && !mk.keep[b * mk.ks_b + (long long)i * mk.ks_i + (long long)j * mk.ks_j])
        return false;
    return true;
}

// A pair of ROWS x D tiles on their way from global memory (rows r0 ... of a and of b, row
// stride D; b may be null) to shared memory (row stride D + 4): fetch() issues every load into
// registers, stash() stores them, zeros past row n. In between, a thread has all its
// (2 *) ROWS * D / 256 loads in flight while the block computes on the tile before.
template <typename T, int D, int ROWS>
struct FlashTiles {
    static constexpr int E = ROWS * D / TINYATTN_FLASH_THREADS;  // per thread and tile
    static constexpr int STEP = TINYATTN_FLASH_THREADS / D;      // rows per pass
    static_assert(E * TINYATTN_FLASH_THREADS == ROWS * D, "a tile must split evenly");
    // pass u holds row threadIdx.x / D + u * STEP, column threadIdx.x % D, as stored (raw
    // 16-bit words for float16: converting right after the load would make the conversion wait
    // for the load, and the compute after it wait for the conversion)
    T av[E], bv[E];

    __device__ __forceinline__ void fetch(const T* a, const T* b, int r0, int n) {
        const int r = threadIdx.x / D;
        const long long at = (long long)(r0 + r) * D + threadIdx.x % D;
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const bool in = r0 + r + u * STEP < n;
            av[u] = in ? a[at + u * TINYATTN_FLASH_THREADS] : T(0);
            if (b) bv[u] = in ? b[at + u * TINYATTN_FLASH_THREADS] : T(0);
        }
    }

    __device__ __forceinline__ void stash(float* a_dst, float* b_dst) const {
        const int r = threadIdx.x / D, c = threadIdx.x % D;
#pragma unroll
        for (int u = 0; u < E; ++u) {
            a_dst[(r + u * STEP) * (D + 4) + c] = Io<T>::convert(av[u]);
            if (b_dst) b_dst[(r + u * STEP) * (D + 4) + c] = Io<T>::convert(bv[u]);
        }
    }
};

// s[a][c] += sum over kk of A[ty + 16a][kk] * B[tx + 16c][kk], kk in order: the score
// micro-tile of one thread, A and B row-major with row stride D + 4.
template <int D, int AR, int AC>
__device__ __forceinline__ void flash_scores(float (&s)[AR][AC], const float* A, const float* B,
                                             int tx, int ty) {
    for (int kk = 0; kk < D; kk += 4) {
        float ar[AR][4], bc[AC][4];
#pragma unroll
        for (int a = 0; a < AR; ++a) flash_lds<4>(ar[a], A + (ty + 16 * a) * (D + 4) + kk);
#pragma unroll
        for (int c = 0; c < AC; ++c) flash_lds<4>(bc[c], B + (tx + 16 * c) * (D + 4) + kk);
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int a = 0; a < AR; ++a)
#pragma unroll
                for (int c = 0; c < AC; ++c) s[a][c] = fmaf(ar[a][u], bc[c][u], s[a][c]);
    }
}

// acc[a][c] += sum over jj < BK of P[ty + 16a][jj] * V[jj][tx * C + c], jj in order: a
// (BQ x BK) times (BK x D) product into the thread's rows and adjacent columns.
template <int D, int BK, int AR>
__device__ __forceinline__ void flash_rows_times(float (&acc)[AR][D / 16], const float* P,
                                                 const float* V, int tx, int ty) {
    constexpr int C = D / 16;
    for (int jj = 0; jj < BK; jj += 4) {
        float pa[AR][4];
#pragma unroll
        for (int a = 0; a < AR; ++a) flash_lds<4>(pa[a], P + (ty + 16 * a) * (BK + 4) + jj);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            float vv[C];
            flash_lds<C>(vv, V + (jj + u) * (D + 4) + tx * C);
#pragma unroll
            for (int a = 0; a < AR; ++a)
#pragma unroll
                for (int c = 0; c < C; ++c) acc[a][c] = fmaf(pa[a][u], vv[c], acc[a][c]);
        }
    }
}

template <typename T, int D, int BQ, int BK>
__device__ __forceinline__ void flash_forward(
        const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
        T* __restrict__ out, float* __restrict__ lse, int n_q, int n_k, float scale,
        TinyattnMask mk) {
    constexpr int DP = D + 4, PP = BK + 4, AQ = BQ / 16, AK = BK / 16, C = D / 16;
    extern __shared__ __align__(16) unsigned char tinyattn_smem[];
    float* Qs = reinterpret_cast<float*>(tinyattn_smem);  // BQ x DP
    float* Ks = Qs + BQ * DP;                              // BK x DP
    float* Vs = Ks + BK * DP;                              // BK x DP
    float* Ps = Vs + BK * DP;                              // BQ x PP
    const float neg_inf = tinyattn_neg_inf(0.f);
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int n_tiles = (n_q + BQ - 1) / BQ;
    const int n_batch = gridDim.x / n_tiles;
    const long long b = blockIdx.x % n_batch;
    const int q0 = (n_tiles - 1 - (int)(blockIdx.x / n_batch)) * BQ;  // the last tiles first
    const T* qb = q + b * n_q * D;
    const T* kb = k + b * n_k * D;
    const T* vb = v + b * n_k * D;

    {
        FlashTiles<T, D, BQ> qt;
        qt.fetch(qb, nullptr, q0, n_q);
        qt.stash(Qs, nullptr);
    }
    float m[AQ], lpart[AQ], acc[AQ][C];
#pragma unroll
    for (int a = 0; a < AQ; ++a) {
        m[a] = neg_inf;
        lpart[a] = 0.f;
#pragma unroll
        for (int c = 0; c < C; ++c) acc[a][c] = 0.f;
    }
    const int k_end = mk.causal ? min(n_k, q0 + BQ) : n_k;  // causal: skip tiles right of it
    FlashTiles<T, D, BK> kv;
    if (k_end > 0) kv.fetch(kb, vb, 0, n_k);
    for (int k0 = 0; k0 < k_end; k0 += BK) {
        __syncthreads();  // the previous tile is no longer read
        kv.stash(Ks, Vs);
        __syncthreads();
        if (k0 + BK < k_end) kv.fetch(kb, vb, k0 + BK, n_k);  // the next tile, meanwhile
        float s[AQ][AK];
#pragma unroll
        for (int a = 0; a < AQ; ++a)
#pragma unroll
            for (int c = 0; c < AK; ++c) s[a][c] = 0.f;
        flash_scores<D>(s, Qs, Ks, tx, ty);
#pragma unroll
        for (int a = 0; a < AQ; ++a) {
            const int i = q0 + ty + 16 * a;
            float mt = neg_inf;
#pragma unroll
            for (int c = 0; c < AK; ++c) {
                const int j = k0 + tx + 16 * c;
                s[a][c] = flash_allowed(mk, b, i, j, n_q, n_k) ? s[a][c] * scale : neg_inf;
                mt = tinyattn_max_nan(mt, s[a][c]);
            }
            for (int o = 8; o > 0; o /= 2)
                mt = tinyattn_max_nan(mt, __shfl_xor_sync(TINYATTN_FULL_MASK, mt, o, 16));
            const float m_new = tinyattn_max_nan(m[a], mt);  // NaN stays: the row comes out NaN
            const float m_safe = m_new == neg_inf ? 0.f : m_new;  // nothing seen yet
            const float alpha = expf(m[a] - m_safe);
            float rs = 0.f;
#pragma unroll
            for (int c = 0; c < AK; ++c) {
                s[a][c] = expf(s[a][c] - m_safe);
                rs += s[a][c];
                Ps[(ty + 16 * a) * PP + tx + 16 * c] = s[a][c];
            }
            lpart[a] = lpart[a] * alpha + rs;
#pragma unroll
            for (int c = 0; c < C; ++c) acc[a][c] *= alpha;
            m[a] = m_new;
        }
        __syncthreads();
        flash_rows_times<D, BK>(acc, Ps, Vs, tx, ty);
    }
#pragma unroll
    for (int a = 0; a < AQ; ++a) {
        float l = lpart[a];
        for (int o = 8; o > 0; o /= 2) l += __shfl_xor_sync(TINYATTN_FULL_MASK, l, o, 16);
        const int i = q0 + ty + 16 * a;
        if (i >= n_q) continue;
        const float inv = l == 0.f ? 0.f : 1.f / l;  // l = 0: nothing to attend; NaN: NaN
        const long long row = (b * n_q + i) * D;
#pragma unroll
        for (int c = 0; c < C; ++c) Io<T>::store(out, row + tx * C + c, acc[a][c] * inv);
        if (tx == 0) lse[b * n_q + i] = l == 0.f ? neg_inf : m[a] + logf(l);
    }
}

template <typename T, int D, int BQ, int BK>
__device__ __forceinline__ void flash_backward(
        const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
        const T* __restrict__ g, const float* __restrict__ lse, const float* __restrict__ drow,
        float* __restrict__ gq, T* __restrict__ gk, T* __restrict__ gv, int n_q, int n_k,
        float scale, TinyattnMask mk) {
    constexpr int DP = D + 4, PP = BK + 4, AQ = BQ / 16, AK = BK / 16, C = D / 16;
    extern __shared__ __align__(16) unsigned char tinyattn_smem[];
    float* Ks = reinterpret_cast<float*>(tinyattn_smem);  // BK x DP
    float* Vs = Ks + BK * DP;                              // BK x DP
    float* Qs = Vs + BK * DP;                              // BQ x DP
    float* Gs = Qs + BQ * DP;                              // BQ x DP   (dO)
    float* Ps = Gs + BQ * DP;                              // BQ x PP
    float* Ss = Ps + BQ * PP;                              // BQ x PP   (dS)
    float* Ls = Ss + BQ * PP;                              // BQ        (lse, 0 where -inf)
    float* Ds = Ls + BQ;                                   // BQ        (rowsum(dO * O))
    const float neg_inf = tinyattn_neg_inf(0.f);
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int n_tiles = (n_k + BK - 1) / BK;
    const int n_batch = gridDim.x / n_tiles;
    const long long b = blockIdx.x % n_batch;
    const int k0 = (int)(blockIdx.x / n_batch) * BK;
    const long long qoff = b * n_q * D, koff = b * n_k * D;

    {
        FlashTiles<T, D, BK> kv;
        kv.fetch(k + koff, v + koff, k0, n_k);
        kv.stash(Ks, Vs);
    }
    float dk[AK][C], dv[AK][C];  // keys ty * AK + a, columns tx * C + c
#pragma unroll
    for (int a = 0; a < AK; ++a)
#pragma unroll
        for (int c = 0; c < C; ++c) dk[a][c] = dv[a][c] = 0.f;

    const int q_start = mk.causal ? (k0 / BQ) * BQ : 0;  // causal: earlier queries see none
    FlashTiles<T, D, BQ> qg;
    if (q_start < n_q) qg.fetch(q + qoff, g + qoff, q_start, n_q);
    for (int q0 = q_start; q0 < n_q; q0 += BQ) {
        __syncthreads();
        qg.stash(Qs, Gs);
        for (int r = threadIdx.x; r < BQ; r += TINYATTN_FLASH_THREADS) {
            const bool in = q0 + r < n_q;
            const float lv = in ? lse[b * n_q + q0 + r] : neg_inf;
            Ls[r] = lv == neg_inf ? 0.f : lv;  // a NaN lse stays NaN: so do the row's grads
            Ds[r] = in ? drow[b * n_q + q0 + r] : 0.f;
        }
        __syncthreads();
        if (q0 + BQ < n_q) qg.fetch(q + qoff, g + qoff, q0 + BQ, n_q);  // the next tile, meanwhile
        // S and dP, rows = queries (ty + 16a), columns = keys (tx + 16c)
        float s[AQ][AK], dp[AQ][AK];
#pragma unroll
        for (int a = 0; a < AQ; ++a)
#pragma unroll
            for (int c = 0; c < AK; ++c) s[a][c] = dp[a][c] = 0.f;
        flash_scores<D>(s, Qs, Ks, tx, ty);
        flash_scores<D>(dp, Gs, Vs, tx, ty);
#pragma unroll
        for (int a = 0; a < AQ; ++a) {
            const int r = ty + 16 * a;
#pragma unroll
            for (int c = 0; c < AK; ++c) {
                const int cc = tx + 16 * c;
                const bool ok = flash_allowed(mk, b, q0 + r, k0 + cc, n_q, n_k);
                // masked: 0, or NaN in a row whose lse is NaN (Ls * 0: the row's probabilities
                // are all NaN, masked ones too, as in the reference, where exp(-inf - NaN))
                const float p = ok ? expf(s[a][c] * scale - Ls[r]) : Ls[r] * 0.f;
                Ps[r * PP + cc] = p;
                Ss[r * PP + cc] = p * (dp[a][c] - Ds[r]);
            }
        }
        __syncthreads();
        // dV += Pᵀ dO and dK += dSᵀ Q: rows = keys (ty * AK + a), columns = tx * C + c
        for (int ii = 0; ii < BQ; ++ii) {
            float pk[AK], sk[AK], gval[C], qval[C];
            flash_lds<AK>(pk, Ps + ii * PP + ty * AK);
            flash_lds<AK>(sk, Ss + ii * PP + ty * AK);
            flash_lds<C>(gval, Gs + ii * DP + tx * C);
            flash_lds<C>(qval, Qs + ii * DP + tx * C);
#pragma unroll
            for (int a = 0; a < AK; ++a)
#pragma unroll
                for (int c = 0; c < C; ++c) {
                    dv[a][c] = fmaf(pk[a], gval[c], dv[a][c]);
                    dk[a][c] = fmaf(sk[a], qval[c], dk[a][c]);
                }
        }
        // dQ += scale dS K: rows = queries (ty + 16a), columns = tx * C + c
        float dq[AQ][C];
#pragma unroll
        for (int a = 0; a < AQ; ++a)
#pragma unroll
            for (int c = 0; c < C; ++c) dq[a][c] = 0.f;
        flash_rows_times<D, BK>(dq, Ss, Ks, tx, ty);
#pragma unroll
        for (int a = 0; a < AQ; ++a) {
            const int i = q0 + ty + 16 * a;
            if (i >= n_q) continue;
#pragma unroll
            for (int c = 0; c < C; ++c)
                atomicAdd(gq + (b * n_q + i) * D + tx * C + c, dq[a][c] * scale);
        }
    }
#pragma unroll
    for (int a = 0; a < AK; ++a) {
        const int j = k0 + ty * AK + a;
        if (j >= n_k) continue;
#pragma unroll
        for (int c = 0; c < C; ++c) {
            Io<T>::store(gk, koff + (long long)j * D + tx * C + c, dk[a][c] * scale);
            Io<T>::store(gv, koff + (long long)j * D + tx * C + c, dv[a][c]);
        }
    }
}

// ---- the entry points CuPy looks up by name --------------------------------------------------
// Tile sizes per head dim (forward BQ x BK, backward BQ x BK); kernel_refs.FLASH_TILES and
// CupyBackend read the same table.
//   D = 16:  forward 64 x 64, backward 64 x 64
//   D = 32:  forward 64 x 64, backward 64 x 64
//   D = 64:  forward 64 x 64, backward 32 x 64
//   D = 128: forward 64 x 32, backward 32 x 32

#define TINYATTN_FLASH(D, FBQ, FBK, BBQ, BBK, T, SUF)                                         \
    extern "C" __global__ void __launch_bounds__(TINYATTN_FLASH_THREADS)                      \
    tinyattn_flash_forward_d##D##_##SUF(const T* q, const T* k, const T* v, T* out,           \
                                        float* lse, int n_q, int n_k, float scale, int causal, \
                                        const unsigned char* keep, long long ks_b,            \
                                        long long ks_i, long long ks_j) {                     \
        flash_forward<T, D, FBQ, FBK>(q, k, v, out, lse, n_q, n_k, scale,                     \
                                      {causal, keep, ks_b, ks_i, ks_j});                      \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(TINYATTN_FLASH_THREADS)                      \
    tinyattn_flash_backward_d##D##_##SUF(const T* q, const T* k, const T* v, const T* g,      \
                                         const float* lse, const float* drow, float* gq,      \
                                         T* gk, T* gv, int n_q, int n_k, float scale,          \
                                         int causal, const unsigned char* keep,               \
                                         long long ks_b, long long ks_i, long long ks_j) {    \
        flash_backward<T, D, BBQ, BBK>(q, k, v, g, lse, drow, gq, gk, gv, n_q, n_k, scale,    \
                                       {causal, keep, ks_b, ks_i, ks_j});                     \
    }

TINYATTN_FLASH(16, 64, 64, 64, 64, float, f32)
TINYATTN_FLASH(32, 64, 64, 64, 64, float, f32)
TINYATTN_FLASH(64, 64, 64, 32, 64, float, f32)
TINYATTN_FLASH(128, 64, 32, 32, 32, float, f32)
TINYATTN_FLASH(16, 64, 64, 64, 64, tinyattn_half, f16)
TINYATTN_FLASH(32, 64, 64, 64, 64, tinyattn_half, f16)
TINYATTN_FLASH(64, 64, 64, 32, 64, tinyattn_half, f16)
TINYATTN_FLASH(128, 64, 32, 32, 32, tinyattn_half, f16)
