"""The HTTP fast lane: the two hot agent routes served straight from ASGI, everything else by Quart.

Why: an agent's decision over HTTP is one or two requests (``GET .../observations`` long-poll, ``POST
.../commands[?wait=]``), and on those Quart's layers (request and app contexts, werkzeug routing, the
before/after hooks, two tasks per request, a three-part response write) cost as much as WARREN's own work
(bench/results/r4-perf-http.md). The lane answers exactly those two routes in their plain form, with the
same route functions as Quart's routes (:func:`~.agent_routes.poll_observation`,
:func:`~.agent_routes.submit_command`: one function per route, no copy, each calling its agent operation in
:mod:`warren_sim.runtime.agent_ops`) and the same replies, refusals included (problem+json bodies, statuses,
``Retry-After``, the protocol header). What is the lane's own is only the byte-level ASGI work: recognising the
plain form from the raw scope, gathering the body, writing the reply's three headers.

Robust by construction: the lane takes a request only when nothing about it needs Quart, and hands it over
BEFORE reading any of its body otherwise: another method or path, an ``Origin`` header (the browser guard of
:func:`~.hooks.foreign_origin`), a protocol header that is not ours, a body without a ``Content-Length`` (or
one above the cap, or a ``Transfer-Encoding``), a content type that is not JSON, a query that is not UTF-8,
a root path, another HTTP version. Quart then gives today's answer, refusal or not.

Installed by :func:`~.app.create_app` as ``app.asgi_app = http_lane(app, app.asgi_app)``: Quart's test client
goes through ``app.asgi_app`` too, so every test of these routes exercises the lane.

A long-poll that parks hands the run task a way to answer it (``_deliver_early``, hypercorn_speed fix 7): when
the batch that brings its envelope is published, the run task writes the reply into the socket itself, and the
handler, woken with the rest of the batch, sends the same response through Hypercorn without writing it again.
Why: trio runs each woken handler's whole reply, bookkeeping included, before the next one's, so the last of
10,000 replies left ~the sum of all of them after the batch (bench/results/r5-perf-poll.md).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import trio

from ..protocol import PROTOCOL_HEADER, PROTOCOL_VERSION
from ..protocol.strict_json import MAX_BODY_BYTES
from ..runtime import agent_ops
from ..runtime.clock import wall_seconds
from ..runtime.errors import RunError
from .agent_routes import poll_observation, submit_command, via_of
from .hooks import refusal
from .hypercorn_speed import EarlyReply, early_reply
from .replies import BadRequest, parse_json_body
from .state import WarrenApp

__all__ = ["http_lane"]

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]  # scope, receive, send (hypercorn.typing is stricter than needed)

_PROTO_NAME = PROTOCOL_HEADER.lower().encode("latin-1")
_PROTO_STAMP = (_PROTO_NAME, PROTOCOL_VERSION.encode("latin-1"))
_JSON = b"application/json"
# Quart's Response("", status=204) carries its default media type: the lane's 204 is byte for byte the same
_NO_CONTENT_HEADERS = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", b"0"), _PROTO_STAMP]


def _reply_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """A lane 200's headers (one function: an early reply and its handler's must be the same); a refusal's are
    :func:`~.hooks.refusal`'s."""
    return [(b"content-type", _JSON), (b"content-length", b"%d" % len(body)), _PROTO_STAMP]


def _deliver_early(writer: EarlyReply, body: bytes) -> bool:
    """A parked poll's 200, written by the run task as the batch is published (``Run.wait_observation``'s
    ``deliver``, ``body`` the envelope's bytes; hypercorn_speed fix 7): the very bytes its handler answers when it
    wakes (:func:`~.agent_routes.poll_observation`: ``orjson.dumps`` of the same envelope, ``_reply_headers``)."""
    return writer.write(200, _reply_headers(body), body)


def _plain(scope: dict[str, Any]) -> tuple[str, str, str, int] | None:
    """``(route, run_id, agent_id, body length)`` when ``scope`` is a hot route in its plain form, else None."""
    method = scope["method"]
    if method == "GET":
        route = "observations"
    elif method == "POST":
        route = "commands"
    else:
        return None
    parts = scope["path"].split("/")
    if (len(parts) != 7 or parts[1] != "v1" or parts[2] != "runs" or parts[4] != "agents" or parts[6] != route
            or not parts[3] or not parts[5] or parts[0]):
        return None
    if scope.get("root_path") or scope.get("http_version") != "1.1" or scope.get("_quart._preserve_context"):
        return None
    length: int | None = None
    json_type = False
    for name, value in scope["headers"]:
        if name == b"origin" or name == b"transfer-encoding":
            return None
        if name == _PROTO_NAME:
            if value.decode("latin-1").strip() != PROTOCOL_VERSION:
                return None
        elif name == b"content-length":
            if length is not None or not value.isdigit():
                return None
            length = int(value)
        elif name == b"content-type":
            if json_type:
                return None  # two of them: Quart decides
            media = value.split(b";", 1)[0].strip().lower()
            json_type = media == _JSON or media.endswith(b"+json")
            if not json_type:
                return None
    if route == "observations":
        return (route, parts[3], parts[5], 0) if not length else None
    if length is None or length > MAX_BODY_BYTES or not json_type:
        return None
    return route, parts[3], parts[5], length


