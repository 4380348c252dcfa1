"""Parity fixes found by comparing with PyTorch: xlogy's gradients, masked_fill with a tensor
value, std of a constant slice, nll_loss with every target ignored, median with NaN, movedim's
repeated dims, einsum's broadcast gradients, glu and chunk on empty dims, error messages
that name the op the user called, F.pad's default value and the paddings torch refuses,
similarities of shapes that do not broadcast, embedding's padding_idx, rot90's dim order, flips
and rotations as new memory, tril/triu of bools, stacks of 0-d tensors, the torch APIs that
were missing (unfold, diag_embed, index_put, broadcast_to, ravel, dstack, column_stack,
row_stack, repeat_interleave of repeats alone) and integer powers. Each compares with torch in
float64 where torch has the op."""

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
    with pytest.warns(UserWarning, match="degrees of freedom"):  # (as torch's)
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


@pytest.mark.parametrize("power", [lambda lib: lib.tensor([2, 3]) ** -1,
                                   lambda lib: lib.pow(lib.tensor([2, 3]), -2),
                                   lambda lib: lib.tensor([2, 3]).pow_(-1),
                                   lambda lib: lib.tensor([2, 3]).pow(-1)],
                         ids=["number", "function", "in place", "method"])
def test_integer_to_a_negative_number_power_is_a_dtype_error(power):
    """torch refuses an integer tensor to a negative Python int power; to a tensor of negative
    integers it gives values (test_integer_tensor_to_a_negative_integer_tensor_power_as_torch)."""
    with pytest.raises(RuntimeError, match="negative integer powers"):
        power(torch)
    with pytest.raises(ta.DTypeError, match=r"pow_?: integers cannot be raised to a negative "
                       r"integer power \(base: .*, exponent: .*\).*float"):
        power(ta)


def test_pow_keeps_its_other_errors_and_results():
    assert (ta.tensor([2, 3]) ** 2).tolist() == [4, 9]
    same(ta.tensor([2.0, 4.0], dtype=ta.float64) ** -1, torch.tensor([0.5, 0.25]).double())
    with pytest.raises(ta.ShapeError, match="pow: inputs"):
        ta.zeros(2, 3) ** ta.zeros(4)


@pytest.mark.parametrize("reduce", ["product", "median"])
def test_scatter_reduce_with_an_unknown_reduction_is_a_value_error(reduce):
    with pytest.raises(ValueError) as caught:
        ta.zeros(3).scatter_reduce(0, ta.tensor([0]), ta.ones(1), reduce)
    assert type(caught.value) is ValueError  # not a ShapeError: no shape is wrong
    assert "scatter_reduce" in str(caught.value) and repr(reduce) in str(caught.value)
    assert "sum, prod, mean, amax, amin" in str(caught.value)


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


# ---- 12. rot90 turns from the first dim given toward the second ---------------------------------


def _grads_match(ours, theirs, x, tx, seed=0):
    """Backward through both with the same random weights: x and tx get the same gradient."""
    g = np.random.default_rng(seed).standard_normal(theirs.shape)
    ours.backward(ta.tensor(g))
    theirs.backward(torch.tensor(g))
    same(x.grad, tx.grad)


@pytest.mark.parametrize("shape, k, dims", [
    ((2, 3), 1, (1, 0)), ((2, 3), 1, (-1, 0)), ((2, 3), 3, (1, 0)), ((2, 3), -1, (1, 0)),
    ((2, 3, 4), 1, (2, 0)), ((2, 3, 4), 3, (2, 0)), ((2, 3, 4), 2, (2, 1)),
    ((2, 3, 4), 1, (0, -1)), ((2, 3), 1, (0, 1)), ((2, 3), 0, (1, 0)), ((2, 3, 4), 5, (-1, -2)),
])
def test_rot90_with_dims_in_either_order_matches_torch(shape, k, dims):
    """rot90(1, (1, 0)) turned the wrong way: its dims were sorted into (0, 1) first."""
    x, tx = pair(np.arange(float(np.prod(shape))).reshape(shape))
    out, want = x.rot90(k, dims), tx.rot90(k, dims)
    same(out, want)
    same(ta.rot90(x, k, dims), torch.rot90(tx, k, dims))
    _grads_match(out, want, x, tx)
    z = ta.tensor(np.random.default_rng(1).standard_normal(shape), requires_grad=True)
    assert ta.gradcheck(lambda t: t.rot90(k, dims), [z])


# ---- 13. flips, rotations and repeats are new memory, as torch's ---------------------------------


FRESH_MEMORY = {
    "flip": lambda x: x.flip(0), "flip of two dims": lambda x: x.flip(-1, 0),
    "ta.flip": lambda x: (ta if isinstance(x, ta.Tensor) else torch).flip(x, (1,)),
    "fliplr": lambda x: x.fliplr(), "flipud": lambda x: x.flipud(),
    "rot90": lambda x: x.rot90(), "rot90 k=2": lambda x: x.rot90(2),
    "rot90 k=3": lambda x: x.rot90(3, (1, 0)), "rot90 k=4": lambda x: x.rot90(4),
    "repeat(1, 1)": lambda x: x.repeat(1, 1), "repeat(1, 1, 1)": lambda x: x.repeat(1, 1, 1),
    "tile((1,))": lambda x: x.tile((1,)), "tile((1, 1, 1))": lambda x: x.tile((1, 1, 1)),
}


