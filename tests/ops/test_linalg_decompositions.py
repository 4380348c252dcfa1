"""tinyattn.linalg's decompositions and composites (linalg_decompositions.py, linalg_extras.py,
and cond, *_ex and the spectral norms in linalg.py) against torch: values in float64 and
float32 (sign conventions compared through invariants), gradients of gauge-invariant losses in
float64, batched, empty and 1x1 inputs, tinyattn's gradcheck and gradgradcheck, and errors."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import LinAlgError, ShapeError

torch = pytest.importorskip("torch")
L, TL = ta.linalg, torch.linalg
RNG = np.random.default_rng(0)


def pair(a):
    a = np.asarray(a, dtype=np.float64)
    return ta.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def close(a, b, tol=1e-9):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def grads_match(f_ta, f_torch, *arrays, tol=1e-8):
    """The same loss's value and input gradients in tinyattn and torch (float64)."""
    pairs = [pair(a) for a in arrays]
    out, want = f_ta(*[p[0] for p in pairs]), f_torch(*[p[1] for p in pairs])
    close(out, want, tol)
    out.backward()
    want.backward()
    for x, xt in pairs:
        close(x.grad, xt.grad, tol)


SHAPES = [(4, 3), (3, 5), (2, 4, 4), (2, 1, 3, 2)]


def _sym(shape):
    a = RNG.standard_normal(shape)
    return a + np.swapaxes(a, -1, -2)


def _weights(shape):
    return np.arange(np.prod(shape), dtype=np.float64).reshape(shape) / 7 + 1


# ---- svd ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_svd_reconstructs_and_matches_torch_up_to_sign(shape, full, dtype):
    a = RNG.standard_normal(shape).astype(dtype)
    u, s, vh = L.svd(ta.tensor(a), full_matrices=full)
    ut, st, vht = TL.svd(torch.tensor(a), full_matrices=full)
    assert u.shape == tuple(ut.shape) and s.shape == tuple(st.shape)
    assert vh.shape == tuple(vht.shape) and u.dtype == ta.tensor(a).dtype
    tol = 1e-10 if dtype == np.float64 else 1e-4
    close(s, st, tol)
    k = s.shape[-1]
    close((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], a, tol)
    close(u[..., :k].abs(), ut[..., :k].abs(), tol * 10)
    close(vh[..., :k, :].abs(), vht[..., :k, :].abs(), tol * 10)


@pytest.mark.parametrize("shape", SHAPES)
def test_svd_gradients_of_gauge_invariant_losses_match_torch(shape):
    a = RNG.standard_normal(shape)
    k = min(shape[-2:])
    w = _weights(shape[:-1] + (k,))
    grads_match(lambda x: L.svd(x, full_matrices=False).S.sum(),
                lambda x: TL.svd(x, full_matrices=False).S.sum(), a)
    grads_match(lambda x: (L.svd(x, full_matrices=False).U ** 2 * ta.tensor(w)).sum(),
                lambda x: (TL.svd(x, full_matrices=False).U ** 2 * torch.tensor(w)).sum(), a)

    def recon(m, svd):
        u, s, vh = svd(m, full_matrices=True)
        part = ((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :]) ** 2
        return part.sum() + (vh[..., :k, :] ** 4).sum()  # (the rows past k: any basis)

    grads_match(lambda x: recon(x, L.svd), lambda x: recon(x, TL.svd), a)
    grads_match(lambda x: (L.svdvals(x) ** 3).sum(), lambda x: (TL.svdvals(x) ** 3).sum(), a)


def test_svdvals_gradient_is_finite_at_repeated_singular_values():
    x = ta.tensor(np.eye(3), requires_grad=True)
    L.svdvals(x).sum().backward()
    close(x.grad, np.eye(3))


def test_svd_empty_and_1x1():
    u, s, vh = L.svd(ta.zeros(2, 0, 3, dtype=ta.float64))
    assert (u.shape, s.shape, vh.shape) == ((2, 0, 0), (2, 0), (2, 3, 3))
    x = ta.tensor([[-2.0]], requires_grad=True)
    u, s, vh = L.svd(x)
    close(s, [2.0])
    s.sum().backward()
    close(x.grad, [[-1.0]])


