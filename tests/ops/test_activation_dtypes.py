"""The activations on bool and integer tensors, as torch 2.13 takes them: refused where torch
refuses (a DTypeError naming the op and the dtype), else the same values in the same dtype
(relu, relu6 and hardtanh keep an integer dtype; sigmoid, tanh, softsign and tanhshrink give
the default float dtype; threshold keeps it). Checked through every entry point each has:
tinyattn.nn.functional, the tinyattn function and Tensor method where torch has them, the
module, and inplace=True."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# name: (functional arguments after x, the module and its constructor arguments)
ACTIVATIONS = {
    "relu": ((), "ReLU", ()), "relu6": ((), "ReLU6", ()),
    "leaky_relu": ((), "LeakyReLU", ()), "hardtanh": ((), "Hardtanh", ()),
    "elu": ((), "ELU", ()), "selu": ((), "SELU", ()), "celu": ((), "CELU", ()),
    "gelu": ((), "GELU", ()), "silu": ((), "SiLU", ()), "mish": ((), "Mish", ()),
    "softplus": ((), "Softplus", ()), "softsign": ((), "Softsign", ()),
    "hardsigmoid": ((), "Hardsigmoid", ()), "hardswish": ((), "Hardswish", ()),
    "sigmoid": ((), "Sigmoid", ()), "tanh": ((), "Tanh", ()),
    "logsigmoid": ((), "LogSigmoid", ()), "tanhshrink": ((), "Tanhshrink", ()),
    "threshold": ((1, 5), "Threshold", (1, 5)), "softshrink": ((), "Softshrink", ()),
    "hardshrink": ((), "Hardshrink", ()), "rrelu": ((), "RReLU", ()),
}
DTYPES = ["bool", "uint8", "int8", "int32", "int64"]
VALUES = [-3, -1, 0, 1, 2, 7]


def _inputs(dtype):
    # (uint8: no 255, whose abs() + 1 wraps to 0 in torch's softsign, x / (|x| + 1): inf)
    values = np.abs(VALUES) if dtype == "uint8" else np.array(VALUES)
    values = values != 0 if dtype == "bool" else values.astype(dtype)
    return ta.tensor(values), torch.tensor(values)


def _outcome(call):
    try:
        return call()
    except (RuntimeError, NotImplementedError, TypeError) as e:
        return e


def _check(name, dtype, ours, theirs):
    if isinstance(theirs, Exception):
        assert isinstance(ours, ta.DTypeError), (name, dtype, ours)
        assert name.split("(")[0].rstrip("_") in str(ours) and dtype in str(ours), str(ours)
        return
    assert not isinstance(ours, Exception), (name, dtype, theirs, ours)
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch."), (name, dtype)
    np.testing.assert_allclose(ours.numpy().astype(np.float64),
                               theirs.numpy().astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_on_bool_and_integers_as_torch(name, dtype):
    args, module, module_args = ACTIVATIONS[name]
    x, tx = _inputs(dtype)
    theirs = _outcome(lambda: getattr(TF, name)(tx, *args))
    _check(name, dtype, _outcome(lambda: getattr(F, name)(x, *args)), theirs)
    _check(name, dtype, _outcome(lambda: getattr(nn, module)(*module_args)(x)), theirs)
    if hasattr(torch, name):  # ta.relu, ta.threshold, ...: only where torch has them
        _check(name, dtype, _outcome(lambda: getattr(ta, name)(x, *args)), theirs)
    if hasattr(torch.Tensor, name):
        _check(name, dtype, _outcome(lambda: getattr(x, name)(*args)), theirs)


IN_PLACE = ["relu", "relu6", "leaky_relu", "hardtanh", "elu", "selu", "celu", "silu", "mish",
            "hardsigmoid", "hardswish", "threshold", "rrelu"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", IN_PLACE)
def test_inplace_activation_on_bool_and_integers_as_torch(name, dtype):
    args = ACTIVATIONS[name][0]
    x, tx = _inputs(dtype)
    theirs = _outcome(lambda: getattr(TF, name)(tx, *args, inplace=True))
    ours = _outcome(lambda: getattr(F, name)(x, *args, inplace=True))
    _check(f"{name}(inplace=True)", dtype, ours, theirs)
    if not isinstance(theirs, Exception):
        assert ours is x
    else:
        assert x.tolist() == tx.tolist()  # refused before anything was written


def test_relu_refuses_bool_naming_the_op_and_the_dtype():
    """relu(bool) gave int64 (NumPy's maximum(True, 0)); torch: "Boolean inputs not supported
    for relu"."""
    mask = ta.tensor([True, False])
    for call in (F.relu, ta.relu, ta.Tensor.relu, nn.ReLU(), ta.Tensor.relu_,
                 lambda x: F.relu(x, inplace=True)):
        with pytest.raises(ta.DTypeError, match="relu: bool inputs are not supported"):
            call(mask)
    with pytest.raises(ta.DTypeError, match="relu6: bool inputs are not supported"):
        F.relu6(mask)
    assert mask.tolist() == [True, False]
