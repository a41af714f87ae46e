"""What a run shows: its view (``GET /v1/runs/{id}``), an agent's envelope, a receipt with its outcome.

Pure functions of a run's state, kept apart from the loop (:mod:`warren_sim.runtime.run`) so that what a
client sees is read in one place and never changes what the run does.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import attrs

from ..engine import Observation, Simulation
from ..protocol.converter import converter
from ..protocol.models import Conflict, Envelope, Outcome, Receipt
from .leases import RemoteAgent

if TYPE_CHECKING:
    from .run import Run

__all__ = ["current_envelope", "envelope_dict", "receipt_with_outcome", "run_view"]

BRIEFING_REVISION = 1


def run_view(run: Run) -> dict[str, Any]:
    """The run as a client sees it: status, agents (controlled? claimed?), objectives and, once ended, its result."""
    sim = run.sim
    agents = [{"agent_id": aid, "role": sim.world.agents[aid].role, "controlled": aid in run.remote,
               "claimed": aid in run.remote and run.remote[aid].claimed} for aid in sim.world.agent_ids]
    result = None
    if run.is_ended:
        result = {"status": run.status, "reason": sim.end_reason or run.error or run.cancel_reason,
                  "sim_time_ms": sim.time, "decisions": sim.decisions}
    pace = run.config.pace
    return {"run_id": run.run_id, "scenario": run.config.scenario, "seed": run.config.seed,
            "status": run.status, "sim_time_ms": sim.time, "agents": agents,
            "objectives": sim.objective_views(), "result": result, "error": run.error,
            "pace": pace if pace is None or math.isfinite(pace) else None,
            "decision_deadline_s": run.config.decision_deadline_s}


def envelope_dict(run_id: str, obs: Observation, deadline_unix: float) -> dict[str, Any]:
    """The wire envelope of an observation of a controlled agent, answerable until ``deadline_unix``."""
    env = Envelope(run_id, obs.agent_id, obs.observation_id, obs.seq, obs.time, obs.reason,
                   round(deadline_unix, 3), BRIEFING_REVISION, obs.observation, obs.text, obs.affordances)
    return converter.unstructure(env)


def current_envelope(ra: RemoteAgent, after: int) -> dict[str, Any] | None:
    """The agent's outstanding envelope if its ``seq`` is after ``after``; None if there is nothing new to answer."""
    rec = ra.ledger.outstanding()
    if rec is not None and rec.seq > after and ra.envelope is not None:
        return ra.envelope
    return None


def receipt_with_outcome(sim: Simulation, receipt: Receipt) -> Receipt:
    """An accepted (or duplicate) command's receipt with what the engine made of it so far (and any conflict)."""
    if receipt.status not in ("accepted", "duplicate"):
        return receipt
    outcome, reason = sim.outcome_of(receipt.observation_id)
    conflict = sim.conflict_of(receipt.observation_id)
    return attrs.evolve(receipt, outcome=cast(Outcome, outcome), outcome_reason=reason,
                        conflict=None if conflict is None else Conflict(**conflict))