# ---- eigh ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1)])
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_eigh_values_and_vectors_match_torch(shape, uplo, dtype):
    a = RNG.standard_normal(shape).astype(dtype)  # (not symmetric: one triangle is read)
    lam, v = L.eigh(ta.tensor(a), UPLO=uplo)
    lt, vt = TL.eigh(torch.tensor(a), UPLO=uplo)
    tol = 1e-10 if dtype == np.float64 else 1e-4
    close(lam, lt, tol)
    close(v.abs(), vt.abs(), tol * 10)
    close(L.eigvalsh(ta.tensor(a), UPLO=uplo), TL.eigvalsh(torch.tensor(a), UPLO=uplo), tol)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_eigh_gradients_match_torch(shape):
    a = _sym(shape)
    w = _weights(shape)
    grads_match(lambda x: (L.eigh(x).eigenvectors ** 2 * ta.tensor(w)).sum()
                + L.eigh(x).eigenvalues.pow(3).sum(),
                lambda x: (TL.eigh(x).eigenvectors ** 2 * torch.tensor(w)).sum()
                + TL.eigh(x).eigenvalues.pow(3).sum(), a)
    grads_match(lambda x: (L.eigvalsh(x, "U") ** 3).sum(),
                lambda x: (TL.eigvalsh(x, "U") ** 3).sum(), a)


def test_eigh_refuses_non_square_and_bad_uplo_by_name():
    with pytest.raises(ShapeError, match=r"linalg.eigh: .*square.*\(5, 3\)"):
        L.eigh(ta.randn(5, 3))
    with pytest.raises(ValueError, match="UPLO"):
        L.eigvalsh(ta.randn(3, 3), UPLO="X")
    with pytest.raises(TypeError, match="linalg.eigh"):
        L.eigh(ta.ones(2, 2, dtype=ta.int64))


# ---- qr, lu -------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_torch(shape, mode):
    a = RNG.standard_normal(shape)
    q, r = L.qr(ta.tensor(a), mode=mode)
    qt, rt = TL.qr(torch.tensor(a), mode=mode)
    assert q.shape == tuple(qt.shape) and r.shape == tuple(rt.shape)
    close(r, rt)
    if mode != "r":
        close(q, qt)
        close(q @ r, a)


@pytest.mark.parametrize("shape", SHAPES)
def test_qr_gradients_match_torch(shape):
    a = RNG.standard_normal(shape)
    grads_match(lambda x: (L.qr(x).Q ** 3).sum() + (L.qr(x).R ** 3).sum(),
                lambda x: (TL.qr(x).Q ** 3).sum() + (TL.qr(x).R ** 3).sum(), a)


