"""Tensor method parity with torch, seventh round: what a differential sweep of Tensor methods
and functions against torch found (dtypes of add/sub with alpha, gcd/lcm promotion, unflatten
of an empty dim, the adjoint properties, and errors that name the op)."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


def _same(ours, theirs):
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6)


def _both(a):
    return ta.tensor(a), torch.tensor(a)


B = np.array([[True, False, True], [False, False, True]])
I32 = np.array([[1, -2, 3], [4, 5, -6]], dtype=np.int32)
I64 = np.array([[7, 0, -3], [2, 9, 4]], dtype=np.int64)


# ---- add / sub with alpha: the result type of the two inputs, not of other * alpha -----------

@pytest.mark.parametrize("x, y", [(B, B), (I32, B), (B, np.array(True)), (np.array(False), B)])
@pytest.mark.parametrize("alpha", [2, 0, -3])
def test_add_alpha_keeps_the_result_type_of_the_inputs(x, y, alpha):
    (a, ta_), (b, tb) = _both(x), _both(y)
    _same(ta.add(a, b, alpha=alpha), torch.add(ta_, tb, alpha=alpha))
    _same(a.add(b, alpha=alpha), ta_.add(tb, alpha=alpha))


@pytest.mark.parametrize("number", [True, False, 1])
def test_add_alpha_with_a_python_number_other(number):
    a, t = _both(B)
    _same(ta.add(a, number, alpha=3), torch.add(t, number, alpha=3))
    a, t = _both(I32)
    _same(ta.add(a, number, alpha=3), torch.add(t, number, alpha=3))


def test_add_alpha_in_place_on_bool_and_int32():
    a, t = _both(B)
    a.add_(ta.tensor(B[::-1].copy()), alpha=2)
    t.add_(torch.tensor(B[::-1].copy()), alpha=2)
    _same(a, t)
    a, t = _both(I32)
    a.add_(ta.tensor(B), alpha=2)
    t.add_(torch.tensor(B), alpha=2)
    _same(a, t)


def test_add_alpha_computes_in_the_wider_float_type():
    """float64 + int64 * 0.1 in float64, as torch (not the int64 * 0.1 in float32 first)."""
    x, tx = _both(np.array([1.5, -2.25]))
    y, ty = _both(np.array([3, 7]))
    ours, theirs = ta.add(x, y, alpha=0.1), torch.add(tx, ty, alpha=0.1)
    assert ours.dtype == ta.float64
    # (to float64's last bit or so: 0.1 * 7 in float32 first is off by about 1e-8)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-15)
    np.testing.assert_allclose(ta.sub(x, y, alpha=0.1).numpy(),
                               torch.sub(tx, ty, alpha=0.1).numpy(), rtol=1e-15)


def test_add_alpha_gradient_through_the_cast_other():
    x = ta.tensor([1.0, 2.0], dtype=ta.float64, requires_grad=True)
    y = ta.tensor([3.0, 4.0], requires_grad=True)  # float32
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    ty = torch.tensor([3.0, 4.0], requires_grad=True)
    ta.sub(x, y, alpha=0.5).sum().backward()
    torch.sub(tx, ty, alpha=0.5).sum().backward()
    _same(x.grad, tx.grad)
    _same(y.grad, ty.grad)


# ---- gcd / lcm: torch's type promotion ------------------------------------------------------

@pytest.mark.parametrize("fn", ["gcd", "lcm"])
@pytest.mark.parametrize("x, y", [(I32, np.array(4)), (np.array(6), I32), (I64, B), (B, I32),
                                  (I32, I64), (I32.astype(np.uint8) % 7, np.array(3))])
def test_gcd_lcm_promote_as_torch(fn, x, y):
    (a, ta_), (b, tb) = _both(x), _both(y)
    _same(getattr(ta, fn)(a, b), getattr(torch, fn)(ta_, tb))
    _same(getattr(a, fn)(b), getattr(ta_, fn)(tb))


@pytest.mark.parametrize("fn", ["gcd", "lcm"])
def test_gcd_lcm_of_two_bool_tensors_refused(fn):
    a = ta.tensor(B)
    with pytest.raises(TypeError, match=fn):
        getattr(ta, fn)(a, a)
    with pytest.raises(NotImplementedError):
        getattr(torch, fn)(torch.tensor(B), torch.tensor(B))


# ---- unflatten of an empty dim with an inferred size ----------------------------------------

@pytest.mark.parametrize("dim, sizes", [(-1, (-1, 1)), (1, [2, -1]), (0, (-1, 3)), (0, (0, -1))])
def test_unflatten_infers_a_size_next_to_an_empty_dim(dim, sizes):
    a, t = _both(np.zeros((0, 4), np.float32))
    try:
        theirs = t.unflatten(dim, sizes)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            a.unflatten(dim, sizes)
        return
    _same(a.unflatten(dim, sizes), theirs)


# ---- the adjoint properties (mH, H, adjoint) and isreal / is_nonzero --------------------------

@pytest.mark.parametrize("shape", [(), (2, 3), (2, 3, 4)])
def test_mh_and_adjoint_are_the_transpose_of_a_real_tensor(shape):
    a, t = _both(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))
    with pytest.warns(UserWarning) if not shape else _Nothing():
        _same(a.mH, t.mH)
    with pytest.warns(UserWarning) if not shape else _Nothing():
        _same(a.adjoint(), t.adjoint())


def test_mh_gradient():
    x = ta.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    (x.mH * ta.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 3, 5], [2, 4, 6]])


@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_h_on_a_matrix(shape):
    a, t = _both(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))
    with pytest.warns(UserWarning) if not shape else _Nothing():
        _same(a.H, t.H)


@pytest.mark.parametrize("name, shape", [("H", (3,)), ("H", (2, 3, 4)), ("mH", (3,)),
                                         ("adjoint", (3,))])
def test_adjoint_properties_refuse_what_torch_refuses(name, shape):
    a = ta.zeros(*shape)
    with pytest.raises(RuntimeError, match=name):
        v = getattr(a, name)
        v() if callable(v) else v


@pytest.mark.parametrize("values", [[1.0, 0.0, float("nan")], [0, 3], [True, False]])
def test_isreal(values):
    a, t = _both(np.array(values))
    _same(a.isreal(), t.isreal())
    _same(ta.isreal(a), torch.isreal(t))


@pytest.mark.parametrize("value", [0.0, 2.5, -0.0, float("nan"), 0, 3, True, False])
def test_is_nonzero(value):
    assert ta.tensor(value).is_nonzero() == torch.tensor(value).is_nonzero()
    assert ta.tensor([value]).is_nonzero() == torch.tensor([value]).is_nonzero()


@pytest.mark.parametrize("shape", [(0,), (2,)])
def test_is_nonzero_refuses_other_than_one_entry(shape):
    with pytest.raises(RuntimeError):
        torch.zeros(shape).is_nonzero()
    with pytest.raises(RuntimeError, match="is_nonzero"):
        ta.zeros(*shape).is_nonzero()


# ---- errors that name the op ----------------------------------------------------------------

def test_masked_select_shape_error_names_the_op_and_shapes():
    x = ta.zeros(3, 4)
    with pytest.raises(RuntimeError) as caught:
        x.masked_select(ta.zeros(5, dtype=ta.bool))
    message = str(caught.value)
    assert "masked_select" in message and "(3, 4)" in message and "(5,)" in message


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_nanmean_refuses_a_non_float_dtype(dtype):
    with pytest.raises(RuntimeError):
        torch.zeros(2, 3).nanmean(dtype=getattr(torch, dtype))
    with pytest.raises(TypeError, match="nanmean"):
        ta.zeros(2, 3).nanmean(dtype=getattr(ta, dtype))
    with pytest.raises(TypeError, match="nanmean"):
        ta.zeros(2, 3).nanmean(1, dtype=getattr(ta, dtype))


def test_nanmean_float_dtype_still_works():
    a, t = _both(np.array([[1.0, np.nan, 2.0]], np.float32))
    _same(a.nanmean(1, dtype=ta.float64), t.nanmean(1, dtype=torch.float64))


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("dtype", ["int64", "uint8", "float32"])
@pytest.mark.parametrize("call", [lambda x, m, lib: x.masked_select(m),
                                  lambda x, m, lib: x.masked_scatter(m, lib.ones(6)),
                                  lambda x, m, lib: x.masked_scatter_(m, lib.ones(6)),
                                  lambda x, m, lib: lib.masked_select(x, m)])
def test_masked_ops_refuse_a_non_bool_mask(dtype, call):
    """(an integer mask would otherwise index by position: a silently different result)"""
    with pytest.raises(RuntimeError):
        call(torch.zeros(2, 3), torch.ones(3, dtype=getattr(torch, dtype)), torch)
    with pytest.raises(TypeError, match="mask must be bool"):
        call(ta.zeros(2, 3), ta.ones(3, dtype=getattr(ta, dtype)), ta)


def test_masked_select_and_scatter_with_a_bool_mask_still_work():
    m = np.array([True, False, True])
    x, tx = _both(np.arange(6.0).reshape(2, 3))
    _same(x.masked_select(ta.tensor(m)), tx.masked_select(torch.tensor(m)))
    _same(x.masked_scatter(ta.tensor(m), ta.ones(6, dtype=ta.float64)),
          tx.masked_scatter(torch.tensor(m), torch.ones(6, dtype=torch.float64)))
