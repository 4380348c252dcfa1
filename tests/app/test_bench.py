"""The CPU benchmarks' correctness checks (no timing here) and the fast paths they measure.

benchmarks/step.py and benchmarks/overhead.py time three implementations of the same thing;
these tests run their `check`s, which assert that all of them compute the same loss, values and
gradients, so a benchmark can never time something wrong. Also: the NumPy backend's row sums
(a matrix-vector product) equal NumPy's, its sorted scatter-add equals np.add.at, and the memory
of a training step is freed after backward.
"""

import gc
import json
import pathlib
import re
import sys
import tracemalloc

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.backends import allocator
from tinyattn.backends.numpy_backend import NumpyBackend
from tinyattn.bench import overhead, report, step
from tinyattn.cli import main

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
from numpy_floor import numpy_step  # noqa: E402 - the floor is a reference in benchmarks/


@pytest.mark.parametrize("size", ["tiny", pytest.param("small", marks=pytest.mark.slow)])
def test_step_implementations_agree(size):
    names = step.check(size, floor=numpy_step)
    assert {"numpy", "tinyattn", "captured"} <= set(names)


def test_step_agrees_with_torch():
    pytest.importorskip("torch")
    assert "torch" in step.check("tiny", floor=numpy_step)
    # `tinyattn bench step`: against torch
    assert step.check("tiny") == ["captured", "tinyattn", "torch"]


def test_overhead_chain_implementations_agree():
    assert {"numpy", "tinyattn"} <= set(overhead.check(n_ops=150))


def _wrong_floor(key, factor=1.0, loss_shift=0.0):
    """numpy_step with one gradient scaled (or the loss moved): a floor that is wrong."""
    def floor(p, idx, tgt, H):  # noqa: N803
        loss, grads = numpy_step(p, idx, tgt, H)
        grads = dict(grads)
        grads[key] = grads[key] * np.float32(factor)
        return loss + loss_shift, grads
    return floor


@pytest.mark.parametrize("key,factor,loss_shift", [
    ("blocks.0.mlp.fc.weight", 1.01, 0.0),     # a gradient 1 % off
    ("wte.weight", -1.0, 0.0),                 # a gradient with the wrong sign
    ("blocks.0.mlp.fc.weight", 1.0, 1e-2),      # the loss off
])
def test_the_agreement_check_catches_a_wrong_floor(key, factor, loss_shift):
    """`bench step` refuses to time implementations that disagree: check() itself must fail."""
    V, B, T, C, H = step.SIZES["tiny"]  # noqa: N806
    keys = set(numpy_step(step.make_params(V, T, C), *step.make_batch(V, B, T), H)[1])
    assert key in keys
    with pytest.raises(AssertionError):
        step.check("tiny", with_torch=False, floor=_wrong_floor(key, factor, loss_shift))
    assert step.check("tiny", with_torch=False, floor=_wrong_floor(key)) == ["captured", "numpy",
                                                                              "tinyattn"]


def test_the_agreement_check_looks_at_the_replayed_step(monkeypatch):
    """check() compares the captured step once it replays: a replay that doubles one leaf's
    gradient fails the check, though the recording calls (eager) were right."""
    from tinyattn import replay

    real = replay._write_grad

    def doubling(node, g, be, owned):
        real(node, g * 2 if node.tensor().shape == (64,) else g, be, owned)

    monkeypatch.setattr(replay, "_write_grad", doubling)
    with pytest.raises(AssertionError):
        step.check("tiny", with_torch=False, floor=numpy_step)


def test_bench_command_runs(capsys):
    assert main(["bench", "overhead", "--ops", "30", "--repeats", "1", "--no-torch"]) == 0
    out = capsys.readouterr().out
    assert "µs per op" in out and "tinyattn" in out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,n_dims", [((5, 7), 1), ((2, 3, 4), 1), ((2, 3, 4), 2),
                                          ((2, 3, 4), 3), ((0, 6), 1), ((3, 1), 1)])
@pytest.mark.parametrize("mean", [False, True])
def test_row_sum_as_a_product_equals_numpys(dtype, shape, n_dims, mean):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 100).astype(dtype)
    axes = tuple(range(len(shape) - n_dims, len(shape)))
    want = x.mean(axes, keepdims=True) if mean else x.sum(axes, keepdims=True)
    got = NumpyBackend(0).row_sum(x, n_dims, mean=mean)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12  # (entries ~100: sums cancel to near 0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 100)


