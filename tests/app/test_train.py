"""The main job: a short training run learns, resumes bit-for-bit, and writes its run folder."""

import io
import json
import os
import re
import time
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import cli
from tinyattn.train import TrainConfig, build, train

FAST = dict(task="reverse", length=5, d_model=32, heads=2, layers=2, batch_size=32,
            lr=3e-3, warmup=10, eval_every=50, heldout_size=128)


def test_short_run_learns_reversal(tmp_path):
    cfg = TrainConfig(steps=300, out=str(tmp_path / "run"), **FAST)
    metrics = train(cfg, progress=False)
    assert metrics["accuracy"] >= 0.98, metrics
    assert metrics["steps"] == 300 and not metrics["interrupted"]
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["accuracy"] == metrics["accuracy"]
    assert saved["config"]["task"] == "reverse"


def test_run_folder_contents(tmp_path):
    out = tmp_path / "run"
    t0 = time.perf_counter()
    train(TrainConfig(steps=12, out=str(out), **{**FAST, "eval_every": 5}),
          progress=False)
    took = time.perf_counter() - t0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["train_loss"] == rows[-1]["loss"]  # the last step's, not another row's
    assert metrics["resumed_from"] is None and metrics["steps"] == 12
    assert rows[-1]["time"] <= metrics["wall_time_s"] <= took  # seconds of this run's training
    assert [r["step"] for r in rows] == list(range(1, 13))
    assert {"loss", "acc", "lr", "tokens_per_s", "time"} <= set(rows[0])
    assert "heldout_acc" in rows[4] and "heldout_acc" not in rows[5] and "heldout_acc" in rows[-1]
    for name in ("loss.png", "attention.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    samples = (out / "samples.txt").read_text().splitlines()
    assert samples[0].startswith("reverse: input | target | model")
    assert len(samples) == 13 and all(line.count("|") == 3 for line in samples[1:])
    ck = ta.load(out / "checkpoint.npz")
    assert ck["step"] == 12 and ck["vocab"][:10] == list("0123456789")
    # the data position: batches and dropout come from (seed, step), so this is the RNG state
    assert ck["data"]["position"] == 12
    assert ck["data"]["rng"] == {"seed": metrics["config"]["seed"], "next_step": 12}


def _params(model):
    return {n: p.numpy().copy() for n, p in model.named_parameters()}


@pytest.mark.slow  # (.ci/run runs it with the slow tests)
def test_resume_is_bit_identical(tmp_path):
    base = dict(FAST, steps=30, dropout=0.1)
    whole = train(TrainConfig(out=str(tmp_path / "whole"), **base), progress=False)
    part = train(TrainConfig(out=str(tmp_path / "split"), **base), progress=False, stop_after=13)
    assert part["interrupted"] and part["steps"] == 13
    resumed = train(TrainConfig(out=str(tmp_path / "split"), **base), resume=True, progress=False)
    assert resumed["steps"] == 30 and whole["steps"] == 30
    a = ta.load(tmp_path / "whole" / "checkpoint.npz")
    b = ta.load(tmp_path / "split" / "checkpoint.npz")
    for key in a["model"]:
        np.testing.assert_array_equal(a["model"][key].numpy(), b["model"][key].numpy(), key)
    _assert_same_optimizer_state(a["optim"], b["optim"], steps=30)
    assert resumed["loss"] == whole["loss"]
    lines = (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == list(range(1, 31))


def _assert_same_optimizer_state(a, b, steps):
    """Two optimizer state dicts (torch's layout) hold the same state to the bit, every
    parameter at `steps` steps."""
    assert a["param_groups"] == b["param_groups"]
    assert list(a["state"]) == list(b["state"]) == list(range(len(a["state"])))
    for i, entry in a["state"].items():
        assert list(entry) == list(b["state"][i]) == ["step", "exp_avg", "exp_avg_sq"]
        assert entry["step"].item() == steps and entry["step"].dtype == np.float32
        for key, value in entry.items():
            np.testing.assert_array_equal(value.numpy(), b["state"][i][key].numpy(), (i, key))


@pytest.mark.slow  # (5 s; .ci/run runs it)
def test_a_run_folder_whose_checkpoint_has_the_old_optimizer_layout_resumes_exactly(tmp_path):
    """`train --resume` on a run folder written before the optimizer's state dict followed
    torch's layout ({"steps", "groups", "state": {"0.m": ...}}): the same run, to the bit."""
    from old_optim_layout import old_layout  # tests/support

    base = dict(FAST, steps=30, dropout=0.1)
    whole = train(TrainConfig(out=str(tmp_path / "whole"), **base), progress=False)
    train(TrainConfig(out=str(tmp_path / "split"), **base), progress=False, stop_after=13)
    path = tmp_path / "split" / "checkpoint.npz"
    ck = ta.load(path)
    ck["optim"] = old_layout("AdamW", ck["optim"], steps=13)
    assert "0.m" in ck["optim"]["state"] and "steps" in ck["optim"]
    ta.save(ck, path)
    resumed = train(TrainConfig(out=str(tmp_path / "split"), **base), resume=True, progress=False)
    assert resumed["loss"] == whole["loss"] and resumed["resumed_from"] == 13
    a = ta.load(tmp_path / "whole" / "checkpoint.npz")
    b = ta.load(path)
    for key in a["model"]:
        np.testing.assert_array_equal(a["model"][key].numpy(), b["model"][key].numpy(), key)
    _assert_same_optimizer_state(a["optim"], b["optim"], steps=30)


def test_resume_with_other_settings_is_refused(tmp_path):
    fast = {**FAST, "warmup": 1}  # (FAST's 10 steps of warm-up do not fit in 3)
    train(TrainConfig(steps=3, out=str(tmp_path), **fast), progress=False)
    with pytest.raises(ValueError, match="--d-model"):
        train(TrainConfig(steps=6, out=str(tmp_path), **{**fast, "d_model": 16}), resume=True,
              progress=False)


def test_ctrl_c_still_writes_everything(tmp_path, monkeypatch):
    import tinyattn.train as train_mod

    real_step = train_mod._train_step
    calls = []

    def step_then_interrupt(*args):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real_step(*args)

    monkeypatch.setattr(train_mod, "_train_step", step_then_interrupt)
    metrics = train(TrainConfig(steps=50, out=str(tmp_path), **FAST), progress=False)
    assert metrics["interrupted"] and metrics["steps"] == 3
    for name in ("metrics.json", "checkpoint.npz", "loss.png", "attention.png", "samples.txt"):
        assert (tmp_path / name).exists(), name


def test_build_uses_the_config():
    task, model, opt, sched = build(TrainConfig(**{**FAST, "layers": 3, "heads": 4}))
    assert len(model.blocks) == 3 and model.blocks[0].attn.n_heads == 4
    assert model.config.max_len == task.seq_len
    decayed = opt.param_groups[0]["params"]
    assert all(p.ndim == 2 for p in decayed) and opt.param_groups[1]["weight_decay"] == 0.0


def test_build_passes_every_model_and_optimizer_setting_on():
    cfg = TrainConfig(task="reverse", length=3, d_model=8, heads=2, layers=1, dropout=0.2,
                      rotary=True, norm="rms", tie=False, qk_norm=True, lr=1e-3,
                      weight_decay=0.05, beta2=0.9, steps=40, warmup=4, min_lr_ratio=0.3)
    task, model, opt, sched = build(cfg)
    c = model.config
    assert (c.vocab_size, c.max_len) == (task.vocab_size, task.seq_len)
    assert (c.d_model, c.n_heads, c.n_layers, c.dropout, c.rotary, c.norm, c.tie, c.qk_norm) == \
        (8, 2, 1, 0.2, True, "rms", False, True)
    assert [g["betas"] for g in opt.param_groups] == [(0.9, 0.9)] * 2
    assert [g["weight_decay"] for g in opt.param_groups] == [0.05, 0.0]
    lrs = []
    for _ in range(cfg.steps):
        lrs.append(opt.lr)
        sched.step()
    # warm-up over 4 steps to lr, then cosine decay to lr * min_lr_ratio at the last step
    assert lrs[0] == pytest.approx(1e-3 / 4) and max(lrs) == pytest.approx(1e-3)
    assert opt.lr == pytest.approx(1e-3 * 0.3)


def test_a_training_step_on_another_backend_gives_the_numpy_steps_row(monkeypatch):
    """The batch, the targets and the model all live on the run's backend (here the fake CuPy
    of tests/support, which refuses to mix host and device arrays)."""
    import fake_cupy  # tests/support

    from tinyattn.train import _train_step

    rows = {}
    for name in ("numpy", "cupy"):
        if name == "cupy":
            fake_cupy.install(monkeypatch, kernels=False)
        cfg = TrainConfig(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
                          steps=5, backend=name)
        task, model, opt, sched = build(cfg)
        be = model.wte.weight.backend
        assert be.name == name
        rows[name] = [_train_step(cfg, task, model, opt, sched, be, step) for step in range(2)]
    for mine, ref in zip(rows["cupy"], rows["numpy"], strict=True):
        assert mine["loss"] == pytest.approx(ref["loss"], rel=1e-5)
        assert (mine["acc"], mine["step"], mine["lr"]) == (ref["acc"], ref["step"], ref["lr"])


def test_cli_train_and_sample(tmp_path, capsys):
    out = tmp_path / "cli"
    code = cli.main(["train", "--steps", "4", "--length", "4", "--d-model", "16", "--heads", "2",
                     "--layers", "1", "--out", str(out), "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "held-out token accuracy" in printed and str(out / "attention.png") in printed
    assert cli.main(["sample", "--checkpoint", str(out / "checkpoint.npz"), "--prompt",
                     "1234"]) == 0
    answer = capsys.readouterr().out.strip()
    assert answer.startswith("1234>") and len(answer) == 9
    with pytest.raises(ValueError, match="exactly 4 digits"):
        cli.main(["sample", "--checkpoint", str(out / "checkpoint.npz"), "--prompt", "12"])


def test_text_task_trains_and_samples(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("abcabcabd " * 200, encoding="utf-8")
    cfg = TrainConfig(task="text", text=str(corpus), seq_len=16, steps=40, d_model=32, heads=2,
                      layers=1, batch_size=16, eval_every=20, heldout_size=32,
                      out=str(tmp_path / "run"))
    metrics = train(cfg, progress=False)
    assert metrics["accuracy"] > 0.5  # "abcabcabd" is very predictable
    from tinyattn.sample import sample

    text = sample(tmp_path / "run" / "checkpoint.npz", "abc", max_new_tokens=20, greedy=True)
    assert text.startswith("abc") and len(text) == 23 and set(text) <= set("abcd ")


def test_default_config_is_the_documented_one():
    cfg = TrainConfig()
    assert (cfg.task, cfg.steps, cfg.backend) == ("reverse", 600, "numpy")
    assert cfg.run_dir() == os.path.join("runs", "reverse")


def test_console_script_prints_user_errors_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["tinyattn", "sample", "--checkpoint",
                                     str(tmp_path / "missing.npz")])
    assert cli.run() == 2
    err = capsys.readouterr().err
    assert err.startswith("tinyattn: error:") and "missing.npz" in err
    assert "Traceback" not in err


# ---- the training step: clipping and evaluation mode (each test kills a planted bug) -----------


def _norm_at_update(cfg, monkeypatch):
    """The global gradient norm the optimizer sees in one training step of `cfg`."""
    import tinyattn.train as train_mod

    task, model, opt, sched = build(cfg)
    seen = []
    real_step = opt.step

    def spy():
        seen.append(np.sqrt(sum(float((p.grad.numpy().astype(np.float64) ** 2).sum())
                                for p in model.parameters() if p.grad is not None)))
        real_step()

    monkeypatch.setattr(opt, "step", spy)
    train_mod._train_step(cfg, task, model, opt, sched, model.wte.weight.backend, 0)
    return seen[0]


def test_grad_clip_bounds_the_global_norm(monkeypatch):
    raw = _norm_at_update(TrainConfig(**{**FAST, "grad_clip": 1e9}), monkeypatch)
    assert raw > 0.05  # the first step's gradient is well above the bound below
    clipped = _norm_at_update(TrainConfig(**{**FAST, "grad_clip": 0.01}), monkeypatch)
    assert clipped <= 0.01 * (1 + 1e-5)
    assert clipped == pytest.approx(0.01, rel=1e-3)  # scaled down to the bound, not zeroed


def test_grad_clip_zero_means_no_clipping(monkeypatch):
    raw = _norm_at_update(TrainConfig(**{**FAST, "grad_clip": 1e9}), monkeypatch)
    off = _norm_at_update(TrainConfig(**{**FAST, "grad_clip": 0.0}), monkeypatch)
    assert off == pytest.approx(raw, rel=1e-6) and off > 0


def _dropout_twins():
    """A FAST model with dropout 0.5 in train mode and a twin with the same weights and no
    dropout: (task, model, twin, backend)."""
    task, model, _, _ = build(TrainConfig(**{**FAST, "dropout": 0.5}))
    _, twin, _, _ = build(TrainConfig(**{**FAST, "dropout": 0.0}))
    twin.load_state_dict(model.state_dict())
    return task, model.train(), twin, model.wte.weight.backend


def test_evaluation_runs_in_eval_mode_and_restores_train_mode():
    """With dropout, held-out scores equal those of the same weights without dropout: dropout
    is off while evaluating; and the model is back in train mode afterwards."""
    from tinyattn.train import evaluate

    task, model, twin, be = _dropout_twins()
    data = task.batch(np.random.default_rng(3), 32, "heldout")
    scores = evaluate(model, data, be)
    assert scores == evaluate(twin.eval(), data, be)
    assert model.training


def test_report_samples_are_answered_in_eval_mode():
    """samples.txt's greedy answers come from the model without dropout (the same as a twin
    with dropout 0), and the model is back in train mode afterwards."""
    from tinyattn.train import samples_text

    task, model, twin, be = _dropout_twins()
    heldout = task.batch(np.random.default_rng(3), 12, "heldout")
    ta.manual_seed(0)
    text = samples_text(task, model, heldout, be)
    assert text == samples_text(task, twin.eval(), heldout, be)
    assert model.training


def test_evaluation_restores_the_mode_when_a_batch_fails():
    from tinyattn.train import evaluate

    class _Broken(ta.nn.Module):
        def forward(self, x):
            raise RuntimeError("a batch that fails")

    model = _Broken().train()
    with pytest.raises(RuntimeError, match="a batch that fails"):
        evaluate(model, (np.zeros((2, 3), np.int64), np.zeros((2, 3), np.int64)), None)
    assert model.training


class _FixedLogits(ta.nn.Module):
    """A 'model' that answers every batch with the same hand-written logits."""

    def __init__(self, logits):
        super().__init__()
        self.logits = np.asarray(logits, dtype=np.float64)

    def forward(self, x):
        return ta.tensor(self.logits[: len(x.numpy())])


def test_heldout_metrics_by_hand():
    """Two examples, 4 positions, 3 classes; positions 0-1 are the prompt (IGNORE). Example 0 is
    right on both answer positions (wrong on its prompt), example 1 on one of two: token accuracy
    3/4, exact match 1/2, loss the mean cross-entropy over the four answer positions."""
    from tinyattn.data import IGNORE
    from tinyattn.train import evaluate

    big = 5.0
    logits = np.zeros((2, 4, 3))
    logits[0, :, 0] = big          # predicts 0 everywhere
    logits[1, :, 1] = big          # predicts 1 everywhere
    y = np.array([[IGNORE, IGNORE, 0, 0],
                  [IGNORE, IGNORE, 1, 2]])
    x = np.zeros((2, 4), dtype=np.int64)
    model = _FixedLogits(logits)
    model.eval()
    scores = evaluate(model, (x, y), ta.tensor([0.0]).backend)
    p_right = np.exp(big) / (np.exp(big) + 2)
    p_wrong = 1 / (np.exp(big) + 2)
    want_loss = -(3 * np.log(p_right) + np.log(p_wrong)) / 4
    assert scores["heldout_acc"] == 0.75
    assert scores["heldout_exact"] == 0.5
    assert scores["heldout_loss"] == pytest.approx(want_loss, rel=1e-9)
    assert not model.training  # a model evaluated in eval mode stays in eval mode


# ---- one training step's numbers, and data parallelism's arithmetic in one process -------------


def _xent(logits, y):
    """Per-position cross-entropy by hand (NumPy, float64), 0 where y is IGNORE."""
    from tinyattn.data import IGNORE

    z = logits - logits.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(logp, np.where(y == IGNORE, 0, y)[..., None], -1)[..., 0]
    return np.where(y == IGNORE, 0.0, -picked)


def test_a_steps_loss_is_the_global_batch_mean_however_the_ranks_split_it(monkeypatch):
    """_shard_loss: each rank's loss is its rows' summed cross-entropy scaled (_loss_scale: N
    over the global batch's scored tokens) so that the mean of the N ranks' losses (and so of
    their gradients) is the global batch's mean loss."""
    from tinyattn import distributed
    from tinyattn.data import IGNORE
    from tinyattn.train import _loss_scale, _shard_loss

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 3, 4))
    y = rng.integers(0, 4, size=(5, 3))
    y[:, 0] = IGNORE
    y[4, 1] = IGNORE  # 9 scored positions
    per = _xent(logits, y)
    loss, summed = _shard_loss(ta.tensor(logits), ta.tensor(y.reshape(-1)), _loss_scale(y), 4)
    assert loss.item() == pytest.approx(per.sum() / 9, rel=1e-6)
    assert summed.item() == pytest.approx(per.sum(), rel=1e-6)
    monkeypatch.setitem(distributed._world, "size", 2)
    losses = []
    for rank in (0, 1):
        rows = distributed.shard(5, rank=rank)
        loss, summed = _shard_loss(ta.tensor(logits[rows]), ta.tensor(y[rows].reshape(-1)),
                                   _loss_scale(y), 4)
        assert summed.item() == pytest.approx(per[rows].sum(), rel=1e-6)
        losses.append(loss.item())
    assert np.mean(losses) == pytest.approx(per.sum() / 9, rel=1e-6)
    one = np.full((2, 3), IGNORE)
    one[1, 2] = 0  # a single scored token: the loss is its own, not half of it
    assert _loss_scale(one) == 2.0 and _loss_scale(np.full((2, 3), IGNORE)) == 2.0


def test_a_global_batch_smaller_than_the_world_is_refused(monkeypatch):
    from tinyattn import distributed
    from tinyattn.train import FlagError, _check_world

    _check_world(TrainConfig(batch_size=1))  # one process: any batch
    monkeypatch.setitem(distributed._world, "size", 4)
    _check_world(TrainConfig(batch_size=4))  # one row per process
    with pytest.raises(FlagError, match=r"--batch-size is the global batch, split across the 4 "
                                        r"MPI processes: it must be at least 4: got 3$"):
        _check_world(TrainConfig(batch_size=3))


TINY = dict(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
            eval_every=100000, heldout_size=16)


class _OtherRanks:
    """The MPI communicator as one rank sees it, for the code only mpiexec reaches, in one
    process: `allreduce` takes the largest of this rank's value and `others` (what the other
    ranks hold); `bcast`/`Bcast` record what rank 0 sends and hand it to a later rank."""

    def __init__(self, others=()):
        self.others, self.objects, self.buffers = list(others), [], []

    def allreduce(self, value, op):
        return max([value, *self.others])

    def bcast(self, obj, root=0):
        from tinyattn import distributed

        if distributed.rank() == root:
            self.objects.append(obj)
            return obj
        return self.objects.pop(0)

    def Bcast(self, buf, root=0):  # noqa: N802 - mpi4py's name
        from tinyattn import distributed

        if distributed.rank() == root:
            self.buffers.append(buf.copy())
        else:
            buf[...] = self.buffers.pop(0)


@pytest.fixture
def no_report(monkeypatch):
    """Runs without loss.png, attention.png and samples.txt (the figures take seconds)."""
    import tinyattn.train as train_mod

    monkeypatch.setattr(train_mod, "_write_report", lambda *args: [])


def _world_of_two(monkeypatch, comm, rank=0):
    from tinyattn import distributed

    monkeypatch.setitem(distributed._world, "comm", comm)
    monkeypatch.setitem(distributed._world, "size", 2)
    monkeypatch.setitem(distributed._world, "rank", rank)
    monkeypatch.setattr(distributed, "_mpi", lambda: type("MPI", (), {"MAX": "max"}))


@pytest.mark.parametrize("mine, theirs, agreed", [(None, 0, None), (None, 15, 15), (2, 0, 2),
                                                  (2, 15, 15)])
def test_a_signal_any_rank_received_stops_every_rank(monkeypatch, mine, theirs, agreed):
    """Ranks stop together: a Ctrl-C (2) or SIGTERM (15) on any rank is every rank's signal
    (the largest, if several came), and without one no rank stops."""
    from tinyattn.train import _agreed_stop, _Stopper

    _world_of_two(monkeypatch, _OtherRanks([theirs]))
    stopper = _Stopper()
    stopper.signal = mine
    assert _agreed_stop(stopper) == agreed and stopper.signal == agreed


def test_every_rank_starts_from_rank_0s_resumed_weights_optimizer_schedule_and_step(
        tmp_path, monkeypatch, no_report):
    from tinyattn.train import _prepare_replicas, _Run, settle

    cfg = TrainConfig(steps=6, out=str(tmp_path), **TINY)
    train(cfg, progress=False, stop_after=3)
    cfg = settle(cfg, resume=True)  # the run's settings (its warm-up), as train() takes them
    comm = _OtherRanks()
    _world_of_two(monkeypatch, comm, rank=0)
    first = _Run(cfg, *build(cfg))
    _prepare_replicas(first, resume=True, force=False)  # rank 0 reads the checkpoint
    assert first.main and first.step == 3 and first.elapsed > 0
    _world_of_two(monkeypatch, comm, rank=1)
    other = _Run(cfg, *build(cfg))  # freshly initialised, as on another process
    _prepare_replicas(other, resume=True, force=False)
    assert not other.main
    assert (other.step, other.elapsed) == (first.step, first.elapsed)
    assert other.sched.state_dict() == first.sched.state_dict()
    _assert_same_optimizer_state(other.opt.state_dict(), first.opt.state_dict(), steps=3)
    for (name, p), (_, q) in zip(other.model.named_parameters(), first.model.named_parameters(),
                                 strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), name)


def test_the_progress_bar_counts_from_where_a_resumed_run_starts(tmp_path, capsys, no_report):
    cfg = TrainConfig(steps=6, warmup=1, out=str(tmp_path), **TINY)  # (the default: said)
    train(cfg, progress=False, stop_after=3)
    assert capsys.readouterr().err == ""  # no bar when asked for none
    train(cfg, resume=True)
    states = [s for s in re.split(r"[\r\n]", capsys.readouterr().err) if s.strip()]
    assert states[0].startswith("train:") and " 3/6 " in states[0]
    assert states[-1].startswith("train: 100%") and " 6/6 " in states[-1]
    for shown in (r"loss=[0-9.e+-]+,", r"acc=[01]\.\d{3}\b", r"tok_s=\d+\b"):  # the last row's
        assert re.search(shown, states[-1]), (shown, states[-1])


def test_a_steps_row_scores_its_own_batch_before_the_update():
    """The row a step logs: its number, the learning rate it used, and the loss and token
    accuracy of the batch drawn for (seed, step), measured before the optimizer moved."""
    from tinyattn.train import _train_step, evaluate

    cfg = TrainConfig(task="reverse", length=4, d_model=16, heads=2, layers=1, batch_size=8,
                      warmup=3, steps=10, dropout=0.0, seed=5)
    task, model, opt, sched = build(cfg)
    be = model.wte.weight.backend
    for step in range(3):
        x, y = task.batch(np.random.default_rng([cfg.seed, 0, step]), cfg.batch_size)
        before = evaluate(model, (x, y), be)
        lr = opt.lr
        row = _train_step(cfg, task, model, opt, sched, be, step)
        assert row["step"] == step + 1 and row["lr"] == lr and opt.lr != lr  # warmup climbs
        assert row["loss"] == pytest.approx(before["heldout_loss"], rel=1e-5)
        assert row["acc"] == before["heldout_acc"]
        assert row["tokens_per_s"] > 0 and model.training
    assert evaluate(model, (x, y), be)["heldout_loss"] != before["heldout_loss"]  # it updated


def test_evaluation_in_batches_scores_as_one():
    from tinyattn.train import evaluate

    cfg = TrainConfig(task="reverse", length=4, d_model=16, heads=2, layers=1)
    task, model, _, _ = build(cfg)
    data = task.batch(np.random.default_rng(1), 7, "heldout")
    whole = evaluate(model, data, model.wte.weight.backend)
    parts = evaluate(model, data, model.wte.weight.backend, batch=3)  # 3 + 3 + 1 rows
    assert parts["heldout_loss"] == pytest.approx(whole["heldout_loss"], rel=1e-6)
    assert parts["heldout_acc"] == whole["heldout_acc"]
    assert parts["heldout_exact"] == whole["heldout_exact"]


def test_the_summary_line_says_how_the_run_ended(capsys):
    import io

    from tinyattn.train import _summary

    toy = {"config": {"task": "sort"}, "steps": 40, "wall_time_s": 3.14159, "signal": None,
           "interrupted": False, "resumed_from": None, "accuracy": 0.98765, "exact_match": 0.5,
           "loss": 0.123456}
    lm = {"config": {"task": "text"}, "steps": 7, "wall_s": 12.06, "signal": "SIGTERM",
          "interrupted": True, "resumed_from": 3, "val_loss": 1.5, "val_bpc": 2.1640,
          "train_loss": 1.25}
    out = io.StringIO()
    _summary(out, toy, "runs/sort", ["metrics.json", "loss.png"])
    _summary(out, {**toy, "interrupted": True}, "r", [])
    _summary(out, lm, "r", [])
    assert out.getvalue().splitlines() == [
        "", "sort: 40 steps in 3.1 s — held-out token accuracy 98.77%, exact match 50.00%, "
            "loss 0.1235",
        "  " + os.path.join("runs/sort", "metrics.json"),
        "  " + os.path.join("runs/sort", "loss.png"),
        "", "sort: 40 steps in 3.1 s (interrupted) — held-out token accuracy 98.77%, exact match "
            "50.00%, loss 0.1235",
        "", "text: 7 steps in 12.1 s (stopped by SIGTERM) (resumed at step 3) — val loss 1.5000 "
            "(2.164 bits/char), train loss 1.2500"]
    assert capsys.readouterr().out == ""  # to the stream given


# ---- samples.txt: held-out prompts, targets and the model's answers ----------------------------


class _Answers(ta.nn.Module):
    """A stand-in model: answers each toy prompt with the task's own answer, except that it
    gets the problems listed in `wrong` wrong (its first answer digit off by one); records the
    calls."""

    def __init__(self, task, wrong=()):
        super().__init__()
        self.task, self.wrong, self.calls = task, set(wrong), []

    def generate(self, idx, n, **kw):
        prompt = [int(t) for t in idx.numpy()[0]]
        self.calls.append((len(prompt), n, kw))
        full = list(self.task.example(np.array([t for t in prompt if t < 10])))
        answer = full[len(prompt): len(prompt) + n]
        if len(self.calls) - 1 in self.wrong:
            answer[0] = (answer[0] + 1) % 10
        return ta.tensor([prompt + answer])


def test_samples_list_prompt_target_answer_and_whether_it_is_right():
    from tinyattn.data import make_task
    from tinyattn.train import samples_text

    task = make_task("reverse", length=3)
    heldout = task.batch(np.random.default_rng(0), 20, "heldout")
    model = _Answers(task, wrong={1})
    lines = samples_text(task, model, heldout, ta.tensor([0.0]).backend, n=3).splitlines()
    assert lines[0] == "reverse: input | target | model (greedy) | correct" and len(lines) == 4
    for i, line in enumerate(lines[1:]):
        prompt, target, answer, ok = line.split(" | ")
        assert prompt == task.decode(heldout[0][i][:4]) and prompt.endswith(">")
        assert target == prompt[2::-1]  # the prompt's digits reversed
        assert (answer == target) == (ok == "yes") and ok == ("no" if i == 1 else "yes")
    assert [c[:2] for c in model.calls] == [(4, 3)] * 3
    assert all(c[2] == {"greedy": True} for c in model.calls)
    short = (heldout[0][:2], heldout[1][:2])  # fewer held-out rows than asked for
    assert len(samples_text(task, _Answers(task), short, ta.tensor([0.0]).backend)
               .splitlines()) == 3


def test_add_samples_say_the_sums_are_written_backwards():
    from tinyattn.data import make_task
    from tinyattn.train import samples_text

    task = make_task("add", length=2)
    heldout = task.batch(np.random.default_rng(0), 4, "heldout")
    text = samples_text(task, _Answers(task), heldout, ta.tensor([0.0]).backend)
    lines = text.splitlines()
    assert text.endswith("\n") and len(lines) == 6
    assert lines[1] == "(sums are written least significant digit first)"
    a, b, _ = re.split(r"[+=]", lines[2].split(" | ")[0])
    assert lines[2].split(" | ")[1] == str(int(a) + int(b)).zfill(3)[::-1]


def test_a_language_models_sample_continues_a_held_out_prompt():
    from tinyattn.train import samples_text

    class Text:
        language_model = True

        def decode(self, ids):
            return "".join("abcdefghijklmnopqrst"[i] for i in ids)

    calls = []

    class Model(ta.nn.Module):
        def generate(self, idx, n, **kw):
            calls.append((idx.numpy().tolist(), n, kw))
            return ta.tensor([idx.numpy()[0].tolist() + [0] * 3])

    x = np.arange(40).reshape(2, 20) % 20
    text = samples_text(Text(), Model(), (x, x), ta.tensor([0.0]).backend)
    assert text == ("prompt: 'abcdefghijklmnop'\ngenerated (temperature 0.8, top-k 10):\n"
                    "abcdefghijklmnopaaa\n")
    (prompt, n, kw), = calls
    assert prompt == [list(range(16))] and n == 200
    rng = kw.pop("rng")
    assert kw == {"temperature": 0.8, "top_k": 10}
    assert rng.integers(1 << 30) == np.random.default_rng(0).integers(1 << 30)


@pytest.mark.parametrize("task,extra", [("reverse", {"dropout": 0.1}),
                                        ("text", {"rotary": True, "norm": "rms"})])
@pytest.mark.slow  # (.ci/run runs it with the slow tests)
def test_capture_trains_to_the_same_numbers(tmp_path, monkeypatch, task, extra):
    """--capture: every step's loss and accuracy, the held-out metrics and the final weights
    equal those of the eager run, bit for bit, through dropout and the mode switches of each
    evaluation; and the steps between evaluations were replayed, not run eagerly."""
    from tinyattn import replay

    replays = []
    real = replay.CapturedStep._replay
    monkeypatch.setattr(replay.CapturedStep, "_replay",
                        lambda self, prog, args: replays.append(1) or real(self, prog, args))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("abcabcabd " * 200, encoding="utf-8")
    runs = {}
    for capture in (False, True):
        text = {"text": str(corpus), "seq_len": 16} if task == "text" else {"length": 4}
        cfg = TrainConfig(task=task, steps=24, d_model=16, heads=2, layers=1, batch_size=8,
                          eval_every=8, heldout_size=16, capture=capture,
                          out=str(tmp_path / f"run{capture}"), **text, **extra)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a step that fell back to eager would warn
            runs[capture] = train(cfg, progress=False, stream=io.StringIO())
    rows = {c: [json.loads(line) for line in open(tmp_path / f"run{c}" / "metrics.jsonl")]
            for c in runs}
    keys = [k for k in rows[False][0] if k not in ("time", "tokens_per_s")]
    assert [[r.get(k) for k in keys] for r in rows[True]] == \
        [[r.get(k) for k in keys] for r in rows[False]]
    weights = {c: ta.load(str(tmp_path / f"run{c}" / "checkpoint.npz"))["model"] for c in runs}
    for name, value in weights[False].items():
        np.testing.assert_array_equal(weights[True][name].numpy(), value.numpy(), err_msg=name)
    assert len(replays) == 24 - 2 * 3  # 2 recording steps at the start and after each eval


def test_the_training_time_reported_is_no_more_than_the_time_taken(tmp_path):
    """Each metrics row's time and metrics.json's count the training from 0 (not from a
    start value of their own): never more than the wall time of the whole call."""
    start = time.perf_counter()
    train(TrainConfig(**{**TINY, "steps": 3, "eval_every": 3, "out": str(tmp_path / "run")}),
          progress=False, stream=io.StringIO())
    wall = time.perf_counter() - start
    rows = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert 0 < rows[0]["time"] <= rows[-1]["time"] < wall
    assert rows[0]["time"] < rows[-1]["time"] / 2  # three steps, from 0: the first a third
