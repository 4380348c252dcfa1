"""Tests for mutation-testing survivors in tinyattn.ops (each one observes what its mutant broke).

- clamp's float16 bound check names the bound it refuses (max as well as min);
- softplus's float16 VJP, re-run in float64 by gradcheck_graph, still gets its saved input;
- quantile's dim check on a 0-d tensor says the tensor has 0 dims;
- lgamma in float64 near 1 and 2 (the Taylor series whose coefficients are ζ(k)) is exact to
  ~1 ulp against math.lgamma;
- digamma in float64 at the whole numbers 1..10 is torch's value bit for bit (torch stops its
  recurrence at 10 and adds ψ(10)).
"""

import math

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn.errors import DimError, DTypeError


@pytest.mark.parametrize(("kw", "named"), [({"max": 70000.0}, "max"), ({"min": -70000.0}, "min")])
def test_a_float16_clamp_bound_past_65504_is_refused_naming_the_bound(kw, named):
    h = ta.tensor(np.ones(3, dtype=np.float16))
    with pytest.raises(DTypeError) as info:
        ta.clamp(h, **kw)
    msg = str(info.value)
    assert msg.startswith(f"clip: the bound ({named}, of clamp or clip)")
    assert "70000.0" in msg and "65504" in msg and "without overflow" in msg


def test_gradcheck_graph_reruns_a_float16_softplus_in_float64():
    x = ta.tensor(np.linspace(-2, 2, 6, dtype=np.float16), requires_grad=True)
    with ta.record():
        loss = F.softplus(x, beta=2.0).to(ta.float32).sum()
    report = ta.gradcheck_graph(loss, n_directions=1)
    checks = {c.label.split("#")[0]: (c.ok, c.skipped) for c in report.checks}
    assert checks["softplus"] == (True, "")


def test_quantile_of_a_0d_tensor_refuses_dim_1_saying_it_has_0_dims():
    torch = pytest.importorskip("torch")
    with pytest.raises(IndexError):
        torch.quantile(torch.tensor(1.0), 0.5, dim=1)
    with pytest.raises(DimError) as info:  # (an IndexError, as torch's)
        ta.quantile(ta.tensor(1.0), 0.5, dim=1)
    msg = str(info.value)
    assert "quantile" in msg and "dim 1" in msg and "0 dims" in msg and "-1..0" in msg
    for dim in (0, -1):  # a 0-d tensor's dims, as torch's
        assert ta.quantile(ta.tensor(3.0), 0.5, dim=dim).item() == 3.0


def test_lgamma_float64_near_one_and_two_matches_math_lgamma():
    x = np.array([0.25, 0.5, 0.75, 1.25, 1.5, 1.75, 2.25, 3.7, 7.5])
    got = ta.lgamma(ta.tensor(x)).numpy()
    want = np.array([math.lgamma(v) for v in x])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_digamma_float64_at_whole_numbers_is_torchs_bit_for_bit():
    torch = pytest.importorskip("torch")
    x = np.arange(1.0, 11.0)
    got = ta.digamma(ta.tensor(x)).numpy()
    np.testing.assert_array_equal(got, torch.digamma(torch.tensor(x)).numpy())
    assert got[-1] == 2.25175258906672110764  # ψ(10), torch's PSI_10
    assert got[0] == pytest.approx(-0.5772156649015329, rel=1e-15)  # ψ(1) = -γ


# ---- a second draw (2026-11-28, after the ops changed) ------------------------------------------


def test_a_float16_celu_with_alpha_zero_is_refused_as_the_float32_one():
    for dtype in (ta.float16, ta.float32):
        with pytest.raises(ValueError, match="^celu: alpha must not be 0"):
            F.celu(ta.tensor([1.0, -1.0], dtype=dtype), alpha=0)


def test_unique_rows_counts_a_repeat_that_is_not_the_first_row_once():
    torch = pytest.importorskip("torch")
    rows = np.array([[1, 2], [0, 0], [1, 2], [0, 0], [3, 1]])
    values, inverse, counts = ta.unique(ta.tensor(rows), dim=0, return_inverse=True,
                                        return_counts=True)
    want = torch.unique(torch.tensor(rows), dim=0, return_inverse=True, return_counts=True)
    for got, exp in zip((values, inverse, counts), want, strict=True):
        np.testing.assert_array_equal(got.numpy(), exp.numpy())


def test_an_as_strided_view_past_its_inputs_last_entry_is_refused_by_name_in_backward():
    """A strided leaf (from_numpy of floats 0, 2, .., 8 of 12) read by as_strided at 0, 5 and
    10: 10 lies past the leaf's last entry, so that part of the gradient has nowhere to go: a
    GraphError that says so (not an IndexError of the lookup past its last entry)."""
    x = ta.from_numpy(np.arange(12.0)[:10:2]).requires_grad_()
    s = x.as_strided((3,), (5,), 0)
    np.testing.assert_array_equal(s.detach().numpy(), [0.0, 5.0, 10.0])
    with pytest.raises(ta.GraphError, match=r"^as_strided: the view \(3,\) .* reads memory "
                                            r"outside its input \(5,\)"):
        s.sum().backward()
