"""Every registered op against finite differences, and what finite differences cannot see.

The gradcheck tests are generated from the registry: one test per (op, sample case) from
`tinyattn.ops.samples`, in float64, the broadcasting grid included; an op registered without
samples becomes a failing test. Below them: gradcheck's own failure reports, and the op
behaviours a finite difference cannot check (k-way ties, the exact softmax VJP, scatter-add of
repeated indices, cross_entropy's options, matmul's shapes).
"""

import itertools
import re
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.gradcheck import check_gradients
from tinyattn.ops import REGISTRY, Op
from tinyattn.ops import samples as S

# Binary broadcasting ops and unary elementwise ops list the grid among their samples
# (samples.binary_grid / unary_grid); the test below holds them to it.
BINARY_BROADCASTING = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2",
                       "logaddexp", "hypot", "copysign", "remainder", "fmod", "floor_divide")
UNARY_ELEMENTWISE = ("neg", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs", "sin", "cos",
                     "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
                     "exp2", "expm1", "log2", "log10", "log1p", "erf", "square", "rsqrt",
                     "floor", "ceil", "trunc", "round", "sign", "frac", "silu", "softplus",
                     "mish", "elu", "selu", "celu", "logsigmoid", "softsign", "leaky_relu",
                     "hardtanh", "hardsigmoid", "hardswish", "tanhshrink", "threshold",
                     "softshrink", "hardshrink")

# Elementwise ops whose samples do not include the broadcasting grid: checked here over
# it too (where: x and y over every broadcasting pair; the rest: x of every grid shape).
EXTRA_GRID = {
    "where": lambda a, b: S.case(S.const(np.arange(6).reshape(2, 3) % 2 == 0), a, b),
    "masked_fill": lambda a, _: S.case(a, S.const(np.arange(np.prod(a)).reshape(a) % 2 == 1),
                                       value=-3.0),
    "clip": lambda a, _: S.case(a, min=-0.3, max=0.4),
    "gelu": lambda a, _: S.case(a),
    "cast": lambda a, _: S.case(a, dtype=np.float64),
    "reciprocal": lambda a, _: S.case(S.pos(a)),
    "lerp": lambda a, b: S.case(a, b, (2, 1)),
}


def _extra_grid_cases(name):
    if name in ("where", "lerp"):  # a third input (2, 3) or (2, 1): x and y broadcast with it
        return [EXTRA_GRID[name](a, b) for a, b in itertools.product(S.GRID, S.GRID)
                if _broadcast(a, b)]
    if name in EXTRA_GRID:
        return [EXTRA_GRID[name](a, None) for a in S.GRID]
    return []


def _broadcast(a, b):
    try:
        return bool(np.broadcast_shapes(a, b, (2, 1)))
    except ValueError:
        return False


def all_cases(name):
    """The sample cases of op `name` plus the extra grid cases; [] when it has no samples."""
    samples = REGISTRY[name].samples
    return samples + _extra_grid_cases(name) if samples else []


def gradcheck_params(registry=None):
    """(op name, case number) for every case of every registered op; (name, None) for an op
    that has no cases at all, which the test turns into a failure."""
    registry = REGISTRY if registry is None else registry
    params = []
    for name in sorted(registry):
        n = len(all_cases(name))
        params += [(name, i) for i in range(n)] if n else [(name, None)]
    return params


def run_case(name, index):
    """Gradient-check case `index` of op `name` in float64; fail if it has no samples."""
    if index is None:
        pytest.fail(f"op {name!r} is registered without sample inputs: add them to "
                    "@op(..., samples=[...]) where the op is defined (see tinyattn/ops/samples.py)")
    inputs, params = all_cases(name)[index]
    rng = np.random.default_rng(1000 + index)
    xs = S.materialize(inputs, rng, lambda v, rg: ta.tensor(v, requires_grad=rg))
    assert any(isinstance(x, ta.Tensor) and x.requires_grad for x in xs), "nothing to check"
    op = REGISTRY[name]
    report = check_gradients(lambda *a: op(*a, **params), xs)
    assert report.ok, f"{name} on {inputs} {params}: {report.message}"


@pytest.mark.parametrize("name,index", gradcheck_params(),
                         ids=[f"{n}-{i}" for n, i in gradcheck_params()])
def test_op_gradcheck(name, index):
    run_case(name, index)


