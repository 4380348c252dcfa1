"""The index ops' rules at their edges: scatter's index (integer, torch's shape rule, the range
[0, n) and the errors naming the op) and einsum's spelling (spaces, implicit output, ellipses
of different lengths, letters of either case), forward and gradient against torch. Then the
indexing rules found against torch 2.13: the index tensor dtypes (uint8 as a mask), 0-d bool
indices among others, take_along_dim's broadcasting, setitem's values with leading 1s and on
0-d tensors, the scatter family's dtypes and negative indices, masks larger than self."""

import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.autograd import apply
from tinyattn.ops import index as ix

torch = pytest.importorskip("torch")


# ---- scatter: the index ------------------------------------------------------------------------

def _x():
    return ta.tensor(np.arange(6, dtype=np.float64).reshape(2, 3), requires_grad=True)


@pytest.mark.parametrize("op", [ix.scatter, ix.scatter_add])
def test_scatter_ops_refuse_an_index_that_is_not_integer_naming_themselves(op):
    src = np.ones((2, 3))
    for index in (np.zeros((2, 3)), np.zeros((2, 3), dtype=bool)):
        with pytest.raises(TypeError, match=rf"^{op.name}: index must be an integer"):
            apply(op, _x(), index, src, dim=1)
    with pytest.raises(TypeError, match=rf"^{op.name}: index must be an integer.*list"):
        apply(op, _x(), [[0, 1, 2], [0, 1, 2]], src, dim=1)
    with pytest.raises(ta.DimError, match=rf"^{op.name}: "):
        apply(op, _x(), np.zeros((2, 3), dtype=np.int64), src, dim=2)
    apply(op, _x(), np.zeros((2, 3), dtype=np.uint8), src, dim=1)  # unsigned is fine


def test_scatter_index_follows_torchs_shape_rule():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    src = np.arange(10, dtype=np.float64).reshape(2, 5) + 10
    wide = np.array([[0, 1, 2, 0, 1], [2, 2, 1, 0, 0]])  # larger than x along dim 1: allowed
    out = ta.tensor(x).scatter_add(1, ta.tensor(wide), ta.tensor(src))
    expected = torch.tensor(x).scatter_add(1, torch.tensor(wide), torch.tensor(src))
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    bad = {
        "a dim too few": np.array([0, 1]),
        "larger than x outside dim": np.zeros((3, 1), dtype=np.int64),
        "larger than src": np.zeros((2, 6), dtype=np.int64),
    }
    for index in bad.values():
        with pytest.raises(ValueError, match=r"^scatter_add: index \(.*must have the dims"):
            apply(ix.scatter_add, ta.tensor(x), index, src, dim=1)
    with pytest.raises(ValueError, match="nor larger than src"):  # src of other rank
        apply(ix.scatter_add, ta.tensor(x), np.zeros((2, 2), dtype=np.int64), src[0], dim=1)


def test_scatter_index_range_is_0_to_n_as_torch():
    """As torch's: 0 and n-1 are the ends; a negative index is out of range (it used to count
    from the end, -n..-1)."""
    x = np.zeros((2, 3))
    src = np.array([[1.0, 2.0], [3.0, 4.0]])
    edge = np.array([[0, 2], [0, 1]])
    out = ta.tensor(x).scatter(1, ta.tensor(edge), ta.tensor(src))
    np.testing.assert_array_equal(out.numpy(), torch.tensor(x).scatter(
        1, torch.tensor(edge), torch.tensor(src)).numpy())
    for worst, index in ((3, [[3, 0], [0, 1]]), (-1, [[0, 0], [-1, 1]]), (-3, [[0, -3], [4, 1]])):
        with pytest.raises(ta.DimError, match=rf"^scatter: index {worst} is out of range for "
                                              r"dim 1 of size 3 \(input \(2, 3\)\)"):
            apply(ix.scatter, ta.tensor(x), np.array(index), src, dim=1)


