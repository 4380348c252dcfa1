"""Tensor: a backend array that remembers how it was made, and the functions that create one.

Every method that computes something calls `apply(op, ...)` with an op from `tinyattn.ops`;
the Tensor itself holds only `_data` (a NumPy or CuPy array), `backend`, `grad`, an optional
`name`, and `_node` (the autograd node, or None when the tensor needs no gradient).
dtypes: lists and Python floats get the default dtype (float32 unless set_default_dtype says
otherwise), NumPy arrays keep theirs, and only floating-point tensors can require grad.
In-place ops (`+=`, `add_`, `x[i] = v`, ...) follow PyTorch's rules; see `Tensor._in_place`
(and `Tensor._in_place_view` for t_, transpose_, squeeze_ and unsqueeze_, which change the shape).
`t.data` is torch's: a detached tensor on the same memory (requires_grad False, no graph, a
version counter of its own), so a change written through it (`w.data.normal_(0, 0.02)`,
`p.data.add_(g, alpha=-lr)`) is not seen by autograd, the escape hatch PyTorch's `.data` is.
NumPy meets a tensor as torch's: np.asarray(t) shares its memory, np.exp(t) is a tensor, and
array + t is t's own operator, on the graph (Tensor.__array_ufunc__).
"""

import collections
import functools
import inspect
import math
import numbers
import operator

import numpy as np

from . import autograd as ag
from . import backends, display, return_types
from .autograd import (
    GradFn,
    Node,
    RemovableHandle,
    TensorBase,
    apply,
    apply_tensor,
    backward,
    backward_steps,
    bump_version,
    is_grad_enabled,
    no_grad,
    others_alive,
    share_version,
    use_tensor_class,
)
from .dtypes import (
    HALF,
    NO_COMPLEX,
    _int_in,
    as_dtype,
    category,
    get_default_dtype,
    int_range,
    promote_types,
    refuse_bool_subtraction,
    result_type,
)
from .errors import BackendError, DimError, DTypeError, GraphError, ShapeError, fmt_shape, warn_user
from .generator import check as check_generator
from .generator import default_generator, rng_of, seed_of, tell_effects_to
from .ops import activation as act
from .ops import elementwise as ew
from .ops import half as hf
from .ops import index as ix
from .ops import linalg as la
from .ops import matmul as mm
from .ops import pointwise as pw
from .ops import reduce as rd
from .ops import scan as sc
from .ops import shape as sh
from .ops import softmax as sm
from .ops import special as sp
from .ops import special_more as spm
from .ops import views
from .ops.mask import masked_fill
from .ops.op import Op, broadcasts_to, plain, quiet
from .ops.op import dim1 as _axis
from .ops.op import dims as _axes
from .return_types import Device, Size

# the dtype names are NumPy's dtype objects, the very ones a tensor's .dtype gives, so that
# they hash as they compare (x.dtype in {float16, float32}, as torch's); not the scalar types
float16, float32, float64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
int32, int64, bool_ = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)


def _unary(op):
    """The Tensor method x.name() for a one-input op."""
    def method(self):
        return apply_tensor(op, self)
    method.__name__ = method.__qualname__ = op.name
    method.__doc__ = op.doc
    return method


def _one_dim(name, dim):
    """softmax's dim as torch takes it: one int, or an int-like (a NumPy int, a 0-d integer
    tensor), never None (Tensor.softmax has no default dim), a bool, a float or a tuple."""
    if dim is not None and not isinstance(dim, bool):
        try:
            return operator.index(dim)
        except TypeError:
            pass
    why = "" if dim is not None else (f"; torch's Tensor.{name} has no default dim (x.{name}(-1) "
                                      "is over the last one)")
    raise TypeError(f"{name}: dim must be one int, got {dim!r}{why}")


def _in_place_unary(op):
    """The Tensor method x.name_() for a one-input op: op(x) written into x."""
    def method(self):
        return self._in_place(op.name + "_", op)
    method.__name__ = method.__qualname__ = op.name + "_"
    method.__doc__ = f"{op.name}, in place."
    return method


