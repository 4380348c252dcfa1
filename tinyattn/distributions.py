"""tinyattn.distributions: torch.distributions' Categorical, Normal, Bernoulli, Uniform,
Exponential, Laplace, Gamma, Beta, Independent, MultivariateNormal (from a covariance, precision
or scale_tril matrix: all through a Cholesky factor), OneHotCategorical, Poisson, Binomial,
Geometric, LogNormal, HalfNormal, Cauchy, StudentT, Dirichlet, Chi2, Weibull and Gumbel, made of
tensor ops, so log_prob, entropy, cdf and rsample (where torch has it; not Gamma's, Beta's,
Chi2's nor Dirichlet's here, and StudentT's not to df) carry gradients to the parameters;
kl_divergence with torch's closed forms between them (register_kl adds more; also as the module
`distributions.kl`), and the few constraints their support and arg_constraints name (Real,
Boolean, Interval...).

    dist = Categorical(logits=model(x)[:, -1])   # the next-token distribution
    token = dist.sample()                        # int64, no gradient
    loss = -dist.log_prob(token).mean()          # REINFORCE-style, differentiable
    z = Independent(Normal(mu, sigma), 1)        # a diagonal Gaussian: log_prob sums the dims

Parameters are validated when made, and values when scored, as torch's validate_args does by
default (a ValueError); validate_args=False takes them as they are.
"""

import math
import numbers
import sys
import types
import warnings

import numpy as np

from . import functional as F
from .autograd import is_grad_enabled, no_grad
from .dtypes import result_type
from .errors import ShapeError, fmt_shape
from .generator import check as check_generator
from .generator import rng_of
from .linalg import cholesky, solve_triangular
from .tensor import Tensor, arange, eye, full, multinomial, rand, randn, tensor, zeros

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet",
           "Exponential", "Gamma", "Geometric", "Gumbel", "HalfNormal", "Independent", "Laplace",
           "LogNormal", "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson",
           "StudentT", "Uniform", "Weibull", "kl_divergence", "register_kl"]


class _Constraint:
    """torch.distributions.constraints' few: check(value) is a bool tensor, True where value
    lies in the set; the bounds (numbers or tensors) are attributes, as torch's."""

    event_dim = 0

    def __init__(self, name, test, is_discrete=False, **bounds):
        self._name, self._test, self.is_discrete, self._bounds = name, test, is_discrete, bounds
        self.__dict__.update(bounds)

    def check(self, value):
        return self._test(value, *self._bounds.values())

    def __repr__(self):
        bounds = ", ".join(f"{k}={fmt_shape(v.shape) if isinstance(v, Tensor) else v}"
                           for k, v in self._bounds.items())
        return f"{self._name}({bounds})"


class _IndependentConstraint:
    """torch's constraints.independent: a value holds where the base constraint holds over all
    of its last reinterpreted_batch_ndims dims."""

    is_discrete = False

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint, self.reinterpreted_batch_ndims = (base_constraint,
                                                                reinterpreted_batch_ndims)
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        good, n = self.base_constraint.check(value), self.reinterpreted_batch_ndims
        return good.reshape(*good.shape[:good.ndim - n], -1).all(-1)

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


def _interval(low, high):
    return _Constraint("Interval", lambda v, lo, hi: (v >= lo) & (v <= hi),
                       lower_bound=low, upper_bound=high)


def _greater_than(low):
    return _Constraint("GreaterThan", lambda v, lo: v > lo, lower_bound=low)


def _less_than(high):
    return _Constraint("LessThan", lambda v, hi: v < hi, upper_bound=high)


_real = _Constraint("Real", lambda v: v == v)  # (all but NaN, as torch's)
_boolean = _Constraint("Boolean", lambda v: (v == 0) | (v == 1), is_discrete=True)
_unit_interval = _interval(0.0, 1.0)
_positive = _greater_than(0.0)
_nonnegative = _Constraint("GreaterThanEq", lambda v, lo: v >= lo, lower_bound=0.0)
_real_vector = _IndependentConstraint(_real, 1)
_nonnegative_integer = _Constraint("IntegerGreaterThan", lambda v, lo: ((v % 1) == 0) & (v >= lo),
                                   is_discrete=True, lower_bound=0)
_simplex = _Constraint("Simplex", lambda v: (v >= 0).all(-1) & ((v.sum(-1) - 1).abs() < 1e-6))
_one_hot = _Constraint("OneHot", lambda v: ((v == 0) | (v == 1)).all(-1) & (v.sum(-1) == 1),
                       is_discrete=True)
_simplex.event_dim = _one_hot.event_dim = 1


def _matrix_constraint(name, test):
    """A constraint on the last two dims (event_dim 2): `test` maps a NumPy array (..., n, n)
    to a bool array (...)."""
    made = _Constraint(name, lambda v: tensor(test(np.asarray(v.detach().numpy())),
                                              backend=v.backend))
    made.event_dim = 2
    return made


def _is_positive_definite(a):
    """torch's constraints.positive_definite: symmetric (to 1e-6) and with a Cholesky factor."""
    finite = np.isfinite(a).all((-2, -1))
    symmetric = np.isclose(a, np.swapaxes(a, -1, -2), atol=1e-6).all((-2, -1))
    eig = np.linalg.eigvalsh(np.where(np.isfinite(a), a, 0.0))
    return finite & symmetric & (eig.min(-1, initial=np.inf) > 0)


def _is_lower_cholesky(a):
    """torch's constraints.lower_cholesky: lower-triangular with a positive diagonal."""
    lower = (np.tril(a) == a).all((-2, -1))
    return lower & (np.diagonal(a, axis1=-2, axis2=-1) > 0).all(-1)


_positive_definite = _matrix_constraint("PositiveDefinite", _is_positive_definite)
_lower_cholesky = _matrix_constraint("LowerCholesky", _is_lower_cholesky)


