"""The `tinyattn` command's answers to a mistake: one line naming the flag and the value, before
anything is built or written (train, sample, graph), and the bench subcommands' options checked
up front with a usage line that names the subcommand. No benchmark runs here.
"""

import pytest

import tinyattn.train as train_mod
from tinyattn import cli, graphs, viz
from tinyattn.train import FlagError


def one_line(caught):
    message = str(caught.value)
    assert "\n" not in message
    return message


# ---- train ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["reverse", "sort", "copy", "add", None])
def test_seq_len_is_refused_for_a_toy_task_as_length_is_for_text(tmp_path, task):
    out = tmp_path / "run"
    flags = ["--task", task] if task else []
    with pytest.raises(FlagError) as caught:
        cli.main(["train", "--out", str(out), "--seq-len", "10", *flags])
    assert one_line(caught) == ("--seq-len is for the text tasks (characters per example); the "
                                "toy tasks take --length: got 10")
    assert not out.exists()


def test_seq_len_is_taken_for_the_text_tasks(monkeypatch):
    seen = []
    monkeypatch.setattr(train_mod, "train", lambda cfg, **kw: seen.append(cfg) or {})
    cli.main(["train", "--task", "shakespeare", "--seq-len", "32"])
    cli.main(["train", "--text", "corpus.txt", "--seq-len", "16"])
    assert [c.seq_len for c in seen] == [32, 16]


def test_threads_sets_the_blas_threads_the_run_trains_with(monkeypatch, capsys):
    import threadpoolctl

    from tinyattn import runtime

    seen = []

    def record(cfg, **kw):
        seen.append({p["num_threads"] for p in threadpoolctl.threadpool_info()
                     if p["user_api"] == "blas"})
        return {}

    monkeypatch.setattr(train_mod, "train", record)
    monkeypatch.setattr(runtime, "_threads", {"count": None, "limiter": None})
    with threadpoolctl.threadpool_limits(limits=2):  # (gives the pools their settings back)
        cli.main(["train"])  # no --threads: the pools as they were
        cli.main(["train", "--threads", "1"])
        with pytest.raises(SystemExit):
            cli.main(["train", "--threads", "0"])
    assert seen == [{2}, {1}]
    assert "argument --threads: must be a whole number >= 1: got 0" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--rotary", "--d-model", "6", "--heads", "2"],
     r"^--rotary needs an even head dim \(--d-model / --heads = 3\)"),
    (["--rotary", "--d-model", "8", "--heads", "8"],
     r"^--rotary needs an even head dim \(--d-model / --heads = 1\)"),
])
def test_rotary_with_an_odd_head_dim_is_refused_before_anything_is_built(
        tmp_path, monkeypatch, flags, message):
    monkeypatch.setattr(train_mod, "build", lambda cfg: pytest.fail("built a model"))
    out = tmp_path / "run"
    with pytest.raises(FlagError, match=message) as caught:
        cli.main(["train", "--out", str(out), *flags])
    one_line(caught)
    assert not out.exists()


def test_rotary_with_an_even_head_dim_passes():
    """An even head dim with --rotary, and an odd one without it, are accepted (validate
    raises a FlagError otherwise, as the odd head dim with --rotary shows)."""
    assert train_mod.validate(train_mod.TrainConfig(rotary=True, d_model=8, heads=2)) is None
    assert train_mod.validate(train_mod.TrainConfig(rotary=False, d_model=6, heads=2)) is None
    with pytest.raises(FlagError, match="--rotary"):
        train_mod.validate(train_mod.TrainConfig(rotary=True, d_model=6, heads=2))


