"""Speed fixes for Hypercorn 0.18's HTTP/1.1 writes: costs, not bugs (each measured in bench/results/).

Installed by :func:`warren_sim.http.hypercorn_fixes.apply` (fix 5) and :func:`~.hypercorn_fixes.apply_lean_writes`
(fixes 6 and 7), after the version check there: they replace methods of Hypercorn's private classes and read
h11's connection state (``conn._cstate``). A speed fix has no wrong answer to show when it is missing, only a
slower one; each names the test that fails without it where one exists, and the benchmark that measures it.

5. Each frame written paid a scheduling round for the free send lock, a cancel scope (fix 3's bound) and two
   checkpoints in trio's ``send_all``. A frame is now written straight into the socket when its buffer has room
   (it cannot block, so it needs no bound), still under the send lock; only what the socket does not take goes
   through fix 3's bounded ``send_all`` (:func:`.hypercorn_correctness.send_bounded`). About a quarter of the
   server's time per frame at one agent (bench/results/r4-perf-wire.md, ``python -m bench ws``); no test fails
   without it (fix 7 writes with the same :func:`_send_now`).
6. Hypercorn wrote every HTTP/1.1 response in three writes (the head, the body, and the empty end of a
   fixed-length body), each a trip through the send lock, a cancel scope and ``send_all``: half of the
   server's work on a small JSON reply (bench/results/r4-perf-http.md, ``python -m bench protocol``). A response
   with a ``Content-Length`` now leaves in one write (its head waits for its body, which the app sends next), and
   an empty end is not written at all. Streamed responses (no ``Content-Length``: SSE) keep their head written at
   once. Fix 7 is built on it (its replay is this ``stream_send``): without fix 6,
   ``tests/test_http_lane.py::test_a_parked_poll_is_answered_by_the_publishing_pass_with_the_handlers_bytes``
   fails.
7. A long-poll's reply written before its handler runs (:class:`EarlyReply`). When a batch wakes 10,000 parked
   ``GET .../observations`` handlers, trio runs each one to its next checkpoint before the next starts, and each
   one's step is its whole reply: the build, the write, then Hypercorn's and h11's bookkeeping (~0.3-0.5 ms on
   this machine), so the last reply left ~the whole sum after the batch (bench/results/r5-perf-poll.md). With
   fix 7 the run task writes each parked poll's reply into its socket as it publishes the batch
   (``Run.wait_observation``'s ``deliver``), with only what the socket takes at once (non-blocking; the rest is
   the handler's to write); the handler then wakes, answers the same bytes as it always did, and fix 6's
   ``_stream_send`` runs them through h11 to keep the connection's state machine where it would have been
   (keep-alive, the next request), writing nothing already written. The head is h11's format with the headers
   Hypercorn adds (date, server, ``Connection: close`` past ``keep_alive_max_requests``); h11's own bytes are
   compared with it when the handler passes them, and a difference closes the connection. Declined (the handler
   writes, as before) whenever anything is not plain: a stream that is not Hypercorn's HTTP/1.1 over a plain TCP
   socket, a write in progress, a connection h11 will not keep alive, a held head. Fails without it:
   ``tests/test_http_lane.py::test_a_parked_poll_is_answered_by_the_publishing_pass_with_the_handlers_bytes``.
"""

from __future__ import annotations

import socket
from itertools import chain
from typing import Any

import h11
import trio
from hypercorn.events import Closed, RawData
from hypercorn.protocol import events as stream_events
from hypercorn.protocol import h11 as h11_protocol
from hypercorn.protocol.http_stream import ASGIHTTPState, HTTPStream
from hypercorn.trio import tcp_server
from hypercorn.utils import build_and_validate_headers

from ..runtime.clock import unix_now
from .hypercorn_correctness import close_if_body_pending, send_bounded
from .hypercorn_correctness import protocol_send as _correct_protocol_send

__all__ = ["EarlyReply", "apply_direct_writes", "apply_lean_writes", "early_reply", "early_statistics"]


async def _protocol_send(self: Any, event: Any) -> None:
    """Fix 5 in front of the correctness fixes' ``protocol_send``: a data write without a scheduling round."""
    if isinstance(event, RawData):
        lock = self.send_lock
        try:  # no scheduling round to take a free lock (trio's acquire() always yields once)
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            data = event.data
            sent = _send_now(self.stream, data)
            if sent < len(data):  # the socket's buffer is full (or it failed): the bounded, blocking write
                await send_bounded(self, memoryview(data)[sent:])
        finally:
            lock.release()
    else:
        await _correct_protocol_send(self, event)


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


_original_stream_send = h11_protocol.H11Protocol.stream_send


def _h11_bytes(self: Any, event: Any) -> bytes:
    """``event`` serialized by the connection's h11 state machine (as Hypercorn's ``_send_h11_event`` does)."""
    try:
        return bytes(self.connection.send(close_if_body_pending(self.connection, event)) or b"")
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


    def shutdown(self) -> bool:
        """Shut the connection's socket down (a ``reset`` or ``lost_reply`` fault, warren_sim.http.fault_lane):
        the client sees the connection end with no byte of a reply. False when there is no plain socket."""
        sock = getattr(self._server.stream, "socket", None)
        if sock is None:
            return False
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            return False
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


def apply_direct_writes() -> None:
    """Install fix 5 over the correctness fixes' ``protocol_send`` (idempotent; after ``hypercorn_correctness.apply``)."""
    tcp_server.TCPServer.protocol_send = _protocol_send  # type: ignore[method-assign]


def apply_lean_writes() -> None:
    """Install fix 6, and with it fix 7's replay (idempotent). Apart from :func:`apply_direct_writes` because the
    bench's ceiling (bench/trivial_app.py) measures the stack as it was without it."""
    h11_protocol.H11Protocol.stream_send = _stream_send  # type: ignore[method-assign]