class Categorical:
    """Categories 0..K-1 of the last dim of `probs` (weights, normalised here) or of `logits`
    (log-weights); the dims before it are the batch. Like torch (validate_args), bad parameters
    are refused when made: NaN, inf or negative probs, NaN or +inf logits, impossible rows."""

    has_rsample = False  # a draw is an index: no gradient flows through it
    has_enumerate_support = True  # (torch's: enumerate_support() lists the categories)

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Categorical: give either probs or logits, not both or neither")
        given = probs if logits is None else logits
        if not isinstance(given, Tensor):
            given = tensor(given)
        if given.ndim < 1 or given.shape[-1] < 1:
            raise ShapeError(f"Categorical: {'probs' if logits is None else 'logits'} need a "
                             f"last dim of categories, got {fmt_shape(given.shape)}")
        self.validate_args = validate_args is not False
        if self.validate_args:
            _check_categorical(given, "probs" if logits is None else "logits")
        self._given = "probs" if logits is None else "logits"  # (what repr names, as torch's)
        if logits is None:
            self.probs = given / given.sum(-1, keepdim=True)
            eps = float(np.finfo(self.probs.dtype).eps)  # torch's clamp: log 0 -> log eps
            self.logits = self.probs.clamp(eps, 1 - eps).log()
        else:
            self.logits = given - given.logsumexp(-1, keepdim=True)  # log-probabilities
            self.probs = self.logits.exp()

    @property
    def batch_shape(self):
        return self.probs.shape[:-1]

    @property
    def event_shape(self):
        return ()

    @property
    def param_shape(self):
        return self.probs.shape

    @property
    def mode(self):
        """The most likely category of each batch entry (torch's: argmax of probs, int64)."""
        return self.probs.detach().argmax(-1)

    def sample(self, sample_shape=(), generator=None):
        """Category indices of shape sample_shape + batch_shape (int64, no gradient)."""
        shape = _shape(sample_shape)
        k = self.probs.shape[-1]
        n = math.prod(shape)
        with no_grad():
            flat = self.probs.detach().reshape(-1, k)
            draws = multinomial(flat, max(n, 1), replacement=True, generator=generator)  # (B, n)
            draws = draws[:, :n].T  # (n, B)
        return draws.reshape(*shape, *self.batch_shape)

    def log_prob(self, value):
        """log P(value): value holds category indices, broadcast against batch_shape. As torch's
        support check: bools are 0 and 1, whole floats are taken; anything else is a ValueError."""
        value = value if isinstance(value, Tensor) else tensor(value)
        k = self.logits.shape[-1]
        if value.dtype.kind == "f":  # whole numbers stored as floats (torch takes them)
            _check("Categorical.log_prob", "value", value,
                   lambda a: np.isfinite(a) & (a == np.round(a)),
                   "must hold category indices (whole numbers)")
            value = value.detach().long()
        elif value.dtype.kind == "b":
            value = value.detach().long()
        elif value.dtype.kind not in "iu":
            raise ValueError(f"Categorical.log_prob: value must hold category indices "
                             f"(integers), got {value.dtype}")
        if self.validate_args:
            _check("Categorical.log_prob", "value", value, lambda a: (a >= 0) & (a < k),
                   f"is outside the categories 0..{k - 1}")
        shape = np.broadcast_shapes(value.shape, self.batch_shape)
        logits = self.logits.expand(*shape, k)
        index = value.expand(*shape).unsqueeze(-1)
        return logits.gather(-1, index).squeeze(-1)

    def entropy(self):
        """-Σ p log p over the categories (a category of probability 0 adds 0)."""
        finite = self.logits.clamp(min=float(np.finfo(self.logits.dtype).min))
        return -(finite * self.probs).sum(-1)

    def perplexity(self):
        """exp(entropy()), torch's."""
        return self.entropy().exp()

    @property
    def mean(self):
        """NaN of batch_shape (a category has no mean), as torch's."""
        return full(self.batch_shape, math.nan, dtype=self.probs.dtype,
                    backend=self.probs.backend)

    @property
    def variance(self):
        return self.mean

    @property
    def support(self):
        """The categories 0..K-1, as torch's constraints.integer_interval."""
        return _IntegerInterval(0, self.probs.shape[-1] - 1)

    def enumerate_support(self, expand=True):
        """The categories 0..K-1 (int64) of shape (K, 1, ...) with a 1 per batch dim, expanded
        to (K, *batch_shape) with expand=True (torch's)."""
        batch = tuple(self.batch_shape)
        values = arange(self.probs.shape[-1], backend=self.probs.backend)
        values = values.reshape(-1, *(1,) * len(batch))
        return values.expand(-1, *batch) if expand else values

    def expand(self, batch_shape, _instance=None):
        """The same distribution over a larger batch_shape (probs and logits expanded: views,
        so gradients reach the original parameters), as torch's."""
        new = _instance or object.__new__(type(self))
        k = self.probs.shape[-1]
        new.probs = self.probs.expand(*_shape(batch_shape), k)
        new.logits = self.logits.expand(*_shape(batch_shape), k)
        new.validate_args, new._given = self.validate_args, self._given
        return new

    def sample_n(self, n):
        """sample((n,)), with torch's FutureWarning."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
                      FutureWarning, stacklevel=2)
        return self.sample((n,))

    def __repr__(self):
        given = getattr(self, "_given", "probs")
        return f"Categorical({given}: {fmt_shape(getattr(self, given).shape)})"


class Normal:
    """N(loc, scale²), loc and scale tensors or numbers that broadcast; a NaN loc, or a scale
    that is not finite and > 0, is refused when made (validate_args=False takes them). As torch's
    broadcast_all: a number takes the other (tensor) parameter's float dtype and backend, and
    loc and scale are broadcast to batch_shape (views, so gradients reach the given tensors)."""

    has_rsample = True  # rsample: loc + scale ε carries gradients to loc and scale
    has_enumerate_support = False
    arg_constraints = {"loc": _real, "scale": _positive}  # (torch's; as checked: scale finite)
    support = _real

    def __init__(self, loc, scale, validate_args=None):
        loc, scale = _tensors(loc, scale)
        self.validate_args = validate_args is not False
        if self.validate_args:
            _check("Normal", "loc", loc, lambda a: ~np.isnan(a), "must not be NaN")
            _check("Normal", "scale", scale, lambda a: np.isfinite(a) & (a > 0),
                   "must be > 0 and finite")
        self.batch_shape = tuple(np.broadcast_shapes(loc.shape, scale.shape))
        self.loc, self.scale = loc.expand(*self.batch_shape), scale.expand(*self.batch_shape)

    def expand(self, batch_shape, _instance=None):
        """This Normal with loc and scale broadcast to batch_shape (views: gradients reach the
        parameters given); a shape they do not broadcast to is refused, as torch's."""
        shape = _shape(batch_shape)
        return Normal(self.loc.expand(*shape), self.scale.expand(*shape),
                      validate_args=self.validate_args and None)

    @property
    def event_shape(self):
        return ()  # one number per batch entry, as Categorical's

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev ** 2

    def rsample(self, sample_shape=(), generator=None):
        """loc + scale ε, ε ~ N(0, 1): a sample the gradient flows through (reparameterized)."""
        eps = randn(*_shape(sample_shape), *self.batch_shape, generator=generator,
                    dtype=self.loc.dtype, backend=self.loc.backend)
        return self.loc + self.scale * eps

    def sample(self, sample_shape=(), generator=None):
        with no_grad():
            return self.rsample(sample_shape, generator).detach()

    def log_prob(self, value):
        """-(value - loc)² / 2 scale² - log scale - log √(2π); a number stays a number and a list
        takes loc's dtype (neither rounds to float32 before meeting a float64 loc). A NaN value is
        refused, as torch's."""
        if not isinstance(value, (Tensor, numbers.Real)):  # (a list: in loc's float dtype)
            value = tensor(value, dtype=result_type(self.loc, 0.0), backend=self.loc.backend)
        if self.validate_args:
            _check("Normal.log_prob", "value", value if isinstance(value, Tensor) else
                   tensor(value), lambda a: ~np.isnan(a), "must not be NaN")
        z = (value - self.loc) / self.scale
        return -0.5 * z * z - self.scale.log() - 0.5 * math.log(2 * math.pi)

    def cdf(self, value):
        """P(X <= value) = (1 + erf((value - loc) / (scale √2))) / 2, differentiable in loc and
        scale; a NaN value is refused, as torch's (validate_args)."""
        value = self._value(value, "Normal.cdf")
        return 0.5 * (1 + ((value - self.loc) / (self.scale * math.sqrt(2))).erf())

    def icdf(self, value):
        """The quantile of probability `value`: loc + scale √2 erfinv(2 value - 1) (torch's: no
        check of value; one outside [0, 1] gives NaN)."""
        value = value if isinstance(value, (Tensor, numbers.Real)) else self._value(value, None)
        q = 2 * value - 1
        q = q if isinstance(q, Tensor) else tensor(float(q), dtype=self.loc.dtype,
                                                    backend=self.loc.backend)
        return self.loc + self.scale * q.erfinv() * math.sqrt(2)

    def _value(self, value, name):
        """A list in loc's float dtype; with validate_args (and a name), NaN refused."""
        if not isinstance(value, (Tensor, numbers.Real)):
            value = tensor(value, dtype=result_type(self.loc, 0.0), backend=self.loc.backend)
        if name and self.validate_args:
            _check(name, "value", value if isinstance(value, Tensor) else tensor(value),
                   lambda a: ~np.isnan(a), "must not be NaN")
        return value

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    def __repr__(self):
        return f"Normal(loc: {fmt_shape(self.loc.shape)}, scale: {fmt_shape(self.scale.shape)})"


