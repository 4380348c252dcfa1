"""Optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, NAdam, RAdam), a cosine learning-rate
schedule with warm-up, clip_grad_norm; PyTorch's schedulers live in optim.lr_scheduler.

Like PyTorch: an optimizer takes parameters (or groups of them, dicts with their own settings),
`step()` updates them in place from their `.grad`, and `state_dict()` / `load_state_dict()`
carry everything needed to resume exactly (load_state_dict takes torch's state dicts too, and
refuses groups of another number or size, as torch's); copy.deepcopy and pickle of an optimizer
keep its state with the copied parameters. Adam's update is a backend primitive
(`be.adam_update`), so the CuPy backend can run it as one fused kernel.
"""

import math
import warnings
from collections.abc import Mapping

import numpy as np

from ..autograd import TensorBase, bump_version, no_grad, side_effect, zero_grads
from ..errors import CheckpointError, fmt_shape
from . import lr_scheduler  # noqa: F401 - optim.lr_scheduler, as in torch

# torch's switches for how a step runs (multi-tensor, fused kernel, CUDA graphs): the same math,
# so accepted and ignored here
_HOW_TO_RUN = frozenset(("foreach", "fused", "capturable"))
# what a checkpoint's group holds besides settings: its parameters' positions, and torch's
# switches (differentiable too), which are no settings here
_NOT_SETTINGS = _HOW_TO_RUN | {"params", "differentiable"}


def _index(i):
    """Whether `i` is a parameter position (a whole number >= 0, not a bool)."""
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) and i >= 0


