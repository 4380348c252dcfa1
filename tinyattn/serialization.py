"""save(obj, f) and load(f): checkpoints as plain .npz files that can never run code.

`obj` is any nesting of dicts (string, int or float keys: an optimizer's state dict keys its
state by parameter position, as torch's; an OrderedDict comes back as one), lists, tuples, sets
and frozensets, argparse.Namespaces (a script's args), tensors, NumPy arrays, numbers, strings,
bools and None; anything else (a class of the script's own) is refused by name, never pickled;
at most MAX_DEPTH containers deep (as deep as load reads: save refuses
deeper, and a container that holds itself, naming the place). Arrays go into the .npz as
entries; the structure around them goes in as JSON text. A tensor keeps requires_grad, its class
(an nn.Parameter comes back as one) and the device it was saved from (for a map_location dict);
one tensor (or array) saved at several places is stored once and comes back as one object, and
tensors over one array (a state dict's tied weights) come back sharing one array. Views are
saved as copies: a slice of another saved tensor comes back with memory of its own (torch keeps
both in one storage). Files written before these were kept load as they did (plain tensors, one
object per place), and older versions read the files written now (they ignore what they lack: a
dict keyed by ints comes back keyed by their strings there). A state dict's `_metadata` (each
module's version, as torch.save keeps it) is saved with it and comes back on an OrderedDict.

`f` is a path or, as torch's, a binary file object (io.BytesIO, a file opened "wb" / "rb").
Saving to a path writes a temporary file beside the target and renames it over the target, so a
crash mid-save leaves the previous checkpoint intact; to a file object it writes the whole
checkpoint in one write, or nothing. Loading never unpickles, reads only the entries asked for,
and checks each entry's declared shape against the bytes the file holds before it allocates
anything. It reads the checkpoint that starts where the file object stands (or at a path's first
byte), walked from its front, and leaves the file object just past it: checkpoints saved one
after another into one file load one after another, as torch's.
"""

import argparse
import contextlib
import io
import json
import math
import os
import struct
import sys
import zipfile
import zlib
from collections import OrderedDict

import numpy as np

from .autograd import share_version
from .errors import BackendError, CheckpointError, fmt_shape
from .files import atomic_write, refuse_folder_path
from .nn.module import Parameter
from .tensor import Tensor, _fresh

