"""Settings of tinyattn.functional that torch takes only as bools or numbers: dropout's
`training` (and the feature and alpha dropouts'), scaled_dot_product_attention's is_causal
and dropout_p, kl_div's log_target, batch_norm's training, embedding's scale_grad_by_freq
and sparse; cosine_similarity's dim and eps, pairwise_distance's p. A value of another type
is refused naming the function, where its truth was taken ("False" is true, None false)."""

import numpy as np
import pytest

import tinyattn as ta

X = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)


def _cases():
    def fn(lib):
        return lib.nn.functional

    yield "dropout", "training", lambda lib, b: fn(lib).dropout(lib.tensor(X), 0.5, b)
    yield "dropout", "training", lambda lib, b: fn(lib).dropout1d(lib.tensor(X), 0.5, b)
    yield "dropout", "training", lambda lib, b: fn(lib).dropout2d(lib.tensor(X[None]), 0.5, b)
    yield "alpha_dropout", "training", lambda lib, b: fn(lib).alpha_dropout(lib.tensor(X), 0.5,
                                                                             b)
    yield ("scaled_dot_product_attention", "is_causal",
           lambda lib, b: fn(lib).scaled_dot_product_attention(*[lib.tensor(X)] * 3,
                                                               is_causal=b))
    yield "kl_div", "log_target", lambda lib, b: fn(lib).kl_div(
        lib.tensor(X), lib.tensor(X), reduction="sum", log_target=b)
    yield "batch_norm", "training", lambda lib, b: fn(lib).batch_norm(
        lib.tensor(X), lib.zeros(3), lib.ones(3), training=b)
    yield "embedding", "scale_grad_by_freq", lambda lib, b: fn(lib).embedding(
        lib.tensor([0, 1]), lib.tensor(X[0]), scale_grad_by_freq=b)
    yield "embedding", "sparse", lambda lib, b: fn(lib).embedding(
        lib.tensor([0, 1]), lib.tensor(X[0]), sparse=b)


CASES = list(_cases())
NOT_BOOLS = [0, 1, None, "False"]


@pytest.mark.parametrize("bad", NOT_BOOLS, ids=repr)
@pytest.mark.parametrize(("name", "what", "call"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_a_switch_must_be_a_bool(name, what, call, bad):
    with pytest.raises(TypeError, match=f"^{name}: {what} must be a bool"):
        call(ta, bad)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        call(torch, bad)


@pytest.mark.parametrize(("name", "what", "call"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_a_bool_switch_gives_torchs_values(name, what, call):
    torch = pytest.importorskip("torch")
    # (dropout with training=True draws its own mask; embedding's sparse=True stays refused:
    # tinyattn has no sparse gradients)
    random_or_refused = what == "sparse" or (what == "training" and "dropout" in name)
    for flag in (False, np.bool_(False)) if random_or_refused else (False, True, np.bool_(True)):
        got, want = call(ta, flag), call(torch, bool(flag))
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("bad", [None, "0.1"])
def test_attention_dropout_p_must_be_a_number(bad):
    q = ta.tensor(X)
    with pytest.raises(TypeError, match="^scaled_dot_product_attention: dropout_p must be a "
                                        "number"):
        ta.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=bad)


def test_cosine_similarity_dim_and_eps_as_torch():
    torch = pytest.importorskip("torch")
    a, b = ta.tensor(X), ta.tensor(X[::-1].copy())
    for kwargs, error in (({"dim": None}, TypeError), ({"dim": (0, 1)}, TypeError),
                          ({"eps": -1.0}, ValueError)):
        with pytest.raises(error, match="^cosine_similarity: "):
            ta.nn.functional.cosine_similarity(a, b, **kwargs)
        with pytest.raises((TypeError, RuntimeError)):
            torch.nn.functional.cosine_similarity(torch.tensor(X), torch.tensor(X), **kwargs)
    got = ta.nn.functional.cosine_similarity(a, b, dim=-1, eps=0.0)
    want = torch.nn.functional.cosine_similarity(torch.tensor(X), torch.tensor(X[::-1].copy()),
                                                 dim=-1, eps=0.0)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)


def test_pairwise_distance_p_as_torch():
    torch = pytest.importorskip("torch")
    a, b = X[0], X[1]
    with pytest.raises(TypeError, match="^pairwise_distance: p must be a number"):
        ta.nn.functional.pairwise_distance(ta.tensor(a), ta.tensor(b), p=None)
    for p in (True, 1, 3.0):
        got = ta.nn.functional.pairwise_distance(ta.tensor(a), ta.tensor(b), p=p)
        want = torch.nn.functional.pairwise_distance(torch.tensor(a), torch.tensor(b), p=p)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
