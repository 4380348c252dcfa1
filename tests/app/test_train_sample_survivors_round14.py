"""Tests for the seed-6 mutation survivors of train and sample (2026-11-29): stop_after counts
the steps of this call, also after a resume; a step's tokens_per_s is its tokens over its
seconds; the rotary rule reads the head dim only from good --d-model and --heads (a bad one
is its own rule's error, never a crash or a second error); a vocabulary with two entries that
are not strings says one more."""

import types

import numpy as np
import pytest

import tinyattn.train as train_mod
from tinyattn import sample as sample_mod
from tinyattn.backends import backend
from tinyattn.train import FlagError, TrainConfig, train, validate

TINY = dict(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
            eval_every=100000, heldout_size=16)


def test_stop_after_counts_this_calls_steps_after_a_resume(tmp_path):
    cfg = TrainConfig(steps=8, out=str(tmp_path), **TINY)
    first = train(cfg, progress=False, stop_after=2)
    assert first["steps"] == 2 and first["interrupted"]
    second = train(cfg, resume=True, progress=False, stop_after=3)
    assert second["resumed_from"] == 2 and second["steps"] == 5 and second["interrupted"]


def test_tokens_per_second_is_the_steps_tokens_over_its_seconds(monkeypatch):
    cfg = TrainConfig(steps=4, **TINY)
    task, model, opt, sched = train_mod.build(cfg)
    ticks = iter([100.0, 100.25])  # the step's start and end: a quarter of a second
    monkeypatch.setattr(train_mod, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks)))
    row = train_mod._train_step(cfg, task, model, opt, sched, backend("numpy"), 0)
    x, _ = task.batch(np.random.default_rng([cfg.seed, 0, 0]), cfg.batch_size)
    assert row["tokens_per_s"] == x.size / 0.25 == cfg.batch_size * task.seq_len * 4


@pytest.mark.parametrize("d_model, heads, flag", [
    (64, "4", "--heads"), (64, 4.0, "--heads"), (64, None, "--heads"), (63.0, 3, "--d-model"),
])
def test_rotary_with_a_bad_width_or_head_count_is_that_flags_error(d_model, heads, flag):
    with pytest.raises(FlagError) as caught:
        validate(TrainConfig(d_model=d_model, heads=heads, rotary=True))
    assert str(caught.value).startswith(f"{flag} must be a whole number >= 1: got ")
    assert "head dim" not in str(caught.value)


def test_rotary_needs_an_even_head_dim():
    with pytest.raises(FlagError, match=r"--rotary needs an even head dim \(--d-model / "
                                        r"--heads = 11\)"):
        validate(TrainConfig(d_model=66, heads=6, rotary=True))
    validate(TrainConfig(d_model=66, heads=3, rotary=True))


@pytest.mark.parametrize("vocab, more", [(["a", 1, 2], " (and 1 more)"),
                                         ([0, 1, 2], " (and 2 more)"), (["a", "b", 2], "")])
def test_a_vocabulary_with_entries_that_are_not_strings_counts_the_rest(vocab, more):
    with pytest.raises(sample_mod.CheckpointError) as caught:
        sample_mod._check_vocab_and_task({"vocab_size": 3}, {"task": "reverse"}, vocab,
                                         "ck.npz")
    first = next(i for i, t in enumerate(vocab) if not isinstance(t, str))
    assert str(caught.value).endswith(f"entry {first} is {vocab[first]!r} (int){more}")
