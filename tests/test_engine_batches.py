"""Batches: simultaneous observations, the seeded adjudication order, validation, and driving errors."""

from __future__ import annotations

import pytest
from simworld import item, make_sim, obs_of, outcome_of, play, records

from warren_sim.engine import EngineError

TAKE = {"action": "take", "args": {"item": "hammer-1"}}


def _contest(seed: int):
    """alice and bob both take hammer-1 in the first batch of a run with ``seed``."""
    sim = make_sim(seed, items=[item("hammer-1", "yard")])
    batch = sim.advance()
    assert batch is not None
    observations = {o.agent_id: o for o in batch.observations}
    for o in batch.observations:
        o.observation  # noqa: B018 - observations are lazy: read them before adjudication
    for aid in ("alice", "bob"):
        assert sim.validate(aid, TAKE) is None
        sim.answer(aid, TAKE)
    sim.answer("carol", {"noop": True})
    sim.adjudicate()
    return sim, batch, observations


def test_two_takes_of_one_item_have_one_winner_by_the_seeded_order() -> None:
    """Both see the item; the first of the batch's order gets it; the other is rejected naming the winner."""
    for seed in range(10):
        sim, batch, observations = _contest(seed)
        for aid in ("alice", "bob"):
            assert [i["id"] for i in observations[aid].observation["place"]["items"]] == ["hammer-1"]
        (order_record,) = records(sim, "batch")
        order = order_record["order"]
        assert sorted(order) == ["alice", "bob", "carol"]
        winner, loser = sorted(("alice", "bob"), key=order.index)
        assert sim.world.agents[winner].inventory == ["hammer-1"]
        assert sim.world.agents[loser].inventory == []
        assert outcome_of(sim, batch, winner) == ("accepted", "")
        assert outcome_of(sim, batch, loser) == (
            "rejected", f"hammer-1 is no longer here: {winner} has it earlier in this batch")


def test_a_lost_conflict_is_structured_in_the_outcome_record() -> None:
    """The loser's outcome record and sim.conflict_of carry {winner, resource}; no other outcome has the key."""
    for seed in range(10):
        sim, batch, observations = _contest(seed)
        order = records(sim, "batch")[0]["order"]
        winner, loser = sorted(("alice", "bob"), key=order.index)
        outcomes = {r["agent"]: r for r in records(sim, "outcome")}
        assert outcomes[loser]["conflict"] == {"winner": winner, "resource": "hammer-1"}
        assert "conflict" not in outcomes[winner] and "conflict" not in outcomes["carol"]
        assert sim.conflict_of(observations[loser].observation_id) == {"winner": winner, "resource": "hammer-1"}
        assert sim.conflict_of(observations[winner].observation_id) is None


def test_different_seeds_give_different_winners() -> None:
    """Over a few seeds, each contender wins at least once: the order is drawn, not alphabetical."""
    winners = {seed: _contest(seed)[0].world.items["hammer-1"].holder for seed in range(20)}
    assert set(winners.values()) == {"alice", "bob"}
    assert winners == {seed: _contest(seed)[0].world.items["hammer-1"].holder for seed in range(20)}


def test_observations_of_a_batch_are_built_before_any_answer_applies() -> None:
    """Once the batch is out, answers change nothing in its observations until adjudication."""
    sim, _, observations = _contest(1)
    assert observations["carol"].observation["place"]["items"] == [
        {"id": "hammer-1", "kind": "hammer", "name": "a hammer"}]
    carol_next = obs_of(play(sim), "carol")
    assert carol_next.observation["place"]["items"] == []


def test_an_observation_first_read_after_adjudication_refuses() -> None:
    """Observations are built lazily; one never read before its batch was adjudicated raises, never lies."""
    from warren_sim.engine.perception import StaleObservation

    sim = make_sim(items=[item("hammer-1", "yard")])
    batch = sim.advance()
    for o in batch.observations:
        sim.answer(o.agent_id, TAKE if o.agent_id == "alice" else {"noop": True})
    sim.adjudicate()
    with pytest.raises(StaleObservation, match="before answering"):
        batch.observations[0].observation  # noqa: B018


def test_validation_uses_the_snapshot_not_other_answers() -> None:
    """A take validates even after another agent answered the same take: conflicts wait for adjudication."""
    sim = make_sim(items=[item("hammer-1", "yard")])
    sim.advance()
    sim.answer("bob", TAKE)
    assert sim.validate("alice", TAKE) is None


def test_the_order_is_drawn_per_batch() -> None:
    """Each batch records its own permutation of the agents it woke."""
    sim = make_sim(3, conventions={"idle_wake_ms": 1000})
    orders: list[list[str]] = []
    for _ in range(8):
        batch = play(sim)
        orders.append(records(sim, "batch")[-1]["order"])
        assert sorted(orders[-1]) == sorted(o.agent_id for o in batch.observations)
    assert len({tuple(o) for o in orders}) > 1


def test_a_rejected_take_leaves_the_loser_free_to_act_again() -> None:
    """The loser wakes interrupted a tick later and can pick something else."""
    sim, _, _ = _contest(0)
    loser = "alice" if sim.world.items["hammer-1"].holder == "bob" else "bob"
    batch = play(sim)
    assert obs_of(batch, loser).reason == "interrupted"


