"""torch.nn names tinyattn lacked, against torch's: F.lp_pool1d/2d/3d and nn.LPPool1d/2d/3d,
F.max_unpool1d/2d/3d and nn.MaxUnpool1d/2d/3d (with max_poolNd's indices, output_size), the
F.max_pool*_with_indices and F.adaptive_max_pool*_with_indices aliases, nn.BatchNorm3d,
nn.InstanceNorm3d, nn.Dropout3d and F.dropout3d, the 3-d padding modules, F.pdist, nn.Buffer
and the nn.RNNBase / nn.RNNCellBase names. Values and gradients in float64 (tight) and float32,
batched and unbatched, odd sizes, reprs, and torch's errors for bad arguments."""

import copy
import math
import pickle

import numpy as np
import pytest
from torch_same import same  # (tests/support)

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

torch = pytest.importorskip("torch")

DTYPES = {"float64": (ta.float64, torch.float64, dict(rtol=1e-10, atol=1e-12)),
          "float32": (ta.float32, torch.float32, dict(rtol=1e-4, atol=1e-5))}


def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _same(fn, arrays, dtype="float64"):
    same(fn, arrays, DTYPES[dtype])


# ---- lp_pool -----------------------------------------------------------------------------------

LP_CASES = [
    (1, (2, 3, 7), 2, 3, None, False),
    (1, (3, 8), 3, 2, 1, False),  # unbatched
    (1, (2, 2, 7), 1.5, 2, None, True),
    (1, (1, 2, 9), 1, 3, 2, True),
    (2, (2, 3, 5, 7), 2, 2, None, False),
    (2, (3, 6, 5), 3, (2, 3), (1, 2), True),  # unbatched
    (2, (1, 2, 5, 5), 1.5, (3, 2), None, True),
    (3, (1, 2, 4, 5, 3), 2, 2, None, False),
    (3, (2, 5, 4, 3), 2.5, (2, 3, 2), (1, 2, 1), True),  # unbatched
    (2, (2, 3, 5, 4), math.inf, 2, 1, False),
    (1, (2, 3, 7), -math.inf, 3, 2, True),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("spatial,shape,p,kernel,stride,ceil", LP_CASES)
def test_lp_pool_matches_torch(spatial, shape, p, kernel, stride, ceil, dtype):
    x = _randn(*shape)
    if math.isfinite(p) and p != int(p):  # (a fractional power of a negative number: nan in both)
        x = np.abs(x) + 0.1
    name = f"lp_pool{spatial}d"
    _same(lambda f, a: getattr(f, name)(a, p, kernel, stride, ceil), [x], dtype)
    _same(lambda f, a: getattr(f, name)(a, p, kernel, stride=stride, ceil_mode=ceil), [x],
          dtype)


def test_lp_pool_of_negative_sums_and_zeros_matches_torch():
    x = np.array([[[-1.0, 2, 3, -4, 0.5, -2, 0, 0]]])
    _same(lambda f, a: f.lp_pool1d(a, 3, 2, stride=1), [x])
    _same(lambda f, a: f.lp_pool1d(a, 1.5, 2, ceil_mode=True), [x])
    _same(lambda f, a: f.lp_pool1d(a, 2, 2), [np.zeros((1, 2, 4))])  # zero sums: gradient 0


@pytest.mark.parametrize("spatial,args,kwargs,shape", [
    (1, (2, 3), {}, (2, 3, 8)),
    (1, (1.5, 2), dict(stride=1, ceil_mode=True), (3, 7)),
    (2, (2, 3), {}, (1, 2, 7, 6)),
    (2, (3, (2, 3)), dict(stride=(1, 2)), (2, 5, 7)),
    (3, (2, (1, 2, 2)), {}, (1, 2, 3, 4, 5)),
    (3, (2, 2), dict(stride=1, ceil_mode=True), (2, 3, 3, 4)),
])
def test_lp_pool_modules_match_torch(spatial, args, kwargs, shape):
    name = f"LPPool{spatial}d"
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    x = np.abs(_randn(*shape)) + 0.1
    _same(lambda f, a: (ours if f is F else theirs)(a), [x])
    assert list(ours.state_dict()) == [] and isinstance(ours, nn.Module)


def test_lp_pool_refuses_what_torch_refuses():
    x = ta.ones(1, 2, 6)
    with pytest.raises((ValueError, RuntimeError)):
        F.lp_pool1d(x, 2, 0)
    with pytest.raises((ValueError, RuntimeError)):
        F.lp_pool1d(x, 2, 2, stride=0)
    with pytest.raises((ValueError, RuntimeError)):
        F.lp_pool2d(ta.ones(2, 6), 2, 2)  # (N, C, H, W) or (C, H, W) wanted
    with pytest.raises((ValueError, RuntimeError)):
        F.lp_pool1d(x, 2, 7)  # a kernel larger than the input
    with pytest.raises(ZeroDivisionError):
        F.lp_pool1d(x, 0, 2)  # (torch's: 1 / norm_type)


# ---- max_unpool --------------------------------------------------------------------------------

UNPOOL_CASES = [
    (1, (2, 3, 8), dict(kernel_size=2), None),
    (1, (3, 9), dict(kernel_size=3, stride=2, padding=1), None),  # unbatched, overlapping
    (1, (2, 2, 7), dict(kernel_size=2), (7,)),
    (2, (2, 3, 4, 6), dict(kernel_size=2), None),
    (2, (3, 5, 7), dict(kernel_size=(2, 3), stride=(2, 2), padding=(1, 1)), (5, 7)),  # unbatched
    (2, (1, 2, 5, 5), dict(kernel_size=2), (1, 2, 5, 5)),
    (2, (1, 2, 5, 7), dict(kernel_size=3, stride=2), [6, 8]),
    (3, (1, 2, 4, 4, 6), dict(kernel_size=2), None),
    (3, (2, 5, 4, 5), dict(kernel_size=(1, 2, 2), stride=(1, 2, 1), padding=(0, 1, 0)), None),
    (3, (1, 1, 5, 5, 5), dict(kernel_size=2), (5, 5, 5)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("spatial,shape,kw,output_size", UNPOOL_CASES)
def test_max_unpool_matches_torch(spatial, shape, kw, output_size, dtype):
    pool, unpool = f"max_pool{spatial}d", f"max_unpool{spatial}d"

    def fn(f, a):
        y, i = getattr(f, pool)(a, return_indices=True, **kw)
        return getattr(f, unpool)(y * 2, i, output_size=output_size, **kw)

    _same(fn, [_randn(*shape)], dtype)
    xt = torch.tensor(_randn(*shape))
    y, i = getattr(torch.nn.functional, pool)(xt, return_indices=True, **kw)
    ours_y, ours_i = getattr(F, pool)(ta.tensor(_randn(*shape)), return_indices=True, **kw)
    np.testing.assert_array_equal(ours_i.numpy(), i.numpy())  # torch's flat indices per plane
    assert ours_i.dtype == ta.int64


@pytest.mark.parametrize("spatial,shape,kw", [
    (1, (2, 3, 8), dict(kernel_size=2)),
    (2, (3, 4, 6), dict(kernel_size=(2, 3), stride=(1, 3))),
    (3, (1, 2, 4, 4, 4), dict(kernel_size=2)),
])
def test_max_unpool_modules_match_torch(spatial, shape, kw):
    ours = getattr(nn, f"MaxUnpool{spatial}d")(**kw)
    theirs = getattr(torch.nn, f"MaxUnpool{spatial}d")(**kw)
    assert repr(ours) == repr(theirs)
    pool_ours = getattr(nn, f"MaxPool{spatial}d")(return_indices=True, **kw)
    pool_theirs = getattr(torch.nn, f"MaxPool{spatial}d")(return_indices=True, **kw)

    def fn(f, a):
        pool, unpool = (pool_ours, ours) if f is F else (pool_theirs, theirs)
        return unpool(*pool(a))

    _same(fn, [_randn(*shape)])


def test_max_unpool_module_takes_output_size():
    x = _randn(1, 2, 5, 5)
    out = nn.MaxUnpool2d(2)(*F.max_pool2d(ta.tensor(x), 2, return_indices=True),
                            output_size=(1, 2, 5, 5))
    want = torch.nn.MaxUnpool2d(2)(
        *torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True),
        output_size=(1, 2, 5, 5))
    np.testing.assert_array_equal(out.numpy(), want.numpy())


def test_max_unpool_float32_keeps_its_dtype():
    y, i = F.max_pool2d(ta.randn(1, 2, 4, 4), 2, return_indices=True)
    assert F.max_unpool2d(y, i, 2).dtype == ta.float32


def _unpool_error(lib, fn):
    f = lib.nn.functional
    x = lib.tensor(_randn(1, 2, 4, 4))
    y, i = f.max_pool2d(x, 2, return_indices=True)
    return fn(f, y, i)


@pytest.mark.parametrize("fn,kind,match", [
    (lambda f, y, i: f.max_unpool2d(y, i, 2, output_size=(9, 9)), ValueError,
     "invalid output_size"),
    (lambda f, y, i: f.max_unpool2d(y, i, 2, output_size=(1, 2, 3)), ValueError,
     "2 or 4 elements"),
    (lambda f, y, i: f.max_unpool2d(y, i + 10, 2), RuntimeError, "invalid max index"),
    (lambda f, y, i: f.max_unpool2d(y, -i - 1, 2), RuntimeError, "invalid max index"),
    (lambda f, y, i: f.max_unpool2d(y, i.double(), 2), RuntimeError, "int64"),
    (lambda f, y, i: f.max_unpool2d(y, i[..., :1], 2), RuntimeError, "same as that of the input"),
    (lambda f, y, i: f.max_unpool2d(y[0, 0], i[0, 0], 2), RuntimeError, "3d or 4d"),
    (lambda f, y, i: f.max_unpool3d(y[0], i[0], 2), RuntimeError, "4d or 5d"),
    (lambda f, y, i: f.max_unpool1d(y, i, 2), RuntimeError, "3d or 4d"),
])
def test_max_unpool_refuses_what_torch_refuses(fn, kind, match):
    with pytest.raises(kind, match=match):
        _unpool_error(torch, fn)
    with pytest.raises(kind, match=match):
        _unpool_error(ta, fn)


# ---- the _with_indices aliases -----------------------------------------------------------------


@pytest.mark.parametrize("name,shape,arg", [
    ("max_pool1d_with_indices", (2, 3, 7), 2), ("max_pool2d_with_indices", (3, 5, 4), 2),
    ("max_pool3d_with_indices", (1, 2, 3, 4, 5), 2),
    ("adaptive_max_pool1d_with_indices", (2, 3, 7), 3),
    ("adaptive_max_pool2d_with_indices", (2, 5, 4), (2, 3)),
    ("adaptive_max_pool3d_with_indices", (1, 2, 3, 4, 5), 2),
])
def test_with_indices_aliases_give_values_and_indices(name, shape, arg):
    x = _randn(*shape)
    got = getattr(F, name)(ta.tensor(x), arg)
    want = getattr(torch.nn.functional, name)(torch.tensor(x), arg)
    assert isinstance(got, tuple) and len(got) == 2
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    # return_indices=False changes nothing (torch's: these always give both)
    assert len(getattr(F, name)(ta.tensor(x), arg, return_indices=False)) == 2
    _same(lambda f, a: getattr(f, name)(a, arg)[0], [x])


# ---- BatchNorm3d, InstanceNorm3d ---------------------------------------------------------------


def _pair(name, *args, **kwargs):
    theirs = getattr(torch.nn, name)(*args, **kwargs).double()
    ours = getattr(nn, name)(*args, dtype=ta.float64, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    rng = np.random.default_rng(0)
    for pname in ("weight", "bias"):
        if getattr(theirs, pname, None) is not None:
            value = rng.standard_normal(getattr(theirs, pname).shape)
            with torch.no_grad():
                getattr(theirs, pname).copy_(torch.tensor(value))
            with ta.no_grad():
                getattr(ours, pname).copy_(ta.tensor(value))
    return ours, theirs


def _step(lib, module, x):
    xx = lib.tensor(x, requires_grad=True)
    y = module(xx)
    (y * lib.tensor(np.cos(x))).sum().backward()
    grads = [p.grad.numpy() for p in module.parameters()]
    return [y.detach().numpy(), xx.grad.numpy()] + grads


def _same_steps(ours, theirs, shapes):
    rng = np.random.default_rng(1)
    for shape in shapes:
        x = rng.standard_normal(shape) * 2 + 1
        for m in (ours, theirs):
            m.zero_grad()
        for got, want in zip(_step(ta, ours, x), _step(torch, theirs, x), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)
        for (k, a), (k2, b) in zip(ours.state_dict().items(), theirs.state_dict().items(),
                                   strict=True):
            assert k == k2
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kwargs", [{}, {"momentum": None}, {"affine": False},
                                    {"track_running_stats": False}, {"bias": False}])
def test_batch_norm3d_matches_torch(kwargs):
    ours, theirs = _pair("BatchNorm3d", 3, **kwargs)
    _same_steps(ours, theirs, [(2, 3, 2, 3, 2)] * 2)
    ours.eval()
    theirs.eval()
    _same_steps(ours, theirs, [(1, 3, 3, 1, 2)])
    with pytest.raises((ValueError, RuntimeError), match="5"):
        ours(ta.ones(2, 3, 4, 4))


@pytest.mark.parametrize("kwargs", [{}, {"affine": True},
                                    {"affine": True, "track_running_stats": True},
                                    {"track_running_stats": True, "momentum": None}])
def test_instance_norm3d_matches_torch(kwargs):
    ours, theirs = _pair("InstanceNorm3d", 3, **kwargs)
    _same_steps(ours, theirs, [(2, 3, 2, 3, 2), (3, 3, 2, 2)])  # batched, unbatched
    ours.eval()
    theirs.eval()
    _same_steps(ours, theirs, [(1, 3, 3, 1, 2)])
    with pytest.raises(ValueError, match=r"InstanceNorm3d.*4D or 5D.*3D"):
        ours(ta.ones(3, 4, 4))


def test_norm3d_float32():
    x = _randn(2, 3, 2, 3, 2)
    for name in ("BatchNorm3d", "InstanceNorm3d"):
        got = getattr(nn, name)(3)(ta.tensor(x, dtype=ta.float32))
        want = getattr(torch.nn, name)(3)(torch.tensor(x, dtype=torch.float32))
        assert got.dtype == ta.float32
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


# ---- Dropout3d ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 2, 2, 3), (4, 2, 3, 2)])
def test_dropout3d_drops_whole_channels(shape):
    ta.manual_seed(0)
    x = ta.ones(*shape, dtype=ta.float64)
    y = F.dropout3d(x, 0.5)
    lead = 2 if len(shape) == 5 else 1
    per_channel = y.numpy().reshape(shape[:lead] + (-1,))
    for row in per_channel.reshape(-1, per_channel.shape[-1]):
        assert set(np.unique(row)) <= {0.0, 2.0} and len(np.unique(row)) == 1
    assert np.array_equal(F.dropout3d(x, 0.5, training=False).numpy(), x.numpy())
    m = nn.Dropout3d(0.25)
    assert repr(m) == repr(torch.nn.Dropout3d(0.25)) == "Dropout3d(p=0.25, inplace=False)"
    m.eval()
    assert np.array_equal(m(x).numpy(), x.numpy())
    m.train()
    assert set(np.unique(m(x).numpy())) <= {0.0, 1 / 0.75}


def test_dropout3d_gradient_and_inplace():
    ta.manual_seed(1)
    x = ta.randn(2, 3, 2, 2, 2, dtype=ta.float64, requires_grad=True)
    y = F.dropout3d(x, 0.4)
    y.sum().backward()
    scale = (y.detach().numpy() / x.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), scale, rtol=1e-12)
    z = ta.ones(3, 2, 2, 2)
    out = F.dropout3d(z, 0.5, inplace=True)
    assert out is z


