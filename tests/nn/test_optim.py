"""Optimizers against PyTorch (and a NumPy Adam), the schedule, clipping, state round trips."""

import math
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import optim


def _run(make_opt, steps=5, seed=0):
    """Parameters after `steps` updates with fixed gradient sequences (float64)."""
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal((3, 4))
    b0 = rng.standard_normal(4)
    grads = [(rng.standard_normal((3, 4)), rng.standard_normal(4)) for _ in range(steps)]
    w, b = ta.tensor(w0, requires_grad=True), ta.tensor(b0, requires_grad=True)
    opt = make_opt([w, b])
    for gw, gb in grads:
        w.grad, b.grad = ta.tensor(gw), ta.tensor(gb)
        opt.step()
    return (w0, b0, grads), (w.numpy(), b.numpy())


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("AdamW", dict(lr=0.003, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.0)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5)),
    ("SGD", dict(lr=0.1, momentum=0.5, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.3, amsgrad=True)),
    ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True, foreach=True, fused=False)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, maximize=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, maximize=True)),
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.02, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.1, maximize=True)),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict(lr=0.01)),  # 6 steps: ρ_t <= 5 throughout (the momentum step)
    ("RAdam", dict(lr=0.01, betas=(0.5, 0.5), weight_decay=0.1)),  # ρ_t > 5 from step 2
    ("RAdam", dict(lr=0.01, betas=(0.9, 0.7), weight_decay=0.1, decoupled_weight_decay=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True)),
]


@pytest.mark.parametrize("name,kwargs", CASES)
def test_matches_pytorch(name, kwargs):
    torch = pytest.importorskip("torch")
    (w0, b0, grads), ours = _run(lambda ps: getattr(optim, name)(ps, **kwargs))
    w, b = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    opt = getattr(torch.optim, name)([w, b], **kwargs)
    for gw, gb in grads:
        w.grad, b.grad = torch.tensor(gw), torch.tensor(gb)
        opt.step()
    np.testing.assert_allclose(ours[0], w.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours[1], b.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_matches_the_textbook_formula(nesterov):
    """Momentum, dampening-free buffer, weight decay and Nesterov's look-ahead, in NumPy."""
    lr, mu, wd = 0.1, 0.9, 0.01
    (w0, b0, grads), ours = _run(
        lambda ps: optim.SGD(ps, lr=lr, momentum=mu, nesterov=nesterov, weight_decay=wd))
    p, buf = w0.copy(), None
    for g, _ in grads:
        g = g + wd * p
        buf = g.copy() if buf is None else mu * buf + g
        p -= lr * (g + mu * buf if nesterov else buf)
    np.testing.assert_allclose(ours[0], p, rtol=1e-12)


def test_adam_matches_the_textbook_formula():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    (w0, b0, grads), ours = _run(lambda ps: optim.Adam(ps, lr=lr))
    p, m, v = w0.copy(), np.zeros_like(w0), np.zeros_like(w0)
    for t, (g, _) in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p -= lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    np.testing.assert_allclose(ours[0], p, rtol=1e-9)


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3)), ("Adam", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, amsgrad=True)), ("RMSprop", dict(lr=0.01)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1)), ("Adamax", dict(lr=0.01)), ("NAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01, betas=(0.5, 0.6)))])
def test_a_parameter_that_skips_steps_matches_pytorch(name, kwargs):
    """A parameter without a gradient in some steps (a frozen-then-used layer): Adam's bias
    correction counts that parameter's own steps, as torch's state["step"] does."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    grads = [rng.standard_normal(3) * (3.0 if i % 2 else 0.3) for i in range(6)]
    ours = [ta.tensor(np.ones(3), requires_grad=True) for _ in range(2)]
    theirs = [torch.ones(3, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    opt, topt = getattr(optim, name)(ours, **kwargs), getattr(torch.optim, name)(theirs, **kwargs)
    for i, g in enumerate(grads):
        ours[0].grad, theirs[0].grad = ta.tensor(g), torch.tensor(g)
        skip = i in (0, 1, 3)  # the second parameter sits out these steps
        ours[1].grad, theirs[1].grad = (None, None) if skip else (ta.tensor(-g), torch.tensor(-g))
        opt.step()
        topt.step()
    for a, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_dampening_maximize_and_amsgrad_match_the_textbook_formulas():
    """Without torch: SGD's dampened buffer, maximize's ascent and AMSGrad's running max of v."""
    lr, mu, damp = 0.1, 0.9, 0.4
    (w0, _, grads), ours = _run(lambda ps: optim.SGD(ps, lr=lr, momentum=mu, dampening=damp))
    p, buf = w0.copy(), None
    for g, _ in grads:
        buf = g.copy() if buf is None else mu * buf + (1 - damp) * g
        p -= lr * buf
    np.testing.assert_allclose(ours[0], p, rtol=1e-12)
    (w0, _, grads), ours = _run(lambda ps: optim.SGD(ps, lr=lr, maximize=True))
    np.testing.assert_allclose(ours[0], w0 + lr * sum(g for g, _ in grads), rtol=1e-12)
    b1, b2, eps = 0.9, 0.999, 1e-8
    (w0, _, grads), ours = _run(lambda ps: optim.Adam(ps, lr=lr, amsgrad=True), steps=8)
    p, m, v, v_max = w0.copy(), np.zeros_like(w0), np.zeros_like(w0), np.zeros_like(w0)
    for t, (g, _) in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        v_max = np.maximum(v_max, v)
        p -= lr * (m / (1 - b1**t)) / (np.sqrt(v_max / (1 - b2**t)) + eps)
    np.testing.assert_allclose(ours[0], p, rtol=1e-9)


def test_unknown_settings_and_values_out_of_range_are_refused_as_in_torch():
    w = [ta.zeros(2, requires_grad=True)]
    with pytest.raises(TypeError, match="Adam: unknown setting momentum; it has amsgrad, betas"):
        optim.Adam(w, momentum=0.9)  # (it would have been ignored: a silent bug)
    with pytest.raises(TypeError, match="SGD: unknown settings amsgrad, betas"):
        optim.SGD(w, lr=0.1, betas=(0.9, 0.9), amsgrad=True)
    optim.AdamW(w, fused=True, foreach=False, capturable=False)  # torch's how-to-run switches
    for name, kwargs, message in [
            ("SGD", dict(lr=-0.1), "SGD: lr must be >= 0, got -0.1"),
            ("SGD", dict(lr=0.1, momentum=-0.5), "momentum must be >= 0"),
            ("SGD", dict(lr=0.1, nesterov=True), "nesterov needs a momentum > 0 and dampening 0"),
            ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "dampening 0"),
            ("Adam", dict(betas=(1.0, 0.999)), r"Adam: betas\[0\] must be in \[0, 1\), got 1.0"),
            ("AdamW", dict(betas=(0.9, -0.1)), r"betas\[1\]"),
            ("Adam", dict(eps=-1e-8), "eps must be >= 0"),
            ("AdamW", dict(weight_decay=-0.1), "weight_decay must be >= 0"),
            ("RMSprop", dict(alpha=-0.5), "alpha must be >= 0"),
            ("Adagrad", dict(lr_decay=-1.0), "lr_decay must be >= 0"),
            ("Adagrad", dict(initial_accumulator_value=-0.1), "initial_accumulator_value must"),
            ("SGD", dict(momentum=0.9, dampening=-0.1), "dampening must be >= 0"),
            ("Adam", dict(lr=float("nan")), "lr must be >= 0, got nan"),
            ("Adam", dict(betas=(0.9,)), r"Adam: betas must be a pair \(beta1, beta2\), got"),
            ("AdamW", dict(betas=0.9), "betas must be a pair"),
            ("NAdam", dict(betas=(0.9, 0.99, 0.9)), "betas must be a pair")]:
        with pytest.raises(ValueError, match=message):
            getattr(optim, name)(w, **kwargs)
    with pytest.raises(ValueError, match="lr must be >= 0"):  # a group's own settings too
        optim.SGD([{"params": w, "lr": -1.0}], lr=0.1)


