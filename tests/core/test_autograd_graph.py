"""ta.autograd.graph and grad_fn as torch's: Node (for isinstance), a node's hooks (pre and
post), metadata and call, one grad_fn object per node; saved_tensors_hooks refused, save_on_cpu
and disable_saved_tensors_hooks; register_multi_grad_hook in both modes. Each compared with
torch where torch is installed."""

import numpy as np
import pytest

import tinyattn as ta


def _lib(name):
    return ta if name == "tinyattn" else pytest.importorskip("torch")


LIBS = pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])


def _values(t):
    return None if t is None else t.detach().numpy().tolist()


# ---- grad_fn: one object per node, Node, metadata, attribute errors ------------------------------


@LIBS
def test_grad_fn_is_one_object_and_a_graph_node(lib_name):
    lib = _lib(lib_name)
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert y.grad_fn is y.grad_fn
    assert isinstance(y.grad_fn, lib.autograd.graph.Node)
    acc = y.grad_fn.next_functions[0][0]
    assert isinstance(acc, lib.autograd.graph.Node) and acc.variable is x
    assert y.grad_fn.name() == "MulBackward0"
    y.grad_fn.metadata["step"] = 3  # kept with the node, not with the Python object
    assert y.grad_fn.metadata == {"step": 3}
    with pytest.raises(AttributeError, match="^'MulBackward0' object has no attribute 'nope'$"):
        y.grad_fn.nope  # noqa: B018
    assert not isinstance(x, lib.autograd.graph.Node)


def test_grad_fn_keeps_no_node_alive_by_itself():
    import gc
    import weakref

    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    fn = y.grad_fn
    node = weakref.ref(y._node)
    del y, fn
    gc.collect()
    assert node() is None


# ---- calling a node: its VJP ---------------------------------------------------------------------


@LIBS
def test_calling_a_node_runs_its_backward_as_torchs(lib_name):
    lib = _lib(lib_name)
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = lib.tensor([2.0, 2.0, 2.0])
    gx, gw = (x * w).grad_fn(lib.ones(3))
    assert _values(gx) == [2.0, 2.0, 2.0] and gw is None
    assert _values(x.sum().grad_fn(lib.tensor(1.0))) == [1.0, 1.0, 1.0]  # one input: a tensor
    gx, gb = (x + lib.tensor(1.0)).grad_fn(lib.ones(3))  # broadcast: summed to the input's shape
    assert _values(gx) == [1.0, 1.0, 1.0] and gb is None
    y = x * w  # (a node that saved arrays: x * 2 keeps only the number, and runs again)
    y.sum().backward()  # frees the graph
    with pytest.raises(RuntimeError, match="backward through the graph a second time|freed"):
        y.grad_fn(lib.ones(3))


# ---- a node's hooks ------------------------------------------------------------------------------


@LIBS
def test_node_hooks_run_as_torchs(lib_name):
    lib = _lib(lib_name)
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = lib.tensor([2.0, 2.0, 2.0])
    y = x * w
    calls = []
    acc = y.grad_fn.next_functions[0][0]
    handles = [
        y.grad_fn.register_hook(lambda gi, go: calls.append(
            ("post", [_values(g) for g in gi], [_values(g) for g in go]))),
        y.grad_fn.register_prehook(lambda go: calls.append(("pre", [_values(g) for g in go]))),
        acc.register_prehook(lambda go: calls.append(("accpre", [_values(g) for g in go]))),
    ]
    y.sum().backward(retain_graph=True)
    assert calls == [("pre", [[1.0, 1.0, 1.0]]),
                     ("post", [[2.0, 2.0, 2.0], None], [[1.0, 1.0, 1.0]]),
                     ("accpre", [[2.0, 2.0, 2.0]])]
    for h in handles:
        h.remove()
    calls.clear()
    y.sum().backward(retain_graph=True)
    assert calls == []
    # a post hook's tuple replaces the input gradients, a pre hook's the output gradients
    h = y.grad_fn.register_hook(lambda gi, go: (gi[0] * 10, None))
    x.grad = None
    y.sum().backward(retain_graph=True)
    assert _values(x.grad) == [20.0, 20.0, 20.0]
    h.remove()
    y.grad_fn.register_prehook(lambda go: (go[0] * 0 + 1,))
    x.grad = None
    (y * 5).sum().backward(retain_graph=True)
    assert _values(x.grad) == [2.0, 2.0, 2.0]


