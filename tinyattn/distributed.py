"""Data parallelism on MPI: N processes, one model each, gradients averaged by Allreduce.

`init()` joins the MPI world that `mpiexec -n N` started (through mpi4py), or makes a world of
one process when there is none (no launcher in the environment, or no mpi4py: `pip install -e
".[mpi]"`). Then `rank()`, `world_size()`, `is_main()`, `barrier()`; `shard(n)` is the rows of a
global batch of n that this rank computes (DistributedSampler's job); `broadcast_parameters`
copies rank 0's weights to every rank; `allreduce_gradients` averages every parameter's `.grad`
over the ranks with few large messages: the gradients are flattened into buckets of at most
`bucket_bytes`, one in-place Allreduce each. Averaging the N shards' gradients is the gradient
of the whole batch when each rank's loss is its share of the global batch's mean loss.

CuPy gradients go through NCCL (cupy.cuda.nccl) when CuPy has it, else through host memory;
the NCCL path has not been run (no GPU where this was written). `abort_on_error()` turns an
exception on one rank into its message and MPI Abort, so no rank waits forever in a collective.
Ranks that disagree (other parameters, or `check_same` settings) all raise DisagreementError
together instead of reducing mismatched buffers; a process a launcher started must call
`init()` before anything here asks about the world (DistributedError otherwise).
"""

import contextlib
import os
import sys
import time
import traceback

import numpy as np

from .errors import TinyattnError

INSTALL = 'pip install -e ".[mpi]"  (mpi4py and the mpich wheel)'
BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's default bucket size
# the variables MPI launchers set in every process they start: (size, rank)
LAUNCHERS = (("PMI_SIZE", "PMI_RANK"),  # MPICH's hydra, Intel MPI, srun --mpi=pmi2
             ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),  # Open MPI
             ("MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"))  # MVAPICH

# joined: init() ran (before that, a process a launcher started must not answer as a world of 1)
_world = {"comm": None, "rank": 0, "size": 1, "nccl": None, "joined": False}
stats = {"messages": 0, "bytes": 0}  # what allreduce_gradients handed to MPI, summed


class DistributedError(TinyattnError, RuntimeError):
    """The MPI world cannot be joined, or the ranks disagree about what to reduce."""


class DisagreementError(DistributedError, ValueError):
    """The ranks hold different parameters, settings or data. Every rank raises it at the same
    point, after one collective compared them, so no rank is left waiting in a collective:
    abort_on_error lets it end each process as any error would, without MPI Abort."""


def launched_size():
    """The world size the MPI launcher announced in the environment (1 without a launcher)."""
    for size, _ in LAUNCHERS:
        if os.environ.get(size, "").isdigit():
            return int(os.environ[size])
    return 1


def init(mpi=None):
    """Join the MPI world (once); returns its size. mpi=None: only when a launcher started this
    process (so a plain run never loads MPI); True: always (a singleton world without a launcher);
    False: a world of one."""
    if _world["comm"] is not None:
        return _world["size"]
    if mpi is None:
        mpi = launched_size() > 1
    if not mpi:
        _world.update(rank=0, size=1, joined=True)
        return 1
    try:
        from mpi4py import MPI
    except ImportError as e:
        if launched_size() > 1:
            raise DistributedError(f"this process is one of {launched_size()} that an MPI "
                                   f"launcher started, but mpi4py is missing: {INSTALL}") from e
        _world.update(rank=0, size=1, joined=True)
        return 1
    comm = MPI.COMM_WORLD
    _world.update(comm=comm, rank=comm.Get_rank(), size=comm.Get_size(), joined=True)
    return _world["size"]


def _joined():
    """The world, once init() ran; a process that a launcher started as one of N > 1 and that
    has not joined would answer as a world of one (rank 0, nothing reduced): refused."""
    if not _world.get("joined") and launched_size() > 1:
        raise DistributedError(f"this process is one of {launched_size()} processes an MPI "
                               "launcher started, but it has not joined their world: call "
                               "distributed.init() first (or init(mpi=False) for a world of "
                               "one)")
    return _world


def rank():
    return _joined()["rank"]


def world_size():
    return _joined()["size"]


def is_main():
    """Whether this process is rank 0, the one that writes files and prints."""
    return _joined()["rank"] == 0


def _mpi():
    from mpi4py import MPI

    return MPI


def barrier():
    if _joined()["size"] > 1:
        _world["comm"].Barrier()


def _whole(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def shard(n, rank=None, size=None):
    """This rank's rows of a global batch of `n`: a slice, contiguous, the sizes differing by at
    most one (the first n % size ranks take one more), together every row exactly once."""
    world = _joined() if rank is None or size is None else _world
    rank = world["rank"] if rank is None else rank
    size = world["size"] if size is None else size
    for name, value, low in (("n", n, 0), ("size", size, 1)):
        if not _whole(value) or value < low:
            raise ValueError(f"shard: {name} must be a whole number >= {low}: got {value!r}")
    if not _whole(rank) or not 0 <= rank < size:
        raise ValueError(f"shard: rank must be in [0, {size}) for a world of {size}: got "
                         f"{rank!r}")
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (rank < extra))


