"""Module and Parameter: PyTorch's way of holding weights, in a few dozen lines.

Assigning a Parameter or a Module to an attribute registers it, so `named_parameters()` and
`state_dict()` find it under its dotted path ("blocks.0.attn.qkv.weight"); None keeps its slot,
empty, as in torch. Calling a module runs its `forward` at its path, so the graph nodes it makes
know which module made them (graph pictures group them). Containers: Sequential, ModuleList,
ModuleDict, ParameterList and ParameterDict, with torch's list and dict methods.
"""

import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import numpy as np

from .. import backends
from .. import functional as F
from ..autograd import (
    RemovableHandle,
    _scope,
    bump_version,
    current_scope,
    current_tracers,
    is_grad_enabled,
    share_version,
    zero_grads,
)
from ..errors import DTypeError, ShapeError, StateDictError, fmt_shape
from ..tensor import Tensor, to_args


class Parameter(Tensor):
    """A tensor that is a model's weight: it always requires grad and modules register it."""

    __slots__ = ()

    def __init__(self, data, dtype=None, backend=None):
        if isinstance(data, Tensor):
            data, backend = data.data, backend or data.backend
        super().__init__(data, dtype=dtype, requires_grad=True, backend=backend)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


# bumped whenever any module tree changes (a module or parameter assigned or removed anywhere)
# or is named from a new root: what a root has cached about its tree is valid while it stands
_tree_version = [0]
# bumped when any module's parameters, submodules, buffers or other attributes (settings such as
# Dropout.p) are assigned or removed, or its mode set (train/eval): a captured step
# (tinyattn.replay) replays only what it recorded under
_state_version = [0]
_MISSING = object()
# every tensor a module holds as a parameter or buffer (weakly, by id): a captured step refuses
# to record one passed as its argument, which fn may also read through the module
_held = weakref.WeakValueDictionary()


def held_arrays():
    """id() of the array of every tensor a module holds (parameters and buffers)."""
    return {id(t.data) for t in list(_held.values())}