def test_every_op_names_one_gradient_per_input_and_the_formula_uses_them():
    for name, op in REGISTRY.items():
        arities = {len(inputs) for inputs, _ in op.samples}
        if op.grads == ():  # variadic (cat, stack): explain says g[0], g[1], ...
            assert len(arities) > 1, f"{name}: takes a fixed number of inputs, name its grads"
            continue
        assert max(arities) == len(op.grads), (name, op.grads, arities)  # optional inputs last
        for i, g in enumerate(op.grads):
            assert (g is None) == (i in op.nondiff), (name, i, g)
            if g is not None:
                assert re.search(rf"\b{g}\s*=", op.formula), (name, g, op.formula)


def test_grid_ops_are_registered_and_use_the_whole_grid():
    for name in BINARY_BROADCASTING + UNARY_ELEMENTWISE:
        assert name in REGISTRY
        shapes = {x.shape if isinstance(x, (S.pos, S.within)) else x
                  for inputs, _ in REGISTRY[name].samples for x in inputs}
        assert set(S.GRID) <= shapes, name


@pytest.mark.parametrize("samples", [None, []])
def test_an_op_registered_without_samples_fails_the_suite(monkeypatch, samples):
    fresh = Op("fresh_double", lambda be, x: (2 * x, ()), "gx = 2 g", samples=samples)
    fresh.defvjp(lambda be, g, saved: (2 * g,))
    monkeypatch.setitem(REGISTRY, "fresh_double", fresh)  # undone after the test
    assert ("fresh_double", None) in gradcheck_params()
    with pytest.raises(pytest.fail.Exception, match="fresh_double.*without sample inputs"):
        run_case("fresh_double", None)
    # once it has samples, it gets checked like any other op
    fresh.samples = [S.case((2, 3))]
    assert ("fresh_double", 0) in gradcheck_params()
    run_case("fresh_double", 0)
    monkeypatch.undo()
    assert "fresh_double" not in REGISTRY


# ---- gradcheck itself: it must fail loudly, and say where -----------------------------------


def _wrong_double():
    """x -> 2x with a VJP that is wrong at element [1, 2] only."""
    bad = Op("bad_double", lambda be, x: (2 * x, ()), "gx = 2 g (wrong at [1, 2])")

    def vjp(be, g, saved):
        gx = 2 * g
        gx[1, 2] *= 1.25
        return (gx,)

    bad.defvjp(vjp)
    return bad


def test_gradcheck_error_names_input_index_and_both_values():
    bad = _wrong_double()
    a = ta.tensor(np.ones((2, 3)))
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    with pytest.raises(ta.GradcheckError) as info:
        ta.gradcheck(lambda c, y: bad(y) * c, [a, x])
    msg = str(info.value)
    assert "input 1 (2, 3)" in msg
    assert "d out[1, 2] / d x[1, 2]" in msg
    assert "analytic 2.5 vs numeric 2" in msg


def test_gradcheck_error_along_random_directions():
    bad = _wrong_double()
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    with pytest.raises(ta.GradcheckError, match=r"input 0 .*random direction \d+: analytic "
                                                r"\S+ vs numeric"):
        ta.gradcheck(lambda y: bad(y), [x], full_limit=0)


def test_gradcheck_passes_a_correct_function_both_ways():
    x = ta.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    assert ta.gradcheck(lambda y: (y.tanh() * y).sum(dim=1), [x])
    assert ta.gradcheck(lambda y: (y.tanh() * y).sum(dim=1), [x], full_limit=0)


def test_gradcheck_warns_on_inputs_below_float64():
    x = ta.randn(2, 3, requires_grad=True)  # float32
    with pytest.warns(UserWarning, match="input 0 is float32.*float64"):
        assert ta.gradcheck(lambda y: y * y, [x])


def test_gradcheck_needs_something_to_check():
    with pytest.raises(ValueError, match="no input requires grad"):
        ta.gradcheck(lambda y: y * y, [ta.tensor(np.ones(3))])


# ---- what finite differences cannot see ------------------------------------------------------


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_max_min_ties_split_the_gradient_evenly(reduce):
    """amax/amin over a dim and max/min of the whole tensor share g among tied entries (as
    torch.amax and torch.max() do); max/min with a dim send it to the index they return."""
    x = ta.tensor(np.array([[5.0, 5.0, 5.0, 1.0], [2.0, 7.0, 7.0, 7.0]]), requires_grad=True)
    if reduce == "min":
        x = ta.tensor(-x.numpy(), requires_grad=True)
    g = np.array([3.0, 6.0])
    getattr(x, "a" + reduce)(dim=1).backward(g)
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 1.0, 1.0, 0.0], [0.0, 2.0, 2.0, 2.0]])
    x.grad = None
    values, indices = getattr(x, reduce)(dim=1)
    values.backward(g)
    np.testing.assert_array_equal(indices.numpy(), [0, 1])  # the first of the tied entries
    np.testing.assert_array_equal(x.grad.numpy(), [[3.0, 0.0, 0.0, 0.0], [0.0, 6.0, 0.0, 0.0]])
    x.grad = None
    getattr(x, reduce)().backward()  # the whole tensor: 3-way tie at the top (or bottom)
    winners = x.numpy() == getattr(x.numpy(), reduce)()
    np.testing.assert_array_equal(x.grad.numpy(), winners / winners.sum())


