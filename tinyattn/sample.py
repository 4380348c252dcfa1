"""`tinyattn sample`: use a trained checkpoint — answer toy-task prompts or continue text.

The checkpoint carries the model's configuration and vocabulary, so nothing else is needed
(not even the text file a text model was trained on). The configuration is checked before a
model is built (the size of its model against the file's, by TinyTransformer.tensor_shapes),
and each weight's shape before it is read: a damaged or forged file is an error naming it,
never a crash or a huge allocation.

Toy-task answers are always greedy, so their sampling settings are unused: a temperature of 0
is taken for them as with --greedy (a text model samples at it, and wants --greedy for 0).
"""

import math
import os

import numpy as np

from .data import TASKS, make_task
from .errors import CheckpointError
from .nn import TinyTransformer
from .nn.transformer import NORMS
from .serialization import load
from .tensor import tensor
from .train import FlagError

HEAD = ("model_config", "config", "vocab")  # what is read before the model is built


def _count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


# (key of model_config, test(value, model_config), what it must be)
CONFIG_RULES = [
    ("vocab_size", lambda v, mc: _count(v), "a whole number >= 1"),
    ("d_model", lambda v, mc: _count(v), "a whole number >= 1"),
    ("n_heads", lambda v, mc: _count(v) and mc["d_model"] % v == 0,
     "a whole number >= 1 that divides d_model"),
    ("n_layers", lambda v, mc: _count(v), "a whole number >= 1"),
    ("max_len", lambda v, mc: _count(v), "a whole number >= 1"),
    ("dropout", lambda v, mc: isinstance(v, (int, float)) and 0 <= v < 1, "in [0, 1)"),
    ("rotary", lambda v, mc: v in (None, True, False) and not (v and _head(mc) % 2),
     "true or false (true needs an even d_model / n_heads: {d_model} / {n_heads})"),
    ("norm", lambda v, mc: v is None or v in NORMS, f"one of {', '.join(NORMS)}"),
    ("tie", lambda v, mc: v in (None, True, False), "true or false"),
    ("bias", lambda v, mc: v in (None, True, False), "true or false"),
    ("qk_norm", lambda v, mc: v in (None, True, False), "true or false"),
]
# and their defaults (older checkpoints lack the later ones; null is taken as absent)
OPTIONS = {"rotary": False, "norm": "layer", "tie": True, "bias": True, "qk_norm": False}
# The rotary tables are computed, not read: the file's size does not bound them. Their bytes
# (n_layers x max_len x D float64) past this are no model that trains (1 GiB is 12 layers of
# D = 64 at 2^17 positions, whose T x T attention scores alone would not fit).
BUFFER_LIMIT = 1 << 30
BUFFER_ITEMSIZE = 8  # RotaryEmbedding makes its tables in float64


def _head(mc):
    return mc["d_model"] // mc["n_heads"]


def _options(mc):
    """The keyword options of the model of a checked model_config: each absent or null one its
    default (a null bias is the default bias, not a model without)."""
    return {k: default if mc.get(k) is None else mc[k] for k, default in OPTIONS.items()}


def _check_head(head, checkpoint):
    """The model configuration of a checkpoint's head entries, each value checked."""
    for key in HEAD:
        if key not in head:
            raise CheckpointError(f"sample: {checkpoint} is not a training checkpoint (it has no "
                                  f"{key!r} entry)")
    mc, cfg, vocab = head["model_config"], head["config"], head["vocab"]
    if not (isinstance(mc, dict) and isinstance(cfg, dict) and isinstance(vocab, list)):
        raise CheckpointError(f"sample: {checkpoint} has a damaged configuration")
    _check_model_config(mc, checkpoint)
    _check_vocab_and_task(mc, cfg, vocab, checkpoint)
    return mc


def _check_vocab_and_task(mc, cfg, vocab, checkpoint):
    """A vocabulary of one string per token of the model, and a task that sample knows."""
    if len(vocab) != mc["vocab_size"]:
        raise CheckpointError(f"sample: {checkpoint} has a vocabulary of {len(vocab)} entries "
                              f"for a model of vocab_size {mc['vocab_size']}")
    odd = [i for i, t in enumerate(vocab) if not isinstance(t, str)]
    if odd:
        first = vocab[odd[0]]
        more = f" (and {len(odd) - 1} more)" if len(odd) > 1 else ""
        raise CheckpointError(
            f"sample: {checkpoint} has a vocabulary of {len(vocab)} entries, but its entries "
            f"must be strings (one per token): entry {odd[0]} is {first!r:.40} "
            f"({type(first).__name__}){more}")
    length = cfg.get("length")
    if cfg.get("task") not in TASKS or not (length is None or _count(length)):
        raise CheckpointError(f"sample: {checkpoint} has a damaged training configuration "
                              f"(task {cfg.get('task')!r}, length {length!r})")


