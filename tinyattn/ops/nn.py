"""Neural-network ops, each one fused node: layer_norm, rms_norm, gelu, embedding, dropout,
rotary.

Fused means the forward and the VJP are written out by hand instead of being composed from
smaller ops: fewer nodes, fewer temporaries, and the formulas a textbook gives. GELU's
formulas live in the backend (`Backend.gelu_forward` / `gelu_backward`), which the CuPy backend
runs as one elementwise kernel each.
"""

import numbers

import numpy as np

from ..errors import DTypeError, ShapeError, fmt_shape
from .op import op, quietly, wide
from .samples import case, const, vals


@op("layer_norm", "gx = rstd * (ĝ - mean(ĝ) - x̂ * mean(ĝ * x̂)), ĝ = g * w; gw = Σ g x̂; gb = Σ g",
    grads=("gx", "gw", "gb"),
    fused=True, saves={1: 2}, fresh=True,
    samples=[case((2, 3, 4), (4,), (4,)), case((3, 4), None, None),
             case((2, 3, 4), (3, 4), (3, 4), n_dims=2), case((2, 5), (5,), None, eps=1e-3)])
@quietly  # a row holding inf: NaN (inf - inf), x² past the dtype's range: inf, as torch
def layer_norm(be, x, weight=None, bias=None, n_dims=1, eps=1e-5):
    """out = (x - mean) / √(var + eps) * weight + bias over the last n_dims dims"""
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.shape != x.shape[x.ndim - n_dims:]:
            raise ShapeError(f"layer_norm: {name} has shape {fmt_shape(p.shape)} but the "
                             f"normalized shape is {fmt_shape(x.shape[x.ndim - n_dims:])}")
    # written with in-place steps: two temporaries of x's size, not five; float16 in float32
    half, x = x.dtype == np.float16, wide(x)
    xhat = x - be.row_sum(x, n_dims, mean=True)  # (row means: Backend.row_sum)
    out = xhat * xhat
    rstd = 1 / be.xp.sqrt(be.row_sum(out, n_dims, mean=True) + eps)
    xhat *= rstd
    be.xp.multiply(xhat, 1 if weight is None else weight, out=out)
    if bias is not None:
        out += bias
    return (out.astype(np.float16) if half else out), (xhat, rstd, weight, bias is not None)


@layer_norm.defvjp
@quietly
def layer_norm_vjp(be, g, saved, n_dims=1, eps=1e-5):
    xhat, rstd, weight, has_bias = saved
    xp = be.xp
    batch = tuple(range(xhat.ndim - n_dims))
    tmp = g * xhat  # (float16 in: xhat is float32, and so is every step from here)
    gw = None if weight is None else tmp.sum(axis=batch)
    gb = g.sum(axis=batch, dtype=xhat.dtype) if has_bias else None
    gx = wide(g * weight) if weight is not None else g.astype(xhat.dtype)  # ĝ, to gx in place
    xp.multiply(gx, xhat, out=tmp)
    mean_gx = be.row_sum(tmp, n_dims, mean=True)
    gx -= be.row_sum(gx, n_dims, mean=True)
    xp.multiply(xhat, mean_gx, out=tmp)
    gx -= tmp
    gx *= rstd
    return gx, gw, gb


@op("rms_norm", "gx = (ĝ - x̂ * mean(ĝ * x̂)) / rms, ĝ = g * w, x̂ = x / rms; gw = Σ g x̂",
    grads=("gx", "gw"), fused=True, saves={0: 0, 1: 2}, fresh=True,
    samples=[case((2, 3, 4), (4,)), case((3, 4), None), case((2, 3, 4), (3, 4), n_dims=2),
             case((2, 5), (5,), eps=1e-3)])
@quietly  # (as layer_norm)
def rms_norm(be, x, weight=None, n_dims=1, eps=1e-5):
    """out = x / √(mean(x²) + eps) * weight over the last n_dims dims"""
    if weight is not None and weight.shape != x.shape[x.ndim - n_dims:]:
        raise ShapeError(f"rms_norm: weight has shape {fmt_shape(weight.shape)} but the "
                         f"normalized shape is {fmt_shape(x.shape[x.ndim - n_dims:])}")
    # the steps of x / ((x * x).mean() + eps).sqrt() * weight, in place where they can be
    # (float16: the mean of squares in float32, so rms is float32 and x / rms too)
    rms = be.row_sum(wide(x) ** 2, n_dims, mean=True)
    rms += eps
    be.xp.sqrt(rms, out=rms)
    xhat = x / rms
    out = xhat if weight is None else xhat * weight
    if x.dtype == np.float16:
        out = out.astype(np.float16)
    return out, (x, rms, weight)  # x, not x̂: out may be x̂ itself, free to change


