"""tinyattn.distributions' remaining constraints (Constraint, dependent, dependent_property,
is_dependent, greater_than_eq, half_open_interval, multinomial, positive_integer,
lower_triangular, square, symmetric, positive_semidefinite, MixtureSameFamilyConstraint), the
biject_to / transform_to registries (distributions.constraint_registry) and the matrix
distributions LKJCholesky and Wishart (distributions.matrix), against torch.distributions in
float64: check() on the same values, is_discrete and event_dim; the registries' transforms
(forward, inverse, log_abs_det_jacobian and their gradients, outputs inside the constraint);
log_prob / entropy / mean / mode / variance and their gradients (gradcheck too), and samples
inside the support with sample moments near the true ones."""

import math
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.distributions as D
from tinyattn.distributions import constraints as C

torch = pytest.importorskip("torch")
td = torch.distributions
tc = torch.distributions.constraints

F64 = {"dtype": ta.float64}
RNG = np.random.default_rng(7)


def pair(values, grad=False):
    values = np.asarray(values, dtype=np.float64)
    return (ta.tensor(values, requires_grad=grad, **F64),
            torch.tensor(values, requires_grad=grad))


def close(got, want, rtol=1e-10, atol=1e-12):
    got = got.detach().numpy() if isinstance(got, ta.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def same_check(ours, theirs, values):
    a, b = pair(values)
    got, want = ours.check(a), theirs.check(b)
    assert got.dtype == ta.bool
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def _spd(n, batch=()):
    a = RNG.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


# ---------------------------------------------------------------------------- constraints

PUBLIC = ["boolean", "corr_cholesky", "lower_cholesky", "lower_triangular", "nonnegative",
          "nonnegative_integer", "one_hot", "positive", "positive_definite", "positive_integer",
          "positive_semidefinite", "real", "real_vector", "simplex", "square", "symmetric",
          "unit_interval"]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_objects_are_constraints_with_torchs_attributes(name):
    ours, theirs = getattr(C, name), getattr(tc, name)
    assert isinstance(ours, C.Constraint)
    assert (ours.is_discrete, ours.event_dim) == (theirs.is_discrete, theirs.event_dim)
    assert repr(ours) == repr(theirs)


def test_torchs_public_names_are_all_here():
    wanted = set(tc.__all__)
    assert wanted <= set(dir(C))


@pytest.mark.parametrize("make", [
    lambda c: c.interval(0.0, 2.0), lambda c: c.greater_than(1.0),
    lambda c: c.greater_than_eq(1.0), lambda c: c.less_than(1.0),
    lambda c: c.half_open_interval(-1.0, 1.0), lambda c: c.integer_interval(0, 3),
    lambda c: c.multinomial(4), lambda c: c.independent(c.positive, 2),
    lambda c: c.cat([c.positive, c.real_vector], -1, [1, 2]),
    lambda c: c.stack([c.positive, c.simplex], -2),
    lambda c: c.MixtureSameFamilyConstraint(c.one_hot),
    lambda c: c.MixtureSameFamilyConstraint(c.independent(c.real, 1))])
def test_functors_make_constraints_with_torchs_attributes(make):
    ours, theirs = make(C), make(tc)
    assert isinstance(ours, C.Constraint)
    assert (ours.is_discrete, ours.event_dim) == (theirs.is_discrete, theirs.event_dim)


def test_classes_are_constraint_subclasses():
    for functor in (C.interval, C.greater_than, C.greater_than_eq, C.less_than,
                    C.half_open_interval, C.integer_interval, C.multinomial, C.independent,
                    C.cat, C.stack, C.MixtureSameFamilyConstraint):
        assert isinstance(functor, type) and issubclass(functor, C.Constraint)
    assert isinstance(D.Normal(0.0, 1.0).support, C.Constraint)
    assert isinstance(D.Pareto(1.0, 2.0).support, type(C.greater_than_eq(0.0)))


SCALARS = [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("make", [
    lambda c: c.greater_than_eq(0.5), lambda c: c.greater_than_eq(-1.0),
    lambda c: c.half_open_interval(-1.0, 1.5), lambda c: c.half_open_interval(0.0, 2.0),
    lambda c: c.positive_integer, lambda c: c.nonnegative, lambda c: c.interval(-1.0, 1.5)])
def test_scalar_checks_match_torch(make):
    same_check(make(C), make(tc), SCALARS)


def test_tensor_bounds_match_torch():
    lo, tlo = pair([0.0, 1.0, -1.0])
    hi, thi = pair([1.0, 2.0, 0.0])
    values = np.array([[0.0, 1.0, 0.0], [1.0, 2.0, -1.0], [0.5, 0.5, -0.5]])
    same_check(C.greater_than_eq(lo), tc.greater_than_eq(tlo), values)
    same_check(C.half_open_interval(lo, hi), tc.half_open_interval(tlo, thi), values)


def test_multinomial_check_matches_torch():
    values = [[0, 1, 3], [2, 2, 1], [-1, 3, 1], [0, 0, 0], [4, 0, 0], [1.5, 1, 1]]
    same_check(C.multinomial(4), tc.multinomial(4), values)
    same_check(C.multinomial(5), tc.multinomial(5), np.array(values).reshape(2, 3, 3))


def test_matrix_checks_match_torch():
    spd = _spd(3, (2,))
    lower = np.tril(RNG.normal(size=(3, 3)))
    singular = np.outer([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    indefinite = np.diag([1.0, -1.0, 2.0])
    mats = np.stack([spd[0], spd[1], lower, singular, indefinite, lower @ lower.T])
    same_check(C.lower_triangular, tc.lower_triangular, mats)
    same_check(C.square, tc.square, mats)
    same_check(C.symmetric, tc.symmetric, mats)
    same_check(C.square, tc.square, RNG.normal(size=(2, 3, 4)))
    same_check(C.symmetric, tc.symmetric, RNG.normal(size=(2, 3, 4)))
    for m in (spd[0], singular, indefinite, lower @ lower.T, np.zeros((3, 3))):
        same_check(C.positive_semidefinite, tc.positive_semidefinite, m)
    same_check(C.positive_semidefinite, tc.positive_semidefinite,
               np.stack([spd[0], singular, np.zeros((3, 3))]))


@pytest.mark.parametrize("base, values", [
    ("real", RNG.normal(size=(4, 3))),
    ("one_hot", [[[0, 1, 0], [1, 0, 0]], [[0, 1, 0], [1, 1, 0]]]),
    ("simplex", [[0.2, 0.8], [0.5, 0.6], [1.0, 0.0]]),
    ("independent", [[[1.0, 2.0], [0.5, 0.1]], [[1.0, -2.0], [0.5, 0.1]]]),
])
def test_mixture_same_family_constraint_matches_torch(base, values):
    def make(c):
        inner = c.independent(c.positive, 1) if base == "independent" else getattr(c, base)
        return c.MixtureSameFamilyConstraint(inner)
    same_check(make(C), make(tc), values)
    assert repr(make(C)) == repr(make(tc))


def test_mixture_same_family_support_is_the_mixture_constraint_as_torch():
    probs, tprobs = pair([0.2, 0.3, 0.5])
    loc, tloc = pair([[0.0, 1.0], [1.0, 2.0], [-1.0, 0.5]])
    ours = D.MixtureSameFamily(D.Categorical(probs), D.Independent(D.Uniform(loc, loc + 1), 1))
    theirs = td.MixtureSameFamily(td.Categorical(tprobs),
                                  td.Independent(td.Uniform(tloc, tloc + 1), 1))
    assert isinstance(ours.support, C.MixtureSameFamilyConstraint)
    assert ours.support.event_dim == theirs.support.event_dim == 1
    values = [[0.5, 1.5], [0.5, 1.9], [-0.5, 1.2], [1.2, 1.6]]
    a, b = pair(values)
    np.testing.assert_array_equal(ours.support.check(a).numpy(), theirs.support.check(b).numpy())


def test_mixture_same_family_constraint_refuses_as_torch():
    with pytest.raises(AssertionError):
        C.MixtureSameFamilyConstraint("real")
    with pytest.raises(TypeError, match="MixtureSameFamilyConstraint"):
        C.MixtureSameFamilyConstraint(3)
    with pytest.raises(ValueError, match="dim"):
        C.MixtureSameFamilyConstraint(C.one_hot).check(ta.tensor(1.0))


def test_cat_stack_independent_refuse_non_constraints_as_torch():
    for make in (lambda: C.cat([C.real, "real"]), lambda: C.stack([1]),
                 lambda: C.independent("real", 1)):
        with pytest.raises(AssertionError):
            make()
    with pytest.raises(AssertionError):
        C.independent(C.real, -1)


def test_dependent_matches_torch():
    assert C.is_dependent(C.dependent) and not C.is_dependent(C.real)
    for ours, theirs in ((C.dependent, tc.dependent),
                         (C.dependent(is_discrete=True), tc.dependent(is_discrete=True))):
        with pytest.raises(ValueError, match="dependent"):
            ours.check(ta.tensor([1.0]))
        with pytest.raises(ValueError, match="dependent"):
            theirs.check(torch.tensor([1.0]))
        with pytest.raises(NotImplementedError):
            _ = ours.event_dim
        with pytest.raises(NotImplementedError):
            _ = theirs.event_dim
        assert repr(ours) == repr(theirs)
    made = C.dependent(is_discrete=True, event_dim=1)
    assert C.is_dependent(made) and isinstance(made, C.Constraint)
    assert (made.is_discrete, made.event_dim) == (True, 1)
    assert made(event_dim=2).event_dim == 2 and made(event_dim=2).is_discrete
    with pytest.raises(NotImplementedError):
        _ = C.dependent.is_discrete


def test_dependent_property_matches_torch():
    class Box:
        def __init__(self, low):
            self.low = low

        @C.dependent_property(is_discrete=False, event_dim=0)
        def support(self):
            return C.greater_than(self.low)

        @C.dependent_property
        def other(self):
            return C.real

    assert C.is_dependent(Box.support) and C.is_dependent(Box.other)
    assert (Box.support.is_discrete, Box.support.event_dim) == (False, 0)
    with pytest.raises(NotImplementedError):
        _ = Box.other.event_dim
    box = Box(2.0)
    assert isinstance(box.support, C.Constraint) and box.support.lower_bound == 2.0
    np.testing.assert_array_equal(box.support.check(ta.tensor([1.0, 3.0])).numpy(),
                                  [False, True])
    with pytest.raises(ValueError):
        Box.support.check(ta.tensor(1.0))


# ---------------------------------------------------------------------------- registries

from tinyattn.distributions import constraint_registry as R  # noqa: E402


def _cases():
    """id -> (maker of a constraint from a constraints module, input shape)"""
    return {
        "real": (lambda c: c.real, (3, 2)),
        "positive": (lambda c: c.positive, (4,)),
        "nonnegative": (lambda c: c.nonnegative, (4,)),
        "greater_than": (lambda c: c.greater_than(1.5), (2, 3)),
        "greater_than_eq": (lambda c: c.greater_than_eq(-2.0), (2, 3)),
        "less_than": (lambda c: c.less_than(3.0), (5,)),
        "interval": (lambda c: c.interval(-1.0, 2.0), (2, 3)),
        "unit_interval": (lambda c: c.unit_interval, (4,)),
        "interval01": (lambda c: c.interval(0, 1), (4,)),
        "half_open": (lambda c: c.half_open_interval(0.5, 4.0), (3,)),
        "simplex": (lambda c: c.simplex, (2, 3)),
        "corr_cholesky": (lambda c: c.corr_cholesky, (2, 6)),
        "independent": (lambda c: c.independent(c.positive, 1), (2, 3)),
        "independent2": (lambda c: c.independent(c.interval(0.0, 3.0), 2), (2, 2, 3)),
        "cat": (lambda c: c.cat([c.positive, c.real, c.interval(0.0, 1.0)], -1, [2, 1, 2]),
                (3, 5)),
        "stack": (lambda c: c.stack([c.positive, c.unit_interval, c.less_than(0.0)], -1),
                  (2, 3)),
    }


def _tensor_bound_case(c, like):
    lo = like([0.0, 1.0, -2.0])
    return c.interval(lo, lo + 2.5)


TRANSFORM_ONLY = {
    "lower_cholesky": (lambda c: c.lower_cholesky, (2, 3, 3)),
    "positive_definite": (lambda c: c.positive_definite, (3, 3)),
    "positive_semidefinite": (lambda c: c.positive_semidefinite, (2, 3, 3)),
    "simplex": (lambda c: c.simplex, (2, 4)),
}


def _same_transform(ours_t, theirs_t, ours_c, shape):
    """The same outputs, inverses, log-dets (where torch's is bijective) and gradients; the
    outputs inside the constraint."""
    x, tx = pair(RNG.normal(size=shape) * 0.7, grad=True)
    y, ty = ours_t(x), theirs_t(tx)
    close(y, ty)
    assert bool(ours_c.check(y).all()) and bool(ours_c.check(y).numpy().size)
    assert ours_t.bijective == theirs_t.bijective
    ladj, tladj = ta.zeros((), **F64), torch.zeros((), dtype=torch.float64)
    if theirs_t.bijective:
        ladj, tladj = ours_t.log_abs_det_jacobian(x, y), theirs_t.log_abs_det_jacobian(tx, ty)
        close(ladj, tladj)
    yd, tyd = pair(y.detach().numpy(), grad=True)
    close(ours_t.inv(yd), theirs_t.inv(tyd), rtol=1e-8, atol=1e-10)
    w = RNG.normal(size=y.shape)
    (gx,) = ta.autograd.grad((y * ta.tensor(w, **F64)).sum() + ladj.sum(), [x])
    (tgx,) = torch.autograd.grad((ty * torch.tensor(w)).sum() + tladj.sum(), [tx])
    close(gx, tgx, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("case", list(_cases()))
def test_biject_to_matches_torch(case):
    make, shape = _cases()[case]
    if case == "corr_cholesky":
        shape = (2, 6)
    ours, theirs = R.biject_to(make(C)), td.biject_to(make(tc))
    assert ours.bijective
    _same_transform(ours, theirs, make(C), shape)


@pytest.mark.parametrize("case", list(_cases()) + [f"only_{k}" for k in TRANSFORM_ONLY])
def test_transform_to_matches_torch(case):
    make, shape = (TRANSFORM_ONLY[case[5:]] if case.startswith("only_") else _cases()[case])
    ours, theirs = R.transform_to(make(C)), td.transform_to(make(tc))
    assert type(ours).__name__ == type(theirs).__name__
    _same_transform(ours, theirs, make(C), shape)


def test_interval_with_tensor_bounds_matches_torch():
    ours_c = _tensor_bound_case(C, lambda v: ta.tensor(v, **F64))
    theirs_c = _tensor_bound_case(tc, lambda v: torch.tensor(v, dtype=torch.float64))
    for registry, tregistry in ((R.biject_to, td.biject_to), (R.transform_to, td.transform_to)):
        _same_transform(registry(ours_c), tregistry(theirs_c), ours_c, (4, 3))


def test_unit_interval_is_a_plain_sigmoid_as_torch():
    for c in (C.unit_interval, C.interval(0, 1), C.interval(0.0, 1.0)):
        assert isinstance(R.biject_to(c), D.SigmoidTransform)
    assert isinstance(R.biject_to(C.interval(0.0, 2.0)), D.ComposeTransform)
    assert isinstance(R.biject_to(C.simplex), D.StickBreakingTransform)
    assert isinstance(R.transform_to(C.simplex), D.SoftmaxTransform)


def test_registry_gradcheck_through_biject_to():
    def through(constraint, dims):
        def fn(x):
            t = R.biject_to(constraint)
            y = t(x)
            return y.sum(dims) + t.log_abs_det_jacobian(x, y).reshape(x.shape[0], -1).sum(-1)
        return fn

    cat = C.cat([C.interval(-1.0, 2.0), C.greater_than(0.5)], -1, [2, 3])
    for constraint, shape, dims in ((cat, (2, 5), -1), (C.simplex, (2, 3), -1),
                                    (C.corr_cholesky, (2, 3), (-1, -2))):
        x = ta.tensor(RNG.normal(size=shape) * 0.5, requires_grad=True, **F64)
        assert ta.autograd.gradcheck(through(constraint, dims), (x,))
        assert ta.autograd.gradgradcheck(through(constraint, dims), (x,))


def test_registry_refuses_as_torch():
    for c in (C.lower_cholesky, C.positive_definite, C.dependent, C.boolean):
        with pytest.raises(NotImplementedError, match=type(c).__name__):
            R.biject_to(c)
    with pytest.raises(NotImplementedError):
        R.transform_to(C.one_hot)
    with pytest.raises(TypeError, match="register"):
        R.biject_to.register(3, lambda c: None)
    with pytest.raises(TypeError, match="register"):
        R.biject_to.register(int, lambda c: None)


def test_register_a_new_constraint():
    registry = R.ConstraintRegistry()

    class _Odd(C.Constraint):
        def check(self, value):
            return value % 2 == 1

    @registry.register(_Odd)
    def _make(constraint):
        return D.AffineTransform(1.0, 2.0)

    registry.register(C.positive, lambda c: D.ExpTransform())  # a singleton: its class
    assert isinstance(registry(_Odd()), D.AffineTransform)
    assert isinstance(registry(C.greater_than(3.0)), D.ExpTransform)
    with pytest.raises(NotImplementedError):
        R.biject_to(_Odd())


def test_module_names_and_exports():
    import tinyattn.distributions.constraint_registry as module
    assert D.biject_to is module.biject_to and D.transform_to is module.transform_to
    assert D.constraint_registry is module
    assert {"biject_to", "transform_to", "LKJCholesky", "Wishart"} <= set(D.__all__)


def test_distribution_supports_map_as_torch():
    x, tx = pair(RNG.normal(size=(3,)))
    for ours_d, theirs_d in ((D.Pareto(2.0, 3.0), td.Pareto(2.0, 3.0)),
                             (D.Uniform(-1.0, 4.0), td.Uniform(-1.0, 4.0)),
                             (D.Dirichlet(ta.ones(3, **F64)),
                              td.Dirichlet(torch.ones(3, dtype=torch.float64)))):
        close(R.biject_to(ours_d.support)(x), td.biject_to(theirs_d.support)(tx))


# ---------------------------------------------------------------------------- LKJCholesky

def _lkj_values(dim, conc, n):
    torch.manual_seed(dim)
    return td.LKJCholesky(dim, torch.tensor(conc, dtype=torch.float64)).sample((n,)).numpy()


@pytest.mark.parametrize("dim, conc", [(2, 0.5), (3, 1.0), (4, 2.5), (3, [0.7, 3.0])])
def test_lkj_log_prob_and_gradients_match_torch(dim, conc):
    values = _lkj_values(dim, conc, 5)
    c, tcn = pair(conc, grad=True)
    v, tv = pair(values, grad=True)
    ours, theirs = D.LKJCholesky(dim, c), td.LKJCholesky(dim, tcn)
    assert ours.batch_shape == tuple(theirs.batch_shape)
    assert ours.event_shape == tuple(theirs.event_shape)
    lp, tlp = ours.log_prob(v), theirs.log_prob(tv)
    close(lp, tlp)
    w = RNG.normal(size=lp.shape)
    gc, gv = ta.autograd.grad((lp * ta.tensor(w, **F64)).sum(), [c, v])
    tgc, tgv = torch.autograd.grad((tlp * torch.tensor(w)).sum(), [tcn, tv])
    close(gc, tgc, rtol=1e-9)
    close(gv, tgv, rtol=1e-9)


def test_lkj_gradcheck():
    values = ta.tensor(_lkj_values(3, [0.8, 2.0], 2), **F64)
    c = ta.tensor([0.8, 2.0], requires_grad=True, **F64)
    assert ta.autograd.gradcheck(lambda c: D.LKJCholesky(3, c).log_prob(values), (c,))
    assert ta.autograd.gradgradcheck(lambda c: D.LKJCholesky(3, c).log_prob(values), (c,))


@pytest.mark.parametrize("dim, conc", [(2, 1.0), (3, 0.5), (4, 3.0)])
def test_lkj_samples_in_support_with_the_right_moments(dim, conc):
    ta.manual_seed(0)
    n = 6000
    d = D.LKJCholesky(dim, ta.tensor([conc, conc + 1.0], **F64))
    s = d.sample((n,))
    assert s.shape == (n, 2, dim, dim) and s.dtype == ta.float64 and not s.requires_grad
    assert bool(C.corr_cholesky.check(s).all())
    assert bool(tc.corr_cholesky.check(torch.tensor(s.numpy())).all())
    m = s.numpy() @ np.swapaxes(s.numpy(), -1, -2)  # correlation matrices
    off = m[..., np.tril_indices(dim, -1)[0], np.tril_indices(dim, -1)[1]]
    for b, eta in enumerate((conc, conc + 1.0)):
        # each off-diagonal correlation: 2 Beta(eta - 1 + dim/2, same) - 1, variance
        # 1/(2eta+dim-1), in every row (torch 2.x's sampler misses this past the second row)
        var = 1.0 / (2 * eta + dim - 1)
        se = math.sqrt(var / n)
        assert np.all(np.abs(off[:, b].mean(0)) < 5 * se)
        np.testing.assert_allclose(off[:, b].var(0), var, rtol=0.07)
        np.testing.assert_allclose(np.diagonal(m[:, b], axis1=-2, axis2=-1), 1.0, atol=1e-12)


def test_lkj_refuses_as_torch():
    with pytest.raises(ValueError, match="dim"):
        D.LKJCholesky(1, 1.0)
    with pytest.raises(ValueError, match="concentration"):
        D.LKJCholesky(3, -1.0)
    with pytest.raises(ValueError, match="value"):
        D.LKJCholesky(2, 1.0).log_prob(ta.tensor([[1.0, 0.0], [0.5, 0.5]], **F64))
    assert isinstance(D.LKJCholesky.support, type(C.corr_cholesky))
    e = D.LKJCholesky(3, ta.tensor([1.0, 2.0], **F64)).expand((4, 2))
    assert e.batch_shape == (4, 2) and e.sample().shape == (4, 2, 3, 3)


# ---------------------------------------------------------------------------- Wishart

def _wishart_pair(form, df, batch=()):
    sigma = _spd(3, batch) / 3
    value = {"covariance_matrix": sigma, "precision_matrix": np.linalg.inv(sigma),
             "scale_tril": np.linalg.cholesky(sigma)}[form]
    m, tm = pair(value, grad=True)
    if isinstance(df, float):
        d, tdf = df, df
    else:
        d, tdf = pair(df, grad=True)
    return (D.Wishart(d, **{form: m}), td.Wishart(tdf, **{form: tm}), (m, d), (tm, tdf))


FORMS = ["covariance_matrix", "precision_matrix", "scale_tril"]


@pytest.mark.filterwarnings("ignore:Singular sample detected")  # (torch's, on good samples)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("df, batch", [(4.5, ()), ([3.5, 6.0], (2,)), ([5.0, 3.2], ())])
def test_wishart_values_and_gradients_match_torch(form, df, batch):
    ours, theirs, params, tparams = _wishart_pair(form, df, batch)
    assert ours.batch_shape == tuple(theirs.batch_shape)
    assert ours.event_shape == tuple(theirs.event_shape)
    torch.manual_seed(1)
    value = theirs.sample((4,)).numpy()
    v, tv = pair(value, grad=True)
    for name in ("mean", "variance", "scale_tril", "covariance_matrix", "precision_matrix"):
        close(getattr(ours, name), getattr(theirs, name), rtol=1e-9)
    close(ours.mode, theirs.mode, rtol=1e-9)
    lp, tlp = ours.log_prob(v), theirs.log_prob(tv)
    close(lp, tlp, rtol=1e-9)
    ent, tent = ours.entropy(), theirs.entropy()
    close(ent, tent, rtol=1e-9)
    w = RNG.normal(size=lp.shape)
    want = [p for p in tparams if isinstance(p, torch.Tensor)]
    mine = [p for p in params if isinstance(p, ta.Tensor)]
    total = ((lp * ta.tensor(w, **F64)).sum() + ent.sum() + ours.mean.sum()
             + ours.variance.sum())
    ttotal = ((tlp * torch.tensor(w)).sum() + tent.sum() + theirs.mean.sum()
              + theirs.variance.sum())
    for g, tg in zip(ta.autograd.grad(total, mine + [v]), torch.autograd.grad(ttotal, want + [tv]),
                     strict=True):
        close(g, tg, rtol=1e-8, atol=1e-10)


def test_wishart_mode_is_nan_where_torchs_is():
    ours, theirs, _, _ = _wishart_pair("scale_tril", [3.5, 6.0], (2,))
    close(ours.mode, theirs.mode)
    assert np.isnan(ours.mode.numpy()[0]).all() and not np.isnan(ours.mode.numpy()[1]).any()


def test_wishart_gradcheck():
    sigma = _spd(2) / 2
    low = ta.tensor(np.linalg.cholesky(sigma), requires_grad=True, **F64)
    df = ta.tensor([3.0, 4.5], requires_grad=True, **F64)
    value = ta.tensor(_spd(2, (2,)), **F64)

    def fn(low, df):
        d = D.Wishart(df, scale_tril=low.tril(), validate_args=False)
        return d.log_prob(value) + d.entropy()

    assert ta.autograd.gradcheck(fn, (low, df))
    assert ta.autograd.gradgradcheck(fn, (low, df))
    cov = ta.tensor(sigma, requires_grad=True, **F64)
    assert ta.autograd.gradcheck(
        lambda c: D.Wishart(4.0, covariance_matrix=(c + c.mT) / 2,
                            validate_args=False).log_prob(value), (cov,))


def test_wishart_rsample_moments_support_and_gradients():
    ta.manual_seed(3)
    sigma = _spd(3) / 3
    low = ta.tensor(np.linalg.cholesky(sigma), requires_grad=True, **F64)
    df = ta.tensor(5.5, requires_grad=True, **F64)
    d = D.Wishart(df, scale_tril=low)
    n = 20000
    s = d.rsample((n,))
    assert s.shape == (n, 3, 3) and s.dtype == ta.float64
    assert bool(C.positive_definite.check(s).all())
    x = s.detach().numpy()
    mean, var = d.mean.detach().numpy(), d.variance.detach().numpy()
    np.testing.assert_allclose(x.mean(0), mean, atol=5 * np.sqrt(var.max() / n))
    np.testing.assert_allclose(x.var(0), var, rtol=0.1)
    # E[X] = df Σ: the sample mean's gradient is near the mean's
    g_df, g_low = ta.autograd.grad(s.mean(0).sum(), [df, low])
    t_df, t_low = ta.autograd.grad(d.mean.sum(), [df, low])
    np.testing.assert_allclose(g_df.numpy(), t_df.numpy(), rtol=0.05)
    np.testing.assert_allclose(g_low.numpy(), t_low.numpy(), rtol=0.05, atol=0.05)
    assert not d.sample((2,)).requires_grad


def test_wishart_rsample_draws_singular_samples_again(monkeypatch):
    d = D.Wishart(ta.tensor([4.0, 5.0], **F64), covariance_matrix=ta.eye(2, **F64))
    first, calls = d._bartlett, []

    def singular_first(sample_shape, generator):
        x = first(sample_shape, generator)
        if not calls:  # the first draw of the first batch member: all zeros
            calls.append(1)
            x = x * ta.tensor([0.0, 1.0], **F64).reshape(2, 1, 1)
        return x

    monkeypatch.setattr(d, "_bartlett", singular_first)
    with pytest.warns(UserWarning, match="Singular sample"):
        s = d.rsample((3,))
    assert s.shape == (3, 2, 2, 2) and bool(C.positive_definite.check(s).all())


def test_wishart_refuses_as_torch():
    eye = ta.eye(3, **F64)
    with pytest.raises(AssertionError, match="Exactly one"):
        D.Wishart(4.0)
    with pytest.raises(AssertionError, match="Exactly one"):
        D.Wishart(4.0, covariance_matrix=eye, scale_tril=eye)
    with pytest.raises(ValueError, match="two-dimensional"):
        D.Wishart(4.0, covariance_matrix=ta.ones(3, **F64))
    with pytest.raises(ValueError, match="df"):
        D.Wishart(2.0, covariance_matrix=eye)
    with pytest.raises(ValueError, match="covariance_matrix"):
        D.Wishart(4.0, covariance_matrix=-eye)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        D.Wishart(2.5, covariance_matrix=eye)
    assert any("Low df" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="value"):
        D.Wishart(4.0, covariance_matrix=eye).log_prob(-eye)
    e = D.Wishart(ta.tensor([4.0, 5.0], **F64), covariance_matrix=eye).expand((3, 2))
    assert e.batch_shape == (3, 2) and e.rsample().shape == (3, 2, 3, 3)
    close(e.mean, td.Wishart(torch.tensor([4.0, 5.0], dtype=torch.float64),
                             covariance_matrix=torch.eye(3, dtype=torch.float64))
          .expand((3, 2)).mean)
