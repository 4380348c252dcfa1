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
  distribution.py  _Distribution, the shared base (public as Distribution), ExponentialFamily,
                   and the shared helpers (_tensors, _shape,
                   _check, _refuse_outside, _fill, _sum_rightmost, _standard_gamma, _eye_like)
  discrete.py      Categorical, Bernoulli, OneHotCategorical, Poisson, Binomial, Geometric
  continuous.py    Normal, Uniform, Exponential, Laplace, Gamma, Beta, LogNormal, HalfNormal,
                   Cauchy, StudentT, Dirichlet, Chi2, Weibull, Gumbel
  multivariate.py  Independent, MultivariateNormal, LowRankMultivariateNormal
  implicit.py      Gamma draws with a gradient (implicit reparameterisation: dx/da from the
                   incomplete gamma function), which the gamma-based rsamples use
  kl.py            the registry, register_kl, kl_divergence and every KL pair (imported here,
                   so the pairs are registered)
  more.py          Pareto, HalfCauchy, InverseGamma, Kumaraswamy, FisherSnedecor, VonMises,
                   ContinuousBernoulli, GeneralizedPareto, LogisticNormal (torch's transformed
                   ones written out in tensor ops)
  more_discrete.py NegativeBinomial, Multinomial, LogitRelaxedBernoulli, RelaxedBernoulli,
                   ExpRelaxedCategorical, RelaxedOneHotCategorical,
                   OneHotCategoricalStraightThrough, MixtureSameFamily
  kl_more.py       the KL pairs of Pareto and ContinuousBernoulli (imported here: registered)
  transforms.py    Transform and torch's transforms (Exp, Affine, Sigmoid, Tanh, Softplus, Abs,
                   Power, Softmax, StickBreaking, LowerCholesky, PositiveDefinite, CorrCholesky,
                   Compose, Independent, Reshape, Cat, Stack, CumulativeDistribution; also the
                   module `distributions.transforms`)
  transformed.py   TransformedDistribution (a base distribution through transforms)
  constraint_registry.py  ConstraintRegistry, biject_to and transform_to: a constraint's
                   transform from the reals, as torch's registrations (also the module
                   `distributions.constraint_registry`)
  matrix.py        LKJCholesky (Cholesky factors of correlation matrices, the onion method)
                   and Wishart (Bartlett rsample)
  utils.py         torch.distributions.utils: broadcast_all, logits_to_probs, probs_to_logits,
                   clamp_probs, tril_matrix_to_vec, vec_to_tril_matrix, lazy_property
