"""Checkpoints: round trips, no pickle ever, clear errors, and a failed save loses nothing."""

import errno
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


def test_load_takes_torchs_map_location_and_weights_only(tmp_path):
    ta.save({"w": ta.tensor([1.0, 2.0])}, tmp_path / "ck.npz")
    for kwargs in [{"map_location": "cpu"}, {"map_location": "cpu", "weights_only": True},
                   {"weights_only": False}]:
        back = ta.load(tmp_path / "ck.npz", **kwargs)
        assert back["w"].backend.name == "numpy" and back["w"].numpy().tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="load: give backend or map_location, not both"):
        ta.load(tmp_path / "ck.npz", backend="numpy", map_location="cpu")
    with pytest.raises(ta.BackendError, match="unknown backend 'tpu'"):
        ta.load(tmp_path / "ck.npz", map_location="tpu:0")


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


def test_keys_that_the_checkpoint_lacks_are_a_key_error_naming_them_and_the_file(tmp_path):
    path = tmp_path / "ck.npz"
    ta.save({f"k{i}": i for i in range(14)}, path)
    assert ta.load(path, keys=["k3", "k1"]) == {"k1": 1, "k3": 3}
    assert ta.load(path, keys="k1") == {"k1": 1}  # one name (not its letters: "k", "1")
    with pytest.raises(KeyError) as e:
        ta.load(path, keys=["typo"])
    assert isinstance(e.value, ta.CheckpointError)
    assert str(e.value) == (f"load: {path} has no 'typo' entry (asked for with keys=); it holds "
                            "'k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8', 'k9', ... "
                            "(4 more)")
    with pytest.raises(KeyError, match=r"has no 'x', 'k' entries .*; it holds 'k0', "):
        ta.load(path, keys=["k1", "x", "k"])
    ta.save({"a": 1}, path)
    with pytest.raises(KeyError, match=r"has no 'b' entry \(asked for with keys=\); it holds "
                                       r"'a'$"):
        ta.load(path, keys=("a", "b"))
    ta.save([1, 2], path)
    with pytest.raises(ta.CheckpointError, match=f"load: keys= needs a checkpoint that holds a "
                                                 f"dict; {path} holds something else"):
        ta.load(path, keys=["a"])


def _temp_name(folder, suffix=".npz"):
    return os.path.join(folder, f".tmp-abc123{suffix}")


FAILURES = {  # where atomic_write can fail, and the error the call raises there (real ones name
    # the temporary file, or nothing)
    "mkstemp": ("tempfile.mkstemp", lambda *a, **k: _raise(PermissionError(
        errno.EACCES, "Permission denied", _temp_name(k["dir"], k["suffix"])))),
    "fchmod": ("os.fchmod", lambda *a: _raise(PermissionError(errno.EPERM, "Not permitted"))),
    "fsync": ("os.fsync", lambda *a: _raise(OSError(errno.EIO, "Input/output error"))),
    "replace": ("os.replace", lambda src, dst: _raise(IsADirectoryError(
        errno.EISDIR, "Is a directory", src, dst))),
}


def _raise(e):
    raise e


@pytest.mark.parametrize("where", FAILURES)
def test_every_failed_save_names_the_target_keeps_the_type_and_leaves_no_temporary_file(
        where, tmp_path, monkeypatch):
    """As root, a folder that takes no new files cannot be made with chmod: the calls are
    patched to fail as they would (mkstemp: PermissionError naming the temporary file)."""
    from tinyattn import files

    path = tmp_path / "ck.npz"
    ta.save({"w": 1}, path)
    original = path.read_bytes()
    name, fail = FAILURES[where]
    module, _, attr = name.partition(".")
    monkeypatch.setattr(getattr(files, module), attr, fail)
    with pytest.raises(OSError) as e:
        ta.save({"w": 2}, path)
    cause = e.value.__cause__
    assert type(e.value) is type(cause) and e.value.errno == cause.errno
    assert e.value.filename == str(path) and ".tmp-" not in str(e.value), str(e.value)
    assert str(e.value).endswith(f": '{path}'")
    monkeypatch.undo()
    assert path.read_bytes() == original and os.listdir(tmp_path) == ["ck.npz"]


