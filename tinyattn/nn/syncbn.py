"""SyncBatchNorm, torch's: batch norm of input of any number of dims (2 or more) whose
statistics torch reduces over every process of a distributed group in training.

In one process (no process group initialised, or a group of one) it normalises exactly as
BatchNorm1d/2d/3d do (their forward, running statistics and num_batches_tracked);
convert_sync_batchnorm turns a model's BatchNorm*d modules into SyncBatchNorm ones that keep
their parameters and buffers (the same objects), as torch's. Training across several processes
(tinyattn.distributed over MPI with more than one rank) is refused: the statistics would have to
be reduced across the ranks, forward and backward, and that is not written yet.
"""

from .. import distributed
from .layers import _BatchNorm


class _AtLeastTwo:
    """The input dims SyncBatchNorm takes: 2 or more (for _BatchNorm's check and message)."""

    def __contains__(self, ndim):
        return ndim >= 2

    def __iter__(self):
        yield "at least 2"


class SyncBatchNorm(_BatchNorm):
    """Batch norm over dim 1 of (N, C, ...) input (2 dims or more), as torch's SyncBatchNorm in
    a single process. process_group is kept, as torch's (its statistics' group)."""

    _dims = _AtLeastTwo()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None, *,
                 bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = process_group

    def forward(self, input):  # noqa: A002 - torch's argument name
        if input.ndim < 2:  # (torch's ValueError and words)
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.ndim}D "
                             f"input, shape {tuple(input.shape)})")
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero (input "
                             f"shape {tuple(input.shape)})")
        if self.training and distributed.is_initialized() and \
                distributed.get_world_size(self.process_group) > 1:
            raise NotImplementedError(
                "SyncBatchNorm: training across several processes (the statistics reduced over "
                "the ranks) is not supported; use BatchNorm (each rank's own statistics) or "
                "train in one process")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """`module` with every BatchNorm*d inside (itself too: then a new module is returned)
        replaced by a SyncBatchNorm holding the same parameters and buffers (the objects
        themselves), its settings and training mode, as torch's."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group, bias=module.bias is not None)
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