def test_qr_backward_refused_as_torch():
    x = ta.randn(4, 3, dtype=ta.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="mode='r'"):
        L.qr(x, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        L.qr(x, mode="complete").Q.sum().backward()
    with pytest.raises(ValueError, match="unrecognized mode"):
        L.qr(x, mode="full")


@pytest.mark.parametrize("shape", SHAPES)
def test_lu_and_lu_factor_match_torch(shape):
    a = RNG.standard_normal(shape)
    for got, want in zip(L.lu(ta.tensor(a)), TL.lu(torch.tensor(a)), strict=True):
        close(got, want)
    lu, piv = L.lu_factor(ta.tensor(a))
    lut, pivt = TL.lu_factor(torch.tensor(a))
    close(lu, lut)
    assert piv.dtype == ta.int32
    np.testing.assert_array_equal(piv.numpy(), pivt.numpy())
    grads_match(lambda x: (L.lu(x).L ** 3).sum() + (L.lu(x).U ** 3).sum(),
                lambda x: (TL.lu(x).L ** 3).sum() + (TL.lu(x).U ** 3).sum(), a)
    grads_match(lambda x: (L.lu_factor(x).LU ** 3).sum(),
                lambda x: (TL.lu_factor(x).LU ** 3).sum(), a)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_matches_torch(left, adjoint):
    a = RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    b = RNG.standard_normal((2, 3, 2) if left else (2, 2, 3))

    def f(m, x, y):
        lu, piv = m.linalg.lu_factor(x)
        return (m.linalg.lu_solve(lu, piv, y, left=left, adjoint=adjoint) ** 2).sum()

    grads_match(lambda x, y: f(ta, x, y), lambda x, y: f(torch, x, y), a, b)


# ---- matrix_exp, pinv, lstsq, rank, cond --------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1), (0, 0)])
def test_matrix_exp_matches_torch(shape):
    a = RNG.standard_normal(shape) * 2
    close(L.matrix_exp(ta.tensor(a)), TL.matrix_exp(torch.tensor(a)), 1e-10)
    close(L.matrix_exp(ta.tensor(a * 20)), TL.matrix_exp(torch.tensor(a * 20)), 1e-6)
    close(L.matrix_exp(ta.tensor(a, dtype=ta.float32)),
          TL.matrix_exp(torch.tensor(a, dtype=torch.float32)), 1e-3)
    if a.size:
        grads_match(lambda x: (L.matrix_exp(x) ** 2).sum(),
                    lambda x: (TL.matrix_exp(x) ** 2).sum(), a, tol=1e-7)


@pytest.mark.parametrize("shape", SHAPES)
def test_pinv_lstsq_matrix_rank_cond_match_torch(shape):
    a = RNG.standard_normal(shape)
    b = RNG.standard_normal(shape[:-1] + (2,))
    grads_match(lambda x: (L.pinv(x) ** 3).sum(), lambda x: (TL.pinv(x) ** 3).sum(), a)
    grads_match(lambda x, y: (L.lstsq(x, y).solution ** 2).sum(),
                lambda x, y: (TL.lstsq(x, y).solution ** 2).sum(), a, b)
    grads_match(lambda x: L.cond(x).sum(), lambda x: TL.cond(x).sum(), a)
    grads_match(lambda x: L.cond(x, -2).sum(), lambda x: TL.cond(x, -2).sum(), a)
    if shape[-1] == shape[-2]:  # (torch's cond(A, 'nuc') backward fails: its inv_ex in place)
        grads_match(lambda x: L.cond(x, "nuc").sum(),
                    lambda x: (TL.matrix_norm(x, "nuc") * TL.matrix_norm(TL.inv(x), "nuc")).sum(),
                    a)
    low = a[..., :1] * np.ones(shape[-1])  # rank 1
    np.testing.assert_array_equal(L.matrix_rank(ta.tensor(low)).numpy(),
                                  TL.matrix_rank(torch.tensor(low)).numpy())


def test_lstsq_outputs_per_driver_and_vector_rhs():
    a, b = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 2))
    for driver in ["gels", "gelsy", "gelsd", "gelss"]:
        got = L.lstsq(ta.tensor(a), ta.tensor(b), driver=driver)
        want = TL.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        for g, w in zip(got, want, strict=True):
            assert g.shape == tuple(w.shape), driver
            close(g, w)
    v = RNG.standard_normal(5)
    close(L.lstsq(ta.tensor(a), ta.tensor(v)).solution,
          TL.lstsq(torch.tensor(a), torch.tensor(v)).solution)


def test_cond_and_ex_functions_on_singular_matrices():
    z = ta.zeros(2, 2, dtype=ta.float64)
    assert np.isinf(L.cond(z, "fro").item()) and np.isnan(L.cond(z).item())
    assert L.inv_ex(z).info.item() == TL.inv_ex(torch.zeros(2, 2)).info.item()
    assert L.solve_ex(z, ta.ones(2, dtype=ta.float64)).info.item() == 1
    spd = ta.tensor([[1.0, 2.0], [2.0, 1.0]])
    assert L.cholesky_ex(spd).info.item() == 2
    with pytest.raises(LinAlgError, match="linalg.inv_ex"):
        L.inv_ex(z, check_errors=True)
    with pytest.raises(LinAlgError, match="cholesky_ex"):
        L.cholesky_ex(spd, check_errors=True)
    a = RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    b = RNG.standard_normal((2, 3))
    grads_match(lambda x: (L.inv_ex(x).inverse ** 2).sum(),
                lambda x: (TL.inv_ex(x).inverse ** 2).sum(), a)
    grads_match(lambda x, y: (L.solve_ex(x, y).result ** 2).sum(),
                lambda x, y: (TL.solve_ex(x, y).result ** 2).sum(), a, b)
    grads_match(lambda x: (L.cholesky_ex(x @ x.mT).L ** 2).sum(),
                lambda x: (TL.cholesky_ex(x @ x.mT).L ** 2).sum(), a)


