"""Round 7: Conv1d/2d/3d take torch's padding_mode "reflect", "replicate" and "circular" (the
input padded with F.pad(mode=...) by the conv's padding, in torch's
_reversed_padding_repeated_twice order, then a padding-0 conv), padding="same" included; the
ConvTranspose modules take only "zeros", with torch's ValueError. Checked side by side with
torch: values and the gradients of input, weight and bias in float64, torch's errors, reprs and
state_dict keys.
"""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn

torch = pytest.importorskip("torch")

MODES = ["reflect", "replicate", "circular"]

# (dims, constructor keywords, input shape): asymmetric kernels, stride, dilation, groups and
# padding as an int, a tuple, "same" and "valid"
CASES = [
    (1, dict(kernel_size=3, padding=2, stride=2), (2, 4, 7)),
    (1, dict(kernel_size=4, padding="same", dilation=2), (2, 4, 9)),
    (1, dict(kernel_size=2, padding=(1,), groups=2), (3, 4, 5)),
    (1, dict(kernel_size=3, padding="valid"), (2, 4, 6)),
    (1, dict(kernel_size=3, padding=2), (4, 6)),  # (unbatched, as torch takes it)
    (2, dict(kernel_size=(3, 2), padding=(2, 1), stride=(2, 1), dilation=(1, 2), groups=2),
     (2, 4, 6, 5)),
    (2, dict(kernel_size=(2, 3), padding="same", dilation=(2, 1)), (1, 4, 5, 6)),
    (2, dict(kernel_size=(1, 3), padding=1, bias=False), (4, 5, 4)),  # (unbatched)
    (3, dict(kernel_size=(3, 1, 2), padding=(1, 0, 2), stride=(1, 2, 1)), (2, 4, 4, 5, 3)),
    (3, dict(kernel_size=(2, 3, 2), padding="same", groups=4), (1, 4, 4, 5, 4)),
    (3, dict(kernel_size=2, padding=1, dilation=(1, 2, 1)), (1, 4, 3, 4, 3)),
]