def test_dropout3d_errors_and_warning_as_torch():
    for lib in (torch, ta):
        with pytest.raises(ValueError, match=r"between 0 and 1|in \[0, 1\]"):
            lib.nn.functional.dropout3d(lib.ones(2, 3, 2, 2, 2), 1.5)
        with pytest.raises(ValueError, match=r"between 0 and 1|in \[0, 1\]"):
            lib.nn.Dropout3d(-0.1)
        with pytest.warns(UserWarning, match="dropout3d"):
            lib.nn.functional.dropout3d(lib.ones(2, 3, 4), 0.5)


# ---- the 3-d padding modules -------------------------------------------------------------------

PAD3D = [("ReflectionPad3d", (1,)), ("ReflectionPad3d", ((1, 2, 0, 1, 2, 0),)),
         ("ReplicationPad3d", (2,)), ("ReplicationPad3d", ((1, 0, 3, 1, 0, 2),)),
         ("ZeroPad3d", (2,)), ("ZeroPad3d", ((1, 0, -1, 2, 0, 1),)),
         ("ConstantPad3d", (1, 3.5)), ("ConstantPad3d", ((1, 2, 0, 1, 2, 0), -1.0)),
         ("CircularPad3d", (1,)), ("CircularPad3d", ((2, 1, 0, 1, 1, 0),))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 3, 4, 3), (2, 3, 4, 3)])
