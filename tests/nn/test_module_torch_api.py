"""Module and container methods written as torch code writes them, compared with torch:
forward hooks, parameters/buffers with prefix/recurse, state_dict(prefix, keep_vars), to() in
its forms, add_module/register_parameter, Sequential(OrderedDict), list-like containers, and
Tensor.register_hook."""

from collections import OrderedDict

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn

torch = pytest.importorskip("torch")


def pair(seed=0):
    """The same two-layer MLP in both libraries (same weights)."""
    ours = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    rng = np.random.default_rng(seed)
    state = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32)
             for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    return ours, theirs


X = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)


def _hooked_run(lib, model):
    """The model's output with hooks on, and what the hooks saw."""
    seen = []
    model[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))  # changes the input
    model[0].register_forward_hook(lambda m, args, out: seen.append(out.detach().numpy()))
    model[2].register_forward_hook(lambda m, args, out: out + 1)  # changes the output
    gone = model[2].register_forward_hook(lambda m, args, out: out * 0)
    gone.remove()
    first = model[1].register_forward_hook(lambda m, args, out: seen.append("first"),
                                           prepend=True)
    model[1].register_forward_hook(lambda m, a, kw, out: seen.append(sorted(kw)),
                                   with_kwargs=True)
    out = model(lib.tensor(X))
    first.remove()
    model(lib.tensor(X))
    return out.detach().numpy(), seen


def test_forward_hooks_see_and_change_inputs_and_outputs_as_in_torch():
    (got, seen), (want, tseen) = (_hooked_run(lib, m) for lib, m in zip((ta, torch), pair(),
                                                                         strict=True))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert [s if isinstance(s, (str, list)) else None for s in seen] == \
        [s if isinstance(s, (str, list)) else None for s in tseen]
    np.testing.assert_allclose(seen[0], tseen[0], rtol=1e-5, atol=1e-6)


def test_a_pre_hook_with_kwargs_replaces_args_and_kwargs():
    m = nn.Linear(3, 2)
    m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 0,), kwargs),
                                with_kwargs=True)
    np.testing.assert_allclose(m(ta.tensor(X)).detach().numpy(),
                               np.broadcast_to(m.bias.detach().numpy(), (5, 2)))
    with pytest.raises(TypeError, match="register_forward_hook: the hook must be callable"):
        m.register_forward_hook("not a function")


def test_parameters_buffers_and_state_dict_take_torchs_arguments():
    ours, theirs = pair()
    for kwargs in [{}, {"prefix": "net"}, {"recurse": False}]:
        assert [k for k, _ in ours.named_parameters(**kwargs)] == \
            [k for k, _ in theirs.named_parameters(**kwargs)]
    assert len(list(ours[0].parameters(recurse=False))) == 2
    assert list(ours.state_dict(prefix="model.")) == list(theirs.state_dict(prefix="model."))
    kept = ours.state_dict(keep_vars=True)
    assert kept["0.weight"] is ours[0].weight and not ours.state_dict()["0.weight"].requires_grad
    dest = {"other": 1}
    with pytest.warns(FutureWarning, match="positional"):  # deprecated, as torch's
        assert ours.state_dict(dest) is dest and "0.bias" in dest
    shared = nn.Linear(2, 2)
    tied = nn.Sequential(shared, shared)
    tshared = torch.nn.Linear(2, 2)
    ttied = torch.nn.Sequential(tshared, tshared)
    assert [k for k, _ in tied.named_parameters(remove_duplicate=False)] == \
        [k for k, _ in ttied.named_parameters(remove_duplicate=False)]
    assert [k for k, _ in tied.named_modules(remove_duplicate=False)] == \
        [k for k, _ in ttied.named_modules(remove_duplicate=False)]


def test_add_module_register_parameter_and_to_in_torchs_forms():
    m = nn.Module()
    m.add_module("fc", nn.Linear(2, 3))
    m.register_module("act", nn.ReLU())
    m.register_parameter("scale", nn.Parameter(ta.ones(3)))
    m.register_parameter("unused", None)
    assert [k for k, _ in m.named_parameters()] == ["scale", "fc.weight", "fc.bias"]
    assert m.unused is None and list(m.state_dict()) == ["scale", "fc.weight", "fc.bias"]
    with pytest.raises(TypeError, match="register_parameter: 'w' must be a Parameter"):
        m.register_parameter("w", ta.ones(2))
    with pytest.raises(KeyError, match="add_module: the name must be"):
        m.add_module("a.b", nn.ReLU())
    assert m.to("cpu", ta.float64) is m and m.fc.weight.dtype == np.float64
    assert m.to(dtype=ta.float32).scale.dtype == np.float32 and m.cpu() is m
    assert m.type(ta.float64).fc.bias.dtype == np.float64
    assert m.to(ta.ones(1, dtype=ta.float32)).fc.bias.dtype == np.float32