def test_row_sum_of_views_nan_and_inf_rows_and_other_dtypes():
    be = NumpyBackend(0)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(0, 2, 1)  # not contiguous
    np.testing.assert_array_equal(be.row_sum(x), x.sum(-1, keepdims=True))
    rows = np.array([[1, np.nan, 2], [np.inf, 1, 1], [np.inf, -np.inf, 0], [-1, 0.5, 0.5]],
                    dtype=np.float32)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(be.row_sum(rows)[:, 0], [np.nan, np.inf, np.nan, 0])
    for other in (np.arange(6, dtype=np.int64).reshape(2, 3),  # NumPy's own sum: no BLAS
                  np.ones((2, 3), np.float16), np.ones((2, 3), np.complex64)):
        got = be.row_sum(other)
        assert got.dtype == other.sum(-1).dtype
        np.testing.assert_array_equal(got, other.sum(-1, keepdims=True))
    ones = be._ones[3, np.dtype(np.float32)]  # the shared vector of ones cannot be changed
    with pytest.raises(ValueError):
        ones[0] = 2


@pytest.mark.parametrize("low", [0, -4])
@pytest.mark.parametrize("tail", [(), (3,), (2, 2)])
def test_sorted_scatter_add_equals_add_at(low, tail):
    rng = np.random.default_rng(0)
    index = rng.integers(low, 5, 40)
    values = rng.standard_normal((40,) + tail)
    want = np.zeros((5,) + tail)
    np.add.at(want, index, values)
    got = np.zeros((5,) + tail)
    NumpyBackend(0).scatter_add(got, index, values)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_scatter_add_falls_back_for_other_indices():
    out = np.zeros((3, 3))
    NumpyBackend(0).scatter_add(out, (np.array([0, 0, 2]), np.array([1, 1, 0])), np.ones(3))
    np.testing.assert_array_equal(out, [[0, 2, 0], [0, 0, 0], [1, 0, 0]])


def test_activations_are_freed_after_backward():
    """After backward and dropping the loss, what is left is the parameters and their grads."""
    V, B, T, C, H = step.SIZES["tiny"]  # noqa: N806
    p = step.make_params(V, T, C)
    idx, tgt = step.make_batch(V, B, T)
    model = step.tinyattn_setup(p, H)
    step.tinyattn_step(model, idx, tgt)  # warm up: grads exist from here on
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    step.tinyattn_step(model, idx, tgt)
    gc.collect()
    after, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    activations = peak - before
    grad_bytes = sum(q.grad.data.nbytes for q in model.parameters())  # new .grad arrays
    assert activations > 10 * grad_bytes  # the step did real work
    assert after - before < grad_bytes + 0.02 * activations  # ... and kept only the grads


