"""Running a simulation with in-process policies only: no trio, no task per agent.

This is the fast path of ``warren run`` and ``warren eval``: a plain loop over batches. A policy
command that fails validation is recorded as a noop (source ``invalid``) with the error, so a buggy
policy shows up in the trace instead of stalling the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .policy import NOOP, Policy
from .sim import Simulation


def run_headless(sim: Simulation, policies: Mapping[str, Policy], *,
                 on_batch: Callable[[Simulation], None] | None = None,
                 max_batches: int | None = None) -> dict[str, Any]:
    batches = 0
    while (batch := sim.advance()) is not None:
        for obs in batch.observations:
            command = policies[obs.agent_id].decide(obs)
            err = sim.validate(obs.agent_id, command)
            if err:
                sim.answer(obs.agent_id, dict(NOOP), source="invalid")
                sim._emit({"kind": "invalid", "t": sim.time, "agent": obs.agent_id,
                           "observation_id": obs.observation_id, "command": command, "error": err})
            else:
                sim.answer(obs.agent_id, command)
        sim.adjudicate()
        batches += 1
        if on_batch is not None:
            on_batch(sim)
        if max_batches is not None and batches >= max_batches:
            break
    return sim.summary()