TO_FORMS = [("half", (), {}), ("float", (), {}), ("double", (), {}), ("to", ("cpu",), {}),
            ("to", (np.float64,), {}), ("to", ("cpu", np.float16), {}),
            ("to", (), {"dtype": np.float32}), ("cpu", (), {})]


def _torch_form(args, kwargs):
    """A TO_FORMS entry as torch writes it (torch.float64 for np.float64)."""
    def theirs(a):
        return getattr(torch, np.dtype(a).name) if isinstance(a, type) else a
    return [theirs(a) for a in args], {k: theirs(v) for k, v in kwargs.items()}


@pytest.mark.parametrize("method,args,kwargs", TO_FORMS)
def test_to_half_float_double_keep_the_gradients_and_cast_them_as_torch(method, args, kwargs):
    ours, theirs = pair()
    ours(ta.tensor(X)).sum().backward()
    theirs(torch.from_numpy(X)).sum().backward()
    ours.fc_no_grad = nn.Linear(1, 1)  # a parameter without a gradient stays without one
    theirs.fc_no_grad = torch.nn.Linear(1, 1)
    before = {name: p.grad.numpy().copy() for name, p in ours.named_parameters()
              if p.grad is not None}
    targs, tkwargs = _torch_form(args, kwargs)
    assert getattr(ours, method)(*args, **kwargs) is ours
    assert getattr(theirs, method)(*targs, **tkwargs) is theirs
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None), name
        assert p.dtype == np.dtype(str(q.dtype).removeprefix("torch.")), name
        if q.grad is not None:  # the same values, cast (torch's: the same up to rounding)
            assert p.grad.dtype == p.dtype and p.grad.backend is p.backend, name
            np.testing.assert_array_equal(p.grad.numpy(), before[name].astype(p.dtype))
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-3, atol=1e-6)


def test_sequential_from_an_ordered_dict_and_list_like_containers_as_in_torch():
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    tnamed = torch.nn.Sequential(OrderedDict([("fc", torch.nn.Linear(2, 3)),
                                              ("act", torch.nn.ReLU())]))
    assert list(named.state_dict()) == list(tnamed.state_dict()) == ["fc.weight", "fc.bias"]
    assert named(ta.ones(1, 2)).shape == (1, 3)
    with pytest.raises(TypeError, match="Sequential: function is not a Module subclass"):
        nn.Sequential(nn.ReLU(), lambda x: x)
    for lib in (nn, torch.nn):
        ml = lib.ModuleList([lib.ReLU(), lib.Tanh()])
        ml.insert(1, lib.Sigmoid())
        ml.extend([lib.GELU()])
        assert type(ml.pop(0)).__name__ == "ReLU"
        ml[0] = lib.Identity()
        del ml[1]
        joined = ml + lib.ModuleList([lib.ReLU()])
        names = [(n, type(m).__name__) for n, m in joined.named_children()]
        if lib is nn:
            ours = names
        else:
            assert ours == names


def _hooked_grads(lib):
    x = lib.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    y = x * 2
    y.register_hook(lambda g: g * 10)  # replaces y's gradient for everything upstream
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    y.register_hook(lambda g: g + 1000).remove()
    y.retain_grad()
    ((y * y).sum() + y.sum()).backward()
    return x.grad.numpy(), y.grad.numpy(), seen


def test_register_hook_changes_the_gradient_flowing_on_as_in_torch():
    for got, want in zip(_hooked_grads(ta), _hooked_grads(torch), strict=True):
        np.testing.assert_allclose(np.array(got), np.array(want))
    ta_x = ta.tensor([1.0, 2.0], requires_grad=True)
    kept = np.array([5.0, 6.0], dtype=np.float32)  # x.dtype: no cast, the very array
    ta_x.register_hook(lambda g: None)  # keeps the gradient; the next hook still runs
    ta_x.register_hook(lambda g: kept)  # an array is taken as the new gradient
    handle = ta_x.register_hook(lambda g: g * 100)
    handle.remove()
    handle.remove()  # twice: nothing happens
    for _ in range(2):
        (ta_x * 3).sum().backward()
    assert ta_x.grad.numpy().tolist() == [10.0, 12.0] and kept.tolist() == [5.0, 6.0]
    with pytest.raises(ta.GraphError, match="register_hook: this tensor does not require grad"):
        ta.ones(2).register_hook(lambda g: g)
    w = ta.ones(3, requires_grad=True)
    w.register_hook(lambda g: ta.ones(2))
    with pytest.raises(ta.ShapeError, match=r"register_hook: a hook returned .* \(2,\) .* \(3,\)"):
        (w * 2).sum().backward()
    v = ta.ones(3, requires_grad=True)
    v.register_hook(lambda g: g.double())  # another dtype: refused, as torch refuses it
    with pytest.raises(ta.ShapeError, match="register_hook: .* float64 for a tensor .* float32"):
        (v * 2).sum().backward()


