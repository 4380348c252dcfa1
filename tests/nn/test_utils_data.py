"""tinyattn.utils.data written as torch code writes it: TensorDataset and DataLoader batches,
default_collate's rules, shuffling (every sample once an epoch, reproducible from a Generator),
random_split's lengths, samplers, IterableDataset, and the errors."""

import collections
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
    default_collate,
    random_split,
)

X = np.arange(30, dtype=np.float32).reshape(10, 3)
Y = np.arange(10) % 3


def as_plain(batch):
    """A batch (of either library) as nested lists of (dtype name, values) for comparing."""
    if hasattr(batch, "numpy"):
        arr = batch.detach().numpy() if hasattr(batch, "detach") else batch.numpy()
        return (str(arr.dtype), arr.tolist())
    if isinstance(batch, dict):
        return {k: as_plain(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch).__name__, [as_plain(v) for v in batch]
    return batch


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (10, True),
                                                  (4, False), (12, False), (12, True)])
def test_batches_in_order_equal_torchs(batch_size, drop_last):
    torch = pytest.importorskip("torch")
    ours = DataLoader(TensorDataset(ta.tensor(X), ta.tensor(Y)), batch_size=batch_size,
                      drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor(X), torch.tensor(Y)), batch_size=batch_size,
        drop_last=drop_last)
    assert len(ours) == len(theirs)
    got, want = [as_plain(b) for b in ours], [as_plain(b) for b in theirs]
    assert got == want and len(got) == len(theirs)


Point = collections.namedtuple("Point", "x y")
SAMPLES = {
    "tuples of tensor, int, float, bool": [(np.ones(2, np.float32) * i, i, i / 2, i % 2 == 0)
                                           for i in range(3)],
    "dicts with strings": [{"ids": np.arange(3) + i, "w": float(i), "name": f"s{i}"}
                           for i in range(2)],
    "namedtuples": [Point(np.float64(i), np.int32(i)) for i in range(4)],
    "nested lists": [[i, [i * 1.5, np.float32(i)]] for i in range(3)],
    "plain ints": [4, 5, 6],
}


