"""A small WebSocket client (RFC 6455) for the load process: text frames over one trio TCP stream.

Why not trio-websocket: the load process is half of every round trip the ``ws`` benchmark times, and with one
agent (every decision a round trip) trio-websocket's reader task, its message channel and wsproto's generic
framing cost the client ~330 us of CPU per decision (bench/results/r4-perf-wire.md), about what OpenEnv's
whole server spends on a step. This client reads frames in the caller's task and builds them directly.
It is still the real protocol: the HTTP/1.1 upgrade with ``Sec-WebSocket-Key`` checked against the
server's ``Sec-WebSocket-Accept``, masked client frames with a fresh random key each, fragmented messages,
ping/pong and the closing handshake; anything else the server sends (a binary frame, a bad header) fails
loudly. Loopback and plain ``ws://`` only (the benchmarks never leave 127.0.0.1).
"""

from __future__ import annotations

import base64
import hashlib
import os
from urllib.parse import urlsplit

import trio

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_HEADER_BYTES = 16_384
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class ConnectionClosed(Exception):
    """The server closed the connection (its close code and reason), or the stream ended."""

    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(f"closed with {code} {reason}".strip())
        self.code, self.reason = code, reason


def _mask(payload: bytes, key: bytes) -> bytes:
    """XOR ``payload`` with the repeated 4-byte ``key`` (RFC 6455 5.3), as one big-integer XOR."""
    n = len(payload)
    if not n:
        return b""
    keys = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(keys, "little")).to_bytes(n, "little")


def frame(opcode: int, payload: bytes) -> bytes:
    """A client frame: FIN set, masked with a fresh random key."""
    n = len(payload)
    if n < 126:
        head = bytes((0x80 | opcode, 0x80 | n))
    elif n < 1 << 16:
        head = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 0x80 | 127)) + n.to_bytes(8, "big")
    key = os.urandom(4)
    return head + key + _mask(payload, key)


