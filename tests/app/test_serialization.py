"""Checkpoints: round trips, no pickle ever, clear errors, and a failed save loses nothing."""

import errno
import inspect
import io
import json
import os
import re
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
    with pytest.raises(TypeError, match="cannot store a complex"):
        ta.save({"x": 1j}, tmp_path / "bad.npz")
    with pytest.raises(TypeError, match="keys must be strings, ints or floats"):
        ta.save({(1, 2): 2}, tmp_path / "bad.npz")
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
        ta.save([1, {"x": 2j}], tmp_path / "ck.npz")
    assert str(caught.value) == ("save: cannot store a complex at obj[1]['x'] (use tensors, "
                                 "arrays, numbers, strings, None, and lists, tuples, sets, "
                                 "argparse.Namespaces and dicts with string, int or float keys "
                                 "of those: convert it to one of them, e.g. a dict of its fields "
                                 "or str(value))")
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


# ---- nesting save refuses (load would call the file damaged); containers that hold themselves --


def _deep(levels, kind):
    node = 1  # a value `levels` containers down
    for _ in range(levels):
        node = {"c": node} if kind == "dict" else [node]
    return node


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_nesting_load_would_refuse_is_refused_at_save_and_the_old_file_kept(tmp_path, kind):
    path = tmp_path / "ck.npz"
    ok = _deep(serialization.MAX_DEPTH, kind)
    ta.save(ok, path)  # as deep as load reads: saved, and loads back
    assert ta.load(path) == ok
    original = path.read_bytes()
    where = r"obj\['cfg'\]\['c'\]" if kind == "dict" else r"obj\['cfg'\]\[0\]"
    with pytest.raises(ValueError, match=f"^save: {where}.* is nested {serialization.MAX_DEPTH + 1}"
                                         f" levels deep; load reads at most "
                                         f"{serialization.MAX_DEPTH}") as e:
        ta.save({"w": ta.ones(2), "cfg": _deep(serialization.MAX_DEPTH, kind)}, path)
    assert isinstance(e.value, ta.CheckpointError)
    shown = str(e.value)[len("save: "):str(e.value).index(" is nested")]
    assert len(shown) == 90 + 5 + 60 and shown[90:95] == " ... "  # (a long place, shortened)
    assert path.read_bytes() == original and os.listdir(tmp_path) == ["ck.npz"]


def test_a_container_that_holds_itself_is_refused_by_its_place(tmp_path):
    loop = {}
    loop["self"] = loop
    inner = {"x": []}
    inner["x"].append(inner)
    for obj, message in [(loop, "save: obj['self'] is obj itself"),
                         ({"a": [inner]}, "save: obj['a'][0]['x'][0] is obj['a'][0] itself")]:
        with pytest.raises(ValueError) as e:
            ta.save(obj, tmp_path / "ck.npz")
        assert str(e.value).startswith(message), str(e.value)
        assert "a container that holds itself" in str(e.value)
    assert os.listdir(tmp_path) == []
    shared = [1, 2]  # the same list twice (not inside itself) is fine: saved as two copies
    ta.save({"a": shared, "b": shared}, tmp_path / "ck.npz")
    assert ta.load(tmp_path / "ck.npz") == {"a": [1, 2], "b": [1, 2]}


# ---- what a tensor is besides its values: requires_grad, Parameter, one object saved twice ----


def test_requires_grad_and_parameters_come_back_as_torchs(tmp_path):
    torch = pytest.importorskip("torch")

    def saved(lib, nn, x):
        frozen = nn.Parameter(lib.ones(2))
        frozen.requires_grad_(False)
        return {"param": nn.Parameter(lib.ones(2)), "leaf": x, "nonleaf": x * 2,
                "frozen": frozen, "plain": lib.ones(2)}

    def kinds(back):
        return {k: (type(v).__name__, v.requires_grad, v.is_leaf) for k, v in back.items()}

    ta.save(saved(ta, ta.nn, ta.ones(2, requires_grad=True)), tmp_path / "ck.npz")
    back = ta.load(tmp_path / "ck.npz")
    buf = io.BytesIO()
    torch.save(saved(torch, torch.nn, torch.ones(2, requires_grad=True)), buf)
    buf.seek(0)
    assert kinds(back) == kinds(torch.load(buf)) == {
        "param": ("Parameter", True, True), "leaf": ("Tensor", True, True),
        "nonleaf": ("Tensor", True, True), "frozen": ("Parameter", False, True),
        "plain": ("Tensor", False, True)}
    np.testing.assert_array_equal(back["nonleaf"].numpy(), [2.0, 2.0])
    old = ta.load(_forged(tmp_path, {"dict": {"w": {"tensor": "a0"}}}, a0=np.ones(2)))
    assert type(old["w"]) is ta.Tensor and not old["w"].requires_grad  # a file from before


