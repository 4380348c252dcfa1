"""Errors of the core: each names the op and the shapes (or dtypes) involved, and is both a
TinyattnError and the built-in exception a Python user would catch.

Shape mismatches, bad `dim`, wrong dtypes (float targets, out-of-range classes, float masks and
indices), object and string arrays, requires_grad on integers.
"""

import re

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F


def t(*shape):
    return ta.tensor(np.ones(shape))


def raises(cls, *fragments):
    """pytest.raises(cls) whose message contains every fragment, in order."""
    return pytest.raises(cls, match=".*".join(re.escape(f) for f in fragments))


# ---- shapes -----------------------------------------------------------------------------------


def test_matmul_inner_dims_message():
    with raises(ta.ShapeError, "matmul: (2, 3) @ (4, 5): inner dims 3 and 4 differ"):
        t(2, 3) @ t(4, 5)
    with raises(ta.ShapeError, "matmul: (7, 2, 3) @ (2,): inner dims 3 and 2 differ"):
        t(7, 2, 3) @ t(2)
    with raises(ta.ShapeError, "matmul: (2, 3) @ (): both operands need at least one dim"):
        t(2, 3) @ ta.tensor(np.float64(2.0))


def test_matmul_batch_dims_that_do_not_broadcast():
    with raises(ta.ShapeError, "matmul", "(2, 3, 4)", "(5, 4, 2)"):
        t(2, 3, 4) @ t(5, 4, 2)


@pytest.mark.parametrize("fn,name", [(lambda a, b: a + b, "add"), (lambda a, b: a - b, "sub"),
                                     (lambda a, b: a * b, "mul"), (lambda a, b: a / b, "div"),
                                     (lambda a, b: a ** b, "pow"),
                                     (lambda a, b: a.maximum(b), "maximum")])
def test_binary_ops_name_the_op_and_both_shapes(fn, name):
    with raises(ta.ShapeError, f"{name}: ", "(2, 3)", "(4,)"):
        fn(t(2, 3), t(4))


def test_shape_ops_name_the_shapes():
    with raises(ta.ShapeError, "reshape", "cannot reshape (2, 3) (6 elements) into (4, 2)"):
        t(2, 3).reshape(4, 2)
    with raises(ta.ShapeError, "cat", "(2, 3)", "(3, 2)"):
        F.cat([t(2, 3), t(3, 2)], dim=0)
    with raises(ta.ShapeError, "stack", "(2,)", "(3,)"):
        F.stack([t(2), t(3)])
    with raises(ta.ShapeError, "expand", "(2, 3)"):
        t(2, 3).expand(3, 3)
    with raises(ta.ShapeError, "permute", "(0, 0)", "not a permutation"):
        t(2, 3).permute(0, 0)


def test_masks_and_layers_name_the_shapes():
    with raises(ta.ShapeError, "masked_fill: mask (3,) does not broadcast to x (2, 4)"):
        t(2, 4).masked_fill(np.ones(3, dtype=bool), 0.0)
    with raises(ta.ShapeError, "layer_norm", "(4,)", "(2, 3)"):
        F.layer_norm(t(2, 3), 4)
    with raises(ta.ShapeError, "layer_norm: weight has shape (4,)", "normalized shape is (3,)"):
        F.layer_norm(t(2, 3), 3, weight=t(4))
    with raises(ta.ShapeError, "scaled_dot_product_attention", "(2, 3)", "(2, 4)"):
        F.scaled_dot_product_attention(t(2, 3), t(2, 4), t(2, 4))
    with raises(ta.ShapeError, "scaled_dot_product_attention: the scores (2, 2)",
                "mask of shape (3, 3)"):
        F.scaled_dot_product_attention(t(2, 3), t(2, 3), t(2, 3),
                                       attn_mask=np.ones((3, 3), dtype=bool), impl="composite")


def test_cross_entropy_target_shape():
    with raises(ta.ShapeError, "cross_entropy: logits (2, 3)", "need targets of shape (2,)",
                "got (3,)"):
        F.cross_entropy(t(2, 3), ta.tensor([0, 1, 2]))


