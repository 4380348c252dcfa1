"""F.ctc_loss / nn.CTCLoss, F.local_response_norm / nn.LocalResponseNorm and the SELU dropouts
(F.alpha_dropout, F.feature_alpha_dropout, nn.AlphaDropout, nn.FeatureAlphaDropout) against
torch: values and gradients in float64 and float32 (CTC over random cases with repeated labels,
empty targets, short inputs, impossible alignments, padded and concatenated targets), the
modules' arguments and reprs, the dropouts' kept values (torch's a and b) and statistics, and
the errors for bad arguments (torch's error types)."""

import math

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

rng = np.random.default_rng(11)


def _grads(ours_fn, theirs_fn, x, tol, g=None):
    """ours_fn(x) and theirs_fn(x): values, and x's gradients for the output gradient g."""
    xo, xt = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo, yt = ours_fn(xo), theirs_fn(xt)
    assert tuple(yo.shape) == tuple(yt.shape) and yo.dtype == x.dtype
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    g = rng.standard_normal(yo.shape).astype(x.dtype) if g is None else g
    yo.backward(ta.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=tol)


# ---- ctc_loss ------------------------------------------------------------------------------------


def _ctc_case(seed, n_time=7, n=4, n_class=4, s_max=4, blank=0):
    """Random log-probabilities (T, N, C), padded targets with repeats, lengths that include a
    target length of 0, input lengths below T and (for some items) impossible alignments."""
    r = np.random.default_rng(seed)
    lp = r.standard_normal((n_time, n, n_class))
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    labels = [c for c in range(n_class) if c != blank]
    targets = r.choice(labels[:2], size=(n, s_max))  # two labels only: many repeats
    tg_len = r.integers(0, s_max + 1, n)
    tg_len[0] = 0
    in_len = r.integers(1, n_time + 1, n)
    in_len[1] = n_time
    return lp, targets, in_len, tg_len


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("seed", range(6))
def test_ctc_loss_matches_torch_in_float64(seed, reduction):
    blank = seed % 3
    lp, targets, in_len, tg_len = _ctc_case(seed, blank=blank)
    zero_inf = seed % 2 == 0

    def ours(x):
        return F.ctc_loss(x, ta.tensor(targets), ta.tensor(in_len), ta.tensor(tg_len),
                          blank=blank, reduction=reduction, zero_infinity=zero_inf)

    def theirs(x):
        return TF.ctc_loss(x, torch.tensor(targets), torch.tensor(in_len),
                           torch.tensor(tg_len), blank=blank, reduction=reduction,
                           zero_infinity=zero_inf)

    if not zero_inf:  # torch's gradient of an infinite loss is NaN: keep the cases finite
        in_len[:] = lp.shape[0]
    _grads(ours, theirs, lp, 1e-9)


def test_ctc_loss_impossible_alignments_give_inf_or_zero_with_zero_gradient():
    lp, _, _, _ = _ctc_case(1, n_time=3, n=2)
    targets = np.array([[1, 1, 1], [2, 1, 2]])  # 1 1 1 needs 5 steps; 2 1 2 needs 3
    args = (ta.tensor(targets), [2, 3], [3, 3])
    out = F.ctc_loss(ta.tensor(lp), *args, reduction="none")
    expect = TF.ctc_loss(torch.tensor(lp), torch.tensor(targets), [2, 3], [3, 3],
                         reduction="none")
    assert math.isinf(out.tolist()[0]) and math.isinf(expect.tolist()[0])
    np.testing.assert_allclose(out.numpy()[1], expect.numpy()[1], rtol=1e-12)
    x = ta.tensor(lp, requires_grad=True)
    loss = F.ctc_loss(x, *args, reduction="none", zero_infinity=True)
    assert loss.tolist()[0] == 0
    loss.sum().backward()
    assert not x.grad.numpy()[:, 0].any() and np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-9), (np.float32, 2e-5)])
