"""The main job: train a TinyTransformer on a task and write what it learned to a run folder.

`train(TrainConfig(...))` runs the loop (AdamW, cosine schedule with warm-up, gradient
clipping), evaluates on held-out problems, and writes metrics.jsonl, metrics.json,
checkpoint.npz, loss.png, attention.png and samples.txt. Every step's batch and dropout mask
come from (seed, step), so `resume=True` continues bit-for-bit as if never interrupted.
"""

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, fields

import numpy as np

from . import functional as F
from .autograd import no_grad
from .backends import use_backend
from .data import IGNORE, make_task
from .nn import TinyTransformer
from .optim import AdamW, CosineSchedule, clip_grad_norm
from .serialization import load, save
from .shakespeare import bits_per_char
from .tensor import manual_seed, tensor


@dataclass
class TrainConfig:
    task: str = "reverse"
    steps: int = 600
    batch_size: int = 64
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    dropout: float = 0.0
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup: int = 50
    grad_clip: float = 1.0
    seed: int = 0
    backend: str = "numpy"
    length: int | None = None  # digits per problem (toy tasks); each task has a default
    text: str | None = None  # a UTF-8 file for the text task (default: the bundled corpus)
    seq_len: int = 64  # characters per example (text task)
    eval_every: int = 100
    heldout_size: int = 512
    out: str | None = None  # the run folder; default runs/<task>
    # model and optimizer options (issue 20; tinyattn/tasks.py has each task's preset)
    beta2: float = 0.98  # AdamW's second-moment decay
    rotary: bool = False  # rotary position embeddings instead of a learned table
    norm: str = "layer"  # "layer" (LayerNorm) or "rms" (RMSNorm)
    tie: bool = True  # the LM head shares the token embedding's weight
    full_corpus: bool = False  # shakespeare/text: the whole corpus, not its first 1,115,394 chars

    def run_dir(self):
        return self.out or os.path.join("runs", self.task)


def build(cfg):
    """The task, model, optimizer and schedule a config describes (freshly initialised)."""
    task = make_task(cfg.task, text=cfg.text, length=cfg.length, seq_len=cfg.seq_len,
                     full_corpus=cfg.full_corpus)
    manual_seed(cfg.seed)
    with use_backend(cfg.backend):
        model = TinyTransformer(task.vocab_size, cfg.d_model, cfg.heads, cfg.layers,
                                max_len=task.seq_len, dropout=cfg.dropout, rotary=cfg.rotary,
                                norm=cfg.norm, tie=cfg.tie)
    decay = [p for n, p in model.named_parameters() if p.ndim == 2 and "wpe" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim == 2 and "wpe" not in n)]
    opt = AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr,
                weight_decay=cfg.weight_decay, betas=(0.9, cfg.beta2))
    sched = CosineSchedule(opt, total=cfg.steps, warmup=cfg.warmup)
    return task, model, opt, sched


def train(cfg, resume=False, progress=True, stop_after=None, stream=None):
    """Train, write the run folder, print a summary; returns the final metrics (a dict).

    stop_after: stop after that many steps as if interrupted (the tests' Ctrl-C).
    """
    stream = stream or sys.stdout
    out = cfg.run_dir()
    os.makedirs(out, exist_ok=True)
    task, model, opt, sched = build(cfg)
    be = model.wte.weight.backend
    start, elapsed_before, history = 0, 0.0, []
    if resume:
        start, elapsed_before, history = _restore(out, cfg, model, opt, sched)
    heldout = task.batch(np.random.default_rng([cfg.seed, 1]), cfg.heldout_size, "heldout")
    probe = _train_probe(cfg, task)
    metrics_log = open(os.path.join(out, "metrics.jsonl"), "a" if resume else "w")
    bar = _progress(progress, start, cfg.steps)
    t0 = time.perf_counter()
    interrupted = False
    step = start
    try:
        while step < cfg.steps:
            if stop_after is not None and step - start >= stop_after:
                interrupted = True
                break
            row = _train_step(cfg, task, model, opt, sched, be, step)
            step += 1
            row["time"] = elapsed_before + time.perf_counter() - t0
            if step % cfg.eval_every == 0 or step == cfg.steps:
                row.update(_evaluate_all(model, heldout, probe, be))
            history.append(row)
            metrics_log.write(json.dumps(row) + "\n")
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{row['loss']:.3g}", acc=f"{row['acc']:.3f}",
                                tok_s=f"{row['tokens_per_s']:.0f}")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        metrics_log.close()
        if bar is not None:
            bar.close()
    wall = elapsed_before + time.perf_counter() - t0
    final = _final_eval(history, step, model, heldout, probe, be)
    save({"model": model.state_dict(), "optim": opt.state_dict(), "sched": sched.state_dict(),
          "step": step, "elapsed": wall, "config": asdict(cfg),
          "model_config": asdict(model.config), "vocab": list(task.vocab)},
         os.path.join(out, "checkpoint.npz"))
    metrics = _metrics(cfg, final, history, step, wall, interrupted)
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    written = _write_report(out, task, model, history, heldout, be)
    _summary(stream, metrics, out, ["metrics.jsonl", "metrics.json", "checkpoint.npz"] + written)
    return metrics