def test_a_tensor_saved_twice_is_stored_once_and_comes_back_as_one(tmp_path):
    torch = pytest.importorskip("torch")
    s = ta.tensor([0.0, 1.0, 2.0, 3.0], requires_grad=True)
    a = np.arange(3)
    ta.save({"a": s, "b": s, "list": [s, a], "again": a}, tmp_path / "ck.npz")
    with zipfile.ZipFile(tmp_path / "ck.npz") as zf:
        assert len(zf.namelist()) == 3  # s, a and the structure
    back = ta.load(tmp_path / "ck.npz")
    assert back["a"] is back["b"] is back["list"][0] and back["a"].requires_grad
    assert back["list"][1] is back["again"]
    only = ta.load(tmp_path / "ck.npz", keys=["list"])  # reached first where it was not first
    np.testing.assert_array_equal(only["list"][0].numpy(), [0.0, 1.0, 2.0, 3.0])
    x, y, z = ta.ones(1), ta.zeros(1), ta.full((1,), 2.0)  # each twice: three objects
    ta.save([x, y, z, z, y, x], tmp_path / "three.npz")
    back = ta.load(tmp_path / "three.npz")
    assert back[0] is back[5] and back[1] is back[4] and back[2] is back[3]
    assert [t.item() for t in back[:3]] == [1.0, 0.0, 2.0]

    class Tied(ta.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = ta.nn.Linear(2, 2, bias=False), ta.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

    ta.save(Tied().state_dict(), tmp_path / "tied.npz")  # two tensors over one memory
    back = ta.load(tmp_path / "tied.npz")
    assert back["a.weight"] is not back["b.weight"]
    assert np.shares_memory(back["a.weight"]._data, back["b.weight"]._data)
    back["a.weight"].data[0, 0] = 5.0
    assert back["b.weight"].numpy()[0, 0] == 5.0
    # torch's, the same: one storage under both keys
    tied = torch.nn.Module()
    tied.a, tied.b = torch.nn.Linear(2, 2, bias=False), torch.nn.Linear(2, 2, bias=False)
    tied.b.weight = tied.a.weight
    buf = io.BytesIO()
    torch.save(tied.state_dict(), buf)
    buf.seek(0)
    theirs = torch.load(buf)
    assert theirs["a.weight"].data_ptr() == theirs["b.weight"].data_ptr()


def test_a_view_is_saved_as_a_copy_of_its_values(tmp_path):
    """Documented: a view of another saved tensor is saved as its own values (torch keeps the
    two sharing one storage; here they share nothing after a load)."""
    s = ta.tensor([0.0, 1.0, 2.0, 3.0])
    ta.save({"s": s, "view": s[1:3]}, tmp_path / "ck.npz")
    back = ta.load(tmp_path / "ck.npz")
    back["s"].data[1] = 100.0
    assert back["view"].numpy().tolist() == [1.0, 2.0]
    assert "views are saved as copies" in " ".join(serialization.__doc__.lower().split())


# ---- file objects, as torch.save / torch.load take them --------------------------------------


class _Unseekable(io.RawIOBase):
    """A stream read once, front to back (a pipe, a socket): no seek."""

    def __init__(self, data):
        self._data = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, b):
        return self._data.readinto(b)


