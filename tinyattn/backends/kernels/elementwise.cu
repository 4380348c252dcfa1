// elementwise.cu - device functions behind the CuPy ElementwiseKernels for GELU and AdamW.
//
// CupyBackend passes this file as the `preamble` of cupy.ElementwiseKernel; each kernel's
// operation is one call into a function below, so every element is read once and written
// once. Computation is float32 for float16/float32 data and float64 for float64
// (tinyattn_acc<T>). The formulas are the ones ops/nn.py (gelu) and Backend.adam_update use:
//   gelu (erf):  cdf = (1 + erf(x / sqrt 2)) / 2,   out = x cdf,   gx = g (cdf + x phi(x))
//   gelu (tanh): out = x (1 + tanh u) / 2 = x s,  s = sigma(2u) = 1 / (1 + exp(-2u)),
//                u = sqrt(2/pi) (x + 0.044715 x^3) (no 1 + tanh u cancelling far left of 0),
//                gx = g (s + x s (1 - s) 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2))
//   adam:        mode 2 (AdamW): p *= 1 - lr wd;  mode 1 (Adam with L2): g += wd p;
//                mode 0: no weight decay;  m = b1 m + (1 - b1) g;
//                v = b2 v + (1 - b2) g^2;  p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

template <typename T> struct tinyattn_acc { typedef float type; };  // float16, float32
template <> struct tinyattn_acc<double> { typedef double type; };

#define TINYATTN_INV_SQRT_2 0.70710678118654752440
#define TINYATTN_INV_SQRT_2PI 0.39894228040143267794
#define TINYATTN_SQRT_2_OVER_PI 0.79788456080286535588
#define TINYATTN_GELU_C 0.044715

__device__ __forceinline__ float tinyattn_erf(float x) { return erff(x); }
__device__ __forceinline__ double tinyattn_erf(double x) { return erf(x); }
__device__ __forceinline__ float tinyattn_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double tinyattn_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float tinyattn_ew_exp(float x) { return expf(x); }
__device__ __forceinline__ double tinyattn_ew_exp(double x) { return exp(x); }
__device__ __forceinline__ float tinyattn_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double tinyattn_sqrt(double x) { return sqrt(x); }

template <typename A>
__device__ __forceinline__ void tinyattn_gelu_erf_forward(A x, A& out, A& cdf) {
    cdf = A(0.5) * (A(1) + tinyattn_erf(x * A(TINYATTN_INV_SQRT_2)));
    out = x * cdf;
}

template <typename A>
__device__ __forceinline__ A tinyattn_gelu_erf_backward(A g, A x, A cdf) {
    const A pdf = A(TINYATTN_INV_SQRT_2PI) * tinyattn_ew_exp(A(-0.5) * (x * x));
    return g * (cdf + x * pdf);
}

template <typename A>
__device__ __forceinline__ void tinyattn_gelu_tanh_forward(A x, A& out, A& s) {
    const A u = A(TINYATTN_SQRT_2_OVER_PI) * (x + A(TINYATTN_GELU_C) * (x * x * x));
    s = A(1) / (A(1) + tinyattn_ew_exp(A(-2) * u));  // exp overflows to inf far left: s = 0
    out = x * s;
}

template <typename A>
__device__ __forceinline__ A tinyattn_gelu_tanh_backward(A g, A x, A s) {
    const A du2 = A(2 * TINYATTN_SQRT_2_OVER_PI) * (A(1) + A(3 * TINYATTN_GELU_C) * (x * x));
    return g * (s + x * s * (A(1) - s) * du2);
}

// One Adam/AdamW step for one element, in place on p, m, v. bc1 = 1 - b1^t,
// sqrt_bc2 = sqrt(1 - b2^t) come from the host (computed in float64 there).
template <typename A>
__device__ __forceinline__ void tinyattn_adam_step(A g, A& p, A& m, A& v, A lr, A beta1,
                                                   A beta2, A eps, A wd, int mode, A bc1,
                                                   A sqrt_bc2) {
    if (mode == 2) {
        p = p * (A(1) - lr * wd);
    } else if (mode == 1) {
        g = g + wd * p;
    }
    m = beta1 * m + (A(1) - beta1) * g;
    v = beta2 * v + (A(1) - beta2) * (g * g);
    const A denom = tinyattn_sqrt(v) / sqrt_bc2 + eps;
    p = p - (lr / bc1) * m / denom;
}

// Instantiations for float32 and float64, so that a stand-alone compile (nvcc -ptx in the
// tests) checks the bodies; ElementwiseKernel instantiates them again for its own types.
template __device__ void tinyattn_gelu_erf_forward<float>(float, float&, float&);
template __device__ void tinyattn_gelu_erf_forward<double>(double, double&, double&);
template __device__ float tinyattn_gelu_erf_backward<float>(float, float, float);
template __device__ double tinyattn_gelu_erf_backward<double>(double, double, double);
template __device__ void tinyattn_gelu_tanh_forward<float>(float, float&, float&);
template __device__ void tinyattn_gelu_tanh_forward<double>(double, double&, double&);
template __device__ float tinyattn_gelu_tanh_backward<float>(float, float, float);
template __device__ double tinyattn_gelu_tanh_backward<double>(double, double, double);
template __device__ void tinyattn_adam_step<float>(float, float&, float&, float&, float, float,
                                                   float, float, float, int, float, float);
template __device__ void tinyattn_adam_step<double>(double, double&, double&, double&, double,
                                                    double, double, double, double, int,
                                                    double, double);
