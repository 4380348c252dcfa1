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

torch.distributed's names, for a PyTorch DDP script (nanoGPT's train.py) with `torch` swapped
for tinyattn: `init_process_group(backend)` joins the same MPI world, whatever the backend
string ("nccl", "gloo", "mpi", None: every one runs over MPI here, with no other transport);
`destroy_process_group()`, `is_initialized()`, `is_available()`, `get_rank()`,
`get_world_size()`, `barrier()`, and the collectives on tensors, in place: `all_reduce(t, op)`
(ReduceOp SUM, AVG, MAX, MIN, PRODUCT), `broadcast(t, src)`, `all_gather(list, t)`, and
`all_gather_object`. They run through host memory, one MPI call each, and every rank must pass
tensors of the same shape and dtype (as with torch). The module wrapper is
`tinyattn.nn.parallel.DistributedDataParallel`.

Start such a script with `mpiexec -n N python train.py`, not torchrun. torchrun's variables are
not set by mpiexec, so when this module is imported in a process that an MPI launcher started
as one of N > 1 it sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE in os.environ from
the launcher's (PMI_RANK, OMPI_COMM_WORLD_RANK, MPI_LOCALRANKID...): a script's
`int(os.environ.get('RANK', -1)) != -1` test and its reads of them after init_process_group
then work unchanged. init_process_group sets them again from MPI's world itself (over any
stale value; in a world of one, 0 and 1). `get_rank()` and `get_world_size()` are the way that
needs no environment. A process with torchrun's WORLD_SIZE > 1 but no MPI launcher is refused
(it would be a world of one on its own).
"""

import contextlib
import enum
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
# and the ones for this machine's processes: (local size, local rank)
LOCAL_LAUNCHERS = (("MPI_LOCALNRANKS", "MPI_LOCALRANKID"),  # MPICH's hydra
                   ("OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),  # Open MPI
                   ("MV2_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_RANK"))  # MVAPICH

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


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank got here (torch's keywords are taken and ignored)."""
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


# ---- torch.distributed's names, on the world above (see the module's docstring) ----------------


class ReduceOp(enum.Enum):
    """How all_reduce combines the ranks' tensors (torch.distributed.ReduceOp's, those MPI has;
    AVG is MPI's SUM divided by the world size)."""

    SUM = "SUM"
    AVG = "AVG"  # (distinct values: an Enum would make a second "SUM" an alias of SUM)
    PRODUCT = "PROD"
    MIN = "MIN"
    MAX = "MAX"


class _Work:
    """What a collective returns with async_op=True: it has finished already (MPI's blocking
    call), so wait() returns at once."""

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True


def launched_rank():
    """This process's rank as the MPI launcher announced it in the environment (0 without)."""
    for size, rank in LAUNCHERS:
        if os.environ.get(size, "").isdigit() and os.environ.get(rank, "").isdigit():
            return int(os.environ[rank])
    return 0


def _launched_local():
    """(local rank, local size) from the launcher's environment, or None where it gives none."""
    for size, rank in LOCAL_LAUNCHERS:
        if os.environ.get(size, "").isdigit() and os.environ.get(rank, "").isdigit():
            return int(os.environ[rank]), int(os.environ[size])
    return None


def _set_torchrun_env(rank, size, local):
    """torchrun's variables in os.environ: RANK, WORLD_SIZE, and LOCAL_RANK, LOCAL_WORLD_SIZE
    when `local` ((local rank, local size)) is known."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size))
    if local is not None:
        os.environ.update(LOCAL_RANK=str(local[0]), LOCAL_WORLD_SIZE=str(local[1]))


def _local_of_world():
    """(local rank, local size): the launcher's, else the ranks that share this machine's memory
    (one collective), else (0, 1) in a world of one."""
    local = _launched_local()
    if local is not None or _world["size"] == 1:
        return local or (0, 1)
    node = _world["comm"].Split_type(_mpi().COMM_TYPE_SHARED)
    local = (node.Get_rank(), node.Get_size())
    node.Free()
    return local


def _group(name):
    """The world, once init_process_group ran; DistributedError naming `name` before."""
    if not _world.get("group"):
        raise DistributedError(f"{name}: the default process group has not been initialized: "
                               "call init_process_group() first")
    return _world


def is_available():
    """True: the functions here always work (a world of one without MPI)."""
    return True


def is_initialized():
    """Whether init_process_group ran (and destroy_process_group has not since)."""
    return bool(_world.get("group"))


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """torch's: join the world. Every backend runs over MPI here (tinyattn has no NCCL or Gloo
    transport of its own); the world is the one `mpiexec -n N` started (a world of one without
    a launcher). world_size and rank, when given, must be MPI's. Sets RANK, WORLD_SIZE,
    LOCAL_RANK and LOCAL_WORLD_SIZE in os.environ from MPI's world."""
    name = "init_process_group"
    if _world.get("group"):
        raise DistributedError(f"{name}: the default process group is already initialized "
                               "(call destroy_process_group() first)")
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"{name}: backend must be a string such as 'nccl' or 'gloo' (or None): "
                        f"got {backend!r}")
    asked = os.environ.get("WORLD_SIZE", "")
    if launched_size() == 1 and asked.isdigit() and int(asked) > 1:
        raise DistributedError(f"{name}: WORLD_SIZE={asked} in the environment (torchrun's?) "
                               "but no MPI launcher started this process, so it would be a "
                               f"world of 1 on its own: start it with `mpiexec -n {asked} "
                               "python ...` (tinyattn's processes talk through MPI)")
    init()
    size, me = _world["size"], _world["rank"]
    if world_size not in (None, -1) and world_size != size:
        raise DistributedError(f"{name}: world_size={world_size} but MPI's world has {size} "
                               f"process{'es' if size != 1 else ''} (mpiexec -n sets it)")
    if rank not in (None, -1) and rank != me:
        raise DistributedError(f"{name}: rank={rank} but this process is rank {me} of MPI's "
                               "world (MPI numbers the processes)")
    _set_torchrun_env(me, size, _local_of_world())
    _world["group"] = backend or "mpi"


