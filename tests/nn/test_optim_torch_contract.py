"""torch's Optimizer base-class contract (a subclass written as torch's tutorials write one),
Adadelta, LBFGS, CyclicLR and _LRScheduler, each against torch itself."""

import copy
import importlib
import io
import pickle

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import optim

torch = pytest.importorskip("torch")


def _my_sgd(lib):
    """The custom SGD of torch's tutorials, written the same way against lib (torch or ta)."""

    class MySGD(lib.optim.Optimizer):
        def __init__(self, params, lr=0.1, momentum=0.0, weight_decay=0.0):
            if lr < 0.0:
                raise ValueError(f"Invalid learning rate: {lr}")
            defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay)
            super().__init__(params, defaults)

        @lib.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with lib.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    d_p = p.grad
                    if group["weight_decay"] != 0:
                        d_p = d_p.add(p, alpha=group["weight_decay"])
                    if group["momentum"] != 0:
                        state = self.state[p]
                        if "momentum_buffer" not in state:
                            buf = state["momentum_buffer"] = lib.clone(d_p).detach()
                        else:
                            buf = state["momentum_buffer"]
                            buf.mul_(group["momentum"]).add_(d_p)
                        d_p = buf
                        state["step"] = state.get("step", 0) + 1
                    p.add_(d_p, alpha=-group["lr"])
            return loss

    return MySGD


_TaSGD = _my_sgd(ta)  # (at module level: pickle finds it by name)
_TaSGD.__qualname__ = "_TaSGD"


def _model_run(lib, make_opt, steps, w0, b0, x, y, opt_out=None):
    """Parameters after each step of a small least-squares fit (float64)."""
    w = lib.tensor(w0, requires_grad=True)
    b = lib.tensor(b0, requires_grad=True)
    opt = make_opt(lib, w, b)
    trace = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((lib.tensor(x) @ w + b - lib.tensor(y)) ** 2).mean()
        loss.backward()
        opt.step()
        trace.append((w.detach().numpy().copy(), b.detach().numpy().copy()))
    if opt_out is not None:
        opt_out.append(opt)
    return trace


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal((5, 3)),
            rng.standard_normal((5, 2)))


def test_a_subclass_written_as_torchs_tutorials_steps_as_on_torch(problem):
    w0, b0, x, y = problem

    def make(lib, w, b):
        return _my_sgd(lib)([{"params": [w]}, {"params": [b], "lr": 0.05}], lr=0.1,
                          momentum=0.9, weight_decay=0.01)

    ours, theirs = [], []
    ta_trace = _model_run(ta, make, 6, w0, b0, x, y, ours)
    torch_trace = _model_run(torch, make, 6, w0, b0, x, y, theirs)
    for (wa, ba), (wt, bt) in zip(ta_trace, torch_trace, strict=True):
        np.testing.assert_allclose(wa, wt, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(ba, bt, rtol=1e-12, atol=1e-14)
    opt, topt = ours[0], theirs[0]
    assert opt.defaults == topt.defaults == {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}
    assert [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups] == \
        [{k: v for k, v in g.items() if k != "params"} for g in topt.param_groups]
    assert type(opt.state).__name__ == "defaultdict"
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert sd["state"].keys() == tsd["state"].keys()
    for i in sd["state"]:
        assert sd["state"][i]["step"] == tsd["state"][i]["step"] == 6  # (an int stays an int)
        np.testing.assert_allclose(sd["state"][i]["momentum_buffer"].numpy(),
                                   tsd["state"][i]["momentum_buffer"].numpy(), rtol=1e-12)


def test_defaults_by_keyword_required_and_a_bare_subclass_as_torch():
    for lib in (ta, torch):
        class ByKeyword(lib.optim.Optimizer):
            def __init__(self, params, lr=0.1):
                super().__init__(params, defaults={"lr": lr, "tag": "x"})

        w = lib.zeros(2, requires_grad=True)
        opt = ByKeyword([w])
        assert opt.defaults == {"lr": 0.1, "tag": "x"}
        assert opt.param_groups[0]["tag"] == "x" and opt.param_groups[0]["params"][0] is w

        required = importlib.import_module(f"{lib.__name__}.optim.optimizer").required

        class NeedsLr(lib.optim.Optimizer):
            def __init__(self, params, lr=required):
                super().__init__(params, dict(lr=lr))

        with pytest.raises(ValueError, match="didn't specify a value of required optimization "
                                             "parameter lr"):
            NeedsLr([w])
        assert NeedsLr([{"params": [w], "lr": 0.5}]).param_groups[0]["lr"] == 0.5

        class NoStep(lib.optim.Optimizer):
            def __init__(self, params):
                super().__init__(params, {})

        w.grad = lib.ones(2)
        with pytest.raises(NotImplementedError):
            NoStep([w]).step()


def test_a_subclass_adds_groups_zeroes_grads_and_keeps_an_lr_of_its_own():
    w, b = ta.zeros(2, requires_grad=True), ta.zeros(1, requires_grad=True)

    class WithLr(ta.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            self.lr = lr  # (an attribute of its own, as torch's base class has none)
            self.params = list(params)  # (nor does it have a params method to shadow)
            super().__init__(self.params, dict(lr=lr))

        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.data -= group["lr"] * p.grad.data

    opt = WithLr([w], lr=0.1)
    opt.lr = 7.0  # changes the attribute, not the groups (torch: no such property)
    assert opt.lr == 7.0 and opt.param_groups[0]["lr"] == 0.1
    opt.add_param_group({"params": [b], "lr": 1.0})
    assert opt.param_groups[1] == {"params": [b], "lr": 1.0}
    w.grad, b.grad = ta.ones(2), ta.ones(1)
    opt.step()
    np.testing.assert_allclose(w.numpy(), [-0.1, -0.1])
    np.testing.assert_allclose(b.numpy(), [-1.0])
    opt.zero_grad()
    assert w.grad is None and b.grad is None
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [w]})


