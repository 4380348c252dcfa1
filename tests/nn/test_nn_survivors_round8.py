"""Checks that kill the nn mutants an eighth mutation run left alive, through the public API
with torch as the reference where it has the same thing:

- AdaptiveLogSoftmaxWithLoss: a target given as a list, a NumPy array or a Python int counts
  as the same target given as a tensor (torch refuses them; tinyattn's own convenience).
- nn.AvgPool2d(divisor_override=...): the module divides by the override, as torch's.
- nn.NLLLoss2d: its FutureWarning, word for word torch's (the link's case included).
- LazyLinear.load_state_dict: strict=True reports missing and unexpected keys as torch's
  (RuntimeError), strict=False returns them and materializes what it was given.
- Module.load_state_dict: a float value into an integer buffer (BatchNorm's
  num_batches_tracked) is truncated as torch's copy_; float64 into a float16 parameter rounds.
- prune.ln_structured on the "cupy" backend (tests/support/fake_cupy.py with CuPy's rule that
  a sort's kind is None or exactly "stable"): prunes as on NumPy.
- nn.Dropout2d(inplace=True): zeroes and scales its input in place and returns it, as torch's.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn
from tinyattn.nn.utils import prune

torch = pytest.importorskip("torch")

# --- AdaptiveLogSoftmaxWithLoss: a target that is not a tensor --------------------------------


@pytest.mark.parametrize("make", [list, np.array], ids=["list", "ndarray"])
def test_adaptive_log_softmax_takes_a_list_or_ndarray_target(make):
    # torch's forward calls target.dim() and raises AttributeError for either; tinyattn takes
    # them as the tensor they describe
    with pytest.raises(AttributeError):
        torch.nn.AdaptiveLogSoftmaxWithLoss(16, 10, [4, 7])(torch.randn(3, 16), make([1, 5, 9]))
    ta.manual_seed(0)
    m = nn.AdaptiveLogSoftmaxWithLoss(16, 10, [4, 7])
    x = ta.randn(3, 16)
    want = m(x, ta.tensor([1, 5, 9]))
    got = m(x, make([1, 5, 9]))
    assert got.output.tolist() == want.output.tolist()
    assert got.loss.item() == want.loss.item()
    # and an out-of-range class in it is refused as in a tensor
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        m(x, make([1, 5, 10]))


def test_adaptive_log_softmax_takes_a_python_int_as_an_unbatched_target():
    ta.manual_seed(1)
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4])
    x = ta.randn(8)
    want = m(x, ta.tensor(6))
    got = m(x, 6)
    assert tuple(got.output.shape) == ()
    assert got.output.item() == want.output.item()
    np.testing.assert_allclose(got.output.item(), m.log_prob(x.unsqueeze(0))[0, 6].item(),
                               rtol=1e-6)


# --- AvgPool2d's divisor_override ----------------------------------------------------------------


@pytest.mark.parametrize("divisor", [1, 3, 7])
def test_avg_pool2d_module_divides_by_its_divisor_override(divisor):
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 6)).astype(np.float32)
    kw = dict(kernel_size=2, stride=(1, 2), padding=1, ceil_mode=True,
              divisor_override=divisor)
    want = torch.nn.AvgPool2d(**kw)(torch.tensor(x)).numpy()
    got = nn.AvgPool2d(**kw)(ta.tensor(x)).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


# --- NLLLoss2d's deprecation warning -------------------------------------------------------------


def _future_warnings(make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make()
    return [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]


def test_nll_loss2d_warns_with_torchs_exact_text():
    want = _future_warnings(torch.nn.NLLLoss2d)
    assert len(want) == 1 and "torch.nn.NLLLoss " in want[0]
    assert _future_warnings(nn.NLLLoss2d) == want


# --- LazyLinear.load_state_dict: strict ----------------------------------------------------------


def test_lazy_linear_strict_load_reports_a_missing_key_as_torch():
    t_m = torch.nn.LazyLinear(3)
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bias"'):
        t_m.load_state_dict({"weight": torch.ones(3, 2)})
    m = nn.LazyLinear(3)  # (tinyattn's words; a RuntimeError as torch's)
    with pytest.raises(RuntimeError, match="nothing was loaded; missing keys: bias$"):
        m.load_state_dict({"weight": ta.ones(3, 2)})


def test_lazy_linear_strict_load_reports_an_unexpected_key_as_torch():
    t_m = torch.nn.LazyLinear(3)
    t_sd = {"weight": torch.ones(3, 2), "bias": torch.ones(3), "extra": torch.ones(1)}
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "extra"'):
        t_m.load_state_dict(t_sd)
    m = nn.LazyLinear(3)
    sd = {"weight": ta.ones(3, 2), "bias": ta.ones(3), "extra": ta.ones(1)}
    with pytest.raises(RuntimeError, match="nothing was loaded; unexpected keys: extra$"):
        m.load_state_dict(sd)


def test_lazy_linear_non_strict_load_returns_the_keys_and_materializes_what_it_got():
    t_m = torch.nn.LazyLinear(3)
    t_r = t_m.load_state_dict({"weight": torch.full((3, 2), 0.5), "extra": torch.ones(1)},
                              strict=False)
    m = nn.LazyLinear(3)
    r = m.load_state_dict({"weight": ta.full((3, 2), 0.5), "extra": ta.ones(1)}, strict=False)
    assert list(r.missing_keys) == list(t_r.missing_keys) == ["bias"]
    assert list(r.unexpected_keys) == list(t_r.unexpected_keys) == ["extra"]
    assert tuple(m.weight.shape) == tuple(t_m.weight.shape) == (3, 2)
    assert m.weight.tolist() == t_m.weight.tolist() == [[0.5, 0.5]] * 3


# --- load_state_dict: a value of another dtype ---------------------------------------------------


@pytest.mark.parametrize("value", [2.7, -3.9, 5.0])
def test_float_value_into_num_batches_tracked_is_truncated_as_torch(value):
    t_bn = torch.nn.BatchNorm1d(3)
    t_sd = t_bn.state_dict()
    t_sd["num_batches_tracked"] = torch.tensor(value)
    t_bn.load_state_dict(t_sd)
    bn = nn.BatchNorm1d(3)
    sd = bn.state_dict()
    sd["num_batches_tracked"] = ta.tensor(value)
    bn.load_state_dict(sd)
    assert bn.num_batches_tracked.dtype == ta.int64
    assert t_bn.num_batches_tracked.dtype == torch.int64
    assert bn.num_batches_tracked.item() == t_bn.num_batches_tracked.item() == int(value)


def test_float64_value_into_a_float16_parameter_rounds_as_torch():
    # (70000 is past float16's largest, 65504: inf, silently, as torch's copy_)
    w = np.array([[1 / 3, 2 / 3], [1e-5, 70000.0]])
    t_lin = torch.nn.Linear(2, 2).half()
    t_lin.load_state_dict({"weight": torch.tensor(w), "bias": torch.zeros(2, dtype=torch.float64)})
    lin = nn.Linear(2, 2).half()
    lin.load_state_dict({"weight": ta.tensor(w), "bias": ta.zeros(2, dtype=ta.float64)})
    assert lin.weight.dtype == ta.float16
    np.testing.assert_array_equal(lin.weight.detach().numpy(), t_lin.weight.detach().numpy())


# --- prune.ln_structured on the cupy backend -----------------------------------------------------


def test_ln_structured_on_cupy_prunes_as_on_numpy(monkeypatch):
    """CuPy's sort and argsort take kind None or "stable" only (ValueError otherwise, its
    ndarray._check_kind_sort); the fake CuPy is given that rule here."""
    support = str(Path(__file__).resolve().parents[1] / "support")
    monkeypatch.syspath_prepend(support)
    import fake_cupy  # tests/support

    # row norms 4, 2, 3, 2, 1: rows 0 and 2 kept, and of the tied 1 and 3 the first
    w = np.array([2.0, 1.0, 1.5, -1.0, 0.5], np.float32)[:, None] * np.array([1, -1, 1, 1])
    w = w.astype(np.float32)
    ref = nn.Linear(4, 5)
    with ta.no_grad():
        ref.weight.copy_(ta.tensor(w))
    prune.ln_structured(ref, "weight", amount=2, n=2, dim=0)

    fake_cupy.install(monkeypatch, kernels=False)
    cp = sys.modules["cupy"]
    numpy_argsort = cp.__getattr__("argsort")

    def argsort(a, axis=-1, kind=None):
        if kind is not None and kind != "stable":
            raise ValueError("kind can only be None or 'stable'")
        return numpy_argsort(a, axis=axis, kind=kind)

    monkeypatch.setattr(cp, "argsort", argsort, raising=False)
    m = nn.Linear(4, 5)
    with ta.no_grad():
        m.weight.copy_(ta.tensor(w))
    m = m.to("cupy")
    prune.ln_structured(m, "weight", amount=2, n=2, dim=0)
    assert ref.weight_mask[:, 0].tolist() == [1, 1, 1, 0, 0]
    np.testing.assert_array_equal(m.weight_mask.cpu().numpy(), ref.weight_mask.numpy())
    np.testing.assert_array_equal(m.weight.detach().cpu().numpy(), ref.weight.detach().numpy())
    assert m.weight.device.type == "cuda"


# --- Dropout2d(inplace=True) ---------------------------------------------------------------------


def test_dropout2d_inplace_changes_its_input_as_torch():
    t_x = torch.ones(4, 6, 2, 2)
    t_y = torch.nn.Dropout2d(0.5, inplace=True)(t_x)
    assert t_y is t_x
    ta.manual_seed(0)
    x = ta.ones(4, 6, 2, 2)
    version = x._version
    y = nn.Dropout2d(0.5, inplace=True)(x)
    assert x._version > version
    got = x.numpy()
    np.testing.assert_array_equal(y.numpy(), got)
    # whole channels zeroed, the rest scaled by 1/(1-p), in x itself
    per_channel = got.reshape(4, 6, 4)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(-1) == per_channel.max(-1)).all()
    assert 0 < (per_channel[..., 0] == 0).sum() < 24
    # inplace=False leaves its input as it was
    x2 = ta.ones(4, 6, 2, 2)
    nn.Dropout2d(0.5)(x2)
    assert (x2.numpy() == 1).all()


# --- the second draw's survivors ------------------------------------------------------------------


@pytest.mark.parametrize("cls,shape", [("FractionalMaxPool2d", (1, 2, 6, 6)),
                                       ("FractionalMaxPool3d", (1, 2, 5, 5, 5))])
def test_fractional_max_pool_takes_a_tuple_kernel_and_refuses_a_zero_in_it(cls, shape):
    n = len(shape) - 2
    pool = getattr(nn, cls)((2,) * n, output_size=(3,) * n)
    assert pool.kernel_size == (2,) * n
    out = pool(ta.tensor(np.random.default_rng(0).standard_normal(shape)))
    assert tuple(out.shape) == shape[:2] + (3,) * n
    with pytest.raises(ValueError, match=f"kernel_size must be greater than 0.*{cls}"):
        getattr(nn, cls)((0,) + (2,) * (n - 1), output_size=(3,) * n)


def test_remove_weight_norm_leaves_the_weight_it_computed_as_torch():
    w = np.random.default_rng(1).standard_normal((3, 4))
    lin, t_lin = nn.Linear(4, 3), torch.nn.Linear(4, 3)
    lin.weight.data = ta.tensor(w, dtype=ta.float32)
    t_lin.weight.data = torch.tensor(w, dtype=torch.float32)
    for m, utils in ((lin, nn.utils), (t_lin, torch.nn.utils)):
        utils.weight_norm(m)
        with (ta if m is lin else torch).no_grad():
            m.weight_g.mul_(2.0)
        m(ta.ones(1, 4) if m is lin else torch.ones(1, 4))  # (the hook recomputes weight)
        utils.remove_weight_norm(m)
    assert isinstance(lin.weight, nn.Parameter) and tuple(lin.weight.shape) == (3, 4)
    np.testing.assert_allclose(lin.weight.detach().numpy(), t_lin.weight.detach().numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(lin.weight.detach().numpy(), 2 * w, rtol=1e-6)


def test_remove_parametrizations_of_another_tensor_is_refused_by_name_as_torch():
    parametrize = nn.utils.parametrize
    lin = nn.Linear(3, 2)
    parametrize.register_parametrization(lin, "weight", nn.Identity())
    t_lin = torch.nn.Linear(3, 2)
    torch.nn.utils.parametrize.register_parametrization(t_lin, "weight", torch.nn.Identity())
    with pytest.raises(ValueError, match="does not have a parametrization on bias"):
        torch.nn.utils.parametrize.remove_parametrizations(t_lin, "bias")
    with pytest.raises(ValueError, match="remove_parametrizations.*parametrization on bias"):
        parametrize.remove_parametrizations(lin, "bias")
    assert parametrize.is_parametrized(lin, "weight")


def test_dropout1d_inplace_changes_its_input_as_torch():
    t_x = torch.ones(4, 6, 3)
    assert torch.nn.Dropout1d(0.5, inplace=True)(t_x) is t_x
    ta.manual_seed(0)
    x = ta.ones(4, 6, 3)
    version = x._version
    y = nn.Dropout1d(0.5, inplace=True)(x)
    assert x._version > version
    got = x.numpy()
    np.testing.assert_array_equal(y.numpy(), got)
    assert set(np.unique(got)) <= {0.0, 2.0}
    assert (got.min(-1) == got.max(-1)).all() and 0 < (got[..., 0] == 0).sum() < 24
    x2 = ta.ones(4, 6, 3)
    nn.Dropout1d(0.5)(x2)
    assert (x2.numpy() == 1).all()
