"""Served forks (POST /v1/runs/{run}/fork) on a real Hypercorn: a fork continued by a remote agent, over HTTP
(`warren agent`) or the WebSocket binding, is its parent record for record; forks of ended runs after a restart;
bad forks are teaching errors that create nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from sdkhelpers import real_server

from warren_sim.cli import main
from warren_sim.client import AgentClient, ServerError
from warren_sim.engine.records import RUNTIME_KINDS
from warren_sim.replay import read_journal, replay_journal, strip
from warren_sim.scenarios import list_scenarios, load_scenario
from warren_sim.testing import WarrenServer, WarrenTestError, assert_replays, wait_status
from warren_sim.testing.inprocess import open_in_process

OWN = {"forked_from", "run_id"}  # a fork's own facts (strip drops cursors and wall-clock fields)
# small worlds: every scenario, each run a couple of seconds at most
PARAMS: dict[str, dict[str, Any]] = {"warren": {"agents": 3}}


def engine_records(path: Path) -> list[dict[str, Any]]:
    """A journal's engine records as a fork compares them: no runtime records, cursors, wall clock or own ids."""
    return [{k: v for k, v in strip(r).items() if k not in OWN}
            for r in read_journal(path) if r["kind"] not in RUNTIME_KINDS]


def boundaries(path: Path) -> tuple[int, int, int]:
    """The parent's first batch boundary (its last record before the first batch's), a cursor inside the run,
    and its last record (the last boundary: the run's end)."""
    records = read_journal(path)
    batches = [r["cursor"] for r in records if r["kind"] == "batch"]
    first_obs = next(r["cursor"] for r in records if r["kind"] == "observation")
    return first_obs - 1, batches[len(batches) // 2], records[-1]["cursor"]


async def drive(url: str, run_id: str, agent: str, transport: str = "http") -> int:
    """`warren agent` (in a worker thread, as the command line runs it) drives ``agent`` until the run ends."""
    argv = ["agent", url, "--run", run_id, "--agent", agent, "--wait", "5", "--transport", transport]
    return await trio.to_thread.run_sync(main, argv)


async def ended(client: Any, run_id: str) -> Any:
    with trio.fail_after(60):
        while True:
            view = await client.get_run(run_id)
            if view.result is not None:
                return view
            await trio.sleep(0.02)


async def parent_run(env: Any, client: Any, scenario: str, seed: int) -> tuple[str, str]:
    """A served run of ``scenario`` whose first agent is remote (driven by `warren agent`), to its end."""
    agent = load_scenario(scenario, PARAMS.get(scenario, {})).spec.agents[0].id
    view = await client.create_run(scenario, seed, controlled_agents=[agent], params=PARAMS.get(scenario),
                                   decision_deadline_s=60)
    assert await drive(env.url, view.run_id, agent) in (0, 1)
    return view.run_id, agent


async def check_fork(env: Any, client: Any, data: Path, parent: str, agent: str, cursor: int,
                     transport: str) -> None:
    fork = await client.fork_run(parent, cursor, controlled_agents=[agent], decision_deadline_s=60)
    assert fork.forked_from["run_id"] == parent and fork.forked_from["cursor"] == cursor
    assert fork.forked_from["batch_cursor"] <= cursor
    assert [a.agent_id for a in fork.agents if a.controlled] == [agent]
    assert await drive(env.url, fork.run_id, agent, transport) in (0, 1)
    view = await ended(client, fork.run_id)
    parent_view = await client.get_run(parent)
    assert view.result == parent_view.result
    assert engine_records(data / f"{fork.run_id}.jsonl") == engine_records(data / f"{parent}.jsonl"), \
        (parent, cursor, transport)
    run_record = next(r for r in read_journal(data / f"{fork.run_id}.jsonl") if r["kind"] == "run")
    assert run_record["forked_from"] == fork.forked_from and run_record["run_id"] == fork.run_id
    assert replay_journal(data / f"{fork.run_id}.jsonl").identical  # self-contained: replays on its own


@pytest.mark.parametrize("scenario", list_scenarios())
@pytest.mark.parametrize("seed", [1, 4])
async def test_a_served_fork_continued_by_remote_agents_is_its_parent(tmp_path: Path, scenario: str, seed: int):
    """Every scenario: forks at the first boundary, inside the run and at its end, continued by `warren agent`
    over HTTP, and one over the WebSocket binding, give the parent's engine records exactly (the remote agent's
    stateful policy brought to the fork point from the fork's journal)."""
    data = tmp_path / "data"
    async with real_server(data) as env, env.client() as client:
        parent, agent = await parent_run(env, client, scenario, seed)
        first, middle, last = boundaries(data / f"{parent}.jsonl")
        for cursor, transport in ((first, "http"), (middle, "http"), (last, "http"), (middle + 1, "ws")):
            await check_fork(env, client, data, parent, agent, cursor, transport)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", list_scenarios())
@pytest.mark.parametrize("seed", [0, 2, 5])
async def test_served_forks_at_many_cursors(tmp_path: Path, scenario: str, seed: int):
    """The bigger matrix: more seeds, a cursor in every fifth of the run, both transports."""
    data = tmp_path / "data"
    async with real_server(data) as env, env.client() as client:
        parent, agent = await parent_run(env, client, scenario, seed)
        first, _, last = boundaries(data / f"{parent}.jsonl")
        cursors = sorted({first, *(first + (last - first) * k // 5 for k in range(1, 5)), last})
        for i, cursor in enumerate(cursors):
            await check_fork(env, client, data, parent, agent, cursor, ("http", "ws")[i % 2])


async def test_npc_forks_of_live_and_ended_runs_and_after_a_restart(tmp_path: Path):
    """A fork of a live run (its journal as it stands), of an ended one, and of an ended one after the server
    restarted (only its journal on disk left): each, with its NPCs only, ends as the parent did."""
    data = tmp_path / "data"
    async with real_server(data) as env, env.client() as client:
        live = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
        lease = (await client.claim(live.run_id, "engineer-1")).lease  # running, waiting for engineer-1
        assert lease
        with trio.fail_after(10):
            while not any(r["kind"] == "observation" for r in read_journal(data / f"{live.run_id}.jsonl")):
                await trio.sleep(0.02)
        first = next(r["cursor"] for r in read_journal(data / f"{live.run_id}.jsonl")
                     if r["kind"] == "observation") - 1
        fork = await client.fork_run(live.run_id, first)  # engineer-1 is an NPC again: it runs by itself
        assert fork.forked_from["cursor"] == first and fork.forked_from["batch_cursor"] <= first
        assert (await ended(client, fork.run_id)).result["status"] == "completed"
        await client.cancel_run(live.run_id)

        parent = await client.create_run("bridge_repair", 3)
        await ended(client, parent.run_id)
        _, middle, _ = boundaries(data / f"{parent.run_id}.jsonl")
        fork = await client.fork_run(parent.run_id, middle)
        await ended(client, fork.run_id)
        assert engine_records(data / f"{fork.run_id}.jsonl") == engine_records(data / f"{parent.run_id}.jsonl")
    async with real_server(data) as env, env.client() as client:  # a new server on the same data directory
        again = await client.fork_run(parent.run_id, middle)
        assert again.run_id not in (parent.run_id, fork.run_id)
        await ended(client, again.run_id)
        assert engine_records(data / f"{again.run_id}.jsonl") == engine_records(data / f"{parent.run_id}.jsonl")
        assert again.forked_from == {**fork.forked_from}
        # a fork is a run like any: it is restored after a restart and names its parent still
    async with real_server(data) as env, env.client() as client:
        assert (await client.get_run(again.run_id)).forked_from == again.forked_from


def _files(data: Path) -> list[str]:
    return sorted(p.name for p in data.iterdir())


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"cursor": -1}, 400, ">= 0"),
    ({"cursor": "12"}, 400, "expected an integer"),
    ({"cursor": 1.5}, 400, "integer"),
    ({}, 400, "cursor"),
    ({"cursor": 10**6}, 400, "past the end"),
    ({"cursor": 5, "controlled_agents": ["nobody"]}, 400, "not an agent"),
    ({"cursor": 5, "params": {"agents": 3}}, 400, "parent"),
    ({"cursor": 5, "npc_policy": {"nobody": "solution"}}, 400, "npc_policy"),
])
async def test_bad_forks_are_teaching_errors_that_create_nothing(tmp_path: Path, body, status, words):
    data = tmp_path / "data"
    async with real_server(data) as env, env.client() as client, env.http() as http:
        parent = await client.create_run("bridge_repair", 3)
        await ended(client, parent.run_id)
        before, runs = _files(data), len(await client.list_runs())
        r = await http.post(f"/v1/runs/{parent.run_id}/fork", json=body)
        assert r.status_code == status and r.headers["content-type"].startswith("application/problem+json")
        assert words in r.json()["detail"], r.json()
        assert _files(data) == before and len(await client.list_runs()) == runs
        missing = await http.post("/v1/runs/run-99/fork", json={"cursor": 1})
        assert missing.status_code == 404 and "no run 'run-99'" in missing.json()["detail"]
        with pytest.raises(ServerError) as info:
            await client.fork_run("run-99", 1)
        assert info.value.status_code == 404


