"""The activation modules (nn/activation.py) and the functional `inplace=` and `dtype=`
arguments, against torch: values, gradients, reprs and in-place semantics; the softmax
family's implicit dim (dim=None) and its refusal of integer inputs."""

import os
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

# name: constructor arguments (positional, as torch code writes them)
MODULES = {
    "ReLU": (), "ReLU6": (), "LeakyReLU": (0.2,), "ELU": (0.7,), "SELU": (), "CELU": (0.7,),
    "GELU": ("tanh",), "SiLU": (), "Mish": (), "Softplus": (2.0, 3.0), "Softsign": (),
    "Hardtanh": (-0.5, 2.0), "Hardsigmoid": (), "Hardswish": (), "Tanh": (), "Sigmoid": (),
    "LogSigmoid": (), "Softmax": (-1,), "LogSoftmax": (0,), "Softmin": (-1,), "GLU": (0,),
}
IN_PLACE = ["ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "SiLU", "Mish", "Hardtanh",
            "Hardsigmoid", "Hardswish"]
X = np.random.default_rng(0).standard_normal((4, 5)) * 3  # past every kink (±1, ±3, 6...)
# (rtol 1e-6, not 1e-12: in float64 torch still takes some constants as float32 - CELU's alpha,
# Hardsigmoid's 1/6 in the gradient - where tinyattn keeps them exact)
RTOL = 1e-6


def _grads(torch, module, tmodule, inplace=False):
    """(output, input grad) of each engine for sum(module(x) * x), x = X (float64); with
    inplace, the module runs on a non-leaf copy (h = x * 1), which it must change and return."""
    a, t = ta.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    h, th = (a * 1.0, t * 1.0) if inplace else (a, t)
    y, ty = module(h), tmodule(th)
    if inplace:
        assert y is h
    weights = X[tuple(slice(n) for n in y.shape)]  # (GLU halves a dim)
    (y * ta.tensor(weights)).sum().backward()
    (ty * torch.tensor(weights)).sum().backward()
    return (y.detach().numpy(), a.grad.numpy()), (ty.detach().numpy(), t.grad.numpy())


@pytest.mark.parametrize("name", sorted(MODULES))
def test_activation_module_matches_torch(name):
    torch = pytest.importorskip("torch")
    args = MODULES[name]
    module, tmodule = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    ours, theirs = _grads(torch, module, tmodule)
    for got, want in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-12)
    if name not in ("Hardsigmoid", "Hardswish"):  # (torch prints no settings for these two)
        assert repr(module) == repr(tmodule)


@pytest.mark.parametrize("name", IN_PLACE)
def test_inplace_activation_changes_its_input_and_backpropagates_as_torch(name):
    torch = pytest.importorskip("torch")
    args = MODULES[name]
    module = getattr(nn, name)(*args, inplace=True)
    tmodule = getattr(torch.nn, name)(*args, inplace=True)
    ours, theirs = _grads(torch, module, tmodule, inplace=True)
    for got, want in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-12)
    if name not in ("Hardsigmoid", "Hardswish"):
        assert repr(module) == repr(tmodule)  # "inplace=True" shown, as torch shows it
    module.inplace = False  # a setting read at each call, as torch's
    x = ta.tensor(X)
    assert module(x) is not x and np.array_equal(x.numpy(), X)


def test_inplace_on_a_leaf_that_requires_grad_is_refused_as_in_torch():
    w = ta.tensor(X, requires_grad=True)
    with pytest.raises(ta.GraphError, match=r"relu\(inplace=True\): .*leaf that requires grad"):
        F.relu(w, inplace=True)
    x = ta.tensor(X.copy())
    assert F.relu(x, inplace=True) is x and (x.numpy() >= 0).all()  # no graph: just the values


def test_dropout_inplace_matches_its_copy():
    x = ta.ones(1000) * 1.0
    ta.manual_seed(3)
    want = F.dropout(x, 0.25).numpy()
    ta.manual_seed(3)
    m = nn.Dropout(0.25, inplace=True)
    assert m(x) is x and np.array_equal(x.numpy(), want)
    assert repr(m) == "Dropout(p=0.25, inplace=True)"


