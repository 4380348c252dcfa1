"""A Parameter made from a tensor shares its memory but is a leaf of its own, not a view of
it: in-place changes through a view of a parameter are refused outside no_grad, as torch's."""

import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("lib", [ta, torch], ids=["tinyattn", "torch"])
@pytest.mark.parametrize("change", ["row zero_", "t() row mul_", "setitem"])
def test_in_place_through_a_view_of_a_parameter_is_refused_as_torch(lib, change):
    emb = lib.nn.Embedding(5, 3)
    w = emb.weight
    with pytest.raises(RuntimeError, match="leaf"):
        if change == "row zero_":
            w[0].zero_()
        elif change == "t() row mul_":
            w.t()[0].mul_(2)
        else:
            w[0] = 1.0
    assert w.is_leaf and w._base is None


def test_a_parameter_keeps_learning_after_a_no_grad_change_through_a_view():
    emb = ta.nn.Embedding(5, 3)
    opt = ta.optim.SGD(emb.parameters(), lr=0.1)
    with ta.no_grad():
        emb.weight[0].zero_()
    before = emb.weight.detach().clone()
    emb(ta.tensor([1, 2])).sum().backward()
    opt.step()
    assert emb.weight.is_leaf and emb.weight.grad is not None
    assert (emb.weight.detach() - before).abs().sum().item() > 0


def test_a_parameter_made_from_a_tensor_in_a_graph_is_a_new_leaf():
    x = ta.ones(3, requires_grad=True)
    p = ta.nn.Parameter(x * 2)
    assert p.is_leaf and p.grad_fn is None and not p._is_view()
    (p * 3).sum().backward()
    assert x.grad is None and p.grad.tolist() == [3.0, 3.0, 3.0]
