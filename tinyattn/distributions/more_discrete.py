"""tinyattn.distributions' later count, relaxed and mixture distributions: NegativeBinomial,
Multinomial, LogitRelaxedBernoulli and RelaxedBernoulli, ExpRelaxedCategorical and
RelaxedOneHotCategorical (Gumbel-softmax: rsample carries gradients to the logits),
OneHotCategoricalStraightThrough and MixtureSameFamily, as torch's (the relaxed ones written out
without a TransformedDistribution, with the same values), and the multinomial constraint."""

import math

import numpy as np

from .. import functional as F
from ..errors import fmt_shape
from ..tensor import Tensor, rand
from .constraints import (
    MixtureSameFamilyConstraint,
    _Multinomial,
    _nonnegative_integer,
    _real,
    _real_vector,
    _simplex,
    _unit_interval,
)
from .discrete import Binomial, Categorical, OneHotCategorical, _as_dtype, _binary_pair, _drawn
from .distribution import _Distribution, _eye_like, _fill, _shape, _standard_gamma, _tensors
from .more import _greater_than_eq, _half_open_interval


def _multinomial_constraint(total_count):
    """torch's constraints.multinomial: entries >= 0 summing to at most total_count."""
    return _Multinomial(total_count)


def _temperature(temperature, like):
    """temperature as a tensor (a number in like's dtype, on its backend)."""
    return temperature if isinstance(temperature, Tensor) else _tensors(like, temperature)[1]


def _clamp_probs(probs):
    eps = float(np.finfo(probs.dtype).eps)
    return probs.clamp(eps, 1 - eps)


class NegativeBinomial(_Distribution):
    """The number of successes before total_count failures, each trial a success with
    probability `probs` (in [0, 1)) or from `logits`, not both; total_count >= 0 (real taken).
    Draws are Poisson(Gamma(total_count, e^-logits)) (torch's), log_prob carries gradients to
    total_count and the parameter."""

    has_rsample = False
    arg_constraints = {"total_count": _greater_than_eq(0), "probs": _half_open_interval(0.0, 1.0),
                       "logits": _real}
    support = _nonnegative_integer
    _params = ("total_count", "probs", "logits")

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("NegativeBinomial: either `probs` or `logits` must be specified, "
                             "but not both")
        self._given = "probs" if logits is None else "logits"
        self._init(validate_args, total_count=total_count,
                   **{self._given: probs if logits is None else logits})
        self.total_count = _as_dtype(self.total_count, self._like)
        _binary_pair(self)

    @property
    def _like(self):
        return getattr(self, self._given)

    def _derive(self):
        _binary_pair(self)

    @property
    def param_shape(self):
        return self._like.shape

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / (-self.logits).sigmoid()

    def sample(self, sample_shape=(), generator=None):
        """Counts (in the parameter's dtype) of shape sample_shape + batch_shape, no gradient:
        a Gamma(total_count, e^-logits) draw, then a Poisson draw of that rate."""
        shape = self._extended(sample_shape)
        g = _standard_gamma(self.total_count, shape, generator, "NegativeBinomial.sample")
        rate = g * self.logits.detach().exp()
        return _drawn(self._like, shape, generator, "NegativeBinomial.sample",
                      lambda rng, lam: rng.poisson(lam), rate)

    def log_prob(self, value):
        value = _as_dtype(self._value(value, "NegativeBinomial.log_prob"), self._like)
        n, logits = self.total_count, self.logits
        unnormalized = n * F.logsigmoid(-logits) + value * F.logsigmoid(logits)
        normalization = -(n + value).lgamma() + (1.0 + value).lgamma() + n.lgamma()
        return unnormalized - _fill(normalization, n + value == 0.0, 0.0)

    def __repr__(self):
        return (f"NegativeBinomial(total_count: {fmt_shape(self.total_count.shape)}, "
                f"{self._given}: {fmt_shape(self._like.shape)})")


