"""Harvard NLP's "The Annotated Transformer" and torch's own nn transformer modules, ported by
swapping `torch` for tinyattn: what such code reads and calls, compared with torch."""

import copy
import math
import warnings

import numpy as np
import pytest

import tinyattn as ta


def _annotated(lib):
    """The Annotated Transformer's pieces, written for `lib` (torch or tinyattn) as the
    notebook writes them for torch."""
    nn = lib.nn

    def clones(module, n):
        return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])

    class LayerNorm(nn.Module):
        def __init__(self, features, eps=1e-6):
            super().__init__()
            self.a_2 = nn.Parameter(lib.ones(features))
            self.b_2 = nn.Parameter(lib.zeros(features))
            self.eps = eps

        def forward(self, x):
            mean = x.mean(-1, keepdim=True)
            std = x.std(-1, keepdim=True)
            return self.a_2 * (x - mean) / (std + self.eps) + self.b_2

    def attention(query, key, value, mask=None):
        scores = lib.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = scores.softmax(dim=-1)
        return lib.matmul(p_attn, value), p_attn

    class MultiHeadedAttention(nn.Module):
        def __init__(self, h, d_model):
            super().__init__()
            self.d_k, self.h = d_model // h, h
            self.linears = clones(nn.Linear(d_model, d_model), 4)
            self.attn = None

        def forward(self, query, key, value, mask=None):
            if mask is not None:
                mask = mask.unsqueeze(1)
            nbatches = query.size(0)
            query, key, value = [
                lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                for lin, x in zip(self.linears, (query, key, value), strict=False)]
            x, self.attn = attention(query, key, value, mask=mask)
            x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
            return self.linears[-1](x)

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, max_len=64):
            super().__init__()
            pe = lib.zeros(max_len, d_model)
            position = lib.arange(0, max_len).unsqueeze(1)
            div_term = lib.exp(lib.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
            pe[:, 0::2] = lib.sin(position * div_term)
            pe[:, 1::2] = lib.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0))

        def forward(self, x):
            return x + self.pe[:, : x.size(1)].requires_grad_(False)

    class Model(nn.Module):
        def __init__(self, vocab, d_model=16, h=2):
            super().__init__()
            self.lut = nn.Embedding(vocab, d_model)
            self.pos = PositionalEncoding(d_model)
            self.norm = LayerNorm(d_model)
            self.self_attn = MultiHeadedAttention(h, d_model)
            self.proj = nn.Linear(d_model, vocab)
            self.d_model = d_model

        def forward(self, tgt, tgt_mask):
            x = self.pos(self.lut(tgt) * math.sqrt(self.d_model))
            x = x + self.self_attn(*(self.norm(x),) * 3, tgt_mask)
            return nn.functional.log_softmax(self.proj(x), dim=-1)

    def subsequent_mask(size):
        return lib.triu(lib.ones((1, size, size)), diagonal=1).type(lib.uint8) == 0

    class LabelSmoothing(nn.Module):
        def __init__(self, size, padding_idx, smoothing=0.0):
            super().__init__()
            self.criterion = nn.KLDivLoss(reduction="sum")
            self.padding_idx, self.size = padding_idx, size
            self.confidence, self.smoothing = 1.0 - smoothing, smoothing

        def forward(self, x, target):
            true_dist = x.data.clone()
            true_dist.fill_(self.smoothing / (self.size - 2))
            true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
            true_dist[:, self.padding_idx] = 0
            mask = lib.nonzero(target.data == self.padding_idx)
            if mask.dim() > 0:
                true_dist.index_fill_(0, mask.squeeze(), 0.0)
            return self.criterion(x, true_dist.clone().detach())

    return Model, subsequent_mask, LabelSmoothing