def test_a_subclass_state_dict_round_trips_and_loads_torchs(problem, tmp_path):
    """load_state_dict of a subclass casts as torch's: tensors to the parameter's dtype (a
    torch tensor too), "step" and values that are no tensors as they are."""
    w0, b0, x, y = problem

    def make(lib, w, b):
        return _my_sgd(lib)([w, b], lr=0.1, momentum=0.9)

    ours, theirs = [], []
    _model_run(ta, make, 3, w0, b0, x, y, ours)
    _model_run(torch, make, 3, w0, b0, x, y, theirs)
    full = _model_run(torch, make, 6, w0, b0, x, y)
    # ours resumed from our checkpoint (through ta.save), and from torch's state dict
    ta.save(ours[0].state_dict(), tmp_path / "opt.npz")
    for saved in (ta.load(tmp_path / "opt.npz"), theirs[0].state_dict()):
        w, b = (ta.tensor(a.copy(), requires_grad=True) for a in full[2])
        opt = make(ta, w, b)
        opt.load_state_dict(saved)
        assert opt.state[w]["step"] == 3 and isinstance(opt.state[w]["step"], int)
        assert isinstance(opt.state[w]["momentum_buffer"], ta.Tensor)
        assert opt.state[w]["momentum_buffer"].dtype == ta.float64
        for _ in range(3):
            opt.zero_grad()
            ((ta.tensor(x) @ w + b - ta.tensor(y)) ** 2).mean().backward()
            opt.step()
        np.testing.assert_allclose(w.numpy(), full[5][0], rtol=1e-12)
        np.testing.assert_allclose(b.numpy(), full[5][1], rtol=1e-12)
    # copies keep the state on the copied parameters, as it was (ints stay ints)
    mine = []
    _model_run(ta, lambda lib, w, b: _TaSGD([w, b], lr=0.1, momentum=0.9), 3, w0, b0, x, y, mine)
    for clone in (copy.deepcopy(mine[0]), pickle.loads(pickle.dumps(mine[0]))):
        p = clone.param_groups[0]["params"][0]
        assert clone.state[p]["step"] == 3 and type(clone.state[p]["step"]) is int


def test_a_subclass_load_casts_state_to_the_parameters_dtype_as_torch():
    for lib in (ta, torch):
        class Keeps(lib.optim.Optimizer):
            def __init__(self, params, lib=lib):
                self.lib = lib
                super().__init__(params, {"lr": 0.1})

            def step(self, closure=None):
                f64 = self.lib.float64
                for p in self.param_groups[0]["params"]:
                    self.state[p].update(buf=self.lib.ones(2, dtype=f64),
                                         step=self.lib.tensor(2.0), note="hi",
                                         pair=[self.lib.ones(1, dtype=f64), 3])

        w = lib.zeros(2, requires_grad=True)  # float32
        opt = Keeps([w])
        opt.step()
        other = Keeps([lib.zeros(2, requires_grad=True)])
        other.load_state_dict(opt.state_dict())
        (state,) = other.state.values()
        assert state["buf"].dtype == lib.float32  # cast to the parameter's dtype
        assert state["step"].dtype == lib.float32  # "step": as saved (torch's float32 tensor)
        assert state["pair"][0].dtype == lib.float32 and state["pair"][1] == 3
        if lib is ta:  # (torch's _cast rebuilds a string as str(generator): a bug not copied)
            assert state["note"] == "hi"


