"""float16 reductions are accumulated in float32, as torch does, and given back in float16.

NumPy adds float16 along any dim but the last one row at a time in float16, where 2048 + 1
rounds to 2048: a sum over 4096 rows of ones came out 2048. Each case below runs on a tall
(4096, 2) or (8192, 3) float16 input, forward and backward, against torch's own float16 (which
accumulates in float32). Also: GELU and erf in float16 at large |x|, and Adam's step in the wider
of the weight's and the moments' dtypes.
"""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn.backends.numpy_backend import NumpyBackend


def _tall(shape=(4096, 2), low=0.5, high=1.5, seed=0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float16)


def _run(lib, make, x, w, torch):
    """make's value on x and the gradient of Σ out * w with respect to x (in x's dtype)."""
    t = (torch.tensor(x) if lib is torch else ta.tensor(x)).requires_grad_(True)
    out = make(lib, t)
    g = torch.tensor(w) if lib is torch else ta.tensor(w)
    out.backward(g)
    return out.detach().numpy(), t.grad.numpy()


def _f(lib, torch):
    return torch.nn.functional if lib is torch else F


def _check(torch, make, x, w, name=""):
    """Ours in float16 against torch in float64 on the same values, as close as torch's own
    float16 (which sums in float32) comes, give or take a float16 rounding of the result."""
    ours, theirs = _run(ta, make, x, w, torch), _run(torch, make, x, w, torch)
    exact = _run(torch, make, x.astype(np.float64), w.astype(np.float64), torch)
    for got, half, want, what in zip(ours, theirs, exact, ("value", "gradient"), strict=True):
        assert got.dtype == np.float16, (name, what, got.dtype)
        scale = float(np.abs(want).max())
        torch_err = float(np.abs(half - want).max())
        err = np.abs(got - want)
        assert err.max() <= 2 * torch_err + 1e-3 * scale, (name, what, err.max(), torch_err)


CASES = [
    ("sum dim 0", lambda lib, x: x.sum(0)),
    ("sum dims (0, 2)", lambda lib, x: x.reshape(1024, 4, 2).sum((0, 2))),
    ("sum all, transposed", lambda lib, x: x.T.sum()),
    ("sum last dims", lambda lib, x: x.reshape(2, 2048, 2).sum((1, 2))),
    ("sum last dim of a transpose", lambda lib, x: x.T.sum(1)),  # Backend.row_sum
    ("mean dim 0", lambda lib, x: x.mean(0)),
    ("softmax dim 0", lambda lib, x: x.softmax(0)),
    ("log_softmax dim 0", lambda lib, x: x.log_softmax(0)),
    ("F.softmax dim 0", lambda lib, x: (F if lib is ta else lib.nn.functional).softmax(x, 0)),
    ("F.log_softmax dim 0",
     lambda lib, x: (F if lib is ta else lib.nn.functional).log_softmax(x, 0)),
    ("logsumexp dim 0", lambda lib, x: x.logsumexp(0)),
    ("cumsum dim 0", lambda lib, x: x.cumsum(0)),
    ("logcumsumexp dim 0", lambda lib, x: x.logcumsumexp(0)),
    ("cumprod dim 0", lambda lib, x: (x / 1024 + 1).cumprod(0)),
    ("broadcast bias", lambda lib, x: x[:, :1] * 0 + x[:1]),  # gradients summed by sum_to
    ("max ties", lambda lib, x: x.amax(0)),  # (on ones: 4096 ties share the gradient)
    ("min ties", lambda lib, x: x.amin(0)),
    ("inf-norm ties", lambda lib, x: x.norm(p=float("inf"), dim=0)),
]


