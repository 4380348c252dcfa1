"""The 3-d convolutions and pools against torch's: F.conv3d (stride, padding with ints, 'same'
and 'valid', dilation, groups), F.conv_transpose3d, F.max_pool3d (ceil_mode, dilation,
return_indices), F.avg_pool3d (ceil_mode, count_include_pad, divisor_override),
F.adaptive_avg_pool3d and F.adaptive_max_pool3d (with indices), and the modules Conv3d,
ConvTranspose3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d and AdaptiveMaxPool3d (parameter
shapes, state_dict names, outputs with torch's parameters loaded). Values and gradients in
float64 (tight) and float32 (~1e-5); errors of torch's type naming the function and shapes.
Sizes are small: 3-d windows are costly."""

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


# ---- conv3d ------------------------------------------------------------------------------------

CONV3D = [((2, 2, 4, 5, 4), (3, 2, 2, 3, 2), {}),
          ((1, 4, 5, 4, 6), (4, 2, 3, 2, 3), dict(stride=(2, 1, 3), padding=(1, 0, 2),
                                                  dilation=(1, 2, 1), groups=2)),
          ((2, 3, 4, 4, 4), (3, 1, 3, 3, 3), dict(padding="same", groups=3)),
          ((1, 2, 5, 4, 4), (2, 2, 2, 3, 2), dict(padding="same", dilation=(2, 1, 3))),
          ((1, 2, 3, 4, 3), (2, 2, 2, 2, 2), dict(padding="valid", stride=2)),
          ((1, 2, 3, 3, 3), (2, 2, 1, 1, 1), dict(stride=(1, 2, 3))),
          ((2, 4, 3, 5), (3, 2, 2, 2, 3), dict(padding=1))]  # unbatched


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # (torch's note on even kernels)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,kw", CONV3D)
def test_conv3d_matches_torch(xs, ws, kw, bias, dtype):
    arrays = [_randn(*xs), _randn(*ws, seed=1)] + ([_randn(ws[0], seed=2)] if bias else [])
    _same(lambda f, *a: f.conv3d(*a, **kw), arrays, dtype)


