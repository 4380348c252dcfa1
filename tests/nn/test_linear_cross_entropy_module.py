"""nn.LinearCrossEntropyLoss (torch 2.13) and F.linear_cross_entropy's K-dimensional form
against torch: values, dtypes, gradients (float64) and gradcheck for every cross-entropy
option, state-dict keys (a torch state dict loads), options accepted and ignored, refusals."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn import nn

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)
IN, C = 5, 4


def pair(in_features=IN, num_classes=C, **kw):
    """A torch module and a tinyattn one holding its state dict (float64)."""
    tw = kw.pop("weight", None)
    tmod = torch.nn.LinearCrossEntropyLoss(in_features, num_classes, dtype=torch.float64,
                                           weight=None if tw is None else torch.tensor(tw),
                                           **kw)
    kw.pop("options", None)
    mod = nn.LinearCrossEntropyLoss(in_features, num_classes, dtype=ta.float64,
                                    weight=None if tw is None else ta.tensor(tw), **kw)
    state = {k: v.detach().numpy() for k, v in tmod.state_dict().items()}
    mod.load_state_dict({k: ta.tensor(v) for k, v in state.items()})
    return tmod, mod


def check(tmod, mod, x, target):
    tx, ax = torch.tensor(x, requires_grad=True), ta.tensor(x, requires_grad=True)
    tt, at = torch.tensor(target), ta.tensor(target)
    want, got = tmod(tx, tt), mod(ax, at)
    assert got.shape == tuple(want.shape) and got.dtype == ta.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    c = rng.standard_normal(tuple(want.shape))
    tparams = [tx] + list(tmod.parameters())
    aparams = [ax] + list(mod.parameters())
    tgr = torch.autograd.grad((want * torch.tensor(c)).sum(), tparams)
    agr = ta.autograd.grad((got * ta.tensor(c)).sum(), aparams)
    for a, t in zip(agr, tgr, strict=True):
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-9, atol=1e-12)
    weight, bias = mod.linear.weight, mod.linear.bias

    def f(x_, w_, *b_):
        params = {"linear.weight": w_, **({"linear.bias": b_[0]} if b_ else {})}
        return ta.func.functional_call(mod, params, (x_, at))
    leaves = [ta.tensor(x, requires_grad=True), ta.tensor(weight.detach().numpy(),
                                                          requires_grad=True)]
    if bias is not None:
        leaves.append(ta.tensor(bias.detach().numpy(), requires_grad=True))
    assert ta.autograd.gradcheck(f, leaves)


IDS = np.array([0, 3, -100, 2])


@pytest.mark.parametrize("kw", [
    {},
    {"bias": True},
    {"reduction": "sum", "bias": True},
    {"reduction": "none", "ignore_index": 1},
    {"label_smoothing": 0.2, "weight": np.array([0.5, 1.0, 2.0, 1.5])},
    {"label_smoothing": 0.1, "reduction": "none", "bias": True},
])
def test_class_indices_match_torch(kw):
    tmod, mod = pair(**kw)
    ids = np.where(IDS == -100, kw.get("ignore_index", -100), IDS)  # (one ignored)
    check(tmod, mod, rng.standard_normal((4, IN)), ids)


def test_unbatched_input_and_class_probabilities():
    tmod, mod = pair(bias=True, label_smoothing=0.1)
    check(tmod, mod, rng.standard_normal(IN), np.array(2))
    probs = rng.dirichlet(np.ones(C), 3)
    check(tmod, mod, rng.standard_normal((3, IN)), probs)


@pytest.mark.parametrize("kw", [{}, {"bias": True, "reduction": "none"},
                                {"bias": True, "weight": np.array([1.0, 2.0, 0.5, 1.0]),
                                 "label_smoothing": 0.3}])
def test_k_dimensional_loss_with_flat_weight_and_bias_storage(kw):
    tmod, mod = pair(out_features=(3, 2), **kw)
    assert mod.linear.weight.shape == (C * 6, IN)
    if kw.get("bias"):
        assert mod.linear.bias.shape == (C * 6,)
    target = rng.integers(0, C, (2, 3, 2))
    target[0, 1, 1] = -100
    check(tmod, mod, rng.standard_normal((2, IN)), target)
    check(tmod, mod, rng.standard_normal((2, IN)), rng.dirichlet(np.ones(C), (2, 3, 2))
          .transpose(0, 3, 1, 2).copy())


def test_state_dict_keys_and_print_as_torchs():
    tmod, mod = pair(out_features=(2,), bias=True, weight=np.ones(C))
    assert list(mod.state_dict()) == list(tmod.state_dict()) == ["weight", "linear.weight",
                                                                  "linear.bias"]
    assert list(pair()[1].state_dict()) == list(pair()[0].state_dict())
    assert mod.extra_repr() == tmod.extra_repr()


def test_options_are_accepted_and_change_nothing():
    """torch's chunked path (options) gives the reference loss; tinyattn computes that one."""
    tmod, mod = pair(bias=True, options=torch.nn.LinearCrossEntropyOptions())
    mod.options = object()
    check(tmod, mod, rng.standard_normal((4, IN)), IDS)


