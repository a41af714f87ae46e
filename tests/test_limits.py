"""Issue 9, in-process (autojump clock): strict JSON for every request body, and the server's caps (429)."""

from __future__ import annotations

import json

import pytest
import trio
from server_helpers import served

from warren_sim.protocol.strict_json import MAX_BODY_BYTES, MAX_SAFE_INTEGER
from warren_sim.runtime.errors import RunError


async def _started(api, **body):
    body.setdefault("controlled_agents", ["engineer-1"])
    run = await api.create(**body)
    lease = await api.claim(run)
    status, env = await api.poll(run, lease)
    assert status == 200
    return run, lease, env


def _nest(depth: int) -> bytes:
    """A command body whose args value nests objects so the whole body is ``depth`` levels deep."""
    inner = "1"
    for _ in range(depth - 1):
        inner = '{"a": ' + inner + "}"
    return ('{"command_id": "c", "observation_id": "engineer-1#0", "action": "take", "args": ' + inner
            + "}").encode()


# (name, raw body, what the detail must say) -- each is refused with a teaching 400 on every body-reading route
STRICT_CASES = [
    ("duplicate key", b'{"command_id": "c", "command_id": "d", "observation_id": "engineer-1#0", "noop": true}',
     ["duplicate key \"command_id\"", "only once"]),
    ("nested duplicate", b'{"command_id": "c", "observation_id": "engineer-1#0", "action": "take", '
     b'"args": {"item": "toolbox-1", "item": "plank-1"}}', ["$.args.item", "duplicate key"]),
    ("NaN", b'{"command_id": "c", "observation_id": "engineer-1#0", "sleep_ms": NaN}',
     ["NaN is not a JSON value", "finite"]),
    ("Infinity", b'{"command_id": "c", "observation_id": "engineer-1#0", "sleep_ms": Infinity}',
     ["Infinity is not a JSON value"]),
    ("-Infinity", b'{"command_id": "c", "observation_id": "engineer-1#0", "sleep_ms": -Infinity}',
     ["-Infinity is not a JSON value"]),
    ("overflowing float", b'{"command_id": "c", "observation_id": "engineer-1#0", "sleep_ms": 1e400}',
     ["overflows", "finite"]),
    ("depth 65", _nest(65), ["deeper than 64", "at most 64"]),
    ("2^53", b'{"command_id": "c", "observation_id": "engineer-1#0", "sleep_ms": 9007199254740992}',
     ["out of range", "9007199254740991", "as strings"]),
    ("-2^53", b'{"command_id": "c", "observation_id": "engineer-1#0", "sleep_ms": -9007199254740992}',
     ["out of range", "-9007199254740991"]),
    ("huge integer", b'{"command_id": "c", "observation_id": "engineer-1#0", "sleep_ms": ' + b"9" * 5000 + b"}",
     ["out of range"]),
]


@pytest.mark.parametrize("route", ["commands", "runs"])
@pytest.mark.parametrize(("name", "raw", "needles"), STRICT_CASES, ids=[c[0] for c in STRICT_CASES])
async def test_strict_json_rules_give_teaching_400_and_change_nothing(autojump_clock, tmp_path, route, name, raw,
                                                                      needles):
    """Duplicate keys, NaN/Infinity, depth > 64, integers beyond +/-(2^53-1): 400 that teaches; nothing changes."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        before = (len(api.manager.runs), len(api.journal(run)), await api.run_view(run))
        path = (f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}" if route == "commands"
                else "/v1/runs?scenario=bridge_repair")
        status, p = await api.call("POST", path, raw=raw, headers={"Content-Type": "application/json"})
        assert status == 400, p
        assert p["status"] == 400 and p["title"] == "Bad Request" and p["type"] == "about:blank"
        assert p["detail"].startswith("the body is not acceptable JSON: ")
        for needle in needles:
            assert needle in p["detail"], (needle, p["detail"])
        assert (len(api.manager.runs), len(api.journal(run)), await api.run_view(run)) == before


async def test_strict_json_boundaries_are_accepted(autojump_clock, tmp_path):
    """The limits are exact: depth 64, sleep_ms 2^53-1 and a body of exactly 64 KiB are all read."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        path = f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}"
        # depth 64: parsed (then judged by the protocol: args must fit the tool's schema)
        status, r = await api.call("POST", path, raw=_nest(64))
        assert status == 200 and r["status"] == "rejected"
        # a body of exactly MAX_BODY_BYTES is read (and judged); one byte more is 413
        pad = {"command_id": "pad", "observation_id": "engineer-1#99", "noop": True, "x": ""}
        raw = json.dumps(pad).encode()
        raw = raw.replace(b'"x": ""', b'"x": "' + b"a" * (MAX_BODY_BYTES - len(raw)) + b'"')
        assert len(raw) == MAX_BODY_BYTES
        status, r = await api.call("POST", path, raw=raw)
        assert status == 200 and r["status"] == "rejected" and "unknown observation" in r["detail"]
        before = len(api.journal(run))
        status, p = await api.call("POST", path, raw=raw + b" ")
        assert status == 413 and "at most 65536 bytes" in p["detail"]
        assert len(api.journal(run)) == before
        # the largest safe integer is a valid sleep_ms
        body = {"command_id": "big-sleep", "observation_id": env["observation_id"], "sleep_ms": MAX_SAFE_INTEGER}
        status, r = await api.call("POST", path, body)
        assert status == 200 and r["status"] == "accepted", r