class _Distribution:
    """What the distributions below share, as torch's Distribution: parameters made tensors
    (numbers take a tensor parameter's dtype) and broadcast to batch_shape (views, so gradients
    reach the given tensors), checked against arg_constraints when made, and values checked
    against the support (and batch_shape) when scored, both with validate_args (the default)."""

    has_rsample = True
    has_enumerate_support = False
    event_shape = ()
    _params = ()  # the parameters' names, the first giving dtype and backend

    def _init(self, validate_args, **params):
        values = _tensors(*params.values())
        self.batch_shape = tuple(np.broadcast_shapes(*(v.shape for v in values)))
        for name, v in zip(params, values, strict=True):
            setattr(self, name, v.expand(*self.batch_shape))
        self.validate_args = validate_args is not False
        if self.validate_args:
            for name in params:
                _refuse_outside(type(self).__name__, name, getattr(self, name),
                                self.arg_constraints[name])

    @property
    def _like(self):
        return getattr(self, self._params[0])

    def _extended(self, sample_shape):
        return _shape(sample_shape) + tuple(self.batch_shape) + tuple(self.event_shape)

    def _value(self, value, where):
        """value as a tensor (a number or list in the parameters' float dtype); with a `where`
        and validate_args, one that does not broadcast to batch_shape + event_shape or lies
        outside the support is a ValueError, as torch's."""
        like = self._like
        if not isinstance(value, Tensor):
            value = tensor(value, dtype=result_type(like, 0.0), backend=like.backend)
        if where and self.validate_args:
            event = tuple(self.event_shape)
            if event and tuple(value.shape[value.ndim - len(event):]) != event:
                raise ValueError(f"{where}: value of shape {fmt_shape(value.shape)} must end in "
                                 f"event_shape {fmt_shape(event)}")
            full_shape = tuple(self.batch_shape) + event
            try:
                np.broadcast_shapes(value.shape, full_shape)
            except ValueError:
                raise ValueError(f"{where}: value of shape {fmt_shape(value.shape)} does not "
                                 f"broadcast to batch_shape + event_shape "
                                 f"{fmt_shape(full_shape)}") from None
            _refuse_outside(where, "value", value, self.support)
        return value

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=(), generator=None):
        """rsample's draw, without its gradient."""
        with no_grad():
            return self.rsample(sample_shape, generator).detach()

    def rsample(self, sample_shape=(), generator=None):
        raise NotImplementedError(f"{type(self).__name__} has no rsample")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} has no entropy")

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} has no cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} has no icdf")

    def perplexity(self):
        return self.entropy().exp()

    def expand(self, batch_shape, _instance=None):
        """This distribution with its parameters broadcast to batch_shape (views: gradients
        reach the parameters given), as torch's; not validated again."""
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.batch_shape = _shape(batch_shape)
        for name in self._params:
            setattr(new, name, getattr(self, name).expand(*new.batch_shape))
        new._derive()
        return new

    def _derive(self):
        """Remake what is built from the parameters (a base distribution), after expand."""

    def sample_n(self, n):
        """sample((n,)), with torch's FutureWarning."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
                      FutureWarning, stacklevel=2)
        return self.sample((n,))

    def __repr__(self):
        params = ", ".join(f"{name}: {fmt_shape(getattr(self, name).shape)}"
                           for name in self._params)
        return f"{type(self).__name__}({params})"


class Bernoulli(_Distribution):
    """1 with probability `probs`, 0 otherwise; or from `logits` (log-odds), not both. log_prob
    is -binary_cross_entropy_with_logits(logits, value): finite at logits of ±100. The other
    parameter is made from the given one as torch's: probs = sigmoid(logits), or logits =
    log p - log(1 - p) of probs clamped to [eps, 1 - eps]."""

    has_rsample = False  # a draw is 0 or 1: no gradient flows through it
    has_enumerate_support = True
    arg_constraints = {"probs": _unit_interval, "logits": _real}
    support = _boolean
    _params = ("probs", "logits")

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Bernoulli: either `probs` or `logits` must be specified, "
                             "but not both")
        self._given = "probs" if logits is None else "logits"  # (what repr names, as torch's)
        self._init(validate_args, **{self._given: probs if logits is None else logits})
        if logits is None:
            eps = float(np.finfo(self.probs.dtype).eps)
            clamped = self.probs.clamp(eps, 1 - eps)
            self.logits = clamped.log() - (-clamped).log1p()
        else:
            self.probs = self.logits.sigmoid()

    @property
    def _like(self):
        return getattr(self, self._given)

    @property
    def param_shape(self):
        return self._like.shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        """1 where probs > 1/2, 0 where below, NaN at 1/2 (torch's)."""
        p = self.probs.detach()
        return (p >= 0.5).to(p.dtype).masked_fill(p == 0.5, math.nan)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=(), generator=None):
        """0s and 1s (in probs' dtype) of shape sample_shape + batch_shape, no gradient."""
        shape = self._extended(sample_shape)
        with no_grad():
            return self.probs.detach().expand(*shape).bernoulli(generator=generator)

    def log_prob(self, value):
        """log P(value) for values 0 and 1 (bools and integers taken, as floats)."""
        value = self._value(value, "Bernoulli.log_prob")
        if value.dtype != self.logits.dtype:
            value = value.to(self.logits.dtype)
        shape = tuple(np.broadcast_shapes(value.shape, self.logits.shape))
        return -F.binary_cross_entropy_with_logits(self.logits.expand(*shape),
                                                   value.expand(*shape), reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        """0. and 1. of shape (2, 1, ...) with a 1 per batch dim, expanded to (2, *batch_shape)
        with expand=True (torch's)."""
        batch, like = tuple(self.batch_shape), self._like
        values = arange(2, dtype=result_type(like, 0.0), backend=like.backend)
        values = values.reshape(-1, *(1,) * len(batch))
        return values.expand(-1, *batch) if expand else values

    def __repr__(self):
        return f"Bernoulli({self._given}: {fmt_shape(self._like.shape)})"


class Uniform(_Distribution):
    """Uniform on [low, high); low < high checked when made. log_prob is -inf at high (and,
    without validate_args, outside); with it, a value outside [low, high] is a ValueError, as
    torch's (whose support is the closed interval)."""

    _params = ("low", "high")

    def __init__(self, low, high, validate_args=None):
        self._init(validate_args, low=low, high=high)

    @property
    def arg_constraints(self):
        return {"low": _less_than(self.high), "high": _greater_than(self.low)}

    @property
    def support(self):
        return _interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        """NaN (every value is a mode), as torch's."""
        return full(self.batch_shape, math.nan, dtype=self.low.dtype, backend=self.low.backend)

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape=(), generator=None):
        """low + u (high - low), u ~ U[0, 1): gradients reach low and high."""
        u = rand(*self._extended(sample_shape), generator=generator, dtype=self.low.dtype,
                 backend=self.low.backend)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        value = self._value(value, "Uniform.log_prob")
        inside = (self.low <= value).to(self.low.dtype) * (self.high > value).to(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def cdf(self, value):
        value = self._value(value, "Uniform.cdf")
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)

    def icdf(self, value):
        return self._value(value, None) * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()


class Exponential(_Distribution):
    """rate e^(-rate x) on x >= 0; rate > 0 checked when made (inf taken, as torch's)."""

    arg_constraints = {"rate": _positive}
    support = _nonnegative
    _params = ("rate",)

    def __init__(self, rate, validate_args=None):
        self._init(validate_args, rate=rate)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return zeros(*self.batch_shape, dtype=self.rate.dtype, backend=self.rate.backend)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate ** -2

    def rsample(self, sample_shape=(), generator=None):
        """E / rate, E ~ Exponential(1): gradients reach rate."""
        e = zeros(*self._extended(sample_shape), dtype=self.rate.dtype, backend=self.rate.backend)
        return e.exponential_(generator=generator) / self.rate

    def log_prob(self, value):
        value = self._value(value, "Exponential.log_prob")
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        value = self._value(value, "Exponential.cdf")
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-self._value(value, None)).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()


