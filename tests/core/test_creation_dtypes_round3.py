"""A third round of torch parity for tensor creation, dtypes and conversions: the torch
methods and functions users reach for that tinyattn lacked (each checked against torch)."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


# ---- conversions: .byte(), .char(), .bfloat16() ----------------------------------------------


@pytest.mark.parametrize("name, dtype", [("byte", np.uint8), ("char", np.int8),
                                         ("short", np.int16)])
def test_integer_conversion_methods_as_torch(name, dtype):
    values = [1.7, -1.7, 3.0, 100.5]
    if name == "byte":  # (a negative float to uint8 is undefined in C: torch's and NumPy's differ)
        values = [1.7, 0.2, 3.0, 200.5]
    got, want = getattr(ta.tensor(values), name)(), getattr(torch.tensor(values), name)()
    assert got.dtype == dtype and str(want.dtype) == f"torch.{np.dtype(dtype).name}"
    assert got.tolist() == want.tolist()


def test_bfloat16_method_is_a_clear_error_naming_it():
    with pytest.raises(ta.errors.DTypeError, match="bfloat16"):
        ta.tensor([1.0, 2.0]).bfloat16()


# ---- random fills as Tensor methods -----------------------------------------------------------


def test_tensor_bernoulli_and_bernoulli_():
    p = ta.tensor([0.0, 1.0, 1.0, 0.0])
    assert p.bernoulli().tolist() == torch.tensor(p.tolist()).bernoulli().tolist()
    assert p.bernoulli().dtype == np.float32
    assert p.bernoulli(1.0).tolist() == [1.0, 1.0, 1.0, 1.0]
    x = ta.zeros(4)
    assert x.bernoulli_(ta.tensor([1.0, 0.0, 1.0, 0.0])) is x
    assert x.tolist() == [1.0, 0.0, 1.0, 0.0]
    assert ta.zeros(3, dtype=ta.int64).bernoulli_(1.0).tolist() == [1, 1, 1]
    ta.manual_seed(0)
    frac = ta.empty(100_000).bernoulli_(0.3).mean().item()
    assert abs(frac - 0.3) < 0.01
    g = ta.Generator().manual_seed(4)
    a = ta.full((50,), 0.5).bernoulli(generator=g)
    g.manual_seed(4)
    assert a.tolist() == ta.full((50,), 0.5).bernoulli(generator=g).tolist()
    with pytest.raises(ValueError, match="bernoulli_"):
        ta.zeros(2).bernoulli_(1.5)


def test_tensor_exponential_random_and_other_fills():
    ta.manual_seed(0)
    e = ta.empty(100_000).exponential_(lambd=2.0)
    assert e.min().item() >= 0 and abs(e.mean().item() - 0.5) < 0.01
    with pytest.raises(ValueError, match="exponential_"):
        ta.empty(2).exponential_(-1.0)
    r = ta.zeros(1000, dtype=ta.int64).random_(5, 8)
    assert set(r.tolist()) == {5, 6, 7} and r.dtype == np.int64
    assert ta.zeros(3).random_(1).tolist() == torch.zeros(3).random_(1).tolist()
    assert ta.zeros(3).random_(0, 1).tolist() == [0.0, 0.0, 0.0]
    assert set(ta.empty(200, dtype=ta.bool).random_().tolist()) == {True, False}
    assert ta.empty(100).random_().min().item() >= 0
    ln = ta.empty(100_000).log_normal_(0.0, 0.5)
    assert abs(ln.log().std().item() - 0.5) < 0.01
    c = ta.empty(100_001).cauchy_(1.0, 2.0)
    assert abs(c.median().item() - 1.0) < 0.05
    geo = ta.empty(100_000).geometric_(0.25)
    assert geo.min().item() >= 1 and abs(geo.mean().item() - 4.0) < 0.1
    with pytest.raises(ValueError, match="geometric_"):
        ta.empty(2).geometric_(1.0)


def test_randint_like_as_torch():
    x = ta.zeros(2, 3)
    r = ta.randint_like(x, 5)
    assert r.shape == (2, 3) and r.dtype == np.float32
    assert 0 <= r.min().item() and r.max().item() < 5
    r = ta.randint_like(ta.tensor([1, 2]), 3, 5)
    assert r.dtype == np.int64 and set(r.tolist()) <= {3, 4}
    assert ta.randint_like(x, 3, 4, dtype=ta.int32).tolist() == [[3] * 3] * 2


# ---- ta.asarray ------------------------------------------------------------------------------


def test_asarray_as_torch():
    assert ta.asarray([1.5, 2]).dtype == np.float32
    assert ta.asarray([1, 2]).tolist() == torch.asarray([1, 2]).tolist()
    a = np.array([1.0, 2.0])
    t = ta.asarray(a)  # shares, as torch.asarray
    a[0] = 9.0
    assert t.tolist() == [9.0, 2.0] and t.dtype == np.float64
    c = ta.asarray(a, copy=True)
    a[0] = 1.0
    assert c.tolist() == [9.0, 2.0]
    assert ta.asarray(a, dtype=ta.float32).dtype == np.float32
    x = ta.tensor([1.0, 2.0])
    assert ta.asarray(x) is x


# ---- printing: torch's fixed four decimals ---------------------------------------------------


@pytest.mark.parametrize("values", [[1.5, 2.25, -3.0], [0.1, 0.123456789], [1e-5, 1.0],
                                    [1e10, 1.0], [100.0, 2.5], [1.0, 2.0], 3.5,
                                    [float("nan"), float("inf"), 1.5]])
def test_float_repr_as_torch(values):
    assert repr(ta.tensor(values)) == repr(torch.tensor(values))


@pytest.mark.parametrize("values", [[1060.0, 926.0, 1833.0], [1.5, 1833.0], [0.25, -2.0]])
def test_float16_repr_as_torch(values):
    got, want = ta.tensor(values, dtype=ta.float16), torch.tensor(values, dtype=torch.float16)
    assert repr(got) == repr(want).replace("torch.float16", "float16")
