"""Reading requests and writing replies, shared by the route modules.

Responses are serialized with ``json.dumps`` (no key sorting) so field order is the order of the wire
models. Errors are ``application/problem+json`` bodies whose ``detail`` teaches: a bad query parameter
or body raises :class:`BadRequest`, which the app's error handler turns into a problem reply.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from quart import Response, request

from ..protocol import PROBLEM_CONTENT_TYPE
from ..protocol.models import problem
from ..protocol.strict_json import MAX_BODY_BYTES, StrictJSONError, loads_strict

__all__ = ["BadRequest", "float_arg", "int_arg", "json_body", "parse_json_body", "problem_body", "problem_reply",
           "reply"]


class BadRequest(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def reply(obj: Any, status: int = 200, content_type: str = "application/json") -> Response:
    return Response(json.dumps(obj, ensure_ascii=False), status=status, content_type=content_type)


def problem_body(status: int, detail: str, run_status: str | None = None) -> str:
    """The problem+json text of a refusal: one wording for Quart's replies and the HTTP lane's (:mod:`.http_lane`).

    ``run_status``: the 410 of an ended run carries the run's terminal status as data, the extension member
    ``run_status`` (RFC 9457 section 3.2), so a client need not read it out of the detail."""
    body = problem(status, detail)
    if run_status is not None:
        body["run_status"] = run_status
    return json.dumps(body, ensure_ascii=False)


def problem_reply(status: int, detail: str, run_status: str | None = None) -> Response:
    return Response(problem_body(status, detail, run_status), status=status, content_type=PROBLEM_CONTENT_TYPE)


def int_arg(name: str, default: int | None, minimum: int | None = None, args: Mapping[str, str] | None = None) -> int:
    """Query parameter ``name`` as an integer within +/-(2^53-1) (JSON-safe); ``default`` None: required.

    ``args``: the query's parameters (the HTTP lane's); the current Quart request's by default."""
    raw = (request.args if args is None else args).get(name)
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


def float_arg(name: str, default: float, args: Mapping[str, str] | None = None) -> float:
    """Query parameter ``name`` as a finite number of seconds >= 0 (``args`` as for :func:`int_arg`)."""
    raw = (request.args if args is None else args).get(name)
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
    return parse_json_body(data, request.mimetype, request.content_type, required)


def parse_json_body(data: bytes | str, mimetype: str | None, content_type: str | None, required: bool) -> Any:
    """A request body (``data``, sent as ``content_type``, whose media type is ``mimetype``) as strict JSON."""
    ctype = (mimetype or "").lower()
    if data.strip() and ctype != "application/json" and not ctype.endswith("+json"):
        raise BadRequest(415, f"the body must be sent with Content-Type: application/json, got "
                         f"{content_type or 'none'!r}; a JSON body from a web page of another site is "
                         "refused this way too")
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
