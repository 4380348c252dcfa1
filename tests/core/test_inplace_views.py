"""In-place changes through views of tensors in the graph, as torch records them (CopySlices).

b = a * 1; b[..., 0] += 1 writes b's memory through the view and rewrites b's history: b
becomes "b with the view's entries replaced by their new values", the view keeps its own
change, and every other live view of b that sees a changed entry reads its values off the new b
(tinyattn/ops/views.py). Each case is compared with torch in float64: the values of the base
and the view, and the gradients of the leaves, with both the base and the view in the loss.
torch's refusals are refused too, each with a message that says what to do.
"""

import warnings

import numpy as np
import pytest

import tinyattn as ta


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


A = np.random.default_rng(0).standard_normal((3, 4))
W = np.arange(12.0).reshape(3, 4) / 7 - 0.8

# views of a (3, 4) tensor b: each made by a view op, or a chain of them
VIEWS = {
    "int index": lambda b: b[1],
    "ellipsis": lambda b: b[..., 0],
    "steps": lambda b: b[1:, ::2],
    "None": lambda b: b[None, 2],
    "0-d": lambda b: b[1, 2],
    "view": lambda b: b.view(12),
    "reshape": lambda b: b.reshape(2, 6),
    "flatten": lambda b: b.flatten(),
    "view_as": lambda b: b.view_as(b),
    "t": lambda b: b.t(),
    "T": lambda b: b.T,
    "transpose": lambda b: b.transpose(0, 1),
    "swapaxes": lambda b: b.swapaxes(1, 0),
    "permute": lambda b: b.view(3, 2, 2).permute(2, 0, 1),
    "movedim": lambda b: b.view(3, 2, 2).movedim(0, -1),
    "select": lambda b: b.select(1, 2),
    "narrow": lambda b: b.narrow(1, 1, 2),
    "unsqueeze": lambda b: b.unsqueeze(1),
    "squeeze": lambda b: b[None].squeeze(0),
    "diagonal": lambda b: b.diagonal(),
    "diagonal offset": lambda b: b.diagonal(1),
    "tensor_split": lambda b: b.tensor_split(2, dim=1)[1],
    "chain": lambda b: b.t()[1:].view(3, 3)[::2],
    "view of a transpose": lambda b: b.t().unsqueeze(0)[0, 2],
}

# in-place forms on a view v (c: a 0-d tensor that requires grad)
FORMS = {
    "add_": lambda v, c: v.add_(1.5),
    "+=": lambda v, c: v.__iadd__(c),
    "mul_": lambda v, c: v.mul_(c),
    "sub_ alpha": lambda v, c: v.sub_(c, alpha=2),
    "setitem": lambda v, c: v.__setitem__(0 if v.ndim else ..., c * 3),
    "setitem all": lambda v, c: v.__setitem__(..., v + c),  # (v * c would keep v: refused)
    "fill_": lambda v, c: v.fill_(2.0),
    "zero_": lambda v, c: v.zero_(),
    "copy_": lambda v, c: v.copy_(c),
    "clamp_": lambda v, c: v.clamp_(-0.5, 0.5),
    "masked_fill_": lambda v, c: v.masked_fill_(v > 0, 0.25),
    "exp_": lambda v, c: v.exp_(),
    "pow_": lambda v, c: v.pow_(2),
}


def _run(lib, view, form):
    """b = a * 1, changed in place through view(b) by form; both b and the view in the loss."""
    a = lib.tensor(A.copy(), requires_grad=True)
    c = lib.tensor(0.7, dtype=lib.float64, requires_grad=True)
    b = a * 1
    v = view(b)
    form(v, c)
    loss = (b * lib.tensor(W)).sum() + (v * v).sum()
    loss.backward()
    grad = lambda t: None if t.grad is None else t.grad.numpy()  # noqa: E731
    return [b.detach().numpy(), v.detach().numpy(), grad(a), grad(c)]


def _same(ours, theirs):
    for x, y in zip(ours, theirs, strict=True):
        if y is None:
            assert x is None or not np.any(x)
        else:
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_an_in_place_change_through_a_view_gives_torchs_values_and_gradients(torch, view, form):
    _same(_run(ta, VIEWS[view], FORMS[form]), _run(torch, VIEWS[view], FORMS[form]))


