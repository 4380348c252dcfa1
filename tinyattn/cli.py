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
    failed = 0
    for name in names:
        rows = check_op(name)
        worst = max(r.max_abs_err for _, r in rows)
        ok = all(r.ok for _, r in rows)
        failed += not ok
        biggest = max(rows, key=lambda row: len(row[0]))[0] if rows else "-"
        print(f"{name:<22} {len(rows):>5}  {biggest[:34]:<34} {worst:>11.2e}  "
              f"{'ok' if ok else 'FAIL'}")
        if args.verbose or not ok:
            for desc, r in rows:
                if args.verbose or not r.ok:
                    print(f"    {desc}: {r.message}")
    print(f"{len(names) - failed} of {len(names)} ops pass (float64 central differences)")
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tinyattn", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("gradcheck", help="gradient-check every registered op")
    p.add_argument("ops", nargs="*", help="only these ops (default: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per sample case")
    p.set_defaults(fn=cmd_gradcheck)

    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
