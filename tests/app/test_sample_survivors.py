"""`tinyattn sample`'s checkpoint loading, where mutation testing found it untested: the model
it builds has the checkpoint's dropout (a model trained on from it drops as it did), and a
vocabulary of several non-strings is counted right in the error."""

import re

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.sample import load_model, sample
from tinyattn.train import TrainConfig, train


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    train(TrainConfig(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
                      steps=2, heldout_size=8, dropout=0.25, out=str(out)), progress=False)
    return out


def test_the_loaded_model_has_the_checkpoints_dropout(run):
    model, ck = load_model(run / "checkpoint.npz")
    assert ck["model_config"]["dropout"] == 0.25
    assert model.config.dropout == 0.25
    drops = [m for m in model.modules() if isinstance(m, ta.nn.Dropout)]
    assert drops and all(m.p == 0.25 for m in drops)
    assert not model.training  # sampling: dropout off, every answer the same
    x = ta.tensor(np.array([[1, 2, 3]]))
    np.testing.assert_array_equal(model(x).numpy(), model(x).numpy())
    model.train()  # trained on from the checkpoint: it drops, as it did in training
    ta.manual_seed(0)
    assert not np.array_equal(model(x).numpy(), model(x).numpy())


def test_several_entries_that_are_not_strings_are_counted(run, tmp_path):
    ck = ta.load(run / "checkpoint.npz")
    ck["vocab"][2:5] = [7, None, 8.5]  # three odd entries: the first named, 2 more counted
    path = tmp_path / "forged.npz"
    ta.save(ck, path)
    n = len(ck["vocab"])
    with pytest.raises(ta.CheckpointError) as caught:
        sample(path, "123")
    assert str(caught.value) == (
        f"sample: {path} has a vocabulary of {n} entries, but its entries must be strings (one "
        f"per token): entry 2 is 7 (int) (and 2 more)")
    ck["vocab"][3:5] = ["a", "b"]  # one odd entry: no count
    ta.save(ck, path)
    with pytest.raises(ta.CheckpointError, match=re.escape("entry 2 is 7 (int)") + "$"):
        sample(path, "123")
