"""nn.BatchNorm1d, BatchNorm2d and GroupNorm against torch's: outputs and gradients in train
and eval mode, the running statistics step by step (momentum, momentum=None, no tracking, no
affine), the state dict's keys, and the errors (the functional norms' too: sizes checked
before anything moves in place, integer inputs, an empty normalized_shape)."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn

torch = pytest.importorskip("torch")


def _pair(name, *args, **kwargs):
    theirs = getattr(torch.nn, name)(*args, **kwargs).double()
    ours = getattr(nn, name)(*args, dtype=ta.float64, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    rng = np.random.default_rng(0)
    for name in ("weight", "bias"):  # affine: not the ones and zeros they start as
        if getattr(theirs, name, None) is not None:
            value = rng.standard_normal(getattr(theirs, name).shape)
            with torch.no_grad():
                getattr(theirs, name).copy_(torch.tensor(value))
            with ta.no_grad():
                getattr(ours, name).copy_(ta.tensor(value))
    return ours, theirs


def _step(lib, module, x):
    xx = lib.tensor(x, requires_grad=True)
    y = module(xx)
    (y * lib.tensor(np.cos(x))).sum().backward()
    return y.detach().numpy(), xx.grad.numpy()


def _same_state(ours, theirs):
    for (k, a), (k2, b) in zip(ours.state_dict().items(), theirs.state_dict().items(),
                               strict=True):
        assert k == k2
        np.testing.assert_allclose(np.asarray(a.numpy() if hasattr(a, "numpy") else a),
                                   b.detach().numpy(), rtol=1e-12, atol=1e-14, err_msg=k)


@pytest.mark.parametrize("name,shape", [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)),
                                        ("BatchNorm2d", (2, 3, 4, 2))])
@pytest.mark.parametrize("kwargs", [{}, {"momentum": 0.3}, {"momentum": None},
                                    {"affine": False}, {"track_running_stats": False},
                                    {"eps": 0.5}, {"bias": False}, {"momentum": 0.0}])
def test_batch_norm_matches_torch_in_train_and_eval(name, shape, kwargs):
    ours, theirs = _pair(name, 3, **kwargs)
    rng = np.random.default_rng(1)
    for _ in range(3):  # train: the batch's statistics, the running ones updated
        x = rng.standard_normal(shape) * 2 + 1
        for got, want in zip(_step(ta, ours, x), _step(torch, theirs, x), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
        _same_state(ours, theirs)
    ours.eval()
    theirs.eval()
    x = rng.standard_normal(shape)
    for got, want in zip(_step(ta, ours, x), _step(torch, theirs, x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    _same_state(ours, theirs)  # eval leaves the running statistics alone


@pytest.mark.parametrize("groups,shape", [(1, (2, 4, 3)), (2, (2, 4, 3)), (4, (3, 4)),
                                          (2, (2, 4, 2, 3))])
@pytest.mark.parametrize("affine,bias", [(True, True), (False, True), (True, False)])
def test_group_norm_matches_torch(groups, shape, affine, bias):
    ours, theirs = _pair("GroupNorm", groups, 4, affine=affine, bias=bias)
    x = np.random.default_rng(2).standard_normal(shape)
    for mode in ("train", "eval"):
        getattr(ours, mode)()
        getattr(theirs, mode)()
        for got, want in zip(_step(ta, ours, x), _step(torch, theirs, x), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_a_model_with_batch_norm_trains_as_torchs():
    rng = np.random.default_rng(3)
    w1, w2 = rng.standard_normal((8, 4)) * 0.5, rng.standard_normal((1, 8)) * 0.5
    models = []
    for lib, mod in ((ta, nn), (torch, torch.nn)):
        model = mod.Sequential(mod.Linear(4, 8, bias=False), mod.BatchNorm1d(8), mod.ReLU(),
                               mod.Linear(8, 1, bias=False)).double()
        with lib.no_grad():
            model[0].weight.copy_(lib.tensor(w1))
            model[3].weight.copy_(lib.tensor(w2))
        models.append((lib, model, lib.optim.SGD(model.parameters(), lr=0.1)))
    x, y = rng.standard_normal((16, 4)), rng.standard_normal((16, 1))
    for _ in range(5):
        losses = []
        for lib, model, opt in models:
            loss = ((model(lib.tensor(x)) - lib.tensor(y)) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-10)
    _same_state(models[0][1], models[1][1])


def test_batch_norm_errors_and_settings():
    bn = nn.BatchNorm1d(3)
    with pytest.raises(ta.ShapeError, match=r"BatchNorm1d: expected 2 or 3-D input \(N, 3, "
                                            r"...\), got \(4, 2\)"):
        bn(ta.ones(4, 2))
    with pytest.raises(ta.ShapeError, match=r"BatchNorm2d: expected 4-D input"):
        nn.BatchNorm2d(3)(ta.ones(2, 3, 4))
    with pytest.raises(ta.ShapeError, match=r"^BatchNorm1d: needs more than one value per "
                                            r"channel to train, got \(1, 3\)"):
        bn(ta.ones(1, 3))
    bn.eval()
    assert bn(ta.ones(1, 3)).shape == (1, 3)  # eval: the running statistics, one row is fine
    assert bn.weight.requires_grad and not bn.running_mean.requires_grad
    assert bn.num_batches_tracked.dtype == np.int64 and "momentum=0.1" in repr(bn)
    with pytest.raises(ta.ShapeError, match=r"GroupNorm: num_channels \(4\) must be divisible "
                                            r"by num_groups \(3\)"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ta.ShapeError, match=r"GroupNorm: expected input \(N, 4, ...\), got "
                                            r"\(2, 3\)"):
        nn.GroupNorm(2, 4)(ta.ones(2, 3))


def test_functional_batch_norm_and_group_norm_match_torch():
    TF = torch.nn.functional  # noqa: N806
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3, 5))
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    for training in (True, False):
        rm, rv = rng.standard_normal(3), rng.random(3) + 0.5
        ours_stats = [ta.tensor(rm.copy()), ta.tensor(rv.copy())]
        theirs_stats = [torch.tensor(rm.copy()), torch.tensor(rv.copy())]
        xx, tx = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        got = ta.functional.batch_norm(xx, *ours_stats, ta.tensor(w), ta.tensor(b),
                                       training=training, momentum=0.2, eps=1e-3)
        want = TF.batch_norm(tx, *theirs_stats, torch.tensor(w), torch.tensor(b),
                             training=training, momentum=0.2, eps=1e-3)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10)
        (got ** 3).sum().backward()
        (want ** 3).sum().backward()
        np.testing.assert_allclose(xx.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
        for o, t in zip(ours_stats, theirs_stats, strict=True):  # moved in place (training)
            np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12)
    got = ta.functional.batch_norm(ta.tensor(x), None, None, training=True)
    np.testing.assert_allclose(got.numpy(), TF.batch_norm(torch.tensor(x), None, None,
                                                          training=True).numpy(), rtol=1e-10)
    with pytest.raises(ValueError, match="batch_norm: without training, give running_mean"):
        ta.functional.batch_norm(ta.tensor(x), None, None)
    g = rng.standard_normal((2, 6, 4))
    got = ta.functional.group_norm(ta.tensor(g), 3, ta.tensor(np.arange(6.0)), None, eps=0.1)
    want = TF.group_norm(torch.tensor(g), 3, torch.tensor(np.arange(6.0)), None, eps=0.1)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ta.ShapeError, match=r"group_norm: expected input \(N, C, ...\) with C "
                                            r"divisible by num_groups 4, got \(2, 6, 4\)"):
        ta.functional.group_norm(ta.tensor(g), 4)


@pytest.mark.parametrize("name", ["BatchNorm1d", "BatchNorm2d", "GroupNorm"])
def test_the_signatures_are_torchs(name):
    import inspect

    ours = inspect.signature(getattr(nn, name)).parameters
    theirs = inspect.signature(getattr(torch.nn, name)).parameters
    assert [(k, p.default) for k, p in ours.items()] == [(k, p.default) for k, p in theirs.items()]


def test_two_values_a_channel_are_enough_to_train_and_group_norms_eps_counts():
    ours, theirs = _pair("BatchNorm1d", 3)
    x = np.random.default_rng(6).standard_normal((2, 3))
    for got, want in zip(_step(ta, ours, x), _step(torch, theirs, x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    ours, theirs = _pair("GroupNorm", 2, 4, eps=0.5)
    x = np.random.default_rng(7).standard_normal((2, 4, 3))
    for got, want in zip(_step(ta, ours, x), _step(torch, theirs, x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_a_checkpoint_without_num_batches_tracked_loads_as_torchs():
    """torch's checkpoints from before 0.4.1 have no num_batches_tracked: they load, strict or
    not, reporting nothing missing; the count is the module's own (0 for a new one), as in torch
    2.13 (its _load_from_state_dict fills the key with the module's count)."""
    rng = np.random.default_rng(8)
    old = {"0.weight": rng.standard_normal(3), "0.bias": rng.standard_normal(3),
           "0.running_mean": rng.standard_normal(3), "0.running_var": rng.uniform(1, 2, 3)}
    for strict in (True, False):
        ours = nn.Sequential(nn.BatchNorm1d(3, dtype=ta.float64))
        theirs = torch.nn.Sequential(torch.nn.BatchNorm1d(3)).double()
        got = ours.load_state_dict(old, strict=strict)
        want = theirs.load_state_dict({k: torch.tensor(v) for k, v in old.items()},
                                      strict=strict)
        assert (got.missing_keys, got.unexpected_keys) == (want.missing_keys,
                                                           want.unexpected_keys) == ([], [])
        assert ours[0].num_batches_tracked.item() == theirs[0].num_batches_tracked.item() == 0
        np.testing.assert_array_equal(ours[0].running_mean.numpy(), old["0.running_mean"])
    assert "0.num_batches_tracked" not in old  # the caller's dict is left as it was
    trained, their_trained = _pair("BatchNorm1d", 3)
    for _ in range(2):
        x = rng.standard_normal((4, 3))
        trained(ta.tensor(x)), their_trained(torch.tensor(x))
    state = {k[2:]: v for k, v in old.items()}
    trained.load_state_dict(state)
    their_trained.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    assert trained.num_batches_tracked.item() == their_trained.num_batches_tracked.item() == 2
    untracked = nn.BatchNorm1d(3, track_running_stats=False)  # nothing to fill: none is added
    assert untracked.load_state_dict({"weight": np.ones(3), "bias": np.zeros(3)}) == ([], [])
    with pytest.raises(ta.CheckpointError, match="missing keys: running_var"):
        nn.BatchNorm1d(3).load_state_dict({k: v for k, v in state.items() if k != "running_var"})


# ---- bad sizes refused up front (nothing moved in place), integer inputs, empty shapes -------

BN_BAD = [
    ({"weight": np.ones(4)}, r"^batch_norm: weight should contain 3 elements \(one per "
                             r"channel of input \(4, 3\)\), not 4"),
    ({"bias": np.ones(4)}, r"^batch_norm: bias should contain 3 elements .*not 4"),
    ({"rm": np.ones(4), "rv": np.ones(4)}, r"^batch_norm: running_mean should contain 3 "
                                           r"elements .*not 4"),
    ({"rv": np.ones(4)}, r"^batch_norm: running_var should contain 3 elements .*not 4"),
    ({"rm": np.zeros((1, 3)), "rv": np.ones((1, 3))},
     r"^batch_norm: running_mean must be 1-D \(3,\), got \(1, 3\)"),
    ({"rv": np.ones((3, 1))}, r"^batch_norm: running_var must be 1-D \(3,\), got \(3, 1\)"),
]


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("bad, match", BN_BAD, ids=["weight", "bias", "running_mean",
                                                    "running_var", "running (1, 3)",
                                                    "running_var (3, 1)"])
def test_batch_norm_checks_every_size_before_moving_the_running_stats(bad, match, training):
    TF = torch.nn.functional  # noqa: N806
    x = np.random.default_rng(0).standard_normal((4, 3))
    args = {"rm": np.ones(3), "rv": np.ones(3), "weight": None, "bias": None, **bad}
    theirs = {k: None if v is None else torch.tensor(v) for k, v in args.items()}
    with pytest.raises(RuntimeError):
        TF.batch_norm(torch.tensor(x), theirs["rm"], theirs["rv"], theirs["weight"],
                      theirs["bias"], training=training)
    ours = {k: None if v is None else ta.tensor(v.copy()) for k, v in args.items()}
    with pytest.raises(ta.ShapeError, match=match):
        ta.functional.batch_norm(ta.tensor(x), ours["rm"], ours["rv"], ours["weight"],
                                 ours["bias"], training=training)
    for k in ("rm", "rv"):  # a failed call changes nothing
        np.testing.assert_array_equal(ours[k].numpy(), args[k])


def test_batch_norm_takes_a_weight_of_c_elements_in_any_shape_as_torch():
    TF = torch.nn.functional  # noqa: N806
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((4, 3)), rng.standard_normal((1, 3))
    xx, tx = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    got = ta.functional.batch_norm(xx, None, None, ta.tensor(w), training=True)
    want = TF.batch_norm(tx, None, None, torch.tensor(w), training=True)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("call, torch_call, match", [
    (lambda f, x: f.group_norm(x, 0), lambda tf, x: tf.group_norm(x, 0),
     r"^group_norm: num_groups must be at least 1, got 0"),
    (lambda f, x: f.group_norm(x, -2), lambda tf, x: tf.group_norm(x, -2),
     r"^group_norm: num_groups must be at least 1, got -2"),
    (lambda f, x: f.group_norm(x, 2, weight=ta.ones(3)),
     lambda tf, x: tf.group_norm(x, 2, weight=torch.ones(3)),
     r"^group_norm: weight must be \(4,\), one per channel of input \(2, 4, 3\), got \(3,\)"),
    (lambda f, x: f.group_norm(x, 2, bias=ta.ones(1, 4)),
     lambda tf, x: tf.group_norm(x, 2, bias=torch.ones(1, 4)),
     r"^group_norm: bias must be \(4,\), one per channel of input \(2, 4, 3\), got \(1, 4\)"),
], ids=["0 groups", "negative groups", "weight", "bias"])
def test_group_norm_checks_its_groups_and_affine_sizes(call, torch_call, match):
    x = np.random.default_rng(2).standard_normal((2, 4, 3))
    with pytest.raises((RuntimeError, ZeroDivisionError)):
        torch_call(torch.nn.functional, torch.tensor(x))
    with pytest.raises(ValueError, match=match):  # (ShapeError, a ValueError, for the sizes)
        call(ta.functional, ta.tensor(x))


def test_group_norm_module_refuses_no_groups():
    with pytest.raises(ValueError, match=r"^GroupNorm: num_groups must be at least 1, got 0"):
        nn.GroupNorm(0, 4)
    with pytest.raises(ta.DTypeError, match=r"^group_norm: num_groups must be an int, got 2.0"):
        ta.functional.group_norm(ta.ones(2, 4, 3), 2.0)


@pytest.mark.parametrize("name, call", [
    ("layer_norm", lambda f, x: f.layer_norm(x, (3,))),
    ("group_norm", lambda f, x: f.group_norm(x.reshape(2, 3, 1), 3)),
    ("batch_norm", lambda f, x: f.batch_norm(x, None, None, training=True)),
    ("rms_norm", lambda f, x: f.rms_norm(x, (3,))),
], ids=["layer_norm", "group_norm", "batch_norm", "rms_norm"])
def test_norms_refuse_integer_inputs_as_torch(name, call):
    x = np.arange(6).reshape(2, 3)
    with pytest.raises((NotImplementedError, RuntimeError)):
        call(torch.nn.functional, torch.tensor(x))
    with pytest.raises(ta.DTypeError, match=rf"^{name}: input must be floating point, got "
                                            "int64"):
        call(ta.functional, ta.tensor(x))


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("shape", [(), []])
def test_an_empty_normalized_shape_is_refused_as_torch(name, shape):
    x = np.random.default_rng(3).standard_normal((2, 5))
    with pytest.raises(RuntimeError, match="at least 1-dimensional"):
        getattr(torch.nn.functional, name)(torch.tensor(x), shape)
    with pytest.raises(ta.ShapeError, match=rf"^{name}: normalized_shape must name at least "
                                            r"one dim \(the last ones of the input \(2, 5\)\), "
                                            r"got \(\)"):
        getattr(ta.functional, name)(ta.tensor(x), shape)


# ---- batch or running statistics: torch's _BatchNorm.forward decides ---------------------------


_X = np.array([[1.0, 2.0], [3.0, 5.0], [0.0, -1.0]], np.float32)


def _bn_case(lib, case):
    """A BatchNorm1d(2) with running statistics (10, 4), changed as `case` says, run once on _X:
    its output and running statistics afterwards."""
    m = lib.nn.BatchNorm1d(2)
    with lib.no_grad():
        m.running_mean.fill_(10.0)
        m.running_var.fill_(4.0)
    if "eval" in case:
        m.eval()
    if "untracked after construction" in case:
        m.track_running_stats = False
    if "no buffers" in case:
        m.running_mean = m.running_var = None
    if "no counter" in case:
        m.num_batches_tracked, m.momentum = None, None
    y = m(lib.tensor(_X))
    stats = [None if getattr(m, k) is None else getattr(m, k).tolist()
             for k in ("running_mean", "running_var", "num_batches_tracked")]
    return y.detach().numpy(), stats


@pytest.mark.parametrize("case", ["untracked after construction, train",
                                  "untracked after construction, eval",
                                  "no buffers, eval", "no buffers, train",
                                  "no counter, train", "eval", "train"])
def test_batch_norm_uses_batch_or_running_statistics_as_torch_decides(case):
    """Batch statistics in training or when the running buffers are None; the buffers move
    only in training with track_running_stats; in eval a module whose track_running_stats was
    turned off after construction still normalizes by the buffers it holds (torch's rule)."""
    (out, stats), (tout, tstats) = _bn_case(ta, case), _bn_case(torch, case)
    np.testing.assert_allclose(out, tout, rtol=1e-5, atol=1e-6)
    for ours, theirs in zip(stats, tstats, strict=True):
        if theirs is None:
            assert ours is None
        else:
            np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_batch_norm_on_an_empty_batch_gives_an_empty_output_as_torch():
    for name, shape in (("BatchNorm1d", (0, 4)), ("BatchNorm1d", (0, 4, 3)),
                        ("BatchNorm1d", (2, 4, 0)), ("BatchNorm2d", (0, 4, 2, 2))):
        ours, theirs = getattr(nn, name)(4), getattr(torch.nn, name)(4)
        x, tx = ta.zeros(*shape, requires_grad=True), torch.zeros(shape, requires_grad=True)
        y, ty = ours(x), theirs(tx)
        assert y.shape == tuple(ty.shape) == shape
        y.sum().backward()
        ty.sum().backward()
        _same_state(ours, theirs)  # the running statistics untouched, the count moved
        assert x.grad.shape == shape
        np.testing.assert_array_equal(ours.weight.grad.numpy(), theirs.weight.grad.numpy())
        np.testing.assert_array_equal(ours.bias.grad.numpy(), theirs.bias.grad.numpy())
        assert ours.eval()(ta.zeros(*shape)).shape == shape
    with pytest.raises(ta.ShapeError, match="needs more than one value per channel"):
        nn.BatchNorm1d(4)(ta.ones(1, 4, 1))  # exactly one value per channel: still refused
