"""Journal records as bytes: one JSON object per line, ``cursor`` first, keys in insertion order.

Headless traces and served journals both go through ``dumps_record``, so the same records give
the same bytes wherever they were produced.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

#: Records the runtime (server or headless loop) writes; every other kind comes from the engine. Replay and a
#: restarted server's rebuild skip them (warren_sim.replay, warren_sim.runtime.restore).
RUNTIME_KINDS = frozenset({"config", "status", "claim", "release", "verdict", "closed", "crash", "invalid",
                           "restart"})


def with_cursor(cursor: int, record: dict[str, Any]) -> dict[str, Any]:
    return {"cursor": cursor, **record}


def dumps_record(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


class RecordsError(ValueError):
    """A line of a journal's text is not a JSON object; the message names the line and what a journal is."""


def parse_records(text: str, where: str) -> list[dict[str, Any]]:
    """The records in a journal's (or trace's) text, one JSON object per line, blank lines skipped.

    The one reader of the format ``dumps_record`` writes: ``warren replay`` and ``warren report`` both call
    it on text they read themselves (the engine does no I/O), so they accept and refuse the same files with the
    same words. ``where`` names the file in errors.
    """
    records = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordsError(f"{where}:{lineno}: not a JSON record ({exc.msg}); a journal is JSON Lines, one "
                               "record per line") from None
        if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
            raise RecordsError(f"{where}:{lineno}: expected a JSON object with a string 'kind', got {line[:60]!r}")
        records.append(record)
    return records


class TraceWriter:
    """Appends records to a stream as JSON Lines, numbering them with cursors (``warren run --trace``).

    It lives next to ``dumps_record`` so a headless trace and a served journal cannot drift apart in
    format. It writes only to a stream it is given (or just counts when given ``None``): opening and
    closing files stays with the caller (the CLI, a test, the runtime's ``Journal``), so the engine
    still performs no I/O of its own.
    """

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self.cursor = 0

    def write(self, records: list[dict[str, Any]]) -> None:
        if self.stream is None:
            self.cursor += len(records)
            return
        lines = []
        for record in records:
            lines.append(dumps_record(with_cursor(self.cursor, record)))
            self.cursor += 1
        if lines:
            self.stream.write("\n".join(lines) + "\n")
