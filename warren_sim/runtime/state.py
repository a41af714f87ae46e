"""What every part of one served run shares: its configuration, engine, journal and agents, and its lifecycle.

A run is a facade (:class:`~warren_sim.runtime.run.Run`) over three parts that never import each other:
the loop (:mod:`.loop`: batches, pacing, NPC answers, deadlines), the agents' desk (:mod:`.desk`: claims,
leases, submits, receipts) and the mailbox (:mod:`.mailbox`: long-polls and their early delivery). They
meet here. :class:`RunState` holds what all of them read and the one thing all of them may change, the
run's status, whose every change is journaled (``created`` -> ``running`` -> a terminal status, once).
:class:`BatchWake` is how the desk tells the loop that the batch it waits on may be complete.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from ..engine import Simulation
from ..protocol.models import TERMINAL_RUN_STATUSES
from .clock import WallMap
from .journal import Journal
from .leases import RemoteAgent

__all__ = ["BatchWake", "RunConfig", "RunState"]


@attrs.define(eq=False)
class RunConfig:
    run_id: str
    scenario: str
    seed: int
    controlled: tuple[str, ...]
    npc_policy: str | dict[str, str]  # one policy for every NPC, or a team (scenarios.policies.npc_team)
    pace: float | None
    decision_deadline_s: float
    params: dict[str, Any]
    lease_ttl: float
    max_polls_per_lease: int = 4  # concurrent long-polls one lease may hold (429 beyond)
    max_spectators: int = 64  # concurrent spectator streams of this run (429 beyond)
    # a fork's parent and fork point ({"run_id", "cursor", "batch_cursor"}: warren_sim.fork.ForkPoint.as_dict)
    forked_from: dict[str, Any] | None = None


class BatchWake:
    """What the loop waits on while a batch is out: the desk's answers and lease changes.

    Answers only shrink the set of agents the batch waits for, so they are handed over one by one
    (``answered_now``); a claim, a release or a lease's end may grow it, so those ask for a rescan.
    """

    __slots__ = ("answered_now", "changed", "rescan")

    def __init__(self) -> None:
        self.changed = trio.Event()
        self.answered_now: list[str] = []
        self.rescan = True

    def poke(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    def answered(self, agent_id: str) -> None:
        self.answered_now.append(agent_id)
        self.poke()

    def leases_changed(self) -> None:
        self.rescan = True
        self.poke()


class RunState:
    """One run's shared facts and its lifecycle; the parts read these attributes, only this class moves the status."""

    def __init__(self, config: RunConfig, sim: Simulation, journal: Journal, wallmap: WallMap) -> None:
        self.config = config
        self.run_id = config.run_id
        self.sim = sim
        self.journal = journal
        self.wallmap = wallmap
        self.status = "created"
        self.error: str | None = None
        self.cancel_reason = ""
        self.remote = {aid: RemoteAgent(aid) for aid in config.controlled}
        self.started = trio.Event()
        self.ended = trio.Event()
        self.batch = BatchWake()
        # dropped from memory by a ``restart`` fault (docs/faults.md): a newer Run rebuilt from the journal serves
        # the run now; requests still holding this one are answered 503 (retry: they reach the new one)
        self.dropped = False
        self.faults_met: dict[str, int] = {}  # injected faults journaled in this run, by kind (the run view)

    @property
    def is_ended(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES

    def begin(self, engine_records: list[dict[str, Any]] | None = None) -> None:
        """A new run's first records: its configuration, the engine's own and status ``created``.

        ``engine_records``: what the engine wrote before this run holds it (a fork's: its parent's engine
        records up to the fork point, which ``warren_sim.fork`` drained while bringing the engine there)."""
        config = self.config
        self.journal.append({"kind": "config", "controlled_agents": list(config.controlled),
                             "npc_policy": config.npc_policy, "pace": config.pace,
                             "decision_deadline_s": config.decision_deadline_s})
        self.journal.extend(engine_records or [])
        self.journal.extend(self.sim.drain_records())
        self._status_record()
        self.journal.flush()

    def _status_record(self) -> None:
        rec: dict[str, Any] = {"kind": "status", "t": self.sim.time, "status": self.status}
        if self.error:
            rec["error"] = self.error
        self.journal.append(rec)

    def start(self) -> None:
        if self.status == "created":
            self.status = "running"
            self._status_record()
            self.journal.flush()
            self.started.set()

    def finish(self, status: str, reason: str, error: str | None = None) -> None:
        """End the run in ``status`` (journaled), close every agent's outstanding envelope and wake every waiter."""
        if self.is_ended:
            return
        if status == "cancelled":
            self.sim.cancel(reason)
        self.journal.extend(self.sim.drain_records())
        self.status = status
        self.error = error
        self._status_record()
        for ra in self.remote.values():
            closed = ra.ledger.mark_run_ended()
            if closed:
                self.journal.append({"kind": "closed", "t": self.sim.time, "agent": ra.agent_id,
                                     "observation_ids": closed, "why": "run_ended"})
            ra.poke()
        self.journal.flush()
        self.ended.set()
        self.started.set()
        self.batch.poke()

    def ended_as_journaled(self, status: str, error: str | None) -> None:
        """Take on the terminal status a journal ends with (a run rebuilt from it): nothing is written."""
        self.status, self.error = status, error
        self.cancel_reason = str(error or "")
        for ra in self.remote.values():
            ra.ledger.mark_run_ended()
        self.started.set()
        self.ended.set()