def test_conv3d_module_matches_torch():
    torch.manual_seed(0)
    theirs = torch.nn.Conv3d(4, 6, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1),
                             dilation=(2, 1, 1), groups=2).double()
    ours = nn.Conv3d(4, 6, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1),
                     groups=2, dtype=ta.float64)
    assert ours.weight.shape == tuple(theirs.weight.shape) == (6, 2, 2, 3, 2)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    bound = 1 / math.sqrt(2 * 2 * 3 * 2)
    assert np.abs(ours.weight.detach().numpy()).max() <= bound
    assert np.abs(ours.bias.detach().numpy()).max() <= bound
    ours.load_state_dict({k: ta.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = _randn(2, 4, 4, 5, 3)
    np.testing.assert_allclose(ours(ta.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-10, atol=1e-12)
    assert repr(ours) == repr(theirs)
    assert repr(nn.Conv3d(2, 2, 3, padding="same", bias=False)) == repr(
        torch.nn.Conv3d(2, 2, 3, padding="same", bias=False))


def test_conv3d_errors():
    x, w = ta.zeros(1, 2, 3, 3, 3), ta.zeros(2, 2, 2, 2, 2)
    with pytest.raises(ShapeError, match=r"conv3d.*D, H, W.*\(2, 3, 3\)"):
        F.conv3d(ta.zeros(2, 3, 3), w)
    with pytest.raises(ShapeError, match=r"conv3d.*weight"):
        F.conv3d(x, ta.zeros(2, 2, 2, 2))
    with pytest.raises(ShapeError, match=r"conv3d.*3 channels"):
        F.conv3d(ta.zeros(1, 3, 3, 3, 3), w)
    with pytest.raises(ShapeError, match=r"conv3d.*kernel"):
        F.conv3d(x, ta.zeros(2, 2, 4, 2, 2))
    with pytest.raises(ValueError, match=r"conv3d.*same"):
        F.conv3d(x, w, padding="same", stride=2)
    with pytest.raises(ValueError, match=r"conv3d.*stride"):
        F.conv3d(x, w, stride=(1, 1))
    with pytest.raises(ValueError, match=r"Conv3d.*groups"):
        nn.Conv3d(3, 2, 2, groups=2)
    for fn in (F.conv3d, torch.nn.functional.conv3d):  # torch's error types too
        lib = ta if fn is F.conv3d else torch
        with pytest.raises(RuntimeError):
            fn(lib.zeros(1, 3, 3, 3, 3), lib.zeros(2, 2, 2, 2, 2))


# ---- pools -------------------------------------------------------------------------------------

MAX3D = [((2, 2, 4, 5, 4), dict(kernel_size=2)),
         ((1, 2, 5, 5, 6), dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1))),
         ((1, 1, 5, 6, 5), dict(kernel_size=2, stride=2, ceil_mode=True)),
         ((1, 2, 6, 5, 5), dict(kernel_size=(2, 3, 2), stride=(2, 2, 3), padding=1,
                                ceil_mode=True)),
         ((1, 2, 5, 5, 5), dict(kernel_size=2, dilation=(2, 1, 2), stride=1)),
         ((2, 4, 3, 5), dict(kernel_size=(2, 2, 3), stride=1))]  # unbatched


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,kw", MAX3D)
def test_max_pool3d_matches_torch(xs, kw, dtype):
    _same(lambda f, x: f.max_pool3d(x, **kw), [_randn(*xs)], dtype)
    y, where = F.max_pool3d(ta.tensor(_randn(*xs)), return_indices=True, **kw)
    want, want_where = torch.nn.functional.max_pool3d(torch.tensor(_randn(*xs)),
                                                      return_indices=True, **kw)
    np.testing.assert_array_equal(where.numpy(), want_where.numpy())
    np.testing.assert_array_equal(y.numpy(), want.numpy())


AVG3D = [((2, 2, 4, 5, 4), dict(kernel_size=2)),
         ((1, 2, 5, 5, 6), dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1))),
         ((1, 2, 5, 5, 6), dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1),
                                count_include_pad=False)),
         ((1, 1, 5, 6, 5), dict(kernel_size=2, stride=2, ceil_mode=True)),
         ((1, 2, 6, 5, 5), dict(kernel_size=(2, 3, 2), stride=(2, 2, 3), padding=1,
                                ceil_mode=True, count_include_pad=False)),
         ((1, 2, 6, 5, 5), dict(kernel_size=(2, 3, 2), stride=(2, 2, 3), padding=1,
                                ceil_mode=True)),
         ((1, 2, 4, 4, 4), dict(kernel_size=3, stride=1, padding=1, divisor_override=5)),
         ((2, 4, 3, 5), dict(kernel_size=(2, 2, 3), stride=1))]  # unbatched


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,kw", AVG3D)
def test_avg_pool3d_matches_torch(xs, kw, dtype):
    _same(lambda f, x: f.avg_pool3d(x, **kw), [_randn(*xs)], dtype)


