"""nn.utils.parametrize, as torch's: register_parametrization(module, "weight", p) makes
`module.weight` the value p(original) computed at each read, while the Parameter itself lives
at `module.parametrizations.weight.original` (the state_dict key
"parametrizations.weight.original"; original0, original1, ... when p.right_inverse returns
several tensors). The module's class is swapped for a subclass ("ParametrizedLinear") with a
property for the name; assigning to it goes through right_inverse. Several parametrizations
on one name run in the order registered. remove_parametrizations puts a plain Parameter back,
is_parametrized asks, and inside cached() each parametrized value is computed once;
transfer_parametrizations_and_params gives another module the same parametrizations.
"""

import contextlib
import copy
from collections.abc import Sequence

from ...autograd import bump_version, no_grad
from ...tensor import Tensor
from ..module import ModuleDict, ModuleList, Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations",
           "transfer_parametrizations_and_params"]

_cache_depth = [0]
_cache = {}  # (id(module), name) -> the value, inside cached()


@contextlib.contextmanager
def cached():
    """Inside the block, each parametrized tensor is computed the first time it is read and
    then reused (torch's: a weight read at every step of an RNN); dropped at the end."""
    _cache_depth[0] += 1
    try:
        yield
    finally:
        _cache_depth[0] -= 1
        if not _cache_depth[0]:
            _cache.clear()


def _register(module, name, t):
    if isinstance(t, Parameter):
        module.register_parameter(name, t)
    else:
        module.register_buffer(name, t)


def _set(dest, src):
    """dest takes src's values, shape and dtype in place (torch's set_), as one change."""
    dest._data = dest.backend.xp.array(src._data)
    bump_version(dest)


def _refuse_change(what, before, after, where):
    """torch's ValueError when a safe parametrization changed the tensor's shape or dtype."""
    for attr in ("dtype", "shape"):
        if getattr(before, attr) != getattr(after, attr):
            raise ValueError(f"{where}: {what} may not change the {attr} of the tensor, unless "
                             f"the `unsafe` flag is enabled.\nunparametrized {attr}: "
                             f"{getattr(before, attr)}\nparametrized {attr}: "
                             f"{getattr(after, attr)}")


class ParametrizationList(ModuleList):
    """module.parametrizations[name]: the parametrizations of one tensor, in order, and the
    tensor they start from, `original` (or original0, original1, ...), as torch's."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    with contextlib.suppress(NotImplementedError):
                        new = module.right_inverse(new)
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError("register_parametrization: 'right_inverse' must return a Tensor "
                             f"or a Sequence of tensors (list, tuple...). Got "
                             f"{type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            self._hold_one(original, new)
        else:
            self._hold_several(original, new)
        if not unsafe:
            value = self()
            if not isinstance(value, Tensor):
                raise ValueError("register_parametrization: a parametrization must return a "
                                 f"tensor. Got {type(value).__name__}.")
            _refuse_change("registering a parametrization", original, value,
                           "register_parametrization")

    def _hold_one(self, original, new):
        if original.dtype != new.dtype:
            raise ValueError("register_parametrization: when `right_inverse` outputs one "
                             f"tensor, it may not change the dtype.\noriginal.dtype: "
                             f"{original.dtype}\nright_inverse(original).dtype: {new.dtype}")
        if new is not original:
            with no_grad():
                _set(original, new)
        _register(self, "original", original)

    def _hold_several(self, original, new):
        for i, t in enumerate(new):
            if not isinstance(t, Tensor):
                raise ValueError("register_parametrization: 'right_inverse' must return a "
                                 "Tensor or a Sequence of tensors (list, tuple...). Got element "
                                 f"{i} of the sequence with type {type(t).__name__}.")
            t = t.detach()
            if isinstance(original, Parameter):
                t = Parameter(t, original.requires_grad)
            else:
                t.requires_grad_(original.requires_grad)
            _register(self, f"original{i}", t)

    def right_inverse(self, value):
        """Set the originals so that this list gives `value`: each parametrization's
        right_inverse, last first (each must have one), as torch's."""
        with no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                self._set_one(value)
            else:
                self._set_several(value)

    def _set_one(self, value):
        if not isinstance(value, Tensor):
            raise ValueError(f"`right_inverse` should return a tensor. Got "
                             f"{type(value).__name__}")
        if value.dtype != self.original.dtype:
            raise ValueError(f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                             f"while `original` has dtype {self.original.dtype}")
        _set(self.original, value)

    def _set_several(self, value):
        if not isinstance(value, Sequence) or len(value) != self.ntensors:
            raise ValueError(f"'right_inverse' must return a sequence of {self.ntensors} "
                             f"tensors. Got {value!r:.60}")
        for i, t in enumerate(value):
            old = getattr(self, f"original{i}")
            if t.dtype != old.dtype:
                raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype {t.dtype} "
                                 f"while `original{i}` has dtype {old.dtype}")
            _set(old, t)

    def forward(self):
        steps = list(self)
        if self.is_tensor:
            x = steps[0](self.original)
        else:
            x = steps[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for step in steps[1:]:
            x = step(x)
        return x


def _deepcopy(self, memo):
    """copy.deepcopy of a parametrized module: a new one of the same (parametrized) class."""
    new = memo.get(id(self))
    if new is None:
        new = memo[id(self)] = self.__new__(type(self))
        new.__setstate__(copy.deepcopy(self.__dict__, memo))
    return new


def _getstate(self):
    raise RuntimeError("Serialization of parametrized modules is only supported through "
                       "state_dict() (as torch's)")


def _inject_class(module):
    """Swap module's class for a subclass of it ("ParametrizedLinear") to hold the
    properties."""
    cls = type(module)
    attrs = {"__getstate__": _getstate}
    if not hasattr(cls, "__deepcopy__"):
        attrs["__deepcopy__"] = _deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), attrs)


