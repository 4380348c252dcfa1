"""torch.nn.grad's conv{1,2,3}d_input and _weight as ta.nn.grad (and F.grad, the same module,
as torch.nn.functional.grad is), F.conv_tbc and F.native_channel_shuffle, against torch:
values, shapes, dtypes, gradients (float64) and gradcheck, and torch's refusals."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn import nn

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)


def leaf(a, mod=ta, grad=True):
    return mod.tensor(a, dtype=mod.float64, requires_grad=grad)


# ---- nn.grad -------------------------------------------------------------------------------

CASES = [  # (dims, input shape, weight shape, stride, padding, dilation, groups)
    (1, (2, 4, 9), (6, 2, 3), 2, 1, 1, 2),
    (1, (1, 3, 7), (2, 3, 2), 1, 0, 2, 1),
    (2, (2, 4, 7, 6), (6, 2, 3, 2), (2, 1), (1, 0), 1, 2),
    (2, (1, 2, 6, 6), (3, 2, 2, 3), 3, 2, (2, 1), 1),
    (3, (1, 2, 5, 4, 5), (4, 1, 2, 2, 3), (1, 2, 2), (0, 1, 1), 1, 2),
]


def conv_of(dims, mod):
    return getattr(mod.nn.functional, f"conv{dims}d")


@pytest.mark.parametrize("dims,xs,ws,stride,padding,dilation,groups", CASES)
def test_input_and_weight_gradients_match_torch(dims, xs, ws, stride, padding, dilation, groups):
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    opts = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    ys = tuple(conv_of(dims, torch)(torch.tensor(x), torch.tensor(w), **opts).shape)
    g = rng.standard_normal(ys)
    tw, tg, tx = leaf(w, torch), leaf(g, torch), leaf(x, torch)
    want_in = getattr(torch.nn.grad, f"conv{dims}d_input")(xs, tw, tg, **opts)
    want_w = getattr(torch.nn.grad, f"conv{dims}d_weight")(tx, ws, tg, **opts)
    aw, ag, ax = leaf(w), leaf(g), leaf(x)
    got_in = getattr(nn.grad, f"conv{dims}d_input")(xs, aw, ag, **opts)
    got_w = getattr(F.grad, f"conv{dims}d_weight")(ax, ws, ag, **opts)
    for got, want in ((got_in, want_in), (got_w, want_w)):
        assert got.shape == tuple(want.shape) and got.dtype == ta.float64
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    # the results are differentiable: in weight and grad_output, in input and grad_output
    c_in, c_w = rng.standard_normal(xs), rng.standard_normal(ws)
    tgr = torch.autograd.grad((want_in * torch.tensor(c_in)).sum() +
                              (want_w * torch.tensor(c_w)).sum(), [tw, tg, tx])
    agr = ta.autograd.grad((got_in * ta.tensor(c_in)).sum() + (got_w * ta.tensor(c_w)).sum(),
                           [aw, ag, ax])
    for a, t in zip(agr, tgr, strict=True):
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)
    f_in = getattr(nn.grad, f"conv{dims}d_input")
    f_w = getattr(nn.grad, f"conv{dims}d_weight")
    assert ta.autograd.gradcheck(lambda w_, g_: f_in(xs, w_, g_, **opts), [aw, ag])
    assert ta.autograd.gradcheck(lambda x_, g_: f_w(x_, ws, g_, **opts), [ax, ag])


def test_results_have_no_graph_when_nothing_needs_one():
    w, g = leaf(rng.standard_normal((3, 2, 3)), grad=False), leaf(rng.standard_normal((1, 3, 3)),
                                                                 grad=False)
    assert not nn.grad.conv1d_input((1, 2, 5), w, g).requires_grad
    aw = leaf(rng.standard_normal((3, 2, 3)))
    with ta.no_grad():
        assert not nn.grad.conv1d_input((1, 2, 5), aw, g).requires_grad
    assert nn.grad.conv1d_input((1, 2, 5), aw, g).requires_grad


def test_f_grad_is_the_nn_grad_module():
    import tinyattn.nn.grad as grad_module

    assert F.grad is grad_module is nn.grad
    assert torch.nn.functional.grad is torch.nn.grad  # (the habit this copies)


def test_a_grad_output_of_the_wrong_shape_is_refused_as_torch_refuses_it():
    w = rng.standard_normal((3, 2, 3, 3))
    g = rng.standard_normal((1, 3, 4, 4))  # the conv of (1, 2, 5, 5) gives (1, 3, 3, 3)
    with pytest.raises(RuntimeError):
        torch.nn.grad.conv2d_input((1, 2, 5, 5), torch.tensor(w), torch.tensor(g))
    with pytest.raises(ta.errors.ShapeError, match=r"conv2d_input.*\(1, 3, 4, 4\).*\(1, 3, 3, 3\)"):
        nn.grad.conv2d_input((1, 2, 5, 5), ta.tensor(w), ta.tensor(g))
    with pytest.raises(ta.errors.ShapeError, match=r"conv2d_weight.*\(1, 3, 4, 4\)"):
        nn.grad.conv2d_weight(ta.tensor(rng.standard_normal((1, 2, 5, 5))), (3, 2, 3, 3),
                              ta.tensor(g))


# ---- conv_tbc ------------------------------------------------------------------------------


@pytest.mark.parametrize("steps,kernel,pad", [(5, 3, 0), (5, 3, 1), (4, 1, 2), (2, 3, 0),
                                              (3, 4, 1)])
def test_conv_tbc_matches_torch(steps, kernel, pad):
    x, w, b = (rng.standard_normal(s) for s in ((steps, 2, 3), (kernel, 3, 4), (4,)))
    tx, tw, tb = leaf(x, torch), leaf(w, torch), leaf(b, torch)
    ax, aw, ab = leaf(x), leaf(w), leaf(b)
    want = torch.conv_tbc(tx, tw, tb, pad)
    got = F.conv_tbc(ax, aw, ab, pad)
    assert got.shape == tuple(want.shape) and got.dtype == ta.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    if not want.numel():
        return
    c = rng.standard_normal(tuple(want.shape))
    tgr = torch.autograd.grad((want * torch.tensor(c)).sum(), [tx, tw, tb])
    agr = ta.autograd.grad((got * ta.tensor(c)).sum(), [ax, aw, ab])
    for a, t in zip(agr, tgr, strict=True):
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-10, atol=1e-12)
    assert ta.autograd.gradcheck(lambda x_, w_, b_: F.conv_tbc(x_, w_, b_, pad), [ax, aw, ab])


@pytest.mark.parametrize("shapes,pad,words", [
    (((3, 4), (3, 4, 5), (5,)), 0, "must have 3, 3 and 1 dims"),
    (((2, 3, 4), (3, 3, 5), (5,)), 0, "channels"),
    (((2, 3, 4), (3, 4, 5), (6,)), 0, "bias"),
    (((1, 3, 4), (3, 4, 5), (5,)), 0, "kernel is longer"),
])
def test_conv_tbc_refusals_are_torchs_type(shapes, pad, words):
    arrays = [rng.standard_normal(s) for s in shapes]
    with pytest.raises(RuntimeError):
        torch.conv_tbc(*(torch.tensor(a) for a in arrays), pad)
    with pytest.raises(ta.errors.ShapeError, match=f"conv_tbc.*{words}"):
        F.conv_tbc(*(ta.tensor(a) for a in arrays), pad)


# ---- native_channel_shuffle ----------------------------------------------------------------


def test_native_channel_shuffle_in_f_as_in_torch():
    x = rng.standard_normal((2, 6, 3))
    want = torch.nn.functional.native_channel_shuffle(leaf(x, torch), 3)
    ax = leaf(x)
    got = F.native_channel_shuffle(ax, 3)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    assert F.native_channel_shuffle is ta.native_channel_shuffle or \
        np.array_equal(ta.native_channel_shuffle(ax, 3).detach().numpy(), want.detach().numpy())
    assert ta.autograd.gradcheck(lambda t: F.native_channel_shuffle(t, 2), [ax])
    assert "native_channel_shuffle" in F.__all__
    with pytest.raises(ta.errors.ShapeError, match="divisible by groups 4"):
        F.native_channel_shuffle(ax, 4)
