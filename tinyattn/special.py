"""tinyattn.special: torch.special's names, each with torch's gradient.

    import tinyattn as ta
    ta.special.gammaln(x), ta.special.polygamma(2, x), ta.special.gammainc(a, x)

The names tinyattn already has are its own functions again (erf, erfc, erfinv, expit =
sigmoid, logit, xlogy, gammaln = lgamma, digamma = psi, softmax, log_softmax, logsumexp,
sinc, round, log1p, expm1, exp2); ndtr and multigammaln are made of ops (erfc, lgamma); the
rest are the ops of ops/special_more.py (polygamma, zeta, gammainc, gammaincc, erfcx, xlog1py,
entr, i0, i0e, i1, i1e, ndtri, log_ndtr). Where torch has no gradient for an input (gammainc's
and gammaincc's a, zeta's x) an input that requires grad makes backward raise a
NotImplementedError naming the function, as torch's (also where only the other input's
gradient is asked for, where torch gives it).
The orthogonal polynomials (chebyshev_polynomial_t/u/v/w, shifted_chebyshev_polynomial_*,
hermite_polynomial_h/he, laguerre_polynomial_l, legendre_polynomial_p: (input, n)) and the
Bessel-type functions (bessel_j0/j1/y0/y1, modified_bessel_i0/i1/k0/k1,
scaled_modified_bessel_k0/k1, spherical_bessel_j0, airy_ai) are the ops of
ops/special_poly.py: torch's values, with the x-gradients torch lacks; the polynomials refuse
the gradient with respect to n (backward raises NotImplementedError naming the function).
"""

import math

import numpy as np

from . import functional, routines
from .autograd import apply
from .errors import ShapeError
from .ops import special_more as spm
from .ops import special_poly as spp
from .tensor import Tensor, as_tensor

__all__ = ["erf", "erfc", "erfinv", "erfcx", "expit", "logit", "xlogy", "xlog1py", "gammaln",
           "digamma", "psi", "polygamma", "multigammaln", "gammainc", "gammaincc", "log_softmax",
           "softmax", "logsumexp", "entr", "sinc", "round", "log1p", "expm1", "exp2", "i0",
           "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "zeta",
           "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p", "bessel_j0", "bessel_j1",
           "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
           "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
           "scaled_modified_bessel_k1", "spherical_bessel_j0", "airy_ai"]

erf, erfc, erfinv, logit, xlogy, sinc, log1p, expm1, exp2 = (
    routines.erf, routines.erfc, routines.erfinv, routines.logit, routines.xlogy,
    routines.sinc, routines.log1p, routines.expm1, routines.exp2)
expit, gammaln, digamma, logsumexp = (routines.sigmoid, routines.lgamma, routines.digamma,
                                      routines.logsumexp)
psi = digamma


def round(input, *, decimals=0):  # noqa: A001, A002 - torch's names
    """input rounded to `decimals` places, halves to even (as torch.special.round)."""
    return routines.round(input, decimals=decimals)


def softmax(input, dim, *, dtype=None):  # noqa: A002
    """exp(input) / Σ exp(input) over dim (torch.special.softmax: dim is required)."""
    return functional.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):  # noqa: A002
    """input - logsumexp(input) over dim."""
    return functional.log_softmax(input, dim, dtype=dtype)


def _tensor(x):
    return x if isinstance(x, Tensor) else as_tensor(x)


def _unary(op, name):
    def fn(input):  # noqa: A002
        return apply(op, _tensor(input))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = op.doc
    return fn


erfcx, entr, i0, i0e, i1, i1e, ndtri, log_ndtr = (
    _unary(getattr(spm, n), n)
    for n in ("erfcx", "entr", "i0", "i0e", "i1", "i1e", "ndtri", "log_ndtr"))


def _pair(x, y, name):
    """x and y as tensors: a Python number in the other's floating dtype (as torch takes a
    number beside a tensor); at least one must be a tensor."""
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        raise TypeError(f"{name}: takes at least one tensor, got {type(x).__name__} and "
                        f"{type(y).__name__}")

    def as_like(v, other):
        if isinstance(v, Tensor):
            return v
        dtype = other.dtype if other.dtype.kind == "f" else None
        return as_tensor(v, dtype=dtype)

    return as_like(x, y), as_like(y, x)