@pytest.mark.parametrize("name, make", CASES, ids=[c[0] for c in CASES])
def test_float16_reductions_accumulate_in_float32_as_torch(name, make):
    torch = pytest.importorskip("torch")
    x = _tall(low=-1, high=1) if "softmax" in name or "cumprod" in name else _tall()
    if "ties" in name:
        x = np.ones_like(x)
    with torch.no_grad():
        shape = make(torch, torch.tensor(x)).shape
    _check(torch, make, x, _tall(shape, seed=1), name)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_float16_cross_entropy_of_8192_rows_as_torch(reduction):
    """The loss summed over 8192 rows (a third of them ignored: the mean counts the others),
    and the gradient divided by that count."""
    torch = pytest.importorskip("torch")
    logits = _tall((8192, 3), low=-2, high=2)
    target = np.random.default_rng(3).integers(0, 3, 8192)
    target[::3] = -100
    make = lambda lib, v: _f(lib, torch).cross_entropy(  # noqa: E731
        v, (torch.tensor if lib is torch else ta.tensor)(target), reduction=reduction)
    _check(torch, make, logits, np.array(1, np.float16), reduction)


def test_float16_linear_bias_gradient_over_8192_rows():
    """linear's VJP sums the bias gradient over every row: 8192 rows of ones give 8192."""
    torch = pytest.importorskip("torch")
    x = _tall((8192, 4), seed=4)
    w, b = _tall((3, 4), seed=5), _tall((3,), seed=6)
    grads = []
    for lib in (ta, torch):
        params = [(torch.tensor if lib is torch else ta.tensor)(a).requires_grad_(True)
                  for a in (x, w, b)]
        out = _f(lib, torch).linear(*params)
        out.backward((torch.ones_like if lib is torch else ta.ones_like)(out))
        grads.append([p.grad.numpy().astype(np.float32) for p in params])
    np.testing.assert_array_equal(grads[0][2], [8192, 8192, 8192])
    for got, want in zip(*grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=4e-3, atol=float(np.abs(want).max()) * 1e-3)


def test_float16_bias_gradient_of_a_broadcast_add():
    """x + b with b (2,) and x (4096, 2): autograd's sum_to sums b's gradient over 4096 rows."""
    b = ta.tensor(np.zeros(2, np.float16), requires_grad=True)
    (ta.tensor(np.zeros((4096, 2), np.float16)) + b).sum().backward()
    assert b.grad.dtype == ta.float16
    np.testing.assert_array_equal(b.grad.numpy(), [4096, 4096])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_float16_gelu_and_erf_at_large_values_as_torch(approximate):
    """x² overflows float16 past |x| = 256: the tanh form's backward gave 0 · inf = NaN and both
    forms warned of overflow. Computed in float32 (as torch), they match torch's float16."""
    torch = pytest.importorskip("torch")
    x = np.array([-65504, -1000, -300, -5, -0.5, 0, 0.5, 3, 300, 1000, 65504], np.float16)
    make = lambda lib, v: _f(lib, torch).gelu(v, approximate=approximate)  # noqa: E731
    w = np.ones_like(x)
    (out, g), (tout, tg) = _run(ta, make, x, w, torch), _run(torch, make, x, w, torch)
    assert out.dtype == np.float16 and g.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float32), tout.astype(np.float32), rtol=2e-3,
                               atol=1e-3)
    np.testing.assert_allclose(g.astype(np.float32), tg.astype(np.float32), rtol=3e-3,
                               atol=2e-3)
    np.testing.assert_array_equal(g[[0, 1, 2, -3, -2, -1]], [0, 0, 0, 1, 1, 1])
    got = ta.tensor(x).erf().numpy()
    np.testing.assert_allclose(got.astype(np.float32),
                               torch.tensor(x).erf().numpy().astype(np.float32), atol=1e-3)


def _adam(p, m, v, v_max=None, lr=1e-10, step=1):
    g = np.full(p.shape, 0.5, p.dtype)
    NumpyBackend().adam_update(p, g, m, v, lr=lr, beta1=0.9, beta2=0.999, eps=1e-8,
                               weight_decay=0.0, step=step, decoupled=False, v_max=v_max)


