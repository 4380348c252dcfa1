"""Convolution, pooling and unfold/fold against torch's: F.unfold and F.fold (torch's
(N, C*k*k, L) layout), F.conv1d / conv2d (stride, padding incl. "same"/"valid", dilation,
groups), the avg / max pools (1d and 2d, padding, count_include_pad, return_indices),
adaptive_avg_pool2d for sizes that divide, and their modules (parameter names, shapes,
torch's default init, reprs). Values and gradients in float64 (tight) and float32 (~1e-5), a
small gradcheck, and the errors that name the function and the shapes."""

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


# ---- unfold and fold -------------------------------------------------------------------------

UNFOLD = [dict(kernel_size=3), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2),
                                   stride=(2, 1)),
          dict(kernel_size=2, padding=1, stride=2), dict(kernel_size=3, dilation=2, padding=2,
                                                          stride=3)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", UNFOLD)
def test_unfold_matches_torch(kw, dtype):
    _same(lambda f, x: f.unfold(x, **kw), [_randn(2, 3, 7, 6)], dtype)


def test_unfold_of_an_unbatched_input_and_the_module():
    _same(lambda f, x: f.unfold(x, 2, stride=(1, 2)), [_randn(3, 5, 4)])
    assert repr(nn.Unfold(2)) == repr(torch.nn.Unfold(2))
    x = _randn(1, 2, 4, 4)
    np.testing.assert_allclose(nn.Unfold((2, 3), padding=1)(ta.tensor(x)).numpy(),
                               torch.nn.Unfold((2, 3), padding=1)(torch.tensor(x)).numpy())
    x = ta.zeros(1, 2, 3, 3)
    with ta.no_grad():  # 1 x 1 blocks are the input's entries, yet new memory, as torch's
        F.unfold(x, 1).add_(1)
    assert x.sum().item() == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", UNFOLD)
def test_fold_matches_torch(kw, dtype):
    blocks = torch.nn.functional.unfold(torch.zeros(2, 3, 7, 6), **kw).shape
    _same(lambda f, x: f.fold(x, (7, 6), **kw), [_randn(*blocks)], dtype)


def test_fold_of_an_unbatched_input_and_the_module():
    _same(lambda f, x: f.fold(x, 5, 2, padding=1), [_randn(8, 36)])
    assert repr(nn.Fold(4, 2)) == repr(torch.nn.Fold(4, 2))
    x = _randn(1, 8, 9)
    np.testing.assert_allclose(nn.Fold((4, 4), 2)(ta.tensor(x)).numpy(),
                               torch.nn.Fold((4, 4), 2)(torch.tensor(x)).numpy())


# ---- convolutions ----------------------------------------------------------------------------

CONV2D = [((2, 4, 7, 6), (6, 4, 3, 3), {}),
          ((2, 4, 7, 6), (6, 2, 2, 3), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2),
                                            groups=2)),
          ((1, 3, 8, 5), (2, 3, 3, 2), dict(padding="same", dilation=2)),
          ((2, 4, 5, 5), (8, 1, 3, 3), dict(padding="valid", groups=4, stride=2)),
          ((3, 2, 6, 7), (4, 2, 1, 1), dict(stride=3)),
          ((4, 9, 9), (2, 4, 4, 4), dict(padding="same"))]  # unbatched; even kernel: pads right


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # (torch's)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,kw", CONV2D)
def test_conv2d_matches_torch(xs, ws, kw, bias, dtype):
    arrays = [_randn(*xs), _randn(*ws, seed=1)] + ([_randn(ws[0], seed=2)] if bias else [])
    _same(lambda f, *a: f.conv2d(*a, **kw), arrays, dtype)


