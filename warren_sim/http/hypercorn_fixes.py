"""Fixes for Hypercorn 0.18's trio worker, so that connections close when they should.

Fixes 1 and 2 have one cause: Hypercorn does connection-level work (re-arming the idle timer, closing the
socket) from inside the ASGI app's task, and Quart-Trio cancels that task's nursery as soon as Hypercorn
reports the stream closed, which happens in the same breath. Both were found by
``tests/test_hygiene_e2e.py``, which fails without them.

1. Idle keep-alive connections never closed after their first request. After each response Hypercorn
   re-arms the idle timer with ``await nursery.start(...)`` (``TrioSingleTask.restart``); the caller is
   already cancelled, so trio's ``TaskStatus.started()`` leaves the timer task in the cancelled caller
   instead of moving it to the connection's nursery, and the timer dies at once. Measured: still open
   after 20 s with ``keep_alive_timeout = 5``, a slot any client can pin with one request. (Sometimes the
   restart does not even get that far: it first awaits a lock, and that checkpoint raises ``Cancelled``.)
   The fix spawns the timer with ``start_soon`` straight into the connection's nursery and keeps its
   cancel scope, without any checkpoint (otherwise the same: one timer at a time, a restart cancels the
   previous one, stop cancels it).
2. A connection answered before its request body was complete (408 after ``BODY_TIMEOUT``, 413, a 401 on
   a POST...) must be closed, and Hypercorn tries: ``protocol_send(Closed())`` calls ``send_eof()`` then
   ``aclose()``; in the cancelled app task ``send_eof`` raises ``Cancelled`` and the socket stays open with
   no timer at all (measured: still open after 40 s, so a slow-body client pins it for good). The fix
   shields the close (two non-blocking socket calls); the rest of the handling is unchanged.

3. A peer that stops reading pins its connection forever: Hypercorn writes with ``send_all`` in a shielded
   scope, so a WebSocket handler's or an SSE body's own timeout cannot interrupt a write into a full socket
   buffer, and a spectator that never reads kept its slot (and the server its queued bytes) for good
   (issue 13: still ESTABLISHED after 90 s; with ``--max-spectators 3`` three silent sockets locked
   every later spectator out). The fix bounds each write: a write not taken within ``send_timeout``
   (``warren serve --send-timeout``, on the process clock) aborts the connection, which ends the handler
   and frees whatever it held.
4. Two tasks wrote one socket at once: Hypercorn serializes data writes with the connection's send lock, but
   closing the connection (``send_eof``, which holds trio's send-conflict detector across a checkpoint, then
   ``aclose``) did not take it. A peer going away while a stream handler sent frame after frame (a prompt
   spectator reconnecting on an unpaced run) made the handler's next write raise ``trio.BusyResourceError``,
   logged as a traceback through ``stream_routes.py``. The fix makes the close take the send lock: one writer
   per connection (``tests/test_stream_one_sender.py`` reproduces the collision on a real server).

5. Cost, not correctness: each frame written paid a scheduling round for the free send lock, a cancel scope
   (fix 3's bound) and two checkpoints in trio's ``send_all``. A frame is now written straight into the
   socket when its buffer has room (it cannot block, so it needs no bound), still under the send lock; only
   what the socket does not take goes through fix 3's bounded ``send_all``.

6. A cost, not a bug: Hypercorn wrote every HTTP/1.1 response in three writes (the head, the body, and the empty
   end of a fixed-length body), each a trip through the send lock, a cancel scope and ``send_all``: half of the
   server's work on a small JSON reply (bench/results/r4-perf-http.md). A response with a ``Content-Length``
   now leaves in one write (its head waits for its body, which the app sends next), and an empty end is not
   written at all. Streamed responses (no ``Content-Length``: SSE) keep their head written at once.

7. A cost, not a bug: a long-poll's reply written before its handler runs (:class:`EarlyReply`). When a batch
   wakes 10,000 parked ``GET .../observations`` handlers, trio runs each one to its next checkpoint before the
   next starts, and each one's step is its whole reply: the build, the write, then Hypercorn's and h11's
   bookkeeping (~0.3-0.5 ms on this machine), so the last reply left ~the whole sum after the batch
   (bench/results/r5-perf-poll.md). With fix 7 the run task writes each parked poll's reply into its socket as it
   publishes the batch (:meth:`warren_sim.runtime.run.Run._deliver`), with only what the socket takes at once
   (non-blocking; the rest is the handler's to write); the handler then wakes, answers the same bytes as it
   always did, and fix 6's ``_stream_send`` runs them through h11 to keep the connection's state machine where
   it would have been (keep-alive, the next request), writing nothing already written. The head is h11's format
   with the headers Hypercorn adds (date, server, ``Connection: close`` past ``keep_alive_max_requests``);
   h11's own bytes are compared with it when the handler passes them, and a difference closes the connection.
   Declined (the handler writes, as before) whenever anything is not plain: a stream that is not Hypercorn's
   HTTP/1.1 over a plain TCP socket, a write in progress, a connection h11 will not keep alive, a held head.

Applied by :func:`warren_sim.http.server.start_server` (fix 6 and 7 by :func:`apply_lean_writes`; fix 7 needs
fix 6, and is only used by :func:`early_reply`'s callers); idempotent. Recheck on any Hypercorn upgrade.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from itertools import chain
from typing import Any

import h11
import trio
from hypercorn.events import Closed, RawData
from hypercorn.protocol import events as stream_events
from hypercorn.protocol import h11 as h11_protocol
from hypercorn.protocol.http_stream import ASGIHTTPState, HTTPStream
from hypercorn.trio import tcp_server, worker_context
from hypercorn.utils import build_and_validate_headers

from ..runtime.clock import unix_now

__all__ = ["EarlyReply", "apply", "apply_lean_writes", "early_reply", "early_statistics"]

_send_timeout = [10.0]  # seconds of the process clock a single write may take before the connection is aborted


async def _restart(self: Any, task_group: Any, action: Callable[[], Awaitable[None]]) -> None:
    # No checkpoint at all (the original awaited a lock first, and a checkpoint in a cancelled caller raises
    # before the timer exists): with no await inside, restart and stop are atomic, so no lock is needed.
    if self._handle is not None:
        self._handle.cancel()
    scope = trio.CancelScope()

    async def timer() -> None:
        with scope:
            await action()

    task_group._nursery.start_soon(timer)
    self._handle = scope


async def _stop(self: Any) -> None:
    if self._handle is not None:
        self._handle.cancel()
    self._handle = None


_original_protocol_send = tcp_server.TCPServer.protocol_send


async def _protocol_send(self: Any, event: Any) -> None:
    if isinstance(event, Closed):
        with trio.CancelScope(shield=True):
            if self.send_lock.statistics().owner is trio.lowlevel.current_task():
                await self._close()  # fix 3's abort, inside a write: the socket is this task's already
            else:
                # Fix 4: the close is a write too (send_eof): it waits for the write in progress, which is
                # itself bounded by fix 3, so the handler's next frame cannot collide with it.
                async with self.send_lock:
                    await self._close()
        await self.protocol.handle(Closed())
    elif isinstance(event, RawData):
        lock = self.send_lock
        try:  # fix 5: no scheduling round to take a free lock (trio's acquire() always yields once)
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            data = event.data
            sent = _send_now(self.stream, data)
            if sent < len(data):  # the socket's buffer is full (or it failed): the bounded, blocking write
                await _send_bounded(self, memoryview(data)[sent:])
        finally:
            lock.release()
    else:
        await _original_protocol_send(self, event)


def _send_now(stream: Any, data: bytes) -> int:
    """Fix 5: write what the socket takes at once, without a cancel scope or a scheduling round: the bytes sent
    (0 when the socket would block, is not a plain TCP socket, or failed: the bounded path then deals with it).

    A non-blocking write into a socket buffer with room cannot hang, so it needs no timeout; trio's
    ``send_all`` paid a cancel scope (fix 3's bound) and two checkpoints for every frame, about a quarter
    of the server's time per frame at one agent (bench/results/r4-perf-wire.md). Only a plain
    ``trio.SocketStream`` is written this way (its ``socket._sock`` is the stdlib socket, non-blocking);
    the caller holds the connection's send lock, so this is the only writer.
    """
    sock = getattr(getattr(stream, "socket", None), "_sock", None)
    if sock is None or stream.socket.did_shutdown_SHUT_WR or not data:
        return 0
    try:
        return int(sock.send(data))
    except OSError:  # BlockingIOError (full buffer) and a dead peer alike: the bounded path decides
        return 0


async def _send_bounded(self: Any, data: memoryview) -> None:
    """Fix 3: ``send_all`` shielded as Hypercorn does, but bounded by ``send_timeout``; a peer that does not
    read (or is gone) gets its connection aborted."""
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


_original_stream_send = h11_protocol.H11Protocol.stream_send


def _h11_bytes(self: Any, event: Any) -> bytes:
    """``event`` serialized by the connection's h11 state machine (as Hypercorn's ``_send_h11_event`` does)."""
    try:
        return bytes(self.connection.send(event) or b"")
    except h11.LocalProtocolError:
        if self.connection.their_state != h11.ERROR:
            raise
        return b""


async def _stream_send(self: Any, event: Any) -> None:
    early: _Early | None = getattr(self, "_warren_early", None)
    if early is not None:  # fix 7: this response is on the wire already; h11 is told, nothing is written again
        await _replay(self, early, event)
        return
    # Fix 6: a fixed-length response's head is held until its body (or its end) and written with it.
    head: bytes = getattr(self, "_warren_head", b"")
    if isinstance(event, stream_events.Response) and event.status_code >= 200 and any(
            name.lower() == b"content-length" for name, _ in event.headers):
        headers = list(chain(event.headers, self.config.response_headers("h11")))
        if self.keep_alive_requests >= self.config.keep_alive_max_requests:
            headers.append((b"connection", b"close"))
        self._warren_head = head + _h11_bytes(self, h11.Response(headers=headers, status_code=event.status_code))
        return
    if isinstance(event, stream_events.Body):
        data = _h11_bytes(self, h11.Data(data=event.data))
    elif isinstance(event, stream_events.EndBody):
        data = _h11_bytes(self, h11.EndOfMessage())  # b"" for a fixed length: nothing more to write
    else:
        if head:  # anything else first lets the held head go, as it would have gone
            self._warren_head = b""
            await self.send(RawData(data=head))
        await _original_stream_send(self, event)
        return
    self._warren_head = b""
    if head or data:
        await self.send(RawData(data=head + data))


class _Early:
    """What fix 7 wrote for one response: the headers h11 is to be given, the bytes, what the socket did not take."""

    __slots__ = ("data", "headers", "raw_headers", "replayed", "rest", "status")

    def __init__(self, status: int, raw_headers: list[tuple[bytes, bytes]], headers: list[tuple[bytes, bytes]],
                 data: bytes, rest: bytes) -> None:
        self.status, self.raw_headers, self.headers, self.data, self.rest = status, raw_headers, headers, data, rest
        self.replayed = b""


async def _replay(self: Any, early: _Early, event: Any) -> None:
    """Fix 7, in the handler: the response's events through h11 (its state machine moves as if they were sent
    now), the bytes h11 makes compared with those already written; the unwritten rest, if any, written now."""
    if isinstance(event, stream_events.Response):
        if event.status_code != early.status or list(event.headers) != build_and_validate_headers(early.raw_headers):
            early.replayed = b"\0"  # not the response that was written: the check below closes the connection
        early.replayed += _h11_bytes(self, h11.Response(headers=early.headers, status_code=early.status))
        return
    if isinstance(event, stream_events.Body):
        early.replayed += _h11_bytes(self, h11.Data(data=event.data))
        return
    self._warren_early = None
    if isinstance(event, stream_events.EndBody):
        early.replayed += _h11_bytes(self, h11.EndOfMessage())
        if early.replayed == early.data:
            _tally["replayed"] += 1
            if early.rest:
                await self.send(RawData(data=early.rest))
            return
    _tally["closed"] += 1
    # anything else first (the handler ended without its response, a close), or different bytes: what the client
    # holds is not what h11 believes it was sent, so the connection ends here
    await self.send(Closed())
    if not isinstance(event, stream_events.EndBody):
        await _original_stream_send(self, event)


_tally = {"written": 0, "replayed": 0, "closed": 0}


def early_statistics() -> dict[str, int]:
    """Fix 7's tallies in this process: replies ``written`` early, ``replayed`` through h11 by their handler
    (the bytes matched), connections ``closed`` because they did not (or the handler sent something else)."""
    return dict(_tally)


_server_headers: list[Any] = [None, -1, [], b""]  # config, unix second, Hypercorn's headers, their bytes


def _added_headers(config: Any) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers Hypercorn adds to every response (``date``, ``server``...), and their bytes as h11 writes them;
    made once a second (the date's resolution), not once a reply."""
    cache = _server_headers
    second = int(unix_now())
    if cache[0] is not config or cache[1] != second:
        headers = config.response_headers("h11")
        cache[:] = [config, second, headers, b"".join(b"%s: %s\r\n" % (n, v) for n, v in headers)]
    return cache[2], cache[3]


