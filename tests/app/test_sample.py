"""`tinyattn sample` (tinyattn.sample): what it prints for toy-task prompts and text prompts, the
prompts and sampling settings it takes and refuses, and the settings it hands the model.

A stand-in model (an oracle that answers every toy problem right, or a recorder for text) takes
the place of a trained checkpoint, so these tests check sample's own work: parsing the prompt,
asking for the right number of tokens, decoding and formatting the answer.
"""

import re

import numpy as np
import pytest

import tinyattn.sample as sample_mod
from tinyattn.data import _hash_rows, make_task
from tinyattn.sample import check_sampling, sample
from tinyattn.tensor import tensor
from tinyattn.train import FlagError


class Oracle:
    """Answers a toy problem right: the task's own example for the prompt's digits."""

    def __init__(self, task):
        self.task, self.calls = task, []

    def generate(self, idx, max_new_tokens, **kw):
        prompt = [int(t) for t in idx.numpy()[0]]
        self.calls.append((len(prompt), max_new_tokens, kw))
        full = self.task.example(np.array([t for t in prompt if t < 10]))
        assert list(full[: len(prompt)]) == prompt
        return tensor([list(full[: len(prompt) + max_new_tokens])])


class Recorder:
    """A text model that records what it is asked and appends token 0 `max_new_tokens` times."""

    def __init__(self):
        self.calls = []

    def generate(self, idx, max_new_tokens, **kw):
        ids = [int(t) for t in idx.numpy()[0]]
        self.calls.append((ids, max_new_tokens, kw))
        return tensor([ids + [0] * max_new_tokens])


def use(monkeypatch, model, task, length=None):
    vocab = list(make_task(task, length=length).vocab) if task != "text" else list("abc ")
    ck = {"config": {"task": task, "length": length}, "vocab": vocab}
    monkeypatch.setattr(sample_mod, "load_model", lambda path: (model, ck))
    return model


def test_an_add_prompt_is_padded_and_its_answer_read_in_the_usual_order(monkeypatch):
    oracle = use(monkeypatch, Oracle(make_task("add", length=3)), "add", 3)
    assert sample("ck.npz", "12+7") == "012+007=9100   (= 19)"  # 19, least significant first
    assert sample("ck.npz", " 999 + 1 =") == "999+001=0001   (= 1000)"
    assert sample("ck.npz", "0+0") == "000+000=0000   (= 0)"
    assert sample("ck.npz", "123+456") == "123+456=9750   (= 579)"
    assert [c[:2] for c in oracle.calls] == [(8, 4)] * 4  # the 4 answer digits, asked greedily
    assert all(c[2] == {"greedy": True} for c in oracle.calls)


@pytest.mark.parametrize("prompt", ["1234+5", "12+5678", "12", "12+", "+12", "1a+2", "12-3"])
def test_a_bad_add_prompt_is_refused(monkeypatch, prompt):
    use(monkeypatch, Oracle(make_task("add", length=3)), "add", 3)
    with pytest.raises(ValueError, match=re.escape(f"sample: the add model takes 'a+b' with up "
                                                   f"to 3 digits each, got {prompt!r}")):
        sample("ck.npz", prompt)


@pytest.mark.parametrize("task, answer", [("reverse", "1413"), ("sort", "1134"),
                                          ("copy", "3141")])
def test_a_toy_prompt_gets_the_models_answer(monkeypatch, task, answer):
    oracle = use(monkeypatch, Oracle(make_task(task, length=4)), task, 4)
    for prompt in ("3141", "3 1 4 1", "3141>"):
        assert sample("ck.npz", prompt) == f"3141>{answer}"
    assert [c[:2] for c in oracle.calls] == [(5, 4)] * 3


@pytest.mark.parametrize("prompt", ["314", "31415", "31a1", "", ">3141"])
def test_a_toy_prompt_of_the_wrong_length_is_refused(monkeypatch, prompt):
    use(monkeypatch, Oracle(make_task("reverse", length=4)), "reverse", 4)
    with pytest.raises(ValueError, match=re.escape(f"sample: the reverse model takes exactly 4 "
                                                   f"digits, got {prompt!r}")):
        sample("ck.npz", prompt)


