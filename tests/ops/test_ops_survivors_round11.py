"""An op behaviour a fourth mutation draw (seed 3) of tinyattn/ops found unobserved: histogram's
bins tensor refused, with its own message, when it is not 1-D or has fewer than 2 edges (torch
refuses both). (The draw's other ops survivors: the float16 forms' deferral to the op,
tests/ops/test_half_forms_defer.py.)"""

import numpy as np
import pytest

import tinyattn as ta


@pytest.mark.parametrize("edges", [[[0.0, 1.0], [2.0, 3.0]], [1.0], [[0.0, 1.0, 2.0]]])
def test_histogram_bins_must_be_one_dimensional_with_two_edges(edges):
    x = ta.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="histogram: bins must be 1-D with at least 2 edges"):
        ta.histogram(x, bins=ta.tensor(edges))
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.histogram(torch.tensor([1.0, 2.0, 3.0]), bins=torch.tensor(edges))
    hist, bin_edges = ta.histogram(x, bins=ta.tensor([0.0, 1.5, 4.0]))
    np.testing.assert_array_equal(hist.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(bin_edges.numpy(), [0.0, 1.5, 4.0])
