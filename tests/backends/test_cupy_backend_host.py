"""The CuPy backend's Python code run on the CPU, on tests/support/fake_cupy.py instead of CuPy.

With TINYATTN_CUPY_KERNELS=0, one check per op family (unary, binary with broadcasting,
reductions, shape and index, softmax, matmul, attention, losses, norms and dropout, optimizer
steps) holds values and gradients in float32 and float16 to PyTorch or the textbook formula,
and a training step and `tinyattn train --backend cupy` run on the fake. With kernels on, which
ops reach a kernel is pinned, and the launches (names, argument types, grids, shared memory,
mask parameters) are checked without running them; the GELU/Adam ElementwiseKernels run their
NumPy replays. The fake is strict where CuPy is: a NumPy array in a device op, or an implicit
device-to-host copy, is a TypeError, so host-side mistakes that would only show on a GPU show
here. Each test puts the fake in sys.modules and a fresh backend cache in place; monkeypatch
takes all of it back afterwards. (The kernels themselves run emulated in test_cupy_backend.py.)
"""

import os
import re
import sys
import types

import cuda_emu  # tests/support is on sys.path (tests/conftest.py)
import fake_cupy
import kernel_refs as kr  # tests/support (tests/conftest.py)
import numpy as np
import pytest

import tinyattn as ta
import tinyattn.backends as B
import tinyattn.functional as F
from tinyattn.backends import cuda_launch as cl
from tinyattn.backends import cupy_backend as cb
from tinyattn.errors import BackendError, DTypeError
from tinyattn.ops import REGISTRY
from tinyattn.ops import samples as S

FAKE_NAMES = ("cupy", "cupyx", "cupyx.scipy", "cupyx.scipy.special")


def _install(monkeypatch, kernels):
    return fake_cupy.install(monkeypatch, kernels)


@pytest.fixture
def fake_be(monkeypatch):
    """The "cupy" backend on the fake, kernels off (the reference primitives in `xp`)."""
    be = _install(monkeypatch, kernels=False)
    assert isinstance(be, cb.CupyBackend) and not be.use_kernels
    return be


@pytest.fixture
def fake_kernels_be(monkeypatch):
    """The "cupy" backend on the fake with kernels on (launches recorded, not run)."""
    fake_cupy.RAW_MODULES.clear()
    be = _install(monkeypatch, kernels=True)
    assert be.use_kernels
    return be


def launches():
    return [launch for module in fake_cupy.RAW_MODULES for launch in module.launches]


# ---- the fake itself is strict, or the tests below prove nothing ------------------------------

def test_the_fake_refuses_host_arrays_and_implicit_copies(fake_be):
    cp = fake_be.xp
    a = cp.asarray(np.arange(3.0))
    assert isinstance(a, cp.ndarray) and not isinstance(a, np.ndarray)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Unsupported type"):
        a + np.ones(3)
    with pytest.raises(TypeError, match="Unsupported type"):
        cp.where(np.ones(3, bool), a, 0)
    assert isinstance(a.sum(), cp.ndarray) and a.sum().ndim == 0  # no NumPy scalars
    np.testing.assert_array_equal(cp.asnumpy(cp.exp(a) * 2), np.exp(np.arange(3.0)) * 2)
    with pytest.raises(TypeError, match="float32 or float64"):
        cp.random.default_rng(0).standard_normal(3, dtype=np.float16)


# ---- kernels off: one check per op family, against PyTorch ---------------------------------------
#
# With TINYATTN_CUPY_KERNELS=0 the ops run their own code, and the base Backend's reference
# primitives, through `xp = cupy`; the CuPy backend adds only its own erf (cupyx's loops widen
# float16), its scatters (ufunc.at, or cupyx's) and its generator (float32/float64 only).
# One check per op family runs a few of its ops forward and backward on the fake, in float32
# and float16, and holds the output and every gradient to PyTorch's float64 on the same
# (rounded) values: the arrays stay on the device (the fake refuses host arrays and implicit
# copies), float16 stays float16, and the numbers are right.

TOL = {np.dtype(np.float16): 5e-3, np.dtype(np.float32): 2e-5}


