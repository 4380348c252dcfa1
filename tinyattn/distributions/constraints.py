"""tinyattn.distributions.constraints: torch.distributions.constraints' constraints, which
the distributions' support and arg_constraints and the transforms' domains name: the public
base class Constraint, and its kinds (Real, Boolean, Interval, HalfOpenInterval, GreaterThan,
GreaterThanEq, LessThan, Simplex, Multinomial, LowerTriangular, LowerCholesky, CorrCholesky,
Square, Symmetric, PositiveSemidefinite, PositiveDefinite, IndependentConstraint,
IntegerInterval, IntegerGreaterThan, MixtureSameFamilyConstraint, cat / stack, and dependent /
dependent_property, whose check() refuses): check(value) is a bool tensor, True where value
lies in the set, over the last event_dim dims. Each kind is its own class, so that
constraint_registry can look transforms up by type, as torch's. torch's public names (real,
positive, unit_interval, interval(...), independent(...)...) are at the end; the distributions
use the private ones (_real, _positive...)."""

import numpy as np

from ..errors import fmt_shape
from ..functional import cat as _cat_tensors
from ..functional import stack as _stack_tensors
from ..tensor import Tensor, tensor


class _NotAConstraintError(TypeError, AssertionError):
    """A part given to independent / cat / stack / MixtureSameFamilyConstraint that is not a
    Constraint: a TypeError, and the AssertionError torch raises."""


def _need_constraint(where, c):
    if not isinstance(c, Constraint):
        raise _NotAConstraintError(f"constraints.{where}: expected a Constraint, got "
                                   f"{type(c).__name__}")


class Constraint:
    """torch's Constraint, the base of every constraint: a region values may lie in.
    is_discrete (False unless the set is discrete) and event_dim (how many rightmost dims make
    one event: check() reduces over them) are attributes; check(value) is a bool tensor of
    sample_shape + batch_shape, True where the event lies in the set."""

    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError(f"{type(self).__name__}.check is not written")

    def __repr__(self):
        return type(self).__name__[1:] + "()"


class _Constraint(Constraint):
    """A constraint given by a test: check(value) is test(value, *bounds), a bool tensor; the
    bounds (numbers or tensors) are attributes, as torch's. The named kinds below subclass
    it."""

    def __init__(self, name, test, is_discrete=False, **bounds):
        self._name, self._test, self.is_discrete, self._bounds = name, test, is_discrete, bounds
        self.__dict__.update(bounds)

    def check(self, value):
        return self._test(value, *self._bounds.values())

    def __repr__(self):
        bounds = ", ".join(f"{k}={fmt_shape(v.shape) if isinstance(v, Tensor) else v}"
                           for k, v in self._bounds.items())
        return f"{self._name}({bounds})"


class _IndependentConstraint(Constraint):
    """torch's constraints.independent: a value holds where the base constraint holds over all
    of its last reinterpreted_batch_ndims dims."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        _need_constraint("independent", base_constraint)
        if not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise _NotAConstraintError(f"constraints.independent: reinterpreted_batch_ndims "
                                       f"must be an int >= 0, got {reinterpreted_batch_ndims!r}")
        self.base_constraint, self.reinterpreted_batch_ndims = (base_constraint,
                                                                reinterpreted_batch_ndims)

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        good, n = self.base_constraint.check(value), self.reinterpreted_batch_ndims
        if good.ndim < n:
            raise ValueError(f"IndependentConstraint.check: expected value.dim() >= "
                             f"{self.event_dim} but got {value.ndim}")
        return good.reshape(*good.shape[:good.ndim - n], -1).all(-1)

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class MixtureSameFamilyConstraint(Constraint):
    """torch's: the component distribution's constraint, checked with the mixture's component
    dim put back in front of the event (so it broadcasts over the components), then every
    component's answer required."""

    def __init__(self, base_constraint):
        _need_constraint("MixtureSameFamilyConstraint", base_constraint)
        self.base_constraint = base_constraint

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim

    def check(self, value):
        n = self.event_dim
        if value.ndim < n:
            raise ValueError(f"MixtureSameFamilyConstraint.check: expected value.dim() >= {n} "
                             f"but got {value.ndim} (shape {fmt_shape(value.shape)})")
        good = self.base_constraint.check(value.unsqueeze(-1 - n))
        return good.reshape(*good.shape[:value.ndim - n], -1).all(-1)

    def __repr__(self):
        return f"MixtureSameFamilyConstraint({self.base_constraint!r})"


class _Dependent(Constraint):
    """torch's constraints.dependent: a placeholder for a set that depends on other values
    (check refuses); is_discrete and event_dim are given, or refuse (NotImplementedError).
    Called with is_discrete= / event_dim=, a new one with those."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete, self._event_dim = is_discrete, event_dim

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        if is_discrete is NotImplemented:
            is_discrete = self._is_discrete
        if event_dim is NotImplemented:
            event_dim = self._event_dim
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    """torch's: whether constraint is a dependent one (dependent, or a dependent_property)."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """torch's constraints.dependent_property: a property (on an object, the function's
    constraint) that is a dependent constraint on the class;
    @dependent_property(is_discrete=..., event_dim=...) gives those attributes."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        self._is_discrete, self._event_dim = is_discrete, event_dim

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _Interval(_Constraint):
    """torch's interval: lower_bound <= v <= upper_bound."""

    def __init__(self, lower_bound, upper_bound):
        super().__init__("Interval", lambda v, lo, hi: (v >= lo) & (v <= hi),
                         lower_bound=lower_bound, upper_bound=upper_bound)


