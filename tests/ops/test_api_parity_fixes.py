"""Parity fixes found by comparing with PyTorch: xlogy's gradients, masked_fill with a tensor
value, std of a constant slice, nll_loss with every target ignored, median with NaN, movedim's
repeated dims, einsum's broadcast gradients, glu and chunk on empty dims, error messages
that name the op the user called, F.pad's default value and the paddings torch refuses,
similarities of shapes that do not broadcast, and embedding's padding_idx. Each compares with
torch in float64 where torch has the op."""

import math
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name

torch = pytest.importorskip("torch")
TF = torch.nn.functional

NAN, INF = math.nan, math.inf


def pair(values, requires_grad=True):
    """The same float64 values as a tinyattn leaf and a torch leaf."""
    a = np.asarray(values, dtype=np.float64)
    return (ta.tensor(a, dtype=ta.float64, requires_grad=requires_grad),
            torch.tensor(a, dtype=torch.float64, requires_grad=requires_grad))


def same(got, want):
    """Equal values (NaN where torch has NaN, the same infinities) within float64 rounding."""
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    got = got.numpy() if isinstance(got, ta.Tensor) else np.asarray(got)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


# ---- 1. xlogy -----------------------------------------------------------------------------------


def test_xlogy_values_and_both_gradients_match_torch():
    """x = 0 gets log(y) as its gradient (0 only where y <= 0), y gets x / y (NaN at x = y = 0),
    NaNs propagate as torch's; the forward is quiet (the logs of y <= 0 are masked out)."""
    xs = [0.0, 1.0, 0.0, 0.0, NAN, 0.0, 2.0, -1.0, 0.0, 0.0, 3.0]
    ys = [3.0, 3.0, 0.0, NAN, 1.0, -1.0, 0.0, 2.0, -INF, INF, 0.5]
    x, tx = pair(xs)
    y, ty = pair(ys)
    out = ta.xlogy(x, y)  # (pyproject turns a RuntimeWarning into an error)
    want = torch.xlogy(tx, ty)
    same(out, want)
    with np.errstate(divide="ignore", invalid="ignore"):  # x / y at y = 0: inf, NaN
        (out * ta.arange(1, 12, dtype=ta.float64)).sum().backward()
    (want * torch.arange(1, 12, dtype=torch.float64)).sum().backward()
    keep = [i for i in range(len(xs)) if not (xs[i] == 0 and ys[i] == INF)]  # torch: inf
    same(x.grad.numpy()[keep], tx.grad.numpy()[keep])
    same(y.grad, ty.grad)
    assert x.grad.numpy()[0] == pytest.approx(math.log(3.0))  # was 0 (y replaced by 1)


def test_xlogy_the_reported_case_and_a_number_or_method_form():
    x, tx = pair([0.0, 1.0])
    y = ta.tensor([3.0, 3.0], dtype=ta.float64)
    ta.xlogy(x, y).sum().backward()
    torch.xlogy(tx, torch.tensor([3.0, 3.0], dtype=torch.float64)).sum().backward()
    same(x.grad, tx.grad)
    z, tz = pair([0.0, 2.0])
    z.xlogy(3.0).sum().backward()
    tz.xlogy(3.0).sum().backward()
    same(z.grad, tz.grad)


# ---- 2. masked_fill with a tensor value ---------------------------------------------------------


