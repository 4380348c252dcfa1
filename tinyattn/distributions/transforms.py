"""tinyattn.distributions.transforms: torch.distributions.transforms' invertible maps with a
log |det Jacobian|, made of tensor ops (so gradients of any order flow through the forward, the
inverse and the log-det): the base Transform (cache_size 0/1, .inv, domain/codomain, bijective,
sign, event_dim, forward_shape/inverse_shape, ==) and _InverseTransform; the elementwise
ExpTransform, AffineTransform, SigmoidTransform, TanhTransform, SoftplusTransform,
AbsTransform, PowerTransform and CumulativeDistributionTransform; the vector and matrix ones
SoftmaxTransform, StickBreakingTransform, LowerCholeskyTransform, PositiveDefiniteTransform and
CorrCholeskyTransform; and the ones made of others: ComposeTransform (identity_transform),
IndependentTransform, ReshapeTransform, CatTransform and StackTransform. The helpers
_tril_to_vec and _vec_to_tril (torch's tril_matrix_to_vec, vec_to_tril_matrix) live here too."""

import math
import numbers

import numpy as np

from ..errors import ShapeError, fmt_shape
from ..functional import cat, logsigmoid, pad, softplus, stack
from ..linalg import cholesky
from ..tensor import Tensor, eye, full_like, tensor, zeros, zeros_like
from .constraints import (
    _Cat,
    _corr_cholesky,
    _IndependentConstraint,
    _interval,
    _lower_cholesky,
    _positive,
    _positive_definite,
    _real,
    _real_vector,
    _simplex,
    _Stack,
    _unit_interval,
)
from .distribution import _sum_rightmost, _tensors

__all__ = ["AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
           "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
           "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
           "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftplusTransform",
           "TanhTransform", "SoftmaxTransform", "StackTransform", "StickBreakingTransform",
           "Transform", "identity_transform"]


class _RefusedError(ShapeError, AssertionError):
    """A CatTransform's or StackTransform's input of the wrong size: a ShapeError, and the
    AssertionError torch raises."""


class _NotATransformError(TypeError, AssertionError):
    """A part of a CatTransform or StackTransform that is not a Transform: a TypeError, and the
    AssertionError torch raises."""


class Transform:
    """torch's Transform: y = t(x), x = t.inv(y) and t.log_abs_det_jacobian(x, y) = log |dy/dx|,
    with the constraints domain and codomain. cache_size=1 remembers the last (x, y) pair, so
    t.inv(t(x)) is x itself (no numerically lossy inverse). Subclasses write _call, _inverse
    and log_abs_det_jacobian, and _args (their constructor's arguments, for with_cache)."""

    bijective = False
    domain = codomain = _real

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError(f"{type(self).__name__}: cache_size must be 0 or 1, got "
                             f"{cache_size!r}")
        self._cache_size, self._inv, self._cached_x_y = cache_size, None, (None, None)

    def _args(self):
        return ()

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError(f"{type(self).__name__}.event_dim: domain and codomain differ in "
                         f"event_dim; use .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        """The inverse transform (made once: t.inv.inv is t)."""
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    @property
    def sign(self):
        raise NotImplementedError(f"{type(self).__name__} has no sign")

    def with_cache(self, cache_size=1):
        """This transform with cache_size (itself where it already has it)."""
        if self._cache_size == cache_size:
            return self
        return type(self)(*self._args(), cache_size=cache_size)

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x):
        _need_tensor(type(self).__name__, x)
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        _need_tensor(f"{type(self).__name__}.inv", y)
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise NotImplementedError(f"{type(self).__name__} has no forward")

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} has no inverse")

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError(f"{type(self).__name__} has no log_abs_det_jacobian")

    def forward_shape(self, shape):
        return tuple(shape)

    def inverse_shape(self, shape):
        return tuple(shape)

    def __repr__(self):
        return type(self).__name__ + "()"


def _need_tensor(where, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{where}: expected a Tensor, got {type(x).__name__}")


def _same_kind(self, other):
    """The __eq__ of the transforms without parameters: any other instance of the class."""
    return isinstance(other, type(self))


class _InverseTransform(Transform):
    """The inverse of a transform (torch's private class; make it with Transform.inv)."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    domain = property(lambda self: self._inv.codomain)
    codomain = property(lambda self: self._inv.domain)
    bijective = property(lambda self: self._inv.bijective)
    sign = property(lambda self: self._inv.sign)
    inv = property(lambda self: self._inv)

    def with_cache(self, cache_size=1):
        return self._inv.with_cache(cache_size).inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)

    def __repr__(self):
        return f"{type(self).__name__}({self._inv!r})"


class ComposeTransform(Transform):
    """parts applied in order; the log-det sums theirs (over the dims each part's event_dim
    leaves to the whole). With no parts, the identity."""

    def __init__(self, parts, cache_size=0):
        parts = list(parts)
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = parts

    def _args(self):
        return (self.parts,)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @property
    def domain(self):
        if not self.parts:
            return _real
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        return _independent(self.parts[0].domain, event_dim)

    @property
    def codomain(self):
        if not self.parts:
            return _real
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        return _independent(self.parts[-1].codomain, event_dim)

    @property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self):
        if self._inv is None:
            self._inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv._inv = self
        return self._inv

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        total, event_dim = 0, self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:], strict=True):
            total = total + _sum_rightmost(part.log_abs_det_jacobian(a, b),
                                           event_dim - part.domain.event_dim)
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return total

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return tuple(shape)

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return tuple(shape)

    def __repr__(self):
        return "ComposeTransform(\n    " + ",\n    ".join(map(repr, self.parts)) + "\n)"


