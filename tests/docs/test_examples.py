"""The example scripts run (with few steps) and print what they promise."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_train_tiny_transformer_example_runs():
    env = {**os.environ, "STEPS": "20"}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "train_tiny_transformer.py")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "token accuracy on 512 fresh problems" in done.stdout
    assert done.stdout.count(">") >= 3
