"""Checkpoints: round trips, no pickle ever, clear errors, and a failed save loses nothing."""

import json
import os
import zipfile

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import serialization


def test_round_trip_of_nested_values(tmp_path):
    obj = {"t": ta.tensor([[1.0, 2.0]]), "a": np.arange(5, dtype=np.int32), "n": 3, "f": 0.5,
           "s": "reverse", "b": True, "none": None, "list": [1, ta.tensor([3.0])],
           "tuple": (0.9, 0.98), "nested": {"x": {"y": np.array([True, False])}},
           "npscalar": np.float32(2.5)}
    ta.save(obj, tmp_path / "ck.npz")
    back = ta.load(tmp_path / "ck.npz")
    assert isinstance(back["t"], ta.Tensor) and back["t"].dtype == np.float32
    np.testing.assert_array_equal(back["t"].numpy(), [[1.0, 2.0]])
    assert back["a"].dtype == np.int32 and list(back["a"]) == [0, 1, 2, 3, 4]
    assert (back["n"], back["f"], back["s"], back["b"], back["none"]) == (3, 0.5, "reverse",
                                                                       True, None)
    assert back["list"][0] == 1 and back["list"][1].numpy().tolist() == [3.0]
    assert back["tuple"] == (0.9, 0.98)
    assert back["nested"]["x"]["y"].tolist() == [True, False]
    assert back["npscalar"] == 2.5


def test_unsupported_values_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot store a set"):
        ta.save({"x": {1, 2}}, tmp_path / "bad.npz")
    with pytest.raises(TypeError, match="keys must be strings"):
        ta.save({1: 2}, tmp_path / "bad.npz")
    with pytest.raises(TypeError, match="dtype object"):
        ta.save({"x": np.array([{}], dtype=object)}, tmp_path / "bad.npz")
    assert not any(p.name.startswith(".tmp-") for p in tmp_path.iterdir())


def test_a_failed_save_leaves_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "ck.npz"
    ta.save({"w": ta.tensor([1.0, 2.0])}, path)
    original = path.read_bytes()

    def crash(file, **arrays):
        file.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(serialization.np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        ta.save({"w": ta.tensor([9.0])}, path)
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.npz"]  # no temporary file left
    monkeypatch.undo()
    assert ta.load(path)["w"].numpy().tolist() == [1.0, 2.0]


def test_corrupt_and_truncated_files(tmp_path):
    good = tmp_path / "good.npz"
    ta.save({"w": ta.randn(64, 64)}, good)
    data = good.read_bytes()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(os.urandom(300))
    for path in (truncated, garbage):
        with pytest.raises(ta.CheckpointError, match="not a readable checkpoint"):
            ta.load(path)
    with pytest.raises(FileNotFoundError):
        ta.load(tmp_path / "missing.npz")


def test_a_file_that_is_not_a_checkpoint_is_named_for_what_it_is(tmp_path):
    """A single .npy array, a zip cut short and any other file each get their own diagnosis."""
    npy = tmp_path / "weights.npy"
    np.save(npy, np.ones(3))
    with pytest.raises(ta.CheckpointError, match=r"holds a single \.npy array, not a checkpoint; "
                                                 r"load it with numpy\.load, or write checkpoints "
                                                 r"with tinyattn\.save$"):
        ta.load(npy)
    good = tmp_path / "good.npz"
    ta.save({"w": ta.randn(64, 64)}, good)
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.read_bytes()[:1000])
    with pytest.raises(ta.CheckpointError, match="a damaged or truncated zip"):
        ta.load(cut)
    text = tmp_path / "notes.npz"
    text.write_text("hello world, not a checkpoint")
    with pytest.raises(ta.CheckpointError) as caught:
        ta.load(text)
    assert str(caught.value).endswith("this file starts with b'hello wo')")


def test_wrong_kind_of_npz(tmp_path):
    plain = tmp_path / "plain.npz"
    np.savez(plain, weights=np.ones(3))
    with pytest.raises(ta.CheckpointError, match="not a tinyattn checkpoint"):
        ta.load(plain)


