"""tinyattn.distributions' continuous distributions: Normal, Uniform, Exponential, Laplace,
Gamma, Beta, LogNormal, HalfNormal, Cauchy, StudentT, Dirichlet, Chi2, Weibull and Gumbel (and
_EULER, the Euler-Mascheroni constant Gumbel and kl use)."""

import math
import numbers

import numpy as np

from ..autograd import no_grad
from ..dtypes import result_type
from ..errors import fmt_shape
from ..special import gammainc
from ..tensor import Tensor, arange, full, rand, randn, tensor, zeros
from .constraints import (
    _greater_than,
    _IndependentConstraint,
    _interval,
    _less_than,
    _nonnegative,
    _positive,
    _real,
    _simplex,
    _unit_interval,
)
from .distribution import (
    _check,
    _Distribution,
    _fill,
    _refuse_outside,
    _shape,
    _standard_gamma,
    _tensors,
)
from .implicit import standard_gamma_rsample


class Normal(_Distribution):
    """N(loc, scale²), loc and scale tensors or numbers that broadcast; a NaN loc, or a scale
    that is not finite and > 0, is refused when made (validate_args=False takes them). As torch's
    broadcast_all: a number takes the other (tensor) parameter's float dtype and backend, and
    loc and scale are broadcast to batch_shape (views, so gradients reach the given tensors)."""

    has_rsample = True  # rsample: loc + scale ε carries gradients to loc and scale
    has_enumerate_support = False
    arg_constraints = {"loc": _real, "scale": _positive}  # (torch's; as checked: scale finite)
    support = _real
    _params = ("loc", "scale")

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
    made. rsample carries gradients to both, to concentration by implicit reparameterisation
    as torch's (distributions/implicit.py). cdf is the regularised lower incomplete gamma
    function (special.gammainc), with torch's gradient: for value and rate, none for
    concentration (backward raises where it requires grad, as torch's)."""

    has_rsample = True
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

    def rsample(self, sample_shape=(), generator=None):
        """sample's draws (the same stream), with gradients: Gamma(a, 1) draws (implicit
        reparameterisation) over rate; at least the dtype's smallest normal number (the
        gradient passing as if unclamped, as torch's clamps the detached draws)."""
        shape = self._extended(sample_shape)
        value = standard_gamma_rsample(self.concentration, shape, generator, "Gamma.rsample")
        value = value / self.rate
        return _floored(value, float(np.finfo(value.dtype).tiny))

    def log_prob(self, value):
        value = self._value(value, "Gamma.log_prob")
        a, rate = self.concentration, self.rate
        return a.xlogy(rate) + (a - 1).xlogy(value) - rate * value - a.lgamma()

    def entropy(self):
        a = self.concentration
        return a - self.rate.log() + a.lgamma() + (1.0 - a) * a.digamma()

    def cdf(self, value):
        value = self._value(value, "Gamma.cdf")
        return gammainc(self.concentration, self.rate * value)


class Beta(_Distribution):
    """x^(a-1) (1-x)^(b-1) / B(a, b) on [0, 1], a = concentration1, b = concentration0; both
    > 0 checked when made. rsample is X / (X + Y) of Gamma(a) and Gamma(b) draws with their
    implicit gradients (torch's takes Dirichlet's: another estimator of the same gradient in
    expectation)."""

    has_rsample = True
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

    def rsample(self, sample_shape=(), generator=None):
        """sample's draws (the same stream), with gradients to both concentrations."""
        shape = self._extended(sample_shape)
        x = standard_gamma_rsample(self.concentration1, shape, generator, "Beta.rsample")
        y = standard_gamma_rsample(self.concentration0, shape, generator, "Beta.rsample")
        finfo = np.finfo(x.dtype)
        return _floored(x / (x + y), float(finfo.tiny), 1 - float(finfo.eps))

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


def _floored(value, low, high=None):
    """value clamped to [low, high] with its gradient passed as if unclamped (torch clamps
    the detached draws in place)."""
    with no_grad():
        shift = value.clamp(low, high) - value
    return value + shift


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
    loc + scale X / sqrt(Z / df), X ~ N(0, 1), Z ~ Chi2(df); rsample carries gradients to loc,
    scale and df (through Z's implicit reparameterisation, as torch's). Mean NaN where df <= 1;
    variance inf where 1 < df <= 2 and NaN where df <= 1, as torch's."""

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
        shape = self._extended(sample_shape)
        x = randn(*shape, generator=generator, dtype=self.df.dtype, backend=self.df.backend)
        z = 2 * standard_gamma_rsample(self.df / 2, shape, generator, "StudentT.rsample")
        return self.loc + self.scale * x * (self.df / z).sqrt()

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
    event); the dims before it are the batch. Draws are Gamma(a_i) draws normalised; rsample's
    carry their implicit gradients to concentration (torch's takes the Beta marginals': another
    estimator of the same gradient in expectation), as log_prob and entropy do."""

    has_rsample = True
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

    def rsample(self, sample_shape=(), generator=None):
        """sample's draws (the same stream), with gradients to concentration."""
        shape = self._extended(sample_shape)
        g = standard_gamma_rsample(self.concentration, shape, generator, "Dirichlet.rsample")
        finfo = np.finfo(g.dtype)
        return _floored(g / g.sum(-1, keepdim=True), float(finfo.tiny), 1 - float(finfo.eps))

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
