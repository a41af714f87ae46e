"""THE KILL TEST (DESIGN section 11, issue 13): a served run played by remote agents on their solution policies
in separate processes (`warren agent`), the server SIGKILLed at random moments and restarted on the same data
directory each time; the run completes, its engine records are byte-identical to `warren run --trace` of the same
scenario and seed, and no agent's `accepted` receipt is missing from the final journal.

The reduced version (3 kills on bridge_repair) runs in the fast tier; the full one (>= 10 kills, bridge_repair
and a `warren` run of 50 agents) is `slow`.
"""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from durability_helpers import Restartable, engine_records, headless_trace, read_jsonl, start_agent


def _status_of(journal: Path) -> str:
    from warren_sim.runtime.restore import summary_of

    return summary_of(journal)[0] if journal.exists() else "created"


def play_with_kills(tmp_path: Path, scenario: str, seed: int, params: dict[str, Any], controlled: list[str],
                    kills: int, pace: float, gap: tuple[float, float], rng_seed: int) -> None:
    rng = random.Random(rng_seed)
    data = tmp_path / "data"
    receipts = {a: tmp_path / f"receipts-{a}.jsonl" for a in controlled}
    agents: list[subprocess.Popen[bytes]] = []
    with Restartable(data) as server:
        with server.http() as h:
            r = h.post("/v1/runs", params={"scenario": scenario, "seed": seed},
                       json={"controlled_agents": controlled, "pace": pace, "decision_deadline_s": 600,
                             "params": params})
            assert r.status_code == 201, r.text
            run_id = r.json()["run_id"]
        journal = data / f"{run_id}.jsonl"
        try:
            for a in controlled:
                agents.append(start_agent(server.url, run_id, a, receipts[a], tmp_path / f"agent-{a}.log"))
            done = 0
            while done < kills:
                time.sleep(rng.uniform(*gap))
                assert _status_of(journal) in ("created", "running"), (
                    f"the run ended after {done} kills; the test wants {kills} while it runs (lower its pace)")
                server.kill()
                done += 1
                server.start()
            for p in agents:
                p.wait(timeout=300)
        finally:
            for p in agents:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        with server.http() as h:
            view = h.get(f"/v1/runs/{run_id}").json()
        logs = {a: (tmp_path / f"agent-{a}.log").read_text(errors="replace")[-2000:] for a in controlled}
        assert view["status"] == "completed", (view, logs, server.stderr()[-3000:])
        assert all(p.returncode == 0 for p in agents), logs
        assert server.starts == kills + 1
    records = read_jsonl(journal)
    restarts = [r for r in records if r["kind"] == "restart"]
    assert len(restarts) == kills  # every kill was resumed from the journal, none started over
    # the engine records are those of the headless run of the same scenario and seed, byte for byte
    served = engine_records(records, "source", "run_id")
    headless = engine_records(headless_trace(tmp_path, scenario, seed, params), "source", "run_id")
    assert served == headless
    # no acknowledged command was lost: every accepted receipt an agent got has its verdict in the journal
    journaled = {(r["agent"], r["command_id"]) for r in records if r["kind"] == "verdict" and r["status"] == "accepted"}
    told = [(a, x["command_id"]) for a in controlled for x in read_jsonl(receipts[a]) if x["status"] == "accepted"]
    assert told and not [t for t in told if t not in journaled]
    # and each of those commands reached adjudication exactly once
    commands = [r for r in records if r["kind"] == "command" and r.get("source") == "remote"]
    assert len({r["observation_id"] for r in commands}) == len(commands)


# 15-35 s of wall time, in the fast tier all the same: the suite runs on every core, and a restart that loses
# work must show up in the edit-test loop
def test_kill_reduced_bridge_repair(tmp_path: Path) -> None:
    """Three SIGKILLs at random moments of a served bridge_repair run, three remote agents in their own processes."""
    play_with_kills(tmp_path, "bridge_repair", 3, {}, ["courier-1", "engineer-1", "medic-1"], kills=3, pace=4.0,
                    gap=(0.4, 1.2), rng_seed=13)


@pytest.mark.slow
def test_kill_full_bridge_repair(tmp_path: Path) -> None:
    """Twelve SIGKILLs at random moments of a served bridge_repair run."""
    play_with_kills(tmp_path, "bridge_repair", 5, {}, ["courier-1", "engineer-1", "medic-1"], kills=12, pace=1.0,
                    gap=(0.2, 1.5), rng_seed=1313)


@pytest.mark.slow
def test_kill_full_warren_50(tmp_path: Path) -> None:
    """Ten SIGKILLs of a served `warren` run of 50 agents, four of them remote (the rest NPCs in the server)."""
    play_with_kills(tmp_path, "warren", 2, {"agents": 50}, ["forager-01", "forager-02", "forager-03", "forager-04"],
                    kills=10, pace=2.0, gap=(0.2, 1.2), rng_seed=2626)