async def test_a_journal_cut_short_is_a_409_that_creates_nothing(tmp_path: Path):
    """An ended run's journal cut inside a batch (a disk filled up, an edit): a fork from a cursor after the cut
    batch began cannot be brought there (409, saying why); one before it still works."""
    data = tmp_path / "data"
    async with real_server(data) as env, env.client() as client, env.http() as http:
        parent = await client.create_run("bridge_repair", 3)
        await ended(client, parent.run_id)
        path = data / f"{parent.run_id}.jsonl"
        records = read_journal(path)
        batch = [r["cursor"] for r in records if r["kind"] == "batch"][2]
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text("".join(lines[:batch + 2]), encoding="utf-8")  # its batch record and one after it
        before, runs = _files(data), len(await client.list_runs())
        r = await http.post(f"/v1/runs/{parent.run_id}/fork", json={"cursor": batch + 1})
        assert r.status_code == 409, r.text
        assert "cannot fork" in r.json()["detail"] and "does not replay" in r.json()["detail"]
        assert _files(data) == before and len(await client.list_runs()) == runs
        ok = await client.fork_run(parent.run_id, batch - 1)
        assert ok.forked_from["batch_cursor"] < batch
        await ended(client, ok.run_id)


async def test_the_fork_body_is_the_creation_body(tmp_path: Path):
    """pace, decision_deadline_s and a team npc_policy are taken as POST /v1/runs takes them, with its defaults."""
    async with real_server(tmp_path / "data") as env, env.client() as client, env.http() as http:
        parent = await client.create_run("bridge_repair", 3)
        await ended(client, parent.run_id)
        r = await http.post(f"/v1/runs/{parent.run_id}/fork", json={"cursor": 0})
        assert r.status_code == 201
        plain = r.json()
        created = (await http.post("/v1/runs?scenario=bridge_repair&seed=3", json={})).json()
        assert plain["pace"] == created["pace"] and plain["decision_deadline_s"] == created["decision_deadline_s"]
        assert "forked_from" not in created
        fork = await client.fork_run(parent.run_id, 0, controlled_agents={"role": "engineer"}, pace=50.0,
                                     decision_deadline_s=7.5, npc_policy="none")
        assert fork.pace == 50.0 and fork.decision_deadline_s == 7.5 and fork.status == "created"
        assert [a.agent_id for a in fork.agents if a.controlled] == ["engineer-1"]
        journal = read_journal(tmp_path / "data" / f"{fork.run_id}.jsonl")
        config = next(r for r in journal if r["kind"] == "config")
        assert config == {**config, "npc_policy": "none", "pace": 50.0, "decision_deadline_s": 7.5,
                          "controlled_agents": ["engineer-1"]}
        await client.cancel_run(fork.run_id)
    assert json.loads(json.dumps(plain))["forked_from"]["cursor"] == 0


