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
        if ndim:  # a 0-d tensor whose value NumPy holds as a scalar (reductions; x[0] is a
            # 0-d view, as torch's): np.float64 is a Python float too, and must not count as a
            # Python number
            picked = ta.tensor(values).max()
            assert isinstance(picked._data, np.generic)
            out.append((f"{name} 0-d (a NumPy scalar)", picked,
                        torch.from_numpy(np.array(values)).max()))
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


@pytest.mark.parametrize("fn", ["exp", "log", "sqrt", "tanh", "sigmoid"])
def test_float_functions_of_integers_give_the_default_dtype(fn):
    # (softmax of an int is refused, as torch's: tests/core/test_torch_keywords_and_ctor.py)
    args = ()
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


# ---- what torch refuses: mixed dtypes in matrix products, lerp, isclose; integer addcdiv ------

PRODUCTS = {  # name -> fn(lib, a (2, 2), b (2, 2))
    "matmul": lambda lib, a, b: a @ b,
    "matmul()": lambda lib, a, b: lib.matmul(a, b) if lib is torch else a.matmul(b),
    "mm": lambda lib, a, b: lib.mm(a, b),
    "mv": lambda lib, a, b: lib.mv(a, b[0]),
    "dot": lambda lib, a, b: lib.dot(a[0], b[0]),
    "bmm": lambda lib, a, b: lib.bmm(a[None], b[None]),
    "einsum": lambda lib, a, b: lib.einsum("ij,jk->ik", a, b),
    "einsum 3 operands": lambda lib, a, b: lib.einsum("ij,jk,kl->il", a, a, b),
    "inner": lambda lib, a, b: lib.inner(a, b),
    "linear": lambda lib, a, b: lib.nn.functional.linear(a, b),  # (promoted them before)
    "linear bias": lambda lib, a, b: lib.nn.functional.linear(a, a, b[0]),
}
MIXED = [("float32", "float64"), ("float64", "float32"), ("int64", "float64"),
         ("float16", "float32"), ("int32", "int64")]


@pytest.mark.parametrize("name", sorted(PRODUCTS))
@pytest.mark.parametrize("dtypes", MIXED, ids=["-".join(d) for d in MIXED])
def test_matrix_products_refuse_two_dtypes_as_torch(name, dtypes):
    fn = PRODUCTS[name]
    a, b = (np.arange(1, 5).reshape(2, 2).astype(d) for d in dtypes)
    with pytest.raises(RuntimeError):
        fn(torch, torch.from_numpy(a), torch.from_numpy(b))
    with pytest.raises(ta.DTypeError) as info:
        fn(ta, ta.tensor(a), ta.tensor(b))
    message = str(info.value)
    assert dtypes[0] in message and dtypes[1] in message, message
    assert message.split(":")[0] in name.replace("()", "") + " matmul", message  # the op


