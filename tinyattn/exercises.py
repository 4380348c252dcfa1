"""Graders for the exercise notebooks (notebooks/): each `check_*` runs a learner's function on
cases chosen to tell the usual mistakes apart, against gradcheck and the library's own ops, and
prints "correct" or "not yet: <what is wrong and how to fix it>"; it returns True when correct.

    check_my_op(op)              0. an op of your own with @op / defvjp: softplus
    check_softmax_vjp(fn)        1. the softmax VJP: gx from y and g, any leading dims
    check_attention_backward(fn) 2. masked attention backward: (dq, dk, dv)
    check_merge(fn)              3. the online softmax's (m, l) merge of two blocks
    check_flash_forward(fn)      4. the flash forward tile loop: (out, lse)
    check_flash_backward(fn)     5. the flash backward with D = rowsum(dO ∘ O): (dq, dk, dv)
"""

import functools
import math

import numpy as np

from . import functional as F  # noqa: N812 - PyTorch's usual name
from .backends.base import Backend
from .gradcheck import check_gradients
from .ops.op import Op
from .tensor import tensor

NEG_INF = float("-inf")


class NotYet(Exception):  # noqa: N818 - it is a verdict, not an error
    """A grader's verdict that the exercise is not solved yet; the message is the hint."""


def _grader(check):
    """Turn `check(fn)`, which raises NotYet with a hint, into the printing, True/False grader
    the notebooks call: a blank body (NotImplementedError) and any error of the learner's code
    become a "not yet" line, so a notebook always runs to its end."""

    @functools.wraps(check)
    def grade(fn):
        try:
            with np.errstate(all="ignore"):  # overflow is reported as a hint, not a warning
                check(fn)
        except NotYet as e:
            print(f"not yet: {e}")
            return False
        except NotImplementedError:
            print(f"not yet: {getattr(fn, '__name__', 'the exercise')} is still blank: write "
                  "its body and run the cell again")
            return False
        except Exception as e:  # noqa: BLE001 - the learner's code failed: say how
            hint = (" — a sum along an axis broadcasts back only with keepdims=True"
                    if "broadcast" in str(e) else "")
            print(f"not yet: your code raised {type(e).__name__}: {e}{hint} (call it on its "
                  "own to see the traceback)")
            return False
        print("correct")
        return True

    return grade


def _close(a, b, tol=1e-7):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=tol, atol=tol, equal_nan=False))


def _array(name, got, want):
    """The learner's result as a float64 array of the expected shape, or NotYet."""
    if got is None:
        raise NotYet(f"{name} is None: return the array (did you forget `return`?)")
    got = np.asarray(got, dtype=np.float64)
    if got.shape != np.shape(want):
        raise NotYet(f"{name} has shape {got.shape}, expected {np.shape(want)}")
    return got


def _unpack(result, names, wants):
    """A tuple result (dq, dk, dv) checked for length and shapes."""
    if not isinstance(result, (tuple, list)) or len(result) != len(names):
        raise NotYet(f"return a tuple ({', '.join(names)}), got {type(result).__name__}")
    return [_array(n, g, w) for n, g, w in zip(names, result, wants, strict=True)]


def _first_match(got, candidates):
    """The hint of the first known mistake `got` reproduces, or None."""
    for value, hint in candidates:
        if _close(got, value):
            return hint
    return None


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---- 0. your own op: softplus ----------------------------------------------------------------


def _softplus_ref(x):
    return np.logaddexp(0.0, x)


def _sigmoid_ref(x):
    return np.exp(-np.logaddexp(0.0, -x))


def _check_forward_op(my_op, x):
    y = my_op(tensor(x, requires_grad=True))
    got = _array("the forward's output", y.numpy(), x)
    if not np.isfinite(got).all():
        bad = x[~np.isfinite(got)][0]
        raise NotYet(f"softplus({bad:g}) came out {got[~np.isfinite(got)][0]}: exp({bad:g}) "
                     "overflows float64; write it as max(x, 0) + log1p(exp(-|x|)), or "
                     "be.xp.logaddexp(0, x)")
    want = F.softplus(tensor(x)).numpy()  # the library's own op
    if not _close(got, want, 1e-9):
        i = int(np.argmax(np.abs(got - want)))
        raise NotYet(f"forward: softplus(x) = log(1 + exp(x)); at x = {x.flat[i]:g} you return "
                     f"{got.flat[i]:.6g}, expected {want.flat[i]:.6g}")


