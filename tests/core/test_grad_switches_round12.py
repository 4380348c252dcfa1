"""requires_grad (the factories' keyword, Tensor.requires_grad_ and its setter, Parameter,
Module.requires_grad_), set_grad_enabled's mode and clip_grad_norm_'s max_norm take what torch
takes: a bool (NumPy's too) for the switches, a number for max_norm. 1, None or "yes" is
refused naming what was set, where its truth was taken without a word."""

import numpy as np
import pytest

import tinyattn as ta

NOT_BOOLS = [1, 0, None, "yes", 0.5]


def _setters():
    yield "ones(requires_grad=)", lambda lib, b: lib.ones(2, requires_grad=b)
    yield "tensor(requires_grad=)", lambda lib, b: lib.tensor([1.0], requires_grad=b)
    yield "Tensor.requires_grad_", lambda lib, b: lib.zeros(2).requires_grad_(b)
    yield "Tensor.requires_grad =", _assigned
    yield "Parameter", lambda lib, b: lib.nn.Parameter(lib.ones(2), requires_grad=b)
    yield "Module.requires_grad_", lambda lib, b: lib.nn.Linear(2, 2).requires_grad_(b).weight


def _assigned(lib, flag):
    t = lib.zeros(2)
    t.requires_grad = flag
    return t


SETTERS = list(_setters())


@pytest.mark.parametrize("bad", NOT_BOOLS, ids=repr)
@pytest.mark.parametrize(("what", "call"), SETTERS, ids=[s[0] for s in SETTERS])
def test_requires_grad_must_be_a_bool(what, call, bad):
    with pytest.raises(TypeError, match="requires_grad must be a bool"):
        call(ta, bad)
    torch = pytest.importorskip("torch")
    if what.startswith("ones") and bad is None:
        return  # (torch's factories read None as their default False; its tensor() refuses it)
    with pytest.raises((TypeError, RuntimeError)):
        call(torch, bad)


@pytest.mark.parametrize(("what", "call"), SETTERS, ids=[s[0] for s in SETTERS])
def test_bools_are_taken(what, call):
    for flag in (True, False, np.bool_(True), np.bool_(False)):
        assert call(ta, flag).requires_grad is bool(flag)


def test_a_numpy_bool_switches_it():
    t = ta.zeros(2).requires_grad_(np.bool_(True))
    assert t.requires_grad is True
    t.requires_grad = np.bool_(False)
    assert t.requires_grad is False


@pytest.mark.parametrize("bad", NOT_BOOLS, ids=repr)
def test_set_grad_enabled_mode_must_be_a_bool(bad):
    before = ta.is_grad_enabled()
    with pytest.raises(TypeError, match="^set_grad_enabled: mode must be a bool"):
        ta.set_grad_enabled(bad)
    assert ta.is_grad_enabled() == before  # (a refused call switches nothing)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        torch.set_grad_enabled(bad)


@pytest.mark.parametrize("bad", [None, "yes"])
def test_clip_grad_norm_max_norm_must_be_a_number(bad):
    p = ta.nn.Parameter(ta.ones(3))
    p.grad = ta.full((3,), 2.0)
    with pytest.raises(TypeError, match="^clip_grad_norm_: max_norm must be a number"):
        ta.nn.utils.clip_grad_norm_([p], bad)
    with pytest.raises(TypeError, match="^clip_grad_norm_: max_norm must be a number"):
        ta.nn.utils.clip_grad_norm_([ta.nn.Parameter(ta.ones(3))], bad)  # (no gradient yet)
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 2.0, 2.0])  # nothing scaled


def test_clip_grad_norm_takes_a_0d_tensor():
    torch = pytest.importorskip("torch")
    p, q = ta.nn.Parameter(ta.ones(3)), torch.nn.Parameter(torch.ones(3))
    p.grad, q.grad = ta.full((3,), 2.0), torch.full((3,), 2.0)
    got = ta.nn.utils.clip_grad_norm_([p], ta.tensor(1.0))
    want = torch.nn.utils.clip_grad_norm_([q], torch.tensor(1.0))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6)
