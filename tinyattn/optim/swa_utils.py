"""torch.optim.swa_utils: averages of a model's weights over training, with torch's names,
arguments and values.

    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))   # an EMA of weights
    swa = AveragedModel(model)            # stochastic weight averaging: the plain mean
    sched = SWALR(optimizer, swa_lr=0.05) # anneal each group's lr to swa_lr
    ...after each optimizer.step(): ema.update_parameters(model)
    update_bn(loader, swa.module)         # BatchNorm statistics recomputed for the averaged weights

The first update_parameters copies the model's weights; each later one averages them in, in
place, with the averaging function (one per tensor, avg_fn, or one per list of tensors of a dtype,
multi_avg_fn; by default the running mean). The buffers are copied from the model, or averaged
too with use_buffers=True. n_averaged is a buffer, so it is in the state dict, as torch's.
"""

import copy
import itertools
import math

from ..autograd import no_grad
from ..nn.layers import _BatchNorm
from ..nn.module import Module
from ..tensor import tensor
from .lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] "
                         "range.")


def get_ema_multi_avg_fn(decay=0.999):
    """update(ema_list, model_list, n): each ema tensor moved 1 - decay of the way to the model's,
    in place (ema.lerp_(p, 1 - decay); integer buffers rounded back, as torch's)."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        pairs = zip(ema_param_list, current_param_list, strict=True)
        if ema_param_list[0].is_floating_point():
            for p_ema, p_model in pairs:
                p_ema.lerp_(p_model, 1 - decay)
        else:
            for p_ema, p_model in pairs:
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """update(averaged_list, model_list, n): the running mean of n + 1 models, in place."""

    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        pairs = zip(averaged_param_list, current_param_list, strict=True)
        if averaged_param_list[0].is_floating_point():
            for p_avg, p_model in pairs:
                p_avg.lerp_(p_model, 1 / (float(num_averaged) + 1))
        else:
            for p_avg, p_model in pairs:
                p_avg.copy_(p_avg + (p_model - p_avg) / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """avg(ema, p, n) = decay * ema + (1 - decay) * p, one tensor at a time."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """avg(a, p, n) = a + (p - a) / (n + 1), the running mean, one tensor at a time."""

    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose weights are an average of the model's over the calls of
    update_parameters(model): the running mean (SWA) by default, an EMA with
    multi_avg_fn=get_ema_multi_avg_fn(decay). Calling it calls the copy (`.module`)."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype="int64", device=device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _pairs(self, model):
        """(this copy's tensors, the model's, detached) that are averaged."""
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.parameters(), model.parameters()
        pairs = [(a.detach(), p.detach().to(a.device))  # (torch's zip: the shorter list)
                 for a, p in zip(mine, theirs, strict=False)]
        return [a for a, _ in pairs], [p for _, p in pairs]

    @no_grad()
    def update_parameters(self, model):
        """Average `model`'s current weights in (the first call copies them)."""
        averaged, current = self._pairs(model)
        n = self.n_averaged
        if int(n) == 0:
            for a, p in zip(averaged, current, strict=True):
                a.copy_(p)
        elif self.avg_fn is not None:
            for a, p in zip(averaged, current, strict=True):
                a.copy_(self.avg_fn(a, p, n))
        elif self.multi_avg_fn is not None:
            for a_list, p_list in _by_dtype(averaged, current):
                self.multi_avg_fn(a_list, p_list, n)
        else:  # (torch's on the CPU: the running mean one tensor at a time)
            swa = get_swa_avg_fn()
            for a, p in zip(averaged, current, strict=True):
                a.copy_(swa(a, p, n))
        if not self.use_buffers:
            for b_avg, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                b_avg.copy_(b_model.detach().to(b_avg.device))
        self.n_averaged += 1


def _by_dtype(averaged, current):
    """[(averaged tensors, model tensors)] per dtype (and device), in order of first appearance:
    what torch's multi_avg_fn gets one call each."""
    groups = {}
    for a, p in zip(averaged, current, strict=True):
        lists = groups.setdefault((str(a.device), a.dtype), ([], []))
        lists[0].append(a)
        lists[1].append(p)
    return list(groups.values())


@no_grad()
def update_bn(loader, model, device=None):
    """Recompute every BatchNorm's running statistics for `model`'s current weights: one pass
    over `loader` (batches, or tuples and lists whose first entry is the input) in training
    mode with momentum None (the plain average over the batches); the model's mode and the
    momenta are put back."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to its swa_lr over anneal_epochs steps ("cos" or "linear"), then
    keep it there (torch's recurrence, step by step)."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for value, group in zip(swa_lrs, optimizer.param_groups, strict=True):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else \
            self._linear_anneal

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha)
                for g, lr in zip(groups, prev_lrs, strict=True)]

    def state_dict(self):
        """Everything but the optimizer and the annealing function (torch's)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state):
        self.__dict__.update(state)
        self._set_anneal_func(self._anneal_strategy)
