"""torch.save / torch.load calls as ported scripts write them: map_location as a function (and
second by position), pickle_protocol, _use_new_zipfile_serialization, mmap, weights_only; and
what checkpoints hold that the format now keeps (OrderedDict, sets, argparse.Namespace, float
dict keys), each compared with what torch gives back."""

import argparse
import io
from collections import OrderedDict

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


def _round_trip(lib, obj, **load_kwargs):
    buf = io.BytesIO()
    lib.save(obj, buf)
    buf.seek(0)
    return lib.load(buf, **load_kwargs)


def test_map_location_as_a_function_as_torchs():
    obj = {"w": ta.tensor([1.0, 2.0]), "p": ta.nn.Parameter(ta.ones(1)), "n": 3}
    seen = []

    def keep(t, location):
        seen.append(location)
        return t

    back = _round_trip(ta, obj, map_location=keep)
    assert seen == ["cpu", "cpu"]
    assert back["w"].tolist() == [1.0, 2.0] and isinstance(back["p"], ta.nn.Parameter)
    assert back["p"].requires_grad and back["n"] == 3
    assert _round_trip(ta, obj, map_location=lambda t, loc: None)["w"].tolist() == [1.0, 2.0]
    doubled = _round_trip(ta, obj, map_location=lambda t, loc: t * 2)
    assert doubled["w"].tolist() == [2.0, 4.0] and isinstance(doubled["p"], ta.nn.Parameter)
    # torch's idiom, on torch: the identity function keeps what was saved
    tback = _round_trip(torch, {"w": torch.tensor([1.0, 2.0])},
                        map_location=lambda storage, loc: storage)
    assert tback["w"].tolist() == back["w"].tolist()


def test_map_location_second_by_position_as_torchs():
    obj = {"w": ta.tensor([1.0])}
    for where in ("cpu", {"cuda:0": "cpu"}, lambda s, loc: s):
        buf = io.BytesIO()
        ta.save(obj, buf)
        buf.seek(0)
        assert ta.load(buf, where)["w"].tolist() == [1.0]


def test_map_location_functions_that_fail_or_return_no_tensor():
    obj = {"w": ta.tensor([1.0])}
    with pytest.raises(ZeroDivisionError):  # (its own error, as it raised it)
        _round_trip(ta, obj, map_location=lambda t, loc: 1 / 0)
    with pytest.raises(TypeError, match="map_location's function returned a int for "
                                        r"obj\['w'\]; it must return a tensor"):
        _round_trip(ta, obj, map_location=lambda t, loc: 3)


def test_torchs_other_save_and_load_keywords_are_taken(tmp_path):
    obj = {"w": ta.tensor([1.0, 2.0])}
    ta.save(obj, tmp_path / "a.npz", pickle_protocol=4, _use_new_zipfile_serialization=False)
    ta.save(obj, tmp_path / "b.npz", _disable_byteorder_record=True, pickle_module=None)
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    for kwargs in (dict(weights_only=True), dict(weights_only=False), dict(mmap=True),
                   dict(weights_only=None, mmap=False, encoding="latin1")):
        assert ta.load(tmp_path / "a.npz", **kwargs)["w"].tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="unexpected keyword argument 'mapp_location'"):
        ta.load(tmp_path / "a.npz", mapp_location="cpu")


def test_ordered_dicts_sets_namespaces_and_float_keys_come_back_as_torchs():
    args = argparse.Namespace(lr=3e-4, layers=[2, 4], name="run", seed=None)
    obj = {"od": OrderedDict([("b", 1), ("a", 2)]), "args": args, "tags": {"x", "y", 3},
           "frozen": frozenset({(1, 2), 0.5}), "by_ratio": {0.5: "half", 2.0: "double",
                                                           float("inf"): "all", 1: "one"},
           "nested": OrderedDict(inner={0.25: {"q"}})}
    ours = _round_trip(ta, obj)
    theirs = _round_trip(torch, obj, weights_only=False)  # (torch pickles them)
    assert ours == theirs == obj
    for key in obj:
        assert type(ours[key]) is type(theirs[key]) is type(obj[key]), key
    assert list(ours["od"]) == ["b", "a"]
    assert list(ours["by_ratio"]) == [0.5, 2.0, float("inf"), 1]
    assert [type(k) for k in ours["by_ratio"]] == [float, float, float, int]
    assert type(ours["nested"]["inner"]) is dict


def test_a_model_state_dict_comes_back_an_ordered_dict_as_torchs():
    sd = OrderedDict(weight=ta.ones(2, 2), bias=ta.zeros(2))
    back = _round_trip(ta, sd)
    assert type(back) is OrderedDict and list(back) == ["weight", "bias"]
    np.testing.assert_array_equal(back["weight"].numpy(), np.ones((2, 2)))


def test_what_the_format_still_refuses_is_named_with_what_to_do():
    for bad, fragment in [({(1, 2): 3}, "tuple key"), ({True: 1}, "bool key"),
                          ({"x": 1j}, "cannot store a complex"), ({"x": object()}, "object")]:
        with pytest.raises(TypeError, match=fragment):
            ta.save(bad, io.BytesIO())
    with pytest.raises(TypeError, match=r"float key 0\.5 and the str key '0\.5'"):
        ta.save({0.5: 1, "0.5": 2}, io.BytesIO())
