"""One training step of a one-block transformer LM: tinyattn vs hand-written NumPy vs PyTorch.

The code lives in tinyattn/bench/step.py so that `tinyattn bench step` runs it too (without the
NumPy floor, which is a reference kept here, in benchmarks/numpy_floor.py).

    python benchmarks/step.py [--sizes tiny small medium] [--repeats 30]
"""

import sys

from numpy_floor import numpy_step  # this script's folder is on sys.path

from tinyattn.bench.step import main

if __name__ == "__main__":
    sys.exit(main(floor=numpy_step))
