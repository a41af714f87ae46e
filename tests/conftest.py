"""Fixtures shared across test files."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings
from tiers import full

WARREN = [sys.executable, "-m", "warren_sim.cli"]

# Hypothesis sizes (tests/tiers.py): @given tests run Hypothesis's default 100 examples; WARREN_FULL_TESTS=1
# selects "full" (1,000). HYPOTHESIS_PROFILE=<name> picks one explicitly.
settings.register_profile("full", max_examples=1_000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("full" if full() else "default"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A `warren serve --port 0` subprocess (real clock, loopback); yields the URL it prints."""
    data = tmp_path_factory.mktemp("served")
    proc = subprocess.Popen([*WARREN, "serve", "--port", "0", "--data-dir", str(data)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("WARREN listening on http://"), line
        yield line.split()[-1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - only if shutdown hangs
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything imported so far is kept for the whole session: move it out of the cycle collector's sight.

    Collection imports the app, trio, Quart, Hypothesis and the rest (hundreds of thousands of objects); every
    full collection after it walked them all again: the automatic ones during the tests and the forced ones
    of pytest's unraisable-exception check at the end (two gc.collect() passes, ~110 ms of the warped expiry
    suite). Objects made by the tests themselves are collected as before.
    """
    gc.freeze()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """tests/test_docs_examples.py's count: how many documentation blocks ran, and why the others did not."""
    totals: dict[str, int] = {}
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        if getattr(report, "when", "call") != "call":
            continue
        for key, value in getattr(report, "user_properties", []):
            if key == "docs_blocks":
                for what, n in json.loads(value)["counts"].items():
                    totals[what] = totals.get(what, 0) + n
    if totals:
        terminalreporter.section("documentation examples (README.md, docs/*.md)")
        for what, n in sorted(totals.items()):
            terminalreporter.write_line(f"{n:4d}  {what}")
