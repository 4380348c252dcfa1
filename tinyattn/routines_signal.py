"""torch's short-time Fourier transforms of real signals: stft and istft (ta.stft, ta.istft and
the Tensor methods x.stft(...), spec.istft(...), which tinyattn/__init__.py sets on Tensor).

tinyattn has no complex dtype, so a spectrum is torch's real layout (..., freq, frames, 2) (the
real and imaginary parts last, what torch.view_as_real gives and torch.stft(...,
return_complex=False) returns); return_complex=True is refused by name. Both are composed of
differentiable tensor ops: frames by unfold, the DFT as a matmul with its cos and sin matrices
(tensors), istft's overlap-add by fold, so gradients of any order come free, through the
signal and through the window alike.
"""

import math
import numbers

import numpy as np

from .errors import DTypeError, ShapeError, fmt_shape, warn_user
from .functional import fold, pad, stack
from .tensor import Tensor, _fresh, ones

_PAD_MODES = ("constant", "reflect", "replicate", "circular")
_COMPLEX_HINT = ("tinyattn has no complex numbers; pass return_complex=False for torch's real "
                 "layout (..., freq, frames, 2), the real and imaginary parts last (what "
                 "torch.view_as_real gives)")


def _real_floats(fn, x, ranks, what):
    """`x` checked: a floating tensor of one of `ranks` dims (`what` names them)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}: input must be a tensor, got {type(x).__name__}")
    if x.dtype.kind != "f":
        raise DTypeError(f"{fn}: expects a floating-point signal, got an integer or bool "
                         f"tensor of dtype {x.dtype}; convert it with .double() or .float()")
    if x.ndim not in ranks:
        raise ShapeError(f"{fn}: expected a {what} tensor, got shape {fmt_shape(x.shape)}")
    return x


def _count(fn, name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{fn}: {name} must be an int, got {value!r}")
    return int(value)


def _sizes(fn, n_fft, hop_length, win_length):
    """n_fft, hop_length (n_fft // 4 if None), win_length (n_fft if None), as ints."""
    n_fft = _count(fn, "n_fft", n_fft)
    hop = n_fft // 4 if hop_length is None else _count(fn, "hop_length", hop_length)
    win = n_fft if win_length is None else _count(fn, "win_length", win_length)
    if hop <= 0:
        raise ShapeError(f"{fn}: expected hop_length > 0, got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise ShapeError(f"{fn}: expected 0 < win_length <= n_fft, got win_length={win} "
                         f"with n_fft={n_fft}")
    return n_fft, hop, win


def _full_window(fn, window, win, n_fft, like):
    """The window (ones of win_length where None) in like's dtype, zero-padded on both sides
    to n_fft entries as torch's (left (n_fft - win_length) // 2)."""
    if window is None:
        window = ones(win, dtype=like.dtype, backend=like.backend.name)
    elif not isinstance(window, Tensor):
        raise TypeError(f"{fn}: window must be a tensor or None, got {type(window).__name__}")
    elif window.ndim != 1 or window.shape[0] != win:
        raise ShapeError(f"{fn}: expected a 1-D window of win_length={win} entries, got shape "
                         f"{fmt_shape(window.shape)}")
    window = window.to(like.dtype)
    left = (n_fft - win) // 2
    return pad(window, (left, n_fft - win - left)) if win < n_fft else window


def _dft(n_fft, freqs, like):
    """cos and sin of 2 pi k f / n_fft, (n_fft, freqs) tensors in like's dtype (the angle's
    k f taken mod n_fft first, exact for any size)."""
    k = np.arange(n_fft)[:, None] * np.arange(freqs)[None, :] % n_fft
    angle = 2 * np.pi * k / n_fft
    return tuple(_fresh(f(angle), dtype=like.dtype, backend=like.backend.name)
                 for f in (np.cos, np.sin))


def _check_return_complex(fn, return_complex):
    if return_complex is None:
        raise RuntimeError(f"{fn} requires the return_complex parameter be given for real "
                           "inputs, as torch's; tinyattn takes return_complex=False (the real "
                           "layout (..., freq, frames, 2))")
    if return_complex:
        raise DTypeError(f"{fn}: return_complex=True is not supported: {_COMPLEX_HINT}")


def _centred(x, n_fft, pad_mode):
    """x (B, L) padded by n_fft // 2 on both sides, as torch's center=True."""
    if pad_mode not in _PAD_MODES:
        raise NotImplementedError(f"stft: unrecognised pad_mode {pad_mode!r}; expected one "
                                  f"of {', '.join(map(repr, _PAD_MODES))}")
    side = n_fft // 2
    if pad_mode == "reflect" and side >= x.shape[-1]:
        raise ShapeError(f"stft: pad_mode='reflect' pads n_fft // 2 = {side} on each side, "
                         f"which must be less than the signal's length {x.shape[-1]}")
    return pad(x.unsqueeze(0), (side, side), mode=pad_mode).squeeze(0)


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,  # noqa: A002
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None):
    """torch.stft for a real signal (L,) or batch (B, L): (B, freq, frames, 2), the DFT of
    each window-weighted frame of n_fft entries, hop_length apart; freq = n_fft // 2 + 1
    (onesided, the default) or n_fft; normalized divides by sqrt(n_fft). return_complex must
    be given (as torch) and be False: torch's real layout, the parts last."""
    x = _real_floats("stft", input, (1, 2), "1-D or 2-D")
    _check_return_complex("stft", return_complex)
    if window is None:
        warn_user("stft: A window was not provided. A rectangular window will be applied, "
                  "which is known to cause spectral leakage (as torch warns); pass "
                  "window=ta.hann_window(n_fft), or window=ta.ones(n_fft) for this one")
    n_fft = _count("stft", "n_fft", n_fft)
    batch = x if x.ndim == 2 else x.unsqueeze(0)
    if center:
        batch = _centred(batch, n_fft, pad_mode)
    length = batch.shape[-1]
    if not 0 < n_fft <= length:
        raise ShapeError(f"stft: expected 0 < n_fft <= {length} (the signal's length"
                         f"{', padded' if center else ''}), got n_fft={n_fft}")
    n_fft, hop, win = _sizes("stft", n_fft, hop_length, win_length)
    frames = batch.unfold(-1, n_fft, hop) * _full_window("stft", window, win, n_fft, x)
    freqs = n_fft // 2 + 1 if onesided is None or onesided else n_fft
    cos, sin = _dft(n_fft, freqs, x)
    out = stack([frames @ cos, -(frames @ sin)], -1).transpose(1, 2)  # (B, freq, frames, 2)
    if normalized:
        out = out * (1.0 / math.sqrt(n_fft))
    return out if x.ndim == 2 else out.squeeze(0)


