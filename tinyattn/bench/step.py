"""One training step (forward + backward, no optimizer) of a one-block transformer LM.

(1) tinyattn's TinyTransformer, eagerly and as a captured step (ta.capture: recorded on the first
calls, then the arrays alone replayed), (2) the floor: a hand-written NumPy forward and backward
with no graph at all, which lives in benchmarks/numpy_floor.py (a reference, not part of the
package: benchmarks/step.py passes it in), (3) PyTorch eager when it is installed. All start
from the same weights; `check` asserts they agree on the loss and every gradient, then `main`
times them interleaved in one process and prints medians and ratios.

    python benchmarks/step.py [--sizes tiny small medium] [--repeats 30]   (all three)
    tinyattn bench step [same options]                                      (tinyattn, torch)
"""

import os
import statistics
import sys
import tracemalloc

import numpy as np

from .timing import at_least, parser, time_rounds

SIZES = {  # (vocab V, batch B, time T, channels C, heads H)
    "tiny": (64, 16, 32, 64, 4),
    "small": (128, 32, 64, 128, 4),
    "medium": (256, 32, 128, 256, 8),
}

# ---- the shared weights --------------------------------------------------------------------------


def make_params(V, T, C, seed=0):  # noqa: N803
    """GPT-2-style weights in tinyattn's layout (Linear weights are (out, in)); head tied to wte."""
    rng = np.random.default_rng(seed)

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def small(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    return {
        "wte.weight": normal(V, C), "wpe.weight": normal(T, C),
        "blocks.0.ln1.weight": 1 + small(C), "blocks.0.ln1.bias": small(C),
        "blocks.0.attn.qkv.weight": normal(3 * C, C), "blocks.0.attn.qkv.bias": small(3 * C),
        "blocks.0.attn.proj.weight": normal(C, C), "blocks.0.attn.proj.bias": small(C),
        "blocks.0.ln2.weight": 1 + small(C), "blocks.0.ln2.bias": small(C),
        "blocks.0.mlp.fc.weight": normal(4 * C, C), "blocks.0.mlp.fc.bias": small(4 * C),
        "blocks.0.mlp.proj.weight": normal(C, 4 * C), "blocks.0.mlp.proj.bias": small(C),
        "ln_f.weight": 1 + small(C), "ln_f.bias": small(C),
    }


def make_batch(V, B, T, seed=1):  # noqa: N803
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


# ---- (1) tinyattn --------------------------------------------------------------------------------


def tinyattn_setup(p, H):  # noqa: N803
    import tinyattn as ta

    V, C = p["wte.weight"].shape  # noqa: N806
    T = p["wpe.weight"].shape[0]  # noqa: N806
    model = ta.nn.TinyTransformer(V, C, H, 1, max_len=T)
    model.load_state_dict({**p, "lm_head.weight": p["wte.weight"]})
    return model


def tinyattn_step(model, idx, tgt):
    import tinyattn as ta
    import tinyattn.functional as F

    model.zero_grad()
    logits = model(ta.tensor(idx))  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ta.tensor(tgt.reshape(-1)))
    loss.backward()
    return loss.item(), {n: q.grad.numpy() for n, q in model.named_parameters()}


def captured_setup(model):
    """The same step through ta.capture: recorded on its first calls, then replayed as arrays."""
    import tinyattn as ta
    import tinyattn.functional as F

    def loss(x, y):
        logits = model(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y)

    return ta.capture(loss)


def captured_step(model, captured, idx, tgt):
    import tinyattn as ta

    model.zero_grad()
    loss = captured(ta.tensor(idx), ta.tensor(tgt.reshape(-1)))
    return loss.item(), {n: q.grad.numpy() for n, q in model.named_parameters()}


# ---- (3) PyTorch eager ---------------------------------------------------------------------------


def torch_setup(p, H):  # noqa: N803
    import torch

    return {n: torch.tensor(a, requires_grad=True) for n, a in p.items()}


def torch_step(tp, idx, tgt, H):  # noqa: N803
    import torch
    import torch.nn.functional as TF  # noqa: N812

    for t in tp.values():
        t.grad = None
    idx_t, tgt_t = torch.from_numpy(idx), torch.from_numpy(tgt)
    B, T = idx.shape  # noqa: N806
    C = tp["wte.weight"].shape[1]  # noqa: N806
    pre = "blocks.0."
    x = tp["wte.weight"][idx_t] + tp["wpe.weight"][:T]
    h = TF.layer_norm(x, (C,), tp[pre + "ln1.weight"], tp[pre + "ln1.bias"])
    qkv = TF.linear(h, tp[pre + "attn.qkv.weight"], tp[pre + "attn.qkv.bias"])
    q, k, v = qkv.reshape(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
    y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = y.transpose(1, 2).reshape(B, T, C)
    x = x + TF.linear(y, tp[pre + "attn.proj.weight"], tp[pre + "attn.proj.bias"])
    h = TF.layer_norm(x, (C,), tp[pre + "ln2.weight"], tp[pre + "ln2.bias"])
    h = TF.gelu(TF.linear(h, tp[pre + "mlp.fc.weight"], tp[pre + "mlp.fc.bias"]),
                approximate="tanh")
    x = x + TF.linear(h, tp[pre + "mlp.proj.weight"], tp[pre + "mlp.proj.bias"])
    h = TF.layer_norm(x, (C,), tp["ln_f.weight"], tp["ln_f.bias"])
    logits = h @ tp["wte.weight"].T
    loss = TF.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_t.reshape(-1))
    loss.backward()
    return loss.item(), {n: t.grad.numpy() for n, t in tp.items()}


