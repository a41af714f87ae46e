"""A service that keeps its word (DESIGN section 11, issue 13), over a real `warren serve` process.

A restart loses no run: ended runs are listed and read from disk, live ones resume (same observation ids,
leases resumed from the digest sidecar, a `restart` record), `--no-resume` marks them crashed. Accepted means
written. Silent spectators lose their slot. Browsers of other sites are refused (403), bodies must be JSON (415).
"""

from __future__ import annotations

import json
import socket
import stat
import threading
import time
from pathlib import Path

import httpx
import pytest
from durability_helpers import Restartable, read_jsonl

from warren_sim.client import AgentClient, RetryPolicy

SCN: dict[str, str | int] = {"scenario": "bridge_repair", "seed": 3}
ENG = "/v1/runs/{run}/agents/engineer-1"


def _sse_records(h: httpx.Client, run: str) -> list[dict]:
    records = []
    with h.stream("GET", f"/v1/runs/{run}/events") as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                frame = json.loads(line[6:])
                records.append(frame)
                if frame["kind"] == "terminal":
                    break
    return records


def test_ended_runs_are_listed_and_read_from_disk_after_a_kill(tmp_path: Path) -> None:
    with Restartable(tmp_path / "data") as server:
        with server.http() as h:
            npc = h.post("/v1/runs", params=SCN, json={}).json()["run_id"]  # NPC-only: completes by itself
            run = h.post("/v1/runs", params=SCN, json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
            lease = h.post(ENG.format(run=run) + "/claim").json()["lease"]
            env = h.get(ENG.format(run=run) + "/observations", params={"lease": lease, "wait": 5}).json()
            r = h.post(ENG.format(run=run) + "/commands", params={"lease": lease},
                       json={"command_id": "c-1", "observation_id": env["observation_id"], "sleep_ms": 1000})
            assert r.json()["status"] == "accepted"
            h.delete(f"/v1/runs/{run}")
            for _ in range(100):
                if h.get(f"/v1/runs/{npc}").json()["status"] != "running":
                    break
                time.sleep(0.05)
            before = {v["run_id"]: v for v in h.get("/v1/runs").json()["runs"]}
            receipt_before = h.get(ENG.format(run=run) + "/commands/c-1", params={"lease": lease}).json()
            journals = {x: h.get(f"/v1/runs/{x}/journal").content for x in (npc, run)}
        assert before[npc]["status"] == "completed" and before[run]["status"] == "cancelled"
        server.kill()
        server.start()
        with server.http() as h:
            after = {v["run_id"]: v for v in h.get("/v1/runs").json()["runs"]}
            assert after == before  # every ended run listed, with the same view
            for x in (npc, run):
                assert h.get(f"/v1/runs/{x}").json() == before[x]
                assert h.get(f"/v1/runs/{x}/journal").content == journals[x]
                assert h.get(f"/v1/runs/{x}/journal").content == (server.data_dir / f"{x}.jsonl").read_bytes()
                frames = _sse_records(h, x)
                assert frames[-1] == {"kind": "terminal", "cursor": len(frames) - 2, "status": before[x]["status"]}
                assert [json.dumps(f, separators=(",", ":"), ensure_ascii=False) + "\n" for f in frames[:-1]] == \
                    journals[x].decode().splitlines(keepends=True)
            # receipts answer from disk with the lease issued before the kill (its digest was kept, not the token)
            assert h.get(ENG.format(run=run) + "/commands/c-1", params={"lease": lease}).json() == receipt_before
            assert h.get(ENG.format(run=run) + "/commands/c-1", params={"lease": "l-" + "x" * 32}).status_code == 403
            assert h.get("/v1/runs/run-99").status_code == 404


def test_a_live_run_resumes_after_a_kill_with_its_observation_and_lease(tmp_path: Path) -> None:
    with Restartable(tmp_path / "data") as server:
        with server.http() as h:
            run = h.post("/v1/runs", params=SCN, json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
            lease = h.post(ENG.format(run=run) + "/claim").json()["lease"]
            env = h.get(ENG.format(run=run) + "/observations", params={"lease": lease, "wait": 5}).json()
        sidecar = server.data_dir / f"{run}.leases.json"
        assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
        assert lease not in sidecar.read_text() and len(json.loads(sidecar.read_text())["sha256"]["engineer-1"]) == 64
        server.kill()
        server.start()
        with server.http() as h:
            assert h.get(f"/v1/runs/{run}").json()["status"] == "running"
            again = h.get(ENG.format(run=run) + "/observations", params={"lease": lease, "wait": 5}).json()
            assert (again["observation_id"], again["seq"]) == (env["observation_id"], env["seq"])
            assert again["deadline_unix"] > env["deadline_unix"]  # the decision deadline restarted
            r = h.post(ENG.format(run=run) + "/commands", params={"lease": lease},
                       json={"command_id": "c-1", "observation_id": env["observation_id"], "sleep_ms": 1000})
            assert r.json()["status"] == "accepted"
            # the resumed lease holds the agent: a fresh claim without the token is refused
            assert h.post(ENG.format(run=run) + "/claim").status_code == 409
            h.delete(f"/v1/runs/{run}")
    records = read_jsonl(server.data_dir / f"{run}.jsonl")
    assert [r["kind"] for r in records].count("restart") == 1
    assert [r["cursor"] for r in records] == list(range(len(records)))


def test_no_resume_marks_live_runs_crashed(tmp_path: Path) -> None:
    with Restartable(tmp_path / "data") as server:
        with server.http() as h:
            run = h.post("/v1/runs", params=SCN, json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
            h.post(ENG.format(run=run) + "/claim")
        server.kill()
        server.args = ("--no-resume",)
        server.start()
        with server.http() as h:
            view = h.get(f"/v1/runs/{run}").json()
            assert view["status"] == "crashed" and view["error"] == "server restarted"
    last = [r for r in read_jsonl(server.data_dir / f"{run}.jsonl") if r["kind"] == "status"][-1]
    assert last["status"] == "crashed" and last["error"] == "server restarted"


def test_an_accepted_verdict_is_on_disk_before_its_receipt_leaves(tmp_path: Path) -> None:
    """The receipt says accepted only once the verdict is in the file; with --fsync too."""
    for args in ((), ("--fsync",)):
        with Restartable(tmp_path / f"data{len(args)}", *args) as server:
            with server.http() as h:
                run = h.post("/v1/runs", params=SCN, json={"controlled_agents": ["engineer-1", "medic-1"]}).json()
                run = run["run_id"]
                lease = h.post(ENG.format(run=run) + "/claim").json()["lease"]
                h.post(f"/v1/runs/{run}/agents/medic-1/claim")  # medic never answers: the batch stays open
                env = h.get(ENG.format(run=run) + "/observations", params={"lease": lease, "wait": 5}).json()
                r = h.post(ENG.format(run=run) + "/commands", params={"lease": lease},
                           json={"command_id": "c-1", "observation_id": env["observation_id"], "noop": True})
                assert r.json()["status"] == "accepted"
                server.kill()  # right after the receipt: the batch was never adjudicated
            on_disk = [x for x in read_jsonl(server.data_dir / f"{run}.jsonl") if x["kind"] == "verdict"]
            assert [(x["command_id"], x["status"], x["command"]) for x in on_disk] == [("c-1", "accepted",
                                                                                      {"noop": True})]
            server.start()
            with server.http() as h:  # and the restarted server knows it: a retry is a duplicate
                r = h.post(ENG.format(run=run) + "/commands", params={"lease": lease},
                           json={"command_id": "c-1", "observation_id": env["observation_id"], "noop": True})
                assert r.json()["status"] == "duplicate"


def _silent_ws(address: tuple[str, int], run: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(address)
    sock.sendall(f"GET /v1/runs/{run}/stream HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n".encode())
    return sock


def _silent_sse(address: tuple[str, int], run: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(address)
    sock.sendall(f"GET /v1/runs/{run}/events HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n\r\n".encode())
    return sock


def _probe(server: Restartable, run: str) -> int:
    """A fourth spectator's status, on a fresh connection (an idle keep-alive one may have been closed)."""
    with server.http() as h, h.stream("GET", f"/v1/runs/{run}/events") as r:
        return r.status_code


@pytest.mark.slow  # 15-35 s of wall time: outside the edit-test loop, in every full run
def test_silent_spectators_lose_their_slot(tmp_path: Path) -> None:
    """--max-spectators 3: three readers that never read block a fourth only until the send timeout cuts them."""
    # A 3 s send timeout (not 1 s): the three must still hold their slots when the fourth asks, 0.3 s after the
    # last of them opened, however slowly a loaded machine opened them (1 s failed there: the first was cut already).
    with Restartable(tmp_path / "data", "--max-spectators", "3", "--send-timeout", "3") as server:
        address = ("127.0.0.1", server.port)
        with server.http() as h:
            run = h.post("/v1/runs", params={"scenario": "warren", "seed": 1},
                         json={"params": {"agents": 2000}}).json()["run_id"]  # NPC-only, megabytes of journal
            for _ in range(600):
                if h.get(f"/v1/runs/{run}").json()["status"] != "running":
                    break
                time.sleep(0.05)
            for opener in (_silent_ws, _silent_sse):
                silent = [opener(address, run) for _ in range(3)]
                try:
                    time.sleep(0.3)
                    assert _probe(server, run) == 429  # the three hold every slot
                    waited, status = 0.0, 429
                    while status == 429 and waited < 20:
                        time.sleep(0.25)
                        waited += 0.25
                        status = _probe(server, run)
                    assert status == 200, f"{opener.__name__}: still refused after {waited} s"
                finally:
                    for s in silent:
                        s.close()
                time.sleep(1.5)


def test_foreign_origins_are_refused_and_bodies_must_be_json(tmp_path: Path) -> None:
    with Restartable(tmp_path / "data", "--allow-origin", "http://localhost:3000") as server:
        with server.http() as h:
            evil = {"Origin": "http://evil.example"}
            r = h.post("/v1/runs", params=SCN, json={}, headers=evil)
            assert r.status_code == 403 and "--allow-origin" in r.json()["detail"]
            assert h.get("/v1/runs", headers=evil).status_code == 403
            r = h.post("/v1/runs", params=SCN, content=b"{}", headers={"Content-Type": "text/plain"})
            assert r.status_code == 415 and "application/json" in r.json()["detail"]
            assert h.get("/v1/runs").json()["runs"] == []  # neither changed anything
            own = {"Origin": server.url}  # the viewer's own requests
            assert h.post("/v1/runs", params=SCN, json={}, headers=own).status_code == 201
            assert h.post("/v1/runs", params=SCN, json={},
                          headers={"Origin": "http://localhost:3000"}).status_code == 201
            assert h.post("/v1/runs", params=SCN, json={}).status_code == 201  # no Origin: not a browser
            assert h.post("/v1/runs", params=SCN).status_code == 201  # no body, no content type needed
            r = h.put("/v1/runs")
            assert r.status_code == 405 and set(r.headers["Allow"].split(", ")) >= {"GET", "POST"}


def test_a_run_killed_while_created_comes_back_created_with_its_claims(tmp_path: Path) -> None:
    """Killed before every controlled agent claimed: the run comes back `created` with the claims it had, even one
    whose claim record the kill cut off (its lease is in the sidecar), and starts at the last claim."""
    with Restartable(tmp_path / "data") as server:
        with server.http() as h:
            run = h.post("/v1/runs", params=SCN,
                         json={"controlled_agents": ["engineer-1", "courier-1"]}).json()["run_id"]
            lease = h.post(ENG.format(run=run) + "/claim").json()["lease"]
        journal = server.data_dir / f"{run}.jsonl"
        lines = journal.read_text().splitlines(keepends=True)
        assert [json.loads(line)["agent"] for line in lines if '"kind":"claim"' in line] == ["engineer-1"]
        server.kill()
        # a kill between the lease sidecar and the claim record: the journal lacks the claim
        journal.write_text("".join(line for line in lines if '"kind":"claim"' not in line))
        server.start()
        with server.http() as h:
            assert h.get(f"/v1/runs/{run}").json()["status"] == "created"
            r = h.post(ENG.format(run=run) + "/claim", params={"lease": lease})
            assert r.status_code == 200 and r.json()["lease"] == lease  # resumed, and counted as claimed
            assert h.get(f"/v1/runs/{run}").json()["status"] == "created"
            assert h.post(f"/v1/runs/{run}/agents/courier-1/claim").status_code == 200
            assert h.get(f"/v1/runs/{run}").json()["status"] == "running"  # every controlled agent claimed
            h.delete(f"/v1/runs/{run}")


def test_a_fresh_claim_waits_for_a_restarting_server(tmp_path: Path) -> None:
    """`warren agent` claims once: a claim that cannot reach the server (a restart) is retried, since it was
    never sent; the run then starts."""
    with Restartable(tmp_path / "data") as server:
        with server.http() as h:
            run = h.post("/v1/runs", params=SCN, json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
        server.kill()
        later = threading.Timer(0.5, server.start)
        later.start()
        try:
            with AgentClient.open(server.url, retry=RetryPolicy(reconnect_s=30)) as client:
                agent = client.claim(run, "engineer-1")
                assert not agent.resumed
                assert client.get_run(run).status == "running"
                agent.detach()
        finally:
            later.join()
        with server.http() as h:
            h.delete(f"/v1/runs/{run}")
