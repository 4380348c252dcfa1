"""torch's top-level functions that tinyattn lacked, against torch: values, dtypes, gradients
and errors.

torch's top-level aliases of nn.functional ops in torch's own positional signatures
(torch.layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable),
torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
cudnn_enabled), torch.embedding(weight, indices), losses taking reduction as an int, ...);
the window functions; cov, corrcoef, vander, unravel_index, renorm, frexp, ldexp, nextafter,
gradient, cholesky_solve, cholesky_inverse, mvlgamma, rsub, scalar_tensor, split_with_sizes,
fill, the small predicates and the top-level in-place forms (torch.sin_(x), ...).
"""

import warnings

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

TORCH_DTYPES = {np.dtype(n): getattr(torch, n) for n in (
    "float16", "float32", "float64", "int32", "int64", "bool", "uint8")}


def tt(values, dtype=np.float64, requires_grad=False):
    """The same values as a (ta, torch) pair."""
    a = np.asarray(values, dtype=dtype)
    return (ta.tensor(a.copy(), requires_grad=requires_grad),
            torch.tensor(a.copy(), requires_grad=requires_grad))


def rand(*shape, seed=0, requires_grad=True, dtype=np.float64):
    return tt(np.random.default_rng(seed).standard_normal(shape), dtype=dtype,
              requires_grad=requires_grad)


def same(got, want, rtol=1e-10, atol=1e-12):
    """ta tensor `got` has torch tensor `want`'s shape, dtype and values."""
    want = want.detach()
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    assert TORCH_DTYPES[np.dtype(got.dtype)] == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.detach().numpy().astype(np.float64),
                               want.numpy().astype(np.float64), rtol=rtol, atol=atol)


def grads_match(fn_ta, fn_torch, xs, ts, seed=1, rtol=1e-10, atol=1e-12):
    """fn(*inputs) forward and backward with one random cotangent, against torch."""
    out, want = fn_ta(*xs), fn_torch(*ts)
    same(out, want, rtol, atol)
    g = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    out.backward(ta.tensor(g.astype(out.dtype)))
    want.backward(torch.tensor(g, dtype=want.dtype))
    for x, t in zip(xs, ts, strict=True):
        if t.requires_grad:
            same(x.grad, t.grad, rtol, atol)


# ---- nn.functional ops at top level, in torch's positional signatures -------------------------


def test_convolutions_pools_and_shuffles_at_top_level():
    (x, xt), (w, wt) = rand(2, 3, 9), rand(4, 3, 2, seed=1)
    (b, bt) = rand(4, seed=2)
    grads_match(lambda x, w, b: ta.conv1d(x, w, b, 2, 1), lambda x, w, b: torch.conv1d(
        x, w, b, 2, 1), [x, w, b], [xt, wt, bt])
    (wt_, wtt) = rand(3, 2, 3, seed=3)
    grads_match(lambda x, w: ta.conv_transpose1d(x, w, None, 2, 1, 1),
                lambda x, w: torch.conv_transpose1d(x, w, None, 2, 1, 1), [x, wt_], [xt, wtt])
    (x2, x2t), (w2, w2t) = rand(1, 2, 5, 5, seed=4), rand(3, 2, 3, 3, seed=5)
    same(ta.conv2d(x2, w2, padding=1), torch.conv2d(x2t, w2t, padding=1))
    same(ta.conv_transpose2d(x2, w2.transpose(0, 1)), torch.conv_transpose2d(
        x2t, w2t.transpose(0, 1)))
    (x3, x3t), (w3, w3t) = rand(1, 2, 3, 4, 4, seed=6), rand(2, 2, 2, 2, 2, seed=7)
    same(ta.conv3d(x3, w3), torch.conv3d(x3t, w3t))
    same(ta.conv_transpose3d(x3, w3), torch.conv_transpose3d(x3t, w3t))
    grads_match(lambda x: ta.max_pool1d(x, 2, 1, 1, 1, True),
                lambda x: torch.max_pool1d(x, 2, 1, 1, 1, True), [x], [xt])
    same(ta.max_pool2d(x2, 2), torch.max_pool2d(x2t, 2))
    same(ta.max_pool3d(x3, 2, 1), torch.max_pool3d(x3t, 2, 1))
    same(ta.avg_pool1d(x, 3, 2, 1, False, False), torch.avg_pool1d(xt, 3, 2, 1, False, False))
    same(ta.adaptive_avg_pool1d(x, 4), torch.adaptive_avg_pool1d(xt, 4))
    got, want = ta.adaptive_max_pool1d(x, 4), torch.adaptive_max_pool1d(xt, 4)
    assert isinstance(got, tuple) and len(got) == 2
    same(got[0], want[0]), same(got[1], want[1])
    got, want = ta.max_pool1d_with_indices(x, 2), torch.max_pool1d_with_indices(xt, 2)
    same(got[0], want[0]), same(got[1], want[1])
    (p, pt) = rand(1, 8, 2, 3, seed=8)
    same(ta.pixel_shuffle(p, 2), torch.pixel_shuffle(pt, 2))
    same(ta.pixel_unshuffle(ta.pixel_shuffle(p, 2), 2), pt)
    same(ta.channel_shuffle(p, 2), torch.channel_shuffle(pt, 2))
    (a, at), (c, ct), (bw, bwt) = rand(3, 2, seed=9), rand(3, 4, seed=10), rand(5, 2, 4, seed=11)
    grads_match(ta.bilinear, torch.bilinear, [a, c, bw], [at, ct, bwt])
    grads_match(lambda x: ta.constant_pad_nd(x, [1, 2], 0.5),
                lambda x: torch.constant_pad_nd(x, [1, 2], 0.5), [x], [xt])
    with pytest.raises(TypeError, match="max_pool1d"):
        ta.max_pool1d(x, 2, return_indices=True)  # (torch's top-level one has none)


