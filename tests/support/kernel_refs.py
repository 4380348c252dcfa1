"""NumPy replays of the CUDA kernels in backends/kernels/, one function per kernel.

Each function here does what its kernel does, in the same order: the same launch choice, the
same split of a row over lanes or threads, the same butterfly shuffles, the same online (m, l)
recurrence and merges, the same tiles and the same compute dtype (float32 for float16/float32
data, float64 for float64; e^(s - m) as exp2((s - m) log2 e), as the softmax kernels
compute it). What cannot be replayed bit for bit is named where it happens
(exp/exp2/erf come from NumPy, not CUDA's libm, and nvcc contracts multiply-adds to FMA where
NumPy rounds twice; a dot product inside a flash tile is a NumPy matmul; the kernel adds dQ
over key tiles with atomics, in no fixed order). The tests hold these replays to the
readable references of backends/base.py and flash.py on the CPU, so a kernel bug in the
algorithm (a wrong merge, a lost tile, a NaN on a masked row) shows up without a
GPU; the GPU tests then hold the kernels to the same references.

The launch choices (`softmax_launch`, `FLASH_TILES`) are also what CupyBackend uses, so the
replay and the kernel can never disagree about which algorithm runs.
"""

import math

import numpy as np

from tinyattn.backends.cuda_launch import (  # noqa: F401 - the launch facts, for the tests
    BLOCK_UNROLL,
    FLASH_THREADS,
    FLASH_TILES,
    LOG2E,
    SOFTMAX_MAX_COLS,
    WARP,
    WARP_BLOCK_THREADS,
    WARP_ROWS_MAX,
    acc_dtype,
    next_pow2,
    softmax_launch,
)

NEG_INF = float("-inf")
# np.where evaluates both branches; the branch not taken may overflow or be -inf - -inf
_quiet = np.errstate(invalid="ignore", over="ignore", divide="ignore")
# ---- shared pieces ---------------------------------------------------------------------------

def _rows_and_scores(x, keep, scale, causal):
    """x (..., n_q, n) -> masked, scaled scores as (R, n) in the compute dtype, and the
    per-row limit of readable columns (causal: j <= i). Masked scores are -inf."""
    a = acc_dtype(x.dtype)
    n_q = x.shape[-2] if x.ndim >= 2 else 1
    n = x.shape[-1]
    s = x.astype(a).reshape(-1, n) * a.type(scale)
    allowed = np.ones(s.shape, dtype=bool)
    limit = _row_limits(s.shape[0], n, n_q, causal)
    allowed &= np.arange(n)[None, :] < limit[:, None]
    if keep is not None:
        allowed &= np.broadcast_to(keep, x.shape).reshape(-1, n)
    return np.where(allowed, s, a.type(NEG_INF)), limit


def _row_limits(n_rows, n, n_q, causal):
    if not causal:
        return np.full(n_rows, n)
    return np.minimum(n, np.arange(n_rows) % n_q + 1)


