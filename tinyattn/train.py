"""The main job: train a TinyTransformer on a task and write what it learned to a run folder.

`train(TrainConfig(...))` checks every setting first (`validate`), then runs the loop (AdamW,
cosine schedule with warm-up, gradient clipping), evaluates on held-out problems, and writes
metrics.jsonl, metrics.json, checkpoint.npz, loss.png, attention.png and samples.txt. Every
step's batch and dropout mask come from (seed, step), so the checkpoint's step is also the data
position and the random state: `resume=True` continues bit-for-bit as if never interrupted,
with the run's own settings for those not given (its --steps too; a larger --steps given
extends the run, and its cosine schedule from there on, which stderr says).
Checkpoints are written every `save_every` steps and at least every `save_seconds`; SIGINT and
SIGTERM stop the run after the step in progress, save, and report which signal it was.

Under `mpiexec -n N` the run is data-parallel (tinyattn.distributed): every rank draws the same
global batch and computes its rows, the gradients are averaged before clipping, and only rank 0
touches the run folder; an error on any rank stops all of them, and so do settings or data that
differ between ranks (each rank compares its own with rank 0's first).
"""

import contextlib
import copy
import dataclasses
import functools
import json
import math
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, fields

import numpy as np

from . import distributed
from . import functional as F
from .autograd import no_grad
from .backends import ALIASES, use_backend
from .data import IGNORE, TASKS, make_task
from .dtypes import get_default_dtype
from .errors import TinyattnError
from .nn import TinyTransformer
from .nn.module import eval_mode
from .nn.transformer import NORMS
from .optim import AdamW, CosineSchedule, clip_grad_norm
from .replay import capture
from .runs import (
    MetricsLog,
    RunFolderError,
    RunLock,
    atomic_write,
    data_fingerprint,
    read_metrics,
    remove_temporaries,
    repair_metrics,
)
from .serialization import CheckpointError, load, save
from .shakespeare import bits_per_char
from .tensor import manual_seed, tensor

RUN_FILES = ("checkpoint.npz", "metrics.jsonl", "metrics.json", "loss.png", "attention.png",
             "samples.txt")
REPORT_FILES = ("metrics.json", "loss.png", "attention.png", "samples.txt")  # (from the checkpoint)
ATTENTION_POSITIONS = 64  # attention.png draws at most this many query and key positions
LANGUAGE_TASKS = ("text", "shakespeare")
# a resume may change these (capture: the same numbers either way)
RESUMABLE = {"steps", "out", "eval_every", "save_every", "save_seconds", "capture"}


def _remembers_what_was_given(cls):
    """TrainConfig's __init__, noting the settings it was given (by keyword or position)."""
    init, names = cls.__init__, [f.name for f in fields(cls)]

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):  # noqa: N807 - the class's own
        init(self, *args, **kwargs)
        self._given = frozenset(names[:len(args)]) | frozenset(kwargs)

    cls.__init__ = __init__
    return cls


@_remembers_what_was_given
@dataclass
class TrainConfig:
    """The settings of a training run. A config knows which settings were given (passed to
    it, or set on it later: `given()`); the others are defaults, which `train(resume=True)`
    takes from the run it continues instead (its --steps too), and a default --warmup that
    does not fit in --steps is shortened to a tenth of them (said on stderr)."""

    task: str = "reverse"
    steps: int = 600
    batch_size: int = 64
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    dropout: float = 0.0
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup: int = 50  # steps of linear warm-up; a default that does not fit: a tenth of --steps
    grad_clip: float = 1.0  # the largest global gradient norm; 0 turns clipping off
    seed: int = 0
    backend: str = "numpy"
    length: int | None = None  # digits per problem (toy tasks); each task has a default
    text: str | None = None  # a UTF-8 file for the text task (default: the Shakespeare slice)
    seq_len: int = 64  # characters per example (text task)
    eval_every: int = 100
    heldout_size: int = 512
    out: str | None = None  # the run folder; default runs/<task>
    save_every: int = 0  # also save a checkpoint every this many steps (0: by time only)
    save_seconds: float = 60.0  # and at least this often, in seconds of training
    # model and optimizer options (tinyattn/tasks.py holds each task's preset of them)
    beta2: float = 0.98  # AdamW's second-moment decay
    min_lr_ratio: float = 0.1  # the cosine decay ends at this fraction of lr
    rotary: bool = False  # rotary position embeddings instead of a learned table
    norm: str = "layer"  # "layer" (LayerNorm) or "rms" (RMSNorm)
    tie: bool = True  # the LM head shares the token embedding's weight
    qk_norm: bool = False  # q and k RMS-normalised per head before the attention scores
    full_corpus: bool = False  # shakespeare/text: the whole corpus, not its first 1,115,394 chars
    capture: bool = False  # each step through ta.capture: recorded, then replayed (same numbers)

    def run_dir(self):
        return self.out or os.path.join("runs", self.task)

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in self.__dataclass_fields__ and "_given" in vars(self):  # (after __init__)
            self._given = self._given | {name}

    def given(self):
        """The names of the settings that were given, not left at their defaults."""
        return vars(self).get("_given", frozenset(self.__dataclass_fields__))

    @classmethod
    def with_defaults(cls, defaults, **given):
        """A config of the settings `given`, whose others are `defaults` (a task's preset)
        instead of TrainConfig's own: they still count as defaults."""
        cfg = cls(**{**defaults, **given})
        cfg._given = frozenset(given)
        return cfg


