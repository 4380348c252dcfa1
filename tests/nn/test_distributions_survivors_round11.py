"""Distribution behaviours a second mutation draw (seed 2) of tinyattn/distributions found
unobserved, against torch where it is installed: LogNormal's validate_args, Weibull's samples
in its parameters' dtype, ContinuousBernoulli's cdf at and past 1, Multinomial's log_prob with a
category of probability 0, RelaxedBernoulli with a Python number temperature and at the edge of
its support, Wishart's log_prob, and Geometric and HalfCauchy sampling on their parameters'
backend."""

from pathlib import Path

import numpy as np
import pytest

import tinyattn as ta

D = ta.distributions


def _torch():
    return pytest.importorskip("torch")


def test_log_normal_validates_its_arguments_when_asked():
    with pytest.raises(ValueError):
        D.LogNormal(0.0, -1.0, validate_args=True)
    D.LogNormal(0.0, -1.0, validate_args=False)  # (not checked: torch's too)


def test_weibull_samples_in_its_parameters_dtype():
    w = D.Weibull(ta.tensor([1.0, 2.0], dtype=ta.float64), ta.tensor([2.0, 0.5],
                                                                      dtype=ta.float64))
    assert w.rsample((3,)).dtype == ta.float64


def test_continuous_bernoulli_cdf_is_one_at_and_past_one():
    cb = D.ContinuousBernoulli(probs=ta.tensor([0.3, 0.5, 0.8]), validate_args=False)
    for v in (1.0, 1.5):
        np.testing.assert_array_equal(cb.cdf(ta.full((3,), v)).numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(cb.cdf(ta.full((3,), -0.5)).numpy(), [0.0, 0.0, 0.0])
    torch = _torch()
    want = torch.distributions.ContinuousBernoulli(probs=torch.tensor([0.3, 0.5, 0.8])).cdf(
        torch.ones(3))
    np.testing.assert_array_equal(want.numpy(), [1.0, 1.0, 1.0])


def test_multinomial_log_prob_with_a_category_of_probability_zero():
    m = D.Multinomial(3, probs=ta.tensor([0.5, 0.5, 0.0]))
    got = m.log_prob(ta.tensor([2.0, 1.0, 0.0])).item()
    assert np.isfinite(got)
    torch = _torch()
    want = torch.distributions.Multinomial(3, probs=torch.tensor([0.5, 0.5, 0.0])).log_prob(
        torch.tensor([2.0, 1.0, 0.0])).item()
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("value", [1.0, 0.9, 1e-30])
def test_relaxed_bernoulli_with_a_number_temperature(value):
    rb = D.RelaxedBernoulli(0.5, probs=ta.tensor([0.3]))
    assert float(rb.temperature) == 0.5
    got = rb.log_prob(ta.tensor([value])).item()
    assert np.isfinite(got)
    torch = _torch()
    want = torch.distributions.RelaxedBernoulli(torch.tensor(0.5), probs=torch.tensor([0.3]))
    np.testing.assert_allclose(got, want.log_prob(torch.tensor([value])).item(), rtol=1e-5)


def test_wishart_log_prob():
    s = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])
    x = np.array([[3.0, 0.5, 0.2], [0.5, 2.0, 0.1], [0.2, 0.1, 2.5]])
    for df in (3.5, 6.0):
        got = D.Wishart(df=ta.tensor(df, dtype=ta.float64), covariance_matrix=ta.tensor(s))
        torch = _torch()
        want = torch.distributions.Wishart(df=torch.tensor(df, dtype=torch.float64),
                                           covariance_matrix=torch.tensor(s))
        np.testing.assert_allclose(got.log_prob(ta.tensor(x)).item(),
                                   want.log_prob(torch.tensor(x)).item(), rtol=1e-10)


def test_geometric_and_half_cauchy_sample_on_their_parameters_backend(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "support"))
    import fake_cupy  # tests/support

    fake_cupy.install(monkeypatch, kernels=False)
    p = ta.tensor([0.2, 0.7]).to("cupy")
    assert D.Geometric(probs=p).sample((3,)).backend is p.backend
    assert D.HalfCauchy(ta.tensor([1.0, 2.0]).to("cupy")).rsample((3,)).backend is p.backend


def test_multinomial_log_prob_with_a_logit_of_minus_infinity():
    m = D.Multinomial(3, logits=ta.tensor([0.0, 0.0, -np.inf]))
    got = m.log_prob(ta.tensor([2.0, 1.0, 0.0])).item()
    np.testing.assert_allclose(got, np.log(3 / 8), rtol=1e-6)  # (3 orders, each 1/8)


def test_wishart_exponential_family_entropy_is_its_entropy():
    """Wishart's natural parameters and log normalizer through the family's formula give the
    entropy it computes itself (and torch's)."""
    from tinyattn.distributions.distribution import ExponentialFamily

    s = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])
    w = D.Wishart(df=ta.tensor(4.5, dtype=ta.float64), covariance_matrix=ta.tensor(s))
    np.testing.assert_allclose(ExponentialFamily.entropy(w).item(), w.entropy().item(),
                               rtol=1e-12)
    torch = _torch()
    t = torch.distributions.Wishart(df=torch.tensor(4.5, dtype=torch.float64),
                                    covariance_matrix=torch.tensor(s))
    np.testing.assert_allclose(w.entropy().item(), t.entropy().item(), rtol=1e-12)