def test_ctc_loss_concatenated_targets_and_lists_as_torch(dtype, tol):
    lp, targets, in_len, tg_len = _ctc_case(4, n_time=9)
    lp, in_len[:] = lp.astype(dtype), 9  # (every alignment possible: torch's NaN gradient)
    flat = np.concatenate([t[:k] for t, k in zip(targets, tg_len, strict=True)])
    in_len, tg_len = in_len.tolist(), tg_len.tolist()
    _grads(lambda x: F.ctc_loss(x, ta.tensor(flat), in_len, tg_len),
           lambda x: TF.ctc_loss(x, torch.tensor(flat), in_len, tg_len), lp, tol, g=np.ones(()))


@pytest.mark.parametrize("lengths", [(9, 3), (ta.tensor(9), ta.tensor(3)), ([9], [3])])
def test_ctc_loss_unbatched_as_torch(lengths):
    lp, targets, _, _ = _ctc_case(5, n_time=9)
    lp1 = lp[:, 0]
    for t1, reduction in ((targets[0, :3], "none"), (targets[:1], "mean")):  # (S,), (1, S)
        _grads(lambda x, t=t1, r=reduction: F.ctc_loss(x, ta.tensor(t), *lengths, reduction=r),
               lambda x, t=t1, r=reduction: TF.ctc_loss(x, torch.tensor(t), [9], [3],
                                                        reduction=r),
               lp1, 1e-9)
    with pytest.raises(RuntimeError, match="concatenated targets \\(4,\\).*3 labels"):
        F.ctc_loss(ta.tensor(lp1), ta.tensor(targets[0]), 9, 3)


def test_ctc_loss_of_log_softmax_gives_torchs_logit_gradients():
    logits = rng.standard_normal((6, 2, 5))
    targets = np.array([[1, 2, 2], [3, 4, 0]])
    _grads(lambda x: F.ctc_loss(x.log_softmax(2), ta.tensor(targets), [6, 5], [3, 2]),
           lambda x: TF.ctc_loss(x.log_softmax(2), torch.tensor(targets), [6, 5], [3, 2]),
           logits, 1e-9, g=np.ones(()))


def test_ctc_loss_module_arguments_and_repr():
    assert repr(nn.CTCLoss()) == repr(torch.nn.CTCLoss()) == "CTCLoss()"
    m = nn.CTCLoss(blank=2, reduction="sum", zero_infinity=True)
    assert (m.blank, m.reduction, m.zero_infinity) == (2, "sum", True)
    d = nn.CTCLoss()
    assert (d.blank, d.reduction, d.zero_infinity) == (0, "mean", False)
    lp, targets, in_len, tg_len = _ctc_case(2)
    in_len[:] = lp.shape[0]
    ours = m(ta.tensor(lp), ta.tensor(targets), ta.tensor(in_len), ta.tensor(tg_len))
    theirs = torch.nn.CTCLoss(blank=2, reduction="sum", zero_infinity=True)(
        torch.tensor(lp), torch.tensor(targets), torch.tensor(in_len), torch.tensor(tg_len))
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-12)


CTC_ERRORS = [
    ({"input_lengths": [7, 7, 8, 7]}, RuntimeError, "input_lengths.*at most 7"),
    ({"input_lengths": [7, -1, 7, 7]}, RuntimeError, "input_lengths.*at least 0"),
    ({"target_lengths": [5, 1, 1, 1]}, RuntimeError, "targets.*\\(4, 4\\)"),
    ({"target_lengths": [1, 1, 1]}, RuntimeError, "target_lengths.*batch size 4"),
    ({"input_lengths": [7, 7]}, RuntimeError, "input_lengths.*batch size 4"),
    ({"blank": 4}, RuntimeError, "blank 4.*4 classes"),
    ({"blank": -1}, RuntimeError, "blank -1"),
    ({"reduction": "avg"}, ValueError, "ctc_loss.*reduction"),
    ({"targets": np.zeros((4, 4, 1), dtype=np.int64)}, RuntimeError, "targets.*\\(4, 4, 1\\)"),
    ({"targets": np.full((4, 4), 9)}, RuntimeError, "target 9.*4 classes"),
    ({"log_probs": np.zeros((7, 4, 4), dtype=np.int64)}, NotImplementedError, "floating"),
    ({"log_probs": np.zeros((2, 7, 4, 4))}, RuntimeError, "log_probs.*\\(2, 7, 4, 4\\)"),
    ({"input_lengths": np.full(4, 7.0)}, TypeError, "input_lengths.*integer"),
]