# ---- the settings, checked before anything is built or written ---------------------------------


class FlagError(TinyattnError, ValueError):
    """Training settings that cannot work: one line per bad flag."""


def _int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _real(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) \
        and math.isfinite(v)


def _whole(low):
    return lambda v, c: _int(v) and v >= low, f"must be a whole number >= {low}"


def _divides_d_model(v, c):
    return not (_int(c.d_model) and c.d_model >= 1) or c.d_model % v == 0


def _head_dim(c):
    """--d-model / --heads, or None while either is bad (their own rules say so)."""
    ok = _int(c.d_model) and _int(c.heads) and c.d_model >= 1 and c.heads >= 1
    return c.d_model // c.heads if ok and c.d_model % c.heads == 0 else None


def _file_in_the_way(path):
    """The file (not a folder) at `path` or at the nearest existing folder above it, if any: a
    run folder cannot be made there."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return None if os.path.isdir(path) else path


def _out_problem(c):
    blocker = _file_in_the_way(c.run_dir())
    if blocker == os.path.abspath(c.run_dir()):
        return "must be a folder for the run, not a file"
    return f"must be a folder for the run: {blocker} is a file"


# (field, test(value, config), what the flag must be): one table, checked in order; a flag's
# first failed rule is its line in the error
RULES = [
    ("task", lambda v, c: v in TASKS, f"must be one of {', '.join(TASKS)}"),
    ("steps", *_whole(1)),
    ("batch_size", *_whole(1)),
    ("d_model", *_whole(1)),
    ("heads", *_whole(1)),
    ("heads", _divides_d_model, lambda c: f"must divide --d-model ({c.d_model})"),
    ("layers", *_whole(1)),
    ("dropout", lambda v, c: _real(v) and 0 <= v < 1, "must be in [0, 1)"),
    ("lr", lambda v, c: _real(v) and v > 0, "must be a finite number > 0"),
    ("weight_decay", lambda v, c: _real(v) and v >= 0, "must be a finite number >= 0"),
    ("warmup", *_whole(0)),
    ("warmup", lambda v, c: "warmup" not in c.given() or not _int(c.steps) or v < c.steps,
     lambda c: f"must be fewer steps than --steps ({c.steps}), or the lr never reaches --lr "
               "nor decays"),
    ("grad_clip", lambda v, c: _real(v) and v >= 0,
     "must be a finite number >= 0 (the largest gradient norm; 0 turns clipping off)"),
    ("seed", *_whole(0)),
    ("backend", lambda v, c: isinstance(v, str) and v in ALIASES,
     f"must be one of {', '.join(ALIASES)}"),
    ("text", lambda v, c: v is None or c.task == "text",
     lambda c: f"is for --task text (alone it implies it), not --task {c.task}"),
    ("text", lambda v, c: v is None or not os.path.isdir(v),
     "must be a UTF-8 text file, not a folder"),
    ("length", lambda v, c: v is None or c.task not in LANGUAGE_TASKS,
     "is for the toy tasks (digits per problem); the text tasks take --seq-len"),
    ("length", lambda v, c: v is None or (_int(v) and v >= 1), "must be a whole number >= 1"),
    ("seq_len", *_whole(1)),
    ("eval_every", *_whole(1)),
    ("heldout_size", *_whole(1)),
    ("save_every", lambda v, c: _int(v) and v >= 0,
     "must be a whole number >= 0 (0: save by time only)"),
    ("save_seconds", lambda v, c: _real(v) and v > 0, "must be a number of seconds > 0"),
    ("beta2", lambda v, c: _real(v) and 0 <= v < 1, "must be in [0, 1)"),
    ("min_lr_ratio", lambda v, c: _real(v) and 0 <= v <= 1, "must be in [0, 1]"),
    ("rotary", lambda v, c: isinstance(v, bool), "must be true or false"),
    ("rotary", lambda v, c: not v or _head_dim(c) is None or _head_dim(c) % 2 == 0,
     lambda c: f"needs an even head dim (--d-model / --heads = {_head_dim(c)})"),
    ("norm", lambda v, c: v in NORMS, f"must be one of {', '.join(NORMS)}"),
    ("tie", lambda v, c: isinstance(v, bool), "must be true or false"),
    ("qk_norm", lambda v, c: isinstance(v, bool), "must be true or false"),
    ("capture", lambda v, c: isinstance(v, bool), "must be true or false"),
    ("full_corpus", lambda v, c: not v or (c.task in LANGUAGE_TASKS and c.text is None),
     "is for --task shakespeare or text without --text (the whole shipped corpus)"),
    ("out", lambda v, c: v is None or isinstance(v, (str, os.PathLike)), "must be a folder"),
    # (an empty --out, an unset shell variable's, is no folder: not runs/<task> silently)
    ("out", lambda v, c: v is None or os.fspath(v) != "",
     "must name a folder for the run, not an empty string"),
    ("out", lambda v, c: _file_in_the_way(c.run_dir()) is None, _out_problem),
]


def flag(name):
    return "--" + name.replace("_", "-")


def validate(cfg):
    """Raise FlagError listing every setting of `cfg` that cannot work, one line each."""
    bad = {}
    for name, test, what in RULES:
        value = getattr(cfg, name)
        if name in bad:
            continue
        try:
            ok = test(value, cfg)
        except (TypeError, ValueError, ZeroDivisionError):
            ok = False
        if not ok:
            what = what(cfg) if callable(what) else what
            shown = repr(value) if value == "" else value  # (an empty string seen as '')
            bad[name] = f"{flag(name)} {what}: got {shown}"
    if bad:
        raise FlagError("\n  ".join(bad.values()) if len(bad) == 1 else
                        "bad settings:\n  " + "\n  ".join(bad.values()))


def build(cfg):
    """The task, model, optimizer and schedule a config describes (freshly initialised)."""
    task = make_task(cfg.task, text=cfg.text, length=cfg.length, seq_len=cfg.seq_len,
                     full_corpus=cfg.full_corpus)
    manual_seed(cfg.seed)
    with use_backend(cfg.backend):
        model = TinyTransformer(task.vocab_size, cfg.d_model, cfg.heads, cfg.layers,
                                max_len=task.seq_len, dropout=cfg.dropout, rotary=cfg.rotary,
                                norm=cfg.norm, tie=cfg.tie, qk_norm=cfg.qk_norm)
    decay = [p for n, p in model.named_parameters() if p.ndim == 2 and "wpe" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.ndim == 2 and "wpe" not in n)]
    opt = AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr,
                weight_decay=cfg.weight_decay, betas=(0.9, cfg.beta2))
    sched = CosineSchedule(opt, total=cfg.steps, warmup=cfg.warmup, min_ratio=cfg.min_lr_ratio)
    return task, model, opt, sched


# ---- the run ------------------------------------------------------------------------------------


class _Run:
    """What one training run holds: settings, data, model, optimizer, schedule and the folder."""

    def __init__(self, cfg, task, model, opt, sched):
        self.cfg, self.task, self.model, self.opt, self.sched = cfg, task, model, opt, sched
        self.out = cfg.run_dir()
        self.be = model.wte.weight.backend
        self.fingerprint = data_fingerprint(task)
        self.step, self.elapsed, self.history = 0, 0.0, []
        self.saved = False  # whether this run wrote a checkpoint yet
        self.fresh = False  # a new run (not a resumed one) that cleared the folder for itself
        self.main = distributed.is_main()  # rank 0 (or the only process): the one that writes
        self.captured = capture(_step_loss(model, task.vocab_size)) if cfg.capture else None

    def checkpoint(self, log):
        """Save everything a resume needs, atomically, after the rows it counts are on disk."""
        if not self.main:
            return
        log.sync()
        cfg = self.cfg
        save({"model": self.model.state_dict(), "optim": self.opt.state_dict(),
              "sched": self.sched.state_dict(), "step": self.step, "elapsed": self.elapsed,
              "finished": self.step >= cfg.steps, "config": asdict(cfg),
              "model_config": asdict(self.model.config), "vocab": list(self.task.vocab),
              # batches and dropout masks are drawn from (seed, step): the step is the data
              # position and the random state at once
              "data": {"fingerprint": self.fingerprint, "position": self.step,
                       "rng": {"seed": cfg.seed, "next_step": self.step}}},
             os.path.join(self.out, "checkpoint.npz"))
        self.saved = True


def train(cfg, resume=False, force=False, progress=True, stop_after=None, stream=None):
    """Train, write the run folder, print a summary; returns the final metrics (a dict).

    resume: continue the run in the folder; force: delete the run there and start over.
    stop_after: stop after that many steps as if interrupted (the tests' Ctrl-C).
    The folder is created only once every setting and file checked out, and is locked while
    the run trains (a second run on it is refused). Under mpiexec, every rank returns rank 0's
    metrics.
    """
    distributed.init()
    with distributed.abort_on_error():
        try:
            return _train(cfg, resume, force, progress, stop_after, stream or sys.stdout)
        except MemoryError as e:
            if isinstance(e, OutOfMemoryError):
                raise
            raise OutOfMemoryError(_out_of_memory(cfg, e)) from None


class OutOfMemoryError(TinyattnError, MemoryError):
    """The model, a batch or the held-out set does not fit in memory: one line naming the
    sizes to reduce."""


def _out_of_memory(cfg, e):
    """The one line for a MemoryError: what failed and the size flags of the run."""
    sizes = ["batch_size", "d_model", "heads", "layers",
             "seq_len" if cfg.task in LANGUAGE_TASKS else "length", "heldout_size"]
    given = ", ".join(f"{flag(n)} {getattr(cfg, n)}" for n in sizes
                      if getattr(cfg, n, None) is not None)
    why = f" ({e})" if str(e) else ""
    return f"out of memory{why}; make the run smaller: {given}"


def _train(cfg, resume, force, progress, stop_after, stream):
    check_same_settings(cfg, resume, force)  # first: a rank with other settings may fail alone
    if resume and force:
        raise FlagError("--resume continues the run and --force deletes it: give one of them")
    # rank 0 reads the run's settings (its checkpoint's) and tells the others
    settled = distributed.broadcast_object(settle(cfg, resume) if distributed.is_main() else None)
    if "text" in cfg.given():  # each rank reads its own --text (compared by contents, below)
        settled = _copy(settled, {"text": cfg.text})
    cfg = settled
    validate(cfg)
    _check_world(cfg)
    run = _Run(cfg, *build(cfg))
    _check_same_data_on_every_rank(run)
    with _claim(run.out) if run.main else contextlib.nullcontext() as lock:
        _prepare_replicas(run, resume, force)
        try:
            # signals wait until the checkpoint, the report and the lock's release are done
            with _Stopper() as stopper:
                metrics = _train_and_report(run, stopper, progress, stop_after, stream)
                if lock is not None:
                    lock.release()
        except BaseException:
            _forget_unsaved(run)
            raise
    return distributed.broadcast_object(metrics)


def settle(cfg, resume=False):
    """The settings a run trains with: `cfg`'s given ones, and for the others, on resume, the
    run's own (its checkpoint's config: --steps too, so a plain --resume continues the run to
    its own length on its own schedule); --out is where the run is, never taken from it. A new
    run's default --warmup that does not fit in --steps (the lr would never reach --lr, nor
    decay) is shortened to a tenth of the steps, said on stderr and kept in the run's config. A
    copy; `cfg` is left as it was."""
    if resume:
        return _with_the_runs_settings(cfg)
    given, steps, warmup = cfg.given(), cfg.steps, cfg.warmup
    if "warmup" in given or not (_int(steps) and _int(warmup) and 1 <= steps <= warmup):
        return _copy(cfg, {})
    settled = _copy(cfg, {"warmup": steps // 10})
    with contextlib.suppress(FlagError):  # (a run its other flags refuse gets no note about it)
        validate(settled)
        print(f"train: --warmup {warmup} (the default) does not fit in --steps {steps}: warming "
              f"up over {steps // 10} steps (a tenth of --steps) instead; give --warmup N (fewer "
              f"than {steps}) to choose", file=sys.stderr)
    return settled


def _with_the_runs_settings(cfg):
    """`cfg` with each setting it was not given taken from the config of the checkpoint in its
    run folder; `cfg` as it is when there is none to read (the resume then says why)."""
    try:
        out = cfg.run_dir()
        saved = load(os.path.join(out, "checkpoint.npz"), keys=("config",))["config"]
    except (OSError, TypeError, CheckpointError):
        return _copy(cfg, {})
    if not isinstance(saved, dict):
        return _copy(cfg, {})
    taken = {f.name: saved[f.name] for f in fields(cfg)
             if f.name in saved and f.name not in cfg.given() | {"out"}}
    settled = _copy(cfg, taken)
    if settled.run_dir() != out:  # (another task's run in the default folder of this one)
        settled = _copy(settled, {"out": out})
    return settled


def _copy(cfg, changes):
    """A copy of `cfg` with `changes`, which count as defaults: given stays what was given."""
    new = dataclasses.replace(cfg, **changes)
    new._given = cfg.given()
    return new


def _train_and_report(run, stopper, progress, stop_after, stream):
    """Train, save, then write metrics.json and the report (rank 0); the final metrics."""
    interrupted = _loop(run, stopper, progress, stop_after)
    stopper.phase = "report"
    metrics = _finish(run, interrupted, stopper.signal if interrupted else None)
    if run.main:
        written = _write_report(run.out, run.task, run.model, run.history, run.heldout, run.be)
        files = ["metrics.jsonl", "metrics.json", "checkpoint.npz"] + written
        # (a finished run resumed for its missing report has no metrics.jsonl to write again)
        _summary(stream, metrics, run.out,
                 [name for name in files if os.path.exists(os.path.join(run.out, name))])
    return metrics


def _forget_unsaved(run):
    """A new run that failed before its first checkpoint (out of memory in its first step, say)
    leaves no files: the next run in the folder needs no --force."""
    if not (run.main and run.fresh) or run.saved:
        return
    for name in RUN_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(run.out, name))


# ---- data parallelism: what changes under mpiexec -n N (tinyattn.distributed) ------------------


def check_same_settings(cfg, resume=False, force=False):
    """Under mpiexec, stop every rank (distributed.DisagreementError, the same line on each)
    unless each was started with rank 0's settings: every TrainConfig field but --text (its
    contents are compared, by the data fingerprint, once read), --resume, --force and the
    default dtype. One allgather, before anything else collective; nothing in a world of one."""
    if distributed.world_size() == 1:
        return
    settings = {flag(f.name): getattr(cfg, f.name) for f in fields(cfg) if f.name != "text"}
    settings.update({"--resume": resume, "--force": force,
                     "the default dtype": np.dtype(get_default_dtype()).name})
    distributed.check_same(settings, "settings")


def _check_same_data_on_every_rank(run):
    """Every rank must have read the same data (a --text file by another path is the same data
    when its contents are): its fingerprint is compared with rank 0's."""
    if distributed.world_size() == 1:
        return
    shown = {"--text": run.cfg.text} if run.cfg.text is not None else {}
    distributed.check_same({"data fingerprint": run.fingerprint[:16]}, "data", shown)


