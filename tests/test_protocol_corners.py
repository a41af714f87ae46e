"""Protocol corners found by a black-box pass (issue 32), in-process on the autojump clock: leases held by parked
long-polls, verdicts in the journal before their receipts, and the decided 400/422/409 cases.

The real-clock halves (``--rate 50`` deadlines, ``--lease-ttl 3`` through a real server) are in
tests/test_protocol_corners_e2e.py; each decision is written down in docs/decisions.md ("Served runs").
"""

from __future__ import annotations

import json

import pytest
import trio
from server_helpers import served
from transports import transport

from warren_sim.http.agent_ws import refused_protocol
from warren_sim.protocol import case_hint
from warren_sim.runtime.leases import poll_wait


async def _started(api, **body):
    body.setdefault("controlled_agents", ["engineer-1"])
    body.setdefault("decision_deadline_s", 10_000)  # the batch waits for engineer-1: nothing new to poll for
    run = await api.create(**body)
    lease = await api.claim(run)
    status, env = await api.poll(run, lease)
    assert status == 200, env
    return run, lease, env


async def _claim_status(api, run: str) -> int:
    status, _ = await api.call("POST", f"/v1/runs/{run}/agents/engineer-1/claim")
    return status


# -- leases and long-polls -------------------------------------------------------------------------------------
async def test_a_parked_long_poll_holds_its_lease_and_returns_with_a_full_ttl(autojump_clock, tmp_path):
    """A 250 s poll at TTL 300: the 204 leaves the lease a full TTL (another client's claim at 400 s, past the 300 s a
    refresh at the poll's start gave, gets 409; still 409 at +299 s; expired at +301 s)."""
    async with served(tmp_path, lease_ttl=300, max_wait_s=1000) as api:
        run, lease, env = await _started(api)
        claims: list[int] = []

        async def stranger() -> None:
            await trio.sleep(400)
            claims.append(await _claim_status(api, run))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stranger)
            start = trio.current_time()
            status, body = await api.poll(run, lease, after=env["seq"], wait=250)
            assert status == 204, body
            assert trio.current_time() - start == pytest.approx(250, abs=1)
            returned = trio.current_time()
        assert claims == [409]
        await trio.sleep(returned + 299 - trio.current_time())
        assert await _claim_status(api, run) == 409
        await trio.sleep(2)  # a full TTL after the poll returned, unrefreshed: the lease expired only now
        status, problem = await api.call("GET", f"/v1/runs/{run}/agents/engineer-1/briefing?lease={lease}")
        assert status == 403 and "expired" in problem["detail"], problem


@pytest.mark.parametrize("route", ["single", "multi", "command"])
async def test_a_wait_is_capped_below_the_lease_ttl_whatever_max_wait_says(autojump_clock, tmp_path, route):
    """max_wait 1000 s over a 300 s TTL: every kind of long-poll ends at 270 s (0.9 x TTL) and the lease lives on."""
    async with served(tmp_path, lease_ttl=300, max_wait_s=1000) as api:
        run, lease, env = await _started(api)
        if route == "command":  # commands?wait=: the next envelope after an accepted command, long-polled
            run2 = await api.create(controlled_agents=["engineer-1", "courier-1"], decision_deadline_s=10_000)
            lease2 = await api.claim(run2)
            await api.claim(run2, "courier-1")  # claimed, never answering: engineer-1's next batch waits on it
            status, env2 = await api.poll(run2, lease2)
            run, lease = run2, lease2
        start = trio.current_time()
        if route == "single":
            status, body = await api.poll(run, lease, after=env["seq"], wait=1000)
            assert status == 204, body
        elif route == "multi":
            poll = {"leases": {"engineer-1": lease}, "after": {"engineer-1": env["seq"]}}
            status, body = await api.call("POST", f"/v1/runs/{run}/observations?wait=1000", poll)
            assert status == 204, body
        else:
            status, body = await api.call(
                "POST", f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}&wait=1000",
                {"command_id": "c", "observation_id": env2["observation_id"], "noop": True})
            assert status == 200 and body["status"] == "accepted" and body["next_observation"] is None, body
        assert trio.current_time() - start == pytest.approx(270, abs=1)
        status, _ = await api.call("GET", f"/v1/runs/{run}/agents/engineer-1/briefing?lease={lease}")
        assert status == 200


