"""HTTP-specific rules of warren-agent/0 (in-process app, autojump clock): the agent-side rules that both
transports share are in test_protocol_transports.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import trio
from server_helpers import served

TAKE = {"action": "take", "args": {"item": "toolbox-1"}}


def cmd(cid: str, oid: str, **decision):
    return {"command_id": cid, "observation_id": oid, **(decision or TAKE)}


async def test_worked_example_step_by_step(autojump_clock, tmp_path):
    """The seed's worked example: create, claim, briefing, first envelope, take accepted, duplicate, outcome."""
    async with served(tmp_path) as api:
        status, run = await api.call("POST", "/v1/runs?scenario=bridge_repair&seed=3",
                                     {"controlled_agents": ["engineer-1"], "npc_policy": "solution", "pace": None})
        assert status == 201 and run["run_id"] == "run-1" and run["status"] == "created"
        status, claim = await api.call("POST", "/v1/runs/run-1/agents/engineer-1/claim")
        assert status == 200 and set(claim) == {"lease", "briefing_revision"} and claim["briefing_revision"] == 1
        lease = claim["lease"]
        assert len(lease) >= 24
        status, b = await api.call("GET", f"/v1/runs/run-1/agents/engineer-1/briefing?lease={lease}")
        assert status == 200
        assert b["briefing_id"] == "run-1/engineer-1" and b["revision"] == 1 and b["name"] == "Sam the engineer"
        assert b["premise"] == "Repair the storm-damaged bridge and resupply the clinic."
        body = {k: v for k, v in b.items() if k != "content_hash"}
        canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        assert b["content_hash"] == "sha256:" + hashlib.sha256(canon).hexdigest()
        repair = next(o for o in b["objectives"] if o["id"] == "repair")
        assert repair["progress"] == {"current": 0, "target": 2}
        move = next(t for t in b["tool_catalog"] if t["name"] == "move_to")
        assert move["lane"] == "body" and move["durative"] is True
        assert move["input_schema"]["additionalProperties"] is False
        status, env = await api.poll("run-1", lease)
        assert status == 200
        assert list(env) == ["run_id", "agent_id", "observation_id", "seq", "sim_time_ms", "reason", "deadline_unix",
                             "briefing_revision", "observation", "text", "affordances"]
        assert env["observation_id"] == "engineer-1#0" and env["seq"] == 0 and env["reason"] == "start"
        assert env["text"].startswith("[t=0s] You are Sam the engineer")
        take = next(a for a in env["affordances"] if a["action"] == "take")
        assert take["params"]["item"]["choices"] == ["toolbox-1"] and take["suggestions"] == [{"item": "toolbox-1"}]
        for key in ("agent", "time", "busy", "you", "place", "tools"):
            assert key in env["observation"]
        body = {"command_id": "c-7d21", "observation_id": "engineer-1#0", "action": "take",
                "args": {"item": "toolbox-1"}}
        status, receipt = await api.submit("run-1", lease, body)
        assert status == 200
        assert receipt == {"command_id": "c-7d21", "observation_id": "engineer-1#0", "status": "accepted",
                           "detail": "", "outcome": "pending", "outcome_reason": "", "conflict": None}
        status, dup = await api.submit("run-1", lease, body)
        assert status == 200 and dup["status"] == "duplicate" and dup["command_id"] == "c-7d21"
        assert dup["observation_id"] == "engineer-1#0" and dup["outcome"] in ("pending", "accepted")
        await trio.sleep(1)
        status, polled = await api.call("GET", f"/v1/runs/run-1/agents/engineer-1/commands/c-7d21?lease={lease}")
        assert status == 200 and polled["status"] == "accepted" and polled["outcome"] == "accepted"


async def _started(api, tmp_path=None, **body):
    body.setdefault("controlled_agents", ["engineer-1"])
    run = await api.create(**body)
    lease = await api.claim(run)
    status, env = await api.poll(run, lease)
    assert status == 200
    return run, lease, env
















async def test_long_poll_wait_cap_after_and_204(autojump_clock, tmp_path):
    """wait is honored and capped at 60 s; 204 on timeout; after=seq hides what the client already has."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api, decision_deadline_s=1000)
        t0 = trio.current_time()
        status, body = await api.poll(run, lease, after=0, wait=5)
        assert status == 204 and body is None and trio.current_time() - t0 == pytest.approx(5, abs=0.01)
        t0 = trio.current_time()
        status, body = await api.poll(run, lease, after=0, wait=600)
        assert status == 204 and trio.current_time() - t0 == pytest.approx(60, abs=0.01)
        status, body = await api.poll(run, lease, after=-1, wait=0)
        assert status == 200 and body["seq"] == 0
        status, body = await api.call("GET", f"/v1/runs/{run}/agents/engineer-1/observations?after=x&lease={lease}")
        assert status == 400 and "after" in body["detail"]


async def test_long_poll_wakes_when_the_next_observation_is_issued(autojump_clock, tmp_path):
    """A waiting long-poll returns as soon as the agent's next observation exists."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        status, r = await api.submit(run, lease, cmd("c1", env["observation_id"]))
        t0 = trio.current_time()
        status, nxt = await api.poll(run, lease, after=0, wait=60)
        assert status == 200 and nxt["seq"] == 1 and nxt["reason"] == "done"
        assert trio.current_time() - t0 < 1


