"""The docs run: every chapter's ```python blocks execute in order, in one namespace, in a
temporary folder; each ```text block matches what its block printed; every picture a chapter
shows is written by its own code and committed under docs/img."""

import importlib.util
import shutil
from pathlib import Path

import pytest

from tinyattn import explore

DOCS = Path(__file__).resolve().parents[2] / "docs"
spec = importlib.util.spec_from_file_location("make_figures", DOCS / "make_figures.py")
make_figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_figures)
CHAPTERS = make_figures.chapters()


def test_there_are_seven_chapters_and_an_index_linking_them():
    assert len(CHAPTERS) == 7
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    for chapter in CHAPTERS:
        assert f"]({chapter.name})" in index
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    assert "docs/README.md" in readme and all(f"docs/{c.name}" in readme for c in CHAPTERS)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_chapter_runs_and_prints_what_it_says(chapter, tmp_path):
    source = chapter.read_text(encoding="utf-8")
    if "viz.render(" in source and shutil.which("dot") is None:
        pytest.skip("this chapter renders graphs: it needs Graphviz's dot program")
    if "explore.screenshot(" in source:  # a picture of the explorer page in a browser
        if importlib.util.find_spec("playwright") is None:
            pytest.skip("needs playwright: this chapter takes a screenshot of a page")
        if explore.chromium_path() is None:
            pytest.skip("needs chromium: this chapter takes a screenshot of a page")
    blocks = make_figures.blocks(chapter)
    assert blocks, f"{chapter.name} has no python blocks"
    printed = make_figures.run_chapter(chapter, tmp_path)
    for i, ((code, expected), got) in enumerate(zip(blocks, printed, strict=True)):
        if expected is not None:
            assert got == expected, f"{chapter.name}, python block {i + 1}:\n{code}"
    shown = make_figures.pictures(chapter)
    assert shown, f"{chapter.name} shows no picture made by the library"
    for name in shown:
        assert (tmp_path / name).stat().st_size > 1000, f"its code did not write {name}"
        assert (DOCS / "img" / name).exists(), f"docs/img/{name} is not committed"