@pytest.mark.parametrize("samples", SAMPLES.values(), ids=SAMPLES.keys())
def test_default_collate_follows_torchs_rules(samples):
    """Tensors and arrays are stacked, Python floats become float64 and ints int64, NumPy
    scalars keep their dtype, tuples become lists, namedtuples and dicts keep their kind,
    strings stay a list."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate

    def convert(s, lib):
        """A sample with its arrays made tensors of lib (tinyattn or torch)."""
        if isinstance(s, np.ndarray):
            return lib.tensor(s)
        if isinstance(s, dict):
            return {k: convert(v, lib) for k, v in s.items()}
        if isinstance(s, Point):
            return Point(*(convert(v, lib) for v in s))
        if isinstance(s, (tuple, list)):
            return type(s)(convert(v, lib) for v in s)
        return s

    want = as_plain(torch_collate([convert(s, torch) for s in samples]))
    assert as_plain(default_collate([convert(s, ta) for s in samples])) == want
    assert as_plain(default_collate(samples)) == want  # NumPy arrays as samples too
    if isinstance(samples[0], Point):
        assert isinstance(default_collate(samples), Point)


def test_shuffle_gives_every_sample_once_an_epoch_in_a_new_order():
    ds = TensorDataset(ta.tensor(X), ta.tensor(np.arange(10)))
    loader = DataLoader(ds, batch_size=4, shuffle=True)
    orders = []
    for _ in range(4):
        ids = [i for _, yb in loader for i in yb.tolist()]
        assert sorted(ids) == list(range(10))
        orders.append(ids)
    assert len({tuple(o) for o in orders}) > 1
    ta.manual_seed(5)
    first = [yb.tolist() for _, yb in loader]
    ta.manual_seed(5)
    assert [yb.tolist() for _, yb in loader] == first  # the global stream's seed repeats it


def test_a_seeded_generator_repeats_the_shuffle_and_the_split():
    ds = TensorDataset(ta.tensor(X), ta.tensor(np.arange(10)))

    def epoch(seed):
        loader = DataLoader(ds, batch_size=3, shuffle=True,
                            generator=ta.Generator().manual_seed(seed))
        return [yb.tolist() for _, yb in loader]

    ta.manual_seed(0)
    a = epoch(1)
    ta.manual_seed(99)  # the global stream does not matter
    assert epoch(1) == a and epoch(2) != a
    splits = [[s.indices for s in random_split(ds, [6, 4], ta.Generator().manual_seed(3))]
              for _ in range(2)]
    assert splits[0] == splits[1]


@pytest.mark.filterwarnings("ignore:Length of split")  # torch's, for an empty part
@pytest.mark.parametrize("n,lengths", [(10, [0.7, 0.3]), (10, [0.33, 0.33, 0.34]),
                                       (7, [0.5, 0.5]), (11, [0.25] * 4), (5, [3, 2]),
                                       (6, [0, 6]), (4, [0.0, 1.0]), (4, [1.0, 0.0])])
def test_random_split_lengths_equal_torchs_and_cover_the_dataset(n, lengths):
    torch = pytest.importorskip("torch")
    ds = TensorDataset(ta.arange(n))
    parts = random_split(ds, lengths)
    want = [len(p) for p in torch.utils.data.random_split(range(n), lengths)]
    assert [len(p) for p in parts] == want
    assert sorted(i for p in parts for (t,) in [p[j] for j in range(len(p))]
                  for i in [t.item()]) == list(range(n))


@pytest.mark.parametrize("lengths", [[6, 5], [0.5, 0.6], [-1, 11], [2.5, 7.5], [1, 0]])
def test_random_split_refuses_lengths_that_do_not_add_up(lengths):
    with pytest.raises(ValueError, match="random_split: the lengths .* must be ints >= 0 that "
                                         "add up to the 10 samples"):
        random_split(TensorDataset(ta.arange(10)), lengths)
    with pytest.raises(ValueError, match=r"random_split: each fraction must be in \[0, 1\], "
                                         r"got \[1.5, -0.5\]"):
        random_split(TensorDataset(ta.arange(10)), [1.5, -0.5])


def test_batch_size_none_gives_single_samples_with_arrays_as_tensors():
    loader = DataLoader([(np.ones(2), 3, "a")], batch_size=None)
    (sample,) = list(loader)
    assert isinstance(sample[0], ta.Tensor) and sample[1:] == [3, "a"] and len(loader) == 1
    (d, p) = list(DataLoader([{"x": np.arange(3), "n": 1}, Point(np.ones(1), "b")],
                             batch_size=None))
    assert isinstance(d["x"], ta.Tensor) and d["x"].dtype == np.int64 and d["n"] == 1
    assert isinstance(p, Point) and isinstance(p.x, ta.Tensor) and p.y == "b"
    (arr,) = DataLoader([np.array(["s"])], batch_size=None)  # (not numbers: left alone)
    assert isinstance(arr, np.ndarray)


class Stream(IterableDataset):
    def __init__(self, n, with_len=True):
        self.n, self.with_len = n, with_len

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        if not self.with_len:
            raise TypeError("no length")
        return self.n


def test_an_iterable_dataset_is_batched_in_its_own_order():
    assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3)] == [[0, 1, 2], [3, 4, 5],
                                                                         [6]]
    assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3, drop_last=True)] == [
        [0, 1, 2], [3, 4, 5]]
    assert len(DataLoader(Stream(7), batch_size=3)) == 3
    assert len(DataLoader(Stream(7), batch_size=3, drop_last=True)) == 2
    assert list(DataLoader(Stream(2), batch_size=None)) == [0, 1]
    for options in ({"shuffle": True}, {"sampler": [0]}, {"batch_sampler": [[0]]}):
        with pytest.raises(ValueError, match="an IterableDataset is read in its own order"):
            DataLoader(Stream(3), **options)
    with pytest.raises(ValueError, match="DataLoader: batch_size must be an int > 0, got 0"):
        DataLoader(Stream(3), batch_size=0)
    with pytest.raises(TypeError):
        len(DataLoader(Stream(3, with_len=False)))


def test_samplers():
    ds = list(range(5))
    assert list(SequentialSampler(ds)) == [0, 1, 2, 3, 4]
    draws = list(RandomSampler(ds, replacement=True, num_samples=50,
                               generator=ta.Generator().manual_seed(0)))
    assert len(draws) == 50 and set(draws) <= set(ds) and len(set(draws)) > 1
    assert set(draws) == set(ds)  # (0 included: a draw from [0, 5))
    with_gen = []
    for seed in (1, 2):
        ta.manual_seed(seed)
        with_gen.append(list(RandomSampler(ds, True, 20, ta.Generator().manual_seed(4))))
    assert with_gen[0] == with_gen[1]  # the generator's draws, whatever the global seed
    assert sorted(RandomSampler(ds)) == ds and len(RandomSampler(ds, num_samples=3)) == 3
    assert sorted(RandomSampler(ds, num_samples=5)) == ds
    assert len(list(RandomSampler(ds, num_samples=1))) == 1
    assert len(list(RandomSampler(ds, num_samples=3))) == 3
    with pytest.raises(ValueError, match="^BatchSampler: batch_size must be an int > 0, got -1"):
        BatchSampler(range(5), -1, False)
    assert list(BatchSampler(range(5), 2, False)) == [[0, 1], [2, 3], [4]]
    assert list(BatchSampler(range(5), 2, True)) == [[0, 1], [2, 3]]
    assert len(BatchSampler(range(5), 2, False)) == 3 and len(BatchSampler(range(5), 2, True)) == 2
    loader = DataLoader(ds, batch_sampler=BatchSampler(range(5), 4, False))
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4]] and len(loader) == 2
    loader = DataLoader(ds, sampler=[4, 0, 2], batch_size=2)
    assert [b.tolist() for b in loader] == [[4, 0], [2]]
    with pytest.raises(ValueError, match="num_samples must be an int > 0"):
        RandomSampler(ds, num_samples=0)


def test_datasets_index_and_chain():
    a, b = TensorDataset(ta.arange(3)), TensorDataset(ta.arange(10, 14))
    both = a + b
    assert isinstance(both, ConcatDataset) and len(both) == 7
    assert [both[i][0].item() for i in range(7)] == [0, 1, 2, 10, 11, 12, 13]
    three = ConcatDataset([a, b, TensorDataset(ta.arange(20, 22))])
    assert len(three) == 9 and [three[i][0].item() for i in (6, 7, 8, -1)] == [13, 20, 21, 21]
    assert both[-1][0].item() == 13 and both[-7][0].item() == 0
    for bad in (7, -8):
        with pytest.raises(IndexError, match="out of range for 7 samples"):
            both[bad]

    class Squares(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return i * i

    assert [b.tolist() for b in DataLoader(Squares(), batch_size=3)] == [[0, 1, 4], [9]]


@pytest.mark.parametrize("make,error,match", [
    (lambda: TensorDataset(ta.zeros(4, 2), ta.zeros(3)), ta.ShapeError,
     r"TensorDataset: the tensors differ in their first dim: \(4, 2\), \(3,\)"),
    (lambda: TensorDataset(ta.tensor(1.0)), ta.ShapeError, "tensors of at least one dim"),
    (lambda: TensorDataset(), ValueError, "give at least one tensor"),
    (lambda: DataLoader([1, 2], batch_size=0), ValueError, "batch_size must be an int > 0"),
    (lambda: DataLoader([1, 2], batch_size=2.5), ValueError, "got 2.5"),
    (lambda: DataLoader([1, 2], batch_size=True), ValueError, "got True"),
    (lambda: DataLoader([1, 2], shuffle=True, batch_sampler=[[0]]), ValueError,
     "batch_sampler gives whole batches"),
    (lambda: DataLoader([1, 2], drop_last=True, batch_sampler=[[0]]), ValueError,
     "batch_sampler gives whole batches"),
    (lambda: DataLoader([1, 2], shuffle=True, sampler=[0]), ValueError,
     "shuffle=True or a sampler, not both"),
    (lambda: DataLoader([1, 2], batch_size=2, batch_sampler=[[0]]), ValueError,
     "batch_sampler gives whole batches"),
    (lambda: DataLoader([1, 2], batch_size=None, drop_last=True), ValueError,
     "drop_last needs a batch_size"),
    (lambda: list(DataLoader([object()] * 2, batch_size=2)), TypeError,
     "default_collate: cannot batch object"),
    (lambda: list(DataLoader([(1, 2), (3,)], batch_size=2)), ValueError,
     r"as many parts, got lengths \[2, 1\]"),
])
def test_bad_input_is_an_error_that_names_what_is_wrong(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_workers_are_accepted_and_loading_stays_in_this_process():
    with pytest.warns(UserWarning, match="num_workers=2: tinyattn loads the batches in this "
                                         "process"):
        loader = DataLoader([1, 2, 3], batch_size=2, num_workers=2, pin_memory=True,
                            persistent_workers=True)
    assert [b.tolist() for b in loader] == [[1, 2], [3]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DataLoader([1])


def test_a_torch_style_training_loop_fits_a_line():
    """The loop as torch's tutorials write it: a DataLoader over a TensorDataset, shuffled."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1)).astype(np.float32)
    y = 3 * x - 1
    model = ta.nn.Linear(1, 1)
    opt = ta.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(ta.tensor(x), ta.tensor(y)), batch_size=16, shuffle=True,
                        generator=ta.Generator().manual_seed(0))
    for _ in range(30):
        for xb, yb in loader:
            opt.zero_grad()
            loss = ta.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
    np.testing.assert_allclose(model.weight.item(), 3, atol=1e-3)
    np.testing.assert_allclose(model.bias.item(), -1, atol=1e-3)


