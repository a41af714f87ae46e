"""An ended run's journal is read from disk off the event loop (issue 13): a big journal being parsed for one
reader (a download, a WS or SSE stream) does not hold up the server's other requests.

The test holds the parse of the journal (the real ``read_records``, gated) until another request to the same
server has been answered: were the file parsed in the event loop, that request could not be served and the gate
would time out."""

from __future__ import annotations

import functools
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import open_websocket_url

from warren_sim.http.server import start_server
from warren_sim.runtime import journal as journal_module
from warren_sim.runtime.manager import ServerConfig

PROTO = {"X-Warren-Protocol": "warren-agent/0"}


class GatedParse:
    """Wraps ``journal.read_records``: each parse notes its thread and waits (in that thread) until the test
    says another request was answered meanwhile."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.real = journal_module.read_records
        self.answered = threading.Event()
        self.entered = 0  # parses begun
        self.parses: list[dict[str, Any]] = []
        monkeypatch.setattr(journal_module, "read_records", self)

    def __call__(self, path: Path, **kw: Any) -> list[dict[str, Any]]:
        in_loop = threading.current_thread() is threading.main_thread()
        self.entered += 1
        waited = False if in_loop else self.answered.wait(timeout=20)
        self.parses.append({"in_event_loop": in_loop, "others_served_meanwhile": waited})
        return self.real(path, **kw)


async def ended_run(h: httpx.AsyncClient) -> str:
    r = await h.post("/v1/runs", params={"scenario": "warren", "seed": 2}, json={"params": {"agents": 40}})
    assert r.status_code == 201, r.text
    run = str(r.json()["run_id"])
    with trio.fail_after(60):
        while (await h.get(f"/v1/runs/{run}")).json()["status"] in ("created", "running"):
            await trio.sleep(0.05)
    return run


async def served_meanwhile(h: httpx.AsyncClient, gate: GatedParse, begun: int) -> None:
    """Once a read began (and is held): another request is answered; then the read may go on."""
    with trio.fail_after(20):
        while gate.entered == begun:
            await trio.sleep(0.01)
        r = await h.get("/v1/runs")
        assert r.status_code == 200
    gate.answered.set()


# A client socket (trio-websocket's or httpx's, never the server's: its local port is not the server's) is
# sometimes left to the garbage collector after the server closes the connection; what this test checks is
# where the journal is parsed, so that warning is not its business (the server's own sockets stay checked
# everywhere else under filterwarnings = error).
@pytest.mark.filterwarnings(r"ignore:Exception ignored in. <socket\.socket:pytest.PytestUnraisableExceptionWarning")
async def test_reading_an_ended_runs_journal_does_not_stall_other_requests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with trio.open_nursery() as nursery:
        server = await nursery.start(functools.partial(start_server, ServerConfig(data_dir=tmp_path / "data")))
        try:
            async with httpx.AsyncClient(base_url=server.url, headers=PROTO, timeout=30) as h:
                run = await ended_run(h)
                expected = (tmp_path / "data" / f"{run}.jsonl").read_text(encoding="utf-8").splitlines()
                gate = GatedParse(monkeypatch)
                got: dict[str, Any] = {}

                async def download() -> None:
                    got["download"] = (await h.get(f"/v1/runs/{run}/journal")).text.splitlines()

                async def sse() -> None:
                    r = await h.get(f"/v1/runs/{run}/events")
                    got["sse"] = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]

                async def ws() -> None:
                    frames = []
                    async with open_websocket_url(server.url.replace("http", "ws") + f"/v1/runs/{run}/stream") as s:
                        while not frames or frames[-1]["kind"] != "terminal":
                            frames.append(json.loads(await s.get_message()))
                    got["ws"] = frames

                for reader in (download, sse, ws):
                    gate.answered = threading.Event()
                    async with trio.open_nursery() as readers:
                        readers.start_soon(served_meanwhile, h, gate, gate.entered)
                        readers.start_soon(reader)
        finally:
            server.shutdown()
    assert len(gate.parses) == 3, gate.parses
    assert all(not p["in_event_loop"] and p["others_served_meanwhile"] for p in gate.parses), gate.parses
    # and what the readers got is the whole journal
    assert [json.loads(line) for line in got["download"]] == [json.loads(line) for line in expected]
    for name in ("sse", "ws"):
        records = [f for f in got[name] if f["kind"] != "terminal"]
        assert [f["cursor"] for f in records] == list(range(len(expected))), name
        assert got[name][-1]["kind"] == "terminal" and got[name][-1]["status"] == "completed"
