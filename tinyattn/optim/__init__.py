"""Optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, Rprop, ASGD,
Adafactor; LBFGS in optim/lbfgs.py, Muon in optim/muon.py), a cosine learning-rate schedule
with warm-up, clip_grad_norm; PyTorch's schedulers live in optim.lr_scheduler.

Like PyTorch: an optimizer takes parameters (or groups of them, dicts with their own settings),
`step()` updates them in place from their `.grad` (`step(closure)`: the loss re-evaluated first);
parameters may come named (model.named_parameters()), settings as 0-d tensors (lr=tensor(0.01),
read at each step); `opt.state` is a defaultdict(dict) keyed by the parameter, with torch's state
names (exp_avg, exp_avg_sq, momentum_buffer, step as a 0-d tensor on the host, float32 or, with
a float64 default dtype, float64...) and tensors; `state_dict()` is torch's {"state":
{position: {name: tensor}}, "param_groups": [settings, "param_names" where the parameters came
named, and "params" positions]} and carries everything needed to resume exactly.
`load_state_dict()` takes that, torch's own state dicts, and the layout earlier tinyattn
versions wrote ({"steps", "groups", "state": {"0.m": ...}}), and refuses groups of another
number or size, as torch's; copy.deepcopy and pickle of an optimizer keep its state
with the copied parameters. Adam's update is a backend primitive (`be.adam_update`), so the CuPy
backend can run it as one fused kernel.
"""

import copy
import inspect
import math
import sys
import types
import warnings
from collections import defaultdict
from collections.abc import Mapping

import numpy as np

from .. import backends
from ..autograd import TensorBase, bump_version, enable_grad, no_grad, side_effect, zero_grads
from ..dtypes import get_default_dtype
from ..errors import CheckpointError, fmt_shape, warn_user
from ..tensor import Tensor
from . import (  # noqa: F401 - optim.lr_scheduler and optim.swa_utils, as in torch
    lr_scheduler,
    swa_utils,
)

# torch's switches for how a step runs (multi-tensor, fused kernel, CUDA graphs, a step autograd
# records): each optimizer takes the ones torch's of the same name takes, and keeps them in its
# groups as torch's; the math is the same, so they change nothing here (differentiable=True,
# a step on the graph, is refused)
_SWITCHES = frozenset(("foreach", "fused", "capturable", "differentiable"))


def _index(i):
    """Whether `i` is a parameter position (a whole number >= 0, not a bool)."""
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) and i >= 0


def _position(key):
    """A state dict's state key as a parameter position (an int; a string of digits, as a
    layout through JSON keeps it, too), or None."""
    if _index(key):
        return int(key)
    return int(key) if isinstance(key, str) and key.isdecimal() else None


def _host(value):
    """A state value as a NumPy array (or number): tinyattn's tensors, torch's, device arrays."""
    if isinstance(value, TensorBase):
        return value.backend.to_numpy(value._data)
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        return value.detach().cpu().numpy()
    if hasattr(value, "__cuda_array_interface__") and hasattr(value, "get"):  # CuPy's
        return value.get()
    return value


def _setting(value):
    """A saved group setting as a group keeps it: a list as a tuple (betas), a tensor (ours,
    torch's) as a copy of ours (a load shares no tensor with the checkpoint, as torch's)."""
    if isinstance(value, (list, tuple)):
        return tuple(_setting(v) for v in value)
    if isinstance(value, TensorBase) or hasattr(value, "detach") and hasattr(value, "numpy"):
        return Tensor._wrap(np.array(_host(value)), backends.backend("numpy"))
    return value


def _zeros(p, dtype=None, fill=0):
    """State of p's shape on p's backend (`dtype`: p's if not given)."""
    xp = p.backend.xp
    return Tensor._wrap(xp.full(p._data.shape, fill, dtype=dtype or p._data.dtype), p.backend)


def _scalar(value):
    """A step count or running product, as torch keeps them: a 0-d tensor on the host, float64
    where the default dtype is float64, else float32 (torch's _get_scalar_dtype)."""
    dtype = np.float64 if get_default_dtype() == np.float64 else np.float32
    return Tensor._wrap(np.array(value, dtype=dtype), backends.backend("numpy"))


def _read(group, name="optimizer"):
    """`group` with each setting given as a tensor (lr=tensor(0.01), betas of tensors) as the
    number it holds now: torch reads such a tensor at every step, so a change in place (a
    schedule's lr.fill_) counts from the next. A NumPy number (momentum=np.float64(0.9)) is
    read as the Python number it is, as torch takes it: a float32 parameter's state stays
    float32. The group itself where it has none (no copy)."""
    read = None
    for key, value in group.items():
        if isinstance(value, (TensorBase, np.generic)):
            value = _number(value, key, name)
        elif (isinstance(value, (tuple, list)) and key not in ("params", "param_names")
              and any(isinstance(v, (TensorBase, np.generic)) for v in value)):  # (betas)
            value = tuple(_number(v, f"{key}[{i}]", name)
                          if isinstance(v, (TensorBase, np.generic)) else v
                          for i, v in enumerate(value))
        else:
            continue
        if read is None:
            read = dict(group)
        read[key] = value
    return group if read is None else read


def _number(t, key, name):
    """The one number tensor setting `t` holds (torch's rule: a 1-element tensor); a NumPy
    number's Python number."""
    if isinstance(t, np.generic):
        return t.item()
    if t.numel() != 1:
        raise ValueError(f"{name}: {key} given as a tensor must hold one number, got shape "
                         f"{fmt_shape(t.shape)}; pass a 0-d tensor or a number")
    return t.item()


def _wide(p):
    """The dtype a step keeps a parameter's state in: float32 for float16 (see steps_half_
    natively), else the parameter's."""
    xp = p.backend.xp
    return xp.float32 if p._data.dtype == xp.float16 else p._data.dtype


def _count(state):
    """Count one more step in state["step"] (a 0-d tensor, in place, as torch's step_t += 1);
    the count, as an int."""
    step = state["step"]._data
    step += 1
    return int(step)


class _Required:
    """torch.optim.optimizer.required: a default a parameter group must give a value for."""

    def __repr__(self):
        return "<required parameter>"


required = _Required()


def _check_required(name, group):
    """torch's refusal of a group without a value for a default given as `required`."""
    for key, value in group.items():
        if value is required:
            raise ValueError(f"{name}: parameter group didn't specify a value of required "
                             f"optimization parameter {key}")


def _steps_itself(cls):
    """Whether optimizer class `cls` runs its own step() (torch's contract: it defines step(),
    no update()), not tinyattn's step that calls update() for each parameter."""
    return cls.update is Optimizer.update


def _signature(cls):
    """torch's constructor signature for an optimizer class: params, the settings torch takes
    by position (its `positional`), then the rest keyword-only, each with its default."""
    kind = inspect.Parameter
    positional = [kind(k, kind.POSITIONAL_OR_KEYWORD, default=cls.defaults[k])
                  for k in cls.positional]
    keywords = [kind(k, kind.KEYWORD_ONLY, default=v) for k, v in cls.defaults.items()
                if k not in cls.positional and k not in cls.fixed]
    return inspect.Signature([kind("params", kind.POSITIONAL_OR_KEYWORD), *positional,
                              *keywords])


