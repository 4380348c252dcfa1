"""Autograd features that a PyTorch user leans on, checked against torch's behaviour: custom
Functions and saved tensors changed in place, grad-mode decorators (bare, on generators,
set_grad_enabled), autograd.grad with non-leaf inputs, grad mode during backward, hooks and the
arrays they see, retain_grad through in-place ops, assigning .grad, gradcheck's torch forms,
and anomaly messages that say what their inputs hold."""

import numpy as np
import pytest

import tinyattn as ta


def leaf(values, dtype=np.float64):
    return ta.tensor(np.asarray(values, dtype=dtype), requires_grad=True)


class Square(ta.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class Exp(ta.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


# ---- custom Functions: saved tensors changed in place ------------------------------------------


def test_a_function_refuses_a_saved_input_changed_in_place():
    """As the built-in ops (and torch): backward would compute from the new values."""
    x = leaf([1.0, 2.0, 3.0])
    h = x * 1.0
    y = Square.apply(h)
    with ta.no_grad():
        h.add_(100.0)
    with pytest.raises(ta.GraphError, match=r"backward: Square saved its input 0 \(shape "
                                            r"\(3,\)\) to compute its gradient, and that tensor "
                                            r"was changed in place afterwards \(it is at version "
                                            r"1, Square needs version 0\)"):
        y.sum().backward()


def test_a_function_refuses_its_saved_output_changed_in_place():
    x = leaf([0.0, 1.0])
    y = Exp.apply(x)
    z = y.sum()
    with ta.no_grad():
        y.mul_(0.0)
    with pytest.raises(ta.GraphError, match=r"backward: Exp saved its output \(shape \(2,\)\)"):
        z.backward()


def test_a_function_whose_saved_tensors_are_untouched_still_backpropagates():
    x = leaf([1.0, 2.0])
    h = x * 1.0
    y = Square.apply(h)
    other = h + 0.0  # h used elsewhere, not changed
    (y.sum() + other.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 5.0])


def test_a_function_with_an_integer_or_bool_output_does_not_require_grad():
    class Argmax(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.argmax()

        @staticmethod
        def backward(ctx, g):
            return None

    class Positive(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x > 0

        @staticmethod
        def backward(ctx, g):
            return None

    x = leaf([1.0, -3.0, 2.0])
    for out in (Argmax.apply(x), Positive.apply(x)):
        assert not out.requires_grad and out.grad_fn is None
        with pytest.raises(ta.GraphError, match="does not require grad"):
            out.sum().backward()


# ---- grad-mode decorators ---------------------------------------------------------------------


def test_set_grad_enabled_as_a_decorator_leaves_the_mode_alone():
    """torch: constructing it sets the mode (the statement form), decorating puts the mode
    back, and only calls of the decorated function run in it."""
    @ta.set_grad_enabled(False)
    def double(t):
        return t * 2, ta.is_grad_enabled()

    assert ta.is_grad_enabled()
    x = leaf([1.0])
    assert (x * 2).requires_grad
    out, mode = double(x)
    assert mode is False and not out.requires_grad
    assert ta.is_grad_enabled()

    ta.set_grad_enabled(False)  # the statement form still switches the mode
    try:
        assert not ta.is_grad_enabled()
        out, mode = ta.set_grad_enabled(True)(lambda t: (t * 2, ta.is_grad_enabled()))(x)
        assert mode is True and out.requires_grad
        assert not ta.is_grad_enabled()  # decorating under no grad leaves it off
    finally:
        ta.set_grad_enabled(True)


def test_a_set_grad_enabled_object_entered_again_sets_its_mode_again():
    manager = ta.set_grad_enabled(False)
    assert not ta.is_grad_enabled()
    with manager:
        assert not ta.is_grad_enabled()
    assert ta.is_grad_enabled()  # the mode before it was made
    with manager:
        assert not ta.is_grad_enabled()
    assert ta.is_grad_enabled()


@pytest.mark.parametrize("make", [lambda f: ta.no_grad(f), lambda f: ta.no_grad()(f),
                                  lambda f: ta.inference_mode(f),
                                  lambda f: ta.inference_mode()(f)],
                         ids=["no_grad", "no_grad()", "inference_mode", "inference_mode()"])
def test_no_grad_and_inference_mode_decorate_bare_and_called(make):
    double = make(lambda t: t * 2)
    x = leaf([1.0, 2.0])
    out = double(x)
    assert isinstance(out, ta.Tensor) and not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
    assert ta.is_grad_enabled()


def test_enable_grad_decorates_bare_and_called():
    x = leaf([1.0])
    for decorated in (ta.enable_grad(lambda t: t * 2), ta.enable_grad()(lambda t: t * 2)):
        with ta.no_grad():
            assert decorated(x).requires_grad
            assert not ta.is_grad_enabled()


@pytest.mark.parametrize("mode", ["no_grad", "no_grad()", "enable_grad", "inference_mode",
                                  "set_grad_enabled(False)"])
def test_a_decorated_generator_runs_its_body_in_the_mode_at_every_resumption(mode):
    """torch's decorators wrap a generator: its body runs in the mode each time it resumes
    (next and send), and the caller's mode is back in between."""
    decorate = {"no_grad": ta.no_grad, "no_grad()": ta.no_grad(),
                "enable_grad": ta.enable_grad, "inference_mode": ta.inference_mode,
                "set_grad_enabled(False)": ta.set_grad_enabled(False)}[mode]
    inside = mode == "enable_grad"
    x = leaf([1.0])

    @decorate
    def steps(t):
        got = yield (t * 2).requires_grad, ta.is_grad_enabled()
        yield (t * got).requires_grad, ta.is_grad_enabled()
        return "done"

    outside = not inside
    ta.set_grad_enabled(outside)
    try:
        gen = steps(x)
        assert next(gen) == (inside, inside)
        assert ta.is_grad_enabled() is outside
        assert gen.send(3.0) == (inside, inside)
        assert ta.is_grad_enabled() is outside
        with pytest.raises(StopIteration) as info:
            next(gen)
        assert info.value.value == "done"
        assert ta.is_grad_enabled() is outside
    finally:
        ta.set_grad_enabled(True)


# ---- autograd.grad with a non-leaf input ------------------------------------------------------


def test_grad_wrt_a_non_leaf_leaves_the_graph_below_it_alone():
    """torch runs only the part of the graph between the outputs and the inputs: the nodes
    below h are neither run nor freed, and hooks there are not called."""
    x = leaf([0.1, 0.2, 0.3])
    calls = []
    x.register_hook(lambda g: calls.append("x"))
    h = x.exp()
    (gh,) = ta.autograd.grad((h * h).sum(), h)
    np.testing.assert_allclose(gh.numpy(), 2 * np.exp([0.1, 0.2, 0.3]))
    assert calls == [] and x.grad is None
    h.sum().backward()  # exp's saved output was not freed
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.1, 0.2, 0.3]))
    assert calls == ["x"]


