"""Checks for mutation-testing survivors in tinyattn.ops and tinyattn.higher_order (round 7);
each observes what its mutant broke:

- a custom autograd.Function whose backward gives a broadcast input a gradient of the output's
  shape: the create_graph pass sums it back to the input's shape (higher_order/function.py);
- the create_graph gradient of a view read off its input (diagonal, as_strided) is a
  scatter_add along dim 0, an int as torch's grad_fn._saved_dim has (higher_order/indexing.py);
- float16 remainder run again in float64 by gradcheck_graph (its form's non-float16 path,
  ops/half.py);
- float16 softshrink computes x ∓ lambd in float32 and rounds once, bit for bit as torch's
  (ops/half.py);
- einsum's size error names "a dim of '...'" for a dim the ellipsis covers (ops/index.py);
- the log_softmax op called with its default dim warns under detect_anomaly about rows fully
  masked along that dim, -1 (ops/softmax.py);
- histc_values' default range is [0, high] (low=0.0, as torch's histc min=0) (ops/special.py);
- the refusal of zeta's / gammainc's first-input derivative tells to "take the gradient with
  respect to the other input only" (ops/special_more.py);
- second derivatives (create_graph) of modified_bessel_k0/k1 and their scaled forms
  (higher_order/special_poly.py's _k) against torch's K0, K1 in the closed forms.
"""

import math
import warnings

import numpy as np
import pytest
import torch

import tinyattn as ta
from tinyattn.backends import backend
from tinyattn.errors import ShapeError
from tinyattn.ops import REGISTRY
from tinyattn.ops.special import histc_values

# ---- a custom Function's broadcast input, differentiated twice ------------------------------


def _scale_rows(m):
    """x * b, b broadcast over x's rows; backward gives b the gradient in x's shape (torch sums
    it back to b's shape)."""

    class ScaleRows(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, b):
            ctx.save_for_backward(x, b)
            return x * b

        @staticmethod
        def backward(ctx, g):
            x, b = ctx.saved_tensors
            return g * b, g * x  # (the second in x's shape, not b's)

    return ScaleRows


def test_create_graph_sums_a_function_gradient_back_to_its_broadcast_input():
    rng = np.random.default_rng(7)
    x0, b0 = rng.standard_normal((3, 4)), rng.standard_normal(4)
    results = []
    for m, make in ((ta, ta.tensor), (torch, torch.tensor)):
        x, b = make(x0, requires_grad=True), make(b0, requires_grad=True)
        y = _scale_rows(m).apply(x, b)
        gx, gb = m.autograd.grad((y * y).sum(), (x, b), create_graph=True)
        assert tuple(gb.shape) == (4,)
        hx, hb = m.autograd.grad((gb * gb).sum() + gx.sum(), (x, b))
        results.append([np.asarray(t.detach().numpy()) for t in (gx, gb, hx, hb)])
    for got, want in zip(*results, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# ---- the scatter-add of a view's create_graph gradient --------------------------------------


def _nodes(grad_fn):
    seen, stack = [], [grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None:
            seen.append(fn)
            stack += [n for n, _ in fn.next_functions]
    return seen


@pytest.mark.parametrize("view", [lambda t: t.diagonal(), lambda t: t.as_strided((3,), (4,))],
                         ids=["diagonal", "as_strided"])
def test_a_views_create_graph_gradient_is_a_scatter_add_along_dim_0(view):
    x = ta.tensor(np.arange(9.0).reshape(3, 3), requires_grad=True)
    v = ta.tensor([1.0, 2.0, 3.0], dtype=ta.float64, requires_grad=True)
    (g,) = ta.autograd.grad(view(x * x), x, v, create_graph=True)
    scatters = [fn for fn in _nodes(g.grad_fn) if fn.name() == "ScatterAddBackward0"]
    assert scatters
    for fn in scatters:  # (torch's scatter_add takes one int dim; its node saves that int)
        assert type(fn._saved_dim) is int and fn._saved_dim == 0
    # and the values: g = 2 x v on the diagonal, whose derivative in v is 2 x there
    np.testing.assert_array_equal(g.detach().numpy(), np.diag([0.0, 16.0, 48.0]))
    (gv,) = ta.autograd.grad(g.sum(), v)
    np.testing.assert_array_equal(gv.numpy(), [0.0, 8.0, 16.0])


# ---- float16 remainder, run again in float64 by gradcheck_graph -------------------------------


def test_gradcheck_graph_reruns_a_float16_remainder_in_float64():
    x = ta.tensor(np.array([2.5, -1.25, 3.0], np.float16), requires_grad=True)
    y = ta.tensor(np.array([-0.75, 0.5, 2.0], np.float16), requires_grad=True)
    with ta.record():
        loss = (x % y * x).sum()
    report = ta.gradcheck_graph(loss)
    labels = [check.label for check in report.checks]
    assert any(label.startswith("remainder#") for label in labels)
    assert report.ok


# ---- float16 softshrink: float32 arithmetic, one rounding ------------------------------------


def test_float16_softshrink_subtracts_lambd_in_float32_as_torch():
    # 1000 - (0.25 + 2⁻²⁵) is 999.75 in float32 (a float16 tie, to even: 1000), 999.5 exactly
    lambd = 0.25 + 2**-25
    x = np.array([1000.0, -1000.0, 999.5, 3.0, -3.0, 0.125], np.float16)
    want = torch.nn.functional.softshrink(torch.tensor(x), lambd).numpy()
    got = ta.nn.functional.softshrink(ta.tensor(x), lambd)
    assert got.dtype == ta.float16
    assert want[:2].tolist() == [1000.0, -1000.0]
    np.testing.assert_array_equal(got.numpy().view(np.uint16), want.view(np.uint16))


# ---- einsum's size error for a dim of the ellipsis ------------------------------------------


def test_einsum_size_error_names_a_dim_of_the_ellipsis():
    with pytest.raises(ShapeError, match=r"einsum: a dim of '\.\.\.' has size 4 in operand 1 "
                                         r"\(4, 3\) but 2 in operand 0 \(2, 3\)"):
        ta.einsum("...i,...i->...", ta.ones(2, 3), ta.ones(4, 3))
    with pytest.raises(ShapeError, match=r"einsum: subscript 'i' has size 4"):
        ta.einsum("ai,ai->a", ta.ones(2, 3), ta.ones(2, 4))


# ---- log_softmax's trap on fully masked rows -------------------------------------------------


def _masked_warnings(fn):
    with ta.autograd.detect_anomaly(), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in seen if "fully masked" in str(w.message)]


@pytest.mark.parametrize("call", [
    lambda x: REGISTRY["log_softmax"](x),  # the op's own default, dim=-1
    lambda x: ta.nn.functional.log_softmax(x, dim=-1),
    lambda x: ta.nn.functional.log_softmax(x.T.contiguous(), dim=0),
], ids=["op-default-dim", "dim=-1", "dim=0"])
def test_log_softmax_warns_about_rows_fully_masked_along_its_dim(call):
    inf = float("inf")
    x = ta.tensor([[0.0, 1.0, -inf], [-inf, -inf, -inf], [2.0, -inf, 0.5]], requires_grad=True)
    messages = _masked_warnings(lambda: call(x))
    assert len(messages) == 1 and "1 of 3 rows are fully masked" in messages[0]


def test_log_softmax_along_dim_0_does_not_count_rows_of_the_last_dim():
    inf = float("inf")
    # the last row is all -inf, but no column is: nothing is masked along dim 0
    x = ta.tensor([[0.0, 1.0], [-inf, -inf]], requires_grad=True)
    assert _masked_warnings(lambda: ta.nn.functional.log_softmax(x, dim=0)) == []
    assert len(_masked_warnings(lambda: REGISTRY["log_softmax"](x))) == 1


# ---- histc_values' default range ------------------------------------------------------------


def test_histc_values_default_range_starts_at_0_as_torch():
    x = np.array([0.5, 1.5, 2.0, -1.0])
    got = histc_values(x, bins=4, high=2.0, backend=backend("numpy"))
    want = torch.histc(torch.tensor(x), bins=4, max=2.0).numpy()  # torch's min=0
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, [0.0, 1.0, 0.0, 2.0])
    assert got.dtype == np.float64


