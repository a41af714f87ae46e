"""Client-side views of wire objects."""

from __future__ import annotations

import attrs

from warren_sim.protocol.models import Envelope

__all__ = ["Observation"]


@attrs.frozen
class Observation(Envelope):
    """An observation envelope as the SDK hands it to a policy: every envelope field (``run_id, agent_id,
    observation_id, seq, sim_time_ms, reason, deadline_unix, briefing_revision, observation, text,
    affordances``), plus ``time``, the sim time in ms, so the object fits the engine's policy interface
    (``agent_id, observation_id, seq, time, reason, observation, affordances, text``).

    ``deadline_unix`` is real unix time under any ``--rate`` of the server, so the seconds left to answer are it
    less the current unix time, on any machine's clock (docs/decisions.md): a policy can budget its work by it."""

    @property
    def time(self) -> int:
        return self.sim_time_ms
