"""ta.capture, where mutation testing found it untested: a tensor changed in place or given
another array by tinyattn's own code inside fn (which the tracer is not told of) keeps the step
eager, named; and the word after four fresh starts names a tensor rebound by name."""

import warnings

import numpy as np
import pytest

import tinyattn as ta


def test_an_in_place_change_after_the_read_made_by_a_method_of_several_ops_is_named():
    """c.sinc_() (a method made of several ops, not recorded: c needs no grad) after the loss
    read c: what the recording sees is c's version moved, said as an in-place change."""
    w = ta.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)

    def fn(x):
        c = x * 2
        loss = (w + c).sum()
        c.sinc_()
        return loss

    step = ta.capture(fn)
    with pytest.warns(UserWarning) as seen:
        for _ in range(3):
            w.grad = None
            assert step(ta.ones(3, 4)).item() == 66.0 + 24.0
            np.testing.assert_array_equal(w.grad.numpy(), np.ones((3, 4)))
    assert step.state == "eager: a tensor was changed in place inside fn"
    assert [str(r.message) for r in seen] == [
        "capture: a tensor was changed in place inside fn; running fn eagerly from now on"]


def test_weights_given_new_arrays_before_fn_reads_them_keep_the_step_eager():
    """fn rounds its module's weights through float16 (m.half(); m.float(): new arrays, by
    tinyattn's code) before it reads them. A replay would not round them again: from the second
    call (the first whose weights' arrays are not those the last recording read) the step is
    eager, and every call rounds the weights moved between calls, as fn does uncaptured."""
    m = ta.nn.Linear(3, 1, bias=False)
    with ta.no_grad():
        m.weight.copy_(ta.tensor([[1.0, 2.0, 3.0]]))

    def fn(x):
        m.half()
        m.float()
        return (m.weight * x).sum()

    step = ta.capture(fn)
    x = ta.ones(1, 3)
    with pytest.warns(UserWarning) as seen:
        for k in range(5):
            nudge = np.float32(5e-5 * (k + 1))  # under half float16's step at 1: rounded off
            with ta.no_grad():
                m.weight.add_(nudge)
            want = float(np.float16(1 + nudge)) + float(np.float16(2 + nudge)) + float(
                np.float16(3 + nudge))
            assert step(x).item() == want == 6.0
            np.testing.assert_array_equal(m.weight.numpy(), [[1.0, 2.0, 3.0]])
    assert step.state.startswith("eager: fn replaced a tensor's .data (t.data = ...)")
    assert len(seen) == 1 and str(seen[0].message).startswith(
        "capture: fn replaced a tensor's .data (t.data = ...), which a replay would not do again")


def test_a_tensor_rebound_by_name_on_every_call_is_named_once():
    """A closure's tensor rebound to another on each call: each recording starts afresh; the
    fourth fresh start in a row says so, naming the rebinding, and the step stays right."""
    w = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    scales = [ta.tensor(float(k)) for k in range(1, 7)]  # (kept: no id taken again)
    scale = scales[0]

    def fn(x):
        return (w * x * scale).sum()

    step = ta.capture(fn)
    x = ta.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the first call and three fresh starts: no word yet
        for k in range(4):
            scale = scales[k]
            assert step(x).item() == 6.0 * (k + 1)
    scale = scales[4]
    with pytest.warns(UserWarning) as seen:
        assert step(x).item() == 30.0
    assert [str(r.message) for r in seen] == [
        "capture: fn was recorded anew on 4 calls in a row because a number or tensor it reads "
        "by name (rebound), or a list, dict or set or an object's attribute it reaches (changed "
        "in place; by fn itself, a counter?) changed between calls; it replays once two calls "
        "in a row agree (still eager, still right)"]
    assert step.state == "recording"
    w.grad = None
    assert step(x).item() == 30.0 and step(x).item() == 30.0  # agreed: replays, still right
    assert step.state == "replaying"
    np.testing.assert_array_equal(w.grad.numpy(), [10.0, 10.0, 10.0])


# ---- the draw of replay taken again after its guard grew (2026-11-28 01:12) ------------------


def test_a_grad_call_inside_fn_is_refused_with_what_to_do_instead():
    w = ta.randn(4, requires_grad=True)

    def fn(x):
        y = (w * x).sum()
        ta.autograd.grad(y, [w], retain_graph=True)
        return y

    step = ta.capture(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step(ta.randn(4))
    assert step.state == ("eager: fn called autograd.grad(), which a replay would not call "
                          "again (the Python in fn runs only while recording); call fn "
                          "uncaptured (a replay runs no grad() and makes no tensor from one)")


def test_an_integer_tensor_first_and_a_float_one_replay_in_the_float_dtype():
    """arange(4) + w * x: add's inputs int64 then float32, promoted to float32 as eager does
    (NumPy alone would make float64)."""
    w = ta.randn(4, requires_grad=True)
    step = ta.capture(lambda x: (ta.arange(4) + w * x).sum())
    for i in range(4):
        x = ta.tensor(np.random.default_rng(i).standard_normal(4).astype(np.float32))
        w.grad = None
        loss = step(x)
        assert loss.dtype == ta.float32 and w.grad.dtype == ta.float32
        np.testing.assert_array_equal(w.grad.numpy(), x.numpy())
        assert loss.item() == pytest.approx(6 + float((w.detach() * x).sum().item()), rel=1e-6)
    assert step.state == "replaying"


def test_an_attribute_of_a_config_object_changed_between_calls_is_seen():
    """Only cfg.scale changes (no list, no global): the replay uses the new value."""
    import types

    cfg = types.SimpleNamespace(scale=1.0)
    w = ta.randn(3, requires_grad=True)
    step = ta.capture(lambda x: (w * x * cfg.scale).sum())
    x = ta.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for scale in (1.0, 1.0, 1.0, 3.0, 3.0):
            cfg.scale = scale
            w.grad = None
            loss = step(x)
            np.testing.assert_allclose(w.grad.numpy(), [scale] * 3)
            assert loss.item() == pytest.approx(scale * float(w.detach().sum().item()), rel=1e-6)
