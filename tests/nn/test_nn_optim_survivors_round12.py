"""Tests for survivors of the seed-3 mutation draw of nn and optim (tools/mutate.py nn optim
train --sample 60 --seed 3): what each mutant changed, observed (against torch where torch has
it)."""

import inspect

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn
from tinyattn.nn.utils import parametrize, prune


def test_embedding_bag_from_pretrained_takes_a_list():
    bag = nn.EmbeddingBag.from_pretrained([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(bag.weight.numpy(), [[1.0, 2.0], [3.0, 4.0]])
    assert not bag.weight.requires_grad  # (frozen, as torch's default)


def test_group_norm_takes_device():
    norm = nn.GroupNorm(2, 4, device="cpu")
    assert norm.weight.device == "cpu" and norm.bias.device == "cpu"
    with pytest.raises(ta.BackendError, match="runs on one GPU"):
        nn.GroupNorm(2, 4, device="cuda:1")


@pytest.mark.parametrize("make", [lambda: nn.LazyLinear(2), lambda: nn.LazyConv1d(2, 3)],
                         ids=["LazyLinear", "LazyConv1d"])
def test_lazy_modules_load_list_entries_as_their_eager_kin(make):
    # (Linear loads a list entry; LazyLinear raised AttributeError reading its .shape)
    m = make()
    shape = (2, 3) if isinstance(m, nn.Linear) else (2, 1, 3)
    weight = np.arange(6, dtype=np.float32).reshape(shape)
    m.load_state_dict({"weight": weight.tolist(), "bias": [0.5, -0.5]})
    np.testing.assert_array_equal(m.weight.numpy(), weight)
    np.testing.assert_array_equal(m.bias.numpy(), [0.5, -0.5])


def test_a_kwargs_pre_hook_returning_a_pair_of_no_dict_is_named():
    lin = nn.Linear(2, 2)
    lin.register_forward_pre_hook(lambda mod, args, kwargs: (args, [1]), with_kwargs=True)
    with pytest.raises(RuntimeError, match="got a pair whose kwargs is a list$"):
        lin(ta.ones(2))
    lin = nn.Linear(2, 2)
    lin.register_forward_pre_hook(lambda mod, args, kwargs: (args, {}, 3), with_kwargs=True)
    with pytest.raises(RuntimeError, match="got a tuple of 3$"):
        lin(ta.ones(2))


def test_a_chained_parametrization_changing_the_shape_names_register_parametrization():
    class Same(nn.Module):
        def forward(self, x):
            return x

    class FirstRow(nn.Module):
        def forward(self, x):
            return x[:1]

    lin = nn.Linear(2, 2)
    parametrize.register_parametrization(lin, "weight", Same())
    with pytest.raises(ValueError, match=r"^register_parametrization: parametrization\(module"
                                         r"\.weight\) may not change the shape"):
        parametrize.register_parametrization(lin, "weight", FirstRow())


def test_random_unstructured_names_itself_refusing_an_amount():
    with pytest.raises(ValueError, match="^RandomUnstructured: amount=10 should be smaller"):
        prune.RandomUnstructured(amount=10).compute_mask(ta.ones(4), ta.ones(4))


def _two(lib):
    p = lib.nn.Parameter(lib.ones(2))
    return p, lib.optim.SGD([p], lr=0.1, momentum=0.5)


def test_cyclic_lr_starts_the_momentum_at_its_max_as_torch():
    torch = pytest.importorskip("torch")
    got, want = [], []
    for lib, seen in ((ta, got), (torch, want)):
        p, opt = _two(lib)
        sched = lib.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                                base_momentum=0.8, max_momentum=0.9)
        for _ in range(4):
            seen.append((opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]))
            opt.step()
            sched.step()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got[0][1] == 0.9


def test_swalr_takes_no_anneal_epochs_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (ta, torch):
        p, opt = _two(lib)
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=0)
        opt.step()
        sched.step()
        assert opt.param_groups[0]["lr"] == pytest.approx(0.05)
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        ta.optim.swa_utils.SWALR(_two(ta)[1], swa_lr=0.05, anneal_epochs=-1)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_an_optimizers_signature_starts_with_params_as_torchs(name):
    torch = pytest.importorskip("torch")
    mine = list(inspect.signature(getattr(ta.optim, name)).parameters)
    theirs = list(inspect.signature(getattr(torch.optim, name)).parameters)
    assert mine[0] == theirs[0] == "params"
    assert mine[:2] == theirs[:2]
