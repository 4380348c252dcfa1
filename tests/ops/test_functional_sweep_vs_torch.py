"""A sweep of tinyattn.functional against torch.nn.functional, called as a torch user calls it:
keyword names, the keyword arguments torch has, and the small losses model code reaches for
(values and input gradients in float64, matched with torch's)."""

import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn
from tinyattn.errors import ShapeError


class _Label(np.ndarray):
    """A float array of labels (±1, 0/1): a constant, no gradient asked for."""


def _label(a):
    return np.asarray(a, np.float64).view(_Label)


def _wants_grad(a):
    return a is not None and a.dtype.kind == "f" and not isinstance(a, _Label)


def _pair(a):
    """a (a NumPy array, or None) as a tinyattn leaf and a torch leaf, float ones requiring
    grad (labels not)."""
    torch = pytest.importorskip("torch")
    if a is None:
        return None, None
    grad, a = _wants_grad(a), np.asarray(a)
    return ta.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _matches_torch(fn, torch_fn, arrays, kwargs, tol=1e-10, by_name=()):
    """fn(*arrays, **kwargs) and torch_fn(...) agree in value, shape, dtype and every float input's
    gradient (for a random output gradient); the last len(by_name) arrays go by those keywords."""
    torch = pytest.importorskip("torch")
    pairs = [_pair(a) for a in arrays]
    n = len(pairs) - len(by_name)
    named = list(zip(by_name, pairs[n:], strict=True))
    out = fn(*(p[0] for p in pairs[:n]), **kwargs, **{k: p[0] for k, p in named})
    ref = torch_fn(*(p[1] for p in pairs[:n]), **kwargs, **{k: p[1] for k, p in named})
    assert tuple(out.shape) == tuple(ref.shape)
    assert str(out.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=tol, atol=tol)
    g = np.random.default_rng(1).standard_normal(tuple(ref.shape))
    out.backward(ta.tensor(g))
    ref.backward(torch.tensor(g))
    for (a, b), arr in zip(pairs, arrays, strict=True):
        if _wants_grad(arr):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=tol)


RNG = np.random.default_rng(0)
X, Y, W = (RNG.standard_normal((3, 4)) for _ in range(3))


# ---- torch's keyword names -------------------------------------------------------------------


def test_scaled_dot_product_attention_takes_torchs_query_key_value_keywords():
    torch = pytest.importorskip("torch")
    q, k, v = (RNG.standard_normal((2, 3, 5, 4)) for _ in range(3))
    out = F.scaled_dot_product_attention(query=ta.tensor(q), key=ta.tensor(k), value=ta.tensor(v),
                                         is_causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(
        query=torch.tensor(q), key=torch.tensor(k), value=torch.tensor(v), is_causal=True)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-12)


# ---- weight= of mse_loss, l1_loss, huber_loss (torch 2.13) -----------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,kwargs", [("mse_loss", {}), ("l1_loss", {}),
                                         ("huber_loss", {}), ("huber_loss", {"delta": 0.3})])
def test_regression_losses_take_a_weight_as_torch(name, kwargs, reduction):
    torch = pytest.importorskip("torch")
    w = np.abs(W) + 0.1
    _matches_torch(getattr(F, name), getattr(torch.nn.functional, name), [X, Y * 2, w],
                   dict(kwargs, reduction=reduction), by_name=("weight",))


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_regression_loss_weight_of_another_shape_is_refused_by_name(name):
    with pytest.raises(ShapeError, match=rf"{name}: weight \(4,\).*input \(3, 4\)"):
        getattr(F, name)(ta.tensor(X), ta.tensor(Y), weight=ta.ones(4))


# ---- batch_norm on an empty batch --------------------------------------------------------------


