"""Graders for the exercise notebooks (notebooks/): each `check_*` runs a learner's function on
cases chosen to tell the usual mistakes apart, against gradcheck and the library's own ops, and
prints "correct" or "not yet: <what is wrong and how to fix it>"; it returns True when correct.
An answer is compared to the precision of the dtype it comes in (float64 tightly, float32 and
float16 to about a hundred times their rounding), relative to the size of the values.

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
from .tensor import Tensor, tensor

NEG_INF = float("-inf")
# how close an answer in float32 or float16 must come, relative to the values' size: about a
# hundred times their rounding (2^-24, 2^-11), as a right formula's sums and exps accumulate it;
# a float64 answer is held to the check's own tolerance
LOOSEST = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 1e-2}
GRADED = (np.float16, np.float32, np.float64)  # the dtypes an answer keeps; others become float64


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
            name = fn.name if isinstance(fn, Op) else getattr(fn, "__name__", "the exercise")
            print(f"not yet: {name} is still blank: write its body and run the cell again")
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


def _tolerance(dtype, tight):
    return max(tight, LOOSEST.get(np.dtype(dtype), 0.0))


def _close(a, b, tight=1e-7, dtype=None):
    """Whether `a` (an answer) is `b` to the precision of a's dtype (or `dtype`): every finite
    entry within tol · (|b| + the values' scale: the largest |b|, at least 1, the inputs' size,
    which rounding in the sums that made b scales with), the infinities where b has them, and
    no NaN."""
    tol = _tolerance(np.asarray(a).dtype if dtype is None else dtype, tight)
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    finite = np.isfinite(b)
    if not (np.array_equal(a[~finite], b[~finite]) and np.isfinite(a[finite]).all()):
        return False
    scale = np.abs(b[finite]).max(initial=1.0)
    return bool((np.abs(a - b)[finite] <= tol * (np.abs(b[finite]) + scale)).all())


def _apart(a, b):
    """a and b printed with just enough significant digits to tell them apart."""
    for digits in range(6, 18):
        shown = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if shown[0] != shown[1]:
            break
    return shown


def _worst(got, want, where=None):
    """'at <where> you return A, expected B' for the entry furthest from `want`."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        off = np.where(np.isnan(got) != np.isnan(want), np.inf, np.abs(got - want))
    i = np.unravel_index(int(np.argmax(np.nan_to_num(off, nan=0.0))), got.shape)
    mine, expected = _apart(got[i], want[i])
    at = where(i) if where else f"[{', '.join(map(str, i))}]" if i else ""
    return f"at {at} you return {mine}, expected {expected}"


def _rounding_hint(name, got, want, tight=1e-7):
    """The hint for a float64 answer whose every value is a float32 number (it went through
    float32: a cast, a float32 input) and that is right to float32's precision only, else None."""
    got = np.asarray(got)
    if got.dtype != np.float64 or _close(got, want, tight) or \
            not _close(got, want, tight, dtype=np.float32):
        return None
    with np.errstate(over="ignore"):
        if not np.array_equal(got, got.astype(np.float32), equal_nan=True):
            return None
    return (f"{name} is right only to float32's precision ({_worst(got, want)}): your formula "
            "is right, but it went through float32 and came back as float64; return the "
            "float32 array as it is (it is graded to float32's precision), or compute in "
            "float64")


def _array(name, got, want):
    """The learner's result as an array of the expected shape, or NotYet; float16, float32 and
    float64 stay as they are (an answer is graded to its own dtype's precision)."""
    if got is None:
        raise NotYet(f"{name} is None: return the array (did you forget `return`?)")
    got = np.asarray(got.numpy() if isinstance(got, Tensor) else got)
    if got.dtype.kind == "c":
        raise NotYet(f"{name} is complex ({got.dtype}): return real numbers")
    if got.dtype not in GRADED:
        got = got.astype(np.float64)
    if got.shape != np.shape(want):
        raise NotYet(f"{name} has shape {got.shape}, expected {np.shape(want)}")
    return got


def _unpack(result, names, wants):
    """A tuple result (dq, dk, dv) checked for length and shapes."""
    expected = f"({', '.join(names)})"
    if not isinstance(result, (tuple, list)):
        raise NotYet(f"return a tuple {expected}: yours is a {type(result).__name__}")
    if len(result) != len(names):
        raise NotYet(f"return a tuple of {len(names)}, {expected}: yours has {len(result)}")
    return [_array(n, g, w) for n, g, w in zip(names, result, wants, strict=True)]


def _first_match(got, candidates, dtype=None):
    """The hint of the first known mistake `got` reproduces (to the precision of its dtype, or
    of `dtype`), or None."""
    for value, hint in candidates:
        if _close(got, value, dtype=dtype):
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
    """The forward's dtype, once its output at x is softplus(x) to that dtype's precision."""
    y = my_op(tensor(x, requires_grad=True))
    got = _array("the forward's output", y.numpy(), x)
    if not np.isfinite(got).all():
        bad = x[~np.isfinite(got)][0]
        raise NotYet(f"softplus({bad:g}) came out {got[~np.isfinite(got)][0]}: exp({bad:g}) "
                     f"overflows {got.dtype}; write it as max(x, 0) + log1p(exp(-|x|)), or "
                     "be.xp.logaddexp(0, x)")
    want = F.softplus(tensor(x)).numpy()  # the library's own op
    if not _close(got, want, 1e-9):
        raise NotYet(_rounding_hint("your softplus", got, want, 1e-9) or
                     "forward: softplus(x) = log(1 + exp(x)); "
                     + _worst(got, want, lambda i: f"x = {x[i]:g}"))
    return got.dtype


