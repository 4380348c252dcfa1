"""Training behaviours a second mutation draw (seed 1) of tinyattn/train.py found unobserved:
the data check's message without a --text file, the final evaluation reused from the loop's
last step, a language model's metrics.json keys, the out-of-memory line of a text run, the
attention figure's causal hatching and its unwritten cells, --out never taken from a resumed
run's checkpoint, no step recorded for replay without --capture; and, for a bug planted by hand
(the schedule stepped before the optimizer), each update at its own step's learning rate."""

import io
import json
import os
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

import tinyattn.train as train_mod
from tinyattn import distributed
from tinyattn.train import TrainConfig, train

TINY = dict(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
            heldout_size=16)


@pytest.fixture
def no_report(monkeypatch):
    """Runs without loss.png, attention.png and samples.txt (the figures take seconds)."""
    monkeypatch.setattr(train_mod, "_write_report", lambda *args: [])


def test_ranks_with_other_data_and_no_text_file_are_told_no_file(monkeypatch):
    """A toy task has no --text file: the message names none (no "(--text None)")."""
    from tinyattn.distributed import DisagreementError
    from tinyattn.train import _check_same_data_on_every_rank

    class Comm:
        def allgather(self, obj):
            return [({"data fingerprint": "f" * 16}, {}), obj]

    for key, value in (("comm", Comm()), ("size", 2), ("rank", 1), ("joined", True)):
        monkeypatch.setitem(distributed._world, key, value)
    run = SimpleNamespace(cfg=SimpleNamespace(text=None), fingerprint="0" * 64)
    with pytest.raises(DisagreementError) as e:
        _check_same_data_on_every_rank(run)
    assert str(e.value) == ("rank 1 was started with data fingerprint " + "0" * 16 +
                            ", rank 0 with data fingerprint " + "f" * 16 +
                            ": every process must get the same data")


def test_the_final_evaluation_is_the_loops_own_at_the_last_step(tmp_path, monkeypatch, no_report):
    """The loop evaluates at steps 2 and 4 of 4; metrics.json takes step 4's evaluation as it
    is, without a third pass over the held-out set."""
    calls = []
    real = train_mod.evaluate

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(train_mod, "evaluate", counted)
    metrics = train(TrainConfig(steps=4, eval_every=2, out=str(tmp_path / "run"), **TINY),
                    progress=False, stream=io.StringIO())
    assert len(calls) == 2
    rows = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    last = json.loads(rows[-1])
    assert last["step"] == 4
    assert metrics["loss"] == last["heldout_loss"] and metrics["accuracy"] == last["heldout_acc"]


def test_a_language_models_metrics_have_no_toy_scores():
    """metrics.json of a text run: val loss, bits per char and train loss first; neither the
    toy tasks' exact match nor their "loss" (it is val_loss there)."""
    from tinyattn.train import _lm_metrics

    metrics = {"accuracy": 0.5, "loss": 1.5, "exact_match": 0.0, "steps": 7, "wall_time_s": 2.0,
               "interrupted": False, "signal": None, "resumed_from": None, "processes": 1,
               "config": {"task": "text"}, "train_loss": 1.7}
    final = {"heldout_loss": 1.5, "train_eval_loss": 1.25, "heldout_acc": 0.5}
    lm = _lm_metrics(metrics, final)
    assert list(lm) == ["val_loss", "val_bpc", "train_loss", "steps", "wall_s", "accuracy",
                        "wall_time_s", "interrupted", "signal", "resumed_from", "processes",
                        "config"]
    assert lm["train_loss"] == 1.25 and lm["val_loss"] == 1.5
    assert lm["val_bpc"] == pytest.approx(1.5 / np.log(2))


@pytest.mark.parametrize("task, size_flag", [("text", "--seq-len 32"), ("shakespeare",
                                                                         "--seq-len 32"),
                                              ("add", "--length 5")])