def test_grad_leaves_branches_that_lead_to_no_input_alone():
    x, z = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    calls = []
    z2 = z * 1.0
    z2.register_hook(lambda g: calls.append("z2"))
    h = x * 2.0
    e = z2.exp()
    y = (h * h).sum() + e.sum()
    (gh,) = ta.autograd.grad(y, h)
    np.testing.assert_array_equal(gh.numpy(), [4.0, 8.0])
    assert calls == []
    e.sum().backward()  # exp and z2's mul were neither run nor freed
    np.testing.assert_allclose(z.grad.numpy(), np.exp([3.0, 4.0]))
    assert calls == ["z2"]


def test_grad_wrt_an_input_and_one_below_it_goes_through_both():
    x = leaf([0.5, 1.5])
    h = x.sin()
    y = (h * x).sum()
    gh, gx = ta.autograd.grad(y, [h, x])
    np.testing.assert_allclose(gh.numpy(), x.numpy())
    np.testing.assert_allclose(gx.numpy(), np.sin(x.numpy()) + x.numpy() * np.cos(x.numpy()))


def test_grad_runs_the_hooks_of_its_inputs_as_torch():
    x = leaf([1.0, 2.0])
    h = x * 2.0
    h.register_hook(lambda g: g * 100)
    (gh,) = ta.autograd.grad(h.sum(), h)
    np.testing.assert_array_equal(gh.numpy(), [100.0, 100.0])


