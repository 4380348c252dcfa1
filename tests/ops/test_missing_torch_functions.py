"""torch names that were missing, against torch 2.x: values, dtypes, gradients and errors.

trapezoid, trapz and cumulative_trapezoid; linalg.matrix_power (also ta.matrix_power and the
Tensor method) and chain_matmul; hsplit, vsplit, dsplit; combinations; select_scatter,
slice_scatter and diagonal_scatter (out of place, differentiable in both inputs); and, for
real tensors, Tensor.real, .imag, .conj(), .resolve_conj(), .is_conj() (complex dtypes stay
refused). Each is composed of existing ops, so their gradients are those ops'; they are
gradient-checked here in float64 all the same.
"""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

TORCH_DTYPES = {np.dtype(n): getattr(torch, n) for n in (
    "float16", "float32", "float64", "int32", "int64", "bool")}


def tt(values, dtype=np.float64, requires_grad=False):
    """The same values as a (ta, torch) pair."""
    a = np.asarray(values, dtype=dtype)
    return (ta.tensor(a.copy(), requires_grad=requires_grad),
            torch.tensor(a.copy(), requires_grad=requires_grad))


def rand(*shape, seed=0, requires_grad=True):
    return tt(np.random.default_rng(seed).standard_normal(shape), requires_grad=requires_grad)


def same(got, want, rtol=1e-12, atol=1e-12):
    """ta tensor `got` has torch tensor `want`'s shape, dtype and values."""
    want = want.detach()
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    assert TORCH_DTYPES[np.dtype(got.dtype)] == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.numpy().astype(np.float64),
                               want.numpy().astype(np.float64), rtol=rtol, atol=atol)


def grads_match(fn_ta, fn_torch, xs, ts, seed=1):
    """fn(*inputs) forward and backward with one random cotangent, against torch."""
    out, want = fn_ta(*xs), fn_torch(*ts)
    same(out, want)
    g = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    out.backward(ta.tensor(g.astype(out.dtype)))
    want.backward(torch.tensor(g, dtype=want.dtype))
    for x, t in zip(xs, ts, strict=True):
        if t.requires_grad:
            same(x.grad, t.grad)


NAMES = ["trapezoid", "trapz", "cumulative_trapezoid", "matrix_power", "chain_matmul", "hsplit",
         "vsplit", "dsplit", "combinations", "select_scatter", "slice_scatter",
         "diagonal_scatter", "real", "imag", "conj", "resolve_conj", "is_conj"]
METHODS = ["hsplit", "vsplit", "dsplit", "matrix_power", "select_scatter", "slice_scatter",
           "diagonal_scatter", "real", "imag", "conj", "resolve_conj", "is_conj"]


@pytest.mark.parametrize("name", NAMES)
def test_the_function_exists_as_torchs(name):
    assert hasattr(torch, name)
    assert callable(getattr(ta, name))
    assert name in ta.__all__


@pytest.mark.parametrize("name", METHODS)
def test_the_tensor_method_exists_as_torchs(name):
    assert hasattr(torch.Tensor, name) and hasattr(ta.Tensor, name)


def test_linalg_matrix_power_exists():
    assert callable(ta.linalg.matrix_power)


# ---- trapezoid, cumulative_trapezoid ------------------------------------------------------------

TRAPEZOID_CASES = [  # (y shape, x shape or None, keywords)
    ((3, 5), None, {}),
    ((3, 5), None, {"dx": 0.5}),
    ((3, 5), None, {"dim": 0, "dx": 2}),
    ((2, 3, 4), None, {"dim": 1}),
    ((7,), None, {}),
    ((3, 5), (5,), {}),  # 1-D x: one value per sample point along dim
    ((3, 5), (3,), {"dim": 0}),
    ((3, 5), (3, 5), {}),
    ((3, 5), (1, 5), {}),  # x broadcasts after the differences are taken
    ((2, 3, 4), (3, 4), {}),  # fewer dims than y: padded in front
    ((2, 3, 4), (3, 4), {"dim": 1}),
    ((4, 1), None, {}),  # one sample: 0
]


@pytest.mark.parametrize("fn", ["trapezoid", "cumulative_trapezoid"])
@pytest.mark.parametrize("y_shape,x_shape,kw", TRAPEZOID_CASES)
def test_trapezoid_values_and_gradients_match_torch(fn, y_shape, x_shape, kw):
    y, ty = rand(*y_shape)
    if x_shape is None:
        grads_match(lambda a: getattr(ta, fn)(a, **kw), lambda a: getattr(torch, fn)(a, **kw),
                    [y], [ty])
    else:
        x, tx = rand(*x_shape, seed=2)
        grads_match(lambda a, b: getattr(ta, fn)(a, b, **kw),
                    lambda a, b: getattr(torch, fn)(a, b, **kw), [y, x], [ty, tx])


