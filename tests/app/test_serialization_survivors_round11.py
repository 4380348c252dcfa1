"""Checkpoint behaviours a third mutation draw (seed 2) of tinyattn/serialization.py found
unobserved: an archive comment after the end record, a ZIP64 end record (an archive of more
entries than its plain end record counts), each with a second checkpoint after it in the same
file, and an entry of a dtype tinyattn never writes (complex, datetime) refused."""

import io
import re
import zipfile

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import CheckpointError


def _saved_bytes(obj):
    buf = io.BytesIO()
    ta.save(obj, buf)
    return buf.getvalue()


def _rewritten(data, *, archive_comment=b"", zip64_end=False, entry=None, monkeypatch=None):
    """Checkpoint `data` written again by zipfile: with an archive comment, with ZIP64 end
    records (as an archive of over 65,535 entries has), or with entry (name, array) in place of
    the one of that name."""
    if zip64_end:  # (zipfile writes them past this many entries)
        monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 0)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if entry is not None and info.filename == entry[0]:
                npy = io.BytesIO()
                np.save(npy, entry[1])
                body = npy.getvalue()
            dst.writestr(zipfile.ZipInfo(info.filename, info.date_time), body)
        dst.comment = archive_comment
    return out.getvalue()


@pytest.mark.parametrize("kind", ["archive comment", "ZIP64 end records"])
def test_a_checkpoint_and_the_one_after_it_load_whatever_the_end_records(kind, monkeypatch):
    first = _saved_bytes({"w": ta.tensor([1.0, 2.0])})
    if kind == "archive comment":
        first = _rewritten(first, archive_comment=b"saved by hand, 33 bytes of words")
        assert zipfile.ZipFile(io.BytesIO(first)).comment.startswith(b"saved by hand")
    else:
        first = _rewritten(first, zip64_end=True, monkeypatch=monkeypatch)
        assert b"PK\x06\x06" in first and b"PK\x06\x07" in first  # (the ZIP64 end records)
    second = _saved_bytes({"v": ta.tensor([3.0])})
    f = io.BytesIO(first + second)
    assert ta.load(f)["w"].numpy().tolist() == [1.0, 2.0]
    assert f.tell() == len(first)  # (left just past the first checkpoint)
    assert ta.load(f)["v"].numpy().tolist() == [3.0]
    assert ta.load(io.BytesIO(first))["w"].numpy().tolist() == [1.0, 2.0]


@pytest.mark.parametrize("array", [np.array([1 + 2j, 3j]), np.array(["2026-11-29"],
                                                                      dtype="datetime64[D]")])
def test_an_entry_of_a_dtype_tinyattn_never_writes_is_refused(array):
    data = _rewritten(_saved_bytes({"w": ta.tensor([1.0, 2.0])}), entry=("a0.npy", array))
    with pytest.raises(CheckpointError, match=re.escape(f"has dtype {array.dtype}") +
                       ".*not an entry tinyattn writes"):
        ta.load(io.BytesIO(data))


def _nested(levels, inner):
    for _ in range(levels):
        inner = [inner]
    return inner


def _with_deep_metadata():
    """Lists 60 deep around an OrderedDict whose _metadata is dicts 60 deep: 120 levels."""
    from collections import OrderedDict

    state = OrderedDict(w=ta.tensor([1.0]))
    meta = {"version": 1}
    for _ in range(60):
        meta = {"m": meta}
    state._metadata = meta
    return _nested(60, state)


def test_save_counts_a_state_dicts_metadata_in_the_nesting():
    with pytest.raises(CheckpointError,
                       match=r"^save: obj\[0\].*\[.m.\] is nested 101 levels deep"):
        ta.save(_with_deep_metadata(), io.BytesIO())


def test_load_counts_a_state_dicts_metadata_in_the_nesting(monkeypatch):
    from tinyattn import serialization

    buf = io.BytesIO()
    with monkeypatch.context() as m:  # (a file of another writer: save refuses to write it)
        m.setattr(serialization, "MAX_DEPTH", 1000)
        ta.save(_with_deep_metadata(), buf)
    buf.seek(0)
    with pytest.raises(CheckpointError, match="nested deeper than 100 levels"):
        ta.load(buf)


@pytest.mark.parametrize("skip_first", [False, True])
def test_a_zip64_size_is_read_whatever_extra_field_follows_it(skip_first):
    """The ZIP64 field need not be the last of an entry's extra data (other writers put a
    timestamp field after it): its 8 bytes are read, not what follows."""
    import struct

    from tinyattn import serialization

    sizes = (2 ** 33 + 5, 2 ** 32 + 7)  # (uncompressed, compressed)
    zip64 = struct.pack("<HHQQ", 1, 16, *sizes) if skip_first else \
        struct.pack("<HHQ", 1, 8, sizes[1])
    timestamp = struct.pack("<HHBI", 0x5455, 5, 1, 1_700_000_000)
    for extra in (zip64, zip64 + timestamp, timestamp + zip64):
        assert serialization._zip64_size(extra, skip_first, 0) == sizes[1]
