"""tinyattn.distributions: torch.distributions' Categorical and Normal, made of tensor ops, so
log_prob and entropy (and Normal.rsample) carry gradients to the parameters.

    dist = Categorical(logits=model(x)[:, -1])   # the next-token distribution
    token = dist.sample()                        # int64, no gradient
    loss = -dist.log_prob(token).mean()          # REINFORCE-style, differentiable
"""

import math
import numbers

import numpy as np

from .autograd import no_grad
from .dtypes import result_type
from .errors import ShapeError, fmt_shape
from .tensor import Tensor, multinomial, randn, tensor

__all__ = ["Categorical", "Normal"]


class Categorical:
    """Categories 0..K-1 of the last dim of `probs` (weights, normalised here) or of `logits`
    (log-weights); the dims before it are the batch. Like torch (validate_args), bad parameters
    are refused when made: NaN, inf or negative probs, NaN or +inf logits, impossible rows."""

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

    def __repr__(self):
        return f"Categorical(probs: {fmt_shape(self.probs.shape)})"


class Normal:
    """N(loc, scale²), loc and scale tensors or numbers that broadcast; a NaN loc, or a scale
    that is not finite and > 0, is refused when made (validate_args=False takes them). As torch's
    broadcast_all: a number takes the other (tensor) parameter's float dtype and backend, and
    loc and scale are broadcast to batch_shape (views, so gradients reach the given tensors)."""

    def __init__(self, loc, scale, validate_args=None):
        loc, scale = _tensors(loc, scale)
        self.validate_args = validate_args is not False
        if self.validate_args:
            _check("Normal", "loc", loc, lambda a: ~np.isnan(a), "must not be NaN")
            _check("Normal", "scale", scale, lambda a: np.isfinite(a) & (a > 0),
                   "must be > 0 and finite")
        self.batch_shape = tuple(np.broadcast_shapes(loc.shape, scale.shape))
        self.loc, self.scale = loc.expand(*self.batch_shape), scale.expand(*self.batch_shape)

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

