"""Vision and layer utilities against torch's: F.interpolate (nearest, nearest-exact, linear,
bilinear, bicubic, trilinear, area; size= or scale_factor=, recompute_scale_factor,
align_corners) and nn.Upsample / UpsamplingNearest2d / UpsamplingBilinear2d; the padding
modules (ZeroPad, ConstantPad, ReflectionPad, ReplicationPad, CircularPad 1d/2d);
pixel_shuffle / pixel_unshuffle / channel_shuffle and their modules; instance_norm and
InstanceNorm1d/2d (running statistics, state_dict names); local_response_norm; dropout1d /
dropout2d and their modules. Values and gradients in float64 (tight) and float32 (~1e-5),
and the errors that name the function and the shapes."""

import math

import numpy as np
import pytest
from torch_same import same  # (tests/support)

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn
from tinyattn.errors import ShapeError

torch = pytest.importorskip("torch")

DTYPES = {"float64": (ta.float64, torch.float64, dict(rtol=1e-12, atol=1e-12)),
          "float32": (ta.float32, torch.float32, dict(rtol=1e-5, atol=1e-5))}


def _same(fn, arrays, dtype="float64"):
    """fn(f, *inputs) (f: tinyattn's functional, then torch's) gives the same output and
    gradients in both, to this file's tolerances (torch_same.py)."""
    same(fn, arrays, DTYPES[dtype])


def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _module_same(ours, theirs, x, dtype=ta.float64):
    """The module's output (and input gradient) equals torch's module's on x."""
    _, tdtype, tol = DTYPES[str(dtype).replace("ta.", "").replace("tinyattn.", "")]
    a = ta.tensor(x, dtype=dtype, requires_grad=True)
    b = torch.tensor(x, dtype=tdtype, requires_grad=True)
    ya, yb = ours(a), theirs(b)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), **tol)
    weights = np.cos(np.arange(math.prod(yb.shape))).reshape(tuple(yb.shape))
    (ya * ta.tensor(weights, dtype=dtype)).sum().backward()
    (yb * torch.tensor(weights, dtype=yb.dtype)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)
    assert repr(ours) == repr(theirs)


# ---- interpolate -------------------------------------------------------------------------------

