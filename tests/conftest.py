"""Shared test set-up. Under CI (CI=true), a test skipped because PyTorch, Chromium,
Playwright, radon or nbclient is missing fails the run: the parity tests with torch, the
explorer's browser tests, the complexity check and the notebooks are part of the README's test
command (those modules are in the dev extra, .ci/run installs chromium), and must never vanish
silently from the count."""

import os
import pathlib
import sys

import pytest

# what only the tests use (the CUDA emulator, the fake CuPy, NVRTC, the kernels' NumPy replays,
# shared cases, MPI drivers) lives in tests/support/; tests import it by its module name
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "support"))



@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same random state, whichever tests ran before it (a subset,
    another order, mutmut's runs): tinyattn's generator, NumPy's global one and, once imported,
    torch's (which draws the weights of the modules the parity tests build)."""
    import numpy as np

    import tinyattn as ta

    ta.manual_seed(0)
    np.random.seed(0)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(0)


_HOW = {  # what a skip reason names -> how to install it
    "torch": 'install the dev extra (pip install -e ".[dev]"), which brings torch==2.13.0',
    "chromium": "install Debian's chromium package (apt-get install chromium), as .ci/run does",
    "playwright": 'install the dev extra (pip install -e ".[dev]"), which brings playwright',
    "radon": 'install the dev extra (pip install -e ".[dev]"), which brings radon',
    "nbclient": 'install the dev extra (pip install -e ".[dev]"), which brings nbclient',
}
_MODULES = ("torch", "radon", "nbclient")  # dev-extra modules whose importorskip must not skip
_missing_skips = {}  # thing -> ids of the tests skipped for want of it


def _missing(report):
    """What a skipped test lacked, when it is something CI must have; else None."""
    if not report.skipped:
        return None
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    for module in _MODULES:
        if module in reason and ("could not import" in reason or "No module named" in reason):
            return module
    lowered = reason.lower()
    return next((thing for thing in ("chromium", "playwright") if f"needs {thing}" in lowered),
                None)


def _note(report):
    thing = _missing(report)
    if thing:
        _missing_skips.setdefault(thing, []).append(report.nodeid)


def pytest_collectreport(report):
    _note(report)


def pytest_runtest_logreport(report):
    _note(report)


def pytest_sessionfinish(session, exitstatus):
    if _missing_skips and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        session.exitstatus = 1
        for thing, ids in _missing_skips.items():
            shown = ", ".join(ids[:5]) + (" ..." if len(ids) > 5 else "")
            print(f"\nCI: {len(ids)} test(s) skipped because {thing} is missing ({shown}); "
                  f"{_HOW[thing]}")


@pytest.hookimpl(tryfirst=True)  # before -m selects on the marks
def pytest_collection_modifyitems(config, items):
    """A test module may name its costly emulated cases with `emulated_is_slow(name, params)`:
    those get the `slow` mark (the README's test command leaves slow tests out; pyproject)."""
    for item in items:
        judge = getattr(item.module, "emulated_is_slow", None)
        if judge is None or item.get_closest_marker("emulated") is None:
            continue
        params = item.callspec.params if hasattr(item, "callspec") else {}
        if judge(item.originalname, params):
            item.add_marker(pytest.mark.slow)
