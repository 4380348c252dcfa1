"""Autograd API as a torch user meets it, round 3: each test runs one small program in torch
and in tinyattn and compares gradients, values and errors."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


def _dirty_triple(lib):
    """A Function that triples its input in place (mark_dirty), backward g * 3."""

    class Triple(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.mark_dirty(a)
            return a.mul_(3)

        @staticmethod
        def backward(ctx, g):
            return g * 3

    return Triple


@pytest.mark.parametrize("lib", [torch, ta], ids=["torch", "tinyattn"])
def test_mark_dirty_on_a_view_rewrites_the_base_history(lib):
    triple = _dirty_triple(lib)
    x = lib.tensor([1.0, 2.0, 4.0], requires_grad=True)
    h = x * 1
    v, w = h[1:], h[:2]  # v is changed in place; w, another view, sees part of the change
    y = triple.apply(v)
    assert y is v
    np.testing.assert_allclose(h.detach().numpy(), [1.0, 6.0, 12.0])
    (h * lib.tensor([1.0, 10.0, 100.0])).sum().backward(retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 30.0, 300.0])
    x.grad = None
    (w * lib.tensor([1.0, 10.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 30.0, 0.0])


@pytest.mark.parametrize("lib", [torch, ta], ids=["torch", "tinyattn"])
def test_mark_dirty_on_a_base_moves_its_live_views_on(lib):
    x = lib.tensor([1.0, 2.0, 4.0], requires_grad=True)
    h = x * 1
    v = h[1:]
    _dirty_triple(lib).apply(h)
    (v * lib.tensor([10.0, 100.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 30.0, 300.0])


@pytest.mark.parametrize("lib", [torch, ta], ids=["torch", "tinyattn"])
def test_mark_dirty_on_a_view_of_a_leaf_is_refused(lib):
    x = lib.tensor([1.0, 2.0, 4.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf"):
        _dirty_triple(lib).apply(x[1:])


@pytest.mark.parametrize("lib", [torch, ta], ids=["torch", "tinyattn"])
@pytest.mark.parametrize("how", ["backward", "backward_inputs", "retain_grad"])
def test_grad_has_the_tensor_layout_after_a_transposed_use(lib, how):
    """torch's AccumulateGrad lays .grad out as its tensor (a retain_grad .grad contiguous):
    `p.grad.view(-1)` works after a tied weight was used as `x @ w.T`."""
    w = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    t = w * 1 if how == "retain_grad" else w
    if how == "retain_grad":
        t.retain_grad()
    loss = (lib.tensor([[1.0], [10.0], [100.0]]) * t.T).sum()  # (t.T's gradient: transposed)
    if how == "backward_inputs":
        loss.backward(inputs=[w])
    else:
        loss.backward()
    assert t.grad.is_contiguous()
    np.testing.assert_allclose(t.grad.view(-1).numpy(), [1.0, 10.0, 100.0] * 2)


@pytest.mark.parametrize("lib", [torch, ta], ids=["torch", "tinyattn"])
def test_backward_inputs_fills_a_retain_grad_tensor_once(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 1
    h.retain_grad()
    y = (h * 3).sum()
    y.backward(inputs=[h], retain_graph=True)
    np.testing.assert_allclose(h.grad.numpy(), [3.0, 3.0, 3.0])
    y.backward(inputs=[h])  # accumulates, as a leaf's would
    np.testing.assert_allclose(h.grad.numpy(), [6.0, 6.0, 6.0])
    assert x.grad is None
    h2 = x * 1
    h2.retain_grad()
    h2.register_hook(lambda g: g * 2)  # the hook's result, once
    (h2 * 3).sum().backward(inputs=[h2])
    np.testing.assert_allclose(h2.grad.numpy(), [6.0, 6.0, 6.0])


@pytest.mark.parametrize("lib", [torch, ta], ids=["torch", "tinyattn"])
def test_backward_inputs_named_twice_adds_once(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 1
    (h * 3 + x).sum().backward(inputs=[x, h, x, h])
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0, 4.0])  # (through h too)
    np.testing.assert_allclose(h.grad.numpy(), [3.0, 3.0, 3.0])


def test_legacy_register_backward_hook_names_the_full_one():
    """torch's deprecated Module.register_backward_hook (its grad_input is that of the last op
    inside forward, not the module's): refused with a message naming the replacement."""
    lin = ta.nn.Linear(2, 2)
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        lin.register_backward_hook(lambda m, gi, go: None)
    assert lin._hooks is None or not lin._hooks["backward"]


@pytest.mark.parametrize("lib", [torch, ta], ids=["torch", "tinyattn"])
def test_full_backward_hook_none_in_grad_input_gives_no_gradient(lib):
    class Mul(lib.nn.Module):
        def forward(self, a, b):
            return a * b

    m = Mul()
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 10, None))
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    (m(a, b) + b).sum().backward()  # b's other use still sends its part
    np.testing.assert_allclose(a.grad.numpy(), [30.0, 40.0])
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 1.0])
    c = lib.tensor([3.0, 4.0], requires_grad=True)
    m(a, c).sum().backward()
    assert c.grad is None  # (not zeros: an optimizer skips it)


@pytest.mark.parametrize("lib", [torch, ta], ids=["torch", "tinyattn"])
def test_jacobian_forward_mode_strategy_gives_the_jacobian(lib):
    x = lib.tensor([1.0, 2.0])
    y = lib.tensor([3.0])
    jac = lib.autograd.functional.jacobian(lambda a, b: (a * a * b, b.sum() * a), (x, y),
                                           vectorize=True, strategy="forward-mode")
    np.testing.assert_allclose(jac[0][0].numpy(), [[6.0, 0.0], [0.0, 12.0]])
    np.testing.assert_allclose(jac[0][1].numpy(), [[1.0], [4.0]])
    np.testing.assert_allclose(jac[1][0].numpy(), [[3.0, 0.0], [0.0, 3.0]])
    np.testing.assert_allclose(jac[1][1].numpy(), [[1.0], [2.0]])
    with pytest.raises(NotImplementedError, match="vectorize=True"):  # (torch's rule)
        lib.autograd.functional.jacobian(lambda a: a * 2, x, strategy="forward-mode")
