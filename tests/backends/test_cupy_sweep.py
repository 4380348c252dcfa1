"""On a GPU (`pytest -m gpu`): what a user calls gives the NumPy backend's numbers on CuPy.

The kernels have their own tests (test_cupy_backend.py). Everything else on the CuPy backend runs
CuPy's array routines through the same Python as on NumPy, and that is where a NumPy-only habit
breaks on a GPU: a host array in a device op, an argument CuPy does not take, a result in
another dtype, an implicit copy to the host. So, against the NumPy backend, forward values,
result dtypes and gradients of:

- every registered op's sample cases in float64, float32 and float16 (one test per op and dtype;
  dropout, which draws from each backend's own stream, by its structure: kept values x/(1-p));
- the composite API (Tensor methods, tinyattn.*, functional, losses, norms, index and sort
  routines, float16 sums over 8,192 rows) in float32 and float16;
- the nn modules (attention, encoder/decoder layers, norms in both modes, the TinyTransformer in
  float32 and float16), every optimizer for three steps, gradient clipping, save/load from the
  device, greedy generation.

Skipped without CuPy and a GPU.
"""

import math

import gpu  # tests/support: is a real GPU here
import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn, optim
from tinyattn.ops import REGISTRY
from tinyattn.ops import samples as S

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(gpu.reason() is not None,
                                                  reason=str(gpu.reason()))]
DTYPES = {"float64": np.float64, "float32": np.float32, "float16": np.float16}
TOL = {np.float64: 1e-9, np.float32: 1e-4, np.float16: 2e-2}


# ---- comparing two runs -------------------------------------------------------------------------

def flat(value):
    """The leaves of an op's or function's result: tensors as NumPy arrays, the rest as is."""
    if isinstance(value, ta.Tensor):
        return [value.numpy()]
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in flat(v)]
    return [value]


def mismatch(got, want, dtype, what):
    """None if `got` (CuPy) matches `want` (NumPy), else a line saying how it differs."""
    if not isinstance(want, np.ndarray):
        return None if got == want else f"{what}: {got!r} != {want!r}"
    if not isinstance(got, np.ndarray):
        return f"{what}: got {type(got).__name__}, want an array"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{what}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    if not np.issubdtype(want.dtype, np.inexact):
        return None if np.array_equal(got, want) else f"{what}: values differ"
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(w)) or not np.array_equal(g[np.isinf(g)],
                                                                          w[np.isinf(g)]):
        return f"{what}: NaN/inf in other places ({g.ravel()[:6]} vs {w.ravel()[:6]})"
    ok = np.isfinite(w)
    if not ok.any():
        return None
    tol = TOL[np.dtype(dtype).type]
    scale = max(1.0, float(np.abs(w[ok]).max()))
    err = float(np.abs(g[ok] - w[ok]).max())
    return None if err <= tol * scale else f"{what}: max error {err:.3g} (scale {scale:.3g})"


def run(backend, fn, values, dtype, seed=1):
    """fn(c, *tensors) on `backend`: tensors made from `values` in dtype that require grad, c
    makes constants there. Backward of the float results against fixed random weights.
    Returns (result leaves, gradients)."""
    def const(v, dt=None):
        return ta.tensor(np.asarray(v, dtype=dt), backend=backend)

    xs = [ta.tensor(np.asarray(v).astype(dtype), requires_grad=True, backend=backend)
          for v in values]
    out = fn(const, *xs)
    leaves = [t for t in (out if isinstance(out, (tuple, list)) else [out])
              if isinstance(t, ta.Tensor) and t.requires_grad]
    if leaves:
        rng = np.random.default_rng(seed)
        total = None
        for t in leaves:
            w = ta.tensor(rng.standard_normal(t.shape).astype(t.dtype), backend=backend)
            term = (t.masked_fill(~t.isfinite(), 0) * w).sum()  # inf - inf would be NaN
            total = term if total is None else total + term
        total.backward()
    return flat(out), [None if x.grad is None else x.grad.numpy() for x in xs]


