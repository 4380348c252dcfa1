"""tinyattn.distributions.kl, as torch.distributions.kl: the registry (_KL), register_kl,
kl_divergence, and every closed-form KL pair between the distributions (registered here, when
this module is imported: the package's __init__ does)."""

import math

import numpy as np

from .. import functional as F
from ..linalg import solve_triangular
from ..tensor import full, zeros
from .continuous import (
    _EULER,
    Beta,
    Cauchy,
    Dirichlet,
    Exponential,
    Gamma,
    Gumbel,
    HalfNormal,
    Laplace,
    LogNormal,
    Normal,
    Uniform,
    Weibull,
)
from .discrete import Bernoulli, Binomial, Categorical, Geometric, OneHotCategorical, Poisson
from .distribution import _fill, _sum_rightmost
from .multivariate import (
    Independent,
    LowRankMultivariateNormal,
    MultivariateNormal,
    _batch_mahalanobis,
)

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


def _as_scale_tril_normal(d):
    """A MultivariateNormal with d's loc and scale_tril (d itself when it is one)."""
    if isinstance(d, MultivariateNormal):
        return d
    return MultivariateNormal(d.loc, scale_tril=d.scale_tril, validate_args=False)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
@register_kl(LowRankMultivariateNormal, MultivariateNormal)
@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_low_rank(p, q):
    """torch's three pairs with a LowRankMultivariateNormal: the Gaussians' KL from their
    Cholesky factors (the low-rank one's scale_tril, √D · chol(I + D^-½ W Wᵀ D^-½))."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with "
                         "different event shapes cannot be computed")
    return _kl_multivariatenormal_multivariatenormal(_as_scale_tril_normal(p),
                                                     _as_scale_tril_normal(q))


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
