"""tinyattn.distributions' distributions over matrices, as torch's: LKJCholesky (the Cholesky
factors of correlation matrices, density ∝ det(L Lᵀ)^(η - 1); sample by the onion method) and
Wishart (positive-definite matrices from df and a covariance, precision or scale_tril matrix;
rsample by the Bartlett decomposition, with gradients to df through the Chi2 draws' implicit
reparameterisation and to the matrix). Both made of tensor ops, so log_prob, entropy, mean,
mode and variance carry gradients of any order to the parameters. Also _mvdigamma, the
multivariate digamma function Wishart's entropy needs."""

import math
import warnings

import numpy as np

from ..autograd import no_grad
from ..errors import fmt_shape
from ..functional import where
from ..linalg import cholesky, slogdet
from ..routines import diag_embed
from ..routines_more import cholesky_solve, mvlgamma
from ..tensor import Tensor, arange, randn, tensor
from .constraints import (
    _corr_cholesky,
    _greater_than,
    _lower_cholesky,
    _positive,
    _positive_definite,
)
from .continuous import Beta, Chi2
from .distribution import (
    ExponentialFamily,
    _Distribution,
    _eye_like,
    _refuse_outside,
    _shape,
    _tensors,
)
from .multivariate import _MATRIX_FORMS, _precision_to_scale_tril, _ScaleTrilForms

_LOG_2 = math.log(2)


def _arange_like(start, stop, like):
    return arange(start, stop, dtype=like.dtype, backend=like.backend)


class LKJCholesky(_Distribution):
    """The Cholesky factor L of a dim x dim correlation matrix L Lᵀ whose density is
    ∝ det(L Lᵀ)^(concentration - 1) (uniform over correlation matrices at concentration 1),
    as torch's LKJCholesky: log_prob is Σ_i (2(η - 1) + dim - i) log L_ii less the
    normaliser, with gradients to concentration and the value; sample is torch's onion method
    (Beta draws for the squared row lengths, directions from normal draws; no gradient)."""

    arg_constraints = {"concentration": _positive}
    support = _corr_cholesky
    has_rsample = False
    _params = ("concentration",)

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if int(dim) != dim or dim < 2:
            raise ValueError(f"LKJCholesky: Expected dim to be an integer greater than or equal "
                             f"to 2. Found dim={dim}.")
        self.dim = int(dim)
        self._init(validate_args, concentration=concentration)
        self.event_shape = (self.dim, self.dim)
        self._derive()

    def _derive(self):
        """The Beta whose draws are the rows' squared lengths off the diagonal: row i's is
        Beta(i/2, β - (i-1)/2), β = η + (dim - 2)/2 (the onion method's, as numpyro's; torch
        2.x takes i - 1/2 for i/2, which gives rows past the second the wrong marginals)."""
        c = self.concentration
        offset = 0.5 * _arange_like(-1, self.dim - 1, c).clamp(min=0)  # 0, 0, 1/2, ...
        marginal = c + 0.5 * (self.dim - 2)
        self._beta = Beta(offset + 0.5, marginal.unsqueeze(-1) - offset, validate_args=False)

    def sample(self, sample_shape=(), generator=None):
        """The onion method, vectorised as torch's: row i is sqrt(y_i) u_i (u_i a uniform
        direction in its first i entries, y_i a Beta draw), with the diagonal making it of
        unit length."""
        with no_grad():
            y = self._beta.sample(sample_shape, generator=generator).unsqueeze(-1)
            c = self.concentration
            u = randn(*self._extended(sample_shape), generator=generator, dtype=c.dtype,
                      backend=c.backend).tril(-1)
            norm = (u * u).sum(-1, keepdim=True).sqrt()
            w = y.sqrt() * u / where(norm == 0, 1.0, norm)  # (the first row: all 0)
            tiny = float(np.finfo(w.dtype).tiny)
            diag = (1 - (w * w).sum(-1)).clamp(min=tiny).sqrt()
            return (w + diag_embed(diag)).detach()

    def log_prob(self, value):
        """Σ_{i>=2} (2(η - 1) + dim - i) log L_ii - log of the normaliser (torch's)."""
        value = self._value(value, "LKJCholesky.log_prob")
        c, dim = self.concentration, self.dim
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = 2 * (c - 1).unsqueeze(-1) + dim - _arange_like(2, dim + 1, c)
        unnormalized = (order * diag.log()).sum(-1)
        dm1 = dim - 1
        alpha = c + 0.5 * dm1
        normalizer = 0.5 * dm1 * math.log(math.pi) + mvlgamma(alpha - 0.5, dm1) \
            - alpha.lgamma() * dm1
        return unnormalized - normalizer

    def __repr__(self):
        return f"LKJCholesky(dim: {self.dim}, concentration: " \
               f"{fmt_shape(self.concentration.shape)})"


