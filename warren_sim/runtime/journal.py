"""A run's journal: append-only JSON Lines on disk, plus the records in memory for spectators.

Each record gets a ``cursor`` (its index). The deterministic part of a record holds no wall-clock
value; wall-clock facts (when a command arrived) go under the ``wall`` key, which replay ignores.
Lease tokens are never written: nothing that reaches ``append`` carries one.

Durability (DESIGN section 11): records are written to the file once per batch (``flush``), and an
``accepted`` verdict is written and flushed to the OS at once (``write_through``) before its receipt
leaves, so a SIGKILL loses no acknowledged command. With ``fsync`` the file is also fsynced before
such a receipt leaves (``durable``), one fsync for all the accepts of one trio tick.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

import trio

from ..engine.records import dumps_record, with_cursor
from ..observability.metrics import NO_METRICS, Metrics, NoMetrics
from .clock import wall_seconds

__all__ = ["DiskJournal", "Journal", "read_records"]


def read_records(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """The complete records of a journal file; a torn last line (a kill mid-write) is dropped.

    With ``repair`` the torn tail is also cut from the file, so that appending goes on after the last
    complete record.
    """
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if repair and end != len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
    records = []
    for line in data[:end].splitlines():
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:  # a torn line in the middle cannot happen with appends; stop there
                break
    return records


class Journal:
    metrics: Metrics | NoMetrics = NO_METRICS  # the app's, set by the manager: bytes written, fsync latency

    def __init__(self, path: Path | None, *, fsync: bool = False,
                 restored: list[dict[str, Any]] | None = None) -> None:
        self.path = path
        self.fsync = fsync
        self.records: list[dict[str, Any]] = list(restored or [])
        self._file: IO[str] | None = None
        self._pending: list[str] = []
        self.changed = trio.Event()
        self.flushed = len(self.records)  # records[:flushed] are on disk and visible to readers
        self.closed = False
        self._listeners: list[Any] = []  # live spectator subscriptions: .publish(records), .journal_closed()
        self._written = 0  # lines handed to the OS (for grouped fsyncs)
        self._synced = 0
        self._syncing: trio.Event | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # a restored journal goes on where the file ends (its torn tail was cut by read_records)
            self._file = open(path, "a" if restored is not None else "w", encoding="utf-8")  # noqa: SIM115

    @property
    def cursor(self) -> int:
        return len(self.records)

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        full = with_cursor(len(self.records), record)
        self.records.append(full)
        if self.path is not None:
            self._pending.append(dumps_record(full))
        if self.closed:  # a late record after the run ended (a verdict, a release): written at once
            self.flush()
        return full

    def extend(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self.append(record)

    def write_through(self) -> None:
        """Hand what was appended to the OS now (an accepted verdict), without waking readers yet."""
        if self.path is None or not self._pending:
            return
        text = "\n".join(self._pending) + "\n"
        if self._file is not None:
            self._file.write(text)
            self._file.flush()
        else:  # closed: late records are appended
            with open(self.path, "a", encoding="utf-8") as late:
                late.write(text)
        self.metrics.journal_written(len(text) if text.isascii() else len(text.encode()))  # UTF-8 bytes
        self._written += len(self._pending)
        self._pending.clear()

    async def durable(self) -> None:
        """With ``fsync``: return once everything written so far is fsynced (one fsync per trio tick)."""
        if not self.fsync or self._file is None:
            return
        target = self._written
        while self._synced < target:
            if self._syncing is not None:
                await self._syncing.wait()
                continue
            event = self._syncing = trio.Event()
            try:
                await trio.lowlevel.cancel_shielded_checkpoint()  # let this tick's other accepts write first
                upto = self._written
                if self._file is not None:
                    self._fsync()
                self._synced = upto
            finally:
                self._syncing = None
                event.set()

    def _fsync(self) -> None:
        assert self._file is not None
        began = wall_seconds()
        os.fsync(self._file.fileno())
        self.metrics.fsynced(wall_seconds() - began)

    def flush(self) -> None:
        """Write what was appended since the last flush (called once per batch) and wake readers."""
        self.write_through()
        start, self.flushed = self.flushed, len(self.records)
        if self._listeners:
            fresh = self.records[start:]
            for listener in list(self._listeners):
                listener.publish(fresh)
        self.changed.set()
        self.changed = trio.Event()

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            if self.fsync:
                self._fsync()
            self._file.close()
            self._file = None
        self.closed = True
        for listener in list(self._listeners):
            listener.journal_closed()

    def discard(self) -> None:
        """Close the file without writing what is pending (a rebuild that failed)."""
        self._pending.clear()
        if self._file is not None:
            self._file.close()
            self._file = None
        self.closed = True

    def abandon(self) -> None:
        """Stop writing, as a crashed process does: what is pending is lost, the file is closed and nothing is ever
        written to it again from this object (a ``restart`` fault: a Run rebuilt from the file writes it now)."""
        self._pending.clear()
        self.path = None
        if self._file is not None:
            self._file.close()
            self._file = None
        self.closed = True
        for listener in list(self._listeners):
            listener.journal_closed()
        self._listeners.clear()

    def text_since(self, since: int) -> str:
        """The flushed records after cursor ``since`` as NDJSON (the journal download of a live run)."""
        return "".join(dumps_record(r) + "\n" for r in self.records[since + 1:self.flushed])

    def listen(self, listener: Any) -> None:
        self._listeners.append(listener)

    def unlisten(self, listener: Any) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)


class DiskJournal:
    """An ended run's journal read from its file for one reader (a download, a stream): nothing stays in memory.

    It has the reading side of :class:`Journal` (``records``, ``flushed``, ``closed``, ``listen``).
    """

    def __init__(self, path: Path, records: list[dict[str, Any]] | None = None) -> None:
        self.records = records if records is not None else read_records(path) if path.exists() else []
        self.flushed = len(self.records)
        self.closed = True
        self.changed = trio.Event()

    async def durable(self) -> None:
        """Nothing is written through a read-only journal."""

    def write_through(self) -> None:
        """Nothing is written through a read-only journal (a late verdict of an ended run is written by the run
        rebuilt for it, whose closed journal writes every record at once)."""

    def listen(self, listener: Any) -> None:
        listener.journal_closed()

    def unlisten(self, listener: Any) -> None:
        pass


async def read_disk_journal(path: Path) -> DiskJournal:
    """An ended run's journal for one reader, parsed in a worker thread: a journal of many megabytes must not
    hold up the event loop (every other request, every live run) while it is read."""
    records = await trio.to_thread.run_sync(lambda: read_records(path) if path.exists() else [])
    return DiskJournal(path, records)


async def read_journal_text(path: Path, since: int) -> str:
    """An ended run's journal download: the records after cursor ``since`` as NDJSON, read, parsed and
    re-serialized in a worker thread (the same lines the live journal route sends)."""
    def text() -> str:
        records = read_records(path) if path.exists() else []
        return "".join(dumps_record(r) + "\n" for r in records[since + 1:])
    return await trio.to_thread.run_sync(text)