def _train_step(cfg, task, model, opt, sched, be, step):
    rng = np.random.default_rng([cfg.seed, 0, step])  # this step's batch, whatever came before
    manual_seed(cfg.seed * 1_000_003 + step)  # and its dropout masks
    x, y = task.batch(rng, cfg.batch_size)  # (B, T) each
    tick = time.perf_counter()
    model.train()
    logits = model(tensor(x, backend=be))  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, task.vocab_size), tensor(y.reshape(-1), backend=be))
    opt.zero_grad()
    loss.backward()
    if cfg.grad_clip:
        clip_grad_norm(model.parameters(), cfg.grad_clip)
    lr = opt.lr
    opt.step()
    sched.step()
    seconds = time.perf_counter() - tick
    pred = logits.data.argmax(axis=-1)
    target = be.asarray(y)
    scored = target != IGNORE
    acc = float(((pred == target) & scored).sum()) / max(1, int(scored.sum()))
    return {"step": step + 1, "loss": loss.item(), "acc": acc, "lr": lr,
            "tokens_per_s": x.size / seconds}


@no_grad()
def evaluate(model, data, be, batch=256):
    """Held-out loss, token accuracy and exact-match rate (teacher forcing), in eval mode."""
    x, y = data
    model.eval()
    total_loss, correct, scored, exact = 0.0, 0, 0, 0
    for i in range(0, len(x), batch):
        xb, yb = x[i:i + batch], y[i:i + batch]
        logits = model(tensor(xb, backend=be))  # (b, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               tensor(yb.reshape(-1), backend=be), reduction="sum")
        pred = be.to_numpy(logits.data.argmax(axis=-1))
        mask = yb != IGNORE
        total_loss += loss.item()
        correct += int(((pred == yb) & mask).sum())
        scored += int(mask.sum())
        exact += int(((pred == yb) | ~mask).all(axis=1).sum())
    model.train()
    return {"heldout_loss": total_loss / max(1, scored), "heldout_acc": correct / max(1, scored),
            "heldout_exact": exact / len(x)}