class Laplace(_Distribution):
    """e^(-|x - loc| / scale) / 2 scale; loc not NaN and scale > 0 checked when made (inf
    taken, as torch's)."""

    arg_constraints = {"loc": _real, "scale": _positive}
    support = _real
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init(validate_args, loc=loc, scale=scale)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return 2 ** 0.5 * self.scale

    @property
    def variance(self):
        return 2 * self.scale ** 2

    def rsample(self, sample_shape=(), generator=None):
        """loc - scale sign(u) log(1 - |u|), u ~ U[eps - 1, 1) (torch's): gradients reach loc
        and scale."""
        eps = float(np.finfo(self.loc.dtype).eps)
        u = zeros(*self._extended(sample_shape), dtype=self.loc.dtype, backend=self.loc.backend)
        u = u.uniform_(eps - 1, 1, generator=generator)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        value = self._value(value, "Laplace.log_prob")
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        d = self._value(value, "Laplace.cdf") - self.loc
        return 0.5 - 0.5 * d.sign() * (-d.abs() / self.scale).expm1()

    def icdf(self, value):
        term = self._value(value, None) - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


class Gamma(_Distribution):
    """rate^a x^(a-1) e^(-rate x) / Γ(a) on x >= 0, a = concentration; both > 0 checked when
    made. Unlike torch's, no rsample (torch's is an implicit reparameterisation, not made here)
    and no cdf (no regularised incomplete gamma function among tinyattn's ops)."""

    has_rsample = False
    arg_constraints = {"concentration": _positive, "rate": _positive}
    support = _nonnegative
    _params = ("concentration", "rate")

    def __init__(self, concentration, rate, validate_args=None):
        self._init(validate_args, concentration=concentration, rate=rate)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate ** 2

    def sample(self, sample_shape=(), generator=None):
        """Draws of shape sample_shape + batch_shape (no gradient), at least the dtype's
        smallest normal number, as torch's."""
        shape = self._extended(sample_shape)
        draws = _standard_gamma(self.concentration, shape, generator, "Gamma.sample")
        with no_grad():
            value = draws / self.rate.detach()
            return value.clamp(min=float(np.finfo(value.dtype).tiny))

    def log_prob(self, value):
        value = self._value(value, "Gamma.log_prob")
        a, rate = self.concentration, self.rate
        return a.xlogy(rate) + (a - 1).xlogy(value) - rate * value - a.lgamma()

    def entropy(self):
        a = self.concentration
        return a - self.rate.log() + a.lgamma() + (1.0 - a) * a.digamma()


class Beta(_Distribution):
    """x^(a-1) (1-x)^(b-1) / B(a, b) on [0, 1], a = concentration1, b = concentration0; both
    > 0 checked when made. Unlike torch's, no rsample (torch's goes through Dirichlet's
    implicit reparameterisation, not made here)."""

    has_rsample = False
    arg_constraints = {"concentration1": _positive, "concentration0": _positive}
    support = _unit_interval
    _params = ("concentration1", "concentration0")

    def __init__(self, concentration1, concentration0, validate_args=None):
        self._init(validate_args, concentration1=concentration1, concentration0=concentration0)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        """(a-1) / (a+b-2), a and b less 1 clamped at 0; 1 where both are below 1 (torch's,
        from Dirichlet's mode: the first category)."""
        a, b = self.concentration1.detach(), self.concentration0.detach()
        am1, bm1 = (a - 1).clamp(min=0), (b - 1).clamp(min=0)
        return (am1 / (am1 + bm1)).masked_fill((a < 1) & (b < 1), 1.0)

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total ** 2 * (total + 1))

    def sample(self, sample_shape=(), generator=None):
        """X / (X + Y), X ~ Gamma(a), Y ~ Gamma(b), in [tiny, 1 - eps] (no gradient)."""
        shape = self._extended(sample_shape)
        x = _standard_gamma(self.concentration1, shape, generator, "Beta.sample")
        y = _standard_gamma(self.concentration0, shape, generator, "Beta.sample")
        with no_grad():
            finfo = np.finfo(x.dtype)
            return (x / (x + y)).clamp(float(finfo.tiny), 1 - float(finfo.eps))

    def log_prob(self, value):
        value = self._value(value, "Beta.log_prob")
        a, b = self.concentration1, self.concentration0
        return ((a - 1).xlogy(value) + (b - 1).xlogy(1 - value) + (a + b).lgamma() - a.lgamma()
                - b.lgamma())

    def entropy(self):
        """Dirichlet's entropy for two categories, as torch's."""
        a, b = self.concentration1, self.concentration0
        total = a + b
        return (a.lgamma() + b.lgamma() - total.lgamma() - (2 - total) * total.digamma()
                - (a - 1) * a.digamma() - (b - 1) * b.digamma())


def _standard_gamma(concentration, shape, generator, where):
    """Gamma(concentration, 1) draws of `shape` (no gradient) from `generator` or the
    backend's own stream, in concentration's dtype: the backend's standard_gamma."""
    be = concentration.backend
    rng = rng_of(be, check_generator(generator, be, where))
    a = be.xp.broadcast_to(concentration.detach()._data, shape)
    draws = be.xp.asarray(rng.standard_gamma(a)).astype(concentration.dtype, copy=False)
    return tensor(draws, dtype=concentration.dtype, backend=be)


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


class MultivariateNormal(_Distribution):
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

    def _full(self, matrix):
        return matrix.expand(*self.batch_shape, *self.event_shape, *self.event_shape)

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
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

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


def _eye_like(matrix):
    return eye(matrix.shape[-1], dtype=matrix.dtype, backend=matrix.backend)


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


class OneHotCategorical(_Distribution):
    """Categorical's draws as one-hot vectors over the last dim (the event, of size K): built
    on a Categorical of the same probs or logits (its checks, as torch's), so log_prob (the
    logit at the value's hot index) and entropy carry gradients to them."""

    has_rsample = False
    has_enumerate_support = True
    arg_constraints = {"probs": _simplex, "logits": _real_vector}
    support = _one_hot
    _params = ("probs",)

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        self.batch_shape = tuple(self._categorical.batch_shape)
        self.event_shape = tuple(self._categorical.param_shape[-1:])
        self.validate_args = validate_args is not False

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        """The most likely category, one-hot (in probs' dtype, no gradient)."""
        return _eye_like(self.probs)[self._categorical.mode]

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=(), generator=None):
        """One-hot rows (in probs' dtype) of shape sample_shape + batch_shape + (K,)."""
        with no_grad():
            return _eye_like(self.probs)[self._categorical.sample(sample_shape, generator)]

    def log_prob(self, value):
        value = self._value(value, "OneHotCategorical.log_prob")
        return self._categorical.log_prob(value.detach().argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        """The K one-hot rows, of shape (K, 1, ..., K) with a 1 per batch dim, expanded to
        (K, *batch_shape, K) with expand=True (torch's)."""
        k, batch = self.event_shape[0], tuple(self.batch_shape)
        values = _eye_like(self.probs).reshape(k, *(1,) * len(batch), k)
        return values.expand(k, *batch, k) if expand else values

    def expand(self, batch_shape, _instance=None):
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._categorical = self._categorical.expand(batch_shape)
        new.batch_shape = _shape(batch_shape)
        return new

    def __repr__(self):
        given = self._categorical._given
        return f"OneHotCategorical({given}: {fmt_shape(getattr(self, given).shape)})"


def _binary_pair(dist):
    """The parameter of probs and logits not given, made from the one given as torch's
    probs_to_logits and logits_to_probs (is_binary): probs clamped to [eps, 1 - eps]."""
    if dist._given == "probs":
        eps = float(np.finfo(dist.probs.dtype).eps)
        clamped = dist.probs.clamp(eps, 1 - eps)
        dist.logits = clamped.log() - (-clamped).log1p()
    else:
        dist.probs = dist.logits.sigmoid()


def _drawn(like, shape, generator, where, draw, *params):
    """draw(rng, *params broadcast to shape) from `generator` or the backend's own stream, as
    a tensor of like's dtype and backend (no gradient)."""
    be = like.backend
    rng = rng_of(be, check_generator(generator, be, where))
    arrays = [be.xp.broadcast_to(p.detach()._data, shape) for p in params]
    out = be.xp.asarray(draw(rng, *arrays)).astype(like.dtype, copy=False)
    return tensor(out, dtype=like.dtype, backend=be)


class Poisson(_Distribution):
    """rate^k e^(-rate) / k! on k = 0, 1, ...; rate >= 0 checked when made. log_prob
    (k log rate - rate - lgamma(k + 1)) carries the gradient to rate; draws come from the
    generator (the backend's poisson). No entropy, as torch's."""

    has_rsample = False
    arg_constraints = {"rate": _nonnegative}
    support = _nonnegative_integer
    _params = ("rate",)

    def __init__(self, rate, validate_args=None):
        self._init(validate_args, rate=rate)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=(), generator=None):
        """Counts (in rate's dtype) of shape sample_shape + batch_shape, no gradient."""
        return _drawn(self.rate, self._extended(sample_shape), generator, "Poisson.sample",
                      lambda rng, rate: rng.poisson(rate), self.rate)

    def log_prob(self, value):
        value = _as_dtype(self._value(value, "Poisson.log_prob"), self.rate)
        return value.xlogy(self.rate) - self.rate - (value + 1).lgamma()


