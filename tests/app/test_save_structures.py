"""ta.save / ta.load with the structures a training script saves: a model's state dict (with
buffers), an optimizer's and a scheduler's, plain containers of tensors and numbers; what
cannot be saved is named by its place in the object."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn, optim


def test_state_dicts_and_containers_come_back_with_the_same_structure(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.RMSNorm(4), nn.CrossEntropyLoss(
        weight=ta.tensor([1.0, 2.0, 3.0, 4.0])))
    opt = optim.AdamW(model.parameters())
    sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)
    obj = {
        "model": model.state_dict(), "optimizer": opt.state_dict(), "sched": sched.state_dict(),
        "tensors": [ta.tensor([1, 2], dtype=np.int64), ta.tensor([True, False]),
                    ta.randn(2, 2).half(), (ta.tensor(1.5, dtype=np.float64),)],
        "numbers": (1, 2.5, -math.inf, None, "note", False),
    }
    ta.save(obj, tmp_path / "all.npz")
    back = ta.load(tmp_path / "all.npz")
    assert list(back) == list(obj) and list(back["model"]) == list(obj["model"])
    assert list(back["model"]) == ["0.weight", "0.bias", "1.weight", "2.weight"]
    for key, value in obj["model"].items():
        np.testing.assert_array_equal(back["model"][key].numpy(), value.numpy())
    assert isinstance(back["tensors"], list) and isinstance(back["tensors"][3], tuple)
    for got, want in zip(back["tensors"][:3] + [back["tensors"][3][0]],
                         obj["tensors"][:3] + [obj["tensors"][3][0]], strict=True):
        assert isinstance(got, ta.Tensor) and got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert back["numbers"] == obj["numbers"]
    assert back["sched"] == obj["sched"]
    fresh = nn.Sequential(nn.Linear(3, 4), nn.RMSNorm(4), nn.CrossEntropyLoss(
        weight=ta.zeros(4)))
    fresh.load_state_dict(back["model"])
    np.testing.assert_array_equal(fresh[2].weight.numpy(), [1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("obj,fragments", [
    ({"a": [1, {"b": 1j}]}, ["cannot store a complex", r"obj\['a'\]\[1\]\['b'\]"]),
    ({"model": nn.Linear(2, 2)}, ["cannot store a Linear", r"obj\['model'\]",
                                  r"state_dict\(\) instead"]),
    ([ta.zeros(1), lambda: 0], ["cannot store a function", r"obj\[1\]"]),
    ({"steps": {(3, 5): 0.1}}, ["keys must be strings, ints or floats", r"obj\['steps'\]",
                                r"tuple key \(3, 5\)", r"str\(k\)"]),
    ({"steps": {True: 0.1}}, ["keys must be strings, ints or floats", "bool key True"]),
    ({"steps": {0.5: "a", "0.5": "b"}}, ["float key 0.5 and the str key '0.5'"]),
    ({"steps": {1: "a", "1": "b"}}, ["keys", r"obj\['steps'\]", "int key 1 and the str key '1'"]),
    ({"x": (np.array([object()]),)}, [r"obj\['x'\]\[0\]", "dtype object"]),
])
def test_what_cannot_be_saved_is_named_by_its_place(tmp_path, obj, fragments):
    with pytest.raises(TypeError, match="save: .*" + ".*".join(fragments)):
        ta.save(obj, tmp_path / "bad.npz")
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_dicts_keyed_by_ints_come_back_keyed_by_ints(tmp_path):
    """As torch.save keeps them (an optimizer's state dict keys its state by parameter
    position); an older tinyattn reads such a dict with the keys as strings."""
    import json
    import zipfile

    obj = {"state": {0: {"step": ta.tensor(3.0)}, 2: {}}, "mixed": {1: "a", "b": [{-4: None}]},
           "numpy": {np.int64(5): 1}}
    ta.save(obj, tmp_path / "ck.npz")
    back = ta.load(tmp_path / "ck.npz")
    assert list(back["state"]) == [0, 2] and back["state"][2] == {}
    assert back["state"][0]["step"].item() == 3.0
    assert back["mixed"] == {1: "a", "b": [{-4: None}]} and list(back["mixed"]) == [1, "b"]
    assert back["numpy"] == {5: 1} and type(next(iter(back["numpy"]))) is int
    with zipfile.ZipFile(tmp_path / "ck.npz") as z:
        meta = json.loads(str(np.load(z.open("__tinyattn__.npy"))))
    node = meta["structure"]["dict"]["state"]
    assert list(node["dict"]) == ["0", "2"] and node["int_keys"] == ["0", "2"]


@pytest.mark.parametrize("int_keys", [["0", "9"], "0", [0], ["x"], ["1.5"]])
def test_int_keys_that_do_not_fit_their_dict_are_a_damaged_entry(tmp_path, int_keys):
    import json

    from tinyattn import serialization

    meta = json.dumps({"format": serialization.FORMAT,
                       "structure": {"dict": {"0": 1, "x": 2, "1.5": 3}, "int_keys": int_keys}})
    np.savez(tmp_path / "forged.npz", __tinyattn__=np.array(meta))
    with pytest.raises(ta.CheckpointError, match="damaged structure entry: obj"):
        ta.load(tmp_path / "forged.npz")
