"""Each task's preset: the training settings `tinyattn train --task NAME` starts from.

A preset names only what differs from TrainConfig's defaults (the reverse task's); flags given
on the command line, or keyword arguments to `config`, override it. Every preset was measured
to reach its goal with these settings (docs/benchmarks.md): >= 99 % held-out exact match for the
toy tasks; for shakespeare, nanoGPT's CPU configuration (4 layers, 4 heads, 128 wide, context
64, batch 12, 2000 steps) with the options that beat it (docs/shakespeare-tuning.md): rotary
embeddings, QK-norm and lr 4e-3.
"""

from .train import TrainConfig

PRESETS = {
    "reverse": {},
    "sort": {},
    "copy": {},
    "add": {"steps": 1500},
    "text": {"steps": 1000, "d_model": 64, "layers": 2, "batch_size": 32, "heldout_size": 1200,
             "eval_every": 250, "weight_decay": 0.1, "beta2": 0.99},
    "shakespeare": {"steps": 2000, "batch_size": 12, "seq_len": 64, "d_model": 128, "heads": 4,
                    "layers": 4, "lr": 4e-3, "weight_decay": 0.1, "beta2": 0.99, "warmup": 100,
                    "grad_clip": 1.0, "eval_every": 500, "heldout_size": 1200, "seed": 1337,
                    "rotary": True, "qk_norm": True},
}


def preset(task):
    """The settings of `task`'s preset (a copy), or a ValueError naming the tasks."""
    if task not in PRESETS:
        raise ValueError(f"unknown task {task!r}: choose one of {', '.join(PRESETS)}")
    return dict(PRESETS[task])


def config(task=None, **overrides):
    """TrainConfig for `task` (None: reverse): its preset, then `overrides` (None values are
    left out). Only `overrides` (and a task named) count as given: the preset's settings are
    defaults, which a resume takes from the run instead (TrainConfig.given)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if task:
        given["task"] = task
    task = task or "reverse"
    return TrainConfig.with_defaults({**preset(task), "task": task}, **given)
