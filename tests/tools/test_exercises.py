"""The exercise graders (tinyattn.exercises): a right answer is "correct"; each usual mistake
gets its own hint, a blank body says "not yet", and nothing a learner writes stops the grader.
The reference solutions here are the notebooks' (notebooks/solutions/), written once more so a
grader that wrongly failed them would show here, next to the mistakes it must catch."""

import numpy as np
import pytest

from tinyattn import exercises as ex
from tinyattn.ops import op

NEG_INF = float("-inf")


def grade(capsys, check, fn):
    ok = check(fn)
    said = capsys.readouterr().out.strip()
    assert ok == (said == "correct"), said
    return said


# ---- 0. your own op ------------------------------------------------------------------------


def softplus_op(forward, vjp):
    made = op("my_softplus", "gx = g * sigmoid(x)")(lambda be, x: (forward(be.xp, x), (x,)))
    made.defvjp(lambda be, g, saved: (vjp(be.xp, g, saved[0]),))
    return made


def stable(xp, x):
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


def sigmoid_vjp(xp, g, x):
    return g / (1 + xp.exp(-x))


@pytest.mark.parametrize("forward, vjp, hint", [
    (stable, sigmoid_vjp, "correct"),
    (lambda xp, x: xp.log(1 + xp.exp(x)), sigmoid_vjp, "overflows float64"),
    (lambda xp, x: xp.log(1 + xp.exp(-x)), sigmoid_vjp, "forward: softplus(x) = log(1 + exp(x))"),
    (stable, lambda xp, g, x: 1 / (1 + xp.exp(-x)), "ignores g"),
    (stable, lambda xp, g, x: -g / (1 + xp.exp(-x)), "wrong sign"),
    (stable, lambda xp, g, x: g * xp.exp(x), "derivative of exp(x)"),
    (stable, lambda xp, g, x: g * xp.exp(x) / (1 + xp.exp(x)), "at x = ±800 your VJP"),
    (stable, lambda xp, g, x: g * 0.5, "gradcheck failed"),
])
def test_check_my_op_tells_each_mistake(capsys, forward, vjp, hint):
    assert hint in grade(capsys, ex.check_my_op, softplus_op(forward, vjp))


def test_check_my_op_wants_an_op_with_a_vjp(capsys):
    assert "@op(name, formula)" in grade(capsys, ex.check_my_op, lambda x: x)
    no_vjp = op("half_done", "gx = ?")(lambda be, x: (stable(be.xp, x), (x,)))
    assert "has no VJP yet" in grade(capsys, ex.check_my_op, no_vjp)


# ---- 1. the softmax VJP ----------------------------------------------------------------------


@pytest.mark.parametrize("fn, hint", [
    (lambda y, g: y * (g - (g * y).sum(-1, keepdims=True)), "correct"),
    (lambda y, g: y * g, "−y yᵀ part is missing"),
    (lambda y, g: y * (g - g.sum(-1, keepdims=True)), "weighted by y"),
    (lambda y, g: g - (g * y).sum(-1, keepdims=True), "multiply the bracket by y"),
    (lambda y, g: y * (g - (g * y).sum()), "right for one row but not for a batch"),
    (lambda y, g: y * (g - (g * y).sum(-1)), "broadcasts back only with keepdims=True"),
    (lambda y, g: (y * (g - (g * y).sum(-1, keepdims=True))).T, "has shape"),
    (lambda y, g: None, "is None"),
])
def test_check_softmax_vjp_tells_each_mistake(capsys, fn, hint):
    assert hint in grade(capsys, ex.check_softmax_vjp, fn)


def test_a_blank_body_says_not_yet_and_a_crash_is_reported(capsys):
    def softmax_vjp(y, g):
        raise NotImplementedError("exercise")

    said = grade(capsys, ex.check_softmax_vjp, softmax_vjp)
    assert said.startswith("not yet: softmax_vjp is still blank")
    said = grade(capsys, ex.check_softmax_vjp, lambda y, g: y @ np.ones((7, 7)))
    assert said.startswith("not yet: your code raised ValueError")


# ---- 2. masked attention backward ------------------------------------------------------------


def attention_backward(q, k, v, keep, d_out, mask=True, guard=True, scale_dq=True):
    """The solution, with switches that plant the usual mistakes."""
    scale = 1 / np.sqrt(q.shape[-1])
    s = q @ k.T * scale
    if mask:
        s = np.where(keep, s, NEG_INF)
    m = s.max(axis=-1, keepdims=True)
    if guard:
        m = np.where(np.isneginf(m), 0, m)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    a = e / (np.where(total > 0, total, 1) if guard else total)
    da = d_out @ v.T
    ds = a * (da - (da * a).sum(axis=-1, keepdims=True))
    return (scale if scale_dq else 1) * ds @ k, scale * ds.T @ q, a.T @ d_out


@pytest.mark.parametrize("switches, hint", [
    ({}, "correct"),
    ({"mask": False}, "your dq is right for unmasked rows but not masked ones"),
    ({"guard": False}, "contain NaN: a query that may see no key must get zeros"),
    ({"scale_dq": False}, "dq misses the scale"),
])
def test_check_attention_backward_tells_each_mistake(capsys, switches, hint):
    said = grade(capsys, ex.check_attention_backward,
                 lambda *args: attention_backward(*args, **switches))
    assert hint in said


