"""The explorer page in a real browser: headless Chromium (Debian's `chromium`) driven by
Playwright. Node counts, steps in the recorded order, the panel's numbers against explain
mode, step back, keys, play, jump, folding a module, the Jupyter IFrame, the screenshot the
docs use. Skipped where Chromium or Playwright is missing; under CI=true such a skip fails the
run (tests/conftest.py), because .ci/run installs both."""

import shutil
import struct

import pytest
from explore_cases import explained, three_ops

from tinyattn import explore, graphs, viz

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # the skip below says so
    sync_playwright = None

pytestmark = pytest.mark.skipif(shutil.which("dot") is None,
                                reason="Graphviz's dot program is not installed")


@pytest.fixture(scope="module")
def browser():
    if sync_playwright is None:
        pytest.skip("needs playwright: Playwright for Python is not installed (dev extra)")
    exe = explore.chromium_path()
    if exe is None:
        pytest.skip("needs chromium: no chromium program on PATH (apt-get install chromium)")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=exe, headless=True)
        yield chromium
        chromium.close()


class Page:
    """One loaded explorer page, the walk it shows, and the script errors it raised."""

    def __init__(self, browser, loss, path, **kwargs):
        self.explorer = viz.explore(loss, path, **kwargs)
        self.data = explore.walk(loss, kwargs.get("params"), kwargs.get("recording"))
        self.order = [s["node"] for s in self.data["steps"]]  # the recorded order
        self.errors = []
        self.view = browser.new_page(viewport={"width": 1280, "height": 800})
        self.view.on("pageerror", lambda e: self.errors.append(str(e)))
        self.view.goto(path.resolve().as_uri())

    def js(self, expression, arg=None):
        return self.view.evaluate(expression, arg)

    def states(self):
        """{node number: data-state} of every node box."""
        pairs = self.js("[...document.querySelectorAll('#graph g.node[data-node]')]"
                        ".map(e => [+e.dataset.node, e.dataset.state])")
        return dict(pairs)

    def done_ops(self):
        return sorted(k for k, s in self.states().items()
                      if s == "done" and self.data["nodes"][k]["op"] != "leaf")

    def snapshot(self):
        """Everything a step changes: states, badges, edge labels, counter, panel."""
        return self.js("""() => ({
            nodes: [...document.querySelectorAll('#graph g.node')].map(e => [
                e.dataset.state, e.getAttribute('class'), e.querySelector('.badge')?.textContent]),
            edges: [...document.querySelectorAll('#graph text.grad-label')].map(e => e.textContent),
            counter: document.getElementById('counter').textContent,
            panel: document.getElementById('panel').innerText})""")

    def field(self, name):
        return self.view.inner_text(f"#panel [data-field='{name}']")

    def close(self):
        assert not self.errors, self.errors
        self.view.close()


@pytest.fixture
def small(browser, tmp_path):
    loss, x, rec = three_ops()
    page = Page(browser, loss, tmp_path / "small.html", recording=rec)
    page.loss, page.x = loss, x
    yield page
    page.close()


@pytest.fixture(scope="module")
def tiny(browser, tmp_path_factory):
    loss, params, rec = graphs.example("tiny")
    page = Page(browser, loss, tmp_path_factory.mktemp("tiny") / "tiny.html", params=params,
                recording=rec)
    page.loss = loss
    yield page
    page.close()


def test_every_node_has_a_box_with_its_op_and_state(small, tiny):
    for page in (small, tiny):
        assert page.js("window.tinyattn.steps") == len(page.data["steps"]) > 0
        assert page.js("window.tinyattn.state()") == 0
        boxes = page.js("[...document.querySelectorAll('#graph g.node[data-node]')]"
                        ".map(e => [+e.dataset.node, e.dataset.op])")
        assert sorted(boxes) == [[n["k"], n["op"]] for n in page.data["nodes"]]
        states = page.js("[...document.querySelectorAll('#graph [data-op]')]"
                         ".map(e => e.dataset.state)")
        assert set(states) <= {"waiting", "partial", "done"} and None not in states
    assert small.states() == {0: "partial", 1: "waiting", 2: "waiting", 3: "waiting"}


