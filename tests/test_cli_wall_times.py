"""What `warren run` and `warren eval` say about time and resumed work (issue 33, items 8, 9 and 10's prefix).

Run as users run them: subprocesses, output to pipes (so not a terminal: the setup line stays in the log).
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

PY = [sys.executable, "-m", "warren_sim.cli"]


def warren(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PY, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_run_says_it_is_setting_up_on_a_terminal_and_reports_setup_and_total_wall(tmp_path: Path) -> None:
    """On a terminal (stderr is a pty here) the setup line shows, then is erased; the summary has setup and
    total."""
    leader, follower = pty.openpty()
    try:
        done = subprocess.run([*PY, "run", "warren", "--param", "agents=300", "--seed", "1"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=follower, text=True, timeout=120)
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the other end is closed: all read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0
    text = shown.decode()
    assert text.startswith("warren run: setting up warren seed 1 (agents=300)...\r"), text
    wall = float(re.search(r"wall ([\d.]+)s", done.stdout).group(1))
    found = re.search(r"setup ([\d.]+)s \(loading the world, building its policies\), ([\d.]+)s in all", done.stdout)
    assert found, done.stdout
    setup, total = float(found.group(1)), float(found.group(2))
    assert abs(total - (setup + wall)) < 0.002 and setup > 0


def test_in_a_log_a_usage_error_stays_one_line(tmp_path: Path) -> None:
    done = warren("run", "bridge_repair", "--param", "agentz=1", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_quiet_run_has_no_setup_line(tmp_path: Path) -> None:
    done = warren("run", "bridge_repair", "--seed", "3", "--quiet", cwd=tmp_path)
    assert done.returncode == 0 and "setting up" not in done.stderr


def test_eval_labels_its_wall_sum_and_says_what_a_resume_reused(tmp_path: Path) -> None:
    first = warren("eval", "contention", "--seeds", "0-3", "--jobs", "1", "--out", "s.jsonl", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "wall-sum" in first.stdout.splitlines()[2] and "rows are in" not in first.stderr
    assert re.search(r"the sweep took [\d.]+s: 4 row\(s\) computed, 0 reused from s.jsonl; wall-sum adds up",
                     first.stdout), first.stdout
    again = warren("eval", "contention", "--seeds", "0-5", "--jobs", "1", "--out", "s.jsonl", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "warren eval: 4 of 6 rows are in s.jsonl already; computing the other 2" in again.stderr
    assert "2 row(s) computed, 4 reused from s.jsonl" in again.stdout


def test_the_llm_policy_error_names_its_prefix_once(tmp_path: Path) -> None:
    """Without the llm extra, `--policy llm` says what to install, prefixed once (not `--policy llm: --policy llm`)."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n\n\nclass NotInstalled:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('openai', 'jsonschema'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n\n\n"
        "sys.meta_path.insert(0, NotInstalled())\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    done = warren("run", "bridge_repair", "--policy", "llm", "--model", "m", "--quiet", cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("warren run: --policy llm needs the openai and jsonschema packages"), done.stderr
    assert "--policy llm: --policy llm" not in done.stderr and "pip install 'warren-sim[llm]'" in done.stderr
