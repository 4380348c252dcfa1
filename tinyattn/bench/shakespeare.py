"""The Shakespeare preset trained in tinyattn and in PyTorch eager: same model, same batches.

Both start from the same weights (tinyattn's initialisation, copied into a PyTorch twin of
TinyTransformer) and take the same steps: the preset's batches, AdamW with the same groups,
warm-up then cosine decay, gradient clipping. `check` asserts that the two loss curves agree
(float32: within 1e-4 relative over the first steps); `main` trains K steps of each,
interleaved in one process, and prints the median ms/step of each, their ratio and each one's
peak resident memory (RSS, measured in a fresh process per library).

    python benchmarks/shakespeare.py [--steps 100] [--memory-steps 20] [--json FILE]
    tinyattn bench shakespeare [same options]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

from ..files import atomic_write
from .timing import at_least, parser

# ---- tinyattn: the preset as `tinyattn train --task shakespeare` builds it -----------------------


def preset_config(**overrides):
    from ..tasks import config

    return config("shakespeare", **overrides)


class TinyattnRun:
    """The preset's task, model, optimizer and schedule; `step(i)` trains on batch i."""

    def __init__(self, cfg):
        from ..train import build

        self.cfg = cfg
        self.task, self.model, self.opt, self.sched = build(cfg)

    def batch(self, i):
        """Step i's batch, as the training loop draws it: (x, y), each (B, T)."""
        return self.task.batch(np.random.default_rng([self.cfg.seed, 0, i]), self.cfg.batch_size)

    def step(self, x, y):
        from .. import functional as F
        from ..optim import clip_grad_norm
        from ..tensor import tensor

        logits = self.model(tensor(x))  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tensor(y.reshape(-1)))
        self.opt.zero_grad()
        loss.backward()
        clip_grad_norm(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        self.sched.step()
        return loss.item()


# ---- PyTorch: the same model, written with torch.nn ----------------------------------------------


def torch_model(mc):
    """A torch.nn twin of TinyTransformer for the model config `mc` (a TransformerConfig), with
    the same parameter names, so that tinyattn's state dict loads into it."""
    import torch
    from torch import nn

    def norm(c):
        return nn.LayerNorm(c) if mc.norm == "layer" else nn.RMSNorm(c, eps=1e-5)

    class Attention(nn.Module):
        def __init__(self, c, h):
            super().__init__()
            self.h = h
            self.qkv = nn.Linear(c, 3 * c, bias=mc.bias)
            self.proj = nn.Linear(c, c, bias=mc.bias)
            if mc.qk_norm:
                self.q_norm = nn.RMSNorm(c // h, eps=1e-5)
                self.k_norm = nn.RMSNorm(c // h, eps=1e-5)
            if mc.rotary:
                d = c // h
                inv = 1.0 / 10000.0 ** (np.arange(0, d, 2, dtype=np.float64) / d)
                angles = np.outer(np.arange(mc.max_len, dtype=np.float64), inv)  # (T, D/2)
                self.register_buffer("cos", torch.tensor(np.cos(angles), dtype=torch.float32),
                                     persistent=False)
                self.register_buffer("sin", torch.tensor(np.sin(angles), dtype=torch.float32),
                                     persistent=False)

        def rotate(self, x):  # x (B, H, T, D): rotate-half pairs (i, i + D/2)
            T, half = x.shape[-2], x.shape[-1] // 2  # noqa: N806
            cos, sin = self.cos[:T], self.sin[:T]  # (T, D/2)
            a, b = x[..., :half], x[..., half:]
            return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

        def forward(self, x):
            B, T, C = x.shape  # noqa: N806
            q, k, v = self.qkv(x).reshape(B, T, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4)
            if mc.qk_norm:
                q, k = self.q_norm(q), self.k_norm(k)  # (B, H, T, D)
            if mc.rotary:
                q, k = self.rotate(q), self.rotate(k)  # (B, H, T, D)
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(B, T, C))  # (B, T, C)

    class MLP(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.fc = nn.Linear(c, 4 * c, bias=mc.bias)
            self.proj = nn.Linear(4 * c, c, bias=mc.bias)

        def forward(self, x):
            return self.proj(nn.functional.gelu(self.fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self, c, h):
            super().__init__()
            self.ln1, self.attn = norm(c), Attention(c, h)
            self.ln2, self.mlp = norm(c), MLP(c)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            c = mc.d_model
            self.wte = nn.Embedding(mc.vocab_size, c)
            self.wpe = None if mc.rotary else nn.Embedding(mc.max_len, c)
            self.blocks = nn.ModuleList(Block(c, mc.n_heads) for _ in range(mc.n_layers))
            self.ln_f = norm(c)
            self.lm_head = nn.Linear(c, mc.vocab_size, bias=False)
            if mc.tie:
                self.lm_head.weight = self.wte.weight

        def forward(self, idx):
            x = self.wte(idx)  # (B, T, C)
            if self.wpe is not None:
                x = x + self.wpe.weight[: idx.shape[1]]
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.ln_f(x))  # (B, T, V)

    return GPT()


class TorchRun:
    """The same model, optimizer groups, schedule and clipping in PyTorch eager, starting from
    the weights of a TinyattnRun (copied, so each trains its own)."""

    def __init__(self, ours):
        import torch

        self.cfg, self.sched = ours.cfg, ours.sched  # lr_at(i) only: the schedule's formula
        self.model = torch_model(ours.model.config)
        state = {k: torch.tensor(v.numpy().copy()) for k, v in ours.model.state_dict().items()}
        self.model.load_state_dict(state, strict=True)
        groups = ([], [])
        for name, p in self.model.named_parameters():
            groups[not (p.ndim == 2 and "wpe" not in name)].append(p)
        self.opt = torch.optim.AdamW(
            [{"params": groups[0]}, {"params": groups[1], "weight_decay": 0.0}],
            lr=self.sched.lr_at(0), betas=(0.9, self.cfg.beta2),
            weight_decay=self.cfg.weight_decay)
        self.steps = 0

    def step(self, x, y):
        import torch

        for group in self.opt.param_groups:
            group["lr"] = self.sched.lr_at(self.steps)
        logits = self.model(torch.from_numpy(x))  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 torch.from_numpy(y).reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        self.steps += 1
        return loss.item()


# ---- agreement, timing, memory -------------------------------------------------------------------


def curves(steps=20, **overrides):
    """The loss of every step of tinyattn and of PyTorch on the same batches: two lists."""
    ours = TinyattnRun(preset_config(**overrides))
    theirs = TorchRun(ours)
    a, b = [], []
    for i in range(steps):
        x, y = ours.batch(i)
        a.append(ours.step(x, y))
        b.append(theirs.step(x, y))
    return a, b


def check(steps=20, rtol=1e-4, **overrides):
    """Assert that tinyattn's and PyTorch's losses agree within rtol for `steps` steps; returns
    the largest relative difference. `overrides` change the preset (a smaller model)."""
    a, b = curves(steps, **overrides)
    worst = max(abs(p - q) / abs(q) for p, q in zip(a, b, strict=True))
    assert worst <= rtol, f"losses differ by {worst:.2e} relative (> {rtol}): {a} vs {b}"
    return worst


def time_interleaved(steps, warmup=3, **overrides):
    """{name: [seconds per step]} and the loss curves, training both in turn, step by step."""
    ours = TinyattnRun(preset_config(**overrides))
    impls = {"tinyattn": ours}
    try:
        impls["torch"] = TorchRun(ours)
    except ImportError:
        pass
    times = {name: [] for name in impls}
    losses = {name: [] for name in impls}
    for i in range(warmup + steps):
        x, y = ours.batch(i)
        for name, run in impls.items():
            t = time.perf_counter()
            loss = run.step(x, y)
            if i >= warmup:
                times[name].append(time.perf_counter() - t)
            losses[name].append(loss)
    return times, losses


def peak_rss(name, steps, overrides):
    """Peak resident memory (bytes) of a fresh process that trains `steps` steps in one
    library only ("tinyattn" or "torch")."""
    # VmHWM, the high-water mark of this process's own memory (Linux): getrusage's ru_maxrss
    # would count the parent's memory at fork time too
    code = ("import json, sys; from tinyattn.bench.shakespeare import train_only, vm_hwm; "
            f"train_only({name!r}, {steps}, json.loads(sys.argv[1])); print(vm_hwm())")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(overrides)], check=True,
                         capture_output=True, text=True, env=dict(os.environ))
    return int(out.stdout.split()[-1])


def vm_hwm():
    """Peak resident memory of this process in bytes (Linux /proc; elsewhere ru_maxrss)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    import resource

    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes, Linux KiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def train_only(name, steps, overrides):
    """Train `steps` steps in one library (the subprocess of peak_rss)."""
    ours = TinyattnRun(preset_config(**overrides))
    run = ours if name == "tinyattn" else TorchRun(ours)
    if name == "torch":
        del ours.model, ours.opt  # only the torch model trains in this process
    for i in range(steps):
        run.step(*ours.batch(i))


def measure(steps, memory_steps=20, check_steps=20, **overrides):
    """Train `steps` steps of each library interleaved (after 3 warm-up steps) and measure each
    one's peak RSS in a fresh process: a dict of the results (what --json writes)."""
    from .timing import paired_ratios, quartiles

    times, losses = time_interleaved(steps, **overrides)
    result = {"steps": steps}
    for name, ts in times.items():
        q1, med, q3 = quartiles(ts)
        result[f"{name}_ms_per_step"] = med * 1e3
        result[f"{name}_ms_q1_q3"] = [q1 * 1e3, q3 * 1e3]
    if "torch" in times:
        # the median of the step-by-step ratios: each pair ran at the same moment
        result["ratio"] = quartiles(paired_ratios(times, "tinyattn", "torch"))[1]
        n = min(check_steps, steps)
        result["max_rel_loss_diff"] = max(abs(p - q) / abs(q) for p, q in
                                          zip(losses["tinyattn"][:n], losses["torch"][:n],
                                              strict=True))
    result["final_loss"] = {name: ls[-1] for name, ls in losses.items()}
    if memory_steps:
        for name in times:
            result[f"{name}_peak_rss_mb"] = peak_rss(name, memory_steps, overrides) / 2**20
    return result


def main(argv=None):
    ap = parser("shakespeare", __doc__)
    ap.add_argument("--steps", type=at_least(1), default=100, help="steps timed (K)")
    ap.add_argument("--memory-steps", type=at_least(0), default=20,
                    help="steps of each library's memory run (0: skip)")
    ap.add_argument("--json", default=None, type=results_file,
                    help="write the results to this file (replaced whole, at the end)")
    args = ap.parse_args(argv)
    # between calls PyTorch's OpenMP threads would spin, holding the cores NumPy needs next
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    cfg = preset_config()
    print(f"shakespeare preset: {cfg.layers} layers, {cfg.heads} heads, {cfg.d_model} wide, "
          f"context {cfg.seq_len}, batch {cfg.batch_size}, rotary={cfg.rotary}, "
          f"norm={cfg.norm}, qk_norm={cfg.qk_norm}, tie={cfg.tie}; {args.steps} steps each, "
          "interleaved")
    result = measure(args.steps, args.memory_steps)
    for line in summary(result):
        print(line)
    if args.json:  # (a failure midway keeps the old file)
        atomic_write(args.json, lambda f: json.dump(result, f, indent=2), "w")
    return 0


def results_file(path):
    """An argparse type: --json's path, checked before the benchmark runs (minutes before the
    results are written): a file, in a folder that exists and takes new files."""
    if path == "":  # (else the benchmark runs for minutes and writes nothing)
        raise argparse.ArgumentTypeError("an empty string names no file")
    if path.endswith(os.sep) or os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path} is a folder, not a file")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"no folder {folder} for the results")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write in folder {folder}: no permission")
    return path


def summary(result):
    """The results as lines of text."""
    names = [n for n in ("tinyattn", "torch") if f"{n}_ms_per_step" in result]
    lines = []
    for name in names:
        rss = result.get(f"{name}_peak_rss_mb", math.nan)
        lines.append(f"{name:<9} {result[f'{name}_ms_per_step']:8.1f} ms/step (median)   "
                     f"peak RSS {rss:6.0f} MB   loss after {result['steps']} steps "
                     f"{result['final_loss'][name]:.4f}")
    if "ratio" in result:
        lines.append(f"ratio tinyattn/torch {result['ratio']:.2f}x (median of the step-by-step "
                     f"ratios); losses agree within {result['max_rel_loss_diff']:.1e} relative")
    return lines


if __name__ == "__main__":
    sys.exit(main())
