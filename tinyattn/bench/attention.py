"""Flash attention against the composite path: time, throughput and memory.

On the CPU (always available) it runs `F.scaled_dot_product_attention(impl="composite")` and
`impl="flash"` through tinyattn's autograd on the NumPy backend, forward + backward, and reports
the median time and the peak of Python-allocated memory (tracemalloc) of one forward + backward:
the composite path holds T x T score and probability matrices, flash only O(T) per row.

On a GPU (--backend cupy) it times, interleaved with CUDA events, the flash kernels
(CupyBackend.attention_forward / attention_backward), the CuPy composed path (cuBLAS matmul,
the fused causal softmax kernel, matmul; backward with the fused softmax backward) and
torch.nn.functional.scaled_dot_product_attention when torch sees the GPU (with TF32 off, so all
three do float32 math). It reports milliseconds and TFLOP/s: forward 4·N·T·S·d multiply-adds
counted as 2 flops each (half of that when causal), backward 2.5 times the forward.

    python benchmarks/attention.py [--backend numpy|cupy] [--quick] [--t 256 1024] [--repeats 5]
    tinyattn bench attention [same options]
"""

import gc
import math
import statistics
import sys
import time
import tracemalloc

import numpy as np

from .timing import at_least, parser

CPU_T = (256, 512, 1024, 2048)
GPU_T = (512, 1024, 2048, 4096)


def flops(n, t, d, causal):
    """(forward, backward) floating-point operations of attention over n heads of length t."""
    fwd = 4 * n * t * t * d * (0.5 if causal else 1.0)
    return fwd, 2.5 * fwd


# ---- CPU: tinyattn's NumPy backend, composite vs flash --------------------------------------

def cpu_step(impl, arrays, causal):
    """One forward + backward through tinyattn's autograd; returns the output for checks."""
    import tinyattn
    import tinyattn.functional as F

    q, k, v = (tinyattn.tensor(a, requires_grad=True, backend="numpy") for a in arrays)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, impl=impl)
    out.sum().backward()
    return out.numpy(), q.grad.numpy()


