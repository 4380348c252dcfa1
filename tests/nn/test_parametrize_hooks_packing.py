"""nn.utils.parametrize (register_parametrization, remove_parametrizations, cached, and
nn.utils.parametrizations.weight_norm), the global module forward hooks of
nn.modules.module, and nn.utils.rnn's packing: values, gradients and state_dict keys against
torch in float64."""

import copy

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn
from tinyattn.nn.utils import parametrize as P

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)


def _t(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


def _a(t):
    return t.detach().numpy()


def _close(ours, theirs, tol=1e-10):
    np.testing.assert_allclose(ours.numpy(), _a(theirs), rtol=tol, atol=tol)


class Sym(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)

    def right_inverse(self, a):
        return a.triu()


class TSym(torch.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(0, 1)

    def right_inverse(self, a):
        return a.triu()


class Double(nn.Module):
    def forward(self, x):
        return x * 2

    def right_inverse(self, a):
        return a / 2


class TDouble(torch.nn.Module):
    def forward(self, x):
        return x * 2

    def right_inverse(self, a):
        return a / 2


def _linears(n=4):
    theirs = torch.nn.Linear(n, n).double()
    ours = nn.Linear(n, n, dtype=ta.float64)
    ours.load_state_dict({k: _a(v) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _loaded(ours, theirs):
    ours.load_state_dict({k: _a(v) for k, v in theirs.state_dict().items()})
    return ours


# ---- parametrize ---------------------------------------------------------------------------------


@pytest.mark.parametrize("chain", [False, True])
def test_parametrization_values_gradients_and_keys_as_torch(chain):
    ours, theirs = _linears()
    P.register_parametrization(ours, "weight", Sym())
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", TSym())
    if chain:
        P.register_parametrization(ours, "weight", Double())
        torch.nn.utils.parametrize.register_parametrization(theirs, "weight", TDouble())
    assert type(ours).__name__ == "ParametrizedLinear" and isinstance(ours, nn.Linear)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == \
        ["bias", "parametrizations.weight.original"]
    assert [n for n, _ in ours.named_parameters()] == \
        [n for n, _ in theirs.named_parameters()]
    assert isinstance(ours.parametrizations.weight.original, nn.Parameter)
    assert len(ours.parametrizations.weight) == (2 if chain else 1)
    _close(ours.weight, theirs.weight)
    x = rng.standard_normal((3, 4))
    (ours(ta.tensor(x)) ** 2).sum().backward()
    (theirs(_t(x)) ** 2).sum().backward()
    _close(ours.parametrizations.weight.original.grad,
           theirs.parametrizations.weight.original.grad)
    _close(ours.bias.grad, theirs.bias.grad)
    # assigning goes through right_inverse (of each, last first)
    w = rng.standard_normal((4, 4))
    w = w + w.T
    ours.weight = ta.tensor(w)
    theirs.weight = _t(w)
    _close(ours.parametrizations.weight.original, theirs.parametrizations.weight.original)
    _close(ours.weight, theirs.weight)
    assert P.is_parametrized(ours) and P.is_parametrized(ours, "weight")
    assert not P.is_parametrized(ours, "bias") and not P.is_parametrized(nn.Linear(2, 2))


def test_a_torch_state_dict_loads_and_an_optimizer_steps_the_original():
    ours, theirs = _linears()
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", TSym())
    P.register_parametrization(ours, "weight", Sym())
    _loaded(ours, theirs)
    opt_ours = ta.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    opt_theirs = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    x = rng.standard_normal((5, 4))
    for _ in range(3):
        opt_ours.zero_grad()
        opt_theirs.zero_grad()
        (ours(ta.tensor(x)).tanh() ** 2).mean().backward()
        (theirs(_t(x)).tanh() ** 2).mean().backward()
        opt_ours.step()
        opt_theirs.step()
    _close(ours.weight, theirs.weight)
    assert np.allclose(ours.weight.numpy(), ours.weight.numpy().T)


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations_gives_back_a_plain_module(leave):
    ours, theirs = _linears()
    P.register_parametrization(ours, "weight", Double())
    torch.nn.utils.parametrize.register_parametrization(theirs, "weight", TDouble())
    original = ours.parametrizations.weight.original
    P.remove_parametrizations(ours, "weight", leave_parametrized=leave)
    torch.nn.utils.parametrize.remove_parametrizations(theirs, "weight",
                                                       leave_parametrized=leave)
    assert type(ours) is nn.Linear and not hasattr(ours, "parametrizations")
    assert ours.weight is original and isinstance(ours.weight, nn.Parameter)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight"]
    _close(ours.weight, theirs.weight)


def test_parametrize_refusals_as_torch():
    m = nn.Linear(3, 3)

    class Cut(nn.Module):
        def forward(self, x):
            return x[:2]

    with pytest.raises(ValueError, match="foo"):
        P.register_parametrization(m, "foo", Sym())
    with pytest.raises(ValueError, match="shape"):
        P.register_parametrization(m, "weight", Cut())
    assert type(m) is nn.Linear  # nothing changed
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(m, "weight")
    P.register_parametrization(m, "weight", Cut(), unsafe=True)
    assert m.weight.shape == (2, 3)


def test_cached_computes_the_weight_once():
    calls = []

    class Counted(nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 1

    m = P.register_parametrization(nn.Linear(2, 2), "weight", Counted())
    calls.clear()
    with P.cached():
        assert m.weight is m.weight
    assert len(calls) == 1
    m.weight, m.weight  # noqa: B018 - reads
    assert len(calls) == 3
    n = copy.deepcopy(m)
    assert type(n).__name__ == "ParametrizedLinear" and n.weight.shape == (2, 2)
    assert n.parametrizations.weight.original is not m.parametrizations.weight.original


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_as_torch(dim):
    ours, theirs = _linears()
    torch.nn.utils.parametrizations.weight_norm(theirs, dim=dim)
    nn.utils.parametrizations.weight_norm(ours, dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == \
        ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    g = ours.parametrizations.weight.original0
    assert g.shape == tuple(theirs.parametrizations.weight.original0.shape)
    _loaded(ours, theirs)
    with torch.no_grad():
        theirs.parametrizations.weight.original0.mul_(1.5)
    _loaded(ours, theirs)
    _close(ours.weight, theirs.weight)
    x = rng.standard_normal((3, 4))
    (ours(ta.tensor(x)) ** 2).sum().backward()
    (theirs(_t(x)) ** 2).sum().backward()
    for i in (0, 1):
        _close(getattr(ours.parametrizations.weight, f"original{i}").grad,
               getattr(theirs.parametrizations.weight, f"original{i}").grad)


def test_spectral_norm_as_torch_with_its_buffers():
    ours, theirs = _linears()
    torch.nn.utils.parametrizations.spectral_norm(theirs)
    nn.utils.parametrizations.spectral_norm(ours)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _loaded(ours, theirs)
    x = rng.standard_normal((3, 4))
    for mode in (True, False):  # training: a power step a read; eval: the stored u, v
        ours.train(mode)
        theirs.train(mode)
        _close(ours(ta.tensor(x)), theirs(_t(x)))
        _close(ours.parametrizations.weight[0]._u, theirs.parametrizations.weight[0]._u)
    (ours(ta.tensor(x)) ** 2).sum().backward()
    (theirs(_t(x)) ** 2).sum().backward()
    _close(ours.parametrizations.weight.original.grad,
           theirs.parametrizations.weight.original.grad)


# ---- global module hooks -------------------------------------------------------------------------


def test_global_forward_hooks_run_for_every_module_before_its_own():
    from tinyattn.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
    )

    seen = []
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    own_pre = model[0].register_forward_pre_hook(lambda m, a: seen.append(("own pre", m)))
    own = model[0].register_forward_hook(lambda m, a, o: seen.append(("own", m)))
    pre = register_module_forward_pre_hook(lambda m, a: seen.append(("pre", m)))
    post = register_module_forward_hook(lambda m, a, o: seen.append(("post", m)))
    model(ta.ones(1, 2))
    a, b = model[0], model[1]
    assert seen == [("pre", model), ("pre", a), ("own pre", a), ("post", a), ("own", a),
                    ("pre", b), ("post", b), ("post", model)]
    # what they return replaces the input and the output, as a module's own hooks
    pre.remove()
    post.remove()
    doubled = register_module_forward_pre_hook(lambda m, a: (a[0] * 2,))
    kw = register_module_forward_hook(lambda m, a, k, o: o + 1, with_kwargs=True)
    relu = nn.ReLU()
    assert relu(ta.tensor([1.0, -1.0])).tolist() == [3.0, 1.0]
    doubled.remove()
    kw.remove()
    own_pre.remove()
    own.remove()
    seen.clear()
    model(ta.ones(1, 2))
    assert seen == [] and relu(ta.tensor([1.0])).tolist() == [1.0]
    assert ta.nn.modules.Module is nn.Module


def test_a_global_always_call_hook_runs_when_forward_raises():
    from tinyattn.nn.modules import module as mm

    class Boom(nn.Module):
        def forward(self, x):
            raise KeyError("boom")

    seen = []
    with mm.register_module_forward_hook(lambda m, a, o: seen.append(o), always_call=True):
        with pytest.raises(KeyError):
            Boom()(1)
    assert seen == [None]
    Boom.forward = lambda self, x: x
    assert Boom()(1) == 1 and seen == [None]


# ---- packing -------------------------------------------------------------------------------------

R = nn.utils.rnn


@pytest.mark.parametrize("batch_first,enforce_sorted", [(False, True), (True, False)])
def test_packing_round_trip_as_torch(batch_first, enforce_sorted):
    lengths = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    shape = (3, 5, 2) if batch_first else (5, 3, 2)
    x = rng.standard_normal(shape)
    ours_x, theirs_x = ta.tensor(x, requires_grad=True), _t(x).requires_grad_()
    ours = R.pack_padded_sequence(ours_x, lengths, batch_first, enforce_sorted)
    theirs = torch.nn.utils.rnn.pack_padded_sequence(theirs_x, lengths, batch_first,
                                                     enforce_sorted)
    _close(ours.data, theirs.data)
    assert ours.batch_sizes.tolist() == theirs.batch_sizes.tolist()
    for name in ("sorted_indices", "unsorted_indices"):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert (a is None and b is None) or a.tolist() == b.tolist()
    pad_o, len_o = R.pad_packed_sequence(ours, batch_first, -1.0, total_length=6)
    pad_t, len_t = torch.nn.utils.rnn.pad_packed_sequence(theirs, batch_first, -1.0, 6)
    _close(pad_o, pad_t)
    assert len_o.tolist() == len_t.tolist() == lengths
    w = rng.standard_normal(pad_o.shape)
    (pad_o * ta.tensor(w)).sum().backward()
    (pad_t * _t(w)).sum().backward()
    _close(ours_x.grad, theirs_x.grad)
    seqs = [rng.standard_normal((n, 2)) for n in lengths]
    packed = R.pack_sequence([ta.tensor(s) for s in seqs], enforce_sorted=enforce_sorted)
    _close(packed.data, torch.nn.utils.rnn.pack_sequence(
        [_t(s) for s in seqs], enforce_sorted=enforce_sorted).data)
    for got, s in zip(R.unpack_sequence(packed), seqs, strict=True):
        np.testing.assert_array_equal(got.numpy(), s)


def test_packing_refusals_name_the_function():
    x = ta.zeros(4, 3, 1)
    with pytest.raises(RuntimeError, match="pack_padded_sequence.*sorted in decreasing"):
        R.pack_padded_sequence(x, [2, 4, 1])
    with pytest.raises(RuntimeError, match="greater than 0"):
        R.pack_padded_sequence(x, [2, 0, 1], enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"lengths has shape \(2,\)"):
        R.pack_padded_sequence(x, [2, 1])
    with pytest.raises(RuntimeError, match="longer than the 4 steps"):
        R.pack_padded_sequence(x, [5, 2, 1])
    with pytest.raises(ValueError, match="total_length=2"):
        R.pad_packed_sequence(R.pack_padded_sequence(x, [4, 2, 1]), total_length=2)


def test_a_captured_step_names_a_global_forward_hook_as_a_forward_hook():
    """ta.capture runs eagerly under a global hook, and says which kind of hook it is."""
    from tinyattn.nn.modules.module import register_module_forward_hook

    m = ta.nn.Linear(3, 2)
    seen = []
    handle = register_module_forward_hook(lambda mod, args, out: seen.append(type(mod)))
    try:
        step = ta.capture(lambda x: m(x).sum())
        with pytest.warns(UserWarning, match="Linear has forward hooks"):
            for _ in range(3):
                step(ta.randn(4, 3))
    finally:
        handle.remove()
    assert seen == [ta.nn.Linear] * 3  # (eager: the hook ran every call)
