"""The two request-saving extensions of warren-agent/0 (docs/client.md "Fewer requests"), against the real app:

* ``POST /v1/runs/{run}/claim`` with ``{"agents": "all" | {"role": R} | [ids]}``: a fresh lease per agent,
  all or none, in one request;
* ``POST .../commands?wait=S``: the receipt carries ``next_observation`` (one request per decision);
* ``POST /v1/runs/{run}/observations?wait=S``: one long-poll for several agents, each with its own lease.

Every response is checked against the endpoint table and the JSON Schemas (server_helpers / sdkhelpers), and
the seed's own rules stay in tests/test_server_protocol.py.
"""

from __future__ import annotations

import json

import pytest
import trio
from sdkhelpers import in_process, real_server
from server_helpers import served

from warren_sim.client import RunEnded
from warren_sim.runtime.leases import digest
from warren_sim.scenarios import load_scenario, make_policy


def cmd(cid: str, oid: str, **decision):
    return {"command_id": cid, "observation_id": oid, **(decision or {"noop": True})}


def claims(api, run: str) -> list[str]:
    return [r["agent"] for r in api.journal(run) if r["kind"] == "claim"]


# --------------------------------------------------------------------------------------------- bulk claim


async def test_bulk_claim_all_gives_each_agent_its_own_lease_and_starts_the_run(autojump_clock, tmp_path):
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents="all")
        ids = [a["agent_id"] for a in (await api.run_view(run))["agents"]]
        status, body = await api.call("POST", f"/v1/runs/{run}/claim", {"agents": "all"})
        assert status == 200 and body["briefing_revision"] == 1
        leases = body["leases"]
        assert sorted(leases) == sorted(ids) and len(set(leases.values())) == len(ids)
        view = await api.run_view(run)
        assert view["status"] == "running" and all(a["claimed"] for a in view["agents"])
        assert claims(api, run) == list(leases)  # journaled like single claims (restore replays them)
        sidecar = json.loads((tmp_path / "data" / f"{run}.leases.json").read_text())
        assert sidecar["sha256"] == {aid: digest(tok) for aid, tok in leases.items()}
        for aid, lease in leases.items():  # each token is that agent's lease, and only that agent's
            status, env = await api.poll(run, lease, agent=aid)
            assert status == 200 and env["agent_id"] == aid and env["seq"] == 0
        other = ids[1]
        status, body = await api.call("GET", f"/v1/runs/{run}/agents/{other}/briefing?lease={leases[ids[0]]}")
        assert status == 403


async def test_bulk_claim_by_role_and_by_ids(autojump_clock, tmp_path):
    async with served(tmp_path) as api:
        run = await api.create("warren", 1, controlled_agents="all", params={"agents": 6}, npc_policy="none")
        ids = [a["agent_id"] for a in (await api.run_view(run))["agents"]]
        status, body = await api.call("POST", f"/v1/runs/{run}/claim", {"agents": ids[:2]})
        assert status == 200 and list(body["leases"]) == ids[:2]
        assert (await api.run_view(run))["status"] == "created"  # not everyone yet: no start observation missed
        status, body = await api.call("POST", f"/v1/runs/{run}/claim", {"agents": {"role": "forager"}})
        assert status == 409 and "2 of the 6" in body["detail"] and "nothing was claimed" in body["detail"]
        status, body = await api.call("POST", f"/v1/runs/{run}/claim", {"agents": ids[2:]})
        assert status == 200 and list(body["leases"]) == ids[2:]
        assert (await api.run_view(run))["status"] == "running"


