"""torch.distributions' module layout in tinyattn.distributions: one submodule per distribution
(`from tinyattn.distributions.normal import Normal`), identity_transform, and
distributions.utils (broadcast_all, logits_to_probs, probs_to_logits, clamp_probs,
tril_matrix_to_vec, vec_to_tril_matrix, lazy_property), each against torch's."""

import importlib
import types

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.distributions import utils as U

torch = pytest.importorskip("torch")
TU = torch.distributions.utils

RNG = np.random.default_rng(0)


def _torch_submodules():
    dists = torch.distributions
    return sorted(n for n in dir(dists) if isinstance(getattr(dists, n), types.ModuleType)
                  and n not in ("utils",))


@pytest.mark.parametrize("name", _torch_submodules())
def test_every_torch_submodule_is_there_with_its_names(name):
    want = getattr(torch.distributions, name).__all__
    module = importlib.import_module(f"tinyattn.distributions.{name}")
    for n in want:
        assert hasattr(module, n), f"distributions.{name}.{n}"
    assert getattr(ta.distributions, name) is module


def test_a_submodule_import_line_gives_the_very_class():
    from tinyattn.distributions.normal import Normal
    from tinyattn.distributions.relaxed_categorical import RelaxedOneHotCategorical
    assert Normal is ta.distributions.Normal
    assert RelaxedOneHotCategorical is ta.distributions.RelaxedOneHotCategorical
    x = ta.tensor([0.3])
    assert Normal(0.0, 1.0).log_prob(x).item() == pytest.approx(
        torch.distributions.normal.Normal(0.0, 1.0).log_prob(torch.tensor([0.3])).item())


def test_identity_transform_is_an_empty_compose_as_torchs():
    t = ta.distributions.identity_transform
    assert isinstance(t, ta.distributions.ComposeTransform) and t.parts == []
    x = ta.tensor([1.5, -2.0])
    assert t(x) is x and t.inv(x) is x


# ---- utils --------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [
    lambda m: (m.tensor([1.0, 2.0], dtype=m.float64), 3),
    lambda m: (2, m.tensor([[1.0], [2.0]])),
    lambda m: (1, 2.5),
    lambda m: (m.tensor([1, 2]), 0.5),
    lambda m: (m.zeros(2, 1), m.ones(3)),
], ids=["tensor-number", "number-tensor", "numbers", "int tensor", "two tensors"])
def test_broadcast_all_as_torch(values):
    got, want = U.broadcast_all(*values(ta)), TU.broadcast_all(*values(torch))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert tuple(g.shape) == tuple(w.shape)
        assert str(g.dtype) == str(w.dtype).replace("torch.", "")
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_broadcast_all_refuses_what_is_not_a_number_or_tensor():
    with pytest.raises(ValueError, match="broadcast_all.*list"):
        U.broadcast_all(ta.ones(2), [1.0, 2.0])


def _pair(a, requires_grad=True):
    return (ta.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


@pytest.mark.parametrize("is_binary", [False, True])
@pytest.mark.parametrize("fn", ["logits_to_probs", "probs_to_logits"])
def test_probs_and_logits_conversions_as_torch_with_gradients(fn, is_binary):
    a = RNG.standard_normal((3, 4)) if fn == "logits_to_probs" else \
        np.array([[0.0, 0.2, 0.7, 1.0], [0.5, 1e-20, 0.3, 0.9], [0.1, 0.1, 0.1, 0.7]])
    x, t = _pair(a)
    got, want = getattr(U, fn)(x, is_binary), getattr(TU, fn)(t, is_binary)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    g = RNG.standard_normal(a.shape)
    (got * ta.tensor(g)).sum().backward()
    (want * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clamp_probs_keeps_probs_one_eps_inside_as_torch(dtype):
    a = np.array([0.0, 0.5, 1.0, -0.5, 2.0], dtype=dtype)
    got = U.clamp_probs(ta.tensor(a)).numpy()
    want = TU.clamp_probs(torch.tensor(a)).numpy()
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.dtype(dtype) and 0 < got.min() and got.max() < 1


@pytest.mark.parametrize("n,diag", [(4, 0), (4, -1), (4, 2), (4, -3), (1, 0), (3, 1)])
def test_tril_vec_round_trip_as_torch_with_gradients(n, diag):
    m = RNG.standard_normal((2, n, n))
    x, t = _pair(m)
    v, vt = U.tril_matrix_to_vec(x, diag), TU.tril_matrix_to_vec(t, diag)
    np.testing.assert_array_equal(v.detach().numpy(), vt.detach().numpy())
    back, back_t = U.vec_to_tril_matrix(v, diag), TU.vec_to_tril_matrix(vt, diag)
    np.testing.assert_array_equal(back.detach().numpy(), back_t.detach().numpy())
    g = RNG.standard_normal(back.shape)
    (back * ta.tensor(g)).sum().backward()
    (back_t * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


def test_vec_to_tril_matrix_keeps_a_nan_in_its_own_place():
    v = np.array([1.0, np.nan, np.inf])
    got = U.vec_to_tril_matrix(ta.tensor(v)).numpy()
    np.testing.assert_array_equal(got, TU.vec_to_tril_matrix(torch.tensor(v)).numpy())
    assert got[0, 1] == 0.0 and np.isnan(got[1, 0])


def test_tril_conversions_refuse_what_torch_refuses():
    with pytest.raises(ValueError, match="last dimension is 5"):
        TU.vec_to_tril_matrix(torch.ones(5))
    with pytest.raises(RuntimeError):  # (torch's check misses 4: its indexing refuses it)
        TU.vec_to_tril_matrix(torch.ones(4))
    for k in (4, 5):
        with pytest.raises(ValueError, match=f"vec_to_tril_matrix.*last dimension is {k}"):
            U.vec_to_tril_matrix(ta.ones(k))
    with pytest.raises(ValueError, match=r"diag \(3\)"):
        TU.tril_matrix_to_vec(torch.ones(3, 3), 3)
    with pytest.raises(ValueError, match=r"tril_matrix_to_vec: diag \(3\).*\[-3, 2\]"):
        U.tril_matrix_to_vec(ta.ones(3, 3), 3)


def test_lazy_property_computes_once_with_grad_enabled_as_torchs():
    calls = []

    class Dist:
        def __init__(self, loc):
            self.loc = loc

        @U.lazy_property
        def doubled(self):
            calls.append(1)
            return self.loc * 2

    loc = ta.tensor([1.0, 2.0], requires_grad=True)
    d = Dist(loc)
    with ta.no_grad():
        first = d.doubled
    assert first.requires_grad  # (computed with gradients on, as torch's)
    assert d.doubled is first and calls == [1]
    assert "doubled" in vars(d)
    assert Dist.doubled.__doc__ is None and Dist.doubled.__name__ == "doubled"