def test_save_and_load_take_binary_file_objects(tmp_path):
    obj = {"w": ta.tensor([1.0, 2.0]), "n": 3}
    buf = io.BytesIO()
    ta.save(obj, buf)
    buf.seek(0)
    assert ta.load(buf)["w"].numpy().tolist() == [1.0, 2.0]
    with open(tmp_path / "ck.npz", "wb") as f:
        ta.save(obj, f)
    with open(tmp_path / "ck.npz", "rb") as f:
        assert ta.load(f)["n"] == 3
    assert ta.load(tmp_path / "ck.npz")["n"] == 3  # the same bytes as a save to the path
    assert ta.load(_Unseekable(buf.getvalue()))["n"] == 3
    before = buf.getvalue()
    with pytest.raises(TypeError, match="cannot store a complex"):
        ta.save({"x": 1j}, buf)  # a failed save writes nothing into the file
    assert buf.getvalue() == before
    with open(tmp_path / "text.npz", "w") as f, pytest.raises(
            TypeError, match=f"save: {re.escape(f.name)} is opened in text mode.*'wb'"):
        ta.save(obj, f)  # (the file named by its path, as the BytesIO below by its type)
    with open(tmp_path / "ck.npz") as f, pytest.raises(
            TypeError, match=f"load: {re.escape(f.name)} is opened in text mode"):
        ta.load(f)
    for bad, fn in [(3, ta.save), (3, ta.load)]:
        args = (obj, bad) if fn is ta.save else (bad,)
        with pytest.raises(TypeError, match=f"^{fn.__name__}: .*a path .* or a binary file "
                                            "object.*got int"):
            fn(*args)
    with pytest.raises(ta.CheckpointError, match="not a tinyattn checkpoint: <BytesIO>"):
        ta.load(io.BytesIO(b"garbage, not a zip"))


# ---- map_location as torch takes it: a device, a string, a dict of locations -----------------


class _Device:
    """A device object as torch.device: its type and index."""

    def __init__(self, kind):
        self.type, self.index = kind, 0


def test_map_location_takes_devices_and_a_dict_and_refuses_other_kinds(tmp_path, cupy_be):
    path = tmp_path / "ck.npz"
    ta.save({"host": ta.tensor([1.0]), "gpu": ta.tensor([2.0], backend="cupy")}, path)

    def where(**kwargs):
        back = ta.load(path, **kwargs)
        return back["host"].device, back["gpu"].device

    assert where() == ("cpu", "cpu")  # (as before: NumPy unless asked)
    assert where(map_location={"cuda:0": "cpu"}) == ("cpu", "cpu")
    assert where(map_location={"cpu": "cuda:0"}) == ("cuda", "cuda")  # unmapped: where saved
    assert where(map_location={"cuda": "cpu", "cpu": "cuda"}) == ("cuda", "cpu")
    assert where(map_location={}) == ("cpu", "cuda")
    assert where(map_location=_Device("cuda")) == ("cuda", "cuda")
    assert where(map_location={"cuda:0": _Device("cpu")}) == ("cpu", "cpu")
    assert where(map_location="cpu") == ("cpu", "cpu")
    for bad in (3, ["cpu"], {0: "cpu"}, {"cpu": 1}):  # (a function is taken: see below)
        with pytest.raises(TypeError, match=r"^load: map_location must be a device \('cpu', "
                                            r"'cuda', 'cuda:0'.*a dict .*got "):
            ta.load(path, map_location=bad)
    old = ta.load(_forged(tmp_path, {"tensor": "a0"}, a0=np.ones(1)),
                  map_location={"cpu": "cuda"})  # a file from before: saved from the host
    assert old.device == "cuda"


def test_map_location_refusals_name_the_dict_key_or_value(tmp_path):
    path = tmp_path / "ck.npz"
    ta.save({"x": ta.tensor([1.0])}, path)
    for bad, what in [({0: "cpu"}, "the dict key 0 (int)"), ({"cpu": 1}, "the dict value 1 (int)")]:
        with pytest.raises(TypeError, match=re.escape(f"got {what};")):
            ta.load(path, map_location=bad)


def test_map_location_as_a_torch_device(tmp_path):
    torch = pytest.importorskip("torch")
    ta.save({"w": ta.ones(2)}, tmp_path / "ck.npz")
    for ml in (torch.device("cpu"), {"cuda:0": torch.device("cpu")}, {"cuda:0": "cpu"}):
        assert ta.load(tmp_path / "ck.npz", map_location=ml)["w"].device == "cpu"


# ---- NumPy scalars JSON cannot hold; a path that names a folder ------------------------------


@pytest.mark.parametrize("value", [np.complex64(1), np.datetime64("2020-01-01"),
                                   np.timedelta64(3, "s"), np.bytes_(b"x"), np.void(b"ab"),
                                   np.longdouble(1.5), 1 + 2j, b"bytes"])
