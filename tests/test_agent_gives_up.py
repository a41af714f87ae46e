"""`warren agent` answers a noop at once when a policy's answers keep being rejected (issue 33, item 6).

After a ``rejected`` verdict the observation is still outstanding; a policy that hears receipts (the LLM
policy) is asked at most twice more. The turn then used to stay outstanding until its decision deadline
(60 s by default) expired it; now the agent sends the noop itself, so a served run never waits for a policy
that has given up.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx

POLICY = '''
class AlwaysWrong:
    """Takes an item that is not there on its first observation (rejected), noops after; hears receipts."""

    def __init__(self):
        self.receipts = []

    def decide(self, obs):
        if obs.seq == 0:
            return {"action": "take", "args": {"item": "no-such-item"}}
        return {"noop": True}

    def on_receipt(self, receipt):
        self.receipts.append(receipt.status)


def factory(agent_id, role, briefing):
    return AlwaysWrong()
'''


def test_rejected_three_times_then_a_noop_at_once(served: str, tmp_path: Path) -> None:
    (tmp_path / "wrongpolicy.py").write_text(textwrap.dedent(POLICY), encoding="utf-8")
    with httpx.Client(base_url=served, timeout=10) as http:
        run = http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                        json={"controlled_agents": ["engineer-1"], "decision_deadline_s": 600}).json()["run_id"]
    receipts = tmp_path / "receipts.jsonl"
    # The run's 600 s decision deadline would hold the subprocess far past this timeout if the turn waited.
    result = subprocess.run([sys.executable, "-m", "warren_sim.cli", "agent", served, "--run", run, "--agent",
                             "engineer-1", "--policy", "wrongpolicy:factory", "--receipts", str(receipts)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    first = [r for r in map(json.loads, receipts.read_text().splitlines())
             if r["observation_id"] == "engineer-1#0"]
    assert [r["status"] for r in first] == ["rejected", "rejected", "rejected", "accepted"], first
    assert ">>> noop (the policy's answers were rejected)  [accepted" in result.stdout
