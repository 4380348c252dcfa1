"""Run under `mpiexec -n 2` by tests/app/test_distributed.py: tinyattn.distributed's collectives on
a real MPI world. Each check prints "ok NAME" on rank 0; a failure raises (and aborts both)."""

import os
import sys

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.distributed as dist
from tinyattn import cli


def check_average(fake_cupy=False):
    """Each rank's .grad is rank-dependent; after allreduce every rank holds the mean, in every
    bucket (small buckets force several messages), and a .grad only rank 1 has is averaged with
    rank 0's zeros; a .grad no rank has stays None."""
    r, n = dist.rank(), dist.world_size()
    backend = "cupy" if fake_cupy else None
    shapes = [(3, 4), (5,), (2, 2, 2), (7,)]
    params = [ta.zeros(*s, dtype=ta.float64, requires_grad=True, backend=backend)
              for s in shapes]
    lone, nobody = params[2], params[3]
    for i, p in enumerate(params[:2]):
        p.grad = ta.tensor(np.full(p.shape, float(i + 10 * r)), backend=backend)
    if r == 1:
        lone.grad = ta.tensor(np.ones(lone.shape), backend=backend)
    before = dist.stats["messages"]
    sent = dist.allreduce_gradients(params, bucket_bytes=40)
    assert dist.stats["messages"] - before == 3, dist.stats  # (3,4) 96 B; (5,) 40 B; lone 64 B
    assert sent == 8 * (12 + 5 + 8), sent
    mean = sum(10 * k for k in range(n)) / n
    np.testing.assert_array_equal(params[0].grad.numpy(), np.full((3, 4), mean))
    np.testing.assert_array_equal(params[1].grad.numpy(), np.full((5,), 1 + mean))
    np.testing.assert_array_equal(lone.grad.numpy(), np.full(lone.shape, 1 / n))
    assert nobody.grad is None


def check_float32_and_broadcast():
    r = dist.rank()
    model = ta.nn.Linear(3, 2)  # float32; different weights on each rank
    with ta.no_grad():
        for p in model.parameters():
            p.data[...] = r + 1
    dist.broadcast_parameters(model)
    for p in model.parameters():
        assert (p.numpy() == 1).all() and p.dtype == ta.float32
        p.grad = ta.tensor(np.full(p.shape, float(r), dtype=np.float32))
    dist.allreduce_gradients(model)
    for p in model.parameters():
        assert p.grad.dtype == ta.float32
        np.testing.assert_allclose(p.grad.numpy(), 0.5)


def check_uninit():
    """Before init(), under a launcher of 2: every world-dependent call refuses."""
    p = ta.zeros(3, requires_grad=True)
    p.grad = ta.ones(3)
    for call in (dist.rank, lambda: dist.allreduce_gradients([p]),
                 lambda: dist.broadcast_parameters([p])):
        with pytest.raises(dist.DistributedError, match=r"call distributed\.init\(\) first"):
            call()


def disagreeing_parameters(case, r):
    """Parameters (with a .grad) that differ between rank 0 and rank 1 as `case` says."""
    sizes, dtype = [3], np.float32
    if case == "count":
        sizes = [3] * (1 + r)
    elif case == "shape":
        sizes = [3 if r == 0 else 5]
    elif case == "dtype":
        dtype = np.float32 if r == 0 else np.float64
    params = [ta.tensor(np.zeros(n, dtype=dtype), requires_grad=True) for n in sizes]
    for p in params:
        p.grad = ta.tensor(np.full(p.shape, r + 1.0, dtype=dtype))
    return params


def check_disagree():
    """Parameters that differ in count, shape or dtype: DisagreementError on every rank, the
    same message on each, from allreduce_gradients and broadcast_parameters alike."""
    r = dist.rank()
    expected = {"count": "rank 1 has 2 parameters",  # (allreduce: "that require grad")
                "shape": "parameter 0 is float32 (5,) on rank 1 but float32 (3,) on rank 0",
                "dtype": "parameter 0 is float64 (3,) on rank 1 but float32 (3,) on rank 0"}
    for case, says in expected.items():
        params = disagreeing_parameters(case, r)
        for name, call in (("allreduce_gradients", dist.allreduce_gradients),
                           ("broadcast_parameters", dist.broadcast_parameters)):
            with pytest.raises(dist.DisagreementError) as e:
                call(params)
            assert str(e.value).startswith(f"{name}: {says}"), (case, str(e.value))
            if name == "allreduce_gradients":
                assert str(e.value).endswith(": every rank must hold the same parameters "
                                             "(build the model the same way on each)")
        assert [p.grad.numpy()[0] for p in params] == [r + 1.0] * len(params)  # untouched
    p = ta.zeros(2, requires_grad=True)
    p.grad = ta.full((2,), float(r))
    dist.allreduce_gradients([p])  # the world still works
    assert p.grad.numpy().tolist() == [0.5, 0.5]


def check_settings(folder):
    """`tinyattn train` with other settings or other data on rank 1: every rank stops with the
    same line, before the run folder exists (and without MPI Abort: the world goes on)."""
    r = dist.rank()
    out = ["--out", os.path.join(folder, "run"), "--no-progress"]
    text = os.path.join(folder, f"text{r}.txt")
    with open(text, "w") as f:
        f.write(("to be or not to be\n" if r == 0 else "all the world's a stage\n") * 40)
    cases = [(["--steps", str(20 - 10 * r)], "rank 1 was started with --steps 10, rank 0 with "
              "--steps 20: every process must get the same settings"),
             (["--seq-len", "5"] if r else [], "rank 1 was started with --seq-len 5, rank 0 "
              "with --seq-len 64: every process must get the same settings"),
             (["--text", text, "--seq-len", "8", "--steps", "1"], "every process must get the "
              "same data")]
    for args, says in cases:
        with pytest.raises(dist.DisagreementError) as e:
            cli.main(["train", *out, *args])
        assert str(e.value).endswith(says), str(e.value)
        assert str(e.value).startswith("rank 1 was started with"), str(e.value)
    assert not os.path.exists(out[1])


def main():
    which = sys.argv[1:] or ["average", "float32"]
    if "uninit" in which:
        check_uninit()
    dist.init()
    assert dist.world_size() == 2, dist.world_size()
    if "disagree" in which:
        check_disagree()
    if "settings" in which:
        check_settings(which[which.index("settings") + 1])
        which.remove(which[which.index("settings") + 1])
    if "average" in which:
        check_average()
    if "float32" in which:
        check_float32_and_broadcast()
    if "fake_cupy" in which:
        sys.path.insert(0, "tests/support")
        import fake_cupy

        with pytest.MonkeyPatch.context() as mp:
            fake_cupy.install(mp, kernels=False)
            check_average(fake_cupy=True)
    dist.barrier()
    if dist.is_main():
        print("ok", " ".join(which), flush=True)


if __name__ == "__main__":
    with dist.abort_on_error():  # (before init: a world of one, where errors go on as usual)
        main()