def test_scatter_reduce_mean_gradient_by_hand():
    x = ta.tensor([0.0, 0.0], requires_grad=True)
    src = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    index = ta.tensor(np.array([0, 0, 1]))
    x.scatter_reduce(0, index, src, "mean").sum().backward()
    np.testing.assert_allclose(src.grad.numpy(), [1 / 3, 1 / 3, 1 / 2])
    np.testing.assert_allclose(x.grad.numpy(), [1 / 3, 1 / 2])


# ---- einsum: spelling ------------------------------------------------------------------------

EQUATIONS = [
    ("ij, jk -> ik", [(2, 3), (3, 4)]),  # spaces are ignored
    ("ij,jk", [(2, 3), (3, 4)]),  # implicit output: letters seen once, sorted
    ("iX,jk", [(2, 3), (4, 5)]),  # upper case sorts before lower case
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 2)]),  # ellipses of 2 and 1 dims
    ("...ij,...jk->...ik", [(4, 5), (2, 3, 5, 2)]),  # an ellipsis of no dims
    ("...i,...i->...", [(2, 3, 4, 5), (4, 5)]),
    ("...i,...i", [(2, 3, 4), (3, 4)]),  # implicit with an ellipsis: the batch dims stay
    ("ij,k->i", [(2, 3), (4,)]),  # k is summed away in one operand only
    ("ii->i", [(3, 3)]),
    ("iij->j", [(3, 3, 2)]),
    ("...ii->...i", [(2, 3, 3)]),
]


@pytest.mark.parametrize("equation, shapes", EQUATIONS)
def test_einsum_spelling_matches_torch_forward_and_backward(equation, shapes):
    rng = np.random.default_rng(len(equation))
    values = [rng.standard_normal(s) for s in shapes]
    ours = [ta.tensor(v, requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    out, expected = ta.einsum(equation, *ours), torch.einsum(equation, *theirs)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)
    weight = rng.standard_normal(expected.shape)
    (out * ta.tensor(weight)).sum().backward()
    (expected * torch.tensor(weight)).sum().backward()
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_einsum_subscripts_that_do_not_fit_name_the_equation():
    with pytest.raises(ValueError, match=r"'ij' do not fit an operand of shape \(2, 3, 4\) in "
                                         r"'ij,jk->ik'"):
        ta.einsum("ij,jk->ik", ta.ones(2, 3, 4), ta.ones(3, 4))


@pytest.mark.parametrize("equation, shapes", [
    (",i->i", [(), (3,)]),  # a 0-d operand: its gradient was (1,), refused by backward
    ("i,->i", [(3,), ()]),
    (",->", [(), ()]),
    ("->", [()]),
    ("ij,->", [(2, 3), ()]),
    (",ij,j->i", [(), (2, 3), (3,)]),
])
def test_einsum_of_0d_operands_matches_torch_forward_and_backward(equation, shapes):
    rng = np.random.default_rng(7)
    values = [rng.standard_normal(s) for s in shapes]
    ours = [ta.tensor(v, requires_grad=True) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    out, expected = ta.einsum(equation, *ours), torch.einsum(equation, *theirs)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-12)
    weight = rng.standard_normal(expected.shape)
    (out * ta.tensor(weight)).sum().backward()
    (expected * torch.tensor(weight)).sum().backward()
    for a, b in zip(ours, theirs, strict=True):
        assert a.grad.shape == a.shape
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)


# ---- index tensors: the dtypes torch takes (int64, int32, uint8 as a mask, bool) -----------------


