"""torch functions a user reached for, against torch 2.x: values, dtypes and gradients.

The special functions (erfc, erfinv, lgamma, digamma) over a wide range (negatives, poles,
infinities, NaN), the order statistics (quantile, nanquantile, nanmedian), the counting and
set functions (isin, bincount, histc, unique_consecutive, unique(dim=)), tensordot, kron,
block_diag, cartesian_prod, gcd, lcm, heaviside, the Tensor methods short, logit, resize_,
ta.Size, and the arguments added to searchsorted, bucketize, repeat_interleave, gather, numpy,
clone, contiguous, scatter and scatter_reduce. (Every new differentiable op is gradient-checked
against finite differences from its samples: tests/ops/test_ops_gradcheck.py.)
"""

import pickle

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")
TORCH_DTYPES = {np.dtype(n): getattr(torch, n) for n in (
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")}


def tt(values, dtype=None, requires_grad=False):
    """The same values as a (ta, torch) pair."""
    a = np.asarray(values, dtype=dtype)
    x = ta.tensor(a.copy(), requires_grad=requires_grad)
    t = torch.tensor(a.copy(), requires_grad=requires_grad)
    return x, t


def same(got, want, rtol=1e-12, atol=0.0):
    """ta tensor `got` has torch tensor `want`'s shape, dtype and values (NaN where NaN)."""
    want = want.detach()
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    assert TORCH_DTYPES[np.dtype(got.dtype)] == want.dtype, (got.dtype, want.dtype)
    g = got.numpy().astype(np.float64) if got.dtype != bool else got.numpy()
    w = want.numpy().astype(np.float64) if want.dtype != torch.bool else want.numpy()
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def grads_match(fn_ta, fn_torch, xs, ts, rtol=1e-10, atol=1e-12, seed=0):
    """fn(*inputs) forward and backward with one random cotangent, against torch."""
    out, want = fn_ta(*xs), fn_torch(*ts)
    same(out, want, rtol, atol)
    g = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    out.backward(ta.tensor(g.astype(out.dtype)))
    want.backward(torch.tensor(g, dtype=want.dtype))
    for x, t in zip(xs, ts, strict=True):
        same(x.grad, t.grad, rtol, atol)


# ---- the special functions -------------------------------------------------------------------

WIDE = np.concatenate([
    np.linspace(-30, 30, 1201), np.linspace(0.5, 2.5, 401), -np.logspace(-300, 15, 40),
    np.logspace(-300, 300, 60), [0.0, -0.0, 1.0, 2.0, -1.0, -2.0, -7.0, INF, -INF, NAN,
                                 1.4616321449683622, -2.4570247, 171.7, 1e305]])


@pytest.mark.parametrize("name,points,rtol,atol", [
    ("lgamma", WIDE, 1e-12, 1e-14),  # (atol: the roots at 1, 2 and between the poles)
    ("digamma", WIDE, 1e-12, 1e-14),  # (torch's algorithm, so its values to the bit nearly)
    ("erfc", np.concatenate([np.linspace(-8, 26, 3401), [INF, -INF, NAN, 0.0, 27.5, 40.0]]),
     1e-13, 0.0),
    ("erfinv", np.concatenate([np.linspace(-1, 1, 2001), 1 - np.logspace(-16, -1, 60),
                               -1 + np.logspace(-16, -1, 60), [1.5, -3.0, NAN, -0.0]]),
     1e-13, 0.0),
])
def test_special_functions_match_torch_over_a_wide_range(name, points, rtol, atol):
    x, t = tt(points)
    same(getattr(ta, name)(x), getattr(torch, name)(t), rtol, atol)
    same(getattr(x, name)(), getattr(t, name)(), rtol, atol)  # (the Tensor method too)


@pytest.mark.parametrize("name,points,rtol", [
    ("lgamma", [-3.7, -1.5, -0.2, 0.01, 0.5, 1.0, 1.46, 2.0, 3.3, 25.0, 1e4], 1e-12),
    # torch's trigamma (digamma's gradient) stops its series early: ~5e-10 off near 6.5;
    # tinyattn's is exact to ~1e-15 (test_trigamma_is_accurate below)
    ("digamma", [-3.7, -1.5, -0.2, 0.01, 0.5, 1.0, 1.46, 2.0, 3.3, 6.5, 25.0, 1e4], 1e-8),
    ("erfc", [-5.0, -1.0, -0.2, 0.0, 0.7, 3.0, 9.0, 27.0], 1e-12),
    ("erfinv", [-0.999999, -0.7, -0.1, 0.0, 0.3, 0.95, 1 - 1e-12], 1e-12),
])
def test_special_function_gradients_match_torch(name, points, rtol):
    x, t = tt(points, requires_grad=True)
    grads_match(lambda a: getattr(a, name)(), lambda a: getattr(a, name)(), [x], [t], rtol)


def test_trigamma_is_accurate():
    """digamma's gradient against mpmath's ψ'(x): exact to ~1e-15 (torch's to ~5e-10)."""
    mpmath = pytest.importorskip("mpmath")
    points = [-7.3, -2.5, -0.9, 0.001, 0.3, 1.0, 2.5, 6.5, 9.99, 10.0, 11.0, 123.4, 1e8]
    x = ta.tensor(points, dtype=ta.float64, requires_grad=True)
    x.digamma().sum().backward()
    want = [float(mpmath.polygamma(1, p)) for p in points]
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=2e-15)


@pytest.mark.parametrize("name", ["erfc", "erfinv", "lgamma", "digamma"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "int64", "int8", "bool"])
def test_special_functions_in_every_dtype(name, dtype):
    """Integers and bools become the default float dtype, float16 and float32 stay (computed
    in float64 and rounded, so within a rounding of torch's)."""
    values = {"bool": [True, False], "erfinv": [0, 1, -1, 0]}.get(
        dtype if dtype == "bool" else name, [0, 1, 2, -3, 5])
    if name == "erfinv" and dtype.startswith("float"):
        values = [-0.9, -0.25, 0.0, 0.5, 0.99]
    x, t = tt(values, dtype=dtype)
    tol = {"float16": 2e-3}.get(dtype, 1e-6)
    same(getattr(ta, name)(x), getattr(torch, name)(t), tol, tol)


@pytest.mark.parametrize("name", ["erfc", "erfinv", "lgamma", "digamma"])
def test_special_functions_on_empty_0d_and_strided_input(name):
    a = np.random.default_rng(1).uniform(-0.9, 0.9, (3, 4))
    for values in (np.zeros((0, 3)), np.float64(0.25), a):
        x, t = tt(values)
        same(getattr(ta, name)(x), getattr(torch, name)(t), 1e-12, 1e-14)
    x, t = tt(a)
    same(getattr(x.T, name)(), getattr(t.T, name)(), 1e-12, 1e-14)  # not contiguous
    same(getattr(x[:, ::2], name)(), getattr(t[:, ::2], name)(), 1e-12, 1e-14)


# ---- quantile, nanquantile, nanmedian ----------------------------------------------------------

Q_VALUES = [[1.0, NAN, 3.0, 2.0, 0.5], [4.0, 5.0, 6.0, 7.0, -1.0], [2.0, 2.0, 8.0, 1.0, 3.0]]


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_quantile_matches_torch(interpolation, fn, dtype):
    x, t = tt(Q_VALUES, dtype=dtype)
    qd = dict(dtype=TORCH_DTYPES[np.dtype(dtype)])
    for q in (0.0, 0.4, 0.5, 1.0, [0.1, 0.5, 0.9]):
        qx = q if isinstance(q, float) else ta.tensor(q, dtype=dtype)
        qt = q if isinstance(q, float) else torch.tensor(q, **qd)
        for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": -1, "keepdim": True},
                   {"keepdim": True}):
            same(getattr(ta, fn)(x, qx, interpolation=interpolation, **kw),
                 getattr(torch, fn)(t, qt, interpolation=interpolation, **kw), 1e-6)
    same(getattr(x.T, fn)(0.3, dim=0), getattr(t.T, fn)(0.3, dim=0), 1e-6)  # strided


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_gradients_match_torch(interpolation):
    values = np.random.default_rng(2).standard_normal((3, 6))
    values[1, 2] = NAN
    for fn, q, kw in (("quantile", 0.35, {"dim": 1}), ("nanquantile", [0.2, 0.8], {"dim": 1}),
                      ("quantile", [0.5, 0.75], {"dim": 0, "keepdim": True}),
                      ("nanquantile", 0.6, {})):
        x, t = tt(values, requires_grad=True)
        qx = q if isinstance(q, float) else ta.tensor(q, dtype=ta.float64)
        qt = q if isinstance(q, float) else torch.tensor(q, dtype=torch.float64)
        grads_match(lambda a: getattr(a, fn)(qx, interpolation=interpolation, **kw),  # noqa: B023
                    lambda a: getattr(a, fn)(qt, interpolation=interpolation, **kw),  # noqa: B023
                    [x], [t])


