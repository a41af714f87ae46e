"""Reading requests and writing replies, shared by the route modules.

Responses are serialized with ``json.dumps`` (no key sorting) so field order is the order of the wire
models. Errors are ``application/problem+json`` bodies whose ``detail`` teaches: a bad query parameter
or body raises :class:`BadRequest`, which the app's error handler turns into a problem reply.
"""

from __future__ import annotations

import json
import math
from typing import Any

from quart import Response, request

from ..protocol import PROBLEM_CONTENT_TYPE
from ..protocol.models import problem
from ..protocol.strict_json import MAX_BODY_BYTES, StrictJSONError, loads_strict

__all__ = ["BadRequest", "float_arg", "int_arg", "json_body", "problem_reply", "reply"]


class BadRequest(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def reply(obj: Any, status: int = 200, content_type: str = "application/json") -> Response:
    return Response(json.dumps(obj, ensure_ascii=False), status=status, content_type=content_type)


def problem_reply(status: int, detail: str) -> Response:
    return reply(problem(status, detail), status, PROBLEM_CONTENT_TYPE)


def int_arg(name: str, default: int | None, minimum: int | None = None) -> int:
    """Query parameter ``name`` as an integer within +/-(2^53-1) (JSON-safe); ``default`` None: required."""
    raw = request.args.get(name)
    if raw is None:
        if default is None:
            raise BadRequest(400, f"query parameter {name} is required (an integer)")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(400, f"query parameter {name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise BadRequest(400, f"query parameter {name} must be >= {minimum}, got {value}")
    if abs(value) > 2**53 - 1:
        raise BadRequest(400, f"query parameter {name} must be within +/-(2^53-1), got {raw}")
    return value


def float_arg(name: str, default: float) -> float:
    """Query parameter ``name`` as a finite number of seconds >= 0."""
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(400, f"query parameter {name} must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise BadRequest(400, f"query parameter {name} must be a finite number >= 0, got {raw!r}")
    return value


async def json_body(required: bool) -> Any:
    """The request body as strict JSON (bounded size); ``{}`` for an empty optional body."""
    data = await request.get_data()
    if len(data) > MAX_BODY_BYTES:
        raise BadRequest(413, f"the body is {len(data)} bytes; at most {MAX_BODY_BYTES} are accepted")
    if not data.strip():
        if required:
            raise BadRequest(400, "this request needs a JSON object body")
        return {}
    try:
        return loads_strict(data)
    except StrictJSONError as exc:
        raise BadRequest(400, f"the body is not acceptable JSON: {exc}") from None
