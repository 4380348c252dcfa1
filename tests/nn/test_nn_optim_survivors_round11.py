"""nn and optim behaviours a third mutation draw (seed 2) found unobserved (against torch where
it is installed): MultiheadAttention with one head, MultiMarginLoss's legacy size_average,
TripletMarginLoss's margin, a parametrized tensor cached per module inside
parametrize.cached(), a parametrization of several tensors checking their dtypes, LnStructured
naming itself when refusing an amount, AdaptiveLogSoftmaxWithLoss.predict keeping a tensor on its
backend, L-BFGS's cubic step with the points in either order,
and a state dict whose setting is a tensor of several numbers refused naming the optimizer."""

import warnings
from pathlib import Path

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.nn.utils import parametrize, prune
from tinyattn.optim.lbfgs import _cubic_interpolate


def test_multihead_attention_with_one_head():
    mha = nn.MultiheadAttention(8, 1, batch_first=True)
    x = ta.randn(2, 5, 8)
    out, weights = mha(x, x, x)
    assert out.shape == (2, 5, 8) and weights.shape == (2, 5, 5)
    for heads in (0, -1, 3):
        with pytest.raises(ta.errors.ShapeError, match="MultiheadAttention"):
            nn.MultiheadAttention(8, heads)


def test_multi_margin_loss_size_average_false_sums():
    x = ta.tensor([[0.1, 0.8, 0.3], [0.5, -0.2, 0.9]])
    y = ta.tensor([1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the legacy arguments' deprecation warning, as torch)
        loss = nn.MultiMarginLoss(size_average=False)
    assert loss.reduction == "sum"
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.nn.MultiMarginLoss(size_average=False)(torch.tensor(x.numpy()),
                                                             torch.tensor(y.numpy()))
    np.testing.assert_allclose(loss(x, y).item(), want.item(), rtol=1e-6)


def test_triplet_margin_loss_uses_its_margin():
    rng = np.random.default_rng(0)
    a, p, n = (rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3))
    for margin in (0.3, 2.5):
        got = nn.TripletMarginLoss(margin=margin)(ta.tensor(a), ta.tensor(p), ta.tensor(n))
        torch = pytest.importorskip("torch")
        want = torch.nn.TripletMarginLoss(margin=margin)(torch.tensor(a), torch.tensor(p),
                                                          torch.tensor(n))
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)


class _Scaled(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, w):
        return w * self.c


def test_cached_parametrizations_are_kept_per_module():
    first, second = nn.Linear(3, 2), nn.Linear(3, 2)
    parametrize.register_parametrization(first, "weight", _Scaled(2.0))
    parametrize.register_parametrization(second, "weight", _Scaled(-1.0))
    with parametrize.cached():
        a, b = first.weight, second.weight
        assert first.weight is a and second.weight is b
    np.testing.assert_array_equal(a.numpy(), 2.0 * first.parametrizations.weight.original.numpy())
    np.testing.assert_array_equal(b.numpy(), -second.parametrizations.weight.original.numpy())


class _Split(nn.Module):
    """weight = a + b, stored as two tensors: right_inverse gives (x / 2, x / 2)."""

    def forward(self, a, b):
        return a + b

    def right_inverse(self, x):
        return x / 2, x / 2


def test_a_parametrization_of_several_tensors_checks_their_dtypes():
    m = nn.Linear(3, 2)
    parametrize.register_parametrization(m, "weight", _Split())
    value = ta.full((2, 3), 4.0)
    m.weight = value  # the same dtype: taken
    np.testing.assert_array_equal(m.parametrizations.weight.original0.numpy(), np.full((2, 3), 2))
    np.testing.assert_array_equal(m.weight.numpy(), np.full((2, 3), 4.0))
    with pytest.raises(ValueError, match="has dtype"):
        m.weight = value.double()


def test_ln_structured_names_itself_when_refusing_an_amount():
    with pytest.raises(ValueError, match="^LnStructured: amount=-1"):
        prune.LnStructured(amount=-1, n=2)
    with pytest.raises(TypeError, match="^LnStructured: Invalid type"):
        prune.LnStructured(amount="a", n=2)


@pytest.mark.parametrize("order", ["x1 < x2", "x1 > x2"])
def test_lbfgs_cubic_step_in_either_order(order):
    torch = pytest.importorskip("torch")
    from torch.optim.lbfgs import _cubic_interpolate as torch_cubic

    rng = np.random.default_rng(3)
    for _ in range(50):
        x1, x2 = sorted(rng.uniform(-2, 2, 2))
        if order == "x1 > x2":
            x1, x2 = x2, x1
        f1, g1, f2, g2 = rng.standard_normal(4)
        got = _cubic_interpolate(np, x1, f1, g1, x2, f2, g2)
        want = torch_cubic(*(torch.tensor(v, dtype=torch.float64) for v in (x1, f1, g1, x2, f2,
                                                                              g2)))
        np.testing.assert_allclose(float(got), float(want), rtol=1e-9, atol=1e-12)


def test_loading_a_setting_of_several_numbers_is_refused_naming_the_optimizer():
    p = nn.Parameter(ta.ones(3))
    opt = ta.optim.Adam([p], lr=0.1)
    p.grad = ta.ones(3)
    opt.step()
    saved = opt.state_dict()
    saved["param_groups"][0]["lr"] = ta.tensor([0.1, 0.2])
    with pytest.raises(ValueError, match="^Adam: lr given as a tensor must hold one number"):
        opt.load_state_dict(saved)


def test_adaptive_predict_keeps_a_tensor_on_its_backend(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "support"))
    import fake_cupy  # tests/support

    fake_cupy.install(monkeypatch, kernels=False)
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4, 8]).to("cupy")
    x = ta.randn(5, 8).to("cupy")
    got = m.predict(x)
    assert got.backend is x.backend
    np.testing.assert_array_equal(got.numpy(), m.log_prob(x).argmax(1).numpy())
