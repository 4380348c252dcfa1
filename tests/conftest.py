"""Shared test set-up. Under CI (CI=true), a test skipped because PyTorch is missing fails the
run: the parity tests with torch are part of the README's test command (torch is in the dev
extra), and must never vanish silently from the count."""

import os

_torch_skips = []


def _skipped_for_torch(report):
    if not report.skipped:
        return False
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return "torch" in reason and ("could not import" in reason or "No module named" in reason)


def pytest_collectreport(report):
    if _skipped_for_torch(report):
        _torch_skips.append(report.nodeid)


def pytest_runtest_logreport(report):
    if _skipped_for_torch(report):
        _torch_skips.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if _torch_skips and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        session.exitstatus = 1
        shown = ", ".join(_torch_skips[:5]) + (" ..." if len(_torch_skips) > 5 else "")
        print(f"\nCI: {len(_torch_skips)} test(s) skipped because torch is missing ({shown}); "
              "install the dev extra (pip install -e \".[dev]\"), which brings torch==2.13.0")
