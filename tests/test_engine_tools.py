"""Every tool's success and each of its failure reasons, in small worlds built from spec classes.

Failures come at two moments (rules.py): ``validate`` judges a command against the observation's
affordances; adjudication (``rules.check``) judges it against the world. To reach adjudication's
reasons for commands validation would refuse, a test answers without validating (``check=False``),
as a client that skips validation would.
"""

from __future__ import annotations

import pytest
from simworld import agent, item, make_sim, obs_of, outcome_of, play, records

from warren_sim.engine import WorldError
from warren_sim.engine import spec as S

OPEN_WALL = S.StructureSpec("wall", "wall", "the wall", "gate", (("strength", 1),), (("strength", 2),))
FULL_WALL = S.StructureSpec("wall", "wall", "the wall", "gate", (("strength", 2),), (("strength", 2),))
VAULT = S.StructureSpec("vault", "vault", "the vault", "shed", (("open", 0),), (("open", 1),), secret="1234")
OPEN_VAULT = S.ObjectiveSpec("open", "Open the vault.", "vault", "open", 1)


def move(dest: str) -> dict:
    return {"action": "move_to", "args": {"dest": dest}}


def act(tool: str, **args: str) -> dict:
    return {"action": tool, "args": args}


def events_of(obs, kind: str) -> list[dict]:
    return [e for e in obs.observation["events"] if e["kind"] == kind]


# -- move_to ------------------------------------------------------------------------------------------

def test_move_to_across_a_link_takes_its_steps_times_step_ms() -> None:
    """move_to dock from the yard: 11 steps to the link end, 3 across it, 4 on the isle, 500 ms each."""
    sim = make_sim(structures=[OPEN_WALL, VAULT], conventions={"step_ms": 500})
    first = play(sim, {"alice": move("dock")})
    (started,) = records(sim, "action")
    assert (started["agent"], started["t"], started["until"]) == ("alice", 0, 18 * 500)
    assert sim.world.agents["alice"].cell == ("town", 0, 0)  # nobody moves before the walk completes
    nxt = play(sim)
    assert nxt.time == 9000
    alice = obs_of(nxt, "alice")
    assert alice.reason == "done"
    assert alice.observation["you"]["cell"] == "isle:2,2"
    assert alice.observation["you"]["place"] == "dock"
    assert outcome_of(sim, first, "alice") == ("completed", "")


def test_move_to_a_cell_costs_its_manhattan_distance() -> None:
    """move_to a cell of the same space takes |dx| + |dy| steps."""
    sim = make_sim()
    play(sim, {"alice": move("town:3,2")})
    assert records(sim, "action")[0]["until"] == 5 * 1000


def test_move_to_where_you_already_are_is_refused() -> None:
    """Your own place fails validation saying so; another cell of your place is rejected at adjudication."""
    sim = make_sim()
    batch = sim.advance()
    err = sim.validate("alice", move("yard"))
    assert err is not None and "already at yard" in err
    sim.answer("alice", move("town:1,0"))  # the yard is 2 cells wide: this cell is still the yard
    sim.answer("bob", {"noop": True})
    sim.answer("carol", {"noop": True})
    sim.adjudicate()
    assert outcome_of(sim, batch, "alice") == ("rejected", "you are already at town:1,0")


def test_move_to_through_a_closed_gate_is_rejected_naming_the_link_and_structure() -> None:
    """The rejection says which link is closed, which structure opens it and how far it is from open."""
    sim = make_sim()
    batch = play(sim, {"alice": move("dock")})
    outcome, reason = outcome_of(sim, batch, "alice")
    assert outcome == "rejected"
    assert "ferry" in reason and "the wall" in reason and "strength" in reason
    assert "reaches 1 (now 0)" in reason
    assert sim.world.agents["alice"].cell == ("town", 0, 0)


def test_move_to_an_unknown_destination_fails_validation() -> None:
    """A destination that is neither a place nor a cell of the map is refused before adjudication."""
    sim = make_sim()
    sim.advance()
    for dest in ("nowhere", "town:40,0", "moon:1,1", "town:x,y"):
        err = sim.validate("alice", move(dest))
        assert err is not None and "neither a place" in err and repr(dest) in err, err
        assert "'dock'" in err  # it lists the places to choose from