@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "softmin"])
def test_softmax_dtype_converts_first_as_torch(fn):
    torch = pytest.importorskip("torch")
    x = X.astype(np.float32)
    got = getattr(F, fn)(ta.tensor(x), dim=-1, dtype=np.float64)
    want = getattr(torch.nn.functional, fn)(torch.tensor(x), dim=-1, dtype=torch.float64)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["LeakyReLU", "ELU", "CELU", "Hardtanh", "Softplus", "GELU",
                                  "GLU"])
def test_activation_defaults_match_torch(name):
    """Made with no arguments, each module computes what torch's does (the defaults)."""
    torch = pytest.importorskip("torch")
    module, tmodule = getattr(nn, name)(), getattr(torch.nn, name)()
    x = {"Softplus": X * 8, "GLU": X[:, :4]}.get(name, X)  # (past softplus's threshold too)
    np.testing.assert_allclose(module(ta.tensor(x)).numpy(), tmodule(torch.tensor(x)).numpy(),
                               rtol=RTOL, atol=1e-12)


def test_softplus_returns_x_past_its_default_threshold_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([20.5, 19.5, -3.0])
    got, want = nn.Softplus()(ta.tensor(x)).numpy(), torch.nn.Softplus()(torch.tensor(x)).numpy()
    assert got[0] == want[0] == 20.5  # beta x > 20: x itself, exactly
    np.testing.assert_allclose(got, want, rtol=1e-12)


SOFTMAXES = [("Softmax", "softmax"), ("LogSoftmax", "log_softmax"), ("Softmin", "softmin")]


