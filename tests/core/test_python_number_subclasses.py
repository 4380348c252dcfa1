"""A number of a subclass of int or float (an IntEnum member, a float of a user's class) is a
Python number to every op, as to torch's: weak in type promotion (a float32 tensor times one
stays float32, an int32 tensor plus one stays int32), whether it comes in as an operand, as a
setting (a slope, alpha, bounds) or through a captured step's replay. NumPy 2 alone would
compute with it in float64 or int64. Another kind of number (a Fraction, a Decimal) is refused,
naming the op, as torch refuses it, where NumPy would compute with it as Python objects."""

import decimal
import enum
import fractions

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.errors import DTypeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional


class Ratio(float):
    """A float of a user's class."""


class Level(enum.IntEnum):
    LOW = 2
    HIGH = 3


HALF, THREE = Ratio(0.5), Level.HIGH


def fns(lib):
    return F if lib is ta else TF


CASES = {  # name -> f(lib, x): the number as an operand, or as an op's setting
    "x * r": lambda lib, x: x * HALF,
    "r - x": lambda lib, x: HALF - x,
    "x / k": lambda lib, x: x / THREE,
    "x ** k": lambda lib, x: x ** THREE,
    "r ** x": lambda lib, x: HALF ** x,
    "x + k": lambda lib, x: x + THREE,
    "x // k": lambda lib, x: x // THREE,
    "where": lambda lib, x: lib.where(x > 0, x, HALF),
    "clamp": lambda lib, x: lib.clamp(x, -HALF, THREE),
    "fmod": lambda lib, x: lib.fmod(x, THREE),
    "add alpha": lambda lib, x: lib.add(x, x, alpha=THREE),
    "masked_fill": lambda lib, x: x.masked_fill(x > 0, THREE),
    "leaky_relu": lambda lib, x: fns(lib).leaky_relu(x, HALF),
    "hardtanh": lambda lib, x: fns(lib).hardtanh(x, -HALF, HALF),
    "elu": lambda lib, x: fns(lib).elu(x, HALF),
    "softplus": lambda lib, x: fns(lib).softplus(x, THREE),
    "addcmul": lambda lib, x: lib.addcmul(x, x, x, value=HALF),
}
FLOAT_ONLY = {"r ** x", "elu", "softplus", "leaky_relu", "hardtanh", "addcmul", "r - x",
              "where", "clamp", "x * r"}


@pytest.mark.parametrize("name, dtype", [  # (int32: the ops that take integers, int numbers)
    (name, dtype) for name in CASES for dtype in ("float32", "float16", "int32")
    if dtype != "int32" or name not in FLOAT_ONLY])
def test_a_number_subclass_promotes_as_a_python_number_like_torchs(name, dtype):
    values = np.array([-1.5, 0.25, 2.0, 3.0], dtype=np.float32)
    if dtype == "int32":
        values = np.array([-3, 1, 2, 7])
    f = CASES[name]
    got = f(ta, ta.tensor(values.astype(dtype)))
    want = f(torch, torch.tensor(values.astype(dtype)))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1] == (
        "float32" if dtype == "int32" and name in {"x / k"} else dtype)
    tol = 1e-3 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64),
                               rtol=tol, atol=tol)


def test_the_gradient_of_a_product_with_a_number_subclass_stays_float32():
    x = ta.tensor(np.array([1.0, -2.0], dtype=np.float32), requires_grad=True)
    y = F.leaky_relu(x * HALF + THREE, HALF) ** Level.LOW
    y.sum().backward()
    xt = torch.tensor([1.0, -2.0], requires_grad=True)
    (TF.leaky_relu(xt * HALF + THREE, HALF) ** Level.LOW).sum().backward()
    assert y.dtype == ta.float32 and x.grad.dtype == ta.float32
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


def test_a_captured_step_replays_a_number_subclass_as_its_python_number():
    w = ta.tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    step = ta.capture(lambda x: ((x * w * HALF) ** THREE).sum())
    x = ta.tensor(np.array([1.0, -2.0], dtype=np.float32))
    for _ in range(4):
        w.grad = None
        loss = step(x)
        assert loss.dtype == ta.float32 and w.grad.dtype == ta.float32, step.state
        np.testing.assert_allclose(loss.item(), -7.875)
        np.testing.assert_allclose(w.grad.numpy(), [0.375, -12.0])
    assert step.state == "replaying"


def test_plain_gives_a_subclass_number_as_its_python_number_and_leaves_the_rest():
    from tinyattn.ops.op import plain, plain_params

    assert type(plain(HALF)) is float and plain(HALF) == 0.5
    assert type(plain(THREE)) is int and plain(THREE) == 3
    assert type(plain(np.float64(0.25))) is float
    for v in (True, 2, 0.5, None, "mean"):
        assert plain(v) is v
    settings = {"slope": 0.5, "n": 3}
    assert plain_params(settings) is settings  # (nothing to convert: the dict itself)
    assert plain_params({"slope": HALF, "n": THREE}) == {"slope": 0.5, "n": 3}
    assert [type(v) for v in plain_params({"slope": HALF, "n": THREE}).values()] == [float, int]


OTHER_NUMBERS = [pytest.param(fractions.Fraction(1, 2), id="Fraction"),
                 pytest.param(decimal.Decimal("0.5"), id="Decimal")]


@pytest.mark.parametrize("number", OTHER_NUMBERS)
@pytest.mark.parametrize("name, call", [
    ("mul", lambda x, c: x * c),
    ("sub", lambda x, c: c - x),
    ("pow", lambda x, c: x ** c),
    ("mul", lambda x, c: ta.add(x, x, alpha=c)),
    ("clamp", lambda x, c: ta.clamp(x, c)),
    ("leaky_relu", lambda x, c: F.leaky_relu(x, c)),
    ("softplus", lambda x, c: F.softplus(x, c)),
    ("elu", lambda x, c: F.elu(x, c)),
    ("logit", lambda x, c: x.logit(c)),
])
def test_another_kind_of_number_is_refused_naming_the_op_not_computed_as_objects(
        name, call, number):
    # torch refuses a Fraction or a Decimal (TypeError); NumPy alone computes with it in an
    # array of Python objects, a tensor of dtype object
    x = ta.tensor(np.array([0.25, 0.75], dtype=np.float32))
    with pytest.raises(DTypeError, match=rf"^{name}: ") as caught:
        call(x, number)
    message = str(caught.value)
    assert f"a {type(number).__name__} (" in message or f"a {type(number).__name__} operand" \
        in message
    assert "(as torch)" in message and message.endswith("convert it with float() first")
    if name != "pow":  # (torch's pow takes one, through float(): the rest refuse it)
        with pytest.raises(TypeError):
            call(torch.tensor([0.25, 0.75]), number)
