"""Hugging Face-style generation code ported from torch (swap `torch` for `ta`), against torch.

Sampling filters as people copy them (top-k, top-p, min-p, repetition penalty), multinomial
as a function and as a method, beam-search index arithmetic, eos bookkeeping, and batching
with left padding (pad_sequence, attention masks, position ids, additive 4-D masks).
"""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

LOGITS = [[1.0, 3.0, 2.5, 0.5, 2.0, -1.0], [0.1, 0.2, 0.3, 0.45, 0.4, -1.0]]


def same(got, want):
    """ta tensor `got` equals torch tensor `want`: shape, dtype name and values."""
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    assert np.dtype(got.dtype).name == str(want.dtype).replace("torch.", ""), (
        got.dtype, want.dtype)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=0)


def both(fn):
    """fn run with (ta, tinyattn.functional) and with (torch, torch.nn.functional)."""
    return fn(ta, F), fn(torch, TF)


# ---- multinomial -----------------------------------------------------------------------------

def test_multinomial_is_a_tensor_method():
    """probs.multinomial(1) is torch's Tensor method; it was missing (AttributeError)."""
    def sample(t, _):
        probs = t.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
        return probs.multinomial(num_samples=1), probs.multinomial(2, replacement=True)
    (a1, a2), (t1, t2) = both(sample)
    same(a1, t1)
    same(a2, t2)


def test_multinomial_method_without_replacement_takes_generator():
    g = ta.Generator().manual_seed(0)
    probs = ta.tensor([[0.1, 0.2, 0.3, 0.4]])
    out = probs.multinomial(4, False, generator=g)
    assert sorted(out.tolist()[0]) == [0, 1, 2, 3]
    assert out.dtype == ta.long


# ---- sampling filters ------------------------------------------------------------------------

def _top_k(t, _, k=2):
    logits = t.tensor(LOGITS)
    v, _ = t.topk(logits, k)
    logits[logits < v[:, [-1]]] = -float("inf")
    return logits


def _top_p(t, f, top_p=0.6):
    logits = t.tensor(LOGITS)
    sorted_logits, sorted_indices = t.sort(logits, descending=True)
    cumulative_probs = t.cumsum(f.softmax(sorted_logits, dim=-1), dim=-1)
    sorted_indices_to_remove = cumulative_probs > top_p
    sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
    sorted_indices_to_remove[..., 0] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices,
                                                         sorted_indices_to_remove)
    return logits.masked_fill(indices_to_remove, -float("inf"))


def _min_p(t, _, min_p=0.3):
    scores = t.tensor(LOGITS)
    probs = t.softmax(scores, dim=-1)
    top_probs, _ = probs.max(dim=-1, keepdim=True)
    tokens_to_remove = probs < min_p * top_probs
    sorted_indices = t.argsort(scores, descending=True, dim=-1)
    sorted_indices_to_remove = t.gather(tokens_to_remove, dim=-1, index=sorted_indices)
    sorted_indices_to_remove[..., :1] = False
    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices,
                                                         sorted_indices_to_remove)
    return scores.masked_fill(indices_to_remove, -float("inf"))


def _repetition_penalty(t, _, penalty=1.3):
    logits = t.tensor([[1.0, -2.0, 3.0, 0.5], [0.1, 0.2, -0.3, 0.4]])
    input_ids = t.tensor([[0, 1, 1], [3, 2, 0]])
    score = t.gather(logits, 1, input_ids)
    score = t.where(score < 0, score * penalty, score / penalty)
    logits.scatter_(1, input_ids, score)
    return logits


@pytest.mark.parametrize("fn", [_top_k, _top_p, _min_p, _repetition_penalty])
def test_sampling_filters_match_torch(fn):
    got, want = both(fn)
    same(got, want)


# ---- beam search and eos ---------------------------------------------------------------------

def test_beam_search_step_matches_torch():
    def step(t, _, batch=2, num_beams=2, vocab=5):
        probs = [[0.1, 0.5, 0.2, 0.9, 0.3], [0.8, 0.1, 0.0, 0.4, 0.6],
                 [0.2, 0.3, 0.7, 0.1, 0.05], [0.9, 0.2, 0.35, 0.45, 0.15]]
        scores = t.tensor(probs).log() + t.tensor([0.0, -1.0, 0.0, -0.5])[:, None]
        scores, tokens = t.topk(scores.view(batch, -1), 2 * num_beams, dim=1, largest=True,
                                sorted=True)
        beam = t.div(tokens, vocab, rounding_mode="floor")
        beam_idx = (beam[:, :num_beams] + t.arange(batch).unsqueeze(1) * num_beams).view(-1)
        ids = t.arange(8).view(4, 2)[beam_idx, :]
        return t.cat([ids, (tokens % vocab)[:, :num_beams].reshape(-1).unsqueeze(-1)], dim=-1)
    got, want = both(step)
    same(got, want)


