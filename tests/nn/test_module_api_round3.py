"""Module API checked as a torch user writes it (round 3): what an unpickled model lists as its
parameters after it is changed, and what Sequential's list methods return."""

import pickle

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn
from tinyattn.nn import module as module_impl


@pytest.fixture
def counter():
    """module_impl._tree_version, which a test may set back; afterwards past every value seen
    (so that no cache of other tests' modules passes for current)."""
    start = module_impl._tree_version[0]
    yield module_impl._tree_version
    module_impl._tree_version[0] = max(start, module_impl._tree_version[0]) + 1


def test_unpickled_model_lists_a_replaced_layers_parameters(counter):
    # The pickle of a model made in a process whose tree counter was high, loaded in a fresh
    # process (its counter low): once that process's counter reaches the saved number, a
    # cache carried in the pickle must not pass for current (parameters() would give the old
    # layer's weights, and an optimizer made then would train parameters the model no longer
    # uses).
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    list(model.parameters())  # (the walk is cached)
    saved = pickle.dumps(model)
    at = counter[0]
    counter[0] = 0  # a fresh process
    loaded = pickle.loads(saved)
    new = nn.Linear(2, 2)
    loaded[0] = new
    counter[0] = at  # its counter reaches the saved one
    params = list(loaded.parameters())
    assert len(params) == 4
    assert params[0] is new.weight and params[1] is new.bias
    assert [name for name, _ in loaded.named_parameters()] == \
        ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_sequential_insert_returns_the_sequential_as_torchs():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Sequential(torch.nn.ReLU())
    assert theirs.insert(0, torch.nn.Tanh()) is theirs  # (torch's Sequential.insert -> self)
    ours = nn.Sequential(nn.ReLU())
    out = ours.insert(0, nn.Tanh())
    assert out is ours
    assert [type(m).__name__ for m in ours] == ["Tanh", "ReLU"]
    x = ta.tensor([-2.0, 3.0])
    np.testing.assert_allclose(out(x).numpy(), [0.0, np.tanh(3.0)], rtol=1e-6)


def _with_extra_state(lib):
    """A module that keeps a plain setting through get_extra_state/set_extra_state (torch's
    hooks for state that is not a tensor)."""

    class Scaled(lib.nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.lin = lib.nn.Linear(2, 2)
            self.scale = scale

        def get_extra_state(self):
            return {"scale": self.scale}

        def set_extra_state(self, state):
            self.scale = state["scale"]

    return Scaled


@pytest.mark.parametrize("lib_name", ["torch", "tinyattn"])
def test_extra_state_is_saved_and_restored(lib_name):
    lib = pytest.importorskip("torch") if lib_name == "torch" else ta
    scaled = _with_extra_state(lib)
    outer = lib.nn.Sequential(scaled(3.0))
    state = outer.state_dict()
    assert list(state) == ["0._extra_state", "0.lin.weight", "0.lin.bias"]  # (own, children)
    assert state["0._extra_state"] == {"scale": 3.0}
    other = lib.nn.Sequential(scaled(1.0))
    result = other.load_state_dict(state)
    assert other[0].scale == 3.0
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    # strict: a checkpoint without it lacks a key
    without = {k: v for k, v in state.items() if k != "0._extra_state"}
    with pytest.raises(RuntimeError, match="_extra_state"):
        lib.nn.Sequential(scaled(1.0)).load_state_dict(without)
    result = other.load_state_dict(without, strict=False)
    assert list(result.missing_keys) == ["0._extra_state"]
    # a module without set_extra_state finds the key unexpected
    plain = lib.nn.Sequential(lib.nn.Linear(2, 2))
    result = plain.load_state_dict({"0.weight": state["0.lin.weight"], "0.bias":
                                    state["0.lin.bias"], "0._extra_state": 1}, strict=False)
    assert list(result.unexpected_keys) == ["0._extra_state"]


def test_extra_state_is_not_set_when_the_load_fails():
    scaled = _with_extra_state(ta)
    state = scaled(5.0).state_dict()
    state["lin.weight"] = ta.zeros(3, 3)  # does not fit
    target = scaled(1.0)
    with pytest.raises(RuntimeError, match="lin.weight"):
        target.load_state_dict(state)
    assert target.scale == 1.0  # nothing was loaded