def test_norms_in_torchs_positional_order():
    (x, xt), (w, wt), (b, bt) = rand(4, 6, 5), rand(5, seed=1), rand(5, seed=2)
    grads_match(lambda x, w, b: ta.layer_norm(x, [5], w, b, 1e-3, False),
                lambda x, w, b: torch.layer_norm(x, [5], w, b, 1e-3, False), [x, w, b],
                [xt, wt, bt])
    (gw, gwt), (gb, gbt) = rand(6, seed=3), rand(6, seed=4)
    grads_match(lambda x, w, b: ta.group_norm(x, 3, w, b, 1e-4, True),
                lambda x, w, b: torch.group_norm(x, 3, w, b, 1e-4, True), [x, gw, gb],
                [xt, gwt, gbt])
    grads_match(lambda x, w: ta.rms_norm(x, (5,), w, 1e-6),
                lambda x, w: torch.rms_norm(x, (5,), w, 1e-6), [x, w], [xt, wt])
    rm, rmt = tt(np.zeros(6))
    rv, rvt = tt(np.ones(6))
    grads_match(lambda x, w, b: ta.batch_norm(x, w, b, rm, rv, True, 0.3, 1e-5, False),
                lambda x, w, b: torch.batch_norm(x, w, b, rmt, rvt, True, 0.3, 1e-5, False),
                [x, gw, gb], [xt, gwt, gbt])
    same(rm, rmt), same(rv, rvt)  # (the running stats updated in place, as torch's)
    same(ta.batch_norm(x, None, None, rm, rv, False, 0.1, 1e-5, True),
         torch.batch_norm(xt, None, None, rmt, rvt, False, 0.1, 1e-5, True))
    grads_match(lambda x, w, b: ta.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, False),
                lambda x, w, b: torch.instance_norm(x, w, b, None, None, True, 0.1, 1e-5,
                                                    False), [x, gw, gb], [xt, gwt, gbt])
    with pytest.raises(TypeError):
        ta.batch_norm(x, None, None, rm, rv)  # (all nine are required, as torch's)