@pytest.mark.parametrize("name", list(FRESH_MEMORY))
def test_flips_rotations_and_unit_repeats_do_not_share_memory_as_torch(name):
    """They were views (a negative-step slice, reshapes): y.zero_() changed x."""
    fn = FRESH_MEMORY[name]
    x, tx = pair([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=False)
    y, ty = fn(x), fn(tx)
    same(y, ty)
    y.zero_()
    ty.zero_()
    same(x, tx)
    assert x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


@pytest.mark.parametrize("name", list(FRESH_MEMORY))
def test_flips_rotations_and_unit_repeats_take_in_place_changes_in_the_graph(name):
    """As views of a tensor in the graph, an in-place change to them was refused (shared
    memory), and zeroing them under no_grad broke the backward of the tensor they came from."""
    fn = FRESH_MEMORY[name]
    x, tx = pair([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    a, ta_ = x * 1, tx * 1
    b, tb = fn(a), fn(ta_)
    b.mul_(2)
    tb.mul_(2)
    (a.sum() + (b * b).sum()).backward()
    (ta_.sum() + (tb * tb).sum()).backward()
    same(x.grad, tx.grad)
    z = ta.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=ta.float64, requires_grad=True)
    e = z.exp()  # exp keeps its output for backward
    with ta.no_grad():
        fn(e).zero_()
    e.sum().backward()
    same(z.grad, np.exp(z.numpy()))


@pytest.mark.parametrize("shape, dims", [((2, 3, 4), (0, 2)), ((2, 3, 4), (-1,)), ((5,), (0,)),
                                         ((2, 3), (1, 0)), ((2, 0, 3), (1,)), ((), ())])
def test_flip_gradient_is_a_flip_as_torch(shape, dims):
    x, tx = pair(np.random.default_rng(4).standard_normal(shape))
    out, want = x.flip(dims), tx.flip(dims)
    same(out, want)
    _grads_match(out, want, x, tx)
    z = ta.tensor(np.random.default_rng(5).standard_normal(shape), requires_grad=True)
    assert z.numel() == 0 or ta.gradcheck(lambda t: t.flip(dims), [z])  # (none to perturb)


def test_a_negative_step_slice_is_still_a_view():
    """x[::-1] stays a view (a kept difference: torch refuses negative steps); only the
    methods that torch documents as copies stopped being built on it."""
    x = ta.arange(5.0)
    y = x[::-1]
    y[0] = 10.0
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 10.0]


# ---- 14. tril and triu keep the dtype (bool included) --------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float16", "float64"])
def test_tril_and_triu_keep_the_dtype_as_torch(dtype):
    m = ta.ones(3, 4, dtype=getattr(ta, dtype))
    tm = torch.ones(3, 4, dtype=getattr(torch, dtype))
    for ours, theirs in ((m.tril(), tm.tril()), (m.triu(1), tm.triu(1)),
                         (ta.tril(m, -1), torch.tril(tm, -1))):
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")  # bool was int64
        assert ours.tolist() == theirs.tolist()
    m.tril_()  # bool: refused (an int64 result cannot be stored in a bool tensor)
    tm.tril_()
    assert m.tolist() == tm.tolist() and str(m.dtype) == dtype


# ---- 15. stacking 0-d tensors, transposing one --------------------------------------------------


STACKS = {
    "hstack of 0-d": lambda lib, a, b: lib.hstack([a, b]),
    "vstack of 0-d": lambda lib, a, b: lib.vstack([a, b]),
    "hstack 0-d and 1-D": lambda lib, a, b: lib.hstack([a, b.reshape(1).expand(3) * 2]),
    "vstack 1-D and 0-d": lambda lib, a, b: lib.vstack([a.reshape(1), b]),
    "row_stack": lambda lib, a, b: lib.row_stack([a, b]),
    "dstack of 0-d": lambda lib, a, b: lib.dstack([a, b]),
    "dstack of 1-D": lambda lib, a, b: lib.dstack([a.expand(2) * 1, b.expand(2) * 3]),
    "dstack of 2-D": lambda lib, a, b: lib.dstack([a.expand(2, 3) * 1, b.expand(2, 3) * 3]),
    "dstack of 3-D": lambda lib, a, b: lib.dstack([a.expand(2, 3, 1) * 1, b.expand(2, 3, 2)]),
    "column_stack of 0-d": lambda lib, a, b: lib.column_stack([a, b]),
    "column_stack 1-D and 2-D": lambda lib, a, b: lib.column_stack([a.expand(2) * 1,
                                                                    b.expand(2, 2) * 3]),
    "column_stack 3-D": lambda lib, a, b: lib.column_stack([a.expand(2, 1, 2), b.expand(2, 1, 2)]),
    "transpose of 0-d": lambda lib, a, b: a.transpose(0, -1) * b.swapaxes(0, 0),
    "movedim of 0-d": lambda lib, a, b: a.movedim(0, -1) + b.movedim((0,), (0,)),
}


@pytest.mark.parametrize("name", list(STACKS))
def test_stacks_and_transposes_of_0d_tensors_match_torch(name):
    """hstack and vstack of 0-d tensors raised (torch makes them 1-D or 2-D first, as
    atleast_1d and atleast_2d); a 0-d tensor's transpose(0, -1) raised (torch: the tensor)."""
    a, ta_ = pair(1.5)
    b, tb = pair(-2.0)
    out, want = STACKS[name](ta, a, b), STACKS[name](torch, ta_, tb)
    same(out, want)
    g = np.random.default_rng(0).standard_normal(tuple(want.shape))
    out.backward(ta.tensor(g))
    want.backward(torch.tensor(g))
    same(a.grad, ta_.grad)
    same(b.grad, tb.grad)


def test_a_0d_tensor_has_one_dim_to_transpose_and_no_more():
    with pytest.raises(IndexError):
        torch.tensor(1.0).transpose(0, 1)
    with pytest.raises(ta.DimError, match="transpose: dim 1 is out of range for a tensor with 0 "
                                          "dims"):
        ta.tensor(1.0).transpose(0, 1)
    with pytest.raises(RuntimeError, match="non-empty"):
        torch.dstack([])
    with pytest.raises(ValueError, match="dstack: needs at least one tensor"):
        ta.dstack([])


def test_mT_needs_a_matrix_as_torch():  # noqa: N802 - the property's name
    """torch: x.mT of a 1-D tensor is an error under mT's name (tinyattn's named transpose and
    its dim -2), of a 0-d one the tensor itself with a deprecation warning (tinyattn raised)."""
    with pytest.raises(RuntimeError, match="mT is only supported on matrices"):
        _ = torch.ones(3).mT
    with pytest.raises(ta.ShapeError, match=r"^mT: .*matrices.*\(3,\).*\.T"):
        _ = ta.ones(3).mT
    with pytest.warns(UserWarning, match="mT is deprecated on 0-D tensors"):
        assert torch.tensor(2.0).mT.item() == 2.0
    x = ta.tensor(2.0, requires_grad=True)
    with pytest.warns(UserWarning, match=r"^Tensor\.mT is deprecated on 0-D tensors"):
        y = x.mT
    assert y.shape == () and y.item() == 2.0
    (y * 3.0).backward()
    assert x.grad.item() == 3.0
    assert ta.ones(2, 3, 4).mT.shape == (2, 4, 3) and ta.ones(2, 3).mT.shape == (3, 2)


# ---- 16. torch APIs that were missing: unfold, diag_embed, index_put, broadcast_to, ravel, ------
# ---- repeat_interleave(repeats) ------------------------------------------------------------------


@pytest.mark.parametrize("shape, dim, size, step", [
    ((7,), 0, 3, 2), ((7,), 0, 2, 1), ((7,), 0, 7, 3), ((7,), -1, 0, 1), ((3, 4), 1, 2, 1),
    ((3, 4), 0, 2, 1), ((2, 5, 3), 1, 3, 2), ((0, 3), 1, 2, 1), ((0,), 0, 0, 1), ((), 0, 1, 1),
    ((4,), 0, 1, 5),
])
def test_unfold_matches_torch_with_gradients(shape, dim, size, step):
    x, tx = pair(np.random.default_rng(2).standard_normal(shape))
    out, want = x.unfold(dim, size, step), tx.unfold(dim, size, step)
    same(out, want)
    _grads_match(out, want, x, tx)  # overlapping windows add up
    z = ta.tensor(np.random.default_rng(3).standard_normal(shape), requires_grad=True)
    assert 0 in out.shape or ta.gradcheck(lambda t: t.unfold(dim, size, step), [z])


@pytest.mark.parametrize("call, match", [
    (lambda x: x.unfold(0, 8, 1), r"unfold: size 8 is larger than dim 0 of size 7"),
    (lambda x: x.unfold(0, 2, 0), r"unfold: step must be > 0, got 0"),
    (lambda x: x.unfold(0, -1, 1), r"unfold: size must be >= 0, got -1"),
    (lambda x: x.unfold(1, 2, 1), r"unfold: dim 1 is out of range"),
])
def test_unfold_refuses_what_torch_refuses(call, match):
    with pytest.raises((RuntimeError, IndexError)):
        call(torch.zeros(7))
    with pytest.raises((ta.ShapeError, ValueError, ta.DimError), match=match):
        call(ta.zeros(7))


@pytest.mark.parametrize("shape, offset, dim1, dim2", [
    ((2, 3), 0, -2, -1), ((2, 3), 1, -2, -1), ((2, 3), -2, 0, 2), ((2, 3), 0, 2, 0),
    ((2, 3), 0, -1, -2), ((4,), 0, 0, 1), ((4,), -1, 1, 0), ((2, 1, 3), 2, 1, 3),
])
def test_diag_embed_matches_torch_with_gradients(shape, offset, dim1, dim2):
    x, tx = pair(np.random.default_rng(6).standard_normal(shape))
    out, want = x.diag_embed(offset, dim1, dim2), tx.diag_embed(offset, dim1, dim2)
    same(out, want)
    same(ta.diag_embed(x, offset, dim1, dim2), torch.diag_embed(tx, offset, dim1, dim2))
    _grads_match(out, want, x, tx)
    z = ta.tensor(np.random.default_rng(7).standard_normal(shape), requires_grad=True)
    assert ta.gradcheck(lambda t: t.diag_embed(offset, dim1, dim2), [z])
    assert ta.tensor([1, 2]).diag_embed().tolist() == [[1, 0], [0, 2]]


def test_diag_embed_refuses_what_torch_refuses():
    with pytest.raises(ta.DimError, match="diag_embed: dim1 and dim2 are both 1"):
        ta.zeros(2, 3).diag_embed(0, 1, 1)
    with pytest.raises(ta.DimError, match="diag_embed: dim 3 is out of range"):
        ta.zeros(2, 3).diag_embed(0, 0, 3)
    with pytest.raises(ta.DimError, match="diag_embed"):
        ta.tensor(1.0).diag_embed()


INDEX_PUT = {
    "repeats accumulate": ((lambda lib: (lib.tensor([0, 1, 0]), lib.tensor([2, 2, 2]))), (3,),
                           True),
    "repeats of rows": ((lambda lib: (lib.tensor([1, 1, -1]),)), (3,), True),
    "a bool mask": ((lambda lib: (lib.tensor([[True, False, True], [False, True, False]]),)),
                    (), True),
    "an int and a list": ((lambda lib: (lib.tensor(1), lib.tensor([2, 0]))), (2,), False),
    "distinct, overwrite": ((lambda lib: (lib.tensor([1, 0]), lib.tensor([0, 2]))), (2,), False),
    "rows, overwrite": ((lambda lib: [lib.tensor([1])]), (1, 3), False),
}


@pytest.mark.parametrize("name", list(INDEX_PUT))
@pytest.mark.parametrize("in_place", [False, True])
def test_index_put_matches_torch_with_gradients(name, in_place):
    """index_put and index_put_: accumulate=True adds every value sent to one place (a
    repeated index counts each time); the values get the gradient of the places they fill."""
    indices, value_shape, accumulate = INDEX_PUT[name]
    rng = np.random.default_rng(8)
    x, tx = pair(rng.standard_normal((2, 3)))
    v, tv = pair(rng.standard_normal(value_shape))
    if in_place:
        out, want = (x * 1).index_put_(indices(ta), v, accumulate), \
            (tx * 1).index_put_(indices(torch), tv, accumulate)
    else:
        out = x.index_put(indices(ta), v, accumulate=accumulate)
        want = tx.index_put(indices(torch), tv, accumulate=accumulate)
    same(out, want)
    g = rng.standard_normal((2, 3))
    out.backward(ta.tensor(g))
    want.backward(torch.tensor(g))
    same(x.grad, tx.grad)
    same(v.grad, tv.grad)
    if accumulate:
        z = ta.tensor(rng.standard_normal((2, 3)), requires_grad=True)
        w = ta.tensor(rng.standard_normal(value_shape), requires_grad=True)
        assert ta.gradcheck(lambda a, b: a.index_put(indices(ta), b, accumulate=True), [z, w])


def test_index_put_refuses_what_torch_refuses():
    x = ta.zeros(2, 3)
    with pytest.raises(ta.DTypeError, match=r"index_put: values are float64 but this tensor is "
                                            r"float32"):
        x.index_put((ta.tensor([0]),), ta.tensor(5.0, dtype=ta.float64))
    with pytest.raises(TypeError, match="index_put: indices must be a tuple or list of tensors"):
        x.index_put(ta.tensor([0]), ta.tensor(5.0))
    with pytest.raises(TypeError, match="index_put: values must be a Tensor"):
        x.index_put((ta.tensor([0]),), 5.0)
    with pytest.raises(ta.DimError, match="index_put"):
        x.index_put((ta.tensor([2]),), ta.tensor(5.0), accumulate=True)
    y = ta.zeros(3)
    assert y.index_put_((ta.tensor([1]),), ta.tensor(2.0)) is y and y.tolist() == [0, 2, 0]


def test_broadcast_to_and_ravel_methods_match_torch():
    x, tx = pair(np.arange(6.0).reshape(3, 2, 1))
    for shape in ((3, 2, 4), (2, 3, 2, 4), (-1, 2, 5)):
        out, want = x.broadcast_to(shape), tx.broadcast_to(shape)
        same(out, want)
    same(x.broadcast_to(2, 3, 2, 4), tx.broadcast_to(2, 3, 2, 4))
    out, want = x.broadcast_to(2, 3, 2, 4), tx.broadcast_to(2, 3, 2, 4)
    _grads_match(out, want, x, tx)
    y, ty = pair(np.arange(6.0).reshape(2, 3))
    for ours, theirs in ((y.ravel(), ty.ravel()), (y.T.ravel(), ty.T.ravel()),
                         (ta.ravel(y), torch.ravel(ty)), (ta.tensor(2.0).ravel(),
                                                          torch.tensor(2.0).ravel())):
        same(ours, theirs)
    out, want = y.T.ravel(), ty.T.ravel()
    _grads_match(out, want, y, ty)


@pytest.mark.parametrize("repeats, dtype", [([2, 0, 1], "int64"), ([1, 3], "int32"), ([], "int64"),
                                            ([0, 0], "int64")])
def test_repeat_interleave_of_repeats_alone_as_torch(repeats, dtype):
    """torch.repeat_interleave(repeats): each index i repeated repeats[i] times."""
    got = ta.repeat_interleave(ta.tensor(np.array(repeats, dtype=dtype)))
    want = torch.repeat_interleave(torch.tensor(np.array(repeats, dtype=dtype)))
    assert got.tolist() == want.tolist() and str(got.dtype) == dtype


def test_repeat_interleave_of_repeats_alone_refuses_what_torch_refuses():
    for bad, error in ((ta.tensor([2.0, 1.0]), ta.DTypeError), (ta.tensor(2), ta.ShapeError),
                       (ta.tensor([[1, 2]]), ta.ShapeError), (ta.tensor([2, -1]), ValueError)):
        with pytest.raises(error, match="repeat_interleave: "):
            ta.repeat_interleave(bad)
    x, tx = pair([1.0, 2.0])  # the other forms are unchanged
    same(ta.repeat_interleave(x, 2), torch.repeat_interleave(tx, 2))
    same(ta.repeat_interleave(x, repeats=ta.tensor([1, 2]), dim=0),
         torch.repeat_interleave(tx, repeats=torch.tensor([1, 2]), dim=0))


# ---- 17. integer ** negative integer: refused for a number exponent, computed for a tensor -------


@pytest.mark.parametrize("base, exponent", [
    ([1, 2, -1], [-1, -1, -1]), ([1, 2, -1, 0, 3, -1], [-2, -2, -3, -1, 0, -4]),
    ([2, 3], -1), ([[2], [-1]], [-1, -2, 3]),
], ids=["reported", "every case", "0-d exponent", "broadcast"])
def test_integer_tensor_to_a_negative_integer_tensor_power_as_torch(base, exponent):
    """torch computes it (1 ** -n = 1, (-1) ** -n = ±1, anything else 0, the integer part of
    1 / x ** n); tinyattn refused it. A Python number exponent stays refused (below)."""
    ours = ta.tensor(base) ** ta.tensor(exponent)
    theirs = torch.tensor(base) ** torch.tensor(exponent)
    assert ours.dtype == np.int64 and ours.tolist() == theirs.tolist()
    assert (2 ** ta.tensor([-1, 1])).tolist() == (2 ** torch.tensor([-1, 1])).tolist()
    assert ta.tensor([2, 3]).pow_(ta.tensor([-1, 1])).tolist() == [0, 3]
    small = ta.tensor(np.array([2, -1], dtype=np.int32)) ** ta.tensor(np.array([-1, -1],
                                                                             dtype=np.int32))
    assert small.dtype == np.int32 and small.tolist() == [0, -1]


# ---- 18. remainder's gradient for the divisor uses the quotient the forward used ---------------


def test_remainder_divisor_gradient_is_minus_the_floor_divide_quotient_as_torch():
    """1.0 / 0.1 rounds up to 10 but 1.0 // 0.1 is 9: the gradient is -(x // y), as torch's
    -x.div(y, rounding_mode="floor"). fmod keeps torch's -trunc(x / y)."""
    xs, ys = [1.0, -1.5, 0.3, 5.0, -0.7], [0.1, 0.3, 0.1, -0.7, 0.1]
    for ours, theirs in ((lambda x, y: x % y, lambda x, y: x % y),
                         (ta.remainder, torch.remainder), (ta.fmod, torch.fmod)):
        x, tx = pair(xs)
        y, ty = pair(ys)
        ours(x, y).sum().backward()
        theirs(tx, ty).sum().backward()
        same(x.grad, tx.grad)
        same(y.grad, ty.grad)
    y, ty = pair([0.1, 0.3])  # a number dividend
    (1.0 % y).sum().backward()
    assert y.grad.tolist() == [-9.0, -3.0]


# ---- 19. a Python fill value the tensor's dtype cannot hold is refused, as torch -----------------

_FILLS = {
    "masked_fill": lambda lib, x, v: x.masked_fill(lib.tensor([True, False]), v),
    "masked_fill_": lambda lib, x, v: x.masked_fill_(lib.tensor([True, False]), v),
    "index_fill": lambda lib, x, v: x.index_fill(0, lib.tensor([0]), v),
    "index_fill_": lambda lib, x, v: x.index_fill_(0, lib.tensor([0]), v),
    "scatter": lambda lib, x, v: x.scatter(0, lib.tensor([0]), v),
    "fill_": lambda lib, x, v: x.fill_(v),
}


@pytest.mark.parametrize("name", sorted(_FILLS))
@pytest.mark.parametrize("dtype, values", [
    ("int8", [300, 128, -129, 255, 1e6, NAN, INF, 3.7, -1]),
    ("uint8", [300, -1, -255, -256, -1.5, 255.9, 128]),
    ("int32", [2**31, 1e39, NAN, -2**31]),
    ("float16", [1e6, 65520.0, 65504.0, INF, NAN, -1.5]),
    ("float32", [1e39, -1e39, 3e38, INF]),
])
def test_fill_values_out_of_the_dtype_are_refused_and_others_wrap_as_torch(name, dtype, values):
    """int8 masked_fill(mask, 300) was 44 and float16 masked_fill(mask, 1e6) inf; torch refuses
    ("value cannot be converted ... without overflow"), wraps -1 into uint8 as 255."""
    fill = _FILLS[name]
    for v in values:
        try:
            want = fill(torch, torch.zeros(2, dtype=getattr(torch, dtype)), v)
        except RuntimeError:
            with pytest.raises(ta.DTypeError, match="value cannot be converted without overflow"):
                fill(ta, ta.zeros(2, dtype=getattr(ta, dtype)), v)
            continue
        got = fill(ta, ta.zeros(2, dtype=getattr(ta, dtype)), v)
        assert str(got.dtype) == dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_fill_refusals_name_the_op_and_the_range():
    x = ta.zeros(2, dtype=ta.int8)
    with pytest.raises(ta.DTypeError, match=r"masked_fill: 300 does not fit int8 \(its values "
                                            r"are -128\.\.127\)"):
        x.masked_fill(ta.tensor([True, False]), 300)
    with pytest.raises(ta.DTypeError, match=r"index_fill: 300 does not fit int8"):
        x.index_fill(0, ta.tensor([0]), 300)
    with pytest.raises(ta.DTypeError, match=r"masked_fill: 1000000\.0 does not fit float16 "
                                            r"\(its largest value is 65504\)"):
        ta.zeros(2, dtype=ta.float16).masked_fill(ta.tensor([True, False]), 1e6)
    assert x.tolist() == [0, 0]


# ---- 20. in-place clamp with tensor bounds ---------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda lib, x: x.clamp_(min=lib.tensor([0.0, 0.0, 0.0], dtype=lib.float64)),
    lambda lib, x: x.clamp_max_(lib.tensor(1.0, dtype=lib.float64)),
    lambda lib, x: x.clamp_min_(lib.tensor([0.0, 1.0, 3.0], dtype=lib.float64)),
    lambda lib, x: x.clip_(lib.tensor(0.0, dtype=lib.float64), 1.0),
    lambda lib, x: x.clamp_(lib.tensor(-0.5, dtype=lib.float64),
                            lib.tensor([0.0, 0.2, 1.0], dtype=lib.float64)),
    lambda lib, x: x.clamp_(lib.tensor([1.0, 1.0, 1.0], dtype=lib.float64),
                            lib.tensor([0.0, 2.0, 0.5], dtype=lib.float64)),  # max wins
], ids=["clamp_ min", "clamp_max_", "clamp_min_", "clip_", "both", "max < min"])
def test_in_place_clamp_with_tensor_bounds_as_torch(call):
    """clamp_(min=tensor) passed the tensor to the number-bound clip op: "does not support
    ufuncs". Values, the same tensor back, its version bumped, and the gradients of x and of
    the bounds through a recorded in-place clamp, as torch's."""
    x, tx = pair([-1.0, 0.5, 2.0], requires_grad=False)
    version = x._version
    assert call(ta, x) is x
    call(torch, tx)
    same(x, tx)
    assert x._version == version + 1
    a, ta_ = pair([-1.0, 0.5, 2.0])
    lo, tlo = pair([0.0, 0.0, 0.0])
    hi, thi = pair(1.0)
    y, ty = a * 1, ta_ * 1
    assert y.clamp_(lo, hi) is y
    ty.clamp_(tlo, thi)
    w = [1.0, 2.0, 3.0]
    (y * ta.tensor(w, dtype=ta.float64)).sum().backward()
    (ty * torch.tensor(w, dtype=torch.float64)).sum().backward()
    for ours, theirs in ((a, ta_), (lo, tlo), (hi, thi)):
        same(ours.grad, theirs.grad)


