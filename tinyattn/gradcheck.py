"""gradcheck: compare the VJPs behind a function with central finite differences, in float64.

Small functions get their whole Jacobian checked, one input element and one output element at a
time; larger ones are checked along random directions, r·J·d with a random cotangent r and a
random direction d per input. `check_gradients` returns a report (the gradcheck command prints
those), `gradcheck` raises `GradcheckError` naming the input, the element and both values.
"""

from dataclasses import dataclass

import numpy as np

from .autograd import enable_grad, grad, no_grad
from .errors import GradcheckError, fmt_shape, warn_user
from .tensor import Tensor, _fresh, tensor


@dataclass
class GradReport:
    ok: bool
    max_abs_err: float
    mode: str  # "full" (every Jacobian entry) or "directions"
    message: str  # where the worst disagreement is


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, full_limit=4096, n_directions=6,
              seed=0, *, raise_exception=True, fast_mode=False, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True,
              masked=None):
    """True if `fn(*inputs)`'s gradients match finite differences, else GradcheckError (with
    raise_exception=False, as torch's: False instead).

    `inputs` are tensors (those with requires_grad are checked) and any other arguments `fn`
    takes, or one tensor (as torch). fn returns a tensor, or a tuple of them: each output that
    requires grad is checked; if none does, the numerical Jacobian must be zero (as torch's:
    True, else "Numerical gradient for function expected to be zero"). The full Jacobian is
    checked when (elements of an input) x (elements of the output) is at most `full_limit`,
    random directions otherwise: r · J · d for random r and d, one number per direction (torch's
    fast mode; fast_mode=True uses it for every size). That number sums every entry, so an error
    in a few entries of a large Jacobian can hide within rtol of the sum (one entry 1 % off in a
    100 x 100 elementwise op does); raise `full_limit` to check each entry.
    torch's other keywords: nondet_tol, check_undefined_grad and check_grad_dtypes are
    accepted and change nothing (backward here is deterministic, gives each output a gradient
    and casts each gradient to its input's dtype); check_backward_ad=False checks nothing;
    check_forward_ad, check_batched_grad, check_batched_forward_grad (forward-mode AD, vmap)
    and masked (sparse tensors) are refused: tinyattn has none of them.
    """
    _refuse_unsupported(check_forward_ad, check_batched_grad, check_batched_forward_grad,
                        masked)
    if not check_backward_ad:
        return True
    if fast_mode:
        full_limit = 0
    report = check_gradients(fn, inputs, eps, atol, rtol, full_limit, n_directions, seed)
    if not report.ok:
        if raise_exception:
            raise GradcheckError(report.message)
        return False
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """torch's second-order check: gradcheck of the function that maps (inputs, grad_outputs)
    to the gradients of fn's outputs by its inputs, taken with create_graph=True, so the
    gradients of those gradients (by the inputs and by grad_outputs) are checked against finite
    differences. grad_outputs: one per output of fn; None draws them (seeded, float64, with
    requires_grad, as torch's). The ops whose VJPs have a graph are higher_order/'s."""
    _refuse_unsupported(check_fwd_over_rev, check_batched_grad, False, masked)
    if not check_rev_over_rev:
        return True
    xs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    if grad_outputs is None:
        grad_outputs = _drawn_grad_outputs(fn, xs)
    gos = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
    n = len(xs)

    def first_order(*args):  # (with grad mode on: gradcheck runs it under no_grad too)
        with enable_grad():
            return _gradients_with_graph(fn, args[:n], args[n:])

    return gradcheck(first_order, xs + gos, eps, atol, rtol, fast_mode=fast_mode,
                     raise_exception=raise_exception)


def _gradients_with_graph(fn, xs, gos):
    """The gradients of fn(*xs) by its inputs that require grad, the cotangents `gos` given,
    taken with create_graph=True (None ones left out)."""
    outs = fn(*xs)
    outs = (outs,) if isinstance(outs, Tensor) else tuple(outs)
    wrt = [x for x in xs if isinstance(x, Tensor) and x.requires_grad]
    pairs = [(y, g) for y, g in zip(outs, gos, strict=True) if y.requires_grad]
    grads = grad([y for y, _ in pairs], wrt, [g for _, g in pairs], create_graph=True,
                 allow_unused=True)
    return tuple(g for g in grads if g is not None)


