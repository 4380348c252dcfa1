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


# ---- tinyattn.utils.data against torch.utils.data ------------------------------------------------


def test_subset_passes_a_list_index_to_the_dataset_in_one_call_as_torch():
    torch = pytest.importorskip("torch")
    import tinyattn as ta
    from tinyattn.utils import data as D

    got = D.Subset(D.TensorDataset(ta.arange(5)), [4, 3])[[0, 1]]
    want = torch.utils.data.Subset(torch.utils.data.TensorDataset(torch.arange(5)), [4, 3])[[0, 1]]
    assert isinstance(got, tuple) and len(got) == len(want) == 1
    assert got[0].tolist() == want[0].tolist() == [4, 3]

    class Calls(D.Dataset):  # what the dataset is asked for, and how often
        def __init__(self):
            self.asked = []

        def __getitem__(self, index):
            self.asked.append(index)
            return index

        def __len__(self):
            return 10

    calls = Calls()
    assert D.Subset(calls, [7, 2, 5])[[2, 0]] == [5, 7] and calls.asked == [[5, 7]]
    assert D.Subset(calls, [7, 2, 5])[-1] == 5  # one index: as before


@pytest.mark.parametrize("sample", [
    np.float32(1.5), np.int16(-3), np.bool_(True), np.float64(0.25),
    (np.float32(1.0), np.int64(2)), {"a": np.uint8(7), "b": [np.float16(0.5)]},
    np.str_("word"), (np.str_("w"), np.float32(2.0)),
])
def test_unbatched_loader_turns_numpy_scalars_into_tensors_as_torch(sample):
    torch = pytest.importorskip("torch")
    import tinyattn as ta
    from tinyattn.utils import data as D

    def same(got, want):
        if isinstance(want, torch.Tensor):
            assert isinstance(got, ta.Tensor), f"{got!r} is not a tensor (torch: {want!r})"
            assert str(got.dtype) == str(want.dtype).removeprefix("torch.")
            assert got.shape == tuple(want.shape) and got.tolist() == want.tolist()
        elif isinstance(want, dict):
            assert isinstance(got, dict) and got.keys() == want.keys()
            for k in want:
                same(got[k], want[k])
        elif isinstance(want, list):
            assert isinstance(got, list) and len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                same(g, w)
        else:
            assert type(got) is type(want) and got == want

    [got] = list(D.DataLoader([sample], batch_size=None))
    [want] = list(torch.utils.data.DataLoader([sample], batch_size=None))
    same(got, want)
    # (torch 2.13 fails on a NumPy bytes scalar; strings and bytes stay as they are)
    assert list(D.DataLoader([(np.bytes_(b"raw"),)], batch_size=None)) == [[np.bytes_(b"raw")]]
