"""Shape methods that change nothing (a same-shape reshape, squeeze() with no dim of size 1,
permute in order, t() of a vector...) return what torch returns: a new view of the input with
its own node, or, where torch gives the input itself (contiguous() of a contiguous tensor,
flatten(d, d), mT of a 0-d tensor), the input.

The input itself, where torch makes a view, gave silently wrong results: a hook on y fired for
x's other uses too, y.retain_grad() kept x's gradient, y.requires_grad_(False) froze x,
y.detach_() cut x off its graph, and y.is_leaf said True. Each case is compared with torch.
"""

import warnings

import numpy as np
import pytest

import tinyattn as ta


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


# x: a (2, 3) leaf that requires grad; v: (3,); s: 0-d; each y = method(x)
CASES = {
    "reshape same": lambda lib, x, v, s: (x, x.reshape(2, 3)),
    "reshape -1": lambda lib, x, v, s: (x, x.reshape(-1, 3)),
    "view same": lambda lib, x, v, s: (x, x.view(2, 3)),
    "view -1 of 1-D": lambda lib, x, v, s: (v, v.view(-1)),
    "squeeze()": lambda lib, x, v, s: (x, x.squeeze()),
    "squeeze(0)": lambda lib, x, v, s: (x, x.squeeze(0)),
    "squeeze((0, 1))": lambda lib, x, v, s: (x, x.squeeze((0, 1))),
    "squeeze() 0-d": lambda lib, x, v, s: (s, s.squeeze()),
    "squeeze(0) 0-d": lambda lib, x, v, s: (s, s.squeeze(0)),
    "unsqueeze.squeeze": lambda lib, x, v, s: (x, x.unsqueeze(0).squeeze(0)),
    "functional squeeze": lambda lib, x, v, s: (x, lib.squeeze(x)),
    "functional reshape": lambda lib, x, v, s: (x, lib.reshape(x, (2, 3))),
    "expand same": lambda lib, x, v, s: (x, x.expand(2, 3)),
    "expand -1": lambda lib, x, v, s: (x, x.expand(-1, -1)),
    "expand 0-d": lambda lib, x, v, s: (s, s.expand(())),
    "expand_as": lambda lib, x, v, s: (x, x.expand_as(x)),
    "broadcast_to": lambda lib, x, v, s: (x, x.broadcast_to((2, 3))),
    "functional broadcast_to": lambda lib, x, v, s: (x, lib.broadcast_to(x, (2, 3))),
    "view_as": lambda lib, x, v, s: (x, x.view_as(x)),
    "reshape_as": lambda lib, x, v, s: (x, x.reshape_as(x)),
    "unflatten": lambda lib, x, v, s: (x, x.unflatten(1, (3,))),
    "flatten 1-D": lambda lib, x, v, s: (v, v.flatten()),  # torch: the input
    "flatten(1, 1)": lambda lib, x, v, s: (x, x.flatten(1, 1)),  # torch: the input
    "flatten(-1, -1)": lambda lib, x, v, s: (x, x.flatten(-1, -1)),
    "functional flatten 1-D": lambda lib, x, v, s: (v, lib.flatten(v)),
    "flatten 0-d": lambda lib, x, v, s: (s, s.flatten()),
    "ravel 1-D": lambda lib, x, v, s: (v, v.ravel()),
    "permute in order": lambda lib, x, v, s: (x, x.permute(0, 1)),
    "transpose(1, 1)": lambda lib, x, v, s: (x, x.transpose(1, 1)),
    "transpose 0-d": lambda lib, x, v, s: (s, s.transpose(0, -1)),
    "swapaxes(0, 0)": lambda lib, x, v, s: (x, x.swapaxes(0, 0)),
    "movedim no-op": lambda lib, x, v, s: (x, x.movedim(0, 0)),
    "movedim lists": lambda lib, x, v, s: (x, x.movedim((0, 1), (0, 1))),
    "movedim 0-d": lambda lib, x, v, s: (s, s.movedim(0, 0)),
    "t() 1-D": lambda lib, x, v, s: (v, v.t()),
    "t() 0-d": lambda lib, x, v, s: (s, s.t()),
    "functional t 1-D": lambda lib, x, v, s: (v, lib.t(v)),
    "T 1-D": lambda lib, x, v, s: (v, v.T),
    "T 0-d": lambda lib, x, v, s: (s, s.T),
    "contiguous": lambda lib, x, v, s: (x, x.contiguous()),  # torch: the input
    "narrow full": lambda lib, x, v, s: (x, x.narrow(0, 0, 2)),
    "x[...]": lambda lib, x, v, s: (x, x[...]),
    "x[:]": lambda lib, x, v, s: (x, x[:]),
    "s[()]": lambda lib, x, v, s: (s, s[()]),
    "chunk(1)": lambda lib, x, v, s: (x, x.chunk(1)[0]),
    "tensor_split(1)": lambda lib, x, v, s: (x, x.tensor_split(1)[0]),
    "atleast_2d 2-D": lambda lib, x, v, s: (x, lib.atleast_2d(x)),  # torch: the input
    "broadcast_tensors same shape": lambda lib, x, v, s: (x, lib.broadcast_tensors(x, v)[0]),
}


