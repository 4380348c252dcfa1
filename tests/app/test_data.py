"""Tasks: examples are right, targets are masked to the answer, held-out problems are unseen."""

import numpy as np
import pytest

from tinyattn.data import IGNORE, make_task


@pytest.mark.parametrize("name,check", [
    ("reverse", lambda d: d[::-1]),
    ("sort", sorted),
    ("copy", lambda d: d),
])
def test_sequence_tasks(name, check):
    task = make_task(name, length=6)
    x, y = task.batch(np.random.default_rng(0), 20)
    assert x.shape == y.shape == (20, task.seq_len) == (20, 12)
    for xi, yi in zip(x, y, strict=True):
        digits = list(xi[:6])
        assert task.decode([xi[6]]) == ">"
        assert list(yi[6:]) == list(check(digits))
        assert np.all(yi[:6] == IGNORE)  # nothing to predict inside the prompt
        np.testing.assert_array_equal(yi[6:-1], xi[7:])  # y is x shifted by one


def test_addition_answers_are_right():
    task = make_task("add", length=3)
    x, y = task.batch(np.random.default_rng(1), 50)
    for xi, yi in zip(x, y, strict=True):
        text = task.decode(xi) + task.decode(yi[-1:])
        a, rest = text.split("+")
        b, answer = rest.split("=")
        assert int(answer[::-1]) == int(a) + int(b)
        assert len(answer) == 4
        assert np.all(yi[: task.prompt_len() - 1] == IGNORE)


@pytest.mark.parametrize("name", ["reverse", "add"])
def test_heldout_problems_never_appear_in_training(name):
    task = make_task(name, length=3)  # small spaces, so overlaps would show up
    rng = np.random.default_rng(0)
    train = {tuple(r) for r in task.batch(rng, 4000, "train")[0]}
    held = {tuple(r) for r in task.batch(rng, 400, "heldout")[0]}
    assert held and train and not (train & held)
    assert len(held) > 50  # not one problem repeated


def test_batches_depend_only_on_the_generator():
    task = make_task("reverse")
    a = task.batch(np.random.default_rng([7, 0, 3]), 8)
    b = task.batch(np.random.default_rng([7, 0, 3]), 8)
    np.testing.assert_array_equal(a[0], b[0])


def test_text_task(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("héllo wörld, " * 50, encoding="utf-8")
    task = make_task("text", text=str(path), seq_len=8)
    assert "é" in task.vocab and "ö" in task.vocab
    x, y = task.batch(np.random.default_rng(0), 4)
    assert x.shape == y.shape == (4, 8)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    assert task.decode(task.encode("hé wö")) == "hé wö"
    with pytest.raises(ValueError, match="not in the corpus"):
        task.encode("xyz")


def test_bundled_corpus_and_errors(tmp_path):
    task = make_task("text")
    assert task.vocab_size > 30 and len(task.ids["train"]) > 5000
    short = tmp_path / "short.txt"
    short.write_text("abc", encoding="utf-8")
    with pytest.raises(ValueError, match="needs at least"):
        make_task("text", text=str(short), seq_len=8)
    with pytest.raises(ValueError, match="unknown task"):
        make_task("translate")
    with pytest.raises(ValueError, match="unknown tokens"):
        make_task("reverse").encode("12a")