def _check_model_config(mc, checkpoint):
    for key, test, what in CONFIG_RULES:
        try:
            ok = test(mc.get(key), mc)
        except (TypeError, ZeroDivisionError, KeyError):
            ok = False
        if not ok:
            raise CheckpointError(f"sample: {checkpoint} has model_config {key} = "
                                  f"{mc.get(key)!r}; it must be {what.format(**mc)}")


def _model_size(mc):
    """(parameters, buffer elements) of the model of a checked model_config, counted from
    TinyTransformer.tensor_shapes (no formula of its own to drift from the model). Its blocks
    are alike: one block's count times n_layers, so a forged n_layers is counted, not listed."""
    sizes = {k: mc[k] for k in ("vocab_size", "d_model", "n_heads", "max_len")}
    counts = []
    for n_layers in (0, 1):
        params, buffers = TinyTransformer.tensor_shapes(**sizes, n_layers=n_layers,
                                                        **_options(mc))
        counts.append([sum(math.prod(s) for s in t.values()) for t in (params, buffers)])
    (p0, b0), (p1, b1) = counts
    return p0 + mc["n_layers"] * (p1 - p0), b0 + mc["n_layers"] * (b1 - b0)


def _fits_file(mc, checkpoint):
    """A model the checkpoint's bytes can hold (at least one byte per parameter), whose computed
    buffers (the rotary tables) are no huge allocation."""
    n, buffered = _model_size(mc)
    size = os.path.getsize(checkpoint)
    if n > size:
        raise CheckpointError(f"sample: {checkpoint} declares a model of {n:,} parameters in a "
                              f"file of {size:,} bytes; it is damaged")
    if buffered * BUFFER_ITEMSIZE > BUFFER_LIMIT:
        raise CheckpointError(f"sample: {checkpoint} declares max_len {mc['max_len']}: its "
                              f"model's rotary tables of {buffered * BUFFER_ITEMSIZE:,} bytes "
                              f"(computed, not read) pass the {BUFFER_LIMIT:,} any model that "
                              f"trains needs; it is damaged")


def load_model(checkpoint):
    """(model in eval mode, checkpoint dict) from a checkpoint.npz written by `train`. Only the
    entries a model needs are read (not the optimizer's), each checked before it is read."""
    head = load(checkpoint, keys=HEAD)
    mc = _check_head(head, checkpoint)
    _fits_file(mc, checkpoint)
    model = TinyTransformer(mc["vocab_size"], mc["d_model"], mc["n_heads"], mc["n_layers"],
                            mc["max_len"], mc["dropout"], **_options(mc))
    expected = {f"obj['model'][{k!r}]": tuple(v.shape) for k, v in model.state_dict().items()}

    def check(where, shape, dtype):
        if expected.get(where) != shape or dtype.kind != "f":
            raise CheckpointError(f"sample: {checkpoint}: {where} has shape {shape} of {dtype}; "
                                  f"the model of its configuration expects "
                                  f"{expected.get(where, 'no such entry')} of floats")

    weights = load(checkpoint, keys=("model",), check=check)
    if not isinstance(weights.get("model"), dict):
        raise CheckpointError(f"sample: {checkpoint} is not a training checkpoint (it has no "
                              "'model' entry)")
    model.load_state_dict(weights["model"])
    return model.eval(), {**head, **weights}