@pytest.mark.parametrize("name,args", PAD3D)
def test_pad3d_modules_match_torch(name, args, shape, dtype):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    _same(lambda f, a: (ours if f is F else theirs)(a), [_randn(*shape)], dtype)


@pytest.mark.parametrize("name", ["ReflectionPad3d", "ReplicationPad3d", "CircularPad3d"])
def test_pad3d_modules_refuse_3d_input(name):
    with pytest.raises((NotImplementedError, ValueError)):
        getattr(torch.nn, name)(1)(torch.ones(3, 3, 3))
    with pytest.raises((NotImplementedError, ValueError)):
        getattr(nn, name)(1)(ta.ones(3, 3, 3))


def test_constant_pad3d_takes_any_leading_dims_as_torch():
    x = _randn(3, 2, 3)
    _same(lambda f, a: (nn.ZeroPad3d(1) if f is F else torch.nn.ZeroPad3d(1))(a), [x])


def test_pad_reflect_and_replicate_in_3d_match_torch():
    x = _randn(1, 2, 3, 4, 5)
    for mode in ("reflect", "replicate", "circular"):
        _same(lambda f, a, mode=mode: f.pad(a, (1, 2, 2, 1, 0, 2), mode), [x])


# ---- pdist -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [2, 1, 0, 3, 0.5, 1.5, math.inf])
@pytest.mark.parametrize("shape", [(5, 3), (4, 1), (2, 6), (1, 3)])
def test_pdist_matches_torch(shape, p, dtype):
    _same(lambda f, a: f.pdist(a, p), [_randn(*shape)], dtype)


