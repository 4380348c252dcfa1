"""Checks for mutation-testing survivors in tinyattn.ops (round 6); each observes what its mutant
broke:

- the linalg sample helpers: _well gives well-conditioned (n, n) matrices and _spd symmetric
  positive-definite ones (eigenvalues >= 1, as M Mᵀ + I) for any batch shape, and the
  registry's samples (what the gradchecks run) have these properties;
- linalg.solve / solve_triangular's shape error names torch's equation, AX = B (XA = B for
  left=False);
- special._zeta (the source of lgamma's Taylor coefficients) gives ζ(s) at known values;
- gather / index_select refusing a negative index name the valid range 0..n-1.
"""

import math

import numpy as np
import pytest
import torch

import tinyattn as ta
from tinyattn.errors import DimError, ShapeError
from tinyattn.ops import REGISTRY
from tinyattn.ops.linalg import _spd, _well
from tinyattn.ops.special import _zeta

# ---- linalg's sample helpers ---------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1), (2, 3, 2, 2)])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_well_samples_are_well_conditioned_matrices_of_the_shape_asked(shape, sign):
    a = _well(*shape, sign=sign).values
    assert a.shape == shape and a.dtype == np.float64
    assert np.linalg.cond(a).max() < 10
    # n·I dominates: the diagonal has the sign asked for
    assert (sign * np.diagonal(a, axis1=-2, axis2=-1) > 0).all()


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (1, 1), (2, 2, 3, 3), (4, 1, 2, 2)])
def test_spd_samples_are_symmetric_positive_definite_for_any_batch_shape(shape):
    a = _spd(*shape).values
    assert a.shape == shape
    np.testing.assert_allclose(a, np.swapaxes(a, -1, -2), rtol=0, atol=1e-12)
    assert np.linalg.eigvalsh(a).min() >= 1 - 1e-9  # M Mᵀ + I: every eigenvalue >= 1
    ta.linalg.cholesky(ta.tensor(a))  # (factors without a LinAlgError)


@pytest.mark.parametrize("name", ["inv", "det", "slogdet", "solve", "solve_triangular"])
def test_registry_matrix_samples_are_well_conditioned(name):
    for inputs, _ in REGISTRY[name].samples:
        a = inputs[0].values
        assert a.shape[-1] == a.shape[-2]
        assert np.linalg.cond(a).max() < 10


def test_registry_cholesky_samples_are_symmetric_positive_definite():
    for inputs, _ in REGISTRY["cholesky"].samples:
        a = inputs[0].values
        np.testing.assert_allclose(a, np.swapaxes(a, -1, -2), rtol=0, atol=1e-12)
        assert np.linalg.eigvalsh(a).min() >= 1 - 1e-9


# ---- solve's shape error --------------------------------------------------------------------


def _solve_message(fn, *args, **kw):
    with pytest.raises(ShapeError) as info:
        fn(*args, **kw)
    return str(info.value)


def test_solve_shape_error_names_the_equation_ax_equals_b_as_torch():
    a, b = np.eye(3), np.ones((4, 2))
    with pytest.raises(RuntimeError) as ref:
        torch.linalg.solve(torch.tensor(a), torch.tensor(b))
    assert "equation AX = B" in str(ref.value)
    msg = _solve_message(ta.linalg.solve, ta.tensor(a), ta.tensor(b))
    assert "for the equation AX = B (B must be (..., n, k) with n = 3)" in msg
    msg = _solve_message(ta.linalg.solve_triangular, ta.tensor(a), ta.tensor(b), upper=True)
    assert msg.startswith("linalg.solve_triangular:")
    assert "for the equation AX = B (B must be (..., n, k) with n = 3)" in msg


def test_solve_triangular_right_side_shape_error_names_xa_equals_b():
    a, b = ta.tensor(np.eye(3)), ta.tensor(np.ones((2, 4)))
    msg = _solve_message(ta.linalg.solve_triangular, a, b, upper=True, left=False)
    assert "for the equation XA = B (B must be (..., k, n) with n = 3)" in msg


# ---- ζ(s), lgamma's Taylor coefficients -------------------------------------------------------


@pytest.mark.parametrize(("s", "value"), [(2, math.pi ** 2 / 6), (3, 1.2020569031595942),
                                          (4, math.pi ** 4 / 90), (6, math.pi ** 6 / 945),
                                          (20, 1.0000009539620339)])
def test_zeta_at_known_values(s, value):
    assert _zeta(s) == pytest.approx(value, rel=2e-15, abs=0)  # (a few ulp)


def test_lgamma_float64_near_one_matches_math_lgamma():
    xs = [0.75, 0.9, 1.1, 1.3, 1.5]
    got = ta.lgamma(ta.tensor(xs, dtype=ta.float64)).numpy()
    for x, g in zip(xs, got, strict=True):
        assert g == pytest.approx(math.lgamma(x), rel=1e-14, abs=2e-15)


# ---- a negative index where torch refuses it ------------------------------------------------


def test_gather_negative_index_names_the_valid_range_zero_to_n_minus_one():
    with pytest.raises(RuntimeError):
        torch.gather(torch.tensor([1.0, 2.0, 3.0]), 0, torch.tensor([-1]))
    with pytest.raises(DimError) as info:
        ta.gather(ta.tensor([1.0, 2.0, 3.0]), 0, ta.tensor([-1]))
    assert "gather takes indices 0..2 (negative ones do not count" in str(info.value)


def test_index_select_negative_index_names_the_valid_range():
    x = ta.tensor(np.arange(10.0).reshape(5, 2))
    with pytest.raises(IndexError) as info:
        x.index_select(0, ta.tensor([-2]))
    msg = str(info.value)
    assert "index -2 is out of range for dim 0 of size 5" in msg
    assert "index_select takes indices 0..4 " in msg