def cpu_peak_bytes(impl, arrays, causal):
    """Peak bytes tracemalloc sees during one forward + backward."""
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        cpu_step(impl, arrays, causal)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def cpu_case(t, batch, heads, d, repeats, causal, seed=0):
    """({impl: [seconds per round]}, {impl: peak bytes}) of composite and flash at length t,
    after checking that the two paths agree; rounds alternate which one goes first."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((batch, heads, t, d)).astype(np.float32) for _ in range(3)]
    out_c, gq_c = cpu_step("composite", arrays, causal)
    out_f, gq_f = cpu_step("flash", arrays, causal)  # the two paths must agree first
    np.testing.assert_allclose(out_f, out_c, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(gq_f, gq_c, rtol=1e-3, atol=1e-4)
    times = {"composite": [], "flash": []}
    for r in range(repeats):
        for impl in (("composite", "flash") if r % 2 == 0 else ("flash", "composite")):
            start = time.perf_counter()
            cpu_step(impl, arrays, causal)
            times[impl].append(time.perf_counter() - start)
    return times, {impl: cpu_peak_bytes(impl, arrays, causal) for impl in times}


def run_cpu(ts, batch, heads, d, repeats, causal):
    print(f"numpy backend, float32, B={batch} H={heads} d={d}, causal={causal}, forward + "
          f"backward, medians of {repeats}")
    print(f"{'T':>6} {'impl':<10} {'ms':>9} {'GFLOP/s':>8} {'peak MiB':>9} "
          f"{'flash / composite':>26}")
    rows = []
    for t in ts:
        times, peak = cpu_case(t, batch, heads, d, repeats, causal)
        total = sum(flops(batch * heads, t, d, causal))
        med = {impl: statistics.median(ts_) for impl, ts_ in times.items()}
        for impl in ("composite", "flash"):
            rel = (f"{med[impl] / med['composite']:.2f}x time, "
                   f"{peak[impl] / peak['composite']:.2f}x mem") if impl == "flash" else ""
            print(f"{t:>6} {impl:<10} {1e3 * med[impl]:9.1f} {total / med[impl] / 1e9:8.2f} "
                  f"{peak[impl] / 2**20:9.1f} {rel:>26}")
            rows.append(dict(t=t, impl=impl, seconds=med[impl], peak_bytes=peak[impl]))
    return rows


# ---- GPU: the flash kernels vs the CuPy composed path vs torch --------------------------------

def composed_forward(cp, be, q, k, v, scale):
    s = cp.matmul(q, cp.swapaxes(k, -1, -2))
    p = be.scaled_masked_softmax(s, None, scale=scale, causal=True)
    return cp.matmul(p, v), p


def composed_backward(cp, be, q, k, v, p, g, scale):
    gv = cp.matmul(cp.swapaxes(p, -1, -2), g)
    gp = cp.matmul(g, cp.swapaxes(v, -1, -2))
    gs = be.scaled_masked_softmax_backward(p, gp, scale=scale, causal=True)
    return cp.matmul(gs, k), cp.matmul(cp.swapaxes(gs, -1, -2), q), gv


def run_gpu(ts, batch, heads, d, repeats):
    from .softmax import gpu_or_reason, torch_cuda

    cp, be = gpu_or_reason()
    if cp is None:
        print(f"tinyattn bench attention --backend cupy needs a GPU: {be}", file=sys.stderr)
        return None
    torch = torch_cuda()
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    print(f"device: {name}; float32, causal, B={batch} H={heads} d={d}; torch "
          f"{'yes (TF32 off)' if torch else 'absent'}; medians of {repeats}")
    print(f"{'T':>6} {'contender':<16} {'fwd ms':>8} {'fwd TF/s':>9} {'f+b ms':>8} "
          f"{'bwd TF/s':>9} {'f+b vs kernel':>14}")
    rng = cp.random.default_rng(0)
    rows = []
    for t in ts:
        rows += gpu_case(cp, be, torch, rng, t, batch, heads, d, repeats)
        cp.get_default_memory_pool().free_all_blocks()
    print("ms: GPU time of one call (10 queued back to back per round). 'f+b vs kernel': "
          "forward + backward time over the flash kernel's (>1: kernel faster). TF/s: causal "
          "flops (half the square) per second.")
    return rows


def gpu_case(cp, be, torch, rng, t, batch, heads, d, repeats):
    """Time the contenders at one sequence length; print and return their rows."""
    from .softmax import time_interleaved

    scale = 1 / math.sqrt(d)
    q, k, v, g = (rng.standard_normal((batch, heads, t, d), dtype=cp.float32) for _ in range(4))

    def kernel_fb():
        out, lse = be.attention_forward(q, k, v, None, scale, True)
        return be.attention_backward(q, k, v, out, lse, g, None, scale, True)

    def composed_fb():
        out, p = composed_forward(cp, be, q, k, v, scale)
        return composed_backward(cp, be, q, k, v, p, g, scale)

    fwd = {"flash kernel": lambda: be.attention_forward(q, k, v, None, scale, True),
           "cupy composed": lambda: composed_forward(cp, be, q, k, v, scale)}
    both = {"flash kernel": kernel_fb, "cupy composed": composed_fb}
    if torch is not None:
        tq, tk, tv, tg = (torch.from_dlpack(a) for a in (q, k, v, g))
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def torch_fb():
            qq, kk, vv = (a.detach().requires_grad_() for a in (tq, tk, tv))
            sdpa(qq, kk, vv, is_causal=True).backward(tg)

        fwd["torch sdpa"] = lambda: sdpa(tq, tk, tv, is_causal=True)
        both["torch sdpa"] = torch_fb
    t_fwd = time_interleaved(cp, fwd, repeats)
    t_both = time_interleaved(cp, both, repeats)
    f_fwd, f_bwd = flops(batch * heads, t, d, causal=True)
    rows = []
    for who in fwd:
        bwd_s = max(t_both[who] - t_fwd[who], 1e-6) / 1e3
        rel = "" if who == "flash kernel" else f"{t_both[who] / t_both['flash kernel']:.2f}x"
        print(f"{t:>6} {who:<16} {t_fwd[who]:8.3f} {f_fwd / t_fwd[who] / 1e9:9.2f} "
              f"{t_both[who]:8.3f} {f_bwd / bwd_s / 1e12:9.2f} {rel:>14}")
        rows.append(dict(t=t, contender=who, forward_ms=t_fwd[who], step_ms=t_both[who]))
    return rows


def _parser():
    ap = parser("attention", __doc__)
    ap.add_argument("--backend", choices=["numpy", "cupy"], default="numpy")
    ap.add_argument("--quick", action="store_true", help="small sizes, 2 repeats (seconds)")
    ap.add_argument("--t", type=at_least(1), nargs="+", default=None, help="sequence lengths")
    ap.add_argument("--batch", type=at_least(1), default=None)
    ap.add_argument("--heads", type=at_least(1), default=None)
    ap.add_argument("--d", type=at_least(1), default=64,
                    help="head dim (kernels: 16, 32, 64, 128)")
    ap.add_argument("--repeats", type=at_least(1), default=None)
    ap.add_argument("--no-causal", action="store_true", help="CPU only: full attention")
    return ap


def main(argv=None):
    args = _parser().parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 5)
    if args.backend == "numpy":
        return _main_cpu(args, repeats)
    ts = args.t or ((256, 512) if args.quick else GPU_T)
    rows = run_gpu(ts, args.batch or 4, args.heads or 16, args.d, repeats)
    return 2 if rows is None else 0


def _main_cpu(args, repeats):
    ts = args.t or ((64, 128) if args.quick else CPU_T)
    run_cpu(ts, args.batch or 1, args.heads or (2 if args.quick else 4),
            32 if args.quick and args.d == 64 else args.d, repeats, not args.no_causal)
    return 0


if __name__ == "__main__":
    sys.exit(main())
