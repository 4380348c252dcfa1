"""tinyattn.distributions' later continuous distributions: Pareto, HalfCauchy, InverseGamma,
Kumaraswamy, FisherSnedecor, VonMises, ContinuousBernoulli and GeneralizedPareto. torch builds
several of them as a TransformedDistribution; here each is written out in tensor ops with the
same values (log_prob through the change of variables, cdf and icdf through the base's), so
gradients of any order reach the parameters. Also the constraints only they use
(_greater_than_eq, _half_open_interval)."""

import math

import numpy as np

from .. import functional as F
from ..generator import check as check_generator
from ..generator import rng_of
from ..special import gammainc, i0e, i1e
from ..tensor import full, rand, randn, tensor, zeros
from .constraints import (
    _GreaterThanEq,
    _HalfOpenInterval,
    _interval,
    _positive,
    _real,
    _simplex,
    _unit_interval,
)
from .continuous import _EULER, _floored
from .discrete import _binary_pair
from .distribution import _Distribution, _fill, _shape
from .implicit import standard_gamma_rsample


def _greater_than_eq(low):
    return _GreaterThanEq(low)


def _half_open_interval(low, high):
    return _HalfOpenInterval(low, high)


def _full_like(like, value):
    return full(tuple(like.shape), value, dtype=like.dtype, backend=like.backend)


def _safe(param, bad, stand_in):
    """param with `stand_in` where `bad`: a value the formula can take, so that the gradient
    of what is then replaced (by inf or NaN) stays finite."""
    return _fill(param, bad, stand_in)


class Pareto(_Distribution):
    """alpha scale^alpha / x^(alpha + 1) on x >= scale (torch's: Exponential(alpha) made
    scale e^X): rsample is scale e^(E / alpha), gradients reaching both; mean inf where
    alpha <= 1 and variance inf where alpha <= 2, as torch's."""

    arg_constraints = {"alpha": _positive, "scale": _positive}
    _params = ("scale", "alpha")

    def __init__(self, scale, alpha, validate_args=None):
        self._init(validate_args, scale=scale, alpha=alpha)

    @property
    def support(self):
        return _greater_than_eq(self.scale)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        return self.scale ** 2 * a / ((a - 1) ** 2 * (a - 2))

    def rsample(self, sample_shape=(), generator=None):
        e = zeros(*self._extended(sample_shape), dtype=self.alpha.dtype,
                  backend=self.alpha.backend).exponential_(generator=generator)
        return self.scale * (e / self.alpha).exp()

    def log_prob(self, value):
        x = (self._value(value, "Pareto.log_prob") / self.scale).log()
        return self.alpha.log() - self.alpha * x - x - self.scale.log()

    def cdf(self, value):
        x = (self._value(value, "Pareto.cdf") / self.scale).log()
        return 1 - (-self.alpha * x).exp()

    def icdf(self, value):
        return self.scale * (-(-self._value(value, None)).log1p() / self.alpha).exp()

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class HalfCauchy(_Distribution):
    """|X|, X ~ Cauchy(0, scale) (torch's TransformedDistribution by abs): rsample is
    |scale ε|, ε standard Cauchy; log_prob Cauchy's + log 2 on value >= 0 (-inf below, without
    validate_args); mean and variance inf, as torch's."""

    arg_constraints = {"scale": _positive}
    support = _greater_than_eq(0.0)
    _params = ("scale",)

    def __init__(self, scale, validate_args=None):
        self._init(validate_args, scale=scale)

    @property
    def mean(self):
        return _full_like(self.scale, math.inf)

    @property
    def mode(self):
        return _full_like(self.scale, 0.0)

    @property
    def variance(self):
        return _full_like(self.scale, math.inf)

    def rsample(self, sample_shape=(), generator=None):
        eps = zeros(*self._extended(sample_shape), dtype=self.scale.dtype,
                    backend=self.scale.backend).cauchy_(generator=generator)
        return (eps * self.scale).abs()

    def log_prob(self, value):
        value = self._value(value, "HalfCauchy.log_prob")
        z = value / self.scale
        log_prob = math.log(2 / math.pi) - self.scale.log() - (z ** 2).log1p()
        return _fill(log_prob, value < 0, -math.inf)

    def cdf(self, value):
        z = self._value(value, "HalfCauchy.cdf") / self.scale
        return 2 * (z.atan() / math.pi + 0.5) - 1

    def icdf(self, value):
        p = (self._value(value, None) + 1) / 2
        return (math.pi * (p - 0.5)).tan() * self.scale

    def entropy(self):
        return math.log(2 * math.pi) + self.scale.log()