# ---- the small composites -----------------------------------------------------------------------


def test_cross_vecdot_vander_diagonal_tensorinv_tensorsolve_match_torch():
    x, y = RNG.standard_normal((4, 3)), RNG.standard_normal((1, 3))
    grads_match(lambda p, q: (L.cross(p, q) ** 2).sum(),
                lambda p, q: (TL.cross(p, q) ** 2).sum(), x, y)
    grads_match(lambda p, q: (L.vecdot(p, q, dim=0) ** 2).sum(),
                lambda p, q: (TL.vecdot(p, q, dim=0) ** 2).sum(), x, y)
    v = np.array([[0.0, 1.5, -2.0], [1.0, 2.0, 3.0]])
    grads_match(lambda p: (L.vander(p, N=4) ** 2).sum(),
                lambda p: (TL.vander(p, N=4) ** 2).sum(), v)
    np.testing.assert_array_equal(L.vander(ta.tensor([1, 2, 3])).numpy(),
                                  TL.vander(torch.tensor([1, 2, 3])).numpy())
    d = RNG.standard_normal((2, 3, 4))
    grads_match(lambda p: (L.diagonal(p, offset=1) ** 2).sum(),
                lambda p: (TL.diagonal(p, offset=1) ** 2).sum(), d)
    t = RNG.standard_normal((4, 6, 8, 3))
    grads_match(lambda p: (L.tensorinv(p) ** 2).sum(),
                lambda p: (TL.tensorinv(p) ** 2).sum(), t, tol=1e-6)
    a, b = RNG.standard_normal((2, 3, 6)), RNG.standard_normal((2, 3))
    grads_match(lambda p, q: (L.tensorsolve(p, q) ** 2).sum(),
                lambda p, q: (TL.tensorsolve(p, q) ** 2).sum(), a, b, tol=1e-7)


def test_composites_refuse_bad_shapes_by_name():
    with pytest.raises(ShapeError, match="linalg.cross"):
        L.cross(ta.randn(4, 2), ta.randn(4, 2))
    with pytest.raises(ValueError, match="N must be greater than 1"):
        L.vander(ta.randn(3), N=1)
    with pytest.raises(ShapeError, match="tensorinv"):
        L.tensorinv(ta.randn(2, 3, 4), ind=1)
    with pytest.raises(ValueError, match="invalid norm type"):
        L.cond(ta.randn(3, 3), 3)
    with pytest.raises(ValueError, match="driver"):
        L.svd(ta.randn(3, 3), driver="gesvd")


# ---- the spectral and nuclear matrix norms ---------------------------------------------------


