"""The fused softmax kernels on the GPU against the CuPy composition and torch.softmax.

For each shape (a square 8192 x 8192 matrix and attention scores B·H x T x T for T = 256..4096,
all far larger than L2 except with --quick) and each variant (forward, backward, causal scaled
forward and backward), it times the contenders interleaved in one process with CUDA events,
10 calls queued back to back per round: the kernel (CupyBackend, 16-byte vector loads), the
same kernel held to scalar loads, the naive CuPy composition (max, exp, sum, divide; masked
with `where`), and PyTorch's CUDA softmax when torch sees the GPU (causal: masked_fill +
softmax). It prints medians of the GPU time per call and of Python's time per call, the
achieved bandwidth (the bytes a fused kernel must move: forward 2 accesses per element,
backward 3; causal rows read only the lower triangle and write the whole row), that bandwidth
as a share of the device copy bandwidth measured in the same run (and of the theoretical peak
when the device reports it), and the ratios kernel / composition and kernel / torch.

    python benchmarks/softmax_gpu.py [--quick] [--dtype float32|float16] [--repeats 20]
    tinyattn bench softmax [same options]
"""

import statistics
import sys
import time

import numpy as np

from .timing import at_least, parser

ELEMENTS = 2**26  # 256 MiB of float32 per operand: far beyond any L2
ATTENTION_T = (256, 512, 1024, 2048, 4096)


def gpu_or_reason():
    """(cupy, backend) or (None, why not)."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed (pip install 'tinyattn[cuda12]')"
    try:
        if not cupy.is_available():
            return None, "CuPy sees no GPU"
    except Exception as e:  # a CUDA driver error
        return None, f"CuPy cannot use a GPU: {e}"
    from ..backends import backend

    return cupy, backend("cupy")


def torch_cuda():
    """torch when it is installed and sees the GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


BATCH = 10  # calls queued back to back in each timed round


def time_interleaved(cp, fns, repeats, warmup=3, batch=None, host=None):
    """Median milliseconds of one call of each callable on the GPU, timed with CUDA events in
    round-robin order (the starting contender rotates every round so none always runs on a warm
    cache). Each round times `batch` calls queued back to back, so the GPU is not left waiting
    for Python between them and the time is the GPU's (unless the host is the slower one: pass
    a dict as `host` to get each callable's median host milliseconds per call as well)."""
    names = list(fns)
    batch = batch or BATCH
    for _ in range(warmup):
        for name in names:
            fns[name]()
    cp.cuda.Device().synchronize()
    times = {name: [] for name in names}
    host_times = {name: [] for name in names}
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[name]
            start.record()
            t0 = time.perf_counter()
            for _ in range(batch):
                fn()
            host_times[name].append((time.perf_counter() - t0) * 1e3 / batch)
            end.record()
            end.synchronize()
            times[name].append(cp.cuda.get_elapsed_time(start, end) / batch)
    if host is not None:
        host.update({name: statistics.median(t) for name, t in host_times.items()})
    return {name: statistics.median(t) for name, t in times.items()}