def _check_world(cfg):
    n = distributed.world_size()
    if n > 1 and _int(cfg.batch_size) and cfg.batch_size < n:
        raise FlagError(f"--batch-size is the global batch, split across the {n} MPI processes: "
                        f"it must be at least {n}: got {cfg.batch_size}")


def _prepare_replicas(run, resume, force):
    """Rank 0 readies the folder (a fresh run or a resumed one); then every other rank starts
    from rank 0's weights, optimizer, schedule and step, whatever N the checkpoint was made with."""
    if run.main:
        _prepare(run, resume, force)
    if distributed.world_size() == 1:
        return
    state = distributed.broadcast_object(
        {"optim": run.opt.state_dict(), "sched": run.sched.state_dict(), "step": run.step,
         "elapsed": run.elapsed} if run.main else None)
    distributed.broadcast_parameters(run.model)
    if not run.main:
        run.opt.load_state_dict(state["optim"])
        run.sched.load_state_dict(state["sched"])
        run.step, run.elapsed = state["step"], state["elapsed"]


def _agreed_stop(stopper):
    """Every rank stops at the same step: a signal any rank received stops them all (a rank
    that left the loop alone would leave the others waiting in the next Allreduce)."""
    if distributed.world_size() > 1:
        stopper.signal = distributed.allreduce_max(stopper.signal or 0) or None
    return stopper.signal


