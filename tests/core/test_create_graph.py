"""Gradients of gradients (tinyattn/higher_order/): grad(..., create_graph=True) and
backward(create_graph=True) against torch in float64, and every graph VJP checked on its op's
registered samples: its first-order result equals the array VJP's, and its second-order
gradients match central differences of first-order gradients."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import GraphError
from tinyattn.higher_order import GRAPH_VJPS
from tinyattn.ops import REGISTRY
from tinyattn.ops.samples import materialize, vals

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def pair(values):
    """A float64 tinyattn leaf and a torch leaf with the same values."""
    a = np.asarray(values, dtype=np.float64)
    return (ta.tensor(a, requires_grad=True),
            torch.tensor(a, dtype=torch.float64, requires_grad=True))


def close(a, b, tol=1e-9):
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(np.asarray(a.numpy() if hasattr(a, "numpy") else a), b,
                               rtol=tol, atol=tol)


FUNCTIONS = {
    "sin": (lambda m, x: m.sin(x).sum()),
    "cube": (lambda m, x: (x ** 3).sum()),
    "tanh": (lambda m, x: m.tanh(x).sum()),
    "exp": (lambda m, x: m.exp(x).sum()),
    "log": (lambda m, x: m.log(x * x + 1).sum()),
    "sigmoid": (lambda m, x: m.sigmoid(x).sum()),
    "softmax": (lambda m, x: (m.softmax(x, -1) ** 2).sum()),
    "log_softmax": (lambda m, x: (m.log_softmax(x, -1) * m.arange(12.0).reshape(3, 4)).sum()),
    "layer_norm": (lambda m, x: (m.nn.functional.layer_norm(x, (4,)) ** 3).sum()),
    "gelu": (lambda m, x: m.nn.functional.gelu(x).sum()),
    "gelu_tanh": (lambda m, x: m.nn.functional.gelu(x, approximate="tanh").sum()),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_grad_of_grad_against_torch(name):
    f = FUNCTIONS[name]
    values = RNG.standard_normal((3, 4))
    x, xt = pair(values)
    (g,) = ta.autograd.grad(f(ta, x), x, create_graph=True)
    (gt,) = torch.autograd.grad(f(torch, xt), xt, create_graph=True)
    close(g, gt)
    w = RNG.standard_normal((3, 4))
    (h,) = ta.autograd.grad((g * ta.tensor(w)).sum(), x)
    (ht,) = torch.autograd.grad((gt * torch.tensor(w)).sum(), xt)
    close(h, ht, 1e-8)


def _mlp(m, params, x):
    w1, b1, w2, b2 = params
    h = m.tanh(m.nn.functional.linear(x, w1, b1))
    return m.nn.functional.linear(m.relu(h), w2, b2)


def _penalty(m, params, real, fake, eps):
    mixed = (eps * real + (1 - eps) * fake).detach().requires_grad_(True)
    score = _mlp(m, params, mixed)
    (g,) = m.autograd.grad(score.sum(), mixed, create_graph=True)
    return ((g.pow(2).sum(1) + 1e-12).sqrt() - 1).pow(2).mean()


def test_wgan_gradient_penalty_against_torch():
    shapes = [(6, 3), (6,), (1, 6), (1,)]
    arrays = [RNG.standard_normal(s) * 0.7 for s in shapes]
    params = [pair(a) for a in arrays]
    real, fake = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 3))
    eps = RNG.uniform(size=(5, 1))
    gp = _penalty(ta, [p[0] for p in params], ta.tensor(real), ta.tensor(fake), ta.tensor(eps))
    gpt = _penalty(torch, [p[1] for p in params], torch.tensor(real), torch.tensor(fake),
                   torch.tensor(eps))
    close(gp, gpt)
    gp.backward()
    gpt.backward()
    for p, pt in params[:3]:
        close(p.grad, pt.grad, 1e-8)
    assert params[3][1].grad is None and params[3][0].grad is None  # (b2: not in the penalty)


def test_hessian_vector_product_and_functional():
    values, v = RNG.standard_normal(5), RNG.standard_normal(5)

    def f(m, x):
        return (m.sin(x) * x.pow(2)).sum() + (x[:3] * x[2:]).sum()

    x, xt = pair(values)
    (g,) = ta.autograd.grad(f(ta, x), x, create_graph=True)
    (hv,) = ta.autograd.grad(g, x, grad_outputs=ta.tensor(v))
    (gt,) = torch.autograd.grad(f(torch, xt), xt, create_graph=True)
    (hvt,) = torch.autograd.grad(gt, xt, grad_outputs=torch.tensor(v))
    close(hv, hvt)
    xs = ta.tensor(values)
    _, hv2 = ta.autograd.functional.hvp(lambda x: f(ta, x), xs, ta.tensor(v))
    _, vh2 = ta.autograd.functional.vhp(lambda x: f(ta, x), xs, ta.tensor(v))
    close(hv2, hvt)
    close(vh2, hvt)
    h = ta.autograd.functional.hessian(lambda x: f(ta, x), xs)
    ht = torch.autograd.functional.hessian(lambda x: f(torch, x), torch.tensor(values))
    close(h, ht)


def test_maml_inner_step_and_outer_gradient():
    w0, b0 = RNG.standard_normal((1, 3)), RNG.standard_normal(1)
    xa, ya = RNG.standard_normal((8, 3)), RNG.standard_normal((8, 1))
    xb, yb = RNG.standard_normal((8, 3)), RNG.standard_normal((8, 1))
    results = []
    for m, (w, b) in ((ta, (pair(w0)[0], pair(b0)[0])), (torch, (pair(w0)[1], pair(b0)[1]))):
        loss = m.nn.functional.mse_loss(m.nn.functional.linear(m.tensor(xa), w, b), m.tensor(ya))
        gw, gb = m.autograd.grad(loss, (w, b), create_graph=True)
        fast = (w - 0.1 * gw, b - 0.1 * gb)
        outer = ((m.tanh(m.nn.functional.linear(m.tensor(xb), *fast)) - m.tensor(yb)) ** 2).mean()
        outer.backward()
        results.append((outer, w.grad, b.grad))
    for a, b in zip(*results, strict=True):
        close(a, b)


def test_backward_create_graph_leaves_a_grad_with_a_graph():
    x, xt = pair(RNG.standard_normal(4))
    (x ** 3).sum().backward(create_graph=True)
    (xt ** 3).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.grad_fn is not None
    close(x.grad, xt.grad)
    y, yt = pair(RNG.standard_normal(4))
    (x.grad * y).sum().backward()
    (xt.grad * yt).sum().backward()
    close(x.grad, xt.grad)  # the second pass added out of place into the first .grad
    close(y.grad, yt.grad)


def test_func_grad_of_grad_and_hessian():
    values = RNG.standard_normal(4)

    def f(x):
        return (x.tanh() * x).sum()

    def ft(x):
        return (torch.tanh(x) * x).sum()

    x = ta.tensor(values)
    xt = torch.tensor(values)
    close(ta.func.grad(lambda x: ta.func.grad(f)(x).sum())(x),
          torch.func.grad(lambda x: torch.func.grad(ft)(x).sum())(xt))
    close(ta.func.hessian(f)(x), torch.func.hessian(ft)(xt))


def test_an_op_without_a_graph_vjp_is_refused_by_name(monkeypatch):
    monkeypatch.delitem(GRAPH_VJPS, "digamma")  # (every registered op has one now: a stand-in)
    x = ta.tensor(RNG.standard_normal(4), requires_grad=True)
    y = x.digamma().sum()
    with pytest.raises(GraphError, match="digamma has no differentiable VJP.*higher_order"):
        ta.autograd.grad(y, x, create_graph=True)


def test_a_saved_input_changed_in_place_is_refused():
    x = ta.tensor(RNG.standard_normal(4), requires_grad=True)
    a = x * 1.0
    y = a.sin().sum()
    with ta.no_grad():
        a.add_(1.0)
    with pytest.raises(GraphError, match="changed in place"):
        ta.autograd.grad(y, x, create_graph=True)


# ---- every graph VJP on its op's samples --------------------------------------------------------

# kinks at the vals cases (vector_norm: ord < 1 at an exact 0, an infinite second derivative)
PIECEWISE = {"relu", "abs", "maximum", "minimum", "clip", "clamp", "vector_norm"}


def _cases():
    """(op, sample) for every registered op with a graph VJP (the ops made outside the registry,
    the views' as_strided/laid_out/copy_slices, binary_cross_entropy, median over all entries,
    are checked in their families' files: tests/core/test_create_graph_*.py)."""
    for name in sorted(n for n in GRAPH_VJPS if n in REGISTRY):
        for k in range(len(REGISTRY[name].samples)):
            yield pytest.param(name, k, id=f"{name}-{k}")


def _run(name, inputs, params, arrays):
    """The op's output on leaves holding `arrays` (in place of the sample's grad inputs)."""
    it = iter(arrays)
    xs = [ta.tensor(next(it), requires_grad=True) if isinstance(x, ta.Tensor) and x.requires_grad
          else x for x in inputs]
    return REGISTRY[name](*xs, **params), xs


@pytest.mark.parametrize(("name", "k"), list(_cases()))
def test_graph_vjp_matches_the_array_vjp_and_differences(name, k):
    spec, params = REGISTRY[name].samples[k]
    rng = np.random.default_rng(k)
    inputs = materialize(spec, rng, lambda a, grad: ta.tensor(np.asarray(a, dtype=np.float64)
                                                              if grad else a,
                                                              requires_grad=grad))
    leaves = [x for x in inputs if isinstance(x, ta.Tensor) and x.requires_grad]
    base = [x.detach().numpy().copy() for x in leaves]
    out, xs = _run(name, inputs, params, base)
    g = ta.tensor(rng.standard_normal(out.shape))
    diff = [x for x in xs if isinstance(x, ta.Tensor) and x.requires_grad]
    first = ta.autograd.grad(out, diff, g, allow_unused=True, retain_graph=True)
    graph = ta.autograd.grad(out, diff, g, allow_unused=True, create_graph=True)
    for a, b in zip(graph, first, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            close(a, b, 1e-10)
    if name in PIECEWISE and any(isinstance(s, vals) for s in spec):
        return
    vs = [rng.standard_normal(x.shape) for x in diff]
    used = [(gr, v) for gr, v in zip(graph, vs, strict=True) if gr is not None]
    if not any(gr.requires_grad for gr, _ in used):
        return  # linear in its inputs: no second derivative
    s = sum((gr * ta.tensor(v)).sum() for gr, v in used)
    if name == "scatter_reduce" and params.get("reduce") == "prod" and k == 6:
        # two zeros of src sent to one place: refused, as torch's second backward there
        with pytest.raises(GraphError, match="more than one zero of src"):
            ta.autograd.grad(s, diff, allow_unused=True)
        return
    second = ta.autograd.grad(s, diff, allow_unused=True)

    def first_order(arrays):
        """The terms of sum(grad * v), unsummed: differenced term by term, the terms a step
        does not change cancel exactly (summed first, a large one would drown the others)."""
        o, d = _run(name, inputs, params, arrays)
        d = [x for x in d if isinstance(x, ta.Tensor) and x.requires_grad]
        gs = ta.autograd.grad(o, d, g, allow_unused=True)
        return [gr.numpy() * v for gr, v in zip(gs, vs, strict=True) if gr is not None]

    h = 1e-6
    for j, (x, sec) in enumerate(zip(base, second, strict=True)):
        numeric = np.zeros(x.shape)
        for idx in np.ndindex(x.shape):
            up = [a.copy() for a in base]
            down = [a.copy() for a in base]
            up[j][idx] += h
            down[j][idx] -= h
            numeric[idx] = sum(float((a - b).sum()) for a, b in
                               zip(first_order(up), first_order(down), strict=True)) / (2 * h)
        got = np.zeros(x.shape) if sec is None else sec.numpy()
        np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{name} case {k}, input {j}")


# ---- gradgradcheck: gradcheck of the create_graph gradients ----------------------------------


def _ggc_cases():
    x = ta.tensor(np.random.default_rng(3).standard_normal((3, 4)), requires_grad=True)
    w = ta.tensor(np.random.default_rng(4).standard_normal((4, 2)), requires_grad=True)
    return [
        (lambda a: a.tanh(), (x,)),
        (lambda a: ta.nn.functional.softmax(a, dim=-1) ** 2, (x,)),
        (lambda a, b: ta.nn.functional.gelu(a @ b, approximate="tanh").sum(0), (x, w)),
        (lambda a: (ta.nn.functional.layer_norm(a, (4,)).exp(), a.sin()), (x,)),
    ]


@pytest.mark.parametrize("k", range(4))
def test_gradgradcheck_passes_where_the_graph_vjps_are_right(k):
    fn, inputs = _ggc_cases()[k]
    assert ta.autograd.gradgradcheck(fn, inputs)


def test_gradgradcheck_catches_a_wrong_second_derivative(monkeypatch):
    """tanh's graph VJP with its output detached: first order right, second order zero."""
    def wrong(c):
        y = c.out().detach()
        return (c.g * (1 - y * y),)

    x = ta.tensor(np.random.default_rng(5).standard_normal((2, 3)), requires_grad=True)
    assert ta.autograd.gradcheck(lambda a: a.tanh(), (x,))
    monkeypatch.setitem(GRAPH_VJPS, "tanh", wrong)
    assert ta.autograd.gradcheck(lambda a: a.tanh(), (x,))  # (first order: the array VJP)
    assert ta.autograd.gradgradcheck(lambda a: a.tanh(), (x,), raise_exception=False) is False
    with pytest.raises(ta.GradcheckError):
        ta.autograd.gradgradcheck(lambda a: a.tanh(), (x,))


def test_gradgradcheck_takes_given_grad_outputs_and_agrees_with_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    xa, ga = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    x = ta.tensor(xa, requires_grad=True)
    g = ta.tensor(ga, requires_grad=True)
    assert ta.autograd.gradgradcheck(lambda a: a.sigmoid() * a, (x,), (g,))
    tx = torch.tensor(xa, requires_grad=True)
    tg = torch.tensor(ga, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda a: a.sigmoid() * a, (tx,), (tg,))


def test_gradgradcheck_names_an_op_without_a_graph_vjp(monkeypatch):
    monkeypatch.delitem(GRAPH_VJPS, "digamma")  # (as above: a stand-in without one)
    x = ta.tensor(np.arange(4.0), requires_grad=True)
    with pytest.raises(GraphError, match="digamma"):
        ta.autograd.gradgradcheck(lambda a: a.digamma() ** 2, (x,))


@pytest.mark.parametrize("by", ["grad", "backward"])
def test_a_grad_output_of_another_dtype_keeps_its_graph_as_torchs(by):
    """A float32 gradient for a float64 output: cast on the graph, so the second derivative
    with respect to it is there (it was None)."""
    torch = pytest.importorskip("torch")
    a, w = np.array([1.0, 2.0, -0.5]), np.array([1.0, 3.0, 0.25])
    x, v = ta.tensor(a, requires_grad=True), ta.tensor(w, dtype=ta.float32, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    tv = torch.tensor(w, dtype=torch.float32, requires_grad=True)
    if by == "grad":
        (g,) = ta.autograd.grad(x.sin() * x, [x], v, create_graph=True)
    else:
        (x.sin() * x).backward(v, create_graph=True)
        g = x.grad
    (tg,) = torch.autograd.grad(tx.sin() * tx, [tx], tv, create_graph=True)
    assert g.dtype == ta.float64
    close(g, tg, 1e-7)
    (gv,) = ta.autograd.grad((g * g).sum(), [v])
    (tgv,) = torch.autograd.grad((tg * tg).sum(), [tv])
    assert gv.dtype == ta.float32
    close(gv, tgv, 1e-5)