class Optimizer:
    """Parameter groups, their per-parameter state, and the step counter.

    Every optimizer takes `maximize` (ascend: the gradient's sign flipped first), refuses a
    setting it does not have (torch's TypeError) and a value out of range (torch's ValueError).

    A subclass is written as torch's base class asks: `super().__init__(params, defaults)`
    (a dict of settings, also `defaults=`), and a step() of its own that walks
    `self.param_groups` (each group filled in from the defaults) and keeps what it needs in
    `self.state[p]` (a defaultdict(dict)); zero_grad, add_param_group, state_dict and
    load_state_dict (tensors cast to the parameter's dtype and device, "step" and values that
    are no tensors kept as they are, as torch's), copy.deepcopy and pickle work for it. A default
    given as `optim.required` must be given by every group. tinyattn's own optimizers instead
    define update(p, g, state, group), which the base class's step() calls for each parameter
    that has a gradient."""

    # the settings and their values, in the order torch's groups keep them, torch's how-to-run
    # switches among them (an instance's: with the ones it was given)
    defaults = {}
    positional = ()  # the settings torch's constructor takes by position, in its order
    # settings the groups keep (as torch's) that torch's constructor does not take (AdamW's
    # decoupled_weight_decay, always True): refused as an argument, left out of the signature
    fixed = ()
    # the names earlier tinyattn versions kept state under, where not torch's (their checkpoints
    # and pickles load)
    old_state_names = {}

    def __init_subclass__(cls, **kwargs):
        """inspect.signature(AdamW) names its settings, as torch's (nanoGPT asks whether
        'fused' is among them); a subclass with an __init__ of its own keeps that one's."""
        super().__init_subclass__(**kwargs)
        own_init = vars(cls).get("__init__")
        if own_init is not None and getattr(own_init, "__module__", None) != __name__:
            cls.__signature__ = None  # (inspect then reads the subclass's __init__)
        elif "defaults" in vars(cls):
            cls.__signature__ = _signature(cls)

    def __init__(self, params, *args, **settings):
        name = type(self).__name__
        defaults = self._torch_defaults(args, settings)
        if defaults is None:
            settings = self._settings(args, settings)
        if isinstance(params, TensorBase):
            raise TypeError(f"{name}: params must be an iterable of tensors or of dicts (groups), "
                            f"got one tensor {fmt_shape(params.shape)}: pass [tensor] or "
                            "model.parameters()")
        params = list(params)
        if not params:
            raise ValueError(f"{name}: got an empty parameter list")
        # (torch's contract: the subclass's dict itself, as torch keeps it)
        self.defaults = {**type(self).defaults, **settings} if defaults is None else defaults
        self.param_groups = []
        # parameter -> {torch's state name: tensor}; a parameter without state gives {}
        self.state = defaultdict(dict)
        self.steps = 0  # step() calls (torch keeps no such count: a load sets the most steps)
        if not _steps_itself(type(self)):  # (torch's flag: a scheduler stepped before any
            self._opt_called = False  # optimizer step warns; a step() of its own is not seen)
        for group in params if isinstance(params[0], dict) else [{"params": params}]:
            self.add_param_group(group)

    def _torch_defaults(self, args, settings):
        """The defaults dict of torch's base-class call, `Optimizer.__init__(self, params,
        defaults)` (or defaults=...), a subclass's; None for tinyattn's own optimizers' calls,
        settings by keyword and position (a dict is none of their settings)."""
        own = type(self).defaults
        if "defaults" in settings and "defaults" not in own:
            given = settings.pop("defaults")
            if args or settings:
                raise TypeError(f"{type(self).__name__}: Optimizer.__init__ takes params and "
                                "defaults (a dict of settings), got more: "
                                f"{', '.join(map(str, [*map(type, args), *settings]))}")
        elif len(args) == 1 and not settings and isinstance(args[0], Mapping):
            given = args[0]
        else:
            return None
        if not isinstance(given, Mapping):
            raise TypeError(f"{type(self).__name__}: defaults must be a dict of settings, got "
                            f"{type(given).__name__}")
        return given if _steps_itself(type(self)) else {**own, **given}

    def _settings(self, args, settings):
        """The settings given by keyword and (torch's order) by position; an unknown one is a
        TypeError, as torch's."""
        name = type(self).__name__
        if len(args) > len(self.positional):
            raise TypeError(f"{name}: takes at most {len(self.positional)} settings by position "
                            f"({', '.join(self.positional)}), got {len(args)}")
        for key, value in zip(self.positional[:len(args)], args, strict=True):
            if key in settings:
                raise TypeError(f"{name}: got two values for {key}")
            settings[key] = value
        unknown = set(settings) - (set(type(self).defaults) - set(self.fixed))
        if unknown:
            own = sorted(k for k in type(self).defaults
                         if k not in _SWITCHES | {"maximize", *self.fixed})
            raise TypeError(f"{name}: unknown setting{'s' * (len(unknown) > 1)} "
                            f"{', '.join(sorted(unknown))}; it has {', '.join(own)} and maximize")
        return settings

    def add_param_group(self, param_group):
        """Optimize more parameters, with settings of their own (the rest as the defaults),
        e.g. a new layer after unfreezing it, as torch's."""
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}: param_group must be a dict, but got "
                            f"{type(param_group)} (a parameter group is a dict with a 'params' "
                            "entry)")
        if "params" not in param_group:  # (torch's KeyError('params'))
            raise KeyError(f"params: {name}: a parameter group is a dict with a 'params' "
                           f"entry, got the keys {sorted(map(str, param_group))}")
        unique, names = self._unique(param_group)
        for p in unique:
            if not isinstance(p, TensorBase) or not p.is_leaf:
                raise ValueError(f"{name}: can only optimize leaf tensors (made by the user, "
                                 "not computed from others), as torch")
        taken = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in taken for p in unique):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        if any(("param_names" in g) != (names is not None) for g in self.param_groups):
            has = ("none", "names")[names is not None]
            raise ValueError(f"{name}: all parameter groups have names or none (torch's rule); "
                             f"this group has {has}, the others have not")
        # torch's order: the names first (a state dict's group keeps them before the settings)
        named = {} if names is None else {"param_names": names}
        full = {**named, **self.defaults, **param_group, **named, "params": unique}
        _check_required(name, full)
        if not _steps_itself(type(self)):  # (a subclass of torch's contract checks its own)
            self.check(_read(full, name))
        self.param_groups.append(full)

    def _unique(self, group):
        """(the group's parameters, each once, with a warning if one came twice; their names or
        None)."""
        params = group["params"]
        if isinstance(params, (set, frozenset)):  # (torch's words)
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        params = [params] if isinstance(params, TensorBase) else list(params)
        params, names = self._named(params, group)
        unique = list({id(p): p for p in params}.values())
        if names is not None:  # (a parameter listed twice keeps its first name)
            first = dict(reversed(list(zip(map(id, params), names, strict=True))))
            names = [first[id(p)] for p in unique]
        if len(unique) < len(params):
            warn_user(f"{type(self).__name__}: a parameter group lists a parameter twice; it "
                      "is updated once", UserWarning)
        return unique, names

    def _named(self, params, group):
        """(the tensors, their names or None) of a group's params: tensors, or torch's (name,
        tensor) pairs as model.named_parameters() gives them (all named or none); names may
        also come as the group's "param_names" (a group from a state dict's layout)."""
        pairs = [isinstance(p, tuple) for p in params]
        if not any(pairs):
            names = group.get("param_names")
            if names is not None and len(names) != len(params):
                raise ValueError(f"{type(self).__name__}: a group's param_names must name each "
                                 f"of its parameters: {len(names)} names, {len(params)} "
                                 "parameters")
            return params, (None if names is None else list(names))
        if not all(pairs) or any(len(p) != 2 for p in params):
            raise ValueError(f"{type(self).__name__}: all of a group's parameters have names or "
                             "none: a list of tensors, or of (name, tensor) pairs as "
                             "model.named_parameters() gives (torch's rule)")
        return [p for _, p in params], [n for n, _ in params]

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines += [""] * (i > 0) + [f"Parameter Group {i}"]  # (groups apart, as torch's)
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines) + "\n)"

    @property
    def lr(self):
        """The first group's lr; setting it sets every group's. (A subclass that sets an `lr`
        of its own before its groups exist, as torch's base class has no `lr`, keeps that
        attribute: reading and setting it is its own from then on.)"""
        if "_lr" in self.__dict__:
            return self.__dict__["_lr"]
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value):
        if "_lr" in self.__dict__ or "param_groups" not in self.__dict__:
            self.__dict__["_lr"] = value
            return
        for group in self.param_groups:
            group["lr"] = value

    def params(self):
        return self._every_param()

    def _every_param(self):
        """Every parameter, group after group (internal: a subclass may name an attribute
        `params`)."""
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self, set_to_none=True):
        zero_grads(self._every_param(), set_to_none)

    # the settings check() refuses below 0, where a group has them (torch's rules; an optimizer
    # whose torch class checks fewer names its own)
    nonnegative = ("lr", "eps", "weight_decay", "momentum", "alpha", "lr_decay", "momentum_decay",
                   "initial_accumulator_value", "dampening")

    def check(self, group):
        """Refuse settings out of range, with torch's rules (lr, eps, weight decay, momentum
        and the like >= 0; betas in [0, 1))."""
        name = type(self).__name__
        for key in self.nonnegative:
            if key in group and not group[key] >= 0:
                raise ValueError(f"{name}: {key} must be >= 0, got {group[key]!r}")
        betas = group.get("betas", ())
        if "betas" in group and (not isinstance(betas, (tuple, list)) or len(betas) != 2):
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
        for i, beta in enumerate(betas):
            if not 0 <= beta < 1:
                raise ValueError(f"{name}: betas[{i}] must be in [0, 1), got {beta!r}")
        if group.get("differentiable"):
            raise ValueError(f"{name}: differentiable=True (a step that autograd records) is "
                             "not supported: tinyattn's step runs under no_grad")

    def step(self, closure=None):
        """Update every parameter that has a gradient. `closure` (as torch's): a function that
        clears the gradients, computes the loss, calls backward() and returns the loss; it is
        called first, with grad enabled (even inside no_grad); step returns its loss (else
        None)."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._step()
        return loss

    @no_grad()
    def _step(self):
        side_effect(f"{type(self).__name__}.step()")
        self.steps += 1
        self._opt_called = True
        name = type(self).__name__
        for group in self.param_groups:
            group = _read(group, name)  # (tensor settings as numbers; no copy without them)
            for p in group["params"]:
                if p.grad is not None:
                    if isinstance(p._data, np.generic):  # (a 0-d op result's NumPy scalar,
                        p._writable(name)  # Parameter(ones([]) * 2): stepped in place as an array)
                    g = -p.grad._data if group.get("maximize") else p.grad._data
                    state = self.state.get(p)  # (a step that keeps no state adds no entry)
                    if state is None:
                        state = {}
                    self._update(p, g, state, group)
                    if state:
                        self.state[p] = state
                    bump_version(p)  # changed in place: a graph that saved p refuses it

    # a float16 parameter steps in float32, its state kept there (as Adam's kernel does): g²
    # underflows float16 below 2.4e-4 and eps (1e-8, Adagrad's 1e-10) is 0 there, so √v + eps
    # was 0 and the step inf or NaN for any tiny or zero gradient
    steps_half_natively = False

    def _update(self, p, g, state, group):
        """update(), with a float16 parameter stepped on a float32 copy written back rounded."""
        if self.steps_half_natively or p._data.dtype != np.float16:
            return self.update(p, g, state, group)
        xp = p.backend.xp
        wide = type(p)._wrap(p._data.astype(xp.float32), p.backend)
        self.update(wide, g.astype(xp.float32), state, group)
        xp.copyto(p._data, wide._data, casting="unsafe")

    def update(self, p, g, state, group):
        raise NotImplementedError(f"{type(self).__name__} has no step() of its own: an Optimizer "
                                  "subclass defines step() (torch's contract) or update(p, g, "
                                  "state, group) (tinyattn's optimizers')")

    # ---- copies: the state follows the copied parameters ----------------------------------

    def __getstate__(self):
        """pickle and copy.deepcopy: the state keyed by parameter position, so that the copy
        keys it by its own (copied) parameters (as torch's state follows them)."""
        d = dict(self.__dict__)
        at = {id(p): i for i, p in enumerate(self._every_param())}
        state = d.pop("state")
        d["_state_at"] = {at[id(p)]: v for p, v in state.items() if id(p) in at}
        return d

    def __setstate__(self, d):
        d = dict(d)
        by_position = d.pop("_state_at", None)
        d.pop("state", None)  # (a pickle from before the state was kept by position: by id())
        self.__dict__.update(d)
        self.state = defaultdict(dict)
        params = self._every_param()
        as_is = _steps_itself(type(self))  # (its state as its step left it: ints stay ints)
        for i, entry in (by_position or {}).items():
            self.state[params[i]] = {self.old_state_names.get(k, k):
                                     v if as_is else self._as_tensor(v, params[i])
                                     for k, v in entry.items()}

    @staticmethod
    def _as_tensor(value, p):
        """A state value of a pickle from before the state held tensors (arrays, a Python step
        count) as a tensor: a number on the host (as torch's step), an array on p's backend."""
        if isinstance(value, TensorBase):
            return value
        if np.ndim(value) == 0:
            return _scalar(value)
        return Tensor._wrap(p.backend.asarray(value), p.backend)

    # ---- checkpoints: torch's layout, state by parameter position --------------------------

    def state_dict(self):
        """torch's layout: {"state": {position: {state name: tensor}}, "param_groups": [each
        group's settings and, as "params", its parameters' positions (so a load can tell
        another split into groups)]}. The tensors are the state itself, as torch's (save the
        dict, or copy it, before stepping on)."""
        groups, at = [], {}
        for g in self.param_groups:
            ids = [at.setdefault(id(p), len(at)) for p in g["params"]]
            groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": ids})
        state = {at[id(p)]: dict(entry) for p, entry in self.state.items()
                 if id(p) in at and entry}
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_state_dict(self, saved):
        """Settings and state from `state_dict()`, from torch's optimizer of the same name (its
        tensors or NumPy arrays), or from an earlier tinyattn's ({"steps", "groups", "state":
        {"0.m": ...}}), as copies (nothing changes if any entry does not fit). Groups must match
        in number and size, as torch's (a checkpoint from before groups kept their parameters'
        positions: in number). Each state tensor comes back in the dtype, and on the device,
        this optimizer's step keeps it in, not the parameter's (Adam: float32 moments for
        float16 weights; the step count a float32 on the host): a resumed run takes the same
        steps, to the bit, as one never interrupted."""
        steps, groups, positions, entries = self._layout(saved)
        self._check_groups(groups, positions)
        settings = [self._loaded_settings(s) for s in groups]
        # every parameter, by its position in the checkpoint, with the settings it will step with
        merged = [{**group, **s} for group, s in zip(self.param_groups, settings, strict=True)]
        params = [(p, group) for group in merged for p in group["params"]]
        at = range(len(params)) if positions is None else [int(i) for ids in positions
                                                             for i in ids]
        new_state = self._loaded_state(entries, dict(zip(at, params, strict=True)), steps)
        for group, s in zip(self.param_groups, settings, strict=True):
            group.update(s)
        self.state = new_state
        self.steps = steps

    def _loaded_settings(self, saved):
        """A checkpoint group's settings as this optimizer takes them: betas a tuple, a setting
        saved as a tensor (lr=tensor(0.01), torch's too) a copy of ours, the parameters' names
        a list, without their positions, differentiable (always False here) or a how-to-run
        switch this optimizer does not have (torch's of another name)."""
        own = self.defaults
        if _steps_itself(type(self)):  # torch's contract: every setting as saved (copies)
            return {k: (list(v) if k == "param_names" else _copied(v)) for k, v in saved.items()
                    if k != "params"}
        return {k: (list(v) if k == "param_names" else _setting(v)) for k, v in saved.items()
                if k not in ("params", "differentiable") and (k not in _SWITCHES or k in own)}

    def _loaded_state(self, entries, params, steps):
        """The state `entries` describe, as copies in the dtypes and on the devices a step
        keeps them; `params`: (parameter, its settings) by checkpoint position."""
        kept = {}  # (group, dtype, backend) -> how a step keeps its state (see _kept_as)
        new_state, how = defaultdict(dict), {}
        for label, i, name, value in entries:
            found = params.get(i)
            if not (found and name):
                raise CheckpointError(f"{type(self).__name__}.load_state_dict: state {label} "
                                      "does not match this optimizer's parameters")
            p, group = found
            like = (id(group), p.dtype, p.backend)
            if like not in kept:
                kept[like] = self._kept_as(p, group)
            how[id(p)] = kept[like]
            new_state[p][name] = self._restored(label, value, p, kept[like], name)
        for p, entry in new_state.items():
            if "step" in how[id(p)] and "step" not in entry:  # (a checkpoint from before
                entry["step"] = _scalar(steps)  # each parameter kept its count: every one
                # took every step)
            # in the order a step makes them (torch's)
            new_state[p] = {**{k: entry[k] for k in how[id(p)] if k in entry}, **entry}
        return new_state

    def _layout(self, saved):
        """(the step count, group settings, each group's parameter positions or None, state
        entries (label, position or None, torch's name or None, value)) of a state dict in
        torch's layout, or in the one earlier tinyattn versions wrote."""
        name = f"{type(self).__name__}.load_state_dict"
        if not isinstance(saved, Mapping):
            raise TypeError(f"{name}: expected a state dict (a dict, as state_dict() returns), "
                            f"got {type(saved).__name__}")
        torchs = {"state", "param_groups"} <= saved.keys()
        if not (torchs or {"steps", "groups", "state"} <= saved.keys()):
            raise CheckpointError(f"{name}: a state dict has the keys 'groups', 'state' and "
                                  "'steps' (an earlier tinyattn's) or 'state' and 'param_groups' "
                                  f"(torch's, and tinyattn's now); this one has "
                                  f"{sorted(map(str, saved))}")
        groups, state = saved["param_groups" if torchs else "groups"], saved["state"]
        if not (isinstance(groups, (list, tuple)) and all(isinstance(g, Mapping) for g in groups)
                and isinstance(state, Mapping)):
            raise CheckpointError(f"{name}: the state dict's groups are not a list of dicts or "
                                  "its state not a dict")
        positions = self._positions(groups)
        if torchs:
            entries = self._nested(state)
            return self._most_steps(entries), groups, positions, entries
        entries = []
        for key, value in state.items():  # "3.m": the old names
            i, _, old = str(key).partition(".")
            entries.append((key, _position(i), self.old_state_names.get(old, old) or None,
                            value))
        try:
            return int(saved["steps"]), groups, positions, entries
        except (TypeError, ValueError, OverflowError):
            raise CheckpointError(f"{name}: steps is {saved['steps']!r:.60}, not a "
                                  "number") from None

    def _most_steps(self, entries):
        """The largest "step" count among the entries (0 without one); a subclass of torch's
        contract may keep anything under "step": what is no count is passed over."""
        lenient = _steps_itself(type(self))
        return max([self._steps_of(label, v) for label, _, key, v in entries
                    if key == "step" and not (lenient and not _is_count(v))], default=0)

    def _nested(self, state):
        """torch's state ({position: {name: value}}) as entries (None values, as an older
        torch's SGD keeps without momentum, left out)."""
        entries = []
        for i, entry in state.items():
            if not isinstance(entry, Mapping):
                raise CheckpointError(f"{type(self).__name__}.load_state_dict: state [{i!r}] is "
                                      f"{type(entry).__name__}, not a dict")
            entries += [(f"[{i!r}][{key!r}]", _position(i), str(key), value)
                        for key, value in entry.items()
                        if value is not None or _steps_itself(type(self))]
        return entries

    def _steps_of(self, label, value):
        try:
            return int(np.asarray(_host(value)).item())
        except (TypeError, ValueError, OverflowError):
            raise CheckpointError(f"{type(self).__name__}.load_state_dict: state {label} (a "
                                  "step count) is not a number") from None

    def _positions(self, groups):
        """Each saved group's parameter positions (torch's "params"), or None where the groups
        have none (a checkpoint from before they were kept)."""
        if not all("params" in g for g in groups):
            return None
        positions = [g["params"] for g in groups]
        if not all(isinstance(ids, (list, tuple)) and all(_index(i) for i in ids)
                   for ids in positions):
            raise CheckpointError(f"{type(self).__name__}.load_state_dict: a group's params are "
                                  f"not a list of parameter positions: {positions!r:.200}")
        return positions

    def _check_groups(self, groups, positions):
        """The checkpoint's groups against this optimizer's: as many, each as large (torch's
        rules and words), and no parameter position twice."""
        name = f"{type(self).__name__}.load_state_dict"
        if len(groups) != len(self.param_groups):
            raise CheckpointError(f"{name}: loaded state dict has a different number of "
                                  f"parameter groups: the checkpoint has {len(groups)} parameter "
                                  f"groups, this optimizer {len(self.param_groups)}")
        if positions is None:  # (a checkpoint from before groups kept their parameters)
            return
        for i, (ids, group) in enumerate(zip(positions, self.param_groups, strict=True)):
            if len(ids) != len(group["params"]):
                raise CheckpointError(
                    f"{name}: loaded state dict contains a parameter group that doesn't match "
                    f"the size of optimizer's group: group {i} has {len(ids)} parameters in the "
                    f"checkpoint, {len(group['params'])} in this optimizer")
        every = [int(i) for ids in positions for i in ids]
        if len(set(every)) < len(every):
            raise CheckpointError(f"{name}: the checkpoint's groups list a parameter position "
                                  f"twice: {[list(ids) for ids in positions]!r:.200}")

    def _kept_as(self, p, group):
        """{state name: (dtype, backend, whether 0-d)} as this optimizer's step makes its state
        for a parameter like `p` in `group`, in the order it makes them: asked of update()
        itself, on a one-element stand-in, so that every optimizer answers for itself."""
        if _steps_itself(type(self)):  # (its step is its own: nothing to ask)
            return {}
        xp = p.backend.xp
        stand_in = type(p)._wrap(xp.ones((1,), dtype=p.dtype), p.backend)
        state = {}
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._update(stand_in, xp.ones((1,), dtype=p.dtype), state,
                         _read(group, type(self).__name__))
        return {k: (v.dtype, v.backend, v.ndim == 0) for k, v in state.items()}

    def _restored(self, label, value, p, kept, name):
        """The saved state `value` as a tensor as this optimizer keeps it for `p` (a copy:
        stepping never writes into the dict it was loaded from). State a step does not make
        (another optimizer's) is cast to p's dtype, a 0-d entry kept as it is."""
        if _steps_itself(type(self)):
            return _cast(value, p, name)
        dtype, be, scalar = kept.get(name, (None, p.backend, None))
        where = f"{type(self).__name__}.load_state_dict: state {label}"
        try:
            value = np.array(_host(value), dtype=dtype)
            if value.dtype.kind not in "biuf":
                raise TypeError(f"dtype {value.dtype}")
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{where} is not a number array ({type(e).__name__}: "
                                  f"{e})") from None
        if scalar and value.size == 1:
            value = value.reshape(())
        elif (scalar is not None or value.ndim) and value.shape != self.state_shape(name, p):
            raise CheckpointError(f"{where} does not match this optimizer's parameters: shape "
                                  f"{fmt_shape(value.shape)}, the parameter's "
                                  f"{fmt_shape(p.shape)}")
        if dtype is None and value.ndim:
            value = value.astype(p.dtype)
        return Tensor._wrap(be.asarray(value), be)

    @staticmethod
    def state_shape(name, p):
        """The shape state `name` of parameter `p` has (a load checks it): p's own; an
        optimizer with state of other shapes (Adafactor's factors) says so."""
        return tuple(p.shape)


def _is_count(value):
    """Whether a saved "step" is a number (a tensor of one, too)."""
    value = _host(value)
    return isinstance(value, (int, float, np.number, np.ndarray)) and np.size(value) == 1 \
        and not isinstance(value, bool)


def _is_tensor(value):
    return isinstance(value, TensorBase) or hasattr(value, "detach") and hasattr(value, "numpy")


def _copied(value):
    """A loaded setting of a subclass of torch's contract: a copy, tensors as ours."""
    if _is_tensor(value):
        return _setting(value)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_copied(v) for v in value)
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    return copy.deepcopy(value)


