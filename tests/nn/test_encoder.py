"""nn.TransformerEncoderLayer and nn.TransformerEncoder against torch's: the same weights (a
torch state dict loads as is), outputs and input gradients, post- and pre-LN, masks."""

import itertools

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn

torch = pytest.importorskip("torch")

E, H, S, N = 8, 2, 5, 3


def _same_layer(**kwargs):
    theirs = torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=16, **kwargs).double().eval()
    ours = nn.TransformerEncoderLayer(E, H, dim_feedforward=16, dtype=ta.float64,
                                      **kwargs).eval()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _run(lib, module, x, **kwargs):
    xx = lib.tensor(x, requires_grad=True)
    kw = {k: None if v is None else lib.tensor(v) for k, v in kwargs.items() if k != "is_causal"}
    if "is_causal" in kwargs:
        kw["is_causal"] = kwargs["is_causal"]
    y = module(xx, **kw)
    (y * lib.tensor(x)).sum().backward()
    return y.detach().numpy(), xx.grad.numpy()


@pytest.mark.parametrize("batch_first,norm_first,activation,bias", list(itertools.product(
    [False, True], [False, True], ["relu", "gelu"], [True, False])))
def test_encoder_layer_matches_torch(batch_first, norm_first, activation, bias):
    ours, theirs = _same_layer(batch_first=batch_first, norm_first=norm_first,
                               activation=activation, bias=bias)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, S, E) if batch_first else (S, N, E))
    padding = rng.random((N, S)) > 0.7
    padding[:, 0] = False
    causal = np.triu(np.ones((S, S), bool), 1)  # torch's bool masks: True = may not attend
    for kwargs in [{}, {"src_key_padding_mask": padding}, {"src_mask": causal, "is_causal": True},
                   {"src_mask": rng.standard_normal((S, S))}]:
        for got, want in zip(_run(ta, ours, x, **kwargs), _run(torch, theirs, x, **kwargs),
                             strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


def test_encoder_stacks_copies_of_the_layer_as_torch():
    layer, tlayer = _same_layer(batch_first=True)
    ours = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(E, dtype=ta.float64)).eval()
    theirs = torch.nn.TransformerEncoder(tlayer, 3, norm=torch.nn.LayerNorm(E).double(),
                                         enable_nested_tensor=False).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    state = {k: v.detach().numpy() * (1 + 0.1 * i)  # every layer its own weights
             for i, (k, v) in enumerate(theirs.state_dict().items())}
    ours.load_state_dict(state)
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight
    x = np.random.default_rng(1).standard_normal((N, S, E))
    for got, want in zip(_run(ta, ours, x), _run(torch, theirs, x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    with pytest.raises(ValueError, match="activation must be 'relu', 'gelu' or a callable"):
        nn.TransformerEncoderLayer(E, H, activation="swish")
    with pytest.raises(ta.ShapeError, match="num_layers must be a whole number >= 0"):
        nn.TransformerEncoder(layer, -1)


def test_encoder_layer_trains_with_dropout_in_train_mode():
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=16, dropout=0.5, batch_first=True)
    x = ta.randn(N, S, E)
    ta.manual_seed(0)
    a = layer(x)
    ta.manual_seed(1)
    assert not np.allclose(a.detach().numpy(), layer(x).detach().numpy())  # dropout is on
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())
    layer.train()
    layer(x).sum().backward()
    assert all(p.grad is not None for p in layer.parameters())


