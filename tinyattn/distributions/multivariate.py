"""tinyattn.distributions' multivariate distributions: Independent (a base distribution's last
batch dims made event dims), MultivariateNormal (from a covariance, precision or scale_tril
matrix: all through a Cholesky factor) and LowRankMultivariateNormal (Σ = W Wᵀ + diag(D),
through the small capacitance matrix), with their helpers (_mvn_batch_shape,
_precision_to_scale_tril, _batch_mahalanobis, _low_rank_shapes)."""

import math

import numpy as np

from ..errors import ShapeError, fmt_shape
from ..linalg import cholesky, solve_triangular
from ..routines import diag_embed
from ..tensor import Tensor, randn, tensor
from .constraints import (
    _IndependentConstraint,
    _lower_cholesky,
    _positive,
    _positive_definite,
    _real,
    _real_vector,
)
from .distribution import (
    _Distribution,
    _eye_like,
    _refuse_outside,
    _shape,
    _sum_rightmost,
    _tensors,
)


class Independent(_Distribution):
    """base_distribution with its last reinterpreted_batch_ndims batch dims made event dims:
    log_prob and entropy sum over them (a diagonal Gaussian: Independent(Normal(mu, sigma), 1)).
    Sampling, mean and variance are the base's."""

    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n, batch = int(reinterpreted_batch_ndims), tuple(base_distribution.batch_shape)
        if not 0 <= n <= len(batch):
            raise ValueError(f"Independent: expected 0 <= reinterpreted_batch_ndims <= "
                             f"len(base_distribution.batch_shape), actual {n} vs {len(batch)}")
        shape = batch + tuple(base_distribution.event_shape)
        cut = len(batch) - n
        self.batch_shape, self.event_shape = shape[:cut], shape[cut:]
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        self.validate_args = validate_args is not False

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        return self.reinterpreted_batch_ndims == 0 and self.base_dist.has_enumerate_support

    @property
    def support(self):
        base, n = self.base_dist.support, self.reinterpreted_batch_ndims
        return _IndependentConstraint(base, n) if n else base

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=(), generator=None):
        return self.base_dist.sample(sample_shape, generator=generator)

    def rsample(self, sample_shape=(), generator=None):
        return self.base_dist.rsample(sample_shape, generator=generator)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand=True):
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand=expand)

    def expand(self, batch_shape, _instance=None):
        """The base expanded to batch_shape + the reinterpreted dims, as torch's."""
        n = self.reinterpreted_batch_ndims
        base = self.base_dist.expand(_shape(batch_shape) + tuple(self.event_shape[:n]))
        return Independent(base, n, validate_args=self.validate_args)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


_MATRIX_FORMS = ("covariance_matrix", "precision_matrix", "scale_tril")


class _Gaussian(_Distribution):
    """What the two multivariate normals share: mean and mode are loc, and a matrix of the
    event broadcast to the batch (_full)."""

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    def _full(self, matrix):
        return matrix.expand(*self.batch_shape, *self.event_shape, *self.event_shape)


class _ScaleTrilForms:
    """scale_tril and covariance_matrix of a distribution given one of _MATRIX_FORMS (kept as
    _given, _matrix) and holding its Cholesky factor L (_unbroadcasted_scale_tril): the matrix
    given as it is, else made from L and broadcast to the batch (_full). MultivariateNormal's
    and Wishart's (matrix.py)."""

    @property
    def scale_tril(self):
        if self._given == "scale_tril":
            return self._matrix
        return self._full(self._unbroadcasted_scale_tril)

    @property
    def covariance_matrix(self):
        if self._given == "covariance_matrix":
            return self._matrix
        low = self._unbroadcasted_scale_tril
        return self._full(low @ low.mT)


