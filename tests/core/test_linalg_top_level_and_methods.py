"""torch's older top-level linear-algebra functions (ta.svd, ta.qr, ta.lu, ta.lu_unpack,
ta.triangular_solve, ...), the linalg names added with them (lu_factor_ex, householder_product,
ldl_factor, ldl_factor_ex, ldl_solve, matmul) and the Tensor methods torch has for them and for
routines_more.py's functions (x.svd(), x.cov(), x.ldexp_(), x.sum_to_size(), ...), against
torch: values, named-tuple fields, gradients (with gradcheck and gradgradcheck), in-place
versions and leaf refusals, and the errors for bad shapes.
"""

import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import GraphError, ShapeError

torch = pytest.importorskip("torch")

TORCH_DTYPES = {np.dtype(n): getattr(torch, n) for n in (
    "float16", "float32", "float64", "int32", "int64", "bool", "uint8")}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # torch's deprecation notes for torch.qr, torch.lu, ...
        warnings.simplefilter("ignore", UserWarning)
        yield


def tt(values, dtype=np.float64, requires_grad=False):
    a = np.asarray(values, dtype=dtype)
    return (ta.tensor(a.copy(), requires_grad=requires_grad),
            torch.tensor(a.copy(), requires_grad=requires_grad))


def rand(*shape, seed=0, requires_grad=True):
    return tt(np.random.default_rng(seed).standard_normal(shape), requires_grad=requires_grad)


def spd(n, seed=0, batch=()):
    a = np.random.default_rng(seed).standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def same(got, want, rtol=1e-9, atol=1e-11):
    want = want.detach()
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    assert TORCH_DTYPES[np.dtype(got.dtype)] == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.detach().numpy().astype(np.float64),
                               want.numpy().astype(np.float64), rtol=rtol, atol=atol)


def grads_match(fn_ta, fn_torch, xs, ts, seed=1, rtol=1e-8, atol=1e-10):
    """fn(*inputs) (one tensor out) forward and backward with a random cotangent, vs torch."""
    out, want = fn_ta(*xs), fn_torch(*ts)
    same(out, want, rtol, atol)
    g = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    out.backward(ta.tensor(g.astype(out.dtype)))
    want.backward(torch.tensor(g, dtype=want.dtype))
    for x, t in zip(xs, ts, strict=True):
        if t.requires_grad:
            same(x.grad, t.grad, rtol, atol)


def fields(got, want):
    assert type(got).__name__ == type(want).__name__
    assert tuple(got._fields) == tuple(type(want)._fields if hasattr(type(want), "_fields")
                                       else type(want).__match_args__)


# ---- top level: svd, pinverse, qr, matrix_exp, cholesky ---------------------------------------


@pytest.mark.parametrize("shape,some", [((4, 3), True), ((3, 5), True), ((4, 3), False),
                                        ((2, 3, 3), True)])
def test_svd_is_torch_svd_with_v(shape, some):
    x, t = rand(*shape, requires_grad=False)
    got, want = ta.svd(x, some=some), torch.svd(t, some=some)
    fields(got, want)
    assert got._fields == ("U", "S", "V")
    same(got.S, want.S)
    k = min(shape[-2:])
    for a, b in ((got.U, want.U), (got.V, want.V)):  # up to each singular vector's sign
        assert tuple(a.shape) == tuple(b.shape)
        signs = np.sign(np.sum(a.numpy()[..., :k] * b.numpy()[..., :k], axis=-2))
        np.testing.assert_allclose(a.numpy()[..., :k] * signs[..., None, :],
                                   b.numpy()[..., :k], atol=1e-10)
    rebuilt = (got.U[..., :k] * got.S.unsqueeze(-2)) @ got.V[..., :k].mT
    np.testing.assert_allclose(rebuilt.numpy(), x.numpy(), atol=1e-10)


def test_svd_without_uv_gives_zeros_and_singular_value_gradients():
    x, t = rand(2, 4, 3)
    got, want = ta.svd(x, compute_uv=False), torch.svd(t, compute_uv=False)
    same(got.U, want.U)
    same(got.V, want.V)
    grads_match(lambda a: ta.svd(a, compute_uv=False).S, lambda a: torch.svd(
        a, compute_uv=False).S, [x], [t])