def _shard_loss(logits, targets, scale, vocab_size):
    """This rank's rows' summed cross-entropy (targets: their ids, flat) times `scale`, N over
    the global batch's scored tokens (_loss_scale): the average of the N ranks' gradients is
    then the gradient of the global batch's mean loss, however the rows split. Returns (that
    loss, this rank's summed loss)."""
    summed = F.cross_entropy(logits.reshape(-1, vocab_size), targets, reduction="sum")
    return summed * scale, summed


def _loss_scale(y):
    """N / the scored tokens of the global batch y (the same on every rank)."""
    return distributed.world_size() / max(1, int((y != IGNORE).sum()))


def _step_loss(model, vocab_size):
    """The loss of a training step as a function for ta.capture: what varies comes in as
    tensors (the ids, the targets, the scale); it returns the logits too, for the accuracy."""
    def step_loss(x, targets, scale):
        logits = model(x)  # (B/N, T, V)
        loss, summed = _shard_loss(logits, targets, scale, vocab_size)
        return loss, summed, logits
    return step_loss


class _NoLog:
    """The metrics log of a rank other than 0: it writes nothing."""

    def append(self, row):
        pass

    def sync(self):
        pass

    close = sync


def _loop(run, stopper, progress, stop_after):
    """Train from run.step to cfg.steps, saving on the way, until done or a signal or
    `stop_after` steps; then save. Whether the run was interrupted."""
    cfg, start = run.cfg, run.step
    bar = _progress(progress and run.main, start, cfg.steps)
    # (a finished run whose report is rewritten trains no step: no log to open, or make)
    log = MetricsLog(os.path.join(run.out, "metrics.jsonl")) if run.main and \
        run.step < cfg.steps else _NoLog()
    clock = _Clock(run.elapsed)
    interrupted = False
    try:
        try:
            while run.step < cfg.steps:
                stop_now = stop_after is not None and run.step - start >= stop_after
                if _agreed_stop(stopper) or stop_now:
                    interrupted = True
                    break
                _one_step(run, log, bar, clock)
        except KeyboardInterrupt:  # without handlers (not the main thread), or from a test
            interrupted = True
        if run.step > start or interrupted:  # (none: a finished run's report is rewritten)
            run.elapsed = clock.now()
            run.checkpoint(log)
    finally:
        log.close()
        if bar is not None:
            bar.close()
    return interrupted


