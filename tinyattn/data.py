"""Training data, generated on the fly from a seed: toy sequence tasks and character-level text.

A task turns a random generator into batches `(x, y)` of token ids, x (B, T) the input and
y (B, T) the next-token targets, with -100 (ignored by cross_entropy) wherever the model is not
asked to predict. Toy tasks (reverse, sort, copy, add) put each problem in the train or the
held-out split by a hash of its digits, so held-out problems are never trained on.
The text tasks are character-level language modelling: `text` on any UTF-8 file (default: the
Shakespeare slice), `shakespeare` on the Shakespeare corpus shipped with the package
(tinyattn/shakespeare.py), its first 1,115,394 characters or all of it.
"""

import hashlib

import numpy as np

from . import shakespeare

IGNORE = -100
SPLITS = ("train", "heldout")


class ToyTask:
    """Digit sequences: `prompt SEP answer`; only the answer tokens are targets."""

    name = "toy"
    vocab = list("0123456789") + [">", "+", "="]
    language_model = False  # scored by exact answers

    def __init__(self, length=8):
        self.length = length
        self.stoi = {s: i for i, s in enumerate(self.vocab)}

    @property
    def vocab_size(self):
        return len(self.vocab)

    @property
    def seq_len(self):
        """Tokens the model sees per example (the full sequence minus its last token)."""
        return len(self.example(self.problems(np.random.default_rng(0), 1)[0])) - 1

    def problems(self, rng, n):
        """n random problems (n, length) of digits."""
        return rng.integers(0, 10, size=(n, self.length))

    def example(self, digits):
        """The full token sequence of one problem: prompt then answer."""
        raise TypeError(f"{type(self).__name__} has no example(): a task subclass defines it")

    def prompt_len(self):
        return self.length + 1

    def batch(self, rng, n, split="train"):
        """x (n, T), y (n, T): y[t] = the token after x[t], IGNORE inside the prompt."""
        digits = self._split_problems(rng, n, split)
        seqs = np.array([self.example(d) for d in digits], dtype=np.int64)  # (n, T + 1)
        x, y = seqs[:, :-1], seqs[:, 1:].copy()
        y[:, : self.prompt_len() - 1] = IGNORE
        return x, y

    def _split_problems(self, rng, n, split):
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        out = []
        for _ in range(10_000):
            if sum(len(o) for o in out) >= n:
                break
            cand = self.problems(rng, 2 * n + 8)
            held = _hash_rows(cand) % 10 == 0  # one problem in ten is held out
            out.append(cand[held] if split == "heldout" else cand[~held])
        else:
            raise ValueError(f"{self.name}: problems of length {self.length} never fall in the "
                             f"{split} split; use a longer --length")
        return np.concatenate(out)[:n]

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)

    def encode(self, text):
        unknown = sorted(set(text) - set(self.stoi))
        if unknown:
            raise ValueError(f"{self.name}: unknown tokens {unknown}; the vocabulary is "
                             f"{''.join(self.vocab)}")
        return [self.stoi[c] for c in text]


def _hash_rows(digits):
    """A fixed hash of each row of digits (the same on every machine and run)."""
    h = np.zeros(len(digits), dtype=np.uint64)
    for col in digits.T.astype(np.uint64):
        h = h * np.uint64(1_000_003) + col + np.uint64(7)
    return h ^ (h >> np.uint64(17))


class Reverse(ToyTask):
    """3141 > 1413"""

    name = "reverse"

    def example(self, digits):
        return list(digits) + [self.stoi[">"]] + list(digits[::-1])


class Sort(ToyTask):
    """3141 > 1134"""

    name = "sort"

    def example(self, digits):
        return list(digits) + [self.stoi[">"]] + sorted(digits)


class Copy(ToyTask):
    """3141 > 3141"""

    name = "copy"

    def example(self, digits):
        return list(digits) + [self.stoi[">"]] + list(digits)


