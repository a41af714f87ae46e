"""warren-agent/0's agent-side rules, run over HTTP long-poll and over the WebSocket binding alike.

In-process app, autojump clock (warped time). The tests speak through ``transports.py``, one API
for both transports, so every rule is checked twice without a copied test.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import trio
from server_helpers import served
from transports import HttpAgent, transport, ws_agent

TAKE = {"action": "take", "args": {"item": "toolbox-1"}}
KINDS = ["http", "ws"]


def cmd(cid: str, oid: str, **decision):
    return {"command_id": cid, "observation_id": oid, **(decision or TAKE)}


async def _started(api, agent, **body):
    body.setdefault("controlled_agents", ["engineer-1"])
    run = await api.create(**body)
    status, claim = await agent.claim(run)
    assert status == 200, claim
    status, env = await agent.poll(run, claim["lease"])
    assert status == 200, env
    return run, claim["lease"], env


@pytest.mark.parametrize("kind", KINDS)
async def test_worked_example(autojump_clock, tmp_path, kind):
    """Claim, briefing (hash checks), envelope engineer-1#0 'start', take accepted pending, duplicate, outcome."""
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run = await api.create(controlled_agents=["engineer-1"], npc_policy="solution", pace=None)
        status, claim = await agent.claim(run)
        assert status == 200 and claim["briefing_revision"] == 1
        lease = claim["lease"]
        status, b = await agent.briefing(run, lease)
        body = {k: v for k, v in b.items() if k != "content_hash"}
        canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        assert b["content_hash"] == "sha256:" + hashlib.sha256(canon).hexdigest()
        status, env = await agent.poll(run, lease)
        assert env["observation_id"] == "engineer-1#0" and env["reason"] == "start"
        assert env["text"].startswith("[t=0s] You are Sam the engineer")
        body = {"command_id": "c-7d21", "observation_id": "engineer-1#0", **TAKE}
        status, receipt = await agent.submit(run, lease, body)
        assert receipt == {"command_id": "c-7d21", "observation_id": "engineer-1#0", "status": "accepted",
                           "detail": "", "outcome": "pending", "outcome_reason": "", "conflict": None}
        status, dup = await agent.submit(run, lease, body)
        assert dup["status"] == "duplicate" and dup["command_id"] == "c-7d21"
        await trio.sleep(1)
        status, polled = await agent.receipt(run, lease, "c-7d21")
        assert polled["status"] == "accepted" and polled["outcome"] == "accepted"


@pytest.mark.parametrize("kind", KINDS)
async def test_every_verdict_in_order(autojump_clock, tmp_path, kind):
    """rejected (recorded, re-judged), accepted, duplicate with a differing body, stale, unknown observation, 422."""
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run, lease, env = await _started(api, agent)
        oid = env["observation_id"]
        status, r = await agent.submit(run, lease, cmd("c1", oid, action="take", args={"item": "plank-9"}))
        assert r["status"] == "rejected" and "choose one of ['toolbox-1']" in r["detail"] and r["outcome"] == "none"
        assert [x for x in api.journal(run) if x["kind"] == "verdict"][-1]["status"] == "rejected"
        status, r = await agent.submit(run, lease, cmd("c1", oid, sleep_ms="10"))
        assert r["status"] == "rejected" and "sleep_ms" in r["detail"]
        status, r = await agent.submit(run, lease, cmd("c1", oid, action=7))
        assert r["status"] == "rejected" and "action must be a string" in r["detail"]
        status, r = await agent.submit(run, lease, cmd("c1", oid))
        assert r["status"] == "accepted" and r["outcome"] == "pending"
        status, r = await agent.submit(run, lease, cmd("c1", oid, noop=True))
        assert r["status"] == "duplicate" and "original command stands" in r["detail"]
        status, r = await agent.submit(run, lease, cmd("c2", oid, noop=True))
        assert r["status"] == "stale" and "already answered by command 'c1'" in r["detail"]
        status, r = await agent.submit(run, lease, cmd("c3", "engineer-1#99", noop=True))
        assert r["status"] == "rejected" and "unknown observation" in r["detail"]
        before = len(api.journal(run))
        for bad in ({"command_id": 7, "observation_id": oid, "noop": True},
                    {"command_id": "c4", "observation_id": ["x"], "noop": True},
                    {"observation_id": oid, "noop": True}):
            status, p = await agent.submit(run, lease, bad)
            assert status == 422 and ("command_id" in p["detail"] or "observation_id" in p["detail"])
        assert len(api.journal(run)) == before