def broadcast_object(obj, root=0):
    """`obj` from rank `root` on every rank (pickled: settings, optimizer state, metrics)."""
    return _world["comm"].bcast(obj, root=root) if _joined()["size"] > 1 else obj


def allreduce_max(value):
    """The largest of every rank's number (every rank must call it)."""
    if _joined()["size"] == 1:
        return value
    return _world["comm"].allreduce(value, op=_mpi().MAX)


def allreduce_sum(values):
    """Every rank's float64 vector, summed elementwise (one small Allreduce)."""
    values = np.array(values, dtype=np.float64)
    if _joined()["size"] > 1:
        _world["comm"].Allreduce(_mpi().IN_PLACE, values, op=_mpi().SUM)
    return values


def _differs(a, b):
    return a != b and repr(a) != repr(b)  # (nan is nan: the same setting, not a difference)


def check_same(values, what, context=None):
    """Raise DisagreementError on every rank unless each rank's `values` (a dict, label ->
    value) equal rank 0's, with one allgather; the message names the first rank that differs,
    its values and rank 0's, each followed by its `context` (shown, not compared):
    "rank 1 was started with --steps 10, rank 0 with --steps 20: every process must get the
    same settings"."""
    if _joined()["size"] == 1:
        return
    every = _world["comm"].allgather((values, context or {}))
    first, first_context = every[0]
    for r, (theirs, their_context) in enumerate(every):
        differ = [k for k in first if k not in theirs or _differs(theirs[k], first[k])]
        differ += [k for k in theirs if k not in first]
        if differ:
            raise DisagreementError(f"rank {r} was started with "
                                    f"{_shown(theirs, differ, their_context)}, rank 0 with "
                                    f"{_shown(first, differ, first_context)}: every process "
                                    f"must get the same {what}")


def _shown(values, labels, context):
    said = " ".join(f"{k} {values[k]}" if k in values else f"no {k}" for k in labels)
    extra = ", ".join(f"{k} {v}" for k, v in context.items())
    return f"{said} ({extra})" if extra else said


def _params(model):
    return list(model.parameters() if hasattr(model, "parameters") else model)


def _signature(params):
    """(dtype code, shape, backend) per parameter: a few microseconds for a model's dozens."""
    return [(p._data.dtype.char, p._data.shape, p.backend.name) for p in params]


def _check_same_parameters(what, params, which=""):
    """DisagreementError on every rank unless every rank's parameters have rank 0's count,
    dtypes, shapes and backends (else the reductions after this would mismatch: MPI errors, a
    hang, or garbage). One small bcast of rank 0's signature and one allreduce of an int per
    call; the rank that differs sends its own signature only when one does."""
    comm, me, size = _world["comm"], _world["rank"], _world["size"]
    mine = _signature(params)
    first = comm.bcast(mine if me == 0 else None, root=0)
    # size - r for the lowest rank r that differs (the largest such number), 0 when none does
    odd = comm.allreduce(size - me if mine != first else 0, op=_mpi().MAX)
    if not odd:
        return
    r = size - odd
    theirs = comm.bcast(mine, root=r)
    if len(theirs) != len(first):
        problem = (f"rank {r} has {len(theirs)} parameters{which}, rank 0 has {len(first)}")
    else:
        i = next(i for i, (a, b) in enumerate(zip(theirs, first, strict=True)) if a != b)
        show_backend = theirs[i][2] != first[i][2]

        def described(sig):
            code, shape, backend = sig
            return f"{np.dtype(code).name} {shape}" + (f" on {backend}" if show_backend else "")

        problem = (f"parameter {i} is {described(theirs[i])} on rank {r} but "
                   f"{described(first[i])} on rank 0")
    raise DisagreementError(f"{what}: {problem}: every rank must hold the same parameters "
                            "(build the model the same way on each)")


def broadcast_parameters(model, root=0):
    """Copy rank `root`'s parameters into every rank's, in place (through host memory); every
    rank's must have the same count, shapes and dtypes (DisagreementError on every rank)."""
    if _joined()["size"] == 1:
        return
    params = _params(model)
    _check_same_parameters("broadcast_parameters", params)
    for p in params:
        be = p.backend
        host = np.ascontiguousarray(be.to_numpy(p._data))
        _world["comm"].Bcast(host, root=root)
        p._data[...] = host if be.name == "numpy" else be.asarray(host)


