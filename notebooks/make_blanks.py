"""Derive the exercise notebooks from their solutions, so the two never drift apart.

Each notebook in notebooks/solutions/ marks the code a learner writes between the lines
`# BEGIN SOLUTION` and `# END SOLUTION`; its blank twin in notebooks/ has, in their place, one
`raise NotImplementedError(...)` at the same indent; the markdown's links are made relative to
notebooks/ and point to the solution. Everything else is copied as it is, with outputs
cleared. tests/docs/test_notebooks.py checks the committed blanks are what this makes.

    python notebooks/make_blanks.py           # rewrite notebooks/*.ipynb from the solutions
"""

import re
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
SOLUTIONS = HERE / "solutions"
BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
BLANK = 'raise NotImplementedError("your code here")'
SOLVED = re.compile(r"Solutions: you are reading them; the exercise is \[\.\./(.+?)\]\(\.\./\1\)\.")


def blank_source(source):
    """A cell's code with every solution block replaced by a NotImplementedError line."""
    out, inside = [], False
    for line in source.split("\n"):
        begin = BEGIN.match(line)
        if begin:
            if inside:
                raise ValueError("a BEGIN SOLUTION inside another")
            inside = True
            out.append(begin.group(1) + BLANK)
        elif END.match(line):
            if not inside:
                raise ValueError("an END SOLUTION without its BEGIN")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("a BEGIN SOLUTION without its END")
    return "\n".join(out)


def blank_notebook(solution):
    """The exercise notebook (a NotebookNode) made from a solution notebook's path."""
    nb = nbformat.read(solution, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":  # links from notebooks/ rather than its solutions/
            cell.source = SOLVED.sub(r"Solutions: [solutions/\1](solutions/\1) (peek only when "
                                     r"stuck).", cell.source).replace("](../../", "](../")
        if cell.cell_type == "code":
            cell.source = blank_source(cell.source)
            cell.outputs = []
            cell.execution_count = None
    return nb


def solutions():
    return sorted(SOLUTIONS.glob("*.ipynb"))


def main():
    for path in solutions():
        nbformat.write(blank_notebook(path), HERE / path.name)
        print(f"notebooks/{path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
