"""Objectives and the end of a run: completed, failed (deadline, time limit), cancelled."""

from __future__ import annotations

import pytest
from simworld import agent, item, make_sim, play, records

from warren_sim.engine import EngineError
from warren_sim.engine import spec as S

FIX = {"action": "fix", "args": {"structure": "wall", "item": "plank-1"}}
FIX2 = {"action": "fix", "args": {"structure": "wall", "item": "plank-2"}}


def _fixer(deadline_ms: int | None = None, **kw):
    return make_sim(items=[item("hammer-1", "alice"), item("plank-1", "alice"), item("plank-2", "alice")],
                    agents=[agent("alice", at="gate")],
                    objectives=[S.ObjectiveSpec("fortify", "Make the wall strong.", "wall", "strength", 2,
                                                deadline_ms)], **kw)


def _run(sim, commands: list[dict]) -> None:
    """Answer alice's wakes with ``commands`` in turn, then noop until the run ends."""
    commands = list(commands)
    while not sim.ended:
        batch = sim.advance()
        if batch is None:
            break
        for obs in batch.observations:
            cmd = commands.pop(0) if commands and obs.agent_id == "alice" else {"noop": True}
            assert sim.validate(obs.agent_id, cmd) is None
            sim.answer(obs.agent_id, cmd)
        sim.adjudicate()


def test_progress_is_recorded_as_it_changes_and_completion_ends_the_run() -> None:
    """Each fix records the objective's progress; reaching the target completes the run."""
    sim = _fixer()
    _run(sim, [FIX, FIX2])
    progress = [(r["t"], r["status"], r["progress"]["current"]) for r in records(sim, "objective")]
    assert progress == [(2000, "pending", 1), (4000, "completed", 2)]
    assert sim.status == "completed" and sim.end_reason == "every objective is met"
    (end,) = records(sim, "end")
    assert (end["t"], end["status"]) == (4000, "completed")
    assert end["objectives"][0]["status"] == "completed"
    assert sim.advance() is None
    assert sim.summary()["status"] == "completed"


def test_the_observation_shows_objective_progress() -> None:
    """Objectives in observations carry status, deadline and progress {current, target}."""
    sim = _fixer(deadline_ms=60_000)
    play(sim, {"alice": FIX})
    batch = sim.advance()
    assert batch is not None
    assert batch.observations[0].observation["objectives"] == [
        {"id": "fortify", "description": "Make the wall strong.", "status": "pending", "deadline_ms": 60_000,
         "progress": {"current": 1, "target": 2}}]


def test_a_missed_deadline_fails_the_objective_and_the_run() -> None:
    """At deadline_ms a pending objective fails, and so does the run."""
    sim = _fixer(deadline_ms=3000)
    _run(sim, [FIX, FIX2])
    assert sim.status == "failed"
    assert sim.end_reason == "objective fortify missed its deadline at 3000 ms"
    assert sim.time == 3000
    assert [(r["status"], r["progress"]["current"]) for r in records(sim, "objective")] == [
        ("pending", 1), ("failed", 1)]


def test_work_completing_exactly_at_the_deadline_counts() -> None:
    """Completions are applied before deadlines of the same instant."""
    sim = _fixer(deadline_ms=4000)
    _run(sim, [FIX, FIX2])
    assert sim.status == "completed" and sim.time == 4000


def test_the_time_limit_fails_the_run() -> None:
    """With nothing achieved by time_limit_ms the run ends failed, naming the limit."""
    sim = _fixer(conventions={"time_limit_ms": 90_000})
    _run(sim, [])
    assert sim.status == "failed"
    assert sim.end_reason == "the scenario's time limit of 90000 ms was reached"
    assert sim.time == 90_000


def test_cancel_ends_the_run_cancelled() -> None:
    """cancel() ends a running run as cancelled; a second cancel changes nothing."""
    sim = _fixer()
    play(sim)
    sim.cancel("the operator went home")
    sim.cancel("again")
    assert (sim.status, sim.end_reason) == ("cancelled", "the operator went home")
    assert [r["status"] for r in records(sim, "end")] == ["cancelled"]
    assert sim.advance() is None


def test_cancel_mid_batch_leaves_nothing_to_advance() -> None:
    """A run cancelled while a batch is out still accepts its adjudication, then advances to None."""
    sim = _fixer()
    sim.advance()
    sim.cancel()
    with pytest.raises(EngineError):
        sim.advance()
    sim.answer("alice", {"noop": True})
    sim.adjudicate()
    assert sim.advance() is None
    assert sim.status == "cancelled"


def test_an_objective_met_from_the_start_is_completed() -> None:
    """A world whose objectives already hold ends completed at t=0 instead of running to its limit."""
    strong = S.StructureSpec("wall", "wall", "the wall", "gate", (("strength", 2),), (("strength", 2),))
    sim = make_sim(structures=[strong])
    assert sim.objective_views()[0]["status"] == "completed"
    assert sim.advance() is None
    assert (sim.status, sim.time) == ("completed", 0)