def test_retain_grad_is_filled_by_autograd_grad_as_torch():
    x = leaf([1.0, 2.0])
    h = x * 2.0
    h.retain_grad()
    ta.autograd.grad((h * h).sum(), x)
    np.testing.assert_array_equal(h.grad.numpy(), [4.0, 8.0])
    assert x.grad is None


# ---- grad mode during backward ----------------------------------------------------------------


def test_grad_mode_is_off_inside_hooks_and_backward():
    modes = []
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: modes.append(ta.is_grad_enabled()))
    h = x * 2.0
    h.register_hook(lambda g: modes.append((x * 2).requires_grad))  # ops record no graph
    (h * 3.0).sum().backward()
    assert modes == [False, False]
    assert ta.is_grad_enabled()
    ta.autograd.grad((x * 2.0).sum(), x)
    assert modes == [False, False, False] and ta.is_grad_enabled()
    for _ in (x * 2.0).sum().backward_steps():
        assert ta.is_grad_enabled()  # (the caller's mode between steps)
    assert modes[-1] is False


def test_a_hook_on_a_leaf_can_update_it_in_place():
    p = ta.ones(3, dtype=ta.float64, requires_grad=True)

    def step(g):
        p.sub_(0.1 * g)

    p.register_hook(step)
    (p * 2.0).sum().backward()
    np.testing.assert_allclose(p.detach().numpy(), [0.8, 0.8, 0.8])
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 2.0, 2.0])


def test_grad_mode_is_back_after_a_backward_that_raised():
    x = leaf([1.0])

    def fail(g):
        raise RuntimeError("a hook failed")

    x.register_hook(fail)
    with pytest.raises(RuntimeError, match="a hook failed"):
        (x * 2.0).sum().backward()
    assert ta.is_grad_enabled()


# ---- hooks and the arrays they see ------------------------------------------------------------


def test_a_gradient_a_hook_saw_is_not_changed_by_a_later_backward():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g))
    (x * 3.0).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(seen[0].numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(seen[1].numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


def test_a_gradient_a_hook_returned_is_not_changed_by_a_later_backward():
    x = leaf([1.0, 2.0])
    made = []

    def hook(g):
        made.append(g * 1.0)
        return made[-1]

    x.register_hook(hook)
    (x * 3.0).sum().backward()
    (x * 3.0).sum().backward()
    for g in made:
        np.testing.assert_array_equal(g.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


# ---- retain_grad and in-place ops -------------------------------------------------------------


def test_retain_grad_follows_the_tensor_through_an_in_place_op():
    """torch: h.grad is the gradient of h as it is now (after mul_), not as it was."""
    x = leaf([1.0, 2.0, 3.0])
    h = x * 2.0
    h.retain_grad()
    h.mul_(3.0)
    (h * h).sum().backward()
    np.testing.assert_array_equal(h.grad.numpy(), [12.0, 24.0, 36.0])
    np.testing.assert_array_equal(x.grad.numpy(), [72.0, 144.0, 216.0])


# ---- requires_grad_ and .grad -----------------------------------------------------------------


def test_requires_grad_true_on_a_non_leaf_that_requires_grad_is_a_no_op():
    x = leaf([1.0])
    h = x * 2.0
    assert h.requires_grad_(True) is h and h.requires_grad_() is h
    assert h.grad_fn is not None
    with pytest.raises(ta.GraphError, match="leaf"):
        h.requires_grad_(False)


def test_assigning_a_grad_of_another_shape_dtype_backend_or_type_raises():
    z = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)  # float32
    with pytest.raises(ta.ShapeError, match=r"\.grad: assigned a gradient of shape \(2, 3\) to "
                                            r"a tensor of shape \(3,\)"):
        z.grad = ta.zeros(2, 3)
    with pytest.raises(ta.ShapeError, match="shape"):
        z.grad = ta.zeros(1, 3)
    with pytest.raises(ta.DTypeError, match=r"\.grad: assigned a float64 gradient to a float32 "
                                            "tensor"):
        z.grad = ta.zeros(3, dtype=ta.float64)
    with pytest.raises(ta.DTypeError, match="int64"):
        z.grad = ta.zeros(3, dtype=ta.int64)
    with pytest.raises(TypeError, match=r"\.grad: expected a Tensor or None, got ndarray"):
        z.grad = np.zeros(3, dtype=np.float32)
    assert z.grad is None
    z.grad = ta.ones(3)  # the right shape and dtype
    (z * 2).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), [3.0, 3.0, 3.0])
    z.grad = None
    assert z.grad is None


