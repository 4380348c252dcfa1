"""Tests for the seed-4 mutation survivors of distributions (2026-11-29), against torch where
torch has the behaviour: the one_hot constraint's name, constraints.stack's default dim, a
count distribution's log_prob of integer values in the parameters' dtype, LogisticNormal's
draws kept inside the simplex, MixtureSameFamily's samples keeping a batch dim of 1,
Multinomial's event shape for one row of probabilities, and the names in two refusals."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


def test_the_one_hot_constraint_is_named_as_torchs():
    assert repr(ta.distributions.constraints.one_hot) == repr(torch.distributions.constraints
                                                              .one_hot) == "OneHot()"


def test_stack_checks_along_dim_0_by_default():
    values = [[1.0, -1.0], [-2.0, 3.0]]
    got = [lib.distributions.constraints.stack([lib.distributions.constraints.positive,
                                                lib.distributions.constraints.real])
           .check(lib.tensor(values)).tolist() for lib in (ta, torch)]
    assert got[0] == got[1] == [[True, False], [True, True]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["Geometric", "Binomial", "Poisson", "NegativeBinomial"])
def test_a_count_distributions_log_prob_of_ints_is_that_of_the_same_floats(name, dtype):
    # integer counts are taken in the parameters' dtype: with float64 parameters, the
    # log-gammas of large counts in float64 too (torch takes them in float32 there, so its
    # float64 answers are off by 1e-7; in float32 they are compared with torch's)
    def log_prob(lib, value):
        D = lib.distributions  # noqa: N806
        dt = getattr(lib, dtype)
        probs = lib.tensor([0.3, 0.6], dtype=dt)
        dist = {"Geometric": lambda: D.Geometric(probs=probs),
                "Binomial": lambda: D.Binomial(lib.tensor(123457), probs=probs),
                "Poisson": lambda: D.Poisson(lib.tensor([2.0e5, 3.0], dtype=dt)),
                "NegativeBinomial": lambda: D.NegativeBinomial(3, probs=probs)}[name]()
        return dist.log_prob(value)

    ours = log_prob(ta, ta.tensor([100003, 2]))
    assert str(ours.dtype).endswith(dtype)
    as_floats = log_prob(ta, ta.tensor([100003.0, 2.0], dtype=getattr(ta, dtype)))
    np.testing.assert_array_equal(ours.numpy(), as_floats.numpy())
    if dtype == "float32":
        theirs = log_prob(torch, torch.tensor([100003, 2]))
        assert theirs.dtype == torch.float32
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5)


def test_logistic_normal_draws_stay_inside_the_simplex():
    for lib in (ta, torch):
        dist = lib.distributions.LogisticNormal(lib.tensor([40.0, 0.0]), lib.tensor([1e-3, 1e-3]))
        s = dist.rsample((4,))
        assert bool((s > 0).all()) and bool((s < 1).all()), lib.__name__


def test_mixture_same_family_keeps_a_batch_dim_of_one():
    for lib in (ta, torch):
        D = lib.distributions  # noqa: N806
        mix = D.MixtureSameFamily(D.Categorical(probs=lib.tensor([[0.3, 0.7]])),
                                  D.Normal(lib.tensor([[0.0, 5.0]]), lib.tensor([[1.0, 1.0]])))
        assert tuple(mix.sample().shape) == (1,) and tuple(mix.sample((2,)).shape) == (2, 1)


@pytest.mark.parametrize("shape", [(3,), (2, 3)])
def test_multinomials_event_shape_is_the_number_of_categories(shape):
    probs = np.full(shape, 1 / 3)
    got = [tuple(lib.distributions.Multinomial(10, probs=lib.tensor(probs)).event_shape)
           for lib in (ta, torch)]
    assert got[0] == got[1] == (3,)


def test_refusals_name_the_distribution():
    with pytest.raises(ValueError, match=r"^Wishart: covariance_matrix must be within "
                                         r"PositiveDefinite\(\)"):
        ta.distributions.Wishart(ta.tensor(5.0),
                                 covariance_matrix=ta.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(TypeError, match=r"^InverseGamma\.rsample: generator must be a "
                                        r"tinyattn\.Generator, got int"):
        ta.distributions.InverseGamma(ta.tensor([2.0]), ta.tensor([1.0])).rsample(generator=5)