def test_in_place_clamp_with_tensor_bounds_refuses_what_torch_refuses():
    with pytest.raises(ta.DTypeError, match="clamp_: the result is float32"):
        ta.tensor([-1, 0, 2]).clamp_(min=ta.tensor([0.0, 0.0, 0.0]))
    with pytest.raises(ta.ShapeError, match="clamp_: the result has shape"):
        ta.tensor([-1.0, 0.5, 2.0]).clamp_(min=ta.tensor([[0.0], [1.0]]))
    leaf = ta.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ta.GraphError, match="clamp_: this tensor"):
        leaf.clamp_(max=ta.tensor(1.5))


# ---- 21. bool ** bool ----------------------------------------------------------------------------


def test_bool_tensor_to_a_python_bool_power_is_bool_as_torch():
    """x ** True is x and x ** False all True, both bool (tinyattn gave int8); a bool to a bool
    tensor power is refused, as torch's ("pow" not implemented for 'Bool'); ints unchanged."""
    for e in (True, False):
        want = torch.tensor([True, False]) ** e
        for got in (ta.tensor([True, False]) ** e, ta.tensor([True, False]).pow(e),
                    ta.pow(ta.tensor([True, False]), e), ta.tensor([True, False]).pow_(e)):
            assert str(got.dtype) == "bool" and got.tolist() == want.tolist()
        b = ta.tensor([True, False])
        b **= e
        assert str(b.dtype) == "bool" and b.tolist() == want.tolist()
    assert (ta.tensor(True) ** True).tolist() is True
    for ours, theirs in ((ta.tensor([True, False]) ** 2, torch.tensor([True, False]) ** 2),
                         (ta.tensor([2, 3]) ** True, torch.tensor([2, 3]) ** True),
                         (ta.tensor([True, False]) ** ta.tensor([2, 3]),
                          torch.tensor([True, False]) ** torch.tensor([2, 3])),
                         (True ** ta.tensor([2, 3]), True ** torch.tensor([2, 3])),
                         (ta.tensor([2, 3]) ** ta.tensor(True),
                          torch.tensor([2, 3]) ** torch.tensor(True))):
        assert str(ours.dtype) == str(theirs.dtype)[6:] and ours.tolist() == theirs.tolist()