def test_a_gate_on_an_unknown_structure_is_refused_when_the_world_is_built() -> None:
    """A link gated by a structure that does not exist fails at construction, not at the first walk."""
    gate = S.GateSpec("tower", "strength", 1)
    with pytest.raises(WorldError, match="link ferry: its gate names unknown structure 'tower'"):
        make_sim(links=[S.LinkSpec("ferry", "town:11,0", "isle:0,0", 3, gate)])


# -- take ---------------------------------------------------------------------------------------------

def test_take_puts_the_item_in_your_inventory_and_tells_the_place() -> None:
    """A take moves the item from the place to the taker; the others at the place see who took it."""
    sim = make_sim(items=[item("hammer-1", "yard")])
    first = play(sim, {"alice": act("take", item="hammer-1")})
    assert outcome_of(sim, first, "alice") == ("accepted", "")
    nxt = play(sim)
    assert [i["id"] for i in obs_of(nxt, "alice").observation["you"]["inventory"]] == ["hammer-1"]
    bob = obs_of(nxt, "bob")
    assert bob.observation["place"]["items"] == []
    assert [e["text"] for e in events_of(bob, "took")] == ["alice took hammer-1"]


def test_take_with_a_full_inventory_is_unavailable() -> None:
    """At capacity, take is not offered and validation says the inventory is full."""
    sim = make_sim(items=[item("nail-1", "alice"), item("hammer-1", "yard")], conventions={"max_inventory": 1})
    batch = sim.advance()
    tools = {t["action"]: t for t in obs_of(batch, "alice").observation["tools"]}
    assert tools["take"]["available"] is False and "full" in tools["take"]["why"]
    err = sim.validate("alice", act("take", item="hammer-1"))
    assert err == "take is not available now: your inventory is full (1 items)"


def test_take_rejected_when_the_inventory_filled_earlier_in_the_batch() -> None:
    """A give ordered first fills the taker's last slot: the take is rejected as inventory full."""
    for seed in range(50):
        sim = make_sim(seed, items=[item("nail-1", "bob"), item("hammer-1", "yard")],
                       conventions={"max_inventory": 1})
        batch = play(sim, {"alice": act("take", item="hammer-1"), "bob": act("give", item="nail-1", to="alice")})
        order = records(sim, "batch")[0]["order"]
        if order.index("bob") < order.index("alice"):
            break
    else:
        raise AssertionError("no seed in 0..49 ordered bob before alice")
    assert outcome_of(sim, batch, "bob") == ("accepted", "")
    assert outcome_of(sim, batch, "alice") == (
        "rejected", "your inventory is full (1 items); drop or give something first")
    assert sim.world.agents["alice"].inventory == ["nail-1"]


def test_a_container_cannot_be_taken() -> None:
    """A container is not among take's choices, and a take of it is rejected at adjudication."""
    sim = make_sim(items=[item("crate-1", "yard", container=True), item("nail-1", "crate-1")])
    batch = sim.advance()
    take = next(a for a in obs_of(batch, "alice").affordances if a["action"] == "take")
    assert take["params"]["item"]["choices"] == ["nail-1"]
    err = sim.validate("alice", act("take", item="crate-1"))
    assert err is not None and "'crate-1' is not a valid item for take now" in err
    sim.answer("alice", act("take", item="crate-1"))
    sim.answer("bob", {"noop": True})
    sim.answer("carol", {"noop": True})
    sim.adjudicate()
    outcome, reason = outcome_of(sim, batch, "alice")
    assert outcome == "rejected" and "crate-1 is a container and cannot be carried" in reason


def test_an_item_inside_a_container_can_be_taken() -> None:
    """Items inside a container at your place are within reach; taking one empties the container."""
    sim = make_sim(items=[item("crate-1", "yard", container=True), item("nail-1", "crate-1")])
    first = sim.advance()
    inside = [i for i in obs_of(first, "alice").observation["place"]["items"] if i["id"] == "nail-1"]
    assert inside == [{"id": "nail-1", "kind": "nail", "name": "a nail", "in": "crate-1"}]
    sim.answer("alice", act("take", item="nail-1"))
    sim.answer("bob", {"noop": True})
    sim.answer("carol", {"noop": True})
    sim.adjudicate()
    assert outcome_of(sim, first, "alice") == ("accepted", "")
    assert sim.world.agents["alice"].inventory == ["nail-1"]
    nxt = play(sim, {"alice": act("inspect", target="crate-1")})
    assert [i["id"] for i in obs_of(nxt, "alice").observation["place"]["items"]] == ["crate-1"]
    (seen,) = events_of(obs_of(play(sim), "alice"), "inspected")
    assert seen["details"]["contains"] == []


