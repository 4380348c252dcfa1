"""save(obj, path) and load(path): checkpoints as plain .npz files that can never run code.

`obj` is any nesting of dicts (string keys), lists, tuples, tensors, NumPy arrays, numbers,
strings, bools and None. Arrays go into the .npz as entries; the structure around them goes in
as JSON text. Loading uses allow_pickle=False. Saving writes a temporary file beside the target
and renames it over the target, so a crash mid-save leaves the previous checkpoint intact.
"""

import io
import json
import os
import tempfile
import zipfile

import numpy as np

from .errors import CheckpointError
from .tensor import Tensor

FORMAT = "tinyattn-checkpoint-1"
_META = "__tinyattn__"


def save(obj, path):
    """Write `obj` to `path` (.npz) atomically."""
    arrays = {}
    structure = _flatten(obj, arrays)
    arrays[_META] = np.array(json.dumps({"format": FORMAT, "structure": structure}))
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def load(path, backend=None):
    """Read what `save` wrote; tensors come back as tensors (on `backend`, default NumPy)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
        npz = np.load(io.BytesIO(raw), allow_pickle=False)
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise CheckpointError(f"load: {path} holds a single .npy array, not a checkpoint; "
                                  "load it with numpy.load, or write checkpoints with "
                                  "tinyattn.save")
        with npz:
            arrays = {key: npz[key] for key in npz.files}
    except (FileNotFoundError, CheckpointError):
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
        raise CheckpointError(f"load: {path} is not a readable checkpoint (corrupt, truncated or "
                              f"not an .npz file): {type(e).__name__}: {e}") from None
    if _META not in arrays:
        raise CheckpointError(f"load: {path} is an .npz file but not a tinyattn checkpoint "
                              f"(no {_META} entry); it holds {sorted(arrays)[:5]}")
    try:
        meta = json.loads(str(arrays.pop(_META)))
        if meta.get("format") != FORMAT:
            raise CheckpointError(f"load: {path} has format {meta.get('format')!r}, this "
                                  f"version reads {FORMAT!r}")
        return _unflatten(meta["structure"], arrays, backend)
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise CheckpointError(f"load: {path} has a damaged structure entry: "
                              f"{type(e).__name__}: {e}") from None


def _flatten(obj, arrays, where="obj"):
    """A JSON-able description of obj; arrays are moved into `arrays` under fresh keys.
    `where` is obj's place in what is being saved (obj['model'][2]), for the error messages."""
    if isinstance(obj, Tensor):
        key = f"a{len(arrays)}"
        arrays[key] = obj.numpy()
        return {"tensor": key}
    if isinstance(obj, np.ndarray) or hasattr(obj, "__cuda_array_interface__"):
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(obj.get() if hasattr(obj, "get") else obj)
        if arrays[key].dtype.kind not in "biufU":
            raise TypeError(f"save: cannot store {where}, an array of dtype "
                            f"{arrays[key].dtype}")
        return {"array": key}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, str):
                raise TypeError(f"save: dict keys must be strings; {where} has the "
                                f"{type(k).__name__} key {k!r}")
        return {"dict": {k: _flatten(v, arrays, f"{where}[{k!r}]") for k, v in obj.items()}}
    if isinstance(obj, (list, tuple)):
        return {"list" if isinstance(obj, list) else "tuple":
                [_flatten(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    hint = ("; save its .state_dict() instead" if hasattr(obj, "state_dict") else
            " (use tensors, arrays, numbers, strings, None, and lists, tuples and dicts with "
            "string keys of those)")
    raise TypeError(f"save: cannot store a {type(obj).__name__} at {where}{hint}")


def _unflatten(node, arrays, backend):
    if isinstance(node, dict):
        if "tensor" in node:
            return Tensor(arrays[node["tensor"]], backend=backend)
        if "array" in node:
            return arrays[node["array"]]
        if "dict" in node:
            return {k: _unflatten(v, arrays, backend) for k, v in node["dict"].items()}
        if "list" in node:
            return [_unflatten(v, arrays, backend) for v in node["list"]]
        if "tuple" in node:
            return tuple(_unflatten(v, arrays, backend) for v in node["tuple"])
        raise KeyError(f"unknown entry {sorted(node)}")
    return node