def test_random_sampler_without_replacement_draws_more_than_the_dataset_as_torch():
    """num_samples > len without replacement: whole permutations one after another, then the
    start of one more (torch 2.x); every index as often as the others, give or take one."""
    ds = list(range(4))
    draws = list(RandomSampler(ds, num_samples=10, generator=ta.Generator().manual_seed(0)))
    assert len(draws) == 10 and len(RandomSampler(ds, num_samples=10)) == 10
    assert sorted(draws[:4]) == sorted(draws[4:8]) == ds and len(set(draws[8:])) == 2
    torch = pytest.importorskip("torch")
    theirs = list(torch.utils.data.RandomSampler(ds, num_samples=10))
    assert len(theirs) == len(draws)


@pytest.mark.parametrize("make,name", [
    (lambda: RandomSampler(range(4), replacement=1), "replacement"),
    (lambda: RandomSampler(range(4), replacement="yes"), "replacement"),
    (lambda: BatchSampler(range(10), 3, "yes"), "drop_last"),
    (lambda: BatchSampler(range(10), 3, None), "drop_last"),
    (lambda: DataLoader([1, 2], batch_size=1, drop_last=1), "drop_last"),
])
def test_a_flag_that_is_not_a_bool_is_refused_as_torch(make, name):
    with pytest.raises(ValueError, match=f"{name} should be a boolean value, but got {name}="):
        make()
    with pytest.raises(TypeError):  # (torch's RandomSampler raises a TypeError: both work)
        make()
