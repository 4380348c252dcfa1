"""Muon, torch's torch.optim.Muon (torch 2.9): momentum SGD whose step for each 2-D parameter
is the momentum update orthogonalised by a Newton-Schulz iteration (Keller Jordan's Muon).

For each parameter with a gradient g, with momentum μ, coefficients (a, b, c), ns_steps k:

    B ← B + (1 - μ)(g - B)                      (state momentum_buffer, zeros at first)
    U ← g + μ (B - g) if nesterov else B
    X ← U / max(‖U‖_F, eps), transposed when it has more rows than columns;
    k times: G = X Xᵀ, X ← a X + (b G + c G G) X    (then transposed back: O)
    p ← p (1 - lr weight_decay) - lr' O

with lr' = lr √max(1, rows / cols) (adjust_lr_fn None or "original", Keller Jordan's) or
lr 0.2 √max(rows, cols) ("match_rms_adamw", Moonshot's). The steps, settings, defaults, checks
and state (momentum_buffer) are torch's, and its state dicts load.

One difference: torch runs the Newton-Schulz iteration in bfloat16, which tinyattn does not
have; here it runs in the parameter's dtype (float32 for float16 parameters, as tinyattn's
other optimizers step them), so a float64 run follows torch's iteration to float64's rounding
where torch's own rounds it to bfloat16's (about 3 significant digits).
"""

import math

from ..errors import fmt_shape
from ..tensor import Tensor

_ADJUST_LR_FNS = ("original", "match_rms_adamw")


def _lerp(start, end, weight):
    """torch's start.lerp(end, weight) on arrays, computed as its kernel does (from the end for
    a weight of 0.5 or more)."""
    if abs(weight) < 0.5:
        return start + weight * (end - start)
    return end - (end - start) * (1 - weight)


def _zeropower_via_newtonschulz(xp, grad, ns_coefficients, ns_steps, eps):
    """torch's _zeropower_via_newtonschulz on an array, in its dtype: ns_steps iterations of
    the quintic X ← a X + (b XXᵀ + c (XXᵀ)²) X from grad / max(‖grad‖_F, eps), on the wide
    orientation (more columns than rows)."""
    a, b, c = ns_coefficients
    tall = grad.shape[0] > grad.shape[1]
    x = grad.T if tall else grad
    x = x / max(float(xp.linalg.norm(x)), eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x.T if tall else x


def _adjust_lr(lr, adjust_lr_fn, shape):
    """torch's _adjust_lr: lr scaled for a (rows, cols) parameter."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


class MuonSteps:
    """torch's Muon: SGD with momentum whose update of each 2-D parameter (a hidden layer's
    weight) is orthogonalised by ns_steps Newton-Schulz iterations (see tinyattn.optim.muon);
    decoupled weight decay; nesterov momentum by default. Only 2-D parameters (torch's
    ValueError otherwise): give biases, embeddings and the like to AdamW.

    (What optim.Muon adds to the Optimizer base class, as lbfgs.py's LBFGSSteps: its settings,
    their checks and the update of one parameter; optim/__init__.py makes the class.)"""

    defaults = {"lr": 1e-3, "weight_decay": 0.1, "momentum": 0.95, "nesterov": True,
                "ns_coefficients": (3.4445, -4.775, 2.0315), "eps": 1e-7, "ns_steps": 5,
                "adjust_lr_fn": None}
    positional = tuple(defaults)
    nonnegative = ("lr", "momentum", "weight_decay")  # (torch's checks)

    def check(self, group):
        super().check(group)
        fn = group["adjust_lr_fn"]
        if fn is not None and fn not in _ADJUST_LR_FNS:
            raise ValueError(f"Muon: Adjust learning rate function {fn} is not supported (one "
                             f"of {', '.join(_ADJUST_LR_FNS)}, or None)")
        for p in group["params"]:
            if p.ndim != 2:
                raise ValueError("Muon only supports 2D parameters whereas we found a parameter "
                                 f"with size: {fmt_shape(p.shape)}")

    def update(self, p, g, state, group):
        coefficients, ns_steps = group["ns_coefficients"], group["ns_steps"]
        if ns_steps >= 100:  # (torch's checks, at the step)
            raise ValueError(f"Muon: ns_steps {ns_steps}: Number of steps must be less than 100 "
                             "for computational efficiency")
        if len(coefficients) != 3:
            raise ValueError(f"Muon: ns_coefficients {coefficients!r}: Coefficients must be a "
                             "tuple of exactly 3 values")
        xp = p.backend.xp
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = Tensor._wrap(xp.zeros_like(p._data), p.backend)
        buf, mu = state["momentum_buffer"]._data, group["momentum"]
        buf[...] = _lerp(buf, g, 1 - mu)
        update = _lerp(g, buf, mu) if group["nesterov"] else buf
        # (a parameter is 2-D; the 1-element stand-in that load_state_dict steps to learn the
        # state's dtypes is taken as a row)
        matrix = update if update.ndim == 2 else update.reshape(1, -1)
        matrix = _zeropower_via_newtonschulz(xp, matrix, coefficients, ns_steps, group["eps"])
        lr = group["lr"]
        p._data *= 1 - lr * group["weight_decay"]
        p._data -= _adjust_lr(lr, group["adjust_lr_fn"], matrix.shape) * matrix.reshape(p.shape)
