"""More of torch.Tensor's methods and attributes, in torch 2.13's CPU behaviour, which
tinyattn/__init__.py sets on Tensor (METHODS) and gives out as functions where torch has them
(FUNCTIONS: torch.geqrf, torch.ormqr, ...):

- what a tensor is: is_cpu, get_device(), layout (ta.strided, a ta.layout), is_sparse,
  is_sparse_csr, is_quantized, is_meta, is_mkldnn, is_nested (False: tinyattn has dense
  tensors only), output_nr, dim_order(), storage_type() (torch's legacy class names, FloatStorage
  ...), const_data_ptr(), share_memory_() and is_shared();
- copies and strided views: narrow_copy, new_empty_strided, the deprecated out-of-place resize
  and resize_as (torch's warning, and its rule: the number of entries stays), as_strided_ (in
  place), as_strided_scatter (out of place, differentiable), slice_inverse;
- Python callables written into a tensor, in place: apply_, map_, map2_ (CPU only, and refused
  for a tensor that requires grad, as torch's);
- nonzero_static (a fixed number of rows, padded with fill_value);
- LAPACK's Householder QR: geqrf (its (a, tau); no derivative, as torch's), orgqr
  (linalg.householder_product) and ormqr (Q or Qᵀ applied to a matrix from the left or the
  right), the last two made of tensor ops, so their gradients are theirs.
"""

import itertools
import math
import numbers
import operator
import warnings
import weakref
from collections import namedtuple

import numpy as np

from . import linalg
from .autograd import current_tracers
from .errors import DTypeError, GraphError, ShapeError, fmt_shape
from .function import Function
from .functional import _NeedsFloatError
from .linalg_decompositions import _matrices
from .ops import views
from .routines_misc import empty_strided
from .tensor import (
    Tensor,
    TypedStorage,
    _shape_args,
    _take_torch_keywords,
    channels_last,
    channels_last_3d,
    contiguous_format,
    memory_format,
)

__all__ = ["layout", "strided", "geqrf", "orgqr", "ormqr", "narrow_copy", "as_strided_scatter",
           "nonzero_static"]


class layout:  # noqa: N801 - torch's name
    """torch's tensor layouts: tinyattn's tensors are dense arrays, so ta.strided is the one
    there is (x.layout)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ta.{self.name}"


strided = layout("strided")


class _RuntimeDTypeError(DTypeError, RuntimeError):
    """A dtype refused where torch raises a RuntimeError (ormqr's operands)."""


# ---- what a tensor is ---------------------------------------------------------------------------


def _on_cpu(t):
    return t.backend.name == "numpy"


def get_device(self):
    """-1 on the CPU (the NumPy backend), as torch's; the CuPy device's id on the GPU."""
    if _on_cpu(self):
        return -1
    return int(getattr(getattr(self._data, "device", None), "id", 0))  # (CuPy's Device.id)


def _output_nr(self):
    """Which output of its op this tensor is: 0 for a leaf and a one-output op, the index of
    an output of a custom autograd.Function with several (tinyattn's other several-output ops
    make one node per output, so 0, where torch counts them)."""
    node = self._node
    if node is not None and node.op is not None and getattr(node.op.fwd, "part_of_parent",
                                                            False):
        return node.params["part"].index
    return 0


def const_data_ptr(self):
    """data_ptr(): the address of the first entry (torch's read-only twin of it)."""
    return self.data_ptr()


_STORAGE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
                  "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "int16": "Short",
                  "int8": "Char", "uint8": "Byte", "bool": "Bool", "complex64": "ComplexFloat",
                  "complex128": "ComplexDouble"}
_STORAGE_TYPES = {}


def storage_type(self):
    """The legacy storage class of this tensor's dtype, named as torch's (FloatStorage for
    float32, LongStorage for int64, ...): a TypedStorage subclass with that dtype."""
    name = _STORAGE_NAMES.get(self.dtype.name)
    if name is None:
        raise TypeError(f"storage_type: torch has no legacy storage class for {self.dtype}")
    cls = _STORAGE_TYPES.get(name)
    if cls is None:
        cls = type(name + "Storage", (TypedStorage,), {"__slots__": (), "dtype": self.dtype,
                                                       "__module__": __name__})
        _STORAGE_TYPES[name] = cls
    return cls


# share_memory_: {id of the array owning the memory: a weak reference to it}
_SHARED = {}