def test_backward_gradient_of_the_wrong_shape():
    x = ta.tensor(np.ones((2, 3)), requires_grad=True)
    with raises(ta.ShapeError, "backward: gradient has shape (3, 2)", "output has shape (2, 3)"):
        (x * 2.0).backward(np.ones((3, 2)))


def test_a_vjp_that_returns_the_wrong_shape_is_named():
    bad = ta.ops.Op("bad_shape", lambda be, x: (x * 2, ()), "gx = 2g, but transposed")
    bad.defvjp(lambda be, g, saved: (g.T,))
    x = ta.tensor(np.ones((2, 3)), requires_grad=True)
    with raises(ta.ShapeError, "bad_shape: the VJP returned a gradient of shape (3, 2)",
                "input 0 of shape (2, 3)"):
        bad(x).sum().backward()


def test_a_missing_vjp_is_an_error_never_zeros():
    fwd_only = ta.ops.Op("fwd_only", lambda be, x: (x * 2, ()), "none yet")
    x = ta.tensor(np.ones(2), requires_grad=True)
    with raises(NotImplementedError, "fwd_only: no VJP"):
        fwd_only(x).sum().backward()


# ---- dims -------------------------------------------------------------------------------------


@pytest.mark.parametrize("call,name", [
    (lambda x: x.sum(dim=2), "sum"), (lambda x: x.mean(dim=-3), "mean"),
    (lambda x: x.max(dim=5), "max"), (lambda x: x.var(dim=2), "var"),
    (lambda x: x.logsumexp(dim=2), "logsumexp"), (lambda x: x.softmax(dim=2), "softmax"),
    (lambda x: x.log_softmax(dim=-3), "log_softmax"), (lambda x: x.transpose(0, 2), "transpose"),
    (lambda x: x.unsqueeze(4), "unsqueeze"), (lambda x: F.cat([x, x], dim=2), "cat"),
])
def test_bad_dim_names_the_op_and_the_valid_range(call, name):
    with pytest.raises(ta.DimError, match=rf"{name}: dim -?\d is out of range for a tensor with "
                                          rf"\d dims \(valid: -\d\.\.\d\)"):
        call(t(2, 3))


def test_repeated_and_non_integer_dims():
    with raises(ta.DimError, "max: dim (0, 0) repeats a dim"):
        t(2, 3).amax(dim=(0, 0))
    with pytest.raises(TypeError, match=r"max: dim must be one int .*got \(0, 1\); for several "
                       "dims use amax"):
        t(2, 3).max(dim=(0, 1))
    with pytest.raises(TypeError, match="sum.*dim must be an int or a tuple of ints, got 1.0"):
        t(2, 3).sum(dim=1.0)


def test_a_0d_tensor_takes_its_implicit_dim_in_a_tuple_too_and_refuses_others():
    # as torch: dim (0,), (-1,) or [0] of a 0-d tensor is its implicit dim; (1,) is out of range
    x = ta.tensor(2.0)
    for dim in [(0,), (-1,), [0], ()]:
        assert x.sum(dim=dim).item() == 2.0 and x.amax(dim=dim).shape == ()
    with raises(ta.DimError, "sum: dim 1 is out of range for a tensor with 0 dims"):
        x.sum(dim=(1,))


def test_index_out_of_range_names_getitem():
    with raises(ta.DimError, "getitem", "(2, 3)", "index 5 is out of bounds"):
        t(2, 3)[5]


# ---- dtypes -----------------------------------------------------------------------------------


def test_cross_entropy_float_targets():
    with raises(ta.DTypeError, "cross_entropy: target must hold integer class indices",
                "float32", "target.long()"):
        F.cross_entropy(t(2, 3), ta.tensor([0.0, 1.0]))


@pytest.mark.parametrize("bad", [3, -2])
def test_cross_entropy_out_of_range_classes(bad):
    with raises(ta.DimError, f"cross_entropy: target {bad} is out of range for 3 classes",
                "valid: 0..2, or ignore_index=-100"):
        F.cross_entropy(t(2, 3), ta.tensor([0, bad]))
    F.cross_entropy(t(2, 3), ta.tensor([0, bad]), ignore_index=bad)  # ignored: fine