def test_amsgrad_state_and_step_counts_round_trip_through_a_checkpoint(tmp_path):
    rng = np.random.default_rng(5)
    grads = [rng.standard_normal(4) for _ in range(6)]

    def run(opt, params, gs, skip_second=()):
        for i, g in enumerate(gs):
            params[0].grad = ta.tensor(g)
            params[1].grad = None if i in skip_second else ta.tensor(2 * g)
            opt.step()

    def fresh():
        params = [ta.tensor(np.ones(4), requires_grad=True) for _ in range(2)]
        return params, optim.AdamW(params, lr=0.05, amsgrad=True)

    (a, opt) = fresh()
    run(opt, a, grads, skip_second=(0,))
    (b, opt_b) = fresh()
    run(opt_b, b, grads[:3], skip_second=(0,))
    ta.save({"opt": opt_b.state_dict()}, tmp_path / "ck.npz")
    saved = ta.load(tmp_path / "ck.npz")["opt"]
    assert saved["state"][0]["step"].item() == 3 and saved["state"][1]["step"].item() == 2
    assert "max_exp_avg_sq" in saved["state"][1]
    (c, opt_c) = fresh()
    for p, q in zip(c, b, strict=True):
        p.data[...] = q.numpy()
    opt_c.load_state_dict(saved)
    run(opt_c, c, grads[3:])
    for p, q in zip(c, a, strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_a_checkpoint_without_step_counts_per_parameter_continues_with_the_optimizers():
    """Checkpoints written before Adam kept each parameter's step count: every parameter took
    every step, so the optimizer's count stands in."""
    from old_optim_layout import old_layout  # tests/support

    rng = np.random.default_rng(6)
    grads = [rng.standard_normal(3) for _ in range(5)]

    def fresh():
        w = ta.tensor(np.ones(3), requires_grad=True)
        return w, optim.Adam([w], lr=0.1)

    w, opt = fresh()
    for g in grads:
        w.grad = ta.tensor(g)
        opt.step()
    w2, opt2 = fresh()
    for g in grads[:2]:
        w2.grad = ta.tensor(g)
        opt2.step()
    saved = old_layout("Adam", opt2.state_dict(), steps=2, with_step=False)
    assert sorted(saved["state"]) == ["0.m", "0.v"]  # as an older tinyattn wrote it
    w3, opt3 = fresh()
    w3.data[...] = w2.numpy()
    opt3.load_state_dict(saved)
    for g in grads[2:]:
        w3.grad = ta.tensor(g)
        opt3.step()
    np.testing.assert_array_equal(w3.numpy(), w.numpy())


def test_float32_parameters_stay_float32():
    w = ta.randn(3, 3, requires_grad=True)
    opt = optim.AdamW([w], lr=0.1)
    w.grad = ta.randn(3, 3)
    opt.step()
    assert w.dtype == np.float32 and opt.state[w]["exp_avg"].dtype == np.float32


def test_zero_grad_and_skipping_params_without_grad():
    w, b = ta.randn(2, requires_grad=True), ta.randn(2, requires_grad=True)
    opt = optim.SGD([w, b], lr=1.0)
    w.grad = ta.ones(2)
    before = b.numpy().copy()
    opt.step()
    np.testing.assert_array_equal(b.numpy(), before)
    opt.zero_grad()
    assert w.grad is None
    w.grad = ta.ones(2)
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(w.grad.numpy(), 0)


def test_parameter_lists_as_torch_takes_them():
    """Empty lists, a bare tensor and non-leaf tensors are refused; a frozen parameter (no
    grad) is kept and skipped, as torch; a parameter listed twice is updated once; one in two
    groups is refused; add_param_group adds a group with its own settings."""
    with pytest.raises(ValueError, match="empty"):
        optim.SGD([], lr=0.1)
    w = ta.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"SGD: params must be an iterable .* one tensor \(2,\)"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(ValueError, match="SGD: can only optimize leaf tensors"):
        optim.SGD([w * 2], lr=0.1)
    frozen = ta.ones(2)
    opt = optim.SGD([w, frozen], lr=0.1)
    (w * 3).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [0.7, 0.7])
    assert frozen.numpy().tolist() == [1.0, 1.0]
    with pytest.warns(UserWarning, match="lists a parameter twice; it is updated once"):
        twice = optim.SGD([w, w], lr=0.1)
    twice.step()
    np.testing.assert_allclose(w.detach().numpy(), [0.4, 0.4])  # one step, not two
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a plain list: no warning
        optim.SGD([w, frozen], lr=0.1)
    with pytest.raises(KeyError, match="SGD: a parameter group is a dict with a 'params'"):
        opt.add_param_group({"lr": 0.5})  # (torch's KeyError('params'))
    extra = ta.ones(3, requires_grad=True)
    opt.add_param_group({"params": extra, "lr": 0.5})
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0.0
    with pytest.raises(ValueError, match="some parameters appear in more than one"):
        opt.add_param_group({"params": [w]})


def test_settings_by_position_defaults_and_repr_as_torch():
    torch = pytest.importorskip("torch")
    w = ta.ones(2, requires_grad=True)
    cases = [(optim.SGD, torch.optim.SGD, (0.1, 0.9, 0.0, 0.01, True)),
             (optim.Adam, torch.optim.Adam, (0.1, (0.8, 0.9), 1e-6, 0.01, True)),
             (optim.RMSprop, torch.optim.RMSprop, (0.1, 0.9, 1e-6, 0.01, 0.5, True)),
             (optim.Adagrad, torch.optim.Adagrad, (0.1, 0.01, 0.01, 0.1, 1e-9)),
             (optim.Adamax, torch.optim.Adamax, (0.1, (0.8, 0.9), 1e-6, 0.01)),
             (optim.NAdam, torch.optim.NAdam, (0.1, (0.8, 0.9), 1e-6, 0.01, 0.01, True)),
             (optim.RAdam, torch.optim.RAdam, (0.1, (0.8, 0.9), 1e-6, 0.01, True)),
             (optim.Adamax, torch.optim.Adamax, ()), (optim.NAdam, torch.optim.NAdam, ()),
             (optim.RAdam, torch.optim.RAdam, ())]
    for ours, theirs, args in cases:
        o, t = ours([w], *args), theirs([torch.ones(2, requires_grad=True)], *args)
        for key, value in o.defaults.items():
            assert t.defaults[key] == value, (ours.__name__, key)
        assert repr(o).splitlines()[:2] == repr(t).splitlines()[:2]
    opt = optim.SGD([{"params": [w]}, {"params": [ta.ones(1, requires_grad=True)], "lr": 0.5}],
                    lr=0.1)
    assert repr(opt).splitlines() == [
        "SGD (", "Parameter Group 0", "    dampening: 0.0", "    differentiable: False",
        "    foreach: None", "    fused: None", "    lr: 0.1", "    maximize: False",
        "    momentum: 0.0", "    nesterov: False", "    weight_decay: 0.0", "",
        "Parameter Group 1", "    dampening: 0.0", "    differentiable: False",
        "    foreach: None", "    fused: None", "    lr: 0.5", "    maximize: False",
        "    momentum: 0.0", "    nesterov: False", "    weight_decay: 0.0", ")"]
    theirs = torch.optim.SGD([{"params": [torch.ones(2, requires_grad=True)]},
                              {"params": [torch.ones(1, requires_grad=True)], "lr": 0.5}],
                             lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0)
    assert repr(opt) == repr(theirs)
    with pytest.raises(TypeError, match="SGD: got two values for lr"):
        optim.SGD([w], 0.1, lr=0.2)
    with pytest.raises(TypeError, match=r"Adagrad: takes at most 5 settings by position"):
        optim.Adagrad([w], 0.1, 0, 0, 0, 1e-9, 1)


