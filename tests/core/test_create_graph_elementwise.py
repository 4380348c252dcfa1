"""Gradients of gradients through the elementwise ops and activations
(tinyattn/higher_order/elementwise.py) against torch in float64: every covered op at points
away from its kinks, gradgradcheck on compositions, a WGAN-GP gradient penalty and a
physics-informed Laplacian."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.ops import REGISTRY

torch = pytest.importorskip("torch")


def close(a, b, tol=1e-9):
    a = np.zeros(np.shape(b)) if a is None else a
    b = np.zeros(np.shape(a)) if b is None else b
    a = a.detach().numpy() if hasattr(a, "detach") else a
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def F(m):  # noqa: N802 - reads as torch's F
    return m.nn.functional


# name -> (fn(m, *inputs), [(shape, low, high) per input]); the inputs are random in
# (low, high), where no kink sits at a random point
X = [((3, 4), -2.0, 2.0)]
POS = [((3, 4), 0.5, 2.0)]
UNIT = [((3, 4), -0.9, 0.9)]
OPS = {
    "leaky_relu": (lambda m, x: F(m).leaky_relu(x, 0.2), X),
    "elu": (lambda m, x: F(m).elu(x, alpha=0.5), X),
    "celu": (lambda m, x: F(m).celu(x, alpha=2.0), X),
    "selu": (lambda m, x: F(m).selu(x), X),
    "silu": (lambda m, x: F(m).silu(x), X),
    "softplus": (lambda m, x: F(m).softplus(x), X),
    "softplus_beta": (lambda m, x: F(m).softplus(x, beta=2.0, threshold=3.0), X),
    "mish": (lambda m, x: F(m).mish(x), X),
    "logsigmoid": (lambda m, x: F(m).logsigmoid(x), X),
    "hardtanh": (lambda m, x: F(m).hardtanh(x, -0.5, 0.3), X),
    "hardsigmoid": (lambda m, x: F(m).hardsigmoid(x), [((3, 4), -4.0, 4.0)]),
    "hardswish": (lambda m, x: F(m).hardswish(x), [((3, 4), -4.0, 4.0)]),
    "threshold": (lambda m, x: F(m).threshold(x, 0.1, 20.0), X),
    "softsign": (lambda m, x: F(m).softsign(x), X),
    "tanhshrink": (lambda m, x: F(m).tanhshrink(x), X),
    "hardshrink": (lambda m, x: F(m).hardshrink(x, 0.3), X),
    "softshrink": (lambda m, x: F(m).softshrink(x, 0.3), X),
    "prelu": (lambda m, x, w: F(m).prelu(x, w), [*X, ((4,), 0.1, 0.5)]),
    "log1p": (lambda m, x: x.log1p(), [((3, 4), -0.5, 2.0)]),
    "expm1": (lambda m, x: x.expm1(), X),
    "rsqrt": (lambda m, x: x.rsqrt(), POS),
    "reciprocal": (lambda m, x: x.reciprocal(), POS),
    "sinh": (lambda m, x: x.sinh(), X),
    "cosh": (lambda m, x: x.cosh(), X),
    "tan": (lambda m, x: x.tan(), [((3, 4), -1.2, 1.2)]),
    "exp2": (lambda m, x: x.exp2(), X),
    "log2": (lambda m, x: x.log2(), POS),
    "log10": (lambda m, x: x.log10(), POS),
    "erfc": (lambda m, x: x.erfc(), X),
    "logit": (lambda m, x: x.logit(), [((3, 4), 0.05, 0.95)]),
    "logit_eps": (lambda m, x: x.logit(0.2), [((3, 4), 0.05, 0.95)]),
    "asin": (lambda m, x: x.asin(), UNIT),
    "acos": (lambda m, x: x.acos(), UNIT),
    "atan": (lambda m, x: x.atan(), X),
    "asinh": (lambda m, x: x.asinh(), X),
    "acosh": (lambda m, x: x.acosh(), [((3, 4), 1.1, 3.0)]),
    "atanh": (lambda m, x: x.atanh(), UNIT),
    "ceil": (lambda m, x: x.ceil(), X),
    "floor": (lambda m, x: x.floor(), X),
    "round": (lambda m, x: x.round(), X),
    "trunc": (lambda m, x: x.trunc(), X),
    "frac": (lambda m, x: x.frac(), X),
    "sign": (lambda m, x: x.sign(), X),
    "erfinv": (lambda m, x: x.erfinv(), UNIT),
    "lgamma": (lambda m, x: x.lgamma(), [((3, 4), 0.3, 4.0)]),
    "atan2": (lambda m, x, y: m.atan2(x, y), [*X, ((4,), -2.0, 2.0)]),
    "hypot": (lambda m, x, y: m.hypot(x, y), [*X, ((3, 1), -2.0, 2.0)]),
    "lerp": (lambda m, s, e, w: m.lerp(s, e, w), [*X, *X, ((3, 1), -0.5, 1.5)]),
    "logaddexp": (lambda m, x, y: m.logaddexp(x, y), [*X, ((4,), -2.0, 2.0)]),
    "copysign": (lambda m, x, y: m.copysign(x, y), [*X, ((3, 4), -1.0, 1.0)]),
    "fmod": (lambda m, x, y: m.fmod(x, y), [((3, 4), -3.0, 3.0), ((4,), 0.5, 2.0)]),
    "remainder": (lambda m, x, y: m.remainder(x, y), [((3, 4), -3.0, 3.0), ((4,), 0.5, 2.0)]),
    "floor_divide": (lambda m, x, y: m.floor_divide(x, y), [((3, 4), -3.0, 3.0), POS[0]]),
}
# where torch has no double backward, the same function written with ops that have one
TORCH_FORMS = {
    "hardsigmoid": lambda m, x: (x / 6 + 0.5).clamp(0, 1),
    "floor_divide": lambda m, x, y: (x / y).floor(),
}


def _second_order(m, out, xs, ws):
    """grad of ((out * x0)²).sum() with create_graph, then the gradient of Σ g·w."""
    loss = ((out * xs[0]) ** 2).sum()
    gs = m.autograd.grad(loss, xs, create_graph=True)
    s = sum((g * w).sum() for g, w in zip(gs, ws, strict=True))
    return gs, m.autograd.grad(s, xs, allow_unused=True)


def _against_torch(fn, arrays, tol=1e-9, torch_fn=None):
    rng = np.random.default_rng(1)
    ws = [rng.standard_normal(a.shape) for a in arrays]
    xs = [ta.tensor(a, requires_grad=True) for a in arrays]
    xts = [torch.tensor(a, requires_grad=True) for a in arrays]
    gs, hs = _second_order(ta, fn(ta, *xs), xs, [ta.tensor(w) for w in ws])
    wts = [torch.tensor(w) for w in ws]
    gts, hts = _second_order(torch, (torch_fn or fn)(torch, *xts), xts, wts)
    for a, b in zip(gs, gts, strict=True):
        close(a, b, tol)
    for a, b in zip(hs, hts, strict=True):
        close(a, b, 10 * tol)


@pytest.mark.parametrize("name", sorted(OPS))
def test_grad_of_grad_against_torch(name):
    fn, specs = OPS[name]
    rng = np.random.default_rng(sorted(OPS).index(name))
    arrays = [rng.uniform(low, high, shape) for shape, low, high in specs]
    _against_torch(fn, arrays, torch_fn=TORCH_FORMS.get(name))


def _draw(name, x):
    """dropout or rrelu (training) with a fixed seed: the same mask or slopes each call."""
    if name == "dropout":
        return F(ta).dropout(x, 0.4, training=True, seed=5)
    return REGISTRY["rrelu"](x, lower=0.1, upper=0.6, seed=5)


@pytest.mark.parametrize("name", ["dropout", "rrelu"])
def test_random_ops_against_torch_with_the_same_draw(name):
    """dropout's mask and rrelu's slopes are tinyattn's draw, read off its output and given
    to torch as a constant factor: the same function of x on both sides."""
    a = np.random.default_rng(2).uniform(-2.0, 2.0, (3, 4))
    with ta.no_grad():
        factor = _draw(name, ta.tensor(a)).numpy() / a
    assert (factor != 1).any()

    def fn(m, x):
        return x * torch.tensor(factor) if m is torch else _draw(name, x)

    _against_torch(fn, [a])


def _ggc_cases():
    rng = np.random.default_rng(3)
    a = ta.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = ta.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    return [
        (lambda a: F(ta).softplus(a) * F(ta).silu(a).atan() + F(ta).mish(a).logaddexp(a), (a,)),
        (lambda a, b: ta.atan2(F(ta).elu(a @ b), b.sum(0).exp()) + ta.hypot(a @ b, a.sum(1,
                                                                            keepdim=True)),
         (a, b)),
        (lambda a: (F(ta).celu(a).tanh() * a.asinh(), (F(ta).softsign(a) + 2).log2()
                    * a.erfc()), (a,)),
    ]


@pytest.mark.parametrize("k", range(3))
def test_gradgradcheck_on_compositions(k):
    fn, inputs = _ggc_cases()[k]
    assert ta.autograd.gradgradcheck(fn, inputs)


# ---- user scenarios -------------------------------------------------------------------------


def _copied(m, net, arrays):
    net = net.double()
    with m.no_grad():
        for p, a in zip(net.parameters(), arrays, strict=True):
            p.copy_(m.tensor(a))
    return net


def _gradient_penalty(m, critic, real, fake, eps):
    n = real.shape[0]
    mixed = (eps * real + (1 - eps) * fake).detach().requires_grad_(True)
    (g,) = m.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)
    return (((g.reshape(n, -1) ** 2).sum(1).sqrt() - 1) ** 2).mean()


def test_wgan_gp_penalty_with_a_leaky_relu_critic_against_torch():
    rng = np.random.default_rng(4)
    nets = [m.nn.Sequential(m.nn.Linear(3, 8), m.nn.LeakyReLU(0.2), m.nn.Linear(8, 1))
            for m in (ta, torch)]
    arrays = [rng.standard_normal(tuple(p.shape)) * 0.8 for p in nets[0].parameters()]
    real, fake = rng.standard_normal((6, 3)), rng.standard_normal((6, 3))
    eps = rng.uniform(size=(6, 1))
    results = []
    for m, net in zip((ta, torch), nets, strict=True):
        critic = _copied(m, net, arrays)
        gp = _gradient_penalty(m, critic, *(m.tensor(v) for v in (real, fake, eps)))
        gp.backward()
        results.append((gp, *(p.grad for p in critic.parameters())))
    for a, b in zip(*results, strict=True):
        close(a, b)
    assert results[0][2] is None or not results[0][2].numpy().any()  # (b1: flat in the slope)


def _laplacian(m, net, points):
    x = m.tensor(points, requires_grad=True)
    (g,) = m.autograd.grad(net(x).sum(), x, create_graph=True)
    lap = 0
    for i in range(points.shape[1]):
        (gi,) = m.autograd.grad(g[:, i].sum(), x, create_graph=True)
        lap = lap + gi[:, i]
    return lap


def test_pinn_laplacian_of_a_softplus_silu_mlp_against_torch():
    rng = np.random.default_rng(5)
    nets = [m.nn.Sequential(m.nn.Linear(2, 16), m.nn.Softplus(), m.nn.Linear(16, 16),
                            m.nn.SiLU(), m.nn.Linear(16, 1)) for m in (ta, torch)]
    arrays = [rng.standard_normal(tuple(p.shape)) * 0.7 for p in nets[0].parameters()]
    points = rng.uniform(-1.0, 1.0, (5, 2))
    results = []
    for m, net in zip((ta, torch), nets, strict=True):
        net = _copied(m, net, arrays)
        lap = _laplacian(m, net, points)
        (lap ** 2).mean().backward()  # (a PINN's residual loss: third derivatives)
        results.append((lap, *(p.grad for p in net.parameters())))
    for a, b in zip(*results, strict=True):
        close(a, b)