def _checkout(tmp_path):
    """A folder shaped like a source checkout: docs/ and benchmarks/numpy_floor.py."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks").mkdir()
    floor = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "numpy_floor.py"
    (tmp_path / "benchmarks" / "numpy_floor.py").write_text(floor.read_text())
    return tmp_path / "docs" / "benchmarks.md"


def test_report_writes_every_section_and_reruns_one_alone(tmp_path, capsys):
    out = _checkout(tmp_path)
    assert main(["bench", "report", "--quick", "--sections", "overhead", "attention",
                 "--out", str(out)]) == 0
    first = out.read_text()
    kept = report.kept_sections(first)
    assert set(kept) == {"overhead", "attention"}
    assert "| tinyattn |" in kept["overhead"] and "| 128 |" in kept["attention"]
    assert "Measured 20" in kept["overhead"] and "NumPy " in kept["overhead"]
    assert main(["bench", "report", "--quick", "--sections", "overhead", "--out", str(out)]) == 0
    again = report.kept_sections(out.read_text())
    assert again["attention"] == kept["attention"]  # not rerun: kept word for word
    assert set(again) == {"overhead", "attention"}


def test_a_failing_report_leaves_the_old_page(tmp_path, monkeypatch):
    out = _checkout(tmp_path)
    out.write_text("# the old page\n")

    def broken(ctx):
        raise RuntimeError("benchmark failed")

    monkeypatch.setitem(report.SECTIONS, "overhead", broken)
    with pytest.raises(RuntimeError):
        report.main(["--quick", "--sections", "overhead", "--out", str(out)])
    assert out.read_text() == "# the old page\n"
    assert [p.name for p in out.parent.iterdir()] == ["benchmarks.md"]


def test_the_gpu_section_without_a_gpu_says_so_and_keeps_the_page(tmp_path, monkeypatch):
    from tinyattn.bench import softmax

    monkeypatch.setattr(softmax, "gpu_or_reason", lambda: (None, "CuPy sees no GPU"))
    out = _checkout(tmp_path)
    out.write_text("# the old page\n")
    with pytest.raises(SystemExit, match="--sections gpu needs a GPU: CuPy sees no GPU"):
        report.main(["--sections", "gpu", "--out", str(out)])
    assert out.read_text() == "# the old page\n"


def test_softmax_bytes_count_what_a_fused_kernel_must_move():
    from tinyattn.bench.softmax import bytes_moved

    x = np.zeros((3, 4, 4), np.float32)  # 48 values of 4 bytes; causal rows read 1..4 of 4
    assert bytes_moved(x, backward=False, causal=False) == 2 * 192
    assert bytes_moved(x, backward=True, causal=False) == 3 * 192
    assert bytes_moved(x, backward=False, causal=True) == 192 * 10 // 16 + 192
    assert bytes_moved(x, backward=True, causal=True) == 2 * 192 * 10 // 16 + 192


def test_report_outside_a_checkout_says_what_it_needs(tmp_path):
    (tmp_path / "docs").mkdir()
    with pytest.raises(SystemExit, match="numpy_floor.py not found"):
        report.main(["--quick", "--sections", "step", "--out", str(tmp_path / "docs" / "b.md")])



def test_the_docs_page_is_the_reports_and_the_readme_quotes_it():
    """docs/benchmarks.md comes from the report (its sections are there), and every benchmark
    figure in the README (µs per op, x ratios) appears on that page."""
    root = pathlib.Path(__file__).resolve().parents[2]
    page = (root / "docs" / "benchmarks.md").read_text()
    assert set(report.SECTIONS) <= set(report.kept_sections(page)) <= {*report.SECTIONS,
                                                                       *report.ON_REQUEST}
    readme = (root / "README.md").read_text()
    figures = re.findall(r"\b\d+\.\d+(?:x| µs)", readme)
    assert figures, "the README quotes no benchmark figure"
    for figure in figures:
        assert figure in page, f"README figure {figure} is not in docs/benchmarks.md"


def test_a_sections_stamp_gives_the_load_as_the_section_started(tmp_path, monkeypatch):
    """A section's own runs raise the load: its stamp says the load (and time) before them."""
    import os

    load = [0.25]
    monkeypatch.setattr(os, "getloadavg", lambda: (load[0], 0.0, 0.0))

    def busy(ctx):
        load[0] = 1.75  # (the section's runs)
        return "## busy\n\n" + report.stamp(ctx, "tinyattn bench report --sections train")

    monkeypatch.setattr(report, "SECTIONS", {"train": busy})
    out = tmp_path / "docs" / "benchmarks.md"
    out.parent.mkdir()
    report.main(["--sections", "train", "--out", str(out)])
    assert "(load average 0.25 at the start)" in out.read_text()