class WsConnection:
    """One client connection: ``send_message`` (text), ``get_message`` (the next text message), ``aclose``."""

    def __init__(self, stream: trio.SocketStream, buffered: bytes, max_message_size: int) -> None:
        self.stream = stream
        self.buf = bytearray(buffered)
        self.max_message_size = max_message_size
        self.send_lock = trio.Lock()
        self.closed: ConnectionClosed | None = None
        self.reading = False  # a task is in get_message: aclose leaves the server's close frame to it
        self.peer_closed = trio.Event()  # the server's close frame arrived (or the stream ended)

    async def _send(self, data: bytes) -> None:
        lock = self.send_lock
        try:  # the reader answers pings while the decider sends commands: one writer at a time
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await self.stream.send_all(data)
        finally:
            lock.release()

    async def send_message(self, text: str) -> None:
        if self.closed is not None:
            raise self.closed
        await self._send(frame(OP_TEXT, text.encode()))

    async def _fill(self) -> None:
        data = await self.stream.receive_some(1 << 16)
        if not data:
            self.closed = ConnectionClosed(1006, "the stream ended without a closing handshake")
            raise self.closed
        self.buf += data

    async def _frame(self) -> tuple[bool, int, bytes]:
        """The next frame: (fin, opcode, payload)."""
        buf = self.buf
        while len(buf) < 2:
            await self._fill()
        b0, b1 = buf[0], buf[1]
        n, at = b1 & 0x7F, 2
        if n == 126:
            while len(buf) < 4:
                await self._fill()
            n, at = int.from_bytes(buf[2:4], "big"), 4
        elif n == 127:
            while len(buf) < 10:
                await self._fill()
            n, at = int.from_bytes(buf[2:10], "big"), 10
        if b1 & 0x80:
            raise ConnectionClosed(1002, "the server masked a frame (RFC 6455 5.1: servers must not)")
        if n > self.max_message_size:
            raise ConnectionClosed(1009, f"a frame of {n} bytes is over {self.max_message_size}")
        while len(buf) < at + n:
            await self._fill()
        payload = bytes(buf[at:at + n])
        del buf[:at + n]
        return bool(b0 & 0x80), b0 & 0x0F, payload

    async def get_message(self) -> str:
        """The next text message (pings answered, fragments joined); ConnectionClosed once the server closes."""
        if self.closed is not None and self.peer_closed.is_set():
            raise self.closed
        self.reading = True
        try:
            return await self._message()
        except ConnectionClosed:
            self.peer_closed.set()
            raise
        finally:
            self.reading = False

    async def _message(self) -> str:
        parts: list[bytes] = []
        while True:
            fin, opcode, payload = await self._frame()
            if opcode == OP_PING:
                await self._send(frame(OP_PONG, payload))
                continue
            if opcode == OP_PONG:
                continue
            if opcode == OP_CLOSE:
                code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                ours = self.closed is not None  # the answer to our close frame: the handshake is complete
                self.closed = ConnectionClosed(code, payload[2:].decode(errors="replace"))
                if not ours:
                    try:  # the closing handshake: echo the code, then the server closes the TCP connection
                        await self._send(frame(OP_CLOSE, payload[:2]))
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
                    await self.stream.aclose()
                raise self.closed
            if opcode not in (OP_TEXT, OP_CONT) or (opcode == OP_TEXT) == bool(parts):
                raise ConnectionClosed(1002, f"unexpected frame (opcode {opcode}) for a JSON-RPC text client")
            parts.append(payload)
            if fin:
                return b"".join(parts).decode()

    async def aclose(self, code: int = 1000) -> None:
        """The closing handshake from our side: a close frame, then the server's, then the stream is closed."""
        if self.closed is None:
            self.closed = ConnectionClosed(code, "closed by the client")
            try:
                await self._send(frame(OP_CLOSE, code.to_bytes(2, "big")))
                if self.reading:  # the reading task gets the server's close frame (one reader per stream)
                    await self.peer_closed.wait()
                else:
                    while True:
                        _, opcode, _ = await self._frame()
                        if opcode == OP_CLOSE:
                            break
            except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        await self.stream.aclose()


async def connect(url: str, headers: list[tuple[str, str]] | None = None,
                  max_message_size: int = 16 * 2**20) -> WsConnection:
    """Open ``ws://host:port/path``: the upgrade handshake, checked; ConnectionClosed if the server refuses."""
    parts = urlsplit(url)
    if parts.scheme != "ws" or parts.hostname is None or parts.port is None:
        raise ValueError(f"wsclient speaks plain ws://host:port/path only, not {url!r}")
    stream = await trio.open_tcp_stream(parts.hostname, parts.port)
    key = base64.b64encode(os.urandom(16))
    lines = [f"GET {parts.path or '/'} HTTP/1.1", f"Host: {parts.hostname}:{parts.port}", "Upgrade: websocket",
             "Connection: Upgrade", f"Sec-WebSocket-Key: {key.decode()}", "Sec-WebSocket-Version: 13"]
    lines += [f"{k}: {v}" for k, v in headers or []]
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
    got = b""
    while b"\r\n\r\n" not in got:
        data = await stream.receive_some(4096)
        if not data or len(got) > MAX_HEADER_BYTES:
            await stream.aclose()
            raise ConnectionClosed(1006, f"no upgrade response: {got[:200]!r}")
        got += data
    head, rest = got.split(b"\r\n\r\n", 1)
    status, *fields = head.decode("latin-1").split("\r\n")
    answer = {k.strip().lower(): v.strip() for k, v in (f.split(":", 1) for f in fields if ":" in f)}
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()  # noqa: S324 - RFC 6455's own digest
    if status.split(" ", 2)[1:2] != ["101"] or answer.get("sec-websocket-accept") != accept:
        await stream.aclose()
        raise ConnectionClosed(1002, f"the server refused the upgrade: {status!r}")
    return WsConnection(stream, rest, max_message_size)