class MultivariateNormal(_ScaleTrilForms, _Gaussian):
    """N(loc, Σ) over the last dim of loc (the event), Σ given as exactly one of
    covariance_matrix, precision_matrix (Σ⁻¹) or scale_tril (L, lower-triangular with a
    positive diagonal, L Lᵀ = Σ); the batch dims of loc and the matrix broadcast, as torch's.
    Everything is computed from L (a Cholesky factor): rsample is loc + L ε, log_prob solves
    L z = value - loc, log det Σ is 2 Σ log diag L, so gradients reach loc and the matrix given.
    With validate_args, loc must not hold NaN, and the matrix must be positive-definite
    (symmetric) or, for scale_tril, lower-triangular with a positive diagonal (ValueErrors)."""

    arg_constraints = {"loc": _real_vector, "covariance_matrix": _positive_definite,
                       "precision_matrix": _positive_definite, "scale_tril": _lower_cholesky}
    support = _real_vector
    _params = ("loc",)

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = {name: m for name, m in zip(_MATRIX_FORMS, (covariance_matrix, precision_matrix,
                                                            scale_tril), strict=True)
                 if m is not None}
        loc = loc if isinstance(loc, Tensor) else tensor(loc)
        if loc.ndim < 1:
            raise ValueError("MultivariateNormal: loc must be at least one-dimensional.")
        if len(given) != 1:
            raise ValueError("MultivariateNormal: Exactly one of covariance_matrix or "
                             "precision_matrix or scale_tril may be specified.")
        (self._given, matrix), = given.items()
        loc, matrix = _tensors(loc, matrix)
        batch = _mvn_batch_shape(self._given, loc, matrix)
        n = loc.shape[-1]
        self.batch_shape, self.event_shape = batch, (n,)
        self.loc, self._matrix = loc.expand(*batch, n), matrix.expand(*batch, n, n)
        self.validate_args = validate_args is not False
        if self.validate_args:
            _refuse_outside("MultivariateNormal", "loc", self.loc, _real_vector)
            _refuse_outside("MultivariateNormal", self._given, self._matrix,
                            self.arg_constraints[self._given])
        if self._given == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif self._given == "covariance_matrix":
            self._unbroadcasted_scale_tril = cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    @property
    def precision_matrix(self):
        """Σ⁻¹ = L⁻ᵀ L⁻¹ (torch's cholesky_inverse), L⁻¹ by a triangular solve."""
        if self._given == "precision_matrix":
            return self._matrix
        low = self._unbroadcasted_scale_tril
        eye = _eye_like(low)
        low_inv = solve_triangular(low, eye.expand(*low.shape), upper=False)
        return self._full(low_inv.mT @ low_inv)

    @property
    def variance(self):
        """The diagonal of Σ: the squares of L's rows, summed."""
        return (self._unbroadcasted_scale_tril ** 2).sum(-1).expand(*self.batch_shape,
                                                                     *self.event_shape)

    def rsample(self, sample_shape=(), generator=None):
        """loc + L ε, ε ~ N(0, I): gradients reach loc and the matrix given."""
        eps = randn(*self._extended(sample_shape), generator=generator, dtype=self.loc.dtype,
                    backend=self.loc.backend)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        """-(n log 2π + |L⁻¹ (value - loc)|²) / 2 - Σ log diag L."""
        diff = self._value(value, "MultivariateNormal.log_prob") - self.loc
        low = self._unbroadcasted_scale_tril
        m = _batch_mahalanobis(low, diff)
        half_log_det = low.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self.event_shape[0] * math.log(2 * math.pi) + m) - half_log_det

    def entropy(self):
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        h = 0.5 * self.event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return h.expand(*self.batch_shape)

    def expand(self, batch_shape, _instance=None):
        """loc and the matrix given broadcast to batch_shape (views), L kept, as torch's."""
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.batch_shape = _shape(batch_shape)
        n = self.event_shape[0]
        new.loc, new._matrix = (self.loc.expand(*new.batch_shape, n),
                                self._matrix.expand(*new.batch_shape, n, n))
        return new

    def __repr__(self):
        return (f"MultivariateNormal(loc: {fmt_shape(self.loc.shape)}, {self._given}: "
                f"{fmt_shape(self._matrix.shape)})")