def test_each_step_marks_the_next_node_of_the_recorded_walk_done(small, tiny):
    for page, n in ((small, len(small.order)), (tiny, 12)):
        page.js("window.tinyattn.reset()")
        for i in range(n):
            page.view.click("#step")
            assert page.js("window.tinyattn.state()") == i + 1
            assert page.done_ops() == sorted(page.order[:i + 1])  # exactly the first i + 1
            assert page.view.get_attribute(f"#graph g.node[data-node='{page.order[i]}']",
                                           "data-state") == "done"
    assert small.view.is_disabled("#step")  # the walk is over


def test_a_tensor_used_twice_shows_its_parts_arriving(small):
    x = next(n["k"] for n in small.data["nodes"] if n["name"] == "x")
    badge = f"#graph g.node[data-node='{x}'] text.badge"
    seen = []
    for _ in range(len(small.order)):
        small.view.click("#step")
        seen.append((small.states()[x], small.view.text_content(badge)))
    assert seen == [("waiting", ""), ("partial", "+= 1/2"), ("done", "✓")]
    labels = small.js("[...document.querySelectorAll('#graph text.grad-label')]"
                      ".map(e => e.textContent)")
    _, sums = explained(small.loss)
    assert "+= ‖1.31‖" in labels and "+= ‖0.592‖" in labels  # mul's gy and tanh's gx to x
    small.js(f"window.tinyattn.select({x})")
    assert small.field("g-norm") == sums[0]  # x's whole gradient: explain's sum so far
    mul, tanh = small.order[1], small.order[2]
    assert small.view.inner_text("#panel [data-field=parts]").splitlines() == [
        f"= ‖1.31‖ from mul #{mul} (step 1)",
        f"+= ‖0.592‖ from tanh #{tanh} (step 2) — sum so far (3,) ‖{sums[0]}‖"]


def test_the_panel_shows_explain_modes_formula_and_norms(small, tiny):
    for page, op in ((small, "mul"), (tiny, "scaled_masked_softmax")):
        vjps, _ = explained(page.loss)
        j = [page.data["nodes"][k]["op"] for k in page.order].index(op)
        page.js("window.tinyattn.finish()")
        page.view.click(f"#graph g.node[data-vjp='{page.order[j]}']")
        assert page.view.get_attribute("#panel", "data-node") == str(page.order[j])
        name, formula, g, grads = vjps[j]
        assert (page.field("op").split(" ")[0], page.field("formula")) == (name, formula)
        assert page.field("g-norm") == g
        sent = [i for i, gr in enumerate(page.data["steps"][j]["grads"]) if gr is not None]
        assert [page.field(f"grad-norm-{i}") for i in sent] == grads
        assert page.field("explain") == page.data["steps"][j]["explain"]


def test_step_back_restores_the_previous_state(small, tiny):
    for page in (small, tiny):
        page.js("window.tinyattn.goto(2)")
        before = page.snapshot()
        page.view.click("#step")
        assert page.snapshot() != before
        page.view.click("#back")
        assert page.snapshot() == before and page.js("window.tinyattn.state()") == 2
        page.view.click("#reset")
        assert page.js("window.tinyattn.state()") == 0 and page.done_ops() == []


def test_keys_step_back_play_and_jump(small):
    small.view.focus("#graph")
    small.view.keyboard.press("ArrowRight")
    small.view.keyboard.press("ArrowRight")
    small.view.keyboard.press("ArrowLeft")
    assert small.js("window.tinyattn.state()") == 1
    small.view.keyboard.press("End")
    assert small.js("window.tinyattn.state()") == len(small.order)
    small.view.keyboard.press("Home")
    assert small.js("window.tinyattn.state()") == 0
    small.view.fill("#speed", "10")
    small.view.focus("#graph")
    small.view.keyboard.press(" ")
    assert small.view.get_attribute("#play", "aria-pressed") == "true"
    small.view.wait_for_function(f"window.tinyattn.state() === {len(small.order)}")
    small.view.wait_for_function("document.getElementById('play').ariaPressed === 'false'")
    small.view.select_option("#jump", "1")
    assert small.js("window.tinyattn.state()") == 2
    assert small.view.get_attribute("#panel", "data-node") == str(small.order[1])


