"""save(obj, path) and load(path): checkpoints as plain .npz files that can never run code.

`obj` is any nesting of dicts (string keys), lists, tuples, tensors, NumPy arrays, numbers,
strings, bools and None. Arrays go into the .npz as entries; the structure around them goes in
as JSON text. Saving writes a temporary file beside the target and renames it over the target,
so a crash mid-save leaves the previous checkpoint intact. Loading never unpickles, reads only
the entries asked for, and checks each entry's declared shape against the bytes the file holds
before it allocates anything.
"""

import json
import math
import os
import zipfile
import zlib

import numpy as np

from .errors import CheckpointError, fmt_shape
from .files import atomic_write
from .tensor import Tensor

FORMAT = "tinyattn-checkpoint-1"
_META = "__tinyattn__"
MAX_META_BYTES = 64 << 20  # the JSON structure entry; far above any real checkpoint's
MAX_DEPTH = 100  # nesting of the saved structure
MAX_DEFLATE_RATIO = 1100  # deflate cannot expand data more than ~1032 times


def save(obj, path):
    """Write `obj` to `path` (.npz) atomically."""
    arrays = {}
    structure = _flatten(obj, arrays)
    arrays[_META] = np.array(json.dumps({"format": FORMAT, "structure": structure}))
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, lambda f: np.savez(f, **arrays))


def load(path, backend=None, keys=None, check=None, *, map_location=None, weights_only=True):
    """Read what `save` wrote; tensors come back as tensors (on `backend`, default NumPy).

    keys: of a saved dict, load only these entries (the others are never read); one the dict
    lacks is a KeyError (MissingKeysError) that names it.
    check(where, shape, dtype): called before each array is read (where: "obj['model'][...]");
    it may raise to refuse an array before its memory is allocated.
    map_location: torch's name for the backend ("cpu", "cuda", "cuda:0"). weights_only: as
    torch's default, and always so here: a checkpoint holds arrays and plain values, never
    code to run.
    """
    if map_location is not None:
        if backend is not None:
            raise TypeError("load: give backend or map_location, not both")
        backend = str(map_location).split(":")[0]
    path = os.fspath(path)
    try:
        with zipfile.ZipFile(path) as zf:
            reader = _Reader(zf, path, check)
            structure = reader.structure()
            if keys is not None:
                structure = _select(structure, keys, path)
            return _unflatten(structure, reader, backend)
    except (FileNotFoundError, IsADirectoryError, PermissionError, CheckpointError):
        raise
    except zipfile.BadZipFile as e:
        raise CheckpointError(_not_a_zip(path, e)) from None
    except (ValueError, OSError, EOFError, KeyError, TypeError, NotImplementedError,
            zlib.error) as e:
        raise CheckpointError(f"load: {path} is not a readable checkpoint (corrupt, truncated or "
                              f"not written by tinyattn.save): {type(e).__name__}: {e}") from None


def _not_a_zip(path, e):
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"\x93NUMPY"):
        return (f"load: {path} holds a single .npy array, not a checkpoint; load it with "
                "numpy.load, or write checkpoints with tinyattn.save")
    if head.startswith(b"PK"):
        return f"load: {path} is not a readable checkpoint (a damaged or truncated zip: {e})"
    return (f"not a tinyattn checkpoint: {path} (not a readable checkpoint: a checkpoint is an "
            f".npz zip written by tinyattn.save; this file starts with {head!r})")


class _Reader:
    """Reads a checkpoint's entries one at a time, each checked before it is allocated."""

    def __init__(self, zf, path, check):
        self.zf, self.path, self.check = zf, path, check

    def structure(self):
        """The saved structure (the JSON in the __tinyattn__ entry), format checked."""
        try:
            info = self.zf.getinfo(_META + ".npy")
        except KeyError:
            held = sorted(n.removesuffix(".npy") for n in self.zf.namelist())
            raise CheckpointError(f"load: {self.path} is an .npz file but not a tinyattn "
                                  f"checkpoint (no {_META} entry); it holds {held[:5]}") from None
        if info.file_size > MAX_META_BYTES:
            raise CheckpointError(f"load: {self.path} has a damaged structure entry: "
                                  f"{info.file_size} bytes (at most {MAX_META_BYTES})")
        text = self.array(_META, _META)
        try:
            meta = json.loads(str(text))
            fmt = meta.get("format")
            structure = meta["structure"] if fmt == FORMAT else None
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"load: {self.path} has a damaged structure entry: "
                                  f"{type(e).__name__}: {e}") from None
        except RecursionError:
            raise CheckpointError(f"load: {self.path} has a damaged structure entry: nested "
                                  "too deep") from None
        if fmt != FORMAT:
            raise CheckpointError(f"load: {self.path} has format {fmt!r}, this version reads "
                                  f"{FORMAT!r}")
        return structure

    def array(self, key, where):
        """Entry `key` as an array, after its header, dtype, `check` and size are verified."""
        if not isinstance(key, str):
            raise CheckpointError(f"load: {self.path} has a damaged structure entry: {where} "
                                  f"names entry {key!r}")
        try:
            info = self.zf.getinfo(key + ".npy")
        except KeyError:
            raise CheckpointError(f"load: {self.path} has a damaged structure entry: {where} "
                                  f"names entry {key!r}, which the file lacks") from None
        with self.zf.open(info) as f:
            shape, fortran, dtype = self._header(f, where)
            size = math.prod(shape) * dtype.itemsize
            held = info.file_size - f.tell()
            if held != size or info.file_size > info.compress_size * MAX_DEFLATE_RATIO + 4096:
                raise CheckpointError(
                    f"load: {self.path}: {where} declares shape {fmt_shape(shape)} of {dtype} "
                    f"({size} bytes), but the file holds {held} bytes for it "
                    f"({info.compress_size} stored); the checkpoint is damaged or forged")
            buf = bytearray(size)
            if f.readinto(buf) != size:
                raise EOFError(f"{where} is cut short")
        return np.frombuffer(buf, dtype=dtype).reshape(shape, order="F" if fortran else "C")

    def _header(self, f, where):
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise CheckpointError(f"load: {self.path}: {where} is an .npy entry of format "
                                  f"version {version}, which this version cannot read")
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read(f, max_header_size=10_000)
        if dtype.hasobject:
            raise CheckpointError(f"load: {self.path}: {where} holds pickled Python objects, "
                                  "which tinyattn never loads (they could run code)")
        if dtype.kind not in "biufU" or any(n < 0 for n in shape):
            raise CheckpointError(f"load: {self.path}: {where} has dtype {dtype}, shape "
                                  f"{shape}: not an entry tinyattn writes")
        if self.check is not None and where != _META:
            self.check(where, tuple(shape), dtype)
        return tuple(shape), fortran, dtype


