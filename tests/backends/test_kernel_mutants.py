"""Planted bugs in the real kernels: the CUDA emulator must reject every one.

Each case is a text edit of a kernel source exactly as CupyBackend hands it to NVRTC (the edit
must apply exactly once, so a change of the kernel cannot silently turn a case into a no-op),
run through CupyBackend's own host code on tests/support/fake_cupy.py with the kernels emulated
(tests/support/cuda_emu.py). The same runs on the unedited sources pass (the first test), so
what fails
is the planted bug and nothing else. The classes are the ones a GPU would show as a wrong
answer now and then, or a crash: a lost update (atomicAdd -> +=), a missing barrier, a read of
shared memory nobody wrote, an off-by-one bound, a negative index into a __shared__ array, a
misaligned vector load.
"""

import re

import cuda_emu  # tests/support is on sys.path (tests/conftest.py)
import fake_cupy
import numpy as np
import pytest

from tinyattn.backends import cupy_backend as cb

pytestmark = [pytest.mark.emulated,
              pytest.mark.skipif(not cuda_emu.available(), reason="the emulator needs g++")]


def _rng_arrays(be, *shapes):
    rng = np.random.default_rng(0)
    return [be.xp.asarray(rng.standard_normal(s).astype(np.float32)) for s in shapes]


def flash_forward(be):
    """d = 16, two batches of 70 queries (two query tiles, the second partial), 40 keys."""
    q, k, v = _rng_arrays(be, (2, 70, 16), (2, 40, 16), (2, 40, 16))
    be.attention_forward(q, k, v, None, 0.25, False)


def flash_backward(be):
    """d = 16, 20 queries, 70 keys: two key-tile blocks add into every row of dQ."""
    q, k, v, g = _rng_arrays(be, (1, 20, 16), (1, 70, 16), (1, 70, 16), (1, 20, 16))
    out, lse = be.attention_forward(q, k, v, None, 0.25, False)
    be.attention_backward(q, k, v, out, lse, g, None, 0.25, False)


def softmax_warp(be):
    """Rows of 100: a warp kernel with 16-byte vectors, 8 lanes a row, 4 vectors a lane."""
    (x,) = _rng_arrays(be, (8, 100))
    be.softmax(x)


def softmax_view(be):
    """Rows of 64 read through a view that starts one float into its array: 16-byte vector
    loads would be misaligned, so the host must choose scalar ones."""
    (flat,) = _rng_arrays(be, (8 * 64 + 1,))
    x = flat[1:].reshape(8, 64)
    return x, be.softmax(x)


def softmax_block(be):
    """Two rows of 3000: the block kernels (256 threads, 8 warps), forward and backward."""
    x, g = _rng_arrays(be, (2, 3000), (2, 3000))
    be.softmax_backward(be.softmax(x), g)


RUNS = {f.__name__: f for f in (flash_forward, flash_backward, softmax_warp, softmax_view,
                                 softmax_block)}

# (id, file, text, replacement, run, what the emulator must say)
MUTANTS = [
    ("atomicAdd becomes +=", "flash.cu",
     "atomicAdd(gq + (b * n_q + i) * D + tx * C + c, dq[a][c] * scale);",
     "gq[(b * n_q + i) * D + tx * C + c] += dq[a][c] * scale;", "flash_backward",
     r"race on argument 6, byte \d+: .* \(another block: no barrier orders blocks\)"),
    ("the barrier before P V is removed", "flash.cu",
     "        __syncthreads();\n        flash_rows_times<D, BK>(acc, Ps, Vs, tx, ty);",
     "        flash_rows_times<D, BK>(acc, Ps, Vs, tx, ty);", "flash_forward",
     r"race on dynamic shared memory, byte \d+: .* in the same barrier interval"),
    ("the barrier after the per-warp pairs is removed", "softmax.cu",
     "    if (lane == 0) { sm[warp] = m; sl[warp] = l; }\n    __syncthreads();",
     "    if (lane == 0) { sm[warp] = m; sl[warp] = l; }", "softmax_block",
     r"block_merge_ml<float>.*::s[ml].*(in the same barrier interval|which no thread of this "
     r"block has written)"),
    ("warp 0 reads part[lane] for lanes past the warps", "softmax.cu",
     "s = lane < n_warps ? part[lane] : A(0);", "s = part[lane];", "softmax_block",
     r"reads static \(__shared__\) shared memory at byte \d+ \(block_sum<float>.*::part, its "
     r"byte 32\), which no thread of this block has written"),
    ("off by one: the last query row + 1 is written", "flash.cu",
     "        if (i >= n_q) continue;\n        const float inv",
     "        if (i > n_q) continue;\n        const float inv", "flash_forward",
     r"race on argument 3|past its end|past the end of argument 3"),
    ("off by one: a lane stores column n", "softmax.cu",
     "if (j < n_cols) tinyattn_store_vec<T, V>(y_row, j, out);\n    }\n}",
     "if (j <= n_cols) tinyattn_store_vec<T, V>(y_row, j, out);\n    }\n}", "softmax_warp",
     r"race on argument 1|past its end|past the end of argument 1"),
    ("a negative index into a __shared__ array", "softmax.cu",
     "if (lane == 0) part[warp] = s;", "if (lane == 0) part[warp - 1] = s;", "softmax_block",
     r"index -1 out of bounds for type 'float \[32\]'"),
    ("a misaligned vector load", "flash.cu",
     "flash_lds<4>(ar[a], A + (ty + 16 * a) * (D + 4) + kk);",
     "flash_lds<4>(ar[a], A + (ty + 16 * a) * (D + 4) + kk + 2);", "flash_forward",
     r"(?s)misaligned address .*16 byte alignment"),
]
NEEDS_UBSAN = {"a negative index into a __shared__ array", "a misaligned vector load"}