def test_quantile_of_a_0d_tensor_and_ties():
    x, t = tt(3.0)
    same(ta.quantile(x, 0.3), torch.quantile(t, 0.3))
    same(x.quantile(0.3, dim=0, keepdim=True), t.quantile(0.3, dim=0, keepdim=True))
    x, t = tt([3.0, 1.0, 1.0, 5.0], requires_grad=True)
    grads_match(lambda a: a.quantile(0.4), lambda a: a.quantile(0.4), [x], [t])


@pytest.mark.parametrize("call,error", [
    (lambda: ta.quantile(ta.tensor([1, 2]), 0.5), ta.DTypeError),
    (lambda: ta.quantile(ta.tensor([1.0, 2.0], dtype=ta.float16), 0.5), ta.DTypeError),
    (lambda: ta.quantile(ta.tensor([1.0, 2.0]), 1.5), ValueError),
    (lambda: ta.quantile(ta.tensor([1.0, 2.0]), ta.tensor([0.5], dtype=ta.float64)),
     ta.DTypeError),
    (lambda: ta.quantile(ta.tensor([1.0, 2.0]), ta.tensor([[0.5]])), ta.ShapeError),
    (lambda: ta.quantile(ta.zeros(0), 0.5), ValueError),
    (lambda: ta.quantile(ta.zeros(2), 0.5, interpolation="cubic"), ValueError),
    (lambda: ta.quantile(ta.zeros(2, 3), 0.5, dim=2), ta.DimError),
])
def test_quantile_refuses_what_torch_refuses(call, error):
    with pytest.raises(error):
        call()


