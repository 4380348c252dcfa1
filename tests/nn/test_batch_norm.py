"""nn.BatchNorm1d, BatchNorm2d and GroupNorm against torch's: outputs and gradients in train
and eval mode, the running statistics step by step (momentum, momentum=None, no tracking, no
affine), the state dict's keys, and the errors."""

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