def _owner_array(t):
    if isinstance(t._data, np.generic):  # (a 0-d op result's scalar: an array from now on)
        t._data = np.array(t._data)
    a = t._data
    while getattr(a, "base", None) is not None and hasattr(a.base, "strides"):
        a = a.base
    return a


def share_memory_(self):
    """Mark this tensor's memory shared, as torch's x.share_memory_() (which moves it to shared
    memory for other processes): is_shared() is then True for it and every view of it. tinyattn
    runs in one process, so the memory stays where it is. Returns self."""
    owner = _owner_array(self)
    key = id(owner)
    _SHARED[key] = weakref.ref(owner, lambda _, key=key: _SHARED.pop(key, None))
    return self


def is_shared(self):
    """Whether share_memory_() was called on this memory (a view of it counts), as torch's; a
    GPU tensor's is True, as torch's CUDA tensors'."""
    if not _on_cpu(self):
        return True
    owner = _owner_array(self)
    ref = _SHARED.get(id(owner))
    return ref is not None and ref() is owner


# ---- dim_order (torch's, from _tensor.py and _prims_common) -------------------------------------


def _contiguous_as(t, fmt):
    if fmt is contiguous_format:
        return t.is_contiguous()
    if fmt is channels_last or fmt is channels_last_3d:
        n = 4 if fmt is channels_last else 5
        return t.ndim == n and t.permute(0, *range(2, n), 1).is_contiguous()
    raise ShapeError(f"dim_order: unsupported memory format {fmt!r} (as torch's is_contiguous)")


def _swap_order(shape, strides, a, b):
    """torch's should_swap: 1 where dim a goes inside dim b, -1 where outside, 0 undecided."""
    sa, sb = strides[a], strides[b]
    if sa == 0 or sb == 0:
        return 0
    if sa == sb:
        return 0 if _ge(shape[b], shape[a]) else 1
    if _ge(sb, sa):
        return -1
    return 1 if _ge(sa, sb) else 0


def _ge(a, b):
    return b == 0 or (a != 0 and (a >= b or a % b == 0))


def _physical_order(t, check):
    """(the dims from outermost to innermost stride, whether that order is ambiguous)."""
    n, shape, strides = t.ndim, tuple(t.shape), t.stride()
    if n < 2:
        return list(range(n)), False
    contiguous, last = t.is_contiguous(), _contiguous_as(t, channels_last)
    if contiguous and not last:
        return list(range(n)), False
    if last and not contiguous:
        return [0, *range(2, n), 1], False
    perm = list(reversed(range(n)))
    for i in range(1, n):  # (torch's insertion sort, back to front)
        d1 = i
        for d0 in reversed(range(i)):
            order = _swap_order(shape, strides, perm[d0], perm[d1])
            if order > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif order < 0:
                break
    ambiguous = bool(check) and any(_swap_order(shape, strides, perm[i], perm[i + 1]) != -1
                                    for i in range(n - 1))
    return list(reversed(perm)), ambiguous


def dim_order(self, *, ambiguity_check=False):
    """The dims from the outermost (largest stride) to the innermost, as torch's x.dim_order():
    ambiguity_check=True refuses (RuntimeError) a tensor with several legal orders (a size-1
    dim, equal strides); a list of memory formats refuses one that is not exactly one of them
    (ta.contiguous_format, ta.channels_last...)."""
    if not isinstance(ambiguity_check, bool) and (not isinstance(ambiguity_check, list) or any(
            not isinstance(f, memory_format) for f in ambiguity_check)):
        raise TypeError("dim_order: The ambiguity_check argument must be a bool or a list of "
                        f"memory formats, got {ambiguity_check!r}")
    formats = ambiguity_check if isinstance(ambiguity_check, list) else []
    check_multiple = ambiguity_check if isinstance(ambiguity_check, bool) else True
    strides = self.stride()
    multiple = any(a == b for a, b in itertools.pairwise(strides)) or 1 in self.shape
    if check_multiple and multiple and sum(_contiguous_as(self, f) for f in formats) != 1:
        raise ShapeError(f"dim_order: The tensor {fmt_shape(self.shape)} (strides {strides}) "
                         "does not have unique dim order, or cannot map to exact one of the "
                         "given memory formats.")
    perm, ambiguous = _physical_order(self, ambiguity_check)
    if ambiguous:
        raise ShapeError(f"dim_order: The tensor {fmt_shape(self.shape)} (strides {strides}) "
                         "does not have unique dim order.")
    return tuple(perm)


# ---- copies, shapes and strides -----------------------------------------------------------------


