"""Issue 9 over real sockets: body, header and idle timeouts, a 60 s long-poll at --rate 10, caps over HTTP."""

from __future__ import annotations

import concurrent.futures
import functools
import json
import socket
import time

import httpx
import pytest
import trio
from reliability_helpers import PROTO, Served, raw_connect, read_response, read_until_closed

from warren_sim.http.server import start_server
from warren_sim.protocol.strict_json import MAX_BODY_BYTES
from warren_sim.runtime.clock import wall_seconds
from warren_sim.runtime.manager import ServerConfig

GET_V1 = b"GET /v1 HTTP/1.1\r\nHost: t\r\nX-Warren-Protocol: warren-agent/0\r\n\r\n"


def _idle_after_one_request(address: tuple[str, int]) -> tuple[int, bytes, float]:
    with raw_connect(address) as sock:
        sock.sendall(GET_V1)
        status, headers, _ = read_response(sock)
        rest, took = read_until_closed(sock, 20)
        return status, rest, took


def _silent(address: tuple[str, int], first: bytes) -> tuple[bytes, float]:
    with raw_connect(address) as sock:
        if first:
            sock.sendall(first)
        return read_until_closed(sock, 20)


def _long_poll(url: str, run: str, lease: str) -> tuple[int, float]:
    with httpx.Client(base_url=url, headers=PROTO, timeout=60) as c:
        t0 = wall_seconds()
        r = c.get(f"/v1/runs/{run}/agents/engineer-1/observations", params={"after": 0, "wait": 60, "lease": lease})
        return r.status_code, wall_seconds() - t0


@pytest.mark.slow  # 6 real seconds of long-poll and 5 s idle timers (fixed at 5 real s)
def test_rate_10_long_poll_of_60s_works_while_idle_connections_close(tmp_path):
    """--rate 10: wait=60 answers 204 after ~6 s real; idle, silent and half-sent-header connections close at ~5 s."""
    with Served(tmp_path, "--rate", "10") as s:
        h = s.http
        run = h.post("/v1/runs", params={"scenario": "bridge_repair"},
                     json={"controlled_agents": ["engineer-1"], "decision_deadline_s": 1000}).json()["run_id"]
        lease = h.post(f"/v1/runs/{run}/agents/engineer-1/claim").json()["lease"]
        env = h.get(f"/v1/runs/{run}/agents/engineer-1/observations", params={"wait": 5, "lease": lease}).json()
        assert env["seq"] == 0
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            poll = pool.submit(_long_poll, s.url, run, lease)
            idle = pool.submit(_idle_after_one_request, s.address)
            silent = pool.submit(_silent, s.address, b"")
            slow_head = pool.submit(_silent, s.address, b"GET /v1 HTTP/1.1\r\nHost: t\r\n")
            status, took = poll.result()
            assert status == 204 and 5.5 < took < 8.5, (status, took)  # 60 virtual s = 6 real s
            status, rest, took = idle.result()
            # keep_alive_timeout is 5 s x rate on the rated clock: still 5 real seconds, not 0.5
            assert status == 200 and rest == b"" and 4.0 < took < 7.0, (status, rest, took)
            rest, took = silent.result()
            assert rest == b"" and 4.0 < took < 7.0, took
            rest, took = slow_head.result()  # a slowloris on the headers is cut by the same idle timer
            assert rest == b"" and 4.0 < took < 7.0, took