def _cast(value, p, key):
    """A state value loaded for parameter `p` of a subclass of torch's contract, as torch's
    load_state_dict casts it: a tensor (ours, torch's) a copy of ours on p's device, in p's
    dtype where p is floating point ("step" in its own dtype, on the host); dicts, lists and
    tuples item by item (a dict's items under their own keys); anything else as it is."""
    if _is_tensor(value):
        host = np.array(_host(value))
        if key == "step":
            return Tensor._wrap(host, backends.backend("numpy"))
        if p.dtype.kind == "f":
            host = host.astype(p.dtype)
        return Tensor._wrap(p.backend.asarray(host), p.backend)
    if isinstance(value, dict):
        return {k: _cast(v, p, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_cast(v, p, key) for v in value)
    return value


_ADAMS_OLD_NAMES = {"m": "exp_avg", "v": "exp_avg_sq", "v_max": "max_exp_avg_sq", "u": "exp_inf"}


class SGD(Optimizer):
    """p -= lr * (g + wd p), with momentum buf = μ buf + (1 - dampening) g (the first step:
    buf = g) and then the step buf (Nesterov: g + μ buf)."""

    defaults = {"lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0,
                "nesterov": False, "maximize": False, "foreach": None, "differentiable": False,
                "fused": None}
    positional = ("lr", "momentum", "dampening", "weight_decay", "nesterov")
    old_state_names = {"momentum": "momentum_buffer"}

    def check(self, group):
        super().check(group)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: nesterov needs a momentum > 0 and dampening 0 (torch's rule), "
                             f"got momentum {group['momentum']}, dampening {group['dampening']}")

    def update(self, p, g, state, group):
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p._data
        mu = group["momentum"]
        if mu:
            buf = state.get("momentum_buffer")
            if buf is None:  # the first step: the gradient itself (a copy; an array, where a
                # 0-d parameter's g + wd * p is a NumPy scalar, so later steps write into it)
                buf = Tensor._wrap(p.backend.xp.array(g), p.backend)
                state["momentum_buffer"] = buf
            else:
                buf = buf._data
                buf *= mu
                buf += (1 - group["dampening"]) * g
            buf = state["momentum_buffer"]._data
            g = g + mu * buf if group["nesterov"] else buf
        p._data -= group["lr"] * g


class Adam(Optimizer):
    """Adam: exp_avg, exp_avg_sq running moments of g and g², bias-corrected by the parameter's
    own step count; weight decay added to g (L2); amsgrad divides by the largest v so far."""

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                "differentiable": False, "fused": None, "decoupled_weight_decay": False}
    positional = ("lr", "betas", "eps", "weight_decay", "amsgrad")
    old_state_names = _ADAMS_OLD_NAMES

    steps_half_natively = True  # its kernel reads float16 weights beside float32 moments

    def update(self, p, g, state, group):
        if "exp_avg" not in state:
            # a float16 parameter keeps float32 moments: g² underflows float16 and eps = 1e-8
            # is 0 there, so √v + eps would be 0 and the step inf
            state["step"] = _scalar(0)
            state["exp_avg"] = _zeros(p, _wide(p))
            state["exp_avg_sq"] = _zeros(p, _wide(p))
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = _zeros(p, _wide(p))
        # the steps this parameter took (a parameter without a gradient in some steps is
        # corrected for its own count, as torch's)
        t = _count(state)
        beta1, beta2 = group["betas"]
        p.backend.adam_update(p._data, g, state["exp_avg"]._data, state["exp_avg_sq"]._data,
                              lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                              weight_decay=group["weight_decay"], step=t,
                              decoupled=group["decoupled_weight_decay"],
                              v_max=state["max_exp_avg_sq"]._data if group["amsgrad"] else None)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * wd before the Adam step (Adam with
    decoupled_weight_decay=True, as torch)."""

    defaults = {**Adam.defaults, "weight_decay": 0.01, "decoupled_weight_decay": True}
    fixed = ("decoupled_weight_decay",)  # (torch's AdamW takes no such argument)


class RMSprop(Optimizer):
    """p -= lr g / (√v + eps), v = α v + (1-α) g² (centered: v minus the squared mean of g);
    with momentum, the step goes through a buffer b = μ b + g / (√v + eps)."""

    defaults = {"lr": 1e-2, "momentum": 0.0, "alpha": 0.99, "eps": 1e-8, "centered": False,
                "weight_decay": 0.0, "capturable": False, "foreach": None, "maximize": False,
                "differentiable": False}
    positional = ("lr", "alpha", "eps", "weight_decay", "momentum", "centered")

    def update(self, p, g, state, group):
        xp = p.backend.xp
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p._data
        alpha = group["alpha"]
        if "square_avg" not in state:
            state["step"] = _scalar(0)  # (as torch's: this step needs no count)
            state["square_avg"] = _zeros(p)
        _count(state)
        square_avg = state["square_avg"]._data
        square_avg *= alpha
        square_avg += (1 - alpha) * g * g
        if group["centered"]:
            grad_avg = state.setdefault("grad_avg", _zeros(p))._data
            grad_avg += (1 - alpha) * (g - grad_avg)
            avg = xp.sqrt(square_avg - grad_avg * grad_avg) + group["eps"]
        else:
            avg = xp.sqrt(square_avg) + group["eps"]
        if group["momentum"] > 0:
            buf = state.setdefault("momentum_buffer", _zeros(p))._data
            buf *= group["momentum"]
            buf += g / avg
            p._data -= group["lr"] * buf
        else:
            p._data -= group["lr"] * (g / avg)


class Adagrad(Optimizer):
    """p -= lr_t g / (√(Σ g²) + eps), with lr_t = lr / (1 + (t - 1) lr_decay) at the
    parameter's t-th step; the sum starts at initial_accumulator_value. As torch's, every
    parameter has its state (step 0, the sum) from the start."""

    defaults = {"lr": 1e-2, "lr_decay": 0.0, "eps": 1e-10, "weight_decay": 0.0,
                "initial_accumulator_value": 0.0, "foreach": None, "maximize": False,
                "differentiable": False, "fused": None}
    positional = ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def __init__(self, params, *args, **settings):
        super().__init__(params, *args, **settings)
        for group in self.param_groups:
            read = _read(group, type(self).__name__)  # (a tensor initial_accumulator_value)
            for p in group["params"]:
                self._start(p, self.state[p], read, _wide(p))

    @staticmethod
    def _start(p, state, group, dtype):
        state["step"] = _scalar(0)
        state["sum"] = _zeros(p, dtype, fill=group["initial_accumulator_value"])

    def update(self, p, g, state, group):
        xp = p.backend.xp
        if "sum" not in state:  # (a group added later, a checkpoint without it)
            self._start(p, state, group, p._data.dtype)
        t = _count(state)
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p._data
        lr = group["lr"] / (1 + (t - 1) * group["lr_decay"])
        state["sum"]._data += g * g
        p._data -= lr * (g / (xp.sqrt(state["sum"]._data) + group["eps"]))


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012), torch's: v = ρ v + (1-ρ) g², δ = √(u + eps) / √(v + eps) g,
    u = ρ u + (1-ρ) δ², p -= lr δ; state square_avg (v), acc_delta (u) and the step count, as
    torch's names them. Weight decay is added to g (L2)."""

    defaults = {"lr": 1.0, "rho": 0.9, "eps": 1e-6, "weight_decay": 0.0, "maximize": False,
                "capturable": False, "foreach": None, "differentiable": False}
    positional = ("lr", "rho", "eps", "weight_decay", "foreach")

    def check(self, group):
        super().check(group)
        if not 0 <= group["rho"] <= 1:
            raise ValueError(f"Adadelta: rho must be in [0, 1], got {group['rho']!r}")

    def update(self, p, g, state, group):
        xp = p.backend.xp
        if "square_avg" not in state:
            state["step"] = _scalar(0)
            state["square_avg"] = _zeros(p)
            state["acc_delta"] = _zeros(p)
        _count(state)
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p._data
        rho, eps = group["rho"], group["eps"]
        square_avg, acc_delta = state["square_avg"]._data, state["acc_delta"]._data
        square_avg *= rho
        square_avg += (1 - rho) * g * g  # (torch's addcmul order: ((1-ρ) g) g)
        delta = xp.sqrt(acc_delta + eps) / xp.sqrt(square_avg + eps) * g
        acc_delta *= rho
        acc_delta += (1 - rho) * delta * delta
        p._data -= group["lr"] * delta


