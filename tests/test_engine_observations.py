"""Briefings and observations: the fields of the seed's example, the hash, caps, sight and text."""

from __future__ import annotations

import hashlib
import json

import pytest
from simworld import agent, item, make_sim, obs_of, play

from warren_sim.engine import Simulation, briefing
from warren_sim.scenarios import load_scenario

SEED_BRIEFING_KEYS = {"briefing_id", "revision", "content_hash", "agent_id", "role", "name", "scenario", "premise",
                      "objectives", "tool_catalog", "conventions", "notes"}
SEED_MOVE_TO = {"name": "move_to", "description": "Walk to a place, however far.", "lane": "body", "durative": True,
                "input_schema": {"type": "object", "properties": {"dest": {"type": "string"}},
                                 "required": ["dest"], "additionalProperties": False}}


@pytest.fixture(scope="module")
def bridge() -> Simulation:
    return Simulation(load_scenario("bridge_repair").spec, 3, run_id="run-1")


def test_the_briefing_has_every_field_of_the_seed_example(bridge: Simulation) -> None:
    """engineer-1's briefing carries the seed example's fields with the seed example's values."""
    b = briefing(bridge, "engineer-1")
    assert SEED_BRIEFING_KEYS <= set(b)
    assert {k: b[k] for k in ("briefing_id", "revision", "agent_id", "role", "name", "scenario", "premise",
                              "notes")} == {
        "briefing_id": "run-1/engineer-1", "revision": 1, "agent_id": "engineer-1", "role": "engineer",
        "name": "Sam the engineer", "scenario": "bridge_repair",
        "premise": "Repair the storm-damaged bridge and resupply the clinic.", "notes": ""}
    assert b["objectives"][0] == {"id": "repair", "description": "Restore the bridge's structural integrity.",
                                  "status": "pending", "deadline_ms": None, "progress": {"current": 0, "target": 2}}
    assert b["tool_catalog"][0] == SEED_MOVE_TO
    assert [t["name"] for t in b["tool_catalog"]] == [
        "move_to", "take", "drop", "give", "say", "tell", "inspect", "repair"]
    conv = b["conventions"]
    assert conv["grid_naming"] == "cells are '<space>:<x>,<y>'; x grows east, y grows south"
    assert conv["sight_radius"] == 0
    assert conv["budgets"] == {"max_sight": 40, "max_messages": 12, "max_inventory": 20}
    assert conv["decision"] == "answer each observation with exactly one command: an action, a sleep, or a noop"


