"""torch.distributed's names on tinyattn's MPI layer (init_process_group, all_reduce, ...) and
ta.nn.parallel.DistributedDataParallel: in a world of one here, and (in subprocesses with
timeouts) a nanoGPT-style DDP script under `mpiexec -n 2` against the same script run plainly."""

import os
import subprocess
import sys

import numpy as np
import pytest
from test_distributed import ROOT, mpiexec, needs_mpi  # tests/ is on sys.path

import tinyattn as ta
import tinyattn.distributed as dist
from tinyattn.nn import parallel
from tinyattn.nn.parallel import DistributedDataParallel as DDP  # noqa: N817 - torch users'

SCRIPT = os.path.join(ROOT, "tests", "support", "mpi_ddp.py")
TORCHRUN = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


@pytest.fixture
def world(monkeypatch):
    """A fresh world of one: no launcher, no torchrun variables, no process group."""
    monkeypatch.setattr(dist, "_world", {"comm": None, "rank": 0, "size": 1, "nccl": None})
    for size, rank in dist.LAUNCHERS:
        monkeypatch.delenv(size, raising=False)
        monkeypatch.delenv(rank, raising=False)
    for name in TORCHRUN:
        monkeypatch.delenv(name, raising=False)
    yield
    for name in TORCHRUN:  # (init_process_group set them in os.environ itself)
        os.environ.pop(name, None)


def test_before_init_process_group_the_world_is_refused(world):
    assert dist.is_available() and not dist.is_initialized()
    for call in (dist.get_rank, dist.get_world_size, dist.destroy_process_group,
                 lambda: dist.all_reduce(ta.ones(2)), lambda: dist.broadcast(ta.ones(2), 0)):
        with pytest.raises(dist.DistributedError, match="process group has not been "
                                                        r"initialized: call init_process_group"):
            call()


@pytest.mark.parametrize("backend", ["nccl", "gloo", "mpi", None, "cpu:gloo,cuda:nccl"])
def test_init_process_group_takes_any_backend_and_sets_torchruns_variables(world, backend):
    dist.init_process_group(backend=backend)
    assert dist.is_initialized()
    assert (dist.get_rank(), dist.get_world_size()) == (0, 1)
    assert {k: os.environ[k] for k in TORCHRUN} == dict(RANK="0", LOCAL_RANK="0",
                                                         WORLD_SIZE="1", LOCAL_WORLD_SIZE="1")
    with pytest.raises(dist.DistributedError, match="init_process_group: the default process "
                                                    "group is already initialized"):
        dist.init_process_group("gloo")
    dist.destroy_process_group()
    assert not dist.is_initialized()
    dist.init_process_group("gloo")  # again, after destroy (as torch)
    assert dist.is_initialized()