def _as_dtype(value, like):
    return value if value.dtype == like.dtype else value.to(like.dtype)


def _clamp_by_zero(x):
    """max(x, 0) with the gradient 1/2 at 0 (torch's)."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(_Distribution):
    """The number of successes in total_count trials, each a success with probability `probs`
    (or from `logits`, not both); total_count (a whole number >= 0) and the parameter broadcast,
    total_count taking the parameter's dtype, as torch's. log_prob carries the gradient to probs
    or logits; entropy and enumerate_support need one total_count for all (torch's)."""

    has_rsample = False
    has_enumerate_support = True
    arg_constraints = {"total_count": _nonnegative_integer, "probs": _unit_interval,
                       "logits": _real}
    _params = ("total_count", "probs", "logits")

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Binomial: either `probs` or `logits` must be specified, "
                             "but not both")
        self._given = "probs" if logits is None else "logits"
        self._init(validate_args, total_count=total_count,
                   **{self._given: probs if logits is None else logits})
        self.total_count = _as_dtype(self.total_count, self._like)
        _binary_pair(self)

    @property
    def _like(self):
        return getattr(self, self._given)

    @property
    def param_shape(self):
        return self._like.shape

    @property
    def support(self):
        return _IntegerInterval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=(), generator=None):
        """Counts (in the parameter's dtype) of shape sample_shape + batch_shape, no gradient."""
        return _drawn(self._like, self._extended(sample_shape), generator, "Binomial.sample",
                      lambda rng, n, p: rng.binomial(n.astype(np.int64), p), self.total_count,
                      self.probs)

    def log_prob(self, value):
        value = _as_dtype(self._value(value, "Binomial.log_prob"), self._like)
        n, logits = self.total_count, self.logits
        normalize = (n * _clamp_by_zero(logits) + n * (-logits.abs()).exp().log1p()
                     - (n + 1).lgamma())
        return value * logits - (value + 1).lgamma() - (n - value + 1).lgamma() - normalize

    def entropy(self):
        """-Σ P(k) log P(k) over k = 0..total_count."""
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        """0..total_count (one total_count for all), of shape (total_count + 1, 1, ...) with a
        1 per batch dim, expanded to (total_count + 1, *batch_shape) with expand=True."""
        counts = self.total_count.detach()
        total = int(counts.max().item())
        if counts.min().item() != total:
            raise NotImplementedError("Inhomogeneous total count not supported by "
                                      "`enumerate_support`.")
        batch, like = tuple(self.batch_shape), self._like
        values = arange(1 + total, dtype=like.dtype, backend=like.backend)
        values = values.reshape(-1, *(1,) * len(batch))
        return values.expand(-1, *batch) if expand else values

    def __repr__(self):
        return (f"Binomial(total_count: {fmt_shape(self.total_count.shape)}, {self._given}: "
                f"{fmt_shape(self._like.shape)})")


class Geometric(_Distribution):
    """The number of failures before the first success, each trial a success with probability
    `probs` (0 < probs <= 1, checked when made) or from `logits`, not both: P(k) = (1-p)^k p
    on k = 0, 1, ... (torch's; Tensor.geometric_ counts the trials instead)."""

    has_rsample = False
    arg_constraints = {"probs": _unit_interval, "logits": _real}
    support = _nonnegative_integer
    _params = ("probs", "logits")

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Geometric: either `probs` or `logits` must be specified, "
                             "but not both")
        self._given = "probs" if logits is None else "logits"
        self._init(validate_args, **{self._given: probs if logits is None else logits})
        if self.validate_args and logits is None:
            _check("Geometric", "probs", self.probs, lambda a: a > 0, "must be positive")
        _binary_pair(self)

    @property
    def _like(self):
        return getattr(self, self._given)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return zeros(*self.batch_shape, dtype=self.probs.dtype, backend=self.probs.backend)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=(), generator=None):
        """floor(log u / log(1 - p)), u ~ U[tiny, 1) (torch's), no gradient."""
        p = self.probs.detach()
        u = rand(*self._extended(sample_shape), generator=generator, dtype=p.dtype,
                 backend=p.backend)
        with no_grad():
            u = u.clamp(min=float(np.finfo(p.dtype).tiny))
            return (u.log() / (-p).log1p()).floor()

    def log_prob(self, value):
        """k log(1 - p) + log p (0 at k = 0 where p = 1, as torch's)."""
        value = _as_dtype(self._value(value, "Geometric.log_prob"), self.probs)
        probs = _fill(self.probs, (self.probs == 1) & (value == 0), 0.0)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs,
                                                  reduction="none") / self.probs

    def __repr__(self):
        return f"Geometric({self._given}: {fmt_shape(self._like.shape)})"


_EULER = 0.57721566490153286060  # the Euler-Mascheroni constant (torch's euler_constant)