def test_a_module_frame_folds_and_opens(tiny):
    tiny.js("window.tinyattn.goto(12)")
    frame = "#graph g.cluster:has(> title:text-is('cluster_blocks.1.mlp'))"
    tiny.view.click(f"{frame} text >> nth=0", force=True)
    assert "collapsed" in tiny.view.get_attribute(frame, "class")
    members = [n["k"] for n in tiny.data["nodes"]
               if (n["place"] or "").startswith("blocks.1.mlp")]
    states = {tiny.states()[k] for k in members}
    expected = "done" if states == {"done"} else "partial" if states & {"done", "partial"} \
        else "waiting"
    assert tiny.view.get_attribute(frame, "data-state") == expected
    assert "blocks.1.mlp: " in tiny.view.text_content(f"{frame} text.summary")
    tiny.view.click(f"{frame} text >> nth=0", force=True)
    assert "collapsed" not in tiny.view.get_attribute(frame, "class")


def test_jupyter_iframe_runs_the_page(browser):
    loss, _, rec = three_ops()
    shown = viz.explore(loss, recording=rec)._repr_html_()
    view = browser.new_page()
    view.set_content(shown)
    frame = view.frames[1]
    frame.wait_for_function("window.tinyattn !== undefined")
    assert frame.evaluate("window.tinyattn.step()") == 1
    view.close()


def test_screenshot_and_load_time(browser, small, tmp_path):
    png = explore.screenshot(small.explorer.path, tmp_path / "shot.png", steps=2,
                             select=small.order[1], size=(900, 600), browser=browser)
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == (900, 600)
    median, times = explore.load_ms(small.explorer.path, repeats=3, browser=browser)
    assert len(times) == 3 and median in times and all(t > 0 for t in times)


def test_run_to_a_node_from_its_panel(small):
    x = next(n["k"] for n in small.data["nodes"] if n["name"] == "x")
    small.js(f"window.tinyattn.select({x})")
    assert small.view.inner_text("#panel [data-action=run-to]") == "run to here (step 3)"
    small.view.click("#panel [data-action=run-to]")
    assert small.js("window.tinyattn.state()") == 3 and small.states()[x] == "done"
    assert small.view.get_attribute("#panel", "data-node") == str(x)
    mul = small.order[1]
    small.js(f"window.tinyattn.select({mul})")
    small.view.click("#panel [data-action=run-to]")  # back to just after mul's step
    assert small.js("window.tinyattn.state()") == 2 and small.states()[x] == "partial"


def test_under_ci_a_run_that_skipped_for_want_of_chromium_fails(monkeypatch, capsys):
    import conftest

    class Report:
        skipped, nodeid = True, "tests/tools/test_explore_browser.py::test_x"
        longrepr = ("test_explore_browser.py", 1, "Skipped: needs chromium: none on PATH")

    assert conftest._missing(Report) == "chromium"
    Report.longrepr = ("f", 1, "Skipped: needs playwright: not installed")
    assert conftest._missing(Report) == "playwright"
    Report.longrepr = ("f", 1, "Skipped: could not import 'torch': No module named 'torch'")
    assert conftest._missing(Report) == "torch"
    Report.longrepr = ("f", 1, "Skipped: could not import 'radon': No module named 'radon'")
    assert conftest._missing(Report) == "radon"
    Report.longrepr = ("f", 1, "Skipped: Graphviz's dot program is not installed")
    assert conftest._missing(Report) is None

    class Session:
        exitstatus = 0

    monkeypatch.setattr(conftest, "_missing_skips", {"chromium": [Report.nodeid]})
    monkeypatch.setenv("CI", "")
    conftest.pytest_sessionfinish(Session, 0)
    assert Session.exitstatus == 0
    monkeypatch.setenv("CI", "true")
    conftest.pytest_sessionfinish(Session, 0)
    assert Session.exitstatus == 1
    assert "1 test(s) skipped because chromium is missing" in capsys.readouterr().out


