"""tinyattn.distributions.constraints: the few constraints the distributions' support and
arg_constraints name, as torch.distributions.constraints' (Real, Boolean, Interval,
GreaterThan, Simplex, PositiveDefinite, CorrCholesky, IndependentConstraint, IntegerInterval,
and cat / stack, which the transforms' domains name...): check(value)
is a bool tensor, True where value lies in the set. torch's public names (real, positive,
unit_interval, interval(...), independent(...)...) are at the end; the distributions use the
private ones (_real, _positive...)."""

import numpy as np

from ..errors import fmt_shape
from ..functional import cat as _cat_tensors
from ..functional import stack as _stack_tensors
from ..tensor import Tensor, tensor


class _Constraint:
    """torch.distributions.constraints' few: check(value) is a bool tensor, True where value
    lies in the set; the bounds (numbers or tensors) are attributes, as torch's."""

    event_dim = 0

    def __init__(self, name, test, is_discrete=False, **bounds):
        self._name, self._test, self.is_discrete, self._bounds = name, test, is_discrete, bounds
        self.__dict__.update(bounds)

    def check(self, value):
        return self._test(value, *self._bounds.values())

    def __repr__(self):
        bounds = ", ".join(f"{k}={fmt_shape(v.shape) if isinstance(v, Tensor) else v}"
                           for k, v in self._bounds.items())
        return f"{self._name}({bounds})"


class _IndependentConstraint:
    """torch's constraints.independent: a value holds where the base constraint holds over all
    of its last reinterpreted_batch_ndims dims."""

    is_discrete = False

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint, self.reinterpreted_batch_ndims = (base_constraint,
                                                                reinterpreted_batch_ndims)
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        good, n = self.base_constraint.check(value), self.reinterpreted_batch_ndims
        return good.reshape(*good.shape[:good.ndim - n], -1).all(-1)

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


def _interval(low, high):
    return _Constraint("Interval", lambda v, lo, hi: (v >= lo) & (v <= hi),
                       lower_bound=low, upper_bound=high)


def _greater_than(low):
    return _Constraint("GreaterThan", lambda v, lo: v > lo, lower_bound=low)


def _less_than(high):
    return _Constraint("LessThan", lambda v, hi: v < hi, upper_bound=high)


_real = _Constraint("Real", lambda v: v == v)  # (all but NaN, as torch's)


_boolean = _Constraint("Boolean", lambda v: (v == 0) | (v == 1), is_discrete=True)


_unit_interval = _interval(0.0, 1.0)


_positive = _greater_than(0.0)


_nonnegative = _Constraint("GreaterThanEq", lambda v, lo: v >= lo, lower_bound=0.0)


_real_vector = _IndependentConstraint(_real, 1)


_nonnegative_integer = _Constraint("IntegerGreaterThan", lambda v, lo: ((v % 1) == 0) & (v >= lo),
                                   is_discrete=True, lower_bound=0)


_simplex = _Constraint("Simplex", lambda v: (v >= 0).all(-1) & ((v.sum(-1) - 1).abs() < 1e-6))


_one_hot = _Constraint("OneHot", lambda v: ((v == 0) | (v == 1)).all(-1) & (v.sum(-1) == 1),
                       is_discrete=True)


_simplex.event_dim = _one_hot.event_dim = 1


def _matrix_constraint(name, test):
    """A constraint on the last two dims (event_dim 2): `test` maps a NumPy array (..., n, n)
    to a bool array (...)."""
    made = _Constraint(name, lambda v: tensor(test(np.asarray(v.detach().numpy())),
                                              backend=v.backend))
    made.event_dim = 2
    return made


def _is_positive_definite(a):
    """torch's constraints.positive_definite: symmetric (to 1e-6) and with a Cholesky factor."""
    finite = np.isfinite(a).all((-2, -1))
    symmetric = np.isclose(a, np.swapaxes(a, -1, -2), atol=1e-6).all((-2, -1))
    eig = np.linalg.eigvalsh(np.where(np.isfinite(a), a, 0.0))
    return finite & symmetric & (eig.min(-1, initial=np.inf) > 0)


def _is_lower_cholesky(a):
    """torch's constraints.lower_cholesky: lower-triangular with a positive diagonal."""
    lower = (np.tril(a) == a).all((-2, -1))
    return lower & (np.diagonal(a, axis1=-2, axis2=-1) > 0).all(-1)


_positive_definite = _matrix_constraint("PositiveDefinite", _is_positive_definite)


_lower_cholesky = _matrix_constraint("LowerCholesky", _is_lower_cholesky)


def _is_corr_cholesky(a):
    """torch's constraints.corr_cholesky: lower Cholesky with rows of unit length (to within
    10 eps n)."""
    tol = np.finfo(a.dtype if a.dtype.kind == "f" else np.float64).eps * a.shape[-1] * 10
    unit = (np.abs(np.linalg.norm(a, axis=-1) - 1) <= tol).all(-1)
    return _is_lower_cholesky(a) & unit


_corr_cholesky = _matrix_constraint("CorrCholesky", _is_corr_cholesky)


class _Cat:
    """torch's constraints.cat: constraint cseq[i] on the i-th block of `lengths[i]` entries
    along dim (one entry each without lengths)."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq, self.dim = list(cseq), dim
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


class _Stack:
    """torch's constraints.stack: constraint cseq[i] on the i-th slice along dim."""

    def __init__(self, cseq, dim=0):
        self.cseq, self.dim = list(cseq), dim

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
