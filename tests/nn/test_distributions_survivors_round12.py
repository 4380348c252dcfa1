"""Tests for survivors of the seed-2 mutation draw of distributions (tools/mutate.py
distributions --sample 60 --seed 2): the method a refusal names, a number's quantile computed
before rounding, Weibull's draws in its parameters' dtype, and the transforms' clamps at the
input's own dtype's tiny and eps (against torch's)."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.distributions import Dirichlet, HalfNormal, Normal, Weibull
from tinyattn.distributions import transforms as T


def test_dirichlet_rsample_names_itself_refusing_a_generator():
    with pytest.raises(TypeError, match=r"^Dirichlet\.rsample: generator must be"):
        Dirichlet(ta.tensor([1.0, 2.0])).rsample(generator="not a generator")


def test_half_normal_cdf_names_itself_refusing_a_value():
    with pytest.raises(ValueError, match=r"^HalfNormal\.cdf: value must be within"):
        HalfNormal(ta.tensor(1.0), validate_args=True).cdf(-1.0)


def test_normal_icdf_of_a_number_rounds_2v_minus_1_once():
    # 2 * 0.3 - 1 in float64, rounded once to float32 (-0.39999998); rounding 0.3 first and
    # computing in float32 gives the next float32 (-0.39999995), and another quantile
    got = Normal(ta.tensor(0.0), ta.tensor(1.0)).icdf(0.3)
    want = ta.tensor(2 * 0.3 - 1).erfinv() * math.sqrt(2)
    assert got.dtype == ta.float32
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert np.float32(2 * 0.3 - 1) != np.float32(2 * np.float32(0.3) - 1)  # (the case bites)


def test_weibull_draws_in_its_parameters_dtype():
    w = Weibull(ta.tensor([1.5, 2.0], dtype=ta.float64), ta.tensor([2.0, 0.5], dtype=ta.float64))
    ta.manual_seed(0)
    got = w.rsample((3,))
    ta.manual_seed(0)
    e = ta.zeros(3, 2, dtype=ta.float64).exponential_()
    assert got.dtype == ta.float64
    # float64 exponential draws, not float32 ones widened (those differ in the 8th digit)
    np.testing.assert_array_equal(got.numpy(), (w.scale * e ** w.concentration_reciprocal).numpy())


TRANSFORMS = [
    ("SigmoidTransform", [20.0, 30.0, -200.0]),
    ("StickBreakingTransform", [30.0, 40.0]),
    ("CorrCholeskyTransform", [30.0, -40.0, 50.0]),
]


@pytest.mark.parametrize(("name", "x"), TRANSFORMS)
def test_transforms_clamp_at_the_float32_tiny_and_eps_as_torch(name, x):
    torch = pytest.importorskip("torch")
    mine, theirs = getattr(T, name)(), getattr(torch.distributions.transforms, name)()
    y, y_t = mine(ta.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_array_equal(y.numpy(), y_t.numpy())  # 1 - eps32, not 1 (float64's eps)
    np.testing.assert_allclose(mine.inv(y).numpy(), theirs.inv(y_t).numpy(), rtol=1e-6)
    assert np.isfinite(mine.inv(y).numpy()).all()


@pytest.mark.parametrize("bad", [(2.5,), (2, 1.0), "a", (None,), 2.5])
def test_a_sample_shape_of_no_ints_is_refused(bad):
    # (int() cut (2.5,) to (2,) without a word; torch.Size refuses it)
    normal = Normal(ta.tensor(0.0), ta.tensor(1.0))
    for draw in (normal.sample, normal.rsample):
        with pytest.raises(TypeError, match="^sample: sample_shape must be a tuple of ints"):
            draw(bad)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        torch.distributions.Normal(torch.tensor(0.0), torch.tensor(1.0)).sample(bad)


def test_sample_shapes_of_ints_are_taken():
    normal = Normal(ta.tensor(0.0), ta.tensor(1.0))
    assert tuple(normal.sample((2, np.int64(3))).shape) == (2, 3)
    assert tuple(normal.sample((ta.tensor(2),)).shape) == (2,)
    assert tuple(normal.sample(ta.Size([4])).shape) == (4,)
    assert tuple(normal.sample(5).shape) == (5,)  # (an int as (5,): tinyattn's leniency)
