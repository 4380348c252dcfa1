"""Tests for survivors of the seed-4 mutation draw of ops and autograd (tools/mutate.py ops
autograd --sample 60 --seed 4), against torch: a second backward through an indexing node,
an exception thrown into a generator decorated with no_grad reaching it, and a bad dim inside
a tuple naming the op."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import DTypeError


def _indexed_sum(lib):
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    return a, a[lib.tensor([0, 2, 2])].sum()  # (sum keeps only a shape: the index is getitem's)


def test_retain_graph_keeps_an_indexing_nodes_index_for_a_second_backward():
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (ta, torch):
        a, s = _indexed_sum(lib)
        s.backward(retain_graph=True)
        s.backward()
        grads.append(np.asarray(a.grad.tolist()))
    np.testing.assert_array_equal(grads[0], grads[1])
    np.testing.assert_array_equal(grads[0], [2.0, 0.0, 4.0])


def test_an_indexing_node_keeps_no_array_so_a_second_pass_may_go_through_it():
    # (its saved values are the input's shape and dtype and whether the index is advanced;
    # the index is a param: backward leaves such a node in place, as torch leaves its nodes
    # that saved no tensor; torch's IndexBackward saves the index tensor and refuses)
    a, s = _indexed_sum(ta)
    s.backward()
    s.backward()
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 0.0, 4.0])


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_an_exception_thrown_into_a_no_grad_generator_reaches_it(lib_name):
    lib = ta if lib_name == "tinyattn" else pytest.importorskip("torch")

    @lib.no_grad()
    def gen():
        try:
            yield 1
        except ValueError:
            yield f"caught, grad {'on' if lib.is_grad_enabled() else 'off'}"

    g = gen()
    assert next(g) == 1
    assert g.throw(ValueError("stop")) == "caught, grad off"
    assert lib.is_grad_enabled()


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "logsumexp", "std"])
def test_a_bad_dim_inside_a_tuple_names_the_op(name):
    with pytest.raises(DTypeError, match=r"^(\w+): dim must be an int or a tuple of ints, got "
                                         r"1\.5"):
        getattr(ta.ones(2, 3), name)((0, 1.5))
    with pytest.raises(DTypeError) as info:
        getattr(ta.ones(2, 3), name)((0, 1.5))
    assert not str(info.value).startswith("None")