class InverseGamma(_Distribution):
    """1 / X, X ~ Gamma(concentration, rate) (torch's TransformedDistribution by x^-1):
    rsample is the reciprocal of Gamma's (implicit reparameterisation to concentration);
    log_prob Gamma's at 1 / value less 2 log value; cdf 1 - P(a, rate / value) (no gradient to
    concentration, as Gamma's); mean inf where a <= 1, variance inf where a <= 2 (torch's)."""

    arg_constraints = {"concentration": _positive, "rate": _positive}
    support = _positive
    _params = ("concentration", "rate")

    def __init__(self, concentration, rate, validate_args=None):
        self._init(validate_args, concentration=concentration, rate=rate)

    @property
    def mean(self):
        a = self.concentration
        result = self.rate / (_safe(a, a <= 1, 2.0) - 1)
        return _fill(result, a <= 1, math.inf)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        a = self.concentration
        safe = _safe(a, a <= 2, 3.0)
        result = self.rate ** 2 / ((safe - 1) ** 2 * (safe - 2))
        return _fill(result, a <= 2, math.inf)

    def rsample(self, sample_shape=(), generator=None):
        shape = self._extended(sample_shape)
        g = standard_gamma_rsample(self.concentration, shape, generator, "InverseGamma.rsample")
        g = g / self.rate
        return _floored(g, float(np.finfo(g.dtype).tiny)).reciprocal()

    def log_prob(self, value):
        value = self._value(value, "InverseGamma.log_prob")
        x, a, rate = value.reciprocal(), self.concentration, self.rate
        gamma = a.xlogy(rate) + (a - 1).xlogy(x) - rate * x - a.lgamma()
        return gamma - 2 * value.log()

    def cdf(self, value):
        value = self._value(value, "InverseGamma.cdf")
        return 1 - gammainc(self.concentration, self.rate / value)

    def entropy(self):
        a = self.concentration
        return a + self.rate.log() + a.lgamma() - (1 + a) * a.digamma()


def _kumaraswamy_moment(a, b, n):
    arg1 = 1 + n / a
    return b * (arg1.lgamma() + b.lgamma() - (arg1 + b).lgamma()).exp()


