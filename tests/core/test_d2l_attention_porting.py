"""The attention chapters of Dive into Deep Learning (d2l.ai, PyTorch edition: Nadaraya-Watson,
masked_softmax, additive / dot-product / multi-head attention, positional encoding, the
Transformer encoder, GRU seq2seq) ported from torch to tinyattn: each test is a difference a
learner met there, pinned against torch's behaviour."""

import numpy as np
import pytest

import tinyattn as ta


def _d2l_sequence_mask(lib, X, valid_len, value=0):  # noqa: N803
    # d2l's sequence_mask, verbatim
    maxlen = X.size(1)
    mask = lib.arange((maxlen), dtype=lib.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def _d2l_masked_softmax(lib, X, valid_lens):  # noqa: N803
    if valid_lens is None:
        return lib.nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = lib.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = _d2l_sequence_mask(lib, X.reshape(-1, shape[-1]), valid_lens, value=-1e6)  # noqa: N806
    return lib.nn.functional.softmax(X.reshape(shape), dim=-1)


def test_masked_softmax_and_grad_clipping_match_torch():
    # what already matches, kept so: values and gradients through the in-place mask of a view,
    # both kinds of valid_lens, then d2l's grad_clipping (p.grad[:] *= theta / norm)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a, g = rng.normal(size=(2, 2, 4)), rng.normal(size=(2, 2, 4))
    for valid in ([2, 3], [[1, 3], [2, 4]]):
        got = {}
        for lib in (torch, ta):
            x = lib.tensor(a, requires_grad=True)
            y = _d2l_masked_softmax(lib, x * 3.0, lib.tensor(valid))
            (y * lib.tensor(g)).sum().backward()
            params = [x]
            norm = lib.sqrt(sum(lib.sum(p.grad ** 2) for p in params))
            if norm > 0.1:
                for p in params:
                    p.grad[:] *= 0.1 / norm
            got[lib] = y.detach().numpy(), x.grad.numpy(), float(norm)
        for mine, want in zip(got[ta], got[torch], strict=True):
            np.testing.assert_allclose(mine, want, rtol=1e-10, atol=1e-12)


# ---- masked_softmax: a boolean mask of the wrong shape -------------------------------------


def test_bool_mask_of_wrong_shape_names_mask_and_tensor_shapes():
    # the classic multi-head slip: valid_lens not repeated per head, so the mask has 8 rows for
    # 40 rows of scores; torch: "The shape of the mask [8, 6] at index 0 does not match the
    # shape of the indexed tensor [40, 6] at index 0" (an IndexError)
    valid_lens = ta.repeat_interleave(ta.tensor([1, 2, 3, 4]), 2)
    for requires_grad in (False, True):
        scores = ta.ones(40, 6, requires_grad=requires_grad) * 1.0
        with pytest.raises(IndexError, match=r"setitem: .*mask \(8, 6\).*\(40, 6\).*dim 0"
                                             r".* 8 .* 40") as info:
            _d2l_sequence_mask(ta, scores, valid_lens, value=-1e6)
        assert "False" not in str(info.value)  # the shapes, not the mask's 48 values
        assert len(str(info.value)) < 300
    with pytest.raises(IndexError, match=r"getitem: .*mask \(8, 6\).*\(40, 6\).*dim 0"):
        ta.ones(40, 6)[ta.ones(8, 6, dtype=ta.bool)]
    with pytest.raises(IndexError, match=r"getitem: .*mask \(2,\).*\(2, 3\).*dim 1.* 2 .* 3"):
        ta.ones(2, 3)[:, ta.tensor([True, False])]
    with pytest.raises(IndexError, match=r"getitem: .*mask \(2, 2\).*\(4, 3, 5\).*dim 1.* 2 .* 3"):
        ta.ones(4, 3, 5)[0:2, ..., ta.ones(2, 2, dtype=ta.bool)]  # the mask covers dims 1, 2
    # a mask that fits still works, and so does d2l's sequence_mask
    x = ta.tensor([[1, 2, 3], [4, 5, 6]])
    assert _d2l_sequence_mask(ta, x, ta.tensor([1, 2])).tolist() == [[1, 0, 0], [4, 5, 0]]


def test_bool_mask_assignment_of_wrong_count_is_short():
    # torch: "shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result
    # of shape [2]"; the message names the shapes rather than printing the mask
    x = ta.arange(100.)
    with pytest.raises(ValueError, match=r"setitem: .*\(100,\).*value \(3,\)") as info:
        x[x > 97] = ta.tensor([9., 8., 7.])
    assert "False" not in str(info.value)


# ---- ~mask on a float tensor -----------------------------------------------------------------


def test_invert_of_a_float_tensor_names_the_op_and_dtype():
    # sequence_mask with a float mask (a mask built with .float() or * 1.0): torch raises
    # "~ (operator.invert) is only implemented on integer and Boolean-type tensors"
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="only implemented on integer and Boolean"):
        ~torch.ones(2)
    for f in (lambda: ~ta.ones(2), lambda: ta.ones(2).bitwise_not(),
              lambda: ta.bitwise_not(ta.ones(2, dtype=ta.float64))):
        with pytest.raises(ta.DTypeError, match=r"(invert|bitwise_not): .*integer or bool.*"
                                                r"float(32|64).*logical_not"):
            f()
    assert (~ta.tensor([True, False])).tolist() == [False, True]
    assert (~ta.tensor([1, 2])).tolist() == (~torch.tensor([1, 2])).tolist()
