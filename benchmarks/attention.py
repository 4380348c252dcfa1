"""Flash attention vs the composite path: NumPy time and memory on the CPU, the CUDA kernels vs
the CuPy composed path and torch SDPA on a GPU (TFLOP/s).

The code lives in tinyattn/bench/attention.py so that `tinyattn bench attention` runs it too.

    python benchmarks/attention.py [--backend numpy|cupy] [--quick] [--t 256 1024]
"""

import sys

from tinyattn.bench.attention import main

if __name__ == "__main__":
    sys.exit(main())