def _lanes(a, width, per_lane, fill, vec=1):
    """(R, n) -> (R, width, per_lane): [r, lane, k * vec + t] is column
    (lane + k * width) * vec + t (fill past n): a lane's vectors of `vec` columns."""
    r, n = a.shape
    padded = np.full((r, width * per_lane), fill, dtype=a.dtype)
    padded[:, :n] = a
    return (padded.reshape(r, per_lane // vec, width, vec).transpose(0, 2, 1, 3)
            .reshape(r, width, per_lane))


def _unlanes(a, n, vec=1):
    """The inverse of _lanes: (R, width, per_lane) -> (R, n)."""
    r, width, per_lane = a.shape
    return (a.reshape(r, width, per_lane // vec, vec).transpose(0, 2, 1, 3)
            .reshape(r, width * per_lane)[:, :n])


def _thread_columns(a, threads, vec, fill):
    """(R, n) -> (R, steps, threads, vec): what thread t of a block kernel takes at step k,
    the vector k * threads + t (its columns in order); fill past n."""
    r, n = a.shape
    steps = math.ceil(n / (threads * vec))
    cols = np.full((r, steps * threads * vec), fill, dtype=a.dtype)
    cols[:, :n] = a
    return cols.reshape(r, steps, threads, vec)


def _butterfly(v, op, width):
    """__shfl_xor_sync over `width` lanes (the last axis): v = op(v, v[lane ^ o]) for
    o = width/2, ..., 1. Every lane ends with the same value (op commutes)."""
    lanes = np.arange(v.shape[-1])
    o = width // 2
    while o > 0:
        v = op(v, v[..., lanes ^ o])
        o //= 2
    return v


@_quiet
def _exp_diff(s, m):
    """tinyattn_exp_diff: e^(s - m) = exp2((s - m) log2 e), each step rounded to s's dtype."""
    a = np.result_type(s, m)
    return np.exp2((s - m).astype(a) * a.type(LOG2E)).astype(a)


@_quiet
def _merge(m, l, m2, l2):
    """tinyattn_online_merge: (m, l) (+) (m2, l2), empty pieces (m = -inf) stay (-inf, 0);
    a NaN l stays NaN."""
    mx = np.where(m > m2, m, m2)
    empty = mx == NEG_INF
    safe = np.where(empty, 0, mx).astype(m.dtype)
    l = np.where(empty, 0, l * _exp_diff(m, safe) + l2 * _exp_diff(m2, safe))
    return mx, l.astype(m.dtype)


def _butterfly_ml(m, l, width):
    lanes = np.arange(m.shape[-1])
    o = width // 2
    while o > 0:
        m, l = _merge(m, l, m[..., lanes ^ o], l[..., lanes ^ o])
        o //= 2
    return m, l


def _block_merge_ml(m, l):
    """block_merge_ml: butterfly inside each warp, then warp 0 merges the warps' pairs."""
    r, threads = m.shape
    m, l = _butterfly_ml(m.reshape(r, -1, WARP), l.reshape(r, -1, WARP), WARP)
    wm = np.full((r, WARP), NEG_INF, dtype=m.dtype)
    wl = np.zeros((r, WARP), dtype=l.dtype)
    wm[:, :threads // WARP], wl[:, :threads // WARP] = m[:, :, 0], l[:, :, 0]
    wm, wl = _butterfly_ml(wm, wl, WARP)
    return wm[:, 0], wl[:, 0]


def _block_sum(s):
    """block_sum: butterfly inside each warp, then warp 0 adds the warps' sums."""
    r, threads = s.shape
    s = _butterfly(s.reshape(r, -1, WARP), np.add, WARP)
    w = np.zeros((r, WARP), dtype=s.dtype)
    w[:, :threads // WARP] = s[:, :, 0]
    return _butterfly(w, np.add, WARP)[:, 0]


@_quiet
def _online_push(m, l, s):
    """tinyattn_online_push, elementwise: a new max rescales l, -inf adds nothing, NaN makes
    l NaN."""
    new = s > m
    grown = np.where(new, l * _exp_diff(m, np.where(new, s, 0).astype(s.dtype)) + 1, l)
    grown = np.where(~new & (s != NEG_INF), l + _exp_diff(s, np.where(m == NEG_INF, 0, m)
                                                          .astype(m.dtype)), grown)
    return np.where(new, s, m), grown.astype(l.dtype)


# ---- softmax forward -------------------------------------------------------------------------

def softmax_forward(x, scale=1.0, causal=False, keep=None, vec=1):
    """What CupyBackend's softmax kernels compute for x (..., n): softmax(scale x) over the last
    axis with keys j > i (causal; i = row index within the last-but-one axis) and keep == False
    masked; fully masked rows give zeros, rows with a NaN score all NaN. vec: the values per
    load the launch uses (cuda_launch.softmax_launch)."""
    s, _ = _rows_and_scores(x, keep, scale, causal)
    launch = softmax_launch(x.shape[-1], vec)
    if launch[0] == "warp":
        y = _softmax_forward_warp(s, launch[1], launch[2], vec)
    else:
        y = _softmax_forward_block(s, launch[1], vec)
    return y.astype(x.dtype).reshape(x.shape)


@_quiet
def _softmax_forward_warp(s, per_lane, width, vec=1):
    """softmax_forward_warp: each lane's max and sum over its registers in order, then
    butterflies over the `width` lanes of the row."""
    v = _lanes(s, width, per_lane, NEG_INF, vec)  # (R, width, E)
    m = _butterfly(v.max(axis=-1), np.maximum, width)  # (R, width), equal; NaN propagates
    m_safe = np.where(m == NEG_INF, 0, m).astype(m.dtype)[..., None]
    e = _exp_diff(v, m_safe)
    l = np.zeros(e.shape[:-1], dtype=e.dtype)
    for k in range(per_lane):  # each lane adds its registers in order
        l = l + e[..., k]
    l = _butterfly(l, np.add, width)[..., None]
    inv = np.where(l == 0, 0, 1 / np.where(l == 0, 1, l)).astype(e.dtype)  # NaN l: NaN
    return _unlanes(e * inv, s.shape[1], vec)


@_quiet
def _softmax_forward_block(s, threads, vec=1):
    """softmax_forward_block: thread t folds its vectors t, t + B, ... (their columns in
    order) into its own (m, l) with the online step, then the block merges the pairs; a second
    pass writes exp(s - m) / l."""
    r = s.shape[0]
    cols = _thread_columns(s, threads, vec, NEG_INF)
    m = np.full((r, threads), NEG_INF, dtype=s.dtype)
    l = np.zeros((r, threads), dtype=s.dtype)
    for k in range(cols.shape[1]):
        for t in range(vec):
            m, l = _online_push(m, l, cols[:, k, :, t])
    m, l = _block_merge_ml(m, l)
    m_safe = np.where(m == NEG_INF, 0, m).astype(m.dtype)[:, None]
    inv = np.where(l == 0, 0, 1 / np.where(l == 0, 1, l)).astype(s.dtype)[:, None]
    return _exp_diff(s, m_safe) * inv


# ---- softmax backward ------------------------------------------------------------------------

@_quiet
def softmax_backward(y, g, scale=1.0, causal=False, vec=1):
    """What CupyBackend's softmax backward kernels compute: scale * (y * (g - sum(g * y))) over
    the last axis; causal rows read only j <= i (y is zero past it) and write zeros there.
    vec: the values per load the launch uses (cuda_launch.softmax_launch)."""
    a = acc_dtype(y.dtype)
    n = y.shape[-1]
    n_q = y.shape[-2] if y.ndim >= 2 else 1
    yr, gr = y.astype(a).reshape(-1, n), g.astype(a).reshape(-1, n)
    limit = _row_limits(yr.shape[0], n, n_q, causal)
    inside = np.arange(n)[None, :] < limit[:, None]
    yr, gr = np.where(inside, yr, 0), np.where(inside, gr, 0)
    launch = softmax_launch(n, vec)
    if launch[0] == "warp":
        _, per_lane, width, _ = launch
        yl, gl = _lanes(yr, width, per_lane, 0, vec), _lanes(gr, width, per_lane, 0, vec)
        dot = np.zeros(yl.shape[:-1], dtype=a)
        for k in range(per_lane):
            dot = dot + yl[..., k] * gl[..., k]
        dot = _butterfly(dot, np.add, width)[..., None]
        gx = _unlanes(yl * (gl - dot) * a.type(scale), n, vec)
    else:
        threads = launch[1]
        prod = _thread_columns(yr * gr, threads, vec, 0)
        part = np.zeros((yr.shape[0], threads), dtype=a)
        for k in range(prod.shape[1]):  # thread t adds its vectors' columns in order
            for t in range(vec):
                part = part + prod[:, k, :, t]
        dot = _block_sum(part)[:, None]
        gx = np.where(inside, yr * (gr - dot) * a.type(scale), 0)
    return gx.astype(y.dtype).reshape(y.shape)


# ---- flash attention -------------------------------------------------------------------------

def _flash_allowed(b_idx, rows, cols, n_q, n_k, causal, keep):
    """flash_allowed for a tile: (N, BQ, BK) bool; keep is broadcast to (N, n_q, n_k)."""
    ok = (rows[:, None] < n_q) & (cols[None, :] < n_k)
    if causal:
        ok = ok & (cols[None, :] <= rows[:, None])
    ok = np.broadcast_to(ok, (len(b_idx),) + ok.shape)
    if keep is not None:
        r = np.clip(rows, 0, n_q - 1)
        c = np.clip(cols, 0, n_k - 1)
        ok = ok & keep[:, r[:, None], c[None, :]]
    return ok


def _padded(a, start, size):
    """Rows start..start+size of a (N, n, D) as float32, zeros past the end (a tile load)."""
    out = np.zeros((a.shape[0], size, a.shape[2]), dtype=np.float32)
    part = a[:, start:start + size]
    out[:, :part.shape[1]] = part
    return out


def flash_forward(q, k, v, scale, causal=False, keep=None):
    """What the flash forward kernel computes: (out (N, T, D) in q's dtype, lse (N, T) float32).

    Per query tile, key tiles stream past with the running max m, each thread's partial row
    sum (16 threads per row, thread tx holding columns tx, tx + 16, ...) and the output
    accumulator, rescaled by alpha = exp(m_old - m_new); the partial sums are added by a width-16
    butterfly at the end. keep: None or bool broadcastable to (N, T, S).
    """
    n, n_q, d = q.shape
    n_k = k.shape[1]
    (bq, bk), _ = FLASH_TILES[d]
    keep = None if keep is None else np.broadcast_to(keep, (n, n_q, n_k))
    f32 = np.float32
    out = np.zeros((n, n_q, d), dtype=f32)
    lse = np.full((n, n_q), NEG_INF, dtype=f32)
    b_idx = np.arange(n)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for q0 in range(0, n_q, bq):
            qt = _padded(q, q0, bq)
            rows = np.arange(q0, q0 + bq)
            m = np.full((n, bq), NEG_INF, dtype=f32)
            lpart = np.zeros((n, bq, 16), dtype=f32)
            acc = np.zeros((n, bq, d), dtype=f32)
            k_end = min(n_k, q0 + bq) if causal else n_k
            for k0 in range(0, k_end, bk):
                kt, vt = _padded(k, k0, bk), _padded(v, k0, bk)
                s = qt @ kt.transpose(0, 2, 1)  # a NumPy matmul, not the kernel's FMA chain
                ok = _flash_allowed(b_idx, rows, np.arange(k0, k0 + bk), n_q, n_k, causal, keep)
                s = np.where(ok, s * f32(scale), f32(NEG_INF))
                m_new = np.maximum(m, s.max(axis=-1))
                m_safe = np.where(m_new == NEG_INF, 0, m_new).astype(f32)
                alpha = np.exp(m - m_safe)
                p = np.exp(s - m_safe[..., None])
                by_thread = p.reshape(n, bq, bk // 16, 16)  # [.., c, tx] = column tx + 16 c
                rs = np.zeros((n, bq, 16), dtype=f32)
                for c in range(bk // 16):
                    rs = rs + by_thread[:, :, c, :]
                lpart = lpart * alpha[..., None] + rs
                acc = acc * alpha[..., None] + p @ vt
                m = m_new
            l = _butterfly(lpart, np.add, 16)[..., 0]
            inv = np.where(l == 0, 0, 1 / np.where(l == 0, 1, l)).astype(f32)  # NaN l: NaN
            rows_in = slice(q0, min(q0 + bq, n_q))
            cut = rows_in.stop - q0
            out[:, rows_in] = (acc * inv[..., None])[:, :cut]
            lse[:, rows_in] = np.where(l == 0, NEG_INF, m + np.log(np.where(l == 0, 1, l)))[:, :cut]
    return out.astype(q.dtype), lse


def flash_backward(q, k, v, out, lse, g, scale, causal=False, keep=None):
    """What the flash backward kernel computes: (gq, gk, gv) in q's dtype.

    Per key tile (dK, dV accumulated in order over the query tiles, causal from the diagonal's
    tile on): P = exp(scale S - lse), dP = dO Vᵀ, dS = P (dP - Drow) with Drow = rowsum(dO O)
    in float32; dQ gets scale dS K from every key tile (the kernel's atomics add these in
    no fixed order; here they are added in key-tile order).
    """
    n, n_q, d = q.shape
    n_k = k.shape[1]
    _, (bq, bk) = FLASH_TILES[d]
    keep = None if keep is None else np.broadcast_to(keep, (n, n_q, n_k))
    f32 = np.float32
    drow = (g.astype(f32) * out.astype(f32)).sum(axis=-1)
    lse_safe = np.where(lse == NEG_INF, 0, lse).astype(f32)
    gq = np.zeros((n, n_q, d), dtype=f32)
    gk = np.zeros((n, n_k, d), dtype=f32)
    gv = np.zeros((n, n_k, d), dtype=f32)
    b_idx = np.arange(n)
    with np.errstate(invalid="ignore", over="ignore"):
        for k0 in range(0, n_k, bk):
            kt, vt = _padded(k, k0, bk), _padded(v, k0, bk)
            cols = np.arange(k0, k0 + bk)
            dk = np.zeros((n, bk, d), dtype=f32)
            dv = np.zeros((n, bk, d), dtype=f32)
            for q0 in range((k0 // bq) * bq if causal else 0, n_q, bq):
                qt, gt = _padded(q, q0, bq), _padded(g, q0, bq)
                rows = np.arange(q0, q0 + bq)
                ls = np.zeros((n, bq), dtype=f32)
                ds_row = np.zeros((n, bq), dtype=f32)
                cut = min(q0 + bq, n_q) - q0
                ls[:, :cut], ds_row[:, :cut] = lse_safe[:, q0:q0 + cut], drow[:, q0:q0 + cut]
                s = qt @ kt.transpose(0, 2, 1)
                dp = gt @ vt.transpose(0, 2, 1)
                ok = _flash_allowed(b_idx, rows, cols, n_q, n_k, causal, keep)
                p = np.where(ok, np.exp(s * f32(scale) - ls[..., None]), ls[..., None] * 0)
                ds = p * (dp - ds_row[..., None])
                dv += p.transpose(0, 2, 1) @ gt
                dk += ds.transpose(0, 2, 1) @ qt
                gq[:, q0:q0 + cut] += ((ds @ kt) * f32(scale))[:, :cut]
            cut = min(k0 + bk, n_k) - k0
            gk[:, k0:k0 + cut] = (dk * f32(scale))[:, :cut]
            gv[:, k0:k0 + cut] = dv[:, :cut]
    return gq.astype(q.dtype), gk.astype(q.dtype), gv.astype(q.dtype)


# ---- elementwise: GELU and AdamW -------------------------------------------------------------

INV_SQRT_2 = 0.70710678118654752440
INV_SQRT_2PI = 0.39894228040143267794
SQRT_2_OVER_PI = 0.79788456080286535588
GELU_C = 0.044715


def _erf(x):
    """erf for the replay (float64 accurate, then cast): CUDA's erff is within 2 ulp of it."""
    from tinyattn.backends.numpy_backend import NumpyBackend

    return NumpyBackend().erf_reference(x.astype(np.float64)).astype(x.dtype)


@_quiet
def gelu_forward(x, approximate="none"):
    """(out, saved) as the GELU ElementwiseKernel writes them: saved is cdf (erf) or
    s = σ(2u) (tanh)."""
    a = acc_dtype(x.dtype)
    xa = x.astype(a)
    if approximate == "tanh":
        u = a.type(SQRT_2_OVER_PI) * (xa + a.type(GELU_C) * (xa * xa * xa))
        s = 1 / (1 + np.exp(a.type(-2) * u))
        return (xa * s).astype(x.dtype), s.astype(x.dtype)
    cdf = a.type(0.5) * (1 + _erf(xa * a.type(INV_SQRT_2)))
    return (xa * cdf).astype(x.dtype), cdf.astype(x.dtype)


@_quiet
def gelu_backward(g, x, saved, approximate="none"):
    """gx as the GELU backward ElementwiseKernel computes it from x and the saved cdf or s."""
    a = acc_dtype(x.dtype)
    ga, xa, sa = g.astype(a), x.astype(a), saved.astype(a)
    if approximate == "tanh":
        du2 = a.type(2 * SQRT_2_OVER_PI) * (1 + a.type(3 * GELU_C) * (xa * xa))
        gx = ga * (sa + xa * sa * (1 - sa) * du2)
    else:
        pdf = a.type(INV_SQRT_2PI) * np.exp(a.type(-0.5) * (xa * xa))
        gx = ga * (sa + xa * pdf)
    return gx.astype(x.dtype)


def adam_update(p, g, m, v, lr, beta1, beta2, eps, weight_decay, step, decoupled):
    """One Adam/AdamW step in place on p, m, v, in the order of tinyattn_adam_step."""
    mode = (2 if decoupled else 1) if weight_decay else 0
    adam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, mode, 1 - beta1**step,
              math.sqrt(1 - beta2**step))


def adam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, mode, bc1, sqrt_bc2):
    """tinyattn_adam_step with the kernel's own arguments: mode 2 AdamW, 1 Adam + L2, 0 no
    decay; bc1 = 1 - b1^t and sqrt_bc2 = sqrt(1 - b2^t) as the host computes them."""
    a = acc_dtype(p.dtype)
    c = {name: a.type(val) for name, val in dict(
        lr=lr, b1=beta1, b2=beta2, eps=eps, wd=weight_decay, bc1=bc1, sbc2=sqrt_bc2).items()}
    pa, ga, ma, va = p.astype(a), g.astype(a), m.astype(a), v.astype(a)
    if mode == 2:
        pa = pa * (1 - c["lr"] * c["wd"])
    elif mode == 1:
        ga = ga + c["wd"] * pa
    ma = c["b1"] * ma + (1 - c["b1"]) * ga
    va = c["b2"] * va + (1 - c["b2"]) * (ga * ga)
    denom = np.sqrt(va) / c["sbc2"] + c["eps"]
    pa = pa - (c["lr"] / c["bc1"]) * ma / denom
    p[...], m[...], v[...] = pa, ma, va
