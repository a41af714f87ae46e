"""What a run shows: its view (``GET /v1/runs/{id}``), an agent's envelope, a receipt with its outcome.

Pure functions of a run's state (:class:`~warren_sim.runtime.state.RunState`), kept apart from the parts
that change it (the loop, the desk, the mailbox) so that what a client sees is read in one place and never
changes what the run does. The envelope's fields are the protocol model's
(:class:`~warren_sim.protocol.models.Envelope`): :class:`WireEnvelope` builds the same object part by part.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import attrs
import orjson

from ..engine import Observation, Simulation
from ..protocol.converter import converter
from ..protocol.models import Conflict, Envelope, Outcome, Receipt
from .leases import RemoteAgent

if TYPE_CHECKING:
    from .state import RunState

__all__ = ["WHOLE", "WireEnvelope", "current_wire", "receipt_with_outcome", "run_view"]

BRIEFING_REVISION = 1
WHOLE = ("observation", "text", "affordances")  # the parts an envelope is built from, after its identity
IDENTITY = tuple(f.name for f in attrs.fields(Envelope) if f.name not in WHOLE)  # in the model's (wire) order


def run_view(run: RunState) -> dict[str, Any]:
    """The run as a client sees it: status, agents (controlled? claimed?), objectives and, once ended, its result."""
    sim = run.sim
    agents = [{"agent_id": aid, "role": sim.world.agents[aid].role, "controlled": aid in run.remote,
               "claimed": aid in run.remote and run.remote[aid].claimed} for aid in sim.world.agent_ids]
    result = None
    if run.is_ended:
        result = {"status": run.status, "reason": sim.end_reason or run.error or run.cancel_reason,
                  "sim_time_ms": sim.time, "decisions": sim.decisions}
    pace = run.config.pace
    view: dict[str, Any] = {"run_id": run.run_id, "scenario": run.config.scenario, "seed": run.config.seed,
            "status": run.status, "sim_time_ms": sim.time, "agents": agents,
            "objectives": sim.objective_views(), "result": result, "error": run.error,
            "pace": pace if pace is None or math.isfinite(pace) else None,
            "decision_deadline_s": run.config.decision_deadline_s}
    if run.config.forked_from is not None:  # only a fork's view has the key: every other view is as it was
        view["forked_from"] = dict(run.config.forked_from)
    if run.faults_met:  # injected faults, by kind (docs/faults.md): only in a run that met some
        view["faults"] = dict(sorted(run.faults_met.items()))
    return view


class WireEnvelope:
    """An envelope built part by part, when (and only when) someone receives that part, and kept.

    Publishing an observation costs its identity fields only; ``text`` and ``affordances`` (most of an
    envelope's cost: prose and every tool's choices) are built the first time a receiver asks for them, and a
    WebSocket subscription whose ``parts`` leave them out never pays for them, nor for observation fields it
    did not subscribe to (the engine's observation is itself lazy, field by field). Each narrowing is built
    and serialized once per envelope and shared by every connection that subscribed to the same parts.

    Safe to build late: a part is only read while the envelope is outstanding, i.e. before its batch is
    adjudicated, when the engine's lazy observation still shows the world it was made from.
    """

    __slots__ = ("_full", "_shaped", "_whole_raw", "deadline_unix", "obs", "run_id")

    def __init__(self, run_id: str, obs: Observation, deadline_unix: float) -> None:
        # rounded as on the wire (ms); a batch's publisher rounds once and passes the rounded value (the same)
        self.run_id, self.obs, self.deadline_unix = run_id, obs, round(deadline_unix, 3)
        self._full: dict[str, Any] | None = None
        self._shaped: dict[tuple[str, ...], tuple[orjson.Fragment, int]] | None = None  # made when first shaped
        self._whole_raw: bytes | None = None  # the whole envelope's bytes, which its Fragment wraps

    @property
    def seq(self) -> int:
        return self.obs.seq

    @property
    def observation_id(self) -> str:
        return self.obs.observation_id

    def __getitem__(self, key: str) -> Any:  # the identity fields, as the plain envelope dict has them
        if key == "observation_id":
            return self.obs.observation_id
        if key == "seq":
            return self.obs.seq
        return self.full()[key]

    def full(self) -> dict[str, Any]:
        """The whole envelope (HTTP's long-poll body), through the one converter: the schema's source."""
        if self._full is None:
            obs = self.obs
            env = Envelope(**self._identity(), observation=obs.observation, text=obs.text,
                           affordances=obs.affordances)
            self._full = converter.unstructure(env)
        return self._full

    def shaped(self, parts: tuple[str, ...]) -> orjson.Fragment:
        """The envelope narrowed to ``parts`` (``observation``, ``text``, ``affordances`` or observation fields),
        serialized once: the same bytes for every receiver of the same parts (all three: the whole envelope).

        Only the bytes are kept: the dicts they are made from are freed as soon as they are serialized (see
        ``Observation.observation_unkept``: kept, a 10,000-envelope batch's dicts set off the cycle collector's
        full passes), and the text and affordances they share are kept by the observation."""
        return self.shaped_sized(parts)[0]

    def shaped_sized(self, parts: tuple[str, ...]) -> tuple[orjson.Fragment, int]:
        """``shaped(parts)`` and its length in bytes (a Fragment does not tell it): what a frame will weigh."""
        if parts != WHOLE and all(p in parts for p in WHOLE):
            parts = WHOLE
        shaped = self._shaped
        if shaped is None:
            shaped = self._shaped = {}
        got = shaped.get(parts)
        if got is None:
            raw = orjson.dumps(self.narrowed(parts))
            if parts == WHOLE:
                self._whole_raw = raw
            got = shaped[parts] = (orjson.Fragment(raw), len(raw))
        return got

    def whole(self) -> orjson.Fragment:
        """The whole envelope's bytes (HTTP's long-poll body): ``full()`` serialized, built and kept as bytes."""
        return self.shaped(WHOLE)

    def whole_bytes(self) -> bytes:
        """``whole()``'s bytes themselves (a Fragment does not give them back): a reply written straight into a
        socket (``Mailbox.deliver``) without copying them out of a Fragment first."""
        if self._whole_raw is None:
            self.shaped(WHOLE)
        assert self._whole_raw is not None
        return self._whole_raw

    def _identity(self) -> dict[str, Any]:
        obs = self.obs
        # the identity in the wire order of Envelope (IDENTITY; tests/test_envelope_bytes.py compares the two)
        return {"run_id": self.run_id, "agent_id": obs.agent_id, "observation_id": obs.observation_id,
                "seq": obs.seq, "sim_time_ms": obs.time, "reason": obs.reason,
                "deadline_unix": self.deadline_unix, "briefing_revision": BRIEFING_REVISION}

    def narrowed(self, parts: tuple[str, ...]) -> dict[str, Any]:
        """The envelope narrowed to ``parts``, as plain JSON types, made to be serialized at once (not kept)."""
        if self._full is not None:
            if all(p in parts for p in WHOLE):
                return self._full
            source = self._full
            out = {k: source[k] for k in IDENTITY}
        else:
            out = self._identity()
        obs = self.obs
        observation: dict[str, Any] | None = None
        if "observation" in parts or "text" in parts and obs.kept_text is None:
            observation = obs.observation_unkept()
        if "observation" in parts:
            out["observation"] = observation
        else:
            view = obs.view
            chosen = {}
            for k in view:  # the wire order of the observation's fields
                if k in parts:
                    v = view[k]
                    chosen[k] = v.to_dict() if hasattr(v, "to_dict") else v
            if chosen:
                out["observation"] = chosen
        if "text" in parts:
            out["text"] = obs.kept_text if observation is None else obs.text_of(observation)
        if "affordances" in parts:
            out["affordances"] = obs.affordances
        return out


def current_wire(ra: RemoteAgent, after: int) -> WireEnvelope | None:
    """The agent's outstanding envelope (unbuilt) if its ``seq`` is after ``after``; None if nothing new."""
    rec = ra.ledger.outstanding()
    env = ra.envelope
    if rec is not None and rec.seq > after and env is not None:
        return env if isinstance(env, WireEnvelope) else None
    return None


def receipt_with_outcome(sim: Simulation, receipt: Receipt) -> Receipt:
    """An accepted (or duplicate) command's receipt with what the engine made of it so far (and any conflict)."""
    if receipt.status not in ("accepted", "duplicate"):
        return receipt
    outcome, reason = sim.outcome_of(receipt.observation_id)
    conflict = sim.conflict_of(receipt.observation_id)
    return attrs.evolve(receipt, outcome=cast(Outcome, outcome), outcome_reason=reason,
                        conflict=None if conflict is None else Conflict(**conflict))
