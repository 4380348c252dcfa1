"""The spatial ops against torch's: F.affine_grid, F.grid_sample (every mode x padding_mode x
align_corners, 4-D and 5-D, grids reaching outside [-1, 1]; gradients to input and grid),
F.fractional_max_pool2d/3d and nn.FractionalMaxPool2d/3d (the same _random_samples give the
same values, indices and gradients), and nn.AdaptiveLogSoftmaxWithLoss with torch's weights
(output, loss, log_prob, predict and every gradient). Values and gradients in float64, tight;
gradcheck (and gradgradcheck where second order is smooth) on small sizes; errors of torch's
type naming the function."""

import itertools
import warnings

import numpy as np
import pytest
from torch_same import same  # (tests/support)

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

torch = pytest.importorskip("torch")

F64 = (ta.float64, torch.float64, dict(rtol=1e-10, atol=1e-12))
F32 = (ta.float32, torch.float32, dict(rtol=1e-5, atol=1e-5))


def _rng(seed=0):
    return np.random.default_rng(seed)


def _grid(*shape, seed=1, reach=1.4):
    """Sample coordinates spread over [-reach, reach]: some fall outside the image."""
    return _rng(seed).uniform(-reach, reach, shape)


# ---- grid_sample -------------------------------------------------------------------------------

MODES_2D = list(itertools.product(["bilinear", "nearest", "bicubic"],
                                  ["zeros", "border", "reflection"], [True, False]))
MODES_3D = list(itertools.product(["bilinear", "nearest"], ["zeros", "border", "reflection"],
                                  [True, False]))


@pytest.mark.parametrize("mode,padding_mode,align_corners", MODES_2D)
def test_grid_sample_2d_matches_torch(mode, padding_mode, align_corners):
    arrays = [_rng().standard_normal((2, 3, 5, 6)), _grid(2, 4, 7, 2)]
    same(lambda f, x, g: f.grid_sample(x, g, mode=mode, padding_mode=padding_mode,
                                       align_corners=align_corners), arrays, F64)


@pytest.mark.parametrize("mode,padding_mode,align_corners", MODES_3D)
def test_grid_sample_3d_matches_torch(mode, padding_mode, align_corners):
    arrays = [_rng().standard_normal((2, 2, 3, 4, 5)), _grid(2, 2, 3, 4, 3, seed=2)]
    same(lambda f, x, g: f.grid_sample(x, g, mode=mode, padding_mode=padding_mode,
                                       align_corners=align_corners), arrays, F64)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_float32_and_unit_sizes_match_torch(mode):
    # a 1-wide input (reflection's empty span under align_corners) and float32
    for shape, align in [((1, 2, 1, 4), True), ((1, 2, 3, 1), False), ((2, 1, 4, 4), False)]:
        arrays = [_rng(3).standard_normal(shape), _grid(shape[0], 3, 2, 2, seed=4)]
        for pm in ("zeros", "border", "reflection"):
            for dtypes in (F64, F32):
                same(lambda f, x, g, pm=pm, align=align: f.grid_sample(x, g, mode, pm, align),
                     arrays, dtypes)


def test_grid_sample_on_affine_grid_hits_the_borders_as_torch():
    # align_corners=True and the identity: samples exactly on pixel centres and borders,
    # where torch counts a border as outside for the gradient
    theta = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    x = _rng(5).standard_normal((1, 2, 4, 5))
    for mode, pm in itertools.product(["bilinear", "bicubic"], ["border", "reflection"]):
        same(lambda f, x, t, mode=mode, pm=pm: f.grid_sample(
            x, f.affine_grid(t, (1, 2, 4, 5), True), mode, pm, True), [x, theta], F64)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_gradcheck(mode, padding_mode):
    x = ta.tensor(_rng(6).standard_normal((1, 2, 3, 4)), requires_grad=True)
    g = ta.tensor(_grid(1, 2, 3, 2, seed=7), requires_grad=True)
    for align in (True, False):
        assert ta.autograd.gradcheck(
            lambda x, g, align=align: F.grid_sample(x, g, mode, padding_mode, align), (x, g))


