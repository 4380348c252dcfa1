"""tinyattn.distributions' transforms (distributions.transforms) and TransformedDistribution
against torch.distributions in float64: each transform's forward, inverse and
log_abs_det_jacobian on the same inputs, their gradients (and gradcheck / gradgradcheck),
domain/codomain, bijective, sign, event_dim, forward_shape/inverse_shape, the cache and __eq__;
TransformedDistribution's shapes, log_prob, cdf/icdf, rsample gradients and expand; and the
errors torch raises for bad shapes."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.distributions as D
from tinyattn.distributions import transforms as T

torch = pytest.importorskip("torch")
td = torch.distributions
tt = torch.distributions.transforms

F64 = {"dtype": ta.float64}
RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _same_draws_in_any_order():
    """Each test draws the same values whatever ran before it (a subset of the tests, another
    order): the draw decides how steep an inverse CDF is where a finite difference checks it."""
    global RNG
    RNG = np.random.default_rng(0)


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


def _lower(n, batch=()):
    a = RNG.normal(size=batch + (n, n))
    return np.tril(a, -1) + np.eye(n) * np.exp(RNG.normal(size=batch + (n, 1)) * 0.3)


def _params(values):
    """A tinyattn and a torch parameter tensor of the same values (no gradient)."""
    return pair(values, grad=False)


# id -> () -> (tinyattn transform, torch transform, input values)
def _affine_tensor():
    (loc, tloc), (scale, tscale) = _params([0.5, -1.0, 2.0]), _params([2.0, -0.5, 1.5])
    return (T.AffineTransform(loc, scale, event_dim=1), tt.AffineTransform(tloc, tscale, 1),
            RNG.normal(size=(2, 3)))


def _power():
    e, te = _params([2.0, 0.5, -1.5])
    return T.PowerTransform(e), tt.PowerTransform(te), RNG.uniform(0.5, 2.0, size=(2, 3))


def _compose():
    parts = [T.AffineTransform(0.3, -2.0), T.SigmoidTransform(), T.PowerTransform(2.0)]
    tparts = [tt.AffineTransform(0.3, -2.0), tt.SigmoidTransform(), tt.PowerTransform(
        torch.tensor(2.0, dtype=torch.float64))]
    return T.ComposeTransform(parts), tt.ComposeTransform(tparts), RNG.normal(size=(4,))


def _compose_event():
    return (T.ComposeTransform([T.ExpTransform(), T.StickBreakingTransform().inv.inv]),
            tt.ComposeTransform([tt.ExpTransform(), tt.StickBreakingTransform()]),
            RNG.normal(size=(2, 3)))


def _cat():
    return (T.CatTransform([T.ExpTransform(), T.TanhTransform(), T.AffineTransform(1.0, 3.0)],
                           dim=-1, lengths=[2, 1, 2]),
            tt.CatTransform([tt.ExpTransform(), tt.TanhTransform(), tt.AffineTransform(1.0, 3.0)],
                            dim=-1, lengths=[2, 1, 2]),
            RNG.normal(size=(3, 5)))


def _cat_event():
    """A CatTransform whose parts have event_dim 1 along dim 0 (log-dets concatenated)."""
    parts = [T.IndependentTransform(T.ExpTransform(), 1), T.AffineTransform(0.5, -2.0, 1)]
    tparts = [tt.IndependentTransform(tt.ExpTransform(), 1), tt.AffineTransform(0.5, -2.0, 1)]
    return (T.CatTransform(parts, dim=0, lengths=[2, 1]),
            tt.CatTransform(tparts, dim=0, lengths=[2, 1]), RNG.normal(size=(3, 2)))


def _cat_mixed():
    """Parts of event_dim 0 and 1 along the last dim (log-dets summed)."""
    parts = [T.ExpTransform(), T.IndependentTransform(T.SigmoidTransform(), 1)]
    tparts = [tt.ExpTransform(), tt.IndependentTransform(tt.SigmoidTransform(), 1)]
    return (T.CatTransform(parts, dim=-1, lengths=[2, 1]),
            tt.CatTransform(tparts, dim=-1, lengths=[2, 1]), RNG.normal(size=(3, 3)))


def _stack():
    return (T.StackTransform([T.ExpTransform(), T.SoftplusTransform()], dim=1),
            tt.StackTransform([tt.ExpTransform(), tt.SoftplusTransform()], dim=1),
            RNG.normal(size=(3, 2, 2)))


def _cdf():
    (loc, tloc), (scale, tscale) = _params([0.5, -1.0]), _params([2.0, 0.7])
    return (T.CumulativeDistributionTransform(D.Normal(loc, scale)),
            tt.CumulativeDistributionTransform(td.Normal(tloc, tscale)),
            RNG.normal(size=(3, 2)))


BIJECTIONS = {
    "exp": lambda: (T.ExpTransform(), tt.ExpTransform(), RNG.normal(size=(2, 3))),
    "affine_number": lambda: (T.AffineTransform(1.5, -3.0), tt.AffineTransform(1.5, -3.0),
                              RNG.normal(size=(4,))),
    "affine_tensor_event": _affine_tensor,
    "sigmoid": lambda: (T.SigmoidTransform(), tt.SigmoidTransform(),
                        RNG.normal(size=(5,)) * 3),
    "tanh": lambda: (T.TanhTransform(), tt.TanhTransform(), RNG.normal(size=(2, 2))),
    "softplus": lambda: (T.SoftplusTransform(), tt.SoftplusTransform(),
                         RNG.normal(size=(5,)) * 3),
    "power": _power,
    "stick_breaking": lambda: (T.StickBreakingTransform(), tt.StickBreakingTransform(),
                               RNG.normal(size=(2, 3))),
    "corr_cholesky": lambda: (T.CorrCholeskyTransform(), tt.CorrCholeskyTransform(),
                              RNG.normal(size=(2, 6))),
    "compose": _compose,
    "compose_event": _compose_event,
    "independent": lambda: (T.IndependentTransform(T.SigmoidTransform(), 2),
                            tt.IndependentTransform(tt.SigmoidTransform(), 2),
                            RNG.normal(size=(2, 3, 2))),
    "reshape": lambda: (T.ReshapeTransform((2, 3), (6,)), tt.ReshapeTransform((2, 3), (6,)),
                        RNG.normal(size=(4, 2, 3))),
    "cat": _cat,
    "cat_event": _cat_event,
    "cat_mixed": _cat_mixed,
    "stack": _stack,
    "cdf": _cdf,
    "exp_inverse": lambda: (T.ExpTransform().inv, tt.ExpTransform().inv,
                            RNG.uniform(0.2, 3.0, size=(3,))),
}

# transforms without a log_abs_det_jacobian (torch's neither): forward and inverse only
NON_BIJECTIONS = {
    "abs": lambda: (T.AbsTransform(), tt.AbsTransform(), RNG.normal(size=(4,))),
    "softmax": lambda: (T.SoftmaxTransform(), tt.SoftmaxTransform(), RNG.normal(size=(2, 4))),
    "lower_cholesky": lambda: (T.LowerCholeskyTransform(), tt.LowerCholeskyTransform(),
                               RNG.normal(size=(2, 3, 3))),
    "positive_definite": lambda: (T.PositiveDefiniteTransform(),
                                  tt.PositiveDefiniteTransform(), RNG.normal(size=(2, 3, 3))),
}


@pytest.mark.parametrize("name", list(BIJECTIONS) + list(NON_BIJECTIONS))
def test_forward_inverse_and_log_det_match_torch(name):
    t, tt_, values = {**BIJECTIONS, **NON_BIJECTIONS}[name]()
    x, tx = pair(values, grad=False)
    y, ty = t(x), tt_(tx)
    close(y, ty)
    assert y.dtype == ta.float64
    close(t.inv(y), tt_.inv(ty))
    if name in BIJECTIONS:
        close(t.log_abs_det_jacobian(x, y), tt_.log_abs_det_jacobian(tx, ty))
        close(t.inv.log_abs_det_jacobian(y, x), tt_.inv.log_abs_det_jacobian(ty, tx))
    else:
        with pytest.raises(NotImplementedError):
            tt_.log_abs_det_jacobian(tx, ty)
        with pytest.raises(NotImplementedError, match=type(t).__name__):
            t.log_abs_det_jacobian(x, y)


@pytest.mark.parametrize("name", list(BIJECTIONS) + list(NON_BIJECTIONS))
def test_properties_match_torch(name):
    t, tt_, values = {**BIJECTIONS, **NON_BIJECTIONS}[name]()
    assert t.bijective == tt_.bijective
    assert t.domain.event_dim == tt_.domain.event_dim
    assert t.codomain.event_dim == tt_.codomain.event_dim
    assert t.inv.domain.event_dim == tt_.codomain.event_dim
    assert t.inv.inv is t
    shape = values.shape
    assert tuple(t.forward_shape(shape)) == tuple(tt_.forward_shape(torch.Size(shape)))
    out = tuple(tt_.forward_shape(torch.Size(shape)))
    assert tuple(t.inverse_shape(out)) == tuple(tt_.inverse_shape(torch.Size(out)))
    x, tx = pair(values, grad=False)
    y, ty = t(x), tt_(tx)
    for constraint, tconstraint, v, tv in [(t.codomain, tt_.codomain, y, ty),
                                           (t.domain, tt_.domain, x, tx)]:
        try:
            want = tconstraint.check(tv).double()
        except RuntimeError:  # (a cat of parts of two event dims: torch's check fails too)
            with pytest.raises(RuntimeError):
                constraint.check(v)
        else:
            close(constraint.check(v).to(ta.float64), want)
    try:
        want = tt_.sign
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            _ = t.sign
    else:
        got = t.sign
        close(got, want) if isinstance(want, torch.Tensor) else (got == want or pytest.fail())


def _uses(t, tt_, x, tx, w, tw):
    """A loss through the forward, its log-det and the inverse of a fresh value."""
    y, ty = t(x), tt_(tx)
    loss, tloss = (y * w).sum(), (ty * tw).sum()
    if t.bijective:
        loss = loss + t.log_abs_det_jacobian(x, y).sin().sum()
        tloss = tloss + tt_.log_abs_det_jacobian(tx, ty).sin().sum()
    return loss, tloss


@pytest.mark.parametrize("name", list(BIJECTIONS) + list(NON_BIJECTIONS))
def test_gradients_match_torch(name):
    t, tt_, values = {**BIJECTIONS, **NON_BIJECTIONS}[name]()
    x, tx = pair(values)
    out_shape = tuple(tt_.forward_shape(torch.Size(values.shape)))
    w, tw = pair(RNG.normal(size=out_shape), grad=False)
    loss, tloss = _uses(t, tt_, x, tx, w, tw)
    loss.backward()
    tloss.backward()
    close(x.grad, tx.grad, rtol=1e-8, atol=1e-10)
    # the inverse's gradient, at the forward's (detached) output
    y, ty = pair(tt_(tx).detach().numpy())
    (t.inv(y) * 1.5).sin().sum().backward()
    (tt_.inv(ty) * 1.5).sin().sum().backward()
    close(y.grad, ty.grad, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", ["exp", "affine_tensor_event", "sigmoid", "tanh", "softplus",
                                  "power", "stick_breaking", "corr_cholesky", "compose",
                                  "cat", "stack", "cdf", "lower_cholesky",
                                  "positive_definite", "softmax"])
def test_gradcheck_and_gradgradcheck(name):
    t, _, values = {**BIJECTIONS, **NON_BIJECTIONS}[name]()
    x = ta.tensor(values, requires_grad=True, **F64)

    def forward(a):
        y = t(a)
        return (y, t.log_abs_det_jacobian(a, y)) if t.bijective else y

    assert ta.autograd.gradcheck(forward, (x,))
    assert ta.autograd.gradgradcheck(forward, (x,))
    y = ta.tensor(t(x).detach().numpy(), requires_grad=True, **F64)
    assert ta.autograd.gradcheck(lambda b: t.inv(b), (y,))


def test_cache_returns_the_paired_value_and_cache_size_is_checked():
    x = ta.tensor([0.5, -1.0], **F64)
    cached, plain = T.ExpTransform(cache_size=1), T.ExpTransform()
    y = cached(x)
    assert cached.inv(y) is x and cached(x) is y
    assert plain.inv(plain(x)) is not x
    assert T.ExpTransform().with_cache(1)._cache_size == 1
    with pytest.raises(ValueError):
        tt.ExpTransform(cache_size=2)
    with pytest.raises(ValueError, match="cache_size must be 0 or 1, got 2"):
        T.ExpTransform(cache_size=2)
    inv = T.AffineTransform(1.0, 2.0).inv.with_cache(1)
    assert isinstance(inv.inv, T.AffineTransform) and inv.inv._cache_size == 1


def test_equality_as_torch():
    a, ta_ = ta.tensor([1.0, 2.0]), ta.tensor([1.0, 3.0])
    assert T.ExpTransform() == T.ExpTransform()
    assert T.ExpTransform() != T.SigmoidTransform()
    assert T.AffineTransform(1.0, 2.0) == T.AffineTransform(1.0, 2.0)
    assert T.AffineTransform(1.0, 2.0) != T.AffineTransform(1.0, -2.0)
    assert T.AffineTransform(0.0, a) != T.AffineTransform(0.0, ta_)
    assert T.PowerTransform(a) == T.PowerTransform(ta.tensor([1.0, 2.0]))
    assert T.ExpTransform().inv == T.ExpTransform().inv
    assert T.ComposeTransform([T.ExpTransform()]) == T.ComposeTransform([T.ExpTransform()])
    assert T.ComposeTransform([T.ExpTransform()]) != T.ComposeTransform([T.TanhTransform()])
    assert T.identity_transform == T.ComposeTransform([])
    assert repr(T.ExpTransform().inv) == repr(tt.ExpTransform().inv)


def test_event_dim_errors_where_domain_and_codomain_differ():
    assert T.StickBreakingTransform().event_dim == 1
    with pytest.raises(ValueError, match="domain.event_dim"):
        _ = T.CorrCholeskyTransform().event_dim
    with pytest.raises(ValueError):
        _ = tt.CorrCholeskyTransform().event_dim


def test_constraints_the_transforms_use_match_torch():
    good = np.linalg.cholesky(np.array([[1.0, 0.3], [0.3, 1.0]]))
    values = np.stack([good, good * 2, np.tril(RNG.normal(size=(2, 2)))])
    v, tv = pair(values, grad=False)
    close(D.constraints.corr_cholesky.check(v).to(ta.float64),
          td.constraints.corr_cholesky.check(tv).double())
    c = D.constraints.cat([D.constraints.positive, D.constraints.real], dim=0, lengths=[1, 2])
    tc = td.constraints.cat([td.constraints.positive, td.constraints.real], 0, [1, 2])
    x, tx = pair([-1.0, -2.0, 3.0], grad=False)
    close(c.check(x).to(ta.float64), tc.check(tx).double())
    s = D.constraints.stack([D.constraints.positive, D.constraints.real], dim=1)
    ts = td.constraints.stack([td.constraints.positive, td.constraints.real], 1)
    x, tx = pair([[-1.0, -2.0], [1.0, -3.0]], grad=False)
    close(s.check(x).to(ta.float64), ts.check(tx).double())


# ---- shape errors ------------------------------------------------------------------------


def test_shape_errors_name_the_transform_and_the_shapes():
    with pytest.raises(ValueError):
        tt.ReshapeTransform((2, 3), (5,))
    with pytest.raises(ValueError, match=r"ReshapeTransform.*\(2, 3\).*\(5,\)"):
        T.ReshapeTransform((2, 3), (5,))
    r, tr = T.ReshapeTransform((2, 3), (6,)), tt.ReshapeTransform((2, 3), (6,))
    with pytest.raises(ValueError):
        tr.forward_shape(torch.Size((3, 2)))
    with pytest.raises(ValueError, match=r"ReshapeTransform.forward_shape.*\(3, 2\)"):
        r.forward_shape((3, 2))
    with pytest.raises(ValueError, match="Too few dimensions"):
        T.StickBreakingTransform().forward_shape(())
    with pytest.raises(ValueError):
        tt.CorrCholeskyTransform().forward_shape(torch.Size((4,)))
    with pytest.raises(ValueError, match=r"CorrCholeskyTransform.*4"):
        T.CorrCholeskyTransform().forward_shape((4,))
    with pytest.raises(ValueError, match="square"):
        T.CorrCholeskyTransform().inverse_shape((2, 3))


def test_cat_and_stack_refuse_wrong_sizes_as_torch():
    cat = T.CatTransform([T.ExpTransform(), T.ExpTransform()], dim=0, lengths=[2, 2])
    tcat = tt.CatTransform([tt.ExpTransform(), tt.ExpTransform()], dim=0, lengths=[2, 2])
    x, tx = pair(np.zeros(3), grad=False)
    with pytest.raises(AssertionError):
        tcat(tx)
    with pytest.raises(AssertionError, match=r"CatTransform.*\(3,\).*4"):
        cat(x)
    with pytest.raises(AssertionError, match="CatTransform"):
        T.CatTransform([T.ExpTransform()], dim=2, lengths=[3])(x)
    stack = T.StackTransform([T.ExpTransform()] * 2, dim=0)
    with pytest.raises(AssertionError):
        tt.StackTransform([tt.ExpTransform()] * 2, dim=0)(tx)
    with pytest.raises(AssertionError, match=r"StackTransform.*\(3,\).*2"):
        stack(x)
    with pytest.raises(AssertionError, match="lengths"):
        T.CatTransform([T.ExpTransform()], lengths=[1, 2])
    with pytest.raises(TypeError, match="CatTransform"):
        T.CatTransform([T.ExpTransform(), "exp"])


def test_a_value_that_is_not_a_tensor_is_a_type_error():
    with pytest.raises(TypeError, match=r"ExpTransform.*list"):
        T.ExpTransform()([1.0, 2.0])


# ---- TransformedDistribution -------------------------------------------------------------


def _normal_pair(loc, scale):
    (lo, tlo), (sc, tsc) = pair(loc), pair(scale)
    return (lo, sc, D.Normal(lo, sc)), (tlo, tsc, td.Normal(tlo, tsc))


def test_lognormal_built_from_exp_equals_lognormal_and_torch():
    (lo, sc, n), (tlo, tsc, tn) = _normal_pair([0.3, -1.0, 0.0], [0.5, 2.0, 1.0])
    d = D.TransformedDistribution(n, T.ExpTransform())
    tdist = td.TransformedDistribution(tn, [tt.ExpTransform()])
    assert d.batch_shape == (3,) and d.event_shape == ()
    v, tv = pair([[0.5, 1.5, 3.0], [0.1, 2.0, 0.7]], grad=False)
    lp, tlp = d.log_prob(v), tdist.log_prob(tv)
    close(lp, tlp)
    close(lp, D.LogNormal(lo, sc).log_prob(v))
    lp.sum().backward()
    tlp.sum().backward()
    close(lo.grad, tlo.grad)
    close(sc.grad, tsc.grad)
    close(d.cdf(v), tdist.cdf(tv))
    p, tp = pair([0.1, 0.5, 0.9], grad=False)
    close(d.icdf(p), tdist.icdf(tp))
    assert d.has_rsample and isinstance(d, D.Distribution)
    assert d.support.check(v).all().item()


def test_rsample_gradients_match_torch_on_the_same_draws():
    (lo, sc, n), (tlo, tsc, tn) = _normal_pair([0.3, -1.0], [0.5, 2.0])
    d = D.TransformedDistribution(n, [T.AffineTransform(1.0, -2.0), T.SigmoidTransform()])
    eps = D.Normal(ta.zeros(2, **F64), 1.0).sample((4,), generator=ta.Generator().manual_seed(3))
    y = d.rsample((4,), generator=ta.Generator().manual_seed(3))
    ty = tt.SigmoidTransform()(tt.AffineTransform(1.0, -2.0)(
        tlo + tsc * torch.tensor(eps.numpy())))
    close(y, ty)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    close(lo.grad, tlo.grad)
    close(sc.grad, tsc.grad)
    s = d.sample((5,))
    assert s.shape == (5, 2) and not s.requires_grad


def test_sigmoid_transformed_normal_matches_torch():
    (lo, sc, n), (tlo, tsc, tn) = _normal_pair([0.3, -1.0, 2.0], [0.5, 2.0, 1.0])
    parts = [T.AffineTransform(0.5, -3.0), T.SigmoidTransform()]
    tparts = [tt.AffineTransform(0.5, -3.0), tt.SigmoidTransform()]
    d, tdist = D.TransformedDistribution(n, parts), td.TransformedDistribution(tn, tparts)
    v, tv = pair([[0.2, 0.5, 0.9], [0.01, 0.7, 0.3]])
    lp, tlp = d.log_prob(v), tdist.log_prob(tv)
    close(lp, tlp)
    lp.sum().backward()
    tlp.sum().backward()
    for got, want in [(lo.grad, tlo.grad), (sc.grad, tsc.grad), (v.grad, tv.grad)]:
        close(got, want)
    # a decreasing affine: cdf and icdf flipped, as torch's
    close(d.cdf(v), tdist.cdf(tv))
    p, tp = pair([0.1, 0.5, 0.8], grad=False)
    close(d.icdf(p), tdist.icdf(tp))
    assert ta.autograd.gradcheck(lambda a, b, x: D.TransformedDistribution(
        D.Normal(a, b), parts).log_prob(x), (lo, sc, v))
    assert ta.autograd.gradgradcheck(lambda a, b, x: D.TransformedDistribution(
        D.Normal(a, b), parts).log_prob(x), (lo, sc, v))


def test_event_changing_transforms_give_torch_shapes_and_log_prob():
    loc, tloc = pair(RNG.normal(size=(2, 3)))
    base, tbase = D.Normal(loc, 1.5), td.Normal(tloc, 1.5)
    d = D.TransformedDistribution(base, T.StickBreakingTransform())
    tdist = td.TransformedDistribution(tbase, tt.StickBreakingTransform())
    assert (d.batch_shape, d.event_shape) == (tuple(tdist.batch_shape),
                                              tuple(tdist.event_shape))
    assert d.batch_shape == (2,) and d.event_shape == (4,)
    v = tdist.sample((3,))
    lp, tlp = d.log_prob(ta.tensor(v.numpy(), **F64)), tdist.log_prob(v)
    close(lp, tlp)
    lp.sum().backward()
    tlp.sum().backward()
    close(loc.grad, tloc.grad)
    r = D.TransformedDistribution(D.Normal(ta.zeros(4, 6, **F64), 1.0),
                                  T.ReshapeTransform((6,), (2, 3)))
    tr = td.TransformedDistribution(td.Normal(torch.zeros(4, 6, dtype=torch.float64), 1.0),
                                    tt.ReshapeTransform((6,), (2, 3)))
    assert (r.batch_shape, r.event_shape) == ((4,), (2, 3)) == (tuple(tr.batch_shape),
                                                                tuple(tr.event_shape))
    v = tr.sample()
    close(r.log_prob(ta.tensor(v.numpy(), **F64)), tr.log_prob(v))


def test_base_broadcast_by_the_transform_and_expand_match_torch():
    scale, tscale = _params(RNG.uniform(0.5, 2.0, size=(2, 3)))
    d = D.TransformedDistribution(D.Normal(ta.zeros(3, **F64), 1.0),
                                  T.AffineTransform(0.0, scale))
    tdist = td.TransformedDistribution(td.Normal(torch.zeros(3, dtype=torch.float64), 1.0),
                                       tt.AffineTransform(0.0, tscale))
    assert d.batch_shape == tuple(tdist.batch_shape) == (2, 3)
    assert d.base_dist.batch_shape == tuple(tdist.base_dist.batch_shape)
    e, te = d.expand((4, 2, 3)), tdist.expand((4, 2, 3))
    assert e.batch_shape == tuple(te.batch_shape) and e.event_shape == tuple(te.event_shape)
    v = te.sample()
    close(e.log_prob(ta.tensor(v.numpy(), **F64)), te.log_prob(v))
    assert e.rsample().shape == (4, 2, 3)


def test_cumulative_distribution_transform_of_a_distribution():
    (lo, sc, n), (tlo, tsc, tn) = _normal_pair([0.3, -1.0], [0.5, 2.0])
    d = D.TransformedDistribution(n, T.CumulativeDistributionTransform(D.Normal(0.0, 1.0)))
    tdist = td.TransformedDistribution(tn, tt.CumulativeDistributionTransform(
        td.Normal(torch.tensor(0.0, dtype=torch.float64), 1.0)))
    v, tv = pair([0.2, 0.7], grad=False)
    close(d.log_prob(v), tdist.log_prob(tv))


def test_transformed_distribution_errors_as_torch():
    n = D.Normal(ta.zeros(3, **F64), 1.0)
    with pytest.raises(ValueError):
        td.TransformedDistribution(td.Normal(0.0, 1.0), ["exp"])
    with pytest.raises(ValueError, match="TransformedDistribution.*Transform"):
        D.TransformedDistribution(n, ["exp"])
    with pytest.raises(ValueError, match="TransformedDistribution.*Transform"):
        D.TransformedDistribution(n, "exp")
    with pytest.raises(ValueError):
        td.TransformedDistribution(td.Normal(torch.tensor(0.0), 1.0),
                                   tt.IndependentTransform(tt.ExpTransform(), 1))
    with pytest.raises(ValueError, match=r"TransformedDistribution.*at least 1.*\(\)"):
        D.TransformedDistribution(D.Normal(ta.tensor(0.0), 1.0),
                                  T.IndependentTransform(T.ExpTransform(), 1))
    d = D.TransformedDistribution(n, T.ExpTransform())
    with pytest.raises(ValueError):
        td.TransformedDistribution(td.Normal(torch.zeros(3), 1.0),
                                   tt.ExpTransform()).log_prob(-torch.ones(3))
    with pytest.raises(ValueError, match="TransformedDistribution.log_prob"):
        d.log_prob(-ta.ones(3, **F64))
    free = D.Normal(ta.zeros(3, **F64), 1.0, validate_args=False)
    assert D.TransformedDistribution(free, T.ExpTransform(), validate_args=False).log_prob(
        -ta.ones(3, **F64)).isnan().all().item()


class _NaturalNormal(D.ExponentialFamily):
    """A Normal told as an exponential family: θ = (μ/σ², -1/2σ²), F = -θ₁²/4θ₂ +
    log(π/-θ₂)/2, E[log h] = 0."""

    _params = ("loc", "scale")

    def __init__(self, loc, scale):
        self._init(False, loc=loc, scale=scale)

    @property
    def _natural_params(self):
        return self.loc / self.scale ** 2, -0.5 / self.scale ** 2

    def _log_normalizer(self, a, b):
        return -0.25 * a * a / b + 0.5 * (-np.pi / b).log()

    @property
    def _mean_carrier_measure(self):
        return 0


def test_exponential_family_entropy_from_the_log_normalizer():
    (lo, tlo), (sc, tsc) = pair([0.3, -1.0, 2.0]), pair([0.5, 2.0, 1.3])
    close(_NaturalNormal(lo, sc).entropy(), td.Normal(tlo, tsc).entropy())
    with pytest.raises(NotImplementedError, match="_natural_params"):
        type("Bare", (D.ExponentialFamily,), {})().entropy()


def test_module_and_names_are_exported():
    import tinyattn.distributions.transforms as mod

    assert mod is T and ta.distributions.transforms is T
    for name in tt.__all__:
        assert hasattr(T, name), name
    for name in ["TransformedDistribution", "Distribution", "ExponentialFamily"]:
        assert name in D.__all__ and hasattr(D, name)
    assert isinstance(D.Uniform(0.0, 1.0), D.Distribution)


def test_every_distribution_is_a_distribution_as_torchs():
    made = [D.Normal(0.0, 1.0), D.Categorical(logits=ta.zeros(3)), D.Bernoulli(0.3),
            D.Gamma(2.0, 1.0), D.Independent(D.Normal(ta.zeros(2), 1.0), 1)]
    for d in made:
        assert isinstance(d, D.Distribution), type(d).__name__
    assert D.Normal(0.0, 1.0).perplexity().item() == pytest.approx(
        torch.distributions.Normal(0.0, 1.0).perplexity().item())


def test_a_moment_a_distribution_lacks_is_not_implemented_as_torchs():
    d = D.RelaxedBernoulli(ta.tensor(0.5), probs=ta.tensor(0.3))
    for name in ("mean", "variance", "mode", "stddev"):
        with pytest.raises(NotImplementedError, match="RelaxedBernoulli has no"):
            getattr(d, name)