async def test_bulk_claim_refusals_teach_and_change_nothing(autojump_clock, tmp_path):
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1", "courier-1"])
        held = await api.claim(run, "engineer-1")
        before = list(api.journal(run))
        cases = [
            ({"agents": "all"}, 409, "held by live leases (engineer-1)"),
            ({"agents": []}, 400, "empty list"),
            ({"agents": ["nobody-9"]}, 404, "has no agent 'nobody-9'"),
            ({"agents": ["medic-1"]}, 409, "not a controlled agent"),
            ({"agents": {"role": "pilot"}}, 400, "its roles:"),
            ({"agents": {"role": "medic"}}, 409, "no medic"),
            ({"agents": ["courier-1", "courier-1"]}, 400, "listed twice"),
            ({"agents": "some"}, 400, '{"agents": "all"}'),
            ({"agent": "all"}, 400, "agents"),
        ]
        for body, status, words in cases:
            got, problem = await api.call("POST", f"/v1/runs/{run}/claim", body)
            assert (got, words in problem["detail"]) == (status, True), (body, problem)
        got, problem = await api.call("POST", f"/v1/runs/{run}/claim")
        assert got == 400
        got, problem = await api.call("POST", f"/v1/runs/{run}/claim?protocol=warren-agent/9", {"agents": "all"})
        assert got == 409
        assert api.journal(run) == before and not api.manager.runs[run].remote["courier-1"].claimed
        status, _ = await api.poll(run, held, wait=0)  # the held lease is untouched
        assert status in (200, 204)
        await api.call("DELETE", f"/v1/runs/{run}")
        got, problem = await api.call("POST", f"/v1/runs/{run}/claim", {"agents": ["courier-1"]})
        assert got == 410 and "cancelled" in problem["detail"]


@pytest.mark.slow
async def test_bulk_claim_of_10000_agents_is_one_request(autojump_clock, tmp_path):
    """The scale case: one 20-byte request claims a 10,000-agent run (10,000 single claims each rewrote the
    lease sidecar: quadratic); the reply holds 10,000 distinct tokens and the run starts."""
    async with served(tmp_path) as api:
        run = await api.create("warren", 1, controlled_agents="all", params={"agents": 10_000}, npc_policy="none")
        status, body = await api.call("POST", f"/v1/runs/{run}/claim", {"agents": "all"})
        assert status == 200 and len(set(body["leases"].values())) == 10_000
        assert (await api.run_view(run))["status"] == "running"
        assert len(claims(api, run)) == 10_000


# --------------------------------------------------------------------------------------------- submit + next


async def _one_agent(api, **body):
    run = await api.create(controlled_agents=["engineer-1"], **body)
    lease = await api.claim(run)
    status, env = await api.poll(run, lease)
    assert status == 200
    return run, lease, env


async def test_submit_with_wait_returns_the_next_observation(autojump_clock, tmp_path):
    async with served(tmp_path) as api:
        run, lease, env = await _one_agent(api)
        base = f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}"
        status, r = await api.call("POST", base + "&wait=25", cmd("c0", env["observation_id"], sleep_ms=500))
        assert status == 200 and r["status"] == "accepted"
        nxt = r["next_observation"]
        assert nxt["seq"] > env["seq"] and nxt["agent_id"] == "engineer-1"
        assert r["outcome"] == "accepted"  # adjudicated before the next observation existed: the outcome is known
        status, polled = await api.poll(run, lease, after=-1, wait=0)  # the same envelope a poll would give
        assert status == 200 and polled == nxt
        # without ?wait= the receipt is the seed's: no next_observation key
        status, r = await api.call("POST", base, cmd("c1", nxt["observation_id"]))
        assert status == 200 and "next_observation" not in r and r["outcome"] == "pending"


