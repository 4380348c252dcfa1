"""Training runs never lose work and never train on the wrong thing (issue 17).

Real `tinyattn train` subprocesses, each in its own process group, get SIGINT, SIGTERM and
SIGKILL; two of them race for one run folder; a full disk is a small tmpfs (as root). The rest
runs in-process: the lock, the metrics log's repair, the flag table, --resume/--force rules.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.train as train_mod
from tinyattn import cli
from tinyattn.runs import LOCK_NAME, RunFolderError, RunLock, read_metrics, repair_metrics
from tinyattn.train import FlagError, TrainConfig, train

ROOT = Path(__file__).resolve().parents[2]
TINY_FLAGS = ["--length", "3", "--d-model", "8", "--heads", "2", "--layers", "1",
              "--batch-size", "4", "--eval-every", "100000", "--no-progress"]
TINY = dict(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
            eval_every=100000, heldout_size=16)


# ---- real processes -----------------------------------------------------------------------------


def start(out, *flags):
    """`tinyattn train` in its own process group (so signals reach it alone)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tinyattn", "train", "--out", str(out),
                             *TINY_FLAGS, *flags], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def rows(out):
    path = Path(out) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for_rows(proc, out, n, timeout=60):
    deadline = time.monotonic() + timeout
    while len(rows(out)) < n:
        if proc.poll() is not None:
            pytest.fail(f"the run ended early ({proc.returncode}): {proc.communicate()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("the run wrote no metrics in time")
        time.sleep(0.05)


def finish(proc, timeout=60):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc.returncode, out, err


def leftovers(out):
    return sorted(p.name for p in Path(out).iterdir() if p.name.startswith("."))


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_saves_and_exits_with_its_status(tmp_path, sig, code):
    out = tmp_path / "run"
    proc = start(out, "--steps", "1000000")
    wait_for_rows(proc, out, 5)
    os.killpg(proc.pid, sig)
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # Ctrl-C pressed twice: the second waits for the save
    status, stdout, err = finish(proc)
    assert status == code, err
    ck = ta.load(out / "checkpoint.npz")
    assert ck["step"] == len(rows(out)) >= 5  # every logged step is in the checkpoint
    assert [r["step"] for r in rows(out)] == list(range(1, ck["step"] + 1))
    assert json.loads((out / "metrics.json").read_text())["signal"] == sig.name
    assert leftovers(out) == []  # no lock, no temporary file
    assert "Traceback" not in err


@pytest.mark.slow
def test_kill_9_loses_at_most_the_steps_since_the_last_save(tmp_path):
    out = tmp_path / "run"
    proc = start(out, "--steps", "1000000", "--save-every", "5")
    wait_for_rows(proc, out, 12)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    saved = ta.load(out / "checkpoint.npz")["step"]
    assert saved >= 10 and saved % 5 == 0
    (out / ".tmp-abc123.npz").write_bytes(b"half a save")  # as a kill during a save leaves
    assert LOCK_NAME in leftovers(out)  # the dead run's lock: stale
    target = len(rows(out)) + 5
    status, _, err = finish(start(out, "--steps", str(target), "--save-every", "5", "--resume"))
    assert status == 0, err
    assert [r["step"] for r in rows(out)] == list(range(1, target + 1))
    assert leftovers(out) == []


@pytest.mark.slow
def test_a_second_run_on_the_same_folder_is_refused(tmp_path):
    out = tmp_path / "run"
    first = start(out, "--steps", "1000000")
    wait_for_rows(first, out, 3)
    second = subprocess.run([sys.executable, "-m", "tinyattn", "train", "--out", str(out),
                             "--resume", *TINY_FLAGS], env={**os.environ, "PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True, timeout=60)
    assert second.returncode == 2
    assert "in use by another training run" in second.stderr
    assert f"pid {first.pid} on {socket.gethostname()}" in second.stderr
    os.killpg(first.pid, signal.SIGTERM)
    assert finish(first)[0] == 143
    steps = [r["step"] for r in rows(out)]
    assert steps == list(range(1, len(steps) + 1))  # one writer: nothing interleaved


# ---- a full disk (a small tmpfs, as root) -------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("simulating a full disk mounts a small tmpfs, which needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(folder):
    """Write a file that takes all the space left; returns its path."""
    path = folder / "filler"
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return path


def test_a_full_disk_stops_the_run_with_its_file_named_and_loses_nothing(small_disk,
                                                                         monkeypatch):
    out = small_disk / "run"
    train(TrainConfig(steps=6, save_every=2, out=str(out), **TINY), progress=False)
    filler = fill(small_disk)
    with pytest.raises(OSError, match=f"No space left on device: '{out / LOCK_NAME}'"):
        train(TrainConfig(steps=40, out=str(out), **TINY), resume=True, progress=False)
    filler.unlink()
    real_step, calls = train_mod._train_step, []

    def step_then_fill(*args):  # the disk fills up while the run trains
        calls.append(1)
        if len(calls) == 5:
            fill(small_disk)
        return real_step(*args)

    monkeypatch.setattr(train_mod, "_train_step", step_then_fill)
    with pytest.raises(OSError, match="No space left on device") as caught:
        train(TrainConfig(steps=4000, save_every=2, out=str(out), **TINY), resume=True,
              progress=False)
    assert str(out) in str(caught.value)  # the message names the file
    assert leftovers(out) == []  # the temporary file of the failed save is gone, and the lock
    assert ta.load(out / "checkpoint.npz")["step"] >= 10  # the last good checkpoint
    monkeypatch.undo()
    (small_disk / "filler").unlink()
    metrics = train(TrainConfig(steps=60, save_every=20, out=str(out), **TINY), resume=True,
                    progress=False)
    assert metrics["steps"] == 60
    assert [r["step"] for r in rows(out)] == list(range(1, 61))


# ---- signals in-process: the second Ctrl-C waits for the save -----------------------------------


def test_second_ctrl_c_during_the_final_save_waits_for_it(tmp_path, monkeypatch):
    real_step, real_save = train_mod._train_step, train_mod.save
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
    metrics = train(TrainConfig(steps=50, out=str(tmp_path), **TINY), progress=False)
    assert metrics["interrupted"] and metrics["signal"] == "SIGINT" and metrics["steps"] == 3
    assert ta.load(tmp_path / "checkpoint.npz")["step"] == 3
    assert train_mod.exit_code(metrics) == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


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


# ---- the lock -----------------------------------------------------------------------------------


def test_the_lock_refuses_a_second_holder_and_names_the_first(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(RunFolderError, match=f"pid {os.getpid()} on {socket.gethostname()}"):
            RunLock(tmp_path).acquire()
    with RunLock(tmp_path):  # released: free again
        pass
    assert not (tmp_path / LOCK_NAME).exists()


def _lock_file(folder, pid, host):
    (folder / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": host, "started": "then"}))


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _lock_file(tmp_path, dead.pid, socket.gethostname())
    lock = RunLock(tmp_path).acquire()
    assert lock.stale["pid"] == dead.pid
    assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    lock.release()


def test_a_lock_of_a_live_process_or_another_host_is_honoured(tmp_path):
    _lock_file(tmp_path, os.getppid(), socket.gethostname())  # alive, though without flock
    with pytest.raises(RunFolderError, match=f"pid {os.getppid()}"):
        RunLock(tmp_path).acquire()
    _lock_file(tmp_path, 1234, "another-host")
    with pytest.raises(RunFolderError, match="on another-host.*delete"):
        RunLock(tmp_path).acquire()


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


def test_resume_after_a_torn_log_line(tmp_path):
    cfg = TrainConfig(steps=12, out=str(tmp_path), **TINY)
    train(cfg, progress=False, stop_after=5)
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 6, "loss": 2.')  # a crash mid-line
    train(cfg, resume=True, progress=False)
    assert [r["step"] for r in rows(tmp_path)] == list(range(1, 13))


# ---- --resume and --force -----------------------------------------------------------------------


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
    with pytest.raises(RunFolderError, match="nothing to resume.*no checkpoint.npz"):
        train(TrainConfig(steps=4, out=str(tmp_path / "new"), **TINY), resume=True,
              progress=False)
    assert not (tmp_path / "new").exists()  # a failed start leaves no folder


def test_resume_after_the_text_changed_is_refused(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("abcabcabd " * 60)
    cfg = TrainConfig(task="text", text=str(text), seq_len=8, steps=6, d_model=8, heads=2,
                      layers=1, batch_size=4, heldout_size=8, out=str(tmp_path / "run"))
    train(cfg, progress=False, stop_after=2)
    text.write_text("abcabcabe " * 60)  # same length, same vocabulary size, other text
    with pytest.raises(RunFolderError, match="data changed"):
        train(cfg, resume=True, progress=False)


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