INTERP = [
    ((2, 3, 5), dict(size=9, mode="nearest")),
    ((2, 3, 5), dict(size=3, mode="nearest")),
    ((2, 3, 5), dict(size=10, mode="nearest")),
    ((2, 3, 7), dict(scale_factor=1.7, mode="nearest")),
    ((2, 3, 7), dict(scale_factor=0.6, mode="nearest", recompute_scale_factor=True)),
    ((2, 3, 5), dict(size=8, mode="nearest-exact")),
    ((2, 3, 6), dict(scale_factor=0.7, mode="nearest-exact")),
    ((2, 3, 5), dict(size=8, mode="linear")),
    ((2, 3, 5), dict(size=8, mode="linear", align_corners=True)),
    ((2, 3, 9), dict(size=4, mode="linear")),
    ((2, 3, 6), dict(scale_factor=1.3, mode="linear")),
    ((2, 3, 6), dict(scale_factor=1.3, mode="linear", recompute_scale_factor=True)),
    ((2, 3, 6), dict(scale_factor=1.1, mode="linear")),  # (6 -> 6: a copy)
    ((2, 3, 4), dict(size=1, mode="linear", align_corners=True)),
    ((2, 3, 4, 5), dict(size=(7, 3), mode="nearest")),
    ((2, 3, 4, 5), dict(scale_factor=2, mode="nearest")),
    ((1, 2, 5, 7), dict(scale_factor=(1.5, 0.5), mode="nearest")),
    ((1, 2, 5, 7), dict(size=(9, 4), mode="nearest-exact")),
    ((2, 3, 4, 5), dict(size=(7, 9), mode="bilinear")),
    ((2, 3, 4, 5), dict(size=(7, 9), mode="bilinear", align_corners=True)),
    ((1, 2, 8, 6), dict(size=(3, 5), mode="bilinear")),
    ((1, 2, 5, 6), dict(scale_factor=(2.5, 0.75), mode="bilinear")),
    ((1, 2, 5, 6), dict(scale_factor=(2.5, 0.75), mode="bilinear", align_corners=True)),
    ((1, 2, 5, 6), dict(scale_factor=1.4, mode="bilinear", recompute_scale_factor=True)),
    ((1, 2, 7, 6), dict(size=(3, 4), mode="area")),
    ((1, 2, 7), dict(scale_factor=0.5, mode="area")),
    ((1, 2, 3, 4, 5), dict(size=(5, 3, 7), mode="trilinear")),
    ((1, 2, 3, 4, 2), dict(scale_factor=1.5, mode="nearest")),
    ((2, 3, 5, 7), dict(size=(9, 4), mode="bicubic")),
    ((2, 3, 5, 7), dict(size=(9, 4), mode="bicubic", align_corners=True)),
    ((1, 2, 4, 4), dict(scale_factor=2.5, mode="bicubic")),
    ((1, 2, 6, 5), dict(scale_factor=0.5, mode="bicubic")),
    ((1, 2, 3, 3), dict(size=(3, 8), mode="bicubic", align_corners=True)),  # (3 -> 3: a copy)
    ((1, 1, 1, 4), dict(size=(3, 1), mode="bicubic")),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,kw", INTERP, ids=[f"{s}-{k}" for s, k in INTERP])
def test_interpolate_matches_torch(shape, kw, dtype):
    _same(lambda f, x: f.interpolate(x, **kw), [_randn(*shape)], dtype)


def test_bicubic_over_many_sizes_and_upsample_module():
    """bicubic from every size 1-6 to every size 1-12 in both dims' places (its taps reach
    past the edges, which repeat), both corner rules, against torch; nn.Upsample takes it."""
    x = np.cos(np.arange(36.0)).reshape(1, 1, 6, 6)
    for n in range(1, 7):
        for m in range(1, 13):
            for ac in (False, True):
                got = F.interpolate(ta.tensor(x[..., :n, :n]), size=(m, n), mode="bicubic",
                                    align_corners=ac)
                want = torch.nn.functional.interpolate(torch.tensor(x[..., :n, :n]),
                                                       size=(m, n), mode="bicubic",
                                                       align_corners=ac)
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    _module_same(nn.Upsample(scale_factor=1.5, mode="bicubic"),
                 torch.nn.Upsample(scale_factor=1.5, mode="bicubic"), _randn(1, 2, 4, 5))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "linear"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_source_places_match_torch_over_many_sizes(mode, align_corners):
    """Every size from 1 to 12 to every size from 1 to 25, and scale factors that land on
    rounding edges: the same source places as torch's (values of an arange, exactly)."""
    if mode != "linear" and align_corners:
        pytest.skip("align_corners is for the linear modes")
    extra = dict(align_corners=True) if align_corners else {}
    for dtype, tdtype in ((ta.float64, torch.float64), (ta.float32, torch.float32)):
        for n in range(1, 13):
            x = np.arange(n, dtype=np.float64).reshape(1, 1, n) * 3 + 1
            cases = [dict(size=m) for m in range(1, 26)] + \
                [dict(scale_factor=s) for s in (0.3, 0.5, 0.6, 0.7, 1.5, 1.7, 2.2, 3.0, 3.3)
                 if int(n * s) >= 1]
            for kw in cases:
                got = F.interpolate(ta.tensor(x, dtype=dtype), mode=mode, **kw, **extra)
                want = torch.nn.functional.interpolate(torch.tensor(x, dtype=tdtype), mode=mode,
                                                       **kw, **extra)
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-5,
                                           err_msg=f"{n} {kw} {dtype}")