def test_maximum_minimum_ties_split_in_half():
    x = ta.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = ta.tensor(np.array([1.0, 0.0, 5.0]), requires_grad=True)
    (x.maximum(y) + 10 * x.minimum(y)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.5, 1.0, 10.0])
    np.testing.assert_array_equal(y.grad.numpy(), [5.5, 10.0, 1.0])


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_vjp_is_y_times_g_minus_sum_g_y(dim):
    rng = np.random.default_rng(3)
    x = ta.tensor(rng.standard_normal((3, 4, 5)), requires_grad=True)
    g = rng.standard_normal((3, 4, 5))
    y = F.softmax(x, dim=dim)
    y.backward(g)
    yv = y.numpy()
    # the formula to the last bits (the backend sums rows in its own order: Backend.row_sum)
    np.testing.assert_allclose(x.grad.numpy(), yv * (g - (g * yv).sum(dim, keepdims=True)),
                               rtol=1e-13, atol=1e-16)


def test_softmax_of_huge_and_masked_rows():
    x = ta.tensor(np.array([[1e4, -1e4, 0.0, 1e4], [0.5, -np.inf, 1.0, -np.inf],
                            [-np.inf] * 4]), requires_grad=True)
    y = F.softmax(x, dim=-1)
    y.backward(np.arange(12.0).reshape(3, 4))
    want = np.array([[0.5, 0, 0, 0.5], [1 / (1 + np.e**0.5), 0, 1 / (1 + np.e**-0.5), 0], [0] * 4])
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-14, atol=1e-300)
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_array_equal(x.grad.numpy()[2], 0)


# getitem: every kind of index NumPy knows, forward like NumPy, backward a scatter-add

INDICES = {
    "int": 1,
    "negative int": -1,
    "slice": slice(1, 3),
    "step": (slice(None), slice(None, None, 2)),
    "negative step": (slice(None, None, -1), slice(3, 0, -2)),
    "ellipsis": (Ellipsis, 1),
    "none": (None, slice(1, 3), None),
    "int array": np.array([2, 0, 2, 2]),
    "two int arrays": (np.array([0, 0, 3]), np.array([1, 1, 4])),
    "list": [3, 3, 1],
    "bool mask": np.arange(20).reshape(4, 5) % 3 == 0,
    "mixed": (slice(None, None, 2), np.array([4, 4, 0])),
}


@pytest.mark.parametrize("kind", list(INDICES))
@pytest.mark.parametrize("as_tensor", [False, True])
def test_getitem_like_numpy_with_scatter_add_vjp(kind, as_tensor):
    index = INDICES[kind]
    if as_tensor:
        wrap = lambda p: ta.tensor(np.asarray(p)) if isinstance(p, (list, np.ndarray)) else p  # noqa: E731
        index = tuple(map(wrap, index)) if isinstance(index, tuple) else wrap(index)
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((4, 5))
    x = ta.tensor(xv, requires_grad=True)
    np_index = INDICES[kind] if not isinstance(INDICES[kind], list) else np.array(INDICES[kind])
    out = x[index]
    np.testing.assert_array_equal(out.numpy(), xv[np_index])
    g = rng.standard_normal(out.shape)
    out.backward(g)
    want = np.zeros_like(xv)
    np.add.at(want, np_index, g)  # repeated indices accumulate
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-13, atol=1e-15)  # sum order may differ


def test_getitem_repeated_index_accumulates():
    x = ta.tensor(np.zeros(3), requires_grad=True)
    x[ta.tensor([2, 2, 2, 0])].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 3.0])


# matmul: every shape combination NumPy's matmul takes, values and gradient shapes

MATMUL_SHAPES = [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)),
                 ((2, 3, 4), (4, 5)), ((4,), (2, 4, 5)), ((2, 3, 4), (4,)),
                 ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 2)), ((6, 2, 3), (6, 3, 1))]