def test_trapezoid_takes_x_by_keyword_and_trapz_is_the_same():
    y, ty = rand(2, 4)
    x, tx = tt([0.0, 1.0, 3.0, 4.5])
    same(ta.trapezoid(y, x=x, dim=-1), torch.trapezoid(ty, x=tx, dim=-1))
    same(ta.trapz(y, x), torch.trapz(ty, tx))
    same(ta.trapz(y, dx=3.0), torch.trapz(ty, dx=3.0))
    same(ta.trapezoid(y, dx=ta.tensor(2.0)), torch.trapezoid(ty, dx=torch.tensor(2.0)))


@pytest.mark.parametrize("fn", ["trapezoid", "cumulative_trapezoid"])
@pytest.mark.parametrize("y_dtype,x_dtype", [("int64", None), ("int64", "int64"),
                                             ("float32", None), ("float16", None),
                                             ("int64", "float32"), ("float32", "float64")])
def test_trapezoid_dtypes_are_torchs(fn, y_dtype, x_dtype):
    y, ty = tt(np.arange(12).reshape(3, 4), dtype=y_dtype)
    if x_dtype is None:
        same(getattr(ta, fn)(y), getattr(torch, fn)(ty), rtol=1e-3)
        same(getattr(ta, fn)(y, dx=2), getattr(torch, fn)(ty, dx=2), rtol=1e-3)
    else:
        x, tx = tt([0, 1, 3, 4], dtype=x_dtype)
        same(getattr(ta, fn)(y, x), getattr(torch, fn)(ty, tx), rtol=1e-3)


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_trapezoid_of_an_empty_dim_is_zeros_of_ys_dtype(dtype):
    y, ty = tt(np.zeros((2, 0)), dtype=dtype)
    same(ta.trapezoid(y), torch.trapezoid(ty))
    x, tx = tt(np.zeros(0))
    same(ta.trapezoid(y, x), torch.trapezoid(ty, tx))
    same(ta.cumulative_trapezoid(y), torch.cumulative_trapezoid(ty))


def test_trapezoid_gradcheck_in_float64():
    y = ta.tensor(np.random.default_rng(3).standard_normal((3, 4)), requires_grad=True)
    x = ta.tensor(np.array([0.0, 0.5, 1.5, 3.0]), requires_grad=True)
    assert ta.gradcheck(lambda a, b: ta.trapezoid(a, b, dim=1), (y, x))
    assert ta.gradcheck(lambda a, b: ta.cumulative_trapezoid(a, b), (y, x))
    assert ta.gradcheck(lambda a: ta.cumulative_trapezoid(a, dx=0.3, dim=0), (y,))