def test_grid_sample_gradgradcheck_and_3d_gradcheck():
    x = ta.tensor(_rng(8).standard_normal((1, 2, 3, 4)), requires_grad=True)
    g = ta.tensor(_grid(1, 2, 2, 2, seed=9), requires_grad=True)
    assert ta.autograd.gradgradcheck(
        lambda x, g: F.grid_sample(x, g, "bilinear", "zeros", False), (x, g))
    x3 = ta.tensor(_rng(10).standard_normal((1, 1, 2, 3, 3)), requires_grad=True)
    g3 = ta.tensor(_grid(1, 1, 2, 2, 3, seed=11), requires_grad=True)
    for pm in ("zeros", "border", "reflection"):
        assert ta.autograd.gradcheck(
            lambda x, g, pm=pm: F.grid_sample(x, g, "bilinear", pm, True), (x3, g3))
        assert ta.autograd.gradcheck(
            lambda x, pm=pm: F.grid_sample(x, g3, "nearest", pm, False), (x3,))


def test_grid_sample_errors_as_torch():
    x, g = ta.zeros(1, 2, 3, 4), ta.zeros(1, 2, 2, 2)
    with pytest.raises(ValueError, match="grid_sample.*mode"):
        F.grid_sample(x, g, mode="linear", align_corners=False)
    with pytest.raises(ValueError, match="grid_sample.*padding_mode"):
        F.grid_sample(x, g, padding_mode="circular", align_corners=False)
    with pytest.raises(RuntimeError, match=r"grid_sample.*\(1, 2, 2, 3\)"):
        F.grid_sample(x, ta.zeros(1, 2, 2, 3), align_corners=False)
    with pytest.raises(RuntimeError, match="grid_sample.*batch"):
        F.grid_sample(x, ta.zeros(2, 2, 2, 2), align_corners=False)
    with pytest.raises(RuntimeError, match="grid_sample.*bicubic"):
        F.grid_sample(ta.zeros(1, 1, 2, 2, 2), ta.zeros(1, 1, 1, 1, 3), "bicubic",
                      align_corners=False)
    with pytest.raises(RuntimeError, match="grid_sample"):
        F.grid_sample(ta.zeros(2, 3), ta.zeros(2, 3), align_corners=False)
    with pytest.raises(TypeError, match="grid_sample.*float32.*float64"):  # (and RuntimeError)
        F.grid_sample(x, ta.zeros(1, 2, 2, 2, dtype=ta.float64), align_corners=False)
    with pytest.raises(RuntimeError, match="grid_sample.*int64"):
        F.grid_sample(ta.zeros(1, 2, 3, 4, dtype=ta.int64), g, align_corners=False)
    with pytest.raises(RuntimeError):  # (torch's types, for the record)
        torch.nn.functional.grid_sample(torch.zeros(1, 1, 2, 2, 2), torch.zeros(1, 1, 1, 1, 3),
                                        "bicubic", align_corners=False)
    with pytest.warns(UserWarning, match="align_corners"):
        y = F.grid_sample(x, g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.nn.functional.grid_sample(torch.zeros(1, 2, 3, 4, dtype=torch.float32),
                                               torch.zeros(1, 2, 2, 2))
    assert tuple(y.shape) == tuple(want.shape)


# ---- affine_grid -------------------------------------------------------------------------------

@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 1, 1, 3), (2, 1, 3, 4, 2)])
def test_affine_grid_matches_torch(size, align_corners):
    theta = _rng(12).standard_normal((size[0], len(size) - 2, len(size) - 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's note on unit sizes with align_corners)
        same(lambda f, t: f.affine_grid(t, size, align_corners), [theta], F64)
        same(lambda f, t: f.affine_grid(t, size, align_corners), [theta], F32)
    t = ta.tensor(theta, requires_grad=True)
    assert ta.autograd.gradcheck(lambda t: F.affine_grid(t, size, align_corners), (t,))


def test_affine_grid_errors_as_torch():
    with pytest.raises(ValueError, match=r"affine_grid.*\(2, 3, 3\)"):
        F.affine_grid(ta.zeros(2, 3, 3), (2, 1, 4, 4), False)
    with pytest.raises(ValueError, match="affine_grid.*floating"):
        F.affine_grid(ta.zeros(1, 2, 3, dtype=ta.int64), (1, 1, 4, 4), False)
    with pytest.raises(NotImplementedError, match="affine_grid"):
        F.affine_grid(ta.zeros(1, 2, 3), (1, 1, 4), False)
    with pytest.raises(ValueError, match="affine_grid.*positive"):
        F.affine_grid(ta.zeros(1, 2, 3), (1, 1, 0, 4), False)
    with pytest.warns(UserWarning, match="align_corners"):
        F.affine_grid(ta.zeros(1, 2, 3), (1, 1, 4, 4))


def test_affine_grid_then_grid_sample_rotates_as_torch():
    # a spatial transformer's two steps, with the gradient to theta through both
    c, s = np.cos(0.3), np.sin(0.3)
    theta = np.array([[[c, -s, 0.1], [s, c, -0.2]], [[1.2, 0.1, 0.0], [0.0, 0.8, 0.3]]])
    x = _rng(13).standard_normal((2, 2, 6, 5))
    same(lambda f, x, t: f.grid_sample(x, f.affine_grid(t, (2, 2, 4, 7), False),
                                       align_corners=False), [x, theta], F64)


# ---- fractional max pooling --------------------------------------------------------------------

def _fractional(f, x, samples, dims, **kw):
    fn = f.fractional_max_pool2d if dims == 2 else f.fractional_max_pool3d
    return fn(x, _random_samples=samples, **kw)


FRACTIONAL = [(2, (2, 3, 9, 8), dict(kernel_size=(2, 3), output_size=(4, 5))),
              (2, (2, 3, 9, 8), dict(kernel_size=3, output_ratio=(0.5, 0.6))),
              (2, (3, 7, 7), dict(kernel_size=2, output_size=6)),  # unbatched
              (2, (1, 2, 5, 6), dict(kernel_size=2, output_size=(1, 5))),
              (3, (1, 2, 6, 7, 5), dict(kernel_size=2, output_size=(3, 4, 3))),
              (3, (2, 5, 6, 4), dict(kernel_size=(2, 3, 1), output_ratio=0.5))]  # unbatched


@pytest.mark.parametrize("dtypes", [F64, F32], ids=["float64", "float32"])
@pytest.mark.parametrize("dims,shape,kw", FRACTIONAL)
def test_fractional_max_pool_matches_torch(dims, shape, kw, dtypes):
    rng = _rng(14)
    n, c = (1,) + shape[:1] if len(shape) == dims + 1 else shape[:2]
    x, samples = rng.standard_normal(shape), rng.uniform(0, 1, (n, c, dims))

    def pool(f, x):  # (the samples in f's library and dtype: they take no gradient)
        s = (torch.tensor(samples, dtype=dtypes[1]) if f is torch.nn.functional
             else ta.tensor(samples, dtype=dtypes[0]))
        return _fractional(f, x, s, dims, **kw)

    same(pool, [x], dtypes)
    ours = _fractional(F, ta.tensor(x, dtype=dtypes[0]), ta.tensor(samples, dtype=dtypes[0]),
                       dims, return_indices=True, **kw)
    theirs = _fractional(torch.nn.functional, torch.tensor(x, dtype=dtypes[1]),
                         torch.tensor(samples, dtype=dtypes[1]), dims, return_indices=True, **kw)
    np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
    assert ours[1].dtype == ta.int64
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())


def test_fractional_max_pool_gradcheck():
    x = ta.tensor(_rng(15).standard_normal((1, 2, 6, 5)), requires_grad=True)
    s = ta.tensor([[[0.3, 0.8], [0.9, 0.1]]], dtype=ta.float64)
    assert ta.autograd.gradcheck(
        lambda x: F.fractional_max_pool2d(x, 2, (3, 3), _random_samples=s), (x,))
    x3 = ta.tensor(_rng(16).standard_normal((1, 1, 4, 5, 4)), requires_grad=True)
    assert ta.autograd.gradcheck(
        lambda x: F.fractional_max_pool3d(x, 2, (2, 3, 2),
                                          _random_samples=ta.tensor([[[0.2, 0.5, 0.7]]])), (x3,))


def test_fractional_max_pool_draws_its_own_samples():
    x = ta.tensor(_rng(17).standard_normal((2, 3, 10, 9)))
    y, where = F.fractional_max_pool2d(x, 3, output_size=(5, 4), return_indices=True)
    assert tuple(y.shape) == (2, 3, 5, 4)
    flat = x.numpy().reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, where.numpy().reshape(2, 3, -1), 2),
                                  y.numpy().reshape(2, 3, -1))
    # every index is a window's largest entry: no entry of its 3x3 window is larger
    rows, cols = where.numpy() // 9, where.numpy() % 9
    assert (rows.min(), cols.min()) >= (0, 0) and rows.max() < 10 and cols.max() < 9


