"""The Shakespeare preset (a 4-layer character-level GPT) trained in tinyattn and PyTorch eager.

The code lives in tinyattn/bench/shakespeare.py so that `tinyattn bench shakespeare` runs it too.

    python benchmarks/shakespeare.py [--steps 100] [--json FILE]
"""

import sys

from tinyattn.bench.shakespeare import main

if __name__ == "__main__":
    sys.exit(main())
