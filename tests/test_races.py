"""Races on one command id: concurrent submits in-process under the autojump clock (trio reorders tasks freely)."""

from __future__ import annotations

import trio
from server_helpers import served
from tiers import sizes

RACERS = 16


@sizes(quick=50, ci=1_000, soak=5_000, argname="rounds")
async def test_16_concurrent_submits_of_one_command_id_accept_exactly_once(autojump_clock, tmp_path, rounds):
    """1,000 rounds (50 in the fast tier, 5,000 with WARREN_FULL_TESTS=1): 16 concurrent submits of one command: exactly one accepted, 15 identical duplicate receipts."""
    async with served(tmp_path) as api:
        # engineer-1 races; medic-1 holds the batch open (its observation stays unanswered during the race), so no
        # adjudication can land mid-race and every duplicate carries the same outcome ("pending").
        run = await api.create(controlled_agents=["engineer-1", "medic-1"], npc_policy="none")
        racer, holder = await api.claim(run, "engineer-1"), await api.claim(run, "medic-1")
        seen = {"engineer-1": -1, "medic-1": -1}
        for round_ in range(rounds):
            envs = {}
            for agent, lease in (("engineer-1", racer), ("medic-1", holder)):
                status, envs[agent] = await api.poll(run, lease, after=seen[agent], wait=60, agent=agent)
                assert status == 200, (round_, agent, status)
                seen[agent] = envs[agent]["seq"]
            assert envs["engineer-1"]["sim_time_ms"] == envs["medic-1"]["sim_time_ms"]  # one batch
            body = {"command_id": f"race-{round_}", "observation_id": envs["engineer-1"]["observation_id"],
                    "sleep_ms": 1}
            receipts: list[dict] = []

            async def submit(body=body, receipts=receipts) -> None:
                status, r = await api.submit(run, racer, body, agent="engineer-1")
                assert status == 200
                receipts.append(r)

            async with trio.open_nursery() as nursery:
                for _ in range(RACERS):
                    nursery.start_soon(submit)
            accepted = [r for r in receipts if r["status"] == "accepted"]
            duplicates = [r for r in receipts if r["status"] == "duplicate"]
            assert len(accepted) == 1 and len(duplicates) == RACERS - 1, (round_, receipts)
            assert all(d == duplicates[0] for d in duplicates), (round_, duplicates)
            assert {k: v for k, v in duplicates[0].items() if k != "status"} == \
                {k: v for k, v in accepted[0].items() if k != "status"}
            status, r = await api.submit(run, holder, {"command_id": f"hold-{round_}",
                                                       "observation_id": envs["medic-1"]["observation_id"],
                                                       "sleep_ms": 1}, agent="medic-1")
            assert r["status"] == "accepted"
        verdicts = [x for x in api.journal(run) if x["kind"] == "verdict" and x["agent"] == "engineer-1"]
        assert len(verdicts) == RACERS * (round_ + 1)
        per_command: dict[str, list[str]] = {}
        for v in verdicts:
            per_command.setdefault(v["command_id"], []).append(v["status"])
        assert all(sorted(s) == ["accepted"] + ["duplicate"] * (RACERS - 1) for s in per_command.values())
        assert (await api.run_view(run))["status"] == "running"