def _both(values, dtype=np.float64, requires_grad=False):
    """The same values as a tinyattn tensor and a torch tensor."""
    a = np.asarray(values, dtype=dtype)
    return (ta.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


@pytest.mark.parametrize("mask", [[1, 0, 1], [0, 0, 0], [[1, 0, 1], [0, 1, 1]], 1, 0],
                         ids=["1-D", "none", "2-D", "0-d one", "0-d zero"])
def test_a_uint8_index_is_a_bool_mask_as_torch(mask):
    """torch reads a uint8 index as the bool mask it used to be (with its deprecation warning);
    it was read as integer positions (x[[1, 0, 1]] picks entries 1, 0, 1)."""
    values = np.arange(6.0).reshape(2, 3) if np.ndim(mask) == 2 else np.arange(6.0)[:3]
    x, tx = _both(values, requires_grad=True)
    m = np.asarray(mask, dtype=np.uint8)
    with pytest.warns(UserWarning, match="uint8 is deprecated"):
        out = x[ta.tensor(m)]
    with warnings.catch_warnings():  # (torch warns too, but for a 0-d mask)
        warnings.simplefilter("ignore")
        want = tx[torch.tensor(m)]
    assert out.shape == tuple(want.shape)
    np.testing.assert_array_equal(out.numpy(), want.detach().numpy())
    g = np.arange(1.0, out.numel() + 1).reshape(out.shape)
    out.backward(ta.tensor(g))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want.backward(torch.tensor(g))
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_a_uint8_index_in_a_tuple_and_in_setitem_is_a_mask():
    x, tx = _both(np.arange(12.0).reshape(3, 4))
    cols = np.array([1, 0, 1, 1], dtype=np.uint8)
    with pytest.warns(UserWarning, match="uint8"):
        got = x[1:, ta.tensor(cols)]
    np.testing.assert_array_equal(got.numpy(), tx[1:, torch.tensor(cols.astype(bool))].numpy())
    y, ty = _both([10.0, 20.0, 30.0])
    m = np.array([1, 0, 1], dtype=np.uint8)
    with pytest.warns(UserWarning, match="uint8"):
        y[ta.tensor(m)] = ta.tensor([5.0, 6.0], dtype=ta.float64)
    ty[torch.tensor(m).bool()] = torch.tensor([5.0, 6.0], dtype=torch.float64)
    assert y.tolist() == ty.tolist() == [5.0, 20.0, 6.0]  # was [6.0, 5.0, 30.0]
    with pytest.warns(UserWarning, match="uint8"):
        y[ta.tensor(m)] = 0.0  # (torch refuses a number here: its masked_fill_ wants bool)
    assert y.tolist() == [0.0, 20.0, 0.0]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint16, np.uint32, np.uint64])
def test_index_tensors_of_other_integer_dtypes_are_refused_as_torch(dtype, recwarn):
    x = ta.tensor([10.0, 20.0, 30.0])
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or "
                                         "bool"):
        torch.tensor([10.0, 20.0, 30.0])[torch.tensor([1, 0], dtype=getattr(torch, np.dtype(
            dtype).name))]
    with pytest.raises(ta.DTypeError, match=rf"getitem: index tensors must be int64, int32, "
                                            rf"uint8 \(a mask\) or bool, got {np.dtype(dtype)}"):
        x[ta.tensor(np.array([1, 0], dtype=dtype))]
    with pytest.raises(ta.DTypeError, match="setitem: index tensors must be"):
        x[:, ta.tensor(np.array([1], dtype=dtype))] = 1.0
    assert x[ta.tensor(np.array(1, dtype=dtype))].item() == 20.0  # 0-d: an int, as in torch
    for ok in (np.int32, np.int64):
        assert x[ta.tensor(np.array([2, 0], dtype=ok))].tolist() == [30.0, 10.0]


# ---- take_along_dim: the input and the indices broadcast against each other ---------------------


