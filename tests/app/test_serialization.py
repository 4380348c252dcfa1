"""Checkpoints: round trips, no pickle ever, clear errors, and a failed save loses nothing."""

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