# ---- gradcheck in torch's forms ---------------------------------------------------------------


class _Wrong(ta.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() * 1.1


def test_gradcheck_takes_a_single_tensor_as_its_inputs():
    x = ta.randn(3, dtype=ta.float64, requires_grad=True)
    assert ta.gradcheck(lambda t: t.exp(), x) is True
    with pytest.raises(ta.GradcheckError, match="gradcheck failed: input 0"):
        ta.gradcheck(_Wrong.apply, x)


def test_gradcheck_raise_exception_false_returns_false():
    x = ta.randn(3, dtype=ta.float64, requires_grad=True)
    assert ta.gradcheck(_Wrong.apply, (x,), raise_exception=False) is False
    assert ta.gradcheck(lambda t: t.exp(), (x,), eps=1e-6, atol=1e-5, rtol=1e-3,
                        raise_exception=False) is True
    with pytest.raises(ta.GradcheckError):
        ta.gradcheck(_Wrong.apply, (x,), raise_exception=True)


def test_gradcheck_of_inputs_with_no_elements_passes_as_torch():
    # a ZeroDivisionError before (the Jacobian's index came from divmod by 0)
    empty = ta.zeros(0, dtype=ta.float64, requires_grad=True)
    assert ta.gradcheck(lambda t: t * 2, [empty]) is True
    assert ta.gradcheck(lambda t: t.sum(), [ta.zeros(2, 0, dtype=ta.float64,
                                                     requires_grad=True)]) is True
    x = ta.randn(3, dtype=ta.float64, requires_grad=True)
    assert ta.gradcheck(lambda e, t: e.sum() + t.exp(), [empty, x]) is True
    assert ta.gradcheck(lambda t: t[:0] * 2, [x]) is True  # no output elements
    with pytest.raises(ta.GradcheckError, match="input 1"):
        ta.gradcheck(lambda e, t: e.sum() + _Wrong.apply(t), [empty, x])


# ---- anomaly messages -------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_anomaly_names_a_custom_backward_that_returns_nan_as_torch():
    class NanBackward(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")  # (a NaN made in a forward op is no anomaly: torch's)

    x = leaf([0.0, 1.0])
    with ta.detect_anomaly():
        y = NanBackward.apply(x).exp()
        with pytest.raises(ta.AnomalyError) as info:
            y.sum().backward()
    message = str(info.value)
    assert message.startswith("Function 'NanBackwardBackward' returned nan values in its 0th "
                              "output.")
    assert "y = NanBackward.apply(x).exp()" in message  # the forward's traceback


# ---- requires_grad switched off and on: the same leaf, as torch's -----------------------------


def test_requires_grad_off_and_on_keeps_the_leaf_and_its_hooks():
    x = leaf([1.0, 2.0])
    calls = []
    x.register_hook(lambda g: calls.append(1) or g * 10)
    y = x * 2  # recorded before the switch
    x.requires_grad_(False)
    assert not x.requires_grad and not (x * 3).requires_grad  # a constant meanwhile
    x.requires_grad_(True)
    z = x * 3
    (y + z).sum().backward()
    assert calls == [1]
    np.testing.assert_array_equal(x.grad.numpy(), [50.0, 50.0])
    x.grad = None
    y = x * 2
    x.requires_grad = False
    x.requires_grad = True
    (g,) = ta.autograd.grad((y + x * 3).sum(), [x])  # one leaf: both uses
    np.testing.assert_array_equal(g.numpy(), [50.0, 50.0])


def test_detach_then_requires_grad_gives_the_leaf_back_and_detach_of_a_view_is_refused():
    x = leaf([1.0, 2.0])
    calls = []
    x.register_hook(lambda g: calls.append(1))
    x.detach_()
    assert not x.requires_grad
    x.requires_grad_()
    (x * 1).sum().backward()
    assert calls == [1]
    with pytest.raises(ta.GraphError, match="view .* detach"):
        x[1:].detach_()
    x.detach().detach_()  # a detached tensor is no view (torch)


def test_a_tensor_frozen_after_the_forward_gets_no_grad():
    """torch's AccumulateGrad writes nothing into a tensor that no longer requires grad."""
    w = leaf([1.0, 2.0])
    b = leaf([0.5])
    loss = (w * 3).sum() + b.sum()
    w.requires_grad_(False)
    loss.backward()
    assert w.grad is None and b.grad is not None
    w.requires_grad_(True)  # on again: the next pass fills it
    ((w * 3).sum()).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])


