"""A GPT-style decoder: CausalSelfAttention, MLP, TransformerBlock (pre-LN) and TinyTransformer.

Shapes: B batch, T time (tokens), C channels (d_model), H heads, D = C / H per head, V vocab.
Initialisation follows GPT-2: normal(0, 0.02) weights, zero biases, residual projections scaled
by 1/√(2·n_layers), and the output head shares its weight with the token embedding. Options
(TransformerConfig): rotary position embeddings instead of a learned table, RMSNorm instead of
LayerNorm, an untied head, Linear layers without bias. `TinyTransformer.tensor_shapes` gives
the shapes of the tensors a configuration makes without making them (each class states its own
next to its constructor), so a checkpoint's configuration can be sized before a model is built.
"""

import math
import numbers
from dataclasses import asdict, dataclass

import numpy as np

from .. import functional as F
from ..autograd import no_grad
from ..errors import ShapeError
from ..tensor import ones, randn, tensor
from .attention import RotaryEmbedding
from .layers import Dropout, Embedding, LayerNorm, Linear, RMSNorm
from .module import Module, ModuleList, eval_mode


class CausalSelfAttention(Module):
    """Multi-head self-attention where token t sees tokens 0..t, with one fused QKV projection;
    with rotary=max_len, q and k are rotated by their positions (RoPE) before the scores; with
    qk_norm, q and k are first RMS-normalised per head (one learned gain of D per norm)."""

    def __init__(self, d_model, n_heads, dropout=0.0, rotary=None, bias=True, qk_norm=False):
        super().__init__()
        if d_model % n_heads:
            raise ShapeError(f"CausalSelfAttention: d_model {d_model} is not divisible by "
                             f"n_heads {n_heads}")
        self.n_heads = n_heads
        self.qkv = Linear(d_model, 3 * d_model, bias=bias)
        self.proj = Linear(d_model, d_model, bias=bias)
        self.drop = Dropout(dropout)
        self.rotary = RotaryEmbedding(d_model // n_heads, rotary) if rotary else None
        self.q_norm = RMSNorm(d_model // n_heads, eps=1e-5) if qk_norm else None
        self.k_norm = RMSNorm(d_model // n_heads, eps=1e-5) if qk_norm else None

    @staticmethod
    def tensor_shapes(d_model, n_heads, rotary=None, bias=True, qk_norm=False):
        """({parameter: shape}, {buffer: shape}) of the constructor above, none made."""
        head = d_model // n_heads
        params = {**_linear_shapes("qkv", d_model, 3 * d_model, bias),
                  **_linear_shapes("proj", d_model, d_model, bias)}
        if qk_norm:
            params.update({"q_norm.weight": (head,), "k_norm.weight": (head,)})  # RMSNorm gains
        # RotaryEmbedding's cos and sin tables: (max_len, D/2) each, non-persistent buffers
        buffers = {f"rotary.{t}": (rotary, head // 2) for t in ("cos", "sin")} if rotary else {}
        return params, buffers

    def forward(self, x, return_weights=False, past=None):
        """past (a dict, KVCache's entry for this layer): the keys and values of the tokens
        before x, to which x's queries attend too; x's own are added to it."""
        B, T, C = x.shape  # noqa: N806 - the shape names of the docstring
        H = self.n_heads  # noqa: N806
        qkv = self.qkv(x)  # (B, T, 3C)
        qkv = qkv.reshape(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)  # (3, B, H, T, D)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (B, H, T, D) each
        start = 0 if not past else past["k"].shape[2]  # the position of x's first token
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)  # (B, H, T, D): unit RMS per head, times gain
        if self.rotary is not None:
            q, k = self.rotary(q, start), self.rotary(k, start)  # (B, H, T, D): by position
        mask, causal = None, True
        if past is not None:  # keys and values of every token so far: (B, H, start + T, D)
            if start:
                k, v = F.cat([past["k"], k], 2), F.cat([past["v"], v], 2)
                # query i (at position start + i) sees keys 0..start + i: the causal mask
                # aligned bottom-right; one new token sees them all
                if T > 1:
                    mask = ones(T, start + T, backend=x.backend).tril(start) > 0  # (T, S)
                causal = False
            past["k"], past["v"] = k.detach(), v.detach()
        if return_weights:
            weights = F.attention_weights(q, k, mask, is_causal=causal)  # (B, H, T, S)
            y = weights @ v  # (B, H, T, D)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                               is_causal=causal)  # (B, H, T, D)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C): heads side by side again
        y = self.drop(self.proj(y))  # (B, T, C)
        return (y, weights) if return_weights else y


class MLP(Module):
    """Linear up to 4C, GELU (GPT-2's tanh form), Linear back down to C."""

    def __init__(self, d_model, dropout=0.0, ratio=4, bias=True):
        super().__init__()
        self.fc = Linear(d_model, ratio * d_model, bias=bias)
        self.proj = Linear(ratio * d_model, d_model, bias=bias)
        self.drop = Dropout(dropout)

    @staticmethod
    def tensor_shapes(d_model, ratio=4, bias=True):
        """({parameter: shape}, {buffer: shape}) of the constructor above, none made."""
        return {**_linear_shapes("fc", d_model, ratio * d_model, bias),
                **_linear_shapes("proj", ratio * d_model, d_model, bias)}, {}

    def forward(self, x):
        h = F.gelu(self.fc(x), approximate="tanh")  # (B, T, 4C)
        return self.drop(self.proj(h))  # (B, T, C)


class TransformerBlock(Module):
    """x + attn(ln1(x)), then + mlp(ln2(x)): pre-LN residual block (norm "layer" or "rms")."""

    def __init__(self, d_model, n_heads, dropout=0.0, rotary=None, norm="layer", bias=True,
                 qk_norm=False):
        super().__init__()
        self.ln1 = _norm(norm, d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, dropout, rotary, bias, qk_norm)
        self.ln2 = _norm(norm, d_model)
        self.mlp = MLP(d_model, dropout, bias=bias)

    @staticmethod
    def tensor_shapes(d_model, n_heads, rotary=None, norm="layer", bias=True, qk_norm=False):
        """({parameter: shape}, {buffer: shape}) of the constructor above, none made."""
        return _nest({"ln1": _norm_shapes(norm, d_model),
                      "attn": CausalSelfAttention.tensor_shapes(d_model, n_heads, rotary, bias,
                                                                qk_norm),
                      "ln2": _norm_shapes(norm, d_model),
                      "mlp": MLP.tensor_shapes(d_model, bias=bias)})

    def forward(self, x, return_weights=False, past=None):
        if return_weights:
            a, weights = self.attn(self.ln1(x), return_weights=True, past=past)
            x = x + a  # (B, T, C)
            return x + self.mlp(self.ln2(x)), weights
        x = x + self.attn(self.ln1(x), past=past)  # (B, T, C)
        return x + self.mlp(self.ln2(x))  # (B, T, C)


NORMS = {"layer": LayerNorm, "rms": RMSNorm}


def _norm_class(kind):
    if kind not in NORMS:
        raise ValueError(f"TinyTransformer: norm must be one of {', '.join(NORMS)}, got {kind!r}")
    return NORMS[kind]


def _norm(kind, d_model):
    return _norm_class(kind)(d_model, eps=1e-5)


def _norm_shapes(kind, d_model):
    """({parameter: shape}, {}) of _norm(kind, d_model): LayerNorm a gain and a bias, RMSNorm
    only a gain."""
    shapes = {"weight": (d_model,)}
    if _norm_class(kind) is LayerNorm:
        shapes["bias"] = (d_model,)
    return shapes, {}


def _linear_shapes(name, in_features, out_features, bias):
    """The parameters of Linear(in_features, out_features, bias) as the child `name`."""
    shapes = {f"{name}.weight": (out_features, in_features)}
    return {**shapes, f"{name}.bias": (out_features,)} if bias else shapes


def _nest(children):
    """{child name: (parameters, buffers)} -> (parameters, buffers) named by dotted path."""
    params, buffers = {}, {}
    for child, (p, b) in children.items():
        params.update({f"{child}.{k}": v for k, v in p.items()})
        buffers.update({f"{child}.{k}": v for k, v in b.items()})
    return params, buffers


@dataclass
class TransformerConfig:
    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    max_len: int = 64
    dropout: float = 0.0
    rotary: bool = False  # rotary position embeddings in every attention (no wpe table)
    norm: str = "layer"  # "layer" (LayerNorm) or "rms" (RMSNorm)
    tie: bool = True  # the LM head shares the token embedding's weight
    bias: bool = True  # Linear layers have biases (the head never has one)
    qk_norm: bool = False  # q and k RMS-normalised per head before the scores


class TinyTransformer(Module):
    """Token (+ learned position) embeddings, n_layers pre-LN blocks, a final norm, an LM head
    (tied to the token embedding by default). The keyword options are TransformerConfig's."""

    def __init__(self, vocab_size, d_model=64, n_heads=4, n_layers=2, max_len=64, dropout=0.0,
                 rotary=False, norm="layer", tie=True, bias=True, qk_norm=False):
        super().__init__()
        self.config = TransformerConfig(vocab_size, d_model, n_heads, n_layers, max_len, dropout,
                                        rotary, norm, tie, bias, qk_norm)
        self.wte = Embedding(vocab_size, d_model)
        self.wpe = None if rotary else Embedding(max_len, d_model)
        self.drop = Dropout(dropout)
        self.blocks = ModuleList(
            TransformerBlock(d_model, n_heads, dropout, max_len if rotary else None, norm, bias,
                             qk_norm)
            for _ in range(n_layers))
        self.ln_f = _norm(norm, d_model)
        self.lm_head = Linear(d_model, vocab_size, bias=False)
        if tie:
            self.lm_head.weight = self.wte.weight  # weight tying, as in GPT-2
        self._init_gpt2(n_layers)

    @staticmethod
    def tensor_shapes(vocab_size, d_model=64, n_heads=4, n_layers=2, max_len=64, dropout=0.0,
                      rotary=False, norm="layer", tie=True, bias=True, qk_norm=False):
        """The shapes of the tensors TinyTransformer(same arguments) makes, none of them made:
        ({parameter: shape}, {buffer: shape}) named as named_parameters() and named_buffers()
        name them (a tied head is the token embedding's weight: listed once, as wte.weight).
        What a checkpoint of a configuration holds, and what its model would allocate, known
        before it is built (`tinyattn sample` refuses a forged configuration by them)."""
        children = {"wte": ({"weight": (vocab_size, d_model)}, {})}
        if not rotary:
            children["wpe"] = ({"weight": (max_len, d_model)}, {})
        for i in range(n_layers):
            children[f"blocks.{i}"] = TransformerBlock.tensor_shapes(
                d_model, n_heads, max_len if rotary else None, norm, bias, qk_norm)
        children["ln_f"] = _norm_shapes(norm, d_model)
        if not tie:
            children["lm_head"] = ({"weight": (vocab_size, d_model)}, {})  # never a bias
        return _nest(children)

    def _init_gpt2(self, n_layers):
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                p._data[...] = 0
            elif name.startswith("ln") or ".ln" in name or "_norm." in name:  # norm gains
                p._data[...] = 1
            else:
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith("proj.weight") else 0.02
                p._data[...] = randn(*p.shape, dtype=p.dtype)._data * std

    def forward(self, idx, return_attention=False, cache=None):
        """idx (B, T) integer ids -> logits (B, T, V); with return_attention, also the attention
        weights of every layer, each (B, H, T, S). With cache (a KVCache), idx continues the
        tokens the cache has seen: only the new tokens are computed, their queries attending to
        the cached keys and values too, and the cache grows by them (generate's decoding)."""
        idx = idx if hasattr(idx, "backend") else tensor(np.asarray(idx))
        B, T = idx.shape  # noqa: N806
        start = 0 if cache is None else cache.length  # the position of idx's first token
        if start + T > self.config.max_len:
            raise ShapeError(f"TinyTransformer: a sequence of {start + T} tokens is longer than "
                             f"max_len {self.config.max_len}")
        # positions are the table's rows start..start+T-1: a slice, cheaper than an id lookup
        x = self.wte(idx)  # (B, T, C)
        if self.wpe is not None:
            x = x + self.wpe.weight[start:start + T]  # (B, T, C)
        x = self.drop(x)
        maps = []
        for i, block in enumerate(self.blocks):
            extra = {} if cache is None else {"past": cache.layers.setdefault(i, {})}
            if return_attention:
                x, weights = block(x, return_weights=True, **extra)
                maps.append(weights)
            else:
                x = block(x, **extra)  # (B, T, C)
        if cache is not None:
            cache.length += T
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        return (logits, maps) if return_attention else logits

    @no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, greedy=False,
                 rng=None, top_p=None, use_cache=True):
        """Extend idx (B, T), T >= 1 (a Tensor, array or nested list of integer token ids: any
        other dtype is forward's DTypeError, an id without an embedding row its error), by
        max_new_tokens: greedy, or sampled at `temperature` from the `top_k` most likely tokens
        and/or the smallest set whose probability reaches `top_p` (see next_token_probs).
        use_cache: keep every layer's keys and values (a KVCache) and feed each new token alone,
        until max_len tokens; then (or without it) the last max_len tokens are run again for
        each new one. It decodes in eval mode (no dropout: greedy is deterministic), and every
        module has its own mode back after.

        rng, where the sampled tokens are drawn from: None (tinyattn's own random stream, of
        the backend of the model's weights, which `tinyattn.manual_seed` seeds: as torch's
        sampling follows torch.manual_seed), an int seed >= 0 (a fresh
        numpy.random.default_rng(seed)), a numpy.random.Generator, or a tinyattn.Generator."""
        _check_sampling("generate", temperature, top_k, top_p, greedy_at_zero=True)
        if not _whole(max_new_tokens) or max_new_tokens < 0:
            raise ValueError(f"generate: max_new_tokens must be a whole number >= 0, got "
                             f"{max_new_tokens!r}")
        backend = self.wte.weight.backend
        draw = _sampler(rng, backend)
        ids = np.asarray(idx.numpy() if hasattr(idx, "numpy") else idx)
        if ids.ndim != 2 or ids.shape[1] < 1:
            raise ShapeError(f"generate: idx must be (B, T) token ids with T >= 1, got shape "
                             f"{ids.shape}")
        # the whole prompt through the embedding op's own checks, as forward's: 1.9 (or True)
        # is no token, nor is an id without a row, even before the last max_len tokens run
        # (F.embedding, not self.wte: a hook on wte sees only the model's own calls)
        F.embedding(tensor(ids, backend=backend), self.wte.weight)
        ids = ids.astype(np.int64)
        with eval_mode(self):  # dropout off while decoding; each module's mode back after
            cache = KVCache() if use_cache else None
            for _ in range(max_new_tokens):
                if cache is not None and 0 < cache.length < self.config.max_len:
                    logits = self(tensor(ids[:, -1:], backend=backend), cache=cache)  # one token
                else:
                    if cache is not None and cache.length:  # full: run the window from now on
                        cache = None
                    window = ids[:, -self.config.max_len:]
                    logits = self(tensor(window, backend=backend), cache=cache)
                last = logits[:, -1, :].numpy().astype(np.float64)  # (B, V)
                if greedy or temperature == 0:
                    nxt = last.argmax(axis=-1)
                else:
                    nxt = draw(next_token_probs(last, temperature, top_k, top_p))
                ids = np.concatenate([ids, nxt[:, None]], axis=1)
        return tensor(ids)

    def extra_repr(self):
        return ", ".join(f"{k}={v}" for k, v in asdict(self.config).items())


class KVCache:
    """The keys and values every attention layer has computed so far (layers: {index: {"k",
    "v"}}, each (B, H, length, D)) and how many tokens they cover: TinyTransformer(idx,
    cache=...) then computes only idx's tokens, the next positions."""

    def __init__(self):
        self.layers, self.length = {}, 0

    def __repr__(self):
        return f"KVCache({self.length} tokens, {len(self.layers)} layers)"


def _sampler(rng, backend):
    """generate's `rng` as a function: probabilities (B, V) -> one token id per row (B,)."""
    from ..generator import Generator

    if rng is None:
        stream = backend.rng  # what tinyattn.manual_seed seeds (dropout, randn draw from it)
    elif isinstance(rng, Generator):
        stream, backend = rng.rng, rng.backend
    elif isinstance(rng, np.random.Generator):
        stream = rng
    elif _whole(rng):
        if rng < 0:
            raise ValueError(f"generate: rng as a seed must be an int >= 0, got {rng!r}")
        stream = np.random.default_rng(int(rng))
    else:
        raise TypeError(f"generate: rng must be None (tinyattn's random stream, seeded by "
                        f"tinyattn.manual_seed), an int seed, a numpy.random.Generator or a "
                        f"tinyattn.Generator, got {type(rng).__name__}")
    if isinstance(stream, np.random.Generator):
        return lambda p: np.array([stream.choice(len(row), p=row) for row in p], dtype=np.int64)

    def inverse_cdf(p):  # a device stream (CuPy's has no choice): one uniform per row
        u = np.asarray(backend.to_numpy(stream.random(len(p))), dtype=np.float64)
        out = np.empty(len(p), dtype=np.int64)
        for i, row in enumerate(p):
            cdf = np.cumsum(row)
            j = int(np.searchsorted(cdf, u[i] * cdf[-1], side="right"))  # row[j] > 0
            out[i] = min(j, int(np.flatnonzero(row)[-1]))  # u*total rounded up to the total
        return out

    return inverse_cdf


def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """The distribution generate() samples from, per row of logits (B, V) (or of one row, (V,)):
    softmax(logits / temperature) over the top_k most likely tokens (ties at the k-th value
    kept) and, with top_p, over the fewest most likely tokens whose probability reaches top_p
    (nucleus sampling, the cumulative mass compared within a few float64 roundings); every
    other token gets probability 0. Computed as softmax((logits - max) / temperature), so a
    tiny temperature or huge logits give the argmax (ties shared), never NaN. NaN logits or a
    row of only -inf logits are errors."""
    _check_sampling("next_token_probs", temperature, top_k, top_p)
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim == 0 or logits.shape[-1] == 0:
        raise ValueError(f"next_token_probs: logits must be (V,) or (B, V) with V >= 1, got "
                         f"shape {logits.shape}")
    if np.isnan(logits).any():
        raise ValueError(f"next_token_probs: logits contain NaN (shape {logits.shape})")
    if (logits == -np.inf).all(axis=-1).any():
        raise ValueError("next_token_probs: a row of logits is all -inf: no token is possible")
    if top_k is not None:
        kth = np.sort(logits, axis=-1)[..., [-min(top_k, logits.shape[-1])]]
        logits = np.where(logits < kth, -np.inf, logits)
    top = logits.max(axis=-1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = np.where(logits == top, 0.0, logits - top)  # <= 0 (+inf's own: 0, not NaN)
        p = np.exp(shifted / temperature)  # overflows only to -inf: exp gives 0
    p /= p.sum(axis=-1, keepdims=True)  # the max has exp(0) = 1: the sum is >= 1
    if top_p is not None:
        order = np.argsort(-p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=-1)
        before = np.cumsum(sorted_p, axis=-1) - sorted_p  # mass of the more likely tokens
        # the cumulative sum is off by a few roundings per token: a set whose mass reaches
        # top_p within that is enough (10 tokens of 0.1: top_p 0.8 keeps 8, not 9)
        slack = max(1e-12, 4 * p.shape[-1] * np.finfo(np.float64).eps)
        kept = before < top_p - slack
        kept[..., 0] = True  # the most likely token always stays
        keep = np.zeros_like(p, dtype=bool)
        np.put_along_axis(keep, order, kept, axis=-1)
        p = np.where(keep, p, 0.0)
        p /= p.sum(axis=-1, keepdims=True)
    return p


def _real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _whole(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _check_sampling(name, temperature, top_k, top_p, greedy_at_zero=False):
    """A sampling setting that cannot work is an error naming it, never a silent other
    distribution (a negative temperature would favour the least likely tokens)."""
    cold = temperature == 0 and greedy_at_zero
    rules = [
        ("temperature", temperature, _real(temperature) and (temperature > 0 or cold),
         "a finite number >= 0 (0: greedy)" if greedy_at_zero else "a finite number > 0"),
        ("top_k", top_k, top_k is None or _whole(top_k) and top_k >= 1,
         "a whole number >= 1 (or None: every token)"),
        ("top_p", top_p, top_p is None or _real(top_p) and 0 < top_p <= 1, "in (0, 1] (or None)"),
    ]
    for setting, value, ok, what in rules:
        if not ok:
            raise ValueError(f"{name}: {setting} must be {what}, got {value!r}")