def _against_torch(fn, arrays, dtype, tol_scale=1.0):
    """fn(tinyattn, tinyattn.functional, *tensors) on "cupy" in `dtype` (float arrays; others
    as they are) against fn(torch, torch.nn.functional, ...) in float64 on the same values:
    the output and every gradient."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as torch_f

    dtype = np.dtype(dtype)
    arrays = [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]
    ours = [ta.tensor(a, requires_grad=a.dtype.kind == "f", backend="cupy") for a in arrays]
    theirs = [torch.tensor(a.astype(np.float64), requires_grad=True) if a.dtype.kind == "f"
              else torch.tensor(a) for a in arrays]
    out, ref = fn(ta, F, *ours), fn(torch, torch_f, *theirs)
    assert out.backend.name == "cupy" and isinstance(out._data, out.backend.xp.ndarray)
    assert out.dtype == dtype and out.shape == tuple(ref.shape)
    g = np.random.default_rng(1).standard_normal(out.shape).astype(dtype)
    out.backward(ta.tensor(g, backend="cupy"))
    ref.backward(torch.tensor(g.astype(np.float64)))
    tol = TOL[dtype] * tol_scale
    pairs = [("output", out, ref)] + [(f"grad {i}", a.grad, b.grad)
                                     for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
                                     if b.requires_grad]
    for what, got, want in pairs:
        assert (got is None) == (want is None), what
        if got is None:  # an input this op does not use
            continue
        assert got.dtype == dtype, what
        want = want.detach().numpy()
        np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=tol,
                                   atol=tol * max(1.0, np.abs(want).max()), err_msg=what)


def _check_family(cases, arrays, dtype, tol_scale=1.0):
    for name, fn in cases.items():
        try:
            _against_torch(fn, arrays, dtype, tol_scale)
        except AssertionError as e:
            raise AssertionError(f"{name} ({np.dtype(dtype)}): {e}") from None


DTYPES = [np.float32, np.float16]
UNARY = {
    "exp": lambda t, f, x: x.exp(),
    "log": lambda t, f, x: (x.abs() + 0.5).log(),
    "sqrt": lambda t, f, x: (x.abs() + 0.5).sqrt(),
    "tanh": lambda t, f, x: x.tanh(),
    "sigmoid": lambda t, f, x: x.sigmoid(),
    "erf": lambda t, f, x: x.erf(),  # CupyBackend.erf: cupyx's float16 loop gives float64
    "gelu": lambda t, f, x: f.gelu(x),  # the reference GELU through erf, in place on device
    "gelu tanh": lambda t, f, x: f.gelu(x, approximate="tanh"),
    "relu": lambda t, f, x: x.relu(),
    "softplus": lambda t, f, x: f.softplus(x),
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_ops_on_the_device(fake_be, dtype):
    rng = np.random.default_rng(0)
    _check_family(UNARY, [rng.standard_normal((3, 7)) * 2], dtype)


BINARY = {
    "add": lambda t, f, a, b: a + b,
    "sub": lambda t, f, a, b: a - b,
    "mul": lambda t, f, a, b: a * b,
    "div": lambda t, f, a, b: a / (b.abs() + 0.5),
    "pow": lambda t, f, a, b: (a.abs() + 0.5) ** b,
    "maximum": lambda t, f, a, b: t.maximum(a, b),
    "atan2": lambda t, f, a, b: t.atan2(a, b),
    "python numbers": lambda t, f, a, b: 2.5 * a - b / 3 + 1,
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_ops_broadcast_on_the_device(fake_be, dtype):
    """(2, 1, 3) with (4, 1): both operands broadcast, so both gradients are summed back."""
    rng = np.random.default_rng(0)
    _check_family(BINARY, [rng.standard_normal((2, 1, 3)), rng.standard_normal((4, 1))], dtype)
    half = ta.tensor(np.ones(3, np.float16), backend="cupy")
    assert (half + ta.tensor(np.float32(2), backend="cupy")).dtype == np.float16  # 0-d: no raise


REDUCTIONS = {
    "sum": lambda t, f, x: x.sum(dim=(0, 2), keepdim=True),
    "mean": lambda t, f, x: x.mean(dim=1),
    "max": lambda t, f, x: x.max(dim=1).values,
    "amax": lambda t, f, x: x.amax(dim=(0, 1)),
    "var": lambda t, f, x: x.var(dim=2, correction=1),
    "logsumexp": lambda t, f, x: x.logsumexp(dim=-1),
    "prod": lambda t, f, x: x.prod(dim=0),
    "cumsum": lambda t, f, x: x.cumsum(dim=2),
    "all": lambda t, f, x: x.sum() * x.mean(),  # 0-d device results (CuPy has no scalars)
}


def test_reductions_on_the_device(fake_be):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5))
    x[1, 2, :2] = x[1, 2, 3]  # a tie for max: the gradient goes to one entry, for amax to all
    _check_family(REDUCTIONS, [x], np.float32)


SHAPE_AND_INDEX = {
    "getitem repeated": lambda t, f, x, i, w: x[np.array([0, 2, 0, 0])],  # scatter_add VJP
    "getitem slices": lambda t, f, x, i, w: x[1:, ::2][:, None, -1],
    "reshape permute": lambda t, f, x, i, w: x.reshape(5, 4).permute(1, 0).unsqueeze(0)
    .expand(3, 4, 5),
    "cat stack": lambda t, f, x, i, w: t.stack([t.cat([x, 2 * x], dim=1), t.cat([x, x], 1)]),
    "take_along_dim": lambda t, f, x, i, w: x.take_along_dim(i, dim=1),
    "scatter_reduce amax": lambda t, f, x, i, w: x.scatter_reduce(1, i, w, "amax"),
    "embedding": lambda t, f, x, i, w: f.embedding(i, x.T),  # repeated ids: scatter_add
}


def test_shape_and_index_ops_on_the_device(fake_be):
    """The index VJPs go through add.at / maximum.at (repeated indices collect)."""
    rng = np.random.default_rng(0)
    index = np.array([[0, 3, 3], [1, 1, 1], [4, 0, 4], [2, 2, 0]])
    _check_family(SHAPE_AND_INDEX, [rng.standard_normal((4, 5)), index,
                                    rng.standard_normal((4, 3))], np.float32)


def test_scatters_take_ufunc_at_and_cupyx_only_without_it():
    """CuPy 14 deprecates cupyx.scatter_add/max/min for ufunc.at: the backend calls ufunc.at
    and falls back to cupyx's where a CuPy has no ufunc.at for that ufunc."""
    from tinyattn.backends import cupy_backend

    calls = []

    class At:
        def __init__(self, works):
            self.works = works

        def at(self, out, index, values):
            if not self.works:
                raise NotImplementedError("no at")
            calls.append("at")
            np.add.at(out, index, values)

    def legacy(out, index, values):
        calls.append("cupyx")
        np.add.at(out, index, values)

    for works, want in ((True, ["at"]), (False, ["cupyx"])):
        calls.clear()
        out = np.zeros(3)
        cupy_backend._scatter(At(works), legacy, out, np.array([0, 2, 0]), np.ones(3))
        np.testing.assert_array_equal(out, [2.0, 0.0, 1.0])  # the repeated index collects
        assert calls == want


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int32", "uint8"])
@pytest.mark.parametrize("largest", [True, False])
def test_scatter_max_and_min_are_exact_in_every_dtype(fake_be, dtype, largest):
    """scatter_max/min on CuPy go through integer keys that order as the floats do (CuPy's
    maximum.at refuses float16 and rounded float64 maxima to float32 on an H200): the same as
    NumPy's maximum.at/minimum.at, with negatives, -0.0, infinities, ties, NaN sent and NaN
    kept, and values no float32 holds (0.7, 1 + 2**-40)."""
    xp = fake_be.xp
    floats = dtype.startswith("float")
    out = np.array([0.5, -1.0, 2.0, -0.0, 5.0, np.nan, -3.0, 7.0] if floats
                   else [5, 1, 2, 0, 5, 3, 4, 7]).astype(dtype)
    index = (np.array([[0, 0, 1, 3], [4, 4, 6, 2], [1, 3, 6, 6]]),)
    values = np.array([[0.7, 0.7 + 2**-40, -np.inf, 0.0], [np.inf, 1.0, -2.5, np.nan],
                       [1.0 + 2**-40, -7.0, -3.0, -1e-300]] if floats
                      else [[7, 6, 1, 0], [9, 1, 2, 8], [3, 4, 0, 2]]).astype(dtype)
    want = out.copy()
    (np.maximum if largest else np.minimum).at(want, index, values)
    got = xp.asarray(out)
    (fake_be.scatter_max if largest else fake_be.scatter_min)(
        got, tuple(xp.asarray(i) for i in index), xp.asarray(values))
    got = fake_be.to_numpy(got)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # NaN where NumPy has NaN