class Optimizer:
    """Parameter groups, their per-parameter state, and the step counter.

    Every optimizer takes `maximize` (ascend: the gradient's sign flipped first), refuses a
    setting it does not have (torch's TypeError) and a value out of range (torch's ValueError)."""

    defaults = {}  # the settings and their values (an instance's: with the ones it was given)
    positional = ()  # the settings torch's constructor takes by position, in its order

    def __init__(self, params, *args, **settings):
        name = type(self).__name__
        settings = self._settings(args, settings)
        if isinstance(params, TensorBase):
            raise TypeError(f"{name}: params must be an iterable of tensors or of dicts (groups), "
                            f"got one tensor {fmt_shape(params.shape)}: pass [tensor] or "
                            "model.parameters()")
        params = list(params)
        if not params:
            raise ValueError(f"{name}: got an empty parameter list")
        self.defaults = {**type(self).defaults, "maximize": False, **settings}
        self.param_groups = []
        self.state = {}  # id(param) -> dict of arrays
        self.steps = 0
        for group in params if isinstance(params[0], dict) else [{"params": params}]:
            self.add_param_group(group)

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
        unknown = set(settings) - set(type(self).defaults) - {"maximize"} - _HOW_TO_RUN
        if unknown:
            raise TypeError(f"{name}: unknown setting{'s' * (len(unknown) > 1)} "
                            f"{', '.join(sorted(unknown))}; it has "
                            f"{', '.join(sorted(type(self).defaults))} and maximize")
        return {k: v for k, v in settings.items() if k not in _HOW_TO_RUN}

    def add_param_group(self, param_group):
        """Optimize more parameters, with settings of their own (the rest as the defaults),
        e.g. a new layer after unfreezing it, as torch's."""
        name = type(self).__name__
        if not isinstance(param_group, dict) or "params" not in param_group:
            raise TypeError(f"{name}: a parameter group is a dict with a 'params' entry, got "
                            f"{type(param_group).__name__}")
        params = param_group["params"]
        params = [params] if isinstance(params, TensorBase) else list(params)
        unique = list({id(p): p for p in params}.values())
        if len(unique) < len(params):
            warnings.warn(f"{name}: a parameter group lists a parameter twice; it is updated "
                          "once", UserWarning, stacklevel=2)
        for p in unique:
            if not isinstance(p, TensorBase) or not p.is_leaf:
                raise ValueError(f"{name}: can only optimize leaf tensors (made by the user, "
                                 "not computed from others), as torch")
        taken = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in taken for p in unique):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        full = {**self.defaults, **param_group, "params": unique}
        self.check(full)
        self.param_groups.append(full)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines += [""] * (i > 0) + [f"Parameter Group {i}"]  # (groups apart, as torch's)
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines) + "\n)"

    @property
    def lr(self):
        return self.param_groups[0]["lr"]

    @lr.setter
    def lr(self, value):
        for group in self.param_groups:
            group["lr"] = value

    def params(self):
        return [p for group in self.param_groups for p in group["params"]]

    def zero_grad(self, set_to_none=True):
        zero_grads(self.params(), set_to_none)

    def check(self, group):
        """Refuse settings out of range, with torch's rules (lr, eps, weight decay, momentum
        and the like >= 0; betas in [0, 1))."""
        name = type(self).__name__
        for key in ("lr", "eps", "weight_decay", "momentum", "alpha", "lr_decay", "momentum_decay",
                    "initial_accumulator_value", "dampening"):
            if key in group and not group[key] >= 0:
                raise ValueError(f"{name}: {key} must be >= 0, got {group[key]!r}")
        betas = group.get("betas", ())
        if "betas" in group and (not isinstance(betas, (tuple, list)) or len(betas) != 2):
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
        for i, beta in enumerate(betas):
            if not 0 <= beta < 1:
                raise ValueError(f"{name}: betas[{i}] must be in [0, 1), got {beta!r}")

    @no_grad()
    def step(self):
        side_effect(f"{type(self).__name__}.step()")
        self.steps += 1
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    g = -p.grad.data if group["maximize"] else p.grad.data
                    self._update(p, g, self.state.setdefault(id(p), {}), group)
                    bump_version(p)  # changed in place: a graph that saved p refuses it

    # a float16 parameter steps in float32, its state kept there (as Adam's kernel does): g²
    # underflows float16 below 2.4e-4 and eps (1e-8, Adagrad's 1e-10) is 0 there, so √v + eps
    # was 0 and the step inf or NaN for any tiny or zero gradient
    steps_half_natively = False

    def _update(self, p, g, state, group):
        """update(), with a float16 parameter stepped on a float32 copy written back rounded."""
        if self.steps_half_natively or p.data.dtype != np.float16:
            return self.update(p, g, state, group)
        xp = p.backend.xp
        wide = type(p)._wrap(p.data.astype(xp.float32), p.backend)
        self.update(wide, g.astype(xp.float32), state, group)
        xp.copyto(p.data, wide.data, casting="unsafe")

    def update(self, p, g, state, group):
        raise TypeError(f"{type(self).__name__} has no update(): an Optimizer subclass defines it")

    # ---- copies: the state follows the copied parameters ----------------------------------

    def __getstate__(self):
        """pickle and copy.deepcopy: the state keyed by parameter position, not by id(), so that
        the copy keys it by its own (copied) parameters' ids (as torch's state follows them);
        by id() the copy's state belonged to the originals and the copy stepped from fresh
        moments."""
        d = dict(self.__dict__)
        at = {id(p): i for i, p in enumerate(self.params())}
        state = d.pop("state")
        d["_state_at"] = {at[k]: v for k, v in state.items() if k in at}
        return d

    def __setstate__(self, d):
        d = dict(d)
        by_position = d.pop("_state_at", None)
        self.__dict__.update(d)
        if by_position is not None:  # (a pickle from before: its state as it was)
            params = self.params()
            self.state = {id(params[i]): v for i, v in by_position.items()}

    # ---- checkpoints: settings, step count and state, by parameter position ----------------

    # the state names torch's optimizer of the same name keeps where they are not ours
    # (None: state this step does not keep): load_state_dict takes torch's state dicts
    torch_state_names = {}

    def state_dict(self):
        """{"steps", "groups", "state"}: each group's settings and, as torch's "params", the
        positions of its parameters (so a load can tell another split into groups); the state
        by parameter position and name ("3.m")."""
        groups, start = [], 0
        for g in self.param_groups:
            groups.append({**{k: v for k, v in g.items() if k != "params"},
                           "params": list(range(start, start + len(g["params"])))})
            start += len(g["params"])
        state = {}
        for i, p in enumerate(self.params()):
            for name, value in self.state.get(id(p), {}).items():
                state[f"{i}.{name}"] = p.backend.to_numpy(value)
        return {"steps": self.steps, "groups": groups, "state": state}

    def load_state_dict(self, saved):
        """Settings, step count and state from `state_dict()` (or from torch's optimizer of the
        same name: its "state" and "param_groups"), as copies (nothing changes if any entry
        does not fit). Groups must match in number and size, as torch's (a checkpoint from
        before groups kept their parameters' positions: in number). Each state array comes
        back in the dtype this optimizer's step keeps it in, not the parameter's (Adam: float32
        moments for float16 weights): a resumed run takes the same steps, to the bit, as one
        never interrupted."""
        steps, groups, positions, saved_state = self._layout(saved)
        self._check_groups(groups, positions)
        settings = [{k: (tuple(v) if isinstance(v, list) else v) for k, v in s.items()
                     if k not in _NOT_SETTINGS} for s in groups]
        # every parameter, by its position in the checkpoint, with the settings it will step with
        merged = [{**group, **s} for group, s in zip(self.param_groups, settings, strict=True)]
        params = [(p, group) for group in merged for p in group["params"]]
        at = range(len(params)) if positions is None else [int(i) for ids in positions
                                                             for i in ids]
        params = dict(zip(at, params, strict=True))
        kept = {}  # (group, dtype, backend) -> how a step keeps its state (see _kept_as)
        new_state = {}
        for key, value in saved_state.items():
            p, group, name = self._state_entry(key, value, params)
            like = (id(group), p.dtype, p.backend)
            if like not in kept:
                kept[like] = self._kept_as(p, group)
            new_state.setdefault(id(p), {})[name] = self._restored(key, value, p, kept[like], name)
        for group, s in zip(self.param_groups, settings, strict=True):
            group.update(s)
        self.state = new_state
        self.steps = steps

    def _layout(self, saved):
        """(steps, group settings, each group's parameter positions or None, state by "i.name")
        of tinyattn's state dict, or of torch's (its nested state renamed to ours)."""
        name = f"{type(self).__name__}.load_state_dict"
        if not isinstance(saved, Mapping):
            raise TypeError(f"{name}: expected a state dict (a dict, as state_dict() returns), "
                            f"got {type(saved).__name__}")
        ours = {"steps", "groups", "state"} <= saved.keys()
        if not (ours or {"state", "param_groups"} <= saved.keys()):
            raise CheckpointError(f"{name}: a state dict has the keys 'groups', 'state' and "
                                  "'steps' (tinyattn's) or 'state' and 'param_groups' (torch's); "
                                  f"this one has {sorted(map(str, saved))}")
        groups, state = saved["groups" if ours else "param_groups"], saved["state"]
        if not (isinstance(groups, (list, tuple)) and all(isinstance(g, Mapping) for g in groups)
                and isinstance(state, Mapping)):
            raise CheckpointError(f"{name}: the state dict's groups are not a list of dicts or "
                                  "its state not a dict")
        positions = self._positions(groups)
        if not ours:
            steps, state = self._from_torch(state)
            return steps, groups, positions, state
        try:
            return int(saved["steps"]), groups, positions, state
        except (TypeError, ValueError):
            raise CheckpointError(f"{name}: steps is {saved['steps']!r:.60}, not a "
                                  "number") from None

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

    def _from_torch(self, state):
        """torch's state ({position: {name: value}}) as ours ({"position.name": value}, torch's
        names translated, None and what this step does not keep left out) and the step count:
        the most steps a parameter took (torch keeps no count of its own)."""
        flat, steps = {}, 0
        for i, entries in state.items():
            if not isinstance(entries, Mapping):
                raise CheckpointError(f"{type(self).__name__}.load_state_dict: torch's state "
                                      f"[{i!r}] is {type(entries).__name__}, not a dict")
            for key, value in entries.items():
                if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
                    value = value.detach().cpu().numpy()
                if key == "step":
                    try:
                        steps = max(steps, int(np.asarray(value).item()))
                    except (TypeError, ValueError):
                        raise CheckpointError(f"{type(self).__name__}.load_state_dict: torch's "
                                              f"state [{i!r}]['step'] is not a number") from None
                name = self.torch_state_names.get(key, key)
                if name is not None and value is not None:
                    flat[f"{i}.{name}"] = value
        return steps, flat

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

    def _state_entry(self, key, value, params):
        """(parameter, its settings, state name) that the checkpoint's state `key` ("3.m")
        is for, its shape checked; `params`: (parameter, settings) by checkpoint position."""
        i, _, name = str(key).partition(".")
        found = params.get(int(i)) if i.isdecimal() else None
        if not (found and name) or (np.ndim(value) and np.shape(value) != found[0].shape):
            raise CheckpointError(f"{type(self).__name__}.load_state_dict: state {key} does "
                                  "not match this optimizer's parameters")
        return (*found, name)

    def _kept_as(self, p, group):
        """{state name: dtype, or the Python type of a scalar} as this optimizer's step makes
        its state for a parameter like `p` in `group`: asked of update() itself, on a
        one-element stand-in, so that every optimizer answers for itself."""
        xp = p.backend.xp
        stand_in = type(p)._wrap(xp.ones((1,), dtype=p.dtype), p.backend)
        state = {}
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._update(stand_in, xp.ones((1,), dtype=p.dtype), state, group)
        return {k: getattr(v, "dtype", type(v)) for k, v in state.items()}

    def _restored(self, key, value, p, kept, name):
        """The saved state `value` as this optimizer keeps it for `p` (a copy: stepping never
        writes into the dict it was loaded from). State a step does not make (an older
        checkpoint's) is cast to p's dtype, a 0-d entry kept as it is."""
        how = kept.get(name)  # (a dtype compares equal to a type: float64 == float)
        scalar = isinstance(how, type) and issubclass(how, (int, float))
        if isinstance(how, type) and not scalar:
            how = None  # (not a number: as state a step does not make)
        try:
            if scalar:  # a step count or a running product
                return how(np.asarray(value).item())
            value = np.array(value, dtype=how)
            if how is None and value.ndim:
                value = value.astype(p.dtype)
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{type(self).__name__}.load_state_dict: state {key} is not "
                                  f"a number array ({type(e).__name__}: {e})") from None
        return p.backend.asarray(value)