# -- validate -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("command", "expected"), [
    ({"action": "say", "args": {"text": "x"}, "noop": True}, "the command has action and noop; send exactly one of"),
    ({"sleep_ms": 5, "noop": True}, "the command has sleep_ms and noop"),
    ({"action": "say", "sleep_ms": 5}, "the command has action and sleep_ms"),
    ({}, "the command has no decision"),
    ({"noop": True, "why": "bored"}, "unknown field 'why' in the command; valid fields: action, args, noop, sleep_ms"),
    ({"noop": False}, "noop must be true"),
    ({"noop": True, "args": {}}, "args belongs with action; a noop command takes no args"),
    ({"sleep_ms": "5"}, "sleep_ms must be an integer number of milliseconds from 0 to 9007199254740991, got a string '5'"),
    ({"sleep_ms": 1.5}, "got a number 1.5"),
    ({"sleep_ms": True}, "got true"),
    ({"sleep_ms": -1}, "from 0 to 9007199254740991, got a number -1"),
    ({"sleep_ms": 5, "args": {}}, "a sleep_ms command takes no args"),
    ({"action": 7}, "action must be a string naming one of your tools, got a number 7"),
    ({"action": "fly", "args": {}}, "unknown action 'fly'; your tools are: move_to, take"),
    ({"action": "drop", "args": {"item": "hammer-1"}}, "drop is not available now: you carry nothing"),
    ({"action": "take", "args": {"item": "hammer-1", "count": 2}},
     "take has no argument 'count'; its arguments are: item"),
    ({"action": "take", "args": {}}, "take needs argument 'item'"),
    ({"action": "take"}, "take needs argument 'item'"),
    ({"action": "take", "args": {"item": 3}}, "args.item of take must be a string, got int 3"),
    ({"action": "take", "args": ["hammer-1"]}, "args must be an object of the tool's arguments"),
    ({"action": "say", "args": {"text": ""}}, "args.text of say must not be empty"),
    ({"action": "say", "args": {"text": "x" * 501}}, "at most 500 are allowed"),
    ({"action": "take", "args": {"item": "saw-9"}},
     "args.item: 'saw-9' is not a valid item for take now; choose one of ['hammer-1']"),
])
def test_validate_explains_what_is_wrong(command: dict, expected: str) -> None:
    """validate() returns a teaching error naming the problem."""
    sim = make_sim(items=[item("hammer-1", "yard")])
    sim.advance()
    err = sim.validate("alice", command)
    assert err is not None and expected in err, err


@pytest.mark.parametrize("command", [
    {"noop": True}, {"sleep_ms": 0}, {"sleep_ms": 2**53 - 1}, TAKE, {"action": "say", "args": {"text": "hi"}},
    {"action": "move_to", "args": {"dest": "town:7,3"}},
])
def test_validate_accepts_well_formed_commands(command: dict) -> None:
    """Each of the three command forms passes when well formed."""
    sim = make_sim(items=[item("hammer-1", "yard")])
    sim.advance()
    assert sim.validate("alice", command) is None


def test_validate_for_an_agent_without_an_observation() -> None:
    """An agent that was not woken has nothing to answer."""
    sim = make_sim()
    assert sim.validate("alice", {"noop": True}) == "alice has no outstanding observation"


# -- driving errors -----------------------------------------------------------------------------------

def test_the_engine_refuses_to_be_driven_out_of_order() -> None:
    """Advancing or adjudicating with answers missing, or answering twice, raise EngineError."""
    sim = make_sim()
    sim.advance()
    sim.answer("alice", {"noop": True})
    with pytest.raises(EngineError, match="already answered"):
        sim.answer("alice", {"noop": True})
    with pytest.raises(EngineError, match="answers missing for bob, carol"):
        sim.adjudicate()
    with pytest.raises(EngineError, match="adjudicate the current batch"):
        sim.advance()
    with pytest.raises(EngineError, match="zed has no outstanding observation"):
        sim.answer("zed", {"noop": True})


def test_every_answer_is_recorded_in_the_seeded_order() -> None:
    """The trace's command records follow the batch's order, with each agent's observation id."""
    sim, _, _ = _contest(5)
    order = records(sim, "batch")[0]["order"]
    commands = records(sim, "command")
    assert [c["agent"] for c in commands] == order
    assert [c["observation_id"] for c in commands] == [f"{a}#0" for a in order]
    assert sim.decisions == 3


def test_an_outcome_is_pending_until_adjudicated_then_accepted_or_what_happened() -> None:
    """``outcome_of`` (what receipts report): pending while the batch waits, then accepted (the engine stores no
    entry for it) or the stored outcome; an id the run never issued stays pending, whatever it looks like."""
    sim = make_sim(items=[item("hammer-1", "yard")])
    batch = sim.advance()
    assert batch is not None
    ids = {o.agent_id: o.observation_id for o in batch.observations}
    sim.answer("alice", TAKE)
    sim.answer("bob", TAKE)
    sim.answer("carol", {"sleep_ms": 5000})
    assert {sim.outcome_of(i) for i in ids.values()} == {("pending", "")}
    sim.adjudicate()
    assert sim.outcome_of(ids["carol"]) == ("accepted", "")
    assert sorted(sim.outcome_of(ids[a])[0] for a in ("alice", "bob")) == ["accepted", "rejected"]
    seq = obs_of(batch, "carol").seq
    for never in (f"carol#{seq + 1}", f"carol#0{seq}", f"carol#{seq}x", "carol#", "nobody#0", "carol", "#0", ""):
        assert sim.outcome_of(never) == ("pending", ""), never
    nxt = sim.advance()  # the next batch: its observations are pending again, the earlier ones stay as they were
    assert nxt is not None
    for o in nxt.observations:
        assert sim.outcome_of(o.observation_id) == ("pending", "")
    assert sim.outcome_of(ids["carol"]) == ("accepted", "")
