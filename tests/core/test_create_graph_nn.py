"""Gradients of gradients through the fused nn ops and linear algebra (the graph VJPs of
tinyattn/higher_order/nn.py): rms_norm, rotary, flash_attention, binary_cross_entropy, inv,
det, slogdet, solve, cholesky, solve_triangular.

Checked against torch in float64: each op's second derivative (the gradient of <grad, v>) and,
for some, its third; ta.autograd.gradgradcheck on compositions; and user scenarios: Hessians of
log-det-style objectives (slogdet, det, a quadratic form with solve, a Cholesky Gaussian
log-likelihood) against torch.autograd.functional.hessian, a MAML-style inner step through
RMSNorm and scaled_dot_product_attention (composite and flash, causal or not), and a GAN
discriminator's gradient penalty through binary_cross_entropy."""

import math

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")
F = ta.nn.functional
TF = torch.nn.functional

RNG = np.random.default_rng(11)


def close(a, b, tol=1e-8):
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a), b,
                               rtol=tol, atol=tol)


def leaves(*arrays):
    """float64 tinyattn leaves and torch leaves with the same values."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    return ([ta.tensor(a, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def well(*shape):
    n = shape[-1]
    return 0.5 * RNG.standard_normal(shape) + n * np.eye(n)


def derivatives(m, f, xs, order):
    """[first, second, ...] gradients of f(*xs) by xs, each the gradient of the sum of the
    previous one against fixed random directions (the same for both libraries)."""
    rng = np.random.default_rng(5)
    out, found = f(*xs), []
    for k in range(order):
        gs = m.autograd.grad(out, xs, create_graph=k + 1 < order, allow_unused=True)
        found.append(gs)
        out = sum((g * m.tensor(rng.standard_normal(tuple(g.shape)))).sum()
                  for g in gs if g is not None)
    return found


def check_against_torch(f_ta, f_torch, arrays, order=2, tol=1e-8):
    xs, ts = leaves(*arrays)
    mine, theirs = derivatives(ta, f_ta, xs, order), derivatives(torch, f_torch, ts, order)
    for k, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert (x is None) == (y is None), f"order {k + 1}, input {i}"
            if x is not None:
                close(x, y, tol)


# ---- each op against torch ------------------------------------------------------------------


def _rotate_half(m, x, cos, sin):
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return m.cat([a * cos - b * sin, b * cos + a * sin], -1)


def _attention(m, q, k, v, scale, causal=False, keep=None):
    s = (q @ k.transpose(-2, -1)) * scale
    t, n = s.shape[-2], s.shape[-1]
    allowed = np.ones((t, n), dtype=bool) if keep is None else keep
    if causal:
        allowed = allowed & np.tril(np.ones((t, n), dtype=bool))
    s = s.masked_fill(m.tensor(~allowed), -math.inf)
    p = m.softmax(s, -1)
    return p @ v


def _flash(q, k, v, scale, causal=False, keep=None):
    mask = None if keep is None else ta.tensor(keep)
    return F.scaled_dot_product_attention(q, k, v, mask, is_causal=causal, scale=scale,
                                          impl="flash")


OPS = {
    "rms_norm": (lambda x, w: (F.rms_norm(x, (4,), w, eps=1e-5) ** 3).sum(),
                 lambda x, w: (TF.rms_norm(x, (4,), w, eps=1e-5) ** 3).sum(),
                 lambda: (RNG.standard_normal((2, 3, 4)), RNG.standard_normal(4))),
    "rms_norm_2d": (lambda x: F.rms_norm(x, (3, 4), eps=1e-3).sin().sum(),
                    lambda x: TF.rms_norm(x, (3, 4), eps=1e-3).sin().sum(),
                    lambda: (RNG.standard_normal((2, 3, 4)),)),
    "inv": (lambda a: (ta.linalg.inv(a) ** 2).sum(), lambda a: (torch.linalg.inv(a) ** 2).sum(),
            lambda: (well(2, 3, 3),)),
    "det": (lambda a: ta.linalg.det(a).sum(), lambda a: torch.linalg.det(a).sum(),
            lambda: (well(2, 3, 3),)),
    "slogdet": (lambda a: (ta.linalg.slogdet(a).logabsdet ** 2).sum(),
                lambda a: (torch.linalg.slogdet(a).logabsdet ** 2).sum(),
                lambda: (well(3, 3) - 6 * np.eye(3),)),
    "solve": (lambda a, b: (ta.linalg.solve(a, b) ** 2).sum(),
              lambda a, b: (torch.linalg.solve(a, b) ** 2).sum(),
              lambda: (well(2, 1, 3, 3), RNG.standard_normal((3, 3, 2)))),
    "cholesky": (lambda m: (ta.linalg.cholesky(m @ m.mT + ta.eye(3, dtype=ta.float64)) ** 2
                            ).sum(),
                 lambda m: (torch.linalg.cholesky(m @ m.mT + torch.eye(3, dtype=torch.float64))
                            ** 2).sum(),
                 lambda: (RNG.standard_normal((2, 3, 3)),)),
    "cholesky_upper": (lambda m: ta.linalg.cholesky(m @ m.mT, upper=True).tanh().sum(),
                       lambda m: torch.linalg.cholesky(m @ m.mT, upper=True).tanh().sum(),
                       lambda: (well(3, 3),)),
    "rotary": (lambda x: (F.apply_rotary(x, *F.rotary_tables(4, 3, dtype=ta.float64)) ** 3).sum(),
               lambda x: (_rotate_half(torch, x, *(torch.tensor(t.numpy()) for t in
                                                   F.rotary_tables(4, 3, dtype=ta.float64)))
                          ** 3).sum(),
               lambda: (RNG.standard_normal((2, 3, 4)),)),
    "flash_causal": (lambda q, k, v: (_flash(q, k, v, 0.6, causal=True) ** 2).sum(),
                     lambda q, k, v: (_attention(torch, q, k, v, 0.6, causal=True) ** 2).sum(),
                     lambda: tuple(RNG.standard_normal((2, 4, 3)) for _ in range(3))),
    "flash_broadcast": (lambda q, k, v: _flash(q, k, v, 0.5).tanh().sum(),
                        lambda q, k, v: _attention(torch, q, k, v, 0.5).tanh().sum(),
                        lambda: (RNG.standard_normal((1, 3, 2)), RNG.standard_normal((2, 1, 4, 2)),
                                 RNG.standard_normal((2, 1, 4, 3)))),
    "bce": (lambda z, t: F.binary_cross_entropy(z.sigmoid(), t.sigmoid()),
            lambda z, t: TF.binary_cross_entropy(z.sigmoid(), t.sigmoid()),
            lambda: (RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4)))),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_second_derivatives_match_torch(name):
    f_ta, f_torch, arrays = OPS[name]
    check_against_torch(f_ta, f_torch, arrays())


@pytest.mark.parametrize("name", ["rms_norm", "inv", "solve", "cholesky", "flash_causal",
                                  "slogdet"])
def test_third_derivatives_match_torch(name):
    f_ta, f_torch, arrays = OPS[name]
    check_against_torch(f_ta, f_torch, arrays(), order=3, tol=1e-7)


def test_solve_triangular_second_derivatives_match_torch():
    b = RNG.standard_normal((2, 3, 2))
    for upper, left, unit in [(True, True, False), (False, False, False), (False, True, True)]:
        rhs = b if left else b.swapaxes(-1, -2)

        def f(m, a, r, upper=upper, left=left, unit=unit):
            x = m.linalg.solve_triangular(a, r, upper=upper, left=left, unitriangular=unit)
            return (x ** 3).sum()

        check_against_torch(lambda a, r, f=f: f(ta, a, r), lambda a, r, f=f: f(torch, a, r),
                            (well(3, 3), rhs), order=3, tol=1e-7)


def test_a_flash_mask_and_a_masked_row_match_torch():
    keep = np.array([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 1]], dtype=bool)  # row 1: none
    q, k, v = RNG.standard_normal((3, 2)), RNG.standard_normal((4, 2)), RNG.standard_normal((4, 2))

    def ref(q, k, v):  # torch's softmax of an all -inf row is NaN: zeros there, as flash's
        out = _attention(torch, q, k, v, 0.8, keep=keep | np.eye(3, 4, dtype=bool))
        return (out * torch.tensor(keep.any(-1)[:, None])).sin().sum()

    check_against_torch(lambda q, k, v: _flash(q, k, v, 0.8, keep=keep).sin().sum(), ref,
                        (q, k, v))


def test_a_singular_matrix_is_refused_by_det_with_a_reason():
    a = ta.tensor(np.ones((3, 3)), requires_grad=True)
    (g,) = ta.autograd.grad(ta.linalg.det(a), a)  # first order: the cofactors, finite
    assert np.isfinite(g.numpy()).all()
    with pytest.raises(ta.errors.GraphError, match="det.*singular"):
        ta.autograd.grad(ta.linalg.det(a), a, create_graph=True)


def test_dropout_gradient_keeps_its_graph():
    x = ta.tensor(RNG.standard_normal((4, 5)), requires_grad=True)
    y = (F.dropout(x, 0.5, seed=3) * x).sum()
    (g,) = ta.autograd.grad(y, x, create_graph=True)
    (h,) = ta.autograd.grad(g.sum(), x)
    mask = F.dropout(ta.ones(4, 5, dtype=ta.float64), 0.5, seed=3).numpy()
    close(h, 2 * mask)  # y = Σ mask x², its gradient 2 mask x


# ---- gradgradcheck on compositions ----------------------------------------------------------


def _eye3():
    return ta.eye(3, dtype=ta.float64)


COMPOSITIONS = [
    (lambda a, b: ta.linalg.solve(a @ a.mT + 3 * _eye3(), b).tanh(), ((3, 3), (3, 2))),
    (lambda a: ta.linalg.inv(a + 4 * _eye3()) @ a, ((3, 3),)),
    (lambda a: ta.linalg.det(a + 3 * _eye3()) * ta.linalg.slogdet(a + 3 * _eye3()).logabsdet,
     ((2, 3, 3),)),
    (lambda m, b: ta.linalg.solve_triangular(ta.linalg.cholesky(m @ m.mT + _eye3()), b,
                                             upper=False), ((3, 3), (3, 2))),
    (lambda x, w: F.rms_norm(x @ w, (2,), w[0]).exp(), ((3, 2), (2, 2))),
    (lambda q, k, v: _flash(q.tanh(), k, v, 0.7, causal=True), ((2, 3, 2), (2, 3, 2), (2, 3, 2))),
    (lambda z, t: F.binary_cross_entropy(z.sigmoid(), t.sigmoid(), reduction="none"),
     ((2, 3), (2, 3))),
]


@pytest.mark.parametrize("k", range(len(COMPOSITIONS)))
def test_gradgradcheck_on_compositions(k):
    fn, shapes = COMPOSITIONS[k]
    rng = np.random.default_rng(k)
    xs = [ta.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
    assert ta.autograd.gradgradcheck(fn, xs)


# ---- user scenarios -------------------------------------------------------------------------


def _hessians(f, arrays):
    xs = tuple(ta.tensor(np.asarray(a, dtype=np.float64)) for a in arrays)
    ts = tuple(torch.tensor(np.asarray(a, dtype=np.float64)) for a in arrays)
    return (ta.autograd.functional.hessian(lambda *a: f(ta, *a), xs),
            torch.autograd.functional.hessian(lambda *a: f(torch, *a), ts))


def _gaussian_loglik(m, mfac, x):
    """log N(x; 0, Σ), Σ = M Mᵀ + I, through its Cholesky factor."""
    n = x.shape[-1]
    low = m.linalg.cholesky(mfac @ mfac.mT + m.eye(n, dtype=x.dtype))
    z = m.linalg.solve_triangular(low, x.reshape(n, 1), upper=False)
    half_logdet = (low * m.eye(n, dtype=x.dtype)).sum(-1).log().sum()
    return -0.5 * (z * z).sum() - half_logdet - 0.5 * n * math.log(2 * math.pi)


HESSIANS = {
    "logabsdet": (lambda m, a: m.linalg.slogdet(a).logabsdet, (well(3, 3) - 5 * np.eye(3),)),
    "det": (lambda m, a: m.linalg.det(a), (well(3, 3),)),
    "quadratic_form": (lambda m, a, b: (b * m.linalg.solve(a, b.reshape(3, 1)).reshape(3)).sum(),
                       (well(3, 3), RNG.standard_normal(3))),
    "gaussian_loglik": (_gaussian_loglik, (RNG.standard_normal((3, 3)), RNG.standard_normal(3))),
}


@pytest.mark.parametrize("name", sorted(HESSIANS))
def test_hessians_of_logdet_style_objectives_match_torch(name):
    f, arrays = HESSIANS[name]
    mine, theirs = _hessians(f, arrays)
    if len(arrays) == 1:
        close(mine, theirs)
        return
    for row_a, row_b in zip(mine, theirs, strict=True):
        for a, b in zip(row_a, row_b, strict=True):
            close(a, b)


def _model(m, params, x, causal, sdpa):
    """RMSNorm, one attention layer (q, k, v projections) and a linear head."""
    norm_w, wq, wk, wv, head = params
    h = m.nn.functional.rms_norm(x, (4,), norm_w, eps=1e-6)
    q, k, v = h @ wq, h @ wk, h @ wv
    return sdpa(q, k, v, causal) @ head


def _ta_sdpa(impl):
    return lambda q, k, v, causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                  impl=impl)


def _torch_sdpa(q, k, v, causal):
    return _attention(torch, q, k, v, 1 / math.sqrt(q.shape[-1]), causal=causal)


def _maml(m, params, data, causal, sdpa, lr=0.1):
    """One inner step on the support set (its gradient kept as a graph), the query loss of the
    updated weights backpropagated to the initial ones."""
    xs, ys, xq, yq = (m.tensor(a) for a in data)
    inner = ((_model(m, params, xs, causal, sdpa) - ys) ** 2).mean()
    grads = m.autograd.grad(inner, params, create_graph=True)
    fast = [p - lr * g for p, g in zip(params, grads, strict=True)]
    outer = ((_model(m, fast, xq, causal, sdpa) - yq) ** 2).mean()
    outer.backward()
    return [p.grad for p in params]


@pytest.mark.parametrize("impl", ["composite", "flash"])
@pytest.mark.parametrize("causal", [False, True])
def test_maml_through_rms_norm_and_attention_matches_torch(impl, causal):
    arrays = [1 + 0.1 * RNG.standard_normal(4)] + [RNG.standard_normal((4, 4)) * 0.5
                                                   for _ in range(3)] + \
        [RNG.standard_normal((4, 2))]
    data = [RNG.standard_normal(s) for s in [(2, 5, 4), (2, 5, 2), (2, 5, 4), (2, 5, 2)]]
    mine, theirs = leaves(*arrays)
    got = _maml(ta, mine, data, causal, _ta_sdpa(impl))
    want = _maml(torch, theirs, data, causal, _torch_sdpa)
    for a, b in zip(got, want, strict=True):
        close(a, b)


def test_maml_records_the_op_each_attention_path_takes():
    q = ta.tensor(RNG.standard_normal((2, 3, 4)), requires_grad=True)
    composite = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    flash = F.scaled_dot_product_attention(q, q, q, is_causal=True, impl="flash")
    assert composite._node.op.name == "matmul"
    assert composite._node.parents[0].op.name == "scaled_masked_softmax"
    assert flash._node.op.name == "flash_attention"


def _discriminator(m, params, x):
    w1, b1, w2, b2 = params
    return ((x @ w1 + b1).tanh() @ w2 + b2).sigmoid().reshape(-1)


def _gan_step(m, params, real, fake, lam=10.0):
    """The discriminator's BCE loss plus an R1-style penalty: the squared gradient of its loss
    on the real samples by those samples (kept as a graph), backpropagated to the weights."""
    BCE = TF.binary_cross_entropy if m is torch else F.binary_cross_entropy  # noqa: N806
    real = m.tensor(real, requires_grad=True)
    d_real, d_fake = _discriminator(m, params, real), _discriminator(m, params, m.tensor(fake))
    loss_real = BCE(d_real, m.ones(d_real.shape, dtype=d_real.dtype))
    loss = loss_real + BCE(d_fake, m.zeros(d_fake.shape, dtype=d_fake.dtype))
    (g,) = m.autograd.grad(loss_real, real, create_graph=True)
    (loss + lam * (g * g).sum(-1).mean()).backward()
    return [p.grad for p in params]


def test_gan_gradient_penalty_through_binary_cross_entropy_matches_torch():
    arrays = [RNG.standard_normal((3, 5)), RNG.standard_normal(5),
              RNG.standard_normal((5, 1)), RNG.standard_normal(1)]
    real, fake = RNG.standard_normal((6, 3)), RNG.standard_normal((6, 3))
    mine, theirs = leaves(*arrays)
    got, want = _gan_step(ta, mine, real, fake), _gan_step(torch, theirs, real, fake)
    for a, b in zip(got, want, strict=True):
        close(a, b)
