"""Tests for the seed-6 mutation survivors of nn and optim (2026-11-29), against torch where
torch has the behaviour: CrossMapLRN2d's default k; a deep copy keeping one copy of a
parametrized module held twice; a captured step that sees a parameter replaced after a mode
change (each change moves capture's state version on, never back to a value it had); a
custom optimizer's dict-valued group setting surviving load_state_dict; a scheduler whose
get_lr gives the wrong number of learning rates refused with a clear error; L-BFGS stopping
for lack of progress where torch does."""

import copy

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


def test_cross_map_lrn2d_defaults_as_torch():
    ours, theirs = ta.nn.CrossMapLRN2d(3), torch.nn.CrossMapLRN2d(3)
    assert (ours.alpha, ours.beta, ours.k) == (theirs.alpha, theirs.beta, theirs.k)
    x = np.random.default_rng(0).standard_normal((2, 5, 4, 4)).astype(np.float32) * 30
    np.testing.assert_allclose(ours(ta.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_a_deep_copy_keeps_one_copy_of_a_parametrized_module_held_twice(lib_name):
    lib = ta if lib_name == "tinyattn" else torch

    class Double(lib.nn.Module):
        def forward(self, w):
            return w * 2

    inner = lib.nn.Linear(2, 2)
    lib.nn.utils.parametrize.register_parametrization(inner, "weight", Double())
    twice = lib.nn.Sequential(inner, inner)
    new = copy.deepcopy(twice)
    assert new[0] is new[1] and new[0] is not inner
    assert type(new[0]) is type(inner)  # (the parametrized class)


def test_a_captured_step_sees_a_parameter_replaced_after_a_mode_change():
    model = ta.nn.Linear(3, 1)
    step = ta.capture(lambda x: model(x).sum())
    x = ta.ones(2, 3)
    for _ in range(3):
        model.zero_grad()
        step(x)
    assert step.state.startswith("replaying")
    model.eval()  # one change of the module state,
    model.weight = ta.nn.Parameter(ta.full((1, 3), 2.0))  # then another
    model.zero_grad()
    loss = step(x)
    want = 2 * (6.0 + float(model.bias))
    assert float(loss) == pytest.approx(want) and model.weight.grad.tolist() == [[2.0] * 3]


def _group_setting_after_load(lib):
    class Custom(lib.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.1, "cfg": {"mode": "fast", "scale": 2.0}})

        def step(self, closure=None):
            pass

    w = lib.ones(2, requires_grad=True)
    sd = Custom([w]).state_dict()
    fresh = Custom([lib.ones(2, requires_grad=True)])
    fresh.param_groups[0]["cfg"] = {"mode": "slow"}
    fresh.load_state_dict(sd)
    return fresh.param_groups[0]["cfg"]


def test_a_dict_valued_group_setting_survives_load_state_dict():
    assert _group_setting_after_load(ta) == _group_setting_after_load(torch) == {
        "mode": "fast", "scale": 2.0}


def test_a_scheduler_giving_the_wrong_number_of_learning_rates_is_refused():
    p, q = ta.nn.Parameter(ta.ones(2)), ta.nn.Parameter(ta.ones(2))
    opt = ta.optim.SGD([{"params": [p]}, {"params": [q]}], lr=0.1)

    class OneRate(ta.optim.lr_scheduler.LRScheduler):
        def get_lr(self):
            return [0.5]

    with pytest.raises(ValueError, match=r"^OneRate: get_lr\(\) gave 1 learning rates for 2 "
                                         r"parameter groups; it must give one per group$"):
        OneRate(opt)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.1]



def _lbfgs_stop(lib, line_search):
    """Where L-BFGS stops on a steep quartic: there the steps get small (the lack-of-progress
    rule, |d t| <= tolerance_change) while the loss still moves by more than the tolerance."""
    x = lib.tensor([3.0, -2.0, 0.5], dtype=lib.float64, requires_grad=True)
    opt = lib.optim.LBFGS([x], max_iter=100, tolerance_grad=1e-30, tolerance_change=1e-3,
                          line_search_fn=line_search)

    def closure():
        opt.zero_grad()
        loss = 1e9 * ((x - 1) ** 4).sum() + (x ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    state = opt.state[x]
    return state["n_iter"], state["func_evals"], x.detach().numpy().copy()


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_stops_for_lack_of_progress_where_torch_does(line_search):
    ours, theirs = _lbfgs_stop(ta, line_search), _lbfgs_stop(torch, line_search)
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12)