CONV1D = [((2, 4, 9), (6, 4, 3), {}),
          ((2, 4, 9), (6, 2, 2), dict(stride=2, padding=1, dilation=3, groups=2)),
          ((1, 3, 8), (2, 3, 4), dict(padding="same", dilation=2)),
          ((3, 10), (4, 3, 5), dict(padding="valid", stride=(3,)))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ws,kw", CONV1D)
def test_conv1d_matches_torch(xs, ws, kw, dtype):
    arrays = [_randn(*xs), _randn(*ws, seed=1), _randn(ws[0], seed=2)]
    _same(lambda f, *a: f.conv1d(*a, **kw), arrays, dtype)


@pytest.mark.parametrize("name,args,kw", [
    ("Conv2d", (4, 6, 3), {}), ("Conv2d", (4, 6, (2, 3)), dict(stride=2, padding=1, groups=2,
                                                               bias=False)),
    ("Conv2d", (3, 2, 3), dict(padding="same", dilation=(2, 1))),
    ("Conv1d", (4, 6, 3), dict(padding="valid")), ("Conv1d", (4, 8, 2), dict(groups=4))])
def test_conv_modules_have_torchs_parameters_init_and_repr(name, args, kw):
    ta.manual_seed(0)
    ours, theirs = getattr(nn, name)(*args, dtype=ta.float64, **kw), \
        getattr(torch.nn, name)(*args, **kw).double()
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    for attr in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
                 "groups", "padding_mode"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    fan_in = theirs.weight[0].numel()
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=√5): U(±1/√fan_in), bias the same
    for p in ours.parameters():  # (U(±b) has std b/√3; the weight has 12 entries or more)
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound
        assert p.ndim == 1 or values.std() > bound / 4
    ours.load_state_dict({k: ta.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = _randn(2, args[0], *(7, 6)[:theirs.weight.ndim - 2])
    np.testing.assert_allclose(ours(ta.tensor(x)).numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12, atol=1e-12)


# ---- pooling ---------------------------------------------------------------------------------

POOL2D = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
          dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", POOL2D)
def test_pool2d_matches_torch(kw, dtype):
    x = [_randn(2, 3, 7, 6)]
    _same(lambda f, x: f.max_pool2d(x, **kw), x, dtype)
    _same(lambda f, x: f.avg_pool2d(x, **kw), x, dtype)
    _same(lambda f, x: f.avg_pool2d(x, **kw, count_include_pad=False), x, dtype)


def test_pool_options_match_torch():
    x = [_randn(2, 3, 7, 6)]
    _same(lambda f, x: f.max_pool2d(x, 2, stride=1, padding=1, dilation=2), x)
    _same(lambda f, x: f.avg_pool2d(x, 3, padding=1, divisor_override=4), x)
    _same(lambda f, x: f.max_pool2d(x, 3), [_randn(3, 7, 6)])  # unbatched
    for kw in (dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, dilation=2)):
        ours = F.max_pool2d(ta.tensor(x[0]), return_indices=True, **kw)
        theirs = torch.nn.functional.max_pool2d(torch.tensor(x[0]), return_indices=True, **kw)
        np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
        np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
    ours = F.max_pool1d(ta.tensor(x[0][0]), 3, 2, 1, return_indices=True)
    theirs = torch.nn.functional.max_pool1d(torch.tensor(x[0][0]), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())


def test_max_pool_sends_a_tie_to_the_first_entry_as_torch():
    _same(lambda f, x: f.max_pool2d(x, 2, stride=1), [np.ones((1, 1, 3, 3))])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=4, stride=1, padding=2)])
def test_pool1d_matches_torch(kw, dtype):
    x = [_randn(2, 3, 9)]
    _same(lambda f, x: f.max_pool1d(x, **kw), x, dtype)
    _same(lambda f, x: f.avg_pool1d(x, **kw), x, dtype)
    _same(lambda f, x: f.avg_pool1d(x, **kw, count_include_pad=False), [_randn(3, 9)], dtype)


@pytest.mark.parametrize("size", [(3, 4), 2, (1, None), 1])
def test_adaptive_avg_pool2d_for_sizes_that_divide(size):
    _same(lambda f, x: f.adaptive_avg_pool2d(x, size), [_randn(2, 3, 6, 8)])
    _same(lambda f, x: f.adaptive_avg_pool2d(x, size), [_randn(3, 6, 8)], "float32")


@pytest.mark.parametrize("name,args,kw", [
    ("MaxPool2d", (2,), {}), ("MaxPool2d", (3, 2, 1), dict(dilation=1)),
    ("AvgPool2d", (2,), {}), ("AvgPool2d", ((3, 2), 1, 1), dict(count_include_pad=False)),
    ("MaxPool1d", (3,), dict(stride=2, padding=1)), ("AvgPool1d", (2,), {}),
    ("AvgPool1d", (3, 1, 1), {}), ("AdaptiveAvgPool2d", ((2, None),), {}),
    ("AdaptiveAvgPool2d", (3,), {})])
def test_pool_modules_match_torch(name, args, kw):
    ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(ours) == repr(theirs)
    x = _randn(2, 3, 6, 6) if name.endswith("2d") else _randn(2, 3, 9)
    np.testing.assert_allclose(ours(ta.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(),
                               rtol=1e-12, atol=1e-12)


def test_a_small_conv_net_trains_end_to_end():
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(4, 4, 3, groups=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(4, 2))
    x = ta.tensor(_randn(3, 1, 8, 8), dtype=ta.float32)
    y = net(x)
    assert y.shape == (3, 2) and y.dtype == ta.float32
    y.sum().backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in net.parameters())


# ---- gradcheck -------------------------------------------------------------------------------


