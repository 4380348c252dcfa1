"""Tests for the seed-2 mutation survivors of tinyattn.ops (round 10); each observes what its
mutant broke:

- scaled_dot_product_attention with k's batch dims not broadcasting with q's while v's match
  q's: the ShapeError naming the three shapes (ops/attention.py check_qkv), as torch refuses;
- nanquantile of an all-NaN row: its gradient goes to the row's first entry, as torch's, whatever
  the interpolation (ops/special.py _ranks clamps the rank -q to 0);
- trigamma past 1.3e154 (polygamma(1, x), digamma's gradient) gives 1/x without NumPy's
  overflow warning, as torch (a fix in ops/special.py trigamma_f64, found beside a survivor);
- the float64 Hurwitz zeta helper returns float64 values, not an object array (the public
  zeta and polygamma values are the same either way: _back casts them) (ops/special_more.py);
- the rotary op's sample tables are RoPE's tables (ops/nn.py _tables: the samples are built at
  import, so the gradcheck test that runs them cannot see a change made at run time);
- a named tensor keeps its name on the node it takes when a view of it (or it, for a view) is
  changed in place: the graph picture still labels it once the tensor is gone (ops/views.py);
- an in-place change through one view rebases every other view that sees a changed entry, past
  one that sees none (ops/views.py rebase), as torch's gradients;
- spherical_bessel_j0's second derivative is 0 at ±inf (ops/special_poly_derivatives.py).
"""

import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import viz
from tinyattn.backends import backend
from tinyattn.errors import ShapeError

# ---- attention: leading dims checked whichever of k and v differs from q ----------------------

_NO_BROADCAST = ("their leading (batch, head) dims do not broadcast together (from the right, "
                 "each pair equal or one of them 1)")


@pytest.mark.parametrize("impl", ["composite", "flash", "auto"])
@pytest.mark.parametrize("qs, ks, vs", [
    ((2, 3, 4, 8), (5, 3, 6, 8), (2, 3, 6, 8)),
    ((2, 4, 8), (3, 6, 8), (2, 6, 8)),
    ((4, 4, 8), (2, 6, 8), (4, 6, 8)),
])
def test_attention_refuses_k_batch_dims_that_do_not_broadcast_when_v_matches_q(qs, ks, vs, impl):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s) for s in (qs, ks, vs))
    with pytest.raises(RuntimeError):  # torch refuses these shapes too
        torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a) for a in (q, k, v)))
    fmt = [str(s) for s in (qs, ks, vs)]
    want = (f"scaled_dot_product_attention: q {fmt[0]}, k {fmt[1]}, v {fmt[2]}: "
            f"{_NO_BROADCAST}")
    with pytest.raises(ShapeError) as info:
        F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(k), ta.tensor(v), impl=impl)
    assert str(info.value) == want


# ---- nanquantile of rows of NaNs only ------------------------------------------------------


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("q", [0.0, 0.3, 0.5, 0.7, 1.0, (0.2, 0.6, 0.9)])
@pytest.mark.parametrize("dim, keepdim", [(1, False), (1, True), (0, True), (-1, False),
                                          (None, False)])
def test_nanquantile_of_an_all_nan_row_is_nan_with_the_gradient_of_torch(interpolation, q, dim,
                                                                         keepdim):
    torch = pytest.importorskip("torch")
    x = np.array([[np.nan] * 4, [1.0, np.nan, 3.0, 2.0], [np.nan] * 4])
    if dim == 0:
        x = np.ascontiguousarray(x.T)  # (the NaN rows along dim 0)
    if dim is None:
        x = np.full((2, 3), np.nan)
    tx = torch.tensor(x, requires_grad=True)
    tq = q if isinstance(q, float) else torch.tensor(q, dtype=torch.float64)
    want = torch.nanquantile(tx, tq, dim=dim, keepdim=keepdim, interpolation=interpolation)
    want.sum().backward()
    ax = ta.tensor(x, requires_grad=True)
    aq = q if isinstance(q, float) else ta.tensor(q, dtype=ta.float64)
    got = ta.nanquantile(ax, aq, dim=dim, keepdim=keepdim, interpolation=interpolation)
    got.sum().backward()
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.detach().numpy())  # (NaN where torch's)
    np.testing.assert_array_equal(ax.grad.numpy(), tx.grad.numpy())


