"""The index ops' rules at their edges: scatter's index (integer, torch's shape rule, the range
[-n, n) and the errors naming the op) and einsum's spelling (spaces, implicit output, ellipses
of different lengths, letters of either case), forward and gradient against torch."""

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


def test_scatter_index_range_is_minus_n_to_n():
    x = np.zeros((2, 3))
    src = np.array([[1.0, 2.0], [3.0, 4.0]])
    edge = np.array([[-3, 2], [0, -1]])  # -n and n-1 are the ends
    out = ta.tensor(x).scatter(1, ta.tensor(edge), ta.tensor(src))
    np.testing.assert_array_equal(out.numpy(), [[1.0, 0.0, 2.0], [3.0, 0.0, 4.0]])
    for worst, index in ((3, [[3, 0], [0, -3]]), (-4, [[0, 0], [-4, 1]])):
        with pytest.raises(IndexError, match=rf"^scatter: index {worst} is out of range for "
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
