"""Fixtures shared across test files."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

WARREN = [sys.executable, "-m", "warren_sim.cli"]


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
