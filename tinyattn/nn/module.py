"""Module and Parameter: PyTorch's way of holding weights, in a few dozen lines.

Assigning a Parameter or a Module to an attribute registers it, so `named_parameters()` and
`state_dict()` find it under its dotted path ("blocks.0.attn.qkv.weight"); None keeps its slot,
empty, as in torch. Calling a module runs its `forward` at its path, so the graph nodes it makes
know which module made them (graph pictures group them). Containers: Sequential, ModuleList,
ModuleDict, ParameterList and ParameterDict, with torch's list and dict methods.
"""

import contextlib
import operator
import threading
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping, MutableMapping

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
from ..dtypes import as_dtype
from ..errors import DTypeError, ShapeError, StateDictError, fmt_shape, warn_user
from ..function import Function
from ..tensor import Tensor, _grad_flag, _type_named, as_tensor, empty, to_args, zeros


class Parameter(Tensor):
    """A tensor that is a model's weight: modules register it, and it requires grad (unless
    requires_grad=False), as torch's. Parameter(t) shares t's memory (a write to either shows
    in both, as torch's); Parameter() is an empty one. Beyond torch, data may be an array (its
    memory shared, as np.asarray would) or a list (copied, with tensor()'s dtype); the
    keywords dtype and backend convert it (a copy, where they change anything)."""

    __slots__ = ()

    def __init__(self, data=None, requires_grad=True, *, dtype=None, backend=None):
        if data is None:
            data = empty(0, dtype=dtype, backend=backend)
        t = as_tensor(data, dtype=dtype, backend=backend)
        if isinstance(t._data, np.generic):  # (a 0-d op result's NumPy scalar: Parameter(
            t._data = np.array(t._data)  # torch.ones([]) * 2.0) shares it as an array)
        self._data, self.backend = t._data, t.backend
        self._grad = self._name = self._node = self._version_counter = None
        if t is data:  # the same memory: in-place changes count in both (torch's version);
            # not a view of it: a Parameter is a leaf of its own (no _base, as torch's)
            share_version(data, self, differentiable=False)
        if _grad_flag(requires_grad):
            self._require(True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        """A new Parameter (of this class) holding a copy of the values, with the same
        requires_grad and name, and no .grad: torch's Parameter.__deepcopy__ (a plain tensor's
        deep copy keeps its .grad)."""
        if id(self) in memo:
            return memo[id(self)]
        new = type(self)._wrap(self._data.copy(), self.backend)
        memo[id(self)] = new
        new._require(self.requires_grad)
        new._name = self._name
        return new


class Buffer(Tensor):
    """torch 2.x's marker for state that is not a parameter: `self.x = nn.Buffer(t)` in a
    Module registers x as a buffer (Buffer(t, persistent=False): one left out of state_dict),
    as register_buffer would. Buffer(t) is t detached (its memory shared, its requires_grad
    kept, a plain tensor of a Parameter); Buffer() an empty one. (torch's Buffer(t) is a
    plain Tensor flagged as a buffer; here an instance of this Tensor subclass.)"""

    __slots__ = ("_persistent",)

    def __init__(self, data=None, *, persistent=True):
        if data is None:
            data = empty(0)
        t = data.detach()  # (as torch's: AttributeError for what is no tensor)
        self._data, self.backend = t._data, t.backend
        self._grad = self._name = self._node = self._version_counter = None
        share_version(data, self, differentiable=False)
        self.persistent = persistent
        if data.requires_grad:
            self._require(True)

    @property
    def persistent(self):
        """Whether a module that registers it keeps it in state_dict (True unless set)."""
        return getattr(self, "_persistent", True)

    @persistent.setter
    def persistent(self, value):
        self._persistent = value

    def __deepcopy__(self, memo):
        new = super().__deepcopy__(memo)
        new.persistent = self.persistent
        return new

    def __reduce_ex__(self, protocol):
        """Pickled as a Tensor of this class is (tensor.py), its persistence with it."""
        rebuild, args = super().__reduce_ex__(protocol)
        return _unpickle_buffer, (rebuild, args, self.persistent)


def _unpickle_buffer(rebuild, args, persistent):
    buffer = rebuild(*args)
    buffer.persistent = persistent
    return buffer


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
    return {id(t._data) for t in list(_held.values())}


class _Registry(OrderedDict):
    """A module's _parameters, _buffers or _modules. Each entry is also an attribute of the
    module (in its __dict__), so reading `m.weight` in forward is a plain attribute read: this
    dict keeps the two in step, so that torch code that edits the dicts themselves (pruning,
    weight norm: `m._parameters[name] = p`, `del m._parameters[name]`, `m._buffers[name] = t`)
    changes the attribute, parameters(), state_dict() and forward, as in torch. Its owners are
    held weakly (several: a copy.copy of a module shares its dicts, as torch's); a deep copy
    or a pickle holds the entries only, and the new module adopts it (Module.__setstate__)."""

    def __init__(self, owner=None, tree=True):
        super().__init__()
        self._owners = [] if owner is None else [weakref.ref(owner)]
        self._tree = tree  # parameters and modules: the tree's walks (named_parameters) change

    def __setitem__(self, name, value):
        OrderedDict.__setitem__(self, name, value)
        for ref in self._owners:
            owner = ref()
            if owner is not None:
                owner.__dict__[name] = value
        if isinstance(value, Tensor):
            _held[id(value)] = value
        self._changed()

    def __delitem__(self, name):
        OrderedDict.__delitem__(self, name)
        for ref in self._owners:
            owner = ref()
            if owner is not None:
                owner.__dict__.pop(name, None)
        self._changed()

    def _changed(self):
        if self._tree:
            _tree_version[0] += 1
        _state_version[0] += 1

    # (every change goes through __setitem__ and __delitem__)

    def pop(self, name, *default):
        if name in self:
            value = self[name]
            del self[name]
            return value
        if default:
            return default[0]
        raise KeyError(name)

    def popitem(self, last=True):
        if not self:
            raise KeyError("dictionary is empty")
        name = next(reversed(self)) if last else next(iter(self))
        return name, self.pop(name)

    def clear(self):
        for name in list(self):
            del self[name]

    def setdefault(self, name, default=None):
        if name not in self:
            self[name] = default
        return self[name]

    def update(self, *args, **kwargs):
        for name, value in dict(*args, **kwargs).items():
            self[name] = value

    def __ior__(self, other):
        self.update(other)
        return self

    def __reduce__(self):
        """Copies and pickles hold the entries, not the owners (see Module.__setstate__)."""
        return type(self), (), None, None, iter(list(self.items()))

    def _adopt(self, owner):
        """Add `owner` to the modules whose attributes follow this dict."""
        self._owners = [r for r in self._owners if r() is not None and r() is not owner]
        self._owners.append(weakref.ref(owner))


_KINDS = {"_parameters": True, "_modules": True, "_buffers": False}  # kind: whether in the tree
_HOOK_KINDS = ("pre", "post", "backward", "backward_pre")  # Module._hooks' dicts


class _HookDict(MutableMapping):
    """torch's Module._forward_hooks (and _forward_pre_hooks, _backward_hooks,
    _backward_pre_hooks): a live {key: hook} view of one kind of the module's hooks, which code
    written for torch reads, clears (`m._forward_hooks.clear()` takes every forward hook off)
    or deletes from. A hook set through it is a plain one (no kwargs, not always called)."""

    def __init__(self, module, kind):
        self._module, self._kind = module, kind

    def _dict(self, make=False):
        hooks = self._module.__dict__.get("_hooks")  # (its own: not the class's, see _GLOBAL)
        if hooks is None and make:
            hooks = {k: OrderedDict() for k in _HOOK_KINDS}
            object.__setattr__(self._module, "_hooks", hooks)
        return {} if hooks is None else hooks[self._kind]

    def __getitem__(self, key):
        return self._dict()[key][0]

    def __setitem__(self, key, hook):
        self._dict(make=True)[key] = (hook, False, False)
        _state_version[0] += 1  # (a captured step records again)

    def __delitem__(self, key):
        del self._dict()[key]
        _state_version[0] += 1

    def __iter__(self):
        return iter(list(self._dict()))

    def __len__(self):
        return len(self._dict())

    def __repr__(self):
        return f"OrderedDict({dict(self)!r})"


def _hook_dict(kind):
    """The property of _HookDict `kind`; setting it (`m._forward_hooks = OrderedDict()`, as
    torch code resets them) replaces every hook of that kind with the mapping's."""

    def replace(self, hooks):
        view = _HookDict(self, kind)
        view.clear()
        view.update(hooks)

    return property(lambda self: _HookDict(self, kind), replace,
                    doc=f"torch's {{key: hook}} of the module's {kind} hooks, live (_HookDict)")


# the global forward hooks (torch's nn.modules.module.register_module_forward_hook and
# register_module_forward_pre_hook), run by every module's call before its own. While there
# is one, Module._hooks (None otherwise: a module without hooks of its own then calls forward
# straight away, one check) is _NO_OWN_HOOKS, empty hook dicts that no module registers into
# (each registers into a dict of its own): every call then takes _call_hooked, which runs them
_GLOBAL = {"pre": OrderedDict(), "post": OrderedDict()}
_NO_OWN_HOOKS = {k: OrderedDict() for k in _HOOK_KINDS}


def _with_global(hooks, kind):
    """[(key, (hook, with_kwargs, always_call))] of the global hooks of `kind` ("pre" or
    "post") and then the module's own, as torch runs them."""
    return [*_GLOBAL[kind].items(), *hooks[kind].items()]


class _GlobalHandle(RemovableHandle):
    """A global hook's handle: removing the last one takes the hooked path off every call."""

    def remove(self):
        super().remove()
        if not _GLOBAL["pre"] and not _GLOBAL["post"]:
            Module._hooks = None
        _state_version[0] += 1


def _global_hook(kind, hook, with_kwargs=False, always_call=False):
    if not callable(hook):
        raise TypeError(f"register_module_forward_{'pre_' if kind == 'pre' else ''}hook: the "
                        f"hook must be callable, got {hook!r}")
    handle = _GlobalHandle(_GLOBAL[kind], (hook, with_kwargs, always_call))
    Module._hooks = _NO_OWN_HOOKS
    _state_version[0] += 1  # (a captured step records again)
    return handle


def register_module_forward_pre_hook(hook):
    """hook(module, args) runs before every module's forward, before the module's own
    pre-hooks; what it returns, if not None, replaces the arguments (torch's). Returns a
    handle whose remove() takes it off."""
    return _global_hook("pre", hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """hook(module, args, output) (hook(module, args, kwargs, output) with_kwargs) runs after
    every module's forward, before the module's own forward hooks; what it returns, if not
    None, replaces the output; always_call: also when forward raised (torch's). Returns a
    handle whose remove() takes it off."""
    return _global_hook("post", hook, with_kwargs, always_call)


class Module:
    """Base class of every layer and model: subclass it, assign parts in __init__, write forward."""

    _version = 1  # (torch's: state_dict's _metadata records it; raise it when a module's saved
    # entries change, and migrate older ones in _load_from_state_dict by local_metadata)

    def __init__(self):
        d = self.__dict__  # (attributes set before, plain ones only, are kept, as torch's)
        d["_parameters"] = _Registry(self)  # name -> Parameter or None
        d["_modules"] = _Registry(self)  # name -> Module or None
        d["_buffers"] = _Registry(self, tree=False)  # name -> Tensor or None
        d["_non_persistent"] = set()  # buffers left out of state_dict
        d["training"] = True
        d["_path"] = None  # dotted path from the model called last
        d["_named_at"] = -1  # _tree_version when this root named its tree
        d["_params_at"] = (-1, ())  # (_tree_version, named_parameters)

    def __setstate__(self, state):
        """copy.deepcopy and pickle: the module's attributes, and its dicts adopted (a copy.copy
        shares the original's dicts, which then keep both modules' attributes in step)."""
        self.__dict__.update(state)
        # what the original had cached about its tree is dropped: its _tree_version stamp is
        # another process's count (a pickle), which this process's count may reach after a
        # change, and the stale walk would then pass for current
        object.__setattr__(self, "_named_at", -1)
        object.__setattr__(self, "_params_at", (-1, ()))
        for kind, tree in _KINDS.items():
            entries = state.get(kind)
            if isinstance(entries, _Registry):
                entries._adopt(self)
            elif entries is not None:  # (a plain dict, from elsewhere)
                object.__setattr__(self, kind, _Registry(self, tree))
                getattr(self, kind).update(entries)

    # (no __getattr__: on the class it would keep Python from specializing every attribute
    # read, m.weight in each forward among them; an uninitialised module says so where used)

    def _uninitialised(self):
        return AttributeError(f"{type(self).__name__}.__init__ must call super().__init__() "
                              "before the module is used")

    def __setattr__(self, name, value):
        """torch's rules, in torch's order: a Parameter is registered as one (over a buffer or
        a child too); over a parameter only a Parameter or None may go; a Module is registered
        as a child; over a child only a Module or None; over a buffer a Tensor or None; anything
        else is a plain attribute. Before Module.__init__() only plain attributes may be set."""
        d = self.__dict__
        params = d.get("_parameters")
        if params is None:
            self._set_before_init(name, value)
        # a replaced parameter or module keeps its place (and its place in the state dict), and
        # so does one set to None: the slot stays, empty, as torch's (`m.bias = None`)
        elif isinstance(value, Parameter):
            self._modules.pop(name, None)
            self._forget_buffer(name)
            params[name] = value
        elif name in params:
            params[name] = self._none_or_refused(name, value, "parameter", "Parameter")
        elif isinstance(value, Module):
            self._forget_buffer(name)
            self._modules[name] = value
        elif name in self._modules:
            self._modules[name] = self._none_or_refused(name, value, "child module", "Module")
        elif isinstance(value, Buffer):  # (torch's: registered, its persistence with it)
            self.register_buffer(name, value, getattr(value, "persistent", True))
        elif name in self._buffers:
            self._buffers[name] = self._none_or_refused(name, value, "buffer", "Tensor")
        elif name in _KINDS and isinstance(value, Mapping):
            self._replace_dict(name, value)  # (torch code may set a new dict of them)
        else:
            self._set_plain(d, name, value)

    def _set_plain(self, d, name, value):
        """A plain attribute, as object's: into the instance's dict, or through the class's
        data descriptor where it has one (a property's setter, __class__), as torch's."""
        if d.get(name, _MISSING) is not value:  # a setting (Dropout.p, eps) that forward reads:
            _state_version[0] += 1  # a captured step records again
        if name == "__class__" or hasattr(getattr(type(self), name, None), "__set__"):
            object.__setattr__(self, name, value)
        else:
            d[name] = value

    def _set_before_init(self, name, value):
        """An attribute set before Module.__init__(): a plain one only, as torch's."""
        if isinstance(value, (Parameter, Module)):
            what = "parameters" if isinstance(value, Parameter) else "module"
            raise AttributeError(f"{type(self).__name__}: cannot assign {what} before "
                                 "Module.__init__() call; call super().__init__() first")
        object.__setattr__(self, name, value)

    def _forget_buffer(self, name):
        self._buffers.pop(name, None)
        self._non_persistent.discard(name)

    def _none_or_refused(self, name, value, what, want):
        """`value` for the slot of a registered `what` (None, or a `want`: a buffer takes any
        Tensor), or torch's TypeError."""
        if value is None or (want == "Tensor" and isinstance(value, Tensor)):
            return value
        hint = "; to replace the weight, assign nn.Parameter(value)" \
            if what == "parameter" and isinstance(value, Tensor) else ""
        raise TypeError(f"{type(self).__name__}: cannot assign '{type(value).__name__}' as "
                        f"{what} {name!r} ({want} or None expected){hint}")

    def _replace_dict(self, kind, entries):
        """`self._modules = OrderedDict(...)` (and the others): the new entries replace the old
        ones, attributes too."""
        old = self.__dict__[kind]
        for name in list(old):
            OrderedDict.__delitem__(old, name)
            self.__dict__.pop(name, None)
        new = _Registry(self, _KINDS[kind])
        object.__setattr__(self, kind, new)
        new.update(entries)
        _tree_version[0] += 1

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __call__(self, *args, **kwargs):
        try:
            renamed = self._named_at != _tree_version[0]
        except AttributeError:
            raise self._uninitialised() from None
        if renamed and current_scope() is None:
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

    # {"pre": {...}, "post": {...}, "backward": {...}, "backward_pre": {...}} once a hook is
    # registered (see _hook): key -> (hook, with_kwargs, always_call)
    _hooks = None
    _forward_pre_hooks, _forward_hooks = _hook_dict("pre"), _hook_dict("post")
    _backward_pre_hooks, _backward_hooks = _hook_dict("backward_pre"), _hook_dict("backward")

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) runs before forward (hook(module, args, kwargs) with_kwargs); what
        it returns, if not None, replaces the arguments (a tuple, or one value; with_kwargs, an
        (args, kwargs) pair). Returns a handle whose remove() takes it off (as torch)."""
        return self._hook("pre", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """hook(module, args, output) runs after forward (hook(module, args, kwargs, output)
        with_kwargs); what it returns, if not None, replaces the output. always_call: it runs
        also when forward (or a hook before it) raised, as torch's, with output None if
        forward did not return; the error then goes on (and one the hook raises is a
        warning)."""
        return self._hook("post", hook, prepend, with_kwargs, always_call)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) runs when the gradients with respect to this
        call's tensor inputs have been summed: grad_input holds one per positional argument
        (zeros for a tensor that needs no gradient, None for a non-tensor, as torch),
        grad_output one per output. A tuple it returns replaces
        grad_input for the hooks after it and for backward (a None in it: no gradient for
        that input from this call, as torch). With no input that requires grad it runs
        once the outputs' gradients are in, grad_input all None (as torch). An output that
        gets no gradient has None in grad_output. Each call of the module wraps its inputs,
        and its outputs, in one packed copy so that the hook sees all their gradients at
        once."""
        return self._hook("backward", hook, prepend, False)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) runs when the gradients with respect to this call's
        outputs are in (None for an output that gets none), before they flow into the module;
        a tuple it returns (one per output) replaces grad_output for the hooks after it, for
        the full backward hooks and for backward (as torch)."""
        return self._hook("backward_pre", hook, prepend, False)

    def register_backward_hook(self, hook):
        """torch's deprecated form: refused, with the replacement named (its grad_input is
        that of the last op inside forward, which no module here has as one op: a Linear's
        would be addmm's three; quietly giving the full hook's would change a user's values)."""
        raise NotImplementedError(
            "register_backward_hook: torch's deprecated module backward hook (grad_input of "
            "the last op inside forward) is not supported; use "
            "register_full_backward_hook(hook), whose hook(module, grad_input, grad_output) "
            "gets the gradients with respect to the module's own inputs and outputs")

    def _hook(self, kind, hook, prepend, with_kwargs, always_call=False):
        if not callable(hook):
            name = {"pre": "forward_pre_", "post": "forward_", "backward": "full_backward_",
                    "backward_pre": "full_backward_pre_"}
            raise TypeError(f"register_{name[kind]}hook: the hook must be callable, got "
                            f"{hook!r}")
        if "_hooks" not in self.__dict__:  # (Module._hooks may be _NO_OWN_HOOKS: see _GLOBAL)
            object.__setattr__(self, "_hooks", {k: OrderedDict() for k in _HOOK_KINDS})
        hooks = self._hooks[kind]
        handle = RemovableHandle(hooks, (hook, with_kwargs, always_call))
        _state_version[0] += 1  # (a captured step records again, and sees it: tinyattn.replay)
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def _call_hooked(self, args, kwargs):
        hooks = self._hooks
        if any(hooks.values()) or _GLOBAL["pre"] or _GLOBAL["post"]:
            for tracer in current_tracers():
                tracer.module_hooks(self)
        called, output, watch = set(), None, None  # (called: the always_call hooks run)
        try:
            args, kwargs = self._pre_hooked(args, kwargs)
            if (hooks["backward"] or hooks["backward_pre"]) and is_grad_enabled():
                watch = _BackwardWatch(self, args)
                args = watch.inputs
            output = self.forward(*args, **kwargs)
            for key, (hook, with_kwargs, always_call) in _with_global(hooks, "post"):
                if always_call:
                    called.add(key)
                out = hook(self, args, kwargs, output) if with_kwargs else \
                    hook(self, args, output)
                if out is not None:
                    output = out
        except Exception:
            self._always_called(args, kwargs, output, called)
            raise
        return output if watch is None else watch.outputs(output)

    def _always_called(self, args, kwargs, output, called):
        """After forward or a hook raised: the always_call forward hooks that did not run yet,
        with the output so far (None if forward did not return), as torch; an error one
        raises is a warning (the first error goes on)."""
        for key, (hook, with_kwargs, always_call) in _with_global(self._hooks, "post"):
            if not always_call or key in called:
                continue
            try:
                out = hook(self, args, kwargs, output) if with_kwargs else \
                    hook(self, args, output)
                output = output if out is None else out
            except Exception as e:
                warn_user("module forward hook with ``always_call=True`` raised an "
                          "exception that was silenced as another error was raised in "
                          f"forward: {e}", UserWarning)

    def _pre_hooked(self, args, kwargs):
        """(args, kwargs) after the forward pre-hooks, each of which may replace them."""
        for _, (hook, with_kwargs, _) in _with_global(self._hooks, "pre"):
            out = hook(self, args, kwargs) if with_kwargs else hook(self, args)
            if out is not None and with_kwargs:
                args, kwargs = _args_kwargs(self, out)
            elif out is not None:
                args = out if isinstance(out, tuple) else (out,)
        return args, kwargs

    def forward(self, *args, **kwargs):
        # (torch's error and words)
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function: a Module subclass defines forward()')

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
        _check_key(where, "the name", name)

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
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        self._buffers[name] = tensor  # (the attribute too: see _Registry)

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

    def modules(self, remove_duplicate=True):
        return (m for _, m in self.named_modules(remove_duplicate=remove_duplicate))

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

    def get_buffer(self, target):
        """The buffer at a dotted path ("0.running_mean"), as torch's (None for a buffer
        registered as None)."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in module._buffers:
            what = "is not a buffer" if hasattr(module, name) else "does not exist"
            raise AttributeError(f"get_buffer: {type(module).__name__}'s attribute {name!r} "
                                 f"{what} (looking up {target!r})")
        return module._buffers[name]

    def set_submodule(self, target, module, strict=False):
        """Put `module` at a dotted path ("blocks.0.attn"), as torch's: the parent must exist;
        what is there must be a module (strict: there must be one), else AttributeError."""
        if target == "":
            raise ValueError("set_submodule: cannot set the submodule without a target name")
        if not isinstance(module, Module):
            raise ValueError(f"set_submodule: `module` is not an nn.Module, found "
                             f"{type(module)}")
        path, _, name = target.rpartition(".")
        parent = self.get_submodule(path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"set_submodule: {type(parent).__name__} has no attribute "
                                 f"`{name}` (strict=True replaces only an existing submodule)")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"set_submodule: `{name}` is not an nn.Module")
        setattr(parent, name, module)

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
        try:
            at, found = self._params_at
        except AttributeError:
            raise self._uninitialised() from None
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
        """Training mode (True) or evaluation mode (False) for this module and, through each
        child's train(mode), every module inside it (Dropout drops only in training mode);
        returns the module. eval() is train(False)."""
        if not isinstance(mode, (bool, np.bool_)):  # "no" or 0 would read as a mode, wrongly
            raise ValueError(f"{type(self).__name__}.train: mode must be True or False, got "
                             f"{mode!r}")
        mode = bool(mode)
        if self.training != mode:  # (a mode that changes: what a captured step must see)
            _state_version[0] += 1
        object.__setattr__(self, "training", mode)
        # then each child's own train(), as torch's (so an override of it is obeyed); a module
        # inside itself once, not forever
        with _entered(self, "train") as inside:
            if not inside:
                for child in self.children():
                    child.train(mode)
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
        torch keeps them): torch's forms, to(device), to(dtype), to(device, dtype), to(tensor)
        (a tinyattn or a torch tensor: its device and dtype), dtype= and device=, a dtype
        tinyattn's or torch's (torch.float64); returns self."""
        if args and type(args[-1]) is bool:  # torch's positional non_blocking
            args = args[:-1]
        device, dtype = to_args(_torch_tensors_opened(args), device, dtype)
        dtype = None if dtype is None else as_dtype(dtype)
        if dtype is not None and dtype.kind != "f":
            raise DTypeError(f"Module.to: a module can only be cast to a float dtype (as "
                             f"torch's nn.Module.to), got {dtype}")
        self._cast(None if device is None else backends.backend(device), dtype, every=False)
        return self

    def _cast(self, be, dtype, every):
        """Every parameter and buffer (and .grad) moved to backend `be` and cast to `dtype`
        (None: no change there), in place: the floating ones only, or `every` one (type())."""
        for t in [*self.parameters(), *self.buffers()]:
            self._moved(t, be, dtype, every)
            if t._grad is not None:  # kept, moved and cast with its tensor (torch's rule)
                self._moved(t.grad, be, dtype, every)

    @staticmethod
    def _moved(t, be, dtype, every=False):
        """Put tensor `t` on backend `be` and cast it to `dtype` if it is floating (integer
        buffers keep theirs) or `every`, in place; None: no change there."""
        if be is not None and be is not t.backend:
            t._data = be.asarray(t.backend.to_numpy(t._data))
            t.backend = be
        if dtype is not None and (every or t.dtype.kind == "f") and t.dtype != dtype:
            t._data = t._data.astype(dtype)

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")

    def type(self, dst_type):
        """Every parameter and buffer cast to `dst_type` (a dtype, tinyattn's or torch's, or a
        type name, "torch.DoubleTensor"), integer buffers too, as torch's Module.type (a
        parameter that requires grad must stay floating); returns self."""
        if isinstance(dst_type, str):
            device, dtype = _type_named(dst_type)
        else:
            device, dtype = None, as_dtype(dst_type)
        if dtype.kind != "f" and any(p.requires_grad for p in self.parameters()):
            raise DTypeError(f"{type(self).__name__}.type: cannot cast to {dtype}: a parameter "
                             "that requires grad must be floating point (as torch's)")
        self._cast(None if device is None else backends.backend(device), dtype, every=True)
        return self

    def half(self):
        return self.to(np.float16)

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    # ---- saving and loading --------------------------------------------------------------------

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Every parameter and persistent buffer by its dotted path (tied weights, and a module
        used twice, under each of their names), in PyTorch's order: a module's parameters, its
        buffers, then its children. Keys start with `prefix`; values are detached unless
        keep_vars; with `destination`, it is filled and returned. As torch's, each module
        writes its own entries (_save_to_state_dict) and then calls each child's state_dict(),
        so an override of either is obeyed; the positional form is deprecated, as torch's.
        The dict made here carries `_metadata`, as torch's: {each module's prefix without the
        trailing dot ("" for this one): {"version": its class's _version}}, which
        load_state_dict hands to that module's _load_from_state_dict as local_metadata (an
        override migrates older checkpoints by it)."""
        if args:
            warn_user("state_dict: positional arguments are deprecated (as in torch); give "
                      "destination=, prefix=, keep_vars=", FutureWarning)
            destination = args[0] if destination is None else destination
            prefix = args[1] if len(args) > 1 and prefix == "" else prefix
            keep_vars = args[2] if len(args) > 2 and keep_vars is False else keep_vars
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()  # {prefix without its dot: {"version": ..}}
        with _entered(self, "state_dict") as inside:
            if inside:  # a module inside itself: once, where torch's recursion never ends
                return destination
            if hasattr(destination, "_metadata"):  # (torch's: what load_state_dict hands each
                destination._metadata[prefix[:-1]] = {"version": self._version}  # module)
            self._save_to_state_dict(destination, prefix, keep_vars)
            for name, module in self._modules.items():
                if module is not None:
                    module.state_dict(destination=destination, prefix=prefix + name + ".",
                                      keep_vars=keep_vars)
        return destination

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """This module's own parameters and persistent buffers (not its children's) into
        `destination`, as torch's, and its get_extra_state() under "_extra_state" where the
        class defines one."""
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                destination[prefix + name] = b if keep_vars else b.detach()
        if _overrides(self, "get_extra_state"):
            destination[prefix + _EXTRA_STATE] = self.get_extra_state()

    def get_extra_state(self):
        """State that is not a tensor (a setting, a tokenizer's table) for state_dict(), as
        torch's: a subclass that defines it (and set_extra_state) saves it under
        "<prefix>_extra_state"; load_state_dict hands it back to set_extra_state."""
        raise RuntimeError(f"{type(self).__name__}.get_extra_state: a module that keeps extra "
                           "state defines get_extra_state (and set_extra_state)")

    def set_extra_state(self, state):
        """Restore what get_extra_state() returned (called by load_state_dict), as torch's."""
        raise RuntimeError(f"{type(self).__name__}.set_extra_state: a module whose state_dict "
                           "holds '_extra_state' defines set_extra_state to read it")

    def _own_state(self):
        """{name: tensor} of this module's parameters and persistent buffers that are set."""
        out = {name: p for name, p in self._parameters.items() if p is not None}
        out.update((name, b) for name, b in self._buffers.items()
                   if b is not None and name not in self._non_persistent)
        return out

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values into the parameters and buffers; on any mismatch raise and change nothing.

        strict=True: keys must match exactly. Shapes must always match. What older checkpoints
        lack and a module knows how to fill (a BatchNorm's num_batches_tracked) is not missing.
        assign=True (torch's): the given tensors become the parameters and buffers instead of
        being copied into them (their memory, dtype and backend; a tensor given for a parameter
        is wrapped as a Parameter that shares it, a Parameter given is used itself; either keeps
        the old parameter's requires_grad); a tensor given under two keys becomes one parameter.
        An optimizer made before holds the old parameters: make it after, as with torch.
        As torch's, each module reads its own entries (_load_from_state_dict, which an override
        may change: rename keys, fill some in) from a copy of the state dict, its children
        theirs; here every value is checked before any is written.
        A mismatch is a StateDictError: a CheckpointError (ValueError) and a RuntimeError, as
        torch's.
        """
        where = f"load_state_dict({type(self).__name__})"
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"{where}: Expected state_dict to be dict-like, got "
                            f"{type(state_dict)}.")
        metadata = getattr(state_dict, "_metadata", None)
        missing, unexpected, problems, pending = [], [], [], []
        outer = getattr(_loading, "pending", None)
        _loading.pending = pending  # the default _load_from_state_dict defers its writes here
        try:
            _load_tree(self, OrderedDict(state_dict), "", (), metadata, assign,
                       (missing, unexpected, problems))
        finally:
            _loading.pending = outer
        order = {key: n for n, key in enumerate(state_dict)}  # (the checkpoint's order)
        unexpected.sort(key=lambda key: order.get(key, len(order)))
        if strict:
            problems = _key_problems(missing, unexpected) + problems
        if problems:
            raise StateDictError(f"{where}: nothing was loaded; " + "; ".join(problems))
        _commit(pending, assign)
        return IncompatibleKeys(missing, unexpected)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Read this module's own entries (not its children's) from `state_dict` (a copy: an
        override may change it), as torch's: a value that does not fit is a message in
        error_msgs; with strict, the keys it lacks go to missing_keys and those under `prefix`
        that are neither its own nor a child's to unexpected_keys. Inside load_state_dict the
        writes wait until every module's values are checked (nothing is loaded on an error);
        called on its own, it writes at once."""
        state_dict.update(self._state_defaults(prefix, state_dict))
        own = self._own_state()
        assign = local_metadata.get("assign_to_params_buffers", False)
        convert = self._assignable if assign else self._loadable
        pending = getattr(_loading, "pending", None)
        alone, pending = pending is None, [] if pending is None else pending
        for name, t in own.items():
            key = prefix + name
            if key in state_dict:
                value = convert(key, state_dict[key], t, error_msgs)
                if value is not None:
                    pending.append((self, name, t, value))
            elif strict:
                missing_keys.append(key)
        # "_extra_state" (torch's rule): set_extra_state reads it (deferred as the writes,
        # old None marks it); a class without one finds the key unexpected
        extra = prefix + _EXTRA_STATE
        if _overrides(self, "set_extra_state"):
            if extra in state_dict:
                pending.append((self, _EXTRA_STATE, None, state_dict[extra]))
            elif strict:
                missing_keys.append(extra)
        elif strict and extra in state_dict:
            unexpected_keys.append(extra)
        if strict:
            unexpected_keys.extend(self._unexpected(state_dict, prefix, own))
        if alone:
            _commit(pending, assign)

    def _unexpected(self, state_dict, prefix, own):
        """The keys of `state_dict` under `prefix` that are neither this module's own tensors
        nor under one of its children (None slots hold nothing)."""
        for key in state_dict:
            if key.startswith(prefix) and key != prefix + _EXTRA_STATE:  # (see above)
                first, dot, _ = key[len(prefix):].partition(".")
                if (self._modules.get(first) is None) if dot else first not in own:
                    yield key

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
        if value.shape == (1,) and p.ndim == 0:  # (torch's rule for checkpoints of torch 0.3)
            value = value.detach().reshape(())  # (its memory: a view)
        if value.shape != p.shape:
            problems.append(f"{key}: the checkpoint has shape {fmt_shape(value.shape)}, the "
                            f"model {fmt_shape(p.shape)}")
            return None
        if isinstance(p, Parameter) and p.requires_grad and value.dtype.kind != "f":
            problems.append(f"{key}: the checkpoint has dtype {value.dtype}, which cannot become "
                            "a parameter that requires grad (only floating-point tensors can)")
            return None
        return value

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
        if array.shape == (1,) and p.ndim == 0:  # torch's: a (1,) value loads into a 0-d
            array = array.reshape(())  # tensor (as torch 0.3 saved its scalars)
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
        """torch's layout: extra_repr() inside the parentheses when it is one line and there
        are no children, else its lines and then the children's, one a line, indented."""
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        children = [_indented(f"({name}): {m!r}") for name, m in self._modules.items()]
        if len(lines) == 1 and not children:
            return f"{type(self).__name__}({lines[0]})"
        body = "".join("\n  " + line for line in lines + children)
        return f"{type(self).__name__}({body}\n)" if body else f"{type(self).__name__}()"

    def extra_repr(self):
        return ""


@contextlib.contextmanager
def eval_mode(module):
    """The block runs with `module` in eval mode (dropout off, batch norm on its running
    statistics); after it, also when it fails, every module inside has the mode it had before,
    each its own (a part left in eval mode by the user stays so; model.train(was) would not)."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield module
    finally:
        for m, was in modes:
            if m.training != was:
                _state_version[0] += 1  # (a mode that changes: a captured step records again)
                object.__setattr__(m, "training", was)


def _args_kwargs(module, out):
    """What a with_kwargs forward pre-hook returned, checked: an (args, kwargs) pair."""
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Mapping):
        return out
    got = f"a tuple of {len(out)}" if isinstance(out, tuple) else type(out).__name__
    if isinstance(out, tuple) and len(out) == 2:
        got = f"a pair whose kwargs is a {type(out[1]).__name__}"
    raise RuntimeError(  # (torch's error is a RuntimeError too)
        f"{type(module).__name__}: a forward pre-hook registered with with_kwargs=True must "
        f"return None or a tuple (new_args, new_kwargs), new_kwargs a dict, got {got}")


def _indented(text):
    """A child's repr under its parent's: every line after the first indented by two spaces,
    blank ones left empty (torch's _addindent)."""
    first, *rest = text.split("\n")
    return "\n".join([first] + [f"  {line}" if line.strip() else "" for line in rest])


_EXTRA_STATE = "_extra_state"  # the key of get_extra_state()'s value, after the module's prefix


def _overrides(module, method):
    """Whether `module`'s class defines `method` (get_extra_state, set_extra_state) itself."""
    return getattr(type(module), method) is not getattr(Module, method)


def _key_problems(missing, unexpected):
    """What a strict load_state_dict refuses of the missing and unexpected keys."""
    problems = []
    if missing:
        problems.append(f"missing keys: {', '.join(missing)}")
    if unexpected:
        problems.append(f"unexpected keys: {', '.join(unexpected)}")
    return problems


def _load_tree(module, state, prefix, above, metadata, assign, found):
    """load_state_dict's walk, as torch's: `module` reads its entries of `state`, then each
    child (once per path that holds it; a module inside itself once) the entries under its
    name. found: (missing keys, unexpected keys, problems), filled in."""
    local = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
    if assign:
        local["assign_to_params_buffers"] = True
    module._load_from_state_dict(state, prefix, local, True, *found)
    above += (module,)
    for name, child in module._modules.items():
        if child is not None and child not in above:
            inner = prefix + name + "."
            _load_tree(child, {k: v for k, v in state.items() if k.startswith(inner)}, inner,
                       above, metadata, assign, found)


def _commit(pending, assign):
    """Write what _load_from_state_dict checked, [(module, name, old tensor, value)]: copied
    into the old tensor's memory (as torch's copy_), or with assign put in its slot (a value
    given under two keys becomes one Parameter)."""
    made = {}  # id(given tensor) -> the Parameter it became
    for module, name, old, value in pending:
        if old is None:  # the module's extra state (see _load_from_state_dict)
            module.set_extra_state(value)
        elif assign:
            setattr(module, name, _assigned(old, value, made))
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # (past float16's range: inf,
                old.backend.xp.copyto(old._writable("load_state_dict"),  # as torch's copy_)
                                      old.backend.asarray(value), casting="unsafe")
            bump_version(old)


def _assigned(old, value, made):
    """What takes `old`'s place with assign=True: for a parameter, `value` as a Parameter
    (itself if it is one; else one sharing its memory) with old's requires_grad; for a buffer,
    the tensor itself (a Parameter's memory as a plain tensor)."""
    if not isinstance(old, Parameter):
        return value.detach() if isinstance(value, Parameter) else value
    new = made.get(id(value))
    if new is None and isinstance(value, Parameter):
        new = value
        new.requires_grad = old.requires_grad  # (torch's: the old one's setting)
    elif new is None:  # the given memory as a Parameter, as torch's Parameter(t)
        new = Parameter._wrap(value._data, value.backend)
        share_version(value, new, differentiable=False)  # (a leaf of its own, as above)
        new._require(old.requires_grad)
    made[id(value)] = new
    return new


_loading = threading.local()  # .pending: the writes of the load_state_dict in progress
_walking = threading.local()  # .paths: {walk: ids of the modules on its path} (see _entered)


@contextlib.contextmanager
def _entered(module, walk):
    """For a recursive walk (train, state_dict) through each child's own method: True when
    `module` is already on this thread's path of that walk (a module inside itself), else
    False, with `module` on the path while the block runs."""
    paths = getattr(_walking, "paths", None)
    if paths is None:
        paths = _walking.paths = {}
    path = paths.setdefault(walk, set())
    if id(module) in path:
        yield True
        return
    path.add(id(module))
    try:
        yield False
    finally:
        path.discard(id(module))


def _torch_tensors_opened(args):
    """Module.to's positional arguments with a torch tensor as its device and dtype and a
    torch device as its type ("cuda:0" -> "cuda"); the others as they are."""
    out = []
    for arg in args:
        if type(arg).__module__.split(".")[0] == "torch" and hasattr(arg, "device") and \
                hasattr(arg, "dtype"):
            out += [arg.device.type, arg.dtype]
        elif type(arg).__module__.split(".")[0] == "torch" and hasattr(arg, "index"):
            out.append(arg.type)
        else:
            out.append(arg)
    return tuple(out)


class IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict(strict=False) left out, a named pair as torch's
    (`missing, unexpected = model.load_state_dict(state, strict=False)`); also read by name,
    result["missing_keys"]."""

    __slots__ = ()

    def __getitem__(self, key):
        return getattr(self, key) if isinstance(key, str) else super().__getitem__(key)

    def __repr__(self):
        """torch's: "<All keys matched successfully>" when both lists are empty, else
        "_IncompatibleKeys(missing_keys=[...], unexpected_keys=[...])"."""
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"_IncompatibleKeys(missing_keys={self.missing_keys!r}, "
                f"unexpected_keys={self.unexpected_keys!r})")

    __str__ = __repr__


class _Indexed(Module):
    """Children registered under their indices ("blocks.0", "blocks.1", ...), used as a list."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:  # (None: empty, as torch's)
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
        """Put module at index (-len..len), the ones from there on moving one place up; returns
        self (torch's Sequential.insert does: `seq = seq.insert(0, m)`)."""
        _check_module(type(self).__name__, module)
        n = len(self._modules)
        if not -n <= index <= n:  # (a list's insert would append or prepend, silently)
            raise IndexError(f"{type(self).__name__}.insert: index {index} is out of range for "
                             f"{n} modules (valid: {-n}..{n})")
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)
        return self

    def pop(self, index=-1):
        """The module at index (a slice: a Sequential or ModuleList of those), removed; as
        torch's, `self[index]` then `del self[index]`."""
        module = self[index]
        del self[index]
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
            _Indexed.__init__(part, ())
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


class _NameTypeError(KeyError, TypeError):
    """A name (of a child, parameter, buffer, ParameterDict key) that is no string: torch's
    TypeError, and the KeyError tinyattn raised for it before."""


def _check_key(where, what, name):
    """`name` as state_dict can key it: a non-empty string without '.' (torch's rules: no
    string is a TypeError, an empty or dotted one a KeyError)."""
    if not isinstance(name, str):
        raise _NameTypeError(f"{where}: {what} must be a non-empty string without '.', got "
                             f"{name!r}: a name should be a string, not "
                             f"{type(name).__name__}")
    if not name or "." in name:
        raise KeyError(f"{where}: {what} must be a non-empty string without '.', got {name!r}")


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

    def forward(self, input):  # noqa: A002 - torch's argument name
        x = input
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

    def __repr__(self):
        """torch's: a run of entries whose reprs are the same, one line, "(0-2): 3 x ...";
        "ModuleList()" when empty."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return f"{type(self).__name__}()"
        runs = []  # [first index, last index, repr]
        for i, text in enumerate(reprs):
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        lines = [_indented(f"({a}): {text}" if a == b else f"({a}-{b}): {b - a + 1} x {text}")
                 for a, b, text in runs]
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


class _BackwardWatch:
    """One call of a module with full backward hooks (or backward pre-hooks): its tensor inputs
    that require grad are packed into one flat tensor and read back out of it, so that the
    gradient of the packed tensor (complete once every use inside the module has sent its
    part) holds all the grad_inputs; its outputs that require grad likewise, so that the
    gradient of their packed tensor, complete before any of it flows into the module, holds
    grad_output (hooks on the outputs themselves tell which got a gradient: None for the
    others). As torch's BackwardHook: the pre-hooks run there, and may replace grad_output;
    the full hooks run when the inputs' gradient is in, or there already when no input needs
    grad (grad_input all None), once per backward pass."""

    def __init__(self, module, args):
        self.module, self.n_args = module, len(args)
        self.reached, self.grad_output = {}, None
        self.where = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        self.inputs = args
        if self.where and module._hooks["backward"]:
            self.dropped = ()  # (what the hooks replaced with None, see _on_inputs)
            self.parts, packed, self.inputs = _packed(args, self.where, self)
            packed.register_hook(self._on_inputs)
            # the tensor arguments that need no gradient: zeros in grad_input (as torch's,
            # whose hook sees every tensor argument once one needs grad; None: non-tensors)
            self.still = [(i, tuple(a.shape), a.dtype, a.backend) for i, a in enumerate(args)
                          if isinstance(a, Tensor) and not a.requires_grad]
        else:
            self.where = []  # (no full hook to give them to: the inputs go in as they are)

    def outputs(self, output):
        """The output as the module returns it: each tensor in it that requires grad read out
        of one packed copy of them all (as they were, where none does)."""
        outs = output if isinstance(output, tuple) else (output,)
        self.n_out = len(outs)
        self.at = [k for k, t in enumerate(outs) if isinstance(t, Tensor) and t.requires_grad]
        if not self.at:
            return output
        self.out_parts, packed, new = _packed(outs, self.at)
        packed.register_hook(self._on_outputs)
        for k in self.at:
            new[k].register_hook(lambda g, k=k: self.reached.__setitem__(k, g))
        if not isinstance(output, tuple):
            return new[0]
        return output._make(new) if hasattr(output, "_make") else type(output)(new)

    def _on_outputs(self, g):
        """grad_output is in: run the pre-hooks (a replacement goes on into the module), and the
        full hooks too when no input needs grad."""
        grad_output = tuple(self.reached.get(k) for k in range(self.n_out))
        self.reached = {}  # (a second backward through the same graph collects anew)
        replaced = False
        for hook, _, _ in list(self.module._hooks["backward_pre"].values()):
            out = hook(self.module, grad_output)
            if out is not None:
                grad_output, replaced = self._checked_outputs(out), True
        self.grad_output = grad_output
        if not self.where:  # no input to wait for
            self._call(tuple(None for _ in range(self.n_args)))
        if not replaced:
            return None
        flat = [(grad_output[k] if grad_output[k] is not None else
                 g[start:start + n] * 0).reshape(-1).to(g.dtype)
                for k, start, n in self._slots()]
        return F.cat(flat)

    def _slots(self):
        """(output position, start in the packed outputs, size) of each packed output."""
        start = 0
        for k, (_, _, n) in zip(self.at, self.out_parts, strict=True):
            yield k, start, n
            start += n

    def _checked_outputs(self, new):
        """A pre-hook's replacement grad_output, checked: one per output, each of its shape."""
        new = tuple(new) if isinstance(new, (tuple, list)) else None
        if new is None or len(new) != self.n_out or any(
                new[k] is not None and tuple(new[k].shape) != shape
                for k, (shape, _, _) in zip(self.at, self.out_parts, strict=True)):
            shapes = ", ".join(fmt_shape(shape) for shape, _, _ in self.out_parts)
            raise ShapeError(f"{type(self.module).__name__}: a full backward pre-hook must "
                             f"return None or {self.n_out} gradients (one per output, of the "
                             f"shapes {shapes}), got {new!r}")
        return new

    def _on_inputs(self, g):
        grads, start = [None] * self.n_args, 0
        for j, i in enumerate(self.where):
            shape, dtype, n = self.parts[j]
            grads[i] = g[start:start + n].reshape(shape).to(dtype)
            start += n
        for i, shape, dtype, backend in self.still:
            grads[i] = zeros(*shape, dtype=dtype, backend=backend)
        self.dropped = ()
        new = self._call(tuple(grads))
        if new is None:
            return None
        if not isinstance(new, (tuple, list)) or len(new) != self.n_args:
            raise ShapeError(f"{type(self.module).__name__}: a full backward hook must return "
                             f"None or {self.n_args} gradients (one per input), got {new!r}")
        # (None: that input gets no gradient, as in torch: _PackInputs drops its part, which
        # is a zero one here meanwhile)
        self.dropped = {j for j, i in enumerate(self.where) if new[i] is None}
        flat = [(new[i] if new[i] is not None else grads[i] * 0).reshape(-1).to(g.dtype)
                for i in self.where]
        return F.cat(flat)

    def _call(self, grad_input):
        """Run the full backward hooks; what the last one returned (None: nothing replaced).
        Where the gradient reached the inputs without passing through the outputs (a tensor
        made inside forward and used outside, a backward run inside forward), no hook runs,
        as torch's BackwardHook."""
        grad_output = self.grad_output
        if grad_output is None:
            return None
        self.grad_output = None
        result = None
        for hook, _, _ in list(self.module._hooks["backward"].values()):
            out = hook(self.module, grad_input, grad_output)
            if out is not None:
                result = grad_input = tuple(out)
        return result


class _PackInputs(Function):
    """A call's inputs packed into one flat tensor, as F.cat, but for the _BackwardWatch
    `watch`: its backward gives no gradient at all (None, not zeros: an optimizer then skips
    a parameter) to an input whose grad_input a full backward hook replaced with None
    (watch.dropped, positions among the packed inputs), as torch."""

    @staticmethod
    def forward(ctx, watch, *xs):
        ctx.watch, ctx.parts = watch, [(x.shape, x.dtype, x.numel()) for x in xs]
        return F.cat([x.reshape(-1) for x in xs])

    @staticmethod
    def backward(ctx, g):
        grads, start, dropped = [None], 0, ctx.watch.dropped
        for j, (shape, dtype, n) in enumerate(ctx.parts):
            grads.append(None if j in dropped else g[start:start + n].reshape(shape).to(dtype))
            start += n
        return tuple(grads)


def _packed(values, where, watch=None):
    """The tensors of `values` at positions `where` packed into one flat tensor (their dtypes
    promoted) and read back out of it: ([(shape, dtype, numel)], the packed tensor, values with
    those tensors replaced by their parts, in their own dtypes). With `watch`, the inputs of
    its call, packed by _PackInputs."""
    xs = [values[i] for i in where]
    parts = [(x.shape, x.dtype, x.numel()) for x in xs]
    packed = F.cat([x.reshape(-1) for x in xs]) if watch is None else \
        _PackInputs.apply(watch, *xs)
    new, start = list(values), 0
    for i, (shape, dtype, n) in zip(where, parts, strict=True):
        part = packed[start:start + n].reshape(shape)
        new[i] = part if part.dtype == dtype else part.to(dtype)
        start += n
    return parts, packed, new


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


def _entry_repr(key, value, type_name):
    """One line of a ParameterList's or ParameterDict's repr, as torch's: a tensor's kind, type
    and size, or another value's type."""
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    device = "" if value.device == "cpu" else f" ({value.device})"
    return (f"  ({key}): {'Parameter' if isinstance(value, Parameter) else 'Tensor'} "
            f"containing: [{type_name(value)} of size {'x'.join(map(str, value.shape))}"
            f"{device}]")


class ParameterList(Module):
    """Values registered under their indices ("0", "1", ...), used as a list: a tensor (or an
    array) becomes a Parameter, any other value is kept as it is (as torch's)."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _index(self, i):
        """The attribute name of entry i (-len..len-1)."""
        i = operator.index(i)
        if not -self._size <= i < self._size:
            raise IndexError(f"ParameterList: index {i} is out of range for {self._size} "
                             "entries")
        return str(i % self._size)

    def append(self, value):
        self._size += 1
        try:
            self[self._size - 1] = value
        except Exception:
            self._size -= 1
            raise
        return self

    def extend(self, values):
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError(f"ParameterList.extend: expected an iterable of values, got "
                            f"{type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    __iadd__ = extend  # params += [...] extends in place (as torch's)

    def __getitem__(self, i):
        """Entry i; a slice is a new ParameterList of those entries (the same Parameters)."""
        if isinstance(i, slice):
            return type(self)(self[j] for j in range(*i.indices(self._size)))
        return getattr(self, self._index(i))

    def __setitem__(self, i, value):
        setattr(self, self._index(i), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(self._size))

    def extra_repr(self):
        return "\n".join(_entry_repr(i, p, lambda t: str(t.dtype)) for i, p in enumerate(self))


class ParameterDict(Module):
    """Values by name, used as a dict: a tensor (or an array) becomes a Parameter, any other
    value is kept as it is (as torch's); no forward."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}  # the keys, in their order (the values are attributes)
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, value):
        _check_key("ParameterDict", "a key", key)
        if key not in self._keys:
            self._check_free("ParameterDict", key, "_parameters")
        setattr(self, key, _as_parameter(value))
        self._keys[key] = None

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __delitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        del self._keys[key]
        delattr(self, key)

    def __contains__(self, key):
        return key in self._keys

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def keys(self):
        return self._keys.keys()

    def values(self):
        return (self[k] for k in self._keys)

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def get(self, key, default=None):
        return self[key] if key in self._keys else default

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        """The (key, value) added last, removed."""
        if not self._keys:
            raise KeyError("ParameterDict.popitem: the dictionary is empty")
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def setdefault(self, key, default=None):
        """self[key], first set to `default` (a tensor made a Parameter) if the key is not
        there."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def copy(self):
        """A new ParameterDict holding the same values, in the same order."""
        return ParameterDict(OrderedDict(self.items()))

    def __or__(self, other):
        """A new ParameterDict: this one's entries, then other's (over the same keys)."""
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        """other | this, as torch's: a copy of other (other.copy()) updated with this one."""
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self

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

    def extra_repr(self):
        return "\n".join(_entry_repr(k, p, lambda t: t.type()) for k, p in self.items())


def _as_parameter(value):
    """A value for a ParameterList or ParameterDict: a tensor (or an array) as a Parameter
    (sharing its memory), anything else as it is (torch's rule)."""
    if isinstance(value, (Tensor, np.ndarray)) and not isinstance(value, Parameter):
        return Parameter(value)
    return value
