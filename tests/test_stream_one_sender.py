"""One writer per connection: a spectator stream's socket is never written by two tasks at once (issue 13).

A prompt spectator that reconnects on an unpaced run (a flood of frames) sometimes made the server log a
``trio.BusyResourceError`` traceback through ``stream_routes.py``: Hypercorn serializes data writes with its
connection's send lock, but closing the connection (``send_eof``, which holds trio's send-conflict detector
across a checkpoint) did not take that lock, so the handler's next frame, already encoded and about to be
written, collided with the close. ``http/hypercorn_correctness.py`` (fix 4) makes the close wait its turn.

The window is a few instructions wide: about 1,500 real prompt reconnects (lagged and closed streams, client
close frames, half-closed sockets) did not hit it in a bounded time. So the test sends, on the real
connection of a real server, the event Hypercorn's reader sends when the peer goes away (``Closed``), while
the handler floods frames: without the fix this logs the traceback in every run tried, with it never.
"""

from __future__ import annotations

import gc
import logging
from pathlib import Path

import httpx
import pytest
import trio
from hypercorn.events import Closed
from hypercorn.trio.tcp_server import TCPServer

from warren_sim.http.server import start_server
from warren_sim.runtime.manager import ServerConfig

PROTO = {"X-Warren-Protocol": "warren-agent/0"}
HANDSHAKE = ("GET /v1/runs/{run}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


def connection_of(client: trio.SocketStream) -> TCPServer:
    """The server side (Hypercorn's TCPServer) of the client's connection, found by its socket's peer address."""
    mine = client.socket.getsockname()
    found = [o for o in gc.get_objects() if isinstance(o, TCPServer)
             and getattr(o.stream, "socket", None) is not None and o.stream.socket.fileno() != -1
             and o.stream.socket.getpeername() == mine]
    assert len(found) == 1, found
    return found[0]


async def ended_run(url: str, agents: int) -> str:
    async with httpx.AsyncClient(base_url=url, headers=PROTO, timeout=120) as h:
        r = await h.post("/v1/runs", params={"scenario": "warren", "seed": 1}, json={"params": {"agents": agents}})
        assert r.status_code == 201, r.text
        run = str(r.json()["run_id"])
        with trio.fail_after(120):
            while (await h.get(f"/v1/runs/{run}")).json()["status"] in ("created", "running"):
                await trio.sleep(0.1)
    return run


async def close_mid_flood(url: str, run: str, rounds: int) -> None:
    """``rounds`` spectators each read part of the flood, then their connection is closed the way Hypercorn's
    reader closes it when the peer goes away (``Closed`` on the connection) while the handler is still writing."""
    port = int(url.rsplit(":", 1)[1])
    for i in range(rounds):
        client = await trio.open_tcp_stream("127.0.0.1", port)
        await client.send_all(HANDSHAKE.format(run=run).encode())
        got = 0
        while got < 20_000 + 3_000 * i:  # the handler is busy sending the catch-up
            got += len(await client.receive_some(65536))
        server_side = connection_of(client)
        with trio.CancelScope(shield=True):
            await server_side.protocol_send(Closed())
        with trio.move_on_after(10):
            while await client.receive_some(65536):
                pass
        await client.aclose()


@pytest.mark.parametrize("rounds", [pytest.param(8, id="reduced"), pytest.param(16, id="full", marks=pytest.mark.slow)])
async def test_closing_a_spectator_mid_flood_never_collides_with_its_sender(tmp_path: Path, rounds: int,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(start_server, ServerConfig(data_dir=tmp_path / "data"))
        try:
            run = await ended_run(server.url, 100)
            await close_mid_flood(server.url, run, rounds)
            # the server is still fine: a fresh spectator gets the whole journal and the terminal frame
            async with httpx.AsyncClient(base_url=server.url, headers=PROTO, timeout=60) as h:
                r = await h.get(f"/v1/runs/{run}/events")
                assert r.status_code == 200 and "event: terminal" in r.text
        finally:
            server.shutdown()
    busy = [r for r in caplog.records if "BusyResourceError" in (r.getMessage() + str(r.exc_info))]
    assert busy == [], busy[0].exc_info