@rms_norm.defvjp
@quietly
def rms_norm_vjp(be, g, saved, n_dims=1, eps=1e-5):
    x, rms, weight = saved
    xhat = x / rms
    batch = tuple(range(xhat.ndim - n_dims))
    gw = None if weight is None else (g * xhat).sum(axis=batch)
    gx = wide(g * weight) if weight is not None else g.astype(xhat.dtype)  # ĝ, to gx in place
    dot = be.row_sum(gx * xhat, n_dims, mean=True)
    gx -= xhat * dot
    gx /= rms
    return gx, gw


@op("gelu", "gx = g * (Φ(x) + x φ(x))  (tanh: its derivative)", fused=True, saves={0: 0},
    fresh=True, samples=[case((3, 4)), case((3, 4), approximate="tanh"),
             case(vals([-8.0, -3.0, -0.5, 0.0, 0.7, 2.6, 6.0]))])
@quietly  # gelu(-inf) = -inf * 0 = NaN, as torch
def gelu(be, x, approximate="none"):
    """out = x Φ(x) = x (1 + erf(x/√2)) / 2; tanh: x (1 + tanh(√(2/π)(x + 0.044715 x³))) / 2"""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if getattr(x, "dtype", None) is None or x.dtype.kind != "f":
        raise DTypeError(f"gelu: needs a floating-point input, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}; convert it with .float()")
    out, s_or_cdf = be.gelu_forward(x, approximate)  # the formulas: Backend.gelu_forward
    return out, (x, s_or_cdf)


@gelu.defvjp
@quietly
def gelu_vjp(be, g, saved, approximate="none"):
    x, s_or_cdf = saved  # σ(2√(2/π)(x + 0.044715 x³)) (tanh form), or Φ(x)
    return (be.gelu_backward(g, x, s_or_cdf, approximate),)


def _check_ids(ids, weight, name="embedding"):
    """The ids of a lookup into the 2-D table `weight`: integers, each a row of it."""
    if getattr(ids, "dtype", None) is None or ids.dtype.kind not in "iu":
        raise DTypeError(f"{name}: ids must be integers, got "
                         f"{getattr(ids, 'dtype', type(ids).__name__)}")
    if weight.ndim != 2:
        raise ShapeError(f"{name}: weight must be (num_embeddings, dim), got "
                         f"{fmt_shape(weight.shape)}")
    n = weight.shape[0]
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise IndexError(f"{name}: id {bad} is out of range for {n} embeddings "
                         f"(valid: 0..{n - 1})")


@op("embedding", "gw = zeros(w.shape); gw[ids] += g (/ count of each id: scale_grad_by_freq)",
    grads=(None, "gw"), nondiff=(0,), saves={0: 0}, fresh=True,
    # (no scale_grad_by_freq sample: that scaled gradient is by design not the function's,
    # which gradcheck would find; tests/nn/test_embedding_max_norm.py checks it against torch)
    samples=[case(const([[0, 2, 2], [1, 0, 4]]), (5, 3)), case(const([3, 3, 3]), (4, 2))])
def embedding(be, ids, weight, scale_grad_by_freq=False):
    """out = weight[ids]: one row of the table per id"""
    _check_ids(ids, weight)
    return weight[ids], (ids, weight.shape)


@embedding.defvjp
def embedding_vjp(be, g, saved, scale_grad_by_freq=False):
    ids, w_shape = saved
    gw = be.xp.zeros(w_shape, dtype=g.dtype)
    flat = ids.reshape(-1)
    be.scatter_add(gw, flat, g.reshape(-1, w_shape[1]))  # repeated ids add up
    if scale_grad_by_freq:  # each row's sum over the batch divided by its id's count (torch's)
        counts = be.xp.bincount(flat, minlength=w_shape[0])
        gw /= be.xp.maximum(counts, 1).astype(gw.dtype)[:, None]
    return None, gw


