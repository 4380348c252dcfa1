"""Timing shared by the CPU benchmarks: interleaved rounds, medians, spreads and paired ratios.

Every implementation runs once per round, in turn, so a slow spell of the machine hits them all;
a ratio is taken round by round (a/b of the same round) and its median reported, which is much
steadier than the ratio of two medians taken at different moments.
"""

import argparse
import statistics
import time


def parser(name, doc):
    """The option parser of `tinyattn bench NAME`: its usage and error lines name the
    subcommand (`usage: tinyattn bench step ...`), as the benchmark is run from the CLI."""
    return argparse.ArgumentParser(prog=f"tinyattn bench {name}",
                                   description=doc.strip().splitlines()[0])


def at_least(low):
    """An argparse type: a whole number >= low, checked before any benchmark runs (argparse
    names the flag: "argument --repeats: must be a whole number >= 1: got 0")."""
    def whole(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be a whole number >= {low}: got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {low}: got {value}")
        return value

    whole.__name__ = f"whole number >= {low}"
    return whole


def time_rounds(impls, repeats, warmup=3):
    """{name: [seconds of each round]}: every implementation called once per round, in turn."""
    for _ in range(warmup):
        for run in impls.values():
            run()
    times = {name: [] for name in impls}
    for _ in range(repeats):
        for name, run in impls.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def quartiles(values):
    """(first quartile, median, third quartile) of a list of numbers."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def paired_ratios(times, name, to):
    """The ratio name/to round by round (the rounds are paired: same moment, same machine)."""
    return [a / b for a, b in zip(times[name], times[to], strict=True)]


def fmt_spread(values, scale=1.0, digits=2, unit=""):
    """'median (q1-q3)' of values times scale, e.g. '3.04 ms (2.95-3.12)'."""
    q1, q2, q3 = (v * scale for v in quartiles(values))
    return f"{q2:.{digits}f}{unit} ({q1:.{digits}f}-{q3:.{digits}f})"