def _vjp_mistakes(x, g):
    s = _sigmoid_ref(x)
    return [(s, "your VJP ignores g: multiply by the gradient arriving from above, gx = g * ..."),
            (-g * s, "your VJP has the wrong sign: d/dx log(1 + e^x) = e^x / (1 + e^x) > 0"),
            (g * np.exp(x), "g * exp(x) is the derivative of exp(x); the chain rule through the "
                            "log gives e^x / (1 + e^x) = sigmoid(x)"),
            (g / (1 + np.exp(x)), "that is sigmoid(-x): d/dx log(1 + e^x) = 1 / (1 + e^-x)")]


@_grader
def check_my_op(my_op):
    """0. `my_op` is an Op (made with @op) computing softplus, with a VJP (@my_op.defvjp)."""
    if not isinstance(my_op, Op):
        raise NotYet("decorate the forward with @op(name, formula) so it becomes an Op")
    if isinstance(my_op.vjp, functools.partial):  # still ops.op's "no VJP" placeholder
        raise NotYet(f"{my_op.name} has no VJP yet: write one below it with @{my_op.name}.defvjp")
    _check_forward_op(my_op, np.array([-30.0, -2.0, -0.5, 0.0, 0.5, 2.0, 30.0, 800.0]))
    _check_forward_op(my_op, _rng().standard_normal((2, 3)))
    x = np.array([-3.0, -0.5, 0.0, 0.7, 2.0])
    g = np.array([2.0, -1.0, 0.5, 3.0, -2.0])
    xt = tensor(x, requires_grad=True)
    my_op(xt).backward(gradient=tensor(g))
    got = _array("x.grad", xt.grad.numpy() if xt.grad is not None else None, x)
    hint = _first_match(got, _vjp_mistakes(x, g))
    if hint is not None:
        raise NotYet(hint)
    xt = tensor(np.array([-800.0, 800.0]), requires_grad=True)
    my_op(xt).sum().backward()
    if not np.isfinite(xt.grad.numpy()).all():
        raise NotYet(f"at x = ±800 your VJP gives {xt.grad.numpy()}: write sigmoid as "
                     "1 / (1 + exp(-x)), whose exp can only overflow to inf (giving 0), never "
                     "inf / inf")
    report = check_gradients(lambda t: my_op(t), [tensor(_rng(1).standard_normal((3, 4)),
                                                         requires_grad=True)])
    if not report.ok:  # the library's finite differences disagree with your VJP
        raise NotYet(f"{report.message} (the VJP must be g * sigmoid(x))")


# ---- 1. the softmax VJP ------------------------------------------------------------------------


def _softmax_ref(x):
    """y and the library's own softmax VJP at x for every g: a function g -> gx."""
    xt = tensor(x, requires_grad=True)
    y = F.softmax(xt, dim=-1)

    def vjp(g):
        xt.grad = None
        y.backward(gradient=tensor(g), retain_graph=True)
        return xt.grad.numpy()

    return y.numpy(), vjp


def _softmax_mistakes(y, g):
    return [(y * g, "you returned y ⊙ g: the Jacobian's −y yᵀ part is missing; subtract the "
                    "row's Σ_j g_j y_j inside the bracket, gx = y ⊙ (g − Σ g·y)"),
            (y * (g - g.sum(-1, keepdims=True)), "the row sum is weighted by y: Σ_j g_j y_j, "
                                                 "not Σ_j g_j"),
            (g - (g * y).sum(-1, keepdims=True), "multiply the bracket by y: gx = y ⊙ (g − Σ g·y)"),
            (y * (g - (g * y).sum()), "right for one row but not for a batch: the sum runs "
                                      "along the last axis only (axis=-1, keepdims=True), since "
                                      "rows do not interact")]


def _learner_softmax_op(fn):
    """An op with the library's softmax forward and the learner's VJP, for gradcheck."""
    yours = Op("your_softmax", lambda be, x: (lambda y: (y, (y,)))(be.softmax(x, axis=-1)),
               "gx = your_softmax_vjp(y, g)")
    yours.defvjp(lambda be, g, saved: (fn(saved[0], g),))
    return yours


