"""F.gumbel_softmax (draws that follow the softmax, a one-hot with the soft sample's gradient)
and nn.utils.rnn.pad_sequence (against torch, gradients through the padding)."""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.nn.utils.rnn import pad_sequence

LOGITS = np.log(np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]]))


def test_gumbel_softmax_draws_follow_the_softmax():
    x = ta.tensor(np.tile(LOGITS, (4000, 1)))  # rows 0, 1, 0, 1, ...
    ta.manual_seed(0)
    hard = F.gumbel_softmax(x, tau=0.5, hard=True).numpy()
    assert set(np.unique(hard)) == {0.0, 1.0} and np.all(hard.sum(1) == 1)
    freq = np.stack([hard[0::2].mean(0), hard[1::2].mean(0)])
    np.testing.assert_allclose(freq, np.exp(LOGITS), atol=0.03)
    soft = F.gumbel_softmax(x, tau=2.0).numpy()
    np.testing.assert_allclose(soft.sum(1), 1, rtol=1e-6)
    assert soft.min() > 0 and soft.max() < 1


def test_hard_gumbel_softmax_is_the_soft_samples_one_hot_with_its_gradient():
    w = ta.tensor(np.arange(6.0).reshape(2, 3))
    results = []
    for hard in (True, False):
        x = ta.tensor(LOGITS.copy(), requires_grad=True)
        ta.manual_seed(3)  # the same noise for both
        y = F.gumbel_softmax(x, tau=0.7, hard=hard, dim=1)
        (y * w).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy()))
    (hard_y, hard_g), (soft_y, soft_g) = results
    np.testing.assert_array_equal(hard_y, np.eye(3)[soft_y.argmax(1)])
    np.testing.assert_allclose(hard_g, soft_g, rtol=1e-12)  # straight-through
    ta.manual_seed(5)
    a = F.gumbel_softmax(ta.tensor(LOGITS), dim=0)
    np.testing.assert_allclose(a.numpy().sum(0), 1, rtol=1e-12)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_matches_torch_with_gradients(batch_first, padding_side):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((n, 2)) for n in (3, 1, 4)]
    ours = [ta.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    got = pad_sequence(ours, batch_first, -1.5, padding_side)
    want = torch.nn.utils.rnn.pad_sequence(theirs, batch_first, -1.5, padding_side)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    cot = rng.standard_normal(got.shape)
    got.backward(ta.tensor(cot))
    want.backward(torch.tensor(cot))
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(o.grad.numpy(), t.grad.numpy())


def test_pad_sequence_errors():
    with pytest.raises(ValueError, match="pad_sequence: needs at least one sequence"):
        pad_sequence([])
    with pytest.raises(ValueError, match="padding_side must be 'right' or 'left', got 'up'"):
        pad_sequence([ta.ones(2)], padding_side="up")
    with pytest.raises(ta.ShapeError, match=r"the sequences differ after their first dim: "
                                            r"\(2, 3\) and \(2, 4\)"):
        pad_sequence([ta.ones(2, 3), ta.ones(2, 4)])
    with pytest.raises(ta.ShapeError, match="sequence 1 must be a tensor of at least one dim"):
        pad_sequence([ta.ones(2), ta.tensor(1.0)])


def test_pad_sequence_defaults_are_torchs():
    torch = pytest.importorskip("torch")
    arrays = [np.ones((2, 3)), np.full((1, 3), 2.0)]
    got = pad_sequence([ta.tensor(a) for a in arrays])
    want = torch.nn.utils.rnn.pad_sequence([torch.tensor(a) for a in arrays])
    np.testing.assert_array_equal(got.numpy(), want.numpy())  # (L, B, *), zeros after
