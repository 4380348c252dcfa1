"""Learning-rate schedulers with PyTorch's names, arguments and step-by-step values.

Make one after the optimizer and call `scheduler.step()` once after each `optimizer.step()`.
Each sets `group["lr"]` for every parameter group, with the same recurrences as PyTorch (so the
sequences agree to the last bit, also when schedulers are chained), and `state_dict()` /
`load_state_dict()` carry plain numbers and lists that `tinyattn.save` can store.
"""

import math
import numbers
import types
from bisect import bisect_right
from collections import Counter

from ..autograd import TensorBase, no_grad, side_effect
from ..errors import warn_user

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
           "ExponentialLR", "PolynomialLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
           "LinearLR", "OneCycleLR", "CyclicLR", "SequentialLR", "ChainedScheduler",
           "ReduceLROnPlateau"]

EPOCH_DEPRECATION_WARNING = (  # torch's words for step(epoch)
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
    "epoch is different from None, the closed form is used instead of the new chainable form, "
    "where available.")
ORDER_WARNING = (  # torch's words, for scheduler.step() called before any optimizer.step()
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
    "later, you should call them in the opposite order: `optimizer.step()` before "
    "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
    "value of the learning rate schedule. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")


def _copy(value):
    """A learning rate as a value of its own: a tensor lr copied (torch's
    _param_groups_val_list), so that base_lrs, initial_lr and get_last_lr() never alias the
    tensor a group reads."""
    return value.clone() if isinstance(value, TensorBase) else value


@no_grad()
def _put(group, key, value):
    """group[key] = value, but a tensor there (lr=tensor(0.01)) filled in place, as torch's
    _update_param_group_val: the optimizer, and whoever holds that tensor, keep reading it."""
    if isinstance(group[key], TensorBase):
        group[key].fill_(value.item() if isinstance(value, TensorBase) else value)
    else:
        group[key] = value


class LRScheduler:
    """Base class: base_lrs from each group's initial_lr, last_epoch counting the steps."""

    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{type(self).__name__}: {type(optimizer).__name__} is not an "
                            "optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copy(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"{type(self).__name__}: resuming at last_epoch="
                                   f"{last_epoch} needs 'initial_lr' in param_groups[{i}]; "
                                   "load the optimizer's state dict first")
        self.base_lrs = [_copy(group["initial_lr"]) for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        raise NotImplementedError(f"{type(self).__name__} has no get_lr()")

    def step(self, epoch=None):
        """Advance one step and set every group's lr. step(epoch), deprecated in torch (and
        warned about, as there), jumps to that epoch: the closed form's lrs where the scheduler
        has one (_get_closed_form_lr), get_lr's otherwise."""
        side_effect(f"{type(self).__name__}.step()")
        if self._step_count == 1 and getattr(self.optimizer, "_opt_called", True) is False:
            warn_user(ORDER_WARNING, UserWarning)  # (the first step after the initial one)
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            self._set(self.get_lr())
            return
        warn_user(EPOCH_DEPRECATION_WARNING, UserWarning)
        self.last_epoch = epoch
        self._set(self._get_closed_form_lr())

    def _get_closed_form_lr(self):
        """The lrs at last_epoch from base_lrs alone (torch's name: a subclass may define its
        own, which step(epoch) and SequentialLR's restarts then use, as torch's do)."""
        return _closed_form(self)

    def _set(self, lrs):
        lrs, groups = list(lrs), self.optimizer.param_groups
        if len(lrs) != len(groups):  # (torch sets the first ones and ignores the rest)
            raise ValueError(f"{type(self).__name__}: get_lr() gave {len(lrs)} learning rates "
                             f"for {len(groups)} parameter groups; it must give one per group")
        for group, lr in zip(groups, lrs, strict=True):
            _put(group, "lr", lr)
        self._last_lr = [_copy(group["lr"]) for group in self.optimizer.param_groups]

    def get_last_lr(self):
        """The learning rates the last step set, one per parameter group."""
        return list(self._last_lr)

    def _lrs(self):
        """Each group's lr, tensors copied (torch's _param_groups_val_list)."""
        return [_copy(group["lr"]) for group in self.optimizer.param_groups]

    def state_dict(self):
        """Everything but the optimizer: plain numbers, lists and dicts."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state):
        self.__dict__.update(state)


class _LRScheduler(LRScheduler):  # noqa: N801
    """torch's old name for LRScheduler, kept for code that subclasses it (a subclass, not an
    alias, so that its __name__ is its own, as torch's)."""


class LambdaLR(LRScheduler):
    """lr = initial_lr x lr_lambda(step) (one function, or one per parameter group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"LambdaLR: got {len(lr_lambda)} lr_lambdas for "
                                 f"{len(optimizer.param_groups)} parameter groups")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch)
                for fn, base in zip(self.lr_lambdas, self.base_lrs, strict=True)]

    def state_dict(self):
        """As PyTorch: functions are not saved; a callable object's attributes are."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state):
        state = dict(state)
        lambdas = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, lambdas, strict=True):
            if saved is not None:
                fn.__dict__.update(saved)


