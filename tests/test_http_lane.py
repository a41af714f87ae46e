"""The HTTP fast lane (warren_sim/http/http_lane.py) and the late poll of an ended run (runtime/stored.py).

The lane answers ``GET .../observations`` and ``POST .../commands`` in their plain form straight from ASGI and hands
every other request to Quart before reading its body. Shown here against the real app: the lane answers (Quart's
request hooks never see the request) with what Quart answers to the same request, refusals included, byte for byte;
each way out of the plain form reaches Quart and gets today's answer; over a real socket, a client that leaves frees
its long-poll's slot. And a late poll on an ended run gets its 410 from the stored status, without rebuilding the run
from its journal, worded as the rebuilt run words it.
"""

from __future__ import annotations

import json

import httpx
import pytest
import trio
from quart import request
from reliability_helpers import PROTO, Served, raw_connect, read_response
from server_helpers import served

from warren_sim.protocol.strict_json import MAX_BODY_BYTES
from warren_sim.runtime.clock import wall_seconds
from warren_sim.runtime.errors import RunError
from warren_sim.runtime.stored import StoredRun

AGENT = "engineer-1"


def cmd(cid: str, oid: str, **decision):
    return {"command_id": cid, "observation_id": oid, **(decision or {"noop": True})}


class Quart:
    """Counts the requests that reach Quart (its before_request hooks): the lane's never do."""

    def __init__(self, app) -> None:
        self.seen: list[str] = []

        async def _seen() -> None:
            self.seen.append(f"{request.method} {request.path}")

        app.before_request_funcs.setdefault(None, []).insert(0, _seen)  # first: before any hook can answer


async def _open(api, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None):
    """One request through the test client (as it is sent: no header added); ``(status, headers, body)``."""
    r = await api.client.open(path, method=method, headers=headers or {}, **({"data": body} if body is not None else {}))
    return r.status_code, [(k.lower(), v) for k, v in r.headers.items()], await r.get_data()


def _json_headers(body: bytes, **extra: str) -> dict[str, str]:
    return {**PROTO, "Content-Type": "application/json", "Content-Length": str(len(body)), **extra}


async def _started(api, **create):
    run = await api.create(controlled_agents=[AGENT], **create)
    lease = await api.claim(run)
    status, env = await api.poll(run, lease, wait=5)
    assert status == 200 and env["seq"] == 0
    return run, lease, env


async def test_the_lane_answers_the_hot_routes_as_quart_would(autojump_clock, tmp_path):
    """Polls, commands (with and without ?wait=) and their refusals: answered by the lane, byte for byte what Quart
    answers to the same request (an Origin of the server's own pages sends it to Quart and changes nothing else)."""
    async with served(tmp_path) as api:
        quart = Quart(api.app)
        run, lease, env = await _started(api)
        base = f"/v1/runs/{run}/agents/{AGENT}"
        same = [  # requests that change nothing: each is sent through the lane, then through Quart
            ("GET", f"{base}/observations?after=-1&wait=0&lease={lease}", None),  # 200, the envelope
            ("GET", f"{base}/observations?after=0&wait=0&lease={lease}", None),  # 204
            ("GET", f"{base}/observations?after=x&lease={lease}", None),  # 400
            ("GET", f"{base}/observations?after=-1&wait=-1&lease={lease}", None),  # 400
            ("GET", f"{base}/observations?after=-1", None),  # 401
            ("GET", f"{base}/observations?after=-1&lease=l-not-it", None),  # 403
            ("GET", f"/v1/runs/run-404/agents/{AGENT}/observations?lease={lease}", None),  # 404
            ("GET", f"/v1/runs/{run}/agents/nobody/observations?lease={lease}", None),  # 404
            ("POST", f"{base}/commands?lease={lease}", b'{"observation_id": "x"}'),  # 422
            ("POST", f"{base}/commands?lease={lease}", b"{not json"),  # 400
            ("POST", f"{base}/commands?lease={lease}", b""),  # 400: a body is needed
            ("POST", f"{base}/commands?lease=l-not-it", b"{}"),  # 403
            ("POST", f"{base}/commands?lease={lease}&wait=x", b"{}"),  # 400
        ]
        for method, path, body in same:
            headers = _json_headers(body) if body is not None else dict(PROTO)
            before = len(quart.seen)
            lane = await _open(api, method, path, body, headers)
            assert len(quart.seen) == before, f"{method} {path} reached Quart"
            by_quart = await _open(api, method, path, body, {**headers, "Origin": "http://localhost"})
            assert len(quart.seen) == before + 1
            assert lane == by_quart, (method, path)
            assert ("x-warren-protocol", "warren-agent/0") in lane[1]
        statuses = []
        for method, path, body in same:
            statuses.append((await _open(api, method, path, body,
                                         _json_headers(body) if body is not None else dict(PROTO)))[0])
        assert statuses == [200, 204, 400, 400, 401, 403, 404, 404, 422, 400, 400, 403, 400]

        # commands: accepted by the lane; with ?wait= the receipt carries the next envelope
        before = len(quart.seen)
        status, r = await api.submit(run, lease, cmd("c1", env["observation_id"]))
        assert status == 200 and r["status"] == "accepted"
        status, nxt = await api.poll(run, lease, after=0, wait=60)
        assert status == 200 and nxt["seq"] == 1
        status, r = await api.call("POST", f"{base}/commands?lease={lease}&wait=60", cmd("c2", nxt["observation_id"]))
        assert status == 200 and r["status"] == "accepted" and r["next_observation"]["seq"] == 2
        status, r = await api.submit(run, lease, cmd("c2", nxt["observation_id"]))  # a retry: duplicate
        assert status == 200 and r["status"] == "duplicate"
        assert len(quart.seen) == before  # none of them reached Quart
        journal = [rec["command_id"] for rec in api.journal(run) if rec["kind"] == "verdict"]
        assert journal[-3:] == ["c1", "c2", "c2"]


