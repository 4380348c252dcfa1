"""torch.Tensor methods added in tinyattn/tensor_methods_more.py, each compared with torch 2.13
on CPU: the device and layout attributes, narrow_copy, new_empty_strided, the deprecated
out-of-place resize and resize_as, share_memory_/is_shared, apply_/map_/map2_, as_strided_,
as_strided_scatter, slice_inverse, dim_order, nonzero_static, storage_type, const_data_ptr,
output_nr, and the LAPACK-style Householder QR: geqrf, orgqr, ormqr."""

import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import DTypeError, GraphError, ShapeError

torch = pytest.importorskip("torch")


def to_ta(t, requires_grad=False):
    return ta.tensor(t.detach().numpy().copy(), requires_grad=requires_grad)


def close(got, want, tol=1e-12):
    g = got.detach().numpy() if isinstance(got, ta.Tensor) else np.asarray(got)
    w = want.detach().numpy()
    assert g.shape == w.shape
    assert str(g.dtype) == str(w.dtype).replace("torch.", "")
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def grads_match(fn_torch, fn_ta, *inputs, tol=1e-10):
    """fn(*inputs) in both, the same random weighting of the output, gradients compared."""
    tins = [t.detach().clone().requires_grad_(True) for t in inputs]
    ains = [to_ta(t, requires_grad=True) for t in inputs]
    want, got = fn_torch(*tins), fn_ta(*ains)
    close(got, want, tol)
    w = torch.randn(want.shape, dtype=want.dtype, generator=torch.Generator().manual_seed(3))
    (want * w).sum().backward()
    (got * to_ta(w)).sum().backward()
    for t, a in zip(tins, ains, strict=True):
        close(a.grad, t.grad, tol)


def raises_as_torch(fn, ours=None):
    """fn(torch) raises; fn(ta) raises an exception of torch's type (and of `ours`)."""
    with pytest.raises(Exception) as want:  # noqa: PT011 - the type is what is compared
        fn(torch)
    with pytest.raises(type(want.value)) as got:
        fn(ta)
    if ours is not None:
        assert isinstance(got.value, ours)
    return got.value


def rand(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


# ---- what a tensor is ---------------------------------------------------------------------------


FLAGS = ["is_cpu", "is_sparse", "is_sparse_csr", "is_quantized", "is_meta", "is_mkldnn",
         "is_nested"]


@pytest.mark.parametrize("name", FLAGS)
def test_the_flags_are_torchs_for_a_cpu_tensor(name):
    x = torch.zeros(2, 3)
    assert getattr(to_ta(x), name) is getattr(x, name)
    assert getattr(to_ta(x)[0], name) is getattr(x[0], name)


def test_get_device_and_layout_as_torch():
    x = torch.zeros(2, 3)
    assert to_ta(x).get_device() == x.get_device() == -1
    assert repr(ta.strided) == repr(torch.strided).replace("torch.", "ta.")
    assert to_ta(x).layout is ta.strided
    assert isinstance(ta.strided, ta.layout)
    assert to_ta(x).t().layout is ta.strided


def test_a_gpu_tensor_is_no_cpu_one(monkeypatch):
    """On CuPy (tests/support/fake_cupy.py): is_cpu False, a device id >= 0, is_shared True
    (torch's CUDA tensors'), and the Python-callable methods refused (torch's TypeError)."""
    import fake_cupy  # tests/support

    fake_cupy.install(monkeypatch, kernels=False)
    x = ta.ones(3, device="cupy")
    assert x.is_cpu is False and x.get_device() >= 0 and x.is_shared() is True
    assert x.layout is ta.strided
    for call in (lambda: x.apply_(float), lambda: x.map_(x, max), lambda: x.map2_(x, x, max)):
        with pytest.raises(TypeError, match="only implemented on CPU tensors"):
            call()


def test_const_data_ptr_is_data_ptr():
    x = ta.arange(6.0).reshape(2, 3)
    assert x.const_data_ptr() == x.data_ptr()
    assert x[1].const_data_ptr() == x.data_ptr() + 3 * x.element_size()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "int16",
                                   "int8", "uint8", "bool"])