def test_headers_are_bounded_and_chunked_bodies_are_capped(tmp_path):
    """A request head still incomplete past 16 KiB: 431, closed; a body over 64 KiB (chunked or announced): 413."""
    with Served(tmp_path) as s:
        # h11 buffers at most h11_max_incomplete_size (16 KiB) of an unfinished head; Hypercorn reads 64 KiB at a
        # time, so a head that is complete within one read may be up to 64 KiB; either way memory is bounded.
        for size in (17_000, 100_000):
            with raw_connect(s.address) as sock:
                try:
                    sock.sendall(b"GET /v1 HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * size)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the server refused and closed while we were still sending
                data, took = read_until_closed(sock, 10)
                assert took < 3, took
                # closing with unread bytes may reset the connection and drop the 431 before we read it
                assert data.startswith(b"HTTP/1.1 431 ") or (size > 65_536 and data == b""), data[:200]
        with raw_connect(s.address) as sock:
            sock.sendall(b"POST /v1/runs?scenario=bridge_repair HTTP/1.1\r\nHost: t\r\n"
                         b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"a" * 16384
            try:
                for _ in range(MAX_BODY_BYTES // len(chunk) + 2):
                    sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sock.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer and close before the whole body is sent
            status, headers, body = read_response(sock)
            assert status == 413 and headers["content-type"] == "application/problem+json"
            assert "65536" in json.loads(body)["detail"]
        with raw_connect(s.address) as sock:  # announced too large, body not (yet) sent: 413 at once, then closed
            sock.sendall(b"POST /v1/runs?scenario=bridge_repair HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n"
                         b"\r\n" + b"{" * 1000)
            status, headers, body = read_response(sock)
            assert status == 413 and "65536" in json.loads(body)["detail"]
            assert headers["connection"] == "close"  # and says so (hypercorn_correctness fix 8)
            rest, took = read_until_closed(sock, 10)
            assert took < 3, took  # closed, not left hanging with half a body (see http/hypercorn_correctness.py)
        assert s.http.get("/v1/runs").json()["runs"] == []


def test_a_refusal_before_the_body_says_connection_close(tmp_path):
    """A request refused before its body arrived (a browser-guard 403, a protocol-header 409) is answered with
    ``Connection: close`` and then closed: a keep-alive client opens a new connection for its next request
    instead of sending it into a closing socket. A refusal of a request without a body keeps the connection."""
    with Served(tmp_path) as s:
        for extra in (b"Origin: http://evil.example\r\nContent-Type: application/json\r\n",
                      b"Content-Type: application/json\r\nX-Warren-Protocol: warren-agent/9\r\n"):
            with raw_connect(s.address) as sock:  # the head only: the two bytes of body never come
                sock.sendall(b"POST /v1/runs?scenario=bridge_repair HTTP/1.1\r\nHost: t\r\n" + extra
                             + b"Content-Length: 2\r\n\r\n")
                status, headers, body = read_response(sock)
                assert status in (403, 409) and headers["connection"] == "close", (status, headers)
                rest, took = read_until_closed(sock, 10)
                assert rest == b"" and took < 3, (rest, took)
        with raw_connect(s.address) as sock:  # no body: the refusal leaves the connection open for the next one
            for _ in range(2):
                sock.sendall(b"GET /v1/runs HTTP/1.1\r\nHost: t\r\nOrigin: http://evil.example\r\n\r\n")
                status, headers, body = read_response(sock)
                assert status == 403 and "connection" not in headers, headers
        assert s.http.get("/v1/runs").json()["runs"] == []


async def _slow_body(address: tuple[str, int]) -> tuple[bytes, float]:
    stream = await trio.open_tcp_stream(*address)
    async with stream:
        await stream.send_all(b"POST /v1/runs?scenario=bridge_repair HTTP/1.1\r\nHost: t\r\n"
                              b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"controlled")
        t0 = wall_seconds()
        out = b""
        with trio.move_on_after(40):
            while chunk := await stream.receive_some(65536):
                out += chunk
        return out, wall_seconds() - t0


async def test_slow_body_gets_408_and_is_closed_within_the_body_timeout(tmp_path):
    """A partial body that stops arriving: 408 problem+json (teaching) and the connection closed, in ~body_timeout_s."""
    config = ServerConfig(data_dir=tmp_path / "data", body_timeout_s=1.0)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(start_server, config, "127.0.0.1", 0)
        assert server.app.config["BODY_TIMEOUT"] == 1.0
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        out, took = await _slow_body((host, int(port)))
        head, _, body = out.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 "), out[:300]
        assert b"application/problem+json" in head
        detail = json.loads(body)["detail"]
        assert "did not arrive within 1 s" in detail and "Content-Length" in detail
        assert 0.9 < took < 3.0, took  # and closed right after the answer (see http/hypercorn_correctness.py)
        assert server.app.warren.manager.runs == {}
        server.shutdown()


async def test_default_body_timeout_is_30_real_seconds_at_any_rate(tmp_path):
    """start_server sets Quart's BODY_TIMEOUT to 30 s x rate (the rated clock), i.e. 30 real seconds."""
    for rate in (1.0, 10.0):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(start_server, ServerConfig(data_dir=None, rate=rate), "127.0.0.1", 0)
            assert server.app.config["BODY_TIMEOUT"] == 30 * rate
            server.shutdown()


@pytest.mark.slow  # 30 real seconds; the fast tier has the same cut at body_timeout_s=1 (above)
def test_slow_body_on_warren_serve_defaults_is_cut_after_30s(tmp_path):
    """`warren serve` with default settings: a stalled body is answered 408 (or closed) after about 30 s."""
    with Served(tmp_path) as s, raw_connect(s.address, timeout=60) as sock:
        sock.sendall(b"POST /v1/runs?scenario=bridge_repair HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{")
        data, took = read_until_closed(sock, 60)
        assert (data.startswith(b"HTTP/1.1 408 ") or data == b"") and 29 < took < 35, (data[:100], took)


def test_caps_over_http_send_429_with_retry_after(tmp_path):
    """`warren serve --max-runs 1 --max-polls-per-lease 1`: the caps answer 429 problem+json with Retry-After."""
    with Served(tmp_path, "--max-runs", "1", "--max-polls-per-lease", "1", "--max-agents", "10") as s:
        h = s.http
        r = h.post("/v1/runs", params={"scenario": "warren"}, json={"params": {"agents": 11}})
        assert r.status_code == 400 and "at most 10 agents" in r.json()["detail"]
        run = h.post("/v1/runs", params={"scenario": "bridge_repair"},
                     json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
        r = h.post("/v1/runs", params={"scenario": "bridge_repair"}, json={})
        assert r.status_code == 429 and r.headers["Retry-After"] == "10"
        assert r.headers["Content-Type"] == "application/problem+json" and "1 live runs" in r.json()["detail"]
        lease = h.post(f"/v1/runs/{run}/agents/engineer-1/claim").json()["lease"]
        env = h.get(f"/v1/runs/{run}/agents/engineer-1/observations", params={"wait": 5, "lease": lease}).json()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(_long_poll_for, s.url, run, lease, 20.0)
            t0 = wall_seconds()
            while True:  # probe (wait=0) until the other poll is waiting
                r = h.get(f"/v1/runs/{run}/agents/engineer-1/observations",
                          params={"after": 0, "wait": 0, "lease": lease})
                if r.status_code == 429 or wall_seconds() - t0 > 15:
                    break
            assert r.status_code == 429 and r.headers["Retry-After"] == "1", r.status_code
            assert "1 long-polls are already waiting" in r.json()["detail"]
            # answering the observation brings the next one, which ends the waiting poll
            h.post(f"/v1/runs/{run}/agents/engineer-1/commands", params={"lease": lease},
                   json={"command_id": "c1", "observation_id": env["observation_id"], "noop": True})
            assert waiting.result() in (200, 204)


def _long_poll_for(url: str, run: str, lease: str, wait: float) -> int:
    """One long-poll that parks. Its request may meet the cap itself, while one of the test's probes holds the
    lease's one slot for an instant (a race that a loaded machine makes likely): then it asks again."""
    with httpx.Client(base_url=url, headers=PROTO, timeout=30) as c:
        for _ in range(200):
            status = c.get(f"/v1/runs/{run}/agents/engineer-1/observations",
                           params={"after": 0, "wait": wait, "lease": lease}).status_code
            if status != 429:
                return status
            time.sleep(0.01)
        return status


def test_cli_refuses_caps_below_one(tmp_path):
    """`warren serve --max-runs 0` is a usage error naming the flag."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "warren_sim.cli", "serve", "--max-runs", "0", "--max-agents", "-1",
                        "--data-dir", str(tmp_path / "d")], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--max-runs" in p.stderr and "--max-agents" in p.stderr, p.stderr


def test_socket_module_is_loopback_only_by_default(tmp_path):
    """The default bind is loopback: the printed URL is 127.0.0.1 and nothing is said about exposure."""
    with Served(tmp_path) as s:
        assert s.address[0] == "127.0.0.1"
        assert socket.inet_aton(s.address[0])
        code, err = s.stop()
    assert code == 0 and "warning" not in err.lower()


async def test_serving_thresholds_and_frozen_startup_objects_are_undone_at_stop(tmp_path):
    """warren serve's collector settings (start_server's gc_thresholds): set while serving, with what exists
    once the app is made frozen out of full passes; both undone when the server stops. A request is served."""
    import gc

    from warren_sim.http.server import SERVER_GC_THRESHOLDS

    before = gc.get_threshold()
    gc.unfreeze()  # this test process froze its imports (conftest); count the server's own freeze only
    async with trio.open_nursery() as nursery:
        server = await nursery.start(functools.partial(start_server, ServerConfig(data_dir=None), "127.0.0.1", 0,
                                                       gc_thresholds=SERVER_GC_THRESHOLDS))
        assert gc.get_threshold() == SERVER_GC_THRESHOLDS
        assert gc.get_freeze_count() > 10_000  # modules, classes and the app
        async with httpx.AsyncClient(base_url=server.url, headers=PROTO) as c:
            assert (await c.get("/v1")).status_code == 200
        server.shutdown()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
