"""Module._forward_hooks, _forward_pre_hooks, _backward_hooks and _backward_pre_hooks: torch's
{key: hook} dicts, which code written for torch reads and clears to take every hook off a
model (`for m in model.modules(): m._forward_hooks.clear()`). Here they are live views of the
module's hooks: what they show is what runs."""

from collections import OrderedDict

import tinyattn as ta


def _model():
    ta.manual_seed(0)
    return ta.nn.Sequential(ta.nn.Linear(3, 4), ta.nn.ReLU(), ta.nn.Linear(4, 2))


def test_the_dicts_show_the_registered_hooks_in_order():
    m = _model()[0]
    assert len(m._forward_hooks) == 0 and dict(m._forward_pre_hooks) == {}

    def first(mod, args, out):
        return None

    def second(mod, args, out):
        return None

    def pre(mod, args):
        return None

    h1, h2 = m.register_forward_hook(first), m.register_forward_hook(second)
    hp = m.register_forward_pre_hook(pre)
    assert list(m._forward_hooks.values()) == [first, second]
    assert list(m._forward_hooks) == [h1.id, h2.id] and m._forward_hooks[h1.id] is first
    assert list(m._forward_pre_hooks.values()) == [pre] and hp.id in m._forward_pre_hooks
    h1.remove()
    assert list(m._forward_hooks.values()) == [second]


def test_clearing_every_module_takes_every_hook_off():
    model, seen = _model(), []
    for mod in model.modules():
        mod.register_forward_hook(lambda mod, args, out: seen.append(type(mod).__name__))
        mod.register_forward_pre_hook(lambda mod, args: seen.append("pre"))
        mod.register_full_backward_hook(lambda mod, gi, go: seen.append("backward"))
    model(ta.randn(2, 3)).sum().backward()
    assert "Linear" in seen and "pre" in seen and "backward" in seen
    for mod in model.modules():
        mod._forward_hooks.clear()
        mod._forward_pre_hooks.clear()
        mod._backward_hooks.clear()
    seen.clear()
    model(ta.randn(2, 3)).sum().backward()
    assert seen == []


def test_a_dict_assigned_replaces_the_hooks_and_one_set_by_key_runs():
    m, seen = _model()[0], []
    m.register_forward_hook(lambda mod, args, out: seen.append("old"))
    m._forward_hooks = OrderedDict()  # torch code resets them so
    m(ta.randn(1, 3))
    assert seen == [] and len(m._forward_hooks) == 0
    m._forward_hooks["mine"] = lambda mod, args, out: seen.append("new")
    m(ta.randn(1, 3))
    assert seen == ["new"]
    del m._forward_hooks["mine"]
    m(ta.randn(1, 3))
    assert seen == ["new"]


def test_a_hook_that_replaces_the_output_through_the_dict():
    m = _model()[0]
    m._forward_hooks[0] = lambda mod, args, out: out * 0
    assert m(ta.randn(2, 3)).abs().sum().item() == 0