def test_a_misaligned_view_takes_the_scalar_kernels(monkeypatch):
    """The view's rows are right (through the scalar kernels); told that every pointer is
    aligned, the host launches the vector kernel and the emulator stops the misaligned load,
    as a GPU stops with "misaligned address"."""
    be = fake_cupy.install(monkeypatch, kernels=True, emulate=True)
    launched = []
    launch = be._launch
    monkeypatch.setattr(be, "_launch", lambda fn, *a, **k: (launched.append(fn.name),
                                                             launch(fn, *a, **k)))
    x, y = softmax_view(be)
    assert launched == ["tinyattn_softmax_forward_warp2_f32"]
    xs = x.get().astype(np.float64)
    want = np.exp(xs - xs.max(-1, keepdims=True))
    np.testing.assert_allclose(y.get(), want / want.sum(-1, keepdims=True), rtol=1e-5)
    if not cuda_emu.sanitizes_alignment():
        pytest.skip("g++ here has no libubsan: no alignment checks")
    monkeypatch.setattr(be, "_vector_aligned", lambda *arrays: True)
    with pytest.raises(cuda_emu.EmuError, match=r"(?s)misaligned address .*16 byte alignment"):
        softmax_view(be)
    assert launched[-1] == "tinyattn_softmax_forward_warp16x4_f32"


# the entry points the runs use; the others are left out of a mutant's build (each case is
# one g++ run: all 16 flash kernels would take it several times longer)
KEEP = re.compile(r"^(TINYATTN_FLASH\(16, .*, f32\)|TINYATTN_SOFTMAX_\w+\(.*float, f32.*\))$")
ENTRY = re.compile(r"^(TINYATTN_FLASH|TINYATTN_SOFTMAX_\w+)\(.*\)$")


def mutate(monkeypatch, filename, text, replacement):
    """Make CupyBackend compile kernels/<filename> with `text` replaced (exactly once)."""
    real = cb.kernel_source
    source = real(filename)
    assert source.count(text) == 1, f"the planted edit no longer applies to {filename}: {text!r}"
    bad = "\n".join(line for line in source.replace(text, replacement).split("\n")
                    if KEEP.match(line) or not ENTRY.match(line))
    assert bad != source
    monkeypatch.setattr(cb, "kernel_source", lambda name: bad if name == filename else real(name))


@pytest.mark.parametrize("run", sorted(RUNS))
def test_the_unedited_kernels_pass_the_same_runs(monkeypatch, run):
    RUNS[run](fake_cupy.install(monkeypatch, kernels=True, emulate=True))


# each mutant compiles its own kernel (~10 s on 2 cores): the lost update runs by default, the
# rest with the slow tests (python -m pytest -m slow)
@pytest.mark.parametrize("case", [pytest.param(m, id=m[0], marks=() if i == 0 else pytest.mark.slow)
                                  for i, m in enumerate(MUTANTS)])
def test_the_emulator_rejects_the_planted_bug(monkeypatch, case):
    name, filename, text, replacement, run, message = case
    if name in NEEDS_UBSAN and not cuda_emu.sanitizes_alignment():
        pytest.skip("g++ here has no libubsan: no alignment and array-bounds checks")
    mutate(monkeypatch, filename, text, replacement)
    be = fake_cupy.install(monkeypatch, kernels=True, emulate=True)
    with pytest.raises(cuda_emu.EmuError, match=message):
        RUNS[run](be)
