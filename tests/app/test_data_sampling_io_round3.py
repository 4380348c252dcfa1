"""Round 3: DataLoader's batch reads (__getitems__), torch's DataLoader keywords and attributes,
ConcatDataset.cumulative_sizes, and the distributions' mode / event_shape / cdf / icdf."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.distributions import Categorical, Normal
from tinyattn.utils.data import ConcatDataset, DataLoader, Dataset, Subset, TensorDataset


class Batched(Dataset):
    """A dataset that reads a whole batch at once (torch's DataLoader calls __getitems__)."""

    def __init__(self):
        self.calls = []

    def __len__(self):
        return 6

    def __getitem__(self, i):
        return i

    def __getitems__(self, indices):
        self.calls.append(list(indices))
        return [100 + i for i in indices]


def test_loader_reads_a_batch_through_getitems_as_torch():
    ds = Batched()
    got = [b.tolist() for b in DataLoader(ds, batch_size=4)]
    assert got == [[100, 101, 102, 103], [104, 105]]
    assert ds.calls == [[0, 1, 2, 3], [4, 5]]  # one call per batch


def test_loader_getitems_matches_torch():
    torch = pytest.importorskip("torch")

    class TorchBatched(torch.utils.data.Dataset):
        __len__, __getitem__, __getitems__ = (Batched.__len__, Batched.__getitem__,
                                              Batched.__getitems__)

        def __init__(self):
            self.calls = []

    want = [b.tolist() for b in torch.utils.data.DataLoader(TorchBatched(), batch_size=4)]
    assert [b.tolist() for b in DataLoader(Batched(), batch_size=4)] == want


def test_subset_passes_batch_reads_on_to_its_dataset():
    ds = Batched()
    sub = Subset(ds, [5, 3, 1])
    assert [b.tolist() for b in DataLoader(sub, batch_size=2)] == [[105, 103], [101]]
    assert ds.calls == [[5, 3], [1]]
    # a dataset without __getitems__: each sample read alone, as before
    plain = Subset(TensorDataset(ta.arange(5)), [4, 0])
    assert plain.__getitems__([0, 1]) == [(ta.tensor(4),), (ta.tensor(0),)]
    assert [b[0].tolist() for b in DataLoader(plain, batch_size=2)] == [[4, 0]]


def test_loader_takes_torchs_other_keywords_and_keeps_its_options():
    loader = DataLoader(range(5), batch_size=2, multiprocessing_context="spawn",
                        pin_memory_device="", in_order=True, pin_memory=True, timeout=0,
                        persistent_workers=False)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4]]
    assert loader.pin_memory is True and loader.timeout == 0
    assert loader.worker_init_fn is None and loader.prefetch_factor is None
    assert loader.persistent_workers is False and loader.multiprocessing_context == "spawn"
    assert loader.in_order is True and loader.pin_memory_device == ""


def test_concat_dataset_cumulative_sizes_as_torch():
    cat = ConcatDataset([range(3), range(0), range(2)])
    assert cat.cumulative_sizes == [3, 3, 5]
    assert [cat[i] for i in range(5)] == [0, 1, 2, 0, 1]


def test_categorical_mode_is_the_most_likely_category():
    probs = ta.tensor([[0.1, 0.7, 0.2], [0.5, 0.2, 0.3]])
    assert Categorical(probs=probs).mode.tolist() == [1, 0]
    assert Categorical(logits=probs.log()).mode.tolist() == [1, 0]
    assert Categorical(probs=probs).mode.dtype == np.int64


def test_normal_mode_event_shape_cdf_icdf_match_torch():
    torch = pytest.importorskip("torch")
    loc_v, scale_v, x_v = [0.0, 1.0, -2.0], [1.0, 2.0, 0.5], [0.3, -1.0, -2.2]
    loc = ta.tensor(loc_v, requires_grad=True)
    scale = ta.tensor(scale_v, requires_grad=True)
    tloc = torch.tensor(loc_v, requires_grad=True)
    tscale = torch.tensor(scale_v, requires_grad=True)
    d, td = Normal(loc, scale), torch.distributions.Normal(tloc, tscale)
    assert d.event_shape == tuple(td.event_shape) == ()
    assert d.mode.tolist() == td.mode.tolist() == loc_v
    cdf, tcdf = d.cdf(ta.tensor(x_v)), td.cdf(torch.tensor(x_v))
    np.testing.assert_allclose(cdf.detach().numpy(), tcdf.detach().numpy(), rtol=1e-6)
    q = [0.1, 0.5, 0.975]
    icdf, ticdf = d.icdf(ta.tensor(q)), td.icdf(torch.tensor(q))
    np.testing.assert_allclose(icdf.detach().numpy(), ticdf.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    (cdf.sum() + icdf.sum()).backward()
    (tcdf.sum() + ticdf.sum()).backward()
    np.testing.assert_allclose(loc.grad.numpy(), tloc.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(scale.grad.numpy(), tscale.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_normal_cdf_icdf_values_without_torch():
    d = Normal(0.0, 1.0)
    assert math.isclose(d.cdf(ta.tensor(0.0)).item(), 0.5)
    assert math.isclose(d.cdf(ta.tensor(1.959963984540054)).item(), 0.975, rel_tol=1e-6)
    assert math.isclose(d.icdf(ta.tensor(0.975)).item(), 1.959963984540054, rel_tol=1e-5)
    with pytest.raises(ValueError, match="NaN"):
        d.cdf(ta.tensor(float("nan")))  # torch's validate_args on the value, as log_prob's