def test_pdist_of_equal_rows_has_torchs_zero_gradient():
    x = np.array([[1.0, 2, 3], [1, 2, 3], [0, 5, 1]])
    for p in (2, 1, 3, 0.5, 0):
        _same(lambda f, a, p=p: f.pdist(a, p), [x])
    assert F.pdist(ta.ones(0, 3)).shape == (0,)


def test_pdist_refuses_what_torch_refuses():
    for lib in (torch, ta):
        f = lib.nn.functional
        with pytest.raises(RuntimeError, match="2D"):
            f.pdist(lib.ones(2, 3, 4))
        with pytest.raises(RuntimeError, match="non-negative"):
            f.pdist(lib.ones(3, 4), -1)
        with pytest.raises((RuntimeError, TypeError), match="floating"):
            f.pdist(lib.ones(3, 4, dtype=lib.int64))


# ---- nn.Buffer ---------------------------------------------------------------------------------


def test_buffer_assigned_to_a_module_is_registered():
    t = ta.arange(3.0)
    b = nn.Buffer(t, persistent=False)
    assert isinstance(b, ta.Tensor) and isinstance(b, nn.Buffer)
    assert not isinstance(b, nn.Parameter) and not b.requires_grad and b.persistent is False
    m = nn.Module()
    m.x = b
    assert m.x is b and [n for n, _ in m.named_buffers()] == ["x"]
    assert list(m.state_dict()) == []  # not persistent
    m.y = nn.Buffer(ta.zeros(2))
    assert list(m.state_dict()) == ["y"] and nn.Buffer(ta.zeros(1)).persistent is True
    m.x = ta.ones(4)  # a plain tensor over a buffer: still a buffer, still not persistent
    assert list(m.state_dict()) == ["y"] and m.x.shape == (4,)
    m.x = nn.Buffer(ta.ones(4))  # a persistent Buffer over it: persistent now
    assert list(m.state_dict()) == ["x", "y"] or list(m.state_dict()) == ["y", "x"]
    assert list(m.parameters()) == []


