"""What a seed-1 mutation draw of autograd_functional and utils found untested: hvp/vhp with
create_graph keeping their graph, a function whose output leaves the inputs, hessian's defaults
(strict, outer_jacobian_strategy), an input the function ignores, errors naming hessian, vjp's
create_graph reaching the caller's inputs, a non-reentrant checkpoint whose inputs need no
gradient, and DistributedSampler's messages. Each against torch where torch is installed."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.autograd_functional import hessian, hvp, vhp, vjp
from tinyattn.errors import GraphError, ShapeError

torch = pytest.importorskip("torch")
TF = torch.autograd.functional

X = np.array([0.5, -1.0, 2.0])
V = np.array([1.0, 0.5, -2.0])


def cubic(lib):
    return lambda x: (x ** 3).sum() + (x[0] * x[1] * x[2])


@pytest.mark.parametrize("name", ["hvp", "vhp"])
def test_a_product_with_create_graph_keeps_its_graph_to_the_inputs(name):
    ours, theirs = {"hvp": (hvp, TF.hvp), "vhp": (vhp, TF.vhp)}[name]
    x, xt = ta.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    out, hv = ours(cubic(ta), x, ta.tensor(V), create_graph=True)
    out_t, hv_t = theirs(cubic(torch), xt, torch.tensor(V), create_graph=True)
    assert hv.requires_grad and out.requires_grad
    np.testing.assert_allclose(hv.detach().numpy(), hv_t.detach().numpy(), rtol=1e-12)
    (hv * hv).sum().backward()  # a third derivative, through the product's graph
    (hv_t * hv_t).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    _, plain = ours(cubic(ta), ta.tensor(X, requires_grad=True), ta.tensor(V))
    assert not plain.requires_grad  # (without create_graph: detached)


@pytest.mark.parametrize("name", ["hvp", "vhp"])
def test_an_output_off_the_inputs_graph_gives_zeros(name):
    ours, theirs = {"hvp": (hvp, TF.hvp), "vhp": (vhp, TF.vhp)}[name]
    out, hv = ours(lambda x: ta.tensor(1.0), ta.tensor(X), ta.tensor(V))
    out_t, hv_t = theirs(lambda x: torch.tensor(1.0), torch.tensor(X), torch.tensor(V))
    assert out.item() == out_t.item() == 1.0
    np.testing.assert_array_equal(hv.numpy(), hv_t.numpy())
    assert hv.shape == (3,)
    with pytest.raises(GraphError, match=f"{name}: the output does not depend on input 0"):
        ours(lambda x: ta.tensor(1.0), ta.tensor(X), ta.tensor(V), strict=True)


def test_a_misshapen_v_names_the_inputs():
    with pytest.raises(ShapeError, match=r"hvp: v 0 has shape \(2,\) but input 0 has shape "
                                         r"\(3,\)"):
        hvp(cubic(ta), ta.tensor(X), ta.ones(2))
    with pytest.raises(ShapeError, match="hvp: 2 tensors in v for 1 inputs"):
        hvp(cubic(ta), ta.tensor(X), (ta.ones(3), ta.ones(3)))


def test_hessian_of_a_linear_function_is_zeros_unless_strict():
    h = hessian(lambda x: x.sum() * 3.0, ta.tensor(X))
    h_t = TF.hessian(lambda x: x.sum() * 3.0, torch.tensor(X))
    np.testing.assert_array_equal(h.numpy(), h_t.numpy())
    assert h.shape == (3, 3)
    with pytest.raises(GraphError, match="hessian: the gradient in input 0 does not depend on "
                                         "input 0; strict=True"):
        hessian(lambda x: x.sum() * 3.0, ta.tensor(X), strict=True)
    with pytest.raises(RuntimeError):
        TF.hessian(lambda x: x.sum() * 3.0, torch.tensor(X), strict=True)


def test_an_input_the_function_ignores_has_zero_blocks():
    def f(lib):
        return lambda x, y: (x ** 2).sum() * 1.5

    h = hessian(f(ta), (ta.tensor(X), ta.ones(2)))
    h_t = TF.hessian(f(torch), (torch.tensor(X), torch.ones(2)))
    for i in range(2):
        for j in range(2):
            assert h[i][j].shape == tuple(h_t[i][j].shape)
            np.testing.assert_array_equal(h[i][j].numpy(), h_t[i][j].numpy())


@pytest.mark.parametrize("kwargs, error", [
    ({"outer_jacobian_strategy": "bad"}, ValueError),
    ({"outer_jacobian_strategy": "forward-mode"}, NotImplementedError),
    ({"outer_jacobian_strategy": "forward-mode", "vectorize": True, "strict": True}, ValueError),
])
def test_hessians_strategy_as_torch_takes_it(kwargs, error):
    with pytest.raises(error, match="hessian: .*outer_jacobian_strategy"):
        hessian(cubic(ta), ta.tensor(X), **kwargs)
    with pytest.raises((AssertionError, NotImplementedError, RuntimeError)):
        TF.hessian(cubic(torch), torch.tensor(X), **kwargs)


def test_hessian_forward_mode_with_vectorize_is_the_same_hessian():
    h = hessian(cubic(ta), ta.tensor(X), vectorize=True, outer_jacobian_strategy="forward-mode")
    h_t = TF.hessian(cubic(torch), torch.tensor(X), vectorize=True,
                     outer_jacobian_strategy="forward-mode")
    h_t = h_t.detach()  # (torch's forward-mode Hessian comes back requiring grad)
    np.testing.assert_allclose(h.numpy(), h_t.numpy(), rtol=1e-12)
    np.testing.assert_allclose(hessian(cubic(ta), ta.tensor(X)).numpy(), h_t.numpy(), rtol=1e-12)


@pytest.mark.parametrize("call, match", [
    (lambda: hessian(cubic(ta), [1.0, 2.0]), "hessian: input 0 must be a tinyattn Tensor, got "
                                             "float"),
    (lambda: hessian(lambda x: 3.0, ta.tensor(X)), "hessian"),
    (lambda: hessian(lambda x: x * 2, ta.tensor(X)), "hessian: func must return a single"),
])
def test_hessians_errors_name_it(call, match):
    with pytest.raises((TypeError, ShapeError), match=match):
        call()


def test_vjp_with_create_graph_reaches_the_callers_inputs():
    x, xt = ta.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    _, g = vjp(cubic(ta), x, create_graph=True)
    _, g_t = TF.vjp(cubic(torch), xt, create_graph=True)
    assert g.requires_grad
    g.sum().backward()
    g_t.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_a_checkpoint_whose_inputs_need_no_gradient_still_trains_its_weights():
    from tinyattn.utils.checkpoint import checkpoint

    ta.manual_seed(0)
    lin = ta.nn.Linear(3, 2)
    x = ta.tensor(X[None, :].astype(np.float32))  # no grad: only the weights get one
    checkpoint(lambda t: lin(t).tanh(), x, use_reentrant=False).sum().backward()
    want = {n: p.grad.numpy().copy() for n, p in lin.named_parameters()}
    lin.zero_grad()
    lin(x).tanh().sum().backward()
    for n, p in lin.named_parameters():
        np.testing.assert_allclose(want[n], p.grad.numpy(), rtol=1e-6)
    assert x.grad is None


@pytest.mark.parametrize("name, kwargs", [("num_replicas", {"num_replicas": 1.5, "rank": 0}),
                                          ("rank", {"num_replicas": 2, "rank": "0"}),
                                          ("seed", {"num_replicas": 2, "rank": 0, "seed": 0.5})])
def test_the_sampler_names_the_argument_that_is_no_int(name, kwargs):
    from tinyattn.utils.data import DistributedSampler

    with pytest.raises(TypeError, match=f"DistributedSampler: {name} must be an int"):
        DistributedSampler(list(range(8)), **kwargs)


@pytest.mark.parametrize("name", ["hvp", "vhp"])
@pytest.mark.parametrize("func", [lambda x: x ** 3, lambda x: ((x ** 3).sum(), x.sum())],
                         ids=["a vector", "two scalars"])
def test_a_product_needs_one_single_entry_output(name, func):
    ours, theirs = {"hvp": (hvp, TF.hvp), "vhp": (vhp, TF.vhp)}[name]
    with pytest.raises(ShapeError, match=f"{name}: func must return a single-entry tensor"):
        ours(func, ta.tensor(X), ta.tensor(V))
    with pytest.raises(RuntimeError):
        theirs(func, torch.tensor(X), torch.tensor(V))


def test_vjp_with_create_graph_keeps_the_outputs_graph_too():
    x, xt = ta.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    out, _ = vjp(cubic(ta), x, create_graph=True)
    out_t, _ = TF.vjp(cubic(torch), xt, create_graph=True)
    assert out.requires_grad and out_t.requires_grad
    out.backward()
    out_t.backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    assert not vjp(cubic(ta), ta.tensor(X, requires_grad=True))[0].requires_grad


def test_a_jacobian_with_create_graph_has_zero_blocks_for_an_ignored_input():
    def f(lib):
        return lambda a, b: (a ** 2).sum() * a

    jac = ta.autograd.functional.jacobian(f(ta), (ta.tensor(X, requires_grad=True), ta.ones(2)),
                                          create_graph=True)
    jac_t = TF.jacobian(f(torch), (torch.tensor(X, requires_grad=True), torch.ones(2)),
                        create_graph=True)
    for ours, theirs in zip(jac, jac_t, strict=True):
        assert ours.shape == tuple(theirs.shape)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    assert jac[0].requires_grad
