"""The KL pairs torch registers for Pareto and ContinuousBernoulli (distributions/more.py)
against themselves and the earlier distributions, registered with kl.register_kl when this
module is imported (the package's __init__ does)."""

import math

from ..tensor import full
from .continuous import Beta, Exponential, Gamma, Gumbel, Laplace, Normal, Uniform
from .distribution import _fill
from .kl import register_kl
from .more import ContinuousBernoulli, Pareto


def _x_log_x(t):
    return t * t.log()


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(Beta, ContinuousBernoulli)
@register_kl(Uniform, ContinuousBernoulli)
def _kl_to_continuous_bernoulli(p, q):
    """-H(p) - E[x] logits_q - log(1 - λq) - log C(λq); inf where a Uniform p reaches 0 or 1
    (torch's)."""
    result = -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()
    if isinstance(p, Uniform):
        result = _fill(result, (p.high >= 1) | (p.low <= 0), math.inf)
    return result


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale) ** 2) + q.scale.log()
    t3 = (p.variance + p.mean ** 2 - 2.0 * q.loc * p.mean) / (2.0 * q.scale ** 2)
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    """-H(p) + log(high - low); inf where q.low >= 0 or q.high <= 1 (torch's test, kept)."""
    result = -p.entropy() + (q.high - q.low).log()
    return _fill(result, (q.low >= 0) | (q.high <= 1), math.inf)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio, alpha_ratio = p.scale / q.scale, q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return _fill(result, p.scale < q.scale, math.inf)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate = p.scale * q.rate
    alpha = _fill(p.alpha, p.alpha <= 1, 2.0)
    result = ((alpha / scale_rate).log() - alpha.reciprocal() + alpha * scale_rate / (alpha - 1)
              - 1)
    return _fill(result, p.alpha <= 1, math.inf)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    alpha = _fill(p.alpha, p.alpha <= 1, 2.0)
    common = p.scale.log() + alpha.reciprocal()
    t1 = alpha.log() - common
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common
    t4 = q.rate * alpha * p.scale / (alpha - 1)
    return _fill(t1 + t2 + t3 + t4 - 1, p.alpha <= 1, math.inf)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    alpha = _fill(p.alpha, p.alpha <= 2, 3.0)
    var_normal = 2 * q.scale ** 2
    common = p.scale / (alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * alpha / p.scale).log()
    t3 = alpha * common ** 2 / (alpha - 2)
    t4 = (alpha * common - q.loc) ** 2
    return _fill(t1 - alpha.reciprocal() + (t3 + t4) / var_normal - 1, p.alpha <= 2, math.inf)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale ** q.alpha * width).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    return _fill(t2 * (q.alpha + 1) - t1, p.low < q.scale, math.inf)


@register_kl(Beta, Pareto)
@register_kl(ContinuousBernoulli, Pareto)
@register_kl(Exponential, ContinuousBernoulli)
@register_kl(Exponential, Pareto)
@register_kl(Gamma, ContinuousBernoulli)
@register_kl(Gamma, Pareto)
@register_kl(Gumbel, ContinuousBernoulli)
@register_kl(Gumbel, Pareto)
@register_kl(Laplace, ContinuousBernoulli)
@register_kl(Laplace, Pareto)
@register_kl(Normal, ContinuousBernoulli)
@register_kl(Normal, Pareto)
@register_kl(Pareto, Beta)
@register_kl(Pareto, ContinuousBernoulli)
@register_kl(Pareto, Uniform)
def _kl_infinity(p, q):
    """inf: p puts mass where q has none (torch's pairs)."""
    like = p._like if hasattr(p, "_like") else p.loc  # (Normal: no _like)
    return full(tuple(p.batch_shape), math.inf, dtype=like.dtype, backend=like.backend)
