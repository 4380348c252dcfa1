"""Explain mode: the backward pass told one VJP per line, in the order it runs.

    with tinyattn.explain():
        loss.backward()

prints, for every op the gradient passes through, its step index, the op, its VJP formula,
the shape and norm of the incoming gradient g and of each gradient it sends to its inputs (a
one-element gradient's signed value instead: `gy () = -0.104`) — and a line whenever a
tensor used in several places adds up another contribution. A backward pass run inside a
VJP of the pass (checkpoint recomputing its block, grad() in a custom backward) is told
indented, its steps numbered inside the step whose VJP runs it: [5.0], [5.1]
come before [5], and the outer pass keeps its own numbers and counts.
`describe(step)` gives the same line for a Step of `loss.backward_steps()`, for notebooks.
`param_names` reads the `params=` that explain mode, viz and the explorer take.
"""

import sys

from . import autograd
from .autograd import TensorBase, Tracer, tracing
from .display import one_line
from .errors import fmt_shape

# the code of the walk behind every backward pass: a running pass has a frame of it on the stack
_WALK = getattr(getattr(autograd, "_walk", None), "__code__", None)


def norm(a):
    """L2 norm of a NumPy or CuPy array, as a Python float (accumulated in float64)."""
    a = a.astype("float64")
    return float((a * a).sum()) ** 0.5


def named_params(params, who="param_names"):
    """`params=` as None, a Module or a {name: tensor} dict: (name, tensor) pairs (a list,
    module.named_parameters()'s generator) become a dict, read once. Anything else (a list of
    bare tensors, module.parameters(), a {tensor: name} dict) is a TypeError from `who`: it
    would unpack wrongly or name nothing, silently."""
    if params is None or hasattr(params, "named_parameters"):
        return params
    if isinstance(params, dict):
        for k, (name, t) in enumerate(params.items()):
            if not isinstance(name, str):
                raise _params_error(who, f"a dict whose key {k} is {_a(name)}")
            if not isinstance(t, TensorBase):
                raise _params_error(who, f"a dict whose value for {name!r} is {_a(t)}")
        return params
    if isinstance(params, (str, bytes, TensorBase)) or not hasattr(params, "__iter__"):
        raise _params_error(who, _a(params))
    kind = _a(params)
    pairs = list(params)
    for k, item in enumerate(pairs):
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], TensorBase)):
            raise _params_error(who, f"{kind} whose item {k} is {_a(item)}")
    return dict(pairs)


def _a(value):
    """What a value is, for an error: "a Tensor of shape (3, 4)", "a generator",
    "('w', ndarray)"."""
    if isinstance(value, tuple):
        return "(" + ", ".join(repr(v) if isinstance(v, str) else type(v).__name__
                               for v in value) + ")"
    name = type(value).__name__
    text = ("an " if name[0].lower() in "aeiou" else "a ") + name
    if isinstance(value, TensorBase):
        text += f" of shape {fmt_shape(value.shape)}"
    return text


def _params_error(who, got):
    return TypeError(f"{who}: params must be a Module, a {{name: tensor}} dict or (name, tensor) "
                     f"pairs (as module.named_parameters() gives), got {got}; pass the module, "
                     "or its named_parameters()")


def param_names(params, who="param_names"):
    """id(tensor) -> name, from a Module, a dict {name: tensor} or (name, tensor) pairs (see
    named_params; `who` is the function an error names)."""
    params = named_params(params, who)
    if params is None:
        return {}
    pairs = params.named_parameters() if hasattr(params, "named_parameters") else params.items()
    return {id(t): name for name, t in pairs}


def walk_depth():
    """How many backward passes the one running here runs inside: 0 for a pass of its own, 1
    for a pass a VJP of another runs (checkpoint's recomputation), and so on. Counted from the
    walks on the call stack, because a tracer is told when a pass begins but not when it ends
    (autograd._begin); a pass not running here (a backward_steps() paused) is not counted."""
    running = 0
    frame = sys._getframe(1)
    while frame is not None:
        running += frame.f_code is _WALK
        frame = frame.f_back
    return max(running - 1, 0)


