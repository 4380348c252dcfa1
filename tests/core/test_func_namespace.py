"""ta.func (torch.func): functional_call, grad, grad_and_value, vjp, jvp, jacrev, jacfwd, vmap
and stack_module_state against torch.func in float64; second derivatives refused clearly."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn

torch = pytest.importorskip("torch")
tf = torch.func


def _t(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


def _close(mine, theirs):
    """Same pytree structure and values."""
    if isinstance(theirs, dict):
        assert isinstance(mine, dict) and list(mine) == list(theirs)
        for k in theirs:
            _close(mine[k], theirs[k])
    elif isinstance(theirs, (tuple, list)):
        assert type(mine) is type(theirs) and len(mine) == len(theirs)
        for a, b in zip(mine, theirs, strict=True):
            _close(a, b)
    else:
        assert isinstance(mine, ta.Tensor), type(mine)
        np.testing.assert_allclose(mine.numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)


def _mlp_pair(seed=0):
    ta.manual_seed(seed)
    mine = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).to(ta.float64)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                                 torch.nn.Linear(4, 2)).double()
    with torch.no_grad():
        for (_, p), (_, q) in zip(mine.named_parameters(), theirs.named_parameters(), strict=True):
            q.copy_(_t(p.numpy()))
    return mine, theirs


def _params(model, scale=1.0):
    return {k: (v.detach() * scale) for k, v in model.named_parameters()}


def _xs(*shape, seed=1):
    a = np.random.default_rng(seed).standard_normal(shape)
    return ta.tensor(a, dtype=ta.float64), _t(a)


# ---- functional_call --------------------------------------------------------------------------


def test_functional_call_on_an_mlp_matches_torch_and_leaves_the_model_alone():
    mine, theirs = _mlp_pair()
    x, tx = _xs(5, 3)
    before = {k: v.numpy().copy() for k, v in mine.named_parameters()}
    out = ta.func.functional_call(mine, _params(mine, 2.0), (x,))
    tout = tf.functional_call(theirs, _params(theirs, 2.0), (tx,))
    _close(out, tout)
    for k, v in mine.named_parameters():
        assert isinstance(v, nn.Parameter) and mine.get_parameter(k) is v
        np.testing.assert_array_equal(v.numpy(), before[k])
    _close(mine(x), theirs(tx))  # (back to its own weights)


def test_functional_call_with_a_partial_dict_a_single_arg_and_kwargs():
    mine, theirs = _mlp_pair()
    x, tx = _xs(2, 3)
    part = {"2.bias": ta.zeros(2, dtype=ta.float64)}
    _close(ta.func.functional_call(mine, part, x), tf.functional_call(
        theirs, {"2.bias": torch.zeros(2, dtype=torch.float64)}, tx))
    lin = nn.Linear(3, 2).to(ta.float64)
    w = ta.ones(2, 3, dtype=ta.float64)
    out = ta.func.functional_call(lin, ({"weight": w}, {"bias": ta.zeros(2, dtype=ta.float64)}),
                                  (), {"input": x})
    np.testing.assert_allclose(out.numpy(), x.numpy().sum(1, keepdims=True).repeat(2, 1))


class _Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2, bias=False)
        self.b = nn.Linear(2, 2, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


class _TorchTied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(2, 2, bias=False)
        self.b = torch.nn.Linear(2, 2, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


def test_functional_call_on_tied_weights_as_torch():
    mine, theirs = _Tied().to(ta.float64), _TorchTied().double()
    with torch.no_grad():
        theirs.a.weight.copy_(_t(mine.a.weight.numpy()))
    x, tx = _xs(3, 2)
    w = np.array([[2.0, 1.0], [0.0, 3.0]])
    _close(ta.func.functional_call(mine, {"b.weight": ta.tensor(w)}, (x,)),
           tf.functional_call(theirs, {"b.weight": _t(w)}, (tx,)))
    own = mine.a.weight.numpy().copy()
    _close(ta.func.functional_call(mine, {"b.weight": ta.tensor(w)}, (x,), tie_weights=False),
           tf.functional_call(theirs, {"b.weight": _t(w)}, (tx,), tie_weights=False))
    assert mine.b.weight is mine.a.weight
    np.testing.assert_array_equal(mine.a.weight.numpy(), own)
    with pytest.raises(ValueError, match="tied"):
        ta.func.functional_call(mine, {"a.weight": ta.tensor(w), "b.weight": ta.tensor(w * 2)},
                                (x,))


def test_functional_call_restores_after_an_exception_and_checks_strict():
    lin = nn.Linear(2, 2)
    own_w, own_b = lin.weight, lin.bias
    with pytest.raises(ta.ShapeError):
        ta.func.functional_call(lin, {"weight": ta.zeros(5, 7)}, (ta.zeros(3, 2),))
    assert lin.weight is own_w and lin.bias is own_b and lin._parameters["weight"] is own_w
    assert [p for p in lin.parameters()] == [own_w, own_b]
    with pytest.raises(RuntimeError, match="Missing key.*'bias'"):
        ta.func.functional_call(lin, {"weight": ta.zeros(2, 2)}, (ta.zeros(3, 2),), strict=True)
    assert lin.weight is own_w


def test_functional_call_with_buffers():
    bn = nn.BatchNorm1d(3).to(ta.float64).eval()
    tbn = torch.nn.BatchNorm1d(3).double().eval()
    x, tx = _xs(4, 3)
    mean = np.array([1.0, -1.0, 0.5])
    _close(ta.func.functional_call(bn, {"running_mean": ta.tensor(mean)}, (x,)),
           tf.functional_call(tbn, {"running_mean": _t(mean)}, (tx,)))
    np.testing.assert_array_equal(bn.running_mean.numpy(), np.zeros(3))


# ---- grad and friends ---------------------------------------------------------------------------


def test_grad_of_a_loss_through_functional_call_wrt_a_params_dict():
    mine, theirs = _mlp_pair()
    x, tx = _xs(6, 3)
    y, ty = _xs(6, 2, seed=2)

    def loss(model, fc, params, x, y):
        return ((fc(model, params, (x,)) - y) ** 2).mean()

    g = ta.func.grad(lambda p, x, y: loss(mine, ta.func.functional_call, p, x, y))(
        _params(mine), x, y)
    tg = tf.grad(lambda p, x, y: loss(theirs, tf.functional_call, p, x, y))(
        _params(theirs), tx, ty)
    _close(g, tg)
    assert all(p.grad is None for p in mine.parameters())
    # straight from named_parameters (they require grad): the same first-order gradient
    g2 = ta.func.grad(lambda p: loss(mine, ta.func.functional_call, p, x, y))(
        dict(mine.named_parameters()))
    _close(g2, tg)
    # one MAML-style inner step: new params, same loss
    fast = {k: p - 0.1 * g[k] for k, p in _params(mine).items()}
    tfast = {k: p - 0.1 * tg[k] for k, p in _params(theirs).items()}
    _close(loss(mine, ta.func.functional_call, fast, x, y),
           loss(theirs, tf.functional_call, tfast, tx, ty))


def test_grad_argnums_has_aux_and_pytrees():
    x, tx = _xs(3)
    y, ty = _xs(3, seed=2)

    def f(lib):
        return lambda a, b: (lib.sin(a) * b).sum()

    _close(ta.func.grad(f(ta), argnums=(0, 1))(x, y), tf.grad(f(torch), argnums=(0, 1))(tx, ty))
    _close(ta.func.grad(f(ta), argnums=1)(x, y), tf.grad(f(torch), argnums=1)(tx, ty))
    _close(ta.func.grad(f(ta), argnums=-1)(x, y), tf.grad(f(torch), argnums=-1)(tx, ty))

    def h(tree):
        return (tree["a"] ** 3).sum() + (tree["b"][0] * tree["b"][1].tanh()).sum(), tree["a"]

    tree = {"a": x, "b": (y, x)}
    g, aux = ta.func.grad(h, has_aux=True)(tree)
    tg, taux = tf.grad(h, has_aux=True)({"a": tx, "b": (ty, tx)})
    _close(g, tg)
    _close(aux, taux)
    assert not aux.requires_grad
    (g, (v, aux)) = ta.func.grad_and_value(h, has_aux=True)(tree)
    (tg, (tv, taux)) = tf.grad_and_value(h, has_aux=True)({"a": tx, "b": (ty, tx)})
    _close((g, v, aux), (tg, tv, taux))
    g, v = ta.func.grad_and_value(lambda a: (a ** 2).sum())(x)
    _close((g, v), tf.grad_and_value(lambda a: (a ** 2).sum())(tx))
    # an unused input gets zeros, as torch
    _close(ta.func.grad(lambda a, b: a.sum(), argnums=(0, 1))(x, y),
           tf.grad(lambda a, b: a.sum(), argnums=(0, 1))(tx, ty))


def test_grad_errors_name_the_function():
    x = ta.randn(3, dtype=ta.float64)
    with pytest.raises(RuntimeError, match=r"func.grad: f must return a 0-d tensor, got shape "
                                           r"\(3,\)"):
        ta.func.grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match="argnum=2, but only 1 positional"):
        ta.func.grad(lambda a: a.sum(), argnums=2)(x)
    with pytest.raises(RuntimeError, match=r"has_aux=True.*\(output, aux\)"):
        ta.func.grad(lambda a: a.sum(), has_aux=True)(x)
    with pytest.raises(ta.DTypeError, match="func.grad: only floating-point"):
        ta.func.grad(lambda a: a.sum())(ta.arange(3))
    with pytest.raises(TypeError, match="func.grad: the inputs to differentiate"):
        ta.func.grad(lambda a: a)(3.0)


@pytest.mark.parametrize("f", [ta.sin, lambda a: a ** 3, ta.tanh])
def test_second_derivatives_work_and_a_jacobian_of_a_jacobian_is_refused(f):
    x = ta.tensor(0.7, dtype=ta.float64)
    tf_f = {ta.sin: torch.sin, ta.tanh: torch.tanh}.get(f, f)
    assert float(ta.func.grad(f)(x)) == pytest.approx(float(tf.grad(tf_f)(_t(0.7))))
    assert float(ta.func.grad(ta.func.grad(f))(x)) == pytest.approx(
        float(tf.grad(tf.grad(tf_f))(_t(0.7))))
    assert float(ta.func.hessian(lambda a: f(a).sum())(x)) == pytest.approx(
        float(tf.hessian(lambda a: tf_f(a).sum())(_t(0.7))))
    with pytest.raises(ta.GraphError, match="func.jacrev: gradients of gradients"):
        ta.func.jacfwd(ta.func.jacrev(f))(x)


# ---- vjp, jvp, jacrev, jacfwd -------------------------------------------------------------------


def test_vjp_and_jvp_match_torch():
    x, tx = _xs(3)
    y, ty = _xs(3, seed=2)
    v, tv = _xs(3, seed=3)

    def f(lib):
        return lambda a, b: (lib.sin(a) * b, {"s": (a * b).sum()})

    out, fn = ta.func.vjp(f(ta), x, y)
    tout, tfn = tf.vjp(f(torch), tx, ty)
    _close(out, tout)
    ct = (v, {"s": ta.tensor(2.0, dtype=ta.float64)})
    tct = (tv, {"s": torch.tensor(2.0, dtype=torch.float64)})
    _close(fn(ct), tfn(tct))
    _close(fn(ct), tfn(tct))  # (again)
    out, fn, aux = ta.func.vjp(lambda a: (a.tanh(), a * 3), x, has_aux=True)
    tout, tfn, taux = tf.vjp(lambda a: (a.tanh(), a * 3), tx, has_aux=True)
    _close((out, fn(v), aux), (tout, tfn(tv), taux))
    _close(ta.func.jvp(f(ta), (x, y), (v, x)), tf.jvp(f(torch), (tx, ty), (tv, tx)))
    _close(ta.func.jvp(lambda a: a.exp(), (x,), (v,)), tf.jvp(lambda a: a.exp(), (tx,), (tv,)))


def test_jacrev_and_jacfwd_match_torch():
    x, tx = _xs(3)
    y, ty = _xs(2, seed=2)

    def f(lib):
        return lambda a, b: lib.outer(lib.tanh(a), b).sum(0) ** 2

    for mine, theirs in ((ta.func.jacrev, tf.jacrev), (ta.func.jacfwd, tf.jacfwd)):
        _close(mine(f(ta))(x, y), theirs(f(torch))(tx, ty))
        _close(mine(f(ta), argnums=(0, 1))(x, y), theirs(f(torch), argnums=(0, 1))(tx, ty))

    def g(tree):
        return {"u": tree[0].sin(), "v": (tree[1] * tree[0].sum()).sum()}

    _close(ta.func.jacrev(g)((x, y)), tf.jacrev(g)((tx, ty)))
    jac, aux = ta.func.jacrev(lambda a: (a.exp(), a + 1), has_aux=True)(x)
    _close((jac, aux), tf.jacrev(lambda a: (a.exp(), a + 1), has_aux=True)(tx))


# ---- vmap, stack_module_state -------------------------------------------------------------------


def test_vmap_in_dims_out_dims_and_tuples():
    x, tx = _xs(4, 3)
    w, tw = _xs(3, 2, seed=2)
    _close(ta.func.vmap(lambda a, b: a @ b, in_dims=(0, None))(x, w),
           tf.vmap(lambda a, b: a @ b, in_dims=(0, None))(tx, tw))
    _close(ta.func.vmap(lambda a: a.sum())(x), tf.vmap(lambda a: a.sum())(tx))
    _close(ta.func.vmap(lambda a, b: a * b, in_dims=(1, 0))(x, x.T * 2),
           tf.vmap(lambda a, b: a * b, in_dims=(1, 0))(tx, tx.T * 2))

    def two(a, b):
        return a + b, a.sum()

    v, tv = _xs(4, seed=4)
    _close(ta.func.vmap(two, in_dims=(1, None), out_dims=(1, 0))(x, v),
           tf.vmap(two, in_dims=(1, None), out_dims=(-1, 0))(tx, tv))

    def nested(t):
        return t["p"] * t["q"][0] * t["q"][1]

    dims = ({"p": 1, "q": (0, None)},)
    _close(ta.func.vmap(nested, in_dims=dims, out_dims=-1)({"p": x, "q": (w[:, 0], 2.0)}),
           tf.vmap(nested, in_dims=dims, out_dims=-1)({"p": tx, "q": (tw[:, 0], 2.0)}))
    # per-example gradients: vmap over grad
    y, ty = _xs(4, seed=3)
    _close(ta.func.vmap(ta.func.grad(lambda a, b: (a.tanh() @ w).sum() * b), in_dims=(0, 0))(x, y),
           tf.vmap(tf.grad(lambda a, b: (a.tanh() @ tw).sum() * b), in_dims=(0, 0))(tx, ty))


def test_vmap_errors_and_randomness():
    x = ta.randn(3, 2)
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        ta.func.vmap(lambda a, b: a + b)(x, ta.randn(4, 2))
    with pytest.raises(ValueError, match="in_dims"):
        ta.func.vmap(lambda a: a, in_dims=(0, 0))(x)
    with pytest.raises(ValueError, match="at least one input"):
        ta.func.vmap(lambda a: a, in_dims=(None,))(x)
    with pytest.raises(ValueError, match="only return tensors"):
        ta.func.vmap(lambda a: 1.0)(x)
    with pytest.raises(RuntimeError, match="random operation"):
        ta.func.vmap(lambda a: a + ta.rand(2))(x)
    same = ta.func.vmap(lambda a: a * 0 + ta.rand(2), randomness="same")(x)
    np.testing.assert_array_equal(same.numpy()[0], same.numpy()[2])
    diff = ta.func.vmap(lambda a: a * 0 + ta.rand(2), randomness="different")(x)
    assert not np.array_equal(diff.numpy()[0], diff.numpy()[2])


def test_stack_module_state_and_vmap_over_an_ensemble():
    pairs = [_mlp_pair(seed) for seed in range(3)]
    params, buffers = ta.func.stack_module_state([m for m, _ in pairs])
    tparams, tbuffers = tf.stack_module_state([t for _, t in pairs])
    _close(params, {k: v for k, v in tparams.items()})
    assert all(p.requires_grad and p.is_leaf for p in params.values()) and buffers == {}
    x, tx = _xs(5, 3)
    base, tbase = pairs[0][0], pairs[0][1].to("meta")

    def run(p, b, x):
        return ta.func.functional_call(base, (p, b), (x,))

    def trun(p, b, x):
        return tf.functional_call(tbase, (p, b), (x,))

    out = ta.func.vmap(run, in_dims=(0, 0, None))(params, buffers, x)
    _close(out, tf.vmap(trun, in_dims=(0, 0, None))(tparams, tbuffers, tx))
    out.sum().backward()  # gradients reach the stacked leaves through the loop
    tf.vmap(trun, in_dims=(0, 0, None))(tparams, tbuffers, tx).sum().backward()
    _close({k: v.grad for k, v in params.items()}, {k: v.grad for k, v in tparams.items()})
    with pytest.raises(RuntimeError, match="same class"):
        ta.func.stack_module_state([nn.Linear(3, 4), nn.Sequential(nn.Linear(3, 4))])