@pytest.mark.parametrize("x_shape, index, dim", [
    ((3, 1), [[0, 1, 2, 0], [2, 2, 1, 0]], 0),  # the reported case: x (3, 1) against (2, 4)
    ((1, 4), [[3, 0], [1, 1], [2, 2]], 1),  # x (1, 4) against (3, 2) along dim 1
    ((2, 1, 4), np.zeros((1, 3, 2), dtype=np.int64) + [[[3], [0], [1]]], -1),
    ((2, 3), [[1], [0]], 1),  # no broadcasting: the path gather takes
])
def test_take_along_dim_broadcasts_the_input_with_gradients_as_torch(x_shape, index, dim):
    rng = np.random.default_rng(3)
    x, tx = _both(rng.standard_normal(x_shape), requires_grad=True)
    i = np.asarray(index, dtype=np.int64)
    out = ta.take_along_dim(x, ta.tensor(i), dim=dim)
    want = torch.take_along_dim(tx, torch.tensor(i), dim=dim)
    np.testing.assert_array_equal(out.numpy(), want.detach().numpy())
    g = rng.standard_normal(out.shape)
    out.backward(ta.tensor(g))  # crashed: a raw NumPy IndexError in the VJP
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    z = ta.tensor(rng.standard_normal(x_shape), requires_grad=True)
    assert ta.gradcheck(lambda t: ta.take_along_dim(t, ta.tensor(i), dim=dim), [z])


def test_take_along_dim_shapes_that_do_not_broadcast_say_so():
    with pytest.raises(RuntimeError, match="must match"):
        torch.take_along_dim(torch.zeros(3, 4), torch.tensor([[0, 1]]), dim=0)
    with pytest.raises(ta.ShapeError, match=r"^take_along_dim: indices \(1, 2\) and input "
                                            r"\(3, 4\) do not broadcast outside dim 0"):
        ta.take_along_dim(ta.zeros(3, 4), ta.tensor([[0, 1]]), dim=0)


# ---- setitem: a value with extra leading 1s, a 0-d tensor ---------------------------------------


@pytest.mark.parametrize("index, value_shape", [
    (slice(0, 2), (1, 2, 3)),  # the reported case: (1, 2, 3) into (2, 3)
    (slice(0, 2), (1, 1, 2, 3)),
    (slice(0, 2), (1, 1, 3)),  # extra leading 1s and a broadcast dim
    ([0, 2], (1, 2, 1)),  # through an advanced index
    ((1, slice(None)), (1, 3)),
])
def test_setitem_value_with_leading_ones_gets_its_gradient_as_torch(index, value_shape):
    rng = np.random.default_rng(5)
    x, tx = _both(rng.standard_normal((4, 3)), requires_grad=True)
    v, tv = _both(rng.standard_normal(value_shape), requires_grad=True)
    y, ty = x * 1, tx * 1
    y[index] = v
    ty[index] = tv
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    g = rng.standard_normal((4, 3))
    (y * ta.tensor(g)).sum().backward()  # crashed: the VJP gave v a (2, 3) gradient
    (ty * torch.tensor(g)).sum().backward()
    assert v.grad.shape == value_shape
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)

    def put(a, b):
        out = a * 1
        out[index] = b
        return out
    assert ta.gradcheck(put, [ta.tensor(rng.standard_normal((4, 3)), requires_grad=True),
                              ta.tensor(rng.standard_normal(value_shape), requires_grad=True)])


@pytest.mark.parametrize("index", [Ellipsis, (), True, False, "tensor True", "tensor False"])
@pytest.mark.parametrize("value", ["number", "tensor"])
def test_setitem_on_a_0d_tensor_in_the_graph_as_torch(index, value):
    """y[...] = v on a 0-d tensor that needs grad: its values were a NumPy scalar, which
    cannot be written into (a confusing DTypeError about numpy.float32)."""
    x, tx = _both(2.0, requires_grad=True)
    w, tw = _both(3.0, requires_grad=True)
    y, ty = x * 3, tx * 3
    ours, theirs = index, index
    if isinstance(index, str):
        flag = index.endswith("True")
        ours, theirs = ta.tensor(flag), torch.tensor(flag)
    y[ours] = (w * 5) if value == "tensor" else 7.0
    ty[theirs] = (tw * 5) if value == "tensor" else 7.0
    assert y.item() == ty.item()
    y.backward()
    ty.backward()
    assert x.grad.item() == tx.grad.item()
    if value == "tensor":  # (y[False] = v: torch skips the write, so v gets None, not 0)
        assert w.grad.item() == (0.0 if tw.grad is None else tw.grad.item())