class Tensor(TensorBase):
    """An n-dimensional array with reverse-mode autograd (PyTorch's names throughout)."""

    __slots__ = ()  # data, backend, grad, name, _node, _version_counter: see TensorBase
    __array_priority__ = 1000  # (torch's: libraries that go by it defer to our operators)
    __hash__ = object.__hash__  # == compares values, so hashing is by identity (as PyTorch)

    def __init__(self, *args, device=None, backend=None, **kwargs):
        """torch's legacy constructor, as torch.Tensor(...): Tensor(data) holds data (a list,
        an array) in the default dtype (float32: Tensor([1, 2]) too); Tensor(2, 3) (or a
        torch.Size) is a (2, 3) tensor of the default dtype (zeros here: tinyattn has no
        uninitialised memory), Tensor() an empty (0,) one; Tensor(t) of a tensor t is t's
        alias: its memory, dtype and graph. As torch's, it takes no dtype= or requires_grad=:
        tinyattn.tensor(data, dtype=..., requires_grad=...) does. (Beyond torch, kept from
        tinyattn's older constructor: Tensor(array, backend=...) keeps the array's dtype, and
        Tensor(0.5) is a 0-d tensor where torch refuses a float.)"""
        _legacy_init(self, args, device, backend, kwargs)

    # ---- what it is ----------------------------------------------------------------------------

    shape = property(lambda self: Size._of(self._data.shape))  # (a tuple: Size([2, 3]) == (2, 3))
    ndim = property(lambda self: self._data.ndim)
    dtype = property(lambda self: self._data.dtype)

    def size(self, dim=None):
        if dim is None:
            return Size._of(self._data.shape)
        try:
            return self._data.shape[dim]
        except IndexError:
            n = self.ndim
            raise DimError(f"size: dim {dim} is out of range for a tensor with {n} dims" + (
                f" (valid: {-n}..{n - 1})" if n else ": a 0-d tensor has no dims")) from None

    def numel(self):
        return int(self._data.size)

    def dim(self):
        return self._data.ndim

    ndimension, nelement = dim, numel

    @property
    def nbytes(self):
        return int(self._data.nbytes)

    def element_size(self):
        return int(self._data.itemsize)

    def stride(self, dim=None):
        """The step between neighbours along each dim, in elements, as torch's x.stride():
        NumPy's byte strides over the itemsize (a view shares its base's memory as torch's
        does: x.t().stride() is swapped, an expanded dim's is 0). A dim of size 1 may show
        another step than torch's, which never reads it."""
        steps = tuple(s // self._data.itemsize for s in self._data.strides)
        if dim is None:
            return steps
        try:
            return steps[dim]
        except (IndexError, TypeError):
            n = self.ndim
            raise DimError(f"stride: dim {dim!r} is out of range for a tensor with {n} dims" + (
                f" (valid: {-n}..{n - 1})" if n else "")) from None

    def storage_offset(self):
        """Where this tensor's first entry sits in the memory it shares with the tensor it is
        a view of, in elements (torch's): x[1].storage_offset() is 4 for a (3, 4) x, and 0 for
        a tensor with memory of its own."""
        return (_address(self._data) - _address(_owner(self._data))) // self._data.itemsize

    def data_ptr(self):
        """The address of this tensor's first entry (an int, as torch's x.data_ptr()): its
        array's, on the host or the GPU; two tensors over one memory compare equal."""
        return _address(self._data)

    def storage(self):
        """The memory this tensor and its views share, as torch's x.storage(): a TypedStorage,
        its entries in this tensor's dtype from the start of the memory (x[1].storage() is
        x's whole memory; storage_offset() says where x[1] starts in it). A write into it
        (s[0] = 5) reaches every tensor on that memory."""
        return TypedStorage(_flat_memory(self, self.dtype), self.device)

    def untyped_storage(self):
        """The memory this tensor and its views share as bytes (torch's x.untyped_storage()):
        a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() tells whether two
        tensors share memory."""
        return UntypedStorage(_flat_memory(self, np.dtype(np.uint8)), self.device)

    @property
    def itemsize(self):
        """Bytes per entry (torch's x.itemsize, the same as element_size())."""
        return int(self._data.itemsize)

    @property
    def device(self):
        """device(type='cpu') (the NumPy backend) or device(type='cuda') (CuPy), equal to its
        name ("cpu" == x.device): x.to(y.device) moves x to y's backend."""
        return Device.of_backend(self.backend.name)

    @property
    def _version(self):
        """How many in-place changes this tensor's memory has seen (shared with its views)."""
        v = self._version_counter
        return 0 if v is None else v[0]

    @property
    def _base(self):
        """The tensor this one is a view of (the root of its views: x[0][1]._base is x), as
        torch's; None when it is no view (detach() and view(dtype) make none, as torch's)."""
        of = getattr(self, "_view_of", None)
        return None if of is None else of[0]

    def _is_view(self):
        """Whether this tensor is a view of another's memory made by a view op (torch's)."""
        return getattr(self, "_view_of", None) is not None

    @property
    def requires_grad(self):
        return self._node is not None

    @requires_grad.setter
    def requires_grad(self, flag):
        had = self._node is not None
        self._require(flag)
        if (ag._tracers.get() is not None or ag._everywhere) and had != (self._node is not None):
            ag.state_changed(self, "requires_grad")  # (a captured step's recording refuses it)

    def _require(self, flag):
        """requires_grad = flag, told to no tracer: for a tensor just made (see __init__).

        Off, a leaf keeps its node aside (`_leaf`), and on again takes it back: the same leaf
        as before, as torch's, with its hooks, and the graphs recorded before the switch still
        lead to it (their gradient and the new one's add up in one .grad). While it is off,
        ops see a constant, and backward writes no .grad for it (autograd._write_grad)."""
        flag = _grad_flag(flag)
        node = self._node
        if node is not None and node.op is not None:
            raise GraphError("requires_grad can only be changed on a leaf tensor (one not made "
                             "by an op); use .detach() to make a leaf")
        if flag:
            if self.dtype.kind != "f":
                raise DTypeError(f"only floating-point tensors can require grad, this one is "
                                 f"{self.dtype}; make it with dtype=tinyattn.float32")
            if node is None:
                if type(self._version_counter) is ag.InferenceVersion and \
                        not ag.is_inference_mode_enabled():
                    raise GraphError("Setting requires_grad=True on inference tensor outside "
                                     "InferenceMode is not allowed (as torch): this tensor was "
                                     "made in inference_mode; use a .clone() of it")
                kept = getattr(self, "_leaf", None)
                self._node = kept if kept is not None else Node.leaf(self)
        elif node is not None:
            self._leaf, self._node = node, None

    def requires_grad_(self, flag=True):
        """Set requires_grad in place and return self; on a tensor that requires grad already
        (a non-leaf too) requires_grad_(True) changes nothing (torch)."""
        if not (flag and self._node is not None):
            self.requires_grad = flag
        return self

    @property
    def is_leaf(self):
        return self._node is None or self._node.op is None

    @property
    def grad_fn(self):
        """What made this tensor, as torch's grad_fn (None for leaves): name() ("MulBackward0"),
        next_functions, and the node's own attributes (op, parents, ...; see autograd.GradFn)."""
        return None if self.is_leaf else GradFn(self._node)

    @property
    def retains_grad(self):
        """Whether backward keeps this non-leaf tensor's gradient in .grad (retain_grad())."""
        node = self._node
        return node is not None and node.op is not None and node.tensor is not None and \
            node.tensor() is self

    def is_inference(self):
        """Whether this is an inference tensor (torch's): one made in inference_mode, or a
        view or detach() of one (not a view of a normal tensor made there). Outside inference
        mode it cannot require grad nor be saved for backward: use a .clone() of it."""
        return type(self._version_counter) is ag.InferenceVersion

    # ---- leaving the graph -------------------------------------------------------------------

    def numpy(self, *, force=False):
        """The values as a NumPy array (shared with the tensor on the NumPy backend). force
        is torch's (detach and copy to the host first): this gives the same either way."""
        if ag._tracers.get() is not None or ag._everywhere:
            _seen_read(self, "numpy()")
        return self.backend.to_numpy(self._data)

    def item(self):
        if self._data.size != 1:
            raise ValueError(f"item: the tensor has {self._data.size} elements, not one")
        if ag._tracers.get() is not None or ag._everywhere:
            _seen_read(self, "item()")
        return self._data.item()

    def tolist(self):
        return self.numpy().tolist()

    def detach(self):
        """The same values as a new leaf with no graph (the data is shared, not copied: an
        in-place change to either is seen by both, and counts in both's version)."""
        if isinstance(self._data, np.generic):  # (a 0-d op result's NumPy scalar, which no
            self._data = np.array(self._data)  # tensor can share: an array from now on)
        out = Tensor._wrap(self._data, self.backend)
        share_version(self, out, differentiable=False)
        return out

    def clone(self, *, memory_format=None):
        """A copy in memory of its own; gradients flow back to this tensor. memory_format:
        ta.preserve_format (torch's default: laid out as this tensor is, so x.t().clone()
        keeps x.t()'s strides; row-major for an expand) or ta.contiguous_format (row-major);
        ta.channels_last is refused."""
        _row_major("clone", memory_format, preserve=True)
        if memory_format is contiguous_format or self._data.flags.c_contiguous:
            return apply(ew.clone, self)
        return apply(ew.clone, self, keep_layout=True)

    def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False):
        """torch's forms: to(dtype), to(device), to(device, dtype), to(other tensor), and the
        keywords dtype=, device=, copy= (non_blocking is accepted and changes nothing here).
        A device is a backend ("numpy"/"cpu", "cupy"/"cuda").

        A dtype change is an op (gradients flow back, in the original dtype). A backend move
        copies the values to a new leaf that keeps `requires_grad`. Nothing to change: self
        (a copy with copy=True)."""
        if args and type(args[-1]) is bool:  # torch's positional non_blocking (and copy)
            args, copy = _to_flags(args, copy)
        device, dtype = to_args(args, device, dtype)
        out = self if device is None else self._to_backend(backends.backend(device))
        if dtype is not None and as_dtype(dtype) != out.dtype:
            out = out._to_dtype(as_dtype(dtype))
        return out.clone() if copy and out is self else out

    def _to_backend(self, be):
        if be is self.backend:
            return self
        moved = Tensor._wrap(be.asarray(self.backend.to_numpy(self._data)), be)
        moved._require(self.requires_grad)
        return moved

    def _to_dtype(self, dtype):
        """The cast op (so a captured step sees it too); to a float, the gradient flows back."""
        return apply(ew.cast, self if dtype.kind == "f" else self.detach(), dtype=dtype)

    def __deepcopy__(self, memo):
        """A new leaf with a copy of the values and of .grad, the same class (a Parameter stays
        one), requires_grad and name (copy.deepcopy of a model); as torch, only leaves."""
        if self._node is not None and self._node.op is not None:
            raise GraphError("deepcopy: only tensors made by the user (graph leaves) can be "
                             "deep-copied, not one computed on the graph; detach() it first")
        new = type(self)._wrap(self._data.copy(), self.backend)
        memo[id(self)] = new
        new._require(self.requires_grad)
        new._name = self._name
        if self.grad is not None:  # (a copy of a .grad: its shape, dtype and backend are right)
            new._grad = Tensor._wrap(self.grad._data.copy(), self.backend)
        return new

    def __reduce_ex__(self, protocol):
        """Pickled as its values (on the host), backend name, class, requires_grad and name;
        unpickled as a new leaf (no graph, no .grad, as torch)."""
        return _unpickle, (type(self), self.backend.to_numpy(self._data), self.backend.name,
                           self.requires_grad, self._name)

    def cpu(self):
        """This tensor on the NumPy backend (self if it is there already)."""
        return self.to("cpu")

    def cuda(self):
        """This tensor on the CuPy backend (needs CuPy and a GPU)."""
        return self.to("cuda")

    is_cuda = property(lambda self: self.backend.name == "cupy")

    def pin_memory(self, device=None):
        """self, for nanoGPT's `x.pin_memory().to(device, non_blocking=True)`: tinyattn has no
        page-locked memory (a host-to-GPU copy is the same without it; is_pinned() stays
        False). As torch's, only a tensor on the host can be pinned."""
        if self.backend.name != "numpy":
            raise BackendError(f"pin_memory: only a tensor on the host (the numpy backend) can "
                               f"be pinned, got one of shape {fmt_shape(self.shape)} on "
                               f"{self.backend.name}")
        return self

    def is_pinned(self, device=None):
        """False: tinyattn's host tensors are ordinary (pageable) memory."""
        return False

    def is_floating_point(self):
        return self.dtype.kind == "f"

    def is_complex(self):
        """Always False: tinyattn has no complex numbers (ta.polar says so by name)."""
        return False

    # torch's complex-number vocabulary, as it reads on a real tensor (tinyattn has no other)

    @property
    def real(self):
        """This tensor itself (as torch's for a real tensor: its own real part, on the graph)."""
        return self

    @property
    def imag(self):
        """Refused, as torch refuses it for a real tensor (a DTypeError naming imag)."""
        raise DTypeError(f"imag: is not implemented for tensors with non-complex dtypes (got "
                         f"{self.dtype} {fmt_shape(self.shape)}: a real tensor has no imaginary "
                         "part, and tinyattn has no complex dtypes)")

    def conj(self):
        """This tensor itself: a real tensor is its own conjugate (torch returns it too)."""
        return self

    def resolve_conj(self):
        """This tensor itself: a real tensor never has a lazy conjugate bit to resolve."""
        return self

    def is_conj(self):
        """False: a real tensor never has torch's conjugate bit set."""
        return False

    def is_neg(self):
        """False: tinyattn has no lazy negation (torch's negative bit, set only by conj
        views of complex tensors)."""
        return False

    def resolve_neg(self):
        """This tensor itself: it never has a lazy negative bit to resolve."""
        return self

    def type(self, dtype=None, non_blocking=False):
        """With a dtype, this tensor converted to it (as .to): a dtype, or a type name as
        torch's ("torch.DoubleTensor", "tinyattn.LongTensor", "torch.cuda.FloatTensor" also
        moves it to the GPU); without, its type name ("tinyattn.FloatTensor" for float32)."""
        if dtype is None:
            return f"tinyattn.{_TYPE_NAMES.get(self.dtype.name, self.dtype.name)}Tensor"
        if isinstance(dtype, str):
            device, dtype = _type_named(dtype)
            return self.to(device, dtype) if device is not None else self.to(dtype)
        return self.to(dtype)

    def _new(self, make, args, dtype, requires_grad, device=None):
        be = self.backend if device is None else backends.backend(device)
        t = make(*args, dtype=self.dtype if dtype is None else dtype, backend=be)
        t._require(requires_grad)
        return t

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        """A tensor of zeros with this tensor's dtype and backend (unless dtype or device is
        given)."""
        return self._new(zeros, size, dtype, requires_grad, device)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return self._new(ones, size, dtype, requires_grad, device)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return self._new(empty, size, dtype, requires_grad, device)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        return self._new(full, (size, fill_value), dtype, requires_grad, device)

    def new(self, *args, device=None):
        """torch's legacy constructor, this tensor's dtype and backend: new() is empty (0,);
        new(2, 3) or new(x.size()) is uninitialised of that size; new(other) is other itself
        (its dtype must be this one's), detached; new([1, 2]) or new((2, 3)) is that data (old
        VAE code: std.data.new(std.size()).normal_())."""
        if len(args) == 1 and isinstance(args[0], Tensor):
            if args[0].dtype != self.dtype:
                raise TypeError(f"new(): the tensor given is {args[0].dtype}, expected "
                                f"{self.dtype} (this tensor's dtype)")
            return args[0].detach()
        if all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in args):
            return self.new_empty(*args) if args else self.new_empty(0)
        if len(args) == 1 and isinstance(args[0], return_types.Size):
            return self.new_empty(args[0])
        if len(args) == 1:
            return self.new_tensor(args[0])
        raise TypeError(f"new(): takes sizes (ints), a Size, a tensor or data, got "
                        f"{tuple(type(a).__name__ for a in args)}")

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """data as a new leaf tensor on this backend (or device's), with this tensor's dtype
        unless given."""
        return self._new(lambda d, dtype, backend: tensor(d, dtype=dtype, backend=backend),
                         (data.detach().numpy() if isinstance(data, Tensor) else data,),
                         dtype, requires_grad, device)

    def float(self):
        return self.to(float32)

    def double(self):
        return self.to(float64)

    def half(self):
        return self.to(float16)

    def long(self):
        return self.to(int64)

    def int(self):
        return self.to(int32)

    def bool(self):
        return self.to(bool_)

    # ---- autograd ------------------------------------------------------------------------------

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Fill .grad of every leaf this tensor depends on (it must be a scalar, or pass
        `gradient`, the cotangent of this tensor); with `inputs` (tensors), of those only.
        create_graph=True: .grad gets a graph of its own (gradients of gradients, for the ops
        tinyattn/higher_order/ covers): see autograd.backward."""
        backward(self, (gradient,), retain_graph, create_graph, inputs)

    def backward_steps(self, gradient=None, retain_graph=False):
        """backward() one VJP at a time: iterate to step through it (see autograd.Step)."""
        return backward_steps(self, gradient, retain_graph)

    def register_hook(self, hook):
        """hook(grad) runs when this tensor's gradient has been summed, before it flows on
        (or, for a leaf, into .grad); a tensor it returns replaces the gradient, None keeps
        it. Returns a handle: handle.remove() takes the hook off (as torch)."""
        if self._node is None:
            raise GraphError("register_hook: this tensor does not require grad, so no gradient "
                             "will reach it; make it with requires_grad=True (or from one)")
        if not callable(hook):
            raise TypeError(f"register_hook: the hook must be callable, got {hook!r}")
        node = self._node
        if node.hooks is None:
            node.hooks = {}
        return RemovableHandle(node.hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """hook(tensor) runs after backward (or backward(inputs=...)) has added this leaf's
        gradient into its .grad: an optimizer step per parameter inside backward, as torch's.
        It returns None. grad() fills no .grad, and calls none. Returns a handle whose
        remove() takes it off."""
        name = "register_post_accumulate_grad_hook"
        if self._node is None:
            raise GraphError(f"{name}: this tensor does not require grad, so no gradient will "
                             "reach it; make it with requires_grad=True")
        if self._node.op is not None:
            raise GraphError(f"{name}: this tensor is not a leaf (it is the output of "
                             f"{self._node.op.name}), and only a leaf has a .grad that backward "
                             "accumulates into (as torch); use register_hook, or hook the leaf")
        if not callable(hook):
            raise TypeError(f"{name}: the hook must be callable, got {hook!r}")
        return RemovableHandle(ag.post_accumulate_hooks(self._node), hook)

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in .grad after backward() (and grad()); after
        an in-place op it is the gradient of the tensor as changed (torch)."""
        if self._node is None:
            raise GraphError("retain_grad: this tensor does not require grad")
        if self._node.op is not None:
            ag.retain(self)

    # ---- arithmetic (Python numbers are constants; anything else becomes a tensor) -------------

    # (the operators below pass a Python number or a Tensor on as it is before they call
    # _other: a call per op less, 1 % of the overhead benchmark's time per op; an int or float
    # second takes apply_tensor's shorter path)
    def _other(self, other):
        if type(other) in _PLAIN:  # the common cases, without an ABC check
            return other
        if isinstance(other, (Tensor, numbers.Number)):
            if isinstance(other, numbers.Complex) and not isinstance(other, numbers.Real):
                raise DTypeError(f"a complex number ({other}) with a tensor of shape "
                                 f"{fmt_shape(self.shape)}: {NO_COMPLEX}")
            return other.item() if isinstance(other, np.generic) else other
        _no_sequence(other)
        made = _fresh(other, backend=self.backend)  # an array keeps its dtype
        if not hasattr(other, "dtype") and category(made.dtype) <= category(self.dtype):
            made = Tensor._wrap(made._data.astype(self.dtype), self.backend)  # a list of numbers
        return made

    def __add__(self, other):
        if other.__class__ in _INT_FLOAT:
            return apply_tensor(ew.add, self, other)
        return apply(ew.add, self, other if other.__class__ in _PLAIN else self._other(other))

    def __radd__(self, other):
        return apply(ew.add, other if other.__class__ in _PLAIN else self._other(other), self)

    def __sub__(self, other):
        if other.__class__ in _INT_FLOAT:
            return apply_tensor(ew.sub, self, other)
        return apply(ew.sub, self, other if other.__class__ in _PLAIN else self._other(other))

    def __rsub__(self, other):
        return apply(ew.sub, other if other.__class__ in _PLAIN else self._other(other), self)

    def __mul__(self, other):
        if other.__class__ in _INT_FLOAT:
            return apply_tensor(ew.mul, self, other)
        return apply(ew.mul, self, other if other.__class__ in _PLAIN else self._other(other))

    def __rmul__(self, other):
        return apply(ew.mul, other if other.__class__ in _PLAIN else self._other(other), self)

    def __truediv__(self, other):
        if other.__class__ in _INT_FLOAT:
            return apply_tensor(ew.div, self, other)
        return apply(ew.div, self, other if other.__class__ in _PLAIN else self._other(other))

    def __rtruediv__(self, other):
        return apply(ew.div, other if other.__class__ in _PLAIN else self._other(other), self)

    def __pow__(self, other):
        if type(other) is not int and type(other) is not float:  # (a tensor, a bool, ...)
            return self._pow_of(other)
        return _power("pow", lambda: apply(ew.power, self, other), self, other)

    def _pow_of(self, exponent, name="pow"):
        """self ** exponent for an exponent other than a Python int or float, with torch's
        bool rules: a bool tensor to a Python bool power is bool (NumPy's is int8), to a bool
        tensor refused."""
        exponent = self._other(exponent)
        if self.dtype == np.bool_ and (type(exponent) is bool or _is_bool_tensor(exponent)):
            if type(exponent) is not bool:
                _refuse_bool_power(name, self, exponent)
            return (self ** int(exponent)).to(np.bool_)  # (x ** True is x, x ** False ones)
        return _power(name, lambda: apply(ew.power, self, exponent), self, exponent)

    def __rpow__(self, other):
        other = self._other(other)
        if type(other) is bool and self.dtype == np.bool_:
            _refuse_bool_power("pow", other, self)
        return _power("pow", lambda: apply(ew.power, other, self), other, self)

    def __neg__(self):
        return apply_tensor(ew.neg, self)

    def __pos__(self):
        if self.dtype == np.bool_:
            _refuse_bool("positive (the + operator)", self)
        return self

    def __abs__(self):
        return apply_tensor(ew.absolute, self)

    def __matmul__(self, other):
        return apply(mm.matmul, self, self._operand(other))

    def __rmatmul__(self, other):
        return apply(mm.matmul, self._operand(other), self)

    def dot(self, other):
        """Σ self * other over two 1-D tensors of one length (torch.dot): a 0-d tensor."""
        other = self._operand(other)
        if self.ndim != 1 or other.shape != self.shape:
            raise ShapeError(f"dot: needs two 1-D tensors of the same length, got "
                             f"{fmt_shape(self.shape)} and {fmt_shape(other.shape)}")
        mm.same_dtype("dot", self, other)
        return self @ other

    def _operand(self, other):
        """A matrix product's other operand as a tensor: an array or a tensor keeps its dtype;
        a list is refused, as torch's @ refuses one."""
        if isinstance(other, Tensor):
            return other
        _no_sequence(other)
        made = _fresh(other, backend=self.backend)
        if not hasattr(other, "dtype") and category(made.dtype) <= category(self.dtype):
            made = Tensor._wrap(made._data.astype(self.dtype), self.backend)
        return made

    def _as_tensor(self, other):
        return other if isinstance(other, Tensor) else _fresh(other, backend=self.backend)

    # torch's method forms of the operators: x.add(y, alpha=2) is x + 2 * y

    def add(self, other, *, alpha=1):
        if type(alpha) is not int:
            _check_alpha("add", self, other, alpha)
        return self + other if alpha == 1 else _with_alpha("add", self, other, alpha)

    def sub(self, other, *, alpha=1):
        if alpha != 1:  # (x - alpha * mask: the bool is refused before it is scaled, as torch)
            refuse_bool_subtraction((self._data, getattr(other, "_data", other)))
        if type(alpha) is not int:
            _check_alpha("sub", self, other, alpha)
        return self - other if alpha == 1 else _with_alpha("sub", self, other, alpha)

    def mul(self, other):
        return self * other

    def div(self, other, *, rounding_mode=None):
        """self / other; rounding_mode "floor" or "trunc" rounds the quotient (an integer
        tensor stays an integer one), as torch.div."""
        if rounding_mode is None:
            return self / other
        if rounding_mode not in ("floor", "trunc"):
            raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got "
                             f"{rounding_mode!r}")
        floor = self // other
        if rounding_mode == "floor":
            return floor
        if floor.dtype.kind == "f":  # (one node, torch's: float16 in float32, zero gradients)
            return apply(hf.div_trunc, self, self._other(other))
        # integers: trunc is floor + 1 where the exact quotient is negative and not whole
        other = self._as_tensor(other)
        return floor + ((floor * other != self) & ((self < 0) != (other < 0))).to(floor.dtype)

    subtract, multiply, divide, true_divide = sub, mul, div, __truediv__
    neg = negative = __neg__

    def positive(self):
        return +self

    def matmul(self, other):
        return self @ other

    def matrix_power(self, n):
        """torch.linalg.matrix_power: this (..., m, m) tensor multiplied by itself n times (by
        repeated squaring; the gradient is matmul's); n = 0: the identity, on the graph with a
        zero gradient (as torch's); n = 1: a copy; n < 0: the inverse's power -n (as torch's;
        a singular matrix is a linalg.LinAlgError)."""
        name = "linalg.matrix_power"
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"{name}: n must be an int, got {n!r}")
        if self.ndim < 2 or self.shape[-1] != self.shape[-2]:
            raise ShapeError(f"{name}: the input must be square matrices (..., m, m), with at "
                             f"least 2 dims, got shape {fmt_shape(self.shape)}")
        if n < 0:
            return self.inverse().matrix_power(-int(n))
        if n == 0:  # (torch's: the identity written over a copy, so on the graph: gradient 0)
            m = self.shape[-1]
            eye_ = _make("eye", _eye, self.dtype, False, self.backend, n=m, m=m)
            return apply(sh.setitem, self, eye_, steps=((Ellipsis,),))
        if n == 1:
            return self.clone()
        out, base, n = None, self, int(n)
        while n:  # (n >= 2: at least one product, so the result is never self)
            if n & 1:
                out = base if out is None else out @ base
            n >>= 1
            if n:
                base = base @ base
        return out

    def inverse(self):
        """torch.linalg.inv of this (..., n, n) tensor (ops/linalg.py)."""
        return apply(la.inv, self)

    def det(self):
        """torch.linalg.det of this (..., n, n) tensor: shape (...)."""
        return apply(la.det, self)

    def slogdet(self):
        """(sign, logabsdet) of det, as torch.slogdet (a named tuple); sign has no gradient."""
        both = apply(la.slogdet, self)
        return return_types.slogdet(both[0].detach(), both[1])

    def logdet(self):
        """log det, as torch.logdet: NaN where det < 0, -inf where det = 0."""
        sign, logabsdet = self.slogdet()
        return logabsdet.masked_fill(sign < 0, float("nan"))

    def mm(self, other):
        """The product of two matrices (2-D only, as torch.mm; matmul broadcasts)."""
        return self._product("mm", other, 2, 2)

    def bmm(self, other):
        """Batched matrix products of two 3-D tensors with the same batch (as torch.bmm)."""
        other = self._as_tensor(other)
        if self.ndim == 3 == other.ndim and self.shape[0] != other.shape[0]:
            raise ShapeError(f"bmm: the batch sizes differ: {fmt_shape(self.shape)} and "
                             f"{fmt_shape(other.shape)}")
        return self._product("bmm", other, 3, 3)

    def mv(self, vec):
        """Matrix (n, m) times vector (m,) -> (n,)."""
        return self._product("mv", vec, 2, 1)

    def outer(self, vec2):
        """(n,) and (m,) -> (n, m): self[i] * vec2[j]."""
        vec2 = self._as_tensor(vec2)
        if self.ndim != 1 or vec2.ndim != 1:
            raise ShapeError(f"outer: needs two 1-D tensors, got {fmt_shape(self.shape)} and "
                             f"{fmt_shape(vec2.shape)}")
        return self.unsqueeze(1) * vec2.unsqueeze(0)

    ger = outer

    def _product(self, name, other, ndim, other_ndim):
        other = self._operand(other)
        if self.ndim != ndim or other.ndim != other_ndim:
            raise ShapeError(f"{name}: needs a {ndim}-D and a {other_ndim}-D tensor, got "
                             f"{fmt_shape(self.shape)} and {fmt_shape(other.shape)} (matmul "
                             "takes any)")
        k, k_other = self.shape[-1], other.shape[0 if other_ndim == 1 else -2]
        if k != k_other:
            raise ShapeError(f"{name}: {fmt_shape(self.shape)} @ {fmt_shape(other.shape)}: "
                             f"inner dims {k} and {k_other} differ")
        mm.same_dtype(name, self, other)
        return self @ other

    # ---- comparisons and logic: plain bool tensors, no gradient --------------------------------

    def _compare(self, other, fn, name="compare"):
        """fn(self, other) on arrays, both in their promoted dtype first (as torch compares)."""
        if isinstance(other, np.generic):  # a NumPy number counts as a Python one (torch)
            other = other.item()
        return _values(name, _compared, self, _no_sequence(other), test=fn)

    def __lt__(self, other):
        return self._compare(other, operator.lt, "lt")

    def __le__(self, other):
        return self._compare(other, operator.le, "le")

    def __gt__(self, other):
        return self._compare(other, operator.gt, "gt")

    def __ge__(self, other):
        return self._compare(other, operator.ge, "ge")

    # == and != with what is no operand (None, a str, a dict): NotImplemented, so Python falls
    # back to identity, False for == and True for !=, as torch (`if t == None:` ran elementwise
    # into "the truth value ... is ambiguous" before)

    def __eq__(self, other):
        if type(other) not in _PLAIN and not _comparable(other):
            return NotImplemented
        return self._compare(other, operator.eq, "eq")

    def __ne__(self, other):
        if type(other) not in _PLAIN and not _comparable(other):
            return NotImplemented
        return self._compare(other, operator.ne, "ne")

    def eq(self, other):
        """self == other elementwise; what is no operand is refused (torch's TypeError)."""
        return self._compare(_operand_of("eq", other), operator.eq, "eq")

    def ne(self, other):
        return self._compare(_operand_of("ne", other), operator.ne, "ne")

    def lt(self, other):
        return self < other

    def le(self, other):
        return self <= other

    def gt(self, other):
        return self > other

    def ge(self, other):
        return self >= other

    greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne

    def equal(self, other):
        """True when other has this shape and every value is equal (a Python bool)."""
        other = self._as_tensor(other)
        return self.shape == other.shape and bool((self == other).all())

    def __invert__(self):
        if self.dtype.kind not in "biu":  # (NumPy's own message names neither op nor dtype)
            _check_bits("invert", self, hint=_NOT_HINT)
        return _values("invert", operator.invert, self)

    def __and__(self, other):
        return self._bits(other, operator.and_, "bitwise_and")

    def __or__(self, other):
        return self._bits(other, operator.or_, "bitwise_or")

    def __xor__(self, other):
        return self._bits(other, operator.xor, "bitwise_xor")

    def __bool__(self):
        if self._data.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {fmt_shape(self.shape)} is "
                             "ambiguous: use .any() or .all()")
        if ag._tracers.get() is not None or ag._everywhere:
            _seen_read(self, "bool()")
        return bool(self._data)

    # ---- in place: the same tensor, changed (PyTorch's rules) -------------------------------

    def _in_place(self, name, op, *args, write=None, **params):
        """Make this tensor op(self, *args) in its own memory, so that every holder of it (an
        optimizer, a view) sees the change, and bump its version counter.

        Not recorded (under no_grad, or when nothing involved requires grad): only the values
        change; a graph that saved the old values refuses them in backward (the version check).
        Recorded (grad enabled, this tensor or an argument requires grad): this tensor gets a
        new node whose parent is its old one, as if `x = op(x, ...)` had run; through a view
        (indexing, reshape, permute...), the view's base gets a node too, "base with the view's
        entries replaced" (torch's CopySlices), and its other live views follow (ops/views.py).
        Refused, with a GraphError: a leaf that requires grad (update it under no_grad,
        PyTorch's rule), what torch refuses for views (a view of such a leaf, a piece of split
        or unbind, a view made under no_grad, an expand()), and a change that another live
        tensor with a graph of its own (a detach() that requires grad) would not see.
        `write` (optional) does the unrecorded change directly instead (setitem's fast path).
        """
        record = is_grad_enabled() and (self._node is not None or any(
            isinstance(a, Tensor) and a._node is not None for a in args))
        if not record:
            if getattr(self, "_view_of", None) is not None:  # (a view made under no_grad)
                views.check_unrecorded(self, name)
            if ag._tracers.get() is not None or ag._everywhere:  # (a captured step's recording
                ag.state_changed(self, "values")  # refuses it: a replay would not write it)
            if write is not None:
                write()
            else:
                with no_grad():
                    self._store(name, apply(op, self, *args, **params)._data)
            bump_version(self)
            return self
        self._refuse_in_place(name)
        source = self
        if 0 in op.saves:  # the op keeps its input for backward: give it the values before
            source = self._before()
        return self._become(name, apply(op, source, *args, **params))

    def _in_place_as(self, name, compute, *args):
        """x.name_(...) for a method made of several ops: compute(x) written into x, with
        _in_place's rules (recorded when grad is enabled and x or a tensor in args requires
        grad, as if x = compute(x) had run; a leaf that requires grad or a shared memory is
        refused then)."""
        if not (is_grad_enabled() and (self._node is not None or any(
                isinstance(a, Tensor) and a._node is not None for a in args))):
            if getattr(self, "_view_of", None) is not None:  # (a view made under no_grad)
                views.check_unrecorded(self, name)
            with no_grad():
                self._store(name, compute(self)._data)
            bump_version(self)
            return self
        self._refuse_in_place(name)
        return self._become(name, compute(self._before()))  # (the ops may keep x's values)

    def _refuse_in_place(self, name):
        self._refuse_leaf(name)
        if others_alive(self) or getattr(self, "_view_of", None) is not None:
            views.check_in_place(self, name)  # torch's refusals for views (ops/views.py)

    def _refuse_leaf(self, name):
        if self._node is not None and self._node.op is None:
            raise GraphError(f"{name}: this tensor {fmt_shape(self.shape)} is a leaf that "
                             "requires grad, and an in-place change while the graph is being "
                             "recorded would lose its gradient; do the update inside `with "
                             "tinyattn.no_grad():` (as PyTorch requires)")

    def _in_place_view(self, name, op, **params):
        """x.name_(...) for a view op (squeeze_, unsqueeze_, t_, transpose_: torch's in-place
        view ops): x becomes the view op(x), its own memory seen in another shape. The values
        stay (a view made before keeps its shape, and sees writes as before) and the version
        moves on, as torch's: a graph that saved x refuses it in backward.
        Recorded (grad enabled, x requires grad): x takes the op's node, as if `x = op(x)` had
        run; a leaf that requires grad is refused (others sharing the memory are not, as their
        values do not change). Not recorded (no_grad, or x needs no grad): a leaf keeps its
        node (its gradient takes the new shape), as in torch; a tensor made by a recorded op is
        refused, unlike torch, whose backward then fails on the gradient's shape or, for a
        square matrix, sends it back untransposed (here it would be reshaped, silently)."""
        record = is_grad_enabled() and self._node is not None
        if record:
            self._refuse_leaf(name)
            out = apply(op, self, **params)
        else:
            if self._node is not None and self._node.op is not None:
                raise GraphError(f"{name}: this tensor {fmt_shape(self.shape)} was made by a "
                                 "recorded op (it requires grad), and under no_grad its new "
                                 "shape would not be recorded: a gradient flowing back to it "
                                 f"would no longer fit its graph; call {name} with grad enabled "
                                 "(recorded then), or on a .detach() of it")
            if ag._tracers.get() is not None or ag._everywhere:  # (as _in_place: a replay
                ag.state_changed(self, "values")  # would not change it)
            with no_grad():
                out = apply(op, self, **params)
        # (out's array is a view of x's: a permute, or a reshape adding or dropping 1s, never
        # copies)
        self._data = out._data
        bump_version(self)
        if record:
            self._node = out._node
            if self._name is not None:
                self._node.name = self._name  # the tensor keeps its name through the change
        return self

    def _before(self):
        """This tensor's values now, in memory of their own, on its node (for ops that keep
        their input while this tensor's memory changes)."""
        source = Tensor._wrap(self._data.copy(), self.backend)
        source._node = self._node
        return source

    def _become(self, name, result):
        """Take result's values (into this tensor's memory) and its node; the tensors sharing
        the memory follow (a view's base, other views: ops/views.py's rebase)."""
        self._store(name, result._data)
        bump_version(self)
        self._node = result._node
        if self._node is not None and self._name is not None:
            self._node.name = self._name  # the tensor keeps its name through the change
        if self._version_counter[1] is not None:
            views.rebase(self)
        return self

    def _store(self, name, values):
        """Copy `values` into this tensor's memory, with PyTorch's checks for an in-place op."""
        if values.shape != self.shape:
            raise ShapeError(f"{name}: the result has shape {fmt_shape(values.shape)} but this "
                             f"tensor has shape {fmt_shape(self.shape)}; an in-place op cannot "
                             "change a tensor's shape (write x = x + y for a new tensor)")
        if not _can_store(values.dtype, self.dtype):
            raise DTypeError(f"{name}: the result is {values.dtype}, which cannot be stored in "
                             f"this {self.dtype} tensor in place (PyTorch's rule: no float into "
                             "an integer tensor, only bool into a bool one); write x = x + y "
                             "for a new tensor, or convert this one first")
        if values.dtype == self.dtype:
            self.backend.xp.copyto(self._writable(name), values)
        else:
            with quiet():  # (float32 past 65504 into float16: inf, silently as torch)
                self.backend.xp.copyto(self._writable(name), values, casting="unsafe")

    def __iadd__(self, other):
        return self._in_place("add_", ew.add, self._other(other))

    def __isub__(self, other):
        return self._in_place("sub_", ew.sub, self._other(other))

    def __imul__(self, other):
        return self._in_place("mul_", ew.mul, self._other(other))

    def __itruediv__(self, other):
        return self._in_place("div_", ew.div, self._other(other))

    def __ipow__(self, other):
        return self.pow_(other)

    def __iand__(self, other):
        return self._in_place_bits("&=", operator.and_, other)

    def __ior__(self, other):
        return self._in_place_bits("|=", operator.or_, other)

    def __ixor__(self, other):
        return self._in_place_bits("^=", operator.xor, other)

    # (without these Python ran `x = x // y`: a new tensor, which views and optimizers never
    # saw, and which a leaf that requires grad let through; torch has no __imatmul__, so
    # `x @= y` rebinds x there too)

    def __ifloordiv__(self, other):
        return self._in_place("floor_divide_", pw.floor_divide, self._other(other))

    def __imod__(self, other):
        return self._in_place("remainder_", pw.remainder, self._other(other))

    def __ilshift__(self, other):
        return self._in_place_bits("<<=", operator.lshift, other)

    def __irshift__(self, other):
        return self._in_place_bits(">>=", operator.rshift, other)

    def _in_place_bits(self, name, fn, other):
        """&=, |=, ^=, <<=, >>= and their methods (bitwise_and_, ...) on bool or integer
        tensors (no gradients: these never require grad)."""
        values = self._bits(other, fn, name)._data
        if ag._tracers.get() is not None or ag._everywhere:  # (as _in_place: a replay would
            ag.state_changed(self, "values")  # not write it)
        self._store(name, values)
        bump_version(self)
        return self

    def _in_place_values(self, name, compute, *args):
        """x.name_(...) for a comparison or logical op: its truth values, in x's dtype, written
        into x (torch's eq_, logical_and_, ...: 1 and 0 in a float tensor), with _in_place's
        rules; the values have no gradient, so a recorded x leaves the graph (torch's
        gradient through them is 0)."""
        return self._in_place_as(name, lambda x: compute(x, *args).to(x.dtype), *args)

    # in-place forms of the methods below (see _in_place): x.tan_() makes x tan(x) in its memory

    def floor_divide_(self, other):
        return self._in_place("floor_divide_", pw.floor_divide, self._other(other))

    def remainder_(self, other):
        return self._in_place("remainder_", pw.remainder, self._other(other))

    def fmod_(self, other):
        return self._in_place("fmod_", pw.fmod, self._other(other))

    def atan2_(self, other):
        return self._in_place("atan2_", pw.atan2, self._other(other))

    def hypot_(self, other):
        return self._in_place("hypot_", pw.hypot, self._other(other))

    def copysign_(self, other):
        return self._in_place("copysign_", pw.copysign, self._other(other))

    def round_(self, decimals=0):
        return self._in_place("round_", pw.round_even, decimals=decimals)

    def xlogy_(self, other):
        return self._in_place_as("xlogy_", lambda x: x.xlogy(other), other)

    def float_power_(self, exponent):
        """self ** exponent in float64, in place: as torch, only into a float64 tensor."""
        if self.dtype != np.float64:
            raise DTypeError(f"float_power_: this {self.dtype} tensor cannot hold the float64 "
                             "result in place (torch's rule); convert it first with .double(), "
                             "or write x = x.float_power(y)")
        return self._in_place_as("float_power_", lambda x: x.float_power(exponent), exponent)

    def deg2rad_(self):
        return self._in_place_as("deg2rad_", Tensor.deg2rad)

    def rad2deg_(self):
        return self._in_place_as("rad2deg_", Tensor.rad2deg)

    def sinc_(self):
        return self._in_place_as("sinc_", Tensor.sinc)

    def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
        return self._in_place_as("nan_to_num_", lambda x: x.nan_to_num(nan, posinf, neginf))

    def cumsum_(self, dim, *, dtype=None):
        return self._in_place_as("cumsum_", lambda x: x.cumsum(dim, dtype=dtype))

    def cumprod_(self, dim, *, dtype=None):
        return self._in_place_as("cumprod_", lambda x: x.cumprod(dim, dtype=dtype))

    def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
        return self._in_place_as("addmm_", lambda x: x.addmm(mat1, mat2, beta=beta,
                                                              alpha=alpha), mat1, mat2)

    def addmv_(self, mat, vec, *, beta=1, alpha=1):
        return self._in_place_as("addmv_", lambda x: x.addmv(mat, vec, beta=beta, alpha=alpha),
                                 mat, vec)

    def addr_(self, vec1, vec2, *, beta=1, alpha=1):
        return self._in_place_as("addr_", lambda x: x.addr(vec1, vec2, beta=beta, alpha=alpha),
                                 vec1, vec2)

    def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
        return self._in_place_as("baddbmm_", lambda x: x.baddbmm(batch1, batch2, beta=beta,
                                                                  alpha=alpha), batch1, batch2)

    def addbmm_(self, batch1, batch2, *, beta=1, alpha=1):
        return self._in_place_as("addbmm_", lambda x: x.addbmm(batch1, batch2, beta=beta,
                                                                alpha=alpha), batch1, batch2)

    def bitwise_and_(self, other):
        return self._in_place_bits("bitwise_and_", operator.and_, other)

    def bitwise_or_(self, other):
        return self._in_place_bits("bitwise_or_", operator.or_, other)

    def bitwise_xor_(self, other):
        return self._in_place_bits("bitwise_xor_", operator.xor, other)

    def bitwise_left_shift_(self, other):
        return self._in_place_bits("bitwise_left_shift_", operator.lshift, other)

    def bitwise_right_shift_(self, other):
        return self._in_place_bits("bitwise_right_shift_", operator.rshift, other)

    def bitwise_not_(self):
        _check_bits("bitwise_not_", self, hint=_NOT_HINT)
        return self._in_place_values("bitwise_not_", Tensor.bitwise_not)

    def eq_(self, other):
        return self._in_place_values("eq_", Tensor.eq, other)

    def ne_(self, other):
        return self._in_place_values("ne_", Tensor.ne, other)

    def lt_(self, other):
        return self._in_place_values("lt_", Tensor.lt, other)

    def le_(self, other):
        return self._in_place_values("le_", Tensor.le, other)

    def gt_(self, other):
        return self._in_place_values("gt_", Tensor.gt, other)

    def ge_(self, other):
        return self._in_place_values("ge_", Tensor.ge, other)

    def logical_not_(self):
        return self._in_place_values("logical_not_", Tensor.logical_not)

    def logical_and_(self, other):
        return self._in_place_values("logical_and_", Tensor.logical_and, other)

    def logical_or_(self, other):
        return self._in_place_values("logical_or_", Tensor.logical_or, other)

    def logical_xor_(self, other):
        return self._in_place_values("logical_xor_", Tensor.logical_xor, other)

    greater_, greater_equal_, less_, less_equal_, not_equal_ = gt_, ge_, lt_, le_, ne_
    arctan2_ = atan2_

    def add_(self, other, *, alpha=1):
        if type(alpha) is not int:
            _check_alpha("add_", self, other, alpha)
        if alpha != 1:
            return self._with_alpha_("add_", ew.add, other, alpha)
        return self._in_place("add_", ew.add, self._other(other))

    def sub_(self, other, *, alpha=1):
        if type(alpha) is not int:
            _check_alpha("sub_", self, other, alpha)
        if alpha != 1:
            return self._with_alpha_("sub_", ew.sub, other, alpha)
        return self._in_place("sub_", ew.sub, self._other(other))

    def _with_alpha_(self, name, op, other, alpha):
        """add_ and sub_ for alpha != 1 (float16: as add and sub compute it, _with_alpha)."""
        if self.dtype == np.float16 and (not isinstance(other, Tensor) or
                                         other.dtype == np.float16):
            return self._in_place_as(name, lambda x: _with_alpha(name[:-1], x, other, alpha),
                                     other)
        return self._in_place(name, op, self._other(_alpha_scaled(self, self._other(other),
                                                                  alpha)))

    def mul_(self, other):
        return self._in_place("mul_", ew.mul, self._other(other))

    def div_(self, other, *, rounding_mode=None):
        """self / other in place; rounding_mode "floor" or "trunc" as div's (an integer
        tensor can take a rounded quotient, not a true one)."""
        if rounding_mode is None:
            return self._in_place("div_", ew.div, self._other(other))
        return self._in_place_as("div_", lambda x: x.div(other, rounding_mode=rounding_mode),
                                 other)

    subtract_, multiply_, divide_ = sub_, mul_, div_

    def true_divide_(self, other):
        return self._in_place("true_divide_", ew.div, self._other(other))

    def pow_(self, exponent):
        exponent = self._other(exponent)
        if self.dtype == np.bool_ and (type(exponent) is bool or _is_bool_tensor(exponent)):
            return self._in_place_as("pow_", lambda x: x._pow_of(exponent, "pow_"), exponent)
        return _power("pow_", lambda: self._in_place("pow_", ew.power, exponent), self, exponent)

    def clamp_(self, min=None, max=None):  # noqa: A002 - PyTorch's argument names
        """clamp, written into this tensor; tensor bounds take clamp's op (gradients for
        them too), as the out-of-place form does."""
        min, max = _clamp_bounds(min, max, "clamp_")  # noqa: A001
        if isinstance(min, Tensor) or isinstance(max, Tensor):
            return self._in_place("clamp_", pw.clamp, min if min is None else self._other(min),
                                  max if max is None else self._other(max))
        if self.dtype.kind != "f" and any(isinstance(b, float) for b in (min, max)):
            # a float result (torch's too), which an integer tensor refuses in place
            return self._in_place_as("clamp_", lambda x: x.clip(min, max))
        if self.dtype.kind in "iu":
            min, max = _int_bounds(self.dtype, min, max, "clamp_")  # noqa: A001
        return self._in_place("clamp_", ew.clip, min=min, max=max)

    clip_ = clamp_

    def copy_(self, src):
        """Overwrite this tensor's values with src's (broadcast to its shape, cast to its
        dtype); gradients flow to src, none to the values overwritten."""
        self[...] = src
        return self

    def fill_(self, value):
        """Every entry set to value (a number, checked as full checks it, or a 0-d tensor)."""
        self[...] = ix.fill_value(value, self.dtype, "fill_")
        return self

    def zero_(self):
        return self.fill_(0)

    def fill_diagonal_(self, fill_value, wrap=False):
        """The main diagonal (i, i, ..., i) set to fill_value, in place, as torch's: 2-D of any
        shape, or more dims all of one size; wrap=True starts a tall matrix's diagonal again
        every columns + 1 rows. Through masked_fill_: the filled entries get no gradient."""
        if self.ndim < 2 or (self.ndim > 2 and len(set(self.shape)) != 1):
            raise ShapeError(f"fill_diagonal_: takes a 2-D tensor, or more dims all of one size, "
                             f"got {fmt_shape(self.shape)}")
        mask = _make("diagonal_mask", _diagonal_mask, np.bool_, False, self.backend,
                     shape=self.shape, wrap=bool(wrap))
        return self.masked_fill_(mask, fill_value)

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """Overwrite with samples of N(mean, std²) from `generator` or the backend's stream."""
        _float_draws("normal_", self.dtype)
        _check_std("normal_", std)
        draw = randn(*self.shape, generator=generator, dtype=self.dtype, backend=self.backend)
        return self.copy_(draw._data * std + mean)

    def uniform_(self, a=0.0, b=1.0, *, generator=None):  # noqa: A002
        """Overwrite with samples of U[a, b) from `generator` or the backend's stream."""
        _float_draws("uniform_", self.dtype)
        _check_uniform(self.dtype, a, b)
        draw = rand(*self.shape, generator=generator, dtype=self.dtype, backend=self.backend)
        if self.dtype != np.float16:
            return self.copy_(draw._data * (b - a) + a)
        # float16: scaled in float32, and a value rounded up onto b put just below it
        values = (draw._data.astype(np.float32) * (b - a) + a).astype(np.float16)
        below = np.nextafter(np.float16(b), np.float16(-np.inf))
        return self.copy_(self.backend.xp.where(values >= b, below, values))

    # torch's other random fills and bernoulli as methods. Each draws from uniform or normal
    # draws of `generator` (or the backend's stream), which NumPy's and CuPy's streams both
    # have, and writes them with copy_ (cast to this tensor's dtype), as normal_ does.

    def bernoulli(self, p=None, *, generator=None):
        """ta.bernoulli(self, p): 1 with probability self's entries (or p), in self's dtype."""
        return bernoulli(self, p, generator=generator)

    def multinomial(self, num_samples, replacement=False, *, generator=None):
        """ta.multinomial(self, ...): category indices drawn from this tensor's rows."""
        return multinomial(self, num_samples, replacement, generator=generator)

    def bernoulli_(self, p=0.5, *, generator=None):
        """Overwrite with 1 with probability p (a number, or a tensor broadcast to this one's
        shape), else 0; any dtype, as torch's."""
        probs = p._data if isinstance(p, Tensor) else p
        if not self.backend.xp.all((probs >= 0) & (probs <= 1)):  # (NaN fails too)
            raise ValueError(f"bernoulli_: p must be in [0, 1], got {p}")
        u = self._uniform_draws("bernoulli_", generator)
        return self.copy_(u < probs)

    def exponential_(self, lambd=1.0, *, generator=None):
        """Overwrite with samples of Exponential(lambd) (mean 1 / lambd)."""
        _float_draws("exponential_", self.dtype)
        if not lambd > 0:
            raise ValueError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
        return self.copy_(-self.backend.xp.log1p(-self._uniform_draws("exponential_",
                                                                      generator)) / lambd)

    def geometric_(self, p, *, generator=None):
        """Overwrite with the number of trials (1, 2, ...) up to the first success of chance p."""
        if not 0 < p < 1:
            raise ValueError(f"geometric_: expects p to be in (0, 1), but got p={p}")
        u = self._uniform_draws("geometric_", generator)  # 1 - u in (0, 1]: log finite
        trials = self.backend.xp.ceil(self.backend.xp.log1p(-u) / math.log1p(-p))
        return self.copy_(self.backend.xp.maximum(trials, 1))

    def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
        """Overwrite with exp of samples of N(mean, std²)."""
        _float_draws("log_normal_", self.dtype)
        if not std > 0:
            raise ValueError(f"log_normal_: expects std > 0.0, but found std={std}")
        z = rng_of(self.backend, check_generator(generator, self.backend, "log_normal_")
                   ).standard_normal(self.shape)
        return self.copy_(self.backend.xp.exp(mean + std * z))

    def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
        """Overwrite with samples of Cauchy(median, sigma)."""
        _float_draws("cauchy_", self.dtype)
        if not sigma > 0:
            raise ValueError(f"cauchy_: expects sigma > 0.0, but found sigma={sigma}")
        u = self._uniform_draws("cauchy_", generator)
        return self.copy_(median + sigma * self.backend.xp.tan(math.pi * (u - 0.5)))

    def random_(self, from_=0, to=None, *, generator=None, **kwargs):
        """Overwrite with integers drawn uniformly from [from, to): random_(to) from 0;
        random_() from 0 up to the dtype's largest exact integer (2**24 for float32, the
        largest int for integers, 0 or 1 for bools), as torch's."""
        from_ = kwargs.pop("from", from_)  # (torch's keyword is `from`)
        if kwargs:
            raise TypeError(f"random_: unexpected keywords {sorted(kwargs)}")
        if to is None and from_ != 0:  # random_(to)
            from_, to = 0, from_
        if to is None:  # inclusive tops, as torch's
            kind = self.dtype.kind
            top = (1 if kind == "b" else 2 ** (np.finfo(self.dtype).nmant + 1) if kind == "f"
                   else int_range(self.dtype)[1])
            to = top + 1
        if not from_ < to:
            raise ValueError(f"random_: expects 'from' to be less than 'to', but got "
                             f"from={from_} >= to={to}")
        rng = rng_of(self.backend, check_generator(generator, self.backend, "random_"))
        hi = min(to, 2**63)  # (int64's draws: uint64 tensors' top half is never drawn)
        return self.copy_(rng.integers(from_, hi - 1, size=self.shape, dtype=np.int64,
                                       endpoint=True))

    def _uniform_draws(self, name, generator):
        """float64 draws in [0, 1) of this tensor's shape, on its backend."""
        return rng_of(self.backend, check_generator(generator, self.backend, name)
                      ).random(self.shape)

    def any(self, dim=None, keepdim=False):
        """Whether any entry (over dim) is nonzero: a bool tensor (uint8 for a uint8 tensor,
        as torch's)."""
        axes = _axes(dim, self.ndim, "any")
        return _values("any", _truth, self, how="any", axis=axes,
                       keepdims=_flag("any", "keepdim", keepdim))

    def all(self, dim=None, keepdim=False):
        """Whether every entry (over dim) is nonzero: a bool tensor (uint8 for uint8)."""
        axes = _axes(dim, self.ndim, "all")
        return _values("all", _truth, self, how="all", axis=axes,
                       keepdims=_flag("all", "keepdim", keepdim))

    # ---- unary functions -----------------------------------------------------------------------

    def exp(self):
        return apply_tensor(ew.exp, self)

    def log(self):
        return apply_tensor(ew.log, self)

    def sqrt(self):
        return apply_tensor(ew.sqrt, self)

    def tanh(self):
        return apply_tensor(ew.tanh, self)

    def sigmoid(self):
        return apply_tensor(ew.sigmoid, self)

    def relu(self):
        return apply_tensor(ew.relu, self)

    def hardshrink(self, lambd=0.5):
        return apply(act.hardshrink, self, lambd=plain(lambd, "hardshrink"))

    def prelu(self, weight):
        return apply(act.prelu, self, self._other(weight))

    def abs(self):
        return apply_tensor(ew.absolute, self)

    def pow(self, exponent):
        return self**exponent

    # in place (see _in_place): x.exp_() makes x exp(x) in its own memory

    relu_, sigmoid_, tanh_ = _in_place_unary(ew.relu), _in_place_unary(ew.sigmoid), \
        _in_place_unary(ew.tanh)
    exp_, log_, sqrt_, abs_ = (_in_place_unary(ew.exp), _in_place_unary(ew.log),
                               _in_place_unary(ew.sqrt), _in_place_unary(ew.absolute))
    neg_, square_, reciprocal_, rsqrt_ = (_in_place_unary(ew.neg), _in_place_unary(pw.square),
                                          _in_place_unary(pw.reciprocal), _in_place_unary(pw.rsqrt))
    floor_, ceil_, trunc_, sign_ = (_in_place_unary(pw.floor), _in_place_unary(pw.ceil),
                                    _in_place_unary(pw.trunc), _in_place_unary(pw.sign))
    sgn_ = sign_
    sin_, cos_, log1p_, expm1_ = (_in_place_unary(pw.sin), _in_place_unary(pw.cos),
                                  _in_place_unary(pw.log1p), _in_place_unary(pw.expm1))
    tan_, asin_, acos_, atan_ = (_in_place_unary(pw.tan), _in_place_unary(pw.asin),
                                 _in_place_unary(pw.acos), _in_place_unary(pw.atan))
    sinh_, cosh_, asinh_, acosh_, atanh_ = (
        _in_place_unary(pw.sinh), _in_place_unary(pw.cosh), _in_place_unary(pw.asinh),
        _in_place_unary(pw.acosh), _in_place_unary(pw.atanh))
    exp2_, log2_, log10_, erf_, frac_ = (_in_place_unary(pw.exp2), _in_place_unary(pw.log2),
                                         _in_place_unary(pw.log10), _in_place_unary(pw.erf),
                                         _in_place_unary(pw.frac))
    negative_, absolute_, fix_ = neg_, abs_, trunc_
    arcsin_, arccos_, arctan_, arcsinh_, arccosh_, arctanh_ = (asin_, acos_, atan_, asinh_,
                                                                acosh_, atanh_)

    def clamp_min_(self, min):  # noqa: A002
        return self.clamp_(min=min)

    def clamp_max_(self, max):  # noqa: A002
        return self.clamp_(max=max)

    def masked_fill_(self, mask, value):
        """masked_fill, written into this tensor."""
        if isinstance(value, Tensor):
            mask = _cond(mask, self)
            return self._in_place_as("masked_fill_", lambda x: x._fill_with_tensor(
                "masked_fill_", mask, value), value)
        value = ix.fill_value(value, self.dtype, "masked_fill_")
        return self._in_place("masked_fill_", masked_fill, _cond(mask, self), value=value)

    def maximum(self, other):
        return apply(ew.maximum, self, self._other(other))

    def minimum(self, other):
        return apply(ew.minimum, self, self._other(other))

    def clip(self, min=None, max=None):  # noqa: A002 - PyTorch's argument names
        """x limited to [min, max]; the bounds are numbers or tensors (which broadcast)."""
        min, max = _clamp_bounds(min, max, "clamp")  # noqa: A001
        if isinstance(min, Tensor) or isinstance(max, Tensor):
            return apply(pw.clamp, self, min if min is None else self._other(min),
                         max if max is None else self._other(max))
        x = self
        if self.dtype.kind != "f":
            if any(isinstance(b, float) for b in (min, max)):
                x = self.to(get_default_dtype())  # torch: an int tensor clamped to 0.5 is float
            else:
                min, max = _int_bounds(self.dtype, min, max, "clamp")  # noqa: A001
        return apply(ew.clip, x, min=min, max=max)

    clamp = clip

    def where(self, condition, other):
        """self where condition else other (PyTorch's Tensor.where)."""
        return apply(ew.where, _cond(condition, self), self, self._other(other))

    # ---- reductions (dim/keepdim, or NumPy's axis/keepdims) --------------------------------------

    def sum(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
        """Σ over dim (integers and bools in int64, as torch); with dtype, of the tensor cast
        to it first, and in that dtype (torch's `dtype=`: int8 wraps, bool is any())."""
        if dtype is None:
            return apply(rd.reduce_sum, self,
                         **_reduce_args(dim, keepdim, axis, keepdims, "sum"))
        return _in_dtype(apply(rd.reduce_sum, self.to(dtype),
                               **_reduce_args(dim, keepdim, axis, keepdims, "sum")), dtype)

    def mean(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
        """The mean over dim; with dtype, of the tensor cast to it first."""
        x = self if dtype is None else self.to(dtype)
        return apply(rd.reduce_mean, x, **_reduce_args(dim, keepdim, axis, keepdims, "mean"))

    def max(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """The largest value; with a dim, the named pair (values, indices) as in torch; with a
        tensor, the elementwise maximum (torch.max(x, other))."""
        return self._extreme(rd.reduce_max, "max", self.maximum, dim, keepdim, axis, keepdims)

    def min(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """The smallest value; with a dim, the named pair (values, indices); with a tensor, the
        elementwise minimum."""
        return self._extreme(rd.reduce_min, "min", self.minimum, dim, keepdim, axis, keepdims)

    def _extreme(self, op, name, elementwise, dim, keepdim, axis, keepdims):
        if isinstance(dim, Tensor):
            return elementwise(dim)
        args = _reduce_args(dim, keepdim, axis, keepdims, name)
        if args["dim"] is None:
            _keepdim_needs_dim(name, args["keepdim"])
            return apply(op, self)
        if not isinstance(args["dim"], int):
            raise TypeError(f"{name}: dim must be one int (torch's rule), got {args['dim']!r}; "
                            f"for several dims use a{name}(dim=...)")
        dim, keepdim = args["dim"], args["keepdim"]
        if self.ndim == 0:
            _axes(dim, 0, name)
            index = self._arg(self.backend.xp.argmax, dim, keepdim, name)  # 0, a 0-d int64
            return getattr(return_types, name)(self.clone(), index)
        axis = _axis(dim, self.ndim, name)
        if self.shape[axis] == 0:
            raise DimError(f"{name}: dim {dim} of a tensor of shape {fmt_shape(self.shape)} is "
                           "empty, so it has no largest or smallest entry")
        xp = self.backend.xp
        indices = self._arg(xp.argmax if name == "max" else xp.argmin, axis, True, name)
        # the values are picked at the indices, so the gradient goes to that one entry (torch)
        values = apply(sh.take_along_dim, self, indices, dim=axis)
        if not keepdim:
            values, indices = values.squeeze(axis), indices.squeeze(axis)
        return getattr(return_types, name)(values, indices)

    def amax(self, dim=None, keepdim=False):
        """The largest values over one dim or several (values only; tied entries share the
        gradient evenly, as in torch.amax and in max() without a dim)."""
        return apply(rd.reduce_max, self, **_reduce_args(dim, keepdim, None, None, "amax"))

    def amin(self, dim=None, keepdim=False):
        """The smallest values over one dim or several."""
        return apply(rd.reduce_min, self, **_reduce_args(dim, keepdim, None, None, "amin"))

    def sort(self, dim=-1, descending=False, stable=False):
        """The named pair (values, indices) sorted along dim; ties keep their order, NaN counts
        as the largest value (as in torch)."""
        _flag("sort", "descending", descending)
        _flag("sort", "stable", stable)
        indices = self.argsort(dim, descending)
        return return_types.sort(self._along(indices, dim), indices)

    def argsort(self, dim=-1, descending=False, stable=False):
        """The indices that sort the tensor along dim (stable: ties keep their order)."""
        descending = _flag("argsort", "descending", descending)
        _flag("argsort", "stable", stable)
        xp = self.backend.xp
        if self.ndim == 0:
            _axes(dim, 0, "argsort")
            return Tensor._wrap(xp.zeros((), dtype=np.int64), self.backend)
        axis = _axis(dim, self.ndim, "argsort")
        return _values("argsort", _argsort, self, axis=axis, descending=descending,
                       backend=self.backend)

    def topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - PyTorch's names
        """The named pair (values, indices) of the k largest (or smallest) entries along dim."""
        _refuse_bool("topk", self)
        largest = _flag("topk", "largest", largest)
        _flag("topk", "sorted", sorted)  # (the k come sorted either way, as torch's on CPU)
        k = _int_of(k)
        n = self.shape[_axis(dim, self.ndim, "topk")] if self.ndim else 1
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 0 <= k <= n:
            raise DimError(f"topk: k must be an int in 0..{n} for dim {dim} of a tensor of "
                           f"shape {fmt_shape(self.shape)}, got {k!r}")
        order = self.argsort(dim, descending=largest)
        if self.ndim:
            order = order[(slice(None),) * _axis(dim, self.ndim, "topk") + (slice(0, k),)]
        return return_types.topk(self._along(order, dim), order)

    def _along(self, indices, dim):
        """self's values at `indices` along dim (differentiable: take_along_dim)."""
        if self.ndim == 0:
            return self.clone()
        return apply(sh.take_along_dim, self, indices, dim=dim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
            keepdims=None):
        """The variance over dim with torch's arguments: x.var(1, False) is the biased one
        (unbiased=False, i.e. correction=0), x.var(False) over every entry; unbiased and
        correction together are refused, as torch (which one would win?)."""
        if isinstance(dim, bool):  # torch's var(unbiased)
            dim, unbiased = None, dim
        correction = _correction("var", unbiased, correction)
        return apply(rd.reduce_var, self, correction=correction,
                     **_reduce_args(dim, keepdim, axis, keepdims, "var"))

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
            keepdims=None):
        """The standard deviation, var().sqrt(), with torch's gradient: 0 (not 0 * inf) where
        the variance is 0, a constant slice."""
        if isinstance(dim, bool):  # torch's std(unbiased)
            dim, unbiased = None, dim
        correction = _correction("std", unbiased, correction)
        x = self.float() if self.dtype == np.float16 else self  # var past 65504, std within it
        v = x.var(dim, None, keepdim, correction=correction, axis=axis, keepdims=keepdims)
        if v._node is None:  # no gradient to take care of
            out = v.sqrt()
        else:  # sqrt's gradient is inf at 0: take the root of 1 there (and give 0 back)
            zero = v == 0
            out = apply(ew.where, zero, 0, apply(ew.where, zero, 1, v).sqrt())
        return out.half() if x is not self else out

    def logsumexp(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return apply(rd.logsumexp, self,
                     **_reduce_args(dim, keepdim, axis, keepdims, "logsumexp"))

    def argmax(self, dim=None, keepdim=False):
        _refuse_bool("argmax", self)
        return self._arg(self.backend.xp.argmax, dim, keepdim, "argmax")

    def argmin(self, dim=None, keepdim=False):
        _refuse_bool("argmin", self)
        return self._arg(self.backend.xp.argmin, dim, keepdim, "argmin")

    def _arg(self, fn, dim, keepdim, name):
        keepdim = _flag(name, "keepdim", keepdim)
        if dim is None:  # the index into the flattened tensor (kept dims: all 1, as in torch)
            return _values(name, _flat_arg, self, find=fn, keepdim=keepdim)
        if self.ndim == 0:  # a 0-d tensor has one implicit dim, as in torch
            _axes(dim, 0, name)
            return _values(name, _flat_arg, self, find=fn, keepdim=False)
        axis = _axis(dim, self.ndim, name)
        return _values(name, fn, self, axis=axis, keepdims=keepdim)

    # ---- softmax and masking -------------------------------------------------------------------

    def softmax(self, dim=None, dtype=None, *, axis=None):
        """softmax over dim, which torch's Tensor.softmax needs: one int (no default)."""
        x = _softmax_input(self, dtype, "softmax")
        return apply(sm.softmax, x, dim=_one_dim("softmax", dim if axis is None else axis))

    def log_softmax(self, dim=None, dtype=None, *, axis=None):
        """log_softmax over dim, which torch's Tensor.log_softmax needs: one int (no default)."""
        x = _softmax_input(self, dtype, "log_softmax")
        dim = _one_dim("log_softmax", dim if axis is None else axis)
        return apply(sm.log_softmax, x, dim=dim)

    def masked_fill(self, mask, value):
        """value where mask (bool, True = fill) else self; masked entries get no gradient. A
        0-d tensor value gets the gradient of every entry it fills (as torch). A mask with more
        dims than self makes the result their broadcast shape (torch's; masked_fill_ refuses)."""
        mask = _cond(mask, self)
        if isinstance(value, Tensor):
            return self._with_mask_shape("masked_fill", mask)._fill_with_tensor(
                "masked_fill", mask, value)
        try:  # the op takes a mask that broadcasts to x: the common case, at no extra cost
            return apply(masked_fill, self, mask, value=value)
        except ShapeError:  # a mask with more (or longer) dims: x broadcasts to it first
            return apply(masked_fill, self._with_mask_shape("masked_fill", mask), mask,
                         value=value)

    def _fill_with_tensor(self, name, mask, value):
        """masked_fill with a 0-d tensor value: where(mask, value, self), value in self's
        dtype, so that the value's gradient flows (masked_fill's op takes a number)."""
        if value.ndim != 0:
            raise ShapeError(f"{name}: the value must be a number or a 0-d tensor, got a "
                             f"tensor of shape {fmt_shape(value.shape)}")
        if mask.dtype != np.bool_:
            raise DTypeError(f"{name}: the mask must be bool, got {mask.dtype} (to add a float "
                             "mask, write x + mask)")
        if not broadcasts_to(mask.shape, self.shape):
            raise ShapeError(f"{name}: mask {fmt_shape(mask.shape)} does not broadcast to x "
                             f"{fmt_shape(self.shape)}")
        return apply(ew.where, mask, value if value.dtype == self.dtype else value.to(self.dtype),
                     self)

    # ---- shape -----------------------------------------------------------------------------------

    def reshape(self, *shape):
        """The same values in another shape: a view where the memory allows (a same-shape one
        too: a new tensor with a node of its own, as torch's), else a copy."""
        out = apply(sh.reshape, self, shape=_shape_args(shape, "reshape"))
        v = out._version_counter  # (none, or another than self's: not a view, see _viewed)
        if (v is None or v is not self._version_counter) and isinstance(self._data, np.generic):
            return _viewed(self, sh.reshape, shape=out.shape)  # (a 0-d op result's scalar)
        return out

    def view(self, *shape, dtype=None):
        """The same memory seen in another shape: writes into either reach the other. Where
        the memory cannot be read in that shape (a transpose's, say), an error as in torch:
        reshape() copies then. view(dtype) reads the same bytes as another dtype (torch's;
        no gradient)."""
        if dtype is None:
            try:
                shape = _shape_args(shape, "view")
            except TypeError:
                if len(shape) != 1 or shape[0] is None or isinstance(shape[0], numbers.Number):
                    raise
                dtype = shape[0]  # view(tinyattn.int32)
            else:
                out = apply(sh.reshape, self, shape=shape)
                v = out._version_counter  # (none, or another than self's: not a view)
                if v is None or v is not self._version_counter:
                    if isinstance(self._data, np.generic):  # (a 0-d op result's scalar)
                        return _viewed(self, sh.reshape, shape=out.shape)
                    if not self._data.flags.c_contiguous:
                        _refuse_copying_view(self, out.shape)  # (NumPy copied: torch refuses)
                return out
        elif shape:
            raise TypeError(f"view: takes a shape or a dtype, not both (got {shape} and "
                            f"dtype={dtype!r})")
        return self._view_dtype(dtype)

    def _view_dtype(self, dtype):
        """view(dtype): the same bytes as `dtype`; with another item size the last dim grows
        or shrinks by the ratio, as torch's (it must then be contiguous)."""
        try:
            dtype = as_dtype(dtype)
        except TypeError:
            raise DTypeError(f"view: {dtype!r} is neither a shape nor a dtype") from None
        if dtype.kind not in "biuf":
            raise DTypeError(f"view: tensors hold numbers and bools, not {dtype}")
        old, new = self.dtype.itemsize, dtype.itemsize
        if old != new:
            shown = f"{self.dtype} {fmt_shape(self.shape)} as {dtype} (a different item size)"
            if self.ndim == 0:
                raise ShapeError(f"view: cannot view a 0-d tensor of {shown}")
            if self.shape[-1] != 1 and self._data.strides[-1] != old:
                raise ShapeError(f"view: cannot view {shown}: its last dim must be contiguous "
                                 "(stride 1); call .contiguous() first")
            if (self.shape[-1] * old) % new:
                raise ShapeError(f"view: cannot view {shown}: the last dim's {self.shape[-1]} "
                                 f"entries of {old} bytes do not split into {new}-byte ones")
        out = _values("view_dtype", _reinterpret, self, dtype=dtype)
        share_version(self, out, differentiable=False)  # (as torch's: no _base)
        return out

    def flatten(self, start_dim=0, end_dim=-1):
        """Dims start_dim..end_dim joined into one; a 0-d tensor becomes (1,) (its one implicit
        dim is 0 or -1), as torch. One dim (start_dim == end_dim, a 1-D tensor's flatten()):
        this tensor itself, as torch's (not a view of it)."""
        if self.ndim == 0:
            _axes(start_dim, 0, "flatten")  # (an error for any other dim)
            _axes(end_dim, 0, "flatten")
            return self.reshape(1)
        s = _axis(start_dim, self.ndim, "flatten")
        e = _axis(end_dim, self.ndim, "flatten")
        if s > e:  # (a reshape would read it as nothing to join, and insert a dim)
            raise DimError(f"flatten: start_dim {start_dim} cannot come after end_dim {end_dim} "
                           f"(dims {s} and {e} of a tensor of shape {fmt_shape(self.shape)})")
        if s == e:
            return self
        joined = math.prod(self.shape[s:e + 1])  # (not -1: no elements leave it unsolved)
        return self.reshape(self.shape[:s] + (joined,) + self.shape[e + 1:])

    def unsqueeze(self, dim):
        return self.reshape(self._unsqueezed(dim, "unsqueeze"))

    def unsqueeze_(self, dim):
        """unsqueeze, in place: this tensor gets a dim of size 1 at dim (see _in_place_view)."""
        return self._in_place_view("unsqueeze_", sh.reshape,
                                   shape=self._unsqueezed(dim, "unsqueeze_"))

    def _unsqueezed(self, dim, name):
        axis = _axis(dim, self.ndim + 1, name)
        return self.shape[:axis] + (1,) + self.shape[axis:]

    def squeeze(self, dim=None):
        return self.reshape(self._squeezed(dim, "squeeze"))

    def squeeze_(self, dim=None):
        """squeeze, in place: this tensor loses its dims of size 1 (all, or those in dim)."""
        return self._in_place_view("squeeze_", sh.reshape, shape=self._squeezed(dim, "squeeze_"))

    def _squeezed(self, dim, name):
        if dim is None:
            return tuple(n for n in self.shape if n != 1)
        axes = set(_axes(dim, self.ndim, name))
        return tuple(n for i, n in enumerate(self.shape) if not (i in axes and n == 1))

    def permute(self, *dims):
        dims = tuple(_axis(d, self.ndim, "permute") for d in _shape_args(dims, "permute"))
        return apply(sh.permute, self, dims=dims) if dims else _viewed(self, sh.permute, dims=())

    def transpose(self, dim0, dim1):
        dims = self._swapped(dim0, dim1, "transpose")
        return _viewed(self, sh.permute, dims=()) if dims is None else \
            apply(sh.permute, self, dims=dims)

    def transpose_(self, dim0, dim1):
        """transpose, in place: this tensor with dims dim0 and dim1 swapped (see
        _in_place_view)."""
        return self._in_place_view("transpose_", sh.permute,
                                   dims=self._swapped(dim0, dim1, "transpose_") or ())

    def _swapped(self, dim0, dim1, name):
        """The permutation that swaps dims dim0 and dim1; None for a 0-d tensor, whose one
        implicit dim (0 or -1) swaps with itself, as torch (any other dim is an error)."""
        dims = list(range(self.ndim))
        try:
            a, b = _axis(dim0, self.ndim, name), _axis(dim1, self.ndim, name)
        except DimError:
            if self.ndim:
                raise
            self._same_0d(name, dim0, dim1)
            return None
        dims[a], dims[b] = dims[b], dims[a]
        return tuple(dims)

    def _same_0d(self, name, *dims):
        """A view of this 0-d tensor, for a movedim of its one implicit dim (0 or -1) to
        itself, as torch's (a new tensor); any other dim is out of range."""
        for d in dims:
            for one in d if isinstance(d, (tuple, list)) else (d,):
                _axes(one, 0, name)
        return _viewed(self, sh.permute, dims=())

    @property
    def T(self):  # noqa: N802 - PyTorch's name
        n = self.ndim
        return apply(sh.permute, self, dims=tuple(range(n - 1, -1, -1))) if n else \
            _viewed(self, sh.permute, dims=())

    @property
    def mT(self):  # noqa: N802 - PyTorch's name
        """The last two dims swapped (a batch of matrices transposed); as torch, a 1-D tensor
        is an error and a 0-d one itself, with torch's deprecation warning."""
        if self.ndim < 2:
            if self.ndim == 0:
                warn_user("Tensor.mT is deprecated on 0-D tensors. This function is the "
                          "identity in these cases.", UserWarning)
                return self
            raise ShapeError(f"mT: takes matrices or batches of matrices (at least 2 dims), got "
                             f"a tensor of shape {fmt_shape(self.shape)}; for a 1-D tensor, .T "
                             "or the tensor itself")
        return self.transpose(-2, -1)

    @property
    def mH(self):  # noqa: N802 - PyTorch's name
        """The conjugate transpose of a batch of matrices: for a real tensor (tinyattn has no
        other) mT, with torch's errors and 0-d warning naming mH."""
        return self._adjoint("tensor.mH")

    def adjoint(self):
        """mH as a method (torch's Tensor.adjoint)."""
        return self._adjoint("adjoint()")

    @property
    def H(self):  # noqa: N802 - PyTorch's name
        """The conjugate transpose of a matrix (2-D; 0-d is itself, with torch's warning): for
        a real tensor .T; a batch of matrices is refused, as torch (use mH)."""
        if self.ndim == 1 or self.ndim > 2:
            raise ShapeError(f"tensor.H is only supported on matrices (2-D tensors). Got a "
                             f"{self.ndim}-D tensor of shape {fmt_shape(self.shape)}"
                             + (": for batches of matrices, use tensor.mH" if self.ndim > 2
                                else ""))
        return self._adjoint("tensor.H")

    def _adjoint(self, name):
        if self.ndim == 0:
            warn_user(f"{name} is deprecated on 0-D tensors. Consider using x.conj().",
                      UserWarning)
            return self
        if self.ndim == 1:
            raise ShapeError(f"{name} is only supported on matrices or batches of matrices. "
                             f"Got a 1-D tensor of shape {fmt_shape(self.shape)}")
        return self.transpose(-2, -1)

    def expand(self, *sizes):
        sizes = _shape_args(sizes, "expand")
        lead = len(sizes) - self.ndim
        if lead > 0 and -1 in sizes[:lead]:
            raise ShapeError(f"expand: -1 (keep the size) at dim {sizes.index(-1)} of "
                             f"{fmt_shape(sizes)}, a new leading dim that the tensor "
                             f"{fmt_shape(self.shape)} does not have; give its size")
        shape = tuple(self.shape[i - lead] if n == -1 else n for i, n in enumerate(sizes))
        if not shape:  # (a 0-d op result's NumPy scalar becomes an array, for a view of it)
            return _viewed(self, sh.expand, shape=shape)
        return apply(sh.expand, self, shape=shape)  # (the same shape: a view too, as torch's)

    def sum_to_size(self, *size):
        """This tensor summed down to `size`, which must expand to its shape (as torch's): the
        leading dims it lacks summed away, the dims where it has 1 summed with keepdim."""
        target = _sizes(size, "sum_to_size")
        lead = self.ndim - len(target)
        if lead < 0 or any(t not in (s, 1) for t, s in zip(target, self.shape[lead:],
                                                            strict=True)):
            raise ShapeError(f"sum_to_size: this tensor's shape {fmt_shape(self.shape)} cannot "
                             f"be summed to size {fmt_shape(target)} (the size must expand to "
                             "the shape)")
        out = self.sum(dim=tuple(range(lead))) if lead else self
        dims = tuple(i for i, (t, s) in enumerate(zip(target, out.shape, strict=True))
                     if t == 1 and s != 1)
        return out.sum(dim=dims, keepdim=True) if dims else out

    def expand_as(self, other):
        return self.expand(other.shape)

    def broadcast_to(self, *shape):
        """expand(shape): broadcast_to((2, 3)) and broadcast_to(2, 3) alike (a view)."""
        return self.expand(*shape)

    def ravel(self):
        """The entries as a 1-D tensor: a view where the memory allows, else a copy (reshape)."""
        return self.reshape(-1)

    def __getitem__(self, index):
        parts = _index(index, self.backend)
        steps = _index_steps(_no_empty_ellipsis(parts, self.ndim))
        out = self
        try:
            for step in steps:
                out = apply(sh.getitem, out, index=step)
        except IndexError:
            _check_masks(parts, self.shape, "getitem")  # (a clearer error, where a mask is off)
            raise
        v = out._version_counter  # (none, or another than self's: not a view, see _viewed)
        if (v is None or v is not self._version_counter) and isinstance(self._data, np.generic) \
                and steps:
            self._data = np.array(self._data)  # (a 0-d op result's scalar: x[...] views it)
            return self[index]
        return out

    def __setitem__(self, index, value):
        """x[index] = value, in place (see _in_place); value broadcasts and takes x's dtype."""
        parts = _index(index, self.backend, "setitem")
        steps = _index_steps(_no_empty_ellipsis(parts, self.ndim))
        if isinstance(value, (list, tuple)):
            value = _fresh(value, backend=self.backend)
        elif isinstance(value, numbers.Number):
            value = _setitem_number(value, self.dtype)
        elif not isinstance(value, Tensor):  # an array
            value = Tensor._wrap(self.backend.asarray(value), self.backend)

        def write():
            v = value._data if isinstance(value, Tensor) else value
            if getattr(v, "dtype", self.dtype) == self.dtype:
                sh._place(self._writable("setitem"), steps)[steps[-1]] = v
                return
            with quiet():  # (float32 past 65504 into float16: inf, silently as torch)
                sh._place(self._writable("setitem"), steps)[steps[-1]] = v

        try:
            self._in_place("setitem", sh.setitem, value, steps=steps, write=write)
        except (IndexError, ValueError) as e:
            if isinstance(e, IndexError):
                _check_masks(parts, self.shape, "setitem")
            if isinstance(e, (DimError, ShapeError, GraphError)):
                raise
            kind = DimError if isinstance(e, IndexError) else ShapeError
            shown = fmt_shape(value.shape) if isinstance(value, Tensor) else repr(value)
            raise kind(f"setitem: index {_index_shown(index)} into a tensor of shape "
                       f"{fmt_shape(self.shape)} (value {shown}): {e}") from None

    def _writable(self, name):
        """This tensor's array, ready to be written into (a 0-d NumPy scalar becomes an array)."""
        if isinstance(self._data, np.generic):
            self._data = np.array(self._data)
        if views.overlaps(self._data):
            raise GraphError(f"{name}: {views.OVERLAP} (a tensor of shape {fmt_shape(self.shape)} "
                             f"and strides {self.stride()}: an expand() view, read-only); "
                             "change a .clone() of it instead")
        if not getattr(self._data.flags, "writeable", True):
            raise GraphError(f"{name}: this tensor's memory is read-only (an expand() view, or a "
                             "read-only array); change a .clone() of it instead")
        return self._data

    def split(self, split_size_or_sections, dim=0):
        """Pieces of `split_size` along dim (the last may be smaller), or of the given sizes."""
        axis = _axis(dim, self.ndim, "split")
        n, split_size_or_sections = self.shape[axis], _int_of(split_size_or_sections)
        _no_bools("split", "split_size_or_sections", (split_size_or_sections,))
        if isinstance(split_size_or_sections, (int, np.integer)):
            step = int(split_size_or_sections)
            if step < 0 or step == 0 < n:
                raise ValueError(f"split: split_size must be > 0 (0 only for an empty dim), got "
                                 f"{step} for dim {axis} of size {n}")
            sizes = [min(step, n - s) for s in range(0, n, step)] if n else [0]
        else:
            sizes = _int_list("split", "split_size_or_sections", split_size_or_sections)
            if sizes and min(sizes) < 0:
                raise ValueError(f"split: sizes must be >= 0, got {sizes}")
            if sum(sizes) != n:
                raise ValueError(f"split: sizes {sizes} add up to {sum(sizes)}, not to the "
                                 f"{n} entries of dim {axis}")
        pieces, start = [], 0
        for size in sizes:
            pieces.append(self[(slice(None),) * axis + (slice(start, start + size),)])
            start += size
        return views.several(tuple(pieces), "split")  # (torch's multi-output views)

    def chunk(self, chunks, dim=0):
        """At most `chunks` pieces of equal size along dim (the last may be smaller); an
        empty dim gives `chunks` empty pieces (as torch)."""
        axis, chunks = _axis(dim, self.ndim, "chunk"), _int_of(chunks)
        if not isinstance(chunks, (int, np.integer)) or isinstance(chunks, bool):
            raise TypeError(f"chunk: chunks must be an int, got {type(chunks).__name__} "
                            f"{chunks!r}")
        if chunks <= 0:
            raise ValueError(f"chunk: chunks must be > 0, got {chunks} (for dim {axis} of a "
                             f"tensor of shape {fmt_shape(self.shape)})")
        n = self.shape[axis]
        if n == 0:
            return views.several(tuple(self[(slice(None),) * axis + (slice(0, 0),)]
                                       for _ in range(chunks)), "split")
        return self.split(-(-n // chunks), dim)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # ---- the everyday toolkit: torch's pointwise math, scans, selection (ops/pointwise.py,
    # ops/activation.py, ops/scan.py; the bool results below never require grad) -------------

    sin, cos, tan = _unary(pw.sin), _unary(pw.cos), _unary(pw.tan)
    asin, acos, atan = _unary(pw.asin), _unary(pw.acos), _unary(pw.atan)
    arcsin, arccos, arctan = asin, acos, atan
    sinh, cosh, asinh, acosh, atanh = (_unary(pw.sinh), _unary(pw.cosh), _unary(pw.asinh),
                                       _unary(pw.acosh), _unary(pw.atanh))
    arcsinh, arccosh, arctanh = asinh, acosh, atanh
    exp2, expm1, log2, log10, log1p = (_unary(pw.exp2), _unary(pw.expm1), _unary(pw.log2),
                                       _unary(pw.log10), _unary(pw.log1p))
    erf, square, rsqrt, reciprocal = (_unary(pw.erf), _unary(pw.square), _unary(pw.rsqrt),
                                      _unary(pw.reciprocal))
    floor, ceil, trunc, sign, frac = (_unary(pw.floor), _unary(pw.ceil), _unary(pw.trunc),
                                      _unary(pw.sign), _unary(pw.frac))
    fix = trunc
    sgn = sign  # (torch's sgn: sign for real tensors, which are all tinyattn has)

    def round(self, decimals=0):
        return apply(pw.round_even, self, decimals=decimals)

    def atan2(self, other):
        return apply(pw.atan2, self, self._other(other))

    arctan2 = atan2

    def logaddexp(self, other):
        _refuse_bool("logaddexp", self, other)
        return apply(pw.logaddexp, self, self._other(other))

    def hypot(self, other):
        _refuse_bool("hypot", self, other)
        return apply(pw.hypot, self, self._other(other))

    def copysign(self, other):
        return apply(pw.copysign, self, self._other(other))

    def lerp(self, end, weight):
        return apply(pw.lerp, self, self._other(end), self._other(weight))

    def remainder(self, other):
        return apply(pw.remainder, self, self._other(other))

    def fmod(self, other):
        return apply(pw.fmod, self, self._other(other))

    def floor_divide(self, other):
        return apply(pw.floor_divide, self, self._other(other))

    def __mod__(self, other):
        return apply(pw.remainder, self, self._other(other))

    def __rmod__(self, other):
        return apply(pw.remainder, self._other(other), self)

    def __floordiv__(self, other):
        return apply(pw.floor_divide, self, self._other(other))

    def __rfloordiv__(self, other):
        return apply(pw.floor_divide, self._other(other), self)

    def clamp_min(self, min):  # noqa: A002
        return self.clamp(min=min)

    def clamp_max(self, max):  # noqa: A002
        return self.clamp(max=max)

    def isnan(self):
        return _values("isnan", self.backend.xp.isnan, self)

    def isinf(self):
        return _values("isinf", self.backend.xp.isinf, self)

    def isfinite(self):
        return _values("isfinite", self.backend.xp.isfinite, self)

    def isreal(self):
        """All True (a bool tensor of this shape): tinyattn has only real numbers."""
        return _values("isreal", self.backend.xp.isreal, self)

    def is_nonzero(self):
        """Whether the one entry of this tensor is nonzero (NaN is), a Python bool; any other
        number of entries is an error, as torch's."""
        if self.numel() != 1:
            raise ShapeError(f"is_nonzero: a tensor with {self.numel()} entries (shape "
                             f"{fmt_shape(self.shape)}) is ambiguous: only one entry has a truth "
                             "value")
        return bool(self.item() != 0)

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """|self - other| <= atol + rtol |other| elementwise (torch.isclose), a bool tensor.
        A tensor other must have self's dtype, as torch's (float32 against float64 would be
        judged at float64's rounding, not at the precision the values were made in)."""
        if isinstance(other, Tensor) and other.dtype != self.dtype:
            raise DTypeError(f"isclose: self is {self.dtype} {fmt_shape(self.shape)} but other "
                             f"is {other.dtype} {fmt_shape(other.shape)}: torch compares "
                             "tensors of one dtype only; convert one first, e.g. "
                             f"other.to({self.dtype})")
        return _values("isclose", self.backend.xp.isclose, self, other, rtol=rtol, atol=atol,
                       equal_nan=equal_nan)

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def logical_not(self):
        return _values("logical_not", self.backend.xp.logical_not, self)

    def logical_and(self, other):
        return self._compare(other, self.backend.xp.logical_and, "logical_and")

    def logical_or(self, other):
        return self._compare(other, self.backend.xp.logical_or, "logical_or")

    def logical_xor(self, other):
        return self._compare(other, self.backend.xp.logical_xor, "logical_xor")

    def bitwise_not(self):
        return ~self

    def bitwise_and(self, other):
        return self._bits(other, operator.and_, "bitwise_and")

    def bitwise_or(self, other):
        return self._bits(other, operator.or_, "bitwise_or")

    def bitwise_xor(self, other):
        return self._bits(other, operator.xor, "bitwise_xor")

    def bitwise_left_shift(self, other):
        return self._bits(other, lambda a, b: a << b, "bitwise_left_shift")

    def bitwise_right_shift(self, other):
        return self._bits(other, lambda a, b: a >> b, "bitwise_right_shift")

    def __rand__(self, other):
        return self._bits(other, lambda a, b: b & a, "bitwise_and")

    def __ror__(self, other):
        return self._bits(other, lambda a, b: b | a, "bitwise_or")

    def __rxor__(self, other):
        return self._bits(other, lambda a, b: b ^ a, "bitwise_xor")

    def __lshift__(self, other):
        return self.bitwise_left_shift(other)

    def __rshift__(self, other):
        return self.bitwise_right_shift(other)

    def __rlshift__(self, other):
        return self._bits(other, lambda a, b: b << a, "bitwise_left_shift")

    def __rrshift__(self, other):
        return self._bits(other, lambda a, b: b >> a, "bitwise_right_shift")

    def _bits(self, other, fn, name):
        """A bitwise op on integer or bool tensors (and Python ints), as torch allows (but a
        shift of bools by bools: torch has none)."""
        _check_bits(name, self, other)
        if "shift" in name:
            _refuse_bool(name, self, other)
        return self._compare(other, fn, name)

    # scans and more reductions

    def cumsum(self, dim, *, dtype=None):
        """Running sums along dim (integers and bools in int64, as torch); with dtype, of the
        tensor cast to it, in that dtype."""
        if dtype is None:
            return apply(sc.cumsum, self, dim=dim)
        return _in_dtype(apply(sc.cumsum, self.to(dtype), dim=dim), dtype)

    def cumprod(self, dim, *, dtype=None):
        if dtype is None:
            return apply(sc.cumprod, self, dim=dim)
        return _in_dtype(apply(sc.cumprod, self.to(dtype), dim=dim), dtype)

    def logcumsumexp(self, dim):
        if self.dtype.kind != "f":  # (torch has no integer or bool logcumsumexp)
            raise DTypeError(f"logcumsumexp: not implemented for {self.dtype} (torch's rule: "
                             "floating point only); convert with .float() first")
        return apply(sc.logcumsumexp, self, dim=dim)

    def cummax(self, dim):
        """The named pair (values, indices) of the running maximum along dim (ties: the later
        index, as in torch); the gradient goes to the entry each value came from."""
        return self._cum_extreme(dim, "cummax")

    def cummin(self, dim):
        return self._cum_extreme(dim, "cummin")

    def _cum_extreme(self, dim, name):
        xp = self.backend.xp
        if self.ndim == 0:
            _axes(dim, 0, name)
            return getattr(return_types, name)(self.clone(), Tensor._wrap(
                xp.zeros((), dtype=np.int64), self.backend))
        axis = _axis(dim, self.ndim, name)
        indices = _values(name, _running_extreme, self, axis=axis, larger=name == "cummax",
                          backend=self.backend)
        return getattr(return_types, name)(self._along(indices, axis), indices)

    def prod(self, dim=None, keepdim=False, *, dtype=None):
        """Π over dim (integers and bools in int64, as torch); with dtype, of the tensor cast
        to it first, and in that dtype (as sum's)."""
        if dtype is None:
            return apply(rd.reduce_prod, self, dim=dim, keepdim=keepdim)
        return _in_dtype(apply(rd.reduce_prod, self.to(dtype), dim=dim, keepdim=keepdim), dtype)

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        """The vector p-norm over dim (all entries by default; "fro" and None are the 2-norm, as
        torch's), or "nuc" the nuclear norm over two dims (the sum of the singular values); with
        dtype, of the tensor cast to it first (torch's dtype=, e.g. a float32 tensor's norm in
        float64)."""
        if p == "fro" or p is None:
            p = 2
        x = norm_cast("norm", self, dtype)
        if p == "nuc":  # torch's: linalg.matrix_norm's (the method is routines_linalg.py's)
            return x._nuclear_norm(dim, keepdim)
        if isinstance(p, str):
            raise ValueError(f"norm: p={p!r}: Tensor.norm takes a number (2, 1, inf, ...), "
                             "'fro' or 'nuc'")
        return apply(rd.vector_norm, x, ord=p, dim=dim,
                     keepdim=_flag("norm", "keepdim", keepdim))

    def median(self, dim=None, keepdim=False):
        """The lower median, NaN where there is a NaN (as torch); with a dim, the named pair
        (values, indices), the index of the first NaN in a slice with NaNs, the gradient going
        to that entry. Without a dim (NaN for an empty tensor), the entries equal to the median
        share its gradient evenly (the NaNs, when it is NaN), as torch's."""
        _refuse_bool("median", self)
        keepdim = _flag("median", "keepdim", keepdim)
        if dim is None:
            _keepdim_needs_dim("median", keepdim)
            if self.numel() == 0 and self.dtype.kind != "f":
                raise DimError(f"median: an empty {self.dtype} tensor (shape "
                               f"{fmt_shape(self.shape)}) has no median")
            return apply(_MEDIAN_ALL, self)
        return self._picked("median", _median_index, return_types.median, dim, keepdim)

    def kthvalue(self, k, dim=-1, keepdim=False):
        """The named pair (values, indices) of the k-th smallest entry along dim (k from 1)."""
        _refuse_bool("kthvalue", self)
        k = _int_of(k)
        n = self.shape[_axis(dim, self.ndim, "kthvalue")] if self.ndim else 1
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 1 <= k <= n:
            raise DimError(f"kthvalue: k must be an int in 1..{n} for dim {dim} of a tensor of "
                           f"shape {fmt_shape(self.shape)}, got {k!r}")
        if self.ndim == 0:
            return return_types.kthvalue(self.clone(), Tensor._wrap(
                self.backend.xp.zeros((), dtype=np.int64), self.backend))
        axis = _axis(dim, self.ndim, "kthvalue")
        order = self.argsort(axis)
        indices = order[(slice(None),) * axis + (slice(k - 1, k),)]
        values = self._along(indices, axis)
        if not keepdim:
            values, indices = values.squeeze(axis), indices.squeeze(axis)
        return return_types.kthvalue(values, indices)

    def mode(self, dim=-1, keepdim=False):
        """The named pair (values, indices) of the most frequent value along dim (the smallest
        of those tied, at its last place, as torch's); the gradient goes to that entry."""
        return self._picked("mode", _mode_index, _MODE, dim, keepdim)

    def _picked(self, name, index_of, pair, dim, keepdim):
        """median's and mode's (values, indices): index_of(array, axis) picks one entry along
        dim, its value taken from there (so the gradient goes to it); a 0-d tensor is itself,
        at index 0."""
        if self.ndim == 0:
            _axes(dim, 0, name)
            return pair(self.clone(), Tensor._wrap(self.backend.xp.zeros((), dtype=np.int64),
                                                   self.backend))
        axis = _axis(dim, self.ndim, name)
        if self.shape[axis] == 0:
            raise DimError(f"{name}: dim {dim} of a tensor of shape {fmt_shape(self.shape)} is "
                           f"empty, so it has no {name}")
        indices = _values(f"{name}_index", index_of, self, axis=axis, backend=self.backend)
        values = apply(sh.take_along_dim, self, indices, dim=axis)
        if not keepdim:
            values, indices = values.squeeze(axis), indices.squeeze(axis)
        return pair(values, indices)

    # indexing and shape (torch's names; built on getitem, take_along_dim, reshape, permute and
    # the scatter ops, so each has their VJP)

    def gather(self, dim, index, *, sparse_grad=False):
        """out[i][j] = self[index[i][j]][j] (dim 0); index may be smaller outside dim. A 0-d
        tensor takes a 0-d or 1-D index of zeros, as torch's. sparse_grad=True gives the same
        values and a dense gradient (tinyattn has no sparse tensors)."""
        if self.ndim == 0:
            return self._gather_0d(dim, _index_tensor(index, self, "gather"))
        axis = _axis(dim, self.ndim, "gather")
        index = _index_tensor(index, self, "gather")
        if index.ndim != self.ndim or any(n > m for d, (n, m) in enumerate(
                zip(index.shape, self.shape, strict=True)) if d != axis):
            raise ShapeError(f"gather: index {fmt_shape(index.shape)} must have the dims of the "
                             f"input {fmt_shape(self.shape)} and be no larger outside dim {axis}")
        part = tuple(slice(None) if d == axis else slice(0, n)
                     for d, n in enumerate(index.shape))
        x = self[part] if any(n != m for n, m in zip(index.shape, self.shape, strict=True)) \
            else self
        _check_slots("gather", index, self.shape, axis)  # (before the op, which takes -1)
        return apply(sh.take_along_dim, x, index._data, dim=axis)

    def _gather_0d(self, dim, index):
        _axes(dim, 0, "gather")
        if index.ndim > 1:
            raise ShapeError(f"gather: a 0-d tensor takes a 0-d or 1-D index, got "
                             f"{fmt_shape(index.shape)}")
        return self.reshape(1).gather(0, index.reshape(-1)).reshape(index.shape)

    def index_select(self, dim, index):
        """The entries at `index` (1-D integers, 0..n-1 as in torch) along dim."""
        if self.ndim == 0:
            return self._one_entry("index_select", dim, index, None,
                                   lambda x, i, s: x.index_select(0, i))
        axis = _axis(dim, self.ndim, "index_select")
        index = _index_tensor(index, self, "index_select")
        if index.ndim > 1:
            raise ShapeError(f"index_select: index must be 1-D, got {fmt_shape(index.shape)}")
        _check_slots("index_select", index, self.shape, axis)  # (x[i] takes -1: torch's not)
        return self[(slice(None),) * axis + (index.reshape(-1),)]

    def take_along_dim(self, indices, dim=None):
        if dim is None:
            return self.reshape(-1).take_along_dim(indices.reshape(-1), 0)
        return apply(sh.take_along_dim, self, _index_tensor(indices, self, "take_along_dim")
                     ._data, dim=dim)

    def masked_select(self, mask):
        """The entries where mask (broadcast with self) is True, as a 1-D tensor."""
        mask = _bool_mask("masked_select", mask, self)
        try:
            shape = np.broadcast_shapes(self.shape, mask.shape)
        except ValueError:
            raise ShapeError(f"masked_select: the mask {fmt_shape(mask.shape)} and the input "
                             f"{fmt_shape(self.shape)} do not broadcast together") from None
        return self.expand(shape)[mask.expand(shape)._data]

    def nonzero(self, as_tuple=False):
        """The indices of the nonzero entries: (n, ndim) int64, or one 1-D tensor per dim.
        Their count (the shape) comes from the values: a value read, which a captured step
        refuses, as item()."""
        if ag._tracers.get() is not None or ag._everywhere:
            _seen_read(self, "nonzero()")
        return self._nonzero(as_tuple)

    def _nonzero(self, as_tuple):
        found = self.backend.xp.nonzero(self._data if self.ndim else self._data.reshape(1))
        parts = [Tensor._wrap(p.astype(np.int64, copy=False), self.backend) for p in found]
        if as_tuple:
            return tuple(parts)
        xp = self.backend.xp
        if self.ndim == 0:  # (1, 0) where it is nonzero, (0, 0) where not, as torch
            return Tensor._wrap(xp.zeros((parts[0].shape[0], 0), dtype=np.int64), self.backend)
        return Tensor._wrap(xp.stack([p._data for p in parts], axis=1) if parts else
                            xp.zeros((0, 0), dtype=np.int64), self.backend)

    def argwhere(self):
        """nonzero(): the (n, ndim) indices of the nonzero entries (a value read too)."""
        if ag._tracers.get() is not None or ag._everywhere:
            _seen_read(self, "argwhere()")
        return self._nonzero(False)

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        """A copy with src (or the number value) written at index along dim; with reduce
        "add" or "multiply" (deprecated in torch), added or multiplied in instead."""
        src = value if src is None else src
        if reduce is not None:
            return self._scatter_reducing(dim, index, src, reduce)
        if self.ndim == 0:
            return self._one_entry("scatter", dim, index, src,
                                   lambda x, i, s: x.scatter(0, i, s))
        return apply(ix.scatter, self, _index_tensor(index, self, "scatter")._data,
                     self._other(src), dim=dim)

    def _scatter_reducing(self, dim, index, src, reduce):
        """torch's scatter(..., reduce="add" | "multiply"): scatter_reduce's "sum" or "prod"
        with this tensor's values counted; a number src is cast to this tensor's dtype first
        (2.5 adds 2 to an int64 tensor), as torch. (torch's has no gradient; this one has
        scatter_reduce's.)"""
        if reduce not in ("add", "multiply"):
            raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r} "
                             "(torch's; scatter_reduce has more reductions)")
        index = _index_tensor(index, self, "scatter")
        if not isinstance(src, Tensor):
            src = Tensor._wrap(self.backend.xp.full(index.shape, ix.fill_value(
                src, self.dtype, "scatter"), dtype=self.dtype), self.backend)
        return self.scatter_reduce(dim, index, src, "sum" if reduce == "add" else "prod")

    def scatter_add(self, dim, index, src):
        if self.ndim == 0:
            return self._one_entry("scatter_add", dim, index, src,
                                   lambda x, i, s: x.scatter_add(0, i, s))
        return apply(ix.scatter_add, self, _index_tensor(index, self, "scatter_add")._data,
                     self._other(src), dim=dim)

    def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
        ix.check_reduction(reduce)
        if self.ndim == 0:
            return self._one_entry("scatter_reduce", dim, index, src, lambda x, i, s: (
                x.scatter_reduce(0, i, s, reduce, include_self=include_self)))
        return apply(ix.scatter_reduce, self, _index_tensor(index, self, "scatter_reduce")._data,
                     self._other(src), dim=dim, reduce=reduce, include_self=include_self)

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        return self._in_place_as("scatter_", lambda x: x.scatter(dim, index, src, value=value,
                                                                 reduce=reduce), src)

    def scatter_add_(self, dim, index, src):
        return self._in_place_as("scatter_add_", lambda x: x.scatter_add(dim, index, src), src)

    def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
        return self._in_place_as("scatter_reduce_", lambda x: x.scatter_reduce(
            dim, index, src, reduce, include_self=include_self), src)

    # index_add, index_copy, index_fill: slices along dim picked by a 1-D index, through the
    # scatter ops and masked_fill (whose VJPs give the gradients)

    def index_add(self, dim, index, source, *, alpha=1):
        """A copy with alpha * source[..., k, ...] added into slice index[k] along dim
        (repeated indices add up; an integer tensor takes alpha's integer part, as torch)."""
        if self.ndim == 0:
            return self._one_entry("index_add", dim, index, source,
                                   lambda x, i, s: x.index_add(0, i, s, alpha=alpha))
        axis, idx = self._slices_at("index_add", dim, index, source)
        if alpha != 1 and self.dtype.kind in "iu":
            alpha = int(alpha)  # (source * 2.5 would be float, which this tensor cannot take)
        return self.scatter_add(axis, idx, source if alpha == 1 else source * alpha)

    def index_copy(self, dim, index, source):
        """A copy with slice index[k] along dim replaced by source[..., k, ...]."""
        if self.ndim == 0:
            return self._one_entry("index_copy", dim, index, source,
                                   lambda x, i, s: x.index_copy(0, i, s))
        axis, idx = self._slices_at("index_copy", dim, index, source)
        return self.scatter(axis, idx, source)

    def index_fill(self, dim, index, value):
        """A copy with the slices at index along dim set to value (a number)."""
        value = ix.fill_value(value, self.dtype, "index_fill")  # (300 into int8: refused)
        axis = _axis(dim, max(self.ndim, 1), "index_fill")
        index = self._slice_index("index_fill", index)
        hit = _values("index_hit", _slots_hit, index, n=self.shape[axis] if self.ndim else 1,
                      axis=axis, ndim=self.ndim, backend=self.backend)
        return self.masked_fill(hit, value)

    def index_add_(self, dim, index, source, *, alpha=1):
        return self._in_place_as("index_add_", lambda x: x.index_add(dim, index, source,
                                                                     alpha=alpha), source)

    def index_copy_(self, dim, index, source):
        return self._in_place_as("index_copy_", lambda x: x.index_copy(dim, index, source),
                                 source)

    def index_fill_(self, dim, index, value):
        return self._in_place_as("index_fill_", lambda x: x.index_fill(dim, index, value))

    def index_reduce(self, dim, index, source, reduce, *, include_self=True):
        """A copy with slice k of source along dim reduced into slice index[k] ("prod", "mean",
        "amax" or "amin", torch's; include_self=False leaves out this tensor's values where a
        slice is named): scatter_reduce with the index spread over source, whose VJP gives the
        gradients."""
        if reduce not in ("prod", "mean", "amax", "amin"):
            raise ValueError(f"index_reduce: reduce must be one of prod, mean, amax, amin, got "
                             f"{reduce!r} (torch's; index_add sums)")
        if self.ndim == 0:
            return self._one_entry("index_reduce", dim, index, source, lambda x, i, s: (
                x.index_reduce(0, i, s, reduce, include_self=include_self)))
        axis, idx = self._slices_at("index_reduce", dim, index, source)
        return self.scatter_reduce(axis, idx, source, reduce, include_self=include_self)

    def index_reduce_(self, dim, index, source, reduce, *, include_self=True):
        return self._in_place_as("index_reduce_", lambda x: x.index_reduce(
            dim, index, source, reduce, include_self=include_self), source)

    def index_put(self, indices, values, accumulate=False):
        """A copy with `values` written at self[indices] (indices: a tuple or list of index
        tensors, one per leading dim); accumulate=True adds them instead, a place named twice
        getting both. Built on setitem and index_add, whose VJPs give the gradients."""
        if not isinstance(indices, (tuple, list)):
            raise TypeError(f"index_put: indices must be a tuple or list of tensors, got "
                            f"{type(indices).__name__}")
        if not isinstance(values, Tensor):
            raise TypeError(f"index_put: values must be a Tensor, got {type(values).__name__}")
        _same_dtype("index_put", "values", values, self)
        steps = _index_steps(_index(tuple(indices), self.backend, "index_put"))
        if not accumulate:
            return apply(sh.setitem, self, values, steps=steps)
        try:  # the flat place of every entry self[indices] picks, in its shape
            places = _make("index_places", _index_places, np.int64, False, self.backend,
                           shape=self.shape, steps=steps)
        except IndexError as e:
            raise DimError(f"index_put: {e} (tensor of shape {fmt_shape(self.shape)})") from None
        try:
            values = values.expand(places.shape)
        except ShapeError:
            raise ShapeError(f"index_put: values {fmt_shape(values.shape)} do not broadcast to "
                             f"the {fmt_shape(places.shape)} entries the indices pick") from None
        flat = self.reshape(-1).index_add(0, places.reshape(-1), values.reshape(-1))
        return flat.reshape(self.shape)

    def put(self, index, source, accumulate=False):
        """A copy with source's entries written at the places index names in the flattened
        tensor (negative ones from the end); accumulate=True adds them (index_put's rules)."""
        return self._put("put", index, source, accumulate)

    def put_(self, index, source, accumulate=False):
        return self._in_place_as("put_", lambda x: x._put("put_", index, source, accumulate),
                                 source)

    def _put(self, name, index, source, accumulate):
        index = _index_tensor(index, self, name)
        if not isinstance(source, Tensor):
            raise TypeError(f"{name}: source must be a Tensor, got {type(source).__name__}")
        _same_dtype(name, "source", source, self)
        if source.numel() != index.numel():
            raise ShapeError(f"{name}: source has {source.numel()} entries but index "
                             f"{index.numel()}; they must have as many (torch's rule)")
        _check_values(_flat_in_range, index, where=name, shape=self.shape)
        flat = self.reshape(-1).index_put((index.reshape(-1),), source.reshape(-1), accumulate)
        return flat.reshape(self.shape)

    def index_put_(self, indices, values, accumulate=False):
        return self._in_place_as("index_put_", lambda x: x.index_put(indices, values, accumulate),
                                 values)

    def unfold(self, dimension, size, step):
        """Every window of `size` entries along dim `dimension`, `step` apart, as a new last
        dim: dim becomes the (n - size) // step + 1 windows. A view of this tensor's memory,
        as torch's (an as_strided: writes reach this tensor, and the VJP adds up an entry's
        share of overlapping windows)."""
        size, step = operator.index(size), operator.index(step)
        if self.ndim == 0:  # its one implicit dim (0 or -1), as torch: windows of (1,)
            _axes(dimension, 0, "unfold")
            x, axis = self.reshape(1), 0
        else:
            x, axis = self, _axis(dimension, self.ndim, "unfold")
        n = x.shape[axis]
        if size < 0:
            raise ValueError(f"unfold: size must be >= 0, got {size}")
        if size > n:
            raise ShapeError(f"unfold: size {size} is larger than dim {axis} of size {n} (shape "
                             f"{fmt_shape(self.shape)})")
        if step <= 0:
            raise ValueError(f"unfold: step must be > 0, got {step}")
        strides = x.stride()
        out = x.as_strided(x.shape[:axis] + ((n - size) // step + 1,) + x.shape[axis + 1:] + (
            size,), strides[:axis] + (strides[axis] * step,) + strides[axis + 1:] + (
            strides[axis],))
        return out.reshape(size) if self.ndim == 0 else out

    def as_strided(self, size, stride, storage_offset=None):
        """A view of this tensor's memory (its storage(), from its start) read with `size`
        and `stride` (in entries), from entry `storage_offset` (this tensor's own
        storage_offset() when None), as torch's: writes through it reach this tensor, and its
        gradient adds up where the view sees an entry twice."""
        size = _shape_args((size,), "as_strided")
        stride = tuple(operator.index(s) for s in stride)
        offset = self.storage_offset() if storage_offset is None else operator.index(
            storage_offset)
        if len(stride) != len(size):
            raise ShapeError(f"as_strided: mismatch in length of strides and shape: size "
                             f"{fmt_shape(size)}, stride {stride}")
        if min(stride, default=0) < 0 or offset < 0:
            raise ValueError(f"as_strided: negative strides or storage offset are not supported "
                             f"(as torch), got strides {stride} and storage offset {offset}")
        return _viewed(self, views.strided, size=size, stride=stride, offset=offset)

    def diag_embed(self, offset=0, dim1=-2, dim2=-1):
        """Each vector along the last dim as the diagonal (above it for offset > 0) of a
        square matrix in dims dim1, dim2 of the result (one more dim), zeros elsewhere."""
        if self.ndim == 0:
            raise DimError("diag_embed: needs at least 1 dim (the vectors to put on diagonals), "
                           "got a 0-d tensor")
        a, b = (_axis(d, self.ndim + 1, "diag_embed") for d in (dim1, dim2))
        if a == b:
            raise DimError(f"diag_embed: dim1 and dim2 are both {a}")
        offset, be = _int_argument("diag_embed", "offset", offset), self.backend
        k = self.shape[-1]
        n = k + abs(offset)
        # made as ops, so a captured step makes them again on each replay (as diag's)
        zeros = _make("zeros", _zeros, self.dtype, False, be, shape=self.shape[:-1] + (n, n))
        rows, cols = (_make("arange", _arange, np.int64, False, be, start=start, end=start + k,
                            step=1) for start in (max(-offset, 0), max(offset, 0)))
        square = apply(sh.setitem, zeros, self, steps=((Ellipsis, rows._data, cols._data),))
        return square.movedim((-2, -1), (a, b))

    def _slice_index(self, name, index):
        index = _index_tensor(index, self, name)
        if index.ndim > 1:
            raise ShapeError(f"{name}: the index must be 1-D (one slice per entry), got "
                             f"{fmt_shape(index.shape)}")
        return index.reshape(-1)

    def _one_entry(self, name, dim, index, src, redo):
        """A 0-d tensor's scatter, index_add, index_select... as torch's: over its one implicit
        dim (0 or -1), with an index (and a src tensor) of one entry, giving a 0-d tensor;
        redo(x, index, src) does it on the (1,) tensor, whose op has the VJP."""
        _axes(dim, 0, name)
        index = _index_tensor(index, self, name)
        if index.ndim > 1 or index.numel() != 1:
            raise ShapeError(f"{name}: a 0-d tensor takes an index of one entry (0-d or 1-D), "
                             f"got {fmt_shape(index.shape)}")
        if isinstance(src, Tensor):
            if src.numel() != 1:
                raise ShapeError(f"{name}: a 0-d tensor takes a src of one entry, got "
                                 f"{fmt_shape(src.shape)}")
            src = src.reshape(1)
        return redo(self.reshape(1), index.reshape(1), src).reshape(())

    def _slices_at(self, name, dim, index, source):
        """(axis, index spread over source's shape) for writing source's slices along dim."""
        axis = _axis(dim, self.ndim, name)
        index = self._slice_index(name, index)
        if not isinstance(source, Tensor):
            raise TypeError(f"{name}: source must be a Tensor, got {type(source).__name__}")
        _same_dtype(name, "source", source, self)
        want = self.shape[:axis] + (index.shape[0],) + self.shape[axis + 1:]
        if source.shape != want:
            raise ShapeError(f"{name}: source has shape {fmt_shape(source.shape)} but this "
                             f"tensor {fmt_shape(self.shape)} with {index.shape[0]} indices "
                             f"along dim {axis} needs {fmt_shape(want)}")
        _check_slots(name, index, self.shape, axis)
        spread = [1] * self.ndim
        spread[axis] = -1
        return axis, index.reshape(*spread).expand(*source.shape)

    def masked_scatter(self, mask, source):
        """A copy whose entries where mask is True take source's entries in order (row-major);
        mask and this tensor broadcast together (the result has their shape, as torch's)."""
        mask = _bool_mask("masked_scatter", mask, self)
        if not isinstance(source, Tensor):
            raise TypeError(f"masked_scatter: source must be a Tensor, got "
                            f"{type(source).__name__}")
        _same_dtype("masked_scatter", "source", source, self)
        x = self._with_mask_shape("masked_scatter", mask)
        where = _values("masked_positions", _flat_positions, mask, shape=x.shape,
                        backend=self.backend)
        n = where.shape[0]
        if source.numel() < n:
            raise ShapeError(f"masked_scatter: the mask picks {n} entries but source "
                             f"{fmt_shape(source.shape)} has only {source.numel()}")
        flat = apply(sh.setitem, x.reshape(-1), source.reshape(-1)[:n],
                     steps=((where._data,),))
        return flat.reshape(x.shape)

    def _with_mask_shape(self, name, mask):
        """This tensor expanded to its broadcast shape with `mask`: torch's out-of-place masked
        ops give that shape, larger than this tensor where the mask has more (or longer) dims.
        (The in-place ones refuse such a mask: the result would not fit this tensor.)"""
        if mask.shape == self.shape:
            return self
        try:
            shape = np.broadcast_shapes(self.shape, mask.shape)
        except ValueError:
            raise ShapeError(f"{name}: mask {fmt_shape(mask.shape)} does not broadcast to x "
                             f"{fmt_shape(self.shape)}, nor the two together") from None
        return self if shape == self.shape else self.expand(shape)

    def masked_scatter_(self, mask, source):
        return self._in_place_as("masked_scatter_", lambda x: x.masked_scatter(mask, source),
                                 source)

    def addcmul_(self, tensor1, tensor2, *, value=1):
        return self._in_place_as("addcmul_", lambda x: x.addcmul(tensor1, tensor2, value=value),
                                 tensor1, tensor2)

    def addcdiv_(self, tensor1, tensor2, *, value=1):
        return self._in_place_as("addcdiv_", lambda x: x.addcdiv(tensor1, tensor2, value=value),
                                 tensor1, tensor2)

    def lerp_(self, end, weight):
        return self._in_place_as("lerp_", lambda x: x.lerp(end, weight), end, weight)

    def tril_(self, diagonal=0):
        return self._in_place_as("tril_", lambda x: x.tril(diagonal))

    def triu_(self, diagonal=0):
        return self._in_place_as("triu_", lambda x: x.triu(diagonal))

    def tril(self, diagonal=0):
        """The lower triangle of the last two dims (j <= i + diagonal), zeros above."""
        return self._triangle("tril", diagonal)

    def triu(self, diagonal=0):
        """The upper triangle of the last two dims (j >= i + diagonal), zeros below."""
        return self._triangle("triu", diagonal)

    def _triangle(self, name, diagonal):
        diagonal = _int_argument(name, "diagonal", diagonal)  # (1.5 or True: torch refuses)
        if self.ndim < 2:
            raise ShapeError(f"{name}: needs at least 2 dims, got {fmt_shape(self.shape)}")
        n, m = self.shape[-2:]
        keep = _make("triangle", _triangle_keep, np.bool_, False, self.backend, n=n, m=m,
                     diagonal=diagonal, lower=name == "tril")
        # zeros of self's dtype: a Python 0 would make a bool tensor's triangle int64
        return apply(ew.where, keep, self, False if self.dtype == np.bool_ else 0)

    def repeat(self, *sizes):
        """The tensor tiled sizes[i] times along dim i (new leading dims where sizes is longer)."""
        _no_bools("repeat", "sizes", sizes)
        sizes = _sizes(sizes, "repeat")  # (>= 0: -1 expands nothing here, as torch refuses)
        if len(sizes) < self.ndim:
            raise ShapeError(f"repeat: {len(sizes)} sizes for a tensor of shape "
                             f"{fmt_shape(self.shape)}; give at least one per dim")
        shape = (1,) * (len(sizes) - self.ndim) + self.shape
        x = self.reshape(shape)
        spread = tuple(v for n in shape for v in (1, n))  # (1, n0, 1, n1, ...)
        tiled = tuple(v for r, n in zip(sizes, shape, strict=True) for v in (r, n))
        out = x.reshape(spread).expand(tiled).reshape(tuple(
            r * n for r, n in zip(sizes, shape, strict=True)))
        if out is self or (out._version_counter is not None
                           and out._version_counter is self._version_counter):
            out = out.clone()  # (counts of 1: the reshapes were views) new memory, as torch's
        return out

    def tile(self, *dims):
        _no_bools("tile", "dims", dims)
        dims = _sizes(dims, "tile")
        return self.repeat((1,) * (self.ndim - len(dims)) + dims)

    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        """Each entry repeated `repeats` times (an int, or one count per entry) along dim;
        output_size, if given, must be the length that makes (as torch checks)."""
        x = self.reshape(-1) if dim is None else self
        axis = 0 if dim is None else _axis(dim, x.ndim, "repeat_interleave")
        counts = _repeat_counts(repeats, x.shape[axis], axis)
        if output_size is not None:
            _check_output_size(output_size, counts, x.shape[axis])
        index = _make("repeat_index", _repeat_index, np.int64, False, self.backend,
                      n=x.shape[axis], counts=counts)
        return x.index_select(axis, index)

    def flip(self, *dims, **kwargs):
        """Entries in reverse order along dims: flip(0, 1), flip((0, 1)) or flip(dims=(0, 1))."""
        if "dims" in kwargs and not dims:
            dims = (kwargs.pop("dims"),)
        if kwargs:
            raise TypeError(f"flip: unexpected arguments {sorted(kwargs)}; write flip(dims)")
        _no_bools("flip", "dims", dims)
        dims = _shape_args(dims, "flip")
        axes = _axes(dims, self.ndim, "flip")
        if not axes:
            return self.clone()
        return apply(sh.flip, self, dims=axes)  # new memory, as torch's (x[::-1] is a view)

    def roll(self, shifts, dims=None):
        """Entries moved `shifts` places along dims (wrapping around); no dims: the flat tensor.
        The shifts are ints (a float or a bool is refused, as torch's)."""
        shifts = tuple(_int_argument("roll", "shifts", s) for s in (
            shifts if isinstance(shifts, (tuple, list)) else (shifts,)))
        if dims is None:
            if len(shifts) != 1:
                raise ValueError(f"roll: {len(shifts)} shifts with no dims; give one dim per "
                                 "shift")
            return self.reshape(-1).roll(shifts[0], 0).reshape(self.shape)
        dims = dims if isinstance(dims, (tuple, list)) else (dims,)
        if len(shifts) != len(dims):
            raise ValueError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
        out = self
        for s, d in zip(shifts, dims, strict=True):
            axis = _axis(d, self.ndim, "roll")
            index = _make("roll_index", _roll_index, np.int64, False, self.backend,
                          n=self.shape[axis], shift=int(s))
            out = out.index_select(axis, index)
        return out

    def unflatten(self, dim, sizes):
        """Dim `dim` split into dims of the given sizes (one may be -1: inferred)."""
        axis = _axis(dim, self.ndim, "unflatten")
        sizes = tuple(int(n) for n in sizes)
        n, known = self.shape[axis], math.prod(m for m in sizes if m != -1)
        fits = bool(sizes) and sizes.count(-1) <= 1 and min(sizes) >= -1 and (
            known == n if -1 not in sizes else known != 0 and n % known == 0)
        if not fits:
            raise ShapeError(f"unflatten: sizes {sizes} do not multiply up to the size {n} of "
                             f"dim {axis} (shape {fmt_shape(self.shape)}); at most one size may "
                             "be -1 (inferred)")
        # (the -1 worked out here: reshape cannot infer it where another dim is 0)
        sizes = tuple(n // known if m == -1 else m for m in sizes)
        return self.reshape(self.shape[:axis] + sizes + self.shape[axis + 1:])

    def diagonal(self, offset=0, dim1=0, dim2=1):
        """The diagonal of dims dim1, dim2 (above it for offset > 0), as the last dim: a view,
        so writes into it (fill_, x[i] = v, +=) reach this tensor, as torch's."""
        a, b = _axis(dim1, self.ndim, "diagonal"), _axis(dim2, self.ndim, "diagonal")
        if a == b:
            raise DimError(f"diagonal: dim1 and dim2 are both {a}")
        return apply(sh.diagonal, self, offset=_int_argument("diagonal", "offset", offset),
                     dim1=a, dim2=b)

    def movedim(self, source, destination):
        if self.ndim == 0:
            return self._same_0d("movedim", source, destination)
        src = source if isinstance(source, (tuple, list)) else (source,)
        dst = destination if isinstance(destination, (tuple, list)) else (destination,)
        src_axes = [_axis(d, self.ndim, "movedim") for d in src]
        dst_axes = [_axis(d, self.ndim, "movedim") for d in dst]
        if len(src) != len(dst):
            raise ValueError(f"movedim: {len(src)} source dims for {len(dst)} destinations")
        for name, given, axes in (("source", src, src_axes), ("destination", dst, dst_axes)):
            if len(set(axes)) != len(axes):
                raise DimError(f"movedim: repeated dim in {name} {tuple(given)} (dims "
                               f"{tuple(axes)} of a tensor of shape {fmt_shape(self.shape)}); "
                               "each dim can be moved once, to one place")
        src, dst = src_axes, dst_axes
        order = [d for d in range(self.ndim) if d not in src]
        for d, s in sorted(zip(dst, src, strict=True)):
            order.insert(d, s)
        return self.permute(*order)

    moveaxis = movedim

    def swapaxes(self, axis0, axis1):
        return self.transpose(axis0, axis1)

    swapdims = swapaxes

    def swapaxes_(self, axis0, axis1):
        """swapaxes, in place (transpose_ under torch's other name; see _in_place_view)."""
        return self._in_place_view("swapaxes_", sh.permute,
                                   dims=self._swapped(axis0, axis1, "swapaxes_") or ())

    def swapdims_(self, dim0, dim1):
        """swapdims, in place (transpose_ under torch's other name; see _in_place_view)."""
        return self._in_place_view("swapdims_", sh.permute,
                                   dims=self._swapped(dim0, dim1, "swapdims_") or ())

    def narrow(self, dim, start, length):
        axis = _axis(dim, self.ndim, "narrow")
        start, length = _int_argument("narrow", "start", start), _int_argument("narrow",
                                                                                 "length", length)
        start = start + self.shape[axis] if start < 0 else start
        if not 0 <= start <= start + length <= self.shape[axis]:
            raise DimError(f"narrow: start {start} and length {length} do not fit dim {axis} "
                           f"of size {self.shape[axis]} (shape {fmt_shape(self.shape)})")
        return self[(slice(None),) * axis + (slice(start, start + length),)]

    def unbind(self, dim=0):
        axis = _axis(dim, self.ndim, "unbind")
        return views.several(tuple(self[(slice(None),) * axis + (i,)]
                                   for i in range(self.shape[axis])), "unbind")

    def t(self):
        """The transpose of a matrix (a tensor with at most 2 dims); of a vector or a 0-d
        tensor, a view of it as it is (a new tensor, as torch's)."""
        self._at_most_2d("t")
        return self.T

    def t_(self):
        """t, in place: a matrix becomes its transpose (see _in_place_view); fewer dims stay."""
        self._at_most_2d("t_")
        return self._in_place_view("t_", sh.permute, dims=tuple(reversed(range(self.ndim))))

    def _at_most_2d(self, name):
        if self.ndim > 2:
            raise ShapeError(f"{name}: takes a tensor with at most 2 dims, got "
                             f"{fmt_shape(self.shape)}; use transpose(dim0, dim1) or .mT")

    def contiguous(self, memory_format=None):
        """A tensor whose array is laid out in C order (self when it already is); memory_format
        ta.contiguous_format only (preserve_format is refused, as torch; channels_last too:
        tinyattn's arrays are row-major only)."""
        _row_major("contiguous", memory_format, preserve=False)
        if self._data.flags.c_contiguous:
            return self
        return self.clone(memory_format=contiguous_format)

    def is_contiguous(self):
        return bool(self._data.flags.c_contiguous)

    def detach_(self):
        """Make this tensor a leaf with no graph, in place (a leaf keeps its node aside, as
        requires_grad_(False): requires_grad_() gives it back, hooks included). A view of
        another tensor's memory is refused, as torch: detach() it instead."""
        if _is_a_view(self):
            raise GraphError("detach_: Can't detach views in-place. Use detach() instead (as "
                             "torch): this tensor is a view of another tensor's memory (made by "
                             "indexing, reshape, permute, expand..., a same-shape one too); "
                             "detach() gives a new tensor of its values with no graph")
        node = self._node
        if node is not None and node.op is None:
            self._require(False)
        else:
            self._node = None
        return self

    def view_as(self, other):
        return self.view(other.shape)

    def reshape_as(self, other):
        return self.reshape(other.shape)

    def type_as(self, other):
        return self.to(other.dtype)

    def unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
        """The distinct values, sorted (no gradient: torch has none either); with
        return_inverse, where each entry went; with return_counts, how often each occurs.
        With a dim, the distinct slices along it (sorted lexicographically), as torch's."""
        _flag("unique", "sorted", sorted)
        if dim is not None:
            return self._unique_runs("unique", sp.unique_slices, return_inverse, return_counts,
                                     dim)
        values, inverse, counts = np.unique(self.numpy(), return_inverse=True,
                                            return_counts=True, equal_nan=False)  # (torch)
        return _unique_out(self, values, inverse.reshape(self.shape), counts, return_inverse,
                           return_counts)

    def unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
        """The first entry of each run of equal entries (of each run of equal slices along
        dim), as torch's; with return_inverse the run of each entry, with return_counts each
        run's length. NaN equals no NaN. (No gradient, as torch's.)"""
        return self._unique_runs("unique_consecutive", sp.consecutive_runs, return_inverse,
                                 return_counts, dim)

    def _unique_runs(self, name, find, return_inverse, return_counts, dim):
        """find(array, axis) -> (values, inverse, counts) on the host, as tensors (a value read,
        as unique's: the shapes come from the values)."""
        axis = None if dim is None else _axis(dim, self.ndim, name)
        if axis is not None and self.numel() == 0 and self.shape[axis] != 0:
            raise ShapeError(f"{name}: {fmt_shape(self.shape)} has dims of size 0 besides dim "
                             f"{axis}, so there are no slices to compare (as torch)")
        values, inverse, counts = find(self.numpy(), axis)
        return _unique_out(self, values, inverse, counts, return_inverse, return_counts)

    # compositions of the ops above (their gradients are those of the pieces)

    def select(self, dim, index):
        """The slice at `index` along dim, that dim removed (x.select(1, 2) is x[:, 2])."""
        axis = _axis(dim, self.ndim, "select")
        n, index = self.shape[axis], _int_argument("select", "index", index)
        if not -n <= index < n:
            raise DimError(f"select: index {index} is out of range for dim {axis} of size {n} "
                           f"(shape {fmt_shape(self.shape)})")
        return self[(slice(None),) * axis + (index,)]

    # torch's out-of-place scatters: a copy of this tensor with src written into one part of
    # it, as the setitem op (its gradient: g to this tensor outside the part, g's part to src)

    def select_scatter(self, src, dim, index):
        """A copy with src written at `index` along dim; src has self.select(dim, index)'s
        shape."""
        axis = _axis(dim, self.ndim, "select_scatter")
        index, n = _int_argument("select_scatter", "index", index), self.shape[axis]
        if not -n <= index < n:
            raise DimError(f"select_scatter: index {index} is out of range for dim {axis} of "
                           f"size {n} (shape {fmt_shape(self.shape)})")
        return self._scatter("select_scatter", src, (slice(None),) * axis + (index,))

    def slice_scatter(self, src, dim=0, start=None, end=None, step=1):
        """A copy with src written at start:end:step along dim (Python's slice rules: negative
        bounds count from the end, bounds past the ends are clamped); src has that slice's
        shape."""
        axis = _axis(dim, self.ndim, "slice_scatter")
        start, end = (None if v is None else _int_argument("slice_scatter", what, v)
                      for what, v in (("start", start), ("end", end)))
        step = _int_argument("slice_scatter", "step", step)
        if step <= 0:
            raise ValueError(f"slice_scatter: slice step must be positive, got {step}")
        return self._scatter("slice_scatter", src,
                             (slice(None),) * axis + (slice(start, end, step),))

    def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
        """A copy with src written on the diagonal of dims dim1, dim2 (above it for offset > 0);
        src has self.diagonal(offset, dim1, dim2)'s shape (the diagonal as its last dim)."""
        a, b = (_axis(d, self.ndim, "diagonal_scatter") for d in (dim1, dim2))
        if a == b:
            raise DimError(f"diagonal_scatter: dim1 and dim2 are both {a}")
        offset = _int_argument("diagonal_scatter", "offset", offset)
        length = self._data.diagonal(offset, a, b).shape[-1]
        be, index = self.backend, [slice(None)] * self.ndim
        for axis, first in ((a, max(-offset, 0)), (b, max(offset, 0))):  # the diagonal's places
            index[axis] = _make("arange", _arange, np.int64, False, be, start=first,
                                end=first + length, step=1)._data
        # NumPy puts the picked entries where the two index arrays stand when they are next
        # to each other, else first: src's last dim goes there
        return self._scatter("diagonal_scatter", src, tuple(index),
                             moved_to=min(a, b) if abs(a - b) == 1 else 0)

    def _scatter(self, name, src, index, moved_to=None):
        """A copy of this tensor with src written at `index` (src must have exactly the shape
        of the part it fills, torch's rule for its scatters; moved_to: where src's last dim
        stands in that part, for diagonal_scatter)."""
        if not isinstance(src, Tensor):
            raise TypeError(f"{name}: src must be a tensor, got {type(src).__name__}")
        want = self._data[index].shape
        if moved_to is not None:
            want = want[:moved_to] + want[moved_to + 1:] + want[moved_to:moved_to + 1]
        if tuple(src.shape) != tuple(want):
            raise ShapeError(f"{name}: src {fmt_shape(src.shape)} must have the shape of the "
                             f"part of the input it fills, {fmt_shape(want)} (input "
                             f"{fmt_shape(self.shape)})")
        if moved_to is not None:
            src = src.movedim(-1, moved_to)
        return apply(sh.setitem, self, src, steps=(index,))

    def take(self, index):
        """Entries of the flattened tensor at `index` (any shape; the result has its shape)."""
        return self.reshape(-1)[index]

    def diag(self, diagonal=0):
        """A 1-D tensor as the diagonal of a square matrix (above it for diagonal > 0), or the
        diagonal of a matrix as a 1-D tensor."""
        if self.ndim == 2:
            return self.diagonal(diagonal).clone()  # (torch.diag copies; diagonal is a view)
        if self.ndim != 1:
            raise ShapeError(f"diag: takes a 1-D or 2-D tensor, got {fmt_shape(self.shape)}")
        k, be = self.shape[0], self.backend
        n = k + abs(diagonal)
        # made as ops, so a captured step makes them again on each replay
        zeros = _make("zeros", _zeros, self.dtype, False, be, shape=(n, n))
        rows, cols = (_make("arange", _arange, np.int64, False, be, start=start, end=start + k,
                            step=1) for start in (max(-diagonal, 0), max(diagonal, 0)))
        return apply(sh.setitem, zeros, self, steps=((rows._data, cols._data),))

    def trace(self):
        """The sum of the main diagonal of a matrix."""
        _refuse_bool("trace", self)
        if self.ndim != 2:
            raise ShapeError(f"trace: takes a matrix (2-D), got {fmt_shape(self.shape)}")
        return self.diagonal().sum()

    def diff(self, n=1, dim=-1, prepend=None, append=None):
        """x[i + 1] - x[i] along dim, n times; prepend/append join the tensor first. n=0: a
        copy of the tensor (prepend and append not joined), as torch's."""
        axis, n = _axis(dim, self.ndim, "diff"), _int_of(n)
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise DTypeError(f"diff: n must be an int, got {n!r}")
        if n < 0:
            raise ValueError(f"diff: order must be non-negative but got {n}")
        if n == 0:  # (torch: a copy, never this tensor itself)
            return self.clone()
        x = self
        if prepend is not None or append is not None:
            parts = [self._as_tensor(p) for p in (prepend, self, append) if p is not None]
            x = apply(sh.cat, *parts, dim=axis)
        lead = (slice(None),) * axis
        for _ in range(n):
            later, earlier = x[lead + (slice(1, None),)], x[lead + (slice(None, -1),)]
            # bools: torch's diff is their logical xor (NumPy cannot subtract bools)
            x = later ^ earlier if x.dtype == bool else later - earlier
        return x

    def addcmul(self, tensor1, tensor2, *, value=1):
        """self + value * tensor1 * tensor2, in the three's result type (_addc_operands;
        float16: in float32, rounded once, as torch)."""
        x, t1, t2, value = _addc_operands("addcmul", self, self._other(tensor1),
                                          self._other(tensor2), value)
        if x.dtype == np.float16 and _half_tensors(t1, t2):
            return apply(hf.addcmul, x, t1, t2, value=value)  # (torch's fused node)
        return x + t1 * t2 * value

    def addcdiv(self, tensor1, tensor2, *, value=1):
        """self + value * tensor1 / tensor2 (a true division: two integer tensors are refused,
        as torch refuses them, rather than divided into floats self may not hold)."""
        t1, t2 = self._other(tensor1), self._other(tensor2)
        if all(isinstance(t, Tensor) and t.dtype.kind in "iub" for t in (t1, t2)):
            raise DTypeError(f"addcdiv: tensor1 ({t1.dtype}) and tensor2 ({t2.dtype}) are both "
                             "integers: torch no longer divides integers in addcdiv (its old "
                             "rounding division is gone); for a true division convert one to "
                             "float, for a rounded one use div(rounding_mode=)")
        x, t1, t2, value = _addc_operands("addcdiv", self, t1, t2, value)
        if x.dtype == np.float16 and _half_tensors(t1, t2):  # (torch's fused node)
            return apply(hf.addcdiv, x, t1, t2, value=value)
        return x + t1 / t2 * value

    # ---- more of torch's methods, each made of the ops above (their VJPs give the gradients)

    def nansum(self, dim=None, keepdim=False, *, dtype=None):
        """Σ over dim with NaNs counted as 0 (they get no gradient)."""
        return self.where(~self.isnan(), 0).sum(dim, keepdim, dtype=dtype)

    def nanmean(self, dim=None, keepdim=False, *, dtype=None):
        """The mean over dim of the entries that are not NaN (NaN where all are); floating
        point only, as torch's nanmean (and mean): an integer tensor is refused."""
        if self.dtype.kind != "f":
            raise DTypeError(f"nanmean: needs a floating-point input, got {self.dtype} (torch's "
                             "rule too; integers hold no NaN, use mean of x.float())")
        if dtype is not None and as_dtype(dtype).kind != "f":
            raise DTypeError(f"nanmean: could not infer output dtype: dtype must be a "
                             f"floating-point dtype, got {as_dtype(dtype)} (as torch)")
        kept = ~self.isnan()
        count = kept.sum(dim, keepdim).to(self.dtype if dtype is None else dtype)
        return self.nansum(dim, keepdim, dtype=dtype) / count

    def xlogy(self, other):
        """self * log(other), 0 where self is 0 (unless other is NaN), as torch.xlogy, with
        torch's gradients: log(other) for self (0 where self is 0 and other <= 0) and
        self / other for other (NaN at self = other = 0: 0 / 0). (At self = 0, other = inf
        self's gradient is 0 here, inf in torch.) Computed in the two's float result type
        (_float_operands: a 0-d tensor or a number does not widen self, as in torch)."""
        x, other = _float_operands(self, other)
        # log(other), 0 where self = 0 and other <= 0 (or inf): self * that is 0 there, not
        # 0 * -inf or 0 * NaN, and so is self's gradient (the factor itself); other's,
        # g * self / other through log's VJP, stays 0 / other there (NaN at 0, as torch's)
        flat = _values("xlogy_flat", _xlogy_flat, x, other)
        with quiet():  # the logs of other <= 0 are masked out: no warning for them
            return x * apply(ew.where, flat, 0, other.log())

    def logaddexp2(self, other):
        """log₂(2^self + 2^other), in the two's float result type (_float_operands; float16
        in float32, rounded once, as torch's kernel)."""
        x, other = _float_operands(self, other)
        if x.dtype == np.float16:
            return _via_float32(_logaddexp2, x, other)
        return _logaddexp2(x, other)

    def float_power(self, exponent):
        """self ** exponent in float64 (torch.float_power); past its range inf, silently as
        torch: pow's form from ops/half.py, which for float64 is pow run without NumPy's
        warnings, forward and VJP."""
        e = exponent.double() if isinstance(exponent, Tensor) else exponent
        return apply(hf.half_form(ew.power), self.double(), e)

    def deg2rad(self):
        return self * (math.pi / 180) if self.dtype.kind == "f" else self.float() * (math.pi / 180)

    def rad2deg(self):
        return self * (180 / math.pi) if self.dtype.kind == "f" else self.float() * (180 / math.pi)

    def sinc(self):
        """sin(π x) / (π x), 1 at 0 (with gradient 0 there)."""
        x = self if self.dtype.kind == "f" else self.float()
        zero = x == 0
        safe = x.where(~zero, 1) * math.pi
        return (safe.sin() / safe).where(~zero, 1)

    def isposinf(self):
        return _values("isposinf", self.backend.xp.isposinf, self)

    def isneginf(self):
        return _values("isneginf", self.backend.xp.isneginf, self)

    def signbit(self):
        return _values("signbit", self.backend.xp.signbit, self)

    def addmm(self, mat1, mat2, *, beta=1, alpha=1):
        """beta * self + alpha * (mat1 @ mat2) (self broadcasts; beta = 0 ignores it, NaNs too)."""
        return self._plus_product("addmm", lambda: mat1.mm(mat2), beta, alpha)

    def addmv(self, mat, vec, *, beta=1, alpha=1):
        return self._plus_product("addmv", lambda: mat.mv(vec), beta, alpha)

    def addr(self, vec1, vec2, *, beta=1, alpha=1):
        return self._plus_product("addr", lambda: vec1.outer(vec2), beta, alpha)

    def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
        return self._plus_product("baddbmm", lambda: batch1.bmm(batch2), beta, alpha)

    def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
        """beta * self + alpha * Σ_b batch1[b] @ batch2[b]."""
        return self._plus_product("addbmm", lambda: batch1.bmm(batch2).sum(0), beta, alpha)

    def _plus_product(self, name, make_product, beta, alpha):
        try:  # (a shape error of the product's own op, "bmm: ...", named as the call: name)
            product = make_product()
        except ShapeError as e:
            raise ShapeError(f"{name}: {e}") from None
        if not broadcasts_to(self.shape, product.shape):
            raise ShapeError(f"{name}: this tensor {fmt_shape(self.shape)} does not broadcast "
                             f"to the product's shape {fmt_shape(product.shape)}")
        if name == "addr":  # (torch's addr promotes self with the vectors; the others refuse)
            dtype = promote_types(self.dtype, product.dtype)
        else:
            dtype = product.dtype
            if self.dtype != dtype:
                raise DTypeError(f"{name}: this tensor is {self.dtype} "
                                 f"{fmt_shape(self.shape)} but the product is {dtype} "
                                 f"{fmt_shape(product.shape)}: they must have the same dtype "
                                 "(torch's rule); convert one first")
        _check_int_scalars(name, dtype, beta=beta, alpha=alpha)
        if alpha != 1:
            product = product * alpha
        if beta != 0:
            return product + (self if beta == 1 else self * beta)
        if self._node is None or not is_grad_enabled():
            return product if product.dtype == dtype else product.to(dtype)
        # beta = 0: self's values are ignored (NaN and inf too, as torch), but it stays in the
        # graph with a zero gradient, as torch's (out.requires_grad, self.grad zeros, not None)
        return product + apply(ew.where, np.zeros((), dtype=bool), self, 0)

    def inner(self, other):
        """Σ over the last dim of both: shape self.shape[:-1] + other.shape[:-1] (a product
        with a 0-d tensor)."""
        other = self._operand(other)
        if self.ndim == 0 or other.ndim == 0:
            return self * other
        if self.shape[-1] != other.shape[-1]:
            raise ShapeError(f"inner: the last dims differ: {fmt_shape(self.shape)} and "
                             f"{fmt_shape(other.shape)}")
        mm.same_dtype("inner", self, other)  # (torch: "both inputs should have same dtype")
        n = self.shape[-1]
        flat = self.reshape(-1, n) @ other.reshape(-1, n).T
        return flat.reshape(self.shape[:-1] + other.shape[:-1])

    def cross(self, other, dim=None):
        """The cross product of 3-vectors along dim (None: the first dim of size 3, as
        torch.cross); the two broadcast."""
        other = self._as_tensor(other)
        shape = np.broadcast_shapes(self.shape, other.shape)
        if dim is None:
            dim = next((d for d, n in enumerate(shape) if n == 3), None)
            if dim is None:
                raise ShapeError(f"cross: no dim of size 3 in {fmt_shape(shape)}")
        axis = _axis(dim, len(shape), "cross")
        if shape[axis] != 3:
            raise ShapeError(f"cross: dim {dim} must have size 3, got {fmt_shape(shape)}")
        a, b = self.expand(*shape), other.expand(*shape)
        ax, ay, az = a.unbind(axis)
        bx, by, bz = b.unbind(axis)
        return apply(sh.stack, ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx,
                     dim=axis)

    def dist(self, other, p=2):
        """‖self - other‖_p over every entry."""
        return (self - self._as_tensor(other)).norm(p)

    def msort(self):
        return self.sort(0).values

    def fliplr(self):
        if self.ndim < 2:
            raise ShapeError(f"fliplr: needs at least 2 dims, got {fmt_shape(self.shape)}")
        return self.flip(1)

    def flipud(self):
        if self.ndim < 1:
            raise ShapeError("flipud: needs at least 1 dim, got a 0-d tensor")
        return self.flip(0)

    def rot90(self, k=1, dims=(0, 1)):
        """Turned by 90° k times, from the first of dims toward the second (new memory)."""
        k = _int_argument("rot90", "k", k)
        if len(dims) != 2:
            raise ValueError(f"rot90: dims must name two dims, got {dims}")
        _axes(dims, self.ndim, "rot90")  # (two different dims; it sorts them, so only checks)
        a, b = (_axis(d, self.ndim, "rot90") for d in dims)  # in the order given: (1, 0) turns
        k %= 4  # the other way from (0, 1)
        if k == 0:
            return self.clone()
        if k == 2:
            return self.flip(a, b)
        return (self.flip(b) if k == 1 else self.flip(a)).transpose(a, b)

    def tensor_split(self, indices_or_sections, dim=0):
        """Views along dim: n sections (the first size % n one longer), or cut at the given
        indices."""
        axis = _axis(dim, self.ndim, "tensor_split")
        size = self.shape[axis]
        if isinstance(indices_or_sections, Tensor):  # 0-d: sections, 1-D: indices (int64)
            t = indices_or_sections
            if t.dtype != np.int64 or t.ndim > 1:
                raise DTypeError(f"tensor_split: a tensor of sections or indices must be 0-d "
                                 f"or 1-D int64 (torch's rule), got {t.dtype} "
                                 f"{fmt_shape(t.shape)}")
            indices_or_sections = t.item() if t.ndim == 0 else t.tolist()
        _no_bools("tensor_split", "indices_or_sections", (indices_or_sections,))
        if isinstance(indices_or_sections, numbers.Integral):
            n = int(indices_or_sections)
            if n <= 0:
                raise ValueError(f"tensor_split: the number of sections must be > 0, got {n}")
            cuts = [i * (size // n) + min(i, size % n) for i in range(1, n)]
        else:
            cuts = _int_list("tensor_split", "indices_or_sections", indices_or_sections)
        bounds = [0, *(min(max(c if c >= 0 else c + size, 0), size) for c in cuts), size]
        return tuple(self.narrow(axis, lo, max(hi - lo, 0)) for lo, hi in
                     zip(bounds[:-1], bounds[1:], strict=True))

    def hsplit(self, indices_or_sections):
        """torch.hsplit: tensor_split along dim 1 (dim 0 of a 1-D tensor), where a number of
        sections must divide the dim; or cut at the given indices."""
        return self._split_along("hsplit", 1, 1 if self.ndim > 1 else 0, indices_or_sections)

    def vsplit(self, indices_or_sections):
        """torch.vsplit: hsplit's rule along dim 0, for a tensor with at least 2 dims."""
        return self._split_along("vsplit", 2, 0, indices_or_sections)

    def dsplit(self, indices_or_sections):
        """torch.dsplit: hsplit's rule along dim 2, for a tensor with at least 3 dims."""
        return self._split_along("dsplit", 3, 2, indices_or_sections)

    def _split_along(self, name, need, axis, indices_or_sections):
        """tensor_split(indices_or_sections, axis) after torch's checks for hsplit, vsplit and
        dsplit: enough dims, and sections (an int) that divide the dim into equal pieces."""
        if self.ndim < need:
            raise ShapeError(f"{name}: needs a tensor with at least {need} dim"
                             f"{'s' if need > 1 else ''}, got {self.ndim} dims (shape "
                             f"{fmt_shape(self.shape)})")
        sections = _int_of(indices_or_sections)
        if isinstance(sections, numbers.Integral) and not isinstance(sections, bool):
            n, size = int(sections), self.shape[axis]
            if n < 0:
                raise ValueError(f"{name}: the number of sections must be > 0, got {n}")
            if n == 0 or size % n:
                raise ShapeError(f"{name}: cannot split dim {axis} of size {size} into {n} "
                                 f"equal sections: {size} is not divisible by {n} (give a list "
                                 "of indices to cut at for pieces of other sizes)")
        elif not isinstance(sections, (list, tuple)) or not all(
                isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in sections):
            raise TypeError(f"{name}: takes an int (the number of sections) or a list or tuple "
                            f"of ints (the indices to cut at), got {indices_or_sections!r}")
        return self.tensor_split(sections, axis)

    def diagflat(self, offset=0):
        return self.flatten().diag(offset)

    def count_nonzero(self, dim=None):
        """How many entries are not 0 (over dim, or all), as an int64 tensor."""
        return (self != 0).sum(dim=() if dim is None else dim).long()

    def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
        """NaN, +inf and -inf replaced by nan, posinf, neginf (by default the dtype's largest
        and smallest finite values); the gradient flows where the entry was finite."""
        if self.dtype.kind != "f":
            return self.clone()
        info = np.finfo(self.dtype)
        nan = 0.0 if nan is None else nan  # (torch's: nan=None is the default 0)
        top = info.max if posinf is None else posinf
        bottom = info.min if neginf is None else neginf
        out = self.where(~self.isnan(), nan)
        out = out.where(out != np.inf, float(top))
        return out.where(out != -np.inf, float(bottom))

    def aminmax(self, *, dim=None, keepdim=False):
        """(min, max) over dim (or all entries), as a named pair."""
        return return_types.aminmax(self.amin(dim=() if dim is None else dim, keepdim=keepdim),
                                    self.amax(dim=() if dim is None else dim, keepdim=keepdim))

    def fmax(self, other):
        """The larger of the two, where a NaN counts as missing (the other value is taken).
        The gradient goes to the one taken, on a tie to self (torch's fmax: self >= other),
        not split as maximum's."""
        other = self._as_tensor(other)
        return self._pick(other, self.ge(other))

    def fmin(self, other):
        """The smaller of the two, NaN counting as missing; a tie's gradient goes to self."""
        other = self._as_tensor(other)
        return self._pick(other, self.le(other))

    def _pick(self, other, self_wins):
        """self where self_wins or other is NaN, else other: one where, so the gradient goes
        whole to the value taken (fmax, fmin; with both NaN, to self, as torch's)."""
        return apply(ew.where, self_wins | other.isnan(), self, other)

    # ---- special functions, order statistics, counting (ops/special.py) -----------------------

    erfc, erfinv, lgamma, digamma = (_unary(sp.erfc), _unary(sp.erfinv), _unary(sp.lgamma),
                                     _unary(sp.digamma))
    erfc_, erfinv_, lgamma_, digamma_ = (_in_place_unary(sp.erfc), _in_place_unary(sp.erfinv),
                                         _in_place_unary(sp.lgamma), _in_place_unary(sp.digamma))
    i0, i0_ = _unary(spm.i0), _in_place_unary(spm.i0)

    def polygamma(self, n):
        """ψ^(n)(x), the n-th derivative of digamma (n an int >= 0; 0: digamma), as torch's
        x.polygamma(n); the gradient is polygamma(n + 1, x)."""
        return apply(spm.polygamma, self, n=spm.polygamma_order(n))

    def polygamma_(self, n):
        n = spm.polygamma_order(n)
        return self._in_place_as("polygamma_", lambda x: x.polygamma(n))

    def logit(self, eps=None):
        """log(p / (1 - p)); with eps, p clamped to [eps, 1 - eps] first (as ta.logit)."""
        return apply(pw.logit, self, eps=plain(eps, "logit"))

    def logit_(self, eps=None):
        """logit, in place (see _in_place)."""
        return self._in_place("logit_", pw.logit, eps=plain(eps, "logit_"))

    def short(self):
        return self.to(np.int16)

    # torch's other dtype-named conversions (x.byte() for images, x.char())
    def byte(self):
        return self.to(np.uint8)

    def char(self):
        return self.to(np.int8)

    def bfloat16(self):
        """tinyattn has no bfloat16: the DTypeError that names it (not an AttributeError)."""
        return self.to("bfloat16")

    def quantile(self, q, dim=None, keepdim=False, *, interpolation="linear"):
        """The q-th quantiles along dim (of every entry for None), as torch's: q a number in
        [0, 1] or a 1-D tensor of them (then the result's first dim); interpolation "linear",
        "lower", "higher", "midpoint" or "nearest"; NaN where a NaN is among the entries. The
        gradient goes to the one or two entries interpolated."""
        return self._quantile("quantile", q, dim, keepdim, interpolation, False)

    def nanquantile(self, q, dim=None, keepdim=False, *, interpolation="linear"):
        """quantile of the entries that are not NaN (NaN where every one is)."""
        return self._quantile("nanquantile", q, dim, keepdim, interpolation, True)

    def _quantile(self, name, q, dim, keepdim, interpolation, ignore_nan):
        q_dtype = q.dtype if isinstance(q, Tensor) else None
        q = sp.quantile_q(name, q.numpy() if isinstance(q, Tensor) else q, q_dtype, self.dtype,
                          self.numel(), interpolation)
        return apply(sp.quantile, self, q=q, dim=dim, keepdim=keepdim,
                     interpolation=interpolation, ignore_nan=ignore_nan)

    def nanmedian(self, dim=None, keepdim=False):
        """median of the entries that are not NaN (NaN where there is none); with a dim, the
        named pair (values, indices), the gradient going to the entry picked."""
        if dim is None:
            if self.numel() == 0 and self.dtype.kind != "f":
                raise DimError(f"nanmedian: an empty {self.dtype} tensor (shape "
                               f"{fmt_shape(self.shape)}) has no median")
            return apply(sp.nanmedian, self)
        return self._picked("nanmedian", sp.nanmedian_index, return_types.nanmedian, dim,
                            keepdim)

    def kron(self, other):
        """The Kronecker product: the blocks self[i, j, ...] * other (the one with fewer dims
        given leading 1s), built from reshape and *, whose gradients it has."""
        other = self._as_tensor(other)
        n = max(self.ndim, other.ndim)
        a = self.reshape((1,) * (n - self.ndim) + tuple(self.shape))
        b = other.reshape((1,) * (n - other.ndim) + tuple(other.shape))
        out = a.reshape(tuple(v for d in a.shape for v in (d, 1))) * \
            b.reshape(tuple(v for d in b.shape for v in (1, d)))
        return out.reshape(tuple(p * r for p, r in zip(a.shape, b.shape, strict=True)))

    def bincount(self, weights=None, minlength=0):
        """How often each of 0, 1, ..., max occurs in this 1-D tensor of integers >= 0 (int64,
        at least minlength of them), or the sum of weights at each (float64, or float32 for
        float32 weights), as torch's (no gradient)."""
        weights = None if weights is None else self._as_tensor(weights)
        minlength = _int_argument("bincount", "minlength", minlength)
        sp.check_bincount(self.dtype, self.shape, weights, minlength)
        return _values("bincount", sp.bincount_values, self, weights, minlength=minlength,
                       backend=self.backend)

    def histc(self, bins=100, min=0, max=0):  # noqa: A002 - torch's names
        """The histogram of every entry in `bins` equal bins of [min, max] (the entries' own
        range if min == max), in this tensor's float dtype, as torch's (no gradient)."""
        sp.check_histc(self.dtype, bins)
        return _values("histc", sp.histc_values, self, bins=bins, low=float(min),
                       high=float(max), backend=self.backend)

    def histogram(self, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
        """(hist, bin_edges), as torch's: the histogram of every entry in `bins` equal bins of
        `range` (the entries' own min and max without one), or between the edges of a 1-D bins
        tensor; with weight, each entry counts its weight; with density, hist integrates to 1
        (makemore: `hy, hx = torch.histogram(t, density=True)`). No gradient."""
        weight = None if weight is None else self._as_tensor(weight)
        sp.check_histogram(self, bins, weight, range)
        if isinstance(bins, Tensor):
            edges = bins.detach().clone()
        else:
            low, high = (None, None) if range is None else (float(range[0]), float(range[1]))
            edges = _values("histogram_edges", sp.histogram_edges, self, bins=int(bins),
                            low=low, high=high, backend=self.backend)
        hist = _values("histogram", sp.histogram_values, self, edges, weight,
                       density=bool(density), backend=self.backend)
        return return_types.histogram(hist, edges)

    def gcd(self, other):
        """The greatest common divisor of each pair (>= 0; integers only, as torch's)."""
        return _values("gcd", self.backend.xp.gcd,
                       *sp.integer_pair("gcd", *_common_operands(self, other)))

    def lcm(self, other):
        """The least common multiple of each pair (>= 0; integers only, as torch's)."""
        return _values("lcm", sp.lcm_values,
                       *sp.integer_pair("lcm", *_common_operands(self, other)),
                       backend=self.backend)

    def gcd_(self, other):
        return self._in_place_as("gcd_", lambda x: x.gcd(other), other)

    def lcm_(self, other):
        return self._in_place_as("lcm_", lambda x: x.lcm(other), other)

    def heaviside_(self, values):
        return self._in_place_as("heaviside_", lambda x: x.heaviside(values), values)

    def heaviside(self, values):
        """0 where this is below 0 (or NaN), `values` where it is 0, 1 where above (values, of
        this tensor's dtype as torch requires, broadcast; no gradient, as torch has none)."""
        values = self._as_tensor(values)
        if values.dtype != self.dtype:
            raise DTypeError(f"heaviside: values is {values.dtype} but the input is "
                             f"{self.dtype}; torch takes one dtype (convert one with .to())")
        return _values("heaviside", sp.heaviside_values, self, values, backend=self.backend)

    def resize_(self, *sizes, memory_format=None):
        """This tensor given the shape `sizes` in place, as torch's: its first entries (in
        row-major order) kept in the same memory, which it grows into again after shrinking
        (torch's storage); new memory holds zeros (torch leaves it uninitialized). Refused for
        a tensor that requires grad (torch's rule): resize x.detach() or a copy instead."""
        _row_major("resize_", memory_format, preserve=True)
        if self.requires_grad:
            raise GraphError("resize_: cannot resize a tensor that requires grad (torch's "
                             "rule); resize a copy instead: x.detach().clone().resize_(...)")
        shape = _sizes(sizes, "resize_")
        n, flat = math.prod(shape), _storage(self._data)
        if n > flat.size:
            grown = self.backend.xp.zeros(n, dtype=self.dtype)
            grown[:flat.size] = flat
            flat = grown
        self._data = flat[:n].reshape(shape)
        bump_version(self)
        return self

    def resize_as_(self, the_template, memory_format=None):
        """resize_ to the_template's shape (torch's name and rules)."""
        return self.resize_(*the_template.shape, memory_format=memory_format)

    # ---- conversions and display ---------------------------------------------------------------

    def __array__(self, dtype=None, copy=None):
        """NumPy's protocol, which NumPy 2 trusts: copy=True (np.array(t)) a copy, never the
        tensor's memory; copy=None (np.asarray(t)) shared where no cast or transfer is needed,
        as t.numpy(); copy=False shared, or a ValueError where a copy cannot be avoided."""
        a = self.numpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError(f"__array__: Unable to avoid copy while creating an array as "
                                 f"requested (copy=False): this {a.dtype} tensor becomes "
                                 f"{np.dtype(dtype)} only in a copy")
            return a.astype(dtype)
        if self.backend.name != "numpy":  # (to_numpy copied it off the device)
            if copy is False:
                raise ValueError(f"__array__: Unable to avoid copy while creating an array as "
                                 f"requested (copy=False): the tensor is on "
                                 f"{self.backend.name}, and only a copy reaches the host")
            return a
        return a.copy() if copy else a

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's ufuncs meeting a tensor. A Python operator's (array + t, np.float32(2) * t,
        array == t) is the tensor's operator, on the graph; with out= (`a += t` for an array
        a) the array is written, as for np.asarray(t); any other (np.exp(t), np.isnan(t)) gives
        a tensor of NumPy's values, as torch's, refused where a tensor requires grad (NumPy's
        function has no gradient: torch refuses it too)."""
        names = _OPERATORS.get(ufunc) if method == "__call__" and not kwargs else None
        if names is not None and len(inputs) == 2:
            x, y = inputs
            return getattr(x, names[0])(y) if isinstance(x, Tensor) else getattr(y, names[1])(x)
        name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        out = kwargs.get("out")
        _check_ufunc(name, ufunc.__name__, inputs, out)
        arrays = [np.asarray(x) if isinstance(x, Tensor) else x for x in inputs]
        result = getattr(ufunc, method)(*arrays, **kwargs)
        if out is not None or result is None:  # (an array written, or ufunc.at)
            return result
        return tuple(map(self._from_ufunc, result)) if isinstance(result, tuple) \
            else self._from_ufunc(result)

    def _from_ufunc(self, a):
        """A ufunc's result as a tensor on this tensor's backend (anything but numbers kept)."""
        a = np.asarray(a)
        return Tensor._wrap(self.backend.asarray(a), self.backend) if a.dtype.kind in "biuf" \
            else a

    def __float__(self):
        return float(self._number("float()"))

    def __int__(self):
        return int(self._number("int()"))

    def _number(self, how):
        """The one value of a tensor of one element, for float(t) and int(t) (`how`)."""
        if self._data.size != 1:
            raise ValueError(f"{how}: only a tensor of one element can be converted to a Python "
                             f"number, got shape {fmt_shape(self.shape)} ({self._data.size} "
                             "elements)")
        return self.item()

    def __format__(self, spec):
        """f"{t:.2f}" as torch: a 0-d tensor formats as its number (f"{t}" too); any other
        tensor only with no spec (its str)."""
        if self.ndim == 0 and type(self) is Tensor:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __contains__(self, element):
        """`value in t`: whether any entry equals it (torch's (t == value).any()), any ndim."""
        if not isinstance(element, (Tensor, numbers.Number)):
            raise TypeError(f"`in`: a tensor can be searched for a tensor or a number, not a "
                            f"{type(element).__name__}")
        return bool((self == element).any())

    def __index__(self):
        """The one integer (or bool) of the tensor, as an int: [10, 20, 30][t], range(t)."""
        if self.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError(f"only integer tensors of a single element can be converted to an "
                            f"index, got a {self.dtype} tensor of shape {fmt_shape(self.shape)}")
        return int(self.item())

    def __repr__(self):
        # torch's text under ta.set_printoptions (display.PRINT_OPTS): widths, notation,
        # summary past `threshold` entries, and suffixes wrapped past `linewidth`
        values = self.numpy()
        body = display.values_text(values, len("tensor("))
        extra = []
        if display.shows_size(values):  # "[]" alone reads as shape (0,); "[...]" as nothing
            extra.append(f"size={fmt_shape(self.shape)}")
        if self.dtype != get_default_dtype() and (  # (shown by the values: ints, True/False)
                self._data.size == 0 or self.dtype not in (np.int64, np.bool_)):
            extra.append(f"dtype={self.dtype}")
        if self.backend.name != "numpy":
            extra.append(f"backend='{self.backend.name}'")
        if self._node is not None:
            extra.append("requires_grad=True" if self.is_leaf
                         else f"grad_fn=<{self.grad_fn.name()}>")
        return display.add_suffixes("tensor(" + body, extra, len("tensor("))

    def _repr_html_(self):
        """A notebook's view: shape, dtype, grad_fn and name, with a heatmap when 2-D."""
        made = self.grad_fn  # (its name as the repr gives it: <SoftmaxBackward0>)
        return display.tensor_html(self.numpy(), self.dtype, self.shape, self._node is not None,
                                   f"<{made.name()}>" if made is not None else None, self._name)


class memory_format:  # noqa: N801 - torch's name
    """torch's memory formats, for clone, contiguous and resize_: tinyattn's arrays are
    row-major (C order) only, so ta.contiguous_format and ta.preserve_format are taken and
    ta.channels_last (and channels_last_3d) refused."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"ta.{self.name}"


contiguous_format, preserve_format, channels_last, channels_last_3d = (memory_format(n) for n in (
    "contiguous_format", "preserve_format", "channels_last", "channels_last_3d"))


class UntypedStorage:
    """A tensor's memory as torch's x.untyped_storage(): its bytes, flat (size(), len,
    nbytes(), data_ptr(), tolist(), s[i], s[i] = v, iteration). Writes reach the tensors
    on that memory."""

    __slots__ = ("_array", "device")

    def __init__(self, array, device):
        self._array, self.device = array, device

    def size(self):
        return int(self._array.size)

    def __len__(self):
        return int(self._array.size)

    def nbytes(self):
        return int(self._array.nbytes)

    def element_size(self):
        return int(self._array.itemsize)

    def data_ptr(self):
        """The address of the memory's start (torch's): equal for tensors sharing memory."""
        return _address(self._array)

    def tolist(self):
        return self._array.tolist()

    def __iter__(self):
        return iter(self.tolist())

    def _entry(self, i):
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (numbers.Integral, Tensor)):
            raise TypeError(f"{type(self).__name__}: an index must be an int, got "
                            f"{type(i).__name__} {i!r:.40}")
        i, n = operator.index(i), self.size()
        if not -n <= i < n:
            raise IndexError(f"{type(self).__name__}: index {i} is out of range for a storage "
                             f"of size {n}")
        return i % n

    def __getitem__(self, i):
        return self._array[self._entry(i)].item()

    def __setitem__(self, i, value):
        self._array[self._entry(i)] = value

    def _header(self):
        return f"tinyattn.UntypedStorage(device={self.device})"

    def __repr__(self):
        values = "".join(f" {v}\n" for v in self.tolist())
        return f"{values}[{self._header()} of size {self.size()}]"


class TypedStorage(UntypedStorage):
    """A tensor's memory as torch's x.storage(): its entries in the tensor's dtype, flat from
    the start of the memory its views share (x[1].storage() is all of x's). torch's
    TypedStorage, which it prints as the values, one a line, then
    [...TypedStorage(dtype=float32, device=cpu) of size n]."""

    __slots__ = ()

    @property
    def dtype(self):
        return self._array.dtype

    def untyped(self):
        """The same memory as bytes (an UntypedStorage)."""
        return UntypedStorage(self._array.view(np.uint8), self.device)

    def _header(self):
        return f"tinyattn.TypedStorage(dtype={self.dtype}, device={self.device})"


def _row_major(name, fmt, preserve):
    """A memory_format argument checked: None or ta.contiguous_format (ta.preserve_format too
    where `preserve`); channels_last refused by name."""
    if fmt is None or fmt is contiguous_format or (preserve and fmt is preserve_format):
        return
    if fmt is preserve_format:
        raise ValueError(f"{name}: memory_format=ta.preserve_format is not supported by {name} "
                         "(as torch); use ta.contiguous_format")
    if isinstance(fmt, memory_format):
        raise ValueError(f"{name}: memory_format={fmt!r} is not supported: tinyattn's arrays are "
                         "row-major (C order) only; leave memory_format out (or permute the dims "
                         "yourself)")
    raise TypeError(f"{name}: memory_format must be ta.contiguous_format or ta.preserve_format, "
                    f"got {fmt!r}")


# ---- argument helpers ----------------------------------------------------------------------------


use_tensor_class(Tensor)  # apply's outputs and every .grad are Tensors
tell_effects_to(ag.side_effect)  # a Generator reseeded inside a captured fn: refused by name
_PLAIN = frozenset((int, float, Tensor))  # what _other passes through as it is
_INT_FLOAT = frozenset((int, float))  # a number the operators pass to apply_tensor


# torch's keyword names where a method's own differ (its schema's: x.view(size=(2, 3)),
# x.permute(dims=(1, 0))): {method: {torch's name: the method's own, None for its *args}}
_TORCH_KEYWORDS = {
    "view": {"size": None}, "reshape": {"shape": None}, "permute": {"dims": None},
    "repeat": {"repeats": None}, "expand": {"size": None}, "tile": {"dims": None},
    "broadcast_to": {"size": None}, "new_zeros": {"size": None}, "new_ones": {"size": None},
    "new_empty": {"size": None}, "resize_": {"size": None}, "sum_to_size": {"size": None},
    "tensor_split": dict.fromkeys(("sections", "indices", "tensor_indices_or_sections"),
                                  "indices_or_sections"),
    "split": {"split_size": "split_size_or_sections"},
    **{name: dict.fromkeys(("sections", "indices"), "indices_or_sections")
       for name in ("hsplit", "vsplit", "dsplit")},
    "mm": {"mat2": "other"}, "swapdims": {"dim0": "axis0", "dim1": "axis1"},
    "copy_": {"other": "src"}, "max": {"other": "dim"}, "min": {"other": "dim"},
}
# and NumPy's names, which torch's functions take for dim and keepdim (x.cumsum(axis=0))
_NUMPY_KEYWORDS = {"axis": "dim", "keepdims": "keepdim"}


def _renamed(name, args, kwargs, names, star_at):
    """(args, kwargs) with the keywords named in `names` (torch's) under the function's own
    names; one mapped to None is its *args, which start at position `star_at`."""
    kwargs = dict(kwargs)
    for given, own in names.items():
        if given not in kwargs:
            continue
        value = kwargs.pop(given)
        if own is None and len(args) > star_at:
            raise TypeError(f"{name}() got {given}= and sizes as arguments too: give one")
        if own is None:
            args = (*args, value)
        elif own in kwargs:
            raise TypeError(f"{name}() got {given}= and {own}=, two names of one argument")
        else:
            kwargs[own] = value
    return args, kwargs


def _torch_keywords(fn, names):
    """fn, taking the keyword names of `names` too (as _renamed maps them)."""
    params = list(inspect.signature(fn).parameters.values())
    star_at = next((i for i, p in enumerate(params) if p.kind is p.VAR_POSITIONAL), 0)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if kwargs and not names.keys().isdisjoint(kwargs):
            args, kwargs = _renamed(fn.__name__, args, kwargs, names, star_at)
        return fn(*args, **kwargs)

    return call


def _take_torch_keywords(owner, table, first=None):
    """Wrap each public function of `owner` (a class's or module's dict) that needs it with
    _torch_keywords: the names of `table`, NumPy's axis= and keepdims= where it has dim or
    keepdim (and no axis of its own, nor **kwargs), and input= for a first argument named
    `first`. (A module's: only the functions it defines.)"""
    for name, fn in list(owner.items()):
        if name.startswith("_") or not inspect.isfunction(fn) or \
                fn.__module__ != owner.get("__name__", fn.__module__):
            continue
        params = inspect.signature(fn).parameters
        names = dict(table.get(name, {}))
        if "axis" not in params and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            names.update({k: v for k, v in _NUMPY_KEYWORDS.items() if v in params})
        if first is not None and next(iter(params), None) == first:
            names.setdefault("input", first)
        if names:
            owner[name] = _torch_keywords(fn, names)
    return owner


for _name, _fn in _take_torch_keywords(dict(vars(Tensor)), _TORCH_KEYWORDS).items():
    if _fn is not vars(Tensor)[_name]:
        setattr(Tensor, _name, _fn)
del _name, _fn

# a NumPy ufunc that is a Python operator -> (the Tensor's method, the reflected one): array + t
# calls np.add(array, t), which goes to t.__radd__(array), on the graph
_OPERATORS = {
    np.add: ("__add__", "__radd__"), np.subtract: ("__sub__", "__rsub__"),
    np.multiply: ("__mul__", "__rmul__"), np.true_divide: ("__truediv__", "__rtruediv__"),
    np.floor_divide: ("__floordiv__", "__rfloordiv__"), np.remainder: ("__mod__", "__rmod__"),
    np.power: ("__pow__", "__rpow__"), np.matmul: ("__matmul__", "__rmatmul__"),
    np.bitwise_and: ("__and__", "__rand__"), np.bitwise_or: ("__or__", "__ror__"),
    np.bitwise_xor: ("__xor__", "__rxor__"), np.left_shift: ("__lshift__", "__rlshift__"),
    np.right_shift: ("__rshift__", "__rrshift__"), np.equal: ("__eq__", "__eq__"),
    np.not_equal: ("__ne__", "__ne__"), np.less: ("__lt__", "__gt__"),
    np.less_equal: ("__le__", "__ge__"), np.greater: ("__gt__", "__lt__"),
    np.greater_equal: ("__ge__", "__le__"),
}


_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
               "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


_TYPE_DTYPES = {name: np.dtype(dtype) for dtype, name in _TYPE_NAMES.items()}


def _type_named(name):
    """(device or None, dtype) for Tensor.type's string: torch's type names ("torch.DoubleTensor",
    "torch.cuda.LongTensor", and "tinyattn." for "torch.") or a NumPy dtype name ("float64")."""
    head, _, kind = name.rpartition(".")
    if head in ("torch", "tinyattn", "torch.cuda", "tinyattn.cuda") and kind.endswith("Tensor") \
            and kind[:-len("Tensor")] in _TYPE_DTYPES:
        return ("cuda" if head.endswith("cuda") else None), _TYPE_DTYPES[kind[:-len("Tensor")]]
    try:
        dtype = as_dtype(name)
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in "biuf":
        raise DTypeError(f"type: invalid type {name!r}; give a dtype or a type name such as "
                         "'torch.FloatTensor' or 'tinyattn.LongTensor'")
    return None, dtype


def _unpickle(cls, values, backend_name, requires_grad, name):
    t = cls._wrap(backends.backend(backend_name).asarray(values), backends.backend(backend_name))
    t._require(requires_grad)
    t._name = name
    return t


def to_args(args, device, dtype):
    """(device, dtype) from the positional forms of Tensor.to and Module.to: a device (a
    backend or its name), a dtype, both, or a tensor (its backend and dtype)."""
    if len(args) > 2:
        raise TypeError(f"to: takes at most a device and a dtype, got {len(args)} arguments")
    for arg in args:
        if isinstance(arg, Tensor):
            device, dtype = arg.backend, arg.dtype
        elif isinstance(arg, backends.Backend) or backends.alias_key(arg) is not None:
            device = arg
        else:
            dtype = arg
    return device, dtype


def _check_ufunc(name, short, inputs, out):
    """A NumPy ufunc (`name`, np.exp) on tensors takes them as values: never into a tensor
    (out=), nor from one that requires grad where it makes a new tensor (no gradient)."""
    if any(isinstance(o, Tensor) for o in out or ()):
        raise TypeError(f"{name}: out= cannot be a tensor (NumPy writes arrays); write into the "
                        "tensor with t.copy_(...), or give out=t.numpy()")
    if out is None and any(isinstance(x, Tensor) and x._node is not None for x in inputs):
        raise GraphError(f"{name}: the tensor requires grad, and a NumPy function has no "
                         f"gradient (torch: Can't call numpy() on Tensor that requires grad); "
                         f"use the tensor's own op (x.{short}() or tinyattn.{short}(x)), or "
                         f"{name}(x.detach()) for the values alone")


def _comparable(other):
    """Whether == compares `other` elementwise: a tensor, a number, an array (NumPy's, CuPy's);
    not a list or a tuple (torch's == is then Python's: False), None, a str, a dict or any
    other object."""
    return isinstance(other, (Tensor, numbers.Number)) or (
        hasattr(other, "dtype") and not isinstance(other, type))  # (np.float32 is no array)


def _no_sequence(other):
    """other, unless it is a list or a tuple: torch's operators and methods take tensors and
    numbers, not lists (t + [1, 2] is a TypeError there; == with one is False)."""
    if isinstance(other, (list, tuple)):
        raise TypeError(f"a tensor's operators and methods take tensors and numbers, not a "
                        f"{type(other).__name__} (torch's rule); make it a tensor first: "
                        "tinyattn.tensor(...)")
    return other


def _operand_of(name, other):
    """`other` if comparisons take it (see _comparable), else a DTypeError naming `name`."""
    if type(other) not in _PLAIN and not _comparable(other):
        raise DTypeError(f"{name}: cannot compare a tensor with a {type(other).__name__} "
                         f"({other!r:.40}); give a tensor or a number")
    return other


def _check_bits(name, *values, hint="use logical_and/or/xor for truth values of floats"):
    """A bitwise op's operands: integer or bool tensors and Python ints, as torch allows."""
    for v in values:
        kind = v.dtype.kind if isinstance(v, Tensor) else "b" if isinstance(v, bool) \
            else "i" if isinstance(v, int) else "f"
        if kind not in "biu":
            shown = v.dtype if isinstance(v, Tensor) else type(v).__name__
            raise DTypeError(f"{name}: takes integer or bool tensors, got {shown}; {hint}")


_NOT_HINT = ("use logical_not (or x == 0) for the truth values of floats, or keep the mask bool "
             "(a comparison, not .float())")


def _to_flags(args, copy):
    """Tensor.to's arguments without the bools after them, torch's positional non_blocking
    and copy: (the rest, copy)."""
    k = next(i for i, a in enumerate(args) if type(a) is bool)
    flags = args[k:]
    if len(flags) > 2 or any(type(a) is not bool for a in flags):
        raise TypeError(f"to: takes a device and a dtype, then non_blocking and copy, got "
                        f"{args!r}")
    return args[:k], flags[1] if len(flags) == 2 else copy


def _is_a_view(t):
    """Whether `t` was made as a view of another live tensor's memory (its version counter is
    shared, and the first tensor sharing it, the base, is another one with another array: a
    detach() holds the base's array itself)."""
    v = t._version_counter
    if v is None or not v[1]:
        return False
    base = v[1][0]()
    return base is not None and base is not t and base._data is not t._data


def _storage(a):
    """a's entries as a flat array, in the memory of the array a is the start of when it is a
    C-ordered front part of one (resize_ grows back into it, as into torch's storage)."""
    base = getattr(a, "base", None)
    if base is not None and getattr(base, "dtype", None) == a.dtype and a.flags.c_contiguous \
            and getattr(base, "flags", a.flags).c_contiguous and _address(base) == _address(a):
        return base.reshape(-1)
    return a.reshape(-1)


def _owner(a):
    """The array that owns a's memory (a itself when it is no view of another array)."""
    while getattr(a, "base", None) is not None and hasattr(a.base, "strides"):
        a = a.base
    return a


def _flat_memory(t, dtype):
    """The memory of t's array's owner as a flat array of `dtype` (its bytes reinterpreted),
    in that memory where it is one dense run (a copy of the values otherwise)."""
    if isinstance(t._data, np.generic):  # (a 0-d op result's scalar: an array from now on)
        t._data = np.array(t._data)
    owner = _owner(t._data)
    flat = views.memory_run(owner)
    flat = owner.reshape(-1) if flat is None else flat
    if flat.dtype == dtype:
        return flat
    raw = t.backend.xp.ascontiguousarray(flat).view(np.uint8)
    return raw[:raw.size - raw.size % dtype.itemsize].view(dtype)


def _address(array):
    """Where a NumPy or CuPy array's first entry is in memory (for storage_offset)."""
    pointer = getattr(array.data, "ptr", None)  # (CuPy's MemoryPointer)
    return array.__array_interface__["data"][0] if pointer is None else pointer


def _check_alpha(name, x, other, alpha):
    """torch's rule for add/sub's alpha: a float alpha needs a floating-point result."""
    if not isinstance(alpha, (float, np.floating)):
        return
    kinds = [v.dtype.kind if hasattr(v, "dtype") else "f" if isinstance(v, float) else
             "i" if isinstance(v, int) else np.asarray(v).dtype.kind for v in (x, other)]
    if "f" not in kinds:
        shown = other.dtype if isinstance(other, Tensor) else type(other).__name__
        raise DTypeError(f"{name}: alpha={alpha!r} is a float, but the inputs are integers "
                         f"({x.dtype} and {shown}): for integral input tensors, argument alpha "
                         "must not be a floating point number (torch's rule); give an int "
                         "alpha, or convert to float first")


def _with_alpha(name, x, other, alpha):
    """add's x + alpha * other (sub's x - alpha * other) for alpha != 1. For a float16 result
    as torch's: alpha must fit float16 (else a DTypeError), and the sum is computed in float32
    with alpha (and a number other) in float16, rounded once."""
    other = x._other(other)
    if x.dtype != np.float16 or isinstance(other, Tensor) and other.dtype != np.float16:
        scaled = _alpha_scaled(x, other, alpha)
        return x + scaled if name == "add" else x - scaled
    if math.isfinite(alpha) and abs(alpha) > 65504:
        raise DTypeError(f"{name}: alpha={alpha!r} does not fit float16 (its largest value is "
                         "65504): value cannot be converted without overflow (as torch)")
    # (one node, as torch's: alpha and a number other in float16, the sum in float32)
    return apply(hf.add_alpha if name == "add" else hf.sub_alpha, x, other, alpha=alpha)


def _alpha_scaled(x, other, alpha):
    """other * alpha as torch's add and sub take it: in the result type of x and other, so an
    int alpha does not widen a bool other to int64, nor a float one leave an integer other in
    float32 beside a float64 x; for a bool result alpha counts as a bool, as torch's."""
    target = result_type(x, other)
    if target == np.bool_:
        return other & bool(alpha) if isinstance(other, Tensor) else bool(other and alpha)
    if isinstance(other, Tensor) and other.dtype != target:
        other = other.to(target)
    return other * alpha


def _common_operands(x, other):
    """x and a tensor other cast to their result type (torch's promotion: a 0-d tensor does not
    widen one with dims, a bool with an integer counts as that integer); two bools stay."""
    if not isinstance(other, Tensor):
        return x, other
    target = result_type(x, other)
    return tuple(t if t.dtype == target else t.to(target) for t in (x, other))


def _half_tensors(*operands):
    """Whether every operand is a float16 tensor."""
    return all(isinstance(t, Tensor) and t.dtype == np.float16 for t in operands)


def _float_operands(x, other):
    """x and other (a tensor or a number) in the dtype torch computes a float function of
    the two in: their result type (dtypes.result_type: a 0-d tensor or a number does not
    widen a tensor with dims), the default float dtype for integers and bools."""
    target = result_type(x, other)
    if target.kind != "f":
        target = get_default_dtype()
    if not isinstance(other, Tensor):
        other = _fresh(other, dtype=target, backend=x.backend)
    return tuple(t if t.dtype == target else t.to(target) for t in (x, other))


def _logaddexp2(x, other):
    ln2 = math.log(2)
    return (x * ln2).logaddexp(other * ln2) / ln2


def _addc_operands(name, x, t1, t2, value):
    """addcmul's and addcdiv's operands in their result type (dtypes.result_type, as torch
    computes them: int32 + bool * bool stays int32), and value as that dtype takes it (cut
    toward 0 for an integer one, torch's cast); a bool result is refused, as torch has none."""
    target = result_type(x, t1, t2)
    if target.kind == "b":
        raise DTypeError(f"{name}: not implemented for bool tensors (torch's rule: its result "
                         "would be bool); convert them first with .long() or .float()")
    if target.kind in "iu":
        value = int(value)
    return (*(t.to(target) if isinstance(t, Tensor) and t.dtype != target else t
              for t in (x, t1, t2)), value)


def _softmax_input(x, dtype, name):
    """x (cast to dtype first, if given) for softmax: floating point, as torch has no
    integer or bool softmax (an integer dtype= is refused too, not ignored)."""
    x = x if dtype is None else x.to(dtype)
    if x.dtype.kind != "f":
        raise DTypeError(f"{name}: not implemented for {x.dtype} (torch's rule: floating point "
                         "only); give dtype=tinyattn.float32 (or another float dtype)")
    return x


def _refuse_bool(name, *operands):
    """A DTypeError naming `name` where torch has no bool kernel for it: every operand a bool
    tensor (or a Python bool)."""
    if all(isinstance(t, bool) or getattr(t, "dtype", None) == np.bool_ for t in operands):
        raise DTypeError(f"{name}: not implemented for bool tensors (torch's rule); convert "
                         "with .long() or .float() first")


def _keepdim_needs_dim(name, keepdim):
    """torch's max(), min() and median() take keepdim only with a dim: refuse it alone."""
    if keepdim:
        raise TypeError(f"{name}: keepdim=True needs a dim (torch's rule: x.{name}(dim, "
                        f"keepdim=True)); for every dim kept as size 1, x.a{name}(keepdim=True)"
                        if name != "median" else
                        "median: keepdim=True needs a dim (torch's rule: x.median(dim, "
                        "keepdim=True))")


def _via_float32(fn, *operands):
    """fn on float16 tensors (and numbers) computed in float32 and rounded to float16 once,
    as torch's fused float16 kernels (add's alpha, div's trunc); gradients flow back through
    the casts."""
    return fn(*(t.float() if isinstance(t, Tensor) else t for t in operands)).half()


def _correction(name, unbiased, correction):
    """var's and std's correction from torch's two spellings, unbiased (True: 1, False: 0, the
    default True) or correction; both given is a TypeError, as torch's."""
    if unbiased is not None:
        unbiased = _flag(name, "unbiased", unbiased)
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}: got both unbiased={unbiased!r} and correction="
                        f"{correction!r}; give one (unbiased=False is correction=0)")
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _check_int_scalars(name, dtype, **scalars):
    """torch's rule for the scalars of addmm and its kin: with an integer (or bool) result,
    beta and alpha must be ints (torch's addr refuses a float one; its addmm would cut 0.5
    to 0 silently, where NumPy would make the result a float)."""
    if dtype.kind not in "iub":
        return
    for key, v in scalars.items():
        if isinstance(v, (float, np.floating)):
            raise DTypeError(f"{name}: {key}={v!r} is a float, but the inputs are {dtype}: for "
                             f"integral input tensors, argument {key} must not be a floating "
                             f"point number (torch's rule); give an int {key}, or convert the "
                             "tensors to float first")


def _in_dtype(out, dtype):
    """A sum's result in the dtype= asked for: an integer or bool one is summed in int64 (NumPy
    and the ops do), then cut back, which wraps exactly as torch's sum in that dtype does."""
    dtype = as_dtype(dtype)
    return out if out.dtype == dtype else out.to(dtype)


def _reduce_args(dim, keepdim, axis, keepdims, name):
    """PyTorch's dim/keepdim or NumPy's axis/keepdims, as the reduce ops' dim/keepdim (a bool:
    keepdim="no" or None is refused naming `name`, as torch refuses it)."""
    if axis is not None:
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    if isinstance(dim, list):
        dim = tuple(dim)
    return {"dim": dim, "keepdim": _flag(name, "keepdim", keepdim)}


def _flag(name, what, value):
    """A switch torch takes only as a bool (keepdim, descending, largest, dropout's training):
    0, 1, None or "False" is a TypeError naming `name`, where its truth would have been taken
    without a word ("False" is true). NumPy's bool counts as a bool."""
    if value.__class__ is bool:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"{name}: {what} must be a bool, got {type(value).__name__} {value!r}")


# ---- values with no gradient: comparisons, tests, indices ---------------------------------------


_VALUE_OPS = {}  # name -> the Op: one per kind of value, made on first use


def _seen_read(t, how):
    """Tell the tracers that Python read t's values (a captured step cannot replay that)."""
    for tracer in ag.current_tracers():
        tracer.read(t, how)


def _values(name, fn, *inputs, **params):
    """fn(*arrays, **params) on the inputs (tensors as their arrays), a tensor with no gradient:
    a comparison, a test (isnan), an index (argmax). Made through apply, as an op called `name`,
    so what watches ops sees it too (explain mode; a captured step, which replays it)."""
    op = _VALUE_OPS.get(name)
    if op is None:
        op = _VALUE_OPS[name] = Op(name, _run_values, "no gradient (a value, not differentiable)",
                                   grads=())
    inputs = [x.detach() if isinstance(x, Tensor) and x._node is not None else x for x in inputs]
    return apply(op, *inputs, fn=fn, **params)


def _run_values(be, *arrays, fn, **params):
    """out = fn(*inputs, **params), with no gradient"""
    return fn(*arrays, **params), None


def _check_values(check, *inputs, **params):
    """check(*arrays, **params), which raises where a value is wrong (an index out of range, a
    negative std), run as an op: a captured step's replay runs it again on each call's values,
    where a check in Python would run only while recording."""
    _values("value_check", _checked, *inputs, check=check, **params)


def _checked(*arrays, check, **params):
    """out = nothing (an empty array) once check(*inputs, **params) has passed"""
    check(*arrays, **params)
    return arrays[0].reshape(-1)[:0]


def _compared(a, b, test):
    """test(a, b) on the arrays (or a Python number b), both in their promoted dtype first: a
    Python number goes into the tensor's dtype as torch casts it (uint8 255 == -1 wraps, a
    float16 2049 is 2048)."""
    if hasattr(b, "dtype") and b.dtype != a.dtype:
        common = result_type(a, b)
        a, b = a.astype(common, copy=False), b.astype(common, copy=False)
    elif type(b) is int and not 0 <= b <= 127:  # (0..127 fit every dtype as they are)
        return _compared_with_int(a, b, test)
    elif isinstance(b, float) and a.dtype.kind != "f":
        a = a.astype(get_default_dtype())
    elif type(b) is float and not -65504.0 <= b <= 65504.0:  # (past float16: inf, quietly)
        with quiet():
            return test(a, b)
    return test(a, b)


def _compared_with_int(a, b, test):
    """test(a, b) for a Python int b: wrapped into an integer a's dtype (torch's cast); past
    what torch reads (int64 for a bool a, -2**63..2**64-1 else) refused; for a float a, b in
    its dtype (±inf past float16's range, without NumPy's overflow warning)."""
    kind = a.dtype.kind
    if kind in "iu":
        return test(a, _int_in(b, a.dtype, wrap=True))
    if not -2**63 <= b < (2**63 if kind == "b" else 2**64):  # (torch: "Overflow when unpacking")
        raise TypeError(f"the Python int {b} is past what a {a.dtype} tensor compares with "
                        f"(-2**63..{'2**63' if kind == 'b' else '2**64'} - 1): value cannot be "
                        "converted without overflow")
    with quiet():
        return test(a, b)


def _truth(a, how, axis, keepdims):
    """a.any() or a.all() over axis, an array (NumPy gives a scalar for a whole reduction);
    uint8 in, uint8 0/1 out, as torch keeps it (the old byte masks)."""
    out = getattr(a, how)(axis=axis, keepdims=True)
    if a.dtype == np.uint8:
        out = out.astype(np.uint8)
    return out if keepdims else out.squeeze(axis)


def norm_cast(name, x, dtype):
    """x cast to a norm's dtype= as torch casts it (Tensor.norm, linalg's norms): a floating
    input to a floating dtype at least as wide (float16 to float32, not float64 to float32);
    None leaves x as it is."""
    if dtype is None:
        return x
    want = as_dtype(dtype)
    if x.dtype.kind != "f":
        raise DTypeError(f"{name}: needs a floating-point input, got {x.dtype} (torch's rule "
                         "too); convert it with .float()")
    if want.kind != "f":
        raise DTypeError(f"{name}: dtype must be a floating dtype (torch's rule), got {want}")
    if want.itemsize < x.dtype.itemsize:
        raise DTypeError(f"{name}: dtype={want} for a {x.dtype} input: the input must convert "
                         f"to it without narrowing (torch's rule), so {x.dtype} or wider")
    return x.to(want)


def _power(name, run, base, exponent):
    """run() (base ** exponent, in place or not); where an integer base met a negative integer
    number as its power, the op's ShapeError becomes the DTypeError that says so."""
    try:
        return run()
    except ShapeError:
        _refuse_negative_int_power(name, base, exponent)
        raise


def _clamp_bounds(lo, hi, name):
    """clamp's bounds as torch's two overloads take them: both numbers (or None), or both
    tensors (or None). A number with a tensor is torch's TypeError, but for a 0-d tensor that
    needs no grad, which torch's argument parser reads as a number (its value). A NumPy number
    is the Python number it stands for (ops/op.py's plain): x.clamp(np.finfo(float).eps)
    keeps a float32 x float32, as torch's."""
    lo, hi = plain(lo, name), plain(hi, name)
    if lo is None and hi is None:
        raise ValueError(f"{name}: needs min, max or both (torch's rule: at least one of them "
                         "must not be None)")
    lo_t, hi_t = isinstance(lo, Tensor), isinstance(hi, Tensor)
    if lo_t == hi_t or lo is None or hi is None:
        return lo, hi
    t = lo if lo_t else hi
    if t.ndim == 0 and not t.requires_grad:
        return (t.item(), hi) if lo_t else (lo, t.item())
    raise TypeError(f"{name}: got a {'tensor' if lo_t else 'number'} min and a "
                    f"{'tensor' if hi_t else 'number'} max; torch takes both bounds as numbers "
                    "or both as tensors (a 0-d tensor that needs no grad counts as a number): "
                    "write the number n as tensor(n)")


def _int_bounds(dtype, lo, hi, name):
    """clamp's number bounds for an integer tensor, cast into its dtype as torch casts them
    (a fill value's rule: 300 refused for int8, -1 wrapped into uint8 as 255)."""
    if dtype.kind == "b":
        return lo, hi
    return tuple(b if b is None or isinstance(b, Tensor) else ix.fill_value(b, dtype, name)
                 for b in (lo, hi))


def _is_bool_tensor(v):
    return isinstance(v, Tensor) and v.dtype == np.bool_


def _refuse_bool_power(name, base, exponent):
    """torch has no bool ** bool tensor power ("pow" not implemented for 'Bool')."""
    shown = [f"bool tensor {fmt_shape(v.shape)}" if isinstance(v, Tensor) else repr(v)
             for v in (base, exponent)]
    raise DTypeError(f"{name}: a bool cannot be raised to a bool tensor's power, nor a bool "
                     f"tensor to one (base: {shown[0]}, exponent: {shown[1]}), as in torch; "
                     "convert one to integers first, e.g. x.long()")


def _refuse_negative_int_power(name, base, exponent):
    """After `base ** exponent` failed: a DTypeError saying so if it was an integer tensor raised
    to a negative Python int (NumPy's ValueError, torch's RuntimeError). A tensor of negative
    integer exponents is computed, as torch computes it (ops/elementwise.py power)."""
    if not (isinstance(base, Tensor) and base.dtype.kind in "iub" and type(exponent) is int):
        return
    if exponent < 0:
        raise DTypeError(f"{name}: integers cannot be raised to a negative integer power (base: "
                         f"{base.dtype} tensor {fmt_shape(base.shape)}, exponent: {exponent}), "
                         "the result would not be an integer; convert the base to float first, "
                         "e.g. x.float() ** -1")


def _repeat_counts(repeats, n, axis):
    """repeat_interleave's repeats (an int, or one int per entry of a dim of n entries, in a
    tensor, array or list) checked as torch checks them: an int, or a tuple of ints."""
    counts = repeats.numpy() if isinstance(repeats, Tensor) else repeats
    kind = np.asarray(counts).dtype.kind if not isinstance(counts, (bool, int)) else "i"
    if isinstance(counts, (bool, np.bool_)) or kind == "b" or (
            kind not in "iu" and np.size(counts) > 0):
        shown = repeats.dtype if isinstance(repeats, Tensor) else type(repeats).__name__
        raise DTypeError(f"repeat_interleave: repeats must be an int or integers (an int64 "
                         f"tensor, a list of ints), got {shown} {repeats!r}")
    if np.ndim(counts) > 1:
        raise ShapeError(f"repeat_interleave: repeats must be an int or 1-D, got shape "
                         f"{fmt_shape(np.shape(counts))}")
    flat = [int(c) for c in np.ravel(counts)]
    if any(c < 0 for c in flat):
        raise ValueError(f"repeat_interleave: repeats must be >= 0, got {min(flat)}")
    if np.ndim(counts) == 0:
        return flat[0]
    if len(flat) not in (1, n):
        raise ShapeError(f"repeat_interleave: {len(flat)} repeats for the {n} entries of dim "
                         f"{axis}; give one per entry (or a single int)")
    return tuple(flat)


def _check_output_size(output_size, counts, n):
    """repeat_interleave's output_size against the length the repeats give (torch refuses
    another)."""
    total = counts * n if isinstance(counts, int) else sum(counts) * (n if len(counts) == 1
                                                                      else 1)
    if output_size != total:
        raise ValueError(f"repeat_interleave: output_size={output_size!r} but the repeats give "
                         f"{total} entries (torch's check: leave it out, or give the length)")


def _xlogy_flat(x, y):
    """Where xlogy's x is 0 and y <= 0 or y = inf: its value (and x-gradient) is 0 there."""
    return (x == 0) & ((y <= 0) | (y == np.inf))


def _flat_arg(a, find, keepdim):
    """find (argmax/argmin) over the flattened array, an int64 array (dims kept as 1s)."""
    flat = find(a.reshape(-1), keepdims=True).astype(np.int64)  # (1,): an array, not a scalar
    return flat.reshape((1,) * a.ndim if keepdim else ())


def _shape_args(args, name="shape"):
    """reshape(2, 3) and reshape((2, 3)) alike, as a tuple of ints: a float size (2.0) is an
    error, as in torch (int() would cut 2.7 to 2 without a word)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    try:
        return tuple(map(operator.index, args))  # ints, NumPy ints, integer 0-d tensors
    except TypeError:
        raise DTypeError(f"{name}: sizes must be ints, got {tuple(args)!r}") from None


def _grad_flag(flag):
    """requires_grad given as a bool (NumPy's too); 1, None or "yes" is a TypeError, as torch
    refuses it (its truth would be taken without a word)."""
    return _flag("tensor", "requires_grad", flag)


def _int_list(name, what, values):
    """Split sizes or cut indices given as a tuple or list of ints (NumPy ints and integer
    0-d tensors too; no float) as a list; anything else a TypeError naming `name`. (A bool
    inside the list counts as its int, as torch's int lists take it.)"""
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"{name}: {what} must be an int or a tuple of ints, got "
                        f"{type(values).__name__} {values!r}")
    return [int(v) if isinstance(v, bool) else _int_argument(name, what, v) for v in values]


def _no_bools(name, what, args):
    """Refuse a bool given as one of `args` where torch takes only ints (repeat(True),
    flip(True), split(True)): Python counts True as 1, torch does not. (Inside a tuple or a
    list torch takes a bool as its int, as a new tensor's sizes: ones(2, False).)"""
    for v in args:
        if isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{name}: {what} must be ints, got {v!r}")


def _sizes(args, name):
    """A new tensor's shape, read as _shape_args reads it; a negative size is a ShapeError
    naming the function (NumPy's was "negative dimensions are not allowed")."""
    shape = _shape_args(args, name)
    if shape and min(shape) < 0:
        raise ShapeError(f"{name}: sizes must be >= 0, got {fmt_shape(shape)}")
    return shape


def _count(name, what, n, message=None):
    """An int count (eye's n and m, linspace's steps, randperm's n) >= 0, as torch checks (a
    bool is no count)."""
    try:
        if isinstance(n, bool):  # (an int to Python, not to torch: eye(True) is refused)
            raise TypeError
        n = operator.index(n)
    except TypeError:
        raise DTypeError(f"{name}: {what} must be an int, got {type(n).__name__} {n!r}") \
            from None
    if n < 0:
        raise ShapeError(f"{name}: {message or what + ' must be >= 0'}, got {n}")
    return n


def _int_of(n):
    """A count given as a one-element integer tensor (topk(x, mask.sum())) as its int, as
    torch takes it; anything else as given, for the caller's own check to name."""
    if isinstance(n, Tensor) and n.dtype.kind in "iu" and n._data.size == 1:
        return int(n.item())
    return n


def _int_argument(name, what, value):
    """An int setting (an index, a bound, a step) as an int: a NumPy int or a one-element
    integer tensor too; a float or a bool is a TypeError naming `name` and `what`."""
    value = _int_of(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: {what} must be an int, got {value!r}")
    return int(value)


def _cond(mask, like):
    """A bool mask as a Tensor on `like`'s backend."""
    if isinstance(mask, Tensor):
        return mask
    return _fresh(mask, backend=like.backend)


def _bool_mask(name, mask, like):
    """_cond's mask, refused unless bool, as torch's masked ops refuse it (an integer mask
    would otherwise index by position, a silently different result)."""
    mask = _cond(mask, like)
    if mask.dtype != np.bool_:
        raise DTypeError(f"{name}: the mask must be bool, got {mask.dtype} "
                         f"{fmt_shape(mask.shape)} (compare it first: mask != 0)")
    return mask


def _index(index, be, name="getitem"):
    """Tensors and lists inside an index become backend arrays; the rest stays as it is."""
    if isinstance(index, tuple):
        return tuple(_index_part(p, be, name) for p in index)
    return _index_part(index, be, name)


def _viewable(shape, strides, new_shape):
    """Whether memory laid out as (shape, strides) reads as new_shape without a copy (torch's
    computeStride): each run of dims that are contiguous with one another must split or merge
    into whole dims of the new shape. (Byte strides do: the test is scale-free.)"""
    if not shape or math.prod(shape) == 0:
        return True
    view_d = len(new_shape) - 1
    base = strides[-1]
    numel = view_numel = 1
    for d in range(len(shape) - 1, -1, -1):
        numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != numel * base):  # a run ends
            while view_d >= 0 and (view_numel < numel or new_shape[view_d] == 1):
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != numel:
                return False
            if d > 0:
                base, numel, view_numel = strides[d - 1], 1, 1
    return view_d == -1


def _viewed(x, op, **params):
    """op(x) for a view op, a view of x's memory even where x's array is a NumPy scalar (what
    NumPy makes a 0-d op's result), which no array can share: x gets it as a 0-d array first,
    as an in-place write would give it (_writable).
    (Whether out is a view of x: it shares x's version counter. A copy has none, or, made
    in inference_mode, one of its own.)"""
    out = apply(op, x, **params)
    v = out._version_counter
    if (v is None or v is not x._version_counter) and isinstance(x._data, np.generic):
        x._data = np.array(x._data)
        out = apply(op, x, **params)
    return out


def _refuse_copying_view(x, shape):
    """view's error (torch's) where x's memory cannot be read as `shape` without a copy."""
    if _viewable(x.shape, x._data.strides, shape):
        return
    strides = tuple(s // x._data.itemsize for s in x._data.strides)
    raise ShapeError(f"view: a tensor of shape {fmt_shape(x.shape)} and strides "
                     f"{fmt_shape(strides)} (not laid out in order: a transpose, permute or "
                     f"stepped slice of another) cannot be viewed as {fmt_shape(shape)}: view "
                     "size is not compatible with input tensor's size and stride (at least one "
                     "dimension spans across two contiguous subspaces); use .reshape(...) "
                     "instead, which copies, or .contiguous().view(...)")


def _reinterpret(a, dtype):
    """a's bytes read as `dtype` (view(dtype))"""
    return a.view(dtype)


def _index_steps(index):
    """The index as one or two NumPy indices applied in turn, giving PyTorch's result.

    PyTorch applies integers before arrays: on a (3, 4, 5) tensor x[0, :, [1, 2]] is (4, 2),
    where NumPy, which counts the 0 as an array index separated from [1, 2] by the slice, puts
    the array dims first: (2, 4). So an index with both is split: the integers first (a view),
    then the rest."""
    if not isinstance(index, tuple):
        return (index,)
    ints = [isinstance(p, (int, np.integer)) and not isinstance(p, (bool, np.bool_))
            for p in index]
    # arrays, and 0-d bools (True: a new dim of size 1, False: of size 0), which both NumPy and
    # torch count as array indices: x[1, :, True] is (4, 5, 1) in torch, (1, 4, 5) in NumPy
    arrays = [hasattr(p, "ndim") and (p.ndim > 0 or p.dtype == np.bool_) or type(p) is bool
              for p in index]
    if not any(ints) or not any(arrays):
        return (index,)
    first, rest = [], []
    for p, is_int, is_array in zip(index, ints, arrays, strict=True):
        if is_int:
            first.append(p)
        elif p is None:
            rest.append(p)
        elif p is Ellipsis:
            first.append(p)
            rest.append(p)
        else:  # a slice or an array: it keeps its dims through the first step
            first.extend([slice(None)] * _dims_spanned(p, is_array))
            rest.append(p)
    return tuple(first), tuple(rest)


def _no_empty_ellipsis(index, ndim):
    """The index without its Ellipsis where that stands for no dims and there are array parts:
    torch then counts the arrays either side of it as adjacent (x[:, [0, 1], ..., [1, 2]] of a
    (3, 4, 5) x is (3, 2)), where NumPy's rule, which counts any Ellipsis as a separator, puts
    the array dims first. (Without arrays it stays: x[...] of a 0-d x is a view, x[()] not.)"""
    if not isinstance(index, tuple) or not any(p is Ellipsis for p in index):
        return index
    arrays = [_is_array_part(p) for p in index]
    if not any(arrays):
        return index
    spanned = sum(_part_dims(p, is_array) for p, is_array in zip(index, arrays, strict=True))
    return index if spanned < ndim else tuple(p for p in index if p is not Ellipsis)


def _is_array_part(p):
    """Whether an index part is an array (an integer array of dims, or any bool mask)."""
    return hasattr(p, "ndim") and (p.ndim > 0 or p.dtype == np.bool_) or type(p) is bool


def _check_masks(parts, shape, name):
    """A DimError that names the mask's shape and the tensor's, as torch's "The shape of the
    mask [8, 6] at index 0 does not match the shape of the indexed tensor [40, 6] at index 0",
    where a bool mask in the index (`parts`, as _index gives it) misfits the dims it covers;
    else nothing (the caller raises its own error)."""
    parts = parts if isinstance(parts, tuple) else (parts,)
    arrays = [_is_array_part(p) for p in parts]
    spanned = sum(_part_dims(p, a) for p, a in zip(parts, arrays, strict=True))
    d = 0
    for p, is_array in zip(parts, arrays, strict=True):
        if p is Ellipsis:
            d += max(len(shape) - spanned, 0)
            continue
        if is_array and type(p) is not bool and p.dtype == np.bool_ and p.ndim:
            covered = tuple(shape[d:d + p.ndim])
            if tuple(p.shape) != covered:
                k = next((k for k, (m, n) in enumerate(zip(p.shape, covered, strict=False))
                          if m != n), len(covered))
                told = (f"dim {d + k}: {p.shape[k]} entries for {covered[k]}" if k < len(covered)
                        else f"dims {d}..{d + p.ndim - 1}, past its last dim {len(shape) - 1}")
                raise DimError(f"{name}: the bool mask {fmt_shape(p.shape)} does not match the "
                               f"indexed tensor {fmt_shape(shape)} at {told}; a mask must have "
                               "the shape of the dims it covers") from None
        d += _part_dims(p, is_array)


def _index_shown(index):
    """An index for a message, its tensors and arrays by dtype and shape, not by value."""
    def shown(p):
        if getattr(p, "ndim", 0):
            return f"<{str(p.dtype).removeprefix('torch.')} {fmt_shape(p.shape)}>"
        return repr(p)
    return "[" + ", ".join(map(shown, index)) + "]" if isinstance(index, tuple) else shown(index)


def _part_dims(p, is_array):
    """How many of the indexed tensor's dims an index part spans (None and ... none)."""
    if p is None or p is Ellipsis:
        return 0
    return _dims_spanned(p, is_array) if is_array or type(p) is bool else 1


def _dims_spanned(p, is_array):
    """How many of the indexed tensor's dims an index part other than an int spans: a bool
    mask its own number of dims (a 0-d one, or True or False, none: it adds a dim), any other
    part one."""
    if type(p) is bool:
        return 0
    return p.ndim if is_array and p.dtype == np.bool_ else 1


def _can_store(src, dst):
    """Whether an in-place op may write `src` values into a `dst` tensor (torch's canCast)."""
    if dst.kind == "b":
        return src.kind == "b"
    return category(src) <= category(dst)


def _index_tensor(index, like, name):
    """An integer index (tensor, array or list) as a Tensor on `like`'s backend."""
    if not isinstance(index, Tensor):
        index = _fresh(index, backend=like.backend)
    if index.dtype.kind not in "iu":
        raise DTypeError(f"{name}: index must hold integers, got {index.dtype}; use .long()")
    return index


def _check_slots(name, index, shape, axis):
    """A DimError naming `name` unless every entry of the integer tensor `index` is in 0..n-1
    along dim `axis` of `shape`: torch's gather, index_select, index_add and index_copy refuse
    negative indices (x[i], take_along_dim and index_fill count them from the end). An op, so
    that a captured step checks each call's index."""
    _check_values(_slots_in_range, index, where=name, shape=shape, axis=axis)


def _slots_in_range(a, where, shape, axis):
    """_check_slots' check, on the index array `a` (`where`: the function's name)"""
    if a.size and (int(a.min()) < 0 or int(a.max()) >= shape[axis]):
        raise sh.out_of_range(where, a, shape, axis, negatives=False)


def _flat_in_range(a, where, shape):
    """put's check: every index in -n..n-1 for a tensor of `shape` (n entries), read flat"""
    n = math.prod(shape)
    if a.size and not -n <= int(a.min()) <= int(a.max()) < n:
        worst = int(a.max()) if int(a.max()) >= n else int(a.min())
        raise DimError(f"{where}: index {worst} is out of range for a tensor of {n} entries "
                       f"(shape {fmt_shape(shape)}); it takes -{n}..{n - 1}")


def _same_dtype(name, what, source, like):
    """A DTypeError unless `source` has `like`'s dtype: torch's index_add, index_copy,
    index_put and masked_scatter write it unconverted (no promotion, no cast)."""
    if source.dtype != like.dtype:
        raise DTypeError(f"{name}: {what} {'are' if what.endswith('s') else 'is'} "
                         f"{source.dtype} but this tensor is {like.dtype}; they must be the same "
                         f"dtype, as in torch (convert one: {what}.to({like.dtype}))")


_INDEX_DTYPES = frozenset((np.dtype(np.int64), np.dtype(np.int32)))  # positions, as torch's


def _index_part(p, be, name="getitem"):
    if isinstance(p, Tensor):
        dtype = p.dtype
        if dtype in _INDEX_DTYPES:  # (the common case first: one set lookup)
            # 0-d: an int, as in torch: x[t] is a view, and its dims go where an int's go
            # (NumPy's 0-d array is an array)
            return p.__index__() if p._data.ndim == 0 else p._data
        kind = dtype.kind
        if kind == "b":
            return p._data
        if dtype == np.uint8:  # torch's old byte masks: a mask still, not positions
            return _byte_mask(p._data, name)
        if kind not in "iu":
            raise DTypeError(f"{name}: index tensors must be integer or bool, got {dtype}")
        if p._data.ndim == 0:  # (any 0-d integer is an int, as in torch)
            return p.__index__()
        raise DTypeError(f"{name}: index tensors must be int64, int32, uint8 (a mask) or bool, "
                         f"got {dtype} (torch: tensors used as indices must be long, int, byte "
                         "or bool tensors); convert it with .long()")
    if isinstance(p, (list, np.ndarray)):
        if isinstance(p, list) and not p:  # [] picks nothing (NumPy reads it as float64)
            return be.xp.zeros(0, dtype=np.int64)
        if getattr(p, "dtype", None) == np.uint8:  # (a uint8 array: a mask too, as torch)
            return _byte_mask(be.asarray(p), name)
        return be.asarray(p)
    return p


def _byte_mask(a, name):
    """A uint8 index read as the bool mask torch reads it as (with torch's warning); NumPy would
    read its 0s and 1s as positions."""
    warn_user(f"{name}: indexing with dtype uint8 is deprecated, please use a dtype bool "
              "instead (as in torch: it is read as a mask, not as positions)", UserWarning)
    return a.astype(np.bool_)


def _unique_out(x, values, inverse, counts, return_inverse, return_counts):
    """unique's result: the values, then the inverse and counts asked for (int64 tensors)."""
    out = (_fresh(values, backend=x.backend),)
    if return_inverse:
        out += (_fresh(np.asarray(inverse, dtype=np.int64), backend=x.backend),)
    if return_counts:
        out += (_fresh(np.asarray(counts, dtype=np.int64), backend=x.backend),)
    return out[0] if len(out) == 1 else out


def _fresh(data, dtype=None, requires_grad=False, backend=None):
    """A new leaf tensor holding a copy of `data` (lists and Python floats in the default
    dtype, arrays and tensors in their own): tinyattn's own constructor, which tensor() and
    the library use; Tensor(...) is torch's legacy one (_legacy_init)."""
    be = backends.get_backend() if backend is None else backends.backend(backend)
    t = Tensor._wrap(_to_array(data, dtype, be), be)
    if ag._inference.get():  # (made in inference_mode: an inference tensor)
        ag.mark_inference(t)
    if _grad_flag(requires_grad):
        t._require(True)
    return t


def _legacy_init(t, args, device, backend, kwargs):
    """Tensor.__init__: t made as torch's legacy Tensor(*args, device=) makes a tensor."""
    size = _size_keyword(args, kwargs)
    if kwargs:
        name = next(iter(kwargs))
        raise TypeError(f"Tensor(): got an unexpected keyword argument {name!r}: as torch's, "
                        "Tensor(...) takes data or sizes (and device=) only; for dtype= or "
                        f"requires_grad= make it with tinyattn.tensor(data, {name}=...)")
    if device is not None and backend is not None and \
            backends.backend(device) is not backends.backend(backend):
        raise ValueError(f"Tensor(): device={device!r} and backend={backend!r} name two "
                         "backends: give one")
    where = backend if device is None else device
    be = backends.get_backend() if where is None else backends.backend(where)
    t.backend = be
    t._grad = t._name = t._node = t._version_counter = None
    if size is not None:  # (() or []: a 0-d tensor, as torch's)
        t._data = be.xp.zeros(_sizes(tuple(size), "Tensor"), get_default_dtype())
    elif len(args) == 1 and isinstance(args[0], Tensor):
        _alias_into(t, args[0], be)
    else:
        t._data = _legacy_array(args, be, backend is not None)


def _size_keyword(args, kwargs):
    """torch's Tensor(size=(2, 3)), popped from kwargs: the sizes, a tuple or list of ints
    given alone (None without it)."""
    size = kwargs.pop("size", None)
    if size is None:
        return None
    if args or not isinstance(size, (tuple, list)) or \
            not all(_index_like(n) and not isinstance(n, bool) for n in size):
        raise TypeError(f"Tensor(): size= takes a tuple or list of ints and no data or sizes "
                        f"besides, as torch's; got size={size!r}"
                        + (f" with {len(args)} positional argument(s)" if args else ""))
    return size


def _alias_into(t, src, be):
    """Tensor(src): t is src's alias (torch's: the same memory, dtype and version counter,
    and on the graph, as torch's AliasBackward, where src requires grad)."""
    if src.backend is not be:
        t._data = _to_array(src, src.dtype, be)  # (another backend: a copy there)
        return
    if src._node is not None and ag.is_grad_enabled():
        out = apply(sh.reshape, src, shape=src.shape)  # (a view of src, recorded)
        t._data, t._node = out._data, out._node
    else:
        t._data = src._data
    share_version(src, t)


def _legacy_array(args, be, backend_given):
    """The array of torch's legacy Tensor(*args): data in the default dtype, or sizes."""
    dtype = get_default_dtype()
    if len(args) == 1:
        data = args[0]
        if backend_given and hasattr(data, "dtype") and hasattr(data, "shape") and \
                not isinstance(data, np.generic):
            return _to_array(data, None, be)  # tinyattn's older Tensor(array, backend=)
        if type(data).__name__ == "Size" and isinstance(data, tuple):  # torch.Size: sizes
            args = tuple(data)
        elif isinstance(data, bool) or not _index_like(data):
            return _legacy_data(data, dtype, be)
    if not all(map(_index_like, args)):
        shown = ", ".join(type(a).__name__ for a in args)
        raise TypeError(f"Tensor(): takes either data (one list, array or tensor) or sizes "
                        f"(ints), as torch's legacy constructor, got ({shown}); for data with "
                        "a dtype use tinyattn.tensor(data, dtype=...)")
    return be.xp.zeros(_sizes(args, "Tensor") if args else (0,), dtype)


def _index_like(n):
    """Whether n reads as an int (a size): an int, a NumPy int, a 0-d integer array."""
    try:
        operator.index(n)
    except TypeError:
        return False
    return True


def _legacy_data(data, dtype, be):
    """Tensor(data)'s array: a sequence or an array in the default dtype (a NumPy array of
    that dtype shared, as torch shares it); a number is refused, as torch refuses it, but for
    a Python float (tinyattn's older Tensor(0.5): a 0-d tensor)."""
    if type(data) is float:
        return _to_array(data, dtype, be)
    if isinstance(data, (bool, numbers.Number, np.generic, str, bytes)) or data is None or (
            not isinstance(data, (list, tuple, range)) and not hasattr(data, "__array__")
            and not hasattr(data, "__array_interface__")):
        raise TypeError(f"Tensor(): data must be a sequence, an array or a tensor (got "
                        f"{type(data).__name__}), as torch's; for a 0-d tensor of a number "
                        "use tinyattn.tensor(x)")
    if isinstance(data, np.ndarray) and be.name == "numpy" and data.dtype == dtype:
        return data  # (its memory, as torch.Tensor(array) shares it)
    return _to_array(data, dtype, be)


def _own_dtype(data):
    """The dtype of data given with none: its own (an array's) or what its values make (a
    list's); strings, objects and dates are refused naming tensor(), which cannot hold them."""
    own = data.dtype if hasattr(data, "dtype") else _data_dtype(data)
    if getattr(own, "kind", "f") in "OSUMmV" and "bfloat16" not in str(own):
        raise DTypeError(f"tensor: cannot hold data of dtype {own} (only numbers and bools); "
                         "convert the data to numbers first")
    return as_dtype(own)


def _to_array(data, dtype, be):
    """Backend array for `data`: lists and floats get the default dtype, arrays keep theirs (in
    this machine's byte order: a '>f4' array's values become float32)."""
    if isinstance(data, Tensor):
        data = data.backend.to_numpy(data._data) if data.backend is not be else data._data
    elif type(data).__module__ == "torch" and hasattr(data, "detach"):  # a torch tensor: its
        as_dtype(data.dtype)  # (bfloat16 refused by name, before NumPy meets it)
        data = data.detach().cpu().numpy()  # values (as torch.tensor(t) takes them), no warning
    given = dtype is not None
    dtype = as_dtype(dtype) if given else _own_dtype(data)
    if not dtype.isnative:
        dtype = dtype.newbyteorder("=")
    if given and dtype.kind in "iu" and (not hasattr(data, "shape") or
                                         isinstance(data, np.generic)):  # numbers, lists
        data = _ints_in(data, dtype)
    try:
        if dtype is HALF:  # (past 65504: inf, as torch, without NumPy's overflow warning)
            with quiet():
                return be.xp.array(data, dtype=dtype, copy=True)
        return be.xp.array(data, dtype=dtype, copy=True)
    except (OverflowError, ValueError) as e:  # tensor(nan, int64), tensor(1e39, int64)
        raise _conversion_error(e, dtype) from None


def _data_dtype(data):
    """The dtype torch gives numbers or nested lists of them (with no dtype of their own)."""
    try:
        dtype = np.asarray(data).dtype
    except ValueError as e:  # nested lists of different lengths
        raise ShapeError(f"tensor: the nested lists are ragged ({e}); give every row the same "
                         "length (pad the short ones)") from None
    if dtype == np.float64 or dtype.kind in "uO":
        dtype = _list_dtype(data, dtype)
    return dtype


def _ints_in(data, dtype):
    """Numbers (or lists of them) for an integer dtype, converted as torch's tensor() converts
    them: an int must fit int64, then the dtype, except that -max..-1 wraps into an unsigned
    one (-1 into uint8 is 255, as in full); a float must be finite and within the dtype's
    range (then cut toward 0). An array that casts into the dtype as torch's result."""
    try:
        values = np.asarray(data)
    except (OverflowError, ValueError):  # (ragged lists: the conversion after says so)
        return data
    kind = values.dtype.kind
    if kind == "O" or kind == "u" and values.size and int(values.max()) >= 2**63:
        raise DTypeError("tensor: a number in the data does not fit int64, the widest integer "
                         "an int is read as (torch: Overflow when unpacking long long)")
    lo, hi = int_range(dtype)
    with quiet():  # (NaN compares False: it does not fit)
        if kind == "f":  # (2**63: an int NumPy read as a float, past int64's hi rounded)
            fits = (values >= lo) & (values <= hi) & (values < 2.0**63)
        else:
            fits = (values >= (-hi if dtype.kind == "u" else lo)) & (values <= hi)
    if not fits.all():
        bad = values[~fits].reshape(-1)[0].item() if values.ndim else values.item()
        wraps = f"; -{hi}..-1 wrap into it" if dtype.kind == "u" and kind != "f" else ""
        raise DTypeError(f"tensor: a value does not fit {dtype} ({bad!r}; it takes {lo}..{hi}"
                         f"{wraps}): value cannot be converted without overflow (as torch)")
    return values


def _conversion_error(e, dtype):
    """The error for NumPy's `e` while making a `dtype` array of data: a value the dtype cannot
    hold (NaN or inf in int64: torch's overflow error), ragged lists, or data that are not
    numbers."""
    if isinstance(e, OverflowError) or "NaN" in str(e):
        return DTypeError(f"tensor: a value does not fit {dtype} ({e}); value cannot be "
                          "converted without overflow (as torch)")
    if "inhomogeneous" in str(e) or "sequence" in str(e):
        return ShapeError(f"tensor: the nested lists are ragged ({e}); give every row the "
                          "same length (pad the short ones)")
    return DTypeError(f"tensor: the data cannot be made {dtype} ({e}); give numbers or bools")


def _list_dtype(data, found):
    """torch's dtype for numbers (in lists) that NumPy reads as `found` (float64, uint64 or
    object): a Python float alone is the default dtype; else see _infer."""
    if type(data) is float:
        return get_default_dtype()
    return _infer(data, found)


_NUMBER_TYPES = frozenset((float, int))


def _infer(data, found):
    """torch's dtype for nested lists whose NumPy dtype is `found` (float64, uint64 or object):
    every item counts, Python floats as the default dtype, ints as int64, bools as bool, NumPy
    numbers, arrays and tensors as their dtype, all promoted together ([1.0, np.float64(1.5)]
    is float64, as torch's); Python ints past int64 are torch's overflow error. No number at
    all ([], [[], []]): the default dtype."""
    dtypes, big = set(), []

    def walk(d):
        if not isinstance(d, (list, tuple)):
            return one(d)
        kinds = set(map(type, d))  # (a row of Python numbers at C speed)
        if float in kinds:
            dtypes.add(get_default_dtype())
        if int in kinds:
            dtypes.add(np.dtype(np.int64))  # (and any past int64: NumPy read it as a float)
            big.extend(v for v in d if type(v) is int and not -2**63 <= v < 2**63)
        if not kinds <= _NUMBER_TYPES:
            for v in d:
                if type(v) not in _NUMBER_TYPES:
                    walk(v)

    def one(d):
        if type(d) is float:
            dtypes.add(get_default_dtype())
        elif type(d) is int:
            dtypes.add(np.dtype(np.int64))
            if not -2**63 <= d < 2**63:
                big.append(d)
        elif isinstance(d, (bool, np.bool_)):
            dtypes.add(np.dtype(np.bool_))
        elif hasattr(d, "dtype"):
            dtypes.add(np.dtype(d.dtype))

    walk(data)
    out = None
    for dt in dtypes:
        out = promote_types(out, dt)
    if out is None:
        return get_default_dtype() if found.kind == "f" else found
    if out.kind in "iu" and big:
        raise DTypeError(f"tensor: the Python int {big[0]} does not fit int64, the dtype of a "
                         "list of ints (torch: Overflow when unpacking long); give "
                         "dtype=tinyattn.float64 to keep it as a float")
    return found if found.kind == "O" else out


# ---- creating tensors ----------------------------------------------------------------------------


def _takes_device(fn):
    """Let a function that makes a tensor take torch's device= ("cpu", "cuda", "numpy",
    "cupy", or a tensor's .device) as another name for its backend=, and torch's size= for
    its sizes (zeros(size=(2, 3)), full(size=...)) and input= for the tensor of a *_like."""
    @functools.wraps(fn)
    def make(*args, device=None, **kwargs):
        if device is not None:
            backend = kwargs.get("backend")
            if backend is not None and backends.backend(backend) is not backends.backend(device):
                raise ValueError(f"{fn.__name__}: device={device!r} and backend={backend!r} name "
                                 "two backends: give one")
            kwargs["backend"] = device
        if kwargs and not names.keys().isdisjoint(kwargs):
            args, kwargs = _renamed(fn.__name__, args, kwargs, names, 0)
        return fn(*args, **kwargs)

    sig = inspect.signature(fn)  # (none of them takes **kwargs: device= goes last)
    params = list(sig.parameters.values())
    names = {"size": None} if params and params[0].kind is params[0].VAR_POSITIONAL else \
        {"size": "shape"} if "shape" in sig.parameters else {}
    if params and params[0].name == "t":
        names["input"] = "t"
    device = inspect.Parameter("device", inspect.Parameter.KEYWORD_ONLY, default=None)
    make.__signature__ = sig.replace(parameters=[*sig.parameters.values(), device])
    return make


@_takes_device
def tensor(data, dtype=None, requires_grad=False, backend=None):
    """A new leaf tensor holding a copy of `data` (a list, number, array or tensor)."""
    return _fresh(data, dtype=dtype, requires_grad=requires_grad, backend=backend)


def _make(name, fill, dtype, requires_grad, backend, **settings):
    """A new tensor made from settings alone: fill(be, dtype, **settings). Tracers see it made
    (Tracer.made): a captured step makes it again on each replay (and a random one draws anew,
    as an eager call would)."""
    be = backends.get_backend() if backend is None else backends.backend(backend)
    dtype = get_default_dtype() if dtype is None else as_dtype(dtype)
    t = Tensor._wrap(fill(be, dtype, **settings), be)
    if ag._inference.get():  # (made in inference_mode: an inference tensor)
        ag.mark_inference(t)
    t._require(requires_grad)
    if not requires_grad and (ag._tracers.get() is not None or ag._everywhere):
        _seen_made(name, fill, t, dtype=dtype, **settings)
    return t


_MADE_OPS = {}  # name -> the Op a tracer is shown for a tensor made from settings (zeros, ...)


def _seen_made(name, fill, t, **params):
    """Tell the tracers that `t` was made from params alone, as the op `name` with no inputs."""
    op = _MADE_OPS.get(name)
    if op is None:
        op = _MADE_OPS[name] = Op(name, _run_made, "no gradient (made from settings)", grads=())
    for tracer in ag.current_tracers():
        tracer.made(op, {"fill": fill, **params}, t)


def _run_made(be, fill, dtype, **settings):
    """out = fill(settings), with no gradient"""
    return fill(be, dtype, **settings), None


def _slots_hit(index, n, axis, ndim, backend):
    """bool, shaped to broadcast along `axis` of an ndim-dim tensor: True at the n slots that
    `index` names."""
    hit = backend.xp.zeros(n, dtype=bool)
    hit[index] = True
    return hit.reshape([n if d == axis else 1 for d in range(ndim)])


def _flat_positions(mask, shape, backend):
    """The row-major positions where `mask` (broadcast to shape) is True, int64."""
    xp = backend.xp
    return xp.flatnonzero(xp.broadcast_to(mask, shape)).astype(np.int64)


def _argsort(a, axis, descending, backend):
    """The stable order along axis, int64; descending: the reversed row sorted ascending, read
    backwards (ties stay in order)."""
    xp = backend.xp
    if not descending:
        return xp.argsort(a, axis=axis, kind="stable").astype(np.int64, copy=False)
    order = xp.flip(xp.argsort(xp.flip(a, axis), axis=axis, kind="stable"), axis)
    return (a.shape[axis] - 1 - order).astype(np.int64, copy=False)


def _median_index(a, axis, backend):
    """The index of the lower median along axis (dim kept, int64): the ((n + 1) // 2)-th
    smallest in stable order, or the first NaN where the slice has one (torch's median)."""
    xp = backend.xp
    order = _argsort(a, axis, False, backend)
    k = (a.shape[axis] - 1) // 2
    index = order[(slice(None),) * axis + (slice(k, k + 1),)]
    if a.dtype.kind == "f":
        nan = xp.isnan(a)
        first = xp.argmax(nan, axis=axis, keepdims=True).astype(np.int64)
        index = xp.where(nan.any(axis=axis, keepdims=True), first, index)
    return index


_MODE = collections.namedtuple("mode", ["values", "indices"])  # (as torch.return_types.mode)


def _mode_index(a, axis, backend):
    """The index of the mode along axis (dim kept, int64): in each slice sorted stably, the
    first of the longest runs of equal values (NaNs one value) is the smallest mode, and its
    run's last place the mode's last place in the slice (torch's)."""
    xp = backend.xp
    order = xp.moveaxis(_argsort(a, axis, False, backend), axis, -1)
    s = xp.take_along_axis(xp.moveaxis(a, axis, -1), order, axis=-1)  # (..., n), sorted
    n, lead = s.shape[-1], s.shape[:-1]
    new = s[..., 1:] != s[..., :-1]
    if s.dtype.kind == "f":
        new &= ~(xp.isnan(s[..., 1:]) & xp.isnan(s[..., :-1]))
    new = xp.concatenate([xp.ones(lead + (1,), dtype=bool), new], axis=-1)  # a run starts
    starts = xp.sort(xp.where(new, xp.arange(n), n), axis=-1)  # each run's start, then n's
    starts = xp.concatenate([starts, xp.full(lead + (1,), n)], axis=-1)
    run = xp.cumsum(new, axis=-1) - 1  # the run of each place
    end = xp.take_along_axis(starts, run + 1, axis=-1)  # one past its run
    length = end - xp.take_along_axis(starts, run, axis=-1)
    best = xp.argmax(length, axis=-1)[..., None]  # (the first longest: the smallest value)
    last = xp.take_along_axis(end, best, axis=-1) - 1
    return xp.moveaxis(xp.take_along_axis(order, last, axis=-1), -1, axis).astype(np.int64)


def _median_all(be, x):
    """out = the lower median of every entry (NaN if one is NaN, or if there is none)"""
    xp = be.xp
    flat = x.reshape(-1)
    if flat.size == 0:
        return xp.full((), np.nan, dtype=x.dtype), (xp.zeros(x.shape, dtype=bool), 1)
    out = flat[_median_index(flat, 0, be)].reshape(())
    ties = x == out
    if x.dtype.kind == "f" and bool(xp.isnan(out)):
        ties = xp.isnan(x)
    return out, (ties, int(ties.sum()))


def _median_all_vjp(be, g, saved):
    ties, count = saved
    return ((g * ties / count).astype(g.dtype, copy=False),)


# median over every entry: one op (not in ops/, which holds the ops with samples and torch
# parity tables), so that its gradient is shared by the tied entries as in torch's
_MEDIAN_ALL = Op("median", _median_all, "gx = g / k at the k entries equal to the median "
                 "(the NaNs, if it is NaN)")
_MEDIAN_ALL.defvjp(_median_all_vjp)


def _running_extreme(a, axis, larger, backend):
    """For each place along axis, the index of the running maximum (larger) or minimum so far,
    the later one on ties (torch's cummax/cummin), int64. A NaN beats every number and is
    carried forward (the latest NaN's index), as in torch."""
    xp = backend.xp
    n = a.shape[axis]
    v = a.copy()
    shape = [1] * a.ndim
    shape[axis] = n
    idx = xp.broadcast_to(xp.arange(n, dtype=np.int64).reshape(shape), v.shape).copy()
    step = 1
    while step < n:  # Hillis-Steele: after this step, entry i covers (i - 2 step, i]
        old = (slice(None),) * axis + (slice(0, n - step),)
        new = (slice(None),) * axis + (slice(step, n),)
        earlier = v[old] > v[new] if larger else v[old] < v[new]
        if a.dtype.kind == "f":
            earlier |= xp.isnan(v[old]) & ~xp.isnan(v[new])
        v_next, i_next = xp.where(earlier, v[old], v[new]), xp.where(earlier, idx[old], idx[new])
        v[new], idx[new] = v_next, i_next
        step *= 2
    return idx


def _triangle_keep(be, dtype, n, m, diagonal, lower):
    """(n, m) bool: True on and below (lower) or on and above the diagonal `diagonal`."""
    xp = be.xp
    offset = xp.arange(m)[None, :] - xp.arange(n)[:, None]
    return offset <= diagonal if lower else offset >= diagonal


def _diagonal_mask(be, dtype, shape, wrap):
    """True on the main diagonal of `shape` (NumPy's fill_diagonal: torch's wrap rule)."""
    mask = np.zeros(shape, dtype=dtype)
    np.fill_diagonal(mask, True, wrap=wrap)
    return be.xp.asarray(mask)


def _index_places(be, dtype, shape, steps):
    """The flat (row-major) place in a tensor of `shape` of every entry the index `steps`
    picks, in the shape of the pick (index_put's accumulate)."""
    places = be.xp.arange(math.prod(shape), dtype=dtype).reshape(shape)
    return be.xp.asarray(sh._place(places, steps)[steps[-1]])


def _roll_index(be, dtype, n, shift):
    """For each place of a dim of n rolled by shift, the place it takes its entry from."""
    return be.asarray((np.arange(n) - shift) % n if n else np.arange(0)).astype(dtype)


def _repeat_index(be, dtype, n, counts):
    """0..n-1, each repeated counts times (an int, or one count per place)."""
    return be.asarray(np.repeat(np.arange(n), counts)).astype(dtype)


def _zeros(be, dtype, shape):
    return be.xp.zeros(shape, dtype)


def _ones(be, dtype, shape):
    return be.xp.ones(shape, dtype)


def _full_of(be, dtype, shape, value):
    return be.xp.full(shape, value, dtype)


def _randn(be, dtype, shape, generator=None):
    draw = be.randn(shape, np.float32 if dtype == np.float16 else dtype,
                    rng=rng_of(be, generator))
    return draw.astype(dtype, copy=False)


def _rand(be, dtype, shape, generator=None):
    if dtype != np.float16:
        return be.rand(shape, dtype, rng=rng_of(be, generator)).astype(dtype, copy=False)
    return _half_below(be.xp, be.rand(shape, np.float32, rng=rng_of(be, generator)))


def _half_below(xp, wide):
    """float32 draws in [0, 1) as float16 rounded down, not to the nearest: never up to 1.0
    (torch's [0, 1)), and each float16 value v comes out as often as draws fall in [v, next v).
    One step down from a float16 u > 0 is u - u 2^-11 (u - 2^-24 below 2^-14) rounded to the
    nearest float16, exactly, in float32."""
    half = wide.astype(np.float16)
    up = half.astype(np.float32)
    down = (up - xp.maximum(up * 2.0**-11, 2.0**-24)).astype(np.float16)
    return xp.where(up > wide, down, half)


def _arange(be, dtype, start, end, step):
    """start + i * step for i = 0, 1, ... up to end, as torch computes them: integers exactly
    (float bounds cut toward 0 first), floats in float64, each rounded once to the dtype (a
    running sum in float32 drifts: arange(-1, 1, 0.1)[-1] came out 0.90000045)."""
    xp = be.xp
    if dtype.kind != "f":
        i0, di = int(start), int(step)
        if dtype == np.int64:
            return xp.arange(i0, int(end), di, dtype=np.int64)
        n = max(math.ceil((end - start) / step), 0)  # (torch counts the others so)
        return xp.arange(i0, i0 + n * di, di, dtype=np.int64).astype(dtype)
    out = xp.arange(max(math.ceil((end - start) / step), 0), dtype=np.float64)
    out *= step
    out += start
    return out.astype(dtype, copy=False)


def _eye(be, dtype, n, m):
    return be.xp.eye(n, m, dtype=dtype)


def _linspace(be, dtype, start, end, steps, base=None):
    # (an inf or NaN bound, or a power past the dtype, gives inf or NaN quietly, as in torch)
    with np.errstate(invalid="ignore", over="ignore"):
        out = be.xp.linspace(start, end, steps)
        return (out if base is None else base ** out).astype(dtype)


def _randint(be, dtype, low, high, shape, generator=None):
    draw = rng_of(be, generator).integers(low, high, size=shape, dtype=np.int64)
    return draw.astype(dtype, copy=False)


def _randperm(be, dtype, n, generator=None):
    return be.xp.argsort(rng_of(be, generator).random((n,)), kind="stable").astype(dtype,
                                                                                    copy=False)


@_takes_device
def zeros(*shape, dtype=None, requires_grad=False, backend=None):
    return _make("zeros", _zeros, dtype, requires_grad, backend,
                 shape=_sizes(shape, "zeros"))


@_takes_device
def ones(*shape, dtype=None, requires_grad=False, backend=None):
    return _make("ones", _ones, dtype, requires_grad, backend,
                 shape=_sizes(shape, "ones"))


@_takes_device
def full(shape, fill_value, dtype=None, requires_grad=False, backend=None):
    """A tensor of `shape` (a tuple or list, as torch's) filled with fill_value; its dtype
    follows fill_value as in torch (a float: the default dtype, an int: int64, a bool: bool; a
    0-d tensor as a number of its kind), and a value the dtype cannot hold (NaN in int64, 300
    in uint8, 1e39 in float32) is an error, as torch's."""
    if not isinstance(shape, (tuple, list)):
        raise DTypeError(f"full: size must be a tuple of ints (torch's rule), got "
                         f"{type(shape).__name__} {shape!r}; write full(({shape!r},), ...)")
    if isinstance(fill_value, Tensor) and fill_value.ndim != 0:
        raise TypeError(f"full: fill_value must be a number or a 0-d tensor, got a tensor of "
                        f"shape {fmt_shape(fill_value.shape)}")
    dtype = _fill_dtype(fill_value) if dtype is None else as_dtype(dtype)
    return _make("full", _full_of, dtype, requires_grad, backend,
                 shape=_sizes((shape,), "full"), value=ix.fill_value(fill_value, dtype, "full"))


def _fill_dtype(value):
    """full's dtype for fill_value, as torch's: a bool's bool, an int's int64, any other
    number's the default float dtype; a 0-d tensor's as a number of its kind's."""
    kind = value.dtype.kind if isinstance(value, Tensor) else None
    if kind == "b" or isinstance(value, (bool, np.bool_)):
        return np.dtype(np.bool_)
    if kind in ("i", "u") or kind is None and isinstance(value, (int, np.integer)):
        return np.dtype(np.int64)
    return get_default_dtype()


def _setitem_number(value, dtype):
    """setitem's number as `dtype` holds it, checked as fill_'s (torch's), except that float16
    takes a finite number past its range as inf, as torch's setitem does (its fill_ refuses)."""
    if dtype == np.float16 and isinstance(value, numbers.Real) and not isinstance(value, bool) \
            and 65504.0 < abs(value) < math.inf:
        with np.errstate(over="ignore"):
            return float(np.float16(value))  # (65519 rounds to 65504, 65520 up to inf)
    return ix.fill_value(value, dtype, "setitem")


@_takes_device
def randn(*shape, generator=None, dtype=None, requires_grad=False, backend=None):
    """Standard normal samples from `generator` (a tinyattn.Generator) or the backend's own
    stream (see manual_seed)."""
    return _make("randn", _randn, _float_draws("randn", dtype), requires_grad, backend,
                 shape=_sizes(shape, "randn"),
                 **_drawing(generator, backend, "randn"))


@_takes_device
def rand(*shape, generator=None, dtype=None, requires_grad=False, backend=None):
    """Uniform [0, 1) samples from `generator` or the backend's own stream."""
    return _make("rand", _rand, _float_draws("rand", dtype), requires_grad, backend,
                 shape=_sizes(shape, "rand"),
                 **_drawing(generator, backend, "rand"))


def _float_draws(name, dtype):
    """The dtype of random floats (randn, rand, normal...): the default, or a floating-point
    one; torch has no kernel that draws them into integers or bools (nor has NumPy)."""
    dtype = get_default_dtype() if dtype is None else as_dtype(dtype)
    if dtype.kind != "f":
        raise DTypeError(f"{name}: draws floating-point values, not {dtype} (torch: not "
                         "implemented for integer and bool dtypes); give a float dtype, or "
                         "draw integers with randint")
    return dtype


def _check_std(name, std):
    """normal's std, as torch checks it: >= 0 (NaN refused), in every element of a tensor (an
    op: a captured step checks each call's std)."""
    if isinstance(std, Tensor):
        _check_values(_std_at_least_0, std, where=name)
    elif not std >= 0:
        raise ValueError(f"{name}: expects std >= 0.0, but found std {std}")


def _std_at_least_0(std, where):
    """_check_std's check on a tensor's array (NaN >= 0 is False too)"""
    if not bool((std >= 0).all()):
        raise ShapeError(f"{where}: expects all elements of std >= 0.0 (std of shape "
                         f"{fmt_shape(std.shape)} holds a negative or NaN one)")


def _check_uniform(dtype, a, b):
    """uniform_'s bounds, as torch checks them: finite values of the dtype, a <= b."""
    top = ix.largest(dtype)
    for what, v in (("from", a), ("to", b)):
        if not -top <= v <= top:
            raise ValueError(f"uniform_: {what}={v} is out of bounds for {dtype}")
    if a > b:
        raise ValueError(f"uniform_: expects to return a [from, to) range, but found from={a} "
                         f"> to={b}")


def _drawing(generator, backend, where):
    """The settings a random fill gets for `generator`: none for the backend's own stream (so
    a step that draws from it records the same settings as before generators came)."""
    if generator is None:
        return {}
    be = backends.get_backend() if backend is None else backends.backend(backend)
    return {"generator": check_generator(generator, be, where)}


class _Omitted:
    """The default of an argument that may be left out but, given, must be a number (arange's
    start and end, randint's low and high): None given for one is refused, as torch refuses
    it, where a None default could not tell the two apart."""

    __slots__ = ()

    def __repr__(self):
        return "<omitted>"


_OMITTED = _Omitted()


@_takes_device
def arange(start=_OMITTED, end=_OMITTED, step=1, dtype=None, requires_grad=False,
           backend=None):
    """start, start + step, ... below end; integers give int64, floats the default dtype (a
    0-d tensor counts as its number, as in torch). arange(n) and arange(end=n) start at 0; a
    bound given as None (or as anything but a number) is refused, as torch refuses it."""
    if end is _OMITTED:
        if start is _OMITTED:
            raise TypeError("arange() missing its end: arange(end), arange(start, end[, step])")
        start, end = 0, start
    elif start is _OMITTED:
        start = 0
    if not (type(start) is int and type(end) is int and type(step) is int and step) or \
            dtype is not None:
        start, end, step, dtype = _arange_args(start, end, step, dtype)
    else:
        dtype = np.int64
    if (start > end) if step > 0 else (start < end):
        raise ShapeError(f"arange: upper bound and lower bound inconsistent with step sign: "
                         f"from {start} to {end} needs a {'negative' if step > 0 else 'positive'}"
                         f" step, got {step}")
    return _make("arange", _arange, dtype, requires_grad, backend, start=start, end=end,
                 step=step)


def _arange_args(start, end, step, dtype):
    """arange's arguments other than three ints alone (no dtype), checked as torch: each a
    number (a 0-d tensor counts as its number); the step must not be 0, nor become 0 as an
    integer dtype; no NaN or inf; no bool dtype."""
    start, end, step = (_real("arange", what, v) for what, v in
                        (("start", start), ("end", end), ("step", step)))
    dtype = _arange_dtype(start, end, step, dtype)
    if not (math.isfinite(start) and math.isfinite(end) and math.isfinite(step)):
        raise ShapeError(f"arange: unsupported range {start} -> {end} (step {step})")
    if step == 0 or dtype.kind != "f" and int(step) == 0:
        raise ShapeError(f"arange: step must be nonzero, got {step}" + (
            f", which is 0 as {dtype}" if step != 0 else ""))
    return start, end, step, dtype


def _arange_dtype(start, end, step, dtype):
    """arange's dtype: int64 for whole numbers, else the default dtype, unless given; not
    bool (torch: "arange_cpu" not implemented for 'Bool')."""
    if dtype is None:
        whole = not any(isinstance(v, (float, np.floating)) for v in (start, end, step))
        dtype = np.int64 if whole else get_default_dtype()
    dtype = as_dtype(dtype)
    if dtype.kind == "b":
        raise DTypeError("arange: cannot count in bools (torch: \"arange_cpu\" not implemented "
                         "for 'Bool'); give an integer or float dtype")
    return dtype


def _number(name, v):
    """A 0-d tensor argument as its Python number (arange(t.sum()), as torch takes it)."""
    if not isinstance(v, Tensor):
        return v
    if v.ndim != 0:
        raise TypeError(f"{name}: takes numbers or 0-d tensors, got a tensor of shape "
                        f"{fmt_shape(v.shape)}")
    return v.item()


def _real(name, what, v):
    """A number setting (a factory's bound, step or base; cdist's p; clip_grad_norm_'s
    max_norm) as its real number: a 0-d tensor counts as its number (torch's); None, a
    string or another object is a TypeError naming the function and the argument, a complex
    number a DTypeError."""
    v = _number(name, v)
    if isinstance(v, numbers.Complex) and not isinstance(v, numbers.Real):
        raise DTypeError(f"{name}: a complex {what} ({v!r}): {NO_COMPLEX}")
    if not isinstance(v, numbers.Real):
        raise TypeError(f"{name}: {what} must be a number, got {type(v).__name__} {v!r}")
    return v


@_takes_device
def zeros_like(t, dtype=None, requires_grad=False, backend=None, memory_format=None):
    _row_major("zeros_like", memory_format, True)  # (torch's optimizers pass preserve_format)
    return _laid_like(t, zeros(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad,
                               backend=backend or t.backend), memory_format)


def _laid_like(t, out, memory_format):
    """out (just made, of t's shape) laid out in memory as t is, dims in t's order of strides
    (torch's preserve_format for the *_like functions: zeros_like(x.t()) has x.t()'s
    strides); as it is for memory_format=contiguous_format or a row-major t."""
    order = None if memory_format is contiguous_format or out.backend is not t.backend else \
        views.stride_order(t._data)
    if order is None:
        return out
    if out.requires_grad:  # (a leaf: its own array swapped, no op between)
        out._data = views.laid_out_as(out.backend.xp, t._data, out._data)
        return out
    return apply(views.laid_out, out, order=order)  # (an op: a captured step replays it)


@_takes_device
def ones_like(t, dtype=None, requires_grad=False, backend=None, memory_format=None):
    _row_major("ones_like", memory_format, True)
    return _laid_like(t, ones(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad,
                              backend=backend or t.backend), memory_format)


def manual_seed(seed):
    """Seed the generators of every backend (randn, rand, dropout), now and when made later;
    returns tinyattn.default_generator (the NumPy backend's stream), as torch returns its own.
    The seed is read as torch's: int(seed) (1.5 is 1), a negative one wrapped (-1 is 2**64 - 1)."""
    seed = seed_of("manual_seed", seed, cast=True)
    ag.side_effect("manual_seed()")
    backends.manual_seed(seed)
    return default_generator._seeded(seed)


# ---- more ways to make a tensor (torch's names) --------------------------------------------------


@_takes_device
def empty(*shape, dtype=None, requires_grad=False, backend=None):
    """A tensor of `shape` (tinyattn fills it with zeros: no uninitialised memory)."""
    _sizes(shape, "empty")  # (its errors name empty)
    return zeros(*shape, dtype=dtype, requires_grad=requires_grad, backend=backend)


@_takes_device
def eye(n, m=None, dtype=None, requires_grad=False, backend=None):
    """The (n, m) identity matrix: ones on the diagonal."""
    n, m = _count("eye", "n", n), None if m is None else _count("eye", "m", m)
    return _make("eye", _eye, dtype, requires_grad, backend, n=n, m=m)


@_takes_device
def linspace(start, end, steps, dtype=None, requires_grad=False, backend=None):
    """`steps` evenly spaced values from start to end, both included."""
    steps = _count("linspace", "steps", steps, "number of steps must be non-negative")
    start, end = _real("linspace", "start", start), _real("linspace", "end", end)
    return _make("linspace", _linspace, dtype, requires_grad, backend, start=start, end=end,
                 steps=steps)


@_takes_device
def logspace(start, end, steps, base=10.0, dtype=None, requires_grad=False, backend=None):
    """base ** linspace(start, end, steps)."""
    steps = _count("logspace", "steps", steps, "number of steps must be non-negative")
    start, end = _real("logspace", "start", start), _real("logspace", "end", end)
    base = _real("logspace", "base", base)
    return _make("logspace", _linspace, dtype, requires_grad, backend, start=start, end=end,
                 steps=steps, base=base)


@_takes_device
def full_like(t, fill_value, dtype=None, requires_grad=False, backend=None, memory_format=None):
    _row_major("full_like", memory_format, True)
    return _laid_like(t, full(t.shape, fill_value, dtype=dtype or t.dtype,
                              requires_grad=requires_grad, backend=backend or t.backend),
                      memory_format)


@_takes_device
def empty_like(t, dtype=None, requires_grad=False, backend=None, memory_format=None):
    _row_major("empty_like", memory_format, True)
    return zeros_like(t, dtype=dtype, requires_grad=requires_grad, backend=backend,
                      memory_format=memory_format)


@_takes_device
def rand_like(t, dtype=None, requires_grad=False, backend=None, memory_format=None):
    _row_major("rand_like", memory_format, True)
    _float_draws("rand_like", dtype or t.dtype)
    return _laid_like(t, rand(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad,
                              backend=backend or t.backend), memory_format)


@_takes_device
def randn_like(t, dtype=None, requires_grad=False, backend=None, memory_format=None):
    _row_major("randn_like", memory_format, True)
    _float_draws("randn_like", dtype or t.dtype)
    return _laid_like(t, randn(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad,
                               backend=backend or t.backend), memory_format)


@_takes_device
def randint_like(t, low=0, high=None, *, dtype=None, requires_grad=False, backend=None,
                 memory_format=None, generator=None):
    """randint in t's shape, dtype (unless given) and backend: randint_like(t, high) or
    randint_like(t, low, high), as torch's."""
    _row_major("randint_like", memory_format, True)
    if high is None:
        low, high = 0, low
    return _laid_like(t, randint(low, high, t.shape, generator=generator, dtype=dtype or t.dtype,
                                 requires_grad=requires_grad, backend=backend or t.backend),
                      memory_format)


@_takes_device
def randint(low=_OMITTED, high=_OMITTED, size=None, *, generator=None, dtype=None,
            requires_grad=False, backend=None):
    """Random integers in [low, high) (randint(high, size) and randint(high=, size=) mean
    low = 0), int64 by default; the bounds are ints (a 0-d integer tensor counts; a float,
    a bool or None does not, as torch); bounds the dtype cannot hold are an error, as
    torch's."""
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size), as torch
        low, high, size = 0, low, high
    if high is _OMITTED:  # randint(high, size=...)
        if low is _OMITTED:
            raise TypeError("randint() missing its high: randint(high, size), randint(low, "
                            "high, size)")
        low, high = 0, low
    elif low is _OMITTED:  # randint(high=..., size=...)
        low = 0
    if size is None:
        raise TypeError("randint: needs size, e.g. randint(0, 10, (3,))")
    low, high = _int_argument("randint", "low", low), _int_argument("randint", "high", high)
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be above low ({low})")
    dtype = as_dtype(dtype or np.int64)
    _randint_bounds(low, high, dtype)
    return _make("randint", _randint, dtype, requires_grad, backend, low=low, high=high,
                 shape=_sizes((size,), "randint"), **_drawing(generator, backend,
                                                                    "randint"))


def _randint_bounds(low, high, dtype):
    """randint's check (torch's): low and high - 1 must be values of `dtype`, and of int64."""
    if dtype.kind == "b":
        lo, hi = 0, 1
    elif dtype.kind == "f":
        hi = ix.largest(dtype)
        lo = -hi
    else:
        lo, hi = int_range(dtype)
    wide = np.iinfo(np.int64)
    for what, v in (("low", low), ("high - 1", high - 1)):
        if not (lo <= v <= hi and wide.min <= v <= wide.max):
            raise ValueError(f"randint: {what} = {v} is out of bounds for {dtype} (its values "
                             f"are {lo:g}..{hi:g})" if dtype.kind == "f" else
                             f"randint: {what} = {v} is out of bounds for {dtype} (its values "
                             f"are {max(lo, wide.min)}..{min(hi, wide.max)})")


@_takes_device
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, backend=None):
    """Samples of N(mean, std²): mean and std numbers (with size) or tensors, which broadcast
    (their shape, dtype and backend); no gradient, as torch's."""
    like = next((t for t in (mean, std) if isinstance(t, Tensor)), None)
    if like is None:
        if size is None:
            raise TypeError("normal: with a number for mean and for std, give size, e.g. "
                            "normal(0.0, 1.0, (3,))")
        shape, dtype = _sizes((size,), "normal"), dtype or get_default_dtype()
    elif size is not None:
        raise TypeError("normal: size= goes with a number mean and std (normal(0.0, 1.0, (3,)))"
                        "; with a tensor mean or std the shape is theirs, broadcast (torch's "
                        "rule): leave size out")
    else:
        shape = np.broadcast_shapes(*(t.shape for t in (mean, std) if isinstance(t, Tensor)))
        dtype, backend = dtype or like.dtype, backend or like.backend
    _float_draws("normal", dtype)
    _check_std("normal", std)
    with no_grad():
        z = randn(*shape, generator=generator, dtype=dtype, backend=backend)
        return (z * std + mean).detach()


@_takes_device
def randperm(n, *, generator=None, dtype=None, requires_grad=False, backend=None):
    """A random permutation of 0..n-1 (int64, or `dtype` where it holds them all exactly)."""
    n = _count("randperm", "n", n)
    dtype = as_dtype(dtype or np.int64)
    _check_permutation(n, dtype)
    return _make("randperm", _randperm, dtype, requires_grad, backend, n=n,
                 **_drawing(generator, backend, "randperm"))


_EXACT_UP_TO = {"float16": 2049, "float32": 2**24 + 1, "float64": 2**53 + 1}  # torch's limits


def _check_permutation(n, dtype):
    """randperm's dtype must hold 0..n-1, as torch checks (uint8 wrapped 300 into 0..255)."""
    if dtype.kind == "b":
        raise DTypeError("randperm: cannot make a permutation of bools (torch: \"randperm\" "
                         "not implemented for 'Bool'); give an integer or float dtype")
    if dtype.kind == "f":
        if n > _EXACT_UP_TO[dtype.name]:
            raise DTypeError(f"randperm: n = {n} is too many for {dtype}: n cannot be greater "
                             f"than {_EXACT_UP_TO[dtype.name]} (past it, not every whole number "
                             "is exact)")
        return
    lo, hi = int_range(dtype)
    if n - 1 > hi:
        raise DTypeError(f"randperm: n = {n} does not fit {dtype} (its values are {lo}..{hi}, a "
                         f"permutation of n needs 0..{n - 1}); value cannot be converted "
                         "without overflow")


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    """Category indices drawn from the rows of `input` (weights, not necessarily normalised):
    (num_samples,) for 1-D input, (rows, num_samples) for 2-D. Without replacement each
    category is drawn at most once (the Gumbel top-k trick). Drawn as an op (a captured step
    draws anew on each replay)."""
    p = input if isinstance(input, Tensor) else Tensor(input)
    num_samples = _int_of(num_samples)
    check_generator(generator, p.backend, "multinomial")
    _check_multinomial(p, num_samples, replacement)
    if p.ndim == 2 and p.shape[0] == 0:  # no rows: nothing to draw (torch's (0, n))
        return Tensor._wrap(p.backend.xp.zeros((0, num_samples), np.int64), p.backend)
    return _values("multinomial", _multinomial, p, n=num_samples, replacement=replacement,
                   backend=p.backend, generator=generator)


def _check_multinomial(p, num_samples, replacement):
    """multinomial's arguments, checked as torch checks them (a negative num_samples drew
    from a negative slice, and 0 gave an empty tensor, before)."""
    if not isinstance(num_samples, numbers.Integral) or isinstance(num_samples, bool):
        raise DTypeError(f"multinomial: num_samples must be an int, got "
                         f"{type(num_samples).__name__} {num_samples!r}")
    if num_samples <= 0:
        raise ShapeError(f"multinomial: cannot sample n_sample <= 0 samples "
                         f"(num_samples={num_samples})")
    if p.dtype.kind != "f":
        raise DTypeError(f"multinomial: the weights must be floating-point (torch's rule), "
                         f"got {p.dtype}; convert them with .float()")
    if p.ndim not in (1, 2):
        raise ShapeError(f"multinomial: takes 1-D or 2-D weights, got {fmt_shape(p.shape)}")
    k = p.shape[-1]
    if k == 0 and (p.ndim == 1 or p.shape[0]):  # (no rows at all: nothing to draw, below)
        raise ShapeError(f"multinomial: the weights {fmt_shape(p.shape)} have no categories to "
                         "draw from")
    if not replacement and num_samples > k:
        raise ValueError(f"multinomial: cannot draw {num_samples} samples from {k} categories "
                         "without replacement; pass replacement=True")


def _multinomial(weights, n, replacement, backend, generator):
    xp = backend.xp
    w = weights.reshape(-1, weights.shape[-1]).astype(np.float64)
    if w.size == 0 or bool((w < 0).any()) or not bool(xp.isfinite(w).all()) or bool(
            (w.sum(axis=1) <= 0).any()):
        raise ValueError(f"multinomial: weights must be finite, >= 0, and each row must have "
                         f"a positive sum (shape {fmt_shape(weights.shape)})")
    rng, k = rng_of(backend, generator), w.shape[1]
    if replacement:
        cdf = xp.cumsum(w / w.sum(axis=1, keepdims=True), axis=1)
        u = rng.random((w.shape[0], n))
        out = (u[:, :, None] >= cdf[:, None, :]).sum(axis=2)
        out = xp.minimum(out, k - 1)  # u just below 1 against a cdf rounded below 1
    else:
        with np.errstate(divide="ignore"):
            keys = xp.log(w) - xp.log(-xp.log(rng.random(w.shape)))  # + Gumbel noise
        keys = xp.where(w > 0, keys, -np.inf)
        out = xp.argsort(-keys, axis=1, kind="stable")[:, :n]
    out = out.astype(np.int64)
    return out if weights.ndim == 2 else out[0]


def bernoulli(input, p=None, *, generator=None):  # noqa: A002 - torch's name
    """1.0 with probability `input` (each entry a probability, or p for all), else 0.0; same
    dtype. Drawn as an op (a captured step draws anew on each replay)."""
    probs = input if isinstance(input, Tensor) else Tensor(input)
    check_generator(generator, probs.backend, "bernoulli")
    if p is not None and not 0 <= p <= 1:
        raise ValueError(f"bernoulli: p must be in [0, 1], got {p}")
    return _values("bernoulli", _bernoulli, probs, p=p, backend=probs.backend,
                   generator=generator)


def _bernoulli(probs, p, backend, generator):
    if p is None and not bool(((probs >= 0) & (probs <= 1)).all()):
        raise ValueError(f"bernoulli: every probability must be in [0, 1] (input of shape "
                         f"{fmt_shape(probs.shape)})")
    draw = rng_of(backend, generator).random(probs.shape) < (probs if p is None else p)
    return draw.astype(probs.dtype)


def from_numpy(array):
    """A tensor sharing memory with a NumPy array (NumPy backend; its dtype kept). A subclass
    (np.matrix, whose * is a matrix product) is read as the plain array it holds, as torch."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    array = np.asarray(array)  # (the same memory)
    be = backends.backend("numpy")
    _to_array(np.empty(0, dtype=array.dtype), None, be)  # the dtype check only (0-d too)
    if not array.dtype.isnative:
        raise ValueError(f"from_numpy: given numpy array has byte order different from the "
                         f"native byte order ({array.dtype.str}): a tensor that shares its "
                         "memory cannot convert it (torch's rule); tinyattn.tensor(a) copies it "
                         "in this machine's order")
    return Tensor._wrap(array, be)


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over the memory of an object with the buffer protocol (a bytearray, an
    array.array, a memoryview...), as torch.frombuffer: `count` entries of `dtype` (-1: all
    there are) from byte `offset`. It shares the memory: a write to either reaches the other
    (a read-only buffer, bytes, gives a tensor that refuses writes)."""
    dtype = as_dtype(dtype)
    try:
        array = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
    except (ValueError, TypeError) as e:
        size = memoryview(buffer).nbytes if isinstance(e, ValueError) else "?"
        raise type(e)(f"frombuffer: {e} (a buffer of {size} bytes, dtype {dtype}, count "
                      f"{count}, offset {offset} bytes)") from None
    return from_numpy(array).requires_grad_(requires_grad)


@_takes_device
def as_tensor(data, dtype=None, backend=None):
    """`data` as a tensor, without a copy where it already is one (or a matching array); a
    tensor with another dtype or backend is data.to(backend, dtype), its graph kept, as
    torch's."""
    if isinstance(data, Tensor):
        return data.to(device=backend, dtype=dtype)
    be = backends.get_backend() if backend is None else backends.backend(backend)
    if isinstance(data, np.ndarray) and be.name == "numpy" and data.dtype.isnative and (
            dtype is None or as_dtype(dtype) == data.dtype):
        return from_numpy(data)
    return _fresh(data, dtype=dtype, backend=be)


@_takes_device
def asarray(obj, *, dtype=None, copy=None, requires_grad=False, backend=None):
    """torch.asarray: as_tensor, with torch's copy= (None: share memory with a tensor or NumPy
    array where no conversion is needed; True: always a copy, a clone of a tensor; False:
    share or raise) and requires_grad=."""
    out = as_tensor(obj, dtype=dtype, backend=backend)
    source = obj._data if isinstance(obj, Tensor) else obj
    shared = isinstance(source, np.ndarray) and np.may_share_memory(out._data, source) or (
        out is obj)
    if copy and shared:
        out = out.clone()
    elif copy is False and not shared and isinstance(obj, (Tensor, np.ndarray)):
        raise ValueError(f"asarray: copy=False, but the {type(obj).__name__} cannot be shared "
                         f"as a {out.dtype} tensor on {out.backend.name} without a copy")
    return out.requires_grad_() if requires_grad else out
