"""Journal records as bytes: one JSON object per line, ``cursor`` first, keys in insertion order.

Headless traces and served journals both go through ``dumps_record``, so the same records give
the same bytes wherever they were produced.
"""

from __future__ import annotations

import json
from typing import Any, TextIO


def with_cursor(cursor: int, record: dict[str, Any]) -> dict[str, Any]:
    return {"cursor": cursor, **record}


def dumps_record(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


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