# ---- the refused derivative's advice --------------------------------------------------------


@pytest.mark.parametrize("name", ["zeta", "gammainc", "gammaincc"])
def test_refused_first_input_derivative_says_to_take_the_other_input_only(name):
    a = ta.tensor([1.5, 2.0], dtype=ta.float64, requires_grad=True)
    b = ta.tensor([0.5, 1.0], dtype=ta.float64, requires_grad=True)
    out = getattr(ta.special, name)(a, b)
    with pytest.raises(NotImplementedError,
                       match=rf"{name}: the derivative with respect to .* is not implemented "
                             rf"\(as torch's {name}\); detach it, or take the gradient with "
                             "respect to the other input only"):
        out.sum().backward()
    # the advice works: the other input alone
    (gb,) = ta.autograd.grad(getattr(ta.special, name)(a.detach(), b).sum(), b)
    assert np.isfinite(gb.numpy()).all()


# ---- second derivatives of K0, K1 (create_graph) ---------------------------------------------


def _closed_forms(x):
    """(K0'', K1'') from torch's K0, K1: K0' = -K1, K1' = -K0 - K1/x."""
    k0 = torch.special.modified_bessel_k0(x).numpy()
    k1 = torch.special.modified_bessel_k1(x).numpy()
    xs = x.numpy()
    d2_k0 = k0 + k1 / xs
    d2_k1 = k1 + k0 / xs + 2 * k1 / xs**2
    return {"modified_bessel_k0": d2_k0, "modified_bessel_k1": d2_k1}, np.exp(xs)


@pytest.mark.parametrize("name", ["modified_bessel_k0", "modified_bessel_k1",
                                  "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"])
def test_second_derivative_of_k0_k1_matches_the_closed_forms(name):
    xs = np.array([0.3, 1.0, 2.5, 7.0])
    d2, ex = _closed_forms(torch.tensor(xs))
    base = name.replace("scaled_", "")
    k = {n: getattr(torch.special, n)(torch.tensor(xs)).numpy()
         for n in ("modified_bessel_k0", "modified_bessel_k1")}
    d1 = {"modified_bessel_k0": -k["modified_bessel_k1"],
          "modified_bessel_k1": -k["modified_bessel_k0"] - k["modified_bessel_k1"] / xs}
    if name.startswith("scaled_"):  # (e^x K)'' = e^x (K + 2K' + K'')
        want = ex * (k[base] + 2 * d1[base] + d2[base])
    else:
        want = d2[base]
    x = ta.tensor(xs, requires_grad=True)
    (g,) = ta.autograd.grad(getattr(ta.special, name)(x).sum(), x, create_graph=True)
    (h,) = ta.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-9, atol=0)
    assert math.isfinite(float(h.sum()))
