"""Training behaviours a third mutation draw (seed 2) of tinyattn/train.py found unobserved:
metrics.json's process count, and --force clearing the run files a finished run left."""

import json
import os

import pytest

import tinyattn.train as train_mod
from tinyattn.train import RUN_FILES, TrainConfig, train

TINY = dict(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
            heldout_size=16, steps=2, eval_every=2)


@pytest.fixture
def no_report(monkeypatch):
    """Runs without loss.png, attention.png and samples.txt (the figures take seconds)."""
    monkeypatch.setattr(train_mod, "_write_report", lambda *args: [])


def test_metrics_json_counts_the_processes(tmp_path, no_report):
    out = str(tmp_path / "run")
    metrics = train(TrainConfig(**TINY, out=out), progress=False)
    assert metrics["processes"] == 1
    with open(os.path.join(out, "metrics.json")) as f:
        assert json.load(f)["processes"] == 1


def test_force_clears_the_files_of_the_run_there(tmp_path, no_report):
    out = str(tmp_path / "run")
    train(TrainConfig(**TINY, out=out), progress=False)
    for name in RUN_FILES:  # (the figures too, which this run did not write)
        if not os.path.exists(os.path.join(out, name)):
            with open(os.path.join(out, name), "w") as f:
                f.write("left over")
    with open(os.path.join(out, "notes.txt"), "w") as f:
        f.write("mine")
    metrics = train(TrainConfig(**{**TINY, "steps": 4}, out=out), force=True, progress=False)
    assert metrics["steps"] == 4
    for name in ("loss.png", "attention.png", "samples.txt"):  # (not written again here)
        assert not os.path.exists(os.path.join(out, name)), name
    with open(os.path.join(out, "metrics.jsonl")) as f:
        assert [json.loads(line)["step"] for line in f if line.strip()][-1] == 4
    with open(os.path.join(out, "notes.txt")) as f:  # (a file of the user's stays)
        assert f.read() == "mine"
