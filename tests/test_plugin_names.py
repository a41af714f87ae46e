"""The pytest plugin's run handles use the names the rest of WARREN uses (issue 33, item 10).

``run.run_id`` as on the wire, in the SDK and the journal (``run.id`` stays, the same value, for tests written
before); ``run.view()`` is the server's JSON dict, with the same fields as the SDK's typed ``RunView``.
"""

from __future__ import annotations

import attrs
import trio

from warren_sim.testing.inprocess import AppRun, open_in_process


async def test_app_run_has_run_id_and_id_as_its_alias(autojump_clock) -> None:
    async with open_in_process() as warren:
        run = await warren.create_run("bridge_repair", seed=3)
        assert isinstance(run, AppRun)
        assert run.run_id == run.id == str(run) == "run-1"
        assert [f.name for f in attrs.fields(AppRun)][:2] == ["warren", "run_id"]
        view = await run.view()
        assert isinstance(view, dict) and view["run_id"] == run.run_id
        typed = await warren.client.get_run(run.run_id)
        assert typed.run_id == view["run_id"] and typed.status == view["status"] and typed.seed == view["seed"]
        await run.cancel()
        await trio.sleep(0)


def test_served_run_has_run_id_and_id_as_its_alias(warren_server) -> None:
    run = warren_server.create_run("bridge_repair", seed=3)
    assert run.run_id == run.id == str(run)
    assert run.url.endswith(f"/v1/runs/{run.run_id}") and run.view()["run_id"] == run.run_id
    run.cancel()

