"""An ended run as the server keeps it: its id, status and journal path; everything else is read from disk.

DESIGN section 11: memory is bounded by live work. When a run ends, the manager swaps its :class:`Run` for
a :class:`StoredRun`, which holds no engine and no records. Its view comes from the ``run-N.view.json``
sidecar written at the end; its journal (download, streams) is read from the file per reader
(:class:`~warren_sim.runtime.journal.DiskJournal`); the rare agent requests on an ended run (a late
command, a receipt, a briefing) go to a run rebuilt from the journal (:mod:`warren_sim.runtime.restore`),
of which the manager caches only a couple.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import trio

from ..engine.records import dumps_record
from ..observability.metrics import NO_METRICS, Metrics, NoMetrics
from ..observability.tracing import NO_TRACER, NoTracer, Tracer
from .errors import RunError, too_many_spectators
from .journal import DiskJournal, read_disk_journal, read_journal_text
from .restore import view_path
from .run import no_more_observations

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

    def __init__(self, run_id: str, path: Path, status: str, rebuilt: Callable[[StoredRun], Any],
                 max_spectators: int) -> None:
        self.run_id = run_id
        self.path = path
        self.status = status
        self._rebuilt = rebuilt
        self.max_spectators = max_spectators
        self.spectators = 0
        self.leases: dict[str, Any] | None = None  # the leases it ended with (same process): their own expiry
        self._error: list[str | None] = []  # the run's error, read once from its view (ended_poll)
        self.started = trio.Event()
        self.ended = trio.Event()
        self.started.set()
        self.ended.set()

    def rebuilt(self) -> Any:
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

    @contextlib.contextmanager
    def spectator_slot(self) -> Iterator[None]:
        if self.spectators >= self.max_spectators:
            raise too_many_spectators(self.run_id, self.max_spectators)
        self.spectators += 1
        try:
            yield
        finally:
            self.spectators -= 1

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
        lease = self.leases.get(agent_id) if self.leases is not None and token else None
        if lease is None or not lease.matches(token) or not lease.live() or lease.polls >= max_polls:
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
    def sim(self) -> Any:
        return self.rebuilt().sim

    @property
    def remote(self) -> Any:
        return self.rebuilt().remote

    def __getattr__(self, name: str) -> Any:
        if name in ("agent", "authenticate", "claim", "briefing_for", "wait_observation", "submit",
                    "receipt", "config", "error"):
            return getattr(self.rebuilt(), name)
        raise AttributeError(name)


async def journal_of(run: Any) -> Any:
    """What a request handler reads a run's journal from: a live run's in-memory :class:`Journal`, or an ended
    run's file parsed off the event loop (a big journal does not stall the server's other requests)."""
    if isinstance(run, StoredRun):
        return await run.read_journal()
    return run.journal


async def journal_text_of(run: Any, since: int) -> str:
    """The journal download (NDJSON after cursor ``since``); an ended run's is built in a worker thread."""
    if isinstance(run, StoredRun):
        return await read_journal_text(run.path, since)
    journal = run.journal
    return "".join(dumps_record(r) + "\n" for r in journal.records[since + 1:journal.flushed])
