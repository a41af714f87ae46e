"""A run's journal: append-only JSON Lines on disk, plus the records in memory for spectators.

Each record gets a ``cursor`` (its index). The deterministic part of a record holds no wall-clock
value; wall-clock facts (when a command arrived) go under the ``wall`` key, which replay ignores.
Lease tokens are never written: nothing that reaches ``append`` carries one.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import trio

from ..engine.records import dumps_record, with_cursor


class Journal:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        self._file: IO[str] | None = None
        self._pending: list[str] = []
        self.changed = trio.Event()
        self.flushed = 0  # records[:flushed] are on disk and visible to readers (spectators, downloads)
        self.closed = False
        self._listeners: list[Any] = []  # live spectator subscriptions: .publish(records), .journal_closed()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()

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

    def flush(self) -> None:
        """Write what was appended since the last flush (called once per batch) and wake readers."""
        if self.path is not None and self._pending:
            text = "\n".join(self._pending) + "\n"
            if self._file is not None:
                self._file.write(text)
                self._file.flush()
            else:  # closed: late records are appended
                with open(self.path, "a", encoding="utf-8") as late:
                    late.write(text)
            self._pending.clear()
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
            self._file.close()
            self._file = None
        self.closed = True
        for listener in list(self._listeners):
            listener.journal_closed()

    def listen(self, listener: Any) -> None:
        self._listeners.append(listener)

    def unlisten(self, listener: Any) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)
