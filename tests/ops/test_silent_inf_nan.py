"""inf and NaN without NumPy's RuntimeWarnings, as torch: x / 0, log 0, √-1, e^1000, inverse
trig outside its domain, fmod by 0, softmax of rows holding inf, the mean of nothing, and the
gradients that are inf or NaN there (d/dx log x at 0, d/dx √x at 0, the division VJPs).

Each case runs forward and backward with every warning an error, then (with torch installed)
compares the values and the gradients, inf and NaN positions included, with torch's. Where torch
warns itself (var and std without degrees of freedom), tinyattn warns as well.
"""

import warnings

import numpy as np
import pytest

import tinyattn as ta

INF, NAN = float("inf"), float("nan")


def _f(m):
    return m.nn.functional


# (name, function of (library, x), the values of x); every function is written in the names
# tinyattn shares with torch, so the same lambda runs on both
CASES = [
    ("div_by_zero_tensor", lambda m, x: x / m.zeros(3), [1.0, 0.0, -1.0]),
    ("div_by_zero_number", lambda m, x: x / 0, [1.0, 0.0, -1.0]),
    ("number_div", lambda m, x: 1 / x, [0.0, -0.0, 2.0]),
    ("zero_div", lambda m, x: 0 / x, [0.0, 1.0, 2.0]),
    ("tensor_div_tensor", lambda m, x: x / x, [0.0, 1.0, INF]),
    ("masked_mean", lambda m, x: x.sum(1) / m.zeros(2, 2).sum(1), [[1.0, 2.0], [0.0, 0.0]]),
    ("div_floor", lambda m, x: m.div(x, 0, rounding_mode="floor"), [1.0, 0.0, -1.0]),
    ("div_trunc", lambda m, x: m.div(x, 0, rounding_mode="trunc"), [1.0, 0.0, -1.0]),
    ("floor_divide", lambda m, x: x // 0, [1.0, 0.0, -1.0]),
    ("true_divide", lambda m, x: m.true_divide(x, 0), [1.0, 0.0, -1.0]),
    ("log", lambda m, x: m.log(x), [0.0, -1.0, 1.0]),
    ("log2", lambda m, x: x.log2(), [0.0, -1.0, 2.0]),
    ("log10", lambda m, x: x.log10(), [0.0, -1.0, 10.0]),
    ("log1p", lambda m, x: x.log1p(), [-1.0, -2.0, 0.0]),
    ("sqrt", lambda m, x: x.sqrt(), [-1.0, 0.0, 4.0]),
    ("rsqrt", lambda m, x: x.rsqrt(), [-1.0, 0.0, 4.0]),
    ("reciprocal", lambda m, x: x.reciprocal(), [0.0, -0.0, 2.0]),
    ("exp", lambda m, x: m.exp(x), [1000.0, -1000.0, 0.0]),
    ("expm1", lambda m, x: x.expm1(), [1000.0, -1000.0, 0.0]),
    ("exp2", lambda m, x: x.exp2(), [1000.0, -1000.0, 0.0]),
    ("pow_minus_one", lambda m, x: x**-1, [0.0, -0.0, 2.0]),
    ("pow_half", lambda m, x: x**0.5, [-1.0, 0.0, 4.0]),
    ("pow_minus_half", lambda m, x: x**-0.5, [-1.0, 0.0, 4.0]),
    ("pow_tensor", lambda m, x: x ** m.tensor([0.5, -1.0, 2.0]), [-1.0, 0.0, 0.0]),
    ("number_pow", lambda m, x: 0.0**x, [-1.0, 0.0, 2.0]),
    ("atanh", lambda m, x: x.atanh(), [1.0, -1.0, 2.0]),
    ("acos", lambda m, x: x.acos(), [2.0, 1.0, -1.0]),
    ("asin", lambda m, x: x.asin(), [2.0, 1.0, -1.0]),
    ("acosh", lambda m, x: x.acosh(), [0.0, 1.0, 2.0]),
    ("fmod_number", lambda m, x: m.fmod(x, 0), [1.0, 0.0, -1.0]),
    ("fmod_tensor", lambda m, x: m.fmod(x, m.zeros(3)), [1.0, 0.0, -1.0]),
    ("remainder_number", lambda m, x: m.remainder(x, 0), [1.0, 0.0, -1.0]),
    ("remainder_tensor", lambda m, x: m.remainder(x, m.zeros(3)), [1.0, 0.0, -1.0]),
    ("sin", lambda m, x: m.sin(x), [INF, -INF, 0.0]),
    ("cos", lambda m, x: m.cos(x), [INF, -INF, 0.0]),
    ("tan", lambda m, x: m.tan(x), [INF, -INF, 0.0]),
    ("frac", lambda m, x: x.frac(), [INF, -INF, 1.5]),
    ("logit", lambda m, x: x.logit(), [0.0, 1.0, 0.5]),
    # (rows of -inf only, fully masked, give zeros by design: test_fully_masked_rows_are_quiet)
    ("softmax", lambda m, x: m.softmax(x, 1), [[INF, 1.0], [-INF, 1.0], [INF, INF]]),
    ("log_softmax", lambda m, x: m.log_softmax(x, 1), [[INF, 1.0], [-INF, 1.0], [INF, INF]]),
    ("logsumexp", lambda m, x: m.logsumexp(x, 1), [[INF, 1.0], [-INF, 1.0], [INF, INF]]),
    ("silu", lambda m, x: _f(m).silu(x), [INF, -INF, NAN, 1.0]),
    ("gelu", lambda m, x: _f(m).gelu(x), [INF, -INF, NAN, 1.0]),
    ("gelu_tanh", lambda m, x: _f(m).gelu(x, approximate="tanh"), [INF, -INF, NAN, 1.0]),
    ("mish", lambda m, x: _f(m).mish(x), [INF, -INF, NAN, 1.0]),
    ("softplus", lambda m, x: _f(m).softplus(x), [INF, -INF, NAN, 1.0]),
    ("logsigmoid", lambda m, x: _f(m).logsigmoid(x), [INF, -INF, NAN, 1.0]),
    ("softsign", lambda m, x: _f(m).softsign(x), [INF, -INF, NAN, 1.0]),
    ("hardswish", lambda m, x: _f(m).hardswish(x), [INF, -INF, NAN, 1.0]),
    ("prelu", lambda m, x: _f(m).prelu(x, m.tensor([0.25])), [INF, -INF, NAN, 1.0]),
    ("layer_norm", lambda m, x: _f(m).layer_norm(x, (2,)), [[INF, 1.0], [1.0, 2.0]]),
    ("rms_norm", lambda m, x: _f(m).rms_norm(x, (2,)), [[INF, 1.0], [1e30, 2.0]]),
    ("mean_of_nothing", lambda m, x: x.mean(), []),
    ("mean_of_empty_rows", lambda m, x: x.reshape(0, 3).mean(0), []),
]


# values compared, gradients not: torch has no derivative for floor_divide (tinyattn's is 0);
# torch's softsign gradient at ±inf is NaN (its composite formula), tinyattn's 1 / (1 + |x|)² = 0
NO_TORCH_GRAD = {"floor_divide", "softsign"}
# torch's float32 gelu takes the CPU's vector path, whose result at inf depends on the CPU (NaN
# with AVX-512, inf with AVX2): compare with its float64 path, the same on every CPU
TORCH_IN_FLOAT64 = {"gelu"}


def _run(m, fn, values, backward=True, float64=False):
    """(out, x.grad) as NumPy arrays, with g = 1 for every entry of the output (float64: run
    in float64, given back in the float32 the others are in)."""
    x = m.tensor(values, requires_grad=True)
    if float64:
        x = m.tensor(values, dtype=m.float64, requires_grad=True)
    out = fn(m, x)
    cast = (lambda a: a.astype(np.float32)) if float64 else (lambda a: a)
    if not backward:
        return cast(out.detach().numpy()), None
    out.backward(m.ones_like(out))
    return cast(out.detach().numpy()), cast(x.grad.numpy())


def _same(a, b):
    """Equal inf and NaN positions (inf with its sign) and, where finite, the same values to
    float32's last digit or so (transcendental functions may round differently)."""
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isposinf(a), np.isposinf(b))
    np.testing.assert_array_equal(np.isneginf(a), np.isneginf(b))
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("name, fn, values", CASES, ids=[c[0] for c in CASES])
def test_inf_and_nan_are_silent_and_as_torch(name, fn, values):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, grad = _run(ta, fn, values)
    assert not np.isfinite(out).all() or not np.isfinite(grad).all() or out.size == 0
    torch = pytest.importorskip("torch")
    t_out, t_grad = _run(torch, fn, values, backward=name not in NO_TORCH_GRAD,
                         float64=name in TORCH_IN_FLOAT64)
    assert out.dtype == t_out.dtype and out.shape == t_out.shape
    _same(out, t_out)
    if t_grad is not None:
        _same(grad, t_grad)