def test_dropouts_take_p_and_train_positionally():
    x = ta.ones(50, 40)
    with pytest.raises(TypeError):
        ta.dropout(x, 0.5)  # (train is required, as torch's)
    for name in ("dropout", "alpha_dropout", "feature_alpha_dropout", "feature_dropout"):
        fn = getattr(ta, name)
        assert fn(x, 0.5, False) is x or np.array_equal(fn(x, 0.5, False).numpy(), x.numpy())
        out = fn(input=x, p=0.5, train=True)
        assert out.shape == x.shape and not np.array_equal(out.numpy(), x.numpy())
    out = ta.dropout(x, 0.5, True).numpy()
    assert set(np.unique(out)) <= {0.0, 2.0}
    rows = ta.feature_dropout(ta.ones(8, 30, 5), 0.5, True).numpy()
    assert (rows.min(-1) == rows.max(-1)).all()  # whole channels
    y = ta.ones(20, 10)
    assert ta.dropout_(y, 0.5, True) is y and set(np.unique(y.numpy())) <= {0.0, 2.0}
    for name in ("alpha_dropout_", "feature_alpha_dropout_", "feature_dropout_"):
        z = ta.ones(20, 10, 3)
        assert getattr(ta, name)(z, 0.5, True) is z


def test_embedding_takes_weight_first_and_a_negative_padding_idx_means_none():
    (w, wt) = rand(5, 3)
    idx, idxt = tt([1, 4, 4, 0], dtype=np.int64)
    grads_match(lambda w: ta.embedding(w, idx), lambda w: torch.embedding(w, idxt), [w], [wt])
    (w, wt) = rand(5, 3)
    grads_match(lambda w: ta.embedding(w, idx, 4), lambda w: torch.embedding(w, idxt, 4), [w],
                [wt])
    (w, wt) = rand(5, 3)
    grads_match(lambda w: ta.embedding(w, idx, -1, True),
                lambda w: torch.embedding(w, idxt, -1, True), [w], [wt])


