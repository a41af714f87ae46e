"""`warren serve` as an operator runs it: `--log-format json` (every line of stdout and stderr one JSON object, a run's
lifecycle and a restart in them), `GET /metrics` scraped over loopback, `--no-metrics`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

PROTO = {"X-Warren-Protocol": "warren-agent/0"}


class JsonServe:
    """`warren serve --port 0 --log-format json`, its stdout's first line parsed for the URL."""

    def __init__(self, data: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "warren_sim.cli", "serve", "--port", "0", "--data-dir", str(data),
             "--log-format", "json", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        first = json.loads(line)
        assert first["event"] == "server.listening", first
        self.url = first["url"]
        self.stdout = [first]
        self.http = httpx.Client(base_url=self.url, headers=PROTO, timeout=30)

    def stop(self, sig: int = signal.SIGTERM) -> list[dict[str, Any]]:
        """Stop it; every line it wrote on both streams, each parsed as JSON (a line that is not JSON fails)."""
        self.http.close()
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=20)
        lines = self.stdout + [json.loads(x) for x in out.splitlines() if x.strip()]
        lines += [json.loads(x) for x in err.splitlines() if x.strip()]
        for record in lines:
            assert {"ts", "level", "logger", "event", "message"} <= set(record), record
        return lines


def events(lines: list[dict[str, Any]], run_id: str) -> list[str]:
    return [x["event"] for x in lines if x.get("run_id") == run_id]


def test_json_logs_carry_a_runs_lifecycle_and_a_restart(tmp_path):
    """`warren serve --log-format json`: startup, a run created, started and ended (completed), a live run resumed
    after a SIGKILL and cancelled by the SIGTERM; every line of both streams parses."""
    data = tmp_path / "data"
    s = JsonServe(data)
    done = s.http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                       json={"controlled_agents": [], "npc_policy": "solution"}).json()["run_id"]
    live = s.http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                       json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
    lease = s.http.post(f"/v1/runs/{live}/agents/engineer-1/claim").json()["lease"]
    assert s.http.get(f"/v1/runs/{live}/agents/engineer-1/observations",
                      params={"after": -1, "wait": 10, "lease": lease}).status_code == 200
    for _ in range(400):  # a loaded machine: up to about 20 s for the headless run to finish
        if s.http.get(f"/v1/runs/{done}").json()["status"] == "completed":
            break
        time.sleep(0.05)  # test-side pause only; the product never reads time outside its clock module
    first = s.stop(signal.SIGKILL)  # no goodbye: the live run is resumed by the next server
    assert [x["event"] for x in first[:2]] == ["server.listening", "server.journals"]
    assert events(first, done) == ["run.created", "run.started", "run.ended"]
    ended = next(x for x in first if x["event"] == "run.ended" and x["run_id"] == done)
    assert ended["status"] == "completed" and ended["level"] == "info"
    created = next(x for x in first if x["event"] == "run.created" and x["run_id"] == live)
    assert created["scenario"] == "bridge_repair" and created["seed"] == 3 and created["controlled_agents"] == 1

    again = JsonServe(data)
    assert again.http.get(f"/v1/runs/{live}").json()["status"] == "running"
    second = again.stop(signal.SIGTERM)
    assert events(second, live) == ["run.resumed", "run.ended"]
    assert next(x for x in second if x["event"] == "run.ended")["status"] == "cancelled"
    evs = [x["event"] for x in second]
    assert "server.shutting_down" in evs and evs[-1] == "server.stopped"


def test_metrics_scraped_over_loopback_and_no_metrics_turns_them_off(tmp_path):
    """`warren serve`: GET /metrics parses as Prometheus text and counts the run it serves; `--no-metrics`: 404."""
    s = JsonServe(tmp_path / "on")
    try:
        run = s.http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                          json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
        s.http.post(f"/v1/runs/{run}/agents/engineer-1/claim")
        r = s.http.get("/metrics")
        assert r.status_code == 200
        families = {f.name: f for f in text_string_to_metric_families(r.text)}
        running = [x.value for x in families["warren_runs"].samples if x.labels["status"] == "running"]
        leases = [x.value for x in families["warren_leases"].samples]
        assert running == [1.0] and leases == [1.0]
        assert "process_resident_memory_bytes" in r.text  # the process's own, for a server left running for days
    finally:
        s.stop()
    off = JsonServe(tmp_path / "off", "--no-metrics")
    try:
        assert off.http.get("/metrics").status_code == 404
    finally:
        lines = off.stop()
    assert lines[0]["metrics"] is False


def test_json_logs_carry_the_faults_a_run_injects(tmp_path):
    """`warren serve --log-format json --faults ...`: each injected fault is a `fault` line, with what the journal's
    fault record says (the fault, the agent, the request and its index) and the run."""
    s = JsonServe(tmp_path / "data", "--faults", "unavailable=1", "--fault-seed", "7")
    run = s.http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                      json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
    met = s.http.post(f"/v1/runs/{run}/agents/engineer-1/claim")
    assert met.status_code == 503 and met.headers["Retry-After"], met.text
    lines = s.stop()
    faults = [x for x in lines if x["event"] == "fault"]
    assert faults and faults[0]["run_id"] == run, lines
    assert {k: faults[0][k] for k in ("fault", "agent_id", "request", "index")} == \
        {"fault": "unavailable", "agent_id": "engineer-1", "request": "claim", "index": 0}
    assert faults[0]["message"] == f"fault unavailable: engineer-1's claim #0 in {run}"
