"""Stability: a long training run keeps memory flat, a 100,000-op graph goes backward without
recursion, and grad mode belongs to its thread and context (two threads do not interfere)."""

import contextvars
import gc
import threading
import tracemalloc

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn.optim import AdamW, clip_grad_norm


@pytest.mark.slow  # (7 s: .ci/run runs it with the slow tests)
def test_hundreds_of_training_steps_keep_memory_flat():
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(vocab_size=8, d_model=16, n_heads=2, n_layers=1, max_len=6)
    opt = AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, 8, size=(4, 6)) for _ in range(10)]

    def step(i):
        ids = batches[i % len(batches)]
        logits = model(ta.tensor(ids))  # (4, 6, 8)
        loss = F.cross_entropy(logits.reshape(-1, 8), ta.tensor(ids[:, ::-1].reshape(-1)))
        opt.zero_grad()
        loss.backward()
        clip_grad_norm(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    tracemalloc.start()
    try:
        first = [step(i) for i in range(60)]  # optimizer state and caches settle first
        gc.collect()
        settled, _ = tracemalloc.get_traced_memory()
        last = [step(i) for i in range(60, 460)]
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.mean(last[-50:]) < np.mean(first[:50])  # it did train
    # a graph (a few hundred KB) kept alive per step would add a hundred MB over 400 steps;
    # anything over 2.5 KB a step is caught
    assert end - settled < 1_000_000, f"memory grew by {(end - settled) / 1e6:.1f} MB"


@pytest.mark.slow  # (.ci/run runs it with the slow tests)
def test_backward_through_a_100000_op_graph():
    x = ta.tensor(np.array(0.5), requires_grad=True)
    w = ta.tensor(np.array(1.0), requires_grad=True)
    y = x
    for _ in range(50_000):
        y = y * w + x  # two ops a step: a chain 100,000 nodes deep
    y.backward()
    assert x.grad.item() == 50_001.0  # d/dx of x + x + ... with w = 1
    assert w.grad.item() == 0.5 * 50_000 + sum(range(50_000)) * 0.5 * 1.0
    del y
    gc.collect()  # and freeing the deep graph does not overflow the C stack either


def test_grad_mode_is_per_thread():
    barrier = threading.Barrier(2)
    seen = {}

    def in_no_grad():
        with ta.no_grad():
            barrier.wait()  # the other thread computes while this one is inside no_grad
            barrier.wait()
            seen["no_grad"] = (ta.randn(2, requires_grad=True) * 2).requires_grad

    def with_grad():
        barrier.wait()
        seen["grad"] = (ta.randn(2, requires_grad=True) * 2).requires_grad
        seen["enabled"] = ta.is_grad_enabled()
        barrier.wait()

    threads = [threading.Thread(target=in_no_grad), threading.Thread(target=with_grad)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"no_grad": False, "grad": True, "enabled": True}
    assert ta.is_grad_enabled()


def test_grad_mode_set_in_a_context_stays_in_it():
    def off():
        ta.no_grad().__enter__()  # entered and never left, inside the copied context
        return ta.is_grad_enabled()

    assert contextvars.copy_context().run(off) is False
    assert ta.is_grad_enabled()
    assert (ta.randn(2, requires_grad=True) * 2).requires_grad


def test_logcumsumexp_shifts_each_row_by_its_own_max():
    torch = pytest.importorskip("torch")
    inf = np.inf
    v = np.array([[1000.0, 1000.0, 999.0], [-1000.0, -1000.0, -1001.0], [-inf, -inf, -inf],
                  [-inf, 0.5, -inf]])
    for dim in (1, 0):
        values = v if dim == 1 else v.T.copy()
        x = ta.tensor(values, requires_grad=True)
        out = x.logcumsumexp(dim)
        expected = torch.tensor(values).logcumsumexp(dim).numpy()
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


def test_overflow_and_invalid_values_give_ieee_results_without_warnings():
    import warnings

    x = ta.tensor([1000.0, 1.0, 0.0], dtype=ta.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns about none of these either
        np.testing.assert_array_equal(x.cosh().numpy()[:1], [np.inf])  # overflow
        np.testing.assert_array_equal((x ** 400.5).numpy(), [np.inf, 1.0, 0.0])
        np.testing.assert_array_equal((x[2:] ** -1.0).numpy(), [np.inf])  # divide by zero
        assert np.isnan(((x[1:] - 2.0) ** 0.5).numpy()).all()  # invalid


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_tanh_gelu_keeps_its_digits_left_of_zero_and_never_warns(dtype):
    """x (1 + tanh u) / 2 loses every digit where tanh u is near -1 (x < -3): 1 + tanh u
    cancels. Computed as x σ(2u) it keeps them, and far left e^-2u overflows to inf quietly
    (GELU is 0 there). Forward and gradient against float64 over [-9, 5] (float16: its range)."""
    import math
    import warnings

    c, a = math.sqrt(2 / math.pi), 0.044715
    x = np.linspace(-9, 5, 20001).astype(dtype)
    wide = x.astype(np.float64)
    s = 1 / (1 + np.exp(-2 * c * (wide + a * wide ** 3)))
    want = wide * s
    want_grad = s + wide * s * (1 - s) * 2 * c * (1 + 3 * a * wide ** 2)
    t = ta.tensor(x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = F.gelu(t, approximate="tanh")
        y.sum().backward()
    tiny = np.finfo(dtype).tiny  # below it, float16/32 hold fewer digits (subnormals)
    normal = np.abs(want) > 1e3 * tiny
    rel = np.abs(y.numpy() - want)[normal] / np.abs(want)[normal]
    assert rel.max() < (3e-5 if dtype == np.float32 else 8e-3), rel.max()
    np.testing.assert_allclose(t.grad.numpy(), want_grad, atol=2e-6 if dtype == np.float32
                               else 6e-3, rtol=0)


def _half_case(torch, make):
    """(ours in float16, torch's in float32) value and input gradient of make(F) on the same
    float16 values (torch's own float16 overflows in some backward passes: p = 3 norms)."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 8)) * 400).astype(np.float16)  # squares up to ~1e6 > 65504
    ours = ta.tensor(x, requires_grad=True)
    theirs = torch.tensor(x.astype(np.float32), requires_grad=True)
    out, tout = make(F, ours), make(torch.nn.functional, theirs)
    w = np.linspace(-1, 1, out.numel()).reshape(out.shape).astype(np.float16)
    (out * ta.tensor(w)).sum().backward()
    (tout * torch.tensor(w.astype(np.float32))).sum().backward()
    return (out, ours.grad), (tout, theirs.grad)


@pytest.mark.parametrize("name, make", [
    ("layer_norm", lambda f, x: f.layer_norm(x, (8,))),
    ("rms_norm", lambda f, x: f.rms_norm(x, (8,))),
    ("group_norm", lambda f, x: f.group_norm(x.reshape(3, 4, 2), 2).reshape(3, 8)),
    ("normalize", lambda f, x: f.normalize(x, dim=1)),
    ("norm", lambda f, x: x.norm(dim=1)),
    ("norm3", lambda f, x: x.norm(p=3, dim=1)),
    ("var", lambda f, x: (x / 4).var(dim=1)),
    ("std", lambda f, x: x.std(dim=1)),
    ("std_mean", lambda f, x: ta.std_mean(x, 1)[0] if isinstance(x, ta.Tensor) else x.std(1)),
])
def test_half_precision_statistics_are_summed_in_float32_as_torch(name, make):
    """A float16 value of 400 has a square of 160000, past float16's 65504: norms, variances
    and the norm layers sum their squares in float32 (as torch does) and give float16 results
    and gradients that match torch's float32 ones to float16's precision, not inf, 0 or NaN."""
    torch = pytest.importorskip("torch")
    (out, g), (tout, tg) = _half_case(torch, make)
    assert out.dtype == np.float16 and g.dtype == np.float16
    assert np.isfinite(out.numpy()).all() and np.isfinite(g.numpy()).all()
    np.testing.assert_allclose(out.numpy().astype(np.float32), tout.detach().numpy(),
                               rtol=2e-3, atol=1e-3, err_msg=name)
    np.testing.assert_allclose(g.numpy().astype(np.float32), tg.numpy(), rtol=2e-2,
                               atol=float(np.abs(tg.numpy().astype(np.float32)).max()) * 2e-3,
                               err_msg=name)