def test_nanmedian_matches_torch():
    rows = [[NAN, NAN, NAN], [1.0, NAN, 0.0], [3.0, 1.0, 2.0], [NAN, 5.0, NAN]]
    x, t = tt(rows)
    same(ta.nanmedian(x), torch.nanmedian(t))
    for dim in (0, 1, -1):
        got, want = x.nanmedian(dim), t.nanmedian(dim)
        same(got.values, want.values)
        same(got.indices, want.indices)
        got, want = x.nanmedian(dim, keepdim=True), t.nanmedian(dim, keepdim=True)
        same(got[0], want[0])
        same(got[1], want[1])
    assert type(x.nanmedian(1)).__name__ == "nanmedian"
    for values in ([NAN, NAN], [], 4.0, [3, 1, 2]):
        x, t = tt(values)
        same(x.nanmedian(), t.nanmedian())
    with pytest.raises(ta.DimError):
        ta.tensor([], dtype=ta.int64).nanmedian()


def test_nanmedian_gradients_match_torch():
    for values in ([1.0, NAN, 1.0, 2.0], [NAN, NAN, NAN], [3.0, -1.0, 2.0, 5.0]):
        x, t = tt(values, requires_grad=True)
        grads_match(lambda a: a.nanmedian(), lambda a: a.nanmedian(), [x], [t])
    x, t = tt([[1.0, NAN, 0.0, 4.0], [NAN, 2.0, NAN, NAN]], requires_grad=True)
    grads_match(lambda a: a.nanmedian(1)[0], lambda a: a.nanmedian(1)[0], [x], [t])
    # a slice of NaNs only: torch's index is whichever NaN its nth_element leaves there (2 of
    # 4, 0 of 3); here the first, and the gradient goes to the index given
    x = ta.tensor([[NAN, NAN, NAN, NAN]], requires_grad=True)
    values, indices = x.nanmedian(1)
    values.sum().backward()
    assert indices.tolist() == [0] and x.grad.tolist() == [[1.0, 0.0, 0.0, 0.0]]
    x, t = tt(np.random.default_rng(3).standard_normal((4, 3)), requires_grad=True)
    grads_match(lambda a: a.T.nanmedian(0, keepdim=True).values,
                lambda a: a.T.nanmedian(0, keepdim=True).values, [x], [t])


# ---- counting and sets ---------------------------------------------------------------------------


def test_isin_matches_torch():
    cases = [([1.0, 2.0, NAN], [2.0, NAN]), ([1, 2], [1.5, 2.0]), ([[1, 2], [3, 4]], [4, 1]),
             ([], [1]), ([1, 2], []), (7, [[7]])]
    for el, test in cases:
        (x, t), (y, u) = tt(el), tt(test)
        for invert in (False, True):
            same(ta.isin(x, y, invert=invert), torch.isin(t, u, invert=invert))
    x, t = tt([1, 2], dtype="uint8")
    y, u = tt([-1, 2], dtype="int8")
    same(ta.isin(x, y), torch.isin(t, u))
    x, t = tt([1, 2, 3])
    same(ta.isin(x, 2), torch.isin(t, 2))
    same(ta.isin(2, x), torch.isin(2, t))
    same(ta.isin(x, 2, assume_unique=True), torch.isin(t, 2, assume_unique=True))
    with pytest.raises(ta.DTypeError, match="bool"):
        ta.isin(ta.tensor([True]), ta.tensor([1]))
    with pytest.raises(TypeError, match="two numbers"):
        ta.isin(1, 2)