def test_interpolate_integer_input_nearest_and_a_fresh_result():
    x = ta.arange(6).reshape(1, 1, 6)
    assert F.interpolate(x, size=3).tolist() == [[[0, 2, 4]]]
    y = F.interpolate(ta.ones(1, 1, 3), size=3)
    y.add_(1)
    assert y.tolist() == [[[2.0, 2.0, 2.0]]]


def test_interpolate_gradcheck():
    x = ta.tensor(_randn(1, 2, 3, 4), requires_grad=True)
    assert ta.gradcheck(lambda x: F.interpolate(x, size=(5, 3), mode="bilinear"), [x])


@pytest.mark.parametrize("call,error,fragment,torch_error", [
    (lambda f, x: f.interpolate(x, size=4, scale_factor=2), ValueError, "exactly one",
     ValueError),
    (lambda f, x: f.interpolate(x), ValueError, "exactly one", ValueError),
    (lambda f, x: f.interpolate(x, size=4, align_corners=True), ValueError, "align_corners",
     ValueError),
    (lambda f, x: f.interpolate(x, size=(4, 4)), ValueError, r"\(2, 3, 5\).*spatial",
     ValueError),
    (lambda f, x: f.interpolate(x, size=4, mode="bilinear"), NotImplementedError,
     r"3-D input \(2, 3, 5\).*bilinear mode needs 4-D", NotImplementedError),
    (lambda f, x: f.interpolate(x, size=4, mode="bicubic"), NotImplementedError,
     r"3-D input \(2, 3, 5\).*bicubic mode needs 4-D", NotImplementedError),
    (lambda f, x: f.interpolate(x, size=4, mode="cubist"), NotImplementedError, "mode",
     NotImplementedError),
    (lambda f, x: f.interpolate(x, size=0), ShapeError, r"greater than 0.*\(2, 3, 5\)",
     RuntimeError),
    (lambda f, x: f.interpolate(x, size=4, recompute_scale_factor=True), ValueError,
     "explicit", ValueError),
    (lambda f, x: f.interpolate(x[0], size=4), NotImplementedError, r"\(3, 5\)",
     NotImplementedError),
    (lambda f, x: f.interpolate(x, size=(2.5,)), TypeError, "ints", TypeError),
])
def test_interpolate_errors_as_torchs(call, error, fragment, torch_error):
    with pytest.raises(error, match=fragment):
        call(F, ta.tensor(_randn(2, 3, 5)))
    with pytest.raises(torch_error):
        call(torch.nn.functional, torch.tensor(_randn(2, 3, 5)))
    assert issubclass(error, torch_error)


def test_upsample_aliases_warn_and_match_interpolate():
    x = ta.tensor(_randn(1, 2, 3, 4))
    with pytest.warns(UserWarning, match="deprecated"):
        y = F.upsample(x, scale_factor=2, mode="bilinear")
    np.testing.assert_array_equal(y.numpy(), F.interpolate(x, scale_factor=2,
                                                           mode="bilinear").numpy())
    with pytest.warns(UserWarning, match="deprecated"):
        y = F.upsample_bilinear(x, size=(5, 6))
    want = torch.nn.functional.interpolate(torch.tensor(x.numpy()), size=(5, 6),
                                           mode="bilinear", align_corners=True)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    with pytest.warns(UserWarning, match="deprecated"):
        assert F.upsample_nearest(x, scale_factor=3).shape == (1, 2, 9, 12)


@pytest.mark.parametrize("name,args,kw,shape", [
    ("Upsample", (), dict(scale_factor=2), (1, 2, 3, 4)),
    ("Upsample", (), dict(size=(5, 7), mode="bilinear"), (1, 2, 3, 4)),
    ("Upsample", (), dict(scale_factor=1.5, mode="linear", align_corners=True), (2, 2, 5)),
    ("Upsample", (), dict(scale_factor=(2, 0.5), mode="nearest-exact"), (1, 2, 3, 4)),
    ("UpsamplingNearest2d", (), dict(scale_factor=2), (1, 2, 3, 4)),
    ("UpsamplingBilinear2d", (), dict(size=5), (1, 2, 3, 4)),
])
def test_upsample_modules_match_torch(name, args, kw, shape):
    _module_same(getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw),
                 _randn(*shape))
    assert getattr(nn, name)(*args, **kw).state_dict() == {}


