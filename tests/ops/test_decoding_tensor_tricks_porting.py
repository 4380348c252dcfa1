"""Index-heavy tensor code of decoding and research repos ported from torch (swap `torch` for
`ta`): the calls that differed from torch, each run side by side with it where it is installed.
"""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import DimError, DTypeError, ShapeError


def _same(got, want, rtol=1e-6):
    """ta tensor `got` equals torch tensor `want`: shape, dtype name and values."""
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    assert np.dtype(got.dtype).name == str(want.dtype).replace("torch.", ""), (
        got.dtype, want.dtype)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=1e-7)


# ---- cdist -----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                  "donot_use_mm_for_euclid_dist"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cdist_takes_compute_mode(mode, dtype):
    """torch.cdist(x1, x2, p, compute_mode=...) as kNN and prototype code writes it: a
    TypeError before (no compute_mode argument)."""
    torch = pytest.importorskip("torch")
    a = np.random.RandomState(0).randn(2, 3, 4)
    b = np.random.RandomState(1).randn(5, 4)
    outs = []
    for lib in (ta, torch):
        x1 = lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True)
        x2 = lib.tensor(b, dtype=getattr(lib, dtype), requires_grad=True)
        d = lib.cdist(x1, x2, compute_mode=mode)
        (d * lib.arange(15.0, dtype=d.dtype).reshape(3, 5).cos()).sum().backward()
        outs.append((d, x1.grad, x2.grad))
    for got, want in zip(*outs, strict=True):
        _same(got, want, rtol=1e-5)


@pytest.mark.parametrize("call, words", [
    (lambda: ta.cdist(ta.ones(2, 3), ta.ones(2, 4)), ["cdist", "(2, 3)", "(2, 4)"]),
    (lambda: ta.cdist(ta.ones(3), ta.ones(3)), ["cdist", "2-D", "(3,)"]),
    (lambda: ta.cdist(ta.ones(2, 3), ta.ones(2, 3), p=-1), ["cdist", "p"]),
    (lambda: ta.cdist(ta.ones(2, 3), ta.ones(2, 3), compute_mode="fast"), ["cdist", "fast"]),
    (lambda: ta.cdist(ta.ones(2, 2, 3), ta.ones(3, 2, 3)), ["cdist", "(2, 2, 3)", "(3, 2, 3)"]),
    (lambda: ta.cdist(ta.ones(2, 3, dtype=ta.long), ta.ones(2, 3)), ["cdist", "int64"]),
])
def test_cdist_bad_input_names_cdist_and_the_shapes(call, words):
    """Bad input was an error from inside (sub's broadcasting, unsqueeze's dim, vector_norm's
    dtype) or no error at all (p < 0); torch refuses each, naming cdist."""
    with pytest.raises((ShapeError, ValueError, DTypeError)) as err:
        call()
    for w in words:
        assert w in str(err.value), (w, str(err.value))


# ---- einsum ----------------------------------------------------------------------------------

def test_einsum_size_mismatch_names_the_subscript():
    """'ij,jk->ik' of (2, 3) and (4, 5): NumPy's 'remapped shapes' message before; torch names
    the subscript and its two sizes."""
    with pytest.raises(ShapeError) as err:
        ta.einsum("ij,jk->ik", ta.ones(2, 3), ta.ones(4, 5))
    msg = str(err.value)
    assert "einsum" in msg and "'j'" in msg and "4" in msg and "3" in msg, msg
    assert "remapped" not in msg, msg


def test_einsum_still_broadcasts_size_one_subscripts():
    torch = pytest.importorskip("torch")
    a, b = np.ones((2, 1)), np.arange(20.0).reshape(4, 5)
    got = ta.einsum("ij,jk->ik", ta.tensor(a), ta.tensor(b))
    want = torch.einsum("ij,jk->ik", torch.tensor(a), torch.tensor(b))
    _same(got, want)


# ---- fill_diagonal_ --------------------------------------------------------------------------

