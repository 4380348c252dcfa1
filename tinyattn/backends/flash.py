"""Flash attention, the readable reference: attention in tiles, never building the T×S matrix.

Forward: for each tile of queries, stream the key/value tiles past, keeping per query row the
running max m, the running sum l of exp(s - m) and the running weighted sum of values (the
online softmax of backends/base.py, one tile at a time); at the end out = acc / l and the row's
log-sum-exp m + log l is saved. Backward (FlashAttention-2): rebuild each tile of
probabilities from that log-sum-exp, with D = rowsum(dO * O) standing in for the softmax VJP's
row sum. Extra memory is O(T·d + T·block). Written in `xp`, vectorised over the batch dims.
"""

from .stable import NEG_INF, shift


def _tile_scores(xp, q_tile, k_tile, keep, scale, causal, i0, j0):
    """Scaled scores of one (query tile, key tile), -inf where attending is not allowed."""
    s = (q_tile @ xp.swapaxes(k_tile, -1, -2)) * scale  # (N, bq, bk)
    bq, bk = s.shape[-2], s.shape[-1]
    if causal and j0 + bk - 1 > i0:  # this tile reaches past the diagonal: hide keys j > i
        rows = xp.arange(i0, i0 + bq)[:, None]
        cols = xp.arange(j0, j0 + bk)[None, :]
        s = xp.where(cols <= rows, s, NEG_INF)
    if keep is not None:
        s = xp.where(keep[..., i0:i0 + bq, j0:j0 + bk], s, NEG_INF)
    return s


def _work_dtype(xp, dtype):
    """The dtype tiles are computed in: float32 for float16 data (q·k passes float16's 65504
    long before the scale brings it back), else the data's own."""
    return xp.dtype(xp.float32) if dtype == xp.float16 else dtype


def key_end(causal, i1, n_keys):
    """Keys a query tile ending at row i1 can see: all of them, or (causal) those j < i1."""
    return min(n_keys, i1) if causal else n_keys


def flash_forward(xp, q, k, v, keep=None, scale=1.0, causal=False, block_q=64, block_k=64):
    """out (N, T, dv) and the log-sum-exp per row (N, T) of softmax(scale q kᵀ, masked) v.

    q (N, T, d), k (N, S, d), v (N, S, dv); keep None or bool broadcastable to (N, T, S).
    Rows with nothing to attend give out = 0 and lse = -inf; a row with a NaN score gives NaN.
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    work = _work_dtype(xp, q.dtype)
    out = xp.zeros(q.shape[:-1] + v.shape[-1:], dtype=q.dtype)
    lse = xp.full(q.shape[:-1], NEG_INF, dtype=work)
    for i0 in range(0, n_q, block_q):
        i1 = min(i0 + block_q, n_q)
        q_tile = q[..., i0:i1, :].astype(work, copy=False)  # (N, bq, d)
        m = xp.full(q_tile.shape[:-1], NEG_INF, dtype=work)  # running max per row
        l = xp.zeros(q_tile.shape[:-1], dtype=work)  # running sum of exp(s - m)
        acc = xp.zeros(q_tile.shape[:-1] + v.shape[-1:], dtype=work)  # running Σ exp(s-m) v
        for j0 in range(0, key_end(causal, i1, n_k), block_k):
            j1 = min(j0 + block_k, n_k)
            k_tile = k[..., j0:j1, :].astype(work, copy=False)
            s = _tile_scores(xp, q_tile, k_tile, keep, scale, causal, i0, j0)
            m_new = xp.maximum(m, s.max(axis=-1))
            m_safe = shift(xp, m_new)  # rows with nothing seen yet: 0
            p = xp.exp(s - m_safe[..., None])  # (N, bq, bk)
            alpha = xp.exp(m - m_safe)  # rescales what was summed against the old max
            l = l * alpha + p.sum(axis=-1)
            acc = acc * alpha[..., None] + p @ v[..., j0:j1, :].astype(work, copy=False)
            m = m_new
        seen = l != 0  # l = 0: nothing to attend (zeros, lse -inf); NaN l: a NaN row stays NaN
        out[..., i0:i1, :] = acc / xp.where(seen, l, 1)[..., None]
        lse[..., i0:i1] = xp.where(seen, m + xp.log(xp.where(seen, l, 1)), NEG_INF)
    return out, lse


def flash_backward(xp, q, k, v, out, lse, g, keep=None, scale=1.0, causal=False, block_q=64,
                   block_k=64):
    """(gq, gk, gv) for flash_forward, recomputing probabilities tile by tile from lse.

    With P = softmax(S) and dO = g: dV = Pᵀ dO, dP = dO Vᵀ, dS = P * (dP - D) where
    D = rowsum(dO * O) = rowsum(P * dP), then dQ = scale dS K and dK = scale dSᵀ Q.
    """
    n_q, n_k = q.shape[-2], k.shape[-2]
    work = _work_dtype(xp, q.dtype)
    q, k, v, g = (a.astype(work, copy=False) for a in (q, k, v, g))
    gq, gk, gv = xp.zeros_like(q), xp.zeros_like(k), xp.zeros_like(v)
    d_rows = (g * out).sum(axis=-1)  # (N, T): the softmax VJP's row sums, from O and dO
    lse_safe = shift(xp, lse)  # fully masked rows: 0, so every p is exp(-inf) = 0
    for j0 in range(0, n_k, block_k):
        j1 = min(j0 + block_k, n_k)
        k_tile, v_tile = k[..., j0:j1, :], v[..., j0:j1, :]  # (N, bk, d), (N, bk, dv)
        first_q = j0 if causal else 0  # causal: queries before j0 never see these keys
        for i0 in range(first_q - first_q % block_q, n_q, block_q):
            i1 = min(i0 + block_q, n_q)
            q_tile, g_tile = q[..., i0:i1, :], g[..., i0:i1, :]
            s = _tile_scores(xp, q_tile, k_tile, keep, scale, causal, i0, j0)
            p = xp.exp(s - lse_safe[..., i0:i1, None])  # (N, bq, bk)
            gv[..., j0:j1, :] += xp.swapaxes(p, -1, -2) @ g_tile
            dp = g_tile @ xp.swapaxes(v_tile, -1, -2)  # (N, bq, bk)
            ds = p * (dp - d_rows[..., i0:i1, None])
            gq[..., i0:i1, :] += (ds @ k_tile) * scale
            gk[..., j0:j1, :] += (xp.swapaxes(ds, -1, -2) @ q_tile) * scale
    return gq, gk, gv
