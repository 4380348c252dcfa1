"""Autograd behaviours that a ninth mutation round (a second draw, seed 1) of
tinyattn/autograd.py found unobserved: grad() with create_graph=True names the output whose
grad_output is wrong (grad_outputs[k], output k), as without it, and casts a grad_output of
another dtype to the output's; after a backward pass whose tensor hooks ran, hook_pass()
outside any pass answers (None, None, None) in a thread that never ran one before (the state
saved around the hooks is the "no pass" answer, not None); an AccumulateGrad called directly
adds into .grad; a custom Function's grad_fn reads its ctx's attributes and names itself for
any other; a tracer with no `read` sees the ops while user code reads .data."""

import threading

import pytest

import tinyattn as ta
from tinyattn.autograd import hook_pass, tracing, watching_data_reads
from tinyattn.errors import GraphError, ShapeError


@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_names_the_output_whose_grad_output_is_wrong(create_graph):
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    y1, y2 = (x * 2).sum(), x * 3
    with pytest.raises(ShapeError, match=r"^grad: grad_outputs\[1\] has shape \(3,\) but "
                                         r"output 1 has shape \(2,\)$"):
        ta.autograd.grad([y1, y2], [x], grad_outputs=[None, ta.ones(3)],
                         create_graph=create_graph, retain_graph=True)
    with pytest.raises(GraphError, match=r"^grad: output 1 has shape \(2,\); grad\(\) makes "
                                         "the grad_output of a scalar output only"):
        ta.autograd.grad([y1, y2], [x], create_graph=create_graph, retain_graph=True)
    (gx,) = ta.autograd.grad([y1, y2], [x], grad_outputs=[None, ta.ones(2)],
                             create_graph=create_graph)
    assert gx.tolist() == [5.0, 5.0]


def test_hook_pass_outside_a_pass_is_the_no_pass_answer_in_a_fresh_thread():
    seen, errors = [], []

    def run():
        try:
            x = ta.tensor([1.0, 2.0], requires_grad=True)
            y = x * 2
            y.register_hook(lambda g: seen.append(hook_pass()[1] is not None))
            y.sum().backward()
            seen.append(hook_pass())
        except Exception as e:  # (the assertion is made in the test's own thread)
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert errors == []
    assert seen == [True, (None, None, None)]  # inside the hook: a pass; after it: none


def test_grad_with_create_graph_casts_a_grad_output_of_another_dtype_to_the_outputs():
    # torch: a float64 grad_output of a float32 output is cast to float32 (on the graph)
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    (gx,) = ta.autograd.grad(x * 2, x, grad_outputs=ta.tensor([1.0, 3.0], dtype=ta.float64),
                             create_graph=True)
    assert gx.dtype == ta.float32 and gx.tolist() == [2.0, 6.0]


def test_a_leafs_accumulate_grad_called_directly_adds_into_its_grad():
    x = ta.ones(3, requires_grad=True)
    y = (x * 2).sum()
    acc = y.grad_fn.next_functions[0][0].next_functions[0][0]
    assert acc.name() == "AccumulateGrad"
    assert acc(ta.full((3,), 2.0)) == ()  # (torch's too: nothing comes back)
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    acc(ta.full((3,), 1.0))
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


def test_a_custom_functions_grad_fn_reads_its_ctx_and_names_itself_for_anything_else():
    class Square(ta.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            ctx.k = 3
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g

    y = Square.apply(ta.tensor([1.0, 2.0], requires_grad=True))
    assert y.grad_fn.k == 3 and y.grad_fn.saved_tensors[0].tolist() == [1.0, 2.0]
    with pytest.raises(AttributeError, match="^'SquareBackward' object has no attribute 'nope'$"):
        _ = y.grad_fn.nope


def test_a_tracer_with_only_a_forward_sees_the_ops_while_user_code_reads_data():
    class ForwardOnly:  # (any object may be a tracer: the events it lacks are not sent)
        def __init__(self):
            self.seen = []

        def forward(self, op, inputs, params, out):
            self.seen.append(op.name)

    class Reads(ForwardOnly):
        def read(self, tensor, how):
            self.seen.append(how)

    x = ta.tensor([1.0, 2.0], requires_grad=True)
    bare, reads = ForwardOnly(), Reads()
    with watching_data_reads(), tracing(bare), tracing(reads):  # (as a captured step records)
        y = x * 2
        d = y.data  # (a read the tracers are told of, those that listen)
        (d + 1).sum()
    assert bare.seen == ["mul", "add", "sum"] and d.tolist() == [2.0, 4.0]
    assert reads.seen == ["mul", ".data", "add", "sum"]