# ---- padding modules ---------------------------------------------------------------------------

PADS = [
    ("ZeroPad1d", (2,), (2, 3, 4)),
    ("ZeroPad1d", ((1, -2),), (3, 5)),
    ("ZeroPad2d", (1,), (2, 3, 4, 5)),
    ("ZeroPad2d", ((1, 0, 2, 3),), (3, 4, 5)),
    ("ConstantPad1d", (2, 3.5), (2, 3, 4)),
    ("ConstantPad2d", ((0, 1, 2, 1), -1.0), (2, 3, 4, 5)),
    ("ReflectionPad1d", (3,), (2, 3, 4)),
    ("ReflectionPad1d", ((1, 2),), (3, 5)),
    ("ReflectionPad2d", (2,), (2, 3, 4, 5)),
    ("ReflectionPad2d", ((3, 0, 1, 2),), (3, 4, 5)),
    ("ReplicationPad1d", ((2, 5),), (2, 3, 4)),
    ("ReplicationPad2d", (3,), (1, 2, 3, 2)),
    ("CircularPad1d", ((1, 3),), (2, 3, 4)),
    ("CircularPad2d", ((1, 2, 3, 0),), (2, 3, 4, 5)),
    ("CircularPad2d", (2,), (3, 4, 5)),
]


@pytest.mark.parametrize("dtype", [ta.float64, ta.float32])
@pytest.mark.parametrize("name,args,shape", PADS, ids=[f"{p[0]}-{p[1]}" for p in PADS])
def test_padding_modules_match_torch(name, args, shape, dtype):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert ours.padding == theirs.padding
    _module_same(ours, theirs, _randn(*shape), dtype)
    assert ours.state_dict() == {}


def test_padding_refusals_as_torchs():
    x = ta.tensor(_randn(2, 3, 4))
    with pytest.raises(ShapeError, match=r"reflect.*\(4, 0\).*size 4.*\(2, 3, 4\)"):
        nn.ReflectionPad1d((4, 0))(x)
    with pytest.raises(RuntimeError):
        torch.nn.ReflectionPad1d((4, 0))(torch.tensor(x.numpy()))
    with pytest.raises(ValueError, match=r"CircularPad2d.*3D or 4D.*2D"):
        nn.CircularPad2d(1)(x[0])
    with pytest.raises(ValueError, match="3D or 4D"):
        torch.nn.CircularPad2d(1)(torch.tensor(x.numpy()[0]))
    with pytest.raises(ShapeError, match=r"circular.*\(5, 0\)"):
        nn.CircularPad1d((5, 0))(x)


# ---- pixel and channel shuffles ----------------------------------------------------------------