def test_bincount_matches_torch():
    x, t = tt([1, 1, 3])
    same(ta.bincount(x), torch.bincount(t))
    same(x.bincount(minlength=6), t.bincount(minlength=6))
    for w in ([0.5, 1.0, 2.0], np.array([0.5, 1.0, 2.0], np.float32), [1, 2, 3],
              np.array([1, 2, 3], np.float16)):
        (wx, wt) = tt(w)
        same(x.bincount(wx), t.bincount(wt), 1e-6)
    x, t = tt([], dtype="int64")
    same(x.bincount(), t.bincount())
    same(x.bincount(minlength=3), t.bincount(minlength=3))
    x, t = tt([2, 0, 2], dtype="uint8")
    same(x.bincount(), t.bincount())
    w = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    assert not ta.tensor([0, 1, 1]).bincount(w).requires_grad  # (torch's has no gradient)


@pytest.mark.parametrize("values,kw,error", [
    ([-1, 2], {}, ValueError), ([[1]], {}, ta.ShapeError), ([1.0], {}, ta.DTypeError),
    (1, {}, ta.ShapeError), ([True], {}, ta.DTypeError),
    ([1, 2], {"weights": ta.tensor([1.0])}, ta.ShapeError), ([1, 2], {"minlength": -1}, ValueError),
])
def test_bincount_refuses_what_torch_refuses(values, kw, error):
    with pytest.raises(error):
        ta.tensor(values).bincount(**kw)


def test_histc_matches_torch():
    cases = [([1.0, 2, 1], dict(bins=4, min=0, max=3)), ([1.0, 2, 1, 5, -1], dict(bins=4, min=0,
                                                                                    max=3)),
             ([1.0, 2, 1], dict(bins=4)), ([2.0, 2], dict(bins=4)), ([], dict(bins=4)),
             ([1.0, NAN], dict(bins=4, min=0, max=2)), (1.5, dict(bins=3, min=0, max=3)),
             ([0.0, 1 / 3, 2 / 3, 1.0], dict(bins=3, min=0, max=1)),
             (np.random.default_rng(4).standard_normal((5, 7)), dict(bins=10, min=2, max=2))]
    for values, kw in cases:
        for dtype in ("float32", "float64", "float16"):
            x, t = tt(values, dtype=dtype)
            same(ta.histc(x, **kw), torch.histc(t, **kw))
    x, t = tt(np.arange(12.0).reshape(3, 4))
    same(x.T.histc(bins=5), t.T.histc(bins=5))
    assert not ta.tensor([1.0, 2.0], requires_grad=True).histc(bins=3).requires_grad
    with pytest.raises(ValueError, match="not finite"):
        ta.tensor([1.0, INF]).histc(bins=4)
    with pytest.raises(ValueError, match="max must be larger than min"):
        ta.tensor([1.0]).histc(bins=4, min=3, max=1)
    with pytest.raises(ValueError, match="bins"):
        ta.tensor([1.0]).histc(bins=0)
    with pytest.raises(ta.DTypeError):
        ta.tensor([1, 2]).histc(bins=4)


def test_unique_consecutive_matches_torch():
    x, t = tt([1.0, 1, NAN, NAN, 2, 2, 1])
    for got, want in zip(ta.unique_consecutive(x, return_inverse=True, return_counts=True),
                         torch.unique_consecutive(t, return_inverse=True, return_counts=True),
                         strict=True):
        same(got, want)
    x, t = tt([[1, 1, 2], [1, 1, 2], [3, 3, 1], [1, 1, 2]])
    for dim in (None, 0, 1, -1):
        for got, want in zip(x.unique_consecutive(True, True, dim),
                             t.unique_consecutive(True, True, dim), strict=True):
            same(got, want)
    same(x.unique_consecutive(), t.unique_consecutive())
    for values in (5, [], np.zeros((0, 3))):
        x, t = tt(values)
        for got, want in zip(x.unique_consecutive(return_inverse=True, return_counts=True),
                             t.unique_consecutive(return_inverse=True, return_counts=True),
                             strict=True):
            same(got, want)
    with pytest.raises(ta.DimError):
        ta.tensor(3).unique_consecutive(dim=0)
    with pytest.raises(ta.ShapeError, match="size 0"):
        ta.zeros(3, 0).unique_consecutive(dim=0)


def test_unique_over_a_dim_matches_torch():
    x, t = tt([[1, 1, 2], [1, 1, 2], [3, 3, 1], [1, 1, 2]])
    for dim in (0, 1, -1):
        for got, want in zip(ta.unique(x, dim=dim, return_inverse=True, return_counts=True),
                             torch.unique(t, dim=dim, return_inverse=True, return_counts=True),
                             strict=True):
            same(got, want)
        same(x.unique(sorted=False, dim=dim), t.unique(sorted=False, dim=dim))
    for values in ([[NAN, 1.0], [NAN, 1.0]], [[True, False], [True, True], [True, False]],
                   np.zeros((0, 3))):
        x, t = tt(values)
        for got, want in zip(x.unique(dim=0, return_inverse=True, return_counts=True),
                             t.unique(dim=0, return_inverse=True, return_counts=True),
                             strict=True):
            same(got, want)
    with pytest.raises(ta.ShapeError, match="size 0"):
        ta.zeros(2, 0).unique(dim=0)
    with pytest.raises(ta.DimError):
        ta.tensor(3).unique(dim=0)


