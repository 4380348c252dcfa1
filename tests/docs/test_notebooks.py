"""The exercise notebooks run, both ways, in a real Jupyter kernel (nbclient + ipykernel): each
blank one (notebooks/*.ipynb) runs top to bottom and says "not yet" at every checker; each
solved one (notebooks/solutions/) says "correct" at every checker and never "not yet". The
blanks are exactly what notebooks/make_blanks.py derives from the solutions. Starting a kernel
takes seconds, so each way runs all six notebooks in one kernel, names reset between them."""

import importlib.util
import os
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
spec = importlib.util.spec_from_file_location("make_blanks", NOTEBOOKS / "make_blanks.py")
make_blanks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_blanks)
SOLUTIONS = make_blanks.solutions()
FAST = "01-softmax-vjp.ipynb"  # the one that also shows a tensor, a graph and a plot
CHECK = re.compile(r"^\s*(?:if )?exercises\.check_\w+\(", re.M)


def test_every_chapter_has_its_exercise_and_the_blanks_are_derived():
    names = [p.name for p in SOLUTIONS]
    assert names == ["00-write-your-own-op.ipynb", "01-softmax-vjp.ipynb",
                     "02-attention-backward.ipynb", "03-online-merge.ipynb",
                     "04-flash-forward.ipynb", "05-flash-backward.ipynb"]
    for path in SOLUTIONS:
        blank = NOTEBOOKS / path.name
        assert blank.exists(), f"notebooks/{path.name} is missing: run notebooks/make_blanks.py"
        made = make_blanks.blank_notebook(path)
        committed = nbformat.read(blank, as_version=4)
        assert [c.source for c in committed.cells] == [c.source for c in made.cells], \
            f"notebooks/{path.name} drifted from its solution: run notebooks/make_blanks.py"
        assert "NotImplementedError" in "".join(c.source for c in made.cells)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "notebooks/" in readme


def test_make_blanks_refuses_unbalanced_markers():
    assert make_blanks.blank_source("a\n    # BEGIN SOLUTION\n    b\n    # END SOLUTION\nc") == \
        'a\n    raise NotImplementedError("your code here")\nc'
    for bad in ("# BEGIN SOLUTION\nx", "x\n# END SOLUTION", "# BEGIN SOLUTION\n# BEGIN SOLUTION"):
        with pytest.raises(ValueError, match="SOLUTION"):
            make_blanks.blank_source(bad)


def run_all(paths, monkeypatch):
    """Execute notebooks one after another in one fresh python3 kernel that imports this
    checkout's tinyattn, with `%reset -f` before each so none sees another's names (one kernel
    start instead of six). Returns, per notebook, (its cells with outputs, what they printed)."""
    paths_env = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths_env))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    combined = nbformat.v4.new_notebook()
    spans = {}
    for path in paths:
        cells = nbformat.read(path, as_version=4).cells
        combined.cells.append(nbformat.v4.new_code_cell("%reset -f"))
        spans[path.name] = (len(combined.cells), len(combined.cells) + len(cells))
        combined.cells.extend(cells)
    client = nbclient.NotebookClient(combined, kernel_name="python3", timeout=120,
                                     resources={"metadata": {"path": str(paths[0].parent)}})
    client.execute()  # an error in any cell fails here (CellExecutionError names the cell)
    results = {}
    for name, (first, end) in spans.items():
        cells = combined.cells[first:end]
        printed = "".join(o.get("text", "") for c in cells if c.cell_type == "code"
                          for o in c.outputs if o.output_type == "stream" and o.name == "stdout")
        results[name] = (cells, printed)
    return results


def checks(cells):
    return sum(len(CHECK.findall(c.source)) for c in cells if c.cell_type == "code")


@pytest.mark.slow  # (.ci/run runs it with the slow tests)
def test_every_solved_notebook_says_correct_at_every_checker(monkeypatch):
    results = run_all([NOTEBOOKS / "solutions" / p.name for p in SOLUTIONS], monkeypatch)
    for name, (cells, printed) in results.items():
        lines = printed.splitlines()
        assert not [line for line in lines if line.startswith("not yet")], (name, printed)
        assert lines.count("correct") == checks(cells) >= 1, (name, printed)
    cells, _ = results[FAST]  # it shows a tensor, a graph and a plot: each displays inline
    shown = {kind for c in cells if c.cell_type == "code" for o in c.outputs
             if o.output_type in ("execute_result", "display_data") for kind in o.get("data", {})}
    assert {"text/html", "image/svg+xml", "image/png"} <= shown, shown


@pytest.mark.slow  # (~7 s of kernels: the solved ones run in the README's command, this in CI)
def test_every_blank_notebook_runs_and_says_not_yet_at_every_checker(monkeypatch):
    results = run_all([NOTEBOOKS / p.name for p in SOLUTIONS], monkeypatch)
    for name, (cells, printed) in results.items():
        lines = printed.splitlines()
        assert "correct" not in lines, (name, printed)
        not_yet = [line for line in lines if line.startswith("not yet")]
        assert len(not_yet) == checks(cells) >= 1, (name, printed)
