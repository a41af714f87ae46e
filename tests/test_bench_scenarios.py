"""The bench's own scenarios (bench/scenarios): what `python -m bench` measures on them is what they claim.

``echo`` stands for OpenEnv's echo environment in bench ws/protocol: every agent in every batch, `steps`
batches a run. ``warren_trips`` is warren's forager making `seeds` trips, for the long one-agent episodes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _trace(tmp_path: Path, scenario: str, *params: str, status: int = 0) -> list[dict]:
    out = tmp_path / f"{scenario}.jsonl"
    argv = [sys.executable, "-m", "warren_sim.cli", "run", "--scenarios", str(REPO / "bench" / "scenarios"),
            scenario, "--quiet", "--trace", str(out)]
    for p in params:
        argv += ["--param", p]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == status, done.stderr + done.stdout
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_echo_wakes_every_agent_in_every_batch_for_steps_ticks(tmp_path):
    # nobody rings the bell: the run ends at its time limit, as failed (warren run exits 1)
    records = _trace(tmp_path, "echo", "agents=16", "steps=5", status=1)
    batches = [r for r in records if r["kind"] == "batch"]
    assert len(batches) == 5
    assert all(len(b["order"]) == 16 for b in batches)
    kinds = Counter(r["kind"] for r in records)
    assert kinds["command"] == kinds["outcome"] == 16 * 5
    outcomes = {r["outcome"] for r in records if r["kind"] == "outcome"}
    assert outcomes == {"accepted"}
    assert records[-1]["kind"] == "end" and records[-1]["t"] == 5000


@pytest.mark.parametrize("seeds", [1, 3])
def test_warren_trips_stores_every_seed(tmp_path, seeds):
    records = _trace(tmp_path, "warren_trips", "agents=4", f"seeds={seeds}")
    end = records[-1]
    assert end["kind"] == "end"
    assert end["status"] == "completed", end