def test_the_briefing_hash_is_sha256_of_its_canonical_json(bridge: Simulation) -> None:
    """content_hash is 'sha256:' + sha256 of the briefing's canonical JSON without the hash field."""
    b = briefing(bridge, "engineer-1")
    body = {k: v for k, v in b.items() if k != "content_hash"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert b["content_hash"] == "sha256:" + hashlib.sha256(canonical).hexdigest()
    assert briefing(bridge, "engineer-1") == b  # stable
    assert briefing(bridge, "courier-1")["content_hash"] != b["content_hash"]


def test_the_first_observation_of_the_seed_example(bridge: Simulation) -> None:
    """bridge_repair seed 3: engineer-1#0, reason start, take toolbox-1 offered, text as in the seed."""
    batch = bridge.advance()
    assert batch is not None
    obs = obs_of(batch, "engineer-1")
    assert (obs.observation_id, obs.seq, obs.time, obs.reason) == ("engineer-1#0", 0, 0, "start")
    take = next(a for a in obs.affordances if a["action"] == "take")
    assert take == {"action": "take", "params": {"item": {"choices": ["toolbox-1"]}},
                    "suggestions": [{"item": "toolbox-1"}]}
    assert obs.text.startswith("[t=0s] You are Sam the engineer")
    o = obs.observation
    assert (o["agent"], o["time"], o["busy"]) == ("engineer-1", 0, [])
    assert {"agent", "time", "busy", "you", "place", "tools", "visible", "messages", "objectives",
            "events"} <= set(o)
    assert o["you"]["place"] == "workshop" and o["place"]["name"] == "workshop"
    assert {"action": "take", "lane": "body", "durative": False, "available": True} in o["tools"]
    assert [x["id"] for x in o["objectives"]] == ["repair", "resupply"]


def test_messages_are_capped_at_max_messages() -> None:
    """Only the newest max_messages messages are kept; the observation says how many were dropped."""
    tellers = [agent(f"t{i}", role="idler") for i in range(5)]
    sim = make_sim(agents=[agent("alice"), *tellers], conventions={"max_messages": 3})
    play(sim, {t.id: {"action": "tell", "args": {"to": "alice", "text": f"from {t.id}"}} for t in tellers})
    alice = obs_of(sim.advance(), "alice").observation
    assert len(alice["messages"]) == 3
    assert alice["messages_dropped"] == 2
    order = next(r["order"] for r in sim.records if r["kind"] == "batch")
    assert [m["from"] for m in alice["messages"]] == [a for a in order if a != "alice"][-3:]


def test_messages_and_events_are_delivered_once() -> None:
    """An observation takes the messages and events it shows; the next one starts empty."""
    sim = make_sim()
    play(sim, {"bob": {"action": "tell", "args": {"to": "alice", "text": "one"}}})
    first = obs_of(play(sim), "alice").observation
    assert [m["text"] for m in first["messages"]] == ["one"]
    batch = play(sim)
    while "alice" not in [o.agent_id for o in batch.observations]:
        batch = play(sim)
    later = obs_of(batch, "alice").observation
    assert (later["messages"], later["messages_dropped"], later["events"]) == ([], 0, [])


def test_visible_lists_agents_and_items_in_sight_beyond_reach() -> None:
    """With a sight radius, agents and items outside your place but in range appear with cell and distance."""
    sim = make_sim(agents=[agent("alice"), agent("dave", at="shed")], items=[item("saw-1", "town:3,1")],
                   conventions={"sight_radius": 5})
    alice = obs_of(sim.advance(), "alice")
    obs = alice.observation
    assert obs["visible"]["agents"] == [{"id": "dave", "name": "Dave the worker", "role": "worker", "busy": [],
                                         "cell": "town:5,0", "distance": 5}]
    assert obs["visible"]["items"] == [{"id": "saw-1", "kind": "saw", "name": "a saw", "cell": "town:3,1",
                                        "distance": 4}]
    assert obs["place"]["agents"] == []
    assert "In sight: dave at town:5,0, saw-1 at town:3,1." in alice.text


def test_visible_is_empty_without_sight_and_capped_by_max_sight() -> None:
    """sight_radius 0 shows nothing beyond reach; max_sight bounds what is listed."""
    far = [agent(f"f{i}", at=f"town:{4 + i},0") for i in range(4)]
    sim = make_sim(agents=[agent("alice"), *far])
    assert obs_of(sim.advance(), "alice").observation["visible"] == {"agents": [], "items": []}
    sim = make_sim(agents=[agent("alice"), *far], conventions={"sight_radius": 10, "max_sight": 2})
    seen = obs_of(sim.advance(), "alice").observation["visible"]["agents"]
    assert [(v["id"], v["distance"]) for v in seen] == [("f0", 4), ("f1", 5)]


def test_the_text_renders_the_observation() -> None:
    """The prose names the wake reason, what is carried and within reach, objectives and the tools."""
    sim = make_sim(items=[item("hammer-1", "alice"), item("saw-1", "yard")])
    text = obs_of(sim.advance(), "alice").text
    assert text.startswith("[t=0s] You are Alice the worker (alice, role worker) at yard (town:0,0). "
                           "You woke because: start.")
    assert "You carry: hammer-1 (hammer)." in text
    assert "Within reach: items saw-1 (saw); agents bob (worker), carol (idler)." in text
    assert "Objective fortify: Make the wall strong. pending 0/2." in text
    assert "take(item: saw-1)" in text
    assert text.endswith("Answer with exactly one command: an action with args, a sleep (sleep_ms), or a noop.")


def test_busy_lists_the_running_action() -> None:
    """While walking, ``busy`` shows the action, its args and when it ends."""
    sim = make_sim()
    play(sim, {"alice": {"action": "move_to", "args": {"dest": "shed"}},
               "bob": {"action": "tell", "args": {"to": "alice", "text": "hi"}}})
    alice = obs_of(sim.advance(), "alice")
    assert alice.observation["busy"] == [{"lane": "body", "action": "move_to", "args": {"dest": "shed"},
                                          "started_ms": 0, "until_ms": 5000}]
    assert "You are busy: move_to {'dest': 'shed'} until t=5s." in alice.text


def test_the_view_is_a_read_only_mapping_of_the_observation_fields() -> None:
    """``obs.view`` is the observation itself, read as a mapping: the wire fields in the wire order, each built on
    first read and the same object on every later read, before and after adjudication."""
    from collections.abc import Mapping

    from warren_sim.engine.perception import ObservationView, StaleObservation

    sim = make_sim(items=[item("saw-1", "yard")])
    batch = sim.advance()
    assert batch is not None
    alice = obs_of(batch, "alice")
    view = alice.view
    assert view is alice and isinstance(view, Mapping)
    assert list(view) == list(view.keys()) == list(alice.observation) and len(view) == len(alice.observation)
    assert "busy" in view and "nope" not in view and view.get("nope") is None
    with pytest.raises(KeyError):
        view["nope"]
    place = view["place"]
    assert isinstance(place, ObservationView) and place["items"] == [{"id": "saw-1", "kind": "saw", "name": "a saw"}]
    assert dict(view.items())["you"] is view["you"] and dict(place) == alice.observation["place"]
    you = view["you"]
    bob = obs_of(batch, "bob")
    bob_place = bob.view["place"]  # read, but none of its own fields
    for obs in batch.observations:
        sim.answer(obs.agent_id, {"noop": True})
    sim.adjudicate()
    assert alice.view["you"] is you and place["items"] == [{"id": "saw-1", "kind": "saw", "name": "a saw"}]
    with pytest.raises(StaleObservation, match="before answering"):
        bob.view["you"]
    with pytest.raises(StaleObservation, match="before answering"):
        bob_place["items"]  # a nested field never read before adjudication refuses too
    assert bob.view["place"] is bob_place


def test_reading_observations_leaves_no_reference_cycle() -> None:
    """A headless run whose policies read the view (the warren foragers read ``busy``, ``you``, ``objectives`` and
    ``place``) leaves nothing for the cyclic garbage collector: the view refers to no other object that refers
    back (bench/results/r5-perf-engine2.md), so observations are freed as soon as they are let go."""
    import gc

    from warren_sim.engine import run_headless
    from warren_sim.scenarios import instantiate

    sim, policies = instantiate(load_scenario("warren", {"agents": 50}), 0, "solution", record=False)
    gc.collect()
    gc.disable()
    try:
        assert run_headless(sim, policies)["status"] == "completed"
        assert gc.collect() == 0
    finally:
        gc.enable()
