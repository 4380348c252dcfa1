"""pow keeps what torch's derivatives.yaml keeps: x ** c (pow.Tensor_Scalar) only x, so its
output may change in place before backward; c ** x and x ** y (pow.Scalar, pow.Tensor_Tensor)
keep the output for the exponent's gradient, and a change of it is refused, as torch's."""

import numpy as np
import pytest

import tinyattn as ta

CASES = {  # name: (the expression, whether torch refuses a change of its output)
    "x ** 2": (lambda lib, a: a**2, False),
    "x ** 3": (lambda lib, a: a.pow(3), False),
    "x ** 0.5": (lambda lib, a: a.pow(0.5), False),
    "x ** -1": (lambda lib, a: a.pow(-1), False),
    "x ** -1.5": (lambda lib, a: a ** -1.5, False),
    "x ** 0": (lambda lib, a: a**0, False),
    "float_power(x, 2)": (lambda lib, a: a.float_power(2), False),
    "2 ** x": (lambda lib, a: 2**a, True),
    "x ** x.detach()": (lambda lib, a: a ** a.detach(), True),
    "c ** x (tensor base)": (lambda lib, a: lib.tensor([2.0, 3.0, 0.5], dtype=a.dtype) ** a, True),
    "x ** x": (lambda lib, a: a.pow(a), True),
    "sqrt": (lambda lib, a: a.sqrt(), True),  # torch's sqrt keeps its result
    "exp": (lambda lib, a: a.exp(), True),
    "tanh": (lambda lib, a: a.tanh(), True),
    "sigmoid": (lambda lib, a: a.sigmoid(), True),
}


def _run(lib, make, values, dtype):
    a = lib.tensor(values, dtype=dtype, requires_grad=True)
    b = make(lib, a)
    b.detach().zero_()
    try:
        b.sum().backward()
    except Exception:  # noqa: BLE001 - torch's RuntimeError, tinyattn's GraphError
        return None
    return np.asarray(a.grad.detach().numpy() if hasattr(a.grad, "detach") else a.grad.numpy())


@pytest.mark.parametrize("name", list(CASES))
def test_an_output_changed_in_place_before_backward_as_torch(name):
    torch = pytest.importorskip("torch")
    make, refused = CASES[name]
    values = [0.25, 1.5, 2.0]
    theirs = _run(torch, make, values, torch.float64)
    ours = _run(ta, make, values, ta.float64)
    assert (theirs is None) == refused
    assert (ours is None) == refused, f"{name}: torch {'refuses' if refused else 'takes'} it"
    if not refused:
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_x_pow_number_gradients_match_torch_at_edges():
    """The gradient of x ** c from x alone, for both operands' forms, at 0, negatives and
    integer exponents, as torch's pow_backward."""
    torch = pytest.importorskip("torch")
    xs = [-2.0, -0.5, 0.0, 0.5, 3.0]
    for c in (0, 1, 2, 3, -1, -2, 0.5, 1.5, -0.5):
        a = ta.tensor(xs, dtype=ta.float64, requires_grad=True)
        t = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
        (a**c).sum().backward()
        (t**c).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12, equal_nan=True,
                                   err_msg=f"x ** {c}")
    for c in (2.0, 0.5, 0.0):  # c ** x: the exponent's gradient out * log c (0 at c = 0, x >= 0)
        a = ta.tensor(xs, dtype=ta.float64, requires_grad=True)
        t = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
        (c**a).sum().backward()
        (c**t).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12, equal_nan=True,
                                   err_msg=f"{c} ** x")
    base = [0.0, 0.5, 2.0, 3.0, 0.0]
    exps = [2.0, -1.0, 0.5, 0.0, 0.0]
    a, b = (ta.tensor(v, dtype=ta.float64, requires_grad=True) for v in (base, exps))
    t, u = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (base, exps))
    (a**b).sum().backward()
    (t**u).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(b.grad.numpy(), u.grad.numpy(), rtol=1e-12, equal_nan=True)


def test_x_pow_number_keeps_no_output_and_gradchecks():
    x = ta.tensor([0.5, 1.5, 2.5], dtype=ta.float64, requires_grad=True)
    out = x**3
    assert out._node.saved[2] is None
    assert (2.0**x)._node.saved[2] is not None
    for c in (2, 0.5, -1.5):
        assert ta.gradcheck(lambda t, c=c: t**c, (x,))
