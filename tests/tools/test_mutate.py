"""tools/mutate.py: the per-package tally of mutmut's results and the table it writes into
docs/testing.md (mutmut itself is not run here: a full run takes an hour)."""

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("mutate", ROOT / "tools" / "mutate.py")
mutate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutate)


def _meta(folder, path, codes):
    meta = folder / "mutants" / path
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"exit_code_by_key": codes}))


def test_tally_counts_killed_survived_and_unreached_per_package(tmp_path):
    _meta(tmp_path, "tinyattn/sample.py.meta", {
        "tinyattn.sample.x_a__mutmut_1": 1,     # a test failed
        "tinyattn.sample.x_a__mutmut_2": 36,    # timed out: counts as caught
        "tinyattn.sample.x_a__mutmut_3": 0,     # survived
        "tinyattn.sample.x_a__mutmut_4": 33,    # no test reaches it: survived
        "tinyattn.sample.x_a__mutmut_5": None,  # not run yet
    })
    _meta(tmp_path, "tinyattn/ops/softmax.py.meta", {"tinyattn.ops.softmax.x_f__mutmut_1": 1})
    _meta(tmp_path, "tinyattn/viz.py.meta", {"tinyattn.viz.x_g__mutmut_1": 0})  # not audited
    codes = mutate.results(tmp_path / "mutants")
    rows = mutate.tally(codes, ["sample", "ops"])
    assert rows["sample"] == {"planted": 5, "killed": 2, "survived": 2, "no_tests": 1,
                              "not_run": 1, "score": 0.5}
    assert rows["ops"]["score"] == 1.0 and rows["ops"]["planted"] == 1
    assert mutate.survivors(codes, ["sample"]) == ["tinyattn.sample.x_a__mutmut_3",
                                                   "tinyattn.sample.x_a__mutmut_4"]


def test_write_docs_replaces_only_the_table(tmp_path):
    page = tmp_path / "testing.md"
    page.write_text(f"intro\n{mutate.BEGIN}\nold\n{mutate.END}\nafter\n")
    rows = {"sample": {"planted": 4, "killed": 3, "survived": 1, "no_tests": 0, "not_run": 0,
                       "score": 0.75}}
    mutate.write_docs(rows, page)
    text = page.read_text()
    assert text.startswith("intro\n") and text.endswith("after\n") and "old" not in text
    assert "| sample | 4 | 3 | 1 (0) | 0 | 75.0 % |" in text


def test_write_docs_refuses_a_page_without_markers(tmp_path):
    page = tmp_path / "testing.md"
    page.write_text("no markers here\n")
    with pytest.raises(SystemExit, match="markers"):
        mutate.write_docs({}, page)
    assert page.read_text() == "no markers here\n"


def test_the_docs_page_has_the_markers_and_the_config_names_every_package():
    text = (ROOT / "docs" / "testing.md").read_text()
    assert mutate.BEGIN in text and mutate.END in text
    config = (ROOT / "pyproject.toml").read_text()
    for prefix in mutate.PACKAGES.values():
        path = prefix.rstrip(".").replace(".", "/")
        assert f'"{path}/*"' in config or f'"{path}.py"' in config, path


def test_unknown_package_is_refused(capsys):
    with pytest.raises(SystemExit):
        mutate.main(["nosuch", "--report-only"])
    assert "unknown package nosuch" in capsys.readouterr().err


def test_draw_takes_n_of_each_package_the_same_way_every_time():
    codes = {f"tinyattn.sample.x_f__mutmut_{i}": None for i in range(10)}
    codes.update({f"tinyattn.ops.softmax.x_g__mutmut_{i}": 1 for i in range(3)})
    codes["tinyattn.viz.x_h__mutmut_1"] = None
    drawn = mutate.draw(codes, ["sample", "ops"], 4, seed=0)
    assert len(drawn) == 4 + 3 and len(set(drawn)) == 7
    assert sum(n.startswith("tinyattn.sample.") for n in drawn) == 4
    assert drawn == mutate.draw(codes, ["sample", "ops"], 4, seed=0)
    assert drawn != mutate.draw(codes, ["sample", "ops"], 4, seed=1)