SOFTMAX = {
    "softmax": lambda t, f, x, m: f.softmax(x, dim=1),
    "log_softmax": lambda t, f, x, m: f.log_softmax(x, dim=-1),
    "masked softmax": lambda t, f, x, m: f.softmax((x * 0.5).masked_fill(m, float("-inf")), -1),
    "softmin": lambda t, f, x, m: f.softmin(x, dim=0),
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_family_on_the_device(fake_be, dtype):
    """Kernels off: the base Backend's three-pass softmax through cupy (a row of ±30 too)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6)) * 3
    x[0, 1] = 30 * np.sign(x[0, 1])
    masked = rng.random((4, 6)) < 0.4
    masked[:, 0] = False  # no fully masked row (PyTorch gives NaN there, tinyattn zeros)
    _check_family(SOFTMAX, [x, masked], dtype)


MATMUL = {
    "batched broadcast": lambda t, f, a, b, v, w, bias: a @ b,
    "vector matrix": lambda t, f, a, b, v, w, bias: v @ b,
    "linear": lambda t, f, a, b, v, w, bias: f.linear(a, w, bias),
    "einsum": lambda t, f, a, b, v, w, bias: t.einsum("...ij,jk->...ik", a, w.T),
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_and_linear_on_the_device(fake_be, dtype):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in ((2, 1, 3, 4), (5, 4, 2), (4,), (6, 4), (6,))]
    _check_family(MATMUL, arrays, dtype)


def _sdpa(impl, causal):
    def fn(t, f, q, k, v, keep):
        mask = None if causal else keep
        return f.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                              scale=0.3, **({"impl": impl} if t is ta else {}))
    return fn


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_on_the_device(fake_be, dtype):
    """Kernels off, scaled_dot_product_attention composed and flash (the tiled reference in
    backends/flash.py on cupy arrays): nothing is compiled or launched; a query with nothing
    to attend gives zeros and zero gradients (PyTorch gives NaN, so it is checked alone)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 2, 9, 16)) for _ in range(3))
    keep = rng.random((9, 9)) < 0.6
    keep[:, 0] = True
    cases = {f"{impl} {'causal' if causal else 'masked'}": _sdpa(impl, causal)
             for impl in ("composite", "flash") for causal in (False, True)}
    _check_family(cases, [q, k, v, keep], dtype, tol_scale=2)
    keep[4] = False
    for impl in ("composite", "flash"):
        qt, kt, vt = (ta.tensor(a.astype(dtype), requires_grad=True, backend="cupy")
                      for a in (q, k, v))
        out = F.scaled_dot_product_attention(qt, kt, vt, ta.tensor(keep, backend="cupy"),
                                             impl=impl)
        out.sum().backward()
        assert not out.numpy()[:, :, 4].any() and not qt.grad.numpy()[:, :, 4].any(), impl
        assert np.isfinite(out.numpy()).all() and np.isfinite(kt.grad.numpy()).all(), impl
    assert not fake_be._modules and not fake_be._elementwise


LOSSES = {
    "cross_entropy": lambda t, f, x, y, x3, y3, z: f.cross_entropy(x, y),
    "ignore_index, smoothing, sum": lambda t, f, x, y, x3, y3, z: f.cross_entropy(
        x, y, ignore_index=2, label_smoothing=0.1, reduction="sum"),
    "(B, C, T) none": lambda t, f, x, y, x3, y3, z: f.cross_entropy(x3, y3, reduction="none"),
    "nll of log_softmax": lambda t, f, x, y, x3, y3, z: f.nll_loss(f.log_softmax(x, -1), y),
    "mse": lambda t, f, x, y, x3, y3, z: f.mse_loss(x.tanh(), z),
}


def test_losses_on_the_device(fake_be):
    """Integer targets on the device index the logits; the mean skips ignored targets."""
    rng = np.random.default_rng(0)
    y = np.array([0, 2, 4, 2, 1, 3])
    _check_family(LOSSES, [rng.standard_normal((6, 5)) * 2, y, rng.standard_normal((2, 5, 3)),
                           rng.integers(0, 5, (2, 3)), rng.standard_normal((6, 5))], np.float32)


