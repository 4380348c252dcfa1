"""Transposed convolutions, ceil_mode pools and adaptive pools against torch's: F.conv_transpose1d
/ conv_transpose2d (stride, padding, output_padding, groups, dilation) and nn.ConvTranspose1d /
2d (parameter shapes, names, init, repr, forward's output_size); ceil_mode=True for the max and
avg pools (the ragged last window, count_include_pad, divisor_override); adaptive_max_pool1d /
2d (with indices), adaptive_avg_pool1d and adaptive_avg_pool2d for sizes that do not divide,
and their modules. Values and gradients in float64 (tight) and float32 (~1e-5), and the errors
that name the function and the shapes."""

import itertools
import math

import numpy as np
import pytest
from torch_same import same  # (tests/support)

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn
from tinyattn.errors import ShapeError

torch = pytest.importorskip("torch")

DTYPES = {"float64": (ta.float64, torch.float64, dict(rtol=1e-10, atol=1e-12)),
          "float32": (ta.float32, torch.float32, dict(rtol=1e-5, atol=1e-5))}


def _same(fn, arrays, dtype="float64"):
    """fn(f, *inputs) (f: tinyattn's functional, then torch's) gives the same output and
    gradients in both, to this file's tolerances (torch_same.py)."""
    same(fn, arrays, DTYPES[dtype])


def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---- transposed convolutions -------------------------------------------------------------------

CONV_T2D = [((2, 4, 5, 4), (4, 3, 3, 3), {}),
            ((2, 4, 5, 4), (4, 2, 2, 3), dict(stride=(2, 1), padding=(1, 2), output_padding=(1, 0),
                                              dilation=(1, 2), groups=2)),
            ((1, 3, 4, 6), (3, 2, 3, 2), dict(stride=3, padding=1, output_padding=2)),
            ((2, 6, 3, 3), (6, 1, 3, 3), dict(stride=2, groups=6, output_padding=1)),
            ((1, 2, 4, 3), (2, 3, 2, 2), dict(dilation=3, output_padding=(2, 1), padding=(0, 2))),
            ((1, 2, 3, 3), (2, 2, 3, 3), dict(padding=1, output_padding=(0, 1), dilation=2)),
            ((1, 2, 4, 3), (2, 2, 1, 1), dict(stride=2, padding=(1, 0))),
            ((4, 3, 5), (4, 2, 2, 3), dict(stride=2, padding=1))]  # unbatched


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,kw", CONV_T2D)
def test_conv_transpose2d_matches_torch(xs, ws, kw, bias, dtype):
    groups = kw.get("groups", 1)
    arrays = [_randn(*xs), _randn(*ws, seed=1)] + ([_randn(ws[1] * groups, seed=2)]
                                                   if bias else [])
    _same(lambda f, *a: f.conv_transpose2d(*a, **kw), arrays, dtype)