# ---- a second pass through nodes that saved no array ------------------------------------------


def test_a_second_backward_through_nodes_that_saved_no_array_runs_as_torchs():
    w = leaf([[1.0, 2.0], [3.0, 4.0]])
    b = leaf([1.0, 1.0])
    flat = (w + b).reshape(-1).permute(0)  # add, reshape, permute: nothing saved
    (flat * 2).sum().backward()
    (flat * 3).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((2, 2), 5.0))
    np.testing.assert_array_equal(b.grad.numpy(), [10.0, 10.0])
    h = w.T
    ta.autograd.grad(h.sum(), w)
    (g,) = ta.autograd.grad(h.sum(), w)  # grad() twice, too
    np.testing.assert_array_equal(g.numpy(), np.ones((2, 2)))
    y = (w * w).sum()  # mul saved w: freed, and a second pass says so
    y.backward()
    with pytest.raises(ta.GraphError, match="graph through mul was already freed"):
        y.backward()


# ---- backward's torch forms -------------------------------------------------------------------


def test_autograd_backward_takes_lists_of_tensors_and_gradients():
    x = leaf([1.0, 2.0, 3.0])
    ta.autograd.backward([x * 2, (x * x).sum()], [ta.ones(3, dtype=ta.float64), None])
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 6.0, 8.0])
    ta.autograd.backward((x * x).sum(), grad_tensors=ta.tensor(2.0, dtype=ta.float64),
                         retain_graph=None)
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 14.0, 20.0])
    x.grad = None
    (x * x).sum().backward(create_graph=True)  # .grad with a graph, as torch's
    assert x.grad.requires_grad and x.grad.tolist() == [2.0, 4.0, 6.0]
    x.grad = None
    (x * x).sum().backward(None, None, False)  # torch's positional forms