def _drawn_grad_outputs(fn, xs):
    """A random float64 cotangent for each floating output of fn(*xs), with requires_grad."""
    with no_grad():
        outs = fn(*xs)
    outs = (outs,) if isinstance(outs, Tensor) else tuple(outs)
    rng = np.random.default_rng(0)
    return tuple(tensor(rng.standard_normal(y.shape), requires_grad=True) for y in outs)


def _refuse_unsupported(forward_ad, batched_grad, batched_forward_grad, masked):
    for name, value in (("check_forward_ad", forward_ad), ("check_batched_grad", batched_grad),
                        ("check_batched_forward_grad", batched_forward_grad)):
        if value:
            raise ValueError(f"gradcheck: {name}=True cannot be honoured: tinyattn has no "
                             "forward-mode AD and no vmap (leave it False, torch's default)")
    if masked:
        raise ValueError("gradcheck: masked=True is for sparse tensors, which tinyattn does "
                         "not have (leave it None)")


def check_gradients(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, full_limit=4096,
                    n_directions=6, seed=0):
    xs = _float64_copies((inputs,) if isinstance(inputs, Tensor) else inputs)
    wrt = [i for i, x in enumerate(xs) if isinstance(x, Tensor) and x.requires_grad]
    if not wrt:
        raise ValueError("gradcheck: no input requires grad, so there is nothing to check")
    out = fn(*xs)
    outs, pick = _outputs(fn, out)
    live = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not live:  # (torch: then the numerical Jacobian must be zero)
        return _no_differentiable_output(pick, xs, wrt, outs, eps, full_limit, n_directions,
                                         seed)
    if len(outs) == 1 and not isinstance(out, (tuple, list)):
        return _check(fn, xs, wrt, out, eps, atol, rtol, full_limit, n_directions, seed, "")
    reports = [_check(pick(k), xs, wrt, outs[k], eps, atol, rtol, full_limit, n_directions,
                      seed, f"output {k}: ") for k in live]  # each output that requires grad
    return _worst(reports)


def _outputs(fn, out):
    """fn's outputs as a list, and pick(k): a function of the inputs giving output k."""
    if not isinstance(out, (Tensor, tuple, list)):
        raise ValueError(f"gradcheck: fn must return a tensor or a tuple of them, got "
                         f"{type(out).__name__}")
    if isinstance(out, Tensor):
        return [out], lambda k: fn
    return list(out), lambda k: lambda *a: fn(*a)[k]


def _no_differentiable_output(pick, xs, wrt, outs, eps, full_limit, n_directions, seed):
    """torch's check of a function none of whose outputs requires grad: its numerical
    Jacobian must be zero (exactly), for every tensor output and every input checked."""
    rng = np.random.default_rng(seed)
    modes = set()
    for k, o in enumerate(outs):
        if not isinstance(o, Tensor) or o._data.size == 0:
            continue
        for i in wrt:
            full = xs[i]._data.size * o._data.size <= full_limit
            modes.add("full" if full else "directions")
            where = _nonzero_change(pick(k), xs, i, eps, full, rng, n_directions)
            if where:
                label = f"output {k}, " if len(outs) > 1 else ""
                return GradReport(False, float("inf"), "+".join(sorted(modes)),
                                  "gradcheck failed: Numerical gradient for function expected "
                                  f"to be zero (no output requires grad): {label}input {i} "
                                  f"{fmt_shape(xs[i].shape)}: {where}")
    mode = "+".join(sorted(modes)) or "full"
    return GradReport(True, 0.0, mode, f"gradcheck passed: no output requires grad and the "
                                       f"numerical Jacobian is zero ({mode})")