@pytest.mark.parametrize("form", ["method", "functional", "in place"])
def test_masked_fill_with_a_0d_tensor_value_passes_its_gradient(form):
    mask = [[True, False, True], [False, True, True]]
    x, tx = pair(np.arange(6.0).reshape(2, 3))
    v, tv = pair(2.5)
    tm = torch.tensor(mask)
    if form == "method":
        out = x.masked_fill(ta.tensor(mask), v)
    elif form == "functional":
        out = F.masked_fill(x, ta.tensor(mask), v)
    else:
        out = (x * 1.0).masked_fill_(ta.tensor(mask), v)
    want = tx.masked_fill(tm, tv) if form != "in place" else (tx * 1.0).masked_fill_(tm, tv)
    same(out, want)
    weights = np.arange(1.0, 7.0).reshape(2, 3)
    (out * ta.tensor(weights)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    same(v.grad, tv.grad)  # the filled entries' weights: 1 + 3 + 5 + 6
    same(x.grad, tx.grad)


def test_masked_fill_tensor_value_keeps_the_dtype_and_numbers_keep_the_op():
    x = ta.zeros(3, dtype=ta.float32, requires_grad=True)
    v = ta.tensor(2.0, dtype=ta.float64, requires_grad=True)
    out = x.masked_fill(ta.tensor([True, False, True]), v)
    assert out.dtype == ta.float32  # x's dtype, as torch
    out.sum().backward()
    assert v.grad.item() == 2.0
    assert x.masked_fill(ta.tensor([True, False, True]), 2.0).grad_fn.op.name == "masked_fill"
    ints = ta.tensor([2, 3]).masked_fill(ta.tensor([True, False]), ta.tensor(1.5))
    same(ints, torch.tensor([2, 3]).masked_fill(torch.tensor([True, False]), torch.tensor(1.5)))
    with pytest.raises(ta.ShapeError, match=r"masked_fill: the value must be a number or a 0-d "
                       r"tensor, got a tensor of shape \(1,\)"):
        x.masked_fill(ta.tensor([True, False, True]), ta.tensor([1.0]))
    with pytest.raises(ta.ShapeError, match=r"masked_fill: mask \(4,\) does not broadcast"):
        x.masked_fill(ta.tensor([True] * 4), ta.tensor(1.0))


# ---- 3. std of a constant slice -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["unbiased", "biased", "std_mean", "correction=2"])
def test_std_of_a_constant_slice_has_torch_gradient(kind):
    """0 where the slice is constant (not 0 * inf = NaN); NaN where torch's is (n <= 1)."""
    values = [[1.0, 1.0, 1.0], [1.0, 2.0, 4.0], [5.0, 5.0, 5.0]]
    x, tx = pair(values)
    if kind == "std_mean":
        s, m = ta.std_mean(x, 1)
        ts, tm = torch.std_mean(tx, 1)
        out, want = s * 2 + m, ts * 2 + tm
    elif kind == "correction=2":
        out, want = x.std(0, correction=2), tx.std(0, correction=2)
    else:
        out, want = x.std(1, unbiased=kind == "unbiased"), tx.std(1, unbiased=kind == "unbiased")
    same(out, want)
    out.sum().backward()
    want.sum().backward()
    same(x.grad, tx.grad)
    assert np.isfinite(x.grad.numpy()).all()


def test_std_over_one_entry_and_in_float16():
    x, tx = pair([[1.0], [2.0]])
    with np.errstate(divide="ignore", invalid="ignore"), pytest.warns(UserWarning):
        ts = tx.std(1)  # torch warns of the degrees of freedom
    with np.errstate(divide="ignore", invalid="ignore"):
        s = x.std(1)
        s.sum().backward()
    ts.sum().backward()
    same(s, ts)
    same(x.grad, tx.grad)  # NaN in both
    h = ta.tensor([[1.0, 1.0, 1.0]], dtype=ta.float16, requires_grad=True)
    out = h.std(1)
    assert out.dtype == ta.float16
    out.sum().backward()
    assert h.grad.dtype == ta.float16 and (h.grad.numpy() == 0).all()


# ---- 4. nll_loss / cross_entropy with every target ignored --------------------------------------


LOSSES = {
    "nll_loss": lambda lib, x, t, w: lib.nll_loss(x, t),
    "nll_loss weight": lambda lib, x, t, w: lib.nll_loss(x, t, weight=w),
    "nll_loss sum": lambda lib, x, t, w: lib.nll_loss(x, t, reduction="sum"),
    "cross_entropy": lambda lib, x, t, w: lib.cross_entropy(x, t),
    "cross_entropy weight": lambda lib, x, t, w: lib.cross_entropy(x, t, weight=w),
    "cross_entropy smoothing": lambda lib, x, t, w: lib.cross_entropy(x, t, label_smoothing=0.1),
    "cross_entropy weight smoothing": lambda lib, x, t, w: lib.cross_entropy(
        x, t, weight=w, label_smoothing=0.2),
}


@pytest.mark.parametrize("targets", [[-100, -100, -100], [-100, 2, -100]],
                         ids=["all ignored", "one kept"])
@pytest.mark.parametrize("name", LOSSES)
def test_losses_with_ignored_targets_match_torch(name, targets):
    """Every target ignored: the loss is NaN ('mean'), its gradient 0, as torch's."""
    rng = np.random.default_rng(0)
    x, tx = pair(rng.standard_normal((3, 4)))
    w = np.array([1.0, 2.0, 0.5, 1.5])
    loss = LOSSES[name](F, x, ta.tensor(targets), ta.tensor(w, dtype=ta.float64))
    want = LOSSES[name](TF, tx, torch.tensor(targets), torch.tensor(w, dtype=torch.float64))
    same(loss, want)
    loss.backward()
    want.backward()
    same(x.grad, tx.grad)
    assert np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("target", [-100, 1])
def test_nll_loss_of_one_item_ignored_or_not(target):
    x, tx = pair([-1.0, -2.0, -0.5])
    loss, want = F.nll_loss(x, ta.tensor(target)), TF.nll_loss(tx, torch.tensor(target))
    same(loss, want)
    loss.backward()
    want.backward()
    same(x.grad, tx.grad)


def test_nll_loss_ignores_minus_inf_in_ignored_rows():
    """An ignored row counts for nothing, even a -inf log-probability in it (not -inf * 0)."""
    values = [[-INF, -1.0, -2.0], [-0.5, -1.0, -3.0]]
    for reduction in ("none", "sum", "mean"):
        x, tx = pair(values)
        loss = F.nll_loss(x, ta.tensor([-100, 1]), reduction=reduction)
        want = TF.nll_loss(tx, torch.tensor([-100, 1]), reduction=reduction)
        same(loss, want)
        loss.sum().backward()
        want.sum().backward()
        same(x.grad, tx.grad)


# ---- 5. median and NaN --------------------------------------------------------------------------


MEDIAN_CASES = {
    "the report": [[1.0, NAN, 3.0]],
    "rows with and without NaN": [[1.0, NAN, 3.0], [NAN, 2.0, NAN], [3.0, 1.0, 2.0]],
    "two NaNs": [[1.0, NAN, NAN, 3.0]],
    "ties": [[1.0, 2.0, 2.0, 3.0], [4.0, 4.0, 4.0, 4.0]],
    "no NaN": [[0.3, -1.0, 2.0, 0.5, 0.1], [9.0, 8.0, 7.0, 6.0, 5.0]],
}


@pytest.mark.parametrize("values", MEDIAN_CASES.values(), ids=MEDIAN_CASES.keys())
def test_median_with_a_dim_matches_torch(values):
    x, tx = pair(values)
    got, want = x.median(1), tx.median(1)
    same(got.values, want.values)
    assert got.indices.tolist() == want.indices.tolist()
    assert got.indices.dtype == ta.int64
    (got.values * ta.arange(1, len(values) + 1, dtype=ta.float64)).sum().backward()
    (want.values * torch.arange(1, len(values) + 1, dtype=torch.float64)).sum().backward()
    same(x.grad, tx.grad)
    kept = ta.tensor(values).median(1, keepdim=True)
    assert kept.values.shape == (len(values), 1) and kept.indices.shape == (len(values), 1)


@pytest.mark.parametrize("values", MEDIAN_CASES.values(), ids=MEDIAN_CASES.keys())
def test_median_of_all_matches_torch(values):
    """NaN if any entry is NaN; the gradient shared by the tied entries (the NaNs)."""
    x, tx = pair(values)
    got, want = x.median(), tx.median()
    same(got, want)
    assert got.shape == ()
    got.backward()
    want.backward()
    same(x.grad, tx.grad)


def test_median_of_empty_tensors():
    got = ta.tensor([], dtype=ta.float64).median()
    assert math.isnan(got.item())
    assert math.isnan(torch.tensor([], dtype=torch.float64).median().item())
    x = ta.zeros(0, 3, dtype=ta.float64, requires_grad=True)
    x.median().backward()
    assert x.grad.shape == (0, 3)
    per_row = ta.zeros(0, 3).median(1)
    want = torch.zeros(0, 3).median(1)
    assert per_row.values.shape == tuple(want.values.shape) == (0,)
    with pytest.raises(ta.DimError, match=r"median: dim 1 of a tensor of shape \(2, 0\) is "
                       "empty"):
        ta.zeros(2, 0).median(1)
    assert ta.tensor([[3, 1, 2]]).median().item() == 2  # integers: no NaN to look for


# ---- 6. movedim ---------------------------------------------------------------------------------


@pytest.mark.parametrize("source, destination, which", [
    ((0, 1), (2, 2), "destination"), ((0, 1), (2, -1), "destination"),
    ((0, 0), (1, 2), "source"), ((0, -3), (1, 2), "source")])
def test_movedim_refuses_a_repeated_dim(source, destination, which):
    with pytest.raises(RuntimeError, match="repeated dim"):
        torch.zeros(2, 3, 4).movedim(source, destination)
    with pytest.raises(ta.DimError, match=rf"movedim: repeated dim in {which} .*\(2, 3, 4\)"):
        ta.zeros(2, 3, 4).movedim(source, destination)


@pytest.mark.parametrize("source, destination", [((0, 1), (2, 0)), (0, -1), ((2, 0), (0, 1)),
                                                 ((0, 1, 2), (2, 0, 1))])
def test_movedim_moves_as_torch(source, destination):
    a = np.arange(24.0).reshape(2, 3, 4)
    same(ta.tensor(a).movedim(source, destination), torch.tensor(a).movedim(source, destination))


# ---- 7. einsum with broadcast size-1 dims -------------------------------------------------------


EINSUMS = [("ij,ij->ij", (1, 3), (2, 3)), ("...ij,...jk", (1, 2, 3), (5, 3, 4)),
           ("...ij,...jk->...ik", (5, 2, 3), (1, 3, 4)), ("ij,ij->", (2, 3), (1, 3)),
           ("ij,jk->ik", (2, 1), (3, 4)), ("bij,bjk->bik", (1, 2, 3), (4, 3, 5)),
           ("i,i->", (1,), (4,)), ("ij,kj->ik", (2, 1), (3, 4)), ("ii,ij->j", (1, 1), (3, 4))]


@pytest.mark.parametrize("equation, shape_a, shape_b", EINSUMS)
def test_einsum_gradients_sum_back_over_broadcast_dims(equation, shape_a, shape_b):
    rng = np.random.default_rng(1)
    a, ta_ = pair(rng.standard_normal(shape_a))
    b, tb = pair(rng.standard_normal(shape_b))
    out, want = ta.einsum(equation, a, b), torch.einsum(equation, ta_, tb)
    same(out, want)
    (out * out).sum().backward()
    (want * want).sum().backward()
    same(a.grad, ta_.grad)
    same(b.grad, tb.grad)


def test_einsum_the_reported_case():
    a = ta.ones(1, 3, requires_grad=True)
    b = ta.ones(2, 3, requires_grad=True)
    ta.einsum("ij,ij->ij", a, b).sum().backward()
    assert a.grad.tolist() == [[2.0, 2.0, 2.0]] and b.grad.tolist() == [[1.0] * 3] * 2


# ---- 8. glu and chunk on empty dims -------------------------------------------------------------


@pytest.mark.parametrize("shape, dim", [((2, 0), -1), ((0, 4), -1), ((4, 0), 0), ((2, 6), 1)])
def test_glu_on_empty_and_full_tensors_matches_torch(shape, dim):
    a = np.random.default_rng(2).standard_normal(shape)
    x, tx = pair(a)
    out, want = F.glu(x, dim), TF.glu(tx, dim)
    same(out, want)
    out.sum().backward()
    want.sum().backward()
    same(x.grad, tx.grad)


@pytest.mark.parametrize("shape, chunks, dim", [((0,), 3, 0), ((0, 4), 2, 0), ((5,), 4, 0),
                                                ((4, 0), 2, 1), ((3,), 5, 0)])
def test_chunk_pieces_match_torch(shape, chunks, dim):
    got = [tuple(p.shape) for p in ta.zeros(*shape).chunk(chunks, dim)]
    assert got == [tuple(p.shape) for p in torch.zeros(*shape).chunk(chunks, dim)]


def test_split_sizes_of_zero_and_below():
    assert [tuple(p.shape) for p in ta.zeros(0).split(0)] == [(0,)]
    assert [tuple(p.shape) for p in ta.zeros(0).split(2)] == [(0,)]
    with pytest.raises(ValueError, match="split: split_size must be > 0"):
        ta.zeros(4).split(0)
    with pytest.raises(ValueError, match="split: split_size must be > 0"):
        ta.zeros(4).split(-1)


# ---- 9. errors that say what is wrong, under the name of the op the user called ------------------


def test_chunk_of_zero_or_a_float():
    with pytest.raises(ValueError, match=r"chunk: chunks must be > 0, got 0 .*\(4,\)"):
        ta.zeros(4).chunk(0)
    with pytest.raises(ValueError, match="chunk: chunks must be > 0, got -1"):
        ta.chunk(ta.zeros(4), -1)
    with pytest.raises(TypeError, match="chunk: chunks must be an int, got float"):
        ta.zeros(4).chunk(2.0)


def test_searchsorted_with_mismatched_leading_dims():
    with pytest.raises(ta.ShapeError, match=r"searchsorted: the sorted sequence \(2, 3\) must "
                       r"be 1-D, or have the leading dims .* of the values \(3, 2\)"):
        ta.searchsorted(ta.zeros(2, 3), ta.zeros(3, 2))
    with pytest.raises(ta.ShapeError, match=r"searchsorted: .*\(2, 3\).*\(\)"):
        ta.searchsorted(ta.zeros(2, 3), ta.tensor(1.0))
    seq = [[1.0, 2.0, 3.0], [0.0, 5.0, 6.0]]
    vals = [[2.5, 0.0], [5.0, 7.0]]
    for right in (False, True):
        assert ta.searchsorted(ta.tensor(seq), ta.tensor(vals), right=right).tolist() == \
            torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right).tolist()
    assert ta.searchsorted(ta.zeros(2, 0, 3), ta.zeros(2, 0, 5)).shape == (2, 0, 5)