# ---- Adadelta ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [dict(), dict(lr=0.5, rho=0.5, eps=1e-3, weight_decay=0.1),
                                    dict(lr=2.0, maximize=True, foreach=False)])
def test_adadelta_matches_torch_step_by_step(problem, kwargs):
    w0, b0, x, y = problem

    def make(lib, w, b):
        return lib.optim.Adadelta([w, b], **kwargs)

    for (wa, ba), (wt, bt) in zip(_model_run(ta, make, 8, w0, b0, x, y),
                                  _model_run(torch, make, 8, w0, b0, x, y), strict=True):
        np.testing.assert_allclose(wa, wt, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(ba, bt, rtol=1e-12, atol=1e-14)


def test_adadelta_state_settings_and_refusals_as_torch(problem):
    w0, b0, x, y = problem
    ours, theirs = [], []
    _model_run(ta, lambda lib, w, b: lib.optim.Adadelta([w, b], lr=0.5), 2, w0, b0, x, y, ours)
    _model_run(torch, lambda lib, w, b: lib.optim.Adadelta([w, b], lr=0.5), 2, w0, b0, x, y, theirs)
    sd, tsd = ours[0].state_dict(), theirs[0].state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert list(sd["state"][0]) == list(tsd["state"][0]) == ["step", "square_avg", "acc_delta"]
    assert float(sd["state"][0]["step"]) == 2.0 and sd["state"][0]["step"].dtype == ta.float32
    assert optim.Adadelta([ta.zeros(1, requires_grad=True)], 0.3, 0.7).defaults["rho"] == 0.7
    for bad in (dict(rho=1.5), dict(lr=-1.0), dict(eps=-1e-3), dict(weight_decay=-0.1)):
        with pytest.raises(ValueError):
            torch.optim.Adadelta([torch.zeros(1, requires_grad=True)], **bad)
        with pytest.raises(ValueError):
            optim.Adadelta([ta.zeros(1, requires_grad=True)], **bad)


# ---- LBFGS -------------------------------------------------------------------------------------


def _rosenbrock(x):
    return ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()


def _lbfgs_run(lib, steps, start=None, state_from=None, **kwargs):
    x = lib.tensor(np.array([-1.2, 1.0, 0.5, -0.3]) if start is None else start,
                 dtype=lib.float64, requires_grad=True)
    opt = lib.optim.LBFGS([x], **kwargs)
    if state_from is not None:
        opt.load_state_dict(state_from)

    def closure():
        opt.zero_grad()
        loss = _rosenbrock(x)
        loss.backward()
        return loss

    trace = [(float(opt.step(closure).detach()), x.detach().numpy().copy()) for _ in range(steps)]
    return trace, opt


@pytest.mark.parametrize("kwargs", [dict(history_size=5),
                                    dict(line_search_fn="strong_wolfe", history_size=5),
                                    dict(lr=0.5, max_iter=7, history_size=3),
                                    dict(line_search_fn="strong_wolfe", max_iter=4, max_eval=6,
                                         tolerance_change=1e-6)])
def test_lbfgs_follows_torchs_iterations(kwargs):
    """float64: the same iterates, losses and closure calls as torch's LBFGS (to rounding)."""
    ours, opt = _lbfgs_run(ta, 4, **kwargs)
    theirs, topt = _lbfgs_run(torch, 4, **kwargs)
    for (la, xa), (lt, xt) in zip(ours, theirs, strict=True):
        assert la == pytest.approx(lt, rel=1e-12)
        np.testing.assert_allclose(xa, xt, rtol=1e-10, atol=1e-12)
    (state,), (tstate,) = opt.state.values(), topt.state.values()
    assert sorted(state) == sorted(tstate)
    assert (state["func_evals"], state["n_iter"]) == (tstate["func_evals"], tstate["n_iter"])
    assert len(state["old_dirs"]) == len(tstate["old_dirs"])


def test_lbfgs_resumes_from_torchs_state_dict_and_its_own():
    first, topt = _lbfgs_run(torch, 2, history_size=4)
    full, _ = _lbfgs_run(torch, 4, history_size=4)
    for saved in (topt.state_dict(), _lbfgs_run(ta, 2, history_size=4)[1].state_dict()):
        ours, _ = _lbfgs_run(ta, 2, start=first[-1][1], state_from=saved, history_size=4)
        for (la, xa), (lt, xt) in zip(ours, full[2:], strict=True):
            assert la == pytest.approx(lt, rel=1e-10)
            np.testing.assert_allclose(xa, xt, rtol=1e-10, atol=1e-12)


def test_lbfgs_refuses_groups_and_unknown_line_searches():
    x = ta.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="per-parameter options"):
        optim.LBFGS([{"params": [x]}, {"params": [ta.zeros(1, requires_grad=True)]}])
    with pytest.raises(ValueError, match="strong_wolfe"):
        optim.LBFGS([x], line_search_fn="backtracking")