@pytest.mark.parametrize("kind", KINDS)
async def test_deadline_expiry_noop_and_next_wake(autojump_clock, tmp_path, kind):
    """60 s default deadline: noop recorded; expired is judged before a malformed payload; next envelope follows."""
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run, lease, env = await _started(api, agent)
        t0 = trio.current_time()
        status, _ = await agent.poll(run, lease, after=0, wait=59.5)
        assert status == 204
        status, nxt = await agent.poll(run, lease, after=0, wait=60)
        assert status == 200 and nxt["seq"] == 1 and nxt["reason"] == "idle"
        assert trio.current_time() - t0 >= 60
        noop = [x for x in api.journal(run) if x["kind"] == "command" and x["observation_id"] == "engineer-1#0"]
        assert noop[0]["command"] == {"noop": True} and noop[0]["source"] == "expired"
        status, r = await agent.submit(run, lease, {"command_id": "late", "observation_id": "engineer-1#0",
                                                    "sleep_ms": "soon", "noop": True})
        assert r["status"] == "expired" and "decision deadline" in r["detail"]


@pytest.mark.parametrize("kind", KINDS)
async def test_decision_deadline_s_is_honored(autojump_clock, tmp_path, kind):
    """decision_deadline_s=5: the observation expires after 5 s of clock time, not 60."""
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run, lease, env = await _started(api, agent, decision_deadline_s=5)
        t0 = trio.current_time()
        status, _ = await agent.poll(run, lease, after=0, wait=4.9)
        assert status == 204
        await trio.sleep(0.2)
        closed = [x for x in api.journal(run) if x["kind"] == "closed" and x["why"] == "expired"]
        assert closed and closed[0]["observation_ids"] == ["engineer-1#0"] and trio.current_time() - t0 < 6


@pytest.mark.parametrize("kind", KINDS)
async def test_expired_because_run_ended_and_gone(autojump_clock, tmp_path, kind):
    """After a cancel: commands get expired (run ended), polls and claims get 410 naming the status."""
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run, lease, env = await _started(api, agent)
        await api.call("DELETE", f"/v1/runs/{run}")
        status, r = await agent.submit(run, lease, cmd("c1", env["observation_id"]))
        assert r["status"] == "expired" and "run ended" in r["detail"]
        status, p = await agent.poll(run, lease, after=0, wait=5)
        assert status == 410 and "cancelled" in p["detail"]
        status, p = await agent.claim(run)
        assert status == 410 and "cancelled" in p["detail"]


@pytest.mark.parametrize("kind", KINDS)
async def test_unclaimed_agent_does_not_block_and_stale_after(autojump_clock, tmp_path, kind):
    """Started unclaimed: noops recorded without blocking; later a command for a superseded observation is stale."""
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run = await api.create(controlled_agents=["engineer-1"], pace=1)
        await api.call("POST", f"/v1/runs/{run}/start")
        await trio.sleep(10)
        view = await api.run_view(run)
        assert view["status"] == "running" and view["sim_time_ms"] > 0
        sources = {x["source"] for x in api.journal(run) if x["kind"] == "command" and x["agent"] == "engineer-1"}
        assert sources == {"unclaimed"}
        status, claim = await agent.claim(run)
        status, r = await agent.submit(run, claim["lease"], cmd("c1", "engineer-1#0"))
        assert r["status"] == "stale" and "no client held the agent's lease" in r["detail"]
        status, env = await agent.poll(run, claim["lease"], wait=60)
        assert status == 200 and env["seq"] >= 1


