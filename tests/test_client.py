"""The client SDK (warren_sim.client) against the real app: in-process (httpx.ASGITransport, autojump clock) and
over a real Hypercorn on loopback (real clock). Every response these clients receive is validated against the
protocol's endpoint table and JSON Schemas by an httpx event hook (sdkhelpers.SchemaCheck)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import httpx
import pytest
import trio
from sdkhelpers import (
    LosingTransport,
    RewritingTransport,
    in_process,
    is_command_post,
    journal_verdicts,
    real_server,
)

from warren_sim.client import (
    BriefingHashMismatch,
    Conflict,
    LeaseRejected,
    NotFound,
    Observation,
    ProtocolError,
    RunEnded,
    TransportError,
    UnprocessableCommand,
    briefing_hash,
    succeeded,
)
from warren_sim.scenarios import load_scenario, make_policy


def solution_policy(briefing: dict, seed: int = 3):
    return make_policy(load_scenario("bridge_repair"), "solution", briefing["agent_id"], briefing["role"], briefing,
                                                      seed)


async def drive_to_end(agent, policy) -> int:
    decisions = 0
    async for obs in agent.observations():
        receipt = await agent.submit(obs, policy.decide(obs))
        assert receipt.status == "accepted", receipt
        decisions += 1
    return decisions


# --------------------------------------------------------------------------------------------- in-process


async def test_sdk_drives_engineer_to_completion_in_process(autojump_clock):
    """The trio SDK claims engineer-1, verifies its briefing, answers every observation and sees the run complete."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        assert run.status == "created"
        async with client.claim(run.run_id, "engineer-1") as agent:
            assert not agent.resumed
            briefing = await agent.briefing()
            assert briefing["content_hash"] == briefing_hash(briefing)
            decisions = await drive_to_end(agent, solution_policy(briefing))
        assert agent.run_status == "completed" and decisions >= 5
        final = await client.get_run(run.run_id)
        assert final.status == "completed" and final.result["status"] == "completed"
        assert [a.claimed for a in final.agents if a.agent_id == "engineer-1"] == [False]  # released on exit


async def test_observation_has_policy_attributes(autojump_clock):
    """Envelopes are handed out as Observation objects with the policy interface's attributes (time = sim_time_ms)."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        async with client.claim(run.run_id, "engineer-1") as agent:
            obs = await agent.next_observation()
            assert isinstance(obs, Observation)
            assert (obs.agent_id, obs.observation_id, obs.seq, obs.time, obs.reason) == \
                ("engineer-1", "engineer-1#0", 0, obs.sim_time_ms, "start")
            assert obs.observation["agent"] == "engineer-1" and obs.affordances and obs.text.startswith("[t=0s]")
            assert agent.delivered_seq == 0
        await client.cancel_run(run.run_id)


async def test_briefing_is_fetched_once_per_revision(autojump_clock):
    """A second briefing() is served from the cache: no second request."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        agent = await client.claim(run.run_id, "engineer-1")
        first = await agent.briefing()
        before = env.check.count
        assert await agent.briefing() is first
        assert env.check.count == before
        await client.cancel_run(run.run_id)


