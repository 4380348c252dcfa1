"""torch.nn.parallel.DistributedDataParallel on tinyattn.distributed (MPI, no other transport).

`DDP(model)` after `distributed.init_process_group(...)` copies rank 0's parameters and
buffers to every rank, and from then on averages the gradients over the ranks at the end of
each backward that follows a forward through it: every parameter gets a post accumulate grad
hook, the forward finds the parameters its outputs depend on (a walk of their graph), and when
the last of those has taken its gradient, `distributed.allreduce_gradients` averages every
parameter's .grad in buckets (a parameter no rank used keeps .grad None; one used on some ranks
only takes zeros on the others, as torch's find_unused_parameters=True). While
`require_backward_grad_sync` is False at the forward (`with model.no_sync():`), nothing is
averaged: the .grads accumulate locally, and the next synced backward averages the sums, as
torch's gradient accumulation does.

DataParallel and data_parallel are torch's single-process ones as they are on one device: the
wrapper's call is its module's (state_dict keys "module.*"; device_ids [] without a GPU, as
torch's), and data_parallel, with no GPU, raises torch's "device type could not be determined".
"""

import contextlib
import functools
import weakref

from .. import autograd, distributed
from ..tensor import Tensor
from .module import Module

NAME = "DistributedDataParallel"


def _tensors(out):
    """The tensors in a forward's output (a tensor, or tuples, lists and dicts of them)."""
    if isinstance(out, Tensor):
        yield out
    elif isinstance(out, (tuple, list)):
        for item in out:
            yield from _tensors(item)
    elif isinstance(out, dict):
        for item in out.values():
            yield from _tensors(item)


def _reached(out, params):
    """{id(p): p} for the parameters of `params` that the output's graph leads back to."""
    wanted = {id(p._node): p for p in params if p._node is not None}
    found, seen = {}, set()
    stack = [t._node for t in _tensors(out) if t._node is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op is None:
            p = wanted.get(id(node))
            if p is not None:
                found[id(p)] = p
        else:
            stack.extend(n for n in node.parents if n is not None)
    return found


def _ready(ref, tensor):
    """A parameter's post accumulate grad hook: the last one the armed forward waits for
    averages the gradients."""
    ddp = ref()
    if ddp is None or ddp._ddp_round is None:
        return
    ddp._ddp_round.pop(id(tensor), None)
    ddp._ddp_fired = True
    if not ddp._ddp_round:
        ddp._ddp_round = None
        distributed.allreduce_gradients(ddp._ddp_params, ddp.bucket_bytes)


class DistributedDataParallel(Module):
    """torch's DDP wrapper: `.module` is the model (state_dict keys "module.*"), a call is its
    forward, gradients are averaged over the ranks after backward (see the module docstring).
    device_ids, output_device, dim, process_group, gradient_as_bucket_view, static_graph and
    check_reduction are taken and ignored (one device per process, the default group);
    find_unused_parameters is always on; bucket_cap_mb sizes the Allreduce buckets."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"{NAME}: expects a Module, got {type(module).__name__}")
        distributed._group(NAME)
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.bucket_bytes = distributed.BUCKET_BYTES if bucket_cap_mb is None else \
            int(bucket_cap_mb * 2**20)
        self.require_backward_grad_sync = True
        self._ddp_params = [p for p in module.parameters() if p.requires_grad]
        self._ddp_round = None  # {id(p): p} the armed backward has still to reach, or None
        self._ddp_fired = False  # whether a gradient of the armed round arrived
        distributed.broadcast_parameters([*module.parameters(), *module.buffers()])
        hook = functools.partial(_ready, weakref.ref(self))
        self._ddp_handles = [p.register_post_accumulate_grad_hook(hook)
                             for p in self._ddp_params]

    def forward(self, *inputs, **kwargs):
        self._finish_round()
        buffers = list(self.module.buffers())
        if self.broadcast_buffers and buffers and distributed.get_world_size() > 1:
            distributed.broadcast_parameters(buffers)  # (BatchNorm's statistics: rank 0's)
        out = self.module(*inputs, **kwargs)
        if self.require_backward_grad_sync and autograd.is_grad_enabled():
            self._ddp_round = _reached(out, self._ddp_params) or None
            self._ddp_fired = False
        return out

    def _finish_round(self):
        """Drop the previous forward's reduction; refuse one that a backward began but did not
        finish (a parameter the outputs depend on got no gradient: the ranks' gradients would
        differ silently)."""
        left, fired = self._ddp_round, self._ddp_fired
        self._ddp_round, self._ddp_fired = None, False
        if left and fired:
            missing = ", ".join(f"{n} {tuple(p.shape)}" for n, p in self.named_parameters()
                                if id(p) in left)
            raise distributed.DistributedError(
                f"{NAME}: the previous backward did not reach {missing}, which the forward's "
                "outputs depend on, so no gradient was averaged: call backward on a loss that "
                "uses every output that requires grad (or detach() the others)")

    @contextlib.contextmanager
    def no_sync(self):
        """Inside the block, forwards arm no averaging: their backwards accumulate .grad
        locally (torch's gradient accumulation); the first synced backward averages the sums."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old


def _gpu_ids(device_ids):
    """torch's device_ids: [] without a GPU; else the given ones (all by default) as ints."""
    from .. import cuda

    if not cuda.is_available():
        return []
    ids = range(cuda.device_count()) if device_ids is None else device_ids
    return [getattr(d, "index", d) or 0 for d in ids]


class DataParallel(Module):
    """torch's nn.DataParallel on tinyattn's one device: `.module` is the model (state_dict
    keys "module.*") and a call is its forward (no replicas: the CuPy backend is one GPU)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: expects a Module, got {type(module).__name__}")
        self.module, self.dim = module, dim
        self.device_ids = _gpu_ids(device_ids)
        self.output_device = output_device if output_device is not None or \
            not self.device_ids else self.device_ids[0]

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """torch's functional DataParallel: module(*inputs, **module_kwargs) on the one GPU;
    without one, torch's RuntimeError."""
    if not _gpu_ids(device_ids):
        raise RuntimeError("device type could not be determined")
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
