"""The journal, the spectator WebSocket and SSE streams: lag, resume, terminal frames, no wall clock, no leases."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import trio
from quart.testing.connections import WebsocketDisconnectError, WebsocketResponseError
from server_helpers import served

PROTO = {"X-Warren-Protocol": "warren-agent/0"}


# -- helpers -----------------------------------------------------------------------------------------------
def file_records(tmp_path: Path, run: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "data" / f"{run}.jsonl").read_text().splitlines()]


async def read_ws(ws: Any, limit: int | None = None) -> tuple[list[dict[str, Any]], int | None]:
    """Frames until the server closes (with its close code), or until ``limit`` frames were read (code None)."""
    frames: list[dict[str, Any]] = []
    try:
        while limit is None or len(frames) < limit:
            frames.append(json.loads(await ws.receive()))
    except WebsocketDisconnectError as closed:
        return frames, closed.args[0]
    return frames, None


async def ws_session(api: Any, path: str) -> tuple[list[dict[str, Any]], int | None]:
    async with api.client.websocket(path) as ws:
        return await read_ws(ws)


def parse_sse(text: str) -> tuple[list[dict[str, Any]], list[str], str]:
    """Complete events of an SSE body -> ([{id, event, data}], comments, the unfinished tail)."""
    events, comments = [], []
    *blocks, tail = text.split("\n\n")
    for block in blocks:
        event: dict[str, Any] = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                comments.append(line[1:].strip())
                continue
            field, _, value = line.partition(": ")
            event[field] = value
        if "data" in event:
            event["data"] = json.loads(event["data"])
            events.append(event)
    return events, comments, tail


class _Leave(Exception):
    pass


class SSEReader:
    """Reads an SSE response of the in-process app chunk by chunk (the test client buffers ``get`` bodies)."""

    def __init__(self, api: Any, path: str, headers: dict[str, str] | None = None) -> None:
        self.cm = api.client.request(path, headers={**PROTO, **(headers or {})})
        self.text = ""
        self.events: list[dict[str, Any]] = []
        self.comments: list[str] = []
        self.ended = False

    async def __aenter__(self) -> SSEReader:
        self.conn = await self.cm.__aenter__()
        await self.conn.send_complete()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.ended or exc[0] is not None:
            await self.cm.__aexit__(*exc)
            return
        # Leaving an unfinished stream: the test connection disconnects only when left with an exception
        # (a plain exit would wait for the end of a body that never ends).
        try:
            await self.cm.__aexit__(_Leave, _Leave(), None)
        except* _Leave:
            pass

    async def more(self) -> bool:
        """Read one chunk; False once the response ended."""
        try:
            chunk = await self.conn.receive()
        except trio.EndOfChannel:
            self.ended = True
            return False
        events, comments, self.text = parse_sse(self.text + chunk.decode())
        self.events += events
        self.comments += comments
        return True

    async def until_end(self) -> None:
        while await self.more():
            pass


async def wait_until_ended(api: Any, run: str) -> dict[str, Any]:
    with trio.fail_after(3600):
        while (view := await api.run_view(run))["status"] in ("created", "running"):
            await trio.sleep(1)
    return view


def assert_exactly_the_journal(records: list[dict[str, Any]], journal: list[dict[str, Any]]) -> None:
    cursors = [r["cursor"] for r in records]
    assert len(cursors) == len(set(cursors)), "a record was sent twice"
    assert sorted(cursors) == cursors, "records out of order"
    assert records == journal, "the stream differs from the journal file"


# -- WebSocket -----------------------------------------------------------------------------------------------
async def test_a_subscriber_that_stops_reading_is_lagged_with_1013_and_resumes_losing_nothing(
        autojump_clock, tmp_path):
    """A stalled subscriber gets {"kind": "lagged", "cursor": n} and 1013; since=n resumes: every record once."""
    async with served(tmp_path, spectator_queue=8) as api:
        run = await api.create(controlled_agents=[], pace=1)  # starts at once; sim time follows the clock
        async with api.client.websocket(f"/v1/runs/{run}/stream") as ws:
            await trio.sleep(15)  # not reading: the transport fills up, then the subscriber's queue overflows
            assert (await api.run_view(run))["status"] == "running"
            first, code = await read_ws(ws)
        assert code == 1013
        *records, lagged = first
        assert lagged == {"kind": "lagged", "cursor": records[-1]["cursor"]}
        assert [r["cursor"] for r in records] == list(range(len(records)))
        assert len(records) < api.manager.runs[run].journal.flushed  # it really fell behind
        reconnects, since, terminal = 0, lagged["cursor"], None
        while terminal is None:  # reconnect with the last cursor until the run's terminal frame
            reconnects += 1
            assert reconnects < 50
            frames, code = await ws_session(api, f"/v1/runs/{run}/stream?since={since}")
            tail = frames[-1]
            assert (tail["kind"], code) in (("lagged", 1013), ("terminal", 1000))
            records += frames[:-1]
            since = tail["cursor"]
            if tail["kind"] == "terminal":
                terminal = tail
        journal = file_records(tmp_path, run)
        assert_exactly_the_journal(records, journal)
        assert terminal == {"kind": "terminal", "cursor": journal[-1]["cursor"], "status": "completed"}


async def test_an_ended_run_streams_its_records_then_terminal_and_closes_1000(autojump_clock, tmp_path):
    """On an ended run: every record after since, then the terminal frame, then close 1000."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=[])
        await wait_until_ended(api, run)
        journal = file_records(tmp_path, run)
        frames, code = await ws_session(api, f"/v1/runs/{run}/stream")
        assert code == 1000
        assert_exactly_the_journal(frames[:-1], journal)
        assert frames[-1] == {"kind": "terminal", "cursor": journal[-1]["cursor"], "status": "completed"}
        frames, code = await ws_session(api, f"/v1/runs/{run}/stream?since={journal[-5]['cursor']}")
        assert code == 1000 and frames[:-1] == journal[-4:] and frames[-1]["kind"] == "terminal"


