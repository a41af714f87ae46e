"""Durability over the WebSocket binding (issue 13): with ``--fsync`` a submit's reply waits for the grouped fsync
that covers its verdict, as over HTTP; and the WS SDK rides out a server killed and restarted on the same data
directory (re-claiming its lease, backoff up to ``RetryPolicy.reconnect_s``), then fails with a clear error."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from durability_helpers import Restartable, read_jsonl

from warren_sim.client import AsyncWsAgentClient, RetryPolicy, TransportError
from warren_sim.http.server import start_server
from warren_sim.runtime import journal as journal_module
from warren_sim.runtime.manager import ServerConfig
from warren_sim.scenarios import load_scenario, make_policy


def policy_for(briefing: dict[str, Any], seed: int) -> Any:
    return make_policy(load_scenario("bridge_repair"), "solution", briefing["agent_id"], briefing["role"], briefing,
                                                      seed)


class Frames:
    """Wraps the SDK's trio-websocket connection and notes every frame it receives, in order."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def wrap(self, inner: Any) -> Any:
        frames = self

        class Socket:
            async def send_message(self, message: str) -> None:
                await inner.send_message(message)

            async def get_message(self) -> str | bytes:
                raw = await inner.get_message()
                frame = json.loads(raw)
                frames.received.extend(frame if isinstance(frame, list) else [frame])  # batched frames: arrays
                return raw

            async def aclose(self) -> None:
                await inner.aclose()

        return Socket()

    def receipts(self, command_id: str) -> list[dict[str, Any]]:
        return [m["result"] for m in self.received
                if isinstance(m.get("result"), dict) and m["result"].get("command_id") == command_id]


