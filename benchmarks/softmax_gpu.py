"""The fused softmax kernels on the GPU vs the CuPy composition and torch.softmax (GB/s, ratios).

The code lives in tinyattn/bench/softmax.py so that `tinyattn bench softmax` runs it too.

    python benchmarks/softmax_gpu.py [--quick] [--dtype float32|float16] [--repeats 20]
"""

import sys

from tinyattn.bench.softmax import main

if __name__ == "__main__":
    sys.exit(main())