SHUFFLES = [
    ("pixel_shuffle", (2, 8, 3, 4), 2),
    ("pixel_shuffle", (9, 2, 3), 3),
    ("pixel_shuffle", (2, 2, 4, 1, 2), 2),
    ("pixel_shuffle", (1, 3, 2, 2), 1),
    ("pixel_unshuffle", (2, 3, 4, 6), 2),
    ("pixel_unshuffle", (2, 6, 3), 3),
    ("pixel_unshuffle", (2, 1, 2, 4, 2), 2),
    ("channel_shuffle", (2, 6, 3, 2), 3),
    ("channel_shuffle", (2, 6, 5), 2),
    ("channel_shuffle", (1, 4, 2, 2, 2), 4),
    ("channel_shuffle", (2, 4, 3), 1),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,shape,r", SHUFFLES, ids=[f"{s[0]}-{s[1]}-{s[2]}" for s in SHUFFLES])
def test_shuffles_match_torch(name, shape, r, dtype):
    _same(lambda f, x: getattr(f, name)(x, r), [_randn(*shape)], dtype)


def test_shuffle_results_are_new_memory_and_invert_each_other():
    x = ta.tensor(_randn(2, 4, 3))
    before = x.numpy().copy()
    for y in (F.channel_shuffle(x, 1), F.pixel_shuffle(x, 1), F.pixel_unshuffle(x, 1)):
        y.add_(1.0)
        np.testing.assert_array_equal(x.numpy(), before)
    z = ta.tensor(_randn(2, 8, 3, 5))
    np.testing.assert_array_equal(F.pixel_unshuffle(F.pixel_shuffle(z, 2), 2).numpy(),
                                  z.numpy())


@pytest.mark.parametrize("name,args,shape", [
    ("PixelShuffle", (2,), (2, 8, 3, 4)), ("PixelUnshuffle", (2,), (2, 2, 4, 6)),
    ("ChannelShuffle", (2,), (2, 6, 3, 3))])
def test_shuffle_modules_match_torch(name, args, shape):
    _module_same(getattr(nn, name)(*args), getattr(torch.nn, name)(*args), _randn(*shape))


@pytest.mark.parametrize("call,fragment", [
    (lambda f, x: f.pixel_shuffle(x, 2), r"\(2, 6, 4, 4\).*divisible by upscale_factor"),
    (lambda f, x: f.pixel_shuffle(x, 0), "positive"),
    (lambda f, x: f.pixel_shuffle(x[0, 0], 2), r"at least 3 dims.*\(4, 4\)"),
    (lambda f, x: f.pixel_unshuffle(x, 3), r"divisible by downscale_factor 3"),
    (lambda f, x: f.channel_shuffle(x, 4), r"6 channels.*\(2, 6, 4, 4\).*groups 4"),
    (lambda f, x: f.channel_shuffle(x, 0), "positive"),
    (lambda f, x: f.channel_shuffle(x[0, 0], 2), "at least 3 dims"),
])
def test_shuffle_errors_as_torchs(call, fragment):
    with pytest.raises(ShapeError, match=fragment):
        call(F, ta.tensor(_randn(2, 6, 4, 4)))
    with pytest.raises(RuntimeError):
        call(torch.nn.functional, torch.tensor(_randn(2, 6, 4, 4)))


# ---- instance norm -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,affine", [((2, 3, 5), False), ((2, 3, 5), True),
                                          ((2, 3, 4, 3), True), ((1, 2, 2, 2, 3), False)])
def test_instance_norm_matches_torch(shape, affine, dtype):
    c = shape[1]
    arrays = [_randn(*shape)] + ([_randn(c, seed=1), _randn(c, seed=2)] if affine else [])
    _same(lambda f, x, *wb: f.instance_norm(x, None, None, *wb, eps=1e-3), arrays, dtype)


def test_instance_norm_running_stats_move_as_torchs():
    x = _randn(3, 4, 6)
    stats = {lib: [lib.tensor(_randn(4, seed=1), dtype=d), lib.tensor(np.ones(4) * 2, dtype=d)]
             for lib, d in ((ta, ta.float64), (torch, torch.float64))}
    for lib in (ta, torch):
        lib.nn.functional.instance_norm(lib.tensor(x), *stats[lib], momentum=0.3)
    for a, b in zip(stats[ta], stats[torch], strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    got = F.instance_norm(ta.tensor(x), *stats[ta], use_input_stats=False)
    want = torch.nn.functional.instance_norm(torch.tensor(x), *stats[torch],
                                             use_input_stats=False)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,kw,shape", [
    ("InstanceNorm1d", {}, (2, 3, 5)),
    ("InstanceNorm1d", dict(affine=True), (3, 5)),
    ("InstanceNorm2d", dict(affine=True, track_running_stats=True, momentum=0.2), (2, 3, 4, 4)),
    ("InstanceNorm2d", dict(track_running_stats=True, momentum=None), (3, 4, 4)),
    ("InstanceNorm2d", dict(affine=True, bias=False, eps=1e-3), (2, 3, 2, 5)),
])
def test_instance_norm_modules_match_torch(name, kw, shape):
    theirs = getattr(torch.nn, name)(3, **kw).double()
    ours = getattr(nn, name)(3, dtype=ta.float64, **kw)
    for p in theirs.parameters():  # (torch's start is ones and zeros: something else)
        p.data.uniform_(0.5, 1.5)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: ta.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    for mode in ("train", "eval"):
        getattr(ours, mode)(), getattr(theirs, mode)()
        _module_same(ours, theirs, _randn(*shape, seed=len(mode)))
        for k, v in theirs.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-12,
                                       atol=1e-12, err_msg=k)