def test_gcd_lcm_heaviside_match_torch():
    (x, t), (y, u) = tt([0, -4, 6, 0, 7]), tt([0, 6, -9, -5, 7])
    for name in ("gcd", "lcm"):
        same(getattr(ta, name)(x, y), getattr(torch, name)(t, u))
        same(getattr(x, name)(3), getattr(t, name)(torch.tensor(3)))
    (x, t), (y, u) = tt([4, 9], dtype="int8"), tt([6, 12])
    same(x.gcd(y), t.gcd(u))
    (x, t), (y, u) = tt([4, 9], dtype="uint8"), tt([6, 12], dtype="int8")
    same(x.lcm(y), t.lcm(u))
    for bad in (ta.tensor([1.0]), ta.tensor([True])):
        with pytest.raises(ta.DTypeError):
            bad.gcd(bad)
    (x, t), (v, w) = tt([-1.0, 0.0, 2.0, NAN, -0.0]), tt(0.5)
    same(ta.heaviside(x, v), torch.heaviside(t, w))
    (x, t), (v, w) = tt([[-1, 0, 2]]), tt([[7], [8]])
    same(x.heaviside(v), t.heaviside(w))
    assert not ta.tensor([0.0], requires_grad=True).heaviside(ta.tensor(1.0)).requires_grad
    with pytest.raises(ta.DTypeError, match="heaviside"):
        ta.tensor([1.0]).heaviside(ta.tensor(1))


# ---- tensordot, kron, block_diag, cartesian_prod -------------------------------------------------


def test_tensordot_matches_torch():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 4, 5))
    for d in (2, 0, ([1, 2], [0, 1]), [[-1], [-2]], ([2, 1], [1, 0])):
        (x, t), (y, u) = tt(a, requires_grad=True), tt(b, requires_grad=True)
        grads_match(lambda p, q: ta.tensordot(p, q, dims=d),  # noqa: B023
                    lambda p, q: torch.tensordot(p, q, dims=d), [x, y], [t, u])  # noqa: B023
    (x, t), (y, u) = tt(a), tt(a.transpose(1, 2, 0))
    same(ta.tensordot(x, y, dims=ta.tensor([[1, 0], [0, 2]])),
         torch.tensordot(t, u, dims=torch.tensor([[1, 0], [0, 2]])))
    (x, t), (y, u) = tt(2.0), tt(3.0)
    same(ta.tensordot(x, y, dims=0), torch.tensordot(t, u, dims=0))
    (x, t) = tt(np.arange(3))
    same(ta.tensordot(x, x, dims=1), torch.tensordot(t, t, dims=1))
    with pytest.raises(ta.DTypeError):
        ta.tensordot(ta.zeros(2, 3), ta.zeros(3, 2, dtype=ta.float64), dims=1)
    with pytest.raises(ValueError):
        ta.tensordot(ta.zeros(2, 3), ta.zeros(3, 2), dims=-1)
    with pytest.raises(ta.ShapeError, match="contracted"):
        ta.tensordot(ta.zeros(2, 3), ta.zeros(3, 4), dims=([1], [1]))


def test_kron_matches_torch():
    rng = np.random.default_rng(6)
    for sa, sb in (((2,), (2, 2)), ((2, 3), (3, 2)), ((), ()), ((2, 1, 2), (3,)), ((0, 2),
                                                                                   (2, 2))):
        (x, t), (y, u) = tt(rng.standard_normal(sa), requires_grad=True), \
            tt(rng.standard_normal(sb), requires_grad=True)
        grads_match(ta.kron, torch.kron, [x, y], [t, u])
    (x, t), (y, u) = tt([1, 2]), tt([[1.0, 2], [3, 4]], dtype="float32")
    same(x.kron(y), t.kron(u))
    (x, t), (y, u) = tt([True, False]), tt([True])
    same(ta.kron(x, y), torch.kron(t, u))


def test_block_diag_matches_torch():
    rng = np.random.default_rng(7)
    parts = [rng.standard_normal(()), rng.standard_normal(2), rng.standard_normal((2, 3)),
             np.zeros((0, 2)), rng.standard_normal((1, 1))]
    xs = [ta.tensor(p, requires_grad=True) for p in parts]
    ts = [torch.tensor(p, requires_grad=True) for p in parts]
    grads_match(ta.block_diag, torch.block_diag, xs, ts)
    same(ta.block_diag(), torch.block_diag())
    same(ta.block_diag(ta.tensor(1), ta.tensor([2.0, 3]), ta.tensor([[4, 5], [6, 7]])),
         torch.block_diag(torch.tensor(1), torch.tensor([2.0, 3]), torch.tensor([[4, 5],
                                                                                 [6, 7]])))
    same(ta.block_diag(ta.tensor([True]), ta.tensor([2])),
         torch.block_diag(torch.tensor([True]), torch.tensor([2])))
    with pytest.raises(ta.ShapeError, match="at most 2 dims"):
        ta.block_diag(ta.zeros(2, 2, 2))


