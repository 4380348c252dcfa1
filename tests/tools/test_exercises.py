"""The exercise graders (tinyattn.exercises): a right answer is "correct"; each usual mistake
gets its own hint, a blank body says "not yet", and nothing a learner writes stops the grader.
The reference solutions here are the notebooks' (notebooks/solutions/), written once more so a
grader that wrongly failed them would show here, next to the mistakes it must catch."""

import re

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


def in_dtype(fn, dtype):
    """fn as a learner who works in `dtype` writes it: the float arrays it is given cast to
    dtype first, its answers returned in dtype."""
    if dtype == np.float64:
        return fn

    def cast(a):
        return a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a

    def run(*args):
        out = fn(*(cast(a) for a in args))
        return tuple(cast(np.asarray(o)) for o in out) if isinstance(out, tuple) else cast(out)

    return run


def shown_numbers(said, pattern):
    """The two numbers a hint prints where `pattern` (with two groups) matches."""
    found = re.search(pattern, said)
    assert found, said
    return found.group(1), found.group(2)


DTYPES = pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])


# ---- 0. your own op ------------------------------------------------------------------------


def softplus_op(forward, vjp, dtype=np.float64):
    """An op made the notebook's way; dtype float32: the learner casts x to float32 first."""
    made = op("my_softplus", "gx = g * sigmoid(x)")(
        lambda be, x: (forward(be.xp, x.astype(dtype)), (x.astype(dtype),)))
    made.defvjp(lambda be, g, saved: (vjp(be.xp, g, saved[0]),))
    return made


def stable(xp, x):
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


def sigmoid_vjp(xp, g, x):
    return g / (1 + xp.exp(-x))


@DTYPES
@pytest.mark.parametrize("forward, vjp, hint", [
    (stable, sigmoid_vjp, "correct"),
    (lambda xp, x: xp.logaddexp(0, x), lambda xp, g, x: g / 2 * (1 + xp.tanh(x / 2)), "correct"),
    (lambda xp, x: xp.log(1 + xp.exp(x)), sigmoid_vjp, "overflows"),
    (lambda xp, x: xp.log(1 + xp.exp(-x)), sigmoid_vjp, "forward: softplus(x) = log(1 + exp(x))"),
    (stable, lambda xp, g, x: 1 / (1 + xp.exp(-x)), "ignores g"),
    (stable, lambda xp, g, x: -g / (1 + xp.exp(-x)), "wrong sign"),
    (stable, lambda xp, g, x: g * xp.exp(x), "derivative of exp(x)"),
    (stable, lambda xp, g, x: g * xp.exp(x) / (1 + xp.exp(x)), "at x = ±800 your VJP"),
    (stable, lambda xp, g, x: g * 0.5, "the VJP must be g * sigmoid(x)"),
])
def test_check_my_op_tells_each_mistake(capsys, forward, vjp, hint, dtype):
    assert hint in grade(capsys, ex.check_my_op, softplus_op(forward, vjp, dtype))


def test_check_my_op_names_the_dtype_that_overflows(capsys):
    naive = softplus_op(lambda xp, x: xp.log(1 + xp.exp(x)), sigmoid_vjp, np.float32)
    assert "exp(800) overflows float32" in grade(capsys, ex.check_my_op, naive)


@pytest.mark.parametrize("dtype, off", [(np.float64, 1e-8), (np.float32, 1e-4)])
def test_a_slightly_wrong_softplus_is_shown_with_digits_that_differ(capsys, dtype, off):
    said = grade(capsys, ex.check_my_op,
                 softplus_op(lambda xp, x: stable(xp, x) * (1 + off), sigmoid_vjp, dtype))
    mine, expected = shown_numbers(said, r"you return (\S+), expected (\S+)$")
    assert mine != expected, said


def test_a_float64_softplus_rounded_through_float32_is_told_so(capsys):
    rounded = softplus_op(lambda xp, x: stable(xp, x).astype(np.float32).astype(np.float64),
                          sigmoid_vjp)
    said = grade(capsys, ex.check_my_op, rounded)
    assert "float32" in said and "softplus(x) = log(1 + exp(x))" not in said, said