def _inverse_dft(n_fft, freqs, like):
    """The (freqs, n_fft) matrices frames = re @ C - im @ S of the real inverse DFT of the
    first n_fft // 2 + 1 frequencies (torch's irfft): the middle ones counted twice (for their
    mirror images); the imaginary parts of 0 and n_fft / 2 drop out (their sines are 0)."""
    cos, sin = _dft(n_fft, freqs, like)
    twice = np.full(freqs, 2.0)
    twice[0] = 1.0
    if n_fft % 2 == 0:
        twice[-1] = 1.0
    scale = _fresh(twice / n_fft, dtype=like.dtype, backend=like.backend.name).unsqueeze(1)
    return cos.t() * scale, sin.t() * scale


def _spectrum(spec, n_fft, onesided):
    """spec checked: (freq, frames, 2) or (B, freq, frames, 2), freq as onesided needs; the
    onesided it is (torch's default: freq != n_fft)."""
    x = _real_floats("istft", spec, (3, 4), "(freq, frames, 2) or (B, freq, frames, 2)")
    if x.shape[-1] != 2:
        raise ShapeError(f"istft: expected torch's real layout (..., freq, frames, 2), the "
                         f"real and imaginary parts last, got shape {fmt_shape(x.shape)}")
    freqs = x.shape[-3]
    onesided = freqs != n_fft if onesided is None else bool(onesided)
    want = n_fft // 2 + 1 if onesided else n_fft
    if freqs != want:
        raise ShapeError(f"istft: onesided={onesided} takes "
                         f"{'n_fft // 2 + 1' if onesided else 'n_fft'} frequencies, got "
                         f"{freqs} (spectrum shape {fmt_shape(x.shape)}) for n_fft={n_fft}")
    return x, onesided


