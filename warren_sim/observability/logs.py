"""``warren serve``'s log: the human lines it always printed, or one JSON object per line for log shippers.

A lifecycle event (a run created, started, ended, resumed; a journal that could not be restored) is a
:class:`LogEvent`: its ``str()`` is the human line (so whoever prints it as text prints what it always did) and its
``fields`` are what the JSON line adds. Everything goes through the standard ``logging`` module, so the JSON format
also covers what WARREN does not write itself: Quart's logged errors and Hypercorn's error log (``--log-format
json`` hands Hypercorn the same logger, :func:`configure_json`).

A JSON line: ``{"ts": "2026-12-02T06:30:00.123456Z", "level": "info", "logger": "warren", "event": "run.ended",
"message": "run-1 ended: completed ...", "run_id": "run-1", "status": "completed", ...}``; an error adds
``"exc"`` (the traceback as one string). docs/operations.md lists the events.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import IO, Any

import attrs

__all__ = ["FORMATS", "JsonFormatter", "LogEvent", "configure_json", "log_event"]

FORMATS = ("human", "json")
LOGGER = "warren"
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


@attrs.frozen
class LogEvent:
    """One thing worth a log line: ``event`` names it (``run.created``), ``message`` is the human line."""

    event: str
    message: str
    fields: Mapping[str, Any] = attrs.field(factory=dict)
    level: int = logging.INFO

    def __str__(self) -> str:
        return self.message


class JsonFormatter(logging.Formatter):
    """A record as one JSON object on one line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", None) or "log",
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_json(stream: IO[str] | None = None) -> logging.Logger:
    """Send the process's log records to ``stream`` (stderr) as JSON lines: one handler on the root logger, so
    Quart's and Hypercorn's records get it too. Returns the logger to hand Hypercorn as its error log (which it
    then uses instead of making its own text handler). The human format configures nothing: it stays what it
    always was (``warren serve``'s own lines, Quart's and Hypercorn's default handlers)."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    errorlog = logging.getLogger("hypercorn.error")
    errorlog.handlers = []
    errorlog.propagate = True
    return errorlog


def log_event(event: LogEvent | str, logger: logging.Logger | None = None) -> None:
    """Log a :class:`LogEvent` (its fields as the record's extras) or a plain line."""
    log = logger or logging.getLogger(LOGGER)
    if isinstance(event, LogEvent):
        extra = {k: v for k, v in event.fields.items() if k not in _RESERVED}
        log.log(event.level, event.message, extra={"event": event.event, **extra})
    else:
        log.info(str(event))