async def test_a_multi_agent_poll_holds_every_lease_it_waits_on(autojump_clock, tmp_path):
    """``POST /v1/runs/{run}/observations`` keeps each polled lease alive and refreshes it as it returns."""
    async with served(tmp_path, lease_ttl=300, max_wait_s=1000) as api:
        run, lease, env = await _started(api)
        poll = {"leases": {"engineer-1": lease}, "after": {"engineer-1": env["seq"]}}
        status, body = await api.call("POST", f"/v1/runs/{run}/observations?wait=250", poll)
        assert status == 204, body
        await trio.sleep(299)  # 549 s after the claim: long past the TTL, but the poll ended 299 s ago
        assert await _claim_status(api, run) == 409
        status, _ = await api.call("GET", f"/v1/runs/{run}/agents/engineer-1/briefing?lease={lease}")
        assert status == 200


@pytest.mark.parametrize("route", ["single", "multi"])
async def test_a_poll_whose_lease_was_released_meanwhile_answers_403_that_teaches(autojump_clock, tmp_path, route):
    """Released by its holder's other request while parked, the poll answers 403 (not 204, not an envelope) at once,
    and says how to get the agent back."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        replies: list[tuple[int, dict]] = []

        async def parked() -> None:
            if route == "single":
                replies.append(await api.poll(run, lease, after=env["seq"], wait=60))
            else:
                poll = {"leases": {"engineer-1": lease}, "after": {"engineer-1": env["seq"]}}
                replies.append(await api.call("POST", f"/v1/runs/{run}/observations?wait=60", poll))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(parked)
            await trio.sleep(10)
            status, _ = await api.call("POST", f"/v1/runs/{run}/agents/engineer-1/release?lease={lease}")
            assert status == 200
            released_at = trio.current_time()
        assert trio.current_time() - released_at < 1  # answered when the lease ended, not when the wait ran out
        [(status, problem)] = replies
        assert status == 403, problem
        assert "ended while this poll waited" in problem["detail"]
        assert f"POST /v1/runs/{run}/agents/engineer-1/claim" in problem["detail"]


def test_poll_wait_is_capped_at_nine_tenths_of_the_ttl() -> None:
    assert poll_wait(60, 300) == 60 and poll_wait(60, 3) == pytest.approx(2.7) and poll_wait(2.5, 3) == 2.5
    assert poll_wait(0, 3) == 0


# -- the journal and receipts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["http", "ws"])
async def test_non_accepted_verdicts_are_in_the_journal_before_their_receipt_leaves(autojump_clock, tmp_path, kind):
    """rejected, duplicate and stale verdicts are in ``GET .../journal`` (what was flushed) as their receipts arrive,
    while the batch still waits: no lag behind the receipts."""
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run = await api.create(controlled_agents=["engineer-1"], decision_deadline_s=10_000)
        status, claim = await agent.claim(run)
        lease = claim["lease"]
        status, env = await agent.poll(run, lease)
        oid = env["observation_id"]
        sent = [("r1", {"sleep_ms": -1}, "rejected"), ("a1", {"noop": True}, "accepted"),
                ("a1", {"noop": True}, "duplicate"), ("s1", {"noop": True}, "stale")]
        for cid, decision, verdict in sent:
            status, receipt = await agent.submit(run, lease, {"command_id": cid, "observation_id": oid, **decision})
            assert receipt["status"] == verdict, receipt
            if verdict == "accepted":
                continue  # written before its receipt too; shown to readers with its batch (docs/decisions.md)
            status, text = await _journal_text(api, run)
            verdicts = [(r["command_id"], r["status"]) for r in text if r["kind"] == "verdict"]
            assert verdicts[-1] == (cid, verdict), verdicts


async def _journal_text(api, run: str) -> tuple[int, list[dict]]:
    r = await api.client.get(f"/v1/runs/{run}/journal", headers={"X-Warren-Protocol": "warren-agent/0"})
    assert r.status_code == 200
    return r.status_code, [json.loads(line) for line in (await r.get_data(as_text=True)).splitlines() if line]


# -- decided refusals -----------------------------------------------------------------------------------------
async def test_sleep_ms_2_53_is_a_400_of_the_body_while_other_bad_sleeps_get_a_recorded_receipt(autojump_clock,
                                                                                              tmp_path):
    """2^53 is refused by the strict JSON reader (the body, any field: no receipt, nothing journaled); -1, 1.5 and
    "100" are readable JSON with a bad value: a ``rejected`` receipt, journaled. 2^53-1 is read and judged."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        oid = env["observation_id"]
        path = f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}"
        before = len(api.journal(run))
        raw = b'{"command_id": "big", "observation_id": "%s", "sleep_ms": 9007199254740992}' % oid.encode()
        status, problem = await api.call("POST", path, raw=raw)
        assert status == 400 and "out of range" in problem["detail"] and "9007199254740991" in problem["detail"]
        assert len(api.journal(run)) == before
        status, _ = await api.call("GET", f"/v1/runs/{run}/agents/engineer-1/commands/big?lease={lease}")
        assert status == 404  # never judged: no receipt to fetch
        for i, bad in enumerate([-1, 1.5, "100"]):
            status, receipt = await api.submit(run, lease, {"command_id": f"bad{i}", "observation_id": oid,
                                                            "sleep_ms": bad})
            assert status == 200 and receipt["status"] == "rejected" and "sleep_ms" in receipt["detail"]
        status, receipt = await api.submit(run, lease, {"command_id": "max", "observation_id": oid,
                                                        "sleep_ms": 2**53 - 1})
        assert status == 200 and receipt["status"] == "accepted"


