"""A new user's mistakes with the `tinyattn` command and the learner tools: an empty path is a
path that was given, not the default (train --out, graph --out/--html, sample --checkpoint,
bench shakespeare --json, bench report --out); a refused run prints no notes about the run it
did not start; explain mode keeps one VJP per line whatever a tensor is named; sample's help
says which settings a toy task does not use. Nothing here trains a model or runs a benchmark.
"""

import io

import pytest

import tinyattn as ta
import tinyattn.train as train_mod
from tinyattn import cli, graphs, viz
from tinyattn.train import FlagError


def one_line(caught):
    message = str(caught.value)
    assert "\n" not in message
    return message


# ---- an empty path is refused, not taken as the default ----------------------------------------


def test_train_out_empty_is_refused_not_the_default_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(train_mod, "build", lambda cfg: pytest.fail("built a model"))
    with pytest.raises(FlagError) as caught:
        cli.main(["train", "--out", "", "--steps", "2", "--warmup", "0"])
    assert one_line(caught) == "--out must name a folder for the run, not an empty string: got ''"
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("flags, name", [(["--out", ""], "--out"), (["--html", ""], "--html")])
def test_graph_empty_out_or_html_is_refused(tmp_path, monkeypatch, flags, name):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(graphs, "example", lambda *a, **k: pytest.fail("built the graph"))
    with pytest.raises(FlagError) as caught:
        cli.main(["graph", "--model", "mlp", *flags])
    assert one_line(caught) == f"graph: {name} must name a file, not an empty string: got ''"
    assert list(tmp_path.iterdir()) == []


def test_sample_checkpoint_empty_is_refused_naming_the_flag():
    with pytest.raises(FlagError) as caught:
        cli.main(["sample", "--checkpoint", ""])
    assert one_line(caught) == ("sample: --checkpoint must name a checkpoint file, not an empty "
                                "string: got ''")


def test_bench_shakespeare_json_empty_is_refused_before_the_benchmark_runs(monkeypatch, capsys):
    from tinyattn.bench import shakespeare

    monkeypatch.setattr(shakespeare, "measure", lambda *a, **k: pytest.fail("ran the benchmark"))
    with pytest.raises(SystemExit) as caught:
        cli.main(["bench", "shakespeare", "--json", ""])
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "tinyattn bench shakespeare: error: argument --json: an empty string names no file")


@pytest.mark.parametrize("where, message", [
    ("", "tinyattn bench report: --out must name a file, not an empty string: got ''"),
    ("{tmp}", "tinyattn bench report: --out {tmp} is a folder, not a file"),
])
def test_bench_report_out_is_checked_before_the_benchmarks_run(tmp_path, monkeypatch, where,
                                                                message):
    from tinyattn.bench import report

    monkeypatch.setattr(report, "load_floor", lambda *a: pytest.fail("ran the benchmark"))
    monkeypatch.setitem(report.SECTIONS, "overhead", lambda ctx: pytest.fail("ran the benchmark"))
    with pytest.raises(SystemExit) as caught:
        cli.main(["bench", "report", "--sections", "overhead", "--out", where.format(tmp=tmp_path)])
    assert caught.value.code == message.format(tmp=tmp_path)


# ---- a refused run says only why ---------------------------------------------------------------


def test_a_refused_run_prints_no_warm_up_note(tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(FlagError) as caught:
        cli.main(["train", "--out", str(out), "--steps", "2", "--heads", "0"])
    assert one_line(caught) == "--heads must be a whole number >= 1: got 0"
    assert capsys.readouterr().err == ""
    assert not out.exists()


def test_an_accepted_short_run_still_says_its_warm_up_was_cut(tmp_path, capsys):
    from tinyattn.tasks import config

    cfg = config(steps=2, out=str(tmp_path / "run"))
    assert train_mod.settle(cfg).warmup == 0
    assert "--warmup 50 (the default) does not fit in --steps 2" in capsys.readouterr().err


# ---- explain mode: one line per VJP, whatever the names ----------------------------------------


def test_explain_keeps_one_line_per_vjp_with_a_name_holding_a_newline():
    x = ta.randn(3, requires_grad=True)
    x.name = "x\nbad"
    y = x * 2
    y.name = "y\tout\n"
    loss = (y * x).sum()
    text = io.StringIO()
    with ta.explain(file=text):
        loss.backward()
    lines = text.getvalue().splitlines()
    assert len(lines) == 4  # sum, mul, mul, and one line adding up x's two contributions
    assert all(line.startswith(("[", "      + ")) for line in lines)
    assert "x\\nbad is used more than once" in lines[-1]
    assert any(r"-> y\tout\n:" in line for line in lines)


def test_explain_line_of_a_plain_name_is_unchanged():
    x = ta.randn(3, requires_grad=True)
    loss = (x * x).sum()
    loss.name = "loss"
    text = io.StringIO()
    with ta.explain(file=text):
        loss.backward()
    assert text.getvalue().splitlines()[0].startswith("[0] sum -> loss: ")


# ---- sample's help says what a toy task does not use -------------------------------------------


def test_sample_help_says_the_toy_tasks_ignore_the_sampling_settings(capsys):
    with pytest.raises(SystemExit):
        cli.main(["sample", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for flag in ("--max-new-tokens", "--top-k", "--top-p", "--seed"):
        # (the last mention: the options list, not the usage line)
        part = help_text.rsplit(f"{flag} {flag.lstrip('-').replace('-', '_').upper()}", 1)[1]
        assert "toy" in part.split(" --")[0], flag


def test_viz_render_of_a_name_with_a_newline_is_still_a_picture(tmp_path):
    x = ta.randn(2, requires_grad=True)
    x.name = "a\nb"
    loss = (x * x).sum()
    out = viz.render(loss, tmp_path / "g.dot")
    assert "a\\nb" in out.read_text()
