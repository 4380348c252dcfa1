"""tinyattn.autograd.graph (torch.autograd.graph): Node, the saved tensors hooks and
register_multi_grad_hook.

Node is the class of every `tensor.grad_fn` (for isinstance checks; see autograd.GradFn for
what a node offers: name, next_functions, metadata, register_hook, register_prehook, calling
it). save_on_cpu is a context manager that changes nothing: the NumPy backend's saved arrays are
in host memory already, which is torch's semantics for CPU tensors (on the CuPy backend they
stay on the device). saved_tensors_hooks is refused: packing and unpacking every array an op
saves would cost every op call, where tinyattn keeps the per-op path short; use
utils.checkpoint to trade compute for memory, or torch. disable_saved_tensors_hooks makes it
(and save_on_cpu) raise its message inside its block, as torch's. register_multi_grad_hook is
torch's, on tensor hooks.
"""

import contextvars
import threading
from typing import NamedTuple

from . import autograd
from .autograd import GradFn

__all__ = ["Node", "saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks",
           "register_multi_grad_hook", "GradientEdge", "get_gradient_edge", "increment_version"]

Node = GradFn  # (torch's abstract Node: what grad_fn and next_functions give are instances)


class GradientEdge(NamedTuple):
    """torch's GradientEdge: the node a tensor's gradient flows into and its output number."""

    node: GradFn
    output_nr: int
    ownership_token: object = None  # (torch 2.x's third field: None here)


def get_gradient_edge(tensor):
    """torch's: (tensor.grad_fn, 0), or for a leaf its AccumulateGrad node; a RuntimeError for
    a tensor that does not require grad. (autograd.grad does not take edges yet: pass the
    tensor.)"""
    if not tensor.requires_grad or tensor._node is None:
        raise RuntimeError("get_gradient_edge: it is not possible to get the gradient edge for "
                           f"a Tensor {tuple(tensor.shape)} that does not require gradients")
    return GradientEdge(GradFn(tensor._node), 0)


def increment_version(tensor):
    """torch's: count one in-place change of the tensor (or of each of an iterable of them),
    so that a graph that saved it refuses it as changed."""
    for t in [tensor] if isinstance(tensor, autograd.TensorBase) else tensor:
        autograd.bump_version(t)

_disabled = contextvars.ContextVar("tinyattn_saved_tensors_hooks_disabled", default=None)


class saved_tensors_hooks:  # noqa: N801 - torch's name
    """torch's hooks on the tensors an op saves for backward: refused (see the module's
    docstring); inside disable_saved_tensors_hooks, its message is raised instead."""

    def __init__(self, pack_hook, unpack_hook):
        _refuse_if_disabled()
        raise NotImplementedError(
            "autograd.graph.saved_tensors_hooks: tinyattn does not pack and unpack the arrays "
            "an op saves for backward (doing it would cost every op call); to save memory, "
            "recompute instead with tinyattn.utils.checkpoint.checkpoint(block, x, "
            "use_reentrant=False), or use torch for offloading or compressing saved tensors")


class save_on_cpu:  # noqa: N801 - torch's name
    """torch's offloading of saved tensors to host memory: the saved arrays stay where they
    are, which for the NumPy backend is host memory already (torch's CPU semantics); nothing
    changes inside the block. pin_memory and device_type are accepted."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        _refuse_if_disabled()
        self.pin_memory, self.device_type = pin_memory, device_type

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


class disable_saved_tensors_hooks:  # noqa: N801 - torch's name
    """Inside the block (this thread or task), saved_tensors_hooks and save_on_cpu raise
    RuntimeError(error_message), as torch's."""

    def __init__(self, error_message):
        self.error_message = error_message
        self._tokens = []

    def __enter__(self):
        self._tokens.append(_disabled.set(self.error_message))
        return self

    def __exit__(self, *exc):
        _disabled.reset(self._tokens.pop())


def _refuse_if_disabled():
    message = _disabled.get()
    if message is not None:
        raise RuntimeError(message)


class _MultiHandle:
    """What register_multi_grad_hook returns: remove() takes every hook off."""

    def __init__(self, handles):
        self.handles = tuple(handles)

    def remove(self):
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """As torch's: mode "all" calls fn(grads) once per backward pass, after every tensor of
    `tensors` that the pass reaches got its gradient (grads: one per tensor, None for those
    the pass does not reach); mode "any" calls fn(grad) with the first gradient one of them
    gets in each pass. Returns a handle whose remove() takes it off."""
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = list(tensors)
    lock = threading.Lock()
    if mode == "any":
        last = [None]  # the walk state of the pass that called fn last

        def first(grad):
            grads = autograd.hook_pass()[0]
            with lock:
                seen, last[0] = last[0] is grads and grads is not None, grads
            if not seen:
                fn(grad)

        return _MultiHandle(t.register_hook(first) for t in tensors if t.requires_grad)
    nodes = [t._node for t in tensors]
    passes = {}  # id of a pass's gradient dict -> [that dict, calls expected, grads so far]

    def hook_for(i):
        def hook(grad):
            grads, node, keep = autograd.hook_pass()
            with lock:
                entry = passes.get(id(grads))
                if entry is None or entry[0] is not grads:
                    entry = passes[id(grads)] = [grads, _expected(nodes, node, grads, keep),
                                                 [None] * len(nodes)]
                entry[2][i] = grad
                entry[1] -= 1
                done = entry[1] <= 0
                if done:
                    del passes[id(grads)]
            if done:
                fn(entry[2])

        return hook

    return _MultiHandle(t.register_hook(hook_for(i)) for i, t in enumerate(tensors))


def _expected(nodes, current, pending, keep):
    """How many of the hooks on `nodes` the pass will call: those of the node it is at and of
    every node it will still reach from the pending ones (through the parents grad() keeps)."""
    if pending is None:
        return 1
    targets = {n for n in nodes if n is not None}
    oldest = max(n.seq for n in targets)  # (seq counts down: a node's parents are older)
    reached, stack = {current}, list(pending)
    while stack:
        n = stack.pop()
        if n in reached or n.seq > oldest:
            continue
        reached.add(n)
        parents = n.parents if keep is None else keep.get(n, ())
        stack.extend(p for p in parents or () if p is not None)
    return sum(1 for n in nodes if n in reached)
