"""Optimizers and lr schedulers side by side with torch (round 3): what a PyTorch user's
training loop sees, step by step."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


def _schedulers(lib):
    sch = lib.optim.lr_scheduler
    return {
        "StepLR": lambda o: sch.StepLR(o, 2, gamma=0.5),
        "CosineAnnealingLR": lambda o: sch.CosineAnnealingLR(o, T_max=5, eta_min=0.001),
        "OneCycleLR": lambda o: sch.OneCycleLR(o, max_lr=[0.5, 0.3], total_steps=20),
        "CyclicLR": lambda o: sch.CyclicLR(o, 0.01, 0.1, step_size_up=3),
        "SequentialLR": lambda o: sch.SequentialLR(
            o, [sch.LinearLR(o, 0.2, total_iters=3), sch.CosineAnnealingLR(o, T_max=6)],
            milestones=[3]),
        "ReduceLROnPlateau": lambda o: sch.ReduceLROnPlateau(o, patience=0, factor=0.5),
    }


def _tensor_lr_run(lib, name):
    """SGD with lr given as a 0-d tensor in two groups, stepped 12 times with scheduler `name`:
    (the lr tensors given, the optimizer, each step's group lrs, each step's get_last_lr())."""
    lrs = [lib.tensor(0.1), lib.tensor(0.05)]
    ps = [lib.zeros(2, requires_grad=True), lib.zeros(3, requires_grad=True)]
    opt = lib.optim.SGD([{"params": ps[:1], "lr": lrs[0]}, {"params": ps[1:], "lr": lrs[1]}],
                        momentum=0.9)
    sched = _schedulers(lib)[name](opt)
    groups, last = [], []
    for _ in range(12):
        opt.step()
        sched.step(1.0) if name == "ReduceLROnPlateau" else sched.step()
        groups.append([float(g["lr"]) for g in opt.param_groups])
        last.append([float(v) for v in sched.get_last_lr()])
    return lrs, opt, groups, last


@pytest.mark.parametrize("name", list(_schedulers(torch)))
def test_scheduler_sets_a_tensor_lr_in_place_as_torch(name):
    # torch fills a tensor lr in place (the optimizer keeps reading the tensor it was given),
    # keeps initial_lr/base_lrs as copies, and get_last_lr() gives copies: the same values,
    # float32 rounding included, and the group's lr stays the user's tensor
    t_lrs, t_opt, t_groups, t_last = _tensor_lr_run(torch, name)
    a_lrs, a_opt, a_groups, a_last = _tensor_lr_run(ta, name)
    np.testing.assert_array_equal(a_groups, t_groups)
    np.testing.assert_array_equal(a_last, t_last)
    for t_lr, a_lr, a_group in zip(t_lrs, a_lrs, a_opt.param_groups, strict=True):
        assert a_group["lr"] is a_lr
        assert float(a_lr) == float(t_lr)
        assert "initial_lr" not in a_group or a_group["initial_lr"] is not a_lr


def test_get_last_lr_of_a_tensor_lr_is_a_copy():
    lr = ta.tensor(0.1)
    opt = ta.optim.SGD([ta.zeros(2, requires_grad=True)], lr=lr)
    sched = ta.optim.lr_scheduler.ExponentialLR(opt, 0.5)
    opt.step()
    sched.step()
    last = sched.get_last_lr()[0]
    last.fill_(7.0)  # changing the copy changes no learning rate
    assert float(opt.param_groups[0]["lr"]) == pytest.approx(0.05)
    assert float(sched.base_lrs[0]) == pytest.approx(0.1)


def _closed_form_run(lib):
    class Halving(lib.optim.lr_scheduler.LRScheduler):
        def get_lr(self):
            return [b * 0.9 ** self.last_epoch for b in self.base_lrs]

        def _get_closed_form_lr(self):  # what step(epoch) uses in torch
            return [b * 0.5 ** self.last_epoch for b in self.base_lrs]

    opt = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=0.1)
    sched = Halving(opt)
    out = []
    for epoch in (1, 3, 4):
        opt.step()
        with pytest.warns(UserWarning):
            sched.step(epoch)
        out.append(opt.param_groups[0]["lr"])
    return out


def test_step_epoch_uses_a_subclass_closed_form_as_torch():
    np.testing.assert_allclose(_closed_form_run(ta), _closed_form_run(torch), rtol=1e-15)
    np.testing.assert_allclose(_closed_form_run(ta), [0.05, 0.0125, 0.00625], rtol=1e-15)


def test_builtin_schedulers_have_torch_closed_form_method():
    for lib_name, lib in (("torch", torch), ("ta", ta)):
        opt = lib.optim.SGD([lib.zeros(2, requires_grad=True)], lr=0.1)
        sched = lib.optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)
        sched.last_epoch = 5
        assert sched._get_closed_form_lr() == pytest.approx([0.025]), lib_name


@pytest.mark.parametrize("make", [
    lambda sch, o: sch.ChainedScheduler([sch.ConstantLR(o, 0.5, total_iters=2),
                                         sch.ExponentialLR(o, 0.9)]),
    lambda sch, o: sch.ReduceLROnPlateau(o, patience=0),
])
def test_last_lr_of_chained_and_plateau_is_a_copy_of_a_tensor_lr(make):
    lr = ta.tensor(0.1)
    opt = ta.optim.SGD([ta.zeros(2, requires_grad=True)], lr=lr)
    sched = make(ta.optim.lr_scheduler, opt)
    opt.step()
    sched.step(1.0) if isinstance(sched, ta.optim.lr_scheduler.ReduceLROnPlateau) else sched.step()
    before = float(lr)
    sched.get_last_lr()[0].fill_(7.0)
    assert float(opt.param_groups[0]["lr"]) == before and opt.param_groups[0]["lr"] is lr