def test_constructors_take_device_and_embedding_from_pretrained_as_in_torch():
    for m in [nn.Linear(2, 3, device="cpu", dtype=ta.float64), nn.LayerNorm(3, device="cpu"),
              nn.RMSNorm(3, device="cpu"), nn.Embedding(4, 2, device="cpu"),
              nn.MultiheadAttention(4, 2, device="cpu")]:
        assert all(p.backend.name == "numpy" for p in m.parameters())
    table = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    for freeze in (True, False):
        ours = nn.Embedding.from_pretrained(ta.tensor(table), freeze=freeze, padding_idx=0)
        theirs = torch.nn.Embedding.from_pretrained(torch.tensor(table), freeze=freeze,
                                                    padding_idx=0)
        assert ours.weight.requires_grad == theirs.weight.requires_grad == (not freeze)
        ids = [[2, 0, 1]]
        out, tout = ours(ta.tensor(ids)), theirs(torch.tensor(ids))
        np.testing.assert_array_equal(out.detach().numpy(), tout.detach().numpy())
        if not freeze:  # the padding row still gets no gradient
            out.sum().backward()
            tout.sum().backward()
            np.testing.assert_array_equal(ours.weight.grad.numpy(), theirs.weight.grad.numpy())
    with pytest.raises(ta.ShapeError, match=r"from_pretrained: embeddings must be 2-D"):
        nn.Embedding.from_pretrained(ta.ones(3))


def test_hook_arguments_order_and_single_values_as_in_torch():
    """A pre-hook gets the module and may return one value (not a tuple); forward keeps its
    keyword arguments; hooks run in the order registered unless prepend=True."""
    calls = []

    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    m = Scale()
    m.register_forward_pre_hook(lambda mod, args: calls.append(("pre", mod is m)))
    m.register_forward_pre_hook(lambda mod, args: (calls.append("plus"), args[0] + 1)[1])
    # (one value returned: the new input)
    m.register_forward_hook(lambda mod, args, out: calls.append(("a", mod is m, len(args))))
    m.register_forward_hook(lambda mod, args, out: calls.append(("b", out.numpy().tolist())))
    m.register_forward_hook(lambda mod, args, out: calls.append("first"), prepend=True)
    m.register_forward_pre_hook(lambda mod, args: calls.append("pre first"), prepend=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: calls.append(
        (mod is m, args[0].numpy().tolist(), kwargs, out.numpy().tolist())), with_kwargs=True)
    m.register_forward_pre_hook(lambda mod, args, kwargs: calls.append(("kw", mod is m, kwargs)),
                                with_kwargs=True)
    out = m(ta.tensor([1.0, 2.0]), factor=3.0)
    assert out.numpy().tolist() == [6.0, 9.0]
    assert calls == ["pre first", ("pre", True), "plus", ("kw", True, {"factor": 3.0}), "first",
                     ("a", True, 1), ("b", [6.0, 9.0]),
                     (True, [2.0, 3.0], {"factor": 3.0}, [6.0, 9.0])]


def test_add_module_register_parameter_and_containers_name_what_is_wrong():
    m = nn.Module()
    with pytest.raises(KeyError, match="add_module: the name must be"):
        m.add_module(5, nn.ReLU())
    with pytest.raises(TypeError, match="add_module: function is not a Module subclass"):
        m.add_module("f", lambda x: x)
    with pytest.raises(KeyError, match="register_parameter: the name must be"):
        m.register_parameter("", nn.Parameter(ta.ones(1)))
    ml = nn.ModuleList([nn.ReLU()])
    with pytest.raises(TypeError, match="ModuleList: function is not a Module subclass"):
        ml.insert(0, lambda x: x)
    with pytest.raises(TypeError, match="ModuleList: int is not a Module subclass"):
        ml[0] = 3
    joined = nn.Sequential(nn.ReLU(), nn.Tanh()) + nn.Sequential(nn.GELU())
    assert type(joined) is nn.Sequential
    assert [type(c).__name__ for c in joined] == ["ReLU", "Tanh", "GELU"]