def _pair(dims, mode, kwargs):
    """The same conv in torch and tinyattn (tinyattn's loaded from torch's), float64."""
    cls = ("Conv1d", "Conv2d", "Conv3d")[dims - 1]
    out = 6 if kwargs.get("groups", 1) != 4 else 4
    theirs = getattr(torch.nn, cls)(4, out, padding_mode=mode, dtype=torch.float64, **kwargs)
    ours = getattr(nn, cls)(4, out, padding_mode=mode, dtype=ta.float64, **kwargs)
    ours.load_state_dict({k: ta.tensor(v.detach().numpy())
                          for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_padding_modes_match_torch_values_and_gradients(mode, case):
    dims, kwargs, shape = CASES[case]
    ours, theirs = _pair(dims, mode, kwargs)
    rng = np.random.default_rng(case)
    x = rng.standard_normal(shape)
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx)
    ox = ta.tensor(x, requires_grad=True)
    oy = ours(ox)
    assert oy.shape == tuple(ty.shape)
    np.testing.assert_allclose(oy.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(tuple(ty.shape))
    (ty * torch.tensor(g)).sum().backward()
    (oy * ta.tensor(g)).sum().backward()
    np.testing.assert_allclose(ox.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for name, param in theirs.named_parameters():
        np.testing.assert_allclose(getattr(ours, name).grad.numpy(), param.grad.numpy(),
                                   rtol=1e-10, atol=1e-12, err_msg=name)


def test_reversed_padding_repeated_twice_is_torchs():
    for kwargs in (dict(kernel_size=(3, 1, 2), padding=(1, 0, 2)),
                   dict(kernel_size=(2, 3, 4), padding="same", dilation=(3, 1, 1)),
                   dict(kernel_size=3, padding="valid")):
        ours, theirs = _pair(3, "reflect", kwargs)
        assert list(ours._reversed_padding_repeated_twice) == list(
            theirs._reversed_padding_repeated_twice)


@pytest.mark.parametrize("mode, pad, length", [("reflect", 3, 3), ("circular", 4, 3),
                                               ("replicate", 1, 0)])
def test_padding_the_input_cannot_hold_is_torchs_runtime_error(mode, pad, length):
    for lib in (torch, ta):
        module = lib.nn.Conv1d(2, 2, 3, padding=pad, padding_mode=mode)
        with pytest.raises(RuntimeError):
            module(lib.zeros(1, 2, length))


def test_circular_and_reflect_at_the_limit_work_as_torch():
    for mode, pad, length in (("circular", 3, 3), ("reflect", 2, 3)):
        shapes = [tuple(lib.nn.Conv1d(2, 2, 3, padding=pad, padding_mode=mode)(
            lib.zeros(1, 2, length)).shape) for lib in (torch, ta)]
        assert shapes[0] == shapes[1]


def test_unknown_padding_mode_and_transposed_modes_refused_as_torch():
    with pytest.raises(ValueError, match="padding_mode must be one of.*padding_mode='foo'"):
        nn.Conv2d(2, 2, 3, padding_mode="foo")
    for cls in ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"):
        for mode in ("foo", *MODES):
            for lib in (torch, ta):
                with pytest.raises(ValueError,
                                   match=f'Only "zeros" padding mode is supported for {cls}'):
                    getattr(lib.nn, cls)(2, 2, 3, padding_mode=mode)
    assert nn.ConvTranspose2d(2, 2, 3, padding_mode="zeros").padding_mode == "zeros"


@pytest.mark.parametrize("args, kwargs", [
    ((2, 4, (3, 2)), dict(padding="same", padding_mode="reflect", bias=False)),
    ((2, 4, 3), dict(padding=1, padding_mode="circular", groups=2)),
    ((2, 4, 3), dict(padding_mode="replicate", stride=2, dilation=2)),
    ((2, 4, 3), dict(padding=1)),
])
def test_repr_and_state_dict_as_torch(args, kwargs):
    for cls in ("Conv1d", "Conv2d", "Conv3d"):
        if cls != "Conv2d" and isinstance(args[2], tuple):
            continue
        ours, theirs = getattr(nn, cls)(*args, **kwargs), getattr(torch.nn, cls)(*args, **kwargs)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        assert ours.padding_mode == theirs.padding_mode


# ---- optim: PolynomialLR(total_iters=0), ChainedScheduler's TypeError, add_param_group ------

def _sgd_pair():
    from tinyattn import optim
    return (optim.SGD([ta.zeros(2, requires_grad=True)], lr=0.1),
            torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1))


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_polynomial_lr_with_no_iterations_keeps_the_lr_as_torch(power):
    from tinyattn.optim import lr_scheduler as sched
    ours, theirs = _sgd_pair()
    s = sched.PolynomialLR(ours, total_iters=0, power=power)
    ts = torch.optim.lr_scheduler.PolynomialLR(theirs, total_iters=0, power=power)
    rates, trates = [s.get_last_lr()], [ts.get_last_lr()]
    for _ in range(10):
        ours.step()
        theirs.step()
        s.step()
        ts.step()
        rates.append(s.get_last_lr())
        trates.append(ts.get_last_lr())
    assert rates == trates == [[0.1]] * 11
    with pytest.raises(ValueError, match="PolynomialLR: total_iters"):
        sched.PolynomialLR(ours, total_iters=-1)


@pytest.mark.parametrize("which", ["ChainedScheduler", "SequentialLR"])
def test_a_scheduler_without_optimizer_is_torchs_type_error(which):
    from tinyattn.optim import lr_scheduler as sched
    for mod, opt in zip((sched, torch.optim.lr_scheduler), _sgd_pair(), strict=True):
        parts = [mod.StepLR(opt, 2), object()]
        with pytest.raises(TypeError,
                           match=f"{which} at index 1 should have `optimizer` as its attribute"):
            if which == "ChainedScheduler":
                mod.ChainedScheduler(parts)
            else:
                mod.SequentialLR(opt, parts, [3])


def test_add_param_group_without_params_is_torchs_key_error():
    for opt in _sgd_pair():
        with pytest.raises(KeyError, match="params"):
            opt.add_param_group({"lr": 0.1})
        with pytest.raises(TypeError, match="param_group must be a dict"):
            opt.add_param_group([ta.zeros(2, requires_grad=True)])
        assert len(opt.param_groups) == 1