FORMAT = "tinyattn-checkpoint-1"
_META = "__tinyattn__"
MAX_META_BYTES = 64 << 20  # the JSON structure entry; far above any real checkpoint's
MAX_DEPTH = 100  # nesting of the saved structure
MAX_DEFLATE_RATIO = 1100  # deflate cannot expand data more than ~1032 times


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Write `obj` to `f`: a path (.npz, written atomically) or a binary file object.

    torch.save's other arguments (pickle_module, pickle_protocol,
    _use_new_zipfile_serialization, _disable_byteorder_record) are taken and change nothing:
    tinyattn never pickles, and writes its one format (a zip, little-endian arrays)."""
    arrays = _with_stack_room(lambda: _Writer().write(obj))
    if not _is_path(f):
        _file_object(f, "save")
        buf = io.BytesIO()  # (whole first: a failure writes nothing into f)
        np.savez(buf, **arrays)
        f.write(buf.getvalue())
        return
    path = os.fsdecode(f)  # (a bytes path too)
    refuse_folder_path(path)  # ("ck/": before a folder is made for it)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write(path, lambda out: np.savez(out, **arrays))


def load(f, backend=None, keys=None, check=None, *, map_location=None, weights_only=True,
         mmap=None, pickle_module=None, **pickle_load_args):
    """Read what `save` wrote (from a path or a binary file object); tensors come back as
    tensors (on `backend`, default NumPy).

    keys: of a saved dict, load only these entries (the others are never read); one the dict
    lacks is a KeyError (MissingKeysError) that names it.
    check(where, shape, dtype): called before each array is read (where: "obj['model'][...]");
    it may raise to refuse an array before its memory is allocated.
    map_location: torch's: a device ("cpu", "cuda", "cuda:0", or a device object such as
    torch.device("cpu")) for every tensor, or a dict from the device a tensor was saved from
    to where it goes ({"cuda:0": "cpu"}; a tensor saved from a device the dict does not name
    stays there, one from the host as it would without map_location; device indexes are not
    told apart); or, as torch's, a function fn(tensor, location) called for each tensor as
    loaded on the host, location "cpu" or "cuda" (where it was saved from), whose result (a
    tensor: `lambda t, loc: t` keeps it, `lambda t, loc: t.cuda()` moves it) is used, None
    meaning "as without map_location". torch's map_location may also come second by position
    (load(f, {"cuda:0": "cpu"}), load(f, fn)): a dict or a function there is taken as it.
    weights_only: as torch's default, and always so here (False too): a checkpoint holds
    arrays and plain values, never code to run. mmap, pickle_module and pickle's encoding,
    errors and fix_imports are taken and change nothing (arrays are read into memory; nothing
    is unpickled).
    """
    unknown = set(pickle_load_args) - {"encoding", "errors", "fix_imports"}
    if unknown:
        raise TypeError(f"load() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if map_location is None and (isinstance(backend, dict) or _is_function(backend)):
        backend, map_location = None, backend  # (torch's second argument is map_location)
    place = _placement(backend, map_location)
    source, name, start = _source(f)
    try:
        with _archive(source, start) as (archive, size), zipfile.ZipFile(archive) as zf:
            reader = _Reader(zf, name, check, size)
            return _with_stack_room(lambda: _Builder(reader, place).build(
                _select(reader.structure(), keys, name) if keys is not None else
                reader.structure()))
    except _FunctionRaisedError as e:  # (map_location's function's own error)
        raise e.error from None
    except RecursionError:  # (even with more room: a forged structure, nested far too deep)
        raise CheckpointError(f"load: {name} has a damaged structure entry: nested too "
                              "deep") from None
    except (FileNotFoundError, IsADirectoryError, PermissionError, CheckpointError,
            BackendError):  # (BackendError: a device map_location named that is not here)
        raise
    except zipfile.BadZipFile as e:
        raise CheckpointError(_not_a_zip(source, name, start, e)) from None
    # what else a damaged zip or .npy entry raises: zipfile's RuntimeError for an entry flagged
    # encrypted, NotImplementedError for an unknown compression, zlib.error for bad deflate
    # data, EOFError, struct.error and OverflowError for cut or forged headers
    except (ValueError, OSError, EOFError, KeyError, TypeError, RuntimeError, OverflowError,
            struct.error, zlib.error) as e:
        raise CheckpointError(f"load: {name} is not a readable checkpoint (corrupt, truncated or "
                              f"not written by tinyattn.save): {type(e).__name__}: {e}") from None


def _with_stack_room(fn):
    """fn(): save's and load's walks of a structure recurse a few frames per level, up to
    MAX_DEPTH levels; where a deep structure meets a call stack already deep (or functions
    wrapped by a tool, as mutation testing wraps each), the interpreter's recursion limit is
    raised for one more try and set back after. A structure never deeper than that: no cost."""
    try:
        return fn()
    except RecursionError:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(old + 16 * MAX_DEPTH)
        try:
            return fn()
        finally:
            sys.setrecursionlimit(old)


_LOCAL, _CENTRAL, _END = b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"
_END64, _LOCATOR64 = b"PK\x06\x06", b"PK\x06\x07"


@contextlib.contextmanager
def _archive(source, start):
    """(what zipfile reads, the bytes it holds up to the checkpoint's end): `source` seen as if
    it ended where the zip archive that starts at `start` ends (zipfile reads the last end
    record, a later checkpoint's where several were saved one after another). A file object is
    left just past the checkpoint after a load that succeeded."""
    with contextlib.ExitStack() as stack:
        f = stack.enter_context(open(source, "rb")) if isinstance(source, str) else source
        size = _size(f)
        end = _archive_end(f, start, size)
        yield (f if end == size else _Upto(f, end)), end
        f.seek(end)


def _archive_end(f, start, size):
    """Where the zip archive that starts at `start` in `f` ends: its records walked from the
    front (local entries, central directory, end record), reading their headers only. A
    BadZipFile where the records do not follow one another up to an end record."""

    def read(at, n):
        if at + n > size:
            raise zipfile.BadZipFile(f"a zip record at byte {at} is cut short by the end of the "
                                     f"file ({size} bytes)")
        f.seek(at)
        return f.read(n)

    at = start
    while True:
        sig = read(at, 4)
        if sig == _LOCAL:  # 30-byte header, name, extra field, data
            flags, csize, usize, nlen, xlen = struct.unpack("<2xH10xIIHH", read(at + 4, 26))
            if flags & 0x08:
                raise zipfile.BadZipFile(f"the entry at byte {at} does not say its size (a zip "
                                         "written as a stream, not by tinyattn.save)")
            if csize == 0xFFFFFFFF:
                csize = _zip64_size(read(at + 30 + nlen, xlen), usize == 0xFFFFFFFF, at)
            at += 30 + nlen + xlen + csize
        elif sig == _CENTRAL:  # 46-byte header, name, extra field, comment
            nlen, xlen, clen = struct.unpack("<HHH", read(at + 28, 6))
            at += 46 + nlen + xlen + clen
        elif sig == _END64:  # its size after the 12 bytes that give it
            at += 12 + struct.unpack("<Q", read(at + 4, 8))[0]
        elif sig == _LOCATOR64:
            at += 20
        elif sig == _END:  # 22 bytes and a comment: the archive's last record
            return at + 22 + struct.unpack("<H", read(at + 20, 2))[0]
        else:
            raise zipfile.BadZipFile(f"no zip record at byte {at} (found {sig!r})")


def _zip64_size(extra, skip_first, at):
    """A local entry's compressed size from its ZIP64 extra field (after the uncompressed size
    where that too is held there)."""
    while len(extra) >= 4:
        tag, n = struct.unpack("<HH", extra[:4])
        if tag == 1 and n >= 8 * (1 + skip_first):
            return struct.unpack("<Q", extra[4 + 8 * skip_first:12 + 8 * skip_first])[0]
        extra = extra[4 + n:]
    raise zipfile.BadZipFile(f"the entry at byte {at} has no ZIP64 size")


class _Upto:
    """File object `f` seen as if it ended at byte `end` (what zipfile needs: read, seek,
    tell)."""

    def __init__(self, f, end):
        self.f, self.end = f, end

    def seekable(self):
        return True

    def tell(self):
        return self.f.tell()

    def seek(self, offset, whence=io.SEEK_SET):
        if whence == io.SEEK_END:
            offset, whence = self.end + offset, io.SEEK_SET
        return self.f.seek(offset, whence)

    def read(self, n=-1):
        left = max(self.end - self.f.tell(), 0)
        return self.f.read(left if n is None or n < 0 else min(n, left))


def _is_path(f):
    return isinstance(f, (str, bytes, os.PathLike))


def _file_object(f, fn):
    """Refuse what is neither a path nor a binary file object `fn` (save, load) can use."""
    method = "write" if fn == "save" else "read"
    if isinstance(f, io.TextIOBase):
        raise TypeError(f"{fn}: {_name_of(f)} is opened in text mode; a checkpoint is binary: "
                        f"open it with '{method[0]}b'")
    if not callable(getattr(f, method, None)):
        raise TypeError(f"{fn}: expected a path (str, bytes or os.PathLike) or a binary file "
                        f"object with {method}(), got {type(f).__name__}")


def _name_of(f):
    """A file object's name in messages: its path if it has one, else <BytesIO> and the like."""
    name = getattr(f, "name", None)
    return name if isinstance(name, str) else f"<{type(f).__name__}>"


def _source(f):
    """(what zipfile reads, its name in messages, where the checkpoint starts in it): a path,
    or a file object (read into memory first if it cannot seek, as a pipe)."""
    if _is_path(f):
        path = os.fsdecode(f)  # (a bytes path too)
        return path, path, 0
    _file_object(f, "load")
    name = _name_of(f)
    seekable = callable(getattr(f, "seek", None)) and (
        not callable(getattr(f, "seekable", None)) or f.seekable())
    if not seekable:
        data = f.read()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"load: {name} read() gave {type(data).__name__}, not bytes: open "
                            "it in binary mode ('rb')")
        f = io.BytesIO(data)
    return f, name, f.tell()


