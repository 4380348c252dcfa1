"""Property tests (hypothesis) for broadcasting and reductions.

Broadcasting: any pair of shapes NumPy broadcasts gives NumPy's values and shape, and the
gradients come back summed to each input's shape. Reductions: for any shape, any set of dims and
either keepdim, sum/mean/max/min/var/logsumexp agree with NumPy, and their gradients have the
structure the math says (ones, 1/n, a distribution over each group).
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.autograd import sum_to
from tinyattn.errors import ShapeError
from tinyattn.gradcheck import check_gradients

SETTINGS = settings(max_examples=40, deadline=None)
PAIRS = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)
BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "maximum": (lambda a, b: a.maximum(b), np.maximum),
    "minimum": (lambda a, b: a.minimum(b), np.minimum),
}


def leaf(values):
    return ta.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def values(shape, seed, low=None):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) if low is None else rng.uniform(low, 2.0, shape)


# ---- broadcasting -----------------------------------------------------------------------------


@SETTINGS
@given(shapes=PAIRS, name=st.sampled_from(sorted(BINARY)), seed=st.integers(0, 2**16))
def test_binary_ops_broadcast_like_numpy(shapes, name, seed):
    (a_shape, b_shape), out_shape = shapes.input_shapes, shapes.result_shape
    ours, theirs = BINARY[name]
    av, bv = values(a_shape, seed), values(b_shape, seed + 1, low=0.5)
    a, b = leaf(av), leaf(bv)
    out = ours(a, b)
    assert out.shape == out_shape
    np.testing.assert_allclose(out.numpy(), theirs(av, bv), rtol=1e-15)
    out.sum().backward()
    assert a.grad.shape == a_shape and b.grad.shape == b_shape
    report = check_gradients(ours, [leaf(av), leaf(bv)])
    assert report.ok, report.message


@SETTINGS
@given(shapes=PAIRS)
def test_each_input_is_counted_as_often_as_it_is_broadcast(shapes):
    (a_shape, b_shape), out_shape = shapes.input_shapes, shapes.result_shape
    a, b = leaf(np.zeros(a_shape)), leaf(np.zeros(b_shape))
    (a + b).sum().backward()
    n_out = int(np.prod(out_shape))
    np.testing.assert_array_equal(a.grad.numpy(), np.full(a_shape, n_out / np.prod(a_shape)))
    np.testing.assert_array_equal(b.grad.numpy(), np.full(b_shape, n_out / np.prod(b_shape)))


@SETTINGS
@given(shapes=PAIRS, seed=st.integers(0, 2**16))
def test_product_gradients_are_linear_in_each_input(shapes, seed):
    # f = sum(g * a * b) is linear in a: <df/da, a> = f, whatever the broadcasting
    (a_shape, b_shape), out_shape = shapes.input_shapes, shapes.result_shape
    av, bv, g = values(a_shape, seed), values(b_shape, seed + 1), values(out_shape, seed + 2)
    a, b = leaf(av), leaf(bv)
    (a * b).backward(g)
    f = np.sum(g * av * bv)
    np.testing.assert_allclose(np.sum(a.grad.numpy() * av), f, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.sum(b.grad.numpy() * bv), f, rtol=1e-10, atol=1e-12)


@SETTINGS
@given(shapes=PAIRS, seed=st.integers(0, 2**16))
def test_sum_to_undoes_broadcasting(shapes, seed):
    (a_shape, _), out_shape = shapes.input_shapes, shapes.result_shape
    av = values(a_shape, seed)
    stretched = np.broadcast_to(av, out_shape)
    summed = sum_to(stretched, a_shape)
    assert summed.shape == a_shape
    np.testing.assert_allclose(summed, av * (np.prod(out_shape) / np.prod(a_shape)), rtol=1e-12)


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), data=st.data())
def test_expand_then_sum_back(shape, data):
    lead = data.draw(st.lists(st.integers(1, 3), max_size=2), label="lead")
    target = tuple(lead) + tuple(data.draw(st.sampled_from([n, 3]), label="side") if n == 1
                                 else n for n in shape)
    x = leaf(values(shape, 0))
    g = values(target, 1)
    x.expand(*target).backward(g)
    np.testing.assert_allclose(x.grad.numpy(), sum_to(g, shape), rtol=1e-14)
    assert x.grad.shape == shape


# ---- reductions -------------------------------------------------------------------------------


@st.composite
def reduction_case(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4))
    ndim = len(shape)
    if ndim == 0:
        dim = draw(st.sampled_from([None, 0, -1]))
    else:
        axes = draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim,
                             unique_by=lambda d: d % ndim))
        dim = draw(st.sampled_from([None, axes[0], tuple(axes)]))
    return shape, dim, draw(st.booleans()), draw(st.integers(0, 2**16))


def _np_axes(shape, dim):
    if dim is None or not shape:
        return None
    return tuple(d % len(shape) for d in (dim if isinstance(dim, tuple) else (dim,)))


REDUCTIONS = {
    "sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min,
    # plain log(sum(exp)) is exact enough for standard-normal values (scipy's keepdims on
    # a 0-d array gives shape (1,), NumPy's and PyTorch's ())
    "logsumexp": lambda x, axis, keepdims: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims)),
}


@SETTINGS
@given(case=reduction_case(), name=st.sampled_from(sorted(REDUCTIONS)))
def test_reductions_agree_with_numpy(case, name):
    shape, dim, keepdim, seed = case
    xv = values(shape, seed)
    out = getattr(leaf(xv), name)(dim=dim, keepdim=keepdim)
    want = np.asarray(REDUCTIONS[name](xv, axis=_np_axes(shape, dim), keepdims=keepdim))
    assert out.shape == want.shape
    # (relative to the sizes summed, not only to the result: a sum that cancels to near 0 is
    # off by a few ulps of its terms, summed in another order by BLAS than by NumPy)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-13, atol=1e-15 * np.abs(xv).sum())


@SETTINGS
@given(case=reduction_case())
def test_reduction_gradients_have_their_shape(case):
    shape, dim, keepdim, seed = case
    xv = values(shape, seed)
    axes = _np_axes(shape, dim)
    n = xv.size // np.asarray(xv.sum(axis=axes, keepdims=True)).size  # entries per group
    group_sum = lambda a: np.broadcast_to(a.sum(axis=axes, keepdims=True), shape)  # noqa: E731
    for name, check in (
        ("sum", lambda gx: np.testing.assert_array_equal(gx, 1.0)),
        ("mean", lambda gx: np.testing.assert_allclose(gx, 1.0 / n, rtol=1e-15)),
        ("amax", lambda gx: np.testing.assert_allclose(group_sum(gx), 1.0, rtol=1e-15)),
        ("amin", lambda gx: np.testing.assert_allclose(group_sum(gx), 1.0, rtol=1e-15)),
        ("logsumexp", lambda gx: np.testing.assert_allclose(group_sum(gx), 1.0, rtol=1e-13)),
    ):
        x = leaf(xv)
        getattr(x, name)(dim=dim, keepdim=keepdim).sum().backward()
        assert x.grad.shape == shape
        check(x.grad.numpy())


@SETTINGS
@given(case=reduction_case(), correction=st.sampled_from([0, 1]))
def test_var_agrees_with_numpy_and_gradchecks(case, correction):
    shape, dim, keepdim, seed = case
    xv = values(shape, seed)
    axes = _np_axes(shape, dim)
    n = xv.size // np.asarray(xv.sum(axis=axes, keepdims=True)).size
    assume(n - correction > 0)  # no variance to speak of otherwise
    out = leaf(xv).var(dim=dim, keepdim=keepdim, correction=correction)
    np.testing.assert_allclose(out.numpy(), np.var(xv, axis=axes, ddof=correction,
                                                    keepdims=keepdim), rtol=1e-12, atol=1e-15)
    report = check_gradients(lambda x: x.var(dim=dim, keepdim=keepdim, correction=correction),
                             [leaf(xv)])
    assert report.ok, report.message


@SETTINGS
@given(case=reduction_case(), name=st.sampled_from(["amax", "amin", "logsumexp", "mean"]))
def test_reduction_gradchecks(case, name):
    shape, dim, keepdim, seed = case
    xv = values(shape, seed)  # continuous values: no ties
    report = check_gradients(lambda x: getattr(x, name)(dim=dim, keepdim=keepdim), [leaf(xv)])
    assert report.ok, report.message


@SETTINGS
@given(x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                    elements=st.floats(-50, 50)),
       shift=st.floats(-1e3, 1e3), data=st.data())
def test_softmax_is_a_distribution_invariant_to_shifts(x, shift, data):
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1), label="dim")
    y = F.softmax(leaf(x), dim=dim).numpy()
    np.testing.assert_allclose(y.sum(axis=dim), 1.0, rtol=1e-13)
    np.testing.assert_allclose(F.softmax(leaf(x + shift), dim=dim).numpy(), y, rtol=1e-9,
                               atol=1e-15)
    np.testing.assert_allclose(np.exp(F.log_softmax(leaf(x), dim=dim).numpy()), y,
                               rtol=1e-12, atol=1e-300)
    z = leaf(x)
    F.softmax(z, dim=dim).sum().backward()  # sum(softmax) is constant: zero gradient
    np.testing.assert_allclose(z.grad.numpy(), 0.0, atol=1e-15)


@pytest.mark.parametrize("g_shape, shape", [((3, 2), (2, 3)), ((6,), (2, 3)), ((2, 6), (2, 3)),
                                            ((4, 3, 2), (3, 1, 2)), ((2,), (2, 1))])
def test_sum_to_refuses_a_gradient_that_does_not_broadcast_to_the_shape(g_shape, shape):
    # the same size is not enough: a (3, 2) gradient reshaped to (2, 3) is silently wrong
    with pytest.raises(ShapeError, match="cannot sum a gradient"):
        sum_to(np.ones(g_shape), shape)


def test_backward_refuses_a_gradient_of_another_shape_as_torch():
    # y's array replaced by one of another shape (.data): its gradient no longer fits the
    # input it came from; torch raises "invalid gradient", the gradient was reshaped silently
    x = ta.randn(2, 3, requires_grad=True)
    y = x * 1
    y.data = ta.ones(3, 2)
    with pytest.raises(ShapeError, match=r"gradient of shape \(3, 2\) for input 0 of shape"):
        (y * ta.randn(3, 2)).sum().backward()