async def test_a_live_subscriber_follows_the_run_to_its_end(autojump_clock, tmp_path):
    """Subscribed before the run starts: backlog, each flush as it comes, terminal, 1000 (what it sends is ignored)."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1"], pace=1)
        async with trio.open_nursery() as nursery:
            got: list[Any] = []

            async def spectate() -> None:
                with trio.fail_after(3600):  # (a server that stopped reading would deadlock here)
                    async with api.client.websocket(f"/v1/runs/{run}/stream") as ws:
                        for _ in range(40):  # a chatty spectator: what it sends is read and ignored
                            await ws.send("hello?")
                        got.append(await read_ws(ws))

            nursery.start_soon(spectate)
            await trio.sleep(1)
            await api.call("POST", f"/v1/runs/{run}/start")  # engineer-1 unclaimed: it no-ops
            await trio.sleep(5)
            await api.call("DELETE", f"/v1/runs/{run}")
        frames, code = got[0]
        journal = file_records(tmp_path, run)
        assert code == 1000 and frames[-1] == {"kind": "terminal", "cursor": journal[-1]["cursor"],
                                               "status": "cancelled"}
        assert_exactly_the_journal(frames[:-1], journal)


async def test_unknown_run_bad_since_and_an_unknown_cursor(autojump_clock, tmp_path):
    """Unknown run 404, bad since 400, other protocol 409, before the handshake; a cursor past the end: gap, then all."""
    async with served(tmp_path) as api:
        async with api.client.websocket("/v1/runs/run-9/stream") as ws:
            try:
                await ws.receive()
                raise AssertionError("the handshake should be refused")
            except WebsocketResponseError as refused:
                assert refused.response.status_code == 404
                assert "no run 'run-9'" in json.loads(await refused.response.get_data())["detail"]
        run = await api.create(controlled_agents=["engineer-1"])
        for bad in ("x", "-2", "1.5"):
            async with api.client.websocket(f"/v1/runs/{run}/stream?since={bad}") as ws:
                try:
                    await ws.receive()
                    raise AssertionError("the handshake should be refused")
                except WebsocketResponseError as refused:
                    assert refused.response.status_code == 400
                    assert "since" in json.loads(await refused.response.get_data())["detail"]
        async with api.client.websocket(f"/v1/runs/{run}/stream",
                                        headers={"X-Warren-Protocol": "warren-agent/9"}) as ws:
            try:
                await ws.receive()
                raise AssertionError("the handshake should be refused")
            except WebsocketResponseError as refused:
                assert refused.response.status_code == 409
        await api.call("DELETE", f"/v1/runs/{run}")
        frames, code = await ws_session(api, f"/v1/runs/{run}/stream?since=500")
        journal = file_records(tmp_path, run)
        gap = frames[0]
        assert gap["kind"] == "gap" and gap["requested"] == 500 and gap["last"] == journal[-1]["cursor"]
        assert "beyond the end" in gap["detail"]
        assert frames[1:-1] == journal and frames[-1]["kind"] == "terminal" and code == 1000


async def test_spectators_beyond_the_cap_are_refused_with_429(autojump_clock, tmp_path):
    """max_spectators streams per run: the next WebSocket or SSE spectator gets 429 with Retry-After."""
    async with served(tmp_path, max_spectators=1) as api:
        run = await api.create(controlled_agents=["engineer-1"])
        async with api.client.websocket(f"/v1/runs/{run}/stream") as ws:
            frames, _ = await read_ws(ws, limit=2)
            async with api.client.websocket(f"/v1/runs/{run}/stream") as other:
                try:
                    await other.receive()
                    raise AssertionError("the handshake should be refused")
                except WebsocketResponseError as refused:
                    assert refused.response.status_code == 429 and refused.response.headers["Retry-After"]
            status, problem = await api.call("GET", f"/v1/runs/{run}/events")
            assert status == 429 and "spectators" in problem["detail"]
        await trio.sleep(0.1)
        assert api.manager.runs[run].spectators == 0


# -- SSE ---------------------------------------------------------------------------------------------------
async def test_sse_resume_with_last_event_id_has_no_gap_and_no_repeat(autojump_clock, tmp_path):
    """SSE: id = cursor, event = kind, data = record; a reconnect with Last-Event-ID gets exactly the rest."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=[], pace=1)
        async with SSEReader(api, f"/v1/runs/{run}/events") as first:
            while len(first.events) < 40:
                assert await first.more()
        assert (await api.run_view(run))["status"] == "running"
        for e in first.events:
            assert e["id"] == str(e["data"]["cursor"]) and e["event"] == e["data"]["kind"]
        last_id = first.events[-1]["id"]
        async with SSEReader(api, f"/v1/runs/{run}/events?since=3", {"Last-Event-ID": last_id}) as second:
            await second.until_end()  # the header wins over ?since=; the body ends after the terminal event
        journal = file_records(tmp_path, run)
        *rest, terminal = second.events
        assert terminal["event"] == "terminal" and "id" not in terminal
        assert terminal["data"] == {"kind": "terminal", "cursor": journal[-1]["cursor"], "status": "completed"}
        assert_exactly_the_journal([e["data"] for e in first.events + rest], journal)
        # a reconnect of a reader that has everything of an ended run: 204, so an EventSource stops
        r = await api.client.get(f"/v1/runs/{run}/events", headers={"Last-Event-ID": str(journal[-1]["cursor"])})
        assert r.status_code == 204
        async with SSEReader(api, f"/v1/runs/{run}/events?since={journal[-1]['cursor']}") as again:
            await again.until_end()
        assert [e["event"] for e in again.events] == ["terminal"]


