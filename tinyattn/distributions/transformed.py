"""tinyattn.distributions' TransformedDistribution (torch's): a base distribution pushed
through a list of transforms (distributions.transforms). rsample is the transforms of the
base's rsample, so gradients reach the base's parameters and the transforms'; log_prob inverts
the transforms and subtracts their log |det Jacobian|; cdf and icdf go through the base's
(flipped where the transforms decrease); batch_shape and event_shape as torch's (the base
expanded, or made Independent, where the transforms ask)."""

from ..autograd import no_grad
from ..errors import fmt_shape
from ..tensor import Tensor, tensor
from .distribution import _Distribution, _shape, _sum_rightmost
from .multivariate import Independent
from .transforms import ComposeTransform, Transform, _independent


def _transform_list(transforms):
    if isinstance(transforms, Transform):
        return [transforms]
    if isinstance(transforms, list) and all(isinstance(t, Transform) for t in transforms):
        return transforms
    raise ValueError(f"TransformedDistribution: transforms must be a Transform or a list of "
                     f"Transforms, got {transforms!r}")


class TransformedDistribution(_Distribution):
    """Y = f(X), X ~ base_distribution, f the transforms applied in order:
    log p(Y) = log p(X) - log |det dY/dX|.

        logistic = TransformedDistribution(Uniform(0, 1), [SigmoidTransform().inv,
                                                           AffineTransform(a, b)])

    event_shape is the larger of the base's (as the transforms change it) and the transforms'
    own event dims, as torch's."""

    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        self.transforms = _transform_list(transforms)
        base_shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        base_event_dim = len(base_distribution.event_shape)
        transform = ComposeTransform(self.transforms)
        need = transform.domain.event_dim
        if len(base_shape) < need:
            raise ValueError(f"TransformedDistribution: base_distribution needs a shape of at "
                             f"least {need} dims, got batch_shape + event_shape "
                             f"{fmt_shape(base_shape)}")
        forward_shape = tuple(transform.forward_shape(base_shape))
        expanded = tuple(transform.inverse_shape(forward_shape))
        if expanded != base_shape:
            base_distribution = base_distribution.expand(
                expanded[:len(expanded) - base_event_dim])
        if need > base_event_dim:
            base_distribution = Independent(base_distribution, need - base_event_dim)
        self.base_dist = base_distribution
        change = transform.codomain.event_dim - transform.domain.event_dim
        event_dim = max(transform.codomain.event_dim, base_event_dim + change)
        cut = len(forward_shape) - event_dim
        self.batch_shape, self.event_shape = forward_shape[:cut], forward_shape[cut:]
        self.validate_args = validate_args is not False

    @property
    def _like(self):
        """A tensor of the base's dtype and backend (its mean), for values given as lists."""
        try:
            mean = self.base_dist.mean
        except (NotImplementedError, AttributeError):
            mean = None
        return mean if isinstance(mean, Tensor) else tensor(0.0)

    @property
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        return _independent(self.transforms[-1].codomain, len(self.event_shape))

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def mean(self):
        raise NotImplementedError("TransformedDistribution has no mean")

    @property
    def variance(self):
        raise NotImplementedError("TransformedDistribution has no variance")

    def expand(self, batch_shape, _instance=None):
        """The base expanded to the shape the transforms take back from batch_shape +
        event_shape, as torch's."""
        batch_shape = _shape(batch_shape)
        shape = batch_shape + tuple(self.event_shape)
        for t in reversed(self.transforms):
            shape = tuple(t.inverse_shape(shape))
        new = _instance or object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.base_dist = self.base_dist.expand(shape[:len(shape) - len(self.base_dist.event_shape)])
        new.batch_shape = batch_shape
        return new

    def sample(self, sample_shape=(), generator=None):
        """The transforms of the base's sample (no gradient; a base without rsample too)."""
        with no_grad():
            x = self.base_dist.sample(sample_shape, generator=generator)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape=(), generator=None):
        """The transforms of the base's rsample: gradients reach every parameter."""
        x = self.base_dist.rsample(sample_shape, generator=generator)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        """The base's log_prob at the inverted value, less each transform's log-det (summed
        over the dims its event_dim leaves to the whole); with validate_args, a value outside
        the support is a ValueError."""
        y = self._value(value, "TransformedDistribution.log_prob")
        event_dim, log_prob = len(self.event_shape), 0.0
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            log_prob = log_prob - _sum_rightmost(t.log_abs_det_jacobian(x, y),
                                                 event_dim - t.domain.event_dim)
            y = x
        base = self.base_dist.log_prob(y)
        return log_prob + _sum_rightmost(base, event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value):
        """value, or 1 - value where the transforms decrease (their signs' product)."""
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        if isinstance(sign, int) and sign == 1:
            return value
        return sign * (value - 0.5) + 0.5

    def cdf(self, value):
        value = self._value(value, None)
        for t in reversed(self.transforms):
            value = t.inv(value)
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value):
        value = self.base_dist.icdf(self._monotonize_cdf(self._value(value, None)))
        for t in self.transforms:
            value = t(value)
        return value