def _nonzero_change(fn, xs, i, eps, full, rng, n_directions):
    """Where moving xs[i] changes fn's output ('' if nowhere): each element in turn (full),
    or along random directions."""
    x = xs[i]
    if full:
        for k in range(x._data.size):
            change = _perturbed(fn, xs, i, k, eps) - _perturbed(fn, xs, i, k, -eps)
            if np.any(change != 0):
                return f"moving element {k} changes the output by {np.abs(change).max():.3g}"
        return ""
    original = x._data.copy()
    try:
        for n in range(n_directions):
            step = x.backend.asarray(eps * rng.standard_normal(x.shape))
            x._data[...] = original + step
            plus = _eval_any(fn, xs)
            x._data[...] = original - step
            change = plus - _eval_any(fn, xs)
            if np.any(change != 0):
                return (f"along random direction {n} the output changes by "
                        f"{np.abs(change).max():.3g}")
    finally:
        x._data[...] = original
    return ""


def _worst(reports):
    """One report for several outputs': the first that fails, else a pass with the largest
    error."""
    for report in reports:
        if not report.ok:
            return report
    worst = max(reports, key=lambda r: r.max_abs_err)
    modes = "+".join(sorted({m for r in reports for m in r.mode.split("+")}))
    return GradReport(True, worst.max_abs_err, modes,
                      f"gradcheck passed: max abs err {worst.max_abs_err:.2e} ({modes}, "
                      f"{len(reports)} outputs)")


def _check(fn, xs, wrt, out, eps, atol, rtol, full_limit, n_directions, seed, label):
    """check_gradients for a function of one output tensor, `out` (fn(*xs) already run)."""
    rng = np.random.default_rng(seed)
    worst = (-np.inf, 0.0, "")  # (excess over tolerance, abs error, where)
    max_err = 0.0
    modes = set()
    for i in wrt:
        x = xs[i]
        if x._data.size * out._data.size <= full_limit:
            modes.add("full")
            found = _full(fn, xs, i, out, eps, atol, rtol)
        else:
            modes.add("directions")
            found = _directions(fn, xs, i, out, eps, atol, rtol, rng, n_directions)
        max_err = max(max_err, found[1])
        if found[0] > worst[0]:
            worst = found
    excess, _, where = worst
    ok = bool(excess <= 0)
    message = (f"gradcheck failed: {label}{where}" if not ok else
               f"gradcheck passed: max abs err {max_err:.2e} ({'+'.join(sorted(modes))})")
    return GradReport(ok, max_err, "+".join(sorted(modes)), message)


def _float64_copies(inputs):
    copies = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            if x.requires_grad and x.dtype != np.float64:
                warn_user(f"gradcheck: input {i} is {x.dtype}; finite differences need "
                          "float64, so it is checked as a float64 copy")
            # C order: _perturbed moves entries through data.reshape(-1), which must be a view
            # (for a transposed input it would be a copy, and the perturbation would be lost)
            data = x._data.astype(np.float64 if x.dtype.kind == "f" else x.dtype, order="C")
            t = Tensor._wrap(data, x.backend)
            t.requires_grad = x.requires_grad
            copies.append(t)
        else:
            copies.append(x)
    return copies


def _eval_any(fn, xs):
    with no_grad():
        out = fn(*xs)
    return out.backend.to_numpy(out._data).astype(np.float64)


def _vjp(fn, xs, i, cotangent):
    """The gradient of sum(fn(xs) * cotangent) with respect to xs[i] (one backward pass)."""
    for x in xs:
        if isinstance(x, Tensor):
            x.grad = None
    out = fn(*xs)
    out.backward(out.backend.asarray(cotangent.astype(out.dtype)))
    g = xs[i].grad
    return np.zeros(xs[i].shape) if g is None else g.backend.to_numpy(g._data).astype(np.float64)


def _perturbed(fn, xs, i, flat_index, delta):
    """fn(xs) with element `flat_index` of xs[i] moved by `delta` (then put back)."""
    data = xs[i]._data
    view = data.reshape(-1)
    old = view[flat_index].item()
    view[flat_index] = old + delta
    try:
        return _eval_any(fn, xs)
    finally:
        view[flat_index] = old


def _compare(analytic, numeric, atol, rtol):
    """(largest excess over the tolerance, largest abs error, flat index of the worst entry)."""
    err = np.abs(analytic - numeric).reshape(-1)
    if err.size == 0:
        return -np.inf, 0.0, 0
    excess = err - (atol + rtol * np.abs(numeric).reshape(-1))
    k = int(np.argmax(excess))
    return excess[k], float(err.max()), k