def test_the_train_section_runs_each_flag_in_turn_and_counts_page_faults(monkeypatch):
    """Without running the job: each round runs the six commands in order (the last two while
    a loop keeps a core busy, stopped after each), and the table has a row per flag with its
    runs, times and faults."""
    import subprocess

    ran, real, real_popen, spinning = [], subprocess.run, subprocess.Popen, []

    class Spin:  # (the busy core's loop, not started)
        def __init__(self):
            spinning.append(self)

        def kill(self):
            spinning.remove(self)

        def wait(self):
            assert self not in spinning

    def run(cmd, **kw):  # (the page's stamp asks other commands for versions: those run)
        if cmd[1:3] != ["-m", "tinyattn"]:
            return real(cmd, **kw)
        ran.append((cmd[3:], len(spinning)))

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(subprocess, "Popen", lambda cmd, **kw: (
        Spin() if cmd[1:] == ["-c", "while True: pass"] else real_popen(cmd, **kw)))
    text = report.section_train(report.Context(True, None))
    flags = [(" ".join(a for a in cmd[3:] if a not in ("--steps", "20")), busy)
             for cmd, busy in ran]
    assert flags == [("", 0), ("--capture", 0), ("--no-keep-memory", 0), ("--threads 1", 0),
                     ("", 1), ("--threads 1", 1)]
    assert all(cmd[:1] == ["train"] and cmd[1] == "--out" and "20" in cmd for cmd, _ in ran)
    assert not spinning
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| `(eager)`", "idle"], ["| `--capture`", "idle"], ["| `--no-keep-memory`", "idle"],
        ["| `--threads 1`", "idle"], ["| `(eager)`", "one core busy"],
        ["| `--threads 1`", "one core busy"]]
    assert all(row.endswith(" | 0 |") for row in rows)  # nothing ran, nothing faulted
    assert "| page faults |" in text and "allocator.py" in text


@pytest.mark.skipif(allocator._glibc() is None, reason="keep_freed_memory needs glibc")
@pytest.mark.slow  # (~8 s: a fresh process builds and times a step; .ci/run runs it)
def test_the_kept_memory_step_runs_in_a_process_of_its_own(tmp_path):
    """The step section's second table: the check and one round per size in a fresh process
    that keeps freed memory; the report's own process keeps malloc's settings."""
    _checkout(tmp_path)
    rows = report.kept_step_rows(report.Context(True, None, tmp_path), [("tiny", 1)])
    assert list(rows) == ["tiny"]
    times, faults = rows["tiny"]["times"], rows["tiny"]["faults"]
    assert {"numpy", "tinyattn", "captured"} <= set(times) == set(faults)
    assert all(len(ts) == 1 and ts[0] > 0 for ts in times.values())
    assert all(count >= 0 for count in faults.values())


def test_the_generate_benchmark_checks_both_ways_give_the_same_tokens(monkeypatch):
    from tinyattn.bench import generate

    assert generate.check() == ["cache", "no cache"]
    real = generate.implementations

    def one_token_off(context, batch=1):  # the cached way going wrong in its last token
        impls = real(context, batch)
        good = impls["cache"]

        def wrong():
            ids = good().numpy()
            ids[:, -1] = (ids[:, -1] + 1) % generate.VOCAB
            return ta.tensor(ids)
        return {**impls, "cache": wrong}

    monkeypatch.setattr(generate, "implementations", one_token_off)
    with pytest.raises(AssertionError):
        generate.check()


def test_the_generate_section_reports_tokens_per_second(tmp_path):
    out = _checkout(tmp_path)
    assert main(["bench", "report", "--quick", "--sections", "generate", "--out", str(out)]) == 0
    text = report.kept_sections(out.read_text())["generate"]
    row = next(line for line in text.splitlines() if line.startswith("| 32 |"))
    cells = row.split(" | ")
    assert cells[1] == "24" and cells[2] == "1"  # 32 - 8 new tokens, one round (quick)
    assert float(cells[3].split()[0]) > 0 and cells[5].startswith("**")


def test_shakespeare_json_is_written_atomically(tmp_path, monkeypatch, capsys):
    """--json FILE: the results replace FILE whole; a failure midway keeps the old FILE."""
    from tinyattn.bench import shakespeare

    result = {"steps": 1, "tinyattn_ms_per_step": 2.0, "final_loss": {"tinyattn": 3.0}}
    monkeypatch.setattr(shakespeare, "measure", lambda steps, memory_steps: dict(result))
    path = tmp_path / "r.json"
    assert main(["bench", "shakespeare", "--steps", "1", "--json", str(path)]) == 0
    assert json.loads(path.read_text()) == result
    result["final_loss"] = {"tinyattn": 4.0}
    result["zz"] = {1, 2}  # (json cannot write a set: it fails midway through the file)
    with pytest.raises(TypeError, match="set"):
        main(["bench", "shakespeare", "--steps", "1", "--json", str(path)])
    assert json.loads(path.read_text())["final_loss"] == {"tinyattn": 3.0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temporary file left