def test_distance_modules_match_torch():
    a = np.random.default_rng(0).standard_normal((3, 4))
    b = np.random.default_rng(1).standard_normal((3, 4))
    cases = [((), 1.0), ((0, 1e-3), 1.0), ((1, 1e-3), 1e-4)]  # 1e-4: norms below eps
    for args, scale in cases:
        got = nn.CosineSimilarity(*args)(ta.tensor(a * scale), ta.tensor(b))
        want = torch.nn.CosineSimilarity(*args)(torch.tensor(a * scale), torch.tensor(b))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    for kwargs in [{}, {"p": 1.0, "eps": 0.5, "keepdim": True}]:
        got = nn.PairwiseDistance(**kwargs)(ta.tensor(a), ta.tensor(b))
        want = torch.nn.PairwiseDistance(**kwargs)(torch.tensor(a), torch.tensor(b))
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_embedding_from_pretrained_defaults_and_dtypes_as_in_torch():
    table = np.arange(6.0).reshape(3, 2)  # float64
    ours, theirs = nn.Embedding.from_pretrained(table), torch.nn.Embedding.from_pretrained(
        torch.tensor(table))
    assert not ours.weight.requires_grad and not theirs.weight.requires_grad  # frozen
    assert ours.weight.dtype == np.float64
    assert nn.Embedding.from_pretrained(table.tolist()).weight.dtype == np.float32  # a list
    np.testing.assert_array_equal(ours(ta.tensor([2, 0])).numpy(),
                                  theirs(torch.tensor([2, 0])).numpy())


# ---- full backward hooks -------------------------------------------------------------------------


def _arrays(grads):
    """Copies (torch's numpy() shares the memory a later backward may add into)."""
    return [None if g is None else g.detach().numpy().copy() for g in grads]


def _same_grads(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_full_backward_hooks_see_what_torchs_see_in_backward_order():
    ours, theirs = pair()
    seen = {"ours": [], "theirs": []}
    for name, model in (("ours", ours), ("theirs", theirs)):
        for i, layer in enumerate(model):
            layer.register_full_backward_hook(
                lambda m, gi, go, i=i, log=seen[name]: log.append((i, _arrays(gi),
                                                                    _arrays(go))))
    out = ours(ta.tensor(X, requires_grad=True))
    (out ** 2).sum().backward()
    tout = theirs(torch.tensor(X, requires_grad=True))
    (tout ** 2).sum().backward()
    assert [i for i, *_ in seen["ours"]] == [i for i, *_ in seen["theirs"]] == [2, 1, 0]
    for (_, gi, go), (_, tgi, tgo) in zip(seen["ours"], seen["theirs"], strict=True):
        _same_grads(gi, tgi)
        _same_grads(go, tgo)


def test_a_full_backward_hook_may_replace_grad_input_and_sees_every_input():
    class Mix(nn.Module):
        def forward(self, a, scale, b):
            return a * b * scale

    class TMix(torch.nn.Module):
        def forward(self, a, scale, b):
            return a * b * scale

    rng = np.random.default_rng(0)
    av, bv = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    results = []
    for lib, module in ((ta, Mix()), (torch, TMix())):
        log = []

        def hook(m, gi, go, log=log):
            log.append((_arrays(gi), _arrays(go)))
            return (gi[0] * 10, None, gi[2])  # the first input's gradient, ten times

        handle = module.register_full_backward_hook(hook)
        a, b = lib.tensor(av, requires_grad=True), lib.tensor(bv, requires_grad=True)
        module(a, 2.0, b).sum().backward()
        handle.remove()
        module(a, 2.0, b).sum().backward()  # the hook gone: added plainly
        results.append((log, a.grad.numpy(), b.grad.numpy()))
    (log, ga, gb), (tlog, tga, tgb) = results
    assert len(log) == len(tlog) == 1
    _same_grads(log[0][0], tlog[0][0])
    _same_grads(log[0][1], tlog[0][1])
    np.testing.assert_allclose(ga, tga, rtol=1e-12)
    np.testing.assert_allclose(ga, bv * 2 * 11, rtol=1e-12)  # 10x once, then 1x
    np.testing.assert_allclose(gb, tgb, rtol=1e-12)


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # torch's note, the case
def test_a_full_backward_hook_runs_once_per_call_and_without_inputs_that_need_grad():
    ours, theirs = pair()
    logs = []
    for model, lib in ((ours, ta), (theirs, torch)):
        log = []
        model[0].register_full_backward_hook(lambda m, gi, go, log=log: log.append(
            (_arrays(gi), _arrays(go))))
        x = lib.tensor(X)  # needs no gradient: grad_input is (None,)
        (model(x).sum() + model(x * 2).sum()).backward()
        logs.append(log)
    assert len(logs[0]) == len(logs[1]) == 2
    for (gi, go), (tgi, tgo) in zip(*logs, strict=True):
        assert gi == [None] and tgi == [None]
        _same_grads(go, tgo)


def test_full_backward_hook_errors():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="register_full_backward_hook: the hook must be "
                                        "callable"):
        m.register_full_backward_hook(3)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(ta.ShapeError, match="Linear: a full backward hook must return None or "
                                            "1 gradients"):
        m(ta.ones(1, 2, requires_grad=True)).sum().backward()