def test_cartesian_prod_matches_torch():
    (x, t), (y, u) = tt([1, 2]), tt([3, 4, 5])
    same(ta.cartesian_prod(x, y), torch.cartesian_prod(t, u))
    same(ta.cartesian_prod(x), torch.cartesian_prod(t))
    same(ta.cartesian_prod(x, ta.tensor([], dtype=ta.int64), x),
         torch.cartesian_prod(t, torch.tensor([], dtype=torch.int64), t))
    (x, t), (y, u) = tt([0.5, -1.0], requires_grad=True), tt([2.0, 3.0, 4.0], requires_grad=True)
    grads_match(ta.cartesian_prod, torch.cartesian_prod, [x, y], [t, u])
    with pytest.raises(ta.DTypeError):
        ta.cartesian_prod(ta.tensor([1]), ta.tensor([1.0]))
    with pytest.raises(ta.ShapeError):
        ta.cartesian_prod(ta.tensor(1), ta.tensor([3]))
    with pytest.raises(ValueError):
        ta.cartesian_prod()


# ---- Tensor methods: short, logit, resize_; ta.Size ----------------------------------------------


def test_short_and_logit_methods():
    x, t = tt([1.7, -2.2, 300.0])
    same(x.short(), t.short())
    x, t = tt([0.0, 0.2, 0.5, 0.97, 1.0], requires_grad=True)
    grads_match(lambda a: a.logit(), lambda a: a.logit(), [x], [t])
    x, t = tt([0.0, 0.2, 0.5, 0.97, 1.0], requires_grad=True)
    grads_match(lambda a: a.logit(eps=0.1), lambda a: a.logit(eps=0.1), [x], [t])


def test_resize_as_torch():
    x, t = ta.arange(6.0), torch.arange(6.0)
    v0 = x._version
    for shape in ((2, 2), (6,), (3, 3)):
        assert x.resize_(*shape) is x
        t.resize_(*shape)
        assert x.shape == t.shape
    assert x.numpy().reshape(-1)[:6].tolist() == t.reshape(-1)[:6].tolist()  # the storage kept
    assert x._version > v0
    y = ta.zeros(2, 3)
    y.resize_((3, 2))
    assert y.shape == (3, 2)
    with pytest.raises(ta.GraphError, match="requires grad"):
        ta.zeros(2, requires_grad=True).resize_(3)
    w = ta.zeros(2, requires_grad=True).detach()
    assert w.resize_(4).shape == (4,)


def test_size_is_a_tuple_like_torch_size():
    x = ta.zeros(2, 3, 4)
    s = x.shape
    assert isinstance(s, ta.Size) and isinstance(s, tuple) and isinstance(x.size(), ta.Size)
    assert s == (2, 3, 4) and hash(s) == hash((2, 3, 4)) and {s: 1}[(2, 3, 4)] == 1
    assert repr(s) == "ta.Size([2, 3, 4])" and str(s) == repr(s)
    assert repr(ta.zeros(()).shape) == "ta.Size([])"
    assert type(s[1:]) is ta.Size and s[1:] == (3, 4) and type(s[0]) is int
    assert type(s + (5,)) is ta.Size and type((1,) + s) is ta.Size and (1,) + s == (1, 2, 3, 4)
    assert s.numel() == 24 == x.numel() and ta.zeros(()).shape.numel() == 1
    assert x.size(1) == 3 and x.size(-1) == 4
    assert pickle.loads(pickle.dumps(s)) == s and type(pickle.loads(pickle.dumps(s))) is ta.Size
    assert np.zeros(s).shape == (2, 3, 4) and ta.zeros(s).shape == s
    assert tuple(torch.zeros(2, 3, 4).shape) == s


# ---- arguments torch has -------------------------------------------------------------------------


