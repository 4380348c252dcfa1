"""`tinyattn sample`: use a trained checkpoint — answer toy-task prompts or continue text.

The checkpoint carries the model's configuration and vocabulary, so nothing else is needed
(not even the text file a text model was trained on).
"""

import numpy as np

from .data import make_task
from .errors import CheckpointError
from .nn import TinyTransformer
from .serialization import load
from .tensor import tensor


def load_model(checkpoint):
    """(model in eval mode, checkpoint dict) from a checkpoint.npz written by `train`."""
    ck = load(checkpoint)
    for key in ("model", "model_config", "config", "vocab"):
        if key not in ck:
            raise CheckpointError(f"sample: {checkpoint} is not a training checkpoint (it has no "
                                  f"{key!r} entry)")
    model = TinyTransformer(**ck["model_config"])  # older checkpoints: defaults for new options
    model.load_state_dict(ck["model"])
    return model.eval(), ck


def sample(checkpoint, prompt=None, max_new_tokens=200, temperature=0.8, top_k=None,
           greedy=False, seed=0):
    """The model's output for `prompt` as text (held-out examples when no prompt is given)."""
    model, ck = load_model(checkpoint)
    cfg, vocab = ck["config"], ck["vocab"]
    stoi = {s: i for i, s in enumerate(vocab)}
    rng = np.random.default_rng(seed)
    if cfg["task"] in ("text", "shakespeare"):  # a character-level language model
        prompt = prompt if prompt else vocab[int(rng.integers(len(vocab)))]
        unknown = sorted(set(prompt) - set(stoi))
        if unknown:
            raise ValueError(f"sample: characters {unknown} are not in the model's vocabulary")
        ids = model.generate(tensor([[stoi[c] for c in prompt]]), max_new_tokens,
                             temperature=temperature, top_k=top_k, greedy=greedy, rng=rng)
        return "".join(vocab[i] for i in ids.numpy()[0])
    task = make_task(cfg["task"], length=cfg["length"])
    if prompt is None:
        x, y = task.batch(rng, 5, "heldout")
        problems = [np.concatenate([x[i], y[i][-1:]])[: task.prompt_len()] for i in range(5)]
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
