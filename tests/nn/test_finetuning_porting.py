"""Fine-tuning and training-loop code as people write it for torch, run with tinyattn: freezing,
LoRA, weight averaging (EMA with torch._foreach_*, optim.swa_utils), parameter groups, and the
values compared with torch's from the same weights."""

import copy
import math

import numpy as np
import pytest

import tinyattn as ta

X = np.random.RandomState(0).randn(6, 4).astype(np.float32)
Y = np.random.RandomState(1).randn(6, 3).astype(np.float32)


def _mlp(lib, norm=False):
    lib.manual_seed(0)
    nn = lib.nn
    middle = [nn.BatchNorm1d(8)] if norm else []
    return nn.Sequential(nn.Linear(4, 8), *middle, nn.ReLU(), nn.Linear(8, 3))


def _pair(torch, norm=False):
    """The same small MLP in torch and tinyattn, with torch's weights."""
    mt, ma = _mlp(torch, norm), _mlp(ta, norm)
    ma.load_state_dict({k: ta.tensor(v.detach().numpy().copy()) for k, v in
                        mt.state_dict().items()})
    return mt, ma


def _step(lib, model, opt):
    opt.zero_grad(set_to_none=True)
    lib.nn.functional.mse_loss(model(lib.tensor(X)), lib.tensor(Y)).backward()
    opt.step()


def _arrays(tensors):
    return [np.asarray(t.detach().numpy()).copy() for t in tensors]


# ---- torch._foreach_*: EMA code and hand-written optimizers call them ----------------------------