def test_without_a_prompt_five_held_out_problems_are_answered(monkeypatch):
    task = make_task("add", length=2)
    use(monkeypatch, Oracle(task), "add", 2)
    lines = sample("ck.npz", seed=3).splitlines()
    assert len(lines) == 5 and len(set(lines)) > 1
    for line in lines:
        a, b, answer, total = re.fullmatch(r"(\d\d)\+(\d\d)=(\d{3})   \(= (\d+)\)", line).groups()
        assert int(total) == int(a) + int(b) == int(answer[::-1])
        digits = np.array([[int(c) for c in a + b]])
        assert _hash_rows(digits)[0] % 10 == 0  # a held-out problem: never trained on
    assert sample("ck.npz", seed=3) == "\n".join(lines)  # the seed picks the problems
    assert sample("ck.npz", seed=4) != "\n".join(lines)


def test_a_text_prompt_is_continued_with_the_settings_given(monkeypatch):
    model = use(monkeypatch, Recorder(), "text")
    out = sample("ck.npz", "ab c", max_new_tokens=3, temperature=0.5, top_k=2, top_p=0.9, seed=1)
    assert out == "ab caaa"
    ids, n, kw = model.calls[0]
    assert ids == [0, 1, 3, 2] and n == 3
    rng = kw.pop("rng")
    assert kw == {"temperature": 0.5, "top_k": 2, "greedy": False, "top_p": 0.9}
    assert rng.integers(1 << 30) == np.random.default_rng(1).integers(1 << 30)


def test_a_text_model_without_a_prompt_starts_from_a_random_character(monkeypatch):
    model = use(monkeypatch, Recorder(), "text")
    starts = {sample("ck.npz", "", max_new_tokens=1, seed=s)[0] for s in range(20)}
    assert starts == set("abc ")  # every character of the vocabulary can start
    assert sample("ck.npz", None, max_new_tokens=1, seed=5) == \
        sample("ck.npz", "", max_new_tokens=1, seed=5)
    assert len(model.calls[-1][0]) == 1


def test_a_text_prompt_outside_the_vocabulary_is_refused(monkeypatch):
    use(monkeypatch, Recorder(), "text")
    with pytest.raises(ValueError, match=re.escape("sample: characters ['A', 'q', 'w', 'x', 'y', "
                                                   "'z'] are not in the model's vocabulary")):
        sample("ck.npz", "zaxbzyAwq")


def test_sampling_settings_take_their_limits():
    check_sampling(1e-9, 1, 1.0, 0)  # the smallest temperature, top_k, max_new_tokens; top_p 1
    check_sampling(2, None, None, 5)
    check_sampling(0.5, 3, 1e-9, 1)


@pytest.mark.parametrize("args, flag, what", [
    ((0, None, None, 1), "--temperature", "a finite number > 0 (or use --greedy)"),
    ((float("inf"), None, None, 1), "--temperature", "a finite number > 0 (or use --greedy)"),
    ((True, None, None, 1), "--temperature", "a finite number > 0 (or use --greedy)"),
    ((1.0, 0, None, 1), "--top-k", "a whole number >= 1"),
    ((1.0, 2.0, None, 1), "--top-k", "a whole number >= 1"),
    ((1.0, True, None, 1), "--top-k", "a whole number >= 1"),
    ((1.0, None, 0.0, 1), "--top-p", "in (0, 1]"),
    ((1.0, None, 1.0001, 1), "--top-p", "in (0, 1]"),
    ((1.0, None, float("nan"), 1), "--top-p", "in (0, 1]"),
    ((1.0, None, None, -1), "--max-new-tokens", "a whole number >= 0"),
    ((1.0, None, None, 2.5), "--max-new-tokens", "a whole number >= 0"),
])
def test_a_sampling_setting_that_cannot_work_is_one_line(args, flag, what):
    flags = ["--temperature", "--top-k", "--top-p", "--max-new-tokens"]
    bad = dict(zip(flags, args, strict=True))[flag]
    with pytest.raises(FlagError) as caught:
        check_sampling(*args)
    assert str(caught.value) == f"sample: {flag} must be {what}: got {bad}"


def test_sample_defaults_continue_200_characters_at_temperature_0_8_from_seed_0(monkeypatch):
    model = use(monkeypatch, Recorder(), "text")
    assert len(sample("ck.npz", "ab")) == 202
    ids, n, kw = model.calls[0]
    rng = kw.pop("rng")
    assert kw == {"temperature": 0.8, "top_k": None, "greedy": False, "top_p": None}
    assert rng.integers(1 << 30) == np.random.default_rng(0).integers(1 << 30)


