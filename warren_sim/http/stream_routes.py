"""Spectator routes: a run's journal live over WebSocket and Server-Sent Events.

``WS /v1/runs/{run}/stream?since=<cursor>`` sends each journal record with ``cursor > since`` as one
text frame (the record itself: ``{"cursor": n, "kind": ..., ...}``), then the live ones as they are
flushed. A subscriber that falls too far behind gets ``{"kind": "lagged", "cursor": n}`` and close
code 1013 (try again later); ``?since=n`` resumes exactly. On an ended run the stream sends the
records, ``{"kind": "terminal", "cursor": last, "status": ...}`` and closes with 1000. An unknown
run or a bad ``since`` is refused before the handshake completes (a problem+json HTTP response).

``GET /v1/runs/{run}/events`` carries the same frames as SSE: ``id:`` = cursor, ``event:`` = kind,
``data:`` = the record as JSON. ``Last-Event-ID`` (what an ``EventSource`` sends when it reconnects)
wins over ``?since=``. Control frames (``lagged``, ``terminal``, ``gap``) have no ``id:`` line, so
they never move the reader's resume point. A comment line keeps idle connections alive. A reconnect
(``Last-Event-ID``) to an ended run that has nothing left to send gets 204, which tells an
``EventSource`` to stop reconnecting. The queue, lag and gap rules are in
:mod:`warren_sim.runtime.spectators`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import trio
from quart import Response, request, websocket

from ..protocol import PROBLEM_CONTENT_TYPE, PROTOCOL_HEADER, PROTOCOL_VERSION
from ..protocol.models import problem
from ..runtime.api import RunAPI
from ..runtime.errors import RunError
from ..runtime.spectators import CONTROL_KINDS, LAGGED, TERMINAL, Subscription
from ..runtime.stored import journal_of
from .state import WarrenApp

CLOSE_NORMAL, CLOSE_TRY_AGAIN_LATER = 1000, 1013
MAX_CURSOR = 2**53 - 1
SSE_CHUNK_FRAMES = 256  # frames ready at once are written together, up to this many


def parse_cursor(raw: str | None, name: str) -> int:
    """``since`` / ``Last-Event-ID`` -> a cursor >= -1 (None means -1: everything)."""
    if raw is None:
        return -1
    try:
        value = int(raw.strip())
    except ValueError:
        raise RunError(400, f"{name} must be an integer cursor (-1 for everything, or the cursor of the last "
                       f"record you have), got {raw!r}") from None
    if not -1 <= value <= MAX_CURSOR:
        raise RunError(400, f"{name} must be between -1 (everything) and 2^53-1, got {value}")
    return value


def dumps(frame: dict[str, Any]) -> str:
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":"))


def sse_event(frame: dict[str, Any]) -> bytes:
    head = "" if frame["kind"] in CONTROL_KINDS else f"id: {frame['cursor']}\n"
    # dumps never emits a raw newline (they are escaped in JSON strings), so one data: line suffices
    return f"{head}event: {frame['kind']}\ndata: {dumps(frame)}\n\n".encode()


def register_stream_routes(app: WarrenApp) -> None:
    """Add the spectator stream routes (WS and SSE) to ``app``."""
    config, runs = app.warren.config, app.warren.runs

    def problem_response(status: int, detail: str) -> Response:
        body = json.dumps(problem(status, detail), ensure_ascii=False)
        return Response(body, status=status, content_type=PROBLEM_CONTENT_TYPE,
                        headers={PROTOCOL_HEADER: PROTOCOL_VERSION})

    @app.websocket("/v1/runs/<run_id>/stream")
    async def stream(run_id: str) -> Response | None:
        sent = websocket.headers.get(PROTOCOL_HEADER)
        if sent is not None and sent.strip() != PROTOCOL_VERSION:
            return problem_response(409, f"this server speaks {PROTOCOL_VERSION}, the request's {PROTOCOL_HEADER} says "
                                    f"{sent!r}; send {PROTOCOL_HEADER}: {PROTOCOL_VERSION} or leave the header out")
        with contextlib.ExitStack() as slot:
            try:
                run = runs().get(run_id)
                since = parse_cursor(websocket.args.get("since"), "query parameter since")
                slot.enter_context(run.spectator_slot())  # 429 when the run has max_spectators already
            except RunError as exc:
                return _with_retry_after(problem_response(exc.status, exc.detail), exc)
            journal = await journal_of(run)  # an ended run's file is parsed in a worker thread
            await websocket.accept(headers={PROTOCOL_HEADER: PROTOCOL_VERSION})
            async with trio.open_nursery() as nursery:
                # spectators have nothing to say; reading keeps a chatty client from stalling the
                # server's view of its disconnect (Quart buffers only a few incoming messages)
                nursery.start_soon(_discard_incoming)
                # A reader that takes nothing for --send-timeout is cut where the bytes are written
                # (http/hypercorn_correctness.py, fix 3): the send below then ends and the slot is freed.
                with Subscription(run, since, config.spectator_queue, journal) as sub:
                    while (frame := await sub.next_frame()) is not None:
                        await websocket.send(dumps(frame))
                        if frame["kind"] == LAGGED:
                            await websocket.close(CLOSE_TRY_AGAIN_LATER,
                                                  f"lagged: reconnect with ?since={frame['cursor']}")
                            break
                        if frame["kind"] == TERMINAL:
                            await websocket.close(CLOSE_NORMAL, f"run {frame['status']}")
                            break
                nursery.cancel_scope.cancel()
        return None

    @app.route("/v1/runs/<run_id>/events", methods=["GET"])
    async def events(run_id: str) -> Response:
        run = runs().get(run_id)
        header = request.headers.get("Last-Event-ID")
        journal = None  # an ended run's file is parsed (in a worker thread) once the body holds its slot
        if header is not None and header.strip() != "":
            since = parse_cursor(header, "the Last-Event-ID header")
            journal = await journal_of(run)
            if journal.closed and since == journal.flushed - 1:
                return Response("", status=204)  # an EventSource stops reconnecting on 204
        else:
            since = parse_cursor(request.args.get("since"), "query parameter since")
        with run.spectator_slot():  # 429 now when the run has max_spectators already (held by the body)
            pass
        body = _sse_body(run, since, journal, config.spectator_queue, config.sse_keepalive_s,
                         config.send_timeout_s * config.rate, app.nursery)
        response = Response(body, content_type="text/event-stream")
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Accel-Buffering"] = "no"
        response.timeout = None
        return response


async def _discard_incoming() -> None:
    while True:
        await websocket.receive()


def _with_retry_after(response: Response, exc: RunError) -> Response:
    if exc.retry_after is not None:
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


async def _watch_sse_send(sending: list[float | None], timeout: float, slot: contextlib.ExitStack,
                          sub: Subscription, done: trio.CancelScope) -> None:
    """Free the slot of an SSE reader whose last chunk was not taken within ``timeout`` (it stopped reading).

    The body generator is suspended in its ``yield`` while the server writes the chunk, so it cannot time
    itself out; this task, in the app's nursery, does it for it.
    """
    with done:
        while True:
            await trio.sleep(timeout / 4)
            since = sending[0]
            if since is not None and trio.current_time() - since > timeout:
                sub.close()
                slot.close()
                return


async def _sse_body(run: RunAPI, since: int, journal: Any, queue_size: int, keepalive_s: float,
                    send_timeout: float, nursery: trio.Nursery) -> AsyncIterator[bytes]:
    slot = contextlib.ExitStack()
    try:
        slot.enter_context(run.spectator_slot())
    except RunError as exc:  # the slots filled up between the route's check and the first byte
        yield f"event: error\ndata: {dumps(problem(exc.status, exc.detail))}\n\n".encode()
        return
    try:  # the slot is held from the first byte on; an ended run's file is parsed off the event loop
        sub = Subscription(run, since, queue_size, journal if journal is not None else await journal_of(run))
    except BaseException:
        slot.close()
        raise
    sending: list[float | None] = [None]  # since when the last chunk waits to be taken (None: taken)
    watchdog = trio.CancelScope()
    nursery.start_soon(_watch_sse_send, sending, send_timeout, slot, sub, watchdog)
    try:
        async for chunk in _sse_frames(sub, keepalive_s):
            sending[0] = trio.current_time()
            yield chunk
            sending[0] = None
    finally:
        watchdog.cancel()
        slot.close()
        sub.close()


async def _sse_frames(sub: Subscription, keepalive_s: float) -> AsyncIterator[bytes]:
    yield b"retry: 1000\n\n"
    while True:
        frame = None
        with trio.move_on_after(keepalive_s):
            frame = await sub.next_frame()
            if frame is None:
                return
        if frame is None:
            yield b": keep-alive\n\n"
            continue
        # what is ready now goes out in one chunk (a catch-up of thousands of records is a few writes)
        chunk = [sse_event(frame)]
        while frame["kind"] not in (LAGGED, TERMINAL) and len(chunk) < SSE_CHUNK_FRAMES:
            nxt = sub.poll()
            if nxt is None:
                break
            frame = nxt
            chunk.append(sse_event(frame))
        yield b"".join(chunk)
        if frame["kind"] in (LAGGED, TERMINAL):
            return
