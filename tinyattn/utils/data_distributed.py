"""torch.utils.data.distributed.DistributedSampler for tinyattn (ta.utils.data.DistributedSampler).

Each of num_replicas ranks reads its own share of the dataset's indices: the indices (shuffled
with seed + epoch, or in order), padded by repeating the first ones (or, with drop_last,
cut) to a multiple of num_replicas, then every num_replicas-th from `rank`. The shuffle is
torch's own draw: torch's CPU randperm with a generator seeded with seed + epoch is a
Fisher-Yates shuffle that takes each swap from the next 32-bit output of an MT19937 seeded
with the seed's low 32 bits, which NumPy's legacy RandomState reproduces; so the index lists
are exactly torch's for the same arguments (and do not depend on tinyattn's global stream).
"""

import math
import numbers

import numpy as np

from .. import distributed

__all__ = ["DistributedSampler"]


def torch_randperm(n, seed):
    """torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist(), exactly."""
    state = np.random.RandomState(seed & 0xFFFFFFFF)
    order = list(range(n))
    if n > 1:
        draws = state.randint(0, 2**32, size=n - 1, dtype=np.uint32)  # (raw 32-bit outputs)
        for i, r in enumerate(draws.tolist()):
            z = i + r % (n - i)
            order[i], order[z] = order[z], order[i]
    return order


def _from_group(value, what):
    """num_replicas or rank: as given, else tinyattn.distributed's (torch's error without an
    initialised group)."""
    if value is not None:
        return value
    if not distributed.is_initialized():
        raise ValueError("DistributedSampler: Default process group has not been initialized, "
                         "please make sure to call init_process_group (or pass num_replicas "
                         "and rank).")
    return distributed.get_world_size() if what == "num_replicas" else distributed.get_rank()


class DistributedSampler:
    """torch's DistributedSampler(dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
    drop_last=False): this rank's indices (see the module's doc); set_epoch(e) before each
    epoch gives a new shuffle, the same on every rank. (A sampler by its __iter__ and
    __len__; not a subclass of utils.data.Sampler, which would make an import cycle.)"""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        num_replicas = _from_group(num_replicas, "num_replicas")
        rank = _from_group(rank, "rank")
        for name, v in (("num_replicas", num_replicas), ("rank", rank), ("seed", seed)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"DistributedSampler: {name} must be an int, got {v!r}")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be >= 1, got "
                             f"{num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"DistributedSampler: Invalid rank {rank}, rank should be in the "
                             f"interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, int(num_replicas), int(rank)
        self.epoch, self.drop_last, self.shuffle, self.seed = 0, drop_last, shuffle, int(seed)
        n = len(dataset)
        if drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        n = len(self.dataset)
        indices = torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch whose shuffle the next pass gives (seed + epoch)."""
        self.epoch = epoch
