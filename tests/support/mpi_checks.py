"""Run under `mpiexec -n 2` by tests/app/test_distributed.py: tinyattn.distributed's collectives on
a real MPI world. Each check prints "ok NAME" on rank 0; a failure raises (and aborts both)."""

import sys

import numpy as np

import tinyattn as ta
import tinyattn.distributed as dist


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


def main():
    dist.init()
    assert dist.world_size() == 2, dist.world_size()
    which = sys.argv[1:] or ["average", "float32"]
    if "average" in which:
        check_average()
    if "float32" in which:
        check_float32_and_broadcast()
    if "fake_cupy" in which:
        sys.path.insert(0, "tests/support")
        import fake_cupy
        import pytest

        with pytest.MonkeyPatch.context() as mp:
            fake_cupy.install(mp, kernels=False)
            check_average(fake_cupy=True)
    dist.barrier()
    if dist.is_main():
        print("ok", " ".join(which), flush=True)


if __name__ == "__main__":
    with dist.abort_on_error():
        dist.init()
        main()