def test_backward_with_inputs_fills_only_those_as_torch():
    x = leaf([1.0, 2.0, 3.0])
    z = leaf([1.0, 1.0, 1.0])
    h = x * 2
    y = (h * z).sum()
    y.backward(inputs=[z], retain_graph=True)
    assert x.grad is None and h._grad is None  # (h.grad would warn: not a leaf)
    np.testing.assert_array_equal(z.grad.numpy(), [2.0, 4.0, 6.0])
    y.backward(inputs=[h, z])  # a non-leaf's .grad too; z's adds up
    np.testing.assert_array_equal(h.grad.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(z.grad.numpy(), [4.0, 8.0, 12.0])
    with pytest.raises(ValueError, match="empty"):
        (x * 1).sum().backward(inputs=[])


# ---- autograd.grad's other keywords -----------------------------------------------------------


def test_grad_materialize_grads_and_is_grads_batched():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    ga, gb = ta.autograd.grad((a * 2).sum(), [a, b], materialize_grads=True)
    np.testing.assert_array_equal(ga.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(gb.numpy(), [0.0, 0.0])
    with pytest.raises(ValueError, match="allow_unused"):
        ta.autograd.grad((a * 2).sum(), [a, b], materialize_grads=True, allow_unused=False)
    x = leaf([1.0, 2.0, 3.0])
    y = x * x
    eye = ta.tensor(np.eye(3))
    (jac,) = ta.autograd.grad(y, x, eye, is_grads_batched=True)  # rows of the Jacobian
    np.testing.assert_array_equal(jac.numpy(), np.diag([2.0, 4.0, 6.0]))
    with pytest.raises(ta.GraphError, match="already freed"):  # the graph went after it
        y.backward(ta.ones(3, dtype=ta.float64))


# ---- grad_fn as torch's -----------------------------------------------------------------------


def test_grad_fn_has_torchs_name_and_next_functions():
    x = leaf([1.0, 2.0])
    y = x * 2
    fn = y.grad_fn
    assert fn.name() == type(fn).__name__ == "MulBackward0" and fn == y.grad_fn
    ((acc, i), (nothing, j)) = fn.next_functions
    assert acc.name() == "AccumulateGrad" and acc.variable is x and nothing is None
    assert i == j == 0
    assert fn.op.name == "mul" and y.masked_fill(ta.tensor([True, False]), 0.0).grad_fn.name() \
        == "MaskedFillBackward0"
    y.name = "y"
    assert y._node.name == "y" and fn.next_functions[0][0].next_functions == ()


# ---- modes and names torch has ----------------------------------------------------------------


def test_inference_mode_false_turns_grad_on_and_is_inference_mode_enabled():
    x = leaf([1.0])
    assert not ta.is_inference_mode_enabled()
    with ta.inference_mode():
        assert ta.is_inference_mode_enabled() and not ta.is_grad_enabled()
        with ta.inference_mode(False):
            assert not ta.is_inference_mode_enabled() and (x * 2).requires_grad
        assert ta.is_inference_mode_enabled()
    with ta.no_grad(), ta.inference_mode(False):
        assert ta.is_grad_enabled()
    with ta.no_grad():
        assert ta.inference_mode(False)(ta.is_grad_enabled)()
    assert not x.is_inference()


def test_retains_grad_as_torch():
    x = leaf([1.0])
    y = x * 2
    assert not y.retains_grad and not x.retains_grad
    y.retain_grad()
    assert y.retains_grad and not x.retains_grad


def test_anomaly_detection_under_torchs_names():
    assert ta.autograd.detect_anomaly is ta.detect_anomaly
    assert not ta.is_anomaly_enabled() and ta.is_anomaly_check_nan_enabled()
    x = leaf([0.0, 1.0])
    with ta.autograd.detect_anomaly(check_nan=False):
        assert ta.autograd.is_anomaly_enabled() and not ta.is_anomaly_check_nan_enabled()
        (x.sqrt() * 0).sum().backward()  # NaN goes by
    assert np.isnan(x.grad.numpy()[0])
    with ta.autograd.set_detect_anomaly(True):
        assert ta.is_anomaly_enabled()
        with pytest.raises(ta.AnomalyError):
            (x.sqrt() * 0).sum().backward()
    assert not ta.is_anomaly_enabled()
    ta.autograd.set_detect_anomaly(True)
    try:
        assert ta.is_anomaly_enabled()
    finally:
        ta.autograd.set_detect_anomaly(False)
    assert not ta.is_anomaly_enabled()


def test_gradcheck_under_torchs_name_with_its_keywords_and_tuple_outputs():
    x = ta.randn(3, 4, dtype=ta.float64, requires_grad=True)
    gc = ta.autograd.gradcheck
    assert gc(lambda a, k: (a * k).sum(1), (x, 3.0), nondet_tol=0.0, check_undefined_grad=True,
              check_batched_grad=False, check_grad_dtypes=False, check_backward_ad=True,
              check_forward_ad=False, masked=None, fast_mode=True)
    assert gc(lambda a: ((a * a).sum(1), a.exp(), 5), (x,))
    assert gc(lambda a: (a.exp(), _Wrong.apply(a)), (x,), raise_exception=False) is False
    with pytest.raises(ta.GradcheckError, match="output 1: input 0"):
        gc(lambda a: (a.exp(), _Wrong.apply(a)), (x,))
    for keyword in ("check_batched_grad", "check_forward_ad", "masked"):
        with pytest.raises(ValueError, match=keyword):
            gc(lambda a: a.exp(), (x,), **{keyword: True})
    assert ta.autograd.gradgradcheck(lambda a: a.exp(), (x,))  # (test_create_graph.py: more)


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
@pytest.mark.parametrize("fast", [False, True])
def test_gradcheck_of_a_function_with_no_differentiable_output_as_torchs(lib_name, fast):
    """torch: with no output that requires grad, the numerical Jacobian must be zero (True),
    else "Numerical gradient for function expected to be zero"."""
    lib = ta if lib_name == "tinyattn" else pytest.importorskip("torch")
    check = lib.autograd.gradcheck
    x = lib.tensor([0.3, -1.2, 2.1], dtype=lib.float64, requires_grad=True)
    for fn in (lambda a: a.detach() * 0, lambda a: a.argmax(), lambda a: lib.ones(3),
               lambda a: (a.detach() * 0, a.detach().round())):
        assert check(fn, (x,), fast_mode=fast) is True
    with pytest.raises(Exception, match="Numerical gradient for function expected to be zero"):
        check(lambda a: a.detach() * 2, (x,), fast_mode=fast)
    assert check(lambda a: a.detach() * 2, (x,), fast_mode=fast, raise_exception=False) is False
    assert check(lambda a: (a * 2, a.detach() * 3), (x,), fast_mode=fast) is True  # mixed: the
    # outputs that need no grad are not looked at


# ---- grad()'s refusals name grad() and grad_outputs; to_dot of several roots ------------------


def test_grad_with_no_inputs_is_refused_as_torchs():
    """torch: "`inputs` argument to `grad()` cannot be empty." (a max() of nothing before)."""
    torch = pytest.importorskip("torch")
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="inputs"):
        torch.autograd.grad((torch.ones(3, requires_grad=True) * 2).sum(), [])
    for kw in ({}, {"is_grads_batched": True}, {"materialize_grads": True}):
        with pytest.raises(RuntimeError, match=r"grad: `inputs` cannot be empty"):
            ta.autograd.grad((x * 2).sum(), [], **kw)
    with pytest.raises(RuntimeError, match=r"grad: `outputs` cannot be empty"):
        ta.autograd.grad([], [x])
    (g,) = ta.autograd.grad((x * 2).sum(), (t for t in [x]), materialize_grads=True)
    np.testing.assert_array_equal(g.numpy(), [2.0, 2.0, 2.0])  # (a generator, read once)


def test_grad_names_grad_and_grad_outputs_in_its_messages():
    """As torch ("grad can be implicitly created only for scalar outputs", "grad_output[0] has
    a shape of ...": torch's first such error takes a second to make, so it is not raised
    here): grad() says grad() and grad_outputs, with the output's position, where it said
    backward() and gradient=."""
    torch = pytest.importorskip("torch")
    tx = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        torch.autograd.grad(tx * 2, tx)
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(ta.GraphError, match=r"^grad: output 0 has shape \(3,\); grad\(\) makes "
                                            r"the grad_output of a scalar output only") as e:
        ta.autograd.grad(x * 2, x)
    assert "backward" not in str(e.value) and "gradient=" not in str(e.value)
    with pytest.raises(ta.ShapeError, match=r"^grad: grad_outputs\[1\] has shape \(2,\) but "
                                            r"output 1 has shape \(3,\)$"):
        ta.autograd.grad([x.sum(), x * 2], x, grad_outputs=[None, ta.ones(2)])
    with pytest.raises(ta.GraphError, match=r"^grad: output 1 does not require grad"):
        ta.autograd.grad([x.sum(), ta.ones(2)], x)
    with pytest.raises(ta.ShapeError, match=r"^backward: gradient has shape \(2,\)"):
        (x * 2).backward(ta.ones(2))  # (backward's own wording stays)
    with pytest.raises(ta.GraphError, match=r"^backward: the output has shape \(3,\)"):
        ta.autograd.backward(x * 2, inputs=[x])


def test_to_dot_of_several_roots_draws_them_all_as_torchvizs_make_dot():
    """viz.to_dot((s, loss)) said "this tensor has no graph behind it" (false): several roots
    (a tuple or a list, as torchviz's make_dot takes) are drawn in one picture, each as a root;
    what is not a tensor is refused by saying so."""
    from tinyattn import viz

    x = leaf([1.0, 2.0, 3.0])
    s = (x * 2).exp()
    loss = (s * s).sum()
    s.name, loss.name = "s", "loss"
    one, both = viz.to_dot(loss), viz.to_dot((s, loss))
    assert viz.to_dot([s, loss]) == both
    assert one.count('label="exp"') == both.count('label="exp"') == 1  # (shared: drawn once)
    assert both.count(viz._STYLE["root"]) == 2 and one.count(viz._STYLE["root"]) == 1
    with pytest.raises(TypeError, match=r"to_dot: expected a tensor \(or a tuple or list of "
                                        r"tensors\), got str"):
        viz.to_dot("loss")
    with pytest.raises(ta.GraphError, match="to_dot: this tensor has no graph behind it"):
        viz.to_dot((loss, ta.ones(2)))


# ---- Tensor.register_post_accumulate_grad_hook -------------------------------------------------


def _post_hooked_run(lib):
    """What a leaf's hooks saw over backward(), backward() again, grad(), backward(inputs=) and
    after remove(); and an optimizer step in backward (the torch pattern)."""
    p = lib.ones(3, dtype=lib.float64, requires_grad=True)
    log = []
    p.register_hook(lambda g: log.append(("pre", g.tolist())))
    handle = p.register_post_accumulate_grad_hook(lambda t: log.append(
        ("post", t is p, t.grad.tolist())))
    (p * 2).sum().backward()
    (p * 3).sum().backward()
    lib.autograd.grad((p * 2).sum(), p)
    lib.autograd.backward((p * 2).sum(), inputs=[p])
    handle.remove()
    (p * 2).sum().backward()
    r = lib.ones(2, dtype=lib.float64, requires_grad=True)

    def step(t):
        with lib.no_grad():
            t.sub_(t.grad * 0.5)
        t.grad = None

    r.register_post_accumulate_grad_hook(step)
    (r * 2).sum().backward()
    return log, r.detach().numpy().tolist(), r.grad


def test_post_accumulate_grad_hooks_run_after_grad_is_filled_as_torchs():
    torch = pytest.importorskip("torch")
    ours, theirs = _post_hooked_run(ta), _post_hooked_run(torch)
    assert ours == theirs
    assert ours[0][:4] == [("pre", [2.0] * 3), ("post", True, [2.0] * 3), ("pre", [3.0] * 3),
                           ("post", True, [5.0] * 3)]
    assert ours[1:] == ([0.0, 0.0], None)


def test_post_accumulate_grad_hook_refusals_as_torchs():
    torch = pytest.importorskip("torch")
    tx = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (tx * 2).register_post_accumulate_grad_hook(lambda t: None)
    x = leaf([1.0, 2.0])
    with pytest.raises(ta.GraphError, match=r"register_post_accumulate_grad_hook: .*not a leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(ta.GraphError, match=r"register_post_accumulate_grad_hook: this tensor "
                                            "does not require grad"):
        ta.ones(2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="register_post_accumulate_grad_hook: the hook must be "
                                        "callable"):
        x.register_post_accumulate_grad_hook(3)
    x.register_post_accumulate_grad_hook(lambda t: t.grad)
    with pytest.raises(ta.GraphError, match=r"register_post_accumulate_grad_hook: a hook "
                                            r"returned a Tensor; it must return None"):
        (x * 2).sum().backward()
