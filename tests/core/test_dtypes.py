"""Type promotion and the default dtype, held to torch.

Every pair of operands from (bool, int32, int64, float16, float32, float64) x (0-d, n-d, 0-d held
as a NumPy scalar) and the Python numbers (bool, int, float) goes through add, mul and true
division in both libraries; the result dtypes (and values) must agree. Also: float functions of
integers, the default dtype and what follows it, comparisons in the promoted dtype.
"""

import itertools

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.dtypes import result_type

torch = pytest.importorskip("torch")

DTYPES = ["bool", "int32", "int64", "float16", "float32", "float64"]
PYTHON = [True, 3, 2.5]


def operands():
    """(label, tinyattn operand, torch operand) for each kind of operand."""
    out = []
    for name, ndim in itertools.product(DTYPES, (0, 1)):
        values = np.array([1, 1, 1] if name == "bool" else [1, 2, 3])  # no 0: a divisor
        values = values.astype(name)[:1].reshape(()) if ndim == 0 else values.astype(name)
        out.append((f"{name}{'[]' if ndim else ' 0-d'}", ta.tensor(values),
                    torch.from_numpy(np.array(values))))
        if ndim:  # a 0-d tensor whose value NumPy holds as a scalar (indexing, reductions):
            # np.float64 is a Python float too, and must not count as a Python number
            picked = ta.tensor(values)[0]
            assert isinstance(picked.data, np.generic)
            out.append((f"{name} 0-d (a NumPy scalar)", picked,
                        torch.from_numpy(np.array(values))[0]))
    out += [(f"python {type(v).__name__}", v, v) for v in PYTHON]
    return out


OPERANDS = operands()
PAIRS = [(a, b) for a, b in itertools.product(range(len(OPERANDS)), repeat=2)
         if not (isinstance(OPERANDS[a][1], (bool, int, float))
                 and isinstance(OPERANDS[b][1], (bool, int, float)))]
OPS = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b}


@pytest.mark.parametrize("op", sorted(OPS))
def test_promotion_table_matches_torch(op):
    fn = OPS[op]
    disagreements = []
    for a, b in PAIRS:
        (la, xa, ta_), (lb, xb, tb) = OPERANDS[a], OPERANDS[b]
        try:
            want = fn(ta_, tb)
        except RuntimeError:
            continue  # torch refuses (e.g. bool - bool); not part of this table
        got = fn(xa, xb)
        want_dtype = str(want.dtype).replace("torch.", "")
        if str(got.dtype) != want_dtype:
            disagreements.append(f"{la} {op} {lb}: tinyattn {got.dtype}, torch {want_dtype}")
            continue
        np.testing.assert_allclose(got.numpy().astype(np.float64),
                                   want.numpy().astype(np.float64), rtol=1e-3,
                                   err_msg=f"{la} {op} {lb}")
    assert not disagreements, "\n".join(disagreements)


def test_result_type_is_the_one_table():
    f32, f64, i32 = (np.dtype(d) for d in ("float32", "float64", "int32"))
    assert result_type(np.ones(2, f32), np.ones((), f64)) == f32  # 0-d: no more precision
    assert result_type(np.ones(2, i32), np.ones((), f64)) == f64  # ... but a higher category
    assert result_type(np.ones(2, i32), 0.5) == f32  # a Python float is the default dtype
    assert result_type(np.ones(2, "int64"), np.ones(2, "float16")) == np.float16  # torch's
    assert result_type(np.ones(2, bool), 2) == np.int64


@pytest.mark.parametrize("fn", ["exp", "log", "sqrt", "tanh", "sigmoid", "softmax"])
def test_float_functions_of_integers_give_the_default_dtype(fn):
    args = (-1,) if fn == "softmax" else ()
    got = getattr(ta.tensor([1, 2, 3]), fn)(*args)
    want = getattr(torch.tensor([1, 2, 3]).float(), fn)(*args)  # torch: exp of an int: float32
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_integer_true_division_and_mean():
    assert (ta.tensor([1, 2]) / ta.tensor([2, 2])).dtype == np.float32
    assert (ta.tensor([3]) / 2).dtype == np.float32
    assert (ta.tensor([1, 2]) + 0.5).dtype == np.float32
    with pytest.raises(ta.DTypeError, match="mean: needs a floating-point input, got int64"):
        ta.tensor([1, 2]).mean()  # torch refuses too
    assert ta.tensor([True, False, True]).sum().item() == 2


def test_comparisons_happen_in_the_promoted_dtype():
    x = ta.tensor([0.1])  # float32
    assert (x == ta.tensor(np.float64(0.1))).item()  # torch: the 0-d float64 becomes float32
    assert (torch.tensor([0.1]) == torch.tensor(0.1, dtype=torch.float64)).item()
    assert (ta.tensor([1, 2]) < 1.5).tolist() == [True, False]


@pytest.fixture
def float64_default():
    ta.set_default_dtype(ta.float64)
    yield
    ta.set_default_dtype(ta.float32)


def test_default_dtype_follows_set_default_dtype(float64_default):
    assert ta.get_default_dtype() == np.float64
    assert ta.tensor([1.5]).dtype == np.float64
    assert ta.tensor(2.0).dtype == np.float64
    assert ta.zeros(2).dtype == ta.ones(2).dtype == ta.randn(2).dtype == ta.rand(2).dtype \
        == np.float64
    assert ta.arange(0.0, 1.0, 0.5).dtype == np.float64
    assert ta.full((2,), 1.5).dtype == np.float64
    assert (ta.tensor([1, 2]) / 2).dtype == np.float64
    assert ta.nn.Linear(2, 3).weight.dtype == np.float64
    assert (ta.tensor([1.0], dtype=ta.float32) * 2.5).dtype == np.float32  # scalars stay weak


def test_full_follows_its_fill_value_as_in_torch():
    assert ta.full((2,), 7).dtype == np.int64 and ta.full((2,), True).dtype == np.bool_
    assert ta.full((2,), 0.5).dtype == np.float32
    assert ta.full((2,), 7, dtype=ta.float32).dtype == np.float32


def test_set_default_dtype_takes_floats_only():
    with pytest.raises(TypeError, match="only floating-point dtypes"):
        ta.set_default_dtype(ta.int64)
    assert ta.get_default_dtype() == np.float32


def test_gradients_keep_their_inputs_dtype_after_promotion():
    x = ta.tensor(np.ones(3, np.float16), requires_grad=True)
    y = ta.tensor(np.ones(3, np.float64), requires_grad=True)
    out = x * y  # float64
    out.sum().backward()
    assert out.dtype == np.float64 and x.grad.dtype == np.float16 and y.grad.dtype == np.float64
    s = ta.tensor(np.float64(2.0), requires_grad=True)  # 0-d float64: does not raise precision
    z = ta.ones(3, requires_grad=True)
    w = z * s
    w.sum().backward()
    assert w.dtype == np.float32 and s.grad.dtype == np.float64 and s.grad.item() == 3.0