def test_functional_k_dimensional_form_matches_torch():
    x, w, b = (rng.standard_normal(s) for s in ((3, IN), (C, 2, IN), (C, 2)))
    target = rng.integers(0, C, (3, 2))
    tl = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    al = [ta.tensor(a, requires_grad=True) for a in (x, w, b)]
    want = torch.nn.functional.linear_cross_entropy(tl[0], tl[1], torch.tensor(target),
                                                    linear_bias=tl[2], reduction="sum")
    got = F.linear_cross_entropy(al[0], al[1], ta.tensor(target), linear_bias=al[2],
                                 reduction="sum")
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    for a, t in zip(ta.autograd.grad(got, al), torch.autograd.grad(want, tl), strict=True):
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)
    assert ta.autograd.gradcheck(lambda *a: F.linear_cross_entropy(
        a[0], a[1], ta.tensor(target), linear_bias=a[2]), al)


@pytest.mark.parametrize("shapes,words", [
    (((2, 3, IN), (C, IN)), "input with 1 or 2 dims"),
    (((2, IN), (IN,)), "linear_weight with at least 2 dims"),
    (((2, IN + 1), (C, IN)), "in_features"),
    (((IN,), (C, 2, IN)), "needs a batched input"),
])
def test_functional_refusals_are_torchs_type(shapes, words):
    x, w = (rng.standard_normal(s) for s in shapes)
    target = np.zeros(shapes[0][:-1] + shapes[1][1:-1], dtype=np.int64)
    with pytest.raises(RuntimeError):
        torch.nn.functional.linear_cross_entropy(torch.tensor(x), torch.tensor(w),
                                                 torch.tensor(target))
    with pytest.raises(ta.errors.ShapeError, match=f"linear_cross_entropy.*{words}"):
        F.linear_cross_entropy(ta.tensor(x), ta.tensor(w), ta.tensor(target))


def test_functional_bias_of_the_wrong_shape_is_refused():
    x, w, b = (rng.standard_normal(s) for s in ((2, IN), (C, 2, IN), (C,)))
    target = np.zeros((2, 2), dtype=np.int64)
    with pytest.raises(RuntimeError):
        torch.nn.functional.linear_cross_entropy(torch.tensor(x), torch.tensor(w),
                                                 torch.tensor(target), linear_bias=torch.tensor(b))
    with pytest.raises(ta.errors.ShapeError, match=r"linear_cross_entropy.*linear_bias.*\(4, 2\)"):
        F.linear_cross_entropy(ta.tensor(x), ta.tensor(w), ta.tensor(target),
                               linear_bias=ta.tensor(b))


def test_module_refusals_are_torchs_type():
    for kw in ({"weight": np.ones(C + 1)}, {"label_smoothing": 1.5}):
        tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        akw = {k: ta.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        with pytest.raises(RuntimeError):
            torch.nn.LinearCrossEntropyLoss(IN, C, **tkw)
        with pytest.raises(RuntimeError, match="LinearCrossEntropyLoss"):
            nn.LinearCrossEntropyLoss(IN, C, **akw)
