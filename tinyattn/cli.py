"""The `tinyattn` command: train | sample | graph | bench | gradcheck.

Each subcommand is a small function that parses its own arguments and calls the library.
"""

import argparse
import sys


def cmd_gradcheck(args):
    """Gradient-check every registered op on its sample inputs and print a table."""
    from .gradcheck import check_op
    from .ops import REGISTRY

    names = args.ops or sorted(REGISTRY)
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        print(f"unknown op(s): {', '.join(unknown)}; registered: {', '.join(sorted(REGISTRY))}",
              file=sys.stderr)
        return 2
    print(f"{'op':<22} {'cases':>5}  {'largest case':<34} {'max abs err':>11}  ok")
    failed = sum(not _gradcheck_row(name, check_op(name), args.verbose) for name in names)
    print(f"{len(names) - failed} of {len(names)} ops pass (float64 central differences)")
    return 1 if failed else 0


def _gradcheck_row(name, rows, verbose):
    """Print op `name`'s line of the table (and each case that failed, or all if verbose);
    True if every case passed."""
    worst = max(r.max_abs_err for _, r in rows)
    ok = all(r.ok for _, r in rows)
    biggest = max(rows, key=lambda row: len(row[0]))[0] if rows else "-"
    print(f"{name:<22} {len(rows):>5}  {biggest[:34]:<34} {worst:>11.2e}  "
          f"{'ok' if ok else 'FAIL'}")
    for desc, r in rows:
        if verbose or not r.ok:
            print(f"    {desc}: {r.message}")
    return ok


def cmd_train(args):
    """Train a TinyTransformer on a task; write metrics, checkpoint and plots to a run folder.
    Exit status: 0, or 130 / 143 when Ctrl-C / SIGTERM stopped the run (after it saved)."""
    from . import distributed
    from .tasks import config
    from .train import LANGUAGE_TASKS, FlagError, TrainConfig, check_same_settings, exit_code, train

    if args.text is not None and args.task is None:
        args.task = "text"  # --text alone means the text task
    cfg = config(**{k: v for k, v in vars(args).items() if k in TrainConfig.__dataclass_fields__})
    # under mpiexec, before anything that could stop one rank alone (the others would wait)
    distributed.init()
    check_same_settings(cfg, args.resume, args.force)
    if args.seq_len is not None and (args.task or "reverse") not in LANGUAGE_TASKS:
        raise FlagError(f"--seq-len is for the text tasks (characters per example); the toy "
                        f"tasks take --length: got {args.seq_len}")
    if args.threads is not None:
        from .runtime import set_num_threads

        set_num_threads(args.threads)
    if args.keep_memory:
        from .backends import keep_freed_memory

        keep_freed_memory()
    metrics = train(cfg, resume=args.resume, force=args.force, progress=not args.no_progress)
    return exit_code(metrics)


def cmd_sample(args):
    """Answer a toy-task prompt, or continue a text prompt, with a trained checkpoint."""
    from .sample import sample

    print(sample(args.checkpoint, args.prompt, max_new_tokens=args.max_new_tokens,
                 temperature=args.temperature, top_k=args.top_k, greedy=args.greedy,
                 seed=args.seed, top_p=args.top_p))
    return 0


