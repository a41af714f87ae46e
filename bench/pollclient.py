"""A lean long-poll client for the load process: N HTTP/1.1 GETs on N sockets, one epoll loop in one thread.

Why not httpx here: the ``scale`` benchmark times a 10,000-envelope batch reaching 10,000 long-polls, one GET per
agent, and the load process is the other half of that measurement. httpx on trio (2,500 clients, a task per
poll, httpcore's state machine, the response object) costs the one client process a few hundred microseconds of
CPU per response, x 10,000 on one core: the receipts then trail the server's writes by seconds, and the figure
is the client's, not the server's (bench/results/r5-perf-poll.md). This client does only what an HTTP/1.1
client must for these replies: it writes each request once its socket is connected, reads what arrives with
one ``recv`` per readiness, and stamps a reply with the unix time of the ``recv`` that completed it (its last
byte: the same "receipt of the whole response" the httpx passes stamp), before anything parses its body.

It is still real HTTP/1.1 over real sockets: a status line, headers, a ``Content-Length`` body (the server's
replies to these GETs are fixed-length; a reply without one, chunked, or malformed fails that poll loudly, counted
in ``errors``), keep-alive (a 204 -- the wait ran out -- is asked again on the same connection, bounded).
Loopback only, bounded everywhere: at most ``max_connecting`` connections in their handshake at once, and a poll
counts as ``sent`` only once the server's kernel acknowledged its request (a request on a connection dropped by
an overflowing accept queue is retransmitted with back-off and must not reach the server after the batch); and
:meth:`PollSwarm.run` returns by ``bound_s`` whatever happens. Sockets stay open until :meth:`PollSwarm.close`:
closing them as their replies arrive would make the server handle those closes while it is still replying to
the others, which is the very delivery being timed.
"""

from __future__ import annotations

import errno
import selectors
import socket
import threading
from collections import deque
from typing import Any

from bench.common import unix_now
from warren_sim.runtime.clock import wall_seconds

MAX_HEAD_BYTES = 16_384
MAX_ASKS = 10  # a poll whose wait ran out (204) is asked again, at most this many times


class _Poll:
    __slots__ = ("asks", "body_start", "buf", "counted", "key", "need", "request", "slot", "sock", "status")

    def __init__(self, key: str, request: bytes) -> None:
        self.key = key
        self.request = request
        self.sock: socket.socket | None = None
        self.buf = bytearray()
        self.need = -1  # total bytes of the reply (head + body) once its head is parsed
        self.status = 0
        self.asks = 0
        self.body_start = 0
        self.counted = False  # its request was written once (``PollSwarm.sent``)
        self.slot = False  # holds one of ``max_connecting`` (its handshake is in progress)