async def test_ws_reply_to_an_accept_waits_for_the_fsync_of_its_verdict(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``--fsync`` over WS: when the journal is fsynced, the verdict of the command is already in the file and its
    reply has not reached the client yet; when the reply arrives, that fsync has happened."""
    data, frames = tmp_path / "data", Frames()
    order: list[tuple[str, Any]] = []
    real_fsync = os.fsync

    def noting_fsync(fd: int) -> None:
        on_disk = [json.loads(line) for line in (data / "run-1.jsonl").read_text().splitlines()]
        accepted = [r["command_id"] for r in on_disk if r["kind"] == "verdict" and r["status"] == "accepted"]
        replied = [m["result"]["command_id"] for m in frames.received if isinstance(m.get("result"), dict)
                   and "command_id" in m["result"]]
        order.append(("fsync", {"accepted_on_disk": accepted, "replies_received": replied}))
        real_fsync(fd)

    monkeypatch.setattr(journal_module.os, "fsync", noting_fsync)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(functools.partial(start_server, ServerConfig(data_dir=data, fsync=True)))
        try:
            async with AsyncWsAgentClient(httpx.AsyncClient(base_url=server.url), owns_http=True, timeout=10,
                                          socket_wrapper=frames.wrap) as client:
                run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
                assert run.run_id == "run-1"
                with trio.fail_after(30):
                    async with client.claim(run.run_id, "engineer-1") as agent:
                        policy = policy_for(await agent.briefing(), 3)
                        for i in range(3):
                            obs = await agent.next_observation()
                            receipt = await agent.submit(obs, policy.decide(obs), command_id=f"c-{i}")
                            assert receipt.status == "accepted"
                            order.append(("reply", f"c-{i}"))
                await client.cancel_run(run.run_id)
        finally:
            server.shutdown()
    for i in range(3):
        reply = order.index(("reply", f"c-{i}"))
        covering = [facts for what, facts in order[:reply] if what == "fsync" and f"c-{i}" in facts["accepted_on_disk"]]
        assert covering, f"c-{i}'s reply arrived before any fsync covered its verdict: {order}"
        assert f"c-{i}" not in covering[0]["replies_received"], "the reply left before the fsync"


async def drive_to_the_end(agent: Any, policy: Any) -> int:
    decisions = 0
    async for obs in agent.observations(wait=5):
        receipt = await agent.submit(obs, policy.decide(obs))
        assert receipt.status in ("accepted", "duplicate"), receipt
        decisions += 1
    return decisions


@pytest.mark.slow  # two process starts per kill: 20-25 s; the fast tier has the give-up test below
@pytest.mark.parametrize("kills", [2])
async def test_ws_sdk_rides_out_a_killed_and_restarted_server(tmp_path: Path, kills: int) -> None:
    """The server (a `warren serve` process) is SIGKILLed while the WS SDK holds engineer-1 and restarted on the
    same data directory 2 s later (longer than ``attempts`` x backoff: only ``reconnect_s`` keeps the SDK
    trying): the command sent during the outage is accepted for the same observation once the SDK has
    reconnected and claimed the agent again with its lease (resumed, same token); the run plays to the end."""
    retry = RetryPolicy(attempts=2, backoff=0.05, max_backoff=0.5, reconnect_s=30.0)
    with Restartable(tmp_path / "data") as server:
        async with AsyncWsAgentClient(httpx.AsyncClient(base_url=server.url), retry=retry, owns_http=True,
                                      timeout=10) as client:
            run = await client.create_run("bridge_repair", 5, controlled_agents=["engineer-1"], pace=4)
            with trio.fail_after(240):
                async with client.claim(run.run_id, "engineer-1") as agent:
                    lease = agent.lease
                    policy = policy_for(await agent.briefing(), 5)
                    for k in range(kills):
                        obs = await agent.next_observation()
                        server.kill()  # the observation is outstanding: its command is sent while the server is down
                        connections = client.connections
                        async with trio.open_nursery() as nursery:
                            async def restart_later() -> None:
                                await trio.sleep(2.0)  # longer than attempts x backoff: only reconnect_s keeps it up
                                await trio.to_thread.run_sync(server.start)
                            nursery.start_soon(restart_later)
                            # waits through the outage; the restarted server re-issued the same observation
                            receipt = await agent.submit(obs, policy.decide(obs), command_id=f"after-kill-{k}")
                        assert receipt.status == "accepted" and receipt.observation_id == obs.observation_id, receipt
                        assert client.connections == connections + 1
                        assert agent.lease == lease and agent.resumed, "the lease resumed after the restart"
                    await drive_to_the_end(agent, policy)
                assert agent.run_status == "completed"
            records = read_jsonl(tmp_path / "data" / f"{run.run_id}.jsonl")
            assert sum(1 for r in records if r["kind"] == "restart") == kills
            assert [r["status"] for r in records if r["kind"] == "status"][-1] == "completed"


async def test_ws_sdk_gives_up_after_reconnect_s_with_a_clear_error(tmp_path: Path) -> None:
    """A server gone for good: a call keeps trying for about ``reconnect_s`` (beyond ``attempts``), then raises a
    TransportError that says how long it tried and asks whether the server is running."""
    short = RetryPolicy(attempts=2, backoff=0.05, max_backoff=0.25, reconnect_s=1.5)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(functools.partial(start_server, ServerConfig(data_dir=tmp_path / "data")))
        try:
            async with AsyncWsAgentClient(httpx.AsyncClient(base_url=server.url), retry=short, owns_http=True,
                                          timeout=5) as client:
                run = await client.create_run("bridge_repair", 5, controlled_agents=["engineer-1"])
                agent = await client.claim(run.run_id, "engineer-1")
                obs = await agent.next_observation()
                server.shutdown_event.set()  # Hypercorn stops (its connections closed); nothing comes back
                with trio.fail_after(20):
                    await server.stopped.wait()
                start = trio.current_time()
                with trio.fail_after(30), pytest.raises(TransportError) as gave_up:
                    await agent.submit(obs, {"noop": True})
                assert trio.current_time() - start >= 1.5 - 0.3  # it kept trying for about reconnect_s
        finally:
            server.shutdown()
    message = str(gave_up.value)
    assert "could not connect" in message and "is the server running?" in message, message
    assert "RetryPolicy.reconnect_s" in message and " s (" in message, message