ADAPTIVE3D = [((2, 2, 4, 6, 4), (2, 3, 2)), ((1, 2, 5, 7, 4), (3, 4, 3)),
              ((1, 1, 5, 3, 4), (2, None, 3)), ((2, 5, 4, 3), 2), ((1, 2, 3, 4, 5), 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,size", ADAPTIVE3D)
def test_adaptive_pools3d_match_torch(xs, size, dtype):
    _same(lambda f, x: f.adaptive_avg_pool3d(x, size), [_randn(*xs)], dtype)
    _same(lambda f, x: f.adaptive_max_pool3d(x, size), [_randn(*xs)], dtype)
    _, where = F.adaptive_max_pool3d(ta.tensor(_randn(*xs)), size, return_indices=True)
    _, want = torch.nn.functional.adaptive_max_pool3d(torch.tensor(_randn(*xs)), size,
                                                      return_indices=True)
    np.testing.assert_array_equal(where.numpy(), want.numpy())


def test_pool3d_modules_match_torch():
    x = _randn(2, 2, 5, 6, 5)
    pairs = [(nn.MaxPool3d(2, stride=(1, 2, 2), padding=1, ceil_mode=True),
              torch.nn.MaxPool3d(2, stride=(1, 2, 2), padding=1, ceil_mode=True)),
             (nn.AvgPool3d((2, 3, 2), padding=1, count_include_pad=False, ceil_mode=True),
              torch.nn.AvgPool3d((2, 3, 2), padding=1, count_include_pad=False, ceil_mode=True)),
             (nn.AvgPool3d(2, divisor_override=3), torch.nn.AvgPool3d(2, divisor_override=3)),
             (nn.AdaptiveAvgPool3d((2, None, 3)), torch.nn.AdaptiveAvgPool3d((2, None, 3))),
             (nn.AdaptiveMaxPool3d(3), torch.nn.AdaptiveMaxPool3d(3))]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)
        np.testing.assert_allclose(ours(ta.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(),
                                   rtol=1e-12, atol=1e-12)
    y, where = nn.MaxPool3d(2, return_indices=True)(ta.tensor(x))
    want, want_where = torch.nn.MaxPool3d(2, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(where.numpy(), want_where.numpy())
    y, where = nn.AdaptiveMaxPool3d(2, return_indices=True)(ta.tensor(x))
    want, want_where = torch.nn.AdaptiveMaxPool3d(2, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(where.numpy(), want_where.numpy())


def test_pool3d_errors():
    x = ta.zeros(1, 2, 4, 4, 4)
    with pytest.raises(ShapeError, match=r"max_pool3d.*\(2, 4, 4\)"):
        F.max_pool3d(ta.zeros(2, 4, 4), 2)
    with pytest.raises(ValueError, match=r"max_pool3d.*padding"):
        F.max_pool3d(x, 2, padding=2)
    with pytest.raises(ValueError, match=r"avg_pool3d.*kernel_size"):
        F.avg_pool3d(x, (2, 2))
    with pytest.raises(ValueError, match=r"avg_pool3d.*divisor_override"):
        F.avg_pool3d(x, 2, divisor_override=0)
    with pytest.raises(ShapeError, match=r"avg_pool3d.*kernel"):
        F.avg_pool3d(x, (5, 1, 1), padding=0)
    with pytest.raises(ValueError, match=r"adaptive_avg_pool3d.*output_size"):
        F.adaptive_avg_pool3d(x, (2, 2))
    with pytest.raises(ShapeError, match=r"adaptive_max_pool3d"):
        F.adaptive_max_pool3d(ta.zeros(4, 4), 2)


# ---- conv_transpose3d --------------------------------------------------------------------------

CONV_T3D = [((1, 2, 3, 4, 3), (2, 3, 2, 2, 3), {}),
            ((2, 4, 3, 3, 4), (4, 1, 2, 3, 2), dict(stride=(2, 1, 2), padding=(1, 1, 0),
                                                    output_padding=(1, 0, 1), dilation=(1, 2, 1),
                                                    groups=2)),
            ((1, 2, 3, 3, 3), (2, 2, 2, 2, 2), dict(stride=3, padding=1, output_padding=2)),
            ((2, 3, 3, 2), (2, 2, 2, 2, 2), dict(stride=2))]  # unbatched


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,kw", CONV_T3D)
def test_conv_transpose3d_matches_torch(xs, ws, kw, bias, dtype):
    groups = kw.get("groups", 1)
    arrays = [_randn(*xs), _randn(*ws, seed=1)] + ([_randn(ws[1] * groups, seed=2)]
                                                   if bias else [])
    _same(lambda f, *a: f.conv_transpose3d(*a, **kw), arrays, dtype)


def test_conv_transpose3d_module_matches_torch():
    torch.manual_seed(0)
    args = dict(stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 0), groups=2)
    theirs = torch.nn.ConvTranspose3d(4, 6, (2, 3, 2), **args).double()
    ours = nn.ConvTranspose3d(4, 6, (2, 3, 2), dtype=ta.float64, **args)
    assert ours.weight.shape == tuple(theirs.weight.shape) == (4, 3, 2, 3, 2)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: ta.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = _randn(2, 4, 3, 4, 3)
    np.testing.assert_allclose(ours(ta.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-10, atol=1e-12)
    assert repr(ours) == repr(theirs)
    got = ours(ta.tensor(x), output_size=(5, 6, 4))
    want = theirs(torch.tensor(x), output_size=(5, 6, 4))
    assert got.shape == (2, 6, 5, 6, 4)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10,
                               atol=1e-12)


def test_conv_transpose3d_errors():
    x = ta.zeros(1, 2, 3, 3, 3)
    with pytest.raises(ShapeError, match=r"conv_transpose3d.*weight"):
        F.conv_transpose3d(x, ta.zeros(2, 2, 2, 2))
    with pytest.raises(ShapeError, match=r"conv_transpose3d.*channels"):
        F.conv_transpose3d(x, ta.zeros(3, 2, 2, 2, 2))
    with pytest.raises(ValueError, match=r"conv_transpose3d.*output_padding"):
        F.conv_transpose3d(x, ta.zeros(2, 2, 2, 2, 2), output_padding=1)
