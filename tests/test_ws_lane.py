"""The raw ASGI lane of ``WS /v1/agent`` (warren_sim/http/ws_lane.py) keeps every answer of the Quart route.

On a real Hypercorn on loopback, with trio-websocket as the client: a foreign ``Origin`` gets the 403
problem+json an HTTP request gets, the server's own origin and ``--allow-origin`` ones are served, a foreign
``X-Warren-Protocol`` is refused before the handshake, the accepted handshake carries the protocol header,
bad frames get their JSON-RPC errors, a client that goes away leaves no listener behind, and everything that
is not the agent socket (the spectator stream, HTTP on the same path) still reaches Quart. The protocol's
own tests (tests/test_protocol_transports.py, tests/test_server_protocol.py) run through the lane too: Quart's
test client calls ``app.asgi_app``, which the lane wraps.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import open_websocket_url

from warren_sim.http.server import start_server
from warren_sim.runtime.manager import ServerConfig

PROTO = ("X-Warren-Protocol", "warren-agent/0")
pytestmark = pytest.mark.trio


@asynccontextmanager
async def real_server(tmp_path: Path, **config: Any) -> AsyncIterator[Any]:
    async with trio.open_nursery() as nursery:
        server = await nursery.start(functools.partial(start_server, ServerConfig(data_dir=tmp_path, **config),
                                                       "127.0.0.1", 0))
        try:
            yield server
        finally:
            server.shutdown()


def ws_url(server: Any, path: str = "/v1/agent") -> str:
    return "ws" + server.url.removeprefix("http") + path


async def handshake(server: Any, headers: dict[str, str]) -> httpx.Response:
    """A WebSocket upgrade request sent with httpx (a refusal is a plain HTTP response to it)."""
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    async with httpx.AsyncClient(base_url=server.url) as http:
        return await http.get("/v1/agent", headers={**upgrade, **headers})


async def rpc(ws: Any, method: str, params: dict[str, Any], rid: int = 1) -> dict[str, Any]:
    await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
    with trio.fail_after(10):
        return json.loads(await ws.get_message())


async def test_a_foreign_origin_gets_the_http_403_problem(tmp_path: Path) -> None:
    async with real_server(tmp_path, allow_origins=("http://localhost:3000",)) as server:
        refused = await handshake(server, {"X-Warren-Protocol": "warren-agent/0", "Origin": "http://evil.example"})
        assert refused.status_code == 403
        assert refused.headers["content-type"].startswith("application/problem+json")
        body = refused.json()
        assert body["status"] == 403 and "--allow-origin http://evil.example" in body["detail"]
        async with httpx.AsyncClient(base_url=server.url) as http:  # the same words as over HTTP
            r = await http.get("/v1/runs", headers={"Origin": "http://evil.example"})
            assert r.status_code == 403 and r.json()["detail"] == body["detail"]
        for origin in (server.url, "http://localhost:3000"):  # its own pages, and an allowed site
            async with open_websocket_url(ws_url(server), extra_headers=[(b"Origin", origin.encode())]) as ws:
                reply = await rpc(ws, "initialize", {"protocol": "warren-agent/0"})
                assert reply["result"]["protocol"] == "warren-agent/0"


async def test_a_foreign_protocol_header_is_refused_before_the_handshake(tmp_path: Path) -> None:
    async with real_server(tmp_path) as server:
        refused = await handshake(server, {"X-Warren-Protocol": "warren-agent/9"})
        assert refused.status_code == 403  # closed (1002) before accepting: Hypercorn answers 403
        accepted = await handshake(server, {"X-Warren-Protocol": "warren-agent/0"})
        assert accepted.status_code == 101


async def test_the_handshake_and_bad_frames(tmp_path: Path) -> None:
    async with real_server(tmp_path) as server:
        async with open_websocket_url(ws_url(server), extra_headers=[(b"X-Warren-Protocol", b"warren-agent/0")]) as ws:
            assert ws.handshake_headers is not None
            got = {k.decode().lower(): v.decode() for k, v in ws.handshake_headers}
            assert got["x-warren-protocol"] == "warren-agent/0"
            await ws.send_message("{not json")
            reply = json.loads(await ws.get_message())
            assert reply["error"]["code"] == -32700 and reply["id"] is None
            await ws.send_message(b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"origin_ns": 5}}')
            reply = json.loads(await ws.get_message())  # a binary frame is read as the text it carries
            assert reply["id"] == 7 and reply["result"]["origin_ns"] == 5
            await ws.send_message('{"jsonrpc": "2.0", "id": 8, "id": 9, "method": "ping"}')
            reply = json.loads(await ws.get_message())
            assert reply["error"]["code"] == -32700 and "duplicate key" in reply["error"]["data"]["detail"]
            reply = await rpc(ws, "no.such", {}, rid=10)
            assert reply["error"]["code"] == -32601


async def test_a_client_that_goes_away_leaves_no_listener(tmp_path: Path) -> None:
    async with real_server(tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=dict([PROTO])) as http:
            r = await http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                                json={"controlled_agents": ["engineer-1", "courier-1"]})
            run_id = r.json()["run_id"]
            async with open_websocket_url(ws_url(server)) as ws:
                claim = await rpc(ws, "agent.claim", {"run_id": run_id, "agent_id": "engineer-1"})
                assert claim["result"]["lease"]
                ra = server.app.warren.runs().get(run_id).remote["engineer-1"]
                assert len(ra.listeners) == 1
            with trio.fail_after(10):
                while ra.listeners:
                    await trio.sleep(0.01)
            # the lease outlives the connection: the same agent is resumed on a new one
            async with open_websocket_url(ws_url(server)) as ws:
                again = await rpc(ws, "agent.claim", {"run_id": run_id, "agent_id": "engineer-1",
                                                      "lease": claim["result"]["lease"]})
                assert again["result"]["resumed"] is True


async def test_other_scopes_still_reach_quart(tmp_path: Path) -> None:
    async with real_server(tmp_path) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=dict([PROTO])) as http:
            r = await http.get("/v1/agent")  # HTTP on the agent socket's path: Quart's own answer
            assert r.status_code in (400, 404, 405) and r.headers["content-type"].startswith("application/problem")
            r = await http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3}, json={})
            run_id = r.json()["run_id"]
        async with open_websocket_url(ws_url(server, f"/v1/runs/{run_id}/stream")) as ws:  # a spectator
            with trio.fail_after(10):
                first = json.loads(await ws.get_message())
            assert first
