"""torch.utils.data's samplers and datasets that scripts reach for: SubsetRandomSampler,
WeightedRandomSampler, StackDataset, ChainDataset (and IterableDataset + ...), get_worker_info,
each with torch's semantics (the draws come from tinyattn's generators, not torch's)."""

import collections

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.utils import data

torch = pytest.importorskip("torch")
tdata = torch.utils.data


def test_subset_random_sampler_permutes_its_indices_with_the_generator():
    indices = [10, 20, 30, 40, 50]
    for mod, gen in ((data, ta.Generator), (tdata, torch.Generator)):
        s = mod.SubsetRandomSampler(indices, generator=gen().manual_seed(3))
        first, second = list(s), list(s)
        assert sorted(first) == sorted(second) == indices and len(s) == 5
        again = list(mod.SubsetRandomSampler(indices, generator=gen().manual_seed(3)))
        assert again == first  # the same seed, the same order
    loader = data.DataLoader(ta.arange(60), batch_size=2,
                             sampler=data.SubsetRandomSampler(indices))
    assert sorted(ta.cat(list(loader)).tolist()) == indices


def test_weighted_random_sampler_draws_by_weight_as_torch():
    weights = [0.0, 1.0, 3.0, 0.0, 6.0]
    for mod, gen in ((data, ta.Generator), (tdata, torch.Generator)):
        s = mod.WeightedRandomSampler(weights, 4000, generator=gen().manual_seed(0))
        drawn = list(s)
        assert len(s) == len(drawn) == 4000 and all(type(i) is int for i in drawn)
        counts = collections.Counter(drawn)
        assert counts[0] == counts[3] == 0  # a zero weight is never drawn
        assert counts[4] / 4000 == pytest.approx(0.6, abs=0.04)
        assert counts[2] / 4000 == pytest.approx(0.3, abs=0.04)
        once = list(mod.WeightedRandomSampler(weights, 3, replacement=False,
                                              generator=gen().manual_seed(1)))
        assert sorted(once) == [1, 2, 4]  # without replacement: each index at most once
        assert mod.WeightedRandomSampler(weights, 2).weights.dtype == (
            ta.float64 if mod is data else torch.float64)
    assert list(data.WeightedRandomSampler(ta.tensor([0.0, 2.0]), 3)) == [1, 1, 1]


@pytest.mark.parametrize("kwargs,match", [
    (dict(weights=[1.0, 2.0], num_samples=0), "num_samples should be a positive integer"),
    (dict(weights=[1.0, 2.0], num_samples=True), "num_samples should be a positive integer"),
    (dict(weights=[1.0, 2.0], num_samples=2, replacement=1), "replacement should be a boolean"),
    (dict(weights=[[1.0, 2.0]], num_samples=2), r"1d sequence .* shape \(1, 2\)"),
])
def test_weighted_random_sampler_refuses_as_torch(kwargs, match):
    for mod in (data, tdata):
        with pytest.raises(ValueError, match=match):
            mod.WeightedRandomSampler(**kwargs)


def test_get_worker_info_is_none_in_this_process_as_torchs_main_process():
    assert data.get_worker_info() is None and tdata.get_worker_info() is None

    class Split(data.IterableDataset):  # torch's documented pattern reads the whole range
        def __iter__(self):
            info = data.get_worker_info()
            return iter(range(4) if info is None else ())

    assert [int(b) for b in data.DataLoader(Split(), batch_size=None, num_workers=0)] == \
        [0, 1, 2, 3]


def test_stack_dataset_tuple_and_dict_forms_as_torch():
    xs, ys = [1, 2, 3], ["a", "b", "c"]
    for mod in (data, tdata):
        assert mod.StackDataset(xs, ys)[1] == (2, "b")
        assert mod.StackDataset(x=xs, y=ys)[2] == {"x": 3, "y": "c"}
        assert len(mod.StackDataset(xs, ys)) == 3
        for args, kwargs, match in [((xs,), {"y": ys}, "both types are given"),
                                    ((), {}, "At least one dataset"),
                                    ((xs, ys[:2]), {}, "Size mismatch")]:
            with pytest.raises(ValueError, match=match):
                mod.StackDataset(*args, **kwargs)
    ds = data.StackDataset(x=ta.arange(4.0), y=ta.arange(4))
    (batch,) = list(data.DataLoader(ds, batch_size=4))
    assert batch["x"].tolist() == [0.0, 1.0, 2.0, 3.0] and batch["y"].dtype == ta.int64


def test_chain_dataset_and_iterable_datasets_added_as_torch():
    counts = {}
    for mod in (data, tdata):
        class Count(mod.IterableDataset):
            def __init__(self, n):
                self.n = n

            def __iter__(self):
                return iter(range(self.n))

            def __len__(self):
                return self.n

        counts[mod] = Count
        chained = mod.ChainDataset([Count(2), Count(3)])
        assert list(chained) == [0, 1, 0, 1, 2] and len(chained) == 5
        added = Count(1) + Count(2)
        assert isinstance(added, mod.ChainDataset) and list(added) == [0, 0, 1]
        with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
            list(mod.ChainDataset([Count(1), [5]]))
    count = counts[data]
    batches = list(data.DataLoader(data.ChainDataset([count(2), count(3)]), batch_size=2))
    assert [b.tolist() for b in batches] == [[0, 1], [0, 1], [2]]
    assert np.array_equal(data.ConcatDataset([[1], [2, 3]])[2], 3)