def test_bool_to_a_bool_tensor_power_is_refused_as_torch():
    b = ta.tensor([True, False])
    for call in (lambda: b ** ta.tensor([True, True]), lambda: True ** b,
                 lambda: b ** ta.tensor(True), lambda: b.pow_(ta.tensor(True))):
        with pytest.raises(ta.DTypeError, match=r"pow_?: .*bool"):
            call()
    assert b.tolist() == [True, False]


# ---- 22. torch's functions for methods tinyattn had: index_*, masked_*, mode, put, atleast_nd ----


def test_module_level_index_and_masked_functions_match_torch():
    """ta.masked_fill, index_add, index_copy, index_fill, index_put, masked_scatter (methods
    only before), cosine_similarity and pairwise_distance (in F only): values and gradients."""
    mask = [[True, False, True], [False, False, True]]
    idx = [2, 0]
    calls = [
        ("masked_fill", lambda lib, x, s: lib.masked_fill(x, lib.tensor(mask), -2.0)),
        ("index_add", lambda lib, x, s: lib.index_add(x, 1, lib.tensor(idx), s, alpha=2.0)),
        ("index_copy", lambda lib, x, s: lib.index_copy(x, 1, lib.tensor(idx), s)),
        ("index_fill", lambda lib, x, s: lib.index_fill(x, 1, lib.tensor(idx), 7.0)),
        ("index_put", lambda lib, x, s: lib.index_put(x, (lib.tensor([0, 1]), lib.tensor(idx)),
                                                      s[0], accumulate=True)),
        ("masked_scatter", lambda lib, x, s: lib.masked_scatter(x, lib.tensor(mask), s)),
        ("cosine_similarity", lambda lib, x, s: lib.cosine_similarity(x[:, :2], s, dim=1)),
        ("pairwise_distance", lambda lib, x, s: lib.pairwise_distance(x[:, :2], s)),
    ]
    for name, call in calls:
        x, tx = pair(np.arange(6.0).reshape(2, 3) - 2.5)
        s, ts = pair([[1.0, -2.0], [0.5, 3.0]])
        out, want = call(ta, x, s), call(torch, tx, ts)
        same(out, want)
        weights = np.arange(1.0, out.numel() + 1).reshape(out.shape)
        (out * ta.tensor(weights)).sum().backward()
        (want * torch.tensor(weights)).sum().backward()
        same(x.grad, tx.grad)
        if ts.grad is not None:
            same(s.grad, ts.grad)
        assert getattr(ta, name).__name__ == name


