"""What a newcomer hit on the command line, each tried the way a user would (issue 12, item 7)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from warren_sim.cli import main

ROOT = Path(__file__).resolve().parents[1]
PY = [sys.executable, "-m", "warren_sim.cli"]


def helptext(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines; compare as one line


def test_readme_first_command_puts_warren_on_the_path_for_the_tour():
    """README's first command activates .venv, so the tour's bare `warren ...` lines work after it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)\n```", text, re.S).group(1)
    assert ". .venv/bin/activate && warren run bridge_repair --seed 3" in first
    tour = text[text.index("## A short tour"):]
    block = re.search(r"```sh\n(.*?)\n```", tour, re.S).group(1)
    assert all(line.startswith("warren ") for line in block.splitlines())


def test_help_texts_show_their_defaults(capsys):
    """--seed, --lease-ttl, --max-wait and --data-dir say their defaults; serve describes the WS binding too."""
    assert "--seed SEED the run's seed: same seed, same run (default: 0)" in helptext(capsys, "run")
    serve = helptext(capsys, "serve")
    for piece in ("--lease-ttl LEASE_TTL lease TTL in (clock) seconds (default: 300.0)",
                  "(seconds) (default: 60.0)", "--data-dir DATA_DIR where run journals are written (default: "
                  "warren-data)", "WS /v1/agent (JSON-RPC 2.0", "--port PORT port (0 picks a free one) (default: 8000)"):
        assert piece in serve, piece
    agent = helptext(capsys, "agent")
    assert "--create SCENARIO" in agent and "--seed SEED the seed of the run --create makes (default: 0)" in agent
    assert "(default: False)" not in serve + agent and "(default: None)" not in serve + agent
    top = helptext(capsys)
    for command in ("run", "eval", "scenarios", "serve", "agent", "demo", "replay", "conformance", "bench"):
        assert f" {command} " in top, command


def test_bench_help_has_no_leftover_text():
    """`warren bench --help` describes the benchmarks without docstring markup or dangling references."""
    out = subprocess.run([*PY, "bench", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert text.startswith("usage: warren bench")
    assert "``" not in text and "order above" not in text
    assert "engine, protocol, scale, warp, ws, rl, sweeps, fork, all of them in that order when no NAME is given" in text


def test_agent_can_create_its_run_and_ends_with_the_reason(served):
    """`warren agent URL --create bridge_repair --seed 3 --agent engineer-1` creates, drives, and says why it ended."""
    result = subprocess.run([*PY, "agent", served, "--create", "bridge_repair", "--seed", "3", "--agent",
                             "engineer-1", "--wait", "5"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    created = re.search(r"^created (run-\d+): bridge_repair seed 3; engineer-1 is remote", result.stdout, re.M)
    assert created, result.stdout
    assert result.stdout.rstrip().splitlines()[-1] == f"{created.group(1)} ended: completed (every objective is met)"


def test_agent_needs_a_run_or_create(capsys):
    """Neither --run nor --create (or both): a usage error saying the two ways, exit 2."""
    assert main(["agent", "http://127.0.0.1:9", "--agent", "engineer-1"]) == 2
    assert "name the run to join with --run RUN, or create one with --create SCENARIO" in capsys.readouterr().err
    assert main(["agent", "http://127.0.0.1:9", "--agent", "a", "--run", "run-1", "--create", "relay"]) == 2
    assert "exclude each other" in capsys.readouterr().err


def test_serve_says_where_journals_go_and_logs_each_run_lifecycle_change_not_requests(tmp_path):
    """`warren serve`: the journals' directory on start; created/started/ended lines per run; none per request."""
    data = tmp_path / "data"
    with open(tmp_path / "stderr.txt", "w+", encoding="utf-8") as err:
        proc = subprocess.Popen([*PY, "serve", "--port", "0", "--data-dir", str(data)], stdout=subprocess.PIPE,
                                stderr=err, text=True)
        try:
            assert proc.stdout is not None
            listening = proc.stdout.readline()
            assert listening.startswith("WARREN listening on http://127.0.0.1:"), listening
            assert proc.stdout.readline().strip() == f"WARREN journals go to {data.resolve()}/run-N.jsonl (--data-dir)"
            url = listening.split()[-1]
            with httpx.Client(base_url=url, timeout=30) as h:
                done = h.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3}, json={}).json()["run_id"]
                waiting = h.post("/v1/runs", params={"scenario": "relay", "seed": 1},
                                 json={"controlled_agents": ["courier-1"]}).json()["run_id"]
                for _ in range(200):  # bounded: the NPC-only run ends in well under a second
                    if h.get(f"/v1/runs/{done}").json()["status"] == "completed":
                        break
                for _ in range(20):
                    h.get("/v1/runs")
                assert h.delete(f"/v1/runs/{waiting}").status_code == 200
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
            assert proc.stdout is not None
            proc.stdout.close()
        err.seek(0)
        lines = [line for line in err.read().splitlines() if line.startswith("WARREN: run-")]
    assert lines[:2] == [f"WARREN: {done} created: bridge_repair seed 3, controlled none, npc_policy solution",
                         f"WARREN: {done} started"]
    assert f"WARREN: {done} ended: completed (every objective is met)" in lines
    assert f"WARREN: {waiting} created: relay seed 1, controlled courier-1, npc_policy solution" in lines
    assert f"WARREN: {waiting} started" not in lines  # never claimed: it never started
    assert any(line.startswith(f"WARREN: {waiting} ended: cancelled") for line in lines)
    assert len(lines) == 5, lines  # nothing for the 20 GETs or the polls


def test_agent_with_a_bad_policy_is_a_usage_error_before_claiming(served, tmp_path):
    """`warren agent --policy nope`: exit 2 saying what --policy takes, and the agent was never claimed."""
    with httpx.Client(base_url=served, timeout=10) as http:
        run = http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                        json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
        result = subprocess.run([*PY, "agent", served, "--run", run, "--agent", "engineer-1", "--policy", "nope"],
                                cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert "expected 'solution', 'random', 'none', 'llm' or 'module:factory'" in result.stderr
        assert http.post(f"/v1/runs/{run}/agents/engineer-1/claim").status_code == 200  # nobody holds it
        assert http.delete(f"/v1/runs/{run}").status_code == 200
