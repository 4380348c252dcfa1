"""Rprop, ASGD and Adafactor against torch's; nn.init.sparse_; nn.LazyLinear."""

import math
import pickle

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn, optim

torch = pytest.importorskip("torch")

CASES = [
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2))),
    ("Rprop", dict(lr=0.01, maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=2, weight_decay=0.1)),
    ("ASGD", dict(lr=0.02, t0=0, maximize=True)),
    ("Adafactor", dict()),
    ("Adafactor", dict(lr=0.05, beta2_decay=-0.5, eps=(1e-20, 1e-2), d=1.5,
                       weight_decay=0.1)),
    ("Adafactor", dict(lr=0.3, maximize=True, d=1.0)),
]
SHAPES = [(3, 4), (4,), (2, 3, 5), ()]


def _grads(dtype, steps=7, seed=0):
    rng = np.random.default_rng(seed)
    start = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    # some steps repeat a gradient's signs, some flip them (Rprop's two branches)
    grads = [[(rng.standard_normal(s) * (1 + k % 3)).astype(dtype) for s in SHAPES]
             for k in range(steps)]
    return start, grads


def _both(name, kwargs, start, grads):
    """Our optimizer and torch's, stepped through the same gradients (the parameters' dtype
    the arrays')."""
    ours = [ta.tensor(x.copy(), requires_grad=True) for x in start]
    theirs = [torch.tensor(x.copy(), requires_grad=True) for x in start]
    opt, topt = getattr(optim, name)(ours, **kwargs), getattr(torch.optim, name)(theirs, **kwargs)
    for step in grads:
        for p, tp, g in zip(ours, theirs, step, strict=True):
            p.grad, tp.grad = ta.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
    return opt, topt, ours, theirs


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("name", "kwargs"), CASES)
def test_steps_match_torch(name, kwargs, dtype):
    start, grads = _grads(dtype)
    opt, topt, ours, theirs = _both(name, kwargs, start, grads)
    tol = 1e-9 if dtype == np.float64 else 2e-6
    for p, tp in zip(ours, theirs, strict=True):
        assert p.dtype == dtype
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=tol, atol=tol)
    # the same state, under torch's names
    ts = topt.state_dict()["state"]
    for i, entry in opt.state_dict()["state"].items():
        assert list(entry) == list(ts[i]), name
        for key, value in entry.items():
            np.testing.assert_allclose(np.asarray(value.numpy(), dtype=np.float64),
                                       ts[i][key].double().numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("name", "kwargs"), CASES[::3] + CASES[7:8])
def test_groups_and_defaults_as_torch(name, kwargs):
    ours = getattr(optim, name)([ta.ones(2, requires_grad=True)], **kwargs)
    theirs = getattr(torch.optim, name)([torch.ones(2, requires_grad=True)], **kwargs)
    og, tg = ours.param_groups[0], theirs.param_groups[0]
    assert [k for k in og if k != "params"] == [k for k in tg if k != "params"]
    for key in tg:
        if key != "params":
            assert og[key] == tg[key], key
    assert ours.state_dict()["param_groups"] == theirs.state_dict()["param_groups"]


