"""A training behaviour a mutation draw (seed 5) of tinyattn/train.py found unobserved: the
held-out problems a run evaluates on are the task's held-out split (one problem in ten by a
fixed hash), never the problems it trains on."""

import numpy as np

from tinyattn import train as train_mod
from tinyattn.data import _hash_rows
from tinyattn.train import TrainConfig, train


def test_the_held_out_metrics_are_taken_on_held_out_problems(tmp_path, monkeypatch):
    seen = []
    real = train_mod.evaluate

    def spy(model, batch, be, *args, **kwargs):
        seen.append(np.array(batch[0]))
        return real(model, batch, be, *args, **kwargs)

    monkeypatch.setattr(train_mod, "evaluate", spy)
    train(TrainConfig(task="reverse", length=4, d_model=8, heads=2, layers=1, batch_size=4,
                      steps=2, warmup=0, heldout_size=64, eval_every=2, out=str(tmp_path)),
          progress=False)
    assert seen
    for x in seen:
        digits = x[:, :4]  # (a reverse problem's prompt: its digits, whose ids are themselves)
        assert len(digits) == 64
        assert (_hash_rows(digits) % 10 == 0).all()  # every one held out
