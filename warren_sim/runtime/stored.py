"""An ended run as the server keeps it: its id, status and journal path; everything else is read from disk.

DESIGN section 11: memory is bounded by live work. When a run ends, the manager swaps its :class:`Run` for
a :class:`StoredRun`, which holds no engine and no records. Its view comes from the ``run-N.view.json``
sidecar written at the end; its journal (download, streams) is read from the file per reader
(:class:`~warren_sim.runtime.journal.DiskJournal`); the rare agent requests on an ended run (a late
command, a receipt, a briefing) go to a run rebuilt from the journal (:mod:`warren_sim.runtime.restore`),
of which the manager caches only a couple. It implements :class:`~warren_sim.runtime.api.RunAPI` as a
live run does, each agent request by name: a route never asks which of the two it holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import trio

from ..engine import Simulation
from ..observability.metrics import NO_METRICS, Metrics, NoMetrics
from ..observability.tracing import NO_TRACER, NoTracer, Tracer
from ..protocol.models import ControlledAgents, Receipt
from ..protocol.verdicts import Judgement
from .errors import RunError, no_more_observations
from .journal import DiskJournal, Journal, read_disk_journal, read_journal_text
from .leases import Lease, RemoteAgent
from .restore import view_path
from .spectators import SpectatorSlots

if TYPE_CHECKING:
    from .api import RunAPI
    from .run import Run
    from .state import RunConfig
    from .views import WireEnvelope

__all__ = ["StoredRun", "journal_of", "journal_text_of", "write_view"]


def write_view(path: Path, view: dict[str, Any]) -> None:
    """Write an ended run's view next to its journal, atomically."""
    target = view_path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(view, ensure_ascii=False), encoding="utf-8")
    tmp.replace(target)