@pytest.mark.parametrize("power", [lambda: ta.tensor([2, 3]) ** -1,
                                   lambda: ta.tensor([2, 3]) ** ta.tensor([-1, 1]),
                                   lambda: 2 ** ta.tensor([-1, 1]),
                                   lambda: ta.pow(ta.tensor([2, 3]), -2),
                                   lambda: ta.tensor([2, 3]).pow_(-1)],
                         ids=["number", "tensor", "reflected", "function", "in place"])
def test_integer_to_a_negative_power_is_a_dtype_error(power):
    with pytest.raises(RuntimeError, match="negative integer powers"):
        torch.tensor([2, 3]) ** -1
    with pytest.raises(ta.DTypeError, match=r"pow_?: integers cannot be raised to a negative "
                       r"integer power \(base: .*, exponent: .*\).*float"):
        power()


def test_pow_keeps_its_other_errors_and_results():
    assert (ta.tensor([2, 3]) ** 2).tolist() == [4, 9]
    same(ta.tensor([2.0, 4.0], dtype=ta.float64) ** -1, torch.tensor([0.5, 0.25]).double())
    with pytest.raises(ta.ShapeError, match="pow: inputs"):
        ta.zeros(2, 3) ** ta.zeros(4)


@pytest.mark.parametrize("reduce", ["prod", "median"])
def test_scatter_reduce_with_an_unknown_reduction_is_a_value_error(reduce):
    with pytest.raises(ValueError) as caught:
        ta.zeros(3).scatter_reduce(0, ta.tensor([0]), ta.ones(1), reduce)
    assert type(caught.value) is ValueError  # not a ShapeError: no shape is wrong
    assert "scatter_reduce" in str(caught.value) and repr(reduce) in str(caught.value)
    assert "sum, mean, amax, amin" in str(caught.value)