def test_a_vjp_returning_a_list_is_taken_and_a_bare_array_is_named(capsys):
    forward = lambda be, x: (stable(be.xp, x), (x,))  # noqa: E731
    as_list = op("list_vjp", "gx = g * sigmoid(x)")(forward)
    as_list.defvjp(lambda be, g, saved: [sigmoid_vjp(be.xp, g, saved[0])])
    assert grade(capsys, ex.check_my_op, as_list) == "correct"
    nested = op("nested_list_vjp", "gx = g * sigmoid(x)")(forward)
    nested.defvjp(lambda be, g, saved: (sigmoid_vjp(be.xp, g, saved[0]).tolist(),))
    assert grade(capsys, ex.check_my_op, nested) == "correct"
    bare = op("bare_vjp", "gx = g * sigmoid(x)")(forward)
    bare.defvjp(lambda be, g, saved: sigmoid_vjp(be.xp, g, saved[0]))
    said = grade(capsys, ex.check_my_op, bare)
    assert "bare_vjp's VJP returned" in said and "(gx,)" in said, said
    assert "GraphError" not in said and "AttributeError" not in said, said


def test_a_blank_op_is_named(capsys):
    @op("my_softplus", "gx = g * sigmoid(x)")
    def my_softplus(be, x):
        raise NotImplementedError("your code here")

    @my_softplus.defvjp
    def my_softplus_vjp(be, g, saved):
        raise NotImplementedError("your code here")

    assert grade(capsys, ex.check_my_op, my_softplus).startswith(
        "not yet: my_softplus is still blank")


def test_check_my_op_wants_an_op_with_a_vjp(capsys):
    assert "@op(name, formula)" in grade(capsys, ex.check_my_op, lambda x: x)
    no_vjp = op("half_done", "gx = ?")(lambda be, x: (stable(be.xp, x), (x,)))
    assert "has no VJP yet" in grade(capsys, ex.check_my_op, no_vjp)


# ---- 1. the softmax VJP ----------------------------------------------------------------------


@DTYPES
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
def test_check_softmax_vjp_tells_each_mistake(capsys, fn, hint, dtype):
    assert hint in grade(capsys, ex.check_softmax_vjp, in_dtype(fn, dtype))


def softmax_vjp(y, g):
    return y * (g - (g * y).sum(-1, keepdims=True))


def test_check_softmax_vjp_takes_a_list_and_float16_and_shows_a_wrong_entry(capsys):
    assert grade(capsys, ex.check_softmax_vjp, lambda y, g: softmax_vjp(y, g).tolist()) == \
        "correct"
    assert grade(capsys, ex.check_softmax_vjp, in_dtype(softmax_vjp, np.float16)) == "correct"
    said = grade(capsys, ex.check_softmax_vjp, lambda y, g: softmax_vjp(y, g) * (1 + 1e-5))
    mine, expected = shown_numbers(said, r"you return (\S+), expected (\S+)")
    assert mine != expected, said


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
    scale = q.dtype.type(1 / np.sqrt(q.shape[-1]))  # (a NumPy float64 makes float32 q float64)
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


@DTYPES
@pytest.mark.parametrize("switches, hint", [
    ({}, "correct"),
    ({"mask": False}, "your dq is right for unmasked rows but not masked ones"),
    ({"guard": False}, "contain NaN: a query that may see no key must get zeros"),
    ({"scale_dq": False}, "dq misses the scale"),
])
def test_check_attention_backward_tells_each_mistake(capsys, switches, hint, dtype):
    said = grade(capsys, ex.check_attention_backward,
                 in_dtype(lambda *args: attention_backward(*args, **switches), dtype))
    assert hint in said


def test_a_tuple_of_the_wrong_length_is_named(capsys):
    said = grade(capsys, ex.check_attention_backward, lambda *a: attention_backward(*a)[:2])
    assert "return a tuple of 3, (dq, dk, dv): yours has 2" in said, said
    said = grade(capsys, ex.check_merge, lambda *a: (1, 2, 3))
    assert "return a tuple of 2, (m, l): yours has 3" in said, said
    said = grade(capsys, ex.check_merge, lambda *a: np.stack(merge(*a)))
    assert "return a tuple (m, l): yours is a ndarray" in said, said


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