async def test_tampered_briefing_fails_its_hash_check(autojump_clock):
    """A briefing whose content no longer matches content_hash raises BriefingHashMismatch."""

    def tamper(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if not request.url.path.endswith("/briefing"):
            return response
        data = json.loads(response.content)
        data["premise"] = "Burn the bridge."
        return httpx.Response(200, headers=response.headers, json=data, request=request)

    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        async with env.client(lambda t: RewritingTransport(t, alter=tamper)) as bad:
            agent = await bad.claim(run.run_id, "engineer-1")
            with pytest.raises(BriefingHashMismatch, match="content_hash"):
                await agent.briefing()
        await client.cancel_run(run.run_id)


async def test_response_without_protocol_header_is_a_protocol_error(autojump_clock):
    """The SDK refuses a success response that lacks X-Warren-Protocol: it is not talking to warren-agent/0."""

    def strip(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        headers = {k: v for k, v in response.headers.items() if k.lower() != "x-warren-protocol"}
        return httpx.Response(response.status_code, headers=headers, content=response.content, request=request)

    async with in_process() as env, env.client(lambda t: RewritingTransport(t, alter=strip)) as bad:
        with pytest.raises(ProtocolError, match="X-Warren-Protocol"):
            await bad.list_runs()


async def test_redelivered_envelopes_are_dropped_unless_redelivery_is_asked(autojump_clock):
    """An at-least-once server may resend an envelope; the SDK hands it out once, and again only after redeliver()."""

    def resend(request: httpx.Request) -> httpx.Request:  # make the server redeliver the outstanding envelope
        if request.url.path.endswith("/observations"):
            return httpx.Request(request.method, request.url.copy_merge_params({"after": "-1"}),
                                 headers=request.headers)
        return request

    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        async with env.client(lambda t: RewritingTransport(t, rewrite=resend)) as redelivering:
            agent = await redelivering.claim(run.run_id, "engineer-1")
            first = await agent.poll(wait=1)
            assert first is not None and first.seq == 0
            assert await agent.poll(wait=1) is None  # the same envelope again: dropped
            agent.redeliver()
            again = await agent.poll(wait=1)
            assert again is not None and again.observation_id == first.observation_id
        await client.cancel_run(run.run_id)


async def test_resume_with_saved_lease_redelivers_outstanding_envelope(autojump_clock):
    """A client that lost its connection (and state) claims with its saved lease: same token, same envelope."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        async with env.client() as first_process:
            agent = await first_process.claim(run.run_id, "engineer-1")
            lost = await agent.next_observation()
            token = agent.detach()
        async with env.client() as second_process:
            async with second_process.claim(run.run_id, "engineer-1", lease=token) as again:
                assert again.resumed and again.lease == token
                obs = await again.next_observation()
                assert obs.observation_id == lost.observation_id
                receipt = await again.submit(obs, {"action": "take", "args": {"item": "toolbox-1"}})
                assert receipt.status == "accepted"
                again.redeliver()  # the envelope is answered now: nothing outstanding to redeliver
                nxt = await again.next_observation()
                assert nxt.seq == 1
        await client.cancel_run(run.run_id)


async def test_lost_submit_response_is_retried_as_duplicate_not_second_acceptance(autojump_clock):
    """The server accepted a command whose answer was lost; the SDK's retry under the same id gets duplicate."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        losing: list[LosingTransport] = []

        def wrap(t):
            losing.append(LosingTransport(t, is_command_post, after=True))
            return losing[0]

        async with env.client(wrap) as flaky:
            agent = await flaky.claim(run.run_id, "engineer-1")
            obs = await agent.next_observation()
            receipt = await agent.submit(obs, {"action": "take", "args": {"item": "toolbox-1"}},
                                         command_id="c-lost-answer")
            assert len(losing[0].dropped) == 1
            assert receipt.status == "duplicate" and succeeded(receipt)
            assert receipt.command_id == "c-lost-answer" and receipt.observation_id == obs.observation_id
            assert journal_verdicts(env, run.run_id, "c-lost-answer") == ["accepted", "duplicate"]
            settled = await agent.wait_outcome("c-lost-answer")
            assert settled.status == "accepted" and settled.outcome == "accepted"
            assert (await agent.next_observation()).seq == 1  # one acceptance moved the agent on once
        await client.cancel_run(run.run_id)


async def test_submit_that_never_arrived_is_accepted_on_retry(autojump_clock):
    """A command that failed before reaching the server is simply accepted when the SDK retries it."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        async with env.client(lambda t: LosingTransport(t, is_command_post, after=False)) as flaky:
            agent = await flaky.claim(run.run_id, "engineer-1")
            obs = await agent.next_observation()
            receipt = await agent.submit(obs, {"noop": True})
            assert receipt.status == "accepted"
            assert journal_verdicts(env, run.run_id, receipt.command_id) == ["accepted"]
        await client.cancel_run(run.run_id)


async def test_transport_errors_beyond_the_retries_raise_transport_error(autojump_clock):
    """When every try fails the SDK gives up with TransportError, its cause the httpx error."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        always = lambda t: LosingTransport(t, lambda r: r.url.path.endswith("/briefing"), after=False, times=99)  # noqa: E731
        async with env.client(always) as flaky:
            agent = await flaky.claim(run.run_id, "engineer-1")
            with pytest.raises(TransportError) as info:
                await agent.briefing()
            assert isinstance(info.value.__cause__, httpx.ConnectError)
        await client.cancel_run(run.run_id)


async def test_verdicts_come_back_as_receipts(autojump_clock):
    """rejected, stale and unknown-observation verdicts are receipts; non-string ids raise UnprocessableCommand."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        async with client.claim(run.run_id, "engineer-1") as agent:
            obs = await agent.next_observation()
            bad = await agent.submit(obs, {"sleep_ms": "soon"}, command_id="c-1")
            assert bad.status == "rejected" and "sleep_ms" in bad.detail and not succeeded(bad)
            fixed = await agent.submit(obs, {"noop": True}, command_id="c-1")  # a rejected id is re-judged
            assert fixed.status == "accepted"
            stale = await agent.submit(obs, {"noop": True})
            assert stale.status == "stale" and stale.outcome == "none"
            unknown = await agent.submit("engineer-1#999", {"noop": True})
            assert unknown.status == "rejected" and "unknown observation" in unknown.detail
            with pytest.raises(UnprocessableCommand, match="command_id"):
                await agent.submit(obs, {"noop": True}, command_id=5)  # type: ignore[arg-type]
            assert (await agent.receipt("c-1")).status == "accepted"
            with pytest.raises(NotFound):
                await agent.receipt("c-never")
        await client.cancel_run(run.run_id)


async def test_lease_conflicts_and_released_leases_raise(autojump_clock):
    """A claim of a held agent raises Conflict; a released lease raises LeaseRejected; claiming again works."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        agent = await client.claim(run.run_id, "engineer-1")
        with pytest.raises(Conflict, match="held by another lease"):
            await client.claim(run.run_id, "engineer-1")
        with pytest.raises(Conflict, match="not a controlled agent"):
            await client.claim(run.run_id, "medic-1")
        await agent.release()
        with pytest.raises(LeaseRejected):
            await agent.briefing()
        fresh = await client.claim(run.run_id, "engineer-1")
        assert fresh.lease != agent.lease
        await client.cancel_run(run.run_id)


async def test_run_ended_raises_with_terminal_status(autojump_clock):
    """After a cancel, polls and claims raise RunEnded carrying 'cancelled'; the iterator just ends."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        async with client.claim(run.run_id, "engineer-1") as agent:
            obs = await agent.next_observation()
            view = await client.cancel_run(run.run_id)
            assert view.status == "cancelled"
            with pytest.raises(RunEnded) as info:
                await agent.next_observation()
            assert info.value.status == "cancelled" and info.value.status_code == 410
            assert agent.run_status == "cancelled"
            late = await agent.submit(obs, {"noop": True})
            assert late.status == "expired" and "run ended" in late.detail
            assert [o async for o in agent.observations()] == []
        with pytest.raises(RunEnded) as info:
            await client.claim(run.run_id, "engineer-1")
        assert info.value.status == "cancelled"
        assert (await client.wait_run_ended(run.run_id)).status == "cancelled"


async def test_run_ended_status_is_data_never_prose(autojump_clock):
    """RunEnded.status is the 410's run_status member when the server sends it (no further request); from a
    server that does not, the SDK asks GET /v1/runs/{run}. The detail's prose is never read: here it lies."""
    asked: list[str] = []

    def record(request: httpx.Request) -> httpx.Request:
        asked.append(f"{request.method} {request.url.path}")
        return request

    def gone_with(member: dict[str, str]) -> Callable[[httpx.Request, httpx.Response], httpx.Response]:
        def alter(request: httpx.Request, response: httpx.Response) -> httpx.Response:
            if response.status_code != 410:
                return response
            problem = {k: v for k, v in json.loads(response.content).items() if k != "run_status"}
            problem.update(member, detail=f"the status failed, says this prose; {problem['detail']}")
            return httpx.Response(410, headers=response.headers, json=problem, request=request)
        return alter

    async with in_process() as env, env.client() as client:
        for member, gets in [({"run_status": "cancelled"}, 0), ({}, 1)]:
            wrap = functools.partial(RewritingTransport, rewrite=record, alter=gone_with(member))
            async with env.client(wrap) as other:
                run = await other.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
                agent = await other.claim(run.run_id, "engineer-1")
                await client.cancel_run(run.run_id)
                asked.clear()
                with pytest.raises(RunEnded) as info:
                    await agent.poll(wait=1)
                assert info.value.status == "cancelled" and agent.run_status == "cancelled"
                with pytest.raises(RunEnded) as info:
                    await other.claim(run.run_id, "engineer-1", lease=agent.lease)
                assert info.value.status == "cancelled"
                assert asked.count(f"GET /v1/runs/{run.run_id}") == 2 * gets, asked


# --------------------------------------------------------------------------------------------- real Hypercorn


async def test_real_server_resume_after_dropped_connection(tmp_path):
    """Over real HTTP: a submit whose answer is lost is retried as duplicate; a new process resumes the lease."""
    async with real_server(tmp_path) as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        async with env.client(lambda t: LosingTransport(t, is_command_post, after=True)) as flaky:
            agent = await flaky.claim(run.run_id, "engineer-1")
            briefing = await agent.briefing()
            policy = solution_policy(briefing)
            obs = await agent.next_observation()
            receipt = await agent.submit(obs, policy.decide(obs), command_id="c-first")
            assert receipt.status == "duplicate" and receipt.outcome in ("pending", "accepted")
            assert journal_verdicts(env, run.run_id, "c-first") == ["accepted", "duplicate"]
            second = await agent.next_observation()  # outstanding now; the process "dies" before answering it
            token = agent.detach()
        async with env.client() as restarted:
            async with restarted.claim(run.run_id, "engineer-1", lease=token) as again:
                assert again.resumed
                redelivered = await again.next_observation()
                assert redelivered.observation_id == second.observation_id
                retry = await again.submit("engineer-1#0", {"noop": True}, command_id="c-first")
                assert retry.status == "duplicate"  # a retry after the restart: still one acceptance
                first = await again.submit(redelivered, policy.decide(redelivered))
                assert first.status == "accepted"
                decisions = await drive_to_end(again, policy)
            assert again.run_status == "completed" and decisions >= 3


async def test_real_server_run_ended_raises(tmp_path):
    """Over real HTTP a long-poll in progress when the run is cancelled ends in RunEnded('cancelled')."""
    async with real_server(tmp_path) as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        async with client.claim(run.run_id, "engineer-1") as agent:
            await agent.next_observation()
            async with trio.open_nursery() as nursery:
                async def cancel_soon() -> None:
                    await trio.sleep(0.2)
                    await client.cancel_run(run.run_id)

                nursery.start_soon(cancel_soon)
                with pytest.raises(RunEnded) as info:
                    await agent.next_observation(wait=5)
            assert info.value.status == "cancelled"


async def test_sync_client_drives_engineer_over_real_http(tmp_path):
    """The blocking AgentClient (in a worker thread) drives engineer-1 to completion against Hypercorn."""
    async with real_server(tmp_path) as env:

        def blocking_agent() -> tuple[str | None, str]:
            with env.sync_client() as client:
                run = client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
                with client.claim(run.run_id, "engineer-1") as agent:
                    policy = solution_policy(agent.briefing())
                    for obs in agent.observations(wait=5):
                        assert agent.submit(obs, policy.decide(obs)).status == "accepted"
                return agent.run_status, client.get_run(run.run_id).status

        with trio.fail_after(30):
            assert await trio.to_thread.run_sync(blocking_agent) == ("completed", "completed")


def test_public_names_are_exported():
    """Every name in warren_sim.client.__all__ exists, and every exception of the hierarchy is exported."""
    import inspect

    import warren_sim.client as sdk
    from warren_sim.client import _exceptions

    assert all(hasattr(sdk, name) for name in sdk.__all__)
    errors = {n for n, obj in vars(_exceptions).items() if inspect.isclass(obj) and issubclass(obj, Exception)}
    assert errors <= set(sdk.__all__)
    assert issubclass(sdk.RunEnded, sdk.ServerError) and issubclass(sdk.BriefingHashMismatch, sdk.ProtocolError)


async def test_sdk_create_run_with_controlled_agents_selectors(autojump_clock):
    """create_run(controlled_agents="all" | {"role": R}) sends the selector; any other string is a TypeError."""
    async with in_process() as env, env.client() as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents="all")
        assert sorted(a.agent_id for a in run.agents if a.controlled) == ["courier-1", "engineer-1", "medic-1"]
        run = await client.create_run("bridge_repair", 3, controlled_agents={"role": "medic"})
        assert [a.agent_id for a in run.agents if a.controlled] == ["medic-1"]
        with pytest.raises(TypeError, match='"all" or'):
            await client.create_run("bridge_repair", 3, controlled_agents="engineer-1")