@pytest.mark.parametrize("fn", [lambda x: ta.softmax(x, 1), lambda x: ta.log_softmax(x, 1),
                                lambda x: ta.logsumexp(x, 1)],
                         ids=["softmax", "log_softmax", "logsumexp"])
def test_fully_masked_rows_are_quiet(fn):
    x = ta.tensor([[-INF, -INF], [INF, -INF]], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = fn(x)
        out.backward(ta.ones_like(out))


def test_log_gradient_at_zero_is_inf_quietly():
    x = ta.tensor([0.0, 1.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ta.log(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [np.inf, 1.0])


def test_sqrt_gradient_at_zero_is_inf_quietly():
    x = ta.tensor([0.0, 4.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.sqrt().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [np.inf, 0.25])


def test_float16_division_by_zero_is_quiet():
    x = ta.tensor([1.0, 0.0, -1.0], dtype=ta.float16, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = x / 0
        out.sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), [np.inf, np.nan, -np.inf])


def test_numpy_error_state_is_left_alone():
    """Only inside the ops: the user's own NumPy code still warns after them (no np.seterr)."""
    before = np.geterr()
    ta.log(ta.zeros(2)) / 0
    assert np.geterr() == before
    with pytest.warns(RuntimeWarning):
        np.log(np.zeros(2, np.float32))


VAR_CASES = [
    ("var", lambda m, x: x.var()),
    ("std", lambda m, x: x.std()),
    ("var_mean", lambda m, x: m.var_mean(x)[0]),
    ("std_mean", lambda m, x: m.std_mean(x)[0]),
    ("var_dim", lambda m, x: x.var(0)),
]


@pytest.mark.parametrize("name, fn", VAR_CASES, ids=[c[0] for c in VAR_CASES])
def test_no_degrees_of_freedom_warns_as_torch(name, fn):
    """var (and std) of one value: NaN, with torch's UserWarning and no RuntimeWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.warns(UserWarning, match="degrees of freedom"):
            out, grad = _run(ta, fn, [1.0])
    torch = pytest.importorskip("torch")
    with pytest.warns(UserWarning, match="degrees of freedom"):
        t_out, t_grad = _run(torch, fn, [1.0])
    np.testing.assert_array_equal(out, t_out)
    np.testing.assert_array_equal(grad, t_grad)


def test_var_with_degrees_of_freedom_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ta.tensor([1.0, 2.0]).var()
        ta.tensor([1.0]).var(correction=0)