async def test_a_capped_poll_is_refused_by_the_lane_with_retry_after(autojump_clock, tmp_path):
    """A poll over the per-lease cap: 429 with Retry-After and the protocol header, from the lane as from Quart."""
    async with served(tmp_path, max_polls_per_lease=1) as api:
        quart = Quart(api.app)
        run, lease, env = await _started(api)
        path = f"/v1/runs/{run}/agents/{AGENT}/observations?after=0&wait=30&lease={lease}"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(api.poll, run, lease, 0, 30)  # holds the only slot for 30 s
            await trio.sleep(1)
            before = len(quart.seen)
            lane = await _open(api, "GET", path, None, dict(PROTO))
            assert len(quart.seen) == before
            by_quart = await _open(api, "GET", path, None, {**PROTO, "Origin": "http://localhost"})
            nursery.cancel_scope.cancel()
        assert lane == by_quart and lane[0] == 429 and ("retry-after", "1") in lane[1]


HANDED_OFF = {  # a way out of the plain form -> (headers, body, what Quart answers today)
    "an Origin of another site": ({"Origin": "http://evil.example"}, b"{}", 403),
    "another protocol in the header": ({"X-Warren-Protocol": "warren-agent/9"}, b"{}", 409),
    "no Content-Length": ({"Content-Length": None}, b"{}", 200),
    "a Content-Length above the cap": ({"Content-Length": str(MAX_BODY_BYTES + 1)}, b"x" * (MAX_BODY_BYTES + 1), 413),
    "a body that is not JSON": ({"Content-Type": "text/plain"}, b"{}", 415),
    "no Content-Type": ({"Content-Type": None}, b"{}", 415),
}


@pytest.mark.parametrize("case", sorted(HANDED_OFF))
async def test_each_way_out_of_the_plain_form_reaches_quart_with_todays_answer(autojump_clock, tmp_path, case):
    extra, body, expected = HANDED_OFF[case]
    async with served(tmp_path) as api:
        quart = Quart(api.app)
        run, lease, env = await _started(api)
        if expected == 200:
            body = json.dumps(cmd("c1", env["observation_id"])).encode()
        headers = {k: v for k, v in {**_json_headers(body), **extra}.items() if v is not None}
        before = len(quart.seen)
        status, headers_back, data = await _open(api, "POST", f"/v1/runs/{run}/agents/{AGENT}/commands?lease={lease}",
                                                 body, headers)
        assert quart.seen[before:] == [f"POST /v1/runs/{run}/agents/{AGENT}/commands"]
        assert status == expected, data
        if expected != 200:
            assert json.loads(data)["status"] == expected
        if expected == 413:
            assert ("connection", "close") in headers_back


