"""Tests for the seed-1 mutation survivors of tinyattn.sample and tinyattn.serialization: a toy
prompt's trailing '>' is the only thing stripped from it, a zip cut short names the byte and
the file's size, a ZIP64 entry's size is read as the unsigned 8 bytes that give it, torch's file
is told apart from the same 300 bytes whether it is read from a path or from a file object at
an offset, and a tensor entry whose device is not a string is a damaged structure entry."""

import io
import json
import re
import struct
import zipfile

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import serialization
from tinyattn.sample import sample
from tinyattn.train import TrainConfig, train


@pytest.fixture(scope="module")
def reverse_checkpoint(tmp_path_factory):
    """A reverse model of 3 digits, trained for 2 steps (its answers need not be right)."""
    out = tmp_path_factory.mktemp("run")
    train(TrainConfig(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
                      steps=2, warmup=0, heldout_size=8, out=str(out)), progress=False)
    return out / "checkpoint.npz"


# --- sample: a toy prompt ------------------------------------------------------------------

def test_a_toy_prompt_may_end_with_its_separator(reverse_checkpoint):
    answer = sample(reverse_checkpoint, "314>")
    assert re.fullmatch(r"314>\d\d\d", answer)
    assert sample(reverse_checkpoint, "314") == answer  # the '>' is the one sample adds


@pytest.mark.parametrize("prompt", ["314X", "314XX", "314X>", "314>X", "31X4"])
def test_a_toy_prompt_with_other_characters_is_refused(reverse_checkpoint, prompt):
    # only a trailing '>' is taken off: an 'X' (or anything else not a digit) is refused
    with pytest.raises(ValueError, match=re.escape(f"sample: the reverse model takes exactly 3 "
                                                   f"digits, got {prompt!r}") + "$"):
        sample(reverse_checkpoint, prompt)


# --- serialization: zip records ------------------------------------------------------------

def _saved_bytes(obj):
    buf = io.BytesIO()
    ta.save(obj, buf)
    return buf.getvalue()


