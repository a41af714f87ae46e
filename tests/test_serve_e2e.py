"""End-to-end: `warren serve` as a real process on loopback, real clock or --rate (never autojump with sockets)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from warren_sim.conformance import Seen, response_problems
from warren_sim.protocol.schema_registry import validation_errors
from warren_sim.runtime.clock import wall_seconds

PROTO = {"X-Warren-Protocol": "warren-agent/0"}


def schema_check(response: httpx.Response) -> None:
    """Every response these tests receive fits its route's JSON Schema (the protocol's endpoint table)."""
    response.read()
    request = response.request
    seen = Seen(request.method, request.url.path, response.status_code, response.headers, response.content)
    problems = response_problems(seen, validation_errors)
    assert problems == [], f"{request.method} {request.url.path} -> {response.status_code}: {problems}"


class Served:
    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "warren_sim.cli", "serve", "--port", "0", "--data-dir", str(tmp_path / "data"),
             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("WARREN listening on http://127.0.0.1:"), line + self.proc.stderr.read()
        self.url = line.split()[-1]
        self.http = httpx.Client(base_url=self.url, headers=PROTO, timeout=30,
                                 event_hooks={"response": [schema_check]})

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode, err


@pytest.fixture
def server(tmp_path):
    s = Served(tmp_path)
    yield s
    s.stop()


def test_worked_example_over_real_http(server):
    """The seed's example over loopback HTTP against a real Hypercorn."""
    h = server.http
    r = h.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
               json={"controlled_agents": ["engineer-1"], "npc_policy": "solution", "pace": None})
    assert r.status_code == 201 and r.headers["X-Warren-Protocol"] == "warren-agent/0"
    run = r.json()["run_id"]
    lease = h.post(f"/v1/runs/{run}/agents/engineer-1/claim").json()["lease"]
    b = h.get(f"/v1/runs/{run}/agents/engineer-1/briefing", params={"lease": lease}).json()
    assert b["agent_id"] == "engineer-1" and b["content_hash"].startswith("sha256:")
    env = h.get(f"/v1/runs/{run}/agents/engineer-1/observations",
                params={"after": -1, "wait": 25, "lease": lease}).json()
    assert env["observation_id"] == "engineer-1#0" and env["reason"] == "start"
    body = {"command_id": "c-7d21", "observation_id": "engineer-1#0", "action": "take", "args": {"item": "toolbox-1"}}
    first = h.post(f"/v1/runs/{run}/agents/engineer-1/commands", params={"lease": lease}, json=body).json()
    assert first["status"] == "accepted" and first["outcome"] == "pending"
    again = h.post(f"/v1/runs/{run}/agents/engineer-1/commands", params={"lease": lease}, json=body).json()
    assert again["status"] == "duplicate"
    polled = h.get(f"/v1/runs/{run}/agents/engineer-1/commands/c-7d21", params={"lease": lease}).json()
    assert polled["status"] == "accepted" and polled["outcome"] in ("pending", "accepted")


def test_rate_10_makes_a_5s_deadline_pass_in_half_a_second(tmp_path):
    """`warren serve --rate 10`: a 5 s decision deadline expires after about 0.5 s of real time."""
    s = Served(tmp_path, "--rate", "10")
    try:
        h = s.http
        run = h.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                     json={"controlled_agents": ["engineer-1"], "decision_deadline_s": 5}).json()["run_id"]
        lease = h.post(f"/v1/runs/{run}/agents/engineer-1/claim").json()["lease"]
        env = h.get(f"/v1/runs/{run}/agents/engineer-1/observations",
                    params={"after": -1, "wait": 25, "lease": lease}).json()
        t0 = wall_seconds()
        while True:  # poll for the closing of engineer-1#0 in the journal
            journal = [json.loads(x) for x in h.get(f"/v1/runs/{run}/journal").text.splitlines()]
            if any(x["kind"] == "closed" and x["why"] == "expired" for x in journal):
                break
            assert wall_seconds() - t0 < 5, "the deadline did not pass"
        elapsed = wall_seconds() - t0
        assert 0.3 < elapsed < 1.5, elapsed
        late = h.post(f"/v1/runs/{run}/agents/engineer-1/commands", params={"lease": lease},
                      json={"command_id": "late", "observation_id": env["observation_id"], "noop": True}).json()
        assert late["status"] == "expired"
    finally:
        s.stop()


def test_sigterm_answers_long_polls_and_journals_runs(tmp_path):
    """SIGTERM: a waiting long-poll is answered (410, cancelled), the journal ends with the terminal status."""
    s = Served(tmp_path)
    h = s.http
    run = h.post("/v1/runs", params={"scenario": "bridge_repair"},
                 json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
    lease = h.post(f"/v1/runs/{run}/agents/engineer-1/claim").json()["lease"]
    h.get(f"/v1/runs/{run}/agents/engineer-1/observations", params={"after": -1, "wait": 5, "lease": lease})
    import threading

    answers = []

    def long_poll():
        with httpx.Client(base_url=s.url, headers=PROTO, timeout=30) as c:
            answers.append(c.get(f"/v1/runs/{run}/agents/engineer-1/observations",
                                 params={"after": 0, "wait": 50, "lease": lease}))

    t = threading.Thread(target=long_poll)
    t.start()
    import time as _t  # test-side pause only; the product never reads time outside its clock module

    _t.sleep(0.5)
    code, err = s.stop(signal.SIGTERM)
    t.join(10)
    assert code == 0, err
    assert answers and answers[0].status_code == 410 and "cancelled" in answers[0].json()["detail"]
    lines = [json.loads(x) for x in (tmp_path / "data" / f"{run}.jsonl").read_text().splitlines()]
    assert any(x["kind"] == "status" and x["status"] == "cancelled" for x in lines)
    assert "WARREN stopped" in err


def test_port_in_use_is_a_clear_error(server, tmp_path):
    """Binding a busy port exits 2 with one line saying the address is in use and what to do, no traceback."""
    port = server.url.rsplit(":", 1)[1]
    p = subprocess.run([sys.executable, "-m", "warren_sim.cli", "serve", "--port", port, "--data-dir",
                        str(tmp_path / "d2")], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == (f"warren serve: address 127.0.0.1:{port} is in use; pick another --port (0 picks a "
                                "free one) or stop the other server")