def test_a_value_json_cannot_hold_is_named_by_its_place(tmp_path, value):
    path = tmp_path / "ck.npz"
    ta.save({"w": 1}, path)
    with pytest.raises(TypeError, match=rf"^save: cannot store a {type(value).__name__} at "
                                        r"obj\['x'\]\['y'\] \(use tensors"):
        ta.save({"x": {"y": value}}, path)
    assert ta.load(path) == {"w": 1} and os.listdir(tmp_path) == ["ck.npz"]


def test_a_path_ending_in_a_slash_is_refused_as_open_refuses_it(tmp_path):
    from tinyattn.files import atomic_write

    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_bytes(b"kept")
    for name in ("new", "folder", "file"):
        target = f"{tmp_path / name}/"
        with pytest.raises(OSError) as opened:
            open(target, "wb")  # noqa: SIM115 - (what open() says of it)
        for write in (lambda target=target: ta.save({"w": 1}, target),
                      lambda target=target: atomic_write(target, lambda f: f.write("x"), "w")):
            with pytest.raises(type(opened.value)) as e:
                write()
            assert e.value.errno == opened.value.errno and e.value.filename == target
    assert sorted(os.listdir(tmp_path)) == ["file", "folder"]
    assert (tmp_path / "file").read_bytes() == b"kept" and os.listdir(tmp_path / "folder") == []


# ---- damage: every error a damaged zip raises is a CheckpointError ----------------------------


def test_a_zip_entry_flagged_encrypted_is_a_checkpoint_error(tmp_path):
    path = tmp_path / "ck.npz"
    ta.save({"w": ta.ones(4)}, path)
    data = bytearray(path.read_bytes())
    data[data.find(b"PK\x01\x02") + 8] |= 1  # the first central directory entry: encrypted
    path.write_bytes(data)
    with pytest.raises(ta.CheckpointError, match="not a readable checkpoint.*encrypted"):
        ta.load(path)


@pytest.mark.parametrize("compressed", [False, True])
def test_any_one_damaged_byte_is_a_checkpoint_error_or_loads_the_same(tmp_path, compressed):
    """Every byte of a small checkpoint set to 0, to 255 and flipped in its lowest bit (stored,
    and deflated as numpy.savez_compressed writes it: zlib's errors too)."""
    path = tmp_path / "ck.npz"
    obj = {"w": ta.tensor(np.arange(16, dtype=np.float32)), "meta": {"step": 5}}
    ta.save(obj, path)
    if compressed:
        with zipfile.ZipFile(path) as zf:
            entries = {n: zf.read(n) for n in zf.namelist()}
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, entry in entries.items():
                zf.writestr(name, entry)
    data = path.read_bytes()
    raw = {}
    for k in range(len(data)):
        for value in {0, 255, data[k] ^ 1} - {data[k]}:
            damaged = bytearray(data)
            damaged[k] = value
            path.write_bytes(damaged)
            try:
                back = ta.load(path)
            except ta.CheckpointError:
                continue
            except Exception as e:  # noqa: BLE001 - (what the test looks for)
                raw.setdefault(type(e).__name__, (k, value, str(e)[:100]))
                continue
            assert back["meta"] == {"step": 5}, (k, value)
            np.testing.assert_array_equal(back["w"].numpy(), np.arange(16))
    assert raw == {}


def test_sizes_a_forged_zip_directory_declares_are_refused_before_allocating(tmp_path,
                                                                             monkeypatch):
    """The directory's sizes are the forger's to write: an entry declaring 2 GB (stored, its
    .npy header agreeing) in a file of a few hundred bytes is refused without asking for the
    memory; an allocation that fails is a CheckpointError too."""
    asked = []

    def spy(size):
        asked.append(size)
        if size > 1 << 20:
            raise MemoryError
        return bytearray(size)

    monkeypatch.setattr(serialization, "bytearray", spy, raising=False)
    header = io.BytesIO()
    n = (0x7FFFFF00 - 128) // 4
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (n,)})
    assert len(header.getvalue()) == 128
    path = tmp_path / "forged.npz"
    meta = json.dumps({"format": serialization.FORMAT, "structure": {"tensor": "a0"}})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        buf = io.BytesIO()
        np.save(buf, np.array(meta))
        zf.writestr("__tinyattn__.npy", buf.getvalue())
        zf.writestr("a0.npy", header.getvalue() + bytes(16))
    data = bytearray(path.read_bytes())
    entry = data.rfind(b"PK\x01\x02")  # a0's central directory entry (the last)
    declared = 128 + 4 * n
    data[entry + 20:entry + 28] = declared.to_bytes(4, "little") * 2  # compressed, uncompressed
    path.write_bytes(data)
    with pytest.raises(ta.CheckpointError, match=f"declares {declared} bytes, {declared} stored, "
                                                 f"in a file of {len(data)} bytes"):
        ta.load(path)
    assert all(size < 1 << 20 for size in asked)
    ta.save({"w": ta.zeros(1 << 19)}, tmp_path / "ck.npz")  # 2 MiB: more than spy allows
    with pytest.raises(ta.CheckpointError, match=r"obj\['w'\] needs 2097152 bytes, more than can "
                                                 "be allocated"):
        ta.load(tmp_path / "ck.npz")