@pytest.mark.parametrize("kind", KINDS)
async def test_wrong_lease_403_names_both_ways_out_and_each_works(autojump_clock, tmp_path, kind):
    """A wrong token while another lease lives: 403 says resume with the held token, or wait N s / release; both work.

    A claim without the held token would be 409 then, so the 403 must not advise "claim again" alone.
    """
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run, lease, _ = await _started(api, agent, decision_deadline_s=10_000)
        status, p = await agent.briefing(run, "l-not-the-token")
        assert status == 403, p
        detail = p["detail"]
        assert "another lease does, for up to 300 s more" in detail and "TTL 300 s" in detail
        assert f"resume with the token you hold for it (POST /v1/runs/{run}/agents/engineer-1/claim?lease=" in detail
        assert f"or be released (POST /v1/runs/{run}/agents/engineer-1/release?lease=" in detail
        status, _ = await agent.claim(run)
        assert status == 409  # why "claim again" alone would mislead
        status, resumed = await agent.claim(run, lease=lease)  # way 1: resume with the held token
        assert status == 200 and resumed["lease"] == lease
        status, _ = await agent.release(run, lease)  # way 2: release (or let the TTL pass), then claim
        assert status == 200
        status, p = await agent.briefing(run, lease)
        assert status == 403 and "no lease holds it now" in p["detail"] and "claim it with POST" in p["detail"]
        status, fresh = await agent.claim(run)
        assert status == 200 and fresh["lease"] != lease
        await trio.sleep(301)  # the fresh lease expires unused: a stranger's token is told to claim
        status, p = await agent.briefing(run, "l-not-the-token")
        assert status == 403 and "its last lease expired, so claim it" in p["detail"]


@pytest.mark.parametrize("kind", KINDS)
async def test_lease_ttl_refresh_expiry_and_reclaim(autojump_clock, tmp_path, kind):
    """Requests at 299 s keep the lease; 300 s of silence expires it; reclaim gets a fresh token, old gets 403."""
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run, lease, env = await _started(api, agent, decision_deadline_s=10_000)
        for _ in range(2):
            await trio.sleep(299)
            status, _ = await agent.briefing(run, lease)
            assert status == 200
        status, p = await agent.claim(run)
        assert status == 409 and "held by another lease" in p["detail"]
        await trio.sleep(300)
        status, p = await agent.briefing(run, lease)
        assert status == 403 and "expired" in p["detail"]
        status, fresh = await agent.claim(run)
        assert status == 200 and fresh["lease"] != lease
        status, p = await agent.submit(run, lease, cmd("x", "engineer-1#0"))
        assert status == 403


@pytest.mark.parametrize("kind", KINDS)
async def test_resume_release_and_refusals(autojump_clock, tmp_path, kind):
    """Claim with the live token resumes and redelivers; 409 while held; release frees at once; 401/403/404/409."""
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run, lease, env = await _started(api, agent)
        status, same = await agent.claim(run, lease=lease)
        assert status == 200 and same["lease"] == lease
        status, redelivered = await agent.poll(run, lease, after=-1, wait=0)
        assert redelivered == env
        status, p = await agent.claim(run, lease="l-wrong")
        assert status == 409
        status, p = await agent.briefing(run, None)
        assert status == 401 and "lease" in p["detail"]
        status, p = await agent.briefing(run, "l-wrong")
        assert status == 403
        status, p = await agent.release(run, lease)
        assert status == 200
        status, p = await agent.briefing(run, lease)
        assert status == 403
        status, other = await agent.claim(run)
        assert status == 200 and other["lease"] != lease
        status, p = await agent.claim(run, "courier-1")
        assert status == 409 and "not a controlled agent" in p["detail"]
        status, p = await agent.claim(run, "nobody")
        assert status == 404