torch's one-module-per-distribution names (`from torch.distributions.normal import Normal`)
are module objects made at the end of this file, each naming its classes from the files above.
"""

import sys
import types

from . import constraint_registry as constraint_registry
from . import constraints as constraints  # (modules, as torch's)
from . import kl as kl
from . import kl_more as kl_more  # (registers the Pareto and ContinuousBernoulli KL pairs)
from . import transforms as transforms
from . import utils as utils
from .constraint_registry import biject_to, transform_to
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
from .distribution import Distribution, ExponentialFamily
from .kl import kl_divergence, register_kl
from .matrix import LKJCholesky, Wishart
from .more import (
    ContinuousBernoulli,
    FisherSnedecor,
    GeneralizedPareto,
    HalfCauchy,
    InverseGamma,
    Kumaraswamy,
    LogisticNormal,
    Pareto,
    VonMises,
)
from .more_discrete import (
    ExpRelaxedCategorical,
    LogitRelaxedBernoulli,
    MixtureSameFamily,
    Multinomial,
    NegativeBinomial,
    OneHotCategoricalStraightThrough,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
)
from .multivariate import Independent, LowRankMultivariateNormal, MultivariateNormal
from .transformed import TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    CatTransform,
    ComposeTransform,
    CorrCholeskyTransform,
    CumulativeDistributionTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StackTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet",
           "Exponential", "Gamma", "Geometric", "Gumbel", "HalfNormal", "Independent", "Laplace",
           "LogNormal", "LowRankMultivariateNormal", "MultivariateNormal", "Normal",
           "OneHotCategorical", "Poisson", "StudentT", "Uniform", "Weibull", "kl_divergence",
           "register_kl"]
__all__ += ["ContinuousBernoulli", "ExpRelaxedCategorical", "FisherSnedecor",
            "GeneralizedPareto", "HalfCauchy", "InverseGamma", "Kumaraswamy",
            "LogisticNormal", "LogitRelaxedBernoulli", "MixtureSameFamily", "Multinomial",
            "NegativeBinomial",
            "OneHotCategoricalStraightThrough", "Pareto", "RelaxedBernoulli",
            "RelaxedOneHotCategorical", "VonMises"]
__all__ += ["AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
            "CorrCholeskyTransform", "CumulativeDistributionTransform", "Distribution",
            "ExpTransform", "ExponentialFamily", "IndependentTransform",
            "LowerCholeskyTransform", "PositiveDefiniteTransform", "PowerTransform",
            "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform",
            "StackTransform", "StickBreakingTransform", "TanhTransform", "Transform",
            "TransformedDistribution"]
__all__ += ["LKJCholesky", "Wishart", "biject_to", "transform_to"]
__all__ += ["identity_transform"]

# torch's submodules, one per distribution: module objects over the classes above, so
# `from tinyattn.distributions.normal import Normal` works as torch's line does
_SUBMODULES = {
    "bernoulli": ["Bernoulli"], "beta": ["Beta"], "binomial": ["Binomial"],
    "categorical": ["Categorical"], "cauchy": ["Cauchy"], "chi2": ["Chi2"],
    "continuous_bernoulli": ["ContinuousBernoulli"], "dirichlet": ["Dirichlet"],
    "exp_family": ["ExponentialFamily"], "exponential": ["Exponential"],
    "fishersnedecor": ["FisherSnedecor"], "gamma": ["Gamma"],
    "generalized_pareto": ["GeneralizedPareto"], "geometric": ["Geometric"],
    "gumbel": ["Gumbel"], "half_cauchy": ["HalfCauchy"], "half_normal": ["HalfNormal"],
    "independent": ["Independent"], "inverse_gamma": ["InverseGamma"],
    "kumaraswamy": ["Kumaraswamy"], "laplace": ["Laplace"], "lkj_cholesky": ["LKJCholesky"],
    "log_normal": ["LogNormal"], "logistic_normal": ["LogisticNormal"],
    "lowrank_multivariate_normal": ["LowRankMultivariateNormal"],
    "mixture_same_family": ["MixtureSameFamily"], "multinomial": ["Multinomial"],
    "multivariate_normal": ["MultivariateNormal"], "negative_binomial": ["NegativeBinomial"],
    "normal": ["Normal"],
    "one_hot_categorical": ["OneHotCategorical", "OneHotCategoricalStraightThrough"],
    "pareto": ["Pareto"], "poisson": ["Poisson"],
    "relaxed_bernoulli": ["LogitRelaxedBernoulli", "RelaxedBernoulli"],
    "relaxed_categorical": ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"],
    "studentT": ["StudentT"], "transformed_distribution": ["TransformedDistribution"],
    "uniform": ["Uniform"], "von_mises": ["VonMises"], "weibull": ["Weibull"],
    "wishart": ["Wishart"],
}
for _name, _names in _SUBMODULES.items():
    _module = types.ModuleType(f"{__name__}.{_name}",
                               f"torch.distributions.{_name}: {', '.join(_names)}.")
    for _n in _names:
        setattr(_module, _n, globals()[_n])
    _module.__all__ = list(_names)
    sys.modules[_module.__name__] = _module
    globals()[_name] = _module
del _name, _names, _n, _module
