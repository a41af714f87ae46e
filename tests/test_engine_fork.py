"""``Simulation.fork()`` (warren_sim/engine/snapshot.py): an in-process copy of a run, made without replaying.

A fork given the same answers writes the same records as its original (and as the run never forked); given
other answers it diverges while the original stays untouched; and every attribute of every class a run's
state lives in is named by the copy's tables, so an attribute added later (a cache) cannot be silently shared.
Run on both builds of the engine (tests/test_compiled_build.py runs tests/test_engine_*.py on the other one).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from warren_sim.engine import Simulation, run_headless, snapshot
from warren_sim.engine.perception import Observation
from warren_sim.engine.scheduler import Scheduler
from warren_sim.engine.sim import Batch, ObjectiveState
from warren_sim.engine.world import Action, Agent, Item, Structure, World
from warren_sim.scenarios import instantiate, list_scenarios, load_scenario

PARAMS = {"warren": {"agents": 30}}


def _start(scenario: str, seed: int, policy: str = "solution") -> tuple[Simulation, dict[str, Any]]:
    return instantiate(load_scenario(scenario, PARAMS.get(scenario, {})), seed, policy)


def _batches(sim: Simulation, policies: dict[str, Any], n: int) -> None:
    if n:
        run_headless(sim, policies, max_batches=n)


def _to_end(sim: Simulation, policies: dict[str, Any]) -> str:
    """The rest of the run's records (the undrained ones first), as JSON text: byte for byte."""
    out: list[dict[str, Any]] = []
    run_headless(sim, policies, on_batch=lambda s: out.extend(s.drain_records()))
    out.extend(sim.drain_records())
    return "\n".join(json.dumps(r) for r in out)


def _open_batch(sim: Simulation, policies: dict[str, Any], answered: int) -> None:
    """Advance into a batch and answer its first ``answered`` observations (an RL step's position)."""
    batch = sim.advance()
    if batch is None:  # nothing was left to happen: advancing ended the run (a world whose last batch was done)
        assert sim.ended
        return
    for obs in batch.observations[:answered]:
        sim.answer(obs.agent_id, policies[obs.agent_id].decide(obs))


def _finish_batch(sim: Simulation, policies: dict[str, Any]) -> None:
    for aid in sim.unanswered():
        sim.answer(aid, policies[aid].decide(sim.pending[aid]))
    sim.adjudicate()


@settings(max_examples=40, deadline=None)
@given(scenario=st.sampled_from(list_scenarios()), seed=st.integers(0, 5), before=st.integers(0, 40),
       policy=st.sampled_from(["solution", "random"]), open_batch=st.booleans(), answered=st.integers(0, 3))
def test_a_fork_given_the_same_answers_writes_the_same_records(scenario, seed, before, policy, open_batch, answered):
    whole = _to_end(*_start(scenario, seed, policy))
    sim, policies = _start(scenario, seed, policy)
    _batches(sim, policies, before)
    head = sim.drain_records()
    if open_batch and not sim.ended:
        _open_batch(sim, policies, answered)
    forked, forked_policies = sim.fork(), copy.deepcopy(policies)
    if open_batch and sim.pending:
        _finish_batch(sim, policies)
        _finish_batch(forked, forked_policies)
    original = _to_end(sim, policies)
    assert _to_end(forked, forked_policies) == original
    assert "\n".join(json.dumps(r) for r in head) + ("\n" if head and original else "") + original == whole


def _state(sim: Simulation) -> str:
    """Everything a run's future depends on, as text: a fork's must not move when its original does."""
    w = sim.world
    return repr((
        sim.time, sim.status, sim.decisions, sim.batch_no, sim.rng.getstate(), sorted(sim.sched.heap, key=repr),
        [attrs.asdict(a, recurse=True) for a in w.agents.values()], [attrs.asdict(i) for i in w.items.values()],
        [attrs.asdict(s) for s in w.structures.values()], {c: list(h) for c, h in w.agents_at.items() if h},
        {c: list(h) for c, h in w.items_at.items() if h}, {k: list(v) for k, v in w.contents.items()},
        [attrs.asdict(o) for o in sim.objectives.values()], sorted(sim.outcomes.items()),
        {a: (o.observation_id, o.answer) for a, o in sim.pending.items()}))


