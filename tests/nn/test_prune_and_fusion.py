"""nn.utils.prune (every pruning method's masks, the pruned module's forward and gradients,
remove, global and iterative pruning), nn.utils.fusion (conv/linear + batch norm folded),
skip_init, clip_grad_norm, rnn.unpad_sequence and parametrize's
transfer_parametrizations_and_params: against torch in float64."""

import copy
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn
from tinyattn.nn.utils import parametrize as P
from tinyattn.nn.utils import prune

torch = pytest.importorskip("torch")
tprune = pytest.importorskip("torch.nn.utils.prune")
rng = np.random.default_rng(7)


def _a(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def _ta(t):
    return ta.tensor(t.detach().numpy().copy())


def _close(ours, theirs, tol=1e-10):
    np.testing.assert_allclose(_a(ours), _a(theirs), rtol=tol, atol=tol)


def _copy_state(tm, am):
    """tinyattn's module takes torch's module's state (values only)."""
    am.load_state_dict({k: _ta(v) for k, v in tm.state_dict().items()})


def _linears(n_in=5, n_out=6):
    tm = torch.nn.Linear(n_in, n_out).double()
    am = nn.Linear(n_in, n_out, dtype=ta.float64)
    _copy_state(tm, am)
    return tm, am


def _convs():
    tm = torch.nn.Conv2d(3, 4, 3).double()
    am = nn.Conv2d(3, 4, 3, dtype=ta.float64)
    _copy_state(tm, am)
    return tm, am


def _same_pruning(tm, am, name="weight"):
    _close(getattr(am, name + "_mask"), getattr(tm, name + "_mask"), 0)
    _close(getattr(am, name), getattr(tm, name), 0)
    assert list(am.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in am.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in am.named_buffers()] == [n for n, _ in tm.named_buffers()]


# --- the pruning methods' masks -------------------------------------------------------------

@pytest.mark.parametrize("amount", [0.0, 0.3, 0.5, 1.0, 7, 0, 30])
def test_l1_unstructured_masks_as_torch(amount):
    tm, am = _linears()
    tprune.l1_unstructured(tm, "weight", amount)
    assert prune.l1_unstructured(am, "weight", amount) is am
    _same_pruning(tm, am)
    assert prune.is_pruned(am) and isinstance(am.weight_orig, nn.Parameter)
    assert not isinstance(am.weight, nn.Parameter) and am.weight_mask.dtype == ta.float64
    assert "weight" not in dict(am.named_parameters())


def test_l1_unstructured_with_importance_scores_as_torch():
    tm, am = _linears()
    scores = rng.standard_normal((6, 5))
    tprune.l1_unstructured(tm, "weight", 0.4, importance_scores=torch.tensor(scores))
    prune.l1_unstructured(am, "weight", 0.4, importance_scores=ta.tensor(scores))
    _same_pruning(tm, am)
    kept = np.abs(scores) > np.sort(np.abs(scores).ravel())[11]
    np.testing.assert_array_equal(am.weight_mask.numpy() == 1, kept)


def test_l1_unstructured_ties_keep_torch_count():
    w = np.array([[1.0, -1.0, 2.0, 1.0], [0.5, 1.0, -2.0, 1.0]])
    tm, am = torch.nn.Linear(4, 2, bias=False).double(), nn.Linear(4, 2, bias=False,
                                                                     dtype=ta.float64)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w))
    _copy_state(tm, am)
    tprune.l1_unstructured(tm, "weight", 3)
    prune.l1_unstructured(am, "weight", 3)
    mask = am.weight_mask.numpy()
    assert mask.sum() == tm.weight_mask.sum().item() == 5
    assert mask[1, 0] == 0  # the smallest one always goes
    assert np.all(mask[:, 2] == 1)  # the largest ones always stay
    assert np.sum(mask[np.abs(w) == 1.0]) == 3  # two of the five tied 1s pruned


