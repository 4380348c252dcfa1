"""Everyday torch training code for small tabular problems (tutorials, notebooks, homework) run
with tinyattn: data splits and loaders, losses, optimizers and schedulers, checkpoints, metrics,
compared with torch where it behaves differently from what such code expects."""

import warnings

import numpy as np
import pytest

import tinyattn as ta

X = np.random.RandomState(0).randn(16, 4).astype(np.float32)
Y = np.random.RandomState(1).randn(16, 2).astype(np.float32)


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 2))


def _train_step(lib, model, opt):
    opt.zero_grad()
    lib.nn.functional.mse_loss(model(lib.tensor(X)), lib.tensor(Y)).backward()
    opt.step()


def _order_warnings(fn):
    """The messages of the warnings fn() gives that are about calling scheduler.step() before
    optimizer.step()."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if "before `optimizer.step()`" in str(w.message)]


# ---- random_split: the lengths people pass ------------------------------------------------------

def test_random_split_takes_numpy_float32_fractions_as_torch():
    torch = pytest.importorskip("torch")
    fracs = list(np.array([0.8, 0.2], dtype=np.float32))  # e.g. read from a config array
    want = [len(s) for s in torch.utils.data.random_split(range(10), fracs)]
    got = [len(s) for s in ta.utils.data.random_split(range(10), fracs)]
    assert got == want == [8, 2]


def test_random_split_takes_tensor_lengths_as_torch():
    torch = pytest.importorskip("torch")
    want = [len(s) for s in torch.utils.data.random_split(range(10), torch.tensor([7, 3]))]
    got = [len(s) for s in ta.utils.data.random_split(range(10), ta.tensor([7, 3]))]
    assert got == want == [7, 3]


def test_random_split_warns_of_an_empty_split_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, ta):
        with pytest.warns(UserWarning, match="Length of split at index 2 is 0"):
            parts = lib.utils.data.random_split(range(10), [0.8, 0.2, 0.0])
        assert [len(p) for p in parts] == [8, 2, 0]


def test_random_split_bad_lengths_name_the_values():
    with pytest.raises(ValueError, match=r"random_split: .*\[7, 4\].*10 samples"):
        ta.utils.data.random_split(range(10), [7, 4])


# ---- scheduler.step() before optimizer.step(): torch's warning ---------------------------------

def test_scheduler_step_before_optimizer_step_warns_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, ta):
        model = _model(lib)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

        def wrong_order(lib=lib, model=model, opt=opt, sched=sched):
            sched.step()
            _train_step(lib, model, opt)
            sched.step()

        messages = _order_warnings(wrong_order)
        assert len(messages) == 1, (lib.__name__, messages)
        assert "skipping the first value of the learning rate schedule" in messages[0]


@pytest.mark.parametrize("make", [
    lambda lib, o: lib.optim.lr_scheduler.OneCycleLR(o, max_lr=0.5, total_steps=10),
    lambda lib, o: lib.optim.lr_scheduler.SequentialLR(o, [
        lib.optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=2),
        lib.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5)], milestones=[2]),
    lambda lib, o: lib.optim.lr_scheduler.ChainedScheduler([
        lib.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=2),
        lib.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)]),
    lambda lib, o: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2),
])
def test_scheduler_after_optimizer_gives_no_order_warning(make):
    torch = pytest.importorskip("torch")
    for lib in (torch, ta):
        model = _model(lib)
        opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = make(lib, opt)

        def right_order(lib=lib, model=model, opt=opt, sched=sched):
            for _ in range(4):
                _train_step(lib, model, opt)
                sched.step()

        assert _order_warnings(right_order) == [], lib.__name__


def test_scheduler_order_warning_for_a_chained_scheduler_stepped_first():
    torch = pytest.importorskip("torch")
    for lib in (torch, ta):
        model = _model(lib)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        sched = lib.optim.lr_scheduler.ChainedScheduler([
            lib.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=2),
            lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)])
        assert len(_order_warnings(sched.step)) == 2, lib.__name__


def test_no_order_warning_for_an_optimizer_with_a_step_of_its_own():
    """A torch-style Optimizer subclass (its own step()) is not watched: no false warning."""

    class PlainSGD(ta.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, {"lr": lr})

        @ta.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-group["lr"])

    model = _model(ta)
    opt = PlainSGD(model.parameters())
    sched = ta.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)

    def loop():
        for _ in range(2):
            _train_step(ta, model, opt)
            sched.step()

    assert _order_warnings(loop) == []
    assert opt.param_groups[0]["lr"] == pytest.approx(0.025)