def test_svd_gradient_of_a_sign_free_function():
    x, t = rand(4, 3)

    def f_ta(a):
        u, s, v = ta.svd(a)
        return (u * s.unsqueeze(-2)) @ v.mT + (u @ u.mT) @ a.sin() + (v * v).sum(-1)

    def f_torch(a):
        u, s, v = torch.svd(a)
        return (u * s.unsqueeze(-2)) @ v.mT + (u @ u.mT) @ a.sin() + (v * v).sum(-1)

    grads_match(f_ta, f_torch, [x], [t])
    a = ta.tensor(x.numpy(), requires_grad=True)
    assert ta.autograd.gradcheck(lambda m: ta.svd(m).S, (a,))
    assert ta.autograd.gradgradcheck(lambda m: ta.svd(m).S, (a,))


@pytest.mark.parametrize("rcond", [1e-15, 1e-1])
def test_pinverse(rcond):
    x, t = rand(4, 3)
    grads_match(lambda a: ta.pinverse(a, rcond=rcond), lambda a: torch.pinverse(a, rcond=rcond),
                [x], [t])
    same(x.detach().pinverse(rcond), t.detach().pinverse(rcond))
    assert ta.autograd.gradcheck(lambda a: ta.pinverse(a), (ta.tensor(x.numpy(),
                                                                      requires_grad=True),))


@pytest.mark.parametrize("shape,some", [((5, 3), True), ((3, 3), False), ((2, 4, 3), True)])
def test_qr(shape, some):
    x, t = rand(*shape)
    got, want = ta.qr(x, some=some), torch.qr(t, some=some)
    fields(got, want)
    same(got.Q, want.Q)
    same(got.R, want.R)
    grads_match(lambda a: ta.qr(a, some=some).Q.sum(-2) + ta.qr(a, some=some).R.sum(-2),
                lambda a: torch.qr(a, some=some).Q.sum(-2) + torch.qr(a, some=some).R.sum(-2),
                [x], [t])
    xm = x.detach()
    same(xm.qr(some).R, t.detach().qr(some).R)


def test_matrix_exp_and_cholesky_top_level_and_methods():
    x, t = rand(3, 3)
    grads_match(ta.matrix_exp, torch.matrix_exp, [x], [t])
    same(x.detach().matrix_exp(), t.detach().matrix_exp())
    a, b = tt(spd(3), requires_grad=True)
    for upper in (False, True):
        a.grad, b.grad = None, None
        grads_match(lambda m, u=upper: ta.cholesky(m, upper=u),
                    lambda m, u=upper: torch.cholesky(m, upper=u), [a], [b])
        same(a.detach().cholesky(upper=upper), b.detach().cholesky(upper=upper))
    c = ta.tensor(spd(3), requires_grad=True)
    assert ta.autograd.gradcheck(lambda m: ta.cholesky((m + m.mT) / 2), (c,))


# ---- LU: lu, lu_solve, lu_unpack, linalg.lu_factor_ex -----------------------------------------


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (4, 3), (3, 5)])
def test_lu_and_lu_unpack(shape):
    x, t = rand(*shape)
    lu_ta, piv_ta = ta.lu(x)
    lu_t, piv_t = torch.lu(t)
    assert type(ta.lu(x)) is tuple
    same(lu_ta, lu_t)
    same(piv_ta, piv_t)
    got, want = ta.lu(x, get_infos=True), torch.lu(t, get_infos=True)
    fields(got, want)
    same(got.info, want.info)
    unpacked, want_u = ta.lu_unpack(lu_ta, piv_ta), torch.lu_unpack(lu_t, piv_t)
    fields(unpacked, want_u)
    for name in ("P", "L", "U"):
        same(getattr(unpacked, name), getattr(want_u, name))
    grads_match(lambda a: ta.lu_unpack(*ta.lu(a)).L.sum(-1) + ta.lu_unpack(*ta.lu(a)).U.sum(-1)[
        ..., :1], lambda a: torch.lu_unpack(*torch.lu(a)).L.sum(-1) + torch.lu_unpack(
        *torch.lu(a)).U.sum(-1)[..., :1], [x], [t])
    same(x.detach().lu()[0], t.detach().lu()[0])