@LIBS
def test_a_post_hook_returning_the_wrong_number_of_gradients_is_refused_as_torch(lib_name):
    lib = _lib(lib_name)
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * lib.tensor([2.0, 2.0])
    y.grad_fn.register_hook(lambda gi, go: (gi[0],) * 3)
    with pytest.raises(RuntimeError, match="hook '<lambda>' has returned an incorrect number of "
                                           "values \\(got 3, but expected 2\\)"):
        y.sum().backward()


def test_a_node_hook_on_a_custom_function_and_under_autograd_grad():
    class Double(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y = Double.apply(x)
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append(y.grad_fn.name()) or (gi[0] + 1,))
    (g,) = ta.autograd.grad(y.sum(), [x])
    assert seen == ["DoubleBackward"] and g.tolist() == [3.0, 3.0] and x.grad is None


# ---- saved tensors hooks -------------------------------------------------------------------------


def test_saved_tensors_hooks_are_refused_saying_what_to_do():
    with pytest.raises(NotImplementedError, match="saved_tensors_hooks.*checkpoint"):
        with ta.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            pass


@LIBS
def test_disable_saved_tensors_hooks_makes_them_raise_its_message_as_torchs(lib_name):
    lib = _lib(lib_name)
    with lib.autograd.graph.disable_saved_tensors_hooks("not here"):
        with pytest.raises(RuntimeError, match="not here"):
            with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass


@LIBS
def test_save_on_cpu_changes_no_value_or_gradient(lib_name):
    lib = _lib(lib_name)
    x = lib.tensor([0.5, 1.0], requires_grad=True)
    with lib.autograd.graph.save_on_cpu(pin_memory=False):
        y = (x.exp() * x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0]) * (1 + np.array([0.5, 1.0])))


# ---- register_multi_grad_hook --------------------------------------------------------------------


@LIBS
def test_multi_grad_hook_all_gets_each_gradient_once_none_where_none_came(lib_name):
    lib = _lib(lib_name)
    a, b, c = (lib.tensor([v], requires_grad=True) for v in (1.0, 2.0, 3.0))
    h = a * 1  # a non-leaf too
    seen = []
    handle = lib.autograd.graph.register_multi_grad_hook(
        (h, b, c), lambda grads: seen.append([_values(g) for g in grads]))
    (h * 2 + b * 3).sum().backward(retain_graph=True)
    assert seen == [[[2.0], [3.0], None]]
    lib.autograd.grad((h * 2 + b * 3).sum(), [h])  # b's node does not run here
    assert seen[1:] == [[[2.0], None, None]]
    handle.remove()
    (h * 2 + b * 3).sum().backward()
    assert len(seen) == 2


@LIBS
def test_multi_grad_hook_any_runs_once_per_pass_with_the_first_gradient(lib_name):
    lib = _lib(lib_name)
    a, b = (lib.tensor([v], requires_grad=True) for v in (1.0, 2.0))
    seen = []
    lib.autograd.graph.register_multi_grad_hook((a, b), lambda g: seen.append(_values(g)),
                                                mode="any")
    (a * 2 + b * 3).sum().backward()
    (a * 2 + b * 3).sum().backward()
    assert len(seen) == 2 and seen[0] in ([2.0], [3.0])
    with pytest.raises(ValueError, match="mode"):
        lib.autograd.graph.register_multi_grad_hook((a,), print, mode="some")
