"""What a new user meets following the README and docs/ in order: each claim checked here was
found false, or a whole block was run by nothing else (a walk-through of the docs, 2026-11-27)."""

import io
import re
from pathlib import Path

from tinyattn.train import TrainConfig, train

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
            eval_every=100000, heldout_size=16)


def test_the_readme_gradcheck_command_checks_the_ops_it_names(capsys):
    """README's commands table: `tinyattn gradcheck [OP ...]` (run by no other test)."""
    from tinyattn import cli

    assert cli.main(["gradcheck", "softmax", "matmul"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^softmax\s+\d+\s.*\sok$", out, flags=re.M), out
    assert out.rstrip().endswith("2 of 2 ops pass (float64 central differences)")


def test_a_resumed_finished_run_lists_only_files_that_exist(tmp_path):
    """README: a finished run whose report files are missing gets them written again (all but
    loss.png when its metrics.jsonl is gone). The closing list of files named
    metrics.jsonl, which the resume cannot write again and which was not there."""
    cfg = TrainConfig(steps=3, out=str(tmp_path), **TINY)
    train(cfg, progress=False, stream=io.StringIO())
    (tmp_path / "metrics.jsonl").unlink()
    (tmp_path / "samples.txt").unlink()
    said = io.StringIO()
    train(cfg, resume=True, progress=False, stream=said)
    listed = re.findall(r"^  (\S+)$", said.getvalue(), flags=re.M)
    assert listed and all(Path(p).exists() for p in listed), said.getvalue()
    assert str(tmp_path / "samples.txt") in listed
