"""The number arguments of the factories (arange, linspace, logspace, randint, tril_indices,
triu_indices, eye, randperm): what torch refuses is refused with an error naming the factory
and the argument, not accepted as a default (arange(None, 3) was arange(3)), read as another
number (tril_indices(2.5, 4), randint(0, 2.5, ...)) or left to a raw error of NumPy's or
Python's; what torch takes (0-d tensors, bools as bounds) gives torch's values."""

import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import ShapeError

# (factory, args, kwargs, the argument the message names)
REFUSED = [
    ("arange", (None, 3), {}, "start"),
    ("arange", (0, None), {}, "end"),
    ("arange", (0, 3, None), {}, "step"),
    ("arange", ("a", 3), {}, "start"),
    ("arange", (0, 3, "a"), {}, "step"),
    ("arange", (), {"end": None}, "end"),
    ("linspace", (None, 1.0, 5), {}, "start"),
    ("linspace", (0.0, "a", 5), {}, "end"),
    ("linspace", (0.0, 1.0, True), {}, "steps"),
    ("linspace", (0.0, 1.0, 2.0), {}, "steps"),
    ("logspace", (0.0, None, 5), {}, "end"),
    ("logspace", (0.0, 1.0, 5, None), {}, "base"),
    ("logspace", (0.0, 1.0, 5, "a"), {}, "base"),
    ("logspace", (0.0, 1.0, True), {}, "steps"),
    ("randint", (None, 5, (3,)), {}, "low"),
    ("randint", (0, None, (3,)), {}, "high"),
    ("randint", (2.5, 5, (3,)), {}, "low"),
    ("randint", (0, 2.5, (3,)), {}, "high"),
    ("randint", (True, 5, (3,)), {}, "low"),
    ("randint", (0, "a", (3,)), {}, "high"),
    ("tril_indices", (None, 3), {}, "row"),
    ("tril_indices", (3, None), {}, "col"),
    ("tril_indices", (2.5, 4), {}, "row"),
    ("tril_indices", (3, True), {}, "col"),
    ("tril_indices", (3, 4, 2.5), {}, "offset"),
    ("tril_indices", (3, 4, None), {}, "offset"),
    ("triu_indices", (3, "a"), {}, "col"),
    ("triu_indices", (True, 4), {}, "row"),
    ("triu_indices", (3, 4, True), {}, "offset"),
    ("triu_indices", (3, 4, float("nan")), {}, "offset"),
    ("eye", (True, 4), {}, "n"),
    ("eye", (3, True), {}, "m"),
    ("randperm", (True,), {}, "n"),
]


def _ids(cases):
    return [f"{c[0]}{c[1]}{c[2] or ''}" for c in cases]


@pytest.mark.parametrize(("name", "args", "kwargs", "what"), REFUSED, ids=_ids(REFUSED))
def test_refused_naming_the_factory_and_the_argument(name, args, kwargs, what):
    with pytest.raises(TypeError) as info:
        getattr(ta, name)(*args, **kwargs)
    message = str(info.value)
    assert message.startswith(name), message
    assert what in message, message


@pytest.mark.parametrize(("name", "args", "kwargs", "what"), REFUSED, ids=_ids(REFUSED))
def test_torch_refuses_them_too(name, args, kwargs, what):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        getattr(torch, name)(*args, **kwargs)


NEGATIVE = [("tril_indices", (-3, 4), "row"), ("tril_indices", (3, -1), "col"),
            ("triu_indices", (-1, 4), "row"), ("triu_indices", (3, -2), "col")]


@pytest.mark.parametrize(("name", "args", "what"), NEGATIVE)
def test_a_negative_row_or_col_is_refused(name, args, what):
    with pytest.raises(ShapeError, match=f"{name}: {what} must be non-negative"):
        getattr(ta, name)(*args)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        getattr(torch, name)(*args)


