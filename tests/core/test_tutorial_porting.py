"""PyTorch's beginner tutorials run with tinyattn: "Learning PyTorch with Examples", "What is
torch.nn really?", "Autograd mechanics", "A gentle introduction to torch.autograd", "Saving and
loading models" and "Reproducibility", each defect found there pinned here against torch."""

import numpy as np
import pytest

import tinyattn as ta

# ---- Autograd mechanics, "Saved tensors": grad_fn._saved_<name> -------------------------------


def test_saved_self_is_the_input_and_saved_result_equals_the_output():
    torch = pytest.importorskip("torch")
    for lib in (torch, ta):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.pow(2)
        assert y.grad_fn._saved_self is x  # the tutorial's `x is y.grad_fn._saved_self`
        assert y.grad_fn._saved_exponent == 2
        z = x.exp()
        assert z.equal(z.grad_fn._saved_result)
        assert z.grad_fn._saved_result is not z
        w = x * x
        assert w.grad_fn._saved_self is x and w.grad_fn._saved_other is x
        s = x.softmax(dim=0)
        assert s.grad_fn._saved_dim == 0 and s.grad_fn._saved_result.equal(s)


def test_saved_tensor_of_a_non_leaf_has_its_values():
    x = ta.tensor([0.5, -1.0], requires_grad=True)
    h = x * 3
    y = h.tanh()
    assert y.grad_fn._saved_result.tolist() == pytest.approx(np.tanh([1.5, -3.0]).tolist())
    q = h * h
    assert q.grad_fn._saved_self.tolist() == [1.5, -3.0]


def test_saved_tensor_after_backward_raises_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, ta):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        y.sum().backward()
        with pytest.raises(RuntimeError, match="already been freed"):
            _ = y.grad_fn._saved_result


def test_saved_name_the_node_lacks_is_an_attribute_error():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(AttributeError, match="_saved_other"):
        _ = x.exp().grad_fn._saved_other
    with pytest.raises(AttributeError, match="_saved_self"):  # (a leaf's AccumulateGrad)
        _ = (x * 1).grad_fn.next_functions[0][0]._saved_self


def test_custom_function_grad_fn_shows_its_ctx():
    """LegendrePolynomial3 of "Learning PyTorch with Examples": torch's grad_fn of a Function
    is its ctx: saved_tensors, needs_input_grad and what forward set on ctx."""
    torch = pytest.importorskip("torch")
    got = {}
    for lib in (torch, ta):
        class LegendrePolynomial3(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                ctx.constant = 1.5
                return 0.5 * (5 * x ** 3 - 3 * x)

            @staticmethod
            def backward(ctx, grad_output):
                (x,) = ctx.saved_tensors
                return grad_output * ctx.constant * (5 * x ** 2 - 1)

        x = lib.tensor([0.5, 1.0], requires_grad=True)
        y = LegendrePolynomial3.apply(x)
        fn = y.grad_fn
        got[lib.__name__] = ([t.tolist() for t in fn.saved_tensors], fn.needs_input_grad,
                             fn.constant)
        y.sum().backward()
        with pytest.raises(RuntimeError, match="already been freed"):
            _ = fn.saved_tensors
    assert got["tinyattn"] == got["torch"]


def test_saved_tensors_of_another_node_is_an_attribute_error():
    with pytest.raises(AttributeError, match="saved_tensors"):
        _ = ta.tensor([1.0], requires_grad=True).exp().grad_fn.saved_tensors


# ---- printing, as the tutorials print tensors -------------------------------------------------


def test_repr_lines_are_80_wide_as_torch():
    torch = pytest.importorskip("torch")
    rs = np.random.RandomState(0)
    for a in (rs.randn(10).astype(np.float32), rs.randn(4, 12).astype(np.float32),
              rs.randint(0, 1000, 40), (rs.randn(25) * 1e5).astype(np.float32)):
        assert repr(ta.tensor(a)) == repr(torch.tensor(a))


def test_repr_summarises_past_1000_elements_as_torch():
    """print(y_train) of "What is torch.nn really?" shows all of a 500-element tensor."""
    torch = pytest.importorskip("torch")
    rs = np.random.RandomState(1)
    for a in (rs.randint(0, 10, 500), rs.randint(0, 10, 1200), rs.randn(300).astype(np.float32),
              rs.rand(40, 30).astype(np.float32)):
        assert repr(ta.tensor(a)) == repr(torch.tensor(a))


def test_repr_of_bools_as_torch():
    """`9*a**2 == a.grad` of the gentle introduction prints tensor([True, True])."""
    torch = pytest.importorskip("torch")
    rs = np.random.RandomState(2)
    for a in (np.array([True, True]), np.array([True, False]), np.array(True),
              rs.rand(30) > 0.5, np.ones((2, 3), bool)):
        assert repr(ta.tensor(a)) == repr(torch.tensor(a))