NORMS = {
    "layer_norm": lambda t, f, x, w, b: f.layer_norm(x, (8,), w, b),
    "layer_norm no affine": lambda t, f, x, w, b: f.layer_norm(x, (3, 8)),
    "rms_norm": lambda t, f, x, w, b: f.rms_norm(x, (8,), w, eps=1e-6),
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_norms_and_dropout_on_the_device(fake_be, dtype):
    """Layer/RMS norm as PyTorch's; dropout draws its mask from CuPy's generator (float32
    only there, also for float16 data), keeps x / (1 - p) and zeros the rest."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8)) * 2 + 1
    _check_family(NORMS, [x, rng.standard_normal(8), rng.standard_normal(8)], dtype, 2)
    xt = ta.tensor(np.abs(x).astype(dtype) + 1, requires_grad=True, backend="cupy")
    for p in (0.2, 0.7):
        out = F.dropout(xt, p=p, seed=3)
        kept = out.numpy() != 0
        assert out.dtype == dtype and 0 < kept.mean() < 1
        np.testing.assert_allclose(out.numpy()[kept], (xt.numpy() / (1 - p))[kept],
                                   rtol=TOL[np.dtype(dtype)])
        out.backward(ta.tensor(np.ones(out.shape, dtype), backend="cupy"))
        np.testing.assert_allclose(xt.grad.numpy(), kept / (1 - p), rtol=TOL[np.dtype(dtype)])
        xt.grad = None


def test_optimizer_steps_on_the_device(fake_be):
    """AdamW (the base adam_update in place on device arrays; a float16 weight steps through
    float32 moments), SGD with Nesterov momentum and clip_grad_norm, against the textbook
    formulas in float64 over three steps."""
    rng = np.random.default_rng(0)
    from tinyattn import optim

    w0, b0 = rng.standard_normal((3, 4)), rng.standard_normal(4)
    grads = [(rng.standard_normal((3, 4)), rng.standard_normal(4)) for _ in range(3)]
    lr, (b1, b2), eps, wd, mu = 1e-2, (0.9, 0.99), 1e-8, 0.1, 0.8

    def run(make_opt):
        w = ta.tensor(w0.astype(np.float32), requires_grad=True, backend="cupy")
        b = ta.tensor(b0.astype(np.float16), requires_grad=True, backend="cupy")
        opt = make_opt([w, b])
        norms = []
        for gw, gb in grads:
            w.grad = ta.tensor(gw.astype(np.float32), backend="cupy")
            b.grad = ta.tensor(gb.astype(np.float16), backend="cupy")
            norms.append(optim.clip_grad_norm([w, b], 2.0))
            opt.step()
        assert (w.dtype, b.dtype) == (np.float32, np.float16)
        return w.numpy(), b.numpy(), norms

    def clipped(g):
        total = np.sqrt(sum((a.astype(np.float64) ** 2).sum() for a in g))
        return total, [a * (2.0 / (total + 1e-6)) if total > 2.0 else a for a in g]

    def adamw(params, steps):
        params, m, v = [a.copy() for a in params], [0, 0], [0, 0]
        for t, g in enumerate(steps, 1):
            _, g = clipped(g)
            for i in range(2):
                params[i] *= 1 - lr * wd
                m[i] = b1 * m[i] + (1 - b1) * g[i]
                v[i] = b2 * v[i] + (1 - b2) * g[i] ** 2
                params[i] -= lr * (m[i] / (1 - b1**t)) / (np.sqrt(v[i] / (1 - b2**t)) + eps)
        return params

    def sgd(params, steps):
        params, buf = [a.copy() for a in params], [None, None]
        for g in steps:
            _, g = clipped(g)
            for i in range(2):
                buf[i] = g[i].copy() if buf[i] is None else mu * buf[i] + g[i]
                params[i] -= lr * (g[i] + mu * buf[i])
        return params

    rounded = [(gw.astype(np.float32), gb.astype(np.float16)) for gw, gb in grads]
    start = [w0.astype(np.float32).astype(np.float64), b0.astype(np.float16).astype(np.float64)]
    for make_opt, reference in (
            (lambda ps: optim.AdamW(ps, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd), adamw),
            (lambda ps: optim.SGD(ps, lr=lr, momentum=mu, nesterov=True), sgd)):
        w, b, norms = run(make_opt)
        want_w, want_b = reference(start, rounded)
        np.testing.assert_allclose(w, want_w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b, want_b, rtol=2e-3, atol=2e-3)
        np.testing.assert_allclose(norms, [clipped(g)[0] for g in rounded], rtol=1e-4)


# ---- kernels on: which ops reach a kernel ---------------------------------------------------

# the ops whose registry samples, in float32, launch a kernel (test_cupy_backend.py runs them,
# and flash attention at head dims that have kernels, emulated in float32 and float16)
KERNEL_OPS = {"softmax": "tinyattn_softmax_", "scaled_masked_softmax": "tinyattn_softmax_",
              "gelu": "tinyattn_gelu_"}


def test_which_ops_reach_a_kernel(fake_kernels_be):
    """Every op's every sample in float32 with the kernels on (recorded, not run) and a
    cotangent: the ops of KERNEL_OPS launch their kernels forward and backward, no other op
    launches any, and no op's forward or VJP leaves the device (the fake refuses host arrays)."""
    reached = {}
    for name in sorted(REGISTRY):
        for inputs, params in REGISTRY[name].samples:
            seen = {id(m): len(m.launches) for m in fake_cupy.RAW_MODULES}
            calls = {n: k.calls for n, k in fake_kernels_be._elementwise.items()}
            xs = S.materialize(inputs, np.random.default_rng(0), lambda v, rg: ta.tensor(
                v.astype(np.float32) if rg else v, requires_grad=rg, backend="cupy"))
            with np.errstate(all="ignore"):
                out = REGISTRY[name](*xs, **params)
                if out.requires_grad:
                    out.backward(ta.tensor(np.ones(out.shape, out.dtype), backend="cupy"))
            names = [n for m in fake_cupy.RAW_MODULES for n, *_ in m.launches[seen.get(id(m), 0):]]
            names += [n for n, k in fake_kernels_be._elementwise.items()
                      if k.calls > calls.get(n, 0)]
            reached.setdefault(name, set()).update(names)
    assert {n for n, names in reached.items() if names} == set(KERNEL_OPS)
    for name, prefix in KERNEL_OPS.items():
        assert all(n.startswith(prefix) for n in reached[name]), (name, reached[name])
        assert {("forward" in n, "backward" in n) for n in reached[name]} == {
            (True, False), (False, True)}, (name, reached[name])


# ---- tensors and modules across backends -------------------------------------------------------

def test_tensor_to_cupy_and_back(fake_be):
    x = ta.tensor(np.arange(6.0).reshape(2, 3))
    y = x.to("cupy")
    assert y.backend is fake_be and x.to("cuda").backend is fake_be
    assert isinstance(y._data, fake_be.xp.ndarray)
    assert y.to("cupy") is y
    back = y.to("numpy")
    assert isinstance(back._data, np.ndarray)
    np.testing.assert_array_equal(back.numpy(), x.numpy())
    assert "backend='cupy'" in repr(y)
    assert (y * 2).sum().item() == 30.0
    with pytest.raises(BackendError, match="two backends"):
        x + y
    with pytest.raises(BackendError, match="two backends"):
        F.softmax(y, dim=-1) @ x.T


def test_module_to_cupy(fake_be):
    model = ta.nn.TinyTransformer(vocab_size=7, d_model=16, n_heads=2, n_layers=1, max_len=8)
    model.to("cupy")
    assert all(p.backend is fake_be and isinstance(p._data, fake_be.xp.ndarray)
               for p in model.parameters())
    with pytest.raises(BackendError, match="two backends"):
        model(ta.tensor(np.array([[1, 2, 3]]), backend="numpy"))
    logits = model(ta.tensor(np.array([[1, 2, 3]]), backend="cupy"))
    assert logits.shape == (1, 3, 7) and logits.backend is fake_be
    on_cpu = ta.nn.TinyTransformer(vocab_size=7, d_model=16, n_heads=2, n_layers=1, max_len=8)
    on_cpu.load_state_dict(model.state_dict())  # device tensors into a NumPy model
    model.load_state_dict(on_cpu.state_dict())  # and NumPy arrays onto the device
    assert all(isinstance(p._data, fake_be.xp.ndarray) for p in model.parameters())
    np.testing.assert_allclose(on_cpu(ta.tensor(np.array([[1, 2, 3]]))).numpy(),
                               logits.numpy(), rtol=1e-5, atol=1e-7)  # erf: fast vs exact


def test_hooks_functions_and_clipping_on_the_device(fake_be):
    """Tensor.register_hook, an autograd.Function, nn.utils clipping and a fresh module's
    device= on the device, the same numbers as on NumPy (no host array slips in: the fake
    refuses them)."""

    class Cube(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    results = []
    for backend in ("numpy", "cupy"):
        x = ta.tensor(np.array([0.5, -1.0, 2.0]), backend=backend, requires_grad=True)
        h = x * 2
        h.register_hook(lambda g: g * 10)
        Cube.apply(h).sum().backward()
        norm = ta.nn.utils.clip_grad_norm_([x], 1.0, norm_type=3.0)
        lin = ta.nn.Linear(3, 2, device=backend)
        assert all(p.backend.name == backend for p in lin.parameters())
        results.append((x.grad.numpy(), norm.item()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12)
    assert results[1][1] == pytest.approx(results[0][1], rel=1e-12)


def test_embedding_from_pretrained_keeps_the_tables_device(fake_be):
    table = ta.tensor(np.arange(6.0).reshape(3, 2)).to("cupy")
    m = ta.nn.Embedding.from_pretrained(table)
    assert m.weight.backend is fake_be and isinstance(m.weight._data, fake_be.xp.ndarray)
    np.testing.assert_array_equal(m(ta.tensor([2], backend="cupy")).numpy(), [[4.0, 5.0]])


def test_encoder_layer_made_on_the_device(fake_be):
    layer = ta.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, device="cupy")
    assert all(p.backend is fake_be for p in layer.parameters())
    assert layer(ta.randn(3, 2, 8, backend="cupy")).backend is fake_be
    dec = ta.nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, device="cupy")
    assert all(p.backend is fake_be for p in dec.parameters())
    whole = ta.nn.Transformer(8, 2, 1, 1, 16, device="cupy")
    assert all(p.backend is fake_be for p in whole.parameters())
    out = whole(ta.randn(3, 2, 8, backend="cupy"), ta.randn(4, 2, 8, backend="cupy"),
                tgt_mask=ta.nn.Transformer.generate_square_subsequent_mask(4, device="cupy"))
    assert out.backend is fake_be and out.shape == (4, 2, 8)
    for module in (ta.nn.BatchNorm1d(8, device="cupy"), ta.nn.GroupNorm(2, 8, device="cupy")):
        assert all(t.backend is fake_be for t in (*module.parameters(), *module.buffers()))
        assert module(ta.randn(3, 8, 2, backend="cupy")).backend is fake_be
    from tinyattn.utils.checkpoint import checkpoint

    x = ta.randn(3, 2, 8, backend="cupy", requires_grad=True)
    # (its anchor made on the tensors' device)
    checkpoint(layer, x, use_reentrant=False).sum().backward()
    assert x.grad.backend is fake_be


def test_generate_with_a_kv_cache_on_the_device(fake_be):
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(vocab_size=7, d_model=16, n_heads=2, n_layers=1, max_len=8)
    model.eval()
    on_host = model.generate(ta.tensor([[1, 2]]), 4, greedy=True).numpy()
    model.to("cupy")
    np.testing.assert_array_equal(model.generate(ta.tensor([[1, 2]]), 4, greedy=True).numpy(),
                                  on_host)
    from tinyattn.nn.transformer import KVCache

    cache = KVCache()
    with ta.no_grad():
        model(ta.tensor([[1, 2, 3]], backend="cupy"), cache=cache)
        out = model(ta.tensor([[4, 5]], backend="cupy"), cache=cache)  # a mask on the device
    assert out.backend is fake_be and cache.layers[0]["k"].backend is fake_be


def test_generate_samples_from_the_device_stream_that_manual_seed_seeds(fake_be):
    """rng=None on a model on the device draws from the cupy backend's stream (which has no
    choice): tinyattn.manual_seed makes it reproducible, as does a cupy tinyattn.Generator, and
    only tokens of probability > 0 (here the top 3) are drawn."""
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(vocab_size=7, d_model=16, n_heads=2, n_layers=1, max_len=8)
    model.eval().to("cupy")
    prompt = ta.tensor(np.tile([[1, 2]], (40, 1)))
    ta.manual_seed(0)
    a = model.generate(prompt, 3, temperature=5.0, top_k=3).numpy()
    ta.manual_seed(0)
    np.testing.assert_array_equal(model.generate(prompt, 3, temperature=5.0, top_k=3).numpy(), a)
    logits = model(ta.tensor([[1, 2]], backend="cupy")).numpy()[0, -1]
    assert set(a[:, 2]) == set(np.argsort(logits)[-3:])
    g = ta.Generator("cupy")
    b = model.generate(prompt, 3, temperature=5.0, top_k=3, rng=g.manual_seed(4)).numpy()
    np.testing.assert_array_equal(
        model.generate(prompt, 3, temperature=5.0, top_k=3, rng=g.manual_seed(4)).numpy(), b)


def test_report_samples_of_a_model_on_the_device(fake_be):
    """samples.txt is written for a model on the device (generate feeds the model on the
    backend of its weights, whatever backend the prompt tensor was made on)."""
    from tinyattn.train import TrainConfig, build, samples_text

    task, model, _, _ = build(TrainConfig(task="reverse", length=4, d_model=16, heads=2,
                                          layers=1))
    model.to("cupy")
    text = samples_text(task, model, task.batch(np.random.default_rng(0), 3, "heldout"), fake_be)
    assert text.count("\n") == 4 and text.count("|") == 3 * 4  # a header and three rows


def _training_steps(backend, steps=2, dropout=0.0, dtype="float64", captured=False):
    from tinyattn import nn, optim

    ta.manual_seed(0)
    model = nn.TinyTransformer(vocab_size=11, d_model=32, n_heads=2, n_layers=2, max_len=16,
                               dropout=dropout)
    model.to(backend).to(dtype)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 11, (3, 16)), rng.integers(0, 11, (3 * 16,))
    opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    losses = []

    def step(xs, ys):
        return F.cross_entropy(model(xs).reshape(-1, 11), ys)

    captured_step = ta.capture(step)
    for _ in range(steps):
        xs, ys = ta.tensor(x, backend=backend), ta.tensor(y, backend=backend)
        opt.zero_grad()
        if captured:
            loss = captured_step(xs, ys)
        else:
            loss = step(xs, ys)
            loss.backward()
        opt.step()
        losses.append(loss.item())
    assert captured_step.state == ("replaying" if captured and steps > 2 else "recording")
    return losses, {name: p.numpy() for name, p in model.named_parameters()}


