"""The SDK's WebSocket transport (AsyncWsAgentClient over WS /v1/agent) against a real Hypercorn on loopback (real
clock, port 0), and `warren agent --transport ws` against a `warren serve --port 0` subprocess. Runs are created
over HTTP through the schema-checking httpx client of sdkhelpers."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import trio
from sdkhelpers import FAST_RETRY, Env, real_server

import warren_sim.client
from warren_sim.client import (
    AsyncWsAgent,
    AsyncWsAgentClient,
    Conflict,
    LeaseRejected,
    NotFound,
    RunEnded,
    TransportError,
    UnprocessableCommand,
    succeeded,
    ws_url,
)
from warren_sim.http.server import start_server
from warren_sim.runtime.manager import ServerConfig
from warren_sim.scenarios import load_scenario, make_policy

PY = [sys.executable, "-m", "warren_sim.cli"]


def policy_for(briefing: dict[str, Any], seed: int = 3) -> Any:
    return make_policy(load_scenario("bridge_repair"), "solution", briefing["agent_id"], briefing["role"], briefing,
                                                      seed)


class FaultySocket:
    """Wraps a trio-websocket connection, records the frames, and loses the first incoming frame that ``drop``
    picks: the frame is discarded and the connection closed, as if the network died just before it arrived."""

    def __init__(self, inner: Any, log: FaultLog) -> None:
        self.inner, self.log = inner, log

    async def send_message(self, message: str) -> None:
        self.log.sent.append(json.loads(message))
        await self.inner.send_message(message)

    async def get_message(self) -> str | bytes:
        raw = await self.inner.get_message()
        frame = json.loads(raw)
        messages = frame if isinstance(frame, list) else [frame]  # the client asks for batched frames
        self.log.received.extend(messages)
        picked = [m for m in messages if self.log.left > 0 and self.log.drop(m, self.log)]
        if picked:
            self.log.left -= 1
            self.log.dropped.extend(picked)  # the frame (all of messages) is lost
            await self.inner.aclose()
            return await self.inner.get_message()  # raises ConnectionClosed
        return raw

    async def aclose(self) -> None:
        await self.inner.aclose()


class FaultLog:
    """What the FaultySocket wrappers of one client saw (over all its connections)."""

    def __init__(self, drop: Callable[[dict[str, Any], FaultLog], bool] = lambda m, log: False) -> None:
        self.drop, self.left = drop, 1
        self.sent: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []
        self.dropped: list[dict[str, Any]] = []

    def wrap(self, inner: Any) -> FaultySocket:
        return FaultySocket(inner, self)

    def sent_ids(self, method: str) -> set[Any]:
        return {m["id"] for m in self.sent if m.get("method") == method}

    def notes(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.received if m.get("method") == method]


def ws_client(env: Env, log: FaultLog | None = None, frames: str = "batched") -> AsyncWsAgentClient:
    return AsyncWsAgentClient(env.http(), retry=FAST_RETRY, owns_http=True, timeout=5.0,
                              socket_wrapper=None if log is None else log.wrap, frames=frames)


async def drive(agent: AsyncWsAgent) -> int:
    policy = policy_for(await agent.briefing())
    decisions = 0
    async for obs in agent.observations(wait=5):
        receipt = await agent.submit(obs, policy.decide(obs))
        assert receipt.status == "accepted", receipt
        decisions += 1
    return decisions


async def journal(env: Env, run_id: str) -> list[dict[str, Any]]:
    async with env.http() as http:
        r = await http.get(f"/v1/runs/{run_id}/journal")
    assert r.status_code == 200
    return [json.loads(line) for line in r.text.splitlines()]


async def test_ws_sdk_drives_engineer_to_completion(tmp_path):
    """Over WS the SDK claims engineer-1, checks its briefing, answers every pushed envelope and sees completion."""
    async with real_server(tmp_path) as env, ws_client(env) as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        with trio.fail_after(20):
            async with client.claim(run.run_id, "engineer-1") as agent:
                assert isinstance(agent, AsyncWsAgent) and not agent.resumed
                decisions = await drive(agent)
        assert agent.run_status == "completed" and decisions >= 5
        final = await client.get_run(run.run_id)
        assert final.status == "completed"
        assert [a.claimed for a in final.agents if a.agent_id == "engineer-1"] == [False]  # released on exit
        assert client.connections == 1 and await client.ping() < 1.0


async def test_several_agents_share_one_connection(tmp_path):
    """Three agents claimed on one connection each get their own envelopes (batched frames) and the run completes."""
    log = FaultLog()
    async with real_server(tmp_path) as env:
        client = warren_sim.client.open(env.url, transport="ws", retry=FAST_RETRY,
                                        event_hooks={"response": [env.check.async_hook]})
        assert isinstance(client, AsyncWsAgentClient) and client.ws_url == ws_url(env.url)
        client.socket_wrapper = log.wrap  # open() hands its extra keywords to httpx; the connection opens on entry
        async with client:
            ids = ["engineer-1", "courier-1", "medic-1"]
            run = await client.create_run("bridge_repair", 3, controlled_agents=ids)
            results: dict[str, int] = {}

            async def play(agent_id: str) -> None:
                async with client.claim(run.run_id, agent_id) as agent:
                    results[agent_id] = await drive(agent)
                    assert agent.run_status == "completed"

            with trio.fail_after(20):
                async with trio.open_nursery() as nursery:
                    for aid in ids:
                        nursery.start_soon(play, aid)
            assert set(results) == set(ids) and all(n >= 1 for n in results.values())
            assert client.connections == 1
            assert log.notes("observations"), "several agents woken together come in one frame"
            assert (await client.get_run(run.run_id)).status == "completed"


async def test_reconnect_mid_decision_retries_submit_as_duplicate(tmp_path):
    """The connection dies after a submit reached the server but before its receipt: the client reconnects, claims
    the lease again (outstanding envelope redelivered), resends the same command id and gets duplicate; the journal
    holds exactly one acceptance."""

    def receipt_of_first_submit(message: dict[str, Any], log: FaultLog) -> bool:
        return "result" in message and message.get("id") in log.sent_ids("agent.submit")

    log = FaultLog(receipt_of_first_submit)
    async with real_server(tmp_path) as env, ws_client(env, log) as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        with trio.fail_after(20):
            async with client.claim(run.run_id, "engineer-1") as agent:
                lease = agent.lease
                policy = policy_for(await agent.briefing())
                obs = await agent.next_observation()
                receipt = await agent.submit(obs, policy.decide(obs), command_id="c-lost-receipt")
                assert len(log.dropped) == 1 and log.dropped[0]["result"]["status"] == "accepted"
                assert receipt.status == "duplicate" and succeeded(receipt)
                assert receipt.command_id == "c-lost-receipt" and receipt.observation_id == obs.observation_id
                assert client.connections == 2
                reclaims = [m for m in log.sent if m.get("method") == "agent.claim"]
                assert [m["params"].get("lease") for m in reclaims] == [None, lease]  # claimed, then resumed
                assert agent.lease == lease
                nxt = await agent.next_observation()
                assert nxt.seq == 1  # one acceptance moved the agent on once
                pushed_after = [n for n in log.received[log.received.index(log.dropped[0]) + 1:]
                                if n.get("method") in ("observation", "observations")]
                assert pushed_after, "the next envelope comes on the new connection"
                await agent.submit(nxt, policy.decide(nxt))
                await drive(agent)
            assert agent.run_status == "completed"
        records = await journal(env, run.run_id)
        verdicts = [r["status"] for r in records if r.get("kind") == "verdict" and r.get("command_id") == "c-lost-receipt"]
        assert verdicts == ["accepted", "duplicate"]
        accepted_0 = [r for r in records if r.get("kind") == "verdict" and r.get("observation_id") == "engineer-1#0"
                      and r["status"] == "accepted"]
        assert len(accepted_0) == 1


async def test_envelope_lost_with_the_connection_is_redelivered(tmp_path):
    """An envelope pushed on a connection that died comes again after the reconnect's re-claim; resume() re-hands
    an already delivered envelope out, while an ordinary reconnect does not repeat it."""

    def first_envelope(message: dict[str, Any], log: FaultLog) -> bool:
        return message.get("method") == "observation"

    log = FaultLog(first_envelope)
    # single frames: the envelope lost alone (batched, it shares its frame with the claim's reply)
    async with real_server(tmp_path) as env, ws_client(env, log, frames="single") as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        with trio.fail_after(20):
            agent = await client.claim(run.run_id, "engineer-1")
            obs = await agent.next_observation()
            assert obs.seq == 0 and log.dropped[0]["params"]["seq"] == 0
            assert client.connections == 2 and agent.pushed == 1
            await agent.resume()  # redelivery asked: the outstanding envelope is handed out again
            again = await agent.next_observation()
            assert again.observation_id == obs.observation_id and agent.resumed
            assert await agent.poll(wait=0.2) is None  # nothing new: the same envelope is not repeated
            receipt = await agent.submit(again, {"noop": True})
            assert receipt.status == "accepted"
        await client.cancel_run(run.run_id)


async def test_run_ended_raises_run_ended(tmp_path):
    """A cancel ends next_observation with RunEnded('cancelled'), the iterator quietly, and later claims with 410."""
    async with real_server(tmp_path) as env, ws_client(env) as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        with trio.fail_after(20):
            async with client.claim(run.run_id, "engineer-1") as agent:
                obs = await agent.next_observation()
                async with trio.open_nursery() as nursery:
                    async def cancel_soon() -> None:
                        await trio.sleep(0.1)
                        await client.cancel_run(run.run_id)

                    nursery.start_soon(cancel_soon)
                    with pytest.raises(RunEnded) as info:
                        await agent.next_observation(wait=5)
                assert info.value.status == "cancelled" and info.value.status_code == 410
                assert agent.run_status == "cancelled"
                late = await agent.submit(obs, {"noop": True})
                assert late.status == "expired" and "run ended" in late.detail
                assert [o async for o in agent.observations()] == []
            with pytest.raises(RunEnded) as info:
                await client.claim(run.run_id, "engineer-1")
            assert info.value.status == "cancelled"


class GoneRewriter:
    """Wraps a trio-websocket connection and rewrites each 410 error it receives: its detail's prose lies about
    the status, and ``data.run_status`` is replaced by ``member`` (removed when ``member`` is empty)."""

    def __init__(self, inner: Any, member: dict[str, str]) -> None:
        self.inner, self.member = inner, member

    def _rewrite(self, message: dict[str, Any]) -> dict[str, Any]:
        error = message.get("error")
        if isinstance(error, dict) and error.get("code") == 410:
            data = {k: v for k, v in error.get("data", {}).items() if k != "run_status"}
            data.update(self.member, detail=f"the status failed, says this prose; {data.get('detail', '')}")
            message = {**message, "error": {**error, "data": data}}
        return message

    async def send_message(self, message: str) -> None:
        await self.inner.send_message(message)

    async def get_message(self) -> str | bytes:
        frame = json.loads(await self.inner.get_message())
        rewritten = [self._rewrite(m) for m in frame] if isinstance(frame, list) else self._rewrite(frame)
        return json.dumps(rewritten)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_run_ended_status_is_data_never_prose(tmp_path):
    """Over WS too RunEnded.status is the error's data.run_status when sent; without it the SDK asks
    GET /v1/runs/{run} (over HTTP); the detail's prose is never read."""
    async with real_server(tmp_path) as env:
        for member, gets in [({"run_status": "cancelled"}, 0), ({}, 1)]:
            async with AsyncWsAgentClient(env.http(), retry=FAST_RETRY, owns_http=True, timeout=5.0,
                                          socket_wrapper=functools.partial(GoneRewriter, member=member)) as client:
                run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
                await client.cancel_run(run.run_id)
                before = env.check.statuses.count(("GET", f"/v1/runs/{run.run_id}", 200))
                with trio.fail_after(20), pytest.raises(RunEnded) as info:
                    await client.claim(run.run_id, "engineer-1")
                assert info.value.status == "cancelled" and "says this prose" in info.value.detail
                assert env.check.statuses.count(("GET", f"/v1/runs/{run.run_id}", 200)) - before == gets