async def test_submit_with_wait_does_not_wait_after_a_refusal(autojump_clock, tmp_path):
    """A rejected command leaves the observation to answer: next_observation is null at once; a duplicate
    waits like the acceptance it repeats."""
    async with served(tmp_path) as api:
        run, lease, env = await _one_agent(api, decision_deadline_s=1000)
        base = f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}&wait=30"
        t0 = trio.current_time()
        status, r = await api.call("POST", base, cmd("bad", env["observation_id"], sleep_ms="soon"))
        assert status == 200 and r["status"] == "rejected" and r["next_observation"] is None
        assert trio.current_time() == t0
        status, r = await api.call("POST", base, cmd("ok", env["observation_id"], sleep_ms=100))
        assert r["status"] == "accepted" and r["next_observation"]["seq"] == env["seq"] + 1
        status, r = await api.call("POST", base, cmd("ok", env["observation_id"], sleep_ms=100))
        assert r["status"] == "duplicate" and r["next_observation"]["seq"] == env["seq"] + 1


async def test_submit_with_wait_times_out_to_null_and_bad_wait_changes_nothing(autojump_clock, tmp_path):
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1", "courier-1"], decision_deadline_s=1000)
        lease = await api.claim(run, "engineer-1")
        await api.claim(run, "courier-1")  # claimed and silent: the batch waits for it
        _, env = await api.poll(run, lease)
        before = len(api.journal(run))
        status, problem = await api.call(
            "POST", f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}&wait=soon", cmd("c0", env["observation_id"]))
        assert status == 400 and "wait" in problem["detail"] and len(api.journal(run)) == before
        t0 = trio.current_time()
        status, r = await api.call(
            "POST", f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}&wait=7", cmd("c0", env["observation_id"]))
        assert r["status"] == "accepted" and r["next_observation"] is None and r["outcome"] == "pending"
        assert trio.current_time() - t0 == pytest.approx(7, abs=0.01)