def test_instance_norm_errors_as_torchs():
    with pytest.raises(ValueError, match=r"InstanceNorm2d.*3D or 4D.*2D"):
        nn.InstanceNorm2d(3)(ta.ones(3, 4))
    with pytest.raises(ValueError, match="match num_features"):
        nn.InstanceNorm1d(3, affine=True)(ta.ones(2, 4, 5))
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm1d(3)(ta.tensor(_randn(2, 4, 5)))
    with pytest.raises(ValueError, match=r"more than 1 spatial element.*\(2, 3, 1\)"):
        F.instance_norm(ta.ones(2, 3, 1))
    with pytest.raises(ValueError):
        torch.nn.functional.instance_norm(torch.ones(2, 3, 1))
    with pytest.raises(ShapeError, match=r"weight should contain 3.*\(2, 3, 4\)"):
        F.instance_norm(ta.tensor(_randn(2, 3, 4)), weight=ta.ones(2))


# ---- channel dropout ---------------------------------------------------------------------------


@pytest.mark.parametrize("fn,shape", [(F.dropout1d, (40, 30, 8)), (F.dropout1d, (300, 5)),
                                      (F.dropout2d, (30, 40, 3, 3))])
def test_channel_dropout_zeroes_whole_channels_and_scales_the_rest(fn, shape):
    ta.manual_seed(0)
    x = ta.tensor(np.abs(_randn(*shape)) + 0.1, requires_grad=True)
    y = fn(x, p=0.3)
    lead = 2 if len(shape) > 2 else 1
    kept = (y.detach().numpy() != 0).reshape(shape[:lead] + (-1,))
    assert (kept.all(-1) | ~kept.any(-1)).all()  # whole channels
    assert 0.6 < kept.all(-1).mean() < 0.8  # ~ 1 - p
    np.testing.assert_allclose(y.detach().numpy()[y.detach().numpy() != 0],
                               x.detach().numpy()[y.detach().numpy() != 0] / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (y.detach().numpy() != 0) / 0.7, rtol=1e-6)
    assert fn(x, p=0.3, training=False) is x
    assert (fn(x, p=1.0).numpy() == 0).all()


def test_channel_dropout_modules_inplace_eval_and_errors():
    m = nn.Dropout2d(0.5)
    assert repr(m) == repr(torch.nn.Dropout2d(0.5))
    assert repr(nn.Dropout1d()) == repr(torch.nn.Dropout1d())
    x = ta.ones(4, 6, 2, 2)
    m.eval()
    assert m(x) is x
    m.train()
    y = nn.Dropout1d(0.5, inplace=True)(x[:, :, 0])
    assert set(np.unique(y.numpy())) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="probability"):
        nn.Dropout1d(1.5)
    with pytest.raises(ShapeError, match=r"dropout1d.*\(4, 6, 2, 2\)"):
        F.dropout1d(x)
    with pytest.raises(RuntimeError):
        torch.nn.functional.dropout1d(torch.ones(4, 6, 2, 2))
    with pytest.warns(UserWarning, match="3D input to dropout2d"):
        F.dropout2d(ta.ones(2, 3, 4))
