"""Run by tests/app/test_distributed_torch_names.py: a nanoGPT-style DDP script with `torch`
swapped for tinyattn. Under `mpiexec -n 2` it is data-parallel (RANK is set from the MPI
launcher's environment when tinyattn.distributed is imported); run plainly it is the same
training on one process, on the whole batch. It writes OUT/rank{r}.npz: the final parameters,
the all-reduced losses, and what it saw of the gradients with and without sync.

usage: python mpi_ddp.py OUT
"""

import os
import sys

import numpy as np

import tinyattn as ta
import tinyattn.distributed as dist
import tinyattn.functional as F
from tinyattn.distributed import destroy_process_group, init_process_group
from tinyattn.nn.parallel import DistributedDataParallel as DDP  # noqa: N817 - nanoGPT's

VOCAB, WIDTH, BATCH, STEPS, ACCUMULATE = 11, 8, 6, 3, 2


class Tiny(ta.nn.Module):
    """Embedding, a LayerNorm'd MLP, a head: a GPT without attention, small and quick."""

    def __init__(self):
        super().__init__()
        self.wte = ta.nn.Embedding(VOCAB, WIDTH)
        self.ln = ta.nn.LayerNorm(WIDTH)
        self.fc = ta.nn.Linear(WIDTH, 2 * WIDTH)
        self.proj = ta.nn.Linear(2 * WIDTH, WIDTH)
        self.head = ta.nn.Linear(WIDTH, VOCAB, bias=False)
        self.wte.weight = self.head.weight  # tied, as nanoGPT's: one parameter, used twice

    def forward(self, idx, targets):
        logits = self.head(self.proj(F.gelu(self.fc(self.ln(self.wte(idx))))))
        loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        return logits, loss


def flat_grads(model):
    return ta.cat([p.grad.view(-1) for p in model.parameters()])


def gathered(t):
    """Every rank's copy of `t` (dist.all_gather), as arrays."""
    parts = [ta.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t)
    return [p.numpy() for p in parts]


def main(out):
    ta.set_default_dtype(ta.float64)
    ddp = int(os.environ.get("RANK", -1)) != -1  # nanoGPT's test, unchanged
    if ddp:
        init_process_group(backend="nccl")
        ddp_rank = int(os.environ["RANK"])
        ddp_local_rank = int(os.environ["LOCAL_RANK"])
        ddp_world_size = int(os.environ["WORLD_SIZE"])
        assert (ddp_rank, ddp_world_size) == (dist.get_rank(), dist.get_world_size())
    else:
        ddp_rank, ddp_local_rank, ddp_world_size = 0, 0, 1
    ta.manual_seed(ddp_rank)  # a different initialisation on each rank: DDP broadcasts rank 0's
    model = Tiny()
    if ddp:
        model = DDP(model, device_ids=[ddp_local_rank])
    raw_model = model.module if ddp else model
    optimizer = ta.optim.AdamW(raw_model.parameters(), lr=0.05, weight_decay=0.1)
    rng = np.random.default_rng(0)
    rows = slice(ddp_rank * BATCH // ddp_world_size, (ddp_rank + 1) * BATCH // ddp_world_size)
    losses, unsynced_differ, synced_same = [], [], []
    for _ in range(STEPS):
        for micro_step in range(ACCUMULATE):
            x = rng.integers(0, VOCAB, (BATCH, 5))  # the same global batch on every rank
            y = (x + 1) % VOCAB
            if ddp:
                model.require_backward_grad_sync = (micro_step == ACCUMULATE - 1)
            _, loss = model(ta.tensor(x[rows]), ta.tensor(y[rows]))
            loss = loss / ACCUMULATE
            loss.backward()
            if ddp:
                every = gathered(flat_grads(raw_model))
                same = all(np.array_equal(every[0], g) for g in every)
                (synced_same if micro_step == ACCUMULATE - 1 else unsynced_differ).append(
                    same if micro_step == ACCUMULATE - 1 else not same)
        ta.nn.utils.clip_grad_norm_(raw_model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        reported = loss.detach().clone()
        if ddp:
            dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        losses.append(reported.item())
    collectives = []
    if ddp:  # the other collectives, on values that differ between the ranks
        t = ta.tensor([float(ddp_rank), 5.0])
        dist.broadcast(t, src=1)
        m = ta.tensor([ddp_rank + 1.0, -float(ddp_rank)])
        dist.all_reduce(m, op=dist.ReduceOp.MAX)
        n = ta.tensor([ddp_rank + 2])
        dist.all_reduce(n)  # (SUM, of integers)
        collectives = [*t.tolist(), *m.tolist(), *n.tolist()]
        # buffers (BatchNorm's running statistics) made to differ between the ranks after
        # DDP's construction (which gives every rank rank 0's): each forward gives every rank
        # rank 0's again (broadcast_buffers), or leaves each its own
        for broadcast in (True, False):
            bn = ta.nn.BatchNorm1d(2).eval()
            wrapped = DDP(bn, broadcast_buffers=broadcast)
            bn.running_mean.fill_(float(ddp_rank + 1))
            wrapped(ta.ones(3, 2))
            collectives += bn.running_mean.tolist()
        dist.barrier()
        keys = sorted(model.state_dict())
        destroy_process_group()
    else:
        keys = sorted(model.state_dict())
    params = {f"p_{name}": p.detach().numpy() for name, p in raw_model.named_parameters()}
    np.savez(os.path.join(out, f"rank{ddp_rank}.npz"), losses=np.array(losses),
             unsynced_differ=np.array(unsynced_differ, dtype=bool),
             synced_same=np.array(synced_same, dtype=bool), keys=np.array(keys),
             collectives=np.array(collectives, dtype=np.float64),
             env=np.array([ddp_rank, ddp_local_rank, ddp_world_size]), **params)


if __name__ == "__main__":
    with dist.abort_on_error():
        main(sys.argv[1])