def test_annotated_transformer_step_matches_torch():
    """A copy-task step of the notebook's code (masks from `(tgt != pad).unsqueeze(-2) &
    subsequent_mask`, LabelSmoothing's KLDivLoss, `loss / ntokens`, Adam(0.9, 0.98, 1e-9) under
    the Noam LambdaLR) gives torch's loss, gradients and next loss from the same weights."""
    torch = pytest.importorskip("torch")
    vocab, pad = 11, 0
    data = np.random.default_rng(0).integers(1, vocab, size=(4, 8))
    data[:, -2:] = pad
    results = []
    for lib in (torch, ta):
        model_cls, subsequent_mask, smoothing = _annotated(lib)
        lib.manual_seed(0)
        model = model_cls(vocab)
        if lib is ta:
            model.load_state_dict({k: v.numpy() for k, v in results[0][0].items()})
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        opt = lib.optim.Adam(model.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)
        sched = lib.optim.lr_scheduler.LambdaLR(
            opt, lambda step: 16 ** -0.5 * min(max(step, 1) ** -0.5, max(step, 1) * 40 ** -1.5))
        crit = smoothing(vocab, pad, 0.1)
        losses, grads = [], None
        for _ in range(2):
            tgt = lib.tensor(data)
            tgt_in, tgt_y = tgt[:, :-1], tgt[:, 1:]
            mask = (tgt_in != pad).unsqueeze(-2) & subsequent_mask(tgt_in.size(-1)).type_as(
                (tgt_in != pad).data)
            ntokens = (tgt_y != pad).data.sum()
            x = model(tgt_in, mask)
            loss = crit(x.contiguous().view(-1, x.size(-1)), tgt_y.contiguous().view(-1)) / ntokens
            loss.backward()
            grads = grads or {k: p.grad.numpy().copy() for k, p in model.named_parameters()}
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
            losses.append(loss.item())
        results.append((state, losses, grads))
    (_, theirs, their_grads), (_, ours, our_grads) = results
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    for name, g in their_grads.items():
        np.testing.assert_allclose(our_grads[name], g, rtol=1e-4, atol=1e-6, err_msg=name)


def test_label_smoothing_of_a_zero_probability_is_silent_nan_as_torch():
    """The notebook's LabelSmoothing example feeds `predict.log()` with zeros in it (log 0 =
    -inf) where the smoothed target is 0: KLDivLoss gives NaN there, as torch's, without
    NumPy's 'invalid value encountered in multiply' RuntimeWarning (torch says nothing)."""
    torch = pytest.importorskip("torch")
    predict = [[0, 0.2, 0.7, 0.1, 0]] * 5
    target = [2, 1, 0, 3, 3]
    values = []
    for lib in (torch, ta):
        crit = _annotated(lib)[2](5, 0, 0.4)
        x = lib.tensor(predict, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loss = crit(x.log(), lib.tensor(target))
            loss.backward()
        values.append(loss.item())
    assert math.isnan(values[0]) and math.isnan(values[1])


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_probability_target_at_minus_inf_logit_is_silent(label_smoothing):
    """Class-probability targets with a -inf logit (a masked class) where the target is 0:
    torch's value (NaN, or inf with smoothing), without a NumPy RuntimeWarning."""
    torch = pytest.importorskip("torch")
    logits = [[-math.inf, -1.0, -0.5], [0.5, 0.25, 1.0]]
    probs = [[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]
    values = []
    for lib in (torch, ta):
        x = lib.tensor(logits, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loss = lib.nn.functional.cross_entropy(x, lib.tensor(probs),
                                                   label_smoothing=label_smoothing)
            loss.backward()
        values.append(loss.item())
    np.testing.assert_equal(values[1], values[0])


@pytest.mark.parametrize("kdim", [None, 4])
def test_multihead_attention_has_torchs_qkv_same_embed_dim(kdim):
    """Code that reads torch's packed-or-separate flag (`mha._qkv_same_embed_dim`, which torch's
    own encoder layer and weight converters check) before taking in_proj_weight or
    q_proj_weight/k_proj_weight/v_proj_weight."""
    torch = pytest.importorskip("torch")
    theirs = torch.nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim)
    ours = ta.nn.MultiheadAttention(8, 2, kdim=kdim, vdim=kdim)
    assert ours._qkv_same_embed_dim is theirs._qkv_same_embed_dim
    assert (ours.in_proj_weight is None) is (not theirs._qkv_same_embed_dim)


def test_transformer_reset_parameters_redraws_xavier_uniform():
    """torch.nn.Transformer._reset_parameters() (called again after loading or changing
    weights): every matrix Xavier-uniform again, vectors (biases, norms) left alone."""
    model = ta.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                              dim_feedforward=16)
    for p in model.parameters():
        p.data.fill_(5.0)
    model._reset_parameters()
    for name, p in model.named_parameters():
        if p.dim() > 1:
            bound = math.sqrt(6.0 / (p.shape[0] + p.shape[1]))
            assert float(p.abs().max()) <= bound, name
        else:
            assert float(p.min()) == float(p.max()) == 5.0, name
