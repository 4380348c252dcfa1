"""nn.utils.rnn: pad_sequence, torch's way to batch sequences of different lengths (padded to the
longest; pair it with a key_padding_mask so attention skips the padding)."""

from ...errors import ShapeError, fmt_shape
from ...functional import pad, stack
from ...tensor import Tensor

__all__ = ["pad_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Tensors (L_i, *) padded with padding_value to the longest L (after them, or before with
    padding_side="left") and stacked: (L, B, *), or (B, L, *) with batch_first."""
    sequences = list(sequences)
    if not sequences:
        raise ValueError("pad_sequence: needs at least one sequence")
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'right' or 'left', got "
                         f"{padding_side!r}")
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor) or s.ndim == 0:
            raise ShapeError(f"pad_sequence: sequence {i} must be a tensor of at least one dim, "
                             f"got {fmt_shape(s.shape) if isinstance(s, Tensor) else s!r}")
        if s.shape[1:] != sequences[0].shape[1:]:
            raise ShapeError(f"pad_sequence: the sequences differ after their first dim: "
                             f"{fmt_shape(sequences[0].shape)} and {fmt_shape(s.shape)}")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        more = longest - s.shape[0]
        before, after = (more, 0) if padding_side == "left" else (0, more)
        padded.append(pad(s, (0, 0) * (s.ndim - 1) + (before, after), value=padding_value))
    return stack(padded, 0 if batch_first else 1)