# -- drop, give ---------------------------------------------------------------------------------------

def test_drop_puts_the_item_at_your_place() -> None:
    """A dropped item leaves the inventory, lies at the place and the others there are told."""
    sim = make_sim(items=[item("hammer-1", "alice")])
    first = play(sim, {"alice": act("drop", item="hammer-1")})
    assert outcome_of(sim, first, "alice") == ("accepted", "")
    nxt = play(sim)
    assert obs_of(nxt, "alice").observation["you"]["inventory"] == []
    bob = obs_of(nxt, "bob")
    assert [i["id"] for i in bob.observation["place"]["items"]] == ["hammer-1"]
    assert [e["text"] for e in events_of(bob, "dropped")] == ["alice dropped hammer-1"]


def test_drop_needs_something_you_carry() -> None:
    """With nothing carried drop is unavailable; an item you do not carry is not a choice."""
    sim = make_sim(items=[item("hammer-1", "alice"), item("saw-1", "yard")])
    sim.advance()
    assert sim.validate("bob", act("drop", item="hammer-1")) == "drop is not available now: you carry nothing"
    err = sim.validate("alice", act("drop", item="saw-1"))
    assert err is not None and "not a valid item for drop now" in err and "'hammer-1'" in err


def test_give_hands_the_item_to_the_recipient() -> None:
    """A give moves the item into the recipient's inventory; the recipient is told who gave what."""
    sim = make_sim(items=[item("hammer-1", "alice")])
    first = play(sim, {"alice": act("give", item="hammer-1", to="bob")})
    assert outcome_of(sim, first, "alice") == ("accepted", "")
    nxt = play(sim)
    bob = obs_of(nxt, "bob")
    assert [i["id"] for i in bob.observation["you"]["inventory"]] == ["hammer-1"]
    assert [e["text"] for e in events_of(bob, "gave")] == ["alice gave hammer-1 to bob"]
    assert sim.world.items["hammer-1"].holder == "bob"


def test_give_to_someone_elsewhere_fails_validation() -> None:
    """Only agents within reach are choices for give's ``to``."""
    sim = make_sim(items=[item("hammer-1", "alice")], agents=[agent("alice"), agent("dave", at="shed")])
    batch = sim.advance()
    tools = {t["action"]: t for t in obs_of(batch, "alice").observation["tools"]}
    assert tools["give"] == {"action": "give", "lane": "body", "durative": False, "available": False,
                             "why": "nobody is within reach"}
    assert sim.validate("alice", act("give", item="hammer-1", to="dave")) == \
        "give is not available now: nobody is within reach"


def test_give_to_a_recipient_who_left_is_rejected() -> None:
    """A recipient no longer within reach at adjudication makes the give fail, naming the recipient."""
    sim = make_sim(items=[item("hammer-1", "alice")])
    batch = sim.advance()
    assert sim.validate("alice", act("give", item="hammer-1", to="bob")) is None
    sim.answer("alice", act("give", item="hammer-1", to="bob"))
    sim.answer("bob", {"noop": True})
    sim.answer("carol", {"noop": True})
    sim.world.move_agent(sim.world.agents["bob"], ("town", 5, 0))  # bob is gone by adjudication
    sim.adjudicate()
    assert outcome_of(sim, batch, "alice") == ("rejected", "bob is no longer within reach")
    assert sim.world.agents["alice"].inventory == ["hammer-1"]


def test_give_to_a_full_recipient_is_rejected() -> None:
    """A recipient at capacity cannot take the item; the giver keeps it."""
    sim = make_sim(items=[item("hammer-1", "alice"), item("nail-1", "bob")], conventions={"max_inventory": 1})
    batch = play(sim, {"alice": act("give", item="hammer-1", to="bob")})
    assert outcome_of(sim, batch, "alice") == ("rejected", "bob cannot carry more (1 items)")
    assert sim.world.agents["alice"].inventory == ["hammer-1"]
    assert sim.world.agents["bob"].inventory == ["nail-1"]


