"""A served run's npc_policy as a team ({"courier": "solution", "*": "none"}) and GET /v1/scenarios/{name}'s
populations, on the real Quart-Trio app."""

from __future__ import annotations

from pathlib import Path

import trio
from server_helpers import served

from warren_sim.engine import run_headless
from warren_sim.runtime.clock import WallMap
from warren_sim.runtime.restore import rebuild_run
from warren_sim.scenarios import instantiate, load_scenario


async def _ended(api, run: str) -> dict:
    with trio.fail_after(60):
        while (view := await api.run_view(run))["status"] in ("created", "running"):
            await trio.sleep(0.01)
    return view


def _acting(records: list[dict]) -> set[str]:
    """The agents whose policy did something other than wait."""
    return {r["agent"] for r in records if r["kind"] == "command" and not ("noop" in r["command"]
                                                                            or "sleep_ms" in r["command"])}


async def test_a_team_npc_policy_drives_each_agent_as_headless_does(tmp_path: Path) -> None:
    team = {"courier": "solution", "medic-1": "population:noisy", "*": "none"}
    async with served(tmp_path) as api:
        run = await api.create("bridge_repair", 3, npc_policy=team)
        view = await _ended(api, run)
        journal = api.journal(run)
    assert view["status"] == "failed"  # nobody repairs the bridge
    sim, policies = instantiate(load_scenario("bridge_repair"), 3, team, run_id=run)
    summary = run_headless(sim, policies)
    assert view["sim_time_ms"] == summary["sim_time_ms"]
    headless = [r for r in sim.drain_records() if r["kind"] == "command"]
    served_commands = [r for r in journal if r["kind"] == "command"]
    assert [(r["agent"], r["command"]) for r in served_commands] == [(r["agent"], r["command"]) for r in headless]
    assert _acting(served_commands) == {"courier-1", "medic-1"}  # the engineer ("*": none) only waits


async def test_a_bad_team_is_a_400_naming_roles_and_agents(tmp_path: Path) -> None:
    async with served(tmp_path) as api:
        status, body = await api.call("POST", "/v1/runs?scenario=bridge_repair&seed=1",
                                      {"npc_policy": {"pilot": "solution"}})
        assert status == 400 and "roles: engineer, courier, medic" in body["detail"]
        assert "agents: engineer-1, courier-1, medic-1" in body["detail"]
        status, body = await api.call("POST", "/v1/runs?scenario=bridge_repair&seed=1",
                                      {"npc_policy": {"courier": "mymodule:factory"}})
        assert status == 400 and "solution, none or population:NAME" in body["detail"]
        status, body = await api.call("POST", "/v1/runs?scenario=bridge_repair&seed=1",
                                      {"npc_policy": {"courier": "population:nope"}})
        assert status == 400 and "no population 'nope'" in body["detail"]
        status, runs = await api.call("GET", "/v1/runs")
        assert status == 200 and runs["runs"] == []  # nothing was made
        ok = await api.create("bridge_repair", 1, npc_policy={"courier": "solution"})
        assert ok == "run-1"


async def test_scenario_description_lists_its_populations(tmp_path: Path) -> None:
    async with served(tmp_path) as api:
        status, body = await api.call("GET", "/v1/scenarios/relay")
        assert status == 200
        names = [p["name"] for p in body["populations"]]
        assert names == ["noisy", "silent", "slow", "wrong_first"]
        assert all(len(p["description"]) > 20 for p in body["populations"])
        status, body = await api.call("GET", "/v1/scenarios/warren")
        assert status == 200 and body["populations"] == []


async def test_a_team_survives_a_server_restart(autojump_clock, tmp_path: Path) -> None:
    """The run's config record keeps the team, so rebuilding the run from its journal (what a restarted
    server does) makes the same NPC policies."""
    team = {"courier": "population:noisy", "*": "none"}
    async with served(tmp_path) as api:
        run = await api.create("bridge_repair", 2, controlled_agents=["engineer-1"], npc_policy=team)
        lease = await api.claim(run)
        status, _ = await api.poll(run, lease)
        assert status == 200
        before = {a: type(p).__name__ for a, p in api.manager.runs[run].policies.items()}
    assert before == {"courier-1": "Noisy", "medic-1": "NoopPolicy"}
    rebuilt = rebuild_run(tmp_path / "data" / f"{run}.jsonl", WallMap(1.0), lease_ttl=300, max_polls=4,
                          max_spectators=4, resume=False)
    assert rebuilt.config.npc_policy == team
    assert {a: type(p).__name__ for a, p in rebuilt.policies.items()} == before