async def test_oversized_body_is_413_on_every_body_route(autojump_clock, tmp_path):
    """More than 64 KiB: 413 problem+json that says the limit, on run creation and on commands."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        raw = b'{"x": "' + b"a" * MAX_BODY_BYTES + b'"}'
        for path in ("/v1/runs?scenario=bridge_repair", f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}"):
            status, p = await api.call("POST", path, raw=raw)
            assert status == 413 and p["title"] == "Content Too Large" and "65536" in p["detail"], p
        assert len(api.manager.runs) == 1


# ------------------------------------------------------------------------------------------------ caps


async def test_long_polls_per_lease_are_capped_with_429(autojump_clock, tmp_path):
    """The 5th concurrent long-poll on one lease gets 429 + Retry-After; others' leases and later polls are fine."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1", "medic-1"])
        lease, other = await api.claim(run), await api.claim(run, "medic-1")
        status, env = await api.poll(run, lease)
        results: list[tuple[int, object]] = []

        async def poll() -> None:
            results.append(await api.poll(run, lease, after=env["seq"], wait=60))

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(poll)
            await trio.testing.wait_all_tasks_blocked()
            assert api.manager.runs[run].remote["engineer-1"].lease.polls == 4
            status, p = await api.poll(run, lease, after=env["seq"], wait=60)
            assert status == 429 and api.last.headers["Retry-After"] == "1"
            assert p["title"] == "Too Many Requests" and "4 long-polls are already waiting" in p["detail"]
            assert "one poll at a time per agent" in p["detail"]
            status, _ = await api.poll(run, other, wait=0, agent="medic-1")  # another lease is not affected
            assert status == 200
            status, r = await api.submit(run, lease, {"command_id": "c1", "observation_id": env["observation_id"],
                                                      "noop": True})
            assert r["status"] == "accepted"
            status, _ = await api.submit(run, other, {"command_id": "m1", "observation_id": "medic-1#0",
                                                      "noop": True}, agent="medic-1")
        assert [s for s, _ in results] == [200] * 4  # the next observation woke all four
        assert api.manager.runs[run].remote["engineer-1"].lease.polls == 0
        status, _ = await api.poll(run, lease, after=-1, wait=0)
        assert status == 200


async def test_poll_cap_is_configurable(autojump_clock, tmp_path):
    """max_polls_per_lease=1: a second concurrent poll on the lease is refused at once."""
    async with served(tmp_path, max_polls_per_lease=1) as api:
        run, lease, env = await _started(api)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(api.poll, run, lease, env["seq"], 5)
            await trio.testing.wait_all_tasks_blocked()
            status, p = await api.poll(run, lease, after=env["seq"], wait=5)
            assert status == 429 and "1 long-polls" in p["detail"]
        status, _ = await api.poll(run, lease, after=env["seq"], wait=1)
        assert status == 204