def test_out_must_be_a_folder(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    with pytest.raises(FlagError) as caught:
        cli.main(["train", "--out", str(afile)])
    assert one_line(caught) == f"--out must be a folder for the run, not a file: got {afile}"
    with pytest.raises(FlagError) as caught:
        cli.main(["train", "--out", str(afile / "run")])
    assert one_line(caught) == (f"--out must be a folder for the run: {afile} is a file: got "
                                f"{afile / 'run'}")
    assert afile.read_text() == "not a folder"


def test_text_must_be_a_file(tmp_path):
    with pytest.raises(FlagError) as caught:
        cli.main(["train", "--text", str(tmp_path), "--out", str(tmp_path / "run")])
    assert one_line(caught) == f"--text must be a UTF-8 text file, not a folder: got {tmp_path}"
    assert not (tmp_path / "run").exists()


def test_out_of_memory_is_one_line_naming_the_sizes(tmp_path, monkeypatch, capsys):
    """A MemoryError (here: the first step's batch) is one line that says what to reduce; the
    exit status is 1, and the run folder made for the run is gone."""
    def no_memory(*args):
        raise MemoryError("Unable to allocate 116. TiB for an array with shape "
                          "(2000000000008, 8) and data type int64")

    monkeypatch.setattr(train_mod, "_train_step", no_memory)
    out = tmp_path / "run"
    monkeypatch.setattr("sys.argv", ["tinyattn", "train", "--batch-size", "1000000000000",
                                     "--out", str(out), "--no-progress"])
    assert cli.run() == 1
    err = capsys.readouterr().err
    assert err == ("tinyattn: error: out of memory (Unable to allocate 116. TiB for an array "
                   "with shape (2000000000008, 8) and data type int64); make the run smaller: "
                   "--batch-size 1000000000000, --d-model 64, --heads 4, --layers 2, "
                   "--heldout-size 512\n")
    assert not out.exists()


def test_out_of_memory_while_building_the_model_names_d_model(tmp_path, monkeypatch, capsys):
    def huge(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(train_mod, "TinyTransformer", huge)
    monkeypatch.setattr("sys.argv", ["tinyattn", "train", "--d-model", "1000000", "--heads",
                                     "1", "--out", str(tmp_path / "run")])
    assert cli.run() == 1
    err = capsys.readouterr().err
    assert err.startswith("tinyattn: error: out of memory; make the run smaller: ")
    assert "--d-model 1000000" in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


# ---- sample and graph ----------------------------------------------------------------------------


def test_sample_seed_must_be_a_whole_number_at_least_0(tmp_path):
    with pytest.raises(FlagError) as caught:
        cli.main(["sample", "--checkpoint", str(tmp_path / "ck.npz"), "--seed", "-1"])
    assert one_line(caught) == "sample: --seed must be a whole number >= 0: got -1"


def test_sample_checkpoint_must_be_a_file_not_a_folder(tmp_path):
    with pytest.raises(FlagError) as caught:
        cli.main(["sample", "--checkpoint", str(tmp_path)])
    assert one_line(caught) == (f"sample: --checkpoint {tmp_path} is a folder, not a "
                                "checkpoint file")
    (tmp_path / "checkpoint.npz").write_bytes(b"")
    with pytest.raises(FlagError) as caught:
        cli.main(["sample", "--checkpoint", str(tmp_path)])
    assert one_line(caught).endswith(f"(give {tmp_path / 'checkpoint.npz'})")


def test_graph_seed_must_be_a_whole_number_at_least_0(tmp_path, monkeypatch):
    monkeypatch.setattr(graphs, "example", lambda *a, **k: pytest.fail("built the graph"))
    with pytest.raises(FlagError) as caught:
        cli.main(["graph", "--out", str(tmp_path / "g.dot"), "--seed", "-3"])
    assert one_line(caught) == "graph: --seed must be a whole number >= 0: got -3"


@pytest.mark.parametrize("name, hover", [("g.svg", True), ("g.SVG", True), ("g.png", False),
                                         ("g.pdf", False), ("g.dot", False)])
def test_graph_says_hover_only_for_an_svg(tmp_path, monkeypatch, capsys, name, hover):
    monkeypatch.setattr(viz, "render", lambda loss, out, **options: out)  # (no Graphviz needed)
    assert cli.main(["graph", "--model", "mlp", "--out", str(tmp_path / name)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"wrote {tmp_path / name}: the mlp loss graph")
    assert ("hover an op for its VJP" in line) == hover and "SVG" not in line.split(":", 1)[1]


# ---- bench: options checked before a benchmark runs ---------------------------------------------


BAD_BENCH_OPTIONS = [
    ("step", ["--repeats", "0"], "--repeats", "must be a whole number >= 1: got 0"),
    ("overhead", ["--repeats", "0"], "--repeats", "must be a whole number >= 1: got 0"),
    ("overhead", ["--ops", "-5"], "--ops", "must be a whole number >= 1: got -5"),
    ("generate", ["--contexts", "64", "8"], "--contexts", "must be a whole number >= 9: got 8"),
    ("generate", ["--repeats", "0"], "--repeats", "must be a whole number >= 1: got 0"),
    ("ddp", ["--processes", "0"], "--processes", "must be a whole number >= 1: got 0"),
    ("ddp", ["--repeats", "-1"], "--repeats", "must be a whole number >= 1: got -1"),
    ("shakespeare", ["--steps", "0"], "--steps", "must be a whole number >= 1: got 0"),
    ("shakespeare", ["--memory-steps", "-1"], "--memory-steps",
     "must be a whole number >= 0: got -1"),
    ("attention", ["--t", "0"], "--t", "must be a whole number >= 1: got 0"),
    ("attention", ["--repeats", "x"], "--repeats", "must be a whole number >= 1: got 'x'"),
    ("attention", ["--batch", "0"], "--batch", "must be a whole number >= 1: got 0"),
    ("softmax", ["--repeats", "0"], "--repeats", "must be a whole number >= 1: got 0"),
    ("step", ["--nosuch"], None, "unrecognized arguments: --nosuch"),
    ("report", ["--nosuch"], None, "unrecognized arguments: --nosuch"),
]


@pytest.mark.parametrize("name, options, flag, message", BAD_BENCH_OPTIONS,
                         ids=[f"{n} {' '.join(o)}" for n, o, *_ in BAD_BENCH_OPTIONS])
def test_bench_options_are_checked_up_front(capsys, name, options, flag, message):
    with pytest.raises(SystemExit) as caught:
        cli.main(["bench", name, *options])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: tinyattn bench {name} ")
    argument = f"argument {flag}: " if flag else ""
    assert err.splitlines()[-1] == f"tinyattn bench {name}: error: {argument}{message}"



def test_bench_without_a_name_asks_for_the_name_only(capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["bench"])
    assert caught.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == "tinyattn bench: error: the following arguments are required: name"


@pytest.mark.parametrize("where, message", [
    ("missing/r.json", "no folder {tmp}/missing for the results"),
    ("", "{tmp} is a folder, not a file"),
    ("r.json/", "{tmp}/r.json/ is a folder, not a file"),
])
def test_bench_shakespeare_json_path_is_checked_before_the_benchmark_runs(
        tmp_path, monkeypatch, capsys, where, message):
    from tinyattn.bench import shakespeare

    monkeypatch.setattr(shakespeare, "measure", lambda *a, **k: pytest.fail("ran the benchmark"))
    path = f"{tmp_path}/{where}" if where else str(tmp_path)
    with pytest.raises(SystemExit) as caught:
        cli.main(["bench", "shakespeare", "--json", path])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: tinyattn bench shakespeare ")
    assert err.splitlines()[-1] == ("tinyattn bench shakespeare: error: argument --json: "
                                    + message.format(tmp=tmp_path))
