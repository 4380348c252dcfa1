"""Autograd behaviours that mutation testing found unobserved: the memory layout of a leaf's
.grad, retain_grad's bookkeeping of dead tensors, `t.data = v` as a recording's tracers are told
of it, and set_grad_enabled undone from another context."""

import contextvars
import gc

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import autograd


@pytest.mark.parametrize("how", ["backward", "inputs"])
def test_a_leaf_in_fortran_order_gets_its_grad_in_its_own_layout(how):
    # as torch's AccumulateGrad: a leaf's .grad has the leaf's strides, whatever layout the VJP
    # gave (here C order, from the broadcast of sum's gradient times 3)
    x = ta.tensor(np.asfortranarray(np.arange(6.0).reshape(2, 3)), requires_grad=True)
    assert x._data.flags.f_contiguous and not x._data.flags.c_contiguous
    loss = (x * 3).sum()
    if how == "backward":
        loss.backward()
    else:
        loss.backward(inputs=[x])
    assert x.grad.stride() == x.stride() == (1, 2)
    assert x.grad._data.flags.f_contiguous
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 3.0))


def test_a_fortran_leaf_whose_gradient_comes_in_its_layout_keeps_it():
    x = ta.tensor(np.asfortranarray(np.arange(6.0).reshape(2, 3)), requires_grad=True)
    (x * x).sum().backward()  # 2 * x: computed in x's own (Fortran) layout
    assert x.grad.stride() == x.stride()
    np.testing.assert_array_equal(x.grad.numpy(), 2 * np.arange(6.0).reshape(2, 3))


def test_retain_grad_forgets_each_tensor_once_it_is_gone():
    # a training loop that calls retain_grad() on an intermediate every step keeps nothing of
    # the steps before (no bookkeeping left behind per dead tensor)
    gc.collect()
    before = len(autograd._retained)
    # everything alive now is older than the tensors below: the collections in the loop skip it
    # (a full collection of the test session's heap takes a few hundred ms)
    gc.freeze()
    try:
        w = ta.ones(3, requires_grad=True)
        for step in range(5):
            h = w * (step + 1)
            h.retain_grad()
            assert len(autograd._retained) == before + 1
            h.sum().backward()
            assert h.grad.numpy().tolist() == [1.0, 1.0, 1.0]
            del h
            gc.collect()
            assert len(autograd._retained) == before
        assert w.grad.numpy().tolist() == [15.0] * 3
    finally:
        gc.unfreeze()


class _Changes(autograd.Tracer):
    def __init__(self):
        self.changes, self.reads = [], []

    def changed(self, tensor, what):
        self.changes.append((tensor, what))

    def read(self, tensor, how):
        self.reads.append((tensor, how))


def test_data_assignment_in_a_recording_is_a_change_only_when_it_swaps_the_array():
    t = ta.tensor([1.0, 2.0])
    tracer = _Changes()
    with autograd.watching_data_reads(), autograd.tracing(tracer):
        t.data += 1  # the same array, written in place: its read of .data and the write
        # ("values", through the read's tensor), no "data" change of t
        assert [what for _, what in tracer.changes] == ["values"]
        assert [(x is t, how) for x, how in tracer.reads] == [(True, ".data")]
        t.data = ta.tensor([5.0, 6.0])  # another array: a change
        assert [(x is t, what) for x, what in tracer.changes[1:]] == [(True, "data")]
        t.data = t  # its own array again: no change
        assert [what for _, what in tracer.changes] == ["values", "data"]
    assert t.numpy().tolist() == [5.0, 6.0]


def test_data_assignment_with_no_recording_tells_no_tracer():
    t = ta.tensor([1.0, 2.0])
    tracer = _Changes()
    with autograd.watching_data_reads():  # watched, but no tracer in this context
        t.data = ta.tensor([3.0, 4.0])
    with autograd.tracing(tracer):  # a tracer, but .data not watched
        t.data = ta.tensor([7.0, 8.0])
    assert tracer.changes == [] and t.numpy().tolist() == [7.0, 8.0]


def test_set_grad_enabled_made_in_another_context_leaves_this_ones_mode_as_it_was():
    # made (and so applied) in a copied context, then used as a decorator here: putting back
    # "the mode before" cannot reset the other context's change, and sets the mode from before
    assert ta.is_grad_enabled()
    ctx = contextvars.copy_context()
    off = ctx.run(ta.set_grad_enabled, False)
    assert ctx.run(ta.is_grad_enabled) is False and ta.is_grad_enabled() is True

    @off
    def inner(x):
        return ta.is_grad_enabled(), (x * 2).requires_grad

    assert ta.is_grad_enabled() is True
    x = ta.ones(2, requires_grad=True)
    assert (x * 2).requires_grad
    assert inner(x) == (False, False)
    assert ta.is_grad_enabled() is True and (x * 2).requires_grad