class MissingKeysError(CheckpointError, KeyError):
    """load(keys=...) asked for entries that the checkpoint's dict does not hold (a KeyError,
    as a dict's, and a CheckpointError)."""

    def __str__(self):
        return Exception.__str__(self)  # the message, not KeyError's repr of it


def _select(structure, keys, path):
    """Only the entries `keys` of a saved dict; every one must be there."""
    if not (isinstance(structure, dict) and isinstance(structure.get("dict"), dict)):
        raise CheckpointError(f"load: keys= needs a checkpoint that holds a dict; {path} holds "
                              "something else")
    keys = [keys] if isinstance(keys, str) else list(keys)  # (a name, not its letters)
    held = structure["dict"]
    missing = [k for k in dict.fromkeys(keys) if k not in held]
    if missing:
        listed = ", ".join(map(repr, held))
        if len(held) > 10:
            listed = ", ".join(map(repr, list(held)[:10])) + f", ... ({len(held) - 10} more)"
        raise MissingKeysError(
            f"load: {path} has no {', '.join(map(repr, missing))} "
            f"entr{'y' if len(missing) == 1 else 'ies'} (asked for with keys=); it holds "
            f"{listed or 'none'}")
    return {"dict": {k: v for k, v in held.items() if k in keys}}


def _flatten(obj, arrays, where="obj"):
    """A JSON-able description of obj; arrays are moved into `arrays` under fresh keys.
    `where` is obj's place in what is being saved (obj['model'][2]), for the error messages."""
    if isinstance(obj, Tensor):
        key = f"a{len(arrays)}"
        arrays[key] = obj.numpy()
        return {"tensor": key}
    if isinstance(obj, np.ndarray) or hasattr(obj, "__cuda_array_interface__"):
        return {"array": _store_array(obj, arrays, where)}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {"dict": _flatten_dict(obj, arrays, where)}
    if isinstance(obj, (list, tuple)):
        return {"list" if isinstance(obj, list) else "tuple":
                [_flatten(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    hint = ("; save its .state_dict() instead" if hasattr(obj, "state_dict") else
            " (use tensors, arrays, numbers, strings, None, and lists, tuples and dicts with "
            "string keys of those)")
    raise TypeError(f"save: cannot store a {type(obj).__name__} at {where}{hint}")


def _store_array(a, arrays, where):
    """Put a NumPy (or CuPy, brought to the host) array in `arrays`: its key."""
    key = f"a{len(arrays)}"
    arrays[key] = np.asarray(a.get() if hasattr(a, "get") else a)
    if arrays[key].dtype.kind not in "biufU":
        raise TypeError(f"save: cannot store {where}, an array of dtype {arrays[key].dtype}")
    return key


def _flatten_dict(obj, arrays, where):
    for k in obj:
        if not isinstance(k, str):
            raise TypeError(f"save: dict keys must be strings; {where} has the "
                            f"{type(k).__name__} key {k!r}")
    return {k: _flatten(v, arrays, f"{where}[{k!r}]") for k, v in obj.items()}


def _unflatten(node, reader, backend, where="obj", depth=0):
    """The object a structure node describes; arrays are read as they are reached."""
    if depth > MAX_DEPTH:
        raise CheckpointError(f"load: {reader.path} has a damaged structure entry: nested "
                              f"deeper than {MAX_DEPTH} levels")
    if not isinstance(node, dict):
        return node
    if "tensor" in node:
        return Tensor(reader.array(node["tensor"], where), backend=backend)
    if "array" in node:
        return reader.array(node["array"], where)
    return _unflatten_container(node, reader, backend, where, depth)


def _unflatten_container(node, reader, backend, where, depth):
    kind = next((k for k in ("dict", "list", "tuple") if k in node), None)
    body = node.get(kind)
    if not isinstance(body, dict if kind == "dict" else list):
        raise CheckpointError(f"load: {reader.path} has a damaged structure entry: {where} is "
                              f"{str(node)[:60]}")
    if kind == "dict":
        return {k: _unflatten(v, reader, backend, f"{where}[{k!r}]", depth + 1)
                for k, v in body.items()}
    items = [_unflatten(v, reader, backend, f"{where}[{i}]", depth + 1)
             for i, v in enumerate(body)]
    return items if kind == "list" else tuple(items)
