"""Gradients at the edges of the float range, compared with PyTorch in float64.

- Masked VJPs: where an op's derivative is zero by selection (relu below 0, clamp outside its
  bounds, the loser of maximum, the entries of max() that are not the max), the gradient is
  exactly 0 for any incoming gradient, inf and NaN included, as torch selects with `where`
  (g * mask would make inf * 0 = NaN).
- +inf in log-sum-exp-like ops: logsumexp is inf (not inf - inf = NaN), logaddexp's gradient
  is 1 to the infinite side; softmax, log_softmax, cross_entropy and logcumsumexp as torch.
- NaN in max/min: the gradient goes to the NaN entries, as torch (amax/amin: NaN to the
  whole slice, as torch's).
- Empty tensors: logsumexp over an empty dim is -inf, softmax along one is empty, no error.

A RuntimeWarning is an error here (as in pyproject.toml): none may leak from NumPy.
"""

import itertools
import math

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

INF, NAN = math.inf, math.nan


def _run_ta(fn, inputs, grad_out):
    xs = [ta.tensor(np.asarray(v, dtype=np.float64), dtype=ta.float64, requires_grad=True)
          for v in inputs]
    out = fn(*xs)
    g = np.broadcast_to(np.asarray(1.0 if grad_out is None else grad_out, np.float64), out.shape)
    out.backward(ta.tensor(g.copy(), dtype=ta.float64))
    return out.detach().numpy(), [None if x.grad is None else x.grad.numpy() for x in xs]


def _run_torch(fn, inputs, grad_out):
    xs = [torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in inputs]
    out = fn(*xs)
    g = np.broadcast_to(np.asarray(1.0 if grad_out is None else grad_out, np.float64), out.shape)
    out.backward(torch.tensor(g.copy()))
    return out.detach().numpy(), [None if x.grad is None else x.grad.numpy() for x in xs]


def _same(got, want, what, rtol):
    want = np.asarray(want, dtype=np.float64)
    got = np.zeros_like(want) if got is None else np.asarray(got)  # (no gradient: zeros)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, torch {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-300, equal_nan=True, err_msg=what)


def method(name, *args, **kwargs):
    """t -> t.name(*args, **kwargs), for tinyattn and torch alike."""
    return lambda t, *others: getattr(t, name)(*others, *args, **kwargs)


def check(fn_ta, fn_torch, inputs, grad_out=None, rtol=1e-10):
    """Forward values and every input's gradient equal torch's (NaN where torch's is NaN)."""
    out, grads = _run_ta(fn_ta, inputs, grad_out)
    want_out, want_grads = _run_torch(fn_torch, inputs, grad_out)
    _same(out, want_out, "value", rtol)
    for i, (got, want) in enumerate(zip(grads, want_grads, strict=True)):
        want = np.zeros(np.shape(inputs[i])) if want is None else want
        _same(got, want, f"grad of input {i}", rtol)


# ---- 1. masked VJPs: exactly 0 where masked out, for g = inf, -inf and NaN too ----------------

X = [-5.0, -3.0, -1.0, 0.0, 0.5, 1.0, 3.0, 4.0, 6.0, 10.0, NAN]

UNARY = {
    "relu": (lambda t: t.relu(), torch.relu),
    "F.relu": (F.relu, TF.relu),
    "relu6": (F.relu6, TF.relu6),
    "hardtanh": (F.hardtanh, TF.hardtanh),
    "hardtanh(0.5, 4)": (lambda t: F.hardtanh(t, 0.5, 4.0), lambda t: TF.hardtanh(t, 0.5, 4.0)),
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid),
    "hardswish": (F.hardswish, TF.hardswish),
    "leaky_relu": (F.leaky_relu, TF.leaky_relu),
    "leaky_relu(0.2)": (lambda t: F.leaky_relu(t, 0.2), lambda t: TF.leaky_relu(t, 0.2)),
    "clamp(min)": (lambda t: t.clamp(min=0.0), lambda t: t.clamp(min=0.0)),
    "clamp(max)": (lambda t: t.clamp(max=1.0), lambda t: t.clamp(max=1.0)),
    "clamp(min, max)": (lambda t: t.clamp(-1.0, 3.0), lambda t: t.clamp(-1.0, 3.0)),
    "clip": (lambda t: t.clip(0.0, 4.0), lambda t: t.clip(0.0, 4.0)),
    "clamp_min": (lambda t: t.clamp_min(0.5), lambda t: t.clamp_min(0.5)),
    "clamp_max": (lambda t: t.clamp_max(0.5), lambda t: t.clamp_max(0.5)),
    "ta.clamp": (lambda t: ta.clamp(t, 0.0, 1.0), lambda t: torch.clamp(t, 0.0, 1.0)),
}

