"""One training step of a one-block transformer LM: tinyattn vs hand-written NumPy vs PyTorch.

The code lives in tinyattn/bench/step.py so that `tinyattn bench step` runs it too.

    python benchmarks/step.py [--sizes tiny small medium] [--repeats 30]
"""

import sys

from tinyattn.bench.step import main

if __name__ == "__main__":
    sys.exit(main())