# ---- the scatter family keeps self's dtype, as torch ---------------------------------------------


def test_scatter_casts_a_number_value_to_self_dtype_as_torch():
    for v in (2.5, -2.5, True):
        want = torch.tensor([[1, 2], [3, 4]]).scatter(1, torch.tensor([[1], [0]]), v)
        got = ta.tensor([[1, 2], [3, 4]]).scatter(1, ta.tensor([[1], [0]]), v)
        assert got.dtype == np.int64 and got.tolist() == want.tolist()  # was float32
    got = ta.tensor([[1.0, 2.0]], dtype=ta.float64).scatter(1, ta.tensor([[0]]), 3)
    assert got.dtype == np.float64 and got.tolist() == [[3.0, 2.0]]
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.zeros(2, dtype=torch.int8).scatter(0, torch.tensor([0]), 300)
    for v in (300, float("nan")):
        with pytest.raises(ta.DTypeError, match=r"scatter: the value .* cannot be held by this "
                                                r"int8 tensor \(-128..127\)"):
            ta.zeros(2, dtype=ta.int8).scatter(0, ta.tensor([0]), v)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_integer_scatter_reduce_stays_integer_as_torch(dtype, include_self, reduce):
    """mean of integers is floor-divided, as torch's (it was float64); amax/amin of integers
    without self start from the dtype's ends (a cast of -inf was undefined)."""
    x = np.array([[1, 2, 7], [3, 4, 0]], dtype=dtype)
    src = np.array([[1, 2, 4], [2, 3, 5]], dtype=dtype)
    if dtype != np.uint8:
        x, src = x - 3, src - 4  # negatives: floor, not truncation
    index = np.array([[1, 1, 0], [0, 0, 0]])
    got = ta.tensor(x).scatter_reduce(1, ta.tensor(index), ta.tensor(src), reduce,
                                      include_self=include_self)
    want = torch.tensor(x).scatter_reduce(1, torch.tensor(index), torch.tensor(src), reduce,
                                          include_self=include_self)
    assert got.dtype == dtype
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("name, call", [
    ("scatter", lambda lib, x, s: x.scatter(1, lib.tensor([[1], [0]]), s)),
    ("scatter_add", lambda lib, x, s: x.scatter_add(1, lib.tensor([[1], [0]]), s)),
    ("scatter_reduce", lambda lib, x, s: x.scatter_reduce(1, lib.tensor([[1], [0]]), s, "sum")),
    ("index_add", lambda lib, x, s: x.index_add(1, lib.tensor([1]), s)),
    ("index_copy", lambda lib, x, s: x.index_copy(1, lib.tensor([1]), s)),
    ("masked_scatter", lambda lib, x, s: x.masked_scatter(x > 2, s)),
    ("scatter_", lambda lib, x, s: x.scatter_(1, lib.tensor([[1], [0]]), s)),
    ("index_add_", lambda lib, x, s: x.index_add_(1, lib.tensor([1]), s)),
])
@pytest.mark.parametrize("self_dtype, src_dtype", [("float32", "float64"), ("int64", "float32"),
                                                   ("float64", "float32"), ("int64", "int32")])
def test_scatter_family_refuses_a_source_of_another_dtype_as_torch(name, call, self_dtype,
                                                                    src_dtype):
    """torch: "scatter(): Expected self.dtype to be equal to src.dtype" (index_add, index_copy
    and masked_scatter likewise); tinyattn promoted (float32 self, float64 src: float64)."""
    values = [[1, 2], [3, 4]]
    with pytest.raises(RuntimeError):
        call(torch, torch.tensor(values, dtype=getattr(torch, self_dtype)),
             torch.ones(2, 1, dtype=getattr(torch, src_dtype)))
    x = ta.tensor(values, dtype=getattr(np, self_dtype))
    with pytest.raises(ta.DTypeError, match=rf"^{name.rstrip('_')}_?: .*{src_dtype}.*"
                                            rf"{self_dtype}|^{name}: .*{self_dtype}.*{src_dtype}"):
        call(ta, x, ta.ones(2, 1, dtype=getattr(np, src_dtype)))