@pytest.mark.parametrize("fn", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_errors_name_the_function(fn):
    f = getattr(ta, fn)
    y = ta.ones(3, 4)
    with pytest.raises(ta.DimError, match=rf"^{fn}: dim 2 is out of range .*2 dims"):
        f(y, dim=2)
    with pytest.raises(ta.DimError, match=rf"^{fn}: .*0-d"):
        f(ta.tensor(3.0))
    with pytest.raises(ta.ShapeError, match=rf"^{fn}: .*one `x` value for each sample point.*"
                                            r"\(3,\).*\(3, 4\)"):
        f(y, ta.ones(3))
    with pytest.raises(ta.ShapeError, match=rf"^{fn}: "):
        f(y, ta.ones(2, 4))  # x does not broadcast with y
    with pytest.raises(ta.DTypeError, match=rf"^{fn}: .*bool"):
        f(y.bool())
    with pytest.raises(ta.DTypeError, match=rf"^{fn}: .*bool"):
        f(y, ta.ones(4).bool())
    with pytest.raises(TypeError, match=rf"^{fn}: .*x and dx"):
        f(y, ta.ones(4), dx=2.0)
    with pytest.raises(TypeError, match=rf"^{fn}: .*dx"):
        f(y, dx=True)
    with pytest.raises(TypeError, match=rf"^{fn}: .*dx="):
        f(y, 2.0)  # a number for x: torch takes it as dx= only


# ---- matrix_power, chain_matmul -----------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_matrix_power_matches_torch(n, shape):
    leaf, tleaf = rand(*shape)
    grads_match(lambda x: ta.linalg.matrix_power(x * 0.5, n),
                lambda x: torch.linalg.matrix_power(x * 0.5, n), [leaf], [tleaf])


def test_matrix_power_forms_and_dtypes():
    a, t = tt(np.arange(9).reshape(3, 3), dtype="int64")
    same(ta.linalg.matrix_power(a, 3), torch.linalg.matrix_power(t, 3))
    same(a.matrix_power(2), t.matrix_power(2))
    same(ta.matrix_power(a, 0), torch.matrix_power(t, 0))
    f, tf = rand(2, 2, requires_grad=False)
    one = ta.linalg.matrix_power(f, 1)
    assert one is not f  # a copy, as torch's
    same(one, torch.linalg.matrix_power(tf, 1))
    same(ta.linalg.matrix_power(ta.zeros(0, 2, 2), 3),
         torch.linalg.matrix_power(torch.zeros(0, 2, 2), 3))


def test_matrix_power_zero_is_the_identity_on_the_graph_with_a_zero_gradient():
    a, t = rand(2, 3, 3)
    out, want = ta.linalg.matrix_power(a, 0), torch.linalg.matrix_power(t, 0)
    same(out, want)
    assert out.requires_grad and want.requires_grad
    out.sum().backward()
    want.sum().backward()
    same(a.grad, t.grad)


def test_matrix_power_gradcheck_in_float64():
    a = ta.tensor(np.random.default_rng(4).standard_normal((2, 3, 3)) * 0.5, requires_grad=True)
    assert ta.gradcheck(lambda x: ta.linalg.matrix_power(x, 3), (a,))
    assert ta.gradcheck(lambda x: x.matrix_power(4), (a,))


def test_matrix_power_errors_name_the_function():
    with pytest.raises(ta.ShapeError, match=r"^linalg.matrix_power: .*at least 2 dims.*\(3,\)"):
        ta.linalg.matrix_power(ta.ones(3), 2)
    with pytest.raises(ta.ShapeError, match=r"^linalg.matrix_power: .*square.*\(3, 4\)"):
        ta.linalg.matrix_power(ta.ones(3, 4), 2)
    with pytest.raises(TypeError, match=r"^linalg.matrix_power: .*n must be an int"):
        ta.linalg.matrix_power(ta.ones(3, 3), 2.0)
    with pytest.raises(ta.linalg.LinAlgError, match=r"^linalg.inv: .*singular"):  # as torch
        ta.linalg.matrix_power(ta.ones(3, 3), -1)  # (n < 0: the inverse's power)
    with pytest.raises(TypeError, match=r"^linalg.matrix_power: "):
        ta.linalg.matrix_power([[1.0]], 2)


def test_chain_matmul_matches_torch_and_warns_as_deprecated():
    (a, ta_), (b, tb), (c, tc) = rand(2, 3), rand(3, 4, seed=1), rand(4, 5, seed=2)
    with pytest.warns(UserWarning, match="chain_matmul is deprecated.*linalg.multi_dot"):
        grads_match(ta.chain_matmul, torch.chain_matmul, [a, b, c], [ta_, tb, tc])
    with pytest.warns(UserWarning):
        one = ta.chain_matmul(a)
    assert one is not a
    same(one, ta_)


def test_chain_matmul_gradcheck_in_float64():
    xs = [ta.tensor(np.random.default_rng(i).standard_normal(s), requires_grad=True)
          for i, s in enumerate([(2, 3), (3, 3), (3, 2)])]
    with pytest.warns(UserWarning):
        assert ta.gradcheck(ta.chain_matmul, xs)


def test_chain_matmul_errors_name_the_function():
    with pytest.warns(UserWarning):
        with pytest.raises(ValueError, match=r"^chain_matmul: .*one or more matrices"):
            ta.chain_matmul()
        with pytest.raises(ta.ShapeError, match=r"^chain_matmul: .*2-D.*\(3,\)"):
            ta.chain_matmul(ta.ones(3), ta.ones(3, 4))
        with pytest.raises(ta.ShapeError, match=r"^chain_matmul: .*2-D.*\(2, 3, 3\)"):
            ta.chain_matmul(ta.ones(2, 3, 3))
        with pytest.raises(ta.ShapeError, match=r"^chain_matmul: .*\(2, 3\).*\(4, 4\)"):
            ta.chain_matmul(ta.ones(2, 3), ta.ones(4, 4))
        with pytest.raises(TypeError, match=r"^chain_matmul: "):
            ta.chain_matmul([ta.ones(2, 3), ta.ones(3, 4)])


# ---- hsplit, vsplit, dsplit ---------------------------------------------------------------------

SPLITS = [("hsplit", (6,), 3), ("hsplit", (6,), [1, 4]), ("hsplit", (2, 6, 2), 2),
          ("hsplit", (2, 6), [4, 2]), ("hsplit", (6,), [-1]), ("vsplit", (4, 3), 2),
          ("vsplit", (4, 3, 2), (1,)), ("vsplit", (4, 3), [1, 10]), ("dsplit", (2, 3, 4), 4),
          ("dsplit", (2, 3, 4), [1, 3]), ("dsplit", (2, 3, 4, 5), [2])]


@pytest.mark.parametrize("name,shape,sections", SPLITS)
def test_splits_match_torch_with_gradients(name, shape, sections):
    x, t = rand(*shape)
    got, want = getattr(ta, name)(x, sections), getattr(torch, name)(t, sections)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        same(g, w)
    method = getattr(x, name)(sections)
    assert [tuple(p.shape) for p in method] == [tuple(p.shape) for p in want]
    weights = [np.random.default_rng(i).standard_normal(tuple(w.shape)) for i, w in
               enumerate(want)]
    sum(((p * ta.tensor(w)).sum() for p, w in zip(got, weights, strict=True)),
        start=ta.tensor(0.0)).backward()
    sum((p * torch.tensor(w)).sum() for p, w in zip(want, weights, strict=True)).backward()
    same(x.grad, t.grad)


def test_splits_take_torchs_keywords():
    x = ta.ones(2, 6)
    assert len(x.hsplit(sections=3)) == 3
    assert len(x.hsplit(indices=[1])) == 2


@pytest.mark.parametrize("name,need", [("hsplit", 1), ("vsplit", 2), ("dsplit", 3)])
def test_splits_errors_name_the_function(name, need):
    f = getattr(ta, name)
    small = ta.ones(*([3] * (need - 1)))
    with pytest.raises(ta.ShapeError, match=rf"^{name}: .*at least {need} dim.*"
                                            rf"{need - 1} dims"):
        f(small, 1)
    x = ta.ones(*([5] * need))
    dim = {"hsplit": 1 if need > 1 else 0, "vsplit": 0, "dsplit": 2}[name]
    with pytest.raises(ta.ShapeError, match=rf"^{name}: .*dim {dim} of size 5.*not divisible by 2"):
        f(x, 2)
    with pytest.raises(ValueError, match=rf"^{name}: .*sections must be > 0.*-2"):
        f(x, -2)
    with pytest.raises(ta.ShapeError, match=rf"^{name}: .*not divisible by 0"):
        f(x, 0)
    with pytest.raises(TypeError, match=rf"^{name}: .*int.*list"):
        f(x, 2.0)


# ---- combinations -------------------------------------------------------------------------------

@pytest.mark.parametrize("r,repl", [(2, False), (3, False), (1, False), (0, False), (5, False),
                                    (2, True), (3, True), (0, True)])
def test_combinations_match_torch_with_gradients(r, repl):
    x, t = rand(4)
    got = ta.combinations(x, r, with_replacement=repl)
    want = torch.combinations(t, r, with_replacement=repl)
    same(got, want)
    if got.numel():
        grads_match(lambda a: ta.combinations(a, r=r, with_replacement=repl),
                    lambda a: torch.combinations(a, r=r, with_replacement=repl), [x], [t])


def test_combinations_dtypes_and_empty_input():
    x, t = tt([3, 1, 2], dtype="int64")
    same(ta.combinations(x), torch.combinations(t))
    for r in (0, 1, 2):
        e, te = tt(np.zeros(0))
        same(ta.combinations(e, r), torch.combinations(te, r))


def test_combinations_gradcheck_in_float64():
    x = ta.tensor(np.random.default_rng(5).standard_normal(4), requires_grad=True)
    assert ta.gradcheck(lambda a: ta.combinations(a, 3, with_replacement=True), (x,))


def test_combinations_errors_name_the_function():
    with pytest.raises(ta.ShapeError, match=r"^combinations: .*1-D.*\(2, 3\)"):
        ta.combinations(ta.ones(2, 3))
    with pytest.raises(ta.ShapeError, match=r"^combinations: .*1-D.*\(\)"):
        ta.combinations(ta.tensor(1.0))
    with pytest.raises(ValueError, match=r"^combinations: .*non-negative.*-1"):
        ta.combinations(ta.ones(3), -1)
    with pytest.raises(TypeError, match=r"^combinations: .*r must be an int"):
        ta.combinations(ta.ones(3), 2.0)


# ---- select_scatter, slice_scatter, diagonal_scatter -------------------------------------------

SCATTERS = [
    ("select_scatter", (3, 4), (4,), (0, 1)),
    ("select_scatter", (3, 4), (3,), (1, -1)),
    ("select_scatter", (2, 3, 4), (2, 4), (1, 2)),
    ("slice_scatter", (3, 4), (2, 4), (0, 1)),
    ("slice_scatter", (3, 4), (3, 2), (1, 0, 4, 2)),
    ("slice_scatter", (3, 4), (3, 4), ()),
    ("slice_scatter", (3, 5), (3, 2), (1, -2)),
    ("slice_scatter", (3, 5), (3, 5), (1, -10, 10)),
    ("slice_scatter", (3, 5), (3, 0), (1, 7)),
    ("slice_scatter", (2, 7), (2, 2), (-1, 1, 6, 3)),
    ("diagonal_scatter", (3, 4), (3,), ()),
    ("diagonal_scatter", (3, 4), (3,), (1,)),
    ("diagonal_scatter", (3, 4), (2,), (-1,)),
    ("diagonal_scatter", (3, 4), (0,), (5,)),
    ("diagonal_scatter", (2, 3, 4), (4, 2), (0, 0, 1)),
    ("diagonal_scatter", (2, 3, 4), (3, 2), (0, 2, 0)),
    ("diagonal_scatter", (2, 3, 4), (3, 1), (1, -1, 0)),
    ("diagonal_scatter", (4, 2, 3), (2, 3), (-1, 0, 2)),
    ("diagonal_scatter", (4, 5, 3), (3, 4), (-1, 1, 0)),
]


@pytest.mark.parametrize("name,shape,src_shape,args", SCATTERS)
def test_scatters_match_torch_with_gradients_in_both_inputs(name, shape, src_shape, args):
    (x, tx), (s, ts) = rand(*shape), rand(*src_shape, seed=3)
    grads_match(lambda a, b: getattr(ta, name)(a, b, *args),
                lambda a, b: getattr(torch, name)(a, b, *args), [x, s], [tx, ts])
    before = x.numpy().copy()
    same(getattr(x, name)(s, *args), getattr(tx, name)(ts, *args))
    np.testing.assert_array_equal(x.numpy(), before)  # out of place


def test_scatters_take_torchs_keywords_and_keep_the_inputs_dtype():
    (x, tx), (s, ts) = rand(3, 5, requires_grad=False), rand(3, 2, requires_grad=False)
    same(ta.slice_scatter(x, s, dim=1, start=1, end=5, step=2),
         torch.slice_scatter(tx, ts, dim=1, start=1, end=5, step=2))
    same(ta.slice_scatter(x, s, dim=1, end=2), torch.slice_scatter(tx, ts, dim=1, end=2))
    same(ta.select_scatter(x, s[:, 0], dim=1, index=3),
         torch.select_scatter(tx, ts[:, 0], dim=1, index=3))
    same(ta.diagonal_scatter(x, s[:, 0], offset=2, dim1=0, dim2=1),
         torch.diagonal_scatter(tx, ts[:, 0], offset=2, dim1=0, dim2=1))
    xi, txi = tt(np.zeros((3, 4)), dtype="int64")
    same(ta.select_scatter(xi, ta.ones(4), 0, 0), torch.select_scatter(txi, torch.ones(4), 0, 0))
    x32, tx32 = tt(np.zeros((3, 4)), dtype="float32")
    same(ta.diagonal_scatter(x32, s[:, 0]), torch.diagonal_scatter(tx32, ts[:, 0]))


def test_scatter_gradients_take_each_inputs_dtype():
    x = ta.zeros(3, 4, dtype=ta.float64, requires_grad=True)
    s = ta.ones(4, requires_grad=True)  # float32
    out = ta.select_scatter(x, s, 0, 0)
    assert out.dtype == ta.float64
    out.sum().backward()
    assert x.grad.dtype == ta.float64 and s.grad.dtype == ta.float32


def test_scatters_gradcheck_in_float64():
    rng = np.random.default_rng(6)
    x = ta.tensor(rng.standard_normal((3, 4, 5)), requires_grad=True)
    for name, src, args in [("select_scatter", (3, 5), (1, 2)),
                            ("slice_scatter", (3, 4, 2), (2, 1, 5, 2)),
                            ("diagonal_scatter", (4, 3), (0, 2, 0)),
                            ("diagonal_scatter", (3, 4), (1, 1, 2))]:
        s = ta.tensor(rng.standard_normal(src), requires_grad=True)
        assert ta.gradcheck(lambda a, b, n=name, p=args: getattr(ta, n)(a, b, *p), (x, s))


def test_scatters_errors_name_the_function():
    x = ta.zeros(3, 4)
    with pytest.raises(ta.ShapeError, match=r"^select_scatter: .*src \(1, 4\).*\(4,\)"):
        ta.select_scatter(x, ta.ones(1, 4), 0, 0)
    with pytest.raises(ta.ShapeError, match=r"^select_scatter: .*src \(\).*\(4,\)"):
        ta.select_scatter(x, ta.tensor(1.0), 0, 0)
    with pytest.raises(ta.DimError, match=r"^select_scatter: dim 2 is out of range .*2 dims"):
        ta.select_scatter(x, ta.ones(3), 2, 0)
    with pytest.raises(ta.DimError, match=r"^select_scatter: index 4 .*dim 1 of size 4"):
        ta.select_scatter(x, ta.ones(3), 1, 4)
    with pytest.raises(TypeError, match=r"^select_scatter: .*index must be an int"):
        ta.select_scatter(x, ta.ones(4), 0, 1.0)
    with pytest.raises(ta.ShapeError, match=r"^slice_scatter: .*src \(3, 3\).*\(3, 4\)"):
        ta.slice_scatter(x, ta.ones(3, 3))
    with pytest.raises(ValueError, match=r"^slice_scatter: .*step must be positive.*0"):
        ta.slice_scatter(x, ta.ones(3, 2), 1, 0, 4, 0)
    with pytest.raises(ValueError, match=r"^slice_scatter: .*step must be positive.*-1"):
        ta.slice_scatter(x, ta.ones(3, 2), 1, 0, 4, -1)
    with pytest.raises(ta.DimError, match=r"^slice_scatter: dim 3 is out of range .*2 dims"):
        ta.slice_scatter(x, ta.ones(3, 2), 3)
    with pytest.raises(TypeError, match=r"^slice_scatter: .*start must be an int"):
        ta.slice_scatter(x, ta.ones(2, 4), 0, 1.5)
    with pytest.raises(ta.ShapeError, match=r"^diagonal_scatter: .*src \(4,\).*\(3,\)"):
        ta.diagonal_scatter(x, ta.ones(4))
    with pytest.raises(ta.DimError, match=r"^diagonal_scatter: .*both 0"):
        ta.diagonal_scatter(x, ta.ones(3), 0, 0, 0)
    with pytest.raises(ta.DimError, match=r"^diagonal_scatter: .*dim 2"):
        ta.diagonal_scatter(x, ta.ones(3), 0, 0, 2)
    with pytest.raises(TypeError, match=r"^diagonal_scatter: .*src must be a tensor"):
        ta.diagonal_scatter(x, [1.0, 2.0, 3.0])


# ---- real, imag, conj, resolve_conj, is_conj (real tensors only) --------------------------------

@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_real_conj_and_resolve_conj_are_the_tensor_itself_as_torchs(dtype):
    x, t = tt([1, 0, 2], dtype=dtype)
    assert (x.real is x) == (t.real is t) is True
    assert (x.conj() is x) == (t.conj() is t) is True
    assert (x.resolve_conj() is x) == (t.resolve_conj() is t) is True
    assert x.is_conj() is t.is_conj() is False
    assert ta.real(x) is x and ta.conj(x) is x and ta.resolve_conj(x) is x
    assert ta.is_conj(x) is False


def test_real_keeps_the_graph():
    x = ta.ones(3, requires_grad=True)
    (x.real * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_imag_of_a_real_tensor_is_refused_by_name(dtype):
    x, t = tt([1, 2], dtype=dtype)
    with pytest.raises(RuntimeError, match="imag is not implemented"):
        _ = t.imag
    with pytest.raises(ta.DTypeError, match=r"^imag: .*non-complex.*\(2,\)"):
        _ = x.imag
    with pytest.raises(ta.DTypeError, match=r"^imag: "):
        ta.imag(x)


def test_complex_values_stay_refused():
    with pytest.raises(ta.DTypeError, match="complex"):
        ta.tensor([1 + 2j])
    assert not ta.ones(2).is_complex()