def _independent(constraint, event_dim):
    """constraint made to cover event_dim dims (itself where it already does)."""
    extra = event_dim - constraint.event_dim
    return _IndependentConstraint(constraint, extra) if extra > 0 else constraint


identity_transform = ComposeTransform([])


def _too_few(where, shape, n):
    if len(shape) < n:
        raise ValueError(f"{where}: Too few dimensions on input: shape {fmt_shape(shape)} has "
                         f"fewer than {n}")


class IndependentTransform(Transform):
    """base_transform with its last reinterpreted_batch_ndims dims made event dims: the same
    map, its log-det summed over them."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def _args(self):
        return self.base_transform, self.reinterpreted_batch_ndims

    domain = property(lambda self: _IndependentConstraint(self.base_transform.domain,
                                                          self.reinterpreted_batch_ndims))
    codomain = property(lambda self: _IndependentConstraint(self.base_transform.codomain,
                                                            self.reinterpreted_batch_ndims))
    bijective = property(lambda self: self.base_transform.bijective)
    sign = property(lambda self: self.base_transform.sign)

    def _call(self, x):
        _too_few("IndependentTransform", x.shape, self.domain.event_dim)
        return self.base_transform(x)

    def _inverse(self, y):
        _too_few("IndependentTransform.inv", y.shape, self.codomain.event_dim)
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y),
                              self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"IndependentTransform({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


class ReshapeTransform(Transform):
    """The last dims, in_shape, reshaped to out_shape (the same number of entries); log-det 0."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape, self.out_shape = tuple(in_shape), tuple(out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError(f"ReshapeTransform: in_shape {fmt_shape(self.in_shape)} and "
                             f"out_shape {fmt_shape(self.out_shape)} have different numbers "
                             f"of elements")
        super().__init__(cache_size=cache_size)

    def _args(self):
        return self.in_shape, self.out_shape

    domain = property(lambda self: _independent(_real, len(self.in_shape)))
    codomain = property(lambda self: _independent(_real, len(self.out_shape)))

    def _call(self, x):
        return x.reshape(*x.shape[:x.ndim - len(self.in_shape)], *self.out_shape)

    def _inverse(self, y):
        return y.reshape(*y.shape[:y.ndim - len(self.out_shape)], *self.in_shape)

    def log_abs_det_jacobian(self, x, y):
        return zeros(*x.shape[:x.ndim - len(self.in_shape)], dtype=x.dtype, backend=x.backend)

    def forward_shape(self, shape):
        return _reshaped("ReshapeTransform.forward_shape", shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return _reshaped("ReshapeTransform.inverse_shape", shape, self.out_shape, self.in_shape)


def _reshaped(where, shape, old, new):
    shape = tuple(shape)
    _too_few(where, shape, len(old))
    cut = len(shape) - len(old)
    if shape[cut:] != old:
        raise ValueError(f"{where}: Shape mismatch: shape {fmt_shape(shape)} does not end in "
                         f"{fmt_shape(old)}")
    return shape[:cut] + new


class ExpTransform(Transform):
    """y = exp(x)."""

    domain, codomain, bijective, sign = _real, _positive, True, 1
    __eq__, __hash__ = _same_kind, object.__hash__

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent on x > 0 (exponent a number or tensor, made a tensor)."""

    domain, codomain, bijective = _positive, _positive, True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = _tensors(exponent)

    def _args(self):
        return (self.exponent,)

    @property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and bool(
            (self.exponent == other.exponent).all().item())

    __hash__ = object.__hash__

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return tuple(np.broadcast_shapes(tuple(shape), tuple(self.exponent.shape)))

    inverse_shape = forward_shape


def _finfo(t):
    return np.finfo(t._data.dtype)


def _clipped_sigmoid(x):
    finfo = _finfo(x)
    return x.sigmoid().clamp(min=float(finfo.tiny), max=1.0 - float(finfo.eps))


class SigmoidTransform(Transform):
    """y = sigmoid(x) (kept inside (0, 1) by the dtype's tiny and eps), x = logit(y)."""

    domain, codomain, bijective, sign = _real, _unit_interval, True, 1
    __eq__, __hash__ = _same_kind, object.__hash__

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        finfo = _finfo(y)
        y = y.clamp(min=float(finfo.tiny), max=1.0 - float(finfo.eps))
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x) - softplus(x)


class SoftplusTransform(Transform):
    """y = log(1 + exp(x)) (x itself above 20)."""

    domain, codomain, bijective, sign = _real, _positive, True, 1
    __eq__, __hash__ = _same_kind, object.__hash__

    def _call(self, x):
        return softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x)