@pytest.mark.parametrize("change,error,match", CTC_ERRORS)
def test_ctc_loss_refuses_bad_arguments_as_torch(change, error, match):
    lp, targets, _, _ = _ctc_case(0)
    args = {"log_probs": lp, "targets": targets, "input_lengths": [7, 7, 7, 7],
            "target_lengths": [1, 1, 1, 1]}
    args.update(change)
    tensors = {k: ta.tensor(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    with pytest.raises(error, match=match):
        F.ctc_loss(**tensors)
    theirs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    if "targets" not in change:  # (torch reads a label out of range without a check)
        with pytest.raises(error):
            TF.ctc_loss(**theirs)


# ---- local_response_norm -------------------------------------------------------------------------


LRN_CASES = [((2, 5, 6), 3, {}), ((2, 6, 3, 4), 2, {"alpha": 0.5, "beta": 0.6, "k": 2.0}),
             ((1, 3, 4, 2), 7, {"alpha": 1e-2}), ((2, 4, 3, 2, 2), 4, {"alpha": 0.3}),
             ((2, 5, 3), 1, {"beta": 1.0})]


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("shape,size,kwargs", LRN_CASES)
def test_local_response_norm_matches_torch(shape, size, kwargs, dtype, tol):
    x = (rng.standard_normal(shape) * 2).astype(dtype)
    _grads(lambda t: F.local_response_norm(t, size, **kwargs),
           lambda t: TF.local_response_norm(t, size, **kwargs), x, tol)
    _grads(lambda t: nn.LocalResponseNorm(size, **kwargs)(t),
           lambda t: torch.nn.LocalResponseNorm(size, **kwargs)(t), x, tol)


def test_local_response_norm_module_repr_and_errors():
    for args in ((3,), (2, 0.5, 0.6, 2.0)):
        assert repr(nn.LocalResponseNorm(*args)) == repr(torch.nn.LocalResponseNorm(*args))
    m = nn.LocalResponseNorm(4)
    assert (m.size, m.alpha, m.beta, m.k) == (4, 1e-4, 0.75, 1.0)
    with pytest.raises(ValueError, match="local_response_norm.*\\(2, 3\\)"):
        F.local_response_norm(ta.zeros(2, 3), 2)
    with pytest.raises(ValueError):
        TF.local_response_norm(torch.zeros(2, 3), 2)
    for size, error in ((0, RuntimeError), (-1, RuntimeError), (1.5, TypeError)):
        with pytest.raises(error, match="local_response_norm: size"):
            F.local_response_norm(ta.zeros(2, 3, 4), size)
        with pytest.raises(error):
            TF.local_response_norm(torch.zeros(2, 3, 4), size)
    empty = ta.zeros(0, 3, 4)
    assert F.local_response_norm(empty, 2).shape == (0, 3, 4)


# ---- alpha_dropout, feature_alpha_dropout --------------------------------------------------------

ALPHA = 1.7580993408473766  # torch's: -SELU's scale * alpha


def _a_b(p):
    """torch's affine map after the drop: kept x -> a x + a α p, dropped -> -a α (1 - p)."""
    a = 1 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
    return a, a * ALPHA * p, -a * ALPHA * (1 - p)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_alpha_dropout_kept_values_gradient_and_statistics(p):
    ta.manual_seed(0)
    x = ta.tensor(rng.standard_normal(200_000), requires_grad=True)
    y = F.alpha_dropout(x, p, training=True)
    a, shift, dropped = _a_b(p)
    xs, ys = x.detach().numpy(), y.detach().numpy()
    kept = np.isclose(ys, a * xs + shift, rtol=0, atol=1e-12)
    assert np.allclose(ys[~kept], dropped, rtol=0, atol=1e-12)
    assert abs((~kept).mean() - p) < 0.01
    assert abs(ys.mean()) < 0.02 and abs(ys.var() - 1) < 0.02  # SELU's fixed point kept
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, a, 0.0), rtol=1e-12)
    ref = TF.alpha_dropout(torch.tensor(xs), p, training=True).numpy()
    assert abs(ref.mean() - ys.mean()) < 0.02 and abs(ref.var() - ys.var()) < 0.02
    assert np.isclose(np.unique(np.round(ref[~np.isclose(ref, a * xs + shift)], 9)),
                      dropped).all()