def test_training_step_matches_numpy_with_kernels_off(fake_be):
    want_losses, want = _training_steps("numpy")
    got_losses, got = _training_steps("cupy")
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-12)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_a_captured_step_on_the_device_equals_the_eager_one(fake_be, dropout):
    """ta.capture on the CuPy backend: the replayed steps (the 3rd on) give the eager steps'
    losses and weights bit for bit, dropout drawn from the device generator included."""
    want_losses, want = _training_steps("cupy", steps=4, dropout=dropout, dtype="float32")
    got_losses, got = _training_steps("cupy", steps=4, dropout=dropout, dtype="float32",
                                      captured=True)
    assert got_losses == want_losses
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("capture", [False, True], ids=["eager", "capture"])
def test_cli_train_on_cupy(fake_be, tmp_path, capsys, capture):
    from tinyattn import cli

    out = tmp_path / "run"
    rc = cli.main(["train", "--backend", "cupy", "--steps", "3", "--d-model", "16", "--heads",
                   "2", "--layers", "1", "--batch-size", "4", "--eval-every", "3",
                   "--no-progress", "--out", str(out)] + (["--capture"] if capture else []))
    assert rc == 0
    assert (out / "metrics.json").exists() and (out / "checkpoint.npz").exists()
    assert B._made["cupy"] is fake_be  # it ran on the fake, not on a new backend


# ---- kernels on: the host side of each launch ---------------------------------------------------

def _gpu(be, *arrays):
    return [be.xp.asarray(a) for a in arrays]