def test_a_captured_step_through_a_module_with_backward_hooks_stays_eager_and_says_why():
    lin = nn.Linear(2, 2)
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append(go[0].shape))
    step = ta.capture(lambda x: lin(x).sum())
    with pytest.warns(UserWarning, match="capture: Linear has backward hooks, which a replay "
                                         "would not call"):
        for _ in range(3):
            step(ta.ones(1, 2))
    assert step.state.startswith("eager") and seen == [(1, 2)] * 3  # every (eager) call


def test_a_second_backward_calls_the_hook_again_with_its_own_gradients():
    """backward twice through one graph (retain_graph): the hook runs each time, with that
    pass's gradients, for a module whose inputs need no gradient (it fires from its outputs)."""
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(ta.ones(2))

        def forward(self, x):
            return x * self.p, x * self.p * 3

    m = Two()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(
        (gi, [g.numpy().tolist() for g in go])))
    a, b = m(ta.ones(2))
    loss = a.sum() + (b * 2).sum()
    loss.backward(retain_graph=True)
    (loss * 10).backward()
    assert seen == [((None,), [[1.0, 1.0], [2.0, 2.0]]), ((None,), [[10.0, 10.0], [20.0, 20.0]])]


def test_full_backward_hooks_with_three_inputs_of_two_dtypes_in_their_order():
    """Three inputs (float32 and float64) reach forward in their own dtypes and the hook sees
    each one's gradient in it; what a hook returns is what the next one sees, a None in it
    stops that input's gradient (.grad stays None, as torch's); hooks run in order
    (prepend=True first) and are given the module; a non-tensor output is skipped."""
    class Three(nn.Module):
        def forward(self, a, b, c):
            self.dtypes = (a.dtype, b.dtype, c.dtype)
            return a * b * c, "a label"

    m = Three()
    calls = []

    def first(mod, gi, go):
        calls.append(("first", mod is m, [(g.dtype, g.numpy().tolist()) for g in gi], go[1]))
        return (None, gi[1] * 2, None)

    def second(mod, gi, go):
        calls.append(("second", mod is m, [None if g is None else g.numpy().tolist()
                                           for g in gi], None))

    m.register_full_backward_hook(second)
    m.register_full_backward_hook(first, prepend=True)
    a = ta.tensor([1.0, 2.0], dtype=ta.float32, requires_grad=True)
    b = ta.tensor([3.0, 4.0], dtype=ta.float64, requires_grad=True)
    c = ta.tensor([5.0, 6.0], dtype=ta.float32, requires_grad=True)
    out, label = m(a, b, c)
    out.sum().backward()
    assert m.dtypes == (np.float32, np.float64, np.float32) and label == "a label"
    assert calls[0] == ("first", True, [(np.float32, [15.0, 24.0]), (np.float64, [5.0, 12.0]),
                                        (np.float32, [3.0, 8.0])], None)
    assert calls[1] == ("second", True, [None, [10.0, 24.0], None], None)
    assert a.grad is None and b.grad.tolist() == [10.0, 24.0]  # (None stops it: as torch)
    assert c.grad is None and b.grad.dtype == np.float64


def test_hooks_need_callables_named_by_their_register_function_and_no_grad_skips_them():
    m = nn.Linear(2, 2)
    for name in ("register_forward_pre_hook", "register_forward_hook",
                 "register_full_backward_hook"):
        with pytest.raises(TypeError, match=f"^{name}: the hook must be callable, got 3"):
            getattr(m, name)(3)
    seen = []
    m.register_full_backward_hook(lambda *a: seen.append(a))
    with ta.no_grad():
        assert m(ta.ones(1, 2, requires_grad=True)).shape == (1, 2)
    assert seen == []
    order = []
    for k in range(3):  # registered in turn, run in turn (prepend defaults to False)
        m.register_full_backward_hook(lambda *a, k=k: order.append(k))
    m(ta.ones(1, 2, requires_grad=True)).sum().backward()
    assert order == [0, 1, 2] and len(seen) == 1


# ---- load_state_dict as torch's: what it takes, assign=True, the errors it raises -------------


def test_load_state_dict_of_something_not_dict_like_is_torchs_type_error():
    ours, theirs = pair()
    for bad in ([("0.weight", 1)], "0.weight", 3):
        with pytest.raises(TypeError, match=f"Expected state_dict to be dict-like, got "
                                            f"{type(bad)}") as e:
            ours.load_state_dict(bad)
        assert str(e.value).startswith("load_state_dict(Sequential): ")
        with pytest.raises(TypeError, match=f"Expected state_dict to be dict-like, got "
                                            f"{type(bad)}"):
            theirs.load_state_dict(bad)


