"""Sampling speed with and without the KV cache (TinyTransformer.generate).

The code lives in tinyattn/bench/generate.py so that `tinyattn bench generate` runs it too.

    python benchmarks/generate.py [--contexts 64 256] [--repeats 5]
"""

import sys

from tinyattn.bench.generate import main

if __name__ == "__main__":
    sys.exit(main())