REDUCED = {  # to one number, of X without its NaN (max and min with NaN: see below)
    "max()": (lambda t: t.max(), lambda t: t.max()),
    "min()": (lambda t: t.min(), lambda t: t.min()),
    "max() ties": (lambda t: t.clamp(max=4.0).max(), lambda t: t.clamp(max=4.0).max()),
    "min() ties": (lambda t: t.clamp(min=-1.0).min(), lambda t: t.clamp(min=-1.0).min()),
}

G_VALUES = [INF, -INF, NAN, 1.0]


@pytest.mark.parametrize("g", G_VALUES, ids=["inf", "-inf", "nan", "one"])
@pytest.mark.parametrize("name", list(UNARY))
def test_masked_unary_vjp_gives_zero_for_any_g(name, g):
    fn_ta, fn_torch = UNARY[name]
    # (torch's hardsigmoid multiplies by 1/6 rounded to float32, in float64 too)
    check(fn_ta, fn_torch, [X], np.full(len(X), g), rtol=1e-7 if name == "hardsigmoid" else 1e-10)


@pytest.mark.parametrize("g", G_VALUES, ids=["inf", "-inf", "nan", "one"])
@pytest.mark.parametrize("name", list(REDUCED))
def test_max_min_of_all_give_zero_for_any_g(name, g):
    fn_ta, fn_torch = REDUCED[name]
    check(fn_ta, fn_torch, [X[:-1]], g)


def test_the_reported_example_clamp_sqrt():
    # sqrt's gradient at the clamped 0 is inf; clamp must not turn inf * 0 into NaN
    check(lambda x: x.clamp(min=0).sqrt().sum(), lambda x: x.clamp(min=0).sqrt().sum(),
          [[-1.0, 4.0]])
    check(lambda x: x.relu().sqrt().sum(), lambda x: x.relu().sqrt().sum(), [[-1.0, 4.0]])


XB = [1.0, 2.0, 3.0, NAN, NAN, 0.5, -INF, INF]
YB = [2.0, 2.0, 1.0, 1.0, NAN, INF, -INF, 5.0]

BINARY = {
    "maximum": (lambda x, y: x.maximum(y), torch.maximum),
    "minimum": (lambda x, y: x.minimum(y), torch.minimum),
    "max(x, y)": (lambda x, y: ta.max(x, y), torch.max),
    "clamp(x, lo)": (lambda x, lo: x.clamp(min=lo), lambda x, lo: x.clamp(min=lo)),
    "clamp(x, None, hi)": (lambda x, hi: x.clamp(max=hi), lambda x, hi: x.clamp(max=hi)),
}


@pytest.mark.parametrize("g", G_VALUES, ids=["inf", "-inf", "nan", "one"])
@pytest.mark.parametrize("name", list(BINARY))
def test_masked_binary_vjp_gives_zero_for_any_g(name, g):
    fn_ta, fn_torch = BINARY[name]
    check(fn_ta, fn_torch, [XB, YB], np.full(len(XB), g))