def compare(fn, values, dtype, label):
    """Run fn on both backends; the list of differences (empty when they agree)."""
    got_out, got_grads = run("cupy", fn, values, dtype)
    want_out, want_grads = run("numpy", fn, values, dtype)
    problems = []
    if len(got_out) != len(want_out):
        return [f"{label}: {len(got_out)} results, NumPy gives {len(want_out)}"]
    for i, (g, w) in enumerate(zip(got_out, want_out, strict=True)):
        problems.append(mismatch(g, w, dtype, f"{label} result {i}"))
    for i, (g, w) in enumerate(zip(got_grads, want_grads, strict=True)):
        if (g is None) != (w is None):
            problems.append(f"{label} grad {i}: {g is None=} {w is None=}")
        elif g is not None:
            problems.append(mismatch(g, w, dtype, f"{label} grad {i}"))
    return [p for p in problems if p]


# ---- every registered op ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", sorted(n for n in REGISTRY if n != "dropout"))
def test_every_op_on_cupy_matches_numpy(name, dtype):
    problems = []
    for i, (inputs, params) in enumerate(REGISTRY[name].samples):
        for backend_values in _sample_values(inputs, i):
            label = f"{name} case {i} {params}"
            problems += _compare_case(name, params, backend_values, DTYPES[dtype], label)
    assert not problems, "\n".join(problems)


def _sample_values(inputs, i):
    """The case's inputs as (kind, value) pairs: 'grad' arrays (made in the test's dtype,
    requiring grad), 'const' arrays and plain values, drawn once for both backends."""
    rng = np.random.default_rng(2000 + i)
    made = S.materialize(inputs, rng, lambda v, rg: ("grad" if rg else "const", v))
    return [[m if isinstance(m, tuple) else ("plain", m) for m in made]]


def _compare_case(name, params, spec, dtype, label):
    grads = [v for kind, v in spec if kind == "grad"]

    def fn(c, *xs):
        it = iter(xs)
        args = [next(it) if kind == "grad" else c(v) if kind == "const" else v
                for kind, v in spec]
        return REGISTRY[name](*args, **params)

    return compare(fn, grads, dtype, label)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_on_cupy_keeps_x_over_1_minus_p(p, dtype):
    x = ta.tensor(np.random.default_rng(0).uniform(1, 2, (64, 256)).astype(dtype),
                  requires_grad=True, backend="cupy")
    y = F.dropout(x, p=p, training=True)
    y.backward(ta.ones_like(y))
    got, xv, grad = y.numpy(), x.numpy(), x.grad.numpy()
    kept = got != 0
    assert got.dtype == np.dtype(dtype)
    assert abs(kept.mean() - (1 - p)) < 0.02
    tol = TOL[DTYPES[dtype]]
    np.testing.assert_allclose(got[kept], xv[kept] / (1 - p), rtol=tol)
    np.testing.assert_allclose(grad, kept / (1 - p), rtol=tol)


# ---- the composite API --------------------------------------------------------------------------

I3 = np.array([2, 0, 2])
IDX = np.array([[[0, 1, 4], [2, 2, 0], [1, 3, 3], [4, 0, 1]]] * 3)  # (3, 4, 3) into dim 2
MASK = np.arange(60).reshape(3, 4, 5) % 3 == 0
TARGET = np.array([1, 0, 4, 3, 2, 1])
PROBS = np.random.default_rng(9).uniform(0.1, 0.9, (6, 5))
KEEP = np.tril(np.ones((4, 4), bool))
X, Y = (3, 4, 5), (3, 5, 4)