class _Moments(Optimizer):
    """What Adamax, NAdam and RAdam share: the parameter's own step count t, the first moment
    exp_avg (and second exp_avg_sq), weight decay added to g or, decoupled, applied to p
    first."""

    old_state_names = _ADAMS_OLD_NAMES

    def _moments(self, p, g, state, group, second=True):
        if "exp_avg" not in state:
            state["step"] = _scalar(0)  # (the steps this parameter took: as Adam's, see there)
            state["exp_avg"] = _zeros(p)
            if second:
                state["exp_avg_sq"] = _zeros(p)
        t = _count(state)
        if group["weight_decay"] and group.get("decoupled_weight_decay"):
            p._data *= 1 - group["lr"] * group["weight_decay"]
        elif group["weight_decay"]:
            g = g + group["weight_decay"] * p._data
        beta1, beta2 = group["betas"]
        m = state["exp_avg"]._data
        m *= beta1
        m += (1 - beta1) * g
        if second:
            v = state["exp_avg_sq"]._data
            v *= beta2
            v += (1 - beta2) * g * g
        return g, t, beta1, beta2


class Adamax(_Moments):
    """Adam with the infinity norm: u = max(β₂ u, |g| + eps), p -= lr / (1 - β₁ᵗ) m / u."""

    defaults = {"lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                "foreach": None, "maximize": False, "differentiable": False, "capturable": False}
    positional = ("lr", "betas", "eps", "weight_decay")

    def update(self, p, g, state, group):
        xp = p.backend.xp
        g, t, beta1, beta2 = self._moments(p, g, state, group, second=False)
        u = state.setdefault("exp_inf", _zeros(p))._data
        xp.maximum(u * beta2, xp.abs(g) + group["eps"], out=u)
        p._data -= group["lr"] / (1 - beta1**t) * state["exp_avg"]._data / u


class NAdam(_Moments):
    """Adam with Nesterov momentum (Dozat, 2016): μ_t = β₁ (1 - 0.96^(t ψ) / 2), ψ the
    momentum_decay; p -= lr ((1 - μ_t) / (1 - Πμ) g + μ_{t+1} / (1 - Πμ μ_{t+1}) m) / (√v̂ + ε)
    with Πμ (mu_product) the product of every μ so far."""

    defaults = {"lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                "momentum_decay": 4e-3, "decoupled_weight_decay": False, "maximize": False,
                "foreach": None, "capturable": False, "differentiable": False}
    positional = ("lr", "betas", "eps", "weight_decay", "momentum_decay",
                  "decoupled_weight_decay")

    def update(self, p, g, state, group):
        g, t, beta1, beta2 = self._moments(p, g, state, group)
        psi = group["momentum_decay"]
        mu = beta1 * (1 - 0.5 * 0.96 ** (t * psi))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
        # Πμ kept in its state tensor's dtype (float32, float64 with a float64 default dtype),
        # as torch keeps it: the same steps to the bit
        product = state.setdefault("mu_product", _scalar(1.0))._data
        product *= product.dtype.type(mu)
        product = float(product)
        denom = p.backend.xp.sqrt(state["exp_avg_sq"]._data / (1 - beta2**t)) + group["eps"]
        p._data -= group["lr"] * (1 - mu) / (1 - product) * (g / denom)
        p._data -= group["lr"] * mu_next / (1 - product * mu_next) * (state["exp_avg"]._data
                                                                     / denom)


class RAdam(_Moments):
    """Adam with its variance rectified (Liu et al., 2019): while the variance estimate is too
    young (ρ_t <= 5) a plain momentum step lr m̂; after, lr m̂ r_t √(1 - β₂ᵗ) / (√v + eps)."""

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                "maximize": False, "foreach": None, "capturable": False,
                "decoupled_weight_decay": False, "differentiable": False}
    positional = ("lr", "betas", "eps", "weight_decay", "decoupled_weight_decay")

    def update(self, p, g, state, group):
        g, t, beta1, beta2 = self._moments(p, g, state, group)
        m_hat = state["exp_avg"]._data / (1 - beta1**t)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
        if rho_t <= 5:
            p._data -= group["lr"] * m_hat
            return
        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                         / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        adaptive = math.sqrt(1 - beta2**t) / (p.backend.xp.sqrt(state["exp_avg_sq"]._data)
                                              + group["eps"])
        p._data -= group["lr"] * m_hat * adaptive * rect


