"""Tests for the seed-4 mutation survivors of nn, optim and train, against torch where torch
has the behaviour: MultiheadAttention's bias_v in the dtype asked for, a Linear with one input
feature drawing its bias from U(-1, 1), a BatchNorm without affine parameters on an empty batch,
LPPool's ceil_mode, a lazy convolution's device, L-BFGS's strong-Wolfe step taken 0.1 inside the
bracket's lower end, SWALR's default anneal_epochs, and a one-step run's warm-up shortened."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import BackendError

torch = pytest.importorskip("torch")


def test_multihead_attentions_bias_kv_in_the_dtype_asked_for():
    m = ta.nn.MultiheadAttention(4, 2, add_bias_kv=True, dtype=ta.float64)
    mt = torch.nn.MultiheadAttention(4, 2, add_bias_kv=True, dtype=torch.float64)
    assert {n: str(p.dtype) for n, p in m.named_parameters()} == \
        {n: str(p.dtype).replace("torch.", "") for n, p in mt.named_parameters()}


@pytest.mark.parametrize("again", [False, True], ids=["made", "reset_parameters"])
def test_a_linear_with_one_input_feature_draws_its_bias_from_u_minus_1_1(again):
    ta.manual_seed(0)
    lin = ta.nn.Linear(1, 400)
    if again:
        lin.bias.data.zero_()
        lin.reset_parameters()
    bias = lin.bias.detach().numpy()
    assert np.abs(bias).max() <= 1.0 and np.abs(bias).max() > 0.9  # (torch's bound: 1/√1)
    assert np.abs(bias).mean() > 0.4  # uniform on (-1, 1): mean |b| about 0.5
    empty = ta.nn.Linear(0, 3)  # (no inputs: bound 0, as torch)
    if again:
        empty.reset_parameters()
    assert empty.bias.abs().max().item() == 0.0


@pytest.mark.parametrize("cls, shape", [("BatchNorm1d", (0, 2)), ("BatchNorm2d", (0, 2, 3, 3))])
@pytest.mark.parametrize("affine", [True, False])
def test_a_batch_norm_on_an_empty_batch(cls, shape, affine):
    bn, bn_t = getattr(ta.nn, cls)(2, affine=affine), getattr(torch.nn, cls)(2, affine=affine)
    out, out_t = bn(ta.ones(*shape)), bn_t(torch.ones(*shape))
    assert out.shape == tuple(out_t.shape) and out.dtype == ta.float32
    assert bn.running_mean.tolist() == bn_t.running_mean.tolist()


@pytest.mark.parametrize("cls, shape", [("LPPool1d", (1, 2, 5)), ("LPPool2d", (1, 2, 5, 7))])
@pytest.mark.parametrize("ceil_mode", [True, False])
def test_lp_pooling_keeps_its_ceil_mode(cls, shape, ceil_mode):
    x = np.random.default_rng(0).random(shape)
    m, mt = getattr(ta.nn, cls)(2, 2, ceil_mode=ceil_mode), \
        getattr(torch.nn, cls)(2, 2, ceil_mode=ceil_mode)
    out, out_t = m(ta.tensor(x)), mt(torch.tensor(x))
    assert out.shape == tuple(out_t.shape)
    np.testing.assert_allclose(out.numpy(), out_t.numpy(), rtol=1e-10)


@pytest.mark.skipif(ta.cuda.is_available(), reason="a GPU is here: cuda is a device then")
@pytest.mark.parametrize("cls", ["LazyConv1d", "LazyConv2d", "LazyConv3d"])
def test_a_lazy_convolution_takes_its_device_as_the_convolution_does(cls):
    eager = cls.replace("Lazy", "")
    with pytest.raises(BackendError):
        getattr(ta.nn, eager)(2, 4, 3, device="cuda")
    with pytest.raises(BackendError):
        getattr(ta.nn, cls)(4, 3, device="cuda")
    assert getattr(ta.nn, cls)(4, 3, device="cpu")(ta.ones(*(1, 2) + (5,) * int(cls[-2]))) \
        .shape[1] == 4


@pytest.mark.parametrize("cls", ["LazyConv1d", "LazyConv2d", "LazyConvTranspose1d",
                                 "LazyConvTranspose3d"])
def test_a_lazy_convolutions_parameters_wait_on_the_device_asked_for(cls, monkeypatch):
    import fake_cupy  # tests/support (tests/conftest.py): a NumPy stand-in for CuPy

    fake_cupy.install(monkeypatch, kernels=False)
    m = getattr(ta.nn, cls)(4, 3, device="cuda")
    assert str(m.weight.device).startswith("cuda") and m.bias.device == m.weight.device
    assert str(getattr(ta.nn, cls)(4, 3).weight.device) == "cpu"


def test_lbfgs_strong_wolfe_steps_inside_the_brackets_lower_end_as_torch():
    """A start from which the line search's interpolated step falls within a tenth of the
    bracket's lower end, where torch evaluates 0.1 of the bracket inside it instead."""
    x0 = [1.760667296993123, 0.19921798301385701]
    ends = []
    for lib in (ta, torch):
        x = lib.tensor(x0, dtype=lib.float64, requires_grad=True)
        opt = lib.optim.LBFGS([x], lr=2.0, line_search_fn="strong_wolfe", max_iter=20)

        def closure(x=x, opt=opt, lib=lib):
            opt.zero_grad()
            loss = (x.sin() * 3 + x ** 2 * 0.1).sum()
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        ends.append(np.array(x.detach().tolist()))
    np.testing.assert_allclose(ends[0], ends[1], rtol=1e-12, atol=1e-12)


def test_swalrs_default_anneal_epochs_as_torch():
    lrs = []
    for lib in (ta, torch):
        p = (ta.nn.Parameter if lib is ta else torch.nn.Parameter)(lib.zeros(1))
        opt = lib.optim.SGD([p], lr=1.0)
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=0.1)
        seen = []
        for _ in range(12):
            opt.step()
            sched.step()
            seen.append(opt.param_groups[0]["lr"])
        lrs.append(seen)
    np.testing.assert_allclose(lrs[0], lrs[1], rtol=1e-12)
    assert lrs[0][8] > 0.1 and lrs[0][9] == pytest.approx(0.1)  # (10 epochs of annealing)


def test_a_one_step_runs_default_warmup_is_shortened(capsys):
    from tinyattn.train import TrainConfig, settle

    cfg = settle(TrainConfig(steps=1))
    assert cfg.warmup == 0
    assert "--warmup" in capsys.readouterr().err
    assert settle(TrainConfig(steps=1, warmup=1)).warmup == 1  # (given: kept)


@pytest.mark.parametrize("given, used", [("CPU", "numpy"), ("np", "numpy"), ("numpy", "numpy"),
                                         ("Cuda", "cupy"), (None, None), (3, 3)])
def test_a_resume_compares_the_backend_by_its_own_name(given, used):
    """A checkpoint's backend setting as the run uses it: an alias by the backend it names,
    whatever its case; a value that is no name (a damaged config's null) compared as it is,
    so that the resume refuses it as a different setting instead of failing on it."""
    from tinyattn.train import _as_used

    assert _as_used({"backend": given, "task": "text"})["backend"] == used