@_grader
def check_softmax_vjp(fn):
    """1. fn(y, g) -> gx = dL/dx for y = softmax(x, dim=-1), any leading dims."""
    rng = _rng()
    cases = [("one row", rng.standard_normal(5)),
             ("a (B, T, d) batch", rng.standard_normal((2, 3, 4))),
             ("a fully masked row", np.array([[0.5, -1.0, 2.0], [NEG_INF] * 3]))]
    for what, x in cases:
        y, vjp = _softmax_ref(x)
        g = rng.standard_normal(x.shape)
        want = vjp(g)
        got = _array("gx", fn(y.copy(), g.copy()), want)
        if _close(got, want):
            continue
        hint = _first_match(got, _softmax_mistakes(y, g))
        if hint is None and not np.isfinite(got).all():
            hint = "a fully masked row (y all 0) must give gx = 0, not NaN"
        raise NotYet(hint or f"wrong on {what}: for y = {np.round(y, 3).tolist()} and g = "
                             f"{np.round(g, 3).tolist()} expected {np.round(want, 4).tolist()}")
    report = check_gradients(_learner_softmax_op(fn),
                             [tensor(rng.standard_normal((3, 4)), requires_grad=True)])
    if not report.ok:
        raise NotYet(report.message)


# ---- 2. masked attention backward ----------------------------------------------------------


def attention_parts(q, k, v, keep, g_out, scale=None):
    """Every intermediate of one head's masked attention and its backward, in NumPy: S, A, out,
    dA, D, dS, dq, dk, dv (fully masked rows: A = 0, out = 0, no NaN). Graders use it to name
    mistakes; learners can compare with it."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = np.where(keep, q @ k.T * scale, NEG_INF)  # (T, S)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(m), 0, m))
    total = e.sum(axis=-1, keepdims=True)
    a = e / np.where(total > 0, total, 1)
    da = g_out @ v.T
    d = (da * a).sum(axis=-1, keepdims=True)  # = rowsum(dO ∘ out)
    ds = a * (da - d)
    return {"S": s, "A": a, "out": a @ v, "dA": da, "D": d, "dS": ds, "scale": scale,
            "dq": scale * ds @ k, "dk": scale * ds.T @ q, "dv": a.T @ g_out}


def _library_attention_grads(q, k, v, keep, g_out):
    """(dq, dk, dv) from the library's own attention op and backward."""
    qt, kt, vt = (tensor(a, requires_grad=True) for a in (q, k, v))
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=tensor(keep), impl="composite")
    out.backward(gradient=tensor(g_out))
    return [t.grad.numpy() for t in (qt, kt, vt)]


def _attention_case(rng, keep, d=3):
    t, s = keep.shape
    return rng.standard_normal((t, d)), rng.standard_normal((s, d)), rng.standard_normal((s, 2)), \
        keep, rng.standard_normal((t, 2))


def _attention_hint(what, got, want, keep, parts):
    """What is wrong with (dq, dk, dv) on one case, as a hint (None when all are right)."""
    names = ("dq", "dk", "dv")
    wrong = [n for n, a, b in zip(names, got, want, strict=True) if not _close(a, b)]
    if not wrong:
        return None
    if any(not np.isfinite(a).all() for a in got):
        return (f"{what}: your gradients contain NaN: a query that may see no key must get "
                "zeros (take m = 0 for a row whose scores are all -inf, and divide by l only "
                "where l > 0)")
    s = parts["scale"]
    mistakes = {"dq": [(parts["dq"] / s, "dq misses the scale: dq = s · dS k, s = 1/√d")],
                "dk": [(parts["dk"] / s, "dk misses the scale: dk = s · dSᵀ q, s = 1/√d")],
                "dv": []}
    for name in wrong:
        hint = _first_match(got[names.index(name)], mistakes[name])
        if hint is not None:
            return hint
    masked_rows = ~keep.all(axis=-1)
    name = wrong[0]
    a, b = got[names.index(name)], want[names.index(name)]
    if name == "dq" and masked_rows.any() and _close(a[~masked_rows], b[~masked_rows]):
        return ("your dq is right for unmasked rows but not masked ones: set the masked scores "
                "to -inf before the softmax, so masked weights are 0 and dS is 0 there")
    return (f"{what}: {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} wrong; "
            "dA = dO vᵀ, dS = A ⊙ (dA − rowsum(dA ⊙ A)), dq = s·dS k, dk = s·dSᵀ q, dv = Aᵀ dO")


@_grader
def check_attention_backward(fn):
    """2. fn(q, k, v, keep, dO) -> (dq, dk, dv) for out = softmax(q kᵀ/√d, masked) v, keep a
    bool (T, S) array: True where query i may attend key j."""
    rng = _rng(2)
    holes = np.tril(np.ones((4, 4), dtype=bool))
    holes[0] = False  # query 0 may see no key at all
    holes[3, 1] = False
    cases = [("without a mask", np.ones((4, 5), dtype=bool)),
             ("with a causal mask", np.tril(np.ones((4, 4), dtype=bool))),
             ("with a fully masked row", holes)]
    for what, keep in cases:
        q, k, v, keep, g_out = _attention_case(rng, keep)
        want = _library_attention_grads(q, k, v, keep, g_out)
        got = _unpack(fn(q.copy(), k.copy(), v.copy(), keep.copy(), g_out.copy()),
                      ("dq", "dk", "dv"), want)
        hint = _attention_hint(what, got, want, keep, attention_parts(q, k, v, keep, g_out))
        if hint is not None:
            raise NotYet(hint)


