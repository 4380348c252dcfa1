"""tinyattn.distributions: torch.distributions' Categorical, Normal, Bernoulli, Uniform,
Exponential, Laplace, Gamma, Beta, Independent, MultivariateNormal (from a covariance, precision
or scale_tril matrix: all through a Cholesky factor), LowRankMultivariateNormal (W Wᵀ + diag D),
OneHotCategorical, Poisson, Binomial, Geometric, LogNormal, HalfNormal, Cauchy, StudentT,
Dirichlet, Chi2, Weibull and Gumbel, made of tensor ops, so log_prob, entropy, cdf and rsample
(where torch has them; Gamma's, Beta's, Chi2's, Dirichlet's and StudentT's df by implicit
reparameterisation) carry gradients to the parameters;
kl_divergence with torch's closed forms between them (register_kl adds more; also as the module
`distributions.kl`), and the few constraints their support and arg_constraints name (Real,
Boolean, Interval...; the module `distributions.constraints`).

    dist = Categorical(logits=model(x)[:, -1])   # the next-token distribution
    token = dist.sample()                        # int64, no gradient
    loss = -dist.log_prob(token).mean()          # REINFORCE-style, differentiable
    z = Independent(Normal(mu, sigma), 1)        # a diagonal Gaussian: log_prob sums the dims

Parameters are validated when made, and values when scored, as torch's validate_args does by
default (a ValueError); validate_args=False takes them as they are.

What lives where:
  constraints.py   the constraint classes and objects (torch's public names and the private
                   ones the distributions use)
  distribution.py  _Distribution, the shared base, and the shared helpers (_tensors, _shape,
                   _check, _refuse_outside, _fill, _sum_rightmost, _standard_gamma, _eye_like)
  discrete.py      Categorical, Bernoulli, OneHotCategorical, Poisson, Binomial, Geometric
  continuous.py    Normal, Uniform, Exponential, Laplace, Gamma, Beta, LogNormal, HalfNormal,
                   Cauchy, StudentT, Dirichlet, Chi2, Weibull, Gumbel
  multivariate.py  Independent, MultivariateNormal, LowRankMultivariateNormal
  implicit.py      Gamma draws with a gradient (implicit reparameterisation: dx/da from the
                   incomplete gamma function), which the gamma-based rsamples use
  kl.py            the registry, register_kl, kl_divergence and every KL pair (imported here,
                   so the pairs are registered)
"""

from . import constraints as constraints  # (modules, as torch's)
from . import kl as kl
from .continuous import (
    Beta,
    Cauchy,
    Chi2,
    Dirichlet,
    Exponential,
    Gamma,
    Gumbel,
    HalfNormal,
    Laplace,
    LogNormal,
    Normal,
    StudentT,
    Uniform,
    Weibull,
)
from .discrete import Bernoulli, Binomial, Categorical, Geometric, OneHotCategorical, Poisson
from .kl import kl_divergence, register_kl
from .multivariate import Independent, LowRankMultivariateNormal, MultivariateNormal

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet",
           "Exponential", "Gamma", "Geometric", "Gumbel", "HalfNormal", "Independent", "Laplace",
           "LogNormal", "LowRankMultivariateNormal", "MultivariateNormal", "Normal",
           "OneHotCategorical", "Poisson", "StudentT", "Uniform", "Weibull", "kl_divergence",
           "register_kl"]
