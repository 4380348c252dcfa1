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
    if name == "ChainedScheduler":
        return mod.ChainedScheduler([mod.ConstantLR(opt, factor=0.5, total_iters=3),
                                     mod.ExponentialLR(opt, gamma=0.9)])
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
    ("MultiplicativeLR", {"lr_lambda": lambda s: 0.9 + 0.01 * s}),
    ("ConstantLR", {}),
    ("ConstantLR", {"factor": 1.0}),
    ("PolynomialLR", {}),
    ("ConstantLR", {"factor": 0.2, "total_iters": 7}),
    ("PolynomialLR", {"total_iters": 10, "power": 2.0}),
    ("CosineAnnealingWarmRestarts", {"T_0": 4}),
    ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.01}),
    ("CosineAnnealingWarmRestarts", {"T_0": 1, "T_mult": 3}),
    ("ChainedScheduler", {}),
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
        assert getattr(s, "last_epoch", None) == getattr(ts, "last_epoch", None)
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


@pytest.mark.parametrize("name,kwargs", [c for c in CASES if "Lambda" not in str(c)],
                         ids=[c[0] for c in CASES if "Lambda" not in str(c)])
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
    for make, message in ((lambda: sched.StepLR(ours, 0), "StepLR: step_size must be a number > 0"),
                          (lambda: sched.StepLR(ours, -2), "got -2"),
                          (lambda: sched.CosineAnnealingLR(ours, 0), "CosineAnnealingLR: T_max")):
        with pytest.raises(ValueError, match=message):  # (torch: modulo by zero at step())
            make()
    assert sched.StepLR(ours, np.int64(2)).step_size == 2  # a NumPy integer is a number too


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


# ---- restarts, resumes, nesting and argument checks ------------------------------------------


def _lrs_match_torch(ours, theirs, s, ts, steps):
    for step in range(steps + 1):
        if step:
            for x in (ours, theirs, s, ts):
                x.step()
        want = [g["lr"] for g in theirs.param_groups]
        assert [g["lr"] for g in ours.param_groups] == pytest.approx(want, rel=1e-12, abs=0), \
            f"step {step}"


def _sequence(mod, opt):
    """Every kind of scheduler restarted at a milestone (its closed form at step 0), the first
    one running for a single step."""
    return mod.SequentialLR(opt, [
        mod.ExponentialLR(opt, gamma=0.9),
        mod.LinearLR(opt, start_factor=0.25, end_factor=0.75, total_iters=3),
        mod.MultiStepLR(opt, milestones=[0, 0, 2], gamma=0.5),
        mod.ExponentialLR(opt, gamma=0.8),
        mod.StepLR(opt, step_size=2, gamma=0.3),
        mod.CosineAnnealingLR(opt, T_max=4, eta_min=0.01),
    ], milestones=[1, 4, 8, 11, 15])