class MultiplicativeLR(LambdaLR):
    """lr x lr_lambda(step) at every step after the first (one function, or one per group)."""

    def get_lr(self):
        if self._is_initial:
            return self._lrs()
        return [lr * fn(self.last_epoch)
                for fn, lr in zip(self.lr_lambdas, self._lrs(), strict=True)]


def _positive(name, what, value):
    """A period must be a number above 0: torch takes 0 and fails at the first step() with
    "integer modulo by zero"; this says which setting, when the scheduler is made."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name}: {what} must be a number > 0, got {value!r}")


class StepLR(LRScheduler):
    """lr x gamma every step_size steps."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        _positive("StepLR", "step_size", step_size)  # (torch fails later: modulo by zero)
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]


class MultiStepLR(LRScheduler):
    """lr x gamma at each milestone step (twice if it is listed twice)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def state_dict(self):
        state = super().state_dict()
        state["milestones"] = sorted(self.milestones.elements())  # a list: savable
        return state

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.milestones = Counter(state["milestones"])


class ConstantLR(LRScheduler):
    """lr x factor for the first total_iters steps, then lr (a constant warm-up)."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._lrs()]
        if self.last_epoch != self.total_iters:
            return self._lrs()
        return [lr * (1.0 / self.factor) for lr in self._lrs()]


class PolynomialLR(LRScheduler):
    """lr x (1 - step / total_iters) ** power, down to 0 at total_iters (then kept);
    total_iters 0 keeps the lr, as torch's."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        if (isinstance(total_iters, bool) or not isinstance(total_iters, numbers.Real)
                or not total_iters >= 0):
            raise ValueError(f"PolynomialLR: total_iters must be a number >= 0, got "
                             f"{total_iters!r}")
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t, n = self.last_epoch, self.total_iters
        if self._is_initial or t > n:
            return self._lrs()
        factor = ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power
        return [lr * factor for lr in self._lrs()]


class ExponentialLR(LRScheduler):
    """lr x gamma every step."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]


class CosineAnnealingLR(LRScheduler):
    """lr from initial_lr down to eta_min along half a cosine over T_max steps (then back up,
    as PyTorch's recurrence does past T_max)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803
        _positive("CosineAnnealingLR", "T_max", T_max)
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t, T, low = self.last_epoch, self.T_max, self.eta_min  # noqa: N806
        if self._is_initial:
            return self._lrs()
        if (t - 1 - T) % (2 * T) == 0:
            return [lr + (base - low) * (1 - math.cos(math.pi / T)) / 2
                    for base, lr in zip(self.base_lrs, self._lrs(), strict=True)]
        return [(1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
                * (lr - low) + low for lr in self._lrs()]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine from initial_lr down to eta_min over T_0 steps, then a restart at initial_lr,
    each period T_mult times the last (SGDR). step(epoch) may take a fractional epoch."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):  # noqa: N803
        if not isinstance(T_0, int) or isinstance(T_0, bool) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a whole number > 0, "
                             f"got {T_0!r}")
        if not isinstance(T_mult, int) or isinstance(T_mult, bool) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_mult must be a whole number "
                             f">= 1, got {T_mult!r}")
        if not isinstance(eta_min, (float, int)):  # (torch's rule and error)
            raise ValueError(f"CosineAnnealingWarmRestarts: expected float or int eta_min, "
                             f"got {eta_min!r} of type {type(eta_min).__name__}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base in self.base_lrs]

    def step(self, epoch=None):
        """One step on, or to `epoch` (a number of epochs, fractions allowed)."""
        side_effect(f"{type(self).__name__}.step()")
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:  # a restart
                self.T_cur %= self.T_i
                self.T_i *= self.T_mult
        else:
            self._seek(epoch)
        self.last_epoch = math.floor(epoch)  # (_step_count stays, as torch's does here)
        self._set(self.get_lr())

    def _seek(self, epoch):
        """T_cur and T_i at `epoch`, from the start."""
        if epoch < 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: epoch must be >= 0, got {epoch}")
        if epoch < self.T_0:
            self.T_i, self.T_cur = self.T_0, epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:  # the restart n with T_0 (T_mult^n - 1) / (T_mult - 1) <= epoch
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult ** n


class LinearLR(LRScheduler):
    """lr x factor, the factor going linearly from start_factor to end_factor over
    total_iters steps (a linear warm-up with the defaults' shape)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._lrs()]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._lrs()
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor
                              + (self.last_epoch - 1) * span)
        return [lr * ratio for lr in self._lrs()]


