"""The engine's cost per op: a chain of tiny elementwise ops, forward and backward.

On arrays of 8 numbers the array work is nothing, so the time per op is the bookkeeping: for
tinyattn the Tensor, `apply`, the Node and the backward walk; for PyTorch its eager dispatcher
and autograd; for NumPy (the floor) one ufunc call forward and one backward, written by hand.
The chain cycles through x * c, x + c and tanh(x); every implementation computes the same
value and the same gradient (checked before timing).

    python benchmarks/overhead.py [--ops 2000] [--repeats 15]
    tinyattn bench overhead [same options]
"""

import os
import statistics
import sys

import numpy as np

from .timing import at_least, parser, time_rounds

C_MUL, C_ADD = np.float32(0.999), np.float32(0.001)


def numpy_chain(x0, n_ops):
    """(value, d value / d x0) with the backward pass written out by hand."""
    xs, x = [], x0
    for i in range(n_ops):
        xs.append(x)
        kind = i % 3
        x = x * C_MUL if kind == 0 else x + C_ADD if kind == 1 else np.tanh(x)
    out = x
    g = np.ones_like(x0)
    for i in reversed(range(n_ops)):
        kind = i % 3
        if kind == 0:
            g = g * C_MUL
        elif kind == 2:
            t = np.tanh(xs[i])
            g = g * (1 - t * t)
    return out, g


def tinyattn_chain(x0, n_ops):
    import tinyattn as ta

    x0 = ta.tensor(x0, requires_grad=True)
    x = x0
    for i in range(n_ops):
        kind = i % 3
        x = x * float(C_MUL) if kind == 0 else x + float(C_ADD) if kind == 1 else x.tanh()
    x.backward(ta.ones_like(x))
    return x.numpy(), x0.grad.numpy()


def torch_chain(x0, n_ops):
    import torch

    x0 = torch.tensor(x0, requires_grad=True)
    x = x0
    for i in range(n_ops):
        kind = i % 3
        x = x * float(C_MUL) if kind == 0 else x + float(C_ADD) if kind == 1 else x.tanh()
    x.backward(torch.ones_like(x))
    return x.detach().numpy(), x0.grad.numpy()


def implementations(n_ops, with_torch=True):
    x0 = np.linspace(-1, 1, 8, dtype=np.float32)
    impls = {"numpy": lambda: numpy_chain(x0, n_ops), "tinyattn": lambda: tinyattn_chain(x0, n_ops)}
    if with_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
        else:
            impls["torch"] = lambda: torch_chain(x0, n_ops)
    return impls


def check(n_ops=300, with_torch=True):
    """Assert that every implementation gives the NumPy floor's value and gradient."""
    impls = implementations(n_ops, with_torch)
    want_y, want_g = impls["numpy"]()
    for name, run in impls.items():
        y, g = run()
        np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6, err_msg=f"{name} value")
        np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=1e-6, err_msg=f"{name} gradient")
    return sorted(impls)


def main(argv=None):
    ap = parser("overhead", __doc__)
    ap.add_argument("--ops", type=at_least(1), default=2000)
    ap.add_argument("--repeats", type=at_least(1), default=15)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    # Between calls, PyTorch's OpenMP threads spin by default, holding the cores that NumPy's
    # BLAS threads need next (and the reverse): on a 2-core machine that distorts an interleaved
    # comparison by up to 2x. Passive waiting gives each library the machine on its turn.
    # (It must be set before torch is imported; a caller's own setting wins.)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    check(with_torch=not args.no_torch)
    times = time_rounds(implementations(args.ops, not args.no_torch), args.repeats, warmup=1)
    print(f"a chain of {args.ops} tiny ops (x*c, x+c, tanh on 8 floats), forward + backward")
    print(f"{'impl':<9} {'µs per op':>9} {'vs numpy':>9}")
    floor = statistics.median(times["numpy"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<9} {med / args.ops * 1e6:>9.2f} {med / floor:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