def test_feature_alpha_dropout_drops_whole_channels():
    ta.manual_seed(1)
    x = ta.tensor(rng.standard_normal((64, 32, 5, 3)))
    y = F.feature_alpha_dropout(x, 0.3, training=True).numpy()
    a, shift, dropped = _a_b(0.3)
    dropped_ch = np.isclose(y, dropped, rtol=0, atol=1e-12).all((2, 3))
    kept_ch = np.isclose(y, a * x.numpy() + shift, rtol=0, atol=1e-12).all((2, 3))
    assert (dropped_ch ^ kept_ch).all() and abs(dropped_ch.mean() - 0.3) < 0.05
    y2 = F.feature_alpha_dropout(ta.tensor(rng.standard_normal((500, 40))), 0.5, True).numpy()
    assert abs(np.isclose(y2, _a_b(0.5)[2], atol=1e-12).mean() - 0.5) < 0.02  # (N, C): entries


def test_alpha_dropouts_identity_in_eval_and_edge_ps():
    x = ta.tensor(rng.standard_normal((3, 4, 5)))
    assert F.alpha_dropout(x) is x  # training=False by default, as torch's
    assert F.feature_alpha_dropout(x, 0.9) is x
    assert F.alpha_dropout(x, 0.0, True) is x
    assert not F.alpha_dropout(x, 1.0, True).numpy().any()
    assert not F.feature_alpha_dropout(x, 1.0, True).numpy().any()
    for m in (nn.AlphaDropout(0.3), nn.FeatureAlphaDropout(0.3)):
        m.eval()
        np.testing.assert_array_equal(m(x).numpy(), x.numpy())
    y = x.clone()
    out = F.alpha_dropout(y, 0.5, True, inplace=True)
    assert out is y and not np.array_equal(y.numpy(), x.numpy())


def test_alpha_dropout_modules_repr_and_errors():
    for cls in ("AlphaDropout", "FeatureAlphaDropout"):
        ours, theirs = getattr(nn, cls), getattr(torch.nn, cls)
        assert repr(ours()) == repr(theirs())
        assert repr(ours(0.2, True)) == repr(theirs(0.2, True))
        with pytest.raises(ValueError, match="p must be a probability"):
            ours(1.5)
    for fn in (F.alpha_dropout, F.feature_alpha_dropout):
        with pytest.raises(ValueError, match="probability"):
            fn(ta.zeros(2, 3), -0.1)
    with pytest.raises(RuntimeError, match="feature_alpha_dropout.*at least 2.*\\(3,\\)"):
        F.feature_alpha_dropout(ta.zeros(3), 0.5, True)
    with pytest.raises(RuntimeError):
        TF.feature_alpha_dropout(torch.zeros(3), 0.5, True)
    with pytest.raises(RuntimeError, match="alpha_dropout.*floating"):
        F.alpha_dropout(ta.tensor([1, 2, 3]), 0.5, True)
    with pytest.raises(RuntimeError):
        TF.alpha_dropout(torch.tensor([1, 2, 3]), 0.5, True)


def test_new_names_are_exported():
    for name in ("ctc_loss", "local_response_norm", "alpha_dropout", "feature_alpha_dropout"):
        assert name in F.__all__
    for name in ("CTCLoss", "LocalResponseNorm", "AlphaDropout", "FeatureAlphaDropout"):
        assert name in nn.__all__ and issubclass(getattr(nn, name), nn.Module)
