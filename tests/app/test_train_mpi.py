"""`mpiexec -n 2 tinyattn train` (in subprocesses with timeouts): the same run on two processes
ends with the weights of one, only rank 0 writes, a run resumes on another number of processes,
and an error on one rank ends both with its message."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from test_distributed import ROOT, mpiexec, needs_mpi  # tests/ is on sys.path

import tinyattn as ta
from tinyattn import train as train_mod
from tinyattn.serialization import load
from tinyattn.train import TrainConfig, train

pytestmark = needs_mpi
DRIVER = os.path.join(ROOT, "tests", "support", "mpi_train.py")
SETTINGS = dict(steps=30, eval_every=30, dropout=0.0)  # the default task
FLAGS = ["--steps", "30", "--eval-every", "30", "--no-progress"]
_reference = {}


def one_process(folder, dtype, stop_after=None, steps=30):
    """The run on this process alone (a world of one), in `folder`, without the report."""
    old, write_report = ta.get_default_dtype(), train_mod._write_report
    ta.set_default_dtype(dtype)
    train_mod._write_report = lambda *a: []
    try:
        train(TrainConfig(**{**SETTINGS, "steps": steps}, out=str(folder)), progress=False,
              stop_after=stop_after, stream=open(os.devnull, "w"))
    finally:
        ta.set_default_dtype(old)
        train_mod._write_report = write_report
    return weights(folder)


def reference(tmp_path_factory, dtype):
    if dtype not in _reference:
        folder = tmp_path_factory.mktemp(f"one-{dtype}") / "run"
        _reference[dtype] = one_process(folder, getattr(ta, dtype))
    return _reference[dtype]


def weights(folder):
    model = load(os.path.join(folder, "checkpoint.npz"))["model"]
    return {k: np.asarray(v.numpy(), dtype=np.float64) for k, v in model.items()}


def max_relative_difference(a, b):
    """max |a - b| over every weight, over max |a|: the whole model's relative difference."""
    assert a.keys() == b.keys()
    return (max(float(np.abs(a[k] - b[k]).max()) for k in a)
            / max(float(np.abs(a[k]).max()) for k in a))


def two_processes(args, dtype="float32", fail_at="-", cwd=None, timeout=120, wdirs=None,
                  report=False):
    command = [DRIVER, dtype, fail_at, "report" if report else "no-report", *FLAGS, *args]
    if wdirs is None:
        return mpiexec(2, command, cwd=cwd, timeout=timeout)
    # MPMD: one process per working directory, so that a file rank 1 wrote would show
    return mpiexec(1, [*command, ":", "-n", "1", "-wdir", str(wdirs[1]), sys.executable,
                       *command], cwd=wdirs[0], timeout=timeout)


@pytest.mark.parametrize("dtype, tolerance, report", [
    ("float64", 1e-6, False), pytest.param("float32", 1e-4, True, marks=pytest.mark.slow)])
def test_two_processes_end_with_the_weights_of_one_and_only_rank_0_writes(
        tmp_path, tmp_path_factory, dtype, tolerance, report):
    """The test that matters: with dropout 0 the same 30 steps on 2 processes (each computing
    half of every global batch) end with the weights of 1 process."""
    one = reference(tmp_path_factory, dtype)
    rank0, rank1 = tmp_path / "rank0", tmp_path / "rank1"
    rank0.mkdir()
    rank1.mkdir()
    r = two_processes(["--out", "run"], dtype, wdirs=(rank0, rank1), report=report)
    assert r.returncode == 0, r.stdout + r.stderr
    assert max_relative_difference(one, weights(rank0 / "run")) <= tolerance
    assert os.listdir(rank1) == []  # rank 1 wrote nothing
    assert r.stdout.count("held-out token accuracy") == 1  # and printed nothing
    metrics = json.loads((rank0 / "run" / "metrics.json").read_text())
    assert metrics["processes"] == 2 and metrics["steps"] == 30
    rows = (rank0 / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 30
    assert ("loss.png" in os.listdir(rank0 / "run")) == report


@pytest.mark.slow
def test_a_run_of_one_process_resumes_on_two(tmp_path, tmp_path_factory):
    one = reference(tmp_path_factory, "float32")
    one_process(tmp_path / "run", ta.float32, stop_after=15)
    r = two_processes(["--out", "run", "--resume"], cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert (metrics["resumed_from"], metrics["processes"], metrics["steps"]) == (15, 2, 30)
    assert max_relative_difference(one, weights(tmp_path / "run")) <= 1e-4


def test_an_error_on_rank_1_ends_both_with_its_message(tmp_path):
    r = two_processes(["--out", "run"], fail_at="5", cwd=tmp_path, timeout=60)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "rank 1 of 2: error: ValueError: planted on rank 1 at step 5" in out, out
    assert "checkpoint.npz" not in os.listdir(tmp_path / "run")


def test_a_global_batch_smaller_than_the_world_is_refused_on_every_rank(tmp_path):
    r = two_processes(["--out", "run", "--batch-size", "1"], cwd=tmp_path, timeout=60)
    assert r.returncode != 0
    assert "--batch-size is the global batch, split across the 2 MPI processes: it must be " \
           "at least 2: got 1" in r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_sigterm_to_mpiexec_stops_both_ranks_at_one_step_and_one_process_resumes(tmp_path):
    """mpiexec passes SIGTERM to every rank; they agree on the step to stop after, rank 0
    saves, and the command exits 143. The checkpoint of 2 processes then resumes on 1."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = ["mpiexec", "-n", "2", sys.executable, DRIVER, "float32", "-", "no-report",
               "--no-progress", "--steps", "5000", "--eval-every", "5000", "--out", "run"]
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    log = tmp_path / "run" / "metrics.jsonl"
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and log.read_text().count("\n") >= 3):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)  # to mpiexec, once (a second one kills the ranks)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, out + err
    assert err.count("SIGTERM: stopping after this step") == 2
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert (metrics["signal"], metrics["processes"]) == ("SIGTERM", 2)
    assert metrics["steps"] == len(log.read_text().splitlines()) == \
        int(load(str(tmp_path / "run" / "checkpoint.npz"))["step"])
    again = train(TrainConfig(**{**SETTINGS, "steps": metrics["steps"] + 2},
                              out=str(tmp_path / "run")), resume=True, progress=False,
                  stream=open(os.devnull, "w"))
    assert (again["resumed_from"], again["processes"]) == (metrics["steps"], 1)