def _one_cycle_steps(total_steps, epochs, steps_per_epoch):
    """OneCycleLR's length: total_steps, or epochs * steps_per_epoch."""
    if total_steps is not None:
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"OneCycleLR: total_steps must be a positive integer, got "
                             f"{total_steps}")
        return total_steps
    if epochs is None or steps_per_epoch is None:
        raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
    for name, v in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"OneCycleLR: {name} must be a positive integer, got {v}")
    return epochs * steps_per_epoch


def _one_cycle_phases(pct_start, total_steps, three_phase):
    """The phases of the cycle: (end step, lr from, lr to, momentum from, momentum to)."""
    up = float(pct_start * total_steps) - 1
    last = total_steps - 1
    if three_phase:
        return [_phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr",
                       "base_momentum", "max_momentum"),
                _phase(last, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
    return [_phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
            _phase(last, "max_lr", "min_lr", "base_momentum", "max_momentum")]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith, 2018): lr from max_lr/div_factor up to max_lr over pct_start
    of total_steps, then down to initial_lr/final_div_factor; momentum (or Adam's beta1) moves
    the opposite way between max_momentum and base_momentum. Step once per batch."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        self.total_steps = _one_cycle_steps(total_steps, epochs, steps_per_epoch)
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a float in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        self._schedule_phases = _one_cycle_phases(pct_start, self.total_steps, three_phase)
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for m, group in zip(max_lrs, optimizer.param_groups, strict=True):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self._start_momentum(optimizer, max_momentum, base_momentum, last_epoch == -1)
        super().__init__(optimizer, last_epoch)

    def _start_momentum(self, optimizer, max_momentum, base_momentum, fresh):
        """Momentum (or Adam's beta1) cycles too: each group's bounds, and its start value."""
        defaults = optimizer.defaults
        if "momentum" not in defaults and "betas" not in defaults:
            raise ValueError(f"OneCycleLR: cycle_momentum needs an optimizer with momentum "
                             f"or betas, {type(optimizer).__name__} has neither; pass "
                             "cycle_momentum=False")
        self.use_beta1 = "betas" in defaults
        highs = _per_group("max_momentum", optimizer, max_momentum)
        lows = _per_group("base_momentum", optimizer, base_momentum)
        if fresh:
            for high, low, group in zip(highs, lows, optimizer.param_groups, strict=True):
                self._set_momentum(group, high)
                group["max_momentum"], group["base_momentum"] = high, low

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {step} times, past total_steps="
                             f"{self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]],
                                            pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(
                            group[phase["start_momentum"]], group[phase["end_momentum"]], pct))
                    break
                start = end
        return lrs


def _phase(end_step, start_lr, end_lr, start_momentum, end_momentum):
    return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
            "start_momentum": start_momentum, "end_momentum": end_momentum}


def _per_group(name, optimizer, value):
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"OneCycleLR: {name} has {len(value)} values for {n} parameter "
                             "groups")
        return list(value)
    return [value] * n