def test_losses_take_reduction_as_an_int():
    (x, xt), (y, yt) = rand(4, 5), rand(4, 5, seed=1)
    sign, signt = tt(np.sign(np.random.default_rng(2).standard_normal((4, 5))))
    sign4, sign4t = tt([1.0, -1.0, 1.0, -1.0])
    for red in (0, 1, 2):
        grads_match(lambda x, r=red: ta.hinge_embedding_loss(x, sign, 0.5, r),
                    lambda x, r=red: torch.hinge_embedding_loss(x, signt, 0.5, r), [x], [xt])
        x.grad = xt.grad = None
        grads_match(lambda x, y, r=red: ta.margin_ranking_loss(x, y, sign, 0.1, r),
                    lambda x, y, r=red: torch.margin_ranking_loss(x, y, signt, 0.1, r), [x, y],
                    [xt, yt])
        x.grad = xt.grad = y.grad = yt.grad = None
        grads_match(lambda x, y, r=red: ta.cosine_embedding_loss(x, y, sign4, 0.2, r),
                    lambda x, y, r=red: torch.cosine_embedding_loss(x, y, sign4t, 0.2, r),
                    [x, y], [xt, yt])
        x.grad = xt.grad = y.grad = yt.grad = None
    (z, zt) = rand(4, 5, seed=3)
    grads_match(lambda x, y, z: ta.triplet_margin_loss(x, y, z, 1.0, 2.0, 1e-6, True, 0),
                lambda x, y, z: torch.triplet_margin_loss(x, y, z, 1.0, 2.0, 1e-6, True, 0),
                [x, y, z], [xt, yt, zt])
    p, pt = tt(np.random.default_rng(4).random((4, 5)))
    x.grad = xt.grad = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (torch's kl_div does not warn about 'mean')
        grads_match(lambda x: ta.kl_div(x, p, 1), lambda x: torch.kl_div(x, pt, 1), [x], [xt])
    same(ta.kl_div(x, y, 2, log_target=True), torch.kl_div(xt, yt, 2, log_target=True))
    # left out, reduction is none: what torch's top-level losses do
    same(ta.kl_div(x, p), torch.kl_div(xt, pt))
    same(ta.hinge_embedding_loss(x, sign), torch.hinge_embedding_loss(xt, signt))
    same(ta.triplet_margin_loss(x, y, z), torch.triplet_margin_loss(xt, yt, zt))
    same(ta.binary_cross_entropy_with_logits(x, p), torch.binary_cross_entropy_with_logits(
        xt, pt))
    x.grad = xt.grad = None
    (r, rt) = tt(np.random.default_rng(6).random((4, 5)) + 0.1, requires_grad=True)
    grads_match(lambda r: ta.poisson_nll_loss(r, p, False, False, 1e-8, 1),
                lambda r: torch.poisson_nll_loss(r, pt, False, False, 1e-8, 1), [r], [rt])
    grads_match(lambda x: ta.poisson_nll_loss(x, p, True, True, 1e-8, 2),
                lambda x: torch.poisson_nll_loss(x, pt, True, True, 1e-8, 2), [x], [xt])
    x.grad = xt.grad = None
    (pw, pwt) = rand(5, seed=5, requires_grad=False)
    grads_match(lambda x: ta.binary_cross_entropy_with_logits(x, p, None, pw.abs(), 1),
                lambda x: torch.binary_cross_entropy_with_logits(x, pt, None, pwt.abs(), 1),
                [x], [xt])
    with pytest.raises(TypeError, match="hinge_embedding_loss.*int"):
        ta.hinge_embedding_loss(x, sign, 1.0, "mean")


def test_ctc_loss_at_top_level():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((6, 2, 4))
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    (x, xt) = tt(lp, requires_grad=True)
    targets, targetst = tt([[1, 2], [3, 3]], dtype=np.int64)
    for red in (0, 1, 2):
        x.grad = xt.grad = None
        grads_match(lambda x, r=red: ta.ctc_loss(x, targets, [6, 5], [2, 2], 0, r, False),
                    lambda x, r=red: torch.ctc_loss(x, targetst, [6, 5], [2, 2], 0, r, False),
                    [x], [xt])


# ---- windows ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"])
def test_windows(name):
    ours, theirs = getattr(ta, name), getattr(torch, name)
    for n in (0, 1, 2, 5, 8):
        for periodic in (True, False):
            same(ours(n, periodic, dtype=ta.float64), theirs(n, periodic, dtype=torch.float64))
            same(ours(n, periodic), theirs(n, periodic), rtol=1e-5, atol=1e-6)
    same(ours(6), theirs(6), rtol=1e-5, atol=1e-6)
    assert ours(4, requires_grad=True).requires_grad
    with pytest.raises(ta.DTypeError, match=name):
        ours(4, dtype=ta.int64)
    with pytest.raises(ValueError, match=name):
        ours(-1)


def test_window_parameters():
    same(ta.hamming_window(7, False, 0.5, 0.4, dtype=ta.float64),
         torch.hamming_window(7, False, 0.5, 0.4, dtype=torch.float64))
    same(ta.kaiser_window(7, True, 5.0, dtype=ta.float64),
         torch.kaiser_window(7, True, 5.0, dtype=torch.float64))
    same(ta.kaiser_window(7, False, beta=3.0, dtype=ta.float64),
         torch.kaiser_window(7, False, beta=3.0, dtype=torch.float64))


# ---- statistics, polynomials, indices ----------------------------------------------------------


def test_cov_and_corrcoef():
    (x, xt) = rand(3, 6)
    grads_match(ta.cov, torch.cov, [x], [xt])
    x.grad = xt.grad = None
    fw, fwt = tt([1, 2, 1, 3, 1, 1], dtype=np.int64)
    aw, awt = tt([0.5, 1.0, 2.0, 0.3, 1.0, 0.7])
    grads_match(lambda x: ta.cov(x, correction=0, fweights=fw, aweights=aw),
                lambda x: torch.cov(x, correction=0, fweights=fwt, aweights=awt), [x], [xt])
    x.grad = xt.grad = None
    grads_match(lambda x: ta.cov(x, fweights=fw, aweights=aw),
                lambda x: torch.cov(x, fweights=fwt, aweights=awt), [x], [xt])
    x.grad = xt.grad = None
    grads_match(ta.corrcoef, torch.corrcoef, [x], [xt])
    (v, vt) = rand(5, seed=2)
    grads_match(ta.cov, torch.cov, [v], [vt])
    same(ta.corrcoef(v), torch.corrcoef(vt))
    ints, intst = tt([[1, 2, 4], [3, 1, 0]], dtype=np.int64)
    same(ta.cov(ints), torch.cov(intst), rtol=1e-6)
    f32, f32t = rand(2, 4, dtype=np.float32, requires_grad=False)
    same(ta.cov(f32), torch.cov(f32t), rtol=1e-5, atol=1e-6)
    with pytest.raises(ta.ShapeError, match=r"cov.*\(2, 3, 4\)"):
        ta.cov(ta.ones(2, 3, 4))
    with pytest.raises(ta.ShapeError, match="cov"):
        ta.cov(x, fweights=ta.tensor([1, 2]))


def test_vander():
    (x, xt) = rand(4)
    same(ta.vander(x), torch.vander(xt))
    same(ta.vander(x, 3, True), torch.vander(xt, 3, True))
    # (torch's own vander cannot be differentiated: its backward fails on an in-place write;
    # the gradient is checked against the powers written out)
    grads_match(ta.vander, lambda x: x.unsqueeze(1) ** torch.arange(3, -1, -1), [x], [xt])
    x.grad = xt.grad = None
    grads_match(lambda x: ta.vander(x, 3, True),
                lambda x: x.unsqueeze(1) ** torch.arange(3), [x], [xt])
    for dtype in (np.int32, np.bool_, np.float32):
        a, at = tt([1, 0, 3], dtype=dtype)
        same(ta.vander(a, N=4), torch.vander(at, N=4))
    same(ta.vander(x, 0), torch.vander(xt, 0))
    with pytest.raises(ta.ShapeError, match=r"vander.*\(2, 2\)"):
        ta.vander(ta.ones(2, 2))


def test_unravel_index_and_broadcast_shapes():
    idx, idxt = tt([5, 7, 0], dtype=np.int64)
    for got, want in zip(ta.unravel_index(idx, (2, 4)), torch.unravel_index(idxt, (2, 4)),
                         strict=True):
        same(got, want)
    for got, want in zip(ta.unravel_index(ta.tensor(-1), 6), torch.unravel_index(
            torch.tensor(-1), 6), strict=True):
        same(got, want)
    with pytest.raises(ta.DTypeError, match="unravel_index"):
        ta.unravel_index(ta.tensor([1.0]), (2, 2))
    with pytest.raises(ValueError, match="unravel_index"):
        ta.unravel_index(ta.tensor([8]), (2, 4))
    assert ta.broadcast_shapes((2, 1), (3,), 1) == torch.broadcast_shapes((2, 1), (3,), 1)
    assert isinstance(ta.broadcast_shapes((2, 1)), ta.Size)
    with pytest.raises(ta.ShapeError, match=r"broadcast_shapes.*\(3, 4\)"):
        ta.broadcast_shapes((2, 1), (3, 4))


def test_renorm():
    (x, xt) = rand(3, 4, 2)
    for args in ((2, 1, 1.0), (1, 0, 2.0), (3.0, -1, 0.5)):
        x.grad = xt.grad = None
        grads_match(lambda x, a=args: ta.renorm(x, *a), lambda x, a=args: torch.renorm(x, *a),
                    [x], [xt])
    with pytest.raises(ta.ShapeError, match=r"renorm.*\(3,\)"):
        ta.renorm(ta.ones(3), 2, 0, 1.0)


def test_frexp_ldexp_nextafter():
    tiny, tinyt = tt([1e-300, -5e-324, 1e300])
    same(ta.frexp(tiny)[0], torch.frexp(tinyt)[0]), same(ta.frexp(tiny)[1], torch.frexp(tinyt)[1])
    pair = ta.frexp(tiny)
    assert type(pair).__name__ == "frexp" and pair._fields == ("mantissa", "exponent")
    assert pair.exponent is pair[1] and torch.frexp(tinyt).exponent is not None
    vals = [0.0, 1.0, -3.5, 1e-30, 7e10, np.inf, -0.25]  # (torch's gradient at 1e-300 is inf:
    # it takes 2 ** exponent in float32)
    (x, xt) = tt(vals, requires_grad=True)
    m, e = ta.frexp(x)
    mt, et = torch.frexp(xt)
    same(m, mt), same(e, et)
    m.sum().backward()
    mt.sum().backward()
    same(x.grad, xt.grad)
    (f, ft) = tt([1.5, -2.0], dtype=np.float32)
    same(ta.frexp(f)[0], torch.frexp(ft)[0]), same(ta.frexp(f)[1], torch.frexp(ft)[1])
    with pytest.raises(ta.DTypeError, match="frexp"):
        ta.frexp(ta.tensor([1, 2]))
    (a, at), (b, bt) = rand(4), tt([1, -2, 0, 3], dtype=np.int64)
    same(ta.ldexp(a, b), torch.ldexp(at, bt))
    # (torch's gradient for an integer exponent takes 2 ** other in integers: 0 for -2; the
    # gradient is checked with the exponents as floats)
    grads_match(ta.ldexp, torch.ldexp, [a, b.double()], [at, bt.double()])
    same(ta.ldexp(ta.tensor([1, 2]), ta.tensor([1, 2])), torch.ldexp(torch.tensor([1, 2]),
                                                                      torch.tensor([1, 2])))
    y, yt = tt([1.0, 2.0], dtype=np.float32)
    assert ta.ldexp_(y, ta.tensor([1, 2])) is y
    same(y, torch.ldexp_(yt, torch.tensor([1, 2])))
    for dtype in (np.float32, np.float64):
        (p, pt), (q, qt) = tt([1.0, 0.0, -1.0], dtype=dtype), tt([2.0, -1.0, -1.0], dtype=dtype)
        same(ta.nextafter(p, q), torch.nextafter(pt, qt), rtol=0, atol=0)


def test_gradient():
    (x, xt) = rand(5, 6)
    for kwargs in ({}, {"spacing": 2.0}, {"dim": 1}, {"spacing": [2.0], "dim": 0},
                   {"edge_order": 2}, {"spacing": (1.5, 0.5), "edge_order": 2}):
        got, want = ta.gradient(x, **kwargs), torch.gradient(xt, **kwargs)
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            same(g, w)
    coords = [np.array([0.0, 0.5, 1.5, 2.0, 4.0]), np.array([0.0, 1, 2, 4, 7, 8])]
    for order in (1, 2):
        got = ta.gradient(x, spacing=[ta.tensor(c) for c in coords], edge_order=order)
        want = torch.gradient(xt, spacing=[torch.tensor(c) for c in coords], edge_order=order)
        for g, w in zip(got, want, strict=True):
            same(g, w)
    x.grad = xt.grad = None
    grads_match(lambda x: ta.gradient(x, dim=0, edge_order=2)[0],
                lambda x: torch.gradient(x, dim=0, edge_order=2)[0], [x], [xt])
    ints, intst = tt([1, 4, 9, 16], dtype=np.int64)
    same(ta.gradient(ints)[0], torch.gradient(intst)[0])
    with pytest.raises(ValueError, match=r"gradient.*\(2, 6\)"):
        ta.gradient(ta.ones(2, 6), edge_order=2)


def test_cholesky_solve_and_inverse():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 3))
    spd = a @ a.transpose(0, 2, 1) + 3 * np.eye(3)
    low = np.linalg.cholesky(spd)
    (lo, lot), (b, bt) = tt(low, requires_grad=True), rand(2, 3, 2, seed=1)
    grads_match(ta.cholesky_solve, torch.cholesky_solve, [b, lo], [bt, lot], rtol=1e-8)
    (up, upt) = tt(low[0].T.copy(), requires_grad=True)
    (b2, b2t) = rand(3, 4, seed=2)
    grads_match(lambda b, u: ta.cholesky_solve(b, u, True),
                lambda b, u: torch.cholesky_solve(b, u, True), [b2, up], [b2t, upt], rtol=1e-8)
    (lo0, lo0t) = tt(low[1], requires_grad=True)
    grads_match(ta.cholesky_inverse, torch.cholesky_inverse, [lo0], [lo0t], rtol=1e-8)
    (up1, up1t) = tt(low[1].T.copy(), requires_grad=True)
    grads_match(lambda u: ta.cholesky_inverse(u, upper=True),
                lambda u: torch.cholesky_inverse(u, upper=True), [up1], [up1t], rtol=1e-8)
    with pytest.raises(ta.ShapeError, match=r"cholesky_solve.*\(3, 2\)"):
        ta.cholesky_solve(ta.ones(3, 2), ta.eye(2))
    with pytest.raises(ta.ShapeError, match=r"cholesky_inverse.*\(2, 3\)"):
        ta.cholesky_inverse(ta.ones(2, 3))