async def test_live_runs_per_server_are_capped_with_429(autojump_clock, tmp_path):
    """max_runs=2: a third live run gets 429 + Retry-After; cancelling one frees a slot; ended runs don't count."""
    async with served(tmp_path, max_runs=2) as api:
        first = await api.create(controlled_agents=["engineer-1"])
        await api.create(controlled_agents=["engineer-1"])
        status, p = await api.call("POST", "/v1/runs?scenario=bridge_repair", {})
        assert status == 429 and api.last.headers["Retry-After"] == "10"
        assert "2 live runs" in p["detail"] and "DELETE /v1/runs/" in p["detail"] and "--max-runs" in p["detail"]
        assert len(api.manager.runs) == 2
        await api.call("DELETE", f"/v1/runs/{first}")
        third = await api.create(controlled_agents=[])  # runs by itself to completion
        with trio.fail_after(3600):
            while (await api.run_view(third))["status"] == "running":
                await trio.sleep(1)
        await api.create(controlled_agents=["engineer-1"])
        assert api.manager.live_runs() == 2


async def test_agents_per_run_cap_refuses_bigger_worlds(autojump_clock, tmp_path):
    """max_agents=50: warren with agents=51 is refused (400: retrying cannot help), agents=50 is created."""
    async with served(tmp_path, max_agents=50) as api:
        status, p = await api.call("POST", "/v1/runs?scenario=warren", {"params": {"agents": 51}})
        assert status == 400 and "51 agents" in p["detail"] and "at most 50 agents" in p["detail"]
        assert "Retry-After" not in api.last.headers and "--max-agents" in p["detail"]
        assert api.manager.runs == {}
        status, run = await api.call("POST", "/v1/runs?scenario=warren", {"params": {"agents": 50},
                                                                          "controlled_agents": []})
        assert status == 201 and len(run["agents"]) == 50


async def test_spectator_slots_per_run_are_capped(autojump_clock, tmp_path):
    """Run.spectator_slot: max_spectators streams at once, the next is RunError 429 with Retry-After; slots free."""
    async with served(tmp_path, max_spectators=2) as api:
        run = api.manager.runs[await api.create()]
        with run.spectator_slot(), run.spectator_slot():
            assert run.spectators == 2
            with pytest.raises(RunError) as info, run.spectator_slot():
                pass
            assert info.value.status == 429 and info.value.retry_after == 5
            assert "2 spectators" in info.value.detail and "/journal" in info.value.detail
        assert run.spectators == 0
        with run.spectator_slot():
            assert run.spectators == 1


def test_server_config_defaults_are_the_documented_caps():
    """Defaults: 4 polls per lease, 64 spectators per run, 64 live runs, 100,000 agents per run, 30 s bodies."""
    from warren_sim.runtime.manager import ServerConfig

    c = ServerConfig()
    assert (c.max_polls_per_lease, c.max_spectators, c.max_runs, c.max_agents, c.body_timeout_s) == \
        (4, 64, 64, 100_000, 30.0)


async def test_spectator_streams_over_the_cap_get_429_on_ws_and_sse(autojump_clock, tmp_path):
    """max_spectators=2: a third WS stream is refused before the handshake, and SSE too: 429 + Retry-After."""
    from quart.testing.connections import WebsocketResponseError

    async with served(tmp_path, max_spectators=2) as api:
        run = await api.create(controlled_agents=["engineer-1"])
        path = f"/v1/runs/{run}/stream"
        async with api.client.websocket(path) as a, api.client.websocket(path) as b:
            assert json.loads(await a.receive())["cursor"] == 0 and json.loads(await b.receive())["cursor"] == 0
            refused = []
            try:
                async with api.client.websocket(path) as c:
                    await c.receive()
            except* WebsocketResponseError as group:
                refused = [exc.response for exc in group.exceptions]
            assert len(refused) == 1 and refused[0].status_code == 429 and refused[0].headers["Retry-After"] == "5"
            assert "2 spectators" in json.loads(await refused[0].get_data())["detail"]
            status, p = await api.call("GET", f"/v1/runs/{run}/events")
            assert status == 429 and api.last.headers["Retry-After"] == "5" and "2 spectators" in p["detail"]
        assert api.manager.runs[run].spectators == 0  # closing the streams freed their slots
        async with api.client.websocket(path) as again:
            assert json.loads(await again.receive())["cursor"] == 0