# whole steps, as a user writes them (b: a (3, 4) tensor in the graph)
STEPS = {
    "b[..., 0] += 1": lambda b, c: b[..., 0].__iadd__(1),
    "augmented assignment through setitem": lambda b, c: b.__setitem__(
        (Ellipsis, 0), b[..., 0].__iadd__(c)),
    "y[:, 1].mul_(2)": lambda b, c: b[:, 1].mul_(2),
    "b[0][1] = 5": lambda b, c: b[0].__setitem__(1, 5.0),
    "b[0][1] = c": lambda b, c: b[0].__setitem__(1, c),
    "b.t()[0] = 0": lambda b, c: b.t().__setitem__(0, 0.0),
    "b[1:, ::2] *= 2": lambda b, c: b.__setitem__((slice(1, None), slice(None, None, 2)),
                                                  b[1:, ::2].__imul__(2)),
    "b[:, 1] = b[:, 2]": lambda b, c: b.__setitem__((slice(None), 1), b[:, 2]),
    "b.view(12).add_(1)": lambda b, c: b.view(12).add_(1),
    "b.t()[0][1:] *= 2": lambda b, c: b.t()[0][1:].mul_(2),
    "b[0][1] = 5; b.t()[0][1:] *= c": lambda b, c: (b[0].__setitem__(1, 5.0),
                                                    b.t()[0][1:].mul_(c)),
    "b[1, 2].mul_(c)": lambda b, c: b[1, 2].mul_(c),
    "a view of a view changed twice": lambda b, c: b[1:][0].mul_(c).add_(b[0, 0]),
    "the base, then a view": lambda b, c: (b.mul_(c), b[:, 1].exp_()),
    "a view, then the base": lambda b, c: (b[:, 1].add_(c), b.mul_(c)),
    "two views, disjoint": lambda b, c: (b[0].mul_(c), b[1].add_(c)),
    "two views, overlapping": lambda b, c: (b[0].mul_(c), b[:, 0].add_(c)),
    "a view, from a value of another": lambda b, c: b[0].copy_(b[2] + c),
}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_steps_through_views_give_torchs_values_and_gradients(torch, step):
    results = []
    for lib in (ta, torch):
        a = lib.tensor(A.copy(), requires_grad=True)
        c = lib.tensor(0.7, dtype=lib.float64, requires_grad=True)
        b = a * 1
        STEPS[step](b, c)
        (b * lib.tensor(W)).sum().backward()
        results.append([b.detach().numpy(), a.grad.numpy(),
                        None if c.grad is None else c.grad.numpy()])
    _same(*results)


def test_a_base_laid_out_in_another_order(torch):
    """A base whose array is not in C order (NumPy keeps a Fortran-ordered input's order, t_()
    transposes in place): its views are found in it all the same."""
    results = []
    for lib in (ta, torch):
        a = lib.tensor(np.asfortranarray(A) if lib is ta else A.copy(), requires_grad=True)
        c = lib.tensor(0.7, dtype=lib.float64, requires_grad=True)
        b = a * 1
        if lib is ta:
            assert not b._data.flags.c_contiguous
        b[1:, 2].mul_(c)  # (ours: b in Fortran order)
        b.t_()
        b[0, 1:].add_(c)
        b.t()[1:, 0].exp_()  # (torch's: b in Fortran order now)
        (b * b).sum().backward()
        results.append([b.detach().numpy(), a.grad.numpy(), c.grad.numpy()])
    _same(*results)


def test_the_brief_example_on_a_plain_tensor(torch):
    """b = ones(2, 2, requires_grad=True) * 1; b[..., 0] += 1: the error that was, now torch's."""
    grads = []
    for lib in (ta, torch):
        x = lib.ones(2, 2, requires_grad=True, dtype=lib.float64)
        b = x * 1
        b[..., 0] += 1
        v = b.view(4)
        v.add_(1)
        assert b.detach().numpy().tolist() == [[3.0, 2.0], [3.0, 2.0]]
        (b * b).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(*grads)