def _train_parser(sub):
    from .bench.timing import at_least
    from .tasks import PRESETS

    p = sub.add_parser("train", help="train a tiny causal transformer (the main job)",
                       description="Train a TinyTransformer and write what it learned to "
                                   "runs/<task>/: metrics, checkpoint, loss.png, "
                                   "attention.png, samples.txt. Each task starts from its "
                                   "preset (tinyattn/tasks.py); the flags below override it.")
    p.add_argument("--task", choices=list(PRESETS), default=None,
                   help="default reverse; --text alone implies text; shakespeare: a "
                        "character-level GPT on the Shakespeare corpus shipped with tinyattn")
    p.add_argument("--steps", type=int,
                   help="steps to train to (with --resume: the run's own unless given)")
    p.add_argument("--backend", help="numpy (default) or cupy")
    p.add_argument("--out", default=None, help="run folder (default runs/<task>)")
    p.add_argument("--seed", type=int)
    p.add_argument("--d-model", dest="d_model", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--batch-size", dest="batch_size", type=int)
    p.add_argument("--dropout", type=float)
    p.add_argument("--weight-decay", dest="weight_decay", type=float)
    p.add_argument("--beta2", type=float, help="AdamW's second-moment decay")
    p.add_argument("--warmup", type=int,
                   help="steps of linear warm-up, fewer than --steps (a default that does not "
                        "fit is cut to a tenth of --steps)")
    p.add_argument("--min-lr-ratio", dest="min_lr_ratio", type=float,
                   help="the cosine decay ends at this fraction of --lr (0.1: lr/10)")
    p.add_argument("--grad-clip", dest="grad_clip", type=float)
    p.add_argument("--rotary", action=argparse.BooleanOptionalAction,
                   help="rotary position embeddings instead of a learned table")
    p.add_argument("--norm", choices=["layer", "rms"], help="LayerNorm or RMSNorm")
    p.add_argument("--qk-norm", dest="qk_norm", action=argparse.BooleanOptionalAction,
                   help="RMS-normalise q and k per head before the attention scores")
    p.add_argument("--tie", action=argparse.BooleanOptionalAction,
                   help="the output head shares the token embedding's weight")
    p.add_argument("--length", type=int, default=None, help="digits per problem (toy tasks)")
    p.add_argument("--text", default=None, help="a UTF-8 file for --task text")
    p.add_argument("--full-corpus", dest="full_corpus", action="store_true", default=None,
                   help="shakespeare/text: all 5,055,571 characters, not the first 1,115,394")
    p.add_argument("--seq-len", dest="seq_len", type=int, help="characters per example (text)")
    p.add_argument("--eval-every", dest="eval_every", type=int)
    p.add_argument("--heldout-size", dest="heldout_size", type=int,
                   help="held-out examples (text: windows) evaluated every --eval-every steps")
    p.add_argument("--save-every", dest="save_every", type=int,
                   help="save a checkpoint every N steps (0: by time only)")
    p.add_argument("--save-seconds", dest="save_seconds", type=float,
                   help="and at least every this many seconds of training")
    p.add_argument("--resume", action="store_true", help="continue the run in --out")
    p.add_argument("--force", action="store_true",
                   help="delete the run already in --out and start over")
    p.add_argument("--capture", action=argparse.BooleanOptionalAction,
                   help="record each step once, then replay its array operations without the "
                        "Python between them (ta.capture): the same numbers, less time a step")
    p.add_argument("--keep-memory", dest="keep_memory", default=True,
                   action=argparse.BooleanOptionalAction,
                   help="have malloc keep freed arrays' memory for the next step, not return it "
                        "to the OS and fault it back in (glibc; default on; "
                        "ta.backends.keep_freed_memory)")
    p.add_argument("--threads", type=at_least(1), default=None,
                   help="BLAS threads (default NumPy's: one per CPU); 1 is faster when other "
                        "work shares the CPUs (ta.set_num_threads)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(fn=cmd_train)


def _sample_parser(sub):
    p = sub.add_parser("sample", help="generate with a trained checkpoint")
    p.add_argument("--checkpoint", required=True, help="a checkpoint.npz from tinyattn train")
    p.add_argument("--prompt", default=None, help="digits for a toy task, text for text")
    # (a toy task's answer is greedy and always whole: these settings are for text models)
    p.add_argument("--max-new-tokens", dest="max_new_tokens", type=int, default=200,
                   help="characters to add to a text prompt (unused for toy tasks, whose "
                        "answer is always its full length)")
    p.add_argument("--temperature", type=float, default=0.8,
                   help="> 0 (unused with --greedy and for toy tasks, whose answers are "
                        "greedy: 0 is taken there)")
    p.add_argument("--top-k", dest="top_k", type=int, default=None,
                   help="sample from the k most likely tokens (k >= 1; unused for toy tasks)")
    p.add_argument("--top-p", dest="top_p", type=float, default=None,
                   help="sample from the fewest most likely tokens whose probability reaches "
                        "p, in (0, 1]; unused for toy tasks")
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--seed", type=int, default=0,
                   help="of the sampling, and of the held-out problems a toy task answers "
                        "without --prompt")
    p.set_defaults(fn=cmd_sample)


def cmd_graph(args):
    """Build an example loss graph, run backward, and render its picture (or its DOT text),
    or with --html write the explorer page (which refuses the options only a picture takes)."""
    from . import graphs, viz
    from .train import FlagError

    _check_graph_values(args, FlagError)
    # --html with an option only a picture takes: named, not dropped silently (the page draws
    # the gradients' direction, --direction backward, and shows every value in its panel)
    picture = [flag for flag, on in (("--out", args.out is not None),
                                     ("--direction forward", args.direction == "forward"),
                                     ("--no-values", args.no_values), ("--saved", args.saved))
               if on and args.html]
    if picture:
        one = len(picture) == 1
        raise FlagError(f"graph: --html writes the backward-pass explorer, which draws the "
                        f"gradients flowing backward, shows values in its panel and no saved "
                        f"arrays; {' and '.join(picture)} {'is' if one else 'are'} for a "
                        f"picture (--out): drop {'it' if one else 'them'} or --html")
    loss, params, recording = graphs.example(args.model, seed=args.seed)
    collapse = _graph_collapse(args, loss)
    options = dict(params=params, recording=recording, collapse=collapse,
                   direction=args.direction or "forward", show_values=not args.no_values,
                   show_saved=args.saved)
    try:
        if args.html:  # the interactive page instead of a picture
            page = viz.explore(loss, args.html, params=params, recording=recording,
                               collapse=collapse or ())
            print(f"wrote {page.path}: step through the {args.model} backward pass "
                  f"({page.steps} VJPs) in a browser")
            return 0
        path = viz.render(loss, args.out or "graph.svg", **options)
    except viz.GraphvizNotFoundError as e:
        print(f"tinyattn graph: {e}", file=sys.stderr)
        return 1
    hover = " (hover an op for its VJP)" if str(path).lower().endswith(".svg") else ""
    print(f"wrote {path}: the {args.model} loss graph{hover}")
    return 0


def _check_graph_values(args, error):
    """`graph`'s --seed, and its file names: an empty one is refused, not taken as not given
    (--html '' would draw the default graph.svg instead of the page)."""
    if args.seed < 0:
        raise error(f"graph: --seed must be a whole number >= 0: got {args.seed}")
    for name, value in (("--out", args.out), ("--html", args.html)):
        if value == "":
            raise error(f"graph: {name} must name a file, not an empty string: got ''")


GRAPH_COLLAPSE = {"tiny": ["blocks.*.*"], "mlp": ["*"], "attention": []}  # the default folds


def _graph_collapse(args, loss):
    """The module patterns to fold: none with --expand; those given to --collapse; else each
    block's sublayers (a screen-sized picture). Says so when a --collapse folds nothing."""
    if args.expand:
        return ()
    patterns = args.collapse or GRAPH_COLLAPSE[args.model]
    if args.collapse is not None:  # asked for: tell when there is nothing to fold
        note = _nothing_to_collapse(args.model, loss, patterns)
        if note:
            print(f"tinyattn graph: {note}; every op is drawn")
    return patterns


def _nothing_to_collapse(model, loss, patterns):
    """Why `patterns` fold nothing in the graph behind `loss`, or None when they fold a module."""
    import fnmatch

    from .autograd import toposort

    scopes = {n.scope for n in toposort(loss._node) if n.scope}
    modules = sorted({".".join(s.split(".")[:i + 1]) for s in scopes
                      for i in range(s.count(".") + 1)})
    if not modules:
        return f"nothing to collapse: the {model} graph has no modules"
    if any(fnmatch.fnmatchcase(m, pat) for m in modules for pat in patterns):
        return None
    return (f"nothing to collapse: no module of the {model} graph matches "
            f"{' '.join(patterns)} (its modules: {', '.join(modules[:8])}"
            f"{', ...' if len(modules) > 8 else ''})")


def _graph_parser(sub):
    p = sub.add_parser("graph", help="draw the autograd graph of an example loss",
                       description="Build the loss graph of the default tiny transformer (or a "
                                   "small MLP, or one attention call), run backward, and draw "
                                   "it: values, gradients (signed when one element, else "
                                   "their norms), VJP formulas, module clusters.")
    p.add_argument("--model", choices=["tiny", "mlp", "attention"], default="tiny")
    p.add_argument("--out", default=None,
                   help="output file: .svg, .png or .pdf (needs Graphviz's dot), or .dot text "
                        "(default graph.svg)")
    fold = p.add_mutually_exclusive_group()
    fold.add_argument("--collapse", nargs="*", default=None, metavar="MODULE",
                      help="fold these module paths or patterns (blocks.*.attn) into one box "
                           "each; alone (the default): every sublayer of each block")
    fold.add_argument("--expand", action="store_true", help="draw every op, nothing folded")
    p.add_argument("--direction", choices=["forward", "backward"], default=None,
                   help="arrows along the data (forward, the default) or the gradients "
                        "(backward, as --html always draws them)")
    p.add_argument("--no-values", dest="no_values", action="store_true",
                   help="shapes only, no value summaries (a picture only, not --html)")
    p.add_argument("--saved", action="store_true",
                   help="show what each op saved for backward (a picture only, not --html)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--html", metavar="PAGE",
                   help="write the interactive backward-pass explorer (one HTML file) instead "
                        "of a picture: --out, --no-values, --saved and --direction forward are "
                        "refused with it")
    p.set_defaults(fn=cmd_graph)


BENCHMARKS = {
    "step": ("one training step: tinyattn (eager, captured) vs PyTorch (CPU); "
             "benchmarks/step.py adds the hand-written NumPy floor"),
    "overhead": "the engine's cost per op on a chain of tiny ops",
    "softmax": "fused softmax kernels vs composite (GPU, CuPy)",
    "attention": "flash attention vs composite: time and memory",
    "shakespeare": "the Shakespeare preset trained in tinyattn and PyTorch: ms/step, memory",
    "ddp": "data-parallel training steps on MPI: N = 1 vs 2 processes, the Allreduce's share",
    "generate": "sampling with the KV cache vs running the whole window for each token",
    "report": "run the CPU benchmarks and write docs/benchmarks.md from them",
}


def cmd_bench(args):
    """Run one of the benchmarks in tinyattn/bench/ (also benchmarks/<name>.py)."""
    import importlib

    module = importlib.import_module(f"tinyattn.bench.{args.name}")
    return module.main(args.options)


def _bench_parser(sub):
    p = sub.add_parser("bench", help="run a benchmark: " + ", ".join(BENCHMARKS),
                       description="Run a benchmark and print medians and ratios. "
                                   + "; ".join(f"{k}: {v}" for k, v in BENCHMARKS.items()),
                       epilog="Options after the name go to the benchmark: "
                              "tinyattn bench step --sizes tiny --repeats 10")
    p.add_argument("name", choices=list(BENCHMARKS))
    options = p.add_argument("options", nargs=argparse.REMAINDER,
                             help="the benchmark's own options")
    options.required = False  # (argparse makes a REMAINDER positional required: none is fine)
    p.set_defaults(fn=cmd_bench)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tinyattn", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _train_parser(sub)
    _sample_parser(sub)
    _graph_parser(sub)
    _bench_parser(sub)

    p = sub.add_parser("gradcheck", help="gradient-check every registered op")
    p.add_argument("ops", nargs="*", help="only these ops (default: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per sample case")
    p.set_defaults(fn=cmd_gradcheck)

    args = parser.parse_args(argv)
    return args.fn(args)


def run():
    """The `tinyattn` console script: main(), with a user's mistake (a bad option value, a
    missing file, no CuPy) printed as one line instead of a traceback."""
    from .errors import TinyattnError

    try:
        return main()
    except MemoryError as e:  # (the training run's names the sizes to reduce)
        print(f"tinyattn: error: {e or 'out of memory'}", file=sys.stderr)
        return 1
    except (TinyattnError, ValueError, OSError) as e:
        print(f"tinyattn: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside a training loop (which saves and returns 130)
        print("tinyattn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(run())