def destroy_process_group(group=None):
    """torch's: leave the default process group (MPI itself ends with the process)."""
    _group("destroy_process_group")
    _world["group"] = None


def get_rank(group=None):
    return _group("get_rank")["rank"]


def get_world_size(group=None):
    return _group("get_world_size")["size"]


def _host(name, tensor):
    """The tensor's values as a NumPy array of a type MPI reduces (a copy)."""
    from .tensor import Tensor

    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name}: expects a tensor, got {type(tensor).__name__}")
    array = np.array(tensor.backend.to_numpy(tensor._data), copy=True, ndmin=0)
    kind = array.dtype.kind
    if (kind == "f" and array.dtype.itemsize < 4) or kind not in "fiuc":
        array = array.astype(np.float32)  # (MPI has no float16 or bool sum)
    return np.ascontiguousarray(array)


def _put(tensor, values):
    """Write `values` into the tensor's memory, in place (a change counted as an in-place op's)."""
    from .autograd import bump_version

    data, be = tensor._data, tensor.backend
    values = np.asarray(values).reshape(data.shape).astype(data.dtype, copy=False)
    if isinstance(data, np.generic):  # (a 0-d op result's scalar: no memory to write into)
        tensor._data = np.array(values)
    else:
        data[...] = values if be.name == "numpy" else be.asarray(values)
    bump_version(tensor)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """torch's: combine every rank's `tensor` by `op` (a ReduceOp), into each rank's, in place."""
    name = "all_reduce"
    world = _group(name)
    array = _host(name, tensor)
    if not isinstance(op, ReduceOp):
        raise ValueError(f"{name}: op must be a ReduceOp (SUM, AVG, MAX, MIN, PRODUCT): got "
                         f"{op!r}")
    if op is ReduceOp.AVG and tensor._data.dtype.kind not in "fc":
        raise TypeError(f"{name}: ReduceOp.AVG needs a floating-point tensor: got "
                        f"{tensor._data.dtype.name} {tuple(tensor._data.shape)}")
    if world["size"] > 1:
        mpi_op = getattr(_mpi(), "SUM" if op is ReduceOp.AVG else op.value)
        world["comm"].Allreduce(_mpi().IN_PLACE, array, op=mpi_op)
        if op is ReduceOp.AVG:
            array /= world["size"]
        _put(tensor, array)
    return _Work() if async_op else None


def broadcast(tensor, src, group=None, async_op=False):
    """torch's: rank `src`'s `tensor` into every rank's, in place."""
    name = "broadcast"
    world = _group(name)
    array = _host(name, tensor)
    if not _whole(src) or not 0 <= src < world["size"]:
        raise ValueError(f"{name}: src {src!r} is not a rank of a world of {world['size']}")
    if world["size"] > 1:
        world["comm"].Bcast(array, root=src)
        _put(tensor, array)
    return _Work() if async_op else None


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """torch's: tensor_list[r] = rank r's `tensor`, on every rank (one tensor per rank in the
    list, each of the tensor's shape)."""
    name = "all_gather"
    world = _group(name)
    array = _host(name, tensor)
    if not isinstance(tensor_list, (list, tuple)) or len(tensor_list) != world["size"]:
        got = f"{len(tensor_list)} tensors" if isinstance(tensor_list, (list, tuple)) else \
            f"a {type(tensor_list).__name__}"
        raise ValueError(f"{name}: tensor_list has {got} for a world of {world['size']}: it "
                         "must be a list of one tensor per rank")
    for i, t in enumerate(tensor_list):
        _host(f"{name}: tensor_list[{i}]", t)
        if tuple(t.shape) != tuple(tensor.shape):
            raise ValueError(f"{name}: tensor_list[{i}] has shape {tuple(t.shape)} but the "
                             f"tensor has shape {tuple(tensor.shape)}")
    every = array[None]
    if world["size"] > 1:
        every = np.empty((world["size"], *array.shape), array.dtype)
        world["comm"].Allgather(array, every)
    for t, values in zip(tensor_list, every, strict=True):
        _put(t, values)
    return _Work() if async_op else None


def all_gather_object(object_list, obj, group=None):
    """torch's: object_list[r] = rank r's `obj` (pickled), on every rank."""
    world = _group("all_gather_object")
    if len(object_list) != world["size"]:
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries for a "
                         f"world of {world['size']}: it must have one per rank")
    object_list[:] = world["comm"].allgather(obj) if world["size"] > 1 else [obj]


if launched_size() > 1:  # started by mpiexec: torchrun's variables, for a torch script's tests
    _set_torchrun_env(launched_rank(), launched_size(), _launched_local())
