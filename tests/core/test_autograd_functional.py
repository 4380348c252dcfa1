"""ta.autograd.functional (torch.autograd.functional): jacobian, vjp and jvp — the softmax
Jacobian in closed form, finite differences, torch's results and shapes for one or several
inputs and outputs, independence (zeros, or an error when strict), and the errors."""

import numpy as np
import pytest
import tinyattn.autograd.functional as AF  # noqa: N812 - as torch code names it

import tinyattn as ta
import tinyattn.functional as F

rng = np.random.default_rng(0)


def test_the_import_line_and_the_attribute_are_one_module():
    assert ta.autograd.functional is AF and AF.jacobian.__module__ == "tinyattn.autograd_functional"


@pytest.mark.parametrize("shape", [(4,), (2, 5)])
def test_the_softmax_jacobian_is_diag_y_minus_y_y_t(shape):
    """What the softmax VJP never builds, built: per row, diag(y) - y yᵀ; rows do not mix."""
    x = rng.standard_normal(shape)
    y = F.softmax(ta.tensor(x), dim=-1).numpy().reshape(-1, shape[-1])
    J = AF.jacobian(lambda t: F.softmax(t, dim=-1), ta.tensor(x))  # noqa: N806
    assert J.shape == shape + shape and J.dtype == np.float64
    blocks = J.numpy().reshape(len(y), shape[-1], len(y), shape[-1])
    for r in range(len(y)):
        for s in range(len(y)):
            want = np.diag(y[r]) - np.outer(y[r], y[r]) if r == s else 0
            np.testing.assert_allclose(blocks[r, :, s], want, atol=1e-15)


def test_a_masked_entry_has_a_zero_row_and_column():
    x = ta.tensor([0.3, float("-inf"), -1.2])
    J = AF.jacobian(lambda t: F.softmax(t, dim=-1), x).numpy()  # noqa: N806
    assert np.all(J[1] == 0) and np.all(J[:, 1] == 0) and np.isfinite(J).all()


def test_the_jacobian_agrees_with_finite_differences():
    w1, w2 = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))

    def f(x):
        return (x @ ta.tensor(w1)).tanh() @ ta.tensor(w2)

    x0 = rng.standard_normal((2, 3))
    J = AF.jacobian(f, ta.tensor(x0)).numpy()  # noqa: N806  # (2, 2) + (2, 3)
    eps = 1e-6
    for idx in np.ndindex(x0.shape):
        d = np.zeros_like(x0)
        d[idx] = eps
        column = (f(ta.tensor(x0 + d)).numpy() - f(ta.tensor(x0 - d)).numpy()) / (2 * eps)
        np.testing.assert_allclose(J[(...,) + idx], column, rtol=1e-7, atol=1e-9)


def _fns():
    return {
        "one to one": (lambda a: (a * a).sum(-1), [(2, 3)]),
        "0-d in, vector out": (lambda a: a * ta.arange(3.0, dtype=np.float64), [()]),
        "scalar out": (lambda a: (a ** 3).mean(), [(4,)]),
        "two in": (lambda a, b: a @ b, [(2, 3), (3,)]),
        "two out": (lambda a: (a.exp(), a.sum()), [(3,)]),
        "two in, two out": (lambda a, b: (a * b, (a - b).tanh().sum()), [(2,), (2,)]),
        "an input unused": (lambda a, b: a.sin(), [(2,), (3,)]),
        "a constant output": (lambda a: (a * 2, ta.ones(2, dtype=np.float64)), [(2,)]),
    }


@pytest.mark.parametrize("name", list(_fns()))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_jacobian_vjp_and_jvp_match_torch(name, dtype):
    torch = pytest.importorskip("torch")
    fn, shapes = _fns()[name]
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    tfn = _torch_version(torch, name)
    ours_in = [ta.tensor(a) for a in arrays]
    theirs_in = [torch.tensor(a) for a in arrays]
    pack = (lambda xs: tuple(xs)) if len(arrays) > 1 else (lambda xs: xs[0])

    got = AF.jacobian(fn, pack(ours_in))
    want = torch.autograd.functional.jacobian(tfn, pack(theirs_in))
    _check_same_tree(got, want)

    outs = fn(*ours_in)
    vs = [rng.standard_normal(o.shape).astype(dtype) for o in (outs if isinstance(outs, tuple)
                                                               else (outs,))]
    vpack = (lambda xs: tuple(xs)) if isinstance(outs, tuple) else (lambda xs: xs[0])
    got = AF.vjp(fn, pack(ours_in), vpack([ta.tensor(v) for v in vs]))
    want = torch.autograd.functional.vjp(tfn, pack(theirs_in), vpack([torch.tensor(v)
                                                                      for v in vs]))
    _check_same_tree(got, want)

    us = [rng.standard_normal(s).astype(dtype) for s in shapes]
    got = AF.jvp(fn, pack(ours_in), pack([ta.tensor(u) for u in us]))
    want = torch.autograd.functional.jvp(tfn, pack(theirs_in), pack([torch.tensor(u)
                                                                     for u in us]))
    _check_same_tree(got, want)


