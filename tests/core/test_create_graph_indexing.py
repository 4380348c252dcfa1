"""Gradients of gradients through the gathers, scatters and joins (tinyattn/higher_order/
indexing.py, and getitem with array indices): for each op, the first, second and third
derivatives of a cubed output against torch's in float64; gradgradcheck on compositions; and
the penalties users write (WGAN-GP on conv critics with pools, padding, stride, dilation and
nearest upsampling; R1 through an embedding; a generator's conv_transpose2d second
derivative), their model weights' gradients against torch's with the same weights."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.autograd import apply
from tinyattn.errors import GraphError
from tinyattn.ops import views

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


def close(a, b, tol=1e-9):
    a = np.asarray(a.detach().numpy() if hasattr(a, "detach") else a)
    b = np.asarray(b.detach().numpy() if hasattr(b, "detach") else b)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _grads(m, out, xs, w):
    gs = m.autograd.grad((out * m.tensor(w)).sum(), xs, create_graph=True, allow_unused=True)
    return [m.zeros_like(x) if g is None else g for x, g in zip(xs, gs, strict=True)]


def _three_orders(m, f, arrays, weights):
    """The gradients of sum(f(xs)³ · w), then of each gradient dotted with a random array, then
    once more: first, second and third derivatives."""
    xs = [m.tensor(a, requires_grad=True) for a in arrays]
    out = f(m, *xs) ** 3
    found = []
    g = _grads(m, out, xs, weights[0])
    for w in weights[1:]:
        found.append(g)
        s = sum((gi * m.tensor(wi)).sum() for gi, wi in zip(g, w, strict=True))
        g = _grads(m, s, xs, 1.0)
    return found + [g]


def against_torch(f, *shapes, arrays=None):
    arrays = arrays or [RNG.standard_normal(s) for s in shapes]
    out = f(torch, *(torch.tensor(a) for a in arrays))
    weights = [RNG.standard_normal(tuple(out.shape))]
    weights += [[RNG.standard_normal(a.shape) for a in arrays] for _ in range(2)]
    mine = _three_orders(ta, f, arrays, weights)
    theirs = _three_orders(torch, f, arrays, weights)
    for order, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        for x, y in zip(a, b, strict=True):
            close(x, y, 1e-8 if order < 2 else 1e-7)


IDX = np.array([[2, 0, 1, 2], [0, 0, 3, 1]])  # repeats, along dim 0 of a (4, 4)

OPS = {
    "as_strided": (lambda m, x: x.as_strided((3, 3, 2), (2, 1, 3), 1), [(4, 4)]),
    "unfold": (lambda m, x: x.unfold(1, 3, 1), [(3, 5)]),
    "cat": (lambda m, x, y: m.cat([x, y.tanh(), x], dim=1), [(2, 3), (2, 2)]),
    "stack": (lambda m, x, y: m.stack([x, y * x], dim=1), [(2, 3), (2, 3)]),
    "take_along_dim": (lambda m, x: m.take_along_dim(x, m.tensor(IDX), dim=0), [(4, 4)]),
    "take_along_dim_broadcast": (lambda m, x: m.take_along_dim(
        x, m.tensor(IDX[:, :1]), dim=1), [(2, 3)]),
    "gather": (lambda m, x: x.gather(1, m.tensor(IDX[:, :3] % 3)), [(2, 3)]),
    "embedding": (lambda m, w: m.nn.functional.embedding(m.tensor(IDX), w), [(4, 3)]),
    "masked_fill": (lambda m, x: x.masked_fill(m.tensor(IDX == 0), -2.0), [(2, 4)]),
    "flip": (lambda m, x: x.flip((0, 2)), [(2, 3, 2)]),
    "diagonal": (lambda m, x: x.diagonal(1, 0, 2), [(3, 2, 4)]),
    "scatter": (lambda m, x, s: x.scatter(1, m.tensor(np.array([[2, 0], [1, 3]])), s),
                [(2, 4), (2, 2)]),
    "scatter_value": (lambda m, x: x.scatter(0, m.tensor(IDX[:1]), 1.5), [(4, 4)]),
    "scatter_add": (lambda m, x, s: x.scatter_add(0, m.tensor(IDX[:, :3]), s),
                    [(4, 3), (2, 3)]),
    "scatter_sum": (lambda m, x, s: x.scatter_reduce(0, m.tensor(IDX), s, "sum",
                                                     include_self=False), [(4, 4), (2, 4)]),
    "scatter_mean": (lambda m, x, s: x.scatter_reduce(0, m.tensor(IDX), s, "mean"),
                     [(4, 4), (2, 4)]),
    "scatter_amax": (lambda m, x, s: x.scatter_reduce(0, m.tensor(IDX), s, "amax"),
                     [(4, 4), (2, 4)]),
    "scatter_prod": (lambda m, x, s: x.scatter_reduce(0, m.tensor(IDX), s, "prod"),
                     [(4, 4), (2, 4)]),
    "scatter_prod_no_self": (lambda m, x, s: x.scatter_reduce(0, m.tensor(IDX), s, "prod",
                                                              include_self=False),
                             [(4, 4), (2, 4)]),
    "index_add": (lambda m, x, s: x.index_add(0, m.tensor(np.array([1, 1, 0])), s),
                  [(3, 2), (3, 2)]),
    "einsum": (lambda m, x, y: m.einsum("bij,bjk->bik", x, y), [(2, 2, 3), (2, 3, 2)]),
    "einsum_diag": (lambda m, x, y: m.einsum("ii,ji->j", x, y), [(3, 3), (2, 3)]),
    "einsum_broadcast": (lambda m, x, y: m.einsum("...i,i->...", x, y), [(2, 3), (3,)]),
    "getitem_ints": (lambda m, x: x[m.tensor(np.array([0, 2, 0]))], [(3, 2)]),
    "getitem_pairs": (lambda m, x: x[m.tensor(np.array([1, 1, 0])), :, m.tensor(
        np.array([0, 0, 2]))], [(2, 2, 3)]),
    "getitem_bool": (lambda m, x: x[m.tensor(IDX > 0)], [(2, 4)]),
    "index_select": (lambda m, x: x.index_select(1, m.tensor(np.array([2, 0, 2]))), [(2, 3)]),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_three_orders_against_torch(name):
    f, shapes = OPS[name]
    against_torch(f, *shapes)


def test_scatter_reduce_prod_with_zeros_against_torch():
    """x and src holding zeros (one zero of src a place: torch refuses its second derivative
    where two are sent to one place, as tinyattn: tests/ops/test_degenerate_gradients_round7)."""
    x = RNG.standard_normal((3, 4))
    x[0, 2] = x[2, 1] = 0.0
    s = RNG.standard_normal((2, 2))
    s[1, 0] = 0.0

    def f(m, x, s):
        return x.scatter_reduce(1, m.tensor(np.array([[0, 2], [1, 0]])), s, "prod")

    against_torch(f, arrays=[x, s])


def test_scatter_reduce_prod_two_zeros_at_one_place_refused_by_name():
    x = ta.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    s = ta.tensor(np.zeros((2, 2)), requires_grad=True)
    y = x.scatter_reduce(1, ta.tensor(np.array([[0, 0], [1, 0]])), s, "prod")
    (gs,) = ta.autograd.grad(y.sum(), s, create_graph=True)
    with pytest.raises(GraphError, match="more than one zero"):
        ta.autograd.grad(gs.sum(), x)


def test_copy_slices_and_a_rebased_view_against_torch():
    """An in-place change of a view (copy_slices in the root's history) while another view
    that sees a changed entry is live (its history becomes an as_strided of the root)."""
    def f(m, x, s):
        y = x * 1.0
        col = y[:, 1]  # sees entry (1, 1), which the change below writes
        y[1:, :2].mul_(s)
        return y * col.reshape(-1, 1)

    against_torch(f, (3, 3), (2, 2))


def test_laid_out_passes_gradients_of_gradients():
    x = ta.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    y = apply(views.laid_out, x.sin(), order=(1, 0))
    (g,) = ta.autograd.grad(y.sum(), x, create_graph=True)
    (h,) = ta.autograd.grad(g.sum(), x)
    close(h, -x.detach().sin())


# ---- gradgradcheck on compositions -------------------------------------------------------------


def _leaf(*shape):
    return ta.tensor(RNG.standard_normal(shape), requires_grad=True)


F = ta.nn.functional
GGC = {
    "conv2d": (lambda a, w: F.conv2d(a, w, stride=2, padding=1).tanh(), ((1, 2, 5, 5),
                                                                         (2, 2, 3, 3))),
    "max_pool": (lambda a: F.max_pool2d(a * a, 2, padding=1, dilation=1), ((1, 1, 4, 4),)),
    "conv_transpose": (lambda a, w: F.conv_transpose2d(a, w, stride=2).sin(), ((1, 2, 3, 3),
                                                                               (2, 1, 3, 3))),
    "cat_flip": (lambda a, b: ta.cat([a, b.flip(0)]).tanh() * ta.stack([a, b]).sum(0).sum(0),
                 ((2, 3), (2, 3))),
    "einsum_gather": (lambda a, b: ta.einsum("ij,jk->ik", a, b).gather(
        1, ta.tensor(np.array([[1, 0], [1, 1]]))) ** 2, ((2, 3), (3, 2))),
    "unfold_embedding": (lambda a, w: F.embedding(ta.tensor(np.array([2, 0, 2])), w).unfold(
        0, 2, 1) * a.diagonal().sum(), ((3, 3), (3, 2))),
}


@pytest.mark.parametrize("name", sorted(GGC))
def test_gradgradcheck_on_compositions(name):
    fn, shapes = GGC[name]
    assert ta.autograd.gradgradcheck(fn, tuple(_leaf(*s) for s in shapes))


# ---- the penalties users write ----------------------------------------------------------------


def twins(build):
    """The same model in tinyattn and torch (float64), with torch's weights copied across."""
    theirs = build(torch).double()
    mine = build(ta).double()
    for p, q in zip(theirs.parameters(), mine.parameters(), strict=True):
        with ta.no_grad():
            q.copy_(ta.tensor(p.detach().numpy()))
    return mine, theirs


def wgan_gp(m, critic, x):
    x = m.tensor(x, requires_grad=True)
    (g,) = m.autograd.grad(critic(x).sum(), x, create_graph=True)
    return (((g.reshape(len(x), -1) ** 2).sum(1).sqrt() - 1) ** 2).mean()


def same_weight_grads(mine, theirs, loss):
    a, b = loss(ta, mine), loss(torch, theirs)
    close(a, b)
    a.backward()
    b.backward()
    used = 0
    for p, q in zip(theirs.parameters(), mine.parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            close(q.grad, p.grad, 1e-8)
            used += 1
    assert used


def _plain_critic(m):
    nn = m.nn
    return nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nn.Tanh(), nn.Conv2d(8, 1, 4, 1, 0),
                         nn.Flatten())


def _pooled_critic(m):
    nn = m.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3, stride=1, padding=1), nn.Tanh(),
                         nn.MaxPool2d(2, stride=2, padding=1, dilation=1), nn.Tanh(),
                         nn.Conv2d(4, 4, 3, padding=2, dilation=2), nn.Tanh(),
                         nn.AvgPool2d(2, stride=1, padding=1), nn.Tanh(),
                         nn.MaxPool2d(3, stride=2, dilation=2), nn.Flatten(), nn.Linear(4, 1))