def _learner_op(my_op):
    """`my_op` with its VJP's answer checked: one gradient per input, in a tuple or a list, each
    an array (a list of numbers becomes one); anything else is a hint, not an error from deep
    inside backward."""
    checked = Op.__new__(Op)
    for slot in Op.__slots__:
        setattr(checked, slot, getattr(my_op, slot))

    def vjp(be, g, saved, **params):
        grads = my_op.vjp(be, g, saved, **params)
        if not isinstance(grads, (tuple, list)) or len(grads) != 1:
            what = (f"a {type(grads).__name__} of {len(grads)} gradients"
                    if isinstance(grads, (tuple, list)) else f"a bare {type(grads).__name__}")
            raise NotYet(f"{my_op.name}'s VJP returned {what}: return one gradient per input, "
                         "in a tuple: (gx,)")
        gx = grads[0]
        return (gx if gx is None else gx._data if isinstance(gx, Tensor) else be.xp.asarray(gx),)

    checked.vjp = vjp
    return checked


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
    # the learner's dtype: x.grad comes back as float64 (x's dtype) whatever the VJP computed in
    dtype = _check_forward_op(my_op, np.array([-30.0, -2.0, -0.5, 0.0, 0.5, 2.0, 30.0, 800.0]))
    _check_forward_op(my_op, _rng().standard_normal((2, 3)))
    checked = _learner_op(my_op)
    x = np.array([-3.0, -0.5, 0.0, 0.7, 2.0])
    g = np.array([2.0, -1.0, 0.5, 3.0, -2.0])
    xt = tensor(x, requires_grad=True)
    checked(xt).backward(gradient=tensor(g))
    got = _array("x.grad", xt.grad.numpy() if xt.grad is not None else None, x)
    hint = _first_match(got, _vjp_mistakes(x, g), dtype)
    if hint is not None:
        raise NotYet(hint)
    xt = tensor(np.array([-800.0, 800.0]), requires_grad=True)
    checked(xt).sum().backward()
    if not np.isfinite(xt.grad.numpy()).all():
        raise NotYet(f"at x = ±800 your VJP gives {xt.grad.numpy()}: write sigmoid as "
                     "1 / (1 + exp(-x)), whose exp can only overflow to inf (giving 0), never "
                     "inf / inf")
    if dtype != np.float64:  # finite differences of a float32 forward are mostly rounding
        want = g * _sigmoid_ref(x)
        if not _close(got, want, dtype=dtype):
            raise NotYet(f"x.grad {_worst(got, want, lambda i: f'x = {x[i]:g}')} (the VJP "
                         "must be g * sigmoid(x))")
        return
    report = check_gradients(lambda t: checked(t), [tensor(_rng(1).standard_normal((3, 4)),
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
    yours.defvjp(lambda be, g, saved: (be.xp.asarray(_array("gx", fn(saved[0], g), g)),))
    return yours


@_grader
def check_softmax_vjp(fn):
    """1. fn(y, g) -> gx = dL/dx for y = softmax(x, dim=-1), any leading dims."""
    rng = _rng()
    cases = [("one row", rng.standard_normal(5)),
             ("a (B, T, d) batch", rng.standard_normal((2, 3, 4))),
             ("a fully masked row", np.array([[0.5, -1.0, 2.0], [NEG_INF] * 3]))]
    float16 = False
    for what, x in cases:
        y, vjp = _softmax_ref(x)
        g = rng.standard_normal(x.shape)
        want = vjp(g)
        got = _array("gx", fn(y.copy(), g.copy()), want)
        float16 |= got.dtype == np.float16
        if _close(got, want):
            continue
        hint = _first_match(got, _softmax_mistakes(y, g))
        if hint is None and not np.isfinite(got).all():
            hint = "a fully masked row (y all 0) must give gx = 0, not NaN"
        raise NotYet(hint or _rounding_hint("gx", got, want) or
                     f"wrong on {what}: for y = {np.round(y, 3).tolist()} and g = "
                     f"{np.round(g, 3).tolist()}, {_worst(got, want)}")
    if float16:  # gradcheck's tolerance is below float16's rounding: the cases above decide
        return
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
    for name in wrong:
        hint = _rounding_hint(name, got[names.index(name)], want[names.index(name)])
        if hint is not None:
            return f"{what}: {hint}"
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
    return (f"{what}: {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} wrong ({name} "
            f"{_worst(a, b)}); dA = dO vᵀ, dS = A ⊙ (dA − rowsum(dA ⊙ A)), dq = s·dS k, "
            "dk = s·dSᵀ q, dv = Aᵀ dO")


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
        raise NotYet(_rounding_hint("m", got_m, m) or "m is the larger of the two maxima: "
                     "m = max(m_a, m_b), row by row (np.maximum)")
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
        raise NotYet(hint or _rounding_hint("l", got_l, l) or
                     f"l is wrong: {_worst(got_l, l, lambda i: f'row {i[0]}')}")
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
    for name, a, b in zip(("out", "lse"), got, want, strict=True):
        hint = _rounding_hint(name, a, b)
        if hint is not None:
            return f"{what}: {hint}"
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
    return (f"{what}: out is wrong ({_worst(out, want[0])}): per tile, s = scale · q k_tileᵀ, "
            "m_new = max(m, rowmax s), p = exp(s − m_new), l = l·alpha + rowsum p, "
            "acc = acc·alpha + p v_tile; out = acc / l")


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
    for name, a, b in zip(("dq", "dk", "dv"), got, want, strict=True):
        hint = _rounding_hint(name, a, b)
        if hint is not None:
            return f"{what}: {hint}"
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
    return hint or (f"{what}: dq is wrong ({_worst(got[0], want[0])}): dq += scale · dS k_tile "
                    "with dS = P ⊙ (dO vᵀ − D)")


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
