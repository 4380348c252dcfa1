"""Checks that kill the nn mutants a sixth mutation run left alive, through the public API
with torch as the reference where it applies:

- BatchNorm's empty batch in training: an empty output of the input's dtype (float64 into a
  float32 module, float16 too, integers as float32), the running statistics as they were,
  as torch's; one value per channel in eval without running statistics: refused, as torch's.
- load_state_dict's IncompatibleKeys: read by int index, negative index and slice (as a
  tuple), by name, and its repr when only one of the two lists is empty.
- TinyTransformer.generate's inverse-CDF draw (the sampler of a stream without numpy's
  `choice`, as CuPy's): the token the uniform lands in, the last token reachable.
- PackedSequence.to(...): batch_sizes and the sort order kept, so it unpacks as before.
"""

import numpy as np
import pytest
import torch

import tinyattn as ta
from tinyattn import nn

# --- BatchNorm: the empty batch and one value per channel -------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int64"])
def test_batch_norm_empty_batch_keeps_the_dtype_and_the_running_stats(dtype):
    for shape in ((0, 3), (0, 3, 4)):
        t_bn = torch.nn.BatchNorm1d(3)
        want = t_bn(torch.zeros(shape, dtype=getattr(torch, dtype)))
        bn = nn.BatchNorm1d(3)
        got = bn(ta.zeros(shape, dtype=getattr(ta, dtype)))
        assert tuple(got.shape) == tuple(want.shape)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        assert bn.running_mean.tolist() == t_bn.running_mean.tolist() == [0.0] * 3
        assert bn.running_var.tolist() == t_bn.running_var.tolist() == [1.0] * 3
        assert bn.num_batches_tracked.item() == t_bn.num_batches_tracked.item() == 1


def test_batch_norm_empty_batch_without_running_stats():
    t_bn = torch.nn.BatchNorm2d(2, track_running_stats=False)
    bn = nn.BatchNorm2d(2, track_running_stats=False)
    want = t_bn(torch.zeros(0, 2, 3, 3, dtype=torch.float64))
    got = bn(ta.zeros(0, 2, 3, 3, dtype=ta.float64))
    assert tuple(got.shape) == tuple(want.shape) == (0, 2, 3, 3)
    assert got.dtype == ta.float64


def test_batch_norm_eval_without_running_stats_refuses_one_value_per_channel():
    t_bn = torch.nn.BatchNorm1d(3, track_running_stats=False).eval()
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        t_bn(torch.ones(1, 3))
    bn = nn.BatchNorm1d(3, track_running_stats=False).eval()
    with pytest.raises(ta.ShapeError, match="more than one value per channel"):
        bn(ta.ones(1, 3))
    # two values per channel: the batch's own statistics, as torch's
    x = np.array([[1.0, 2.0, 3.0], [3.0, 6.0, 9.0]], dtype=np.float32)
    np.testing.assert_allclose(bn(ta.tensor(x)).detach().numpy(),
                               t_bn(torch.tensor(x)).detach().numpy(), atol=1e-5)


# --- load_state_dict's IncompatibleKeys -------------------------------------------------------

def _load(lib, keys):
    model = lib.nn.Linear(2, 2)
    full = {"weight": lib.zeros(2, 2), "bias": lib.zeros(2), "extra": lib.zeros(1)}
    return model.load_state_dict({k: full[k] for k in keys}, strict=False)


def test_incompatible_keys_index_by_int_slice_and_name():
    got, want = _load(ta, ["weight", "extra"]), _load(torch, ["weight", "extra"])
    assert got[0] == want[0] == ["bias"]
    assert got[1] == want[1] == ["extra"]
    assert got[-1] == want[-1] == ["extra"]
    assert got[-2] == want[-2] == ["bias"]
    assert tuple(got[0:2]) == tuple(want[0:2]) == (["bias"], ["extra"])
    assert got["missing_keys"] == ["bias"] and got["unexpected_keys"] == ["extra"]
    with pytest.raises(IndexError):
        got[2]
    with pytest.raises(IndexError):
        want[2]


@pytest.mark.parametrize("keys", [["weight", "bias"], ["weight"], ["weight", "bias", "extra"],
                                  ["weight", "extra"]])