# ---- 3. the (m, l) merge -----------------------------------------------------------------------


def _block_stats(x):
    """(m, l) of each row of x: its max and Σ exp(x − m); (-inf, 0) for an empty row."""
    m = x.max(axis=-1)
    m_safe = np.where(np.isneginf(m), 0, m)
    return m, np.exp(x - m_safe[:, None]).sum(axis=-1)


@_grader
def check_merge(fn):
    """3. fn(m_a, l_a, m_b, l_b) -> (m, l): the (max, Σ exp(x − max)) of two blocks' union,
    row by row (arrays of rows); an empty block has m = -inf, l = 0."""
    rng = _rng(3)
    xa = rng.standard_normal((4, 3)) * 3
    xb = rng.standard_normal((4, 5)) * 3
    xb[0] += 10  # row 0: block b raises the max a lot
    xb[3] = NEG_INF  # row 3: block b is empty (fully masked)
    m_a, l_a = _block_stats(xa)
    m_b, l_b = _block_stats(xb)
    m, l = Backend.online_merge(np, m_a, l_a, m_b, l_b)  # the library's own merge
    got_m, got_l = _unpack(fn(m_a.copy(), l_a.copy(), m_b.copy(), l_b.copy()), ("m", "l"), (m, l))
    if not _close(got_m, m):
        raise NotYet("m is the larger of the two maxima: m = max(m_a, m_b), row by row "
                     "(np.maximum)")
    both = slice(0, 3)  # the rows where neither block is empty
    mistakes = [((l_a + l_b)[both], "each sum was measured against its own block's max: rescale "
                                    "both to the new max, l = l_a·e^(m_a − m) + l_b·e^(m_b − m)"),
                ((l_a * np.exp(m - m_a) + l_b * np.exp(m - m_b))[both],
                 "the exponents have the wrong sign: a block whose max is below m shrinks, "
                 "e^(m_a − m) ≤ 1")]
    if not _close(got_l, l):
        hint = _first_match(got_l[both], mistakes)
        if hint is None and not np.isfinite(got_l).all():
            hint = ("l came out NaN or inf in a row where block b is empty (m_b = -inf, "
                    "l_b = 0): its term must be 0 · e^(−inf) = 0")
        raise NotYet(hint or f"l is wrong: expected {l}, got {got_l}")
    empty = np.array([NEG_INF]), np.array([0.0])
    with np.errstate(invalid="ignore"):
        got_m, got_l = _unpack(fn(*empty, *empty), ("m", "l"), empty)
    if not (np.isneginf(got_m).all() and _close(got_l, empty[1])):
        raise NotYet(f"two empty blocks must stay empty, (m, l) = (-inf, 0); you give "
                     f"({got_m[0]}, {got_l[0]}): exp(-inf − (-inf)) is NaN, so measure "
                     "against m_safe = 0 where m = -inf")


# ---- 4. the flash forward ----------------------------------------------------------------------


def _flash_cases(rng):
    q, k, v = rng.standard_normal((8, 4)), rng.standard_normal((8, 4)), rng.standard_normal((8, 3))
    big = 1000 * q  # scores in the thousands: exp overflows unless the max comes off first
    return [("one key tile", (q, k, v, False, 8)),
            ("several key tiles of 4", (q, k, v, False, 4)),
            ("tiles of 3 (the last one shorter)", (q, k, v, False, 3)),
            ("causal, tiles of 2", (q, k, v, True, 2)),
            ("large scores", (big, k, v, True, 3))]


def _reference_attention(q, k, v, causal):
    keep = np.tril(np.ones((q.shape[0], k.shape[0]), dtype=bool)) if causal else \
        np.ones((q.shape[0], k.shape[0]), dtype=bool)
    parts = attention_parts(q, k, v, keep, np.zeros((q.shape[0], v.shape[1])))
    s = parts["S"]
    m = s.max(axis=-1)
    return parts["out"], m + np.log(np.exp(s - m[:, None]).sum(axis=-1)), keep