def _torch_version(torch, name):
    return {
        "one to one": lambda a: (a * a).sum(-1),
        "0-d in, vector out": lambda a: a * torch.arange(3.0, dtype=torch.float64),
        "scalar out": lambda a: (a ** 3).mean(),
        "two in": lambda a, b: a @ b,
        "two out": lambda a: (a.exp(), a.sum()),
        "two in, two out": lambda a, b: (a * b, (a - b).tanh().sum()),
        "an input unused": lambda a, b: a.sin(),
        "a constant output": lambda a: (a * 2, torch.ones(2, dtype=torch.float64)),
    }[name]


def _check_same_tree(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want), (type(got), len(want))
        for g, w in zip(got, want, strict=True):
            _check_same_tree(g, w)
        return
    assert isinstance(got, ta.Tensor) and got.shape == tuple(want.shape), (got, want.shape)
    assert str(got.dtype) == str(want.dtype).replace("torch.", ""), (got.dtype, want.dtype)
    assert not got.requires_grad
    w = want.detach().numpy()
    np.testing.assert_allclose(got.numpy(), w, rtol=2e-5 if w.dtype == np.float32 else 1e-12,
                               atol=1e-6 if w.dtype == np.float32 else 1e-14)


def test_the_callers_tensors_are_not_touched_and_no_grad_does_not_stop_it():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    c = ta.tensor([3.0, 4.0])
    with ta.no_grad():
        J = AF.jacobian(lambda a, b: a * b, (x, c))  # noqa: N806
        _, g = AF.vjp(lambda a: (a * a).sum(), x)
    np.testing.assert_array_equal(J[0].numpy(), np.diag([3.0, 4.0]))
    np.testing.assert_array_equal(J[1].numpy(), np.diag([1.0, 2.0]))
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0])
    assert x.grad is None and not c.requires_grad and x.is_leaf


def test_strict_refuses_an_output_that_does_not_depend_on_an_input():
    fn = _fns()["an input unused"][0]
    a, b = ta.tensor([1.0, 2.0]), ta.tensor([1.0, 2.0, 3.0])
    J = AF.jacobian(fn, (a, b))  # noqa: N806
    assert J[1].shape == (2, 3) and not J[1].numpy().any()
    with pytest.raises(ta.GraphError, match="jacobian: output 0 does not depend on input 1; "
                                            "strict=True refuses that"):
        AF.jacobian(fn, (a, b), strict=True)
    with pytest.raises(ta.GraphError, match="vjp: the output does not depend on input 1"):
        AF.vjp(fn, (a, b), ta.ones(2), strict=True)
    with pytest.raises(ta.GraphError, match="jacobian: output 1 does not depend on input 0"):
        AF.jacobian(_fns()["a constant output"][0], a, strict=True)
    with pytest.raises(ta.GraphError, match="jvp: output 0 does not depend on input 1"):
        AF.jvp(fn, (a, b), (ta.ones(2), ta.ones(3)), strict=True)
    AF.jacobian(lambda t: t * 0, a, strict=True)  # a zero derivative is still a dependence
    out, g = AF.vjp(lambda t: ta.ones(2), a, ta.ones(2))  # no output depends on the input
    assert out.tolist() == [1.0, 1.0] and g.tolist() == [0.0, 0.0] and g.dtype == a.dtype


