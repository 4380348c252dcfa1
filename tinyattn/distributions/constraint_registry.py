"""tinyattn.distributions.constraint_registry: torch's two registries from constraints to
transforms. biject_to(c) is a bijective Transform from the reals (of the right event shape) onto
c, for reparameterised samplers and change-of-variables densities; transform_to(c) is a
Transform onto c, not necessarily bijective, for unconstrained optimisation. Both are
ConstraintRegistry objects: register(constraint_class_or_object, factory) adds a kind, and
calling one with a constraint looks its type up and calls the factory.

    scale = transform_to(Normal.arg_constraints["scale"])(unconstrained)  # > 0
    u = biject_to(dist.support).inv(x)                                    # back to the reals

The registrations are torch's: real, positive / nonnegative (exp), greater_than /
greater_than_eq / less_than (exp and a shift), interval / half_open_interval (sigmoid and an
affine map; a plain sigmoid onto [0, 1]), simplex (stick-breaking for biject_to, softmax for
transform_to), corr_cholesky, independent, cat and stack; transform_to also lower_cholesky,
positive_definite and positive_semidefinite."""

import numbers

from . import constraints
from . import transforms as T

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """torch's ConstraintRegistry: a table from Constraint classes to factories (each
    constraint -> Transform)."""

    def __init__(self):
        self._registry = {}

    def register(self, constraint, factory=None):
        """Register factory for constraint (a Constraint subclass, or an object of one: its
        class); without factory, a decorator."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint,
                                                              constraints.Constraint):
            raise TypeError(f"ConstraintRegistry.register: expected constraint to be either a "
                            f"Constraint subclass or instance, but got {constraint!r}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        """The transform the factory registered for type(constraint) makes of it; a
        NotImplementedError where none is registered."""
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(
                f"Cannot transform {type(constraint).__name__} constraints") from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


@biject_to.register(constraints.real)
@transform_to.register(constraints.real)
def _transform_to_real(constraint):
    return T.identity_transform


@biject_to.register(constraints.independent)
def _biject_to_independent(constraint):
    return T.IndependentTransform(biject_to(constraint.base_constraint),
                                  constraint.reinterpreted_batch_ndims)


@transform_to.register(constraints.independent)
def _transform_to_independent(constraint):
    return T.IndependentTransform(transform_to(constraint.base_constraint),
                                  constraint.reinterpreted_batch_ndims)


@biject_to.register(constraints.positive)
@biject_to.register(constraints.nonnegative)
@transform_to.register(constraints.positive)
@transform_to.register(constraints.nonnegative)
def _transform_to_positive(constraint):
    return T.ExpTransform()


@biject_to.register(constraints.greater_than)
@biject_to.register(constraints.greater_than_eq)
@transform_to.register(constraints.greater_than)
@transform_to.register(constraints.greater_than_eq)
def _transform_to_greater_than(constraint):
    return T.ComposeTransform([T.ExpTransform(), T.AffineTransform(constraint.lower_bound, 1)])


@biject_to.register(constraints.less_than)
@transform_to.register(constraints.less_than)
def _transform_to_less_than(constraint):
    return T.ComposeTransform([T.ExpTransform(), T.AffineTransform(constraint.upper_bound, -1)])


@biject_to.register(constraints.interval)
@biject_to.register(constraints.half_open_interval)
@transform_to.register(constraints.interval)
@transform_to.register(constraints.half_open_interval)
def _transform_to_interval(constraint):
    low, high = constraint.lower_bound, constraint.upper_bound
    if (isinstance(low, numbers.Number) and low == 0
            and isinstance(high, numbers.Number) and high == 1):
        return T.SigmoidTransform()
    return T.ComposeTransform([T.SigmoidTransform(), T.AffineTransform(low, high - low)])


@biject_to.register(constraints.simplex)
def _biject_to_simplex(constraint):
    return T.StickBreakingTransform()


@transform_to.register(constraints.simplex)
def _transform_to_simplex(constraint):
    return T.SoftmaxTransform()


@transform_to.register(constraints.lower_cholesky)
def _transform_to_lower_cholesky(constraint):
    return T.LowerCholeskyTransform()


@transform_to.register(constraints.positive_definite)
@transform_to.register(constraints.positive_semidefinite)
def _transform_to_positive_definite(constraint):
    return T.PositiveDefiniteTransform()


@biject_to.register(constraints.corr_cholesky)
@transform_to.register(constraints.corr_cholesky)
def _transform_to_corr_cholesky(constraint):
    return T.CorrCholeskyTransform()


@biject_to.register(constraints.cat)
def _biject_to_cat(constraint):
    return T.CatTransform([biject_to(c) for c in constraint.cseq], constraint.dim,
                          constraint.lengths)


@transform_to.register(constraints.cat)
def _transform_to_cat(constraint):
    return T.CatTransform([transform_to(c) for c in constraint.cseq], constraint.dim,
                          constraint.lengths)


@biject_to.register(constraints.stack)
def _biject_to_stack(constraint):
    return T.StackTransform([biject_to(c) for c in constraint.cseq], constraint.dim)


@transform_to.register(constraints.stack)
def _transform_to_stack(constraint):
    return T.StackTransform([transform_to(c) for c in constraint.cseq], constraint.dim)
