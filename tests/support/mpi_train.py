"""Run by tests/app/test_train_mpi.py under mpiexec: `tinyattn train ARGS...` with the default
dtype argv[1]; when argv[2] is a step number (not "-"), a ValueError planted on rank 1 at that
step (the other rank is then waiting in the gradients' Allreduce); argv[3] "no-report" skips
the plots and samples (two thirds of a 30-step run's time), "report" writes them."""

import sys

import tinyattn as ta
from tinyattn import cli, distributed
from tinyattn import train as train_mod


def plant(fail_at):
    real = train_mod._train_step

    def step(cfg, task, model, opt, sched, be, i, *rest):
        if distributed.rank() == 1 and i == fail_at:
            raise ValueError(f"planted on rank 1 at step {i}")
        return real(cfg, task, model, opt, sched, be, i, *rest)

    train_mod._train_step = step


if __name__ == "__main__":
    dtype, fail_at, report, *args = sys.argv[1:]
    ta.set_default_dtype(getattr(ta, dtype))
    if report == "no-report":
        train_mod._write_report = lambda *a: []
    if fail_at != "-":
        plant(int(fail_at))
    sys.exit(cli.main(["train", *args]))