def test_load_state_dict_mismatches_are_runtime_errors_as_torchs_and_still_value_errors():
    ours, theirs = pair()
    for change in (lambda s: s.pop("0.bias"), lambda s: s.update({"9.weight": np.ones(2)}),
                   lambda s: s.update({"0.weight": np.ones((3, 3), np.float32)})):
        mine = {k: v.numpy() for k, v in ours.state_dict().items()}
        change(mine)
        for exc in (RuntimeError, ValueError, ta.CheckpointError):
            with pytest.raises(exc, match="nothing was loaded"):
                ours.load_state_dict(mine)
        with pytest.raises(RuntimeError):
            theirs.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in mine.items()})


def test_load_state_dict_assign_makes_the_given_tensors_the_parameters_as_torchs():
    ours, theirs = pair()
    ours[0].weight.requires_grad_(False)
    theirs[0].weight.requires_grad_(False)
    given = {k: ta.tensor(v.numpy() + 1.0) for k, v in ours.state_dict().items()}
    given["2.bias"] = nn.Parameter(given["2.bias"])
    bias = given["2.bias"]
    assert ours.load_state_dict(given, assign=True) == ([], [])
    for key, p in ours.named_parameters():
        assert type(p) is nn.Parameter, key
        assert np.shares_memory(p._data, given[key]._data), key  # the given memory, not a copy
    assert ours[2].bias is bias  # a Parameter given is the parameter itself
    assert not ours[0].weight.requires_grad and ours[2].weight.requires_grad  # as they were
    np.testing.assert_array_equal(ours[0].bias.numpy(), given["0.bias"].numpy())
    # torch's, the same
    tgiven = {k: torch.from_numpy(v.numpy().copy()) for k, v in given.items()}
    tgiven["2.bias"] = torch.nn.Parameter(tgiven["2.bias"])
    theirs.load_state_dict(tgiven, assign=True)
    assert type(theirs[0].bias) is torch.nn.Parameter and theirs[2].bias is tgiven["2.bias"]
    assert not theirs[0].weight.requires_grad and theirs[2].weight.requires_grad
    # a float64 value brings its dtype (torch's assign keeps the given tensor's)
    ours.load_state_dict({**given, "0.bias": ta.tensor(np.zeros(4))}, assign=True)
    assert ours[0].bias.dtype == np.float64 and type(ours[0].bias) is nn.Parameter
    theirs.load_state_dict({**tgiven, "0.bias": torch.zeros(4, dtype=torch.float64)},
                           assign=True)
    assert theirs[0].bias.dtype == torch.float64
    # and the layer then refuses float32 inputs, as torch's (tinyattn's promoted them)
    with pytest.raises(RuntimeError, match="same dtype"):
        theirs(torch.randn(2, 3))
    with pytest.raises(ta.DTypeError, match=r"^linear: .*float32 \(2, 3\).*float64 \(4,\)"):
        ours(ta.randn(2, 3))


def test_load_state_dict_assign_refuses_a_mismatch_and_assigns_nothing():
    ours, _ = pair()
    before = {k: v for k, v in ours.named_parameters()}
    given = {k: ta.tensor(v.numpy()) for k, v in ours.state_dict().items()}
    for change, message in [(lambda s: s.update({"0.weight": ta.ones(3, 3)}),
                             r"0\.weight: the checkpoint has shape \(3, 3\)"),
                            (lambda s: s.pop("2.bias"), "missing keys: 2.bias"),
                            (lambda s: s.update({"2.bias": ta.tensor([1, 2])}), "2.bias")]:
        bad = dict(given)
        change(bad)
        with pytest.raises(RuntimeError, match=message):
            ours.load_state_dict(bad, assign=True)
        assert all(p is before[k] for k, p in ours.named_parameters())


def test_load_state_dict_assign_sets_buffers_and_keeps_tied_weights_tied():
    bn = nn.BatchNorm1d(3)
    state = {k: ta.tensor(v.numpy().copy()) for k, v in bn.state_dict().items()}
    bn.load_state_dict(state, assign=True)
    assert bn.running_mean is state["running_mean"] and bn.num_batches_tracked is \
        state["num_batches_tracked"]
    assert type(bn.running_mean) is ta.Tensor and list(bn.state_dict()) == list(state)

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

    m = Tied()
    w = ta.ones(2, 2)
    m.load_state_dict({"a.weight": w, "b.weight": w}, assign=True)
    assert m.a.weight is m.b.weight and np.shares_memory(m.a.weight._data, w._data)


# ---- nn.Parameter: torch's arguments, and the memory of the tensor it is made from --------------