@pytest.mark.parametrize("n", [1, 2, 3, 0.5, float("inf"), -float("inf")])
@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_ln_structured_masks_as_torch(n, dim):
    tm, am = _convs()
    tprune.ln_structured(tm, "weight", 0.5, n, dim)
    assert prune.ln_structured(am, "weight", 0.5, n, dim) is am
    _same_pruning(tm, am)


@pytest.mark.parametrize("n", ["fro", "nuc"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_ln_structured_matrix_norms_as_torch(n, dim):
    tm = torch.nn.Conv1d(4, 6, 5).double()
    am = nn.Conv1d(4, 6, 5, dtype=ta.float64)
    _copy_state(tm, am)
    tprune.ln_structured(tm, "weight", 2, n, dim)
    prune.ln_structured(am, "weight", 2, n, dim)
    _same_pruning(tm, am)
    for lib, m in ((tprune, _convs()[0]), (prune, _convs()[1])):  # 3 dims to reduce: refused
        with pytest.raises(RuntimeError):
            lib.ln_structured(m, "weight", 1, n, 0)
        assert not lib.is_pruned(m)


def test_ln_structured_int_amount_and_importance_scores_as_torch():
    tm, am = _convs()
    scores = rng.standard_normal((4, 3, 3, 3))
    tprune.ln_structured(tm, "weight", 2, 1, 1, importance_scores=torch.tensor(scores))
    prune.ln_structured(am, "weight", 2, 1, 1, importance_scores=ta.tensor(scores))
    _same_pruning(tm, am)
    channels = am.weight_mask.numpy().sum(axis=(0, 2, 3))
    assert sorted(channels.tolist()) == [0, 0, 36]  # 1 of 3 input channels kept, whole


def test_random_unstructured_count_and_seed():
    _, am = _linears()
    ta.manual_seed(3)
    prune.random_unstructured(am, "weight", 0.4)
    mask = am.weight_mask.numpy()
    assert set(np.unique(mask)) == {0.0, 1.0} and (mask == 0).sum() == 12  # round(0.4 * 30)
    np.testing.assert_array_equal(am.weight.numpy(), am.weight_orig.numpy() * mask)
    _, again = _linears()
    ta.manual_seed(3)
    prune.random_unstructured(again, "weight", 0.4)
    np.testing.assert_array_equal(again.weight_mask.numpy(), mask)
    _, other = _linears()
    ta.manual_seed(4)
    prune.random_unstructured(other, "weight", 0.4)
    assert not np.array_equal(other.weight_mask.numpy(), mask)
    tm, _ = _linears()
    tprune.random_unstructured(tm, "weight", 0.4)
    assert list(am.state_dict()) == list(tm.state_dict())


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_random_structured_prunes_whole_channels(dim):
    _, am = _convs()
    ta.manual_seed(0)
    prune.random_structured(am, "weight", 0.5, dim)
    mask = am.weight_mask.numpy()
    d = dim % 4
    per_channel = np.moveaxis(mask, d, 0).reshape(mask.shape[d], -1)
    assert np.all((per_channel == 0).all(1) | (per_channel == 1).all(1))
    assert (per_channel == 0).all(1).sum() == round(0.5 * mask.shape[d])
    _, again = _convs()
    ta.manual_seed(0)
    prune.random_structured(again, "weight", 0.5, dim)
    np.testing.assert_array_equal(again.weight_mask.numpy(), mask)


def test_identity_and_custom_from_mask_as_torch():
    tm, am = _linears()
    tprune.identity(tm, "bias")
    prune.identity(am, "bias")
    _same_pruning(tm, am, "bias")
    assert np.all(am.bias_mask.numpy() == 1)
    mask = (rng.random((6, 5)) > 0.5).astype(np.float64)
    tprune.custom_from_mask(tm, "weight", torch.tensor(mask))
    prune.custom_from_mask(am, "weight", ta.tensor(mask))
    _same_pruning(tm, am)
    np.testing.assert_array_equal(am.weight_mask.numpy(), mask)


def test_prune_method_on_a_tensor_as_torch_with_gradients():
    w = rng.standard_normal((4, 6))
    tw = torch.tensor(w, requires_grad=True)
    aw = ta.tensor(w, requires_grad=True)
    theirs = tprune.L1Unstructured(0.5).prune(tw)
    ours = prune.L1Unstructured(0.5).prune(aw)
    _close(ours, theirs, 0)
    g = rng.standard_normal((4, 6))
    theirs.backward(torch.tensor(g))
    ours.backward(ta.tensor(g))
    _close(aw.grad, tw.grad, 0)
    fn = prune.LnStructured(0.5, 2, dim=0).prune
    _close(fn(aw), tprune.LnStructured(0.5, 2, dim=0).prune(tw), 0)
    assert ta.autograd.gradcheck(fn, (aw,))
    assert ta.autograd.gradgradcheck(lambda t: fn(t) ** 2, (aw,))
    scores = ta.tensor(rng.standard_normal((4, 6)))
    _close(prune.L1Unstructured(3).prune(aw, importance_scores=scores),
           tprune.L1Unstructured(3).prune(tw, importance_scores=torch.tensor(scores.numpy())), 0)


# --- the pruned module: forward, gradients, remove -----------------------------------------

@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_pruned_module_forward_and_gradients_as_torch(kind):
    tm, am = _linears() if kind == "linear" else _convs()
    shape = (3, 5) if kind == "linear" else (2, 3, 6, 6)
    tprune.l1_unstructured(tm, "weight", 0.5)
    prune.l1_unstructured(am, "weight", 0.5)
    x = rng.standard_normal(shape)
    tx, ax = torch.tensor(x, requires_grad=True), ta.tensor(x, requires_grad=True)
    with torch.no_grad():  # the hook recomputes the weight from the new orig at each call
        tm.weight_orig.mul_(1.5)
    with ta.no_grad():
        am.weight_orig.mul_(1.5)
    tout, aout = tm(tx), am(ax)
    _close(aout, tout)
    g = rng.standard_normal(tuple(tout.shape))
    tout.backward(torch.tensor(g))
    aout.backward(ta.tensor(g))
    _close(ax.grad, tx.grad)
    _close(am.weight_orig.grad, tm.weight_orig.grad)
    _close(am.bias.grad, tm.bias.grad)
    assert np.all(am.weight_orig.grad.numpy()[am.weight_mask.numpy() == 0] == 0)
    assert am.weight_mask.grad is None and not am.weight_mask.requires_grad
    assert ta.autograd.gradcheck(lambda t: am(t), (ax,))


def test_remove_makes_pruning_permanent_as_torch():
    tm, am = _convs()
    tprune.ln_structured(tm, "weight", 0.5, 2, 0)
    prune.ln_structured(am, "weight", 0.5, 2, 0)
    orig = am.weight_orig
    pruned = am.weight.numpy().copy()
    tprune.remove(tm, "weight")
    assert prune.remove(am, "weight") is am
    assert am.weight is orig and isinstance(am.weight, nn.Parameter) and am.weight.requires_grad
    np.testing.assert_array_equal(am.weight.numpy(), pruned)
    _close(am.weight, tm.weight, 0)
    assert list(am.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    assert not prune.is_pruned(am) and len(am._forward_pre_hooks) == 0
    assert not hasattr(am, "weight_orig") and not hasattr(am, "weight_mask")
    with pytest.raises(ValueError, match="weight"):
        tprune.remove(tm, "weight")
    with pytest.raises(ValueError, match="has to be pruned"):
        prune.remove(am, "weight")


def test_is_pruned_looks_at_submodules():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert not prune.is_pruned(model)
    prune.random_unstructured(model[2], "weight", 2)
    assert prune.is_pruned(model) and not prune.is_pruned(model[0])


def test_state_dict_of_torch_pruned_module_loads():
    tm, am = _linears()
    tprune.l1_unstructured(tm, "weight", 0.3)
    prune.identity(am, "weight")
    _copy_state(tm, am)
    x = rng.standard_normal((2, 5))
    _close(am(ta.tensor(x)), tm(torch.tensor(x)))
    _close(am.weight_mask, tm.weight_mask, 0)


# --- global and iterative pruning ----------------------------------------------------------

def test_global_unstructured_across_two_modules_as_torch():
    (t1, a1), (t2, a2) = _linears(5, 6), _linears(6, 3)
    tparams = [(t1, "weight"), (t2, "weight"), (t2, "bias")]
    aparams = [(a1, "weight"), (a2, "weight"), (a2, "bias")]
    tprune.global_unstructured(tparams, tprune.L1Unstructured, amount=0.6)
    assert prune.global_unstructured(aparams, prune.L1Unstructured, amount=0.6) is None
    for (tm, name), (am, _) in zip(tparams, aparams, strict=True):
        _same_pruning(tm, am, name)
    total = sum(am_.__dict__[n + "_mask"].numpy().size for am_, n in aparams)
    zeros = sum((am_.__dict__[n + "_mask"].numpy() == 0).sum() for am_, n in aparams)
    assert zeros == round(0.6 * total)
    # again, on top: the new mask is computed on the kept entries only
    tprune.global_unstructured(tparams, tprune.L1Unstructured, amount=5)
    prune.global_unstructured(aparams, prune.L1Unstructured, amount=5)
    for (tm, name), (am, _) in zip(tparams, aparams, strict=True):
        _same_pruning(tm, am, name)


def test_global_unstructured_importance_scores_and_errors():
    (t1, a1), (t2, a2) = _linears(5, 6), _linears(6, 3)
    s1, s2 = rng.standard_normal((6, 5)), rng.standard_normal((3, 6))
    tprune.global_unstructured([(t1, "weight"), (t2, "weight")], tprune.L1Unstructured,
                               importance_scores={(t1, "weight"): torch.tensor(s1),
                                                  (t2, "weight"): torch.tensor(s2)}, amount=10)
    prune.global_unstructured([(a1, "weight"), (a2, "weight")], prune.L1Unstructured,
                              importance_scores={(a1, "weight"): ta.tensor(s1),
                                                 (a2, "weight"): ta.tensor(s2)}, amount=10)
    _same_pruning(t1, a1)
    _same_pruning(t2, a2)
    for mod, method, err in ((prune, prune.LnStructured, TypeError),
                             (tprune, tprune.LnStructured, TypeError)):
        m = nn.Linear(3, 3) if mod is prune else torch.nn.Linear(3, 3)
        with pytest.raises(err):
            mod.global_unstructured([(m, "weight")], method, amount=1, n=2, dim=0)
    with pytest.raises(TypeError, match="Iterable"):
        prune.global_unstructured(5, prune.L1Unstructured, amount=1)
    with pytest.raises(TypeError, match="dict"):
        prune.global_unstructured([(a1, "bias")], prune.L1Unstructured, importance_scores=[],
                                  amount=1)


def test_iterative_pruning_through_a_container_as_torch():
    tm, am = _convs()
    steps = [("l1_unstructured", (0.3,)), ("ln_structured", (0.5, 2, 0)),
             ("l1_unstructured", (10,)), ("random_structured", (0, 1)),
             ("ln_structured", (1, 1, -1)), ("identity", ())]
    for i, (name, args) in enumerate(steps):
        getattr(tprune, name)(tm, "weight", *args)
        getattr(prune, name)(am, "weight", *args)
        _same_pruning(tm, am)
        hooks = list(am._forward_pre_hooks.values())
        assert len(hooks) == 1
        if i:
            assert isinstance(hooks[0], prune.PruningContainer) and len(hooks[0]) == i + 1
            assert [type(m).__name__ for m in hooks[0]] == \
                [type(m).__name__ for m in list(tm._forward_pre_hooks.values())[0]]
    x = rng.standard_normal((1, 3, 5, 5))
    _close(am(ta.tensor(x)), tm(torch.tensor(x)))
    prune.remove(am, "weight")
    tprune.remove(tm, "weight")
    _close(am.weight, tm.weight, 0)


def test_iterative_random_unstructured_prunes_only_kept_entries():
    _, am = _linears()
    prune.l1_unstructured(am, "weight", 10)
    first = am.weight_mask.numpy().copy()
    prune.random_unstructured(am, "weight", 0.5)  # half of the 20 kept: 10 more
    second = am.weight_mask.numpy()
    assert np.all(second[first == 0] == 0) and (second == 0).sum() == 20


def test_pruning_container_rules():
    a = prune.L1Unstructured(0.2)
    a._tensor_name = "weight"
    b = prune.RandomUnstructured(1)
    b._tensor_name = "bias"
    c = prune.PruningContainer(a)
    assert c._tensor_name == "weight" and list(c) == [a] and c[0] is a
    with pytest.raises(ValueError, match="bias"):
        c.add_pruning_method(b)
    with pytest.raises(TypeError):
        c.add_pruning_method("l1")


# --- validation ------------------------------------------------------------------------------

@pytest.mark.parametrize("amount, err", [(-1, ValueError), (1.5, ValueError), (-0.1, ValueError),
                                         ("half", TypeError), (None, TypeError)])
def test_amount_validated_at_construction_as_torch(amount, err):
    with pytest.raises(err):
        tprune.L1Unstructured(amount)
    with pytest.raises(err, match="amount"):
        prune.L1Unstructured(amount)
    with pytest.raises(err, match="amount"):
        prune.LnStructured(amount, 2)


def test_bad_pruning_calls_raise_torch_errors_and_leave_module_alone():
    for mod, lib in ((torch.nn, tprune), (nn, prune)):
        m = mod.Linear(3, 4)
        with pytest.raises(ValueError, match="amount=13"):
            lib.l1_unstructured(m, "weight", 13)  # more than the 12 entries
        assert "weight" in dict(m.named_parameters())  # put back as it was
        assert not hasattr(m, "weight_orig")
        with pytest.raises(ValueError, match="multidimensional"):
            lib.ln_structured(m, "bias", 1, 2, 0)
        with pytest.raises(IndexError):
            lib.random_structured(m, "weight", 1, 2)
        with pytest.raises(AssertionError):
            lib.l1_unstructured(m, "weight", 1, importance_scores=m.bias)
        assert not lib.is_pruned(m)


def test_failed_pruning_of_a_pruned_tensor_keeps_the_pruning_so_far():
    tm, am = _linears()
    for lib, m in ((tprune, tm), (prune, am)):
        lib.l1_unstructured(m, "weight", 10)
        lib.random_unstructured(m, "weight", 0)
    mask = am.weight_mask.numpy().copy()
    with pytest.raises(ValueError, match="amount=21"):  # 20 entries kept
        prune.l1_unstructured(am, "weight", 21)
    with pytest.raises(ValueError, match="amount=-1"):
        prune.l1_unstructured(am, "weight", -1)
    with pytest.raises(AssertionError, match=r"\(6, 5\)"):
        prune.l1_unstructured(am, "weight", 1, importance_scores=ta.ones(5, 6))
    (hook,) = am._forward_pre_hooks.values()  # (torch's loses its hook here)
    assert isinstance(hook, prune.PruningContainer) and len(hook) == 2
    np.testing.assert_array_equal(am.weight_mask.numpy(), mask)
    with torch.no_grad(), ta.no_grad():
        tm.weight_orig.add_(1.0)
        am.weight_orig.add_(1.0)
    x = rng.standard_normal((2, 5))
    _close(am(ta.tensor(x)), tm(torch.tensor(x)))
    _, single = _linears()
    prune.l1_unstructured(single, "weight", 3)
    with pytest.raises(ValueError):
        prune.ln_structured(single, "weight", 7, 1, 0)  # only 6 rows
    (hook,) = single._forward_pre_hooks.values()
    assert type(hook) is prune.L1Unstructured
    assert (single.weight_mask.numpy() == 0).sum() == 3


# --- fusion ----------------------------------------------------------------------------------

def _bn_pair(tcls, acls, n, affine=True):
    tb = tcls(n, affine=affine).double()
    ab = acls(n, affine=affine, dtype=ta.float64)
    with torch.no_grad():
        tb.running_mean.copy_(torch.tensor(rng.standard_normal(n)))
        tb.running_var.copy_(torch.tensor(rng.random(n) + 0.5))
        if affine:
            tb.weight.copy_(torch.tensor(rng.standard_normal(n)))
            tb.bias.copy_(torch.tensor(rng.standard_normal(n)))
    _copy_state(tb, ab)
    return tb.eval(), ab.eval()


@pytest.mark.parametrize("bias, affine", [(True, True), (False, True), (True, False)])
def test_fuse_conv_bn_eval_as_torch(bias, affine):
    tc, ac = torch.nn.Conv2d(3, 4, 3, bias=bias).double(), nn.Conv2d(3, 4, 3, bias=bias,
                                                                    dtype=ta.float64)
    _copy_state(tc, ac)
    tb, ab = _bn_pair(torch.nn.BatchNorm2d, nn.BatchNorm2d, 4, affine)
    tc.eval()
    ac.eval()
    tf = torch.nn.utils.fuse_conv_bn_eval(tc, tb)
    af = nn.utils.fuse_conv_bn_eval(ac, ab)
    assert af is not ac and type(af) is nn.Conv2d
    _close(af.weight, tf.weight)
    _close(af.bias, tf.bias)
    assert isinstance(af.weight, nn.Parameter) and isinstance(af.bias, nn.Parameter)
    assert af.bias.requires_grad == tf.bias.requires_grad
    x = ta.tensor(rng.standard_normal((2, 3, 6, 6)), requires_grad=True)
    out, want = af(x), ab(ac(x))
    _close(out, want)
    g = ta.tensor(rng.standard_normal(tuple(out.shape)))
    (gx,) = ta.autograd.grad(out, x, g)
    (want_gx,) = ta.autograd.grad(want, x, g)
    _close(gx, want_gx)
    assert ta.autograd.gradcheck(lambda t: af(t), (x,))
    assert ac.bias is None or not np.array_equal(ac.bias.numpy(), af.bias.numpy())


def test_fuse_conv_transpose_bn_eval_as_torch():
    tc = torch.nn.ConvTranspose2d(3, 4, 3).double().eval()
    ac = nn.ConvTranspose2d(3, 4, 3, dtype=ta.float64).eval()
    _copy_state(tc, ac)
    tb, ab = _bn_pair(torch.nn.BatchNorm2d, nn.BatchNorm2d, 4)
    tf = torch.nn.utils.fuse_conv_bn_eval(tc, tb, transpose=True)
    af = nn.utils.fuse_conv_bn_eval(ac, ab, transpose=True)
    _close(af.weight, tf.weight)
    _close(af.bias, tf.bias)
    x = ta.tensor(rng.standard_normal((2, 3, 5, 5)))
    _close(af(x), ab(ac(x)))


@pytest.mark.parametrize("features", [6, 1])
def test_fuse_linear_bn_eval_as_torch(features):
    tl, al = _linears(5, 6)
    tl.eval()
    al.eval()
    tb, ab = _bn_pair(torch.nn.BatchNorm1d, nn.BatchNorm1d, features)
    tf = torch.nn.utils.fuse_linear_bn_eval(tl, tb)
    af = nn.utils.fuse_linear_bn_eval(al, ab)
    _close(af.weight, tf.weight)
    _close(af.bias, tf.bias)
    x = ta.tensor(rng.standard_normal((4, 5)))
    out = al(x)
    want = ab(out) if features == 6 else ab(out.reshape(-1, 1)).reshape(4, 6)
    _close(af(x), want)


def test_fusion_refuses_training_mode_and_mismatched_features():
    for mod, utils in ((torch.nn, torch.nn.utils), (nn, nn.utils)):
        conv, bn = mod.Conv2d(2, 3, 1), mod.BatchNorm2d(3)
        with pytest.raises(AssertionError, match="eval"):
            utils.fuse_conv_bn_eval(conv, bn)
        lin, bn1 = mod.Linear(2, 3).eval(), mod.BatchNorm1d(4).eval()
        with pytest.raises(AssertionError, match="out_features"):
            utils.fuse_linear_bn_eval(lin, bn1)


def test_fuse_weights_functions_as_torch():
    w, rm, rv = rng.standard_normal((4, 2, 3)), rng.standard_normal(4), rng.random(4) + 0.1
    tw = torch.tensor(w, requires_grad=True)
    tfw, tfb = torch.nn.utils.fuse_conv_bn_weights(tw, None, torch.tensor(rm), torch.tensor(rv),
                                                   1e-3, None, None)
    afw, afb = nn.utils.fuse_conv_bn_weights(ta.tensor(w, requires_grad=True), None,
                                             ta.tensor(rm), ta.tensor(rv), 1e-3, None, None)
    _close(afw, tfw)
    _close(afb, tfb)
    assert (afw.requires_grad, afb.requires_grad) == (tfw.requires_grad, tfb.requires_grad)
    lw, lb, bw, bb = (rng.standard_normal(s) for s in ((4, 3), (4,), (4,), (4,)))
    tout = torch.nn.utils.fuse_linear_bn_weights(*(torch.tensor(a) for a in (lw, lb, rm, rv)),
                                                 1e-5, torch.tensor(bw), torch.tensor(bb))
    aout = nn.utils.fuse_linear_bn_weights(*(ta.tensor(a) for a in (lw, lb, rm, rv)), 1e-5,
                                           ta.tensor(bw), ta.tensor(bb))
    for ours, theirs in zip(aout, tout, strict=True):
        _close(ours, theirs)
        assert ours.dtype == ta.float64 and ours.requires_grad == theirs.requires_grad


# --- skip_init, clip_grad_norm, unpad_sequence, transfer_parametrizations_and_params --------

def test_skip_init_draws_nothing_and_builds_the_module():
    ta.manual_seed(5)
    m = nn.utils.skip_init(nn.Linear, 4, out_features=3, dtype=ta.float64)
    after = ta.rand(3).numpy()
    ta.manual_seed(5)
    np.testing.assert_array_equal(ta.rand(3).numpy(), after)
    assert type(m) is nn.Linear and m.weight.shape == (3, 4) and m.weight.dtype == ta.float64
    assert m.weight.requires_grad and m.bias.shape == (3,)
    tm = torch.nn.utils.skip_init(torch.nn.Linear, 4, out_features=3)
    assert list(m.state_dict()) == list(tm.state_dict())

    class NoDevice(nn.Module):
        def __init__(self):
            super().__init__()

    for utils, cls in ((torch.nn.utils, int), (nn.utils, int), (nn.utils, NoDevice)):
        with pytest.raises(RuntimeError):
            utils.skip_init(cls)


def test_clip_grad_norm_is_the_deprecated_alias():
    g = rng.standard_normal((3, 4)) * 5
    tp, ap = torch.tensor(g * 0, requires_grad=True), ta.tensor(g * 0, requires_grad=True)
    tp.grad, ap.grad = torch.tensor(g), ta.tensor(g)
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        theirs = torch.nn.utils.clip_grad_norm(tp, 2.0, norm_type=3)
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        ours = nn.utils.clip_grad_norm(ap, 2.0, norm_type=3)
    _close(ours, theirs)
    _close(ap.grad, tp.grad)


@pytest.mark.parametrize("batch_first", [False, True])
def test_unpad_sequence_as_torch_with_gradients(batch_first):
    lengths = [4, 2, 3]
    seqs = [rng.standard_normal((n, 2)) for n in lengths]
    tseqs = [torch.tensor(s, requires_grad=True) for s in seqs]
    aseqs = [ta.tensor(s, requires_grad=True) for s in seqs]
    tpad = torch.nn.utils.rnn.pad_sequence(tseqs, batch_first=batch_first)
    apad = nn.utils.rnn.pad_sequence(aseqs, batch_first=batch_first)
    shape = tuple(apad.shape)
    theirs = torch.nn.utils.rnn.unpad_sequence(tpad, torch.tensor(lengths), batch_first)
    ours = nn.utils.rnn.unpad_sequence(apad, ta.tensor(lengths), batch_first)
    assert tuple(apad.shape) == shape  # (torch's transposes its input in place; not here)
    assert [tuple(o.shape) for o in ours] == [tuple(t.shape) for t in theirs]
    for o, t, s in zip(ours, theirs, seqs, strict=True):
        _close(o, t, 0)
        np.testing.assert_array_equal(o.numpy(), s)
    w = [rng.standard_normal((n, 2)) for n in lengths]
    sum((o * ta.tensor(x)).sum() for o, x in zip(ours, w, strict=True)).backward()
    for a, x in zip(aseqs, w, strict=True):
        np.testing.assert_array_equal(a.grad.numpy(), x)
    padded = ta.tensor(rng.standard_normal(shape), requires_grad=True)
    assert ta.autograd.gradcheck(
        lambda p: ta.cat(nn.utils.rnn.unpad_sequence(p, lengths, batch_first)), (padded,))
    with pytest.raises(ValueError, match="unpad_sequence"):
        nn.utils.rnn.unpad_sequence(apad, [1, 2], batch_first)


class _Sym(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)


class _TSym(torch.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)


class _Scale(nn.Module):
    def forward(self, x):
        return 2 * x


def test_transfer_parametrizations_and_params_as_torch():
    tsrc, asrc = _linears(4, 4)
    tdst, adst = _linears(4, 4)
    adst_before = adst.weight.numpy().copy()
    torch.nn.utils.parametrize.register_parametrization(tsrc, "weight", _TSym())
    P.register_parametrization(asrc, "weight", _Sym())
    P.register_parametrization(asrc, "weight", _Scale())
    torch.nn.utils.parametrize.transfer_parametrizations_and_params(tsrc, tdst)
    assert P.transfer_parametrizations_and_params(asrc, adst) is adst
    assert P.is_parametrized(adst, "weight") and not np.array_equal(adst_before,
                                                                     adst.weight.numpy())
    _close(adst.weight, 2 * tdst.weight)
    assert adst.parametrizations.weight.original is asrc.parametrizations.weight.original
    assert [type(p) for p in adst.parametrizations.weight] == [_Sym, _Scale]
    assert list(adst.state_dict()) == list(tdst.state_dict())
    # a module without the parameter gets one; an unparametrized source changes nothing
    bare = nn.Module()
    P.transfer_parametrizations_and_params(asrc, bare, "weight")
    _close(bare.weight, asrc.weight)
    plain = copy.deepcopy(adst)
    assert P.transfer_parametrizations_and_params(nn.Linear(2, 2), plain) is plain


def test_exported_names_as_torch():
    for name in ("fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
                 "fuse_linear_bn_weights", "skip_init", "clip_grad_norm"):
        assert name in nn.utils.__all__ and callable(getattr(nn.utils, name))
    assert "unpad_sequence" in nn.utils.rnn.__all__
    assert "transfer_parametrizations_and_params" in P.__all__
    assert ta.nn.utils.prune is prune
    for name in tprune.__all__ if hasattr(tprune, "__all__") else ():
        assert hasattr(prune, name)
    for name in ("BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
                 "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask",
                 "identity", "random_unstructured", "l1_unstructured", "random_structured",
                 "ln_structured", "global_unstructured", "custom_from_mask", "remove",
                 "is_pruned"):
        assert name in prune.__all__ and hasattr(tprune, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from tinyattn.nn.utils import fusion  # noqa: F401