@pytest.mark.parametrize("g", G_VALUES, ids=["inf", "-inf", "nan", "one"])
def test_fmax_fmin_vjp_gives_zero_for_any_g(g):
    x, y = [1.0, 3.0, NAN, 1.0, -INF], [2.0, 1.0, 1.0, NAN, 0.0]  # (no ties, no NaN pairs)
    for fn_ta, fn_torch in ((lambda a, b: a.fmax(b), torch.fmax),
                            (lambda a, b: a.fmin(b), torch.fmin)):
        check(fn_ta, fn_torch, [x, y], np.full(len(x), g))


@pytest.mark.parametrize("g", G_VALUES, ids=["inf", "-inf", "nan", "one"])
def test_clamp_with_tensor_bounds_gives_zero_for_any_g(g):
    x = [-1.0, 0.5, 3.0, 0.2, 0.0, 1.0, NAN]
    lo = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    hi = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]  # entry 3: min > max, max wins (torch)
    check(lambda a, b, c: a.clamp(b, c), lambda a, b, c: a.clamp(b, c), [x, lo, hi],
          np.full(len(x), g))


@pytest.mark.parametrize("g", G_VALUES, ids=["inf", "-inf", "nan", "one"])
def test_pow_with_zero_tensor_exponent_gives_zero_for_any_g(g):
    # d(x^0)/dx = 0 by selection in torch (where(y == 0, 0, ...)): no inf * 0
    check(lambda x, y: x**y, lambda x, y: x**y, [[2.0, 3.0, 0.5], [0.0, 1.0, 2.0]],
          np.full(3, g))


@pytest.mark.parametrize("g", G_VALUES, ids=["inf", "-inf", "nan", "one"])
def test_max_min_over_a_dim_give_zero_for_any_g(g):
    x = [[1.0, 4.0, -2.0], [0.0, -1.0, 7.0], [NAN, 2.0, 1.0]]  # no ties: one winner a row
    for fn_ta, fn_torch in (
            (lambda t: t.max(dim=1).values, lambda t: t.max(dim=1).values),
            (lambda t: t.min(dim=0).values, lambda t: t.min(dim=0).values),
            # amax and amin multiply by the mask, as torch's (g / ties * [x == out]): NaN to
            # the others for g = ±inf or NaN, and over the row holding a NaN (no winner: 0 / 0)
            (lambda t: t.amax(dim=1), lambda t: t.amax(dim=1)),
            (lambda t: t.amin(dim=0, keepdim=True), lambda t: t.amin(dim=0, keepdim=True)),
            (lambda t: t.amax(dim=(0, 1)), lambda t: t.amax(dim=(0, 1))),
            (lambda t: t.max(), lambda t: t.max())):  # (max() selects: 0 to the others)
        out_shape = np.shape(_run_torch(fn_torch, [x], None)[0])
        check(fn_ta, fn_torch, [x], np.full(out_shape, g))


def test_amax_ties_share_the_gradient_as_torch():
    x = [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]
    check(lambda t: t.amax(dim=1), lambda t: t.amax(dim=1), [x], [1.0, 6.0])
    check(lambda t: t.amin(dim=0), lambda t: t.amin(dim=0), [x], [1.0, 2.0, 3.0])


# ---- 4. NaN in max and min: the gradient goes to the NaN (amax/amin: NaN throughout) ---------


@pytest.mark.parametrize("x", [[NAN, 1.0], [1.0, NAN], [NAN, 1.0, NAN], [[3.0, NAN], [NAN, 1.0]],
                               [INF, NAN, -INF]])
def test_max_min_with_nan_send_the_gradient_to_the_nan(x):
    for name in ("max", "min", "amax", "amin"):  # (amax/amin: NaN throughout, as torch's)
        check(method(name), method(name), [x])