@pytest.mark.parametrize("a,b", MATMUL_SHAPES)
def test_matmul_like_numpy(a, b):
    rng = np.random.default_rng(1)
    av, bv = rng.standard_normal(a), rng.standard_normal(b)
    x, y = ta.tensor(av, requires_grad=True), ta.tensor(bv, requires_grad=True)
    out = x @ y
    want = av @ bv
    assert out.shape == want.shape
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)
    g = rng.standard_normal(want.shape)
    out.backward(g)
    assert x.grad.shape == a and y.grad.shape == b
    # f = sum(g * (x @ y)) is linear in x and in y, so <df/dx, x> = f = <df/dy, y>
    f = np.sum(g * want)
    np.testing.assert_allclose(np.sum(x.grad.numpy() * av), f, rtol=1e-10)
    np.testing.assert_allclose(np.sum(y.grad.numpy() * bv), f, rtol=1e-10)


def test_matmul_gradients_are_the_textbook_pair():
    rng = np.random.default_rng(2)
    av, bv, g = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)), \
        rng.standard_normal((2, 3, 5))
    x, y = ta.tensor(av, requires_grad=True), ta.tensor(bv, requires_grad=True)
    (x @ y).backward(g)
    np.testing.assert_allclose(x.grad.numpy(), g @ bv.T, rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), sum(av[i].T @ g[i] for i in range(2)), rtol=1e-12)


# cross_entropy: ignore_index, reduction, label_smoothing, against the formula written out


def _ce_numpy(x, t, ignore_index=-100, reduction="mean", eps=0.0):
    logp = x - np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)) \
        - x.max(1, keepdims=True)
    valid = t != ignore_index
    picked = logp[np.arange(len(t)), np.where(valid, t, 0)]
    loss = np.where(valid, -(1 - eps) * picked - eps * logp.mean(1), 0.0)
    return {"none": loss, "sum": loss.sum(), "mean": loss.sum() / valid.sum()}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.25])
def test_cross_entropy_options(reduction, eps):
    rng = np.random.default_rng(4)
    xv = rng.standard_normal((5, 4))
    t = np.array([1, -1, 3, 0, -1])
    x = ta.tensor(xv, requires_grad=True)
    loss = F.cross_entropy(x, ta.tensor(t), ignore_index=-1, reduction=reduction,
                           label_smoothing=eps)
    np.testing.assert_allclose(loss.numpy(), _ce_numpy(xv, t, -1, reduction, eps), rtol=1e-12)
    loss.backward(np.ones(loss.shape))
    np.testing.assert_array_equal(x.grad.numpy()[t == -1], 0)  # ignored rows get nothing
    np.testing.assert_allclose(x.grad.numpy().sum(1), 0, atol=1e-12)  # softmax minus a target
    assert ta.gradcheck(lambda z: F.cross_entropy(z, ta.tensor(t), ignore_index=-1,
                                                  reduction=reduction, label_smoothing=eps), [x])


def test_cross_entropy_ignores_class_0_when_ignore_index_is_0():
    """ignore_index=0, a class every target could be: the rows of class 0 count for nothing
    (the fast path for targets none of which can be ignored must not take them)."""
    xv = np.random.default_rng(5).standard_normal((4, 3))
    t = np.array([0, 2, 1, 0])
    x = ta.tensor(xv, requires_grad=True)
    loss = F.cross_entropy(x, ta.tensor(t), ignore_index=0)
    np.testing.assert_allclose(loss.numpy(), _ce_numpy(xv, t, 0), rtol=1e-12)
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy()[t == 0], 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_with_every_target_ignored_is_nan_with_zero_gradient(dtype):
    x = ta.tensor(np.ones((3, 4), dtype=dtype), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0/0 RuntimeWarning on the way
        loss = F.cross_entropy(x, ta.tensor([-100, -100, -100]))
        assert np.isnan(loss.item()) and loss.dtype == dtype  # as in PyTorch
        loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), 0)


# ---- the float64 re-run of gradcheck_graph: casts and random ops ------------------------------


def _graph_checks(build):
    """{op name: (ok, skipped)} of gradcheck_graph on the loss `build()` makes under record()."""
    with ta.record():
        loss = build()
    report = ta.gradcheck_graph(loss, n_directions=1)
    return {c.label.split("#")[0]: (c.ok, c.skipped) for c in report.checks}


def test_gradcheck_graph_checks_a_float16_cast_in_float64():
    x = ta.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    checks = _graph_checks(lambda: (x.to(ta.float16).to(ta.float32) * x).sum())
    assert checks["cast"] == (True, "")  # the casts are checked (in float64), not skipped


