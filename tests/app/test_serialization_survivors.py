"""Checkpoint behaviours that mutation testing found unobserved: zip records with long fields,
ZIP64 entries that lack their size, torch's files named as such, the location a map_location
function is told, and the class of each tensor of several over one saved array."""

import io
import json
import struct
import zipfile

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import serialization


def _saved_bytes(obj):
    buf = io.BytesIO()
    ta.save(obj, buf)
    return buf.getvalue()


def _rewritten(data, *, comment=None, force_zip64=False):
    """The checkpoint `data` written again by zipfile: each entry with the central directory
    comment `comment`, or with a ZIP64 local header (its sizes in the extra field)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if force_zip64:
                with dst.open(info.filename, "w", force_zip64=True) as f:
                    f.write(body)
            else:
                new = zipfile.ZipInfo(info.filename, info.date_time)
                new.comment = comment
                dst.writestr(new, body)
    return out.getvalue()


def test_an_entry_with_a_central_comment_over_32_kib_loads(tmp_path):
    # a zip's record lengths are unsigned 16-bit fields: 40000 is a length, not -25536
    data = _rewritten(_saved_bytes({"w": ta.tensor([1.0, 2.0]), "step": 7}),
                      comment=b"c" * 40_000)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert {len(i.comment) for i in zf.infolist()} == {40_000}
    path = tmp_path / "commented.npz"
    path.write_bytes(data)
    back = ta.load(path)
    assert back["w"].numpy().tolist() == [1.0, 2.0] and back["step"] == 7
    # and, saved twice into one file object, the first checkpoint ends where its records end
    buf = io.BytesIO(data + _saved_bytes({"step": 8}))
    assert ta.load(buf)["step"] == 7 and buf.tell() == len(data)
    assert ta.load(buf)["step"] == 8


def test_a_zip64_entry_whose_extra_field_lacks_its_compressed_size_is_refused(tmp_path):
    data = _rewritten(_saved_bytes({"w": ta.tensor([1.0, 2.0])}), force_zip64=True)
    good = tmp_path / "zip64.npz"
    good.write_bytes(data)
    assert ta.load(good)["w"].numpy().tolist() == [1.0, 2.0]  # a whole ZIP64 entry loads
    # the first entry's header says both sizes are in its ZIP64 field (0xFFFFFFFF), but the
    # field declares 8 bytes: the uncompressed size only, no compressed size after it
    flags, csize, usize, nlen, xlen = struct.unpack("<2xH10xIIHH", data[4:30])
    assert (csize, usize, xlen) == (0xFFFFFFFF, 0xFFFFFFFF, 20)
    tag, n = struct.unpack("<HH", data[30 + nlen:34 + nlen])
    assert (tag, n) == (1, 16)
    damaged = bytearray(data)
    damaged[32 + nlen:34 + nlen] = struct.pack("<H", 8)
    bad = tmp_path / "short_zip64.npz"
    bad.write_bytes(bytes(damaged))
    with pytest.raises(ta.CheckpointError,
                       match=r"damaged or truncated zip: the entry at byte 0 has no ZIP64 "
                             r"size\)$"):
        ta.load(bad)


@pytest.mark.parametrize("kind", ["legacy", "zip"])
def test_a_torch_save_file_is_told_how_to_convert(tmp_path, kind):
    path = tmp_path / "ckpt.pt"
    if kind == "legacy":  # torch.save's old format: a pickle, its magic number first
        path.write_bytes(b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.")
    else:  # its zip, first entry "<archive>/data.pkl", written as a stream (sizes after data)
        class Stream(io.RawIOBase):  # (not seekable: zipfile puts the sizes after the data)
            def __init__(self):
                self.chunks = []

            def writable(self):
                return True

            def write(self, b):
                self.chunks.append(bytes(b))
                return len(b)

        stream = Stream()
        with zipfile.ZipFile(stream, "w") as zf:
            zf.writestr("ckpt/data.pkl", b"\x80\x02}q\x00.")
        path.write_bytes(b"".join(stream.chunks))
    with pytest.raises(ta.CheckpointError) as caught:
        ta.load(path)
    message = str(caught.value)
    assert message.startswith(f"load: {path} was written by torch.save (PyTorch's pickle "
                              "format), which tinyattn does not read: load it with torch and "
                              "convert each tensor (for a state dict: ")
    assert "{k: tinyattn.tensor(v.numpy()) for k, v in sd.items()}" in message
    assert message.endswith("or save it with tinyattn.save")


def _forged(tmp_path, structure, **arrays):
    """A checkpoint written by hand around `structure` (as tests/app/test_serialization.py)."""
    path = tmp_path / "forged.npz"
    meta = json.dumps({"format": serialization.FORMAT, "structure": structure})
    np.savez(path, __tinyattn__=np.array(meta), **arrays)
    return path


def test_map_location_function_is_told_the_device_each_tensor_was_saved_from(tmp_path):
    path = _forged(tmp_path, {"list": [{"tensor": "a0", "device": "cuda"},
                                       {"tensor": "a1"}, {"tensor": "a2", "device": "cpu"}]},
                   a0=np.ones(2), a1=np.zeros(1), a2=np.full(3, 2.0))
    seen = []

    def keep(t, location):
        seen.append((t.numpy().tolist(), location))

    back = ta.load(path, map_location=keep)
    assert seen == [([1.0, 1.0], "cuda"), ([0.0], "cpu"), ([2.0, 2.0, 2.0], "cpu")]
    assert [t.device for t in back] == ["cpu"] * 3  # (None: each stays where it loaded)


def test_each_tensor_over_one_saved_array_keeps_its_own_class(tmp_path):
    # as torch's: [p, Parameter(p), p.detach()] come back Parameter, Parameter, Tensor, with
    # one memory under the three
    p = ta.nn.Parameter(ta.tensor([1.0, 2.0]))
    plain = ta.tensor([3.0, 4.0])
    saved = [p, ta.nn.Parameter(p), p.detach(), plain, plain.detach(), ta.nn.Parameter(plain)]
    path = tmp_path / "ck.npz"
    ta.save(saved, path)
    with zipfile.ZipFile(path) as zf:
        assert len(zf.namelist()) == 3  # two arrays and the structure
    back = ta.load(path)
    assert [type(t).__name__ for t in back] == ["Parameter", "Parameter", "Tensor",
                                                "Tensor", "Tensor", "Parameter"]
    assert [t.requires_grad for t in back] == [True, True, False, False, False, True]
    assert back[0] is not back[1] and np.shares_memory(back[0]._data, back[1]._data)
    assert np.shares_memory(back[0]._data, back[2]._data)
    assert np.shares_memory(back[3]._data, back[5]._data)
    back[2].data[0] = 9.0
    assert back[1].numpy().tolist() == [9.0, 2.0]


def test_a_map_location_function_error_is_raised_as_it_is_even_one_that_cannot_print(tmp_path):
    # load raises the function's own error; one whose str() fails was a CheckpointError
    # ("not a readable checkpoint ... TypeError"), as if the file were damaged
    class UnprintableError(Exception):
        def __str__(self):
            raise TypeError("no text")

    path = tmp_path / "ck.npz"
    ta.save({"w": ta.ones(2)}, path)
    raised = UnprintableError()

    def fail(t, location):
        raise raised

    with pytest.raises(UnprintableError) as caught:
        ta.load(path, map_location=fail)
    assert caught.value is raised
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        ta.load(path, map_location=lambda t, loc: 1 / 0)
