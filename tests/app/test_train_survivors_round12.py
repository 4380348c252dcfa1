"""Training behaviours the seed-3 mutation draw of tinyattn/train.py found unobserved: the
resume of a finished run whose report files are gone says only what it writes (loss.png is
drawable from the run's history), and a rank started with --force where rank 0 was not is
stopped before anything else."""

import pytest

import tinyattn.distributed as dist
import tinyattn.train as train_mod
from tinyattn.train import TrainConfig, train

TINY = dict(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
            heldout_size=16, steps=2, eval_every=2)


@pytest.fixture
def no_report(monkeypatch):
    """Runs without loss.png, attention.png and samples.txt (the figures take seconds)."""
    monkeypatch.setattr(train_mod, "_write_report", lambda *args: [])


def test_resume_of_a_finished_run_names_the_files_it_writes_and_no_more(tmp_path, capsys,
                                                                        no_report):
    out = tmp_path / "run"
    train(TrainConfig(**TINY, out=str(out)), progress=False)
    (out / "metrics.json").unlink()
    capsys.readouterr()
    train(TrainConfig(**TINY, out=str(out)), resume=True, progress=False)
    missing = [name for name in train_mod.REPORT_FILES if name != "metrics.json"]
    # every missing file can be written (loss.png from metrics.jsonl): no word on loss.png
    assert capsys.readouterr().err.splitlines() == [
        f"resume: the run in {out} finished at step 2; writing its missing metrics.json, "
        f"{', '.join(missing)} from the checkpoint"]


def test_a_rank_started_with_force_alone_is_stopped_first(monkeypatch, tmp_path):
    def allgather(obj):  # rank 0 was started without --force
        return [(dict(obj[0], **{"--force": False}), obj[1]), obj]

    comm = type("Comm", (), {"allgather": staticmethod(allgather)})
    monkeypatch.setattr(dist, "_world", {"comm": comm, "rank": 1, "size": 2, "nccl": None,
                                         "joined": True})
    with pytest.raises(dist.DisagreementError, match="^rank 1 was started with --force True, "
                                                     "rank 0 with --force False"):
        train_mod._train(TrainConfig(**TINY, out=str(tmp_path / "run")), False, True, False,
                         None, None)
    assert not (tmp_path / "run").exists()  # (stopped before any folder was made)
