"""tinyattn.utils.data: torch.utils.data's datasets and loader, with its names and rules.

A map-style Dataset answers `len(ds)` and `ds[i]`; TensorDataset indexes several tensors along
their first dim at once. A DataLoader walks the indices a sampler gives (in order, or a fresh
permutation each epoch with shuffle=True, drawn from `generator` or the global stream that
tinyattn.manual_seed seeds), groups them in batches and collates each batch as torch does:
tensors, arrays and numbers are stacked into one tensor (Python floats as float64, ints as
int64, NumPy scalars in their dtype), tuples and lists into a list of stacked parts, dicts key
by key; strings stay a list.
An IterableDataset is read in its own order and batched. Batches are loaded in this process,
so get_worker_info() is None, as torch's is in the main process.
"""

import bisect
import collections.abc
import itertools
import math
import numbers

import numpy as np

from ..errors import ShapeError, fmt_shape, warn_user
from ..functional import stack
from ..tensor import Tensor, multinomial, randint, randperm, tensor

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "ChainDataset",
    "StackDataset", "DataLoader", "Sampler", "SequentialSampler", "RandomSampler",
    "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "random_split",
    "default_collate", "get_worker_info", "default_convert", "DistributedSampler",
]


# ---- datasets ------------------------------------------------------------------------------------


class Dataset:
    """A map-style dataset: subclasses give __getitem__(i) and __len__(); `a + b` chains two."""

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__} must define __getitem__ (and __len__)")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset:
    """A dataset read as a stream: subclasses give __iter__(); the DataLoader batches it in its
    own order (no shuffle, no sampler)."""

    def __iter__(self):
        raise TypeError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors): all tensors must have the same first dim."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: give at least one tensor")
        for t in tensors:
            if not isinstance(t, Tensor) or t.ndim == 0:
                raise ShapeError("TensorDataset: takes tensors of at least one dim, got "
                                 f"{fmt_shape(t.shape) if isinstance(t, Tensor) else t!r}")
        if len({t.shape[0] for t in tensors}) > 1:
            raise ShapeError("TensorDataset: the tensors differ in their first dim: "
                             + ", ".join(fmt_shape(t.shape) for t in tensors))
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index):
        if isinstance(index, list):  # the mapped list, in one call (torch's, for batch reads)
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __getitems__(self, indices):
        """A batch's samples (the loader's read): through the dataset's own __getitems__ where
        it has one, as torch's Subset, so a batched dataset stays batched under a Subset."""
        mapped = [self.indices[i] for i in indices]
        read = getattr(self.dataset, "__getitems__", None)
        return read(mapped) if callable(read) else [self.dataset[i] for i in mapped]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """The samples of each dataset in turn."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: give at least one dataset")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset: takes map-style datasets, not an "
                                "IterableDataset")
        self.ends = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.ends[-1]

    @property
    def cumulative_sizes(self):
        """torch's name for the running totals of the datasets' lengths."""
        return self.ends

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise IndexError(f"ConcatDataset: index {index} is out of range for "
                                 f"{len(self)} samples")
            index += len(self)
        which = bisect.bisect_right(self.ends, index)
        if which == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} is out of range for {len(self)} "
                             "samples")
        start = self.ends[which - 1] if which else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """The streams of several IterableDatasets, one after another (torch's: each checked when
    it is reached; len() the sum of theirs, where each has one)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class StackDataset(Dataset):
    """Several datasets of one length read together (torch's): StackDataset(a, b)[i] is
    (a[i], b[i]); StackDataset(x=a, y=b)[i] is {"x": a[i], "y": b[i]}."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        if not (args or kwargs):
            raise ValueError("At least one dataset should be passed")
        datasets = list(args or kwargs.values())
        self._length = len(datasets[0])
        if any(self._length != len(d) for d in datasets):
            raise ValueError("Size mismatch between datasets: lengths "
                             f"{[len(d) for d in datasets]}")
        self.datasets = args or kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


def get_worker_info():
    """None: tinyattn's DataLoader loads every batch in this process, where torch's
    get_worker_info() is None too (an IterableDataset that splits its stream among workers
    reads all of it)."""
    return None


def random_split(dataset, lengths, generator=None):
    """Subsets of the given lengths (ints that add up to len(dataset), or fractions that add
    up to 1: each floor(f n), the rest given one by one from the first), from one random
    permutation drawn from `generator` (or the global stream)."""
    n = len(dataset)
    # a tensor's entries as numbers (torch.tensor([7, 3]) works there), NumPy's float32
    # fractions as fractions (any real number that is no int, as torch reads them)
    lengths = [k.item() if isinstance(k, Tensor) and k.ndim == 0 else k for k in lengths]
    if lengths and all(isinstance(f, numbers.Real) and not isinstance(f, numbers.Integral)
                       for f in lengths) and math.isclose(sum(lengths), 1):
        lengths = _fraction_counts(lengths, n)
    if any(not isinstance(k, numbers.Integral) or k < 0 for k in lengths) or sum(lengths) != n:
        raise ValueError(f"random_split: the lengths {lengths} must be ints >= 0 that add up to "
                         f"the {n} samples (or fractions that add up to 1)")
    order = randperm(n, generator=generator).tolist()
    ends = [0, *itertools.accumulate(lengths)]
    return [Subset(dataset, order[ends[i]:ends[i + 1]]) for i in range(len(lengths))]


def _fraction_counts(fractions, n):
    """random_split's lengths for fractions that add up to 1 of n samples: each floor(f n),
    the rest given one by one from the first; an empty one warned about in torch's words."""
    if any(f < 0 for f in fractions):  # (none above 1 then: they add up to 1)
        raise ValueError(f"random_split: each fraction must be in [0, 1], got {fractions}")
    counts = [int(math.floor(f * n)) for f in fractions]
    for i in range(n - sum(counts)):
        counts[i % len(counts)] += 1
    for i, k in enumerate(counts):
        if k == 0:
            warn_user(f"Length of split at index {i} is 0. This might result in an empty "
                      "dataset.", UserWarning)
    return counts