def test_out_of_range_indices_name_the_op_called():
    with pytest.raises(ta.DimError, match=r"^index_select: index 5 is out of range for dim 0 "
                       r"of size 3 \(input \(3,\), index \(2,\)\)$"):
        ta.zeros(3).index_select(0, ta.tensor([1, 5]))
    with pytest.raises(ta.DimError, match=r"^gather: index 5 is out of range for dim 1 of size "
                       r"3 \(input \(2, 3\), index \(1, 1\)\)$") as caught:
        ta.zeros(2, 3).gather(1, ta.tensor([[5]]))
    assert "array(" not in str(caught.value)
    with pytest.raises(ta.DimError, match=r"^take_along_dim: index -4 is out of range") as caught:
        ta.zeros(2, 3).take_along_dim(ta.tensor([[1], [-4]]), 1)
    assert "array(" not in str(caught.value)
    with pytest.raises(ta.DimError, match=r"select: index 3 is out of range for dim 1 of size 3"):
        ta.zeros(2, 3).select(1, 3)
    assert ta.zeros(2, 3).select(1, -3).shape == (2,)
    x, tx = pair(np.arange(6.0).reshape(2, 3))  # the in-range paths are unchanged
    same(x.index_select(1, ta.tensor([2, 0])), tx.index_select(1, torch.tensor([2, 0])))
    same(x.gather(1, ta.tensor([[2], [0]])), tx.gather(1, torch.tensor([[2], [0]])))


