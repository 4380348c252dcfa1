"""The lazy modules (LazyConv*, LazyConvTranspose*, LazyBatchNorm*, LazyInstanceNorm*,
UninitializedBuffer), SyncBatchNorm, NLLLoss2d and Container, and optim.Muon, against torch's."""

import copy
import inspect
import math
import pickle
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn, optim
from tinyattn.nn.lazy import LazyModuleMixin

torch = pytest.importorskip("torch")

rng = np.random.default_rng(7)

# ---- the lazy modules ---------------------------------------------------------------------------

LAZY = [
    ("LazyConv1d", (4, 3), {}, (2, 3, 9)),
    ("LazyConv2d", (6, 3), dict(stride=2, padding=1, groups=2), (2, 4, 7, 6)),
    ("LazyConv3d", (2, 2), dict(bias=False, padding=1, padding_mode="reflect"), (1, 3, 4, 5, 4)),
    ("LazyConvTranspose1d", (4, 3), dict(stride=2, output_padding=1), (2, 3, 5)),
    ("LazyConvTranspose2d", (4, 3), dict(groups=2, dilation=2), (2, 4, 4, 5)),
    ("LazyConvTranspose3d", (2, 2), dict(bias=False), (1, 3, 3, 2, 3)),
    ("LazyBatchNorm1d", (), {}, (5, 3, 4)),
    ("LazyBatchNorm1d", (), dict(bias=False), (6, 4)),
    ("LazyBatchNorm2d", (), dict(momentum=None), (3, 4, 3, 2)),
    ("LazyBatchNorm3d", (), dict(affine=False), (2, 3, 2, 3, 2)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 6)),
    ("LazyInstanceNorm2d", (), dict(track_running_stats=False), (2, 4, 3, 5)),
    ("LazyInstanceNorm3d", (), dict(affine=False, eps=1e-3), (2, 3, 3, 2, 3)),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(LAZY)]


def _pair(name, args, kwargs):
    """Our lazy module and torch's, float64."""
    return (getattr(nn, name)(*args, **kwargs, dtype=ta.float64),
            getattr(torch.nn, name)(*args, **kwargs, dtype=torch.float64))


def _is_lazy(value):
    return isinstance(value, (nn.UninitializedParameter, nn.UninitializedBuffer))


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), LAZY, ids=IDS)
def test_a_lazy_module_becomes_torchs_class_on_its_first_call(name, args, kwargs, shape):
    m, t = _pair(name, args, kwargs)
    assert repr(m) == repr(t)
    assert m.has_uninitialized_params() and t.has_uninitialized_params()
    lazy = {k: _is_lazy(v) for k, v in m.state_dict().items()}
    assert lazy == {k: torch.nn.parameter.is_lazy(v) for k, v in t.state_dict().items()}
    assert any(lazy.values())
    before = list(m.parameters()) + list(m.buffers())
    x = rng.standard_normal(shape)
    y, ty = m(ta.tensor(x)), t(torch.tensor(x))
    assert type(m) is getattr(nn, type(t).__name__) and not type(m).__name__.startswith("Lazy")
    assert repr(m) == repr(t)
    # the same objects, now of their shapes (an optimizer built before steps them)
    assert all(a is b for a, b in zip(before, list(m.parameters()) + list(m.buffers()),
                                      strict=True))
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in t.state_dict().items()}
    assert not any(_is_lazy(v) for v in m.state_dict().values())
    assert all(type(p) is nn.Parameter and p.dtype == np.float64 for p in m.parameters())
    assert y.shape == tuple(ty.shape) and y.dtype == np.float64


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), LAZY, ids=IDS)
def test_a_materialized_lazy_module_with_torchs_state_gives_torchs_values_and_gradients(
        name, args, kwargs, shape):
    m, t = _pair(name, args, kwargs)
    x = rng.standard_normal(shape)
    t(torch.tensor(x))
    m(ta.tensor(x))
    m.load_state_dict(t.state_dict())
    xm, xt = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ym, yt = m(xm), t(xt)
    w = rng.standard_normal(tuple(yt.shape))
    (ym * ta.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(ym.numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-10)
    tp = dict(t.named_parameters())
    for key, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[key].grad.numpy(), rtol=1e-9, atol=1e-10)
    tb = dict(t.named_buffers())
    for key, b in m.named_buffers():  # (the running statistics moved as torch's)
        np.testing.assert_allclose(b.numpy(), tb[key].numpy(), rtol=1e-12)
    m.eval()
    t.eval()
    np.testing.assert_allclose(m(ta.tensor(x)).numpy(), t(torch.tensor(x)).detach().numpy(),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), LAZY, ids=IDS)