# ------------------------------------------------------------------------------------ the pytest plugin


async def test_warren_app_forks_in_process(autojump_clock: trio.abc.Clock) -> None:
    """``warren_app.fork(run, cursor, ...)``: the in-process app forks an ended run; the fork ends as it did."""
    async with open_in_process() as warren:
        parent = await warren.create_run("contention", 2)
        done = await wait_status(parent, "completed", timeout=600)
        journal = await warren.journal(parent)
        cursor = [r["cursor"] for r in journal if r["kind"] == "batch"][1]
        fork = await warren.fork(parent, cursor)
        view = await wait_status(fork, "completed", timeout=600)
        assert view["forked_from"]["run_id"] == parent.run_id and view["result"] == done["result"]
        assert_replays(await warren.journal(fork))
        with pytest.raises(WarrenTestError, match="past the end"):
            await warren.fork(parent, 10**6)


def test_warren_server_forks_with_a_remote_agent(tmp_path: Path) -> None:
    """``warren_server.fork(run, cursor, controlled_agents)``: a fork on the threaded server whose remote agent is
    driven by the blocking SDK answers what it is asked and ends."""
    server = WarrenServer.open(rate=100, data_dir=tmp_path)
    try:
        parent = server.create_run("bridge_repair", 3)
        wait_status(parent, "completed", timeout=60)
        fork = server.fork(parent, 0, ["engineer-1"], decision_deadline_s=30)
        # cursor 0 is the served journal's config record: the fork starts from the world before any batch
        assert fork.view()["forked_from"] == {"run_id": parent.run_id, "cursor": 0, "batch_cursor": 1}
        assert [a["agent_id"] for a in fork.view()["agents"] if a["controlled"]] == ["engineer-1"]
        with AgentClient.open(server.url) as client, client.claim(fork.run_id, "engineer-1") as agent:
            for obs in agent.observations(wait=5):
                agent.submit(obs, {"noop": True})
        assert fork.view()["result"]["status"] == "failed"  # engineer-1 only waited: the bridge was never mended
        assert any(r["kind"] == "verdict" and r["agent"] == "engineer-1" for r in fork.journal())
        with pytest.raises(WarrenTestError, match="404"):
            server.fork("run-99", 0)
    finally:
        server.close()


def test_the_blocking_sdk_forks_and_a_live_fork_is_restored_as_one(tmp_path: Path) -> None:
    """``AgentClient.fork_run``; a fork waiting for its remote agent when the server is killed comes back a fork."""
    server = WarrenServer.open(rate=100, data_dir=tmp_path)
    try:
        parent = server.create_run("relay", 2)
        wait_status(parent, "completed", timeout=60)
        with AgentClient.open(server.url) as client:
            fork = client.fork_run(parent.run_id, 12, controlled_agents={"role": "courier"}, decision_deadline_s=30)
        assert fork.status == "created" and fork.forked_from["run_id"] == parent.run_id
        server.kill()
        server.restart()
        view = server.view(fork.run_id)
        assert view["forked_from"] == fork.forked_from and view["status"] == "created"
        assert [a["controlled"] for a in view["agents"]] == [a.controlled for a in fork.agents]
    finally:
        server.close()