def test_out_of_memory_names_the_size_flag_of_the_task(task, size_flag):
    """A language model's examples are --seq-len long; a toy task's problems --length."""
    from tinyattn.train import _out_of_memory

    cfg = TrainConfig(task=task, seq_len=32, length=5 if task == "add" else None)
    line = _out_of_memory(cfg, MemoryError("Unable to allocate 1 TiB"))
    assert size_flag in line
    other = "--length" if size_flag.startswith("--seq-len") else "--seq-len"
    assert other not in line
    assert line.startswith("out of memory (Unable to allocate 1 TiB); make the run smaller: ")


def test_the_attention_figure_hatches_the_future_and_writes_no_numbers(tmp_path, monkeypatch):
    """attention.png: the keys after each query masked (drawn grey), and no numbers in the cells
    even for a map small enough that attention_maps would write them by default."""
    figures = []
    monkeypatch.setattr(train_mod, "_save_figure", lambda fig, path: figures.append(fig))
    weights = np.full((1, 2, 4, 4), 0.25)  # (L, H, T, T), every entry drawn unless masked
    train_mod._plot_attention(weights, list("abcd"), str(tmp_path / "a.png"), "reverse")
    (fig,) = figures
    maps = [ax for ax in fig.axes if ax.images and ax.get_title().startswith("head")]
    assert len(maps) == 2
    future = np.triu(np.ones((4, 4), dtype=bool), 1)
    for ax in maps:
        shown = ax.images[0].get_array()
        np.testing.assert_array_equal(np.ma.getmaskarray(shown), future)
        assert len(ax.texts) == 0
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_a_resumed_run_keeps_its_out_setting_not_the_checkpoints(tmp_path, monkeypatch,
                                                                 no_report):
    """A run trained with --out elsewhere, then moved to the default folder: a plain --resume
    there continues it, and its config keeps --out as given (the default, None), not the
    folder the checkpoint was first written in."""
    monkeypatch.chdir(tmp_path)
    first = TrainConfig(steps=4, eval_every=100, out=str(tmp_path / "elsewhere"), **TINY)
    assert train(first, progress=False, stop_after=2, stream=io.StringIO())["interrupted"]
    os.makedirs("runs")
    shutil.move(str(tmp_path / "elsewhere"), os.path.join("runs", "reverse"))
    metrics = train(TrainConfig(**TINY), resume=True, progress=False, stream=io.StringIO())
    assert metrics["steps"] == 4 and metrics["resumed_from"] == 2
    assert metrics["config"]["out"] is None
    assert not (tmp_path / "elsewhere").exists()


def test_no_step_is_recorded_for_replay_without_capture(tmp_path, monkeypatch, no_report):
    """Only --capture records the step (ta.capture); a plain run steps eagerly."""
    made = []
    real = train_mod.capture

    def spy(fn):
        made.append(fn)
        return real(fn)

    monkeypatch.setattr(train_mod, "capture", spy)
    for capture in (False, True):
        train(TrainConfig(steps=2, eval_every=100, capture=capture,
                          out=str(tmp_path / f"run{capture}"), **TINY),
              progress=False, stream=io.StringIO())
        assert len(made) == int(capture)


def test_each_update_uses_the_learning_rate_of_its_step(monkeypatch):
    """The schedule moves on after the optimizer's step, not before it: step s updates the
    weights at the schedule's lr for s (warm-up from lr / warmup), the lr its row logs."""
    from tinyattn.train import _train_step, build

    cfg = TrainConfig(steps=8, warmup=3, lr=1e-2, dropout=0.0, **TINY)
    task, model, opt, sched = build(cfg)
    be = model.wte.weight.backend
    used, real = [], opt.step

    def step(*args, **kwargs):
        used.append([group["lr"] for group in opt.param_groups])
        return real(*args, **kwargs)

    monkeypatch.setattr(opt, "step", step)
    for s in range(5):
        row = _train_step(cfg, task, model, opt, sched, be, s)
        want = 1e-2 * (s + 1) / 3 if s < 3 else sched.lr_at(s)
        assert used[-1] == [pytest.approx(want, rel=1e-12)] * len(opt.param_groups)
        assert row["lr"] == pytest.approx(want, rel=1e-12)