class LogNormal(_Distribution):
    """exp(X), X ~ Normal(loc, scale) (torch's: a TransformedDistribution of Normal by exp):
    rsample is the exp of Normal's, so gradients reach loc and scale; log_prob is Normal's at
    log value, less log value; cdf and icdf go through Normal's."""

    arg_constraints = {"loc": _real, "scale": _positive}
    support = _positive
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init(validate_args, loc=loc, scale=scale)
        self._derive()

    def _derive(self):
        self.base_dist = Normal(self.loc, self.scale, validate_args=False)

    @property
    def mean(self):
        return (self.loc + self.scale ** 2 / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale ** 2).exp()

    @property
    def variance(self):
        scale_sq = self.scale ** 2
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def rsample(self, sample_shape=(), generator=None):
        return self.base_dist.rsample(sample_shape, generator).exp()

    def log_prob(self, value):
        x = self._value(value, "LogNormal.log_prob").log()
        return self.base_dist.log_prob(x) - x

    def cdf(self, value):
        return self.base_dist.cdf(self._value(value, "LogNormal.cdf").log())

    def icdf(self, value):
        return self.base_dist.icdf(self._value(value, None)).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class HalfNormal(_Distribution):
    """|X|, X ~ Normal(0, scale) (torch's TransformedDistribution by abs): rsample is |Normal's
    rsample|, gradients reaching scale; log_prob is Normal's + log 2 on value >= 0 (-inf below,
    without validate_args)."""

    arg_constraints = {"scale": _positive}
    support = _nonnegative
    _params = ("scale",)

    def __init__(self, scale, validate_args=None):
        self._init(validate_args, scale=scale)
        self._derive()

    def _derive(self):
        self.base_dist = Normal(0.0, self.scale, validate_args=False)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return zeros(*self.batch_shape, dtype=self.scale.dtype, backend=self.scale.backend)

    @property
    def variance(self):
        return self.scale ** 2 * (1 - 2 / math.pi)

    def rsample(self, sample_shape=(), generator=None):
        return self.base_dist.rsample(sample_shape, generator).abs()

    def log_prob(self, value):
        value = self._value(value, "HalfNormal.log_prob")
        return _fill(self.base_dist.log_prob(value) + math.log(2), value < 0, -math.inf)

    def cdf(self, value):
        return 2 * self.base_dist.cdf(self._value(value, "HalfNormal.cdf")) - 1

    def icdf(self, value):
        return self.base_dist.icdf((self._value(value, None) + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class Cauchy(_Distribution):
    """scale / (π (scale² + (x - loc)²)): rsample is loc + scale ε, ε standard Cauchy
    (gradients reach loc and scale); mean NaN and variance inf, as torch's."""

    arg_constraints = {"loc": _real, "scale": _positive}
    support = _real
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init(validate_args, loc=loc, scale=scale)

    @property
    def mean(self):
        return full(self.batch_shape, math.nan, dtype=self.loc.dtype, backend=self.loc.backend)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return full(self.batch_shape, math.inf, dtype=self.loc.dtype, backend=self.loc.backend)

    def rsample(self, sample_shape=(), generator=None):
        eps = zeros(*self._extended(sample_shape), dtype=self.loc.dtype, backend=self.loc.backend)
        return self.loc + eps.cauchy_(generator=generator) * self.scale

    def log_prob(self, value):
        z = (self._value(value, "Cauchy.log_prob") - self.loc) / self.scale
        return -math.log(math.pi) - self.scale.log() - (z ** 2).log1p()

    def cdf(self, value):
        z = (self._value(value, "Cauchy.cdf") - self.loc) / self.scale
        return z.atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (self._value(value, None) - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class StudentT(_Distribution):
    """Student's t of df degrees of freedom, shifted by loc and scaled by scale. Draws are
    loc + scale X / sqrt(Z / df), X ~ N(0, 1), Z ~ Chi2(df); rsample carries gradients to loc
    and scale only (torch's also reaches df through Gamma's implicit reparameterisation, not
    made here: a df that requires grad is refused). Mean NaN where df <= 1; variance inf where
    1 < df <= 2 and NaN where df <= 1, as torch's."""

    arg_constraints = {"df": _positive, "loc": _real, "scale": _positive}
    support = _real
    _params = ("df", "loc", "scale")

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self._init(validate_args, df=df, loc=loc, scale=scale)

    @property
    def mean(self):
        return _fill(self.loc, self.df <= 1, math.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = _fill(self.df, self.df <= 2, 3.0)  # (no inf / NaN in the gradient's path)
        var = self.scale ** 2 * df / (df - 2)
        return _fill(_fill(var, self.df <= 2, math.inf), self.df <= 1, math.nan)

    def rsample(self, sample_shape=(), generator=None):
        if self.df.requires_grad and is_grad_enabled():
            raise NotImplementedError("StudentT.rsample: no gradient to df (Gamma's implicit "
                                      "reparameterisation is not made here); detach df")
        shape = self._extended(sample_shape)
        x = randn(*shape, generator=generator, dtype=self.df.dtype, backend=self.df.backend)
        z = 2 * _standard_gamma(self.df / 2, shape, generator, "StudentT.rsample")
        return self.loc + self.scale * x * (self.df.detach() / z).sqrt()

    def log_prob(self, value):
        y = (self._value(value, "StudentT.log_prob") - self.loc) / self.scale
        df = self.df
        z = (self.scale.log() + 0.5 * df.log() + 0.5 * math.log(math.pi) + (0.5 * df).lgamma()
             - (0.5 * (df + 1.0)).lgamma())
        return -0.5 * (df + 1.0) * (y ** 2 / df).log1p() - z

    def entropy(self):
        df = self.df
        lbeta = (0.5 * df).lgamma() + math.lgamma(0.5) - (0.5 * (df + 1)).lgamma()
        return (self.scale.log() + 0.5 * (df + 1) * ((0.5 * (df + 1)).digamma()
                                                     - (0.5 * df).digamma())
                + 0.5 * df.log() + lbeta)


class Dirichlet(_Distribution):
    """x_i^(a_i - 1) Γ(Σa) / Π Γ(a_i) on the simplex of the last dim of `concentration` (the
    event); the dims before it are the batch. Draws are Gamma(a_i) draws normalised (no
    gradient: unlike torch's, no rsample, whose implicit reparameterisation is not made here);
    log_prob and entropy carry gradients to concentration."""

    has_rsample = False
    arg_constraints = {"concentration": _IndependentConstraint(_positive, 1)}
    support = _simplex
    _params = ("concentration",)

    def __init__(self, concentration, validate_args=None):
        if not isinstance(concentration, Tensor):  # (a list taken, in the default float dtype)
            concentration = tensor(concentration)
        if concentration.dtype.kind != "f":
            concentration = concentration.to(result_type(concentration, 0.0))
        if concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        self.batch_shape = tuple(concentration.shape[:-1])
        self.event_shape = tuple(concentration.shape[-1:])
        self.validate_args = validate_args is not False
        if self.validate_args:
            _refuse_outside("Dirichlet", "concentration", concentration,
                            self.arg_constraints["concentration"])

    def expand(self, batch_shape, _instance=None):
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.batch_shape = _shape(batch_shape)
        new.concentration = self.concentration.expand(*new.batch_shape, *self.event_shape)
        return new

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        """(a - 1) clamped at 0, normalised; the first category where every a < 1 (torch's)."""
        a = self.concentration.detach()
        am1 = (a - 1).clamp(min=0)
        all_small = (a < 1).all(-1, keepdim=True)
        first = arange(a.shape[-1], backend=a.backend) == 0
        return _fill(_fill(am1 / am1.sum(-1, keepdim=True), all_small, 0.0),
                     all_small & first, 1.0)

    @property
    def variance(self):
        a = self.concentration
        a0 = a.sum(-1, keepdim=True)
        return a * (a0 - a) / (a0 ** 2 * (a0 + 1))

    def sample(self, sample_shape=(), generator=None):
        """Gamma(a_i, 1) draws over their sum, in [tiny, 1 - eps] (no gradient)."""
        shape = self._extended(sample_shape)
        g = _standard_gamma(self.concentration, shape, generator, "Dirichlet.sample")
        with no_grad():
            finfo = np.finfo(g.dtype)
            return (g / g.sum(-1, keepdim=True)).clamp(float(finfo.tiny), 1 - float(finfo.eps))

    def log_prob(self, value):
        value = self._value(value, "Dirichlet.log_prob")
        a = self.concentration
        return ((a - 1.0).xlogy(value).sum(-1) + a.sum(-1).lgamma() - a.lgamma().sum(-1))

    def entropy(self):
        a = self.concentration
        k, a0 = a.shape[-1], a.sum(-1)
        return (a.lgamma().sum(-1) - a0.lgamma() - (k - a0) * a0.digamma()
                - ((a - 1.0) * a.digamma()).sum(-1))


class Chi2(Gamma):
    """Gamma(df / 2, 1/2), as torch's (a Gamma: its KL pairs apply); df > 0 checked when
    made, and df is concentration * 2."""

    arg_constraints = {"df": _positive}

    def __init__(self, df, validate_args=None):
        df, = _tensors(df)
        if validate_args is not False:
            _refuse_outside("Chi2", "df", df, _positive)
        self._init(False, concentration=0.5 * df, rate=0.5)
        self.validate_args = validate_args is not False

    @property
    def df(self):
        return self.concentration * 2

    def __repr__(self):
        return f"Chi2(df: {fmt_shape(self.concentration.shape)})"


class Weibull(_Distribution):
    """(k/λ) (x/λ)^(k-1) e^(-(x/λ)^k) on x > 0, λ = scale, k = concentration (torch's: an
    Exponential(1) draw E made λ E^(1/k)): rsample carries gradients to both; cdf is
    1 - e^(-(x/λ)^k)."""

    arg_constraints = {"scale": _positive, "concentration": _positive}
    support = _positive
    _params = ("scale", "concentration")

    def __init__(self, scale, concentration, validate_args=None):
        self._init(validate_args, scale=scale, concentration=concentration)
        self._derive()

    def _derive(self):
        self.concentration_reciprocal = self.concentration.reciprocal()

    @property
    def mean(self):
        return self.scale * (1 + self.concentration_reciprocal).lgamma().exp()

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k) ** k.reciprocal()

    @property
    def variance(self):
        r = self.concentration_reciprocal
        return self.scale ** 2 * ((1 + 2 * r).lgamma().exp() - (2 * (1 + r).lgamma()).exp())

    def rsample(self, sample_shape=(), generator=None):
        e = zeros(*self._extended(sample_shape), dtype=self.scale.dtype,
                  backend=self.scale.backend).exponential_(generator=generator)
        return self.scale * e ** self.concentration_reciprocal

    def log_prob(self, value):
        z = self._value(value, "Weibull.log_prob") / self.scale
        k = self.concentration
        return (k / self.scale).log() + (k - 1) * z.log() - z ** k

    def cdf(self, value):
        z = self._value(value, "Weibull.cdf") / self.scale
        return -(-(z ** self.concentration)).expm1()

    def icdf(self, value):
        e = -(-self._value(value, None)).log1p()
        return self.scale * e ** self.concentration_reciprocal

    def entropy(self):
        r = self.concentration_reciprocal
        return _EULER * (1 - r) + (self.scale * r).log() + 1


class Gumbel(_Distribution):
    """e^(-(z + e^(-z))) / scale, z = (x - loc) / scale: rsample is loc - scale log(-log u),
    u ~ U[tiny, 1 - eps) (torch's), gradients reaching loc and scale; cdf e^(-e^(-z))."""

    arg_constraints = {"loc": _real, "scale": _positive}
    support = _real
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init(validate_args, loc=loc, scale=scale)

    @property
    def mean(self):
        return self.loc + self.scale * _EULER

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev ** 2

    def rsample(self, sample_shape=(), generator=None):
        finfo = np.finfo(self.loc.dtype)
        u = zeros(*self._extended(sample_shape), dtype=self.loc.dtype, backend=self.loc.backend)
        u = u.uniform_(float(finfo.tiny), 1 - float(finfo.eps), generator=generator)
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value):
        y = (self.loc - self._value(value, "Gumbel.log_prob")) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value):
        z = (self._value(value, "Gumbel.cdf") - self.loc) / self.scale
        return (-(-z).exp()).exp()

    def icdf(self, value):
        return self.loc - self.scale * (-self._value(value, None).log()).log()

    def entropy(self):
        return self.scale.log() + (1 + _EULER)


def _sum_rightmost(value, dim):
    """value summed over its last `dim` dims (torch's _sum_rightmost)."""
    return value.reshape(*value.shape[:value.ndim - dim], -1).sum(-1) if dim else value


def _refuse_outside(where, name, value, constraint):
    """validate_args: a ValueError naming `name` where `value` lies outside `constraint`."""
    with no_grad():
        good = np.asarray(constraint.check(value.detach()).numpy())
    if good.all():
        return
    values, n = np.asarray(value.detach().numpy()), constraint.event_dim  # (a bad event shown)
    values = np.broadcast_to(values, good.shape + values.shape[values.ndim - n:])
    raise ValueError(f"{where}: {name} must be within {constraint!r}, got "
                     f"{values[~good][0].tolist()} ({int((~good).sum())} of {good.size} "
                     f"invalid)")


_KL = {}  # (type of p, type of q) -> kl(p, q), as torch's _KL_REGISTRY


def register_kl(type_p, type_q):
    """A decorator, torch's: @register_kl(P, Q) def kl(p, q) makes kl_divergence(p, q) call it
    for a p of type P and a q of type Q (or of subclasses, the closest match chosen)."""
    def decorator(fn):
        _KL[type_p, type_q] = fn
        return fn
    return decorator


def kl_divergence(p, q):
    """KL(p || q), one value per batch entry (p's and q's batch shapes broadcast), made of
    tensor ops, so it is differentiable in both distributions' parameters. A pair with no
    registered formula is a NotImplementedError, as torch's."""
    fits = [(tp, tq) for tp, tq in _KL if isinstance(p, tp) and isinstance(q, tq)]
    if not fits:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{type(p).__name__} and q type {type(q).__name__}")
    closest = min(fits, key=lambda pq: (type(p).__mro__.index(pq[0]),
                                        type(q).__mro__.index(pq[1])))
    return _KL[closest](p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    """torch's formula: (σp/σq)² and ((μp - μq)/σq)² less 1 and log (σp/σq)², halved."""
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    """Σ p (log p - log q) over the categories: inf where q gives 0 to a category p can draw,
    0 from a category p gives 0 to (torch's)."""
    t = p.probs * (p.logits - q.logits)
    shape = t.shape
    t = t.masked_fill((q.probs == 0).expand(*shape), math.inf)
    return t.masked_fill((p.probs == 0).expand(*shape), 0.0).sum(-1)


def _fill(t, mask, value):
    """t with `value` where mask (both broadcast): torch's t[mask] = value, out of place."""
    shape = tuple(np.broadcast_shapes(t.shape, mask.shape))
    return t.expand(*shape).masked_fill(mask.expand(*shape), value)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    """torch's: p (softplus(-lq) - softplus(-lp)) + (1 - p) (softplus(lq) - softplus(lp)), inf
    where q gives 0 to an outcome p can draw, 0 from an outcome p gives 0 to."""
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _fill(_fill(t1, q.probs == 0, math.inf), p.probs == 0, 0.0)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _fill(_fill(t2, q.probs == 1, math.inf), p.probs == 1, 0.0)
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    """log of the widths' ratio; inf where p's interval is not inside q's."""
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _fill(result, (q.low > p.low) | (q.high < p.high), math.inf)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return -scale_ratio.log() + loc_abs_diff / q.scale + t3 - 1


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal, rate_sqr = q.scale ** 2, p.rate ** 2
    t1 = 0.5 * (rate_sqr * var_normal * 2 * math.pi).log()
    return t1 - 1 + (rate_sqr.reciprocal() - q.loc / p.rate + q.loc ** 2 * 0.5) / var_normal


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale ** 2
    scale_sqr_var_ratio = p.scale ** 2 / var_normal
    t1 = 0.5 * (2 * scale_sqr_var_ratio / math.pi).log()
    t234 = 0.5 * p.loc ** 2 - p.loc * q.loc + 0.5 * q.loc ** 2
    return -t1 + scale_sqr_var_ratio + t234 / var_normal - 1


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    width = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / width).log()
    t3 = ((p.high + p.low - 2 * q.loc) / 2) ** 2
    return t1 + 0.5 * (width ** 2 / 12 + t3) / q.scale ** 2


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    """inf where p's interval reaches below 0 (outside q's support)."""
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _fill(result, p.low < 0, math.inf)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    ratio = loc_diff / p.scale
    t2 = math.sqrt(2 / math.pi) * p.scale * (-0.5 * ratio ** 2).exp()
    t3 = loc_diff * (math.sqrt(0.5) * ratio).erf()
    return -(p.scale / q.scale).log() + (t2 + t3) / q.scale - 0.5 * (1 + math.log(0.5 * math.pi))


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * p.concentration.digamma()
    return t1 + t2 + t3 + (q.rate - p.rate) * (p.concentration / p.rate)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * p.concentration1.digamma()
    t4 = (p.concentration0 - q.concentration0) * p.concentration0.digamma()
    return t1 - t2 + t3 + t4 + (sum_q - sum_p) * sum_p.digamma()


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio, euler = q.rate / p.rate, 0.57721566490153286060  # (Euler-Mascheroni, torch's)
    return (-q.concentration * ratio.log() + ratio + q.concentration.lgamma()
            + q.concentration * euler - (1 + euler))


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    a, var_normal, beta_sqr = p.concentration, q.scale ** 2, p.rate ** 2
    t1 = 0.5 * (beta_sqr * var_normal * 2 * math.pi).log() - a - a.lgamma()
    t234 = 0.5 * (a ** 2 + a) / beta_sqr - q.loc * a / p.rate + 0.5 * q.loc ** 2
    return t1 + (a - 1) * a.digamma() + t234 / var_normal


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (p.concentration1.digamma()
                                  - (p.concentration1 + p.concentration0).digamma())
    return -p.entropy() + t2 - t3 + q.rate * p.mean


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    e_beta, var_normal = p.mean, q.scale ** 2
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (e_beta * (1 - e_beta) / (p.concentration1 + p.concentration0 + 1) + e_beta ** 2) * 0.5
    return -p.entropy() + t2 + (t3 - q.loc * e_beta + q.loc ** 2 * 0.5) / var_normal


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    """inf where q's interval does not hold [0, 1]."""
    result = -p.entropy() + (q.high - q.low).log()
    return _fill(result, (q.low > 0) | (q.high < 1), math.inf)


@register_kl(Exponential, Beta)
@register_kl(Exponential, Uniform)
@register_kl(Gamma, Beta)
@register_kl(Gamma, Uniform)
@register_kl(Gumbel, Beta)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Uniform)
@register_kl(Laplace, Beta)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Uniform)
@register_kl(Normal, Beta)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Uniform)
@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_infinity(p, q):
    """inf: q's support is bounded where p's is not (torch's _infinite_like, of p's shape)."""
    like = getattr(p, {Exponential: "rate", Gamma: "concentration",
                       Poisson: "rate"}.get(type(p), "loc"))
    return full(like.shape, math.inf, dtype=like.dtype, backend=like.backend)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    """The bases' KL summed over the reinterpreted dims (the same number in both, as torch)."""
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL(Independent || Independent) needs the same "
                                  "reinterpreted_batch_ndims in both")
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    """torch's: log det Lq - log det Lp + (|Lq⁻¹ Lp|²_F + |Lq⁻¹ (μq - μp)|² - n) / 2."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event "
                         "shapes cannot be computed")
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = (lq.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - lp.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    n = p.event_shape[0]
    batch = tuple(np.broadcast_shapes(tuple(lq.shape[:-2]), tuple(lp.shape[:-2])))
    ratio = solve_triangular(lq.expand(*batch, n, n), lp.expand(*batch, n, n), upper=False)
    term2 = (ratio ** 2).sum((-2, -1))
    term3 = _batch_mahalanobis(lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    """n (p (lp - lq) + log(1 - p) - log(1 - q)); inf where p's total_count exceeds q's, and
    a q of a larger total_count anywhere is a NotImplementedError (torch's)."""
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is "
                                  "not implemented")
    result = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                              - (-q.probs).log1p())
    return _fill(result, p.total_count > q.total_count, math.inf)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(LogNormal, LogNormal)