def test_index_add_of_integers_with_a_float_alpha_truncates_it_as_torch():
    for alpha in (2.5, 2.7, -1.5):
        want = torch.tensor([1, 2]).index_add(0, torch.tensor([0]), torch.tensor([3]),
                                              alpha=alpha)
        got = ta.tensor([1, 2]).index_add(0, ta.tensor([0]), ta.tensor([3]), alpha=alpha)
        assert got.dtype == np.int64 and got.tolist() == want.tolist()


# ---- negative indices: refused where torch refuses them -----------------------------------------


NEGATIVE = {
    "gather": lambda lib, x: x.gather(1, lib.tensor([[-1], [0]])),
    "scatter": lambda lib, x: x.scatter(1, lib.tensor([[-1], [0]]), 9.0),
    "scatter_add": lambda lib, x: x.scatter_add(1, lib.tensor([[-1], [0]]),
                                                lib.ones(2, 1, dtype=x.dtype)),
    "scatter_reduce": lambda lib, x: x.scatter_reduce(1, lib.tensor([[-1], [0]]),
                                                      lib.ones(2, 1, dtype=x.dtype), "amax"),
    "index_select": lambda lib, x: x.index_select(1, lib.tensor([-1])),
    "index_copy": lambda lib, x: x.index_copy(1, lib.tensor([-1]), lib.ones(2, 1, dtype=x.dtype)),
    "index_add": lambda lib, x: x.index_add(1, lib.tensor([-1]), lib.ones(2, 1, dtype=x.dtype)),
    "index_copy_": lambda lib, x: x.index_copy_(1, lib.tensor([2, -1]),
                                                lib.ones(2, 2, dtype=x.dtype)),
}


@pytest.mark.parametrize("name", list(NEGATIVE))
def test_negative_indices_are_refused_where_torch_refuses_them(name):
    with pytest.raises((RuntimeError, IndexError), match="out of (bounds|DATA bounds|range)"):
        NEGATIVE[name](torch, torch.tensor([[1.0, 2, 3], [4, 5, 6]]))
    with pytest.raises(ta.DimError, match=rf"^{name.rstrip('_')}_?: index -1 is out of range "
                                          r"for dim 1 of size 3 \(input \(2, 3\)"):
        NEGATIVE[name](ta, ta.tensor([[1.0, 2, 3], [4, 5, 6]]))


def test_negative_indices_stay_where_torch_takes_them():
    x, tx = _both([[1.0, 2, 3], [4, 5, 6]])
    for call in (lambda lib, t: t.take_along_dim(lib.tensor([[-1], [0]]), 1),
                 lambda lib, t: t.index_fill(1, lib.tensor([-1]), 9.0),
                 lambda lib, t: t[lib.tensor([-1])],
                 lambda lib, t: lib.take_along_dim(t, lib.tensor([[-3, 2]]), 1)):
        np.testing.assert_array_equal(call(ta, x).numpy(), call(torch, tx).numpy())


# ---- masks with more dims than self: self broadcasts (out of place), as torch -------------------


@pytest.mark.parametrize("x_shape, mask_shape", [((4,), (2, 4)), ((1, 4), (3, 1)),
                                                 ((3, 1, 4), (2, 4))])