# ---- small ones -------------------------------------------------------------------------------


def test_mvlgamma_rsub_scalar_tensor_split_with_sizes_fill():
    (x, xt) = tt([2.5, 3.0, 4.2], requires_grad=True)
    grads_match(lambda x: ta.mvlgamma(x, 3), lambda x: torch.mvlgamma(x, 3), [x], [xt])
    (a, at), (b, bt) = rand(3), rand(3, seed=1)
    grads_match(lambda a, b: ta.rsub(a, b, alpha=2), lambda a, b: torch.rsub(a, b, alpha=2),
                [a, b], [at, bt])
    same(ta.rsub(ta.tensor([1, 2]), 3), torch.rsub(torch.tensor([1, 2]), 3))
    same(ta.scalar_tensor(3), torch.scalar_tensor(3))
    same(ta.scalar_tensor(2, dtype=ta.int64), torch.scalar_tensor(2, dtype=torch.int64))
    assert ta.scalar_tensor(1.5, requires_grad=True).requires_grad
    (s, st) = rand(5, 2)
    for got, want in zip(ta.split_with_sizes(s, [2, 3]), torch.split_with_sizes(st, [2, 3]),
                         strict=True):
        same(got, want)
    with pytest.raises(ValueError, match="split_with_sizes"):
        ta.split_with_sizes(s, [2, 2])
    same(ta.fill(ta.tensor([1, 2]), 2.5), torch.fill(torch.tensor([1, 2]), 2.5))
    (f, ft) = rand(2, 3)
    v, vt = tt(1.5, requires_grad=True)
    grads_match(ta.fill, torch.fill, [f, v], [ft, vt])


