"""Copies of a simulation (``Simulation.fork``): a run standing where another stands, without replaying it.

Why not ``copy.deepcopy``: the engine's classes are compiled by mypyc (setup.py), whose native classes neither
deep-copy nor pickle, and a deep copy would also copy what never changes (the spec, the rules table, the
layout). Why not a replay: a replay costs the run's history, a copy costs its world. Every attribute of every
class a run's state lives in has one entry in this module's tables, saying how the copy gets it:

- ``VALUE``: the same object (an int, a str, a tuple, or an object nothing ever changes, like the spec);
- ``FRESH``: what the copy's constructor made from the same spec and seed (the static parts of the world, the
  rules table) or an empty cache (perception's per-batch table, the shared objective views): equal already;
- a function: a copy made for it (lists, dicts, the agents, items, structures, actions, the scheduler's heap,
  the RNG's state), re-pointed at the copy's own agents where it holds agents.

tests/test_snapshot.py fails when a class has an attribute its table does not name, so a cache added later is
never silently shared between a run and its fork. The dicts inside events, messages and commands are shared:
the engine never changes a dict once it is told, delivered or answered (events are already shared by every
agent that hears one).

A fork can be taken at a batch boundary (after ``adjudicate()``, before ``advance()``) or while a batch is
open (after ``advance()``): then its outstanding observations are copied too, with the answers given so far,
so that the RL adapters (warren_sim.rl) can fork between a step's observations and its actions.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import count
from typing import Any, TypeVar

from .perception import Observation, Perceivable
from .scheduler import Scheduler
from .world import Action, Agent, Item, Structure, World

# The simulation (``sim.Simulation``, the one Perceivable), which this module may not import: it is below it.
Sim = TypeVar("Sim", bound=Perceivable)

__all__ = ["FRESH", "VALUE", "fork_simulation"]

VALUE = "value"
FRESH = "fresh"


class _Ctx:
    """The copy under way: the new simulation and its agents by id (to re-point what holds agents)."""

    __slots__ = ("agents", "sim")

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.agents: dict[str, Agent] = {}


Copier = Callable[[Any, _Ctx], Any]
How = str | Copier


def _list(value: list[Any], ctx: _Ctx) -> list[Any]:
    return list(value)


def _dict(value: dict[Any, Any], ctx: _Ctx) -> dict[Any, Any]:
    return dict(value)


def _blank(cls: Any) -> Any:
    """An instance of ``cls`` made without its ``__init__``, by the class's own ``__new__`` (``object.__new__``
    refuses a mypyc native class: world.py's state classes are native when compiled)."""
    return cls.__new__(cls)


def _copier(cls: type, table: dict[str, How]) -> Callable[[Any, _Ctx], Any]:
    """A copier of an attrs class from its table: a new instance (:func:`_blank`), each field as the table says."""
    same = tuple(n for n, how in table.items() if how == VALUE)
    made = tuple((n, how) for n, how in table.items() if callable(how))

    def copy(obj: Any, ctx: _Ctx) -> Any:
        new: Any = _blank(cls)
        for name in same:
            setattr(new, name, getattr(obj, name))
        for name, how in made:
            setattr(new, name, how(getattr(obj, name), ctx))
        return new

    return copy