class Module:
    """Base class of every layer and model: subclass it, assign parts in __init__, write forward."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())  # name -> Tensor or None
        object.__setattr__(self, "_non_persistent", set())  # buffers left out of state_dict
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_path", None)  # dotted path from the model called last
        object.__setattr__(self, "_named_at", -1)  # _tree_version when this root named its tree
        object.__setattr__(self, "_params_at", (-1, ()))  # (_tree_version, named_parameters)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call super().__init__() "
                                 "before assigning attributes")
        if name in self._buffers and not isinstance(value, (Parameter, Module)):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"{type(self).__name__}.{name} is a buffer: assign a Tensor or "
                                f"None, not a {type(value).__name__}")
            self._buffers[name] = value
            if value is not None:
                _held[id(value)] = value
            _state_version[0] += 1
            object.__setattr__(self, name, value)
            return
        slot = self._slot(name, value)  # "_parameters", "_modules" or None
        self._buffers.pop(name, None)
        if slot or name in self._modules or name in self._parameters:
            _tree_version[0] += 1
            _state_version[0] += 1
        elif self.__dict__.get(name, _MISSING) is not value:  # a setting (Dropout.p, eps) that
            _state_version[0] += 1  # forward reads: a captured step records again
        # a replaced parameter or module keeps its place (and its place in the state dict), and
        # so does one set to None: the slot stays, empty, as torch's (`m.bias = None`)
        for kind in ("_parameters", "_modules"):
            if kind == slot:
                getattr(self, kind)[name] = value
            else:
                getattr(self, kind).pop(name, None)
        if isinstance(value, Parameter):
            _held[id(value)] = value
        object.__setattr__(self, name, value)

    def _slot(self, name, value):
        """Where `value` assigned as `name` is registered: "_parameters", "_modules", or None (a
        plain attribute). Over a parameter or a child only its own kind or None may go, as in
        torch: a plain tensor over a weight would silently drop it from the model."""
        if isinstance(value, Parameter):
            return "_parameters"
        if isinstance(value, Module):
            return "_modules"
        for kind, what, want in (("_parameters", "parameter", "Parameter"),
                                 ("_modules", "child module", "Module")):
            if name in getattr(self, kind):
                if value is not None:
                    hint = "; to replace the weight, assign nn.Parameter(value)" \
                        if kind == "_parameters" else ""
                    raise TypeError(f"{type(self).__name__}: cannot assign "
                                    f"'{type(value).__name__}' as {what} {name!r} ({want} or "
                                    f"None expected){hint}")
                return kind
        return None

    def __delattr__(self, name):
        removed = self._parameters.pop(name, _MISSING) is not _MISSING
        self._buffers.pop(name, None)
        self._non_persistent.discard(name)
        if self._modules.pop(name, _MISSING) is not _MISSING or removed:
            _tree_version[0] += 1
            _state_version[0] += 1
        object.__delattr__(self, name)

    def __call__(self, *args, **kwargs):
        if self._named_at != _tree_version[0] and current_scope() is None:
            # called from outside any module, and the tree changed (or another root named it)
            # since this root last named it: give every module its dotted path
            _tree_version[0] += 1
            for path, module in self.named_modules():
                object.__setattr__(module, "_path", path)
            object.__setattr__(self, "_named_at", _tree_version[0])
        # the nodes made inside know which module made them (the scope set and reset here, not
        # through a context manager: its object and two method calls cost a third of a call)
        token = _scope.set(self._path or "")
        try:
            if self._hooks is None:
                return self.forward(*args, **kwargs)
            return self._call_hooked(args, kwargs)
        finally:
            _scope.reset(token)

    # ---- forward hooks: look at (or change) what goes in and what comes out ---------------------

    _hooks = None  # {"pre": {...}, "post": {...}} once a hook is registered (see _hook)

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) runs before forward (hook(module, args, kwargs) with_kwargs); what
        it returns, if not None, replaces the arguments (a tuple, or one value; with_kwargs, an
        (args, kwargs) pair). Returns a handle whose remove() takes it off (as torch)."""
        return self._hook("pre", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args, output) runs after forward (hook(module, args, kwargs, output)
        with_kwargs); what it returns, if not None, replaces the output."""
        return self._hook("post", hook, prepend, with_kwargs)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) runs when the gradients with respect to this
        call's tensor inputs have been summed: grad_input holds one per positional argument
        (None where none flows), grad_output one per output. A tuple it returns replaces
        grad_input for the hooks after it and for backward (a None in it: no gradient for
        that input, as torch; a zero one here). Each call of the module wraps its inputs in
        one packed copy so that the hook sees all their gradients at once."""
        return self._hook("backward", hook, prepend, False)

    def _hook(self, kind, hook, prepend, with_kwargs):
        if not callable(hook):
            name = {"pre": "forward_pre_", "post": "forward_", "backward": "full_backward_"}
            raise TypeError(f"register_{name[kind]}hook: the hook must be callable, got "
                            f"{hook!r}")
        if self._hooks is None:
            object.__setattr__(self, "_hooks", {"pre": OrderedDict(), "post": OrderedDict(),
                                                "backward": OrderedDict()})
        hooks = self._hooks[kind]
        handle = RemovableHandle(hooks, (hook, with_kwargs))
        _state_version[0] += 1  # (a captured step records again, and sees it: tinyattn.replay)
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def _call_hooked(self, args, kwargs):
        if self._hooks["pre"] or self._hooks["post"] or self._hooks["backward"]:
            for tracer in current_tracers():
                tracer.module_hooks(self)
        args, kwargs = self._pre_hooked(args, kwargs)
        watch = None
        if self._hooks["backward"] and is_grad_enabled():
            watch = _BackwardWatch(self, args)
            args = watch.inputs
        output = self.forward(*args, **kwargs)
        for hook, with_kwargs in list(self._hooks["post"].values()):
            out = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
            if out is not None:
                output = out
        if watch is not None:
            watch.outputs(output)
        return output

    def _pre_hooked(self, args, kwargs):
        """(args, kwargs) after the forward pre-hooks, each of which may replace them."""
        for hook, with_kwargs in list(self._hooks["pre"].values()):
            out = hook(self, args, kwargs) if with_kwargs else hook(self, args)
            if out is not None and with_kwargs:
                args, kwargs = out
            elif out is not None:
                args = out if isinstance(out, tuple) else (out,)
        return args, kwargs

    def forward(self, *args, **kwargs):
        raise TypeError(f"{type(self).__name__} has no forward(): a Module subclass defines it")

    def add_module(self, name, module):
        """Register module (or None, an empty slot) as the child `name`, as assigning the
        attribute does."""
        self._add_child("add_module", name, module)

    register_module = add_module

    def _add_child(self, where, name, module):
        self._check_name(where, name)
        self._check_free(where, name, "_modules")
        _check_module(where, module)
        self._set_child(name, module)

    def _set_child(self, name, module):
        if module is None:  # an empty slot, kept (and skipped by every walk), as torch's
            self._modules.setdefault(name, None)
        setattr(self, name, module)

    def register_parameter(self, name, param):
        """Register param (a Parameter, or None for an absent one) under `name`."""
        self._check_name("register_parameter", name)
        self._check_free("register_parameter", name, "_parameters")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None, got a "
                            f"{type(param).__name__}")
        if param is None:
            self._parameters.setdefault(name, None)
        setattr(self, name, param)

    def _check_name(self, where, name):
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"{where}: the name must be a non-empty string without '.', got "
                           f"{name!r}")

    def _check_free(self, where, name, kind):
        """`name` may be registered in `kind` (_parameters, _buffers or _modules): it is one
        already, or no attribute at all (torch's rule: a child named 'train' would hide the
        method, a buffer named like a parameter would hide the parameter)."""
        if name not in getattr(self, kind) and hasattr(self, name):
            raise KeyError(f"{where}: attribute {name!r} already exists in "
                           f"{type(self).__name__}; choose another name")

    def register_buffer(self, name, tensor, persistent=True):
        """Keep a tensor that is state but not a parameter (running statistics, class weights,
        rotary tables): it moves with `to()` and, if persistent, sits in `state_dict()`."""
        self._check_name("register_buffer", name)
        self._check_free("register_buffer", name, "_buffers")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a Tensor or None, got a "
                            f"{type(tensor).__name__}")
        if isinstance(tensor, Parameter):
            raise TypeError(f"register_buffer: {name!r} is a Parameter; assign it as an "
                            "attribute to register it as a parameter")
        self._buffers[name] = tensor
        if tensor is not None:
            _held[id(tensor)] = tensor
        _state_version[0] += 1
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        object.__setattr__(self, name, tensor)

    def apply(self, fn):
        """fn(module) for every module inside, children first, then this one; returns self
        (as `model.apply(init_weights)` in PyTorch)."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ---- walking the tree ----------------------------------------------------------------------

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted path, module) for this module and every module inside it, each once (every
        time it appears with remove_duplicate=False); memo: a set of modules to skip."""
        seen, stack = set() if memo is None else memo, [(prefix, self)]
        while stack:
            path, module = stack.pop()
            if module in seen:
                continue
            if remove_duplicate:
                seen.add(module)
            yield path, module
            if module._modules:  # (zero_grad walks this every step: leaves skip the list)
                dot = path + "." if path else ""
                stack.extend([(dot + n, m) for n, m in reversed(module._modules.items())
                              if m is not None])

    def modules(self):
        return (m for _, m in self.named_modules())

    def get_submodule(self, target):
        """The module at a dotted path ("blocks.0.attn"); "" is this module (as torch)."""
        module = self
        for part in target.split(".") if target else ():
            if not isinstance(module._modules.get(part), Module):
                raise AttributeError(f"get_submodule: {type(module).__name__} has no submodule "
                                     f"{part!r} (looking up {target!r})")
            module = module._modules[part]
        return module

    def get_parameter(self, target):
        """The parameter at a dotted path ("blocks.0.attn.qkv.weight")."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if module._parameters.get(name) is None:
            raise AttributeError(f"get_parameter: {type(module).__name__} has no parameter "
                                 f"{name!r} (looking up {target!r})")
        return module._parameters[name]

    def children(self):
        return (m for _, m in self.named_children())

    def named_children(self):
        """(name, child) for each child, each once: a module held twice comes under its first
        name (as torch; state_dict() lists it under both)."""
        seen = set()
        for name, m in self._modules.items():
            if m is not None and m not in seen:
                seen.add(m)
                yield name, m

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted path, Parameter) for every parameter, each once (tied weights too); only
        this module's own with recurse=False; paths start with `prefix`.

        The list is kept until a module or parameter is assigned or removed anywhere (see
        _tree_version): zero_grad() and clipping walk it every step."""
        if prefix or not recurse or not remove_duplicate:
            return self._named("_parameters", prefix, recurse, remove_duplicate)
        at, found = self._params_at
        if at != _tree_version[0]:
            found = tuple(self._named("_parameters", "", True, True))
            object.__setattr__(self, "_params_at", (_tree_version[0], found))
        return iter(found)

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted path, buffer) for every buffer that is not None, each once."""
        return self._named("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        return (b for _, b in self.named_buffers(recurse=recurse))

    def _named(self, kind, prefix, recurse, remove_duplicate):
        """(path, tensor) of the modules' `kind` (_parameters or _buffers) that are not None."""
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for path, module in modules:
            for name, t in getattr(module, kind).items():
                if t is not None and (id(t) not in seen or not remove_duplicate):
                    seen.add(id(t))
                    yield (f"{path}.{name}" if path else name), t

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())

    # ---- modes and gradients -------------------------------------------------------------------

    def train(self, mode=True):
        """Training mode (True) or evaluation mode (False) for this module and every module
        inside it (Dropout drops only in training mode); returns the module."""
        if not isinstance(mode, (bool, np.bool_)):  # "no" or 0 would read as a mode, wrongly
            raise ValueError(f"{type(self).__name__}.train: mode must be True or False, got "
                             f"{mode!r}")
        mode = bool(mode)
        for m in self.modules():
            if m.training != mode:  # (a mode that changes: what a captured step must see)
                _state_version[0] += 1
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Switch gradient tracking for every parameter (freeze a part with False)."""
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def zero_grad(self, set_to_none=True):
        zero_grads(self.parameters(), set_to_none)

    def to(self, *args, dtype=None, device=None, non_blocking=False):
        """Move every parameter and buffer to a backend ("numpy"/"cpu", "cupy"/"cuda"), and/or
        cast the floating ones to a float dtype, in place, their gradients with them (kept, as
        torch keeps them): torch's forms, to(device), to(dtype), to(device, dtype), to(tensor),
        dtype= and device= (returns self)."""
        device, dtype = to_args(args, device, dtype)
        if dtype is not None and np.dtype(dtype).kind != "f":
            raise DTypeError(f"Module.to: a module can only be cast to a float dtype, got "
                             f"{np.dtype(dtype)}")
        be = None if device is None else backends.backend(device)
        dtype = None if dtype is None else np.dtype(dtype)
        for t in [*self.parameters(), *self.buffers()]:
            self._moved(t, be, dtype)
            if t._grad is not None:  # kept, moved and cast with its tensor (torch's rule)
                self._moved(t.grad, be, dtype)
        return self

    @staticmethod
    def _moved(t, be, dtype):
        """Put tensor `t` on backend `be` and cast it to `dtype` if it is floating (integer
        buffers keep theirs), in place; None: no change there."""
        if be is not None and be is not t.backend:
            t.data = be.asarray(t.backend.to_numpy(t.data))
            t.backend = be
        if dtype is not None and t.dtype.kind == "f":
            t.data = t.data.astype(dtype)

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")

    def type(self, dst_type):
        return self.to(dst_type)

    def half(self):
        return self.to(np.float16)

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    # ---- saving and loading --------------------------------------------------------------------

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Every parameter and persistent buffer by its dotted path (tied weights, and a module
        used twice, under each of their names), in PyTorch's order: a module's parameters, its
        buffers, then its children. Keys start with `prefix`; values are detached unless
        keep_vars; with `destination`, it is filled and returned."""
        out = OrderedDict() if destination is None else destination
        for key, t in self._state_tensors().items():
            out[prefix + key] = t if keep_vars else t.detach()
        return out

    def _every_path(self):
        """(prefix, module) for this module and each inside it at every path that holds it, as
        torch's state_dict walks them (a module used twice: twice; one inside itself: once,
        where torch recurses without end)."""
        stack = [("", self, ())]
        while stack:
            prefix, module, above = stack.pop()
            yield prefix, module
            above += (module,)
            stack.extend([(f"{prefix}{n}.", m, above) for n, m in reversed(module._modules.items())
                          if m is not None and m not in above])

    def _state_tensors(self):
        out = OrderedDict()
        for prefix, module in self._every_path():
            for name, p in module._parameters.items():
                if p is not None:
                    out[prefix + name] = p
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent:
                    out[prefix + name] = b
        return out

    def load_state_dict(self, state, strict=True, assign=False):
        """Copy values into the parameters and buffers; on any mismatch raise and change nothing.

        strict=True: keys must match exactly. Shapes must always match. What older checkpoints
        lack and a module knows how to fill (a BatchNorm's num_batches_tracked) is not missing.
        assign=True (torch's): the given tensors become the parameters and buffers instead of
        being copied into them (their memory, dtype and backend; a tensor given for a parameter
        is wrapped as a Parameter that shares it, a Parameter given is used itself; either keeps
        the old parameter's requires_grad); a tensor given under two keys becomes one parameter.
        An optimizer made before holds the old parameters: make it after, as with torch.
        A mismatch is a StateDictError: a CheckpointError (ValueError) and a RuntimeError, as
        torch's.
        """
        where = f"load_state_dict({type(self).__name__})"
        if not isinstance(state, Mapping):
            raise TypeError(f"{where}: Expected state_dict to be dict-like, got {type(state)}.")
        state = self._with_defaults(state)
        params = own = self._state_tensors()  # parameters and buffers
        missing, unexpected, problems = _key_problems(own, state, strict)
        convert = self._assignable if assign else self._loadable
        values = {}  # every value checked and converted before any is copied (or assigned)
        for key, value in state.items():
            if key in params:
                values[key] = convert(key, value, params[key], problems)
        if problems:
            raise StateDictError(f"{where}: nothing was loaded; " + "; ".join(problems))
        if assign:
            self._assign(values, own)
            return IncompatibleKeys(missing, unexpected)
        for key, array in values.items():  # into the parameters' own memory, as torch's copy_
            p = params[key]
            p.backend.xp.copyto(p.data, p.backend.asarray(array), casting="unsafe")
            bump_version(p)
        return IncompatibleKeys(missing, unexpected)

    def _assign(self, values, own):
        """Put each value load_state_dict(assign=True) checked in its module's slot (each, for
        a module used twice): a parameter's as a Parameter, a buffer's as it is."""
        owners = {}
        for prefix, module in self._every_path():
            for name in (*module._parameters, *module._buffers):
                owners.setdefault(prefix + name, []).append((module, name))
        made = {}  # id(given tensor) -> the Parameter it became: a tensor under two keys is one
        for key, value in values.items():
            old = own[key]
            if isinstance(old, Parameter):
                new = made.get(id(value))
                if new is None and isinstance(value, Parameter):
                    new = value
                    new.requires_grad = old.requires_grad  # (torch's: the old one's setting)
                elif new is None:  # the given memory as a Parameter, as torch's Parameter(t)
                    new = Parameter._wrap(value.data, value.backend)
                    share_version(value, new)
                    new._require(old.requires_grad)
                made[id(value)] = new
            else:  # a buffer: the tensor itself (a Parameter's memory as a plain tensor)
                new = value.detach() if isinstance(value, Parameter) else value
            for module, name in owners[key]:
                setattr(module, name, new)

    @staticmethod
    def _assignable(key, value, p, problems):
        """`value` as the tensor that takes `p`'s place (assign=True): a tensor as it is (its
        memory, dtype and backend, as torch's), an array as a tensor on p's backend; or None,
        with what is wrong added to `problems`."""
        if not isinstance(value, Tensor):
            try:
                value = Tensor(value, backend=p.backend)
            except (TypeError, ValueError) as e:
                problems.append(f"{key}: the checkpoint's value is not an array ({e})")
                return None
        if value.shape != p.shape:
            problems.append(f"{key}: the checkpoint has shape {fmt_shape(value.shape)}, the "
                            f"model {fmt_shape(p.shape)}")
            return None
        if isinstance(p, Parameter) and p.requires_grad and value.dtype.kind != "f":
            problems.append(f"{key}: the checkpoint has dtype {value.dtype}, which cannot become "
                            "a parameter that requires grad (only floating-point tensors can)")
            return None
        return value

    def _with_defaults(self, state):
        """`state`, with the entries its modules fill in for an older checkpoint (as torch's
        _load_from_state_dict hooks); the caller's dict is never changed."""
        filled = {}
        for prefix, module in self._every_path():
            filled.update(module._state_defaults(prefix, state))
        return {**state, **filled} if filled else state

    def _state_defaults(self, prefix, state):
        """{key: value} for what `state` lacks of this module and may: none by default."""
        return {}

    @staticmethod
    def _loadable(key, value, p, problems):
        """`value` as an array that copies into `p` (a parameter or buffer) without fail:
        numbers as they are (a cast between numbers cannot fail), anything else converted to
        p's dtype now; or None, with what is wrong added to `problems`."""
        try:
            array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
        except (TypeError, ValueError) as e:
            problems.append(f"{key}: the checkpoint's value is not an array ({e})")
            return None
        if array.shape != p.shape:
            problems.append(f"{key}: the checkpoint has shape {fmt_shape(array.shape)}, the "
                            f"model {fmt_shape(p.shape)}")
            return None
        if array.dtype.kind in "biuf":
            return array
        try:
            return array.astype(p.dtype)
        except (TypeError, ValueError) as e:
            problems.append(f"{key}: the checkpoint has dtype {array.dtype}, which does not "
                            f"convert to the model's {p.dtype} ({e})")
            return None

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, m in self._modules.items():
            child = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"

    def extra_repr(self):
        return ""


