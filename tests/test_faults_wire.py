"""Faults on the wire against a real server: the SDK rides them out and the world is the headless one."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from warren_sim.client import AgentClient, RetryPolicy
from warren_sim.engine import run_headless
from warren_sim.engine.records import RUNTIME_KINDS
from warren_sim.replay import strip
from warren_sim.runtime.faults import NETWORK_KINDS
from warren_sim.scenarios import instantiate, load_scenario, make_policy

AGENTS = ("courier-1", "engineer-1", "medic-1")


def _headless(seed: int) -> list[dict[str, Any]]:
    sim, policies = instantiate(load_scenario("bridge_repair"), seed, "solution")
    out: list[dict[str, Any]] = []
    run_headless(sim, policies, on_batch=lambda s: out.extend(s.drain_records()))
    out.extend(sim.drain_records())
    return out


def _engine(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in strip(r).items() if k not in ("run_id", "source")} for r in records
            if r["kind"] not in RUNTIME_KINDS]


def _drive(url: str, run_id: str, agent_id: str, seed: int, errors: list[BaseException]) -> None:
    try:
        sc = load_scenario("bridge_repair")
        with AgentClient.open(url, timeout=10.0, retry=RetryPolicy(attempts=50, backoff=0.001)) as client:
            with client.claim(run_id, agent_id) as agent:
                briefing = agent.briefing()
                policy = make_policy(sc, "solution", agent_id, briefing["role"], briefing, seed)
                for obs in agent.observations(wait=5):
                    agent.submit(obs, policy.decide(obs))
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


def drive_http(url: str, run_id: str, seed: int) -> None:
    """Every agent of the run driven by the blocking SDK over HTTP, a thread each, to the run's end: none failed."""
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_drive, args=(url, run_id, a, seed, errors)) for a in AGENTS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []


@pytest.mark.parametrize("seed", range(3))
def test_the_sdk_rides_out_network_faults_and_the_world_is_the_headless_one(warren_server, seed):
    warren_server_faults = "reset=0.15,lost_reply=0.15,delay=0.15:20ms,redeliver=0.15,unavailable=0.15"
    run = warren_server.create_run("bridge_repair", seed, AGENTS,
                                   faults={"spec": warren_server_faults, "seed": seed})
    drive_http(warren_server.url, run.id, seed)
    view = run.wait_status("completed", 60)
    journal = run.journal()
    assert _engine(journal) == _engine(_headless(seed))
    met = run.faults()
    assert {f["fault"] for f in met} >= {"reset", "lost_reply"}, met
    assert all(f["fault"] in NETWORK_KINDS for f in met)
    assert view["status"] == "completed"


async def _drive_ws(client: Any, run_id: str, agent_id: str, seed: int) -> None:
    sc = load_scenario("bridge_repair")
    async with client.claim(run_id, agent_id) as agent:
        briefing = await agent.briefing()
        policy = make_policy(sc, "solution", agent_id, briefing["role"], briefing, seed)
        async for obs in agent.observations():
            await agent.submit(obs, policy.decide(obs))


def drive_ws(url: str, run_id: str, seed: int) -> None:
    """Every agent of a bridge_repair run on the trio SDK over the WebSocket, one connection."""
    import trio

    from warren_sim import client as sdk

    async def main() -> None:
        retry = RetryPolicy(attempts=50, backoff=0.001)
        async with sdk.open(url, transport="ws", retry=retry, timeout=10.0) as client:
            async with trio.open_nursery() as nursery:
                for agent_id in AGENTS:
                    nursery.start_soon(_drive_ws, client, run_id, agent_id, seed)

    trio.run(main)


@pytest.mark.parametrize("seed", range(3))
def test_the_websocket_sdk_rides_out_faults_and_the_world_is_the_headless_one(warren_server, seed):
    spec = "reset=0.1,lost_reply=0.1,disconnect=0.1,delay=0.1:20ms,unavailable=0.1,redeliver=0.1"
    run = warren_server.create_run("bridge_repair", seed, AGENTS, faults={"spec": spec, "seed": seed})
    drive_ws(warren_server.url, run.id, seed)
    run.wait_status("completed", 60)
    assert _engine(run.journal()) == _engine(_headless(seed))
    assert {f["fault"] for f in run.faults()} & {"reset", "lost_reply", "disconnect"}


def test_a_connection_too_shared_for_its_fault_rate_says_so(warren_server):
    """Faults that close a connection are drawn per request: on one shared by many agents they are met as many
    times as often, and a reconnect must claim every one of them again before it is any use. When no reconnect
    gets that far, the SDK's error says so (and what to do), not "is the server running?"."""
    import trio

    from warren_sim import client as sdk
    from warren_sim.client import TransportError

    agents = [f"forager-{i:02d}" for i in range(1, 21)]
    run = warren_server.create_run("warren", 0, agents, params={"agents": 20},
                                   faults={"spec": "reset=0.6", "seed": 0})
    errors: list[BaseException] = []

    async def one(client: Any, agent_id: str) -> None:
        try:
            async with client.claim(run.id, agent_id) as agent:
                async for obs in agent.observations():
                    await agent.submit(obs, {"sleep_ms": 1})
        except TransportError as exc:
            errors.append(exc)

    async def main() -> None:
        retry = RetryPolicy(attempts=2, backoff=0.001, max_backoff=0.01, reconnect_s=0.5)
        with trio.fail_after(60):
            async with sdk.open(warren_server.url, transport="ws", retry=retry, timeout=10.0) as client:
                async with trio.open_nursery() as nursery:
                    for agent_id in agents:
                        nursery.start_soon(one, client, agent_id)

    trio.run(main)
    assert errors, "twenty agents on one connection at reset=0.6 were all claimed again every time"
    message = str(errors[0])
    assert "closed before its" in message and "agents were claimed again" in message, message
    assert "share one among fewer agents" in message and "is the server running" not in message, message