def test_greedy_takes_a_temperature_of_zero(monkeypatch):
    """--greedy does not use the temperature, and generate takes 0 as greedy: 0 is no error
    with --greedy (a negative or infinite one still is)."""
    from tinyattn.cli import main

    check_sampling(0, None, None, 5, greedy=True)
    check_sampling(0.0, 3, 0.5, 5, greedy=True)
    for bad in (-1.0, float("inf"), True):
        with pytest.raises(FlagError, match=re.escape(
                f"sample: --temperature must be a finite number >= 0 with --greedy: got {bad}")):
            check_sampling(bad, None, None, 5, greedy=True)
    model = use(monkeypatch, Recorder(), "text")
    assert sample("ck.npz", "ab", max_new_tokens=2, temperature=0, greedy=True) == "abaa"
    assert main(["sample", "--checkpoint", "ck.npz", "--prompt", "ab", "--greedy",
                 "--temperature", "0", "--max-new-tokens", "2"]) == 0
    assert model.calls[-1][2]["greedy"] is True and model.calls[-1][2]["temperature"] == 0


def test_a_toy_task_takes_a_temperature_of_zero(monkeypatch):
    """A toy task's answers are always greedy, so its temperature is unused, as with --greedy:
    0 is taken (generate takes 0 as greedy too). A text task samples at the temperature: there
    0 still needs --greedy; a negative or infinite one is refused for both."""
    from tinyattn.cli import main

    oracle = use(monkeypatch, Oracle(make_task("reverse", length=4)), "reverse", 4)
    assert sample("ck.npz", "3141", temperature=0) == "3141>1413"
    assert sample("ck.npz", "3141", temperature=0.0, top_k=2, top_p=0.5) == "3141>1413"
    assert main(["sample", "--checkpoint", "ck.npz", "--prompt", "3141",
                 "--temperature", "0"]) == 0
    assert all(c[2] == {"greedy": True} for c in oracle.calls)
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(FlagError, match=re.escape(
                f"sample: --temperature must be a finite number > 0 (or use --greedy): "
                f"got {bad}")):
            sample("ck.npz", "3141", temperature=bad)
    use(monkeypatch, Recorder(), "text")
    for zero in (0, 0.0):
        with pytest.raises(FlagError, match=re.escape(
                f"sample: --temperature must be a finite number > 0 (or use --greedy): "
                f"got {zero}")):
            sample("ck.npz", "ab", temperature=zero)


def test_a_flag_that_cannot_work_is_refused_before_the_checkpoint_is_read(monkeypatch):
    """Only a temperature of 0 waits for the checkpoint (its task decides it); every other bad
    setting is refused first, with no file read."""
    def unread(path):
        raise AssertionError("the checkpoint was read")

    monkeypatch.setattr(sample_mod, "load_model", unread)
    for kw, flag in [({"temperature": -1.0}, "--temperature"), ({"top_k": 0}, "--top-k"),
                     ({"temperature": 0, "top_p": 2.0}, "--top-p"),
                     ({"temperature": 0, "max_new_tokens": -1}, "--max-new-tokens"),
                     ({"temperature": False}, "--temperature")]:
        with pytest.raises(FlagError, match=re.escape(f"sample: {flag} must be")):
            sample("ck.npz", "ab", **kw)


@pytest.mark.parametrize("vocab, message", [
    (["a", "b", 5], r"its entries must be strings \(one per token\): entry 2 is 5 \(int\)"),
    (["a", None, "c"], r"entry 1 is None \(NoneType\)"),
    (["a", "b"], r"has a vocabulary of 2 entries for a model of vocab_size 3$"),
])
def test_a_vocabulary_that_does_not_fit_is_refused_naming_the_problem(vocab, message):
    cfg = {"task": "reverse", "length": None}
    with pytest.raises(sample_mod.CheckpointError, match=message) as caught:
        sample_mod._check_vocab_and_task({"vocab_size": 3}, cfg, vocab, "ck.npz")
    assert str(caught.value).startswith("sample: ck.npz has a vocabulary of ")
    if len(vocab) == 3:
        assert "vocab_size" not in str(caught.value)  # (the size is right: not the problem)
