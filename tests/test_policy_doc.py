"""The policy protocol as docs/llm.md writes it down: its 15-line example runs as ``--policy module:factory``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_documented_example_policy_runs_headless(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "llm.md").read_text(encoding="utf-8")
    intro = doc.index("A complete policy in 15 lines")
    code = re.search(r"```python\n(.*?)```", doc[intro:], re.S)
    assert code is not None
    source = code.group(1)
    assert len([line for line in source.splitlines() if line.strip()]) <= 15
    (tmp_path / "my_agent.py").write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "warren_sim.cli", "run", "bridge_repair", "--seed", "3", "--policy",
                           "my_agent:make"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode in (0, 1), proc.stderr  # completed or failed: it ran to its end
    assert "bridge_repair seed 3:" in proc.stdout and "Traceback" not in proc.stderr
    assert re.search(r"[1-9][0-9]* decisions", proc.stdout)
