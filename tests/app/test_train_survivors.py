"""Training behaviours that mutation testing found unobserved in process: the world-size check
for two processes, the --text file named when the ranks' data differ, the --resume each rank
reports, every rank's own dropout stream, a step through --capture, the token count a step
row is scored over, a readable tab label, the held-out prompt a language model continues, a
resume from a folder holding another task's run, the report's file list and the stream the
summary goes to, and a signal that arrives while the report is written."""

import io
import os
import signal

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.train as train_mod
from tinyattn import distributed
from tinyattn.train import TrainConfig, build, train

TINY = dict(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
            eval_every=100000, heldout_size=16)


class _Comm:
    """The communicator as rank `me` of two sees it: `allgather` returns every rank's object,
    the other rank's being `other` (a function of this rank's object)."""

    def __init__(self, me, other):
        self.me, self.other = me, other

    def allgather(self, obj):
        theirs = self.other(obj)
        return [obj, theirs] if self.me == 0 else [theirs, obj]


def _world_of_two(monkeypatch, comm=None, rank=0):
    monkeypatch.setitem(distributed._world, "comm", comm)
    monkeypatch.setitem(distributed._world, "size", 2)
    monkeypatch.setitem(distributed._world, "rank", rank)
    monkeypatch.setitem(distributed._world, "joined", True)


@pytest.fixture
def no_report(monkeypatch):
    """Runs without loss.png, attention.png and samples.txt (the figures take seconds)."""
    monkeypatch.setattr(train_mod, "_write_report", lambda *args: [])


# ---- under mpiexec -n 2 ------------------------------------------------------------------------


def test_two_processes_refuse_a_global_batch_of_one(monkeypatch):
    from tinyattn.train import FlagError, _check_world

    _world_of_two(monkeypatch)
    _check_world(TrainConfig(batch_size=2))  # a row each
    with pytest.raises(FlagError, match=r"split across the 2 MPI processes: it must be at "
                                        r"least 2: got 1$"):
        _check_world(TrainConfig(batch_size=1))


def test_ranks_with_other_data_are_told_which_text_file_each_read(monkeypatch):
    from types import SimpleNamespace

    from tinyattn.distributed import DisagreementError
    from tinyattn.train import _check_same_data_on_every_rank

    def rank0(values_context):
        return {"data fingerprint": "f" * 16}, {"--text": "theirs.txt"}

    _world_of_two(monkeypatch, _Comm(1, rank0), rank=1)
    run = SimpleNamespace(cfg=SimpleNamespace(text="mine.txt"), fingerprint="0" * 64)
    with pytest.raises(DisagreementError) as e:
        _check_same_data_on_every_rank(run)
    assert str(e.value) == ("rank 1 was started with data fingerprint " + "0" * 16 +
                            " (--text mine.txt), rank 0 with data fingerprint " + "f" * 16 +
                            " (--text theirs.txt): every process must get the same data")


def test_each_rank_reports_its_own_resume_flag(tmp_path, monkeypatch):
    """train(resume=True) on one rank, while rank 0 was started without --resume: the
    settings check (train's first collective) names --resume True on this rank."""
    from tinyattn.distributed import DisagreementError

    def rank0(obj):
        values, context = obj
        return {**values, "--resume": False}, context

    _world_of_two(monkeypatch, _Comm(1, rank0), rank=1)
    cfg = TrainConfig(steps=2, out=str(tmp_path / "run"), **TINY)
    with pytest.raises(DisagreementError, match=r"^rank 1 was started with --resume True, "
                                                r"rank 0 with --resume False: "):
        train(cfg, resume=True, progress=False, stream=io.StringIO())
    assert not (tmp_path / "run").exists()


def test_every_rank_draws_its_own_dropout_masks(monkeypatch):
    """A step seeds the dropout stream from (seed, step, rank): rank 1's is not rank 0's, and
    rank 0's is that of a world of one."""
    seeds = []

    class SeededError(Exception):
        pass

    def spy(seed):
        seeds.append(seed)
        raise SeededError  # (the rest of the step needs the other rank)

    cfg = TrainConfig(steps=10, seed=3, **TINY)
    task, model, opt, sched = build(cfg)
    be = model.wte.weight.backend
    monkeypatch.setattr(train_mod, "manual_seed", spy)
    for rank in (0, 1):
        _world_of_two(monkeypatch, rank=rank)
        with pytest.raises(SeededError):
            train_mod._train_step(cfg, task, model, opt, sched, be, 7)

    def stream(seed):
        ta.manual_seed(seed)
        return ta.rand(32).numpy()

    np.testing.assert_array_equal(stream(seeds[0]), stream(3 * 1_000_003 + 7))
    assert not np.array_equal(stream(seeds[1]), stream(seeds[0]))


# ---- a training step ---------------------------------------------------------------------------


