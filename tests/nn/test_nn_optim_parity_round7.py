"""Round 7 of nn / optim parity with PyTorch: what a PyTorch user hit that earlier rounds left
(found by running the same calls in torch and tinyattn side by side).

- SequentialLR and ChainedScheduler refuse a ReduceLROnPlateau among their schedulers, as
  torch's (its step needs the metric, which they never pass);
- CosineAnnealingWarmRestarts refuses an eta_min that is no number, with torch's ValueError;
- nn.init.dirac_ (an identity convolution kernel) exists, with torch's rules, and so do torch's
  deprecated spellings without the trailing underscore (nn.init.xavier_uniform ...), which
  warn with torch's FutureWarning;
- a Module without forward() raises NotImplementedError when called, as torch's;
- a name that is no string (add_module(5, ...), ModuleDict({1: ...}), ...) is torch's TypeError
  (still a KeyError too, as tinyattn said before);
- AdamW refuses decoupled_weight_decay (torch's AdamW has it fixed at True, and takes no such
  argument), and its signature does not list it.
"""

import inspect
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn, optim
from tinyattn.optim import lr_scheduler as sched

torch = pytest.importorskip("torch")


def _opts():
    ours = optim.SGD([ta.zeros(2, requires_grad=True)], lr=0.1)
    theirs = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1)
    return ours, theirs


