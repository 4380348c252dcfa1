"""`Tensor.data` as torch's: a detached tensor sharing the original's memory (requires_grad
False, no history, a version counter of its own, so in-place writes through it are not seen by
autograd), and `t.data = other` swapping the values a tensor holds. The torch idioms built on it
(`w.data.normal_(0, 0.02)`, `p.data.add_(p.grad, alpha=-lr)`, `p.grad.data.zero_()`,
`out.data.max(1)[1]`) work as in torch; the last tests run the same code on torch and compare."""

import numpy as np
import pytest

import tinyattn as ta

# ---- what .data is ----------------------------------------------------------------------------


def test_data_is_a_detached_tensor_sharing_memory():
    t = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    d = t.data
    assert type(d) is ta.Tensor
    assert d.requires_grad is False and d.grad_fn is None and d.is_leaf
    assert d.shape == (3,) and d.dtype == t.dtype and d.ndim == 1 and d.device == t.device
    assert d._data is t._data  # the same array, no copy
    assert d is not t.data  # each read a new tensor (as torch's), on the one memory
    assert t.data.data_ptr() == t.data_ptr()
    d[0] = 10.0  # a write through it shows in the tensor
    np.testing.assert_array_equal(t.detach().numpy(), [10.0, 2.0, 3.0])
    assert t.requires_grad  # untouched


def test_data_of_an_interior_tensor_has_no_history():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    d = y.data
    assert d.grad_fn is None and d.requires_grad is False and d.is_leaf
    assert y.grad_fn is not None
    np.testing.assert_array_equal(d.numpy(), [3.0, 6.0])


def test_data_of_a_parameter_is_a_plain_tensor():
    p = ta.nn.Parameter(ta.ones(2, 3))
    assert type(p.data) is ta.Tensor
    assert not isinstance(p.data, ta.nn.Parameter)
    assert p.data.requires_grad is False


def test_a_write_through_data_reaches_a_0d_result():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()  # 0-d
    loss.data.fill_(7.0)
    assert loss.item() == 7.0
    s = ta.tensor([3.0]).sum()
    s.data += 1
    assert s.item() == 4.0


def test_data_of_an_inference_tensor_is_one():
    with ta.inference_mode():
        t = ta.ones(2)
    assert t.data.is_inference()  # as torch's
    assert not ta.ones(2).data.is_inference()
    t.data.fill_(3.0)  # its own counter: t's stays
    assert t.tolist() == [3.0, 3.0] and t._version == 0


def test_values_through_data():
    t = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    np.testing.assert_array_equal(t.data.numpy(), [[1.0, 2.0], [3.0, 4.0]])
    c = t.data.clone()
    assert type(c) is ta.Tensor and c.requires_grad is False
    c.fill_(0)  # a clone is a copy
    assert t.sum().item() == 10.0
    assert t.data.cpu().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert t.data.shape == (2, 2) and t.data.size(1) == 2 and t.data.numel() == 4
    assert t.data.sum().item() == 10.0


# ---- the in-place idioms ----------------------------------------------------------------------


def test_weight_init_through_data():
    ta.manual_seed(0)
    m = ta.nn.Linear(50, 40)
    w_before = m.weight.detach().numpy().copy()
    out = m.weight.data.normal_(0, 0.02)
    assert out.requires_grad is False
    assert isinstance(m.weight, ta.nn.Parameter) and m.weight.requires_grad
    w = m.weight.detach().numpy()
    assert not np.array_equal(w, w_before)
    assert abs(w.std() - 0.02) < 0.004 and abs(w.mean()) < 0.004
    m.bias.data.fill_(0.01)
    np.testing.assert_allclose(m.bias.detach().numpy(), np.full(40, 0.01, np.float32))
    m.weight.data.uniform_(-0.1, 0.1)
    assert np.abs(m.weight.detach().numpy()).max() <= 0.1


def test_clamp_copy_and_zero_through_data():
    p = ta.tensor([-3.0, 0.5, 2.0], requires_grad=True)
    p.data.clamp_(-1, 1)
    np.testing.assert_array_equal(p.detach().numpy(), [-1.0, 0.5, 1.0])
    q = ta.tensor([7.0, 8.0, 9.0], requires_grad=True)
    p.data.copy_(q.data)
    np.testing.assert_array_equal(p.detach().numpy(), [7.0, 8.0, 9.0])
    assert p._data is not q._data  # copy_ copies
    p.data.zero_()
    np.testing.assert_array_equal(p.detach().numpy(), [0.0, 0.0, 0.0])
    assert p.requires_grad and p.is_leaf


def test_grad_data_zero_zeroes_the_grad():
    w = ta.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])
    w.grad.data.zero_()
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])
    (w * w).sum().backward()  # accumulates into the zeroed grad
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])


def test_add_with_alpha_through_data_is_an_sgd_step():
    p = ta.tensor([1.0, 2.0], requires_grad=True)
    (p * p).sum().backward()
    p.data.add_(p.grad, alpha=-0.1)
    np.testing.assert_allclose(p.detach().numpy(), [0.8, 1.6], rtol=1e-6)
    assert p.grad_fn is None and p.is_leaf and p.requires_grad


def test_inplace_through_data_after_a_forward_does_not_raise_at_backward():
    w = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = ta.tensor([4.0, 5.0, 6.0], requires_grad=True)
    y = (x * w).sum()  # mul saves w for x's gradient
    v = w._version
    w.data.mul_(2)  # not tracked: no version bump of w
    assert w._version == v
    y.backward()  # as torch: no "modified by an inplace operation" error
    # as torch, the saved w is the same memory: x's gradient sees the new values
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(w.grad.numpy(), [4.0, 5.0, 6.0])