def _args(value: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    return dict(value)


ACTION: dict[str, How] = {"agent": VALUE, "lane": VALUE, "tool": VALUE, "args": _args, "observation_id": VALUE,
                          "started": VALUE, "until": VALUE, "token": VALUE, "dest": VALUE}
_copy_action = _copier(Action, ACTION)


def _lanes(value: dict[str, Action | None], ctx: _Ctx) -> dict[str, Action | None]:
    return {lane: None if action is None else _copy_action(action, ctx) for lane, action in value.items()}


AGENT: dict[str, How] = {
    "id": VALUE, "role": VALUE, "name": VALUE, "notes": VALUE, "cell": VALUE, "tools": VALUE,
    "inventory": _list, "lanes": _lanes, "seq": VALUE, "wake_time": VALUE, "wake_reason": VALUE,
    "wake_token": VALUE, "events": _list, "events_dropped": VALUE, "messages": _list, "messages_dropped": VALUE,
}
_copy_agent = _copier(Agent, AGENT)

ITEM: dict[str, How] = {"id": VALUE, "kind": VALUE, "name": VALUE, "container": VALUE, "cell": VALUE,
                        "holder": VALUE, "inside": VALUE, "last_taker": VALUE}
_copy_item = _copier(Item, ITEM)

STRUCTURE: dict[str, How] = {"id": VALUE, "kind": VALUE, "name": VALUE, "place": VALUE, "fields": _dict,
                             "maxima": _dict, "secret": VALUE}
_copy_structure = _copier(Structure, STRUCTURE)


def _agents(value: dict[str, Agent], ctx: _Ctx) -> dict[str, Agent]:
    agents = ctx.agents = {aid: _copy_agent(agent, ctx) for aid, agent in value.items()}
    return agents


def _agents_at(value: dict[Any, dict[str, Agent]], ctx: _Ctx) -> dict[Any, dict[str, Agent]]:
    agents = ctx.agents
    return {cell: {aid: agents[aid] for aid in here} for cell, here in value.items()}


def _items(value: dict[str, Item], ctx: _Ctx) -> dict[str, Item]:
    return {iid: _copy_item(item, ctx) for iid, item in value.items()}


def _structures(value: dict[str, Structure], ctx: _Ctx) -> dict[str, Structure]:
    return {sid: _copy_structure(s, ctx) for sid, s in value.items()}


def _nested(value: dict[Any, dict[str, None]], ctx: _Ctx) -> dict[Any, dict[str, None]]:
    return {key: dict(inner) for key, inner in value.items()}


# The world: what exists and where. The static parts (spaces, places, links, which cells a place covers, where
# structures stand, the agents' ids) are the constructor's, made from the same spec.
WORLD: dict[str, How] = {
    "spaces": FRESH, "places": FRESH, "place_cells": FRESH, "cell_place": FRESH, "place_names": FRESH,
    "links": FRESH, "link_ends": FRESH, "structures": _structures, "structures_at": FRESH, "agents": _agents,
    "agents_at": _agents_at, "agent_ids": FRESH, "items": _items, "items_at": _nested, "contents": _nested,
}


def _copy_into(old: Any, new: Any, table: dict[str, How], ctx: _Ctx) -> Any:
    for name, how in table.items():
        if how == VALUE:
            setattr(new, name, getattr(old, name))
        elif callable(how):
            setattr(new, name, how(getattr(old, name), ctx))
    return new


def _world(value: World, ctx: _Ctx) -> World:
    return _copy_into(value, ctx.sim.world, WORLD, ctx)


def _next_seq(value: Callable[[], int]) -> Callable[[], int]:
    """The scheduler's counter, at the same next value (``count`` says it in its repr: ``count(57)``)."""
    counter = getattr(value, "__self__", None)
    text = repr(counter)
    if not (text.startswith("count(") and text.endswith(")")):
        raise TypeError(f"the scheduler's next_seq is not an itertools.count's __next__ ({text:.80}): "
                        "teach warren_sim/engine/snapshot.py to copy it")
    return count(int(text[len("count("):-1])).__next__


SCHEDULER: dict[str, How] = {"heap": _list, "next_seq": lambda value, ctx: _next_seq(value)}


def _sched(value: Scheduler, ctx: _Ctx) -> Scheduler:
    return _copy_into(value, ctx.sim.sched, SCHEDULER, ctx)


def _rng(value: Any, ctx: _Ctx) -> Any:
    rng = ctx.sim.rng
    rng.setstate(value.getstate())
    return rng


def _objectives(value: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    return {oid: _copy_objective(o, ctx) for oid, o in value.items()}


OBJECTIVE: dict[str, How] = {"id": VALUE, "description": VALUE, "structure": VALUE, "field": VALUE,
                             "target": VALUE, "deadline_ms": VALUE, "status": VALUE, "current": VALUE}


def _copy_objective(o: Any, ctx: _Ctx) -> Any:
    return _copy_into(o, _blank(type(o)), OBJECTIVE, ctx)


def _agent_list(value: list[Agent], ctx: _Ctx) -> list[Agent]:
    agents = ctx.agents
    return [agents[a.id] for a in value]


def _captured(value: tuple[Any, int, Any, int], ctx: _Ctx) -> tuple[Any, int, Any, int]:
    messages, messages_dropped, events, events_dropped = value
    return (list(messages) if messages else messages, messages_dropped, list(events) if events else events,
            events_dropped)


# An outstanding observation: the constructor makes it again for the copied agent ("built": its id, seq, time
# and batch are the copy's, equal to the original's); what it captured of the agent's messages and events is
# copied (the constructor handed the agent's own over, and the agent's are put back after it); its lazily built
# fields start empty (the world has not changed since it was made, so they build the same).
BUILT = "built"
OBSERVATION: dict[str, How] = {
    "_sim": BUILT, "_agent": BUILT, "_batch": BUILT, "agent_id": BUILT, "seq": BUILT, "time": BUILT,
    "reason": BUILT, "observation_id": BUILT, "_captured": _captured, "_built": FRESH, "_lazy": FRESH,
    "answer": VALUE, "source": VALUE, "parsed": VALUE,
}


def _copy_observation(obs: Observation, ctx: _Ctx) -> Observation:
    agent = ctx.agents[obs.agent_id]
    kept = (agent.messages, agent.messages_dropped, agent.events, agent.events_dropped)
    new = Observation(ctx.sim, agent, obs.reason)
    agent.messages, agent.messages_dropped, agent.events, agent.events_dropped = kept
    return _copy_into(obs, new, OBSERVATION, ctx)


def _pending(value: dict[str, Observation], ctx: _Ctx) -> dict[str, Observation]:
    return {aid: _copy_observation(obs, ctx) for aid, obs in value.items()}


def _batch(value: Any, ctx: _Ctx) -> Any:
    if value is None:
        return None
    pending = ctx.sim.pending
    return type(value)(value.time, [pending[o.agent_id] for o in value.observations])


BATCH: dict[str, How] = {"time": VALUE, "observations": BUILT}  # (the copied pending observations, in order)


# The simulation. The order matters: the world (and its agents) first, the counters the observations read
# before the observations, and the batch after ``pending``.
SIMULATION: dict[str, How] = {
    "spec": VALUE, "seed": VALUE, "run_id": VALUE, "conv": FRESH, "rules": FRESH, "tools": FRESH, "roles": FRESH,
    "rng": _rng, "world": _world, "sched": _sched, "_heap": FRESH, "_next_seq": FRESH,  # (the copied sched's)
    "time": VALUE, "status": VALUE, "_live": VALUE, "end_reason": VALUE, "decisions": VALUE, "record": VALUE,
    "records": _list, "outcomes": _dict, "conflicts": _dict, "objectives": _objectives, "_all_met": VALUE,
    "_objective_views": FRESH, "_action_token": VALUE, "batch_no": VALUE, "perceived_batch": FRESH,
    "perceived_table": FRESH, "_event_wakes": _agent_list, "_instant": VALUE, "_woken": _agent_list,
    "pending": _pending, "batch": _batch,
}


def fork_simulation(sim: Sim) -> Sim:
    """An independent copy of ``sim`` standing where it stands: the same answers give it the same records.

    Its cost is the world's (agents, items, the scheduler's queue) and the outcome table's, never the history's.
    Undrained records are copied too (each run drains its own). See the module docstring for what is shared.
    """
    old: Any = sim
    new = type(old)(old.spec, old.seed, run_id=old.run_id, record=False, populate=False)
    ctx = _Ctx(new)
    _copy_into(old, new, SIMULATION, ctx)
    new._heap, new._next_seq = new.sched.heap, new.sched.next_seq
    forked: Sim = new
    return forked


# -- a run's state as plain objects, for a snapshot kept beside its journal (warren_sim/journal_snapshots.py) --
GIVEN = ("spec", "seed", "run_id")  # what a restored run's constructor is given (the fork's own id among them)


def state_of(sim: Perceivable) -> dict[str, Any]:
    """Everything a run's future depends on, at a batch boundary, as picklable objects: the run's own (not copies),
    so serialize it before the run moves. The same tables as ``fork_simulation``, so nothing is left behind."""
    old: Any = sim
    if old.pending or old.batch is not None or old.records:
        raise ValueError("a snapshot is taken at a batch boundary with the records drained (after adjudicate() "
                         "and drain_records())")
    out: dict[str, Any] = {}
    for name, how in SIMULATION.items():
        if how == FRESH or name in GIVEN:
            continue
        value = getattr(old, name)
        if name == "world":
            value = {n: getattr(value, n) for n, h in WORLD.items() if h != FRESH}
        elif name == "sched":
            value = {"heap": value.heap, "next_seq": _next_seq(value.next_seq)()}
        out[name] = value
    return out


def restore(sim: Sim, state: dict[str, Any]) -> Sim:
    """Put ``state`` (from :func:`state_of`, unpickled: objects of their own) into ``sim``, freshly made from the
    same spec and seed with ``record=False, populate=False``; returns it."""
    new: Any = sim
    for name, value in state.items():
        if name == "world":
            for n, v in value.items():
                setattr(new.world, n, v)
        elif name == "sched":
            new.sched.heap = list(value["heap"])
            new.sched.next_seq = count(int(value["next_seq"])).__next__
        elif name == "rng":
            new.rng.setstate(value.getstate())
        else:
            setattr(new, name, value)
    new._heap, new._next_seq = new.sched.heap, new.sched.next_seq
    return sim