API = {  # name -> (fn(c, *tensors), input shapes or arrays)
    "amax": (lambda c, x: x.amax(dim=1), [X]),
    "amin_keepdim": (lambda c, x: x.amin(dim=(0, 2), keepdim=True), [X]),
    "max_dim": (lambda c, x: x.max(dim=2), [X]),
    "min_all": (lambda c, x: x.min(), [X]),
    "aminmax": (lambda c, x: x.aminmax(dim=1), [X]),
    "argmax_argmin": (lambda c, x: (x.argmax(dim=1), x.argmin()), [X]),
    "median_dim": (lambda c, x: x.median(dim=2), [X]),
    "median_all": (lambda c, x: x.median(), [X]),
    "sort_desc": (lambda c, x: x.sort(dim=1, descending=True), [X]),
    "argsort_msort": (lambda c, x: (x.argsort(dim=2), x.msort()), [X]),
    "topk": (lambda c, x: x.topk(2, dim=-1), [X]),
    "topk_smallest": (lambda c, x: x.topk(3, dim=0, largest=False), [X]),
    "kthvalue": (lambda c, x: x.kthvalue(2, dim=1), [X]),
    "cummax_cummin": (lambda c, x: (x.cummax(dim=1), x.cummin(dim=2)), [X]),
    "cumsum_cumprod": (lambda c, x: (x.cumsum(0), x.cumprod(1)), [X]),
    "logcumsumexp": (lambda c, x: x.logcumsumexp(2), [X]),
    "var_mean": (lambda c, x: ta.var_mean(x, dim=1), [X]),
    "std_mean": (lambda c, x: ta.std_mean(x, dim=(0, 1), correction=0), [X]),
    "std_var": (lambda c, x: (x.std(), x.var(dim=2, keepdim=True)), [X]),
    "norms": (lambda c, x: (x.norm(), x.norm(p=1, dim=1), x.norm(p=float("inf"), dim=2),
                            x.norm(p=3, dim=0)), [X]),
    "normalize": (lambda c, x: F.normalize(x, dim=-1), [X]),
    "cosine_similarity": (lambda c, x, y: F.cosine_similarity(x, y, dim=-1), [X, X]),
    "pairwise_distance": (lambda c, x, y: F.pairwise_distance(x[0], y[0]), [X, X]),
    "cdist_dist": (lambda c, x, y: (ta.cdist(x, y), ta.dist(x, y)), [X, X]),
    "prod": (lambda c, x: (x.prod(dim=1), x[0, 0].prod()), [X]),
    "sum_mean_dims": (lambda c, x: (x.sum(dim=(0, 2)), x.mean(dim=0, keepdim=True)), [X]),
    "logsumexp": (lambda c, x: (x.logsumexp(dim=1), F.logsumexp(x, dim=(1, 2))), [X]),
    "nan_ops": (lambda c, x: (_nans(c, x).nan_to_num(nan=0.5), _nans(c, x).nansum(),
                              _nans(c, x).nanmean(dim=1)), [X]),
    "clamp_tensor_bounds": (lambda c, x, lo, hi: x.clamp(min=lo, max=hi + 1), [X, (5,), (4, 1)]),
    "clamp_numbers": (lambda c, x: (x.clamp(-0.5, 0.5), x.clamp_min(0.1), x.clamp_max(0)), [X]),
    "where_masked_fill": (lambda c, x, y: (ta.where(c(MASK), x, y), x.masked_fill(c(MASK), 2.0)),
                          [X, X]),
    "masked_fill_tensor_value": (lambda c, x, v: x.masked_fill(c(MASK), v), [X, ()]),
    "masked_select_scatter": (lambda c, x, y: (x.masked_select(c(MASK)),
                                               x.masked_scatter(c(MASK), y)), [X, X]),
    "index_select_take": (lambda c, x: (x.index_select(1, c(I3)), x.take(c(IDX[0]))), [X]),
    "gather": (lambda c, x: x.gather(2, c(IDX)), [X]),
    "take_along_dim": (lambda c, x: ta.take_along_dim(x, c(IDX), dim=2), [X]),
    "scatter_add": (lambda c, x, s: x.scatter_add(2, c(IDX), s), [X, (3, 4, 3)]),
    "scatter_reduce": (lambda c, x, s: (x.scatter_reduce(2, c(IDX), s, "amax"),
                                        x.scatter_reduce(2, c(IDX), s, "mean")),
                       [X, (3, 4, 3)]),
    "index_add_copy_fill": (lambda c, x, s: (x.index_add(0, c(np.array([2, 0])), s),
                                             x.index_copy(0, c(np.array([2, 0])), s),
                                             x.index_fill(1, c(I3), -1.0)), [X, (2, 4, 5)]),
    # distinct rows: with a repeated one, which write lands is undefined on a GPU (as in torch)
    "setitem_advanced": (lambda c, x, v: _setitem(x, (c(np.array([2, 0, 1])), slice(None), 1), v),
                         [X, (3, 4)]),
    "getitem_mask_and_ints": (lambda c, x: (x[c(MASK)], x[c(I3), :, c(np.array([0, 1, 4]))],
                                            x[..., None, ::-2]), [X]),
    "repeat_tile": (lambda c, x: (x.repeat(2, 1, 1), x.tile((1, 2)),
                                  x.repeat_interleave(2, dim=1)), [X]),
    "repeat_interleave_tensor": (lambda c, x: x.repeat_interleave(c(np.array([1, 0, 2, 3])),
                                                                  dim=1), [X]),
    "roll_flip_rot90": (lambda c, x: (x.roll(1, dims=2), x.roll((1, -2), (0, 2)), x.flip(0),
                                      x.rot90(1, (1, 2)), x.fliplr()), [X]),
    "tril_triu_diag": (lambda c, x: (x.tril(), x.triu(1), x.diagonal(dim1=1, dim2=2),
                                     x[0, 0].diag(), x[0].trace(), x[0, 0].diagflat(1)), [X]),
    "diff": (lambda c, x: (x.diff(dim=2), x.diff(n=2, dim=1)), [X]),
    "split_chunk_unbind": (lambda c, x: (x.split([1, 3], dim=1), x.chunk(2, dim=2),
                                         x.unbind(0), x.tensor_split(3, dim=2)), [X]),
    "cat_stack": (lambda c, x, y: (ta.cat([x, y], dim=1), ta.stack([x, y], dim=-1),
                                   ta.hstack([x, y]), ta.vstack([x, y])), [X, X]),
    "shapes": (lambda c, x: (x.permute(2, 0, 1), x.flatten(1), x.unflatten(2, (5, 1)),
                             x.movedim(0, -1), x.swapaxes(0, 1).contiguous(), x.narrow(2, 1, 3),
                             x.select(1, 2), x.expand(2, 3, 4, 5), x.mT), [X]),
    "pad": (lambda c, x: (F.pad(x, (1, 2)), F.pad(x, (0, 0, 2, 1), value=3.0)), [X]),
    "einsum": (lambda c, x, y: (ta.einsum("bij,bjk->bik", x, y), ta.einsum("bij->j", x),
                                ta.einsum("bij,bij->b", x, x)), [X, Y]),
    "matmul_family": (lambda c, x, y: (x @ y, ta.bmm(x, y), x[0] @ y[0, :, 0],
                                       ta.baddbmm(x @ y, x, y, beta=0.5, alpha=2.0)), [X, Y]),
    "addmm_addmv_addr": (lambda c, m, a, b, v: (ta.addmm(m, a, b), ta.addmv(m[0], a, v),
                                                ta.addr(m, v[:4], b[0])),
                         [(4, 4), (4, 5), (5, 4), (5,)]),
    "outer_inner_dot_mv_cross": (lambda c, a, b, m: (ta.outer(a, b), ta.inner(a, b),
                                                     ta.dot(a, b), m.mv(a),
                                                     ta.cross(m[:, :3], m[:, 1:4], dim=1)),
                                 [(5,), (5,), (4, 5)]),
    "addcmul_addcdiv_lerp": (lambda c, x, y, z: (ta.addcmul(x, y, z, value=0.5),
                                                 ta.addcdiv(x, y, z.exp(), value=2.0),
                                                 ta.lerp(x, y, z.sigmoid())), [X, X, X]),
    "xlogy_float_power": (lambda c, x, y: (ta.xlogy(x.abs(), y.exp()),
                                           ta.float_power(x.abs() + 0.5, 1.5)), [X, X]),
    "binary_extras": (lambda c, x, y: (ta.fmax(x, y), ta.fmin(x, y), ta.logaddexp2(x, y),
                                       ta.hypot(x, y), ta.copysign(x, y), ta.atan2(x, y)),
                      [X, X]),
    "unary_extras": (lambda c, x: (x.sinc(), ta.logit(x.sigmoid() * 0.9), x.deg2rad(),
                                   x.rad2deg(), x.signbit(), x.fix(), x.positive()), [X]),
    "comparisons": (lambda c, x, y: (x > y, x.isclose(y, atol=0.5), ta.allclose(x, x),
                                     x.equal(x), (x > 0).logical_xor(y > 0), x.isfinite()),
                    [X, X]),
    "counting": (lambda c, x: ((x > 0).count_nonzero(dim=1), (x > 0).nonzero(),
                               ta.argwhere(x > 1), (x > 0).all(dim=2), (x > 0).any()), [X]),
    "unique": (lambda c, x: (x.round().unique(), x.round().unique(return_counts=True,
                                                                  return_inverse=True)), [X]),
    "searchsorted_bucketize": (lambda c, x: (ta.searchsorted(c(np.array([-1.0, 0.0, 1.0])), x),
                                             ta.bucketize(x, c(np.array([-0.5, 0.5])))), [X]),
    "softmax_family": (lambda c, x: (F.softmax(x, dim=0), F.log_softmax(x, dim=1),
                                     F.softmin(x, dim=-1), F.glu(x, dim=1)), [X]),
    "activations": (lambda c, x: (F.relu6(x * 4), F.gelu(x), F.gelu(x, approximate="tanh"),
                                  F.silu(x), F.mish(x), F.hardswish(x), F.softplus(x, beta=2),
                                  F.elu(x), F.selu(x), F.celu(x), F.leaky_relu(x, 0.2),
                                  F.logsigmoid(x), F.softsign(x), F.hardtanh(x)), [X]),
    "cross_entropy_options": (lambda c, z: (
        F.cross_entropy(z, c(TARGET)),
        F.cross_entropy(z, c(TARGET), label_smoothing=0.1, reduction="sum"),
        F.cross_entropy(z, c(np.array([1, -100, 4, 3, -100, 1]))),
        F.cross_entropy(z, c(TARGET), weight=c(np.linspace(0.5, 2, 5, dtype=np.float32))),
        F.cross_entropy(z, c(PROBS / PROBS.sum(1, keepdims=True), np.float32))), [(6, 5)]),
    "nll_kl": (lambda c, z, t: (F.nll_loss(F.log_softmax(z, dim=1), c(TARGET)),
                                F.kl_div(F.log_softmax(z, dim=1), F.softmax(t, dim=1),
                                         reduction="batchmean"),
                                F.kl_div(F.log_softmax(z, dim=1), F.log_softmax(t, dim=1),
                                         log_target=True)), [(6, 5), (6, 5)]),
    "regression_losses": (lambda c, a, b: (F.mse_loss(a, b), F.l1_loss(a, b, reduction="sum"),
                                           F.smooth_l1_loss(a, b, beta=0.5),
                                           F.huber_loss(a, b, delta=0.7)), [X, X]),
    "bce": (lambda c, z, p: (F.binary_cross_entropy(z.sigmoid(), p.sigmoid()),
                             F.binary_cross_entropy_with_logits(
                                 z, p.sigmoid(), pos_weight=c(np.float32(2.0))),
                             F.binary_cross_entropy_with_logits(z, p.sigmoid(),
                                                                reduction="none")),
            [(6, 5), (6, 5)]),
    "norms_functional": (lambda c, x, w, b: (F.layer_norm(x, (5,), w, b),
                                             F.rms_norm(x, (5,), w),
                                             F.group_norm(x.reshape(3, 4, 5), 2),
                                             F.batch_norm(x.reshape(12, 5), None, None,
                                                          training=True)),
                         [X, (5,), (5,)]),
    "sdpa": (lambda c, q, k, v: (F.scaled_dot_product_attention(q, k, v),
                                 F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                 F.scaled_dot_product_attention(q, k, v, attn_mask=c(KEEP)),
                                 F.attention_weights(q, k, is_causal=True)),
             [(2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8)]),
    "one_hot_embedding": (lambda c, w: (F.one_hot(c(TARGET), 5),
                                        F.embedding(c(TARGET), w, padding_idx=1)), [(5, 3)]),
    "rotary": (lambda c, x: F.apply_rotary(x, *F.rotary_tables(8, 4, backend=x.backend)),
               [(2, 4, 8)]),
    "long_sums": (lambda c, x: (x.sum(0), x.mean(0), x.var(0), x.std(0), x.norm(dim=0),
                                x.cumsum(0)[-1], F.softmax(x, dim=0)[0], x.logsumexp(0)),
                  [np.random.default_rng(3).uniform(0, 2, (8192, 4))]),
}