def _size(source):
    """The bytes a file object holds."""
    at = source.tell()
    end = source.seek(0, io.SEEK_END)
    source.seek(at)
    return end


def _device(d, what):
    """A device's backend name as map_location gives it: "cuda:0" -> "cuda", a device object
    (torch.device) by its .type; anything else refused."""
    if isinstance(d, str):
        return d.split(":")[0]
    if isinstance(getattr(d, "type", None), str):
        return d.type
    raise TypeError(f"load: map_location must be a device ('cpu', 'cuda', 'cuda:0', or a device "
                    "object such as torch.device), a dict {saved device: device} of those, or a "
                    f"function fn(tensor, location); got {what}{d!r:.60} ({type(d).__name__}); "
                    "a device is a string or an object with a .type string")


def _is_function(x):
    """Whether map_location `x` is torch's function form (not a device name or object)."""
    return callable(x) and not isinstance(x, (str, dict, type)) and not hasattr(x, "xp")


class _Remap:
    """map_location as a function: every tensor loads on the host, then `fn` says where (see
    load); place(saved) is the host's None, and _Builder calls `fn`."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, saved):
        return None


class MapLocationError(CheckpointError, TypeError):
    """map_location's function returned something other than a tensor or None."""


class _FunctionRaisedError(CheckpointError):
    """Carries what map_location's function raised out of load, which raises it as it was."""

    def __init__(self, error):
        super().__init__(error)  # (not str(error): an error whose __str__ fails is raised too)
        self.error = error