# ---- trigamma of huge inputs: no RuntimeWarning ----------------------------------------------


def test_trigamma_of_huge_inputs_is_silent_and_matches_torch():
    """polygamma(1, x) and digamma's gradient past 1.3e154, where trigamma's recurrence loop
    squares z (unused there: z >= 10 already): ψ'(x) ≈ 1/x, without NumPy's overflow warning
    (a bug found next to the loop-count survivor, whose extra passes add exactly 0)."""
    torch = pytest.importorskip("torch")
    x = np.array([1e300, 1e200, 2e154, 1e154, 3.0, 0.25])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ta.special.polygamma(1, ta.tensor(x))
        t = ta.tensor(x, requires_grad=True)
        ta.special.digamma(t).sum().backward()
    want = torch.special.polygamma(1, torch.tensor(x)).numpy()  # (torch's: 1e-10 off at 3)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9)
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-9)
    np.testing.assert_allclose(got.numpy()[:4], 1 / x[:4], rtol=1e-15)


# ---- the float64 Hurwitz zeta helper -------------------------------------------------------


def test_the_float64_hurwitz_zeta_helper_returns_float64():
    """Its loop runs for q below 10 + s (the terms summed one by one): the sum starts as a
    float64 array of q's shape, so the result is float64 (an object array would be cast back
    by the op, but is many times slower)."""
    scipy_special = pytest.importorskip("scipy.special")
    from tinyattn.ops.special_more import hurwitz_zeta_f64

    s = np.array([[2.0, 3.5, 7.0], [1.5, 12.0, 40.0]])
    q = np.array([[0.25, 1.0, 4.5], [0.01, 2.0, 9.5]])
    for shape in [(2, 3), (3,), ()]:
        si, qi = (s, q) if shape == (2, 3) else (s[0], q[0]) if shape == (3,) else (s[0, 1],
                                                                                    q[0, 0])
        out = hurwitz_zeta_f64(backend("numpy"), si, qi)
        assert out.dtype == np.float64 and out.shape == shape
        np.testing.assert_allclose(out, scipy_special.zeta(si, qi), rtol=1e-13)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_zeta_and_polygamma_with_the_summing_loop_match_torch(dtype):
    torch = pytest.importorskip("torch")
    s = np.array([2.0, 3.5, 7.0, 1.5, 12.0], dtype=dtype)
    q = np.array([0.25, 1.0, 4.5, 0.01, 2.0], dtype=dtype)
    got = ta.special.zeta(ta.tensor(s), ta.tensor(q))
    want = torch.special.zeta(torch.tensor(s), torch.tensor(q))
    assert got.dtype == getattr(ta, dtype)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5 if dtype == "float32"
                               else 1e-12)
    got = ta.special.polygamma(3, ta.tensor(q))
    want = torch.special.polygamma(3, torch.tensor(q))
    assert got.dtype == getattr(ta, dtype)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5 if dtype == "float32"
                               else 1e-12)


# ---- the rotary op's sample tables ---------------------------------------------------------


