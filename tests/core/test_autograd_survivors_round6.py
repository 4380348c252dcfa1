"""Autograd behaviours that a sixth mutation round of tinyattn/autograd.py found unobserved: what
a leaf's AccumulateGrad hook is given, a node post hook that returns plain arrays, calling a
grad_fn directly (its hooks do not run, as torch's), and which code a recording's watch of
`t.data` tells its tracers about (user frames, including ones without `__name__`, but not the
library's own, and not `t.data = a` with the very array t already holds)."""

import types

import numpy as np

import tinyattn as ta
from tinyattn import autograd


def _leaf_node(x):
    """x's AccumulateGrad, through the graph of (x * 2).sum()."""
    y = (x * 2).sum()
    return y, y.grad_fn.next_functions[0][0].next_functions[0][0]


def test_a_leaf_hook_gets_no_grad_inputs_and_the_gradient_as_grad_outputs():
    # torch: AccumulateGrad.register_hook's fn gets ((), (grad,)) before .grad is written
    x = ta.ones(3, requires_grad=True)
    y, acc = _leaf_node(x)
    assert acc.name() == "AccumulateGrad"
    seen = []
    acc.register_hook(lambda gi, go: seen.append((gi, go, x.grad)))
    y.backward()
    [(gi, go, grad_then)] = seen
    assert gi == ()
    assert isinstance(go, tuple) and len(go) == 1
    np.testing.assert_array_equal(go[0].numpy(), [2.0, 2.0, 2.0])
    assert grad_then is None  # it runs before the .grad is written
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_a_node_post_hook_may_return_plain_arrays_for_the_gradients():
    x = ta.ones(3, requires_grad=True)
    z = x * 3
    z.grad_fn.register_hook(lambda gi, go: (np.full(3, 7.0, dtype=np.float32), None))
    z.sum().backward()
    assert isinstance(x.grad, ta.Tensor)
    np.testing.assert_array_equal(x.grad.numpy(), [7.0, 7.0, 7.0])


def test_calling_a_grad_fn_directly_does_not_run_its_post_hooks():
    # torch: node(grad) runs the VJP alone; the engine, not the node, runs the hooks
    x = ta.ones(3, requires_grad=True)
    m = (x * 2).sum().grad_fn.next_functions[0][0]
    calls = []
    m.register_hook(lambda gi, go: calls.append(1) or (gi[0] * 10, None))
    out = m(ta.ones(3))
    assert calls == []
    assert isinstance(out, tuple) and out[1] is None
    np.testing.assert_array_equal(out[0].numpy(), [2.0, 2.0, 2.0])


class _Watch(autograd.Tracer):
    def __init__(self):
        self.changes, self.reads = [], []

    def changed(self, tensor, what):
        self.changes.append((tensor, what))

    def read(self, tensor, how):
        self.reads.append((tensor, how))


def test_giving_a_tensor_the_array_it_already_holds_is_no_data_change():
    a = np.array([1.0, 2.0], dtype=np.float32)
    t = ta.from_numpy(a)  # (t holds a itself)
    other = np.array([5.0, 6.0], dtype=np.float32)
    tracer = _Watch()
    with autograd.watching_data_reads(), autograd.tracing(tracer):
        t.data = a  # the same array: nothing a replay would miss
        assert tracer.changes == []
        t.data = other  # another array: a change
    assert tracer.changes == [(t, "data")]
    assert t.numpy() is other


def _run_in(module_name, code, **names):
    """exec `code` in a module's globals (None: a bare dict, with no __name__ at all)."""
    if module_name is None:
        scope = dict(names)
    else:
        scope = types.ModuleType(module_name).__dict__
        scope.update(names)
    exec(code, scope)  # noqa: S102
    assert module_name is not None or "__name__" not in scope


def test_data_reads_from_code_without_a_module_name_count_as_the_users():
    # a frame whose globals hold no __name__ (exec with a bare dict) is user code, not an error
    t = ta.tensor([1.0, 2.0])
    tracer = _Watch()
    with autograd.watching_data_reads(), autograd.tracing(tracer):
        _run_in(None, "d = t.data", t=t)
        _run_in(None, "t.data = ta.tensor([3.0, 4.0])", t=t, ta=ta)
    assert tracer.reads == [(t, ".data")]
    assert tracer.changes == [(t, "data")]


def test_data_reads_and_writes_from_tinyattn_modules_are_not_told():
    # the library's own code (a module named tinyattn or tinyattn.*) reading or replacing .data
    # is no value read of the user's; a module merely named like it (tinyattnx) is the user's
    t = ta.tensor([1.0, 2.0])
    tracer = _Watch()
    with autograd.watching_data_reads(), autograd.tracing(tracer):
        for library in ("tinyattn", "tinyattn._round6_probe"):
            _run_in(library, "d = t.data", t=t)
            _run_in(library, "t.data = ta.tensor([3.0, 4.0])", t=t, ta=ta)
        assert tracer.reads == [] and tracer.changes == []
        _run_in("tinyattnx", "d = t.data", t=t)
    assert tracer.reads == [(t, ".data")]
    assert t.numpy().tolist() == [3.0, 4.0]


def test_a_mutation_testing_trampoline_between_caller_and_data_is_passed_over():
    # mutmut puts a trampoline (a function of module mutmut.*) between each function and its
    # caller: .data read through one counts as its caller's read, the library's or the user's
    t = ta.tensor([1.0, 2.0])
    scope = types.ModuleType("mutmut.probe").__dict__
    exec("def fetch(t):\n    return t.data", scope)  # noqa: S102
    tracer = _Watch()
    with autograd.watching_data_reads(), autograd.tracing(tracer):
        _run_in("tinyattn._probe", "fetch(t)", t=t, fetch=scope["fetch"])
        assert tracer.reads == []
        _run_in("user_code", "fetch(t)", t=t, fetch=scope["fetch"])
    assert tracer.reads == [(t, ".data")]
