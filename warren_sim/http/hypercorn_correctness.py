"""Correctness fixes for Hypercorn 0.18's trio worker: connections close when they should, one writer each.

Installed by :func:`warren_sim.http.hypercorn_fixes.apply`, which first checks that the installed Hypercorn is
the one these were written for (they replace methods of its private classes). Each fix names the test that
fails without it; rerun those on any upgrade, then widen ``hypercorn_fixes.WRITTEN_FOR``.

Fixes 1 and 2 have one cause: Hypercorn does connection-level work (re-arming the idle timer, closing the
socket) from inside the ASGI app's task, and Quart-Trio cancels that task's nursery as soon as Hypercorn
reports the stream closed, which happens in the same breath.

1. Idle keep-alive connections never closed after their first request. After each response Hypercorn
   re-arms the idle timer with ``await nursery.start(...)`` (``TrioSingleTask.restart``); the caller is
   already cancelled, so trio's ``TaskStatus.started()`` leaves the timer task in the cancelled caller
   instead of moving it to the connection's nursery, and the timer dies at once. Measured: still open
   after 20 s with ``keep_alive_timeout = 5``, a slot any client can pin with one request. (Sometimes the
   restart does not even get that far: it first awaits a lock, and that checkpoint raises ``Cancelled``.)
   The fix spawns the timer with ``start_soon`` straight into the connection's nursery and keeps its
   cancel scope, without any checkpoint (otherwise the same: one timer at a time, a restart cancels the
   previous one, stop cancels it). Fails without it:
   ``tests/test_hygiene_e2e.py::test_rate_10_long_poll_of_60s_works_while_idle_connections_close``.
2. A connection answered before its request body was complete (408 after ``BODY_TIMEOUT``, 413, a 401 on
   a POST...) must be closed, and Hypercorn tries: ``protocol_send(Closed())`` calls ``send_eof()`` then
   ``aclose()``; in the cancelled app task ``send_eof`` raises ``Cancelled`` and the socket stays open with
   no timer at all (measured: still open after 40 s, so a slow-body client pins it for good). The fix
   shields the close (two non-blocking socket calls); the rest of the handling is unchanged. Fails without it:
   ``tests/test_hygiene_e2e.py::test_slow_body_gets_408_and_is_closed_within_the_body_timeout``.
3. A peer that stops reading pins its connection forever: Hypercorn writes with ``send_all`` in a shielded
   scope, so a WebSocket handler's or an SSE body's own timeout cannot interrupt a write into a full socket
   buffer, and a spectator that never reads kept its slot (and the server its queued bytes) for good
   (still ESTABLISHED after 90 s; with ``--max-spectators 3`` three silent sockets locked every later
   spectator out). The fix bounds each write: a write not taken within ``send_timeout``
   (``warren serve --send-timeout``, on the process clock) aborts the connection, which ends the handler
   and frees whatever it held. Fails without it: ``tests/test_durability.py::test_silent_spectators_lose_their_slot``.
4. Two tasks wrote one socket at once: Hypercorn serializes data writes with the connection's send lock, but
   closing the connection (``send_eof``, which holds trio's send-conflict detector across a checkpoint, then
   ``aclose``) did not take it. A peer going away while a stream handler sent frame after frame (a prompt
   spectator reconnecting on an unpaced run) made the handler's next write raise ``trio.BusyResourceError``,
   logged as a traceback through ``stream_routes.py``. The fix makes the close take the send lock: one writer
   per connection. Fails without it: ``tests/test_stream_one_sender.py``, when the frames go through
   ``send_all`` (with speed fix 5 off: fix 5 writes a frame straight into a socket buffer with room, so only a
   full buffer, which that test's flood seldom reaches, still meets ``send_all`` and this collision).
8. (Numbered after the speed fixes 5-7 of ``hypercorn_speed``.) A connection answered before its request body
   was complete is closed (fix 2), but its response did not say so: no ``Connection: close``, so a keep-alive
   client sent its next request into a socket the server was closing, and met "Server disconnected without
   sending a response" when the close won the race (a browser-guard 403 on a POST, a protocol-header 409, a 413
   announced by Content-Length: the refusal comes from a hook, before the body is read). The fix adds
   ``Connection: close`` to a response that starts while the request's body is still coming (h11's
   ``their_state`` is ``SEND_BODY``): h11 then ends the connection after the response, and the client opens a
   new one instead of reusing it. Fails without it:
   ``tests/test_hygiene_e2e.py::test_a_refusal_before_the_body_says_connection_close``.

Checked on this tree by undoing each fix in turn: each named test fails without its fix (fix 4's with fix 5 off).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import h11
import trio
from hypercorn.events import Closed, RawData
from hypercorn.protocol import h11 as h11_protocol
from hypercorn.trio import tcp_server, worker_context

__all__ = ["apply", "close_if_body_pending", "protocol_send", "send_bounded"]

_send_timeout = [10.0]  # seconds of the process clock a single write may take before the connection is aborted


async def _restart(self: Any, task_group: Any, action: Callable[[], Awaitable[None]]) -> None:
    """Fix 1 (``TrioSingleTask.restart``). No checkpoint at all (the original awaited a lock first, and a
    checkpoint in a cancelled caller raises before the timer exists): with no await inside, restart and stop
    are atomic, so no lock is needed."""
    if self._handle is not None:
        self._handle.cancel()
    scope = trio.CancelScope()

    async def timer() -> None:
        with scope:
            await action()

    task_group._nursery.start_soon(timer)
    self._handle = scope


async def _stop(self: Any) -> None:
    """Fix 1 (``TrioSingleTask.stop``): cancel the timer :func:`_restart` started, without a checkpoint."""
    if self._handle is not None:
        self._handle.cancel()
    self._handle = None


_original_protocol_send = tcp_server.TCPServer.protocol_send


async def protocol_send(self: Any, event: Any) -> None:
    """``TCPServer.protocol_send`` with fixes 2, 3 and 4 (the speed fixes wrap it: ``hypercorn_speed``)."""
    if isinstance(event, Closed):
        with trio.CancelScope(shield=True):  # fix 2: a cancelled app task still closes the socket
            if self.send_lock.statistics().owner is trio.lowlevel.current_task():
                await self._close()  # fix 3's abort, inside a write: the socket is this task's already
            else:
                # Fix 4: the close is a write too (send_eof): it waits for the write in progress, which is
                # itself bounded by fix 3, so the handler's next frame cannot collide with it.
                async with self.send_lock:
                    await self._close()
        await self.protocol.handle(Closed())
    elif isinstance(event, RawData):
        async with self.send_lock:
            await send_bounded(self, memoryview(event.data))
    else:
        await _original_protocol_send(self, event)


async def send_bounded(self: Any, data: memoryview) -> None:
    """Fix 3: ``send_all`` shielded as Hypercorn does, but bounded by ``send_timeout``; a peer that does not
    read (or is gone) gets its connection aborted. The caller holds the connection's send lock."""
    stuck = False
    try:
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + _send_timeout[0]
            await self.stream.send_all(data)
        stuck = scope.cancelled_caught
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        stuck = True
    if stuck:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(self.stream)
        await self.protocol.handle(Closed())


