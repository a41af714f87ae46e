"""A new tool is its entry of the rules table, and nothing else: shown end to end with a tool made here.

Which files a new tool touches:

- a generic tool: its entry in ``warren_sim/engine/rules.py`` (a ``ToolRules`` subclass holding its catalog
  entry, choices, check and apply, added to ``GENERIC``) and its tests. Perception, validation, adjudication,
  the briefing's catalog, the journal's layout and the scenario loader's reserved names all read the table;
  none of them names a tool.
- a scenario tool: its ``[[tools]]`` table in the scenario's ``scenario.toml`` (a ``WorkToolSpec``, whose entry
  is ``rules.Work``) and the roles that carry it; no engine file at all.

Here the entry is added to the table for the test only (``monkeypatch``), which is what writing it into
``GENERIC`` does for good: ``wave``, an instant voice tool aimed at an agent within reach, who hears of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from simworld import agent, make_spec, obs_of, outcome_of, play, records
from test_loader import VALID, write

from warren_sim.engine import Simulation, briefing, layout
from warren_sim.engine import rules as R
from warren_sim.engine.effects import Effects
from warren_sim.engine.tools import STR, Tool, schema
from warren_sim.engine.world import Agent
from warren_sim.scenarios.loader import ScenarioError, load_scenario


class Wave(R.ToolRules):
    """Wave at an agent within reach; those within reach see it."""

    def __init__(self) -> None:
        super().__init__(Tool("wave", "Wave at an agent within reach.", "voice", False, schema(to=STR)))

    def choices(self, fx: Effects, agent: Agent) -> R.ChoicesOrWhy:
        near = [a for a in fx.world.agents_in_reach(agent.cell) if a != agent.id]
        return ({"to": near}, "") if near else (None, "nobody is within reach")

    def check(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> str | None:
        return None if args["to"] in fx.world.agents_in_reach(agent.cell) else f"{args['to']} is no longer in reach"

    def apply(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> None:
        fx.notify(fx.audience(agent.cell, agent.id), {"kind": "waved", "agent": agent.id, "to": args["to"],
                                                      "text": f"{agent.id} waved at {args['to']}"})


@pytest.fixture
def with_wave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(R.GENERIC, "wave", Wave())


def _sim() -> Simulation:
    return Simulation(make_spec(agents=[agent("alice"), agent("bob"), agent("carol", at="dock", role="idler")]), 0)


@pytest.mark.usefixtures("with_wave")
def test_a_new_generic_tool_is_offered_validated_applied_and_heard() -> None:
    """Every agent gets it; it is offered with its choices; a bad choice is refused in the table's words; an
    accepted wave is journaled and heard by those within reach, who wake for it."""
    sim = _sim()
    assert all("wave" in a.tools for a in sim.world.agents.values())
    batch = sim.advance()
    assert batch is not None
    alice, carol = obs_of(batch, "alice"), obs_of(batch, "carol")
    assert {"action": "wave", "params": {"to": {"choices": ["bob"]}}, "suggestions": [{"to": "bob"}]} \
        in alice.affordances
    assert "wave(to: bob)" in alice.text
    assert carol.unavailable()["wave"] == "nobody is within reach"
    assert sim.validate("alice", {"action": "wave", "args": {"to": "carol"}}) == \
        "args.to: 'carol' is not a valid to for wave now; choose one of ['bob']"
    assert sim.validate("carol", {"action": "wave", "args": {"to": "bob"}}) == \
        "wave is not available now: nobody is within reach"
    assert "wave" in [t["name"] for t in briefing(sim, "alice")["tool_catalog"]]
    assert "wave" in [t["name"] for t in layout(sim.world, sim.spec)["tools"]]
    for obs in batch.observations:
        sim.answer(obs.agent_id, {"action": "wave", "args": {"to": "bob"}} if obs.agent_id == "alice"
                   else {"noop": True})
    sim.adjudicate()
    assert outcome_of(sim, batch, "alice") == ("accepted", "")
    assert [r["event"] for r in records(sim, "event")] == ["waved"]
    nxt = play(sim)
    heard = obs_of(nxt, "bob")
    assert heard.reason == "event"
    assert [e["text"] for e in heard.observation["events"]] == ["alice waved at bob"]


@pytest.mark.usefixtures("with_wave")
def test_a_new_tools_check_runs_at_adjudication() -> None:
    """Its check judges the world as the batch left it: bob walks away first, alice's wave is rejected."""
    sim = _sim()
    batch = sim.advance()
    assert batch is not None
    for obs in batch.observations:
        assert obs.affordances  # read before adjudication (observations are lazy)
    sim.world.move_agent(sim.world.agents["bob"], ("town", 5, 0))  # as an earlier answer of the batch would
    for obs in batch.observations:
        sim.answer(obs.agent_id, {"action": "wave", "args": {"to": "bob"}} if obs.agent_id == "alice"
                   else {"noop": True})
    sim.adjudicate()
    assert outcome_of(sim, batch, "alice") == ("rejected", "bob is no longer in reach")


@pytest.mark.usefixtures("with_wave")
def test_a_scenario_may_not_take_a_new_generic_tools_name(tmp_path: Path) -> None:
    """The loader's reserved names are the table's: a scenario tool named ``wave`` is refused."""
    text = VALID.replace('name = "fix"', 'name = "wave"').replace('tools = ["fix"]', 'tools = ["wave"]')
    with pytest.raises(ScenarioError, match="expected a name other than the generic tools .*wave"):
        load_scenario(str(write(tmp_path, text)))