def test_foreach_ema_of_weights_matches_torch():
    torch = pytest.importorskip("torch")
    out = []
    for lib, model in zip((torch, ta), _pair(torch), strict=True):
        ema = copy.deepcopy(model).requires_grad_(False)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            _step(lib, model, opt)
            with lib.no_grad():
                e, p = list(ema.parameters()), list(model.parameters())
                lib._foreach_mul_(e, 0.9)
                lib._foreach_add_(e, p, alpha=0.1)
                lib._foreach_lerp_(e, p, 0.05)
        out.append(_arrays(ema.parameters()))
    for a, b in zip(*out, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_foreach_family_matches_torch():
    torch = pytest.importorskip("torch")
    rows = []
    for lib in (torch, ta):
        xs = [lib.tensor([1.0, -2.0, 3.0]), lib.tensor([[0.5, 4.0]])]
        ys = [lib.tensor([2.0, 2.0, 0.5]), lib.tensor([[3.0, -1.0]])]
        got = []
        assert lib._foreach_mul_(xs, 0.5) is not None
        got += _arrays(xs)
        lib._foreach_add_(xs, ys, alpha=2)
        lib._foreach_sub_(xs, 1.0)
        lib._foreach_div_(xs, [2.0, 4.0])
        lib._foreach_mul_(xs, lib.tensor(3.0))
        got += _arrays(xs)
        lib._foreach_addcmul_(xs, ys, ys, value=0.1)
        lib._foreach_addcdiv_(xs, ys, ys, [0.5, 0.25])
        lib._foreach_lerp_(xs, ys, [lib.tensor(0.25), lib.tensor(0.75)])
        lib._foreach_maximum_(xs, ys)
        lib._foreach_clamp_max_(xs, 3.0)
        got += _arrays(xs)
        got += _arrays(lib._foreach_add(xs, ys))
        got += _arrays(lib._foreach_sqrt(lib._foreach_abs(xs)))
        got += _arrays(lib._foreach_pow(xs, 2))
        got += _arrays(lib._foreach_norm(xs))
        got += _arrays(lib._foreach_norm(xs, 1))
        got += _arrays(lib._foreach_neg(xs))
        lib._foreach_copy_(xs, ys)
        got += _arrays(xs)
        lib._foreach_zero_(xs)
        got += _arrays(xs)
        rows.append(got)
    for a, b in zip(*rows, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_foreach_keeps_torch_rules():
    xs = [ta.ones(2), ta.ones(3)]
    out = ta._foreach_mul(xs, 2.0)
    assert isinstance(out, tuple) and float(out[1].sum()) == 6.0 and float(xs[1].sum()) == 3.0
    with pytest.raises(ValueError, match=r"_foreach_add_: .*2 tensors, 1"):
        ta._foreach_add_(xs, [ta.ones(2)])
    leaf = [ta.ones(2, requires_grad=True)]
    with pytest.raises(RuntimeError):
        ta._foreach_mul_(leaf, 2.0)
    y = ta._foreach_mul(leaf, 3.0)[0]
    y.sum().backward()
    assert leaf[0].grad.tolist() == [3.0, 3.0]


# ---- optim.swa_utils: AveragedModel (SWA and EMA), SWALR, update_bn -----------------------------

def test_averaged_model_ema_and_swa_with_swalr_match_torch():
    torch = pytest.importorskip("torch")
    out = []
    for lib, model in zip((torch, ta), _pair(torch), strict=True):
        su = lib.optim.swa_utils
        ema = su.AveragedModel(model, multi_avg_fn=su.get_ema_multi_avg_fn(0.9))
        ema1 = su.AveragedModel(model, avg_fn=su.get_ema_avg_fn(0.8))
        swa = su.AveragedModel(model)
        opt = lib.optim.SGD([{"params": model[0].parameters()},
                             {"params": model[2].parameters(), "lr": 0.3}], lr=0.1)
        sched = su.SWALR(opt, swa_lr=[0.05, 0.02], anneal_epochs=3, anneal_strategy="cos")
        lrs = []
        for _ in range(5):
            _step(lib, model, opt)
            for avg in (ema, ema1, swa):
                avg.update_parameters(model)
            sched.step()
            lrs.append(sched.get_last_lr())
        assert list(swa.state_dict())[0] == "n_averaged"
        out.append(_arrays([*ema.parameters(), *ema1.module.parameters(), *swa.parameters(),
                            swa(lib.tensor(X)), swa.n_averaged]) + [np.array(lrs)])
    for a, b in zip(*out, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_update_bn_and_averaged_buffers_match_torch():
    torch = pytest.importorskip("torch")
    out = []
    for lib, model in zip((torch, ta), _pair(torch, norm=True), strict=True):
        su = lib.optim.swa_utils
        swa = su.AveragedModel(model, use_buffers=True)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            _step(lib, model, opt)
            swa.update_parameters(model)
        loader = [(lib.tensor(X[:3]), 0), (lib.tensor(X[3:]), 1)]
        model.eval()
        su.update_bn(loader, model)
        assert not model.training and model[1].momentum == 0.1
        out.append(_arrays([*swa.module.buffers(), *model.buffers()]))
    for a, b in zip(*out, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_swa_utils_refusals_are_torchs():
    model = _mlp(ta)
    su = ta.optim.swa_utils
    with pytest.raises(ValueError, match="decay"):
        su.get_ema_multi_avg_fn(1.5)
    with pytest.raises(AssertionError):
        su.AveragedModel(model, avg_fn=su.get_swa_avg_fn(), multi_avg_fn=su.get_swa_multi_avg_fn())
    opt = ta.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        su.SWALR(opt, swa_lr=0.05, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs"):
        su.SWALR(opt, swa_lr=0.05, anneal_epochs=-1)


# ---- parameter groups ----------------------------------------------------------------------

def test_a_set_of_parameters_in_a_group_is_refused_as_torch():
    p, q = ta.nn.Parameter(ta.ones(1)), ta.nn.Parameter(ta.ones(2))
    with pytest.raises(TypeError, match="ordered collections"):
        ta.optim.SGD([{"params": {p, q}}], lr=0.1)
    opt = ta.optim.SGD([p], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        opt.add_param_group({"params": {q}})


# ---- the recipes that work: LoRA, freezing, a plateau schedule, early stopping --------------

def _lora(lib):
    nn = lib.nn

    class LoRALinear(nn.Module):
        def __init__(self, base, r=2, alpha=4):
            super().__init__()
            self.base = base
            self.base.weight.requires_grad = False
            self.base.bias.requires_grad_(False)
            self.A = nn.Parameter(lib.empty(r, base.in_features))
            self.B = nn.Parameter(lib.zeros(base.out_features, r))
            nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
            nn.init.zeros_(self.B)
            self.scale = alpha / r

        def forward(self, x):
            return self.base(x) + (x @ self.A.T @ self.B.T) * self.scale

    return LoRALinear


def test_lora_fine_tune_and_merge_match_torch():
    torch = pytest.importorskip("torch")
    out, a0 = [], {}
    for lib, model in zip((torch, ta), _pair(torch), strict=True):
        lora = _lora(lib)
        for name, mod in list(model.named_modules()):
            if isinstance(mod, lib.nn.Linear):
                setattr(model, name, lora(mod))
        for name, p in model.named_parameters():  # torch's random A, copied
            if name.endswith(".A"):
                a0.setdefault(name, p.detach().numpy().copy())
                p.data.copy_(lib.tensor(a0[name]))
        trainable = [p for p in model.parameters() if p.requires_grad]
        assert sum(p.numel() for p in trainable) == 2 * (4 + 8) + 2 * (8 + 3)
        opt = lib.optim.AdamW(trainable, lr=1e-2, weight_decay=0.1)
        for _ in range(3):
            _step(lib, model, opt)
        before = model(lib.tensor(X)).detach().numpy().copy()
        for mod in model.modules():
            if isinstance(mod, lora):
                mod.base.weight.data += (mod.B @ mod.A) * mod.scale
                with lib.no_grad():
                    mod.B.zero_()
        after = model(lib.tensor(X)).detach().numpy()
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-6)
        out.append([before] + _arrays(model.parameters()))
    for a, b in zip(*out, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_plateau_schedule_with_early_stopping_matches_torch():
    torch = pytest.importorskip("torch")
    rows = []
    for lib, model in zip((torch, ta), _pair(torch), strict=True):
        opt = lib.optim.SGD([{"params": model[0].parameters()},
                             {"params": model[2].parameters(), "lr": 0.05}], lr=0.1,
                            momentum=0.9)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1,
                                                         threshold=0.05, cooldown=1,
                                                         min_lr=0.01)
        best, best_sd, lrs = math.inf, None, []
        for epoch in range(8):
            model.train()
            _step(lib, model, opt)
            model.train(False)
            with lib.inference_mode():
                val = lib.nn.functional.mse_loss(model(lib.tensor(X)), lib.tensor(Y)).item()
            sched.step(val + 0.2 * (epoch % 3))
            lrs.append(sched.get_last_lr())
            if val < best:
                best, best_sd = val, copy.deepcopy(model.state_dict())
        model.load_state_dict(best_sd)
        rows.append([np.array(lrs), np.array(best)] + _arrays(model.parameters()))
    for a, b in zip(*rows, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)