def _full(fn, xs, i, out, eps, atol, rtol):
    """Every entry d out[j] / d x[k] of the Jacobian, both ways."""
    x = xs[i]
    n_out, n_in = out._data.size, x._data.size
    if n_out == 0 or n_in == 0:  # an empty Jacobian: nothing can disagree (torch passes it)
        return -np.inf, 0.0, ""
    numeric = np.zeros((n_out, n_in))
    for k in range(n_in):
        plus = _perturbed(fn, xs, i, k, eps)
        minus = _perturbed(fn, xs, i, k, -eps)
        numeric[:, k] = ((plus - minus) / (2 * eps)).reshape(-1)
    analytic = np.zeros((n_out, n_in))
    for j in range(n_out):
        e = np.zeros(n_out)
        e[j] = 1
        analytic[j] = _vjp(fn, xs, i, e.reshape(out.shape)).reshape(-1)
    excess, max_err, flat = _compare(analytic, numeric, atol, rtol)
    j, k = divmod(flat, n_in)
    out_idx = np.unravel_index(j, out.shape) if out.shape else ()
    in_idx = np.unravel_index(k, x.shape) if x.shape else ()
    where = (f"input {i} {fmt_shape(x.shape)}: d out{list(map(int, out_idx))} / "
             f"d x{list(map(int, in_idx))}: analytic {analytic[j, k]:.6g} vs numeric "
             f"{numeric[j, k]:.6g} (abs err {abs(analytic[j, k] - numeric[j, k]):.2e}, full "
             f"Jacobian {n_out}x{n_in})")
    return excess, max_err, where


def _directions(fn, xs, i, out, eps, atol, rtol, rng, n_directions):
    """r · J · d for random cotangents r and directions d, both ways."""
    x = xs[i]
    worst = (-np.inf, 0.0, "")
    max_err = 0.0
    original = x._data.copy()
    for n in range(n_directions):
        r = rng.standard_normal(out.shape)
        d = rng.standard_normal(x.shape)
        analytic = float(np.sum(_vjp(fn, xs, i, r) * d))
        step = x.backend.asarray(eps * d)
        x._data[...] = original + step
        plus = _eval_any(fn, xs)
        x._data[...] = original - step
        minus = _eval_any(fn, xs)
        x._data[...] = original
        numeric = float(np.sum((plus - minus) * r) / (2 * eps))
        excess, abs_err, _ = _compare(np.array([analytic]), np.array([numeric]), atol, rtol)
        max_err = max(max_err, abs_err)
        if excess > worst[0]:
            where = (f"input {i} {fmt_shape(x.shape)}: along random direction {n}: analytic "
                     f"{analytic:.6g} vs numeric {numeric:.6g} (abs err {abs_err:.2e})")
            worst = (excess, abs_err, where)
    return worst[0], max_err, worst[2]


# ---- the registry's own check: every op on its sample inputs -----------------------------------


def describe_case(inputs, params):
    """'(2, 3), (3,), 1.5; dim=1' for a table row."""
    shown = [fmt_shape(x.shape) if isinstance(x, Tensor) else repr(x) for x in inputs]
    extra = [f"{k}={getattr(v, '__name__', None) or repr(v)}" for k, v in params.items()
             if k != "index"]
    if "index" in params:
        extra.append("index=...")
    return ", ".join(shown) + ("; " + ", ".join(extra) if extra else "")


def check_op(name, backend=None, **tolerances):
    """Check op `name` on every sample case: a list of (case description, GradReport)."""
    from .ops import REGISTRY
    from .ops.samples import materialize

    op = REGISTRY[name]
    rng = np.random.default_rng(0)

    def make(values, requires_grad):
        return _fresh(values, requires_grad=requires_grad, backend=backend)

    rows = []
    for inputs, params in op.samples:
        xs = materialize(inputs, rng, make)
        report = check_gradients(lambda *a, p=params: op(*a, **p), xs, **tolerances)
        rows.append((describe_case(xs, params), report))
    return rows
