"""Tests for the seed-6 mutation survivors of ops (2026-11-29): the float64 kernel behind
digamma and polygamma(0, x) returns a float64 array (NaN at the negative whole numbers, as
torch), never an array of Python objects that only a later cast turns back into numbers."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.backends import backend
from tinyattn.ops.special import digamma_f64

torch = pytest.importorskip("torch")


def test_digammas_float64_kernel_gives_float64_with_nan_at_the_negative_integers():
    x = np.array([-3.0, -2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 7.25, 30.0])
    out = digamma_f64(backend("numpy"), x)
    assert out.dtype == np.float64
    want = torch.special.digamma(torch.tensor(x)).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=0)  # (inf and NaN compared as such)
    assert np.isnan(out[[0, 2]]).all() and not np.isnan(out[[1, 5, 6, 7, 8]]).any()
    assert ta.special.polygamma(0, ta.tensor(x)).dtype == ta.float64