def _args(scope: dict[str, Any]) -> dict[str, str] | None:
    """The query's parameters as Quart's ``request.args.get`` reads them (the first of each name), or None when
    the query is not UTF-8 (Quart answers that)."""
    try:
        query = scope["query_string"].decode()
    except UnicodeDecodeError:
        return None
    args: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True, errors="werkzeug.url_quote"):
        args.setdefault(name, value)
    return args


def _via(headers: list[tuple[bytes, bytes]]) -> agent_ops.Via:
    """The request's W3C ``traceparent`` and ``tracestate``, for agent_ops (read only when tracing is on)."""
    parent = state = None
    for name, value in headers:
        if name == b"traceparent":
            parent = value.decode("latin-1")
        elif name == b"tracestate":
            state = value.decode("latin-1")
    return via_of(parent, state)


class _Exchange:
    """One request on the lane: its body, gathered by the task that also notices the client leaving."""

    __slots__ = ("body", "complete", "gone", "scope")

    def __init__(self) -> None:
        self.body = bytearray()
        self.complete = trio.Event()
        self.gone = False
        self.scope = trio.CancelScope()

    async def listen(self, receive: Callable[[], Awaitable[Any]]) -> None:
        """Read the request's messages: the body's chunks, then a disconnect, which cancels the request (a long-poll
        must not hold its poll slot for a client that left, as Quart-Trio's own listener ensures)."""
        while True:
            msg = await receive()
            if msg["type"] == "http.request":
                self.body += msg.get("body", b"")
                if not msg.get("more_body", False):
                    self.complete.set()
            elif msg["type"] == "http.disconnect":
                self.gone = True
                self.scope.cancel()
                return


def http_lane(app: WarrenApp, inner: ASGIApp) -> ASGIApp:
    """``inner`` (Quart's ASGI app) with the hot agent routes answered in front of it (see the module docstring)."""
    state = app.warren
    metrics = state.metrics  # timed under Quart's route names: one series per route, whoever answered it
    poll_route, submit_route = agent_ops.ROUTES[("poll", "http")], agent_ops.ROUTES[("submit", "http")]

    async def read_json(exchange: _Exchange, headers: list[tuple[bytes, bytes]]) -> Any:
        timeout = app.config["BODY_TIMEOUT"]
        with trio.move_on_after(timeout if timeout is not None else float("inf")) as waited:
            await exchange.complete.wait()
        if waited.cancelled_caught:
            raise BadRequest(408, f"the request body did not arrive within {state.config.body_timeout_s:g} s; "
                             "send the whole body promptly (with a Content-Length that matches it)")
        ctype = next((v.decode("latin-1") for n, v in headers if n == b"content-type"), None)
        mimetype = ctype.split(";", 1)[0].strip().lower() if ctype is not None else None
        return parse_json_body(bytes(exchange.body), mimetype, ctype, required=True)

    async def answer(route: str, run_id: str, agent_id: str, args: Mapping[str, str], exchange: _Exchange,
                     headers: list[tuple[bytes, bytes]], send: Callable[[Any], Awaitable[None]],
                     ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        via = _via(headers) if state.tracer.enabled else agent_ops.HTTP
        try:
            if route == "observations":
                writer = early_reply(send)
                deliver = None if writer is None else functools.partial(_deliver_early, writer)
                body = await poll_observation(state, run_id, agent_id, args, deliver, via=via)
            else:
                body = await submit_command(state, run_id, agent_id, args, lambda: read_json(exchange, headers),
                                            via=via)
        except (RunError, BadRequest) as exc:
            return refusal(exc)
        except Exception as exc:  # noqa: BLE001 - what Quart's last error handler answers, the lane answers
            app.logger.exception("unexpected error")
            return refusal(exc)
        if body is None:
            return 204, _NO_CONTENT_HEADERS, b""
        return 200, _reply_headers(body), body

    async def lane(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                   send: Callable[[Any], Awaitable[None]]) -> None:
        hot = _plain(scope) if scope["type"] == "http" else None
        args = _args(scope) if hot is not None else None
        if hot is None or args is None:
            await inner(scope, receive, send)
            return
        route, run_id, agent_id, _ = hot
        began = wall_seconds()
        exchange = _Exchange()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(exchange.listen, receive)
            with exchange.scope:
                status, headers, body = await answer(route, run_id, agent_id, args, exchange, scope["headers"], send)
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body, "more_body": False})
            nursery.cancel_scope.cancel()
        metrics.request(poll_route if route == "observations" else submit_route, "http", wall_seconds() - began)

    return lane