class _Clock:
    """Seconds of training, carried over from before a resume, and the time of the last save."""

    def __init__(self, before):
        self.before, self.t0 = before, time.perf_counter()
        self.last_save = self.t0

    def now(self):
        return self.before + time.perf_counter() - self.t0

    def save_due(self, seconds):
        return time.perf_counter() - self.last_save >= seconds


def _one_step(run, log, bar, clock):
    """One optimizer step: its metrics row logged, and a checkpoint when one is due."""
    cfg = run.cfg
    row = _train_step(cfg, run.task, run.model, run.opt, run.sched, run.be, run.step,
                      run.captured)
    run.step += 1
    row["time"] = clock.now()
    if run.main and (run.step % cfg.eval_every == 0 or run.step == cfg.steps):
        row.update(_evaluate_all(run))
    run.history.append(row)
    log.append(row)
    if bar is not None:
        bar.update(1)
        bar.set_postfix(loss=f"{row['loss']:.3g}", acc=f"{row['acc']:.3f}",
                        tok_s=f"{row['tokens_per_s']:.0f}")
    by_steps = cfg.save_every and run.step % cfg.save_every == 0
    if (by_steps or clock.save_due(cfg.save_seconds)) and run.step < cfg.steps:
        run.elapsed = row["time"]
        run.checkpoint(log)
        clock.last_save = time.perf_counter()


def _finish(run, interrupted, signum):
    """metrics.json (rank 0 evaluates and writes it): the held-out scores (a language model's:
    _lm_metrics) and how the run ended; None on the other ranks."""
    if not run.main:
        return None
    final = _final_eval(run)
    metrics = {"accuracy": final["heldout_acc"], "loss": final["heldout_loss"],
               "exact_match": final["heldout_exact"], "steps": run.step,
               "wall_time_s": run.elapsed, "interrupted": interrupted,
               "signal": signal.Signals(signum).name if signum else None,
               "resumed_from": run.resumed_from, "processes": distributed.world_size(),
               "config": asdict(run.cfg)}
    if run.history:
        metrics["train_loss"] = run.history[-1]["loss"]
    if "train_eval_loss" in final:
        metrics = _lm_metrics(metrics, final)
    _write_text(os.path.join(run.out, "metrics.json"), json.dumps(metrics, indent=2))
    return metrics


def exit_code(metrics):
    """The command's exit status: 0, or 128 + the signal that stopped the run (130 for Ctrl-C,
    143 for SIGTERM), as a shell reports a process a signal ended."""
    name = metrics.get("signal")
    return 128 + int(signal.Signals[name]) if name else 0


