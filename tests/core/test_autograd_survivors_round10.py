"""Autograd behaviours a third mutation draw (seed 2) of tinyattn/autograd.py found unobserved:
a .grad on the CuPy backend taking the next pass's gradient (CuPy's array flags have no
`writeable` before CuPy 14), backward(create_graph=True, inputs=...) adding to a .grad already
there, grad(create_graph=True) naming the output that has no graph, float16 gradient sums
reaching inf - inf silently, as torch's, and a grad_fn hook's arrays reaching the next hook as
tensors of the graph's backend."""

import warnings
from pathlib import Path

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import GraphError


@pytest.fixture
def fake_cupy(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "support"))
    import fake_cupy  # tests/support

    return fake_cupy.install(monkeypatch, kernels=False)


def test_a_grad_on_cupy_takes_the_next_passs_gradient_in_place(fake_cupy):
    """Two passes: the second adds into the first's .grad array (CuPy 13's flags say nothing
    of writeable; newer CuPy and NumPy do)."""
    x = ta.tensor(np.array([1.0, 2.0, 3.0], np.float32), backend="cupy", requires_grad=True)
    assert not hasattr(x._data.flags, "writeable")  # (the fake is CuPy 13's)
    (x * 2).sum().backward()
    held = x.grad._data
    (x * x).sum().backward()
    assert x.grad._data is held
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 6.0, 8.0])


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_backward_with_create_graph_and_inputs_adds_to_the_grad_there():
    """backward(create_graph=True, inputs=[x]) twice: the second gradient is added to the
    first (out of place, on the graph), as torch's; other leaves are left alone."""
    torch = pytest.importorskip("torch")
    values = [0.5, -1.5, 2.0]
    grads = {}
    for lib in (torch, ta):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        w = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        (x ** 3 * w).sum().backward(create_graph=True, inputs=[x])
        first = x.grad
        (x ** 2).sum().backward(create_graph=True, inputs=[x])
        assert w.grad is None and x.grad is not first and x.grad.grad_fn is not None
        (gg,) = lib.autograd.grad(x.grad.sum(), [x])
        grads[lib.__name__] = (x.grad.detach().numpy().copy(), gg.detach().numpy().copy())
    np.testing.assert_allclose(grads["tinyattn"][0], grads["torch"][0], rtol=1e-12)
    np.testing.assert_allclose(grads["tinyattn"][1], grads["torch"][1], rtol=1e-12)
    x = np.array(values)
    np.testing.assert_allclose(grads["tinyattn"][0], 3 * x ** 3 + 2 * x, rtol=1e-12)


@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_names_the_output_that_has_no_graph(create_graph):
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y, c = (x * x).sum(), ta.tensor(3.0)
    with pytest.raises(GraphError, match=r"^grad: output 1 does not require grad and has no "
                                         r"graph"):
        ta.autograd.grad([y, c], [x], create_graph=create_graph)


def test_float16_gradient_sums_reach_nan_silently_as_torchs():
    """inf + -inf in a float16 .grad (two passes) is NaN, without NumPy's warning."""
    torch = pytest.importorskip("torch")
    got = {}
    for lib in (torch, ta):
        x = lib.ones(2, dtype=lib.float16, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            (x * float("inf")).sum().backward()
            (x * float("-inf")).sum().backward()
        got[lib.__name__] = x.grad.detach().numpy() if lib is torch else x.grad.numpy()
    assert np.isnan(got["tinyattn"]).all() and np.isnan(got["torch"]).all()


def test_a_post_hooks_arrays_reach_the_next_hook_as_tensors_of_the_backend():
    """A grad_fn hook may return arrays (or lists) for the input gradients: the next hook gets
    them as tensors of the graph's backend, which it can read and compute with."""
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    w = ta.tensor([3.0, 4.0], requires_grad=True)
    y = x * w
    seen = []
    y.grad_fn.register_hook(lambda grads, outs: (np.array([10.0, 20.0]), [1.0, 2.0]))

    def second(grads, outs):
        seen.append([g.numpy().tolist() for g in grads])
        return tuple(g * 2 for g in grads)

    y.grad_fn.register_hook(second)
    y.sum().backward()
    assert seen == [[[10.0, 20.0], [1.0, 2.0]]]
    np.testing.assert_array_equal(x.grad.numpy(), [20.0, 40.0])
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])
