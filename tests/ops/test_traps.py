"""The ops' traps (tinyattn/ops/traps.py), seen the way a user sees them: inside
detect_anomaly(), a legal call that is rarely meant gives one AnomalyWarning naming the call and
what it saw (how many rows are fully masked, how large the float16 logits are, which input is a
float 0/1 mask), and a call without the trap gives none."""

import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn.autograd import apply
from tinyattn.ops import attention as attn
from tinyattn.ops import softmax as softmax_ops
from tinyattn.ops import traps

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's own exp overflow


def trap_messages(fn):
    """The AnomalyWarning messages `fn()` gives inside detect_anomaly(), in order."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ta.detect_anomaly():
            fn()
    return [str(w.message) for w in caught if issubclass(w.category, ta.AnomalyWarning)]


def fully_masked(messages):
    """(op name, n, of) for each 'n of m rows are fully masked' message."""
    out = []
    for m in messages:
        if "rows are fully masked" in m:
            label, rest = m.split(": ", 1)
            n, _, of = rest.split(" ")[:3]
            out.append((label.split("#")[0], int(n), int(of)))
    return out


# ---- attention: queries that may attend no key -----------------------------------------------

def _attend(q_shape, k_shape, v_dim, keep, causal, impl):
    rng = np.random.default_rng(0)
    q = ta.tensor(rng.standard_normal(q_shape).astype(np.float32))
    k = ta.tensor(rng.standard_normal(k_shape).astype(np.float32))
    v = ta.tensor(rng.standard_normal(k_shape[:-1] + (v_dim,)).astype(np.float32))
    mask = None if keep is None else ta.tensor(keep)
    if impl == "flash":  # the op itself: it takes a mask and the causal rule together
        return lambda: apply(attn.flash_attention, q, k, v, mask, scale=0.5, causal=causal)
    return lambda: attn.sdpa_composite(q, k, v, mask, causal, 0.5)


# T = 4 queries, S = 5 keys. Query 0 may attend keys 1-4 (so none under the causal rule), query
# 1 keys 1-4 (so key 1 under it), query 2 none at all, query 3 every key.
KEEP = np.ones((4, 5), dtype=bool)
KEEP[0, 0] = KEEP[1, 0] = False
KEEP[2] = False


@pytest.mark.parametrize("impl", ["flash", "composite"])
@pytest.mark.parametrize("q_shape, k_shape, keep, causal, masked", [
    ((3, 4, 8), (3, 5, 8), KEEP, False, 3 * 1),  # query 2 in each of 3 batches
    ((3, 4, 8), (3, 5, 8), KEEP, True, 3 * 2),  # queries 0 and 2
    ((3, 4, 8), (2, 1, 5, 8), KEEP, True, 6 * 2),  # q and k broadcast to (2, 3)
    ((1, 3, 4, 8), (2, 1, 5, 8), np.stack([KEEP, np.ones_like(KEEP)])[:, None], False, 3 * 1),
    ((2, 4, 8), (2, 5, 8), None, True, 0),  # causal with T <= S: every query sees key 0
    ((2, 4, 8), (2, 5, 8), None, False, 0),
    ((2, 4, 8), (2, 5, 8), np.zeros((4, 5), dtype=bool), False, 2 * 4),
])
def test_attention_warns_for_each_query_that_may_attend_no_key(impl, q_shape, k_shape, keep,
                                                               causal, masked):
    messages = fully_masked(trap_messages(_attend(q_shape, k_shape, 6, keep, causal, impl)))
    lead = np.broadcast_shapes(q_shape[:-2], k_shape[:-2])
    rows = int(np.prod(lead)) * q_shape[-2]
    if not masked:
        assert messages == []
    else:
        name = "flash_attention" if impl == "flash" else "scaled_masked_softmax"
        assert messages == [(name, masked, rows)]


@pytest.mark.parametrize("impl", ["flash", "composite"])
@pytest.mark.parametrize("q_shape, k_shape, v_shape, masked, rows", [
    ((4, 8), (2, 5, 8), (5, 6), 2, 8),  # only k has batch dims
    ((3, 4, 8), (3, 5, 8), (2, 1, 5, 6), 6, 24),  # v's batch dims widen the output
])
def test_the_masked_rows_are_counted_over_the_outputs_batch(impl, q_shape, k_shape, v_shape,
                                                            masked, rows):
    rng = np.random.default_rng(1)
    q, k, v = (ta.tensor(rng.standard_normal(s).astype(np.float32))
               for s in (q_shape, k_shape, v_shape))
    mask = ta.tensor(KEEP)
    if impl == "flash":
        run = lambda: apply(attn.flash_attention, q, k, v, mask, scale=0.5)  # noqa: E731
        assert fully_masked(trap_messages(run)) == [("flash_attention", masked, rows)]
    else:  # the softmax sees the scores, without v's batch dims
        run = lambda: attn.sdpa_composite(q, k, v, mask, False, 0.5)  # noqa: E731
        lead = np.broadcast_shapes(q_shape[:-2], k_shape[:-2])
        assert fully_masked(trap_messages(run)) == [("scaled_masked_softmax", int(np.prod(lead)),
                                                      int(np.prod(lead)) * 4)]


def test_the_masked_rows_message_says_what_they_give_and_what_to_check():
    (message,) = trap_messages(_attend((2, 4, 8), (2, 5, 8), 6, KEEP, False, "flash"))
    assert message.split("#")[0] == "flash_attention"
    assert message.split(": ", 1)[1] == (
        "2 of 8 rows are fully masked (no key may be attended). They give zeros, output and "
        "gradient, never NaN; if that is not meant, check the mask (True = may attend) and the "
        "padding.")


def test_traps_both_runs_each_trap_in_turn_on_the_same_call():
    def first(be, arrays, params, out, label):
        yield ("first", be, arrays, params, out, label)

    def second(be, arrays, params, out, label):
        yield ("second", be, arrays, params, out, label)
        yield "second again"

    call = ("backend", ["arrays"], {"dim": 1}, "out", "softmax#1")
    assert list(traps.both(first, second)(*call)) == [("first", *call), ("second", *call),
                                                       "second again"]


# ---- softmax and log_softmax: rows of all -inf ------------------------------------------------

NEG = float("-inf")


@pytest.mark.parametrize("fn, name", [(F.softmax, "softmax"), (F.log_softmax, "log_softmax")])
def test_a_row_of_all_minus_inf_warns_along_the_dim_asked(fn, name):
    x = np.array([[NEG, NEG, NEG], [0.0, NEG, 1.0]], dtype=np.float32)  # row 0 is -inf
    assert fully_masked(trap_messages(lambda: fn(ta.tensor(x), dim=-1))) == [(name, 1, 2)]
    assert fully_masked(trap_messages(lambda: fn(ta.tensor(x), dim=1))) == [(name, 1, 2)]
    # along dim 0 the columns are what is normalized: column 1 is all -inf, 0 and 2 are not
    assert fully_masked(trap_messages(lambda: fn(ta.tensor(x), dim=0))) == [(name, 1, 3)]
    assert fully_masked(trap_messages(lambda: fn(ta.tensor(x[1:]), dim=-1))) == []
    three = np.full((2, 3, 4), 0.5, dtype=np.float32)
    three[1, :, 2] = NEG  # one column of batch 1
    assert fully_masked(trap_messages(lambda: fn(ta.tensor(three), dim=1))) == [(name, 1, 8)]
    assert trap_messages(lambda: fn(ta.tensor(np.float32(NEG)), dim=0)) == []  # 0-d: no rows


def test_a_softmax_row_with_one_finite_entry_is_not_masked():
    x = ta.tensor([[NEG, 3.0, NEG], [NEG, NEG, -50.0]])
    for fn in (F.softmax, F.log_softmax):
        assert trap_messages(lambda fn=fn: fn(x, dim=-1)) == []


# ---- float16 logits beyond exp's range --------------------------------------------------------

def _half(values):
    return ta.tensor(np.array(values, dtype=np.float16))


@pytest.mark.parametrize("fn", [lambda x: F.softmax(x, dim=-1), lambda x: F.log_softmax(x, -1),
                                lambda x: F.cross_entropy(x, ta.tensor(np.array([0, 1])))])
def test_float16_logits_beyond_exp_range_warn_with_their_size(fn):
    (message,) = trap_messages(lambda: fn(_half([[0.0, 12.0, 1.0], [-3.0, 0.5, 2.0]])))
    assert "float16 logits reach 12;" in message
    assert "above 11.09" in message and ".float()" in message
    # the largest magnitude counts, negative too, and the infinities are left out
    (message,) = trap_messages(lambda: fn(_half([[NEG, -30.0, 1.0], [NEG, 0.5, 2.0]])))
    assert "float16 logits reach 30;" in message
    assert trap_messages(lambda: fn(_half([[0.0, 11.0, -11.0], [NEG, NEG, 2.0]]))) == []
    # the same values in float32 are safe
    assert trap_messages(lambda: fn(ta.tensor([[0.0, 40.0, 1.0], [-3.0, 0.5, 2.0]]))) == []


def test_float16_scores_are_judged_after_the_attention_scale():
    def softmax(x, scale):
        return lambda: apply(softmax_ops.scaled_masked_softmax, x, None, scale=scale)

    x = _half(np.eye(3) * 6)  # scores of 6 on the diagonal
    (message,) = [m for m in trap_messages(softmax(x, 3.0)) if "float16" in m]  # 18 > 11.09
    assert "float16 logits reach 18;" in message
    assert [m for m in trap_messages(softmax(x, 1.0)) if "float16" in m] == []  # 6
    # attention itself takes float16 q and k's scores in float32: nothing to warn about
    weights = attn.attention_weights(x, _half(np.eye(3)), None, False, 3.0)
    assert weights.dtype == np.float16
    assert [m for m in trap_messages(
        lambda: attn.attention_weights(x, _half(np.eye(3)), None, False, 3.0))
        if "float16" in m] == []


def test_all_infinite_float16_logits_warn_only_about_the_masked_row():
    messages = trap_messages(lambda: F.softmax(_half([[NEG, NEG]]), dim=-1))
    assert fully_masked(messages) == [("softmax", 1, 1)]
    assert len(messages) == 1


def test_one_call_can_give_both_softmax_warnings_in_order():
    messages = trap_messages(lambda: F.softmax(_half([[NEG, NEG], [0.0, 20.0]]), dim=-1))
    assert len(messages) == 2
    assert fully_masked(messages[:1]) == [("softmax", 1, 2)]
    assert "float16 logits reach 20;" in messages[1]


# ---- a float 0/1 tensor added to scores as if it were a bool mask ----------------------------

def _scores():
    return ta.tensor(np.linspace(-1, 1, 2 * 4 * 4, dtype=np.float32).reshape(2, 4, 4))


MASK01 = np.tril(np.ones((4, 4), dtype=np.float32))


def test_adding_a_float_01_mask_warns_naming_the_input_and_its_shape():
    (message,) = trap_messages(lambda: _scores() + ta.tensor(MASK01))
    assert message.startswith("add#") and "input 1 is a float tensor of 0s and 1s" in message
    assert "shape (4, 4)" in message and "-inf" in message
    (message,) = trap_messages(lambda: ta.tensor(MASK01) + _scores())
    assert "input 0 is a float tensor" in message
    (message,) = trap_messages(lambda: _scores() - ta.tensor(MASK01[None].repeat(2, 0)))
    assert message.startswith("sub#") and "input 1" in message and "shape (2, 4, 4)" in message


@pytest.mark.parametrize("mask", [
    np.where(MASK01 > 0, 0.0, NEG).astype(np.float32),  # the additive mask meant
    np.ones((4, 4), dtype=np.float32),  # all ones: not a mask
    np.zeros((4, 4), dtype=np.float32),
    MASK01 * 0.5,  # other values
    MASK01.astype(np.int64),  # not float
    np.ones((1, 4), dtype=np.float32) * np.array([0, 1, 1, 0], dtype=np.float32),  # a row
    np.array([[0.0], [1.0], [1.0], [0.0]], dtype=np.float32),  # a column
])
def test_what_is_not_a_float_01_mask_gives_no_warning(mask):
    assert trap_messages(lambda: _scores() + ta.tensor(mask)) == []


def test_small_or_one_dimensional_01_tensors_are_not_taken_for_masks():
    x = ta.tensor(np.array([0.5, -0.5, 2.0, 1.0], dtype=np.float32))
    assert trap_messages(lambda: x + ta.tensor(np.array([0.0, 1.0, 1.0, 0.0]))) == []  # 1-D
    small = ta.tensor(np.array([[0.0, 1.0, 1.0]]))  # (1, 3): fewer than 4 entries
    assert trap_messages(lambda: ta.tensor(np.ones((1, 3))) + small) == []
    # a scalar added (no shape to compare) is no mask either
    assert trap_messages(lambda: _scores() + 1.0) == []