def test_gradcheck_of_a_materialized_lazy_module(name, args, kwargs, shape):
    m, _ = _pair(name, args, kwargs)
    small = shape[:2] + tuple(min(s, 3) for s in shape[2:])
    if "Conv" in name:
        small = shape  # (the kernel needs the room)
    x = ta.tensor(rng.standard_normal(small), requires_grad=True)
    m(x)
    m.eval() if "BatchNorm" in name else m.train()
    names = [k for k, _ in m.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in m.parameters()]

    def f(x, *ps):
        return ta.func.functional_call(m, dict(zip(names, ps, strict=True)), (x,))

    assert ta.autograd.gradcheck(f, (x, *params))
    if "Norm" in name:
        assert ta.autograd.gradgradcheck(f, (x, *params))


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), LAZY, ids=IDS)
def test_a_lazy_module_takes_the_shapes_of_a_state_dict_loaded_before_its_first_call(
        name, args, kwargs, shape):
    m, src = _pair(name, args, kwargs)
    _, t = _pair(name, args, kwargs)
    x = rng.standard_normal(shape)
    src(torch.tensor(x))
    m.load_state_dict(src.state_dict())
    t.load_state_dict(src.state_dict())
    assert type(m).__name__ == type(t).__name__ == name  # (still lazy until called)
    assert not m.has_uninitialized_params() and not t.has_uninitialized_params()
    for key, value in src.state_dict().items():
        np.testing.assert_array_equal(m.state_dict()[key].numpy(), value.numpy())
    y, ty = m(ta.tensor(x)), src(torch.tensor(x))
    assert type(m) is getattr(nn, type(src).__name__)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    for key, value in src.state_dict().items():  # (running statistics moved alike)
        np.testing.assert_allclose(m.state_dict()[key].numpy(), value.numpy(), rtol=1e-12)
    # torch leaves in_channels / num_features at 0 here (its affine instance norms then refuse
    # the input); tinyattn infers them, as its LazyLinear
    if "InstanceNorm" in name and kwargs.get("affine", True):
        with pytest.raises(ValueError, match="num_features"):
            t(torch.tensor(x))
    elif "InstanceNorm" in name:
        with pytest.warns(UserWarning, match="num_features"):
            t(torch.tensor(x))
    else:
        t(torch.tensor(x))
    if "Conv" in name:
        assert m.in_channels == shape[1] and t.in_channels == 0
    else:
        assert m.num_features == shape[1] and t.num_features == 0


def test_lazy_state_dicts_and_loads_between_lazy_modules_as_torchs():
    m, t = _pair("LazyBatchNorm2d", (), {})
    sd, tsd = m.state_dict(), t.state_dict()
    assert list(sd) == list(tsd) == ["weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"]
    assert sd["weight"] is m.weight and sd["running_mean"] is m.running_mean  # (not detached)
    assert isinstance(sd["running_mean"], nn.UninitializedBuffer)
    assert sd["num_batches_tracked"].item() == tsd["num_batches_tracked"].item() == 0
    other, tother = _pair("LazyBatchNorm2d", (), {})
    other.load_state_dict(sd)  # lazy into lazy: nothing to give, as torch's
    tother.load_state_dict(tsd)
    assert other.has_uninitialized_params() and tother.has_uninitialized_params()
    # lazy into a module that has its shapes: refused, as torch's (a RuntimeError)
    with pytest.raises(RuntimeError):
        tm = torch.nn.BatchNorm2d(3)
        tm.load_state_dict(tsd)
    with pytest.raises(RuntimeError):
        nn.BatchNorm2d(3).load_state_dict(sd)
    assert pickle.loads(pickle.dumps(m)).has_uninitialized_params()
    c = copy.deepcopy(m)
    c(ta.randn(2, 3, 2, 2, dtype=ta.float64))
    assert type(c) is nn.BatchNorm2d and type(m) is nn.LazyBatchNorm2d