class Rprop(Optimizer):
    """Resilient backpropagation (Riedmiller & Braun, 1993), torch's: each entry has its own
    step size (state step_size, from lr), times etaplus where g keeps the sign of the previous
    step's (state prev), times etaminus where it flips (and that entry does not move this step,
    its g counted as 0), clamped to step_sizes; p -= sign(g) step_size."""

    defaults = {"lr": 1e-2, "etas": (0.5, 1.2), "step_sizes": (1e-6, 50), "foreach": None,
                "maximize": False, "differentiable": False, "capturable": False}
    positional = ("lr", "etas", "step_sizes")
    nonnegative = ("lr",)

    def check(self, group):
        super().check(group)
        etas = group["etas"]
        if not (isinstance(etas, (tuple, list)) and len(etas) == 2
                and 0.0 < etas[0] < 1.0 < etas[1]):
            raise ValueError(f"Rprop: etas must be a pair (etaminus, etaplus) with 0 < etaminus "
                             f"< 1 < etaplus (torch's rule), got {etas!r}")

    def update(self, p, g, state, group):
        xp = p.backend.xp
        if "prev" not in state:
            state["step"] = _scalar(0)
            state["prev"] = _zeros(p)
            state["step_size"] = _zeros(p, fill=group["lr"])
        _count(state)
        etaminus, etaplus = group["etas"]
        prev, step_size = state["prev"]._data, state["step_size"]._data
        sign = xp.sign(g * prev)
        factor = xp.where(sign > 0, etaplus, xp.where(sign < 0, etaminus, 1.0))
        step_size *= factor.astype(step_size.dtype)
        xp.clip(step_size, *group["step_sizes"], out=step_size)
        g = xp.where(sign < 0, 0, g).astype(g.dtype)  # (a flipped sign: no step, prev 0)
        p._data -= xp.sign(g) * step_size
        prev[...] = g


