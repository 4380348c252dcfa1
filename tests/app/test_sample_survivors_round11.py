"""A sampling behaviour a third mutation draw (seed 2) of tinyattn/sample.py found unobserved:
a checkpoint whose rotary tables come to exactly the buffer limit is taken, one row over it
refused (the check reads the declared sizes; nothing that large is made here)."""

import pytest

from tinyattn import sample
from tinyattn.errors import CheckpointError


def _config(max_len):
    return {"vocab_size": 10, "d_model": 8, "n_heads": 2, "n_layers": 1, "max_len": max_len,
            "rotary": True}


def test_rotary_tables_of_exactly_the_limit_are_taken(tmp_path):
    path = tmp_path / "checkpoint.npz"
    path.write_bytes(b"\0" * 4096)  # (only its size is read: more bytes than parameters)
    per_row = sample._model_size(_config(1))[1]  # cos and sin: one row of each per position
    rows = sample.BUFFER_LIMIT // (sample.BUFFER_ITEMSIZE * per_row)
    assert rows * per_row * sample.BUFFER_ITEMSIZE == sample.BUFFER_LIMIT
    sample._fits_file(_config(rows), str(path))
    with pytest.raises(CheckpointError, match="rotary tables of"):
        sample._fits_file(_config(rows + 1), str(path))
