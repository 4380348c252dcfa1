"""Tensor basics that used to differ from torch 2.13: views that write through (diagonal, view),
view's refusal where torch refuses, indices, sums in a dtype, float16 draws below 1, running
maxima over NaN, arange, formatting, `in`, creation checks and the smaller habits, NumPy's copy
protocol (np.array copies), comparisons with None, finfo/iinfo, strides. The expected
values are torch's (written out: these run without torch); the last section runs the same on the
fake CuPy (tests/support/fake_cupy.py), which the CuPy backend's Python code meets on a GPU.
"""

import math

import fake_cupy  # tests/support is on sys.path (tests/conftest.py)
import numpy as np
import pytest

import tinyattn as ta

# ---- diagonal() is a view ---------------------------------------------------------------------


def test_diagonal_is_a_view_that_writes_reach():
    b = ta.zeros(3, 3)
    b.diagonal().fill_(1)
    assert b.sum().item() == 3.0  # torch: 3.0 (it was 0.0: a copy)
    m = ta.zeros(3, 4)
    d = m.diagonal(1)
    d[0] = 5.0
    d += 1.0
    np.testing.assert_array_equal(m.numpy(), [[0, 6, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    assert m._version == d._version == 2  # one memory, one version counter
    t = ta.zeros(2, 3, 4)
    t.diagonal(-1, 2, 0)[...] = 7.0  # dims (2, 0), below the diagonal: t[i, :, i + 1]
    assert t.nonzero().tolist() == [[0, 0, 1], [0, 1, 1], [0, 2, 1], [1, 0, 2], [1, 1, 2],
                                    [1, 2, 2]]  # torch's


def test_diagonal_gradient_and_diag_still_copies():
    x = ta.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    x.diagonal(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    m = ta.zeros(3, 3)
    m.diag().fill_(1)  # torch.diag of a matrix copies
    assert m.sum().item() == 0.0
    assert ta.tensor([[1.0, 2.0], [3.0, 4.0]]).trace().item() == 5.0


# ---- view(): a view, or torch's error ------------------------------------------------------------


def test_view_of_memory_that_cannot_be_viewed_raises_as_torch():
    b = ta.zeros(2, 3)
    with pytest.raises(ta.ShapeError, match=r"^view: a tensor of shape \(3, 2\) and strides "
                       r"\(1, 3\).*cannot be viewed as \(6,\).*use \.reshape\(\.\.\.\) instead"):
        b.t().view(6)
    with pytest.raises(ta.ShapeError, match=r"cannot be viewed as \(6,\)"):
        b.t().view(-1)  # (-1 read as the size it stands for)
    assert b.sum().item() == 0.0
    b.t().reshape(6)[0] = 1.0  # reshape copies
    assert b.sum().item() == 0.0


def test_view_where_torch_can_is_a_view():
    x = ta.zeros(2, 3, 4)
    v = x.transpose(0, 1).view(3, 2, 2, 2)  # splits a dim: fine although not contiguous
    v[0, 0, 0, 0] = 1.0
    assert x[0, 0, 0].item() == 1.0
    w = x.view(6, 4)
    w[5, 3] = 2.0
    assert x[1, 2, 3].item() == 2.0 and x._version == w._version
    assert x.view_as(ta.zeros(4, 6)).shape == (4, 6)
    with pytest.raises(ta.ShapeError, match=r"^view: .*cannot be viewed as \(4, 6\)"):
        x.transpose(0, 2).view_as(ta.zeros(4, 6))


def test_view_with_a_dtype_reinterprets_the_bytes_as_torch():
    x = ta.tensor([1.0, 2.0])
    np.testing.assert_array_equal(x.view(ta.int32).numpy(), [1065353216, 1073741824])
    np.testing.assert_array_equal(x.view(dtype=np.int32).numpy(), [1065353216, 1073741824])
    np.testing.assert_array_equal(x.view(np.float16).numpy(), [0.0, 1.875, 0.0, 2.0])
    assert x.view(np.int64).tolist() == [4611686019492741120]
    assert ta.tensor(1.0).view(ta.int32).item() == 1065353216
    v = x.view(ta.int32)
    v[0] = 1073741824  # the bytes of 2.0: written into x's memory
    assert x[0].item() == 2.0
    assert not ta.ones(2, requires_grad=True).view(np.float32).requires_grad  # as torch
    with pytest.raises(ta.ShapeError, match=r"^view: cannot view a 0-d tensor of float32"):
        ta.tensor(1.0).view(np.float16)
    with pytest.raises(ta.ShapeError, match=r"^view: cannot view .*last dim must be "
                       "contiguous"):
        ta.zeros(2, 3).t().view(np.float16)
    with pytest.raises(ta.DTypeError, match=r"^view: sizes must be ints, got \(2\.0,\)"):
        ta.zeros(2).view(2.0)


# ---- expand --------------------------------------------------------------------------------------


def test_expand_refuses_minus_one_for_a_new_leading_dim():
    x = ta.zeros(3, 4)
    with pytest.raises(ta.ShapeError, match=r"^expand: -1 \(keep the size\) at dim 0 of "
                       r"\(-1, 3, 4\), a new leading dim"):
        x.expand(-1, 3, 4)
    with pytest.raises(ta.ShapeError, match=r"at dim 1 of \(2, -1, 3, 4\)"):
        x.expand(2, -1, 3, 4)
    assert x.expand(2, -1, -1).shape == (2, 3, 4)


# ---- indexing ------------------------------------------------------------------------------------


def test_a_0d_integer_tensor_index_is_an_int():
    x = ta.zeros(2, 3, 4, 5)
    assert x[ta.tensor(1), :, [1, 3]].shape == (3, 2, 5)  # torch; NumPy's rule gave (2, 3, 5)
    assert x[ta.tensor(1, dtype=np.int32), :, [1, 3]].shape == (3, 2, 5)
    assert x[ta.tensor(1), ta.tensor(2)].shape == (4, 5)
    x[ta.tensor(1), :, [1, 3]] = 1.0
    assert x.sum().item() == 30.0  # torch: 30.0
    y = ta.zeros(2, 3)
    y[ta.tensor(1)].fill_(1.0)  # a view, as torch's select
    assert y.sum().item() == 3.0
    with pytest.raises(ta.DimError):
        y[ta.tensor(5)]


def test_an_empty_list_index_picks_nothing():
    x = ta.zeros(3, 4, 5)
    assert x[[]].shape == (0, 4, 5)
    assert x[:, []].shape == (3, 0, 5)
    assert x[[], 0].shape == (0, 5)
    y = ta.ones(3, 4)
    y[[]] = 7.0
    assert y.sum().item() == 12.0


# ---- sums in a dtype -----------------------------------------------------------------------------


def test_sum_and_scans_with_an_integer_or_bool_dtype_give_that_dtype():
    x = ta.tensor([1, 2, 3])
    assert x.sum(dtype=ta.int32).dtype == np.int32
    assert x.cumsum(0, dtype=np.int16).dtype == np.int16
    assert x.cumprod(0, dtype=np.int16).dtype == np.int16
    assert ta.tensor([1.0, 0.0]).sum(dtype=ta.bool_).dtype == np.bool_
    assert ta.tensor([1.0, 0.0]).sum(dtype=ta.bool_).item() is True
    assert ta.tensor([100, 100]).sum(dtype=np.int8).item() == -56  # torch: wraps in int8
    assert ta.tensor([100, 100]).cumsum(0, dtype=np.int8).tolist() == [100, -56]
    assert ta.tensor([300, 300]).cumprod(0, dtype=np.int16).tolist() == [300, 24464]
    assert ta.tensor([[1, 2], [3, 4]]).sum(1, dtype=np.int16).tolist() == [3, 7]
    assert ta.tensor([1.7, 1.7]).sum(dtype=ta.int32).item() == 2  # cast first, as torch
    assert ta.tensor([1.0, float("nan"), 2.0]).nansum(dtype=ta.int32).dtype == np.int32
    f16 = ta.tensor([1.0, 2.0], dtype=np.float16)
    assert f16.sum().dtype == np.float16 and f16.sum(dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
def test_unsigned_sums_and_scans_are_int64_as_torch(dtype):
    x = ta.tensor(np.array([200, 100], dtype=dtype))
    for out, want in ((x.sum(), 300), (x.nansum(), 300), (x.prod(), 20000)):
        assert out.dtype == np.int64 and out.item() == want
    assert x.cumsum(0).dtype == np.int64 and x.cumsum(0).tolist() == [200, 300]
    assert x.cumprod(0).dtype == np.int64 and x.cumprod(0).tolist() == [200, 20000]
    assert x.sum(dtype=dtype).dtype == dtype


# ---- float16 draws stay below 1 ------------------------------------------------------------------


def test_float16_rand_never_reaches_one():
    ta.manual_seed(0)
    r = ta.rand(1_000_000, dtype=np.float16)  # 267 ones before (rounded up from float32)
    assert r.dtype == np.float16 and r.max().item() < 1.0 and r.min().item() >= 0.0
    assert r.max().item() == 0.99951171875  # the largest float16 below 1 is reached
    assert abs(r.float().mean().item() - 0.5) < 2e-3  # rounding down costs no visible bias
    like = ta.rand_like(ta.zeros(1_000_000, dtype=np.float16))
    assert like.max().item() < 1.0
    u = ta.zeros(1_000_000, dtype=np.float16).uniform_()
    assert u.max().item() < 1.0
    v = ta.zeros(1_000_000, dtype=np.float16).uniform_(1.0, 2.0)
    assert 1.0 <= v.min().item() and v.max().item() < 2.0


# ---- cummax / cummin carry NaN -------------------------------------------------------------------


def test_cummax_and_cummin_carry_nan_forward_as_torch():
    x = ta.tensor([1.0, float("nan"), 3.0, float("nan"), 0.0], requires_grad=True)
    for name in ("cummax", "cummin"):
        values, indices = getattr(x, name)(0)
        np.testing.assert_array_equal(values.detach().numpy(), [1.0] + [np.nan] * 4)
        assert indices.tolist() == [0, 1, 1, 3, 3]  # torch's (the latest NaN)
    x.cummax(0).values.sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 0.0, 2.0, 0.0]  # torch's
    values, indices = ta.tensor([float("nan"), 1.0, 2.0]).cummax(0)
    assert np.isnan(values.numpy()).all() and indices.tolist() == [0, 0, 0]
    values, indices = ta.tensor([[1.0, 3.0, 3.0, 2.0]]).cummax(1)  # ties: the later index
    assert values.tolist() == [[1.0, 3.0, 3.0, 3.0]] and indices.tolist() == [[0, 1, 2, 2]]


# ---- arange --------------------------------------------------------------------------------------


def test_arange_takes_0d_tensors_as_their_numbers():
    a = ta.arange(ta.tensor(3))
    assert a.dtype == np.int64 and a.tolist() == [0, 1, 2]
    assert ta.arange(ta.tensor(1), 5).tolist() == [1, 2, 3, 4]
    assert ta.arange(1, ta.tensor(5), ta.tensor(2)).tolist() == [1, 3]
    assert ta.arange(ta.tensor(3.0)).dtype == np.float32
    with pytest.raises(TypeError, match=r"^arange: takes numbers or 0-d tensors"):
        ta.arange(ta.tensor([3]))


def test_float_arange_is_start_plus_i_step_rounded_once_as_torch():
    torch_values = np.array([
        -1.0, -0.8999999761581421, -0.800000011920929, -0.699999988079071, -0.6000000238418579,
        -0.5, -0.4000000059604645, -0.30000001192092896, -0.20000000298023224,
        -0.10000000149011612, -2.9802322831784522e-09, 0.09999999403953552,
        0.20000000298023224, 0.30000001192092896, 0.4000000059604645, 0.5, 0.6000000238418579,
        0.699999988079071, 0.800000011920929, 0.8999999761581421], dtype=np.float32)
    got = ta.arange(-1, 1, 0.1)
    assert got.dtype == np.float32 and got.shape == (20,)
    assert got[-1].item() == 0.8999999761581421  # was 0.9000004529953003 (summed in float32)
    ulps = np.abs(got.numpy() - torch_values) / np.spacing(np.abs(torch_values))
    assert np.all(np.delete(ulps, 10) <= 1) and abs(got[10].item()) < 1e-8  # (torch: -3e-9)
    assert ta.arange(0, 1, 0.1, dtype=np.float16).tolist()[1:4] == [
        0.0999755859375, 0.199951171875, 0.300048828125]
    assert ta.arange(5, 0, -1.5).tolist() == [5.0, 3.5, 2.0, 0.5]


def test_arange_with_an_integer_dtype_and_float_bounds_as_torch():
    assert ta.arange(0, 5, 1.5, dtype=ta.int64).tolist() == [0, 1, 2, 3, 4]
    assert ta.arange(-2.5, 3, 1.5, dtype=ta.int64).tolist() == [-2, -1, 0, 1, 2]
    assert ta.arange(-2.5, 3, 1.5, dtype=ta.int32).tolist() == [-2, -1, 0, 1]
    assert ta.arange(0, 300, 100, dtype=np.uint8).tolist() == [0, 100, 200]
    with pytest.raises(ValueError, match=r"^arange: step must be nonzero, got 0\.3, which is "
                       "0 as int64"):
        ta.arange(0.0, 1.0, 0.3, dtype=ta.int64)
    with pytest.raises(ValueError, match=r"^arange: step must be nonzero, got 0"):
        ta.arange(0, 5, 0)
    with pytest.raises(ValueError, match=r"^arange: unsupported range 0 -> nan"):
        ta.arange(float("nan"))


# ---- format and `in` -----------------------------------------------------------------------------


def test_format_of_a_0d_tensor_is_its_numbers():
    assert format(ta.tensor(2.3456), ".2f") == "2.35"
    assert f"{ta.tensor(2.5)}" == "2.5"  # torch 2.13 too (not "tensor(2.5000)")
    assert f"{ta.tensor(3)}" == "3" and format(ta.tensor(3), "04d") == "0003"
    assert f"{ta.tensor(2.5, requires_grad=True)}" == "2.5"
    assert f"{ta.tensor([2.5])}" == str(ta.tensor([2.5]))
    with pytest.raises(TypeError, match="unsupported format string"):
        format(ta.tensor([2.5]), ".2f")


def test_in_searches_every_entry_of_any_ndim():
    t = ta.tensor([[1, 2], [3, 4]])
    assert 2 in t and 4 in t and 5 not in t
    assert ta.tensor(2) in t and 2 in ta.tensor(2)
    assert ta.tensor([1, 2]) in t
    assert float("nan") not in ta.tensor([float("nan")])  # (nan == nan is False, as torch)
    with pytest.raises(TypeError, match=r"^`in`: a tensor can be searched for a tensor or a "
                       "number, not a str"):
        "a" in t  # noqa: B015


# ---- from_numpy, nonzero -------------------------------------------------------------------------


def test_from_numpy_takes_a_0d_array():
    a = np.array(3.0)
    t = ta.from_numpy(a)
    assert t.shape == () and t.dtype == np.float64 and t.item() == 3.0
    with pytest.raises(ta.DTypeError):
        ta.from_numpy(np.array("x"))


def test_nonzero_of_a_0d_tensor_is_1_by_0_or_0_by_0():
    assert ta.tensor(5.0).nonzero().shape == (1, 0)
    assert ta.tensor(0.0).nonzero().shape == (0, 0)
    assert ta.tensor(5.0).nonzero().dtype == np.int64
    (only,) = ta.tensor(5.0).nonzero(as_tuple=True)
    assert only.tolist() == [0]  # (torch: one 1-D tensor for a 0-d input)


# ---- a Python int out of an integer tensor's range wraps (torch's arithmetic) --------------


def test_python_int_out_of_range_wraps_in_integer_arithmetic():
    i8 = ta.tensor([1], dtype=np.int8)
    cases = [(i8 + 1000, -23), (1000 + i8, -23), (i8 - 1000, 25), (1000 - i8, -25),
             (ta.tensor([3], dtype=np.int8) * 1000, -72),
             (ta.tensor([3], dtype=np.int8) // 1000, -1),
             (ta.tensor([3], dtype=np.int8) % 1000, -21),
             (ta.tensor([5], dtype=np.uint8) + -1, 4),
             (ta.tensor([5], dtype=np.uint8) - 300, 217),
             (ta.tensor([5]) + 2**63, -9223372036854775803),
             (ta.add(i8, 10, alpha=100), -23)]
    for out, want in cases:  # the values torch 2.13 gives
        assert out.dtype == (np.uint8 if want in (4, 217) else np.int64 if abs(want) > 2**7
                             else np.int8)
        assert out.tolist() == [want]
    j = ta.tensor([1], dtype=np.int8)
    j += 1000
    assert j.tolist() == [-23]
    assert (ta.tensor([3], dtype=np.int8) / 1000).dtype == np.float32  # (no int result)
    with pytest.raises(ta.DTypeError, match=r"^pow: .*1000 does not fit int8"):
        ta.tensor([1], dtype=np.int8) ** 1000  # torch refuses this one


def test_comparing_with_a_python_int_out_of_range_wraps_it_first_as_torch():
    """torch casts the number into the tensor's integer dtype before comparing (the _compare
    docstring's promise); tinyattn compared the true values."""
    u8, i8 = np.uint8, np.int8
    cases = [(ta.tensor([255], dtype=u8) == -1, True), (ta.tensor([44], dtype=u8) == 300, True),
             (ta.tensor([45], dtype=u8) > 300, True),
             (ta.tensor([100], dtype=i8) < 200, False), (ta.tensor([-1], dtype=i8).eq(255), True),
             (ta.tensor([-2**31], dtype=np.int32) == 2**31, True),
             (ta.tensor([0], dtype=np.int16) != 65536, False),
             (ta.tensor([5], dtype=u8).ge(-251), True), (ta.tensor([5], dtype=u8).le(-252), False),
             (ta.tensor([-2**63]) == 2**63, True), (ta.lt(ta.tensor([3], dtype=i8), 1000), False),
             (ta.tensor([1], dtype=i8) == 1.0, True), (ta.tensor([True]) == 2, False),
             (ta.tensor([True]) < 300, True)]
    for out, want in cases:  # the values torch 2.13 gives
        assert out.dtype == np.bool_ and out.tolist() == [want]
    for past in (2**64, -2**63 - 1):  # torch: "Overflow when unpacking long"
        with pytest.raises(ta.DTypeError, match=f"eq: .*{past}"):
            _ = ta.tensor([1], dtype=i8) == past
    with pytest.raises(ta.DTypeError, match="gt: .*9223372036854775808"):
        _ = ta.tensor([True]) > 2**63


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "bool", "float16",
                                   "float32"])
def test_comparisons_with_python_numbers_match_torch(dtype):
    torch = pytest.importorskip("torch")
    import operator as o
    values = {"int8": [-128, -1, 0, 100, 127], "uint8": [0, 1, 44, 255], "bool": [True, False],
              "int16": [-32768, -1, 0, 300, 32767], "int32": [-2**31, -1, 0, 2**31 - 1, 2**24 + 1],
              "int64": [-2**63, -1, 0, 2**63 - 1], "float16": [0.0, -1.0, 65504.0],
              "float32": [0.0, 2.0**24, -1.0]}[dtype]
    ours = ta.tensor(np.array(values, dtype=dtype))
    theirs = torch.tensor(values, dtype=getattr(torch, dtype))
    for number in (-1, 44, 128, 200, 255, 256, 300, -129, -257, 2**31, -2**31 - 1, 2**32 + 44,
                   2**63 - 1, -2**63, 2**63, 2**64 - 1, 2**24 + 1, 0.5, 255.5, 2.0**24 + 1,
                   math.inf, math.nan, True, False):
        for op in (o.eq, o.ne, o.lt, o.le, o.gt, o.ge):
            try:
                want = op(theirs, number).tolist()
            except RuntimeError:  # (bool against 2**63: past int64)
                with pytest.raises(ta.DTypeError):
                    op(ours, number)
                continue
            assert op(ours, number).tolist() == want, (op.__name__, number)


# ---- creation: values and sizes the dtype cannot hold -------------------------------------------


def test_full_refuses_a_value_its_dtype_cannot_hold():
    for value, dtype in ((float("nan"), ta.int64), (float("inf"), np.int32),
                         (300, np.uint8), (2**63, ta.int64), (-129, np.int8), (-1.5, np.uint8),
                         (1e39, ta.float32), (65520.0, ta.float16)):
        with pytest.raises(ta.DTypeError, match=rf"^full: .* does not fit {np.dtype(dtype)}"):
            ta.full((2,), value, dtype=dtype)
    with pytest.raises(ta.DTypeError, match=r"^full: .* does not fit int64"):
        ta.full((2,), 2**63)
    with pytest.raises(ta.DTypeError, match=r"^full: .* does not fit int64"):
        ta.full_like(ta.zeros(2), float("nan"), dtype=ta.int64)
    assert ta.full((2,), -1, dtype=np.uint8).tolist() == [255, 255]  # torch wraps these
    assert ta.full((2,), -129, dtype=np.uint8).tolist() == [127, 127]
    assert ta.full((2,), 1.5, dtype=ta.int64).tolist() == [1, 1]
    assert ta.full((2,), float("inf")).tolist() == [np.inf, np.inf]
    assert ta.full((2,), float("nan"), dtype=ta.bool_).tolist() == [True, True]


def test_tensor_refuses_python_ints_past_int64():
    for data in (2**63, -2**63 - 1, [1, 2**63], [1, 2**64], [[1], [2**63]]):
        with pytest.raises(ta.DTypeError, match=r"^tensor: the Python int -?\d+ does not fit "
                           "int64"):
            ta.tensor(data)
    assert ta.tensor(-2**63).item() == -2**63
    assert ta.tensor([1.5, 2**63]).dtype == np.float32  # a float list: fine, as torch
    assert ta.tensor(2**63, dtype=ta.float32).item() == 2.0**63
    assert ta.tensor(np.array([2**63], dtype=np.uint64)).dtype == np.uint64
    with pytest.raises(ta.DTypeError, match=r"^tensor: a value does not fit uint8"):
        ta.tensor(300, dtype=np.uint8)


def test_randint_refuses_bounds_its_dtype_cannot_hold():
    bad = [(-5, 0, np.uint8, "low = -5 is out of bounds for uint8"),
           (0, 300, np.uint8, "high - 1 = 299 is out of bounds for uint8"),
           (-129, 0, np.int8, "low = -129 is out of bounds for int8"),
           (0, 3, ta.bool_, "high - 1 = 2 is out of bounds for bool"),
           (0, 70000, np.float16, "high - 1 = 69999 is out of bounds for float16"),
           (0, 2**31 + 1, np.int32, "high - 1 = 2147483648 is out of bounds for int32")]
    for low, high, dtype, message in bad:
        with pytest.raises(ValueError, match=rf"^randint: {message}"):
            ta.randint(low, high, (3,), dtype=dtype)
    for low, high, dtype in ((0, 256, np.uint8), (-128, 128, np.int8), (0, 2, ta.bool_),
                             (0, 2**31, np.int32), (-2**63, 0, ta.int64)):
        assert ta.randint(low, high, (3,), dtype=dtype).dtype == dtype


def test_add_and_sub_refuse_a_float_alpha_for_integers():
    for call in (lambda: ta.add(ta.tensor([1]), 2, alpha=0.5),
                 lambda: ta.tensor([1]).add(ta.tensor([2]), alpha=1.0),
                 lambda: ta.sub(ta.tensor([1]), 2, alpha=0.5),
                 lambda: ta.tensor([1]).add_(2, alpha=0.5),
                 lambda: ta.tensor([1]).sub_(2, alpha=0.5)):
        with pytest.raises(ta.DTypeError, match=r"^(add|sub)_?: alpha=\S+ is a float, but the "
                           "inputs are integers"):
            call()
    assert ta.add(ta.tensor([1.0]), 2, alpha=0.5).tolist() == [2.0]
    assert ta.add(ta.tensor([1]), 2.5, alpha=0.5).tolist() == [2.25]
    assert ta.add(ta.tensor([1]), 2, alpha=2).tolist() == [5]


def test_sizes_must_be_ints_as_torch():
    for call, name in ((lambda: ta.zeros(2.0), "zeros"), (lambda: ta.zeros((2.0,)), "zeros"),
                       (lambda: ta.zeros(2, 3.0), "zeros"), (lambda: ta.ones(2.5), "ones"),
                       (lambda: ta.rand(2.0), "rand"), (lambda: ta.randn((2.0, 3)), "randn"),
                       (lambda: ta.empty(2.0), "empty"),
                       (lambda: ta.zeros(2).reshape(2.0), "reshape"),
                       (lambda: ta.randint(0, 5, (2.0,)), "randint")):
        with pytest.raises(ta.DTypeError, match=rf"^{name}: sizes must be ints"):
            call()
    with pytest.raises(ta.DTypeError, match=r"^full: size must be a tuple of ints"):
        ta.full(2, 1.0)  # torch: "must be tuple of ints, not int"
    with pytest.raises(ta.DTypeError, match=r"^full: size must be a tuple of ints"):
        ta.zeros(1).new_full(2, 1.0)
    assert ta.zeros(np.int64(2)).shape == (2,) and ta.zeros(ta.tensor(2)).shape == (2,)
    assert ta.full([2], 1.0).shape == (2,)


def test_a_list_of_numpy_float64s_is_float64_as_torch():
    assert ta.tensor([np.float64(1.5)]).dtype == np.float64
    assert ta.tensor([[np.float64(1.5)]]).dtype == np.float64
    assert ta.tensor([np.float64(1.5), 1]).dtype == np.float64
    assert ta.tensor([np.float32(1.0), np.float64(2.0)]).dtype == np.float64
    assert ta.tensor([np.int64(1), 1.5]).dtype == np.float32  # torch: float32
    assert ta.tensor([ta.tensor(1.5, dtype=np.float64)]).dtype == np.float64
    assert ta.tensor([1.0, 2.0]).dtype == np.float32 and ta.tensor([1, 2]).dtype == np.int64
    assert ta.tensor(np.float64(1.5)).dtype == np.float64


# ---- smaller habits ------------------------------------------------------------------------------


def test_tensor_split_with_a_tensor():
    x = ta.zeros(5)
    assert [p.shape for p in x.tensor_split(ta.tensor(2))] == [(3,), (2,)]
    assert [p.shape for p in x.tensor_split(ta.tensor([1, 3]))] == [(1,), (2,), (2,)]
    assert len(ta.tensor_split(x, ta.tensor(2))) == 2
    for bad in (ta.tensor(2.0), ta.tensor(2, dtype=np.int32), ta.tensor([[1]])):
        with pytest.raises(ta.DTypeError, match=r"^tensor_split: a tensor of sections or "
                           "indices must be 0-d or 1-D int64"):
            x.tensor_split(bad)


def test_size_of_a_dim_out_of_range_names_it():
    x = ta.zeros(2, 3)
    assert x.size(-1) == 3 and x.size() == (2, 3)
    with pytest.raises(ta.DimError, match=r"^size: dim -3 is out of range for a tensor with 2 "
                       r"dims \(valid: -2\.\.1\)"):
        x.size(-3)
    with pytest.raises(ta.DimError, match=r"^size: dim 2 is out of range"):
        x.size(2)
    with pytest.raises(ta.DimError, match=r"^size: dim 0 is out of range for a tensor with 0 "
                       "dims: a 0-d tensor has no dims"):
        ta.tensor(1.0).size(0)


def test_repr_of_an_empty_tensor_shows_its_size():
    assert repr(ta.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(ta.zeros(2, 0)) == "tensor([], size=(2, 0))"
    assert repr(ta.zeros(0)) == "tensor([])"
    assert repr(ta.zeros(0, 3, dtype=np.float64)) == "tensor([], size=(0, 3), dtype=float64)"
    assert repr(ta.zeros(0, 3, requires_grad=True)) == \
        "tensor([], size=(0, 3), requires_grad=True)"


def test_unique_keeps_nans_apart():
    values, inverse, counts = ta.tensor([float("nan"), 1.0, float("nan"), 1.0]).unique(
        return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), [1.0, np.nan, np.nan])
    assert inverse.tolist() == [1, 0, 2, 0] and counts.tolist() == [2, 1, 1]  # torch's
    np.testing.assert_array_equal(ta.tensor([2.0, np.nan, 1.0, np.nan, 1.0]).unique().numpy(),
                                  [1.0, 2.0, np.nan, np.nan])


def test_cat_leaves_out_empty_1d_tensors():
    assert ta.cat([ta.zeros(0), ta.ones(2, 3)]).shape == (2, 3)
    assert ta.cat([ta.zeros(0), ta.ones(2, 3)], dim=1).shape == (2, 3)
    assert ta.cat([ta.ones(2, 3), ta.zeros(0), ta.ones(1, 3)]).shape == (3, 3)
    assert ta.cat([ta.zeros(0, dtype=np.float64), ta.ones(2, 3)]).dtype == np.float64
    assert ta.cat([ta.zeros(0), ta.zeros(0)]).shape == (0,)
    with pytest.raises(ta.DimError):
        ta.cat([ta.zeros(0), ta.ones(2, 3)], dim=5)
    with pytest.raises(ta.ShapeError):
        ta.cat([ta.zeros(0, 2), ta.ones(2, 3)])
    a = ta.zeros(0, requires_grad=True)
    b = ta.ones(2, 3, requires_grad=True)
    (ta.cat([a, b]) * 2).sum().backward()
    assert a.grad.shape == (0,) and b.grad.tolist() == [[2.0] * 3] * 2


# ---- conversions, creation checks and comparisons with anything (torch 2.13's answers) -------


def test_np_array_copies_and_np_asarray_shares_as_torch():
    t = ta.tensor([1.0, 2.0, 3.0])
    a = np.array(t)  # np.array copies by default (NumPy 2 asks __array__ for copy=True)
    a[0] = 99.0
    b = np.array(t, copy=True)
    b[1] = 99.0
    assert t.tolist() == [1.0, 2.0, 3.0]  # torch: [1.0, 2.0, 3.0] (both wrote into t before)
    c = np.asarray(t)  # shares, as np.asarray of a torch CPU tensor and t.numpy() do
    c[2] = 5.0
    assert t.tolist() == [1.0, 2.0, 5.0]
    assert np.shares_memory(np.array(t, copy=False), t.numpy())
    d = np.asarray(t, dtype=np.float64)  # a cast is a copy
    d[0] = -1.0
    assert d.dtype == np.float64 and t.tolist()[0] == 1.0
    with pytest.raises(ValueError, match=r"Unable to avoid copy.*int64.*float32"):
        np.array(ta.tensor([1, 2]), dtype=np.float32, copy=False)
    assert np.array(ta.tensor([1, 2]), dtype=np.int64, copy=False).tolist() == [1, 2]


def test_empty_lists_make_default_dtype_tensors_as_torch():
    assert ta.tensor([]).dtype == np.float32 and ta.tensor([]).shape == (0,)  # was float64
    assert ta.tensor([[], []]).dtype == np.float32 and ta.tensor([[], []]).shape == (2, 0)
    assert ta.as_tensor([]).dtype == np.float32 and ta.tensor(()).dtype == np.float32
    assert (ta.tensor([]) + ta.zeros(0)).dtype == np.float32
    assert ta.tensor([], dtype=ta.int64).dtype == np.int64
    assert ta.tensor(np.array([])).dtype == np.float64  # an array keeps its dtype (torch too)
    ta.set_default_dtype(ta.float64)
    try:
        assert ta.tensor([]).dtype == np.float64
    finally:
        ta.set_default_dtype(ta.float32)


def test_arange_refuses_bounds_against_the_step_sign_as_torch():
    for args in [(5, 0), (0, 5, -1), (0.0, 5.0, -1.0), (5, 0, 0.5), (0.0, -1.0)]:
        with pytest.raises(ta.ShapeError, match=r"arange: upper bound and lower bound "
                           r"inconsistent with step sign"):
            ta.arange(*args)  # torch: RuntimeError (tinyattn returned an empty tensor)
    with pytest.raises(ta.ShapeError, match=r"arange: step must be nonzero, got 0"):
        ta.arange(0, 5, 0)
    assert ta.arange(5, 5, -1).shape == (0,) and ta.arange(0, 0).shape == (0,)
    assert ta.arange(5, 0, -1).tolist() == [5, 4, 3, 2, 1]
    assert ta.arange(1.0, 0.0, -0.5).tolist() == [1.0, 0.5]
    with pytest.raises(ta.DTypeError, match=r"arange: cannot count in bools"):
        ta.arange(0, 2, dtype=ta.bool)  # torch: "arange_cpu" not implemented for 'Bool'
    assert ta.arange(250, 257, dtype=ta.uint8).tolist() == [250, 251, 252, 253, 254, 255, 0]
    assert ta.arange(3, dtype=ta.float64).dtype == np.float64  # (torch wraps, as above)


def test_randperm_refuses_n_beyond_its_dtype_as_torch():
    with pytest.raises(ta.DTypeError, match=r"randperm: n = 300 does not fit uint8.*0\.\.255"):
        ta.randperm(300, dtype=ta.uint8)  # torch: value cannot be converted ... overflow
    assert sorted(ta.randperm(256, dtype=ta.uint8).tolist()) == list(range(256))
    assert sorted(ta.randperm(128, dtype=ta.int8).tolist()) == list(range(128))
    with pytest.raises(ta.DTypeError, match=r"randperm: n = 129 does not fit int8"):
        ta.randperm(129, dtype=ta.int8)
    assert len(set(ta.randperm(2049, dtype=ta.float16).tolist())) == 2049
    with pytest.raises(ta.DTypeError, match=r"randperm: n = 2050 .*float16.*2049"):
        ta.randperm(2050, dtype=ta.float16)  # torch: n cannot be greater than 2049 for Half
    with pytest.raises(ta.DTypeError, match=r"randperm: .*bool"):
        ta.randperm(2, dtype=ta.bool)  # torch: "randperm" not implemented for 'Bool'
    with pytest.raises(ta.ShapeError, match=r"randperm: n must be >= 0, got -1"):
        ta.randperm(-1)
    assert ta.randperm(0).shape == (0,)


def test_creation_refuses_negative_sizes_and_steps_by_name():
    for name, call in [("zeros", lambda: ta.zeros(-1)), ("zeros", lambda: ta.zeros(2, -3)),
                       ("ones", lambda: ta.ones((-1,))), ("empty", lambda: ta.empty(-1)),
                       ("randn", lambda: ta.randn(-1)), ("rand", lambda: ta.rand(3, -1)),
                       ("full", lambda: ta.full((-1,), 1.0)),
                       ("randint", lambda: ta.randint(0, 3, (-1,))),
                       ("normal", lambda: ta.normal(0.0, 1.0, (-2,)))]:
        with pytest.raises(ta.ShapeError, match=rf"^{name}: sizes must be >= 0, got \(.*-"):
            call()  # raw NumPy "negative dimensions are not allowed" before
    with pytest.raises(ta.ShapeError, match=r"eye: n must be >= 0, got -1"):
        ta.eye(-1)
    with pytest.raises(ta.ShapeError, match=r"eye: m must be >= 0, got -2"):
        ta.eye(2, -2)
    for name in ("linspace", "logspace"):
        with pytest.raises(ta.ShapeError, match=rf"{name}: number of steps must be "
                           r"non-negative, got -1"):
            getattr(ta, name)(0, 1, -1)
    assert ta.zeros(0, 3).shape == (0, 3) and ta.linspace(0, 1, 0).shape == (0,)


def test_random_floats_into_an_integer_dtype_are_refused_by_name():
    # torch: NotImplementedError "normal_kernel_cpu" / "check_uniform_bounds" not implemented
    # for 'Long' (raw NumPy TypeErrors before)
    for name, call in [("randn", lambda: ta.randn(2, dtype=ta.int64)),
                       ("rand", lambda: ta.rand(2, dtype=ta.int64)),
                       ("randn", lambda: ta.randn(2, dtype=ta.bool)),
                       ("randn_like", lambda: ta.randn_like(ta.zeros(2, dtype=ta.int32))),
                       ("normal", lambda: ta.normal(ta.zeros(2, dtype=ta.int64), 1.0)),
                       ("normal_", lambda: ta.zeros(2, dtype=ta.int64).normal_()),
                       ("uniform_", lambda: ta.zeros(2, dtype=ta.int64).uniform_())]:
        with pytest.raises(ta.DTypeError, match=rf"^{name}: .*floating-point.*(int|bool)"):
            call()


def test_tensor_refuses_nan_and_inf_for_an_integer_dtype_as_torch():
    for value in ([float("nan")], float("nan"), [1.0, float("inf")]):
        with pytest.raises(ta.DTypeError, match=r"tensor: a value does not fit int64.*"
                           r"without overflow"):
            ta.tensor(value, dtype=ta.int64)  # raw "cannot convert float NaN to integer"
    assert ta.tensor([1.5, -2.5], dtype=ta.int64).tolist() == [1, -2]  # cut toward 0, as torch


def test_type_takes_torchs_type_names():
    x = ta.ones(2)
    assert x.type() == "tinyattn.FloatTensor"
    for name, dtype in [("tinyattn.DoubleTensor", np.float64), ("torch.DoubleTensor", np.float64),
                        ("torch.LongTensor", np.int64), ("tinyattn.ByteTensor", np.uint8),
                        ("torch.BoolTensor", np.bool_), ("torch.HalfTensor", np.float16)]:
        assert x.type(name).dtype == dtype, name
        assert x.type(name).type() == name.replace("torch.", "tinyattn."), name
    assert x.type(ta.float64).dtype == np.float64 and x.type("tinyattn.FloatTensor") is x
    with pytest.raises(ta.DTypeError, match=r"type: invalid type 'torch\.Blah'"):
        x.type("torch.Blah")  # torch: ValueError invalid type: 'torch.Blah'


def test_equal_to_none_or_a_string_is_false_as_torch():
    t = ta.ones(3)
    assert (t == None) is False and (t != None) is True  # noqa: E711 - the habit under test
    assert (t == "a") is False and (t != "a") is True and (t == {1: 2}) is False
    if t == None:  # noqa: E711 - raised "the truth value ... is ambiguous" before
        pytest.fail("t == None is False")
    assert t in [None, t] and [None, "x"].count(t) == 0
    assert (t == [1, 1, 1]) is False  # a list is Python's ==, as torch's (arrays: elementwise)
    assert (t == np.ones(3)).tolist() == [True] * 3 and (t == 1).tolist() == [True] * 3
    with pytest.raises(TypeError, match="eq"):
        t.eq(None)  # torch: TypeError (the method form refuses)
    with pytest.raises(TypeError):
        t < None  # noqa: B015 - torch: TypeError


def test_smaller_habits_to_positional_non_blocking_finfo_can_cast_stride():
    x = ta.tensor([1.0, 2.0])
    assert x.to("cpu", ta.float64, True).dtype == np.float64  # (device, dtype, non_blocking)
    assert x.to(ta.float32, False, True) is not x  # (dtype, non_blocking, copy)
    assert x.to(ta.float32, False) is x
    with pytest.raises(TypeError, match="to: takes at most a device and a dtype"):
        x.to("cpu", "cpu", "float64")
    r = ta.randint(0, 3, (2,), dtype=ta.float32, requires_grad=True)
    assert r.requires_grad and r.is_leaf
    assert ta.randperm(3, dtype=ta.float64, requires_grad=True).requires_grad
    with pytest.raises(ta.DTypeError, match="only floating-point tensors can require grad"):
        ta.randperm(3, requires_grad=True)  # torch refuses an int64 one too
    f = ta.finfo(ta.float32)
    assert (f.bits, f.eps, f.max, f.min, f.tiny, f.resolution, f.dtype) == (
        32, 1.1920928955078125e-07, 3.4028234663852886e+38, -3.4028234663852886e+38,
        1.1754943508222875e-38, 1e-06, "float32")
    assert ta.finfo().dtype == "float32" and ta.finfo(ta.float16).max == 65504.0
    assert ta.finfo(ta.float64).smallest_normal == 2.2250738585072014e-308
    i = ta.iinfo(ta.uint8)
    assert (i.bits, i.max, i.min, i.dtype) == (8, 255, 0, "uint8")
    assert ta.iinfo(ta.int64).max == 2**63 - 1
    with pytest.raises(TypeError, match="finfo"):
        ta.finfo(ta.int32)
    with pytest.raises(TypeError, match="iinfo"):
        ta.iinfo(ta.bool)
    assert ta.can_cast(ta.float64, ta.float16) and ta.can_cast(ta.int64, ta.uint8)
    assert ta.can_cast(ta.bool, ta.int8) and not ta.can_cast(ta.float32, ta.int64)
    assert not ta.can_cast(ta.int32, ta.bool)
    m = ta.zeros(3, 4)
    assert m.stride() == (4, 1) and m.t().stride() == (1, 4) and m.stride(-1) == 1
    assert m[1].storage_offset() == 4 and m[1:, 2:].storage_offset() == 6
    assert m.diagonal().stride() == (5,) and m.diagonal(1).storage_offset() == 1
    assert m.unsqueeze(0).expand(2, 3, 4).stride() == (0, 4, 1) and m.storage_offset() == 0
    with pytest.raises(ta.DimError, match="stride"):
        m.stride(2)


# ---- the same on the fake CuPy ---------------------------------------------------------------


@pytest.fixture
def cupy_be(monkeypatch):
    return fake_cupy.install(monkeypatch, kernels=False)


def test_views_indices_and_sums_on_the_fake_cupy(cupy_be):
    b = ta.zeros(3, 3, backend=cupy_be)
    b.diagonal().fill_(1)
    assert b.sum().item() == 3.0
    x = ta.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True, backend=cupy_be)
    x.diagonal(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    with pytest.raises(ta.ShapeError, match=r"^view: .*cannot be viewed as \(6,\)"):
        ta.zeros(2, 3, backend=cupy_be).t().view(6)
    v = ta.zeros(2, 3, 4, backend=cupy_be)
    v.view(6, 4)[5, 3] = 2.0
    assert v[1, 2, 3].item() == 2.0
    assert v.transpose(0, 1).view(3, 2, 2, 2).shape == (3, 2, 2, 2)
    assert ta.tensor([1.0, 2.0], backend=cupy_be).view(ta.int32).tolist() == [1065353216,
                                                                               1073741824]
    assert ta.zeros(2, 3, 4, 5, backend=cupy_be)[ta.tensor(1, backend=cupy_be), :, [1, 3]] \
        .shape == (3, 2, 5)
    assert ta.zeros(3, 4, backend=cupy_be)[[]].shape == (0, 4)
    u8 = ta.tensor(np.array([200, 100], dtype=np.uint8), backend=cupy_be)
    assert u8.sum().dtype == np.int64 and u8.sum().item() == 300
    assert u8.cumsum(0).tolist() == [200, 300]
    assert ta.tensor([100, 100], backend=cupy_be).sum(dtype=np.int8).item() == -56
    assert (ta.tensor([1], dtype=np.int8, backend=cupy_be) + 1000).tolist() == [-23]
    values, indices = ta.tensor([1.0, float("nan"), 3.0], backend=cupy_be).cummax(0)
    assert indices.tolist() == [0, 1, 1] and np.isnan(values.numpy()[1:]).all()
    assert ta.cat([ta.zeros(0, backend=cupy_be), ta.ones(2, 3, backend=cupy_be)]).shape == (2, 3)


def test_creation_on_the_fake_cupy(cupy_be):
    ta.manual_seed(0)
    r = ta.rand(200_000, dtype=np.float16, backend=cupy_be)
    assert r.dtype == np.float16 and r.max().item() < 1.0
    assert ta.zeros(200_000, dtype=np.float16, backend=cupy_be).uniform_().max().item() < 1.0
    a = ta.arange(-1, 1, 0.1, backend=cupy_be)
    assert a.tolist()[-1] == 0.8999999761581421 and a.backend is cupy_be
    assert ta.arange(ta.tensor(3, backend=cupy_be), backend=cupy_be).tolist() == [0, 1, 2]
    assert ta.tensor(5.0, backend=cupy_be).nonzero().shape == (1, 0)
    assert ta.full((2,), -1, dtype=np.uint8, backend=cupy_be).tolist() == [255, 255]


def test_conversions_and_creation_checks_on_the_fake_cupy(cupy_be):
    t = ta.tensor([1.0, 2.0], backend=cupy_be)
    a = np.array(t)
    a[0] = 9.0
    assert t.tolist() == [1.0, 2.0] and np.asarray(t).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match=r"Unable to avoid copy.*on cupy"):
        np.array(t, copy=False)  # (the values reach the host only in a copy)
    m = ta.zeros(3, 4, backend=cupy_be)
    assert m.t().stride() == (1, 4) and m[1].storage_offset() == 4
    assert ta.tensor([], backend=cupy_be).dtype == np.float32
    assert ta.multinomial(ta.ones(0, 3, backend=cupy_be), 2).shape == (0, 2)
    with pytest.raises(ValueError, match="normal: expects all elements of std >= 0.0"):
        ta.normal(ta.zeros(2, backend=cupy_be), -ta.ones(2, backend=cupy_be))
    with pytest.raises(ta.DTypeError, match="randperm: n = 300 does not fit uint8"):
        ta.randperm(300, dtype=ta.uint8, backend=cupy_be)
    x = ta.tensor([5, 7], backend=cupy_be)
    alias = x.detach()
    x //= 2
    x %= 2
    assert alias.tolist() == [0, 1] and (x == None) is False  # noqa: E711


# ---- writing a Python number the dtype cannot hold: torch wraps or refuses ---------------------


@pytest.mark.parametrize("dtype, values", [
    ("uint8", [-1, -255, -256, 255, 256, 300, -1.5, 255.9, 3.7, True]),
    ("int8", [300, 128, -129, -1, 127.9, -128.5, float("nan"), float("inf")]),
    ("int16", [40000, -32768, 1e6]),
    ("int64", [2**63 - 1, -2**63, float("inf")]),
    ("float32", [1e39, -1e39, 3e38, float("inf")]),
])
def test_setitem_and_fill_of_a_number_wrap_or_refuse_as_torch(dtype, values):
    """uint8 t[0] = -1 was NumPy's OverflowError; torch gives 255 (a negative int wraps into an
    unsigned dtype) and refuses a value out of range (int8 300) with its overflow error."""
    torch = pytest.importorskip("torch")
    for v in values:
        for write in (lambda t, v=v: t.__setitem__(0, v), lambda t, v=v: t.fill_(v),
                      lambda t, v=v: t.__setitem__(t == t, v),
                      lambda t, v=v: t.zero_().add_(0).fill_(v)):
            theirs = torch.zeros(2, dtype=getattr(torch, dtype))
            ours = ta.zeros(2, dtype=getattr(ta, dtype))
            try:
                write(theirs)
            except RuntimeError:
                with pytest.raises(ta.DTypeError, match=f"does not fit {dtype} .*value cannot be "
                                                        "converted without overflow"):
                    write(ours)
                assert ours.tolist() == [0, 0]
                continue
            write(ours)
            assert str(ours.dtype) == dtype and ours.tolist() == theirs.tolist()


def test_setitem_and_fill_refusals_name_the_op():
    t = ta.tensor([1, 2], dtype=ta.int8)
    with pytest.raises(ta.DTypeError, match=r"setitem: 300 does not fit int8 \(its values are "
                                            r"-128\.\.127\)"):
        t[0] = 300
    with pytest.raises(ta.DTypeError, match=r"fill_: 300 does not fit int8 \(its values are "
                                            r"-128\.\.127\)"):
        t.fill_(300)
    u = ta.tensor([1, 2], dtype=ta.uint8)
    u[0] = -1
    assert u.tolist() == [255, 2] and u.fill_(-2).tolist() == [254, 254]


def test_setitem_of_float16_past_its_range_is_inf_as_torch():
    """torch's setitem (unlike fill_) casts a too-large number into float16 as inf."""
    t = ta.zeros(3, dtype=ta.float16)
    t[0], t[1] = 1e6, -70000.0
    assert t.tolist() == [math.inf, -math.inf, 0.0]
    with pytest.raises(ta.DTypeError, match="fill_: 1000000.0 does not fit float16"):
        t.fill_(1e6)
