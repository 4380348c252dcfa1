"""clamp / clip / clamp_ / clip_ with one bound a Python number and the other a tensor, as torch
2.13 has them: torch's two overloads take both bounds as numbers or both as tensors, so a
number with a tensor is a TypeError, except that its argument parser reads a 0-d tensor that
needs no grad as a number (its value: the number overload's dtype then). clamp_min /
clamp_max and a tensor with None: the tensor overload (values, dtype, gradients of x and of
the bound)."""

import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

XS = [-2.0, -0.5, 0.5, 1.0, 2.0, 3.0]
BOUND = [1.0, 0.0, -1.0, 1.0, 1.5, 4.0]


def _libs(lib, xdtype, bdtype, bound_grad=True):
    x = lib.tensor(XS, dtype=getattr(lib, xdtype), requires_grad=xdtype.startswith("float"))
    b = lib.tensor(BOUND if bdtype.startswith("float") else [1, 0, -1, 1, 1, 4],
                   dtype=getattr(lib, bdtype),
                   requires_grad=bound_grad and bdtype.startswith("float"))
    return x, b


MIXED = {
    "clamp(min=number, max=tensor)": lambda lib, x, b: lib.clamp(x, min=0.0, max=b),
    "clamp(min=tensor, max=number)": lambda lib, x, b: lib.clamp(x, min=b, max=1.0),
    "clip(number, tensor)": lambda lib, x, b: lib.clip(x, 0, b),
    "x.clamp(tensor, number)": lambda lib, x, b: x.clamp(b, 0.5),
    "x.clip(number, tensor)": lambda lib, x, b: x.clip(0.0, b),
    "x.clamp_(number, tensor)": lambda lib, x, b: (x * 1).clamp_(0.0, b),
    "x.clip_(tensor, number)": lambda lib, x, b: (x * 1).clip_(b, 1.0),
    "0-d tensor needing grad": lambda lib, x, b: lib.clamp(x, b.sum(), 3.0),
}


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float64", "float32"),
                                    ("int64", "float32"), ("float32", "int64")])
@pytest.mark.parametrize("name", sorted(MIXED))
def test_a_number_bound_with_a_tensor_bound_is_refused_as_torch(name, dtypes):
    if name.startswith("0-d") and dtypes[1] == "int64":
        pytest.skip("an integer 0-d bound needs no grad: a number to torch (tested below)")
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        MIXED[name](torch, *_libs(torch, *dtypes))
    x, b = _libs(ta, *dtypes)
    with pytest.raises(TypeError, match="both bounds as numbers or both as tensors"):
        MIXED[name](ta, x, b)
    assert x.tolist() == XS or dtypes[0] == "int64"


ZERO_D = {  # the 0-d tensor needs no grad: read as the number it holds
    "clamp(min=0-d, max=number)": lambda lib, x, z: lib.clamp(x, min=z, max=1.0),
    "clamp(min=number, max=0-d)": lambda lib, x, z: lib.clamp(x, min=-1, max=z),
    "x.clip(0-d, number)": lambda lib, x, z: x.clip(z, 2),
    "x.clamp_(0-d, number)": lambda lib, x, z: (x * 1).clamp_(z, 1.5),
}


@pytest.mark.parametrize("zdtype", ["float64", "int64", "float16"])
@pytest.mark.parametrize("xdtype", ["float32", "int64", "float16"])
@pytest.mark.parametrize("name", sorted(ZERO_D))
def test_a_0d_tensor_that_needs_no_grad_counts_as_a_number_as_torch(name, xdtype, zdtype):
    z = 0.25 if zdtype != "int64" else 0
    if name.startswith("x.clamp_") and xdtype == "int64":  # a float result into int64
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            ZERO_D[name](torch, torch.tensor([-2, 3]), torch.tensor(z, dtype=torch.int64))
        with pytest.raises(ta.DTypeError, match="clamp_: the result is float32, which cannot"):
            ZERO_D[name](ta, ta.tensor([-2, 3]), ta.tensor(z, dtype=getattr(ta, zdtype)))
        return
    outs = []
    for lib in (torch, ta):
        x = lib.tensor(XS if xdtype != "int64" else [-2, -1, 0, 1, 2, 3],
                       dtype=getattr(lib, xdtype), requires_grad=xdtype != "int64")
        zt = lib.tensor(z, dtype=getattr(lib, zdtype))
        y = ZERO_D[name](lib, x, zt)
        grad = None
        if y.requires_grad:
            y.backward(lib.ones(y.shape, dtype=y.dtype))
            grad = x.grad.tolist()
        outs.append((str(y.dtype).removeprefix("torch."), y.tolist(), grad))
    assert outs[0] == outs[1]


ONE_BOUND = {
    "clamp_min(x, t)": lambda lib, x, b: lib.clamp_min(x, b),
    "clamp_max(x, t)": lambda lib, x, b: lib.clamp_max(x, b),
    "x.clamp_min(t)": lambda lib, x, b: x.clamp_min(b),
    "x.clamp_max(t)": lambda lib, x, b: x.clamp_max(b),
    "clamp(x, min=t)": lambda lib, x, b: lib.clamp(x, min=b),
    "clamp(x, None, t)": lambda lib, x, b: lib.clamp(x, None, b),
    "x.clamp_min_(t)": lambda lib, x, b: (x * 1).clamp_min_(b),
    "x.clamp_max_(t)": lambda lib, x, b: (x * 1).clamp_max_(b),
    "clamp(x, t, t + 1)": lambda lib, x, b: lib.clamp(x, b, b + 1),
}


@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float32", "float64"),
                                    ("float64", "float32"), ("int64", "float32"),
                                    ("float32", "int64"), ("int64", "int64"),
                                    ("float16", "float32")])
@pytest.mark.parametrize("name", sorted(ONE_BOUND))
def test_tensor_bounds_give_torchs_values_dtype_and_gradients(name, dtypes):
    outs = []
    for lib in (torch, ta):
        x, b = _libs(lib, *dtypes)
        try:
            y = ONE_BOUND[name](lib, x, b)
        except (RuntimeError, TypeError) as e:  # (an integer x written with a float result)
            outs.append(("refused", "cannot be" in str(e) or "can't be cast" in str(e)))
            continue
        grads = None
        if y.requires_grad:
            y.backward(lib.arange(1.0, 7.0, dtype=y.dtype))
            grads = [None if v.grad is None else v.grad.tolist() for v in (x, b)]
        outs.append((str(y.dtype).removeprefix("torch."), y.tolist(), grads))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("bounds", [(0.0, 2.0), (0.5, None), (None, 1.5), (0, 2)])
@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
def test_clamp_in_place_with_float_number_bounds_refuses_an_integer_tensor_as_torch(dtype, bounds):
    """x.clamp_(0.0, 2.0) on an int64 x cut the bounds to ints and wrote them in; torch's
    result is float, which it refuses to write into the integer tensor (as clamp_ with a 0-d
    float tensor bound already did). Integer bounds stay fine, bool refused either way."""
    values = [0, 3, 1] if dtype != "bool" else [True, False, True]
    t = torch.tensor(values, dtype=getattr(torch, dtype))
    a = ta.tensor(values, dtype=getattr(ta, dtype))
    try:
        want = t.clamp_(*bounds).tolist()
    except RuntimeError as e:
        assert "can't be cast to the desired output type" in str(e)
        with pytest.raises(ta.DTypeError, match="clamp_: the result is .*, which cannot be "
                                                f"stored in this {dtype} tensor"):
            a.clamp_(*bounds)
        assert a.tolist() == values
        return
    assert a.clamp_(*bounds) is a and a.tolist() == want
