"""The everyday toolkit built from registered ops (Tensor methods, F, ta.* functions): each
composed function against torch, forward and backward, and through gradcheck in float64; the
results that never require grad (bools, indices); creation and random functions.
(The registered ops themselves are checked by the registry-driven tests.)
"""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _idx(values):
    """An integer index for both libraries: (tinyattn tensor, torch tensor)."""
    return ta.tensor(np.asarray(values)), torch.tensor(np.asarray(values))


I_GATHER = _idx([[[0, 2], [1, 1]], [[2, 2], [0, 1]]])
I_SELECT = _idx([2, 0, 2])
I_SLOTS = _idx([3, 0])  # index_copy / index_fill: distinct slots
I_ADD = _idx([2, 0, 2])  # index_add: slot 2 twice
I_SCATTER = _idx([[[0, 2], [1, 3]], [[2, 0], [3, 1]]])  # no slot twice in a row

# name: (input shape, the function; `lib` is tinyattn or torch, `i` picks an index pair)
COMPOSED = {
    "gather": ((2, 3, 4), lambda x, lib, i: x.gather(2, i(I_GATHER))),
    "index_select": ((2, 3, 4), lambda x, lib, i: x.index_select(1, i(I_SELECT))),
    "masked_select": ((2, 3, 4), lambda x, lib, i: x.masked_select(x > 0.3)),
    "tril": ((2, 3, 4), lambda x, lib, i: x.tril(1)),
    "triu": ((3, 4), lambda x, lib, i: lib.triu(x, -1)),
    "repeat": ((2, 3), lambda x, lib, i: x.repeat(2, 1, 3)),
    "tile": ((2, 3), lambda x, lib, i: x.tile((2,))),
    "repeat_interleave": ((2, 3), lambda x, lib, i: x.repeat_interleave(2, dim=1)),
    "flip": ((2, 3, 4), lambda x, lib, i: x.flip(0, 2)),
    "roll": ((2, 3, 4), lambda x, lib, i: x.roll((1, -2), (0, 2))),
    "roll flat": ((2, 3), lambda x, lib, i: x.roll(4)),
    "unflatten": ((2, 6), lambda x, lib, i: x.unflatten(1, (2, 3)).sum(2)),
    "diagonal": ((3, 4, 5), lambda x, lib, i: x.diagonal(1, 0, 2)),
    "diag": ((4,), lambda x, lib, i: lib.diag(x, -1)),
    "diag of a matrix": ((3, 4), lambda x, lib, i: lib.diag(x, 1)),
    "movedim": ((2, 3, 4), lambda x, lib, i: x.movedim((0, 1), (2, 0))),
    "swapaxes": ((2, 3, 4), lambda x, lib, i: x.swapaxes(0, 2)),
    "narrow": ((2, 5), lambda x, lib, i: x.narrow(1, 1, 3)),
    "unbind": ((3, 2), lambda x, lib, i: x.unbind(1)[1] * 2 + x.unbind(1)[0]),
    "t": ((2, 3), lambda x, lib, i: x.t()),
    "view_as": ((2, 6), lambda x, lib, i: x.view_as(x.reshape(4, 3)).contiguous()),
    "meshgrid": ((3,), lambda x, lib, i: lib.meshgrid(x, x * 2, indexing="xy")[1]),
    "cummax": ((2, 5), lambda x, lib, i: x.cummax(1).values),
    "cummin": ((3, 4), lambda x, lib, i: x.cummin(0).values),
    "median": ((3, 5), lambda x, lib, i: x.median(1).values),
    "median of all": ((3, 5), lambda x, lib, i: x.median()),
    "kthvalue": ((3, 5), lambda x, lib, i: x.kthvalue(2, 1).values),
    "norm": ((3, 4), lambda x, lib, i: x.norm(dim=1)),
    "std_mean": ((3, 4), lambda x, lib, i: lib.std_mean(x, 1)[0] * lib.std_mean(x, 1)[1]),
    "var_mean": ((3, 4), lambda x, lib, i: lib.var_mean(x, 0)[0] + lib.var_mean(x, 0)[1]),
    "clamp_min": ((3, 4), lambda x, lib, i: x.clamp_min(0.1)),
    "softmin": ((3, 4), lambda x, lib, i: (F if lib is ta else TF).softmin(x, dim=1)),
    "normalize": ((3, 4), lambda x, lib, i: (F if lib is ta else TF).normalize(x, dim=1)),
    "relu6": ((3, 4), lambda x, lib, i: (F if lib is ta else TF).relu6(x * 5)),
    "pad constant": ((2, 3, 4), lambda x, lib, i: (F if lib is ta else TF).pad(
        x, (1, 2, 0, 1), value=0.5)),
    "pad crop": ((2, 3, 4), lambda x, lib, i: (F if lib is ta else TF).pad(x, (-1, 2))),
    "pad reflect": ((2, 3, 4), lambda x, lib, i: (F if lib is ta else TF).pad(
        x, (2, 3), "reflect")),
    "pad replicate": ((2, 3, 4), lambda x, lib, i: (F if lib is ta else TF).pad(
        x, (2, 1, 1, 3), "replicate")),
    "pad circular": ((2, 3, 4), lambda x, lib, i: (F if lib is ta else TF).pad(
        x, (2, 3), "circular")),
    "module functions": ((2, 3), lambda x, lib, i: lib.exp(x) + lib.sum(lib.sin(x), 1,
                                                                        keepdim=True)
                         * lib.prod(x) - lib.amax(x, 0) + lib.logcumsumexp(x, 1)),
    "einsum": ((2, 3), lambda x, lib, i: lib.einsum("ij,kj->ik", x, x * 2)),
    # torch's method forms and small compositions (tensor.py)
    "add sub alpha": ((3, 4), lambda x, lib, i: x.add(x * x, alpha=2).sub(1.5, alpha=3)
                      + lib.add(x, 1, alpha=-1)),
    "div": ((3, 4), lambda x, lib, i: x.div(x.exp(), rounding_mode=None) + lib.mul(x, 3).neg()),
    "mm bmm mv": ((3, 4), lambda x, lib, i: x.mm(x.t()).sum(1) + lib.bmm(x[None], x.T[None])[0]
                  .sum(0) + lib.mv(x[:, :3], x[0, :3])),
    "outer": ((4,), lambda x, lib, i: x.outer(x * 2) + lib.ger(x, x.exp())),
    "var biased positional": ((3, 4), lambda x, lib, i: x.var(1, False) + x.std(1, True, True)[:, 0]
                              + lib.var_mean(x, 1, False)[0]),
    "var of all, unbiased=False": ((3, 4), lambda x, lib, i: x.var(False) + x.std(unbiased=False)),
    "cumsum dtype": ((3, 4), lambda x, lib, i: x.cumsum(1, dtype=x.dtype)
                     .cumprod(0, dtype=x.dtype)),
    "softmax dtype": ((3, 4), lambda x, lib, i: x.softmax(1, x.dtype)
                      + x.log_softmax(0, x.dtype)),
    "select take trace": ((3, 4), lambda x, lib, i: x.select(1, -1) * x.take(i(I_SELECT))
                          + x[:, :3].trace()),
    "diff": ((3, 5), lambda x, lib, i: x.diff(n=2, dim=1, prepend=x[:, :1], append=x[:, -2:])),
    "addcmul addcdiv": ((3, 4), lambda x, lib, i: x.addcmul(x, x.sin(), value=0.5)
                        .addcdiv(x, x.exp(), value=-2)),
    "fmax fmin": ((3, 4), lambda x, lib, i: x.fmax(x.flip(0)) + lib.fmin(x, x.flip(1))),
    "nan_to_num": ((3, 4), lambda x, lib, i: x.where(x < 1, np.inf).where(x > -1, -np.inf)
                   .where(x.abs() > 0.3, np.nan).nan_to_num(1.0, 5.0, -4.0) + x.nan_to_num()),
    "aminmax": ((3, 4), lambda x, lib, i: x.aminmax(dim=1).max * x.aminmax().min),
    "cosine_similarity": ((3, 1, 4), lambda x, lib, i: (F if lib is ta else TF).cosine_similarity(
        x, x[:2, 0].exp(), dim=-1)),
    "pairwise_distance": ((3, 4), lambda x, lib, i: (F if lib is ta else TF).pairwise_distance(
        x, x.flip(0) * 2, p=3.0, keepdim=True)),
    "cdist": ((2, 3, 4), lambda x, lib, i: lib.cdist(x, x[:, :2].exp())),
    "logit": ((3, 4), lambda x, lib, i: lib.logit(x.sigmoid()) + lib.logit(x.sigmoid(), eps=0.2)),
    "index_add": ((3, 4), lambda x, lib, i: x.index_add(0, i(I_ADD), x.flip(0) * x, alpha=3)),
    "index_copy": ((3, 4), lambda x, lib, i: x.index_copy(1, i(I_SLOTS), x[:, :2].exp())),
    "index_fill": ((3, 4), lambda x, lib, i: x.index_fill(1, i(I_SLOTS), -1.5) * x),
    "masked_scatter": ((3, 4), lambda x, lib, i: x.masked_scatter(x > 0.2, (x * 3).flip(0))),
    # in place, on tensors made from x: recorded, so the gradient flows through each change
    "index_ and scatter_ in place": ((2, 3, 4), lambda x, lib, i: (x * 1)
                                     .index_add_(2, i(I_SLOTS), x[..., :2].exp(), alpha=2)
                                     .index_copy_(0, i(I_SLOTS)[1:] + 1, x[:1] * 2)
                                     .index_fill_(1, i(I_SLOTS)[1:] + 1, 0.5)
                                     .scatter_(2, i(I_SCATTER), x[:, :2, :2] * 3)
                                     .scatter_add_(2, i(I_SCATTER), x[:, :2, :2].sin())
                                     .masked_scatter_(x > 0, x.flip(2) * 4)),
    "addcmul_ addcdiv_ lerp_ tril_ triu_": ((3, 4), lambda x, lib, i: (x * 1)
                                            .addcmul_(x, x.sin(), value=0.5)
                                            .addcdiv_(x, x.exp(), value=-2)
                                            .lerp_(x.cos(), 0.3).tril_(1) + (x * 2).triu_(-1)),
    "nansum nanmean": ((3, 4), lambda x, lib, i: x.where(x > -0.5, float("nan")).nansum(1)
                       + lib.nanmean(x.where(x < 0.8, float("nan")), 0)[:3]
                       + x.where(x > 0, float("nan")).nanmean()),
    "xlogy logaddexp2 float_power": ((3, 4), lambda x, lib, i: x.xlogy(x.exp())
                                     + lib.xlogy(x.relu(), x.abs() + 1)
                                     + x.logaddexp2(x.flip(0)) + x.abs().float_power(1.5)),
    "deg2rad rad2deg sinc": ((3, 4), lambda x, lib, i: x.deg2rad() * x.rad2deg()
                             + (x * (x.abs() > 0.3)).sinc() + lib.sinc(x * 3)),
    "addmm addmv addr baddbmm addbmm": ((3, 4), lambda x, lib, i: x.addmm(
        x, x.T @ x, beta=0.5, alpha=2) + lib.addmv(x[:, 0], x, x[0], beta=2)[:, None]
        + x[:, :1].addr(x[:, 0], x[0], alpha=-1) + lib.baddbmm(
            x[None], x[None], (x.T @ x)[None], beta=0)[0] + x.addbmm(
            lib.stack([x[:, :2], x[:, 2:]]), lib.stack([x[:2], x[1:]]), beta=3)),
    "inner cross dist": ((4, 3), lambda x, lib, i: x.inner(x[:2] * 2).sum(1)
                         + lib.cross(x, x.flip(0), dim=1).sum(1) + x.dist(x.flip(1), 3)
                         + x[0].inner(x[1]) + lib.dist(x, x.exp())),
    "msort flips rot90 tensor_split diagflat": ((3, 4), lambda x, lib, i: x.msort()
                                                + x.fliplr() * x.flipud()
                                                + x.rot90(1, (0, 1)).T + x.rot90(2)
                                                + x.rot90(-1).T + x.rot90(4, (1, 0))
                                                + lib.cat(x.tensor_split(3, dim=1), 1)
                                                + x.tensor_split([1, -1], 0)[1].sum()
                                                + x[0].diagflat(1)[:3, :4]),
    "broadcast hstack vstack": ((3, 1), lambda x, lib, i: lib.hstack(
        lib.broadcast_tensors(x, x[:2, 0] * 2))
        + lib.vstack([x[:, 0], x[:, 0].exp()]).sum(0)[:, None]
        + lib.broadcast_to(x, (2, 3, 4)).sum(0)[:, :1]),
}