def _real(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# (flag, test(value), what it must be): sampling settings
SAMPLING_RULES = [
    ("--temperature", lambda v: _real(v) and v > 0, "a finite number > 0 (or use --greedy)"),
    ("--top-k", lambda v: v is None or _count(v), "a whole number >= 1"),
    ("--top-p", lambda v: v is None or (_real(v) and 0 < v <= 1), "in (0, 1]"),
    ("--max-new-tokens", lambda v: _count(v) or v == 0, "a whole number >= 0"),
]


def check_sampling(temperature, top_k, top_p, max_new_tokens, greedy=False):
    """One line naming the flag for a sampling setting that cannot work. With greedy the
    temperature is not used, and 0 is taken too (as generate takes temperature 0: greedy)."""
    values = (temperature, top_k, top_p, max_new_tokens)
    for (name, test, what), value in zip(SAMPLING_RULES, values, strict=True):
        if name == "--temperature" and greedy:
            test, what = (lambda v: _real(v) and v >= 0), "a finite number >= 0 with --greedy"
        if not test(value):
            raise FlagError(f"sample: {name} must be {what}: got {value}")


def sample(checkpoint, prompt=None, max_new_tokens=200, temperature=0.8, top_k=None,
           greedy=False, seed=0, top_p=None):
    """The model's output for `prompt` as text (held-out examples when no prompt is given)."""
    # Only the checkpoint says whether the temperature is used (a text task samples at it; a
    # toy task's answers are greedy, so 0 is taken there as with --greedy): a temperature of 0
    # waits for it, every other setting is checked before a byte is read.
    zero = _real(temperature) and temperature == 0
    check_sampling(temperature, top_k, top_p, max_new_tokens, greedy or zero)
    if seed is not None and not (_count(seed) or seed == 0):  # (None: a random seed)
        raise FlagError(f"sample: --seed must be a whole number >= 0: got {seed}")
    if os.fspath(checkpoint) == "":
        raise FlagError("sample: --checkpoint must name a checkpoint file, not an empty string: "
                        "got ''")
    if os.path.isdir(checkpoint):
        inside = os.path.join(checkpoint, "checkpoint.npz")
        hint = f" (give {inside})" if os.path.isfile(inside) else ""
        raise FlagError(f"sample: --checkpoint {checkpoint} is a folder, not a checkpoint "
                        f"file{hint}")
    model, ck = load_model(checkpoint)
    cfg, vocab = ck["config"], ck["vocab"]
    stoi = {s: i for i, s in enumerate(vocab)}
    rng = np.random.default_rng(seed)
    if cfg["task"] in ("text", "shakespeare"):  # a character-level language model
        check_sampling(temperature, top_k, top_p, max_new_tokens, greedy)  # 0: --greedy only
        prompt = prompt if prompt else vocab[int(rng.integers(len(vocab)))]
        unknown = sorted(set(prompt) - set(stoi))
        if unknown:
            raise ValueError(f"sample: characters {unknown} are not in the model's vocabulary")
        ids = model.generate(tensor([[stoi[c] for c in prompt]]), max_new_tokens,
                             temperature=temperature, top_k=top_k, greedy=greedy, rng=rng,
                             top_p=top_p)
        return "".join(vocab[i] for i in ids.numpy()[0])
    return _answer_toy(model, cfg, prompt, rng)


def _answer_toy(model, cfg, prompt, rng):
    """Greedy answers to a toy-task prompt (or to five held-out problems): a problem has one
    right answer, so none is sampled (the sampling settings are unused)."""
    task = make_task(cfg["task"], length=cfg.get("length"))
    if prompt is None:
        x, _ = task.batch(rng, 5, "heldout")
        problems = [x[i, : task.prompt_len()] for i in range(5)]  # x holds each whole prompt
    else:
        problems = [np.array(_toy_prompt(task, prompt))]
    lines = []
    for p in problems:
        answer_len = task.seq_len + 1 - len(p)
        out = model.generate(tensor(p[None]), answer_len, greedy=True).numpy()[0]
        answer = task.decode(out[len(p):])
        note = f"   (= {answer[::-1].lstrip('0') or '0'})" if task.name == "add" else ""
        lines.append(f"{task.decode(p)}{answer}{note}")
    return "\n".join(lines)


def _toy_prompt(task, prompt):
    """'31415926' -> the ids of '31415926>' ('123+456' -> '123+456=' for add)."""
    text = prompt.replace(" ", "")
    if task.name == "add":
        a, _, b = text.rstrip("=").partition("+")
        if not (a.isdigit() and b.isdigit()) or len(a) > task.length or len(b) > task.length:
            raise ValueError(f"sample: the add model takes 'a+b' with up to {task.length} digits "
                             f"each, got {prompt!r}")
        return task.encode(a.zfill(task.length) + "+" + b.zfill(task.length) + "=")
    digits = text.rstrip(">")
    if not digits.isdigit() or len(digits) != task.length:
        raise ValueError(f"sample: the {task.name} model takes exactly {task.length} digits, got "
                         f"{prompt!r}")
    return task.encode(digits + ">")