async def test_gone_after_end_and_terminal_status(autojump_clock, tmp_path):
    """Polls and claims on an ended run get 410 with the terminal status in the detail."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        await api.call("DELETE", f"/v1/runs/{run}")
        status, p = await api.poll(run, lease, wait=0)
        assert status == 410 and "cancelled" in p["detail"]
        status, p = await api.call("POST", f"/v1/runs/{run}/agents/engineer-1/claim")
        assert status == 410 and "cancelled" in p["detail"]
        # a run that completes: its status is completed, polls say so
        run2 = await api.create(controlled_agents=[])
        with trio.fail_after(60):
            while (await api.run_view(run2))["status"] == "running":
                await trio.sleep(0.1)
        assert (await api.run_view(run2))["status"] == "completed"


async def test_long_poll_released_by_run_end(autojump_clock, tmp_path):
    """A long-poll waiting when the run is cancelled is answered 410 at once."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        results = []

        async def waiter():
            results.append(await api.poll(run, lease, after=0, wait=60))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.sleep(1)
            await api.call("DELETE", f"/v1/runs/{run}")
        assert results[0][0] == 410


async def test_crashed_run_releases_waiters_and_others_continue(autojump_clock, tmp_path, monkeypatch):
    """A run whose task raises becomes crashed with the error; its waiters get 410; other runs are unaffected."""
    monkeypatch.setenv("WARREN_SCENARIOS", str(Path(__file__).parent / "scenarios"))
    async with served(tmp_path) as api:
        other, olease, _ = await _started(api)
        crashy = await api.create("crashy", 0, controlled_agents=["walker-1"])
        lease = await api.claim(crashy, "walker-1")
        status, env = await api.poll(crashy, lease, agent="walker-1")
        results = []

        async def waiter():
            results.append(await api.poll(crashy, lease, after=env["seq"], wait=60, agent="walker-1"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            for i in range(3):
                await trio.sleep(0.5)
                status, cur = await api.poll(crashy, lease, wait=60, agent="walker-1")
                if status != 200:
                    break
                await api.submit(crashy, lease, cmd(f"w{i}", cur["observation_id"], sleep_ms=1000),
                                 agent="walker-1")
        view = await api.run_view(crashy)
        assert view["status"] == "crashed" and "policy bug on purpose" in view["error"]
        assert results[0][0] in (200, 410)
        status, p = await api.poll(crashy, lease, wait=0, agent="walker-1")
        assert status == 410 and "crashed" in p["detail"]
        assert (await api.run_view(other))["status"] == "running"
        status, r = await api.submit(other, olease, cmd("ok", "engineer-1#0"))
        assert r["status"] == "accepted"


async def test_pace_bounds_sim_time_by_clock_time(autojump_clock, tmp_path):
    """pace=2: sim time never runs ahead of 2 x elapsed clock time."""
    async with served(tmp_path) as api:
        t0 = trio.current_time()
        run = await api.create(controlled_agents=[], pace=2)
        samples = []
        while True:
            view = await api.run_view(run)
            samples.append((trio.current_time() - t0, view["sim_time_ms"] / 1000))
            if view["status"] != "running":
                break
            await trio.sleep(0.25)
        assert view["status"] == "completed"
        assert all(sim <= 2 * clock + 1e-6 for clock, sim in samples), [s for s in samples if s[1] > 2 * s[0]]
        assert samples[-1][0] >= view["sim_time_ms"] / 1000 / 2 - 0.01


BAD_INPUTS = [
    ("POST", "/v1/runs?scenario=bridge_repair", b"{not json", 400, "not acceptable JSON"),
    ("POST", "/v1/runs?scenario=bridge_repair", b'{"a": 1, "a": 2}', 400, "duplicate"),
    ("POST", "/v1/runs?scenario=bridge_repair", b'{"pase": 1}', 400, "valid fields"),
    ("POST", "/v1/runs?scenario=bridge_repair", b'{"controlled_agents": "engineer-1"}', 400, "controlled_agents"),
    ("POST", "/v1/runs?scenario=bridge_repair", b'{"controlled_agents": ["ghost"]}', 400, "engineer-1"),
    ("POST", "/v1/runs?scenario=bridge_repair", b'{"npc_policy": "smart"}', 400, "npc_policy"),
    ("POST", "/v1/runs?scenario=bridge_repair", b'{"decision_deadline_s": -1}', 400, "decision_deadline_s"),
    ("POST", "/v1/runs?scenario=bridge_repair", b'{"params": {"nope": 1}}', 400, "no parameter"),
    ("POST", "/v1/runs?scenario=bridge_repair", b"[" * 100 + b"]" * 100, 400, "deep"),
    ("POST", "/v1/runs?scenario=bridge_repair&seed=abc", b"{}", 400, "seed"),
    ("POST", "/v1/runs?scenario=nowhere", b"{}", 404, "bridge_repair"),
    ("POST", "/v1/runs", b"{}", 400, "scenario"),
    ("POST", "/v1/runs?scenario=bridge_repair", b'{"x": "' + b"a" * 70000 + b'"}', 413, "bytes"),
    ("GET", "/v1/runs/run-404", None, 404, "no run"),
    ("GET", "/v1/nothing-here", None, 404, "no such endpoint"),
    ("PUT", "/v1/runs", None, 405, "not allowed"),
    ("POST", "/v1/runs/RUN/agents/engineer-1/commands?lease=LEASE", b"{bad", 400, "JSON"),
    ("POST", "/v1/runs/RUN/agents/engineer-1/commands?lease=LEASE", b"", 400, "JSON object body"),
    ("POST", "/v1/runs/RUN/agents/engineer-1/commands?lease=LEASE", b"[1, 2]", 422, "JSON object"),
    ("POST", "/v1/runs/RUN/agents/engineer-1/commands?lease=LEASE", b'{"command_id": 1e400}', 400, "JSON"),
    ("POST", "/v1/runs/RUN/agents/engineer-1/commands?lease=LEASE",
     b'{"command_id": "c", "observation_id": "engineer-1#0", "sleep_ms": 9007199254740993}', 400, "2**53-1"),
    ("POST", "/v1/runs/RUN/agents/engineer-1/commands", b"{}", 401, "lease"),
    ("POST", "/v1/runs/RUN/agents/engineer-1/commands?lease=l-nope", b"{}", 403, "lease"),
    ("GET", "/v1/runs/RUN/agents/engineer-1/briefing", None, 401, "lease"),
    ("GET", "/v1/runs/RUN/agents/engineer-1/briefing?lease=l-nope", None, 403, "lease"),
    ("GET", "/v1/runs/RUN/agents/engineer-1/commands/zzz?lease=LEASE", None, 404, "no command"),
    ("GET", "/v1/runs/RUN/agents/engineer-1/observations?lease=LEASE&wait=-3", None, 400, "wait"),
    ("GET", "/v1/runs/RUN/agents/engineer-1/observations?lease=LEASE&wait=nan", None, 400, "wait"),
    ("GET", "/v1/runs/RUN/agents/engineer-1/observations?lease=LEASE&after=-7", None, 400, "after"),
    ("POST", "/v1/runs/RUN/agents/ghost-1/claim", None, 404, "engineer-1"),
    ("POST", "/v1/runs/RUN/agents/engineer-1/claim?protocol=warren-agent/1", None, 409, "warren-agent/0"),
    ("POST", "/v1/runs/RUN/agents/engineer-1/release", None, 401, "lease"),
]


@pytest.mark.parametrize(("method", "path", "raw", "code", "needle"), BAD_INPUTS)
async def test_bad_input_gets_teaching_4xx_and_changes_nothing(autojump_clock, tmp_path, method, path, raw, code,
                                                               needle):
    """Malformed, mistyped, oversized, unauthenticated or unknown input: a 4xx that teaches; state unchanged."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        before_runs = len(api.manager.runs)
        before_journal = len(api.journal(run))
        before_view = await api.run_view(run)
        status, p = await api.call(method, path.replace("RUN", run).replace("LEASE", lease), raw=raw)
        assert status == code, p
        assert p["status"] == code and needle.lower() in p["detail"].lower(), p["detail"]
        assert len(api.manager.runs) == before_runs
        assert len(api.journal(run)) == before_journal
        assert await api.run_view(run) == before_view


async def test_protocol_header_mismatch_is_409_and_absent_is_fine(autojump_clock, tmp_path):
    """A different X-Warren-Protocol gets 409; no header is accepted; every /v1 response carries the header."""
    async with served(tmp_path) as api:
        status, p = await api.call("GET", "/v1/runs", headers={"X-Warren-Protocol": "warren-agent/1"})
        assert status == 409 and "warren-agent/0" in p["detail"]
        r = await api.client.get("/v1/runs")
        assert r.status_code == 200 and r.headers["X-Warren-Protocol"] == "warren-agent/0"
        status, scen = await api.call("GET", "/v1/scenarios")
        assert any(s["name"] == "bridge_repair" for s in scen["scenarios"])
        status, one = await api.call("GET", "/v1/scenarios/bridge_repair")
        assert status == 200 and any(a["agent_id"] == "engineer-1" for a in one["agents"])
        status, p = await api.call("GET", "/v1/scenarios/atlantis")
        assert status == 404 and "bridge_repair" in p["detail"]


async def test_index_lists_endpoints_as_method_and_path_like_the_openapi_document(autojump_clock, tmp_path):
    """GET /v1: {"method", "path"} objects sorted by path, HTTP ones exactly the OpenAPI operations, WS marked."""
    from jsonschema import Draft202012Validator

    from warren_sim.protocol.openapi import openapi_document

    async with served(tmp_path) as api:
        status, info = await api.call("GET", "/v1")  # api.call also validates the body against server_info.json
    assert status == 200 and info["protocol"] == "warren-agent/0"
    endpoints = info["endpoints"]
    assert {"method": "GET", "path": "/v1/schemas"} in endpoints
    assert {"method": "GET", "path": "/v1/runs/{run_id}/agents/{agent_id}/commands/{command_id}"} in endpoints
    assert not any("[" in e["method"] or "<" in e["path"] for e in endpoints)
    assert [e["path"] for e in endpoints] == sorted(e["path"] for e in endpoints)
    doc = openapi_document()
    operations = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert {(e["method"], e["path"]) for e in endpoints if e["method"] != "WS"} == operations
    assert {e["path"] for e in endpoints if e["method"] == "WS"} == {"/v1/agent", "/v1/runs/{run_id}/stream"}
    # the OpenAPI document's ServerInfo is the same schema: it accepts this body and refuses the old string form
    schema = {**doc["components"]["schemas"]["ServerInfo"], "components": doc["components"]}
    Draft202012Validator(schema).validate(info)
    assert not Draft202012Validator(schema).is_valid({**info, "endpoints": ["['GET'] /v1/schemas"]})


async def test_controlled_agents_selectors_all_and_role(autojump_clock, tmp_path):
    """controlled_agents "all" or {"role": R} selects agents by rule (bodies stay small whatever the world's size);
    a selector that selects nobody or is neither form is a teaching 400 and creates nothing."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents="all")
        assert sorted(a["agent_id"] for a in (await api.run_view(run))["agents"] if a["controlled"]) == \
            ["courier-1", "engineer-1", "medic-1"]
        run = await api.create(controlled_agents={"role": "courier"})
        assert [a["agent_id"] for a in (await api.run_view(run))["agents"] if a["controlled"]] == ["courier-1"]
        lease = await api.claim(run, "courier-1")
        status, env = await api.poll(run, lease, agent="courier-1")
        assert status == 200 and env["agent_id"] == "courier-1"
        status, body = await api.call("POST", f"/v1/runs/{run}/agents/engineer-1/claim")
        assert status == 409 and "not a controlled agent" in body["detail"]
        before = len(api.manager.runs)
        status, body = await api.call("POST", "/v1/runs?scenario=bridge_repair&seed=1",
                                      {"controlled_agents": {"role": "pilot"}})
        assert status == 400 and "its roles: courier, engineer, medic" in body["detail"]
        status, body = await api.call("POST", "/v1/runs?scenario=bridge_repair&seed=1", {"controlled_agents": "every"})
        assert status == 400 and '"all", or {"role": ROLE}' in body["detail"]
        status, body = await api.call("POST", "/v1/runs?scenario=bridge_repair&seed=1",
                                      {"controlled_agents": {"role": "medic", "count": 2}})
        assert status == 400 and "valid fields: role" in body["detail"]
        assert len(api.manager.runs) == before


async def test_controlled_agents_all_lifts_the_body_limit_for_10000_agents(autojump_clock, tmp_path):
    """10,000 ids do not fit the 64 KiB body (413); "all" names them in 27 bytes."""
    async with served(tmp_path) as api:
        ids = [f"forager-{i}" for i in range(1, 10_001)]
        status, body = await api.call("POST", "/v1/runs?scenario=warren&seed=1",
                                      {"controlled_agents": ids, "params": {"agents": 10_000}})
        assert status == 413
        run = await api.create("warren", 1, controlled_agents="all", params={"agents": 10_000})
        view = await api.run_view(run)
        assert sum(a["controlled"] for a in view["agents"]) == 10_000