def narrow_copy(input, dim, start, length):  # noqa: A002 - torch's name
    """narrow(dim, start, length) in memory of its own (contiguous), as torch's; its gradient
    is narrow's."""
    name, shape = "narrow_copy", fmt_shape(input.shape)
    dim, start, length = (operator.index(v) for v in (dim, start, length))
    n = input.ndim
    if not -n <= dim < n:
        raise ShapeError(f"{name}: dim {dim} is out of range for a tensor of shape {shape}")
    dim %= n
    size = input.shape[dim]
    if -size <= start < 0:
        start += size
    if length < 0:
        raise ShapeError(f"{name}: length must be non-negative, got {length} (shape {shape})")
    if not 0 <= start <= size or start + length > size:
        raise ShapeError(f"{name}: start ({start}) + length ({length}) exceeds dimension size "
                         f"({size}) of dim {dim} of a tensor of shape {shape}")
    return input.narrow(dim, start, length).clone(memory_format=contiguous_format)


def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None,  # noqa: A002
                      pin_memory=False, requires_grad=False):
    """empty_strided(size, stride) with this tensor's dtype and backend unless given (torch's
    x.new_empty_strided); a leaf, which requires grad where asked."""
    if layout is not None and layout is not strided:
        raise TypeError(f"new_empty_strided: layout must be ta.strided, got {layout!r}")
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         device=self.backend if device is None else device,
                         requires_grad=requires_grad)


def _resize(x, sizes, name):
    if not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in sizes):
        raise ShapeError(f"{name}: the sizes must be ints, given one by one (x.resize(2, 3)), got "
                         f"{sizes!r}")
    sizes = tuple(int(s) for s in sizes)
    if math.prod(sizes) != x.numel() or min(sizes, default=0) < 0:
        raise ShapeError(f"{name}: requested resize to {fmt_shape(sizes)} ({math.prod(sizes)} "
                         f"elements in total), but the given tensor has a size of "
                         f"{fmt_shape(x.shape)} ({x.numel()} elements): the out-of-place "
                         f"{name} can only change the shape, keeping the number of elements "
                         "(torch's rule); resize_ changes the number in place")
    return x.contiguous().view(sizes)


def resize(self, *sizes):
    """torch's deprecated out-of-place resize (with its UserWarning): this tensor given the
    shape `sizes`, of as many entries (contiguous().view(sizes): this tensor's memory when it
    is contiguous); its gradient is reshaped back."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return _resize(self, sizes, "resize")


def resize_as(self, tensor):
    """torch's deprecated out-of-place resize_as (with its UserWarning): resize(tensor's
    shape)."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"resize_as: expected a tensor, got {type(tensor).__name__}")
    return _resize(self, tuple(tensor.shape), "resize_as")


def _strided_args(name, x, size, stride, storage_offset):
    """(size, stride, offset) checked as torch's as_strided checks them, offset x's own
    storage_offset() when None; out of the memory's bounds is refused (torch's setStorage)."""
    size = _shape_args((size,), name)
    stride = tuple(operator.index(s) for s in stride)
    if len(stride) != len(size):
        raise ShapeError(f"{name}: mismatch in length of strides and shape: size "
                         f"{fmt_shape(size)}, stride {stride}")
    owner = _owner_array(x)
    offset = x.storage_offset() if storage_offset is None else operator.index(storage_offset)
    if min(stride, default=0) < 0 or offset < 0 or min(size, default=0) < 0:
        raise ShapeError(f"{name}: negative sizes, strides or storage offset are not supported "
                         f"(as torch), got size {fmt_shape(size)}, strides {stride} and storage "
                         f"offset {offset}")
    total, item = owner.nbytes // x._data.itemsize, x._data.itemsize
    need = views.storage_needed(size, stride, offset)
    if need > total:
        raise ShapeError(f"{name}: setStorage: sizes {list(size)}, strides {list(stride)}, "
                         f"storage offset {offset}, and itemsize {item} requiring a storage "
                         f"size of {need * item} are out of bounds for storage of size "
                         f"{total * item}")
    return size, stride, offset


def as_strided_(self, size, stride, storage_offset=None):
    """as_strided, in place: this tensor becomes the view of its memory read with `size` and
    `stride` from `storage_offset` (its own storage_offset() when None), as torch's; recorded
    as x = x.as_strided(...) where x requires grad (a leaf that does is refused)."""
    size, stride, offset = _strided_args("as_strided_", self, size, stride, storage_offset)
    return self._in_place_view("as_strided_", views.strided, size=size, stride=stride,
                               offset=offset)


