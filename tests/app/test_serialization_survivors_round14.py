"""Tests for the seed-4 mutation survivors of serialization (2026-11-29): what save refuses
inside a set is named by its place (the set's item as [i]), sets count toward the nesting that
load reads (a file nested too deep through frozensets is refused when saved, not when loaded),
and a damaged `_metadata` entry in a file names its place in the file's structure."""

import json

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import serialization


def test_what_save_cannot_store_inside_a_set_is_named_by_its_place(tmp_path):
    odd = object()
    with pytest.raises(TypeError, match=r"^save: cannot store a object at "
                                        r"obj\['opts'\]\[0\]\[1\] \(use tensors"):
        ta.save({"opts": {("a", odd)}}, tmp_path / "c.pt")
    assert not (tmp_path / "c.pt").exists()


def test_frozensets_count_toward_the_nesting_load_reads(tmp_path):
    deep = frozenset()
    for _ in range(serialization.MAX_DEPTH + 5):
        deep = frozenset({deep})
    with pytest.raises(ta.CheckpointError, match=r"^save: obj(\[0\])+ \.\.\. (\[0\])+ is nested "
                                                 r"101 levels deep; load reads at most 100"):
        ta.save(deep, tmp_path / "deep.pt")
    shallow = frozenset()
    for _ in range(serialization.MAX_DEPTH - 1):
        shallow = frozenset({shallow})
    ta.save(shallow, tmp_path / "ok.pt")
    assert ta.load(tmp_path / "ok.pt") == shallow


@pytest.mark.parametrize("where", ["top", "inner"])
def test_a_damaged_metadata_entry_names_its_place(tmp_path, where):
    bad = {"dict": {"w": 1}, "metadata": 5}
    structure = bad if where == "top" else {"dict": {"m": bad}}
    path = tmp_path / "forged.npz"
    meta = json.dumps({"format": serialization.FORMAT, "structure": structure})
    np.savez(path, __tinyattn__=np.array(meta))
    place = "obj" if where == "top" else "obj['m']"
    with pytest.raises(ta.CheckpointError) as caught:
        ta.load(path)
    assert str(caught.value) == (f"load: {path} has a damaged structure entry: "
                                 f"{place}._metadata is 5")
