"""tinyattn.distributions' shared base and helpers: _Distribution (torch's Distribution:
parameters made tensors and broadcast, validate_args, expand, sample from rsample...; public as
Distribution) and ExponentialFamily (entropy from the log normalizer), and the
helpers more than one distribution (or kl) uses: _tensors (broadcast_all, less the broadcast),
_shape, _check and _refuse_outside (validate_args' errors), _fill, _sum_rightmost,
_standard_gamma (Gamma(a, 1) draws) and _eye_like."""

import numbers
import operator
import warnings

import numpy as np

from ..autograd import grad, no_grad
from ..dtypes import result_type
from ..errors import fmt_shape
from ..generator import check as check_generator
from ..generator import rng_of
from ..tensor import Tensor, eye, tensor


class _Distribution:
    """What the distributions below share, as torch's Distribution: parameters made tensors
    (numbers take a tensor parameter's dtype) and broadcast to batch_shape (views, so gradients
    reach the given tensors), checked against arg_constraints when made, and values checked
    against the support (and batch_shape) when scored, both with validate_args (the default)."""

    has_rsample = True
    has_enumerate_support = False
    event_shape = ()
    _params = ()  # the parameters' names, the first giving dtype and backend

    def _init(self, validate_args, **params):
        values = _tensors(*params.values())
        self.batch_shape = tuple(np.broadcast_shapes(*(v.shape for v in values)))
        for name, v in zip(params, values, strict=True):
            setattr(self, name, v.expand(*self.batch_shape))
        self.validate_args = validate_args is not False
        if self.validate_args:
            for name in params:
                _refuse_outside(type(self).__name__, name, getattr(self, name),
                                self.arg_constraints[name])

    @property
    def _like(self):
        return getattr(self, self._params[0])

    def _extended(self, sample_shape):
        return _shape(sample_shape) + tuple(self.batch_shape) + tuple(self.event_shape)

    def _value(self, value, where):
        """value as a tensor (a number or list in the parameters' float dtype); with a `where`
        and validate_args, one that does not broadcast to batch_shape + event_shape or lies
        outside the support is a ValueError, as torch's."""
        like = self._like
        if not isinstance(value, Tensor):
            value = tensor(value, dtype=result_type(like, 0.0), backend=like.backend)
        if where and self.validate_args:
            event = tuple(self.event_shape)
            if event and tuple(value.shape[value.ndim - len(event):]) != event:
                raise ValueError(f"{where}: value of shape {fmt_shape(value.shape)} must end in "
                                 f"event_shape {fmt_shape(event)}")
            full_shape = tuple(self.batch_shape) + event
            try:
                np.broadcast_shapes(value.shape, full_shape)
            except ValueError:
                raise ValueError(f"{where}: value of shape {fmt_shape(value.shape)} does not "
                                 f"broadcast to batch_shape + event_shape "
                                 f"{fmt_shape(full_shape)}") from None
            _refuse_outside(where, "value", value, self.support)
        return value

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} has no mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} has no mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} has no variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=(), generator=None):
        """rsample's draw, without its gradient."""
        with no_grad():
            return self.rsample(sample_shape, generator).detach()

    def rsample(self, sample_shape=(), generator=None):
        raise NotImplementedError(f"{type(self).__name__} has no rsample")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__} has no entropy")

    def cdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} has no cdf")

    def icdf(self, value):
        raise NotImplementedError(f"{type(self).__name__} has no icdf")

    def perplexity(self):
        return self.entropy().exp()

    def expand(self, batch_shape, _instance=None):
        """This distribution with its parameters broadcast to batch_shape (views: gradients
        reach the parameters given), as torch's; not validated again."""
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.batch_shape = _shape(batch_shape)
        for name in self._params:
            setattr(new, name, getattr(self, name).expand(*new.batch_shape))
        new._derive()
        return new

    def _derive(self):
        """Remake what is built from the parameters (a base distribution), after expand."""

    def sample_n(self, n):
        """sample((n,)), with torch's FutureWarning."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
                      FutureWarning, stacklevel=2)
        return self.sample((n,))

    def __repr__(self):
        params = ", ".join(f"{name}: {fmt_shape(getattr(self, name).shape)}"
                           for name in self._params)
        return f"{type(self).__name__}({params})"


Distribution = _Distribution  # torch's public name for the base class


class ExponentialFamily(_Distribution):
    """torch's ExponentialFamily: p(x) = h(x) exp(<θ, t(x)> - F(θ)), a subclass naming its
    natural parameters θ (_natural_params), the log normalizer F (_log_normalizer) and
    E[log h(X)] (_mean_carrier_measure); entropy is then F(θ) - <θ, ∇F(θ)> - E[log h(X)],
    ∇F through autograd at detached parameters, as torch's (so no gradient reaches them)."""

    @property
    def _natural_params(self):
        raise NotImplementedError(f"{type(self).__name__} has no _natural_params")

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError(f"{type(self).__name__} has no _log_normalizer")

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError(f"{type(self).__name__} has no _mean_carrier_measure")

    def entropy(self):
        params = [p.detach().requires_grad_() for p in self._natural_params]
        normalizer = self._log_normalizer(*params)
        grads = grad(normalizer.sum(), params, create_graph=True)
        result = normalizer - self._mean_carrier_measure
        for p, g in zip(params, grads, strict=True):
            result = result - (p * g).reshape(*self.batch_shape, -1).sum(-1)
        return result


