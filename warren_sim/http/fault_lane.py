"""Seeded faults on the HTTP wire (docs/faults.md): the outermost ASGI layer, in front of the lanes and Quart.

Which request meets which fault is decided by :func:`warren_sim.runtime.agent_ops.fault` (a pure function of the
seed, the run, the agent, the request's kind and its index: :mod:`warren_sim.runtime.faults`); this layer only
does to the wire what the fault says, before the request reaches the agent operations or after they answered:

- ``reset``: the connection is closed before anything of the request is read (nothing happened);
- ``unavailable``: 503 with ``Retry-After``, nothing processed;
- ``expire``: the agent's lease is expired, then the request is served (its 403 says to claim again);
- ``restart``: every live run is dropped from memory and restored from its journal, then the request is served;
- ``redeliver`` (a poll): the envelope the agent was last given is given again, at once;
- ``delay``: the reply is held back by the fault's delay, on the process clock (``--rate`` warps it);
- ``lost_reply``: the request is served (a command judged and journaled, a claim granted) and the connection is
  closed instead of the reply.

A connection is closed by shutting its socket down when it is Hypercorn's plain TCP connection (the client
sees it end with no byte of the reply); elsewhere (Quart's test client) by a reply cut short after its head.
Bulk requests (``POST /v1/runs/{run}/claim`` and ``/observations``) name no single agent and meet no fault.
With no run faulted, a request costs this layer one dict lookup: faults off cost nothing.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import trio

from ..protocol import PROTOCOL_HEADER, PROTOCOL_VERSION
from ..runtime import agent_ops
from ..runtime.errors import RunError
from ..runtime.faults import Fault
from .hooks import refusal
from .hypercorn_speed import early_reply
from .state import WarrenApp

__all__ = ["fault_lane"]

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]

#: (method, last path segment) -> request kind; receipts are ``GET .../commands/{command_id}``
_KINDS = {("POST", "claim"): "claim", ("POST", "release"): "release", ("GET", "briefing"): "briefing",
          ("GET", "observations"): "poll", ("POST", "commands"): "submit"}


def _agent_request(scope: dict[str, Any]) -> tuple[str, str, str] | None:
    """``(run_id, agent_id, kind)`` of a per-agent request, else None."""
    parts = scope["path"].split("/")
    if len(parts) < 7 or parts[1] != "v1" or parts[2] != "runs" or parts[4] != "agents":
        return None
    method = scope["method"]
    if len(parts) == 7:
        kind = _KINDS.get((method, parts[6]))
    elif len(parts) == 8 and method == "GET" and parts[6] == "commands":
        kind = "receipt"
    else:
        kind = None
    return None if kind is None else (parts[3], parts[5], kind)


async def _close(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                 send: Callable[[Any], Awaitable[None]]) -> None:
    """Lose the connection: shut Hypercorn's socket down, or (no socket at hand) cut the reply after its head."""
    writer = early_reply(send)
    if writer is not None and writer.shutdown():
        with trio.move_on_after(5):  # Hypercorn notices the end and tells the app: then it sends nothing more
            while (await receive())["type"] != "http.disconnect":
                pass
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"1")]})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def fault_lane(app: WarrenApp, inner: ASGIApp) -> ASGIApp:
    """``inner`` with the faults of :mod:`warren_sim.runtime.faults` done to the per-agent HTTP requests."""
    state = app.warren
    last_given: dict[tuple[str, str], bytes] = {}  # the latest envelope each faulted agent was given (redeliver)

    async def lane(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                   send: Callable[[Any], Awaitable[None]]) -> None:
        manager = state.manager
        if scope["type"] != "http" or manager is None or not manager.faults.plans:
            await inner(scope, receive, send)
            return
        hit = _agent_request(scope)
        if hit is None or hit[0] not in manager.faults.plans:
            await inner(scope, receive, send)
            return
        run_id, agent_id, kind = hit
        retriable = kind != "claim" or agent_ops.claim_retriable(manager, run_id, agent_id, _arg(scope, "lease"),
                                                                 _arg(scope, "proposed_lease"))
        fault = agent_ops.fault(manager, run_id, agent_id, kind, retriable=retriable)
        key = (run_id, agent_id)
        if fault is None:
            await inner(scope, receive, _remembering(send, last_given, key) if kind == "poll" else send)
            return
        what = fault.fault
        if what == "reset":
            await _close(scope, receive, send)
            return
        if what == "unavailable":
            rate = state.config.rate
            wait = math.ceil(1.0 / rate) if 1.0 / rate >= 0.5 else 0  # one clock second, in wall seconds
            await _reply(send, refusal(RunError(503, f"the server is unavailable (an injected fault: unavailable, "
                                                f"{kind} #{fault.index} of {agent_id}); retry after the "
                                                "Retry-After seconds with the same request", retry_after=wait)))
            return
        if what == "redeliver":
            body = last_given.get(key)
            if body is not None:
                headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)),
                           (PROTOCOL_HEADER.lower().encode(), PROTOCOL_VERSION.encode())]
                await _reply(send, (200, headers, body))
                return
        if what == "lost_reply":
            await inner(scope, receive, _swallowing(send))
            await _close(scope, receive, send)
            return
        if what == "delay":
            send = _delayed(send, fault)
        await inner(scope, receive, _remembering(send, last_given, key) if kind == "poll" else send)

    return lane


def _arg(scope: dict[str, Any], name: str) -> str | None:
    """A claim's ``?lease=`` or ``?proposed_lease=`` (read only for a faulted run's claims)."""
    found = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name)
    return found[0] if found else None


async def _reply(send: Callable[[Any], Awaitable[None]], parts: tuple[int, list[tuple[bytes, bytes]], bytes]) -> None:
    status, headers, body = parts
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _remembering(send: Callable[[Any], Awaitable[None]], given: dict[tuple[str, str], bytes],
                 key: tuple[str, str]) -> Callable[[Any], Awaitable[None]]:
    """``send`` that keeps the body of a 200 poll reply: the envelope a ``redeliver`` gives again."""
    status = [0]

    async def remember(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]
        elif message["type"] == "http.response.body" and status[0] == 200 and not message.get("more_body"):
            given[key] = bytes(message.get("body", b""))
        await send(message)

    return remember


def _swallowing(send: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
    """A ``send`` that keeps the reply from the client (``lost_reply``): the request was served, its reply lost."""

    async def swallow(message: dict[str, Any]) -> None:
        return None

    return swallow


def _delayed(send: Callable[[Any], Awaitable[None]], fault: Fault) -> Callable[[Any], Awaitable[None]]:
    """A ``send`` that holds the reply's head back by the fault's delay (clock seconds)."""

    async def later(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            await trio.sleep(fault.delay_s)
        await send(message)

    return later

