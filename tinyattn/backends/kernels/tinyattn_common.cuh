// tinyattn_common.cuh - helpers shared by the tinyattn CUDA kernels (softmax.cu, flash.cu).
//
// The CuPy backend pastes this file in place of its #include line before handing a source to
// NVRTC, so the kernels need no include path and no host header. It provides:
//   * -inf from its bit pattern (NVRTC does not define INFINITY),
//   * Io<T>: how a storage type is loaded into its compute type and stored back
//     (float16 is carried as raw 16-bit words and converted with PTX cvt, so cuda_fp16.h
//     is not needed), with float32 compute for float16 and float32, float64 for float64;
//     Io<T>::convert turns a raw stored value into the compute type, so a kernel can load raw
//     values first (every load in flight) and convert them later, and Io<T>::pack converts
//     back; TinyattnVec<T, V> moves V adjacent values with one vector access,
//   * e^(s - m) as exp2((s - m) * log2 e): a subtraction, a multiply and one ex2.approx
//     instead of the accurate expf's longer sequence. s - m is exact where it matters (near
//     the max) and e^(m - m) is exactly 1, so a score of 1e4 keeps its precision (folding
//     log2 e into the scale would round every scaled score by up to 1e4 * 2^-24),
//   * the online-softmax step and the (m, l) merge with it, with the guards that keep empty
//     rows at
//     m = -inf, l = 0 instead of NaN, and a NaN score making l NaN (the row comes out NaN,
//     as the NumPy reference and PyTorch give it),
//   * a max that propagates NaN (fmaxf drops it),
//   * whether one score is masked (causal limit, explicit bool mask with element strides).
#pragma once

typedef unsigned short tinyattn_half;  // float16 storage: the raw IEEE binary16 bits

__device__ __forceinline__ float tinyattn_neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double tinyattn_neg_inf(double) {
    return __longlong_as_double(0xfff0000000000000LL);
}
__device__ __forceinline__ float tinyattn_exp2(float x) { return exp2f(x); }
__device__ __forceinline__ double tinyattn_exp2(double x) { return exp2(x); }
__device__ __forceinline__ float tinyattn_log(float x) { return logf(x); }
__device__ __forceinline__ double tinyattn_log(double x) { return log(x); }

template <typename T> struct Io;

#define TINYATTN_LOG2E 1.4426950408889634  // log2(e): exp(x) = exp2(x * log2(e))

// e^(s - m) = 2^((s - m) log2 e)
template <typename A>
__device__ __forceinline__ A tinyattn_exp_diff(A s, A m) {
    return tinyattn_exp2((s - m) * A(TINYATTN_LOG2E));
}

// max(a, b), NaN if either is NaN (fmaxf and a plain `a > b ? a : b` would drop a NaN)
template <typename A>
__device__ __forceinline__ A tinyattn_max_nan(A a, A b) {
    return (b > a || b != b) ? b : a;
}

template <> struct Io<float> {
    typedef float acc;
    static __device__ __forceinline__ float convert(float raw) { return raw; }
    static __device__ __forceinline__ float load(const float* p, long long i) { return p[i]; }
    static __device__ __forceinline__ float pack(float v) { return v; }
    static __device__ __forceinline__ void store(float* p, long long i, float v) { p[i] = v; }
};

template <> struct Io<double> {
    typedef double acc;
    static __device__ __forceinline__ double convert(double raw) { return raw; }
    static __device__ __forceinline__ double load(const double* p, long long i) { return p[i]; }
    static __device__ __forceinline__ double pack(double v) { return v; }
    static __device__ __forceinline__ void store(double* p, long long i, double v) { p[i] = v; }
};

template <> struct Io<tinyattn_half> {
    typedef float acc;
    static __device__ __forceinline__ float convert(tinyattn_half raw) {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(raw));
        return f;
    }
    static __device__ __forceinline__ float load(const tinyattn_half* p, long long i) {
        return convert(p[i]);
    }
    static __device__ __forceinline__ tinyattn_half pack(float v) {
        tinyattn_half h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
        return h;
    }
    static __device__ __forceinline__ void store(tinyattn_half* p, long long i, float v) {
        p[i] = pack(v);
    }
};

// V adjacent stored values: one load or store of V * sizeof(T) bytes (a 16-byte vector access
// when V * sizeof(T) = 16; V = 1 is a plain scalar). The address must be a multiple of the
// size: the host passes V > 1 only for rows and pointers that are.
template <typename T, int V>
struct alignas(sizeof(T) * V) TinyattnVec {
    T v[V];
};

// One step of the online softmax: fold score s into the running (m, l).
// If s is a new max, the old sum is rescaled by e^(m - s); an -inf score adds nothing
// (and never computes exp(-inf - -inf), which is NaN); a NaN score takes the second branch
// and makes l NaN, so the whole row comes out NaN.
template <typename A>
__device__ __forceinline__ void tinyattn_online_push(A& m, A& l, A s) {
    if (s > m) {
        l = l * tinyattn_exp_diff(m, s) + A(1);
        m = s;
    } else if (s != tinyattn_neg_inf(A(0))) {
        l += tinyattn_exp_diff(s, m);
    }
}

// (m, l) <- (m, l) (+) (m2, l2). Symmetric in its two arguments as written (max and the two
// products commute), so every lane of a butterfly ends with the same pair as long as the
// compiler contracts both sides alike; a NaN l stays NaN.
template <typename A>
__device__ __forceinline__ void tinyattn_online_merge(A& m, A& l, A m2, A l2) {
    const A mx = m > m2 ? m : m2;
    if (mx == tinyattn_neg_inf(A(0))) {  // both pieces empty
        m = mx;
        l = A(0);
        return;
    }
    l = l * tinyattn_exp_diff(m, mx) + l2 * tinyattn_exp_diff(m2, mx);
    m = mx;
}

// Where attending is allowed. Row `row` of a (batch, n_q, n_cols) score tensor is query
// i = row % n_q of batch b = row / n_q. `keep` (may be null) is a uint8 mask addressed with
// element strides (ks_b, ks_i, ks_j), so broadcast masks ((T, S), (B, 1, S), ...) are read
// in place without being expanded.
struct TinyattnMask {
    int causal;
    const unsigned char* keep;
    long long ks_b, ks_i, ks_j;
};

// Columns j < this limit may be read at all (causal: j <= i).
__device__ __forceinline__ int tinyattn_row_limit(const TinyattnMask& mk, int i, int n_cols) {
    return mk.causal ? min(n_cols, i + 1) : n_cols;
}

__device__ __forceinline__ const unsigned char* tinyattn_keep_row(const TinyattnMask& mk,
                                                                  long long b, int i) {
    return mk.keep ? mk.keep + b * mk.ks_b + (long long)i * mk.ks_i : nullptr;
}