@pytest.mark.parametrize(("name", "kwargs"), CASES)
def test_a_state_dict_resumes_exactly_and_loads_torch_s(name, kwargs):
    start, grads = _grads(np.float64)
    _, _, ours, _ = _both(name, kwargs, start, grads)
    # three steps, save, a fresh optimizer loads and takes the rest
    resumed, topt, half, theirs = _both(name, kwargs, start, grads[:3])
    saved = pickle.loads(pickle.dumps(resumed.state_dict()))
    again = getattr(optim, name)(half, **kwargs)
    again.load_state_dict(saved)
    from_torch = [ta.tensor(p.detach().numpy().copy(), requires_grad=True) for p in theirs]
    loaded = getattr(optim, name)(from_torch, **kwargs)
    loaded.load_state_dict(topt.state_dict())
    for step in grads[3:]:
        for params, opt in ((half, again), (from_torch, loaded)):
            for p, g in zip(params, step, strict=True):
                p.grad = ta.tensor(g)
            opt.step()
    for a, b, c in zip(ours, half, from_torch, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_allclose(a.numpy(), c.numpy(), rtol=1e-12, atol=1e-12)


BAD = [
    ("Rprop", dict(lr=-0.1), "lr"),
    ("Rprop", dict(etas=(1.0, 1.2)), "etas"),
    ("Rprop", dict(etas=(0.5, 1.0)), "etas"),
    ("Rprop", dict(etas=(0.0, 1.2)), "etas"),
    ("ASGD", dict(lr=-1.0), "lr"),
    ("ASGD", dict(weight_decay=-0.1), "weight_decay"),
    ("Adafactor", dict(lr=-1.0), "lr"),
    ("Adafactor", dict(beta2_decay=0.1), "beta2_decay"),
    ("Adafactor", dict(eps=(-1.0, 1e-3)), "eps"),
    ("Adafactor", dict(eps=(None, -1e-3)), "eps"),
    ("Adafactor", dict(d=0.5), "d"),
    ("Adafactor", dict(weight_decay=-0.1), "weight_decay"),
]


@pytest.mark.parametrize(("name", "kwargs", "word"), BAD)
def test_settings_out_of_range_are_refused_as_torch(name, kwargs, word):
    with pytest.raises(ValueError):
        getattr(torch.optim, name)([torch.ones(2, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError, match=name) as e:
        getattr(optim, name)([ta.ones(2, requires_grad=True)], **kwargs)
    assert word in str(e.value)


def test_what_torch_takes_is_taken():
    # ASGD checks no alpha, lambd or t0; Rprop no step_sizes; Adafactor beta2_decay 0, d 1
    for name, kwargs in [("ASGD", dict(alpha=-1.0, lambd=-1.0, t0=-5)),
                         ("Rprop", dict(step_sizes=(1.0, 0.1))),
                         ("Adafactor", dict(beta2_decay=0.0, d=1.0, eps=(0.0, 0.0)))]:
        getattr(torch.optim, name)([torch.ones(2, requires_grad=True)], **kwargs)
        getattr(optim, name)([ta.ones(2, requires_grad=True)], **kwargs)
    with pytest.raises(TypeError, match="Adafactor"):
        optim.Adafactor([ta.ones(2, requires_grad=True)], betas=(0.9, 0.99))


def test_settings_by_position_as_torch():
    cases = [("Rprop", (0.1, (0.4, 1.1), (1e-4, 1.0))),
             ("ASGD", (0.1, 1e-3, 0.5, 10.0, 0.01)),
             ("Adafactor", (0.1, -0.7, (1e-30, 1e-2), 2.0, 0.01))]
    for name, args in cases:
        o = getattr(optim, name)([ta.ones(2, requires_grad=True)], *args)
        t = getattr(torch.optim, name)([torch.ones(2, requires_grad=True)], *args)
        assert {k: v for k, v in o.param_groups[0].items() if k != "params"} == \
            {k: v for k, v in t.param_groups[0].items() if k != "params"}


# ---- nn.init.sparse_ --------------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "sparsity"), [(10, 0.1), (7, 0.3), (50, 0.5), (5, 0.0)])
def test_sparse_zeros_each_column_as_torch(rows, sparsity):
    w = ta.empty(rows, 400)
    out = nn.init.sparse_(w, sparsity, std=0.5, generator=ta.Generator().manual_seed(0))
    assert out is w
    zeros = (w.numpy() == 0).sum(axis=0)
    tw = torch.nn.init.sparse_(torch.empty(rows, 400), sparsity, std=0.5)
    want = math.ceil(sparsity * rows)
    np.testing.assert_array_equal(zeros, want)
    np.testing.assert_array_equal((tw.numpy() == 0).sum(axis=0), want)
    nonzero = w.numpy()[w.numpy() != 0]
    assert abs(nonzero.std() - 0.5) < 0.05 and abs(nonzero.mean()) < 0.05


def test_sparse_default_std_generator_and_refusals():
    a = nn.init.sparse_(ta.empty(20, 300), 0.2, generator=ta.Generator().manual_seed(3))
    b = nn.init.sparse_(ta.empty(20, 300), 0.2, generator=ta.Generator().manual_seed(3))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    nonzero = a.numpy()[a.numpy() != 0]
    assert abs(nonzero.std() - 0.01) < 0.001
    # the zero rows differ between columns (a new permutation per column)
    assert len({tuple(np.flatnonzero(col == 0)) for col in a.numpy().T}) > 100
    with pytest.raises(ValueError, match="2 dimensions"):
        torch.nn.init.sparse_(torch.empty(3), 0.1)
    with pytest.raises(ValueError, match="sparse_.*2 dim"):
        nn.init.sparse_(ta.empty(3), 0.1)
    p = nn.Parameter(ta.ones(4, 3))
    nn.init.sparse_(p, 0.5)  # under no_grad: a parameter is filled in place
    assert p.requires_grad and p.grad_fn is None and ((p.numpy() == 0).sum(0) == 2).all()


# ---- nn.LazyLinear ----------------------------------------------------------------------------


def test_lazy_linear_becomes_a_linear_on_its_first_call():
    m = nn.LazyLinear(3)
    t = torch.nn.LazyLinear(3)
    assert isinstance(m.weight, nn.UninitializedParameter)
    assert isinstance(m.bias, nn.UninitializedParameter)
    assert repr(m) == repr(t) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert m.in_features == t.in_features == 0
    before = list(m.parameters())
    ta.manual_seed(0)
    y = m(ta.randn(2, 7, 5))
    ty = t(torch.randn(2, 7, 5))
    assert type(m) is nn.Linear and type(t) is torch.nn.Linear
    assert isinstance(m, nn.Linear)
    assert y.shape == tuple(ty.shape) == (2, 7, 3)
    assert m.in_features == 5 and m.weight.shape == (3, 5) and m.bias.shape == (3,)
    assert [p is q for p, q in zip(before, m.parameters(), strict=True)] == [True, True]
    assert type(m.weight) is nn.Parameter and m.weight.requires_grad
    bound = 1 / math.sqrt(5)
    assert np.abs(m.weight.numpy()).max() <= bound and np.abs(m.bias.numpy()).max() <= bound
    assert m.weight.numpy().std() > 0.1
    assert repr(m) == repr(t) == "Linear(in_features=5, out_features=3, bias=True)"
    with pytest.raises(Exception):  # noqa: B017 - a wrong width now fails, as torch's matmul
        m(ta.randn(2, 4))


def test_lazy_linear_without_bias_and_dtype():
    m = nn.LazyLinear(4, bias=False, dtype=ta.float64)
    assert m.bias is None and len(list(m.parameters())) == 1
    y = m(ta.randn(3, 2, dtype=ta.float64))
    assert y.shape == (3, 4) and m.weight.dtype == np.float64 and m.bias is None
    m2 = nn.LazyLinear(2).to(ta.float64)
    m2(ta.randn(1, 6, dtype=ta.float64))
    assert m2.weight.dtype == np.float64 and m2.weight.shape == (2, 6)


def test_an_optimizer_built_before_the_first_call_steps_the_materialized_parameters():
    # torch takes it (no error, no warning): the parameters are the same objects afterwards,
    # filled in place, so the optimizer steps them
    m = nn.LazyLinear(3)
    opt = optim.Adam(m.parameters(), lr=0.1)
    assert opt.state_dict()["state"] == {}
    opt.step()  # no gradients yet: nothing happens
    m(ta.randn(4, 5)).sum().backward()
    w = m.weight.numpy().copy()
    opt.step()
    np.testing.assert_allclose(np.abs(m.weight.numpy() - w), 0.1, rtol=1e-5)


def test_lazy_linear_loads_a_state_dict_as_torch():
    src = nn.Linear(6, 2)
    m = nn.LazyLinear(2)
    m.load_state_dict(src.state_dict())
    np.testing.assert_array_equal(m.weight.numpy(), src.weight.numpy())
    assert m.weight.shape == (2, 6) and not isinstance(m.weight, nn.UninitializedParameter)
    x = ta.randn(3, 6)
    np.testing.assert_allclose(m(x).numpy(), src(x).numpy())
    assert m.in_features == 6 and type(m) is nn.Linear