# -- say, tell, inspect -------------------------------------------------------------------------------

def test_say_is_heard_at_the_same_place_only() -> None:
    """Everyone at the speaker's place hears it and wakes with reason message; nobody elsewhere does."""
    sim = make_sim(agents=[agent("alice"), agent("bob"), agent("dave", at="shed")])
    play(sim, {"alice": {"action": "say", "args": {"text": "hello"}}})
    nxt = sim.advance()
    assert nxt is not None and nxt.time == 1000
    assert sorted((o.agent_id, o.reason) for o in nxt.observations) == [("alice", "done"), ("bob", "message")]
    assert obs_of(nxt, "bob").observation["messages"] == [
        {"time": 0, "from": "alice", "kind": "say", "text": "hello"}]
    assert sim.world.agents["dave"].messages == []
    assert records(sim, "message") == [{"kind": "message", "t": 0, "from": "alice", "to": None, "text": "hello"}]


def test_tell_reaches_its_recipient_anywhere() -> None:
    """A tell wakes its recipient wherever it is, with reason message; nobody else hears it."""
    sim = make_sim(agents=[agent("alice"), agent("bob"), agent("dave", at="shed")])
    play(sim, {"alice": {"action": "tell", "args": {"to": "dave", "text": "psst"}}})
    nxt = sim.advance()
    assert nxt is not None
    assert sorted((o.agent_id, o.reason) for o in nxt.observations) == [("alice", "done"), ("dave", "message")]
    assert obs_of(nxt, "dave").observation["messages"] == [
        {"time": 0, "from": "alice", "kind": "tell", "text": "psst"}]


def test_tell_refuses_yourself_and_unknown_agents() -> None:
    """Telling yourself or a nonexistent agent fails validation with the specific reason."""
    sim = make_sim()
    sim.advance()
    assert sim.validate("alice", {"action": "tell", "args": {"to": "alice", "text": "hi"}}) == \
        "args.to: you cannot tell yourself; name another agent"
    err = sim.validate("alice", {"action": "tell", "args": {"to": "zed", "text": "hi"}})
    assert err is not None and "there is no agent 'zed'" in err


def test_inspect_details_appear_in_the_next_observation() -> None:
    """inspect reports what it found as an ``inspected`` event of the inspector's next observation."""
    sim = make_sim(structures=[OPEN_WALL, VAULT], agents=[agent("alice", at="gate"), agent("bob")])
    play(sim, {"alice": act("inspect", target="wall")})
    (seen,) = events_of(obs_of(play(sim), "alice"), "inspected")
    assert seen["target"] == "wall"
    assert seen["details"] == {"id": "wall", "kind": "wall", "name": "the wall", "place": "gate",
                               "fields": {"strength": 1}, "maxima": {"strength": 2}}


def test_inspect_of_something_out_of_sight_fails_validation() -> None:
    """Only what is within reach (and your place) can be inspected."""
    sim = make_sim()
    sim.advance()
    err = sim.validate("alice", act("inspect", target="vault"))
    assert err is not None and "not a valid target for inspect now" in err


# -- work tools ---------------------------------------------------------------------------------------

def _worker_sim(*carried: str, at: str = "gate", structures=(OPEN_WALL, VAULT)):
    items = [item(i, "alice") for i in carried]
    return make_sim(items=items, structures=list(structures), agents=[agent("alice", at=at), agent("bob")],
                    objectives=[OPEN_VAULT])


def _answer_unchecked(sim, command: dict) -> tuple[str, str]:
    batch = sim.advance()
    sim.answer("alice", command)
    sim.answer("bob", {"noop": True})
    sim.adjudicate()
    return outcome_of(sim, batch, "alice")


def test_work_needs_the_held_item() -> None:
    """Without the hammer fix is unavailable, and rejected at adjudication naming what is missing."""
    sim = _worker_sim("plank-1")
    sim.advance()
    assert sim.validate("alice", act("fix", structure="wall", item="plank-1")) == \
        "fix is not available now: you need to carry a hammer"
    sim = _worker_sim("plank-1")
    assert _answer_unchecked(sim, act("fix", structure="wall", item="plank-1")) == \
        ("rejected", "fix needs a hammer in your inventory")