def test_max_min_over_a_dim_with_nan():
    x = [[1.0, NAN, 3.0], [2.0, 5.0, 5.0], [-1.0, -1.0, NAN]]
    for name, dim in itertools.product(("max", "min"), (0, 1)):
        values = method(name, dim=dim)
        check(lambda t, values=values: values(t).values, lambda t, values=values: values(t).values,
              [x], [1.0, 2.0, 3.0])
    # amax/amin over a row with one NaN: NaN to the whole row, as torch's (a 0/0 of its tie
    # count), where max(dim) sends all of g to the NaN
    y = [[1.0, NAN, 3.0], [2.0, 5.0, 4.0]]
    check(lambda t: t.amax(dim=1), lambda t: t.amax(dim=1), [y], [1.0, 2.0])
    check(lambda t: t.amin(dim=1), lambda t: t.amin(dim=1), [y], [1.0, 2.0])


# ---- 2. +inf in logsumexp, softmax, log_softmax, cross_entropy, logcumsumexp -------------------

ROWS_INF = [[INF, 1.0, 0.0], [INF, INF, 2.0], [INF, -INF, 1.0], [800.0, INF, 1.0],
            [-INF, 1.0, 2.0], [INF, NAN, 1.0], [1.0, 2.0, 3.0], [1e4, 1e4 - 1.0, -1e4]]


def test_logsumexp_with_inf():
    for dim in (1, -1):
        check(method("logsumexp", dim), method("logsumexp", dim), [ROWS_INF],
              np.arange(1.0, len(ROWS_INF) + 1))
    check(lambda t: t.logsumexp(0, keepdim=True), lambda t: t.logsumexp(0, keepdim=True),
          [[[INF, 1.0], [2.0, 3.0]]])
    check(lambda t: t.logsumexp((0, 1)), lambda t: t.logsumexp((0, 1)), [[[INF, 1.0], [2.0, 3.0]]])
    check(lambda t: ta.logsumexp(t, 0), lambda t: torch.logsumexp(t, 0), [[INF, 5.0]])


G_ROWS = np.arange(1.0, 4.0) * np.ones((len(ROWS_INF), 1))


def test_softmax_and_log_softmax_with_inf():
    # a row holding +inf is NaN, as torch (inf - inf), without NumPy's warning
    check(method("softmax", 1), method("softmax", 1), [ROWS_INF], G_ROWS)
    check(method("log_softmax", 1), method("log_softmax", 1), [ROWS_INF], G_ROWS)
    check(lambda t: F.softmax(t.T, 0), lambda t: TF.softmax(t.T, 0), [ROWS_INF], G_ROWS.T)


def test_logcumsumexp_with_inf():
    # the entries before a +inf (800: e^800 overflows) keep their values, as torch
    check(method("logcumsumexp", 1), method("logcumsumexp", 1), [ROWS_INF], G_ROWS)
    rows = [[INF, 1.0, 0.0], [1.0, INF, 2.0], [1.0, 2.0, INF], [1.0, 2.0, 3.0], [INF, -INF, 5.0]]
    check(method("logcumsumexp", 1), method("logcumsumexp", 1), [rows], G_ROWS[:5])
    check(method("logcumsumexp", 0), method("logcumsumexp", 0), [rows], G_ROWS[:5])


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_cross_entropy_with_inf(reduction):
    logits = [[INF, 1.0, 0.0], [1.0, 2.0, 3.0], [-INF, 1.0, 2.0], [-INF, 1.0, 2.0]]
    target = [0, 2, 0, 1]
    check(lambda t: F.cross_entropy(t, ta.tensor(target), reduction=reduction),
          lambda t: TF.cross_entropy(t, torch.tensor(target), reduction=reduction), [logits])


# ---- 3. logaddexp and logaddexp2 at infinities -------------------------------------------------

PAIRS = [(INF, 1.0), (1.0, INF), (INF, INF), (-INF, -INF), (INF, -INF), (-INF, INF),
         (-INF, 1.0), (1.0, -INF), (40.0, 0.0), (-1000.0, 1000.0), (NAN, 1.0), (0.5, 0.25)]


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_at_infinities(name):
    x, y = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    check(method(name), method(name), [x, y], np.arange(1.0, len(PAIRS) + 1))
    # a constant side (a Python number for logaddexp; logaddexp2 makes one a float32 tensor)
    for c in (INF, -INF, 1.0):
        other = c if name == "logaddexp" else ta.tensor(c, dtype=ta.float64)
        check(method(name, other), method(name, torch.tensor(c, dtype=torch.float64)),
              [[1.0, INF, -INF]])


