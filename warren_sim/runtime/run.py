"""One served run: the facade that joins its parts, and what the server and ``runtime.restore`` call.

A run is four small pieces, each in its own module, that never import each other:

* :class:`~warren_sim.runtime.state.RunState`: the configuration, engine, journal and remote agents all
  parts read, and the lifecycle (``created`` -> ``running`` -> a terminal status, each change journaled);
* :class:`~warren_sim.runtime.loop.RunLoop`: the run task (batches, pacing, NPC answers, deadlines);
* :class:`~warren_sim.runtime.desk.AgentDesk`: claims, leases and their sidecar, briefings, submits,
  receipts (every agent request that does not wait);
* :class:`~warren_sim.runtime.mailbox.Mailbox`: long-polls waiting for envelopes, and their replies
  written early by the run task.

:class:`Run` builds them and hands each the others' entry points (the loop's ``deliver`` is the
mailbox's); the HTTP and WebSocket handlers call its methods (the :class:`~warren_sim.runtime.api.RunAPI`
protocol, which an ended run answered from disk implements too), and only ``wait_observation`` and
``wait_observations`` ever wait.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import Batch, Observation, Policy, Simulation
from ..observability.metrics import NO_METRICS, Metrics, NoMetrics
from ..observability.tracing import NO_TRACER, NoTracer, Tracer
from ..protocol.models import ControlledAgents, Receipt
from ..protocol.verdicts import Judgement
from .clock import WallMap
from .desk import AgentDesk
from .errors import RunError, restarted
from .journal import Journal
from .leases import RemoteAgent
from .loop import RunLoop
from .mailbox import Mailbox
from .spectators import SpectatorSlots
from .state import RunConfig, RunState
from .views import run_view

if TYPE_CHECKING:
    from collections.abc import Callable

    import orjson
    import trio

    from .views import WireEnvelope

__all__ = ["Run", "RunConfig"]


class Run:
    """A live run: its parts joined, and the one object the manager, the routes and restore hold."""

    metrics: Metrics | NoMetrics = NO_METRICS  # the app's, set by the manager: verdicts counted by agent_ops
    tracer: Tracer | NoTracer = NO_TRACER  # the app's, set by the manager: spans of agent requests (agent_ops)

    def __init__(self, config: RunConfig, sim: Simulation, policies: dict[str, Policy], journal: Journal,
                 wallmap: WallMap, *, lease_file: Path | None = None, restored: bool = False,
                 engine_records: list[dict[str, Any]] | None = None) -> None:
        state = self.state = RunState(config, sim, journal, wallmap)
        self.mailbox = Mailbox(state)
        self.desk = AgentDesk(state, lease_file)
        self.loop = RunLoop(state, policies, self.mailbox.deliver)
        self._slots = SpectatorSlots(config.run_id, config.max_spectators)
        # the state's objects, never replaced: read here as attributes
        self.config, self.run_id, self.sim, self.journal, self.wallmap = config, config.run_id, sim, journal, wallmap
        self.policies = policies
        self.remote: dict[str, RemoteAgent] = state.remote
        self.started: trio.Event = state.started
        self.ended: trio.Event = state.ended
        if restored:
            return
        state.begin(engine_records)  # a fork's: the engine records it stands on (RunManager.fork)
        if not config.controlled:
            state.start()

    # -- what it is ---------------------------------------------------------------------------------
    @property
    def status(self) -> str:
        return self.state.status

    @property
    def error(self) -> str | None:
        return self.state.error

    @property
    def cancel_reason(self) -> str:
        return self.state.cancel_reason

    @property
    def is_ended(self) -> bool:
        return self.state.is_ended

    @property
    def spectators(self) -> int:
        return self._slots.held

    @property
    def briefings(self) -> dict[str, dict[str, Any]]:
        return self.desk.briefings

    @property
    def lease_file(self) -> Path | None:
        return self.desk.lease_file

    @property
    def after_end_change(self) -> Callable[[], None] | None:
        """Called when an ended run's view changes (a release): the manager rewrites its view file."""
        return self.desk.after_end_change

    @after_end_change.setter
    def after_end_change(self, call: Callable[[], None] | None) -> None:
        self.desk.after_end_change = call

    def view(self) -> dict[str, Any]:
        """The run as ``GET /v1/runs/{id}`` shows it (see :func:`~warren_sim.runtime.views.run_view`)."""
        return run_view(self.state)

    async def read_journal(self) -> Journal:
        return self.journal

    async def journal_text(self, since: int) -> str:
        return self.journal.text_since(since)

    def spectator_slot(self) -> contextlib.AbstractContextManager[None]:
        """Hold one of the run's ``max_spectators`` stream slots while a spectator is connected; 429 when full.

        Use it around a spectator stream: ``with run.spectator_slot(): ...`` (refuse before accepting).
        """
        return self._slots.hold()

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.state.start()

    def cancel(self, reason: str = "cancelled by an operator") -> None:
        self.loop.cancel(reason)

    def finish(self, status: str, reason: str, error: str | None = None) -> None:
        """End the run now in ``status`` (a run that cannot be resumed: ``crashed``)."""
        self.state.finish(status, reason, error)

    async def main(self) -> None:
        """The run task (:meth:`RunLoop.main <warren_sim.runtime.loop.RunLoop.main>`)."""
        await self.loop.main()

    def drop(self) -> None:
        """Drop the run from memory as a crash would (a ``restart`` fault, docs/faults.md): its task stops without
        a word in the journal, what the journal had not yet written is lost, and every request still waiting on
        it is answered 503 (:func:`~.errors.restarted`). The manager then rebuilds the run from its file."""
        state = self.state
        state.dropped = True
        self.journal.abandon()
        scope = self.loop.cancel_scope
        if scope is not None:  # else its task, when it begins, sees ``dropped`` and ends at once
            scope.cancel()
        for ra in self.remote.values():
            ra.poke()
        state.batch.poke()

    # -- rebuilt from a journal (runtime.restore) -------------------------------------------------------
    def note_claimed(self, agent_ids: list[str]) -> None:
        """Agents the journal (or the lease sidecar) shows claimed; nothing is written and nothing starts."""
        self.desk.claimed_once.update(agent_ids)

    @property
    def all_claimed(self) -> bool:
        return self.desk.all_claimed

    def answer_npc(self, obs: Observation) -> None:
        self.loop.answer_npc(obs)

    def resume(self, status: str, batch: Batch | None) -> None:
        """Go on as the journal left the run: in ``status``, with ``batch`` (if any) still waiting for answers."""
        self.state.status = status
        self.loop.resume_batch = batch
        if status == "running":
            self.state.started.set()

    def ended_as_journaled(self, status: str, error: str | None) -> None:
        """Come back ended, as the journal says, without writing anything."""
        self.state.ended_as_journaled(status, error)

    # -- the agent protocol: the desk and the mailbox ------------------------------------------------
    def agent(self, agent_id: str) -> RemoteAgent:
        return self.desk.agent(agent_id)

    def authenticate(self, agent_id: str, token: str | None) -> RemoteAgent:
        """Check the lease of a request and refresh its TTL (any authenticated request does)."""
        return self.desk.authenticate(agent_id, token)

    def claim(self, agent_id: str, token: str | None, proposed: str | None = None) -> tuple[str, bool]:
        return self.desk.claim(agent_id, token, proposed)

    def claim_many(self, selector: ControlledAgents) -> dict[str, str]:
        return self.desk.claim_many(selector)

    def release(self, agent_id: str, token: str | None) -> None:
        self.desk.release(agent_id, token)

    def save_leases(self) -> None:
        self.desk.save_leases()

    def briefing_for(self, agent_id: str) -> dict[str, Any]:
        return self.desk.briefing_for(agent_id)

    def ended_poll(self, agent_id: str, token: str | None, lease_ttl: float, max_polls: int) -> RunError | None:
        """None: a live run judges every poll itself (:meth:`wait_observation`), ended or not."""
        return None

    async def wait_observation(self, ra: RemoteAgent, after: int, wait: float,
                               deliver: Callable[[bytes], bool] | None = None) -> orjson.Fragment | None:
        return await self.mailbox.wait_observation(ra, after, wait, deliver)

    async def wait_observations(self, wanted: list[tuple[RemoteAgent, int]], wait: float,
                                parts: tuple[str, ...] | None = None) -> list[WireEnvelope]:
        return await self.mailbox.wait_observations(wanted, wait, parts)

    def submit(self, ra: RemoteAgent, body: object, lease: str | None = None, *, write: bool = True) -> Judgement:
        if self.state.dropped:  # its body was read across a restart fault: the run rebuilt from the file judges it
            raise restarted(self.run_id)
        return self.desk.submit(ra, body, lease, write=write)

    def receipt(self, ra: RemoteAgent, command_id: str) -> Receipt:
        return self.desk.receipt(ra, command_id)
