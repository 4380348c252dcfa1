"""nn.init (distributions checked by their statistics and against torch's formulas; zero-element
tensors and a Linear without inputs as torch's) and nn.utils.clip_grad_norm_ /
clip_grad_value_ (matched with torch)."""

import math
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn
from tinyattn.nn import init


def raises(cls, *fragments):
    return pytest.raises(cls, match=".*".join(fragments))


def test_calculate_gain_matches_torch():
    torch = pytest.importorskip("torch")
    for name, param in [("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                        ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]:
        assert init.calculate_gain(name, param) == pytest.approx(
            torch.nn.init.calculate_gain(name, param))
    with raises(ValueError, "calculate_gain", "'swish'"):
        init.calculate_gain("swish")


@pytest.mark.parametrize("fn,kwargs,low,high,std", [
    ("uniform_", {"a": -2.0, "b": 3.0}, -2.0, 3.0, 5 / math.sqrt(12)),
    ("xavier_uniform_", {"gain": 2.0}, -2 * math.sqrt(6 / 500), 2 * math.sqrt(6 / 500),
     2 * math.sqrt(2 / 500)),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, -1 / math.sqrt(300), 1 / math.sqrt(300),
     1 / math.sqrt(900)),
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"}, -math.sqrt(6 / 200),
     math.sqrt(6 / 200), math.sqrt(2 / 200)),
    ("normal_", {"mean": 1.0, "std": 0.5}, -np.inf, np.inf, 0.5),
    ("xavier_normal_", {}, -np.inf, np.inf, math.sqrt(2 / 500)),
    ("kaiming_normal_", {"nonlinearity": "relu"}, -np.inf, np.inf, math.sqrt(2 / 300)),
    ("trunc_normal_", {"std": 0.02, "a": -0.03, "b": 0.03}, -0.03, 0.03, None),
])
def test_init_draws_have_the_right_range_and_spread(fn, kwargs, low, high, std):
    ta.manual_seed(0)
    w = nn.Parameter(ta.zeros(200, 300, dtype=np.float64))  # fan_in 300, fan_out 200
    assert getattr(init, fn)(w, **kwargs) is w
    values = w.numpy()
    assert values.min() >= low and values.max() <= high
    if std is not None:
        assert values.std() == pytest.approx(std, rel=0.02)
    if np.isfinite(high):  # a uniform or truncated draw reaches near both ends
        assert values.max() > high - 0.01 * (high - low)
        assert values.min() < low + 0.01 * (high - low)


def test_trunc_normal_matches_the_truncated_distribution():
    ta.manual_seed(1)
    w = ta.zeros(100_000, dtype=np.float64)
    init.trunc_normal_(w)  # N(0, 1) on [-2, 2]: std 0.8796
    assert abs(w.numpy().mean()) < 0.01 and w.numpy().std() == pytest.approx(0.8796, rel=0.01)
    with raises(ValueError, "trunc_normal_", "a < b"):
        init.trunc_normal_(w, a=1.0, b=1.0)


@pytest.mark.parametrize("shape", [(4, 6), (6, 4), (3, 2, 2)])
def test_orthogonal_gives_orthonormal_rows_or_columns(shape):
    w = ta.zeros(*shape, dtype=np.float64)
    init.orthogonal_(w, gain=2.0)
    m = w.numpy().reshape(shape[0], -1)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, 4.0 * np.eye(len(gram)), atol=1e-12)


def test_zeros_ones_constant_eye_and_seeded_repeats():
    w = nn.Parameter(ta.randn(3, 3))
    assert np.all(init.zeros_(w).numpy() == 0) and np.all(init.ones_(w).numpy() == 1)
    assert np.all(init.constant_(w, 0.5).numpy() == 0.5)
    np.testing.assert_array_equal(init.eye_(w).numpy(), np.eye(3))
    draws = []
    for _ in range(2):
        ta.manual_seed(7)
        draws.append(init.xavier_normal_(ta.zeros(3, 4)).numpy())
    np.testing.assert_array_equal(*draws)


@pytest.mark.parametrize("fn,kwargs,std", [
    ("xavier_uniform_", {}, math.sqrt(2 / (288 + 576))),
    ("xavier_normal_", {"gain": 3.0}, 3 * math.sqrt(2 / (288 + 576))),
    ("kaiming_uniform_", {"nonlinearity": "relu"}, math.sqrt(2 / 288)),
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}, math.sqrt(2 / 576)),
])
def test_a_conv_weight_counts_its_kernel_in_the_fans_and_draws_around_0(fn, kwargs, std):
    """A (out, in, kh, kw) weight has fan_in = in kh kw and fan_out = out kh kw (torch's rule);
    every draw is centred on 0."""
    ta.manual_seed(2)
    w = ta.zeros(64, 32, 3, 3, dtype=np.float64)  # fan_in 288, fan_out 576
    values = getattr(init, fn)(w, **kwargs).numpy()
    assert values.std() == pytest.approx(std, rel=0.03)
    assert abs(values.mean()) < 0.05 * std