@pytest.mark.parametrize(("method", "path", "expected"), [
    ("HEAD", "/observations?after=-1&wait=0&lease={lease}", 200),
    ("PUT", "/observations?lease={lease}", 405),
    ("GET", "/observations/?lease={lease}", 404),
    ("GET", "/commands?lease={lease}", 405),
    ("POST", "/observations?lease={lease}", 405),
])
async def test_other_methods_and_paths_are_quarts(autojump_clock, tmp_path, method, path, expected):
    async with served(tmp_path) as api:
        quart = Quart(api.app)
        run, lease, _ = await _started(api)
        before = len(quart.seen)
        path = f"/v1/runs/{run}/agents/{AGENT}" + path.format(lease=lease)
        status, headers, _ = await _open(api, method, path, None, dict(PROTO))
        assert status == expected and quart.seen[before:] == [f"{method} {path.split('?')[0]}"]
        if expected == 405:
            assert dict(headers)["allow"]


def test_a_client_that_leaves_frees_its_long_polls_slot(tmp_path):
    """Over a real socket: a long-poll holds the lease's only slot (a second poll: 429); the client closes its
    connection; the lane notices and the slot is free again at once (a new poll: 204, not 429)."""
    with Served(tmp_path, "--max-polls-per-lease", "1") as s:
        h = s.http
        run = h.post("/v1/runs", params={"scenario": "bridge_repair"},
                     json={"controlled_agents": [AGENT], "decision_deadline_s": 1000}).json()["run_id"]
        lease = h.post(f"/v1/runs/{run}/agents/{AGENT}/claim").json()["lease"]
        assert h.get(f"/v1/runs/{run}/agents/{AGENT}/observations", params={"wait": 5, "lease": lease}).json()["seq"] == 0
        with raw_connect(s.address) as sock:
            sock.sendall(f"GET /v1/runs/{run}/agents/{AGENT}/observations?after=0&wait=60&lease={lease} HTTP/1.1\r\n"
                         "Host: t\r\nX-Warren-Protocol: warren-agent/0\r\n\r\n".encode())
            sock.settimeout(1.0)
            with pytest.raises(TimeoutError):
                sock.recv(1)  # it waits: nothing is due before the agent answers
            r = h.get(f"/v1/runs/{run}/agents/{AGENT}/observations", params={"after": 0, "wait": 0, "lease": lease})
            assert r.status_code == 429 and r.headers["Retry-After"] == "1"  # a second poll is over the cap
        t0 = wall_seconds()
        while True:
            r = h.get(f"/v1/runs/{run}/agents/{AGENT}/observations", params={"after": 0, "wait": 0, "lease": lease})
            if r.status_code != 429 or wall_seconds() - t0 > 5:
                break
        assert r.status_code == 204 and wall_seconds() - t0 < 2
        with raw_connect(s.address) as sock:  # and the lane's answers on the wire: one response, whole
            sock.sendall(f"GET /v1/runs/{run}/agents/{AGENT}/observations?after=-1&wait=0&lease={lease} HTTP/1.1\r\n"
                         "Host: t\r\nX-Warren-Protocol: warren-agent/0\r\n\r\n".encode())
            status, headers, body = read_response(sock)
            assert status == 200 and json.loads(body)["seq"] == 0
            assert headers["content-type"] == "application/json" and headers["x-warren-protocol"] == "warren-agent/0"
        code, _ = s.stop()
        assert code == 0


# -------------------------------------------------------------------------------- late polls of ended runs


async def _ended(api, run: str) -> StoredRun:
    with trio.fail_after(60):
        while not isinstance(api.manager.runs[run], StoredRun):
            await trio.sleep(0.1)
    return api.manager.runs[run]