def test_storage_type_is_named_as_torchs(dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's TypedStorage deprecation)
        want = torch.zeros(2, dtype=getattr(torch, dtype)).storage_type()
    got = ta.zeros(2, dtype=getattr(ta, dtype)).storage_type()
    assert got.__name__ == want.__name__
    assert got.dtype == getattr(ta, dtype)
    assert got is ta.zeros(3, dtype=getattr(ta, dtype)).storage_type()


def test_share_memory_and_is_shared_as_torch():
    for m in (torch, ta):
        x = m.zeros(3)
        assert x.is_shared() is False
        assert x.share_memory_() is x
        assert x.is_shared() is True and x[1:].is_shared() is True
        y = m.zeros(4)
        y[1:].share_memory_()
        assert y.is_shared() is True
        assert m.zeros(4).is_shared() is False


def test_output_nr_as_torch():
    for m in (torch, ta):
        class Two(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, a, b):
                return a * 2 + b * 3

        x = m.ones(3, requires_grad=True)
        a, b = Two.apply(x)
        assert (x.output_nr, (x * 2).output_nr, a.output_nr, b.output_nr) == (0, 0, 0, 1)


# ---- copies, shapes and strides -----------------------------------------------------------------


@pytest.mark.parametrize("args", [(0, 0, 2), (1, 1, 2), (-1, 0, 4), (1, -3, 2), (0, 3, 0)])
def test_narrow_copy_values_gradient_and_own_memory(args):
    x = rand(3, 4)
    grads_match(lambda t: t.narrow_copy(*args), lambda t: t.narrow_copy(*args), x)
    a = to_ta(x)
    out = a.narrow_copy(*args)
    assert out.is_contiguous()
    out.add_(1)
    close(a, x)


@pytest.mark.parametrize("args", [(1, 3, 2), (0, 1, 3), (1, 0, -1)])
def test_narrow_copy_refuses_what_torch_refuses(args):
    x = rand(3, 4)
    err = raises_as_torch(lambda m: (x if m is torch else to_ta(x)).narrow_copy(*args),
                          ShapeError)
    assert "narrow_copy" in str(err) and "(3, 4)" in str(err)


def test_narrow_copy_dim_out_of_range():
    x = rand(3, 4)
    err = raises_as_torch(lambda m: (x if m is torch else to_ta(x)).narrow_copy(2, 0, 1))
    assert "narrow_copy" in str(err)


@pytest.mark.parametrize("size,stride", [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((4,), (2,)),
                                         ((2, 0), (1, 1))])
def test_new_empty_strided_as_torch(size, stride):
    x = torch.zeros(2, dtype=torch.float64)
    want = x.new_empty_strided(size, stride)
    got = to_ta(x).new_empty_strided(size, stride)
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    assert got.dtype == ta.float64 and not got.requires_grad
    got = to_ta(x).new_empty_strided(size=size, stride=stride, dtype=ta.float32,
                                     requires_grad=True)
    assert got.dtype == ta.float32 and got.requires_grad and got.is_leaf


@pytest.mark.parametrize("make", [lambda x: x, lambda x: x.t()])
@pytest.mark.parametrize("sizes", [(12,), (4, 3), (2, 2, 3), (12, 1)])
def test_resize_warns_and_reshapes_as_torch(make, sizes):
    x = rand(3, 4)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        grads_match(lambda t: make(t).resize(*sizes), lambda t: make(t).resize(*sizes), x)
    with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
        grads_match(lambda t: make(t).resize_as(torch.zeros(sizes)),
                    lambda t: make(t).resize_as(ta.zeros(sizes)), x)


def test_resize_keeps_the_number_of_entries_as_torch():
    x = rand(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        err = raises_as_torch(lambda m: (x if m is torch else to_ta(x)).resize(2, 2),
                              ShapeError)
        assert "resize" in str(err) and "(3, 4)" in str(err)
        raises_as_torch(lambda m: (x if m is torch else to_ta(x)).resize_as(m.zeros(5)))


def test_resize_of_a_contiguous_tensor_shares_its_memory_as_torch():
    x = rand(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, a = x.resize(12), to_ta(x)
        got = a.resize(12)
    assert (want.data_ptr() == x.data_ptr()) is (got.data_ptr() == a.data_ptr()) is True


# ---- Python callables, in place ----------------------------------------------------------------


def both(fn, x):
    """fn on a copy of x in each library: (torch's result, tinyattn's, the tinyattn tensor)."""
    t, a = x.clone(), to_ta(x)
    want, got = fn(torch, t), fn(ta, a)
    return want, got, a, t


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool"])
def test_apply_as_torch(dtype):
    x = torch.tensor([[0, 1, 2], [3, -4, 5]]).to(getattr(torch, dtype))
    f = (lambda v: v * 2.7 - 1) if dtype != "bool" else (lambda v: not v)
    want, got, a, t = both(lambda m, y: y.apply_(f), x)
    assert got is a and want is t
    close(a, t)


def test_apply_writes_through_a_view_and_counts_a_version():
    x = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    want, got, a, t = both(lambda m, y: y.t()[1].apply_(lambda v: v * 10), x)
    close(a, t)
    close(got, want)
    b = ta.zeros(3)
    v0 = b._version
    b.apply_(lambda v: v + 1)
    assert b._version > v0


def test_map_and_map2_broadcast_the_others_as_torch():
    x = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    y, z = torch.tensor([10.0, 20, 30], dtype=torch.float64), rand(2, 1)
    want, got, a, t = both(lambda m, s: s.map_(y if m is torch else to_ta(y),
                                               lambda p, q: p * q - 1), x)
    assert got is a and want is t
    close(a, t)
    want, got, a, t = both(lambda m, s: s.map2_(*((y, z) if m is torch else (to_ta(y), to_ta(z))),
                                                lambda p, q, r: p + q * r), x)
    assert got is a and want is t
    close(a, t)


CALLABLE_REFUSALS = {
    "apply_ requires_grad": lambda m: m.ones(2, requires_grad=True).apply_(lambda v: v),
    "apply_ view of a leaf": lambda m: m.ones(2, requires_grad=True)[:1].apply_(lambda v: v),
    "map_ requires_grad": lambda m: m.ones(2, requires_grad=True).map_(m.ones(2), lambda a, b: a),
    "map_ other requires_grad": lambda m: m.ones(2).map_(m.ones(2, requires_grad=True),
                                                         lambda a, b: a),
    "map2_ y requires_grad": lambda m: m.ones(2).map2_(m.ones(2), m.ones(2, requires_grad=True),
                                                       lambda a, b, c: a),
    "map_ dtype": lambda m: m.ones(2).map_(m.ones(2, dtype=m.int64), lambda a, b: a),
    "map2_ dtype": lambda m: m.ones(2).map2_(m.ones(2), m.ones(2, dtype=m.float64),
                                             lambda a, b, c: a),
    "map_ shape": lambda m: m.ones(2, 3).map_(m.ones(2, 2), lambda a, b: a),
    "map_ no broadcast of self": lambda m: m.ones(1, 3).map_(m.ones(2, 3), lambda a, b: a),
    "apply_ returns a str": lambda m: m.ones(2).apply_(lambda v: "x"),
    "map_ not a tensor": lambda m: m.ones(2).map_([1.0, 2.0], lambda a, b: a),
}


@pytest.mark.parametrize("case", list(CALLABLE_REFUSALS))
def test_the_callable_methods_refuse_what_torch_refuses(case):
    err = raises_as_torch(CALLABLE_REFUSALS[case])
    assert case.split()[0] in str(err)


def test_the_callable_methods_refuse_a_graph_with_a_graph_error():
    with pytest.raises(GraphError, match="detach"):
        ta.ones(2, requires_grad=True).apply_(lambda v: v)
    with pytest.raises(DTypeError, match="map_"):
        ta.ones(2).map_(ta.ones(2, dtype=ta.int64), lambda a, b: a)


# ---- as_strided_, as_strided_scatter, slice_inverse ---------------------------------------------


@pytest.mark.parametrize("args", [((3, 2), (1, 3)), ((2, 2), (2, 1), 1), ((6,), (1,), 0),
                                  ((2,), (3,), 2), ((2, 2), (0, 1))])
def test_as_strided_in_place_as_torch(args):
    x = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    want, got, a, t = both(lambda m, y: y.as_strided_(*args), x)
    assert got is a and want is t
    close(a, t)
    assert a.stride() == t.stride() and a.storage_offset() == t.storage_offset()
    assert a._version == t._version


def test_as_strided_in_place_records_a_gradient_as_torch():
    def f(t):
        y = t * 1
        y.as_strided_((2, 2), (2, 1), 1)
        return y * y
    grads_match(f, f, rand(6))


AS_STRIDED_REFUSALS = {
    "leaf": lambda m: m.zeros(6, requires_grad=True).as_strided_((2,), (1,)),
    "out of bounds": lambda m: m.zeros(2, 3).as_strided_((4, 4), (1, 1)),
    "length": lambda m: m.zeros(2, 3).as_strided_((2, 2), (1,)),
    "scatter: src size": lambda m: m.zeros(2, 3).as_strided_scatter(m.ones(3), (2,), (1,)),
    "scatter: out of bounds": lambda m: m.zeros(2, 3).as_strided_scatter(m.ones(7), (7,), (1,)),
    "scatter: src not a tensor": lambda m: m.zeros(2, 3).as_strided_scatter(1.0, (2,), (1,)),
}


@pytest.mark.parametrize("case", list(AS_STRIDED_REFUSALS))
def test_as_strided_refusals_as_torch(case):
    err = raises_as_torch(AS_STRIDED_REFUSALS[case])
    assert "as_strided" in str(err) or "leaf" in str(err)


SCATTERS = {
    "contiguous": (lambda m: m.zeros(2, 3, dtype=m.float64), (2, 2), (1, 2), None),
    "offset": (lambda m: m.zeros(2, 3, dtype=m.float64), (2,), (3,), 1),
    "transposed input": (lambda m: m.zeros(3, 2, dtype=m.float64).t(), (2,), (1,), None),
    "a slice, offset None": (lambda m: m.arange(12.0, dtype=m.float64)[2:8], (2,), (1,), None),
    "a slice, offset 0": (lambda m: m.arange(12.0, dtype=m.float64)[2:8], (2,), (1,), 0),
    "a slice, offset 1": (lambda m: m.arange(12.0, dtype=m.float64)[2:8], (2,), (1,), 1),
    "a slice, offset 3": (lambda m: m.arange(12.0, dtype=m.float64)[2:8], (2,), (1,), 3),
    "3-d": (lambda m: m.zeros(2, 3, 4, dtype=m.float64), (2, 2, 2), (12, 4, 1), 5),
}


@pytest.mark.parametrize("case", list(SCATTERS))
def test_as_strided_scatter_as_torch(case):
    make, size, stride, offset = SCATTERS[case]
    src = rand(*size, seed=1)
    want = make(torch).as_strided_scatter(src, size, stride, offset)
    x = make(ta)
    got = x.as_strided_scatter(to_ta(src), size, stride, offset)
    close(got, want)
    close(x, make(torch))  # (out of place)
    assert got.data_ptr() != x.data_ptr()


@pytest.mark.parametrize("size,stride,offset", [((2, 2), (1, 2), 1), ((2,), (3,), None),
                                                ((3,), (1,), 3)])
def test_as_strided_scatter_gradients(size, stride, offset):
    """src's gradient is torch's; input's is g where src did not overwrite it, zeros there.
    (torch 2.13's is the other way round, g only on the overwritten places, which its own
    gradcheck refuses: its formula, flagged in pytorch/pytorch#77128's review, is not used
    here; the places come from torch's forward.)"""
    x, s, w = rand(2, 3), rand(*size, seed=1), rand(2, 3, seed=2)
    a, b = to_ta(x, requires_grad=True), to_ta(s, requires_grad=True)
    ts = s.clone().requires_grad_(True)
    want = (x * 2).as_strided_scatter(ts * 3, size, stride, offset)
    got = (a * 2).as_strided_scatter(b * 3, size, stride, offset)
    close(got, want)
    (want * w).sum().backward()
    (got * to_ta(w)).sum().backward()
    close(b.grad, ts.grad)
    kept = torch.ones(2, 3, dtype=torch.float64).as_strided_scatter(
        torch.zeros(size, dtype=torch.float64), size, stride, offset)
    close(a.grad, 2 * w * kept)
    assert ta.gradcheck(lambda p, q: p.as_strided_scatter(q, size, stride, offset),
                        (to_ta(x, True), to_ta(s, True)))


def test_as_strided_scatter_casts_src_as_torch():
    want = torch.zeros(2, 3).as_strided_scatter(torch.ones(2, dtype=torch.float64), (2,), (1,))
    got = ta.zeros(2, 3).as_strided_scatter(ta.ones(2, dtype=ta.float64), (2,), (1,))
    close(got, want)


def test_slice_inverse_as_torch():
    base = torch.arange(10.0, dtype=torch.float64)
    want = base[2:8:2].slice_inverse(base, 0, 2, 8, 2)
    a = to_ta(base)
    got = a[2:8:2].slice_inverse(a, 0, 2, 8, 2)
    close(got, want)
    assert got.data_ptr() == a.data_ptr()
    raises_as_torch(lambda m: m.zeros(3).slice_inverse(m.arange(10.0), 0, 2, 8, 2))


# ---- dim_order ---------------------------------------------------------------------------------


LAYOUTS = {
    "contiguous": lambda m: m.zeros(2, 3, 4),
    "transposed": lambda m: m.zeros(2, 3).t(),
    "permuted": lambda m: m.zeros(2, 3, 4).permute(2, 0, 1),
    "permuted 4-d": lambda m: m.zeros(2, 3, 4, 5).permute(0, 2, 3, 1),
    "size 1": lambda m: m.zeros(2, 1, 3),
    "expanded": lambda m: m.zeros(3)[None].expand(4, 3),
    "sliced": lambda m: m.zeros(4, 6)[:, ::2],
    "transposed back": lambda m: m.zeros(2, 3).t().contiguous().t(),
    "1-d": lambda m: m.zeros(5),
    "0-d": lambda m: m.zeros(()),
}


@pytest.mark.parametrize("check", [False, True, "contiguous", "both"])
@pytest.mark.parametrize("case", list(LAYOUTS))
def test_dim_order_as_torch(case, check):
    def call(m):
        if check in (False, True):
            arg = check
        else:
            arg = [m.contiguous_format] + ([m.channels_last] if check == "both" else [])
        return LAYOUTS[case](m).dim_order(ambiguity_check=arg)
    try:
        want = call(torch)
    except RuntimeError:
        raises_as_torch(call)
        return
    assert call(ta) == want


def test_dim_order_refuses_what_torch_refuses():
    err = raises_as_torch(lambda m: m.zeros(2).dim_order(ambiguity_check="ILLEGAL"))
    assert "ambiguity_check" in str(err)
    raises_as_torch(lambda m: m.zeros(2).dim_order(ambiguity_check=[1]))
    raises_as_torch(lambda m: m.zeros(2).dim_order(True))


# ---- nonzero_static ----------------------------------------------------------------------------


@pytest.mark.parametrize("values", [[0, 1, 0, 2], [[0, 1], [3, 0]], [[0.0, 0.0]], 3, 0, []])
@pytest.mark.parametrize("size,fill", [(4, -1), (1, 9), (0, -1), (6, 7)])
def test_nonzero_static_as_torch(values, size, fill):
    x = torch.tensor(values)
    want = x.nonzero_static(size=size, fill_value=fill)
    got = to_ta(x).nonzero_static(size=size, fill_value=fill)
    assert got.dtype == ta.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.shape == tuple(want.shape)


def test_nonzero_static_refuses_what_torch_refuses():
    err = raises_as_torch(lambda m: m.tensor([1, 0]).nonzero_static(size=-1))
    assert "nonzero_static" in str(err)
    raises_as_torch(lambda m: m.tensor([1, 0]).nonzero_static(size=2.0))
    raises_as_torch(lambda m: m.tensor([1, 0]).nonzero_static(2))


# ---- Householder QR: geqrf, orgqr, ormqr -------------------------------------------------------


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5), (2, 4, 3), (1, 1), (0, 3), (3, 0)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_geqrf_as_lapacks(shape, dtype):
    x = rand(*shape).to(getattr(torch, dtype))
    a, tau = x.geqrf()
    got = to_ta(x).geqrf()
    assert got._fields == ("a", "tau")
    tol = 1e-12 if dtype == "float64" else 1e-5
    close(got.a, a, tol)
    close(got.tau, tau, tol)
    close(ta.geqrf(to_ta(x)).a, a, tol)


def test_geqrf_has_no_derivative_as_torch():
    def f(m):
        x = m.ones(3, 2, dtype=m.float64) + m.eye(3, 2, dtype=m.float64)
        x.requires_grad_(True)
        x.geqrf().a.sum().backward()
    err = raises_as_torch(f, NotImplementedError)
    assert "geqrf" in str(err)
    raises_as_torch(lambda m: m.ones(3).geqrf())
    raises_as_torch(lambda m: m.ones(3, 2, dtype=m.int64).geqrf())


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 5, 2)])
def test_orgqr_values_and_gradients_as_torch(shape):
    a, tau = rand(*shape).geqrf()
    grads_match(lambda x, t: x.orgqr(t), lambda x, t: x.orgqr(t), a, tau)
    grads_match(lambda x, t: torch.orgqr(x, t), lambda x, t: ta.orgqr(x, t), a, tau)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5), (2, 4, 2)])
