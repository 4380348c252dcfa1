"""torch.linalg's dense solvers and factorizations (ops/linalg.py, tinyattn/linalg.py): inv,
det, slogdet, solve, cholesky, solve_triangular, and what is built on them (Tensor.inverse,
torch.logdet, matrix_power with n < 0): values and gradients against torch in float64,
gradcheck against finite differences, batches, and the errors."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


def _well(*shape, seed=0, sign=1.0):
    n = shape[-1]
    rng = np.random.default_rng(seed)
    return sign * (0.5 * rng.standard_normal(shape) + n * np.eye(n))


def _spd(*shape, seed=0):
    m = np.random.default_rng(seed).standard_normal(shape)
    return m @ np.swapaxes(m, -1, -2) + np.eye(shape[-1])


def _both(fn_ta, fn_torch, *arrays, seed=1):
    """Forward values and gradients (against the same random cotangent) of both libraries."""
    xs = [ta.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, want = fn_ta(*xs), fn_torch(*ts)
    assert tuple(out.shape) == tuple(want.shape)
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = np.random.default_rng(seed).standard_normal(tuple(want.shape))
    out.backward(g)
    want.backward(torch.from_numpy(g))
    for x, t in zip(xs, ts, strict=True):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-11)


def _gradcheck(fn, *arrays):
    assert ta.gradcheck(fn, [ta.tensor(a, requires_grad=True) for a in arrays])


# ---- inv and matrix_power -------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 1, 2, 2)])
def test_inv_matches_torch_and_finite_differences(shape):
    a = _well(*shape)
    _both(ta.linalg.inv, torch.linalg.inv, a)
    _both(ta.inverse, torch.inverse, a)
    _both(lambda x: x.inverse(), lambda x: x.inverse(), a)
    _gradcheck(ta.linalg.inv, a)


@pytest.mark.parametrize("n", [-1, -2, -3])
def test_matrix_power_of_a_negative_n_is_the_inverse_power(n):
    a = _well(2, 3, 3)
    _both(lambda x: ta.linalg.matrix_power(x, n), lambda x: torch.linalg.matrix_power(x, n), a)
    _gradcheck(lambda x: x.matrix_power(n), a)


# ---- det, slogdet, logdet -------------------------------------------------------------------


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1)])
def test_det_and_slogdet_match_torch(shape, sign):
    a = _well(*shape, sign=sign)
    _both(ta.linalg.det, torch.linalg.det, a)
    _both(ta.det, torch.det, a)
    _both(lambda x: x.det(), lambda x: x.det(), a)
    _both(lambda x: ta.linalg.slogdet(x).logabsdet, lambda x: torch.linalg.slogdet(x).logabsdet,
          a)
    _both(lambda x: ta.slogdet(x)[1], lambda x: torch.slogdet(x)[1], a)
    sign_ta, sign_torch = ta.linalg.slogdet(ta.tensor(a)).sign, torch.linalg.slogdet(
        torch.tensor(a)).sign
    np.testing.assert_array_equal(sign_ta.numpy(), sign_torch.numpy())
    _gradcheck(ta.linalg.det, a)
    _gradcheck(lambda x: ta.linalg.slogdet(x).logabsdet, a)


def test_slogdet_is_a_named_tuple_and_its_sign_has_no_gradient():
    x = ta.tensor(_well(3, 3, sign=-1.0), requires_grad=True)
    out = ta.linalg.slogdet(x)
    assert type(out).__name__ == "linalg_slogdet" and out._fields == ("sign", "logabsdet")
    assert type(x.slogdet()).__name__ == "slogdet"
    assert out.sign.item() == -1.0 and not out.sign.requires_grad
    assert out.logabsdet.requires_grad


def test_logdet_is_nan_for_a_negative_det_and_minus_inf_for_zero():
    a = np.stack([_well(3, 3), _well(3, 3, sign=-1.0), np.zeros((3, 3))])
    got = ta.logdet(ta.tensor(a)).numpy()
    want = torch.logdet(torch.tensor(a)).numpy()
    np.testing.assert_allclose(got, want)
    assert np.isnan(got[1]) and got[2] == -np.inf
    _both(ta.logdet, torch.logdet, _well(2, 3, 3))


@pytest.mark.parametrize("a,cofactors", [
    ([[1.0, 2.0], [2.0, 4.0]], [[4.0, -2.0], [-2.0, 1.0]]),
    ([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 3.0]],
     [[12.0, -6.0, 0.0], [-6.0, 3.0, 0.0], [0.0, 0.0, 0.0]])])
def test_det_of_a_singular_matrix_has_the_cofactors_as_gradient(a, cofactors):
    """The derivative of det at a singular A of rank n - 1 (finite differences agree); torch
    2.x gives zeros there (where tinyattn differs from it, on purpose)."""
    x = ta.tensor(np.array(a), requires_grad=True)
    out = ta.linalg.det(x)
    assert out.item() == pytest.approx(0.0, abs=1e-12)
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), cofactors, atol=1e-12)
    _gradcheck(ta.linalg.det, np.array(a))


# ---- solve ----------------------------------------------------------------------------------

SOLVE_SHAPES = [((3, 3), (3,)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3)), ((3, 3), (3, 2)),
                ((2, 3, 3), (3, 2)), ((3, 3), (4, 3, 2)), ((2, 3, 3), (4, 2, 3, 1)),
                ((2, 3, 3), (3, 3))]


@pytest.mark.parametrize("a_shape,b_shape", SOLVE_SHAPES)
def test_solve_matches_torch_for_vectors_matrices_and_batches(a_shape, b_shape):
    a, b = _well(*a_shape), np.random.default_rng(3).standard_normal(b_shape)
    _both(ta.linalg.solve, torch.linalg.solve, a, b)
    _gradcheck(ta.linalg.solve, a, b)


def test_solve_from_the_right():
    a, b = _well(2, 3, 3), np.random.default_rng(4).standard_normal((2, 4, 3))
    _both(lambda x, y: ta.linalg.solve(x, y, left=False),
          lambda x, y: torch.linalg.solve(x, y, left=False), a, b)


# ---- cholesky and solve_triangular ------------------------------------------------------------


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_cholesky_matches_torch_and_finite_differences(shape, upper):
    a = _spd(*shape)
    _both(lambda x: ta.linalg.cholesky(x, upper=upper),
          lambda x: torch.linalg.cholesky(x, upper=upper), a)
    # on symmetric perturbations (torch's own gradcheck symmetrises so too)
    _gradcheck(lambda m: ta.linalg.cholesky(m @ m.mT + ta.eye(shape[-1], dtype=ta.float64),
                                            upper=upper), _well(*shape))
    _gradcheck(lambda x: ta.linalg.cholesky(x, upper=upper), a)  # tinyattn factors (A + Aᵀ)/2


TRIANGULAR = [dict(upper=True), dict(upper=False), dict(upper=True, left=False),
              dict(upper=False, unitriangular=True), dict(upper=True, left=False,
                                                          unitriangular=True)]


@pytest.mark.parametrize("kw", TRIANGULAR, ids=str)
@pytest.mark.parametrize("a_shape,b_shape", [((3, 3), (3, 2)), ((2, 3, 3), (4, 1, 3, 3))])
def test_solve_triangular_matches_torch(a_shape, b_shape, kw):
    a, b = _well(*a_shape), np.random.default_rng(5).standard_normal(b_shape)
    if not kw.get("left", True):
        b = np.swapaxes(b, -1, -2).copy()  # (..., k, n): X A = B
    _both(lambda x, y: ta.linalg.solve_triangular(x, y, **kw),
          lambda x, y: torch.linalg.solve_triangular(x, y, **kw), a, b)
    _gradcheck(lambda x, y: ta.linalg.solve_triangular(x, y, **kw), a, b)


# ---- dtypes ---------------------------------------------------------------------------------


def test_float32_stays_float32_and_float16_is_computed_in_float32():
    a = _well(2, 3, 3)
    for dtype in (ta.float32, ta.float16):
        x = ta.tensor(a, dtype=dtype, requires_grad=True)
        out = ta.linalg.inv(x)
        assert out.dtype == dtype
        np.testing.assert_allclose(out.numpy().astype(np.float64), np.linalg.inv(a),
                                   rtol=2e-3 if dtype == ta.float16 else 1e-6, atol=1e-3)
        (out.sum() + ta.linalg.det(x).sum()).backward()
        assert x.grad.dtype == dtype


# ---- errors ---------------------------------------------------------------------------------

CALLS = {
    "inv": lambda a: ta.linalg.inv(a),
    "det": lambda a: ta.linalg.det(a),
    "slogdet": lambda a: ta.linalg.slogdet(a),
    "solve": lambda a: ta.linalg.solve(a, ta.ones(a.shape[-1], dtype=a.dtype)),
    "cholesky": lambda a: ta.linalg.cholesky(a),
    "solve_triangular": lambda a: ta.linalg.solve_triangular(
        a, ta.ones(a.shape[-1], 1, dtype=a.dtype), upper=True),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_non_square_or_1d_or_integer_input_is_refused_by_name(name):
    with pytest.raises(ta.ShapeError, match=rf"linalg.{name}: .*square.*\(2, 3, 4\)"):
        CALLS[name](ta.zeros(2, 3, 4, dtype=ta.float64))
    with pytest.raises(ta.ShapeError, match=rf"linalg.{name}: .*at least 2 dims.*\(3,\)"):
        CALLS[name](ta.zeros(3, dtype=ta.float64))
    with pytest.raises(ta.DTypeError, match=rf"linalg.{name}: expected a floating point.*int64"):
        CALLS[name](ta.tensor(np.eye(3, dtype=np.int64)))


@pytest.mark.parametrize("name", ["inv", "solve", "solve_triangular"])
def test_a_singular_matrix_is_a_linalg_error(name):
    a = ta.tensor(np.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 0.0]]))
    with pytest.raises(ta.linalg.LinAlgError, match=rf"linalg.{name}: .*singular") as info:
        CALLS[name](a)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ta.TinyattnError)
    with pytest.raises(RuntimeError, match="linalg.inv"):
        a.matrix_power(-2)


def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_a_linalg_error():
    with pytest.raises(ta.linalg.LinAlgError, match="linalg.cholesky: .*positive-definite"):
        ta.linalg.cholesky(-ta.eye(3, dtype=ta.float64))


def test_solve_with_shapes_that_do_not_fit_says_so():
    a = ta.tensor(_well(3, 3))
    with pytest.raises(ta.ShapeError, match=r"linalg.solve: incompatible shapes of A \(3, 3\)"):
        ta.linalg.solve(a, ta.ones(2, 3, dtype=ta.float64))
    with pytest.raises(ta.DTypeError, match="linalg.solve: A and B must have the same dtype"):
        ta.linalg.solve(a, ta.ones(3, 2))
    with pytest.raises(ta.ShapeError, match="linalg.solve_triangular: incompatible"):
        ta.linalg.solve_triangular(a, ta.ones(2, 3, dtype=ta.float64), upper=True)