class ASGD(Optimizer):
    """Averaged SGD (Polyak & Juditsky, 1992), torch's: p *= 1 - λ η, p -= η g, with
    η = lr / (1 + λ lr t)^α after step t (state eta), and the running average of p in state ax,
    from step t0 on (state mu = 1 / max(1, t - t0); before, ax is p itself). eta and mu are
    0-d tensors as the step count (float32, float64 with a float64 default dtype), as torch's."""

    defaults = {"lr": 1e-2, "lambd": 1e-4, "alpha": 0.75, "t0": 1e6, "weight_decay": 0.0,
                "foreach": None, "maximize": False, "differentiable": False, "capturable": False}
    positional = ("lr", "lambd", "alpha", "t0", "weight_decay", "foreach", "maximize",
                  "differentiable", "capturable")
    nonnegative = ("lr", "weight_decay")  # (torch checks no lambd, alpha or t0)

    def update(self, p, g, state, group):
        if "ax" not in state:
            state["step"] = _scalar(0)
            state["eta"] = _scalar(group["lr"])
            state["mu"] = _scalar(1.0)
            state["ax"] = _zeros(p)
        t = _count(state)
        lr, lambd = group["lr"], group["lambd"]
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p._data
        eta = float(state["eta"]._data)  # (as torch: the float32 value it keeps)
        p._data *= 1 - lambd * eta
        p._data -= eta * g
        mu, ax = float(state["mu"]._data), state["ax"]._data
        if mu != 1:
            ax += (p._data - ax) * mu
        else:
            ax[...] = p._data
        state["eta"]._data[...] = lr / ((1 + lambd * lr * t) ** group["alpha"])
        state["mu"]._data[...] = 1 / max(1, t - group["t0"])


