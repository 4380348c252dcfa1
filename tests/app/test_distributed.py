"""tinyattn.distributed: the world of one, shards, buckets, and (under `mpiexec -n 2`, in a
subprocess with a timeout) the in-place bucketed Allreduce and the parameter broadcast."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mpi_ready():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return shutil.which("mpiexec") is not None


needs_mpi = pytest.mark.skipif(not mpi_ready(), reason="needs mpi4py and mpiexec "
                               f"({dist.INSTALL})")


def mpiexec(n, args, timeout=120, cwd=None, env=None):
    """Run `python args...` on n MPI processes, one BLAS thread each; the CompletedProcess."""
    env = dict(os.environ if env is None else env)
    env.update(PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.run(["mpiexec", "-n", str(n), sys.executable, *args], cwd=cwd or ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def world_of_one(monkeypatch):
    monkeypatch.setattr(dist, "_world", {"comm": None, "rank": 0, "size": 1, "nccl": None})
    for size, _ in dist.LAUNCHERS:
        monkeypatch.delenv(size, raising=False)


def test_a_launched_process_must_call_init_before_asking_about_the_world(world_of_one,
                                                                          monkeypatch):
    """Started by `mpiexec -n 2` but init() not called: every rank would answer as a world of
    one (rank 0, nothing reduced), so each function that depends on the world refuses."""
    monkeypatch.setenv("PMI_SIZE", "2")
    p = ta.zeros(3, requires_grad=True)
    p.grad = ta.ones(3)
    for call in (dist.rank, dist.world_size, dist.is_main, dist.barrier, lambda: dist.shard(8),
                 lambda: dist.allreduce_gradients([p]), lambda: dist.broadcast_parameters([p]),
                 lambda: dist.broadcast_object(1), lambda: dist.allreduce_max(1),
                 lambda: dist.allreduce_sum([1.0])):
        with pytest.raises(dist.DistributedError, match=r"one of 2 processes .* call "
                                                        r"distributed\.init\(\) first"):
            call()
    assert dist.shard(8, 1, 2) == slice(4, 8)  # a rank and size given: nothing to ask
    assert dist.init(mpi=False) == 1  # a world of one on purpose
    assert (dist.rank(), dist.world_size(), dist.allreduce_gradients([p])) == (0, 1, 0)


@pytest.mark.parametrize("args, message", [
    ((10, 2, 2), r"rank must be in \[0, 2\) for a world of 2: got 2"),
    ((10, -1, 2), r"rank must be in \[0, 2\) for a world of 2: got -1"),
    ((10, 0, 0), r"size must be a whole number >= 1: got 0"),
    ((-3, 0, 2), r"n must be a whole number >= 0: got -3"),
    ((2.5, 0, 2), r"n must be a whole number >= 0: got 2.5"),
])
def test_shard_refuses_a_rank_outside_the_world(args, message):
    with pytest.raises(ValueError, match="shard: " + message):
        dist.shard(*args)


class AllgatherFromRank0:
    """The communicator as rank `rank` of two sees it, for allgather only: rank 0 holds
    `theirs`."""

    def __init__(self, theirs):
        self.theirs = theirs

    def allgather(self, mine):
        return [self.theirs, mine]


def test_settings_that_differ_from_rank_0s_are_named_on_every_rank(monkeypatch):
    from tinyattn.train import TrainConfig, check_same_settings

    mine = TrainConfig(steps=10, lr=0.01)
    seen = {}

    def allgather(obj):  # rank 0 was given --steps 20 and the default --lr
        seen["rank 1"] = obj
        theirs = dict(obj[0], **{"--steps": 20, "--lr": 3e-3})
        return [(theirs, obj[1]), obj]

    comm = type("Comm", (), {"allgather": staticmethod(allgather)})
    monkeypatch.setattr(dist, "_world", {"comm": comm, "rank": 1, "size": 2, "nccl": None,
                                         "joined": True})
    with pytest.raises(dist.DisagreementError) as e:
        check_same_settings(mine)
    assert str(e.value) == ("rank 1 was started with --steps 10 --lr 0.01, rank 0 with --steps "
                            "20 --lr 0.003: every process must get the same settings")
    assert "--text" not in seen["rank 1"][0]  # the text is compared by its contents
    monkeypatch.setitem(dist._world, "comm", AllgatherFromRank0(seen["rank 1"]))
    check_same_settings(mine)  # the same settings: nothing to say
    assert issubclass(dist.DisagreementError, dist.DistributedError)


def test_different_data_on_two_ranks_is_named_by_its_fingerprint(monkeypatch, tmp_path):
    from tinyattn.train import TrainConfig, _check_same_data_on_every_rank, _Run, build

    for name, text in (("a.txt", "to be or not to be\n" * 50), ("b.txt", "all the world\n" * 50),
                       ("c.txt", "to be or not to be\n" * 50)):
        (tmp_path / name).write_text(text)
    runs = {name: _Run(cfg, *build(cfg)) for name in ("a.txt", "b.txt", "c.txt")
            for cfg in [TrainConfig(task="text", text=str(tmp_path / name), seq_len=8,
                                    d_model=8, heads=2, layers=1)]}
    seen = []

    def world(rank0):
        comm = type("Comm", (), {"allgather": lambda self, mine: seen.append(mine) or
                                 [seen[0] if rank0 is None else rank0, mine]})()
        monkeypatch.setattr(dist, "_world", {"comm": comm, "rank": 1, "size": 2, "nccl": None,
                                             "joined": True})

    world(None)
    _check_same_data_on_every_rank(runs["a.txt"])  # (rank 0's, recorded)
    _check_same_data_on_every_rank(runs["c.txt"])  # another path, the same text
    with pytest.raises(dist.DisagreementError,
                       match=r"^rank 1 was started with data fingerprint [0-9a-f]{16} \(--text "
                             r".*b\.txt\), rank 0 with data fingerprint [0-9a-f]{16} \(--text "
                             r".*a\.txt\): every process must get the same data$"):
        _check_same_data_on_every_rank(runs["b.txt"])


def test_a_plain_process_is_a_world_of_one_without_loading_mpi(world_of_one):
    assert dist.init() == 1
    assert (dist.rank(), dist.world_size(), dist.is_main()) == (0, 1, True)
    p = ta.zeros(3, requires_grad=True)
    p.grad = ta.ones(3)
    assert dist.allreduce_gradients([p]) == 0 and p.grad.numpy().tolist() == [1, 1, 1]
    dist.broadcast_parameters([p])
    dist.barrier()
    assert dist.broadcast_object({"a": 1}) == {"a": 1} and dist.allreduce_max(3) == 3


def test_a_launched_process_without_mpi4py_says_how_to_install(world_of_one, monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import fails
    monkeypatch.setenv("PMI_SIZE", "2")
    with pytest.raises(dist.DistributedError, match=r"one of 2 .*mpi4py is missing.*\.\[mpi\]"):
        dist.init()
    monkeypatch.setenv("PMI_SIZE", "1")  # mpiexec -n 1: nothing to share, a world of one
    assert dist.init() == 1
    assert dist.init(mpi=True) == 1  # asked for, but no mpi4py: a world of one


@given(st.integers(0, 200), st.integers(1, 9))
def test_shards_cover_the_batch_once_and_differ_by_at_most_one(n, size):
    parts = [dist.shard(n, r, size) for r in range(size)]
    rows = np.concatenate([np.arange(n)[s] for s in parts])
    assert rows.tolist() == list(range(n))
    lengths = [s.stop - s.start for s in parts]
    assert max(lengths) - min(lengths) <= 1


def test_buckets_group_by_dtype_and_stay_under_the_limit():
    grads = [ta.zeros(10, dtype=d) for d in (ta.float32, ta.float64, ta.float32, ta.float32)]
    grads.append(ta.zeros(100, dtype=ta.float32))  # 400 B: larger than a bucket, alone
    out = list(dist.buckets(grads, bucket_bytes=80))
    index = {id(g): i for i, g in enumerate(grads)}
    assert [[index[id(g)] for g in b] for b in out] == [[0, 2], [3], [4], [1]]
    assert all(len(b) == 1 or sum(g.data.nbytes for g in b) <= 80 for b in out)
    assert len({g.dtype for b in out for g in b[:1]}) == 2


def test_ring_bound():
    assert dist.ring_bound(1000, 1) == 0 and dist.ring_bound(1000, 2) == 1000
    assert dist.ring_bound(1000, 4) == 1500


def test_abort_on_error_in_a_world_of_one_raises_as_usual(world_of_one):
    with pytest.raises(ValueError, match="bad"), dist.abort_on_error():
        raise ValueError("bad")


@needs_mpi
def test_allreduce_averages_in_buckets_on_two_processes():
    """Float64 and float32, several buckets, a .grad on one rank only, broadcast_parameters,
    and the host path for CuPy arrays (the fake CuPy: no NCCL there)."""
    r = mpiexec(2, ["tests/support/mpi_checks.py", "average", "float32", "fake_cupy"], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok average float32 fake_cupy" in r.stdout


@needs_mpi
def test_ranks_that_disagree_stop_together_on_two_processes(tmp_path):
    """On a real world of 2, each rank raises the same error instead of hanging or reducing
    garbage: functions called before init(); parameters that differ in count, shape or dtype
    (allreduce_gradients, broadcast_parameters); `tinyattn train` given other settings or
    other data on rank 1 (the world survives each: a good Allreduce follows)."""
    r = mpiexec(2, ["tests/support/mpi_checks.py", "uninit", "disagree", "settings",
                    str(tmp_path)], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok uninit disagree settings" in r.stdout
    assert not (tmp_path / "run").exists()


def test_bench_ddp_worker_in_a_world_of_one(world_of_one):
    from tinyattn.bench import ddp

    m = ddp.worker(["tiny"], repeats=2, warmup=1)["tiny"]
    assert m["processes"] == 1 and m["bytes_per_step"] == 0 and m["ring_bound"] == 0
    assert 0 < m["step_s"] and m["allreduce_share"] < 0.5
    assert "| tiny (64, 16, 32, 64, 4) | 1 |" in ddp.table({1: {"tiny": m}})


@needs_mpi
def test_bench_ddp_on_two_processes_hands_mpi_the_gradient_bytes():
    """Each rank sends its whole gradient once per step (one bucket): for N = 2 that is the
    ring bound 2(N-1)/N x gradient bytes."""
    from tinyattn.bench import ddp

    m = ddp.run(2, ["tiny"], repeats=2, timeout=120)["tiny"]
    assert m["processes"] == 2 and m["messages_per_step"] == 1
    assert m["bytes_per_step"] == m["grad_bytes"] == m["ring_bound"] > 0
