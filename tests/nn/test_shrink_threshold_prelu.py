"""The activations torch has and tinyattn lacked: tanhshrink, threshold, softshrink, hardshrink,
prelu (a learned slope), rrelu (random slopes in training, their mean in eval) and Softmax2d,
as functions, modules and (where torch has them) tinyattn functions and Tensor methods:
values, gradients, reprs, refusals and in-place forms against torch 2.13. The ops' VJPs are
also gradient-checked through their registry samples (tests/ops/test_ops_gradcheck.py)."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# past every kink (±0.5 exactly, the default lambd; 1.0 a threshold), NaN too
X = np.array([[-3.0, -0.5, -0.2, 0.0, 0.2, 0.5, 1.0, 2.5], [np.nan, -1.0, 0.7, -0.7, 1.2,
                                                               -2.0, 0.05, 3.0]])


def _run(ours, theirs, *inputs, grads=True):
    """(output, gradients of every float input) of each engine for sum(f(x) * w)."""
    a = [ta.tensor(v, requires_grad=grads) for v in inputs]
    t = [torch.tensor(v, requires_grad=grads) for v in inputs]
    y, ty = ours(*a), theirs(*t)
    w = np.random.default_rng(0).standard_normal(y.shape)
    if grads:
        (y * ta.tensor(w)).sum().backward()
        (ty * torch.tensor(w)).sum().backward()
    return [y.detach().numpy()] + [x.grad.numpy() for x in a if grads], \
        [ty.detach().numpy()] + [x.grad.numpy() for x in t if grads]


def _same(ours, theirs, skip=None):
    """Equal values; gradients (all but the first) compared but where `skip` (torch's
    gradient at a NaN x of the shrinks is g or 0 depending on where its vectorized loop
    reaches it)."""
    for i, (got, want) in enumerate(zip(ours, theirs, strict=True)):
        if i and skip is not None:
            got, want = got[~skip], want[~skip]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, equal_nan=True)


CASES = {
    "tanhshrink": (F.tanhshrink, TF.tanhshrink),
    "threshold": (lambda x: F.threshold(x, 1.0, -7.0), lambda x: TF.threshold(x, 1.0, -7.0)),
    "threshold_int_value": (lambda x: F.threshold(x, -0.5, 3), lambda x: TF.threshold(x, -0.5, 3)),
    "softshrink": (F.softshrink, TF.softshrink),
    "softshrink_0.2": (lambda x: F.softshrink(x, 0.2), lambda x: TF.softshrink(x, 0.2)),
    "softshrink_0": (lambda x: F.softshrink(x, 0.0), lambda x: TF.softshrink(x, 0.0)),
    "hardshrink": (F.hardshrink, TF.hardshrink),
    "hardshrink_negative": (lambda x: F.hardshrink(x, -0.5), lambda x: TF.hardshrink(x, -0.5)),
    "rrelu_eval": (F.rrelu, TF.rrelu),
    "rrelu_eval_0.1_0.3": (lambda x: F.rrelu(x, 0.1, 0.3), lambda x: TF.rrelu(x, 0.1, 0.3)),
    "ta.threshold": (lambda x: ta.threshold(x, 0.2, 9.0), lambda x: torch.threshold(x, 0.2, 9.0)),
    "ta.hardshrink": (lambda x: ta.hardshrink(x, 0.3), lambda x: torch.hardshrink(x, 0.3)),
    "Tensor.hardshrink": (lambda x: x.hardshrink(0.3), lambda x: x.hardshrink(0.3)),
    "ta.rrelu": (ta.rrelu, torch.rrelu),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_new_activation_values_and_gradients_match_torch(name):
    """Including NaN (kept: NaN <= t is False, so threshold keeps it too) and the kinks at
    ±lambd and at the threshold (gradient 0 there, torch's choice). At a NaN x the gradient
    is g (torch's formula; its vectorized loop gives 0 instead, by position)."""
    _same(*_run(*CASES[name], X), skip=np.isnan(X))
    if "shrink" in name or "threshold" in name:  # (tanhshrink: NaN there, as torch)
        x = ta.tensor(X, requires_grad=True)
        CASES[name][0](x).sum().backward()
        g = x.grad.numpy()[1, 0]
        assert np.isnan(g) if name == "tanhshrink" else g == 1.0


MODULES = {  # name: constructor arguments, as torch code writes them
    "Tanhshrink": (), "Threshold": (0.5, -2.0), "Softshrink": (0.3,), "Hardshrink": (),
    "RReLU": (0.1, 0.4),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_new_activation_modules_match_torch_with_their_reprs(name):
    module, tmodule = getattr(nn, name)(*MODULES[name]), getattr(torch.nn, name)(*MODULES[name])
    module.eval(), tmodule.eval()  # (RReLU: its mean slope)
    _same(*_run(module, tmodule, X), skip=np.isnan(X))
    assert repr(module) == repr(tmodule)
    assert repr(nn.Threshold(1, 2, True)) == repr(torch.nn.Threshold(1, 2, True))
    assert repr(nn.RReLU(inplace=True)) == repr(torch.nn.RReLU(inplace=True))
    assert repr(nn.Softshrink(1)) == repr(torch.nn.Softshrink(1)) == "Softshrink(1)"


def test_functions_and_methods_exist_only_where_torch_has_them():
    for name in ("tanhshrink", "threshold", "threshold_", "softshrink", "hardshrink", "prelu",
                 "rrelu", "rrelu_", "relu_", "selu", "celu", "selu_", "celu_"):
        assert hasattr(ta, name) == hasattr(torch, name), name
        assert hasattr(ta.Tensor, name) == hasattr(torch.Tensor, name), name
        assert hasattr(F, name) == hasattr(TF, name), name
    for name in ("elu_", "leaky_relu_", "hardtanh_"):
        assert hasattr(F, name) == hasattr(TF, name), name
    for name in ("Tanhshrink", "Threshold", "Softshrink", "Hardshrink", "PReLU", "RReLU",
                 "Softmax2d"):
        assert name in nn.__all__ and hasattr(torch.nn, name)


def test_threshold_on_integers_keeps_the_dtype_and_converts_its_numbers_as_torch():
    """-1.5 is cut to -1 (so -1 <= -1 takes the value), a float value is cut toward 0, and a
    value out of the dtype's range is refused."""
    x = np.array([-2, -1, 0, 1, 3])
    for args in ((-1.5, 9), (1, 5.5), (0, -4)):
        got, want = F.threshold(ta.tensor(x), *args), TF.threshold(torch.tensor(x), *args)
        assert got.dtype == ta.int64 and got.tolist() == want.tolist(), args
    u8 = np.array([0, 1, 200], dtype=np.uint8)
    assert F.threshold(ta.tensor(u8), 1, -1).tolist() == \
        TF.threshold(torch.tensor(u8), 1, -1).tolist() == [255, 255, 200]  # -1 wraps, as torch
    with pytest.raises(ta.DTypeError, match="threshold: 300 does not fit int8"):
        F.threshold(ta.tensor(x.astype(np.int8)), 2, 300)
    with pytest.raises(RuntimeError):
        TF.threshold(torch.tensor(x.astype(np.int8)), 2, 300)


def test_threshold_and_rrelu_in_place_as_torch():
    a, t = ta.tensor(X * 1.0), torch.tensor(X * 1.0)
    assert F.threshold_(a, 0.1, 4.0) is a
    TF.threshold_(t, 0.1, 4.0)
    _same([a.numpy()], [t.numpy()])
    a, t = ta.tensor(X * 1.0), torch.tensor(X * 1.0)
    assert ta.threshold_(a, 0.1, 4.0) is a and F.threshold(a, 2.0, 0.0, inplace=True) is a
    TF.threshold(torch.threshold_(t, 0.1, 4.0), 2.0, 0.0, inplace=True)
    _same([a.numpy()], [t.numpy()])
    a, t = ta.tensor(X * 1.0), torch.tensor(X * 1.0)
    assert F.rrelu_(a) is a and ta.rrelu_(a, 0.2, 0.3) is a
    torch.rrelu_(TF.rrelu_(t), 0.2, 0.3)
    _same([a.numpy()], [t.numpy()])
    h = ta.tensor(X, requires_grad=True)
    th = torch.tensor(X, requires_grad=True)
    y, ty = nn.Threshold(0.0, 1.0, inplace=True)(h * 1), torch.nn.Threshold(0.0, 1.0, True)(th * 1)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    _same([y.detach().numpy(), h.grad.numpy()], [ty.detach().numpy(), th.grad.numpy()])


def test_softshrink_refuses_a_negative_or_too_large_lambd_as_torch():
    x = ta.tensor([1.0, -2.0])
    for lambd in (-0.5, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=r"softshrink: lambd must be in \[0, "):
            F.softshrink(x, lambd)
        with pytest.raises(RuntimeError, match="lambda must be in range"):
            TF.softshrink(torch.tensor([1.0, -2.0]), lambd)
    with pytest.raises(ValueError, match=r"lambd must be in \[0, 65504\] for a float16"):
        F.softshrink(x.half(), 1e6)


@pytest.mark.parametrize("shape,n", [((2, 3, 4, 4), 3), ((2, 3, 4, 4), 1), ((5, 3), 3),
                                     ((6,), 1), ((), 1), ((2, 3, 5), 3)])
def test_prelu_values_and_gradients_of_input_and_weight_match_torch(shape, n):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    if x.size > 1:
        x.flat[0] = 0.0  # the kink: g * w and no weight gradient there, as torch
    w = rng.uniform(0.05, 0.5, n)
    _same(*_run(F.prelu, TF.prelu, x, w))
    _same(*_run(ta.prelu, torch.prelu, x, w))
    _same(*_run(lambda a, b: a.prelu(b), lambda a, b: a.prelu(b), x, w))


def test_prelu_module_learns_its_weight_as_torch():
    m, tm = nn.PReLU(3, init=0.1, dtype=ta.float64), torch.nn.PReLU(3, 0.1, dtype=torch.float64)
    assert repr(m) == repr(tm) == "PReLU(num_parameters=3)"
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert m.weight.shape == (3,) and m.weight.tolist() == [0.1] * 3
    assert nn.PReLU().weight.dtype == ta.float32 and nn.PReLU().weight.tolist() == [0.25]
    x = np.random.default_rng(2).standard_normal((4, 3, 5))
    y, ty = m(ta.tensor(x)), tm(torch.tensor(x))
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    _same([y.detach().numpy(), m.weight.grad.numpy()],
          [ty.detach().numpy(), tm.weight.grad.numpy()])
    opt = ta.optim.SGD(m.parameters(), lr=0.1)
    opt.step()
    assert np.allclose(m.weight.numpy(), 0.1 - 0.1 * tm.weight.grad.numpy())


def test_prelu_refuses_what_torch_refuses():
    x = ta.tensor(np.ones((2, 3)))
    with pytest.raises(ta.ShapeError, match="prelu: weight has 2 slopes but input"):
        F.prelu(x, ta.tensor([0.1, 0.2], dtype=ta.float64))
    with pytest.raises(ta.ShapeError, match="prelu: weight must be 0-d or 1-D"):
        F.prelu(x, ta.tensor([[0.1, 0.2, 0.3]], dtype=ta.float64))
    with pytest.raises(ta.DTypeError, match="prelu: input is float64 and weight float32"):
        F.prelu(x, ta.tensor([0.1]))
    with pytest.raises(ta.DTypeError, match="prelu: needs floating-point .* got int64"):
        F.prelu(ta.tensor([1, -2]), ta.tensor([1]))
    with pytest.raises(ta.ShapeError, match="weight has 5 slopes but input"):
        F.prelu(ta.tensor([1.0, -2.0, 3.0, 4.0, 5.0]), ta.tensor([0.1] * 5))  # 1-D: 1 channel
    for call in (lambda: TF.prelu(torch.ones(2, 3), torch.tensor([0.1, 0.2])),
                 lambda: TF.prelu(torch.ones(2, 3), torch.tensor([0.1], dtype=torch.float64)),
                 lambda: TF.prelu(torch.ones(5), torch.tensor([0.1] * 5))):
        with pytest.raises(RuntimeError):
            call()


def test_rrelu_in_training_draws_a_slope_per_entry_and_backpropagates_it():
    x = ta.tensor(np.concatenate([-np.linspace(0.5, 3.0, 200), np.linspace(0.1, 2.0, 50)]),
                  requires_grad=True)
    ta.manual_seed(0)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    ta.manual_seed(0)
    again = F.rrelu(x, 0.1, 0.3, training=True)
    assert np.array_equal(y.detach().numpy(), again.detach().numpy())  # the seeded stream
    slopes = (y / x).detach().numpy()
    assert np.all(slopes[200:] == 1.0)  # x > 0 kept
    negative = slopes[:200]
    assert np.all((negative >= 0.1) & (negative <= 0.3)) and negative.std() > 0.03  # random
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes, rtol=1e-12)
    with pytest.raises(ValueError, match="rrelu: lower 0.3 is above upper 0.1"):
        F.rrelu(x, 0.3, 0.1)
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal"):
        TF.rrelu(torch.ones(2), 0.3, 0.1)


def test_rrelu_module_is_random_in_train_mode_and_the_mean_slope_in_eval():
    m = nn.RReLU(0.1, 0.5)
    x = ta.tensor(-np.ones(1000))
    train = m(x).numpy()
    assert len(np.unique(train)) > 100 and train.min() >= -0.5 and train.max() <= -0.1
    m.eval()
    assert np.allclose(m(x).numpy(), -0.3)
    assert np.allclose(torch.nn.RReLU(0.1, 0.5).eval()(torch.tensor(-np.ones(3))).numpy(), -0.3)
    m.train()
    h = ta.tensor(-np.ones(6), requires_grad=True)
    out = nn.RReLU(0.1, 0.5, inplace=True)(h * 1)
    out.sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), -out.detach().numpy(), rtol=1e-12)


def test_softmax2d_is_softmax_over_the_channels_as_torch():
    x = np.random.default_rng(3).standard_normal((2, 3, 4, 5))
    _same(*_run(nn.Softmax2d(), torch.nn.Softmax2d(), x))
    _same(*_run(nn.Softmax2d(), torch.nn.Softmax2d(), x[0]))
    assert repr(nn.Softmax2d()) == repr(torch.nn.Softmax2d()) == "Softmax2d()"
    with pytest.raises(ta.ShapeError, match="Softmax2d: expected input to be 3D or 4D, got 2D"):
        nn.Softmax2d()(ta.tensor(x[0, 0]))
    with pytest.raises(ValueError, match="expected input to be 3D or 4D, got 2D instead"):
        torch.nn.Softmax2d()(torch.tensor(x[0, 0]))