# ---- 5. empty tensors --------------------------------------------------------------------------

EMPTY = [((2, 0), 1), ((2, 0), 0), ((0,), 0), ((0, 3), 0), ((0, 3), 1), ((2, 0, 3), 1)]


@pytest.mark.parametrize("shape, dim", EMPTY)
def test_empty_logsumexp_softmax_logcumsumexp(shape, dim):
    x = np.zeros(shape)
    for name in ("logsumexp", "softmax", "log_softmax", "logcumsumexp"):
        check(method(name, dim), method(name, dim), [x])
    check(method("logsumexp", dim, keepdim=True), method("logsumexp", dim, keepdim=True), [x])
    check(lambda t: F.softmax(t, dim), lambda t: TF.softmax(t, dim), [x])
    check(lambda t: F.log_softmax(t, dim), lambda t: TF.log_softmax(t, dim), [x])


def test_empty_logsumexp_over_every_dim():
    check(lambda t: t.logsumexp((0, 1)), lambda t: t.logsumexp((0, 1)), [np.zeros((2, 0))])


# ---- 6. 0/0 and sgn(NaN) in VJPs, and lerp's two forms: torch's values -------------------------


def test_atan2_at_the_origin_has_zero_gradients_as_torch():
    # x² + y² = 0 (or underflowing to 0): torch takes 1 / (x² + y²) as 0 there, not 0 * inf;
    # a subnormal x² + y² (1e-160, 0) still gives inf and NaN, as torch's
    y = [0.0, -0.0, 0.0, 1e-200, 1.0, 1e-160, 0.0, NAN, 2.0]
    x = [0.0, 0.0, -0.0, 1e-200, 1.0, 0.0, 1e-160, 1.0, -3.0]
    check(method("atan2"), torch.atan2, [y, x], np.arange(1.0, 10.0))
    check(lambda a, b: ta.arctan2(a, b), torch.atan2, [[0.0], [0.0]], [INF])


def test_hypot_at_the_origin_is_nan_as_torch():
    # (torch's hypot gradient is x / out: 0 / 0 = NaN at the origin; kept, and quiet)
    check(method("hypot"), torch.hypot, [[0.0, 3.0, 0.0], [0.0, 4.0, -2.0]])


def test_copysign_at_infinities_has_torchs_gradient():
    # torch's gradient for x is g * out / x, 0 where x is 0: NaN at x = ±inf (inf / inf) and at
    # x = NaN, ±1 elsewhere (|x| / x is exact); tinyattn gave ±1 at the infinities. None for y.
    x = [INF, -INF, 2.0, -2.0, 0.0, -0.0, 3.0, INF, 1.0, NAN, 5.0, -INF]
    y = [1.0, 1.0, -INF, INF, -1.0, 1.0, 0.0, -0.0, -0.0, 1.0, NAN, -NAN]
    check(method("copysign"), torch.copysign, [x, y], np.arange(1.0, 13.0))
    check(method("copysign", -3.0), method("copysign", -3.0), [[INF, -INF, 2.0, 0.0, NAN]])
    check(lambda a: a.clone().copysign_(-3.0), lambda a: a.clone().copysign_(-3.0),
          [[INF, -INF, 2.0, 0.0, NAN]])