CONV_T1D = [((2, 4, 6), (4, 3, 3), {}),
            ((2, 4, 6), (4, 3, 2), dict(stride=3, padding=1, output_padding=2, groups=2,
                                        dilation=2)),
            ((1, 3, 5), (3, 2, 4), dict(padding=3, output_padding=1, dilation=2)),
            ((3, 7), (3, 4, 5), dict(stride=(2,), padding=(2,), output_padding=(1,)))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ws,kw", CONV_T1D)
def test_conv_transpose1d_matches_torch(xs, ws, kw, dtype):
    groups = kw.get("groups", 1)
    arrays = [_randn(*xs), _randn(*ws, seed=1), _randn(ws[1] * groups, seed=2)]
    _same(lambda f, *a: f.conv_transpose1d(*a, **kw), arrays, dtype)


def test_conv_transpose_is_the_gradient_of_conv_by_its_input():
    x = ta.tensor(_randn(2, 4, 7, 6), requires_grad=True)
    w = ta.tensor(_randn(6, 2, 3, 2, seed=1))
    g = ta.tensor(_randn(2, 6, 4, 4, seed=2))
    kw = dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
    (F.conv2d(x, w, **kw) * g).sum().backward()
    np.testing.assert_allclose(F.conv_transpose2d(g, w, output_padding=(0, 0), **kw).numpy(),
                               x.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_gradcheck_of_conv_transpose():
    x = ta.tensor(_randn(1, 2, 3, 2), requires_grad=True)
    w = ta.tensor(_randn(2, 2, 2, 3, seed=1), requires_grad=True)
    b = ta.tensor(_randn(4, seed=2), requires_grad=True)
    assert ta.gradcheck(lambda x, w, b: F.conv_transpose2d(
        x, w, b, stride=2, padding=(1, 0), output_padding=1, groups=2, dilation=(1, 2)),
        [x, w, b])


@pytest.mark.parametrize("name,args,kw", [
    ("ConvTranspose2d", (4, 6, 3), {}),
    ("ConvTranspose2d", (4, 6, (2, 3)), dict(stride=2, padding=1, output_padding=1, groups=2,
                                             bias=False)),
    ("ConvTranspose2d", (3, 2, 3), dict(dilation=(2, 1), output_padding=(1, 0))),
    ("ConvTranspose1d", (4, 6, 3), dict(stride=3, padding=2)),
    ("ConvTranspose1d", (4, 8, 2), dict(groups=4))])
def test_conv_transpose_modules_have_torchs_parameters_init_and_repr(name, args, kw):
    ta.manual_seed(0)
    ours, theirs = getattr(nn, name)(*args, dtype=ta.float64, **kw), \
        getattr(torch.nn, name)(*args, **kw).double()
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    for attr in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
                 "groups", "padding_mode", "output_padding", "transposed"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    bound = 1 / math.sqrt(theirs.weight[0].numel())  # fan_in: out/groups * prod(kernel)
    for p in ours.parameters():
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound
        assert p.ndim == 1 or values.std() > bound / 4
    ours.load_state_dict({k: ta.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = _randn(2, args[0], *(5, 4)[:theirs.weight.ndim - 2])
    np.testing.assert_allclose(ours(ta.tensor(x)).numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12, atol=1e-12)


def test_conv_transpose_forward_takes_an_output_size_as_torch():
    ours = nn.ConvTranspose2d(3, 2, 3, stride=(3, 2), padding=1, dtype=ta.float64)
    theirs = torch.nn.ConvTranspose2d(3, 2, 3, stride=(3, 2), padding=1).double()
    ours.load_state_dict({k: ta.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = _randn(2, 3, 4, 5)
    for size in [(10, 9), (12, 10), [2, 2, 11, 10], (10, 10)]:
        want = theirs(torch.tensor(x), output_size=size).detach().numpy()
        got = ours(ta.tensor(x), output_size=size).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"ConvTranspose2d.*output size.*\(13, 9\).*\(10, 9\)"
                                         r".*\(12, 10\)"):
        ours(ta.tensor(x), output_size=(13, 9))
    one = nn.ConvTranspose1d(3, 2, 2, stride=2, dtype=ta.float64)
    assert one(ta.tensor(_randn(3, 4)), output_size=[9]).shape == (2, 9)


def test_conv_transpose_errors_name_the_function_and_the_shapes():
    x = ta.tensor(_randn(2, 4, 3, 3))
    with pytest.raises(ShapeError, match=r"conv_transpose2d.*\(2, 4, 3, 3\).*4 channels.*"
                                         r"\(3, 2, 2, 2\)"):
        F.conv_transpose2d(x, ta.tensor(_randn(3, 2, 2, 2)))
    with pytest.raises(ShapeError, match=r"conv_transpose2d.*groups 3.*\(2, 4, 3, 3\)"):
        F.conv_transpose2d(x, ta.tensor(_randn(4, 2, 2, 2)), groups=3)
    with pytest.raises(ShapeError, match=r"conv_transpose1d.*weight.*\(4, 2, 2, 2\)"):
        F.conv_transpose1d(ta.tensor(_randn(1, 4, 3)), ta.tensor(_randn(4, 2, 2, 2)))
    with pytest.raises(ShapeError, match=r"conv_transpose2d.*bias \(3,\).*\(4,\)"):
        F.conv_transpose2d(x, ta.tensor(_randn(4, 2, 2, 2)), ta.tensor(_randn(3)), groups=2)
    with pytest.raises(ShapeError, match=r"conv_transpose2d.*expected.*\(N, C, H, W\).*\(4, 3\)"):
        F.conv_transpose2d(ta.tensor(_randn(4, 3)), ta.tensor(_randn(4, 2, 2, 2)))
    with pytest.raises(ValueError, match=r"conv_transpose2d.*output_padding \(0, 2\).*stride "
                                         r"\(1, 2\).*dilation \(1, 1\)"):
        F.conv_transpose2d(x, ta.tensor(_randn(4, 2, 2, 2)), stride=(1, 2), output_padding=(0, 2))
    with pytest.raises(ShapeError, match=r"conv_transpose1d.*\(1, 4, 1\).*output.*\(-3,\)"):
        F.conv_transpose1d(ta.tensor(_randn(1, 4, 1)), ta.tensor(_randn(4, 2, 1)), padding=2)
    with pytest.raises(ta.errors.DTypeError, match="conv_transpose2d.*float64.*weight float32"):
        F.conv_transpose2d(x, ta.tensor(_randn(4, 2, 2, 2), dtype=ta.float32))
    with pytest.raises(ValueError, match="ConvTranspose2d.*padding_mode='reflect'"):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="ConvTranspose1d.*out_channels 3.*groups 2"):
        nn.ConvTranspose1d(4, 3, 3, groups=2)
    module = nn.ConvTranspose2d(4, 4, 3, output_padding=1)  # (torch's forward refuses it: an
    with pytest.raises(ValueError, match="conv_transpose2d.*output_padding.*stride"):  # output
        module(ta.zeros(1, 4, 2, 2))  # size given to forward would replace it)
    assert module(ta.zeros(1, 4, 2, 2), output_size=(4, 4)).shape == (1, 4, 4, 4)


# ---- ceil_mode -------------------------------------------------------------------------------


def _ceil_cases(dtype):
    """(length, kernel, stride, padding, dilation) for which torch's ceil_mode pools run (the
    avg pools take those with dilation 1, where padding is at most half the kernel): every
    fourth of the grid in float64, every ninth in float32 (the whole grid passes; this keeps
    the file fast)."""
    grid = [(n, k, s, p, d) for n, k, s, p, d in
            itertools.product((4, 5, 7), (2, 3, 4), (1, 2, 3), (0, 1, 2), (1, 2))
            if 2 * p <= min(k, d * (k - 1) + 1) and n + 2 * p >= d * (k - 1) + 1]
    return grid[::4 if dtype == "float64" else 9]


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_pool_ceil_mode_matches_torch(dtype):
    for n, k, s, p, d in _ceil_cases(dtype):
        _same(lambda f, x, a=(k, s, p, d): f.max_pool1d(x, *a, ceil_mode=True),
              [_randn(2, 2, n, seed=n)], dtype)
    for (h, k, s, p, d), w in zip(_ceil_cases(dtype), itertools.cycle((5, 6, 7))):
        kw = dict(kernel_size=(k, 2), stride=(s, 2), padding=(p, 1), dilation=(d, 1))
        _same(lambda f, x, kw=kw: f.max_pool2d(x, ceil_mode=True, **kw), [_randn(1, 2, h, w)],
              dtype)
    x = _randn(2, 3, 7, 6)
    ours = F.max_pool2d(ta.tensor(x), 3, 2, 1, ceil_mode=True, return_indices=True)
    theirs = torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1, ceil_mode=True,
                                            return_indices=True)
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool_ceil_mode_matches_torch(count_include_pad, dtype):
    cases = sorted({(n, k, s, p) for n, k, s, p, _ in _ceil_cases(dtype)})  # (no dilation)
    for n, k, s, p in cases:
        _same(lambda f, x, a=(k, s, p): f.avg_pool1d(x, *a, ceil_mode=True,
                                                     count_include_pad=count_include_pad),
              [_randn(2, n, seed=n)], dtype)
    for (h, k, s, p), w, divisor in zip(cases, itertools.cycle((6, 7, 5)),
                                        itertools.cycle((None, None, 5))):
        kw = dict(kernel_size=(k, 3), stride=(s, 2), padding=(p, 1),
                  count_include_pad=count_include_pad, divisor_override=divisor)
        _same(lambda f, x, kw=kw: f.avg_pool2d(x, ceil_mode=True, **kw), [_randn(1, 2, h, w)],
              dtype)


@pytest.mark.parametrize("name,args,kw", [
    ("MaxPool2d", (3, 2), dict(ceil_mode=True)), ("MaxPool1d", (2, 2, 1), dict(ceil_mode=True)),
    ("AvgPool2d", (3, 2, 1), dict(ceil_mode=True, count_include_pad=False)),
    ("AvgPool1d", (2,), dict(ceil_mode=True))])
def test_ceil_mode_pool_modules_match_torch(name, args, kw):
    ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(ours) == repr(theirs)
    x = _randn(2, 3, 7, 6) if name.endswith("2d") else _randn(2, 3, 9)
    np.testing.assert_allclose(ours(ta.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(),
                               rtol=1e-12, atol=1e-12)


# ---- adaptive pools --------------------------------------------------------------------------

ADAPTIVE2D = [(3, 5), (4, 4), 5, (1, None), (7, 2), (None, 3)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", ADAPTIVE2D)
def test_adaptive_pool2d_of_any_size_matches_torch(size, dtype):
    x = [_randn(2, 3, 7, 6)]
    _same(lambda f, x: f.adaptive_avg_pool2d(x, size), x, dtype)
    _same(lambda f, x: f.adaptive_max_pool2d(x, size), x, dtype)
    _same(lambda f, x: f.adaptive_max_pool2d(x, size), [_randn(3, 5, 9)], dtype)  # unbatched


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", [1, 3, 4, (5,), 9])
def test_adaptive_pool1d_matches_torch(size, dtype):
    x = [_randn(2, 3, 9)]
    _same(lambda f, x: f.adaptive_avg_pool1d(x, size), x, dtype)
    _same(lambda f, x: f.adaptive_max_pool1d(x, size), x, dtype)
    _same(lambda f, x: f.adaptive_avg_pool1d(x, size), [_randn(3, 7)], dtype)


def test_adaptive_max_pool_indices_and_ties_match_torch():
    x = _randn(2, 3, 7, 6)
    for size in [(3, 4), 5, (2, None)]:
        ours = F.adaptive_max_pool2d(ta.tensor(x), size, return_indices=True)
        theirs = torch.nn.functional.adaptive_max_pool2d(torch.tensor(x), size, True)
        np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
        np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
    ours = F.adaptive_max_pool1d(ta.tensor(x[0]), 4, return_indices=True)
    theirs = torch.nn.functional.adaptive_max_pool1d(torch.tensor(x[0]), 4, True)
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
    _same(lambda f, x: f.adaptive_max_pool2d(x, (2, 3)), [np.ones((1, 1, 5, 5))])  # ties


@pytest.mark.parametrize("name,args,kw", [
    ("AdaptiveMaxPool2d", ((3, None),), {}), ("AdaptiveMaxPool2d", (4,), {}),
    ("AdaptiveMaxPool1d", (4,), {}), ("AdaptiveAvgPool1d", (4,), {}),
    ("AdaptiveAvgPool2d", ((5, 4),), {}), ("AdaptiveMaxPool2d", (2,), dict(return_indices=True)),
    ("AdaptiveMaxPool1d", (3,), dict(return_indices=True))])
def test_adaptive_pool_modules_match_torch(name, args, kw):
    ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(ours) == repr(theirs)
    x = _randn(2, 3, 7, 6) if name.endswith("2d") else _randn(2, 3, 9)
    got, want = ours(ta.tensor(x)), theirs(torch.tensor(x))
    for a, b in zip(got, want, strict=True) if kw else [(got, want)]:
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


def test_adaptive_pool_errors_name_the_function_and_the_shapes():
    with pytest.raises(ShapeError, match=r"adaptive_max_pool2d.*expected.*\(N, C, H, W\).*\(5,\)"):
        F.adaptive_max_pool2d(ta.tensor(_randn(5)), 2)
    with pytest.raises(ShapeError, match=r"adaptive_avg_pool1d.*expected.*\(N, C, L\).*"
                                         r"\(1, 2, 3, 4\)"):
        F.adaptive_avg_pool1d(ta.tensor(_randn(1, 2, 3, 4)), 2)
    with pytest.raises(ValueError, match=r"adaptive_max_pool1d.*output_size.*\(2, 2\)"):
        F.adaptive_max_pool1d(ta.tensor(_randn(1, 2, 6)), (2, 2))
    with pytest.raises(ValueError, match=r"adaptive_avg_pool2d.*output_size.*positive"):
        F.adaptive_avg_pool2d(ta.tensor(_randn(1, 2, 6, 6)), (0, 2))