def test_adam_with_decoupled_weight_decay_is_adamw_as_in_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    start, grads = rng.standard_normal(4), rng.standard_normal((3, 4))
    w, tw = ta.tensor(start.copy(), requires_grad=True), torch.tensor(start.copy(),
                                                                     requires_grad=True)
    opt = optim.Adam([w], lr=0.1, weight_decay=0.3, decoupled_weight_decay=True)
    topt = torch.optim.Adam([tw], lr=0.1, weight_decay=0.3, decoupled_weight_decay=True)
    for g in grads:
        w.grad, tw.grad = ta.tensor(g.copy()), torch.tensor(g.copy())
        opt.step()
        topt.step()
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-12)


def test_cosine_schedule_with_warmup():
    w = ta.zeros(1, requires_grad=True)
    opt = optim.AdamW([w], lr=1.0)
    sched = optim.CosineSchedule(opt, total=110, warmup=10, min_ratio=0.1)
    lrs = [opt.lr]
    for _ in range(115):
        sched.step()
        lrs.append(opt.lr)
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[10] == pytest.approx(1.0)
    assert lrs[60] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lrs[110] == pytest.approx(0.1) and lrs[115] == pytest.approx(0.1)
    # decays monotonically
    assert all(a >= b - 1e-12 for a, b in zip(lrs[10:], lrs[11:], strict=False))


def test_clip_grad_norm():
    a, b = ta.zeros(3, requires_grad=True), ta.zeros(4, requires_grad=True)
    a.grad, b.grad = ta.tensor([3.0, 0.0, 0.0]), ta.tensor([0.0, 4.0, 0.0, 0.0])
    norm = optim.clip_grad_norm([a, b], 1.0)
    assert norm == pytest.approx(5.0)
    total = np.sqrt((a.grad.numpy() ** 2).sum() + (b.grad.numpy() ** 2).sum())
    assert total == pytest.approx(1.0, rel=1e-5)
    assert optim.clip_grad_norm([a, b], 10.0) == pytest.approx(1.0, rel=1e-5)  # no change


@pytest.mark.parametrize("name", ["AdamW", "Adamax", "NAdam", "RAdam"])
def test_state_dict_round_trip_continues_identically(name, tmp_path):
    """Three steps, a checkpoint, three more: the same parameters as six steps in a row."""
    def make(params):
        return getattr(optim, name)(params, lr=0.01, weight_decay=0.05)

    rng = np.random.default_rng(3)
    grads = [rng.standard_normal(5).astype(np.float32) for _ in range(6)]
    w = ta.tensor(np.ones(5, dtype=np.float32), requires_grad=True)
    opt = make([w])
    for g in grads:
        w.grad = ta.tensor(g)
        opt.step()
    w2 = ta.tensor(np.ones(5, dtype=np.float32), requires_grad=True)
    opt2 = make([w2])
    for g in grads[:3]:
        w2.grad = ta.tensor(g)
        opt2.step()
    ta.save({"w": w2, "opt": opt2.state_dict()}, tmp_path / "ck.npz")
    ck = ta.load(tmp_path / "ck.npz")
    w3 = ta.tensor(ck["w"].numpy(), requires_grad=True)
    opt3 = make([w3])
    opt3.load_state_dict(ck["opt"])
    for g in grads[3:]:
        w3.grad = ta.tensor(g)
        opt3.step()
    np.testing.assert_array_equal(w3.numpy(), w.numpy())


def test_load_state_dict_rejects_a_mismatch():
    opt = optim.Adam([ta.zeros(3, requires_grad=True)], lr=0.1)
    with pytest.raises(ta.CheckpointError, match="does not match"):
        opt.load_state_dict({"steps": 1, "groups": [{"lr": 0.1}],
                             "state": {"0.m": np.zeros(4)}})


RESUMED = [("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
           ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
           ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)), ("Adagrad", dict(lr=0.1)),
           ("Adamax", dict(lr=0.01)), ("NAdam", dict(lr=0.01)), ("RAdam", dict(lr=0.01)),
           ("Adadelta", dict(lr=0.5, weight_decay=0.01))]

EVERY_OPTIMIZER = RESUMED + [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                             ("NAdam", dict(lr=0.01, weight_decay=0.1,
                                            decoupled_weight_decay=True)),
                             ("RMSprop", dict(lr=0.01))]