def _remapped(fn, t, location, where):
    """What map_location's function makes of tensor `t` (loaded on the host) saved from
    `location`: its tensor, or `t` where it returns None."""
    try:
        out = fn(t, str(location))
    except Exception as e:  # noqa: BLE001 - the user's own error, raised by load as it is
        raise _FunctionRaisedError(e) from e
    if out is None or out is t:
        return t
    if not isinstance(out, Tensor):
        raise MapLocationError(f"load: map_location's function returned a {type(out).__name__} "
                               f"for {where}; it must return a tensor (the one it was given, or "
                               "it moved: t.cuda(), t.cpu()) or None")
    return Tensor._wrap(out._data, out.backend)


def _placement(backend, map_location):
    """place(saved device) -> the backend a tensor saved from that device loads on (None: the
    default, NumPy), from load's backend= or map_location=."""
    if map_location is None:
        return lambda saved: backend
    if backend is not None:
        raise TypeError("load: give backend or map_location, not both")
    if _is_function(map_location):
        return _Remap(map_location)
    if not isinstance(map_location, dict):
        name = _device(map_location, "")
        return lambda saved: name
    table = {_device(k, "the dict key "): _device(v, "the dict value ")
             for k, v in map_location.items()}
    # (torch's rule: a device the dict does not name stays; the host, where a tensor loads
    # without map_location)
    return lambda saved: table.get(saved, None if saved == "cpu" else saved)


_TORCH_LEGACY = b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19"  # torch.save's old magic number


def _by_torch(head):
    """Whether `head` (a file's first bytes) is torch.save's: its zip archive, whose first
    entry is "<archive>/data.pkl", or its older plain pickle with the magic number first."""
    if head.startswith(_LOCAL) and len(head) >= 30:
        nlen = struct.unpack("<H", head[26:28])[0]
        return head[30:30 + nlen].endswith(b"/data.pkl")
    return head.startswith(_TORCH_LEGACY)


def _not_a_zip(source, name, start, e):
    if isinstance(source, str):
        with open(source, "rb") as f:
            head = f.read(300)
    else:
        source.seek(start)
        head = source.read(300)
    if _by_torch(head):
        return (f"load: {name} was written by torch.save (PyTorch's pickle format), which "
                "tinyattn does not read: load it with torch and convert each tensor (for a "
                "state dict: {k: tinyattn.tensor(v.numpy()) for k, v in sd.items()}), or "
                "save it with tinyattn.save")
    if head.startswith(b"\x93NUMPY"):
        return (f"load: {name} holds a single .npy array, not a checkpoint; load it with "
                "numpy.load, or write checkpoints with tinyattn.save")
    if head.startswith(b"PK"):
        return f"load: {name} is not a readable checkpoint (a damaged or truncated zip: {e})"
    return (f"not a tinyattn checkpoint: {name} (not a readable checkpoint: a checkpoint is an "
            f".npz zip written by tinyattn.save; this file starts with {head[:8]!r})")


