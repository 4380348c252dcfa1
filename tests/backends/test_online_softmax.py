"""The base Backend's online softmax (the (m, l) recurrence and merge) against the three-pass one.

The online version walks each row block by block, keeping a running max m and a running sum
l of exp(x - m); `online_merge` combines two such pairs. Both references must agree on ordinary
rows, on rows of ±1e4, with -inf entries, and on fully masked rows (zeros, never NaN).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyattn as ta
from tinyattn.backends.base import Backend

BE = ta.get_backend()
NEG_INF = -np.inf
BLOCKS = [1, 2, 3, 4, 7, 16, 128]


def rows(dtype=np.float64):
    """A batch of awkward rows, 9 columns each."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, 9))
    x[0, 0] = [1e4, -1e4, 1e4, 0.0, 1e4 - 3.0, -1e4, 5.0, 1e4, -1e4]  # huge, mixed sign
    x[0, 1] = -1e4  # all equal and hugely negative
    x[0, 2, ::2] = NEG_INF  # some masked entries
    x[0, 3] = NEG_INF  # fully masked
    x[0, 4, :8] = NEG_INF  # only the last entry survives
    x[0, 5, 1:] = NEG_INF  # only the first entry survives
    x[0, 6] = 1e4
    x[0, 7, 3:6] = NEG_INF  # a masked run in the middle (a whole block for block=3)
    return x.astype(dtype)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_online_equals_three_pass(block, dtype):
    x = rows(dtype)
    three = BE.softmax(x, axis=-1)
    online = BE.online_softmax(x, block=block)
    assert online.dtype == dtype and three.dtype == dtype
    assert np.isfinite(online).all() and np.isfinite(three).all()
    tol = 1e-15 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(online, three, rtol=tol * 10, atol=tol)


def test_fully_masked_rows_give_zeros_and_others_sum_to_one():
    x = rows()
    for y in (BE.softmax(x, axis=-1), BE.online_softmax(x, block=2)):
        np.testing.assert_array_equal(y[0, 3], 0)
        sums = y.sum(axis=-1)
        sums[0, 3] = 1
        np.testing.assert_allclose(sums, 1, rtol=1e-14)
        np.testing.assert_array_equal(y[0, 2, ::2], 0)
        np.testing.assert_array_equal(y[0, 4], [0] * 8 + [1])
        np.testing.assert_array_equal(y[0, 5], [1] + [0] * 8)


def test_three_pass_and_online_match_torch():
    """An independent softmax (PyTorch's, in the dev extra) on every row with something to
    attend: huge values of mixed sign, -inf entries, a single survivor. (PyTorch gives NaN for
    the fully masked row, tinyattn zeros: checked above.)"""
    torch = pytest.importorskip("torch")
    x = rows()
    alive = np.isfinite(x).any(axis=-1)
    want = torch.softmax(torch.from_numpy(x[alive]), dim=-1).numpy()
    for y in (BE.softmax(x, axis=-1), BE.online_softmax(x, block=4)):
        np.testing.assert_allclose(y[alive], want, rtol=1e-13, atol=1e-300)


def test_huge_rows_do_not_overflow():
    x = np.array([[1e4, 1e4 - np.log(3.0), -1e4]])
    y = BE.online_softmax(x, block=1)
    np.testing.assert_allclose(y, [[0.75, 0.25, 0.0]], rtol=1e-12)


def test_block_one_is_the_textbook_recurrence():
    x = np.array([0.3, -1.2, 2.5, 2.5, NEG_INF, 0.0])
    m, l_ = NEG_INF, 0.0
    for xi in x:  # m_i = max(m_{i-1}, x_i), l_i = l_{i-1} e^(m_{i-1} - m_i) + e^(x_i - m_i)
        m_new = max(m, xi)
        l_ = l_ * np.exp(m - m_new) + np.exp(xi - m_new)
        m = m_new
    np.testing.assert_allclose(BE.online_softmax(x[None], block=1)[0], np.exp(x - m) / l_,
                               rtol=1e-15)


def _pair(xp_row):
    """(m, l) of a piece of a row: its max and sum of exp(x - max); (-inf, 0) if empty/masked."""
    m = xp_row.max(initial=NEG_INF)
    if m == NEG_INF:
        return np.array(NEG_INF), np.array(0.0)
    return np.array(m), np.exp(xp_row - m).sum()


@pytest.mark.parametrize("split", [0, 1, 3, 5, 6])
def test_merge_of_two_pieces_is_the_pair_of_the_whole(split):
    x = np.array([0.3, -1.2, 1e4, 2.5, NEG_INF, 1e4 - 1.0])
    m, l_ = Backend.online_merge(np, *_pair(x[:split]), *_pair(x[split:]))
    m_all, l_all = _pair(x)
    assert m == m_all
    np.testing.assert_allclose(l_, l_all, rtol=1e-15)


def test_merge_of_empty_pieces_stays_empty_without_nan():
    m, l_ = Backend.online_merge(np, np.array(NEG_INF), np.array(0.0), np.array(NEG_INF),
                                 np.array(0.0))
    assert m == NEG_INF and l_ == 0.0
    m, l_ = Backend.online_merge(np, np.array(NEG_INF), np.array(0.0), np.array(2.0),
                                 np.array(3.0))
    assert m == 2.0 and l_ == 3.0


def test_merge_is_associative_and_commutative():
    rng = np.random.default_rng(1)
    pieces = [_pair(rng.standard_normal(4) * 50) for _ in range(3)]
    a, b, c = pieces
    left = Backend.online_merge(np, *Backend.online_merge(np, *a, *b), *c)
    right = Backend.online_merge(np, *a, *Backend.online_merge(np, *b, *c))
    swapped = Backend.online_merge(np, *Backend.online_merge(np, *b, *a), *c)
    for other in (right, swapped):
        assert left[0] == other[0]
        np.testing.assert_allclose(left[1], other[1], rtol=1e-14)


@settings(max_examples=40, deadline=None)
@given(x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=9),
                    elements=st.one_of(st.floats(-1e4, 1e4), st.just(NEG_INF))),
       block=st.integers(1, 10))
def test_online_equals_three_pass_on_any_rows(x, block):
    online = BE.online_softmax(x, block=block)
    three = BE.softmax(x, axis=-1)
    assert np.isfinite(online).all()
    np.testing.assert_allclose(online, three, rtol=1e-12, atol=1e-15)