def _format_param(name, optimizer, value):
    """One value per parameter group (torch's _format_param): a list or tuple of as many, or
    one value for all."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(value)} values, param_groups has {n}.")
        return list(value)
    return [value] * n


class CyclicLR(LRScheduler):
    """Cyclical learning rates (Smith, 2017), torch's: lr goes from base_lr up to max_lr over
    step_size_up steps and back over step_size_down (default step_size_up), the height scaled
    by mode: "triangular" (1), "triangular2" (halved each cycle), "exp_range" (gamma ** step),
    or by scale_fn(x), x the cycle number (scale_mode="cycle") or the step ("iterations").
    With cycle_momentum, momentum (Adam's beta1) moves the other way, from max_momentum down
    to base_momentum. Step once per batch. state_dict keeps a scale_fn that is a callable
    object by its attributes, and none that is a function (as torch's)."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                _put(group, "lr", lr)
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            self.max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for high, low, group in zip(self.max_momentums, self.base_momentums,
                                            optimizer.param_groups, strict=True):
                    self._set_momentum(group, high)
                    group["max_momentum"], group["base_momentum"] = high, low
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self):
        """A mode's scale_mode (its own: "cycle", or "iterations" for exp_range)."""
        if self._scale_fn_custom is None and self.mode in ("triangular", "triangular2"):
            self.scale_mode = "cycle"
        elif self._scale_fn_custom is None and self.mode == "exp_range":
            self.scale_mode = "iterations"

    def scale_fn(self, x):
        """The height's scale at x (the cycle, or the step)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [base + (high - base) * scale_factor * self.scale_fn(at)
               for base, high in zip(self.base_lrs, self.max_lrs, strict=True)]
        if self.cycle_momentum:
            for low, high, group in zip(self.base_momentums, self.max_momentums,
                                        self.optimizer.param_groups, strict=True):
                self._set_momentum(group, high - (high - low) * scale_factor * self.scale_fn(at))
        return lrs

    def state_dict(self):
        """As torch's: a scale_fn that is a function is not saved, a callable object's
        attributes are."""
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = (None if fn is None or isinstance(fn, types.FunctionType)
                                     else dict(fn.__dict__))
        return state

    def load_state_dict(self, state):
        state = dict(state)
        fn = state.pop("_scale_fn_custom", None)
        super().load_state_dict(state)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


def _check_schedulers(name, schedulers, optimizer):
    """torch's checks of the schedulers SequentialLR and ChainedScheduler step: at least one,
    none a ReduceLROnPlateau (its step needs the metric, which they do not pass), each of
    `optimizer`."""
    if not schedulers:
        raise ValueError(f"{name}: expects at least one scheduler")
    for i, s in enumerate(schedulers):
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(f"{name} does not support `ReduceLROnPlateau` scheduler as it "
                             "requires additional kwargs to be specified when calling `step`, "
                             f"but got one at index {i} in the given schedulers sequence.")
        if not hasattr(s, "optimizer"):  # (torch's TypeError)
            raise TypeError(f"{name} at index {i} should have `optimizer` as its attribute "
                            f"(scheduler {i} is a {type(s).__name__})")
        if s.optimizer is not optimizer:
            raise ValueError(f"{name}: scheduler {i} ({type(s).__name__}) belongs to another "
                             "optimizer")


class SequentialLR(LRScheduler):
    """schedulers[0] until milestones[0], then schedulers[1] (restarted from step 0), ...:
    e.g. LinearLR warm-up for 100 steps, then CosineAnnealingLR."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_schedulers("SequentialLR", schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: {len(schedulers)} schedulers need "
                             f"{len(schedulers) - 1} milestones, got {len(milestones)}")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:  # undo what making the schedulers did
            _put(group, "lr", group["initial_lr"])
        for s in self._schedulers:
            _undo_step(s)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self):
        side_effect("SequentialLR.step()")
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            scheduler.last_epoch = 0  # restart: the closed form at step 0
            scheduler._set(scheduler._get_closed_form_lr())
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state):
        state = dict(state)
        saved = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, sub in zip(self._schedulers, saved, strict=True):
            s.load_state_dict(sub)


class ChainedScheduler(LRScheduler):
    """Several schedulers stepped together, each multiplying in its change (e.g. a constant
    warm-up factor and an exponential decay)."""

    def __init__(self, schedulers, optimizer=None):
        if not schedulers:
            raise ValueError("ChainedScheduler: expects at least one scheduler")
        optimizer = optimizer or schedulers[0].optimizer
        _check_schedulers("ChainedScheduler", schedulers, optimizer)
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = self._lrs()

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = self._lrs()

    state_dict = SequentialLR.state_dict
    load_state_dict = SequentialLR.load_state_dict