@pytest.mark.parametrize("affine", [False, True])
def test_batch_norm_trains_on_an_empty_batch_as_torch(affine):
    # torch: an empty output, the running statistics untouched, zero parameter gradients (the
    # module form did this already; the function refused it as "one value per channel")
    torch = pytest.importorskip("torch")
    x = np.zeros((0, 4, 3))
    w, b = (RNG.standard_normal(4) for _ in range(2))
    stats = [np.zeros(4), np.ones(4)]
    ours, ref = [ta.tensor(s) for s in stats], [torch.tensor(s) for s in stats]
    params = [_pair(w), _pair(b)] if affine else [(None, None), (None, None)]
    y = F.batch_norm(ta.tensor(x), *ours, *(p[0] for p in params), training=True)
    yr = torch.nn.functional.batch_norm(torch.tensor(x), *ref, *(p[1] for p in params),
                                        training=True)
    assert tuple(y.shape) == tuple(yr.shape) == (0, 4, 3)
    for a, r in zip(ours, ref, strict=True):
        np.testing.assert_array_equal(a.numpy(), r.numpy())
    if affine:
        y.sum().backward()
        yr.sum().backward()
        for a, r in params:
            np.testing.assert_array_equal(a.grad.numpy(), r.grad.numpy())
    with pytest.raises(ShapeError, match=r"batch_norm: needs more than one value per channel"):
        F.batch_norm(ta.zeros(1, 4), None, None, training=True)


# ---- the small losses model code reaches for (torch's names, arguments and math) ---------------

