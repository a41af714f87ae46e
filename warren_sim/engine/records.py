"""Journal records as bytes: one JSON object per line, ``cursor`` first, keys in insertion order.

Headless traces and served journals both go through ``dumps_record``, so the same records give
the same bytes wherever they were produced.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

import orjson

#: Records the runtime (server or headless loop) writes; every other kind comes from the engine. Replay and a
#: restarted server's rebuild skip them (warren_sim.replay, warren_sim.runtime.restore).
RUNTIME_KINDS = frozenset({"config", "status", "claim", "release", "verdict", "closed", "crash", "invalid",
                           "restart", "faults", "fault"})


def with_cursor(cursor: int, record: dict[str, Any]) -> dict[str, Any]:
    return {"cursor": cursor, **record}


# orjson writes exactly what json.dumps writes for these records except for floats below 1e-4 or from 1e16 up
# (json.dumps writes "1e-05" and "1e+16", orjson "0.00001" and "1e16") and NaN/Infinity (orjson writes null):
# a record holding such a float (``_orjson_safe``) is written by json.dumps, and so is what orjson refuses
# (non-str keys, integers beyond 64 bits, lone surrogates, subclasses of builtins). tests/test_records_dumps.py
# checks the two agree on any float, string and record; tests/test_trace_digests.py that every bundled
# scenario's trace is byte-identical.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def dumps_record(record: dict[str, Any]) -> str:
    """One record as one line of JSON: compact, keys in insertion order, non-ASCII kept (UTF-8).

    The bytes are json.dumps's (``ensure_ascii=False``, compact separators); orjson writes them ~10x faster
    where it writes the same (see ``_orjson_safe``), and json.dumps writes the rest.
    """
    if _orjson_safe(record):
        try:
            return orjson.dumps(record, option=_ORJSON_OPTIONS).decode()
        except TypeError:
            pass
    return _dumps_json(record)


def _orjson_safe(value: Any) -> bool:
    """No float in ``value`` that orjson writes differently from json.dumps (zero, or 1e-4 <= |x| < 1e16)."""
    for v in value.values() if type(value) is dict else value:
        t = type(v)
        if t is float:
            if not (v == 0.0 or 1e-4 <= abs(v) < 1e16):  # NaN and the infinities fail both
                return False
        elif (t is dict or t is list or t is tuple) and not _orjson_safe(v):
            return False
    return True


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
        try:  # orjson reads the same values several times faster; json reads (or refuses) what orjson refuses
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            record = None
        if record is not None:
            pass
        elif not line.strip():
            continue
        else:
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordsError(f"{where}:{lineno}: not a JSON record ({exc.msg}); a journal is JSON Lines, "
                                   "one record per line") from None
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
