"""One response judged against the protocol's endpoint table and JSON Schemas.

Apart from :mod:`warren_sim.conformance` (the black-box checker, on httpx and the SDK) because the tests check
every in-process response with it too: importing it costs only the protocol layer, not httpx, the SDK and
trio-websocket, which were a tenth of the warped expiry suite's start-up (bench/RESULTS.md, target 5).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from warren_sim.protocol.openapi import expected_response

__all__ = ["Headers", "Seen", "response_problems"]


class Headers(Protocol):
    """A response's headers with a case-insensitive ``get`` (httpx's and werkzeug's both are)."""

    def get(self, key: str, default: Any = ...) -> Any: ...


@attrs.frozen
class Seen:
    """One recorded response."""

    method: str
    path: str
    status: int
    headers: Headers
    content: bytes


def response_problems(seen: Seen, validation_errors: Callable[[object, str], list[str]]) -> list[str]:
    """What is wrong with one response against the protocol's endpoint table and schemas (empty: fine)."""
    try:
        expected = expected_response(seen.method, seen.path, seen.status)
    except LookupError as exc:
        return [str(exc)]
    if expected is None:
        return [f"status {seen.status} is not one this endpoint answers"]
    media, schema = expected
    if media is None:
        return [] if seen.content == b"" else [f"a {seen.status} must have no body"]
    ctype = seen.headers.get("content-type", "").split(";")[0].strip()
    if ctype != media:
        return [f"content-type {ctype!r}, expected {media!r}"]
    if schema is None:
        return []
    try:
        data = json.loads(seen.content)
    except ValueError as exc:
        return [f"the body is not JSON: {exc}"]
    return validation_errors(data, schema)