@pytest.mark.parametrize("t, half, offset", [(5, 4, 0), (5, 4, 7), (4, 3, 0), (1, 1, 0)])
def test_rotary_sample_tables_are_ropes_tables(t, half, offset):
    from tinyattn.ops.nn import _tables

    cos, sin = _tables(t, half, offset)
    want_cos, want_sin = F.rotary_tables(2 * half, offset + t, dtype=np.float64)
    np.testing.assert_allclose(cos.values, want_cos.numpy()[offset:], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(sin.values, want_sin.numpy()[offset:], rtol=1e-12, atol=1e-15)


def test_the_rotary_ops_registered_samples_carry_ropes_tables():
    """The tables the gradcheck test runs the rotary op with (built at import): RoPE's, for
    the positions each sample starts at (0, or 7 for the (5, 8) sample)."""
    from tinyattn.ops import REGISTRY

    starts = {(2, 3, 5, 8): 0, (5, 8): 7, (2, 4, 6): 0, (1, 2): 0}
    for (x, cos, sin), _ in REGISTRY["rotary"].samples:
        t, half, offset = cos.values.shape[0], cos.values.shape[1], starts[x]
        want_cos, want_sin = F.rotary_tables(2 * half, offset + t, dtype=np.float64)
        np.testing.assert_allclose(cos.values, want_cos.numpy()[offset:], atol=1e-15)
        np.testing.assert_allclose(sin.values, want_sin.numpy()[offset:], atol=1e-15)


# ---- a tensor's name through an in-place change ---------------------------------------------


def test_a_named_tensor_keeps_its_name_when_a_view_of_it_is_changed_in_place():
    x = ta.randn(2, 3, requires_grad=True)
    h = x * 1.0
    h.name = "h"
    row = h[0]
    row.mul_(3.0)  # h takes a new node (copy_slices): its name goes with it
    assert h.grad_fn.name() == "CopySlicesBackward0"
    assert h._node.name == "h"
    loss = (h * 2.0).sum()
    del h, row  # only the graph remembers the name now
    labels = [line for line in viz.to_dot(loss).splitlines() if "label=" in line]
    assert any('label="h\\n(2, 3) float32"' in line for line in labels)


def test_a_named_view_keeps_its_name_when_its_base_is_changed_in_place():
    x = ta.randn(2, 3, requires_grad=True)
    h = x * 1.0
    row = h[0]
    row.name = "row"
    h.mul_(2.0)  # the view sees the change: it takes a new node (as_strided), its name with it
    assert row._node.name == "row"
    loss = (row * 2.0).sum()
    del row
    assert 'label="row\\n(3,) float32"' in viz.to_dot(loss)


def test_an_in_place_change_reaches_every_view_that_sees_it_past_one_that_does_not():
    """b's views u (untouched) and w (inside the change): x.mul_(c) through a third view
    rebases w even though u, met first, needs nothing; gradients as torch's."""
    torch = pytest.importorskip("torch")
    got = {}
    for lib in (torch, ta):
        a = lib.tensor([1.0, 2.0, 4.0], dtype=lib.float64, requires_grad=True)
        c = lib.tensor(3.0, dtype=lib.float64, requires_grad=True)
        b = a * 1
        x, u, w = b[0:2], b[2], b[1]
        x.mul_(c)
        (w * 10 + u).backward()
        got[lib.__name__] = (np.asarray(a.grad.detach().numpy()), float(c.grad))
    np.testing.assert_array_equal(got["tinyattn"][0], got["torch"][0])  # [0, 30, 1]
    assert got["tinyattn"][1] == got["torch"][1] == 20.0


def test_spherical_j0s_second_derivative_is_zero_at_infinity():
    """j0(x) = sin x / x flattens out at ±inf: its first and second derivatives are 0 there."""
    x = ta.tensor([float("inf"), -float("inf"), 1.0], dtype=ta.float64, requires_grad=True)
    (g,) = ta.autograd.grad(ta.special.spherical_bessel_j0(x).sum(), [x], create_graph=True)
    (gg,) = ta.autograd.grad(g.sum(), [x])
    assert g.detach().numpy()[:2].tolist() == [0.0, 0.0]
    assert gg.numpy()[:2].tolist() == [0.0, 0.0]
    one = 1.0  # at 1: j0'' = (2 - 1) sin 1 - 2 cos 1 (from (sin x / x)'' at x = 1)
    assert gg.numpy()[2] == pytest.approx((2 / one ** 3 - 1 / one) * np.sin(one)
                                          - 2 / one ** 2 * np.cos(one), rel=1e-12)
