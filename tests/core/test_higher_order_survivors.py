"""Gradients of gradients (create_graph=True) at the edges of a few ops, against torch in
float64 where torch has the case:

- pow with the constant exponent 0: its gradient is exactly 0 (not g, not inf/NaN), at
  positive, negative and zero x, and the composite around it keeps its second derivative;
- cat with an empty 1-D tensor among the inputs (torch's legacy rule leaves it out): the
  create_graph gradient and the second derivative of the others;
- einsum where every upper-case letter is already used and an operand repeats a letter: its
  diagonal gradient needs a spare letter, which is then a lower-case one;
- max/min of everything where NaN entries win: the create_graph gradient goes to the NaN
  entries (shared by ties) as the first-order one does (torch's), and its derivative in the
  upstream gradient; amax/amin over a dim: NaN to a slice whose extreme is NaN (torch's);
- var over every entry whose correction leaves no degrees of freedom: inf where x is off the
  mean, NaN where it is on it (as torch), not 0;
- setitem whose value carries many leading unit dims into a high-dimensional place: the
  value's gradient of gradient is still the place's slice (no dim count overflow)."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


def pair(values):
    """A float64 tinyattn leaf and a torch leaf with the same values."""
    a = np.asarray(values, dtype=np.float64)
    return (ta.tensor(a, requires_grad=True),
            torch.tensor(a, dtype=torch.float64, requires_grad=True))


def close(a, b, tol=1e-12):
    a = np.asarray(a.detach().numpy() if hasattr(a, "detach") else a)
    b = np.asarray(b.detach().numpy() if hasattr(b, "detach") else b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


# ---- pow with the constant exponent 0 --------------------------------------------------------


@pytest.mark.parametrize("exponent", [0, 0.0])
def test_pow_constant_zero_exponent_has_zero_create_graph_gradient(exponent):
    x, xt = pair([1.5, -2.0, 0.0, 3.0])
    (g,) = ta.autograd.grad((x ** exponent).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad((xt ** exponent).sum(), xt, create_graph=True)
    close(g, gt)
    assert np.all(g.numpy() == 0.0) and np.all(np.isfinite(g.numpy()))


def test_pow_constant_zero_exponent_inside_a_composite_second_derivative():
    # f = sum(x^0 * x^3 * w): the x^0 factor must contribute nothing to either derivative
    x, xt = pair([1.5, -2.0, 0.0, 3.0])
    w, wt = pair([0.5, -1.0, 2.0, 1.0])

    def grads(m, x, w):
        f = ((x ** 0) * (x ** 3) * w).sum()
        (gx,) = m.autograd.grad(f, x, create_graph=True)
        h = m.autograd.grad((gx * gx).sum(), (x, w))
        return gx, h

    gx, (hx, hw) = grads(ta, x, w)
    gxt, (hxt, hwt) = grads(torch, xt, wt)
    close(gx, gxt)
    close(hx, hxt)
    close(hw, hwt)


# ---- cat with an empty 1-D input -------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("empty_first", [False, True])
def test_cat_with_an_empty_1d_input_second_derivative(dim, empty_first):
    rng = np.random.default_rng(3)
    x, xt = pair(rng.standard_normal((2, 3)))
    y, yt = pair(rng.standard_normal((2, 3)))

    def grads(m, x, y):
        e = m.zeros(0, dtype=m.float64)  # requires no grad
        parts = [e, x, y] if empty_first else [x, e, y]
        out = m.cat(parts, dim=dim)
        f = (out ** 3).sum()
        gx, gy = m.autograd.grad(f, (x, y), create_graph=True)
        return gx, gy, m.autograd.grad((gx * y).sum() + (gy * gy).sum(), (x, y))

    for a, b in zip(grads(ta, x, y), grads(torch, xt, yt), strict=True):
        if isinstance(a, tuple):
            for u, v in zip(a, b, strict=True):
                close(u, v)
        else:
            close(a, b)


def test_cat_with_an_empty_1d_input_that_requires_grad():
    x, xt = pair([[1.0, 2.0], [3.0, -1.0]])
    e, et = pair(np.zeros(0))

    def grads(m, x, e):
        out = m.cat([x, e], dim=1)
        gx, ge = m.autograd.grad((out ** 2).sum(), (x, e), create_graph=True)
        return gx, ge, m.autograd.grad((gx ** 2).sum(), x)[0]

    for a, b in zip(grads(ta, x, e), grads(torch, xt, et), strict=True):
        close(a, b)


# ---- einsum: a repeated letter when every upper-case letter is taken ---------------------------


UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@pytest.mark.parametrize("equation", [UPPER + ",aa->a", UPPER + ",aab->ab", "aa," + UPPER + "->"])
def test_einsum_repeated_letter_with_all_upper_case_letters_taken(equation):
    rng = np.random.default_rng(5)
    ins = equation.split("->")[0].split(",")
    shapes = {"a": 3, "b": 2}
    arrays = [rng.standard_normal(tuple(shapes.get(ch, 1) for ch in s)) + 2.0 for s in ins]
    ta_in = [ta.tensor(a, requires_grad=True) for a in arrays]
    torch_in = [torch.tensor(a, requires_grad=True) for a in arrays]

    def grads(m, ops):
        out = m.einsum(equation, *ops)
        f = (out ** 2).sum()
        gs = m.autograd.grad(f, ops, create_graph=True)
        second = m.autograd.grad(sum((g * g).sum() for g in gs), ops)
        return gs, second

    ta_gs, ta_second = grads(ta, ta_in)
    torch_gs, torch_second = grads(torch, torch_in)
    for a, b in zip(ta_gs + ta_second, torch_gs + torch_second, strict=True):
        close(a, b, tol=1e-10)


# ---- max / min with NaN ----------------------------------------------------------------------


NAN = float("nan")


def _extreme_grads(m, name, x, u, dim, create_graph):
    out = getattr(x, name)() if dim is None else getattr(x, name)(dim=dim)
    (gx,) = m.autograd.grad((out * u).sum(), x, create_graph=create_graph)
    if not create_graph:
        return gx, None
    (hu,) = m.autograd.grad((gx * gx).sum(), u)
    return gx, hu


@pytest.mark.parametrize("name", ["max", "min"])
def test_whole_tensor_max_min_with_nan_create_graph(name):
    # the extreme of everything is NaN: the NaN entries share its gradient (torch's
    # evenly-distributed gradient); u, the upstream gradient, is a leaf: d/du |grad x|^2
    values = [[1.0, NAN, 3.0], [2.0, 5.0, 5.0], [NAN, 0.5, NAN]]
    x, xt = pair(values)
    u, ut = pair(1.5)
    for a, b in zip(_extreme_grads(ta, name, x, u, None, True),
                    _extreme_grads(torch, name, xt, ut, None, True), strict=True):
        close(a, b)


@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("dim", [0, 1])
def test_amax_amin_with_nan_create_graph_matches_first_order(name, dim):
    # a slice whose extreme is NaN: NaN to every entry of it (torch's amax: g / 0 winners *
    # [x == out]), ties sharing elsewhere; the same with create_graph, and d/du as torch's
    values = [[1.0, NAN, 3.0], [2.0, 5.0, 5.0], [NAN, 0.5, NAN]]
    x, xt = pair(values)
    u, ut = pair([0.5, 1.0, 2.0])
    first, _ = _extreme_grads(ta, name, x, u, dim, False)
    assert np.isnan(first.numpy()).any()
    gx, hu = _extreme_grads(ta, name, x, u, dim, True)
    close(gx, first)
    for a, b in zip((gx, hu), _extreme_grads(torch, name, xt, ut, dim, True), strict=True):
        close(a, b)


# ---- var without degrees of freedom ----------------------------------------------------------


@pytest.mark.parametrize(("values", "correction"), [
    ([1.0, 3.0, 4.0], 3),  # off the mean everywhere: inf
    ([1.0, 2.0, 3.0], 3),  # the middle entry is the mean: NaN there
    ([1.0, 3.0, 4.0], 5),  # correction past n
    ([2.5], 1),  # one entry: always the mean
])
def test_var_without_degrees_of_freedom_create_graph_gradient(values, correction):
    x, xt = pair(values)
    with pytest.warns(UserWarning):
        (g,) = ta.autograd.grad(x.var(correction=correction), x, create_graph=True)
    with pytest.warns(UserWarning):
        (gt,) = torch.autograd.grad(xt.var(correction=correction), xt, create_graph=True)
    close(g, gt)


# ---- setitem: a value with many leading unit dims --------------------------------------------


def test_setitem_value_with_many_leading_unit_dims_second_derivative():
    # x: 20 dims, x[0]: 19; the value carries 30 dims (11 leading 1s NumPy drops). Its
    # gradient is x's slice reshaped back to the value's 30 dims, however many dims that is
    x_shape = (2,) + (1,) * 18 + (3,)
    v_shape = (1,) * 29 + (3,)
    x = ta.ones(x_shape, dtype=ta.float64, requires_grad=True)
    v = ta.tensor(np.array([1.0, -2.0, 0.5]).reshape(v_shape), requires_grad=True)
    y = x * 1.0
    y[0] = v
    f = (y * y * y).sum()
    (gv,) = ta.autograd.grad(f, v, create_graph=True)
    assert tuple(gv.shape) == v_shape
    np.testing.assert_allclose(gv.numpy().reshape(-1), 3 * np.array([1.0, 4.0, 0.25]))
    (hv,) = ta.autograd.grad(gv.sum(), v)
    assert tuple(hv.shape) == v_shape
    np.testing.assert_allclose(hv.numpy().reshape(-1), 6 * np.array([1.0, -2.0, 0.5]))
