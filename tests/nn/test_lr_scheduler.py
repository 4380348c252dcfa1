"""optim.lr_scheduler: every scheduler's lr sequence matches torch's step by step (several
settings, two parameter groups, chained in SequentialLR), state_dict round trips through
tinyattn.save; RMSprop and Adagrad match torch's updates."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import optim
from tinyattn.optim import lr_scheduler as sched

torch = pytest.importorskip("torch")


def _pair(opt="SGD", **kw):
    """The same two parameter groups in a tinyattn and a torch optimizer."""
    ours = getattr(optim, opt if opt != "AdamW" else "AdamW")(
        [{"params": [ta.zeros(2, requires_grad=True)]},
         {"params": [ta.zeros(3, requires_grad=True)], "lr": 0.5}], lr=0.1, **kw)
    theirs = getattr(torch.optim, opt)(
        [{"params": [torch.zeros(2, requires_grad=True)]},
         {"params": [torch.zeros(3, requires_grad=True)], "lr": 0.5}], lr=0.1, **kw)
    return ours, theirs


def _build(lib, opt, name, kwargs):
    mod = sched if lib == "ours" else torch.optim.lr_scheduler
    if name == "SequentialLR":
        first = mod.LinearLR(opt, start_factor=0.1, total_iters=4)
        second = mod.CosineAnnealingLR(opt, T_max=kwargs["T_max"], eta_min=0.01)
        third = mod.StepLR(opt, step_size=3, gamma=0.5)
        return mod.SequentialLR(opt, [first, second, third], milestones=kwargs["milestones"])
    return getattr(mod, name)(opt, **kwargs)


def warmup(step):
    return min(1.0, (step + 1) / 5)


CASES = [
    ("LambdaLR", {"lr_lambda": warmup}),
    ("LambdaLR", {"lr_lambda": [warmup, lambda s: 0.9 ** s]}),
    ("StepLR", {"step_size": 3}),
    ("StepLR", {"step_size": 2, "gamma": 0.7}),
    ("MultiStepLR", {"milestones": [2, 5, 5, 9], "gamma": 0.5}),
    ("ExponentialLR", {"gamma": 0.9}),
    ("CosineAnnealingLR", {"T_max": 10}),
    ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.02}),  # runs past T_max: back up
    ("LinearLR", {}),
    ("LinearLR", {"start_factor": 0.25, "end_factor": 0.5, "total_iters": 8}),
    ("OneCycleLR", {"max_lr": 1.0, "total_steps": 25}),
    ("OneCycleLR", {"max_lr": [1.0, 2.0], "total_steps": 25, "anneal_strategy": "linear",
                    "three_phase": True, "pct_start": 0.25}),
    ("SequentialLR", {"T_max": 6, "milestones": [4, 12]}),
]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_scheduler_lrs_match_torch_step_by_step(name, kwargs):
    ours, theirs = _pair(momentum=0.9)
    s, ts = _build("ours", ours, name, kwargs), _build("torch", theirs, name, kwargs)
    for step in range(24):
        want = [g["lr"] for g in theirs.param_groups]
        assert [g["lr"] for g in ours.param_groups] == pytest.approx(want, rel=1e-12, abs=0), \
            f"step {step}"
        assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12, abs=0)
        if name == "OneCycleLR":
            assert [g["momentum"] for g in ours.param_groups] == pytest.approx(
                [g["momentum"] for g in theirs.param_groups], rel=1e-12)
        ours.step()
        theirs.step()
        s.step()
        ts.step()


def test_one_cycle_cycles_adams_beta1():
    ours, theirs = _pair("Adam")
    s = sched.OneCycleLR(ours, max_lr=0.01, total_steps=10)
    ts = torch.optim.lr_scheduler.OneCycleLR(theirs, max_lr=0.01, total_steps=10)
    for _ in range(10):
        assert ours.param_groups[0]["betas"] == pytest.approx(theirs.param_groups[0]["betas"])
        ours.step()
        theirs.step()
        s.step()
        ts.step()
    with pytest.raises(ValueError, match="OneCycleLR.*stepped 11 times.*total_steps=10"):
        s.step()


@pytest.mark.parametrize("name,kwargs", [c for c in CASES if c[0] != "LambdaLR"],
                         ids=[c[0] for c in CASES if c[0] != "LambdaLR"])
def test_scheduler_state_dict_resumes_through_save(tmp_path, name, kwargs):
    ours, _ = _pair(momentum=0.9)
    s = _build("ours", ours, name, kwargs)
    for _ in range(7):
        s.step()
    ta.save({"optimizer": ours.state_dict(), "scheduler": s.state_dict()}, tmp_path / "c.npz")
    expected = []
    for _ in range(5):
        s.step()
        expected.append(s.get_last_lr())
    fresh, _ = _pair(momentum=0.9)
    resumed = _build("ours", fresh, name, kwargs)
    saved = ta.load(tmp_path / "c.npz")
    fresh.load_state_dict(saved["optimizer"])
    resumed.load_state_dict(saved["scheduler"])
    got = []
    for _ in range(5):
        resumed.step()
        got.append(resumed.get_last_lr())
    assert got == expected  # exactly: the state dict holds every number the steps read


def test_lambda_lr_state_dict_keeps_callable_objects_state():
    class Scale:
        def __init__(self):
            self.factor = 1.0

        def __call__(self, step):
            return self.factor

    ours, _ = _pair()
    fn = Scale()
    s = sched.LambdaLR(ours, [fn, warmup])
    fn.factor = 0.5
    state = s.state_dict()
    assert state["lr_lambdas"] == [{"factor": 0.5}, None]
    fn.factor = 1.0
    s.load_state_dict(state)
    assert fn.factor == 0.5


def test_scheduler_errors():
    ours, _ = _pair()
    with pytest.raises(ValueError, match="LinearLR: start_factor.*got 0"):
        sched.LinearLR(ours, start_factor=0)
    with pytest.raises(ValueError, match="SequentialLR: 2 schedulers need 1 milestones, got 0"):
        sched.SequentialLR(ours, [sched.StepLR(ours, 2), sched.StepLR(ours, 3)], [])
    with pytest.raises(ValueError, match="OneCycleLR.*total_steps, or epochs"):
        sched.OneCycleLR(ours, max_lr=1.0)
    with pytest.raises(ValueError, match="OneCycleLR.*cycle_momentum.*Adagrad"):
        sched.OneCycleLR(optim.Adagrad([ta.zeros(1, requires_grad=True)]), 1.0, 10)
    with pytest.raises(KeyError, match="StepLR.*last_epoch=3.*initial_lr"):
        sched.StepLR(optim.SGD([ta.zeros(1, requires_grad=True)]), 2, last_epoch=3)


def test_cosine_schedule_still_warms_up_then_decays():
    opt = optim.SGD([ta.zeros(1, requires_grad=True)], lr=1.0)
    s = optim.CosineSchedule(opt, total=20, warmup=4, min_ratio=0.1)
    lrs = [opt.lr]
    for _ in range(20):
        s.step()
        lrs.append(opt.lr)
    assert lrs[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert lrs[20] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lrs[3:-1], lrs[4:], strict=True))
    assert lrs[12] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2)))


# ---- RMSprop and Adagrad -----------------------------------------------------------------------


@pytest.mark.parametrize("name,kwargs", [
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.1,
                 "alpha": 0.9}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.01,
                 "initial_accumulator_value": 0.2}),
])
def test_optimizer_updates_match_torch(name, kwargs, tmp_path):
    rng = np.random.default_rng(0)
    start = rng.standard_normal((3, 4))
    p = ta.tensor(start.copy(), requires_grad=True)
    tp = torch.tensor(start.copy(), requires_grad=True)
    opt = getattr(optim, name)([p], **kwargs)
    topt = getattr(torch.optim, name)([tp], **kwargs)
    target = rng.standard_normal((3, 4))
    for step in range(6):
        if step == 3:  # resume from a checkpoint halfway
            ta.save(opt.state_dict(), tmp_path / "opt.npz")
            opt = getattr(optim, name)([p], **kwargs)
            opt.load_state_dict(ta.load(tmp_path / "opt.npz"))
        loss = ((p - ta.tensor(target)) ** 2).sum()
        tloss = ((tp - torch.tensor(target)) ** 2).sum()
        opt.zero_grad()
        topt.zero_grad()
        loss.backward()
        tloss.backward()
        opt.step()
        topt.step()
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)