class Kumaraswamy(_Distribution):
    """a b x^(a-1) (1 - x^a)^(b-1) on [0, 1], a = concentration1, b = concentration0
    (torch's: a Uniform draw u made (1 - u^(1/b))^(1/a)): rsample carries gradients to both;
    cdf 1 - (1 - x^a)^b. mode is ((a - 1) / (a b - 1))^(1/a) where a, b >= 1 (not both 1),
    NaN elsewhere (torch 2.x's formula gives NaN for every b >= 1: a bug, not followed)."""

    arg_constraints = {"concentration1": _positive, "concentration0": _positive}
    support = _unit_interval
    _params = ("concentration1", "concentration0")

    def __init__(self, concentration1, concentration0, validate_args=None):
        self._init(validate_args, concentration1=concentration1, concentration0=concentration0)

    @property
    def mean(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        bad = (a < 1) | (b < 1) | ((a == 1) & (b == 1))
        a_safe, b_safe = _safe(a, bad, 2.0), _safe(b, bad, 2.0)
        mode = ((a_safe - 1) / (a_safe * b_safe - 1)) ** a_safe.reciprocal()
        return _fill(mode, bad, math.nan)

    @property
    def variance(self):
        return (_kumaraswamy_moment(self.concentration1, self.concentration0, 2)
                - self.mean ** 2)

    def rsample(self, sample_shape=(), generator=None):
        u = rand(*self._extended(sample_shape), generator=generator,
                 dtype=self.concentration1.dtype, backend=self.concentration1.backend)
        return (1 - u ** self.concentration0.reciprocal()) ** self.concentration1.reciprocal()

    def log_prob(self, value):
        value = self._value(value, "Kumaraswamy.log_prob")
        a, b = self.concentration1, self.concentration0
        return (a.log() + b.log() + (a - 1) * value.log()
                + (b - 1) * (-(value ** a)).log1p())

    def cdf(self, value):
        value = self._value(value, "Kumaraswamy.cdf")
        return 1 - (1 - value ** self.concentration1) ** self.concentration0

    def icdf(self, value):
        u = 1 - self._value(value, None)
        return (1 - u ** self.concentration0.reciprocal()) ** self.concentration1.reciprocal()

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        t1, t0 = 1 - a.reciprocal(), 1 - b.reciprocal()
        return t0 + t1 * ((b + 1).digamma() + _EULER) - a.log() - b.log()


class FisherSnedecor(_Distribution):
    """The F distribution of df1 and df2 degrees of freedom: rsample is (X1 / df1) / (X2 / df2)
    of Chi2 draws, with their implicit gradients (torch's); mean NaN where df2 <= 2, variance
    NaN where df2 <= 4, mode NaN where df1 <= 2, as torch's."""

    arg_constraints = {"df1": _positive, "df2": _positive}
    support = _positive
    _params = ("df1", "df2")

    def __init__(self, df1, df2, validate_args=None):
        self._init(validate_args, df1=df1, df2=df2)

    @property
    def mean(self):
        df2 = _safe(self.df2, self.df2 <= 2, 3.0)
        return _fill(df2 / (df2 - 2), self.df2 <= 2, math.nan)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return _fill(mode, self.df1 <= 2, math.nan)

    @property
    def variance(self):
        bad = self.df2 <= 4
        df1, df2 = self.df1, _safe(self.df2, bad, 5.0)
        var = 2 * df2 ** 2 * (df1 + df2 - 2) / (df1 * (df2 - 2) ** 2 * (df2 - 4))
        return _fill(var, bad, math.nan)

    def rsample(self, sample_shape=(), generator=None):
        shape, where = self._extended(sample_shape), "FisherSnedecor.rsample"
        tiny = float(np.finfo(self.df1.dtype).tiny)
        x1 = _floored(standard_gamma_rsample(self.df1 * 0.5, shape, generator, where) / self.df1,
                      tiny)
        x2 = _floored(standard_gamma_rsample(self.df2 * 0.5, shape, generator, where) / self.df2,
                      tiny)
        return _floored(x1 / x2, tiny)

    def log_prob(self, value):
        value = self._value(value, "FisherSnedecor.log_prob")
        ct1, ct2, ct3 = self.df1 * 0.5, self.df2 * 0.5, self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3


def _von_mises_draws(be, rng, loc, kappa, shape):
    """torch's rejection method (Best & Fisher), in float64 NumPy/CuPy arrays: angles in
    [-π, π) around loc."""
    xp = be.xp
    tau = 1 + xp.sqrt(1 + 4 * kappa ** 2)
    rho = (tau - xp.sqrt(2 * tau)) / (2 * kappa)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = xp.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho ** 2) / (2 * rho))
    x, done = xp.zeros(shape), xp.zeros(shape, dtype=bool)
    while not bool(done.all()):
        u1, u2, u3 = (xp.asarray(rng.random(shape)) for _ in range(3))
        z = xp.cos(math.pi * u1)
        f = (1 + r * z) / (r + z)
        c = kappa * (r - f)
        with np.errstate(divide="ignore", invalid="ignore"):
            accept = (c * (2 - c) - u2 > 0) | (xp.log(c / u2) + 1 - c >= 0)
        accept &= ~done
        x = xp.where(accept, xp.sign(u3 - 0.5) * xp.arccos(xp.clip(f, -1, 1)), x)
        done |= accept
    return xp.mod(x + math.pi + loc, 2 * math.pi) - math.pi


class VonMises(_Distribution):
    """e^(κ cos(x - loc)) / (2π I0(κ)), κ = concentration: a circular normal. log_prob and
    variance (1 - I1(κ)/I0(κ)) use the exact Bessel functions (special.i0e, i1e; torch's
    polynomial fits agree to about 1e-7); sample is torch's rejection method (no rsample)."""

    has_rsample = False
    arg_constraints = {"loc": _real, "concentration": _positive}
    support = _real
    _params = ("loc", "concentration")

    def __init__(self, loc, concentration, validate_args=None):
        self._init(validate_args, loc=loc, concentration=concentration)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 1 - i1e(self.concentration) / i0e(self.concentration)

    def sample(self, sample_shape=(), generator=None):
        """Angles in [-π, π) of shape sample_shape + batch_shape (no gradient)."""
        like, shape = self.loc, self._extended(sample_shape)
        be = like.backend
        rng = rng_of(be, check_generator(generator, be, "VonMises.sample"))
        as64 = [be.xp.broadcast_to(be.xp.asarray(p.detach()._data, dtype=np.float64), shape)
                for p in (self.loc, self.concentration)]
        draws = _von_mises_draws(be, rng, *as64, shape)
        return tensor(draws.astype(like.dtype, copy=False), dtype=like.dtype, backend=be)

    def log_prob(self, value):
        value = self._value(value, "VonMises.log_prob")
        k = self.concentration
        return k * ((value - self.loc).cos() - 1) - math.log(2 * math.pi) - i0e(k).log()