def test_parameter_takes_torchs_arguments():
    for lib, zeros in ((ta, ta.zeros), (torch, torch.zeros)):
        P = lib.nn.Parameter  # noqa: N806
        assert P(zeros(3)).requires_grad and P(data=zeros(3)).requires_grad
        assert not P(zeros(3), requires_grad=False).requires_grad
        assert not P(zeros(3), False).requires_grad  # requires_grad is the second argument
        empty = P()
        assert isinstance(empty, P) and tuple(empty.shape) == (0,) and empty.requires_grad
        ints = P(zeros(2, dtype=lib.int64), requires_grad=False)  # integers: without grad only
        assert not ints.requires_grad and str(ints.dtype).endswith("int64")
    assert nn.Parameter().dtype == np.float32
    with pytest.raises(ta.DTypeError, match="only floating-point tensors can require grad"):
        nn.Parameter(ta.zeros(2, dtype=ta.int64))


def test_a_parameter_shares_the_memory_of_the_tensor_it_is_made_from_as_torchs():
    for lib in (ta, torch):
        w = lib.zeros(2, 2)
        p = lib.nn.Parameter(w)
        lib.nn.init.ones_(w)
        assert p.tolist() == [[1.0, 1.0], [1.0, 1.0]]
        with lib.no_grad():
            p.mul_(3)
        assert w.tolist() == [[3.0, 3.0], [3.0, 3.0]] and p._version == w._version
        e, head = lib.nn.Embedding(3, 2), lib.nn.Linear(2, 3, bias=False)
        head.weight = lib.nn.Parameter(e.weight.data)  # weights tied by hand
        with lib.no_grad():
            e.weight.zero_()
        assert head.weight.abs().sum().item() == 0.0
        q = lib.nn.Parameter(p)  # a Parameter of a Parameter: the same memory again
        with lib.no_grad():
            q.fill_(7.0)
        assert p.tolist() == [[7.0, 7.0], [7.0, 7.0]] and q is not p
    # torch takes only tensors; tinyattn also takes an array (shared, as np.asarray would) and
    # a list (copied, with tensor()'s dtype)
    a = np.zeros(2)
    p = nn.Parameter(a)
    a[0] = 5.0
    assert p.tolist() == [5.0, 0.0] and p.dtype == np.float64
    assert nn.Parameter([1.0, 2.0]).dtype == np.float32


def test_embedding_from_pretrained_shares_the_given_tensor_as_torchs():
    for lib in (ta, torch):
        w = lib.ones(3, 2)
        m = lib.nn.Embedding.from_pretrained(w, freeze=False, padding_idx=1)
        with lib.no_grad():
            m.weight.mul_(5)
        assert w.tolist() == [[5.0, 5.0]] * 3  # (the padding row too: the given values kept)
        assert m.weight.requires_grad and m.padding_idx == 1


# ---- load_state_dict: a (1,) value for a 0-d tensor ----------------------------------------------


def test_load_state_dict_takes_a_one_element_vector_for_a_0d_tensor_as_torchs():
    def build(lib):
        m = lib.nn.Module()
        m.register_buffer("s", lib.tensor(1.0))
        m.p = lib.nn.Parameter(lib.tensor(2.0))
        m.load_state_dict({"s": lib.tensor([3.0]), "p": lib.tensor([4.0])})
        seen = [m.s.tolist(), tuple(m.s.shape), m.p.tolist(), tuple(m.p.shape)]
        for bad in ([5.0, 6.0], [[5.0]], []):  # only exactly (1,)
            with pytest.raises(RuntimeError, match="shape"):
                m.load_state_dict({"s": lib.tensor(bad), "p": lib.tensor(4.0)})
        v = lib.tensor([7.0])
        m.load_state_dict({"s": v, "p": lib.tensor([8.0])}, assign=True)
        seen += [m.s.tolist(), tuple(m.s.shape), m.p.tolist(), tuple(m.p.shape),
                 isinstance(m.p, lib.nn.Parameter), m.p.requires_grad]
        with lib.no_grad():
            v.fill_(9.0)
        seen.append(m.s.tolist())  # assigned: the given memory
        m.register_buffer("one", lib.tensor([1.0]))
        with pytest.raises(RuntimeError, match="shape"):  # not the other way round
            m.load_state_dict({"one": lib.tensor(2.0)}, strict=False)
        return seen

    assert build(ta) == build(torch) == [3.0, (), 4.0, (), 7.0, (), 8.0, (), True, True, 9.0]


# ---- backward hooks that fire from the outputs, backward pre-hooks, always_call -----------------


def _mha_pair():
    ours = nn.MultiheadAttention(8, 2, batch_first=True)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    state = {k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)
    return ours, theirs


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # torch's note, the case
def test_a_full_backward_hook_fires_once_when_an_output_gets_no_gradient_as_torchs():
    """No input requires grad and one output (the attention weights) gets no gradient: the
    hook never fired before (it waited for every output). As torch: once per backward, with
    None for that output's grad_output and a None per input."""
    ours, theirs = _mha_pair()
    t = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    logs = []
    for lib, mha in ((ta, ours), (torch, theirs)):
        log = []
        mha.register_full_backward_hook(lambda m, gi, go, log=log: log.append(
            (gi, _arrays(go))))
        x = lib.tensor(t)
        out, weights = mha(x, x, x)
        assert weights.requires_grad
        out.sum().backward(retain_graph=True)
        (out * 2).sum().backward()
        logs.append(log)
    assert len(logs[0]) == len(logs[1]) == 2
    for (gi, go), (tgi, tgo) in zip(*logs, strict=True):
        assert gi == tgi == (None, None, None)
        _same_grads(go, tgo)
        assert go[1] is None