class _Stopper:
    """SIGINT and SIGTERM (in the main thread) ask the loop to stop after the step in progress;
    the run then saves. A second signal while saving is told to wait: the save finishes, and so
    do the report and the lock's release (phase "report") before the handlers are restored."""

    def __init__(self):
        self.signal = None
        self.old = {}
        self.phase = "train"

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.phase == "report":
            self.signal = self.signal or signum
            print(f"\n{signal.Signals(signum).name}: writing the report; the run stops as soon "
                  "as it is written", file=sys.stderr, flush=True)
        elif self.signal is None:
            self.signal = signum
            print(f"\n{signal.Signals(signum).name}: stopping after this step; saving the "
                  "checkpoint", file=sys.stderr, flush=True)
        else:
            print(f"\n{signal.Signals(signum).name}: still saving; the run stops as soon as the "
                  "checkpoint is written", file=sys.stderr, flush=True)

    def __exit__(self, *exc):
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
        self.old = {}


class _claim:  # noqa: N801 - a context manager, used as `with _claim(folder):`
    """Create (if needed) and lock the run folder; on a failed start, remove a folder this run
    created and left empty, so that a mistake leaves nothing behind."""

    def __init__(self, folder):
        self.folder = folder
        self.lock = RunLock(folder)

    def __enter__(self):
        self.created = not os.path.isdir(self.folder)
        os.makedirs(self.folder, exist_ok=True)
        try:
            self.lock.acquire()
        except BaseException:
            self._tidy()
            raise
        remove_temporaries(self.folder)  # left by a save that was killed
        return self.lock

    def __exit__(self, *exc):
        self.lock.release()
        self._tidy()

    def _tidy(self):
        if self.created and os.path.isdir(self.folder) and not os.listdir(self.folder):
            os.rmdir(self.folder)


def _prepare(run, resume, force):
    """Start fresh (an empty folder, or --force) or pick up the run in the folder (--resume)."""
    cfg, out = run.cfg, run.out
    run.heldout = run.task.batch(np.random.default_rng([cfg.seed, 1]), cfg.heldout_size,
                                 "heldout")
    run.probe = _train_probe(cfg, run.task)
    run.resumed_from = None
    present = sorted(n for n in os.listdir(out) if not n.startswith("."))
    if resume:
        _restore(run, present)
        run.resumed_from = run.step
        return
    if present and not force:
        raise RunFolderError(f"{out} already holds a run ({', '.join(present[:6])}): continue "
                             "it with --resume, or delete it and start over with --force")
    for name in RUN_FILES:
        if name in present:
            os.remove(os.path.join(out, name))
    run.fresh = True  # what the folder holds from here on is this run's


def _restore(run, present):
    cfg, out = run.cfg, run.out
    path = os.path.join(out, "checkpoint.npz")
    if "checkpoint.npz" not in present:
        why = ("the run stopped before its first checkpoint; start over with --force" if present
               else "start a new run without --resume")
        raise RunFolderError(f"resume: nothing to resume in {out}: no checkpoint.npz ({why})")
    ck = load(path)
    _check_same_run(ck, run, path)
    step, was = int(ck["step"]), ck["config"].get("steps")
    log = os.path.join(out, "metrics.jsonl")
    _check_the_steps_left(run, step, was, log, present)
    run.model.load_state_dict(ck["model"])
    run.opt.load_state_dict(ck["optim"])
    run.sched.load_state_dict(ck["sched"])
    run.step, run.elapsed = step, float(ck["elapsed"])
    run.history = repair_metrics(log, step)
    if step < cfg.steps and was not in (None, cfg.steps):
        _say_the_schedule_changes(run, was)


def _check_the_steps_left(run, step, was, log, present):
    """Refuse a resume with nothing to do (a run at or past --steps whose report is whole); a
    finished run's missing report files are said (all but loss.png without its history)."""
    cfg, out = run.cfg, run.out
    if step > cfg.steps:
        raise RunFolderError(f"resume: the run in {out} is at step {step}, past --steps "
                             f"{cfg.steps}; resume without --steps (the run's own: {was}), or "
                             f"with --steps M larger than {step} to train it further")
    if step < cfg.steps:
        return
    drawable = os.path.exists(log) and bool(read_metrics(log, step)[0])  # loss.png's history
    missing = [name for name in REPORT_FILES if name not in present]
    written = [name for name in missing if name != "loss.png" or drawable]
    if not written:
        raise RunFolderError(f"resume: the run in {out} already finished at step {step} "
                             f"(--steps {cfg.steps}); to train it further, resume with --steps "
                             f"M larger than {step} (the cosine schedule is then recomputed for "
                             f"M steps from step {step} on: not bit-for-bit a straight run of M "
                             "steps)")
    undrawn = (" (loss.png cannot be drawn without the run's metrics.jsonl history)"
               if len(written) < len(missing) else "")
    print(f"resume: the run in {out} finished at step {step}; writing its missing "
          f"{', '.join(written)} from the checkpoint{undrawn}", file=sys.stderr)


def _say_the_schedule_changes(run, was):
    """stderr: a resume to another --steps than the run's recomputes the cosine schedule from
    the step it resumes at, with the lr it jumps from and to."""
    before = copy.copy(run.sched)
    before.total = was
    steps, step = run.cfg.steps, run.step
    print(f"resume: --steps {steps}, not the run's {was}: the cosine schedule is recomputed for "
          f"{steps} steps from step {step} on (lr {before.lr_at(step):.6g} -> "
          f"{run.sched.lr_at(step):.6g}), so the run is not bit-for-bit a straight run of "
          f"{steps} steps", file=sys.stderr)