def test_cross_entropy_bad_reduction():
    with raises(ValueError, "cross_entropy", "reduction must be one of 'mean', 'sum', 'none'",
                "'avg'"):
        F.cross_entropy(t(2, 3), ta.tensor([0, 1]), reduction="avg")


@pytest.mark.parametrize("data", [np.array(["a", "b"]), ["a", "b"], np.array([1, None],
                                                                                 dtype=object),
                                  np.array([{"k": 1}], dtype=object)])
def test_object_and_string_arrays_are_refused(data):
    with raises(ta.DTypeError, "tensor: cannot hold data of dtype", "only numbers and bools"):
        ta.tensor(data)


def test_requires_grad_on_integers():
    for make in (lambda: ta.tensor([1, 2], requires_grad=True),
                 lambda: ta.tensor(np.arange(3, dtype=np.int32), requires_grad=True),
                 lambda: ta.zeros(3, dtype=ta.int64, requires_grad=True),
                 lambda: ta.tensor([True]).requires_grad_()):
        with raises(ta.DTypeError, "only floating-point tensors can require grad"):
            make()


def test_non_bool_masks_and_conditions():
    with raises(ta.DTypeError, "masked_fill: the mask must be bool, got float64"):
        t(2, 3).masked_fill(t(2, 3), 0.0)
    with raises(ta.DTypeError, "where", "condition must be a bool tensor, got float64"):
        F.where(t(2, 3), t(2, 3), 0.0)
    with raises(ta.DTypeError, "scaled_dot_product_attention: impl='flash' takes a bool mask",
                "got float64"):
        F.scaled_dot_product_attention(t(1, 2, 4), t(1, 2, 4), t(1, 2, 4),
                                       attn_mask=np.zeros((2, 2)), impl="flash")


def test_float_ids_and_indices():
    with raises(ta.DTypeError, "embedding: ids must be integers, got float32"):
        F.embedding(ta.tensor([0.0, 1.0]), t(3, 2))
    with raises(ta.DimError, "embedding: id 5 is out of range for 3 embeddings"):
        F.embedding(ta.tensor([5]), t(3, 2))
    with raises(ta.DTypeError, "getitem: index tensors must be integer or bool, got float32"):
        t(2, 3)[ta.tensor([0.5])]


def test_bad_options_name_the_op():
    with raises(ValueError, "gelu: approximate must be 'none' or 'tanh', got 'x'"):
        F.gelu(t(2), approximate="x")
    with raises(ValueError, "dropout: p must be a probability in [0, 1], got 1.5"):
        F.dropout(t(2), p=1.5)
    with raises(ValueError, "scaled_dot_product_attention: impl must be"):
        F.scaled_dot_product_attention(t(1, 2), t(1, 2), t(1, 2), impl="fast")
    with raises(ValueError, "max of an empty tensor"):
        ta.tensor(np.zeros((0, 3))).max()
    with raises(ValueError, "min of an empty tensor"):
        ta.tensor(np.zeros((0, 3))).amin(dim=0)  # the dim reduced has size 0


def test_a_scan_of_a_0d_tensor_takes_only_its_implicit_dim():
    x = ta.tensor(2.0)
    assert x.cumsum(dim=0).item() == 2.0 and x.cumsum(dim=-1).item() == 2.0
    with raises(IndexError, "cumsum: dim 3 is out of range for a tensor with 0 dims"):
        x.cumsum(dim=3)


def test_max_and_min_over_dims_that_are_not_empty_give_empty_results():
    # as torch: (0, 3) reduced over dim 1 is (0,), and its gradient is (0, 3) of nothing
    x = ta.tensor(np.zeros((0, 3)), requires_grad=True)
    assert x.amax(dim=1).shape == (0,) and x.amin(dim=1, keepdim=True).shape == (0, 1)
    x.amax(dim=1).sum().backward()
    assert x.grad.shape == (0, 3)


# ---- the error classes ------------------------------------------------------------------------