def test_lu_unpack_flags_give_empty_tensors():
    x, t = rand(3, 3, requires_grad=False)
    for flags in ({"unpack_data": False}, {"unpack_pivots": False}):
        got, want = ta.lu_unpack(*ta.lu(x), **flags), torch.lu_unpack(*torch.lu(t), **flags)
        for name in ("P", "L", "U"):
            same(getattr(got, name), getattr(want, name))
    with pytest.raises(ShapeError, match=r"lu_unpack.*\(3, 3\).*\(2,\)"):
        ta.lu_unpack(x, ta.tensor([1, 2], dtype=ta.int32))


def test_lu_factor_ex_reports_a_zero_pivot():
    x, t = tt([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    got, want = ta.linalg.lu_factor_ex(x), torch.linalg.lu_factor_ex(t)
    fields(got, want)
    for name in ("LU", "pivots", "info"):
        same(getattr(got, name), getattr(want, name))
    xb, tb = tt(np.stack([np.eye(3), np.zeros((3, 3))]))
    same(ta.linalg.lu_factor_ex(xb).info, torch.linalg.lu_factor_ex(tb).info)
    with pytest.raises(ta.linalg.LinAlgError, match="lu_factor_ex"):
        ta.linalg.lu_factor_ex(x, check_errors=True)
    y, s = rand(3, 3)
    grads_match(lambda a: ta.linalg.lu_factor_ex(a).LU, lambda a: torch.linalg.lu_factor_ex(
        a).LU, [y], [s])


def test_lu_solve_top_level_and_method():
    a, ta_ = rand(2, 3, 3, seed=3)
    b, tb = rand(2, 3, 2, seed=4)
    lu_ta, piv = ta.lu(a.detach())
    lu_t, piv_t = torch.lu(ta_.detach())
    lu_ta, lu_t = ta.tensor(lu_ta.numpy(), requires_grad=True), lu_t.requires_grad_()
    grads_match(lambda bb, m: ta.lu_solve(bb, m, piv), lambda bb, m: torch.lu_solve(bb, m, piv_t),
                [b, lu_ta], [tb, lu_t])
    same(b.detach().lu_solve(lu_ta.detach(), piv), tb.detach().lu_solve(lu_t.detach(), piv_t))


# ---- triangular_solve ---------------------------------------------------------------------------


@pytest.mark.parametrize("upper,transpose,unit", [(True, False, False), (False, False, True),
                                                  (True, True, False), (False, True, False)])
def test_triangular_solve(upper, transpose, unit):
    a_np = np.random.default_rng(5).standard_normal((2, 3, 3)) + 3 * np.eye(3)
    a, ta_ = tt(a_np, requires_grad=True)
    b, tb = rand(3, 2, seed=6)
    kw = {"upper": upper, "transpose": transpose, "unitriangular": unit}
    got, want = ta.triangular_solve(b, a, **kw), torch.triangular_solve(tb, ta_, **kw)
    fields(got, want)
    assert got._fields == ("solution", "cloned_coefficient")
    same(got.cloned_coefficient, want.cloned_coefficient)
    grads_match(lambda bb, aa: ta.triangular_solve(bb, aa, **kw).solution * 2
                + ta.triangular_solve(bb, aa, **kw).cloned_coefficient.sum(),
                lambda bb, aa: torch.triangular_solve(bb, aa, **kw).solution * 2
                + torch.triangular_solve(bb, aa, **kw).cloned_coefficient.sum(),
                [b, a], [tb, ta_])
    same(b.detach().triangular_solve(a.detach(), **kw).solution,
         tb.detach().triangular_solve(ta_.detach(), **kw).solution)
    aa = ta.tensor(a_np[0], requires_grad=True)
    bb = ta.tensor(b.numpy(), requires_grad=True)
    assert ta.autograd.gradcheck(lambda p, q: ta.triangular_solve(p, q, **kw).solution, (bb, aa))
    assert ta.autograd.gradgradcheck(lambda p, q: ta.triangular_solve(p, q, **kw).solution,
                                     (bb, aa))


def test_triangular_solve_bad_shapes():
    with pytest.raises(ShapeError, match=r"triangular_solve.*\(3, 2\)"):
        ta.triangular_solve(ta.ones(3, 2), ta.ones(3, 2))
    with pytest.raises(ShapeError, match=r"triangular_solve.*\(4, 1\)"):
        ta.triangular_solve(ta.ones(4, 1), ta.eye(3))
    with pytest.raises(RuntimeError):
        torch.triangular_solve(torch.ones(4, 1), torch.eye(3))


# ---- vdot, nuclear_norm, frobenius_norm, pdist, linalg.matmul -----------------------------------


def test_vdot():
    x, t = rand(5)
    y, s = rand(5, seed=1)
    grads_match(ta.vdot, torch.vdot, [x, y], [t, s])
    same(x.detach().vdot(y.detach()), t.detach().vdot(s.detach()))
    with pytest.raises(ShapeError, match=r"vdot.*\(5,\).*\(4,\)"):
        ta.vdot(ta.ones(5), ta.ones(4))
    with pytest.raises(ShapeError, match=r"vdot.*1D"):
        ta.vdot(ta.ones(2, 2), ta.ones(2, 2))
    with pytest.raises(RuntimeError):
        torch.vdot(torch.ones(5), torch.ones(4))


def test_nuclear_and_frobenius_norms():
    x, t = rand(2, 4, 3)
    grads_match(lambda a: ta.nuclear_norm(a[0]), lambda a: torch.nuclear_norm(a[0]), [x], [t])
    x.grad, t.grad = None, None
    grads_match(lambda a: ta.nuclear_norm(a, (1, 2), keepdim=True),
                lambda a: torch.nuclear_norm(a, (1, 2), keepdim=True), [x], [t])
    x.grad, t.grad = None, None
    grads_match(lambda a: ta.frobenius_norm(a, (0, 2)), lambda a: torch.frobenius_norm(a, (0, 2)),
                [x], [t])
    x.grad, t.grad = None, None
    grads_match(lambda a: ta.frobenius_norm(a, 1, True), lambda a: torch.frobenius_norm(
        a, 1, True), [x], [t])
    same(ta.nuclear_norm(x[0], True), torch.nuclear_norm(t[0], True))
    with pytest.raises(ShapeError, match=r"nuclear_norm.*\(2, 4, 3\)"):
        ta.nuclear_norm(x)
    a = ta.tensor(x.numpy()[0], requires_grad=True)
    assert ta.autograd.gradcheck(ta.nuclear_norm, (a,))


def test_pdist_and_linalg_matmul():
    x, t = rand(4, 3)
    grads_match(ta.pdist, torch.pdist, [x], [t])
    a, b = rand(2, 3, 4)
    c, d = rand(4, 2, seed=2)
    grads_match(ta.linalg.matmul, torch.linalg.matmul, [a, c], [b, d])


# ---- linalg.householder_product and the LDL names -----------------------------------------------


@pytest.mark.parametrize("shape,k", [((5, 3), 2), ((4, 4), 4), ((2, 4, 3), 3)])
def test_householder_product(shape, k):
    a, ta_ = rand(*shape)
    tau, ttau = rand(*shape[:-2], k, seed=1)
    grads_match(ta.linalg.householder_product, torch.linalg.householder_product, [a, tau],
                [ta_, ttau])
    p = ta.tensor(a.numpy(), requires_grad=True)
    q = ta.tensor(tau.numpy(), requires_grad=True)
    assert ta.autograd.gradcheck(ta.linalg.householder_product, (p, q))
    assert ta.autograd.gradgradcheck(ta.linalg.householder_product, (p, q))


def test_householder_product_bad_shapes():
    with pytest.raises(ShapeError, match=r"householder_product.*\(3, 4\)"):
        ta.linalg.householder_product(ta.ones(3, 4), ta.ones(2))
    with pytest.raises(ShapeError, match=r"householder_product.*\(4,\)"):
        ta.linalg.householder_product(ta.ones(4, 3), ta.ones(4))
    with pytest.raises(RuntimeError):
        torch.linalg.householder_product(torch.ones(4, 3), torch.ones(4))


def _symmetric(n, seed, batch=()):
    a = np.random.default_rng(seed).standard_normal(batch + (n, n))
    return a + np.swapaxes(a, -1, -2)


@pytest.mark.parametrize("n,seed", [(4, 0), (5, 1), (6, 2), (3, 7)])
def test_ldl_factor_matches_lapack(n, seed):
    a, t = tt(_symmetric(n, seed, (2,)))
    got, want = ta.linalg.ldl_factor(a), torch.linalg.ldl_factor(t)
    fields(got, want)
    same(got.LD, want.LD)
    same(got.pivots, want.pivots)
    ex, want_ex = ta.linalg.ldl_factor_ex(a), torch.linalg.ldl_factor_ex(t)
    fields(ex, want_ex)
    same(ex.info, want_ex.info)
    b, tb = rand(2, n, 3, seed=seed + 10, requires_grad=False)
    same(ta.linalg.ldl_solve(got.LD, got.pivots, b), torch.linalg.ldl_solve(want.LD, want.pivots,
                                                                           tb))


def test_ldl_cases_cover_both_pivot_kinds():
    pivots = ta.linalg.ldl_factor(ta.tensor(_symmetric(4, 0, (2,)))).pivots.numpy()
    assert (pivots[1] < 0).any()  # a 2×2 block
    assert (pivots[0] > 0).all() and (pivots[0] != np.arange(1, 5)).any()  # 1×1 swaps


def test_ldl_factor_reports_a_zero_block():
    a, t = tt(np.zeros((3, 3)))
    same(ta.linalg.ldl_factor_ex(a).info, torch.linalg.ldl_factor_ex(t).info)
    with pytest.raises(ShapeError, match=r"ldl_factor.*\(3, 2\)"):
        ta.linalg.ldl_factor(ta.ones(3, 2))


# ---- Tensor methods backed by routines_more.py --------------------------------------------------


def test_cholesky_solve_and_inverse_methods():
    low = np.linalg.cholesky(spd(3, seed=2))
    f, tf = tt(low, requires_grad=True)
    b, tb = rand(3, 2, seed=3)
    grads_match(lambda x, y: x.cholesky_solve(y), lambda x, y: x.cholesky_solve(y), [b, f],
                [tb, tf])
    f.grad, tf.grad = None, None
    grads_match(lambda y: y.cholesky_inverse(), lambda y: y.cholesky_inverse(), [f], [tf])
    same(f.detach().mT.cholesky_inverse(upper=True), tf.detach().mT.cholesky_inverse(upper=True))


def test_cov_corrcoef_methods():
    x, t = rand(3, 6)
    w, tw = tt([1, 2, 1, 3, 1, 2], dtype=np.int64)
    grads_match(lambda a: a.cov(correction=0, fweights=w), lambda a: a.cov(
        correction=0, fweights=tw), [x], [t])
    x.grad, t.grad = None, None
    grads_match(lambda a: a.corrcoef(), lambda a: a.corrcoef(), [x], [t])


def test_frexp_ldexp_nextafter_methods():
    x, t = tt([0.3, -5.0, 1e-310, 8.0])
    got, want = x.frexp(), t.frexp()
    fields(got, want)
    same(got.mantissa, want.mantissa)
    same(got.exponent, want.exponent)
    e, te = tt([1, -2, 3, 0], dtype=np.int64)
    same(x.ldexp(e), t.ldexp(te))
    y, s = tt([1.0, -10.0, 0.0, 8.0])
    same(x.nextafter(y), t.nextafter(s))
    v0 = x._version
    assert x.nextafter_(y) is x and x._version > v0
    t.nextafter_(s)
    same(x, t)
    x2, t2 = rand(4, requires_grad=True)
    e2, te2 = tt([1, 2, 3, 0], dtype=np.int64)  # (torch's gradient is 0 for a negative one)
    grads_match(lambda a: a.ldexp(e2), lambda a: a.ldexp(te2), [x2], [t2])


def _in_place_case(name, args_ta, args_torch, values):
    """x.name(*args) in place: torch's values, a version bump, and a leaf refused."""
    x, t = tt(values)
    v0 = x._version
    assert getattr(x, name)(*args_ta) is x
    assert x._version > v0
    getattr(t, name)(*args_torch)
    same(x, t)
    leaf = ta.tensor(values, requires_grad=True)
    with pytest.raises(GraphError, match=name):
        getattr(leaf, name)(*args_ta)
    with pytest.raises(RuntimeError):
        getattr(torch.tensor(values, requires_grad=True), name)(*args_torch)


def test_in_place_methods():
    vals = [[0.6, 1.5, 2.5], [3.0, 0.7, 1.2]]
    o, to = tt([[1.0, 2.0, 0.5], [0.3, 1.0, 2.0]])
    _in_place_case("ldexp_", (o,), (to,), vals)
    _in_place_case("igamma_", (o,), (to,), vals)
    _in_place_case("igammac_", (o,), (to,), vals)
    _in_place_case("mvlgamma_", (2,), (2,), vals)
    _in_place_case("renorm_", (2, 0, 1.5), (2, 0, 1.5), vals)
    _in_place_case("nextafter_", (o,), (to,), vals)
    _in_place_case("logit_", (), (), [[0.2, 0.7], [0.5, 0.9]])
    _in_place_case("logit_", (0.25,), (0.25,), [[0.2, 0.7], [0.5, 0.9]])


def test_in_place_method_recorded_on_a_non_leaf():
    x, t = rand(2, 3)
    y, s = x * x + 2.0, t * t + 2.0
    o, to = tt([[1.0, 2.0, 0.5], [0.3, 1.0, 2.0]])
    grads_match(lambda a: (a * 1.0 + 2.0).renorm_(2, 1, 2.0), lambda a: (a * 1.0 + 2.0).renorm_(
        2, 1, 2.0), [x], [t])
    same(y.mvlgamma_(1), s.mvlgamma_(1))
    same(y.igamma_(o), s.igamma_(to))


def test_mvlgamma_igamma_renorm_methods():
    x, t = tt([[1.5, 2.5, 3.0], [4.0, 2.2, 1.7]], requires_grad=True)
    grads_match(lambda a: a.mvlgamma(p=2), lambda a: a.mvlgamma(p=2), [x], [t])
    o, to = tt([[1.0, 2.0, 0.5], [0.3, 1.0, 2.0]])
    same(x.igamma(o), t.igamma(to))
    same(x.igammac(other=o), t.igammac(other=to))
    x.grad, t.grad = None, None
    grads_match(lambda a: a.renorm(p=1, dim=1, maxnorm=3.0), lambda a: a.renorm(
        p=1, dim=1, maxnorm=3.0), [x], [t])


def test_split_methods():
    x, t = rand(6, 4)
    for name, args in (("split_with_sizes", ([1, 3, 2],)), ("unsafe_chunk", (3,)),
                       ("unsafe_split", (4,)), ("unsafe_split_with_sizes", ([2, 2], 1))):
        got, want = getattr(x, name)(*args), getattr(t, name)(*args)
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            same(a, b)
    got = x.split_with_sizes(split_sizes=[1, 3], dim=1)
    same(got[1], t.split_with_sizes(split_sizes=[1, 3], dim=1)[1])
    with pytest.raises(ValueError, match=r"split_with_sizes.*\(6, 4\)"):
        x.split_with_sizes([1, 2])


def test_predicates_and_absolute():
    x, t = tt([[-1.0, 2.0]])
    same(x.absolute(), t.absolute())
    assert x.is_same_size(ta.ones(1, 2)) and not x.is_same_size(ta.ones(2, 1))
    assert x.is_signed() == t.is_signed()
    assert ta.ones(2, dtype=ta.uint8).is_signed() is torch.ones(2, dtype=torch.uint8).is_signed()
    assert x.is_neg() is t.is_neg() is False
    assert x.resolve_neg() is x


# ---- Tensor methods made of ops (tensor.py) -----------------------------------------------------


@pytest.mark.parametrize("shape,size", [((2, 3, 4), (3, 1)), ((2, 3, 4), (1, 3, 4)),
                                        ((3, 4), (4,)), ((3, 4), (1, 1)), ((3,), (3,))])
def test_sum_to_size(shape, size):
    x, t = rand(*shape)
    grads_match(lambda a: a.sum_to_size(*size), lambda a: a.sum_to_size(*size), [x], [t])
    same(x.sum_to_size(size), t.sum_to_size(size))


def test_sum_to_size_bad_size():
    with pytest.raises(ShapeError, match=r"sum_to_size.*\(2, 3\).*\(2,\)"):
        ta.ones(2, 3).sum_to_size(2)
    with pytest.raises(RuntimeError):
        torch.ones(2, 3).sum_to_size(2)


@pytest.mark.parametrize("name", ["swapaxes_", "swapdims_"])
def test_swap_in_place(name):
    x, t = rand(2, 3, 4, requires_grad=False)
    v0 = x._version
    assert getattr(x, name)(0, 2) is x and x._version > v0
    getattr(t, name)(0, 2)
    same(x, t)
    leaf = ta.ones(2, 3, requires_grad=True)
    with pytest.raises(GraphError, match=name):
        getattr(leaf, name)(0, 1)
    a, b = rand(2, 3)
    grads_match(lambda m: getattr(m * 2.0, name)(0, 1), lambda m: getattr(m * 2.0, name)(0, 1),
                [a], [b])


def test_logit_in_place_gradient():
    x, t = tt([[0.2, 0.7], [0.5, 0.9]], requires_grad=True)
    grads_match(lambda a: (a * 1.0).logit_(0.3), lambda a: (a * 1.0).logit_(0.3), [x], [t])


_SPD_LOW = np.linalg.cholesky(spd(3, seed=4))
_GRADCHECKED = {  # name: (function, input arrays); first and second order
    "qr": (lambda a: ta.qr(a).Q + ta.qr(a).R.sum(), [(4, 3)]),
    "matrix_exp": (ta.matrix_exp, [(3, 3)]),
    "lu_unpack": (lambda a: ta.lu_unpack(*ta.lu(a)).L @ ta.lu_unpack(*ta.lu(a)).U, [(3, 3)]),
    "lu_factor_ex": (lambda a: ta.linalg.lu_factor_ex(a).LU, [(4, 3)]),
    "lu_solve": (lambda b, a: ta.lu_solve(b, *ta.lu(a)), [(3, 2), (3, 3)]),
    "vdot": (ta.vdot, [(4,), (4,)]),
    "frobenius_norm": (lambda a: ta.frobenius_norm(a, (0, 1)), [(3, 2)]),
    "pdist": (ta.pdist, [(4, 3)]),
    "linalg.matmul": (ta.linalg.matmul, [(2, 3), (3, 2)]),
    "cholesky_solve": (lambda b: b.cholesky_solve(ta.tensor(_SPD_LOW)), [(3, 2)]),
    "cholesky_inverse": (lambda f: (f.tril() + ta.tensor(3 * np.eye(3))).cholesky_inverse(),
                         [(3, 3)]),
    "cov": (lambda a: a.cov(), [(2, 5)]),
    "corrcoef": (lambda a: a.corrcoef(), [(3, 5)]),
    "ldexp": (lambda a: a.ldexp(ta.tensor([1, -1, 2])), [(3,)]),
    "mvlgamma": (lambda a: (a * a + 2.0).mvlgamma(2), [(3,)]),
    "renorm": (lambda a: a.renorm(2, 0, 1.0), [(3, 2)]),
    "sum_to_size": (lambda a: a.sum_to_size(1, 3), [(2, 4, 3)]),
    "swapaxes_": (lambda a: (a * 1.0).swapaxes_(0, 1), [(2, 3)]),
    "logit_": (lambda a: (a.sigmoid() * 0.8 + 0.1).logit_(), [(2, 3)]),
}


@pytest.mark.parametrize("name", sorted(_GRADCHECKED))
def test_gradcheck_and_gradgradcheck(name):
    fn, shapes = _GRADCHECKED[name]
    rng = np.random.default_rng(7)
    xs = tuple(ta.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes)
    assert ta.autograd.gradcheck(fn, xs)
    assert ta.autograd.gradgradcheck(fn, xs)


def test_resize_as_():
    x, t = rand(2, 3, requires_grad=False)
    v0 = x._version
    assert x.resize_as_(ta.ones(3, 2)) is x and x._version > v0
    t.resize_as_(torch.ones(3, 2))
    same(x, t)
    x.resize_as_(ta.ones(2))
    t.resize_as_(torch.ones(2))
    same(x, t)
    with pytest.raises(GraphError, match="resize"):
        ta.ones(2, requires_grad=True).resize_as_(ta.ones(4))