def test_inplace_on_the_tensor_itself_is_still_tracked():
    w = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = ta.tensor([4.0, 5.0, 6.0], requires_grad=True)
    y = (x * w.clone()).sum()
    c = w.clone()
    y2 = (x * c).sum()
    with ta.no_grad():
        c.mul_(2)  # the tensor's own in-place change is counted, .data's is not
    with pytest.raises(ta.GraphError, match="changed in place"):
        y2.backward()
    y.backward()


def test_max_indices_through_data():
    out = ta.tensor([[1.0, 3.0, 2.0], [5.0, 4.0, 0.0]], requires_grad=True)
    pred = out.data.max(1)[1]
    assert isinstance(pred, ta.Tensor)
    assert pred.tolist() == [1, 0]
    assert pred.dtype == np.int64
    target = ta.tensor([1, 2])
    assert pred.eq(target).sum().item() == 1


# ---- the setter -------------------------------------------------------------------------------


def test_setting_data_swaps_the_values():
    t = ta.zeros(3, requires_grad=True)
    other = ta.ones(2, 2, dtype=ta.float64)
    t.data = other
    assert t.data.requires_grad is False and type(t.data) is ta.Tensor
    assert t.shape == (2, 2) and t.dtype == np.float64
    assert t.requires_grad and t.is_leaf  # as torch: the flag stays
    assert t._data is other._data  # the other's memory
    other.fill_(5.0)
    assert t.sum().item() == 20.0
    t.data = np.arange(3.0)  # a backend array is still taken
    np.testing.assert_array_equal(t.detach().numpy(), [0.0, 1.0, 2.0])
    with pytest.raises(TypeError):
        t.data = [1.0, 2.0]


def test_augmented_assignment_on_data():
    t = ta.tensor([1.0, 2.0], requires_grad=True)
    d = t.data
    d += 1  # in place: the tensor's own memory
    assert isinstance(d, ta.Tensor) and d._data is t._data
    t.data += 1  # in place through .data, then given back
    np.testing.assert_array_equal(t.detach().numpy(), [3.0, 4.0])
    t.data *= 2
    np.testing.assert_array_equal(t.detach().numpy(), [6.0, 8.0])
    assert t.requires_grad and t.is_leaf


def test_an_optimizer_loop_written_with_data_trains_like_sgd():
    def run(manual):
        ta.manual_seed(3)
        model = ta.nn.Linear(4, 1)
        x = ta.randn(16, 4)
        y = x.sum(1, keepdim=True) * 0.5
        opt = ta.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for _ in range(20):
            loss = ((model(x) - y) ** 2).mean()
            if manual:
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.data.zero_()
            else:
                opt.zero_grad()
            loss.backward()
            if manual:
                for p in model.parameters():
                    p.data.add_(p.grad.data, alpha=-0.1)
            else:
                opt.step()
            losses.append(loss.item())
        return losses, [p.detach().numpy().copy() for p in model.parameters()]

    manual, manual_params = run(True)
    sgd, sgd_params = run(False)
    assert manual[-1] < manual[0] * 0.5
    np.testing.assert_allclose(manual, sgd, rtol=1e-5)
    for a, b in zip(manual_params, sgd_params, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_data_on_the_fake_cupy_backend(monkeypatch):
    import fake_cupy  # tests/support is on sys.path (tests/conftest.py)

    be = fake_cupy.install(monkeypatch, kernels=False)
    t = ta.tensor([1.0, 2.0], requires_grad=True, backend=be)
    d = t.data
    assert type(d) is ta.Tensor and d.backend is t.backend and d._data is t._data
    assert isinstance(d._data, fake_cupy.FakeArray)
    d.mul_(3)
    assert t.detach().tolist() == [3.0, 6.0]
    p = ta.nn.Parameter(ta.ones(3, backend=be))
    (p * 2).sum().backward()
    p.data.add_(p.grad.data, alpha=-0.5)
    assert p.tolist() == [0.0, 0.0, 0.0]


# ---- against torch ----------------------------------------------------------------------------


def test_the_idioms_match_torch():
    torch = pytest.importorskip("torch")
    results = {}
    for lib in (ta, torch):
        w = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        x = lib.tensor([4.0, 5.0, 6.0], requires_grad=True)
        y = (x * w).sum() + w.exp().sum()
        w.data.mul_(2)
        y.backward()
        d = w.data
        w.grad.data.zero_()
        q = lib.tensor([[1.0, 3.0, 2.0], [5.0, 4.0, 0.0]], requires_grad=True)
        p = lib.tensor([-3.0, 0.5, 2.0], requires_grad=True)
        p.data.clamp_(-1, 1)
        p.data.add_(lib.tensor([1.0, 1.0, 1.0]), alpha=-0.5)
        t = lib.zeros(3, requires_grad=True)
        t.data = lib.ones(2, 2)
        results[lib.__name__] = dict(
            x_grad=x.grad.tolist(), w=w.detach().tolist(), w_grad=w.grad.tolist(),
            flags=(d.requires_grad, d.grad_fn is None, d.is_leaf, w.requires_grad),
            max=q.data.max(1)[1].tolist(), argmax_kind=str(q.data.max(1)[1].dtype)[-5:],
            p=p.detach().tolist(), t=(t.tolist(), t.requires_grad, list(t.shape)),
            param=type(lib.nn.Parameter(lib.ones(2)).data).__name__,
            version=(w._version, d._version))
    assert results["tinyattn"] == results["torch"]