@pytest.mark.parametrize("module, fn", SOFTMAXES)
@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 4])
def test_softmax_without_dim_takes_torchs_implicit_dim_and_warns(module, fn, ndim):
    """dim=None (nn.Softmax's default, F.softmax's too): torch's legacy choice, dim 0 for 0-,
    1- and 3-D inputs, else 1, with torch's deprecation warning naming the function."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(ndim).standard_normal((2, 3, 4, 5)[:ndim])
    want_dim = 0 if ndim in (0, 1, 3) else 1
    with pytest.warns(UserWarning) as theirs:
        want = getattr(torch.nn, module)()(torch.tensor(x)).numpy()
    calls = [lambda: getattr(nn, module)()(ta.tensor(x)),
             lambda: getattr(F, fn)(ta.tensor(x)),
             lambda: getattr(F, fn)(ta.tensor(x), dim=None)]
    for call in calls:
        with pytest.warns(UserWarning, match=rf"^Implicit dimension choice for {fn} has been "
                                             r"deprecated. Change the call to include dim=X "
                                             r"as an argument.$") as ours:
            got = call()
        assert str(ours[0].message) == str(theirs[0].message)
        if "MUTANT_UNDER_TEST" not in os.environ:  # (mutmut's trampoline adds a frame)
            assert ours[0].filename == __file__  # (stacklevel: the warning points at the caller)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            got.numpy(), getattr(F, fn)(ta.tensor(x), dim=want_dim).numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("module", [m for m, _ in SOFTMAXES])
def test_softmax_modules_default_to_dim_none_as_torch(module):
    torch = pytest.importorskip("torch")
    assert repr(getattr(nn, module)()) == repr(getattr(torch.nn, module)()) == \
        f"{module}(dim=None)"
    assert getattr(nn, module)().dim is None
    x = X[None]  # 3-D: the implicit dim is 0, not the last
    with pytest.warns(UserWarning):
        ours = getattr(nn, module)()
        got = ours(ta.tensor(x, requires_grad=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a dim given: no warning
        getattr(nn, module)(dim=-1)(ta.tensor(x))
    assert got.shape == x.shape


@pytest.mark.parametrize("fn", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_softmax_family_refuses_integer_input_without_a_float_dtype(fn, dtype):
    torch = pytest.importorskip("torch")
    x = np.arange(6).reshape(2, 3).astype(dtype)
    with pytest.raises((NotImplementedError, RuntimeError)):  # (softmin of bools: -x fails)
        getattr(torch.nn.functional, fn)(torch.tensor(x), 0)
    name = np.dtype(dtype).name
    with pytest.raises(ta.DTypeError, match=rf"^{fn}: input must be floating point, got "
                                            rf"{name}; pass dtype="):
        getattr(F, fn)(ta.tensor(x), 0)
    with pytest.raises(ta.DTypeError, match=rf"^{fn}: input must be floating point, got int64"):
        getattr(F, fn)(ta.tensor(x.astype(np.float32)), 0, dtype=np.int64)
    # an integer input with a float dtype= is converted first, as torch's
    got = getattr(F, fn)(ta.tensor(x), 0, dtype=np.float64)
    # (torch's softmin negates before converting, which bools refuse; ours converts first)
    tx = torch.tensor(x.astype(np.int64) if fn == "softmin" else x)
    want = getattr(torch.nn.functional, fn)(tx, 0, dtype=torch.float64)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


# ---- integer (and bool) inputs: kept, converted or refused as torch does --------------------

INTS = {"int64": [-3, -1, 0, 1, 2, 7], "int32": [-3, -1, 0, 1, 2, 7], "int8": [-100, 0, 100],
        "uint8": [0, 5, 9], "bool": [True, False]}


@pytest.mark.parametrize("dtype", sorted(INTS))
@pytest.mark.parametrize("name, args, call", [
    ("ReLU6", (), lambda fns, x: fns.relu6(x)),
    ("Hardtanh", (), lambda fns, x: fns.hardtanh(x)),
    ("Hardtanh", (-2.7, 2.7), lambda fns, x: fns.hardtanh(x, -2.7, 2.7)),  # (cut toward 0)
    ("Hardtanh", (-0.5, 1.5), lambda fns, x: fns.hardtanh(x, -0.5, 1.5)),
    ("Hardtanh", (0.0, 300.0), lambda fns, x: fns.hardtanh(x, 0.0, 300.0)),  # (past int8: refused)
    ("LeakyReLU", (), lambda fns, x: fns.leaky_relu(x)),
    ("GLU", (0,), lambda fns, x: fns.glu(x, 0)),
    ("Softsign", (), lambda fns, x: fns.softsign(x)),
], ids=["relu6", "hardtanh", "hardtanh 2.7", "hardtanh 0.5", "hardtanh 300", "leaky_relu",
        "glu", "softsign"])
def test_integer_inputs_to_activations_as_torch(name, args, call, dtype):
    """relu6 and hardtanh keep an integer dtype (they gave float64), leaky_relu and glu refuse
    integers (they gave floats), softsign takes them into the default float dtype (it refused);
    bools are refused by all; the modules as their functions."""
    torch = pytest.importorskip("torch")
    values = INTS[dtype][:2] if name == "GLU" else INTS[dtype]
    theirs = torch.tensor(values, dtype=getattr(torch, dtype))
    ours = ta.tensor(np.array(values, dtype=dtype))
    for fn, tfn in ((lambda x: call(F, x), lambda x: call(torch.nn.functional, x)),
                    (getattr(nn, name)(*args), getattr(torch.nn, name)(*args))):
        try:
            want = tfn(theirs)
        except (RuntimeError, NotImplementedError):
            with pytest.raises(ta.DTypeError, match=r"(hardtanh|relu6|leaky_relu|glu|softsign): "):
                fn(ours)
            continue
        got = fn(ours)
        assert str(got.dtype) == str(want.dtype)[6:]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_relu6_and_hardtanh_in_place_on_integers_and_their_messages():
    x = ta.tensor([-3, 2, 9])
    assert F.relu6(x, inplace=True) is x and x.tolist() == [0, 2, 6] and x.dtype == np.int64
    with pytest.raises(ta.DTypeError, match="hardtanh: cannot clip an unsigned uint8 tensor to "
                                            "negative limits"):
        F.hardtanh(ta.tensor(np.array([1], dtype=np.uint8)))
    with pytest.raises(ta.DTypeError, match="leaky_relu: needs a floating-point input, got int64"):
        nn.LeakyReLU()(ta.tensor([1, 2]))
    assert F.softsign(ta.tensor([1, 3])).tolist() == [0.5, 0.75]