def _places(size, stride, offset):
    """The memory entry of each entry of a (size, stride, offset) view, in its shape."""
    out = np.full(size, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride, strict=True)):
        out += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(size) - d - 1))
    return out


def as_strided_scatter(input, src, size, stride, storage_offset=None):  # noqa: A002
    """A copy of input with the entries the view input.as_strided(size, stride,
    storage_offset) sees set to src (cast to input's dtype), as torch's: the places are in
    input's memory (storage_offset from its start, input's own when None), and those outside
    input's own entries are dropped. Differentiable in input and src (index_put's gradients)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"as_strided_scatter: src must be a tensor, got {type(src).__name__}")
    size, stride, offset = _strided_args("as_strided_scatter", input, size, stride,
                                         storage_offset)
    if tuple(src.shape) != size:
        raise ShapeError(f"as_strided_scatter: expected src to have a size equal to the slice "
                         f"of self. src size = {fmt_shape(src.shape)}, slice size = "
                         f"{fmt_shape(size)}")
    mine = _places(tuple(input.shape), input.stride(), input.storage_offset()).reshape(-1)
    seen = _places(size, stride, offset).reshape(-1)
    lookup = np.full(max(int(mine.max(initial=-1)), int(seen.max(initial=-1))) + 1, -1,
                     dtype=np.int64)
    lookup[mine] = np.arange(mine.size)
    target = lookup[seen]
    kept = np.flatnonzero(target >= 0)
    if kept.size == 0:
        return input.clone()
    xp, be = input.backend.xp, input.backend
    values = src.to(input.dtype).reshape(-1)[Tensor._wrap(xp.asarray(kept), be)]
    flat = input.reshape(-1).index_put((Tensor._wrap(xp.asarray(target[kept]), be),), values)
    return flat.reshape(input.shape)


def slice_inverse(self, src, dim=0, start=None, end=None, step=1):
    """torch's slice_inverse (the inverse of a slice, for functionalization): this tensor's
    memory seen with src's size, strides and storage offset (dim, start, end and step are
    not read, as in torch)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"slice_inverse: src must be a tensor, got {type(src).__name__}")
    size, stride, offset = _strided_args("slice_inverse", self, tuple(src.shape), src.stride(),
                                         src.storage_offset())
    return self.as_strided(size, stride, offset)


# ---- Python callables, in place ----------------------------------------------------------------


_CONVERT = {"f": float, "i": int, "u": int, "b": bool}


def _converted(name, value, kind):
    if isinstance(value, (str, bytes)) or not isinstance(value, (numbers.Number, np.generic)) \
            and not hasattr(value, "__float__"):
        raise TypeError(f"{name}: the callable must return a real number, got "
                        f"{type(value).__name__}")
    return _CONVERT[kind](float(value) if kind in "iu" else value)


def _callable_checks(name, x, others):
    """torch's refusals for apply_, map_ and map2_, in its order."""
    if any(not isinstance(o, Tensor) for o in others):
        raise TypeError(f"{name}: expected tensors, got "
                        f"{[type(o).__name__ for o in others]}")
    if any(t.requires_grad for t in (x, *others)):
        raise GraphError(f"{name}: Can't call {name}() on Variable that requires grad. Use "
                         f"var.detach().{name}() instead (a Python function has no gradient)")
    if not all(_on_cpu(t) for t in (x, *others)):
        raise TypeError(f"{name} is only implemented on CPU tensors (the NumPy backend)")
    for o in others:
        if o.dtype != x.dtype:
            raise DTypeError(f"{name}: expected {x.dtype} for the other tensors (this tensor's "
                             f"dtype), got {o.dtype}")


def _callable_write(name, x, others, fn):
    """x's entries set to fn(entry of x, entries of the others there), the others expanded to
    x's shape (torch's apply_, map_ and map2_)."""
    _callable_checks(name, x, others)
    try:
        arrays = [np.broadcast_to(o._data, x.shape) for o in others]
    except ValueError:
        raise ShapeError(f"{name}: the other tensors {[fmt_shape(o.shape) for o in others]} do "
                         f"not expand to this tensor's shape {fmt_shape(x.shape)}") from None
    if not callable(fn):
        raise TypeError(f"{name}: expected a callable, got {type(fn).__name__}")
    kind = x.dtype.kind
    columns = [np.ravel(a).tolist() for a in (x._data, *arrays)]
    got = [_converted(name, fn(*vals), kind) for vals in zip(*columns, strict=True)]
    new = np.array(got, dtype=x.dtype).reshape(x.shape)
    return x._in_place_as(name, lambda t: Tensor._wrap(new, t.backend))


