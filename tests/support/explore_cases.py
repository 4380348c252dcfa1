"""Graphs the explorer tests share (tests/tools/test_explore.py,
tests/tools/test_explore_browser.py): a
three-op example with a tensor used twice, and what explain mode prints for it."""

import io
import re

import numpy as np

import tinyattn as ta
from tinyattn import viz


def three_ops():
    """loss = sum(tanh(x) * x): ops tanh, mul, sum; x feeds two ops, so its gradient is a sum
    of two parts. Returns (loss, x, recording)."""
    x = ta.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)  # float64
    x.name = "x"
    with viz.record() as rec:
        loss = (x.tanh() * x).sum()
        loss.name = "loss"
    return loss, x, rec


def explained(loss):
    """What explain mode prints for loss.backward() (the graph kept): [(op, formula, g norm,
    [gradient norms]) per VJP], [sum-so-far norms of the accumulation lines]; a one-element
    gradient's signed value where explain prints it instead of a norm ("= -1.5": "-1.5")."""
    out = io.StringIO()
    with ta.explain(file=out):
        loss.backward(retain_graph=True)
    vjps, sums = [], []
    for line in out.getvalue().splitlines():
        numbers = line.rpartition(" | ")[2]  # (after the formula, which has "=" of its own)
        norms = [a or b for a, b in re.findall(r"‖([^‖]+)‖|= ([^,\s]+)", numbers)]
        if m := re.match(r"\[(\d+)\] (\w+)(?: -> [^:]+)?: (.*?)(?: \(fused\))? \| g ", line):
            vjps.append((m.group(2), m.group(3), norms[0], norms[1:]))
        elif "is used more than once" in line:
            sums.append(norms[-1])
    return vjps, sums