@pytest.mark.parametrize("fn", ["xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
                                "kaiming_normal_"])
def test_a_fan_error_names_the_function(fn):
    with raises(ta.ShapeError, f"^{fn}: fan in and fan out need a tensor of at least 2 dims"):
        getattr(init, fn)(ta.zeros(5))


def test_fans_need_two_dims():
    with raises(ta.ShapeError, "xavier_uniform_", "at least 2 dims", r"\(5,\)"):
        init.xavier_uniform_(ta.zeros(5))
    with raises(ValueError, "kaiming_normal_", "mode", "'fan'"):
        init.kaiming_normal_(ta.zeros(2, 2), mode="fan")


@pytest.mark.parametrize("fn", ["kaiming_uniform_", "kaiming_normal_", "xavier_uniform_",
                                "xavier_normal_"])
@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (0, 0), (2, 0, 5)])
def test_a_zero_element_tensor_is_returned_with_torchs_warning(fn, shape):
    w = ta.zeros(*shape)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        assert getattr(init, fn)(w) is w
    assert w.shape == shape
    if fn.startswith("kaiming"):  # torch's too, checked before the mode and the dims
        with pytest.warns(UserWarning, match="zero-element"):
            init.kaiming_uniform_(ta.zeros(0), mode="fan_out")


@pytest.mark.filterwarnings("ignore:Initializing zero-element")  # torch's, from its kaiming_
def test_a_linear_layer_without_inputs_builds_as_torchs():
    torch = pytest.importorskip("torch")
    for n_in, n_out in [(0, 3), (3, 0), (0, 0)]:
        ours = nn.Linear(n_in, n_out)
        theirs = torch.nn.Linear(n_in, n_out)
        assert [(k, p.shape) for k, p in ours.named_parameters()] == \
            [(k, tuple(p.shape)) for k, p in theirs.named_parameters()]
    assert not nn.Linear(0, 3).bias.numpy().any()  # bound 0 when fan_in is 0: zeros, as torch
    assert nn.Linear(3, 0)(ta.zeros(2, 3)).shape == (2, 0)
    layer, x = nn.Linear(0, 3), ta.zeros(2, 4, 0, requires_grad=True)  # the forward, batched
    layer(x).sum().backward()
    assert layer(x).shape == (2, 4, 3) and x.grad.shape == (2, 4, 0)
    assert layer.bias.grad.numpy().tolist() == [8.0, 8.0, 8.0] and layer.weight.grad.shape == (3, 0)


# ---- clipping ----------------------------------------------------------------------------------


def _grads_pair(torch, scale):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) * scale for s in [(3, 4), (5,), (2, 2, 2)]]
    ours = [nn.Parameter(ta.zeros(a.shape, dtype=np.float64)) for a in arrays]
    theirs = [torch.zeros(a.shape, dtype=torch.float64, requires_grad=True) for a in arrays]
    for p, tp, a in zip(ours, theirs, arrays, strict=True):
        p.grad, tp.grad = ta.tensor(a.copy()), torch.tensor(a.copy())
    return ours, theirs


@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, 3.0, 0, 0.5, -math.inf, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    """Every order torch takes, 0 and -inf included: those are the norm of the per-gradient
    norms (count of non-zero grads, smallest of their smallest |entries|), not of all entries."""
    torch = pytest.importorskip("torch")
    ours, theirs = _grads_pair(torch, 1.0)
    for p, tp in zip(ours, theirs, strict=True):  # a zero entry: order 0 and -inf see it
        p.grad.data[(0,) * p.ndim] = 0.0
        tp.grad[(0,) * tp.ndim] = 0.0
    got = nn.utils.clip_grad_norm_(ours, max_norm, norm_type, foreach=True)
    want = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type, foreach=True)
    assert isinstance(got, ta.Tensor) and got.item() == pytest.approx(want.item(), rel=1e-12)
    for p, tp in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 0.0])