def test_other_answers_leave_the_original_untouched_and_the_fork_too():
    for scenario in list_scenarios():
        for seed in (0, 1):
            sim, policies = _start(scenario, seed)
            _batches(sim, policies, 12)
            sim.drain_records()
            reference = _to_end(sim.fork(), copy.deepcopy(policies))
            before = _state(sim)
            forked = sim.fork()
            assert _state(forked) == before
            # the fork goes elsewhere (random answers, to its end): the original has not moved
            _, randoms = _start(scenario, seed + 10, "random")
            _to_end(forked, randoms)
            assert _state(sim) == before
            # and the original, moved elsewhere in its turn, leaves a fork taken before untouched
            second = sim.fork()
            _, other_randoms = _start(scenario, seed + 20, "random")
            _to_end(sim, other_randoms)
            assert _state(second) == before
            assert _to_end(second, copy.deepcopy(policies)) == reference, scenario


def test_a_fork_of_an_open_batch_keeps_its_observations_and_answers():
    sim, policies = _start("bridge_repair", 3)
    _batches(sim, policies, 5)
    _open_batch(sim, policies, 0)
    first = sim.batch.observations[0].agent_id if sim.batch else ""
    sim.answer(first, {"sleep_ms": 700})
    forked = sim.fork()
    assert sim.batch is not None and forked.batch is not None
    assert [o.observation_id for o in forked.batch.observations] == [o.observation_id for o in sim.batch.observations]
    assert forked.unanswered() == sim.unanswered() and forked.pending[first].answer == {"sleep_ms": 700}
    for aid, obs in sim.pending.items():
        twin = forked.pending[aid]
        assert twin is not obs and twin._agent is forked.world.agents[aid]
        assert twin.observation == obs.observation and twin.text == obs.text
    # an answer given to the fork is the fork's only
    fork2 = sim.fork()
    _finish_batch(sim, policies)
    assert fork2.pending and fork2.unanswered() == forked.unanswered()


def _attributes(obj: Any) -> set[str]:
    """The attributes an instance of ``obj``'s class has: mypyc's list for a compiled class, else its slots and
    its ``__dict__``."""
    names = set(getattr(type(obj), "__mypyc_attrs__", ()))
    for klass in type(obj).__mro__:
        names.update(getattr(klass, "__slots__", ()))
    names.update(getattr(obj, "__dict__", {}))
    return names - {"__weakref__", "__dict__"}


def test_every_attribute_of_a_run_is_named_by_the_copy():
    """A class that grows an attribute fails here until snapshot.py says how a fork gets it (copy, same, fresh)."""
    sim, policies = _start("bridge_repair", 3)
    _batches(sim, policies, 8)
    _open_batch(sim, policies, 0)
    w = sim.world
    agent = next(a for a in w.agents.values() if a.lanes["body"] is not None or a.lanes["voice"] is not None)
    action = next(x for x in agent.lanes.values() if x is not None)
    cases = [(sim, Simulation, snapshot.SIMULATION), (w, World, snapshot.WORLD),
             (sim.sched, Scheduler, snapshot.SCHEDULER), (agent, Agent, snapshot.AGENT),
             (action, Action, snapshot.ACTION), (next(iter(w.items.values())), Item, snapshot.ITEM),
             (next(iter(w.structures.values())), Structure, snapshot.STRUCTURE),
             (next(iter(sim.objectives.values())), ObjectiveState, snapshot.OBJECTIVE),
             (next(iter(sim.pending.values())), Observation, snapshot.OBSERVATION), (sim.batch, Batch, snapshot.BATCH)]
    for obj, cls, table in cases:
        assert type(obj) is cls
        assert _attributes(obj) == set(table), f"{cls.__name__}: snapshot.py's table misses or names in excess " \
            f"{sorted(_attributes(obj) ^ set(table))}"
        if attrs.has(cls):
            assert [f.name for f in attrs.fields(cls)] == list(table)