class SGD(Optimizer):
    """p -= lr * (g + wd p), with momentum buf = μ buf + (1 - dampening) g (the first step:
    buf = g) and then the step buf (Nesterov: g + μ buf)."""

    defaults = {"lr": 0.01, "momentum": 0.0, "dampening": 0.0, "nesterov": False,
                "weight_decay": 0.0}
    positional = ("lr", "momentum", "dampening", "weight_decay", "nesterov")
    torch_state_names = {"momentum_buffer": "momentum"}

    def check(self, group):
        super().check(group)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: nesterov needs a momentum > 0 and dampening 0 (torch's rule), "
                             f"got momentum {group['momentum']}, dampening {group['dampening']}")

    def update(self, p, g, state, group):
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p.data
        mu = group["momentum"]
        if mu:
            buf = state.get("momentum")
            buf = g.copy() if buf is None else buf * mu + (1 - group["dampening"]) * g
            state["momentum"] = buf
            g = g + mu * buf if group["nesterov"] else buf
        p.data -= group["lr"] * g


class Adam(Optimizer):
    """Adam: m, v running moments of g and g², bias-corrected by the parameter's own step
    count; weight decay added to g (L2); amsgrad divides by the largest v so far."""

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                "amsgrad": False, "decoupled_weight_decay": False}
    positional = ("lr", "betas", "eps", "weight_decay", "amsgrad")
    torch_state_names = {"exp_avg": "m", "exp_avg_sq": "v", "max_exp_avg_sq": "v_max"}

    steps_half_natively = True  # its kernel reads float16 weights beside float32 moments

    def update(self, p, g, state, group):
        if "m" not in state:
            # a float16 parameter keeps float32 moments: g² underflows float16 and eps = 1e-8
            # is 0 there, so √v + eps would be 0 and the step inf
            xp = p.backend.xp
            dtype = xp.float32 if p.data.dtype == xp.float16 else p.data.dtype
            state["m"] = xp.zeros(p.data.shape, dtype=dtype)
            state["v"] = xp.zeros(p.data.shape, dtype=dtype)
            state["step"] = 0
        if group["amsgrad"] and "v_max" not in state:
            state["v_max"] = p.backend.xp.zeros_like(state["v"])
        # the steps this parameter took (torch's state["step"]: a parameter without a gradient
        # in some steps is corrected for its own count); a checkpoint from before it was kept
        # has the optimizer's
        state["step"] = t = int(state.get("step", self.steps - 1)) + 1
        beta1, beta2 = group["betas"]
        p.backend.adam_update(p.data, g, state["m"], state["v"], lr=group["lr"], beta1=beta1,
                              beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
                              step=t, decoupled=group["decoupled_weight_decay"],
                              v_max=state["v_max"] if group["amsgrad"] else None)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * wd before the Adam step (Adam with
    decoupled_weight_decay=True, as torch)."""

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01,
                "amsgrad": False, "decoupled_weight_decay": True}


class RMSprop(Optimizer):
    """p -= lr g / (√v + eps), v = α v + (1-α) g² (centered: v minus the squared mean of g);
    with momentum, the step goes through a buffer b = μ b + g / (√v + eps)."""

    defaults = {"lr": 1e-2, "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0, "momentum": 0.0,
                "centered": False}
    positional = ("lr", "alpha", "eps", "weight_decay", "momentum", "centered")
    torch_state_names = {"step": None}  # (torch counts steps; this step needs no count)

    def update(self, p, g, state, group):
        xp = p.backend.xp
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p.data
        alpha = group["alpha"]
        if "square_avg" not in state:
            state["square_avg"] = xp.zeros_like(p.data)
        square_avg = state["square_avg"]
        square_avg *= alpha
        square_avg += (1 - alpha) * g * g
        if group["centered"]:
            grad_avg = state.setdefault("grad_avg", xp.zeros_like(p.data))
            grad_avg += (1 - alpha) * (g - grad_avg)
            avg = xp.sqrt(square_avg - grad_avg * grad_avg) + group["eps"]
        else:
            avg = xp.sqrt(square_avg) + group["eps"]
        if group["momentum"] > 0:
            buf = state.setdefault("momentum_buffer", xp.zeros_like(p.data))
            buf *= group["momentum"]
            buf += g / avg
            p.data -= group["lr"] * buf
        else:
            p.data -= group["lr"] * (g / avg)


class Adagrad(Optimizer):
    """p -= lr_t g / (√(Σ g²) + eps), with lr_t = lr / (1 + (t - 1) lr_decay) at the
    parameter's t-th step; the sum starts at initial_accumulator_value."""

    defaults = {"lr": 1e-2, "lr_decay": 0.0, "weight_decay": 0.0,
                "initial_accumulator_value": 0.0, "eps": 1e-10}
    positional = ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def update(self, p, g, state, group):
        xp = p.backend.xp
        if "sum" not in state:
            state["sum"] = xp.full(p.data.shape, group["initial_accumulator_value"],
                                   dtype=p.data.dtype)
            state["step"] = xp.zeros((), dtype=xp.float64)
        state["step"] += 1
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p.data
        lr = group["lr"] / (1 + (float(state["step"]) - 1) * group["lr_decay"])
        state["sum"] += g * g
        p.data -= lr * (g / (xp.sqrt(state["sum"]) + group["eps"]))