def test_pickled_content_is_never_loaded(tmp_path):
    evil = tmp_path / "evil.npz"
    np.savez(evil, __tinyattn__=np.array('{"format": "tinyattn-checkpoint-1", '
                                         '"structure": {"array": "a0"}}'),
             a0=np.array([object()], dtype=object))
    with pytest.raises(ta.CheckpointError, match="pickle"):
        ta.load(evil)


def test_damaged_structure_entry(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, __tinyattn__=np.array("{not json"))
    with pytest.raises(ta.CheckpointError, match="damaged"):
        ta.load(path)
    np.savez(path, __tinyattn__=np.array('{"format": "something-else"}'))
    with pytest.raises(ta.CheckpointError, match="format"):
        ta.load(path)


def test_checkpoint_is_a_plain_zip_of_npy_files(tmp_path):
    path = tmp_path / "ck.npz"
    ta.save({"w": ta.ones(2)}, path)
    with zipfile.ZipFile(path) as z:
        assert all(name.endswith(".npy") for name in z.namelist())


def _forged(tmp_path, structure, **arrays):
    """A checkpoint written by hand around `structure` (as a damaged or hostile file would be)."""
    path = tmp_path / "forged.npz"
    meta = json.dumps({"format": serialization.FORMAT, "structure": structure})
    np.savez(path, __tinyattn__=np.array(meta), **arrays)
    return path


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_nesting_loads_up_to_the_limit_and_is_refused_beyond(tmp_path, kind):
    def nested(levels):
        node = {"array": "a0"}
        for _ in range(levels):
            node = {"list": [node]} if kind == "list" else {"dict": {"k": node}}
        return node

    out = ta.load(_forged(tmp_path, nested(serialization.MAX_DEPTH), a0=np.arange(2.0)))
    for _ in range(serialization.MAX_DEPTH):
        out = out[0] if kind == "list" else out["k"]
    np.testing.assert_array_equal(out, [0.0, 1.0])
    with pytest.raises(ta.CheckpointError, match=f"deeper than {serialization.MAX_DEPTH}"):
        ta.load(_forged(tmp_path, nested(serialization.MAX_DEPTH + 1), a0=np.arange(2.0)))


def test_a_structure_node_of_no_known_kind_is_a_damaged_entry(tmp_path):
    with pytest.raises(ta.CheckpointError, match="damaged structure entry: obj is"):
        ta.load(_forged(tmp_path, {"set": [1, 2]}))


def test_fortran_ordered_and_empty_arrays_come_back_as_saved(tmp_path):
    f = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    assert f.flags.f_contiguous and not f.flags.c_contiguous
    path = tmp_path / "ck.npz"
    ta.save({"f": f, "empty": ta.zeros(0, 3), "none": np.zeros((2, 0), np.int64)}, path)
    out = ta.load(path)
    np.testing.assert_array_equal(out["f"], f)
    assert out["empty"].shape == (0, 3) and out["none"].shape == (2, 0)
    assert out["none"].dtype == np.int64


def test_an_npz_that_is_not_a_checkpoint_lists_its_entries_by_name(tmp_path):
    plain = tmp_path / "plain.npz"
    np.savez(plain, weights=np.ones(3), bias=np.zeros(1))
    with pytest.raises(ta.CheckpointError) as e:
        ta.load(plain)
    assert "['bias', 'weights']" in str(e.value)


def test_check_sees_each_array_before_it_is_read_and_may_refuse_it(tmp_path):
    path = tmp_path / "ck.npz"
    ta.save({"a": np.ones((2, 3)), "t": ta.zeros(4)}, path)
    seen = []
    ta.load(path, check=lambda where, shape, dtype: seen.append((where, shape, str(dtype))))
    assert sorted(seen) == [("obj['a']", (2, 3), "float64"), ("obj['t']", (4,), "float32")]

    def refuse(where, shape, dtype):
        raise ta.CheckpointError(f"refused {where}")

    with pytest.raises(ta.CheckpointError, match=r"refused obj\['a'\]"):
        ta.load(path, check=refuse)