def _made(lib, name):
    x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    v = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s = lib.tensor(2.0, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CASES[name](lib, x, v, s)


@pytest.mark.parametrize("name", list(CASES))
def test_a_shape_method_that_changes_nothing_returns_what_torch_returns(torch, name):
    x, y = _made(ta, name)
    tx, ty = _made(torch, name)
    assert (y is x) == (ty is tx)
    assert y.is_leaf == ty.is_leaf
    assert (y.grad_fn is None) == (ty.grad_fn is None)
    assert (y._base is x) == (ty._base is tx)
    assert y.shape == tuple(ty.shape)


def test_mT_of_a_0d_tensor_is_the_tensor_itself():  # noqa: N802 - the property's name
    """torch: the input, with a deprecation warning (shown once a process, so torch's is not
    called here: tests/ops/test_api_parity_fixes.py looks for it)."""
    s = ta.tensor(2.0, requires_grad=True)
    with pytest.warns(UserWarning, match="mT is deprecated on 0-D tensors"):
        assert s.mT is s


def test_a_hook_on_a_same_shape_view_sees_only_its_own_gradient(torch):
    def run(lib, make):
        a = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        x = a * 1
        y = make(x)
        y.register_hook(lambda g: g * 10)
        y.retain_grad()
        (y * 2 + x).sum().backward()
        return a.grad, y.grad

    for make in (lambda x: x.reshape(2, 2), lambda x: x.squeeze(), lambda x: x.expand(2, 2),
                 lambda x: x.view_as(x), lambda x: x.permute(0, 1), lambda x: x[...]):
        (ga, gy), (tga, tgy) = run(ta, make), run(torch, make)
        np.testing.assert_allclose(ga.numpy(), tga.numpy())  # 21 each, not 30
        np.testing.assert_allclose(gy.numpy(), tgy.numpy())  # y's own: 2, not x's


def test_requires_grad_off_on_a_same_shape_view_is_refused_and_x_stays(torch):
    for lib in (ta, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x.reshape(2)
        assert not y.is_leaf
        with pytest.raises(RuntimeError, match="leaf"):
            y.requires_grad_(False)
        assert x.requires_grad
        assert y.requires_grad_(True) is y  # (on a non-leaf that requires grad: nothing)


def test_detach_in_place_of_a_same_shape_view_is_refused_with_torchs_words(torch):
    for lib in (ta, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        x = a * 1
        for y in (x.reshape(2), x.squeeze(), x.expand(2), x.view(2), x.permute(0), x.t()):
            with pytest.raises(RuntimeError, match="[Cc]an't detach views in-place"):
                y.detach_()
        assert x.grad_fn is not None  # x keeps its graph
        plain = lib.tensor([1.0, 2.0])
        with pytest.raises(RuntimeError, match="[Cc]an't detach views in-place"):
            plain.reshape(2).detach_()  # (torch refuses any view, grad or not)


def test_an_in_place_change_of_a_same_shape_view_reaches_its_base_as_torchs(torch):
    def run(lib, make):
        a = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True, dtype=lib.float64)
        x = a * 1
        y = make(x)
        y.mul_(3)
        assert y._base is x
        ((x * x).sum() + y.sum()).backward()
        return x.detach(), a.grad

    for make in (lambda x: x.reshape(2, 2), lambda x: x.squeeze(), lambda x: x.expand(2, 2),
                 lambda x: x.permute(0, 1), lambda x: x.transpose(0, 0), lambda x: x[:]):
        (xv, ga), (txv, tga) = run(ta, make), run(torch, make)
        np.testing.assert_allclose(xv.numpy(), txv.numpy())
        np.testing.assert_allclose(ga.numpy(), tga.numpy())


def test_a_same_shape_view_shares_the_version_counter():
    x = ta.tensor([1.0, 2.0]) * 1
    for y in (x.reshape(2), x.view(2), x.squeeze(), x.expand(2), x.permute(0), x.t()):
        before = x._version
        y.add_(1)
        assert x._version == y._version == before + 1
    assert x.tolist() == [7.0, 8.0]


def test_a_view_of_a_0d_op_result_shares_its_memory_as_torchs(torch):
    """A 0-d op's result holds a NumPy scalar, which no array can share: a view of it (and a
    same-shape one is a view now) gets it as a 0-d array first, so that a change through the
    view reaches it, as torch's."""
    def run(lib, make):
        a = lib.tensor([1.0, 2.0], requires_grad=True, dtype=lib.float64)
        x = a.sum() * 1
        y = make(x)
        y.mul_(3)
        assert y._base is x and x._version == 1
        (x * x + y * 2).backward()
        return x.item(), a.grad

    for make in (lambda x: x.reshape(()), lambda x: x.view(1), lambda x: x.squeeze(),
                 lambda x: x.expand(()), lambda x: x.t(), lambda x: x.T, lambda x: x[...],
                 lambda x: x.transpose(0, 0), lambda x: x.movedim(0, 0), lambda x: x.flatten(),
                 lambda x: x.unsqueeze(0), lambda x: x.permute(())):
        (xv, ga), (txv, tga) = run(ta, make), run(torch, make)
        assert xv == txv
        np.testing.assert_allclose(ga.numpy(), tga.numpy())
