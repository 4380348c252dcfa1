"""nn.Embedding and F.embedding with max_norm / norm_type (torch's embedding_renorm_: each
looked-up row whose norm is above max_norm scaled by max_norm / (norm + 1e-7), in the weight
itself, without grad, once per row however often it is looked up; the weight's version moves
on), scale_grad_by_freq (each row's gradient divided by its id's count in the batch) and
sparse=True (refused: tinyattn has no sparse gradients), against torch 2.13."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

IDS = [[0, 2, 2, 5], [1, 0, 4, 2]]  # repeated ids (0 twice, 2 three times), 3 never looked up


def _table(dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal((6, 4)).astype(dtype) * 2


def _both(ids, dtype=np.float64, **kwargs):
    """Output, weight after the call and weight gradient of each engine."""
    w0 = _table(dtype)
    w, tw = ta.tensor(w0.copy(), requires_grad=True), torch.tensor(w0.copy(), requires_grad=True)
    version, tversion = w._version, tw._version
    y, ty = F.embedding(ta.tensor(ids), w, **kwargs), TF.embedding(torch.tensor(ids), tw, **kwargs)
    g = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)
    y.backward(ta.tensor(g))
    ty.backward(torch.tensor(g))
    assert w._version - version == tw._version - tversion
    return ((y.detach().numpy(), w.detach().numpy(), w.grad.numpy()),
            (ty.detach().numpy(), tw.detach().numpy(), tw.grad.numpy()), w0)


def _close(ours, theirs, rtol):
    for got, want in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-2)


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 1e-6)])
@pytest.mark.parametrize("kwargs", [
    {"max_norm": 1.0}, {"max_norm": 2.5}, {"max_norm": 1.0, "norm_type": 1.0},
    {"max_norm": 0.5, "norm_type": float("inf")}, {"max_norm": 1.0, "norm_type": 3},
    {"max_norm": 1.0, "padding_idx": 2}, {"max_norm": 100.0},
    {"scale_grad_by_freq": True}, {"scale_grad_by_freq": True, "padding_idx": 0},
    {"max_norm": 1.5, "scale_grad_by_freq": True, "padding_idx": -1},
], ids=str)
def test_embedding_options_match_torch_values_weight_and_gradients(kwargs, dtype, rtol):
    ours, theirs, w0 = _both(IDS, dtype, **kwargs)
    _close(ours, theirs, rtol)
    if "max_norm" in kwargs:
        w = ours[1]
        norms = np.linalg.norm(w0, ord=kwargs.get("norm_type", 2.0), axis=1)
        looked_up = np.isin(np.arange(6), IDS)
        changed = looked_up & (norms > kwargs["max_norm"])
        assert np.array_equal(w[~changed], w0[~changed])  # only those rows, in place
        new = np.linalg.norm(w[changed], ord=kwargs.get("norm_type", 2.0), axis=1)
        # (max_norm / (norm + 1e-7): just under max_norm; float32 rounds either way)
        np.testing.assert_allclose(new, kwargs["max_norm"], rtol=1e-6)


def test_the_module_renormalizes_its_own_weight_once_per_row_and_bumps_its_version():
    m = nn.Embedding(6, 4, max_norm=1.0, dtype=ta.float64)
    tm = torch.nn.Embedding(6, 4, max_norm=1.0, dtype=torch.float64)
    with ta.no_grad():
        m.weight.copy_(ta.tensor(_table()))
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(_table()))
    held = m.weight
    version = m.weight._version
    ids = [[3, 3, 3], [1, 3, 1]]
    y, ty = m(ta.tensor(ids)), tm(torch.tensor(ids))
    assert m.weight is held and m.weight._version == version + 1  # the same tensor, changed
    np.testing.assert_allclose(m.weight.detach().numpy(), tm.weight.detach().numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    again = m(ta.tensor(ids))  # already within max_norm: unchanged values, version still moves
    assert m.weight._version == version + 2
    np.testing.assert_array_equal(again.detach().numpy(), y.detach().numpy())
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-12)


def test_a_graph_that_saved_the_weight_refuses_it_after_a_renorm_as_torch():
    w = ta.tensor(_table(), requires_grad=True)
    h = w * 1.0  # a non-leaf table, saved by the product below
    loss = (h * h).sum()
    F.embedding(ta.tensor([0, 1]), h, max_norm=0.1)
    with pytest.raises(ta.GraphError, match="mul saved"):
        loss.backward()
    tw = torch.tensor(_table(), requires_grad=True)
    th = tw * 1.0
    tloss = (th * th).sum()
    TF.embedding(torch.tensor([0, 1]), th, max_norm=0.1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tloss.backward()


def test_embedding_reprs_and_from_pretrained_take_torchs_options():
    kwargs = {"padding_idx": 1, "max_norm": 2.0, "norm_type": 1.0, "scale_grad_by_freq": True}
    assert repr(nn.Embedding(5, 3, **kwargs)) == repr(torch.nn.Embedding(5, 3, **kwargs))
    assert repr(nn.Embedding(5, 3, max_norm=2, norm_type=2)) == \
        repr(torch.nn.Embedding(5, 3, max_norm=2, norm_type=2)) == "Embedding(5, 3, max_norm=2)"
    table = _table()
    m = nn.Embedding.from_pretrained(ta.tensor(table), max_norm=1.0, scale_grad_by_freq=True)
    tm = torch.nn.Embedding.from_pretrained(torch.tensor(table), max_norm=1.0,
                                            scale_grad_by_freq=True)
    assert repr(m) == repr(tm) and not m.weight.requires_grad
    np.testing.assert_allclose(m(ta.tensor(IDS)).numpy(), tm(torch.tensor(IDS)).numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(m.weight.numpy(), tm.weight.numpy(), rtol=1e-12)


def test_sparse_gradients_are_refused_clearly():
    with pytest.raises(ValueError, match="embedding: sparse=True .* not supported"):
        F.embedding(ta.tensor([0]), ta.tensor(_table()), sparse=True)
    with pytest.raises(ValueError, match="Embedding: sparse=True .* not supported"):
        nn.Embedding(4, 2, sparse=True)


def test_renorm_checks_the_ids_before_writing():
    w = ta.tensor(_table())
    with pytest.raises(IndexError, match="embedding: id 9 is out of range for 6 embeddings"):
        F.embedding(ta.tensor([0, 9]), w, max_norm=0.1)
    np.testing.assert_array_equal(w.numpy(), _table())