def _lerp_(start, end, weight):
    """start += weight (end - start) in place, as torch's lerp_ computes it (from the end for
    a weight of 0.5 or more: weight 1 gives end exactly)."""
    if abs(weight) < 0.5:
        start += weight * (end - start)
    else:
        start[...] = end - (end - start) * (1 - weight)


class Adafactor(Optimizer):
    """Adafactor (Shazeer & Stern, 2018), torch's: the second moment of a matrix's gradient
    kept factored, a row mean (state row_var) and a column mean (col_var) over the last two
    dims, of a vector's as a whole (variance), each averaged with weight t^beta2_decay at
    step t; the step g / √v̂ (v̂ clamped to eps₁², eps₁ None: the dtype's machine epsilon) is
    scaled down to an RMS of at most d, and taken with size min(lr, 1/√t) max(eps₂, RMS(p));
    weight decay multiplies p by 1 - lr wd first."""

    defaults = {"lr": 1e-2, "beta2_decay": -0.8, "eps": (None, 1e-3), "d": 1.0,
                "weight_decay": 0.0, "foreach": None, "maximize": False}
    positional = ("lr", "beta2_decay", "eps", "d", "weight_decay")
    nonnegative = ("lr", "weight_decay")

    def check(self, group):
        super().check(group)
        eps = group["eps"]
        if not (isinstance(eps, (tuple, list)) and len(eps) == 2):
            raise ValueError(f"Adafactor: eps must be a pair (eps1 or None, eps2), got {eps!r}")
        if eps[0] is not None and not eps[0] >= 0:
            raise ValueError(f"Adafactor: eps[0] (epsilon1) must be >= 0 or None, got {eps[0]!r}")
        if not eps[1] >= 0:
            raise ValueError(f"Adafactor: eps[1] (epsilon2) must be >= 0, got {eps[1]!r}")
        if not group["beta2_decay"] <= 0:
            raise ValueError(f"Adafactor: beta2_decay must be <= 0, got {group['beta2_decay']!r}")
        if not group["d"] >= 1:
            raise ValueError(f"Adafactor: d (the clipping threshold) must be >= 1, got "
                             f"{group['d']!r}")

    @staticmethod
    def state_shape(name, p):
        shape = list(p.shape)
        if name in ("row_var", "col_var") and len(shape) > 1:
            shape[-1 if name == "row_var" else -2] = 1
        return tuple(shape)

    def update(self, p, g, state, group):
        xp = p.backend.xp
        if "step" not in state:
            state["step"] = _scalar(0)
            for name in ("row_var", "col_var") if g.ndim > 1 else ("variance",):
                state[name] = Tensor._wrap(xp.zeros(self.state_shape(name, p), dtype=g.dtype),
                                           p.backend)
        t = float(_count(state))
        lr, (eps1, eps2) = group["lr"], group["eps"]
        if eps1 is None:
            eps1 = float(xp.finfo(p._data.dtype).eps)
        size = min(lr, 1 / t**0.5) * max(eps2, _rms(xp, p._data))
        if group["weight_decay"]:
            p._data *= 1 - lr * group["weight_decay"]
        v = self._variance(xp, g, state, t ** group["beta2_decay"], eps1)
        step = 1 / xp.sqrt(xp.maximum(v, eps1 * eps1)) * g
        p._data -= size / max(1.0, _rms(xp, step) / group["d"]) * step

    @staticmethod
    def _variance(xp, g, state, weight, eps1):
        """The second-moment estimate v̂ after this step's g (the moments updated in place)."""
        if g.ndim <= 1:
            _lerp_(state["variance"]._data, g * g, weight)
            return state["variance"]._data.copy()
        row, col = state["row_var"]._data, state["col_var"]._data
        _lerp_(row, xp.sum(g * g, axis=-1, keepdims=True) / g.shape[-1], weight)
        _lerp_(col, xp.sum(g * g, axis=-2, keepdims=True) / g.shape[-2], weight)
        return (row @ col) / xp.maximum(row.mean(axis=-2, keepdims=True), eps1)