async def test_errors_and_verdicts_map_as_over_http(tmp_path):
    """JSON-RPC errors raise the HTTP exceptions (409 Conflict, 403 LeaseRejected, 404, 422); verdicts are receipts."""
    async with real_server(tmp_path) as env, ws_client(env) as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        with trio.fail_after(20):
            agent = await client.claim(run.run_id, "engineer-1")
            with pytest.raises(Conflict, match="held by another lease"):
                await client.claim(run.run_id, "engineer-1")
            obs = await agent.next_observation()
            bad = await agent.submit(obs, {"sleep_ms": "soon"}, command_id="c-1")
            assert bad.status == "rejected" and "sleep_ms" in bad.detail
            assert (await agent.submit(obs, {"noop": True}, command_id="c-1")).status == "accepted"
            assert (await agent.submit(obs, {"noop": True})).status == "stale"
            with pytest.raises(UnprocessableCommand):
                await agent.submit(obs, {"noop": True}, command_id=5)  # type: ignore[arg-type]
            assert (await agent.wait_outcome("c-1", timeout=5)).outcome != "pending"
            with pytest.raises(NotFound):
                await agent.receipt("c-never")
            await agent.release()
            with pytest.raises(LeaseRejected):
                await agent.receipt("c-1")
            fresh = await client.claim(run.run_id, "engineer-1")
            assert fresh.lease != agent.lease
        await client.cancel_run(run.run_id)