async def test_sse_sends_keep_alive_comments_while_nothing_happens(autojump_clock, tmp_path):
    """While no record is flushed for sse_keepalive_s, a comment line keeps the connection alive."""
    async with served(tmp_path, sse_keepalive_s=5) as api:
        run = await api.create(controlled_agents=["engineer-1"])  # created: waits for its claim
        async with SSEReader(api, f"/v1/runs/{run}/events") as sse:
            t0 = trio.current_time()
            while not sse.comments:
                assert await sse.more()
            assert trio.current_time() - t0 >= 5 and sse.comments == ["keep-alive"]
            assert [e["event"] for e in sse.events] == ["config", "run", "status"]
        status, problem = await api.call("GET", f"/v1/runs/{run}/events", headers={"Last-Event-ID": "soon"})
        assert status == 400 and "Last-Event-ID" in problem["detail"]


# -- the journal itself ------------------------------------------------------------------------------------
async def test_journal_download_is_ndjson_with_since_and_matches_the_file(autojump_clock, tmp_path):
    """GET .../journal: application/x-ndjson, exactly the file's lines; ?since=n gives the records after n."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=[])
        await wait_until_ended(api, run)
        text = (tmp_path / "data" / f"{run}.jsonl").read_text()
        r = await api.client.get(f"/v1/runs/{run}/journal")
        assert r.status_code == 200 and r.headers["Content-Type"] == "application/x-ndjson"
        assert (await r.get_data()).decode() == text
        r = await api.client.get(f"/v1/runs/{run}/journal?since=9")
        assert (await r.get_data()).decode() == "".join(line + "\n" for line in text.splitlines()[10:])
        status, problem = await api.call("GET", f"/v1/runs/{run}/journal?since=-2")
        assert status == 400 and "since" in problem["detail"]


async def test_records_after_the_end_are_still_written_and_streamed(autojump_clock, tmp_path):
    """A verdict on an ended run (expired) and a release are journaled: file, download and stream agree."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1"])
        lease = await api.claim(run)
        status, env = await api.poll(run, lease)
        await api.call("DELETE", f"/v1/runs/{run}")
        status, r = await api.submit(run, lease, {"command_id": "late", "observation_id": env["observation_id"],
                                                  "noop": True})
        assert r["status"] == "expired"
        status, _ = await api.call("POST", f"/v1/runs/{run}/agents/engineer-1/release?lease={lease}")
        assert status == 200
        journal = file_records(tmp_path, run)
        assert [x["kind"] for x in journal[-2:]] == ["verdict", "release"] and journal[-2]["status"] == "expired"
        r = await api.client.get(f"/v1/runs/{run}/journal")
        assert [json.loads(x) for x in (await r.get_data()).decode().splitlines()] == journal
        frames, code = await ws_session(api, f"/v1/runs/{run}/stream")
        assert frames[:-1] == journal and frames[-1]["cursor"] == journal[-1]["cursor"] and code == 1000