def test_clip_grad_norm_defaults_empty_grads_and_one_tensor_as_torch(norm_type):
    """The defaults (order 2, no error on a non-finite norm), a parameter with an empty
    gradient among the others, and one tensor instead of a list, as torch."""
    torch = pytest.importorskip("torch")
    ours, theirs = _grads_pair(torch, 1.0)
    ours.append(nn.Parameter(ta.zeros(0, dtype=np.float64)))
    theirs.append(torch.zeros(0, dtype=torch.float64, requires_grad=True))
    ours[-1].grad, theirs[-1].grad = ta.zeros(0, dtype=np.float64), torch.zeros(0,
                                                                              dtype=torch.float64)
    got = nn.utils.clip_grad_norm_(ours, 0.5, norm_type)
    want = torch.nn.utils.clip_grad_norm_(theirs, 0.5, norm_type)
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    one, tone = ours[0], theirs[0]
    got = nn.utils.clip_grad_norm_(one, 0.1)  # a single tensor, default order 2
    want = torch.nn.utils.clip_grad_norm_(tone, 0.1)
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    np.testing.assert_allclose(one.grad.numpy(), tone.grad.numpy(), rtol=1e-12)
    assert nn.utils.get_total_norm(one.grad).item() == pytest.approx(
        torch.nn.utils.get_total_norm(tone.grad).item(), rel=1e-12)
    p = nn.Parameter(ta.zeros(2))
    p.grad = ta.tensor([np.inf, 1.0])
    assert nn.utils.clip_grad_norm_([p], 1.0).item() == np.inf  # no error by default
    assert nn.utils.parameters_to_vector(one).shape == (one.numel(),)
    with pytest.raises(ta.ShapeError, match="parameters_to_vector: got no parameters"):
        nn.utils.parameters_to_vector([])


def test_total_norm_then_clip_matches_torch():
    """get_total_norm and clip_grads_with_norm_, the two halves of clip_grad_norm_."""
    torch = pytest.importorskip("torch")
    ours, theirs = _grads_pair(torch, 2.0)
    got = nn.utils.get_total_norm([p.grad for p in ours], 3.0)
    want = torch.nn.utils.get_total_norm([tp.grad for tp in theirs], 3.0)
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    nn.utils.clip_grads_with_norm_(ours, 1.0, got)
    torch.nn.utils.clip_grads_with_norm_(theirs, 1.0, want)
    for p, tp in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-12)
    mixed = [ta.ones(3), ta.ones(2, dtype=np.float64)]  # float32 and float64: a float64 norm
    got = nn.utils.get_total_norm(mixed)
    want = torch.nn.utils.get_total_norm([torch.ones(3), torch.ones(2, dtype=torch.float64)])
    assert got.dtype == np.float64 and got.item() == pytest.approx(want.item())


def test_parameters_to_vector_and_back_match_torch():
    torch = pytest.importorskip("torch")
    a, b = nn.Parameter(ta.ones(2, 3)), nn.Parameter(ta.zeros(4))
    ta_, tb = torch.ones(2, 3, requires_grad=True), torch.zeros(4, requires_grad=True)
    vec = nn.utils.parameters_to_vector([a, b])
    tvec = torch.nn.utils.parameters_to_vector([ta_, tb])
    np.testing.assert_array_equal(vec.numpy(), tvec.detach().numpy())
    (vec * ta.arange(10.0)).sum().backward()  # on the graph: each parameter gets its piece
    (tvec * torch.arange(10.0)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), ta_.grad.numpy())
    np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())
    nn.utils.vector_to_parameters(ta.arange(10.0) + 1, [a, b])
    torch.nn.utils.vector_to_parameters(torch.arange(10.0) + 1, [ta_, tb])
    np.testing.assert_array_equal(a.numpy(), ta_.detach().numpy())
    np.testing.assert_array_equal(b.numpy(), tb.detach().numpy())
    with raises(ta.ShapeError, "vector_to_parameters", "10 entries", "(9,)"):
        nn.utils.vector_to_parameters(ta.arange(9.0), [a, b])
    with raises(TypeError, "vector_to_parameters", "list"):
        nn.utils.vector_to_parameters([1.0] * 10, [a, b])


