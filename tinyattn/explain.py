"""Explain mode: the backward pass told one VJP per line, in the order it runs.

    with tinyattn.explain():
        loss.backward()

prints, for every op the gradient passes through, its step index, the op, its VJP formula,
the shape and norm of the incoming gradient g and of each gradient it sends to its inputs —
and a line whenever a tensor used in several places adds up another contribution.
`describe(step)` gives the same line for a Step of `loss.backward_steps()`, for notebooks.
"""

import sys

from .autograd import Tracer, tracing
from .errors import fmt_shape


def norm(a):
    """L2 norm of a NumPy or CuPy array, as a Python float (accumulated in float64)."""
    a = a.astype("float64")
    return float((a * a).sum()) ** 0.5


def param_names(params):
    """id(tensor) -> name, from a Module, a dict {name: tensor} or (name, tensor) pairs."""
    if params is None:
        return {}
    if hasattr(params, "named_parameters"):
        params = params.named_parameters()
    elif isinstance(params, dict):
        params = params.items()
    return {id(t): name for name, t in params}


def _shape_norm(a):
    return f"{fmt_shape(a.shape)} ‖{norm(a):.3g}‖"


def grad_names(op, n_inputs):
    """The names the op's formula gives its gradients ("gx", "gy", "gq"...), one per input
    (`op.grads`); `g[i]` where it names none (an input with no gradient, a variadic op)."""
    names = op.grads if len(op.grads) == n_inputs else ()
    return [names[i] if names and names[i] else f"g[{i}]" for i in range(n_inputs)]


def vjp_line(index, node, g, grads):
    """One VJP as a line: `[3] softmax -> A: gx = y * (g - sum(g*y, dim)) | g (2, 3) ‖..‖ ...`
    (`-> A` when the op's output tensor was given a name)."""
    op = node.op
    names = grad_names(op, len(grads))
    sent = ", ".join(f"{name} {_shape_norm(gx)}" for name, gx in zip(names, grads, strict=True)
                     if gx is not None)
    where = f"  [{node.scope}]" if node.scope else ""
    fused = " (fused)" if op.fused else ""
    made = f" -> {node.name}" if node.name else ""  # the tensor this op made, when named
    return (f"[{index}] {op.name}{made}: {op.formula}{fused} | g {_shape_norm(g)} -> "
            f"{sent or 'nothing (no input needs a gradient)'}{where}")


def describe(step):
    """The explain line for a Step of `tensor.backward_steps()`."""
    return vjp_line(step.index, step.node, step.g, step.grads)


def node_name(node, names=None):
    """What a learner calls the tensor a node stands for: a parameter or tensor name, "leaf",
    or "the output of <op>"."""
    t = node.tensor() if node.tensor is not None else None
    name = None
    if t is not None:
        name = (names or {}).get(id(t)) or t.name
    name = name or node.name
    if name:
        return name
    if node.op is None:
        return "a leaf"
    return f"the output of {node.op.name}" + (f" [{node.scope}]" if node.scope else "")


class explain(Tracer):  # noqa: N801 - used like no_grad: `with explain():`
    """`with explain(): loss.backward()` prints the VJP story of the backward pass.

    file: where to print (default sys.stdout at the time of printing). params: a Module or
    {name: tensor} that names parameters in accumulation lines.
    """

    def __init__(self, file=None, params=None):
        self.file = file
        self.names = param_names(params)
        self.steps = 0  # VJPs printed so far
        self._uses = {}  # node -> contributions added up so far
        self._pending = []  # accumulation lines of the VJP that is running
        self._tracing = None

    def __enter__(self):
        self._tracing = tracing(self)
        self._tracing.__enter__()
        return self

    def __exit__(self, *exc):
        self._tracing.__exit__(*exc)
        self._tracing = None

    def _print(self, line):
        print(line, file=self.file or sys.stdout)

    # the tracer interface (autograd.tracing)

    # (no forward: explain mode tells the backward pass only)

    def backward_begins(self):
        """Each pass is told from VJP 0, its contributions counted afresh (as backward_steps)."""
        self.steps = 0
        self._uses.clear()
        self._pending.clear()

    def accumulate(self, node, user, total):
        n = self._uses.get(node, 1) + 1
        self._uses[node] = n
        self._pending.append(f"      + {node_name(node, self.names)} is used more than once: "
                             f"contribution {n} comes from {user.op.name}, the sum so far is "
                             f"{_shape_norm(total)}")

    def backward(self, node, g, grads):
        self._print(vjp_line(self.steps, node, g, grads))
        for line in self._pending:
            self._print(line)
        self._pending.clear()
        self.steps += 1