def test_attention_parts_match_the_library():
    rng = np.random.default_rng(0)
    q, k, v, d_out = (rng.standard_normal((3, 2)) for _ in range(4))
    keep = np.tril(np.ones((3, 3), dtype=bool))
    parts = ex.attention_parts(q, k, v, keep, d_out)
    for mine, lib in zip((parts["dq"], parts["dk"], parts["dv"]),
                         ex._library_attention_grads(q, k, v, keep, d_out), strict=True):
        np.testing.assert_allclose(mine, lib, atol=1e-12)
    np.testing.assert_allclose(parts["D"][:, 0], (d_out * parts["out"]).sum(-1), atol=1e-12)


# ---- 3. the (m, l) merge ---------------------------------------------------------------------


def merge(m_a, l_a, m_b, l_b, guard=True, sign=1, rescale=True):
    m = np.maximum(m_a, m_b)
    m_safe = np.where(np.isneginf(m), 0, m) if guard else m
    if not rescale:
        return m, l_a + l_b
    return m, l_a * np.exp(sign * (m_a - m_safe)) + l_b * np.exp(sign * (m_b - m_safe))


@pytest.mark.parametrize("fn, hint", [
    (merge, "correct"),
    (lambda *a: merge(*a, rescale=False), "rescale both to the new max"),
    (lambda *a: merge(*a, sign=-1), "wrong sign"),
    (lambda *a: merge(*a, guard=False), "two empty blocks must stay empty"),
    (lambda m_a, l_a, m_b, l_b: (np.minimum(m_a, m_b), l_a + l_b), "m = max(m_a, m_b)"),
    (lambda m_a, l_a, m_b, l_b: (np.maximum(m_a, m_b),), "return a tuple (m, l)"),
])
def test_check_merge_tells_each_mistake(capsys, fn, hint):
    assert hint in grade(capsys, ex.check_merge, fn)


# ---- 4. the flash forward ----------------------------------------------------------------------


def flash_forward(q, k, v, causal, block_k, rescale=True, lse=True, mask=True, last=True,
                  shift=True):
    """The solution, with switches that plant the usual mistakes."""
    n_q, scale = q.shape[0], 1 / np.sqrt(q.shape[-1])
    m, l, acc = np.full(n_q, NEG_INF), np.zeros(n_q), np.zeros((n_q, v.shape[1]))
    rows = np.arange(n_q)[:, None]
    end = k.shape[0] if last else k.shape[0] - k.shape[0] % block_k
    for j0 in range(0, end, block_k):
        kt, vt = k[j0:j0 + block_k], v[j0:j0 + block_k]
        s = q @ kt.T * scale
        if causal and mask:
            s = np.where(np.arange(j0, j0 + len(kt))[None, :] <= rows, s, NEG_INF)
        m_new = np.maximum(m, s.max(axis=-1)) if shift else np.zeros(n_q)
        p = np.exp(s - m_new[:, None])
        alpha = np.exp(m - m_new) if rescale and shift else 1.0
        l = l * alpha + p.sum(axis=-1)
        acc = acc * np.reshape(alpha, (-1, 1)) + p @ vt
        m = m_new
    return acc / l[:, None], (m + np.log(l)) if lse else np.log(l)


@pytest.mark.parametrize("switches, hint", [
    ({}, "correct"),
    ({"rescale": False}, "right with one key tile but not with several"),
    ({"lse": False}, "out is right but lse is not"),
    ({"mask": False}, "right without the mask but not causal"),
    ({"last": False}, "the last tile is shorter"),
    ({"shift": False}, "out has inf or NaN"),
])
def test_check_flash_forward_tells_each_mistake(capsys, switches, hint):
    said = grade(capsys, ex.check_flash_forward, lambda *a: flash_forward(*a, **switches))
    assert hint in said


# ---- 5. the flash backward ---------------------------------------------------------------------


def flash_backward(q, k, v, out, lse, d_out, causal, block_k, use_d=True, mask=True,
                   scale_dq=True, dk_t=True):
    """The solution, with switches that plant the usual mistakes."""
    scale = 1 / np.sqrt(q.shape[-1])
    d = (d_out * out).sum(axis=-1) if use_d else 0 * lse
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    rows = np.arange(q.shape[0])[:, None]
    for j0 in range(0, k.shape[0], block_k):
        kt, vt = k[j0:j0 + block_k], v[j0:j0 + block_k]
        s = q @ kt.T * scale
        if causal and mask:
            s = np.where(np.arange(j0, j0 + len(kt))[None, :] <= rows, s, NEG_INF)
        p = np.exp(s - lse[:, None])
        dv[j0:j0 + block_k] += p.T @ d_out
        ds = p * (d_out @ vt.T - d[:, None])
        dq += (scale if scale_dq else 1) * ds @ kt
        dk[j0:j0 + block_k] += scale * (ds.T @ q if dk_t else ds.T @ q[::-1])
    return dq, dk, dv


@pytest.mark.parametrize("switches, hint", [
    ({}, "correct"),
    ({"use_d": False}, "subtract D = rowsum(dO ∘ O)"),
    ({"scale_dq": False}, "dq misses the scale"),
    ({"dk_t": False}, "dq is right but dk is not"),
    ({"mask": False}, "dv is wrong"),
])
def test_check_flash_backward_tells_each_mistake(capsys, switches, hint):
    said = grade(capsys, ex.check_flash_backward, lambda *a: flash_backward(*a, **switches))
    assert hint in said