@pytest.mark.parametrize("name,kwargs", EVERY_OPTIMIZER)
def test_every_optimizer_steps_float16_weights_in_float32(name, kwargs):
    """A float16 weight with a zero or tiny gradient (g² below float16's 6e-8, eps 1e-8 or
    1e-10 rounding to 0 there) stayed put no more: √v + eps was 0 and the step inf or NaN
    (RMSprop, Adagrad, Adamax, NAdam). Every optimizer steps a float16 weight as it steps its
    float32 copy, rounded after each step, and keeps its state in float32."""
    grads = [np.array([1e-4, 0.0, 1.0, -3e-5, 2.0], np.float16) * (i + 1) for i in range(4)]
    start = np.array([1.0, -1.0, 0.5, 2.0, -0.25], np.float16)
    w16 = ta.nn.Parameter(ta.tensor(start))
    w32 = ta.nn.Parameter(ta.tensor(start.astype(np.float32)))
    opt16 = getattr(optim, name)([w16], **kwargs)
    opt32 = getattr(optim, name)([w32], **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a division by zero or an invalid value is a failure
        for g in grads:
            w16.grad, w32.grad = ta.tensor(g), ta.tensor(g.astype(np.float32))
            opt16.step()
            opt32.step()
            w32._data[...] = w32._data.astype(np.float16)  # what the float16 weight keeps
    assert w16.dtype == np.float16
    if not kwargs.get("weight_decay", 0.01 if name == "AdamW" else 0):
        assert w16.numpy()[1] == start[1]  # a zero gradient: only weight decay would move it
    np.testing.assert_array_equal(w16.numpy(), w32.numpy().astype(np.float16))
    assert all(v.dtype == np.float32 for entry in opt16.state_dict()["state"].values()
               for v in entry.values())


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("name,kwargs", RESUMED)
def test_a_run_resumed_from_a_checkpoint_takes_the_same_steps_to_the_bit(name, kwargs, dtype,
                                                                         tmp_path):
    """Three steps, ta.save, ta.load into fresh parameters and optimizer, three more: the same
    bits as six in a row. Adam keeps float32 moments for float16 weights, and loading must keep
    them so (cast to float16, g² of these small gradients is 0 and the next step -inf)."""
    rng = np.random.default_rng(7)
    start = rng.standard_normal(6).astype(dtype)
    grads = [(rng.standard_normal(6) * 1e-3).astype(dtype) for _ in range(6)]

    def steps(w, opt, gs):
        for g in gs:
            w.grad = ta.tensor(g)
            opt.step()

    w = ta.nn.Parameter(ta.tensor(start))
    opt = getattr(optim, name)([w], **kwargs)
    steps(w, opt, grads)
    w2 = ta.nn.Parameter(ta.tensor(start))
    opt2 = getattr(optim, name)([w2], **kwargs)
    steps(w2, opt2, grads[:3])
    ta.save({"w": w2, "opt": opt2.state_dict()}, tmp_path / "ck.npz")
    ck = ta.load(tmp_path / "ck.npz")
    w3 = ta.nn.Parameter(ck["w"])
    opt3 = getattr(optim, name)([w3], lr=0.5)  # the checkpoint's settings win
    opt3.load_state_dict(ck["opt"])
    assert {k: v.dtype for k, v in opt3.state[w3].items()} == {
        k: v.dtype for k, v in opt2.state[w2].items()} != {}
    steps(w3, opt3, grads[3:])
    assert w3.dtype == np.dtype(dtype) and np.isfinite(w3.numpy()).all()
    np.testing.assert_array_equal(w3.numpy(), w.numpy())
    # loading copies: stepping on does not write into the dict it was loaded from
    saved = opt.state_dict()
    before = {k: v.numpy().copy() for k, v in saved["state"][0].items()}
    opt4 = getattr(optim, name)([ta.nn.Parameter(ta.tensor(start))], **kwargs)
    opt4.load_state_dict(saved)
    steps(opt4.params()[0], opt4, grads[:1])
    for k, v in saved["state"][0].items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_on_cupy_a_model_moved_with_its_gradients_resumes_float16_adamw_to_the_bit(monkeypatch):
    """The same resume on the "cupy" backend (tests/support/fake_cupy.py): .to("cuda") keeps
    the gradients (moved with their parameters), and the state loads as float32 there too."""
    import fake_cupy  # tests/support

    fake_cupy.install(monkeypatch, kernels=False)
    grads = [np.full(4, 1e-3 * (i + 1), np.float16) for i in range(4)]

    def run(resume_at=None):
        model = ta.nn.Linear(4, 1, bias=False).half()
        model.weight.data[...] = 1.0
        opt = optim.AdamW(model.parameters())
        for i, g in enumerate(grads):
            model.weight.grad = ta.tensor(g.reshape(1, 4), device=model.weight.backend.name)
            if i == 0:
                model.to("cuda")  # between backward and step: the gradient comes along
                assert model.weight.grad.backend.name == "cupy"
            if i == resume_at:
                saved = opt.state_dict()
                opt = optim.AdamW(model.parameters())
                opt.load_state_dict(saved)
                assert opt.state[model.weight]["exp_avg_sq"].dtype == np.float32
            opt.step()
        return model.weight.numpy()

    np.testing.assert_array_equal(run(resume_at=2), run())
    assert np.isfinite(run(resume_at=2)).all()


def test_load_state_dict_refuses_state_it_cannot_read_and_changes_nothing():
    w = ta.nn.Parameter(ta.ones(3))
    opt = optim.Adam([w], lr=0.1)
    for state, message in [({"0.m": np.array(["a", "b", "c"])}, "state 0.m is not a number"),
                           ({"x.m": np.zeros(3)}, "state x.m does not match"),
                           ({"-1.m": np.zeros(3)}, "state -1.m does not match"),
                           ({"0": np.zeros(3)}, "state 0 does not match")]:
        with pytest.raises(ta.CheckpointError, match=f"Adam.load_state_dict: {message}"):
            opt.load_state_dict({"steps": 4, "groups": [{"lr": 0.5}], "state": state})
        assert opt.lr == 0.1 and opt.steps == 0 and opt.state == {}


def test_adamw_on_float16_weights_keeps_float32_moments_and_stays_finite():
    """g² underflows float16 and eps = 1e-8 is 0 there: the moments must be float32."""
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(11, 16, 2, 1, max_len=6).to(ta.float16)
    opt = ta.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    ids = ta.tensor(np.arange(12).reshape(2, 6) % 11)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = ta.functional.cross_entropy(model(ids).reshape(-1, 11), ids.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    for p in model.parameters():
        assert p.dtype == np.float16 and np.isfinite(p.numpy()).all()
    state = opt.state_dict()["state"]
    moments = [v for entry in state.values() for k, v in entry.items() if k != "step"]
    assert moments and all(a.dtype == np.float32 for a in moments)
    assert losses[-1] < losses[0]


def test_the_newer_adams_refuse_settings_out_of_range():
    w = ta.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="NAdam: momentum_decay must be >= 0, got -0.1"):
        optim.NAdam([w], momentum_decay=-0.1)
    with pytest.raises(ValueError, match=r"RAdam: betas\[1\] must be in \[0, 1\), got 1.0"):
        optim.RAdam([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Adamax: eps must be >= 0"):
        optim.Adamax([w], eps=-1.0)


@pytest.mark.parametrize("betas", [(0.9, 0.9), (0.5, 0.95), (0.0, 0.9)])
def test_radam_rectifies_once_the_variance_estimate_is_old_enough_as_torch(betas):
    """With β₂ = 0.9, ρ_t passes 5 at step 6 (5.4): the first steps are plain momentum steps,
    the later ones rectified; 12 steps cover both, against torch."""
    torch = pytest.importorskip("torch")
    kwargs = dict(lr=0.05, betas=betas, weight_decay=0.01)
    (w0, b0, grads), ours = _run(lambda ps: optim.RAdam(ps, **kwargs), steps=12)
    w, b = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    opt = torch.optim.RAdam([w, b], **kwargs)
    for gw, gb in grads:
        w.grad, b.grad = torch.tensor(gw), torch.tensor(gb)
        opt.step()
    np.testing.assert_allclose(ours[0], w.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours[1], b.detach().numpy(), rtol=1e-10, atol=1e-12)
    rho_inf = 2 / (1 - betas[1]) - 1
    rho = [rho_inf - 2 * t * betas[1] ** t / (1 - betas[1] ** t) for t in range(1, 13)]
    assert rho[4] < 5 < rho[5] <= 6 or betas[1] != 0.9  # (the switch this test is about)


def test_the_newer_adams_keep_the_state_they_need():
    w = ta.ones(2, requires_grad=True)
    for name, keys in [("Adamax", {"exp_avg", "exp_inf", "step"}),
                       ("NAdam", {"exp_avg", "exp_avg_sq", "step", "mu_product"}),
                       ("RAdam", {"exp_avg", "exp_avg_sq", "step"})]:
        opt = getattr(optim, name)([w])
        w.grad = ta.ones(2)
        opt.step()
        assert set(opt.state[w]) == keys, name
    optim.Adam([w], betas=(0.0, 0.9))  # β = 0 is allowed, as in torch


# ---- copies of an optimizer, and state dicts that do not fit --------------------------------


def _model_and_adam(seed=0):
    ta.manual_seed(seed)
    model = ta.nn.Sequential(ta.nn.Linear(3, 4), ta.nn.Linear(4, 2))
    return model, optim.Adam(model.parameters(), lr=0.1, amsgrad=True)


def _step(model, opt, x):
    opt.zero_grad()
    (model(x) ** 2).sum().backward()
    opt.step()


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_model_and_optimizer_keep_the_state_on_the_copied_parameters(how):
    """The state is keyed by the parameter: a copy must key it by the copies (as torch's
    state follows its copied parameters), or the copy steps from fresh moments."""
    import copy
    import pickle

    copier = copy.deepcopy if how == "deepcopy" else (lambda o: pickle.loads(pickle.dumps(o)))
    model, opt = _model_and_adam()
    x = ta.randn(5, 3)
    _step(model, opt, x)
    model2, opt2 = copier((model, opt))
    params2 = list(model2.parameters())
    assert all(a is b for a, b in zip(opt2.params(), params2, strict=True))
    assert {id(p) for p in opt2.state} == {id(p) for p in params2}  # none for the originals
    for p, q in zip(model.parameters(), params2, strict=True):
        assert list(opt2.state[q]) == list(opt.state[p]) == ["step", "exp_avg", "exp_avg_sq",
                                                             "max_exp_avg_sq"]
        for k, v in opt.state[p].items():
            assert opt2.state[q][k] is not v and opt2.state[q][k]._data is not v._data  # copies
            assert opt2.state[q][k].dtype == v.dtype
            np.testing.assert_array_equal(opt2.state[q][k].numpy(), v.numpy())
    for _ in range(2):
        _step(model, opt, x)
        _step(model2, opt2, x)
    for p, q in zip(model.parameters(), model2.parameters(), strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    alone = copier(opt)  # an optimizer alone: its parameters are copied with it
    assert all(a is not b for a, b in zip(alone.params(), opt.params(), strict=True))
    assert {id(p) for p in alone.state} == {id(p) for p in alone.params()}
    assert alone.state_dict()["state"].keys() == opt.state_dict()["state"].keys()


def test_a_copied_model_and_optimizer_step_as_torchs_copies_do():
    torch = pytest.importorskip("torch")
    import copy

    model, opt = _model_and_adam()
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)).double()
    model.to(np.float64)
    with torch.no_grad():
        for p, q in zip(model.parameters(), theirs.parameters(), strict=True):
            q.copy_(torch.from_numpy(p.numpy()))
    their_opt = torch.optim.Adam(theirs.parameters(), lr=0.1, amsgrad=True)
    x = np.random.default_rng(0).standard_normal((5, 3))
    _step(model, opt, ta.tensor(x))
    their_opt.zero_grad()
    (theirs(torch.from_numpy(x)) ** 2).sum().backward()
    their_opt.step()
    model2, opt2 = copy.deepcopy((model, opt))
    theirs2, their_opt2 = copy.deepcopy((theirs, their_opt))
    for _ in range(3):
        _step(model2, opt2, ta.tensor(x))
        their_opt2.zero_grad()
        (theirs2(torch.from_numpy(x)) ** 2).sum().backward()
        their_opt2.step()
    for p, q in zip(model2.parameters(), theirs2.parameters(), strict=True):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_state_dict_keeps_each_groups_parameter_indices_as_torchs():
    model, _ = _model_and_adam()
    layers = list(model.parameters())
    opt = optim.SGD([{"params": layers[:2]}, {"params": layers[2:], "lr": 0.5}], lr=0.01)
    assert [g["params"] for g in opt.state_dict()["param_groups"]] == [[0, 1], [2, 3]]
    assert opt.param_groups[0]["params"] == layers[:2]  # (the groups themselves keep tensors)


def test_load_state_dict_gives_a_setting_saved_as_a_list_back_as_a_tuple():
    """betas read back as a list (from JSON, say) load as the tuple the constructor keeps: the
    optimizer then prints (and saves) as the one saved."""
    p = ta.nn.Linear(2, 2)
    saved = optim.Adam(p.parameters(), lr=0.1, betas=(0.8, 0.9))
    sd = saved.state_dict()
    sd["param_groups"] = [{**g, "betas": list(g["betas"])} for g in sd["param_groups"]]
    opt = optim.Adam(p.parameters(), lr=0.1)
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["betas"] == (0.8, 0.9)  # (a list is never equal to a tuple)
    assert repr(opt) == repr(saved)


def test_load_state_dict_refuses_groups_of_another_size_or_split_as_torch():
    torch = pytest.importorskip("torch")
    model, opt = _model_and_adam()
    _step(model, opt, ta.randn(2, 3))
    saved = opt.state_dict()
    bigger = ta.nn.Sequential(ta.nn.Linear(3, 4), ta.nn.Linear(4, 2), ta.nn.Linear(2, 2))
    for other in (optim.Adam(bigger.parameters(), lr=0.1),
                  optim.Adam(list(model.parameters())[:2], lr=0.1)):
        with pytest.raises(ValueError, match="doesn't match the size of optimizer's group") as e:
            other.load_state_dict(saved)
        assert isinstance(e.value, ta.CheckpointError) and other.state == {}
        message = str(e.value)
        assert message.startswith("Adam.load_state_dict: ")
        assert "group 0 has 4 parameters in the checkpoint" in message
    p = list(model.parameters())
    one = optim.SGD([{"params": p[:2]}, {"params": p[2:], "lr": 0.5}], lr=0.01)
    other = optim.SGD([{"params": p[:1]}, {"params": p[1:], "lr": 0.5}], lr=0.01)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        other.load_state_dict(one.state_dict())
    assert [g["lr"] for g in other.param_groups] == [0.01, 0.5]  # nothing changed
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.SGD(p, lr=0.01).load_state_dict(one.state_dict())
    # torch refuses the same two
    tp = [torch.zeros(2, requires_grad=True) for _ in range(4)]
    t_one = torch.optim.SGD([{"params": tp[:2]}, {"params": tp[2:], "lr": 0.5}], lr=0.01)
    t_other = torch.optim.SGD([{"params": tp[:1]}, {"params": tp[1:], "lr": 0.5}], lr=0.01)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        t_other.load_state_dict(t_one.state_dict())
    with pytest.raises(ValueError, match="different number of parameter groups"):
        torch.optim.SGD(tp, lr=0.01).load_state_dict(t_one.state_dict())


def test_a_checkpoint_from_before_the_group_indices_loads_into_a_matching_optimizer(tmp_path):
    model, opt = _model_and_adam()
    x = ta.randn(2, 3)
    _step(model, opt, x)
    from old_optim_layout import old_layout  # tests/support

    saved = old_layout("Adam", opt.state_dict(), steps=1)
    for group in saved["groups"]:
        del group["params"]  # as a still older tinyattn wrote it
    ta.save({"opt": saved}, tmp_path / "old.npz")
    model2, opt2 = _model_and_adam()
    model2.load_state_dict(model.state_dict())
    opt2.load_state_dict(ta.load(tmp_path / "old.npz")["opt"])
    _step(model, opt, x)
    _step(model2, opt2, x)
    for p, q in zip(model.parameters(), model2.parameters(), strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_load_state_dict_takes_torchs_layout_and_names_the_keys_it_needs():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    w0, grads = rng.standard_normal((3, 4)), [rng.standard_normal((3, 4)) for _ in range(4)]
    for name, kwargs in [("Adam", dict(lr=0.1, amsgrad=True)), ("SGD", dict(lr=0.1,
                                                                            momentum=0.9)),
                         ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
                         ("Adamax", dict(lr=0.01)), ("NAdam", dict(lr=0.01)),
                         ("RAdam", dict(lr=0.01)), ("Adagrad", dict(lr=0.1))]:
        tw = torch.tensor(w0, requires_grad=True)
        topt = getattr(torch.optim, name)([tw], **kwargs)
        for g in grads[:2]:
            tw.grad = torch.tensor(g)
            topt.step()
        w = ta.tensor(tw.detach().numpy().copy(), requires_grad=True)
        opt = getattr(optim, name)([w], **kwargs)
        opt.load_state_dict(topt.state_dict())
        for g in grads[2:]:
            tw.grad = torch.tensor(g)
            topt.step()
            w.grad = ta.tensor(g)
            opt.step()
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-12, atol=1e-12,
                                   err_msg=name)
    opt = optim.Adam([ta.zeros(2, requires_grad=True)])
    for bad in ({"state": {}}, {"groups": []}, {"lr": 0.1}):
        with pytest.raises(ta.CheckpointError, match=r"Adam.load_state_dict: .*'groups'.*"
                           r"'state'.*'param_groups'"):
            opt.load_state_dict(bad)
    with pytest.raises(TypeError, match="Adam.load_state_dict: expected a state dict"):
        opt.load_state_dict([("state", {})])


# ---- torch's state dict layout, and state keyed by the parameter ----------------------------

TORCH_LAYOUT = [
    ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01, maximize=True)),
    ("Adam", dict(lr=0.01)), ("Adam", dict(lr=0.01, amsgrad=True, foreach=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)), ("AdamW", dict(lr=0.01, amsgrad=True)),
    ("RMSprop", dict(lr=0.01)), ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.1)),
    ("Adamax", dict(lr=0.01, weight_decay=0.1)), ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01, betas=(0.5, 0.6))),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1))]