def test_vector_loads_can_be_turned_off(monkeypatch):
    """TINYATTN_CUPY_VECTORS=0 (the benchmark's "kernel scalar"): rows that would move in
    16-byte vectors take the scalar kernels, forward and backward."""
    monkeypatch.setenv("TINYATTN_CUPY_VECTORS", "0")
    fake_cupy.RAW_MODULES.clear()
    be = _install(monkeypatch, kernels=True)
    (x,) = _gpu(be, np.zeros((2, 3, 64), dtype=np.float32))
    be.softmax_backward(be.softmax(x), x)
    assert [name for name, *_ in launches()] == ["tinyattn_softmax_forward_warp2_f32",
                                                 "tinyattn_softmax_backward_warp2_f32"]
    be.vector_loads = True
    be.softmax(x)
    assert launches()[-1][0] == "tinyattn_softmax_forward_warp16x4_f32"


@pytest.mark.parametrize("n", [5, 33, 1024, 3000, 3001])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax_launches(fake_kernels_be, n, dtype):
    be = fake_kernels_be
    (x,) = _gpu(be, np.zeros((2, 3, n), dtype=dtype))
    keep = be.xp.asarray(np.ones((3, n), bool))
    for y in (be.softmax(x), be.scaled_masked_softmax(x, keep, scale=0.5, causal=True),
              be.softmax_backward(x, x), be.scaled_masked_softmax_backward(x, x, 0.5, True),
              be.softmax(x, axis=1)):
        assert isinstance(y, be.xp.ndarray) and y.dtype == dtype
    assert [y.shape for y in (be.softmax(x, axis=1),)] == [x.shape]
    vec = cl.vector_width(dtype) if n % cl.vector_width(dtype) == 0 else 1
    launch = kr.softmax_launch(n, vec)
    names = [name for name, *_ in launches()]
    assert names[:4] == [cl.softmax_kernel_name("forward", launch, dtype)] * 2 + \
        [cl.softmax_kernel_name("backward", launch, dtype)] * 2
    for name, grid, block, _args, smem in launches()[:4]:
        threads = kr.WARP_BLOCK_THREADS if launch[0] == "warp" else launch[1]
        assert block == (threads,)
        if launch[0] == "warp":
            assert grid == (-(-6 // (threads // launch[2])),)
        else:
            assert grid == (6,)
            row = (1 if "forward" in name else 2) * n * kr.acc_dtype(dtype).itemsize
            assert smem == (row if row <= cl.ROW_CACHE_LIMIT else 0)


@pytest.mark.parametrize("optin,flash_dims", [(64 * 1024, {16}), (99 * 1024, {16, 32, 64, 128}),
                                              (227 * 1024, {16, 32, 64, 128})],
                         ids=["sm_75", "sm_86", "sm_90"])
def test_a_gpu_that_gives_a_block_less_shared_memory(monkeypatch, optin, flash_dims):
    """Flash tiles that do not fit the device's shared memory per block take the reference
    (right numbers, no launch); the block softmax caches rows only as far as the device allows,
    and never asks a kernel for more than the device has (the fake refuses, as CUDA does)."""
    monkeypatch.setitem(fake_cupy.DEVICE, "smem_optin", optin)
    fake_cupy.RAW_MODULES.clear()
    be = _install(monkeypatch, kernels=True)
    rng = np.random.default_rng(0)
    for d in (16, 32, 64, 128):
        q, k, v, g = (rng.standard_normal((1, 2, 9, d)).astype(np.float32) for _ in range(4))
        out, lse = be.attention_forward(*_gpu(be, q, k, v), None, 0.3, True)
        be.attention_backward(*_gpu(be, q, k, v), out, lse, *_gpu(be, g), None, 0.3, True)
        flashed = any(f"_d{d}_" in name for name, *_ in launches())
        assert flashed == (d in flash_dims), d
        if not flashed:
            want, _ = B.backend("numpy").attention_forward(q, k, v, None, 0.3, True)
            np.testing.assert_allclose(be.to_numpy(out), want, rtol=1e-5, atol=1e-6)
    fake_cupy.RAW_MODULES.clear()
    (x,) = _gpu(be, np.zeros((2, 8192), np.float32))
    be.softmax(x)
    be.softmax_backward(x, x)
    smem = {name.split("_")[2]: shared for name, _, _, _, shared in launches()}
    assert smem["forward"] == 8192 * 4
    assert smem["backward"] == (2 * 8192 * 4 if optin > 2 * 8192 * 4 + 1024 else 0)


def test_masked_softmax_passes_the_mask_and_strides(fake_kernels_be):
    be = fake_kernels_be
    x = be.xp.asarray(np.zeros((2, 3, 4, 5), np.float32))
    keep_np = np.random.default_rng(0).random((2, 1, 4, 5)) < 0.5
    be.scaled_masked_softmax(x, be.xp.asarray(keep_np), scale=2.0)
    be.scaled_masked_softmax(x, None, scale=2.0)
    (_, _, _, with_mask, _), (_, _, _, without, _) = launches()
    ptr, sb, si, sj = with_mask[-4:]
    assert isinstance(ptr, be.xp.ndarray) and ptr.dtype == np.uint8
    assert (sb, si, sj) != (0, 0, 0) and all(isinstance(s, np.int64) for s in (sb, si, sj))
    as_read = np.lib.stride_tricks.as_strided(ptr.get(), shape=(6, 4, 5),
                                              strides=(int(sb), int(si), int(sj)))
    np.testing.assert_array_equal(as_read.astype(bool),
                                  np.broadcast_to(keep_np, (2, 3, 4, 5)).reshape(6, 4, 5))
    assert without[-4:] == (np.uint64(0), 0, 0, 0) and isinstance(without[-4], np.uint64)
    assert float(with_mask[6]) == 2.0  # scale, as float64


def test_mask_params_on_device_arrays(fake_kernels_be):
    be = fake_kernels_be
    keep = be.xp.asarray(np.tril(np.ones((4, 5), bool)))
    (ptr, sb, si, sj), arr = be._mask_params(keep, (2, 3, 4, 5))
    assert ptr is arr and isinstance(arr, be.xp.ndarray)
    assert (int(sb), int(si), int(sj)) == (0, 5, 1)  # a (T, S) mask is read in place
    (ptr, *strides), arr = be._mask_params(None, (2, 4, 5))
    assert arr is None and ptr == 0 and strides == [0, 0, 0]


@pytest.mark.parametrize("d", sorted(kr.FLASH_TILES))
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_flash_launches(fake_kernels_be, d, dtype):
    be = fake_kernels_be
    q, k = _gpu(be, np.zeros((2, 3, 10, d), dtype), np.zeros((1, 3, 7, d), dtype))
    keep = be.xp.asarray(np.ones((10, 7), bool))
    out, lse = be.attention_forward(q, k, k, keep, 0.1, True)
    assert out.shape == q.shape and lse.shape == q.shape[:-1] and lse.dtype == np.float32
    grads = be.attention_backward(q, k, k, out, lse, q, None, 0.1, False)
    assert [g.shape for g in grads] == [q.shape, (2, 3, 7, d), (2, 3, 7, d)]
    assert all(g.dtype == dtype for g in grads)
    (fname, fgrid, fblock, _, fsmem), (bname, bgrid, bblock, _, bsmem) = launches()
    (bq, _), (_, bk) = kr.FLASH_TILES[d]
    suffix = cl.DTYPE_SUFFIX[np.dtype(dtype)]
    # one grid dimension (x: up to 2^31 - 1 blocks; y would stop at 65535 tiles)
    assert fname == f"tinyattn_flash_forward_d{d}_{suffix}" and fgrid == (6 * -(-10 // bq),)
    assert bname == f"tinyattn_flash_backward_d{d}_{suffix}" and bgrid == (6 * -(-7 // bk),)
    assert fblock == bblock == (kr.FLASH_THREADS,)
    assert fsmem == cl.flash_smem_bytes(d, "forward")
    assert bsmem == cl.flash_smem_bytes(d, "backward")


def test_flash_with_an_empty_batch_launches_nothing(fake_kernels_be):
    """CUDA rejects a grid with 0 blocks (the fake too): an empty batch returns empty results."""
    be = fake_kernels_be
    q, g = _gpu(be, np.zeros((0, 3, 10, 16), np.float32), np.zeros((0, 3, 10, 16), np.float32))
    out, lse = be.attention_forward(q, q, q, None, 0.1, True)
    assert out.shape == (0, 3, 10, 16) and lse.shape == (0, 3, 10)
    grads = be.attention_backward(q, q, q, out, lse, g, None, 0.1, True)
    assert [a.shape for a in grads] == [(0, 3, 10, 16)] * 3 and not launches()


@pytest.mark.parametrize("grid,block", [((0,), (32,)), ((2**31,), (256,)), ((1, 65536), (256,)),
                                        ((1, 1, 65536), (32,)), ((1,), (1025,)),
                                        ((1,), (64, 32)), ((1,), (1, 1, 65))])
def test_launches_are_checked_against_cudas_limits(fake_kernels_be, grid, block):
    with pytest.raises(BackendError, match=r"tinyattn_k: (cannot launch a (grid|block)|a block "
                                           r"of .* threads)"):
        cl.check_launch("tinyattn_k", grid, block)
    with pytest.raises(ValueError, match="cudaErrorInvalidConfiguration|threads"):  # the fake too
        fake_kernels_be.kernel("softmax.cu", "tinyattn_softmax_forward_warp1_f32")(
            grid, block, ())
    cl.check_launch("tinyattn_k", (2**31 - 1, 65535, 65535), (1024,))
    cl.check_launch("tinyattn_k", (1,), (16, 16, 4))


def test_the_shared_memory_opt_in_is_set_on_every_device(fake_kernels_be, monkeypatch):
    """CUDA keeps max_dynamic_shared_size_bytes per device: a kernel used on a second device
    needs it set there too (head dim 64 asks for 68 KB)."""
    be = fake_kernels_be
    (q,) = _gpu(be, np.zeros((1, 1, 9, 64), np.float32))
    be.attention_forward(q, q, q, None, 0.1, True)
    monkeypatch.setitem(fake_cupy.DEVICE, "current", 1)
    be.attention_forward(q, q, q, None, 0.1, True)
    assert [name for name, *_ in launches()] == ["tinyattn_flash_forward_d64_f32"] * 2


def test_the_masked_softmax_kernel_takes_only_bool_masks(fake_kernels_be):
    be = fake_kernels_be
    x, keep = _gpu(be, np.zeros((2, 5), np.float32), np.ones((2, 5), np.float32))
    with pytest.raises(DTypeError, match=r"scaled_masked_softmax: the mask must be bool .*got "
                                         r"float32"):
        be.scaled_masked_softmax(x, keep)
    assert not launches()


def test_rows_past_the_kernels_int_indexing_take_the_reference(fake_kernels_be):
    """A block-kernel thread indexes j0 + 4 * blockDim.x with int: rows longer than
    SOFTMAX_MAX_COLS (2^31 - 4097) are not given to the kernels."""
    longest = np.broadcast_to(np.float32(0), (1, kr.SOFTMAX_MAX_COLS))
    assert fake_kernels_be._softmax_ok(longest)
    assert not fake_kernels_be._softmax_ok(np.broadcast_to(np.float32(0),
                                                           (1, kr.SOFTMAX_MAX_COLS + 1)))
    assert kr.SOFTMAX_MAX_COLS - 1 + kr.BLOCK_UNROLL * 1024 <= 2**31 - 1


def test_flash_falls_back_where_no_kernel_fits(fake_kernels_be):
    be = fake_kernels_be
    q = be.xp.asarray(np.random.default_rng(0).standard_normal((1, 5, 48)))
    out, _ = be.attention_forward(q, q, q, None, 0.2, True)  # head dim 48 / float64: reference
    assert not launches() and isinstance(out, be.xp.ndarray)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_kernels_host_side(fake_kernels_be, approximate):
    be = fake_kernels_be
    xn = np.linspace(-4, 4, 11, dtype=np.float32)
    (x,) = _gpu(be, xn)
    out, saved = be.gelu_forward(x, approximate)
    gx = be.gelu_backward(be.xp.ones_like(x), x, saved, approximate)
    want_out, want_saved = kr.gelu_forward(xn, approximate)
    np.testing.assert_array_equal(out.get(), want_out)
    np.testing.assert_array_equal(saved.get(), want_saved)
    np.testing.assert_array_equal(gx.get(), kr.gelu_backward(np.ones_like(xn), xn, want_saved,
                                                               approximate))


def test_adam_kernel_host_side(fake_kernels_be):
    be = fake_kernels_be
    rng = np.random.default_rng(5)
    p, g, m = (rng.standard_normal(50).astype(np.float32) for _ in range(3))
    v = rng.random(50).astype(np.float32)
    pg, gg, mg, vg = _gpu(be, p, g, m, v)
    for step in (1, 2, 3):
        args = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, step=step,
                    decoupled=True)
        kr.adam_update(p, g, m, v, **args)
        be.adam_update(pg, gg, mg, vg, **args)
    for a, b in ((pg, p), (mg, m), (vg, v)):
        np.testing.assert_allclose(a.get(), b, rtol=1e-6)


def test_kernels_compile_once_per_file(fake_kernels_be):
    be = fake_kernels_be
    (x,) = _gpu(be, np.zeros((2, 40), np.float32))
    be.softmax(x)
    be.softmax_backward(x, x)
    be.softmax(x.astype(np.float64))
    assert len(fake_cupy.RAW_MODULES) == 1 and set(be._modules) == {"softmax.cu"}
    assert f'#include "{cl.COMMON_HEADER}"' not in fake_cupy.RAW_MODULES[0].code
    assert fake_cupy.RAW_MODULES[0].options == cl.NVRTC_OPTIONS


def test_the_fake_is_gone_afterwards():
    """Runs after the tests above (file order): nothing of the fake is left behind."""
    made = B._made.get("cupy")
    assert made is None or made.xp.ndarray is not fake_cupy.FakeArray
    assert B._default is None or B.ALIASES.get(str(B._default).lower()) != "cupy"
    assert "TINYATTN_CUPY_KERNELS" not in os.environ
    for name in FAKE_NAMES:
        module = sys.modules.get(name)
        assert module is None or getattr(module, "ndarray", None) is not fake_cupy.FakeArray


# ---- the GPU benchmarks' own code, run on the fake with the kernels emulated ------------------

@pytest.fixture
def fake_emu_be(monkeypatch):
    """The "cupy" backend on the fake with kernels on and run: their CUDA source on the CPU."""
    if not cuda_emu.available():
        pytest.skip("the CUDA emulator needs g++")
    fake_cupy.RAW_MODULES.clear()
    return fake_cupy.install(monkeypatch, kernels=True, emulate=True)


@pytest.mark.emulated
@pytest.mark.slow  # (~10 s of forked emulated launches; .ci/run runs it)
def test_the_reports_gpu_section_is_written_and_then_kept(fake_emu_be, monkeypatch, tmp_path):
    """`tinyattn bench report --sections gpu` puts the softmax (float32, float16) and attention
    tables and the main job's wall times on the page, with the device; a later CPU-only report
    keeps that section word for word (this machine has no GPU to rerun it)."""
    import json
    import pathlib
    import subprocess

    from tinyattn.bench import attention, report, softmax

    monkeypatch.setattr(softmax, "torch_cuda", lambda: None)
    monkeypatch.setattr(softmax, "BATCH", 1)  # every emulated launch forks: one call a round
    monkeypatch.setattr(softmax, "shapes", lambda quick: [("attention T=40", (3, 40, 40))])
    real_attention = attention.main
    monkeypatch.setattr(attention, "main", lambda argv: real_attention(
        argv + ["--t", "40", "--batch", "1", "--heads", "2", "--repeats", "1"]))
    trained = []

    def fake_train(cmd, **kwargs):  # the main job is timed in a subprocess: not here
        trained.append(cmd[cmd.index("--backend") + 1])
        out = pathlib.Path(cmd[cmd.index("--out") + 1])
        out.mkdir(parents=True)
        (out / "metrics.json").write_text(json.dumps({"accuracy": 0.5 + len(trained) / 4}))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(report, "subprocess", types.SimpleNamespace(run=fake_train))
    out = tmp_path / "docs" / "benchmarks.md"
    out.parent.mkdir()
    assert report.main(["--quick", "--sections", "gpu", "--out", str(out)]) == 0
    gpu = report.kept_sections(out.read_text())["gpu"]
    assert trained == ["numpy", "cupy"]
    for title in ("Softmax, float32", "Softmax, float16", "Flash attention, float32"):
        assert f"### {title}\n\n```text\ndevice: " in gpu
    assert re.search(r"^attention T=40\s+causal backward\s+kernel\s+\d", gpu, re.M)
    assert "| numpy | " in gpu and "| 0.750 |" in gpu and "| cupy | " in gpu and "| 1.000 |" in gpu
    assert "CuPy " in gpu and "Measured 20" in gpu
    monkeypatch.undo()  # the real subprocess and benchmarks again
    assert report.main(["--quick", "--sections", "overhead", "--out", str(out)]) == 0
    assert report.kept_sections(out.read_text())["gpu"] == gpu


@pytest.mark.slow  # (18 s on 2 cores; .ci/run runs it)
@pytest.mark.emulated
def test_the_gpu_benchmarks_run_end_to_end(fake_emu_be, monkeypatch, capsys):
    """benchmarks/softmax_gpu.py and attention.py --backend cupy, tiny shapes: every contender
    is checked against the others and timed (the fake's events say 1 ms), a row is printed for
    each, and nothing in the GPU-only code paths (events, device properties, the memory pool)
    fails before a GPU session gets to run them. torch is left out (it sees no GPU here)."""
    from tinyattn.bench import attention, softmax

    monkeypatch.setattr(softmax, "torch_cuda", lambda: None)
    monkeypatch.setattr(softmax, "BATCH", 1)  # every emulated launch forks: one call a round
    monkeypatch.setattr(softmax, "shapes", lambda quick: [("8 x 1500", (8, 1500)),
                                                          ("attention T=40", (3, 40, 40))])
    assert softmax.main(["--quick", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for shape in ("8 x 1500", "attention T=40"):
        for variant in ("forward", "backward", "causal forward", "causal backward"):
            for who in ("kernel", "kernel scalar", "cupy composite"):
                assert re.search(rf"^{shape}\s+{variant}\s+{who}\s+\d", out, re.M), out
    assert attention.main(["--backend", "cupy", "--t", "40", "130", "--batch", "1", "--heads",
                           "2", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for t in ("40", "130"):
        assert re.search(rf"^\s+{t} flash kernel .*\n\s+{t} cupy composed ", out, re.M), out
    assert any(n.startswith("tinyattn_flash_forward_d64") for n, *_ in launches())


def test_what_a_captured_step_makes_inside_fn_on_the_device(fake_be):
    """Class indices and weights, a one-hot, pad's indices, a causal mask, top-k's order and
    tril's mask made inside a captured fn on the CuPy backend: made again on the device each
    replay, equal to eager."""
    rng = np.random.default_rng(0)
    w = ta.tensor(rng.standard_normal((5, 7)), backend="cupy", requires_grad=True)
    weight = ta.linspace(0.5, 1.5, 7, dtype=np.float64, backend="cupy")

    def fn(x, y):
        h = x @ w
        keep = F.causal_mask(4, 7, backend="cupy")
        return (F.cross_entropy(h, y, weight=weight, label_smoothing=0.1)
                + (F.pad(h, (2, 1), mode="reflect") ** 2).mean()
                + (h * F.one_hot(y.clamp(0, 6), 7) * keep).sum()
                + (h * ta.randn(4, 7, dtype=np.float64, backend="cupy")).sum()
                + (h.topk(2, 1).values ** 2).sum() + h.tril().roll(1, 0).sum())

    step = ta.capture(fn)
    x = ta.tensor(rng.standard_normal((4, 5)), backend="cupy")
    for k, y in enumerate([[1, 3, -100, 6]] * 3 + [[0, 6, 2, -100], [5, 5, 5, 5]]):
        y = ta.tensor(y, backend="cupy")
        w.grad = None
        ta.manual_seed(k)
        got = step(x, y)
        ta.manual_seed(k)
        (want,) = ta.autograd.grad(fn(x, y), [w])
        ta.manual_seed(k)
        assert got.item() == fn(x, y).item()
        np.testing.assert_array_equal(w.grad.numpy(), want.numpy())
    assert step.state == "replaying" and w.grad.backend is fake_be
