"""The agent WebSocket's server: ``WS /v1/agent`` served straight from Hypercorn's ASGI calls, in front of Quart.

Why: behind Quart-Trio every incoming frame took one more task hop (its ``handle_messages`` task reads
Hypercorn's queue and refills a channel of its own that the handler reads) and every frame sent went through
two wrappers, per message, for nothing this endpoint uses (no request context, no hooks after the handshake).
At one agent, where every decision is a round trip, that was about a tenth of the server's time per decision
(bench/results/r4-perf-wire.md). The lane is installed as ``app.asgi_app = ws_lane(app, app.asgi_app)``, so
Hypercorn and Quart's test client (which also calls ``app.asgi_app``) both reach it; everything that is not a
websocket on ``/v1/agent`` goes to Quart unchanged.

It is the only server of this endpoint (Quart has no route for it; ``GET /v1`` lists it from :data:`PATH`).
At the handshake it does what Quart does for the app's other WebSockets: the ``Origin`` check
(``hooks.foreign_origin``: a page of another site gets the same 403 problem+json as an HTTP request, through the
ASGI ``websocket.http.response`` extension), a foreign ``X-Warren-Protocol`` closed with 1002 before the
handshake, the protocol header on the accepted handshake. After it, the JSON-RPC session
(:class:`.agent_ws.AgentSession`) reads and writes frames through an :class:`AsgiPeer`, and each method calls its
agent operation (:mod:`warren_sim.runtime.agent_ops`). An unexpected error is logged as the app's error handler
logs it and the connection closed with 1000, as Quart-Trio closes it. A scope with a ``root_path`` (the app
mounted under a prefix, which ``warren serve`` never does) is not this endpoint's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from werkzeug.datastructures import Headers

from ..protocol import PROTOCOL_HEADER, PROTOCOL_VERSION
from .agent_ws import AgentSession, Dropped, refused_protocol
from .hooks import foreign_origin
from .replies import problem_reply
from .state import WarrenApp

__all__ = ["PATH", "ws_lane"]

PATH = "/v1/agent"
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[..., Any]  # (scope, receive, send) -> awaitable; Quart's and Hypercorn's own types differ


class AsgiPeer:
    """The ASGI ``receive``/``send`` of one accepted connection as an :class:`~.agent_ws.Peer`."""

    def __init__(self, receive: Receive, send: Send, first: MutableMapping[str, Any] | None = None) -> None:
        self._receive, self._send = receive, send
        self._first = first  # an event read before the handshake (a test client sends no websocket.connect)
        self.closed = False

    async def receive(self) -> str | bytes | None:
        while True:
            event, self._first = self._first or await self._receive(), None
            kind = event["type"]
            if kind == "websocket.receive":
                return event.get("bytes") or event.get("text") or ""  # as Quart-Trio reads a message
            if kind == "websocket.disconnect":
                return None

    async def send(self, text: str) -> None:
        await self._send({"type": "websocket.send", "text": text})

    async def close(self, code: int, reason: str) -> None:
        self.closed = True
        await self._send({"type": "websocket.close", "code": code, "reason": reason})


def ws_lane(app: WarrenApp, inner: ASGIApp) -> ASGIApp:
    """An ASGI app that serves ``WS /v1/agent`` itself and hands every other scope to ``inner`` (Quart's)."""

    async def lane(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket" or scope["path"] != PATH or scope.get("root_path"):
            await inner(scope, receive, send)
            return
        await _agent_socket(app, scope, receive, send)

    return lane


async def _agent_socket(app: WarrenApp, scope: Scope, receive: Receive, send: Send) -> None:
    # Hypercorn sends websocket.connect first; Quart-Trio's test client sends none and goes straight to the
    # messages (Quart reads neither): a first event that is a message is kept for the session.
    event = await receive()
    if event["type"] == "websocket.disconnect":
        return
    first = None if event["type"] == "websocket.connect" else event
    state = app.warren
    headers = Headers([(k.decode("latin-1").title(), v.decode("latin-1")) for k, v in scope["headers"]])
    refused = foreign_origin(headers, _host_url(scope, headers), state.config.allow_origins)
    if refused is not None:
        await _refuse(scope, send, 403, refused)
        return
    why = refused_protocol(headers)
    if why is not None:
        await send({"type": "websocket.close", "code": 1002, "reason": why})
        return
    await send({"type": "websocket.accept", "subprotocol": None,
                "headers": [(PROTOCOL_HEADER.lower().encode(), PROTOCOL_VERSION.encode())]})
    peer = AsgiPeer(receive, send, first)
    session = AgentSession(state.runs(), state.config.heartbeat_s, peer)
    try:
        try:
            await session.serve()
        except* Dropped:  # raised in the session's nursery: the heartbeat closed the connection (1001)
            pass
    except Exception:
        app.logger.exception("unexpected error")
        if not peer.closed:
            await send({"type": "websocket.close", "code": 1000})


def _host_url(scope: Scope, headers: Headers) -> str:
    """The connection's own URL as Quart's ``websocket.host_url`` gives it (``ws://host/``)."""
    scheme = scope.get("scheme", "ws")
    host = headers.get("Host")
    if not host:
        server = scope.get("server")
        host = f"{server[0]}:{server[1]}" if server else ""
    default = ":443" if scheme in ("wss", "https") else ":80"
    if host.endswith(default):
        host = host[:-len(default)]
    return f"{scheme}://{host}/"


async def _refuse(scope: Scope, send: Send, status: int, detail: str) -> None:
    """An HTTP problem reply instead of the handshake (the ``websocket.http.response`` extension), as Quart
    sends a ``before_websocket`` hook's response; a plain close where the server lacks the extension."""
    if "websocket.http.response" not in (scope.get("extensions") or {}):
        await send({"type": "websocket.close", "code": 1000})
        return
    response = problem_reply(status, detail)
    body = await response.get_data()
    await send({"type": "websocket.http.response.start", "status": response.status_code,
                "headers": [(k.lower().encode(), v.encode()) for k, v in response.headers.items()]})
    await send({"type": "websocket.http.response.body", "body": body, "more_body": False})
