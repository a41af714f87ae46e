"""Every wake reason, sleep/noop/idle semantics and the lanes of durative actions (DESIGN section 2)."""

from __future__ import annotations

from simworld import agent, item, make_sim, obs_of, outcome_of, play, records, wakes

from warren_sim.engine import WAKE_REASONS
from warren_sim.engine import spec as S

NOOP = {"noop": True}
WEAK_WALL = S.StructureSpec("wall", "wall", "the wall", "gate", (("strength", 1),), (("strength", 2),))
OPEN_VAULT = S.ObjectiveSpec("open", "Open the vault.", "vault", "open", 1)


def move(dest: str) -> dict:
    return {"action": "move_to", "args": {"dest": dest}}


def tell(to: str, text: str = "hi") -> dict:
    return {"action": "tell", "args": {"to": to, "text": text}}


def test_the_wake_reasons_are_the_designed_ones() -> None:
    """The engine knows exactly the seven reasons of DESIGN section 2."""
    assert set(WAKE_REASONS) == {"start", "done", "timer", "message", "event", "interrupted", "idle"}


def test_start_wakes_everyone_at_time_zero() -> None:
    """Each agent's first observation is ``<id>#0`` at t=0 with reason start."""
    sim = make_sim()
    batch = sim.advance()
    assert batch is not None and batch.time == 0
    assert [(o.observation_id, o.seq, o.time, o.reason) for o in batch.observations] == [
        ("alice#0", 0, 0, "start"), ("bob#0", 0, 0, "start"), ("carol#0", 0, 0, "start")]


def test_done_after_an_instant_action_comes_one_tick_later() -> None:
    """An instant action wakes its agent tick_ms later with reason done."""
    sim = make_sim(conventions={"tick_ms": 250})
    play(sim, {"alice": {"action": "say", "args": {"text": "hi"}}})
    batch = play(sim)
    assert (batch.time, obs_of(batch, "alice").reason) == (250, "done")


def test_done_after_a_durative_action_comes_when_it_completes() -> None:
    """A walk of 5 steps wakes its agent at 5 * step_ms with reason done."""
    sim = make_sim()
    play(sim, {"alice": move("shed")})
    batch = play(sim)
    assert (batch.time, [(o.agent_id, o.reason) for o in batch.observations]) == (5000, [("alice", "done")])


def test_timer_wakes_after_sleep_ms() -> None:
    """A sleep wakes its agent after sleep_ms with reason timer; sleep_ms 0 means the next millisecond."""
    sim = make_sim()
    play(sim, {"alice": {"sleep_ms": 2500}, "bob": {"sleep_ms": 0}, "carol": {"sleep_ms": 60_000}})
    assert obs_of(play(sim), "bob").reason == "timer" and sim.time == 1
    assert obs_of(play(sim), "alice").reason == "timer" and sim.time == 2500


def test_message_wakes_a_sleeping_agent_early() -> None:
    """A tell wakes its recipient one tick later with reason message, cutting a long sleep short."""
    sim = make_sim()
    play(sim, {"alice": {"sleep_ms": 600_000}, "bob": tell("alice")})
    batch = play(sim)
    assert batch.time == 1000
    assert obs_of(batch, "alice").reason == "message"


def test_the_most_specific_reason_wins_on_the_same_instant() -> None:
    """A timer and a message due at the same instant wake the agent once, with reason message."""
    sim = make_sim()
    play(sim, {"alice": {"sleep_ms": 1000}, "bob": tell("alice")})
    batch = play(sim)
    assert [o.reason for o in batch.observations if o.agent_id == "alice"] == ["message"]


def test_event_at_your_place_wakes_an_idle_agent() -> None:
    """Something changing at an idle agent's place wakes it a tick later with reason event."""
    sim = make_sim(items=[item("hammer-1", "alice")], agents=[agent("alice"), agent("bob"), agent("dave", at="shed")])
    play(sim, {"alice": {"action": "drop", "args": {"item": "hammer-1"}}})
    batch = play(sim)
    assert sorted((o.agent_id, o.reason) for o in batch.observations) == [("alice", "done"), ("bob", "event")]
    assert [e["text"] for e in obs_of(batch, "bob").observation["events"]] == ["alice dropped hammer-1"]


def test_event_does_not_wake_a_busy_agent_but_is_told_later() -> None:
    """A busy agent is not woken by an event at its place; its next observation still reports it."""
    sim = make_sim(items=[item("hammer-1", "alice")],
                   structures=[WEAK_WALL, S.StructureSpec("vault", "vault", "v", "shed")],
                   tools=[S.WorkToolSpec("chant", "A long song.", "voice", True, 5000)],
                   roles=[S.RoleSpec("worker", "Works.", ("chant",)), S.RoleSpec("idler", "Idles.", ())],
                   objectives=[OPEN_VAULT])
    play(sim, {"alice": {"sleep_ms": 1000}, "bob": {"action": "chant", "args": {}}, "carol": {"sleep_ms": 1000}})
    play(sim, {"alice": {"action": "drop", "args": {"item": "hammer-1"}}})  # t=1000, bob is busy chanting
    batch = play(sim)
    assert (batch.time, sorted((o.agent_id, o.reason) for o in batch.observations)) == (
        2000, [("alice", "done"), ("carol", "event")])
    while "bob" not in [o.agent_id for o in batch.observations]:
        batch = play(sim)
    bob = obs_of(batch, "bob")
    assert (batch.time, bob.reason) == (5000, "done")
    assert "alice dropped hammer-1" in [e["text"] for e in bob.observation["events"]]