def _nans(c, x):
    return x.masked_fill(c(MASK), float("nan"))


def _setitem(x, index, v):
    y = x.clone()
    y[index] = v
    return y


def _values(spec, i):
    rng = np.random.default_rng(3000 + i)
    return [s if isinstance(s, np.ndarray) else rng.standard_normal(s) for s in spec]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", list(API))
def test_api_on_cupy_matches_numpy(name, dtype):
    fn, spec = API[name]
    problems = compare(fn, _values(spec, list(API).index(name)), DTYPES[dtype], name)
    assert not problems, "\n".join(problems)


# ---- modules, optimizers, files -----------------------------------------------------------------

def _pair(make, dtype="float32"):
    """The same module on NumPy and on CuPy (weights copied), in dtype."""
    ta.manual_seed(0)
    on_np = make()
    on_cp = make()
    on_cp.load_state_dict(on_np.state_dict())
    on_cp.to("cupy")
    if dtype == "float16":
        on_np.half()
        on_cp.half()
    return on_np, on_cp


MODULES = {
    "mha": (lambda: nn.MultiheadAttention(16, 4, batch_first=True),
            lambda m, c, x: m(x, x, x, key_padding_mask=c(np.array([[False] * 5 + [True]] * 2)),
                              need_weights=True), (2, 6, 16)),
    "mha_causal": (lambda: nn.MultiheadAttention(16, 2, batch_first=True),
                   lambda m, c, x: m(x, x, x, attn_mask=c(~np.tril(np.ones((6, 6), bool))),
                                     need_weights=False)[0], (2, 6, 16)),
    "encoder_layer": (lambda: nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0,
                                                         batch_first=True),
                      lambda m, c, x: m(x, is_causal=True,
                                        src_mask=c(~np.tril(np.ones((6, 6), bool)))), (2, 6, 16)),
    "decoder_layer": (lambda: nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0,
                                                         batch_first=True, norm_first=True),
                      lambda m, c, x: m(x, x * 2), (2, 6, 16)),
    "causal_self_attention": (lambda: nn.CausalSelfAttention(16, 4),
                              lambda m, c, x: m(x), (2, 6, 16)),
    "norms_train": (lambda: nn.Sequential(nn.BatchNorm1d(16), nn.GroupNorm(4, 16),
                                          nn.LayerNorm(16), nn.RMSNorm(16)),
                    lambda m, c, x: m(x), (8, 16)),
    "batchnorm_eval": (lambda: nn.BatchNorm1d(16).eval(), lambda m, c, x: m(x), (8, 16)),
    "mlp": (lambda: nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16, bias=False),
                                  nn.Tanh()), lambda m, c, x: m(x), (4, 16)),
    "tiny_transformer": (lambda: nn.TinyTransformer(vocab_size=11, d_model=32, n_heads=2,
                                                    n_layers=2, max_len=16),
                         lambda m, c, x: m(c(np.arange(24).reshape(2, 12) % 11)), None),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", list(MODULES))