@pytest.mark.parametrize("kind", KINDS)
async def test_crash_releases_waiters(autojump_clock, tmp_path, kind, monkeypatch):
    """A run whose task raises ends crashed; a waiting poll gets 410 naming it; other runs go on."""
    monkeypatch.setenv("WARREN_SCENARIOS", str(Path(__file__).parent / "scenarios"))
    async with served(tmp_path) as api, transport(kind, api) as agent:
        crashy = await api.create("crashy", 0, controlled_agents=["walker-1"])
        status, claim = await agent.claim(crashy, "walker-1")
        lease = claim["lease"]
        after = -1
        for i in range(5):
            status, body = await agent.poll(crashy, lease, after=after, wait=60, agent="walker-1")
            if status != 200:
                break
            after = body["seq"]
            await agent.submit(crashy, lease, cmd(f"w{i}", body["observation_id"], sleep_ms=1000), agent="walker-1")
        assert status == 410 and "crashed" in body["detail"]
        view = await api.run_view(crashy)
        assert view["status"] == "crashed" and "policy bug on purpose" in view["error"]


async def test_a_lease_works_across_transports(autojump_clock, tmp_path):
    """Claimed over HTTP, used over WS (poll, submit), and back over HTTP (duplicate, receipt)."""
    async with served(tmp_path) as api:
        http = HttpAgent(api)
        run = await api.create(controlled_agents=["engineer-1"])
        status, claim = await http.claim(run)
        lease = claim["lease"]
        async with ws_agent(api) as ws:
            status, env = await ws.poll(run, lease)
            assert status == 200 and env["observation_id"] == "engineer-1#0"
            status, r = await ws.submit(run, lease, cmd("x1", env["observation_id"]))
            assert r["status"] == "accepted"
        status, r = await http.submit(run, lease, cmd("x1", env["observation_id"]))
        assert r["status"] == "duplicate"
        status, nxt = await http.poll(run, lease, after=0, wait=60)
        assert status == 200 and nxt["seq"] == 1
        async with ws_agent(api) as ws:
            status, resumed = await ws.claim(run, lease=lease)
            assert status == 200 and resumed["resumed"] is True and resumed["lease"] == lease
            status, again = await ws.poll(run, lease, after=-1, wait=0)
            assert again == nxt