@pytest.mark.parametrize("cls,builtin", [(ta.ShapeError, ValueError), (ta.DimError, IndexError),
                                         (ta.DTypeError, TypeError),
                                         (ta.GraphError, RuntimeError),
                                         (ta.BackendError, RuntimeError),
                                         (ta.GradcheckError, AssertionError),
                                         (ta.CheckpointError, ValueError)])
def test_errors_are_also_builtin_exceptions(cls, builtin):
    assert issubclass(cls, ta.TinyattnError) and issubclass(cls, builtin)


def test_a_failed_forward_records_nothing_and_changes_nothing():
    x = ta.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ta.ShapeError):
        x @ t(4, 5)
    (x * 2.0).sum().backward()  # the graph is still usable
    np.testing.assert_array_equal(x.grad.numpy(), 2.0)


def test_cross_entropy_wants_floating_logits():
    with pytest.raises(ta.DTypeError, match=r"cross_entropy: logits must be floating point.*int64"):
        F.cross_entropy(ta.tensor([[1, 2], [3, 4]]), ta.tensor([0, 1]))


def test_gelu_wants_floating_input():
    with pytest.raises(ta.DTypeError, match=r"gelu: needs a floating-point input, got int64"):
        F.gelu(ta.tensor([1, 2, 3]))


def test_numpys_errors_inside_an_op_name_the_op_and_hint_only_at_broadcasting():
    x = ta.ones(2, 3)
    with pytest.raises(ta.DimError) as caught:
        x[5]
    assert str(caught.value) == ("getitem: inputs (2, 3): index 5 is out of bounds for axis 0 "
                                 "with size 2")
    with pytest.raises(ta.ShapeError) as caught:
        x + ta.ones(4)
    assert str(caught.value).startswith("add: inputs (2, 3), (4,): operands could not be "
                                        "broadcast")
    assert str(caught.value).endswith("; shapes broadcast when, from the right, each pair of "
                                      "dims is equal or one is 1 (reshape or unsqueeze an input)")


def test_a_grad_of_another_shape_than_the_new_gradient_is_named():
    """A leaf's .data replaced by another shape while it holds a .grad: the next backward names
    both shapes instead of failing inside NumPy (3 then 4) or silently broadcasting (1 into 4)."""
    w = ta.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    w.data = np.ones(4, np.float32)
    with pytest.raises(ta.errors.ShapeError, match=r"backward: the tensor's .grad has shape "
                                                   r"\(3,\) but its new gradient has shape \(4,\)"):
        (w * 2).sum().backward()
    with pytest.raises(ta.errors.ShapeError, match=r"\.grad: assigned a gradient of shape "
                                                   r"\(1,\) to a tensor of shape \(4,\)"):
        w.grad = ta.ones(1)  # (assigned: refused at once, as torch)
    w.grad = None
    (w * 2).sum().backward()
    assert w.grad.numpy().tolist() == [2.0] * 4
    row = ta.ones(3, 2, requires_grad=True)
    (row * 2).sum().backward()
    row.data = np.ones((1, 2), np.float32)  # a .grad the new gradient broadcasts into: added
    (row * 2).sum().backward()
    assert row.grad.numpy().tolist() == [[4.0, 4.0]] * 3


def test_fill_values_that_are_not_numbers_are_refused_by_name():
    """full / fill_ / masked_fill with a string or None: a TypeError naming the op (torch's
    rule), not NumPy's "could not convert string to float"."""
    with raises(TypeError, "full: the value must be a number", "str 'x'"):
        ta.full((2,), "x")
    with raises(TypeError, "fill_: the value must be a number"):
        ta.zeros(3).fill_("a")
    with raises(TypeError, "masked_fill: the value must be a number", "None"):
        ta.zeros(3).masked_fill(ta.ones(3, dtype=ta.bool), None)


@pytest.mark.parametrize("call", [lambda x: x.clamp(), lambda x: x.clip(), lambda x: x.clamp_(),
                                  lambda x: ta.clamp(x)])
def test_clamp_without_bounds_names_clamp(call):
    with raises(ValueError, "needs min, max or both"):
        call(ta.zeros(3))