class StoredRun:
    """An ended run answered from disk; agent requests go to ``rebuilt()`` (a :class:`Run` rebuilt on demand)."""

    is_ended = True
    metrics: Metrics | NoMetrics = NO_METRICS  # the app's (set by the manager), as a live Run's: agent_ops uses them
    tracer: Tracer | NoTracer = NO_TRACER

    def __init__(self, run_id: str, path: Path, status: str, rebuilt: Callable[[StoredRun], Run],
                 max_spectators: int) -> None:
        self.run_id = run_id
        self.path = path
        self.status = status
        self._rebuilt = rebuilt
        self.max_spectators = max_spectators
        self._slots = SpectatorSlots(run_id, max_spectators)
        self.leases: dict[str, Lease] | None = None  # the leases it ended with (same process): their own expiry
        self._error: list[str | None] = []  # the run's error, read once from its view (ended_poll)
        self.started = trio.Event()
        self.ended = trio.Event()
        self.started.set()
        self.ended.set()

    def rebuilt(self) -> Run:
        return self._rebuilt(self)

    # -- what is read from disk -------------------------------------------------------------------------
    def view(self) -> dict[str, Any]:
        try:
            return dict(json.loads(view_path(self.path).read_text(encoding="utf-8")))
        except (OSError, ValueError):  # killed between the end and the view file: rebuild it once
            view: dict[str, Any] = self.rebuilt().view()
            write_view(self.path, view)
            return view

    @property
    def journal(self) -> DiskJournal:
        """The journal parsed here, synchronously (tools and tests); request handlers use :func:`journal_of`."""
        return DiskJournal(self.path)

    async def read_journal(self) -> DiskJournal:
        """The journal for one reader, parsed in a worker thread (the event loop goes on meanwhile)."""
        return await read_disk_journal(self.path)

    async def journal_text(self, since: int) -> str:
        """The journal download, built in a worker thread."""
        return await read_journal_text(self.path, since)

    @property
    def spectators(self) -> int:
        return self._slots.held

    def spectator_slot(self) -> AbstractContextManager[None]:
        return self._slots.hold()

    # -- lifecycle: an ended run stays ended ----------------------------------------------------------
    def cancel(self, reason: str = "") -> None:
        pass

    def start(self) -> None:
        pass

    # -- agent requests: answered by the run rebuilt from its journal -------------------------------
    def ended_poll(self, agent_id: str, token: str | None, lease_ttl: float, max_polls: int) -> RunError | None:
        """The 410 a long-poll of ``agent_id`` gets, without rebuilding the run: every agent's last poll lands here
        once its run ended, and rebuilding a run from its journal for it cost ~0.16 s (bench/results/r4-perf-http.md).

        Only the plain case is answered here: a lease this process saw the run end with, the token holding it and
        live, a poll slot free; its TTL is refreshed as any authenticated request's is. None otherwise: the rebuilt
        run judges the request (and words its refusal) as before.
        """
        lease = self.leases.get(agent_id) if self.leases is not None else None
        if lease is None or not token or not lease.matches(token) or not lease.live() or lease.polls >= max_polls:
            return None
        if not self._error:
            try:
                self._error.append(json.loads(view_path(self.path).read_text(encoding="utf-8")).get("error"))
            except (OSError, ValueError, AttributeError):
                return None  # no view (yet): the rebuilt run knows
        lease.refresh(lease_ttl)
        return no_more_observations(self.run_id, self.status, self._error[0])

    def release(self, agent_id: str, token: str | None) -> None:
        """A release after the end, by the rebuilt run; the lease is then gone from :attr:`leases` too (a run rebuilt
        again, and :meth:`ended_poll`, must not see it held)."""
        self.rebuilt().release(agent_id, token)
        if self.leases is not None:
            self.leases.pop(agent_id, None)

    @property
    def sim(self) -> Simulation:
        return self.rebuilt().sim

    @property
    def remote(self) -> dict[str, RemoteAgent]:
        return self.rebuilt().remote

    @property
    def config(self) -> RunConfig:
        return self.rebuilt().config

    @property
    def error(self) -> str | None:
        return self.rebuilt().error

    def agent(self, agent_id: str) -> RemoteAgent:
        return self.rebuilt().agent(agent_id)

    def authenticate(self, agent_id: str, token: str | None) -> RemoteAgent:
        return self.rebuilt().authenticate(agent_id, token)

    def claim(self, agent_id: str, token: str | None, proposed: str | None = None) -> tuple[str, bool]:
        return self.rebuilt().claim(agent_id, token, proposed)

    def claim_many(self, selector: ControlledAgents) -> dict[str, str]:
        return self.rebuilt().claim_many(selector)

    def briefing_for(self, agent_id: str) -> dict[str, Any]:
        return self.rebuilt().briefing_for(agent_id)

    async def wait_observation(self, ra: RemoteAgent, after: int, wait: float,
                               deliver: Callable[[bytes], bool] | None = None) -> orjson.Fragment | None:
        return await self.rebuilt().wait_observation(ra, after, wait, deliver)

    async def wait_observations(self, wanted: list[tuple[RemoteAgent, int]], wait: float,
                                parts: tuple[str, ...] | None = None) -> list[WireEnvelope]:
        return await self.rebuilt().wait_observations(wanted, wait, parts)

    def submit(self, ra: RemoteAgent, body: object, lease: str | None = None, *, write: bool = True) -> Judgement:
        """Judged by the rebuilt run, whose journal is closed: a closed journal writes every record at once."""
        return self.rebuilt().submit(ra, body, lease, write=write)

    def receipt(self, ra: RemoteAgent, command_id: str) -> Receipt:
        return self.rebuilt().receipt(ra, command_id)


async def journal_of(run: RunAPI) -> Journal | DiskJournal:
    """What a request handler reads a run's journal from: a live run's in-memory :class:`Journal`, or an ended
    run's file parsed off the event loop (a big journal does not stall the server's other requests)."""
    return await run.read_journal()


async def journal_text_of(run: RunAPI, since: int) -> str:
    """The journal download (NDJSON after cursor ``since``); an ended run's is built in a worker thread."""
    return await run.journal_text(since)