def test_abs_l1_and_norm1_give_a_nan_entry_zero_gradient_as_torch():
    # torch's sgn(NaN) = 0: |x|'s gradient there is 0, not NaN
    x = [NAN, 0.0, -0.0, -2.0, INF, -INF, 3.0]
    check(method("abs"), torch.abs, [x], np.arange(1.0, 8.0))
    check(lambda t: ta.abs(t).sum(), lambda t: torch.abs(t).sum(), [[[NAN, 1.0], [-1.0, 2.0]]])
    check(lambda t: F.l1_loss(t, ta.zeros(3, dtype=ta.float64)),
          lambda t: TF.l1_loss(t, torch.zeros(3, dtype=torch.float64)), [[NAN, -1.0, 2.0]])
    check(method("norm", 1), method("norm", 1), [[NAN, 0.0, -2.0]])
    check(method("norm", 1, dim=1), method("norm", 1, dim=1), [[[NAN, -1.0], [2.0, -3.0]]])


@pytest.mark.parametrize("p", [INF, -INF])
def test_inf_norms_with_nan_give_zero_gradients_as_torch(p):
    # torch counts the NaN entry among the maxima, and its sgn(NaN) = 0 gives it nothing
    for x in ([1.0, NAN], [3.0, NAN, -3.0], [NAN, NAN]):
        check(method("norm", p), method("norm", p), [x])
    check(method("norm", p, dim=1), method("norm", p, dim=1), [[[1.0, NAN], [2.0, -3.0]]],
          [1.0, 2.0])
    check(method("norm", p), method("norm", p), [[2.0, -2.0, 1.0]])  # (ties: unchanged)


NORM_INPUTS = [[3.0, 0.0, 1.0], [0.0, 0.0], [0.0, -0.0, -2.0], [INF, 1.0], [3.0, -4.0, 1.0],
               [[3.0, 0.0], [0.0, 0.0]]]


@pytest.mark.parametrize("p", [0.5, 0.3, -1.0, -2.0, -0.5, 1.5, 3.0])
def test_norm_with_zero_and_infinite_entries_matches_torch(p):
    # p < 1: |x|^(p-1) is inf at x = 0, where torch's gradient is 0 (and all of it is 0 where
    # the norm is 0: any zero entry for p < 0, an all-zero input for any p)
    for x in NORM_INPUTS:
        check(method("norm", p), method("norm", p), [x])
    check(method("norm", p, dim=1), method("norm", p, dim=1), [NORM_INPUTS[-1]], [1.0, 2.0])
    check(lambda t: ta.norm(t, p, dim=0, keepdim=True),
          lambda t: torch.norm(t, p, dim=0, keepdim=True), [NORM_INPUTS[-1]], [[1.0, 2.0]])


def test_logit_at_0_and_1_has_torchs_infinite_gradient():
    x = [0.0, 1.0, 0.5, -0.1, 1.1, NAN, 0.25, 1e-300]
    check(lambda t: ta.logit(t), torch.logit, [x])
    # with eps: clamped, so flat (gradient 0) outside [eps, 1 - eps], finite at its ends
    check(lambda t: ta.logit(t, eps=0.1), lambda t: torch.logit(t, eps=0.1),
          [[0.0, 1.0, 0.5, 0.05, 0.1, 0.9, 0.95, -1.0]])
    check(lambda t: ta.logit(t, 0.25), lambda t: torch.logit(t, 0.25), [[0.0, 0.3, 1.0]])


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_give_a_tie_to_self_as_torch(name):
    # torch's fmax sends g to self where self >= other (or other is NaN), not half each
    x = [1.0, 2.0, NAN, 1.0, NAN, 3.0, -0.0, INF]
    y = [1.0, 1.0, NAN, NAN, 2.0, 4.0, 0.0, INF]
    check(method(name), getattr(torch, name), [x, y], np.arange(1.0, 9.0))
    check(lambda a, b: getattr(ta, name)(a, b), getattr(torch, name), [[[1.0, 2.0]], [5.0, 2.0]])


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_still_split_a_tie_as_torch(name):
    check(method(name), getattr(torch, name), [[1.0, 2.0, 3.0], [1.0, 1.0, 3.0]])


LERP_START = [1e16, INF, 1.0, 3.0, 0.1, -2.0, 1.0, 1.0, -INF]
LERP_END = [1.0, 1.0, INF, 7.0, 0.7, 5.0, 2.0, 1e16, 2.0]