def test_buffer_shares_memory_and_keeps_requires_grad():
    t = ta.zeros(3)
    b = nn.Buffer(t)
    t.add_(1)
    assert b.numpy().tolist() == [1.0, 1.0, 1.0]
    assert nn.Buffer(ta.ones(2, requires_grad=True)).requires_grad
    p = nn.Buffer(nn.Parameter(ta.ones(2)))
    assert not isinstance(p, nn.Parameter) and p.requires_grad
    assert nn.Buffer().shape == (0,) and nn.Buffer().dtype == ta.float32
    assert copy.deepcopy(nn.Buffer(ta.ones(2), persistent=False)).persistent is False
    again = pickle.loads(pickle.dumps(nn.Buffer(ta.ones(2), persistent=False)))
    assert isinstance(again, nn.Buffer) and again.persistent is False


def test_buffer_follows_torchs_module_rules():
    tm, m = torch.nn.Module(), nn.Module()
    tm.register_parameter("w", torch.nn.Parameter(torch.ones(1)))
    m.w = nn.Parameter(ta.ones(1))
    with pytest.raises(TypeError):
        tm.w = torch.nn.Buffer(torch.ones(1))
    with pytest.raises(TypeError):
        m.w = nn.Buffer(ta.ones(1))
    tm.k, m.k = 5, 5
    with pytest.raises(KeyError, match="already exists"):
        tm.k = torch.nn.Buffer(torch.ones(1))
    with pytest.raises(KeyError, match="already exists"):
        m.k = nn.Buffer(ta.ones(1))
    with pytest.raises(AttributeError):
        torch.nn.Buffer([1.0])
    with pytest.raises(AttributeError):
        nn.Buffer([1.0])


