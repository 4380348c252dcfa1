"""Making tensors from NumPy and Python data, and NumPy meeting tensors, as torch 2.13 does: array
subclasses (np.matrix), dtype inference, full's tensor fill values, as_tensor with a dtype,
normal's size, value checks a captured step's replay runs too, NumPy ufuncs on tensors, byte
order, out-of-range ints, seeds, __index__, the device object, and the messages and reprs of
the small conversions. torch is the reference, run beside tinyattn.
"""

import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F

torch = pytest.importorskip("torch")


def _outcome(fn):
    """fn()'s value as a list, or "error" (torch's RuntimeError or ValueError, a DTypeError)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn()
    except (ValueError, TypeError, RuntimeError):
        return "error"
    return out.tolist()


# ---- 1. NumPy array subclasses become plain arrays -----------------------------------------------


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("make", ["from_numpy", "as_tensor", "tensor"])
def test_an_np_matrix_becomes_a_plain_tensor_as_in_torch(make):
    m = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    t, ref = getattr(ta, make)(m), getattr(torch, make)(m)
    assert type(t._data) is np.ndarray
    assert (t * t).tolist() == (ref * ref).tolist() == [[1.0, 4.0], [9.0, 16.0]]  # not m @ m
    assert t[0].shape == tuple(ref[0].shape) == (2,)
    assert t.sum(0).tolist() == ref.sum(0).tolist() == [4.0, 6.0]
    m[0, 0] = 9.0
    assert t[0, 0].item() == ref[0, 0].item()  # shared by from_numpy and as_tensor, as torch


# ---- 2. tensor()'s dtype: every number counts, not the first one alone --------------------------


@pytest.mark.parametrize("data", [
    lambda lib: [1.0, np.float64(1.5)],
    lambda lib: [[1.0, 2.0], np.array([1.5, 2.5])],
    lambda lib: [0.5, lib.tensor(1.0, dtype=lib.float64)],
    lambda lib: [[1.0], [np.float64(2.0)]],
    lambda lib: [1.0, np.float32(2.0)],
    lambda lib: [1.0, 2],
    lambda lib: [[1.0, 2.0], [3.0, 4.0]],
    lambda lib: [np.float16(1.0), 2.0],
], ids=["np-float64-later", "array-row-later", "float64-tensor-later", "nested",
        "np-float32-later", "int-later", "floats", "np-float16-first"])
def test_tensor_infers_the_dtype_of_every_number_as_torch(data):
    with warnings.catch_warnings():  # (torch: a list of arrays is slow)
        warnings.simplefilter("ignore")
        want = str(torch.tensor(data(torch)).dtype).removeprefix("torch.")
    assert str(ta.tensor(data(ta)).dtype) == want


# ---- 3. full's fill value: a 0-d tensor gives its kind of dtype ----------------------------------


@pytest.mark.parametrize("value", [lambda lib: lib.tensor(2), lambda lib: lib.tensor(True),
                                   lambda lib: lib.tensor(2, dtype=lib.int32),
                                   lambda lib: lib.tensor(2.5, dtype=lib.float64)],
                         ids=["int64", "bool", "int32", "float64"])
def test_full_with_a_0d_tensor_value_takes_its_kind_of_dtype_as_torch(value):
    ref = torch.full((2,), value(torch))
    t = ta.full((2,), value(ta))
    assert str(t.dtype) == str(ref.dtype).removeprefix("torch.")
    assert t.tolist() == ref.tolist()


# ---- 4. as_tensor(x, dtype) is x.to(dtype): the graph stays --------------------------------------


def test_as_tensor_with_another_dtype_keeps_the_graph_as_torch():
    x, rx = ta.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    y, ry = ta.as_tensor(x, dtype=ta.float64), torch.as_tensor(rx, dtype=torch.float64)
    assert y.requires_grad == ry.requires_grad is True and y.grad_fn is not None
    assert y.dtype == np.float64
    (y * 3).sum().backward()
    (ry * 3).sum().backward()
    assert x.grad.tolist() == rx.grad.tolist() == [3.0, 3.0]
    assert ta.as_tensor(x) is x and ta.as_tensor(x, dtype=ta.float32) is x


# ---- 5. normal refuses size= with tensor arguments -----------------------------------------------


@pytest.mark.parametrize("args", [lambda lib: (lib.zeros(3), 1.0), lambda lib: (0.0, lib.ones(3)),
                                  lambda lib: (lib.zeros(3), lib.ones(3))],
                         ids=["tensor-mean", "tensor-std", "both"])
def test_normal_with_a_tensor_and_size_is_refused_as_torch(args):
    with pytest.raises(TypeError):
        torch.normal(*args(torch), size=(5,))
    with pytest.raises(TypeError, match=r"normal: size= goes with a number mean and std"):
        ta.normal(*args(ta), size=(5,))
    assert ta.normal(*args(ta)).shape == (3,)


# ---- 6. value checks run in a captured step's replay too -----------------------------------------


def _replays(step, *args):
    for _ in range(3):
        step(*args)
    return step.state == "replaying"


def test_binary_cross_entropy_checks_its_target_in_a_replay_too():
    w = ta.zeros(3, requires_grad=True)
    step = ta.capture(lambda x, y: F.binary_cross_entropy((x * w).sigmoid(), y))
    x = ta.ones(3)
    assert _replays(step, x, ta.tensor([0.0, 1.0, 0.5]))
    with pytest.raises(ValueError, match=r"binary_cross_entropy: target values must be "
                                         r"probabilities in \[0, 1\], got values in \[0, 3\]"):
        step(x, ta.tensor([0.0, 3.0, 0.5]))
    with pytest.raises(ValueError, match="target values must be probabilities"):  # eager too
        F.binary_cross_entropy(ta.full((3,), 0.5), ta.tensor([0.0, 3.0, 0.5]))
    with pytest.raises(RuntimeError):  # torch's
        torch.nn.functional.binary_cross_entropy(torch.full((3,), 0.5),
                                                 torch.tensor([0.0, 3.0, 0.5]))
    step = ta.capture(lambda x, y: F.binary_cross_entropy(x * w.sigmoid(), y))
    assert _replays(step, ta.full((3,), 0.5), ta.ones(3))
    with pytest.raises(ValueError, match="input values must be probabilities.*with_logits"):
        step(ta.full((3,), 4.0), ta.ones(3))


def test_normals_std_check_runs_in_a_replay_too():
    w = ta.ones(3, requires_grad=True)
    step = ta.capture(lambda s: (w * ta.normal(ta.zeros(3), s)).sum())
    assert _replays(step, ta.ones(3))
    with pytest.raises(ValueError, match="normal: expects all elements of std >= 0.0"):
        step(ta.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(RuntimeError):
        torch.normal(torch.zeros(3), torch.tensor([1.0, -1.0, 1.0]))


@pytest.mark.parametrize("use, low", [
    (lambda x, i: x.gather(0, i), -1), (lambda x, i: x.index_select(0, i), -1),
    (lambda x, i: x.index_add(0, i, x), -1), (lambda x, i: x.index_copy(0, i, x), -1),
    (lambda x, i: x.put(i, x), -4)], ids=["gather", "index_select", "index_add", "index_copy",
                                          "put"])
def test_index_range_checks_run_in_a_replay_too(use, low):
    w = ta.ones(3, requires_grad=True)
    step = ta.capture(lambda i: use(w * 2, i).sum())
    assert _replays(step, ta.tensor([2, 0, 1]))
    for bad in ([0, low, 1], [0, 3, 1]):  # (put takes -3..2, the others 0..2, as torch)
        with pytest.raises(IndexError, match="out of range"):
            step(ta.tensor(bad))
        with pytest.raises((IndexError, RuntimeError)):
            use(torch.ones(3) * 2, torch.tensor(bad))


# ---- 7. NumPy functions on tensors ---------------------------------------------------------------


@pytest.mark.parametrize("fn", [np.exp, np.isnan, lambda t: np.add(t, 1),
                                lambda t: np.maximum(t, 0), lambda t: np.add(np.ones(2), t),
                                lambda t: np.multiply(t, t), np.negative],
                         ids=["exp", "isnan", "add", "maximum", "array-first", "mul", "negative"])
@pytest.mark.filterwarnings("ignore:__array_wrap__ must accept:DeprecationWarning")  # (torch's)
def test_numpy_ufuncs_on_a_tensor_give_a_tensor_as_torch(fn):
    t, ref = ta.tensor([1.0, -2.0]), torch.tensor([1.0, -2.0])
    out, want = fn(t), fn(ref)
    assert type(out) is ta.Tensor and type(want) is torch.Tensor
    assert out.tolist() == pytest.approx(want.tolist())
    if want.dtype != torch.uint8:  # (torch's isnan comes back uint8, its own slip: bool here)
        assert str(out.dtype) == str(want.dtype).removeprefix("torch.")
    assert np.exp(ta.tensor(1.0)).shape == () and type(np.exp(ta.tensor(1.0))) is ta.Tensor


def test_numpy_operands_defer_to_the_tensor_and_keep_the_graph():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    for out in (np.float32(2) * x, np.float64(2) * x, np.ones(2) + x, np.ones(2) * x,
                np.ones(2) - x, np.ones((2, 2), dtype=np.float32) @ x, np.add(np.ones(2), x)):
        assert type(out) is ta.Tensor and out.requires_grad and out.grad_fn is not None
    (np.float32(2) * x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    assert (np.ones(2) == ta.tensor([1.0, 0.0])).tolist() == [True, False]
    assert (np.ones(2) - ta.tensor([3.0, 0.0])).tolist() == [-2.0, 1.0]  # (reflected in order)
    assert (np.ones(2) < ta.tensor([3.0, 0.0])).tolist() == [True, False]


def test_a_ufunc_on_a_tensor_that_requires_grad_is_refused_as_torch():
    x, rx = ta.tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0],
                                                                     requires_grad=True)
    with pytest.raises(RuntimeError):
        np.exp(rx)
    with pytest.raises(RuntimeError, match=r"np\.exp: the tensor requires grad.*x\.exp\(\)"):
        np.exp(x)
    with pytest.raises(RuntimeError, match=r"np\.maximum: the tensor requires grad"):
        np.maximum(x, 0)
    assert np.asarray(x).tolist() == [1.0, 2.0] and x.numpy().tolist() == [1.0, 2.0]
    assert np.exp(x.detach()).tolist() == pytest.approx(np.exp([1.0, 2.0]).tolist())


def test_an_array_added_into_in_place_stays_an_array():
    for t in (ta.tensor([1.0, 2.0]), ta.tensor([1.0, 2.0], requires_grad=True)):
        a = np.ones(2)
        a += t
        assert type(a) is np.ndarray and a.tolist() == [2.0, 3.0]


# ---- 8. byte order -------------------------------------------------------------------------------


def test_an_array_in_the_other_byte_order():
    a = np.array([1.0, 2.0], dtype=">f4")
    with pytest.raises(ValueError, match="byte order"):
        torch.from_numpy(a)
    with pytest.raises(ValueError, match=r"from_numpy: given numpy array has byte order "
                                         "different from the native byte order"):
        ta.from_numpy(a)
    for t in (ta.tensor(a), ta.as_tensor(a), ta.tensor(a, dtype=">f8"), ta.tensor(list(a))):
        assert t.dtype in (ta.float32, ta.float64) and t.dtype.isnative
        assert (t @ t).item() == 5.0
    assert ta.tensor(a).dtype == ta.float32 and ta.as_tensor(a).tolist() == [1.0, 2.0]


# ---- 9. out-of-range Python numbers in tensor(..., dtype) ----------------------------------------


_VALUES = [-1, -129, -255, -256, 255, 256, 300, -2**63, 2**63 - 1, 2**63, 2**64, 70000.0, 1.5,
           -0.5, -1.5, 1e39, float("nan"), np.float64(-1.0), np.uint64(2**64 - 1)]


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "bool"])
def test_tensor_wraps_or_refuses_out_of_range_numbers_as_torch(dtype):
    for v in _VALUES:
        for data in ([v], v, [[0, v]]):
            want = _outcome(lambda d=data: torch.tensor(d, dtype=getattr(torch, dtype)))
            got = _outcome(lambda d=data: ta.tensor(d, dtype=getattr(ta, dtype)))
            assert got == want, (dtype, data)
    with pytest.raises(ta.DTypeError, match=r"^tensor: a value does not fit uint8 \(300; "
                                            r"it takes 0\.\.255; -255\.\.-1 wrap into it\)"):
        ta.tensor([1, 300], dtype=ta.uint8)


# ---- 10. manual_seed's seeds ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", [-1, 1.5, True, "3", np.int64(-2), 2**64 - 1, -2**63])
def test_manual_seed_takes_what_torch_takes(seed):
    want = torch.manual_seed(seed).initial_seed()
    assert ta.manual_seed(seed).initial_seed() == want
    a = ta.rand(3)
    ta.manual_seed(want)
    assert ta.rand(3).tolist() == a.tolist()  # (-1 and 2**64 - 1: one stream)


@pytest.mark.parametrize("seed", [2**64, -2**63 - 1, float("nan"), None, [1]])
def test_manual_seed_refuses_what_torch_refuses_naming_itself(seed):
    with pytest.raises((ValueError, TypeError)):
        torch.manual_seed(seed)
    with pytest.raises((ValueError, TypeError), match=r"^manual_seed: "):
        ta.manual_seed(seed)


def test_generator_manual_seed_wraps_a_negative_int_as_torch():
    assert ta.Generator().manual_seed(-1).initial_seed() == \
        torch.Generator().manual_seed(-1).initial_seed() == 2**64 - 1
    a = ta.rand(2, generator=ta.Generator().manual_seed(-1))
    assert ta.rand(2, generator=ta.Generator().manual_seed(2**64 - 1)).tolist() == a.tolist()


# ---- 11. __index__ -------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [lambda lib: lib.tensor(True), lambda lib: lib.tensor(False),
                                   lambda lib: lib.tensor([1]), lambda lib: lib.tensor(2)],
                         ids=["true", "false", "one-element", "int"])
def test_a_single_integer_or_bool_tensor_is_an_index_as_torch(index):
    assert [10, 20, 30][index(ta)] == [10, 20, 30][index(torch)]


@pytest.mark.parametrize("index", [lambda lib: lib.tensor(1.0), lambda lib: lib.tensor([1, 2])],
                         ids=["float", "two-elements"])
def test_a_float_or_longer_tensor_is_no_index_as_torch(index):
    with pytest.raises(TypeError):
        [10, 20, 30][index(torch)]
    with pytest.raises(TypeError, match="only integer tensors of a single element can be "
                                        "converted to an index"):
        [10, 20, 30][index(ta)]


# ---- 12. the device object -----------------------------------------------------------------------


def test_device_is_an_object_with_a_type_that_equals_its_name():
    d, ref = ta.zeros(2).device, torch.zeros(2).device
    assert (d.type, d.index) == (ref.type, ref.index) == ("cpu", None)
    assert repr(d) == repr(ref) == "device(type='cpu')"
    assert str(d) == str(ref) == "cpu" and f"{d}" == "cpu"
    assert d == "cpu" and "cpu" == d and d != "cuda" and {"cpu": 1}[d] == 1 and {d: 1}["cpu"] == 1
    assert ta.device("cpu") == d and repr(ta.device("cuda")) == "device(type='cuda')"
    assert ta.zeros(2).to(d).device == "cpu" and ta.zeros(2, device=d).device == "cpu"


# ---- 13. messages and reprs ----------------------------------------------------------------------


def test_a_tensor_as_a_size_is_refused_naming_the_function():
    with pytest.raises(TypeError):
        torch.zeros(torch.tensor([2, 3]))
    with pytest.raises(ta.DTypeError, match=r"^zeros: sizes must be ints, got \(tensor"):
        ta.zeros(ta.tensor([2, 3]))
    assert ta.zeros(ta.tensor(2)).shape == tuple(torch.zeros(torch.tensor(2)).shape) == (2,)


def test_conversions_of_a_tensor_of_many_elements_name_themselves():
    t = ta.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        float(torch.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"^float\(\): only a tensor of one element can be "
                                         r"converted to a Python number, got shape \(3,\)"):
        float(t)
    with pytest.raises(ValueError, match=r"^int\(\): only a tensor of one element"):
        int(t)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(torch.tensor(1.0)).__next__()
    with pytest.raises(TypeError, match="^iteration over a 0-d tensor"):
        list(ta.tensor(1.0))
    with pytest.raises(TypeError, match="^len.. of a 0-d tensor"):
        len(ta.tensor(1.0))


@pytest.mark.parametrize("make", [lambda lib: lib.zeros(0, dtype=lib.int64),
                                  lambda lib: lib.zeros(0, dtype=lib.bool),
                                  lambda lib: lib.zeros(0, 2, dtype=lib.int64),
                                  lambda lib: lib.zeros(0), lambda lib: lib.tensor([1, 2])],
                         ids=["int64", "bool", "int64-2d", "float", "ints"])
def test_an_empty_tensors_repr_shows_a_dtype_that_is_not_the_default_float(make):
    assert repr(make(ta)) == repr(make(torch)).replace("torch.", "")


def test_repr_shows_torchs_grad_fn_name():
    x, rx = ta.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    for f in (lambda v: v * 2, lambda v: v.exp(), lambda v: v.sum()):
        assert repr(f(x)) == repr(f(rx)).replace("torch.", "")
    assert repr(x * 2).endswith("grad_fn=<MulBackward0>)") and (x * 2).grad_fn.name() == \
        "MulBackward0"
