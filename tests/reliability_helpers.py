"""Helpers for the reliability tests (issue 9): a `warren serve` subprocess, raw sockets, full-vs-reduced sizes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from warren_sim.runtime.clock import wall_seconds

PROTO = {"X-Warren-Protocol": "warren-agent/0"}
TEST_SCENARIOS = Path(__file__).parent / "scenarios"


class Served:
    """`python -m warren_sim.cli serve --port 0 ...` as a real process; ``url`` once it listens."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = tmp_path / "data"
        # stderr (a line per run lifecycle change) goes to a file: a pipe nobody reads until stop() would fill
        # up after a few hundred runs and block the server's writes.
        self._err = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "warren_sim.cli", "serve", "--port", "0", "--data-dir", str(self.data_dir),
             *args], stdout=subprocess.PIPE, stderr=self._err, text=True, env={**os.environ, **(env or {})})
        line = self.proc.stdout.readline()
        assert line.startswith("WARREN listening on http://"), line + self._read_err()
        self.url = line.split()[-1]
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        self.address = (host.strip("[]"), int(port))
        self.http = httpx.Client(base_url=self.url, headers=PROTO, timeout=120)
        self.stderr = self.stdout = ""

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self.stderr = self._read_err()
        self.stdout = self.proc.stdout.read()
        self.proc.stdout.close()
        self._err.close()
        return self.proc.returncode, self.stderr

    def _read_err(self) -> str:
        self._err.flush()
        self._err.seek(0)
        return self._err.read()

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.returncode is None:
            self.stop()


def raw_connect(address: tuple[str, int], timeout: float = 30) -> socket.socket:
    sock = socket.create_connection(address, timeout=timeout)
    return sock


def read_until_closed(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    """Read until the peer closes (or ``limit`` real seconds pass); ``(bytes, seconds it took)``."""
    t0 = wall_seconds()
    out = b""
    sock.settimeout(limit)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    except TimeoutError:
        pass
    except ConnectionResetError:
        pass
    return out, wall_seconds() - t0


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read one HTTP/1.1 response with a Content-Length body: ``(status, headers, body)``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a full response head: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, body
