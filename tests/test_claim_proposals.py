"""A fresh claim that proposes its token (``proposed_lease``, a WARREN extension) can be sent again to the same
effect: its lost reply (a reset, a restart) no longer leaves the agent held by a token its client never saw.

Against a real server on loopback, over HTTP and the WebSocket, with the SDKs as users run them."""

from __future__ import annotations

import httpx
import pytest
import trio

from warren_sim.client import AgentClient, AsyncWsAgentClient, RetryPolicy
from warren_sim.client._core import new_proposal
from warren_sim.runtime.faults import FaultPlan, parse_faults

AGENTS = ("courier-1", "engineer-1", "medic-1")


def _claim(http: httpx.Client, run_id: str, agent_id: str, **params: str) -> httpx.Response:
    return http.post(f"/v1/runs/{run_id}/agents/{agent_id}/claim", params=params)


def test_a_proposed_token_becomes_the_lease_and_the_same_claim_again_resumes_it(warren_server):
    run = warren_server.create_run("bridge_repair", 1, AGENTS)
    mine, theirs = new_proposal(), new_proposal()
    with httpx.Client(base_url=warren_server.url, timeout=10.0) as http:
        first = _claim(http, run.id, "engineer-1", proposed_lease=mine)
        assert first.status_code == 200 and first.json()["lease"] == mine
        again = _claim(http, run.id, "engineer-1", proposed_lease=mine)  # a retry whose first answer was lost
        assert again.status_code == 200 and again.json()["lease"] == mine
        assert http.get(f"/v1/runs/{run.id}/agents/engineer-1/briefing", params={"lease": mine}).status_code == 200
        stolen = _claim(http, run.id, "engineer-1", proposed_lease=theirs)  # another client's proposal: refused
        assert stolen.status_code == 409, stolen.text
        # a proposal that could not be a token: 400, teaching, and nothing is held
        short = _claim(http, run.id, "medic-1", proposed_lease="abc")
        assert short.status_code == 400
        assert "proposed_lease must be 32 to 128 characters" in short.json()["detail"]
        assert _claim(http, run.id, "medic-1").status_code == 200  # nobody held medic-1
    claims = [r for r in run.journal() if r["kind"] == "claim" and r["agent"] == "engineer-1"]
    assert len(claims) == 1  # the claim again resumed the lease: one claim in the journal


def test_the_same_claim_after_a_restart_resumes_the_lease_it_was_granted(warren_server):
    # every request restarts every run first (the lease comes back from the lease file, as a digest)
    run = warren_server.create_run("bridge_repair", 1, AGENTS, faults={"spec": "restart=1", "seed": 0})
    proposal = new_proposal()
    with httpx.Client(base_url=warren_server.url, timeout=10.0) as http:
        assert _claim(http, run.id, "engineer-1", proposed_lease=proposal).json()["lease"] == proposal
        again = _claim(http, run.id, "engineer-1", proposed_lease=proposal)
        assert again.status_code == 200 and again.json()["lease"] == proposal
        other = _claim(http, run.id, "engineer-1")  # without the token: held, so 409 as warren-agent/0 says
        assert other.status_code == 409
    assert sum(1 for r in run.journal() if r["kind"] == "restart") >= 3


def test_a_fresh_claim_without_a_proposal_never_loses_its_reply(warren_server):
    run = warren_server.create_run("bridge_repair", 1, AGENTS, faults={"spec": "lost_reply=1", "seed": 0})
    with httpx.Client(base_url=warren_server.url, timeout=10.0) as http:
        assert _claim(http, run.id, "engineer-1").status_code == 200  # its client could not learn the token
        with pytest.raises(httpx.TransportError):  # this one can be sent again: its reply may be lost
            _claim(http, run.id, "medic-1", proposed_lease=new_proposal())
    met = [(f["agent_id"], f["request"], f["fault"]) for f in run.faults()]
    assert met == [("medic-1", "claim", "lost_reply")]


def _seed_losing_the_first_claim(run_id: str, agent_id: str, spec: str) -> int | None:
    """A fault seed under which ``agent_id``'s claim #0 in ``run_id`` loses its reply and claim #1 meets nothing."""
    for seed in range(200):
        plan = FaultPlan(parse_faults(spec), seed, run_id)
        first, second = plan.decide(agent_id, "claim"), plan.decide(agent_id, "claim")
        if first is not None and first.fault == "lost_reply" and second is None:
            return seed
    return None


def _run_losing_the_first_claim(warren_server, spec: str):
    """A run (fault seed chosen for its id) where engineer-1's first claim loses its reply."""
    for _ in range(20):
        probe = warren_server.create_run("bridge_repair", 1, AGENTS)
        probe.cancel()
        # run ids are handed out in order: the next run's id is the probe's, one up
        prefix, _, number = probe.id.rpartition("-")
        next_id = f"{prefix}-{int(number) + 1}"
        seed = _seed_losing_the_first_claim(next_id, "engineer-1", spec)
        if seed is None:
            continue
        run = warren_server.create_run("bridge_repair", 1, AGENTS, faults={"spec": spec, "seed": seed})
        if run.id == next_id:
            return run
        run.cancel()
    raise AssertionError("no run id and seed found whose first claim loses its reply")


SPEC = "lost_reply=0.5"


def _claims(run) -> int:
    return sum(1 for r in run.journal() if r["kind"] == "claim" and r["agent"] == "engineer-1")


def test_the_blocking_sdk_rides_out_a_lost_reply_to_its_fresh_claim(warren_server):
    run = _run_losing_the_first_claim(warren_server, SPEC)
    with AgentClient.open(warren_server.url, timeout=10.0, retry=RetryPolicy(attempts=20, backoff=0.001)) as client:
        with client.claim(run.id, "engineer-1") as agent:  # the first answer is lost; the retry resumes its lease
            assert agent.briefing()["agent_id"] == "engineer-1"
            assert not agent.resumed  # a fresh claim, as far as its caller can tell
            assert _claims(run) == 1  # the retry resumed the lease the lost answer granted
    first = run.faults("engineer-1")[0]
    assert (first["request"], first["index"], first["fault"]) == ("claim", 0, "lost_reply")


def test_the_websocket_sdk_rides_out_a_lost_reply_to_its_fresh_claim(warren_server):
    run = _run_losing_the_first_claim(warren_server, SPEC)

    async def main() -> None:
        async with AsyncWsAgentClient.open(warren_server.url, timeout=10.0,
                                           retry=RetryPolicy(attempts=20, backoff=0.001)) as client:
            async with client.claim(run.id, "engineer-1") as agent:  # the socket closes instead of the answer
                assert (await agent.briefing())["agent_id"] == "engineer-1"
                # the retry on the next connection resumed the lease the lost answer granted
                assert await trio.to_thread.run_sync(_claims, run) == 1
            assert client.connections >= 2  # the lost reply closed the first connection

    trio.run(main)
    first = run.faults("engineer-1")[0]
    assert (first["request"], first["index"], first["fault"]) == ("claim", 0, "lost_reply")
