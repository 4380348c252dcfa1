"""The README's code runs, and its set-up names the main job and the test command."""

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_setup_has_the_two_commands():
    setup = README.split("## Set up")[1].split("##")[0]
    assert "tinyattn train" in setup and "pytest" in setup


def test_readme_setup_trains_with_the_base_install_and_tests_with_dev():
    """The main job installs only what training needs; the test line the dev extra; the set-up
    says where the code comes from, that it wants a fresh venv, what `dot` is and how long the
    tests take (issue 17)."""
    setup = README.split("## Set up")[1].split("\n## ")[0]
    block = setup.split("```bash\n")[1].split("```")[0]
    lines = [line.split("#")[0].strip() for line in block.splitlines()]
    main_job = next(line for line in lines if "tinyattn train" in line)
    tests = next(line for line in lines if "pytest" in line)
    assert main_job.startswith("pip install -e . &&") and "[dev]" not in main_job
    assert tests.startswith('pip install -e ".[dev]" &&')
    assert lines.index(main_job) > next(i for i, line in enumerate(lines) if "venv" in line)
    assert "git clone" in block and "cd tinyattn" in block
    assert "Graphviz" in setup and "system program" in setup and "minutes" in block


def test_training_needs_nothing_from_the_dev_extra():
    """`tinyattn train` imports no test tool (the main-job line installs only the base)."""
    import subprocess
    import sys

    code = ("import sys, tinyattn.cli, tinyattn.train, tinyattn.sample, tinyattn.runs\n"
            "bad = sorted(m for m in ('torch', 'pytest', 'hypothesis', 'ruff', 'radon', "
            "'nvidia') if m in sys.modules)\n"
            "print(','.join(bad))")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