@pytest.mark.parametrize("dims", [2, 3])
def test_fractional_max_pool_modules_match_torch(dims):
    shape = (2, 2, 7, 8) if dims == 2 else (1, 2, 5, 6, 7)
    rng = _rng(18)
    x, samples = rng.standard_normal(shape), rng.uniform(0, 1, shape[:2] + (dims,))
    ours_cls = nn.FractionalMaxPool2d if dims == 2 else nn.FractionalMaxPool3d
    theirs_cls = torch.nn.FractionalMaxPool2d if dims == 2 else torch.nn.FractionalMaxPool3d
    for kw in (dict(output_size=3), dict(output_ratio=0.6, return_indices=True)):
        ours = ours_cls(2, _random_samples=ta.tensor(samples), **kw)
        theirs = theirs_cls(2, _random_samples=torch.tensor(samples), **kw)
        assert repr(ours) == repr(theirs)
        got, want = ours(ta.tensor(x)), theirs(torch.tensor(x))
        for a, b in zip(got if kw.get("return_indices") else [got],
                        want if kw.get("return_indices") else [want], strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert "_random_samples" in dict(ours.named_buffers())


def test_fractional_max_pool_errors_as_torch():
    x = ta.zeros(1, 2, 5, 5)
    for cls in (nn.FractionalMaxPool2d, torch.nn.FractionalMaxPool2d):
        with pytest.raises(ValueError, match="output size, or a pooling ratio"):
            cls(2)
        with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
            cls(2, output_size=2, output_ratio=0.5)
        with pytest.raises(ValueError, match="output_ratio must be between 0 and 1"):
            cls(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="fractional_max_pool2d.*output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(RuntimeError, match=r"fractional_max_pool2d.*too large.*5"):
        F.fractional_max_pool2d(x, 3, output_size=4)
    with pytest.raises(RuntimeError, match=r"fractional_max_pool3d.*\(1, 2, 5, 5, 5, 5\)"):
        F.fractional_max_pool3d(ta.zeros(1, 2, 5, 5, 5, 5), 2, output_size=2)
    with pytest.raises(RuntimeError, match=r"fractional_max_pool2d.*_random_samples.*\(1, 3, 2\)"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=ta.zeros(1, 3, 2))


# ---- AdaptiveLogSoftmaxWithLoss ----------------------------------------------------------------

def _asm_pair(head_bias=True):
    torch.manual_seed(0)
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 12, [3, 7], div_value=2.0,
                                                 head_bias=head_bias).double()
    ours = nn.AdaptiveLogSoftmaxWithLoss(8, 12, [3, 7], div_value=2.0, head_bias=head_bias,
                                         dtype=ta.float64)
    assert [tuple(p.shape) for p in ours.parameters()] == [
        tuple(p.shape) for p in theirs.parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: ta.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _grads(module, x):
    return [x.grad.numpy()] + [p.grad.numpy() for p in module.parameters()]


@pytest.mark.parametrize("head_bias", [True, False])
def test_adaptive_log_softmax_forward_matches_torch(head_bias):
    ours, theirs = _asm_pair(head_bias)
    x = _rng(19).standard_normal((10, 8)) * 3
    target = np.array([0, 5, 11, 2, 7, 3, 10, 1, 6, 8])
    xa, xt = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    got, want = ours(xa, ta.tensor(target)), theirs(xt, torch.tensor(target))
    assert type(got).__name__ == "_ASMoutput" and got._fields == ("output", "loss")
    np.testing.assert_allclose(got.output.detach().numpy(), want.output.detach().numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(got.loss.item(), want.loss.item(), rtol=1e-12)
    weights = np.cos(np.arange(10))
    (got.output * ta.tensor(weights)).sum().add(got.loss).backward()
    ((want.output * torch.tensor(weights)).sum() + want.loss).backward()
    for a, b in zip(_grads(ours, xa), _grads(theirs, xt), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    # unbatched: a 1-D input and a 0-D target
    got, want = ours(ta.tensor(x[4]), ta.tensor(7)), theirs(torch.tensor(x[4]), torch.tensor(7))
    assert tuple(got.output.shape) == tuple(want.output.shape) == ()
    np.testing.assert_allclose(got.output.item(), want.output.item(), rtol=1e-12)


def test_adaptive_log_softmax_log_prob_and_predict_match_torch():
    ours, theirs = _asm_pair()
    x = _rng(20).standard_normal((40, 8)) * 4
    lp = ours.log_prob(ta.tensor(x, requires_grad=True))
    np.testing.assert_allclose(lp.detach().numpy(),
                               theirs.log_prob(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(np.exp(lp.detach().numpy()).sum(1), 1.0, rtol=1e-12)
    want = theirs.predict(torch.tensor(x)).numpy()
    assert len(set(want)) > 3  # classes from the shortlist and both clusters
    got = ours.predict(ta.tensor(x))
    assert got.dtype == ta.int64
    np.testing.assert_array_equal(got.numpy(), want)
    for rows in (x[:1], x[want >= 3], x[want < 3]):  # all in / none in the shortlist
        np.testing.assert_array_equal(ours.predict(ta.tensor(rows)).numpy(),
                                      theirs.predict(torch.tensor(rows)).numpy())
    xa = ta.tensor(x[:3], requires_grad=True)
    assert ta.autograd.gradcheck(lambda x: ours.log_prob(x), (xa,))
    assert ta.autograd.gradcheck(lambda x: ours(x, ta.tensor([1, 4, 9])).loss, (xa,))


def test_adaptive_log_softmax_errors_as_torch():
    for cls in (nn.AdaptiveLogSoftmaxWithLoss, torch.nn.AdaptiveLogSoftmaxWithLoss):
        with pytest.raises(ValueError, match="cutoffs should be a sequence of length"):
            cls(4, 10, [])
        for cutoffs in ([5, 3], [0, 3], [3, 10], [3, 3]):
            with pytest.raises(ValueError, match="cutoffs should be a sequence of unique"):
                cls(4, 10, cutoffs)
    ours = nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        ours(ta.zeros(2, 4), ta.tensor([1, 10]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        ours(ta.zeros(3, 4), ta.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="0D or 1D target"):
        ours(ta.zeros(2, 4), ta.tensor([[1, 2]]))


# ---- CrossMapLRN2d -----------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 9])
def test_cross_map_lrn2d_values_are_torchs_and_its_gradient_is_exact(size):
    # torch's legacy Function: its running window keeps channel 0 in every later channel's sum
    # (copied: the values are torch's); its hand-written backward is not that forward's
    # derivative (gradcheck fails on torch's own), so here the gradient is the exact one
    x = _rng(21).standard_normal((2, 7, 3, 2))
    ours = nn.CrossMapLRN2d(size, 0.3, 0.6, 1.5)
    assert repr(ours) == repr(torch.nn.CrossMapLRN2d(size, 0.3, 0.6, 1.5))
    xa = ta.tensor(x, requires_grad=True)
    want = torch.nn.CrossMapLRN2d(size, 0.3, 0.6, 1.5)(torch.tensor(x))
    np.testing.assert_allclose(ours(xa).detach().numpy(), want.numpy(), rtol=1e-12)
    assert ta.autograd.gradcheck(ours, (xa,))
    assert ta.autograd.gradgradcheck(ours, (ta.tensor(x[:1, :5], requires_grad=True),))
    with pytest.raises(RuntimeError, match=r"CrossMapLRN2d.*\(7, 3, 2\)"):
        ours(ta.tensor(x[0]))


def test_cross_map_lrn2d_is_local_response_norm_with_few_channels():
    # with at most pre channels the window never slides past channel 0: the forward and its
    # gradient are F.local_response_norm's, which torch's CrossMapLRN2d backward is not
    x = _rng(22).standard_normal((1, 3, 2, 2))
    xa, xb = ta.tensor(x, requires_grad=True), ta.tensor(x, requires_grad=True)
    m = nn.CrossMapLRN2d(5, 0.2, 0.75, 2.0)
    weights = ta.tensor(np.cos(np.arange(x.size)).reshape(x.shape))
    ya, yb = m(xa), F.local_response_norm(xb, 5, 0.2, 0.75, 2.0)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-12)
    (ya * weights).sum().backward()
    (yb * weights).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), rtol=1e-12)
    theirs = torch.nn.CrossMapLRN2d(5, 0.2, 0.75, 2.0)
    assert not torch.autograd.gradcheck(theirs, (torch.tensor(x, requires_grad=True),),
                                        raise_exception=False)