def test_searchsorted_and_bucketize_arguments():
    (s, st) = tt([3.0, 1.0, 2.0])
    (v, vt) = tt([2.0, 2.5, 0.0, 9.0])
    order, order_t = ta.argsort(s), torch.argsort(st)
    for kw in ({}, {"side": "right"}, {"right": True}, {"out_int32": True},
               {"side": "right", "right": True, "out_int32": True}):
        same(ta.searchsorted(s, v, sorter=order, **kw),
             torch.searchsorted(st, vt, sorter=order_t, **kw))
    sorted_, sorted_t = tt([[1, 3, 5], [2, 4, 6]])
    same(ta.searchsorted(sorted_, ta.tensor([[3], [3]]), out_int32=True),
         torch.searchsorted(sorted_t, torch.tensor([[3], [3]]), out_int32=True))
    same(ta.searchsorted(ta.tensor([1, 2, 3]), 2), torch.searchsorted(torch.tensor([1, 2, 3]), 2))
    with pytest.raises(ValueError, match="opposites"):
        ta.searchsorted(s, v, side="left", right=True)
    with pytest.raises(ValueError, match="side"):
        ta.searchsorted(s, v, side="middle")
    with pytest.raises(ta.ShapeError, match="sorter"):
        ta.searchsorted(s, v, sorter=ta.tensor([0, 1]))
    with pytest.raises(ta.DimError, match="sorter"):
        ta.searchsorted(s, v, sorter=ta.tensor([0, 1, 5]))
    (b, bt), (x, xt) = tt([1, 3, 5]), tt([[1, 5], [3, 6]])
    for kw in ({}, {"right": True}, {"out_int32": True, "right": True}):
        same(ta.bucketize(x, b, **kw), torch.bucketize(xt, bt, **kw))
    same(ta.bucketize(3, b, out_int32=True), torch.bucketize(3, bt, out_int32=True))


def test_repeat_interleave_output_size():
    x, t = tt([1, 2])
    same(x.repeat_interleave(2, output_size=4), t.repeat_interleave(2, output_size=4))
    same(ta.repeat_interleave(x, ta.tensor([1, 2]), output_size=3),
         torch.repeat_interleave(t, torch.tensor([1, 2]), output_size=3))
    same(ta.tensor([[1, 2], [3, 4]]).repeat_interleave(ta.tensor([2]), dim=0, output_size=4),
         torch.tensor([[1, 2], [3, 4]]).repeat_interleave(torch.tensor([2]), dim=0,
                                                          output_size=4))
    for wrong in (3, 5):
        with pytest.raises(ValueError, match="output_size"):
            x.repeat_interleave(2, output_size=wrong)


def test_gather_on_a_0d_tensor_and_sparse_grad():
    x, t = tt(5.0, requires_grad=True)
    for index in (0, [0, 0], [0]):
        for dim in (0, -1):
            (x, t) = tt(5.0, requires_grad=True)
            grads_match(lambda a: a.gather(dim, ta.tensor(index)),  # noqa: B023
                        lambda a: a.gather(dim, torch.tensor(index)), [x], [t])  # noqa: B023
    with pytest.raises(ta.DimError):
        ta.tensor(5.0).gather(0, ta.tensor(1))
    with pytest.raises(ta.DimError):
        ta.tensor(5.0).gather(1, ta.tensor(0))
    (x, t) = tt([[1.0, 2], [3, 4]], requires_grad=True)
    out = x.gather(1, ta.tensor([[0], [1]]), sparse_grad=True)
    want = t.gather(1, torch.tensor([[0], [1]]), sparse_grad=True)
    same(out, want)
    out.sum().backward()
    want.sum().backward()
    same(x.grad, t.grad.to_dense())  # (the same values, dense: no sparse tensors here)