@DTYPES
@pytest.mark.parametrize("fn, hint", [
    (merge, "correct"),
    (lambda *a: merge(*a, rescale=False), "rescale both to the new max"),
    (lambda *a: merge(*a, sign=-1), "wrong sign"),
    (lambda *a: merge(*a, guard=False), "two empty blocks must stay empty"),
    (lambda m_a, l_a, m_b, l_b: (np.minimum(m_a, m_b), l_a + l_b), "m = max(m_a, m_b)"),
    (lambda m_a, l_a, m_b, l_b: (np.maximum(m_a, m_b),), "a tuple of 2, (m, l): yours has 1"),
])
def test_check_merge_tells_each_mistake(capsys, fn, hint, dtype):
    assert hint in grade(capsys, ex.check_merge, in_dtype(fn, dtype))


def test_a_slightly_wrong_merge_is_shown_with_digits_that_differ(capsys):
    said = grade(capsys, ex.check_merge, lambda *a: (merge(*a)[0], merge(*a)[1] * (1 + 1e-6)))
    mine, expected = shown_numbers(said, r"you return (\S+), expected (\S+)")
    assert mine != expected, said


# ---- 4. the flash forward ----------------------------------------------------------------------


def flash_forward(q, k, v, causal, block_k, rescale=True, lse=True, mask=True, last=True,
                  shift=True):
    """The solution, with switches that plant the usual mistakes."""
    n_q, scale, dtype = q.shape[0], q.dtype.type(1 / np.sqrt(q.shape[-1])), q.dtype
    m, l = np.full(n_q, NEG_INF, dtype), np.zeros(n_q, dtype)
    acc = np.zeros((n_q, v.shape[1]), dtype)
    rows = np.arange(n_q)[:, None]
    end = k.shape[0] if last else k.shape[0] - k.shape[0] % block_k
    for j0 in range(0, end, block_k):
        kt, vt = k[j0:j0 + block_k], v[j0:j0 + block_k]
        s = q @ kt.T * scale
        if causal and mask:
            s = np.where(np.arange(j0, j0 + len(kt))[None, :] <= rows, s, NEG_INF)
        m_new = np.maximum(m, s.max(axis=-1)) if shift else np.zeros(n_q, dtype)
        p = np.exp(s - m_new[:, None])
        alpha = np.exp(m - m_new) if rescale and shift else 1.0
        l = l * alpha + p.sum(axis=-1)
        acc = acc * np.reshape(alpha, (-1, 1)) + p @ vt
        m = m_new
    return acc / l[:, None], (m + np.log(l)) if lse else np.log(l)


@DTYPES
@pytest.mark.parametrize("switches, hint", [
    ({}, "correct"),
    ({"rescale": False}, "right with one key tile but not with several"),
    ({"lse": False}, "out is right but lse is not"),
    ({"mask": False}, "right without the mask but not causal"),
    ({"last": False}, "the last tile is shorter"),
    ({"shift": False}, "out has inf or NaN"),
])
def test_check_flash_forward_tells_each_mistake(capsys, switches, hint, dtype):
    said = grade(capsys, ex.check_flash_forward,
                 in_dtype(lambda *a: flash_forward(*a, **switches), dtype))
    assert hint in said


# ---- 5. the flash backward ---------------------------------------------------------------------


def flash_backward(q, k, v, out, lse, d_out, causal, block_k, use_d=True, mask=True,
                   scale_dq=True, dk_t=True):
    """The solution, with switches that plant the usual mistakes."""
    scale = q.dtype.type(1 / np.sqrt(q.shape[-1]))
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


@DTYPES
@pytest.mark.parametrize("switches, hint", [
    ({}, "correct"),
    ({"use_d": False}, "subtract D = rowsum(dO ∘ O)"),
    ({"scale_dq": False}, "dq misses the scale"),
    ({"dk_t": False}, "dq is right but dk is not"),
    ({"mask": False}, "dv is wrong"),
])
def test_check_flash_backward_tells_each_mistake(capsys, switches, hint, dtype):
    said = grade(capsys, ex.check_flash_backward,
                 in_dtype(lambda *a: flash_backward(*a, **switches), dtype))
    assert hint in said
