"""A served fork brought to its point: ``POST /v1/runs/{run}/fork`` (docs/fork.md, "Served").

A fork needs only its parent's journal (a live run's as it stands, an ended run's file, a run known only by its
file after a restart): :func:`warren_sim.fork.fork_records` replays it to the last batch boundary at or before
the cursor in a worker thread, bringing the NPC policies there, and the manager makes a run of what it gives
(``RunManager.fork``). Nothing is made before every check has passed; the refusals, each a teaching
:class:`~warren_sim.runtime.errors.RunError`:

- 400: a cursor past the end of the journal (the body's model refuses one below 0 or not an integer), a
  ``params`` (the world is the parent's), a selector or team naming nobody of the scenario;
- 409: a journal that cannot bring the fork there (cut short inside a batch before the cursor, edited, of a
  scenario that no longer loads) or a policy that cannot be brought to the fork point. A 409 and not a 410: the
  run and its journal are there; what the journal holds now conflicts with this fork (an earlier cursor works).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

from ..fork import Forked, ForkError, check_cursor, fork_records
from ..protocol.models import ControlledAgents, RunFork
from ..replay import JournalError, journal_origin
from ..scenarios import LoadedScenario, ScenarioError, as_factory, npc_team
from .api import RunAPI
from .errors import RunError

__all__ = ["BroughtFork", "bring_fork"]


@attrs.frozen
class BroughtFork:
    """What a new run is made of: its id, its parent's world and the simulation standing at the fork point."""

    run_id: str
    scenario: str
    seed: int
    loaded: LoadedScenario
    controlled: list[str]
    forked: Forked


async def bring_fork(parent: RunAPI, body: RunFork, reserve: Callable[[], str],
                     choose: Callable[[str, Sequence[Any], ControlledAgents], list[str]]) -> BroughtFork:
    """Check the fork ``body`` asks of ``parent`` and bring it to its point; ``reserve()`` gives the new run's
    id once every check passed, ``choose`` the controlled agents a selector names (the manager's)."""
    if body.params:
        raise RunError(400, "params: a fork's world is its parent's (its scenario, seed and params); leave "
                       "params out")
    journal = await parent.read_journal()
    records = list(journal.records)  # a live run's journal goes on growing: the fork reads it as it stands
    where = f"the journal of {parent.run_id}"
    try:
        check_cursor(records, body.cursor, where)
        loaded, seed, _ = journal_origin(records, where)
    except (ForkError, JournalError) as exc:
        raise RunError(400 if isinstance(exc, ForkError) else 409, str(exc)) from None
    scenario = str(next(r for r in records if r.get("kind") == "run")["scenario"])
    controlled = choose(scenario, loaded.spec.agents, body.controlled_agents)
    try:
        team = as_factory(npc_team(body.npc_policy, loaded), loaded, seed)
    except ScenarioError as exc:
        raise RunError(400, f"npc_policy: {exc}") from None
    run_id = reserve()
    try:
        forked = await trio.to_thread.run_sync(functools.partial(
            fork_records, records, body.cursor, team, controlled=controlled, run_id=run_id, where=where))
    except (ForkError, JournalError, ScenarioError) as exc:
        raise RunError(409, f"cannot fork {parent.run_id} at cursor {body.cursor}: {exc}") from None
    return BroughtFork(run_id, scenario, seed, loaded, controlled, forked)