class _Moments(Optimizer):
    """What Adamax, NAdam and RAdam share: the parameter's own step count t, the first moment
    m (and second v), weight decay added to g or, decoupled, applied to p first."""

    torch_state_names = {"exp_avg": "m", "exp_avg_sq": "v", "exp_inf": "u"}

    def _moments(self, p, g, state, group, second=True):
        xp = p.backend.xp
        if "m" not in state:
            state["m"] = xp.zeros_like(p.data)
            if second:
                state["v"] = xp.zeros_like(p.data)
            state["step"] = 0  # (the steps this parameter took: as Adam's, see there)
        state["step"] = t = int(state["step"]) + 1
        if group["weight_decay"] and group.get("decoupled_weight_decay"):
            p.data *= 1 - group["lr"] * group["weight_decay"]
        elif group["weight_decay"]:
            g = g + group["weight_decay"] * p.data
        beta1, beta2 = group["betas"]
        state["m"] *= beta1
        state["m"] += (1 - beta1) * g
        if second:
            state["v"] *= beta2
            state["v"] += (1 - beta2) * g * g
        return g, t, beta1, beta2


class Adamax(_Moments):
    """Adam with the infinity norm: u = max(β₂ u, |g| + eps), p -= lr / (1 - β₁ᵗ) m / u."""

    defaults = {"lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0}
    positional = ("lr", "betas", "eps", "weight_decay")

    def update(self, p, g, state, group):
        xp = p.backend.xp
        g, t, beta1, beta2 = self._moments(p, g, state, group, second=False)
        u = state.setdefault("u", xp.zeros_like(p.data))
        xp.maximum(u * beta2, xp.abs(g) + group["eps"], out=u)
        p.data -= group["lr"] / (1 - beta1**t) * state["m"] / u


class NAdam(_Moments):
    """Adam with Nesterov momentum (Dozat, 2016): μ_t = β₁ (1 - 0.96^(t ψ) / 2), ψ the
    momentum_decay; p -= lr ((1 - μ_t) / (1 - Πμ) g + μ_{t+1} / (1 - Πμ μ_{t+1}) m) / (√v̂ + ε)
    with Πμ the product of every μ so far."""

    defaults = {"lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                "momentum_decay": 4e-3, "decoupled_weight_decay": False}
    positional = ("lr", "betas", "eps", "weight_decay", "momentum_decay",
                  "decoupled_weight_decay")

    def update(self, p, g, state, group):
        g, t, beta1, beta2 = self._moments(p, g, state, group)
        psi = group["momentum_decay"]
        mu = beta1 * (1 - 0.5 * 0.96 ** (t * psi))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
        # Πμ kept in float32, as torch keeps it (its state tensor): the same steps to the bit
        product = float(np.float32(np.float32(state.get("mu_product", 1.0)) * np.float32(mu)))
        state["mu_product"] = product
        denom = p.backend.xp.sqrt(state["v"] / (1 - beta2**t)) + group["eps"]
        p.data -= group["lr"] * (1 - mu) / (1 - product) * (g / denom)
        p.data -= group["lr"] * mu_next / (1 - product * mu_next) * (state["m"] / denom)


class RAdam(_Moments):
    """Adam with its variance rectified (Liu et al., 2019): while the variance estimate is too
    young (ρ_t <= 5) a plain momentum step lr m̂; after, lr m̂ r_t √(1 - β₂ᵗ) / (√v + eps)."""

    defaults = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                "decoupled_weight_decay": False}
    positional = ("lr", "betas", "eps", "weight_decay", "decoupled_weight_decay")

    def update(self, p, g, state, group):
        g, t, beta1, beta2 = self._moments(p, g, state, group)
        m_hat = state["m"] / (1 - beta1**t)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
        if rho_t <= 5:
            p.data -= group["lr"] * m_hat
            return
        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                         / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        adaptive = math.sqrt(1 - beta2**t) / (p.backend.xp.sqrt(state["v"]) + group["eps"])
        p.data -= group["lr"] * m_hat * adaptive * rect


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
    total = math.sqrt(sum(_squares(p.grad.data) for p in params))
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for p in params:
            p.grad.data *= scale  # in place, as PyTorch's clip_grad_norm_
    return total

