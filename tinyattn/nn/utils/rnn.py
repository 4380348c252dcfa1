"""nn.utils.rnn: pad_sequence, torch's way to batch sequences of different lengths (padded to the
longest; pair it with a key_padding_mask so attention skips the padding), and torch's packing:
PackedSequence, pack_padded_sequence, pad_packed_sequence, pack_sequence, unpack_sequence;
unpad_sequence undoes pad_sequence.

A PackedSequence holds the sequences' steps time-major without padding: data[(sum of
lengths), *] the first step of every sequence (longest first), then the second of those that
have one, ...; batch_sizes[t] how many sequences have step t; sorted_indices and
unsorted_indices the batch order (None when the input came sorted). Packing and unpacking are
one gather each, so gradients flow through both.
"""

from collections import namedtuple

import numpy as np

from ...errors import ShapeError, fmt_shape
from ...functional import cat, pad, stack
from ...tensor import Tensor, full, tensor

__all__ = ["pad_sequence", "PackedSequence", "pack_padded_sequence", "pad_packed_sequence",
           "pack_sequence", "unpack_sequence", "unpad_sequence", "invert_permutation"]


class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """torch's PackedSequence (see the module's docstring); made by pack_padded_sequence."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def to(self, *args, **kwargs):
        """The same sequences with data moved or cast (Tensor.to's arguments)."""
        return type(self)(self.data.to(*args, **kwargs), self.batch_sizes, self.sorted_indices,
                          self.unsorted_indices)


def invert_permutation(permutation):
    """The permutation that undoes `permutation` (None for None), as torch's."""
    if permutation is None:
        return None
    order = np.asarray(permutation.tolist() if isinstance(permutation, Tensor) else permutation)
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return tensor(inverse.astype(np.int64))


def _lengths(lengths, batch, steps, shape):
    """`lengths` as an int64 array of one length (1..steps) per sequence, or a ShapeError."""
    lengths = np.asarray(lengths.tolist() if isinstance(lengths, Tensor) else lengths)
    if lengths.ndim != 1 or len(lengths) != batch:
        raise ShapeError(f"pack_padded_sequence: lengths has shape {fmt_shape(lengths.shape)}, "
                         f"expected ({batch},): one per sequence of input {fmt_shape(shape)}")
    if len(lengths) and lengths.min() <= 0:
        raise ShapeError("pack_padded_sequence: Length of all samples has to be greater than 0, "
                         f"but found an element in 'lengths' that is <= 0 ({lengths.tolist()})")
    if len(lengths) and lengths.max() > steps:
        raise ShapeError(f"pack_padded_sequence: a length of {lengths.max()} is longer than the "
                         f"{steps} steps of input {fmt_shape(shape)}")
    return lengths.astype(np.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):  # noqa: A002
    """Padded sequences, input (T, B, *) or (B, T, *) with batch_first, of the given lengths,
    as a PackedSequence; enforce_sorted: the lengths must be in decreasing order (else the
    batch is sorted here and the order kept in sorted_indices), as torch's."""
    if not isinstance(input, Tensor) or input.ndim < 2:
        got = fmt_shape(input.shape) if isinstance(input, Tensor) else type(input).__name__
        raise ShapeError("pack_padded_sequence: input must be a tensor of at least 2 dims "
                         f"(T, B, *), got {got}")
    x = input.transpose(0, 1) if batch_first else input
    lengths = _lengths(lengths, x.shape[1], x.shape[0], input.shape)
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise ShapeError("pack_padded_sequence: `lengths` array must be sorted in "
                             "decreasing order when `enforce_sorted` is True (got "
                             f"{lengths.tolist()}). You can pass `enforce_sorted=False` to "
                             "pack_padded_sequence and/or pack_sequence to sidestep this "
                             "requirement")
        order, sorted_indices = np.arange(len(lengths)), None
    else:
        order = np.argsort(-lengths, kind="stable")
        sorted_indices = tensor(order.astype(np.int64))
    ordered = lengths[order]
    batch_sizes = (ordered[None, :] > np.arange(ordered.max())[:, None]).sum(1)
    steps = np.repeat(np.arange(len(batch_sizes)), batch_sizes)
    rows = np.concatenate([order[:n] for n in batch_sizes])
    return PackedSequence(x[steps, rows], tensor(batch_sizes.astype(np.int64)), sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """A PackedSequence padded back with padding_value: (T, B, *) (or (B, T, *) with
    batch_first; T the longest length, or total_length), in the batch's original order, and
    the lengths (an int64 tensor), as torch's."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got "
                        f"{type(sequence).__name__}")
    data, batch_sizes = sequence.data, np.asarray(sequence.batch_sizes.tolist(), np.int64)
    steps, batch = len(batch_sizes), int(batch_sizes[0])
    if total_length is not None:
        if total_length < steps:
            raise ShapeError("pad_packed_sequence: Expected total_length to be at least the "
                             "length of the longest sequence in input, but got total_length="
                             f"{total_length} and max sequence length being {steps}")
        steps = total_length
    starts = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]])
    where = np.full((steps, batch), data.shape[0], np.int64)  # (the padding row, at the end)
    for t, (start, n) in enumerate(zip(starts, batch_sizes, strict=True)):
        where[t, :n] = start + np.arange(n)
    lengths = (where < data.shape[0]).sum(0)
    if sequence.unsorted_indices is not None:
        back = np.asarray(sequence.unsorted_indices.tolist(), np.int64)
        where, lengths = where[:, back], lengths[back]
    filler = full((1, *data.shape[1:]), padding_value, dtype=data.dtype, backend=data.backend)
    padded = cat([data, filler])[where]
    return (padded.transpose(0, 1) if batch_first else padded), tensor(lengths.astype(np.int64))


def pack_sequence(sequences, enforce_sorted=True):
    """Tensors (L_i, *) as one PackedSequence (pad_sequence, then pack_padded_sequence)."""
    sequences = list(sequences)
    lengths = [s.shape[0] if isinstance(s, Tensor) and s.ndim else 0 for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """A PackedSequence back as its list of tensors (L_i, *), in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return [padded[i, :n] for i, n in enumerate(lengths.tolist())]


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The padded batch (T, B, *) (or (B, T, *) with batch_first) back as its list of tensors
    (L_i, *), the first lengths[i] steps of each (pad_sequence undone), as torch's; the
    gradient flows back into the padded tensor. (torch's transposes its input in place when
    not batch_first; this one leaves it as it is.)"""
    if not isinstance(padded_sequences, Tensor) or padded_sequences.ndim < 2:
        got = fmt_shape(padded_sequences.shape) if isinstance(padded_sequences, Tensor) \
            else type(padded_sequences).__name__
        raise ShapeError("unpad_sequence: padded_sequences must be a tensor of at least 2 dims "
                         f"(T, B, *) or (B, T, *), got {got}")
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    lengths = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
    if len(lengths) != x.shape[0]:
        raise ShapeError(f"unpad_sequence: got {len(lengths)} lengths for the {x.shape[0]} "
                         f"sequences of padded_sequences {fmt_shape(padded_sequences.shape)}")
    steps = x.shape[1]
    return [x[i, :max(0, min(int(n), steps))] for i, n in enumerate(lengths)]


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