def test_ormqr_values_and_gradients_as_torch(shape, left, transpose):
    a, tau = rand(*shape).geqrf()
    m = shape[-2]
    other = rand(*shape[:-2], m, 2, seed=2) if left else rand(*shape[:-2], 2, m, seed=2)
    grads_match(lambda x, t, c: x.ormqr(t, c, left, transpose),
                lambda x, t, c: x.ormqr(t, c, left, transpose), a, tau, other)
    grads_match(lambda x, t, c: torch.ormqr(x, t, c, left=left, transpose=transpose),
                lambda x, t, c: ta.ormqr(x, t, c, left=left, transpose=transpose), a, tau, other)


def _ormqr_case(shapes, dtypes=("float64",) * 3, left=True):
    def call(m):
        made = [m.ones(*s, dtype=getattr(m, d)) for s, d in zip(shapes, dtypes, strict=True)]
        return m.ormqr(*made, left=left)
    return call


ORMQR_REFUSALS = {
    "other rows": _ormqr_case([(4, 3), (3,), (3, 2)]),
    "other ndim": _ormqr_case([(4, 3), (3,), (2, 4, 2)]),
    "batch": _ormqr_case([(2, 4, 3), (2, 3), (1, 4, 2)]),
    "tau length": _ormqr_case([(4, 3), (2,), (4, 2)]),
    "other dtype": _ormqr_case([(4, 3), (3,), (4, 2)], ("float64", "float64", "float32")),
    "tau dtype": _ormqr_case([(4, 3), (3,), (4, 2)], ("float64", "float32", "float64")),
    "right columns": _ormqr_case([(4, 3), (3,), (2, 3)], left=False),
    "tau ndim": _ormqr_case([(4, 3), (1, 3), (4, 2)]),
    "input ndim": _ormqr_case([(4,), (3,), (4, 2)]),
}


@pytest.mark.parametrize("case", list(ORMQR_REFUSALS))
def test_ormqr_refuses_what_torch_refuses(case):
    err = raises_as_torch(ORMQR_REFUSALS[case])
    assert "ormqr" in str(err)
