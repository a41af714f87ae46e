"""100 injected run-task failures in one server (in-process, autojump clock; latencies in real time)."""

from __future__ import annotations

import re
from pathlib import Path

import trio
from reliability_helpers import TEST_SCENARIOS
from server_helpers import served
from tiers import sizes

from warren_sim.runtime.clock import wall_seconds


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


@sizes(quick=10, ci=100, argname="n_crashes")
async def test_100_crashes_each_reach_crashed_fast_release_waiters_and_spare_other_runs(autojump_clock, tmp_path,
                                                                                        monkeypatch, n_crashes):
    """100 crashes (10 fast): each crashed run is crashed, its long-poll gets 410 within p99 < 100 ms real; a
    healthy run goes on."""
    monkeypatch.setenv("WARREN_SCENARIOS", str(TEST_SCENARIOS))
    async with served(tmp_path, max_runs=n_crashes + 8) as api:
        healthy = await api.create(controlled_agents=["engineer-1"], pace=1)
        hlease = await api.claim(healthy)
        latencies: dict[str, float] = {}
        healthy_accepted = 0
        crashes_done = trio.Event()

        async def crash_one(i: int) -> None:
            # the buggy NPC raises at sim t=2 s; pace makes that happen at 0.5 + 0.6 i clock seconds, one run
            # at a time, while this run's controlled agent is waiting in a long-poll
            crash_at = 0.5 + 0.6 * i
            run = await api.create("crash_timed", i, controlled_agents=["walker-1"], pace=2 / crash_at)
            lease = await api.claim(run, "walker-1")
            status, env = await api.poll(run, lease, wait=60, agent="walker-1")
            assert status == 200 and env["seq"] == 0
            status, r = await api.submit(run, lease, {"command_id": "zz", "observation_id": env["observation_id"],
                                                      "sleep_ms": 10**9}, agent="walker-1")
            assert r["status"] == "accepted"
            while True:
                status, p = await api.poll(run, lease, after=0, wait=60, agent="walker-1")
                if status != 204:
                    break
            answered = wall_seconds()
            assert status == 410 and "crashed" in p["detail"] and "injected crash" in p["detail"], (status, p)
            view = await api.run_view(run)
            assert view["status"] == "crashed" and view["result"]["status"] == "crashed"
            raised = float(re.search(r"wall=([0-9.]+)", view["error"]).group(1))
            latencies[run] = answered - raised
            status, p = await api.call("POST", f"/v1/runs/{run}/agents/walker-1/claim")
            assert status == 410 and "crashed" in p["detail"]

        async def keep_healthy_busy() -> None:
            nonlocal healthy_accepted
            after = -1
            while not crashes_done.is_set():
                with trio.move_on_after(1):
                    status, env = await api.poll(healthy, hlease, after=after, wait=60)
                    assert status == 200
                    after = env["seq"]
                    status, r = await api.submit(healthy, hlease, {"command_id": f"h{after}",
                                                                   "observation_id": env["observation_id"],
                                                                   "sleep_ms": 250})
                    assert r["status"] == "accepted"
                    healthy_accepted += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(keep_healthy_busy)
            async with trio.open_nursery() as crashes:
                for i in range(n_crashes):
                    crashes.start_soon(crash_one, i)
            crashes_done.set()
        assert len(latencies) == n_crashes
        runs = api.manager.runs
        assert sum(run.status == "crashed" for run in runs.values()) == n_crashes
        assert runs[healthy].status == "running" and healthy_accepted >= 2 * n_crashes  # it kept deciding throughout
        for run_id in latencies:  # every journal ends with the crash and the terminal status, and is on disk
            lines = (tmp_path / "data" / f"{run_id}.jsonl").read_text().splitlines()
            assert '"kind":"crash"' in lines[-3] + lines[-2] + lines[-1] and '"status":"crashed"' in lines[-1]
        late = await api.create(controlled_agents=[])  # the manager still starts runs
        with trio.fail_after(3600):
            while (await api.run_view(late))["status"] == "running":
                await trio.sleep(1)
        assert (await api.run_view(late))["status"] == "completed"
        values = list(latencies.values())
        p50, p99 = percentile(values, 50), percentile(values, 99)
        print(f"\ncrash -> 410 on a waiting long-poll, real time over {n_crashes} crashes: "
              f"p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, max {max(values) * 1000:.2f} ms")
        assert p99 < 0.100, sorted(values)[-5:]


def test_percentile_is_nearest_rank():
    """percentile() picks the nearest-rank value: p99 of 1..100 is 99, p50 is 50."""
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 99) == 99.0 and percentile(values, 50) == 50.0 and percentile([3.0], 99) == 3.0


def test_crash_scenario_is_where_the_tests_expect_it():
    """The crash scenarios live under tests/scenarios (found through WARREN_SCENARIOS)."""
    assert (Path(TEST_SCENARIOS) / "crash_timed" / "solution.py").is_file()
