"""Tests for the survivors of the mutation draw taken on 2026-11-28 (tools/mutate.py ops nn
optim autograd --sample 60, at ea58e13): each observes the behaviour a surviving mutant broke
(planted by hand, each of these fails)."""

import math

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.nn import init

torch = pytest.importorskip("torch")


def test_a_1d_pool_takes_its_sizes_as_one_tuples_as_ints():
    x = ta.randn(1, 2, 8)
    m = ta.nn.AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))
    assert m.kernel_size == (2,) and m.stride == (2,) and m.padding == (0,)
    assert repr(m) == repr(torch.nn.AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,)))
    np.testing.assert_array_equal(m(x).numpy(), ta.nn.AvgPool1d(2)(x).numpy())


def test_conv1d_takes_its_sizes_as_one_tuples_as_ints():
    """nn.Conv1d(kernel_size=(3,), stride=(2,)) is the same layer as kernel_size=3, stride=2."""
    ta.manual_seed(0)
    a = ta.nn.Conv1d(2, 3, kernel_size=(3,), stride=(2,), padding=(1,), dilation=(1,))
    b = ta.nn.Conv1d(2, 3, kernel_size=3, stride=2, padding=1)
    assert a.kernel_size == b.kernel_size == (3,) and a.stride == (2,)
    b.load_state_dict(a.state_dict())
    x = ta.randn(1, 2, 9)
    assert a(x).shape == (1, 3, 5)
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


def test_the_unfold_module_uses_its_stride():
    x = ta.randn(1, 2, 6, 6)
    m = ta.nn.Unfold(kernel_size=2, stride=2)
    assert m(x).shape == (1, 8, 9)
    np.testing.assert_array_equal(m(x).numpy(), F.unfold(x, 2, stride=2).numpy())
    want = torch.nn.Unfold(kernel_size=2, stride=2)(torch.tensor(x.numpy()))
    np.testing.assert_array_equal(m(x).numpy(), want.numpy())


@pytest.mark.parametrize("z", [-30.5, -32.0, -36.0])
def test_the_tail_series_of_log_cdf_equals_erfc_where_both_hold(z):
    """Between -37 and -30 erfc has not underflowed yet: the asymptotic series (used from
    -30 down) must agree with it."""
    exact = math.log(0.5 * math.erfc(-z / math.sqrt(2)))
    assert init._log_cdf(z) == pytest.approx(exact, rel=1e-12)


def test_a_registry_popitem_takes_the_last_or_the_first_entry():
    m = ta.nn.Module()
    m.a, m.b, m.c = (ta.nn.Parameter(ta.ones(1) * k) for k in (1, 2, 3))
    name, p = m._parameters.popitem()
    assert name == "c" and p.item() == 3.0
    name, p = m._parameters.popitem(last=False)
    assert name == "a" and p.item() == 1.0
    assert list(dict(m.named_parameters())) == ["b"]


def _stretched_quadratic(lib):
    x = lib.zeros(2, dtype=lib.float64, requires_grad=True)
    opt = lib.optim.LBFGS([x], lr=1, line_search_fn="strong_wolfe", max_iter=3)
    scale = lib.tensor([1.0, 40.0], dtype=lib.float64)

    def closure():
        opt.zero_grad()
        loss = (0.5 * scale * (x - 3) ** 2).sum()
        loss.backward()
        return loss

    return [(float(opt.step(closure)), x.detach().numpy().copy()) for _ in range(3)]


def test_lbfgs_strong_wolfe_extrapolates_a_short_first_step_as_torch():
    """The first trial step, 1/|g|₁, is far too short here: the line search extrapolates by
    cubic interpolation within (t + 0.01 (t - t_prev), 10 t), as torch's."""
    for (la, xa), (lt, xt) in zip(_stretched_quadratic(ta), _stretched_quadratic(torch),
                                  strict=True):
        assert la == pytest.approx(lt, rel=1e-12)
        np.testing.assert_allclose(xa, xt, rtol=1e-10, atol=1e-12)


def test_swalr_resumes_at_its_last_epoch_as_torch():
    def lrs(lib):
        p = lib.nn.Parameter(lib.zeros(2))
        opt = lib.optim.SGD([p], lr=0.5)
        opt.param_groups[0]["initial_lr"] = 0.5
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=4, last_epoch=2)
        out = [opt.param_groups[0]["lr"], sched.last_epoch]
        for _ in range(4):
            opt.step()
            sched.step()
            out += [opt.param_groups[0]["lr"], sched.last_epoch]
        return out

    np.testing.assert_allclose(lrs(ta), lrs(torch), rtol=1e-12)