def embedding_renorm_(be, weight, ids, max_norm, norm_type=2.0):
    """torch.embedding_renorm_: each row of `weight` (written in place) that `ids` looks up
    and whose norm_type-norm is above max_norm, scaled by max_norm / (norm + 1e-7); once per
    row, however often it is looked up."""
    _check_ids(ids, weight)
    xp = be.xp
    rows = xp.unique(ids.reshape(-1))
    if not rows.size:
        return
    picked = wide(weight[rows])  # (float16 in float32, as torch's opmath)
    norms = xp.linalg.norm(picked.astype(xp.float64), ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        scale = (max_norm / (norms[big] + 1e-7)).astype(picked.dtype)  # (a double, then the
        weight[rows[big]] = (picked[big] * scale[:, None]).astype(weight.dtype)  # row's type)


def _seeded(params):
    """graphcheck re-runs dropout with a fixed seed, so its VJP is checked for that draw."""
    return {**params, "seed": 0} if params.get("seed") is None else params


@op("dropout", "gx = g * mask / (1 - p)", float64_params=_seeded,
    samples=[case((4, 5), p=0.5, seed=0), case((2, 3, 4), p=0.1, seed=3), case((3, 2), p=1.0)])
def dropout(be, x, p=0.5, seed=None):
    """out = x * mask / (1 - p), mask ~ Bernoulli(1 - p) (from the backend's generator, or a
    fresh one seeded with `seed`); p = 1 drops everything (zeros, as in torch)"""
    check_dropout_p(p)
    if 0 < p < 1 and x.dtype.kind != "f":  # (p = 0 or 1 fits any dtype: x, or zeros, as torch)
        raise DTypeError(f"dropout: needs a floating-point input, got {x.dtype} (torch's rule "
                         f"too: 1/(1-p) = {1 / (1 - p):.3g} does not fit it); convert it with "
                         ".float()")
    xp = be.xp
    keep = be.rand(x.shape, "float32", seed=seed) >= p  # (p = 1: none kept)
    # kept entries are scaled up so that the expected sum is unchanged; picked with where, not
    # a 0/1 mask times the scale: in float16, p near 1 makes 1/(1-p) inf, and 0 * inf is NaN
    with np.errstate(over="ignore"):
        scale = xp.asarray(1 / (1 - p) if p < 1 else 0, dtype=x.dtype)
    scaled = xp.where(keep, scale, xp.zeros((), dtype=x.dtype))
    return x * scaled, (scaled,)


def check_dropout_p(p):
    """torch's rule: a dropout probability is a number in [0, 1] (checked even in eval mode)."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p <= 1:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p!r}")


@dropout.defvjp
def dropout_vjp(be, g, saved, p=0.5, seed=None):
    (scaled,) = saved
    return (g * scaled,)


def _tables(t, half, offset=0):
    """cos and sin of RoPE's angles for positions offset..offset+t-1: two (t, half) constants
    (the sample cases' tables; nn.RotaryEmbedding makes the real ones)."""
    angles = np.outer(np.arange(offset, offset + t), 1.0 / 10000.0 ** (np.arange(half) / half))
    return const(np.cos(angles)), const(np.sin(angles))


@op("rotary", "gx = rotary(g, cos, -sin): the rotation by -θ", grads=("gx", None, None),
    nondiff=(1, 2), fused=True, saves={1: 0, 2: 1},
    samples=[case((2, 3, 5, 8), *_tables(5, 4)), case((5, 8), *_tables(5, 4, offset=7)),
             case((2, 4, 6), *_tables(4, 3), interleaved=True), case((1, 2), *_tables(1, 1))])
def rotary(be, x, cos, sin, interleaved=False):
    """out = (a cos - b sin, b cos + a sin) for each channel pair (a, b) of x (..., T, dim)"""
    check_rotary(x.shape, cos.shape, sin.shape)
    return _rotate(be.xp, x, cos, sin, interleaved, sign=1), (cos, sin)


@rotary.defvjp
def rotary_vjp(be, g, saved, interleaved=False):
    cos, sin = saved
    # the rotation is orthogonal: its transpose is the rotation by -θ (cos the same, sin negated)
    return _rotate(be.xp, g, cos, sin, interleaved, sign=-1), None, None


def check_rotary(x_shape, cos_shape, sin_shape):
    """x (..., T, dim) with an even dim, cos and sin (T, dim/2): else a ShapeError naming them."""
    half = x_shape[-1] // 2 if x_shape else 0
    if len(x_shape) < 2 or x_shape[-1] % 2 or cos_shape != (x_shape[-2], half) or \
            sin_shape != cos_shape:
        raise ShapeError(f"apply_rotary: x (..., T, dim) with even dim needs cos and sin of "
                         f"shape (T, dim/2), got x {fmt_shape(x_shape)}, cos "
                         f"{fmt_shape(cos_shape)}, sin {fmt_shape(sin_shape)}")


def _rotate(xp, x, cos, sin, interleaved, sign):
    """(a cos - s b sin, b cos + s a sin) for the pairs (a, b) of x, (i, i + dim/2) or,
    interleaved, (2i, 2i+1); s = sign. As x * [cos, cos] + [b, a] * [-s sin, s sin]: NumPy
    runs whole rows fast and short strided halves slowly, so only the swap touches halves."""
    half = x.shape[-1] // 2
    out = xp.empty(x.shape, dtype=xp.result_type(x, cos, sin))  # (..., T, dim)
    swapped = xp.empty_like(out)  # [b, a]: each pair's partner in its place
    if interleaved:
        swapped[..., 0::2], swapped[..., 1::2] = x[..., 1::2], x[..., 0::2]
    else:
        swapped[..., :half], swapped[..., half:] = x[..., half:], x[..., :half]
    xp.multiply(x, _widen(xp, cos, cos, interleaved), out=out)  # (..., T, dim)
    swapped *= _widen(xp, -sign * sin, sign * sin, interleaved)
    out += swapped
    return out


def _widen(xp, first, second, interleaved):
    """Two (T, dim/2) tables as one (T, dim): `first` at each pair's first channel, `second`
    at its second."""
    if interleaved:
        return xp.stack([first, second], axis=-1).reshape(first.shape[0], -1)
    return xp.concatenate([first, second], axis=-1)


OPS = (layer_norm, rms_norm, gelu, embedding, dropout, rotary)
