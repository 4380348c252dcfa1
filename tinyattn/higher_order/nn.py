"""The graph VJPs of the other fused nn ops and of linear algebra: rms_norm, rotary,
dropout, binary_cross_entropy, flash_attention; inv, det, slogdet, solve, cholesky,
solve_triangular. Each is its op's VJP (tinyattn/ops/nn.py, attention.py, linalg.py,
functional._BCE) written again with tensor ops whose own graph VJPs are core's or these, so
third derivatives work too.

Where an op saves no input its formula needs, the input is recomputed or rebuilt from what it
saved: flash_attention recomputes the probabilities from q, k, v (one (..., T, S) matrix, the
memory the fused op avoids: a price of gradients of gradients only); solve_triangular rebuilds
its triangle T on the saved array with A's node, masked to the triangle (the entries outside it
get no gradient, as in the op). det and slogdet need A⁻¹: at a singular A a GraphError says so
(the array VJP's cofactor form has no graph form here)."""

import numpy

from ..errors import GraphError, LinAlgError
from ..ops.op import quiet
from .base import call, const, masked, sum_dims, swap_last, tensor_on

_BCE_EPS = float(numpy.float32(1e-12))  # functional._BCE_EPS: torch's float32 1e-12


def _norm_dims(ndim, n_dims):
    return tuple(range(ndim - n_dims, ndim)), tuple(range(ndim - n_dims))


def _rms_norm(c):
    x, _, weight = c.saved
    norm, batch = _norm_dims(x.ndim, c.params.get("n_dims", 1))
    xt, g = c.input(0), c.g
    r = ((xt * xt).mean(dim=norm, keepdim=True) + c.params.get("eps", 1e-5)) ** -0.5
    xh = xt * r
    gh = g * c.input(1) if weight is not None else g
    gx = r * (gh - xh * (gh * xh).mean(dim=norm, keepdim=True)) if c.need(0) else None
    gw = sum_dims(g * xh, batch) if weight is not None and c.need(1) else None
    return (gx, gw)[:len(c.node.parents)]


def _rotary(c):
    cos, sin = c.saved
    inter = c.params.get("interleaved", False)
    return call("rotary", c.g, const(c, cos), const(c, -sin), interleaved=inter), None, None


def _dropout(c):
    return (c.g * const(c, c.saved[0]),)


def _binary_cross_entropy(c):
    x_arr = c.saved[0]
    x, t, g = c.input(0), c.input(1), c.g
    with quiet():
        wide = x_arr.astype(numpy.promote_types(x_arr.dtype, numpy.float32))
        keep = wide * (1 - wide) > _BCE_EPS
        gx = g * (x - t) / call("where", c.be.xp.asarray(keep), x * (1 - x), _BCE_EPS) \
            if c.need(0) else None
        gt = g * ((1 - x).log() - x.log()) if c.need(1) else None
    return gx, gt


# ---- flash attention ---------------------------------------------------------------------------


def _unbroadcast(c, i):
    """Input i as a Tensor at its own shape: the op saved it broadcast to the common batch
    dims (a view), whose entries along a stretched dim are all the same."""
    arr, shape = c.saved[i], tuple(c.node.parents[i].shape) if c.need(i) else c.saved[i].shape
    extra = arr.ndim - len(shape)
    index = (0,) * extra + tuple(slice(0, 1) if n == 1 else slice(None) for n in shape)
    return tensor_on(arr[index], c.be, c.node.parents[i], c._version(i))


def _flash_attention(c):
    q, k, v = (_unbroadcast(c, i) for i in range(3))
    keep, g = c.saved[5], c.g
    scale = c.params.get("scale", 1.0)
    p = call("scaled_masked_softmax", q @ swap_last(k), None if keep is None else
             const(c, keep), scale=scale, causal=c.params.get("causal", False))
    dp = g @ swap_last(v)
    ds = (p * (dp - (dp * p).sum(dim=-1, keepdim=True))) * scale
    return (ds @ k if c.need(0) else None, swap_last(ds) @ q if c.need(1) else None,
            swap_last(p) @ g if c.need(2) else None, None)


# ---- linear algebra ----------------------------------------------------------------------------


def _inv_t(a, name):
    """A⁻ᵀ = (Aᵀ)⁻¹, recorded (an inv node): a GraphError at a singular A."""
    try:
        return call("inv", swap_last(a))
    except LinAlgError:
        raise GraphError(f"create_graph: {name}'s gradient of its gradient needs A⁻¹, and A is "
                         "singular") from None


def _as_matrix_scale(g):
    return call("reshape", g, shape=(*g.shape, 1, 1))


def _inv(c):
    xt = swap_last(c.out())
    return (-(xt @ c.g @ xt),)


def _det(c):
    return (_as_matrix_scale(c.g * c.out()) * _inv_t(c.input(0), "det"),)


def _slogdet(c):
    g1 = call("getitem", c.g, index=1)
    return (_as_matrix_scale(g1) * _inv_t(c.input(0), "slogdet"),)


def _solve(c):
    gb = call("solve", swap_last(c.input(0)), c.g)
    return (-(gb @ swap_last(c.out())) if c.need(0) else None), gb


def _tri_mask(n, upper, k=0):
    ones = numpy.ones((n, n), dtype=bool)
    return numpy.triu(ones, k) if upper else numpy.tril(ones, k)


def _triangle(c, upper, unit):
    """T, the op's triangle of A, on the array it saved, with A's node: A's entries outside
    the triangle (and the diagonal, if unitriangular) masked, so that they get no gradient."""
    t = c.saved[0]
    n = t.shape[-1]
    a = tensor_on(t, c.be, c.node.parents[0])
    if not unit:
        return masked(c, _tri_mask(n, upper), a)
    eye = c.be.xp.eye(n, dtype=t.dtype)
    return call("where", c.be.xp.asarray(_tri_mask(n, upper, 1 if upper else -1)), a,
                const(c, eye))


def _solve_triangular(c):
    upper, left = c.params["upper"], c.params.get("left", True)
    unit = c.params.get("unitriangular", False)
    tri = _triangle(c, upper, unit)
    gb = call("solve_triangular", swap_last(tri), c.g, upper=not upper, left=left)
    if not c.need(0):
        return None, gb
    xt = swap_last(c.out())
    ga = -(gb @ xt) if left else -(xt @ gb)
    k = (1 if upper else -1) if unit else 0
    return masked(c, _tri_mask(ga.shape[-1], upper, k), ga), gb


def _cholesky(c):
    low, gl = c.out(), c.g
    if c.params.get("upper", False):
        low, gl = swap_last(low), swap_last(gl)
    n = low.shape[-1]
    phi = masked(c, _tri_mask(n, False), swap_last(low) @ gl)
    phi = 0.5 * (phi + swap_last(masked(c, _tri_mask(n, False, -1), phi)))
    lt = swap_last(low)
    left = call("solve_triangular", lt, phi, upper=True)  # L⁻ᵀ Φ
    return (swap_last(call("solve_triangular", lt, swap_last(left), upper=True)),)


VJPS = {
    "rms_norm": _rms_norm, "rotary": _rotary, "dropout": _dropout,
    "flash_attention": _flash_attention, "inv": _inv, "det": _det, "slogdet": _slogdet,
    "solve": _solve, "solve_triangular": _solve_triangular, "cholesky": _cholesky,
    "binary_cross_entropy": _binary_cross_entropy,  # (functional._BCE: outside the registry)
}