def test_predicates():
    x = ta.ones(2, 3)
    assert ta.is_same_size(x, ta.zeros(2, 3)) and not ta.is_same_size(x, ta.zeros(3, 2))
    for dtype in ("float32", "int64", "bool", "uint8", "int32"):
        assert ta.is_signed(ta.zeros(2, dtype=getattr(ta, dtype))) == torch.is_signed(
            torch.zeros(2, dtype=getattr(torch, dtype)))
    assert not ta.is_inference(x)
    with ta.inference_mode():
        assert ta.is_inference(ta.ones(2))
    assert ta.absolute is ta.abs or np.array_equal(ta.absolute(ta.tensor([-1.0])).numpy(), [1.0])


INPLACE = ["abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
           "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "cos_", "cosh_",
           "deg2rad_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_", "frac_",
           "i0_", "log10_", "log1p_", "log2_", "log_", "neg_", "negative_", "rad2deg_",
           "reciprocal_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_",
           "square_", "tan_", "tanh_", "trunc_", "zero_", "nan_to_num_"]


@pytest.mark.parametrize("name", INPLACE)
def test_top_level_inplace_forms(name):
    vals = [0.3, 0.6, 0.9] if "acos" in name or "asin" in name or "atanh" in name or \
        "arctanh" in name else [1.2, 2.5, 3.7]
    x, xt = tt(vals)
    assert getattr(ta, name)(x) is x
    getattr(torch, name)(xt)
    same(x, xt)


