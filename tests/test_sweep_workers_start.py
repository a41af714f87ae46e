"""A sweep whose worker processes cannot start fails loudly with the fix (issue 33, item 2).

The classic case is docs/evaluation.md's notebook example saved as a script without the ``__main__`` guard:
every forkserver worker re-runs the script, which starts a sweep inside the worker's bootstrapping, and the
worker dies. That used to print hundreds of tracebacks, report every seed as an ``error`` row with a 0.0 score,
and exit 0.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SWEEP = """from warren_sim.evaluation import evaluate

{indent}report = evaluate("contention", range(4), jobs=2)
{indent}print("rows", [r["completion_rate"] for r in report["results"]])
"""


def _script(tmp_path: Path, guarded: bool) -> subprocess.CompletedProcess[str]:
    body = SWEEP.format(indent="    " if guarded else "")
    if guarded:
        body = body.replace("\n    report", '\nif __name__ == "__main__":\n    report', 1)
    (tmp_path / "nb.py").write_text(body, encoding="utf-8")
    return subprocess.run([sys.executable, "nb.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_a_script_without_the_main_guard_fails_with_the_guard_in_the_message(tmp_path: Path) -> None:
    result = _script(tmp_path, guarded=False)
    assert result.returncode != 0, result.stdout
    assert "rows" not in result.stdout  # no report of zeros
    assert "worker processes could not start, so no seed ran" in result.stderr
    assert 'if __name__ == "__main__":' in result.stderr and "jobs=1" in result.stderr
    assert result.stderr.count("Traceback") <= 4, result.stderr  # not one per seed


def test_the_same_sweep_with_the_guard_runs_every_seed(tmp_path: Path) -> None:
    result = _script(tmp_path, guarded=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "rows [1.0]"