def test_unflatten_and_products_name_themselves():
    with pytest.raises(ta.ShapeError, match=r"^unflatten: sizes \(4, 2\) do not multiply up to "
                       r"the size 6 of dim 0 \(shape \(6,\)\)"):
        ta.zeros(6).unflatten(0, (4, 2))
    for sizes in [(-1, -1), (4, -1), (0, -1)]:
        with pytest.raises(ta.ShapeError, match="^unflatten: "):
            ta.zeros(6).unflatten(0, sizes)
    assert ta.zeros(2, 6).unflatten(1, (3, -1)).shape == (2, 3, 2)
    assert ta.zeros(0, 2).unflatten(0, (5, 0)).shape == (5, 0, 2)
    with pytest.raises(ta.ShapeError, match=r"^mv: \(2, 3\) @ \(4,\): inner dims 3 and 4"):
        ta.zeros(2, 3).mv(ta.zeros(4))
    with pytest.raises(ta.ShapeError, match=r"^mm: \(2, 3\) @ \(4, 2\): inner dims 3 and 4"):
        ta.zeros(2, 3).mm(ta.zeros(4, 2))
    with pytest.raises(ta.ShapeError, match=r"^bmm: \(2, 2, 3\) @ \(2, 4, 2\): inner dims"):
        ta.zeros(2, 2, 3).bmm(ta.zeros(2, 4, 2))