class _Reader:
    """Reads a checkpoint's entries one at a time, each checked before it is allocated."""

    def __init__(self, zf, path, check, size):
        self.zf, self.path, self.check, self.size = zf, path, check, size

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
        # the zip's own sizes, which a forged directory may declare at will: what is stored
        # must fit in the file, and a stored (not deflated) entry is as large as it holds
        if info.compress_size > self.size or (info.compress_type == zipfile.ZIP_STORED
                                              and info.file_size != info.compress_size):
            raise CheckpointError(
                f"load: {self.path}: {where} declares {info.file_size} bytes, "
                f"{info.compress_size} stored, in a file of {self.size} bytes; the checkpoint is "
                "damaged or forged")
        with self.zf.open(info) as f:
            shape, fortran, dtype = self._header(f, where)
            size = math.prod(shape) * dtype.itemsize
            held = info.file_size - f.tell()
            if held != size or info.file_size > info.compress_size * MAX_DEFLATE_RATIO + 4096:
                raise CheckpointError(
                    f"load: {self.path}: {where} declares shape {fmt_shape(shape)} of {dtype} "
                    f"({size} bytes), but the file holds {held} bytes for it "
                    f"({info.compress_size} stored); the checkpoint is damaged or forged")
            try:
                buf = bytearray(size)
            except MemoryError:
                raise CheckpointError(
                    f"load: {self.path}: {where} needs {size} bytes, more than can be "
                    "allocated now (too little free memory, or a forged file)") from None
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
    picked = {"dict": {k: v for k, v in held.items() if k in keys}}
    if "metadata" in structure:  # (a state dict's _metadata stays with its entries)
        picked["metadata"] = structure["metadata"]
    return picked