def _restore(out, cfg, model, opt, sched):
    ck = load(os.path.join(out, "checkpoint.npz"))
    saved_cfg = ck["config"]
    keep = {"steps", "out", "eval_every"}  # what a resumed run may change
    changed = [f.name for f in fields(cfg) if f.name not in keep
               and saved_cfg.get(f.name) != getattr(cfg, f.name)]
    if changed:
        raise ValueError(f"resume: the run in {out} was trained with a different "
                         f"{', '.join(changed)}; resume with the same settings")
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optim"])
    sched.load_state_dict(ck["sched"])
    step = int(ck["step"])
    history = []
    path = os.path.join(out, "metrics.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            history = [json.loads(line) for line in f if line.strip()]
        history = [row for row in history if row["step"] <= step]
        with open(path, "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in history)
    return step, float(ck["elapsed"]), history


def _progress(enabled, start, total):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=start, desc="train", unit="step", dynamic_ncols=True,
                mininterval=0.5)


def _summary(stream, m, out, files):
    cfg = m["config"]
    stop = " (interrupted)" if m["interrupted"] else ""
    if "val_loss" in m:
        print(f"\n{cfg['task']}: {m['steps']} steps in {m['wall_s']:.1f} s{stop} — val loss "
              f"{m['val_loss']:.4f} ({m['val_bpc']:.3f} bits/char), train loss "
              f"{m['train_loss']:.4f}", file=stream)
    else:
        print(f"\n{cfg['task']}: {m['steps']} steps in {m['wall_time_s']:.1f} s{stop} — "
              f"held-out token accuracy {m['accuracy']:.2%}, exact match "
              f"{m['exact_match']:.2%}, loss {m['loss']:.4f}", file=stream)
    for name in files:
        print(f"  {os.path.join(out, name)}", file=stream)


# ---- language-model tasks: train loss on fixed batches, val loss and bits per character -------


def _train_probe(cfg, task):
    """Fixed training-split batches (as many as held out) whose loss is tracked; None for toy
    tasks, which are scored by their held-out answers."""
    if not task.language_model:
        return None
    return task.batch(np.random.default_rng([cfg.seed, 2]), cfg.heldout_size, "train")


def _evaluate_all(model, heldout, probe, be):
    """evaluate() on the held-out set and, for a language model, the loss on the fixed
    training batches (train_eval_loss)."""
    row = evaluate(model, heldout, be)
    if probe is not None:
        row["train_eval_loss"] = evaluate(model, probe, be)["heldout_loss"]
    return row


def _final_eval(history, step, model, heldout, probe, be):
    """The evaluation at the last step: the one the loop just made, else a fresh one."""
    last = history[-1] if history else {}
    if last.get("step") == step and "heldout_loss" in last:
        return last
    return _evaluate_all(model, heldout, probe, be)


def _metrics(cfg, final, history, step, wall, interrupted):
    """metrics.json: a toy task's held-out accuracy and exact match, or a language model's val
    loss and bits per character (and its loss on the fixed training batches)."""
    common = {"steps": step, "interrupted": interrupted, "config": asdict(cfg)}
    if "train_eval_loss" in final:
        return {"val_loss": final["heldout_loss"], "val_bpc": bits_per_char(final["heldout_loss"]),
                "train_loss": final["train_eval_loss"], "wall_s": wall,
                "accuracy": final["heldout_acc"], **common}
    metrics = {"accuracy": final["heldout_acc"], "loss": final["heldout_loss"],
               "exact_match": final["heldout_exact"], "wall_time_s": wall, **common}
    if history:
        metrics["train_loss"] = history[-1]["loss"]
    return metrics


# ---- the report: curves, attention maps, samples --------------------------------------------


def _write_report(out, task, model, history, heldout, be):
    written = []
    if history:
        _plot_curves(history, os.path.join(out, "loss.png"))
        written.append("loss.png")
    x, _ = heldout
    example = x[:1]  # (1, T)
    with no_grad():
        model.eval()
        _, maps = model(tensor(example, backend=be), return_attention=True)
        model.train()
    weights = np.stack([be.to_numpy(w.data)[0] for w in maps])  # (L, H, T, T)
    _plot_attention(weights, [_label(task.decode([i])) for i in example[0]],
                    os.path.join(out, "attention.png"), task.name)
    written.append("attention.png")
    with open(os.path.join(out, "samples.txt"), "w", encoding="utf-8") as f:
        f.write(samples_text(task, model, heldout, be))
    written.append("samples.txt")
    return written


def samples_text(task, model, heldout, be, n=12):
    """Held-out prompts, their targets and the model's greedy answers."""
    x, y = heldout
    lines = []
    if task.language_model:
        prompt = x[0][:16]
        ids = model.generate(tensor(prompt[None], backend=be), 200, temperature=0.8, top_k=10,
                             rng=np.random.default_rng(0))
        text = task.decode(ids.numpy()[0])
        lines.append(f"prompt: {task.decode(prompt)!r}\ngenerated (temperature 0.8, top-k 10):\n"
                     f"{text}\n")
        return "\n".join(lines)
    p = task.prompt_len()
    lines.append(f"{task.name}: input | target | model (greedy) | correct")
    if task.name == "add":
        lines.append("(sums are written least significant digit first)")
    for row in range(min(n, len(x))):
        seq = np.concatenate([x[row], y[row][-1:]])  # the full example
        prompt, target = seq[:p], seq[p:]
        ids = model.generate(tensor(prompt[None], backend=be), len(target), greedy=True)
        answer = ids.numpy()[0][p:]
        ok = "yes" if np.array_equal(answer, target) else "no"
        lines.append(f"{task.decode(prompt)} | {task.decode(target)} | {task.decode(answer)} "
                     f"| {ok}")
    return "\n".join(lines) + "\n"


def _plot_curves(history, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in history]
    evals = [r for r in history if "heldout_loss" in r]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax_loss.plot(steps, [r["loss"] for r in history], lw=0.8, alpha=0.7, label="train")
    ax_loss.plot([r["step"] for r in evals], [r["heldout_loss"] for r in evals], "o-",
                 label="held-out")
    ax_loss.set(xlabel="step", ylabel="cross-entropy", yscale="log", title="loss")
    ax_loss.legend()
    ax_acc.plot(steps, [r["acc"] for r in history], lw=0.8, alpha=0.7, label="train batch")
    ax_acc.plot([r["step"] for r in evals], [r["heldout_acc"] for r in evals], "o-",
                label="held-out")
    ax_acc.set(xlabel="step", ylabel="token accuracy", ylim=(0, 1.02), title="accuracy")
    ax_acc.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _label(token):
    """A token as a tick label one can read: a newline as \\n, a space as ␣."""
    return {"\n": "\\n", " ": "␣", "\t": "\\t"}.get(token, token)


def _plot_attention(weights, tokens, path, title):
    """Every head of every layer on one example; the masked (future) half is hatched grey.
    Panels grow with the sequence so that each of its tokens keeps a readable label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_layers, n_heads, T, _ = weights.shape  # noqa: N806
    side = max(2.6, 0.1 * T)  # inches per panel: 64 characters get 6.4 in
    fontsize = 6 if T <= 24 else 5
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(side * n_heads, (side + 0.3) * n_layers
                                                         + 0.4),
                             squeeze=False, layout="constrained")
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    for layer in range(n_layers):
        for head in range(n_heads):
            ax = axes[layer][head]
            shown = np.ma.masked_where(future, weights[layer, head])
            ax.set_facecolor("#dddddd")
            ax.imshow(shown, cmap="viridis", vmin=0, vmax=1)
            ax.set_xticks(range(T), tokens, fontsize=fontsize)
            ax.set_yticks(range(T), tokens, fontsize=fontsize)
            ax.set_title(f"layer {layer} head {head}", fontsize=8)
            if head == 0:
                ax.set_ylabel("query", fontsize=7)
            if layer == n_layers - 1:
                ax.set_xlabel("key", fontsize=7)
    fig.suptitle(f"{title}: attention on a held-out example (grey: masked, the future)",
                 fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)