def _flash_forward_hint(what, ok_before, got, want):
    out, lse = got
    if not np.isfinite(out).all():
        return (f"{what}: out has inf or NaN: exp of a large score overflows; subtract the "
                "running max m before exp, and rescale by exp(m_old − m_new)")
    if _close(out, want[0]) and not _close(lse, want[1]):
        return "out is right but lse is not: lse = m + log(l) per row, after the last tile"
    if what.startswith("causal"):
        return ("right without the mask but not causal: in each tile set the scores of keys "
                "j > i to -inf (keys after the query) before taking the max and exp")
    if what.startswith("tiles of 3"):
        return ("right when 4 divides 8 but not with tiles of 3: the last tile is shorter "
                "(keys 6..7): slice k[j0:j0 + block_k] and v the same way")
    if ok_before:
        return ("right with one key tile but not with several: when a tile raises the row's "
                "max, rescale l and acc by alpha = exp(m_old − m_new) before adding the tile")
    return (f"{what}: out is wrong: per tile, s = scale · q k_tileᵀ, m_new = max(m, rowmax s), "
            "p = exp(s − m_new), l = l·alpha + rowsum p, acc = acc·alpha + p v_tile; "
            "out = acc / l")


@_grader
def check_flash_forward(fn):
    """4. fn(q, k, v, causal, block_k) -> (out (T, dv), lse (T,)): one head's attention with
    scale 1/√d, walking the keys in tiles of block_k with the running m, l and acc."""
    ok_before = False
    for what, (q, k, v, causal, block_k) in _flash_cases(_rng(4)):
        out, lse, _ = _reference_attention(q, k, v, causal)
        with np.errstate(over="ignore", invalid="ignore"):
            got = _unpack(fn(q.copy(), k.copy(), v.copy(), causal, block_k), ("out", "lse"),
                          (out, lse))
        if not (_close(got[0], out) and _close(got[1], lse)):
            raise NotYet(_flash_forward_hint(what, ok_before, got, (out, lse)))
        ok_before = True


# ---- 5. the flash backward ---------------------------------------------------------------------


def _flash_backward_hint(what, got, want, parts):
    """The mistake (dq, dk, dv) shows on one case, or None when right."""
    if all(_close(a, b) for a, b in zip(got, want, strict=True)):
        return None
    if not _close(got[2], want[2]):
        return (f"{what}: dv is wrong: per tile, P = exp(s − lse) with s = scale · q k_tileᵀ "
                "(masked to -inf), and dv_tile += Pᵀ dO")
    s, k = parts["scale"], parts["k"]
    no_d = parts["A"] * parts["dA"]  # dS without the row term
    mistakes = [(s * no_d @ k, "dS = P ⊙ (dP − D): subtract D = rowsum(dO ∘ O), one number "
                               "per query row, computed once before the loop"),
                (parts["dq"] / s, "dq misses the scale: dq += scale · dS k_tile"),
                (s * (parts["A"] * (parts["dA"] - parts["dA"].sum(-1, keepdims=True))) @ k,
                 "D is rowsum(dO ∘ O), not rowsum(dP): dP's row sum is not weighted by P")]
    hint = _first_match(got[0], mistakes)
    if hint is None and _close(got[0], want[0]):
        hint = "dq is right but dk is not: dk_tile += scale · dSᵀ q (the transpose of dS)"
    if hint is None and what.startswith("causal"):
        hint = ("right without the mask but not causal: recompute s with -inf for keys j > i "
                "before P = exp(s − lse)")
    return hint or f"{what}: dq is wrong: dq += scale · dS k_tile with dS = P ⊙ (dO vᵀ − D)"


@_grader
def check_flash_backward(fn):
    """5. fn(q, k, v, out, lse, dO, causal, block_k) -> (dq, dk, dv): the flash backward,
    recomputing P = exp(s − lse) tile by tile, with D = rowsum(dO ∘ O) for the softmax's row
    sum (scale 1/√d)."""
    rng = _rng(5)
    for what, (q, k, v, causal, block_k) in _flash_cases(rng)[:4]:
        out, lse, keep = _reference_attention(q, k, v, causal)
        g_out = rng.standard_normal(out.shape)
        parts = dict(attention_parts(q, k, v, keep, g_out), q=q, k=k)
        want = _library_attention_grads(q, k, v, keep, g_out)  # the library's own attention
        got = _unpack(fn(q.copy(), k.copy(), v.copy(), out.copy(), lse.copy(), g_out.copy(), causal,
                         block_k), ("dq", "dk", "dv"), want)
        hint = _flash_backward_hint(what, got, want, parts)
        if hint is not None:
            raise NotYet(hint)
