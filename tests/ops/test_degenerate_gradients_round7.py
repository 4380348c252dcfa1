"""Degenerate gradients that used to differ from torch 2.13, each compared with torch elementwise
(values, NaN and inf positions, signs of inf) in float64 and float32:

- amax/amin over dims where a slice holds a NaN: torch's VJP is g * [x == out] / count, so
  every entry of such a slice gets NaN (0 winners: g / 0 * 0); max()/min() over every entry
  share g among the NaN entries, max(dim)/min(dim) send it to the one picked index; first and
  second order;
- var/std (var_mean, std_mean) with no degrees of freedom (n - correction <= 0): torch's
  forward is Σ(x - mean)² / max(0, n - correction); its gradient is g * (inf, or NaN where
  x is the mean) over every entry (dim=None, or a 0-d input), and 2 / (n - correction) *
  g * (x - mean) with a dim (inf at n = correction, a negative factor past it);
- scatter_reduce(reduce="prod") with create_graph=True: torch's second derivatives, zeros in
  x and src included; more than one zero of src sent to one place makes torch's second
  backward through src's gradient raise (refused by name here too).
"""

import warnings

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

NAN = float("nan")
DTYPES = [(np.float64, torch.float64, 1e-12), (np.float32, torch.float32, 1e-5)]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # (both libraries warn of the degrees of freedom)
        warnings.simplefilter("ignore")
        yield


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return t.detach().numpy()


def same(a, b, rtol):
    a, b = np.asarray(_np(a), dtype=np.float64), np.asarray(_np(b), dtype=np.float64)
    assert a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isposinf(a), np.isposinf(b))
    np.testing.assert_array_equal(np.isneginf(a), np.isneginf(b))
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True)


def _leaf(lib, values, dtype):
    if lib is ta:
        return ta.tensor(np.asarray(values, dtype=dtype), requires_grad=True)
    return torch.tensor(np.asarray(values), dtype=dtype, requires_grad=True)


def _weights(lib, shape, dtype, start=1.0):
    n = int(np.prod(shape))
    w = (np.arange(n, dtype=np.float64) * 0.75 - start).reshape(shape)
    return ta.tensor(w.astype(dtype)) if lib is ta else torch.tensor(w, dtype=dtype)


def _orders(lib, f, values, dtype):
    """(out, gradient of out with weights, gradient of Σ(grad of Σ out²) · w, or None)."""
    x = _leaf(lib, values, dtype)
    out = f(lib, x)
    (g1,) = lib.autograd.grad(out, x, _weights(lib, tuple(out.shape), dtype, 1.5),
                              retain_graph=True)
    (g,) = lib.autograd.grad((out * out).sum(), x, create_graph=True)
    if not g.requires_grad:
        return out, g1, g, None
    (h,) = lib.autograd.grad((g * _weights(lib, tuple(x.shape), dtype)).sum(), x,
                             allow_unused=True)
    return out, g1, g, h


def _check(f, values, dt, second=True):
    np_dtype, torch_dtype, rtol = dt
    mine = _orders(ta, f, values, np_dtype)
    theirs = _orders(torch, f, values, torch_dtype)
    for a, b in zip(mine[:3], theirs[:3], strict=True):
        same(a, b, rtol)
    assert (mine[3] is None) == (theirs[3] is None)
    if mine[3] is not None and second:
        same(mine[3], theirs[3], rtol)


# ---- amax / amin / max / min with NaN ----------------------------------------------------------

WITH_NAN = [[1.0, NAN, 3.0, NAN], [2.0, 5.0, 5.0, 1.0], [NAN, -1.0, 0.5, 4.0]]

EXTREMES = {
    "amax_dim1": lambda lib, x: x.amax(1),
    "amin_dim1": lambda lib, x: x.amin(1),
    "amax_dim0": lambda lib, x: x.amax(0),
    "amin_dim-1_keepdim": lambda lib, x: x.amin(-1, keepdim=True),
    "amax_dims": lambda lib, x: x.amax((0, 1)),
    "amax_all": lambda lib, x: x.amax(),
    "amin_all": lambda lib, x: x.amin(),
    "amax_fn": lambda lib, x: lib.amax(x, dim=1),
    "aminmax_dim": lambda lib, x: lib.aminmax(x, dim=1).max * lib.aminmax(x, dim=1).min,
    "aminmax_all": lambda lib, x: lib.aminmax(x).min,
    "max_dim": lambda lib, x: x.max(1).values,
    "min_dim": lambda lib, x: x.min(0).values,
    "max_all": lambda lib, x: x.max(),
    "min_all": lambda lib, x: x.min(),
    "maximum": lambda lib, x: lib.maximum(x, x.flip(1)),
    "minimum": lambda lib, x: lib.minimum(x, x.flip(0)),
    "fmax": lambda lib, x: lib.fmax(x, x.flip(1)),
    "fmin": lambda lib, x: lib.fmin(x, x.flip(0)),
}