def test_work_needs_the_consumed_item() -> None:
    """Without a plank fix is unavailable; naming a plank you lack is rejected at adjudication."""
    sim = _worker_sim("hammer-1")
    sim.advance()
    assert sim.validate("alice", act("fix", structure="wall", item="plank-1")) == \
        "fix is not available now: you carry no plank"
    sim = _worker_sim("hammer-1")
    assert _answer_unchecked(sim, act("fix", structure="wall", item="plank-1")) == \
        ("rejected", "you no longer carry plank-1")


def test_work_needs_the_structure_within_reach() -> None:
    """Away from the wall fix is unavailable, and rejected at adjudication saying where to go."""
    sim = _worker_sim("hammer-1", "plank-1", at="yard")
    sim.advance()
    assert sim.validate("alice", act("fix", structure="wall", item="plank-1")) == \
        "fix is not available now: no wall within reach"
    sim = _worker_sim("hammer-1", "plank-1", at="yard")
    assert _answer_unchecked(sim, act("fix", structure="wall", item="plank-1")) == \
        ("rejected", "wall is not within reach; go to gate first")


def test_work_on_a_field_at_its_maximum_is_rejected() -> None:
    """A field already at its maximum cannot be raised; the plank is not used up."""
    sim = _worker_sim("hammer-1", "plank-1", structures=(FULL_WALL, VAULT))
    batch = play(sim, {"alice": act("fix", structure="wall", item="plank-1")})
    assert outcome_of(sim, batch, "alice") == ("rejected", "the wall strength is already at its maximum (2)")
    assert "plank-1" in sim.world.agents["alice"].inventory


def test_work_with_the_wrong_code_is_rejected() -> None:
    """A tool that needs the structure's code rejects a wrong one, naming the code and the structure."""
    sim = _worker_sim(at="shed")
    batch = play(sim, {"alice": act("unlock", structure="vault", code="0000")})
    assert outcome_of(sim, batch, "alice") == ("rejected", "the code '0000' does not work on vault")
    assert sim.world.structures["vault"].fields["open"] == 0


def test_work_with_the_right_code_succeeds_at_once() -> None:
    """An instant work tool with the right code changes the structure in the same batch."""
    sim = _worker_sim(at="shed")
    batch = play(sim, {"alice": act("unlock", structure="vault", code="1234")})
    assert outcome_of(sim, batch, "alice") == ("accepted", "")
    assert sim.world.structures["vault"].fields["open"] == 1
    assert sim.status == "completed"


def test_work_success_increments_the_field_and_consumes_the_item() -> None:
    """fix takes its duration, then adds 1 to the wall's strength and uses up the plank (not the hammer)."""
    sim = _worker_sim("hammer-1", "plank-1", "plank-2", structures=(S.StructureSpec(
        "wall", "wall", "the wall", "gate", (("strength", 0),), (("strength", 2),)), VAULT))
    first = play(sim, {"alice": act("fix", structure="wall", item="plank-1")})
    assert outcome_of(sim, first, "alice") == ("accepted", "")
    assert records(sim, "action")[0]["until"] == 2000
    assert sim.world.structures["wall"].fields["strength"] == 0
    nxt = play(sim)
    assert (nxt.time, obs_of(nxt, "alice").reason) == (2000, "done")
    assert outcome_of(sim, first, "alice") == ("completed", "")
    assert sim.world.structures["wall"].fields["strength"] == 1
    assert "plank-1" not in sim.world.items
    assert sim.world.agents["alice"].inventory == ["hammer-1", "plank-2"]
    place = obs_of(nxt, "alice").observation["place"]
    assert place["structures"][0]["fields"] == {"strength": 1}


def test_world_events_are_journaled_as_event_records() -> None:
    """What happens at a place reaches the trace as ``kind: event`` with what happened in ``event``."""
    sim = make_sim(items=[item("hammer-1", "yard")])
    play(sim, {"alice": act("take", item="hammer-1")})
    assert records(sim, "event") == [{"kind": "event", "t": 0, "event": "took", "agent": "alice",
                                      "item": "hammer-1", "text": "alice took hammer-1"}]