def test_eos_bookkeeping_matches_torch():
    def track(t, _, eos=2, pad=0):
        next_tokens = t.tensor([2, 3, 4])
        unfinished = t.tensor([1, 1, 0])
        tokens = next_tokens * unfinished + pad * (1 - unfinished)
        unfinished.mul_((next_tokens != eos).long())
        return tokens, unfinished
    (a1, a2), (t1, t2) = both(track)
    same(a1, t1)
    same(a2, t2)


# ---- batching --------------------------------------------------------------------------------

def test_left_padded_batch_masks_and_positions_match_torch():
    def batch(t, _, pad=0):
        seqs = [t.tensor([1, 2, 3]), t.tensor([4]), t.tensor([5, 6])]
        ids = t.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=pad,
                                          padding_side="left")
        mask = (ids != pad).long()
        pos = mask.long().cumsum(-1) - 1
        pos.masked_fill_(mask == 0, 1)
        ext = (1.0 - mask[:, None, None, :]) * t.finfo(t.float32).min
        causal = t.tril(t.ones(3, 3, dtype=t.bool))[None, None].expand(3, 1, 3, 3)
        return ids, mask, pos, ext, causal & mask[:, None, None, :].bool()
    got, want = both(batch)
    for g, w in zip(got, want, strict=True):
        same(g, w)


# ---- counts given as integer 0-d tensors -----------------------------------------------------

COUNT_CALLS = {
    "topk": lambda t, f, k: t.topk(t.arange(6.0).view(2, 3), k),
    "kthvalue": lambda t, f, k: t.kthvalue(t.arange(6.0).view(2, 3), k),
    "multinomial": lambda t, f, k: t.multinomial(t.tensor([[0.0, 1.0, 1.0]]), k).sort()[0],
    "one_hot": lambda t, f, k: f.one_hot(t.tensor([1]), num_classes=k + 1),
    "chunk": lambda t, f, k: t.arange(5).chunk(k),
    "split": lambda t, f, k: t.arange(5).split(k),
    "pad": lambda t, f, k: f.pad(t.ones(1, 2), (0, k), value=0.0),
    "diff": lambda t, f, k: t.tensor([1, 4, 9, 16]).diff(n=k),
}


@pytest.mark.parametrize("name", sorted(COUNT_CALLS))
def test_counts_take_integer_0d_tensors_as_torch(name):
    """k = mask.sum() is an int64 0-d tensor; torch takes it as the int (ta refused it)."""
    call = COUNT_CALLS[name]
    got = call(ta, F, ta.tensor(2))
    want = call(torch, TF, torch.tensor(2))
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        same(g, w)


def test_counts_still_refuse_float_tensors():
    with pytest.raises((TypeError, IndexError), match="topk"):
        ta.topk(ta.arange(3.0), ta.tensor(2.0))
    with pytest.raises(TypeError, match="multinomial"):
        ta.multinomial(ta.tensor([0.5, 0.5]), ta.tensor(1.0))


# ---- dims given as NumPy ints or integer 0-d tensors -----------------------------------------

DIM_CALLS = {
    "sum": lambda t, d: t.arange(6.0).view(2, 3).sum(d),
    "argmax": lambda t, d: t.arange(6.0).view(2, 3).argmax(d),
    "cat": lambda t, d: t.cat([t.ones(2, 1), t.zeros(2, 2)], d),
    "gather": lambda t, d: t.arange(6.0).view(2, 3).gather(d, t.tensor([[0], [2]])),
    "scatter": lambda t, d: t.zeros(2, 3).scatter(d, t.tensor([[0], [2]]), 1.0),
    "sort": lambda t, d: t.tensor([[3.0, 1.0, 2.0]]).sort(d, descending=True)[1],
    "topk": lambda t, d: t.tensor([[3.0, 1.0, 2.0]]).topk(2, dim=d)[1],
    "cumsum": lambda t, d: t.arange(6).view(2, 3).cumsum(d),
    "unsqueeze": lambda t, d: t.ones(2, 3).unsqueeze(d),
    "transpose": lambda t, d: t.arange(6).view(2, 3).transpose(d, 0),
}


@pytest.mark.parametrize("kind", ["numpy", "tensor"])
@pytest.mark.parametrize("name", sorted(DIM_CALLS))
def test_dims_take_numpy_ints_and_integer_0d_tensors(name, kind):
    """torch takes dim=np.int64(1) and dim=torch.tensor(1) (ta: 'dim must be an int')."""
    call = DIM_CALLS[name]
    dim = {"numpy": lambda m: np.int64(1), "tensor": lambda m: m.tensor(1)}[kind]
    same(call(ta, dim(ta)), call(torch, dim(torch)))


def test_dims_still_refuse_floats_and_float_tensors():
    with pytest.raises(TypeError, match="sum: dim must be an int"):
        ta.ones(2, 3).sum(1.0)
    with pytest.raises(TypeError, match="sum: dim must be an int"):
        ta.ones(2, 3).sum(ta.tensor(1.0))
