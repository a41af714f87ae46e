"""Spectators: one run's journal as a stream of frames, for the WebSocket and SSE routes.

A :class:`Subscription` yields the journal records with ``cursor > since`` in cursor order, then
a terminal frame once the run has ended. When the reader asks for its first frame it registers
with the journal, and from then on:

* the records flushed before that moment (its **backlog**) are read straight from the journal (in
  memory) at the reader's pace: a long history is not queued and never counts as lag;
* every later flush is handed to it (``publish``) and waits in its **queue** until the reader
  takes it. A flush that arrives while more than ``queue_size`` records are still waiting marks
  the subscriber *lagged*: its queue is dropped, it gets no more records, and its next frame is
  ``{"kind": "lagged", "cursor": n}``, ``n`` being the last cursor it was given, so ``since=n``
  resumes exactly (the records are in the journal). A flush that arrives while at most
  ``queue_size`` are waiting is taken whole, so one large batch never lags a reader that keeps up;
  a reader's queue holds at most ``queue_size`` records plus one flush.

A run, live or stored, admits at most ``max_spectators`` streams at once (:class:`SpectatorSlots`).

Only flushed records are streamed: what a spectator sees is what is on disk. A cursor beyond the
journal's end cannot come from this journal (a server restarted with the same run id, a typo):
the first frame is then ``{"kind": "gap", ...}`` and the stream restarts from cursor 0, so the
reader rebuilds its view from scratch (seed 001's reconciliation after an unknown cursor).

Control frames (``lagged``, ``terminal``, ``gap``) are not journal records; they carry a ``cursor``
only to say where the reader stands.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import trio

from .errors import too_many_spectators

if TYPE_CHECKING:
    from .api import RunAPI

__all__ = ["CONTROL_KINDS", "GAP", "LAGGED", "TERMINAL", "SpectatorSlots", "Subscription"]

LAGGED, TERMINAL, GAP = "lagged", "terminal", "gap"
CONTROL_KINDS = (LAGGED, TERMINAL, GAP)


class SpectatorSlots:
    """The spectator streams one run holds at once, up to its cap: one rule for a live run and a stored one."""

    __slots__ = ("cap", "held", "run_id")

    def __init__(self, run_id: str, cap: int) -> None:
        self.run_id, self.cap, self.held = run_id, cap, 0

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """One slot while a spectator is connected; 429 when all are taken (enter it before accepting)."""
        if self.held >= self.cap:
            raise too_many_spectators(self.run_id, self.cap)
        self.held += 1
        try:
            yield
        finally:
            self.held -= 1


class Subscription:
    """Frames of one run for one reader; use as a context manager so it always unregisters."""

    def __init__(self, run: RunAPI, since: int, queue_size: int, journal: Any = None) -> None:
        """``journal``: what to read (an ended run's, parsed off the event loop by ``stored.journal_of``);
        by default ``run.journal``."""
        if queue_size < 1:
            raise ValueError(f"queue_size must be >= 1, got {queue_size}")
        self.run = run
        self.journal = run.journal if journal is None else journal
        self.queue_size = queue_size
        self.queue: deque[dict[str, Any]] = deque()
        self.started = False
        self.lagged = False
        self.done = False
        self._closed = False  # the journal is complete (the run ended)
        self._wake = trio.Event()
        self._pending_gap: dict[str, Any] | None = None
        last = self.journal.flushed - 1
        if since > last:
            self._pending_gap = {
                "kind": GAP, "cursor": -1, "requested": since, "last": last,
                "detail": f"cursor {since} is beyond the end of {run.run_id}'s journal (last cursor {last}); it "
                          "cannot come from this journal, so the stream restarts from its first record",
            }
            since = -1
        self.next = since + 1  # cursor of the next backlog record to hand out
        self.backlog_end = 0  # records before this cursor come from the journal, the later ones from the queue
        self.last_sent = since  # the last cursor handed out (what "lagged" reports)

    # -- the journal's side (synchronous, called by Journal.flush / Journal.close) --------------------
    def publish(self, records: list[dict[str, Any]]) -> None:
        if self.lagged or not records:
            return
        if len(self.queue) > self.queue_size:
            self.lagged = True
            self.queue.clear()
            self.journal.unlisten(self)
        else:
            self.queue.extend(records)
        self._wake.set()

    def journal_closed(self) -> None:
        self._closed = True
        self._wake.set()

    # -- the reader's side -------------------------------------------------------------------------------
    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.done = True
        self.journal.unlisten(self)

    def _terminal(self) -> dict[str, Any]:
        self.close()
        return {"kind": TERMINAL, "cursor": self.journal.flushed - 1, "status": self.run.status}

    def _give(self, record: dict[str, Any]) -> dict[str, Any]:
        self.last_sent = record["cursor"]
        return record

    def poll(self) -> dict[str, Any] | None:
        """The next frame if one is ready now, else None (see ``next_frame``; ``done`` says if it is over)."""
        if self.done:
            return None
        if not self.started:  # register and fix the backlog in one step: no record is missed or doubled
            self.started = True
            self.backlog_end = self.journal.flushed
            if self.journal.closed:
                self._closed = True
            else:
                self.journal.listen(self)
        if self._pending_gap is not None:
            frame, self._pending_gap = self._pending_gap, None
            return frame
        if self.lagged:
            self.close()
            return {"kind": LAGGED, "cursor": self.last_sent}
        if self.next < self.backlog_end:
            record = self.journal.records[self.next]
            self.next += 1
            return self._give(record)
        if self.queue:
            return self._give(self.queue.popleft())
        if self._closed:
            return self._terminal()
        return None

    async def next_frame(self) -> dict[str, Any] | None:
        """The next frame, waiting for one if need be; None after the last frame (terminal or lagged).

        Ask for the next frame only once the previous one was handed to the transport: ``lagged``
        reports the last cursor given out as the last one the reader was sent.
        """
        while not self.done:
            frame = self.poll()
            if frame is not None:
                return frame
            if self.done:
                break
            self._wake = trio.Event()
            await self._wake.wait()
        return None