def _overlap_add(columns, n_fft, hop, size):
    """columns (B, n_fft, frames) added at hop_length apart into (B, size)."""
    out = fold(columns, output_size=(1, size), kernel_size=(1, n_fft), stride=(1, hop))
    return out.reshape(columns.shape[0], size)


def _trimmed(y, envelope, start, end, expected):
    """y[:, start:end] / envelope there, zero-padded to end - start where end passes the
    signal (as torch, with its warning); a window whose overlap-add is 0 somewhere refused."""
    stop = min(end, expected)
    y, envelope = y[:, start:stop], envelope[:, start:stop]
    lowest = float(np.abs(np.asarray(envelope.detach().numpy())).min()) \
        if envelope.shape[-1] else 1.0
    if lowest < 1e-11:
        raise ShapeError(f"istft(...): window overlap add min: {lowest:g}; the window, "
                         f"hop_length apart, must cover every sample (nonzero sum of squares)")
    y = y / envelope
    if end > expected:
        warn_user("istft: The length of signal is shorter than the length parameter. Result "
                  "is being padded with zeros in the tail. Please check your center and "
                  "hop_length settings (as torch warns)")
        y = pad(y, (0, end - expected))
    return y


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,  # noqa: A002
          normalized=False, onesided=None, length=None, return_complex=False):
    """torch.istft of a spectrum in torch's real layout (freq, frames, 2) or (B, freq,
    frames, 2): each frame's inverse DFT, window-weighted, overlap-added and divided by the
    window's squared overlap-add; center drops n_fft // 2 at both ends, length trims (or pads
    with zeros) the signal. A real signal only (return_complex=False)."""
    if return_complex:
        raise DTypeError(f"istft: return_complex=True is not supported: {_COMPLEX_HINT}")
    n_fft, hop, win = _sizes("istft", n_fft, hop_length, win_length)
    x, onesided = _spectrum(input, n_fft, onesided)
    if window is None:
        warn_user("istft: A window was not provided. A rectangular window will be applied. "
                  "Please provide the same window used by stft to make the inversion "
                  "lossless (as torch warns)")
    spec = x if x.ndim == 4 else x.unsqueeze(0)
    # a real signal is the inverse of the first n_fft // 2 + 1 frequencies (torch's irfft),
    # those past them (a full spectrum's mirror images) dropped
    spec = spec[:, :n_fft // 2 + 1]
    frames_count = spec.shape[-2]
    re, im = spec[..., 0].transpose(1, 2), spec[..., 1].transpose(1, 2)  # (B, frames, freq)
    c, s = _inverse_dft(n_fft, spec.shape[1], x)
    frames = re @ c - im @ s
    if normalized:
        frames = frames * math.sqrt(n_fft)
    full = _full_window("istft", window, win, n_fft, x)
    expected = n_fft + hop * (frames_count - 1)
    y = _overlap_add((frames * full).transpose(1, 2), n_fft, hop, expected)
    squares = (full * full).unsqueeze(1).expand(n_fft, frames_count).unsqueeze(0)
    envelope = _overlap_add(squares, n_fft, hop, expected)
    start = n_fft // 2 if center else 0
    if length is None:
        end = expected - n_fft // 2 if center else expected
    else:
        end = start + _count("istft", "length", length)
    y = _trimmed(y, envelope, start, end, expected)
    return y if x.ndim == 4 else y.squeeze(0)


def _stft_method(self, n_fft, hop_length=None, win_length=None, window=None, center=True,
                 pad_mode="reflect", normalized=False, onesided=None, return_complex=None):
    """x.stft(...): ta.stft(x, ...)."""
    return stft(self, n_fft, hop_length, win_length, window, center, pad_mode, normalized,
                onesided, return_complex)


def _istft_method(self, n_fft, hop_length=None, win_length=None, window=None, center=True,
                  normalized=False, onesided=None, length=None, return_complex=False):
    """spec.istft(...): ta.istft(spec, ...)."""
    return istft(self, n_fft, hop_length, win_length, window, center, normalized, onesided,
                 length, return_complex)


METHODS = {"stft": _stft_method, "istft": _istft_method}  # set on Tensor by tinyattn/__init__
