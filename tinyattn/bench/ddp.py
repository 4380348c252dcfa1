"""Data-parallel training steps on MPI: steps/s at N = 1 and 2 processes, the Allreduce's share.

`tinyattn bench ddp` starts `mpiexec -n N` for each N (one BLAS thread per rank, so N ranks use
N cores) and runs this module's worker there: the benchmark models of `tinyattn bench step`
(small, medium: one-block transformer LMs) take full training steps on a fixed global batch B,
each rank computing B/N rows: forward, backward, `allreduce_gradients` (timed on its own),
clipping and AdamW. It prints, per size and N, the median step, steps/s, the speed-up over
N = 1, the Allreduce's share of the step (on rank 0, waiting for the slower rank included) and
the bytes each rank handed to Allreduce per step against the ring bound 2(N-1)/N x gradient
bytes (what MPICH's algorithm sends over the wire is not measured).

    tinyattn bench ddp [--sizes small medium] [--processes 1 2] [--repeats 20]
    python benchmarks/ddp.py [same options]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from .step import SIZES, make_batch, make_params, tinyattn_setup
from .timing import at_least, parser


def _step(model, opt, idx, tgt, scored):
    """One data-parallel training step on this rank's rows; (seconds, of which Allreduce)."""
    import tinyattn as ta
    import tinyattn.distributed as dist
    import tinyattn.functional as F
    from tinyattn.optim import clip_grad_norm

    dist.barrier()  # every rank starts together: the Allreduce time is the step's, not drift
    start = time.perf_counter()
    opt.zero_grad()
    logits = model(ta.tensor(idx))  # (B/N, T, V)
    summed = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ta.tensor(tgt.reshape(-1)),
                             reduction="sum")
    (summed * (dist.world_size() / scored)).backward()
    before = time.perf_counter()
    dist.allreduce_gradients(model)
    reduce = time.perf_counter() - before
    clip_grad_norm(model.parameters(), 1.0)
    opt.step()
    return time.perf_counter() - start, reduce


def worker(sizes, repeats, warmup=3):
    """Run under mpiexec: {size: measurements} (on every rank; rank 0 prints them)."""
    import tinyattn.distributed as dist
    from tinyattn.optim import AdamW

    dist.init()
    n, results = dist.world_size(), {}
    for size in sizes:
        V, B, T, C, H = SIZES[size]  # noqa: N806
        model = tinyattn_setup(make_params(V, T, C), H)
        opt = AdamW(model.parameters(), lr=1e-3)
        idx, tgt = make_batch(V, B, T)
        rows = dist.shard(B)
        times = [_step(model, opt, idx[rows], tgt[rows], tgt.size)
                 for _ in range(warmup + repeats)][warmup:]
        sent = dict(dist.stats)
        _step(model, opt, idx[rows], tgt[rows], tgt.size)
        grad_bytes = sum(p._data.nbytes for p in model.parameters())
        results[size] = {
            "processes": n, "batch": B, "step_s": statistics.median(t for t, _ in times),
            "allreduce_s": statistics.median(r for _, r in times),
            "allreduce_share": statistics.median(r / t for t, r in times),
            "bytes_per_step": dist.stats["bytes"] - sent["bytes"],
            "messages_per_step": dist.stats["messages"] - sent["messages"],
            "grad_bytes": grad_bytes, "ring_bound": dist.ring_bound(grad_bytes, n)}
    return results


def run(processes, sizes, repeats, timeout=600):
    """Start the worker on `processes` MPI ranks; rank 0's results."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    command = ["mpiexec", "-n", str(processes), sys.executable, "-m", "tinyattn.bench.ddp",
               "--worker", "--sizes", *sizes, "--repeats", str(repeats)]
    r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"bench ddp: {' '.join(command)} failed ({r.returncode}):\n"
                           f"{r.stdout}{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def table(results):
    """Markdown rows: size, N, step, steps/s, speed-up, Allreduce share, bytes vs the bound."""
    lines = ["| size (V, B, T, C, H) | N | step (median) | steps/s | speed-up | Allreduce "
             "share | bytes sent per rank per step | ring bound 2(N-1)/N x grads |",
             "|---|---|---|---|---|---|---|---|"]
    for size in results[min(results)]:
        base = results[min(results)][size]["step_s"]
        for n in sorted(results):
            m = results[n][size]
            lines.append(f"| {size} {SIZES[size]} | {n} | {m['step_s'] * 1e3:.1f} ms | "
                         f"{1 / m['step_s']:.1f} | {base / m['step_s']:.2f}x | "
                         f"{m['allreduce_share']:.1%} | {m['bytes_per_step'] / 1e6:.2f} MB "
                         f"({m['messages_per_step']} Allreduce) | {m['ring_bound'] / 1e6:.2f} MB |")
    return "\n".join(lines)


def main(argv=None):
    ap = parser("ddp", __doc__)
    ap.add_argument("--sizes", nargs="+", default=["small", "medium"], choices=list(SIZES))
    ap.add_argument("--processes", nargs="+", type=at_least(1), default=[1, 2])
    ap.add_argument("--repeats", type=at_least(1), default=20)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        import tinyattn.distributed as dist

        with dist.abort_on_error():
            results = worker(args.sizes, args.repeats)
            if dist.is_main():
                print(json.dumps(results), flush=True)
        return 0
    results = {n: run(n, args.sizes, args.repeats) for n in args.processes}
    print(f"data-parallel training steps, one BLAS thread per rank, {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