@pytest.mark.parametrize("w", [0.0, 0.3, 0.4999, 0.5, 0.75, 1.0, 1.5, -0.6])
def test_lerp_takes_torchs_form_for_each_weight(w):
    # |w| < 0.5: start + w (end - start); else end - (end - start)(1 - w): lerp(1e16, 1, 1) is
    # 1 (it was 0), and the infinities come out as torch's, without NumPy's warnings
    check(method("lerp", w), lambda s, e: torch.lerp(s, e, w), [LERP_START, LERP_END])


def test_lerp_with_a_weight_tensor_matches_torch():
    w = [1.0, 0.5, 0.75, 1.0, 0.9, 0.3, -0.6, 0.2, 0.5]
    check(lambda s, e, t: s.lerp(e, t), torch.lerp, [LERP_START, LERP_END, w],
          np.arange(1.0, 10.0))
    check(lambda s, e, t: ta.lerp(s, e, t), torch.lerp, [[[0.0, 1e16]], [1.0, 1.0], [[1.0], [0.2]]])
    # in place, as its out-of-place twin
    a, b = ta.tensor([1e16, 3.0]), ta.tensor([1.0, 7.0])
    assert a.lerp_(b, 1.0).tolist() == [1.0, 7.0]
    s = ta.tensor([1e16, 3.0], dtype=ta.float64)
    s.lerp_(ta.tensor([1.0, 7.0], dtype=ta.float64), ta.tensor([1.0, 0.75], dtype=ta.float64))
    assert s.tolist() == torch.lerp(torch.tensor([1e16, 3.0], dtype=torch.float64),
                                    torch.tensor([1.0, 7.0], dtype=torch.float64),
                                    torch.tensor([1.0, 0.75], dtype=torch.float64)).tolist()


@pytest.mark.parametrize("name, make", [
    ("addmm", lambda lib, c: lib.addmm(c, lib.ones(2, 3, dtype=lib.float64),
                                       lib.ones(3, 2, dtype=lib.float64), beta=0)),
    ("addmv", lambda lib, c: lib.addmv(c[0], lib.ones(2, 3, dtype=lib.float64),
                                       lib.ones(3, dtype=lib.float64), beta=0.0)),
    ("addr", lambda lib, c: lib.addr(c, lib.ones(2, dtype=lib.float64),
                                     lib.ones(2, dtype=lib.float64), beta=0, alpha=2)),
    ("baddbmm", lambda lib, c: lib.baddbmm(c, lib.ones(1, 2, 3, dtype=lib.float64),
                                           lib.ones(1, 3, 2, dtype=lib.float64), beta=0)),
    ("addbmm", lambda lib, c: lib.addbmm(c, lib.ones(4, 2, 3, dtype=lib.float64),
                                         lib.ones(4, 3, 2, dtype=lib.float64), beta=0)),
])
def test_plus_product_with_beta_0_keeps_self_in_the_graph_as_torch(name, make):
    # beta = 0: self's values are ignored (NaN, inf), but it still requires grad through the
    # result and gets a zero gradient (torch's), not None and a result off the graph
    got = {}
    for lib in (ta, torch):
        c = lib.tensor([[NAN, INF], [1.0, -INF]], dtype=lib.float64, requires_grad=True)
        out = make(lib, c)
        assert out.requires_grad, (name, lib.__name__)
        out.backward(lib.ones(out.shape, dtype=lib.float64) * 2)
        assert c.grad is not None, (name, lib.__name__)
        got[lib] = (out.detach().numpy(), c.grad.numpy())
    for ours, theirs in zip(got[ta], got[torch], strict=True):
        _same(ours, theirs, name, 1e-12)
    # beta = 0 with no gradient wanted: the product alone (nothing added)
    with ta.no_grad():
        c = ta.tensor([[NAN, INF], [1.0, -INF]], dtype=ta.float64, requires_grad=True)
        np.testing.assert_array_equal(make(ta, c).numpy(), got[ta][0])