class _HalfOpenInterval(_Constraint):
    """torch's half_open_interval: lower_bound <= v < upper_bound."""

    def __init__(self, lower_bound, upper_bound):
        super().__init__("HalfOpenInterval", lambda v, lo, hi: (v >= lo) & (v < hi),
                         lower_bound=lower_bound, upper_bound=upper_bound)


class _GreaterThan(_Constraint):
    """torch's greater_than: v > lower_bound."""

    def __init__(self, lower_bound):
        super().__init__("GreaterThan", lambda v, lo: v > lo, lower_bound=lower_bound)


class _GreaterThanEq(_Constraint):
    """torch's greater_than_eq: v >= lower_bound."""

    def __init__(self, lower_bound):
        super().__init__("GreaterThanEq", lambda v, lo: v >= lo, lower_bound=lower_bound)


class _LessThan(_Constraint):
    """torch's less_than: v < upper_bound."""

    def __init__(self, upper_bound):
        super().__init__("LessThan", lambda v, hi: v < hi, upper_bound=upper_bound)


class _IntegerGreaterThan(_Constraint):
    """torch's nonnegative_integer / positive_integer: whole numbers >= lower_bound."""

    def __init__(self, lower_bound):
        super().__init__("IntegerGreaterThan", lambda v, lo: ((v % 1) == 0) & (v >= lo),
                         is_discrete=True, lower_bound=lower_bound)


class _Real(_Constraint):
    """torch's real: all but NaN."""

    def __init__(self):
        super().__init__("Real", lambda v: v == v)


class _Boolean(_Constraint):
    """torch's boolean: 0 or 1."""

    def __init__(self):
        super().__init__("Boolean", lambda v: (v == 0) | (v == 1), is_discrete=True)


class _Simplex(_Constraint):
    """torch's simplex: entries >= 0 summing to 1 (to 1e-6) over the last dim."""

    event_dim = 1

    def __init__(self):
        super().__init__("Simplex", lambda v: (v >= 0).all(-1) & ((v.sum(-1) - 1).abs() < 1e-6))


class _OneHot(_Constraint):
    """torch's one_hot: 0/1 entries summing to 1 over the last dim."""

    event_dim = 1

    def __init__(self):
        super().__init__("OneHot", lambda v: ((v == 0) | (v == 1)).all(-1) & (v.sum(-1) == 1),
                         is_discrete=True)


class _Multinomial(Constraint):
    """torch's multinomial(upper_bound): entries >= 0 summing to at most upper_bound over the
    last dim (torch's weaker check)."""

    is_discrete, event_dim = True, 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return (x >= 0).all(-1) & (x.sum(-1) <= self.upper_bound)


_interval, _greater_than, _less_than = _Interval, _GreaterThan, _LessThan


_real = _Real()  # (all but NaN, as torch's)


_boolean = _Boolean()


_unit_interval = _interval(0.0, 1.0)


_positive = _greater_than(0.0)


_nonnegative = _GreaterThanEq(0.0)


_real_vector = _IndependentConstraint(_real, 1)


_nonnegative_integer = _IntegerGreaterThan(0)


_simplex = _Simplex()


_one_hot = _OneHot()


class _MatrixConstraint(_Constraint):
    """A constraint on the last two dims (event_dim 2): _test maps a NumPy array (..., n, m)
    to a bool array (...)."""

    event_dim = 2

    def __init__(self):
        super().__init__(type(self).__name__[1:], lambda v: tensor(
            type(self)._test(np.asarray(v.detach().numpy())), dtype=bool, backend=v.backend))


def _is_square(a):
    return np.full(a.shape[:-2], a.shape[-2] == a.shape[-1])


def _is_symmetric(a):
    """torch's constraints.symmetric: square and equal to its transpose to within 1e-6."""
    if a.shape[-2] != a.shape[-1]:
        return _is_square(a)
    return np.isclose(a, np.swapaxes(a, -1, -2), atol=1e-6).all((-2, -1))


def _eigenvalues(a):
    return np.linalg.eigvalsh(np.where(np.isfinite(a), a, 0.0))


def _is_positive_definite(a):
    """torch's constraints.positive_definite: symmetric (to 1e-6) and with a Cholesky factor."""
    if a.shape[-2] != a.shape[-1]:
        return _is_square(a)
    finite = np.isfinite(a).all((-2, -1))
    return finite & _is_symmetric(a) & (_eigenvalues(a).min(-1, initial=np.inf) > 0)


