"""Tests for the seed-5 mutation survivors of nn and optim, against torch where torch has the
behaviour: nn.grad's conv weight gradients with their default dilation, a Parameter made
empty on the backend asked for, data_parallel passing module_kwargs on, RNNCell's input error
naming the input, register_parametrization's refusal saying what it was doing, and SWALR with
one annealing epoch."""

import re

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_conv_weight_gradients_with_their_defaults(dims):
    x = RNG.standard_normal((2, 3) + (7,) * dims)
    w_shape = (4, 3) + (3,) * dims
    g = RNG.standard_normal((2, 4) + (5,) * dims)
    name = f"conv{dims}d_weight"
    ours = getattr(ta.nn.grad, name)(ta.tensor(x), w_shape, ta.tensor(g))
    theirs = getattr(torch.nn.grad, name)(torch.tensor(x), w_shape, torch.tensor(g))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)


def test_an_empty_parameter_is_made_on_the_backend_asked_for(monkeypatch):
    import fake_cupy  # tests/support (tests/conftest.py): a NumPy stand-in for CuPy

    fake_cupy.install(monkeypatch, kernels=False)
    p = ta.nn.Parameter(backend="cupy")
    assert str(p.device).startswith("cuda") and p.shape == (0,) and p.requires_grad
    assert str(ta.nn.Parameter().device) == "cpu"


def test_data_parallel_passes_module_kwargs_on(monkeypatch):
    import fake_cupy

    fake_cupy.install(monkeypatch, kernels=False)  # (data_parallel needs a GPU, as torch's)

    class Scaled(ta.nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    x = ta.ones(2, backend="cupy")
    out = ta.nn.parallel.data_parallel(Scaled(), x, module_kwargs={"scale": 3.0})
    assert out.tolist() == [3.0, 3.0]
    assert ta.nn.parallel.data_parallel(Scaled(), (x,)).tolist() == [1.0, 1.0]


def test_an_rnn_cells_misshapen_input_is_named():
    with pytest.raises(ta.ShapeError, match=re.escape("RNNCell: Expected input to be 1D or 2D, "
                                                      "got 3D input instead")):
        ta.nn.RNNCell(2, 3)(ta.ones(2, 3, 2))


def test_a_parametrization_that_changes_the_shape_is_refused_saying_so():
    from tinyattn.nn.utils import parametrize

    class First(ta.nn.Module):
        def forward(self, w):
            return w[0]

    with pytest.raises(ValueError, match="register_parametrization: registering a "
                                         "parametrization may not change the shape"):
        parametrize.register_parametrization(ta.nn.Linear(2, 3), "weight", First())


@pytest.mark.parametrize("anneal_epochs", [0, 1, 2])
def test_swalr_with_few_annealing_epochs_as_torch(anneal_epochs):
    lrs = []
    for lib in (ta, torch):
        p = (ta.nn.Parameter if lib is ta else torch.nn.Parameter)(lib.zeros(1))
        opt = lib.optim.SGD([p], lr=1.0)
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=anneal_epochs)
        seen = [opt.param_groups[0]["lr"]]
        for _ in range(4):
            opt.step()
            sched.step()
            seen.append(opt.param_groups[0]["lr"])
        lrs.append(seen)
    np.testing.assert_allclose(lrs[0], lrs[1], rtol=1e-12)


def _counting_sgd(lib):
    """A custom optimizer of torch's contract (it steps itself): a "step" count kept as a
    float32 tensor, and a momentum buffer, per parameter."""

    class CountingSGD(lib.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, {"lr": lr})

        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]
                    if not state:
                        state["step"] = lib.tensor(0.0, dtype=lib.float32)
                        state["buf"] = lib.zeros_like(p)
                    state["step"] += 1
                    with lib.no_grad():
                        state["buf"].mul_(0.9).add_(p.grad)
                        p.sub_(group["lr"] * state["buf"])

    return CountingSGD


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_a_custom_optimizers_step_count_keeps_its_own_dtype_when_loaded(lib_name):
    # torch's load_state_dict casts a subclass's state to the parameter's dtype, but "step":
    # that one stays as it was saved (a float32 count beside a float64 parameter)
    lib = ta if lib_name == "tinyattn" else torch
    opt_cls = _counting_sgd(lib)
    p = lib.tensor([1.0, -2.0], dtype=lib.float64, requires_grad=True)
    opt = opt_cls([p])
    (p * p).sum().backward()
    opt.step()
    sd = opt.state_dict()
    q = lib.tensor([1.0, -2.0], dtype=lib.float64, requires_grad=True)
    fresh = opt_cls([q])
    fresh.load_state_dict(sd)
    state = fresh.state[q]
    assert state["step"].dtype == lib.float32 and float(state["step"]) == 1.0
    assert state["buf"].dtype == lib.float64
    np.testing.assert_allclose(np.asarray(state["buf"].detach()), [2.0, -4.0])


def _hooks_seen(lib, inside_forward):
    """The full backward hook calls of a module whose input's gradient comes (only) along a
    path that skips its output: a tensor forward makes and leaves on the module, or a
    backward run inside forward. Returns (the calls, the input's gradient)."""
    calls = []

    class M(lib.nn.Module):
        def forward(self, x):
            if inside_forward:
                (x * 5).sum().backward(retain_graph=True)
            else:
                self.side = x * 3
            return x * 2

    m = M()
    m.register_full_backward_hook(lambda mod, gi, go: calls.append(len(go)))
    m.register_full_backward_pre_hook(lambda mod, go: calls.append("pre"))
    x = lib.ones(2, requires_grad=True)
    out = m(x)
    if not inside_forward:
        m.side.sum().backward()
    seen = list(calls)
    out.sum().backward()  # through the output: both hooks run
    return seen, calls[len(seen):], x.grad.tolist()


@pytest.mark.parametrize("inside_forward", [False, True])
def test_no_full_backward_hook_where_the_gradient_skips_the_output(inside_forward):
    ours = _hooks_seen(ta, inside_forward)
    assert ours == _hooks_seen(torch, inside_forward)
    assert ours[0] == [] and ours[1] == ["pre", 1]