def _check_same_run(ck, run, path):
    """Refuse a resume with other settings or other data than the checkpoint's. Settings are
    compared as the run uses them (_as_used): another name of the backend, or the task's
    default --length given by its number, is the same setting."""
    cfg = run.cfg
    saved_cfg = ck.get("config") if isinstance(ck, dict) else None
    if not isinstance(saved_cfg, dict) or "step" not in ck:
        raise RunFolderError(f"resume: {path} is not a training checkpoint")
    # the text is compared by its contents (the data fingerprint, below), not by its path:
    # ./corpus.txt, an absolute path or one from another folder name the same data
    by_data = {"text"} if (ck.get("data") or {}).get("fingerprint") else set()
    now = _as_used(asdict(cfg))
    then = _as_used({**asdict(cfg), **saved_cfg})  # (a setting added since: today's value)
    changed = [flag(f.name) for f in fields(cfg) if f.name not in RESUMABLE | by_data
               and then[f.name] != now[f.name]]
    if changed:
        raise FlagError(f"resume: the run in {run.out} was trained with a different "
                        f"{', '.join(changed)}; resume with the same settings")
    _check_same_data(ck, run, path)


def _as_used(settings):
    """Settings (a config as a dict) as the run uses them: the backend by its own name (cpu
    is numpy), a toy task's --length filled in with its default, and a setting the task
    ignores (a toy task's --seq-len) left out."""
    used = dict(settings)
    backend = used.get("backend")
    used["backend"] = ALIASES.get(backend.lower(), backend) if isinstance(backend, str) else \
        backend
    task = used.get("task")
    if task in TASKS and task not in LANGUAGE_TASKS:
        used["seq_len"] = None
        if used.get("length") is None:
            used["length"] = TASKS[task]().length
    return used


def _check_same_data(ck, run, path):
    """The data fingerprint (and vocabulary) in the checkpoint must be today's data's."""
    cfg = run.cfg
    saved_fp = (ck.get("data") or {}).get("fingerprint")
    if ck.get("vocab") == list(run.task.vocab) and saved_fp in (None, run.fingerprint):
        return
    source = (f"--text {cfg.text or '(the Shakespeare slice)'}" if cfg.task == "text"
              else f"--task {cfg.task}")
    raise RunFolderError(f"resume: the data changed since the run started: {source} is not "
                         f"what the checkpoint {path} was trained on (data fingerprint "
                         f"{(saved_fp or 'none')[:12]}, now {run.fingerprint[:12]}); resume "
                         "with the same data, or start over with --force")


def _train_step(cfg, task, model, opt, sched, be, step, captured=None):
    rng = np.random.default_rng([cfg.seed, 0, step])  # this step's batch, whatever came before
    # and its dropout masks (another stream on each MPI rank)
    manual_seed(cfg.seed * 1_000_003 + step + distributed.rank() * 2**40)
    x, y = task.batch(rng, cfg.batch_size)  # (B, T) each: the global batch, on every rank
    rows = distributed.shard(len(x))  # this rank's rows (all of them in a world of one)
    tick = time.perf_counter()
    model.train()
    xs, ys = tensor(x[rows], backend=be), tensor(y[rows].reshape(-1), backend=be)
    opt.zero_grad()
    if captured is None:
        logits = model(xs)  # (B/N, T, V)
        loss, summed = _shard_loss(logits, ys, _loss_scale(y), task.vocab_size)
        loss.backward()
    else:  # the same, recorded on its first calls, then replayed (see tinyattn.replay)
        scale = tensor(np.asarray(_loss_scale(y), dtype=model.wte.weight.dtype), backend=be)
        loss, summed, logits = captured(xs, ys, scale)
    distributed.allreduce_gradients(model)  # the global batch's gradient on every rank
    if cfg.grad_clip:
        clip_grad_norm(model.parameters(), cfg.grad_clip)
    lr = opt.lr
    opt.step()
    sched.step()
    seconds = time.perf_counter() - tick
    pred = logits._data.argmax(axis=-1)
    target = be.asarray(y[rows])
    correct = float(((pred == target) & (target != IGNORE)).sum())
    scored = max(1, int((y != IGNORE).sum()))
    total_loss, correct = distributed.allreduce_sum([summed.item(), correct])  # every rank's
    return {"step": step + 1, "loss": total_loss / scored, "acc": correct / scored, "lr": lr,
            "tokens_per_s": x.size / seconds}


@no_grad()
def evaluate(model, data, be, batch=256):
    """Held-out loss, token accuracy and exact-match rate (teacher forcing), in eval mode (the
    model's mode is restored after). Only answer positions count: targets equal to IGNORE (the
    prompt) are neither scored nor required for an exact match."""
    x, y = data
    total_loss, correct, scored, exact = 0.0, 0, 0, 0
    with eval_mode(model):
        for i in range(0, len(x), batch):
            xb, yb = x[i:i + batch], y[i:i + batch]
            logits = model(tensor(xb, backend=be))  # (b, T, V)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                   tensor(yb.reshape(-1), backend=be), reduction="sum")
            pred = be.to_numpy(logits._data.argmax(axis=-1))
            mask = yb != IGNORE
            total_loss += loss.item()
            correct += int(((pred == yb) & mask).sum())
            scored += int(mask.sum())
            exact += int(((pred == yb) | ~mask).all(axis=1).sum())
    return {"heldout_loss": total_loss / max(1, scored), "heldout_acc": correct / max(1, scored),
            "heldout_exact": exact / len(x)}


