"""Pointwise ops at their edges, compared with PyTorch (round 3): values and gradients at 0,
NaN, ±inf, tiny magnitudes and clamp-like boundaries, in float16, float32 and float64.

A RuntimeWarning is an error here (as in pyproject.toml): none may leak from NumPy.
"""

import math

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

INF, NAN = math.inf, math.nan


def _both(fn_ta, fn_torch, values, dtype, grad=True, seed=0):
    """(ours, torch's) outputs and, with grad, input gradients for a random upstream g."""
    x = np.asarray(values, dtype=dtype)
    g = np.random.default_rng(seed).standard_normal(x.shape).astype(dtype)
    a = ta.tensor(x, requires_grad=grad)
    t = torch.tensor(x, requires_grad=grad)
    ao, to = fn_ta(a), fn_torch(t)
    if not grad:
        return (ao.numpy(), None), (to.detach().numpy(), None)
    ao.backward(ta.tensor(g))
    to.backward(torch.tensor(g))
    return (ao.numpy(), a.grad.numpy()), (to.detach().numpy(), t.grad.numpy())


def _same(ours, theirs, rtol):
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours.astype(np.float64), theirs.astype(np.float64), rtol=rtol,
                               atol=0)
    # the sign of a zero and of an infinity too
    assert np.array_equal(np.signbit(ours), np.signbit(theirs)) or np.isnan(theirs).any()


# ---- erf: relative accuracy near 0 in float32 and float16 --------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_erf_keeps_tiny_values(dtype):
    # erf(x) ~ 2x/√π near 0: it was 1 - t e^(...) there, 0 below 1e-7 and 10% off at 1e-6
    tiny = [1e-30, -1e-30, 1e-10, 1e-7, -1e-6, 1e-5, 3e-4, 1e-3, 0.01, -0.2, 0.49, 0.5, 0.7]
    if dtype == np.float16:
        tiny = [1e-7, -1e-6, 1e-5, 3e-4, 1e-3, 0.01, -0.2, 0.49, 0.5, 0.7, 6e-8]
    (out, _), (ref, _) = _both(lambda x: x.erf(), lambda x: x.erf(), tiny, dtype, grad=False)
    if dtype == np.float16:  # (torch's own float16 erf loses the subnormals: 0 at 6e-8, so
        # the reference is float64's erf of the same inputs, rounded once)
        ref = torch.tensor(np.asarray(tiny, dtype).astype(np.float64)).erf().numpy()
        ref = ref.astype(dtype)
    _same(out, ref, rtol=1e-3 if dtype == np.float16 else 1e-6)


def test_erf_float32_grad_and_zero():
    (out, gx), (ref, gref) = _both(lambda x: x.erf(), lambda x: x.erf(),
                                   [0.0, -0.0, 1e-8, -2.0, 5.0, INF, -INF, NAN], np.float32)
    _same(out, ref, rtol=1e-6)
    np.testing.assert_allclose(gx, gref, rtol=1e-6)


# ---- elu, selu, celu: the gradient at a NaN input ---------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,fn_ta,fn_torch", [
    ("elu", F.elu, TF.elu),
    ("elu_alpha", lambda x: F.elu(x, 0.3), lambda x: TF.elu(x, 0.3)),
    ("selu", F.selu, TF.selu),
    ("celu", lambda x: F.celu(x, 2.0), lambda x: TF.celu(x, 2.0)),
])
def test_elu_family_gradient_at_nan(dtype, name, fn_ta, fn_torch):
    # torch tests x <= 0 for the exponential side: a NaN x takes the linear side's slope
    # (g, or g * scale for selu), not g * alpha e^NaN = NaN
    values = [NAN, -1.0, 0.0, 2.0, -INF, INF]
    (out, gx), (ref, gref) = _both(fn_ta, fn_torch, values, dtype)
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    assert not np.isnan(gx[0])
    np.testing.assert_allclose(gx, gref, rtol=1e-6)