class TanhTransform(Transform):
    """y = tanh(x), x = atanh(y) (not clamped, as torch's: use cache_size=1 near ±1)."""

    domain, codomain, bijective, sign = _real, _interval(-1.0, 1.0), True, 1
    __eq__, __hash__ = _same_kind, object.__hash__

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return y.atanh()

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AbsTransform(Transform):
    """y = |x|; its inverse takes y itself (not bijective: no log-det)."""

    domain, codomain = _real, _positive
    __eq__, __hash__ = _same_kind, object.__hash__

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


def _same(a, b):
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return a == b
    return bool((a == b).all().item()) if isinstance(a, Tensor) else bool((b == a).all().item())


class AffineTransform(Transform):
    """y = loc + scale x, loc and scale numbers or tensors; event_dim dims make one event (the
    log-det summed over them)."""

    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    def _args(self):
        return self.loc, self.scale, self._event_dim

    event_dim = property(lambda self: self._event_dim)
    domain = property(lambda self: _independent(_real, self._event_dim))
    codomain = domain

    def __eq__(self, other):
        return (isinstance(other, AffineTransform) and _same(self.loc, other.loc)
                and _same(self.scale, other.scale))

    __hash__ = object.__hash__

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Number):
            return 1 if self.scale > 0 else -1 if self.scale < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if isinstance(self.scale, numbers.Number):
            result = full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self._event_dim:
            result = result.reshape(*result.shape[:result.ndim - self._event_dim], -1).sum(-1)
            shape = shape[:len(shape) - self._event_dim]
        return result.expand(*shape)

    def forward_shape(self, shape):
        return tuple(np.broadcast_shapes(tuple(shape), tuple(getattr(self.loc, "shape", ())),
                                         tuple(getattr(self.scale, "shape", ()))))

    inverse_shape = forward_shape


def _tril_places(n, diag):
    """The flat places (row order) of an n x n matrix's entries j < i + diag + 1."""
    if not -n <= diag < n:
        raise ValueError(f"tril_matrix_to_vec: diag ({diag}) is outside [{-n}, {n - 1}]")
    i, j = np.indices((n, n))
    return np.flatnonzero(j < i + diag + 1)


def _tril_to_vec(mat, diag=0):
    """torch's tril_matrix_to_vec: the entries on and below diagonal `diag` in row order."""
    n = mat.shape[-1]
    places = tensor(_tril_places(n, diag), backend=mat.backend)
    return mat.reshape(*mat.shape[:-2], n * n).index_select(-1, places)


def _vec_to_tril(vec, diag=0):
    """torch's vec_to_tril_matrix: a vector's entries laid in row order on and below diagonal
    `diag` of a square matrix of zeros (through index_select: differentiable)."""
    k = vec.shape[-1]
    b = 1 + 2 * diag
    n = round((-b + math.sqrt(b * b + 8 * k + 4 * abs(diag) * (diag + 1))) / 2)
    places = _tril_places(n, diag) if n > 0 else np.zeros(0, dtype=np.int64)
    if len(places) != k:
        raise ValueError(f"vec_to_tril_matrix: the size of the last dimension is {k}, which is "
                         f"not the number of entries of a lower triangle")
    source = np.zeros(n * n, dtype=np.int64)
    source[places] = np.arange(1, k + 1)
    padded = pad(vec, (1, 0), value=0.0)
    return padded.index_select(-1, tensor(source, backend=vec.backend)).reshape(
        *vec.shape[:-1], n, n)