class _Writer:
    """What save writes: `flatten(obj)` gives obj's structure (JSON-able) and puts its arrays in
    `arrays` under fresh keys, each array object once."""

    def __init__(self):
        self.arrays = {}
        self.keys = {}  # id(array) -> (array, its key): (held, so that no id is reused meanwhile)
        self.tensors = {}  # id(tensor) -> (tensor, its node, its number): one saved twice is
        # one object
        self.above = {}  # id(container) -> its place: the containers around what is flattened

    def write(self, obj):
        """{entry: array} of the file: obj's arrays and its structure (_META, as JSON)."""
        structure = self.flatten(obj)
        self.arrays[_META] = np.array(json.dumps({"format": FORMAT, "structure": structure}))
        return self.arrays

    def flatten(self, obj, where="obj", depth=0):
        """A JSON-able description of obj. `where` is obj's place in what is being saved
        (obj['model'][2]), `depth` the containers around it, as load counts them."""
        if depth > MAX_DEPTH:
            shown = where if len(where) <= 160 else f"{where[:90]} ... {where[-60:]}"
            raise CheckpointError(f"save: {shown} is nested {depth} levels deep; load reads at "
                                  f"most {MAX_DEPTH} (serialization.MAX_DEPTH), so the file "
                                  "would not load: flatten that part (a string, or fewer levels)")
        if isinstance(obj, Tensor):
            return self._tensor(obj)
        if isinstance(obj, np.ndarray) or hasattr(obj, "__cuda_array_interface__"):
            return {"array": self._store_array(obj, where)}
        if isinstance(obj, np.generic):  # (its Python value, where JSON holds one)
            value = obj.item()
            if isinstance(value, (bool, int, float, str)):
                return value
        elif isinstance(obj, (dict, list, tuple, set, frozenset, argparse.Namespace)):
            return self._container(obj, where, depth)
        elif obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        hint = ("; save its .state_dict() instead" if hasattr(obj, "state_dict") else
                " (use tensors, arrays, numbers, strings, None, and lists, tuples, sets, "
                "argparse.Namespaces and dicts with string, int or float keys of those: convert "
                "it to one of them, e.g. a dict of its fields or str(value))")
        raise TypeError(f"save: cannot store a {type(obj).__name__} at {where}{hint}")

    def _container(self, obj, where, depth):
        if id(obj) in self.above:
            raise CheckpointError(f"save: {where} is {self.above[id(obj)]} itself: a container "
                                  "that holds itself cannot be saved (load could not rebuild it)")
        self.above[id(obj)] = where
        try:
            if isinstance(obj, dict):
                return self._dict(obj, where, depth)
            if isinstance(obj, argparse.Namespace):  # (its attributes, as a dict an older
                # reader reads)
                return {**self._dict(vars(obj), where, depth), "namespace": True}
            if isinstance(obj, (set, frozenset)):  # (a list, with its kind: an older reader
                # reads a list)
                return {"list": [self.flatten(v, f"{where}[{i}]", depth + 1)
                                 for i, v in enumerate(obj)],
                        "set": "frozenset" if isinstance(obj, frozenset) else "set"}
            return {"list" if isinstance(obj, list) else "tuple":
                    [self.flatten(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(obj)]}
        finally:
            del self.above[id(obj)]

    def _dict(self, obj, where, depth):
        """{"dict": {key as a string: node}}, with "int_keys" (the keys that were ints, as
        strings) where there are some: JSON keys are strings (an older reader, which ignores
        "int_keys", reads those keys as strings); and "metadata" for a dict that carries a
        `_metadata` dict (a state dict's, as torch.save keeps it: load_state_dict hands each
        module its version from it)."""
        node = self._entries(obj, where, depth)
        if isinstance(obj, OrderedDict):
            node["ordered"] = True  # (comes back an OrderedDict; an older reader: a dict)
        metadata = getattr(obj, "_metadata", None)
        if isinstance(metadata, dict):
            node["metadata"] = self.flatten(dict(metadata), f"{where}._metadata", depth + 1)
        return node

    def _entries(self, obj, where, depth):
        """_dict's node without the metadata."""
        body, ints, floats = {}, [], []
        for k, v in obj.items():
            if isinstance(k, (float, np.floating)):  # (repr: the float exactly, nan and inf)
                key = repr(float(k))
                floats.append(key)
                if key in obj:
                    raise TypeError(f"save: dict keys are saved as strings: {where} has the "
                                    f"float key {k!r} and the str key {key!r}")
            elif isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                key = str(int(k))
                ints.append(key)
                if key in obj:
                    raise TypeError(f"save: dict keys must be strings or ints, each once as "
                                    f"either: {where} has the int key {k!r} and the str key "
                                    f"{key!r}")
            elif isinstance(k, str):
                key = k
            else:
                raise TypeError(f"save: dict keys must be strings, ints or floats; {where} has "
                                f"the {type(k).__name__} key {k!r}: convert the keys (str(k)), "
                                "or save a list of (key, value) pairs")
            body[key] = self.flatten(v, f"{where}[{k!r}]", depth + 1)
        node = {"dict": body, "int_keys": ints} if ints else {"dict": body}
        if floats:
            node["float_keys"] = floats
        return node

    def _tensor(self, t):
        """{"tensor": key}, with "requires_grad", "parameter" (an nn.Parameter), "device" (not
        the host) where they apply; the same node (with an "object" tag) for a tensor met
        again, so that load makes one object of it."""
        seen = self.tensors.get(id(t))
        if seen is not None:
            seen[1]["object"] = seen[2]
            return seen[1]
        node = {"tensor": self._key(t._data, t.numpy)}
        if t.requires_grad:
            node["requires_grad"] = True
        if isinstance(t, Parameter):
            node["parameter"] = True
        if t.device != "cpu":
            node["device"] = t.device
        self.tensors[id(t)] = (t, node, len(self.tensors))
        return node

    def _key(self, a, host):
        """The key of array `a` (its host copy `host()` stored under a fresh one, the first
        time): tensors over one array (tied weights) share one entry."""
        if id(a) not in self.keys:
            key = f"a{len(self.arrays)}"
            self.arrays[key] = host()
            self.keys[id(a)] = (a, key)
        return self.keys[id(a)][1]

    def _store_array(self, a, where):
        """Put a NumPy (or CuPy, brought to the host) array in `arrays`: its key."""
        key = self._key(a, lambda: np.asarray(a.get() if hasattr(a, "get") else a))
        if self.arrays[key].dtype.kind not in "biufU":
            raise TypeError(f"save: cannot store {where}, an array of dtype "
                            f"{self.arrays[key].dtype}")
        return key


class _Builder:
    """What load makes of a structure: the objects it describes, arrays read as they are reached,
    each entry once (a tensor saved at several places is one object, tensors over one entry
    share one array)."""

    def __init__(self, reader, place):
        self.reader, self.place = reader, place
        self.objects = {}  # "object" tag -> the tensor
        self.shared = {}  # (entry, backend) -> the first tensor over it
        self.host = {}  # entry -> the array (saved as an array)

    def build(self, node, where="obj", depth=0):
        """The object a structure node describes."""
        if depth > MAX_DEPTH:
            raise CheckpointError(f"load: {self.reader.path} has a damaged structure entry: "
                                  f"nested deeper than {MAX_DEPTH} levels")
        if not isinstance(node, dict):
            return node
        if "tensor" in node:
            return self._tensor(node, where)
        if "array" in node:
            key = node["array"]
            if not isinstance(key, str) or key not in self.host:
                self.host[key] = self.reader.array(key, where)
            return self.host[key]
        return self._container(node, where, depth)

    def _tensor(self, node, where):
        tag = node.get("object")
        if (tag is not None and not isinstance(tag, int)) or not isinstance(
                node.get("device", "cpu"), str):
            raise CheckpointError(f"load: {self.reader.path} has a damaged structure entry: "
                                  f"{where} is {str(node)[:60]}")
        if tag in self.objects:
            return self.objects[tag]
        key, backend = node["tensor"], self.place(node.get("device", "cpu"))
        first = self.shared.get((key, backend)) if isinstance(key, str) else None
        if first is None:
            data = _fresh(self.reader.array(key, where), backend=backend)
            if isinstance(self.place, _Remap):  # (map_location as a function)
                data = _remapped(self.place.fn, data, node.get("device", "cpu"), where)
            t = Parameter._wrap(data._data, data.backend) if node.get("parameter") is True \
                else data
            self.shared[(key, backend)] = t
        else:
            cls = Parameter if node.get("parameter") is True else Tensor
            t = cls._wrap(first._data, first.backend)
            share_version(first, t, differentiable=False)
        if node.get("requires_grad") is True:
            t._require(True)
        if tag is not None:
            self.objects[tag] = t
        return t

    def _container(self, node, where, depth):
        kind = next((k for k in ("dict", "list", "tuple") if k in node), None)
        body = node.get(kind)
        if not isinstance(body, dict if kind == "dict" else list):
            raise CheckpointError(f"load: {self.reader.path} has a damaged structure entry: "
                                  f"{where} is {str(node)[:60]}")
        if kind == "dict":
            keys = self._keys(node, body, where)
            out = {keys[k]: self.build(v, f"{where}[{keys[k]!r}]", depth + 1)
                   for k, v in body.items()}
            if node.get("namespace") is True:
                return argparse.Namespace(**out)
            if "metadata" in node:
                return self._with_metadata(node, out, where, depth)
            return OrderedDict(out) if node.get("ordered") is True else out
        items = [self.build(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(body)]
        if kind == "list" and node.get("set") in ("set", "frozenset"):
            return (set if node["set"] == "set" else frozenset)(items)
        return items if kind == "list" else tuple(items)

    def _with_metadata(self, node, out, where, depth):
        """The dict as torch's state dict: an OrderedDict with its saved `_metadata`."""
        metadata = self.build(node["metadata"], f"{where}._metadata", depth + 1)
        if not isinstance(metadata, dict):
            raise CheckpointError(f"load: {self.reader.path} has a damaged structure entry: "
                                  f"{where}._metadata is {str(metadata)[:60]}")
        out = OrderedDict(out)
        out._metadata = OrderedDict(metadata)
        return out

    def _keys(self, node, body, where):
        """{saved key: the dict's key}: the keys "int_keys" names as ints, the others as
        saved (strings)."""
        ints = node.get("int_keys", [])
        if not (isinstance(ints, list) and all(isinstance(k, str) and k in body
                                               and k.removeprefix("-").isdecimal()
                                               for k in ints)):
            raise CheckpointError(f"load: {self.reader.path} has a damaged structure entry: "
                                  f"{where}'s int_keys are {str(ints)[:60]}")
        ints = set(ints)
        floats = node.get("float_keys", [])
        try:
            floats = {k: float(k) for k in floats if isinstance(k, str) and k in body
                      and k not in ints}
        except (TypeError, ValueError):
            floats = None
        if floats is None or len(floats) != len(node.get("float_keys", [])):
            raise CheckpointError(f"load: {self.reader.path} has a damaged structure entry: "
                                  f"{where}'s float_keys are {str(node['float_keys'])[:60]}")
        return {k: int(k) if k in ints else floats.get(k, k) for k in body}