def _is_positive_semidefinite(a):
    """torch's constraints.positive_semidefinite: symmetric, no eigenvalue below 0."""
    if a.shape[-2] != a.shape[-1]:
        return _is_square(a)
    finite = np.isfinite(a).all((-2, -1))
    return finite & _is_symmetric(a) & (_eigenvalues(a).min(-1, initial=np.inf) >= 0)


def _is_lower_triangular(a):
    return (np.tril(a) == a).all((-2, -1))


def _is_lower_cholesky(a):
    """torch's constraints.lower_cholesky: lower-triangular with a positive diagonal."""
    return _is_lower_triangular(a) & (np.diagonal(a, axis1=-2, axis2=-1) > 0).all(-1)


def _is_corr_cholesky(a):
    """torch's constraints.corr_cholesky: lower Cholesky with rows of unit length (to within
    10 eps n)."""
    tol = np.finfo(a.dtype if a.dtype.kind == "f" else np.float64).eps * a.shape[-1] * 10
    unit = (np.abs(np.linalg.norm(a, axis=-1) - 1) <= tol).all(-1)
    return _is_lower_cholesky(a) & unit


class _Square(_MatrixConstraint):
    _test = staticmethod(_is_square)


class _Symmetric(_MatrixConstraint):
    _test = staticmethod(_is_symmetric)


class _PositiveSemidefinite(_MatrixConstraint):
    _test = staticmethod(_is_positive_semidefinite)


class _PositiveDefinite(_MatrixConstraint):
    _test = staticmethod(_is_positive_definite)


class _LowerTriangular(_MatrixConstraint):
    _test = staticmethod(_is_lower_triangular)


class _LowerCholesky(_MatrixConstraint):
    _test = staticmethod(_is_lower_cholesky)


class _CorrCholesky(_MatrixConstraint):
    _test = staticmethod(_is_corr_cholesky)


_positive_definite = _PositiveDefinite()


_lower_cholesky = _LowerCholesky()


_corr_cholesky = _CorrCholesky()


class _Cat(Constraint):
    """torch's constraints.cat: constraint cseq[i] on the i-th block of `lengths[i]` entries
    along dim (one entry each without lengths)."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq, self.dim = list(cseq), dim
        for c in self.cseq:
            _need_constraint("cat", c)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise AssertionError(f"constraints.cat: lengths ({len(self.lengths)}) must match "
                                 f"cseq ({len(self.cseq)})")

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        _check_dim("cat", value, self.dim)
        starts = np.cumsum([0] + self.lengths[:-1])
        return _cat_tensors([c.check(value.narrow(self.dim, int(s), n))
                    for c, s, n in zip(self.cseq, starts, self.lengths, strict=True)], self.dim)


class _Stack(Constraint):
    """torch's constraints.stack: constraint cseq[i] on the i-th slice along dim."""

    def __init__(self, cseq, dim=0):
        self.cseq, self.dim = list(cseq), dim
        for c in self.cseq:
            _need_constraint("stack", c)

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        dim = max(c.event_dim for c in self.cseq)
        return dim + 1 if self.dim + dim < 0 else dim

    def check(self, value):
        _check_dim("stack", value, self.dim)
        return _stack_tensors([c.check(value.select(self.dim, i))
                      for i, c in zip(range(value.shape[self.dim]), self.cseq, strict=False)],
                     self.dim)


def _check_dim(where, value, dim):
    if not -value.ndim <= dim < value.ndim:
        raise AssertionError(f"constraints.{where}: dim {dim} out of range for a value "
                             f"of shape {fmt_shape(value.shape)}")


class _IntegerInterval(Constraint):
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


# torch.distributions.constraints' public names for the objects above
real = _real
boolean = _boolean
unit_interval = _unit_interval
positive = _positive
nonnegative = _nonnegative
real_vector = _real_vector
nonnegative_integer = _nonnegative_integer
simplex = _simplex
one_hot = _one_hot
positive_definite = _positive_definite
lower_cholesky = _lower_cholesky
corr_cholesky = _corr_cholesky
cat = _Cat
stack = _Stack
interval = _interval
greater_than = _greater_than
less_than = _less_than
independent = _IndependentConstraint
integer_interval = _IntegerInterval
greater_than_eq = _GreaterThanEq
half_open_interval = _HalfOpenInterval
multinomial = _Multinomial
positive_integer = _IntegerGreaterThan(1)
lower_triangular = _LowerTriangular()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
dependent = _Dependent()
dependent_property = _DependentProperty

__all__ = ["Constraint", "MixtureSameFamilyConstraint", "boolean", "cat", "corr_cholesky",
           "dependent", "dependent_property", "greater_than", "greater_than_eq",
           "half_open_interval", "independent", "integer_interval", "interval", "is_dependent",
           "less_than", "lower_cholesky", "lower_triangular", "multinomial", "nonnegative",
           "nonnegative_integer", "one_hot", "positive", "positive_definite", "positive_integer",
           "positive_semidefinite", "real", "real_vector", "simplex", "square", "stack",
           "symmetric", "unit_interval"]
