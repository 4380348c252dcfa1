"""Behaviour of tinyattn.distributions that a mutation-testing run (mutmut) found unguarded,
one group per line (torch, float64 unless told, is the reference where it has the same):
- StudentT.rsample draws its normal on df's backend (a second NumpyBackend and its generator).
- Categorical's probs check says what is wrong: "rows must not sum to 0".
- Geometric.log_prob and Kumaraswamy.log_prob name themselves when refusing a value.
- Geometric.sample of float32 probs stays finite when the uniform draw is exactly 0 (clamped to
  float32's tiny, as torch's uniform_(tiny, 1)).
- NegativeBinomial's probs constraint is torch's half-open [0, 1): bounds, check(1.0) False.
- ContinuousBernoulli with probs exactly at lims[0]: the exact formulas, not the Taylor
  expansion (torch's _outside_unstable_region takes probs <= lims[0]).
- MixtureSameFamily.expand (with no _instance): batch_shape, sample shapes and log_prob as torch's.
- Multinomial's repr names the parameter it was given and its shape.
- CatTransform and StackTransform with cache_size=1 cache their parts, as torch's."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.backends.numpy_backend import NumpyBackend
from tinyattn.distributions import (
    Categorical,
    CatTransform,
    ContinuousBernoulli,
    ExpTransform,
    Geometric,
    Kumaraswamy,
    MixtureSameFamily,
    Multinomial,
    NegativeBinomial,
    Normal,
    StackTransform,
    StudentT,
)
from tinyattn.distributions import discrete as discrete_module

torch = pytest.importorskip("torch")

F64 = {"dtype": ta.float64}
TD = torch.distributions


def _np(t):
    return np.asarray(t.detach().numpy())


# --- StudentT.rsample ---------------------------------------------------------------------------

def test_student_t_rsample_draws_on_dfs_backend_with_its_generator():
    be = NumpyBackend()  # a backend other than the default one
    df = ta.tensor([3.0, 5.0], dtype=ta.float64, backend=be, requires_grad=True)
    loc = ta.tensor([0.0, 1.0], dtype=ta.float64, backend=be)
    scale = ta.tensor([1.0, 2.0], dtype=ta.float64, backend=be)
    d = StudentT(df, loc, scale)
    a = d.rsample((4,), generator=ta.Generator(be).manual_seed(3))
    b = d.rsample((4,), generator=ta.Generator(be).manual_seed(3))
    assert a.backend is be and a.shape == (4, 2)
    np.testing.assert_array_equal(_np(a), _np(b))
    assert np.isfinite(_np(a)).all()
    a.sum().backward()
    assert df.grad is not None and np.isfinite(_np(df.grad)).all()


# --- error messages -----------------------------------------------------------------------------

def test_categorical_probs_check_says_rows_must_not_sum_to_zero():
    with pytest.raises(ValueError, match=r"^Categorical: probs rows must not sum to 0 \(no "
                                         r"category is possible\), got \[0\.0, 0\.0\]"):
        Categorical(probs=ta.tensor([[0.0, 0.0], [1.0, 2.0]], **F64))
    with pytest.raises(ValueError):  # torch refuses it too
        TD.Categorical(probs=torch.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=torch.float64))


def test_geometric_log_prob_names_itself_when_refusing_a_value():
    d = Geometric(ta.tensor([0.3, 0.6], **F64))
    with pytest.raises(ValueError, match=r"^Geometric\.log_prob: value must be within"):
        d.log_prob(ta.tensor([-1.0, 2.0], **F64))
    with pytest.raises(ValueError, match=r"^Geometric\.log_prob: value of shape \(3,\) does "
                                         r"not broadcast"):
        d.log_prob(ta.tensor([1.0, 2.0, 3.0], **F64))
    with pytest.raises(ValueError):  # torch refuses it too
        TD.Geometric(torch.tensor([0.3, 0.6], dtype=torch.float64)).log_prob(
            torch.tensor([-1.0, 2.0], dtype=torch.float64))


def test_kumaraswamy_log_prob_names_itself_when_refusing_a_value():
    d = Kumaraswamy(ta.tensor(2.0, **F64), ta.tensor(3.0, **F64))
    with pytest.raises(ValueError, match=r"^Kumaraswamy\.log_prob: value must be within "
                                         r"Interval\(lower_bound=0\.0, upper_bound=1\.0\), "
                                         r"got 1\.5"):
        d.log_prob(ta.tensor(1.5, **F64))
    with pytest.raises(ValueError):  # torch refuses it too
        TD.Kumaraswamy(torch.tensor(2.0, dtype=torch.float64),
                       torch.tensor(3.0, dtype=torch.float64)).log_prob(
            torch.tensor(1.5, dtype=torch.float64))


# --- Geometric.sample at u = 0 ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_geometric_sample_is_finite_when_the_uniform_draw_is_zero(monkeypatch, dtype):
    def zeros_rand(*shape, generator=None, dtype=None, requires_grad=False, backend=None):
        return ta.zeros(*shape, dtype=dtype, backend=backend)

    monkeypatch.setattr(discrete_module, "rand", zeros_rand)
    probs = np.array([0.5, 0.1, 0.9], dtype=dtype)
    x = Geometric(ta.tensor(probs, dtype=getattr(ta, dtype))).sample((2,))
    got = _np(x)
    assert x.dtype == getattr(ta, dtype) and got.shape == (2, 3)
    assert np.isfinite(got).all()
    # u clamped to the dtype's tiny, as torch's uniform_(tiny, 1): the largest draw there is
    tiny = np.finfo(dtype).tiny
    want = np.floor(np.log(np.array(tiny, dtype)) / np.log1p(-probs))
    np.testing.assert_array_equal(got, np.broadcast_to(want, (2, 3)))


# --- NegativeBinomial's probs constraint --------------------------------------------------------

def test_negative_binomial_probs_constraint_is_torchs_half_open_unit_interval():
    ours = NegativeBinomial.arg_constraints["probs"]
    ref = TD.NegativeBinomial.arg_constraints["probs"]
    assert (ours.lower_bound, ours.upper_bound) == (ref.lower_bound, ref.upper_bound) == (0.0, 1.0)
    assert repr(ours) == repr(ref)
    values = [0.0, 0.5, 1.0, -0.1]
    got = _np(ours.check(ta.tensor(values, **F64))).tolist()
    assert got == ref.check(torch.tensor(values, dtype=torch.float64)).tolist()
    assert got == [True, True, False, False]
    with pytest.raises(ValueError, match=r"NegativeBinomial: probs must be within "
                                         r"HalfOpenInterval"):
        NegativeBinomial(ta.tensor(2.0, **F64), probs=ta.tensor([0.5, 1.0], **F64))
    with pytest.raises(ValueError):
        TD.NegativeBinomial(2.0, probs=torch.tensor([0.5, 1.0], dtype=torch.float64))


# --- ContinuousBernoulli at lims[0] -------------------------------------------------------------

def test_continuous_bernoulli_at_the_lower_limit_uses_the_exact_formulas_as_torch():
    # wide lims make the Taylor expansion visibly wrong where torch uses the exact formula
    probs, lims = [0.2, 0.8, 0.3, 0.1], (0.2, 0.8)
    ours = ContinuousBernoulli(ta.tensor(probs, **F64), lims=lims)
    ref = TD.ContinuousBernoulli(torch.tensor(probs, dtype=torch.float64), lims=lims)
    value = [0.3, 0.7, 0.5, 0.9]
    for got, want in ((ours.mean, ref.mean), (ours.variance, ref.variance),
                      (ours.entropy(), ref.entropy()),
                      (ours.log_prob(ta.tensor(value, **F64)),
                       ref.log_prob(torch.tensor(value, dtype=torch.float64)))):
        np.testing.assert_allclose(_np(got), want.numpy(), rtol=1e-10, atol=1e-12)


# --- MixtureSameFamily.expand -------------------------------------------------------------------

@pytest.mark.parametrize("batch, new", [((), (2,)), ((3,), (2, 3))])
def test_mixture_same_family_expand_as_torch(batch, new):
    rng = np.random.default_rng(0)
    w = rng.random((*batch, 4)) + 0.1
    loc, scale = rng.normal(size=(*batch, 4)), rng.random((*batch, 4)) + 0.5
    ours = MixtureSameFamily(Categorical(probs=ta.tensor(w, **F64)),
                             Normal(ta.tensor(loc, **F64), ta.tensor(scale, **F64))).expand(new)
    ref = TD.MixtureSameFamily(TD.Categorical(probs=torch.tensor(w)),
                               TD.Normal(torch.tensor(loc), torch.tensor(scale))).expand(new)
    assert isinstance(ours, MixtureSameFamily)
    assert tuple(ours.batch_shape) == tuple(ref.batch_shape) == new
    assert tuple(ours.event_shape) == tuple(ref.event_shape)
    assert ours.sample((5,)).shape == tuple(ref.sample((5,)).shape) == (5, *new)
    value = rng.normal(size=new)
    np.testing.assert_allclose(_np(ours.log_prob(ta.tensor(value, **F64))),
                               ref.log_prob(torch.tensor(value)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(_np(ours.mean), ref.mean.numpy(), rtol=1e-12)


# --- Multinomial's repr -------------------------------------------------------------------------

def test_multinomial_repr_names_the_given_parameter_and_its_shape():
    assert repr(Multinomial(3, probs=ta.tensor([0.2, 0.8], **F64))) == "Multinomial(probs: (2,))"
    assert (repr(Multinomial(3, logits=ta.tensor([[0.2, 0.8, 0.1]], **F64)))
            == "Multinomial(logits: (1, 3))")


# --- CatTransform / StackTransform cache their parts --------------------------------------------

@pytest.mark.parametrize("kind", ["cat", "stack"])
def test_cat_and_stack_transforms_with_cache_cache_their_parts_as_torch(kind):
    ours_cls, ref_cls = ((CatTransform, TD.CatTransform) if kind == "cat"
                         else (StackTransform, TD.StackTransform))
    kept = ExpTransform(cache_size=1)
    ours = ours_cls([ExpTransform(), kept], cache_size=1)
    ref = ref_cls([TD.ExpTransform(), TD.ExpTransform(cache_size=1)], cache_size=1)
    assert [t._cache_size for t in ours.transforms] == [t._cache_size for t in ref.transforms]
    assert [t._cache_size for t in ours.transforms] == [1, 1]
    assert ours.transforms[1] is kept  # already cached: taken as it is (torch's with_cache)
    part = ours.transforms[0]
    x = ta.tensor([0.5, -1.0], **F64)
    y = part(x)
    assert part.inv(y) is x  # the part remembers its last pair
    # without cache_size the parts are the very ones given
    plain = [ExpTransform(), ExpTransform()]
    assert all(a is b for a, b in zip(ours_cls(plain).transforms, plain, strict=True))