@pytest.mark.parametrize("kind", ["http", "ws"])
async def test_an_empty_command_id_and_a_non_object_command_are_422_and_change_nothing(autojump_clock, tmp_path, kind):
    """``""`` cannot be a command's identity (every later command would be its duplicate) and an array is no
    command: both are readable JSON that is not a command, so 422 without a receipt, on both transports."""
    async with served(tmp_path) as api, transport(kind, api) as agent:
        run = await api.create(controlled_agents=["engineer-1"], decision_deadline_s=10_000)
        status, claim = await agent.claim(run)
        lease = claim["lease"]
        status, env = await agent.poll(run, lease)
        before = len(api.journal(run))
        status, problem = await agent.submit(run, lease, {"command_id": "", "observation_id": env["observation_id"],
                                                          "noop": True})
        assert status == 422 and "command_id must not be empty" in problem["detail"], problem
        status, problem = await agent.submit(run, lease, [{"command_id": "c", "observation_id": "engineer-1#0"}])
        assert status == 422 and "must be a JSON object, got an array" in problem["detail"], problem
        assert len(api.journal(run)) == before


async def test_a_wrong_shape_elsewhere_is_400_and_unreadable_json_is_400_everywhere(autojump_clock, tmp_path):
    """The 422 is the commands route's (a command the server cannot attribute); a run creation or a claim body of the
    wrong shape is 400, and a body that is not JSON at all is 400 on every route."""
    async with served(tmp_path) as api:
        run, lease, env = await _started(api)
        status, problem = await api.call("POST", "/v1/runs?scenario=bridge_repair", [1, 2])
        assert status == 400, problem
        status, problem = await api.call("POST", f"/v1/runs/{run}/claim", ["engineer-1"])
        assert status == 400, problem
        status, problem = await api.call("POST", f"/v1/runs/{run}/agents/engineer-1/commands?lease={lease}",
                                         raw=b"[1, 2")
        assert status == 400, problem


async def test_the_protocol_header_value_is_exact_and_a_case_slip_is_named(autojump_clock, tmp_path):
    """The header's name is case-insensitive (HTTP); its value is compared exactly, case included: 409 that says so."""
    async with served(tmp_path) as api:
        status, _ = await api.call("GET", "/v1/runs", headers={"x-warren-protocol": "warren-agent/0"})
        assert status == 200
        status, problem = await api.call("GET", "/v1/runs", headers={"X-Warren-Protocol": "Warren-Agent/0"})
        assert status == 409
        assert "compared exactly, case included" in problem["detail"]
        assert "send X-Warren-Protocol: warren-agent/0" in problem["detail"]
        status, problem = await api.call("GET", "/v1/runs", headers={"X-Warren-Protocol": "warren-agent/1"})
        assert status == 409 and "case included" not in problem["detail"]  # the hint only for a case slip
        run = await api.create(controlled_agents=["engineer-1"])
        status, problem = await api.call("POST", f"/v1/runs/{run}/agents/engineer-1/claim?protocol=WARREN-AGENT/0")
        assert status == 409 and "case included" in problem["detail"]


def test_case_hint_only_for_a_case_slip() -> None:
    assert case_hint("WARREN-agent/0") != "" and case_hint(" warren-AGENT/0 ") != ""
    assert case_hint("warren-agent/0") == "" and case_hint("warren-agent/1") == "" and case_hint("") == ""


def test_the_websocket_handshake_names_a_case_slip_within_a_close_reason() -> None:
    """The WebSocket binding refuses the same values (close 1002); its reason, hint included, fits the 123 bytes a
    close frame's reason may hold."""
    why = refused_protocol({"X-Warren-Protocol": "Warren-Agent/0"})
    assert why is not None and "case included" in why and len(why.encode()) <= 123
    assert refused_protocol({"X-Warren-Protocol": "warren-agent/0"}) is None