class Multinomial(_Distribution):
    """Counts of total_count (an int, as torch's) draws from the categories of `probs` or
    `logits` (a Categorical's: its checks): the event is the last dim. log_prob and entropy
    carry gradients to the parameter; sample counts the Categorical's draws."""

    has_rsample = False
    arg_constraints = {"probs": _simplex, "logits": _real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int) or isinstance(total_count, bool):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        self.batch_shape = tuple(self._categorical.batch_shape)
        self.event_shape = tuple(self._categorical.param_shape[-1:])
        self.validate_args = validate_args is not False

    @property
    def _like(self):
        return self.probs

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
    def support(self):
        return _multinomial_constraint(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=(), generator=None):
        """Counts (in probs' dtype) of shape sample_shape + batch_shape + (K,), no gradient."""
        shape = _shape(sample_shape)
        draws = self._categorical.sample((self.total_count, *shape), generator)
        return _eye_like(self.probs.detach())[draws].sum(0)

    def log_prob(self, value):
        value = _as_dtype(self._value(value, "Multinomial.log_prob"), self.probs)
        shape = tuple(np.broadcast_shapes(value.shape, self.logits.shape))
        logits, value = self.logits.expand(*shape), value.expand(*shape)
        logits = _fill(logits, (value == 0) & (logits == -math.inf), 0.0)
        return ((value.sum(-1) + 1).lgamma() - (value + 1).lgamma().sum(-1)
                + (logits * value).sum(-1))

    def entropy(self):
        n = self.total_count
        term1 = n * self._categorical.entropy() - math.lgamma(n + 1)
        binomial = Binomial(n, probs=self.probs, validate_args=False)
        support = binomial.enumerate_support(expand=False)[1:]
        binomial_probs = binomial.log_prob(support).exp()
        return term1 + (binomial_probs * (support + 1).lgamma()).sum(0).sum(-1)

    def expand(self, batch_shape, _instance=None):
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._categorical = self._categorical.expand(batch_shape)
        new.batch_shape = _shape(batch_shape)
        return new

    def __repr__(self):
        given = self._categorical._given
        return f"Multinomial({given}: {fmt_shape(getattr(self, given).shape)})"


class LogitRelaxedBernoulli(_Distribution):
    """The logit of a RelaxedBernoulli draw (torch's): rsample is (logit u + logit p) / T,
    u uniform; the batch is the parameter's (temperature broadcast against it)."""

    has_rsample = True
    arg_constraints = {"probs": _unit_interval, "logits": _real}
    support = _real
    _params = ("probs", "logits")

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError(f"{type(self).__name__}: either `probs` or `logits` must be "
                             f"specified, but not both")
        self._given = "probs" if logits is None else "logits"
        self._init(validate_args, **{self._given: probs if logits is None else logits})
        self.temperature = _temperature(temperature, self._like)
        _binary_pair(self)

    @property
    def _like(self):
        return getattr(self, self._given)

    def _derive(self):
        _binary_pair(self)

    @property
    def param_shape(self):
        return self._like.shape

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended(sample_shape)
        probs = _clamp_probs(self.probs.expand(*shape))
        u = _clamp_probs(rand(*shape, generator=generator, dtype=probs.dtype,
                              backend=probs.backend))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        value = self._value(value, f"{type(self).__name__}.log_prob")
        diff = self.logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(LogitRelaxedBernoulli):
    """sigmoid of a LogitRelaxedBernoulli draw (torch's TransformedDistribution by sigmoid,
    written out): rsample in [tiny, 1 - eps], gradients reaching probs or logits; log_prob the
    base's at logit(value) plus log sigmoid'(logit(value))⁻¹."""

    support = _unit_interval

    def rsample(self, sample_shape=(), generator=None):
        finfo = np.finfo(self._like.dtype)
        x = super().rsample(sample_shape, generator).sigmoid()
        return x.clamp(float(finfo.tiny), 1.0 - float(finfo.eps))

    def log_prob(self, value):
        y = self._value(value, "RelaxedBernoulli.log_prob")
        finfo = np.finfo(y.dtype)
        y = y.clamp(float(finfo.tiny), 1.0 - float(finfo.eps))
        x = y.log() - (-y).log1p()
        diff = self.logits - x * self.temperature
        base = self.temperature.log() + diff - 2 * diff.exp().log1p()
        return base + F.softplus(-x) + F.softplus(x)


class ExpRelaxedCategorical(_Distribution):
    """The log of a RelaxedOneHotCategorical draw (torch's): rsample is log_softmax((logits +
    Gumbel noise) / T) over the last dim (the event), gradients reaching the parameter."""

    has_rsample = True
    arg_constraints = {"probs": _simplex, "logits": _real_vector}
    support = _real_vector

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        self.temperature = _temperature(temperature, self._categorical.probs)
        self.batch_shape = tuple(self._categorical.batch_shape)
        self.event_shape = tuple(self._categorical.param_shape[-1:])
        self.validate_args = validate_args is not False

    @property
    def _like(self):
        return self.probs

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def rsample(self, sample_shape=(), generator=None):
        u = _clamp_probs(rand(*self._extended(sample_shape), generator=generator,
                              dtype=self.logits.dtype, backend=self.logits.backend))
        scores = (self.logits - (-u.log()).log()) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value):
        value = self._value(value, f"{type(self).__name__}.log_prob")
        return self._log_prob(value)

    def _log_prob(self, value):
        k = self.event_shape[0]
        t = self.temperature
        log_scale = math.lgamma(k) + (k - 1) * t.log()
        score = self.logits - value * t
        return (score - score.logsumexp(-1, keepdim=True)).sum(-1) + log_scale

    def expand(self, batch_shape, _instance=None):
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._categorical = self._categorical.expand(batch_shape)
        new.batch_shape = _shape(batch_shape)
        return new