class ReduceLROnPlateau(LRScheduler):
    """lr x factor once a metric has stopped improving for `patience` steps (mode "min": the
    loss going down; "max": an accuracy going up), then `cooldown` steps of rest; never below
    min_lr. step(metric) after each evaluation."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1.0, got {factor}")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max' and threshold_mode "
                             f"'rel' or 'abs', got {mode!r} and {threshold_mode!r}")
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"ReduceLROnPlateau: {type(optimizer).__name__} is not an optimizer")
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)) and len(min_lr) != n:
            raise ValueError(f"ReduceLROnPlateau: {len(min_lr)} min_lrs for {n} parameter groups")
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown, self.eps = (threshold, threshold_mode,
                                                                        cooldown, eps)
        self.min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * n
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else min_lr
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = self.last_epoch = 0
        self._last_lr = self._lrs()

    def _fit_min_lrs(self):
        """A parameter group added since: a single min_lr covers it, a list cannot (torch's)."""
        n = len(self.optimizer.param_groups)
        if len(self.min_lrs) != n:
            if self.default_min_lr is None:
                raise ValueError(f"ReduceLROnPlateau: the optimizer has {n} parameter groups "
                                 f"now, {len(self.min_lrs)} when min_lr was given as a list; "
                                 "set .min_lrs to one per group")
            self.min_lrs = [self.default_min_lr] * n

    def is_better(self, value, best):
        if self.mode == "min":
            return value < (best * (1 - self.threshold) if self.threshold_mode == "rel"
                            else best - self.threshold)
        return value > (best * (1 + self.threshold) if self.threshold_mode == "rel"
                        else best + self.threshold)

    def step(self, metrics, epoch=None):
        """Count one evaluation whose result is `metrics` (a number or a 0-d tensor); `epoch`
        (deprecated in torch, warned about as there) sets last_epoch instead of counting."""
        side_effect("ReduceLROnPlateau.step()")
        value = float(metrics)
        if epoch is None:
            self.last_epoch += 1
        else:
            warn_user(EPOCH_DEPRECATION_WARNING, UserWarning)
            self.last_epoch = epoch
        if self.is_better(value, self.best):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:  # resting after a cut: bad steps do not count
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._fit_min_lrs()
            for group, low in zip(self.optimizer.param_groups, self.min_lrs, strict=True):
                new = max(float(group["lr"]) * self.factor, low)
                if float(group["lr"]) - new > self.eps:
                    _put(group, "lr", new)
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self._lrs()


def _undo_step(s):
    if hasattr(s, "_schedulers"):
        for sub in s._schedulers:
            _undo_step(sub)
    elif hasattr(s, "last_epoch"):
        s.last_epoch -= 1


def _closed_form(s):
    """The lrs at s.last_epoch computed from base_lrs alone (PyTorch's _get_closed_form_lr;
    get_lr otherwise)."""
    t = s.last_epoch
    if isinstance(s, StepLR):
        return [b * s.gamma ** (t // s.step_size) for b in s.base_lrs]
    if isinstance(s, MultiStepLR):
        return [b * s.gamma ** bisect_right(sorted(s.milestones.elements()), t)
                for b in s.base_lrs]
    if isinstance(s, ExponentialLR):
        return [b * s.gamma ** t for b in s.base_lrs]
    if isinstance(s, CosineAnnealingLR):
        return [s.eta_min + (b - s.eta_min) * (1 + math.cos(math.pi * t / s.T_max)) / 2
                for b in s.base_lrs]
    if isinstance(s, ConstantLR):
        return [b * (s.factor + (t >= s.total_iters) * (1 - s.factor)) for b in s.base_lrs]
    if isinstance(s, PolynomialLR):
        return [b * (1.0 - min(s.total_iters, t) / s.total_iters) ** s.power
                for b in s.base_lrs]
    if isinstance(s, LinearLR):
        return [b * (s.start_factor + (s.end_factor - s.start_factor)
                     * min(s.total_iters, t) / s.total_iters) for b in s.base_lrs]
    return s.get_lr()