@pytest.mark.parametrize("values, dim, keepdim", [
    ([[1.0, 2, 2, 1, 3], [5, 5, 4, 4, 4], [0, 0, 0, 0, 0], [3, 1, 2, 7, 9]], -1, False),
    ([[1.0, 2, 2, 1, 3], [5, 5, 4, 4, 4], [0, 0, 0, 0, 0], [3, 1, 2, 7, 9]], 0, True),
    ([[[2, 1, 2, 1, 1, 2]], [[-3, 4, 4, -3, 0, 0]]], 2, False),
    ([[[2, 1], [1, 2], [2, 2]]], 1, False),
    (3.5, 0, False),
    ([-0.0, 0.0, 1.0], 0, False),
], ids=["rows", "columns keepdim", "ints", "middle dim", "0-d", "signed zeros"])
def test_mode_values_indices_and_gradient_as_torch(values, dim, keepdim):
    """torch.mode: the smallest of the most frequent values along dim, at its last place, the
    gradient going to that entry."""
    a = np.asarray(values)
    floats = a.dtype.kind == "f"
    x = ta.tensor(a, dtype=ta.float64 if floats else None, requires_grad=floats)
    tx = torch.tensor(a, dtype=torch.float64 if floats else None, requires_grad=floats)
    got, want = x.mode(dim, keepdim), torch.mode(tx, dim, keepdim)
    assert got.values.tolist() == want.values.tolist()
    assert got.indices.tolist() == want.indices.tolist() and got.indices.dtype == np.int64
    values_, indices_ = ta.mode(x, dim=dim, keepdim=keepdim)
    assert indices_.tolist() == want.indices.tolist()
    if floats:
        weights = np.arange(1.0, values_.numel() + 1).reshape(values_.shape)
        (values_ * ta.tensor(weights)).sum().backward()
        (want.values * torch.tensor(weights)).sum().backward()
        same(x.grad, tx.grad)


