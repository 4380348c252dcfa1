"""Backend: the array module `xp` plus the few fused primitives that backends may speed up.

Every primitive here is the readable reference, written in `self.xp` so that it runs on any
backend; the CuPy backend overrides some of them with CUDA kernels and is tested against these.
Ops call `be.xp` for ordinary array work and `be.<primitive>` for the fused pieces, and never ask
which backend they run on. All softmax primitives work on rows along `axis` (the last by default);
a row whose entries are all -inf (fully masked) gives zeros, never NaN.
"""

import math
from abc import ABC, abstractmethod

import numpy

from . import flash, stable
from .stable import NEG_INF

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _overflow_ok():
    """NumPy's overflow to inf without its warning (the value is the one wanted); CuPy never
    warns."""
    return numpy.errstate(over="ignore")
INV_SQRT_2 = 1 / math.sqrt(2)
INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _row_sums(be, y, axis):
    """Σ y along axis (kept): the backend's row_sum over the last dim; float16 summed, and
    given, in float32 (as torch: NumPy adds float16 along any dim but the last one row at a
    time in float16, where 2048 + 1 = 2048, so a softmax over 4096 rows came out doubled)."""
    if y.dtype == numpy.float16:
        return y.sum(axis=axis, keepdims=True, dtype=numpy.float32)
    return be.row_sum(y) if axis in (-1, y.ndim - 1) else y.sum(axis=axis, keepdims=True)