def test_masks_larger_than_self_broadcast_it_as_torch(x_shape, mask_shape):
    rng = np.random.default_rng(9)
    x, tx = _both(rng.standard_normal(x_shape), requires_grad=True)
    m = rng.standard_normal(mask_shape) > 0
    m.flat[0] = True
    v, tv = _both(2.5, requires_grad=True)
    n = np.broadcast_shapes(x_shape, mask_shape)
    src, tsrc = _both(np.arange(np.prod(n), dtype=np.float64), requires_grad=True)
    ours = [x.masked_fill(ta.tensor(m), -1.0), x.masked_fill(ta.tensor(m), v),
            x.masked_scatter(ta.tensor(m), src), x.masked_select(ta.tensor(m))]
    theirs = [tx.masked_fill(torch.tensor(m), -1.0), tx.masked_fill(torch.tensor(m), tv),
              tx.masked_scatter(torch.tensor(m), tsrc), tx.masked_select(torch.tensor(m))]
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.detach().numpy())
    weights = [rng.standard_normal(b.shape) for b in theirs]
    sum(((a * ta.tensor(w)).sum() for a, w in zip(ours, weights, strict=True)),
        ta.tensor(0.0, dtype=ta.float64)).backward()
    sum((b * torch.tensor(w)).sum() for b, w in zip(theirs, weights, strict=True)).backward()
    for a, b in ((x, tx), (v, tv), (src, tsrc)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)


def test_masks_larger_than_self_are_refused_in_place_and_when_they_do_not_broadcast():
    m = ta.tensor([[True, False, True, False], [True] * 4])
    for call in (lambda x: x.masked_fill_(m, 0.0), lambda x: x.masked_fill_(m, ta.tensor(0.0)),
                 lambda x: x.masked_scatter_(m, ta.arange(6.0))):
        with pytest.raises(ta.ShapeError, match=r"masked_(fill|scatter)_?: .*\(2, 4\).*\(4,\)"):
            call(ta.tensor([1.0, 2, 3, 4]))
    for call in (lambda x, k: x.masked_fill(k, 0.0), lambda x, k: x.masked_scatter(k, x)):
        with pytest.raises(ta.ShapeError, match=r"^masked_(fill|scatter): mask \(2, 3\) does not "
                                                r"broadcast to x \(4,\), nor the two together"):
            call(ta.tensor([1.0, 2, 3, 4]), ta.ones(2, 3, dtype=ta.bool))


# ---- a 0-d bool index adds a dim of size 1 (or 0) and takes none --------------------------------


class _Key:
    """_Key()[1, :, T] is the index (1, slice(None), T), as x[1, :, T] receives it."""

    def __getitem__(self, key):
        return key


BOOL_0D = ["1, T, :, [0, 1]", "T, 1, [0, 1]", "T", "F", "1, T", "T, 1", "1, T, [0, 1]",
           "T, [0, 1], 1", "[0, 1], T, 1", "1, [0, 1], T", "..., T, 1", "1, ..., T, [0, 1]",
           "1, None, T, :, [0, 1]", "T, T, 1, [0, 1]", "1, :, T", "1, T, :, mask",
           "True, 1, [0, 1]", "1, True, :, [0, 1]", "1, :, True", "F, 1"]


@pytest.mark.parametrize("spelled", BOOL_0D)
def test_a_0d_bool_index_among_others_as_torch(spelled):
    def index(lib):
        names = {"T": lib.tensor(True), "F": lib.tensor(False), "key": _Key(),
                 "mask": lib.tensor([True, False, True, False, False])}
        return eval(f"key[{spelled}]", {}, names)  # noqa: S307 - the index as written
    rng = np.random.default_rng(2)
    x, tx = _both(rng.standard_normal((3, 4, 5)), requires_grad=True)
    out, want = x[index(ta)], tx[index(torch)]  # "1, T, :, [0, 1]" raised: too many indices
    assert out.shape == tuple(want.shape)
    np.testing.assert_array_equal(out.numpy(), want.detach().numpy())
    g = rng.standard_normal(out.shape)
    out.backward(ta.tensor(g))
    want.backward(torch.tensor(g))
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    y, ty = _both(np.zeros((3, 4, 5)))
    y[index(ta)] = 1.0
    ty[index(torch)] = 1.0
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