def test_buffer_in_init_moves_with_the_module():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.Buffer(ta.arange(4.0), persistent=False)
            self.count = nn.Buffer(ta.tensor(0))

    m = M()
    assert list(m.state_dict()) == ["count"]
    assert m.to(ta.float64).table.dtype == ta.float64
    assert "table" in dict(m.named_buffers())


# ---- RNNBase, RNNCellBase ----------------------------------------------------------------------


def test_rnn_base_names_match_isinstance_use():
    assert isinstance(nn.LSTM(2, 3), nn.RNNBase) and isinstance(nn.GRU(2, 3), nn.RNNBase)
    assert isinstance(nn.RNN(2, 3), nn.RNNBase)
    assert isinstance(nn.GRUCell(2, 3), nn.RNNCellBase)
    assert isinstance(nn.LSTMCell(2, 3), nn.RNNCellBase)
    assert not isinstance(nn.LSTMCell(2, 3), nn.RNNBase)
    for name in ("RNNBase", "RNNCellBase", "LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d",
                 "MaxUnpool2d", "MaxUnpool3d", "BatchNorm3d", "InstanceNorm3d", "Dropout3d",
                 "ReflectionPad3d", "ReplicationPad3d", "ZeroPad3d", "ConstantPad3d",
                 "CircularPad3d", "Buffer"):
        assert name in nn.__all__ and hasattr(nn, name)
        assert hasattr(torch.nn, name)
    for name in ("lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d",
                 "max_unpool3d", "dropout3d", "pdist", "max_pool2d_with_indices",
                 "adaptive_max_pool2d_with_indices"):
        assert name in F.__all__ and hasattr(torch.nn.functional, name)


# ---- second-order gradients (composites of differentiable ops) ---------------------------------


def _torch_pdist(x, p):
    """torch.pdist as vector norms of row differences (torch's own has no second derivative)."""
    i, j = torch.triu_indices(x.shape[0], x.shape[0], 1)
    return torch.linalg.vector_norm(x[i] - x[j], ord=p, dim=1)


@pytest.mark.parametrize("fn", [
    lambda f, a: f.lp_pool2d(a, 3, 2, stride=1),
    lambda f, a: f.lp_pool1d(a.flatten(1), 2, 3, ceil_mode=True),
    lambda f, a: f.max_unpool2d(*f.max_pool2d(a, 2, return_indices=True), 2) ** 2,
    lambda f, a: f.pdist(a.flatten(1), 3) if f is F else _torch_pdist(a.flatten(1), 3),
])
def test_second_order_gradients_match_torch(fn):
    x = np.abs(_randn(2, 3, 4, 4)) + 0.2

    def grad_of_grad(lib):
        xx = lib.tensor(x, requires_grad=True)
        y = fn(lib.nn.functional, xx)
        (g,) = lib.autograd.grad((y * lib.tensor(np.cos(np.arange(y.numel())).reshape(
            tuple(y.shape)))).sum(), xx, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), xx)
        return g.detach().numpy(), gg.numpy()

    for got, want in zip(grad_of_grad(ta), grad_of_grad(torch), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)