def xlog1py(input, other):  # noqa: A002
    """input * log1p(other), 0 where input is 0 (unless other is NaN)."""
    return apply(spm.xlog1py, *_pair(input, other, "xlog1py"))


def _without_first_grad(op, x, y):
    x, y = _pair(x, y, op.name)
    if x.requires_grad:
        return apply(op, x, y, refuse_grad=True)
    return apply(op, x, y)


def gammainc(input, other):  # noqa: A002
    """P(a, x) = γ(a, x) / Γ(a), a = input, x = other: the regularized lower incomplete gamma
    function. Gradient for x only (backward raises for an a that requires grad, as torch)."""
    return _without_first_grad(spm.gammainc, input, other)


def gammaincc(input, other):  # noqa: A002
    """Q(a, x) = 1 - P(a, x), the regularized upper incomplete gamma function (gradient for x
    only, as gammainc)."""
    return _without_first_grad(spm.gammaincc, input, other)


def zeta(input, other):  # noqa: A002
    """ζ(x, q) = Σ_{k>=0} (q + k)^(-x), x = input, q = other, the Hurwitz zeta function.
    Gradient for q only (backward raises for an x that requires grad, as torch)."""
    return _without_first_grad(spm.zeta, input, other)


def _polynomial(op):
    """torch.special's op.name(input, n): n a tensor or a number, broadcast with input."""
    def fn(input, n):  # noqa: A002 - torch's names
        x, k = _pair(input, n, op.name)
        try:
            np.broadcast_shapes(x.shape, k.shape)
        except ValueError:
            raise ShapeError(f"{op.name}: input of shape {tuple(x.shape)} and n of shape "
                             f"{tuple(k.shape)} do not broadcast") from None
        if k.requires_grad:
            return apply(op, x, k, refuse_grad=True)
        return apply(op, x, k)
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = (f"{op.doc}, as torch.special.{op.name} (n truncated to an integer; 0 for "
                  "n < 0). Gradient for input only: backward raises for an n that requires "
                  "grad.")
    return fn


(chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v, chebyshev_polynomial_w,
 shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u, shifted_chebyshev_polynomial_v,
 shifted_chebyshev_polynomial_w, hermite_polynomial_h, hermite_polynomial_he,
 laguerre_polynomial_l, legendre_polynomial_p) = (_polynomial(o) for o in spp.POLYNOMIAL_OPS)
(bessel_j0, bessel_j1, bessel_y0, bessel_y1, modified_bessel_i0, modified_bessel_i1,
 modified_bessel_k0, modified_bessel_k1, scaled_modified_bessel_k0, scaled_modified_bessel_k1,
 spherical_bessel_j0, airy_ai) = (_unary(o, o.name) for o in spp.BESSEL_OPS)


def polygamma(n, input):  # noqa: A002
    """ψ^(n)(input), the n-th derivative of digamma (n an int >= 0; 0: digamma)."""
    return apply(spm.polygamma, _tensor(input), n=spm.polygamma_order(n))


def multigammaln(input, p):  # noqa: A002
    """log Γ_p(input) = p(p-1)/4 log π + Σ_{j<p} lgamma(input - j/2), the multivariate log
    gamma function of dimension p (an int >= 1); every entry must exceed (p - 1)/2."""
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
        raise ValueError(f"multigammaln: p must be an int >= 1, got {p!r}")
    x = _tensor(input)
    if not bool((x.detach() > 0.5 * (p - 1)).all()):
        raise ValueError(f"multigammaln: all elements must be greater than (p-1)/2 = "
                         f"{0.5 * (p - 1)} (as torch)")
    total = sum(routines.lgamma(x - 0.5 * j) for j in range(int(p)))
    return total + p * (p - 1) / 4 * math.log(math.pi)


def ndtr(input):  # noqa: A002
    """Φ(x) = (1 + erf(x / √2)) / 2, the standard normal distribution function (as erfc(-x
    / √2) / 2, exact in the left tail)."""
    x = _tensor(input)
    if x.dtype.kind != "f":
        x = x.float()
    return routines.erfc(x * -spm.SQRT1_2) * 0.5