class RelaxedOneHotCategorical(ExpRelaxedCategorical):
    """exp of an ExpRelaxedCategorical draw (torch's TransformedDistribution by exp, written
    out): rsample is softmax((logits + Gumbel noise) / T), on the simplex; log_prob the base's
    at log value less Σ log value."""

    support = _simplex

    def rsample(self, sample_shape=(), generator=None):
        return super().rsample(sample_shape, generator).exp()

    def log_prob(self, value):
        x = self._value(value, "RelaxedOneHotCategorical.log_prob").log()
        return self._log_prob(x) - x.sum(-1)


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical with torch's straight-through rsample: the one-hot draw in the
    forward pass, the gradient of probs in the backward (draw + probs - probs.detach())."""

    has_rsample = True

    def rsample(self, sample_shape=(), generator=None):
        samples = self.sample(sample_shape, generator)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())


class MixtureSameFamily(_Distribution):
    """A mixture of the components of `component_distribution` (its last batch dim) weighted
    by the Categorical `mixture_distribution`: log_prob is logsumexp over the components of
    their log_prob plus the log weights; mean, variance (the law of total variance) and cdf
    carry gradients to both; sample draws a component, then its value (no rsample)."""

    has_rsample = False
    arg_constraints = {}

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError("MixtureSameFamily: the mixture distribution needs to be an "
                             "instance of Categorical")
        if not (hasattr(component_distribution, "log_prob")
                and hasattr(component_distribution, "batch_shape")):
            raise ValueError("MixtureSameFamily: the component distribution needs to be a "
                             "distribution")
        mdbs = tuple(mixture_distribution.batch_shape)
        cdbs = tuple(component_distribution.batch_shape)[:-1]
        for m, c in zip(reversed(mdbs), reversed(cdbs), strict=False):
            if m != 1 and c != 1 and m != c:
                raise ValueError(f"MixtureSameFamily: mixture_distribution.batch_shape "
                                 f"{fmt_shape(mdbs)} is not compatible with "
                                 f"component_distribution.batch_shape[:-1] {fmt_shape(cdbs)}")
        km = mixture_distribution.logits.shape[-1]
        kc = (tuple(component_distribution.batch_shape) or (None,))[-1]
        if km != kc:
            raise ValueError(f"MixtureSameFamily: mixture_distribution has {km} components "
                             f"but component_distribution.batch_shape[-1] is {kc}")
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        self._num_component = km
        self.event_shape = tuple(component_distribution.event_shape)
        self._event_ndims = len(self.event_shape)
        self.batch_shape = cdbs
        self.validate_args = validate_args is not False

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    @property
    def support(self):
        """The component's support checked across the components (torch's)."""
        return MixtureSameFamilyConstraint(self._component_distribution.support)

    @property
    def _like(self):
        return self._mixture_distribution.probs

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        cat_batch_ndims = len(self._mixture_distribution.batch_shape)
        pad = 0 if cat_batch_ndims == 1 else len(self.batch_shape) - cat_batch_ndims
        xs = tuple(x.shape)
        return x.reshape(*xs[:-1], *(1,) * pad, xs[-1], *(1,) * self._event_ndims)

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self._mixture_distribution.probs)
        return (probs * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        probs = self._pad_mixture_dimensions(self._mixture_distribution.probs)
        comp, dim = self._component_distribution, -1 - self._event_ndims
        mean_cond_var = (probs * comp.variance).sum(dim)
        var_cond_mean = (probs * (comp.mean - self._pad(self.mean)) ** 2).sum(dim)
        return mean_cond_var + var_cond_mean

    def cdf(self, value):
        value = self._value(value, None)
        cdf_x = self._component_distribution.cdf(self._pad(value))
        return (cdf_x * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, value):
        value = self._value(value, None)
        log_prob_x = self._component_distribution.log_prob(self._pad(value))
        log_mix = F.log_softmax(self._mixture_distribution.logits, dim=-1)
        return (log_prob_x + log_mix).logsumexp(-1)

    def sample(self, sample_shape=(), generator=None):
        """A component index per entry from the mixture, then that component's draw
        (sample_shape + batch_shape + event_shape, no gradient)."""
        shape, es = _shape(sample_shape), self.event_shape
        gather_dim = len(shape) + len(self.batch_shape)
        mix = self._mixture_distribution.sample(shape, generator)
        comp = self._component_distribution.sample(shape, generator)
        index = mix.reshape(*mix.shape, *(1,) * (len(es) + 1))
        index = index.expand(*mix.shape, 1, *es)
        return comp.gather(gather_dim, index).squeeze(gather_dim)

    def expand(self, batch_shape, _instance=None):
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        batch_shape = _shape(batch_shape)
        new._component_distribution = self._component_distribution.expand(
            (*batch_shape, self._num_component))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new.batch_shape = batch_shape
        return new

    def __repr__(self):
        return (f"MixtureSameFamily(\n  {self._mixture_distribution!r},\n  "
                f"{self._component_distribution!r})")