def test_modules_on_cupy_match_numpy(name, dtype):
    make, call, shape = MODULES[name]
    models = _pair(make, dtype)
    x = np.random.default_rng(4).standard_normal(shape or (1,)).astype(dtype)
    results = []
    for backend, model in zip(("numpy", "cupy"), models, strict=True):
        def const(v, backend=backend):
            return ta.tensor(v, backend=backend)
        xt = ta.tensor(x, requires_grad=True, backend=backend)
        out = call(model, const, xt)
        outs = [t for t in (out if isinstance(out, tuple) else (out,)) if t is not None]
        loss = sum((t.float() ** 2).mean() for t in outs if t.requires_grad)
        loss.backward()
        grads = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
        buffers = {n: b.numpy() for n, b in model.named_buffers()}
        results.append(([t.numpy() for t in outs], grads, buffers,
                        None if xt.grad is None else xt.grad.numpy()))
    (want_out, want_g, want_b, want_x), (got_out, got_g, got_b, got_x) = results
    problems = [mismatch(g, w, dtype, f"{name} out {i}")
                for i, (g, w) in enumerate(zip(got_out, want_out, strict=True))]
    assert got_g.keys() == want_g.keys()
    problems += [mismatch(got_g[k], want_g[k], dtype, f"{name} grad {k}") for k in want_g]
    problems += [mismatch(got_b[k], want_b[k], dtype, f"{name} buffer {k}") for k in want_b]
    if want_x is not None:
        problems.append(mismatch(got_x, want_x, dtype, f"{name} input grad"))
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems)