@pytest.mark.parametrize("ord_", ["nuc", 2, -2])
@pytest.mark.parametrize("dim", [(-2, -1), (1, 3), (3, 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm_nuc_and_spectral_match_torch(ord_, dim, keepdim):
    a = RNG.standard_normal((2, 3, 4, 5))
    grads_match(lambda x: (L.matrix_norm(x, ord_, dim, keepdim) * _weights(
                    TL.matrix_norm(torch.tensor(a), ord_, dim, keepdim).shape)).sum(),
                lambda x: (TL.matrix_norm(x, ord_, dim, keepdim) * torch.tensor(_weights(
                    TL.matrix_norm(torch.tensor(a), ord_, dim, keepdim).shape))).sum(), a)
    x = ta.tensor(a)
    assert L.matrix_norm(x, ord_, dim, keepdim).shape == TL.matrix_norm(
        torch.tensor(a), ord_, dim, keepdim).shape
    close(L.norm(x[0, 0], ord_), TL.norm(torch.tensor(a[0, 0]), ord_))


# ---- gradcheck and gradgradcheck ----------------------------------------------------------------


def _leaf(a):
    return ta.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def _symmetrized(f):
    return lambda x: f((x + x.mT) / 2)


GRADCHECKS = {
    "svd": (lambda x: tuple(L.svd(x, full_matrices=False)), (3, 2)),
    "svd_wide": (lambda x: tuple(L.svd(x, full_matrices=False)), (2, 3)),
    "svdvals": (lambda x: L.svdvals(x), (2, 3, 2)),
    "eigh": (_symmetrized(lambda x: tuple(L.eigh(x))), (3, 3)),
    "eigvalsh": (_symmetrized(lambda x: L.eigvalsh(x)), (2, 3, 3)),
    "qr": (lambda x: tuple(L.qr(x)), (3, 2)),
    "qr_wide": (lambda x: tuple(L.qr(x)), (2, 3)),
    "lu": (lambda x: tuple(L.lu(x)[1:]), (3, 3)),
    "lu_tall": (lambda x: tuple(L.lu(x)[1:]), (3, 2)),
    "lu_wide": (lambda x: tuple(L.lu(x)[1:]), (2, 3)),
    "lu_factor": (lambda x: L.lu_factor(x).LU, (3, 3)),
    "matrix_exp": (lambda x: L.matrix_exp(x), (3, 3)),
    "pinv": (lambda x: L.pinv(x), (3, 2)),
    "cond": (lambda x: L.cond(x), (3, 2)),
    "cond_nuc": (lambda x: L.cond(x, "nuc"), (3, 3)),
    "matrix_norm_nuc": (lambda x: L.matrix_norm(x, "nuc", dim=(0, 2)), (3, 2, 2)),
    "matrix_norm_2": (lambda x: L.matrix_norm(x, 2), (2, 3)),
}


@pytest.mark.parametrize("name", sorted(GRADCHECKS))
def test_gradcheck_and_gradgradcheck(name):
    fn, shape = GRADCHECKS[name]
    a = RNG.standard_normal(shape)
    if name.startswith("lu") or name == "matrix_exp":
        a = a + np.eye(*shape[-2:])
    x = _leaf(a)
    assert ta.autograd.gradcheck(fn, (x,))
    assert ta.autograd.gradgradcheck(fn, (x,))


def test_gradcheck_of_lstsq_and_lu_solve_in_both_inputs():
    a, b = _leaf(RNG.standard_normal((4, 2))), _leaf(RNG.standard_normal((4, 2)))
    assert ta.autograd.gradcheck(lambda p, q: L.lstsq(p, q).solution, (a, b))
    assert ta.autograd.gradgradcheck(lambda p, q: L.lstsq(p, q).solution, (a, b))
    s = _leaf(RNG.standard_normal((3, 3)) + 3 * np.eye(3))
    c = _leaf(RNG.standard_normal((3, 2)))
    assert ta.autograd.gradcheck(lambda p, q: L.lu_solve(*L.lu_factor(p), q), (s, c))


def test_hessian_of_a_gauge_invariant_svd_loss_matches_torch():
    a = RNG.standard_normal((3, 2))

    def f(m, x):
        u, s, vh = m.linalg.svd(x, full_matrices=False)
        return (s ** 3).sum() + (u ** 4).sum() + (m.linalg.matrix_exp(x[:2]) ** 2).sum()

    x, xt = pair(a)
    (g,) = ta.autograd.grad(f(ta, x), x, create_graph=True)
    (gt,) = torch.autograd.grad(f(torch, xt), xt, create_graph=True)
    close(g, gt, 1e-8)
    w = RNG.standard_normal(a.shape)
    (h,) = ta.autograd.grad((g * ta.tensor(w)).sum(), x)
    (ht,) = torch.autograd.grad((gt * torch.tensor(w)).sum(), xt)
    close(h, ht, 1e-7)
