"""Tests for the seed-1 mutation survivors of tinyattn.nn and tinyattn.optim (round 10): each
checks behaviour a user can see (against torch where it applies) that one surviving mutant
changed."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn, optim
from tinyattn.errors import CheckpointError
from tinyattn.nn.modules import module as module_globals

# ---- nn ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda padding: nn.Conv1d(1, 1, 3, padding=padding),
    lambda padding: nn.Conv2d(1, 1, 3, padding=padding),
    lambda padding: nn.Conv3d(1, 1, 3, padding=padding),
    lambda padding: nn.ConvTranspose2d(1, 1, 3, padding=padding),
], ids=["Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d"])
def test_conv_refuses_a_bad_padding_naming_padding(make):
    """A negative padding, or one of the wrong length, is refused when the layer is made, the
    message naming the argument (torch refuses a negative one only at the first forward)."""
    with pytest.raises(ValueError, match=r"padding must be non-negative, got -1"):
        make(-1)
    with pytest.raises(ValueError, match=r"padding must be an int or \d ints, got \(1, 2, 3, 4\)"):
        make((1, 2, 3, 4))


def test_parameter_list_and_dict_repr_a_plain_tensor_entry_as_torchs():
    """An entry that is a plain tensor (a buffer put under the entry's name) shows as
    "Tensor containing", as torch's."""
    torch = pytest.importorskip("torch")

    def build(lib):
        plist = lib.nn.ParameterList([lib.zeros(2, 3), lib.zeros(1)])
        delattr(plist, "0")
        plist.register_buffer("0", lib.ones(2, 3))
        pdict = lib.nn.ParameterDict({"a": lib.zeros(4), "b": lib.zeros(2)})
        del pdict.a
        pdict.register_buffer("a", lib.ones(4))
        return [repr(plist), repr(pdict)]

    ours = build(ta)
    theirs = [s.replace("torch.float", "float").replace("torch.FloatTensor", "tinyattn.FloatTensor")
              for s in build(torch)]
    assert ours == theirs
    assert "(0): Tensor containing: [float32 of size 2x3]" in ours[0]
    assert "(1): Parameter containing: [float32 of size 1]" in ours[0]


def _global_hooks_log(lib, registry, remove):
    """The calls the global forward hooks see on a Linear, and after the one of kind `remove`
    ("pre" or "post") is taken off while the other stays (both are removed at the end)."""
    log = []
    pre = registry.register_module_forward_pre_hook(
        lambda m, args: log.append(("pre", type(m).__name__)))
    post = registry.register_module_forward_hook(
        lambda m, args, out: log.append(("post", type(m).__name__)))
    handles = {"pre": pre, "post": post}
    try:
        layer = lib.nn.Linear(2, 2)
        layer(lib.ones(1, 2))
        handles.pop(remove).remove()
        log.append("removed")
        layer(lib.ones(1, 2))
        lib.nn.ReLU()(lib.ones(1))  # (a module called for the first time, too)
    finally:
        for handle in handles.values():
            handle.remove()
    return log


@pytest.mark.parametrize("remove", ["pre", "post"])
def test_global_forward_hook_of_one_kind_keeps_running_when_the_other_is_removed(remove):
    torch = pytest.importorskip("torch")
    import torch.nn.modules.module as torch_globals

    ours = _global_hooks_log(ta, module_globals, remove)
    assert ours == _global_hooks_log(torch, torch_globals, remove)
    kept = "post" if remove == "pre" else "pre"
    assert ours[ours.index("removed") + 1:] == [(kept, "Linear"), (kept, "ReLU")]
    # and with both gone, neither runs any more while a module's own hook still does
    seen = len(ours)
    own = []
    layer = nn.Linear(2, 2)
    layer.register_forward_hook(lambda m, args, out: own.append("own"))
    layer(ta.ones(1, 2))
    assert own == ["own"] and len(ours) == seen


# ---- LBFGS ---------------------------------------------------------------------------------------


def _rosenbrock(x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def _lbfgs_run(lib, x0, loss_fn, steps, **settings):
    """(loss, x, n_iter, func_evals) after each of `steps` steps, in float64."""
    x = lib.tensor(x0, dtype=lib.float64, requires_grad=True)
    opt = lib.optim.LBFGS([x], **settings)

    def closure():
        opt.zero_grad()
        loss = loss_fn(x)
        loss.backward()
        return loss

    out = []
    for _ in range(steps):
        loss = float(opt.step(closure).detach())
        state = opt.state[x]
        out.append((loss, x.detach().numpy().tolist(), int(state["n_iter"]),
                    int(state["func_evals"])))
    return out


def test_lbfgs_strong_wolfe_zoom_safeguard_matches_torch():
    """lr=5 overshoots: the strong-Wolfe search zooms, and its interpolated steps fall near
    the bracket's ends, where torch's safeguard moves them 0.1 of the bracket inwards."""
    torch = pytest.importorskip("torch")
    settings = {"lr": 5, "max_iter": 5, "line_search_fn": "strong_wolfe"}
    ours = _lbfgs_run(ta, [-1.5, 2.0], _rosenbrock, 2, **settings)
    theirs = _lbfgs_run(torch, [-1.5, 2.0], _rosenbrock, 2, **settings)
    for (la, xa, na, ea), (lt, xt, nt, et) in zip(ours, theirs, strict=True):
        assert (na, ea) == (nt, et)
        assert la == pytest.approx(lt, rel=1e-12)
        np.testing.assert_allclose(xa, xt, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_stops_when_the_gradient_equals_tolerance_grad_as_torch(line_search_fn):
    """x² / 2 from 1 with lr 0.75: one iteration lands on x = 0.25, whose gradient 0.25 is
    exactly tolerance_grad: max |g| <= tolerance_grad stops it there (torch's test)."""
    torch = pytest.importorskip("torch")
    settings = {"lr": 0.75, "tolerance_grad": 0.25, "line_search_fn": line_search_fn}

    def half_square(x):
        return 0.5 * (x * x).sum()

    ours = _lbfgs_run(ta, [1.0], half_square, 2, **settings)
    assert ours == _lbfgs_run(torch, [1.0], half_square, 2, **settings)
    assert ours[0] == (0.5, [0.25], 1, 2)  # one iteration, the closure called twice
    assert ours[1] == (0.03125, [0.25], 1, 3)  # already optimal: one call, no iteration


def _state_kinds(lib, line_search_fn):
    x = lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64, requires_grad=True)
    opt = lib.optim.LBFGS([x], lr=0.5, max_iter=3, line_search_fn=line_search_fn)

    def closure():
        opt.zero_grad()
        loss = (x ** 4).sum() + x[0] * x[1]
        loss.backward()
        return loss

    def kind(value):
        if isinstance(value, list):
            return [kind(v) for v in value]
        return "tensor" if isinstance(value, lib.Tensor) else type(value).__name__

    kinds = []
    for _ in range(2):
        opt.step(closure)
        kinds.append({k: kind(v) for k, v in opt.state[x].items()})
    return kinds, x.detach().numpy().tolist()


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_state_holds_tensors_and_numbers_as_torchs(line_search_fn):
    """The state keeps d, the curvature pairs, H_diag, prev_flat_grad (and t where it was
    computed from the gradient) as tensors, prev_loss and the counts as Python numbers."""
    torch = pytest.importorskip("torch")
    (ours, x_ours), (theirs, x_theirs) = (_state_kinds(ta, line_search_fn),
                                          _state_kinds(torch, line_search_fn))
    assert ours == theirs
    first = ours[0]
    assert first["d"] == first["prev_flat_grad"] == first["H_diag"] == "tensor"
    assert first["prev_loss"] == "float" and first["n_iter"] == "int"
    np.testing.assert_allclose(x_ours, x_theirs, rtol=1e-10, atol=1e-12)


def test_lbfgs_parameters_of_several_shapes_match_torch():
    """The gradients of a matrix, a vector, a 0-d parameter and one without a gradient (zeros
    for it) go into one flat vector in the parameters' order, as torch's (prev_flat_grad shows
    it)."""
    torch = pytest.importorskip("torch")

    def run(lib):
        w = lib.tensor([[1.0, -2.0, 0.5], [0.25, 1.5, -1.0]], dtype=lib.float64,
                       requires_grad=True)
        b = lib.tensor([0.5, -0.5], dtype=lib.float64, requires_grad=True)
        s = lib.tensor(2.0, dtype=lib.float64, requires_grad=True)
        unused = lib.ones(2, 2, dtype=lib.float64, requires_grad=True)
        opt = lib.optim.LBFGS([w, unused, b, s], lr=1, max_iter=4,
                              line_search_fn="strong_wolfe")
        v = lib.tensor([1.0, 2.0, -1.0], dtype=lib.float64)

        def closure():
            opt.zero_grad()
            loss = ((w @ v * s + b - 1) ** 2).sum() + 0.1 * (w ** 4).sum() + (s - 1) ** 2
            loss.backward()
            return loss

        losses = [float(opt.step(closure).detach()) for _ in range(3)]
        flat = opt.state[w]["prev_flat_grad"]
        return losses, [t.detach().numpy().copy() for t in (w, unused, b, s)], \
            np.asarray(flat.detach().numpy()).copy()

    (lo, po, fo), (lt, pt, ft) = run(ta), run(torch)
    np.testing.assert_allclose(lo, lt, rtol=1e-10)
    for a, b in zip(po, pt, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert fo.shape == ft.shape == (6 + 4 + 2 + 1,)
    np.testing.assert_allclose(fo, ft, rtol=1e-8, atol=1e-10)
    assert np.all(fo[6:10] == 0)  # the parameter without a gradient: zeros


# ---- optimizer state dicts -----------------------------------------------------------------------


def _count_of(step):
    """The number a "step" entry holds (a number, an array or a tensor of one)."""
    return int(np.asarray(step.numpy() if hasattr(step, "numpy") else step).item())


class _CountingSGD(optim.Optimizer):
    """An optimizer written to torch's contract (a step() of its own) that counts its steps in
    state["step"], as `make_step` makes the count."""

    def __init__(self, params, make_step, lr=0.1):
        super().__init__(params, {"lr": lr})
        self.make_step = make_step

    @ta.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                count = _count_of(state.get("step", 0))
                state["step"] = self.make_step(count + 1)
                p.sub_(group["lr"] * p.grad)


@pytest.mark.parametrize("make_step", [
    int, float, np.float32, np.int64, lambda n: np.array(float(n)), lambda n: np.array([n]),
    lambda n: ta.tensor(float(n)), lambda n: ta.tensor([float(n)]),
], ids=["int", "float", "np.float32", "np.int64", "0-d array", "1-element array",
        "0-d tensor", "1-element tensor"])
def test_custom_optimizer_load_takes_its_step_count_from_the_saved_step(make_step):
    p = nn.Parameter(ta.ones(3))
    opt = _CountingSGD([p], make_step)
    for _ in range(3):
        p.grad = ta.ones(3)
        opt.step()
    saved = opt.state_dict()
    fresh = _CountingSGD([nn.Parameter(ta.ones(3))], make_step)
    fresh.load_state_dict(saved)
    assert fresh.steps == 3
    assert _count_of(fresh.state[fresh.param_groups[0]["params"][0]]["step"]) == 3


def test_custom_optimizer_load_passes_over_a_step_that_is_no_count():
    """A "step" entry that is no count (two numbers, text) is kept as it is and counts for
    nothing; the largest count among the others is the optimizer's step count."""
    params = [nn.Parameter(ta.ones(2)) for _ in range(3)]
    opt = _CountingSGD(params, int)
    saved = opt.state_dict()
    saved["state"] = {0: {"step": np.array([4.0, 9.0])}, 1: {"step": "seven"},
                      2: {"step": ta.tensor(5.0)}}
    opt.load_state_dict(saved)
    assert opt.steps == 5
    np.testing.assert_array_equal(np.asarray(opt.state[params[0]]["step"]), [4.0, 9.0])
    assert opt.state[params[1]]["step"] == "seven"


def test_custom_optimizer_load_takes_a_torch_tensor_step_count():
    torch = pytest.importorskip("torch")
    p = nn.Parameter(ta.ones(2))
    opt = _CountingSGD([p], int)
    saved = opt.state_dict()
    saved["state"] = {0: {"step": torch.tensor(6.0)}}
    opt.load_state_dict(saved)
    assert opt.steps == 6
    assert float(opt.state[p]["step"].item()) == 6.0


class _DeviceArray:
    """A stand-in for a CuPy array (a state dict saved from a GPU run): it has the CUDA array
    interface and get(), which copies it to the host; NumPy cannot read it directly."""

    def __init__(self, values):
        self._values = np.array(values)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self._values.shape, "typestr": self._values.dtype.str,
                "data": (0, False), "version": 3}

    def get(self):
        return self._values.copy()

    def __array__(self, *args, **kwargs):
        raise TypeError("a device array: call .get() to copy it to the host")


def test_load_state_dict_copies_device_arrays_to_the_host():
    p = nn.Parameter(ta.ones(3))
    opt = optim.Adam([p], lr=0.1)
    p.grad = ta.tensor([1.0, 2.0, 3.0])
    opt.step()
    saved = opt.state_dict()
    state = saved["state"][0]
    on_device = {k: _DeviceArray(np.asarray(v.numpy())) for k, v in state.items()}
    fresh_p = nn.Parameter(ta.ones(3))
    fresh = optim.Adam([fresh_p], lr=0.1)
    fresh.load_state_dict({"state": {0: on_device}, "param_groups": saved["param_groups"]})
    assert fresh.steps == 1
    for key, value in state.items():
        np.testing.assert_array_equal(fresh.state[fresh_p][key].numpy(), value.numpy())
    # and one of torch's contract takes them too, its count included
    custom = _CountingSGD([nn.Parameter(ta.ones(3))], int)
    custom.load_state_dict({"state": {0: {"step": _DeviceArray(4.0)}},
                            "param_groups": custom.state_dict()["param_groups"]})
    assert custom.steps == 4


def test_load_state_dict_refuses_a_device_array_that_is_no_number():
    p = nn.Parameter(ta.ones(3))
    opt = optim.Adam([p], lr=0.1)
    saved = opt.state_dict()
    bad = {"step": _DeviceArray(1.0), "exp_avg": _DeviceArray(["a", "b", "c"]),
           "exp_avg_sq": _DeviceArray(np.zeros(3))}
    with pytest.raises(CheckpointError, match=r"exp_avg.*is not a number array"):
        opt.load_state_dict({"state": {0: bad}, "param_groups": saved["param_groups"]})


def test_required_default_reprs_as_torchs():
    pytest.importorskip("torch")
    from torch.optim import optimizer as torch_optimizer

    assert repr(optim.required) == repr(torch_optimizer.required) == "<required parameter>"