def test_clip_grad_norm_refuses_a_nonfinite_norm_when_asked():
    p = nn.Parameter(ta.zeros(2))
    p.grad = ta.tensor([np.inf, 1.0])
    with raises(ta.GraphError, "clip_grad_norm_", "non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert nn.utils.clip_grad_norm_(nn.Parameter(ta.zeros(2)), 1.0).item() == 0.0  # no grads


def test_clip_grad_value_matches_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = _grads_pair(torch, 3.0)
    grad_before = ours[0].grad
    nn.utils.clip_grad_value_(ours, 1.5)
    torch.nn.utils.clip_grad_value_(theirs, 1.5)
    assert ours[0].grad is grad_before  # in place
    for p, tp in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(p.grad.numpy(), tp.grad.numpy())


def test_float16_gradients_are_clipped_by_their_norm_summed_in_float32():
    """300² overflows float16: summed in float16 the norm would be inf and every clipped
    gradient 0. torch accumulates in float32: norm 424.25, the gradients scaled to unit norm.
    Both clip functions (nn.utils.clip_grad_norm_, and optim.clip_grad_norm that training uses)."""
    from tinyattn import optim

    for norm_type, want in [(2.0, 424.25), (1.0, 600.0), (3.5, 365.75), (math.inf, 300.0)]:
        p = nn.Parameter(ta.zeros(2, dtype=np.float16))
        p.grad = ta.tensor(np.array([300.0, 300.0], np.float16))
        total = nn.utils.clip_grad_norm_([p], 1.0, norm_type)
        assert total.dtype == np.float16 and total.item() == pytest.approx(want, rel=1e-3)
        np.testing.assert_allclose(p.grad.numpy(), 300 / want, rtol=2e-3)
    p = nn.Parameter(ta.zeros(2, dtype=np.float16))
    p.grad = ta.tensor(np.array([300.0, 300.0], np.float16))
    assert optim.clip_grad_norm([p], 1.0) == pytest.approx(424.26, rel=1e-4)
    np.testing.assert_allclose(p.grad.numpy(), 0.7071, rtol=2e-3)


def _truncated_mean(mean, std, a, b):
    """The mean of N(mean, std²) restricted to [a, b], by quadrature (the density scaled to
    its largest value on [a, b], so that no tail underflows)."""
    lo = a if math.isfinite(a) else min(b, mean) - 12 * std  # (an infinite end: 12 std on)
    hi = b if math.isfinite(b) else max(a, mean) + 12 * std
    x = np.linspace(lo, hi, 200_001)
    log_density = -0.5 * ((x - mean) / std) ** 2
    w = np.exp(log_density - log_density.max())
    return float((x * w).sum() / w.sum())


@pytest.mark.parametrize("mean,std,a,b", [
    (0.0, 1.0, 4.0, 5.0), (0.0, 1.0, -5.0, -4.0), (1.0, 2.0, 13.0, 15.0), (0.0, 1.0, 9.0, 9.5),
    (0.0, 1.0, -40.0, -39.0), (0.0, 1.0, -1.0, 60.0), (0.0, 1.0, -math.inf, 0.5),
    (2.0, 0.5, 2.0, math.inf)])
def test_trunc_normal_fills_any_interval_by_inverse_cdf_as_torch(mean, std, a, b):
    """[4, 5] holds 3e-5 of N(0, 1): it was refused (redrawing would take too long); torch draws
    u in [Φ(a), Φ(b)] and returns Φ⁻¹(u), with a warning when the mean is more than 2 std from
    [a, b]. Every value lies in [a, b], their mean the truncated distribution's."""
    w = ta.empty(20_000, dtype=np.float64)
    far = mean < a - 2 * std or mean > b + 2 * std
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert init.trunc_normal_(w, mean, std, a, b, generator=ta.Generator().manual_seed(2)) \
            is w
    assert [str(c.message).startswith("mean is more than 2 std from [a, b] in "
                                      "nn.init.trunc_normal_") for c in caught] == [far] * far
    values = w.numpy()
    assert np.isfinite(values).all() and values.min() >= a and values.max() <= b
    width = min(b - a, 10 * std)
    assert values.mean() == pytest.approx(_truncated_mean(mean, std, a, b), abs=0.02 * width)
    again = ta.empty(20_000, dtype=np.float64)
    init.trunc_normal_(again, mean, std, a, b, generator=ta.Generator().manual_seed(2))
    np.testing.assert_array_equal(again.numpy(), values)  # the generator repeats it


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_trunc_normal_keeps_values_inside_bounds_the_dtype_cannot_hold(dtype):
    """b = 0.1 is not a float16 (nor float32) number: a draw just below it must not round up
    past it."""
    w = ta.empty(50_000, dtype=dtype)
    init.trunc_normal_(w, mean=0.1, std=1e-3, a=0.0999, b=0.1,
                       generator=ta.Generator().manual_seed(0))
    values = w.numpy().astype(np.float64)
    assert values.min() >= 0.0999 and values.max() <= 0.1