@pytest.mark.parametrize("repeats", [2.5, 2.0, True, [1.5, 2.0]],
                         ids=["float", "whole float", "bool", "list of floats"])
def test_repeat_interleave_refuses_repeats_that_are_not_integers(repeats):
    with pytest.raises(TypeError):
        torch.tensor([1.0, 2.0]).repeat_interleave(repeats)
    with pytest.raises(ta.DTypeError, match="repeat_interleave: repeats must be an int"):
        ta.tensor([1.0, 2.0]).repeat_interleave(repeats)


def test_repeat_interleave_checks_tensor_counts_and_keeps_the_good_forms():
    with pytest.raises(ta.DTypeError, match="repeat_interleave: .* got float32"):
        ta.tensor([1.0, 2.0]).repeat_interleave(ta.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="repeat_interleave: repeats must be >= 0, got -1"):
        ta.tensor([1.0, 2.0]).repeat_interleave(-1)
    with pytest.raises(ta.ShapeError, match="repeat_interleave: 3 repeats for the 2 entries"):
        ta.tensor([1.0, 2.0]).repeat_interleave([1, 2, 3])
    x = torch.tensor([1.0, 2.0])
    for repeats in (2, [1, 2], np.int64(3), np.array([0, 2])):
        want = x.repeat_interleave(torch.as_tensor(repeats)).tolist()
        assert ta.tensor([1.0, 2.0]).repeat_interleave(repeats).tolist() == want
    assert ta.tensor([1.0, 2.0]).repeat_interleave(ta.tensor([1, 2])).tolist() == [1.0, 2.0, 2.0]


# ---- 9. F.pad: torch's default value, and the paddings torch refuses ------------------------


def test_pad_value_none_pads_with_zeros_as_torch():
    x, tx = pair([[[1.0, 2.0, 3.0, 4.0]]])
    for kwargs in ({"value": None}, {}, {"mode": "constant", "value": None}):
        out, want = F.pad(x, (1, 2), **kwargs), TF.pad(tx, (1, 2), **kwargs)
        same(out, want)
    assert F.pad(x, (1, 1), mode="reflect", value=None).tolist() == \
        TF.pad(tx, (1, 1), mode="reflect", value=None).tolist()


