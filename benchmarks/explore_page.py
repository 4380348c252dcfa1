"""The explorer page's size and how long Chromium takes to open it (its load event).

Builds the page `tinyattn graph --html` writes for an example model, then loads it in headless
Chromium (Playwright) several times and prints the median load-event time.

    python benchmarks/explore_page.py [--model tiny|mlp|attention] [--repeats 9]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tinyattn import explore, graphs, viz


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["tiny", "mlp", "attention"], default="tiny")
    p.add_argument("--repeats", type=int, default=9)
    args = p.parse_args(argv)
    loss, params, recording = graphs.example(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.html"
        start = time.perf_counter()
        page = viz.explore(loss, path, params=params, recording=recording)
        built = time.perf_counter() - start
        median, times = explore.load_ms(path, repeats=args.repeats)
    print(f"{args.model}: {page.steps} steps, {len(page.html.encode('utf-8')) / 1e6:.3f} MB, "
          f"built in {built:.2f} s")
    print(f"Chromium load event: median {median:.0f} ms over {len(times)} loads "
          f"({', '.join(f'{t:.0f}' for t in times)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