def test_numpy_force_and_memory_formats():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    assert x.numpy(force=True).tolist() == [1.0, 2.0]
    m = ta.tensor([[1.0, 2], [3, 4]]).t()
    for fmt in (ta.preserve_format, ta.contiguous_format):
        assert m.clone(memory_format=fmt).tolist() == m.tolist()
    assert m.contiguous(memory_format=ta.contiguous_format).is_contiguous()
    assert repr(ta.channels_last) == "ta.channels_last"
    with pytest.raises(ValueError, match="preserve_format"):
        m.contiguous(memory_format=ta.preserve_format)
    for fmt in (ta.channels_last, ta.channels_last_3d):
        with pytest.raises(ValueError, match="row-major"):
            ta.zeros(1, 2, 3, 4).clone(memory_format=fmt)
        with pytest.raises(ValueError, match="row-major"):
            ta.zeros(1, 2, 3, 4).contiguous(memory_format=fmt)
    with pytest.raises(TypeError, match="memory_format"):
        m.clone(memory_format="channels_last")


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_matches_torch(include_self):
    x_values = np.array([[0.0, 2.0, 3.0, 1.0], [1.5, 0.0, -1.0, 2.0]])
    src_values = np.array([[0.0, 0.7, 2.5, 3.0], [1.5, 0.0, 0.0, -2.0]])
    index = [[0, 0, 1, 3], [2, 2, 2, 0]]
    (x, t), (s, u) = tt(x_values, requires_grad=True), tt(src_values, requires_grad=True)
    grads_match(lambda a, b: a.scatter_reduce(1, ta.tensor(index), b, "prod",
                                              include_self=include_self),
                lambda a, b: a.scatter_reduce(1, torch.tensor(index), b, "prod",
                                              include_self=include_self), [x, s], [t, u])
    (x, t), (s, u) = tt([[1, 2, 3]]), tt([[2, 3, 4]])
    same(x.scatter_reduce(1, ta.tensor([[0, 0, 1]]), s, "prod", include_self=include_self),
         t.scatter_reduce(1, torch.tensor([[0, 0, 1]]), u, "prod", include_self=include_self))
    (x, t) = tt(np.ones((3, 2)))
    same(ta.scatter_reduce(x, 0, ta.tensor([[2, 0], [2, 2]]), ta.tensor([[2.0, 3.0], [4.0, 5.0]],
                                                                     dtype=ta.float64), "prod"),
         torch.scatter_reduce(t, 0, torch.tensor([[2, 0], [2, 2]]),
                              torch.tensor([[2.0, 3.0], [4.0, 5.0]], dtype=torch.float64),
                              "prod"))


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_with_reduce_add_and_multiply_matches_torch():
    (x, t) = tt([[1.0, 2, 3], [4, 5, 6]])
    (s, u) = tt([[2.0, 3, 4]])
    index, index_t = ta.tensor([[0, 0, 1]]), torch.tensor([[0, 0, 1]])
    for reduce in ("add", "multiply"):
        same(x.scatter(1, index, s, reduce=reduce), t.scatter(1, index_t, u, reduce=reduce))
        same(x.scatter(1, index, 2.0, reduce=reduce), t.scatter(1, index_t, 2.0, reduce=reduce))
        same(ta.scatter(x, 1, index, value=2.0, reduce=reduce),
             torch.scatter(t, 1, index_t, value=2.0, reduce=reduce))
    (x, t) = tt([1, 2])
    same(x.scatter(0, ta.tensor([0]), 2.5, reduce="add"),
         t.scatter(0, torch.tensor([0]), 2.5, reduce="add"))
    y = ta.tensor([[1.0, 2, 3]])
    assert y.scatter_(1, ta.tensor([[0, 0]]), 3.0, reduce="multiply") is y
    assert y.tolist() == [[9.0, 2.0, 3.0]]
    with pytest.raises(ValueError, match="'add' or 'multiply'"):
        x.scatter(0, ta.tensor([0]), 2, reduce="mean")


def test_the_names_are_there_as_in_torch():
    functions = ["isin", "bincount", "histc", "quantile", "nanquantile", "nanmedian", "tensordot",
                 "kron", "erfc", "erfinv", "lgamma", "digamma", "block_diag", "cartesian_prod",
                 "unique_consecutive", "gcd", "lcm", "heaviside", "logit"]
    for name in functions:
        assert hasattr(ta, name), name
        assert hasattr(ta.Tensor, name) == hasattr(torch.Tensor, name), name
    for name in ("short", "logit", "nanmedian", "resize_"):
        assert hasattr(ta.Tensor, name), name


def test_create_graph_works_and_a_jacobian_keeps_a_graph():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    (g,) = ta.autograd.grad((x * x * x).sum(), x, create_graph=True)
    assert ta.autograd.grad(g.sum(), x)[0].tolist() == [6.0, 12.0]
    jac = ta.autograd.functional.jacobian(lambda a: a * a, x, create_graph=True)
    assert jac.tolist() == [[2.0, 0.0], [0.0, 4.0]]
    assert ta.autograd.grad(jac.sum(), x)[0].tolist() == [2.0, 2.0]


def test_counting_functions_on_empty_0d_strided_and_small_dtypes():
    a = np.arange(12).reshape(3, 4) % 5
    x, t = tt(a)
    same(x[:, ::2].reshape(-1).bincount(), t[:, ::2].reshape(-1).bincount())
    same(ta.isin(x.T, x[0]), torch.isin(t.T, t[0]))
    same(x.T.gcd(x.T + 1), t.T.gcd(t.T + 1))
    same(x.T.unique_consecutive(dim=1), t.T.unique_consecutive(dim=1))
    for dtype in ("int8", "int16", "uint8"):
        (y, u) = tt([[0, 4, 6], [9, 3, 2]], dtype=dtype)
        same(y[:, ::2].gcd(y[:, 1:]), u[:, ::2].gcd(u[:, 1:]))
        same(y.lcm(y), u.lcm(u))
        same(y.heaviside(y[0]), u.heaviside(u[0]))
    (y, u) = tt(4)
    same(y.gcd(6), u.gcd(torch.tensor(6)))
    (y, u) = tt(np.zeros((0, 2), np.int64))
    same(y.lcm(y), u.lcm(u))
    (y, u), (v, w) = tt([-1.0, 0.0, 2.0], dtype="float16"), tt(0.5, dtype="float16")
    same(y.heaviside(v), u.heaviside(w))
    (y, u) = tt([[2.0, NAN], [1.0, 3.0]], dtype="float16")
    same(y.nanmedian(), u.nanmedian())
    same(y.nanmedian(-1).values, u.nanmedian(-1).values)
