"""Tests for the seed-3 mutation survivors of tinyattn.sample and tinyattn.serialization: an
add prompt's trailing '=' is the only thing stripped from it, a zip whose entries do not say
their sizes (written as a stream) is refused saying so, and a map_location that is no device is
refused showing what was given."""

import io
import re
import zipfile

import pytest

import tinyattn as ta
from tinyattn.errors import CheckpointError
from tinyattn.sample import sample
from tinyattn.train import TrainConfig, train


@pytest.fixture(scope="module")
def add_checkpoint(tmp_path_factory):
    """An add model of 2-digit numbers, trained for 2 steps (its answers need not be right)."""
    out = tmp_path_factory.mktemp("run")
    train(TrainConfig(task="add", length=2, d_model=8, heads=2, layers=1, batch_size=4,
                      steps=2, warmup=0, heldout_size=8, out=str(out)), progress=False)
    return out / "checkpoint.npz"


def test_an_add_prompt_may_end_with_its_separator(add_checkpoint):
    answer = sample(add_checkpoint, "12+34=")
    assert answer.startswith("12+34=")
    assert sample(add_checkpoint, "12+34") == answer  # the '=' is the one sample adds


@pytest.mark.parametrize("prompt", ["12+34X", "12+34=X", "12+3X", "12X+34", "12+34XX="])
def test_an_add_prompt_with_other_characters_is_refused(add_checkpoint, prompt):
    # only a trailing '=' is taken off: an 'X' (or anything else not a digit) is refused
    with pytest.raises(ValueError, match=re.escape(f"sample: the add model takes 'a+b' with up to "
                                                   f"2 digits each, got {prompt!r}") + "$"):
        sample(add_checkpoint, prompt)


class _Stream(io.RawIOBase):
    """A write-only stream that cannot seek: zipfile writes each entry's sizes after its data
    (a data descriptor, flag 0x08) instead of in its header."""

    def __init__(self):
        self.data = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.data += bytes(b)
        return len(b)


def test_a_zip_written_as_a_stream_is_refused_saying_so(tmp_path):
    saved = io.BytesIO()
    ta.save({"w": ta.ones(3)}, saved)
    stream = _Stream()
    with zipfile.ZipFile(io.BytesIO(saved.getvalue())) as src, \
            zipfile.ZipFile(stream, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    path = tmp_path / "streamed.npz"
    path.write_bytes(bytes(stream.data))
    with pytest.raises(CheckpointError, match=r"does not say its size \(a zip written as a "
                                              r"stream, not by tinyattn\.save\)"):
        ta.load(str(path))


@pytest.mark.parametrize("location", [42, 2.5, None])
def test_a_map_location_that_is_no_device_is_refused_showing_it(tmp_path, location):
    path = tmp_path / "c.npz"
    ta.save({"w": ta.ones(2)}, str(path))
    if location is None:  # (None is no map_location at all: loaded as saved)
        assert ta.load(str(path), map_location=None)["w"].tolist() == [1.0, 1.0]
        return
    with pytest.raises(TypeError, match=re.escape(f"; got {location!r} "
                                                  f"({type(location).__name__});")):
        ta.load(str(path), map_location=location)


@pytest.mark.parametrize("key, value", [("n_heads", 3), ("dropout", 1.5), ("norm", "batch")])
def test_a_forged_model_config_is_refused_naming_the_checkpoint(add_checkpoint, tmp_path, key,
                                                               value):
    ck = ta.load(str(add_checkpoint))
    ck["model_config"][key] = value
    path = tmp_path / "forged.npz"
    ta.save(ck, str(path))
    with pytest.raises(CheckpointError, match=re.escape(f"sample: {path} has model_config "
                                                        f"{key} = {value!r}; it must be")):
        sample(path, "12+34")
