"""`python -m tinyattn ...`: the `tinyattn` command where the console script is not installed."""

import sys

from .cli import run

sys.exit(run())