def _grads_for(starts, steps, seed=12):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s.shape).astype(s.dtype) for s in starts] for _ in range(steps)]


def _both(name, kwargs, steps=3, dtype=np.float64):
    """Ours and torch's optimizer `name` over the same three parameters after `steps` steps:
    the second sits out the first step, the third never has a gradient (no state yet)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    starts = [rng.standard_normal(s).astype(dtype) for s in [(3, 4), (4,), (2,)]]
    ours = [ta.nn.Parameter(ta.tensor(s.copy())) for s in starts]
    theirs = [torch.nn.Parameter(torch.tensor(s.copy())) for s in starts]
    opt = getattr(optim, name)(ours, **kwargs)
    topt = getattr(torch.optim, name)(theirs, **kwargs)
    for i, gs in enumerate(_grads_for(starts, steps)):
        for k, g in enumerate(gs[:2]):
            skip = k == 1 and i == 0
            ours[k].grad = None if skip else ta.tensor(g)
            theirs[k].grad = None if skip else torch.tensor(g)
        opt.step()
        topt.step()
    return (ours, opt), (theirs, topt)


def _torch_dtype_name(t):
    return str(t.dtype).removeprefix("torch.")


@pytest.mark.parametrize("name,kwargs", TORCH_LAYOUT)
def test_state_dict_has_torchs_layout_names_and_values(name, kwargs):
    """{"state": {position: {torch's state names: tensors}}, "param_groups": [settings, torch's
    how-to-run switches, "params" positions]}, key for key and value for value as torch's,
    the step a float32 0-d tensor as torch keeps it."""
    (ours, opt), (theirs, topt) = _both(name, kwargs)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert list(sd) == list(tsd) == ["state", "param_groups"]
    assert sd["param_groups"] == tsd["param_groups"]
    assert [list(g) for g in sd["param_groups"]] == [list(g) for g in tsd["param_groups"]]
    assert sorted(sd["state"]) == sorted(tsd["state"])
    assert all(type(i) is int for i in sd["state"])
    for i, entry in tsd["state"].items():
        assert sorted(sd["state"][i]) == sorted(entry), (name, i)
        for key, want in entry.items():
            got = sd["state"][i][key]
            assert isinstance(got, ta.Tensor) and not got.requires_grad, (name, key)
            assert (got.shape, str(got.dtype)) == (tuple(want.shape), _torch_dtype_name(want))
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=f"{name} state[{i}][{key!r}]")


@pytest.mark.parametrize("name,kwargs", TORCH_LAYOUT)
def test_state_is_keyed_by_the_parameter_with_torchs_state_names(name, kwargs):
    import collections

    (ours, opt), (theirs, topt) = _both(name, kwargs)
    assert isinstance(opt.state, collections.defaultdict)
    for p, q in zip(ours, theirs, strict=True):
        assert sorted(opt.state[p]) == sorted(topt.state[q]), name
    if name != "Adagrad":  # (torch's Adagrad makes every parameter's state up front)
        assert opt.state[ours[2]] == {}  # no gradient yet: no state, as torch's defaultdict
    assert opt.state[ta.zeros(1)] == {}
    # the state dict's tensors are the state itself, as torch's
    sd = opt.state_dict()
    for i, p in enumerate(ours[:2]):
        assert all(sd["state"][i][k] is v for k, v in opt.state[p].items())


def _to_torch(saved):
    import copy

    torch = pytest.importorskip("torch")
    return {"state": {i: {k: torch.from_numpy(v.numpy().copy()) for k, v in entry.items()}
                      for i, entry in saved["state"].items()},
            "param_groups": copy.deepcopy(saved["param_groups"])}


@pytest.mark.parametrize("name,kwargs", TORCH_LAYOUT)
def test_ours_loads_into_torchs_and_torchs_into_ours_then_they_step_alike(name, kwargs):
    torch = pytest.importorskip("torch")
    (ours, opt), (theirs, topt) = _both(name, kwargs)
    # ours into a fresh torch optimizer over our weights, torch's into a fresh one of ours
    theirs2 = [torch.nn.Parameter(torch.tensor(p.numpy().copy())) for p in ours]
    topt2 = getattr(torch.optim, name)(theirs2, lr=0.5)  # (the state dict's settings win)
    topt2.load_state_dict(_to_torch(opt.state_dict()))
    ours2 = [ta.nn.Parameter(ta.tensor(q.detach().numpy().copy())) for q in theirs]
    opt2 = getattr(optim, name)(ours2, lr=0.5)
    opt2.load_state_dict(topt.state_dict())
    assert opt2.param_groups[0]["lr"] == topt2.param_groups[0]["lr"] == kwargs["lr"]
    for gs in _grads_for([p.numpy() for p in ours], 3, seed=13):
        for a, b, c, d, g in zip(ours, theirs, ours2, theirs2, gs, strict=True):
            a.grad, c.grad = ta.tensor(g), ta.tensor(g)
            b.grad, d.grad = torch.tensor(g), torch.tensor(g)
        for o in (opt, topt, opt2, topt2):
            o.step()
    for a, b, c, d in zip(ours, theirs, ours2, theirs2, strict=True):
        for x, y in ((a, d), (c, b), (a, b)):
            # (torch's load casts NAdam's float32 mu_product to the parameter's float64, its own
            # state dicts too: from there its products round otherwise)
            rtol = 1e-8 if name == "NAdam" and y is d else 1e-10
            np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=rtol,
                                       atol=1e-12, err_msg=name)
    sd, tsd = opt2.state_dict(), topt.state_dict()
    assert sorted(sd["state"]) == sorted(tsd["state"])
    for i in tsd["state"]:
        assert sorted(sd["state"][i]) == sorted(tsd["state"][i])
        assert str(sd["state"][i].get("step", ta.zeros(1)).dtype) == "float32" or \
            "step" not in tsd["state"][i]


OLD_LAYOUT = [("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
              ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
              ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
              ("Adagrad", dict(lr=0.1, lr_decay=0.1)), ("Adamax", dict(lr=0.01)),
              ("NAdam", dict(lr=0.01)), ("RAdam", dict(lr=0.01, betas=(0.5, 0.6)))]


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("name,kwargs", OLD_LAYOUT)
def test_a_state_dict_in_tinyattns_old_layout_still_loads(name, kwargs, dtype, tmp_path):
    """Checkpoints written before the state dict followed torch's ({"steps", "groups",
    "state": {"0.m": ...}}, Adam's m and v, SGD's momentum...) load, through ta.save and
    ta.load, and the run goes on to the bit as one never interrupted."""
    from old_optim_layout import old_layout  # tests/support

    rng = np.random.default_rng(9)
    starts = [rng.standard_normal(s).astype(dtype) for s in [(2, 3), (3,)]]
    grads = [[(rng.standard_normal(s.shape) * 1e-2).astype(dtype) for s in starts]
             for _ in range(6)]

    def fresh():
        ps = [ta.nn.Parameter(ta.tensor(s.copy())) for s in starts]
        return ps, getattr(optim, name)(ps, **kwargs)

    def steps(ps, opt, which):
        for i in which:
            ps[0].grad = ta.tensor(grads[i][0])
            ps[1].grad = None if i == 0 else ta.tensor(grads[i][1])  # sits out the first
            opt.step()

    whole, opt = fresh()
    steps(whole, opt, range(6))
    part, opt = fresh()
    steps(part, opt, range(3))
    for with_step in (True, False) if name in ("Adam", "AdamW") else (True,):
        old = old_layout(name, opt.state_dict(), steps=3, with_step=with_step)
        assert any(k.startswith("0.") for k in old["state"]) or name == "SGD" and not old
        ta.save({"opt": old}, tmp_path / "old.npz")
        resumed, opt2 = fresh()
        for p, q in zip(resumed, part, strict=True):
            p.data[...] = q.numpy()
        opt2.load_state_dict(ta.load(tmp_path / "old.npz")["opt"])
        assert sorted(opt2.state[resumed[0]]) == sorted(opt.state[part[0]])
        for k, v in opt.state[part[0]].items():
            assert opt2.state[resumed[0]][k].dtype == v.dtype, k
        if not with_step:  # (still older: every parameter counted the optimizer's steps)
            assert [opt2.state[p]["step"].item() for p in resumed] == [3.0, 3.0]
        steps(resumed, opt2, range(3, 6))
        # (without its own count, the parameter that sat out a step is corrected for 3 steps,
        # as those versions did: only the other takes the same steps as the uninterrupted run)
        for p, q in zip(resumed[:2 if with_step else 1], whole, strict=False):
            np.testing.assert_array_equal(p.numpy(), q.numpy(), f"{name}, step {with_step}")


def test_the_new_layout_round_trips_through_save_and_load(tmp_path):
    """Positions as int keys, tensors as tensors, settings as they were (betas a tuple)."""
    import io

    (ours, opt), _ = _both("AdamW", dict(lr=0.01, amsgrad=True))
    saved = opt.state_dict()
    buf = io.BytesIO()
    ta.save({"optim": saved}, buf)
    ta.save(saved, tmp_path / "opt.npz")
    for back in (ta.load(io.BytesIO(buf.getvalue()))["optim"], ta.load(tmp_path / "opt.npz")):
        assert back["param_groups"] == saved["param_groups"]
        assert isinstance(back["param_groups"][0]["betas"], tuple)
        assert list(back["state"]) == list(saved["state"]) == [0, 1]
        for i, entry in saved["state"].items():
            assert list(back["state"][i]) == list(entry)
            for k, v in entry.items():
                got = back["state"][i][k]
                assert isinstance(got, ta.Tensor) and got.dtype == v.dtype, k
                np.testing.assert_array_equal(got.numpy(), v.numpy())
        fresh = [ta.nn.Parameter(ta.tensor(p.numpy().copy())) for p in ours]
        opt2 = optim.AdamW(fresh, lr=0.5)
        opt2.load_state_dict(back)
        assert opt2.lr == 0.01
        for k, v in opt.state[ours[0]].items():  # loaded as copies, not the file's tensors
            np.testing.assert_array_equal(opt2.state[fresh[0]][k].numpy(), v.numpy())
            assert opt2.state[fresh[0]][k] is not back["state"][0][k]


def test_the_how_to_run_switches_are_torchs_for_each_optimizer():
    """foreach, fused, capturable, differentiable: each optimizer takes the ones torch's takes
    (in its param_groups, as torch's), the others are a TypeError as in torch."""
    torch = pytest.importorskip("torch")
    w = [ta.zeros(2, requires_grad=True)]
    tw = [torch.zeros(2, requires_grad=True)]
    for name in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"):
        ours, theirs = getattr(optim, name)(w), getattr(torch.optim, name)(tw)
        assert {k: v for k, v in ours.param_groups[0].items() if k != "params"} == \
            {k: v for k, v in theirs.param_groups[0].items() if k != "params"}, name
        assert ours.defaults == theirs.defaults, name
        for switch in ("fused", "capturable"):
            if switch not in theirs.defaults:
                with pytest.raises(TypeError):
                    getattr(torch.optim, name)(tw, **{switch: False})
                with pytest.raises(TypeError, match=f"{name}: unknown setting {switch}"):
                    getattr(optim, name)(w, **{switch: False})
        assert getattr(optim, name)(w, foreach=True).param_groups[0]["foreach"] is True
    with pytest.raises(ValueError, match="Adam: differentiable=True .* not supported"):
        optim.Adam(w, differentiable=True)


def test_a_state_dict_in_torchs_layout_that_does_not_fit_is_refused_and_changes_nothing():
    w = ta.nn.Parameter(ta.ones(3))
    opt = optim.Adam([w], lr=0.1)
    groups = [{"lr": 0.5, "params": [0]}]
    for state, message in [
            ({0: {"step": ta.tensor(float("inf"))}}, r"state \[0\]\['step'\] \(a step count\) "
                                                     "is not a number"),
            ({0: {"exp_avg": np.zeros(())}}, r"state \[0\]\['exp_avg'\] does not match this "
                                             r"optimizer's parameters: shape \(\), the "
                                             r"parameter's \(3,\)"),
            ({0: {"exp_avg": np.zeros(4)}}, r"state \[0\]\['exp_avg'\] does not match"),
            ({0: {"step": np.zeros(2)}}, r"state \[0\]\['step'\] .* is not a number"),
            ({"x": {"step": 1}}, r"state \['x'\]\['step'\] does not match"),
            ({1: {"step": 1}}, r"state \[1\]\['step'\] does not match"),
            ({True: {"step": 1}}, r"state \[True\]\['step'\] does not match"),
            ({0: [1.0]}, r"state \[0\] is list, not a dict"),
            ({0: {"exp_avg": np.array(["a", "b", "c"])}}, r"state \[0\]\['exp_avg'\] is not a "
                                                          "number array")]:
        with pytest.raises(ta.CheckpointError, match=f"Adam.load_state_dict: {message}"):
            opt.load_state_dict({"state": state, "param_groups": groups})
        assert opt.lr == 0.1 and opt.state == {}
    # positions as strings of digits (a layout that went through JSON) are positions
    w.grad = ta.ones(3)
    opt.step()
    text = {"state": {str(i): {k: v.numpy().tolist() for k, v in entry.items()}
                      for i, entry in opt.state_dict()["state"].items()},
            "param_groups": opt.state_dict()["param_groups"]}
    w2 = ta.nn.Parameter(ta.ones(3))
    opt2 = optim.Adam([w2])
    opt2.load_state_dict(text)
    assert opt2.state[w2]["step"].item() == 1.0 and opt2.state[w2]["step"].dtype == np.float32


def test_a_pickle_from_before_the_state_held_tensors_unpickles_with_torchs_names():
    """An optimizer pickled by an earlier tinyattn: its state by position, with the old names
    (m, v), arrays and a Python step count."""
    w = ta.nn.Parameter(ta.ones(3))
    opt = optim.Adam([w], lr=0.1)
    d = opt.__getstate__()
    d["_state_at"] = {0: {"m": np.full(3, 0.5), "v": np.full(3, 0.25), "step": 4}}
    old = optim.Adam.__new__(optim.Adam)
    old.__setstate__(d)
    state = old.state[old.params()[0]]
    assert list(state) == ["exp_avg", "exp_avg_sq", "step"]
    assert all(isinstance(v, ta.Tensor) for v in state.values())
    assert state["step"].item() == 4.0 and state["step"].dtype == np.float32
    np.testing.assert_array_equal(state["exp_avg"].numpy(), [0.5] * 3)


ALL_EIGHT = [("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.01)),
             ("AdamW", dict(lr=0.01, weight_decay=0.1)), ("RMSprop", dict(lr=0.01)),
             ("Adagrad", dict(lr=0.1)), ("Adamax", dict(lr=0.01)), ("NAdam", dict(lr=0.01)),
             ("RAdam", dict(lr=0.01, betas=(0.5, 0.6)))]


@pytest.fixture
def float64_default():
    """Both libraries' default dtype float64 for the test, float32 again after it."""
    torch = pytest.importorskip("torch")
    ta.set_default_dtype(np.float64)
    torch.set_default_dtype(torch.float64)
    try:
        yield torch
    finally:
        ta.set_default_dtype(np.float32)
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("name,kwargs", ALL_EIGHT)
def test_with_a_float64_default_the_step_counts_are_float64_and_steps_match_torch(
        name, kwargs, float64_default):
    """torch keeps step (and NAdam's mu_product) in float64 when the default dtype is: NAdam's
    Πμ in float32 drifted 1.8e-10 from torch's in 20 steps."""
    torch = float64_default
    (ours, opt), (theirs, topt) = _both(name, kwargs, steps=20)
    for p, q in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-14, atol=1e-15)
        assert sorted(opt.state[p]) == sorted(topt.state[q])
        for key, want in topt.state[q].items():
            assert str(opt.state[p][key].dtype) == _torch_dtype_name(want), (name, key)
    # a checkpoint made under either default loads under the other and steps on alike
    saved64 = opt.state_dict()
    ta.set_default_dtype(np.float32)
    torch.set_default_dtype(torch.float32)
    opt32 = getattr(optim, name)(ours, lr=0.5)
    opt32.load_state_dict(saved64)
    opt32.step()
    saved32 = opt32.state_dict()
    assert all(str(v.dtype) == "float32" for e in saved32["state"].values() for v in e.values()
               if v.ndim == 0)
    ta.set_default_dtype(np.float64)
    back = getattr(optim, name)(ours, lr=0.5)
    back.load_state_dict(saved32)
    back.step()
    assert all(str(v.dtype) == "float64" for e in back.state.values() for v in e.values()
               if v.ndim == 0)


@pytest.mark.parametrize("name,kwargs", ALL_EIGHT)
def test_step_takes_a_closure_calls_it_with_grad_enabled_and_returns_its_loss(name, kwargs):
    """torch's step(closure): the closure re-evaluates the loss (under enable_grad, even inside
    no_grad), the step follows, and step returns the closure's loss; step() alone returns None."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    w0, x0 = rng.standard_normal((3, 4)), rng.standard_normal((5, 3))
    w, x = ta.nn.Parameter(ta.tensor(w0)), ta.tensor(x0)
    tw, tx = torch.nn.Parameter(torch.tensor(w0)), torch.tensor(x0)
    opt, topt = getattr(optim, name)([w], **kwargs), getattr(torch.optim, name)([tw], **kwargs)

    def closure():
        opt.zero_grad()
        loss = ((x @ w) ** 2).mean()
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = ((tx @ tw) ** 2).mean()
        loss.backward()
        return loss

    for _ in range(3):
        with ta.no_grad():
            loss = opt.step(closure)
        with torch.no_grad():
            tloss = topt.step(tclosure)
        assert isinstance(loss, ta.Tensor) and loss.item() == pytest.approx(tloss.item(),
                                                                           rel=1e-12)
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-12)
    assert opt.step() is None and opt.step(closure=None) is None


@pytest.mark.parametrize("name,setting", [("SGD", "lr"), ("Adam", "lr"), ("AdamW", "lr"),
                                          ("RMSprop", "lr"), ("Adagrad", "lr"),
                                          ("Adamax", "lr"), ("NAdam", "lr"), ("RAdam", "lr"),
                                          ("SGD", "weight_decay"), ("Adam", "eps"),
                                          ("NAdam", "betas"), ("Adam", "betas"),
                                          ("Adagrad", "initial_accumulator_value")])
def test_a_tensor_setting_is_read_at_each_step_as_torch(name, setting):
    """lr=tensor(0.01) (and betas of tensors...): torch reads the tensor at every step, so a
    change in place (a schedule's lr.fill_) counts from the next step."""
    torch = pytest.importorskip("torch")
    plain = {"lr": 0.01, "weight_decay": 0.1, "eps": 1e-3, "betas": (0.8, 0.9),
             "initial_accumulator_value": 0.5}
    value = plain[setting]
    ours = (tuple(ta.tensor(b, dtype=np.float64) for b in value) if setting == "betas"
            else ta.tensor(value, dtype=np.float64))
    theirs = (tuple(torch.tensor(b, dtype=torch.float64) for b in value) if setting == "betas"
              else torch.tensor(value, dtype=torch.float64))
    kwargs = {"lr": 0.01, setting: ours}
    tkwargs = {"lr": 0.01, setting: theirs}
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal(4)
    w, tw = ta.nn.Parameter(ta.tensor(w0)), torch.nn.Parameter(torch.tensor(w0))
    opt, topt = getattr(optim, name)([w], **kwargs), getattr(torch.optim, name)([tw], **tkwargs)
    for i in range(4):
        if i == 2:  # in place, on both
            for t in (ours if setting == "betas" else (ours,)):
                t.mul_(0.5)
            for t in (theirs if setting == "betas" else (theirs,)):
                t.mul_(0.5)
        g = rng.standard_normal(4)
        w.grad, tw.grad = ta.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
        np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-12,
                                   err_msg=f"{name} {setting} step {i}")
    assert opt.param_groups[0][setting] is ours  # kept as given, as torch's group keeps it
    # its state dict, and torch's, load: the setting a copy (a later change of the saved
    # tensor leaves the loaded optimizer alone), the steps on alike
    for saved in (opt.state_dict(), topt.state_dict()):
        again = getattr(optim, name)([ta.nn.Parameter(ta.tensor(w0))], lr=0.5)
        again.load_state_dict(saved)
        loaded = again.param_groups[0][setting]
        got = [float(t.item()) for t in (loaded if setting == "betas" else (loaded,))]
        want = [float(t.item()) for t in (ours if setting == "betas" else (ours,))]
        assert got == want and all(isinstance(t, ta.Tensor) for t in
                                   (loaded if setting == "betas" else (loaded,)))
        assert loaded is not ours


def test_a_tensor_setting_of_more_than_one_number_is_refused_at_construction():
    w = ta.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match=r"Adam: lr given as a tensor must hold one number, "
                                         r"got shape \(2,\)"):
        optim.Adam([w], lr=ta.tensor([0.1, 0.2]))
    with pytest.raises(ValueError, match=r"NAdam: betas\[1\] given as a tensor must hold one "
                                         r"number, got shape \(2, 1\)"):
        optim.NAdam([w], betas=(0.9, ta.zeros(2, 1)))
    with pytest.raises(ValueError, match=r"SGD: lr must be >= 0, got -0.1"):
        optim.SGD([w], lr=ta.tensor(-0.1))
    opt = optim.SGD([w], lr=ta.tensor([0.5]))  # one element, as torch's "1-element"
    w.grad = ta.ones(2)
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [0.5, 0.5])