def test_lazy_initialisation_is_the_non_lazy_class_distribution():
    ta.manual_seed(0)
    conv = nn.LazyConv2d(64, 3)
    conv(ta.randn(1, 16, 5, 5))
    fan_in = 16 * 9
    bound = 1 / math.sqrt(fan_in)
    w = conv.weight.numpy()
    assert np.abs(w).max() <= bound and abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert np.abs(conv.bias.numpy()).max() <= bound and conv.bias.numpy().std() > bound / 4
    ta.manual_seed(0)  # the same draws as Conv2d's from the same seed
    conv2 = nn.LazyConv2d(64, 3)
    conv2(ta.zeros(1, 16, 5, 5))
    ta.manual_seed(0)
    ref = nn.Conv2d(16, 64, 3)
    np.testing.assert_array_equal(conv2.weight.numpy(), ref.weight.numpy())
    tr = nn.LazyConvTranspose1d(8, 4, groups=2)
    tr(ta.randn(2, 6, 5))
    bound = 1 / math.sqrt(8 // 2 * 4)  # (fan_in from the weight's dim 1, as torch's)
    assert tr.weight.shape == (6, 4, 4) and np.abs(tr.weight.numpy()).max() <= bound
    bn = nn.LazyBatchNorm1d()
    bn.eval()
    bn(ta.randn(2, 5))
    assert bn.weight.tolist() == [1.0] * 5 and bn.bias.tolist() == [0.0] * 5
    assert bn.running_mean.tolist() == [0.0] * 5 and bn.running_var.tolist() == [1.0] * 5
    assert bn.num_batches_tracked.item() == 0


def test_lazy_module_errors_are_torchs():
    for lib, make in ((nn, ta.zeros), (torch.nn, torch.zeros)):
        with pytest.raises(RuntimeError, match="Expected 3D"):  # (torch's words)
            lib.LazyConv2d(4, 3)(make(2, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(ta.zeros(1, 3, 5, 5))
    with pytest.raises(ValueError, match="divisible by groups"):
        torch.nn.LazyConv2d(4, 3, groups=2)(torch.zeros(1, 3, 5, 5))
    m = nn.LazyConv1d(4, 3)
    with pytest.raises(RuntimeError):
        m(ta.zeros(2, 3, 4, 5))
    assert type(m) is nn.LazyConv1d and m.has_uninitialized_params()  # (unchanged on error)
    y = m(ta.zeros(3, 7))  # unbatched: in_channels from dim 0, as torch's
    assert m.in_channels == 3 and y.shape == (4, 5)
    loaded = nn.LazyConv2d(4, 3)
    loaded.load_state_dict(nn.Conv2d(2, 4, 3).state_dict())
    with pytest.raises(ta.errors.ShapeError, match="LazyConv2d"):
        loaded(ta.zeros(1, 5, 4, 4))


def test_unbatched_and_parameterless_lazy_norms():
    # no parameters and no buffers: nothing to shape; torch leaves num_features 0 (and warns
    # at each call), tinyattn takes it from input.shape[1] as the others
    m = nn.LazyInstanceNorm2d(affine=False, track_running_stats=False, dtype=ta.float64)
    t = torch.nn.LazyInstanceNorm2d(affine=False, track_running_stats=False,
                                    dtype=torch.float64)
    x = rng.standard_normal((2, 3, 4, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ty = t(torch.tensor(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = m(ta.tensor(x))
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-12, atol=1e-12)
    assert type(m) is nn.InstanceNorm2d and m.num_features == 3


def test_lazy_modules_dtype_device_and_an_optimizer_built_before():
    m = nn.LazyConv1d(3, 2).to(ta.float64)
    bn = nn.LazyBatchNorm1d().double()
    assert m.weight.dtype == np.float64 and bn.running_mean.dtype == np.float64
    opt = optim.SGD(list(m.parameters()) + list(bn.parameters()), lr=0.5)
    x = ta.randn(4, 2, 5, dtype=ta.float64)
    bn(m(x)).pow(2).sum().backward()
    w = m.weight.numpy().copy()
    g = bn.weight.grad.numpy().copy()
    opt.step()
    np.testing.assert_allclose(m.weight.numpy(), w - 0.5 * m.weight.grad.numpy())
    np.testing.assert_allclose(bn.weight.numpy(), 1 - 0.5 * g)
    assert bn.running_mean.dtype == np.float64 and bn.num_batches_tracked.item() == 1


def test_uninitialized_buffer_as_torchs():
    b = nn.UninitializedBuffer(dtype=ta.float64)
    tb = torch.nn.UninitializedBuffer(dtype=torch.float64)
    assert repr(b) == repr(tb) == "<UninitializedBuffer>"
    assert isinstance(b, nn.Buffer) and isinstance(tb, torch.nn.Buffer)
    assert not b.requires_grad and b.persistent

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.kept = nn.UninitializedBuffer()
            self.scratch = nn.UninitializedBuffer(persistent=False)

    mod = M()
    assert list(dict(mod.named_buffers())) == ["kept", "scratch"]
    assert list(mod.state_dict()) == ["kept"]
    b.materialize((2, 3))
    tb.materialize((2, 3))
    assert b.shape == tuple(tb.shape) == (2, 3) and b.dtype == np.float64
    assert not isinstance(b, nn.UninitializedBuffer) and isinstance(b, ta.Tensor)
    p = nn.UninitializedBuffer(requires_grad=True)
    p.materialize((4,), dtype=ta.float64)
    assert p.requires_grad and p.dtype == np.float64 and p.shape == (4,)


def test_lazy_names_are_exported():
    for name in ("LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
                 "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d",
                 "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
                 "LazyInstanceNorm2d", "LazyInstanceNorm3d", "UninitializedBuffer",
                 "SyncBatchNorm", "NLLLoss2d", "Container"):
        assert name in nn.__all__ and hasattr(torch.nn, name)
    for words in ("lazy.py", "syncbn.py SyncBatchNorm", "NLLLoss2d and Container"):
        assert words in " ".join(nn.__doc__.split())
    assert nn.LazyConv2d.cls_to_become is nn.Conv2d
    assert nn.LazyInstanceNorm3d.cls_to_become is nn.InstanceNorm3d
    assert issubclass(nn.LazyBatchNorm2d, LazyModuleMixin)


def test_a_lazy_module_of_ones_own_with_the_mixin():
    class LazyScale(LazyModuleMixin, nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.UninitializedParameter()

        def initialize_parameters(self, input):  # noqa: A002
            if self.has_uninitialized_params():
                self.scale.materialize((input.shape[-1],))
                with ta.no_grad():
                    self.scale.fill_(2.0)

        def forward(self, input):  # noqa: A002
            return input * self.scale

    m = LazyScale()
    assert m(ta.ones(2, 3)).tolist() == [[2.0] * 3] * 2
    assert m.scale.shape == (3,) and not m.has_uninitialized_params()


# ---- SyncBatchNorm ------------------------------------------------------------------------------

SYNC_SHAPES = [(4, 3), (4, 3, 5), (2, 3, 4, 3), (2, 3, 2, 3, 2)]


@pytest.mark.parametrize("shape", SYNC_SHAPES)
@pytest.mark.parametrize("kwargs", [{}, dict(momentum=None), dict(affine=False),
                                    dict(track_running_stats=False), dict(bias=False)])
def test_sync_batch_norm_in_one_process_is_torchs(shape, kwargs):
    m = nn.SyncBatchNorm(3, dtype=ta.float64, **kwargs)
    t = torch.nn.SyncBatchNorm(3, dtype=torch.float64, **kwargs)
    assert repr(m) == repr(t)
    w = rng.standard_normal((3,)) if m.weight is not None else None
    if w is not None:
        with ta.no_grad(), torch.no_grad():
            m.weight.copy_(ta.tensor(w))
            t.weight.copy_(torch.tensor(w))
    for training in (True, True, False):
        m.train(training)
        t.train(training)
        x = rng.standard_normal(shape) * 2 + 1
        xm, xt = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ym, yt = m(xm), t(xt)
        g = rng.standard_normal(shape)
        (ym * ta.tensor(g)).sum().backward()
        (yt * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(ym.numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-11)
        for p, tp in zip(m.parameters(), t.parameters(), strict=True):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-9, atol=1e-11)
        for b, tb in zip(m.buffers(), t.buffers(), strict=True):
            np.testing.assert_allclose(b.numpy(), tb.numpy(), rtol=1e-12)
    # and the same as BatchNorm's own
    bn = nn.BatchNorm2d(3, dtype=ta.float64, **kwargs) if len(shape) == 4 else None
    if bn is not None:
        s = nn.SyncBatchNorm(3, dtype=ta.float64, **kwargs)
        x = ta.tensor(rng.standard_normal(shape))
        for training in (True, False):
            bn.train(training)
            s.train(training)
            np.testing.assert_array_equal(s(x).numpy(), bn(x).numpy())
            for a, b in zip(s.buffers(), bn.buffers(), strict=True):
                np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_sync_batch_norm_gradcheck():
    m = nn.SyncBatchNorm(2, dtype=ta.float64)
    x = ta.tensor(rng.standard_normal((3, 2, 2)), requires_grad=True)
    params = [p.detach().clone().requires_grad_() for p in m.parameters()]

    def f(x, w, b):
        return ta.func.functional_call(m, {"weight": w, "bias": b}, (x,))

    assert ta.autograd.gradcheck(f, (x, *params))
    assert ta.autograd.gradgradcheck(f, (x, *params))


def test_sync_batch_norm_refuses_what_torchs_refuses():
    for lib, make in ((nn, ta.zeros), (torch.nn, torch.zeros)):
        with pytest.raises(ValueError, match="expected at least 2D input"):
            lib.SyncBatchNorm(3)(make(3))
        with pytest.raises(ValueError, match="number of input channels should be non-zero"):
            lib.SyncBatchNorm(0)(make(2, 0))
        with pytest.raises(ValueError):  # one value per channel, in training
            lib.SyncBatchNorm(3)(make(1, 3))
    with pytest.raises(ta.errors.ShapeError, match="SyncBatchNorm"):
        nn.SyncBatchNorm(3)(ta.zeros(2, 4))


def test_convert_sync_batchnorm_keeps_the_state_as_torchs():
    def build(lib):
        inner = lib.Sequential(lib.BatchNorm1d(4, affine=False), lib.ReLU())
        return lib.Sequential(lib.Conv2d(2, 3, 1), lib.BatchNorm2d(3, momentum=0.3, eps=1e-3),
                              lib.Flatten(), inner, lib.BatchNorm3d(2, bias=False))

    m, t = build(nn), build(torch.nn)
    m[1].train()(ta.randn(4, 3, 2, 2))  # running statistics that are not the defaults
    m[3].eval()
    weight, mean, count = m[1].weight, m[1].running_mean, m[1].num_batches_tracked
    state = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    out = nn.SyncBatchNorm.convert_sync_batchnorm(m)
    tout = torch.nn.SyncBatchNorm.convert_sync_batchnorm(t)
    assert out is m and tout is t
    assert [type(c).__name__ for c in m.modules()] == [type(c).__name__ for c in t.modules()]
    assert type(m[1]) is nn.SyncBatchNorm and type(m[3][0]) is nn.SyncBatchNorm
    assert repr(m) == repr(t)
    assert m[1].weight is weight and m[1].running_mean is mean
    assert m[1].num_batches_tracked is count
    assert not m[3][0].training and m[1].training
    assert list(m.state_dict()) == list(t.state_dict()) == list(state)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), state[k])
    top = nn.BatchNorm1d(5)
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(top)
    assert type(converted) is nn.SyncBatchNorm and converted is not top
    assert converted.weight is top.weight and converted.num_features == 5


# ---- NLLLoss2d and Container --------------------------------------------------------------------


def test_nll_loss_2d_is_nll_loss_with_torchs_warning():
    x = rng.standard_normal((2, 3, 4, 5))
    target = rng.integers(0, 3, (2, 4, 5))
    weight = rng.random(3) + 0.5
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        loss = nn.NLLLoss2d(weight=ta.tensor(weight), ignore_index=1)
    with pytest.warns(FutureWarning):
        tloss = torch.nn.NLLLoss2d(weight=torch.tensor(weight), ignore_index=1)
    assert isinstance(loss, nn.NLLLoss)
    xm, xt = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ym, yt = loss(xm, ta.tensor(target)), tloss(xt, torch.tensor(target))
    ym.backward()
    yt.backward()
    np.testing.assert_allclose(ym.item(), yt.item(), rtol=1e-12)
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    assert ta.autograd.gradcheck(lambda x: loss(x, ta.tensor(target)), (xm,))


def test_container_is_torchs_deprecated_module():
    with pytest.warns(FutureWarning, match="Container"):
        c = nn.Container(a=nn.Linear(2, 3), b=nn.ReLU())
    with pytest.warns(FutureWarning):
        tc = torch.nn.Container(a=torch.nn.Linear(2, 3), b=torch.nn.ReLU())
    assert list(dict(c.named_children())) == ["a", "b"] and repr(c) == repr(tc)
    assert list(c.state_dict()) == list(tc.state_dict())
    with pytest.raises(NotImplementedError):
        c(ta.zeros(2))


# ---- optim.Muon ---------------------------------------------------------------------------------

MUON_CASES = [
    {},
    dict(lr=0.02, nesterov=False),
    dict(lr=0.05, adjust_lr_fn="original", weight_decay=0.0),
    dict(lr=0.01, adjust_lr_fn="match_rms_adamw", momentum=0.9),
    dict(lr=0.03, ns_coefficients=(2.0, -1.5, 0.5), ns_steps=3, eps=1e-3, momentum=0.3),
    dict(lr=0.02, weight_decay=0.5, ns_steps=0),
]
MUON_SHAPES = [(3, 5), (6, 2), (4, 4)]


def _muon_both(kwargs, steps=4, dtype=np.float64, seed=1):
    r = np.random.default_rng(seed)
    start = [r.standard_normal(s).astype(dtype) for s in MUON_SHAPES]
    ours = [ta.tensor(x.copy(), requires_grad=True) for x in start]
    theirs = [torch.tensor(x.copy(), requires_grad=True) for x in start]
    opt, topt = optim.Muon(ours, **kwargs), torch.optim.Muon(theirs, **kwargs)
    for _ in range(steps):
        for p, tp in zip(ours, theirs, strict=True):
            g = r.standard_normal(p.shape).astype(dtype)
            p.grad, tp.grad = ta.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
    return opt, topt, ours, theirs


@pytest.fixture
def torch_ns_in_float64(monkeypatch):
    """torch's Muon, its Newton-Schulz iteration run in the gradient's own dtype instead of
    bfloat16 (tinyattn has no bfloat16): torch's own code, to float64's rounding."""
    monkeypatch.setattr(torch.Tensor, "bfloat16", lambda self, *a, **k: self.clone())


@pytest.mark.parametrize("kwargs", MUON_CASES)
def test_muon_steps_match_torchs(kwargs, torch_ns_in_float64):
    opt, topt, ours, theirs = _muon_both(kwargs)
    for p, tp in zip(ours, theirs, strict=True):
        assert p.dtype == np.float64
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-10, atol=1e-12)
    ts = topt.state_dict()
    sd = opt.state_dict()
    assert sd["param_groups"] == ts["param_groups"]
    for i, entry in sd["state"].items():
        assert list(entry) == list(ts["state"][i]) == ["momentum_buffer"]
        np.testing.assert_allclose(entry["momentum_buffer"].numpy(),
                                   ts["state"][i]["momentum_buffer"].numpy(), rtol=1e-12)


def test_muon_matches_torchs_bfloat16_iteration_to_its_rounding():
    _, _, ours, theirs = _muon_both(dict(lr=0.02), steps=2, dtype=np.float32)
    for p, tp in zip(ours, theirs, strict=True):
        # (bfloat16 keeps ~3 digits: the two differ by ~1e-3 of lr-sized steps, where no
        # nesterov or one Newton-Schulz step fewer moves them by 5e-3 or more)
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), atol=2e-3)


def test_muon_resumes_from_torchs_state_dict(torch_ns_in_float64):
    opt, topt, ours, theirs = _muon_both(dict(lr=0.04, nesterov=False), steps=2)
    fresh = [ta.tensor(tp.detach().numpy().copy(), requires_grad=True) for tp in theirs]
    resumed = optim.Muon(fresh)
    resumed.load_state_dict(topt.state_dict())
    assert resumed.param_groups[0]["lr"] == 0.04 and not resumed.param_groups[0]["nesterov"]
    for p, tp in zip(fresh, theirs, strict=True):
        g = rng.standard_normal(p.shape)
        p.grad, tp.grad = ta.tensor(g), torch.tensor(g)
    resumed.step()
    topt.step()
    for p, tp in zip(fresh, theirs, strict=True):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-10, atol=1e-12)
    c = pickle.loads(pickle.dumps(opt))
    assert c.state_dict()["param_groups"] == opt.state_dict()["param_groups"]


def test_muon_update_is_orthogonalised():
    # enough Newton-Schulz steps with the (1.5, -0.5, 0) cubic drive the singular values of
    # the update to 1: p moves by lr * U Vᵀ of the momentum-smoothed gradient
    p = ta.zeros(5, 3, dtype=ta.float64, requires_grad=True)
    g = rng.standard_normal((5, 3))
    opt = optim.Muon([p], lr=1.0, weight_decay=0.0, momentum=0.0, nesterov=False,
                     ns_coefficients=(1.5, -0.5, 0.0), ns_steps=60)
    p.grad = ta.tensor(g)
    opt.step()
    u, _, vt = np.linalg.svd(g, full_matrices=False)
    np.testing.assert_allclose(-p.numpy(), math.sqrt(5 / 3) * u @ vt, atol=1e-8)


def test_muon_signature_and_refusals_are_torchs():
    ours, theirs = inspect.signature(optim.Muon), inspect.signature(torch.optim.Muon)
    assert [(n, p.default) for n, p in ours.parameters.items()] == \
        [(n, p.default) for n, p in theirs.parameters.items()]
    for lib, make in ((optim, lambda *s: ta.zeros(*s, requires_grad=True)),
                      (torch.optim, lambda *s: torch.zeros(*s, requires_grad=True))):
        with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
            lib.Muon([make(2, 3), make(3)])
        with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
            lib.Muon([make(2, 3, 4)])
        for bad in (dict(lr=-1.0), dict(momentum=-0.1), dict(weight_decay=-1.0),
                    dict(adjust_lr_fn="sqrt")):
            with pytest.raises(ValueError):
                lib.Muon([make(2, 3)], **bad)
        with pytest.raises(TypeError):
            lib.Muon([make(2, 3)], maximize=True)
        for bad in (dict(ns_steps=100), dict(ns_coefficients=(1.0, 2.0))):
            p = make(2, 3)
            opt = lib.Muon([p], **bad)
            p.grad = make(2, 3).detach()
            with pytest.raises(ValueError):
                opt.step()
    with pytest.raises(ValueError, match="Muon only supports 2D"):
        optim.Muon([ta.zeros(2, 2, requires_grad=True)]).add_param_group(
            {"params": [ta.zeros(3, requires_grad=True)]})


def test_muon_float32_and_float16_parameters_keep_their_dtype():
    for dtype in (ta.float32, ta.float16):
        p = ta.ones(3, 4, dtype=dtype, requires_grad=True)
        opt = optim.Muon([p], lr=0.1)
        p.grad = ta.ones(3, 4, dtype=dtype)
        opt.step()
        assert p.dtype == dtype and np.isfinite(p.numpy()).all() and (p.numpy() < 1).all()