def test_gradcheck_graph_checks_dropout_with_a_fixed_draw():
    ta.manual_seed(0)
    x = ta.tensor(np.linspace(-1, 1, 20, dtype=np.float64).reshape(4, 5), requires_grad=True)
    checks = _graph_checks(lambda: F.dropout(x, p=0.5, training=True).square().sum())
    assert checks["dropout"] == (True, "")  # checked, not skipped as random


def test_the_registry_holds_each_family_op_once_and_refuses_a_name_twice():
    import types

    from tinyattn import ops

    one = types.SimpleNamespace(__name__="one", OPS=[REGISTRY["exp"], REGISTRY["log"]])
    two = types.SimpleNamespace(__name__="two", OPS=[REGISTRY["sin"]])
    assert ops._merge([one, two]) == {"exp": REGISTRY["exp"], "log": REGISTRY["log"],
                                      "sin": REGISTRY["sin"]}
    with pytest.raises(ValueError, match="op 'exp' is registered twice"):
        ops._merge([one, two, one])


def test_the_sample_grids_cover_every_shape_and_every_broadcasting_pair():
    shapes = [(), (3,), (2, 3), (1, 3), (2, 1)]
    assert S.unary_grid() == [((s,), {}) for s in shapes]
    positive = S.unary_grid(positive=True)
    assert [type(x) for (x,), _ in positive] == [S.pos] * 5
    assert [x.shape for (x,), _ in positive] == shapes
    bounded = S.unary_grid(low=-0.5, high=0.9)
    assert [(x.shape, x.low, x.high) for (x,), _ in bounded] == [(s, -0.5, 0.9) for s in shapes]
    broadcastable = [(a, b) for a in shapes for b in shapes]  # every pair of these does
    assert S.binary_grid() == [((a, b), {}) for a, b in broadcastable]
    mixed = S.binary_grid(second=S.pos)
    assert [(a, type(b), b.shape) for (a, b), _ in mixed] == \
        [(a, S.pos, b) for a, b in broadcastable]
    firsts = S.binary_grid(first=S.pos)
    assert [(a.shape, b) for (a, b), _ in firsts] == broadcastable
    assert S.vals([[1, 2]]).values.dtype == np.float64
    assert S.const([1, 2]).values.dtype == np.int64
    assert S.const([1, 2], dtype=np.int32).values.dtype == np.int32
    assert S.const(np.ones(2, dtype=bool)).values.dtype == bool


def test_an_op_defined_outside_the_package_describes_itself_and_runs():
    from tinyattn.ops import op

    @op("cube", "gx = 3 x² g")
    def cube(be, x):
        """out = x³"""
        return x * x * x, (x,)

    @cube.defvjp
    def cube_vjp(be, g, saved):
        (x,) = saved
        return (3 * x * x * g,)

    assert isinstance(cube, Op) and cube.name == "cube" and cube.doc == "out = x³"
    assert repr(cube) == "<Op cube: gx = 3 x² g>"
    # the defaults: one gradient gx, no broadcasting, nothing saved to guard, no samples or traps
    assert (cube.grads, cube.broadcasts, cube.nondiff, cube.fused, cube.promote) == \
        (("gx",), False, (), False, None)
    assert (cube.saves, cube.saves_out, cube.view, cube.samples) == ({}, None, False, [])
    assert cube.traps is None and cube.float64_params is None
    x = ta.tensor([1.0, -2.0], dtype=ta.float64, requires_grad=True)
    y = cube(x)
    y.sum().backward()
    np.testing.assert_array_equal(y.numpy(), [1.0, -8.0])
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 12.0])

    def plain(be, x, y):
        return x + y, ()

    flagged = op("plain", "gx = g, gy = g", grads=("gx", "gy"), broadcasts=True, nondiff=(1,),
                 fused=True, promote="common", saves={0: 0}, saves_out=1, view=True,
                 samples=[S.case((2,), (2,))], traps=print, float64_params=dict)(plain)
    assert flagged.fwd is plain and flagged.doc == "" and flagged.formula == "gx = g, gy = g"
    assert (flagged.grads, flagged.broadcasts, flagged.nondiff, flagged.fused,
            flagged.promote) == (("gx", "gy"), True, (1,), True, "common")
    assert (flagged.saves, flagged.saves_out, flagged.view, flagged.samples, flagged.traps,
            flagged.float64_params) == ({0: 0}, 1, True, [S.case((2,), (2,))], print, dict)
