"""tinyattn.distributions' discrete distributions: Categorical, Bernoulli, OneHotCategorical,
Poisson, Binomial and Geometric, with the helpers only they use (_check_categorical,
_binary_pair, _drawn, _as_dtype, _clamp_by_zero)."""

import math
import warnings

import numpy as np

from .. import functional as F
from ..autograd import no_grad
from ..dtypes import result_type
from ..errors import ShapeError, fmt_shape
from ..generator import check as check_generator
from ..generator import rng_of
from ..tensor import Tensor, arange, full, multinomial, rand, tensor, zeros
from .constraints import (
    _boolean,
    _IntegerInterval,
    _nonnegative,
    _nonnegative_integer,
    _one_hot,
    _real,
    _real_vector,
    _simplex,
    _unit_interval,
)
from .distribution import _check, _Distribution, _eye_like, _fill, _shape


class Categorical(_Distribution):
    """Categories 0..K-1 of the last dim of `probs` (weights, normalised here) or of `logits`
    (log-weights); the dims before it are the batch. Like torch (validate_args), bad parameters
    are refused when made: NaN, inf or negative probs, NaN or +inf logits, impossible rows."""

    has_rsample = False  # a draw is an index: no gradient flows through it
    has_enumerate_support = True  # (torch's: enumerate_support() lists the categories)
    _params = ("logits",)  # (the first names the dtype and backend: _Distribution's _like)

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