def test_a_captured_step_gives_the_eager_steps_numbers():
    """--capture: the steps recorded and then replayed give the rows of the eager steps."""
    from tinyattn.replay import capture
    from tinyattn.train import _step_loss, _train_step

    cfg = TrainConfig(steps=10, warmup=2, seed=1, **TINY)
    rows = {}
    for captured in (False, True):
        task, model, opt, sched = build(cfg)
        be = model.wte.weight.backend
        step_fn = capture(_step_loss(model, task.vocab_size)) if captured else None
        rows[captured] = [_train_step(cfg, task, model, opt, sched, be, step, step_fn)
                          for step in range(4)]
    for eager, replayed in zip(rows[False], rows[True], strict=True):
        assert replayed["step"] == eager["step"] and replayed["lr"] == eager["lr"]
        assert replayed["loss"] == pytest.approx(eager["loss"], rel=1e-5)
        assert replayed["acc"] == eager["acc"]


def test_a_steps_row_averages_over_the_answer_tokens_only():
    """On add, whose prompt (ignored) is longer than its answer: the row's loss and accuracy
    are over the scored tokens, as evaluate() counts them on the same batch."""
    from tinyattn.train import _train_step, evaluate

    cfg = TrainConfig(task="add", length=3, d_model=16, heads=2, layers=1, batch_size=8,
                      steps=10, seed=2)
    task, model, opt, sched = build(cfg)
    be = model.wte.weight.backend
    x, y = task.batch(np.random.default_rng([cfg.seed, 0, 0]), cfg.batch_size)
    assert (y == -100).sum() != (y != -100).sum()
    before = evaluate(model, (x, y), be)
    row = _train_step(cfg, task, model, opt, sched, be, 0)
    assert row["loss"] == pytest.approx(before["heldout_loss"], rel=1e-5)
    assert row["acc"] == before["heldout_acc"]


# ---- the report --------------------------------------------------------------------------------


def test_tick_labels_spell_out_blanks():
    from tinyattn.train import _label

    assert [_label(t) for t in ("\t", "\n", " ", "a")] == ["\\t", "\\n", "␣", "a"]


def test_a_language_models_sample_starts_from_the_first_held_out_row():
    from tinyattn.train import samples_text

    class Text:
        language_model = True

        def decode(self, ids):
            return "".join("abcdefghijklmnopqrst"[i] for i in ids)

    prompts = []

    class Model(ta.nn.Module):
        def generate(self, idx, n, **kw):
            prompts.append(idx.numpy().tolist())
            return idx

    x = np.stack([np.arange(20), np.arange(20)[::-1]])  # two different rows
    text = samples_text(Text(), Model(), (x, x), ta.tensor([0.0]).backend)
    assert prompts == [[list(range(16))]]
    assert text.startswith("prompt: 'abcdefghijklmnop'\n")


def test_the_report_lists_every_file_it_wrote(tmp_path, monkeypatch):
    def drawn(*args, **kwargs):
        path = args[-1] if "positions" not in kwargs else args[2]
        open(path, "wb").close()

    monkeypatch.setattr(train_mod, "_plot_curves", drawn)
    monkeypatch.setattr(train_mod, "_plot_attention", drawn)
    out = io.StringIO()
    train(TrainConfig(steps=2, out=str(tmp_path), **TINY), progress=False, stream=out)
    listed = [line.strip() for line in out.getvalue().splitlines()[2:]]
    names = ["metrics.jsonl", "metrics.json", "checkpoint.npz", "loss.png", "attention.png",
             "samples.txt"]
    assert listed == [os.path.join(str(tmp_path), name) for name in names]
    assert all(os.path.exists(path) for path in listed)


def test_the_summary_goes_to_the_stream_given(tmp_path, capsys, no_report):
    out = io.StringIO()
    train(TrainConfig(steps=2, out=str(tmp_path), **TINY), progress=False, stream=out)
    assert out.getvalue().startswith("\nreverse: 2 steps in ")
    assert capsys.readouterr().out == ""


# ---- resume ------------------------------------------------------------------------------------


def test_a_resume_in_the_default_folder_holding_another_tasks_run_stays_there(
        tmp_path, monkeypatch):
    """runs/reverse (the default --out) holds a sort run: a plain resume takes its settings,
    its task too, and still continues it where it is (not in runs/sort)."""
    from tinyattn.train import settle

    monkeypatch.chdir(tmp_path)
    folder = os.path.join("runs", "reverse")
    os.makedirs(folder)
    ta.save({"config": {"task": "sort", "length": 3, "steps": 5}, "step": 2},
            os.path.join(folder, "checkpoint.npz"))
    settled = settle(TrainConfig(), resume=True)
    assert (settled.task, settled.length, settled.steps) == ("sort", 3, 5)
    assert settled.run_dir() == folder
    assert settled.given() == frozenset()


# ---- signals -----------------------------------------------------------------------------------


def test_a_signal_while_the_report_is_written_is_kept_and_said(capsys):
    from tinyattn.train import _Stopper

    stopper = _Stopper()
    stopper.phase = "report"
    stopper._handle(signal.SIGTERM, None)
    assert stopper.signal == signal.SIGTERM
    assert "SIGTERM: writing the report" in capsys.readouterr().err
    stopper._handle(signal.SIGINT, None)  # the first one is the one that stopped the run
    assert stopper.signal == signal.SIGTERM