# ---- several checkpoints in one file, bytes paths --------------------------------------------


def test_checkpoints_saved_back_to_back_load_one_after_another_as_torchs_first(tmp_path):
    """zipfile reads the last end record in a file: load reads the archive that starts where the
    file object stands (torch's first load gives the first), and leaves it just past that one."""
    torch = pytest.importorskip("torch")
    tbuf = io.BytesIO()
    torch.save([1], tbuf)
    torch.save([2], tbuf)
    tbuf.seek(0)
    assert torch.load(tbuf) == [1]
    buf = io.BytesIO()
    ta.save([1], buf)
    ta.save({"w": ta.tensor([2.0, 3.0])}, buf)
    ta.save([3], buf)
    buf.seek(0)
    assert ta.load(buf) == [1]
    assert ta.load(buf)["w"].tolist() == [2.0, 3.0]
    assert ta.load(buf) == [3] and buf.tell() == len(buf.getvalue())
    path = tmp_path / "two.npz"  # (concatenated files: the first, as from a file object)
    path.write_bytes(buf.getvalue())
    assert ta.load(path) == [1]
    with open(path, "rb") as f:
        assert ta.load(f) == [1] and ta.load(f)["w"].tolist() == [2.0, 3.0]
    whole = buf.getvalue()
    cut = io.BytesIO(whole[:len(whole) - 10])  # the last one cut short: an error, not another
    assert ta.load(cut) == [1] and ta.load(cut)["w"].tolist() == [2.0, 3.0]
    with pytest.raises(ta.CheckpointError, match="not a readable checkpoint"):
        ta.load(cut)


def test_save_and_load_take_bytes_paths(tmp_path):
    path = os.fsencode(tmp_path / "ck.npz")
    ta.save({"w": ta.tensor([1.0, 2.0])}, path)
    assert ta.load(path)["w"].tolist() == [1.0, 2.0]
    ta.save([5], path)  # (written again: atomically, over the old one)
    assert ta.load(path) == [5]
    assert sorted(os.listdir(tmp_path)) == ["ck.npz"]
    with pytest.raises(ta.CheckpointError, match=re.escape(str(tmp_path / "bad.npz"))):
        (tmp_path / "bad.npz").write_bytes(b"not a zip")
        ta.load(os.fsencode(tmp_path / "bad.npz"))
    with pytest.raises(FileNotFoundError):
        ta.load(os.fsencode(tmp_path / "missing.npz"))


def test_a_structure_as_deep_as_load_reads_saves_and_loads_from_a_deep_call_stack(tmp_path):
    """save and load recurse a few frames per level: from a call stack already near Python's
    recursion limit they still handle MAX_DEPTH levels (no RecursionError), and the limit is
    set back after."""
    import sys

    path = tmp_path / "ck.npz"
    ok = {"w": ta.ones(2), "cfg": _deep(serialization.MAX_DEPTH - 1, "dict")}
    limit = sys.getrecursionlimit()
    in_use = len(inspect.stack(0))

    def down(n):
        if n:
            return down(n - 1)
        ta.save(ok, path)
        return ta.load(path)

    back = down(limit - in_use - 120)  # ~120 frames left: fewer than a level-by-level walk needs
    assert back["cfg"] == ok["cfg"] and back["w"].tolist() == [1.0, 1.0]
    assert sys.getrecursionlimit() == limit
