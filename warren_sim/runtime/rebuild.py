"""Observation texts rebuilt from a journal, for spectators (the viewer's hover, ``warren replay --html``).

The journal does not hold observation texts: an engine observation renders its text lazily, only for
the policy or remote agent that reads it, and the journal stays small. But the engine is deterministic,
so driving a fresh :class:`~warren_sim.engine.Simulation` with the journal's recorded commands reaches
the same observations, and their text is the text the agents read. Unlike ``warren replay`` this checks
nothing (no records are compared) and stops as soon as the wanted texts are found.
"""

from __future__ import annotations

from typing import Any

from ..engine import Simulation
from ..scenarios import ScenarioError, load_scenario


class RebuildError(ValueError):
    """The records cannot be rebuilt (no ``run`` record, a scenario that does not load)."""


def observation_texts(records: list[dict[str, Any]], wanted: set[str] | None = None) -> dict[str, str]:
    """``{observation_id: text}`` for the observations in ``wanted`` (every observation when None).

    Goes as far as the recorded commands go (a journal cut short, a crashed or cancelled run).
    """
    run = next((r for r in records if r.get("kind") == "run"), None)
    if run is None:
        raise RebuildError("the records hold no 'run' record (scenario, seed, params)")
    try:
        loaded = load_scenario(str(run["scenario"]), dict(run.get("params") or {}))
        sim = Simulation(loaded.spec, int(run["seed"]), run_id=str(run.get("run_id", "run")),
                         params=loaded.params, record=False)
    except (ScenarioError, KeyError, TypeError, ValueError) as exc:
        raise RebuildError(f"cannot rebuild the run: {exc}") from None
    commands = {r["observation_id"]: r for r in records
                if r.get("kind") == "command" and isinstance(r.get("observation_id"), str)}
    out: dict[str, str] = {}
    while not sim.ended:
        batch = sim.advance()
        if batch is None:
            break
        for obs in batch.observations:
            if wanted is None or obs.observation_id in wanted:
                out[obs.observation_id] = obs.text
        if wanted is not None and len(out) >= len(wanted):
            break
        for obs in batch.observations:
            rec = commands.get(obs.observation_id)
            command = rec.get("command") if rec is not None else None
            if not isinstance(command, dict) or sim.validate(obs.agent_id, command) is not None:
                return out  # the journal ends here (or was edited): nothing further can be rebuilt
            sim.answer(obs.agent_id, command, source=str(rec.get("source", "policy")) if rec else "policy")
        sim.adjudicate()
    return out