async def test_a_late_poll_on_an_ended_run_gets_410_without_a_rebuild(autojump_clock, tmp_path):
    """Every agent's last poll lands on its run after the end: 410 from the stored status (no rebuild from the
    journal), worded as the rebuilt run words it; any other case is still the rebuilt run's to judge."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        await api.call("DELETE", f"/v1/runs/{run}")
        stored = await _ended(api, run)
        status, p = await api.poll(run, lease, wait=30)
        assert status == 410 and "cancelled" in p["detail"]
        assert run not in api.manager._rebuilt  # answered without rebuilding the run
        with pytest.raises(RunError) as rebuilt:  # the rebuilt run's own answer: the same words
            await stored.rebuilt().wait_observation(stored.rebuilt().authenticate(AGENT, lease), -1, 0)
        assert rebuilt.value.status == 410 and rebuilt.value.detail == p["detail"]
        status, p = await api.poll(run, "l-not-it", wait=0)  # not the lease: the rebuilt run says why
        assert status == 403
        status, _ = await api.call("POST", f"/v1/runs/{run}/agents/{AGENT}/release?lease={lease}")
        assert status == 200
        status, p = await api.poll(run, lease, wait=0)  # released: no longer held, whatever the poll path
        assert status == 403 and "no lease holds it" in p["detail"]
        api.manager._rebuilt.clear()  # rebuilt again (evicted from the cache): the release holds
        status, p = await api.poll(run, lease, wait=0)
        assert status == 403


# ------------------------------------------------------------ parked long-polls answered by the publishing pass


async def _read_reply(stream: trio.SocketStream, buf: bytearray) -> tuple[bytes, bytes]:
    """One fixed-length HTTP/1.1 response off a raw stream: ``(head, body)``; what follows stays in ``buf``."""
    with trio.fail_after(30):
        while b"\r\n\r\n" not in buf:
            chunk = await stream.receive_some(65536)
            assert chunk, f"closed before a whole head: {bytes(buf)!r}"
            buf += chunk
        head, _, rest = bytes(buf).partition(b"\r\n\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                      if line.lower().startswith(b"content-length:"))
        while len(rest) < length:
            chunk = await stream.receive_some(65536)
            assert chunk, "closed before a whole body"
            rest += chunk
        del buf[:]
        buf += rest[length:]
        return head, rest[:length]


def _dateless(head: bytes) -> list[bytes]:
    return [line for line in head.split(b"\r\n") if not line.lower().startswith(b"date:")]


async def test_a_parked_poll_is_answered_by_the_publishing_pass_with_the_handlers_bytes(tmp_path):
    """Over a real socket (an in-process Hypercorn): a GET long-poll parked before its batch gets its reply written
    by the run task as the batch is published (hypercorn_speed fix 7), byte for byte the reply the lane's handler
    writes for the same envelope (the date aside) and the same as Quart's; the connection's state is right after
    it (the next request on it is answered); a parked poll whose wait runs out gets its 204 and leaves nothing
    registered, and neither does one whose client leaves."""
    from warren_sim.http.hypercorn_fixes import early_statistics
    from warren_sim.http.server import start_server
    from warren_sim.runtime.manager import ServerConfig

    async with trio.open_nursery() as nursery:
        server = await nursery.start(start_server, ServerConfig(data_dir=tmp_path / "data"), "127.0.0.1", 0)
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        try:
            async with httpx.AsyncClient(base_url=server.url, headers=PROTO, timeout=30) as h:
                run_id = (await h.post("/v1/runs", params={"scenario": "bridge_repair"},
                                       json={"controlled_agents": [AGENT], "decision_deadline_s": 1000})).json()["run_id"]
                lease = (await h.post(f"/v1/runs/{run_id}/agents/{AGENT}/claim")).json()["lease"]
                base = f"/v1/runs/{run_id}/agents/{AGENT}/observations"
                env0 = (await h.get(base, params={"after": -1, "wait": 5, "lease": lease})).json()
                ra = server.app.warren.manager.runs[run_id].remote[AGENT]

                def get(after: int, wait: float) -> bytes:
                    return (f"GET {base}?after={after}&wait={wait}&lease={lease} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                            "X-Warren-Protocol: warren-agent/0\r\n\r\n").encode()

                async def parked() -> None:
                    with trio.fail_after(10):
                        while not ra.deliveries:
                            await trio.sleep(0.01)

                stream = await trio.open_tcp_stream(host, int(port))
                buf = bytearray()
                await stream.send_all(get(0, 60))
                await parked()
                before = early_statistics()
                r = await h.post(f"/v1/runs/{run_id}/agents/{AGENT}/commands", params={"lease": lease},
                                 json=cmd("c1", env0["observation_id"]))
                assert r.json()["status"] == "accepted"  # the batch is adjudicated, the next one published
                head, body = await _read_reply(stream, buf)
                after = early_statistics()
                assert after["written"] == before["written"] + 1  # written by the publishing pass
                assert head.startswith(b"HTTP/1.1 200 ") and json.loads(body)["seq"] == 1
                assert not ra.deliveries

                # the same envelope through the lane's handler (outstanding: no wait, no early write) and Quart
                await stream.send_all(get(0, 0))
                head2, body2 = await _read_reply(stream, buf)  # the same connection: h11 was kept in step
                assert (_dateless(head2), body2) == (_dateless(head), body)
                by_quart = await h.get(base, params={"after": 0, "wait": 0, "lease": lease},
                                       headers={"Origin": server.url})
                assert by_quart.content == body
                assert by_quart.headers["content-type"] == "application/json"
                assert by_quart.headers["content-length"] == str(len(body))
                assert early_statistics()["written"] == after["written"]  # neither was written early

                # parked, then the wait runs out: the handler's 204, nothing left registered
                await stream.send_all(get(1, 0.5))
                head3, body3 = await _read_reply(stream, buf)
                assert head3.startswith(b"HTTP/1.1 204 ") and body3 == b"" and not ra.deliveries
                # parked, then the client leaves: nothing left registered either
                await stream.send_all(get(1, 60))
                await parked()
                await stream.aclose()
                with trio.fail_after(10):
                    while ra.deliveries:
                        await trio.sleep(0.01)
                statistics = early_statistics()  # the early reply went through h11 after it left, and matched
                assert statistics["replayed"] == before["replayed"] + 1 and statistics["closed"] == before["closed"]
        finally:
            server.shutdown()


async def test_the_run_task_delivers_to_a_parked_poll_or_leaves_it_to_the_poll(autojump_clock, tmp_path):
    """``Run.wait_observation``'s ``deliver``: called once by the run task with the envelope's bytes when the batch
    that brings it is published; True: the poll returns those bytes; False: the poll returns the envelope itself,
    as without it. Not called for an envelope the poll finds outstanding."""
    import orjson

    async with served(tmp_path) as api:
        run_id, lease, env = await _started(api)
        run = api.manager.runs[run_id]
        ra = run.remote[AGENT]
        calls: list[bytes] = []
        out: list[object] = []
        for accept in (True, False):
            calls.clear()
            out.clear()

            def deliver(body: bytes, accept: bool = accept) -> bool:
                calls.append(body)
                return accept

            async def poll(after: int, deliver=deliver) -> None:
                out.append(await run.wait_observation(ra, after, 60, deliver))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll, env["seq"])
                await trio.sleep(1)
                assert not calls and len(ra.deliveries) == 1
                status, r = await api.submit(run_id, lease, cmd(f"c-{accept}", env["observation_id"]))
                assert status == 200 and r["status"] == "accepted"
            assert len(calls) == 1 and orjson.dumps(out[0]) == calls[0] and not ra.deliveries
            env = json.loads(calls[0])
            assert env["seq"] == run.remote[AGENT].envelope_seq
        calls.clear()
        assert orjson.dumps(await run.wait_observation(ra, env["seq"] - 1, 60, deliver)) == orjson.dumps(
            ra.envelope.whole())
        assert not calls


async def test_an_unclaimed_agents_envelope_is_not_delivered(autojump_clock, tmp_path):
    """An agent whose lease ended has each new envelope closed unanswered in the step that publishes it, before any
    poll could see it; the run task's delivery skips it too (a parked poll gets nothing, as before deliveries)."""
    async with served(tmp_path) as api:
        run_id, lease, env = await _started(api)
        run = api.manager.runs[run_id]
        ra = run.remote[AGENT]
        calls: list[bytes] = []

        def deliver(body: bytes) -> bool:
            calls.append(body)
            return True

        run.release(AGENT, lease)
        with pytest.raises(RunError) as ended:  # nobody blocks the run now: it plays on to its time limit
            await run.wait_observation(ra, env["seq"], 3600, deliver)
        assert ended.value.status == 410
        closed = [r for r in api.journal(run_id) if r["kind"] == "closed" and r["agent"] == AGENT
                  and r["why"] == "unclaimed" and r["observation_ids"] != [env["observation_id"]]]
        assert closed, "the agent was woken again while its poll was parked"
        assert calls == [] and not ra.deliveries