def _standard_gamma(concentration, shape, generator, where):
    """Gamma(concentration, 1) draws of `shape` (no gradient) from `generator` or the
    backend's own stream, in concentration's dtype: the backend's standard_gamma."""
    be = concentration.backend
    rng = rng_of(be, check_generator(generator, be, where))
    a = be.xp.broadcast_to(concentration.detach()._data, shape)
    draws = be.xp.asarray(rng.standard_gamma(a)).astype(concentration.dtype, copy=False)
    # floored at the smallest normal number, as torch's: a row of draws that all underflow to
    # 0 (tiny concentrations) would make Dirichlet's and Beta's x / sum(x) 0 / 0 = NaN
    draws = be.xp.maximum(draws, np.finfo(draws.dtype).tiny)
    return tensor(draws, dtype=concentration.dtype, backend=be)


def _eye_like(matrix):
    return eye(matrix.shape[-1], dtype=matrix.dtype, backend=matrix.backend)


def _sum_rightmost(value, dim):
    """value summed over its last `dim` dims (torch's _sum_rightmost)."""
    return value.reshape(*value.shape[:value.ndim - dim], -1).sum(-1) if dim else value


def _refuse_outside(where, name, value, constraint):
    """validate_args: a ValueError naming `name` where `value` lies outside `constraint`."""
    with no_grad():
        good = np.asarray(constraint.check(value.detach()).numpy())
    if good.all():
        return
    values, n = np.asarray(value.detach().numpy()), constraint.event_dim  # (a bad event shown)
    values = np.broadcast_to(values, good.shape + values.shape[values.ndim - n:])
    raise ValueError(f"{where}: {name} must be within {constraint!r}, got "
                     f"{values[~good][0].tolist()} ({int((~good).sum())} of {good.size} "
                     f"invalid)")


def _fill(t, mask, value):
    """t with `value` where mask (both broadcast): torch's t[mask] = value, out of place."""
    shape = tuple(np.broadcast_shapes(t.shape, mask.shape))
    return t.expand(*shape).masked_fill(mask.expand(*shape), value)


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
    """sample_shape as a tuple of ints (one int counts as (n,)); a float size is refused, as
    torch.Size refuses it (int() would cut 2.5 to 2 without a word)."""
    try:
        shape = ((operator.index(sample_shape),) if isinstance(sample_shape, numbers.Integral)
                 else tuple(operator.index(n) for n in sample_shape))
    except TypeError:
        raise TypeError(f"sample: sample_shape must be a tuple of ints, got {sample_shape!r}") \
            from None
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
