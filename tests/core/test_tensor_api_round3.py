"""Tensor API parity with torch, third round: values, dtypes, shapes and gradients (with a
random upstream gradient) of the ops a torch user reaches for, compared against torch."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import ShapeError

torch = pytest.importorskip("torch")

INF = float("inf")


def _pair(a, requires_grad=True):
    """The same values as a tinyattn and a torch tensor (both leaves)."""
    return (ta.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def _same(ours, theirs, atol=1e-6):
    theirs = theirs.detach()
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.numpy(), rtol=1e-5, atol=atol)


def _same_with_grad(fn_ours, fn_theirs, a, seed=0):
    """fn(x) against torch's, and x.grad for a random upstream gradient."""
    x, tx = _pair(a)
    out, tout = fn_ours(x), fn_theirs(tx)
    _same(out, tout)
    g = np.random.default_rng(seed).standard_normal(tuple(tout.shape)).astype(a.dtype)
    out.backward(ta.tensor(g))
    tout.backward(torch.tensor(g))
    # (torch leaves no gradient where it is 0 everywhere, as for the 0-"norm")
    _same(x.grad, torch.zeros_like(tx) if tx.grad is None else tx.grad)


# ---- torch.linalg: vector_norm, matrix_norm, norm ----------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ord_", [2, 1, 3, 0.5, INF, -INF, 0])
@pytest.mark.parametrize("dim", [None, 1, (0, 2), -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_linalg_vector_norm(dtype, ord_, dim, keepdim):
    a = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(dtype)
    _same_with_grad(lambda x: ta.linalg.vector_norm(x, ord_, dim, keepdim),
                    lambda x: torch.linalg.vector_norm(x, ord_, dim, keepdim), a)


def test_linalg_vector_norm_dtype_casts_first():
    a = np.random.default_rng(2).standard_normal((3, 4)).astype("float32")
    _same_with_grad(lambda x: ta.linalg.vector_norm(x, dim=1, dtype=ta.float64),
                    lambda x: torch.linalg.vector_norm(x, dim=1, dtype=torch.float64), a)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ord_", ["fro", 1, -1, INF, -INF])
@pytest.mark.parametrize("dim", [(-2, -1), (0, 2), (2, 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_linalg_matrix_norm(dtype, ord_, dim, keepdim):
    a = np.random.default_rng(3).standard_normal((3, 4, 5)).astype(dtype)
    _same_with_grad(lambda x: ta.linalg.matrix_norm(x, ord_, dim, keepdim),
                    lambda x: torch.linalg.matrix_norm(x, ord_, dim, keepdim), a)


@pytest.mark.parametrize("ord_", [None, "fro", 1, -1, INF, -INF])
def test_linalg_norm_of_a_matrix(ord_):
    a = np.random.default_rng(4).standard_normal((4, 5))
    _same_with_grad(lambda x: ta.linalg.norm(x, ord_), lambda x: torch.linalg.norm(x, ord_), a)
    b = np.random.default_rng(5).standard_normal((2, 4, 5)).astype("float32")
    _same_with_grad(lambda x: ta.linalg.norm(x, ord_, dim=(0, 2), keepdim=True),
                    lambda x: torch.linalg.norm(x, ord_, dim=(0, 2), keepdim=True), b)


@pytest.mark.parametrize("ord_", [None, 1, 2, 3, INF, 0])
def test_linalg_norm_of_vectors(ord_):
    a = np.random.default_rng(6).standard_normal((4, 5))
    _same_with_grad(lambda x: ta.linalg.norm(x[0], ord_), lambda x: torch.linalg.norm(x[0], ord_),
                    a)
    _same_with_grad(lambda x: ta.linalg.norm(x, ord_, dim=1),
                    lambda x: torch.linalg.norm(x, ord_, dim=1), a)
    # no ord and no dim: the 2-norm of all entries, whatever the number of dims
    _same_with_grad(lambda x: ta.linalg.norm(x.reshape(2, 2, 5)),
                    lambda x: torch.linalg.norm(x.reshape(2, 2, 5)), a)


def test_linalg_norm_refusals_name_the_op():
    x = ta.ones(2, 3, 4)
    with pytest.raises(ValueError, match="linalg.norm"):
        ta.linalg.norm(x, 2)  # an ord needs a 1-D or 2-D input, or a dim (torch's rule)
    with pytest.raises(ValueError, match="matrix_norm.*'spectral'.*not a matrix norm"):
        ta.linalg.matrix_norm(x, "spectral")
    with pytest.raises(ValueError, match="matrix_norm.*ord=3"):
        ta.linalg.matrix_norm(x, 3)
    with pytest.raises(ValueError, match="vector_norm"):
        ta.linalg.vector_norm(x, "fro")


# ---- the scatter and index ops on a 0-d tensor: its one implicit dim, as torch's -----------------

_ZERO_D = {
    "scatter": lambda lib, x, s, i: x.scatter(0, i, s),
    "scatter_value": lambda lib, x, s, i: x.scatter(-1, i, 3.0) * s,
    "scatter_add": lambda lib, x, s, i: x.scatter_add(0, i, s),
    "scatter_reduce": lambda lib, x, s, i: x.scatter_reduce(-1, i, s, "prod"),
    "index_add": lambda lib, x, s, i: x.index_add(0, i, s, alpha=2),
    "index_copy": lambda lib, x, s, i: x.index_copy(-1, i, s),
    "index_select": lambda lib, x, s, i: x.index_select(-1, i) * s,
    "scatter_": lambda lib, x, s, i: (x * 1).scatter_(0, i, s),
    "index_add_": lambda lib, x, s, i: (x * 1).index_add_(-1, i, s),
    "routine_scatter_add": lambda lib, x, s, i: lib.scatter_add(x, 0, i, s),
}


@pytest.mark.parametrize("name", sorted(_ZERO_D))
@pytest.mark.parametrize("index", [0, [0]])
def test_scatter_and_index_ops_on_a_0d_tensor(name, index):
    fn = _ZERO_D[name]
    x, tx = _pair(np.array(1.5))
    s, ts = _pair(np.array(-2.0))
    out = fn(ta, x, s, ta.tensor(index))
    tout = fn(torch, tx, ts, torch.tensor(index))
    _same(out, tout)
    out.backward(ta.tensor(0.7, dtype=ta.float64))
    tout.backward(torch.tensor(0.7, dtype=torch.float64))
    _same(x.grad, tx.grad)
    _same(s.grad, ts.grad)


def test_scatter_on_a_0d_tensor_refuses_an_index_of_two_entries():
    with pytest.raises(ShapeError, match="scatter_add.*0-d"):
        ta.tensor(1.0).scatter_add(0, ta.tensor([0, 0]), ta.tensor(2.0))


# ---- an Ellipsis that stands for no dims does not part advanced indices (torch's rule) ---------

@pytest.mark.parametrize("make", [
    lambda lib: (slice(None), [0, 1], Ellipsis, [1, 2]),
    lambda lib: (slice(None), lib.tensor([[0], [2]]), Ellipsis, lib.tensor([1, 2, 2])),
    lambda lib: (slice(0, 2), lib.tensor([True, False, False, True]), Ellipsis,
               lib.tensor([False, True, True, False, False])),
    lambda lib: (Ellipsis, slice(None), [0, 1], [1, 2]),  # (an Ellipsis that spans none, first)
])
def test_an_empty_ellipsis_keeps_advanced_indices_in_place(make):
    a = np.random.default_rng(7).standard_normal((3, 4, 5))
    _same_with_grad(lambda x: x[make(ta)], lambda x: x[make(torch)], a)
    tshape = tuple(torch.zeros(3, 4, 5)[make(torch)].shape)
    v = np.random.default_rng(8).standard_normal(tshape)

    def write(lib, x, value):
        y = x * 1
        y[make(lib)] = value
        return y
    x, tx = _pair(a)
    vv, tvv = _pair(v)
    out, tout = write(ta, x, vv), write(torch, tx, tvv)
    _same(out, tout)
    g = np.random.default_rng(9).standard_normal(a.shape)
    out.backward(ta.tensor(g))
    tout.backward(torch.tensor(g))
    _same(x.grad, tx.grad)
    _same(vv.grad, tvv.grad)


# ---- einsum's sublist form: einsum(a, [0, 1], b, [1, 2], [0, 2]) --------------------------------

@pytest.mark.parametrize("make", [
    lambda lib, a, b: lib.einsum(a, [0, 1], b, [1, 2], [0, 2]),
    lambda lib, a, b: lib.einsum(a, [0, 1], b, [1, 2]),  # (the output: the subscripts used once)
    lambda lib, a, b: lib.einsum(a, [Ellipsis, 1], b, [1, 30], [Ellipsis, 30]),
    lambda lib, a, b: lib.einsum(a, [0, 1], [1]),
])
def test_einsum_sublist_form(make):
    a = np.random.default_rng(10).standard_normal((3, 4))
    b = np.random.default_rng(11).standard_normal((4, 5))
    x, tx = _pair(a)
    y, ty = _pair(b)
    out, tout = make(ta, x, y), make(torch, tx, ty)
    _same(out, tout)
    g = np.random.default_rng(12).standard_normal(tuple(tout.shape))
    out.backward(ta.tensor(g))
    tout.backward(torch.tensor(g))
    _same(x.grad, tx.grad)
    _same(y.grad if y.grad is not None else ta.zeros(4, 5, dtype=ta.float64),
          ty.grad if ty.grad is not None else torch.zeros(4, 5, dtype=torch.float64))