def _zip64(data):
    """Checkpoint `data` written again by zipfile with ZIP64 local headers: each entry's sizes
    0xFFFFFFFF in its header, both (uncompressed, then compressed) in its extra field."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            with dst.open(info.filename, "w", force_zip64=True) as f:
                f.write(src.read(info))
    return bytearray(out.getvalue())


def test_a_zip_cut_short_names_the_byte_and_the_files_size(tmp_path):
    data = _saved_bytes({"w": ta.tensor([1.0, 2.0]), "step": 3})
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        second = zf.infolist()[1].header_offset  # where the second entry's record starts
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[:second + 2])  # half its signature
    with pytest.raises(ta.CheckpointError) as caught:
        ta.load(cut)
    assert str(caught.value) == (
        f"load: {cut} is not a readable checkpoint (a damaged or truncated zip: a zip record at "
        f"byte {second} is cut short by the end of the file ({second + 2} bytes))")
    # from a file object, where the checkpoint starts after other bytes: the byte and the
    # size are the file's
    buf = io.BytesIO(b"x" * 10 + data[:second + 2])
    buf.seek(10)
    with pytest.raises(ta.CheckpointError, match=re.escape(
            f"a zip record at byte {second + 10} is cut short by the end of the file "
            f"({second + 12} bytes))") + "$"):
        ta.load(buf)


def test_a_zip64_size_of_2_to_the_63_or_more_is_read_unsigned(tmp_path):
    data = _zip64(_saved_bytes({"w": ta.tensor([1.0, 2.0])}))
    flags, csize, usize, nlen, xlen = struct.unpack("<2xH10xIIHH", data[4:30])
    assert (csize, usize, xlen) == (0xFFFFFFFF, 0xFFFFFFFF, 20)
    field = 30 + nlen + 4  # the ZIP64 field's data: the uncompressed size, the compressed size
    stored = struct.unpack("<Q", data[field + 8:field + 16])[0]
    huge = 2**63 + stored  # a forged size, whose top bit is set
    data[field + 8:field + 16] = struct.pack("<Q", huge)
    path = tmp_path / "huge.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(ta.CheckpointError) as caught:
        ta.load(path)
    assert str(caught.value) == (
        f"load: {path} is not a readable checkpoint (a damaged or truncated zip: a zip record at "
        f"byte {30 + nlen + xlen + huge} is cut short by the end of the file ({len(data)} "
        "bytes))")


def test_a_zip64_compressed_size_is_its_fields_first_8_bytes_when_the_header_holds_the_other(
        tmp_path):
    data = _zip64(_saved_bytes({"w": ta.tensor([1.0, 2.0]), "step": 3}))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        entries = [(i.header_offset, i.file_size) for i in zf.infolist()]
    for at, size in entries:
        # the header gives the uncompressed size itself: the ZIP64 field's first 8 bytes are
        # the compressed size (the same, stored uncompressed), 8 more bytes follow in the field
        assert struct.unpack("<II", data[at + 18:at + 26]) == (0xFFFFFFFF, 0xFFFFFFFF)
        nlen, xlen = struct.unpack("<HH", data[at + 26:at + 30])
        assert (xlen, struct.unpack("<HH", data[at + 30 + nlen:at + 34 + nlen])) == (20, (1, 16))
        data[at + 22:at + 26] = struct.pack("<I", size)
    path = tmp_path / "zip64.npz"
    path.write_bytes(bytes(data) + _saved_bytes({"step": 4}))  # and a second checkpoint after
    with open(path, "rb") as f:
        back = ta.load(f)
        assert back["w"].numpy().tolist() == [1.0, 2.0] and back["step"] == 3
        assert f.tell() == len(data)  # the first checkpoint's records walked to its end
        assert ta.load(f) == {"step": 4}


# --- serialization: torch's files ----------------------------------------------------------

def _torch_like(nlen):
    """A zip's first local record, cut short after its name: "<archive>/data.pkl" of `nlen`
    bytes (as torch.save's first entry) and nothing after it."""
    name = b"a" * (nlen - len(b"/data.pkl")) + b"/data.pkl"
    return b"PK\x03\x04" + struct.pack("<HHHHHIIIHH", 20, 0, 0, 0, 0, 0, 0, 0, nlen, 0) + name


@pytest.mark.parametrize("nlen, by_torch", [(270, True), (271, False)])
def test_torch_is_told_from_the_same_300_bytes_from_a_path_and_a_file_object_at_an_offset(
        tmp_path, nlen, by_torch):
    # the first 300 bytes of the checkpoint are what is looked at: a name that ends in them is
    # torch's first entry, one that ends past them is not seen whole (a damaged zip)
    head = _torch_like(nlen)
    assert len(head) == 30 + nlen
    path = tmp_path / "ckpt.pt"
    path.write_bytes(head)
    padded = tmp_path / "padded.bin"
    padded.write_bytes(b"\x00" * 7 + head)
    torch_says = "was written by torch.save (PyTorch's pickle format)"
    with open(padded, "rb") as f:
        f.seek(7)
        for source in (path, f):
            with pytest.raises(ta.CheckpointError) as caught:
                ta.load(source)
            message = str(caught.value)
            assert (torch_says in message) is by_torch, message
            if not by_torch:
                assert "a damaged or truncated zip: a zip record at byte" in message


# --- serialization: a tensor entry's device ------------------------------------------------

def _forged(tmp_path, structure, **arrays):
    """A checkpoint written by hand around `structure` (as a damaged or hostile file would be)."""
    path = tmp_path / "forged.npz"
    meta = json.dumps({"format": serialization.FORMAT, "structure": structure})
    np.savez(path, __tinyattn__=np.array(meta), **arrays)
    return path


@pytest.mark.parametrize("device", [5, None, ["cpu"]])
@pytest.mark.parametrize("tag", [None, 0])
def test_a_tensor_whose_device_is_not_a_string_is_a_damaged_entry(tmp_path, device, tag):
    node = {"tensor": "a0", "device": device}
    if tag is not None:  # a good "object" tag does not make the entry whole
        node["object"] = tag
    path = _forged(tmp_path, {"dict": {"w": node}}, a0=np.ones(2))
    with pytest.raises(ta.CheckpointError) as caught:
        ta.load(path)
    assert str(caught.value) == (f"load: {path} has a damaged structure entry: obj['w'] is "
                                 f"{str(node)[:60]}")
    # the same entry with a string device loads
    node["device"] = "cpu"
    back = ta.load(_forged(tmp_path, {"dict": {"w": node}}, a0=np.ones(2)))
    assert back["w"].numpy().tolist() == [1.0, 1.0]