FNMATCH_PATTERNS = [
    "*", "?", "**", "a*b", "*.attn", "blocks.?.attn", "blocks.[0].attn", "blocks.[!0].*",
    "blocks.[0-1].mlp", "[ab]c", "[!ab]c", "[]]", "[!]]", "[]a]", "[a-c]x", "[c-a]x", "[a-]",
    "[-a]", "[!]", "[!-]", "[", "a[", "[[]", "[\\]", "a\\b", "[^a]", "[a^]", "a.b", "a+b", "(x)",
    "{1}", "$", "[a-c-e]", "[!a-c]*", "[&&a]", "[|~]", "[z-a-c]", "?*?", "[é-ê]", "😀?", "\n*",
    "[!x]?*", "[a-cx-z]",
]
FNMATCH_NAMES = [
    "", "a", "b", "ab", "ac", "bc", "cc", "]", "!", "-", "^", "[", "a[", "[!]", "\\", "a\\b",
    "a.b", "axb", "a+b", "aab", "(x)", "{1}", "$", "d", "x", "bx", "dx", "&", "|", "~", "é",
    "ê", "😀", "😀a", "\n", "\nq", "blocks.0.attn", "blocks.1.attn", "blocks.10.attn",
    "blocks.1.mlp", "blocks.0.mlp.fc", "ay", "cz",
]


def test_collapse_patterns_match_as_pythons_fnmatch(browser, tmp_path):
    """The page folds the modules to_dot folds: its pattern matching is fnmatch.fnmatchcase's
    ([seq] and [!seq] sets, ranges, ] first in a set, a lone [), checked on many patterns."""
    import fnmatch
    import re

    loss, params, rec = graphs.example("tiny")
    patterns = ["blocks.[0].attn", "blocks.[!0].mlp", "l?_f"]
    page = Page(browser, loss, tmp_path / "fold.html", params=params, recording=rec,
                collapse=patterns)
    folded = page.js("[...document.querySelectorAll('#graph g.cluster.collapsed > title')]"
                     ".map(t => t.textContent.replace(/^cluster_/, ''))")
    drawn = re.findall(r'"m:([^"]+)" \[', viz.to_dot(loss, params=params, collapse=patterns))
    assert sorted(folded) == sorted(drawn) == ["blocks.0.attn", "blocks.1.mlp", "ln_f"]
    pairs = [[name, pattern] for pattern in FNMATCH_PATTERNS for name in FNMATCH_NAMES]
    got = page.js("pairs => pairs.map(([n, p]) => window.tinyattn.fnmatch(n, p))", pairs)
    wrong = [(p, n) for (n, p), g in zip(pairs, got, strict=True)
             if g != fnmatch.fnmatchcase(n, p)]
    assert wrong == []
    page.close()


def test_a_leaf_with_a_hook_shows_its_grad_after_it_and_the_sum_before(browser, tmp_path):
    import tinyattn as ta

    x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x.name = "x"
    x.register_hook(lambda g: g * 10)
    loss = (x * x).sum()
    for hooks, total, words in ((True, "‖74.8‖", "its hook (register_hook) ran"),
                                (False, "‖7.48‖", "its hook (register_hook) did not run")):
        page = Page(browser, loss, tmp_path / f"hook{hooks}.html", hooks=hooks)
        leaf = next(n["k"] for n in page.data["nodes"] if n["name"] == "x")
        page.js("window.tinyattn.finish()")
        page.js(f"window.tinyattn.select({leaf})")
        assert "‖" + page.field("g-norm") + "‖" == total
        assert page.field("hooks").startswith(words)
        mul = next(n["k"] for n in page.data["nodes"] if n["op"] == "mul")
        page.js(f"window.tinyattn.select({mul})")
        assert page.field("value-note").startswith("not recorded: ")
        page.close()