def test_views_of_the_base_follow_its_change_and_keep_giving_their_values(torch):
    """A live view that sees a changed entry reads its values off the new base (torch's
    AsStridedBackward0); one that sees none keeps its history, which still gives them."""
    results = []
    for lib in (ta, torch):
        a = lib.tensor(A.copy(), requires_grad=True)
        b = a * 1
        row, col, other = b[0], b[:, 0], b[2, 1:]
        row.mul_(3)  # col sees b[0, 0], other sees nothing changed
        assert col.detach().numpy()[0] == 3 * A[0, 0]
        loss = (col * lib.tensor([1.0, 2.0, 3.0])).sum() + other.sum() * 5 + row.sum()
        loss.backward()
        results.append([a.grad.numpy()])
        if lib is ta:
            assert col.grad_fn.name() == "AsStridedBackward0"
            assert other.grad_fn.name() == "GetitemBackward0"
            assert b.grad_fn.name() == "CopySlicesBackward0" and row.grad_fn.name() == \
                "MulBackward0"
    _same(*results)


def test_a_base_that_needed_no_grad_takes_one_and_its_views_follow(torch):
    """zeros(3, 4)[0].add_(c): the base requires grad from then on (torch's CopySlices), and
    so do its other live views, even those the change did not reach."""
    results = []
    for lib in (ta, torch):
        b = lib.zeros(3, 4, dtype=lib.float64)
        c = lib.tensor(0.5, dtype=lib.float64, requires_grad=True)
        other = b[1]
        b[0].add_(c)
        assert b.requires_grad and other.requires_grad and not b.is_leaf
        (b.sum() * 2 + other.sum()).backward()
        results.append([c.grad.numpy()])
    _same(*results)


def test_a_view_made_before_its_base_required_grad_is_refused_as_torch(torch):
    for lib, error in ((torch, RuntimeError), (ta, ta.GraphError)):
        w = lib.ones(3)
        v = w[1:]
        w.requires_grad_()
        with pytest.raises(error, match="a view of a leaf"):
            v.add_(1)
        assert w.detach().numpy().tolist() == [1.0, 1.0, 1.0]


def test_a_view_knows_its_base(torch):
    for lib in (ta, torch):
        b = lib.ones(3, 4) * 1
        assert b[0]._base is b and b.t()[1:].reshape(3, 3)._base is b and b[1, 2]._base is b
        assert b._base is None and not b._is_view() and b[0]._is_view()
        assert b.detach()._base is None and b.view(lib.int32)._base is None  # (no views)
        assert b.T.reshape(12)._base is None  # a copy
        d = b.detach()
        assert d[0]._base is d


def test_a_0d_index_is_a_view_as_torchs():
    b = ta.zeros(2, 3)
    b[0, 1].add_(2)
    b[1][2].fill_(5)
    assert b.numpy().tolist() == [[0, 2, 0], [0, 0, 5]] and b._version == 2


# ---- refused, as torch refuses -------------------------------------------------------------


def test_a_view_of_a_leaf_that_requires_grad_is_refused_while_recording(torch):
    tw = torch.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        tw[0].add_(1)
    w = ta.ones(2, 3, requires_grad=True)
    for change in (lambda: w[0].add_(1), lambda: w.t()[1].__setitem__(0, 2.0),
                   lambda: w.view(6).zero_()):
        with pytest.raises(ta.GraphError, match="a view of a leaf that requires grad.*no_grad"):
            change()
    assert w.numpy().tolist() == [[1.0] * 3] * 2 and w._version == 0
    with ta.no_grad():  # the update torch allows
        w[0].add_(1)
    with torch.no_grad():
        tw[0].add_(1)
    assert w.numpy().tolist() == tw.detach().numpy().tolist() and w.is_leaf


@pytest.mark.parametrize("make", ["split", "chunk", "unbind"])
def test_the_pieces_of_split_chunk_and_unbind_are_refused_while_recording(torch, make):
    pieces = {"split": lambda b: b.split(2)[0], "chunk": lambda b: b.chunk(2)[1],
              "unbind": lambda b: b.unbind(0)[0]}[make]
    with pytest.raises(RuntimeError, match="output of a function that returns multiple views"):
        pieces(torch.ones(4, 2, requires_grad=True) * 1).add_(1)
    b = ta.ones(4, 2, requires_grad=True) * 1
    said = "unbind" if make == "unbind" else "split"  # (chunk splits, as torch says too)
    with pytest.raises(ta.GraphError, match=rf"one of the views {said}\(\) returns.*\.clone"):
        pieces(b).add_(1)
    with pytest.raises(ta.GraphError, match="returns"):  # a view of a piece too
        pieces(b)[0].mul_(2)
    plain = ta.ones(4, 2)
    pieces(plain).add_(1)  # nothing recorded: allowed (torch too)
    pieces(torch.ones(4, 2)).add_(1)
    assert plain.numpy().sum() == 8 + (2 if make == "unbind" else 4)
    b = ta.ones(4, 2, requires_grad=True) * 1
    b.tensor_split(2)[0].add_(1)  # tensor_split and narrow: views torch lets change
    b.narrow(0, 2, 2).mul_(3)
    assert b.numpy().tolist() == [[2, 2], [2, 2], [3, 3], [3, 3]]