OPTIMIZERS = {
    "sgd_nesterov": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                         weight_decay=0.01),
    "sgd_dampening_maximize": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.5, dampening=0.3,
                                                   maximize=True),
    "adam": lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.1),
    "adamw_amsgrad": lambda ps: optim.AdamW(ps, lr=0.01, amsgrad=True),
    "adamax": lambda ps: optim.Adamax(ps, lr=0.01),
    "nadam": lambda ps: optim.NAdam(ps, lr=0.01),
    "radam": lambda ps: optim.RAdam(ps, lr=0.01),
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    "adagrad": lambda ps: optim.Adagrad(ps, lr=0.1),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizers_on_cupy_match_numpy(name, dtype):
    """Three steps from the same weights and gradients (set, not computed, so both backends
    step from identical numbers), then the weights and the saved state agree."""
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((2, 7, 9)).astype(dtype)
    grads = rng.standard_normal((3, 2, 7, 9)).astype(dtype)
    finals = []
    for backend in ("numpy", "cupy"):
        params = [ta.tensor(w0[i], requires_grad=True, backend=backend) for i in range(2)]
        opt = OPTIMIZERS[name](params)
        for step in range(3):
            for i, p in enumerate(params):
                p.grad = ta.tensor(grads[step, i], backend=backend)
            opt.step()
        state = opt.state_dict()["state"]  # {position: {name: tensor}}, as torch's
        finals.append(([p.numpy() for p in params],
                       {f"{i}.{k}": v.numpy() for i, entry in state.items()
                        for k, v in entry.items()}))
    (want_w, want_s), (got_w, got_s) = finals
    problems = [mismatch(g, w, dtype, f"weight {i}") for i, (g, w) in
                enumerate(zip(got_w, want_w, strict=True))]
    assert got_s.keys() == want_s.keys()
    problems += [mismatch(got_s[k], want_s[k], want_s[k].dtype if want_s[k].dtype.kind == "f"
                          else dtype, f"state {k}") for k in want_s]
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gradient_clipping_on_cupy(dtype):
    norms = []
    for backend in ("numpy", "cupy"):
        ps = [ta.tensor(np.full((300,), 1.0, dtype), requires_grad=True, backend=backend)
              for _ in range(2)]
        for p in ps:
            p.grad = ta.tensor(np.full((300,), 300.0, dtype), backend=backend)
        total = nn.utils.clip_grad_norm_(ps, max_norm=1.0)
        norms.append((float(total), [p.grad.numpy() for p in ps]))
    assert norms[1][0] == pytest.approx(norms[0][0], rel=1e-3)
    assert norms[1][0] == pytest.approx(300 * math.sqrt(600), rel=1e-3)
    for g, w in zip(norms[1][1], norms[0][1], strict=True):
        assert mismatch(g, w, dtype, "clipped grad") is None