@pytest.mark.parametrize("name", sorted(PRODUCTS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64"])
def test_matrix_products_of_one_dtype_keep_it_as_torch(name, dtype):
    a = np.arange(1, 5).reshape(2, 2).astype(dtype)
    b = a[::-1].copy()
    got = PRODUCTS[name](ta, ta.tensor(a), ta.tensor(b))
    want = PRODUCTS[name](torch, torch.from_numpy(a), torch.from_numpy(b))
    assert str(got.dtype) == str(want.dtype).replace("torch.", "")
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_matrix_products_refuse_lists_and_bools():
    x = ta.tensor([[1.0, 2.0]], dtype=ta.float64)
    for product in (lambda: x @ [[1.0], [2.0]], lambda: [[1.0, 2.0]] @ x.T,
                    lambda: x[0].dot([3, 4])):
        with pytest.raises(TypeError, match="not a list"):  # torch's @ takes no list either
            product()
    with pytest.raises(ta.DTypeError, match="matmul: bool operands"):
        ta.tensor([[True]]) @ ta.tensor([[False]])  # torch: not implemented for 'Bool'
    # a 0-d einsum operand may have its own dtype (torch takes it, and promotes)
    out = ta.einsum(",i->i", ta.tensor(2.0, dtype=ta.float64), ta.ones(3))
    want = torch.einsum(",i->i", torch.tensor(2.0, dtype=torch.float64), torch.ones(3))
    assert out.dtype == np.float64 and str(want.dtype) == "torch.float64"


def test_addmm_and_kin_refuse_a_self_of_another_dtype_as_torch():
    f32 = np.ones((2, 2), np.float32)
    for make in (lambda lib, c, m: lib.addmm(c, m, m), lambda lib, c, m: lib.addmv(c[0], m, m[0]),
                 lambda lib, c, m: lib.baddbmm(c[None], m[None], m[None]),
                 lambda lib, c, m: lib.addbmm(c, m[None], m[None]),
                 lambda lib, c, m: lib.addmm(c, m, m, beta=0)):
        with pytest.raises(RuntimeError):
            make(torch, torch.ones(2, 2, dtype=torch.float64), torch.from_numpy(f32))
        with pytest.raises(ta.DTypeError, match="float64.*float32"):
            make(ta, ta.ones(2, 2, dtype=ta.float64), ta.tensor(f32))
    # addr promotes self with the vectors, as torch's
    got = ta.addr(ta.ones(2, 2, dtype=ta.float64), ta.ones(2), ta.ones(2))
    want = torch.addr(torch.ones(2, 2, dtype=torch.float64), torch.ones(2), torch.ones(2))
    assert got.dtype == np.float64 and str(want.dtype) == "torch.float64"


@pytest.mark.parametrize("name, make", [
    ("addmm", lambda lib, c, **kw: lib.addmm(c, c, c, **kw)),
    ("addmv", lambda lib, c, **kw: lib.addmv(c[0], c, c[0], **kw)),
    ("addr", lambda lib, c, **kw: lib.addr(c, c[0], c[0], **kw)),
    ("baddbmm", lambda lib, c, **kw: lib.baddbmm(c[None], c[None], c[None], **kw)),
    ("addbmm", lambda lib, c, **kw: lib.addbmm(c, c[None], c[None], **kw)),
])
def test_integer_addmm_and_kin_want_integer_beta_and_alpha(name, make):
    c = np.array([[1, 2], [3, 4]])
    for kw in ({"beta": 0.5}, {"alpha": 0.5}, {"beta": 1.0}):
        # (torch's addr refuses a float beta or alpha for integers, its docs ask for ints; the
        # others cut 0.5 to 0; tinyattn gave a float32 result, 7.5 and 11)
        with pytest.raises(ta.DTypeError, match=f"{name}: {next(iter(kw))}=.* is a float.*int64"):
            make(ta, ta.tensor(c), **kw)
    got, want = make(ta, ta.tensor(c), beta=2, alpha=3), make(torch, torch.tensor(c), beta=2,
                                                                 alpha=3)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()
    assert make(ta, ta.tensor(c), beta=0).tolist() == make(torch, torch.tensor(c),
                                                           beta=0).tolist()


def test_lerp_wants_one_float_dtype_as_torch():
    f16, f32, f64 = (np.ones(2, d) for d in ("float16", "float32", "float64"))
    refused = [(f16, f32, 0.5), (f32, f64, 0.5), (f32, np.array(2.0), 0.5),
               (f32, f32, f64), (np.array([1, 2]), np.array([3, 4]), 0.5)]
    for s, e, w in refused:
        with pytest.raises((RuntimeError, NotImplementedError)):
            torch.lerp(torch.from_numpy(s), torch.from_numpy(e),
                       torch.from_numpy(w) if isinstance(w, np.ndarray) else w)
        with pytest.raises(ta.DTypeError, match="lerp: "):
            ta.lerp(ta.tensor(s), ta.tensor(e), ta.tensor(w) if isinstance(w, np.ndarray) else w)
    with pytest.raises(ta.DTypeError, match="lerp: end is float64"):
        ta.ones(2).lerp_(ta.ones(2, dtype=ta.float64), 0.5)
    # a 0-d weight may be another float dtype, a Python number anything: start's dtype stays
    out = ta.lerp(ta.tensor(f32), ta.tensor(f32 * 3), ta.tensor(0.5, dtype=ta.float64))
    assert out.dtype == np.float32 and out.tolist() == [2.0, 2.0]
    assert ta.lerp(ta.tensor(f16), ta.tensor(f16 * 3), 1).dtype == np.float16


def test_isclose_addcdiv_nanmean_refuse_what_torch_refuses():
    f32, f64 = ta.ones(2), ta.ones(2, dtype=ta.float64)
    for fn in (lambda lib, a, b: lib.isclose(a, b), lambda lib, a, b: lib.allclose(a, b)):
        with pytest.raises(RuntimeError):
            fn(torch, torch.ones(2), torch.ones(2, dtype=torch.float64))
        with pytest.raises(ta.DTypeError, match="isclose: self is float32 .* other is float64"):
            fn(ta, f32, f64)
        with pytest.raises(ta.DTypeError, match="isclose: .*int64"):
            fn(ta, f32, ta.tensor([1, 1]))
    assert ta.isclose(ta.tensor([1, 2]), ta.tensor([1, 3])).tolist() == [True, False]
    assert ta.isclose(f32, 1.0).tolist() == [True, True]  # (a number: fine)
    ints = ta.tensor([1, 2]), ta.tensor([3, 4]), ta.tensor([2, 2])
    with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
        torch.addcdiv(*(torch.tensor(t.numpy()) for t in ints))
    with pytest.raises(ta.DTypeError, match=r"addcdiv: tensor1 \(int64\) and tensor2 \(int64\)"):
        ta.addcdiv(*ints)
    with pytest.raises(ta.DTypeError, match="addcdiv"):
        f32.addcdiv(ints[1], ints[2])
    got = ta.addcdiv(ints[0].float(), ints[1], ints[2].float())  # one float: a true division
    assert got.tolist() == torch.addcdiv(torch.tensor([1.0, 2.0]), torch.tensor([3, 4]),
                                         torch.tensor([2.0, 2.0])).tolist()
    for x in (ta.tensor([1, 2]), ta.tensor([True, False])):
        with pytest.raises(ta.DTypeError, match=f"nanmean: needs a floating-point input, got "
                                                 f"{x.dtype}"):
            x.nanmean()
    assert ta.tensor([1.0, float("nan"), 3.0]).nanmean().item() == 2.0


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_var_and_std_refuse_unbiased_and_correction_together_as_torch(name):
    x = np.array([1.0, 2.0, 4.0])
    for args, kwargs in (((0, True), {"correction": 0}), ((0,), {"unbiased": True,
                                                                 "correction": 0}),
                         ((), {"unbiased": False, "correction": 1})):
        for lib in (ta, torch):
            with pytest.raises(TypeError):
                getattr(lib, name)(lib.tensor(x), *args, **kwargs)
    for args, kwargs in (((0,), {"correction": 0}), ((0, False), {}), ((), {"unbiased": False}),
                         ((), {}), ((0,), {"correction": 2})):
        got, want = (getattr(lib, name)(lib.tensor(x), *args, **kwargs) for lib in (ta, torch))
        for g, w in zip(*((v,) if not isinstance(v, tuple) else v for v in (got, want)),
                        strict=True):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
    if name in ("var", "std"):  # the method, and torch's positional x.var(False)
        assert getattr(ta.tensor(x), name)(False).item() == pytest.approx(
            getattr(torch.tensor(x), name)(False).item())


# ---- result dtypes: torch's ---------------------------------------------------------------------


def test_result_dtypes_of_all_any_square_diff_as_torch():
    cases = [
        ("uint8 all", lambda lib: lib.tensor([1, 2], dtype=lib.uint8).all()),
        ("uint8 any dim", lambda lib: lib.tensor([[0, 2], [0, 0]], dtype=lib.uint8).any(1)),
        ("uint8 all keepdim", lambda lib: lib.all(lib.tensor([[1, 0]], dtype=lib.uint8), 1,
                                                  keepdim=True)),
        ("int8 all", lambda lib: lib.tensor([1, 2], dtype=lib.int8).all()),
        ("float any", lambda lib: lib.tensor([0.0, 0.5]).any()),
        ("bool square", lambda lib: lib.tensor([True, False]).square()),
        ("int8 square", lambda lib: lib.tensor([3, -4], dtype=lib.int8).square()),
        ("uint8 square", lambda lib: lib.square(lib.tensor([3], dtype=lib.uint8))),
        ("diff bool", lambda lib: lib.diff(lib.tensor([True, False, False, True]))),
        ("diff bool n=2", lambda lib: lib.tensor([True, False, False, True]).diff(n=2)),
        ("diff bool 2-d", lambda lib: lib.tensor([[True, False], [True, True]]).diff(dim=0)),
        ("diff bool prepend", lambda lib: lib.diff(lib.tensor([True, False]),
                                                   prepend=lib.tensor([True]))),
        ("diff bool prepend int", lambda lib: lib.diff(lib.tensor([True, False]),
                                                       prepend=lib.tensor([1]))),
    ]
    for name, make in cases:
        got, want = make(ta), make(torch)
        assert str(got.dtype) == str(want.dtype).replace("torch.", ""), name
        assert got.tolist() == want.tolist(), name