def test_a_view_made_under_no_grad_is_refused_while_recording(torch):
    for lib, error in ((torch, RuntimeError), (ta, ta.GraphError)):
        b = lib.ones(3, requires_grad=True) * 1
        with lib.no_grad():
            v = b[1:]
            v2 = v[0:]  # a view of it inherits the rule
        with pytest.raises(error, match="created in no_grad mode"):
            v.add_(1)
        with pytest.raises(error, match="created in no_grad mode"):
            v2.add_(1)
        with lib.no_grad():
            v.add_(1)  # under no_grad both: allowed
        assert b.detach().numpy().tolist() == [1.0, 2.0, 2.0]


def test_an_expanded_view_is_refused(torch):
    with pytest.raises(RuntimeError, match="more than one element"):
        (torch.ones(3, requires_grad=True) * 1).expand(2, 3).add_(1)
    b = ta.ones(3, requires_grad=True) * 1
    with pytest.raises(ta.GraphError, match=r"add_: more than one entry .* expand\(\).*clone"):
        b.expand(2, 3).add_(1)
    e = b[None].expand(2, 3)
    with pytest.raises(ta.GraphError, match="read-only"):  # (unrecorded: its memory refuses)
        with ta.no_grad():
            e.add_(1)


def test_an_alias_with_a_graph_of_its_own_is_still_refused():
    """A detach() that requires grad itself would not see the change (torch lets it go)."""
    b = ta.ones(2, 2, requires_grad=True) * 1
    alias = b.detach().requires_grad_()
    with pytest.raises(ta.GraphError, match=r"b?shares its memory with another live tensor"):
        b[0].add_(1)
    with pytest.raises(ta.GraphError, match="shares its memory with another live tensor"):
        b.add_(1)
    del alias
    b[0].add_(1)
    b.detach()[1].add_(1)  # a detach() with no graph: its change is not recorded (torch's)
    assert b.numpy().tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_a_view_whose_base_was_given_other_memory_is_refused():
    b = ta.ones(2, 2, requires_grad=True) * 1
    v = b[0]
    b.data = ta.zeros(2, 2).data
    with pytest.raises(ta.GraphError, match=r"no longer sees its base's memory.*\.data"):
        v.add_(1)


def test_a_saved_tensor_changed_through_a_view_is_refused_in_backward(torch):
    for lib, error, said in ((torch, RuntimeError, "modified by an inplace operation"),
                             (ta, ta.GraphError, r"mul saved its input 0 .* changed in place")):
        a = lib.tensor(A.copy(), requires_grad=True)
        b = a * 1
        z = b * b  # keeps b
        b.t()[0].add_(1)
        with pytest.raises(error, match=said):
            z.sum().backward()
    b = ta.tensor(A.copy(), requires_grad=True) * 1
    row = b[0]
    z = (row.exp() * 2).sum()  # exp keeps its output, not b: the change below is allowed
    b[1].mul_(3)
    z.backward()


def test_a_captured_step_with_a_change_through_a_view_stays_eager_and_right():
    """capture refuses the step (a replay would not rewrite the history), and its eager
    calls give the gradients of the uncaptured fn."""
    def fn(x):
        h = x * w
        h[:, 0] += 1
        h.t()[1].mul_(x[0, 0])
        return (h * h).sum()

    w = ta.tensor(A.copy(), requires_grad=True)
    step = ta.capture(fn)
    x = ta.tensor(W.copy())
    with pytest.warns(UserWarning) as seen:
        losses = [step(x).item() for _ in range(3)]
    assert [str(r.message) for r in seen] == [
        "capture: a tensor was changed in place inside fn; running fn eagerly from now on"]
    got = w.grad.numpy().copy()
    w.grad = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            expected = fn(x)
            expected.backward()
    assert losses == [expected.item()] * 3
    np.testing.assert_allclose(got, w.grad.numpy(), rtol=1e-12)