@pytest.mark.parametrize("call,error,match", [
    (lambda: AF.jacobian(lambda a: a, ta.ones(2), strategy="forward-mode"),
     NotImplementedError, "jacobian: strategy='forward-mode' is only implemented with "
     "vectorize=True"),
    (lambda: AF.jacobian(lambda a: a, ta.ones(2), strategy="fwd"), ValueError,
     "jacobian: strategy='fwd': expected 'reverse-mode' or 'forward-mode'"),
    (lambda: AF.jacobian(lambda a: a, ta.tensor([1, 2])), ta.DTypeError,
     "jacobian: input 0 is int64: only floating-point inputs have a derivative"),
    (lambda: AF.jacobian(lambda a: a, [ta.ones(2), np.ones(2)]), TypeError,
     "jacobian: input 1 must be a tinyattn Tensor, got ndarray"),
    (lambda: AF.jacobian(lambda a: a.numpy(), ta.ones(2)), TypeError,
     "jacobian: output 0 must be a tinyattn Tensor, got ndarray"),
    (lambda: AF.vjp(lambda a: a, [ta.ones(2), 3.0]), TypeError,
     "^vjp: input 1 must be a tinyattn Tensor, got float"),
    (lambda: AF.jvp(lambda a: a, ta.tensor([1, 2]), ta.ones(2)), ta.DTypeError,
     "^jvp: input 0 is int64"),
    (lambda: AF.vjp(lambda a: [a, a.numpy()], ta.ones(2)), TypeError,
     "^vjp: output 1 must be a tinyattn Tensor, got ndarray"),
    (lambda: AF.jvp(lambda a: (a, 2.0), ta.ones(2), ta.ones(2)), TypeError,
     "^jvp: output 1 must be a tinyattn Tensor, got float"),
    (lambda: AF.vjp(lambda a: a, ta.ones(2), np.ones(2)), TypeError,
     "^vjp: v 0 must be a tinyattn Tensor, got ndarray"),
    (lambda: AF.jvp(lambda a: a, ta.ones(2), [np.ones(2)]), TypeError,
     "^jvp: v 0 must be a tinyattn Tensor, got ndarray"),
    (lambda: AF.vjp(lambda a: a * 2, ta.ones(2)), ta.ShapeError,
     "vjp: v may be left out only when func returns one tensor with a single entry"),
    (lambda: AF.vjp(lambda a: a * 2, ta.ones(2), ta.ones(3)), ta.ShapeError,
     r"vjp: v 0 has shape \(3,\) but output 0 has shape \(2,\)"),
    (lambda: AF.vjp(lambda a: (a, a), ta.ones(2), ta.ones(2)), ta.ShapeError,
     "vjp: 1 tensors in v for 2 outputs"),
    (lambda: AF.jvp(lambda a: a * 2, ta.ones(2)), ta.ShapeError,
     "jvp: v may be left out only when there is one input with a single entry"),
    (lambda: AF.jvp(lambda a, b: a * b, (ta.ones(2), ta.ones(2)), ta.ones(2)), ta.ShapeError,
     "jvp: 1 tensors in v for 2 inputs"),
    (lambda: AF.jvp(lambda a: a * 2, ta.ones(2), ta.ones(1, 2)), ta.ShapeError,
     r"jvp: v 0 has shape \(1, 2\) but input 0 has shape \(2,\)"),
])
def test_bad_calls_are_errors_that_say_what_is_wrong(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_v_may_be_left_out_for_one_entry():
    out, g = AF.vjp(lambda a: (a * a).sum(), ta.tensor([1.0, 3.0]))
    assert out.item() == 10.0 and g.tolist() == [2.0, 6.0]
    out, d = AF.jvp(lambda a: a * ta.tensor([1.0, 2.0]), ta.tensor(2.0))
    assert out.tolist() == [2.0, 4.0] and d.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("name", ["hessian", "hvp", "vhp"])
def test_second_derivatives_match_torch(name):
    """torch's hessian, hvp and vhp: exact second derivatives (gradients of gradients, taken
    with create_graph=True), with torch's keywords."""
    torch = pytest.importorskip("torch")
    f, tf = getattr(AF, name), getattr(torch.autograd.functional, name)
    args = (lambda a: (a ** 3).sum(), ta.tensor([1.0, 2.0], dtype=ta.float64))
    targs = (lambda a: (a ** 3).sum(), torch.tensor([1.0, 2.0], dtype=torch.float64))
    if name != "hessian":
        args += (ta.tensor([1.0, -0.5], dtype=ta.float64),)
        targs += (torch.tensor([1.0, -0.5], dtype=torch.float64),)
    got, want = f(*args, strict=False), tf(*targs, strict=False)
    got, want = (got, want) if name == "hessian" else (got[1], want[1])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    assert name in AF.__all__
