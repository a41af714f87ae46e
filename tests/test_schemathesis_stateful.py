"""Schemathesis's stateful phase against a real `warren serve`, with nothing given but the document: the OpenAPI links
(from the scenario list to a run's creation, from a run to its operations, from a claim to the agent's leased ones)
carry it past the 404s of made-up ids into real runs. 0 failures; runs created, read and an agent claimed (2xx)."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest
from reliability_helpers import Served
from test_schemathesis_e2e import STREAMS, TOP, Size, _schemathesis
from tiers import sizes

pytest.importorskip("schemathesis")

# Stateful only, scenarios of up to 12 steps, only the document's own links (not schemathesis's inferred ones)
STATEFUL = TOP + "[phases.stateful]\nmax-steps = 12\n[phases.stateful.inference]\nalgorithms = []\n" + STREAMS
REACHED = {("POST", "/v1/runs", 201), ("GET", "/v1/runs/R", 200), ("POST", "/v1/runs/R/agents/A/claim", 200)}
# at least one of the leased operations, with the claim's lease
LEASED = {("POST", "/v1/runs/R/agents/A/commands", 200), ("GET", "/v1/runs/R/agents/A/observations", 200),
          ("GET", "/v1/runs/R/agents/A/observations", 204), ("GET", "/v1/runs/R/agents/A/briefing", 200),
          ("POST", "/v1/runs/R/agents/A/release", 200)}


def reached(reports: Path) -> collections.Counter[tuple[str, str, int]]:
    """(method, path with ids replaced, status) of every request the reports recorded."""
    seen: collections.Counter[tuple[str, str, int]] = collections.Counter()
    for path in reports.glob("*.ndjson"):
        for line in path.read_text().splitlines():
            finished = json.loads(line).get("ScenarioFinished")
            for i in ((finished or {}).get("recorder", {}).get("interactions") or {}).values():
                where = re.sub(r"^https?://[^/]+", "", i["request"]["uri"].split("?")[0])
                where = re.sub(r"/commands/[^/]+", "/commands/C", re.sub(r"/agents/[^/]+", "/agents/A",
                                                                         re.sub(r"/v1/runs/[^/]+", "/v1/runs/R", where)))
                seen[(i["request"]["method"], where, (i.get("response") or {}).get("status_code"))] += 1
    return seen


@sizes(quick=Size(10, "stateful", 30), ci=Size(25, "stateful", 100))
def test_stateful_phase_follows_the_links_into_real_runs(tmp_path, size):
    """`schemathesis run URL/v1/openapi.json --phases stateful`: 0 failures; runs are created from the scenario list,
    read and claimed (what the claim's links lead to is printed: reached in some passes, not all)."""
    with Served(tmp_path, "--max-wait", "0.2") as s:
        # the schema-valid request schemathesis found refused: params is JSON now (content: application/json)
        assert s.http.get("/v1/scenarios/warren", params={"params": '{"agents": 20}'}).status_code == 200
        requests, _ = _schemathesis(s, tmp_path, "stateful", STATEFUL, size)
        code, err = s.stop()
    assert code == 0 and "Traceback" not in err, err[-3000:]
    seen = reached(tmp_path / "reports-stateful")
    statuses = set(seen)
    assert requests > size.min_requests
    assert REACHED <= statuses, sorted(seen.items(), key=str)
    # the leased operations after a claim (LEASED) are reached in some passes of this wide walk, not in every one
    print(f"leased operations reached: {sorted(LEASED & statuses)}")


# The agent's path only: from the scenario list through a run's creation and a claim to the leased operations
AGENT_PATH = ("listScenarios", "createRun", "claimAgent", "getBriefing", "pollObservation", "submitCommand",
              "releaseAgent", "getReceipt")


@sizes(quick=Size(10, "stateful", 30), ci=Size(25, "stateful", 100))
def test_stateful_phase_follows_a_claim_to_the_leased_operations(tmp_path, size):
    """The same phase over the agent's operations only: 0 failures, and the claim's links (its lease) lead to the
    agent's leased operations answering 2xx (a briefing, a poll, a command or a release with a real lease)."""
    only = [arg for op in AGENT_PATH for arg in ("--include-operation-id", op)]
    with Served(tmp_path, "--max-wait", "0.2") as s:
        _schemathesis(s, tmp_path, "stateful", STATEFUL, size, *only)
        code, err = s.stop()
    assert code == 0 and "Traceback" not in err, err[-3000:]
    seen = set(reached(tmp_path / "reports-stateful"))
    assert ("POST", "/v1/runs/R/agents/A/claim", 200) in seen, sorted(seen)
    assert len(LEASED & seen) >= 2, sorted(seen)  # (all four in the runs measured, seed 9)
    print(f"leased operations reached: {sorted(LEASED & seen)}")
