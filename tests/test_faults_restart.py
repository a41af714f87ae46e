"""The ``restart`` and ``expire`` kinds against a real server: every live run dropped from memory and rebuilt from
its journal while the SDK's requests are in flight, leases ended under it; the SDK rides them out (claiming again
after a 403, retrying a 503, reconnecting after 1012), the world is the headless one and the journal replays."""

from __future__ import annotations

from typing import Any

import pytest
from test_faults_wire import AGENTS, _engine, _headless, drive_http, drive_ws

from warren_sim.client import AgentClient
from warren_sim.testing import assert_replays

SPEC = "restart=0.03,expire=0.05,lost_reply=0.1,reset=0.05"


def _commands_per_observation(journal: list[dict[str, Any]]) -> dict[str, int]:
    accepted: dict[str, int] = {}
    for r in journal:
        if r["kind"] == "verdict" and r["status"] == "accepted":
            accepted[r["observation_id"]] = accepted.get(r["observation_id"], 0) + 1
    return accepted


@pytest.mark.parametrize("seed", range(2))
def test_the_sdk_rides_out_restarts_and_lost_leases_over_http(warren_server, seed):
    run = warren_server.create_run("bridge_repair", seed, AGENTS, faults={"spec": SPEC, "seed": seed})
    drive_http(warren_server.url, run.id, seed)
    run.wait_status("completed", 60)
    journal = run.journal()
    assert _engine(journal) == _engine(_headless(seed))
    assert max(_commands_per_observation(journal).values()) == 1  # no observation acted on twice
    met = {f["fault"] for f in run.faults()}
    assert {"restart", "expire"} <= met, met
    assert any(r["kind"] == "restart" for r in journal)  # the rebuilt runs journaled their restarts
    assert_replays(journal)


@pytest.mark.parametrize("seed", range(2))
def test_the_websocket_sdk_rides_out_restarts_and_lost_leases(warren_server, seed):
    run = warren_server.create_run("bridge_repair", seed, AGENTS, faults={"spec": SPEC, "seed": seed})
    drive_ws(warren_server.url, run.id, seed)
    run.wait_status("completed", 60)
    journal = run.journal()
    assert _engine(journal) == _engine(_headless(seed))
    assert max(_commands_per_observation(journal).values()) == 1
    assert {"restart", "expire"} <= {f["fault"] for f in run.faults()}
    assert_replays(journal)


def test_every_request_restarting_every_run_is_still_served_and_counted_in_the_run_view(warren_server):
    run = warren_server.create_run("bridge_repair", 1, ["engineer-1"], faults={"spec": "restart=1", "seed": 0})
    with AgentClient.open(warren_server.url, timeout=10.0) as client:
        with client.claim(run.id, "engineer-1") as agent:  # every request restarts every run: still served
            agent.briefing()
            view = client.get_run(run.id)
    assert view.status in ("running", "created")
    journal = run.journal()
    assert sum(1 for r in journal if r["kind"] == "restart") >= 2  # each rebuilt run journaled its restart
    met = run.faults()
    assert {f["fault"] for f in met} == {"restart"}
    assert view.faults == {"restart": len(met) - 1}  # the view counts by kind (the get_run itself meets none)


def test_restart_needs_a_data_directory(tmp_path):
    import trio

    from warren_sim.protocol.models import FaultsConfig, RunCreate
    from warren_sim.runtime.clock import WallMap
    from warren_sim.runtime.errors import RunError
    from warren_sim.runtime.manager import RunManager, ServerConfig

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            manager = RunManager(ServerConfig(data_dir=None), nursery, WallMap(1.0))
            body = RunCreate(faults=FaultsConfig("restart=0.1", 1))
            with pytest.raises(RunError, match="restart restores every run from its journal file") as err:
                manager.create("bridge_repair", 1, body)
            assert err.value.status == 400 and manager.runs == {}

    trio.run(main)
