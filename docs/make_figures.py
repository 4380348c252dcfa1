"""Regenerate the pictures in docs/img by running the chapters' own code.

Every chapter (docs/0*.md) is a series of ```python blocks that run top to bottom in one
namespace; a ```text block right after a python block is what that block prints. This script
runs each chapter with docs/img as the working directory, so the pictures the chapters show are
exactly the files their code writes. tests/docs/test_docs.py runs the same blocks (in a temporary
folder) and checks the printed text.

    python docs/make_figures.py                  # rewrite docs/img/*
    python docs/make_figures.py --update-text    # also rewrite the ```text blocks
"""

import contextlib
import io
import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
IMG = DOCS / "img"
BLOCK = re.compile(r"```python\n(.*?)```(\s*```text\n(.*?)```)?", re.S)
PICTURE = re.compile(r"!\[[^\]]*\]\(img/([^)]+)\)")


def chapters():
    """The chapter files, in reading order."""
    return sorted(DOCS.glob("0*.md"))


def blocks(path):
    """(code, expected output or None) for every python block of a chapter."""
    return [(m.group(1), m.group(3)) for m in BLOCK.finditer(path.read_text(encoding="utf-8"))]


def pictures(path):
    """The file names of the pictures a chapter shows from docs/img."""
    return PICTURE.findall(path.read_text(encoding="utf-8"))


def run_chapter(path, cwd):
    """Run a chapter's python blocks in order, in one namespace, inside `cwd`; returns what
    each block printed."""
    import matplotlib

    matplotlib.use("Agg")
    namespace = {"__name__": f"docs.{path.stem}"}
    printed = []
    here = os.getcwd()
    os.chdir(cwd)
    try:
        for i, (code, _) in enumerate(blocks(path)):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"{path.name} (python block {i + 1})", "exec"), namespace)
            printed.append(out.getvalue())
    finally:
        os.chdir(here)
    return printed


def update_text(path, printed):
    """Rewrite the ```text blocks of a chapter with what its python blocks printed."""
    outputs = iter(printed)

    def replace(m):
        out = next(outputs)
        if m.group(2) is None:
            return m.group(0)
        return f"```python\n{m.group(1)}```\n\n```text\n{out}```"

    path.write_text(BLOCK.sub(replace, path.read_text(encoding="utf-8")), encoding="utf-8")


def main(argv):
    IMG.mkdir(exist_ok=True)
    for path in chapters():
        printed = run_chapter(path, IMG)
        missing = [name for name in pictures(path) if not (IMG / name).exists()]
        if missing:
            raise SystemExit(f"{path.name} shows {', '.join(missing)} but its code did not "
                             "write them")
        if "--update-text" in argv:
            update_text(path, printed)
        print(f"{path.name}: {len(printed)} blocks, pictures {', '.join(pictures(path))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
