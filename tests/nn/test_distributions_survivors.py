"""Behaviour of tinyattn.distributions at edges the other distribution tests leave open:
positive_definite on empty (0 x 0) matrices (vacuously true, as torch's), Dirichlet.rsample's
draws strictly below 1 and normalised over the last dim when there are several batch dims,
Gamma.sample naming itself when refusing a bad generator, Normal.log_prob of a list against an
integer loc (the list taken as floats, as torch's with a float value), Normal.rsample drawing on
loc's backend (the generator of that backend accepted, the draw landing there),
Categorical.enumerate_support with two batch dims, and the message of Normal's argument check
naming the first bad value. torch (float64) is the reference where it applies."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.backends.numpy_backend import NumpyBackend
from tinyattn.distributions import Beta, Categorical, Dirichlet, Gamma, Normal, constraints

torch = pytest.importorskip("torch")

F64 = {"dtype": ta.float64}


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)])
def test_positive_definite_holds_for_empty_matrices_as_torch(shape):
    ours = constraints.positive_definite.check(ta.zeros(*shape, **F64))
    ref = torch.distributions.constraints.positive_definite.check(
        torch.zeros(*shape, dtype=torch.float64))
    assert ours.shape == tuple(ref.shape)
    assert np.asarray(ours.numpy()).tolist() == ref.tolist()


def test_dirichlet_rsample_stays_below_one_for_tiny_concentrations():
    # Gamma(0.01) draws differ by hundreds of orders of magnitude: a plain ratio is often 1.0
    # exactly; torch clamps the draws into (0, 1), and so does tinyattn.
    conc = [0.01, 0.01]
    gen = ta.Generator().manual_seed(0)
    ours = np.asarray(Dirichlet(ta.tensor(conc, **F64)).rsample((2000,), generator=gen).numpy())
    torch.manual_seed(0)
    ref = torch.distributions.Dirichlet(torch.tensor(conc, dtype=torch.float64)).rsample((2000,))
    tiny = np.finfo(np.float64).tiny
    for draws in (ours, ref.numpy()):
        assert draws.max() < 1.0
        assert draws.min() >= tiny


def test_dirichlet_rsample_normalises_over_the_last_dim_with_batch_dims():
    conc = np.array([[[0.5, 1.0, 2.0, 3.0], [1.5, 2.5, 0.7, 4.0]],
                     [[2.0, 2.0, 2.0, 2.0], [0.9, 1.1, 3.3, 5.0]],
                     [[1.0, 1.0, 1.0, 1.0], [6.0, 0.4, 0.8, 1.2]]])  # batch (3, 2), K = 4
    gen = ta.Generator().manual_seed(1)
    d = Dirichlet(ta.tensor(conc, **F64))
    ours = d.rsample((5,), generator=gen)
    ref = torch.distributions.Dirichlet(torch.tensor(conc)).rsample((5,))
    assert ours.shape == tuple(ref.shape) == (5, 3, 2, 4)
    sums = np.asarray(ours.sum(-1).numpy())
    np.testing.assert_allclose(sums, ref.sum(-1).numpy(), atol=1e-12)
    np.testing.assert_allclose(sums, 1.0, atol=1e-12)


def test_gamma_sample_names_itself_when_the_generator_is_not_one():
    d = Gamma(ta.tensor([1.0, 2.0], **F64), ta.tensor([1.0, 1.0], **F64))
    with pytest.raises(TypeError, match=r"^Gamma\.sample: generator must be"):
        d.sample((3,), generator="not a generator")


def test_normal_log_prob_of_a_list_with_an_integer_loc_takes_the_list_as_floats():
    ours = Normal(ta.tensor([1, 2]), ta.tensor([1.0, 2.0], **F64)).log_prob([0.5, 2.5])
    ref = torch.distributions.Normal(torch.tensor([1, 2]),
                                     torch.tensor([1.0, 2.0], dtype=torch.float64)).log_prob(
        torch.tensor([0.5, 2.5], dtype=torch.float64))
    assert ours.dtype == ta.float64
    np.testing.assert_allclose(np.asarray(ours.numpy()), ref.numpy(), rtol=1e-12)


def test_normal_rsample_draws_on_locs_backend_with_its_generator():
    be = NumpyBackend()  # a backend other than the default one
    loc = ta.tensor([0.0, 1.0], dtype=ta.float64, backend=be, requires_grad=True)
    scale = ta.tensor([1.0, 2.0], dtype=ta.float64, backend=be)
    d = Normal(loc, scale)
    a = d.rsample((3,), generator=ta.Generator(be).manual_seed(5))
    b = d.rsample((3,), generator=ta.Generator(be).manual_seed(5))
    assert a.backend is be and a.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()))
    a.sum().backward()
    np.testing.assert_array_equal(np.asarray(loc.grad.numpy()), [3.0, 3.0])


def test_categorical_enumerate_support_with_two_batch_dims_as_torch():
    probs = np.random.default_rng(0).random((2, 3, 4)) + 0.1  # batch (2, 3), K = 4
    ours = Categorical(probs=ta.tensor(probs, **F64))
    ref = torch.distributions.Categorical(probs=torch.tensor(probs))
    for expand in (False, True):
        got, want = ours.enumerate_support(expand), ref.enumerate_support(expand)
        assert got.shape == tuple(want.shape)
        assert np.asarray(got.numpy()).tolist() == want.tolist()


def test_normal_argument_check_names_the_first_bad_value():
    with pytest.raises(ValueError, match=r"scale must be > 0 and finite, got -1\.0 \(1 of 3 "
                                         r"invalid\)"):
        Normal(ta.tensor(0.0, **F64), ta.tensor([1.0, -1.0, 2.0], **F64))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dirichlet_and_beta_draws_at_tiny_concentrations_are_never_nan(dtype):
    """Gamma draws that all underflow in a row once made x / sum(x) = 0 / 0: the draws are
    floored at the smallest normal number, as torch's."""
    dt = getattr(ta, dtype)
    g = ta.Generator().manual_seed(0)
    d = Dirichlet(ta.tensor([0.001, 0.001], dtype=dt))
    for x in (d.sample((2000,), generator=g), d.rsample((2000,), generator=g).detach()):
        assert not np.isnan(x.numpy()).any()
        np.testing.assert_allclose(x.numpy().sum(-1), 1.0, rtol=1e-6)
    b = Beta(ta.tensor(0.001, dtype=dt), ta.tensor(0.001, dtype=dt))
    assert not np.isnan(b.sample((2000,), generator=g).numpy()).any()