class PollSwarm:
    """Long-polls on their own sockets, driven by :meth:`run` in a thread; :meth:`add` from any thread.

    Results: ``replies[key] = (received_unix, status, body)`` for every poll answered with something other
    than 204; ``errors[kind]`` counts the polls that failed (refused, reset, closed, malformed) ``MAX_ASKS`` times,
    ``retried[kind]`` the connections lost before a reply whose poll was asked again on a new one (as httpx's
    retries of closed keep-alives); ``sent`` counts polls whose first request was written."""

    def __init__(self, host: str, port: int, headers: dict[str, str], *, max_connecting: int = 500) -> None:
        self.host, self.port = host, port
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.max_connecting = max_connecting
        self.replies: dict[str, tuple[float, int, bytes]] = {}
        self.errors: dict[str, int] = {}
        self.retried: dict[str, int] = {}  # polls asked again on a new connection, by what ended the old one
        self.sent = 0
        self.expected = 0
        self._pending: deque[_Poll] = deque()
        self._lock = threading.Lock()
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._connecting = 0  # polls connecting or with their request not yet acknowledged (see _check_unacked)
        self._unacked: list[_Poll] = []
        self._stop = False
        self._polls: list[_Poll] = []

    def add(self, key: str, path: str) -> None:
        """Queue one GET long-poll for ``path`` (thread-safe; the loop opens its connection)."""
        request = (f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self.extra}"
                   "Accept: */*\r\n\r\n").encode("latin-1")
        with self._lock:
            self._pending.append(_Poll(key, request))
            self.expected += 1
        self._wake()

    def stop(self) -> None:
        self._stop = True
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except BlockingIOError:  # its buffer is full of wake-ups already: the loop will wake
            pass

    @property
    def done(self) -> int:
        """Polls finished (a reply or an error)."""
        return len(self.replies) + sum(self.errors.values())

    def _fail(self, p: _Poll, kind: str) -> None:
        if p in self._unacked:
            self._unacked.remove(p)
        self._release(p)
        if p.sock is not None:
            if p.sock in self._sel.get_map():
                self._sel.unregister(p.sock)
            p.sock.close()
            p.sock = None
        if p.asks < MAX_ASKS and kind != "malformed":  # a connection lost before any reply: asked again, anew
            self.retried[kind] = self.retried.get(kind, 0) + 1
            p.buf.clear()
            p.need = -1
            with self._lock:
                self._pending.append(p)
            return
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def _open_some(self) -> None:
        while self._connecting < self.max_connecting:
            with self._lock:
                if not self._pending:
                    return
                p = self._pending.popleft()
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            code = s.connect_ex((self.host, self.port))
            p.sock = s
            if p.asks == 0:
                self._polls.append(p)
            if code not in (0, errno.EINPROGRESS):
                p.asks += 1
                self._fail(p, "connect")
                continue
            self._connecting += 1
            p.slot = True
            self._sel.register(s, selectors.EVENT_WRITE, p)

    def _connected(self, p: _Poll) -> None:
        assert p.sock is not None
        if p.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            p.asks += 1
            self._fail(p, "connect")
            return
        self._release(p)
        self._ask(p)
        if p.sock is not None:
            self._unacked.append(p)
            self._sel.modify(p.sock, selectors.EVENT_READ, p)

    def _release(self, p: _Poll) -> None:
        if p.slot:
            p.slot = False
            self._connecting -= 1

    def _check_unacked(self) -> None:
        """Polls whose request the server's kernel acknowledged are on the server (its connection accepted or in
        the accept queue, the request in its buffer): only they count as ``sent``. Why: a client's handshake
        completes before the server accepts, and when the accept queue (100) overflows, the server drops the
        handshake's last packet; the request sent on that connection is retransmitted with back-off (1, 2, 4...
        s) and once reached the server after the batch, a minute late (a p99 of 76 s). Waiting for the
        acknowledgements makes that a slower setup, never a late poll."""
        still = []
        for p in self._unacked:
            try:
                info = p.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104) if p.sock is not None else b""
            except OSError:
                info = b""
            if len(info) >= 28 and int.from_bytes(info[24:28], "little") == 0:  # struct tcp_info: tcpi_unacked
                if not p.counted:
                    p.counted = True
                    self.sent += 1
                continue
            still.append(p)
        self._unacked = still

    def _ask(self, p: _Poll) -> None:
        assert p.sock is not None
        p.asks += 1
        p.buf.clear()
        p.need = -1
        try:
            n = p.sock.send(p.request)  # a few hundred bytes into an empty buffer: taken whole
        except OSError:
            n = -1
        if n != len(p.request):
            self._fail(p, "write")

    def _read(self, p: _Poll) -> None:
        assert p.sock is not None
        try:
            chunk = p.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            self._fail(p, "reset")
            return
        if not chunk:
            self._fail(p, "closed")
            return
        buf = p.buf
        buf += chunk
        if p.need < 0:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    self._fail(p, "malformed")
                return
            head = bytes(buf[:end]).decode("latin-1").split("\r\n")
            parts = head[0].split(" ", 2)
            length = -1
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(parts) < 2 or parts[0] != "HTTP/1.1" or not parts[1].isdigit() or length < 0:
                self._fail(p, "malformed")
                return
            p.status = int(parts[1])
            p.body_start = end + 4
            p.need = end + 4 + length
        if len(buf) < p.need:
            return
        t = unix_now()  # the recv that completed the reply: its last byte is in
        if len(buf) > p.need:
            self._fail(p, "malformed")  # more than one reply to one request
            return
        if p.status == 204 and p.asks < MAX_ASKS:
            self._ask(p)
            return
        self.replies[p.key] = (t, p.status, bytes(buf[p.body_start:]))
        self._sel.unregister(p.sock)  # answered: left open (see the module docstring), no longer watched

    def run(self, bound_s: float) -> None:
        """The loop: open queued polls, write their requests, read their replies, until every poll added so far
        is finished and :meth:`stop` was called, or ``bound_s`` seconds passed."""
        t_end = wall_seconds() + bound_s
        next_check = 0.0
        while not (self._stop and self.done >= self.expected):
            left = t_end - wall_seconds()
            if left <= 0:
                return
            if self._unacked and wall_seconds() >= next_check:
                self._check_unacked()
                next_check = wall_seconds() + 0.02
            self._open_some()
            for key, mask in self._sel.select(min(left, 0.02 if self._unacked else 0.5)):
                p: Any = key.data
                if p is None:
                    if key.fileobj is self._wake_r:
                        try:
                            self._wake_r.recv(4096)
                        except BlockingIOError:
                            pass
                    continue
                if mask & selectors.EVENT_WRITE:
                    self._connected(p)
                elif p.sock is not None:
                    self._read(p)

    def close(self) -> None:
        for p in self._polls:
            if p.sock is not None:
                if p.sock in self._sel.get_map():
                    self._sel.unregister(p.sock)
                p.sock.close()
                p.sock = None
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()
