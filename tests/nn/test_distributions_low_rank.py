"""tinyattn.distributions.LowRankMultivariateNormal against torch.distributions in float64:
log_prob, entropy, the moments and the three matrix forms, with gradients to loc, cov_factor
and cov_diag; rsample's reparameterized gradient and sample statistics; shapes, batch
broadcasting and expand; the KL pairs torch registers (with MultivariateNormal both ways);
the errors torch raises for bad parameters."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.distributions import LowRankMultivariateNormal, MultivariateNormal, kl_divergence

torch = pytest.importorskip("torch")
td = torch.distributions

RNG = np.random.default_rng(11)
LOC = RNG.standard_normal((2, 4))
W = RNG.standard_normal((2, 4, 2))
D = RNG.random(4) + 0.5


def pair(values):
    values = np.asarray(values, dtype=np.float64)
    return ta.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)


def close(got, want, rtol=1e-10, atol=1e-12):
    got = got.detach().numpy() if isinstance(got, ta.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def made(loc=LOC, w=W, d=D):
    ours, theirs = zip(pair(loc), pair(w), pair(d), strict=True)
    return (LowRankMultivariateNormal(*ours), td.LowRankMultivariateNormal(*theirs), ours,
            theirs)


@pytest.mark.parametrize("name", ["mean", "mode", "variance", "covariance_matrix",
                                  "scale_tril", "precision_matrix"])
def test_moments_and_matrix_forms_match_torch_with_gradients(name):
    ours, theirs, leaves, t_leaves = made()
    got, want = getattr(ours, name), getattr(theirs, name)
    close(got, want)
    weights = RNG.standard_normal(tuple(want.shape))
    (got * ta.tensor(weights)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    for a, b in zip(leaves, t_leaves, strict=True):
        if b.grad is None:
            assert a.grad is None or not a.grad.numpy().any()
        else:
            close(a.grad, b.grad, rtol=1e-9, atol=1e-11)


def test_log_prob_and_entropy_match_torch_with_gradients():
    ours, theirs, leaves, t_leaves = made()
    x = RNG.standard_normal((3, 2, 4))
    lp, lp_t = ours.log_prob(ta.tensor(x)), theirs.log_prob(torch.tensor(x))
    close(lp, lp_t)
    close(ours.entropy(), theirs.entropy())
    (lp.sum() + 2 * ours.entropy().sum()).backward()
    (lp_t.sum() + 2 * theirs.entropy().sum()).backward()
    for a, b in zip(leaves, t_leaves, strict=True):
        close(a.grad, b.grad, rtol=1e-9, atol=1e-11)


def test_log_prob_equals_the_full_gaussian_it_stands_for():
    ours, _, _, _ = made()
    full = MultivariateNormal(ours.loc, covariance_matrix=ours.covariance_matrix)
    x = ta.tensor(RNG.standard_normal((5, 2, 4)))
    close(ours.log_prob(x), full.log_prob(x))
    close(ours.entropy(), full.entropy())


def test_rsample_carries_the_gradient_and_draws_the_right_gaussian():
    ours, _, (m, w, d), _ = made()
    r = ours.rsample((3,), generator=ta.Generator().manual_seed(0))
    assert r.shape == (3, 2, 4) and r.requires_grad and ours.has_rsample
    again = ours.rsample((3,), generator=ta.Generator().manual_seed(0))
    np.testing.assert_array_equal(r.detach().numpy(), again.detach().numpy())
    r.sum().backward()
    close(m.grad, np.full((2, 4), 3.0))
    draws = ours.sample((40000,), generator=ta.Generator().manual_seed(1))
    assert not draws.requires_grad
    x = draws.numpy()[:, 1]
    cov = (W[1] @ W[1].T + np.diag(D))
    np.testing.assert_allclose(x.mean(0), LOC[1], atol=5 * np.sqrt(np.diag(cov) / 40000).max())
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.08 * np.abs(cov).max())


def test_shapes_broadcast_and_expand_as_torch():
    ours, theirs, _, _ = made(LOC[0], W, D[None])
    assert ours.batch_shape == tuple(theirs.batch_shape) == (2,)
    assert ours.event_shape == tuple(theirs.event_shape) == (4,)
    assert tuple(ours.cov_factor.shape) == tuple(theirs.cov_factor.shape) == (2, 4, 2)
    wide, wide_t = ours.expand((5, 2)), theirs.expand((5, 2))
    assert wide.batch_shape == tuple(wide_t.batch_shape) == (5, 2)
    x = RNG.standard_normal((5, 2, 4))
    close(wide.log_prob(ta.tensor(x)), wide_t.log_prob(torch.tensor(x)))
    assert "LowRankMultivariateNormal(loc: (2, 4)" in repr(ours)


@pytest.mark.parametrize("kind", ["low-low", "low-full", "full-low"])
def test_kl_pairs_match_torch_with_gradients(kind):
    p, p_t, leaves, t_leaves = made()
    q, q_t, _, _ = made(LOC[::-1] * 0.5, W[::-1] + 0.3, D[::-1] + 0.2)
    cov = np.eye(4) * 1.5 + 0.2
    if kind != "low-low":
        full, full_t = (MultivariateNormal(ta.tensor(LOC[0]), covariance_matrix=ta.tensor(cov)),
                        td.MultivariateNormal(torch.tensor(LOC[0]),
                                              covariance_matrix=torch.tensor(cov)))
        q, q_t = full, full_t
    if kind == "full-low":
        p, q, p_t, q_t = q, p, q_t, p_t
    kl, kl_t = kl_divergence(p, q), td.kl_divergence(p_t, q_t)
    close(kl, kl_t, rtol=1e-9)
    kl.sum().backward()
    kl_t.sum().backward()
    for a, b in zip(leaves, t_leaves, strict=True):
        close(a.grad, b.grad, rtol=1e-8, atol=1e-10)


def test_kl_of_a_distribution_with_itself_is_zero():
    p, _, _, _ = made()
    close(kl_divergence(p, p), np.zeros(2), atol=1e-12)


@pytest.mark.parametrize(("args", "match"), [
    ((np.float64(0.0), W, D), "loc must be at least one-dimensional"),
    ((LOC, W[0, :, 0], D), "cov_factor must be at least two-dimensional"),
    ((LOC, W[:, :3], D), "cov_factor must be a batch of matrices with shape 4 x m"),
    ((LOC, W, D[:3]), "cov_diag must be a batch of vectors with shape"),
    ((LOC, np.ones((3, 4, 2)), D), "Incompatible batch shapes"),
    ((LOC, W, -D), "cov_diag .*positive|GreaterThan"),
])
def test_bad_parameters_are_refused_as_torch_does(args, match):
    with pytest.raises(ValueError, match=match):
        LowRankMultivariateNormal(*(ta.tensor(np.asarray(a, dtype=np.float64)) for a in args))
    with pytest.raises((ValueError, RuntimeError)):  # (a negative D: torch's Cholesky fails)
        td.LowRankMultivariateNormal(*(torch.tensor(np.asarray(a, dtype=np.float64))
                                       for a in args))
