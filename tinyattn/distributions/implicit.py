"""Gamma draws with a gradient (implicit reparameterisation, as torch's _standard_gamma): a draw
x of Gamma(a, 1) moves with a as the quantile it is, its CDF P(a, x) held fixed, so

    dx/da = -(∂P/∂a)(a, x) / p(x; a),    p(x; a) = x^(a-1) e^-x / Γ(a).

P, the regularised lower incomplete gamma function, is computed in float64 in log form: by its
series where x < a + 1, else through its complement Q = 1 - P by the continued fraction (each
converges quickly there); ∂/∂a of log P (or log Q) by a fourth-order central difference in a.
Past a = 1e5 (where both need thousands of terms) the normal limit is used: x ≈ a + √a z, so
dx/da ≈ 1 + (x - a) / (2a). Gamma, Beta, Dirichlet, Chi2 and StudentT draw through
`standard_gamma_rsample`, an autograd.Function whose backward multiplies by dx/da."""

import numpy as np

from ..function import Function, once_differentiable
from ..ops.special import lgamma_f64
from ..tensor import Tensor
from .distribution import _standard_gamma

_TINY = np.finfo(np.float64).tiny
_LARGE_A = 1e5  # from here on, the normal limit
_MAX_TERMS = 4000


def _converged(xp, step, *arrays):
    """Run `step` ((xp, n, state) -> (state, done)) on the entries of `arrays` until each is
    done, dropping the finished ones as it goes (the slow ones alone keep going); the final
    state of every entry, in its place."""
    out = [xp.empty_like(a) for a in arrays]
    where = xp.arange(arrays[0].size)
    state = list(arrays)
    for n in range(1, _MAX_TERMS):
        state, done = step(xp, n, state)
        if done.any():
            for o, v in zip(out, state, strict=True):
                o[where[done]] = v[done]
            keep = ~done
            where, state = where[keep], [v[keep] for v in state]
        if not where.size:
            break
    for o, v in zip(out, state, strict=True):
        o[where] = v
    return out


def _series_step(xp, n, state):
    """One term of P's series Σ x^n / ((a + 1)...(a + n)): done below 1e-17 of the sum."""
    a, x, term, total = state
    term = term * x / (a + n)
    total = total + term
    return [a, x, term, total], term <= total * 1e-17


def _fraction_step(xp, n, state):
    """One step of the modified Lentz method for Q's continued fraction: done when a step
    changes the value by at most two ulps."""
    a, x, b, c, d, h = state
    an = -n * (n - a)
    b = b + 2
    d = an * d + b
    d = xp.where(xp.abs(d) < _TINY, _TINY, d)
    c = b + an / c
    c = xp.where(xp.abs(c) < _TINY, _TINY, c)
    d = 1 / d
    step = d * c
    return [a, x, b, c, d, h * step], xp.abs(step - 1) <= 4e-16


def _log_p_series(be, a, x):
    """log P(a, x) = a log x - x - log Γ(a + 1) + log Σ_n x^n / ((a + 1)...(a + n))."""
    xp = be.xp
    total = _converged(xp, _series_step, a, x, xp.ones_like(x), xp.ones_like(x))[3]
    return a * xp.log(x) - x - lgamma_f64(be, a + 1) + xp.log(total)


def _log_q_fraction(be, a, x):
    """log Q(a, x) = a log x - x - log Γ(a) + log of the continued fraction
    1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...)), by the modified Lentz method."""
    xp = be.xp
    b = x + 1 - a
    h = _converged(xp, _fraction_step, a, x, b, xp.full_like(x, 1 / _TINY), 1 / b, 1 / b)[5]
    return a * xp.log(x) - x - lgamma_f64(be, a) + xp.log(h)


def _d_da(log_f, be, a, x):
    """∂/∂a of log_f(be, a, x), by (-f(a + 2h) + 8 f(a + h) - 8 f(a - h) + f(a - 2h)) / 12h
    (the four points in one call)."""
    xp = be.xp
    h = 1e-3 * a
    f = log_f(be, xp.concatenate([a + k * h for k in (2, 1, -1, -2)]), xp.concatenate([x] * 4))
    f = f.reshape(4, -1)
    return (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h)


def gamma_draw_grad(be, a, x):
    """dx/da for draws x of Gamma(a, 1) (arrays of one shape, float64)."""
    xp = be.xp
    x = xp.maximum(x, _TINY)
    log_p = (a - 1) * xp.log(x) - x - lgamma_f64(be, a)
    out = xp.empty_like(x)
    low = x < a + 1
    large = a >= _LARGE_A
    for where, log_f, sign in ((low & ~large, _log_p_series, -1.0),
                               (~low & ~large, _log_q_fraction, 1.0)):
        if where.any():
            ai, xi = a[where], x[where]
            out[where] = sign * xp.exp(log_f(be, ai, xi) - log_p[where]) * _d_da(log_f, be, ai,
                                                                                  xi)
    out[large] = 1 + (x[large] - a[large]) / (2 * a[large])
    return out


class StandardGamma(Function):
    """Draws of Gamma(concentration, 1) of `shape` whose gradient to concentration is the
    implicit one (gamma_draw_grad)."""

    @staticmethod
    def forward(ctx, concentration, shape, generator, where):
        x = _standard_gamma(concentration, shape, generator, where)
        ctx.save_for_backward(concentration.expand(*shape), x)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        be = x.backend
        grad = gamma_draw_grad(be, be.xp.asarray(a._data, dtype=np.float64),
                               be.xp.asarray(x._data, dtype=np.float64))
        return Tensor._wrap((g._data * grad).astype(x.dtype, copy=False), be), None, None, None


def standard_gamma_rsample(concentration, shape, generator, where):
    """Gamma(concentration, 1) draws of `shape` carrying the implicit gradient (as torch's
    _standard_gamma)."""
    return StandardGamma.apply(concentration, tuple(shape), generator, where)