class EarlyReply:
    """Fix 7: write one long-poll's fixed-length response before its handler runs (see the module docstring).

    Made by :func:`early_reply` from the ASGI ``send`` Hypercorn gave the request's handler; :meth:`write` is called
    by another task (the run's), never awaits, and says whether the response is on its way (True: the handler must
    then send exactly that status, headers and body, which fix 6 replays through h11 without writing them)."""

    __slots__ = ("_proto", "_server", "_stream")

    def __init__(self, stream: Any, proto: Any, server: Any) -> None:
        self._stream, self._proto, self._server = stream, proto, server

    def write(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> bool:
        """Write ``status``, ``headers`` (plain lowercase names and values, as the handler will send them) and
        ``body`` now if nothing stands in the way; False (nothing written) otherwise."""
        proto, server, stream = self._proto, self._server, self._stream
        conn = proto.connection
        if (proto.stream is not stream or stream.state != ASGIHTTPState.REQUEST or stream.closed
                or getattr(proto, "_warren_early", None) is not None or getattr(proto, "_warren_head", b"")
                or type(conn) is not h11.Connection or conn.our_state is not h11.SEND_RESPONSE
                or not conn._cstate.keep_alive or server.send_lock.locked()):
            return False
        added, added_bytes = _added_headers(proto.config)
        full = [*headers, *added]
        tail = b"\r\n"
        if proto.keep_alive_requests >= proto.config.keep_alive_max_requests:
            full.append((b"connection", b"close"))
            tail = b"connection: close\r\n\r\n"
        data = b"".join([b"HTTP/1.1 %d \r\n" % status, *(b"%s: %s\r\n" % (n, v) for n, v in headers), added_bytes,
                         tail, body])
        sent = _send_now(server.stream, data)
        if sent <= 0:
            return False  # nothing taken (a full buffer, a plain socket missing, a dead peer): the handler's as before
        proto._warren_early = _Early(status, headers, full, data, data[sent:])
        _tally["written"] += 1
        return True


def early_reply(send: Any) -> EarlyReply | None:
    """Fix 7's writer for the request whose ASGI ``send`` this is, or None when it is not Hypercorn's HTTP/1.1 stream
    on a plain TCP connection with fix 6 installed (Quart's test client, HTTP/2, TLS...)."""
    stream = getattr(send, "__self__", None)
    if type(stream) is not HTTPStream or h11_protocol.H11Protocol.stream_send is not _stream_send:
        return None
    proto = getattr(stream.send, "__self__", None)
    if type(proto) is not h11_protocol.H11Protocol:
        return None
    server = getattr(proto.send, "__self__", None)
    if type(server) is not tcp_server.TCPServer or type(getattr(server, "stream", None)) is not trio.SocketStream:
        return None
    return EarlyReply(stream, proto, server)


def apply(send_timeout: float = 10.0) -> None:
    """Install the fixes (once); ``send_timeout`` bounds every write (fix 3)."""
    _send_timeout[0] = send_timeout
    worker_context.TrioSingleTask.restart = _restart  # type: ignore[method-assign]
    worker_context.TrioSingleTask.stop = _stop  # type: ignore[method-assign]
    tcp_server.TCPServer.protocol_send = _protocol_send  # type: ignore[method-assign]


def apply_lean_writes() -> None:
    """Install fix 6 (one write per fixed-length response; idempotent). Apart from :func:`apply` because the
    bench's ceiling (bench/trivial_app.py) measures the stack as it was without it: fixes 1-4 only."""
    h11_protocol.H11Protocol.stream_send = _stream_send  # type: ignore[method-assign]