async def test_server_pings_are_answered(tmp_path):
    """With a 0.1 s heartbeat the client answers the server's pings and its connection outlives 3 intervals idle."""
    async with real_server(tmp_path, heartbeat_s=0.1) as env, ws_client(env) as client:
        run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        agent = await client.claim(run.run_id, "engineer-1")
        await trio.sleep(0.6)
        assert client.pings_answered >= 3 and client.connections == 1
        assert (await agent.next_observation()).seq == 0
        await client.cancel_run(run.run_id)


async def test_vanished_server_ends_waits_with_transport_error(tmp_path):
    """When the server goes away for good, a waiting next_observation and later calls raise TransportError."""
    async with trio.open_nursery() as nursery:
        server = await nursery.start(functools.partial(start_server, ServerConfig(data_dir=tmp_path), "127.0.0.1", 0))
        try:
            async with AsyncWsAgentClient(httpx.AsyncClient(base_url=server.url), retry=FAST_RETRY,
                                          owns_http=True) as client:
                run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
                agent = await client.claim(run.run_id, "engineer-1")
                obs = await agent.next_observation()
                server.shutdown_event.set()  # Hypercorn stops; the run is not ended
                with trio.fail_after(15):
                    with pytest.raises(TransportError, match="could not connect"):
                        await agent.next_observation()
                    with pytest.raises(TransportError):
                        await agent.submit(obs, {"noop": True})
        finally:
            server.shutdown()


async def test_unreachable_server_is_a_transport_error():
    """Opening the WS client against a port where nothing listens fails with TransportError after the retries."""
    async with httpx.AsyncClient(base_url="http://127.0.0.1:9") as http:
        with trio.fail_after(10), pytest.raises(TransportError, match="could not connect"):
            async with AsyncWsAgentClient(http, retry=FAST_RETRY):
                pass


# --------------------------------------------------------------------------------------------- warren agent


def test_agent_command_over_ws_drives_a_served_run(served):
    """`warren agent URL --run --agent --transport ws` drives engineer-1 over WS until the run completes (exit 0)."""
    with httpx.Client(base_url=served, timeout=10) as http:
        run = http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                        json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
    result = subprocess.run([*PY, "agent", served, "--run", run, "--agent", "engineer-1", "--transport", "ws"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"claimed engineer-1 of {run}" in result.stdout and "over WebSocket" in result.stdout
    assert "You are Sam the engineer" in result.stdout and '>>> take {"item": "toolbox-1"}  [accepted' in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith(f"{run} ended: completed (")