async def test_a_restarted_server_never_overwrites_an_earlier_journal(autojump_clock, tmp_path):
    """Run ids continue after the highest run-N.jsonl of the data dir, so every journal stays on disk."""
    async with served(tmp_path) as api:
        first = await api.create(controlled_agents=[])
        await wait_until_ended(api, first)
    before = (tmp_path / "data" / f"{first}.jsonl").read_text()
    async with served(tmp_path) as api:
        second = await api.create(controlled_agents=[])
        await wait_until_ended(api, second)
    assert (first, second) == ("run-1", "run-2")
    assert (tmp_path / "data" / f"{first}.jsonl").read_text() == before


async def _scripted_run(tmp_path: Path) -> list[dict[str, Any]]:
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1"], decision_deadline_s=5)
        lease = await api.claim(run)
        status, env = await api.poll(run, lease)
        oid = env["observation_id"]
        await api.submit(run, lease, {"command_id": "bad", "observation_id": oid, "action": "take",
                                      "args": {"item": "plank-9"}})
        await api.submit(run, lease, {"command_id": "c1", "observation_id": oid, "action": "take",
                                      "args": {"item": "toolbox-1"}})
        status, nxt = await api.poll(run, lease, after=env["seq"], wait=60)
        status, late = await api.poll(run, lease, after=nxt["seq"], wait=60)  # nxt expires after 5 s
        await api.submit(run, lease, {"command_id": "c2", "observation_id": nxt["observation_id"], "noop": True})
        await api.call("DELETE", f"/v1/runs/{run}")
    return file_records(tmp_path, run)


