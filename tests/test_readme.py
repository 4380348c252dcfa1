"""The README's code runs, and its set-up names the main job and the test command."""

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_setup_has_the_two_commands():
    setup = README.split("## Set up")[1].split("##")[0]
    assert "tinyattn train" in setup and "pytest" in setup