@pytest.mark.parametrize("shape, wrap", [((4, 4), False), ((7, 3), False), ((7, 3), True),
                                         ((3, 5), True), ((3, 3, 3), False)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fill_diagonal_as_contrastive_losses_mask_self_similarity(shape, wrap, dtype):
    """sim.fill_diagonal_(-inf) (SimCLR / InfoNCE: a sample is not its own negative), wrap and
    cubes as torch; the filled entries get no gradient. An AttributeError before."""
    torch = pytest.importorskip("torch")
    a = np.random.RandomState(0).randn(*shape)
    outs = []
    for lib in (ta, torch):
        x = lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True)
        y = (x * 2).fill_diagonal_(-5.0, wrap=wrap)
        (y * lib.arange(y.numel(), dtype=y.dtype).reshape(shape).cos()).sum().backward()
        outs.append((y, x.grad))
    for got, want in zip(*outs, strict=True):
        _same(got, want)


def test_fill_diagonal_returns_self_and_takes_ints():
    torch = pytest.importorskip("torch")
    x = ta.zeros(3, 3, dtype=ta.long)
    assert x.fill_diagonal_(7) is x
    _same(x, torch.zeros(3, 3, dtype=torch.long).fill_diagonal_(7))


@pytest.mark.parametrize("call, words", [
    (lambda: ta.zeros(3).fill_diagonal_(1.0), ["fill_diagonal_", "(3,)"]),
    (lambda: ta.zeros(3, 3, 2).fill_diagonal_(1.0), ["fill_diagonal_", "(3, 3, 2)"]),
])
def test_fill_diagonal_bad_shapes_are_named(call, words):
    with pytest.raises((ShapeError, DimError)) as err:
        call()
    for w in words:
        assert w in str(err.value), (w, str(err.value))


# ---- index_reduce ----------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_index_reduce_matches_torch(reduce, include_self, dtype):
    """x.index_reduce_(dim, index, source, reduce) (segment max / mean pooling of token
    features into their words): an AttributeError before. Gradients as torch's, ties in
    amax / amin shared evenly among the source entries (no self entry ties here)."""
    torch = pytest.importorskip("torch")
    a = np.arange(12.0).reshape(3, 4) / 3 - 1
    s = np.array([[2.0, -1, 0.5], [0.5, 3, 0.5], [4, -1, 0.5]])  # (its .T is written; ties)
    outs = []
    for lib in (ta, torch):
        x = lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=True)
        src = lib.tensor(s, dtype=getattr(lib, dtype), requires_grad=True)
        index = lib.tensor([0, 2, 0])
        y = x.index_reduce(1, index, src.T, reduce, include_self=include_self)
        z = x.clone().index_reduce_(1, index, src.T, reduce, include_self=include_self)
        w = lib.index_reduce(x.detach(), 1, index, src.T.detach(), reduce,
                             include_self=include_self)
        assert np.array_equal(w.numpy(), y.detach().numpy())
        (y * lib.arange(12, dtype=y.dtype).reshape(3, 4).cos()).sum().backward()
        outs.append((y, z, x.grad, src.grad))
    for got, want in zip(*outs, strict=True):
        _same(got, want)


def test_index_reduce_refuses_sum_as_torch():
    with pytest.raises(ValueError, match="index_reduce.*sum"):
        ta.zeros(3).index_reduce(0, ta.tensor([0]), ta.ones(1), "sum")
    with pytest.raises(ShapeError, match="index_reduce"):
        ta.zeros(3, 2).index_reduce(0, ta.tensor([0]), ta.ones(2, 2), "amax")


# ---- addmm family ----------------------------------------------------------------------------

@pytest.mark.parametrize("name, call", [
    ("baddbmm", lambda: ta.baddbmm(ta.ones(2, 3, 5), ta.ones(2, 3, 4), ta.ones(2, 3, 5))),
    ("addbmm", lambda: ta.addbmm(ta.ones(3, 5), ta.ones(2, 3, 4), ta.ones(2, 3, 5))),
    ("addmm", lambda: ta.addmm(ta.ones(3, 5), ta.ones(3, 4), ta.ones(3, 5))),
    ("addmv", lambda: ta.addmv(ta.ones(3), ta.ones(3, 4), ta.ones(3))),
])
def test_addmm_family_shape_errors_name_the_op_called(name, call):
    """baddbmm(M, a, b) with mismatched inner dims said 'bmm: ...', an op the caller never
    wrote; the message now starts with the function called and keeps the shapes."""
    with pytest.raises(ShapeError) as err:
        call()
    assert str(err.value).startswith(f"{name}: "), str(err.value)
