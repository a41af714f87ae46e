"""The run manager keeps a loaded scenario for the next run of the same name and parameters (manager._load),
and loads it again once its files change on disk."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from server_helpers import served

REPO = Path(__file__).resolve().parents[1]


async def test_runs_share_a_loaded_scenario_until_its_files_change(tmp_path: Path, monkeypatch) -> None:
    scenarios = tmp_path / "scenarios"
    shutil.copytree(REPO / "bench" / "scenarios" / "echo", scenarios / "echo")
    monkeypatch.setenv("WARREN_SCENARIOS", str(scenarios))
    async with served(tmp_path) as api:
        status, a = await api.call("POST", "/v1/runs?scenario=echo&seed=1", {"controlled_agents": ["echo-1"], "params": {"agents": 2, "steps": 3}})
        status, b = await api.call("POST", "/v1/runs?scenario=echo&seed=2", {"controlled_agents": ["echo-1"], "params": {"agents": 2, "steps": 3}})
        assert status == 201
        assert len(api.manager._loaded) == 1  # one load for both runs
        run_a, run_b = api.manager.runs[a["run_id"]], api.manager.runs[b["run_id"]]
        assert run_a.sim.spec is run_b.sim.spec and run_a.sim.world is not run_b.sim.world  # each its own world
        await api.call("POST", "/v1/runs?scenario=echo&seed=1", {"controlled_agents": ["echo-1"], "params": {"agents": 3, "steps": 3}})
        assert len(api.manager._loaded) == 2  # other parameters: another load
        toml = scenarios / "echo" / "scenario.toml"
        toml.write_text(toml.read_text().replace('title = "The echo chamber"', 'title = "The new chamber"'))
        st = toml.stat()
        os.utime(toml, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a later modification time, whatever the fs
        status, c = await api.call("POST", "/v1/runs?scenario=echo&seed=3", {"controlled_agents": ["echo-1"], "params": {"agents": 2, "steps": 3}})
        assert status == 201
        assert api.manager.runs[c["run_id"]].sim.spec.title == "The new chamber"
