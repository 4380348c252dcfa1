"""The losses and layers torch code uses, against torch: F.multi_margin_loss,
F.multilabel_margin_loss, F.triplet_margin_with_distance_loss, F.bilinear and F.embedding_bag
(values and gradients in float32 and float64, over shapes, reductions and options), their
modules (parameter shapes, torch's state dict loaded into ours, reprs), and the errors for bad
arguments."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = [(np.float32, 2e-5), (np.float64, 1e-10)]
rng = np.random.default_rng(7)


def _compare(ours_fn, theirs_fn, arrays, tol, consts=()):
    """ours_fn and theirs_fn on the float arrays (which get gradients) and the constant arrays:
    the same shape, values and gradients (for a random output gradient)."""
    ours = [ta.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    yo = ours_fn(*ours, *(ta.tensor(c) for c in consts))
    yt = theirs_fn(*theirs, *(torch.tensor(c) for c in consts))
    assert tuple(yo.shape) == tuple(yt.shape)
    assert yo.dtype == arrays[0].dtype
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    g = rng.standard_normal(tuple(yt.shape)).astype(arrays[0].dtype)
    (yo * ta.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol, atol=tol)


def _module_compare(ours, theirs, inputs, tol):
    """A module of ours with torch's state dict loaded: same forward and parameter grads."""
    ours.load_state_dict({k: ta.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for name, p in theirs.named_parameters():
        assert tuple(dict(ours.named_parameters())[name].shape) == tuple(p.shape)
    yo = ours(*(ta.tensor(a) for a in inputs))
    yt = theirs(*(torch.tensor(a) for a in inputs))
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    theirs.zero_grad()
    yo.sum().backward()
    yt.sum().backward()
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(dict(ours.named_parameters())[name].grad.numpy(),
                                   p.grad.numpy(), rtol=tol, atol=tol)


# ---- multi_margin_loss -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(5, 4), (4,)])
@pytest.mark.parametrize("p,margin,weighted", [(1, 1.0, False), (2, 1.0, False),
                                               (1, 0.7, True), (2, 1.5, True)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multi_margin_loss_as_torch(dtype, tol, shape, p, margin, weighted, reduction):
    x = rng.standard_normal(shape).astype(dtype)
    t = rng.integers(0, 4, shape[:-1])
    w = rng.uniform(0.5, 2.0, 4).astype(dtype) if weighted else None
    _compare(lambda x, t: F.multi_margin_loss(x, t, p, margin, None if w is None else
                                              ta.tensor(w), reduction=reduction),
             lambda x, t: TF.multi_margin_loss(x, t, p, margin, None if w is None else
                                               torch.tensor(w), reduction=reduction),
             [x], tol, consts=[t])


def test_multi_margin_loss_module_and_legacy_arguments():
    x, t, w = rng.standard_normal((6, 5)), rng.integers(0, 5, 6), rng.uniform(0.5, 2, 5)
    ours = nn.MultiMarginLoss(p=2, margin=0.5, weight=ta.tensor(w), reduction="sum")
    theirs = torch.nn.MultiMarginLoss(p=2, margin=0.5, weight=torch.tensor(w), reduction="sum")
    np.testing.assert_allclose(ours(ta.tensor(x), ta.tensor(t)).numpy(),
                               theirs(torch.tensor(x), torch.tensor(t)).numpy(), rtol=1e-12)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert repr(ours) == repr(theirs)
    with pytest.warns(UserWarning, match="reduction='none'"):
        got = F.multi_margin_loss(ta.tensor(x), ta.tensor(t), reduce=False)
    assert tuple(got.shape) == (6,)


@pytest.mark.parametrize("call,cls,match", [
    (lambda x, t: F.multi_margin_loss(x, t, p=3), ValueError, "only p == 1 and p == 2"),
    (lambda x, t: F.multi_margin_loss(x, t, reduction="avg"), ValueError, "reduction"),
    (lambda x, t: F.multi_margin_loss(x, t[:2]), RuntimeError,
     r"multi_margin_loss.*target \(2,\).*input \(3, 4\)"),
    (lambda x, t: F.multi_margin_loss(x, ta.tensor([0, 4, 1])), RuntimeError,
     "multi_margin_loss: target 4 is out of range for 4 classes"),
    (lambda x, t: F.multi_margin_loss(x, t, weight=ta.ones(3)), RuntimeError,
     r"multi_margin_loss: weight \(3,\).*4 classes"),
    (lambda x, t: F.multi_margin_loss(x, t, weight=ta.ones(4, 1)), ValueError,
     "weight must be one-dimensional"),
    (lambda x, t: F.multi_margin_loss(x.reshape(3, 2, 2), t), RuntimeError,
     r"multi_margin_loss.*\(3, 2, 2\)"),
    (lambda x, t: F.multi_margin_loss(x, t.float()), TypeError, "multi_margin_loss.*target"),
])
def test_multi_margin_loss_errors(call, cls, match):
    with pytest.raises(cls, match=match):
        call(ta.randn(3, 4), ta.tensor([0, 3, 1]))


# ---- multilabel_margin_loss --------------------------------------------------------------------

TARGETS = np.array([[3, 0, -1, 1, 2], [1, 2, 3, 0, 4], [-1, 0, 0, 0, 0], [2, 2, 4, -1, -1]])


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("batched", [True, False])
def test_multilabel_margin_loss_as_torch(dtype, tol, reduction, batched):
    x = rng.standard_normal((4, 5)).astype(dtype)
    t = TARGETS
    if not batched:
        x, t = x[3], t[3]
    _compare(lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction),
             lambda x, t: TF.multilabel_margin_loss(x, t, reduction=reduction),
             [x], tol, consts=[t])


def test_multilabel_margin_loss_module_and_errors():
    x = rng.standard_normal((4, 5))
    ours, theirs = nn.MultiLabelMarginLoss(reduction="none"), torch.nn.MultiLabelMarginLoss(
        reduction="none")
    np.testing.assert_allclose(ours(ta.tensor(x), ta.tensor(TARGETS)).numpy(),
                               theirs(torch.tensor(x), torch.tensor(TARGETS)).numpy())
    assert repr(ours) == repr(theirs)
    with pytest.raises(RuntimeError, match=r"multilabel_margin_loss: target \(4, 4\).*\(4, 5\)"):
        F.multilabel_margin_loss(ta.tensor(x), ta.tensor(TARGETS[:, :4]))
    for bad in (5, -2):
        t = TARGETS.copy()
        t[1, 2] = bad
        with pytest.raises(RuntimeError, match=f"multilabel_margin_loss: target {bad} is out"):
            F.multilabel_margin_loss(ta.tensor(x), ta.tensor(t))
    with pytest.raises(RuntimeError, match=r"multilabel_margin_loss.*\(2, 2, 5\)"):
        F.multilabel_margin_loss(ta.randn(2, 2, 5), ta.zeros(2, 2, 5, dtype=ta.int64))
    with pytest.raises(TypeError, match="multilabel_margin_loss.*target"):
        F.multilabel_margin_loss(ta.tensor(x), ta.tensor(TARGETS).float())


# ---- triplet_margin_with_distance_loss ---------------------------------------------------------


def _cosine_distance(lib):
    fn = F if lib is ta else TF
    return lambda a, b: 1.0 - fn.cosine_similarity(a, b, dim=-1)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(5, 4), (4,)])
@pytest.mark.parametrize("custom,swap,margin", [(False, False, 1.0), (False, True, 2.0),
                                                (True, False, 0.5), (True, True, 1.0)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_triplet_margin_with_distance_loss_as_torch(dtype, tol, shape, custom, swap, margin,
                                                    reduction):
    arrays = [rng.standard_normal(shape).astype(dtype) for _ in range(3)]
    kw = dict(margin=margin, swap=swap, reduction=reduction)
    _compare(lambda a, p, n: F.triplet_margin_with_distance_loss(
                 a, p, n, distance_function=_cosine_distance(ta) if custom else None, **kw),
             lambda a, p, n: TF.triplet_margin_with_distance_loss(
                 a, p, n, distance_function=_cosine_distance(torch) if custom else None, **kw),
             arrays, tol)


def test_triplet_margin_with_distance_loss_module_and_errors():
    a, p, n = (rng.standard_normal((5, 3)) for _ in range(3))
    ours = nn.TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance(p=1.0),
                                            swap=True)
    theirs = torch.nn.TripletMarginWithDistanceLoss(
        distance_function=torch.nn.PairwiseDistance(p=1.0), swap=True)
    np.testing.assert_allclose(ours(*map(ta.tensor, (a, p, n))).numpy(),
                               theirs(*map(torch.tensor, (a, p, n))).numpy(), rtol=1e-12)
    assert repr(nn.TripletMarginWithDistanceLoss()) == repr(
        torch.nn.TripletMarginWithDistanceLoss())
    with pytest.raises(ValueError, match="triplet_margin_with_distance_loss: margin must be "
                                         "greater than 0, got 0"):
        F.triplet_margin_with_distance_loss(ta.tensor(a), ta.tensor(p), ta.tensor(n), margin=0)
    with pytest.raises(RuntimeError, match=r"anchor \(5, 3\), positive \(5, 3\) and "
                                           r"negative \(3,\)"):
        F.triplet_margin_with_distance_loss(ta.tensor(a), ta.tensor(p), ta.tensor(n[0]))
    with pytest.raises(ValueError, match="reduction"):
        F.triplet_margin_with_distance_loss(ta.tensor(a), ta.tensor(p), ta.tensor(n),
                                            reduction="avg")


# ---- bilinear ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("lead", [(5,), (), (2, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_as_torch(dtype, tol, lead, bias):
    x1 = rng.standard_normal(lead + (3,)).astype(dtype)
    x2 = rng.standard_normal(lead + (2,)).astype(dtype)
    w = rng.standard_normal((4, 3, 2)).astype(dtype)
    arrays = [x1, x2, w] + ([rng.standard_normal(4).astype(dtype)] if bias else [])
    _compare(F.bilinear, torch.nn.functional.bilinear, arrays, tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_module_loads_torchs_state_dict(dtype, tol, bias):
    theirs = torch.nn.Bilinear(3, 2, 4, bias=bias, dtype=torch.float64 if dtype == np.float64
                               else torch.float32)
    ours = nn.Bilinear(3, 2, 4, bias=bias, dtype=dtype)
    assert ours.weight.dtype == dtype and repr(ours) == repr(theirs)
    assert (ours.in1_features, ours.in2_features, ours.out_features) == (3, 2, 4)
    bound = 1 / np.sqrt(3)  # torch's init: U(-1/√in1_features, 1/√in1_features)
    assert np.abs(ours.weight.numpy()).max() <= bound
    _module_compare(ours, theirs, [rng.standard_normal((5, 3)).astype(dtype),
                                   rng.standard_normal((5, 2)).astype(dtype)], tol)
    ours.reset_parameters()
    assert np.abs(ours.weight.numpy()).max() <= bound


@pytest.mark.parametrize("shapes,match", [
    (((5, 3), (4, 2), (4, 3, 2), (4,)), r"bilinear: .*input1 \(5, 3\) and input2 \(4, 2\)"),
    (((5, 3), (5, 2), (4, 2, 2), (4,)), r"bilinear: input1 \(5, 3\).*weight \(4, 2, 2\)"),
    (((5, 3), (5, 3), (4, 3, 2), (4,)), r"bilinear: input2 \(5, 3\).*weight \(4, 3, 2\)"),
    (((5, 3), (5, 2), (4, 3, 2), (3,)), r"bilinear: bias \(3,\).*weight \(4, 3, 2\)"),
    (((5, 3), (1, 5, 2), (4, 3, 2), (4,)), r"bilinear: .*input1 \(5, 3\) and input2 \(1, 5, 2"),
    (((5, 3), (5, 2), (3, 2), (4,)), r"bilinear: weight \(3, 2\)"),
])
def test_bilinear_errors(shapes, match):
    with pytest.raises(RuntimeError, match=match):
        F.bilinear(*(ta.randn(*s) for s in shapes))


# ---- embedding_bag -----------------------------------------------------------------------------

IDS = np.array([1, 2, 4, 5, 4, 3, 0, 1])
BAG_CASES = [  # (ids, offsets, include_last_offset, padding_idx)
    (IDS, np.array([0, 2, 2, 5]), False, None),  # an empty bag
    (IDS, np.array([0, 3, 8]), True, None),
    # the last bag runs to the end of the indices whatever the last offset says (ATen's)
    (IDS, np.array([0, 2, 5, 6]), True, None),
    (IDS, np.array([0, 3, 3]), True, None),  # an empty bag before the last
    (IDS, np.array([0, 2, 2, 5]), False, 4),
    (np.array([4, 4, 1, 2]), np.array([0, 2]), False, 4),  # a bag of padding only
    (IDS.reshape(2, 4), None, False, None),
    (IDS.reshape(4, 2), None, False, -2),
]


def _short_last_offset(ids, offsets, last):
    """A last offset short of the end of the indices: ATen's float32/float16 sum and mean fast
    path sums to it but counts the mean's bag to the end (its generic path, as tinyattn, and
    torch's documentation run the last bag to the end): compared with torch's float64 path."""
    return last and offsets[-1] != ids.size


def test_torchs_fast_path_is_what_the_float64_reference_avoids():
    ids, offsets, last, _ = BAG_CASES[2]
    assert _short_last_offset(ids, offsets, last)
    w = rng.standard_normal((6, 3))
    args = (torch.tensor(ids), torch.tensor(offsets))
    fast = TF.embedding_bag(args[0], torch.tensor(w, dtype=torch.float32), args[1], mode="sum",
                            include_last_offset=True)
    generic = TF.embedding_bag(args[0], torch.tensor(w), args[1], mode="sum",
                               include_last_offset=True)
    ours = F.embedding_bag(ta.tensor(ids), ta.tensor(w, dtype=ta.float32), ta.tensor(offsets),
                           mode="sum", include_last_offset=True)
    np.testing.assert_allclose(ours.numpy(), generic.numpy(), rtol=1e-5, atol=1e-5)
    assert not np.allclose(fast.numpy(), generic.numpy())


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", range(len(BAG_CASES)))
def test_embedding_bag_as_torch(dtype, tol, mode, case):
    ids, offsets, last, pad = BAG_CASES[case]
    w = rng.standard_normal((6, 3)).astype(dtype)
    consts = [ids] + ([] if offsets is None else [offsets])
    kw = dict(mode=mode, include_last_offset=last, padding_idx=pad)
    wide = offsets is not None and _short_last_offset(ids, offsets, last)
    _compare(lambda w, i, o=None: F.embedding_bag(i, w, o, **kw),
             lambda w, i, o=None: TF.embedding_bag(i, w.double() if wide else w, o,
                                                   **kw).to(w.dtype), [w], tol, consts)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("case", [0, 1, 2, 3, 4, 6])
def test_embedding_bag_per_sample_weights_as_torch(dtype, tol, case):
    ids, offsets, last, pad = BAG_CASES[case]
    w = rng.standard_normal((6, 3)).astype(dtype)
    psw = rng.standard_normal(ids.shape).astype(dtype)
    kw = dict(mode="sum", include_last_offset=last, padding_idx=pad)
    if offsets is not None and _short_last_offset(ids, offsets, last):
        _compare(lambda w, s, i, o: F.embedding_bag(i, w, o, per_sample_weights=s, **kw),
                 lambda w, s, i, o: TF.embedding_bag(
                     i, w.double(), o, per_sample_weights=s.double(), **kw).to(w.dtype),
                 [w, psw], tol, [ids, offsets])
    elif offsets is None:
        _compare(lambda w, s, i: F.embedding_bag(i, w, per_sample_weights=s, **kw),
                 lambda w, s, i: TF.embedding_bag(i, w, per_sample_weights=s, **kw),
                 [w, psw], tol, [ids])
    else:
        _compare(lambda w, s, i, o: F.embedding_bag(i, w, o, per_sample_weights=s, **kw),
                 lambda w, s, i, o: TF.embedding_bag(i, w, o, per_sample_weights=s, **kw),
                 [w, psw], tol, [ids, offsets])


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq_and_max_norm_as_torch(mode):
    # each row's gradient divided by its id's count in the input, as torch's F.embedding: torch
    # 2.13's CPU embedding_bag divides some rows by another id's count (a bug not copied)
    w = rng.standard_normal((6, 3)) * 2
    _compare(lambda w, i: F.embedding_bag(i, w, mode=mode, scale_grad_by_freq=True),
             lambda w, i: getattr(TF.embedding(i, w, scale_grad_by_freq=True), mode)(1),
             [w], 1e-10, [IDS.reshape(2, 4)])
    ours, theirs = ta.tensor(w), torch.tensor(w)
    yo = F.embedding_bag(ta.tensor(IDS), ours, ta.tensor([0, 3]), max_norm=1.0, mode=mode)
    yt = TF.embedding_bag(torch.tensor(IDS), theirs, torch.tensor([0, 3]), max_norm=1.0,
                          mode=mode)
    np.testing.assert_allclose(yo.numpy(), yt.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)  # renormed in place


@pytest.mark.parametrize("mode,pad", [("mean", None), ("max", 2), ("sum", -1)])
def test_embedding_bag_module_as_torch(mode, pad):
    theirs = torch.nn.EmbeddingBag(6, 3, mode=mode, padding_idx=pad, dtype=torch.float64)
    ours = nn.EmbeddingBag(6, 3, mode=mode, padding_idx=pad, dtype=np.float64)
    assert repr(ours) == repr(theirs)
    if pad is not None:
        assert not ours.weight.numpy()[pad].any()
    _module_compare(ours, theirs, [IDS, np.array([0, 3, 3, 6])], 1e-10)
    _module_compare(nn.EmbeddingBag(6, 3, mode=mode, padding_idx=pad, dtype=np.float64),
                    theirs, [IDS.reshape(2, 4)], 1e-10)
    w = rng.standard_normal((6, 3))
    frozen = nn.EmbeddingBag.from_pretrained(ta.tensor(w), mode=mode, padding_idx=pad)
    ref = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(w), mode=mode, padding_idx=pad)
    assert not frozen.weight.requires_grad and repr(frozen) == repr(ref)
    np.testing.assert_allclose(frozen(ta.tensor(IDS), ta.tensor([0, 5])).numpy(),
                               ref(torch.tensor(IDS), torch.tensor([0, 5])).numpy())
    assert nn.EmbeddingBag.from_pretrained(ta.tensor(w), freeze=False).weight.requires_grad


@pytest.mark.parametrize("call,cls,match", [
    (lambda i, w: F.embedding_bag(i, w), ValueError, "embedding_bag: offsets has to be"),
    (lambda i, w: F.embedding_bag(i.reshape(2, 4), w, ta.tensor([0])), ValueError,
     "embedding_bag: if input is 2D, then offsets has to be None"),
    (lambda i, w: F.embedding_bag(i.reshape(2, 2, 2), w), ValueError,
     r"embedding_bag: input has to be 1D or 2D.*\(2, 2, 2\)"),
    (lambda i, w: F.embedding_bag(i, w, ta.tensor([0, 2]), mode="min"), ValueError,
     "embedding_bag: mode has to be one of sum, mean or max"),
    (lambda i, w: F.embedding_bag(i, w[0], ta.tensor([0, 2])), ValueError,
     r"embedding_bag: weight has to be a 2D.*\(3,\)"),
    (lambda i, w: F.embedding_bag(i, w, ta.tensor([1, 2])), RuntimeError,
     "embedding_bag: offsets\\[0\\] has to be 0"),
    (lambda i, w: F.embedding_bag(i, w, ta.tensor([0, 9])), RuntimeError,
     "embedding_bag: offsets\\[-1\\] can not be greater than input's length 8"),
    (lambda i, w: F.embedding_bag(i, w, ta.tensor([0, 2]), per_sample_weights=ta.ones(7)),
     ValueError, r"embedding_bag: .*per_sample_weights \(7,\).*input \(8,\)"),
    (lambda i, w: F.embedding_bag(i, w, ta.tensor([0, 2]), mode="mean",
                                  per_sample_weights=ta.ones(8)), NotImplementedError,
     "per_sample_weights is only supported for mode='sum'"),
    (lambda i, w: F.embedding_bag(i, w, ta.tensor([0, 2]), mode="max",
                                  scale_grad_by_freq=True), ValueError,
     "max mode does not support scaling the gradient"),
    (lambda i, w: F.embedding_bag(i, w, ta.tensor([0, 2]), padding_idx=6), RuntimeError,
     "embedding_bag: padding_idx"),
    (lambda i, w: F.embedding_bag(i.float(), w, ta.tensor([0, 2])), TypeError,
     "embedding_bag: input"),
])
def test_embedding_bag_errors(call, cls, match):
    with pytest.raises(cls, match=match):
        call(ta.tensor(IDS), ta.randn(6, 3))