@pytest.mark.parametrize("which", ["SequentialLR", "ChainedScheduler"])
def test_sequential_and_chained_refuse_reduce_lr_on_plateau_as_torch(which):
    for mod, opt in zip((sched, torch.optim.lr_scheduler), _opts(), strict=True):
        parts = [mod.StepLR(opt, 2), mod.ReduceLROnPlateau(opt)]
        with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`.*index 1"):
            if which == "SequentialLR":
                mod.SequentialLR(opt, parts, milestones=[3])
            else:
                mod.ChainedScheduler(parts)


def test_cosine_warm_restarts_refuses_an_eta_min_that_is_no_number():
    for mod, opt in zip((sched, torch.optim.lr_scheduler), _opts(), strict=True):
        with pytest.raises(ValueError, match="eta_min"):
            mod.CosineAnnealingWarmRestarts(opt, T_0=2, eta_min="0.1")
        mod.CosineAnnealingWarmRestarts(opt, T_0=2, eta_min=0)  # an int is a number


@pytest.mark.parametrize("shape,groups", [((4, 3, 5), 1), ((6, 2, 3, 4), 3), ((2, 4, 3, 3, 3), 1),
                                          ((3, 16, 5, 5), 1), ((4, 2, 3, 3), 2)])
def test_init_dirac_matches_torch(shape, groups):
    theirs = torch.nn.init.dirac_(torch.full(shape, 7.0), groups)
    w = nn.Parameter(ta.full(shape, 7.0))
    out = nn.init.dirac_(w, groups)
    assert out is w and w.requires_grad  # in place, under no_grad, as torch's
    np.testing.assert_array_equal(w.detach().numpy(), theirs.numpy())
    x = np.random.default_rng(0).standard_normal((1, shape[1] * groups,
                                                  *[5] * (len(shape) - 2)))
    conv = {3: "conv1d", 4: "conv2d", 5: "conv3d"}[len(shape)]
    pad = [k // 2 for k in shape[2:]]
    y = getattr(ta.nn.functional, conv)(ta.tensor(x, dtype=ta.float32), w, padding=pad,
                                         groups=groups)
    ty = getattr(torch.nn.functional, conv)(torch.tensor(x, dtype=torch.float32), theirs,
                                            padding=pad, groups=groups)
    np.testing.assert_allclose(y.detach().numpy(), ty.numpy(), atol=1e-6)
    if shape[0] == shape[1] * groups and all(k % 2 for k in shape[2:]):  # the identity
        np.testing.assert_allclose(y.detach().numpy(), x, atol=1e-6)


def test_init_dirac_refuses_what_torch_refuses():
    for lib in (torch, ta):
        for shape, groups in [((3, 3), 1), ((3,), 1), ((5, 2, 3), 2)]:
            with pytest.raises(ValueError):
                lib.nn.init.dirac_(lib.zeros(*shape), groups)


@pytest.mark.parametrize("name,args", [
    ("uniform", (-1.0, 2.0)), ("normal", (0.0, 0.5)), ("constant", (0.25,)), ("eye", ()),
    ("dirac", ()), ("xavier_uniform", ()), ("xavier_normal", ()), ("kaiming_uniform", ()),
    ("kaiming_normal", ()), ("orthogonal", ()), ("sparse", (0.5,))])
def test_init_deprecated_spellings_warn_and_fill_as_torch(name, args):
    shape = (4, 4, 3) if name == "dirac" else (4, 6)
    t = ta.zeros(*shape)
    with pytest.warns(FutureWarning, match=f"`nn.init.{name}` is now deprecated in favor of "
                                           f"`nn.init.{name}_`"):
        out = getattr(nn.init, name)(t, *args)
    assert out is t
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        theirs = getattr(torch.nn.init, name)(torch.zeros(*shape), *args)
    if name in ("constant", "eye", "dirac"):
        np.testing.assert_array_equal(t.numpy(), theirs.numpy())
    else:  # a draw: the same support and scale
        assert t.numpy().std() > 0 and np.abs(t.numpy()).max() <= 3 * np.abs(theirs.numpy()).max()
    assert getattr(nn.init, name).__name__ == name


def test_a_module_without_forward_raises_not_implemented_error_as_torch():
    for lib in (torch, ta):
        for m in (lib.nn.Module(), lib.nn.ModuleList([lib.nn.ReLU()]),
                  lib.nn.ModuleDict({"a": lib.nn.ReLU()})):
            with pytest.raises(NotImplementedError, match='missing the required "forward"'):
                m(lib.ones(2))


def test_a_name_that_is_no_string_is_a_type_error_as_torch():
    ones = ta.ones(1)
    calls = [lambda: nn.Module().add_module(5, nn.ReLU()),
             lambda: nn.Module().register_buffer(None, ones),
             lambda: nn.Module().register_parameter(1.5, nn.Parameter(ones)),
             lambda: nn.ModuleDict({1: nn.ReLU()}),
             lambda: nn.ParameterDict({2: ones})]
    for call in calls:
        with pytest.raises(TypeError, match="should be a string|not a string") as e:
            call()
        assert isinstance(e.value, KeyError)  # (as tinyattn raised before)
    for bad in ("", "a.b"):  # a string state_dict cannot key stays a KeyError alone, as torch's
        with pytest.raises(KeyError) as e:
            nn.Module().add_module(bad, nn.ReLU())
        assert not isinstance(e.value, TypeError)


def test_adamw_takes_no_decoupled_weight_decay_as_torch():
    p = ta.zeros(2, requires_grad=True)
    with pytest.raises(TypeError):
        torch.optim.AdamW([torch.zeros(2, requires_grad=True)], decoupled_weight_decay=False)
    with pytest.raises(TypeError, match="decoupled_weight_decay"):
        optim.AdamW([p], decoupled_weight_decay=False)
    assert "decoupled_weight_decay" not in inspect.signature(optim.AdamW).parameters
    opt = optim.AdamW([p])  # its groups keep the setting, as torch's
    assert opt.param_groups[0]["decoupled_weight_decay"] is True
    assert opt.defaults["decoupled_weight_decay"] is True
    # a torch checkpoint (which has it in its groups) still loads
    theirs = torch.optim.AdamW([torch.zeros(2, requires_grad=True)])
    theirs.param_groups[0]["params"][0].grad = torch.ones(2)
    theirs.step()
    opt.load_state_dict(theirs.state_dict())
    assert opt.param_groups[0]["decoupled_weight_decay"] is True
