"""tinyattn.distributions' MultivariateNormal, OneHotCategorical, Poisson, Binomial and
Geometric against torch.distributions in float64: log_prob, entropy, mean, variance and the
covariance forms, the gradients of log_prob, entropy and rsample, seeded sample statistics,
shapes, expand, enumerate_support, KL values, and the errors torch raises for bad parameters
and values."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.distributions import (
    Binomial,
    Geometric,
    MultivariateNormal,
    OneHotCategorical,
    Poisson,
    kl_divergence,
)

torch = pytest.importorskip("torch")
td = torch.distributions

F64 = {"dtype": ta.float64}


def pair(values, grad=True):
    """The same float64 values as a tinyattn and a torch tensor (leaves with a gradient)."""
    values = np.asarray(values, dtype=np.float64)
    return (ta.tensor(values, requires_grad=grad, **F64),
            torch.tensor(values, requires_grad=grad))


def close(got, want, rtol=1e-10, atol=1e-12):
    got = got.detach().numpy() if isinstance(got, ta.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


RNG = np.random.default_rng(0)
A = RNG.normal(size=(2, 3, 3))
COV = A @ np.swapaxes(A, -1, -2) + 0.5 * np.eye(3)  # (2, 3, 3) positive-definite
LOC = RNG.normal(size=(4, 1, 3))  # broadcasts with COV's batch (2,) to (4, 2)
VALUE = RNG.normal(size=(5, 4, 2, 3))


def mvn(form):
    """(ours, theirs, [our leaves], [torch's leaves]) for one of the three matrix forms."""
    matrix = {"covariance_matrix": COV, "precision_matrix": np.linalg.inv(COV),
              "scale_tril": np.linalg.cholesky(COV)}[form]
    (m, tm), (s, ts) = pair(LOC), pair(matrix)
    return (MultivariateNormal(m, **{form: s}), td.MultivariateNormal(tm, **{form: ts}),
            [m, s], [tm, ts])


FORMS = ["covariance_matrix", "precision_matrix", "scale_tril"]


@pytest.mark.parametrize("form", FORMS)
def test_mvn_log_prob_entropy_and_moments_match_torch_with_gradients(form):
    ours, theirs, params, tparams = mvn(form)
    assert ours.batch_shape == tuple(theirs.batch_shape) == (4, 2)
    assert ours.event_shape == tuple(theirs.event_shape) == (3,)
    got = ours.log_prob(ta.tensor(VALUE, **F64))
    want = theirs.log_prob(torch.tensor(VALUE))
    close(got, want, rtol=1e-9)
    close(ours.entropy(), theirs.entropy(), rtol=1e-9)
    for attr in ("mean", "mode", "variance", "stddev", "covariance_matrix", "precision_matrix",
                 "scale_tril"):
        close(getattr(ours, attr), getattr(theirs, attr), rtol=1e-9, atol=1e-11)
    (got.sum() + 0.5 * ours.entropy().sum()).backward()
    (want.sum() + 0.5 * theirs.entropy().sum()).backward()
    for p, tp in zip(params, tparams, strict=True):
        close(p.grad, tp.grad, rtol=1e-8, atol=1e-10)


def test_mvn_rsample_carries_the_gradient_as_loc_plus_l_eps():
    ours, _, (m, s), _ = mvn("scale_tril")
    r = ours.rsample((6,), generator=ta.Generator().manual_seed(0))
    assert r.shape == (6, 4, 2, 3) and r.requires_grad and ours.has_rsample
    weights = np.linspace(-1, 1, 3)
    (r * ta.tensor(weights, **F64)).sum().backward()
    eps = np.linalg.solve(np.linalg.cholesky(COV), (r.detach().numpy() - LOC)[..., None])[..., 0]
    close(m.grad, np.broadcast_to(6 * 2 * weights, (4, 1, 3)), rtol=1e-9)
    # d(L ε)_i / dL_ij = ε_j, per batch k; the upper triangle too, as torch's (L @ ε as given)
    want = np.einsum("i,sbkj->kij", weights, eps)
    close(s.grad, want, rtol=1e-8, atol=1e-10)


def test_mvn_sample_statistics_are_near_the_distribution():
    cov = COV[0]
    ours = MultivariateNormal(ta.tensor([1.0, -2.0, 0.5], **F64), ta.tensor(cov, **F64))
    n = 20000
    draws = ours.sample((n,), generator=ta.Generator().manual_seed(3))
    assert draws.shape == (n, 3) and not draws.requires_grad and draws.dtype == ta.float64
    x = draws.numpy()
    se = np.sqrt(np.diag(cov) / n)
    assert (np.abs(x.mean(0) - [1.0, -2.0, 0.5]) <= 5 * se).all()
    np.testing.assert_allclose(np.cov(x.T), cov, rtol=0.1, atol=0.1 * np.sqrt(np.outer(
        np.diag(cov), np.diag(cov))).max())
    ta.manual_seed(5)
    a = ours.sample((4,))
    ta.manual_seed(5)
    np.testing.assert_array_equal(a.numpy(), ours.sample((4,)).numpy())


def test_mvn_shapes_expand_and_a_scalar_batch():
    ours = mvn("covariance_matrix")[0]
    assert ours.sample().shape == (4, 2, 3) and ours.sample((2, 1)).shape == (2, 1, 4, 2, 3)
    big = ours.expand((3, 4, 2))
    assert big.batch_shape == (3, 4, 2) and big.event_shape == (3,)
    assert big.sample((2,)).shape == (2, 3, 4, 2, 3)
    assert big.covariance_matrix.shape == (3, 4, 2, 3, 3)
    value = ta.tensor(VALUE[0], **F64)
    close(big.log_prob(value), np.broadcast_to(ours.log_prob(value).detach().numpy(), (3, 4, 2)))
    one = MultivariateNormal(ta.zeros(2), ta.eye(2))
    assert one.batch_shape == () and one.entropy().shape == () and one.sample().dtype == ta.float32
    close(one.entropy(), td.MultivariateNormal(torch.zeros(2), torch.eye(2)).entropy(),
          rtol=1e-6)
    assert one.log_prob(ta.zeros(7, 2)).shape == (7,)
    assert repr(one) == "MultivariateNormal(loc: (2,), covariance_matrix: (2, 2))"
    assert repr(one.support) == "IndependentConstraint(Real(), 1)"
    assert one.support.event_dim == 1 and not one.has_enumerate_support
    assert set(one.arg_constraints) == {"loc", "covariance_matrix", "precision_matrix",
                                        "scale_tril"}


def test_mvn_kl_matches_torch_with_gradients():
    (m1, tm1), (l1, tl1) = pair(LOC[:, :, :3]), pair(np.linalg.cholesky(COV))
    (m2, tm2), (c2, tc2) = pair(RNG.normal(size=(2, 3))), pair(COV[::-1].copy())
    got = kl_divergence(MultivariateNormal(m1, scale_tril=l1), MultivariateNormal(m2, c2))
    want = td.kl_divergence(td.MultivariateNormal(tm1, scale_tril=tl1),
                            td.MultivariateNormal(tm2, tc2))
    assert got.shape == (4, 2)
    close(got, want, rtol=1e-9)
    got.sum().backward()
    want.sum().backward()
    for p, tp in [(m1, tm1), (l1, tl1), (m2, tm2), (c2, tc2)]:
        close(p.grad, tp.grad, rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="event"):
        kl_divergence(MultivariateNormal(ta.zeros(2), ta.eye(2)),
                      MultivariateNormal(ta.zeros(3), ta.eye(3)))


NAN = float("nan")
MVN_BAD = [  # (loc, {form: matrix}, what our message names); torch's error type
    (0.0, {"scale_tril": [[1.0]]}, "one-dimensional", ValueError),
    ([0.0, 0.0], {}, "Exactly one", ValueError),
    ([0.0, 0.0], {"scale_tril": np.eye(2), "covariance_matrix": np.eye(2)}, "Exactly one",
     ValueError),
    ([0.0, 0.0], {"covariance_matrix": [1.0, 1.0]}, "two-dimensional", ValueError),
    ([[0.0, 0.0]] * 3, {"covariance_matrix": [np.eye(2)] * 2}, "broadcast", RuntimeError),
    ([0.0, 0.0], {"covariance_matrix": [[1.0, 2.0], [2.0, 1.0]]}, "covariance_matrix",
     ValueError),
    ([0.0, 0.0], {"covariance_matrix": [[1.0, 0.1], [0.0, 1.0]]}, "covariance_matrix",
     ValueError),
    ([0.0, 0.0], {"precision_matrix": [[-1.0, 0.0], [0.0, 1.0]]}, "precision_matrix",
     ValueError),
    ([0.0, 0.0], {"scale_tril": [[1.0, 2.0], [0.0, 1.0]]}, "scale_tril", ValueError),
    ([0.0, 0.0], {"scale_tril": [[-1.0, 0.0], [0.0, 1.0]]}, "scale_tril", ValueError),
    ([NAN, 0.0], {"scale_tril": np.eye(2)}, "loc", ValueError),
]


@pytest.mark.parametrize("loc,matrix,match,error", MVN_BAD,
                         ids=[f"mvn-{i}" for i in range(len(MVN_BAD))])
def test_mvn_bad_parameters_are_refused_as_torch_does(loc, matrix, match, error):
    with pytest.raises(error):
        td.MultivariateNormal(torch.tensor(loc), **{k: torch.tensor(np.asarray(v, np.float32))
                                                    for k, v in matrix.items()})
    with pytest.raises(error, match=match):
        MultivariateNormal(ta.tensor(loc), **{k: ta.tensor(np.asarray(v, np.float32))
                                              for k, v in matrix.items()})


def test_mvn_values_of_the_wrong_size_or_nan_are_refused_as_torch_does():
    ours, theirs = (MultivariateNormal(ta.zeros(2), ta.eye(2)),
                    td.MultivariateNormal(torch.zeros(2), torch.eye(2)))
    for bad in ([0.0, 0.0, 0.0], [NAN, 0.0]):
        with pytest.raises(ValueError):
            theirs.log_prob(torch.tensor(bad))
        with pytest.raises(ValueError, match="MultivariateNormal.log_prob: value"):
            ours.log_prob(ta.tensor(bad))
    with pytest.raises(ValueError, match="event"):
        MultivariateNormal(ta.zeros(3), ta.eye(2))  # (torch takes it, and fails later)


# -- OneHotCategorical, Poisson, Binomial, Geometric ------------------------------------------

def poisson():
    r, tr = pair([0.5, 1.0, 2.0, 3.5, 10.0])
    return Poisson(r), td.Poisson(tr), [r], [tr]


def binomial_probs():
    p, tp = pair([0.1, 0.3, 0.5, 0.8, 0.95])
    return (Binomial(ta.tensor([5.0, 1, 10, 7, 20], **F64), probs=p),
            td.Binomial(torch.tensor([5.0, 1, 10, 7, 20], dtype=torch.float64), probs=tp),
            [p], [tp])


def binomial_logits():
    x, tx = pair([-2.0, -0.5, 0.0, 1.5, 3.0])
    return Binomial(6, logits=x), td.Binomial(6, logits=tx), [x], [tx]


def geometric_probs():
    p, tp = pair([0.1, 0.3, 0.5, 0.8, 1.0])
    return Geometric(p), td.Geometric(tp), [p], [tp]


def geometric_logits():
    x, tx = pair([-2.0, -0.5, 0.0, 1.5, 3.0])
    return Geometric(logits=x), td.Geometric(logits=tx), [x], [tx]


DISCRETE = {"poisson": poisson, "binomial-probs": binomial_probs,
            "binomial-logits": binomial_logits, "geometric-probs": geometric_probs,
            "geometric-logits": geometric_logits}
DISCRETE_VALUES = {"poisson": [[0, 1, 3, 2, 12], [4, 0, 0, 7, 9]],
                   "binomial-probs": [[0, 1, 3, 7, 20], [5, 0, 10, 2, 19]],
                   "binomial-logits": [[0, 1, 3, 6, 2], [6, 5, 0, 4, 1]],
                   "geometric-probs": [[0, 1, 3, 2, 0], [10, 0, 4, 1, 0]],
                   "geometric-logits": [[0, 1, 3, 2, 0], [10, 0, 4, 1, 5]]}


@pytest.mark.parametrize("name", DISCRETE)
def test_discrete_log_prob_entropy_and_moments_match_torch_with_gradients(name):
    ours, theirs, params, tparams = DISCRETE[name]()
    value = DISCRETE_VALUES[name]
    assert ours.batch_shape == tuple(theirs.batch_shape) == (5,) and ours.event_shape == ()
    got = ours.log_prob(ta.tensor(value, **F64))
    want = theirs.log_prob(torch.tensor(value, dtype=torch.float64))
    close(got, want, rtol=1e-9)
    for attr in ("mean", "variance", "stddev", "mode", "probs", "logits"):
        if hasattr(theirs, attr):
            close(getattr(ours, attr), getattr(theirs, attr), rtol=1e-9)
    loss, tloss = got.sum(), want.sum()
    # (torch's Poisson has no entropy; Binomial's needs one total_count for all)
    if name not in ("poisson", "binomial-probs"):
        close(ours.entropy(), theirs.entropy(), rtol=1e-9)
        loss, tloss = loss + 0.5 * ours.entropy().sum(), tloss + 0.5 * theirs.entropy().sum()
    loss.backward()
    tloss.backward()
    for p, tp in zip(params, tparams, strict=True):
        close(p.grad, tp.grad, rtol=1e-8)


def one_hot_categorical(given="logits"):
    x, tx = pair(RNG.normal(size=(2, 3, 4)) if given == "logits" else RNG.uniform(size=(2, 3, 4)))
    return OneHotCategorical(**{given: x}), td.OneHotCategorical(**{given: tx}), x, tx


@pytest.mark.parametrize("given", ["logits", "probs"])
def test_one_hot_categorical_matches_torch_with_gradients(given):
    ours, theirs, x, tx = one_hot_categorical(given)
    assert ours.batch_shape == (2, 3) and ours.event_shape == (4,) and ours.param_shape == (2, 3,
                                                                                            4)
    value = np.eye(4)[RNG.integers(0, 4, size=(5, 2, 3))]
    got, want = ours.log_prob(ta.tensor(value, **F64)), theirs.log_prob(torch.tensor(value))
    close(got, want)
    close(ours.entropy(), theirs.entropy())
    for attr in ("mean", "variance", "mode", "probs", "logits"):
        close(getattr(ours, attr), getattr(theirs, attr))
    (got.sum() + ours.entropy().sum()).backward()
    (want.sum() + theirs.entropy().sum()).backward()
    close(x.grad, tx.grad, rtol=1e-9)
    close(ours.enumerate_support(), theirs.enumerate_support())
    close(ours.enumerate_support(expand=False), theirs.enumerate_support(expand=False))
    draws = ours.sample((3000,), generator=ta.Generator().manual_seed(0))
    assert draws.shape == (3000, 2, 3, 4) and draws.dtype == ta.float64
    assert ours.support.check(draws).numpy().all()
    se = np.sqrt(ours.variance.detach().numpy() / 3000)
    assert (np.abs(draws.numpy().mean(0) - ours.mean.detach().numpy()) <= 5 * se + 1e-12).all()
    big = ours.expand((7, 2, 3))
    assert big.batch_shape == (7, 2, 3) and big.sample((2,)).shape == (2, 7, 2, 3, 4)
    assert big.log_prob(ta.tensor(value[0], **F64)).shape == (7, 2, 3)
    for bad in ([1.0, 1.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0]):
        with pytest.raises(ValueError):
            theirs.log_prob(torch.tensor(bad, dtype=torch.float64))
        with pytest.raises(ValueError, match="OneHotCategorical.log_prob: value"):
            ours.log_prob(ta.tensor(bad, **F64))


@pytest.mark.parametrize("name", DISCRETE)
def test_discrete_sample_statistics_support_and_shapes(name):
    ours = DISCRETE[name]()[0]
    n = 20000
    draws = ours.sample((n,), generator=ta.Generator().manual_seed(3))
    assert draws.shape == (n, 5) and not draws.requires_grad and draws.dtype == ta.float64
    mean, var = ours.mean.detach().numpy(), ours.variance.detach().numpy()
    assert (np.abs(draws.numpy().mean(0) - mean) <= 5 * np.sqrt(var / n) + 1e-12).all()
    np.testing.assert_allclose(draws.numpy().var(0), var, rtol=0.1, atol=1e-12)
    assert ours.support.check(draws).numpy().all() and not ours.has_rsample
    a = ours.sample((4,), generator=ta.Generator().manual_seed(1))
    b = ours.sample((4,), generator=ta.Generator().manual_seed(1))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    big = ours.expand((3, 5))
    assert big.batch_shape == (3, 5) and big.sample((2,)).shape == (2, 3, 5)
    value = ta.tensor(DISCRETE_VALUES[name][0], **F64)
    close(big.log_prob(value), np.broadcast_to(ours.log_prob(value).detach().numpy(), (3, 5)))


def test_binomial_enumerate_support_and_its_limits_as_torch():
    ours, theirs = Binomial(3, probs=ta.tensor([0.2, 0.7])), td.Binomial(
        3, probs=torch.tensor([0.2, 0.7]))
    close(ours.enumerate_support(), theirs.enumerate_support())
    assert ours.enumerate_support(expand=False).shape == (4, 1) and ours.has_enumerate_support
    assert Binomial(ta.tensor([3.0, 5.0]), probs=ta.tensor([0.5])).batch_shape == (2,)
    close(Binomial(10, probs=ta.tensor([0.5, 0.2])).total_count, np.array([10.0, 10.0],
                                                                          np.float32))
    mixed = Binomial(ta.tensor([3.0, 5.0]), probs=ta.tensor([0.5, 0.1]))
    for method in (mixed.entropy, mixed.enumerate_support):
        with pytest.raises(NotImplementedError):
            method()


KL_DISCRETE = [  # (p, q) as (class name, parameters)
    (("Poisson", {"rate": [0.5, 2.0, 3.0]}), ("Poisson", {"rate": [1.0, 0.7, 3.0]})),
    (("Binomial", {"total_count": [5.0, 5.0], "probs": [0.2, 0.9]}),
     ("Binomial", {"total_count": [5.0, 4.0], "probs": [0.6, 0.3]})),
    (("Geometric", {"probs": [0.2, 0.9]}), ("Geometric", {"probs": [0.6, 0.3]})),
    (("OneHotCategorical", {"probs": [[0.2, 0.8, 0.0], [0.3, 0.3, 0.4]]}),
     ("OneHotCategorical", {"logits": [[0.0, 1.0, -1.0], [2.0, 0.5, -0.5]]})),
    (("Bernoulli", {"probs": [0.2, 0.9]}), ("Poisson", {"rate": [1.0, 0.3]})),
]


@pytest.mark.parametrize("p,q", KL_DISCRETE, ids=[f"{p[0]}-{q[0]}" for p, q in KL_DISCRETE])
def test_discrete_kl_matches_torch_with_gradients(p, q):
    def build(lib, module, spec):
        params = {k: lib.tensor(np.asarray(v, np.float64), requires_grad=k != "total_count")
                  for k, v in spec[1].items()}
        return getattr(module, spec[0])(**params), params

    (ours_p, gp), (ours_q, gq) = build(ta, ta.distributions, p), build(ta, ta.distributions, q)
    (th_p, tgp), (th_q, tgq) = build(torch, td, p), build(torch, td, q)
    got, want = kl_divergence(ours_p, ours_q), td.kl_divergence(th_p, th_q)
    close(got, want, rtol=1e-9)
    finite = np.isfinite(want.detach().numpy())
    got[ta.tensor(finite)].sum().backward()
    want[torch.tensor(finite)].sum().backward()
    for ours, theirs in [*zip(gp.values(), tgp.values(), strict=True),
                         *zip(gq.values(), tgq.values(), strict=True)]:
        if theirs.grad is not None:
            close(ours.grad, theirs.grad, rtol=1e-8)
    with pytest.raises(NotImplementedError):
        kl_divergence(Binomial(3, probs=0.5), Binomial(4, probs=0.5))


DISCRETE_BAD = [  # (name, parameters, what our message names); torch: a ValueError each
    ("Poisson", {"rate": [-1.0]}, "rate"), ("Poisson", {"rate": [NAN]}, "rate"),
    ("Binomial", {"total_count": [2.5], "probs": [0.5]}, "total_count"),
    ("Binomial", {"total_count": [-1.0], "probs": [0.5]}, "total_count"),
    ("Binomial", {"total_count": [2.0], "probs": [1.5]}, "probs"),
    ("Binomial", {"total_count": [2.0]}, "not both"),
    ("Geometric", {"probs": [0.0]}, "probs"), ("Geometric", {"probs": [1.2]}, "probs"),
    ("Geometric", {"logits": [NAN]}, "logits"), ("Geometric", {}, "not both"),
    ("OneHotCategorical", {"probs": [-0.5, 1.0]}, "probs"),
    ("OneHotCategorical", {"probs": [0.5, 0.5], "logits": [0.0, 0.0]}, "not both"),
]


@pytest.mark.parametrize("name,params,match", DISCRETE_BAD,
                         ids=[f"{b[0]}-{i}" for i, b in enumerate(DISCRETE_BAD)])
def test_discrete_bad_parameters_are_refused_as_torch_does(name, params, match):
    with pytest.raises(ValueError):
        getattr(td, name)(**{k: torch.tensor(v) for k, v in params.items()})
    with pytest.raises(ValueError, match=match):
        getattr(ta.distributions, name)(**{k: ta.tensor(v) for k, v in params.items()})


@pytest.mark.parametrize("name,value", [("poisson", 0.5), ("poisson", -1.0),
                                        ("binomial-probs", 21.0), ("binomial-probs", 1.5),
                                        ("geometric-probs", -1.0), ("geometric-logits", 0.5)])
def test_discrete_values_outside_the_support_are_refused_as_torch_does(name, value):
    ours, theirs, _, _ = DISCRETE[name]()
    with pytest.raises(ValueError):
        theirs.log_prob(torch.full((5,), value, dtype=torch.float64))
    with pytest.raises(ValueError, match="log_prob: value must be within"):
        ours.log_prob(ta.full((5,), value, **F64))