def test_mode_refuses_an_empty_dim():
    assert ta.tensor([2.0, 1.0, 1.0]).mode().values.item() == 1.0  # (dim=-1 by default)
    with pytest.raises(ta.DimError, match=r"mode: dim 0 of a tensor of shape \(0, 3\) is empty"):
        ta.zeros(0, 3).mode(0)


@pytest.mark.parametrize("accumulate", [False, True])
def test_put_and_put_as_torch(accumulate):
    """x.put_(index, source): source's entries at the flat places index names (negative ones
    from the end), added with accumulate=True; gradients to x and source."""
    index = [[0, -1], [4, 0]] if accumulate else [[0, -1], [4, 2]]
    x, tx = pair(np.arange(6.0).reshape(2, 3))
    s, ts = pair([[1.0, 2.0], [3.0, 4.0]])
    out = x.put(ta.tensor(index), s, accumulate=accumulate)
    want = tx.put(torch.tensor(index), ts, accumulate=accumulate)
    same(out, want)
    weights = np.arange(1.0, 7.0).reshape(2, 3)
    (out * ta.tensor(weights)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    same(x.grad, tx.grad)
    same(s.grad, ts.grad)
    y, ty = ta.zeros(2, 3), torch.zeros(2, 3)
    version = y._version
    assert y.put_(ta.tensor(index), ta.tensor([[1.0, 2.0], [3.0, 4.0]]),
                  accumulate=accumulate) is y
    ty.put_(torch.tensor(index), torch.tensor([[1.0, 2.0], [3.0, 4.0]]), accumulate=accumulate)
    assert y.tolist() == ty.tolist() and y._version == version + 1


def test_put_refuses_what_torch_refuses():
    x = ta.zeros(2, 3)
    with pytest.raises(ta.DimError, match="put_: index 6 is out of range for a tensor of 6"):
        x.put_(ta.tensor([6]), ta.tensor([1.0]))
    with pytest.raises(ta.ShapeError, match=r"put_: source has 2 entries but index 1"):
        x.put_(ta.tensor([1]), ta.tensor([1.0, 2.0]))
    with pytest.raises(ta.DTypeError, match="put_: source is float64 but this tensor is float32"):
        x.put_(ta.tensor([1]), ta.tensor([1.0], dtype=ta.float64))
    assert x.tolist() == [[0.0] * 3] * 2


def test_atleast_nd_as_torch():
    for fn in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for shape in ((), (2,), (2, 3), (2, 3, 4), (1, 2, 3, 4)):
            a = np.arange(float(np.prod(shape))).reshape(shape)
            got = getattr(ta, fn)(ta.tensor(a))
            want = getattr(torch, fn)(torch.tensor(a))
            assert got.shape == tuple(want.shape) and got.tolist() == want.tolist(), (fn, shape)
        many = getattr(ta, fn)(ta.tensor(1.0), ta.tensor([1.0, 2.0]))
        listed = getattr(ta, fn)([ta.tensor(1.0), ta.tensor([1.0, 2.0])])
        want = getattr(torch, fn)(torch.tensor(1.0), torch.tensor([1.0, 2.0]))
        for out in (many, listed):
            assert isinstance(out, tuple)
            assert [t.shape for t in out] == [tuple(t.shape) for t in want]
    x, tx = pair(2.0)
    ta.atleast_3d(x).sum().backward()
    torch.atleast_3d(tx).sum().backward()
    same(x.grad, tx.grad)


def test_pad_values_out_of_the_dtype_are_refused_by_pad_as_torch():
    """F.pad's value: refused where torch refuses (uint8 -1 too, which full wraps), by name."""
    for dtype, value in (("uint8", -1), ("uint8", 255), ("int8", 300), ("int8", -1.5),
                         ("float16", 1e6), ("float16", INF), ("int64", NAN)):
        try:
            want = TF.pad(torch.zeros(1, dtype=getattr(torch, dtype)), (1, 0), value=value)
        except RuntimeError:
            with pytest.raises(ta.DTypeError, match=f"pad: {value!r} does not fit {dtype}"):
                F.pad(ta.zeros(1, dtype=getattr(ta, dtype)), (1, 0), value=value)
            continue
        got = F.pad(ta.zeros(1, dtype=getattr(ta, dtype)), (1, 0), value=value)
        assert got.tolist() == want.tolist() and str(got.dtype) == dtype


def test_clamp_number_bounds_out_of_an_integer_dtype_as_torch():
    """torch casts number bounds into an integer tensor's dtype as fill values: 300 refused for
    int8 (tinyattn clamped with it), -1 wrapped into uint8 as 255 (an OverflowError here)."""
    calls = [lambda x: x.clamp(max=300), lambda x: x.clamp(min=-300), lambda x: x.clamp(min=-1),
             lambda x: x.clamp(max=-1), lambda x: x.clamp(-1, 300), lambda x: x.clamp_min(-1),
             lambda x: x.clamp_max(2**40), lambda x: x.clamp_(max=300), lambda x: x.clip_(-1),
             lambda x: x.clamp(max=100.5)]
    for dtype, values in (("int8", [-100, 0, 100]), ("uint8", [0, 5, 200]), ("bool", [True])):
        for call in calls:
            theirs = torch.tensor(values, dtype=getattr(torch, dtype))
            ours = ta.tensor(np.array(values, dtype=dtype))
            try:
                want = call(theirs)
            except RuntimeError:
                with pytest.raises(ta.DTypeError, match=r"clamp_?: .*(does not fit|cannot be st)"):
                    call(ours)
                continue
            got = call(ours)
            assert got.tolist() == want.tolist() and str(got.dtype) == str(want.dtype)[6:]