def _key_problems(own, state, strict):
    """(missing keys, unexpected keys, what load_state_dict refuses of them: both if strict)."""
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    problems = []
    if strict and missing:
        problems.append(f"missing keys: {', '.join(missing)}")
    if strict and unexpected:
        problems.append(f"unexpected keys: {', '.join(unexpected)}")
    return missing, unexpected, problems


class IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict(strict=False) left out, a named pair as torch's
    (`missing, unexpected = model.load_state_dict(state, strict=False)`); also read by name,
    result["missing_keys"]."""

    __slots__ = ()

    def __getitem__(self, key):
        return getattr(self, key) if isinstance(key, str) else super().__getitem__(key)


class _Indexed(Module):
    """Children registered under their indices ("blocks.0", "blocks.1", ...), used as a list."""

    def __init__(self, modules=()):
        super().__init__()
        self.extend(modules)

    def append(self, module):
        """Add module (or None, an empty slot, as torch's) at the end."""
        _check_module(type(self).__name__, module)
        self._set_child(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    __iadd__ = extend  # layers += [...] extends in place (as torch's)

    def insert(self, index, module):
        """Put module at index (-len..len), the ones from there on moving one place up."""
        _check_module(type(self).__name__, module)
        n = len(self._modules)
        if not -n <= index <= n:  # (a list's insert would append or prepend, silently)
            raise IndexError(f"{type(self).__name__}.insert: index {index} is out of range for "
                             f"{n} modules (valid: {-n}..{n})")
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)

    def pop(self, index=-1):
        items = list(self._modules.values())
        module = items.pop(index)
        self._renumber(items)
        return module

    def __delitem__(self, index):
        items = list(self._modules.values())
        del items[index]
        self._renumber(items)

    def __setitem__(self, index, module):
        _check_module(type(self).__name__, module)
        setattr(self, list(self._modules)[index], module)

    def _renumber(self, items):
        """Hold `items`, named "0", "1", ... again (as torch's, after an insert or a delete)."""
        for name in list(self._modules):
            delattr(self, name)
        for n, module in enumerate(items):
            self._set_child(str(n), module)

    keeps_names = False  # whether a slice keeps the modules' names ("1", "2") or counts from 0

    def __getitem__(self, i):
        """The i-th module; a slice is a Sequential (ModuleList) of those: as in torch, a
        Sequential's keeps their names ("1", "2"), a ModuleList's counts from "0" again."""
        if isinstance(i, slice):
            part = type(self).__new__(type(self))
            _Indexed.__init__(part)
            for n, (name, module) in enumerate(list(self._modules.items())[i]):
                part._set_child(name if self.keeps_names else str(n), module)
            return part
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        return type(self)(*self, *other) if isinstance(self, Sequential) else \
            type(self)([*self, *other])


def _check_module(where, module):
    if module is not None and not isinstance(module, Module):
        raise TypeError(f"{where}: {type(module).__name__} is not a Module subclass (nor None, "
                        "an empty slot)")


class Sequential(_Indexed):
    """Modules applied one after another: Sequential(a, b, c), or Sequential(OrderedDict) to
    name them."""

    keeps_names = True

    def __init__(self, *modules):
        if len(modules) == 1 and isinstance(modules[0], dict):
            Module.__init__(self)
            for name, module in modules[0].items():
                self._add_child("Sequential", name, module)
        else:
            super().__init__(modules)

    def forward(self, x):
        for m in self:
            x = m(x)
        return x

    def __mul__(self, n):
        """A Sequential of these modules n times over: the same module objects, not copies
        (as torch's)."""
        if not isinstance(n, int):
            return NotImplemented
        if n <= 0:
            raise ValueError(f"Sequential * {n}: the number of repeats must be positive")
        return Sequential(*(list(self) * n))

    __rmul__ = __mul__

    def __imul__(self, n):
        if isinstance(n, int) and n > 0:
            return self.extend(list(self) * (n - 1))
        return self.__mul__(n)  # NotImplemented, or the error for n <= 0


class ModuleList(_Indexed):
    """A list of modules; it has no forward of its own."""


class _BackwardWatch:
    """One call of a module with full backward hooks: its tensor inputs that require grad are
    packed into one flat tensor and read back out of it, so that gradient of the packed tensor
    (complete once every use inside the module has sent its part) holds all the grad_inputs;
    hooks on the outputs collect grad_output first (the outputs are newer, so theirs come
    earlier in backward)."""

    def __init__(self, module, args):
        self.module, self.n_args = module, len(args)
        self.grad_output, self.expected = {}, 0
        self.where = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        self.inputs = args
        if not self.where:
            return
        xs = [args[i] for i in self.where]
        self.parts = [(x.shape, x.dtype, x.numel()) for x in xs]
        packed = F.cat([x.reshape(-1) for x in xs])
        packed.register_hook(self._on_inputs)
        inputs, start = list(args), 0
        for j, i in enumerate(self.where):
            shape, dtype, n = self.parts[j]
            part = packed[start:start + n].reshape(shape)
            inputs[i] = part if part.dtype == dtype else part.to(dtype)
            start += n
        self.inputs = tuple(inputs)

    def outputs(self, output):
        outs = output if isinstance(output, tuple) else (output,)
        self.n_out = len(outs)
        for k, t in enumerate(outs):
            if isinstance(t, Tensor) and t.requires_grad:
                self.expected += 1
                t.register_hook(lambda g, k=k: self._on_output(k, g))

    def _on_output(self, k, g):
        self.grad_output[k] = g
        if not self.where and len(self.grad_output) == self.expected:  # no input to wait for
            self._call(tuple(None for _ in range(self.n_args)))

    def _on_inputs(self, g):
        grads, start = [None] * self.n_args, 0
        for j, i in enumerate(self.where):
            shape, dtype, n = self.parts[j]
            grads[i] = g[start:start + n].reshape(shape).to(dtype)
            start += n
        new = self._call(tuple(grads))
        if new is None:
            return None
        if not isinstance(new, (tuple, list)) or len(new) != self.n_args:
            raise ShapeError(f"{type(self.module).__name__}: a full backward hook must return "
                             f"None or {self.n_args} gradients (one per input), got {new!r}")
        # (None: that input gets no gradient, as in torch; here a zero one)
        flat = [(new[i] if new[i] is not None else grads[i] * 0).reshape(-1).to(g.dtype)
                for i in self.where]
        return F.cat(flat)

    def _call(self, grad_input):
        grad_output = tuple(self.grad_output.get(k) for k in range(self.n_out))
        self.grad_output = {}  # (a second backward through the same graph collects anew)
        result = None
        for hook, _ in list(self.module._hooks["backward"].values()):
            out = hook(self.module, grad_input, grad_output)
            if out is not None:
                result = grad_input = tuple(out)
        return result


class ModuleDict(Module):
    """Modules by name, used as a dict ("heads.cls", "heads.box"); no forward of its own."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"ModuleDict: {key!r} must be a Module (or None), got a "
                            f"{type(module).__name__}")
        self._add_child("ModuleDict", key, module)

    def __getitem__(self, key):
        return self._modules[key]

    def __delitem__(self, key):
        delattr(self, key)

    def __contains__(self, key):
        return key in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key):
        module = self._modules[key]
        del self[key]
        return module

    def clear(self):
        for key in list(self._modules):
            del self[key]

    def update(self, modules):
        for key, module in (modules.items() if hasattr(modules, "items") else modules):
            self[key] = module


class ParameterList(Module):
    """Parameters registered under their indices ("0", "1", ...), used as a list."""

    def __init__(self, values=()):
        super().__init__()
        for p in values:
            self.append(p)

    def append(self, value):
        setattr(self, str(len(self._parameters)), _as_parameter(value))
        return self

    def extend(self, values):
        for p in values:
            self.append(p)
        return self

    __iadd__ = extend  # params += [...] extends in place (as torch's)

    def __getitem__(self, i):
        return list(self._parameters.values())[i]

    def __setitem__(self, i, value):
        setattr(self, str(range(len(self))[i]), _as_parameter(value))

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())


class ParameterDict(Module):
    """Parameters by name, used as a dict (a tensor given is made a Parameter); no forward."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        if not isinstance(key, str) or not key or "." in key:
            raise KeyError(f"ParameterDict: a key must be a non-empty string without '.', "
                           f"got {key!r}")
        self._check_free("ParameterDict", key, "_parameters")
        if value is None:  # an empty slot (setdefault's default), as torch's
            self._parameters.setdefault(key, None)
        setattr(self, key, None if value is None else _as_parameter(value))

    def __getitem__(self, key):
        return self._parameters[key]

    def __delitem__(self, key):
        delattr(self, key)

    def __contains__(self, key):
        return key in self._parameters

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def get(self, key, default=None):
        return self._parameters.get(key, default)

    def pop(self, key):
        value = self._parameters[key]
        del self[key]
        return value

    def popitem(self):
        """The (key, parameter) added last, removed."""
        if not self._parameters:
            raise KeyError("ParameterDict.popitem: the dictionary is empty")
        key = next(reversed(self._parameters))
        return key, self.pop(key)

    def setdefault(self, key, default=None):
        """self[key], first set to `default` (made a Parameter; None, an empty slot) if the key
        is not there."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for key in list(self._parameters):
            del self[key]

    def copy(self):
        """A new ParameterDict holding the same Parameters, in the same order."""
        return ParameterDict(OrderedDict(self._parameters))

    @classmethod
    def fromkeys(cls, keys, default=None):
        """A new ParameterDict with each of `keys` holding `default` (one Parameter for all
        when it is one, as torch's)."""
        return cls((key, default) for key in keys)

    def update(self, parameters):
        """Add (key, value) pairs: from pairs or an OrderedDict or ParameterDict in their order,
        from another mapping sorted by key (torch's rule)."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = parameters.items()
        elif hasattr(parameters, "items"):
            pairs = sorted(parameters.items())
        else:
            pairs = parameters
        for key, value in pairs:
            self[key] = value


def _as_parameter(value):
    return value if isinstance(value, Parameter) else Parameter(value)