def allreduce_gradients(model, bucket_bytes=BUCKET_BYTES):
    """Average every parameter's `.grad` over the ranks, in place; returns the bytes reduced.

    The parameters that require grad must have the same count, shapes and dtypes on every
    rank (else DisagreementError on every rank, before anything is reduced). A parameter whose
    .grad is None on some ranks but not others takes zeros there (one small Allreduce finds
    out); one whose .grad is None everywhere stays None. Gradients are grouped by backend and
    dtype into buckets of at most `bucket_bytes` (a larger tensor is a bucket of its own), one
    in-place Allreduce per bucket.
    """
    size = _joined()["size"]
    if size == 1:
        return 0
    params = [p for p in _params(model) if p.requires_grad]
    _check_same_parameters("allreduce_gradients", params, " that require grad")
    have = np.array([p.grad is not None for p in params], dtype=np.uint8)
    _world["comm"].Allreduce(_mpi().IN_PLACE, have, op=_mpi().MAX)
    live = []
    for p, any_rank in zip(params, have, strict=True):
        if any_rank and p.grad is None:
            from .tensor import Tensor

            p.grad = Tensor._wrap(p.backend.xp.zeros_like(p._data), p.backend)
        if any_rank:
            live.append(p.grad)
    groups = list(buckets(live, bucket_bytes))
    sent = sum(_reduce_bucket(bucket, size) for bucket in groups)
    stats["messages"] += len(groups)
    stats["bytes"] += sent
    return sent


def buckets(grads, bucket_bytes):
    """Consecutive groups of gradients of one backend and dtype, each at most `bucket_bytes`
    (or one gradient larger than that)."""
    groups = {}
    for g in grads:
        groups.setdefault((g.backend.name, g._data.dtype.str), []).append(g)
    for group in groups.values():
        bucket, nbytes = [], 0
        for g in group:
            if bucket and nbytes + g._data.nbytes > bucket_bytes:
                yield bucket
                bucket, nbytes = [], 0
            bucket.append(g)
            nbytes += g._data.nbytes
        if bucket:
            yield bucket


def _reduce_bucket(bucket, size):
    be = bucket[0].backend
    if be.name != "numpy" and _nccl(be) is not None:
        return _reduce_nccl(bucket, size, be)
    flat = np.concatenate([np.ravel(be.to_numpy(g._data)) for g in bucket])
    dtype = flat.dtype
    if dtype not in (np.float32, np.float64):  # MPI has no float16 sum: reduce in float32
        flat = flat.astype(np.float32)
    _world["comm"].Allreduce(_mpi().IN_PLACE, flat, op=_mpi().SUM)
    flat /= size
    offset = 0
    for g in bucket:
        piece = flat[offset:offset + g._data.size].reshape(g._data.shape).astype(dtype, copy=False)
        g._data[...] = piece if be.name == "numpy" else be.asarray(piece)
        offset += g._data.size
    return flat.nbytes


def _nccl(be):
    """A NCCL communicator over this MPI world for CuPy arrays, or None without NCCL."""
    if _world["nccl"] is None:
        try:
            from cupy.cuda import nccl
        except ImportError:
            _world["nccl"] = False
            return None
        uid = _world["comm"].bcast(nccl.get_unique_id() if is_main() else None, root=0)
        _world["nccl"] = (nccl, nccl.NcclCommunicator(_world["size"], uid, _world["rank"]))
    return _world["nccl"] or None


def _reduce_nccl(bucket, size, be):
    """Untested without a GPU: one in-place ncclAllReduce on a flattened device buffer."""
    nccl, comm = _world["nccl"]
    xp = be.xp
    flat = xp.concatenate([g._data.ravel() for g in bucket])
    codes = {"float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32,
             "float64": nccl.NCCL_FLOAT64}
    if flat.dtype.name not in codes:
        raise DistributedError(f"allreduce_gradients: NCCL cannot sum {flat.dtype} gradients")
    stream = xp.cuda.get_current_stream()
    comm.allReduce(flat.data.ptr, flat.data.ptr, flat.size, codes[flat.dtype.name],
                   nccl.NCCL_SUM, stream.ptr)
    flat /= size
    offset = 0
    for g in bucket:
        g._data[...] = flat[offset:offset + g._data.size].reshape(g._data.shape)
        offset += g._data.size
    return flat.nbytes


def ring_bound(grad_bytes, size):
    """The bytes each rank must send per Allreduce of `grad_bytes`, at best: 2(N-1)/N of them
    (ring allreduce: a reduce-scatter then an all-gather, each moving (N-1)/N of the data)."""
    return 2 * (size - 1) / size * grad_bytes


@contextlib.contextmanager
def abort_on_error(stream=None):
    """In a world of N > 1, an exception on this rank prints its message (naming the rank) and
    aborts every rank through MPI Abort: the others would otherwise wait in a collective forever.
    In a world of one, and for a DisagreementError (every rank raised it), the exception goes on
    as usual."""
    try:
        yield
    except BaseException as e:
        if _world["size"] == 1 or (isinstance(e, SystemExit) and not e.code) or \
                isinstance(e, DisagreementError):  # raised on every rank: nobody is waiting
            raise
        stream = stream or sys.stderr
        where = f"tinyattn: rank {_world['rank']} of {_world['size']}"
        if not isinstance(e, (TinyattnError, ValueError, OSError, KeyboardInterrupt)):
            traceback.print_exc(file=stream)
        print(f"{where}: error: {type(e).__name__}: {e}; stopping every rank", file=stream,
              flush=True)
        time.sleep(0.5)  # mpiexec forwards the message through a pipe; Abort may tear it down first
        _world["comm"].Abort(1)  # mpiexec ends every rank (MPICH's may return here first)
        os._exit(1)
