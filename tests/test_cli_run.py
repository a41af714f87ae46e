"""The ``warren`` command line for headless runs and the scenario list, run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The console script users run, installed next to this interpreter (``pip install -e .``).
WARREN = Path(sys.executable).parent / "warren"


def warren(*args: str, module: bool = False) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "warren_sim.cli"] if module or not WARREN.exists() else [str(WARREN)]
    return subprocess.run([*argv, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_run_completes_and_prints_a_summary() -> None:
    """``warren run bridge_repair --seed 3`` exits 0 and prints the status and each objective."""
    proc = warren("run", "bridge_repair", "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    assert "bridge_repair seed 3: completed (every objective is met)" in proc.stdout
    assert "objective repair" in proc.stdout and "objective resupply" in proc.stdout
    assert "decisions" in proc.stdout


def test_run_of_an_unknown_scenario_is_a_usage_error() -> None:
    """An unknown scenario exits 2 with a message naming it and the known scenarios, no traceback."""
    proc = warren("run", "atlantis")
    assert proc.returncode == 2
    assert "unknown scenario 'atlantis'" in proc.stderr
    assert "known scenarios:" in proc.stderr and "bridge_repair" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_scenarios_lists_bridge_repair_with_its_premise() -> None:
    """``warren scenarios`` shows each scenario with its premise and agents."""
    proc = warren("scenarios")
    assert proc.returncode == 0, proc.stderr
    assert "bridge_repair — Repair the storm-damaged bridge and resupply the clinic." in proc.stdout
    assert "engineer-1 (engineer)" in proc.stdout


def test_run_of_an_unknown_scenario_via_python_dash_m_is_a_usage_error() -> None:
    """``python -m warren_sim.cli run atlantis`` behaves like the console script: exit 2, no traceback."""
    proc = warren("run", "atlantis", module=True)
    assert (proc.returncode, "Traceback" in proc.stderr) == (2, False)