@pytest.mark.parametrize("dt", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("name", sorted(EXTREMES))
def test_extremes_with_nan_match_torch(name, dt):
    _check(EXTREMES[name], WITH_NAN, dt)


@pytest.mark.parametrize("dt", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("name", ["amax_dim1", "amin_dim1", "amax_all", "max_all"])
def test_extremes_without_nan_still_share_ties(name, dt):
    _check(EXTREMES[name], [[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]], dt)


def test_amax_nan_slice_gets_nan_even_where_g_is_zero():
    x = ta.tensor([[NAN, 1.0], [2.0, 3.0]], requires_grad=True)
    (g,) = ta.autograd.grad(x.amax(1), x, ta.tensor([0.0, 1.0]))
    assert np.isnan(g.numpy()[0]).all() and g.numpy()[1].tolist() == [0.0, 1.0]


# ---- var / std with no degrees of freedom ------------------------------------------------------

X23 = [[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]]
X31 = [[2.0], [-1.0], [0.0]]
VAR_CASES = [
    (X31, 1), (X31, None), (X31, 0), ([2.0], None), ([2.0], 0), (X23, 1), (X23, None),
    (X23, (0, 1)), (X23, 0), ([[3.5]], (0, 1)), (3.0, None), (3.0, 0),
]
CORRECTIONS = [0, 1, 2, 3, 4, 6, 7]


def _reduction(kind, dim, correction, keepdim=False):
    def f(lib, x):
        if kind == "var_mean":
            v, m = lib.var_mean(x, dim=dim, correction=correction, keepdim=keepdim)
            return v + m
        if kind == "std_mean":
            s, m = lib.std_mean(x, dim=dim, correction=correction, keepdim=keepdim)
            return s * m
        return getattr(x, kind)(dim=dim, correction=correction, keepdim=keepdim)
    return f


@pytest.mark.parametrize("dt", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("correction", CORRECTIONS)
@pytest.mark.parametrize(("values", "dim"), VAR_CASES)
@pytest.mark.parametrize("kind", ["var", "std", "var_mean", "std_mean"])
def test_var_std_without_degrees_of_freedom_match_torch(kind, values, dim, correction, dt):
    # (left out: std_mean's second order where the std is 0, a constant slice, at which
    # torch's is NaN (the masked 0 of its std backward divided by 2 * std = 0 again) and
    # Tensor.std's 0: sqrt at 0, not the degrees of freedom)
    flat = bool((torch.tensor(values).var(dim=dim, correction=0) == 0).any())
    _check(_reduction(kind, dim, correction), values, dt, second=kind != "std_mean" or not flat)


@pytest.mark.parametrize("dt", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("dim", [1, None])
@pytest.mark.parametrize("kind", ["var", "std"])
def test_var_std_keepdim_and_unbiased_match_torch(kind, dim, dt):
    for correction in (0, 1, 3, 4):
        _check(_reduction(kind, dim, correction, keepdim=True), X23, dt)
    for unbiased in (True, False):
        _check(lambda lib, x, u=unbiased: getattr(x, kind)(dim, unbiased=u), X31, dt)
        _check(lambda lib, x, u=unbiased: getattr(x, kind)(u), [[2.0]], dt)


# ---- scatter_reduce(reduce="prod"), second order -----------------------------------------------

INDEX = [[0, 0, 1], [2, 2, 2]]
SELF = {"plain": [[2.0, 3.0, 4.0], [1.5, -1.0, 2.0]], "zeros": [[0.0, 3.0, 4.0], [1.5, -1.0, 0.0]]}
SRC = {"plain": [[0.5, 0.7, 2.5], [1.5, -0.5, 1.2]], "one_zero": [[0.0, 0.7, 2.5], [1.5, 0.0, 1.2]]}


def _prod_grads(lib, x0, s0, include_self, dtype, use_src=True):
    x, s = _leaf(lib, x0, dtype), _leaf(lib, s0, dtype)
    index = ta.tensor(INDEX) if lib is ta else torch.tensor(INDEX)
    y = x.scatter_reduce(1, index, s, "prod", include_self=include_self)
    g = _weights(lib, tuple(y.shape), dtype)
    gx, gs = lib.autograd.grad(y, (x, s), g, create_graph=True)
    loss = (gx * _weights(lib, tuple(gx.shape), dtype, 0.3)).sum()
    if use_src:
        loss = loss + (gs * _weights(lib, tuple(gs.shape), dtype, -0.5)).sum()
    hx, hs = lib.autograd.grad(loss, (x, s), allow_unused=True)
    return y, gx, gs, hx, hs


@pytest.mark.parametrize("dt", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("src", sorted(SRC))
@pytest.mark.parametrize("x", sorted(SELF))
def test_scatter_reduce_prod_second_order_matches_torch(x, src, include_self, dt):
    np_dtype, torch_dtype, rtol = dt
    mine = _prod_grads(ta, SELF[x], SRC[src], include_self, np_dtype)
    theirs = _prod_grads(torch, SELF[x], SRC[src], include_self, torch_dtype)
    for a, b in zip(mine, theirs, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            same(a, b, rtol)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("x", sorted(SELF))
def test_scatter_reduce_prod_second_order_with_src_wider_than_the_index(x, include_self):
    """torch's backward of prod fails on a src larger than the index (a shape mismatch in its
    formula); tinyattn's takes it: the entries the index does not read get 0, the others as
    with the part of src the index reads."""
    wide = np.array([[0.5, 0.0, 2.5, 9.0], [1.5, -0.5, 1.2, 0.0]])
    ws = np.array([[0.5, -1.0, 2.0, 3.0], [0.25, 1.5, -0.75, 4.0]])

    def grads(s0, w):
        x, s = ta.tensor(np.array(SELF[x0]), requires_grad=True), ta.tensor(s0, requires_grad=True)
        y = x.scatter_reduce(1, ta.tensor(INDEX), s, "prod", include_self=include_self)
        gx, gs = ta.autograd.grad(y, (x, s), _weights(ta, (2, 3), np.float64), create_graph=True)
        loss = (gx * _weights(ta, (2, 3), np.float64, 0.3)).sum() + (gs * ta.tensor(w)).sum()
        return [t.numpy() for t in (y, gx, gs, *ta.autograd.grad(loss, (x, s)))]

    x0 = x
    got, want = grads(wide, ws), grads(wide[:, :3], ws[:, :3])
    for k in (0, 1, 3):  # y, gx, hx
        np.testing.assert_array_equal(got[k], want[k])
    for k in (2, 4):  # gs, hs: 0 in the column the index does not read
        np.testing.assert_array_equal(got[k][:, 3], 0)
        np.testing.assert_array_equal(got[k][:, :3], want[k])


TWO_ZEROS = [[0.0, 0.0, 2.5], [1.5, 0.0, 1.2]]  # two zeros of src sent to place (0, 0)


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_two_zeros_at_one_place_refused_as_torch(include_self):
    with pytest.raises(RuntimeError, match="more than one zero|>1 zeros"):
        _prod_grads(torch, SELF["plain"], TWO_ZEROS, include_self, torch.float64)
    with pytest.raises(ta.errors.GraphError, match="scatter_reduce.*zero"):
        _prod_grads(ta, SELF["plain"], TWO_ZEROS, include_self, np.float64)
    # as in torch, the first-order values come with create_graph=True, and x's gradient
    # stays differentiable
    mine = _prod_grads(ta, SELF["plain"], TWO_ZEROS, include_self, np.float64, use_src=False)
    theirs = _prod_grads(torch, SELF["plain"], TWO_ZEROS, include_self, torch.float64,
                         use_src=False)
    for a, b in zip(mine, theirs, strict=True):
        same(a, b, 1e-12)


def test_scatter_reduce_prod_third_order_matches_torch():
    def third(lib, dtype):
        x, s = _leaf(lib, SELF["plain"], dtype), _leaf(lib, SRC["one_zero"], dtype)
        index = ta.tensor(INDEX) if lib is ta else torch.tensor(INDEX)
        y = x.scatter_reduce(1, index, s, "prod")
        gx, gs = lib.autograd.grad((y * y).sum(), (x, s), create_graph=True)
        hx, hs = lib.autograd.grad(gx.sum() + (gs * gs).sum(), (x, s), create_graph=True)
        return (hx, hs, *lib.autograd.grad((hx * hx).sum() + hs.sum(), (x, s)))

    for a, b in zip(third(ta, np.float64), third(torch, torch.float64), strict=True):
        same(a, b, 1e-12)