def copy_bandwidth(cp, nbytes, repeats):
    """GB/s of a device-to-device copy of nbytes (read + write), measured now."""
    src = cp.ones(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    ms = time_interleaved(cp, {"copy": lambda: cp.copyto(dst, src)}, repeats)["copy"]
    return 2 * nbytes / ms / 1e6


def bytes_moved(x, backward, causal):
    """The least bytes a softmax over the last axis of x must move: forward reads x and writes
    y, backward reads y and g and writes gx. Causal rows (query i = row % T) read only their
    first i + 1 columns, and every row is written whole (zeros above the diagonal)."""
    n_q, n = (x.shape[-2], x.shape[-1]) if x.ndim >= 2 else (1, x.shape[-1])
    read = 1.0
    if causal:
        read = sum(min(n, i + 1) for i in range(n_q)) / (n_q * n)
    reads = 2 if backward else 1
    return int((reads * read + 1) * x.size * x.itemsize)


def peak_bandwidth(cp):
    """Theoretical DRAM bandwidth in GB/s (2 transfers per memory clock), or None if the
    device does not say. Attributes 36 and 37 are cudaDevAttrMemoryClockRate (kHz) and
    cudaDevAttrGlobalMemoryBusWidth (bits)."""
    try:
        rt = cp.cuda.runtime
        device = cp.cuda.Device().id
        clock_khz = rt.deviceGetAttribute(36, device)
        bus_bits = rt.deviceGetAttribute(37, device)
    except Exception:
        return None
    return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9 if clock_khz and bus_bits else None


def composite_softmax(cp, x):
    m = x.max(axis=-1, keepdims=True)
    e = cp.exp(x - m)
    e /= e.sum(axis=-1, keepdims=True)
    return e


def composite_backward(y, g, scale=1.0):
    return scale * (y * (g - (g * y).sum(axis=-1, keepdims=True)))


def scalar_loads(be, fn):
    """fn run with the softmax kernels held to scalar loads (CupyBackend.vector_loads off)."""
    def run():
        be.vector_loads = False
        try:
            return fn()
        finally:
            be.vector_loads = True
    return run


def contenders(cp, be, torch, x, g, y, causal, scale):
    """{variant: {contender: callable}} for one input."""
    t = x.shape[-1]
    keep = cp.tri(x.shape[-2], t, dtype=bool)  # j <= i
    neg_inf = cp.asarray(-np.inf, dtype=x.dtype)
    out = {}
    if not causal:
        out["forward"] = {"kernel": lambda: be.softmax(x),
                          "kernel scalar": scalar_loads(be, lambda: be.softmax(x)),
                          "cupy composite": lambda: composite_softmax(cp, x)}
        out["backward"] = {"kernel": lambda: be.softmax_backward(y, g),
                           "kernel scalar": scalar_loads(be, lambda: be.softmax_backward(y, g)),
                           "cupy composite": lambda: composite_backward(y, g)}
    else:
        def forward():
            return be.scaled_masked_softmax(x, None, scale=scale, causal=True)

        def backward():
            return be.scaled_masked_softmax_backward(y, g, scale=scale, causal=True)

        out["causal forward"] = {
            "kernel": forward, "kernel scalar": scalar_loads(be, forward),
            "cupy composite": lambda: composite_softmax(cp, cp.where(keep, x * scale, neg_inf))}
        out["causal backward"] = {
            "kernel": backward, "kernel scalar": scalar_loads(be, backward),
            "cupy composite": lambda: composite_backward(y, g, scale)}
    if torch is not None:
        tx, tg, ty = (torch.from_dlpack(a) for a in (x, g, y))
        tkeep = torch.from_dlpack(keep)
        if not causal:
            out["forward"]["torch"] = lambda: torch.softmax(tx, -1)
            out["backward"]["torch"] = lambda: torch._softmax_backward_data(tg, ty, -1, ty.dtype)
        else:
            out["causal forward"]["torch"] = lambda: torch.softmax(
                (tx * scale).masked_fill(~tkeep, float("-inf")), -1)
            out["causal backward"]["torch"] = lambda: torch._softmax_backward_data(
                tg, ty, -1, ty.dtype) * scale
    return out


def shapes(quick):
    if quick:
        return [("1024 x 1024", (1024, 1024)), ("attention T=256", (16, 256, 256))]
    out = [("8192 x 8192", (8192, 8192))]
    out += [(f"attention T={t}", (max(1, ELEMENTS // (t * t)), t, t)) for t in ATTENTION_T]
    return out


def main(argv=None):
    ap = parser("softmax", __doc__)
    ap.add_argument("--quick", action="store_true", help="small shapes, few repeats")
    ap.add_argument("--dtype", choices=["float32", "float16"], default="float32")
    ap.add_argument("--repeats", type=at_least(1), default=None,
                    help="timed rounds (default 20)")
    args = ap.parse_args(argv)
    cp, be = gpu_or_reason()
    if cp is None:
        print(f"tinyattn bench softmax needs a GPU: {be}", file=sys.stderr)
        return 2
    repeats = args.repeats or (3 if args.quick else 20)
    torch = torch_cuda()
    dtype = np.dtype(args.dtype)
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    copy_gbs = copy_bandwidth(cp, 2**28 if not args.quick else 2**24, repeats)
    peak = peak_bandwidth(cp)
    print(f"device: {name}; copy bandwidth {copy_gbs:.0f} GB/s measured"
          + (f", {peak:.0f} GB/s theoretical" if peak else "")
          + f"; dtype {dtype}; torch {'yes' if torch else 'absent'}; medians of {repeats}")
    print(f"{'shape':<20} {'variant':<16} {'contender':<15} {'ms':>8} {'GB/s':>7} "
          f"{'%copy':>6} {'%peak':>6} {'kernel x':>9} {'host ms':>8}")
    rng = cp.random.default_rng(0)
    for label, shape in shapes(args.quick):
        x = (rng.standard_normal(shape, dtype=cp.float32) * 3).astype(dtype)
        g = rng.standard_normal(shape, dtype=cp.float32).astype(dtype)
        y = be.softmax(x)
        y_causal = be.scaled_masked_softmax(x, None, scale=0.125, causal=True)
        for causal, yy in ((False, y), (True, y_causal)):
            for variant, fns in contenders(cp, be, torch, x, g, yy, causal, 0.125).items():
                host = {}
                ms = time_interleaved(cp, fns, repeats, host=host)
                nbytes = bytes_moved(x, "backward" in variant, causal)
                for who, t in ms.items():
                    gbs = nbytes / t / 1e6
                    ratio = "" if who == "kernel" else f"{t / ms['kernel']:.2f}x"
                    print(f"{label:<20} {variant:<16} {who:<15} {t:8.3f} {gbs:7.0f} "
                          f"{100 * gbs / copy_gbs:6.1f} "
                          f"{100 * gbs / peak if peak else float('nan'):6.1f} {ratio:>9} "
                          f"{host[who]:8.3f}")
        del x, g, y, y_causal
        cp.get_default_memory_pool().free_all_blocks()
    print("ms: GPU time of one call (10 queued back to back per round); 'host ms': Python's "
          "time per call, which sets the pace when it is the larger. 'kernel scalar': the same "
          "kernels held to scalar loads (TINYATTN_CUPY_VECTORS=0). "
          "'kernel x': how many times longer the contender takes than the kernel (>1: kernel "
          "faster). GB/s: the bytes a fused kernel must move (forward: read x, write y; "
          "backward: read y and g, write gx; causal: only the lower triangle is read, the whole "
          "matrix written) over the time, the same bytes for every contender.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
