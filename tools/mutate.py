"""Mutation testing: plant small bugs in the package, run the tests against each, count the caught.

mutmut (in the dev extra; its configuration is [tool.mutmut] in pyproject.toml) copies tinyattn/
into mutants/, writes every mutant of the audited modules (an operator flipped, a constant
changed, a call's argument dropped, ...) and runs, for each, the tests that reach the mutated
function. A mutant is killed when a test fails (or the run times out or crashes): the suite
noticed the bug. This script runs mutmut on the packages asked for and prints, per package, how
many mutants were planted, how many the tests killed and the score; `--write` puts the table in
docs/testing.md (between its markers) and `--survivors FILE` writes each surviving mutant's diff.

    python tools/mutate.py                        # every audited package (an hour or more)
    python tools/mutate.py sample optim           # some of them
    python tools/mutate.py --sample 150 --write   # 150 mutants a package, drawn at random
    python tools/mutate.py --report-only --write  # the table from the last run's results

A full run plants about 6,700 mutants; on 2 cores that takes hours. `--sample N` draws N of each
package's mutants (seeded: the same draw every time, `--seed` for another) and scores those: a
score from 150 mutants is within about 6 points of the full one (95 %).

Results are kept in mutants/ between runs: mutmut reruns only the mutants of functions (or tests)
that changed. `mutmut show NAME` prints one mutant, `mutmut browse` explores them.
"""

import argparse
import datetime
import json
import os
import pathlib
import random
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# the audited packages: name -> the module prefix of its mutants (mutmut names them
# tinyattn.<module>.x_<function>__mutmut_<n>, or xǁ<Class>ǁ<method>__mutmut_<n> for methods)
PACKAGES = {
    "ops": "tinyattn.ops.",
    "autograd": "tinyattn.autograd.",
    "nn": "tinyattn.nn.",
    "optim": "tinyattn.optim.",
    "train": "tinyattn.train.",
    "sample": "tinyattn.sample.",
    "serialization": "tinyattn.serialization.",
    "replay": "tinyattn.replay.",
    "utils": "tinyattn.utils.",
    "generator": "tinyattn.generator.",
    "autograd_functional": "tinyattn.autograd_functional.",
    "higher_order": "tinyattn.higher_order.",
    "distributions": "tinyattn.distributions.",
}

# mutmut's exit codes (mutmut/stats.py): what each says about the mutant
KILLED = {1, 3, 36, 24, -24, 152, 255, -11, -9, 37}  # a test failed, timed out, or crashed
SURVIVED = {0, 5, 33}  # every test passed, or no test reaches the mutated code
NOT_RUN = {None, 2, 34}  # not checked yet, interrupted, skipped

BEGIN, END = "<!-- mutation scores: begin -->", "<!-- mutation scores: end -->"


def run_mutmut(names, max_children):
    """mutmut run on the mutants `names` (globs allowed), all at once: one stats run."""
    cmd = ["mutmut", "run", "--max-children", str(max_children), *names]
    print("$", " ".join(cmd[:6]), "..." if len(cmd) > 6 else "", flush=True)
    # mutmut forks a worker per mutant from a process that already ran the tests: a thread pool
    # (OpenBLAS's, PyTorch's) alive at the fork deadlocks the child on the pool's lock, and the
    # hang would count as a kill (a timeout). One thread each means no pools.
    env = {**os.environ, **{k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                             "MKL_NUM_THREADS")}}
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def results(mutants_dir=None):
    """{mutant name: exit code} from the .meta files mutmut leaves in mutants/."""
    codes = {}
    for meta in sorted((mutants_dir or ROOT / "mutants").rglob("*.py.meta")):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


def generate():
    """Write the mutants into mutants/ without running any (mutmut run on a name that matches
    none stops after generating them); {name: exit code} of all of them."""
    subprocess.run(["mutmut", "run", "no-such-mutant"], cwd=ROOT, capture_output=True)
    return results()


def draw(codes, packages, n, seed):
    """n mutants of each package, drawn at random (the same n for the same seed and code)."""
    rng = random.Random(seed)
    chosen = []
    for p in packages:
        names = sorted(name for name in codes if package_of(name) == p)
        chosen += rng.sample(names, min(n, len(names)))
    return chosen