def test_save_and_load_from_the_device(tmp_path):
    """A state dict saved from the device loads into a NumPy model (and back), the optimizer's
    state too; both then give the same logits."""
    on_np, on_cp = _pair(lambda: nn.TinyTransformer(vocab_size=11, d_model=32, n_heads=2,
                                                    n_layers=1, max_len=16))
    opt = optim.AdamW(on_cp.parameters(), lr=0.01)
    ids = np.arange(10).reshape(1, 10)
    loss = on_cp(ta.tensor(ids, backend="cupy")).float().pow(2).mean()
    loss.backward()
    opt.step()
    ta.save({"model": on_cp.state_dict(), "opt": opt.state_dict()}, tmp_path / "ck.pt")
    loaded = ta.load(tmp_path / "ck.pt")
    on_np.load_state_dict(loaded["model"])
    opt_np = optim.AdamW(on_np.parameters(), lr=0.01)
    opt_np.load_state_dict(loaded["opt"])
    got = on_cp(ta.tensor(ids, backend="cupy")).numpy()
    want = on_np(ta.tensor(ids)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    on_cp.load_state_dict(on_np.state_dict())
    assert all(p.backend.name == "cupy" for p in on_cp.parameters())


def test_greedy_generation_on_cupy_matches_numpy():
    on_np, on_cp = _pair(lambda: nn.TinyTransformer(vocab_size=11, d_model=32, n_heads=2,
                                                    n_layers=2, max_len=32))
    prompt = np.array([[1, 2, 3, 4]])
    outs = [np.asarray(m.generate(ta.tensor(prompt, backend=b), 12, greedy=True).numpy())
            for m, b in ((on_np, "numpy"), (on_cp, "cupy"))]
    np.testing.assert_array_equal(outs[1], outs[0])
    ta.manual_seed(3)
    sampled = on_cp.generate(ta.tensor(prompt, backend="cupy"), 12, temperature=0.8, top_k=4)
    assert sampled.shape == (1, 16) and 0 <= int(sampled.min()) and int(sampled.max()) < 11
