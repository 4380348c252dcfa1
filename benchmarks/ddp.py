"""Data-parallel training steps on MPI at N = 1 and 2 processes (`mpiexec`, one BLAS thread each).

The code lives in tinyattn/bench/ddp.py so that `tinyattn bench ddp` runs it too.

    python benchmarks/ddp.py [--sizes small medium] [--processes 1 2] [--repeats 20]
"""

import sys

from tinyattn.bench.ddp import main

if __name__ == "__main__":
    sys.exit(main())