def test_a_failed_save_of_another_kind_keeps_its_error_with_a_note_naming_the_target(tmp_path,
                                                                                     monkeypatch):
    path = tmp_path / "ck.npz"
    monkeypatch.setattr(serialization.np, "savez", lambda f, **a: _raise(ValueError("bad")))
    with pytest.raises(ValueError, match="^bad") as e:
        ta.save({"w": 1}, path)
    assert e.value.__notes__ == [f"atomic_write: {path} was not written (the old file, if any, "
                                 "is kept)"]
    assert os.listdir(tmp_path) == []


def test_a_save_to_a_symlink_writes_through_it_as_torch_save(tmp_path):
    """The link stays a link and the file it points to gets the new content (the temporary file
    in that file's folder, so that the rename stays atomic); a link to no file yet creates it."""
    real = tmp_path / "real"
    real.mkdir()
    ta.save({"w": 1}, real / "ck.npz")
    os.chmod(real / "ck.npz", 0o640)
    for link, to in [(tmp_path / "abs.npz", real / "ck.npz"),
                     (tmp_path / "rel.npz", "real/ck.npz"),  # relative to the link's folder
                     (tmp_path / "chain.npz", tmp_path / "abs.npz")]:  # a link to a link
        os.symlink(to, link)
    for i, link in enumerate(["abs.npz", "rel.npz", "chain.npz"]):
        ta.save({"w": i + 2}, tmp_path / link)
        assert ta.load(real / "ck.npz") == {"w": i + 2} == ta.load(tmp_path / link)
    assert all(os.path.islink(tmp_path / n) for n in ["abs.npz", "rel.npz", "chain.npz"])
    assert os.listdir(real) == ["ck.npz"] and os.stat(real / "ck.npz").st_mode & 0o777 == 0o640
    os.symlink(real / "new.npz", tmp_path / "dangling.npz")
    ta.save({"w": 9}, tmp_path / "dangling.npz")
    assert os.path.islink(tmp_path / "dangling.npz") and ta.load(real / "new.npz") == {"w": 9}


# ---- other backends: device arrays are saved from the device, tensors load where asked -------


@pytest.fixture
def cupy_be(monkeypatch):
    """The "cupy" backend on tests/support/fake_cupy.py (a device that refuses implicit copies)."""
    import fake_cupy  # tests/support

    return fake_cupy.install(monkeypatch, kernels=False)


def test_tensors_load_onto_the_backend_asked_for_at_every_depth(tmp_path, cupy_be):
    path = tmp_path / "ck.npz"
    ta.save({"w": ta.tensor([1.0, 2.0]), "layers": [ta.tensor([3.0]), {"b": ta.tensor([4.0])}],
             "pair": (ta.tensor([5.0]), np.arange(2))}, path)
    back = ta.load(path, backend="cupy")
    tensors = [back["w"], back["layers"][0], back["layers"][1]["b"], back["pair"][0]]
    assert [t.device for t in tensors] == ["cuda"] * 4
    assert [t.numpy().tolist() for t in tensors] == [[1.0, 2.0], [3.0], [4.0], [5.0]]
    assert isinstance(back["pair"][1], np.ndarray)  # a saved array stays a host array
    host = ta.load(path)  # no backend asked for: NumPy
    assert (host["w"].device, host["layers"][1]["b"].device) == ("cpu", "cpu")


def test_device_arrays_and_tensors_are_saved_through_the_host(tmp_path, cupy_be):
    device = cupy_be.asarray(np.array([[1, 2], [3, 4]], dtype=np.int32))  # a raw CuPy array
    on_device = ta.tensor([0.5, 1.5], backend="cupy")
    path = tmp_path / "ck.npz"
    ta.save({"a": device, "t": on_device, "nested": [device]}, path)
    back = ta.load(path)
    assert isinstance(back["a"], np.ndarray) and back["a"].dtype == np.int32
    assert back["a"].tolist() == [[1, 2], [3, 4]] and back["nested"][0].tolist() == [[1, 2],
                                                                                    [3, 4]]
    assert back["t"].device == "cpu" and back["t"].numpy().tolist() == [0.5, 1.5]