async def test_submit_with_wait_answers_null_when_the_run_ends(autojump_clock, tmp_path):
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1", "courier-1"], decision_deadline_s=1000)
        lease = await api.claim(run, "engineer-1")
        await api.claim(run, "courier-1")
        _, env = await api.poll(run, lease)
        out = {}

        async def submit():
            out["r"] = await api.call("POST", f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}&wait=50",
                                      cmd("c0", env["observation_id"]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(submit)
            await trio.sleep(3)
            await api.call("DELETE", f"/v1/runs/{run}")
        status, r = out["r"]
        assert status == 200 and r["status"] == "accepted" and r["next_observation"] is None


# --------------------------------------------------------------------------------------------- multi-poll


async def test_multi_poll_delivers_every_agents_envelope_in_one_request(autojump_clock, tmp_path):
    async with served(tmp_path) as api:
        run = await api.create("warren", 1, controlled_agents="all", params={"agents": 6}, npc_policy="none",
                               decision_deadline_s=1000)
        _, body = await api.call("POST", f"/v1/runs/{run}/claim", {"agents": "all"})
        leases = body["leases"]
        status, got = await api.call("POST", f"/v1/runs/{run}/observations?wait=25", {"leases": leases})
        assert status == 200 and [e["agent_id"] for e in got["observations"]] == list(leases)
        assert all(e["seq"] == 0 for e in got["observations"])
        after = {aid: 0 for aid in leases}
        t0 = trio.current_time()
        status, none = await api.call("POST", f"/v1/runs/{run}/observations?wait=5",
                                      {"leases": leases, "after": after})
        assert status == 204 and trio.current_time() - t0 == pytest.approx(5, abs=0.01)
        remote = api.manager.runs[run].remote
        assert all(not ra.listeners for ra in remote.values())  # a poll leaves nothing behind

        out = {}

        async def poll():
            out["r"] = await api.call("POST", f"/v1/runs/{run}/observations?wait=50",
                                      {"leases": leases, "after": after})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(1)
            for env in got["observations"]:  # answering the batch publishes the next one: the poll wakes
                aid = env["agent_id"]
                status, r = await api.submit(run, leases[aid], cmd(f"c-{aid}", env["observation_id"]), agent=aid)
                assert r["status"] == "accepted"
        status, nxt = out["r"]
        assert status == 200 and nxt["observations"]
        assert all(e["seq"] > 0 and e["agent_id"] in leases for e in nxt["observations"])
        assert all(not ra.listeners for ra in remote.values())


async def test_multi_poll_parts_narrow_the_envelopes_and_spare_building_the_rest(autojump_clock, tmp_path):
    async with served(tmp_path) as api:
        run = await api.create("warren", 1, controlled_agents="all", params={"agents": 4}, npc_policy="none")
        _, body = await api.call("POST", f"/v1/runs/{run}/claim", {"agents": "all"})
        leases = body["leases"]
        status, got = await api.call("POST", f"/v1/runs/{run}/observations?wait=5",
                                     {"leases": leases, "parts": ["you", "place"]})
        assert status == 200 and len(got["observations"]) == 4
        for env in got["observations"]:
            assert set(env["observation"]) == {"you", "place"} and "text" not in env and "affordances" not in env
        remote = api.manager.runs[run].remote
        assert all(ra.envelope._full is None for ra in remote.values())  # the whole envelope was never built
        aid = next(iter(leases))
        status, whole = await api.poll(run, leases[aid], agent=aid)  # the single poll still gets all of it
        assert status == 200 and whole["text"] and whole["observation"]["you"] == got["observations"][0]["observation"]["you"]
        for parts in ([], ["colour"], "text"):
            status, problem = await api.call("POST", f"/v1/runs/{run}/observations", {"leases": leases, "parts": parts})
            assert status == 400 and "parts" in problem["detail"], problem


async def test_multi_poll_refusals_teach_and_change_nothing(autojump_clock, tmp_path):
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents="all")
        _, body = await api.call("POST", f"/v1/runs/{run}/claim", {"agents": "all"})
        leases = body["leases"]
        url = f"/v1/runs/{run}/observations?wait=1"
        before = list(api.journal(run))
        cases = [
            ({"leases": {**leases, "medic-1": "l-wrong"}}, 403, "does not hold medic-1"),
            ({"leases": {"engineer-1": ""}}, 401, "needs ?lease="),
            ({"leases": {**leases, "nobody-1": "l-x"}}, 404, "has no agent 'nobody-1'"),
            ({"leases": {}}, 400, "leases is empty"),
            ({"leases": leases, "after": {"nobody-1": 0}}, 400, "not in leases"),
            ({"leases": leases, "after": {"engineer-1": -2}}, 400, ">= -1"),
            ({"after": {}}, 400, "leases"),
            ({"leases": leases, "after": {"engineer-1": "0"}}, 400, "after"),
        ]
        for body, status, words in cases:
            got, problem = await api.call("POST", url, body)
            assert (got, words in problem["detail"]) == (status, True), (body, problem)
        got, problem = await api.call("POST", f"/v1/runs/{run}/observations?wait=x", {"leases": leases})
        assert got == 400 and "wait" in problem["detail"]
        assert api.journal(run) == before
        await api.call("DELETE", f"/v1/runs/{run}")
        got, problem = await api.call("POST", url, {"leases": leases})
        assert got == 410 and "cancelled" in problem["detail"]


# --------------------------------------------------------------------------------------------- the SDK


def _policy(briefing):
    return make_policy(load_scenario("bridge_repair"), "solution", briefing["agent_id"], briefing["role"], briefing, 3)