def _upsampling_critic(m):
    nn = m.nn
    return nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(3, 4, 3, 2, 1),
                         nn.Tanh(), nn.Conv2d(4, 1, 4, 2, 0), nn.Flatten())


@pytest.mark.parametrize("build", [_plain_critic, _pooled_critic, _upsampling_critic],
                         ids=["conv", "pools", "nearest"])
def test_wgan_gp_on_a_conv_critic_against_torch(build):
    mine, theirs = twins(build)
    x = RNG.standard_normal((2, 3, 8, 8))
    same_weight_grads(mine, theirs, lambda m, critic: wgan_gp(m, critic, x))


def test_interpolate_nearest_in_the_path_against_torch():
    mine, theirs = twins(_plain_critic)
    x = RNG.standard_normal((2, 3, 5, 5))

    def loss(m, critic):
        def up(t):
            return critic(m.nn.functional.interpolate(t, size=(8, 8), mode="nearest"))
        return wgan_gp(m, up, x)

    same_weight_grads(mine, theirs, loss)


def _scorer(m):
    nn = m.nn
    return nn.Sequential(nn.Embedding(7, 5), nn.Tanh(), nn.Linear(5, 1))


def test_r1_penalty_through_an_embedding_against_torch():
    """R1 on the embedding output, and a gradient-norm penalty on the table itself."""
    mine, theirs = twins(_scorer)
    ids = np.array([[1, 4, 4], [0, 6, 1]])

    def loss(m, model):
        h = model[0](m.tensor(ids))
        score = model[2](model[1](h)).sum()
        gh, gw = m.autograd.grad(score, (h, model[0].weight), create_graph=True)
        return (gh ** 2).sum() + 0.5 * (gw.tanh() ** 2).sum()

    same_weight_grads(mine, theirs, loss)


def _generator(m):
    nn = m.nn
    return nn.Sequential(nn.ConvTranspose2d(4, 3, 4, 2, 1), nn.Tanh(),
                         nn.ConvTranspose2d(3, 2, 3, 1, 1, output_padding=0, dilation=1))


def test_conv_transpose2d_second_derivative_by_its_weight_against_torch():
    mine, theirs = twins(_generator)
    z = RNG.standard_normal((2, 4, 3, 3))

    def loss(m, gen):
        out = gen(m.tensor(z))
        (gw,) = m.autograd.grad((out ** 2).sum(), gen[0].weight, create_graph=True)
        return (gw ** 2).sum()

    same_weight_grads(mine, theirs, loss)