def _progress(enabled, start, total):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=start, desc="train", unit="step", dynamic_ncols=True,
                mininterval=0.5)


def _summary(stream, m, out, files):
    cfg = m["config"]
    stop = f" (stopped by {m['signal']})" if m.get("signal") else (
        " (interrupted)" if m["interrupted"] else "")
    if m.get("resumed_from") is not None:
        stop += f" (resumed at step {m['resumed_from']})"
    if "val_loss" in m:  # a language model
        print(f"\n{cfg['task']}: {m['steps']} steps in {m['wall_s']:.1f} s{stop} — val loss "
              f"{m['val_loss']:.4f} ({m['val_bpc']:.3f} bits/char), train loss "
              f"{m['train_loss']:.4f}", file=stream)
    else:
        print(f"\n{cfg['task']}: {m['steps']} steps in {m['wall_time_s']:.1f} s{stop} — "
              f"held-out token accuracy {m['accuracy']:.2%}, exact match "
              f"{m['exact_match']:.2%}, loss {m['loss']:.4f}", file=stream)
    for name in files:
        print(f"  {os.path.join(out, name)}", file=stream)


# ---- language models: train loss on fixed batches, val loss and bits per character -----------


def _train_probe(cfg, task):
    """Fixed training-split batches (as many as held out) whose loss is tracked beside the
    held-out loss; None for the toy tasks, which are scored by their held-out answers."""
    if not task.language_model:
        return None
    return task.batch(np.random.default_rng([cfg.seed, 2]), cfg.heldout_size, "train")


def _evaluate_all(run):
    """evaluate() on the held-out set and, for a language model, the loss on the fixed
    training batches (train_eval_loss)."""
    row = evaluate(run.model, run.heldout, run.be)
    if run.probe is not None:
        row["train_eval_loss"] = evaluate(run.model, run.probe, run.be)["heldout_loss"]
    return row


def _final_eval(run):
    """The evaluation at the last step: the one the loop just made there, else a fresh one."""
    last = run.history[-1] if run.history else {}
    if last.get("step") == run.step and "heldout_loss" in last:
        return last
    return _evaluate_all(run)


def _lm_metrics(metrics, final):
    """A language model's metrics.json: val loss, bits per character and the loss on the fixed
    training batches first; no exact match (a text has no single right answer)."""
    lm = {"val_loss": final["heldout_loss"], "val_bpc": bits_per_char(final["heldout_loss"]),
          "train_loss": final["train_eval_loss"], "steps": metrics["steps"],
          "wall_s": metrics["wall_time_s"]}
    return {**lm, **{k: v for k, v in metrics.items() if k not in ("exact_match", "loss")
                     and k not in lm}}


# ---- the report: curves, attention maps, samples --------------------------------------------


def _write_text(path, text):
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def _save_figure(fig, path):
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110))


def _write_report(out, task, model, history, heldout, be):
    written = []
    if history:
        _plot_curves(history, os.path.join(out, "loss.png"))
        written.append("loss.png")
    x, _ = heldout
    # the first positions only (causal: their attention does not depend on the later ones)
    example = x[:1, :ATTENTION_POSITIONS]  # (1, T')
    with no_grad(), eval_mode(model):
        _, maps = model(tensor(example, backend=be), return_attention=True)
    weights = np.stack([be.to_numpy(w._data)[0] for w in maps])  # (L, H, T', T')
    _plot_attention(weights, [_label(task.decode([i])) for i in example[0]],
                    os.path.join(out, "attention.png"), task.name, positions=x.shape[1])
    written.append("attention.png")
    _write_text(os.path.join(out, "samples.txt"), samples_text(task, model, heldout, be))
    written.append("samples.txt")
    return written


def samples_text(task, model, heldout, be, n=12):
    """Held-out prompts, their targets and the model's greedy answers (in eval mode: no
    dropout in the answers)."""
    with eval_mode(model):
        return _samples_text(task, model, heldout, be, n)


def _samples_text(task, model, heldout, be, n):
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
    """loss.png: the training and held-out curves (tinyattn.plots.training_curves)."""
    from . import plots

    _save_figure(plots.training_curves(history), path)


def _label(token):
    """A token as a tick label one can read: a newline as \\n, a space as ␣."""
    return {"\n": "\\n", " ": "␣", "\t": "\\t"}.get(token, token)


def _plot_attention(weights, tokens, path, title, positions=None):
    """Every head of every layer on one example, with a colour bar; the masked (future) half
    is hatched grey (tinyattn.plots.attention_maps). At most ATTENTION_POSITIONS query and key
    positions are drawn (a figure of thousands is unreadable and takes minutes); the title
    says so when the example (`positions` long) had more."""
    from . import plots

    positions = max(positions or 0, weights.shape[-1])
    shown = min(positions, ATTENTION_POSITIONS)
    weights, tokens = weights[..., :shown, :shown], list(tokens)[:shown]  # (L, H, T', T')
    part = f", its first {shown} of {positions} positions" if shown < positions else ""
    fig = plots.attention_maps(weights, tokens=tokens, causal=True, annotate=False,
                               title=f"{title}: attention on a held-out example{part} (grey: "
                                     "masked, the future)")
    _save_figure(fig, path)