def grad_text(a):
    """A gradient as a learner reads it: a one-element array's signed value ("= -1.5", as
    micrograd's `grad -1.5000`: a norm would hide the sign), a bigger one's norm ("‖3.46‖")."""
    if a.size == 1:
        return f"= {a.item():.3g}"
    return f"‖{norm(a):.3g}‖"


def _shape_norm(a):
    return f"{fmt_shape(a.shape)} {grad_text(a)}"


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
    made = f" -> {one_line(node.name)}" if node.name else ""  # the tensor it made, when named
    return (f"[{index}] {op.name}{made}: {op.formula}{fused} | g {_shape_norm(g)} -> "
            f"{sent or 'nothing (no input needs a gradient)'}{where}")


def describe(step):
    """The explain line for a Step of `tensor.backward_steps()`."""
    return vjp_line(step.index, step.node, step.g, step.grads)


def live_tensor(node):
    """The tensor a node stands for (a leaf, a retain_grad tensor), while the node is still
    that tensor's: None when it is gone, or when an in-place op has since moved the tensor on
    to a newer node (its name and .grad are then the newer node's, not this one's)."""
    t = node.tensor() if node.tensor is not None else None
    return t if t is not None and t._node is node else None


def node_name(node, names=None):
    """What a learner calls the tensor a node stands for: a parameter or tensor name, "leaf",
    or "the output of <op>"."""
    t = live_tensor(node)
    name = None
    if t is not None:
        name = (names or {}).get(id(t)) or t.name
    name = name or node.name
    if name:
        return one_line(name)
    if node.op is None:
        return "a leaf"
    return f"the output of {node.op.name}" + (f" [{node.scope}]" if node.scope else "")


class explain(Tracer):  # noqa: N801 - used like no_grad: `with explain():`
    """`with explain(): loss.backward()` prints the VJP story of the backward pass.

    file: where to print (default sys.stdout at the time of printing). params: a Module,
    {name: tensor} or (name, tensor) pairs that name parameters in accumulation lines.
    """

    def __init__(self, file=None, params=None):
        self.file = file
        self.names = param_names(params, "explain")
        # the number of the next step at each depth: [outer] in a pass of its own, [5, 2] in
        # a pass that the VJP of outer step 5 runs, after its steps 5.0 and 5.1
        self._numbers = [0]
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

    @property
    def steps(self):
        """VJPs of the (outermost) pass told so far; those of passes inside it not counted."""
        return self._numbers[0]

    def _print(self, line):
        print(line, file=self.file or sys.stdout)

    def _at(self, depth):
        """The step numbers down to `depth`: deeper passes are over (their step's VJP, or the
        pass around them, has moved on); a depth reached for the first time starts at 0."""
        del self._numbers[depth + 1:]
        self._numbers += [0] * (depth + 1 - len(self._numbers))

    # the tracer interface (autograd.tracing)

    # (no forward: explain mode tells the backward pass only)

    def backward_begins(self):
        """Each pass of its own is told from VJP 0, its contributions counted afresh (as
        backward_steps). A pass inside a VJP (checkpoint) is part of the pass around it: the
        outer numbers and counts go on; a second such pass in the same VJP numbers on."""
        depth = walk_depth()
        if depth == 0:
            self._numbers = [0]
            self._uses.clear()
            self._pending.clear()
        else:
            self._at(depth)

    def accumulate(self, node, user, total):
        n = self._uses.get(node, 1) + 1
        self._uses[node] = n
        self._pending.append(f"      + {node_name(node, self.names)} is used more than once: "
                             f"contribution {n} comes from {user.op.name}, the sum so far is "
                             f"{_shape_norm(total)}")

    def backward(self, node, g, grads):
        depth = walk_depth()
        self._at(depth)
        pad = "    " * depth  # a nested pass's lines (its sums too), indented
        self._print(pad + vjp_line(".".join(map(str, self._numbers)), node, g, grads))
        for line in self._pending:
            self._print(pad + line)
        self._pending.clear()
        self._numbers[depth] += 1