def test_gradcheck_of_conv_pool_and_fold():
    x = ta.tensor(_randn(1, 2, 5, 4), requires_grad=True)
    w = ta.tensor(_randn(4, 1, 2, 3, seed=1), requires_grad=True)
    b = ta.tensor(_randn(4, seed=2), requires_grad=True)
    assert ta.gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1,
                                                 dilation=(1, 2), groups=2), [x, w, b])
    assert ta.gradcheck(lambda x: F.max_pool2d(x, 2, stride=1, padding=1), [x])
    assert ta.gradcheck(lambda x: F.avg_pool1d(x.flatten(2), 3, 2, 1,
                                               count_include_pad=False), [x])
    cols = ta.tensor(_randn(1, 8, 6, seed=3), requires_grad=True)
    assert ta.gradcheck(lambda c: F.fold(c, (3, 4), 2), [cols])
    w1 = ta.tensor(_randn(3, 2, 3, seed=4), requires_grad=True)
    assert ta.gradcheck(lambda x, w: F.conv1d(x.flatten(2), w, padding="same"), [x, w1])


# ---- errors ------------------------------------------------------------------------------------


def test_errors_name_the_function_and_the_shapes():
    x = ta.tensor(_randn(2, 5, 4, 4))
    with pytest.raises(ShapeError, match=r"conv2d.*\(2, 5, 4, 4\).*5 channels.*\(2, 3, 3, 3\)"):
        F.conv2d(x, ta.tensor(_randn(2, 3, 3, 3)))
    with pytest.raises(ShapeError, match=r"conv2d.*kernel.*\(3, 3\).*padded input.*\(2, 2\)"):
        F.conv2d(ta.tensor(_randn(1, 3, 2, 2)), ta.tensor(_randn(2, 3, 3, 3)))
    with pytest.raises(ShapeError, match=r"conv1d.*groups 2.*out_channels 3"):
        F.conv1d(ta.tensor(_randn(1, 4, 6)), ta.tensor(_randn(3, 2, 3)), groups=2)
    with pytest.raises(ShapeError, match=r"conv2d.*groups 3.*\(2, 5, 4, 4\)"):
        F.conv2d(x, ta.tensor(_randn(3, 2, 1, 1)), groups=3)
    with pytest.raises(ShapeError, match=r"conv2d.*bias.*\(3,\).*\(2,\)"):
        F.conv2d(x, ta.tensor(_randn(2, 5, 1, 1)), ta.tensor(_randn(3)))
    with pytest.raises(ShapeError, match=r"conv2d.*expected.*\(N, C, H, W\).*\(5, 4\)"):
        F.conv2d(ta.tensor(_randn(5, 4)), ta.tensor(_randn(2, 5, 1, 1)))
    with pytest.raises(ValueError, match="conv2d.*padding='same'.*stride"):
        F.conv2d(x, ta.tensor(_randn(2, 5, 3, 3)), stride=2, padding="same")
    with pytest.raises(ta.errors.DTypeError, match="conv2d.*float64.*weight float32"):
        F.conv2d(x, ta.tensor(_randn(2, 5, 3, 3), dtype=ta.float32))
    with pytest.raises(ShapeError, match=r"unfold.*kernel.*\(5, 5\).*\(4, 4\)"):
        F.unfold(x, 5)
    with pytest.raises(ShapeError, match=r"max_pool2d.*kernel.*\(3, 3\).*\(2, 2\)"):
        F.max_pool2d(ta.tensor(_randn(1, 1, 2, 2)), 3)
    with pytest.raises(ShapeError, match=r"conv1d.*kernel \(5,\).*padded input \(4,\)"):
        F.conv1d(ta.tensor(_randn(1, 2, 2)), ta.tensor(_randn(3, 2, 5)), padding=1)
    with pytest.raises(ValueError, match=r"avg_pool2d.*padding \(2, 2\).*half.*size \(2, 2\)"):
        F.avg_pool2d(x, 2, padding=2)
    with pytest.raises(ShapeError, match=r"fold.*\(1, 12, 3\).*9 blocks"):
        F.fold(ta.tensor(_randn(1, 12, 3)), (4, 4), 2)
    with pytest.raises(ShapeError, match=r"fold.*\(1, 10, 9\).*divisible.*4"):
        F.fold(ta.tensor(_randn(1, 10, 9)), (4, 4), 2)
    with pytest.raises(ShapeError, match=r"adaptive_avg_pool2d.*expected.*\(2, 5\)"):
        F.adaptive_avg_pool2d(ta.tensor(_randn(2, 5)), 2)


def test_what_is_not_supported_is_refused_by_name():
    x = ta.tensor(_randn(1, 2, 4, 4))  # (ceil_mode=True: tests/nn/test_conv_transpose_pools.py)
    # (reflect/replicate/circular work: tests/nn/test_conv_padding_modes_round7.py)
    with pytest.raises(ValueError, match="Conv2d.*padding_mode must be one of.*'reflekt'"):
        nn.Conv2d(2, 2, 3, padding_mode="reflekt")
    with pytest.raises(ValueError, match="Conv1d.*in_channels 3.*groups 2"):
        nn.Conv1d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="Conv2d.*out_channels 3.*groups 2"):
        nn.Conv2d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="Conv2d.*padding 'full'"):
        nn.Conv2d(4, 4, 3, padding="full")
    with pytest.raises(ValueError, match="unfold.*stride.*positive"):
        F.unfold(x, 2, stride=0)