# (factory, the call's (args, kwargs) in the library given): accepted by both, the same values
TAKEN = [
    ("arange", lambda lib: ((4,), {})),
    ("arange", lambda lib: ((), {"end": 4})),
    ("arange", lambda lib: ((), {"start": 1, "end": 4})),
    ("arange", lambda lib: ((True, 5), {})),
    ("arange", lambda lib: ((0, 5, True), {})),
    ("arange", lambda lib: ((0, lib.tensor(5)), {})),
    ("arange", lambda lib: ((0.5, 3), {})),
    ("linspace", lambda lib: ((lib.tensor(0.0), 1, 5), {})),
    ("linspace", lambda lib: ((0, 1, lib.tensor(3)), {})),
    ("linspace", lambda lib: ((True, 1, 3), {})),
    ("logspace", lambda lib: ((0, 1, 3), {"base": 2})),
    ("logspace", lambda lib: ((0, 1, 3), {"base": lib.tensor(2.0)})),
    ("logspace", lambda lib: ((0, 1, 3), {"base": True})),
    ("tril_indices", lambda lib: ((3, 4), {"offset": -1})),
    ("tril_indices", lambda lib: ((lib.tensor(3), 3), {})),
    ("tril_indices", lambda lib: ((0, 0), {})),
    ("triu_indices", lambda lib: ((3, lib.tensor(4), 1), {})),
    ("eye", lambda lib: ((lib.tensor(2),), {})),
    ("randperm", lambda lib: ((0,), {})),
]


@pytest.mark.parametrize(("name", "call"), TAKEN, ids=[f"{c[0]}-{i}" for i, c in enumerate(TAKEN)])
def test_what_torch_takes_gives_its_values(name, call):
    torch = pytest.importorskip("torch")
    args, kwargs = call(ta)
    got = getattr(ta, name)(*args, **kwargs)
    args, kwargs = call(torch)
    want = getattr(torch, name)(*args, **kwargs)
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype) == str(want.dtype).replace("torch.", "")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_logspace_with_a_tensor_base():
    # (it raised AttributeError: the 0-d tensor reached NumPy's power as a Tensor)
    got = ta.logspace(0, 1, 3, base=ta.tensor(2.0))
    np.testing.assert_allclose(got.numpy(), [1.0, 2 ** 0.5, 2.0], rtol=1e-6)
    with pytest.raises(TypeError, match="logspace: takes numbers or 0-d tensors"):
        ta.logspace(0, 1, 3, base=ta.tensor([2.0, 3.0]))


def test_an_infinite_bound_gives_inf_and_nan_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ta.linspace(0, float("inf"), 3).numpy()
        big = ta.logspace(0, 100, 3, dtype=ta.float32).numpy()
    assert np.isnan(got[0]) or got[0] == 0  # (0 * inf: NumPy's first entry is the start)
    assert np.isinf(got[-1]) or np.isnan(got[-1])
    assert np.isinf(big[-1])


@pytest.mark.parametrize("call", [
    lambda: ta.randint(5, (3,)), lambda: ta.randint(high=5, size=(3,)),
    lambda: ta.randint(0, 5, (3,)), lambda: ta.randint(2, 5, size=(3,)),
    lambda: ta.randint(ta.tensor(5), (3,)), lambda: ta.randint(0, np.int64(5), (3,)),
    lambda: ta.randint_like(ta.ones(3), 5), lambda: ta.randint_like(ta.ones(3), 2, 5),
])
def test_randint_forms_torch_takes(call):
    out = call()
    assert tuple(out.shape) == (3,)
    assert ((out.numpy() >= 0) & (out.numpy() < 5)).all()


def test_randint_with_no_bound_or_no_size():
    with pytest.raises(TypeError, match="missing its high"):
        ta.randint(size=(3,))
    with pytest.raises(TypeError, match="needs size"):
        ta.randint(0, 5)
    with pytest.raises(TypeError, match="randint: high must be an int"):
        ta.randint_like(ta.ones(3), None)


def test_the_omitted_default_reads_as_such():
    import inspect

    assert "start=<omitted>" in str(inspect.signature(ta.arange))
