"""The engine's cost per op on a long chain of tiny ops: tinyattn vs NumPy vs PyTorch.

The code lives in tinyattn/bench/overhead.py so that `tinyattn bench overhead` runs it too.

    python benchmarks/overhead.py [--ops 2000] [--repeats 15]
"""

import sys

from tinyattn.bench.overhead import main

if __name__ == "__main__":
    sys.exit(main())