class LowRankMultivariateNormal(_Gaussian):
    """N(loc, Σ) over the last dim of loc with Σ = W Wᵀ + diag(D): cov_factor W (..., n, r) and
    cov_diag D (..., n), positive; the batch dims of the three broadcast, as torch's. log_prob
    and entropy never build Σ: by the Woodbury identity and the matrix determinant lemma they
    need only the r x r capacitance matrix C = I + Wᵀ D⁻¹ W and its Cholesky factor L_C
    (log det Σ = 2 Σ log diag L_C + Σ log D). rsample is loc + W ε_W + √D ε_D, so gradients
    reach all three. KL divergences with it go through its scale_tril (kl.py)."""

    arg_constraints = {"loc": _real_vector, "cov_factor": _IndependentConstraint(_real, 2),
                       "cov_diag": _IndependentConstraint(_positive, 1)}
    support = _real_vector
    _params = ("loc",)

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        loc, cov_factor, cov_diag = _tensors(loc, cov_factor, cov_diag)
        batch, n, r = _low_rank_shapes(loc, cov_factor, cov_diag)
        self.batch_shape, self.event_shape = batch, (n,)
        self.loc = loc.expand(*batch, n)
        self.cov_factor = cov_factor.expand(*batch, n, r)
        self.cov_diag = cov_diag.expand(*batch, n)
        self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag = cov_factor, cov_diag
        self.validate_args = validate_args is not False
        if self.validate_args:
            for name in ("loc", "cov_factor", "cov_diag"):
                _refuse_outside("LowRankMultivariateNormal", name, getattr(self, name),
                                self.arg_constraints[name])
        w_over_d = cov_factor / cov_diag.unsqueeze(-1)
        capacitance = cov_factor.mT @ w_over_d
        self._capacitance_tril = cholesky(capacitance + _eye_like(capacitance))

    @property
    def variance(self):
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return ((w ** 2).sum(-1) + d).expand(*self.batch_shape, *self.event_shape)

    @property
    def covariance_matrix(self):
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return self._full(w @ w.mT + diag_embed(d))

    @property
    def scale_tril(self):
        """L with L Lᵀ = Σ, as torch's: √D · cholesky(I + D^-½ W Wᵀ D^-½), whose matrix has
        eigenvalues of at least 1 (well conditioned)."""
        root = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        scaled = self._unbroadcasted_cov_factor / root
        inner = scaled @ scaled.mT
        return self._full(root * cholesky(inner + _eye_like(inner)))

    @property
    def precision_matrix(self):
        """Σ⁻¹ = D⁻¹ - D⁻¹ W C⁻¹ Wᵀ D⁻¹ (Woodbury), with A = L_C⁻¹ Wᵀ D⁻¹: D⁻¹ - Aᵀ A."""
        a = self._woodbury_factor()
        return self._full(diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - a.mT @ a)

    def _woodbury_factor(self):
        """L_C⁻¹ Wᵀ D⁻¹, (..., r, n)."""
        w_t_dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        low = self._capacitance_tril
        batch = tuple(np.broadcast_shapes(tuple(low.shape[:-2]), tuple(w_t_dinv.shape[:-2])))
        return solve_triangular(low.expand(*batch, *low.shape[-2:]),
                                w_t_dinv.expand(*batch, *w_t_dinv.shape[-2:]), upper=False)

    def _log_det(self):
        """log det Σ = 2 Σ log diag L_C + Σ log D (the matrix determinant lemma)."""
        return (2 * self._capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                + self._unbroadcasted_cov_diag.log().sum(-1))

    def rsample(self, sample_shape=(), generator=None):
        """loc + W ε_W + √D ε_D, ε_W ~ N(0, I_r), ε_D ~ N(0, I_n)."""
        shape = self._extended(sample_shape)
        like = dict(generator=generator, dtype=self.loc.dtype, backend=self.loc.backend)
        eps_w = randn(*shape[:-1], self.cov_factor.shape[-1], **like)
        eps_d = randn(*shape, **like)
        w = self._unbroadcasted_cov_factor
        return (self.loc + (w @ eps_w.unsqueeze(-1)).squeeze(-1)
                + self._unbroadcasted_cov_diag.sqrt() * eps_d)

    def log_prob(self, value):
        """-(n log 2π + log det Σ + xᵀ Σ⁻¹ x) / 2, x = value - loc, with xᵀ Σ⁻¹ x =
        Σ x² / D - |L_C⁻¹ Wᵀ D⁻¹ x|² (Woodbury)."""
        diff = self._value(value, "LowRankMultivariateNormal.log_prob") - self.loc
        d = self._unbroadcasted_cov_diag
        w_t_dinv_x = (self._unbroadcasted_cov_factor.mT @ (diff / d).unsqueeze(-1)).squeeze(-1)
        m = (diff ** 2 / d).sum(-1) - _batch_mahalanobis(self._capacitance_tril, w_t_dinv_x)
        return -0.5 * (self.event_shape[0] * math.log(2 * math.pi) + self._log_det() + m)

    def entropy(self):
        h = 0.5 * (self.event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return h.expand(*self.batch_shape)

    def expand(self, batch_shape, _instance=None):
        """loc, cov_factor and cov_diag broadcast to batch_shape (views), the factors kept."""
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.batch_shape = _shape(batch_shape)
        n, r = self.cov_factor.shape[-2:]
        new.loc = self.loc.expand(*new.batch_shape, n)
        new.cov_diag = self.cov_diag.expand(*new.batch_shape, n)
        new.cov_factor = self.cov_factor.expand(*new.batch_shape, n, r)
        return new

    def __repr__(self):
        return (f"LowRankMultivariateNormal(loc: {fmt_shape(self.loc.shape)}, cov_factor: "
                f"{fmt_shape(self.cov_factor.shape)}, cov_diag: {fmt_shape(self.cov_diag.shape)})")


def _low_rank_shapes(loc, cov_factor, cov_diag):
    """(batch_shape, n, rank) of LowRankMultivariateNormal's parameters, with torch's
    ValueErrors for a wrong number of dims, a wrong event size and batch dims that do not
    broadcast."""
    name = "LowRankMultivariateNormal"
    if loc.ndim < 1:
        raise ValueError(f"{name}: loc must be at least one-dimensional.")
    n = loc.shape[-1]
    if cov_factor.ndim < 2:
        raise ValueError(f"{name}: cov_factor must be at least two-dimensional, with optional "
                         "leading batch dimensions")
    if cov_factor.shape[-2] != n:
        raise ValueError(f"{name}: cov_factor must be a batch of matrices with shape {n} x m, "
                         f"got {fmt_shape(cov_factor.shape)}")
    if cov_diag.ndim < 1 or cov_diag.shape[-1] != n:
        raise ValueError(f"{name}: cov_diag must be a batch of vectors with shape ({n},), got "
                         f"{fmt_shape(cov_diag.shape)}")
    try:
        batch = np.broadcast_shapes(tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2]),
                                    tuple(cov_diag.shape[:-1]))
    except ValueError:
        raise ValueError(f"{name}: Incompatible batch shapes: loc {fmt_shape(loc.shape)}, "
                         f"cov_factor {fmt_shape(cov_factor.shape)}, cov_diag "
                         f"{fmt_shape(cov_diag.shape)}") from None
    return tuple(batch), n, cov_factor.shape[-1]