SIGNS = _label(np.where(RNG.random((3, 4)) < 0.5, -1.0, 1.0))
SIGNS3 = _label([1.0, -1.0, 1.0])
A, P, N = (RNG.standard_normal((3, 4)) for _ in range(3))
COUNTS = RNG.uniform(0.5, 4.0, (3, 4))  # Poisson targets, some at most 1 (no Stirling term)
LOSS_CASES = [  # (name, arrays, settings)
    ("margin_ranking_loss", [X, Y, SIGNS], {}),
    ("margin_ranking_loss", [X, Y, SIGNS], {"margin": 0.5}),
    ("soft_margin_loss", [X, SIGNS], {}),
    ("hinge_embedding_loss", [X, SIGNS], {}),
    ("hinge_embedding_loss", [X, SIGNS], {"margin": 0.3}),
    ("cosine_embedding_loss", [X, Y, SIGNS3], {}),
    ("cosine_embedding_loss", [X, Y, SIGNS3], {"margin": 0.2}),
    ("cosine_embedding_loss", [X[0], Y[0], _label(-1.0)], {"margin": -0.5}),
    ("triplet_margin_loss", [A, P, N], {}),
    ("triplet_margin_loss", [A, P, N], {"margin": 2.0, "p": 1.0, "eps": 1e-3, "swap": True}),
    ("triplet_margin_loss", [A[0], P[0], N[0]], {"swap": True}),
    ("poisson_nll_loss", [X, COUNTS], {}),
    ("poisson_nll_loss", [X, COUNTS], {"full": True}),
    ("poisson_nll_loss", [np.abs(X) + 0.1, COUNTS], {"log_input": False, "eps": 1e-3}),
    ("poisson_nll_loss", [np.abs(X) + 0.1, COUNTS], {"log_input": False, "full": True}),
    ("multilabel_soft_margin_loss", [X, (SIGNS > 0) * 1.0], {}),
    ("multilabel_soft_margin_loss", [X[0], (SIGNS[0] > 0) * 1.0], {}),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,arrays,kwargs", LOSS_CASES)
def test_small_losses_match_torch(name, arrays, kwargs, reduction):
    torch = pytest.importorskip("torch")
    _matches_torch(getattr(F, name), getattr(torch.nn.functional, name), arrays,
                   dict(kwargs, reduction=reduction))


def test_multilabel_soft_margin_loss_class_weights_match_torch():
    torch = pytest.importorskip("torch")
    _matches_torch(F.multilabel_soft_margin_loss, torch.nn.functional.multilabel_soft_margin_loss,
                   [X, (SIGNS > 0) * 1.0, np.abs(W[0]) + 0.1], {}, by_name=("weight",))


@pytest.mark.parametrize("call,message", [
    (lambda: F.margin_ranking_loss(ta.zeros(3), ta.zeros(3), ta.zeros(3, 1)),
     r"margin_ranking_loss: input1 \(3,\), input2 \(3,\) and target \(3, 1\) must have the "
     "same number of dims"),
    (lambda: F.cosine_embedding_loss(ta.zeros(3, 4), ta.zeros(3, 4), ta.zeros(3, 1)),
     r"cosine_embedding_loss: .*target \(3, 1\)"),
    (lambda: F.cosine_embedding_loss(ta.zeros(3, 4), ta.zeros(3, 4), ta.zeros(())),
     r"cosine_embedding_loss: .*input1 \(3, 4\)"),
    (lambda: F.triplet_margin_loss(ta.zeros(3, 4), ta.zeros(4), ta.zeros(3, 4)),
     r"triplet_margin_loss: anchor \(3, 4\), positive \(4,\) and negative \(3, 4\)"),
    (lambda: F.soft_margin_loss(ta.zeros(3), ta.zeros(4)),
     r"soft_margin_loss: input \(3,\) and target \(4,\)"),
    (lambda: F.hinge_embedding_loss(ta.zeros(3), ta.zeros(4)),
     r"hinge_embedding_loss: input \(3,\) and target \(4,\)"),
    (lambda: F.poisson_nll_loss(ta.zeros(3), ta.zeros(4)),
     r"poisson_nll_loss: input \(3,\) and target \(4,\)"),
])
def test_small_losses_name_themselves_and_the_shapes_in_errors(call, message):
    with pytest.raises((ShapeError, ValueError), match=message):
        call()


@pytest.mark.parametrize("module,name,settings,arrays", [
    ("MarginRankingLoss", "margin_ranking_loss", {"margin": 0.5}, [X, Y, SIGNS]),
    ("SoftMarginLoss", "soft_margin_loss", {"reduction": "sum"}, [X, SIGNS]),
    ("HingeEmbeddingLoss", "hinge_embedding_loss", {"margin": 0.3}, [X, SIGNS]),
    ("CosineEmbeddingLoss", "cosine_embedding_loss", {"margin": 0.2}, [X, Y, SIGNS3]),
    ("TripletMarginLoss", "triplet_margin_loss", {"p": 1.0, "swap": True}, [A, P, N]),
    ("PoissonNLLLoss", "poisson_nll_loss", {"full": True, "reduction": "none"}, [X, COUNTS]),
    ("MultiLabelSoftMarginLoss", "multilabel_soft_margin_loss", {}, [X, (SIGNS > 0) * 1.0]),
])
def test_the_small_loss_modules_match_torchs(module, name, settings, arrays):
    torch = pytest.importorskip("torch")
    ours, ref = getattr(nn, module)(**settings), getattr(torch.nn, module)(**settings)
    assert repr(ours) == repr(ref)
    _matches_torch(ours, ref, arrays, {})


# ---- kl_div's warning about 'mean' ---------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda x, t: F.kl_div(x, t),
    lambda x, t: F.kl_div(x, t, reduction="mean", log_target=True),
    lambda x, t: nn.KLDivLoss()(x, t),
])
def test_kl_div_mean_warns_as_torch_that_it_is_not_the_divergence(call):
    # torch's UserWarning: 'mean' divides by every element, not the batch, so it is not the KL
    # divergence ('batchmean' is); it is silent for the other reductions
    x, t = ta.tensor(X), ta.tensor(np.abs(Y))
    with pytest.warns(UserWarning, match=r"'batchmean' divides only by the batch size"):
        call(x, t)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for reduction in ("batchmean", "sum", "none"):
            F.kl_div(x, t, reduction=reduction)


# ---- gaussian_nll_loss ---------------------------------------------------------------------------