# ---- agreement, timing, memory -------------------------------------------------------------------


def implementations(size, with_torch=True, floor=None):
    """{name: step()} for one size, all starting from the same weights and batch; "numpy" is
    floor(params, idx, tgt, H) when a floor is given."""
    V, B, T, C, H = SIZES[size]  # noqa: N806
    p = make_params(V, T, C)
    idx, tgt = make_batch(V, B, T)
    impls = {} if floor is None else {"numpy": lambda: floor(p, idx, tgt, H)}
    model = tinyattn_setup(p, H)
    impls["tinyattn"] = lambda: tinyattn_step(model, idx, tgt)
    twin = tinyattn_setup(p, H)  # a model of its own: the twin's grads are its own
    captured = captured_setup(twin)
    impls["captured"] = lambda: captured_step(twin, captured, idx, tgt)
    if with_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
        else:
            tp = torch_setup(p, H)
            impls["torch"] = lambda: torch_step(tp, idx, tgt, H)
    return impls


def check(size="tiny", with_torch=True, floor=None, rtol=2e-3, atol=2e-5):
    """Assert that every implementation gives the floor's loss and gradients (torch's without
    a floor) on its third call (the captured step replays from there); the names checked."""
    impls = implementations(size, with_torch, floor)
    ref_loss, ref_grads = next(iter(impls.values()))()
    for name, step in impls.items():
        for _ in range(3):
            loss, grads = step()
        assert abs(loss - ref_loss) <= 1e-4 * abs(ref_loss), (name, loss, ref_loss)
        assert set(grads) == set(ref_grads), (name, sorted(set(grads) ^ set(ref_grads)))
        for key, want in ref_grads.items():
            np.testing.assert_allclose(grads[key], want, rtol=rtol, atol=atol,
                                       err_msg=f"{name} {size} {key}")
            assert grads[key].dtype == np.float32, (name, key, grads[key].dtype)
    return sorted(impls)


def time_interleaved(impls, repeats, warmup=3):
    """Median seconds per call of each implementation, timed in turn round by round."""
    return {name: statistics.median(ts) for name, ts in time_rounds(impls, repeats, warmup).items()}


def peak_memory(step):
    tracemalloc.start()
    tracemalloc.reset_peak()
    step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main(argv=None, floor=None):
    ap = parser("step", __doc__)
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--repeats", type=at_least(1), default=30)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    # Between calls, PyTorch's OpenMP threads spin by default, holding the cores that NumPy's
    # BLAS threads need next (and the reverse): on a 2-core machine that distorts an interleaved
    # comparison by up to 2x. Passive waiting gives each library the machine on its turn.
    # (It must be set before torch is imported; a caller's own setting wins.)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch

        torch_note = f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    except ImportError:
        torch_note = "torch not installed"
    print(f"one training step (fwd + bwd), float32; numpy {np.__version__}; {torch_note}")
    if floor is None:
        print("(no NumPy floor: python benchmarks/step.py compares with it too)")
    print(f"{'size':<7} {'(V, B, T, C, H)':<22} {'impl':<9} {'median ms':>9} {'vs numpy':>9} "
          f"{'vs torch':>9} {'peak MB':>8}")
    for size in args.sizes:
        check(size, not args.no_torch, floor)
        impls = implementations(size, not args.no_torch, floor)
        medians = time_interleaved(impls, args.repeats)
        for name, seconds in medians.items():
            peak = peak_memory(impls[name]) / 1e6 if name != "torch" else float("nan")
            print(f"{size:<7} {str(SIZES[size]):<22} {name:<9} {seconds * 1e3:>9.2f} "
                  f"{_ratio(seconds, medians, 'numpy'):>9} {_ratio(seconds, medians, 'torch'):>9} "
                  f"{peak:>8.1f}")
    return 0


def _ratio(seconds, medians, to):
    return f"{seconds / medians[to]:.2f}x" if to in medians else "-"


if __name__ == "__main__":
    sys.exit(main())
