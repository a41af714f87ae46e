"""The benchmarks still run: ``python -m bench --quick`` (README.md's ``warren bench --quick``) exits 0 and writes every JSON file.

No timing is asserted (the machine is shared and noisy; bench/RESULTS.md records the figures). Servers and
load generators are real processes on 127.0.0.1, and sweeps starts a local Ray (10-17 s here), so all of them take
one to two minutes: they run in the default
``pytest`` run (marked slow), and ``-m 'not bench'`` leaves them out; the fast tier runs the engine benchmark only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tiers import sizes

from warren_sim.runtime.clock import wall_seconds

REPO = Path(__file__).resolve().parents[1]
NAMES = ("engine", "protocol", "scale", "warp", "ws", "rl", "sweeps", "fork")

pytestmark = pytest.mark.bench


@sizes(quick=("engine",), ci=NAMES, argname="names")
def test_quick_benchmarks_run_and_write_their_json(tmp_path, names):
    """Every sub-benchmark runs in quick mode and writes <out>/<name>.json with its targets."""
    t0 = wall_seconds()
    done = subprocess.run([sys.executable, "-m", "bench", *names, "--quick", "--out", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    for name in names:
        data = json.loads((tmp_path / f"{name}.json").read_text())
        assert data["name"] == name and data["quick"] is True
        assert data["targets"] and all(isinstance(t["met"], bool) for t in data["targets"])
    print(f"python -m bench --quick: {wall_seconds() - t0:.1f} s")
