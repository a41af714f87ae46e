"""`warren agent` whose command meets the run's end: it says how the run ended, not "410 Gone".

A run can end while its agent is deciding (the others met the objective, its time ran out, someone cancelled
it, or, under an ``expire`` fault, the claim again after the 403 finds it ended). The submit then gets a 410,
which the SDK raises as ``RunEnded``; `warren agent` used to print it as an error ("warren agent: 410 Gone
(POST .../claim)") and exit 1 even when the run had completed. The fault matrix found it
(tests/test_faults_matrix.py, ``expire=0.15``): now the agent ends as its run did.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx

from warren_sim.runtime.faults import FaultPlan, parse_faults

POLICY = '''
import os
import threading

import httpx


class CancelsItsRunSoon:
    """On its first observation, has the run cancelled 0.3 s later (as an operator would), and answers at once."""

    started = False

    def decide(self, obs):
        if self.started:
            return {"noop": True}
        self.started = True

        def cancel():
            httpx.delete(os.environ["RUN_URL"], headers={"X-Warren-Protocol": "warren-agent/0"}, timeout=10)

        threading.Timer(0.3, cancel).start()
        return {"noop": True}


def factory(agent_id, role, briefing):
    return CancelsItsRunSoon()
'''


def _seed_for(run_id: str) -> int:
    """A fault seed under which, in ``run_id``, engineer-1's claim, briefing and first polls meet no fault, its
    first submit meets ``expire`` and the claim again after it ``unavailable`` (the draws are a pure function of
    the seed, the run and the request: faults.py)."""
    for seed in range(100_000):
        plan = FaultPlan(parse_faults(SPEC), seed, run_id)
        quiet = [plan.decide("engineer-1", "claim"), plan.decide("engineer-1", "briefing"),
                 *(plan.decide("engineer-1", "poll") for _ in range(5))]
        submit, again = plan.decide("engineer-1", "submit"), plan.decide("engineer-1", "claim")
        if quiet == [None] * 7 and submit is not None and submit.fault == "expire" and again is not None \
                and again.fault == "unavailable":
            return seed
    raise AssertionError("no seed found")


SPEC = "expire=0.5,unavailable=0.5"


def test_a_command_whose_claim_again_meets_the_runs_end_ends_the_agent_as_the_run_did(
        served: str, tmp_path: Path) -> None:
    """The answer meets an ``expire`` (403); the SDK's claim again meets ``unavailable`` (503, one second to
    wait), during which the run is cancelled; the claim after it meets the ended run (410). The agent reports
    the run's end, not an error. Over HTTP, whose requests the seed is chosen for (over the WebSocket the
    envelopes are pushed, so the indices differ; its agent ends through the same ``except RunEnded``, and the
    fault matrix drives it through ``expire``)."""
    (tmp_path / "cancelling.py").write_text(textwrap.dedent(POLICY), encoding="utf-8")
    with httpx.Client(base_url=served, timeout=10) as http:
        probe = http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3}, json={}).json()["run_id"]
        following = f"run-{int(probe.rsplit('-', 1)[1]) + 1}"
        faults = {"spec": SPEC, "seed": _seed_for(following)}
        run = http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                        json={"controlled_agents": ["engineer-1"], "faults": faults}).json()["run_id"]
    assert run == following
    done = subprocess.run([sys.executable, "-m", "warren_sim.cli", "agent", served, "--run", run, "--agent",
                           "engineer-1", "--policy", "cancelling:factory"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RUN_URL": f"{served}/v1/runs/{run}"})
    assert "410" not in done.stderr and "Gone" not in done.stderr, done.stderr
    assert f"{run} ended: cancelled" in done.stdout and "faults met: " in done.stdout \
        and "expire 1" in done.stdout, done.stdout[-2000:]
    assert done.returncode == 1  # a run that did not complete, as `warren agent` reports any such run
