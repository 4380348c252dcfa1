"""Andrej Karpathy's makemore series (the MLP, BatchNorm, "becoming a backprop ninja", WaveNet)
and micrograd-style scalar code, ported from torch to tinyattn by swapping `torch` for `ta`:
each test is a defect a learner met there, pinned against torch where torch gives the number."""

import numpy as np
import pytest

import tinyattn as ta

# ---- part 3: torch.histogram of activations and gradients ------------------------------------


def test_histogram_matches_torch():
    # makemore part 3: hy, hx = torch.histogram(t, density=True); plt.plot(hx[:-1], hy)
    torch = pytest.importorskip("torch")
    a = np.tanh(np.random.default_rng(0).standard_normal((32, 64)) * 2).astype(np.float32)
    for kwargs in ({}, {"bins": 50}, {"density": True}, {"bins": 7, "range": (-0.5, 0.5)}):
        h, edges = ta.histogram(ta.tensor(a), **kwargs)
        th, tedges = torch.histogram(torch.tensor(a), **kwargs)
        assert h.dtype == ta.float32 and edges.dtype == ta.float32
        np.testing.assert_allclose(edges.numpy(), tedges.numpy(), rtol=0, atol=1e-6)
        np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-5, atol=1e-6)
    out = ta.tensor(a).histogram(bins=ta.tensor([-1.0, 0.0, 0.5, 1.0]), density=True)
    tout = torch.tensor(a).histogram(bins=torch.tensor([-1.0, 0.0, 0.5, 1.0]), density=True)
    np.testing.assert_allclose(out.hist.numpy(), tout.hist.numpy(), rtol=1e-6)
    assert out.bin_edges.tolist() == [-1.0, 0.0, 0.5, 1.0]
    w = ta.tensor([1.0, 2.0, 3.0, 4.0])
    got = ta.histogram(ta.tensor([1.0, 2.0, 3.0, 4.0]), 2, weight=w, density=True)
    want = torch.histogram(torch.tensor([1.0, 2.0, 3.0, 4.0]), 2,
                           weight=torch.tensor([1.0, 2.0, 3.0, 4.0]), density=True)
    np.testing.assert_allclose(got.hist.numpy(), want.hist.numpy(), rtol=1e-6)
    for x in ([2.0, 2.0, 2.0], []):  # one value: widened by 0.5 each way; none: [0, 1]
        got, want = ta.histogram(ta.tensor(x), 4), torch.histogram(torch.tensor(x), 4)
        assert got.hist.tolist() == want.hist.tolist()
        assert got.bin_edges.tolist() == want.bin_edges.tolist()


def test_histogram_errors_name_the_op():
    with pytest.raises(ta.DTypeError, match="histogram.*int64"):
        ta.histogram(ta.tensor([1, 2]), 2)
    with pytest.raises(ValueError, match="histogram.*bins"):
        ta.histogram(ta.tensor([1.0, 2.0]), 0)
    with pytest.raises(ValueError, match="histogram.*min"):
        ta.histogram(ta.tensor([1.0, 2.0]), 2, range=(3.0, 1.0))
    with pytest.raises(ValueError, match="histogram.*finite"):
        ta.histogram(ta.tensor([1.0, float("nan")]), 2)
    with pytest.raises(ta.ShapeError, match=r"histogram.*weight.*\(2,\).*\(1,\)"):
        ta.histogram(ta.tensor([1.0, 2.0]), 2, weight=ta.tensor([1.0]))
    with pytest.raises(ta.DTypeError, match="histogram.*weight.*float64.*float32"):
        ta.histogram(ta.tensor([1.0, 2.0]), 2, weight=ta.tensor([1.0, 2.0], dtype=ta.float64))
    with pytest.raises(ValueError, match="histogram.*edges must increase"):
        ta.histogram(ta.tensor([1.0, 2.0]), ta.tensor([2.0, 1.0, 3.0]))
    with pytest.raises(ta.DTypeError, match="histogram.*float64.*float32"):
        ta.histogram(ta.tensor([1.0, 2.0]), ta.tensor([1.0, 2.0], dtype=ta.float64))


# ---- part 4: the backprop ninja's cmp(): exact where torch is exact --------------------------


def _ninja_logits(lib, a):
    logits = lib.tensor(a, requires_grad=True)
    logit_maxes = logits.max(1, keepdim=True).values
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    probs = counts / counts.sum(1, keepdims=True)
    loss = -probs.log()[range(a.shape[0]), [i % a.shape[1] for i in range(a.shape[0])]].mean()
    for t in (logit_maxes, norm_logits):
        t.retain_grad()
    loss.backward()
    return logit_maxes, norm_logits


def test_broadcast_gradient_over_last_dim_is_the_forward_sum():
    # `dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)`; cmp('logit_maxes', ...) printed
    # exact: False (maxdiff 2.8e-09) where torch prints True: backward summed the broadcast
    # dim with NumPy's reduction, x.sum(1) with the backend's row sums
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal((32, 27)).astype(np.float32)
    for lib in (torch, ta):
        logit_maxes, norm_logits = _ninja_logits(lib, a)
        dlogit_maxes = (-norm_logits.grad).sum(1, keepdim=True)
        assert lib.all(dlogit_maxes == logit_maxes.grad).item(), lib.__name__
    for shape, dims in (((4, 6, 5), (2,)), ((4, 6, 5), (1, 2)), ((6, 70), (1,))):
        x = ta.tensor(np.random.default_rng(1).standard_normal(shape).astype(np.float32))
        b = ta.zeros(shape[:-len(dims)] + (1,) * len(dims), requires_grad=True)
        (x * 0 + b).backward(x)
        assert ta.all(b.grad == x.sum(dims, keepdim=True)).item(), shape


# ---- micrograd: tanh written with exp and /, gradients to the bit ----------------------------


def test_div_gradients_are_torchs_to_the_bit():
    # micrograd's tanh as (e - 1) / (e + 1) with e = (2x).exp(): x.grad came out
    # 0.4999999999999999 where torch (and the lecture) give 0.5; the divisor's gradient was
    # -(g / y) * x / y, torch's is -g * ((x / y) / y), and c / y's -(g c) * (r * r)
    torch = pytest.importorskip("torch")
    grads = {}
    for lib in (torch, ta):
        x = lib.tensor(0.8813735870195432, dtype=lib.float64, requires_grad=True)
        e = (2 * x).exp()
        ((e - 1) / (e + 1)).backward()
        grads[lib.__name__] = [x.grad.item()]
        rng = np.random.default_rng(0)
        a, b, g = rng.standard_normal(500), rng.standard_normal(500) + 3, rng.standard_normal(500)
        for dtype in (lib.float64, lib.float32):
            xa = lib.tensor(a, dtype=dtype, requires_grad=True)
            yb = lib.tensor(b, dtype=dtype, requires_grad=True)
            zb = lib.tensor(b, dtype=dtype, requires_grad=True)
            (xa / yb).backward(lib.tensor(g, dtype=dtype))
            (2.5 / zb).backward(lib.tensor(g, dtype=dtype))
            grads[lib.__name__] += [t.grad.numpy().tolist() for t in (xa, yb, zb)]
    assert grads["tinyattn"][0] == 0.5
    assert grads["tinyattn"] == grads["torch"]
