"""Journal records as bytes: one JSON object per line, ``cursor`` first, keys in insertion order.

Headless traces and served journals both go through ``dumps_record``, so the same records give
the same bytes wherever they were produced.
"""

from __future__ import annotations

import json
import re
from typing import Any, TextIO

import orjson

#: Records the runtime (server or headless loop) writes; every other kind comes from the engine. Replay and a
#: restarted server's rebuild skip them (warren_sim.replay, warren_sim.runtime.restore).
RUNTIME_KINDS = frozenset({"config", "status", "claim", "release", "verdict", "closed", "crash", "invalid",
                           "restart"})


def with_cursor(cursor: int, record: dict[str, Any]) -> dict[str, Any]:
    return {"cursor": cursor, **record}


# orjson writes what json.dumps writes for these records except in cases it shows in its own output: floats in
# exponent form ("1e16" where json writes "1e+16") or below 1e-4 ("0.00001" for "1e-05"), and NaN/Infinity
# (orjson writes null). A line with any of these (or a null, or a digit before an e in a string: harmless false
# alarms) is written by json.dumps instead; what orjson refuses (non-str keys, integers beyond 64 bits, lone
# surrogates, subclasses of builtins) too. tests/test_records.py checks the two agree on floats, strings and
# records, tests/test_trace_digests.py that every bundled scenario's trace is byte-identical.
_ORJSON_MAY_DIFFER = re.compile(r"\d[eE]|(?<![\d.])0\.0000|null")
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def dumps_record(record: dict[str, Any]) -> str:
    """One record as one line of JSON: compact, keys in insertion order, non-ASCII kept (UTF-8).

    The bytes are json.dumps's (``ensure_ascii=False``, compact separators); orjson makes them ~8x faster
    where it provably writes the same (see ``_ORJSON_MAY_DIFFER``), and json.dumps writes the rest.
    """
    try:
        text = orjson.dumps(record, option=_ORJSON_OPTIONS).decode()
    except TypeError:
        return _dumps_json(record)
    if _ORJSON_MAY_DIFFER.search(text) is not None:
        return _dumps_json(record)
    return text


def _dumps_json(record: dict[str, Any]) -> str:
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
