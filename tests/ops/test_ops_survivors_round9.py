"""Checks for mutation-testing survivors in tinyattn.ops (round 9: a second draw, seed 1); each
observes what its mutant broke:

- an index error with several entries out of range names the first of them (out_of_range
  took `bad.reshape(-1)[0]`; reshape(+1) fails on two or more);
- the composite attention path takes a float mask of the query's own dtype (float64 with
  float64, float16 with float16), as the fused path and torch do, and refuses an int mask;
- spherical_bessel_j0's gradient is 0 at ±inf (sin x / x flattens out), not NaN, and keeps
  the input's dtype.
"""

import numpy as np
import pytest
import torch

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.errors import DimError, DTypeError
from tinyattn.ops import attention as attn


@pytest.mark.parametrize("name, call, first", [
    ("gather", lambda t: ta.gather(t, 1, ta.tensor([[5, 7, 0], [0, 1, 9]])), 5),
    ("index_select", lambda t: ta.index_select(t, 1, ta.tensor([1, 4, 9])), 4),
    ("scatter", lambda t: t.scatter(1, ta.tensor([[0, 8], [6, 1]]), ta.zeros(2, 2)), 8),
])
def test_an_index_error_names_the_first_of_several_bad_entries(name, call, first):
    with pytest.raises(DimError, match=rf"^{name}: index {first} is out of range for dim 1 of "
                                       r"size 3 \(input \(2, 3\)"):
        call(ta.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_the_composite_attention_takes_a_float_mask_of_the_querys_dtype(dtype):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 4, 8)).astype(dtype) for _ in range(3))
    bias = np.triu(np.full((4, 4), -1e4), 1).astype(dtype)  # (added to the scores)
    got = attn.sdpa_composite(ta.tensor(q), ta.tensor(k), ta.tensor(v), ta.tensor(bias))
    fused = F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(k), ta.tensor(v),
                                           attn_mask=ta.tensor(bias))
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a, dtype=torch.float32) for a in (q, k, v)),
        attn_mask=torch.tensor(bias, dtype=torch.float32))
    assert got.dtype == fused.dtype == getattr(ta, dtype)
    tol = 2e-2 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(got.numpy().astype(np.float32), want.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(fused.numpy().astype(np.float32), want.numpy(), rtol=tol,
                               atol=tol)
    with pytest.raises(DTypeError, match="attn_mask must be bool"):
        attn.sdpa_composite(ta.tensor(q), ta.tensor(k), ta.tensor(v),
                            ta.tensor(np.ones((4, 4), dtype=np.int64)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_spherical_bessel_j0_has_gradient_0_at_infinity(dtype):
    x = ta.tensor(np.array([-np.inf, -3.0, 0.5, 2.0, np.inf], dtype=dtype), requires_grad=True)
    ta.special.spherical_bessel_j0(x).sum().backward()
    assert x.grad.dtype == getattr(ta, dtype)
    v = np.array([-3.0, 0.5, 2.0])
    want = (v * np.cos(v) - np.sin(v)) / v**2
    np.testing.assert_allclose(x.grad.numpy()[1:4], want, rtol=1e-6)
    assert x.grad.numpy()[0] == 0 and x.grad.numpy()[4] == 0


@pytest.mark.parametrize("bins", [True, 2.5, 0, -1])
def test_histogram_refuses_bins_that_are_not_a_positive_int(bins):
    with pytest.raises(ValueError, match=rf"^histogram: bins must be an int > 0 or a tensor of "
                                         rf"edges, got {bins!r}$"):
        ta.histogram(ta.tensor([0.1, 0.5, 0.9]), bins=bins)


def test_is_const_works_out_each_type_on_its_first_sight():
    import enum

    from tinyattn.ops.op import CONST, is_const

    class Ratio(float):
        pass

    class Level(enum.IntEnum):
        HIGH = 3

    for cls in (np.float64, np.float32, np.ndarray):
        CONST.pop(cls, None)  # (seen again below as if for the first time)
    assert is_const(1.5) and is_const(2) and is_const(True)
    assert is_const(Ratio(0.5)) and is_const(Level.HIGH)  # numbers of a subclass: numbers
    assert not is_const(np.float64(0.5)) and not is_const(np.float32(0.5))  # NumPy scalars
    assert not is_const(np.ones(2))
    x = ta.tensor([1.0, 2.0], requires_grad=True)  # x - a NumPy scalar: a gradient for x only
    (x - np.float64(0.5)).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