@pytest.mark.parametrize("name", list(COMPOSED))
def test_composed_function_matches_torch(name):
    shape, fn = COMPOSED[name]
    rng = np.random.default_rng(7)
    xv = rng.standard_normal(shape)
    x = ta.tensor(xv, requires_grad=True)
    tx = torch.tensor(xv, requires_grad=True)
    out = fn(x, ta, lambda pair: pair[0])
    want = fn(tx, torch, lambda pair: pair[1])
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-14)
    g = rng.standard_normal(out.shape)
    out.backward(g)
    want.backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(COMPOSED))
def test_composed_function_gradcheck(name):
    shape, fn = COMPOSED[name]
    x = ta.tensor(np.random.default_rng(8).standard_normal(shape), requires_grad=True)
    assert ta.gradcheck(lambda z: fn(z, ta, lambda pair: pair[0]), [x])


def test_results_that_are_bools_or_indices_never_require_grad():
    x = ta.tensor(np.array([[1.0, np.nan, -2.0], [np.inf, 0.0, 3.0]]), requires_grad=True)
    outs = [x.isnan(), x.isinf(), x.isfinite(), x.isclose(x), x.logical_not(), x.any(1),
            x.all(0), x.logical_and(x), x.nonzero(), x.cummax(1).indices, x.argsort(),
            x.kthvalue(1).indices, (x > 0).bitwise_and(x < 2), ta.unique(x.detach())]
    for out in outs:
        assert not out.requires_grad and out.dtype.kind in "biuf"
    assert ta.tensor([1, 2, 3]).numel() == 3 and x.is_leaf and not (x * 2).is_leaf