class _RefusedError(ValueError, AssertionError):
    """Wishart given no matrix or more than one (or _mvdigamma outside its domain): a
    ValueError, and the AssertionError torch raises."""


def _mvdigamma(x, p):
    """Σ_{j<p} digamma(x - j/2), torch's multivariate digamma (x > (p - 1) / 2)."""
    if not bool((x > (p - 1) / 2).all()):
        raise _RefusedError("Wishart: wrong domain for the multivariate digamma function")
    return (x.unsqueeze(-1) - _arange_like(0, p, x) / 2).digamma().sum(-1)


class Wishart(_ScaleTrilForms, ExponentialFamily):
    """Wishart(df, Σ): the law of Σ_k x_k x_kᵀ for df draws x_k ~ N(0, Σ) (df real, > p - 1),
    Σ given as exactly one of covariance_matrix, precision_matrix or scale_tril, the batch dims
    of df and the matrix broadcast, as torch's. Computed from L, a Cholesky factor of Σ:
    log_prob and entropy are torch's closed forms; rsample is (L A)(L A)ᵀ with A lower
    triangular (torch's Bartlett decomposition: A_ii = sqrt(Chi2(df - i)), normal draws below),
    so gradients reach df (implicitly, through the Chi2 draws) and the matrix."""

    support = _positive_definite
    has_rsample = True
    _mean_carrier_measure = 0
    _params = ("df",)

    @property
    def arg_constraints(self):
        return {"covariance_matrix": _positive_definite, "precision_matrix": _positive_definite,
                "scale_tril": _lower_cholesky, "df": _greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = {name: m for name, m in zip(_MATRIX_FORMS, (covariance_matrix, precision_matrix,
                                                            scale_tril), strict=True)
                 if m is not None}
        if len(given) != 1:
            raise _RefusedError("Wishart: Exactly one of covariance_matrix or "
                                   "precision_matrix or scale_tril may be specified.")
        (self._given, matrix), = given.items()
        matrix = matrix if isinstance(matrix, Tensor) else tensor(matrix)
        if matrix.ndim < 2 or matrix.shape[-1] != matrix.shape[-2]:
            raise ValueError(f"Wishart: {self._given} must be at least two-dimensional, with "
                             f"optional leading batch dimensions, and square; got shape "
                             f"{fmt_shape(matrix.shape)}")
        matrix, df = _tensors(matrix, df)
        p = matrix.shape[-1]
        self.batch_shape = tuple(np.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(df.shape)))
        self.event_shape = (p, p)
        self.df, self._matrix = df.expand(*self.batch_shape), matrix.expand(*self.batch_shape,
                                                                               p, p)
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Wishart: Value of df={np.asarray(df.detach().numpy()).tolist()} "
                             f"expected to be greater than ndim - 1 = {p - 1}.")
        if bool((self.df < p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur "
                          "for ndim - 1 < df < ndim.", stacklevel=2)
        self.validate_args = validate_args is not False
        if self.validate_args:
            _refuse_outside("Wishart", "df", self.df, self.arg_constraints["df"])
            _refuse_outside("Wishart", self._given, self._matrix,
                            self.arg_constraints[self._given])
        self._unbroadcasted_scale_tril = (
            matrix if self._given == "scale_tril" else cholesky(matrix)
            if self._given == "covariance_matrix" else _precision_to_scale_tril(matrix))

    def expand(self, batch_shape, _instance=None):
        """df and the matrix given broadcast to batch_shape (views), L kept, as torch's."""
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.batch_shape = _shape(batch_shape)
        new.df = self.df.expand(*new.batch_shape)
        new._matrix = self._matrix.expand(*new.batch_shape, *self.event_shape)
        return new

    def _full(self, matrix):
        return matrix.expand(*self.batch_shape, *self.event_shape)

    @property
    def precision_matrix(self):
        if self._given == "precision_matrix":
            return self._matrix
        low = self._unbroadcasted_scale_tril
        return self._full(cholesky_solve(_eye_like(low).expand(*low.shape), low))

    def _df_matrix(self):
        return self.df.reshape(*self.batch_shape, 1, 1)

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        """(df - p - 1) Σ; NaN where df <= p + 1, as torch's."""
        factor = self._df_matrix() - self.event_shape[-1] - 1
        return where(factor <= 0, math.nan, factor) * self.covariance_matrix

    @property
    def variance(self):
        """Var X_ij = df (Σ_ij² + Σ_ii Σ_jj)."""
        v = self.covariance_matrix
        d = v.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (v ** 2 + d.unsqueeze(-1) * d.unsqueeze(-2))

    def _bartlett(self, sample_shape, generator):
        """(L A)(L A)ᵀ for A lower triangular: A_ii = sqrt(Chi2(df - i)) (at least eps, as
        torch's), A_ij ~ N(0, 1) below the diagonal."""
        p, low = self.event_shape[-1], self._unbroadcasted_scale_tril
        chi2 = Chi2(self.df.unsqueeze(-1) - _arange_like(0, p, low), validate_args=False)
        eps = float(np.finfo(low.dtype).eps)
        diag = chi2.rsample(sample_shape, generator=generator).sqrt().clamp(min=eps)
        below = randn(*self._extended(sample_shape), generator=generator, dtype=low.dtype,
                      backend=low.backend).tril(-1)
        chol = low @ (diag_embed(diag) + below)
        return chol @ chol.mT

    def rsample(self, sample_shape=(), generator=None, max_try_correction=None):
        """Bartlett draws; a singular one (not positive-definite in floating point) is drawn
        again, up to max_try_correction (10) times, with torch's warning."""
        sample_shape = _shape(sample_shape)
        sample = self._bartlett(sample_shape, generator)
        bad = ~self.support.check(sample.detach())
        if not bool(bad.any()):
            return sample
        warnings.warn("Singular sample detected.", stacklevel=2)
        for _ in range(10 if max_try_correction is None else max_try_correction):
            sample = where(bad.unsqueeze(-1).unsqueeze(-1),
                           self._bartlett(sample_shape, generator), sample)
            bad = ~self.support.check(sample.detach())
            if not bool(bad.any()):
                break
        return sample

    def _half_log_det(self):
        """p log 2 / 2 + Σ log diag L = (log det 2Σ) / 2."""
        p = self.event_shape[-1]
        return p * _LOG_2 / 2 + self._unbroadcasted_scale_tril.diagonal(
            dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        """torch's: -ν (p log 2 + log det Σ) / 2 - log Γ_p(ν/2) + (ν - p - 1)/2 log det X
        - tr(Σ⁻¹ X) / 2."""
        value = self._value(value, "Wishart.log_prob")
        nu, p = self.df, self.event_shape[-1]
        trace = cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(
            dim1=-2, dim2=-1).sum(-1)
        return (-nu * self._half_log_det() - mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * slogdet(value).logabsdet - trace / 2)

    def entropy(self):
        nu, p = self.df, self.event_shape[-1]
        return ((p + 1) * self._half_log_det() + mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        nu, p = self.df, self.event_shape[-1]
        return -self.precision_matrix / 2, (nu - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self.event_shape[-1]
        return ((y + (p + 1) / 2) * (-slogdet(-2 * x).logabsdet + _LOG_2 * p)
                + mvlgamma(y + (p + 1) / 2, p))

    def __repr__(self):
        return (f"Wishart(df: {fmt_shape(self.df.shape)}, {self._given}: "
                f"{fmt_shape(self._matrix.shape)})")