# ---- schedulers --------------------------------------------------------------------------------


def test_lrscheduler_under_its_old_name_subclasses_as_torchs():
    for lib in (ta, torch):
        class Halving(lib.optim.lr_scheduler._LRScheduler):
            def get_lr(self):
                return [lr * 0.5 ** self.last_epoch for lr in self.base_lrs]

        opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=1.0)
        s = Halving(opt)
        for _ in range(3):
            opt.step()
            s.step()
        assert s.get_last_lr() == [0.125]
        assert Halving.__mro__[1].__name__ == "_LRScheduler"
        assert issubclass(Halving, lib.optim.lr_scheduler.LRScheduler)


class _Decay:
    def __init__(self):
        self.k = 0.7

    def __call__(self, x):
        return self.k**x


CYCLIC = [("SGD", dict(lr=0.1, momentum=0.9), dict(base_lr=0.01, max_lr=0.1, step_size_up=4)),
          ("SGD", dict(lr=0.1, momentum=0.9),
           dict(base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=3, step_size_down=5,
                mode="triangular2", base_momentum=[0.7, 0.75])),
          ("Adam", dict(lr=0.1),
           dict(base_lr=0.01, max_lr=0.1, step_size_up=4, mode="exp_range", gamma=0.9)),
          ("SGD", dict(lr=0.1, momentum=0.5),
           dict(base_lr=0.01, max_lr=0.1, step_size_up=2, scale_fn=lambda x: 0.5**x,
                scale_mode="iterations")),
          ("Adam", dict(lr=0.1), dict(base_lr=0.01, max_lr=0.1, step_size_up=2,
                                      scale_fn=_Decay())),
          ("Adagrad", dict(lr=0.1),
           dict(base_lr=0.01, max_lr=0.1, cycle_momentum=False, step_size_up=3))]


@pytest.mark.parametrize("opt_name,okw,kw", CYCLIC)
def test_cyclic_lr_matches_torch(opt_name, okw, kw):
    def run(lib):
        groups = [{"params": [lib.zeros(2, requires_grad=True)]},
                  {"params": [lib.zeros(1, requires_grad=True)]}]
        opt = getattr(lib.optim, opt_name)(groups, **okw)
        s = lib.optim.lr_scheduler.CyclicLR(opt, **kw)
        out = []
        for _ in range(20):
            opt.step()
            s.step()
            out.append((s.get_last_lr(), [g.get("momentum", g.get("betas", (None,))[0])
                                          for g in opt.param_groups]))
        return out

    assert run(ta) == run(torch)


def test_cyclic_lr_state_dict_saves_a_callable_objects_attributes_and_no_function():
    def make(fn, lib=ta):
        opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
        return opt, lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=3, scale_fn=fn)

    for fn in (_Decay(), lambda x: 1.0):
        opt, s = make(fn)
        for _ in range(4):
            opt.step()
            s.step()
        state = s.state_dict()
        tstate = make(fn, torch)[1].state_dict()
        assert {k for k in state if not k.startswith("_")} == \
            {k for k in tstate if not k.startswith("_")}
        assert state["_scale_fn_custom"] == (None if not isinstance(fn, _Decay) else {"k": 0.7})
        buf = io.BytesIO()
        ta.save(state, buf)  # plain numbers and lists: tinyattn's checkpoints take them
        buf.seek(0)
        fresh = _Decay() if isinstance(fn, _Decay) else fn
        if isinstance(fresh, _Decay):
            fresh.k = 0.1
        opt2, s2 = make(fresh)
        s2.load_state_dict(ta.load(buf))
        assert s2.last_epoch == 4 and (not isinstance(fresh, _Decay) or fresh.k == 0.7)
        opt.step()
        s.step()
        opt2.step()
        s2.step()
        assert s2.get_last_lr() == s.get_last_lr()


def test_cyclic_lr_refuses_as_torch():
    opt = ta.optim.Adagrad([ta.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        ta.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1)
    with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
        ta.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, mode="sine", cycle_momentum=False)
    with pytest.raises(ValueError, match="base_lr must have the same length"):
        ta.optim.lr_scheduler.CyclicLR(opt, [0.01, 0.02], 0.1, cycle_momentum=False)