def test_sequential_lr_restarts_every_scheduler_as_torch_does():
    ours, theirs = _pair(momentum=0.9)
    s, ts = _sequence(sched, ours), _sequence(torch.optim.lr_scheduler, theirs)
    assert s.optimizer is ours
    _lrs_match_torch(ours, theirs, s, ts, 22)


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step()`")
def test_nested_sequential_lr_matches_torch():
    def build(mod, opt):
        inner = mod.SequentialLR(opt, [mod.LinearLR(opt, start_factor=0.5, total_iters=2),
                                       mod.ExponentialLR(opt, gamma=0.9)], milestones=[3])
        return mod.SequentialLR(opt, [inner, mod.StepLR(opt, step_size=2, gamma=0.5)],
                                milestones=[6])

    ours, theirs = _pair(momentum=0.9)
    _lrs_match_torch(ours, theirs, build(sched, ours), build(torch.optim.lr_scheduler, theirs),
                     12)


def test_chained_schedulers_compose_as_torch():
    """Two schedulers on one optimizer multiply their steps (the recurrences, not the closed
    forms, so the cosine follows the lr the other scheduler left)."""
    ours, theirs = _pair(momentum=0.9)
    mine = [sched.CosineAnnealingLR(ours, T_max=5), sched.ExponentialLR(ours, gamma=0.9)]
    torch_ones = [torch.optim.lr_scheduler.CosineAnnealingLR(theirs, T_max=5),
                  torch.optim.lr_scheduler.ExponentialLR(theirs, gamma=0.9)]
    for step in range(12):
        assert [g["lr"] for g in ours.param_groups] == pytest.approx(
            [g["lr"] for g in theirs.param_groups], rel=1e-12, abs=0), f"step {step}"
        ours.step()
        theirs.step()
        for s in mine + torch_ones:
            s.step()


RESUMABLE = [("StepLR", {"step_size": 3}), ("MultiStepLR", {"milestones": [6, 8]}),
             ("MultiStepLR", {"milestones": [2, 7]}), ("ExponentialLR", {"gamma": 0.9}),
             ("CosineAnnealingLR", {"T_max": 10}), ("LinearLR", {"total_iters": 8}),
             ("OneCycleLR", {"max_lr": 1.0, "total_steps": 30}), ("ConstantLR", {}),
             ("PolynomialLR", {"total_iters": 9}), ("CosineAnnealingWarmRestarts", {"T_0": 4})]


@pytest.mark.parametrize("name,kwargs", RESUMABLE, ids=[c[0] for c in RESUMABLE])
def test_scheduler_made_with_last_epoch_continues_like_torch(name, kwargs):
    """last_epoch=k (after the optimizer's state, with initial_lr, is back) resumes the count."""
    ours, theirs = _pair(momentum=0.9)
    _build("ours", ours, name, kwargs)
    _build("torch", theirs, name, kwargs)
    s = getattr(sched, name)(ours, last_epoch=5, **kwargs)
    ts = getattr(torch.optim.lr_scheduler, name)(theirs, last_epoch=5, **kwargs)
    assert s.last_epoch == ts.last_epoch == 6
    assert s.optimizer is ours
    _lrs_match_torch(ours, theirs, s, ts, 10)


def test_multistep_default_gamma_is_a_tenth():
    ours, _ = _pair()
    s = sched.MultiStepLR(ours, milestones=[2])
    s.step()
    s.step()
    assert s.get_last_lr() == pytest.approx([0.01, 0.05], rel=1e-12)


@pytest.mark.parametrize("kwargs,ok", [
    ({"start_factor": 1.0}, True), ({"start_factor": 1.5}, False),
    ({"end_factor": 0.0}, True), ({"end_factor": 1.5}, False), ({"end_factor": -0.1}, False)])
def test_linear_lr_factor_bounds(kwargs, ok):
    ours, theirs = _pair()
    if not ok:
        with pytest.raises(ValueError, match="LinearLR: (start|end)_factor"):
            sched.LinearLR(ours, **kwargs)
        return
    _lrs_match_torch(ours, theirs, sched.LinearLR(ours, **kwargs),
                     torch.optim.lr_scheduler.LinearLR(theirs, **kwargs), 7)


@pytest.mark.parametrize("kwargs", [
    {"epochs": 3, "steps_per_epoch": 4}, {"epochs": 1, "steps_per_epoch": 1},
    {"total_steps": 1}, {"total_steps": 12, "pct_start": 0.0},
    {"total_steps": 12, "pct_start": 1.0}])
def test_one_cycle_lengths_and_phases_match_torch(kwargs):
    ours, theirs = _pair(momentum=0.9)
    s = sched.OneCycleLR(ours, max_lr=1.0, **kwargs)
    ts = torch.optim.lr_scheduler.OneCycleLR(theirs, max_lr=1.0, **kwargs)
    assert s.total_steps == ts.total_steps
    assert s.optimizer is ours
    # pct_start=1.0 leaves the last phase empty: its final step divides by zero, as in torch
    _lrs_match_torch(ours, theirs, s, ts, s.total_steps - (kwargs.get("pct_start") == 1.0))


@pytest.mark.parametrize("kwargs,match", [
    ({"total_steps": 0}, "total_steps must be a positive integer"),
    ({"total_steps": 2.5}, "total_steps must be a positive integer"),
    ({"epochs": 3}, "give total_steps, or epochs and steps_per_epoch"),
    ({"steps_per_epoch": 3}, "give total_steps, or epochs and steps_per_epoch"),
    ({"epochs": 0, "steps_per_epoch": 3}, "epochs must be a positive integer, got 0"),
    ({"epochs": 2.0, "steps_per_epoch": 3}, "epochs must be a positive integer, got 2.0"),
    ({"epochs": 2, "steps_per_epoch": 0}, "steps_per_epoch must be a positive integer, got 0"),
    ({"total_steps": 10, "pct_start": 1}, "pct_start must be a float"),
    ({"total_steps": 10, "pct_start": 1.5}, "pct_start must be a float"),
    ({"total_steps": 10, "max_lr": [1.0, 2.0, 3.0]}, "max_lr has 3 values for 2"),
    ({"total_steps": 10, "max_momentum": [0.9]}, "max_momentum has 1 values for 2"),
    ({"total_steps": 10, "base_momentum": [0.8] * 3}, "base_momentum has 3 values for 2"),
])
def test_one_cycle_argument_errors(kwargs, match):
    ours, _ = _pair(momentum=0.9)
    kwargs = {"max_lr": 1.0, **kwargs}
    with pytest.raises(ValueError, match="OneCycleLR: " + match):
        sched.OneCycleLR(ours, **kwargs)


def test_sequential_lr_refuses_what_is_not_its_scheduler():
    ours, _ = _pair()
    other, _ = _pair()
    with pytest.raises(TypeError, match="SequentialLR at index 1 should have `optimizer`"):
        sched.SequentialLR(ours, [sched.StepLR(ours, 2), object()], [3])  # (torch's TypeError)
    with pytest.raises(ValueError, match="SequentialLR: scheduler 0 \\(StepLR\\)"):
        sched.SequentialLR(ours, [sched.StepLR(other, 2), sched.StepLR(ours, 2)], [3])


def test_scheduler_state_refuses_a_different_number_of_parts():
    ours, _ = _pair()
    three = sched.SequentialLR(ours, [sched.StepLR(ours, 2), sched.StepLR(ours, 3),
                                      sched.StepLR(ours, 4)], [2, 4])
    two = sched.SequentialLR(ours, [sched.StepLR(ours, 2), sched.StepLR(ours, 3)], [2])
    with pytest.raises(ValueError):
        two.load_state_dict(three.state_dict())
    one_fn = sched.LambdaLR(ours, warmup)
    with pytest.raises(ValueError):
        one_fn.load_state_dict({**one_fn.state_dict(), "lr_lambdas": [None]})


def test_lambda_lr_state_dict_resumes_through_save(tmp_path):
    class Scale:
        def __init__(self, factor):
            self.factor = factor

        def __call__(self, step):
            return self.factor * 0.9 ** step

    ours, _ = _pair()
    s = sched.LambdaLR(ours, [Scale(1.0), warmup])
    for _ in range(4):
        s.step()
    s.lr_lambdas[0].factor = 0.5
    state = s.state_dict()
    assert "optimizer" not in state
    ta.save({"scheduler": state}, tmp_path / "s.npz")
    fresh, _ = _pair()
    resumed = sched.LambdaLR(fresh, [Scale(1.0), warmup])
    resumed.load_state_dict(ta.load(tmp_path / "s.npz")["scheduler"])
    assert resumed.last_epoch == 4
    assert resumed.lr_lambdas[0].factor == 0.5
    s.step()
    resumed.step()
    assert resumed.get_last_lr() == s.get_last_lr()


@pytest.mark.parametrize("kwargs", [{}, {"momentum": 0.0, "centered": True},
                                    {"momentum": 0.5}, {"momentum": 0.5, "centered": True}])
def test_rmsprop_keeps_torchs_state_names(kwargs):
    """The buffers a checkpoint holds are torch's (no momentum buffer without momentum)."""
    p, tp = ta.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    opt, topt = optim.RMSprop([p], **kwargs), torch.optim.RMSprop([tp], **kwargs)
    for x, o in ((p, opt), (tp, topt)):
        (x * x).sum().backward()
        o.step()
    assert set(opt.state_dict()["state"][0]) == set(opt.state[p]) == set(topt.state[tp])


def test_adagrad_state_keeps_the_parameters_dtype():
    p = ta.tensor(np.ones(3, np.float32), requires_grad=True)
    opt = optim.Adagrad([p], initial_accumulator_value=0.5)
    (p * p).sum().backward()
    opt.step()
    assert opt.state[p]["sum"].dtype == np.float32
    assert p.dtype == np.float32


@pytest.mark.parametrize("name,kwargs", [("StepLR", {"step_size": 2}),
                                         ("ExponentialLR", {"gamma": 0.9}),
                                         ("CosineAnnealingLR", {"T_max": 4}),
                                         ("CosineAnnealingWarmRestarts", {"T_0": 2}),
                                         ("PolynomialLR", {"total_iters": 4})])
def test_scheduler_state_dict_holds_torchs_numbers(name, kwargs):
    """Every entry of the state dict (step count, last epoch, base and last lrs) has the value
    torch's scheduler keeps under the same name."""
    ours, theirs = _pair()
    s, ts = _build("ours", ours, name, kwargs), _build("torch", theirs, name, kwargs)
    for _ in range(3):
        ours.step()
        theirs.step()
        s.step()
        ts.step()
    mine, torchs = s.state_dict(), ts.state_dict()
    for key, value in mine.items():  # (entry by entry: pytest.approx takes no nested lists)
        assert torchs[key] == pytest.approx(value, rel=1e-12), key


# metrics whose steps straddle the thresholds below: 10 -> 5 is exactly a relative 0.5 better
# (not better: the test is strict), 9.5 exactly an absolute 0.5 (the same), and the rest more
# or less than that, up and down (for mode "max")
PLATEAU_METRICS = [10.0, 5.0, 4.0, 9.5, 20.0, 30.0, 45.0, 44.0, 3.0, 2.0, 1.5, 0.6, 0.75, 0.7,
                   5.0, 10.0, 10.25, 11.0, 11.0, 4.0, 3.9999, 50.0, 0.1]


def _plateau_run(mod, opt, **kwargs):
    """What ReduceLROnPlateau does over PLATEAU_METRICS, step by step."""
    s = mod.ReduceLROnPlateau(opt, **kwargs)
    lrs = [(s.get_last_lr(), s.last_epoch)]
    for m in PLATEAU_METRICS * 2:
        s.step(m)
        lrs.append(([g["lr"] for g in opt.param_groups], s.get_last_lr(), s.num_bad_epochs,
                    s.best, s.cooldown_counter, s.last_epoch))
    return lrs


@pytest.mark.parametrize("kwargs", [
    {}, {"patience": 1}, {"patience": 1, "cooldown": 2, "factor": 0.5},
    {"patience": 0, "threshold": 0.5}, {"patience": 0, "threshold": 0.5, "threshold_mode": "abs"},
    {"mode": "max", "patience": 0, "threshold": 0.5},
    {"mode": "max", "patience": 0, "threshold_mode": "abs", "threshold": 0.5,
     "min_lr": [0.05, 0.2]},
    {"patience": 0, "factor": 0.5, "eps": 0.25}])  # 0.5 -> 0.25 is exactly eps: not taken
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    ours, theirs = _pair()
    assert _plateau_run(sched, ours, **kwargs) == _plateau_run(torch.optim.lr_scheduler, theirs,
                                                               **kwargs)


def test_new_schedulers_refuse_what_torch_refuses():
    ours, _ = _pair()
    for make, match in [
            (lambda: sched.ReduceLROnPlateau(ours, factor=1.0), "factor must be < 1.0"),
            (lambda: sched.ReduceLROnPlateau(ours, mode="up"), "mode must be 'min' or 'max'"),
            (lambda: sched.ReduceLROnPlateau(ours, min_lr=[0.1]), "1 min_lrs for 2"),
            (lambda: sched.CosineAnnealingWarmRestarts(ours, T_0=0), "T_0 must be a whole"),
            (lambda: sched.CosineAnnealingWarmRestarts(ours, T_0=2.5), "T_0 must be a whole"),
            (lambda: sched.CosineAnnealingWarmRestarts(ours, T_0=2, T_mult=0), "T_mult must"),
            (lambda: sched.CosineAnnealingWarmRestarts(ours, T_0=2, T_mult=1.5), "T_mult must"),
            (lambda: sched.ConstantLR(ours, factor=1.5), r"factor must be in \[0, 1\]"),
            (lambda: sched.ConstantLR(ours, factor=-0.1), r"factor must be in \[0, 1\]"),
            # (total_iters=0 keeps the lr, as torch's: tests/nn/test_conv_padding_modes_round7.py;
            # a scheduler without optimizer is torch's TypeError there too)
            (lambda: sched.PolynomialLR(ours, total_iters=-1),
             "PolynomialLR: total_iters must be a number"),
            (lambda: sched.ChainedScheduler([sched.StepLR(ours, 2), sched.StepLR(_pair()[0], 2)]),
             "scheduler 1 .StepLR. belongs to another optimizer")]:
        with pytest.raises(ValueError, match=match):
            make()
    sched.ConstantLR(ours, factor=0.0)  # the ends of the range are allowed, as in torch
    single, tsingle = _pair()
    s = sched.ChainedScheduler([sched.ExponentialLR(single, gamma=0.5)])
    ts = torch.optim.lr_scheduler.ChainedScheduler(
        [torch.optim.lr_scheduler.ExponentialLR(tsingle, gamma=0.5)])
    s.step()
    ts.step()
    assert s.get_last_lr() == pytest.approx(ts.get_last_lr())


@pytest.mark.parametrize("T_0,T_mult", [(3, 2), (2, 3), (3, 1)])
def test_warm_restarts_take_fractional_epochs_as_torch(T_0, T_mult):  # noqa: N803
    ours, theirs = _pair()
    s = sched.CosineAnnealingWarmRestarts(ours, T_0=T_0, T_mult=T_mult)
    ts = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(theirs, T_0=T_0, T_mult=T_mult)
    for epoch in [0.5, 1.25, 2.9, 3.0, 4.5, 8.75, 9.0, 20.5, 2.0, 27.5, 40.0, 81.3]:
        s.step(epoch)
        ts.step(epoch)
        assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
        assert s.last_epoch == ts.last_epoch
    s.step()
    ts.step()
    assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)


def test_reduce_lr_on_plateau_in_max_mode_with_an_absolute_threshold_and_a_new_group():
    """mode "max", threshold_mode "abs": 1.0 -> 1.25 is not 0.5 better, so the lr is cut at
    once (patience 0), as torch; a group added later takes the single min_lr."""
    ours, theirs = _pair()
    s = sched.ReduceLROnPlateau(ours, mode="max", threshold_mode="abs", threshold=0.5,
                                patience=0, min_lr=0.01)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(theirs, mode="max", threshold_mode="abs",
                                                    threshold=0.5, patience=0, min_lr=0.01)
    for m in (1.0, 1.25, 1.5, 2.0):
        s.step(m)
        ts.step(m)
        assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
    ours.add_param_group({"params": [ta.zeros(1, requires_grad=True)], "lr": 1.0})
    theirs.add_param_group({"params": [torch.zeros(1, requires_grad=True)], "lr": 1.0})
    for m in (0.0, 0.0):
        s.step(m)
        ts.step(m)
    assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
    listed = sched.ReduceLROnPlateau(_pair()[0], patience=0, min_lr=[0.0, 0.0])
    listed.optimizer.add_param_group({"params": [ta.zeros(1, requires_grad=True)]})
    listed.step(1.0)
    with pytest.raises(ValueError, match="ReduceLROnPlateau: the optimizer has 3 parameter"):
        listed.step(2.0)


SECOND = [("LambdaLR", {"lr_lambda": lambda s: 0.9 ** s}),
          ("MultiplicativeLR", {"lr_lambda": lambda s: 0.9}),
          ("StepLR", {"step_size": 3, "gamma": 0.5}),
          ("MultiStepLR", {"milestones": [2, 6], "gamma": 0.5}),
          ("ConstantLR", {"factor": 0.25, "total_iters": 4}),
          ("ConstantLR", {"factor": 0.5, "total_iters": 0}),
          ("ExponentialLR", {"gamma": 0.9}),
          ("PolynomialLR", {"total_iters": 6, "power": 2.0}),
          ("PolynomialLR", {"total_iters": 3}),
          ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.001}),
          ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.001}),
          ("LinearLR", {"start_factor": 0.2, "total_iters": 5}),
          ("OneCycleLR", {"max_lr": 1.0, "total_steps": 40})]


@pytest.mark.parametrize("name,kwargs", SECOND, ids=[f"{c[0]}-{i}" for i, c in enumerate(SECOND)])
def test_every_scheduler_after_a_milestone_gives_torchs_lrs(name, kwargs):
    """From the milestone on, the second scheduler restarts from base_lrs (its closed form at
    step 0, as torch's step(0)) and then follows torch's sequence, whatever its kind."""
    def build(mod, opt):
        return mod.SequentialLR(opt, [mod.LinearLR(opt, start_factor=0.1, total_iters=4),
                                      getattr(mod, name)(opt, **kwargs)], milestones=[4])

    ours, theirs = _pair(momentum=0.9)
    s, ts = build(sched, ours), build(torch.optim.lr_scheduler, theirs)
    got, want = [s.get_last_lr()], [ts.get_last_lr()]
    for _ in range(25):
        for x in (ours, theirs, s, ts):
            x.step()
        got.append(s.get_last_lr())
        want.append(ts.get_last_lr())
    for step, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == pytest.approx(w, rel=1e-12, abs=1e-15), f"step {step}"


@pytest.mark.parametrize("together", [False, True])
def test_a_deep_copied_scheduler_drives_a_copied_optimizer_with_its_state(together):
    """copy.deepcopy of a scheduler copies its optimizer (as torch's): the copy's state must
    follow the copied parameters, and the copied scheduler set the copied optimizer's lr."""
    import copy

    ta.manual_seed(0)
    model = ta.nn.Linear(3, 2)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    s = sched.SequentialLR(opt, [sched.LinearLR(opt, 0.5, total_iters=2),
                                 sched.StepLR(opt, step_size=2, gamma=0.5)], milestones=[2])
    x = ta.randn(4, 3)

    def step(model, opt, s):
        opt.zero_grad()
        (model(x) ** 2).sum().backward()
        opt.step()
        s.step()

    step(model, opt, s)
    if together:
        model2, opt2, s2 = copy.deepcopy((model, opt, s))
    else:
        s2 = copy.deepcopy(s)
        opt2 = s2.optimizer
        model2 = ta.nn.Linear(3, 2)  # the copied parameters, in a model of their own
        model2.weight, model2.bias = opt2.params()
    assert opt2 is not opt and all(sub.optimizer is opt2 for sub in s2._schedulers)
    assert {id(p) for p in opt2.state} == {id(p) for p in opt2.params()}
    for _ in range(3):
        step(model, opt, s)
        step(model2, opt2, s2)
        assert opt2.lr == opt.lr
    for p, q in zip(model.parameters(), model2.parameters(), strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


# ---- step(epoch): torch's deprecated form, with its warning and the closed form -------------

EPOCH_CASES = [c for c in CASES if c[0] not in ("SequentialLR", "ChainedScheduler",
                                                "CosineAnnealingWarmRestarts", "OneCycleLR")]


@pytest.mark.parametrize("name,kwargs", EPOCH_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(EPOCH_CASES)])
def test_step_with_an_epoch_uses_the_closed_form_and_warns_as_torch(name, kwargs):
    """step(epoch) was a TypeError; torch sets last_epoch = epoch, takes the closed form where
    the scheduler has one (get_lr otherwise) and warns that the argument is deprecated."""
    ours, theirs = _pair(momentum=0.9)
    s, ts = _build("ours", ours, name, kwargs), _build("torch", theirs, name, kwargs)
    for epoch in (None, None, 5, None, 2, 9, None, None, 0, 12, None):
        ours.step()
        theirs.step()  # (before the scheduler's, or torch warns about the order)
        if epoch is None:
            s.step()
            ts.step()
        else:
            with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step"):
                s.step(epoch)
            with pytest.warns(UserWarning):
                ts.step(epoch)
        assert s.last_epoch == ts.last_epoch
        assert [g["lr"] for g in ours.param_groups] == pytest.approx(
            [g["lr"] for g in theirs.param_groups], rel=1e-12, abs=0), f"after step({epoch})"
        assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12, abs=0)


def test_reduce_lr_on_plateau_step_with_an_epoch_as_torch():
    ours, theirs = _pair()
    s = sched.ReduceLROnPlateau(ours, patience=1)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(theirs, patience=1)
    for metric, epoch in ((1.0, None), (1.0, 7), (1.0, None), (2.0, 3), (0.5, None)):
        ours.step()
        theirs.step()
        if epoch is None:
            s.step(metric)
            ts.step(metric)
        else:
            with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step"):
                s.step(metric, epoch)
            with pytest.warns(UserWarning):
                ts.step(metric, epoch)
        assert s.last_epoch == ts.last_epoch
        assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
