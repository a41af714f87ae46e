"""``warren mcp`` under faults: the MCP server's agent (the trio SDK) rides out resets, lost replies,
redeliveries, lost leases and restarts, and the run plays to its end (docs/faults.md)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx
import pytest
import trio

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from test_mcp import play_to_the_end, session_closed  # noqa: E402

from warren_sim.http.server import start_server  # noqa: E402
from warren_sim.mcp.server import build_server, open_session  # noqa: E402
from warren_sim.runtime.manager import ServerConfig  # noqa: E402

SPEC = "reset=0.15,lost_reply=0.15,redeliver=0.15,expire=0.05,restart=0.03"


async def test_warren_mcp_rides_out_faults_to_the_end_of_its_run() -> None:
    with tempfile.TemporaryDirectory() as data:
        config = ServerConfig(data_dir=Path(data), faults=SPEC, fault_seed=4)
        async with trio.open_nursery() as nursery:
            server = await nursery.start(start_server, config, "127.0.0.1", 0)
            try:
                session = await open_session(server.url, None, "engineer-1", create="bridge_repair", seed=3)
                async with session_closed(session), Client(build_server(session)) as client:
                    ended = await play_to_the_end(client, verdicts=("accepted", "duplicate"))
                assert "has ended (completed)" in ended, ended
                async with httpx.AsyncClient(base_url=server.url) as http:
                    view = (await http.get("/v1/runs/run-1", headers={"X-Warren-Protocol": "warren-agent/0"})).json()
                assert view["status"] == "completed"
                assert {"reset", "lost_reply", "restart"} <= set(view["faults"]), view["faults"]
            finally:
                server.shutdown()
