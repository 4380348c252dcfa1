"""Training runs never lose work and never train on the wrong thing (issue 17), in-process.

Signals sent to this process during a run (the second Ctrl-C waits for the save), the metrics
log's repair, --resume/--force rules and the flag table. The real
`tinyattn train` processes that get signals are in test_runs.py.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.train as train_mod
from tinyattn import cli
from tinyattn.runs import RunFolderError, read_metrics, repair_metrics
from tinyattn.train import FlagError, TrainConfig, train

TINY = dict(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
            eval_every=100000, heldout_size=16)


def rows(out):
    path = Path(out) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---- signals in-process: the second Ctrl-C waits for the save -----------------------------------


def test_second_ctrl_c_during_the_final_save_waits_for_it(tmp_path, monkeypatch, capsys):
    real_step, real_save = train_mod._train_step, train_mod.save
    before = signal.getsignal(signal.SIGINT)  # (Python's default; ignored in a background job)
    calls = []

    def step(*args):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during step 3
        return real_step(*args)

    def save(obj, path):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C again, in the middle of the save
        real_save(obj, path)

    monkeypatch.setattr(train_mod, "_train_step", step)
    monkeypatch.setattr(train_mod, "save", save)
    metrics = train(TrainConfig(steps=50, warmup=5, out=str(tmp_path), **TINY),  # (the default
                    progress=False)  # 50 does not fit in 50 steps: a line on stderr, not here)
    assert metrics["interrupted"] and metrics["signal"] == "SIGINT" and metrics["steps"] == 3
    assert ta.load(tmp_path / "checkpoint.npz")["step"] == 3
    assert train_mod.exit_code(metrics) == 130
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored
    err = capsys.readouterr().err  # each signal is answered on stderr
    assert err.splitlines() == ["", "SIGINT: stopping after this step; saving the checkpoint",
                                "", "SIGINT: still saving; the run stops as soon as the "
                                "checkpoint is written"]


def test_a_signal_after_the_last_step_does_not_mark_a_finished_run(tmp_path, monkeypatch):
    real_save = train_mod.save

    def save(obj, path):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives during the final save of a whole run
        real_save(obj, path)

    monkeypatch.setattr(train_mod, "save", save)
    metrics = train(TrainConfig(steps=3, out=str(tmp_path), **TINY), progress=False)
    assert metrics["steps"] == 3 and not metrics["interrupted"] and metrics["signal"] is None
    assert train_mod.exit_code(metrics) == 0


def test_checkpoints_are_written_during_the_run(tmp_path, monkeypatch):
    saved = []
    real_save = train_mod.save
    monkeypatch.setattr(train_mod, "save", lambda obj, path: (saved.append(obj["step"]),
                                                               real_save(obj, path)))
    train(TrainConfig(steps=10, save_every=4, out=str(tmp_path / "a"), **TINY), progress=False)
    assert saved == [4, 8, 10]
    saved.clear()
    train(TrainConfig(steps=5, save_seconds=1e-9, out=str(tmp_path / "b"), **TINY),
          progress=False)
    assert saved == [1, 2, 3, 4, 5]  # by time: at least every save_seconds
    ck = ta.load(tmp_path / "b" / "checkpoint.npz")
    assert ck["finished"] and ck["data"]["position"] == 5 and len(ck["data"]["fingerprint"]) == 64
    assert set(ck) >= {"model", "optim", "sched", "step", "elapsed", "config", "vocab"}


# ---- metrics.jsonl ------------------------------------------------------------------------------


def test_repair_drops_a_torn_line_and_rows_past_the_checkpoint_by_renaming(tmp_path):
    path = tmp_path / "metrics.jsonl"
    good = "".join(json.dumps({"step": i, "loss": 1.0}) + "\n" for i in range(1, 8))
    path.write_text(good + '{"step": 8, "lo')
    old = tmp_path / "old-link"
    os.link(path, old)  # a second name for the file as it was
    kept = repair_metrics(path, upto=5)
    assert [r["step"] for r in kept] == [1, 2, 3, 4, 5]
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3, 4, 5]
    assert old.read_text() == good + '{"step": 8, "lo'  # never truncated in place: replaced
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_a_clean_log_is_left_alone_and_a_bad_middle_line_is_named(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n')
    before = path.stat().st_ino
    assert [r["step"] for r in repair_metrics(path, upto=2)] == [1, 2]
    assert path.stat().st_ino == before
    path.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(RunFolderError, match=r"metrics.jsonl, line 2"):
        read_metrics(path, upto=3)


@pytest.mark.slow  # (.ci/run runs it with the slow tests)
def test_resume_after_a_torn_log_line(tmp_path):
    cfg = TrainConfig(steps=12, out=str(tmp_path), **TINY)
    train(cfg, progress=False, stop_after=5)
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 6, "loss": 2.')  # a crash mid-line
    train(cfg, resume=True, progress=False)
    assert [r["step"] for r in rows(tmp_path)] == list(range(1, 13))


# ---- --resume and --force -----------------------------------------------------------------------


@pytest.mark.slow  # (.ci/run runs it with the slow tests)
def test_a_new_run_in_a_used_folder_needs_resume_or_force(tmp_path):
    cfg = TrainConfig(steps=4, out=str(tmp_path), **TINY)
    train(cfg, progress=False)
    before = (tmp_path / "checkpoint.npz").read_bytes()
    with pytest.raises(RunFolderError, match="--resume.*--force"):
        train(TrainConfig(steps=6, out=str(tmp_path), **{**TINY, "seed": 1}), progress=False)
    assert (tmp_path / "checkpoint.npz").read_bytes() == before
    train(TrainConfig(steps=3, out=str(tmp_path), **TINY), force=True, progress=False)
    assert [r["step"] for r in rows(tmp_path)] == [1, 2, 3]  # the old log went with the old run
    with pytest.raises(FlagError, match="give one of them"):
        train(cfg, resume=True, force=True, progress=False)


def test_resume_of_a_finished_run_says_how_to_continue(tmp_path):
    train(TrainConfig(steps=4, out=str(tmp_path), **TINY), progress=False)
    with pytest.raises(RunFolderError, match="already finished at step 4.*--steps M larger "
                                             "than 4"):
        train(TrainConfig(steps=4, out=str(tmp_path), **TINY), resume=True, progress=False)
    assert train(TrainConfig(steps=6, out=str(tmp_path), **TINY), resume=True,
                 progress=False)["steps"] == 6


def test_resume_with_nothing_to_resume(tmp_path):
    with pytest.raises(RunFolderError, match=r"nothing to resume in .*new: no checkpoint.npz "
                                             r"\(start a new run without --resume\)$"):
        train(TrainConfig(steps=4, out=str(tmp_path / "new"), **TINY), resume=True,
              progress=False)
    assert not (tmp_path / "new").exists()  # a failed start leaves no folder


def test_resume_takes_the_same_settings_and_only_the_schedule_of_the_run_may_change(tmp_path):
    cfg = TrainConfig(steps=6, out=str(tmp_path), **TINY)
    train(cfg, progress=False, stop_after=2)
    with pytest.raises(FlagError, match=r"^resume: the run in .* was trained with a different "
                                        r"--lr, --seed; resume with the same settings$"):
        train(TrainConfig(steps=6, out=str(tmp_path), **{**TINY, "lr": 1e-3, "seed": 7}),
              resume=True, progress=False)
    metrics = train(TrainConfig(steps=5, out=str(tmp_path), save_every=3,
                                **{**TINY, "eval_every": 2}), resume=True, progress=False)
    assert metrics["resumed_from"] == 2 and metrics["steps"] == 5
    assert [r["step"] for r in rows(tmp_path) if "heldout_loss" in r] == [4, 5]


def test_resume_names_what_the_folder_lacks(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")  # stopped before its first checkpoint
    with pytest.raises(RunFolderError, match=r"no checkpoint.npz \(the run stopped before its "
                                             r"first checkpoint; start over with --force\)$"):
        train(TrainConfig(steps=4, out=str(tmp_path), **TINY), resume=True, progress=False)
    for saved in ({"w": ta.zeros(2)}, {"config": {"task": "reverse"}, "model": {}}):
        ta.save(saved, tmp_path / "checkpoint.npz")
        with pytest.raises(RunFolderError, match=r"checkpoint.npz is not a training checkpoint$"):
            train(TrainConfig(steps=4, out=str(tmp_path), **TINY), resume=True, progress=False)


@pytest.mark.slow  # (.ci/run runs it with the slow tests)
def test_a_checkpoint_from_before_a_setting_existed_resumes(tmp_path):
    """A setting the checkpoint's config lacks (added since) counts as today's value."""
    cfg = TrainConfig(steps=4, out=str(tmp_path), **TINY)
    train(cfg, progress=False, stop_after=2)
    ck = ta.load(tmp_path / "checkpoint.npz")
    del ck["config"]["tie"], ck["config"]["norm"]
    ta.save(ck, tmp_path / "checkpoint.npz")
    assert train(cfg, resume=True, progress=False)["steps"] == 4


def test_resume_after_the_text_changed_is_refused(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("abcabcabd " * 60)
    cfg = TrainConfig(task="text", text=str(text), seq_len=8, steps=6, d_model=8, heads=2,
                      layers=1, batch_size=4, heldout_size=8, out=str(tmp_path / "run"))
    train(cfg, progress=False, stop_after=2)
    text.write_text("abcabcabe " * 60)  # same length, same vocabulary size, other text
    with pytest.raises(RunFolderError, match="data changed"):
        train(cfg, resume=True, progress=False)


@pytest.mark.parametrize("task, text, source", [
    ("reverse", None, "--task reverse"), ("text", "corpus.txt", "--text corpus.txt"),
    ("text", None, "--text (the Shakespeare slice)")])
def test_a_data_change_names_the_data_the_run_was_given(task, text, source):
    """The refusal says which data changed: the toy task, the text file, or the shipped slice."""
    from types import SimpleNamespace

    from tinyattn.train import _check_same_data

    run = SimpleNamespace(cfg=TrainConfig(task=task, text=text), out="runs/x",
                          task=SimpleNamespace(vocab="abc"), fingerprint="9" * 64)
    _check_same_data({"vocab": list("abc"), "data": {"fingerprint": "9" * 64}}, run, "ck.npz")
    with pytest.raises(RunFolderError) as caught:
        _check_same_data({"vocab": list("abc"), "data": {"fingerprint": "1" * 64}}, run,
                         "ck.npz")
    assert str(caught.value).startswith(f"resume: the data changed since the run started: "
                                        f"{source} is not what the checkpoint ck.npz was "
                                        "trained on (data fingerprint 111111111111, now "
                                        "999999999999)")


# ---- flags, checked before anything is made -----------------------------------------------------


BAD_FLAGS = [
    (["--grad-clip", "-1"], "--grad-clip must be a finite number >= 0"),
    (["--lr", "nan"], "--lr must be a finite number > 0: got nan"),
    (["--length", "0"], "--length must be a whole number >= 1: got 0"),
    (["--heads", "0"], "--heads must be a whole number >= 1: got 0"),
    (["--heads", "-2"], "--heads must be a whole number >= 1: got -2"),
    (["--heads", "5"], r"--heads must divide --d-model \(64\): got 5"),
    (["--d-model", "0"], "--d-model must be a whole number >= 1: got 0"),
    (["--eval-every", "0"], "--eval-every must be a whole number >= 1: got 0"),
    (["--layers", "0"], "--layers must be a whole number >= 1: got 0"),
    (["--batch-size", "0"], "--batch-size must be a whole number >= 1: got 0"),
    (["--task", "text", "--seq-len", "0"], "--seq-len must be a whole number >= 1: got 0"),
    (["--steps", "0"], "--steps must be a whole number >= 1: got 0"),
    (["--dropout", "1"], r"--dropout must be in \[0, 1\): got 1.0"),
    (["--weight-decay", "inf"], "--weight-decay must be a finite number >= 0: got inf"),
    (["--warmup", "-1"], "--warmup must be a whole number >= 0: got -1"),
    (["--seed", "-1"], "--seed must be a whole number >= 0: got -1"),
    (["--save-every", "-1"], "--save-every must be a whole number >= 0"),
    (["--save-seconds", "0"], "--save-seconds must be a number of seconds > 0: got 0.0"),
    (["--backend", "tpu"], "--backend must be one of"),
    (["--task", "sort", "--text", "x.txt"], "--text is for --task text .*not --task sort: got x"),
    (["--task", "text", "--length", "3"], "--length is for the toy tasks"),
]


@pytest.mark.parametrize("flags, message", BAD_FLAGS, ids=[" ".join(f) for f, _ in BAD_FLAGS])
def test_each_bad_flag_is_one_line_before_any_folder(tmp_path, flags, message):
    out = tmp_path / "run"
    with pytest.raises(FlagError, match=message) as caught:
        cli.main(["train", "--out", str(out), "--no-progress", *flags])
    assert "\n" not in str(caught.value)
    assert not out.exists()


WHOLE_NUMBERS = {"steps": 1, "batch_size": 1, "d_model": 1, "heads": 1, "layers": 1,
                 "warmup": 0, "seed": 0, "seq_len": 1, "eval_every": 1, "heldout_size": 1}


@pytest.mark.parametrize("name, low", WHOLE_NUMBERS.items())
def test_a_whole_number_setting_takes_its_lowest_value_and_nothing_else(name, low):
    """The smallest allowed value passes (as a Python or NumPy integer); one less, a fraction,
    a bool or a string is refused with the flag, the rule and the value named."""
    base = {"heads": 1} if name == "d_model" else {}  # --heads must divide --d-model
    train_mod.validate(TrainConfig(**base, **{name: low}))
    train_mod.validate(TrainConfig(**base, **{name: np.int64(low + 1)}))
    for bad in (low - 1, low + 0.5, True, str(low + 1)):
        with pytest.raises(FlagError) as caught:
            train_mod.validate(TrainConfig(**base, **{name: bad}))
        assert str(caught.value) == f"{train_mod.flag(name)} must be a whole number >= {low}: " \
                                    f"got {bad}"


def test_several_bad_flags_are_one_line_each():
    with pytest.raises(FlagError) as caught:
        train(TrainConfig(heads=0, lr=float("nan"), steps=-3))
    lines = str(caught.value).splitlines()
    assert lines[0] == "bad settings:" and len(lines) == 4


def test_failed_starts_leave_no_folder(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        cli.main(["train", "--text", str(tmp_path / "missing.txt"), "--out", str(out)])
    short = tmp_path / "short.txt"
    short.write_text("x" * 100)
    with pytest.raises(ValueError, match=r"short.txt has 100 characters; --seq-len 16 needs "
                                         r"at least 180"):
        cli.main(["train", "--text", str(short), "--seq-len", "16", "--out", str(out)])
    with pytest.raises(ta.errors.BackendError):
        cli.main(["train", "--backend", "cupy", "--out", str(out), "--steps", "1"])
    assert not out.exists()


def test_text_alone_means_the_text_task(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(train_mod, "train", lambda cfg, **kw: seen.update(cfg=cfg) or {})
    cli.main(["train", "--text", "corpus.txt"])
    assert seen["cfg"].task == "text" and seen["cfg"].text == "corpus.txt"


def test_cli_exit_status_of_a_stopped_run(tmp_path, monkeypatch):
    monkeypatch.setattr(train_mod, "train", lambda cfg, **kw: {"signal": "SIGTERM"})
    assert cli.main(["train", "--out", str(tmp_path)]) == 143
    monkeypatch.setattr(train_mod, "train", lambda cfg, **kw: {"signal": None})
    assert cli.main(["train", "--out", str(tmp_path)]) == 0


def test_the_rules_table_is_whole():
    """Every numeric setting of TrainConfig has a rule (a new flag cannot skip the table)."""
    numeric = {name for name, value in vars(TrainConfig()).items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)}
    assert numeric <= {name for name, *_ in train_mod.RULES}
    assert np.all([callable(test) for _, test, _ in train_mod.RULES])


# ---- resume finds the text by its contents ------------------------------------------------------


def test_resume_takes_the_same_text_by_another_path_and_refuses_a_changed_one(tmp_path,
                                                                              monkeypatch):
    """--text ./short.txt, an absolute path or a path from another folder: the same data (the
    checkpoint's fingerprint holds the text's sha256), so the run resumes; other contents are
    refused."""
    monkeypatch.setattr(train_mod, "_write_report", lambda *args: [])
    (tmp_path / "short.txt").write_text("abcabcabd " * 60)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    base = dict(task="text", seq_len=8, d_model=8, heads=2, layers=1, batch_size=4,
                heldout_size=8, eval_every=100000)
    train(TrainConfig(text="short.txt", steps=5, out="run", **base), progress=False,
          stop_after=1)
    for steps, text in ((2, "./short.txt"), (3, str(tmp_path / "short.txt"))):
        metrics = train(TrainConfig(text=text, steps=steps, out="run", **base), resume=True,
                        progress=False)
        assert metrics["steps"] == steps and metrics["config"]["text"] == text
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert train(TrainConfig(text="../short.txt", steps=4, out="../run", **base), resume=True,
                 progress=False)["steps"] == 4
    (tmp_path / "short.txt").write_text("abcabcabe " * 60)  # other contents, same path
    with pytest.raises(RunFolderError, match="data changed"):
        train(TrainConfig(text="../short.txt", steps=5, out="../run", **base), resume=True,
              progress=False)
    with pytest.raises(FlagError, match="different --seq-len"):  # other settings still count
        train(TrainConfig(text="../short.txt", steps=5, out="../run", **{**base, "seq_len": 9}),
              resume=True, progress=False)


# ---- a failed start leaves nothing behind -------------------------------------------------------


@pytest.mark.parametrize("error", [MemoryError("Unable to allocate 116. TiB"),
                                   RuntimeError("something broke in the first step")])
def test_a_run_that_fails_before_its_first_checkpoint_leaves_nothing(tmp_path, monkeypatch,
                                                                     error):
    """A new run whose first step fails (out of memory, or anything else) removes what it wrote
    and the folder it made: the next plain run there needs no --force."""
    real_step = train_mod._train_step

    def failing(*args):
        raise error

    out = tmp_path / "run"
    monkeypatch.setattr(train_mod, "_train_step", failing)
    expected = train_mod.OutOfMemoryError if isinstance(error, MemoryError) else RuntimeError
    with pytest.raises(expected):
        train(TrainConfig(steps=3, out=str(out), **TINY), progress=False)
    assert not out.exists()
    out.mkdir()  # a folder that was there before the run: it stays, empty
    with pytest.raises(expected):
        train(TrainConfig(steps=3, out=str(out), **TINY), progress=False)
    assert list(out.iterdir()) == []
    monkeypatch.setattr(train_mod, "_train_step", real_step)
    monkeypatch.setattr(train_mod, "_write_report", lambda *args: [])
    assert train(TrainConfig(steps=2, out=str(out), **TINY), progress=False)["steps"] == 2


def test_a_failure_after_a_checkpoint_or_in_a_resumed_run_keeps_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(train_mod, "_write_report", lambda *args: [])
    real_step, calls = train_mod._train_step, []

    def fails_at_step_4(*args):
        calls.append(1)
        if len(calls) == 4:
            raise MemoryError("Unable to allocate")
        return real_step(*args)

    monkeypatch.setattr(train_mod, "_train_step", fails_at_step_4)
    with pytest.raises(MemoryError):
        train(TrainConfig(steps=9, save_every=2, out=str(tmp_path), **TINY), progress=False)
    assert ta.load(tmp_path / "checkpoint.npz")["step"] == 2
    calls.clear()
    monkeypatch.setattr(train_mod, "_train_step", lambda *args: (_ for _ in ()).throw(
        MemoryError("Unable to allocate")))
    with pytest.raises(MemoryError):
        train(TrainConfig(steps=9, save_every=2, out=str(tmp_path), **TINY), resume=True,
              progress=False)
    assert ta.load(tmp_path / "checkpoint.npz")["step"] == 2
    assert [r["step"] for r in rows(tmp_path)][:2] == [1, 2]


# ---- signals while the report is written; a finished run's missing report -----------------------


def test_a_second_signal_while_the_report_is_written_waits_for_it(tmp_path, monkeypatch,
                                                                  capsys):
    """SIGTERM stops the run; a second SIGTERM while the report and the lock's release are
    under way waits for them: the report is whole, the lock gone, and the status the first
    signal's (143). A handler of the caller's own catches a signal that was not deferred."""
    real_step, real_release = train_mod._train_step, train_mod.RunLock.release
    calls, seen = [], []

    def step(*args):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_step(*args)

    def write_report(out, *args):
        os.kill(os.getpid(), signal.SIGTERM)  # the second signal, during the report
        (Path(out) / "samples.txt").write_text("written\n")
        return ["samples.txt"]

    def release(lock):
        if lock.fd is not None:  # (held: the first call lets it go)
            seen.append(signal.getsignal(signal.SIGTERM))
            os.kill(os.getpid(), signal.SIGTERM)  # and a third, while the lock is let go
        real_release(lock)

    def not_deferred(signum, frame):
        raise AssertionError("a signal reached the caller before the run was done")

    monkeypatch.setattr(train_mod, "_train_step", step)
    monkeypatch.setattr(train_mod, "_write_report", write_report)
    monkeypatch.setattr(train_mod.RunLock, "release", release)
    before = signal.signal(signal.SIGTERM, not_deferred)
    try:
        metrics = train(TrainConfig(steps=50, out=str(tmp_path), **TINY), progress=False)
        assert signal.getsignal(signal.SIGTERM) is not_deferred  # restored after
    finally:
        signal.signal(signal.SIGTERM, before)
    assert metrics["signal"] == "SIGTERM" and train_mod.exit_code(metrics) == 143
    assert (tmp_path / "samples.txt").read_text() == "written\n"
    assert json.loads((tmp_path / "metrics.json").read_text())["steps"] == 2
    assert not (tmp_path / ".tinyattn.lock").exists()
    assert seen and seen[0] is not not_deferred
    err = capsys.readouterr().err
    assert err.count("SIGTERM: writing the report; the run stops as soon as it is written") == 2


def test_resume_of_a_finished_run_rewrites_its_missing_report(tmp_path):
    """A finished run whose report files are gone (and whose lock a kill -9 left): --resume
    writes them again from the checkpoint, which stays as it was; with the report whole, the
    resume says the run is finished."""
    cfg = TrainConfig(steps=3, out=str(tmp_path), **TINY)
    train(cfg, progress=False)
    before = (tmp_path / "checkpoint.npz").read_bytes()
    report = {name: (tmp_path / name).read_bytes() for name in train_mod.REPORT_FILES}
    for name in report:
        (tmp_path / name).unlink()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / ".tinyattn.lock").write_text(json.dumps(
        {"pid": dead.pid, "host": socket.gethostname(), "started": "then"}))
    metrics = train(cfg, resume=True, progress=False)
    assert metrics["steps"] == 3 and not metrics["interrupted"]
    for name, old in report.items():
        assert (tmp_path / name).read_bytes()[:8] == old[:8]  # the same kind of file again
    assert json.loads((tmp_path / "metrics.json").read_text())["accuracy"] == json.loads(
        report["metrics.json"])["accuracy"]
    assert (tmp_path / "samples.txt").read_bytes() == report["samples.txt"]
    assert (tmp_path / "checkpoint.npz").read_bytes() == before
    assert not (tmp_path / ".tinyattn.lock").exists()
    with pytest.raises(RunFolderError, match="already finished at step 3"):
        train(cfg, resume=True, progress=False)


# ---- attention.png of a long example ------------------------------------------------------------


def test_attention_png_draws_at_most_64_positions_and_says_so(tmp_path, monkeypatch):
    """--length 1000 makes examples of 2000 positions: the figure shows the first 64 (the
    model is run on those alone: causal, their attention is the same), titled as such."""
    from tinyattn import plots
    from tinyattn.data import make_task

    drawn = []
    real = plots.attention_maps
    monkeypatch.setattr(plots, "attention_maps", lambda weights, **kw: (
        drawn.append((weights.shape, kw["tokens"], kw["title"])) or real(weights[..., :2, :2],
                                                                         tokens=kw["tokens"][:2])))
    monkeypatch.setattr(train_mod, "samples_text", lambda *args: "")
    task = make_task("reverse", length=100)
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(task.vocab_size, 8, 2, 1, max_len=task.seq_len)
    heldout = task.batch(np.random.default_rng(0), 2, "heldout")
    assert heldout[0].shape[1] == 200
    train_mod._write_report(str(tmp_path), task, model, [], heldout, model.wte.weight.backend)
    ((shape, tokens, title),) = drawn
    assert shape == (1, 2, 64, 64) and len(tokens) == 64
    assert title == ("reverse: attention on a held-out example, its first 64 of 200 positions "
                     "(grey: masked, the future)")
    drawn.clear()
    weights = np.full((1, 1, 5, 5), 0.2)  # a short example: every position, the title as ever
    train_mod._plot_attention(weights, list("abcde"), tmp_path / "a.png", "sort")
    assert drawn[0][0] == (1, 1, 5, 5)
    assert drawn[0][2] == "sort: attention on a held-out example (grey: masked, the future)"


# ---- what a resume continues: the run's own settings, its own length and schedule --------------


TINY_FLAGS = ["--d-model", "8", "--heads", "2", "--layers", "1", "--batch-size", "4",
              "--heldout-size", "16", "--eval-every", "100000", "--no-progress"]


def _cli_train(out, *flags):
    """`tinyattn train` in-process on the tiny model (digits per problem: --length, else the
    task's default); its exit status."""
    return cli.main(["train", "--out", str(out), *TINY_FLAGS, *flags])


def _interrupt_at(monkeypatch, step):
    """The next run is stopped (as by Ctrl-C) after `step` steps."""
    real_step, calls = train_mod._train_step, []

    def step_then_interrupt(*args):
        calls.append(1)
        if len(calls) > step:
            raise KeyboardInterrupt
        return real_step(*args)

    monkeypatch.setattr(train_mod, "_train_step", step_then_interrupt)
    return lambda: monkeypatch.setattr(train_mod, "_train_step", real_step)


@pytest.fixture
def no_report(monkeypatch):
    """Runs whose loss.png, attention.png and samples.txt are empty files (the figures take
    seconds): a finished run's report is whole."""
    def placeholders(out, *args):
        for name in ("loss.png", "attention.png", "samples.txt"):
            (Path(out) / name).write_bytes(b"")
        return []

    monkeypatch.setattr(train_mod, "_write_report", placeholders)


def test_a_plain_resume_continues_to_the_runs_own_steps_on_its_own_schedule(tmp_path,
                                                                           monkeypatch, capsys,
                                                                           no_report):
    """--resume without --steps trains to the run's --steps, not the preset's (600), and on
    the run's cosine schedule: the rows are a straight run's, to the bit; resumed again, the
    run is finished."""
    assert _cli_train(tmp_path / "whole", "--length", "3", "--steps", "10") == 0
    undo = _interrupt_at(monkeypatch, 3)
    _cli_train(tmp_path / "split", "--length", "3", "--steps", "10")
    undo()
    assert [r["step"] for r in rows(tmp_path / "split")] == [1, 2, 3]
    capsys.readouterr()
    assert _cli_train(tmp_path / "split", "--length", "3", "--resume") == 0
    assert "10 steps in" in capsys.readouterr().out
    saved = json.loads((tmp_path / "split" / "metrics.json").read_text())
    assert saved["steps"] == saved["config"]["steps"] == 10 and saved["resumed_from"] == 3
    assert rows(tmp_path / "split") == [{**r, "time": s["time"], "tokens_per_s": s[
        "tokens_per_s"]} for r, s in zip(rows(tmp_path / "whole"), rows(tmp_path / "split"),
                                         strict=True)]
    with pytest.raises(RunFolderError, match=r"already finished at step 10 \(--steps 10\)"):
        _cli_train(tmp_path / "split", "--resume")  # (--length too: the run's own)


def test_a_resume_by_the_api_takes_the_settings_it_was_not_given_from_the_run(tmp_path,
                                                                             no_report):
    train(TrainConfig(steps=7, out=str(tmp_path), **TINY), progress=False, stop_after=2)
    resumed = train(TrainConfig(out=str(tmp_path)), resume=True, progress=False)
    assert resumed["steps"] == resumed["config"]["steps"] == 7
    assert {k: resumed["config"][k] for k in TINY} == TINY
    cfg = TrainConfig(out=str(tmp_path))
    cfg.steps = 9  # set after it was made: given all the same
    assert cfg.given() == {"out", "steps"}
    assert train(cfg, resume=True, progress=False)["steps"] == 9


def test_more_steps_on_resume_say_that_the_schedule_changes(tmp_path, capsys, no_report):
    """A finished run resumed with a larger --steps trains on; stderr says the cosine schedule
    is recomputed for the new length from there (not bit-for-bit a straight run of it), and
    the "already finished" hint says so too."""
    assert _cli_train(tmp_path, "--length", "3", "--steps", "6") == 0
    with pytest.raises(RunFolderError, match=r"already finished at step 6 \(--steps 6\); to "
                                             r"train it further, resume with --steps M larger "
                                             r"than 6 \(.*schedule.*\)"):
        _cli_train(tmp_path, "--resume")
    capsys.readouterr()
    assert _cli_train(tmp_path, "--steps", "9", "--resume") == 0
    err = capsys.readouterr().err
    assert re.search(r"^resume: --steps 9, not the run's 6: the cosine schedule .*from step 6 "
                     r"on.*not bit-for-bit", err, re.M), err
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["steps"] == saved["config"]["steps"] == 9
    with pytest.raises(RunFolderError, match=r"is at step 9, past --steps 5"):
        _cli_train(tmp_path, "--steps", "5", "--resume")


# ---- the warm-up fits in the run --------------------------------------------------------------


def test_a_default_warmup_longer_than_the_run_is_shortened_said_and_kept_on_resume(
        tmp_path, monkeypatch, capsys, no_report):
    """--steps 20 with the preset's warm-up (50 steps): the warm-up becomes 2 steps (a tenth),
    stderr says so, the lr reaches --lr and decays to --min-lr-ratio of it, and the run's
    config records 2, which a resume to more steps keeps."""
    undo = _interrupt_at(monkeypatch, 5)
    _cli_train(tmp_path, "--length", "3", "--steps", "20", "--lr", "0.004")
    undo()
    err = capsys.readouterr().err
    assert re.search(r"--warmup 50 \(the default\) does not fit in --steps 20: warming up over "
                     r"2 steps \(a tenth of --steps\)", err), err
    assert _cli_train(tmp_path, "--resume") == 0
    lrs = [r["lr"] for r in rows(tmp_path)]
    assert lrs[:2] == [pytest.approx(0.002), pytest.approx(0.004)]  # the peak: --lr
    assert lrs[2:] == sorted(lrs[2:], reverse=True)
    assert 0.0004 < lrs[-1] < 0.00045  # (the lr of step 20) down to 0.1 x --lr
    assert json.loads((tmp_path / "metrics.json").read_text())["config"]["warmup"] == 2
    assert _cli_train(tmp_path, "--resume", "--steps", "30") == 0
    assert json.loads((tmp_path / "metrics.json").read_text())["config"]["warmup"] == 2
    assert "does not fit" not in capsys.readouterr().err


def test_an_explicit_warmup_as_long_as_the_run_is_refused(tmp_path):
    with pytest.raises(FlagError, match=r"^--warmup must be fewer steps than --steps \(6\).*: "
                                        r"got 6$"):
        _cli_train(tmp_path / "run", "--steps", "6", "--warmup", "6")
    with pytest.raises(FlagError, match=r"--warmup must be fewer steps than --steps \(6\)"):
        train(TrainConfig(steps=6, warmup=9, out=str(tmp_path / "run"), **TINY))
    assert not (tmp_path / "run").exists()


# ---- the same settings, spelled differently -----------------------------------------------------


@pytest.mark.parametrize("first, then", [
    (["--backend", "cpu"], ["--backend", "numpy"]), (["--backend", "numpy"], ["--backend", "np"]),
    ([], ["--length", "8"]), (["--length", "8"], ["--length", "8"])],
    ids=["cpu-numpy", "numpy-np", "default-length-8", "length-8-length-8"])
def test_resume_takes_the_same_settings_spelled_differently(tmp_path, capsys, no_report, first,
                                                            then):
    assert _cli_train(tmp_path, "--steps", "2", *first) == 0
    assert _cli_train(tmp_path, "--steps", "3", "--resume", *then) == 0
    assert json.loads((tmp_path / "metrics.json").read_text())["steps"] == 3


def test_an_explicit_default_length_by_the_api_resumes_and_another_is_refused(tmp_path,
                                                                             no_report):
    base = {**TINY, "length": None}
    train(TrainConfig(steps=2, out=str(tmp_path), **{**base, "length": 8}), progress=False)
    assert train(TrainConfig(steps=3, out=str(tmp_path), **base), resume=True,
                 progress=False)["steps"] == 3
    with pytest.raises(FlagError, match="different --length;"):
        train(TrainConfig(steps=4, out=str(tmp_path), **{**base, "length": 5}), resume=True,
              progress=False)


# ---- a checkpoint alone: the report it can have, once -------------------------------------------


def test_a_checkpoint_alone_gets_the_report_that_can_be_written_from_it_once(tmp_path,
                                                                            monkeypatch, capsys):
    import shutil

    monkeypatch.setattr(train_mod, "_write_report", lambda *args: [])
    train(TrainConfig(steps=4, out=str(tmp_path / "run"), **TINY), progress=False)
    monkeypatch.undo()
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(tmp_path / "run" / "checkpoint.npz", alone)
    capsys.readouterr()
    train(TrainConfig(out=str(alone)), resume=True, progress=False)
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"resume: the run in {alone} finished at step 4; writing its missing metrics.json, "
        "attention.png, samples.txt from the checkpoint (loss.png cannot be drawn without the "
        "run's metrics.jsonl history)"]
    assert sorted(p.name for p in alone.iterdir()) == ["attention.png", "checkpoint.npz",
                                                      "metrics.json", "samples.txt"]
    saved = json.loads((alone / "metrics.json").read_text())
    assert saved["steps"] == saved["config"]["steps"] == 4
    with pytest.raises(RunFolderError, match="already finished at step 4"):
        train(TrainConfig(out=str(alone)), resume=True, progress=False)
    assert capsys.readouterr().err == ""