def _mvn_batch_shape(form, loc, matrix):
    """loc's and the matrix's batch dims broadcast (torch's errors: a ValueError for a matrix
    of fewer than 2 dims, a RuntimeError for dims that do not broadcast); a matrix that is not
    square, or of another size than loc's event, is a ValueError (torch takes it, and fails
    later)."""
    if matrix.ndim < 2:
        raise ValueError(f"MultivariateNormal: {form} matrix must be at least two-dimensional, "
                         f"with optional leading batch dimensions")
    n = loc.shape[-1]
    if tuple(matrix.shape[-2:]) != (n, n):
        raise ShapeError(f"MultivariateNormal: {form} must be (..., n, n) with n = loc's event "
                         f"size {n}, got {fmt_shape(matrix.shape)}")
    try:
        return tuple(np.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
    except ValueError:
        raise ShapeError(f"MultivariateNormal: the batch dims of {form} "
                         f"{fmt_shape(matrix.shape)} and loc {fmt_shape(loc.shape)} do not "
                         f"broadcast") from None


def _precision_to_scale_tril(precision):
    """L with L Lᵀ = P⁻¹, torch's way: the Cholesky factor of P flipped, flipped back and
    transposed is L⁻¹ (lower-triangular), and L comes from a triangular solve."""
    flipped = cholesky(precision.flip((-2, -1)))
    low_inv = flipped.flip((-2, -1)).mT
    return solve_triangular(low_inv, _eye_like(precision).expand(*low_inv.shape), upper=False)


def _batch_mahalanobis(low, x):
    """|L⁻¹ x|² over the last dim, L (..., n, n) and x (..., n) broadcast against each other."""
    n = x.shape[-1]
    batch = tuple(np.broadcast_shapes(tuple(low.shape[:-2]), tuple(x.shape[:-1])))
    z = solve_triangular(low.expand(*batch, n, n), x.expand(*batch, n).unsqueeze(-1),
                         upper=False)
    return (z.squeeze(-1) ** 2).sum(-1)
