"""Mechanistic-interpretability and attribution code as people write it for small transformers in
torch (activation caching and patching with module hooks, saliency, integrated gradients,
logit lens, attention rollout, probes), ported to tinyattn: each place where tinyattn differed
from torch, compared with torch where torch is at hand."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn


def _state_from_torch(module, torch_module):
    module.load_state_dict({k: ta.tensor(v.detach().numpy())
                            for k, v in torch_module.state_dict().items()})


# ---- forward pre-hooks with_kwargs: what they may return ---------------------------------------


@pytest.mark.parametrize("returned", ["tensor", "one-tuple", "three-tuple", "kwargs not a dict"])
def test_a_with_kwargs_pre_hook_returning_no_args_kwargs_pair_is_a_clear_error(returned):
    torch = pytest.importorskip("torch")
    x = np.ones((2, 4), np.float32)
    bad = {"tensor": lambda a, k: a[0], "one-tuple": lambda a, k: (a,),
           "three-tuple": lambda a, k: (a, k, None), "kwargs not a dict": lambda a, k: (a, [])}
    for lib, t in ((nn, ta.tensor(x)), (torch.nn, torch.tensor(x))):
        lin = lib.Linear(4, 3)
        lin.register_forward_pre_hook(lambda m, a, k: bad[returned](a, k), with_kwargs=True)
        # torch: RuntimeError "forward pre-hook must return None or a tuple of (new_args,
        # new_kwargs)" (a dict-less pair fails in forward(**kwargs): TypeError)
        with pytest.raises((RuntimeError, TypeError)) as err:
            lin(t)
        if lib is nn:
            assert "Linear: a forward pre-hook registered with with_kwargs=True must return " \
                "None or a tuple (new_args, new_kwargs)" in str(err.value)


def test_a_with_kwargs_pre_hook_may_return_new_args_and_kwargs_as_torch():
    torch = pytest.importorskip("torch")
    x, theirs, ours = _twin_attention(torch)

    def weights_please(module, args, kwargs):  # the encoder layers call it need_weights=False
        return args, {**kwargs, "need_weights": True, "average_attn_weights": False}

    got = {}
    for name, mha, t in (("ta", ours, ta.tensor(x)), ("torch", theirs, torch.tensor(x))):
        handle = mha.register_forward_pre_hook(weights_please, with_kwargs=True)
        got[name] = mha(t, t, t, need_weights=False)[1]
        handle.remove()
        assert mha(t, t, t, need_weights=False)[1] is None
    np.testing.assert_allclose(got["ta"].numpy(), got["torch"].detach().numpy(), atol=1e-6)


# ---- attention rollout: linalg.multi_dot over the layers' head-averaged maps --------------------


def test_attention_rollout_with_linalg_multi_dot_as_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    maps = rng.random((3, 2, 4, 5, 5)).astype(np.float32)  # (layers, B, H, T, T)
    vector = rng.random(5).astype(np.float32)
    out = {}
    for lib in (ta, torch):
        layers = []
        for a in lib.tensor(maps).unbind(0):
            a = a.mean(1)[0] + lib.eye(5)  # heads averaged, plus the residual
            layers.append(a / a.sum(-1, keepdim=True))
        row = lib.tensor(vector)
        out[lib] = [lib.linalg.multi_dot(layers[::-1]), lib.linalg.multi_dot([row] + layers),
                    lib.linalg.multi_dot(layers + [row]),
                    lib.linalg.multi_dot([row, layers[0], row])]
    for ours, theirs in zip(out[ta], out[torch], strict=True):
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
    a = ta.ones(2, 3, requires_grad=True)
    ta.linalg.multi_dot([a, ta.ones(3, 4), ta.ones(4)]).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.full((2, 3), 4.0))


@pytest.mark.parametrize("bad, error, words", [
    (lambda: [ta.ones(2, 3)], ValueError, "at least 2 tensors, got 1"),
    (lambda: ta.ones(2, 2), TypeError, "a list or tuple of tensors"),
    (lambda: [ta.ones(2, 3), ta.ones(2, 3)], ValueError, "tensors 0 and 1 cannot be multiplied "
     "(inner dims 3 and 2), got shapes (2, 3), (2, 3)"),
    (lambda: [ta.ones(2, 2), ta.ones(2, 2, 2), ta.ones(2, 2)], IndexError, "tensor 1 must be 2-D"),
    (lambda: [ta.ones(2, 2), ta.ones(2), ta.ones(2, 2)], IndexError, "tensor 1 must be 2-D"),
])
def test_linalg_multi_dot_refuses_bad_input_naming_the_shapes(bad, error, words):
    with pytest.raises(error, match="linalg.multi_dot") as err:
        ta.linalg.multi_dot(bad())
    assert words in str(err.value)


# ---- full backward hooks: grad_input of an input that needs no gradient -------------------------


def test_full_backward_hook_gives_zeros_for_a_tensor_input_that_needs_no_grad_as_torch():
    """Cross-attention to a frozen (detached) memory: torch's grad_input has zeros (of the
    input's shape and dtype) for every tensor argument that needs no gradient, once another one
    does, and None only for non-tensor arguments; code reading grad_input[1].norm() works."""
    torch = pytest.importorskip("torch")
    x, theirs, ours = _twin_attention(torch)
    seen = {}
    for name, mha, lib in (("ta", ours, ta), ("torch", theirs, torch)):
        log = seen[name] = []
        mha.register_full_backward_hook(lambda m, gi, go, log=log: log.append(gi))
        q = lib.tensor(x, requires_grad=True)
        memory = lib.tensor(x[::-1].copy())
        mha(q, memory, memory * 2)[0][:, -1].sum().backward()
    (ours_gi,), (theirs_gi,) = seen["ta"], seen["torch"]
    assert len(ours_gi) == len(theirs_gi) == 3
    for g, tg in zip(ours_gi, theirs_gi, strict=True):
        assert tuple(g.shape) == tuple(tg.shape) and g.dtype == ta.float32
        np.testing.assert_allclose(g.numpy(), tg.numpy(), atol=1e-6)
    assert not ours_gi[1].numpy().any()

    class Mix(nn.Module):  # an integer tensor and a number among the arguments
        def forward(self, a, ids, scale, b):
            return a * ids.float() * scale * b

    m, log = Mix(), []
    m.register_full_backward_hook(lambda mod, gi, go: log.append(gi))
    a = ta.ones(2, requires_grad=True)
    m(a, ta.tensor([1, 2]), 3.0, ta.ones(2, dtype=ta.float64)).sum().backward()
    ga, gids, gscale, gb = log[0]
    assert ga.tolist() == [3.0, 6.0] and gscale is None
    assert gids.dtype == ta.int64 and gids.tolist() == [0, 0]
    assert gb.dtype == ta.float64 and gb.tolist() == [0.0, 0.0]
    assert a.grad.tolist() == [3.0, 6.0]


def _twin_attention(torch):
    """An input (2, 5, 8) and a torch MultiheadAttention(8, 2) with its tinyattn twin (same
    weights)."""
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(np.float32)
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ours = nn.MultiheadAttention(8, 2, batch_first=True)
    _state_from_torch(ours, theirs)
    return x, theirs, ours