async def test_the_deterministic_part_of_a_journal_holds_no_wall_clock_value(autojump_clock, tmp_path):
    """Two served runs of the same commands give the same journal once every 'wall' key is removed."""
    first = await _scripted_run(tmp_path / "a")
    second = await _scripted_run(tmp_path / "b")
    assert {"verdict", "closed", "claim", "status", "config"} <= {r["kind"] for r in first}

    def without_wall(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k != "wall"} for r in records]

    assert without_wall(first) == without_wall(second)
    walls = [r for r in first if "wall" in r]
    assert walls and all(isinstance(r["wall"], dict) for r in walls)
    assert first != second  # the wall-clock facts themselves do differ (when each verdict was made)


# -- lease tokens never leak (a real server over loopback) ----------------------------------------------------
def ws_frames_over_loopback(url: str, path: str) -> tuple[list[dict[str, Any]], int | None]:
    """A minimal WebSocket client (wsproto, already a dependency of Hypercorn) reading until the close frame."""
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import AcceptConnection, CloseConnection, RejectConnection, Request, TextMessage

    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = WSConnection(ConnectionType.CLIENT)
    frames, code, text = [], None, ""
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(conn.send(Request(host=f"{host}:{port}", target=path)))
        while code is None:
            data = sock.recv(65536)
            if not data:
                break
            conn.receive_data(data)
            for event in conn.events():
                if isinstance(event, TextMessage):
                    text += event.data
                    if event.message_finished:
                        frames.append(json.loads(text))
                        text = ""
                elif isinstance(event, CloseConnection):
                    code = event.code
                    sock.sendall(conn.send(event.response()))
                elif isinstance(event, RejectConnection):
                    code = event.status_code
                else:
                    assert isinstance(event, AcceptConnection)
    return frames, code


def test_lease_tokens_appear_in_no_journal_stream_sse_body_or_server_log(tmp_path):
    """A served run's journal file, download, WebSocket frames, SSE body and stderr never contain its leases."""
    proc = subprocess.Popen([sys.executable, "-m", "warren_sim.cli", "serve", "--port", "0", "--data-dir",
                             str(tmp_path / "data")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("WARREN listening on "), line
        url = line.split()[-1]
        with httpx.Client(base_url=url, headers=PROTO, timeout=30) as h:
            run = h.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                         json={"controlled_agents": ["engineer-1"]}).json()["run_id"]
            agent = f"/v1/runs/{run}/agents/engineer-1"
            first = h.post(f"{agent}/claim").json()["lease"]
            h.get(f"{agent}/briefing", params={"lease": first})
            env = h.get(f"{agent}/observations", params={"after": -1, "wait": 10, "lease": first}).json()
            h.post(f"{agent}/commands", params={"lease": first},
                   json={"command_id": "c1", "observation_id": env["observation_id"], "action": "take",
                         "args": {"item": "toolbox-1"}})
            h.get(f"{agent}/commands/c1", params={"lease": first})
            assert h.post(f"{agent}/claim", params={"lease": first[:-2] + "xx"}).status_code == 409
            assert h.post(f"{agent}/release", params={"lease": first}).json()["released"] is True
            assert h.get(f"{agent}/briefing", params={"lease": first}).status_code == 403
            second = h.post(f"{agent}/claim").json()["lease"]
            h.get(f"{agent}/observations", params={"after": -1, "wait": 10, "lease": second})
            assert h.delete(f"/v1/runs/{run}").json()["status"] == "cancelled"
            download = h.get(f"/v1/runs/{run}/journal").text
            sse = h.get(f"/v1/runs/{run}/events").text
        frames, code = ws_frames_over_loopback(url, f"/v1/runs/{run}/stream?since=-1")
        proc.terminate()
        _, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    journal = (tmp_path / "data" / f"{run}.jsonl").read_text()
    assert code == 1000 and frames[-1]["kind"] == "terminal" and frames[:-1] == [
        json.loads(x) for x in journal.splitlines()]
    assert download == journal and sse.count("\nevent: ") + sse.startswith("event: ") >= len(frames)
    assert "WARREN stopped" in stderr
    where = {"journal file": journal, "download": download, "WebSocket frames": json.dumps(frames),
             "SSE body": sse, "server stderr": stderr}
    for name, text in where.items():
        for token in (first, second):
            assert token not in text, f"a lease token leaked into the {name}"