@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_steps_float64_weights_in_float64_with_float32_moments(amsgrad):
    """Moments made before model.double() stay float32: the step is still taken in float64
    (the wider dtype), not rounded to float32, where 1 - 1e-10 is 1."""
    p = np.ones(4)
    m, v = np.zeros(4, np.float32), np.zeros(4, np.float32)
    v_max = np.zeros(4, np.float32) if amsgrad else None
    _adam(p, m, v, v_max)
    assert p.dtype == np.float64 and m.dtype == v.dtype == np.float32
    np.testing.assert_allclose(1 - p, 1e-10, rtol=1e-6)  # m̂ / √v̂ = 1: the step is lr
    np.testing.assert_allclose(m, 0.05, rtol=1e-6)
    np.testing.assert_allclose(v, 0.00025, rtol=1e-6)
    if amsgrad:
        np.testing.assert_array_equal(v_max, v)


def test_adam_steps_float16_weights_in_float32_with_float32_moments():
    """float16 weights with float32 moments: the step in float32, rounded to float16 once."""
    p = np.ones(4, np.float16)
    m, v = np.zeros(4, np.float32), np.zeros(4, np.float32)
    _adam(p, m, v, lr=1e-3)
    assert p.dtype == np.float16 and m.dtype == np.float32
    np.testing.assert_array_equal(p, np.float16(np.float32(1) - np.float32(1e-3)))
    np.testing.assert_allclose(m, 0.05, rtol=1e-6)


# ---- float32 scans are carried in float64, as torch's CPU scans ------------------------------


@pytest.mark.parametrize("name, make", [
    ("cumsum", lambda lib, x: x.cumsum(0)),
    ("cumsum dim 1", lambda lib, x: x.reshape(2, -1).cumsum(1)),
    ("cumsum dtype", lambda lib, x: x.cumsum(0, dtype=lib.float32)),
    ("cumprod", lambda lib, x: (x * 0.0001 + 1).cumprod(0)),
    ("logcumsumexp", lambda lib, x: (x * 10).logcumsumexp(0)),
])
def test_float32_scans_carry_float64_as_torch(name, make):
    # a million float32 0.1s summed one after another in float32 drift to 100958 (torch:
    # 100000); the gradient (a reverse running sum) drifts the same way
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.uniform(0.05, 0.15, 10**6).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 10**6).astype(np.float32)
    with torch.no_grad():
        shape = make(torch, torch.tensor(x)).shape
    w = w.reshape(shape)
    ours, theirs = _run(ta, make, x, w, torch), _run(torch, make, x, w, torch)
    exact = _run(torch, make, x.astype(np.float64), w.astype(np.float64), torch)
    for got, half, want, what in zip(ours, theirs, exact, ("value", "gradient"), strict=True):
        assert got.dtype == np.float32, (name, what)
        err, torch_err = np.abs(got - want).max(), np.abs(half - want).max()
        scale = float(np.abs(want).max())
        assert err <= 2 * torch_err + 1e-6 * scale, (name, what, err, torch_err, scale)


@pytest.mark.parametrize("mask_dtype", [bool, np.float16])
def test_float16_attention_weights_take_the_mask(mask_dtype):
    """float16 q and k: the scores and softmax run in float32 (see attention_weights), with the
    mask, boolean or added, as in float32."""
    rng = np.random.default_rng(0)
    q, k = (rng.standard_normal((2, 3, 4)).astype(np.float16) for _ in range(2))
    mask = rng.random((3, 3)) < 0.6
    mask[:, 0] = True  # (no row fully masked)
    mask = mask if mask_dtype is bool else np.where(mask, 0.0, -2.0).astype(np.float16)
    got = F.attention_weights(ta.tensor(q), ta.tensor(k), attn_mask=ta.tensor(mask))
    want = F.attention_weights(ta.tensor(q.astype(np.float32)), ta.tensor(k.astype(np.float32)),
                               attn_mask=ta.tensor(mask.astype(mask.dtype if mask_dtype is bool
                                                                else np.float32)))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.numpy(), want.numpy().astype(np.float16), rtol=2e-3, atol=1e-3)
    unmasked = F.attention_weights(ta.tensor(q), ta.tensor(k)).numpy()
    assert not np.allclose(got.numpy(), unmasked, atol=1e-2)  # (the mask changes the weights)