def test_a_rejected_action_wakes_with_interrupted() -> None:
    """An action rejected at adjudication wakes its agent a tick later with reason interrupted."""
    sim = make_sim()
    play(sim, {"alice": move("dock")})  # the ferry is closed
    batch = play(sim)
    assert obs_of(batch, "alice").reason == "interrupted"
    (event,) = obs_of(batch, "alice").observation["events"]
    assert event["outcome"] == "rejected" and "ferry" in event["reason"]


def test_a_durative_action_failing_its_completion_check_is_interrupted() -> None:
    """When a fix finds the wall already at its maximum on completion, it ends interrupted and so does the wake."""
    sim = make_sim(items=[item("hammer-1", "alice"), item("plank-1", "alice"),
                          item("hammer-2", "bob"), item("plank-2", "bob")],
                   structures=[WEAK_WALL, S.StructureSpec("vault", "vault", "v", "shed")],
                   agents=[agent("alice", at="gate"), agent("bob", at="gate")], objectives=[OPEN_VAULT])
    fix = {"action": "fix", "args": {"structure": "wall"}}
    first = play(sim, {"alice": {**fix, "args": {**fix["args"], "item": "plank-1"}},
                       "bob": {**fix, "args": {**fix["args"], "item": "plank-2"}}})
    batch = play(sim)
    assert batch.time == 2000
    reasons = {o.agent_id: o.reason for o in batch.observations}
    assert sorted(reasons.values()) == ["done", "interrupted"]
    loser = next(a for a, r in reasons.items() if r == "interrupted")
    assert outcome_of(sim, first, loser) == ("interrupted", "the wall strength is already at its maximum (2)")
    assert sim.world.structures["wall"].fields["strength"] == 2
    assert len(sim.world.agents[loser].inventory) == 2  # the loser keeps its plank


def test_noop_wakes_after_idle_wake_ms() -> None:
    """A noop by an agent with nothing running wakes it after idle_wake_ms with reason idle."""
    sim = make_sim(conventions={"idle_wake_ms": 7000})
    play(sim)
    batch = play(sim)
    assert batch.time == 7000
    assert {o.reason for o in batch.observations} == {"idle"}


def test_noop_while_busy_waits_for_the_action() -> None:
    """A noop during a walk schedules no idle wake: the walk's completion wakes the agent."""
    sim = make_sim(conventions={"idle_wake_ms": 2000})
    play(sim, {"alice": move("gate")})  # 11 s walk; bob and carol noop
    assert [o.agent_id for o in play(sim).observations] == ["bob", "carol"]  # t=2000, idle
    times = [play(sim).time for _ in range(5)]
    assert times == [4000, 6000, 8000, 10000, 11000]
    assert [w for w in wakes(sim) if w[1] == "alice"] == [(0, "alice", "start"), (11000, "alice", "done")]


def test_a_new_body_action_interrupts_the_running_one() -> None:
    """Starting a walk while walking interrupts the first walk: outcome interrupted, 'replaced by'."""
    sim = make_sim()
    first = play(sim, {"alice": move("gate"), "bob": tell("alice")})
    second = play(sim, {"alice": move("shed")})
    assert obs_of(second, "alice").reason == "message"
    assert outcome_of(sim, first, "alice") == ("interrupted", "replaced by move_to at t=1000ms")
    assert obs_of(second, "alice").observation["busy"][0]["args"] == {"dest": "gate"}
    batch = play(sim)
    assert (batch.time, obs_of(batch, "alice").reason) == (6000, "done")
    assert sim.world.agents["alice"].cell == ("town", 5, 0)
    assert outcome_of(sim, second, "alice") == ("completed", "")


def test_an_instant_body_action_interrupts_a_walk() -> None:
    """An instant body action (inspect) also replaces a running walk."""
    sim = make_sim()
    first = play(sim, {"alice": move("gate"), "bob": tell("alice")})
    play(sim, {"alice": {"action": "inspect", "args": {"target": "bob"}}})
    assert outcome_of(sim, first, "alice") == ("interrupted", "replaced by inspect at t=1000ms")
    assert sim.world.agents["alice"].lanes["body"] is None


def test_a_voice_action_does_not_interrupt_a_body_action() -> None:
    """Speaking while walking leaves the walk running; it completes on time."""
    sim = make_sim()
    first = play(sim, {"alice": move("shed"), "bob": tell("alice")})
    second = play(sim, {"alice": {"action": "say", "args": {"text": "on my way"}}})
    assert outcome_of(sim, first, "alice") == ("accepted", "")
    assert outcome_of(sim, second, "alice") == ("accepted", "")
    while sim.world.agents["alice"].lanes["body"] is not None:
        play(sim)
    assert sim.time == 5000
    assert outcome_of(sim, first, "alice") == ("completed", "")
    assert sim.world.agents["alice"].cell == ("town", 5, 0)


def test_an_interrupted_walk_leaves_you_where_you_were() -> None:
    """Walks take effect on completion: an interrupted one has not moved the agent."""
    sim = make_sim()
    play(sim, {"alice": move("gate"), "bob": tell("alice")})
    play(sim, {"alice": {"action": "inspect", "args": {"target": "yard"}}})
    assert sim.world.agents["alice"].cell == ("town", 0, 0)
    assert not [r for r in records(sim, "event") if r["event"] == "arrived"]