# ---- samplers: the order of the indices ------------------------------------------------------


class Sampler:
    """An iterable of dataset indices (subclasses give __iter__ and, if they can, __len__)."""

    def __iter__(self):
        raise TypeError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random permutation of the indices on each pass (num_samples of them: more than
    the dataset holds takes several permutations; or, with replacement, num_samples indices
    drawn independently), from `generator` or the global stream."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        _boolean("RandomSampler", "replacement", replacement)
        if not isinstance(self.num_samples, numbers.Integral) or self.num_samples <= 0:
            raise ValueError(f"RandomSampler: num_samples must be an int > 0, got "
                             f"{self.num_samples!r}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        # drawn lazily, as torch's (32 indices at a time with replacement), so that minGPT's
        # num_samples=int(1e10) is an endless stream rather than one giant array
        n = len(self.data_source)
        if self.replacement:
            whole, part = divmod(self.num_samples, 32)
            for size in itertools.chain(itertools.repeat(32, whole), [part] if part else []):
                yield from randint(0, n, (size,), generator=self.generator).tolist()
            return
        # more than n: whole permutations one after another, then part of one more (torch's)
        whole, part = divmod(self.num_samples, n)
        for _ in range(whole):
            yield from randperm(n, generator=self.generator).tolist()
        yield from randperm(n, generator=self.generator).tolist()[:part]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a new random order on each pass (a permutation drawn from
    `generator` or the global stream), as torch's."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices in 0..len(weights)-1, each drawn with probability proportional to
    its weight (float64; they need not add up to 1), with replacement or without (then each
    index at most once), from `generator` or the global stream: torch's, multinomial's draw."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if (isinstance(num_samples, bool) or not isinstance(num_samples, numbers.Integral)
                or num_samples <= 0):
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        weights = (weights.detach().to(np.float64) if isinstance(weights, Tensor)
                   else tensor(np.asarray(weights, dtype=np.float64)))
        if weights.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights.shape)}")
        self.weights, self.num_samples = weights, int(num_samples)
        self.replacement, self.generator = replacement, generator

    def __iter__(self):
        yield from multinomial(self.weights, self.num_samples, self.replacement,
                               generator=self.generator).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of batch_size indices from `sampler` (the last one shorter unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        self.sampler, self.drop_last = sampler, drop_last
        self.batch_size = _batch_size(batch_size, "BatchSampler")
        _boolean("BatchSampler", "drop_last", drop_last)

    def __iter__(self):
        it = iter(self.sampler)
        while batch := list(itertools.islice(it, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# ---- collating a batch ---------------------------------------------------------------------------


def default_collate(batch):
    """One batch from a list of samples, as torch's default_collate (see the module's doc)."""
    elem = batch[0]
    stacked = _stacked(batch, elem)
    if stacked is not None:
        return stacked
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, collections.abc.Sequence):
        if len({len(sample) for sample in batch}) > 1:
            raise ValueError("default_collate: each sample in a batch must have as many parts, "
                             f"got lengths {[len(sample) for sample in batch]}")
        parts = [default_collate([sample[k] for sample in batch]) for k in range(len(elem))]
        if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple keeps its type
            return type(elem)(*parts)
        return parts
    raise TypeError(f"default_collate: cannot batch {type(elem).__name__}; samples must be "
                    "tensors, arrays, numbers, strings, or tuples, lists or dicts of them "
                    "(or give collate_fn)")


def _stacked(batch, elem):
    """Tensors, arrays and numbers stacked into one tensor; None for anything else."""
    if isinstance(elem, Tensor):
        return stack(batch)
    if isinstance(elem, np.ndarray) and elem.dtype.kind in "biuf":
        return stack([tensor(a) for a in batch])
    if isinstance(elem, np.generic) and elem.dtype.kind in "biuf":  # keeps its dtype
        return tensor(np.array(batch))
    if isinstance(elem, numbers.Integral):  # bool stays bool, an int is int64
        return tensor(list(batch))
    if isinstance(elem, numbers.Real):
        return tensor(list(batch), dtype=np.float64)
    return None


def _convert(sample):
    """A sample as the loader gives it unbatched (batch_size=None), as torch's default_convert:
    arrays and NumPy scalars (np.float32(1), np.bool_) of numbers become tensors in their dtype;
    NumPy strings and bytes stay as they are."""
    if isinstance(sample, (np.ndarray, np.generic)) and sample.dtype.kind in "biuf":
        return tensor(sample)
    if isinstance(sample, collections.abc.Mapping):
        return {key: _convert(v) for key, v in sample.items()}
    if isinstance(sample, tuple) and hasattr(sample, "_fields"):
        return type(sample)(*(_convert(v) for v in sample))
    if isinstance(sample, (tuple, list)):
        return [_convert(v) for v in sample]
    return sample


# ---- the loader ----------------------------------------------------------------------------------


def _check_worker_options(num_workers, timeout, prefetch_factor, persistent_workers):
    """torch's checks of the worker options, which tinyattn keeps but does not use: torch code
    that passes a wrong one fails here as it would there, not later on a machine with torch."""
    if not isinstance(num_workers, numbers.Integral):  # (torch's fails at the first batch)
        raise TypeError(f"DataLoader: num_workers must be an int, got {num_workers!r}")
    if num_workers < 0:
        raise ValueError("DataLoader: num_workers option should be non-negative; use "
                         "num_workers=0 to disable multiprocessing (as torch)")
    if not timeout >= 0:
        raise ValueError(f"DataLoader: timeout option should be non-negative, got {timeout}")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError("DataLoader: prefetch_factor option could only be specified in "
                         "multiprocessing: let num_workers > 0 to enable multiprocessing, "
                         "otherwise set prefetch_factor to None (as torch)")
    if persistent_workers and num_workers == 0:
        raise ValueError("DataLoader: persistent_workers option needs num_workers > 0 (as "
                         "torch)")


class DataLoader:
    """Batches of `dataset`: batch_size samples at a time (None: one sample at a time, not
    collated), in order or shuffled anew each epoch, collated by collate_fn (default_collate).

    The worker options (num_workers, pin_memory, timeout, worker_init_fn, prefetch_factor,
    persistent_workers, multiprocessing_context, pin_memory_device, in_order) are accepted so
    torch code runs; batches are loaded in this process
    (num_workers > 0 says so once)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, prefetch_factor=None, persistent_workers=False,
                 generator=None, *, multiprocessing_context=None, pin_memory_device="",
                 in_order=True):
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        # the worker and memory options, kept as torch's attributes (code reads them back)
        self.pin_memory, self.timeout, self.worker_init_fn = pin_memory, timeout, worker_init_fn
        self.prefetch_factor, self.persistent_workers = prefetch_factor, persistent_workers
        self.multiprocessing_context, self.pin_memory_device = (multiprocessing_context,
                                                                pin_memory_device)
        self.in_order = in_order
        self.generator, self.num_workers = generator, num_workers
        _check_worker_options(num_workers, timeout, prefetch_factor, persistent_workers)
        _check_options(dataset, batch_size, shuffle, sampler, batch_sampler, drop_last)
        if not isinstance(dataset, IterableDataset):
            if sampler is None:
                sampler = (RandomSampler(dataset, generator=generator) if shuffle
                           else SequentialSampler(dataset))
            if batch_sampler is None and batch_size is not None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.collate_fn = collate_fn or (default_collate if batch_size is not None or
                                         batch_sampler is not None else _convert)
        if num_workers:
            warn_user(f"DataLoader: num_workers={num_workers}: tinyattn loads the batches "
                      "in this process")

    def __iter__(self):
        if isinstance(self.dataset, IterableDataset):
            it = iter(self.dataset)
            if self.batch_size is None:
                yield from (self.collate_fn(sample) for sample in it)
                return
            while batch := list(itertools.islice(it, self.batch_size)):
                if len(batch) < self.batch_size and self.drop_last:
                    return
                yield self.collate_fn(batch)
        elif self.batch_sampler is None:
            yield from (self.collate_fn(self.dataset[i]) for i in self.sampler)
        else:
            # a dataset that reads a whole batch at once gives it through __getitems__, which
            # torch's loader calls in place of one __getitem__ per index
            read = getattr(self.dataset, "__getitems__", None)
            for indices in self.batch_sampler:
                samples = read(indices) if read else [self.dataset[i] for i in indices]
                yield self.collate_fn(samples)

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # (a TypeError if the stream has no length, as in torch)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)


def _check_options(dataset, batch_size, shuffle, sampler, batch_sampler, drop_last):
    """The DataLoader options that contradict each other, as torch refuses them."""
    if isinstance(dataset, IterableDataset) and (shuffle or sampler is not None
                                                 or batch_sampler is not None):
        raise ValueError("DataLoader: an IterableDataset is read in its own order: no "
                         "shuffle, sampler or batch_sampler")
    if sampler is not None and shuffle:
        raise ValueError("DataLoader: give shuffle=True or a sampler, not both")
    if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None
                                      or drop_last):
        raise ValueError("DataLoader: batch_sampler gives whole batches: leave batch_size, "
                         "shuffle, sampler and drop_last at their defaults")
    if batch_size is None and drop_last:
        raise ValueError("DataLoader: drop_last needs a batch_size")
    if batch_size is not None:
        _batch_size(batch_size, "DataLoader")
        _boolean("DataLoader", "drop_last", drop_last)  # (torch's BatchSampler refuses it)


class NotABoolError(TypeError, ValueError):
    """A flag that must be True or False (torch raises a TypeError for one, a ValueError for
    another: this is both)."""


def _boolean(name, what, value):
    if not isinstance(value, bool):
        raise NotABoolError(f"{name}: {what} should be a boolean value, but got "
                            f"{what}={value!r}")


def _batch_size(batch_size, name):
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or (
            batch_size <= 0):
        raise ValueError(f"{name}: batch_size must be an int > 0, got {batch_size!r}")
    return int(batch_size)


default_convert = _convert  # torch's name for the unbatched loader's conversion

# torch.utils.data.DistributedSampler (utils/data_distributed.py, which builds on Sampler)
from .data_distributed import DistributedSampler  # noqa: E402
