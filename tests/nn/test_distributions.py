"""tinyattn.distributions against torch.distributions: Categorical from probs or logits and
Normal — log_prob, entropy and their gradients, shapes, sample frequencies, rsample's gradient,
a Generator's repeatable draws, and the errors."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.distributions import Categorical, Normal

torch = pytest.importorskip("torch")

LOGITS = np.array([[0.1, 2.0, -1.0, 0.5], [0.0, 0.0, 0.0, 0.0], [3.0, -2.0, 1.0, -9.0]])
PROBS = np.array([[0.5, 0.0, 0.25, 0.25], [1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 7.0]])


@pytest.mark.parametrize("kind,values", [("logits", LOGITS), ("probs", PROBS)])
def test_categorical_log_prob_and_entropy_match_torch_with_gradients(kind, values):
    x, tx = ta.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    ours, theirs = Categorical(**{kind: x}), torch.distributions.Categorical(**{kind: tx})
    np.testing.assert_allclose(ours.probs.detach().numpy(), theirs.probs.detach().numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(ours.logits.detach().numpy(), theirs.logits.detach().numpy(),
                               rtol=1e-12)
    assert ours.batch_shape == tuple(theirs.batch_shape) == (3,) and ours.event_shape == ()
    for value in ([1, 3, 3], [[0], [2]], 2):
        got, want = ours.log_prob(ta.tensor(value)), theirs.log_prob(torch.tensor(value))
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    loss = ours.log_prob(ta.tensor([1, 3, 3])).sum() + ours.entropy().sum() * 0.5
    tloss = theirs.log_prob(torch.tensor([1, 3, 3])).sum() + theirs.entropy().sum() * 0.5
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_categorical_samples_follow_the_probabilities():
    probs = np.array([[0.1, 0.6, 0.3], [0.0, 0.0, 1.0]])
    dist = Categorical(probs=ta.tensor(probs))
    draws = dist.sample((20000,))
    assert draws.shape == (20000, 2) and draws.dtype == np.int64 and not draws.requires_grad
    freq = np.stack([np.bincount(draws.numpy()[:, b], minlength=3) / 20000 for b in (0, 1)])
    np.testing.assert_allclose(freq, probs, atol=0.015)
    assert dist.sample().shape == (2,) and dist.sample(3).shape == (3, 2)
    a = dist.sample((5,), generator=ta.Generator().manual_seed(1))
    b = dist.sample((5,), generator=ta.Generator().manual_seed(1))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_normal_matches_torch_and_rsample_carries_the_gradient():
    loc, scale = np.array([0.0, 1.5, -2.0]), np.array([1.0, 0.5, 3.0])
    m, s = ta.tensor(loc, requires_grad=True), ta.tensor(scale, requires_grad=True)
    tm, ts = torch.tensor(loc, requires_grad=True), torch.tensor(scale, requires_grad=True)
    ours, theirs = Normal(m, s), torch.distributions.Normal(tm, ts)
    value = np.array([[0.3, 1.0, -5.0], [2.0, 2.0, 2.0]])
    got = ours.log_prob(ta.tensor(value)).sum() + ours.entropy().sum()
    want = theirs.log_prob(torch.tensor(value)).sum() + theirs.entropy().sum()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    got.backward()
    want.backward()
    np.testing.assert_allclose(m.grad.numpy(), tm.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-12)
    for name in ("mean", "stddev", "variance"):
        np.testing.assert_allclose(getattr(ours, name).detach().numpy(),
                                   getattr(theirs, name).detach().numpy(), rtol=1e-12)
    m.grad = s.grad = None
    r = ours.rsample((4,), generator=ta.Generator().manual_seed(0))  # loc + scale ε
    assert r.shape == (4, 3) and r.requires_grad
    r.sum().backward()
    assert m.grad.tolist() == [4.0, 4.0, 4.0]
    eps = ((r - m) / s).detach().numpy()
    np.testing.assert_allclose(s.grad.numpy(), eps.sum(0), rtol=1e-12)
    draws = Normal(2.0, 3.0).sample((20000,))
    assert not draws.requires_grad and abs(draws.numpy().mean() - 2) < 0.1
    assert abs(draws.numpy().std() - 3) < 0.1


@pytest.mark.parametrize("call,error,match", [
    (lambda: Categorical(), ValueError, "give either probs or logits, not both or neither"),
    (lambda: Categorical(probs=ta.ones(2), logits=ta.ones(2)), ValueError, "not both"),
    (lambda: Categorical(probs=ta.tensor([0.5, -0.5])), ValueError, "probs must be >= 0"),
    (lambda: Categorical(logits=ta.tensor(1.0)), ta.ShapeError, "need a last dim of categories"),
    (lambda: Categorical(logits=ta.zeros(3)).log_prob(ta.tensor(3)), ValueError,
     r"Categorical.log_prob: value is outside the categories 0..2, got 3"),
    (lambda: Categorical(logits=ta.zeros(3)).log_prob(ta.tensor(1.5)), ValueError,
     r"value must hold category indices \(whole numbers\), got 1.5"),
    (lambda: Normal(0.0, 0.0), ValueError, "scale must be > 0"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


NAN, INF = float("nan"), float("inf")
BAD_PARAMETERS = [
    ("Normal", {"loc": 0.0, "scale": NAN}, "Normal: scale"),
    ("Normal", {"loc": 0.0, "scale": INF}, "Normal: scale"),  # (torch takes it: nan later)
    ("Normal", {"loc": 0.0, "scale": -1.0}, "Normal: scale"),
    ("Normal", {"loc": [0.0, 1.0], "scale": [1.0, 0.0]}, "Normal: scale"),
    ("Normal", {"loc": [0.0, NAN], "scale": 1.0}, "Normal: loc"),
    ("Categorical", {"probs": [[NAN, 1.0]]}, "Categorical: probs"),
    ("Categorical", {"probs": [[INF, 1.0]]}, "Categorical: probs"),
    ("Categorical", {"probs": [[-0.1, 1.1]]}, "Categorical: probs"),
    ("Categorical", {"probs": [[0.5, 0.5], [0.0, 0.0]]}, "Categorical: probs"),
    ("Categorical", {"logits": [[NAN, 1.0]]}, "Categorical: logits"),
    ("Categorical", {"logits": [[INF, 1.0]]}, "Categorical: logits"),
    ("Categorical", {"logits": [[0.0, 1.0], [-INF, -INF]]}, "Categorical: logits"),
]


@pytest.mark.parametrize("name,params,match", BAD_PARAMETERS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_PARAMETERS)])
def test_bad_parameters_are_refused_when_made_as_torch_does(name, params, match):
    """torch validates its parameters by default (validate_args): so do we, with a ValueError
    naming the distribution and the parameter; validate_args=False takes them as they are."""
    if params.get("scale") != INF:
        with pytest.raises(ValueError):
            getattr(torch.distributions, name)(**{k: torch.tensor(v) for k, v in params.items()})
    ours = {k: ta.tensor(v) for k, v in params.items()}
    with pytest.raises(ValueError, match=match):
        getattr(ta.distributions, name)(**ours)
    with np.errstate(all="ignore"):  # (nan probabilities, as torch's)
        getattr(ta.distributions, name)(**ours, validate_args=False)


def test_infinite_loc_and_some_impossible_categories_are_valid():
    assert Normal(INF, 1.0).loc.item() == INF
    logits = [[0.0, -INF, 1.0]]
    ours = Categorical(logits=ta.tensor(logits))
    theirs = torch.distributions.Categorical(logits=torch.tensor(logits))
    np.testing.assert_allclose(ours.probs.numpy(), theirs.probs.numpy(), rtol=1e-6)


def test_categorical_log_prob_takes_whole_numbers_stored_as_floats():
    p = [[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]
    ours = Categorical(probs=ta.tensor(p)).log_prob(ta.tensor([2.0, 0.0]))
    theirs = torch.distributions.Categorical(probs=torch.tensor(p)).log_prob(
        torch.tensor([2.0, 0.0]))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="value must hold category indices"):
        Categorical(probs=ta.tensor(p)).log_prob(ta.tensor([1.5, 0.0]))


@pytest.mark.parametrize("shape", [(-1,), (2, -3), -1])
def test_a_negative_sample_shape_is_refused(shape):
    with pytest.raises(ValueError, match="sample_shape"):
        Categorical(probs=ta.ones(2, 4)).sample(shape)
    with pytest.raises(ValueError, match="sample_shape"):
        Normal(0.0, 1.0).sample(shape)


NUMBER_AND_TENSOR = [  # (loc, scale), one a number: it takes the tensor's dtype, as torch's
    (np.zeros(1), 0.1), (0.0, np.ones(4)), (np.zeros(3, np.float16), 1.0),
    (np.full((2, 1), 0.5), 0.1), (0.25, np.full(3, 0.1, np.float16)), (0.0, 0.1)]


@pytest.mark.parametrize("loc,scale", NUMBER_AND_TENSOR)
def test_a_number_parameter_takes_the_tensor_parameters_dtype(loc, scale):
    def made(lib, x):
        return x if isinstance(x, float) else lib.tensor(x)
    ours, theirs = Normal(made(ta, loc), made(ta, scale)), torch.distributions.Normal(
        made(torch, loc), made(torch, scale))
    value = np.array(0.3, dtype=np.asarray(loc if not isinstance(loc, float) else scale).dtype)
    for got, want in [(ours.loc, theirs.loc), (ours.scale, theirs.scale),
                      (ours.stddev, theirs.stddev), (ours.variance, theirs.variance),
                      (ours.entropy(), theirs.entropy()), (ours.rsample(), theirs.rsample()),
                      (ours.log_prob(ta.tensor(value)), theirs.log_prob(torch.tensor(value)))]:
        assert str(got.dtype) == str(want.dtype).removeprefix("torch.")
        assert got.shape == tuple(want.shape)
    for got, want in [(ours.stddev, theirs.stddev), (ours.entropy(), theirs.entropy()),
                      (ours.log_prob(ta.tensor(value)), theirs.log_prob(torch.tensor(value)))]:
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-3)
    if ours.scale.dtype == np.float64:  # 0.1 kept in float64, not rounded through float32
        np.testing.assert_array_equal(ours.scale.numpy(), theirs.scale.numpy())
        np.testing.assert_array_equal(ours.log_prob(ta.tensor(value)).numpy(),
                                      theirs.log_prob(torch.tensor(value)).numpy())


def test_a_number_value_in_normal_log_prob_is_not_rounded_to_float32():
    ours = Normal(ta.zeros(2, dtype=ta.float64), ta.tensor([0.1, 0.2], dtype=ta.float64))
    theirs = torch.distributions.Normal(torch.zeros(2, dtype=torch.float64),
                                        torch.tensor([0.1, 0.2], dtype=torch.float64))
    want = theirs.log_prob(torch.tensor(0.1, dtype=torch.float64)).numpy()
    for value in (0.1, [0.1], [[0.1]]):
        got = ours.log_prob(value)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got.numpy(), np.broadcast_to(want, got.shape), rtol=1e-15)


def test_normal_loc_and_scale_are_broadcast_and_gradients_reach_the_given_ones():
    m, s = ta.tensor([0.0, 1.0, 2.0], requires_grad=True), ta.tensor(2.0, requires_grad=True)
    tm, ts = torch.tensor([0.0, 1.0, 2.0], requires_grad=True), torch.tensor(2.0,
                                                                             requires_grad=True)
    ours, theirs = Normal(m, s), torch.distributions.Normal(tm, ts)
    assert ours.loc.shape == ours.scale.shape == tuple(theirs.scale.shape) == (3,)
    assert Normal(ta.zeros(3), 1.0).scale.shape == (3,)
    assert Normal(ta.zeros(2, 1), ta.ones(3)).loc.shape == (2, 3)
    (ours.scale * ours.loc).sum().backward()
    (theirs.scale * theirs.loc).sum().backward()
    np.testing.assert_allclose(m.grad.numpy(), tm.grad.numpy())
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy())
    assert s.grad.shape == ()


def test_categorical_log_prob_out_of_support_is_a_value_error_as_in_torch():
    p = [[0.2, 0.8], [0.5, 0.5]]
    ours, theirs = Categorical(probs=ta.tensor(p)), torch.distributions.Categorical(
        probs=torch.tensor(p))
    for bad in ([0, 2], [-1, 0], [0.5, 1.0], [float("nan"), 0.0], [float("inf"), 0.0]):
        with pytest.raises(ValueError):
            theirs.log_prob(torch.tensor(bad))
        with pytest.raises(ValueError, match=r"Categorical.log_prob: value .*, got"):
            ours.log_prob(ta.tensor(bad))
    with pytest.raises(ValueError, match="outside the categories 0..0"):  # True is category 1
        Categorical(probs=ta.ones(1)).log_prob(ta.tensor(True))
    # bools are categories 0 and 1, as torch's support check takes them
    np.testing.assert_allclose(ours.log_prob(ta.tensor([True, False])).numpy(),
                               theirs.log_prob(torch.tensor([True, False])).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="value must not be NaN"):
        Normal(0.0, 1.0).log_prob(ta.tensor([0.0, float("nan")]))
    with pytest.raises(ValueError):
        torch.distributions.Normal(0.0, 1.0).log_prob(torch.tensor([0.0, float("nan")]))