def package_of(name):
    return next((p for p, prefix in PACKAGES.items() if name.startswith(prefix)), None)


def tally(codes, packages):
    """Per package: planted, killed, survived (with no test reaching them counted apart), not
    run, and the score killed / (killed + survived)."""
    rows = {p: {"planted": 0, "killed": 0, "survived": 0, "no_tests": 0, "not_run": 0}
            for p in packages}
    for name, code in codes.items():
        p = package_of(name)
        if p not in rows:
            continue
        row = rows[p]
        row["planted"] += 1
        if code in KILLED:
            row["killed"] += 1
        elif code in SURVIVED:
            row["survived"] += 1
            row["no_tests"] += code in (5, 33)
        else:
            row["not_run"] += 1
    for row in rows.values():
        judged = row["killed"] + row["survived"]
        row["score"] = row["killed"] / judged if judged else float("nan")
    return rows


def table(rows):
    lines = ["| package | mutants | killed | survived (no test reaches) | not run | score |",
             "|---|---|---|---|---|---|"]
    for p, r in rows.items():
        lines.append(f"| {p} | {r['planted']} | {r['killed']} | {r['survived']} "
                     f"({r['no_tests']}) | {r['not_run']} | {100 * r['score']:.1f} % |")
    return "\n".join(lines)


def write_docs(rows, path=None, sampled=None):
    """Replace the table between the markers of docs/testing.md; the rest of the page stays."""
    path = path or ROOT / "docs" / "testing.md"
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"mutate: {path} has no {BEGIN} ... {END} markers")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    how = f"--sample {sampled}" if sampled else "(every mutant)"
    body = (f"{BEGIN}\nMeasured {stamp} by `python tools/mutate.py {how}` (mutmut).\n\n"
            f"{table(rows)}\n{END}")
    new = text[:text.index(BEGIN)] + body + text[text.index(END) + len(END):]
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(new)
    os.replace(tmp, path)  # a failed write leaves the old page


def survivors(codes, packages):
    return sorted(n for n, c in codes.items() if c in SURVIVED and package_of(n) in packages)


def write_survivors(names, path):
    """Each surviving mutant's diff (mutmut show), one after another."""
    with open(path, "w") as f:
        for name in names:
            shown = subprocess.run(["mutmut", "show", name], cwd=ROOT, capture_output=True,
                                   text=True).stdout
            f.write(f"## {name}\n{shown}\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", metavar="PACKAGE",
                        help=f"some of: {', '.join(PACKAGES)} (default: all)")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sample", type=int, metavar="N", help="N mutants of each package")
    parser.add_argument("--seed", type=int, default=0, help="the draw of --sample")
    parser.add_argument("--report-only", action="store_true", help="do not run mutmut")
    parser.add_argument("--write", action="store_true", help="write the table to docs/testing.md")
    parser.add_argument("--survivors", metavar="FILE", help="write the survivors' diffs to FILE")
    args = parser.parse_args(argv)
    unknown = [p for p in args.packages if p not in PACKAGES]
    if unknown:
        parser.error(f"unknown package {', '.join(unknown)}: choose from {', '.join(PACKAGES)}")
    packages = args.packages or list(PACKAGES)
    names = [PACKAGES[p] + "*" for p in packages]
    if args.sample:
        known = generate()  # (regenerated first: a changed function renames its mutants)
        # drawn over every package, then kept: a package's draw does not depend on which
        # others are asked for (so a rerun of some packages scores the same mutants)
        drawn = [n for n in draw(known, list(PACKAGES), args.sample, args.seed)
                 if package_of(n) in packages]
        names = [n for n in drawn if known[n] not in KILLED]  # a killed mutant stays killed
    if not args.report_only and names:
        rc = run_mutmut(names, args.max_children)
        if rc != 0:
            print(f"mutate: mutmut exited with {rc}", file=sys.stderr)
            return rc
    codes = results()
    if args.sample:
        codes = {name: codes[name] for name in drawn}
    if not codes:
        print("mutate: no results in mutants/ (run without --report-only first)", file=sys.stderr)
        return 1
    rows = tally(codes, packages)
    print(table(rows))
    if args.survivors:
        write_survivors(survivors(codes, packages), args.survivors)
    if args.write:
        write_docs(tally(codes, list(PACKAGES)), sampled=args.sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())