def close_if_body_pending(conn: h11.Connection, event: Any) -> Any:
    """Fix 8: ``event`` with ``Connection: close`` added when it is a response that starts before the request's
    body is complete (the connection will be closed after it: fix 2); any other event as it is."""
    if (isinstance(event, h11.Response) and conn.their_state is h11.SEND_BODY
            and not any(name == b"connection" for name, _ in event.headers)):
        return h11.Response(status_code=event.status_code, headers=[*event.headers, (b"connection", b"close")],
                            reason=event.reason)
    return event


_original_send_h11_event = h11_protocol.H11Protocol._send_h11_event


async def _send_h11_event(self: Any, event: Any) -> None:
    """Fix 8 on Hypercorn's own writes (the lean writes of ``hypercorn_speed`` call the same function)."""
    await _original_send_h11_event(self, close_if_body_pending(self.connection, event))


def apply(send_timeout: float = 10.0) -> None:
    """Install fixes 1-4 and 8 (idempotent); ``send_timeout`` bounds every write (fix 3)."""
    _send_timeout[0] = send_timeout
    h11_protocol.H11Protocol._send_h11_event = _send_h11_event  # type: ignore[method-assign]
    worker_context.TrioSingleTask.restart = _restart  # type: ignore[method-assign]
    worker_context.TrioSingleTask.stop = _stop  # type: ignore[method-assign]
    tcp_server.TCPServer.protocol_send = protocol_send  # type: ignore[method-assign]