async def test_sdk_claim_many_and_next_wait_drive_a_run_with_one_request_per_decision(autojump_clock):
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents="all")
        agents = await client.claim_many(run.run_id, "all")
        assert sorted(a.agent_id for a in agents) == sorted(v.agent_id for v in run.agents)
        decisions = {}

        async def drive(agent):
            policy = _policy(await agent.briefing())
            n = 0
            async for obs in agent.observations():
                receipt = await agent.submit(obs, policy.decide(obs), next_wait=30)
                assert receipt.status == "accepted"
                n += 1
            decisions[agent.agent_id] = n

        async with trio.open_nursery() as nursery:
            for agent in agents:
                nursery.start_soon(drive, agent)
        assert (await client.get_run(run.run_id)).status == "completed"
        polls = [s for s in env.check.statuses if s[0] == "GET" and s[1].endswith("/observations")]
        posts = [s for s in env.check.statuses if s[0] == "POST" and s[1].endswith("/commands")]
        assert len(posts) == sum(decisions.values()) >= 10
        # one poll per agent to start, one per observation that outlived a submit's wait, one 410 at the end
        assert len(polls) <= 3 * len(agents) < len(posts)
        claims = [s for s in env.check.statuses if s[1].endswith("/claim")]
        assert claims == [("POST", f"/v1/runs/{run.run_id}/claim", 200)]


async def test_sdk_claim_many_by_role_and_run_ended(autojump_clock):
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents="all")
        [medic] = await client.claim_many(run.run_id, {"role": "medic"})
        assert medic.agent_id == "medic-1" and medic.lease
        await client.cancel_run(run.run_id)
        with pytest.raises(RunEnded) as info:
            await client.claim_many(run.run_id, ["engineer-1"])
        assert info.value.status == "cancelled"
        with pytest.raises(TypeError):
            await client.claim_many(run.run_id, "everyone")


async def test_sync_sdk_claim_many_and_next_wait_over_real_http(tmp_path):
    async with real_server(tmp_path) as env:

        def blocking() -> tuple[str | None, str]:
            with env.sync_client() as client:
                run = client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
                [agent] = client.claim_many(run.run_id, ["engineer-1"])
                policy = _policy(agent.briefing())
                for obs in agent.observations(wait=5):
                    assert agent.submit(obs, policy.decide(obs), next_wait=5).status == "accepted"
                return agent.run_status, client.get_run(run.run_id).status

        with trio.fail_after(30):
            assert await trio.to_thread.run_sync(blocking) == ("completed", "completed")


async def test_sdk_poll_many_drives_many_agents_with_one_poll_per_batch(autojump_clock):
    """claim_many + poll_many + submit: a 12-agent warren run to its end, one poll request per round."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("warren", 1, controlled_agents="all", npc_policy="none",
                                      params={"agents": 12})
        agents = await client.claim_many(run.run_id)
        by_id = {a.agent_id: a for a in agents}
        sol = load_scenario("warren", {"agents": 12})
        policies = {a.agent_id: make_policy(sol, "solution", a.agent_id, "forager", await a.briefing(), 1)
                    for a in agents}
        per_round: list[int] = []
        with pytest.raises(RunEnded):
            for _ in range(10_000):
                got = await client.poll_many(agents, wait=30)
                per_round.append(len(got))
                for obs in got:
                    receipt = await by_id[obs.agent_id].submit(obs, policies[obs.agent_id].decide(obs))
                    assert receipt.status == "accepted"
        assert (await client.get_run(run.run_id)).status == "completed"
        polls = [s for s in env.check.statuses if s[1].endswith(f"/runs/{run.run_id}/observations")]
        # one request a round (plus the 410 that ends it); the start batch's 12 envelopes came in one reply
        assert len(polls) == len(per_round) + 1 and per_round[0] == 12 and sum(per_round) > len(per_round)
        assert all(a.run_status == "completed" for a in agents)


async def test_sync_sdk_poll_many_over_real_http(tmp_path):
    async with real_server(tmp_path) as env:

        def blocking() -> tuple[int, str]:
            with env.sync_client() as client:
                run = client.create_run("bridge_repair", 3, controlled_agents="all")
                agents = client.claim_many(run.run_id, "all")
                first = client.poll_many(agents, wait=5, parts=["observation"])
                assert all(obs.text == "" and obs.affordances == [] and obs.observation["agent"] for obs in first)
                return len(first), client.cancel_run(run.run_id).status

        with trio.fail_after(30):
            assert await trio.to_thread.run_sync(blocking) == (3, "cancelled")