def test_top_level_inplace_forms_with_arguments():
    for name, args in (("clamp_", (0.0, 0.5)), ("clip_", (0.1, 0.4)), ("clamp_min_", (0.3,)),
                       ("clamp_max_", (0.3,)), ("fill_", (2.0,))):
        x, xt = tt([0.2, 0.35, 0.6])
        assert getattr(ta, name)(x, *args) is x
        getattr(torch, name)(xt, *args)
        same(x, xt)
    x, xt = tt([0.2, 0.35, 0.6])
    ta.xlogy_(x, 2.0), torch.xlogy_(xt, 2.0)
    same(x, xt)
    i, it = tt([4, 6], dtype=np.int64)
    ta.gcd_(i, ta.tensor([6, 4])), torch.gcd_(it, torch.tensor([6, 4]))
    same(i, it)
    ta.lcm_(i, ta.tensor([3, 5])), torch.lcm_(it, torch.tensor([3, 5]))
    same(i, it)
    x, xt = tt([1.0, 2.0])
    m, mt = tt([[1.0, 2.0], [3.0, 4.0]])
    v, vt = tt([1.0, -1.0])
    ta.addmv_(x, m, v), torch.addmv_(xt, mt, vt)
    same(x, xt)
    y = ta.ones(3, requires_grad=True)
    z = y * 2
    assert ta.detach_(z) is z and z.grad_fn is None