def test_encoder_layer_defaults_and_settings_as_torch():
    """torch's defaults (dim_feedforward 2048, dropout 0.1, relu, eps 1e-5, sequence first),
    a layer_norm_eps that matters, and callable or module activations."""
    ours, theirs = nn.TransformerEncoderLayer(E, H), torch.nn.TransformerEncoderLayer(E, H)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert ours.self_attn.dropout == theirs.self_attn.dropout == 0.1
    assert ours.dropout.p == theirs.dropout.p == 0.1
    x = np.random.default_rng(2).standard_normal((S, N, E))  # (S, N, E): batch_first=False
    for kwargs in [{}, {"layer_norm_eps": 0.5}, {"activation": "gelu"}]:
        ours, theirs = _same_layer(**kwargs)
        for got, want in zip(_run(ta, ours, x), _run(torch, theirs, x), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    for ours_act, torch_act in [(ta.functional.gelu, torch.nn.functional.gelu),
                                (nn.SiLU(), torch.nn.SiLU())]:
        ours, theirs = _same_layer(activation=torch_act)
        ours.activation = ours_act
        for got, want in zip(_run(ta, ours, x), _run(torch, theirs, x), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    assert nn.TransformerEncoderLayer(E, H, activation=nn.SiLU()).activation.__class__ is nn.SiLU


def test_is_causal_alone_masks_the_future_and_the_encoder_passes_masks_on():
    """is_causal=True without a mask (torch wants the mask as well) is the causal mask; the
    encoder hands its mask, padding and is_causal to every layer, and norm=None is no norm."""
    x = np.random.default_rng(3).standard_normal((N, S, E))
    causal = np.triu(np.ones((S, S), bool), 1)
    pre_ln, _ = _same_layer(batch_first=True, norm_first=True)
    for got, want in zip(_run(ta, pre_ln, x, is_causal=True),
                         _run(ta, pre_ln, x, src_mask=causal), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    layer, tlayer = _same_layer(batch_first=True)
    alone = _run(ta, layer, x, is_causal=True)
    for got, want in zip(alone, _run(ta, layer, x, src_mask=causal), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    ours = nn.TransformerEncoder(layer, 1).eval()
    theirs = torch.nn.TransformerEncoder(tlayer, 1, enable_nested_tensor=False).eval()
    assert ours.num_layers == 1 and ours.norm is None
    padding = np.zeros((N, S), bool)
    padding[:, -1] = True
    for got, want in zip(_run(ta, ours, x, mask=causal, src_key_padding_mask=padding),
                         _run(torch, theirs, x, mask=causal, src_key_padding_mask=padding),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    for got, want in zip(_run(ta, ours, x, is_causal=True), alone, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)


# ---- the decoder side and nn.Transformer --------------------------------------------------------

T = 4  # target length


def _same_decoder_layer(**kwargs):
    theirs = torch.nn.TransformerDecoderLayer(E, H, dim_feedforward=16, **kwargs).double().eval()
    ours = nn.TransformerDecoderLayer(E, H, dim_feedforward=16, dtype=ta.float64,
                                      **kwargs).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _run2(lib, module, tgt, memory, **kwargs):
    """Output and the gradients of target and memory for Σ out * tgt."""
    t, m = lib.tensor(tgt, requires_grad=True), lib.tensor(memory, requires_grad=True)
    kw = {k: v if isinstance(v, bool) or v is None else lib.tensor(v) for k, v in kwargs.items()}
    y = module(t, m, **kw)
    (y * lib.tensor(tgt)).sum().backward()
    return y.detach().numpy(), t.grad.numpy(), m.grad.numpy()


@pytest.mark.parametrize("batch_first,norm_first,activation,bias", list(itertools.product(
    [False, True], [False, True], ["relu", "gelu"], [True, False])))
def test_decoder_layer_matches_torch(batch_first, norm_first, activation, bias):
    ours, theirs = _same_decoder_layer(batch_first=batch_first, norm_first=norm_first,
                                       activation=activation, bias=bias)
    rng = np.random.default_rng(2)
    tgt = rng.standard_normal((N, T, E) if batch_first else (T, N, E))
    memory = rng.standard_normal((N, S, E) if batch_first else (S, N, E))
    pad_t, pad_m = rng.random((N, T)) > 0.7, rng.random((N, S)) > 0.6
    pad_t[:, 0] = pad_m[:, 0] = False  # (no query left with nothing to attend to)
    causal = np.triu(np.ones((T, T), bool), 1)
    for kwargs in [{}, {"tgt_mask": causal, "tgt_is_causal": True},
                   {"tgt_key_padding_mask": pad_t, "memory_key_padding_mask": pad_m},
                   {"tgt_mask": rng.standard_normal((T, T)),
                    "memory_mask": rng.standard_normal((T, S))}]:
        for got, want in zip(_run2(ta, ours, tgt, memory, **kwargs),
                             _run2(torch, theirs, tgt, memory, **kwargs), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # torch's, seq-first
def test_decoder_stacks_copies_and_transformer_matches_torch():
    layer, tlayer = _same_decoder_layer(batch_first=True)
    ours = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(E, dtype=ta.float64)).eval()
    theirs = torch.nn.TransformerDecoder(tlayer, 2, norm=torch.nn.LayerNorm(E).double()).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    state = {k: v.detach().numpy() * (1 + 0.1 * i)
             for i, (k, v) in enumerate(theirs.state_dict().items())}
    ours.load_state_dict(state)
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight
    rng = np.random.default_rng(3)
    tgt, memory = rng.standard_normal((N, T, E)), rng.standard_normal((N, S, E))
    causal = np.triu(np.ones((T, T), bool), 1)
    for got, want in zip(_run2(ta, ours, tgt, memory, tgt_mask=causal),
                         _run2(torch, theirs, tgt, memory, tgt_mask=causal), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)

    for batch_first in (False, True):
        tm = torch.nn.Transformer(E, H, 2, 2, 16, batch_first=batch_first).double().eval()
        om = nn.Transformer(E, H, 2, 2, 16, batch_first=batch_first, dtype=ta.float64).eval()
        assert list(om.state_dict()) == list(tm.state_dict())
        om.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
        src = rng.standard_normal((N, S, E) if batch_first else (S, N, E))
        tgt = rng.standard_normal((N, T, E) if batch_first else (T, N, E))
        mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=ta.float64)
        np.testing.assert_array_equal(
            mask.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(
                T, dtype=torch.float64).numpy())
        assert mask.dtype == np.float64 and not mask.requires_grad
        got = om(ta.tensor(src), ta.tensor(tgt), tgt_mask=mask)
        want = tm(torch.tensor(src), torch.tensor(tgt), tgt_mask=torch.tensor(mask.numpy()))
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # torch's, seq-first
@pytest.mark.filterwarnings("ignore:Support for mismatched")  # torch's, a bool and a float mask
def test_decoder_layer_and_transformer_defaults_and_settings_as_torch():
    """torch's defaults (dim_feedforward 2048, dropout 0.1 in all three blocks and both
    attentions, eps 1e-5, sequence first, post-LN), and each setting reaching every part."""
    ours, theirs = nn.TransformerDecoderLayer(E, H), torch.nn.TransformerDecoderLayer(E, H)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    for name in ("self_attn", "multihead_attn"):
        assert getattr(ours, name).dropout == getattr(theirs, name).dropout == 0.1
        assert getattr(ours, name).batch_first is False
    assert [ours.dropout.p, ours.dropout1.p, ours.dropout2.p, ours.dropout3.p] == [0.1] * 4
    assert [n.eps for n in (ours.norm1, ours.norm2, ours.norm3)] == [1e-5] * 3
    assert not ours.norm_first and ours.activation is ta.functional.relu
    odd = nn.TransformerDecoderLayer(E, H, 16, 0.3, "gelu", 0.5, True, True, False)
    assert odd.multihead_attn.dropout == odd.self_attn.dropout == 0.3 and odd.norm3.eps == 0.5
    assert odd.self_attn.batch_first and odd.norm_first and odd.linear1.bias is None
    assert odd.activation is ta.functional.gelu and odd.dropout3.p == 0.3

    model = nn.Transformer(E, H, 1, 1)  # torch's defaults otherwise
    tm = torch.nn.Transformer(E, H, 1, 1)
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in tm.state_dict().items()}
    assert model.decoder.layers[0].linear1.out_features == 2048 and not model.batch_first
    assert model.encoder.layers[0].dropout.p == model.decoder.layers[0].dropout2.p == 0.1
    model = nn.Transformer(E, H, 1, 2, 16, 0.2, "gelu", layer_norm_eps=0.25, batch_first=True,
                           norm_first=True, bias=False, dtype=ta.float64)
    for stack in (model.encoder, model.decoder):
        layer = stack.layers[0]
        assert layer.norm_first and layer.self_attn.batch_first and layer.dropout.p == 0.2
        assert layer.activation is ta.functional.gelu and layer.linear2.bias is None
        assert layer.norm2.eps == 0.25 and stack.norm.eps == 0.25 and stack.norm.bias is None
    assert model.decoder.num_layers == 2 and len(model.decoder.layers) == 2
    assert {p.dtype for p in model.parameters()} == {np.dtype(np.float64)}


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # torch's, seq-first
@pytest.mark.filterwarnings("ignore:Support for mismatched")  # torch's, a bool and a float mask
def test_the_decoder_passes_every_mask_on_and_is_causal_alone_masks_the_future():
    """The decoder hands tgt and memory masks, paddings and causal flags to every layer (as
    torch), Transformer hands src's to its encoder and the rest to its decoder, norm=None is
    no norm, and tgt_is_causal / memory_is_causal alone are the causal masks."""
    rng = np.random.default_rng(4)
    layer, tlayer = _same_decoder_layer(batch_first=True)
    ours, theirs = nn.TransformerDecoder(layer, 2).eval(), torch.nn.TransformerDecoder(
        tlayer, 2).eval()
    assert ours.norm is None
    tgt, memory = rng.standard_normal((N, T, E)), rng.standard_normal((N, S, E))
    pad_t, pad_m = np.zeros((N, T), bool), np.zeros((N, S), bool)
    pad_t[:, -1], pad_m[1, -2:] = True, True
    masks = dict(tgt_mask=rng.standard_normal((T, T)), memory_mask=rng.standard_normal((T, S)),
                 tgt_key_padding_mask=pad_t, memory_key_padding_mask=pad_m)
    for got, want in zip(_run2(ta, ours, tgt, memory, **masks),
                         _run2(torch, theirs, tgt, memory, **masks), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    square = rng.standard_normal((N, T, E))  # memory as long as the target
    causal = np.triu(np.ones((T, T), bool), 1)
    for flag, mask in [("tgt_is_causal", "tgt_mask"), ("memory_is_causal", "memory_mask")]:
        for got, want in zip(_run2(ta, ours, tgt, square, **{flag: True}),
                             _run2(ta, ours, tgt, square, **{mask: causal}), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12)

    tm = torch.nn.Transformer(E, H, 1, 1, 16, batch_first=True).double().eval()
    om = nn.Transformer(E, H, 1, 1, 16, batch_first=True, dtype=ta.float64).eval()
    om.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    src = rng.standard_normal((N, S, E))
    pad_s = np.zeros((N, S), bool)
    pad_s[0, -1] = True
    every = dict(src_mask=rng.standard_normal((S, S)), src_key_padding_mask=pad_s,
                 memory_key_padding_mask=pad_s, **{k: v for k, v in masks.items()
                                                   if k != "memory_key_padding_mask"})
    got = om(ta.tensor(src), ta.tensor(tgt), **{k: ta.tensor(v) for k, v in every.items()})
    want = tm(torch.tensor(src), torch.tensor(tgt),
              **{k: torch.tensor(v) for k, v in every.items()})
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-10)
    causal_s = np.triu(np.ones((S, S), bool), 1)
    flags = om(ta.tensor(src), ta.tensor(square), src_is_causal=True, tgt_is_causal=True,
               memory_is_causal=True)
    masked = om(ta.tensor(src[:, :T]), ta.tensor(square), src_mask=ta.tensor(causal_s[:T, :T]),
                tgt_mask=ta.tensor(causal), memory_mask=ta.tensor(causal))
    assert flags.shape == (N, T, E)
    np.testing.assert_allclose(om(ta.tensor(src[:, :T]), ta.tensor(square), src_is_causal=True,
                                  tgt_is_causal=True, memory_is_causal=True).numpy(),
                               masked.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["Transformer", "TransformerEncoderLayer", "TransformerEncoder",
                                  "TransformerDecoderLayer", "TransformerDecoder"])
def test_the_defaults_are_torchs(name):
    """Every argument torch's class has, with torch's default (a default sized like
    nn.Transformer() is not built just to be looked at)."""
    import inspect

    ours = inspect.signature(getattr(nn, name)).parameters
    theirs = inspect.signature(getattr(torch.nn, name)).parameters
    assert list(ours) == list(theirs)
    for key, p in theirs.items():
        want = p.default
        if callable(want) and getattr(want, "__name__", "") == "relu":
            want = "relu"  # torch's default activation is its F.relu: ours is named
        assert ours[key].default == want, (key, ours[key].default, want)


def test_a_decoder_layer_takes_a_callable_activation():
    ours, theirs = _same_decoder_layer(activation=torch.nn.functional.gelu)
    ours.activation = ta.functional.gelu
    assert nn.TransformerDecoderLayer(E, H, activation=ta.functional.gelu).activation is \
        ta.functional.gelu
    rng = np.random.default_rng(5)
    tgt, memory = rng.standard_normal((T, N, E)), rng.standard_normal((S, N, E))
    for got, want in zip(_run2(ta, ours, tgt, memory), _run2(torch, theirs, tgt, memory),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


def test_transformer_starts_xavier_uniform_and_refuses_mismatched_inputs():
    ta.manual_seed(0)
    model = nn.Transformer(16, 2, 1, 1, 64, batch_first=True)
    w = model.encoder.layers[0].linear1.weight.numpy()  # (64, 16): bound √(6 / 80)
    bound = (6 / 80) ** 0.5
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert np.all(model.decoder.norm.weight.numpy() == 1)  # (1-D: left as LayerNorm makes it)
    with pytest.raises(ta.ShapeError, match=r"Transformer: src \(2, 5, 16\) and tgt \(3, 4, 16\) "
                                            r"must have the same batch size \(dim 0, batch_first"):
        model(ta.randn(2, 5, 16), ta.randn(3, 4, 16))
    with pytest.raises(ta.ShapeError, match=r"the same batch size \(dim 1\)"):
        nn.Transformer(16, 2, 1, 1, 64)(ta.randn(5, 2, 16), ta.randn(4, 3, 16))
    with pytest.raises(ta.ShapeError, match="must end in d_model = 16"):
        model(ta.randn(2, 5, 16), ta.randn(2, 4, 8))
    with pytest.raises(ValueError, match="TransformerDecoderLayer: activation must be"):
        nn.TransformerDecoderLayer(16, 2, activation="swish")
    with pytest.raises(ta.ShapeError, match="TransformerDecoder: num_layers must be a whole"):
        nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 2), -1)
    with pytest.raises(TypeError, match="TransformerDecoder: decoder_layer must be a Module"):
        nn.TransformerDecoder("layer", 2)


def test_a_tiny_seq2seq_transformer_learns_to_copy():
    """nn.Transformer trained as torch's tutorials train it: the decoder, fed the target
    shifted right under the causal mask, learns to copy a short sequence (positions come from
    a learned embedding added to both sides: attention alone does not see order)."""
    ta.manual_seed(0)
    V, L, D = 6, 5, 16  # noqa: N806
    emb, out = nn.Embedding(V + 1, D), nn.Linear(D, V)  # token V: the start token
    pos = nn.Embedding(L, D)
    model = nn.Transformer(D, 2, 1, 1, 32, dropout=0.0, batch_first=True)
    params = [*emb.parameters(), *pos.parameters(), *out.parameters(), *model.parameters()]
    opt = ta.optim.Adam(params, lr=0.01)
    mask = nn.Transformer.generate_square_subsequent_mask(L)
    rng = np.random.default_rng(0)
    for _ in range(100):
        seq = rng.integers(0, V, (16, L))
        shifted = np.concatenate([np.full((16, 1), V), seq[:, :-1]], 1)
        p = pos(ta.arange(L))
        logits = out(model(emb(ta.tensor(seq)) + p, emb(ta.tensor(shifted)) + p,
                           tgt_mask=mask))
        loss = ta.functional.cross_entropy(logits.reshape(-1, V), ta.tensor(seq.reshape(-1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05, loss.item()  # (from ln 6 = 1.8)


def test_a_captured_transformer_step_replays_as_eager_with_dropout():
    """ta.capture of an nn.Transformer step (masks, dropout on) replays and gives eager's loss
    and gradients bit for bit under the same seed."""
    import warnings

    ta.manual_seed(0)
    model = nn.Transformer(16, 2, 1, 1, 32, dropout=0.1, batch_first=True)
    mask = nn.Transformer.generate_square_subsequent_mask(4)

    def fn(src, tgt):
        return (model(src, tgt, tgt_mask=mask) ** 2).mean()

    step = ta.capture(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(4):
            src, tgt = ta.randn(2, 5, 16), ta.randn(2, 4, 16)
            model.zero_grad()
            ta.manual_seed(k)
            got = step(src, tgt)
            grads = [p.grad.numpy().copy() for p in model.parameters()]
            model.zero_grad()
            ta.manual_seed(k)
            want = fn(src, tgt)
            want.backward()
            assert got.item() == want.item()
            for g, p in zip(grads, model.parameters(), strict=True):
                np.testing.assert_array_equal(g, p.grad.numpy())
    assert step.state == "replaying"


def test_stacks_of_zero_layers_are_the_identity_and_torch_makes_them_too():
    """torch builds TransformerEncoder/TransformerDecoder(layer, 0) (its forward then fails
    on layers[0]); here they pass the input through, to `norm` if given."""
    for lib in (nn, torch.nn):
        assert len(lib.TransformerEncoder(lib.TransformerEncoderLayer(E, H, 16), 0).layers) == 0
        assert len(lib.TransformerDecoder(lib.TransformerDecoderLayer(E, H, 16), 0).layers) == 0
    x, memory = ta.randn(S, N, E), ta.randn(S + 1, N, E)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 16), 0)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, 16), 0)
    assert encoder(x).tolist() == x.tolist() and decoder(x, memory).tolist() == x.tolist()
    assert list(encoder.state_dict()) == [] and encoder.num_layers == 0
    norm = nn.LayerNorm(E)
    normed = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, 16), 0, norm=norm)
    np.testing.assert_allclose(normed(x).numpy(), norm(x).numpy())


def test_a_custom_encoder_or_decoder_is_used_even_when_it_is_falsy_as_torchs():
    for lib in (nn, torch.nn):
        encoder, decoder = lib.Sequential(), lib.ModuleList()  # empty: len 0, falsy
        model = lib.Transformer(E, H, 1, 1, 16, custom_encoder=encoder, custom_decoder=decoder)
        assert model.encoder is encoder and model.decoder is decoder