@pytest.mark.parametrize("mode, amounts", [
    ("reflect", (-1, 3)), ("reflect", (3, -1)), ("reflect", (1, -2)), ("reflect", (-4, 1)),
    ("reflect", (3, 3)), ("replicate", (-5, 2)), ("replicate", (-1, 3)), ("circular", (4, 4)),
    ("circular", (-1, 2)), ("circular", (2, -1)), ("constant", (-4, 1)), ("constant", (2, -2)),
])
def test_pad_with_crops_and_edges_matches_torch_with_gradients(mode, amounts):
    """reflect and replicate take their places from the uncropped dim (as torch: (-1, 3)
    reflects about the last entry), circular from the cropped one; index_select's VJP is
    gradient-checked on each."""
    a = np.random.default_rng(3).standard_normal((2, 1, 4))
    x, tx = pair(a)
    out, want = F.pad(x, amounts, mode=mode), TF.pad(tx, amounts, mode=mode)
    same(out, want)
    g = np.random.default_rng(4).standard_normal(want.shape)
    out.backward(ta.tensor(g))
    want.backward(torch.tensor(g))
    same(x.grad, tx.grad)
    assert ta.gradcheck(lambda z: F.pad(z, amounts, mode=mode), [ta.tensor(a, requires_grad=True)])


@pytest.mark.parametrize("call, error, match", [
    (lambda x: F.pad(x, (1, 1), mode="reflect", value=9.0), ValueError,
     r"^pad: mode 'reflect' takes no value \(got value=9.0\)"),
    (lambda x: F.pad(x, (1, 1), mode="circular", value=-1), ValueError,
     r"^pad: mode 'circular' takes no value \(got value=-1\)"),
    (lambda x: F.pad(x, (1.5, 1)), ta.DTypeError,
     r"^pad: the amounts must be ints, got \(1.5, 1\)"),
    (lambda x: F.pad(x, (1.0, 1)), ta.DTypeError, r"^pad: the amounts must be ints"),
    (lambda x: F.pad(x, (True, 1)), ta.DTypeError, r"^pad: the amounts must be ints"),
    (lambda x: F.pad(x, (5, 5), mode="circular"), ta.ShapeError,
     r"^pad: circular padding \(5, 5\) wraps around dim 2 of \(1, 1, 4\) more than once"),
    (lambda x: F.pad(x, (-3, 4), mode="circular"), ta.ShapeError,
     r"^pad: circular padding \(0, 4\) wraps around dim 2 of \(1, 1, 1\) more than once"),
    (lambda x: F.pad(x, (4, 0), mode="reflect"), ta.ShapeError,
     r"^pad: reflect padding \(4, 0\) must be below the size 4 of dim 2 \(shape \(1, 1, 4\)\)"),
    (lambda x: F.pad(x, (-3, -3)), ta.ShapeError,
     r"^pad: \(-3, -3\) crops dim 2 of \(1, 1, 4\) to a negative size"),
    (lambda x: F.pad(x, (-5, -1), mode="replicate"), ta.ShapeError,
     r"^pad: \(-5, -1\) crops dim 2 of \(1, 1, 4\) to a negative size"),
    (lambda x: F.pad(x, (-5, 2)), ta.ShapeError,
     r"^pad: \(-5, 2\) crops dim 2 of \(1, 1, 4\) to a negative size"),
    (lambda x: F.pad(x, (2, -5), mode="circular"), ta.ShapeError,
     r"^pad: \(2, -5\) crops dim 2 of \(1, 1, 4\) to a negative size"),
    (lambda x: F.pad(x[..., :0], (1, 1), mode="replicate"), ta.ShapeError,
     r"^pad: replicate padding \(1, 1\) needs entries to copy, dim 2 of \(1, 1, 0\) is empty"),
    (lambda x: F.pad(x[..., :0], (1, 0), mode="circular"), ta.ShapeError,
     r"^pad: circular padding \(1, 0\) wraps around dim 2 of \(1, 1, 0\) more than once"),
    (lambda x: F.pad(x[..., :0], (1, 1), mode="reflect"), ta.ShapeError,
     r"^pad: reflect padding \(1, 1\) must be below the size 0 of dim 2"),
], ids=["reflect value", "circular value", "float amount", "whole float", "bool",
        "circular twice", "circular twice cropped", "reflect size", "over-crop",
        "over-crop replicate", "crop past the end", "circular crop past the end",
        "replicate empty", "circular empty", "reflect empty"])