def test_every_array_kind_it_writes_round_trips(tmp_path):
    """bool, signed and unsigned ints, floats and unicode strings: the kinds save accepts."""
    arrays = {"b": np.array([True, False]), "i": np.array([-3, 7], np.int16),
              "u": np.array([250, 3], np.uint8), "f": np.array([0.25], np.float16),
              "s": np.array(["reverse", "ab"])}
    path = tmp_path / "ck.npz"
    ta.save(arrays, path)
    back = ta.load(path)
    for name, a in arrays.items():
        assert back[name].dtype == a.dtype and back[name].tolist() == a.tolist(), name


def test_what_cannot_be_saved_is_told_what_can(tmp_path):
    with pytest.raises(TypeError) as caught:
        ta.save({"model": ta.nn.Linear(2, 2)}, tmp_path / "ck.npz")
    assert str(caught.value) == ("save: cannot store a Linear at obj['model']; save its "
                                 ".state_dict() instead")
    with pytest.raises(TypeError) as caught:
        ta.save([1, {"x": {1, 2}}], tmp_path / "ck.npz")
    assert str(caught.value) == ("save: cannot store a set at obj[1]['x'] (use tensors, arrays, "
                                 "numbers, strings, None, and lists, tuples and dicts with string "
                                 "keys of those)")
    assert not os.path.exists(tmp_path / "ck.npz")


# ---- the limits that keep a forged file from costing memory: each inclusive, as documented ----


def _zip_of(path, entries):
    """A zip of raw .npy entries {name: bytes}, stored uncompressed as np.savez stores them."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in entries.items():
            zf.writestr(name + ".npy", data)
    return path


def _npy_bytes(a, header_len=None):
    """a as .npy bytes (format 1.0), its header padded with spaces to `header_len` characters."""
    header = repr({"descr": a.dtype.str, "fortran_order": False, "shape": a.shape})
    header_len = header_len or len(header) + 1
    text = header.ljust(header_len - 1) + "\n"
    return (b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")
            + a.tobytes())


def test_an_npy_header_of_10000_characters_loads_and_a_longer_one_is_refused(tmp_path):
    meta = _npy_bytes(np.array(json.dumps({"format": serialization.FORMAT,
                                           "structure": {"array": "a0"}})))
    for length, loads in ((10_000, True), (10_001, False)):
        path = _zip_of(tmp_path / f"h{length}.npz",
                       {"__tinyattn__": meta, "a0": _npy_bytes(np.arange(3.0), length)})
        if loads:
            assert ta.load(path).tolist() == [0.0, 1.0, 2.0]
        else:
            with pytest.raises(ta.CheckpointError, match="not a readable checkpoint"):
                ta.load(path)


def test_the_structure_entry_may_be_exactly_max_meta_bytes(tmp_path, monkeypatch):
    path = tmp_path / "ck.npz"
    ta.save({"step": 3}, path)
    with zipfile.ZipFile(path) as zf:
        size = zf.getinfo("__tinyattn__.npy").file_size
    monkeypatch.setattr(serialization, "MAX_META_BYTES", size)
    assert ta.load(path) == {"step": 3}
    monkeypatch.setattr(serialization, "MAX_META_BYTES", size - 1)
    with pytest.raises(ta.CheckpointError, match=f"{size} bytes \\(at most {size - 1}\\)"):
        ta.load(path)


def test_an_entry_may_inflate_to_the_ratio_times_its_stored_bytes_plus_4_kib(tmp_path,
                                                                              monkeypatch):
    """With the ratio at 0 only the 4 KiB allowance is left: an entry of exactly 4096 bytes
    (header and data) loads, one of 4097 is refused before it is read."""
    monkeypatch.setattr(serialization, "MAX_DEFLATE_RATIO", 0)
    path = tmp_path / "ck.npz"
    ta.save({"a": np.zeros(4096 - 128, np.uint8)}, path)  # a 128-byte .npy header
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo("a0.npy").file_size == 4096
    assert ta.load(path)["a"].shape == (3968,)
    ta.save({"a": np.zeros(4096 - 127, np.uint8)}, path)
    with pytest.raises(ta.CheckpointError, match="damaged or forged"):
        ta.load(path)