class CorrCholeskyTransform(Transform):
    """A vector of D(D-1)/2 reals to the Cholesky factor of a D x D correlation matrix: tanh of
    the lower triangle (row order), then a signed stick-breaking per row (rows of unit
    length). The log-det is that of x against y's lower triangle below the diagonal."""

    domain, codomain, bijective = _real_vector, _corr_cholesky, True
    __eq__, __hash__ = _same_kind, object.__hash__

    def _call(self, x):
        eps = float(_finfo(x).eps)
        r = _vec_to_tril(x.tanh().clamp(min=-1 + eps, max=1 - eps), diag=-1)
        z1m_cumprod_sqrt = (1 - r * r).sqrt().cumprod(-1)
        r = r + eye(r.shape[-1], dtype=r.dtype, backend=r.backend)
        return r * pad(z1m_cumprod_sqrt[..., :-1], (1, 0), value=1.0)

    def _inverse(self, y):
        y_cumsum = 1 - (y * y).cumsum(-1)
        shifted = pad(y_cumsum[..., :-1], (1, 0), value=1.0)
        t = _tril_to_vec(y, diag=-1) / _tril_to_vec(shifted, diag=-1).sqrt()
        return (t.log1p() - t.neg().log1p()) / 2

    def log_abs_det_jacobian(self, x, y):
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        stick_breaking = 0.5 * _tril_to_vec(y1m_cumsum, diag=-2).log().sum(-1)
        tanh = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking + tanh

    def forward_shape(self, shape):
        _too_few("CorrCholeskyTransform.forward_shape", shape, 1)
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError(f"CorrCholeskyTransform.forward_shape: input of shape "
                             f"{fmt_shape(shape)} is not a flattened lower triangle ({n} is "
                             f"not D(D-1)/2)")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        _too_few("CorrCholeskyTransform.inverse_shape", shape, 2)
        if shape[-2] != shape[-1]:
            raise ValueError(f"CorrCholeskyTransform.inverse_shape: input of shape "
                             f"{fmt_shape(shape)} is not square")
        return tuple(shape[:-2]) + (shape[-1] * (shape[-1] - 1) // 2,)


class SoftmaxTransform(Transform):
    """y = exp(x) normalised over the last dim, x = log(y) (not bijective)."""

    domain, codomain = _real_vector, _simplex
    __eq__, __hash__ = _same_kind, object.__hash__

    def _call(self, x):
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        _too_few("SoftmaxTransform.forward_shape", shape, 1)
        return tuple(shape)

    def inverse_shape(self, shape):
        _too_few("SoftmaxTransform.inverse_shape", shape, 1)
        return tuple(shape)


def _log_offsets(k, like):
    """log(k), log(k - 1), ..., log(1) in like's dtype."""
    return tensor(np.log(np.arange(k, 0, -1, dtype=np.float64)), dtype=like.dtype,
                  backend=like.backend)


class StickBreakingTransform(Transform):
    """K reals to the simplex of K + 1 entries by stick-breaking (iterated sigmoids)."""

    domain, codomain, bijective = _real_vector, _simplex, True
    __eq__, __hash__ = _same_kind, object.__hash__

    def _call(self, x):
        z = _clipped_sigmoid(x - _log_offsets(x.shape[-1], x))
        z_cumprod = (1 - z).cumprod(-1)
        return pad(z, (0, 1), value=1.0) * pad(z_cumprod, (1, 0), value=1.0)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        sf = (1 - y_crop.cumsum(-1)).clamp(min=float(_finfo(y).tiny))
        return y_crop.log() - sf.log() + _log_offsets(y.shape[-1] - 1, y)

    def log_abs_det_jacobian(self, x, y):
        x = x - _log_offsets(x.shape[-1], x)
        return (-x + logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        _too_few("StickBreakingTransform.forward_shape", shape, 1)
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        _too_few("StickBreakingTransform.inverse_shape", shape, 1)
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class LowerCholeskyTransform(Transform):
    """A square matrix to a lower-triangular one with a positive diagonal: the strict lower
    triangle kept, the diagonal exp'd (not bijective: the upper triangle is dropped)."""

    domain, codomain = _IndependentConstraint(_real, 2), _lower_cholesky
    __eq__, __hash__ = _same_kind, object.__hash__

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """A square matrix to a positive-definite one: L Lᵀ, L its LowerCholeskyTransform; the
    inverse through the Cholesky factor."""

    domain, codomain = _IndependentConstraint(_real, 2), _positive_definite
    __eq__, __hash__ = _same_kind, object.__hash__

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(cholesky(y))


def _parts(where, tseq, cache_size):
    tseq = list(tseq)
    for t in tseq:
        if not isinstance(t, Transform):
            raise _NotATransformError(f"{where}: every part must be a Transform, got "
                                 f"{type(t).__name__}")
    return [t.with_cache(cache_size) for t in tseq] if cache_size else tseq


def _check_size(where, name, value, dim, size, what):
    if not -value.ndim <= dim < value.ndim:
        raise _RefusedError(f"{where}: dim {dim} is out of range for {name} of shape "
                       f"{fmt_shape(value.shape)}")
    if value.shape[dim] != size:
        raise _RefusedError(f"{where}: {name} of shape {fmt_shape(value.shape)} has size "
                       f"{value.shape[dim]} at dim {dim}, but {what} {size}")


class CatTransform(Transform):
    """tseq[i] applied to the i-th block of lengths[i] entries along dim (one entry each
    without lengths), the results concatenated, as torch.cat."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        tseq = _parts("CatTransform", tseq, cache_size)
        super().__init__(cache_size=cache_size)
        self.transforms, self.dim = tseq, dim
        self.lengths = [1] * len(tseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise _RefusedError(f"CatTransform: lengths ({len(self.lengths)}) must match "
                           f"transforms ({len(self.transforms)})")

    def _args(self):
        return self.transforms, self.dim, self.lengths

    event_dim = property(lambda self: max(t.event_dim for t in self.transforms))
    length = property(lambda self: sum(self.lengths))
    bijective = property(lambda self: all(t.bijective for t in self.transforms))
    domain = property(lambda self: _Cat([t.domain for t in self.transforms], self.dim,
                                        self.lengths))
    codomain = property(lambda self: _Cat([t.codomain for t in self.transforms], self.dim,
                                          self.lengths))

    def _blocks(self, name, value):
        _check_size("CatTransform", name, value, self.dim, self.length, "the lengths sum to")
        starts = np.cumsum([0] + self.lengths[:-1])
        return [value.narrow(self.dim, int(s), n) for s, n in zip(starts, self.lengths,
                                                                  strict=True)]

    def _call(self, x):
        return cat([t(b) for t, b in zip(self.transforms, self._blocks("x", x), strict=True)],
                   self.dim)

    def _inverse(self, y):
        return cat([t.inv(b) for t, b in zip(self.transforms, self._blocks("y", y),
                                             strict=True)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        terms = []
        for t, a, b in zip(self.transforms, self._blocks("x", x), self._blocks("y", y),
                           strict=True):
            terms.append(_sum_rightmost(t.log_abs_det_jacobian(a, b),
                                        self.event_dim - t.event_dim))
        dim = (self.dim - x.ndim if self.dim >= 0 else self.dim) + self.event_dim
        return cat(terms, dim) if dim < 0 else sum(terms[1:], terms[0])


class StackTransform(Transform):
    """tseq[i] applied to the i-th slice along dim, the results stacked, as torch.stack."""

    def __init__(self, tseq, dim=0, cache_size=0):
        tseq = _parts("StackTransform", tseq, cache_size)
        super().__init__(cache_size=cache_size)
        self.transforms, self.dim = tseq, dim

    def _args(self):
        return self.transforms, self.dim

    bijective = property(lambda self: all(t.bijective for t in self.transforms))
    domain = property(lambda self: _Stack([t.domain for t in self.transforms], self.dim))
    codomain = property(lambda self: _Stack([t.codomain for t in self.transforms], self.dim))

    def _slices(self, name, value):
        _check_size("StackTransform", name, value, self.dim, len(self.transforms),
                    "there are transforms:")
        return [value.select(self.dim, i) for i in range(len(self.transforms))]

    def _call(self, x):
        return stack([t(s) for t, s in zip(self.transforms, self._slices("x", x),
                                           strict=True)], self.dim)

    def _inverse(self, y):
        return stack([t.inv(s) for t, s in zip(self.transforms, self._slices("y", y),
                                               strict=True)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        return stack([t.log_abs_det_jacobian(a, b) for t, a, b in zip(
            self.transforms, self._slices("x", x), self._slices("y", y), strict=True)],
            self.dim)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x), x = distribution.icdf(y); the log-det is distribution.log_prob
    (a copula's building block)."""

    codomain, bijective, sign = _unit_interval, True, 1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    def _args(self):
        return (self.distribution,)

    domain = property(lambda self: self.distribution.support)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)