def _inject_property(module, name):
    def get(self):
        parametrization = self.parametrizations[name]
        if not _cache_depth[0]:
            return parametrization()
        key = (id(self), name)
        value = _cache.get(key)
        if value is None:
            value = _cache[key] = parametrization()
        return value

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(get, set_, doc=f"{name}, parametrized"))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """module.<tensor_name> becomes parametrization(original), computed at each read; a second
    one on the same name runs on the first one's output. Returns the module (torch's)."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_chained(module, tensor_name, parametrization)
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"register_parametrization: Module '{type(module).__name__}' does not "
                         f"have a parameter, a buffer, or a parametrized element with name "
                         f"'{tensor_name}'")
    return module


def _check_chained(module, name, parametrization):
    """A safe parametrization added to a parametrized name keeps its shape and dtype (its
    right_inverse too), as torch's."""
    before = getattr(module, name)
    after = parametrization(before)
    if not isinstance(after, Tensor):
        raise ValueError("register_parametrization: a parametrization must return a tensor. "
                         f"Got {type(after).__name__}.")
    _refuse_change(f"parametrization(module.{name})", before, after, "register_parametrization")
    if hasattr(parametrization, "right_inverse"):
        try:
            back = parametrization.right_inverse(after)
        except NotImplementedError:
            return
        if not isinstance(back, Tensor):
            raise ValueError("register_parametrization: parametrization.right_inverse must "
                             f"return a tensor. Got: {type(back).__name__}")
        _refuse_change("parametrization.right_inverse", before, back, "register_parametrization")


def is_parametrized(module, tensor_name=None):
    """Whether module has a parametrization (on tensor_name, when given)."""
    parametrizations = module.__dict__.get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Take the parametrizations of tensor_name off: it becomes a plain Parameter (or buffer)
    again, the original one, holding the parametrized value (leave_parametrized) or its own;
    with the last one gone the module's class is its own again. Returns the module."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"remove_parametrizations: Module {type(module).__name__} does not "
                         f"have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                _set(original, getattr(module, tensor_name))
    elif leave_parametrized:
        t = getattr(module, tensor_name)
        original = Parameter(t.detach()) if t.requires_grad else t
    else:
        raise ValueError("remove_parametrizations: Cannot leave unparametrized "
                         "(`leave_parametrized=False`) a tensor that is parametrized in terms "
                         "of a sequence of tensors.")
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Give to_module the parametrizations of from_module (those of tensor_name, or all) and
    the tensors they start from: the same parametrization modules and the same original
    Parameters (shared, as torch's); a name to_module lacks is made a Parameter first. Does
    nothing when from_module is not parametrized. Returns to_module."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if name not in from_module.parametrizations:
            raise ValueError(f"transfer_parametrizations_and_params: Module "
                             f"{type(from_module).__name__} has no parametrization on {name}")
        source = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        if hasattr(source, "original"):
            target.original = source.original
        else:
            for i in range(source.ntensors):
                setattr(target, f"original{i}", getattr(source, f"original{i}"))
    return to_module


def type_before_parametrizations(module):
    """The module's class before any parametrization (its own class when none)."""
    return type(module).__bases__[0] if is_parametrized(module) else type(module)