def test_named_parameters_are_taken_as_torchs_and_the_state_dict_carries_their_names():
    """An iterable of (name, tensor) pairs (model.named_parameters()), and groups of them: the
    names land in each group's "param_names", as in torch's state_dict; it round-trips."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    starts = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    ours = {k: ta.nn.Parameter(ta.tensor(v)) for k, v in starts.items()}
    theirs = {k: torch.nn.Parameter(torch.tensor(v)) for k, v in starts.items()}
    opt = optim.AdamW(ours.items(), lr=0.01)
    topt = torch.optim.AdamW(theirs.items(), lr=0.01)
    for _ in range(2):
        for k, v in starts.items():
            g = rng.standard_normal(v.shape)
            ours[k].grad, theirs[k].grad = ta.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert [list(g) for g in sd["param_groups"]] == [list(g) for g in tsd["param_groups"]]
    assert opt.param_groups[0]["params"] == [ours["w"], ours["b"]]
    for k in ours:
        np.testing.assert_allclose(ours[k].detach().numpy(), theirs[k].detach().numpy())
    # round trips: into a named optimizer, an unnamed one (takes the names, as torch's)
    for params in (list(ours.items()), list(ours.values())):
        again = optim.AdamW(params, lr=0.5)
        again.load_state_dict(sd)
        assert again.param_groups[0]["param_names"] == ["w", "b"]
        assert again.param_groups[0]["lr"] == 0.01
        assert again.state_dict()["state"].keys() == sd["state"].keys()
    # named groups; with torch's rule: all named or none, in a group and across groups
    model = ta.nn.Linear(2, 3)
    grouped = optim.SGD([{"params": model.named_parameters(), "lr": 0.5}], lr=0.1)
    assert grouped.param_groups[0]["param_names"] == ["weight", "bias"]
    assert grouped.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]
    with pytest.raises(ValueError, match="SGD: all of a group's parameters have names or none"):
        optim.SGD([("w", ours["w"]), ours["b"]], lr=0.1)
    with pytest.raises(ValueError, match="SGD: all parameter groups have names or none"):
        grouped.add_param_group({"params": [ta.ones(2, requires_grad=True)]})