class Add(ToyTask):
    """123+456=975 : the sum's digits least significant first, the order a left-to-right
    model can carry in (975 is 579 read backwards)."""

    name = "add"

    def __init__(self, length=3):
        super().__init__(length)

    def problems(self, rng, n):
        return rng.integers(0, 10, size=(n, 2 * self.length))

    def prompt_len(self):
        return 2 * self.length + 2

    def example(self, digits):
        a, b = digits[: self.length], digits[self.length:]
        total = _number(a) + _number(b)
        answer = [int(c) for c in str(total).zfill(self.length + 1)][::-1]
        return list(a) + [self.stoi["+"]] + list(b) + [self.stoi["="]] + answer


def _number(digits):
    return int("".join(str(int(d)) for d in digits))


def _read_text(path, full=False):
    """The text of a UTF-8 file (the Shakespeare corpus when path is None: its first 1,115,394
    characters, or all of it with full); errors name the file."""
    if path is None:
        return shakespeare.corpus(full)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise ValueError(f"text: {path} is not UTF-8 text (byte {e.object[e.start]:#04x} at "
                         f"offset {e.start})") from None
    except FileNotFoundError:
        raise FileNotFoundError(2, "--text: no such file", path) from None


class Text:
    """Character-level language modelling on a text: the first 90 % is trained on, the last
    10 % held out (split by position, as nanoGPT does). `path`: a UTF-8 file; without one, the
    Shakespeare corpus (`full`: all of it, else its first 1,115,394 characters)."""

    name = "text"
    language_model = True  # scored by loss and bits per character, not by exact answers

    def __init__(self, path=None, seq_len=64, full=False, name=None):
        text = _read_text(path, full)
        self.name = name or self.name
        self.text_sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
        # both splits must hold one example (seq_len + 1 characters) and a choice of start
        need = max(4 * (seq_len + 1), 10 * (seq_len + 2))
        if len(text) < need or len(text) - int(len(text) * 0.9) < seq_len + 2:
            raise ValueError(f"{self.name}: {path or 'the corpus'} has {len(text)} characters; "
                             f"--seq-len {seq_len} needs at least {need} (the last 10 % is held "
                             f"out, and each split needs examples of {seq_len + 1} characters)")
        self.vocab = sorted(set(text))
        self.stoi = {s: i for i, s in enumerate(self.vocab)}
        table = np.zeros(max(map(ord, self.vocab)) + 1, dtype=np.int64)
        table[[ord(c) for c in self.vocab]] = np.arange(len(self.vocab))
        ids = table[_code_points(text)]  # (N,) token ids
        cut = int(len(ids) * 0.9)
        self.ids = {"train": ids[:cut], "heldout": ids[cut:]}
        self.seq_len = seq_len

    @property
    def vocab_size(self):
        return len(self.vocab)

    def prompt_len(self):
        return 1

    def batch(self, rng, n, split="train"):
        ids = self.ids[split]
        starts = rng.integers(0, len(ids) - self.seq_len - 1, size=n)
        rows = np.stack([ids[s: s + self.seq_len + 1] for s in starts])  # (n, T + 1)
        return rows[:, :-1], rows[:, 1:]

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)

    def encode(self, text):
        unknown = sorted(set(text) - set(self.stoi))
        if unknown:
            raise ValueError(f"text: characters {unknown} are not in the corpus vocabulary")
        return [self.stoi[c] for c in text]


def _code_points(text):
    """The characters of a str as an array of code points, without a Python loop."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


TASKS = {"reverse": Reverse, "sort": Sort, "copy": Copy, "add": Add, "text": Text,
         "shakespeare": Text}


def make_task(name, text=None, length=None, seq_len=64, full_corpus=False):
    """The task called `name`; `length` is the number of digits (toy tasks); `text` a UTF-8
    file (the text task; `shakespeare` always reads the shipped corpus, all of it with
    full_corpus)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}: choose one of {', '.join(TASKS)}")
    if name == "shakespeare":
        return Text(None, seq_len, full=full_corpus, name="shakespeare")
    if name == "text":
        return Text(text, seq_len, full=full_corpus)
    return TASKS[name]() if length is None else TASKS[name](length)