def test_bitwise_with_a_python_int_on_the_left_and_floats_refused():
    a = ta.tensor([5, 3, 12])
    np.testing.assert_array_equal((6 & a).numpy(), [4, 2, 4])
    np.testing.assert_array_equal((6 | a).numpy(), [7, 7, 14])
    np.testing.assert_array_equal((6 ^ a).numpy(), [3, 5, 10])
    np.testing.assert_array_equal((1 << ta.tensor([1, 2])).numpy(), [2, 4])
    np.testing.assert_array_equal((a >> 1).numpy(), [2, 1, 6])
    with pytest.raises(ta.DTypeError, match="bitwise_and.*integer or bool.*float32"):
        ta.tensor([1.0]).bitwise_and(1)


def test_remainder_and_floor_divide_follow_python():
    x = ta.tensor([-7.0, 7.0, -7.5])
    np.testing.assert_array_equal((x % 3).numpy(), np.array([-7.0, 7.0, -7.5]) % 3)
    np.testing.assert_array_equal((x // 2).numpy(), np.array([-7.0, 7.0, -7.5]) // 2)
    np.testing.assert_array_equal((7 // ta.tensor([2, -3])).numpy(), [3, -3])
    np.testing.assert_array_equal(ta.fmod(x, 3).numpy(), np.fmod([-7.0, 7.0, -7.5], 3))


def test_rounding_keeps_integers_and_gives_zero_gradients():
    assert ta.floor(ta.tensor([1, -2])).dtype == np.int64
    x = ta.tensor(np.array([0.5, 1.5, -2.5, 2.7]), requires_grad=True)
    out = x.round() + x.floor() + x.ceil() + x.trunc() + x.sign() + x.frac()
    np.testing.assert_array_equal(x.round().numpy(), [0.0, 2.0, -2.0, 3.0])  # halves to even
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0, 1.0, 1.0])  # frac's only


def test_method_forms_without_gradients_match_torch():
    """Integer division with rounding modes, comparisons' names, equal, count_nonzero, the
    dtype names of type(), new_* creation: values and dtypes as torch's."""
    rng = np.random.default_rng(3)
    a, b = rng.integers(-9, 9, (3, 4)), rng.integers(1, 4, (3, 4)) * rng.choice([-1, 1], (3, 4))
    for x, tx in [(ta.tensor(a), torch.tensor(a)), (ta.tensor(a * 0.7), torch.tensor(a * 0.7))]:
        y, ty = ta.tensor(b), torch.tensor(b)
        pairs = [(x.div(y, rounding_mode="trunc"), tx.div(ty, rounding_mode="trunc")),
                 (x.div(-2, rounding_mode="trunc"), tx.div(-2, rounding_mode="trunc")),
                 (ta.div(x, y, rounding_mode="floor"), torch.div(tx, ty, rounding_mode="floor")),
                 (x.div(y), tx.div(ty)), (x.ge(0), tx.ge(0)), (ta.not_equal(x, 1), tx.ne(1)),
                 (x.count_nonzero(dim=1), tx.count_nonzero(dim=1)),
                 (ta.count_nonzero(x), torch.count_nonzero(tx)),
                 (x.new_full((2,), 7), tx.new_full((2,), 7)),
                 (x.new_zeros(2, 3), tx.new_zeros(2, 3)),
                 (x.new_tensor([1.5]), tx.new_tensor([1.5]))]
        for got, want in pairs:
            assert got.dtype == want.numpy().dtype, (got, want)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert x.type() == tx.type().replace("torch", "tinyattn")
        assert x.equal(x.clone()) and not x.equal(x[:2]) and not ta.equal(x, x + 1)
    assert ta.ones(2).new_ones(3, dtype=ta.float64, requires_grad=True).requires_grad
    with pytest.raises(ValueError, match="div: rounding_mode must be"):
        ta.ones(2).div(2, rounding_mode="round")
    with pytest.raises(ta.ShapeError, match=r"mm: needs a 2-D and a 2-D tensor, got \(3,\)"):
        ta.ones(3).mm(ta.ones(3, 1))
    with pytest.raises(ta.ShapeError, match=r"bmm: the batch sizes differ"):
        ta.ones(2, 3, 4).bmm(ta.ones(3, 4, 5))
    with pytest.raises(ta.ShapeError, match=r"outer: needs two 1-D tensors"):
        ta.ones(2, 2).outer(ta.ones(2))


def test_module_functions_without_gradients_match_torch():
    seq, vals = [[1.0, 2, 2, 3], [0, 5, 6, 7]], [[2.0, 0.5], [6, 8]]
    for right in (False, True):
        got = ta.searchsorted(ta.tensor(seq), ta.tensor(vals), right=right)
        want = torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right)
        assert got.dtype == np.int64 and got.numpy().tolist() == want.tolist()
        got = ta.bucketize(ta.tensor(vals), ta.tensor([1.0, 2, 3]), right=right)
        want = torch.bucketize(torch.tensor(vals), torch.tensor([1.0, 2, 3]), right=right)
        assert got.numpy().tolist() == want.tolist()
    for args in [(3, 3), (3, 4, -1), (4, 3, 1)]:
        assert ta.tril_indices(*args).numpy().tolist() == torch.tril_indices(*args).tolist()
        assert ta.triu_indices(*args).numpy().tolist() == torch.triu_indices(*args).tolist()
    # torch's keywords: device= (a name for the backend) and dtype=
    for fn in (ta.tril_indices, ta.triu_indices):
        assert fn(3, 3, device="cpu").dtype == np.int64
        assert fn(3, 3, 1, dtype=ta.int32).dtype == np.int32
    mask = [[True, False, True], [False, False, True]]
    for got, want in zip(ta.where(ta.tensor(mask)), torch.where(torch.tensor(mask)), strict=True):
        assert got.numpy().tolist() == want.tolist()
    with pytest.raises(TypeError, match="where: give both x and y, or neither"):
        ta.where(ta.tensor(mask), 1.0)
    assert ta.result_type(ta.tensor([1]), 1.5) == np.float32
    assert ta.result_type(ta.tensor([1.0]), ta.tensor(2.0, dtype=ta.float64)) == np.float32
    assert ta.promote_types(ta.int32, ta.float16) == np.float16
    x = ta.ones(2, 3)
    assert ta.numel(x) == 6 and ta.is_tensor(x) and not ta.is_tensor(x.numpy())
    assert ta.is_floating_point(x) and not ta.is_floating_point(ta.tensor([1]))


def test_randint_with_high_alone_and_normal_as_torch():
    ta.manual_seed(0)
    draws = ta.randint(5, (2000,))  # randint(high, size)
    assert draws.dtype == np.int64 and draws.min().item() == 0 and draws.max().item() == 4
    x = ta.normal(5.0, 0.5, (20000,))
    assert x.dtype == np.float32 and abs(x.mean().item() - 5.0) < 0.02
    assert abs(x.std().item() - 0.5) < 0.02
    mean = ta.zeros(2, 1, dtype=ta.float64, requires_grad=True)
    y = ta.normal(mean, ta.ones(3, dtype=ta.float64))  # tensors broadcast; no gradient (torch)
    want = torch.normal(torch.zeros(2, 1, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    assert y.shape == tuple(want.shape) and y.dtype == np.float64 and not y.requires_grad
    with pytest.raises(TypeError, match="normal: with a number for mean and for std, give size"):
        ta.normal(0.0, 1.0)


def test_tensor_conversions():
    x = ta.tensor([1.5, -2.0])
    assert x.float().dtype == np.float32 and x.double().dtype == np.float64
    assert x.half().dtype == np.float16 and x.long().dtype == np.int64
    assert x.int().dtype == np.int32 and x.bool().dtype == np.bool_
    assert x.device == "cpu" and x.to(x.device) is x
    assert x.nbytes == 8 and x.double().nbytes == 16 and x.element_size() == 4
    assert x.type_as(ta.tensor([1])).dtype == np.int64


def test_creation_functions():
    np.testing.assert_array_equal(ta.eye(3, 2).numpy(), np.eye(3, 2))
    np.testing.assert_allclose(ta.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    np.testing.assert_allclose(ta.logspace(0, 2, 3).numpy(), [1.0, 10.0, 100.0])
    assert ta.empty(2, 3).shape == (2, 3) and ta.empty(2).dtype == np.float32
    x = ta.ones(2, 3, dtype=ta.float64)
    assert ta.full_like(x, 7).dtype == np.float64 and float(ta.full_like(x, 7).sum()) == 42
    assert ta.rand_like(x).shape == (2, 3) and ta.randn_like(x).dtype == np.float64
    a = np.arange(3.0)
    shared = ta.from_numpy(a)
    a[0] = 5.0
    assert shared.numpy()[0] == 5.0 and ta.as_tensor(shared) is shared
    assert ta.as_tensor([1, 2]).dtype == np.int64


def test_random_integers_permutations_and_draws():
    ta.manual_seed(0)
    r = ta.randint(2, 5, (1000,))
    assert r.dtype == np.int64 and r.numpy().min() == 2 and r.numpy().max() == 4
    p = ta.randperm(10)
    assert sorted(p.tolist()) == list(range(10))
    w = ta.tensor([[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]])
    draws = ta.multinomial(w, 4000, replacement=True).numpy()
    assert (draws[1] == 0).all() and not (draws[0] == 0).any()
    assert abs((draws[0] == 2).mean() - 0.75) < 0.03  # 3 of every 4
    once = ta.multinomial(ta.tensor([1.0, 2.0, 0.0, 4.0]), 3).tolist()
    assert sorted(once) == [0, 1, 3]  # each drawn once, the zero weight never
    b = ta.bernoulli(ta.full((4000,), 0.25))
    assert b.dtype == np.float32 and abs(float(b.mean()) - 0.25) < 0.03
    with pytest.raises(ValueError, match="without replacement"):
        ta.multinomial(ta.tensor([1.0, 1.0]), 3)


def test_scatter_reduce_knows_prod_and_refuses_other_names():
    x = ta.full((3,), 2.0)
    assert x.scatter_reduce(0, ta.tensor([0, 0]), ta.tensor([3.0, 4.0]), "prod").tolist() == [
        24.0, 2.0, 2.0]
    with pytest.raises(ValueError, match=r"'PROD' \(not a reduction scatter_reduce knows\)"):
        x.scatter_reduce(0, ta.tensor([0, 1]), ta.ones(2), "PROD")  # (names are lowercase)


def test_cumprod_with_zeros_matches_torch():
    xv = np.array([[2.0, 0.0, 3.0, 0.0, 1.5], [0.0, 0.0, 2.0, 1.0, 4.0]])
    x, tx = ta.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    g = np.arange(10.0).reshape(2, 5)
    x.cumprod(1).backward(g)
    tx.cumprod(1).backward(torch.from_numpy(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    x.grad = None
    x.prod(1).backward(np.ones(2))
    np.testing.assert_array_equal(x.grad.numpy()[0], [0.0, 0.0, 0.0, 0.0, 0.0])  # two zeros
    y = ta.tensor([2.0, 0.0, 3.0], requires_grad=True)
    y.prod().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [0.0, 6.0, 0.0])  # one zero: the rest


@pytest.mark.parametrize("base", [0.5, 2.0, 0.0, -2.0])
def test_a_number_to_a_tensor_power_has_torchs_gradient(base):
    values = np.array([1.0, 2.0, 3.0])
    y, t = ta.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    (base ** y).sum().backward()
    (base ** t).sum().backward()  # log(base) times base**y; 0 at base 0, NaN below
    np.testing.assert_allclose(y.grad.numpy(), t.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("call,error,match", [
    (lambda x: x.index_add(0, ta.tensor([0, 1]), ta.ones(3, 4)), ta.ShapeError,
     r"index_add: source has shape \(3, 4\) but this tensor \(3, 4\) with 2 indices along dim "
     r"0 needs \(2, 4\)"),
    (lambda x: x.index_copy(1, ta.tensor([[0]]), ta.ones(3, 1)), ta.ShapeError,
     r"index_copy: the index must be 1-D \(one slice per entry\), got \(1, 1\)"),
    (lambda x: x.index_fill(1, ta.tensor([0.5]), 1.0), ta.DTypeError,
     "index_fill: index must hold integers, got float"),
    (lambda x: x.index_add(2, ta.tensor([0]), ta.ones(3, 1)), ta.DimError, "index_add"),
    (lambda x: x.index_copy(0, [0], np.ones((1, 4))), TypeError,
     "index_copy: source must be a Tensor, got ndarray"),
    (lambda x: x.index_fill(0, ta.tensor([3]), 1.0), ta.DimError, "index_hit"),
    (lambda x: x.masked_scatter(x > -10, ta.ones(5)), ta.ShapeError,
     r"masked_scatter: the mask picks 12 entries but source \(5,\) has only 5"),
])
def test_index_and_masked_scatter_errors_name_the_method_and_shapes(call, error, match):
    with pytest.raises(error, match=match):
        call(ta.zeros(3, 4))


def test_composed_in_place_methods_follow_the_in_place_rules():
    """index_add_ and the others made of several ops: a leaf that requires grad is refused while
    recording; under no_grad the values change in the tensor's own memory, its version
    counts it, and a graph that kept the old values refuses them in backward."""
    w = ta.zeros(3, 4, requires_grad=True)
    with pytest.raises(ta.GraphError, match="index_add_: this tensor .* is a leaf that "
                                            "requires grad"):
        w.index_add_(0, ta.tensor([1]), ta.ones(1, 4))
    y = w.exp()  # keeps exp's output: a change to it must be refused in backward
    with ta.no_grad():
        same = y.index_fill_(1, ta.tensor([2]), 7.0).lerp_(ta.ones(3, 4), 0.5)
    assert same is y and y.numpy()[0].tolist() == [1.0, 1.0, 4.0, 1.0]
    with pytest.raises(ta.GraphError, match=r"exp saved its output .* changed in place "
                                            r"afterwards \(it is at version 2, exp needs"):
        y.sum().backward()
    v = ta.ones(4, requires_grad=True)
    view = (v * 1)
    alias = view.reshape(2, 2)  # a view: it follows the change, its history too (torch's)
    view.masked_scatter_(view > 0, v * 2)
    alias.sum().backward()
    assert alias.numpy().tolist() == [[2.0, 2.0], [2.0, 2.0]] and v.grad.tolist() == [2.0] * 4
    other = view.detach().requires_grad_()  # a graph of its own that would not see a change
    with pytest.raises(ta.GraphError, match="masked_scatter_: this tensor .* shares its memory"):
        view.masked_scatter_(view > 0, v * 2)
    assert other.shape == (4,)


def test_composed_methods_edges_match_torch():
    """xlogy at 0 and NaN, sinc at 0 (value 1, gradient 0), the sign tests on ±0 and ±inf,
    tensor_split's uneven sections and out-of-range cuts, cross's default dim, deg2rad of ints."""
    x, y = np.array([0.0, 0.0, 1.0, 2.0, 0.0]), np.array([0.0, np.nan, 0.0, 3.0, 5.0])
    got = ta.tensor(x).xlogy(ta.tensor(y)).numpy()  # (log 0 = -inf, silently as torch)
    np.testing.assert_array_equal(got, torch.tensor(x).xlogy(torch.tensor(y)).numpy())
    z = ta.tensor([0.0, 0.5], requires_grad=True)
    tz = torch.tensor([0.0, 0.5], requires_grad=True)
    z.sinc().sum().backward()
    tz.sinc().sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy(), atol=1e-15)
    assert z.sinc().numpy()[0] == 1.0
    v = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -2.0])
    for name in ("isposinf", "isneginf", "signbit"):
        ours = getattr(ta.tensor(v), name)()
        assert ours.dtype == np.bool_ and not ours.requires_grad
        np.testing.assert_array_equal(ours.numpy(), getattr(torch.tensor(v), name)().numpy())
    a = np.arange(7.0)
    for spec in (3, 7, 9, 1, [2, 5], [-2], [0, 3, 3, 10], [5, 2]):
        ours = [t.numpy().tolist() for t in ta.tensor(a).tensor_split(spec)]
        assert ours == [t.numpy().tolist() for t in torch.tensor(a).tensor_split(spec)], spec
    m = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(ta.tensor(m).cross(ta.tensor(m[::-1].copy())).numpy(),
                                  torch.linalg.cross(torch.tensor(m), torch.tensor(m[::-1].copy()),
                                                     dim=1).numpy())
    d = ta.tensor([180, 90]).deg2rad()
    assert d.dtype == np.float32 and np.allclose(d.numpy(), [np.pi, np.pi / 2])


@pytest.mark.parametrize("call,error,match", [
    (lambda: ta.ones(3).fliplr(), ta.ShapeError, r"fliplr: needs at least 2 dims, got \(3,\)"),
    (lambda: ta.tensor(1.0).flipud(), ta.ShapeError, "flipud: needs at least 1 dim"),
    (lambda: ta.ones(2, 2).rot90(1, (1, -1)), ta.DimError, r"rot90: dim \(1, -1\) repeats"),
    (lambda: ta.ones(2, 2).rot90(1, (0,)), ValueError, "rot90: dims must name two dims"),
    (lambda: ta.ones(2, 5).addmm(ta.ones(2, 3), ta.ones(3, 4)), ta.ShapeError,
     r"addmm: this tensor \(2, 5\) does not broadcast to the product's shape \(2, 4\)"),
    (lambda: ta.ones(2, 3).inner(ta.ones(2)), ta.ShapeError,
     r"inner: the last dims differ: \(2, 3\) and \(2,\)"),
    (lambda: ta.ones(2, 4).cross(ta.ones(2, 4)), ta.ShapeError,
     r"cross: no dim of size 3 in \(2, 4\)"),
    (lambda: ta.ones(3, 4).cross(ta.ones(3, 4), dim=1), ta.ShapeError,
     r"cross: dim 1 must have size 3"),
    (lambda: ta.ones(4).tensor_split(0), ValueError, "tensor_split: the number of sections "
                                                      "must be > 0, got 0"),
])
def test_composed_methods_refuse_bad_shapes_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call()