def test_small_aliases_and_float32():
    (m, mt) = rand(2, 3, 4, requires_grad=False)
    same(ta.adjoint(m), torch.adjoint(mt))
    assert ta.is_nonzero(ta.tensor([2.0])) and not ta.is_nonzero(ta.tensor(0))
    for got, want in zip(ta.unsafe_chunk(m, 2, 1), torch.unsafe_chunk(mt, 2, 1), strict=True):
        same(got, want)
    for got, want in zip(ta.unsafe_split(m, 2, 2), torch.unsafe_split(mt, 2, 2), strict=True):
        same(got, want)
    same(ta.absolute(-m), torch.absolute(-mt))
    same(ta.gradient(m, axis=1)[0], torch.gradient(mt, axis=1)[0])  # (NumPy's name, as torch)
    (x, xt), (w, wt) = rand(2, 3, 8, dtype=np.float32), rand(4, 3, 3, seed=1, dtype=np.float32)
    same(ta.conv1d(x, w), torch.conv1d(xt, wt), rtol=1e-5, atol=1e-5)
    same(ta.layer_norm(x, [8]), torch.layer_norm(xt, [8]), rtol=1e-5, atol=1e-5)
    same(ta.max_pool1d(x, 2), torch.max_pool1d(xt, 2))
    same(ta.renorm(x, 2, 0, 1.0), torch.renorm(xt, 2, 0, 1.0), rtol=1e-5, atol=1e-6)
    same(ta.gradient(x)[2], torch.gradient(xt)[2], rtol=1e-5, atol=1e-6)
    same(ta.vander(x[0, 0]), torch.vander(xt[0, 0]), rtol=1e-5, atol=1e-5)
    same(ta.corrcoef(x[0]), torch.corrcoef(xt[0]), rtol=1e-5, atol=1e-5)
    same(ta.ldexp(x, ta.tensor(3)), torch.ldexp(xt, torch.tensor(3)))
    same(ta.rsub(x, 1.5), torch.rsub(xt, 1.5))
    (a, at), (b, bt) = tt([0.5, 2.0, 3.0]), tt([1.0, 0.5, 4.0])
    same(ta.igamma(a, b), torch.igamma(at, bt))
    same(ta.igammac(a, b), torch.igammac(at, bt))


NEW_NAMES = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "layer_norm", "group_norm", "instance_norm", "batch_norm", "rms_norm", "dropout",
    "alpha_dropout", "feature_alpha_dropout", "embedding", "max_pool1d", "max_pool2d",
    "max_pool3d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "pixel_shuffle",
    "pixel_unshuffle", "channel_shuffle", "bilinear", "kl_div", "hinge_embedding_loss",
    "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss",
    "binary_cross_entropy_with_logits", "ctc_loss", "constant_pad_nd", "hann_window",
    "hamming_window", "blackman_window", "bartlett_window", "kaiser_window", "cov", "corrcoef",
    "vander", "unravel_index", "renorm", "frexp", "ldexp", "nextafter", "is_same_size",
    "is_signed", "is_inference", "broadcast_shapes", "gradient", "cholesky_solve",
    "cholesky_inverse", "mvlgamma", "rsub", "scalar_tensor", "split_with_sizes", "fill",
    "zero_", "absolute", "negative_", "fix_", "clip_", "clamp_", "sin_", "abs_", "exp_"]


def test_new_names_are_public_and_torchs():
    for name in NEW_NAMES:
        assert hasattr(torch, name), name
        assert callable(getattr(ta, name)) and name in ta.__all__, name