def _rms(xp, a):
    """‖a‖₂ / √(its size), as a Python float."""
    return float(xp.sqrt(xp.sum(a * a))) / a.size**0.5


class CosineSchedule:
    """Linear warm-up to the optimizer's lr over `warmup` steps, then a cosine decay to
    `min_ratio` x lr at `total` steps. Call `step()` once per optimizer step.

    The training loop's schedule, kept for its checkpoints; for PyTorch's own schedulers
    (LinearLR then CosineAnnealingLR in a SequentialLR, ...) see optim.lr_scheduler."""

    def __init__(self, optimizer, total, warmup=0, min_ratio=0.1):
        self.optimizer, self.total = optimizer, total
        self.warmup, self.min_ratio = warmup, min_ratio
        self.base_lr = optimizer.lr
        self.steps = 0
        optimizer.lr = self.lr_at(0)

    def lr_at(self, step):
        if step < self.warmup:
            return self.base_lr * (step + 1) / self.warmup
        progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        cosine = 0.5 * (1 + math.cos(math.pi * progress))
        return self.base_lr * (self.min_ratio + (1 - self.min_ratio) * cosine)

    def step(self):
        side_effect("CosineSchedule.step()")
        self.steps += 1
        self.optimizer.lr = self.lr_at(self.steps)

    def state_dict(self):
        return {"steps": self.steps, "base_lr": self.base_lr}

    def load_state_dict(self, saved):
        self.steps, self.base_lr = int(saved["steps"]), float(saved["base_lr"])
        self.optimizer.lr = self.lr_at(self.steps)


@no_grad()
def _squares(g):
    """Σ g² as a Python float; float16 summed in float32 (300² overflows float16)."""
    if g.dtype.itemsize < 4:
        g = g.astype("float32")
    return float((g * g).sum())


def clip_grad_norm(parameters, max_norm):
    """Scale all gradients together so that their global L2 norm is at most max_norm.
    Returns the norm before clipping."""
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return 0.0
    total = math.sqrt(sum(_squares(p.grad._data) for p in params))
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for p in params:
            p.grad._data *= scale  # in place, as PyTorch's clip_grad_norm_
    return total



from .lbfgs import LBFGSSteps as _LBFGSSteps  # noqa: E402


class LBFGS(_LBFGSSteps, Optimizer):
    __doc__ = _LBFGSSteps.__doc__  # (a step() of its own: torch's contract, see Optimizer)


from .muon import MuonSteps as _MuonSteps  # noqa: E402


class Muon(_MuonSteps, Optimizer):
    __doc__ = _MuonSteps.__doc__
    defaults = _MuonSteps.defaults  # (here: torch's signature is made from them)


# torch.optim.optimizer, for `from tinyattn.optim.optimizer import Optimizer, required`
optimizer = types.ModuleType(__name__ + ".optimizer", "torch.optim.optimizer's names: the "
                             "Optimizer base class and `required` (a default every group must "
                             "give).")
optimizer.Optimizer, optimizer.required = Optimizer, required
sys.modules[optimizer.__name__] = optimizer
