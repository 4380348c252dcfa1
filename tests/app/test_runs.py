"""Training runs never lose work when their process is stopped (issue 17).

Real `tinyattn train` subprocesses, each in its own process group, get SIGINT, SIGTERM and
SIGKILL; two of them race for one run folder; a full disk is a small tmpfs (as root). These tests
start other processes, so mutation testing does not run them (the child would not see a planted
bug). The run folder's lock is here too (its stale-lock test starts a process to get a dead pid).
The in-process rules (signals, the metrics log, the flag table, --resume/--force) are in
test_run_rules.py.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tinyattn as ta
import tinyattn.train as train_mod
from tinyattn.runs import LOCK_NAME, RunFolderError, RunLock
from tinyattn.train import TrainConfig, train

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
