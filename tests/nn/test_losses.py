"""Losses: each function gradient-checked in float64 and matched with torch (values and
gradients), each module matched with its function, and each bad input named in its error."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn
from tinyattn.gradcheck import check_gradients

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 5))
Y = rng.standard_normal((4, 5))
X3 = rng.standard_normal((3, 4, 2))  # (N, C, d1): classes in dim 1
PROBS = rng.uniform(0.05, 0.95, (4, 5))
BITS = (rng.random((4, 5)) > 0.5).astype(np.float64)
SOFT = rng.random((4, 5))
IDS = np.array([0, 3, 4, 1])
IDS_IGNORED = np.array([0, -100, 4, 1])
IDS3 = np.array([[0, 3], [1, 1], [2, -100]])
W5 = rng.uniform(0.5, 2.0, 5)
W4 = rng.uniform(0.5, 2.0, 4)
LOGP = X - np.log(np.exp(X).sum(1, keepdims=True))
TARGET_P = np.exp(Y) / np.exp(Y).sum(1, keepdims=True)
TARGET_P[0, 2] = 0.0  # a zero probability: t log t counts 0


def _c(a):
    return ("const", a)


# name, (input, target or other args...), kwargs, (indices of inputs that are differentiable)
CASES = [
    ("mse_loss", (X, Y), {}, (0, 1)),
    ("mse_loss", (X, Y), {"reduction": "sum"}, (0, 1)),
    ("mse_loss", (X, Y), {"reduction": "none"}, (0, 1)),
    ("l1_loss", (X, Y + 0.01), {}, (0, 1)),
    ("l1_loss", (X, Y + 0.01), {"reduction": "none"}, (0, 1)),
    ("smooth_l1_loss", (X, Y + 0.01), {}, (0, 1)),
    ("smooth_l1_loss", (X, Y + 0.01), {"beta": 0.5, "reduction": "sum"}, (0, 1)),
    ("smooth_l1_loss", (X, Y + 0.01), {"beta": 0.0}, (0, 1)),
    ("huber_loss", (X, Y + 0.01), {}, (0, 1)),
    ("huber_loss", (X, Y + 0.01), {"delta": 0.3, "reduction": "none"}, (0, 1)),
    ("nll_loss", (LOGP, _c(IDS)), {}, (0,)),
    ("nll_loss", (LOGP, _c(IDS_IGNORED)), {"weight": _c(W5)}, (0,)),
    ("nll_loss", (LOGP, _c(IDS_IGNORED)), {"weight": _c(W5), "reduction": "sum"}, (0,)),
    ("nll_loss", (X3, _c(IDS3)), {"reduction": "none"}, (0,)),
    ("nll_loss", (X[0], _c(np.array(2))), {}, (0,)),
    ("cross_entropy", (X, _c(IDS_IGNORED)), {"weight": _c(W5)}, (0,)),
    ("cross_entropy", (X, _c(IDS_IGNORED)), {"weight": _c(W5), "label_smoothing": 0.2}, (0,)),
    ("cross_entropy", (X, _c(IDS)), {"weight": _c(W5), "label_smoothing": 0.1,
                                     "reduction": "sum"}, (0,)),
    ("cross_entropy", (X3, _c(IDS3)), {"weight": _c(W4), "label_smoothing": 0.1,
                                       "reduction": "none"}, (0,)),
    ("cross_entropy", (X, TARGET_P), {}, (0, 1)),
    ("cross_entropy", (X, TARGET_P), {"weight": _c(W5), "label_smoothing": 0.3}, (0, 1)),
    ("cross_entropy", (X3, np.abs(X3)), {"reduction": "none"}, (0, 1)),
    ("cross_entropy", (X[0], TARGET_P[1]), {"reduction": "sum"}, (0, 1)),
    ("binary_cross_entropy", (PROBS, BITS), {}, (0,)),
    ("binary_cross_entropy", (PROBS, SOFT), {"weight": _c(W5), "reduction": "sum"}, (0, 1)),
    ("binary_cross_entropy", (PROBS, SOFT), {"reduction": "none"}, (0, 1)),
    ("binary_cross_entropy_with_logits", (X * 3, BITS), {}, (0,)),
    ("binary_cross_entropy_with_logits", (X * 3, SOFT), {"pos_weight": _c(W5)}, (0, 1)),
    ("binary_cross_entropy_with_logits", (X * 3, SOFT),
     {"weight": _c(W5[:, None][:4]), "pos_weight": _c(W5), "reduction": "none"}, (0, 1)),
    ("kl_div", (LOGP, TARGET_P), {"reduction": "batchmean"}, (0,)),
    ("kl_div", (LOGP, TARGET_P), {"reduction": "sum"}, (0,)),
    ("kl_div", (LOGP, LOGP[::-1].copy()), {"reduction": "none", "log_target": True}, (0, 1)),
]
IDS_OF = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def _ours(args, kwargs, wrt):
    def make(i, a):
        if isinstance(a, tuple):
            return ta.tensor(a[1])
        return ta.tensor(np.array(a, dtype=np.float64), requires_grad=i in wrt)
    return ([make(i, a) for i, a in enumerate(args)],
            {k: make(-1, v) for k, v in kwargs.items()} if kwargs else {})


@pytest.mark.parametrize("name,args,kwargs,wrt", CASES, ids=IDS_OF)
def test_loss_gradients_match_finite_differences(name, args, kwargs, wrt):
    inputs, kw = _ours(args, {k: v for k, v in kwargs.items()
                              if isinstance(v, tuple)}, wrt)
    kw.update({k: v for k, v in kwargs.items() if not isinstance(v, tuple)})
    report = check_gradients(lambda *xs: getattr(F, name)(*xs, **kw), inputs)
    assert report.ok, report.message


@pytest.mark.parametrize("name,args,kwargs,wrt", CASES, ids=IDS_OF)
def test_loss_matches_torch(name, args, kwargs, wrt):
    torch = pytest.importorskip("torch")
    inputs, kw = _ours(args, {k: v for k, v in kwargs.items() if isinstance(v, tuple)}, wrt)
    kw.update({k: v for k, v in kwargs.items() if not isinstance(v, tuple)})
    theirs = [torch.tensor(x.numpy(), requires_grad=x.requires_grad) for x in inputs]
    tkw = {k: torch.tensor(v.numpy()) if isinstance(v, ta.Tensor) else v for k, v in kw.items()}
    got = getattr(F, name)(*inputs, **kw)
    want = getattr(torch.nn.functional, name)(*theirs, **tkw)
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    cot = rng.standard_normal(got.shape)
    got.backward(ta.tensor(cot))
    want.backward(torch.tensor(cot))
    for x, tx in zip(inputs, theirs, strict=True):
        if x.requires_grad:
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_cross_entropy_all_ignored_is_nan_like_torch():
    loss = F.cross_entropy(ta.tensor(X), ta.tensor([-100] * 4), weight=ta.tensor(W5))
    assert np.isnan(loss.item())


CE_PATHS = [(IDS, None), (IDS, W5), (TARGET_P, None), (TARGET_P, W5)]
CE_PATH_IDS = ["fused", "weighted", "probabilities", "weighted-probabilities"]


@pytest.mark.parametrize("target,weight", CE_PATHS, ids=CE_PATH_IDS)
def test_cross_entropy_refuses_a_bad_label_smoothing_or_reduction_on_every_path(target, weight):
    """The fused op (indices, no weight) used to compute with label_smoothing 1.5 and to call a
    bad reduction a ShapeError: every path says ValueError, as the composed ones did."""
    x, t = ta.tensor(X), ta.tensor(target)
    w = None if weight is None else ta.tensor(weight)
    for smoothing in (1.5, -0.1, float("nan")):
        with raises(ValueError, "cross_entropy", "label_smoothing", r"\[0, 1\]", str(smoothing)):
            F.cross_entropy(x, t, w, label_smoothing=smoothing)
        with raises(ValueError, "cross_entropy", "label_smoothing"):
            nn.CrossEntropyLoss(w, label_smoothing=smoothing)(x, t)
    for reduction in ("avg", "batchmean"):
        with raises(ValueError, "cross_entropy", "reduction", repr(reduction)) as info:
            F.cross_entropy(x, t, w, reduction=reduction)
        assert type(info.value) is ValueError  # not a ShapeError: no shape is wrong
        with raises(ValueError, "cross_entropy", "reduction", repr(reduction)):
            nn.CrossEntropyLoss(w, reduction=reduction)(x, t)
    for smoothing in (0.0, 1.0):  # the ends are allowed
        assert np.isfinite(F.cross_entropy(x, t, w, label_smoothing=smoothing).item())


def test_cross_entropy_with_probabilities_refuses_an_ignore_index_as_torch():
    torch = pytest.importorskip("torch")
    x, p = ta.tensor(X), ta.tensor(TARGET_P)
    for ignore_index in (0, 2):
        with raises(ValueError, "cross_entropy", f"ignore_index={ignore_index}",
                    "not supported for floating point target"):
            F.cross_entropy(x, p, ignore_index=ignore_index)
        with raises(ValueError, "cross_entropy", "ignore_index"):
            nn.CrossEntropyLoss(ignore_index=ignore_index)(x, p)
        with pytest.raises(RuntimeError, match="ignore_index is not supported"):
            torch.nn.functional.cross_entropy(torch.tensor(X), torch.tensor(TARGET_P),
                                              ignore_index=ignore_index)
    for ignore_index in (-100, -1):  # no class: torch takes it, and so does tinyattn
        got = F.cross_entropy(x, p, ignore_index=ignore_index).item()
        want = torch.nn.functional.cross_entropy(torch.tensor(X), torch.tensor(TARGET_P),
                                                 ignore_index=ignore_index).item()
        assert got == pytest.approx(want, rel=1e-12)


def test_binary_cross_entropy_clamps_the_log_at_minus_100():
    torch = pytest.importorskip("torch")
    x, t = np.array([0.0, 1.0, 0.5]), np.array([1.0, 0.0, 1.0])
    got = F.binary_cross_entropy(ta.tensor(x), ta.tensor(t), reduction="none")
    want = torch.nn.functional.binary_cross_entropy(torch.tensor(x), torch.tensor(t),
                                                    reduction="none")
    np.testing.assert_allclose(got.numpy(), want.numpy())


def test_bce_with_logits_is_stable_for_huge_logits():
    x = ta.tensor([1e4, -1e4, 0.0], requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(x, ta.tensor([0.0, 1.0, 1.0]), reduction="sum")
    assert np.isfinite(loss.item()) and loss.item() == pytest.approx(2e4 + np.log(2))
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, -1.0, -0.5])


def test_one_hot_matches_torch():
    torch = pytest.importorskip("torch")
    ids = np.array([[0, 2], [3, 1]])
    for n in (-1, 6):
        got = F.one_hot(ta.tensor(ids), n)
        want = torch.nn.functional.one_hot(torch.tensor(ids), n)
        assert got.dtype == np.int64 and not got.requires_grad
        np.testing.assert_array_equal(got.numpy(), want.numpy())


MODULES = [
    (nn.MSELoss(reduction="sum"), "mse_loss", (X, Y), {"reduction": "sum"}),
    (nn.L1Loss(), "l1_loss", (X, Y), {}),
    (nn.SmoothL1Loss(beta=0.5), "smooth_l1_loss", (X, Y), {"beta": 0.5}),
    (nn.HuberLoss(delta=0.5), "huber_loss", (X, Y), {"delta": 0.5}),
    (nn.NLLLoss(weight=ta.tensor(W5)), "nll_loss", (LOGP, IDS), {"weight": ta.tensor(W5)}),
    (nn.CrossEntropyLoss(weight=ta.tensor(W5), label_smoothing=0.1), "cross_entropy",
     (X, IDS), {"weight": ta.tensor(W5), "label_smoothing": 0.1}),
    (nn.BCELoss(), "binary_cross_entropy", (PROBS, BITS), {}),
    (nn.BCEWithLogitsLoss(pos_weight=ta.tensor(W5)), "binary_cross_entropy_with_logits",
     (X, BITS), {"pos_weight": ta.tensor(W5)}),
    (nn.KLDivLoss(reduction="batchmean", log_target=True), "kl_div", (LOGP, LOGP[::-1]),
     {"reduction": "batchmean", "log_target": True}),
]


@pytest.mark.parametrize("module,name,args,kwargs", MODULES, ids=[m[1] for m in MODULES])
def test_loss_module_calls_its_function(module, name, args, kwargs):
    args = [ta.tensor(a) for a in args]
    np.testing.assert_array_equal(module(*args).numpy(), getattr(F, name)(*args, **kwargs).numpy())


def test_loss_module_weights_are_buffers():
    m = nn.BCEWithLogitsLoss(weight=ta.tensor(W5), pos_weight=ta.tensor(W5))
    assert list(m.state_dict()) == ["weight", "pos_weight"]
    assert list(m.parameters()) == []
    m.double()
    assert m.weight.dtype == np.float64


def raises(cls, *fragments):
    return pytest.raises(cls, match=".*".join(fragments))


def test_bad_inputs_name_the_loss_and_the_shapes():
    with raises(ta.ShapeError, "mse_loss", r"\(4, 5\)", r"\(3,\)", "do not broadcast"):
        F.mse_loss(ta.tensor(X), ta.randn(3))
    with pytest.warns(UserWarning, match=r"l1_loss.*\(5,\).*\(4, 5\).*broadcast"):
        F.l1_loss(ta.tensor(X), ta.tensor(Y[0]))
    with raises(ta.ShapeError, "binary_cross_entropy", r"\(4, 5\)", r"\(5,\)", "same shape"):
        F.binary_cross_entropy(ta.tensor(PROBS), ta.tensor(BITS[0]))
    with raises(ValueError, "binary_cross_entropy", r"\[0, 1\]", "with_logits"):
        F.binary_cross_entropy(ta.tensor(X), ta.tensor(BITS))
    with raises(ta.ShapeError, "binary_cross_entropy_with_logits", "pos_weight", r"\(3,\)",
                r"\(4, 5\)"):
        F.binary_cross_entropy_with_logits(ta.tensor(X), ta.tensor(BITS), pos_weight=ta.ones(3))
    with raises(ta.ShapeError, "nll_loss", r"\(4, 5\)", r"\(4,\)", r"\(3,\)"):
        F.nll_loss(ta.tensor(LOGP), ta.tensor([0, 1, 2]))
    with raises(ta.DTypeError, "nll_loss", "integer class indices", "float"):
        F.nll_loss(ta.tensor(LOGP), ta.tensor([0.0, 1.0, 2.0, 3.0]))
    with raises(ta.DimError, "nll_loss", "target 5", "5 classes"):
        F.nll_loss(ta.tensor(LOGP), ta.tensor([0, 1, 2, 5]))
    with raises(ta.ShapeError, "cross_entropy", "one value per class", r"\(5,\)", r"\(4,\)"):
        F.cross_entropy(ta.tensor(X), ta.tensor(IDS), weight=ta.ones(4))
    with raises(ValueError, "huber_loss", "delta", "> 0"):
        F.huber_loss(ta.tensor(X), ta.tensor(Y), delta=0)
    with raises(ValueError, "kl_div", "reduction", "batchmean", "'avg'"):
        F.kl_div(ta.tensor(X), ta.tensor(Y), reduction="avg")
    with raises(ta.DTypeError, "mse_loss", "floating point", "int64"):
        F.mse_loss(ta.tensor([1, 2]), ta.tensor([1, 2]))
    with raises(ta.DimError, "one_hot", "0..2", r"num_classes=3", r"\[0, 3\]"):
        F.one_hot(ta.tensor([0, 3]), 3)
    with raises(ta.DTypeError, "one_hot", "integer", "float32"):
        F.one_hot(ta.tensor([0.0, 1.0]))


@pytest.mark.parametrize("which, bad", [("target", 1.5), ("target", -0.1), ("target", np.nan),
                                        ("input", 1.5), ("input", -0.5), ("input", np.nan)])
def test_binary_cross_entropy_refuses_values_outside_0_1_as_torch(which, bad):
    """torch (CPU): "all elements of target should be between 0 and 1" (of input too), NaN
    included; tinyattn computed a loss for such targets (and for a NaN input)."""
    torch = pytest.importorskip("torch")
    x, t = np.array([0.2, 0.7, 0.5]), np.array([1.0, 0.0, 0.3])
    (x if which == "input" else t)[1] = bad
    with pytest.raises(RuntimeError, match=f"all elements of {which} should be between 0 and 1"):
        torch.nn.functional.binary_cross_entropy(torch.tensor(x), torch.tensor(t))
    shown = "a NaN" if np.isnan(bad) else f"{bad:g}"
    for call in (F.binary_cross_entropy, nn.BCELoss()):
        with raises(ValueError, "^binary_cross_entropy", f"{which} values", r"\[0, 1\]", shown):
            call(ta.tensor(x), ta.tensor(t))


# ---- binary_cross_entropy at the edges: torch's values and gradients --------------------------

EDGE_X = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 0.5, 1e-13, 1 - 1e-13, 1e-300, 0.3])
EDGE_T = np.array([0.0, 1.0, 1.0, 0.0, 0.3, 1.0, 0.0, 0.6, 0.2, 0.7])
EDGE_W = rng.uniform(0.5, 2.0, EDGE_X.shape)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_at_0_and_1_matches_torch(reduction, weighted):
    """x exactly 0 or 1 (and within 1e-12 of them): each log clamped at -100 in the value,
    and torch's gradients: g w (x - t) / max(x (1 - x), 1e-12) for x, g w (max(log(1-x), -100)
    - max(log x, -100)) for the (soft) target, never 0 or of the wrong sign."""
    torch = pytest.importorskip("torch")
    x = ta.tensor(EDGE_X, requires_grad=True)
    t = ta.tensor(EDGE_T, requires_grad=True)
    tx, tt = (torch.tensor(a, requires_grad=True) for a in (EDGE_X, EDGE_T))
    w = {"weight": ta.tensor(EDGE_W)} if weighted else {}
    tw = {"weight": torch.tensor(EDGE_W)} if weighted else {}
    got = F.binary_cross_entropy(x, t, reduction=reduction, **w)
    want = torch.nn.functional.binary_cross_entropy(tx, tt, reduction=reduction, **tw)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    cot = rng.standard_normal(got.shape)
    got.backward(ta.tensor(cot))
    want.backward(torch.tensor(cot))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-12)


def test_binary_cross_entropy_gradients_check_inside_0_1_and_keep_float32():
    """The gradient (torch's formula, carried by a term that is 0 in the forward) against finite
    differences in float64 for x and a soft target, with weights and each reduction."""
    for kwargs in ({}, {"reduction": "sum", "weight": ta.tensor(W5)}, {"reduction": "none"}):
        x = ta.tensor(PROBS, requires_grad=True)
        t = ta.tensor(SOFT, requires_grad=True)
        report = check_gradients(lambda a, b, kw=kwargs: F.binary_cross_entropy(a, b, **kw),
                                 [x, t])
        assert report.ok, report.message
    x32 = ta.tensor(EDGE_X.astype(np.float32), requires_grad=True)
    loss = F.binary_cross_entropy(x32, ta.tensor(EDGE_T.astype(np.float32)), reduction="none")
    assert loss.dtype == np.float32 and np.isfinite(loss.numpy()).all()
    loss.sum().backward()
    assert x32.grad.dtype == np.float32 and np.isfinite(x32.grad.numpy()).all()


def test_binary_cross_entropy_of_float16_edges_stays_finite():
    x = ta.tensor(np.array([0.0, 1.0, 6e-8, 0.5], dtype=np.float16), requires_grad=True)
    loss = F.binary_cross_entropy(x, ta.tensor(np.array([1.0, 0.0, 0.0, 1.0], np.float16)),
                                  reduction="sum")
    assert loss.dtype == np.float16 and np.isfinite(loss.item())
    loss.backward()
    assert not np.isnan(x.grad.numpy()).any()


# ---- cross_entropy of 0-d logits, one_hot's num_classes ---------------------------------------


@pytest.mark.parametrize("target, weight", [(np.array(0), None), (np.array(0), np.ones(1)),
                                            (np.array(1.0), None)],
                         ids=["fused", "weighted", "probabilities"])
def test_cross_entropy_of_0d_logits_says_it_needs_a_dim(target, weight):
    torch = pytest.importorskip("torch")
    with pytest.raises((RuntimeError, IndexError)):
        torch.nn.functional.cross_entropy(torch.tensor(1.0), torch.tensor(target))
    kw = {} if weight is None else {"weight": ta.tensor(weight)}
    with raises(ta.ShapeError, r"^cross_entropy: input must have at least 1 dim \(classes in "
                               r"dim 1, or 0 if 1-D\), got input \(\) and target \(\)"):
        F.cross_entropy(ta.tensor(np.array(1.0)), ta.tensor(target), **kw)
    with raises(ta.ShapeError, r"^cross_entropy: input must have at least 1 dim"):
        from tinyattn.ops import softmax as sm
        sm.cross_entropy(ta.tensor(np.array(1.0)), ta.tensor(np.array(0)))


@pytest.mark.parametrize("num_classes", [-2, -7])
def test_one_hot_refuses_num_classes_below_minus_1(num_classes):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.nn.functional.one_hot(torch.tensor([1]), num_classes)
    with raises(ValueError, rf"^one_hot: num_classes must be -1 \(the largest id \+ 1\) or at "
                            rf"least 0, got {num_classes}$"):
        F.one_hot(ta.tensor([1]), num_classes)
    with raises(ta.DimError, r"one_hot: class ids must be in 0..-1 for num_classes=0"):
        F.one_hot(ta.tensor([1]), 0)  # (0 is a number of classes: no id fits)
    assert F.one_hot(ta.tensor(np.zeros(0, dtype=np.int64)), 0).shape == (0, 0)