# ---- round(decimals=) in float16 ---------------------------------------------------------------


@pytest.mark.parametrize("decimals", [1, 2, 3, -1])
def test_round_decimals_float16_does_not_overflow(decimals):
    # x * 10^decimals overflowed float16 (1000 * 100 = inf); torch scales in float32
    values = [710.0, -745.0, 1000.0, 65504.0, 1.2345, -0.5, 0.125, INF, NAN]
    (out, _), (ref, _) = _both(lambda x: x.round(decimals=decimals),
                               lambda x: x.round(decimals=decimals), values, np.float16,
                               grad=False)
    np.testing.assert_array_equal(out, ref)


# ---- logit(eps) with eps above 1/2 ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logit_eps_above_half_clamps_as_torch(dtype):
    # torch clamps x < eps to eps first, then x > 1 - eps to 1 - eps; NumPy's clip with
    # min > max gave every entry max = 1 - eps, so the sign of the result flipped
    values = [0.1, 0.5, 0.9, -1.0, 2.0, NAN]
    (out, gx), (ref, gref) = _both(lambda x: x.logit(eps=0.6), lambda x: x.logit(eps=0.6),
                                   values, dtype)
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    assert out[0] > 0
    np.testing.assert_array_equal(gx, gref)


# ---- pow with exponents ±0.5: torch's sqrt and rsqrt --------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("exponent", [0.5, -0.5, 1.5])
def test_pow_half_exponents_at_signed_zero_and_neg_inf(dtype, exponent):
    # torch's float kernels take x ** 0.5 as sqrt and x ** -0.5 as rsqrt: (-0.0) ** -0.5 is
    # -inf, (-inf) ** ±0.5 NaN; x ** 0.5's gradient goes through x ** -0.5 (so -inf at -0.0)
    values = [-INF, -0.0, 0.0, -4.0, 4.0, INF, NAN]
    (out, gx), (ref, gref) = _both(lambda x: x ** exponent, lambda x: x ** exponent, values,
                                   dtype)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(gx, gref)


@pytest.mark.parametrize("exponent", [0.5, -0.5, 0.25])
def test_pow_half_exponents_float16(exponent):
    # torch's float16 kernel is C's pow: (-inf) ** 0.5 = inf and (-0.0) ** 0.5 = +0.0
    values = [-INF, -0.0, 0.0, -4.0, 4.0, INF, NAN, 2.0]
    (out, _), (ref, _) = _both(lambda x: x ** exponent, lambda x: x ** exponent, values,
                               np.float16, grad=False)
    np.testing.assert_array_equal(out, ref)
    assert np.array_equal(np.signbit(out), np.signbit(ref))


# ---- tanh's gradient where out² nears 1 ----------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_tanh_gradient_keeps_its_digits_in_the_tails(dtype):
    # g (1 - out²), as torch: g - (g out) out, as quick, lost ~0.3 % in float32 at |x| = 6
    x = np.array([-9.0, -6.0, -3.0, -0.5, 0.0, 0.5, 3.0, 6.0, 9.0], dtype=dtype)
    g = np.array([0.7, -1.3, 0.9, 2.0, -0.4, 0.3, 1.7, 0.7, -0.6], dtype=dtype)
    t = ta.tensor(x, requires_grad=True)
    t.tanh().backward(ta.tensor(g))
    out = np.tanh(x)
    np.testing.assert_array_equal(t.grad.numpy(), g * (1 - out * out))  # torch's formula
    assert t.grad.dtype == dtype
    if dtype != np.float16:
        tt = torch.tensor(x, requires_grad=True)
        tt.tanh().backward(torch.tensor(g))
        inner = np.abs(x) <= 6  # (past it, one ulp of tanh, where libraries may differ, is
        # all of 1 - out²)
        np.testing.assert_allclose(t.grad.numpy()[inner], tt.grad.numpy()[inner], rtol=2e-4)