X3 = RNG.standard_normal((2, 3, 4))
VAR_CASES = [  # var of the input's shape, one dim short, a 1 where the input has more, tiny
    np.abs(RNG.standard_normal((2, 3, 4))) + 0.1,
    np.abs(RNG.standard_normal((2, 3))) + 0.1,
    np.abs(RNG.standard_normal((2, 1, 4))) + 0.1,
    np.abs(RNG.standard_normal((2, 3, 1))) + 0.1,
    np.array([[[1e-9, 2.0, 0.5, 1e-7]]]).repeat(2, 0).repeat(3, 1),  # clamped at eps
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("var", VAR_CASES, ids=lambda v: str(v.shape))
def test_gaussian_nll_loss_matches_torch(var, full, reduction):
    torch = pytest.importorskip("torch")
    _matches_torch(F.gaussian_nll_loss, torch.nn.functional.gaussian_nll_loss,
                   [X3, Y[None].repeat(2, 0)[:, :3], var],
                   {"full": full, "eps": 1e-6, "reduction": reduction})
    ours, ref = nn.GaussianNLLLoss(full=full, reduction=reduction), \
        torch.nn.GaussianNLLLoss(full=full, reduction=reduction)
    assert repr(ours) == repr(ref)
    _matches_torch(ours, ref, [X3, X3 * 0.5, var], {})


def test_gaussian_nll_loss_takes_a_float_variance_as_torch():
    torch = pytest.importorskip("torch")
    got = F.gaussian_nll_loss(ta.tensor(X), ta.tensor(Y), 0.7)
    want = torch.nn.functional.gaussian_nll_loss(torch.tensor(X), torch.tensor(Y), 0.7)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("var,message", [
    (np.ones((2, 3, 5)), r"gaussian_nll_loss: var \(2, 3, 5\) .* input \(2, 3, 4\)"),
    (np.ones((3, 4)), r"gaussian_nll_loss: var \(3, 4\) .* input \(2, 3, 4\)"),
    (-np.ones((2, 3, 4)), r"gaussian_nll_loss: var has negative entries"),
    (-1.0, r"gaussian_nll_loss: var has negative entries"),
])
def test_gaussian_nll_loss_refuses_a_bad_variance_by_name(var, message):
    var = var if isinstance(var, float) else ta.tensor(var)
    with pytest.raises(ValueError, match=message):
        F.gaussian_nll_loss(ta.tensor(X3), ta.tensor(X3), var)


@pytest.mark.parametrize("loss", [
    lambda out, y, v: F.gaussian_nll_loss(out[:, 0], y, 0.5),
    lambda out, y, v: F.gaussian_nll_loss(out[:, 0], y, v),
    lambda out, y, v: F.mse_loss(out[:, 0], y, weight=v),
    lambda out, y, v: F.poisson_nll_loss(out[:, 0], y.abs() * 3, full=True),
    lambda out, y, v: F.triplet_margin_loss(out, out * 0.5, out.flip(0), swap=True),
    lambda out, y, v: F.cosine_embedding_loss(out, out.flip(0), (y > 0).long() * 2 - 1),
])
def test_the_new_losses_replay_in_a_captured_step(loss):
    # each is ops only: a captured step replays it (not back to eager), with eager's numbers,
    # and gaussian_nll_loss's check of the variance runs again on every replay
    lin = nn.Linear(4, 2, dtype=ta.float64)
    rng = np.random.default_rng(0)

    def fn(x, y, v):
        return loss(lin(x), y, v)

    step = ta.capture(fn)
    for _ in range(4):
        x, y = ta.tensor(rng.standard_normal((5, 4))), ta.tensor(rng.standard_normal(5))
        v = ta.tensor(rng.uniform(0.5, 2.0, 5))
        lin.zero_grad()
        got, got_grad = step(x, y, v).item(), lin.weight.grad.numpy().copy()
        lin.zero_grad()
        want = fn(x, y, v)
        want.backward()
        assert got == pytest.approx(want.item(), rel=1e-12)
        np.testing.assert_allclose(got_grad, lin.weight.grad.numpy(), rtol=1e-12)
    assert step.state == "replaying"


def test_a_replayed_gaussian_nll_loss_still_refuses_a_negative_variance():
    lin = nn.Linear(4, 1, dtype=ta.float64)
    step = ta.capture(lambda x, v: F.gaussian_nll_loss(lin(x)[:, 0], x[:, 0], v))
    x = ta.tensor(RNG.standard_normal((5, 4)))
    for _ in range(3):
        step(x, ta.ones(5, dtype=ta.float64))
    assert step.state == "replaying"
    with pytest.raises(ValueError, match="gaussian_nll_loss: var has negative entries"):
        step(x, -ta.ones(5, dtype=ta.float64))


# ---- linear_cross_entropy (torch 2.13: the LM head and the loss in one call) ---------------------

H, CW, CB = RNG.standard_normal((6, 4)), RNG.standard_normal((5, 4)), RNG.standard_normal(5)
IDS = np.array([0, 4, 2, -100, 1, 3])


@pytest.mark.parametrize("kwargs", [
    {}, {"reduction": "sum", "label_smoothing": 0.1}, {"reduction": "none", "ignore_index": 2},
    {"ignore_index": -100, "label_smoothing": 0.2},
])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_cross_entropy_is_cross_entropy_of_linear_as_torch(kwargs, bias):
    torch = pytest.importorskip("torch")
    names = ("linear_bias",) if bias else ()
    arrays = [H, CW, IDS] + ([CB] if bias else [])
    ids = np.where(IDS < 0, 2, IDS) if "ignore_index" in kwargs and kwargs["ignore_index"] != -100 \
        else IDS
    arrays[2] = ids
    _matches_torch(F.linear_cross_entropy, torch.nn.functional.linear_cross_entropy, arrays,
                   kwargs, by_name=names)


def test_linear_cross_entropy_class_weights_and_probabilities_match_torch():
    torch = pytest.importorskip("torch")
    probs = _label(np.abs(RNG.standard_normal((6, 5))))
    _matches_torch(F.linear_cross_entropy, torch.nn.functional.linear_cross_entropy,
                   [H, CW, probs, _label(np.abs(CB))], {"label_smoothing": 0.1},
                   by_name=("weight",))
    _matches_torch(F.linear_cross_entropy, torch.nn.functional.linear_cross_entropy,
                   [H, CW, IDS, _label(np.abs(CB))], {}, by_name=("weight",))


def test_linear_cross_entropy_refuses_torchs_chunking_options_by_name():
    with pytest.raises(ValueError, match="linear_cross_entropy: options"):
        F.linear_cross_entropy(ta.tensor(H), ta.tensor(CW), ta.tensor(IDS), options=object())


# ---- errors that name the function called, not an op inside it -----------------------------------


@pytest.mark.parametrize("impl", ["composite", "flash", "auto"])
@pytest.mark.parametrize("dtype", [bool, np.float64])
def test_sdpa_mask_of_a_wrong_shape_is_refused_in_sdpas_name(impl, dtype):
    q = ta.tensor(RNG.standard_normal((2, 3, 4)))
    mask = ta.tensor(np.ones((5, 5), dtype=dtype))
    if impl == "flash" and dtype is not bool:
        pytest.skip("flash takes bool masks only (refused as such)")
    with pytest.raises(ShapeError, match=r"^scaled_dot_product_attention: the scores \(2, 3, 3\) "
                                         r"cannot take a (float )?mask of shape \(5, 5\)"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask, impl=impl)
    with pytest.raises(ShapeError, match=r"^scaled_dot_product_attention: the scores"):
        F.attention_weights(q, q, attn_mask=mask)


@pytest.mark.parametrize("call,name", [
    (lambda: F.normalize(ta.zeros(2, 3), dim=5), "normalize"),
    (lambda: F.normalize(ta.zeros(2, 3, dtype=ta.int64)), "normalize"),
    (lambda: F.cosine_similarity(ta.zeros(2, 3, dtype=ta.int64), ta.zeros(2, 3, dtype=ta.int64)),
     "cosine_similarity"),
    (lambda: F.cosine_similarity(ta.zeros(2, 3), ta.zeros(2, 3), dim=4), "cosine_similarity"),
])
def test_normalize_and_cosine_similarity_errors_name_them(call, name):
    # (they are built on vector_norm; its name alone would not say which call failed)
    with pytest.raises((ShapeError, ta.errors.DimError, ta.errors.DTypeError),
                       match=rf"^{name}: "):
        call()
