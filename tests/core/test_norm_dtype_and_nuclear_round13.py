"""Norms as torch takes them: p="nuc" on Tensor.norm (and ta.norm) is linalg.matrix_norm's
nuclear norm over two dims, and a norm's dtype= casts a floating input to a floating dtype at
least as wide, refusing what torch refuses (float64 to float32, an int input, an int dtype)."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import DimError, DTypeError

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((2, 3, 4))


@pytest.mark.parametrize("kwargs", [{"dim": (1, 2)}, {"dim": (0, 1), "keepdim": True},
                                    {"dim": (-1, -3)}, {"dim": [2, 1], "keepdim": True}])
def test_the_nuclear_norm_over_two_dims_as_torch(kwargs):
    x, xt = ta.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    y, yt = x.norm(p="nuc", **kwargs), xt.norm(p="nuc", **kwargs)
    assert y.shape == tuple(yt.shape)
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-10)
    y.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_a_matrix_by_default_and_the_top_level_function():
    m = A[0]
    want = torch.tensor(m).norm(p="nuc").item()
    assert ta.tensor(m).norm(p="nuc").item() == pytest.approx(want, rel=1e-12)
    assert ta.norm(ta.tensor(m), p="nuc").item() == pytest.approx(want, rel=1e-12)
    assert ta.tensor(m).norm("nuc").item() == pytest.approx(want, rel=1e-12)
    assert float(ta.tensor(m).norm(p="nuc")) != pytest.approx(float(ta.tensor(m).norm()))


@pytest.mark.parametrize("shape, kwargs, match", [
    ((2, 3, 4), {}, "2-tuple"),  # (three dims: torch asks for two too)
    ((2, 3, 4), {"dim": 1}, "2-tuple"),
    ((3,), {}, "at least 2 dims"),
])
def test_the_nuclear_norm_needs_two_dims(shape, kwargs, match):
    with pytest.raises(DimError, match=match):
        ta.ones(*shape).norm(p="nuc", **kwargs)
    with pytest.raises(RuntimeError):
        torch.ones(*shape).norm(p="nuc", **kwargs)


def test_another_string_is_refused_naming_the_two():
    with pytest.raises(ValueError, match="'fro' or 'nuc'"):
        ta.ones(2, 3).norm(p="bad")


NARROWING = [
    lambda m: m.ones(3, dtype=m.float64).norm(dtype=m.float32),
    lambda m: m.ones(3, dtype=m.float32).norm(p=1, dtype=m.float16),
    lambda m: m.ones(3, dtype=m.float64).norm(p="nuc", dtype=m.float32) if m is ta else
    m.ones(3, 3, dtype=m.float64).norm(p="nuc", dtype=m.float32),
    lambda m: m.linalg.vector_norm(m.ones(3, dtype=m.float64), dtype=m.float32),
    lambda m: m.linalg.matrix_norm(m.ones(3, 3, dtype=m.float64), dtype=m.float32),
    lambda m: m.linalg.norm(m.ones(3, dtype=m.float64), dtype=m.float32),
    lambda m: m.norm(m.ones(3, dtype=m.float64), dtype=m.float32),
    lambda m: m.ones(3).norm(dtype=m.int64),
    lambda m: m.ones(3, dtype=m.int64).norm(dtype=m.float32),
    lambda m: m.linalg.vector_norm(m.ones(3, dtype=m.int64), dtype=m.float64),
    lambda m: m.ones(3, dtype=m.bool).norm(dtype=m.float32),
]


@pytest.mark.parametrize("call", NARROWING)
def test_a_narrowing_or_non_float_dtype_is_refused_as_torch_refuses_it(call):
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(DTypeError, match="norm"):
        call(ta)


WIDENING = [
    lambda m: m.tensor([3.0, -4.0], dtype=m.float16).norm(dtype=m.float32),
    lambda m: m.tensor([3.0, -4.0]).norm(dtype=m.float64),
    lambda m: m.tensor([3.0, -4.0]).norm(p=1, dtype=m.float32),
    lambda m: m.linalg.vector_norm(m.tensor([3.0, -4.0]), dtype=m.float64),
    lambda m: m.linalg.matrix_norm(m.tensor([[3.0, -4.0], [1.0, 2.0]]), "nuc", dtype=m.float64),
    lambda m: m.linalg.norm(m.tensor([[3.0, -4.0], [1.0, 2.0]]), dtype=m.float64),
    lambda m: m.norm(m.tensor([3.0, -4.0], dtype=m.float16), dtype=m.float32),
]


@pytest.mark.parametrize("call", WIDENING)
def test_a_dtype_as_wide_or_wider_casts_first(call):
    y, yt = call(ta), call(torch)
    assert str(y.dtype) == str(yt.dtype).replace("torch.", "")
    np.testing.assert_allclose(y.numpy(), yt.numpy(), rtol=1e-6)