def test_a_torchrun_world_that_mpi_does_not_see_is_refused(world, monkeypatch):
    """torchrun's processes (WORLD_SIZE=2, no MPI launcher) would each be a world of one."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(dist.DistributedError, match=r"WORLD_SIZE=2 .* a world of 1 .*"
                                                    r"`mpiexec -n 2 python"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


@pytest.mark.parametrize("kwargs, message", [
    (dict(world_size=2), r"world_size=2 but MPI's world has 1 process"),
    (dict(rank=1), r"rank=1 but this process is rank 0 of MPI's world"),
    (dict(backend=3), r"backend must be a string such as 'nccl' or 'gloo' \(or None\): got 3"),
])
def test_init_process_group_refuses_a_world_mpi_does_not_have(world, kwargs, message):
    with pytest.raises((dist.DistributedError, TypeError), match="init_process_group: " + message):
        dist.init_process_group(**kwargs)


@pytest.mark.parametrize("op, expected", [
    ("SUM", [1.5, -2.0]), ("AVG", [1.5, -2.0]), ("MAX", [1.5, -2.0]), ("MIN", [1.5, -2.0]),
    ("PRODUCT", [1.5, -2.0])])
def test_all_reduce_in_a_world_of_one_keeps_the_tensor_in_place(world, op, expected):
    dist.init_process_group("gloo")
    t = ta.tensor([1.5, -2.0])
    array = t._data
    assert dist.all_reduce(t, op=getattr(dist.ReduceOp, op)) is None
    assert t._data is array and t.tolist() == expected
    handle = dist.all_reduce(t, async_op=True)  # (done when it returns: wait() is True)
    assert handle.wait() and handle.is_completed()


def test_all_reduce_broadcast_and_all_gather_refuse_what_they_cannot_do(world):
    dist.init_process_group("gloo")
    with pytest.raises(TypeError, match=r"all_reduce: expects a tensor, got list"):
        dist.all_reduce([1.0])
    with pytest.raises(ValueError, match=r"all_reduce: op must be a ReduceOp \(SUM, AVG, MAX, "
                                         r"MIN, PRODUCT\): got 'sum'"):
        dist.all_reduce(ta.ones(2), op="sum")
    with pytest.raises(TypeError, match=r"all_reduce: ReduceOp.AVG needs a floating-point "
                                        r"tensor: got int64 \(3,\)"):
        dist.all_reduce(ta.tensor([1, 2, 3]), op=dist.ReduceOp.AVG)
    with pytest.raises(ValueError, match=r"broadcast: src 1 is not a rank of a world of 1"):
        dist.broadcast(ta.ones(2), src=1)
    with pytest.raises(ValueError, match=r"all_gather: tensor_list has 2 tensors for a world "
                                         r"of 1"):
        dist.all_gather([ta.zeros(2), ta.zeros(2)], ta.ones(2))
    with pytest.raises(ValueError, match=r"all_gather: tensor_list\[0\] has shape \(3,\) but "
                                         r"the tensor has shape \(2,\)"):
        dist.all_gather([ta.zeros(3)], ta.ones(2))


def test_broadcast_and_all_gather_in_a_world_of_one(world):
    dist.init_process_group("gloo")
    t = ta.tensor([1.0, 2.0])
    dist.broadcast(t, src=0)
    parts = [ta.zeros(2)]
    dist.all_gather(parts, t)
    assert t.tolist() == parts[0].tolist() == [1.0, 2.0]
    objects = [None]
    dist.all_gather_object(objects, {"a": 1})
    assert objects == [{"a": 1}]
    dist.barrier()
    dist.barrier(device_ids=[0])  # (torch's keyword, taken and ignored)


def mlp():
    ta.manual_seed(0)
    return ta.nn.Sequential(ta.nn.Linear(3, 4), ta.nn.Tanh(), ta.nn.Linear(4, 2))


def test_ddp_wraps_the_module_as_torchs_does(world):
    with pytest.raises(dist.DistributedError, match="DistributedDataParallel: the default "
                                                    "process group has not been initialized"):
        DDP(mlp())
    dist.init_process_group("nccl")
    with pytest.raises(TypeError, match="DistributedDataParallel: expects a Module, got list"):
        DDP([1])
    inner = mlp()
    model = DDP(inner, device_ids=[0], output_device=0)
    assert model.module is inner and model.require_backward_grad_sync
    x = ta.randn(5, 3)
    assert np.array_equal(model(x).numpy(), inner(x).numpy())
    assert sorted(model.state_dict()) == sorted("module." + k for k in inner.state_dict())
    assert [n for n, _ in model.named_parameters()] == \
        ["module." + n for n, _ in inner.named_parameters()]
    model.load_state_dict(model.state_dict())
    with model.no_sync():
        assert not model.require_backward_grad_sync
    assert model.require_backward_grad_sync
    assert parallel.DistributedDataParallel is ta.nn.parallel.DistributedDataParallel


@pytest.fixture
def syncs(world, monkeypatch):
    """The calls DDP makes to allreduce_gradients (counted; they reduce nothing here)."""
    calls = []
    real = dist.allreduce_gradients

    def counted(params, *args, **kwargs):
        params = list(params)
        calls.append(len(params))
        return real(params, *args, **kwargs)

    monkeypatch.setattr(dist, "allreduce_gradients", counted)
    dist.init_process_group("gloo")
    return calls


def test_ddp_averages_once_per_backward_and_not_while_sync_is_off(syncs):
    model = DDP(mlp())
    x = ta.randn(5, 3)
    model(x).sum().backward()
    assert syncs == [4]  # once, when the last of the 4 parameters took its gradient
    with model.no_sync():
        model(x).sum().backward()
    model.require_backward_grad_sync = False
    model(x).sum().backward()
    with ta.no_grad():
        model(x)
    assert syncs == [4]
    model.require_backward_grad_sync = True
    loss = model(x).sum()
    model.require_backward_grad_sync = False  # (torch decides at the forward, so does DDP)
    loss.backward()
    assert syncs == [4, 4]


def test_ddp_gradients_in_a_world_of_one_are_the_modules(syncs):
    x = ta.randn(5, 3)
    plain = mlp()
    plain(x).pow(2).mean().backward()
    model = DDP(mlp())
    model(x).pow(2).mean().backward()
    for p, q in zip(plain.parameters(), model.parameters(), strict=True):
        assert np.array_equal(p.grad.numpy(), q.grad.numpy())


def test_ddp_a_parameter_the_forward_does_not_use_does_not_hold_up_the_sync(syncs):
    class TwoHeads(ta.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = ta.nn.Linear(3, 2), ta.nn.Linear(3, 2)

        def forward(self, x, both=False):
            return (self.a(x), self.b(x)) if both else self.a(x)

    model = DDP(TwoHeads())
    model(ta.randn(2, 3)).sum().backward()  # b unused: the sync does not wait for it
    assert syncs == [4] and model.module.b.weight.grad is None
    out, _ = model(ta.randn(2, 3), both=True)
    out.sum().backward()  # b's output got no backward: the reduction is left unfinished
    with pytest.raises(dist.DistributedError, match=r"DistributedDataParallel: the previous "
                                                    r"backward did not reach module\.b\.weight "
                                                    r"\(2, 3\), module\.b\.bias \(2,\)"):
        model(ta.randn(2, 3))
    assert syncs == [4]
    model(ta.randn(2, 3)).sum().backward()  # (the unfinished round is dropped: on as before)
    assert syncs == [4, 4]


def run(args, timeout=60):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name in TORCHRUN:
        env.pop(name, None)
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@needs_mpi
def test_a_nanogpt_style_ddp_script_on_two_processes_ends_as_one_process(tmp_path):
    """The same script, plain (ddp False: the whole batch on one process) and under
    `mpiexec -n 2` (ddp True from the launcher's environment; each rank half of every micro
    batch, gradient accumulation through require_backward_grad_sync): both ranks end with the
    weights of the one process, and the all-reduced (AVG) loss is the whole batch's."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    r = run([SCRIPT, str(one)])
    assert r.returncode == 0, r.stdout + r.stderr
    r = mpiexec(2, [SCRIPT, str(two)], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    ref, rank0, rank1 = (np.load(p) for p in (one / "rank0.npz", two / "rank0.npz",
                                              two / "rank1.npz"))
    assert ref["env"].tolist() == [0, 0, 1]
    assert rank0["env"].tolist() == [0, 0, 2] and rank1["env"].tolist() == [1, 1, 2]
    names = [k for k in ref.files if k.startswith("p_")]
    assert names and sorted(names) == sorted(k for k in rank0.files if k.startswith("p_"))
    for k in names:
        assert np.array_equal(rank0[k], rank1[k]), k  # the ranks agree exactly
        assert np.abs(rank0[k] - ref[k]).max() <= 1e-6, k
    assert np.abs(rank0["losses"] - ref["losses"]).max() <= 1e-6
    assert np.array_equal(rank0["losses"], rank1["losses"])
    for r_ in (rank0, rank1):  # without sync the ranks' gradients differ; after it they agree
        assert r_["unsynced_differ"].tolist() == [True] * 3
        assert r_["synced_same"].tolist() == [True] * 3
        assert all(k.startswith("module.") for k in r_["keys"])
        # broadcast from rank 1, all_reduce MAX of floats and SUM of integers; then a
        # BatchNorm's running mean (rank + 1 on each rank) through DDP's forward: rank 0's
        # with broadcast_buffers, each rank's own without
        own = float(r_["env"][0] + 1)
        assert r_["collectives"].tolist() == [1.0, 5.0, 2.0, 0.0, 5.0, 1.0, 1.0, own, own]
    assert not any(k.startswith("module.") for k in ref["keys"])


def test_ddp_reduces_in_buckets_of_bucket_cap_mb(world, monkeypatch):
    """bucket_cap_mb reaches allreduce_gradients as the bucket size, in bytes."""
    sizes = []
    real = dist.allreduce_gradients

    def recorded(params, bucket_bytes=dist.BUCKET_BYTES):
        sizes.append(bucket_bytes)
        return real(params, bucket_bytes)

    monkeypatch.setattr(dist, "allreduce_gradients", recorded)
    dist.init_process_group("gloo")
    x = ta.randn(5, 3)
    for model in (DDP(mlp(), bucket_cap_mb=0.5), DDP(mlp())):  # (held: its hooks hold it weakly)
        model(x).sum().backward()
    assert sizes == [2 ** 19, dist.BUCKET_BYTES]