@register_kl(HalfNormal, HalfNormal)
def _kl_through_normal(p, q):
    """The base Normals' KL (torch's: the same transform on both keeps KL)."""
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Weibull, Weibull)
def _kl_weibull_weibull(p, q):
    """torch's TransformedDistribution pair: only Weibulls of equal parameters (their transforms
    equal), whose KL is 0; others are a NotImplementedError."""
    same = all(bool((getattr(p, n) == getattr(q, n)).all()) for n in ("scale", "concentration"))
    if not same:
        raise NotImplementedError("KL between Weibulls is implemented for equal parameters "
                                  "only (as torch's)")
    shape = np.broadcast_shapes(tuple(p.batch_shape), tuple(q.batch_shape))
    return zeros(*shape, dtype=p.scale.dtype, backend=p.scale.backend)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale) ** 2 + (p.loc - q.loc) ** 2).log()
    return t1 - (4 * p.scale * q.scale).log()


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p, sum_q = p.concentration.sum(-1), q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t4 = p.concentration.digamma() - sum_p.digamma().unsqueeze(-1)
    return t1 - t2 + ((p.concentration - q.concentration) * t4).sum(-1)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1, ct2, ct3 = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return -ct1.log() - ct2 + ct3 + ct1 * _EULER + t3 - (1 + _EULER)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    prod, ratio = p.rate * q.scale, q.loc / q.scale
    return prod.log() - 1 - ratio + ratio.exp() * prod / (prod + 1) + prod.reciprocal()


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    a, prod, ratio = p.concentration, p.rate * q.scale, q.loc / q.scale
    t1 = (a - 1) * a.digamma() - a.lgamma() - a
    t3 = ratio.exp() * (1 + prod.reciprocal()) ** -a - ratio
    return t1 + prod.log() + a / prod + t3


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    ratio = p.scale / q.scale
    t1 = (ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * ratio * 0.5) ** 2 / 3
    t3 = ((p.loc + p.scale * _EULER - q.loc) / q.scale) ** 2 * 0.5
    return -t1 + t2 + t3 - (_EULER + 1)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_ratio, var_ratio, loc_ratio = p.loc / q.scale, (p.scale / q.scale) ** 2, q.loc / q.scale
    t3 = (-mean_ratio + 0.5 * var_ratio + loc_ratio).exp()
    return (-0.5 * var_ratio.log() + mean_ratio - loc_ratio + t3
            - 0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common = q.scale / (p.high - p.low)
    high_diff, low_diff = (p.high - q.loc) / q.scale, (p.low - q.loc) / q.scale
    t1 = common.log() + 0.5 * (high_diff + low_diff)
    return t1 - common * ((-high_diff).exp() - (-low_diff).exp())


# torch.distributions.kl, for `from tinyattn.distributions.kl import kl_divergence`
kl = types.ModuleType(__name__ + ".kl", "torch.distributions.kl's names: kl_divergence and "
                      "register_kl.")
kl.kl_divergence, kl.register_kl = kl_divergence, register_kl
sys.modules[kl.__name__] = kl


def _tensors(*params):
    """torch's broadcast_all, less the broadcast: tensors stay as they are; a number becomes a
    tensor of the first tensor's dtype (the default float dtype where that is not floating, or
    where all are numbers), on its backend."""
    like = next((p for p in params if isinstance(p, Tensor)), None)
    dtype = backend = None  # (None: the default dtype and backend)
    if like is not None:
        dtype, backend = result_type(like, 0.0), like.backend
    return tuple(p if isinstance(p, Tensor) else tensor(float(p), dtype=dtype, backend=backend)
                 for p in params)


def _shape(sample_shape):
    shape = ((int(sample_shape),) if isinstance(sample_shape, numbers.Integral)
             else tuple(int(n) for n in sample_shape))
    if any(n < 0 for n in shape):
        raise ValueError(f"sample: sample_shape must hold sizes >= 0, got {shape}")
    return shape


def _check(dist, name, param, ok, what):
    """torch's validate_args: a ValueError naming the parameter where `ok` (on its values, a
    NumPy array) is False anywhere."""
    values = np.asarray(param.detach().numpy())
    good = np.asarray(ok(values))  # one per value, or one per row (the last dim)
    if not good.all():
        first = values[~good][0] if good.ndim else values  # a bad value, or a bad row
        raise ValueError(f"{dist}: {name} {what}, got {np.asarray(first).tolist()} "
                         f"({int((~good).sum())} of {good.size} invalid)")


def _check_categorical(given, name):
    """probs: finite, >= 0, no row of zeros; logits: no NaN or +inf, no row all -inf."""
    if name == "probs":
        _check("Categorical", "probs", given, lambda a: np.isfinite(a) & (a >= 0),
               "must be >= 0 and finite")
        _check("Categorical", "probs", given, lambda a: a.sum(-1) > 0,
               "rows must not sum to 0 (no category is possible)")
    else:
        _check("Categorical", "logits", given, lambda a: ~np.isnan(a) & (a < np.inf),
               "must not be NaN or +inf")
        _check("Categorical", "logits", given, lambda a: (a > -np.inf).any(-1),
               "rows must not be all -inf (no category is possible)")


class _IntegerInterval:
    """torch's constraints.integer_interval: the whole numbers lower_bound..upper_bound."""

    is_discrete, event_dim = True, 0

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        """Where value holds a whole number in the interval (a bool tensor)."""
        return ((value % 1) == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self):
        return (f"IntegerInterval(lower_bound={self.lower_bound}, "
                f"upper_bound={self.upper_bound})")