def test_incompatible_keys_repr_as_torch(keys):
    got, want = _load(ta, keys), _load(torch, keys)
    assert repr(got) == repr(want)
    assert str(got) == str(want)


def test_incompatible_keys_repr_with_only_one_list_empty():
    assert repr(_load(ta, ["weight"])) == \
        "_IncompatibleKeys(missing_keys=['bias'], unexpected_keys=[])"
    assert repr(_load(ta, ["weight", "bias", "extra"])) == \
        "_IncompatibleKeys(missing_keys=[], unexpected_keys=['extra'])"


# --- TinyTransformer.generate: the inverse-CDF sampler ----------------------------------------

class _UniformStream:
    """A random stream with only random(n) (no numpy `choice`, as a device stream): the
    given uniforms in turn."""

    def __init__(self, values):
        self.values = list(values)

    def random(self, n):
        out, self.values = self.values[:n], self.values[n:]
        return np.array(out, dtype=np.float64)


def _uniform_model(vocab):
    """A model whose logits are all 0: every token equally likely (1 / vocab)."""
    ta.manual_seed(0)
    model = nn.TinyTransformer(vocab_size=vocab, d_model=8, n_heads=2, n_layers=1, max_len=8,
                               tie=False)
    with ta.no_grad():
        model.lm_head.weight.zero_()
    return model.eval()


def test_generate_inverse_cdf_draw_is_the_token_the_uniform_lands_in():
    model = _uniform_model(4)
    us = [0.1, 0.3, 0.6, 0.9, 0.999, 0.0]
    g = ta.Generator()
    g.rng = _UniformStream(us)
    out = model.generate(ta.tensor([[1]]), max_new_tokens=len(us), rng=g)
    # cdf (0.25, 0.5, 0.75, 1): the first token whose cumulative mass exceeds u * 1
    assert out.tolist() == [[1, 0, 1, 2, 3, 3, 0]]


def test_generate_inverse_cdf_draw_per_row_and_with_one_token():
    model = _uniform_model(2)
    g = ta.Generator()
    g.rng = _UniformStream([0.75, 0.25, 0.99, 0.5])
    out = model.generate(ta.tensor([[0], [1]]), max_new_tokens=2, rng=g)
    assert out.tolist() == [[0, 1, 1], [1, 0, 1]]
    # a vocabulary of one: the draw is that token, whatever the uniform
    one = _uniform_model(1)
    g.rng = _UniformStream([0.999999, 0.0])
    assert one.generate(ta.tensor([[0]]), max_new_tokens=2, rng=g).tolist() == [[0, 0, 0]]


# --- PackedSequence.to -------------------------------------------------------------------------

def test_packed_sequence_to_keeps_batch_sizes_and_order():
    x = np.arange(3 * 4 * 2, dtype=np.float32).reshape(4, 3, 2)  # (T, B, *)
    lengths = [2, 4, 1]
    want = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), lengths,
                                                   enforce_sorted=False).to(torch.float64)
    packed = nn.utils.rnn.pack_padded_sequence(ta.tensor(x), lengths, enforce_sorted=False)
    moved = packed.to(ta.float64)
    assert isinstance(moved, nn.utils.rnn.PackedSequence)
    assert moved.data.dtype == ta.float64
    assert moved.batch_sizes.tolist() == want.batch_sizes.tolist() == [3, 2, 1, 1]
    assert moved.sorted_indices.tolist() == want.sorted_indices.tolist()
    assert moved.unsorted_indices.tolist() == want.unsorted_indices.tolist()
    np.testing.assert_array_equal(moved.data.numpy(), want.data.numpy())
    padded, lens = nn.utils.rnn.pad_packed_sequence(moved)
    t_padded, t_lens = torch.nn.utils.rnn.pad_packed_sequence(want)
    np.testing.assert_array_equal(padded.numpy(), t_padded.numpy())
    assert lens.tolist() == t_lens.tolist() == lengths
    # to("cpu") too: the same sequences
    assert packed.to("cpu").batch_sizes.tolist() == [3, 2, 1, 1]