class ContinuousBernoulli(_Distribution):
    """The continuous Bernoulli on [0, 1]: C(λ) λ^x (1 - λ)^(1-x), λ = probs (or from logits,
    not both), torch's formulas throughout (Taylor expansions for λ within `lims` of 1/2;
    probs clamped to [eps, 1 - eps]); rsample is icdf of a uniform draw, so gradients reach
    the parameter."""

    arg_constraints = {"probs": _unit_interval, "logits": _real}
    support = _unit_interval
    _params = ("probs", "logits")

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("ContinuousBernoulli: either `probs` or `logits` must be "
                             "specified, but not both")
        self._given, self._lims = ("probs" if logits is None else "logits"), lims
        self._init(validate_args, **{self._given: probs if logits is None else logits})
        eps = float(np.finfo(self._like.dtype).eps)
        if self._given == "probs":
            self.probs = self.probs.clamp(eps, 1 - eps)
            _binary_pair(self)
        else:
            self.probs = self.logits.sigmoid().clamp(eps, 1 - eps)

    @property
    def _like(self):
        return getattr(self, self._given)

    def _derive(self):
        if self._given == "logits":
            eps = float(np.finfo(self.logits.dtype).eps)
            self.probs = self.logits.sigmoid().clamp(eps, 1 - eps)
        else:
            _binary_pair(self)

    @property
    def param_shape(self):
        return self._like.shape

    def _outside(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return self.probs.where(self._outside(), self._lims[0])

    def _cont_bern_log_norm(self):
        cut = self._cut_probs()
        below = cut.where(cut <= 0.5, 0.0)
        above = cut.where(cut >= 0.5, 1.0)
        log_norm = (((-cut).log1p() - cut.log()).abs().log()
                    - (-2.0 * below).log1p().where(cut <= 0.5, (2.0 * above - 1.0).log()))
        x = (self.probs - 0.5) ** 2
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return log_norm.where(self._outside(), taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x ** 2) * x
        return mus.where(self._outside(), taylor)

    @property
    def variance(self):
        cut = self._cut_probs()
        var = (cut * (cut - 1.0) / (1.0 - 2.0 * cut) ** 2
               + 1.0 / ((-cut).log1p() - cut.log()) ** 2)
        x = (self.probs - 0.5) ** 2
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return var.where(self._outside(), taylor)

    def rsample(self, sample_shape=(), generator=None):
        u = rand(*self._extended(sample_shape), generator=generator, dtype=self.probs.dtype,
                 backend=self.probs.backend)
        return self.icdf(u)

    def log_prob(self, value):
        value = self._value(value, "ContinuousBernoulli.log_prob")
        logits = self.logits
        # -binary_cross_entropy_with_logits(logits, value), written out
        bce = logits.clamp(min=0) - logits * value + (-logits.abs()).exp().log1p()
        return -bce + self._cont_bern_log_norm()

    def cdf(self, value):
        value = self._value(value, "ContinuousBernoulli.cdf")
        cut = self._cut_probs()
        cdfs = (cut ** value * (1.0 - cut) ** (1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = cdfs.where(self._outside(), value)
        return _fill(_fill(unbounded, value <= 0.0, 0.0), value >= 1.0, 1.0)

    def icdf(self, value):
        value = self._value(value, None)
        cut = self._cut_probs()
        inside = (((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p())
                  / (cut.log() - (-cut).log1p()))
        return inside.where(self._outside(), value)

    def entropy(self):
        log_p0, log_p1 = (-self.probs).log1p(), self.probs.log()
        return self.mean * (log_p0 - log_p1) - self._cont_bern_log_norm() - log_p0


class GeneralizedPareto(_Distribution):
    """The generalised Pareto of loc, scale and concentration ξ: support [loc, loc - scale/ξ]
    where ξ < 0, [loc, inf) else; the exponential's formulas where ξ is 0 (within 1e-8, as
    torch's isclose). rsample is icdf of a uniform draw, gradients reaching all three."""

    arg_constraints = {"loc": _real, "scale": _positive, "concentration": _real}
    _params = ("loc", "scale", "concentration")

    def __init__(self, loc, scale, concentration, validate_args=None):
        self._init(validate_args, loc=loc, scale=scale, concentration=concentration)

    @property
    def support(self):
        upper = (self.loc - self.scale / self.concentration).where(self.concentration < 0,
                                                                    math.inf)
        return _interval(self.loc, upper)

    def _zero_and_safe(self):
        eq_zero = self.concentration.abs() <= 1e-8
        return eq_zero, _safe(self.concentration, eq_zero, 1.0)

    def rsample(self, sample_shape=(), generator=None):
        u = rand(*self._extended(sample_shape), generator=generator, dtype=self.loc.dtype,
                 backend=self.loc.backend)
        return self.icdf(u)

    def log_prob(self, value):
        z = (self._value(value, "GeneralizedPareto.log_prob") - self.loc) / self.scale
        eq_zero, conc = self._zero_and_safe()
        y = 1 / conc + 1
        nonzero = y * (conc * z).log1p()
        nonzero = nonzero.where(y != 0, y)
        return -self.scale.log() - z.where(eq_zero, nonzero)

    def log_survival_function(self, value):
        z = (self._value(value, "GeneralizedPareto.log_survival_function") - self.loc) / self.scale
        eq_zero, conc = self._zero_and_safe()
        return (-z).where(eq_zero, -(conc * z).log1p() / conc)

    def log_cdf(self, value):
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        eq_zero, conc = self._zero_and_safe()
        log_u = (-self._value(value, None)).log1p()
        nonzero = self.loc + self.scale / conc * (-conc * log_u).expm1()
        return (self.loc - self.scale * log_u).where(eq_zero, nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        conc = _safe(self.concentration, ~valid, 0.5)
        return (self.loc + self.scale / (1 - conc)).where(valid, math.nan)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        conc = _safe(self.concentration, ~valid, 0.25)
        return (self.scale ** 2 / ((1 - conc) ** 2 * (1 - 2 * conc))).where(valid, math.nan)

    @property
    def mode(self):
        return self.loc

    def entropy(self):
        return (self.scale.log() + self.concentration + 1).expand(*self.batch_shape)


def _stick_offset_log(x):
    """log(n, n - 1, ..., 1) for x's last dim of n (the stick-breaking offsets)."""
    n = x.shape[-1]
    return tensor(np.log(np.arange(n, 0, -1, dtype=np.float64)), dtype=x.dtype,
                  backend=x.backend)


class LogisticNormal(_Distribution):
    """The stick-breaking image of Normal(loc, scale) on the simplex (torch's
    TransformedDistribution of Independent(Normal, 1) by StickBreakingTransform, written out):
    loc and scale of last dim K - 1 give the event of K; rsample carries gradients to both;
    log_prob is the Normals' at the inverse image less the log-Jacobian."""

    arg_constraints = {"loc": _real, "scale": _positive}
    support = _simplex
    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._init(validate_args, loc=loc, scale=scale)
        if not self.batch_shape:  # (torch's: a scalar base made of shape (1,))
            self.loc, self.scale = self.loc.expand(1), self.scale.expand(1)
        self._derive()

    def _derive(self):
        shape = tuple(self.loc.shape)
        self.batch_shape, self.event_shape = shape[:-1], (shape[-1] + 1,)

    def expand(self, batch_shape, _instance=None):
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        n = self.loc.shape[-1]
        new.loc = self.loc.expand(*_shape(batch_shape), n)
        new.scale = self.scale.expand(*_shape(batch_shape), n)
        new._derive()
        return new

    def rsample(self, sample_shape=(), generator=None):
        shape = (*_shape(sample_shape), *self.loc.shape)
        eps = randn(*shape, generator=generator, dtype=self.loc.dtype, backend=self.loc.backend)
        x = self.loc + self.scale * eps
        finfo = np.finfo(x.dtype)
        z = (x - _stick_offset_log(x)).sigmoid().clamp(float(finfo.tiny), 1.0 - float(finfo.eps))
        ones = _full_like(z[..., :1], 1.0)
        return F.cat([z, ones], -1) * F.cat([ones, (1 - z).cumprod(-1)], -1)

    def log_prob(self, value):
        y = self._value(value, "LogisticNormal.log_prob")
        y_crop = y[..., :-1]
        sf = (1 - y_crop.cumsum(-1)).clamp(min=float(np.finfo(y.dtype).tiny))
        x = y_crop.log() - sf.log() + _stick_offset_log(y_crop)
        z = (x - self.loc) / self.scale
        normal = (-0.5 * z * z - self.scale.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
        shifted = x - _stick_offset_log(x)
        log_det = (-shifted + F.logsigmoid(shifted) + y_crop.log()).sum(-1)
        return normal - log_det

