"""Sampling speed: TinyTransformer.generate with its KV cache against running the whole window
again for each new token (use_cache=False).

The model is the Shakespeare preset's (65 characters, 4 layers, 4 heads, 128 wide, rotary
positions, q/k norm, tied head) with random weights (the speed does not depend on them), and a
context of each of `--contexts`; generation starts from an 8-token prompt and fills the
context. Greedy decoding, so both ways must give the very same tokens (checked before timing).

    tinyattn bench generate [--contexts 64 256] [--repeats 5]
"""

import statistics
import sys

import numpy as np

from .timing import at_least, parser, time_rounds

VOCAB, D_MODEL, HEADS, LAYERS, PROMPT = 65, 128, 4, 4, 8


def model_and_prompt(context, batch=1):
    from .. import nn, tensor
    from ..tensor import manual_seed

    manual_seed(0)
    model = nn.TinyTransformer(VOCAB, D_MODEL, HEADS, LAYERS, max_len=context, rotary=True,
                               qk_norm=True).eval()
    prompt = tensor(np.random.default_rng(1).integers(0, VOCAB, (batch, PROMPT)))
    return model, prompt


def implementations(context, batch=1):
    """{"cache": run, "no cache": run}: each generates context - PROMPT tokens, greedily."""
    model, prompt = model_and_prompt(context, batch)
    new = context - PROMPT
    return {name: (lambda use=use: model.generate(prompt, new, greedy=True, use_cache=use))
            for name, use in (("cache", True), ("no cache", False))}


def check(context=32):
    """Assert that both ways give the same tokens (and as many as asked)."""
    impls = implementations(context, batch=2)
    got = {name: run().numpy() for name, run in impls.items()}
    assert got["cache"].shape == (2, context), got["cache"].shape
    np.testing.assert_array_equal(got["cache"], got["no cache"])
    return sorted(got)


def time_context(context, repeats):
    """({impl: [seconds per round]}, tokens generated per round) at one context length."""
    check(min(context, 32))
    return time_rounds(implementations(context), repeats, warmup=1), context - PROMPT


def main(argv=None):
    ap = parser("generate", __doc__)
    ap.add_argument("--contexts", type=at_least(PROMPT + 1), nargs="+", default=[64, 256],
                    help=f"context lengths (> the {PROMPT}-token prompt)")
    ap.add_argument("--repeats", type=at_least(1), default=5)
    args = ap.parse_args(argv)
    print(f"greedy generation, {LAYERS} layers x {D_MODEL} wide, {HEADS} heads, vocabulary "
          f"{VOCAB}, batch 1, from {PROMPT} tokens to the context")
    print(f"{'context':>7} {'tokens':>6} {'cache tok/s':>11} {'no cache tok/s':>14} "
          f"{'speed-up':>8}")
    for context in args.contexts:
        times, tokens = time_context(context, args.repeats)
        rate = {name: tokens / statistics.median(ts) for name, ts in times.items()}
        print(f"{context:>7} {tokens:>6} {rate['cache']:>11.0f} {rate['no cache']:>14.0f} "
              f"{rate['cache'] / rate['no cache']:>7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