class Backend(ABC):
    """An object with `xp` (numpy or cupy) and a fixed list of functions."""

    name = "base"
    xp = None
    flash_block = 128  # query/key tile size of flash attention
    flash_from = 1024  # impl="auto" takes the flash path from this many queries on

    def __init__(self, seed=None):
        self.seed(seed)

    # one object per backend in a process: copies (copy.deepcopy of a model) keep pointing at
    # it, or tensors made before and after would "live on two backends" (pickles too: see
    # backends.backend)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    # ---- arrays in and out -------------------------------------------------------------------

    def asarray(self, data, dtype=None):
        return self.xp.asarray(data, dtype=dtype)

    @abstractmethod
    def to_numpy(self, array):
        """A NumPy array with the values of `array` (a copy only where the backend needs one)."""

    # ---- sums over the last dims (layer norm, softmax, cross-entropy) -----------------------

    def row_sum(self, x, n_dims=1, mean=False):
        """The sum (or with `mean`, the mean) of x over its last n_dims dims, kept as 1s: the
        row reductions of the fused ops (x.sum / x.mean with keepdims). float16 is summed in
        float32 and given back in float16, as torch (x.mean does so itself)."""
        axes = tuple(range(x.ndim - n_dims, x.ndim))
        if mean:
            return x.mean(axis=axes, keepdims=True)
        if x.dtype == numpy.float16:
            return x.sum(axis=axes, keepdims=True, dtype=numpy.float32).astype(numpy.float16)
        return x.sum(axis=axes, keepdims=True)

    # ---- randomness: one generator per backend, seeded by tinyattn.manual_seed --------------

    def seed(self, seed):
        self.rng = self.xp.random.default_rng(seed)

    def rng_state(self, rng):
        """A copy of the random stream `rng`'s state (NumPy: its bit generator's state dict),
        from which `rng_at` makes a stream that draws what `rng` draws next."""
        return rng.bit_generator.state  # (a new dict on every read)

    def rng_at(self, state):
        """A new random stream at a state `rng_state` gave (the state is read, not kept)."""
        if not isinstance(state, dict):
            raise TypeError(f"the state of a {self.name} random stream is the dict that "
                            f"rng_state gave, got {type(state).__name__}")
        rng = self.xp.random.default_rng()
        rng.bit_generator.state = state
        return rng

    def randn(self, shape, dtype, rng=None):
        """Standard normal floats, from `rng` (a tinyattn.Generator's) or the backend's own."""
        return (self.rng if rng is None else rng).standard_normal(shape, dtype=dtype)

    def rand(self, shape, dtype, seed=None, rng=None):
        """Uniform [0, 1) floats; from a fresh generator seeded with `seed` when one is given,
        else from `rng` (a tinyattn.Generator's) or the backend's own."""
        if seed is not None:
            rng = self.xp.random.default_rng(seed)
        return (self.rng if rng is None else rng).random(shape, dtype=dtype)

    # ---- small helpers the ops share ---------------------------------------------------------

    def number(self, c, x):
        """The Python number `c` as the operand to compute `x op c` with, for an array `x`
        (the arithmetic ops ask: ops/elementwise.py): `c` itself here; NumpyBackend gives an
        equal operand that NumPy takes in faster."""
        return c


    def scatter_add(self, out, index, values):
        """out[index] += values, where repeated indices accumulate (the VJP of gathering)."""
        self.xp.add.at(out, index, values)

    def scatter_max(self, out, index, values):
        """out[index] = max(out[index], values), repeated indices included (scatter_reduce)."""
        self.xp.maximum.at(out, index, values)

    def scatter_min(self, out, index, values):
        self.xp.minimum.at(out, index, values)

    def erf(self, x):
        """The error function: exact to ~1e-15 in float64, to ~3e-7 (a float32 ulp or two) else
        (float16: computed in float32, as torch; its x² overflows float16 past |x| = 256)."""
        if x.dtype == numpy.float16:
            return self.erf_fast(x.astype(numpy.float32)).astype(numpy.float16)
        return self.erf_reference(x) if x.dtype == self.xp.float64 else self.erf_fast(x)

    # ---- GELU: forward and backward, each one pass of in-place steps ---------------------------

    def gelu_forward(self, x, approximate="none"):
        """(out, saved): out = x Φ(x) with saved = Φ(x) = (1 + erf(x/√2)) / 2, or for "tanh"
        out = x (1 + tanh u) / 2 = x σ(2u) with saved = s = σ(2u), u = √(2/π) (x + 0.044715 x³).
        (The σ form: one exp, not tanh, and no 1 + tanh u cancelling far left of 0.)
        float16 is computed in float32 (as torch and the CUDA kernels), out and saved rounded
        back to float16: x² overflows float16 past |x| = 256."""
        xp = self.xp
        if x.dtype == numpy.float16:
            out, saved = self.gelu_forward(x.astype(numpy.float32), approximate)
            return out.astype(numpy.float16), saved.astype(numpy.float16)
        if approximate == "tanh":
            s = xp.asarray(x * x)  # asarray: on a 0-d x, x * x is a scalar, not writable
            s *= 0.044715
            s += 1
            s *= x
            s *= -2 * SQRT_2_OVER_PI  # -2u
            with _overflow_ok():  # e^-2u = inf far left of 0: σ = 1 / inf = 0 there
                xp.exp(s, out=s)
            s += 1
            xp.divide(1, s, out=s)  # σ(2u)
            return x * s, s
        cdf = xp.asarray(self.erf(x * INV_SQRT_2))
        cdf += 1
        cdf *= 0.5
        return x * cdf, cdf

    def gelu_backward(self, g, x, saved, approximate="none"):
        """gx = g * dGELU/dx from x and what gelu_forward saved:
        Φ(x) + x φ(x) with φ(x) = exp(-x²/2) / √(2π); for "tanh", from s = σ(2u),
        s + x s (1 - s) d(2u)/dx with d(2u)/dx = 2√(2/π) (1 + 3·0.044715 x²).
        float16 is computed in float32: in float16, x² is inf past |x| = 256, and the tanh form's
        s (1 - s) · inf = 0 · inf gave NaN where torch gives 0 or 1."""
        xp = self.xp
        if x.dtype == numpy.float16:
            f32 = numpy.float32
            gx = self.gelu_backward(g.astype(f32), x.astype(f32), saved.astype(f32), approximate)
            return gx.astype(numpy.float16)
        if approximate == "tanh":
            s = saved
            du = x * x
            du *= 6 * 0.044715 * SQRT_2_OVER_PI
            du += 2 * SQRT_2_OVER_PI  # d(2u)/dx
            gx = xp.asarray(1 - s)
            gx *= s
            gx *= du
            gx *= x
            gx += s
            gx *= g
            return gx
        gx = xp.asarray(x * x)
        gx *= -0.5
        xp.exp(gx, out=gx)
        gx *= INV_SQRT_2PI
        gx *= x
        gx += saved
        gx *= g
        return gx

    # ---- softmax: the three-pass reference -------------------------------------------------

    def softmax(self, x, axis=-1):
        """y = exp(x - max) / sum(exp(x - max)): pass 1 max, pass 2 exp and sum, pass 3 divide.
        float16 is computed in float32 and rounded once, as torch and the CUDA kernels (x - max
        overflows float16 for entries 65504 apart)."""
        # a fresh floating copy to work in (integers become float64, as np.exp would make them)
        dtype = x.dtype
        if dtype.kind != "f":
            return self._softmax_in_place(x.astype(self.xp.result_type(dtype, self.xp.float16)),
                                          axis)
        if dtype.char == "e":
            return self._softmax_in_place(x.astype(numpy.float32), axis).astype(dtype)
        return self._softmax_in_place(x.copy(), axis)

    def _softmax_in_place(self, y, axis=-1):
        """softmax over `axis`, overwriting y (a temporary the caller owns) and returning it."""
        xp = self.xp
        y -= stable.row_max(xp, y, axis)  # a fully masked row: exp(-inf - 0) = 0, no NaN
        xp.exp(y, out=y)
        s = _row_sums(self, y, axis)
        s[s == 0] = 1
        y /= s
        return y

    def softmax_backward(self, y, g, axis=-1):
        """gx = y * (g - sum(g * y)): the Jacobian diag(y) - y yᵀ applied to g, never built."""
        gx = self.xp.asarray(g * y)  # asarray: a 0-d product is a NumPy scalar otherwise
        dot = _row_sums(self, gx, axis)
        self.xp.subtract(g, dot, out=gx)
        gx *= y
        return gx

    # ---- softmax: the online (m, l) reference, the spec the CUDA kernels are held to ---------

    @staticmethod
    def online_merge(xp, m_a, l_a, m_b, l_b):
        """(m_a, l_a) ⊕ (m_b, l_b) = (m, l_a e^(m_a - m) + l_b e^(m_b - m)) with m = max(m_a, m_b).

        Empty pieces have m = -inf and l = 0; where both are empty, m stays -inf and l stays 0
        (a naive exp(-inf - -inf) would be NaN).
        """
        m = xp.maximum(m_a, m_b)
        m_safe = stable.shift(xp, m)
        return m, l_a * xp.exp(m_a - m_safe) + l_b * xp.exp(m_b - m_safe)

    def online_softmax(self, x, block=128):
        """Softmax over the last axis, walking each row in blocks of `block` columns.

        Per block: its own (max, sum of exp) pair, merged into the running (m, l) with
        `online_merge`; at the end y = exp(x - m) / l. With block=1 this is the textbook
        recurrence m_i = max(m_{i-1}, x_i), l_i = l_{i-1} e^(m_{i-1} - m_i) + e^(x_i - m_i).
        """
        xp = self.xp
        n = x.shape[-1]
        m = xp.full(x.shape[:-1] + (1,), NEG_INF, dtype=x.dtype)
        l = xp.zeros(x.shape[:-1] + (1,), dtype=x.dtype)
        for start in range(0, n, block):
            xb = x[..., start:start + block]
            m_b = xb.max(axis=-1, keepdims=True)
            l_b = xp.exp(xb - stable.shift(xp, m_b)).sum(axis=-1, keepdims=True)
            m, l = self.online_merge(xp, m, l, m_b, l_b)
        y = xp.exp(x - stable.shift(xp, m))
        return y / xp.where(l == 0, 1, l)

    # ---- scaled masked softmax (attention scores), over the last axis ------------------------

    def causal_keep(self, n_q, n_k):
        """Boolean (n_q, n_k): True where query i may see key j (j <= i), aligned top-left."""
        xp = self.xp
        return xp.arange(n_k)[None, :] <= xp.arange(n_q)[:, None]

    def scaled_masked_softmax(self, x, keep=None, scale=1.0, causal=False):
        """softmax(scale * x) over the last axis, with entries where `keep` is False (or, when
        `causal`, keys after the query) set to -inf first; fully masked rows give zeros."""
        xp = self.xp
        s = xp.asarray(x * scale)  # a fresh array: masked and normalized in place from here on
        if causal:
            keep_c = self.causal_keep(x.shape[-2], x.shape[-1])
            keep = keep_c if keep is None else keep & keep_c
        if keep is not None:
            xp.copyto(s, NEG_INF, where=~xp.asarray(keep, dtype=bool))
        return self._softmax_in_place(s, axis=-1)

    def scaled_masked_softmax_backward(self, y, g, scale=1.0, causal=False):
        """gx = scale * y * (g - sum(g * y)); masked entries have y = 0, so they get 0.
        `causal` only tells kernels they may skip the zero triangle; the result is the same."""
        gx = self.softmax_backward(y, g, axis=-1)
        gx *= scale
        return gx

    # ---- flash attention: tiled, no T×S matrix (the reference lives in flash.py) --------------

    def attention_forward(self, q, k, v, keep=None, scale=1.0, causal=False, block_q=64,
                          block_k=64):
        """(out, lse) of softmax(scale q kᵀ, masked) v; q (N, T, d), k (N, S, d), v (N, S, dv)."""
        return flash.flash_forward(self.xp, q, k, v, keep, scale, causal, block_q, block_k)

    def attention_backward(self, q, k, v, out, lse, g, keep=None, scale=1.0, causal=False,
                           block_q=64, block_k=64):
        """(gq, gk, gv) from the saved out and log-sum-exp, recomputing probabilities in tiles."""
        return flash.flash_backward(self.xp, q, k, v, out, lse, g, keep, scale, causal, block_q,
                                    block_k)

    # ---- gelu's error function ----------------------------------------------------------------

    def erf_reference(self, x):
        """erf to ~1e-15 in float64 (power series below 2.5, Laplace continued fraction above)."""
        xp = self.xp
        a = xp.abs(x)
        small = a <= 2.5
        xs = xp.where(small, a, 0)
        x2 = xs * xs
        term = xs.copy()
        total = xs.copy()
        for n in range(60):  # erf = 2/√π e^(-x²) Σ 2^n x^(2n+1) / (1·3·…·(2n+1)): no cancellation
            term = term * (2 * x2) / (2 * n + 3)
            total += term
        r_small = (2 / math.sqrt(math.pi)) * xp.exp(-x2) * total
        xl = xp.where(small, 3, xp.minimum(a, 7))
        k_frac = xl.copy()
        for k in range(80, 0, -1):  # erfc = e^(-x²)/√π / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
            k_frac = xl + (k / 2) / k_frac
        r_large = 1 - xp.exp(-xl * xl) / (math.sqrt(math.pi) * k_frac)
        return xp.sign(x) * xp.where(small, r_small, r_large)

    def erf_fast(self, x):
        """erf to ~3e-7 (erfc = t exp(-x² + P(t)), t = 1 / (1 + x/2)): enough for float32."""
        xp = self.xp
        a = xp.abs(x)
        t = 1 / (1 + 0.5 * a)
        p = 0.17087277
        for c in (-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
                  0.37409196, 1.00002368, -1.26551223):
            p = c + t * p
        return xp.sign(x) * (1 - t * xp.exp(p - a * a))

    # ---- the optimizer's update ---------------------------------------------------------------

    def adam_update(self, p, g, m, v, lr, beta1, beta2, eps, weight_decay, step, decoupled,
                    v_max=None):
        """One Adam (or, decoupled, AdamW) step in place on p, m, v, with PyTorch's formula:
        m = β1 m + (1-β1) g;  v = β2 v + (1-β2) g²;  p -= lr/(1-β1^t) · m / (√v/√(1-β2^t) + ε).
        With `v_max` (amsgrad), v_max = max(v_max, v) in place takes v's place under the root."""
        xp = self.xp
        if p.dtype != m.dtype:  # the step in the wider dtype: float16 weights with float32
            # moments step in float32; float64 weights (a model.double() after the moments were
            # made) with float32 moments in float64, or every step rounds the weights to float32
            if numpy.promote_types(p.dtype, m.dtype) == m.dtype:
                p_wide = p.astype(m.dtype)
                self.adam_update(p_wide, g.astype(m.dtype), m, v, lr, beta1, beta2, eps,
                                 weight_decay, step, decoupled, v_max)
                p[...] = p_wide
                return
            moments = (m, v) if v_max is None else (m, v, v_max)
            wide = [a.astype(p.dtype) for a in moments]
            self.adam_update(p, g.astype(p.dtype, copy=False), *wide[:2], lr, beta1, beta2, eps,
                             weight_decay, step, decoupled, *wide[2:])
            for a, a_wide in zip(moments, wide, strict=True):  # kept in their own dtype
                a[...] = a_wide
            return
        if weight_decay and decoupled:
            p *= 1 - lr * weight_decay
        elif weight_decay:
            g = g + weight_decay * p
        m *= beta1
        m += (1 - beta1) * g
        v *= beta2
        v += (1 - beta2) * (g * g)
        if v_max is not None:
            xp.maximum(v_max, v, out=v_max)
        denom = xp.sqrt(v if v_max is None else v_max)
        denom /= math.sqrt(1 - beta2**step)
        denom += eps
        p -= (lr / (1 - beta1**step)) * m / denom