def _pre_hooked(lib, model, x, full=True):
    """x.grad (or the first weight's gradient, for an x that needs none) and what the hooks
    saw, with a backward pre-hook on the last layer that triples its grad_output."""
    log = []

    def pre(m, go):
        log.append(("pre", _arrays(go)))
        return (go[0] * 3,)

    handle = model[2].register_full_backward_pre_hook(pre)
    if full:
        model[2].register_full_backward_hook(lambda m, gi, go: log.append(("full", _arrays(go))))
    (model(x) ** 2).sum().backward()
    handle.remove()
    model.zero_grad()
    (model(x) ** 2).sum().backward()  # the pre-hook gone
    grad = x.grad if x.requires_grad else model[0].weight.grad
    return grad.detach().numpy().copy(), log


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
@pytest.mark.parametrize("x_grad", [True, False], ids=["input needs grad", "input does not"])
@pytest.mark.parametrize("full", [True, False], ids=["with a full hook", "alone"])
def test_a_full_backward_pre_hook_sees_and_replaces_grad_output_as_torchs(x_grad, full):
    ours, theirs = pair()
    got = _pre_hooked(ta, ours, ta.tensor(X, requires_grad=x_grad), full)
    want = _pre_hooked(torch, theirs, torch.tensor(X, requires_grad=x_grad), full)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    assert [k for k, _ in got[1]] == [k for k, _ in want[1]]
    # the pre-hook once (then removed), the full hook on both passes
    assert [k for k, _ in got[1]] == (["pre", "full", "full"] if full else ["pre"])
    for (_, go), (_, tgo) in zip(got[1], want[1], strict=True):
        _same_grads(go, tgo)  # the full hook sees the tripled grad_output, as torch's


def test_a_full_backward_pre_hook_that_returns_the_wrong_count_is_refused():
    m = nn.Linear(3, 2)
    m.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
    with pytest.raises(ta.ShapeError, match=r"Linear: a full backward pre-hook must return None "
                                            r"or 1 gradients \(one per output, of the shapes "
                                            r"\(1, 2\)\)"):
        m(ta.ones(1, 3)).sum().backward()
    with pytest.raises(TypeError, match="^register_full_backward_pre_hook: the hook must be "
                                        "callable"):
        m.register_full_backward_pre_hook(3)


def _always_called(lib, fail):
    """What always_call hooks (and a plain one) saw when forward or a hook raised."""
    m = lib.nn.Linear(3, 3)
    seen = []
    m.register_forward_hook(lambda mod, a, o: seen.append(("plain", o is None)))
    m.register_forward_hook(lambda mod, a, kw, o: seen.append(("kw", o is None, kw)),
                            with_kwargs=True, always_call=True)
    first = m.register_forward_hook(lambda mod, a, o: seen.append(("first", o is None)),
                                    always_call=True, prepend=True)
    if fail == "hook":
        m.register_forward_hook(lambda mod, a, o: 1 / 0, prepend=True)
    x = lib.ones(2, 4 if fail == "forward" else 3)
    with pytest.raises((RuntimeError, ValueError, ZeroDivisionError)):
        m(x)
    first.remove()
    if fail == "forward":
        with pytest.raises((RuntimeError, ValueError)):
            m(x)
    return seen


@pytest.mark.parametrize("fail", ["forward", "hook"])
def test_forward_hooks_with_always_call_run_when_forward_raised_as_torchs(fail):
    """register_forward_hook(always_call=True) was a TypeError: as torch, such a hook runs
    even when forward (or a hook before it) raised, with output None if forward did not
    return, once per call; the error goes on; remove() takes it off."""
    assert _always_called(ta, fail) == _always_called(torch, fail)
    assert _always_called(ta, "forward") == [("first", True), ("kw", True, {}),
                                             ("kw", True, {})]


def test_an_always_call_hook_that_raises_after_forward_raised_is_a_warning_as_torchs():
    m = nn.Linear(3, 3)
    m.register_forward_hook(lambda mod, a, o: o.shape, always_call=True)  # o None: raises
    with pytest.warns(UserWarning, match="module forward hook with ``always_call=True`` raised "
                                         "an exception that was silenced"), \
            pytest.raises(ta.ShapeError):
        m(ta.ones(2, 4))