async def test_ws_reconnect_mid_decision_redelivers_and_retry_is_duplicate(autojump_clock, tmp_path):
    """A WS client submits, loses the connection before reading the receipt, reconnects: redelivery + duplicate."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1"], decision_deadline_s=300)
        async with ws_agent(api) as ws:
            status, claim = await ws.claim(run)
            lease = claim["lease"]
            status, env = await ws.poll(run, lease)
        async with ws_agent(api) as ws:  # reconnect: the outstanding envelope comes again
            status, _ = await ws.claim(run, lease=lease)
            status, again = await ws.poll(run, lease, after=-1, wait=0)
            assert again == env
            await ws.ws.send(json.dumps({"jsonrpc": "2.0", "id": 999, "method": "agent.submit", "params": {
                "run_id": run, "agent_id": "engineer-1", "lease": lease, "command": cmd("r1", env["observation_id"])}}))
        async with ws_agent(api) as ws:  # the receipt was lost with the connection: retry under the same id
            status, _ = await ws.claim(run, lease=lease)
            status, r = await ws.submit(run, lease, cmd("r1", env["observation_id"]))
            assert r["status"] == "duplicate"
        accepted = [x for x in api.journal(run) if x["kind"] == "verdict" and x["status"] == "accepted"]
        assert [x["command_id"] for x in accepted] == ["r1"]


async def test_ws_json_rpc_errors_never_crash(autojump_clock, tmp_path):
    """-32700 parse error, -32600 batch and bad request, -32601 unknown method, -32602 bad params; then still alive."""
    async with served(tmp_path) as api, ws_agent(api) as ws:
        send = ws.ws.send
        await send("{bad")
        await send("[1, 2]")
        await send(json.dumps({"jsonrpc": "1.0", "id": 1, "method": "ping"}))
        await send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "agent.fly", "params": {}}))
        await send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "agent.claim", "params": {"run_id": 5}}))
        await send(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"origin_ns": "x"}}))
        await trio.sleep(0.1)
        codes = [f["error"]["code"] for f in ws.frames if "error" in f]
        assert codes == [-32700, -32600, -32600, -32601, -32602, -32602]
        assert all(f["error"].get("data", {}).get("detail") for f in ws.frames if "error" in f)
        status, pong = await ws.call("ping", {"origin_ns": 123})
        assert status == 200 and pong["origin_ns"] == 123 and {"receive_ns", "transmit_ns"} <= set(pong)


async def test_ws_batches_envelopes_of_one_batch_and_submit_many(autojump_clock, tmp_path):
    """Two agents on one connection waking together come in one 'observations' frame; submit_many judges each."""
    async with served(tmp_path) as api, ws_agent(api) as ws:
        run = await api.create(controlled_agents=["engineer-1", "courier-1"])
        _, a = await ws.claim(run, "engineer-1")
        _, b = await ws.claim(run, "courier-1")
        await ws.poll(run, a["lease"], agent="engineer-1")
        await ws.poll(run, b["lease"], agent="courier-1")
        batched = [f for f in ws.frames if f.get("method") == "observations"]
        assert batched and {e["agent_id"] for e in batched[0]["params"]["envelopes"]} == {"engineer-1", "courier-1"}
        status, res = await ws.call("agent.submit_many", {"commands": [
            {"run_id": run, "agent_id": "engineer-1", "lease": a["lease"], "command": cmd("m1", "engineer-1#0")},
            {"run_id": run, "agent_id": "courier-1", "lease": b["lease"],
             "command": {"command_id": "m2", "observation_id": "courier-1#0", "action": "fly"}},
            {"run_id": run, "agent_id": "courier-1", "lease": "l-bad", "command": {}},
        ]})
        results = res["results"]
        assert results[0]["receipt"]["status"] == "accepted"
        assert results[1]["receipt"]["status"] == "rejected" and "unknown action" in results[1]["receipt"]["detail"]
        assert results[2]["error"]["code"] == 403


async def test_ws_outcomes_of_one_batch_ride_in_the_next_observations_frame(autojump_clock, tmp_path):
    """Two commands of one connection settled by one adjudication: both outcomes come inside the next batch's
    observation frame (one frame for the envelope and every outcome that changed), not in frames of their own.
    Unpaced: a paced run that waits for its clock before the next batch tells the outcomes before waiting."""
    async with served(tmp_path) as api, ws_agent(api) as ws:
        run = await api.create(controlled_agents=["engineer-1", "courier-1"], pace=None)
        _, a = await ws.claim(run, "engineer-1")
        _, b = await ws.claim(run, "courier-1")
        await ws.poll(run, a["lease"], agent="engineer-1")
        await ws.poll(run, b["lease"], agent="courier-1")
        status, res = await ws.call("agent.submit_many", {"commands": [
            {"run_id": run, "agent_id": "engineer-1", "lease": a["lease"], "command": cmd("o1", "engineer-1#0", noop=True)},
            {"run_id": run, "agent_id": "courier-1", "lease": b["lease"], "command": cmd("o2", "courier-1#0", noop=True)},
        ]})
        assert [r["receipt"]["outcome"] for r in res["results"]] == ["pending", "pending"]
        for _ in range(100):
            carrying = [f for f in ws.frames if "outcomes" in f.get("params", {})]
            if carrying:
                break
            await trio.sleep(0.1)
        (frame,) = carrying
        assert frame["method"] == "observation"  # the next batch wakes courier-1 alone; both outcomes ride in it
        assert frame["params"]["envelope"]["observation_id"] == "courier-1#1"
        notes = frame["params"]["outcomes"]
        assert {n["agent_id"] for n in notes} == {"engineer-1", "courier-1"}
        assert {n["receipt"]["command_id"] for n in notes} == {"o1", "o2"}
        assert all(n["run_id"] == run and n["receipt"]["outcome"] != "pending" for n in notes)
        assert not [f for f in ws.frames if f.get("method") in ("outcome", "outcomes")]  # no frames of their own
        # each notified receipt is the receipt agent.receipt gives (built straight from the verdict on the push)
        leases = {"engineer-1": a["lease"], "courier-1": b["lease"]}
        for n in notes:
            status, asked = await ws.call("agent.receipt", {"run_id": run, "agent_id": n["agent_id"],
                                                            "lease": leases[n["agent_id"]],
                                                            "command_id": n["receipt"]["command_id"]})
            assert status == 200 and asked == n["receipt"]


async def _claimed_and_polled(ws, run, agents):
    """Every agent claimed on ``ws``, then its first envelope polled: the leases."""
    leases = {}
    for agent in agents:
        _, c = await ws.claim(run, agent)
        leases[agent] = c["lease"]
    for agent in agents:
        await ws.poll(run, leases[agent], agent=agent)
    return leases


async def test_ws_batched_frames_send_a_reply_and_the_envelopes_it_set_off_in_one_frame(autojump_clock, tmp_path):
    """initialize with frames "batched": a submit_many that completes a batch is answered in one array frame
    holding its reply and the next batch's observation (with the outcomes riding in it); "single" (the
    default) never sends an array; an unknown frames value is a -32602 that changes nothing."""
    async with served(tmp_path) as api, ws_agent(api) as ws:
        status, bad = await ws.call("initialize", {"protocol": "warren-agent/0", "frames": "many"})
        assert status == 400 and bad["rpc"]["code"] == -32602 and "batched" in bad["detail"]
        assert not [f for f in ws.raw_frames if isinstance(f, list)]
        status, init = await ws.call("initialize", {"protocol": "warren-agent/0", "frames": "batched"})
        assert status == 200 and init["frames"] == "batched" and init["capabilities"]["frames"] == ["single", "batched"]
        trio_ = ("engineer-1", "courier-1", "medic-1")  # every agent: no NPC-only batch between the two batches
        run = await api.create(controlled_agents=list(trio_), pace=None)
        leases = await _claimed_and_polled(ws, run, trio_)
        status, res = await ws.call("agent.submit_many", {"commands": [
            {"run_id": run, "agent_id": agent, "lease": leases[agent], "command": cmd(f"o-{agent}", f"{agent}#0",
                                                                                     noop=True)}
            for agent in trio_]})
        assert status == 200 and [r["receipt"]["status"] for r in res["results"]] == ["accepted"] * 3
        for _ in range(100):
            arrays = [f for f in ws.raw_frames if isinstance(f, list) and any("result" in m and "results" in
                                                                                 m["result"] for m in f)]
            if arrays and len(arrays[0]) > 1:
                break
            await trio.sleep(0.1)
        (frame,) = arrays
        reply, note = frame
        assert reply["result"] == res  # the reply first, then what it set off
        assert note["method"] in ("observation", "observations")
        woke = [note["params"]] if note["method"] == "observation" else note["params"]["envelopes"]
        assert woke and all(e["envelope"]["observation_id"].endswith("#1") for e in woke)
        assert {n["receipt"]["command_id"] for n in note["params"]["outcomes"]} == {f"o-{a}" for a in trio_}


@pytest.mark.parametrize("parts", [None, ["you"]])
async def test_ws_batched_frames_pipeline_a_big_batch_in_a_few_frames(autojump_clock, tmp_path, parts):
    """Many envelopes of one flush leave in a few frames of at least PIPELINE_MIN envelopes and PIPELINE_BYTES
    each, sent as each is built (the client starts on the first while the server builds the next): 64 agents'
    whole envelopes (about 3 KB each) woken together come in PIPELINE_FRAMES frames of 16, the submit_many's
    reply riding in the first; narrowed to ``you`` (a few hundred bytes each) they come in one. Every agent's
    envelope once."""
    from warren_sim.http.agent_ws import PIPELINE_FRAMES, PIPELINE_MIN

    agents = [f"forager-{i:02d}" for i in range(1, 65)]
    async with served(tmp_path) as api, ws_agent(api) as ws:
        status, _ = await ws.call("initialize", {"protocol": "warren-agent/0", "frames": "batched"})
        assert status == 200
        run = await api.create("warren", 0, controlled_agents=agents, params={"agents": 64}, pace=None)
        leases = await _claimed_and_polled(ws, run, agents)
        for agent in agents if parts else ():
            status, _ = await ws.call("agent.subscribe", {"run_id": run, "agent_id": agent, "lease": leases[agent],
                                                          "parts": parts})
            assert status == 200
        before = len(ws.raw_frames)
        status, res = await ws.call("agent.submit_many", {"commands": [
            {"run_id": run, "agent_id": a, "lease": leases[a], "command": cmd(f"s-{a}", f"{a}#0", sleep_ms=1)}
            for a in agents]})
        assert status == 200 and {r["receipt"]["status"] for r in res["results"]} == {"accepted"}
        woke: list[str] = []
        for _ in range(100):
            frames = [f if isinstance(f, list) else [f] for f in ws.raw_frames[before:]]
            notes = [[m for m in f if m.get("method") in ("observation", "observations")] for f in frames]
            woke = [e["agent_id"] for n in notes for m in n for e in m["params"].get("envelopes", [m["params"]])]
            if len(woke) == len(agents):
                break
            await trio.sleep(0.1)
        assert sorted(woke) == agents, woke  # each agent's envelope once
        sizes = [len(m["params"]["envelopes"]) for n in notes for m in n]
        assert [PIPELINE_MIN] * PIPELINE_FRAMES == [16] * 4
        assert sizes == ([16] * 4 if parts is None else [64]), sizes
        first = next(f for f in frames if any(m.get("method") == "observations" for m in f))
        assert any(m.get("result") == res for m in first)  # the reply leaves with the first of them


async def test_ws_subscribe_narrows_envelopes(autojump_clock, tmp_path):
    """agent.subscribe with parts [you, affordances] sends envelopes with only those parts (plus identity)."""
    async with served(tmp_path) as api, ws_agent(api) as ws:
        run = await api.create(controlled_agents=["engineer-1"])
        _, c = await ws.claim(run)
        status, env = await ws.poll(run, c["lease"])
        oid = env["observation_id"]
        status, sub = await ws.call("agent.subscribe", {"run_id": run, "agent_id": "engineer-1",
                                                        "lease": c["lease"], "parts": ["you", "affordances"]})
        assert status == 200
        await ws.submit(run, c["lease"], cmd("n1", oid))
        status, nxt = await ws.poll(run, c["lease"], after=0, wait=60)
        assert set(nxt) == {"run_id", "agent_id", "observation_id", "seq", "sim_time_ms", "reason", "deadline_unix",
                            "briefing_revision", "observation", "affordances"}
        assert set(nxt["observation"]) == {"you"}
        status, p = await ws.call("agent.subscribe", {"run_id": run, "agent_id": "engineer-1", "lease": c["lease"],
                                                      "parts": ["everything"]})
        assert status == 400 and p["rpc"]["code"] == -32602


async def test_ws_claim_parts_make_the_envelope_cheaper_not_just_smaller(autojump_clock, tmp_path):
    """agent.claim with parts [you, busy]: the pushed envelope has only those observation fields, and the server
    built no text, no affordances and no other field for it (the engine's observation stayed unbuilt); an HTTP
    long-poll of the same envelope then gets it whole, built on demand, equal to what an eager build gives."""
    async with served(tmp_path) as api, ws_agent(api) as ws:
        run = await api.create(controlled_agents=["engineer-1"])
        status, c = await ws.call("agent.claim", {"run_id": run, "agent_id": "engineer-1", "parts": ["you", "busy"]})
        assert status == 200
        for _ in range(100):
            pushed = [f for f in ws.frames if f.get("method") == "observation"]
            if pushed:
                break
            await trio.sleep(0.1)
        env = pushed[0]["params"]["envelope"]
        assert set(env) == {"run_id", "agent_id", "observation_id", "seq", "sim_time_ms", "reason", "deadline_unix",
                            "briefing_revision", "observation"}
        assert list(env["observation"]) == ["busy", "you"]  # the wire order of the observation's fields
        obs = api.manager.get(run).remote["engineer-1"].envelope.obs  # the engine's lazy observation
        made = obs._lazy or {}  # what the observation made lazily so far (text, affordances, the whole object)
        assert not {"text", "affordances", "observation"} & set(made)
        assert set(obs.view._built) == {"busy", "you"}
        status, whole = await api.poll(run, c["lease"])
        assert status == 200 and whole["observation_id"] == env["observation_id"]
        assert whole["text"] == obs.text and whole["affordances"] == obs.affordances
        assert whole["observation"] == obs.observation and whole["observation"]["you"] == env["observation"]["you"]
        status, bad = await ws.call("agent.claim", {"run_id": run, "agent_id": "engineer-1", "lease": c["lease"],
                                                    "parts": ["everything"]})
        assert status == 400 and bad["rpc"]["code"] == -32602 and "agent.claim: params.parts" in bad["rpc"]["data"]["detail"]


@pytest.mark.parametrize("rate", [1.0, 10.0])
async def test_ws_silent_peer_is_dropped_but_its_lease_lives(autojump_clock, tmp_path, caplog, rate):
    """A peer that never answers pings is closed after three heartbeat intervals (an expected end, logged as no
    error); its lease still works over HTTP. The intervals are real seconds under any ``--rate``: on the rated
    clock (``rate`` virtual seconds a real one) the drop comes after 3 x 5 x ``rate`` of it."""
    async with served(tmp_path, heartbeat_s=5, rate=rate) as api:
        run = await api.create(controlled_agents=["engineer-1"], decision_deadline_s=1000)
        async with api.client.websocket("/v1/agent") as raw:
            await raw.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "agent.claim",
                                       "params": {"run_id": run, "agent_id": "engineer-1"}}))
            lease = None
            closed = None
            began = trio.current_time()
            with trio.move_on_after(60 * rate):
                while True:
                    try:
                        msg = json.loads(await raw.receive())
                    except Exception as exc:  # the server closed the socket
                        closed = exc
                        break
                    if msg.get("id") == 1:
                        lease = msg["result"]["lease"]
            assert lease and closed is not None and closed.args[0] == 1001
            assert 3 * 5 * rate < trio.current_time() - began <= 4 * 5 * rate + 1
        status, _ = await HttpAgent(api).briefing(run, lease)
        assert status == 200
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


@pytest.mark.parametrize("kind", KINDS)
async def test_a_lost_same_batch_conflict_is_a_structured_field_of_the_receipt(autojump_clock, tmp_path, kind):
    """Two potters take the one pair of tongs in one batch: the loser's receipt says conflict {winner, resource}.

    The winner's receipt has conflict null, and the journal's outcome record carries the same object.
    """
    potters = ["potter-1", "potter-2"]
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run = await api.create("contention", seed=1, controlled_agents=potters, decision_deadline_s=10_000,
                               params={"potters": 2, "tongs": 1, "pots": 1})
        leases = {}
        for p in potters:
            status, claim = await agent.claim(run, agent=p)
            assert status == 200, claim
            leases[p] = claim["lease"]

        async def answer_all(decision: dict, after: dict[str, int]) -> dict[str, dict]:
            envs = {}
            for p in potters:
                status, env = await agent.poll(run, leases[p], after=after.get(p, -1), agent=p)
                assert status == 200, env
                envs[p] = env
            assert len({e["sim_time_ms"] for e in envs.values()}) == 1  # one batch
            receipts = {}
            for p, env in envs.items():
                cid = f"{p}-{env['seq']}"
                status, r = await agent.submit(run, leases[p], cmd(cid, env["observation_id"], **decision), agent=p)
                assert status == 200 and r["status"] == "accepted", r
                receipts[p] = (cid, env["seq"])
            return receipts

        moved = await answer_all({"action": "move_to", "args": {"dest": "kiln"}}, {})
        took = await answer_all({"action": "take", "args": {"item": "tongs-1"}},
                                {p: seq for p, (_, seq) in moved.items()})
        await trio.sleep(2)
        final = {p: (await agent.receipt(run, leases[p], cid, agent=p))[1] for p, (cid, _) in took.items()}
        (winner,) = [p for p, r in final.items() if r["outcome"] == "accepted"]
        (loser,) = [p for p, r in final.items() if r["outcome"] == "rejected"]
        assert final[winner]["conflict"] is None
        assert final[loser]["conflict"] == {"winner": winner, "resource": "tongs-1"}
        journal = api.journal(run)
        (rec,) = [r for r in journal if r["kind"] == "outcome" and "conflict" in r]
        assert rec["agent"] == loser and rec["conflict"] == final[loser]["conflict"]