def test_pad_refuses_what_torch_refuses_by_name(call, error, match):
    x = ta.tensor(np.arange(4.0).reshape(1, 1, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no NumPy divide-by-zero warning on the way)
        with pytest.raises(error, match=match):
            call(x)


def test_pad_keeps_what_torch_takes():
    x, tx = pair(np.arange(4.0).reshape(1, 1, 4))
    same(F.pad(x, (1, 1), mode="reflect", value=0.0), TF.pad(tx, (1, 1), mode="reflect",
                                                            value=0.0))
    same(F.pad(x, (np.int64(1), 2), value=3), TF.pad(tx, (1, 2), value=3))
    same(F.pad(x, [1, 1, 1, 0]), TF.pad(tx, [1, 1, 1, 0]))
    empty, tempty = pair(np.zeros((1, 1, 0)))
    same(F.pad(empty, (1, 2), value=2.0), TF.pad(tempty, (1, 2), value=2.0))
    same(F.pad(empty, (0, 0), mode="circular"), TF.pad(tempty, (0, 0), mode="circular"))


# ---- 10. shapes that do not fit, named by the function called --------------------------------


@pytest.mark.parametrize("fn", ["cosine_similarity", "pairwise_distance"])
def test_similarities_of_shapes_that_do_not_broadcast_name_the_function(fn):
    a, b = ta.ones(3, 4), ta.ones(3, 5)
    with pytest.raises(RuntimeError):
        getattr(TF, fn)(torch.ones(3, 4), torch.ones(3, 5))
    with pytest.raises(ta.ShapeError, match=rf"^{fn}: x1 \(3, 4\) and x2 \(3, 5\) do not "
                                            "broadcast together"):
        getattr(F, fn)(a, b)
    with pytest.raises(ta.ShapeError, match=rf"^{fn}: x1 \(3, 4\) and x2 \(2, 4\)"):
        getattr(F, fn)(a, ta.ones(2, 4))


@pytest.mark.parametrize("fn", ["cosine_similarity", "pairwise_distance"])
def test_similarities_that_broadcast_still_match_torch(fn):
    rng = np.random.default_rng(5)
    x1, t1 = pair(rng.standard_normal((3, 4)))
    x2, t2 = pair(rng.standard_normal((1, 4)))
    out, want = getattr(F, fn)(x1, x2), getattr(TF, fn)(t1, t2)
    same(out, want)
    out.sum().backward()
    want.sum().backward()
    same(x1.grad, t1.grad)
    same(x2.grad, t2.grad)


# ---- 11. embedding's padding_idx ------------------------------------------------------------


@pytest.mark.parametrize("padding_idx", [1.5, 1.0, True, "1"])
def test_embedding_padding_idx_must_be_an_int(padding_idx):
    ids, w = ta.tensor([1, 2]), ta.randn(6, 3)
    with pytest.raises(TypeError):
        TF.embedding(torch.tensor([1, 2]), torch.randn(6, 3), padding_idx=padding_idx)
    with pytest.raises(ta.DTypeError, match=rf"^embedding: padding_idx must be an int, got "
                                            rf"{padding_idx!r}"):
        F.embedding(ids, w, padding_idx=padding_idx)
    with pytest.raises(ta.DTypeError, match=r"^Embedding: padding_idx must be an int"):
        ta.nn.Embedding(6, 3, padding_idx=padding_idx)


def test_embedding_padding_idx_of_numpy_ints_and_negatives_still_works():
    w, tw = pair(np.random.default_rng(6).standard_normal((6, 3)))
    for padding_idx in (np.int64(1), -5):
        out = F.embedding(ta.tensor([1, 2, 1]), w, padding_idx=padding_idx)
        want = TF.embedding(torch.tensor([1, 2, 1]), tw, padding_idx=int(padding_idx))
        same(out, want)
        out.sum().backward()
        want.sum().backward()
        same(w.grad, tw.grad)
        w.grad, tw.grad = None, None
