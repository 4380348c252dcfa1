"""tinyattn.distributions: torch.distributions' Categorical and Normal, made of tensor ops, so
log_prob and entropy (and Normal.rsample) carry gradients to the parameters.

    dist = Categorical(logits=model(x)[:, -1])   # the next-token distribution
    token = dist.sample()                        # int64, no gradient
    loss = -dist.log_prob(token).mean()          # REINFORCE-style, differentiable
"""

import math
import numbers
import sys
import types
import warnings

import numpy as np

from .autograd import no_grad
from .dtypes import result_type
from .errors import ShapeError, fmt_shape
from .tensor import Tensor, arange, full, multinomial, randn, tensor

__all__ = ["Categorical", "Normal", "kl_divergence", "register_kl"]


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