def apply_(self, callable):  # noqa: A002 - torch's name
    """Each entry replaced by callable(entry) (a Python number in, one out), in place, as
    torch's: CPU only, and refused for a tensor that requires grad."""
    return _callable_write("apply_", self, (), callable)


def map_(self, tensor, callable):  # noqa: A002 - torch's name
    """Each entry replaced by callable(entry, tensor's entry there), tensor (of this dtype)
    expanded to this shape, in place, as torch's (CPU only, no tensor requiring grad)."""
    return _callable_write("map_", self, (tensor,), callable)


def map2_(self, x, y, callable):  # noqa: A002 - torch's name
    """Each entry replaced by callable(entry, x's there, y's there), x and y (of this dtype)
    expanded to this shape, in place, as torch's (CPU only, no tensor requiring grad)."""
    return _callable_write("map2_", self, (x, y), callable)


# ---- nonzero_static ----------------------------------------------------------------------------


def nonzero_static(input, *, size, fill_value=-1):  # noqa: A002 - torch's name
    """nonzero() in exactly `size` rows, as torch's: the first `size` indices, padded with rows
    of fill_value; (size, ndim) int64. (A captured step refuses it, as nonzero: the indices
    come from the values.)"""
    for arg, v in (("size", size), ("fill_value", fill_value)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise TypeError(f"nonzero_static(): argument '{arg}' must be int, not "
                            f"{type(v).__name__}")
    if size < 0:
        raise ShapeError(f"nonzero_static: 'size' must be an non-negative integer, got {size}")
    for tracer in current_tracers():
        tracer.read(input, "nonzero_static()")
    found = input._nonzero(False)._data
    xp = input.backend.xp
    out = xp.full((int(size), input.ndim), int(fill_value), dtype=np.int64)
    n = min(int(size), found.shape[0])
    out[:n] = found[:n]
    return Tensor._wrap(out, input.backend)


# ---- Householder QR -----------------------------------------------------------------------------


geqrf_type = namedtuple("geqrf", ["a", "tau"])


def _geqrf_one(xp, m):
    rows, cols = m.shape
    if rows == 0 or cols == 0:
        return m.copy(), xp.zeros(min(rows, cols), dtype=m.dtype)
    h, tau = xp.linalg.qr(m, mode="raw")  # (LAPACK's geqrf, its output transposed)
    return h.T, tau


class Geqrf(Function):
    """LAPACK's geqrf: R on and above the diagonal, the Householder vectors below, and tau;
    no derivative, as torch's."""

    @staticmethod
    def forward(ctx, A):  # noqa: N803
        xp, a = A.backend.xp, A._data
        m, n = a.shape[-2:]
        flat = a.reshape((math.prod(a.shape[:-2]), m, n))
        got = [_geqrf_one(xp, flat[i]) for i in range(flat.shape[0])]
        k = min(m, n)
        out = xp.stack([g[0] for g in got]) if got else xp.zeros(flat.shape, dtype=a.dtype)
        tau = xp.stack([g[1] for g in got]) if got else xp.zeros((0, k), dtype=a.dtype)
        return (Tensor._wrap(out.reshape(a.shape).astype(a.dtype), A.backend),
                Tensor._wrap(tau.reshape(a.shape[:-2] + (k,)).astype(a.dtype), A.backend))

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("geqrf: the derivative for 'geqrf' is not implemented (nor "
                                  "in torch); linalg.qr has one")


def geqrf(input):  # noqa: A002 - torch's name
    """torch.geqrf: the named tuple (a, tau) of LAPACK's geqrf for (..., m, n) matrices: R on
    and above a's diagonal, the Householder vectors v_i below it (their 1s on it left out),
    tau (..., min(m, n)); Q = H_1 ... H_k, H_i = I - tau_i v_i v_iᵀ (orgqr gives it). No
    derivative (backward raises NotImplementedError, as torch's)."""
    if isinstance(input, Tensor) and input.dtype.kind != "f":
        raise _NeedsFloatError(f"geqrf: expected a floating point tensor, got {input.dtype} "
                               f"{fmt_shape(input.shape)} (torch has no kernel for it); convert "
                               "it first, e.g. with .double()")
    _matrices("geqrf", input)
    return geqrf_type(*Geqrf.apply(input))


def orgqr(input, input2):  # noqa: A002 - torch's names
    """torch.orgqr: linalg.householder_product(input, tau=input2), geqrf's Q (its first n
    columns); differentiable in both."""
    return linalg.householder_product(input, input2)


def _ormqr_checks(a, tau, c, left):
    for what, t in (("input", a), ("tau", tau), ("other", c)):
        if not isinstance(t, Tensor):
            raise TypeError(f"ormqr: {what} must be a tensor, got {type(t).__name__}")
    shapes = f"(input {fmt_shape(a.shape)}, tau {fmt_shape(tau.shape)}, other " \
             f"{fmt_shape(c.shape)})"
    if a.ndim < 2 or c.ndim < 2:
        raise ShapeError(f"ormqr: input and other must have at least 2 dimensions {shapes}")
    if tau.ndim != a.ndim - 1 or c.ndim != a.ndim:
        raise ShapeError(f"ormqr: expected tau to have one dimension less than input, and other "
                         f"as many as input {shapes}")
    if tuple(tau.shape[:-1]) != tuple(a.shape[:-2]) or tuple(c.shape[:-2]) != tuple(
            a.shape[:-2]):
        raise ShapeError(f"ormqr: expected the batch dimensions of tau and other to be equal to "
                         f"input.shape[:-2] {shapes}")
    side = -2 if left else -1
    if c.shape[side] != a.shape[-2]:
        raise ShapeError(f"ormqr: other.shape[{side}] must be equal to input.shape[-2] {shapes}")
    if tau.shape[-1] != min(c.shape[side], a.shape[-1]):
        raise ShapeError(f"ormqr: tau.shape[-1] must be equal to min(other.shape[{side}], "
                         f"input.shape[-1]) {shapes}")
    for what, t in (("tau", tau), ("other", c)):
        if t.dtype != a.dtype:
            raise _RuntimeDTypeError(f"ormqr: expected input and {what} to have the same dtype, "
                                     f"but input has dtype {a.dtype} and {what} has {t.dtype}")


def ormqr(input, input2, input3, left=True, transpose=False):  # noqa: A002 - torch's names
    """torch.ormqr: Q @ other (left), other @ Q (not left), Qᵀ in Q's place with transpose,
    where Q = H_1 ... H_k (m, m) is made of geqrf's (input, tau=input2), other = input3:
    each reflector applied in turn (tensor ops, so differentiable in all three)."""
    a, tau, c = input, input2, input3
    _ormqr_checks(a, tau, c, left)
    m, k = a.shape[-2], tau.shape[-1]
    xp, be = a.backend.xp, a.backend
    below = Tensor._wrap(xp.tril(xp.ones((m, k), dtype=a.dtype), -1), be)
    v = a[..., :, :k] * below + Tensor._wrap(xp.eye(m, k, dtype=a.dtype), be)
    order = range(k) if left == transpose else reversed(range(k))
    for i in order:
        vi, ti = v[..., :, i:i + 1], tau[..., i:i + 1].unsqueeze(-1)
        c = c - (ti * vi) @ (vi.mT @ c) if left else c - (c @ vi) @ (ti * vi).mT
    return c


# ---- what tinyattn/__init__.py sets --------------------------------------------------------------


def _false(self):
    return False


METHODS = {
    "is_cpu": property(_on_cpu, doc="Whether the tensor is on the CPU (the NumPy backend)."),
    "layout": property(lambda self: strided, doc="ta.strided: tinyattn's tensors are dense."),
    "output_nr": property(_output_nr, doc=_output_nr.__doc__),
    **{name: property(_false, doc=f"False (as torch's {name} of a dense tensor)") for name in (
        "is_sparse", "is_sparse_csr", "is_quantized", "is_meta", "is_mkldnn", "is_nested")},
    "get_device": get_device, "const_data_ptr": const_data_ptr, "storage_type": storage_type,
    "share_memory_": share_memory_, "is_shared": is_shared, "dim_order": dim_order,
    "narrow_copy": narrow_copy, "new_empty_strided": new_empty_strided, "resize": resize,
    "resize_as": resize_as, "as_strided_": as_strided_,
    "as_strided_scatter": as_strided_scatter, "slice_inverse": slice_inverse,
    "apply_": apply_, "map_": map_, "map2_": map2_, "nonzero_static": nonzero_static,
    "geqrf": geqrf, "orgqr": orgqr, "ormqr": ormqr,
}
_take_torch_keywords(METHODS, {})  # (NumPy's axis= for dim, as every method takes it)
FUNCTIONS = {name: METHODS[name] for name in __all__[2:]}
