"""The run manager keeps a loaded scenario for the next run of the same name and parameters (manager._load),
and loads it again once its files change on disk. The kept scenarios are the process's, shared by managers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from server_helpers import served

REPO = Path(__file__).resolve().parents[1]


def _kept(api, scenarios: Path) -> list:
    """The kept loads of this test's own scenario directory (other tests of the process keep theirs)."""
    return [key for key in api.manager._loaded if key[0].startswith(str(scenarios))]


async def test_runs_share_a_loaded_scenario_until_its_files_change(tmp_path: Path, monkeypatch) -> None:
    scenarios = tmp_path / "scenarios"
    shutil.copytree(REPO / "bench" / "scenarios" / "echo", scenarios / "echo")
    monkeypatch.setenv("WARREN_SCENARIOS", str(scenarios))
    async with served(tmp_path) as api:
        status, a = await api.call("POST", "/v1/runs?scenario=echo&seed=1", {"controlled_agents": ["echo-1"], "params": {"agents": 2, "steps": 3}})
        status, b = await api.call("POST", "/v1/runs?scenario=echo&seed=2", {"controlled_agents": ["echo-1"], "params": {"agents": 2, "steps": 3}})
        assert status == 201
        assert len(_kept(api, scenarios)) == 1  # one load for both runs
        run_a, run_b = api.manager.runs[a["run_id"]], api.manager.runs[b["run_id"]]
        assert run_a.sim.spec is run_b.sim.spec and run_a.sim.world is not run_b.sim.world  # each its own world
        await api.call("POST", "/v1/runs?scenario=echo&seed=1", {"controlled_agents": ["echo-1"], "params": {"agents": 3, "steps": 3}})
        assert len(_kept(api, scenarios)) == 2  # other parameters: another load
        toml = scenarios / "echo" / "scenario.toml"
        toml.write_text(toml.read_text().replace('title = "The echo chamber"', 'title = "The new chamber"'))
        st = toml.stat()
        os.utime(toml, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a later modification time, whatever the fs
        status, c = await api.call("POST", "/v1/runs?scenario=echo&seed=3", {"controlled_agents": ["echo-1"], "params": {"agents": 2, "steps": 3}})
        assert status == 201
        assert api.manager.runs[c["run_id"]].sim.spec.title == "The new chamber"


async def test_a_second_app_of_the_process_reuses_the_loaded_scenario(tmp_path: Path, monkeypatch) -> None:
    scenarios = tmp_path / "scenarios"
    shutil.copytree(REPO / "bench" / "scenarios" / "echo", scenarios / "echo")
    monkeypatch.setenv("WARREN_SCENARIOS", str(scenarios))
    body = {"controlled_agents": ["echo-1"], "params": {"agents": 2, "steps": 3}}
    specs = []
    for n in range(2):  # two apps, two managers, one after the other (as two tests are)
        async with served(tmp_path / f"app{n}") as api:
            status, run = await api.call("POST", "/v1/runs?scenario=echo&seed=1", body)
            assert status == 201
            specs.append(api.manager.runs[run["run_id"]].sim.spec)
            assert len(_kept(api, scenarios)) == 1
    assert specs[0] is specs[1]  # loaded once, by the first app
