"""Schemathesis against the served GET /v1/openapi.json on a real `warren serve`: no 5xx, every response fits."""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from reliability_helpers import Served
from tiers import sizes

pytest.importorskip("schemathesis")

CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
          "response_schema_conformance")
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def _schemathesis(s: Served, tmp_path: Path, name: str, config: str, size: Size, *extra: str) -> tuple[int, str]:
    """One `schemathesis run` over every phase; (requests made, its output). Fails the test on any failure."""
    (tmp_path / f"{name}.toml").write_text(config)
    reports = tmp_path / f"reports-{name}"
    argv = [str(SCHEMATHESIS), "--config-file", str(tmp_path / f"{name}.toml"), "run", f"{s.url}/v1/openapi.json",
            "--checks", CHECKS, "--max-examples", str(size.examples), "--phases", size.phases, "--workers", "1", "--seed", "9",
            "--generation-database", "none", "--no-color", "--report", "ndjson", "--report-dir", str(reports),
            *extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    output = done.stdout + done.stderr
    counts = re.search(r"(\d+) generated, (\d+) passed", output)
    assert done.returncode == 0 and counts and counts.group(1) == counts.group(2), output[-6000:]
    requests, statuses = 0, collections.Counter()
    for path in reports.glob("*.ndjson"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            finished = event.get("ScenarioFinished")
            if finished:
                interactions = finished["recorder"].get("interactions") or {}
                requests += len(interactions)
                for i in interactions.values():
                    statuses[(i.get("response") or {}).get("status_code")] += 1
    print(f"\n{name}: {requests} requests, statuses {dict(sorted(statuses.items(), key=str))}")
    return requests, output


TOP = "request-timeout = 5.0\n"
STREAMS = """
[[operations]]              # an SSE stream of a live run never ends by itself: read a little of it
include-operation-id = "streamEvents"
request-timeout = 0.5
max-stream-events = 10
"""


class Size(NamedTuple):
    examples: int  # per operation and phase
    phases: str
    min_requests: int  # per pass: proof that the pass reached the API at all
    unknown_ids_pass: bool = True  # pass 1 below; the fast tier runs only the deeper pass 2


ALL_PHASES = "examples,coverage,fuzzing,stateful"


# The fast tier: one pass, the fuzzing phase only (the coverage phase's ~470 fixed requests and each
# schemathesis start-up are most of the time).
@sizes(quick=Size(3, "fuzzing", 30, unknown_ids_pass=False), ci=Size(20, ALL_PHASES, 300),
       soak=Size(50, ALL_PHASES, 300))
def test_schemathesis_finds_no_server_error_and_no_response_outside_the_document(tmp_path, size):
    """Two passes (unknown ids everywhere; then a live run, agent and lease): 0 failures; the request count printed.

    All phases at 20 examples per operation (50 with WARREN_FULL_TESTS=1); fast tier: pass 2, fuzzing, 3 examples.
    """
    with Served(tmp_path, "--max-wait", "0.2") as s:
        # pass 1: the whole API with generated identifiers (mostly 404s, every body and query fuzzed)
        first = 0
        if size.unknown_ids_pass:
            first, out1 = _schemathesis(s, tmp_path, "anywhere", TOP + STREAMS, size)
        # pass 2: a real run, its controlled agent and a live lease, so the deep paths (verdicts, long-polls,
        # briefings, receipts) are reached; cancelRun and releaseAgent left out so the lease stays good
        run = s.http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                          json={"controlled_agents": ["engineer-1"], "decision_deadline_s": 3600}).json()["run_id"]
        lease = s.http.post(f"/v1/runs/{run}/agents/engineer-1/claim").json()["lease"]
        params = f'[parameters]\nrun_id = "{run}"\nagent_id = "engineer-1"\nlease = "{lease}"\n'
        config = TOP + params + STREAMS
        second, out2 = _schemathesis(s, tmp_path, "leased", config, size, "--exclude-operation-id", "cancelRun",
                                     "--exclude-operation-id", "releaseAgent")
        assert s.http.get("/v1/runs").status_code == 200  # still serving
        code, err = s.stop()
    assert code == 0 and "Traceback" not in err and "Error in ASGI" not in err, err[-3000:]
    print(f"\nschemathesis: {first} + {second} = {first + second} requests, 0 failures")
    assert (first > size.min_requests or not size.unknown_ids_pass) and second > size.min_requests
